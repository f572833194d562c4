"""Writing ZooKeeper snapshots as ZooKeeper 3.8/3.9 does (FileSnap.serialize), trailer and digest included."""

from __future__ import annotations

import operator
import os
import struct
import zlib
from collections import Counter
from itertools import chain, repeat
from pathlib import Path

from migrate.atomic import atomic_writer
from migrate.errors import Zk2KraftError
from migrate.zk.files.digest import _DIGEST_BLOB, _crc32, _node_data, _node_stat, to_signed64
from migrate.zk.files.names import (
    DIGEST_VERSION,
    FILE_FORMAT_VERSION,
    OPEN_ACL_INDEX,
    SEAL_TAIL,
    SNAP_MAGIC,
    SNAPSHOT_DBID,
    compress_snapshot,
    snapshot_file_name,
    stream_mode,
)
from migrate.zk.files.owners import _BAD_PATH_STEP, path_problem
from migrate.zk.files.snapshot_read import _NODE_TAIL
from migrate.zk.jute import INT, LONG, LONG_INT, JuteWriter, encode_string
from migrate.zk.tree import OPEN_ACL_UNSAFE, Acl, Stat, ZNode, ZTree

_node_acl = operator.attrgetter("acl")
# Sorting paths with "/" as the lowest character gives depth-first pre-order ("\x00" is never in a path).
_PRE_ORDER = operator.methodcaller("replace", "/", "\x00")
_STORED_FIELDS = operator.attrgetter(
    "czxid", "mzxid", "ctime", "mtime", "version", "cversion", "aversion", "ephemeral_owner", "pzxid"
)


def system_nodes(client_view: bool = True) -> dict[str, ZNode]:
    """The nodes every ZooKeeper 3.5+ tree holds: root, /zookeeper, /zookeeper/config, /zookeeper/quota."""
    return {
        "/": ZNode("/", b"", Stat(cversion=-1 if client_view else 0, num_children=1)),
        "/zookeeper": ZNode("/zookeeper", b"", Stat(cversion=-2 if client_view else 0, num_children=2)),
        "/zookeeper/config": ZNode("/zookeeper/config", b"", Stat(aversion=-1), (Acl(1, "world", "anyone"),)),
        "/zookeeper/quota": ZNode("/zookeeper/quota", b"", Stat()),
    }


def encode_snapshot(
    tree: ZTree,
    *,
    zxid: int,
    sessions: dict[int, int] | None = None,
    digest: bool = True,
    last_zxid: bool = True,
    add_system_nodes: bool = True,
    digest_zxid: int | None = None,
    client_view: bool = True,
) -> bytes:
    """Snapshot stream bytes (uncompressed) as ZooKeeper writes them.

    `digest` adds the 3.6+ digest section (the tree's digest, recorded at `digest_zxid`, default `zxid`;
    0 writes ZooKeeper's empty digest); `last_zxid` adds the 3.9 lastProcessedZxid section. Both on gives
    the 3.9 layout, only `digest` the 3.6-3.8 one. With `add_system_nodes`, a missing root and `/zookeeper`
    nodes are filled in as ZooKeeper creates them. `client_view` says the tree's stats are what clients see
    (as `read_snapshot` gives by default); with False they are written as they are. ZooKeeper removes, on
    loading, ephemeral nodes whose owner is not in `sessions` (session id -> timeout in ms).
    """
    nodes = dict(tree.nodes)
    added: list[str] = []
    if add_system_nodes:
        for path, node in system_nodes(client_view=False).items():
            if path not in nodes:
                nodes[path] = node
                added.append(path)
    if "/" not in nodes:
        raise Zk2KraftError(f"cannot write a snapshot of {tree.source}: the tree has no root node")
    _check_paths(nodes, tree.source)
    order = sorted(nodes, key=_PRE_ORDER)  # depth-first pre-order, siblings by name
    child_counts = _count_children(order, nodes, tree.source)

    members = list(map(nodes.__getitem__, order))
    czxid, mzxid, ctime, mtime, version, cversions, aversion, owner, pzxid = zip(
        *map(_STORED_FIELDS, map(_node_stat, members)), strict=True
    )
    cversion = list(cversions)
    if client_view:
        kids = map(child_counts.get, order, repeat(0))
        cversion = list(map(operator.floordiv, map(operator.add, cversion, map(operator.add, kids, repeat(1))),
                            repeat(2)))  # fmt: skip  # stored_cversion, column-wise
    for path in added:
        i = order.index(path)
        # A root we add counts the creates of its user children, as a real server's would.
        user_children = child_counts.get("/", 0) - ("/zookeeper" in nodes)
        cversion[i] = user_children if path == "/" else nodes[path].stat.cversion
    acl_refs, acl_entries = _acl_references(order, members, nodes)

    if "".join(order).isascii():
        raw_paths = list(map(str.encode, order))
    else:
        raw_paths = list(map(encode_string, order))
    raw_paths[0] = b""  # the root is written as ""
    datas = list(map(_node_data, members))
    present = [b"" if d is None else d for d in datas]
    data_lengths = [-1 if d is None else len(d) for d in datas]
    tails = map(
        _NODE_TAIL.pack, acl_refs, czxid, mzxid, ctime, mtime, version, cversion, aversion, owner, pzxid
    )
    pack_int = INT.pack
    records = zip(
        map(pack_int, map(len, raw_paths)),
        raw_paths,
        map(pack_int, data_lengths),
        present,
        tails,
        strict=True,
    )

    out = bytearray()
    out += struct.pack(">iiq", SNAP_MAGIC, FILE_FORMAT_VERSION, SNAPSHOT_DBID)
    session_items = sorted((sessions or {}).items())
    out += INT.pack(len(session_items))
    for sid, timeout in session_items:
        out += LONG_INT.pack(sid, timeout)
    writer = JuteWriter(out)
    writer.int32(len(acl_entries))
    for index, acls in acl_entries:
        writer.int64(index)
        writer.acl_list(acls)
    out += b"".join(chain.from_iterable(records))
    out += SEAL_TAIL

    checksum = zlib.adler32(out)
    out += LONG.pack(checksum) + SEAL_TAIL
    if digest:
        at = zxid if digest_zxid is None else digest_zxid
        total = 0
        if at:
            crcs = map(_crc32, present, map(_crc32, raw_paths))
            blobs = map(
                _DIGEST_BLOB.pack, czxid, mzxid, pzxid, ctime, mtime, version, cversion, aversion, owner
            )
            digests = list(map(_crc32, blobs, crcs))
            total = sum(digests) - sum(
                d for d, p in zip(digests, order, strict=True) if p.startswith("/zookeeper/")
            )
        out += struct.pack(">qiq", at, DIGEST_VERSION, to_signed64(total))
        checksum = zlib.adler32(memoryview(out)[-(13 + 20) :], checksum)
        out += LONG.pack(checksum) + SEAL_TAIL
    if last_zxid:
        out += LONG.pack(zxid)
        checksum = zlib.adler32(memoryview(out)[-(13 + 8) :], checksum)
        out += LONG.pack(checksum) + SEAL_TAIL
    return bytes(out)


def _check_paths(nodes: dict[str, ZNode], source: str) -> None:
    """Refuse paths ZooKeeper would refuse; bulk checks first, the slow per-path check only to explain."""
    paths = [p for p in nodes if p != "/"]
    suspicious = (
        not all(map(str.startswith, paths, repeat("/")))
        or not _plain_characters("".join(paths))
        or _BAD_PATH_STEP.search("\x00".join(paths) + "\x00") is not None
    )
    if suspicious:
        for path in paths:
            problem = path_problem(path)
            if problem:
                raise Zk2KraftError(f"cannot write a snapshot of {source}: znode path {path!r} {problem}")


def _plain_characters(text: str) -> bool:
    """Quick check that rules out every character PathUtils refuses (may refuse some it accepts)."""
    # Controls, surrogates and private use are not printable; U+FFF0 and above are refused outright.
    return text.isprintable() and (not text or max(text) < "\ufff0")


def _count_children(order: list[str], nodes: dict[str, ZNode], source: str) -> Counter[str]:
    """Children per parent path; every parent must be in the tree."""
    rest = order[1:]
    parents: list[str] = list(
        map(operator.getitem, rest, map(slice, repeat(None), map(str.rfind, rest, repeat("/"))))
    )
    counts = Counter(parents)
    counts["/"] = counts.pop("", 0)
    missing = counts.keys() - nodes.keys()
    if missing:
        orphan = next(p for p, parent in zip(rest, parents, strict=True) if (parent or "/") in missing)
        raise Zk2KraftError(
            f"cannot write a snapshot of {source}: {orphan} has no parent {orphan[: orphan.rfind('/')]}"
        )
    return counts


def _acl_references(
    order: list[str], members: list[ZNode], nodes: dict[str, ZNode]
) -> tuple[list[int], list[tuple[int, tuple[Acl, ...]]]]:
    """Each node's ACL cache index, and the cache entries (numbered from 1 in first-use order).

    ZooKeeper's built-in nodes with the open ACL carry the special index -1 instead of a cache entry.
    """
    acls: list[tuple[Acl, ...] | None] = list(map(_node_acl, members))
    special = [order.index(p) for p in ("/", "/zookeeper", "/zookeeper/quota") if p in nodes]
    for i in special:
        if acls[i] == OPEN_ACL_UNSAFE:
            acls[i] = None
    ids = list(map(id, acls))
    index_of_id: dict[int, int] = {}
    index_of_value: dict[tuple[Acl, ...], int] = {}
    for ident, acl in dict(zip(ids, acls, strict=True)).items():
        if acl is None:
            index_of_id[ident] = OPEN_ACL_INDEX
        else:
            index_of_id[ident] = index_of_value.setdefault(acl, len(index_of_value) + 1)
    entries = [(index, acl) for acl, index in index_of_value.items()]
    return list(map(index_of_id.__getitem__, ids)), entries


def write_snapshot(
    tree: ZTree,
    path: str | os.PathLike[str],
    zxid: int,
    *,
    sessions: dict[int, int] | None = None,
    digest: bool = True,
    last_zxid: bool = True,
    add_system_nodes: bool = True,
    digest_zxid: int | None = None,
    client_view: bool = True,
) -> Path:
    """Write `tree` as a ZooKeeper snapshot file, atomically; returns the file written.

    `path` is the file (its `.gz` / `.snappy` suffix picks the compression) or a directory, in which case
    the file is `snapshot.<hex zxid>` inside it. Options as in `encode_snapshot`.
    """
    target = Path(path)
    if target.is_dir():
        target = target / snapshot_file_name(zxid)
    data = encode_snapshot(
        tree,
        zxid=zxid,
        sessions=sessions,
        digest=digest,
        last_zxid=last_zxid,
        add_system_nodes=add_system_nodes,
        digest_zxid=digest_zxid,
        client_view=client_view,
    )
    with atomic_writer(target, "wb") as out:
        out.write(compress_snapshot(data, stream_mode(target.name)))
    return target
