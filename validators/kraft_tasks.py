"""The KRaft side of an audit on Spark: plan byte ranges, parse them in tasks, fold the state per key.

The driver only reads batch headers (to cut files at batch boundaries and to skip batches outside the
offsets wanted); tasks decode the records of one byte range each into keyed events
(`validators.kraft_state`). A first, light job collects the metadata-transaction markers of the log so
records of aborted or unfinished transactions are dropped. State is the last write per key: a
reduceByKey merges each key's events (only needed when log records follow the snapshot, since keys are
unique within one snapshot), and a fold per key applies them in offset order.
"""

from __future__ import annotations

import bisect
import mmap
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from migrate.errors import CorruptDataError, Zk2KraftError
from migrate.kraft import records as rec
from migrate.kraft.batch import iter_kraft_batches
from migrate.kraft.framing import decode_control_record, decode_metadata_record
from migrate.kraft.logdir import (
    META_PROPERTIES,
    SNAPSHOT_SUFFIX,
    list_segments,
    list_snapshots,
    parse_snapshot_file_name,
    read_meta_properties,
)
from migrate.kraft.reader import METADATA_PARTITION_DIR, partition_dir_of
from validators.kraft_state import SNAPSHOT_SEQ_BASE, Event, Key, fold, merge_events, record_event, state_row
from validators.tables import CLUSTER_SCOPE, ERROR_KIND, TABLES, Row, sql_string, wide, wide_error

_HEADER = struct.Struct(">qi")  # baseOffset, batchLength
_LAST_DELTA = struct.Struct(">i")  # lastOffsetDelta at byte 23
_HEADER_BYTES = 27
_MIN_BATCH_LENGTH = 49  # the v2 header after the length field
DEFAULT_RANGE_BYTES = 32 * 1024 * 1024
_NO_END = 1 << 63

_TXN_MARKERS = {
    rec.BeginTransactionRecord: "begin",
    rec.EndTransactionRecord: "end",
    rec.AbortTransactionRecord: "abort",
}


@dataclass(frozen=True, slots=True)
class FileRange:
    """Bytes [start, end) of one file, cut at batch boundaries."""

    path: str
    start: int
    end: int
    snapshot: bool
    first: bool
    last: bool
    tolerate_torn_tail: bool = False


@dataclass(slots=True)
class KraftPlan:
    """What the KRaft side reads: a snapshot and/or log segments, cut into ranges, up to `stop_offset`."""

    source: str
    snapshot: Path | None = None
    snapshot_end_offset: int = 0
    """The snapshot holds offsets < this (0 without a snapshot)."""
    segments: list[Path] = field(default_factory=list)
    start_offset: int = 0
    stop_offset: int | None = None
    """Exclusive: records at this offset and later are not read (None = to the end)."""
    ranges: list[FileRange] = field(default_factory=list)
    bytes: int = 0

    @property
    def snapshot_last_offset(self) -> int:
        return self.snapshot_end_offset - 1

    @property
    def log_ranges(self) -> list[FileRange]:
        return [r for r in self.ranges if not r.snapshot]


# ---------------------------------------------------------------------------------------------- planning


@dataclass(frozen=True, slots=True)
class BatchSpan:
    position: int
    size: int
    base_offset: int
    last_offset: int


def scan_batches(path: Path) -> tuple[list[BatchSpan], int]:
    """Every whole batch of a file from its 27-byte header (read one by one, never the whole file)."""
    spans: list[BatchSpan] = []
    try:
        with path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            pos = 0
            while size - pos >= 61:
                head = os.pread(f.fileno(), _HEADER_BYTES, pos)
                base, length = _HEADER.unpack_from(head, 0)
                total = length + 12
                if length < _MIN_BATCH_LENGTH or pos + total > size:
                    break  # a torn or damaged tail: the task that decodes it reports it with its offset
                (delta,) = _LAST_DELTA.unpack_from(head, 23)
                spans.append(BatchSpan(pos, total, base, base + delta))
                pos += total
    except OSError as exc:
        raise Zk2KraftError(f"cannot read {path}: {exc.strerror or exc}") from None
    return spans, size


def _cut(
    path: Path, spans: list[BatchSpan], snapshot: bool, target: int, tail: tuple[int, int] | None, tolerate: bool
) -> list[FileRange]:
    """Ranges of about `target` bytes over consecutive `spans`. `tail` = (end of the file's last whole
    batch, file size): bytes after the last whole batch go to the last range (or a range of their own), so
    a torn or damaged tail is seen by a task."""
    bounds: list[tuple[int, int]] = []
    if spans:
        start = spans[0].position
        for span in spans:
            end = span.position + span.size
            if end - start >= target:
                bounds.append((start, end))
                start = end
        last_end = spans[-1].position + spans[-1].size
        if start < last_end:
            bounds.append((start, last_end))
    if tail is not None and tail[1] > tail[0]:
        if bounds and bounds[-1][1] == tail[0]:
            bounds[-1] = (bounds[-1][0], tail[1])
        else:
            bounds.append(tail)
    last = len(bounds) - 1
    return [
        FileRange(str(path), lo, hi, snapshot, lo == 0, i == last, tolerate and i == last)
        for i, (lo, hi) in enumerate(bounds)
    ]


def _tail(spans: list[BatchSpan], size: int) -> tuple[int, int]:
    return (spans[-1].position + spans[-1].size if spans else 0), size


def plan_kraft(
    path: str | os.PathLike[str],
    *,
    stop_offset: int | None = None,
    snapshot_limit: int | None = None,
    target_bytes: int = DEFAULT_RANGE_BYTES,
) -> KraftPlan:
    """Plan reading a metadata dir (newest usable snapshot + the log after it), one .checkpoint, or one .log.

    `stop_offset` is exclusive. The snapshot used is the newest whose end offset is <= `snapshot_limit`
    (default `stop_offset`): records after it come from the log, so the offset of every change is known.
    """
    p = Path(path)
    plan = KraftPlan(source=str(p), stop_offset=stop_offset)
    limit = snapshot_limit if snapshot_limit is not None else stop_offset
    newest: Path | None = None
    if p.is_file():
        if p.name.endswith(SNAPSHOT_SUFFIX):
            sid = parse_snapshot_file_name(p.name)
            if sid is not None and stop_offset is not None and sid.end_offset > stop_offset:
                raise Zk2KraftError(
                    f"{p}: this snapshot holds offsets up to {sid.end_offset - 1}; it cannot be replayed only to "
                    f"offset {stop_offset - 1} (give the metadata directory instead)"
                )
            plan.snapshot = p
            plan.snapshot_end_offset = sid.end_offset if sid is not None else 0
        else:
            plan.segments = [p]
            newest = p
    elif p.is_dir():
        pdir = partition_dir_of(p)
        snapshots = [(sid, sp) for sid, sp in list_snapshots(pdir) if limit is None or sid.end_offset <= limit]
        if snapshots:
            sid, plan.snapshot = snapshots[-1]
            plan.snapshot_end_offset = sid.end_offset
            plan.start_offset = sid.end_offset
        segments = list_segments(pdir)
        if not segments and plan.snapshot is None:
            raise Zk2KraftError(f"{pdir}: no snapshot (.checkpoint) and no log segment (.log) to read")
        first = 0
        for i, seg in enumerate(segments):
            if seg.base_offset <= plan.start_offset:
                first = i
        chosen = [seg for seg in segments[first:] if stop_offset is None or seg.base_offset < stop_offset]
        if chosen and chosen[0].base_offset > plan.start_offset and (stop_offset is None or plan.start_offset < stop_offset):
            after = "the snapshot's end offset" if plan.snapshot is not None else "the start of the log"
            raise CorruptDataError(
                str(pdir),
                None,
                f"the log starts at offset {chosen[0].base_offset} but records from {after} "
                f"({plan.start_offset}) on are needed and no usable snapshot covers them",
            )
        plan.segments = [seg.path for seg in chosen]
        newest = segments[-1].path if segments else None
    else:
        raise Zk2KraftError(f"{p}: no such file or directory (expected a KRaft metadata dir, .checkpoint or .log)")

    if plan.snapshot is not None:
        spans, size = scan_batches(plan.snapshot)
        plan.ranges.extend(_cut(plan.snapshot, spans, True, target_bytes, _tail(spans, size), False))
        plan.bytes += size
    read: list[Path] = []
    for seg_path in plan.segments:
        spans, size = scan_batches(seg_path)
        wanted = [
            span
            for span in spans
            if span.last_offset >= plan.start_offset and (stop_offset is None or span.base_offset < stop_offset)
        ]
        # Past the last whole batch there may be a torn tail: read it unless the stop offset comes first.
        reaches_end = stop_offset is None or not spans or spans[-1].last_offset < stop_offset
        ranges = _cut(seg_path, wanted, False, target_bytes, _tail(spans, size) if reaches_end else None, seg_path == newest)
        if ranges:
            plan.ranges.extend(ranges)
            read.append(seg_path)
        plan.bytes += sum(span.size for span in wanted)
    plan.segments = read
    return plan


# ---------------------------------------------------------------------------------------------- tasks


def _open(path: str) -> tuple[Any, memoryview]:
    with open(path, "rb") as fh:
        if os.fstat(fh.fileno()).st_size == 0:
            return None, memoryview(b"")
        data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    return data, memoryview(data)


def _entries(r: FileRange) -> Iterator[tuple[int, int, bool, Any, Any]]:
    """(position, offset, is_control, key, value) of every record in the range."""
    data, view = _open(r.path)
    try:
        part = view[: r.end]
        try:
            batches = iter_kraft_batches(part, r.path, start_position=r.start, tolerate_torn_tail=r.tolerate_torn_tail)
            for pos, header, entries in batches:
                base = header.base_offset
                control = header.is_control
                for delta, key, value in entries:
                    yield pos, base + delta, control, key, value
        finally:
            part.release()
    finally:
        # Records handed out may still reference the map: it closes when the last reference goes.
        view.release()
        del data


def _decode(path: str, pos: int, offset: int, key: Any, value: Any) -> Any:
    if key is not None or value is None:
        raise CorruptDataError(path, pos, f"data record at offset {offset} has a key or no value; KRaft forbids it")
    try:
        return decode_metadata_record(value, path, pos)[0]
    except CorruptDataError as exc:
        if exc.source == path:
            raise
        raise CorruptDataError(path, pos, f"record at offset {offset}: {exc.problem}") from None


def scan_markers(r: FileRange, start_offset: int, stop_offset: int | None) -> list[tuple[int, str]]:
    """Offsets of the metadata-transaction records in a log range (a light pass before parsing)."""
    out: list[tuple[int, str]] = []
    try:
        for pos, offset, control, key, value in _entries(r):
            if control or offset < start_offset or (stop_offset is not None and offset >= stop_offset):
                continue
            # Transaction records are apiKeys 23-25: peek at the frame before decoding anything else.
            if value is not None and len(value) > 1 and value[1] in (23, 24, 25):
                record = _decode(r.path, pos, offset, key, value)
                marker = _TXN_MARKERS.get(type(record))
                if marker is not None:
                    out.append((offset, marker))
    except Zk2KraftError as exc:
        out.append((-1, f"error:{exc}"))
    return out


def excluded_intervals(markers: list[tuple[int, str]], source: str) -> list[tuple[int, int]]:
    """Inclusive offset intervals of aborted transactions and of one still open at the end."""
    out: list[tuple[int, int]] = []
    begin: int | None = None
    for offset, marker in sorted(markers):
        if marker == "begin":
            if begin is not None:
                raise CorruptDataError(source, None, f"BeginTransactionRecord at offset {offset} while the transaction begun at {begin} is open")
            begin = offset
        else:
            if begin is None:
                raise CorruptDataError(source, None, f"{marker} of a transaction at offset {offset} without a BeginTransactionRecord")
            if marker == "abort":
                out.append((begin, offset))
            begin = None
    if begin is not None:
        out.append((begin, _NO_END))
    return out


def parse_range(
    r: FileRange, start_offset: int, stop_offset: int | None, excluded: list[tuple[int, int]]
) -> Iterator[tuple[Key, list[Event]]]:
    """Keyed events of every record in the range; bad input becomes one error event."""
    starts = [lo for lo, _ in excluded]
    snapshot = r.snapshot
    seen_first = False
    footer = False
    try:
        for pos, offset, control, key, value in _entries(r):
            if snapshot:
                if r.first and not seen_first:
                    seen_first = True
                    header = decode_control_record(key, value, r.path, pos)[0] if control else None
                    if not isinstance(header, rec.SnapshotHeaderRecord):
                        raise CorruptDataError(r.path, pos, "a snapshot must start with a SnapshotHeaderRecord batch")
                    continue
                if footer:
                    raise CorruptDataError(r.path, pos, f"record at offset {offset} after the snapshot footer")
                if control:
                    footer = isinstance(decode_control_record(key, value, r.path, pos)[0], rec.SnapshotFooterRecord)
                    continue
                seq = SNAPSHOT_SEQ_BASE + offset
            else:
                if control or offset < start_offset or (stop_offset is not None and offset >= stop_offset):
                    continue
                if starts:
                    i = bisect.bisect_right(starts, offset) - 1
                    if i >= 0 and offset <= excluded[i][1]:
                        continue
                seq = offset
            record = _decode(r.path, pos, offset, key, value)
            if snapshot and type(record) in _TXN_MARKERS:
                raise CorruptDataError(r.path, pos, f"{type(record).__name__} at offset {offset}: snapshots never hold transaction records")
            event = record_event(record)
            if event is not None:
                k, op, payload = event
                yield k, [(seq, op, payload)]
        if snapshot and r.last and not footer:
            raise CorruptDataError(r.path, r.end, "snapshot does not end with a SnapshotFooterRecord")
    except Zk2KraftError as exc:
        yield (ERROR_KIND,), [(0, "error", str(exc))]


def fold_rows(item: tuple[Key, list[Event]], snapshot_last_offset: int) -> Iterator[Row]:
    """Wide rows of one folded key (`offset` = the last record that touched it)."""
    key, events = item
    if key[0] == ERROR_KIND:
        yield wide_error(events[0][2])
        return
    try:
        payload, deleted, seq = fold(key, events)
    except Zk2KraftError as exc:
        yield wide_error(str(exc))
        return
    row = state_row(key, payload)
    if row is not None:
        yield wide(key[0], row, seq if seq >= 0 else snapshot_last_offset, deleted)


# ---------------------------------------------------------------------------------------------- Spark


def kraft_wide(spark: SparkSession, plan: KraftPlan, *, shuffle_partitions: int) -> DataFrame:
    """The folded KRaft state as wide rows (cached); raises the first bad-input error a task found."""
    sc = spark.sparkContext
    ranges = plan.ranges
    excluded: list[tuple[int, int]] = []
    log_ranges = plan.log_ranges
    if log_ranges:
        markers = (
            sc.parallelize(log_ranges, len(log_ranges))
            .flatMap(partial(scan_markers, start_offset=plan.start_offset, stop_offset=plan.stop_offset))
            .collect()
        )
        for _, marker in markers:
            if marker.startswith("error:"):
                raise Zk2KraftError(marker[len("error:") :])
        excluded = excluded_intervals(markers, plan.source)
    events = sc.parallelize(ranges, max(1, len(ranges))).flatMap(
        partial(parse_range, start_offset=plan.start_offset, stop_offset=plan.stop_offset, excluded=excluded)
    )
    if log_ranges:
        # Keys are unique within a snapshot; only log records can rewrite a key.
        events = events.reduceByKey(merge_events, shuffle_partitions)
    rows = events.flatMap(partial(fold_rows, snapshot_last_offset=plan.snapshot_last_offset))
    from validators.tables import WIDE_SCHEMA

    df = spark.createDataFrame(rows, WIDE_SCHEMA, verifySchema=False).cache()
    first_error = df.filter(F.col("kind") == ERROR_KIND).select("error").limit(1).collect()
    if first_error:
        df.unpersist()
        raise Zk2KraftError(first_error[0][0])
    return df


def kraft_ctes(view: str, cluster_id: str | None) -> list[tuple[str, str]]:
    """SQL common table expressions `k_<table>` for every compared table of the KRaft side, read from the
    wide rows in temporary view `view` (and `cluster_id`, from meta.properties, when known). Each has the
    table's columns, `_offset` (the last record that touched the row) and `_deleted`; a key can have
    several rows (a topic deleted and created again)."""
    def kind(name: str) -> str:
        return f"SELECT {name}.*, `offset` AS _offset, deleted AS _deleted FROM {view} WHERE kind = '{name}'"

    fields = ", ".join("p." + f for f in TABLES["partitions"].field_names)
    acl_keys = ", ".join(TABLES["acls"].key_names)
    ctes = [
        ("k_topics", kind("topics")),
        (
            # Topics are few next to partitions: broadcast them instead of shuffling the partitions.
            "k_partitions",
            f"SELECT /*+ BROADCAST(t) */ t.topic, p.partition, {fields}, "
            "GREATEST(p._offset, CASE WHEN t._deleted THEN t._offset ELSE -1 END) AS _offset, "
            "p._deleted OR t._deleted AS _deleted "
            f"FROM ({kind('kraft_partitions')}) p JOIN k_topics t ON p.topic_id = t.topic_id",
        ),
        # RemoveTopicRecord also deletes the topic's configs (by name), unless they were set again later.
        ("k_removed", "SELECT topic, MAX(_offset) AS removed_at FROM k_topics WHERE _deleted GROUP BY topic"),
        (
            "k_configs",
            "SELECT /*+ BROADCAST(r) */ c.resource_type, c.resource_name, c.name, "
            "CASE WHEN r.removed_at > c._offset THEN NULL ELSE c.value END AS value, "
            "CASE WHEN r.removed_at > c._offset THEN r.removed_at ELSE c._offset END AS _offset, "
            "c._deleted OR COALESCE(r.removed_at > c._offset, false) AS _deleted "
            f"FROM ({kind('configs')}) c "
            "LEFT JOIN k_removed r ON c.resource_type = 'topic' AND c.resource_name = r.topic",
        ),
        (
            "k_acls",
            f"SELECT {acl_keys}, CAST(SUM(CASE WHEN _deleted THEN 0 ELSE 1 END) AS INT) AS count, "
            "MAX(_offset) AS _offset, SUM(CASE WHEN _deleted THEN 0 ELSE 1 END) = 0 AS _deleted "
            f"FROM ({kind('kraft_acls')}) GROUP BY {acl_keys}",
        ),
    ]
    for name in ("brokers", "client_quotas", "scram", "delegation_tokens", "producer_ids", "features"):
        ctes.append((f"k_{name}", kind(name)))
    value = "CAST(NULL AS STRING)" if cluster_id is None else sql_string(cluster_id)
    cluster = f"SELECT {sql_string(CLUSTER_SCOPE)} AS scope, {value} AS cluster_id, CAST(-1 AS BIGINT) AS _offset, false AS _deleted"
    if cluster_id is None:
        cluster += " WHERE false"
    ctes.append(("k_cluster", cluster))
    return ctes


def kraft_cluster_id(path: str | os.PathLike[str]) -> str | None:
    """cluster.id of the meta.properties beside a metadata log (None for a lone file or without one)."""
    p = Path(path)
    if not p.is_dir():
        return None
    for candidate in (p / META_PROPERTIES, p.parent / META_PROPERTIES):
        if candidate.is_file() and (candidate.parent / METADATA_PARTITION_DIR).is_dir():
            return read_meta_properties(candidate).cluster_id
    return None
