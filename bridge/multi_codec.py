"""ZooKeeper multi requests encoded straight from our requests, byte for byte what kazoo's `Transaction` sends.

The bridge encodes its one multi while the log fsyncs; kazoo's per-op namedtuples and byte joins took a
third of that window for a CreateTopics. Jute's rules as kazoo applies them: a string is its UTF-8 length
then bytes, an empty or absent one `-1`; a buffer likewise, but only `None` is `-1`.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from functools import lru_cache

from kazoo.security import ACL

CREATE, DELETE, SET_DATA, CHECK = 1, 2, 5, 13
"""ZooKeeper's op codes of the requests a multi carries (kazoo's Create, Delete, SetData, CheckVersion)."""

_INT = struct.Struct(">i")
_HEADER = struct.Struct(">i?i")
_END = _HEADER.pack(-1, True, -1)
_ABSENT = _INT.pack(-1)
_HEADERS = {code: _HEADER.pack(code, False, -1) for code in (CREATE, DELETE, SET_DATA, CHECK)}


def jute_string(text: str | None) -> bytes:
    """A jute string as kazoo writes it (empty and None alike are `-1`)."""
    if not text:
        return _ABSENT
    raw = text.encode("utf-8")
    return _INT.pack(len(raw)) + raw


def jute_buffer(data: bytes | None) -> bytes:
    return _ABSENT if data is None else _INT.pack(len(data)) + data


@lru_cache(maxsize=64)
def jute_acl_list(acl: tuple[ACL, ...]) -> bytes:
    """A znode's ACL list (one per path policy: the same few are asked for on every create)."""
    parts = [_INT.pack(len(acl))]
    for entry in acl:
        parts += (_INT.pack(entry.perms), jute_string(entry.id.scheme), jute_string(entry.id.id))
    return b"".join(parts)


class MultiEncoder:
    """Appends ops to one multi request's body; `finish()` gives the bytes."""

    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def create(self, path: str, data: bytes | None, acl: Sequence[ACL], flags: int) -> None:
        self._parts += (
            _HEADERS[CREATE],
            jute_string(path),
            jute_buffer(data),
            jute_acl_list(tuple(acl)),
            _INT.pack(flags),
        )

    def set_data(self, path: str, data: bytes | None, version: int) -> None:
        self._parts += (_HEADERS[SET_DATA], jute_string(path), jute_buffer(data), _INT.pack(version))

    def delete(self, path: str, version: int) -> None:
        self._parts += (_HEADERS[DELETE], jute_string(path), _INT.pack(version))

    def check(self, path: str, version: int) -> None:
        self._parts += (_HEADERS[CHECK], jute_string(path), _INT.pack(version))

    def finish(self) -> bytes:
        return b"".join(self._parts) + _END
