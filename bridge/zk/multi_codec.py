"""The body of a ZooKeeper multi request of kazoo's ops, byte for byte what kazoo's `Transaction` sends.

The bridge encodes its one multi while the log fsyncs; kazoo's per-op serializers and byte joins took a
third of that window for a CreateTopics. Jute's rules as kazoo applies them: a string is its UTF-8 length
then bytes, an empty or absent one `-1`; a buffer likewise, but only `None` is `-1`.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from kazoo.security import ACL

from migrate.errors import InvalidRequestError

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


def encode_multi(ops: Sequence[Any]) -> bytes:
    """`Transaction(ops).serialize()` for kazoo's Create, SetData, Delete and CheckVersion ops."""
    parts: list[bytes] = []
    for op in ops:
        header = _HEADERS.get(op.type)
        if header is None:
            raise InvalidRequestError(f"{type(op).__name__} (op code {op.type}) cannot go in a multi")
        parts += (header, jute_string(op.path))
        if op.type == CREATE:
            parts += (jute_buffer(op.data), jute_acl_list(tuple(op.acl)), _INT.pack(op.flags))
        elif op.type == SET_DATA:
            parts += (jute_buffer(op.data), _INT.pack(op.version))
        else:  # Delete and CheckVersion: a version after the path
            parts.append(_INT.pack(op.version))
    parts.append(_END)
    return b"".join(parts)
