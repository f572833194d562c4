"""ZooKeeper's DataTree digests (DigestCalculator version 2): per node and per tree."""

from __future__ import annotations

import binascii
import operator
import struct
from itertools import starmap

from migrate.zk.files.names import _U64, SYSTEM_ROOT
from migrate.zk.tree import Stat, ZNode, ZTree

_node_stat = operator.attrgetter("stat")
_node_data = operator.attrgetter("data")
_DIGEST_FIELDS = operator.attrgetter(
    "czxid", "mzxid", "pzxid", "ctime", "mtime", "version", "cversion", "aversion", "ephemeral_owner"
)
# czxid, mzxid, pzxid, ctime, mtime, version, cversion, aversion, ephemeralOwner (DigestCalculator order)
_DIGEST_BLOB = struct.Struct(">qqqqqiiiq")
# The same CRC-32 as zlib.crc32; CPython's zlib module takes about twice as long on short inputs.
_crc32 = binascii.crc32


def node_digest(path: str, data: bytes | None, stat: Stat) -> int:
    """ZooKeeper's per-node digest (DigestCalculator, version 2): CRC32 of path, data and 60 stat bytes.

    `stat` must hold the stored values (a tree read with `client_view=False`).
    """
    return _digest(path, data, stat.czxid, stat.mzxid, stat.pzxid, stat.ctime, stat.mtime, stat.version,
                   stat.cversion, stat.aversion, stat.ephemeral_owner)  # fmt: skip


def _digest(path: str, data: bytes | None, *stat_fields: int) -> int:
    if path.startswith(SYSTEM_ROOT + "/"):
        return 0
    crc = _crc32(b"" if path == "/" else path.encode("utf-8"))
    if data:
        crc = _crc32(data, crc)
    return _crc32(_DIGEST_BLOB.pack(*stat_fields), crc)


def to_signed64(value: int) -> int:
    value &= _U64
    return value - (1 << 64) if value >= 1 << 63 else value


def tree_digest(nodes: dict[str, ZNode] | ZTree) -> int:
    """The tree digest ZooKeeper records (wrapping 64-bit sum of node digests), as a signed long.

    Needs stored stats: read the tree with `client_view=False`.
    """
    return to_signed64(digest_sum(nodes.nodes if isinstance(nodes, ZTree) else nodes))


def digest_sum(nodes: dict[str, ZNode]) -> int:
    """Sum of all node digests (not yet wrapped to 64 bits), computed column-wise with C-level maps."""
    keys = [k for k in nodes if not k.startswith(SYSTEM_ROOT + "/")]
    members = list(map(nodes.__getitem__, keys))
    if "/" in nodes:
        keys[keys.index("/")] = ""  # ZooKeeper digests the root under its own name ""
    crcs = map(_crc32, map(str.encode, keys))
    datas = [b"" if d is None else d for d in map(_node_data, members)]
    crcs = map(_crc32, datas, crcs)
    blobs = starmap(_DIGEST_BLOB.pack, map(_DIGEST_FIELDS, map(_node_stat, members)))
    return sum(map(_crc32, blobs, crcs))
