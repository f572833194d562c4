"""ZooKeeper transaction logs (FileTxnLog): record types, reading, and encoding them as ZooKeeper writes them."""

from __future__ import annotations

import gzip
import mmap
import os
import struct
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path

from migrate.errors import CorruptDataError, Zk2KraftError
from migrate.zk.files.names import DIGEST_VERSION, END_OF_RECORD, FILE_FORMAT_VERSION, LOG_MAGIC
from migrate.zk.jute import INT, LONG_INT, JuteReader, JuteWriter
from migrate.zk.tree import Acl

_TXN_HEADER = struct.Struct(">qiqqi")


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
