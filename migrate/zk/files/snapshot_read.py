"""Reading ZooKeeper snapshots (FileSnap.deserialize): header, sessions, ACL cache, nodes and trailer."""

from __future__ import annotations

import contextlib
import gc
import mmap
import operator
import os
import struct
import zlib
from collections import Counter
from dataclasses import dataclass, field
from itertools import repeat, starmap
from pathlib import Path
from typing import NoReturn, cast

from migrate.errors import CorruptDataError, Zk2KraftError
from migrate.zk.files.digest import _DIGEST_BLOB, _crc32, _node_stat, to_signed64
from migrate.zk.files.names import (
    FILE_FORMAT_VERSION,
    OPEN_ACL_INDEX,
    SEAL_TAIL,
    SNAP_MAGIC,
    SNAPSHOT_DBID,
    SNAPSHOT_PREFIX,
    XERIAL_MAGIC,
    decompress_snapshot,
    stream_mode,
    zxid_from_name,
)
from migrate.zk.files.owners import _STAT_CVERSION, _STAT_OWNER, _consume, _stat_cversion, client_owner
from migrate.zk.jute import INT, LONG, LONG_INT, JuteReader
from migrate.zk.tree import OPEN_ACL_UNSAFE, Acl, Stat, ZNode, ZTree

_NODE_TAIL = struct.Struct(">qqqqqiiiqq")  # DataNode.acl, then StatPersisted (60 bytes)
_NODE_TAIL_SIZE = _NODE_TAIL.size
# Slot descriptors, to set fields of Stats that are still private to this module (see _NodeDecoder).
_STAT_NUM_CHILDREN = Stat.__dict__["num_children"]
_SYSTEM_CHILD_PREFIX = b"/zookeeper/"
_CHUNK = 1 << 12  # snapshot records decoded per bulk step: bounds the temporary lists
_stat_owner = operator.attrgetter("ephemeral_owner")
_head = operator.itemgetter(0)
_DIGEST_ORDER = operator.itemgetter(1, 2, 9, 3, 4, 5, 6, 7, 8)  # those fields of a _NODE_TAIL tuple


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
    name_zxid = zxid_from_name(file.name, SNAPSHOT_PREFIX)
    options = {"verify_checksums": verify_checksums, "client_view": client_view, "with_digest": with_digest}
    try:
        if not stream_mode(file.name) and file.stat().st_size > 0:
            # A plain snapshot is decoded straight from the page cache: no copy of the whole file in memory.
            with open(file, "rb") as f:
                mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            try:
                return decode_snapshot(mapped, source, name_zxid if zxid is None else zxid, **options)
            finally:
                with contextlib.suppress(BufferError):  # a view kept by a traceback: the GC closes it
                    mapped.close()
        raw = file.read_bytes()
    except OSError as exc:
        raise Zk2KraftError(f"cannot read snapshot {source}: {exc.strerror or exc}") from None
    data = decompress_snapshot(raw, file.name, source)
    return decode_snapshot(data, source, name_zxid if zxid is None else zxid, **options)


def decode_snapshot(
    data: bytes | mmap.mmap,
    source: str,
    zxid: int | None = None,
    *,
    verify_checksums: bool = True,
    client_view: bool = True,
    with_digest: bool = False,
) -> Snapshot:
    """Decode an uncompressed snapshot stream; every Adler32 seal is checked unless told otherwise.

    `client_view` and `with_digest` as in `read_snapshot`. From a read-only mmap of the file, the pages
    already decoded are handed back to the page cache as the decoder moves on.
    """
    if not isinstance(data, bytes | mmap.mmap):
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


def _seal_matches_somewhere(data: bytes | mmap.mmap) -> bool:
    """True if the first seal of any trailer layout (13, 34, 46 or 67 bytes) checks out."""
    view = memoryview(data)
    for trailer in (13, 34, 46, 67):
        at = len(data) - trailer
        if at >= 16 and LONG.unpack_from(data, at)[0] == zlib.adler32(view[:at]):
            return True
    return False


def _decode_snapshot(
    data: bytes | mmap.mmap, source: str, zxid: int | None, verify_checksums: bool, client_view: bool, with_digest: bool
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
    buf: bytes | mmap.mmap,
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
            self.num_children, czxid, mzxid, ctime, mtime, self.version, self.cversion,
            self.aversion, self.ephemeral_owner, pzxid,
        ) = tail  # fmt: skip
        # Equal zxids and times as one int object: most znodes never changed after their create, and two
        # million znodes' separate copies of the same big ints would cost hundreds of MB.
        self.czxid = czxid
        self.mzxid = czxid if mzxid == czxid else mzxid
        self.pzxid = czxid if pzxid == czxid else pzxid
        self.ctime = ctime
        self.mtime = ctime if mtime == ctime else mtime
        self.data_length = data_length


class _ClientStatBuilder(_StatBuilder):
    """As `_StatBuilder`, with cversion doubled: the client view subtracts the children in `_link`."""

    __slots__ = ()

    def __init__(self, tail: tuple[int, ...], data_length: int) -> None:
        (
            self.num_children, czxid, mzxid, ctime, mtime, self.version, cversion,
            self.aversion, self.ephemeral_owner, pzxid,
        ) = tail  # fmt: skip
        # Equal zxids and times as one int object: most znodes never changed after their create, and two
        # million znodes' separate copies of the same big ints would cost hundreds of MB.
        self.czxid = czxid
        self.mzxid = czxid if mzxid == czxid else mzxid
        self.pzxid = czxid if pzxid == czxid else pzxid
        self.ctime = ctime
        self.mtime = ctime if mtime == ctime else mtime
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
        buf: bytes | mmap.mmap,
        source: str,
        acl_cache: dict[int, tuple[Acl, ...]],
        client_view: bool,
        with_digest: bool,
    ) -> None:
        self.buf = buf
        self.mapped = buf if isinstance(buf, mmap.mmap) else None
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
            if self.mapped is not None:
                release_pages(self.mapped, chunk_at, pos)
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
        # Both were only needed for these checks: a million parents' counts need not outlive the decoding.
        self.child_counts, self.keys = Counter(), []


_CHECKSUM_WINDOW = 1 << 24  # bytes of a mapped snapshot checksummed before their pages are handed back


def release_pages(mapped: mmap.mmap, start: int, end: int) -> None:
    """Drop the whole pages of `mapped[start:end]` from this process's memory (they stay in the page cache)."""
    first = start // mmap.PAGESIZE * mmap.PAGESIZE  # the page shared with what came before is done with too
    last = end // mmap.PAGESIZE * mmap.PAGESIZE
    if last > first:
        mapped.madvise(mmap.MADV_DONTNEED, first, last - first)


def _adler32(data: bytes | mmap.mmap, view: memoryview, start: int, end: int, checksum: int) -> int:
    """zlib.adler32 of data[start:end] continuing `checksum`; a mapping is read a window at a time."""
    if not isinstance(data, mmap.mmap):
        return zlib.adler32(view[start:end], checksum)
    for at in range(start, end, _CHECKSUM_WINDOW):
        stop = min(at + _CHECKSUM_WINDOW, end)
        checksum = zlib.adler32(view[at:stop], checksum)
        release_pages(data, at, stop)
    return checksum


def _decode_trailer(
    data: bytes | mmap.mmap, r: JuteReader, verify: bool
) -> tuple[ZxidDigest | None, int | None, int]:
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
            checksum = _adler32(data, view, checked_to, at, checksum)
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
