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
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from migrate.errors import CorruptDataError, Zk2KraftError
from migrate.kraft import records as rec
from migrate.kraft.batch import iter_kraft_batches
from migrate.kraft.framing import decode_control_record, decode_metadata_record
from migrate.kraft.logdir import (
    META_PROPERTIES,
    SNAPSHOT_SUFFIX,
    SnapshotId,
    list_segments,
    list_snapshots,
    parse_snapshot_file_name,
    read_meta_properties,
)
from migrate.kraft.reader import METADATA_PARTITION_DIR, partition_dir_of
from validators.columnar import ColumnarSide, TaskOutput, fresh_directory, task_part, write_rows
from validators.kraft_state import SNAPSHOT_SEQ_BASE, Event, Key, fold, merge_events, record_event, state_row
from validators.tables import (
    CLUSTER_SCOPE,
    ERROR_KIND,
    TABLES,
    Row,
    sql_string,
    wide,
    wide_error,
)

_HEADER = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch
_ATTRIBUTES_DELTA = struct.Struct(">hi")  # attributes at byte 21, lastOffsetDelta at byte 23
_CONTROL = 0x20
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


@dataclass(frozen=True, slots=True)
class KraftFile:
    """One file of the KRaft input: read or skipped, the offsets it holds (when known) and why."""

    path: str
    kind: str
    """"snapshot" or "segment"."""
    read: bool
    first_offset: int | None
    last_offset: int | None
    reason: str


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
    files: list[KraftFile] = field(default_factory=list)
    """Every snapshot and segment of the input, read or skipped, with the reason."""
    snapshot_epoch: int | None = None
    batch_epochs: list[tuple[int, int, int]] = field(default_factory=list)
    """(base offset, last offset, leader epoch) of every whole log batch, in offset order."""
    leaders: dict[int, tuple[int, int]] = field(default_factory=dict)
    """Leader epoch -> (leader id, offset) of the log's LeaderChangeMessage records."""

    @property
    def snapshot_last_offset(self) -> int:
        return self.snapshot_end_offset - 1

    @property
    def last_offset(self) -> int | None:
        """The last offset the input holds (snapshot or log), None when it holds none."""
        ends = [self.snapshot_last_offset] if self.snapshot is not None else []
        ends += [last for _base, last, _epoch in self.batch_epochs[-1:]]
        return max(ends) if ends else None

    def epoch_at(self, offset: int) -> int | None:
        """The leader epoch of the record at `offset`: its log batch's, or the snapshot's for its last offset."""
        i = bisect.bisect_right(self.batch_epochs, (offset, _NO_END, 0)) - 1
        if i >= 0 and self.batch_epochs[i][0] <= offset <= self.batch_epochs[i][1]:
            return self.batch_epochs[i][2]
        if self.snapshot is not None and offset == self.snapshot_last_offset:
            return self.snapshot_epoch
        return None

    @property
    def newest_epoch(self) -> int | None:
        epochs = [e for _b, _l, e in self.batch_epochs[-1:]] + ([self.snapshot_epoch] if self.snapshot_epoch is not None else [])
        return max(epochs) if epochs else None

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
    epoch: int = 0
    control: bool = False


def scan_batches(path: Path) -> tuple[list[BatchSpan], int]:
    """Every whole batch of a file from its 27-byte header (read one by one, never the whole file)."""
    spans: list[BatchSpan] = []
    try:
        with path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            pos = 0
            while size - pos >= 61:
                head = os.pread(f.fileno(), _HEADER_BYTES, pos)
                base, length, epoch = _HEADER.unpack_from(head, 0)
                total = length + 12
                if length < _MIN_BATCH_LENGTH or pos + total > size:
                    break  # a torn or damaged tail: the task that decodes it reports it with its offset
                attributes, delta = _ATTRIBUTES_DELTA.unpack_from(head, 21)
                spans.append(BatchSpan(pos, total, base, base + delta, epoch, bool(attributes & _CONTROL)))
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
    damaged: Mapping[Path, str] | None = None,
) -> KraftPlan:
    """Plan reading a metadata dir (newest usable snapshot + the log after it), one .checkpoint, or one .log.

    `stop_offset` is exclusive. The snapshot used is the newest whose end offset is <= `snapshot_limit`
    (default `stop_offset`) and that is not in `damaged` (path -> problem): records after it come from the
    log, so the offset of every change is known. `plan.files` says which files are read and why the others
    are not.
    """
    p = Path(path)
    plan = KraftPlan(source=str(p), stop_offset=stop_offset)
    limit = snapshot_limit if snapshot_limit is not None else stop_offset
    damaged = damaged or {}
    newest: Path | None = None
    segments: list[Path] = []
    wanted_segments: set[Path] = {p}
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
            plan.snapshot_epoch = sid.epoch if sid is not None else None
        else:
            segments = [p]
            newest = p
    elif p.is_dir():
        pdir = partition_dir_of(p)
        snapshots = list_snapshots(pdir)
        usable = [(sid, sp) for sid, sp in snapshots if (limit is None or sid.end_offset <= limit) and sp not in damaged]
        if usable:
            sid, plan.snapshot = usable[-1]
            plan.snapshot_end_offset = sid.end_offset
            plan.snapshot_epoch = sid.epoch
            plan.start_offset = sid.end_offset
        listed = list_segments(pdir)
        if not listed and plan.snapshot is None:
            skipped = "".join(f"; {sp.name} is damaged: {why}" for sp, why in damaged.items())
            raise Zk2KraftError(f"{pdir}: no usable snapshot (.checkpoint) and no log segment (.log) to read{skipped}")
        first = 0
        for i, seg in enumerate(listed):
            if seg.base_offset <= plan.start_offset:
                first = i
        chosen = [seg for seg in listed[first:] if stop_offset is None or seg.base_offset < stop_offset]
        if chosen and chosen[0].base_offset > plan.start_offset and (stop_offset is None or plan.start_offset < stop_offset):
            after = "the snapshot's end offset" if plan.snapshot is not None else "the start of the log"
            skipped = "".join(f"; {sp.name} was skipped: it is damaged ({why})" for sp, why in damaged.items())
            raise CorruptDataError(
                str(pdir),
                None,
                f"the log starts at offset {chosen[0].base_offset} but records from {after} "
                f"({plan.start_offset}) on are needed and no usable snapshot covers them{skipped}",
            )
        segments = [seg.path for seg in listed]
        wanted_segments = {seg.path for seg in chosen}
        newest = listed[-1].path if listed else None
        plan.files.extend(_snapshot_files(plan, snapshots, limit, damaged))
    else:
        raise Zk2KraftError(f"{p}: no such file or directory (expected a KRaft metadata dir, .checkpoint or .log)")

    if plan.snapshot is not None:
        spans, size = scan_batches(plan.snapshot)
        plan.ranges.extend(_cut(plan.snapshot, spans, True, target_bytes, _tail(spans, size), False))
        plan.bytes += size
        if p.is_file():
            last = plan.snapshot_last_offset if plan.snapshot_end_offset else None
            plan.files.append(KraftFile(str(p), "snapshot", True, None, last, "the input"))
    read: list[Path] = []
    for seg_path in segments:
        spans, size = scan_batches(seg_path)
        plan.batch_epochs.extend((span.base_offset, span.last_offset, span.epoch) for span in spans)
        plan.leaders.update(_leader_changes(seg_path, spans))
        wanted: list[BatchSpan] = []
        ranges: list[FileRange] = []
        if seg_path in wanted_segments:
            wanted = [
                span
                for span in spans
                if span.last_offset >= plan.start_offset and (stop_offset is None or span.base_offset < stop_offset)
            ]
            # Past the last whole batch there may be a torn tail: read it unless the stop offset comes first.
            reaches_end = stop_offset is None or not spans or spans[-1].last_offset < stop_offset
            tail = _tail(spans, size) if reaches_end else None
            ranges = _cut(seg_path, wanted, False, target_bytes, tail, seg_path == newest)
        if ranges:
            plan.ranges.extend(ranges)
            read.append(seg_path)
        plan.bytes += sum(span.size for span in wanted)
        plan.files.append(_segment_file(plan, seg_path, spans, wanted, bool(ranges), size))
    plan.batch_epochs.sort()
    plan.segments = read
    return plan


def _snapshot_files(
    plan: KraftPlan, snapshots: list[tuple[SnapshotId, Path]], limit: int | None, damaged: Mapping[Path, str]
) -> Iterator[KraftFile]:
    """Every snapshot of a metadata dir: the one read, and why each other one is not."""
    for sid, sp in snapshots:
        last = sid.end_offset - 1
        if sp == plan.snapshot:
            why = "the newest usable snapshot: the state up to its end offset"
            if damaged:
                why += f" (newer snapshots are damaged: {', '.join(d.name for d in damaged)})"
            yield KraftFile(str(sp), "snapshot", True, None, last, why)
        elif sp in damaged:
            instead = (
                f"snapshot {plan.snapshot.name} and the log after it were read"
                if plan.snapshot is not None
                else "the whole log was read"
            )
            yield KraftFile(str(sp), "snapshot", False, None, last, f"damaged, so {instead} instead: {damaged[sp]}")
        elif limit is not None and sid.end_offset > limit:
            yield KraftFile(
                str(sp), "snapshot", False, None, last,
                f"ends after the comparison point (offset {limit - 1}): the offset of each change inside it would be unknown",
            )
        else:
            newer = plan.snapshot.name if plan.snapshot is not None else "a newer snapshot"
            yield KraftFile(str(sp), "snapshot", False, None, last, f"older than {newer}, which is read")


def _segment_file(plan: KraftPlan, path: Path, spans: list[BatchSpan], wanted: list[BatchSpan], read: bool, size: int) -> KraftFile:
    """A segment read (which offsets, and which of its offsets were not) or skipped, and why."""
    first = spans[0].base_offset if spans else None
    last = spans[-1].last_offset if spans else None
    covered = f"snapshot {plan.snapshot.name}" if plan.snapshot is not None else "the snapshot"
    if read:
        notes = []
        if wanted:
            # Whole batches are read; records outside [start, stop) in them are not state.
            lo = max(wanted[0].base_offset, plan.start_offset)
            hi = wanted[-1].last_offset if plan.stop_offset is None else min(wanted[-1].last_offset, plan.stop_offset - 1)
            notes.append(f"offsets {lo}..{hi} read")
        if first is not None and first < plan.start_offset:
            notes.append(f"offsets {first}..{plan.start_offset - 1} are in {covered} and were not read")
        if last is not None and plan.stop_offset is not None and last >= plan.stop_offset:
            notes.append(f"offsets from {plan.stop_offset} on are after the comparison point and were not read")
        if not spans:
            notes.append("no whole batch: its bytes are read to report what they are")
        return KraftFile(str(path), "segment", True, first, last, "; ".join(notes))
    if not spans:
        why = "empty" if size == 0 else "no whole batch"
    elif last is not None and last < plan.start_offset:
        why = f"all its offsets are in {covered}, which is read instead: damage in this segment is not seen"
    else:
        why = f"starts after the comparison point (offset {(plan.stop_offset or 0) - 1})"
    end = _tail(spans, size)[0]
    if spans and end < size:
        why += f"; its batch headers stop making sense at byte {end} of {size} (a torn or damaged tail, not read)"
    return KraftFile(str(path), "segment", False, first, last, why)


def _leader_changes(path: Path, spans: list[BatchSpan]) -> Iterator[tuple[int, tuple[int, int]]]:
    """(epoch, (leader id, offset)) of the LeaderChangeMessage records in the control batches of a segment."""
    control = [span for span in spans if span.control]
    if not control:
        return
    with path.open("rb") as f:
        for span in control:
            data = os.pread(f.fileno(), span.size, span.position)
            try:
                for _pos, header, entries in iter_kraft_batches(data, str(path), start_position=0):
                    for delta, key, value in entries:
                        record = decode_control_record(key, value, str(path), span.position)[0]
                        if isinstance(record, rec.LeaderChangeMessage):
                            yield header.partition_leader_epoch, (record.leader_id, header.base_offset + delta)
            except Zk2KraftError:
                continue  # the task that reads this batch reports the damage with its offset


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
        yield (ERROR_KIND,), [(0, "error", _SNAPSHOT_ERROR.join(("", r.path, str(exc))) if snapshot else str(exc))]


_SNAPSHOT_ERROR = "\x00snapshot\x00"
"""Marks a task's error as found in a snapshot (`<mark><path><mark><message>`): the driver can fall back."""


class DamagedSnapshotError(Zk2KraftError):
    """A snapshot that cannot be read; the log (or an older snapshot) may still give the state."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(problem)

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        return (type(self), (self.path, self.problem))


def _raise_task_error(messages: list[str]) -> None:
    """Raise the first error of the log, else the first of a snapshot (as DamagedSnapshotError)."""
    snapshot_errors = [m for m in messages if m.startswith(_SNAPSHOT_ERROR)]
    log_errors = [m for m in messages if not m.startswith(_SNAPSHOT_ERROR)]
    if log_errors:
        raise Zk2KraftError(log_errors[0])
    if snapshot_errors:
        _, path, problem = snapshot_errors[0].split(_SNAPSHOT_ERROR, 2)
        raise DamagedSnapshotError(path, problem)


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


def _fold_range(
    index: int,
    r: FileRange,
    *,
    start_offset: int,
    stop_offset: int | None,
    excluded: list[tuple[int, int]],
    snapshot_last_offset: int,
    directory: str,
) -> TaskOutput:
    """Inside a task: the folded rows of one range whose keys no other range touches, as Parquet files."""
    rows = (
        row for item in parse_range(r, start_offset, stop_offset, excluded) for row in fold_rows(item, snapshot_last_offset)
    )
    return next(write_rows(rows, directory, task_part(index), with_offsets=True))


def kraft_side(spark: SparkSession, plan: KraftPlan, directory: Path, *, shuffle_partitions: int) -> ColumnarSide:
    """The folded KRaft state as Parquet files per row kind; raises the first bad-input error a task found."""
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
    folder = str(fresh_directory(directory))
    if log_ranges:
        # Keys are unique within a snapshot; only log records can rewrite a key, so only then are a key's
        # events gathered from every range before the fold.
        events = sc.parallelize(ranges, max(1, len(ranges))).flatMap(
            partial(parse_range, start_offset=plan.start_offset, stop_offset=plan.stop_offset, excluded=excluded)
        )
        fold = partial(fold_rows, snapshot_last_offset=plan.snapshot_last_offset)
        outputs = (
            events.reduceByKey(merge_events, shuffle_partitions)
            .mapPartitionsWithIndex(
                lambda index, items: write_rows(
                    (row for item in items for row in fold(item)), folder, task_part(index), with_offsets=True
                )
            )
            .collect()
        )
    else:
        task = partial(
            _fold_range,
            start_offset=plan.start_offset,
            stop_offset=plan.stop_offset,
            excluded=excluded,
            snapshot_last_offset=plan.snapshot_last_offset,
            directory=folder,
        )
        outputs = sc.parallelize(list(enumerate(ranges)), max(1, len(ranges))).map(lambda item: task(*item)).collect()
    side = ColumnarSide(directory, with_offsets=True).merge(outputs)
    if side.errors:
        side.remove()
        _raise_task_error(side.errors)
    return side


KRAFT_KINDS = (
    "topics", "kraft_partitions", "configs", "kraft_acls",
    "brokers", "client_quotas", "scram", "delegation_tokens", "producer_ids", "features",
)  # fmt: skip
"""The row kinds `kraft_ctes` reads."""


def kraft_ctes(views: Mapping[str, str], cluster_id: str | None) -> list[tuple[str, str]]:
    """SQL common table expressions `k_<table>` for every compared table of the KRaft side, read from the
    temporary views `views` (row kind -> view of its rows, with `_offset` and `_deleted`) (and `cluster_id`, from meta.properties, when known). Each has the
    table's columns, `_offset` (the last record that touched the row) and `_deleted`; a key can have
    several rows (a topic deleted and created again)."""
    def kind(name: str) -> str:
        return f"SELECT * FROM {views[name]}"

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
