"""Record batch v2 (magic 2): iterate, verify (CRC-32C, lengths, counts), decode and re-encode byte-exactly.

Layout (Kafka's DefaultRecordBatch): a 61-byte big-endian header, then `recordsCount` records (compressed
as one stream when attributes bits 0-2 say so). Each record is a zig-zag varint length followed by
attributes, timestampDelta, offsetDelta, key, value and headers.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum

from crc32c import crc32c

from migrate.errors import CorruptDataError, UnsupportedVersionError, Zk2KraftError
from migrate.kraft.compression import CompressionType, compress, compression_type, decompress

__all__ = [
    "ATTR_CONTROL",
    "ATTR_TIMESTAMP_TYPE",
    "ATTR_TRANSACTIONAL",
    "HEADER_SIZE",
    "MAGIC",
    "BatchHeader",
    "BatchIterator",
    "BatchRecord",
    "CompressionType",
    "KraftBatchIterator",
    "RecordBatch",
    "TimestampType",
    "TornTail",
    "build_batch",
    "check_batch_file",
    "decode_batch",
    "encode_batch",
    "encode_kraft_batch",
    "iter_batches",
    "iter_kraft_batches",
    "peek_header",
]

MAGIC = 2
HEADER_SIZE = 61  # baseOffset .. recordsCount
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes batchLength does not count
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # 49
HEADER_UP_TO_MAGIC = 17  # Kafka's FileLogInputStream treats a shorter tail as "no more batches"
CRC_START = 21  # the CRC covers [attributes, end of batch)

ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordsCount
_HEADER = struct.Struct(">qiibIhiqqqhii")
_LENGTH = struct.Struct(">i")
_PREFIX = struct.Struct(">qiib")  # baseOffset .. magic, written before the CRC
_AFTER_CRC = struct.Struct(">hiqqqhii")  # attributes .. recordsCount, covered by the CRC


KraftEntry = tuple[int, bytes | None, bytes | None]
"""(offsetDelta, key, value) of one record, as the KRaft fast path yields it."""


class TimestampType(IntEnum):
    """Bit 3 of a batch's attributes."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


# ------------------------------------------------------------------ data model


@dataclass(slots=True)
class BatchRecord:
    """One record inside a batch, exactly as stored (deltas relative to the batch header)."""

    attributes: int = 0
    timestamp_delta: int = 0
    offset_delta: int = 0
    key: bytes | None = None
    value: bytes | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


class _AttributeView:
    """Properties derived from the header fields both batch classes share."""

    __slots__ = ()
    attributes: int
    base_offset: int
    last_offset_delta: int

    @property
    def compression(self) -> CompressionType:
        return compression_type(self.attributes & ATTR_COMPRESSION_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def timestamp_type(self) -> TimestampType:
        return (
            TimestampType.LOG_APPEND_TIME
            if self.attributes & ATTR_TIMESTAMP_TYPE
            else TimestampType.CREATE_TIME
        )

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta


@dataclass(slots=True)
class RecordBatch(_AttributeView):
    """A decoded batch: every header field plus its records. `crc` is the stored value; encode recomputes it."""

    base_offset: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: list[BatchRecord]

    @property
    def size_in_bytes(self) -> int:
        """Size of this batch on disk, computed by encoding it."""
        return len(encode_batch(self))


@dataclass(slots=True)
class BatchHeader(_AttributeView):
    """The header of a batch as read from disk, without its records (see iter_kraft_batches)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size_in_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD


@dataclass(frozen=True, slots=True)
class TornTail:
    """Bytes at the end of a file that start a batch but end before it does (a crash mid-append)."""

    position: int
    size: int

    def describe(self) -> str:
        return f"truncated tail of {self.size} bytes at byte {self.position} ignored"


# ------------------------------------------------------------------ varints (zig-zag, as in DefaultRecord)


class _Malformed(Exception):
    """Internal: a record-level problem at a position of the buffer being parsed."""

    def __init__(self, pos: int, problem: str) -> None:
        super().__init__(problem)
        self.pos = pos
        self.problem = problem


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Zig-zag varint of at most 5 bytes (a Java int)."""
    start = pos
    u = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        u |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift > 28:
            raise _Malformed(start, "varint is longer than 5 bytes")
    if u > 0xFFFFFFFF:
        raise _Malformed(start, "varint does not fit in 32 bits")
    return (u >> 1) ^ -(u & 1), pos


def _read_varlong(buf: bytes, pos: int) -> tuple[int, int]:
    """Zig-zag varlong of at most 10 bytes (a Java long)."""
    start = pos
    u = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        u |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift > 63:
            raise _Malformed(start, "varlong is longer than 10 bytes")
    if u > 0xFFFFFFFFFFFFFFFF:
        raise _Malformed(start, "varlong does not fit in 64 bits")
    return (u >> 1) ^ -(u & 1), pos


def _uvarint_bytes(u: int) -> bytes:
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


_ZZ_CACHE_SIZE = 1 << 14
_ZZ_CACHE: tuple[bytes, ...] = tuple(_uvarint_bytes(n << 1) for n in range(_ZZ_CACHE_SIZE))
_MINUS_ONE = b"\x01"


def _varint_bytes(n: int) -> bytes:
    """Zig-zag varint encoding of a Java int."""
    if 0 <= n < _ZZ_CACHE_SIZE:
        return _ZZ_CACHE[n]
    if not -(1 << 31) <= n < (1 << 31):
        raise Zk2KraftError(f"{n} does not fit in a record varint (32-bit)")
    return _uvarint_bytes(((n << 1) ^ (n >> 31)) & 0xFFFFFFFF)


def _varlong_bytes(n: int) -> bytes:
    """Zig-zag varint encoding of a Java long."""
    if 0 <= n < _ZZ_CACHE_SIZE:
        return _ZZ_CACHE[n]
    if not -(1 << 63) <= n < (1 << 63):
        raise Zk2KraftError(f"{n} does not fit in a record varlong (64-bit)")
    return _uvarint_bytes(((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF)


# ------------------------------------------------------------------ record decoding


def _read_nullable_bytes(buf: bytes, pos: int, limit: int, what: str) -> tuple[bytes | None, int]:
    size, pos = _read_varint(buf, pos)
    if size < 0:
        if size != -1:
            raise _Malformed(pos, f"invalid {what} length {size}")
        return None, pos
    if pos + size > limit:
        raise _Malformed(pos, f"{what} of {size} bytes runs past the end of its record")
    return buf[pos : pos + size], pos + size


def _decode_records(buf: bytes, pos: int, end: int, count: int) -> list[BatchRecord]:
    """Decode exactly `count` records filling buf[pos:end]."""
    records: list[BatchRecord] = []
    for i in range(count):
        if pos >= end:
            raise _Malformed(pos, f"batch declares {count} records but its data ends after {i}")
        start = pos
        size, pos = _read_varint(buf, pos)
        rec_end = pos + size
        if size < 6 or rec_end > end:
            raise _Malformed(
                start, f"record {i} has impossible length {size} ({end - pos} bytes left in the batch)"
            )
        attributes = buf[pos]
        if attributes >= 0x80:
            attributes -= 0x100
        timestamp_delta, pos = _read_varlong(buf, pos + 1)
        offset_delta, pos = _read_varint(buf, pos)
        key, pos = _read_nullable_bytes(buf, pos, rec_end, "key")
        value, pos = _read_nullable_bytes(buf, pos, rec_end, "value")
        header_count, pos = _read_varint(buf, pos)
        if header_count < 0:
            raise _Malformed(pos, f"record {i} has negative header count {header_count}")
        headers: list[tuple[str, bytes | None]] = []
        for _ in range(header_count):
            if pos >= rec_end:
                raise _Malformed(pos, f"record {i} declares {header_count} headers that do not fit in it")
            raw_key, pos = _read_nullable_bytes(buf, pos, rec_end, "header key")
            if raw_key is None:
                raise _Malformed(pos, f"record {i} has a header with a null key")
            try:
                header_key = raw_key.decode("utf-8")
            except UnicodeDecodeError:
                raise _Malformed(pos, f"record {i} has a header key that is not UTF-8") from None
            header_value, pos = _read_nullable_bytes(buf, pos, rec_end, "header value")
            headers.append((header_key, header_value))
        if pos != rec_end:
            raise _Malformed(
                start, f"record {i} declares {size} bytes but its fields take {size + pos - rec_end}"
            )
        records.append(BatchRecord(attributes, timestamp_delta, offset_delta, key, value, headers))
    if pos != end:
        raise _Malformed(pos, f"{end - pos} bytes are left after the {count} records the batch declares")
    return records


# Canonical start of the i-th KRaft data record: attributes 0, timestampDelta 0, offsetDelta i, null key.
_KRAFT_PREFIXES: tuple[bytes, ...] = tuple(
    b"\x00\x00" + _ZZ_CACHE[i] + b"\x01" for i in range(_ZZ_CACHE_SIZE)
)


def _kraft_record(buf: bytes, pos: int, rec_end: int, i: int) -> KraftEntry:
    """Field-by-field decode of one record body buf[pos:rec_end] with KRaft's restrictions."""
    timestamp_delta, pos = _read_varlong(buf, pos + 1)  # attributes are unused in v2 records
    if timestamp_delta != 0:
        raise _Malformed(pos, f"record {i} has timestamp delta {timestamp_delta}; KRaft requires 0")
    offset_delta, pos = _read_varint(buf, pos)
    key, pos = _read_nullable_bytes(buf, pos, rec_end, "key")
    value, pos = _read_nullable_bytes(buf, pos, rec_end, "value")
    header_count, pos = _read_varint(buf, pos)
    if header_count != 0:
        raise _Malformed(pos, f"record {i} has {header_count} headers; KRaft requires 0")
    if pos != rec_end:
        raise _Malformed(pos, f"record {i} has {rec_end - pos} bytes after its header count")
    return offset_delta, key, value


def _decode_kraft_entries(buf: bytes, pos: int, end: int, count: int) -> list[KraftEntry]:
    """Fast path: (offsetDelta, key, value) per record, enforcing KRaft's timestampDelta 0 and no headers.

    Canonical KRaft data records (null key, value < 8 KiB) are recognised by comparing their fixed
    prefix and deriving the value length from the record length; anything else is parsed field by field.
    """
    entries: list[KraftEntry] = []
    append = entries.append
    prefixes = _KRAFT_PREFIXES
    zz = _ZZ_CACHE
    for i in range(count):
        start = pos
        b = buf[pos]
        if b < 0x80:
            size = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            b2 = buf[pos + 1]
            if b2 < 0x80:
                u = (b & 0x7F) | (b2 << 7)
                size = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                size, pos = _read_varint(buf, pos)
        rec_end = pos + size
        if size < 6 or rec_end > end:
            if start >= end:
                raise _Malformed(start, f"batch declares {count} records but its data ends after {i}")
            raise _Malformed(
                start, f"record {i} has impossible length {size} ({end - pos} bytes left in the batch)"
            )
        if buf[rec_end - 1] == 0 and i < _ZZ_CACHE_SIZE:
            prefix = prefixes[i]
            if buf.startswith(prefix, pos):
                p = pos + len(prefix)
                rest = rec_end - 1 - p  # varint(valueLength) + value
                if 0 < rest <= 64:
                    if buf[p] == (rest - 1) << 1:
                        append((i, None, buf[p + 1 : rec_end - 1]))
                        pos = rec_end
                        continue
                elif 66 <= rest <= 8193 and buf.startswith(zz[rest - 2], p):
                    append((i, None, buf[p + 2 : rec_end - 1]))
                    pos = rec_end
                    continue
        append(_kraft_record(buf, pos, rec_end, i))
        pos = rec_end
    if pos != end:
        raise _Malformed(pos, f"{end - pos} bytes are left after the {count} records the batch declares")
    return entries


# ------------------------------------------------------------------ batch iteration


def check_batch_file(data: bytes | bytearray | memoryview, source: str) -> None:
    """A file whose first bytes cannot begin a v2 record batch is no KRaft segment or snapshot at all.

    Checked before reading, because such a file would otherwise look like one torn batch (Kafka's
    FileLogInputStream reads the length before the magic byte) and read as empty.
    """
    if len(data) >= HEADER_UP_TO_MAGIC and data[HEADER_UP_TO_MAGIC - 1] != MAGIC:
        raise Zk2KraftError(
            f"{source}: not a KRaft log segment or snapshot (byte {HEADER_UP_TO_MAGIC - 1} would be a record "
            f"batch's magic, {MAGIC}, but is {data[HEADER_UP_TO_MAGIC - 1]})"
        )


class _BatchScanner:
    """Walks batch frames of a file image, checking lengths, magic and CRC; subclasses decode records."""

    def __init__(
        self,
        data: bytes | bytearray | memoryview,
        source: str,
        start_position: int,
        tolerate_torn_tail: bool,
    ) -> None:
        self.source = source
        self._bytes = data if isinstance(data, bytes) else None
        view = memoryview(data)
        self._view = view if view.format == "B" and view.ndim == 1 else view.cast("B")
        self._size = len(self._view)
        if not 0 <= start_position <= self._size:
            raise CorruptDataError(
                source, start_position, f"start position is outside the {self._size}-byte data"
            )
        self._tolerate = tolerate_torn_tail
        self.position = start_position
        """Byte position after the last complete batch returned so far (Kafka's validBytes when done)."""
        self.torn_tail: TornTail | None = None
        """Set when iteration stopped at a tail that ends mid-batch (only with tolerate_torn_tail)."""

    def _torn(self, pos: int, remaining: int, problem: str) -> None:
        if self._tolerate:
            self.torn_tail = TornTail(pos, remaining)
            return
        raise CorruptDataError(self.source, pos, f"file ends mid-batch: {problem}")

    def _frame(self) -> tuple[int, BatchHeader, bytes, int] | None:
        """Next verified frame as (position, header, buffer, offset of the batch in buffer), or None at the end."""
        pos = self.position
        remaining = self._size - pos
        if remaining == 0 or self.torn_tail is not None:
            return None
        view = self._view
        if remaining < HEADER_UP_TO_MAGIC:
            self._torn(pos, remaining, f"only {remaining} bytes left, less than a batch header")
            return None
        (length,) = _LENGTH.unpack_from(view, pos + 8)
        if length < MIN_BATCH_LENGTH:
            raise CorruptDataError(
                self.source,
                pos,
                f"impossible batch length {length} (a v2 batch has at least {MIN_BATCH_LENGTH})",
            )
        size = length + LOG_OVERHEAD
        if size > remaining:
            self._torn(pos, remaining, f"batch of {size} bytes but only {remaining} bytes left")
            return None
        magic = view[pos + 16]
        if magic != MAGIC:
            raise CorruptDataError(
                self.source, pos + 16, f"record batch magic {magic}; only magic 2 is supported"
            )
        header = BatchHeader(*_HEADER.unpack_from(view, pos))
        actual = crc32c(view[pos + CRC_START : pos + size])
        if actual != header.crc:
            raise CorruptDataError(
                self.source,
                pos,
                f"CRC-32C mismatch: batch stores {header.crc:#010x} but its bytes [{CRC_START}, {size}) give {actual:#010x}",
            )
        if header.attributes & ATTR_COMPRESSION_MASK > CompressionType.ZSTD:
            raise CorruptDataError(
                self.source,
                pos + CRC_START,
                f"unknown compression codec id {header.attributes & ATTR_COMPRESSION_MASK}",
            )
        if header.record_count < 0:
            raise CorruptDataError(self.source, pos + 57, f"negative record count {header.record_count}")
        if self._bytes is not None:
            buf, base = self._bytes, pos
        else:
            buf, base = bytes(view[pos : pos + size]), 0
        return pos, header, buf, base

    def _records_area(self, pos: int, header: BatchHeader, buf: bytes, base: int) -> tuple[bytes, int, int]:
        """(buffer, start, end) of the record bytes, decompressed when the batch is compressed."""
        start = base + HEADER_SIZE
        end = base + header.size_in_bytes
        codec = header.compression
        if codec is CompressionType.NONE:
            return buf, start, end
        plain = decompress(codec, buf[start:end], self.source, pos + HEADER_SIZE)
        return plain, 0, len(plain)

    def _record_error(
        self, pos: int, header: BatchHeader, base: int, exc: _Malformed | IndexError
    ) -> CorruptDataError:
        compressed = header.compression is not CompressionType.NONE
        if isinstance(exc, _Malformed):
            where, problem = exc.pos, exc.problem
        else:
            where, problem = None, "record data ends in the middle of a field"
        if compressed:
            detail = f" (decompressed byte {where})" if where is not None else ""
            return CorruptDataError(
                self.source, pos + HEADER_SIZE, f"in {header.compression.name} records{detail}: {problem}"
            )
        offset = pos + (where - base) if where is not None else pos
        return CorruptDataError(self.source, offset, f"in batch at byte {pos}: {problem}")


class BatchIterator(_BatchScanner):
    """Yields `(position, RecordBatch)`; after exhaustion `torn_tail` and `position` describe how the file ended."""

    def __iter__(self) -> BatchIterator:
        return self

    def __next__(self) -> tuple[int, RecordBatch]:
        frame = self._frame()
        if frame is None:
            raise StopIteration
        pos, h, buf, base = frame
        area, start, end = self._records_area(pos, h, buf, base)
        try:
            records = _decode_records(area, start, end, h.record_count)
        except (_Malformed, IndexError) as exc:
            raise self._record_error(pos, h, base, exc) from None
        self.position = pos + h.size_in_bytes
        batch = RecordBatch(
            h.base_offset,
            h.partition_leader_epoch,
            h.magic,
            h.crc,
            h.attributes,
            h.last_offset_delta,
            h.base_timestamp,
            h.max_timestamp,
            h.producer_id,
            h.producer_epoch,
            h.base_sequence,
            records,
        )
        return pos, batch


class KraftBatchIterator(_BatchScanner):
    """Yields `(position, BatchHeader, [(offsetDelta, key, value), ...])`: the fast path for metadata logs.

    Records must have timestampDelta 0 and no headers, as Kafka's KRaft RecordsIterator requires.
    """

    def __iter__(self) -> KraftBatchIterator:
        return self

    def __next__(self) -> tuple[int, BatchHeader, list[KraftEntry]]:
        frame = self._frame()
        if frame is None:
            raise StopIteration
        pos, header, buf, base = frame
        area, start, end = self._records_area(pos, header, buf, base)
        try:
            entries = _decode_kraft_entries(area, start, end, header.record_count)
        except (_Malformed, IndexError) as exc:
            raise self._record_error(pos, header, base, exc) from None
        self.position = pos + header.size_in_bytes
        return pos, header, entries


def iter_batches(
    data: bytes | bytearray | memoryview,
    source: str,
    *,
    start_position: int = 0,
    tolerate_torn_tail: bool = False,
) -> BatchIterator:
    """Iterate the batches of a segment/snapshot image, fully decoded and verified.

    A file that ends mid-batch raises CorruptDataError, unless `tolerate_torn_tail` (the newest segment,
    as Kafka's log recovery treats it): then iteration stops and the iterator's `torn_tail` says where.
    """
    return BatchIterator(data, source, start_position, tolerate_torn_tail)


def iter_kraft_batches(
    data: bytes | bytearray | memoryview,
    source: str,
    *,
    start_position: int = 0,
    tolerate_torn_tail: bool = False,
) -> KraftBatchIterator:
    """Like iter_batches, but yields headers plus `(offsetDelta, key, value)` tuples instead of record objects."""
    return KraftBatchIterator(data, source, start_position, tolerate_torn_tail)


def peek_header(data: bytes | bytearray | memoryview, source: str, position: int = 0) -> BatchHeader:
    """The header of the batch at `position`, after checking its length and magic (not its CRC)."""
    size = len(data) - position
    if size < HEADER_SIZE:
        raise CorruptDataError(
            source, position, f"only {size} bytes left, less than a {HEADER_SIZE}-byte batch header"
        )
    header = BatchHeader(*_HEADER.unpack_from(data, position))
    if header.batch_length < MIN_BATCH_LENGTH or header.size_in_bytes > size:
        raise CorruptDataError(
            source, position, f"batch length {header.batch_length} does not fit the {size} bytes available"
        )
    if header.magic != MAGIC:
        raise CorruptDataError(
            source, position + 16, f"record batch magic {header.magic}; only magic 2 is supported"
        )
    return header


def decode_batch(data: bytes | bytearray | memoryview, source: str) -> RecordBatch:
    """Decode bytes that hold exactly one batch."""
    batches = iter_batches(data, source)
    first = next(batches, None)
    if first is None:
        raise CorruptDataError(source, 0, "no record batch in empty data")
    if batches.position != len(data):
        raise CorruptDataError(
            source, batches.position, f"{len(data) - batches.position} bytes follow the batch"
        )
    return first[1]


# ------------------------------------------------------------------ encoding


def _nullable_bytes(value: bytes | None) -> bytes:
    if value is None:
        return _MINUS_ONE
    return _varint_bytes(len(value)) + value


def _encode_record(record: BatchRecord) -> bytes:
    if not -128 <= record.attributes <= 255:
        raise Zk2KraftError(f"record attributes {record.attributes} do not fit in a byte")
    parts = [
        bytes((record.attributes & 0xFF,)),
        _varlong_bytes(record.timestamp_delta),
        _varint_bytes(record.offset_delta),
        _nullable_bytes(record.key),
        _nullable_bytes(record.value),
        _varint_bytes(len(record.headers)),
    ]
    for header_key, header_value in record.headers:
        parts.append(_nullable_bytes(header_key.encode("utf-8")))
        parts.append(_nullable_bytes(header_value))
    body = b"".join(parts)
    return _varint_bytes(len(body)) + body


def _frame_batch(
    base_offset: int,
    partition_leader_epoch: int,
    after_crc_header: bytes,
    records_blob: bytes,
) -> bytes:
    crc = crc32c(records_blob, crc32c(after_crc_header))
    length = HEADER_SIZE - LOG_OVERHEAD + len(records_blob)
    if length > 0x7FFFFFFF:
        raise Zk2KraftError(f"batch of {length} bytes exceeds the int32 batch length")
    try:
        prefix = _PREFIX.pack(base_offset, length, partition_leader_epoch, MAGIC)
    except struct.error as exc:
        raise Zk2KraftError(f"batch header field out of range: {exc}") from None
    return b"".join((prefix, crc.to_bytes(4, "big"), after_crc_header, records_blob))


def encode_batch(batch: RecordBatch) -> bytes:
    """Kafka's bytes for `batch`: batchLength and CRC recomputed, every other field as given."""
    if batch.magic != MAGIC:
        raise UnsupportedVersionError(f"cannot encode a record batch with magic {batch.magic}; only magic 2")
    codec = batch.compression
    records_blob = b"".join([_encode_record(r) for r in batch.records])
    if codec is not CompressionType.NONE:
        records_blob = compress(codec, records_blob)
    try:
        after_crc = _AFTER_CRC.pack(
            batch.attributes,
            batch.last_offset_delta,
            batch.base_timestamp,
            batch.max_timestamp,
            batch.producer_id,
            batch.producer_epoch,
            batch.base_sequence,
            len(batch.records),
        )
    except struct.error as exc:
        raise Zk2KraftError(f"batch header field out of range: {exc}") from None
    return _frame_batch(batch.base_offset, batch.partition_leader_epoch, after_crc, records_blob)


def build_batch(
    base_offset: int,
    leader_epoch: int,
    timestamp_ms: int,
    records: Sequence[tuple[bytes | None, bytes]],
    control: bool,
) -> RecordBatch:
    """A batch exactly as KRaft's BatchBuilder writes it: no compression, no producer, one timestamp."""
    if not records:
        raise Zk2KraftError("KRaft never writes an empty record batch")
    return RecordBatch(
        base_offset=base_offset,
        partition_leader_epoch=leader_epoch,
        magic=MAGIC,
        crc=0,
        attributes=ATTR_CONTROL if control else 0,
        last_offset_delta=len(records) - 1,
        base_timestamp=timestamp_ms,
        max_timestamp=timestamp_ms,
        producer_id=NO_PRODUCER_ID,
        producer_epoch=NO_PRODUCER_EPOCH,
        base_sequence=NO_SEQUENCE,
        records=[BatchRecord(0, 0, i, key, value, []) for i, (key, value) in enumerate(records)],
    )


def encode_kraft_batch(
    base_offset: int,
    leader_epoch: int,
    timestamp_ms: int,
    records: Sequence[tuple[bytes | None, bytes]],
    control: bool,
) -> bytes:
    """Same bytes as encode_batch(build_batch(...)) without building record objects (for big snapshots)."""
    if not records:
        raise Zk2KraftError("KRaft never writes an empty record batch")
    parts: list[bytes] = []
    append = parts.append
    varint = _varint_bytes
    heads = _NULL_KEY_HEADS
    for i, (key, value) in enumerate(records):
        # attributes 0, timestampDelta 0, offsetDelta i, key, value, no headers: the value is copied once,
        # into the join (a key is rare: KRaft's data records have none).
        if key is None and i < _ZZ_CACHE_SIZE:
            head = heads[i]
        else:
            head = b"\x00\x00" + varint(i) + (_MINUS_ONE if key is None else _nullable_bytes(key))
        size = len(value)
        length = varint(size)
        append(varint(len(head) + len(length) + size + 1))
        append(head)
        append(length)
        append(value)
        append(b"\x00")
    after_crc = _AFTER_CRC.pack(
        ATTR_CONTROL if control else 0,
        len(records) - 1,
        timestamp_ms,
        timestamp_ms,
        NO_PRODUCER_ID,
        NO_PRODUCER_EPOCH,
        NO_SEQUENCE,
        len(records),
    )
    return _frame_batch(base_offset, leader_epoch, after_crc, b"".join(parts))


_NULL_KEY_HEADS = tuple(b"\x00\x00" + _ZZ_CACHE[i] + _MINUS_ONE for i in range(_ZZ_CACHE_SIZE))
"""attributes, timestampDelta, offsetDelta i and a null key: how every KRaft data record starts."""
MAX_DATA_RECORD_OVERHEAD = 19
"""Most bytes a KRaft data record (null key, no headers) adds to its value: the attributes byte, three
one-byte varints (timestampDelta 0, key length -1, header count 0) and three of at most 5 bytes (record
length, offsetDelta, value length)."""


def _zigzag_size(n: int) -> int:
    u = (n << 1) ^ (n >> 63)
    size = 1
    while u >= 0x80:
        u >>= 7
        size += 1
    return size


def kraft_data_record_size(offset_delta: int, value_size: int) -> int:
    """Bytes one KRaft data record (null key, no headers) takes in a batch at `offset_delta`."""
    body = 1 + 1 + _zigzag_size(offset_delta) + 1 + _zigzag_size(value_size) + value_size + 1
    return _zigzag_size(body) + body
