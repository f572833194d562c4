"""The body of a ZooKeeper multi request of kazoo's ops, byte for byte what kazoo's `Transaction` sends.

The bridge encodes its one multi while the log fsyncs; kazoo's per-op serializers and byte joins took a
third of that window for a CreateTopics. Jute's rules as kazoo applies them: a string is its UTF-8 length
then bytes, an empty or absent one `-1`; a buffer likewise, but only `None` is `-1`. Op codes and jute come
from `migrate.zk.protocol`.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from kazoo.security import ACL

from migrate.errors import InvalidRequestError
from migrate.zk.protocol import INT, OP_CHECK, OP_CREATE, OP_DELETE, OP_SET_DATA, jute_buffer, jute_string

_HEADER = struct.Struct(">i?i")
_END = _HEADER.pack(-1, True, -1)
_HEADERS = {code: _HEADER.pack(code, False, -1) for code in (OP_CREATE, OP_DELETE, OP_SET_DATA, OP_CHECK)}


def kazoo_string(text: str | None) -> bytes:
    """A jute string as kazoo writes it: an empty one is `-1` too (kazoo writes it as null)."""
    return jute_string(text or None)


@lru_cache(maxsize=64)
def jute_acl_list(acl: tuple[ACL, ...]) -> bytes:
    """A znode's ACL list (one per path policy: the same few are asked for on every create)."""
    parts = [INT.pack(len(acl))]
    for entry in acl:
        parts += (INT.pack(entry.perms), kazoo_string(entry.id.scheme), kazoo_string(entry.id.id))
    return b"".join(parts)


def encode_multi(ops: Sequence[Any]) -> bytes:
    """`Transaction(ops).serialize()` for kazoo's Create, SetData, Delete and CheckVersion ops."""
    parts: list[bytes] = []
    for op in ops:
        header = _HEADERS.get(op.type)
        if header is None:
            raise InvalidRequestError(f"{type(op).__name__} (op code {op.type}) cannot go in a multi")
        parts += (header, kazoo_string(op.path))
        if op.type == OP_CREATE:
            parts += (jute_buffer(op.data), jute_acl_list(tuple(op.acl)), INT.pack(op.flags))
        elif op.type == OP_SET_DATA:
            parts += (jute_buffer(op.data), INT.pack(op.version))
        else:  # Delete and CheckVersion: a version after the path
            parts.append(INT.pack(op.version))
    parts.append(_END)
    return b"".join(parts)
