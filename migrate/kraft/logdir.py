"""Files of a KRaft metadata log directory, read and written exactly as Kafka 3.9 does.

Segments (`<20-digit base offset>.log`) with their `.index`/`.timeindex`, `leader-epoch-checkpoint`,
`partition.metadata`, `quorum-state`, `meta.properties` (Java properties format) and snapshot file names.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import struct
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from crc32c import crc32c

from migrate.atomic import atomic_write_bytes, atomic_writer
from migrate.errors import CorruptDataError, UnsupportedVersionError, Zk2KraftError
from migrate.jvm import concurrent_hash_map_order
from migrate.kraft.batch import CRC_START, RecordBatch, encode_batch, peek_header

PathLike = str | os.PathLike[str]

METADATA_TOPIC_ID = uuid.UUID(int=1)  # Uuid.METADATA_TOPIC_ID, AAAAAAAAAAAAAAAAAAAAAQ
ZERO_UUID = uuid.UUID(int=0)
INDEX_INTERVAL_BYTES = 4096  # index.interval.bytes default

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".checkpoint"

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
QUORUM_STATE = "quorum-state"
META_PROPERTIES = "meta.properties"
BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


def _in_range(value: int, bounds: tuple[int, int]) -> bool:
    return bounds[0] <= value <= bounds[1]


# ------------------------------------------------------------------ uuid text form (Kafka's Uuid.toString)

_BASE64URL = re.compile(r"[A-Za-z0-9_-]{22}(==)?")


def uuid_to_base64(value: uuid.UUID) -> str:
    """Kafka's text form of a Uuid: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


def uuid_from_base64(text: str, source: str) -> uuid.UUID:
    """Parse Kafka's base64url Uuid text; errors name `source`."""
    if not _BASE64URL.fullmatch(text):
        raise CorruptDataError(source, None, f"{text!r} is not a base64url Kafka Uuid (22 characters)")
    try:
        return uuid.UUID(bytes=base64.urlsafe_b64decode(text[:22] + "=="))
    except (binascii.Error, ValueError):
        raise CorruptDataError(source, None, f"{text!r} is not a base64url Kafka Uuid") from None


# ------------------------------------------------------------------ Java primitives


_JAVA_INT = re.compile(r"[+-]?[0-9]+")


def _parse_java_int(text: str, bounds: tuple[int, int], source: str, what: str) -> int:
    """Integer.parseInt / Long.parseLong on ASCII digits: no surrounding whitespace allowed."""
    if not _JAVA_INT.fullmatch(text):
        raise CorruptDataError(source, None, f"{what} {text!r} is not a base-10 integer")
    value = int(text)
    if not _in_range(value, bounds):
        raise CorruptDataError(source, None, f"{what} {value} is out of range")
    return value


def _java_lines(text: str) -> list[str]:
    """Lines as BufferedReader.readLine splits them (\\n, \\r or \\r\\n; no empty line after a final one)."""
    lines = re.split(r"\r\n|\r|\n", text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _decode_text(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptDataError(source, exc.start, "file is not valid UTF-8") from None


# ------------------------------------------------------------------ segments


@dataclass(frozen=True, slots=True)
class SegmentFile:
    """One `.log` segment of a partition directory."""

    base_offset: int
    path: Path


_SEGMENT_NAME = re.compile(r"(\d{20})\.log")


def segment_file_name(base_offset: int, suffix: str = LOG_SUFFIX) -> str:
    """`00000000000000012345.log` (or `.index`, `.timeindex`, ...) for a base offset."""
    if not 0 <= base_offset <= _INT64[1]:
        raise Zk2KraftError(f"segment base offset {base_offset} is not a non-negative int64")
    return f"{base_offset:020d}{suffix}"


def parse_segment_file_name(name: str) -> int | None:
    """Base offset of a `<20 digits>.log` name; None for every other file (indexes, .deleted, .swap, ...)."""
    match = _SEGMENT_NAME.fullmatch(name)
    if match is None:
        return None
    offset = int(match.group(1))
    return offset if offset <= _INT64[1] else None


def list_segments(partition_dir: PathLike) -> list[SegmentFile]:
    """The `.log` segments of a partition directory in base-offset order."""
    found = []
    for entry in Path(partition_dir).iterdir():
        offset = parse_segment_file_name(entry.name)
        if offset is not None and entry.is_file():
            found.append(SegmentFile(offset, entry))
    return sorted(found, key=lambda s: s.base_offset)


# ------------------------------------------------------------------ offset and time indexes


@dataclass(frozen=True, slots=True)
class OffsetIndexEntry:
    """`.index` entry: the batch whose last offset is `offset` starts at byte `position` of the segment."""

    offset: int
    position: int


@dataclass(frozen=True, slots=True)
class TimeIndexEntry:
    """`.timeindex` entry: the largest timestamp seen up to `offset`."""

    timestamp: int
    offset: int


_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class SegmentIndexBuilder:
    """Index entries exactly as Kafka's LogSegment.recover rebuilds them, fed one batch at a time.

    An offset entry (batch last offset, batch position) is added before a batch when more than
    `interval_bytes` have been appended since the previous entry; the time index then gets the largest
    timestamp so far if it grew. Closing the segment appends a final time entry (LogSegment.close/roll).
    """

    def __init__(self, base_offset: int, interval_bytes: int = INDEX_INTERVAL_BYTES) -> None:
        self.base_offset = base_offset
        self.interval_bytes = interval_bytes
        self.offset_entries: list[OffsetIndexEntry] = []
        self.time_entries: list[TimeIndexEntry] = []
        self.valid_bytes = 0
        self._last_index_entry = 0
        self._max_timestamp = -1  # RecordBatch.NO_TIMESTAMP
        self._offset_of_max_timestamp = base_offset
        self._last_offset = base_offset - 1

    def _relative(self, offset: int) -> int:
        relative = offset - self.base_offset
        if not 0 <= relative <= _INT32[1]:
            raise Zk2KraftError(
                f"offset {offset} cannot be indexed in a segment with base offset {self.base_offset}"
            )
        return relative

    def _maybe_append_time(self, timestamp: int, offset: int) -> None:
        last = self.time_entries[-1].timestamp if self.time_entries else -1
        if timestamp > last:
            self._relative(offset)
            self.time_entries.append(TimeIndexEntry(timestamp, offset))

    def add_batch(self, base_offset: int, last_offset: int, max_timestamp: int, size: int) -> None:
        """Account for the next batch of the segment (appended at byte `valid_bytes`)."""
        if base_offset < self.base_offset:
            raise Zk2KraftError(
                f"batch offset {base_offset} is below the segment base offset {self.base_offset}"
            )
        if base_offset <= self._last_offset or last_offset < base_offset:
            raise Zk2KraftError(
                f"batch offsets {base_offset}..{last_offset} do not follow offset {self._last_offset}"
            )
        self._relative(last_offset)
        if max_timestamp > self._max_timestamp:
            self._max_timestamp = max_timestamp
            self._offset_of_max_timestamp = last_offset
        if self.valid_bytes - self._last_index_entry > self.interval_bytes:
            self.offset_entries.append(OffsetIndexEntry(last_offset, self.valid_bytes))
            self._maybe_append_time(self._max_timestamp, self._offset_of_max_timestamp)
            self._last_index_entry = self.valid_bytes
        self.valid_bytes += size
        self._last_offset = last_offset

    @property
    def next_offset(self) -> int:
        """The offset after the last batch added (the base offset while empty)."""
        return self._last_offset + 1

    def close(self) -> tuple[bytes, bytes]:
        """Append the closing time entry and return the `.index` and `.timeindex` file contents."""
        self._maybe_append_time(self._max_timestamp, self._offset_of_max_timestamp)
        return (
            encode_offset_index(self.offset_entries, self.base_offset),
            encode_time_index(self.time_entries, self.base_offset),
        )


def encode_offset_index(entries: Iterable[OffsetIndexEntry], base_offset: int) -> bytes:
    """`.index` bytes: int32 relative offset + int32 position per entry."""
    try:
        return b"".join(_OFFSET_ENTRY.pack(e.offset - base_offset, e.position) for e in entries)
    except struct.error as exc:
        raise Zk2KraftError(f"offset index entry out of range: {exc}") from None


def encode_time_index(entries: Iterable[TimeIndexEntry], base_offset: int) -> bytes:
    """`.timeindex` bytes: int64 timestamp + int32 relative offset per entry."""
    try:
        return b"".join(_TIME_ENTRY.pack(e.timestamp, e.offset - base_offset) for e in entries)
    except struct.error as exc:
        raise Zk2KraftError(f"time index entry out of range: {exc}") from None


def decode_offset_index(data: bytes, base_offset: int, source: str) -> list[OffsetIndexEntry]:
    """Entries of a `.index` file (a preallocated active index also shows its zero padding)."""
    if len(data) % _OFFSET_ENTRY.size:
        raise CorruptDataError(source, len(data), f"offset index size {len(data)} is not a multiple of 8")
    return [OffsetIndexEntry(base_offset + rel, pos) for rel, pos in _OFFSET_ENTRY.iter_unpack(data)]


def decode_time_index(data: bytes, base_offset: int, source: str) -> list[TimeIndexEntry]:
    """Entries of a `.timeindex` file."""
    if len(data) % _TIME_ENTRY.size:
        raise CorruptDataError(source, len(data), f"time index size {len(data)} is not a multiple of 12")
    return [TimeIndexEntry(ts, base_offset + rel) for ts, rel in _TIME_ENTRY.iter_unpack(data)]


@dataclass(frozen=True, slots=True)
class WrittenSegment:
    """What write_segment produced."""

    log_path: Path
    index_path: Path
    time_index_path: Path
    size_in_bytes: int
    batch_count: int
    next_offset: int


def write_segment(
    partition_dir: PathLike,
    base_offset: int,
    batches: Iterable[RecordBatch | bytes],
    *,
    interval_bytes: int = INDEX_INTERVAL_BYTES,
) -> WrittenSegment:
    """Write `<base>.log` plus its `.index`/`.timeindex` (as after a clean close), each atomically.

    Stale index files are removed first and the log is renamed into place before its indexes, so a
    crash leaves either no indexes (Kafka rebuilds them) or ones that match the log.
    """
    directory = Path(partition_dir)
    log_path = directory / segment_file_name(base_offset)
    index_path = directory / segment_file_name(base_offset, INDEX_SUFFIX)
    time_index_path = directory / segment_file_name(base_offset, TIME_INDEX_SUFFIX)
    builder = SegmentIndexBuilder(base_offset, interval_bytes)
    count = 0
    directory.mkdir(parents=True, exist_ok=True)
    for stale in (index_path, time_index_path):
        stale.unlink(missing_ok=True)
    with atomic_writer(log_path, "wb") as out:
        for item in batches:
            raw = encode_batch(item) if isinstance(item, RecordBatch) else item
            name = f"batch {count} for {log_path}"
            header = peek_header(raw, name)
            if header.size_in_bytes != len(raw):
                raise CorruptDataError(name, header.size_in_bytes, f"{len(raw)} bytes given for one batch")
            if crc32c(memoryview(raw)[CRC_START:]) != header.crc:
                raise CorruptDataError(name, 0, "CRC-32C does not match the batch bytes")
            builder.add_batch(header.base_offset, header.last_offset, header.max_timestamp, len(raw))
            out.write(raw)
            count += 1
    index_bytes, time_index_bytes = builder.close()
    atomic_write_bytes(index_path, index_bytes)
    atomic_write_bytes(time_index_path, time_index_bytes)
    return WrittenSegment(
        log_path, index_path, time_index_path, builder.valid_bytes, count, builder.next_offset
    )


# ------------------------------------------------------------------ leader-epoch-checkpoint


@dataclass(frozen=True, slots=True)
class EpochEntry:
    """One leader epoch and the first offset written in it."""

    epoch: int
    start_offset: int


_WHITESPACE = re.compile(r"\s+")


def parse_leader_epoch_checkpoint(data: bytes, source: str) -> list[EpochEntry]:
    """Parse `leader-epoch-checkpoint` (version line 0, entry count, `epoch offset` lines) as Kafka does."""
    lines = _java_lines(_decode_text(data, source))
    if not lines:
        return []  # CheckpointFile reads an empty file as no entries
    version = _parse_java_int(lines[0], _INT32, source, "checkpoint version")
    if version != 0:
        raise UnsupportedVersionError(f"{source}: checkpoint version {version}, expected 0")
    if len(lines) == 1:
        return []
    expected = _parse_java_int(lines[1], _INT32, source, "entry count")
    entries = []
    for number, line in enumerate(lines[2:], start=3):
        fields = _WHITESPACE.split(line)
        if len(fields) != 2:
            raise CorruptDataError(source, None, f"line {number} {line!r} is not '<epoch> <start offset>'")
        epoch = _parse_java_int(fields[0], _INT32, source, f"line {number} epoch")
        offset = _parse_java_int(fields[1], _INT64, source, f"line {number} start offset")
        entries.append(EpochEntry(epoch, offset))
    if len(entries) != expected:
        raise CorruptDataError(
            source, None, f"header says {expected} entries but the file has {len(entries)}"
        )
    return entries


def encode_leader_epoch_checkpoint(entries: Iterable[EpochEntry]) -> bytes:
    """`leader-epoch-checkpoint` bytes as Kafka's CheckpointFile writes them."""
    items = list(entries)
    lines = ["0", str(len(items))] + [f"{e.epoch} {e.start_offset}" for e in items]
    return "".join(line + "\n" for line in lines).encode("ascii")


def read_leader_epoch_checkpoint(path: PathLike) -> list[EpochEntry]:
    """Read and parse a `leader-epoch-checkpoint` file."""
    return parse_leader_epoch_checkpoint(Path(path).read_bytes(), str(path))


def write_leader_epoch_checkpoint(path: PathLike, entries: Iterable[EpochEntry]) -> None:
    """Atomically write a `leader-epoch-checkpoint` file."""
    atomic_write_bytes(path, encode_leader_epoch_checkpoint(entries))


# ------------------------------------------------------------------ partition.metadata


def parse_partition_metadata(data: bytes, source: str) -> uuid.UUID:
    """The topic id recorded in `partition.metadata` (`version: 0` / `topic_id: <base64url>`)."""
    lines = _java_lines(_decode_text(data, source))
    if len(lines) < 2:
        raise CorruptDataError(source, None, "expected a 'version:' line and a 'topic_id:' line")
    version_fields = _WHITESPACE.split(lines[0])
    if len(version_fields) != 2 or version_fields[0] != "version:":
        raise CorruptDataError(source, None, f"malformed version line {lines[0]!r}")
    version = _parse_java_int(version_fields[1], _INT32, source, "version")
    if version != 0:
        raise UnsupportedVersionError(f"{source}: partition metadata version {version}, expected 0")
    id_fields = _WHITESPACE.split(lines[1])
    if len(id_fields) != 2 or id_fields[0] != "topic_id:":
        raise CorruptDataError(source, None, f"malformed topic id line {lines[1]!r}")
    topic_id = uuid_from_base64(id_fields[1], source)
    if topic_id == ZERO_UUID:
        raise CorruptDataError(source, None, "topic id is the zero Uuid")
    return topic_id


def encode_partition_metadata(topic_id: uuid.UUID = METADATA_TOPIC_ID) -> bytes:
    """Exact `partition.metadata` bytes (no trailing newline)."""
    return f"version: 0\ntopic_id: {uuid_to_base64(topic_id)}".encode("ascii")


def read_partition_metadata(path: PathLike) -> uuid.UUID:
    """Read the topic id from a `partition.metadata` file."""
    return parse_partition_metadata(Path(path).read_bytes(), str(path))


def write_partition_metadata(path: PathLike, topic_id: uuid.UUID = METADATA_TOPIC_ID) -> None:
    """Atomically write a `partition.metadata` file."""
    atomic_write_bytes(path, encode_partition_metadata(topic_id))


# ------------------------------------------------------------------ quorum-state


@dataclass(frozen=True, slots=True)
class QuorumState:
    """`quorum-state`: QuorumStateData plus `data_version` (0 with kraft.version 0, 1 with kraft.version 1)."""

    leader_id: int = -1
    leader_epoch: int = -1
    voted_id: int = -1
    data_version: int = 1
    voted_directory_id: uuid.UUID = ZERO_UUID  # data_version 1 only
    current_voters: tuple[int, ...] | None = None  # data_version 0 only (null or a list)
    cluster_id: str = ""  # data_version 0 only
    applied_offset: int = 0  # data_version 0 only


def _json_int(obj: Mapping[str, Any], key: str, bounds: tuple[int, int], source: str) -> int:
    if key not in obj:
        raise CorruptDataError(source, None, f"field {key!r} is missing")
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, int) or not _in_range(value, bounds):
        raise CorruptDataError(source, None, f"field {key!r} is {value!r}, not an integer in range")
    return value


def _json_str(obj: Mapping[str, Any], key: str, source: str) -> str:
    if key not in obj:
        raise CorruptDataError(source, None, f"field {key!r} is missing")
    value = obj[key]
    if not isinstance(value, str):
        raise CorruptDataError(source, None, f"field {key!r} is {value!r}, not a string")
    return value


def parse_quorum_state(data: bytes, source: str) -> QuorumState:
    """Parse the single JSON line of `quorum-state` (data_version 0 or 1) as FileQuorumStateStore does."""
    lines = _java_lines(_decode_text(data, source))
    if not lines:
        raise CorruptDataError(source, 0, "file is empty")
    try:
        obj, end = json.JSONDecoder().raw_decode(lines[0])
    except json.JSONDecodeError as exc:
        raise CorruptDataError(source, exc.pos, f"invalid JSON: {exc.msg}") from None
    if lines[0][end:].strip():
        raise CorruptDataError(source, end, "unexpected text after the JSON object")
    if not isinstance(obj, dict):
        raise CorruptDataError(source, 0, "quorum state is not a JSON object")
    version = _json_int(obj, "data_version", (-(2**15), 2**15 - 1), source)
    if version not in (0, 1):
        raise UnsupportedVersionError(f"{source}: data_version ({version}) is not within 0 and 1")
    leader_id = _json_int(obj, "leaderId", _INT32, source)
    leader_epoch = _json_int(obj, "leaderEpoch", _INT32, source)
    voted_id = _json_int(obj, "votedId", _INT32, source)
    if version == 1:
        directory = uuid_from_base64(_json_str(obj, "votedDirectoryId", source), source)
        return QuorumState(
            leader_id, leader_epoch, voted_id, 1, voted_directory_id=directory, current_voters=None
        )
    cluster_id = _json_str(obj, "clusterId", source)
    applied_offset = _json_int(obj, "appliedOffset", _INT64, source)
    if "currentVoters" not in obj:
        raise CorruptDataError(source, None, "field 'currentVoters' is missing")
    raw_voters = obj["currentVoters"]
    voters: tuple[int, ...] | None = None
    if raw_voters is not None:
        if not isinstance(raw_voters, list) or not all(isinstance(v, dict) for v in raw_voters):
            raise CorruptDataError(source, None, "field 'currentVoters' is not a list of objects")
        voters = tuple(_json_int(v, "voterId", _INT32, source) for v in raw_voters)
    return QuorumState(
        leader_id,
        leader_epoch,
        voted_id,
        0,
        current_voters=voters,
        cluster_id=cluster_id,
        applied_offset=applied_offset,
    )


def encode_quorum_state(state: QuorumState) -> bytes:
    """The one-line JSON Kafka writes (its key order, no spaces, no trailing newline)."""
    for name, value, bounds in (
        ("leader_id", state.leader_id, _INT32),
        ("leader_epoch", state.leader_epoch, _INT32),
        ("voted_id", state.voted_id, _INT32),
        ("applied_offset", state.applied_offset, _INT64),
    ):
        if not _in_range(value, bounds):
            raise Zk2KraftError(f"quorum state {name} {value} is out of range")
    obj: dict[str, Any]
    if state.data_version == 0:
        voters = None if state.current_voters is None else [{"voterId": v} for v in state.current_voters]
        obj = {
            "clusterId": state.cluster_id,
            "leaderId": state.leader_id,
            "leaderEpoch": state.leader_epoch,
            "votedId": state.voted_id,
            "appliedOffset": state.applied_offset,
            "currentVoters": voters,
            "data_version": 0,
        }
    elif state.data_version == 1:
        obj = {
            "leaderId": state.leader_id,
            "leaderEpoch": state.leader_epoch,
            "votedId": state.voted_id,
            "votedDirectoryId": uuid_to_base64(state.voted_directory_id),
            "data_version": 1,
        }
    else:
        raise UnsupportedVersionError(
            f"quorum-state data_version {state.data_version} does not exist (0 or 1)"
        )
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def read_quorum_state(path: PathLike) -> QuorumState:
    """Read and parse a `quorum-state` file."""
    return parse_quorum_state(Path(path).read_bytes(), str(path))


def write_quorum_state(path: PathLike, state: QuorumState) -> None:
    """Atomically write a `quorum-state` file."""
    atomic_write_bytes(path, encode_quorum_state(state))


# ------------------------------------------------------------------ Java .properties


_PROPERTY_WHITESPACE = " \t\f"


def _logical_lines(text: str) -> Iterator[str]:
    """Logical lines as java.util.Properties.load reads them.

    Comment lines (first non-blank char `#`/`!`) and blank lines are dropped; a line ending in an odd
    number of backslashes continues on the next natural line, whose leading whitespace is skipped.
    """
    line: list[str] = []
    skip_whitespace = True
    appended_line_begin = False
    preceding_backslash = False
    in_comment = False
    skip_lf = False
    last = len(text) - 1
    for index, c in enumerate(text):
        if skip_lf:
            skip_lf = False
            if c == "\n":
                continue
        if in_comment:
            if c in "\r\n":
                in_comment = False
                skip_whitespace = True
                skip_lf = c == "\r"
            continue
        if skip_whitespace:
            if c in _PROPERTY_WHITESPACE:
                continue
            if not appended_line_begin and c in "\r\n":
                continue
            skip_whitespace = False
            appended_line_begin = False
        if not line and c in "#!":
            in_comment = True
            continue
        if c not in "\r\n":
            line.append(c)
            preceding_backslash = c == "\\" and not preceding_backslash
            continue
        if not line:
            skip_whitespace = True
            continue
        if preceding_backslash:
            line.pop()
            if index == last:
                # Java returns the line (even an empty one) when the input ends right after it.
                yield "".join(line)
                return
            skip_whitespace = True
            appended_line_begin = True
            preceding_backslash = False
            skip_lf = c == "\r"
        else:
            yield "".join(line)
            line = []
            skip_whitespace = True
            skip_lf = c == "\r"
    if line:
        if preceding_backslash:
            line.pop()
        yield "".join(line)


def _split_property(line: str) -> tuple[str, str]:
    """Key and raw value of a logical line: the key ends at the first unescaped `=`, `:` or whitespace."""
    key_end = len(line)
    value_start = len(line)
    has_separator = False
    escaped = False
    for i, c in enumerate(line):
        if not escaped and c in "=:":
            key_end, value_start, has_separator = i, i + 1, True
            break
        if not escaped and c in _PROPERTY_WHITESPACE:
            key_end, value_start = i, i + 1
            break
        escaped = c == "\\" and not escaped
    while value_start < len(line):
        c = line[value_start]
        if c not in _PROPERTY_WHITESPACE:
            if not has_separator and c in "=:":
                has_separator = True
            else:
                break
        value_start += 1
    return line[:key_end], line[value_start:]


_ESCAPES = {"t": "\t", "r": "\r", "n": "\n", "f": "\f"}


def _unescape(text: str, source: str) -> str:
    """Properties.loadConvert: `\\uXXXX`, `\\t\\r\\n\\f`, and `\\x` -> `x` for any other x."""
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        i += 1
        if c != "\\" or i == len(text):
            out.append(c)
            continue
        c = text[i]
        i += 1
        if c == "u":
            digits = text[i : i + 4]
            if len(digits) != 4 or not all(d in "0123456789abcdefABCDEF" for d in digits):
                escape = "\\u" + digits
                raise CorruptDataError(source, None, f"malformed \\uxxxx escape {escape!r}")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(c, c))
    result = "".join(out)
    if any(0xD800 <= ord(c) <= 0xDFFF for c in result):
        # \u escapes are UTF-16 code units: join escaped surrogate pairs into one character.
        result = result.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return result


def parse_java_properties(text: str, source: str) -> dict[str, str]:
    """Parse `.properties` text exactly as java.util.Properties.load does (later keys win)."""
    result: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split_property(line)
        result[_unescape(key, source)] = _unescape(value, source)
    return result


def _escape(text: str, is_key: bool) -> str:
    """Properties.saveConvert without unicode escaping (store(Writer) writes UTF-8 text)."""
    out: list[str] = []
    for i, c in enumerate(text):
        if 61 < ord(c) < 127:
            out.append("\\\\" if c == "\\" else c)
        elif c == " ":
            out.append("\\ " if i == 0 or is_key else " ")
        elif c in "\t\n\r\f":
            out.append("\\" + "tnrf"["\t\n\r\f".index(c)])
        elif c in "=:#!":
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)








_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def java_date_string(moment: datetime) -> str:
    """java.util.Date.toString(): `Fri Jan 30 16:43:51 UTC 2026`."""
    zone = moment.tzname() or "UTC"
    return (
        f"{_DAYS[moment.weekday()]} {_MONTHS[moment.month - 1]} {moment.day:02d} "
        f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d} {zone} {moment.year}"
    )


KeyOrder = Literal["hashtable", "sorted", "given"]


def format_java_properties(
    entries: Iterable[tuple[str, str]],
    *,
    comment: str | None = "",
    now: datetime | None = None,
    key_order: KeyOrder = "hashtable",
) -> str:
    """Text that Properties.store(Writer, comment) writes for entries put in this order.

    `key_order`: "hashtable" = Java 9-17 iteration order (what the fixture shows), "sorted" = Java 18+
    (JDK-8231640), "given" = as passed. `comment` None omits the comment line; "" writes a lone `#`.
    """
    items = dict(entries)
    if key_order == "hashtable":
        keys = concurrent_hash_map_order(list(items))
    elif key_order == "sorted":
        keys = sorted(items)
    else:
        keys = list(items)
    lines = [] if comment is None else ["#" + line for line in (comment.split("\n") or [""])]
    lines.append("#" + java_date_string(now or datetime.now(UTC)))
    lines.extend(f"{_escape(key, True)}={_escape(items[key], False)}" for key in keys)
    return "".join(line + "\n" for line in lines)


# ------------------------------------------------------------------ meta.properties


@dataclass(frozen=True, slots=True)
class MetaProperties:
    """`meta.properties` of a log directory (version 0: ZooKeeper era, version 1: KRaft)."""

    version: int
    cluster_id: str | None = None
    node_id: int | None = None  # `broker.id` in version 0, `node.id` in version 1
    directory_id: uuid.UUID | None = None


def parse_meta_properties(data: bytes, source: str) -> MetaProperties:
    """Parse `meta.properties` as Kafka's MetaProperties.Builder does (file read as ISO-8859-1)."""
    props = parse_java_properties(data.decode("latin-1"), source)
    version = _parse_java_int(props.get("version", "0"), _INT32, source, "version")
    if version not in (0, 1):
        raise UnsupportedVersionError(f"{source}: unknown meta.properties version number {version}")
    node_key = "broker.id" if version == 0 else "node.id"
    node_id = None
    if node_key in props:
        node_id = _parse_java_int(props[node_key], _INT32, source, node_key)
    elif version == 1:
        raise CorruptDataError(source, None, "node.id was not found")
    cluster_id = props.get("cluster.id")
    if version == 1 and cluster_id is None:
        raise CorruptDataError(source, None, "cluster.id was not found")
    directory_id = None
    if "directory.id" in props:
        directory_id = uuid_from_base64(props["directory.id"], source)
    return MetaProperties(version, cluster_id, node_id, directory_id)


def encode_meta_properties(
    meta: MetaProperties, *, now: datetime | None = None, key_order: KeyOrder = "hashtable"
) -> bytes:
    """`meta.properties` bytes as Kafka writes them (MetaProperties.toProperties + Properties.store)."""
    if meta.version not in (0, 1):
        raise UnsupportedVersionError(f"meta.properties version {meta.version} does not exist (0 or 1)")
    if meta.version == 1 and (meta.cluster_id is None or meta.node_id is None):
        raise Zk2KraftError("meta.properties version 1 needs both cluster.id and node.id")
    entries = [("version", str(meta.version))]
    if meta.cluster_id is not None:
        entries.append(("cluster.id", meta.cluster_id))
    if meta.node_id is not None:
        entries.append(("broker.id" if meta.version == 0 else "node.id", str(meta.node_id)))
    if meta.directory_id is not None:
        entries.append(("directory.id", uuid_to_base64(meta.directory_id)))
    return format_java_properties(entries, now=now, key_order=key_order).encode("utf-8")


def read_meta_properties(path: PathLike) -> MetaProperties:
    """Read and parse a `meta.properties` file."""
    return parse_meta_properties(Path(path).read_bytes(), str(path))


def write_meta_properties(
    path: PathLike, meta: MetaProperties, *, now: datetime | None = None, key_order: KeyOrder = "hashtable"
) -> None:
    """Atomically write a `meta.properties` file."""
    atomic_write_bytes(path, encode_meta_properties(meta, now=now, key_order=key_order))


# ------------------------------------------------------------------ snapshot file names


@dataclass(frozen=True, slots=True, order=True)
class SnapshotId:
    """A KRaft snapshot: it holds every record with offset < end_offset; epoch of the last one."""

    end_offset: int
    epoch: int


_SNAPSHOT_NAME = re.compile(r"(\d{20})-(\d{10})\.checkpoint")


def snapshot_file_name(snapshot: SnapshotId) -> str:
    """`<20-digit end offset>-<10-digit epoch>.checkpoint`."""
    if not 0 <= snapshot.end_offset <= _INT64[1] or not 0 <= snapshot.epoch <= _INT32[1]:
        raise Zk2KraftError(f"snapshot id {snapshot} is out of range")
    return f"{snapshot.end_offset:020d}-{snapshot.epoch:010d}{SNAPSHOT_SUFFIX}"


def parse_snapshot_file_name(name: str) -> SnapshotId | None:
    """The id of a complete snapshot file; None for `.checkpoint.part`, `.deleted` and other files."""
    match = _SNAPSHOT_NAME.fullmatch(name)
    if match is None:
        return None
    end_offset, epoch = int(match.group(1)), int(match.group(2))
    if end_offset > _INT64[1] or epoch > _INT32[1]:
        return None
    return SnapshotId(end_offset, epoch)


def list_snapshots(partition_dir: PathLike) -> list[tuple[SnapshotId, Path]]:
    """Complete snapshots of a partition directory, oldest first."""
    found = []
    for entry in Path(partition_dir).iterdir():
        snapshot = parse_snapshot_file_name(entry.name)
        if snapshot is not None and entry.is_file():
            found.append((snapshot, entry))
    return sorted(found)
