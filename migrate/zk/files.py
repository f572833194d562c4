"""ZooKeeper's own files, read offline: snapshots (plain, .gz, .snappy), transaction logs, tree digests.

Byte layouts follow `shared/reference/zookeeper-files.md` (ZooKeeper 3.4-3.9). Snapshots decode into a
`ZTree` (root path "/"; the `/zookeeper` system nodes are kept, see `without_system_nodes`). A snapshot
writer produces the files ZooKeeper 3.8/3.9 writes, trailers and digest included.
"""

from __future__ import annotations

import binascii
import gc
import gzip
import mmap
import operator
import os
import re
import struct
import zlib
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import IntEnum
from itertools import chain, repeat, starmap
from pathlib import Path
from typing import NoReturn, cast

import cramjam

from migrate.atomic import atomic_writer
from migrate.errors import CorruptDataError, Zk2KraftError
from migrate.zk.jute import INT, LONG, LONG_INT, JuteReader, JuteWriter, encode_string
from migrate.zk.tree import OPEN_ACL_UNSAFE, Acl, Stat, ZNode, ZTree

SNAPSHOT_PREFIX = "snapshot"
LOG_PREFIX = "log"
SNAP_MAGIC = 0x5A4B534E  # "ZKSN"
LOG_MAGIC = 0x5A4B4C47  # "ZKLG"
FILE_FORMAT_VERSION = 2
SNAPSHOT_DBID = -1
DIGEST_VERSION = 2
OPEN_ACL_INDEX = -1  # ZooKeeper's "OPEN_ACL_UNSAFE" index, never stored in the ACL map
END_OF_RECORD = 0x42  # 'B' after every log entry
SEAL_TAIL = b"\x00\x00\x00\x01/"  # the ustring "/" that ends the tree and every seal

SYSTEM_ROOT = "/zookeeper"
CONTAINER_OWNER = -0x8000_0000_0000_0000
_TTL_PREFIX = 0xFF00_0000_0000_0000
_TTL_MASK = 0xFFFF_FF00_0000_0000  # high byte 0xFF and bits 40-55 zero mark a TTL owner
_MAX_TTL = (1 << 40) - 1

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK = 32 * 1024

_NODE_TAIL = struct.Struct(">qqqqqiiiqq")  # DataNode.acl, then StatPersisted (60 bytes)
_NODE_TAIL_SIZE = _NODE_TAIL.size
# Slot descriptors, to set fields of Stats that are still private to this module (see _NodeDecoder).
_STAT_NUM_CHILDREN = Stat.__dict__["num_children"]
_STAT_CVERSION = Stat.__dict__["cversion"]
_STAT_OWNER = Stat.__dict__["ephemeral_owner"]
_SYSTEM_CHILD_PREFIX = b"/zookeeper/"
_CHUNK = 1 << 12  # snapshot records decoded per bulk step: bounds the temporary lists
_node_stat = operator.attrgetter("stat")
_node_data = operator.attrgetter("data")
_node_acl = operator.attrgetter("acl")
# Sorting paths with "/" as the lowest character gives depth-first pre-order ("\x00" is never in a path).
_PRE_ORDER = operator.methodcaller("replace", "/", "\x00")
_STORED_FIELDS = operator.attrgetter(
    "czxid", "mzxid", "ctime", "mtime", "version", "cversion", "aversion", "ephemeral_owner", "pzxid"
)
_DIGEST_FIELDS = operator.attrgetter(
    "czxid", "mzxid", "pzxid", "ctime", "mtime", "version", "cversion", "aversion", "ephemeral_owner"
)
_stat_cversion = operator.attrgetter("cversion")
_stat_children = operator.attrgetter("num_children")
_stat_owner = operator.attrgetter("ephemeral_owner")
_head = operator.itemgetter(0)
_consume: Callable[[Iterable[object]], None] = deque[object](maxlen=0).extend  # drains an iterator in C
# czxid, mzxid, pzxid, ctime, mtime, version, cversion, aversion, ephemeralOwner (DigestCalculator order)
_DIGEST_BLOB = struct.Struct(">qqqqqiiiq")
_DIGEST_ORDER = operator.itemgetter(1, 2, 9, 3, 4, 5, 6, 7, 8)  # those fields of a _NODE_TAIL tuple
_TXN_HEADER = struct.Struct(">qiqqi")
_U64 = (1 << 64) - 1
# The same CRC-32 as zlib.crc32; CPython's zlib module takes about twice as long on short inputs.
_crc32 = binascii.crc32
_HEX = frozenset("0123456789abcdefABCDEF")


# --------------------------------------------------------------------------------------------- names


def zxid_from_name(name: str, prefix: str) -> int | None:
    """The zxid in `snapshot.<hex>[.*]` / `log.<hex>[.*]`, as ZooKeeper's Util.getZxidFromName, else None."""
    parts = name.split(".")
    if len(parts) < 2 or parts[0] != prefix or not parts[1] or not all(c in _HEX for c in parts[1]):
        return None
    value = int(parts[1], 16)
    # Java's Long.parseLong(hex, 16) rejects values that do not fit a signed long.
    return value if value < 1 << 63 else None


def snapshot_file_name(zxid: int, compression: str = "") -> str:
    """`snapshot.<lowercase hex zxid>` plus `.gz` / `.snappy` when compressed."""
    return f"{SNAPSHOT_PREFIX}.{zxid & _U64:x}" + (f".{compression}" if compression else "")


def log_file_name(zxid: int) -> str:
    return f"{LOG_PREFIX}.{zxid & _U64:x}"


def stream_mode(name: str) -> str:
    """`gz`, `snappy` or `` (checked plain stream), from the last dot-part of a file name as SnapStream does."""
    last = name.rsplit(".", 1)[-1]
    if last.lower() == "gz":
        return "gz"
    if last == "snappy":
        return "snappy"
    return ""


# --------------------------------------------------------------------------------------- compression


def xerial_snappy_decompress(raw: bytes, source: str) -> bytes:
    """Decode snappy-java's stream format: 16-byte header, then int32-length-prefixed raw snappy blocks."""
    if not raw.startswith(XERIAL_MAGIC):
        raise CorruptDataError(source, 0, "not a snappy-java stream (missing \\x82SNAPPY\\x00 magic)")
    out: list[bytes] = []
    pos, n = 0, len(raw)
    while pos < n:
        if raw.startswith(XERIAL_MAGIC, pos):  # snappy-java allows concatenated streams
            if pos + 16 > n:
                raise CorruptDataError(source, pos, "snappy-java stream header cut off")
            pos += 16
            continue
        if pos + 4 > n:
            raise CorruptDataError(source, pos, "snappy block length cut off")
        size = INT.unpack_from(raw, pos)[0]
        if size < 0 or pos + 4 + size > n:
            raise CorruptDataError(source, pos, f"snappy block of {size} bytes runs past the end of the file")
        block = raw[pos + 4 : pos + 4 + size]
        _check_snappy_length(block, source, pos + 4)
        try:
            out.append(bytes(cramjam.snappy.decompress_raw(block)))
        except Exception as exc:  # cramjam raises its own DecompressionError (and others on odd input)
            raise CorruptDataError(source, pos, f"corrupt snappy block: {exc}") from None
        pos += 4 + size
    return b"".join(out)


def _check_snappy_length(block: bytes, source: str, offset: int) -> None:
    # A raw snappy block starts with its uncompressed length; snappy cannot expand more than ~22x,
    # so a bigger claim is corruption (and would make the decoder allocate it).
    length = shift = 0
    for byte in block[:5]:
        length |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            break
    else:
        raise CorruptDataError(source, offset, "snappy block has a malformed length preamble")
    if length > 32 * len(block) + 64:
        raise CorruptDataError(source, offset, f"snappy block claims {length} bytes from {len(block)}")


def xerial_snappy_compress(data: bytes | memoryview, block_size: int = XERIAL_BLOCK) -> bytes:
    """snappy-java's SnappyOutputStream format (what ZooKeeper writes for `.snappy` snapshots)."""
    parts = [XERIAL_HEADER]
    view = memoryview(data)
    for start in range(0, len(view), block_size):
        block = bytes(cramjam.snappy.compress_raw(bytes(view[start : start + block_size])))
        parts.append(INT.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def decompress_snapshot(raw: bytes, name: str, source: str) -> bytes:
    """The logical snapshot stream of a file's bytes, decompressed by the name's suffix."""
    mode = stream_mode(name)
    if mode == "gz":
        try:
            return gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise CorruptDataError(source, None, f"cannot gunzip snapshot: {exc}") from None
    if mode == "snappy":
        return xerial_snappy_decompress(raw, source)
    return raw


def compress_snapshot(data: bytes, mode: str) -> bytes:
    if mode == "gz":
        return gzip.compress(data, compresslevel=6)
    if mode == "snappy":
        return xerial_snappy_compress(data)
    return data


# ------------------------------------------------------------------------------------------- digests


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


# ------------------------------------------------------------------------------------ owners, paths


def is_container_owner(owner: int) -> bool:
    return owner == CONTAINER_OWNER


def ttl_of_owner(owner: int) -> int | None:
    """The TTL (ms) encoded in an ephemeralOwner, or None when it is not a TTL node."""
    unsigned = owner & _U64
    if unsigned & _TTL_MASK == _TTL_PREFIX:
        return unsigned & _MAX_TTL
    return None


def session_of_owner(owner: int) -> int | None:
    """The owning session of an ephemeral node, None for persistent, container and TTL nodes."""
    if owner == 0 or owner == CONTAINER_OWNER or ttl_of_owner(owner) is not None:
        return None
    return owner


def ttl_owner(ttl: int) -> int:
    """ephemeralOwner ZooKeeper stores for a TTL node (extended types encoding)."""
    if not 0 < ttl <= _MAX_TTL:
        raise Zk2KraftError(f"TTL {ttl} ms is outside ZooKeeper's range 1..{_MAX_TTL}")
    return to_signed64(_TTL_PREFIX | ttl)


def client_owner(owner: int) -> int:
    """The ephemeralOwner clients see: 0 for containers and TTL nodes (DataNode.getClientEphemeralOwner)."""
    return 0 if owner < 0 and (owner == CONTAINER_OWNER or ttl_of_owner(owner) is not None) else owner


def client_cversion(stored: int, num_children: int) -> int:
    """The cversion clients see: ZooKeeper stores creates only and reports creates + deletes."""
    return 2 * stored - num_children


def stored_cversion(client: int, num_children: int) -> int:
    """Inverse of client_cversion (rounded up when `client + num_children` is odd, which ZooKeeper never shows)."""
    return (client + num_children + 1) // 2


def to_client_view_in_place(nodes: dict[str, ZNode]) -> None:
    """Turn stored stats into what clients see, in place (Stats are frozen: only for freshly decoded trees)."""
    stats = list(map(_node_stat, nodes.values()))
    client = map(
        operator.sub, map(operator.mul, map(_stat_cversion, stats), repeat(2)), map(_stat_children, stats)
    )
    _consume(map(_STAT_CVERSION.__set__, stats, client))
    set_owner = _STAT_OWNER.__set__
    for stat in [s for s in stats if s.ephemeral_owner < 0]:
        set_owner(stat, client_owner(stat.ephemeral_owner))


def is_system_path(path: str) -> bool:
    """True for `/zookeeper` and everything under it (ZooKeeper's own nodes, never Kafka's)."""
    return path == SYSTEM_ROOT or path.startswith(SYSTEM_ROOT + "/")


def without_system_nodes(tree: ZTree) -> ZTree:
    """A copy of `tree` without `/zookeeper` and its subtree."""
    nodes = {p: n for p, n in tree.nodes.items() if not is_system_path(p)}
    return ZTree(source=tree.source, nodes=nodes, last_zxid=tree.last_zxid)


_BAD_PATH_CHAR = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\uf8ff\ufff0-\uffff\U00010000-\U0010ffff]")


_BAD_PATH_STEP = re.compile("//|/\\.{1,2}(?:/|\x00)|/\x00")  # empty, "." or ".." names; a trailing /


def path_problem(path: str) -> str | None:
    """Why ZooKeeper (PathUtils.validatePath) would refuse `path`, or None when it is valid."""
    if not path.startswith("/"):
        return "does not start with /"
    if path == "/":
        return None
    if path.endswith("/"):
        return "ends with /"
    bad = _BAD_PATH_CHAR.search(path)
    if bad:
        return f"has the invalid character U+{ord(bad.group()):04X} at {bad.start()}"
    for name in path[1:].split("/"):
        if name in ("", ".", ".."):
            return f"has an empty or relative name {name!r}"
    return None


def parent_path(path: str) -> str | None:
    """Parent in the ZTree convention ("/" for top-level nodes), None for the root."""
    if path == "/":
        return None
    return path[: path.rfind("/")] or "/"


# -------------------------------------------------------------------------------------- snapshot read


@dataclass(frozen=True, slots=True)
class ZxidDigest:
    """The digest section of a snapshot trailer: tree digest after `zxid` (zxid 0 = empty)."""

    zxid: int
    version: int
    digest: int


@dataclass(slots=True)
class Snapshot:
    """A decoded snapshot: header, session table, ACL cache, tree and trailer sections."""

    source: str
    zxid: int
    tree: ZTree
    sessions: dict[int, int]
    acl_cache: dict[int, tuple[Acl, ...]]
    version: int = FILE_FORMAT_VERSION
    dbid: int = SNAPSHOT_DBID
    digest: ZxidDigest | None = None
    last_processed_zxid: int | None = None
    seals: int = 1
    checksums_verified: bool = True
    unresolved_acls: dict[str, int] = field(default_factory=dict)
    size: int = 0
    client_view: bool = True
    computed_digest: int | None = None  # the tree digest of the decoded nodes, when asked for

    @property
    def has_digest(self) -> bool:
        """True when the trailer carries a real (non-empty) digest."""
        return self.digest is not None and self.digest.zxid > 0


def quick_check_problem(path: Path) -> str | None:
    """Why ZooKeeper's cheap validity check (SnapStream.isValidSnapshot) rejects `path`, or None."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(16)
            mode = stream_mode(path.name)
            if mode == "gz":
                return None if head[:2] == b"\x1f\x8b" else "not a gzip file (bad magic)"
            if mode == "snappy":
                return None if head.startswith(XERIAL_MAGIC) else "not a snappy-java stream (bad magic)"
            if size < 10:
                return f"only {size} bytes long"
            f.seek(size - 5)
            tail = f.read(5)
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}"
    return None if tail == SEAL_TAIL else "does not end with the '/' seal marker (incomplete write?)"


def read_snapshot(
    path: str | os.PathLike[str],
    *,
    zxid: int | None = None,
    verify_checksums: bool = True,
    client_view: bool = True,
    with_digest: bool = False,
) -> Snapshot:
    """Read and decode one snapshot file (plain, `.gz` or `.snappy`, chosen by the file name).

    With `client_view` the stats are those a client (kazoo, zkCli, the live reader) sees; without it they
    are ZooKeeper's stored values (cversion counts creates only; containers and TTL nodes keep their
    special ephemeralOwner), which digests and exact rewrites need. `with_digest` also computes the
    tree digest while decoding (`Snapshot.computed_digest`), far cheaper than `tree_digest` afterwards.
    """
    file = Path(path)
    source = str(file)
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise Zk2KraftError(f"cannot read snapshot {source}: {exc.strerror or exc}") from None
    data = decompress_snapshot(raw, file.name, source)
    name_zxid = zxid_from_name(file.name, SNAPSHOT_PREFIX)
    return decode_snapshot(
        data,
        source,
        name_zxid if zxid is None else zxid,
        verify_checksums=verify_checksums,
        client_view=client_view,
        with_digest=with_digest,
    )


def decode_snapshot(
    data: bytes,
    source: str,
    zxid: int | None = None,
    *,
    verify_checksums: bool = True,
    client_view: bool = True,
    with_digest: bool = False,
) -> Snapshot:
    """Decode an uncompressed snapshot stream; every Adler32 seal is checked unless told otherwise.

    `client_view` and `with_digest` as in `read_snapshot`.
    """
    if not isinstance(data, bytes):
        data = bytes(data)
    try:
        return _decode_snapshot(data, source, zxid, verify_checksums, client_view, with_digest)
    except CorruptDataError as exc:
        if verify_checksums and "Adler32" not in exc.problem and not _seal_matches_somewhere(data):
            raise CorruptDataError(
                exc.source,
                exc.offset,
                f"{exc.problem}; the Adler32 checksum does not match either: the file is damaged",
            ) from None
        raise


def _seal_matches_somewhere(data: bytes) -> bool:
    """True if the first seal of any trailer layout (13, 34, 46 or 67 bytes) checks out."""
    view = memoryview(data)
    for trailer in (13, 34, 46, 67):
        at = len(data) - trailer
        if at >= 16 and LONG.unpack_from(data, at)[0] == zlib.adler32(view[:at]):
            return True
    return False


def _decode_snapshot(
    data: bytes, source: str, zxid: int | None, verify_checksums: bool, client_view: bool, with_digest: bool
) -> Snapshot:
    r = JuteReader(data, source)
    magic = r.int32("file header magic")
    if magic != SNAP_MAGIC:
        raise CorruptDataError(
            source, 0, f"not a ZooKeeper snapshot: magic {magic & 0xFFFFFFFF:#010x}, expected 'ZKSN'"
        )
    version = r.int32("file header version")
    dbid = r.int64("file header dbid")

    at = r.pos
    count = r.int32("session count")
    if count < 0 or count * 12 > r.remaining():
        raise r.error(f"session count {count} does not fit in the file", at)
    sessions: dict[int, int] = {}
    for _ in range(count):
        sid, timeout = LONG_INT.unpack_from(data, r.need(12, "session"))
        sessions[sid] = timeout

    at = r.pos
    count = r.int32("ACL cache size")
    if count < 0 or count * 12 > r.remaining():
        raise r.error(f"ACL cache size {count} does not fit in the file", at)
    acl_cache: dict[int, tuple[Acl, ...]] = {}
    for _ in range(count):
        index = r.int64("ACL cache index")
        at = r.pos
        acls = r.acl_list("ACL cache entry")
        if acls is None:
            raise r.error(f"ACL cache entry {index} has a null ACL list", at)
        acl_cache[index] = acls

    decoded = _decode_nodes(data, r.pos, source, acl_cache, client_view, with_digest)
    nodes, unresolved = decoded.nodes, decoded.unresolved
    r.pos = decoded.end
    digest, last_zxid, seals = _decode_trailer(data, r, verify_checksums)

    if zxid is None:
        zxid = last_zxid if last_zxid is not None else _max_stat_zxid(nodes)
    tree = ZTree(source=source, nodes=nodes, last_zxid=zxid)
    return Snapshot(
        source=source,
        zxid=zxid,
        tree=tree,
        sessions=sessions,
        acl_cache=acl_cache,
        version=version,
        dbid=dbid,
        digest=digest,
        last_processed_zxid=last_zxid,
        seals=seals,
        checksums_verified=verify_checksums,
        unresolved_acls=unresolved,
        size=len(data),
        client_view=client_view,
        computed_digest=to_signed64(decoded.digest_total) if with_digest else None,
    )


def _decode_nodes(
    buf: bytes,
    pos: int,
    source: str,
    acl_cache: dict[int, tuple[Acl, ...]],
    client_view: bool,
    with_digest: bool,
) -> _NodeDecoder:
    """Decode the node records up to the "/" end marker (see _NodeDecoder)."""
    decoder = _NodeDecoder(buf, source, acl_cache, client_view, with_digest)
    gc_was_enabled = gc.isenabled()
    gc.disable()  # a million new objects would trigger many useless collections
    try:
        decoder.run(pos)
        if gc_was_enabled and gc.get_freeze_count() == 0:
            # Hand the new objects straight to the oldest generation (nothing stays frozen): otherwise the
            # next young collections walk every ZNode and Stat, and their ints, once or twice more.
            gc.freeze()
            gc.unfreeze()
    finally:
        if gc_was_enabled:
            gc.enable()
    return decoder


class _StatBuilder:
    """Stat's twin with the same slots, built by a plain __init__, then re-classed to `Stat` by _NodeDecoder.

    A frozen dataclass __init__ sets each field through `object.__setattr__`, three times the cost of
    these slot stores; an instance with the same slot layout may change its `__class__` to `Stat`.
    `num_children` holds the record's ACL reference until `_NodeDecoder` has read it out.
    """

    __slots__ = tuple(Stat.__dataclass_fields__)

    czxid: int
    mzxid: int
    ctime: int
    mtime: int
    version: int
    cversion: int
    aversion: int
    ephemeral_owner: int
    data_length: int
    num_children: int
    pzxid: int

    def __init__(self, tail: tuple[int, ...], data_length: int) -> None:
        (
            self.num_children, self.czxid, self.mzxid, self.ctime, self.mtime, self.version, self.cversion,
            self.aversion, self.ephemeral_owner, self.pzxid,
        ) = tail  # fmt: skip
        self.data_length = data_length


class _ClientStatBuilder(_StatBuilder):
    """As `_StatBuilder`, with cversion doubled: the client view subtracts the children in `_link`."""

    __slots__ = ()

    def __init__(self, tail: tuple[int, ...], data_length: int) -> None:
        (
            self.num_children, self.czxid, self.mzxid, self.ctime, self.mtime, self.version, cversion,
            self.aversion, self.ephemeral_owner, self.pzxid,
        ) = tail  # fmt: skip
        self.cversion = cversion + cversion
        self.data_length = data_length


_SET_CLASS = object.__dict__["__class__"].__set__
_builder_acl_ref = operator.attrgetter("num_children")


class _NodeDecoder:
    """Snapshot node records to ZNodes, fast.

    One tight Python loop finds where each record starts and where its path ends (data and stat
    positions follow from those); everything else is built per chunk, column by column, with `map`
    calls that run in C. Stats are built as `_StatBuilder`s and re-classed to `Stat` before anyone
    sees them.
    """

    def __init__(
        self,
        buf: bytes,
        source: str,
        acl_cache: dict[int, tuple[Acl, ...]],
        client_view: bool,
        with_digest: bool,
    ) -> None:
        self.buf = buf
        self.source = source
        self.acls = dict(acl_cache)
        self.acls[OPEN_ACL_INDEX] = OPEN_ACL_UNSAFE
        self.client_view = client_view
        self.with_digest = with_digest
        self.keys: list[str] = []  # every record's path in file order, for error messages
        self.child_counts: Counter[str] = Counter()  # parent path ("" for the root) -> children
        self.paths_absolute = True
        self.unresolved: dict[str, int] = {}
        self.digest_total = 0  # sum of node digests (stored stats), when with_digest
        self.nodes: dict[str, ZNode] = {}
        self.end = 0

    def run(self, pos: int) -> None:
        buf = self.buf
        unpack_int = INT.unpack_from
        after_path = 4 + _NODE_TAIL_SIZE  # data length field and stat, around the data
        done = False
        while not done:
            chunk_at = pos
            starts: list[int] = []
            path_ends: list[int] = []
            nulls: list[int] = []
            add_start, add_end = starts.append, path_ends.append
            try:
                for _ in range(_CHUNK):
                    plen = unpack_int(buf, pos)[0]
                    if plen < 2:
                        if plen == 1 and buf[pos + 4] == 0x2F:
                            done = True
                            break
                        if plen < 0:
                            raise IndexError  # explained by _explain_bad_record
                    add_start(pos)
                    pos += 4 + plen
                    add_end(pos)
                    dlen = unpack_int(buf, pos)[0]
                    if dlen < 0:
                        if dlen != -1:
                            raise IndexError
                        nulls.append(len(path_ends) - 1)
                        dlen = 0
                    # Every position only grows; one past the end makes the next unpack fail.
                    pos += after_path + dlen
            except (struct.error, IndexError):
                self._explain_bad_record(chunk_at)
            if pos > len(buf):
                self._explain_bad_record(chunk_at)
            # `pos` is where the record after this chunk starts, so the chunk's last stat ends there.
            self._build_chunk(starts, path_ends, pos, nulls)
        self.end = pos + 5  # past the "/" end marker
        self._link()

    def _explain_bad_record(self, pos: int) -> NoReturn:
        """Walk the records from `pos` carefully and raise the CorruptDataError that says what is wrong."""
        buf, source, n = self.buf, self.source, len(self.buf)
        while True:
            rec = pos
            if pos + 4 > n:
                raise CorruptDataError(source, rec, "node record cut off by the end of the file")
            plen = INT.unpack_from(buf, pos)[0]
            pos += 4
            end = pos + plen
            if plen == 1 and pos < n and buf[pos] == 0x2F:
                break  # the end marker: nothing wrong before it (the caller's checks are the same)
            if plen < 0 or end > n:
                raise CorruptDataError(source, rec, f"node path length {plen} does not fit in the file")
            if end + 4 > n:
                raise CorruptDataError(source, rec, "node record cut off by the end of the file")
            dlen = INT.unpack_from(buf, end)[0]
            if dlen < -1:
                raise CorruptDataError(source, end, f"node data has negative length {dlen}")
            pos = end + 4 + max(dlen, 0) + _NODE_TAIL_SIZE
            if pos > n:
                raise CorruptDataError(source, rec, "node record cut off by the end of the file")
        raise CorruptDataError(source, rec, "node records could not be decoded")

    def _build_chunk(self, starts: list[int], path_ends: list[int], chunk_end: int, nulls: list[int]) -> None:
        """Objects for one chunk of records whose positions are known (num_children comes later)."""
        count = len(starts)
        if not count:
            return
        buf = self.buf
        get = buf.__getitem__
        path_cuts = list(map(slice, map(operator.add, starts, repeat(4)), path_ends))
        # Without digests the raw path bytes are dropped at once (their memory serves the next objects).
        raw_paths = list(map(get, path_cuts)) if self.with_digest else []
        try:
            paths = list(map(bytes.decode, raw_paths or map(get, path_cuts)))
        except UnicodeDecodeError:
            for cut in path_cuts:
                try:
                    get(cut).decode()
                except UnicodeDecodeError as exc:
                    problem = f"node path is not UTF-8 ({exc.reason})"
                    raise CorruptDataError(self.source, cut.start + exc.start, problem) from None
            raise
        if not self.keys and paths[0] == "":
            paths[0] = "/"  # the root record, always first
        # Record i+1 starts right after the stat of record i.
        tail_at = list(map(operator.sub, starts[1:], repeat(_NODE_TAIL_SIZE)))
        tail_at.append(chunk_end - _NODE_TAIL_SIZE)
        raw_datas: list[bytes] = list(map(get, map(slice, map(operator.add, path_ends, repeat(4)), tail_at)))
        lengths = list(map(len, raw_datas))
        tails = list(map(_NODE_TAIL.unpack_from, repeat(buf, count), tail_at))
        if self.with_digest:
            self._add_digests(raw_paths, raw_datas, tails)
        datas = cast(list[bytes | None], raw_datas)  # the same list, from here on with None for null data
        for i in nulls:
            datas[i] = None
        builder = _ClientStatBuilder if self.client_view else _StatBuilder
        stats = list(map(builder, tails, lengths))
        acl_refs = list(map(_builder_acl_ref, stats))
        _consume(map(_SET_CLASS, stats, repeat(Stat, count)))
        _consume(map(_STAT_NUM_CHILDREN.__set__, stats, repeat(0, count)))
        if self.client_view and min(map(_stat_owner, stats)) < 0:
            set_owner = _STAT_OWNER.__set__
            for stat in stats:
                if stat.ephemeral_owner < 0:
                    set_owner(stat, client_owner(stat.ephemeral_owner))
        node_acls: list[tuple[Acl, ...] | None] = list(map(self.acls.get, acl_refs))
        if None in node_acls:
            for i, acl in enumerate(node_acls):
                if acl is None:
                    # A fuzzy snapshot can reference an ACL added after the cache was written; replaying
                    # the create fixes it, so remember rather than fail.
                    self.unresolved[paths[i]] = acl_refs[i]
                    node_acls[i] = ()
        # Keyed, counted and checked while the new strings are still in the CPU cache.
        znodes = map(ZNode, paths, datas, cast(list[Stat], stats), cast(list[tuple[Acl, ...]], node_acls))
        self.nodes.update(zip(paths, znodes, strict=True))
        below_root = paths if self.keys else paths[1:]
        self.child_counts.update(map(_head, map(str.rpartition, below_root, repeat("/"))))
        if self.paths_absolute:
            self.paths_absolute = all(map(str.startswith, below_root, repeat("/")))
        self.keys += paths

    def _add_digests(
        self, raw_paths: list[bytes], raw_datas: list[bytes], tails: list[tuple[int, ...]]
    ) -> None:
        """Add this chunk's node digests (DigestCalculator) to the running total, from the raw columns."""
        crcs = map(_crc32, raw_datas, map(_crc32, raw_paths))
        blobs = starmap(_DIGEST_BLOB.pack, map(_DIGEST_ORDER, tails))
        digests = list(map(_crc32, blobs, crcs))
        total = sum(digests)
        # ZooKeeper leaves its own nodes out; they are few, so look for them in one joined string first.
        if b"\x00" + _SYSTEM_CHILD_PREFIX in b"\x00" + b"\x00".join(raw_paths):
            for i, raw in enumerate(raw_paths):
                if raw.startswith(_SYSTEM_CHILD_PREFIX):
                    total -= digests[i]
        self.digest_total += total

    def _link(self) -> None:
        """Check the root, duplicates and every node's parent, and fill in the children counts."""
        keys, source, nodes = self.keys, self.source, self.nodes
        if not keys or keys[0] != "/":
            raise CorruptDataError(source, None, "the snapshot does not start with the root record")
        if "" in nodes:
            raise CorruptDataError(source, None, "the root record appears twice in the snapshot")
        if len(nodes) != len(keys):
            seen: set[str] = set()
            dup = next(k for k in keys if k in seen or seen.add(k))  # type: ignore[func-returns-value]
            raise CorruptDataError(source, None, f"the path {dup!r} appears twice in the snapshot")
        if not self.paths_absolute:
            bad = next(k for k in keys[1:] if not k.startswith("/"))
            raise CorruptDataError(source, None, f"node path {bad!r} does not start with /")
        counts = self.child_counts
        counts["/"] = counts.pop("", 0)  # top-level nodes have parent "" in ZooKeeper's own spelling
        try:
            parent_stats = list(map(_node_stat, map(nodes.__getitem__, counts.keys())))
        except KeyError as exc:
            missing = exc.args[0]
            orphan = next(k for k in keys[1:] if (k.rpartition("/")[0] or "/") == missing)
            raise CorruptDataError(
                source, None, f"node {orphan!r} has no parent in the snapshot (invalid DataTree)"
            ) from None
        _consume(map(_STAT_NUM_CHILDREN.__set__, parent_stats, counts.values()))
        if self.client_view:
            client = map(operator.sub, map(_stat_cversion, parent_stats), counts.values())
            _consume(map(_STAT_CVERSION.__set__, parent_stats, client))


def _decode_trailer(data: bytes, r: JuteReader, verify: bool) -> tuple[ZxidDigest | None, int | None, int]:
    """Seal 1, then the optional digest and lastProcessedZxid sections, each followed by its seal."""
    view = memoryview(data)
    checksum = 1  # Adler32 of nothing
    checked_to = 0

    def seal(what: str) -> None:
        nonlocal checksum, checked_to
        at = r.pos
        stored = r.int64(f"{what} checksum")
        r.ustring(f"{what} marker")
        if verify:
            checksum = zlib.adler32(view[checked_to:at], checksum)
            checked_to = at
            if stored != checksum:
                raise r.error(
                    f"Adler32 mismatch in {what}: file says {stored:#x}, bytes 0..{at - 1} give {checksum:#x} "
                    "(CRC corruption: the snapshot is damaged)",
                    at,
                )

    seal("seal 1")
    seals = 1
    digest: ZxidDigest | None = None
    last_zxid: int | None = None
    if r.remaining() not in (0, 21):
        zxid = r.int64("digest zxid")
        version = r.int32("digest version")
        if version >= 2:
            value = r.int64("digest")
        else:
            at = r.pos
            text = r.ustring("digest (hex)")
            try:
                value = to_signed64(int(text, 16)) if text else 0
            except ValueError:
                raise r.error(f"digest {text!r} is not hexadecimal", at) from None
        digest = ZxidDigest(zxid, version, value)
        seal("seal 2")
        seals += 1
    if r.remaining() == 21:
        last_zxid = r.int64("lastProcessedZxid")
        seal(f"seal {seals + 1}")
        seals += 1
    if r.remaining():
        raise r.error(f"{r.remaining()} unexpected bytes after the snapshot trailer")
    return digest, last_zxid, seals


def _max_stat_zxid(nodes: dict[str, ZNode]) -> int:
    return max((max(n.stat.mzxid, n.stat.pzxid, n.stat.czxid) for n in nodes.values()), default=0)


# ------------------------------------------------------------------------------------- snapshot write


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


# ---------------------------------------------------------------------------------- transaction logs


class OpCode(IntEnum):
    """ZooDefs.OpCode values that appear in transaction logs."""

    CREATE_SESSION = -10
    CLOSE_SESSION = -11
    ERROR = -1
    CREATE = 1
    DELETE = 2
    SET_DATA = 5
    SET_ACL = 7
    CHECK = 13
    MULTI = 14
    CREATE2 = 15
    RECONFIG = 16
    CREATE_CONTAINER = 19
    DELETE_CONTAINER = 20
    CREATE_TTL = 21


@dataclass(frozen=True, slots=True)
class TxnHeader:
    client_id: int
    cxid: int
    zxid: int
    time: int
    type: int


@dataclass(frozen=True, slots=True)
class CreateTxn:
    """create / create2 (CreateTxn), createContainer and createTTL: `ttl` is set only for createTTL."""

    path: str
    data: bytes | None
    acl: tuple[Acl, ...] | None
    ephemeral: bool = False
    parent_cversion: int = -1
    ttl: int | None = None


@dataclass(frozen=True, slots=True)
class DeleteTxn:
    path: str


@dataclass(frozen=True, slots=True)
class SetDataTxn:
    path: str
    data: bytes | None
    version: int


@dataclass(frozen=True, slots=True)
class SetACLTxn:
    path: str
    acl: tuple[Acl, ...] | None
    version: int


@dataclass(frozen=True, slots=True)
class CheckVersionTxn:
    path: str
    version: int


@dataclass(frozen=True, slots=True)
class ErrorTxn:
    err: int


@dataclass(frozen=True, slots=True)
class CreateSessionTxn:
    timeout: int


@dataclass(frozen=True, slots=True)
class CloseSessionTxn:
    paths_to_delete: tuple[str, ...] | None


@dataclass(frozen=True, slots=True)
class SubTxn:
    """One op of a multi: its op code and decoded record."""

    type: int
    record: TxnRecord


@dataclass(frozen=True, slots=True)
class MultiTxn:
    txns: tuple[SubTxn, ...]


TxnRecord = (
    CreateTxn
    | DeleteTxn
    | SetDataTxn
    | SetACLTxn
    | CheckVersionTxn
    | ErrorTxn
    | CreateSessionTxn
    | CloseSessionTxn
    | MultiTxn
)


@dataclass(frozen=True, slots=True)
class TxnDigest:
    version: int
    digest: int


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One logged transaction and the byte offset of its entry in the log file."""

    offset: int
    header: TxnHeader
    record: TxnRecord | None
    digest: TxnDigest | None


@dataclass(frozen=True, slots=True)
class LogEnd:
    """Where and why reading a log stopped.

    `kind` is `padding` (the zero-filled preallocated tail, the normal end), `eof` (the file ends right
    after an entry), `short` (file smaller than its header), `truncated` (a torn last entry) or `corrupt`
    (a last entry whose checksum fails).
    """

    kind: str
    offset: int
    detail: str = ""

    @property
    def clean(self) -> bool:
        return self.kind in ("padding", "eof")

    def describe(self) -> str:
        if self.clean:
            return f"{self.kind} at byte {self.offset}"
        text = (
            f"{self.kind} entry at byte {self.offset}" if self.kind in ("truncated", "corrupt") else self.kind
        )
        return f"{text} ({self.detail})" if self.detail else text


_MULTI_SUB_TYPES = frozenset(
    {
        OpCode.CREATE,
        OpCode.CREATE2,
        OpCode.CREATE_TTL,
        OpCode.CREATE_CONTAINER,
        OpCode.DELETE,
        OpCode.DELETE_CONTAINER,
        OpCode.SET_DATA,
        OpCode.CHECK,
        OpCode.ERROR,
    }
)
_TOP_LEVEL_TYPES = frozenset(
    {
        OpCode.CREATE_SESSION,
        OpCode.CLOSE_SESSION,
        OpCode.ERROR,
        OpCode.CREATE,
        OpCode.CREATE2,
        OpCode.CREATE_TTL,
        OpCode.CREATE_CONTAINER,
        OpCode.DELETE,
        OpCode.DELETE_CONTAINER,
        OpCode.SET_DATA,
        OpCode.RECONFIG,
        OpCode.SET_ACL,
        OpCode.MULTI,
    }
)


def _op_name(op: int) -> str:
    try:
        return OpCode(op).name.lower()
    except ValueError:
        return f"op {op}"


def _decode_record(op: int, r: JuteReader, top_level: bool) -> TxnRecord:
    if op in (OpCode.CREATE, OpCode.CREATE2):
        path = r.path("create path")
        data = r.buffer("create data")
        acl = r.acl_list("create ACL")
        ephemeral = r.boolean("create ephemeral flag")
        # CreateTxnV0 (pre-3.3 logs) stops here; -1 makes replay compute the parent cversion.
        parent_cversion = r.int32("create parentCVersion") if r.remaining() else -1
        return CreateTxn(path, data, acl, ephemeral, parent_cversion)
    if op == OpCode.CREATE_CONTAINER:
        path = r.path("createContainer path")
        data = r.buffer("createContainer data")
        acl = r.acl_list("createContainer ACL")
        return CreateTxn(path, data, acl, False, r.int32("createContainer parentCVersion"))
    if op == OpCode.CREATE_TTL:
        path = r.path("createTTL path")
        data = r.buffer("createTTL data")
        acl = r.acl_list("createTTL ACL")
        parent_cversion = r.int32("createTTL parentCVersion")
        return CreateTxn(path, data, acl, False, parent_cversion, r.int64("createTTL ttl"))
    if op in (OpCode.DELETE, OpCode.DELETE_CONTAINER):
        return DeleteTxn(r.path("delete path"))
    if op in (OpCode.SET_DATA, OpCode.RECONFIG):
        return SetDataTxn(r.path("setData path"), r.buffer("setData data"), r.int32("setData version"))
    if op == OpCode.SET_ACL:
        return SetACLTxn(r.path("setACL path"), r.acl_list("setACL ACL"), r.int32("setACL version"))
    if op == OpCode.CHECK:
        return CheckVersionTxn(r.path("check path"), r.int32("check version"))
    if op == OpCode.ERROR:
        return ErrorTxn(r.int32("error code"))
    if op == OpCode.CREATE_SESSION:
        return CreateSessionTxn(r.int32("createSession timeout"))
    if op == OpCode.CLOSE_SESSION:
        return CloseSessionTxn(r.string_list("closeSession paths2Delete"))
    if op == OpCode.MULTI and top_level:
        at = r.pos
        count = r.length("multi op count", 8)
        if count == -1:
            raise r.error("multi with a null op list", at)
        subs: list[SubTxn] = []
        for _ in range(count):
            sub_at = r.pos
            sub_op = r.int32("multi sub-op type")
            if sub_op not in _MULTI_SUB_TYPES:
                raise r.error(
                    f"multi holds {_op_name(sub_op)}, which ZooKeeper never logs inside a multi", sub_at
                )
            size = r.length("multi sub-op data")
            if size == -1:
                raise r.error("multi sub-op with null data", sub_at)
            sub = JuteReader(r.buf, r.source, r.pos, r.pos + size)
            record = _decode_record(sub_op, sub, top_level=False)
            sub.expect_end(f"multi sub-op {_op_name(sub_op)}")
            subs.append(SubTxn(sub_op, record))
            r.pos += size
        return MultiTxn(tuple(subs))
    raise r.error(f"unsupported transaction type {op} (ZooKeeper never logs {_op_name(op)})")


def decode_txn(
    buf: bytes | memoryview | mmap.mmap, start: int, end: int, source: str
) -> tuple[TxnHeader, TxnRecord | None, TxnDigest | None]:
    """Decode the txn bytes `buf[start:end]` of one log entry: header, record, optional TxnDigest."""
    r = JuteReader(buf, source, start, end)  # type: ignore[arg-type]
    header = TxnHeader(*_TXN_HEADER.unpack_from(buf, r.need(_TXN_HEADER.size, "txn header")))
    op = header.type
    if op not in _TOP_LEVEL_TYPES:
        raise r.error(f"unsupported transaction type {op} at zxid {header.zxid:#x}", start + 28)
    record: TxnRecord | None
    if op == OpCode.CLOSE_SESSION and (
        r.remaining() == 0 or (r.remaining() == 12 and INT.unpack_from(buf, r.pos)[0] == DIGEST_VERSION)
    ):
        # closeSession without its record (<=3.5 or closeSessionTxn disabled): only a digest, if anything.
        # Two empty paths are impossible, so 12 bytes starting with 2 must be a TxnDigest.
        record = None
    else:
        record = _decode_record(op, r, top_level=True)
    digest = None
    if r.remaining() == 12:
        digest = TxnDigest(r.int32("digest version"), r.int64("tree digest"))
    elif r.remaining():
        raise r.error(f"{r.remaining()} unexpected bytes after {_op_name(op)} at zxid {header.zxid:#x}")
    return header, record, digest


class TxnLogReader:
    """Iterate the entries of one transaction log held in memory (bytes or an mmap).

    Iteration stops at the zero-filled preallocated tail, at the end of the data, or at a torn last
    entry; `end` then says which. A checksum failure on an entry that is followed by more entries is
    real corruption and raises `CorruptDataError`.
    """

    HEADER_SIZE = 16

    def __init__(self, buf: bytes | memoryview | mmap.mmap, source: str) -> None:
        self.buf = buf
        self.source = source
        self.size = len(buf)
        self.end: LogEnd | None = None
        self.dbid = 0
        self.version = FILE_FORMAT_VERSION
        self.position = self.HEADER_SIZE
        if self.size >= self.HEADER_SIZE:
            magic, self.version, self.dbid = struct.unpack_from(">iiq", buf, 0)
            if magic != LOG_MAGIC:
                raise CorruptDataError(
                    source,
                    0,
                    f"not a ZooKeeper transaction log: magic {magic & 0xFFFFFFFF:#010x}, expected 'ZKLG'",
                )

    def __iter__(self) -> Iterator[LogEntry]:
        buf, size, source = self.buf, self.size, self.source
        if size < self.HEADER_SIZE:
            self.end = LogEnd("eof" if size == 0 else "short", 0, f"file is only {size} bytes")
            return
        pos = self.HEADER_SIZE
        while True:
            self.position = pos
            if pos + 12 > size:
                if pos == size:
                    self.end = LogEnd("eof", pos)
                else:
                    self.end = LogEnd("truncated", pos, f"only {size - pos} bytes left for the entry header")
                return
            crc, length = LONG_INT.unpack_from(buf, pos)
            if length == 0:
                self.end = LogEnd("padding", pos) if crc == 0 else LogEnd("truncated", pos, "zero length")
                return
            if length == -1:
                self.end = LogEnd("truncated", pos, "null entry")
                return
            if length < 0:
                raise CorruptDataError(source, pos + 8, f"log entry has an impossible length {length}")
            body = pos + 12
            body_end = body + length
            if body_end >= size:
                self.end = LogEnd("truncated", pos, f"{length}-byte entry runs past the end of the file")
                return
            if buf[body_end] != END_OF_RECORD:
                self.end = LogEnd("truncated", pos, "no end-of-record marker: last transaction was partial")
                return
            actual = zlib.adler32(buf[body:body_end])
            if actual != crc:
                if self._nothing_after(body_end + 1):
                    self.end = LogEnd("corrupt", pos, f"Adler32 {actual:#x} != stored {crc:#x}")
                    return
                raise CorruptDataError(
                    source,
                    pos,
                    f"log entry Adler32 mismatch: stored {crc:#x}, computed {actual:#x} "
                    "(ZooKeeper refuses to start on this: CRC check failed)",
                )
            header, record, digest = decode_txn(buf, body, body_end, source)
            yield LogEntry(pos, header, record, digest)
            pos = body_end + 1

    def _nothing_after(self, pos: int) -> bool:
        tail = self.buf[pos : pos + 12]
        return len(tail) < 12 or tail == b"\x00" * 12


@contextmanager
def open_txn_log(path: str | os.PathLike[str]) -> Iterator[TxnLogReader]:
    """A reader over a log file: mmap for plain files (they are mostly preallocated zeros), gunzip for `.gz`."""
    file = Path(path)
    source = str(file)
    try:
        if file.name.endswith(".gz"):
            try:
                data = gzip.decompress(file.read_bytes())
            except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
                raise CorruptDataError(source, None, f"cannot gunzip log: {exc}") from None
            yield TxnLogReader(data, source)
            return
        with open(file, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                yield TxnLogReader(b"", source)
                return
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                yield TxnLogReader(mm, source)
    except OSError as exc:
        raise Zk2KraftError(f"cannot read transaction log {source}: {exc.strerror or exc}") from None


@dataclass(slots=True)
class TxnLog:
    """A whole log file read into memory: header fields, entries and how it ended."""

    source: str
    dbid: int
    version: int
    entries: list[LogEntry]
    end: LogEnd


def read_txn_log(path: str | os.PathLike[str]) -> TxnLog:
    with open_txn_log(path) as reader:
        entries = list(reader)
        assert reader.end is not None
        return TxnLog(reader.source, reader.dbid, reader.version, entries, reader.end)


def parse_txn_log(data: bytes, source: str) -> TxnLog:
    reader = TxnLogReader(data, source)
    entries = list(reader)
    assert reader.end is not None
    return TxnLog(source, reader.dbid, reader.version, entries, reader.end)


# ------------------------------------------------------------------------------------- log encoding


def encode_record(op: int, record: TxnRecord | None) -> bytes:
    """Jute bytes of a txn record (no header), as ZooKeeper writes it for op code `op`."""
    w = JuteWriter()
    if record is None:
        return b""
    if isinstance(record, CreateTxn):
        w.ustring(record.path)
        w.buffer(record.data)
        w.acl_list(record.acl)
        if op in (OpCode.CREATE, OpCode.CREATE2):
            w.boolean(record.ephemeral)
        w.int32(record.parent_cversion)
        if op == OpCode.CREATE_TTL:
            w.int64(record.ttl or 0)
    elif isinstance(record, DeleteTxn):
        w.ustring(record.path)
    elif isinstance(record, SetDataTxn):
        w.ustring(record.path)
        w.buffer(record.data)
        w.int32(record.version)
    elif isinstance(record, SetACLTxn):
        w.ustring(record.path)
        w.acl_list(record.acl)
        w.int32(record.version)
    elif isinstance(record, CheckVersionTxn):
        w.ustring(record.path)
        w.int32(record.version)
    elif isinstance(record, ErrorTxn):
        w.int32(record.err)
    elif isinstance(record, CreateSessionTxn):
        w.int32(record.timeout)
    elif isinstance(record, CloseSessionTxn):
        w.string_list(record.paths_to_delete)
    else:
        w.int32(len(record.txns))
        for sub in record.txns:
            w.int32(sub.type)
            w.buffer(encode_record(sub.type, sub.record))
    return w.getvalue()


def encode_txn(header: TxnHeader, record: TxnRecord | None, digest: TxnDigest | None = None) -> bytes:
    """The txn bytes of one log entry: header, record, optional TxnDigest."""
    out = _TXN_HEADER.pack(header.client_id, header.cxid, header.zxid, header.time, header.type)
    out += encode_record(header.type, record)
    if digest is not None:
        out += struct.pack(">iq", digest.version, digest.digest)
    return out


def encode_log_entry(header: TxnHeader, record: TxnRecord | None, digest: TxnDigest | None = None) -> bytes:
    """checksum, length, txn bytes, end-of-record marker."""
    body = encode_txn(header, record, digest)
    return LONG_INT.pack(zlib.adler32(body), len(body)) + body + bytes([END_OF_RECORD])


def encode_txn_log(
    entries: list[tuple[TxnHeader, TxnRecord | None, TxnDigest | None]], *, padding: int = 0
) -> bytes:
    """A whole log file: header, entries, then `padding` zero bytes (ZooKeeper preallocates 64 MiB)."""
    parts = [struct.pack(">iiq", LOG_MAGIC, FILE_FORMAT_VERSION, 0)]
    parts.extend(encode_log_entry(*entry) for entry in entries)
    parts.append(b"\x00" * padding)
    return b"".join(parts)
