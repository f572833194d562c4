"""Read decoded entries from KRaft metadata files, and load a MetadataImage from a metadata log directory.

Sources: one segment (`.log`), one snapshot (`.checkpoint`), `bootstrap.checkpoint`, or a whole
`__cluster_metadata-0` directory (segments in offset order; only the newest may end in a torn batch).
`load_image` starts from the newest usable snapshot and replays the log after it, as Kafka does.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from migrate.errors import CorruptDataError, Zk2KraftError
from migrate.gcpause import gc_paused
from migrate.kraft import records as rec
from migrate.kraft.batch import BatchHeader, KraftEntry, TornTail, check_batch_file, iter_kraft_batches
from migrate.kraft.framing import decode_control_record, decode_metadata_record
from migrate.kraft.image import MetadataImage
from migrate.kraft.logdir import (
    BOOTSTRAP_CHECKPOINT,
    SNAPSHOT_SUFFIX,
    SnapshotId,
    list_segments,
    list_snapshots,
    parse_snapshot_file_name,
)
from migrate.kraft.replay import MetadataReplayer

METADATA_PARTITION_DIR = "__cluster_metadata-0"

_TRANSACTION_RECORDS = (rec.BeginTransactionRecord, rec.EndTransactionRecord, rec.AbortTransactionRecord)


@dataclass(slots=True)
class LogEntry:
    """One decoded record: its offset (in-file offset for snapshots), batch epoch/time and byte position.

    Not frozen: one is built per record, and a frozen dataclass costs about 1 µs more to construct.
    """

    offset: int
    leader_epoch: int
    timestamp_ms: int
    batch_position: int
    is_control: bool
    record: Any
    version: int


@dataclass(slots=True)
class FileRead:
    """What reading one file found."""

    path: Path
    batches: int = 0
    records: int = 0
    valid_bytes: int = 0
    torn_tail: TornTail | None = None


@dataclass(slots=True)
class ReadReport:
    """Files read by an iterator, filled in as iteration proceeds."""

    files: list[FileRead] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def torn_tail(self) -> tuple[Path, TornTail] | None:
        for f in self.files:
            if f.torn_tail is not None:
                return f.path, f.torn_tail
        return None


@dataclass(slots=True)
class LoadReport:
    """How load_image built its image."""

    partition_dir: Path
    snapshot: Path | None = None
    snapshot_id: SnapshotId | None = None
    snapshot_records: int = 0
    log_records: int = 0
    """Data records read from the log (after the snapshot, before `up_to_offset`), NoOps included."""
    first_log_offset: int | None = None
    last_log_offset: int | None = None
    last_metadata_offset: int | None = None
    """The log's last record that a ZooKeeper dual write reflects: not a control record, not a NoOp. None
    when the log after the snapshot holds none (a snapshot does not keep its records' offsets)."""
    segments: list[Path] = field(default_factory=list)
    torn_tail: tuple[Path, TornTail] | None = None
    pending_transaction_offset: int | None = None
    """Start of a metadata transaction still open at the end of the input; its records were not applied."""
    pending_transaction_records: int = 0
    warnings: list[str] = field(default_factory=list)

    def describe(self) -> list[str]:
        """Human-readable lines for a CLI."""
        lines = []
        if self.snapshot is not None:
            lines.append(f"snapshot {self.snapshot.name}: {self.snapshot_records} records")
        else:
            lines.append("no snapshot used")
        if self.first_log_offset is None:
            lines.append("no log records replayed")
        else:
            lines.append(
                f"log offsets {self.first_log_offset}..{self.last_log_offset}: {self.log_records} records "
                f"from {len(self.segments)} segment(s)"
            )
        if self.torn_tail is not None:
            path, tail = self.torn_tail
            lines.append(f"{path.name}: {tail.describe()}")
        if self.pending_transaction_offset is not None:
            lines.append(
                f"incomplete metadata transaction begun at offset {self.pending_transaction_offset} "
                f"({self.pending_transaction_records} records) was not applied"
            )
        lines.extend(self.warnings)
        return lines


# ---------------------------------------------------------------------------------------------- files


def _read_bytes(path: Path) -> bytes | memoryview:
    """The file's bytes; large files are memory-mapped instead of copied."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size >= 64 * 1024 * 1024:
                return memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
            return f.read()
    except OSError as exc:
        raise Zk2KraftError(f"cannot read {path}: {exc.strerror or exc}") from None


def _iter_file(
    path: Path,
    *,
    tolerate_torn_tail: bool,
    start_offset: int = 0,
    stop_offset: int | None = None,
    read: FileRead | None = None,
) -> Iterator[LogEntry]:
    """Decoded entries of one batch file with offsets in [start_offset, stop_offset)."""
    source = str(path)
    data = _read_bytes(path)
    check_batch_file(data, source)
    batches = iter_kraft_batches(data, source, tolerate_torn_tail=tolerate_torn_tail)
    expected_next = -1
    for pos, header, entries in batches:
        base = header.base_offset
        if base < expected_next:
            raise CorruptDataError(
                source,
                pos,
                f"batch base offset {base} goes back before offset {expected_next} of the previous batch",
            )
        expected_next = base + header.last_offset_delta + 1
        if read is not None:
            read.batches += 1
            read.records += header.record_count
            read.valid_bytes = batches.position
        if expected_next <= start_offset:
            continue
        if stop_offset is not None and base >= stop_offset:
            return
        for entry in decode_batch_entries(source, pos, header, entries, start_offset):
            if stop_offset is not None and entry.offset >= stop_offset:
                return
            yield entry
    if read is not None:
        read.valid_bytes = batches.position
        read.torn_tail = batches.torn_tail


def decode_batch_entries(
    source: str, pos: int, header: BatchHeader, entries: Sequence[KraftEntry], start_offset: int = 0
) -> Iterator[LogEntry]:
    """The decoded records (control or metadata) of one batch `iter_kraft_batches` yielded, from `start_offset`."""
    base = header.base_offset
    epoch = header.partition_leader_epoch
    timestamp = header.base_timestamp
    control = header.is_control
    for offset_delta, key, value in entries:
        offset = base + offset_delta
        if offset < start_offset:
            continue
        record: Any
        try:
            if control:
                record, version = decode_control_record(key, value)
            else:
                if key is not None:
                    raise CorruptDataError(
                        source, pos, f"data record at offset {offset} has a key; KRaft forbids it"
                    )
                if value is None:
                    raise CorruptDataError(source, pos, f"data record at offset {offset} has no value")
                record, version = decode_metadata_record(value)
        except CorruptDataError as exc:
            if exc.source == source:
                raise
            raise CorruptDataError(
                source, pos, f"record at offset {offset} (byte {exc.offset} of its value): {exc.problem}"
            ) from None
        yield LogEntry(offset, epoch, timestamp, pos, control, record, version)


def iter_segment(
    path: str | os.PathLike[str], *, newest: bool = True, report: ReadReport | None = None
) -> Iterator[LogEntry]:
    """Entries of one log segment; a torn final batch is tolerated (and reported) only when `newest`."""
    read = FileRead(Path(path))
    if report is not None:
        report.files.append(read)
    yield from _iter_file(read.path, tolerate_torn_tail=newest, read=read)


def iter_snapshot(path: str | os.PathLike[str], *, report: ReadReport | None = None) -> Iterator[LogEntry]:
    """Entries of a `.checkpoint` (or `bootstrap.checkpoint`) file, checking Kafka's snapshot layout.

    The first batch must be a control batch that starts with a SnapshotHeaderRecord, the last record
    must be the SnapshotFooterRecord, and metadata transaction records may not appear.
    """
    read = FileRead(Path(path))
    if report is not None:
        report.files.append(read)
    source = str(read.path)
    first = True
    footer_seen = False
    for entry in _iter_file(read.path, tolerate_torn_tail=False, read=read):
        record = entry.record
        if first:
            first = False
            if not entry.is_control:
                raise CorruptDataError(
                    source,
                    entry.batch_position,
                    "first batch is not a control batch with at least one record",
                )
            if not isinstance(record, rec.SnapshotHeaderRecord):
                raise CorruptDataError(
                    source,
                    entry.batch_position,
                    f"first control record is not a snapshot header but {type(record).__name__}",
                )
        elif footer_seen:
            raise CorruptDataError(
                source,
                entry.batch_position,
                f"{type(record).__name__} at offset {entry.offset} after the snapshot footer",
            )
        elif isinstance(record, rec.SnapshotHeaderRecord):
            raise CorruptDataError(
                source, entry.batch_position, f"second snapshot header at offset {entry.offset}"
            )
        if isinstance(record, rec.SnapshotFooterRecord):
            footer_seen = True
        elif isinstance(record, _TRANSACTION_RECORDS):
            raise CorruptDataError(
                source,
                entry.batch_position,
                f"{type(record).__name__} at offset {entry.offset}: snapshots never contain transaction records",
            )
        yield entry
    if first:
        raise CorruptDataError(source, 0, "snapshot file holds no batches (expected a snapshot header batch)")
    if not footer_seen:
        raise CorruptDataError(source, read.valid_bytes, "snapshot does not end with a SnapshotFooterRecord")


def iter_file(path: str | os.PathLike[str], *, report: ReadReport | None = None) -> Iterator[LogEntry]:
    """Entries of a segment, snapshot or bootstrap.checkpoint, chosen by file name."""
    p = Path(path)
    if p.name.endswith(SNAPSHOT_SUFFIX):
        return iter_snapshot(p, report=report)
    return iter_segment(p, newest=True, report=report)


def partition_dir_of(metadata_dir: str | os.PathLike[str]) -> Path:
    """The `__cluster_metadata-0` directory, given it or the metadata log directory that holds it."""
    path = Path(metadata_dir)
    inner = path / METADATA_PARTITION_DIR
    if inner.is_dir():
        return inner
    if not path.is_dir():
        raise Zk2KraftError(
            f"{path} is not a directory (expected a metadata log directory or {METADATA_PARTITION_DIR})"
        )
    return path


def require_metadata_log(metadata_dir: str | os.PathLike[str], option: str | None = None) -> Path:
    """The `__cluster_metadata-0` directory of `metadata_dir`, refused (naming `option` and the directory) when
    it holds no log segment: Kafka always keeps an active segment, so none means no metadata log."""
    pdir = partition_dir_of(metadata_dir)
    if list_segments(pdir):
        return pdir
    where = f"{option} {metadata_dir}" if option else str(metadata_dir)
    missing = (
        f"{pdir} holds no <offset>.log segment"
        if pdir.name == METADATA_PARTITION_DIR
        else f"no {METADATA_PARTITION_DIR} directory and no <offset>.log segment"
    )
    raise Zk2KraftError(f"{where}: no KRaft metadata log here ({missing}); give a controller's metadata.log.dir")


def iter_log_dir(
    metadata_dir: str | os.PathLike[str],
    *,
    start_offset: int = 0,
    stop_offset: int | None = None,
    report: ReadReport | None = None,
    require_log: bool = False,
) -> Iterator[LogEntry]:
    """Entries of every segment in offset order, limited to [start_offset, stop_offset).

    Segments wholly before `start_offset` are not read. A torn tail is tolerated only on the newest segment.
    With `require_log`, a directory without segments is an error (Kafka always keeps an active segment).
    """
    pdir = require_metadata_log(metadata_dir) if require_log else partition_dir_of(metadata_dir)
    segments = list_segments(pdir)
    first = 0
    for i, segment in enumerate(segments):
        if segment.base_offset <= start_offset:
            first = i
    for i in range(first, len(segments)):
        segment = segments[i]
        if stop_offset is not None and segment.base_offset >= stop_offset:
            break
        read = FileRead(segment.path)
        if report is not None:
            report.files.append(read)
        yield from _iter_file(
            segment.path,
            tolerate_torn_tail=i == len(segments) - 1,
            start_offset=start_offset,
            stop_offset=stop_offset,
            read=read,
        )


# ---------------------------------------------------------------------------------------------- image


def last_metadata_offset(metadata_dir: str | os.PathLike[str]) -> int | None:
    """The offset of the log's last record a dual write reflects (not control, not NoOp), read from the
    segments alone, those a snapshot covers included; None when the segments hold none (cleaned away)."""
    last = None
    for entry in iter_log_dir(partition_dir_of(metadata_dir)):
        if not entry.is_control and not isinstance(entry.record, rec.NoOpRecord):
            last = entry.offset
    return last


def _choose_snapshot(pdir: Path, up_to_offset: int | None) -> tuple[SnapshotId, Path] | None:
    usable = [
        (sid, path)
        for sid, path in list_snapshots(pdir)
        if up_to_offset is None or sid.end_offset <= up_to_offset
    ]
    return usable[-1] if usable else None


def load_image(
    metadata_dir: str | os.PathLike[str], up_to_offset: int | None = None
) -> tuple[MetadataImage, LoadReport]:
    """Rebuild the image of a metadata log directory (or its `__cluster_metadata-0`).

    `up_to_offset` is exclusive, like a snapshot's end offset: the image holds the records with
    offset < up_to_offset. Loading starts from the newest `.checkpoint` whose end offset is
    <= up_to_offset and replays the log records from that end offset on.
    """
    pdir = partition_dir_of(metadata_dir)
    report = LoadReport(partition_dir=pdir)
    chosen = _choose_snapshot(pdir, up_to_offset)
    start = 0
    with gc_paused():
        image = MetadataImage()
        if chosen is not None:
            sid, path = chosen
            image, count = _load_snapshot(path, sid)
            report.snapshot, report.snapshot_id, report.snapshot_records = path, sid, count
            start = sid.end_offset

        segments = list_segments(pdir)
        if segments and segments[0].base_offset > start and (up_to_offset is None or start < up_to_offset):
            _missing(pdir, segments[0].base_offset, start, chosen is not None)
        replayer = MetadataReplayer(image, source=str(pdir))
        reads = ReadReport()
        replay = replayer.replay
        expected = start
        for entry in iter_log_dir(pdir, start_offset=start, stop_offset=up_to_offset, report=reads):
            if entry.offset != expected:
                _offset_gap(report, pdir, entry.offset, expected, chosen is not None)
            expected = entry.offset + 1
            if report.first_log_offset is None:
                report.first_log_offset = entry.offset
            report.last_log_offset = entry.offset
            if entry.is_control:
                # Kafka's loader also counts control batches in the image's offset (outside transactions).
                replayer.advance(entry.offset, epoch=entry.leader_epoch, timestamp_ms=entry.timestamp_ms)
                continue
            report.log_records += 1
            if not isinstance(entry.record, rec.NoOpRecord):
                report.last_metadata_offset = entry.offset
            replay(
                entry.record,
                entry.version,
                entry.offset,
                epoch=entry.leader_epoch,
                timestamp_ms=entry.timestamp_ms,
                position=entry.batch_position,
            )
    report.segments = [f.path for f in reads.files]
    report.torn_tail = reads.torn_tail
    report.pending_transaction_offset = replayer.pending_transaction_offset
    report.pending_transaction_records = replayer.pending_transaction_records
    report.warnings.extend(replayer.warnings)
    return replayer.image, report


def _offset_gap(report: LoadReport, pdir: Path, found: int, expected: int, from_snapshot: bool) -> None:
    if report.first_log_offset is None and found > expected:
        _missing(pdir, found, expected, from_snapshot)
    report.warnings.append(f"log offsets jump from {expected - 1} to {found}")


def _missing(pdir: Path, found: int, expected: int, from_snapshot: bool) -> None:
    after = "the snapshot's end offset" if from_snapshot else "the start of the log"
    raise CorruptDataError(
        str(pdir),
        None,
        f"the log starts at offset {found} but records from {after} ({expected}) on are needed; "
        f"offsets {expected}..{found - 1} are missing (no usable snapshot covers them)",
    )


def _load_snapshot(path: Path, sid: SnapshotId) -> tuple[MetadataImage, int]:
    """Image of one snapshot, with provenance = the snapshot id and its header's timestamp."""
    replayer = MetadataReplayer(source=str(path))
    timestamp = -1
    count = 0
    for entry in iter_snapshot(path):
        if entry.is_control:
            if isinstance(entry.record, rec.SnapshotHeaderRecord):
                timestamp = entry.record.last_contained_log_timestamp
            continue
        count += 1
        replayer.replay(entry.record, entry.version, entry.offset, position=entry.batch_position)
    image = replayer.image
    image.provenance.last_contained_offset = sid.end_offset - 1
    image.provenance.last_contained_epoch = sid.epoch
    image.provenance.last_contained_log_time_ms = timestamp
    image.features.epoch = sid.end_offset - 1  # a loaded snapshot publishes its features as one change
    for broker in image.cluster.brokers.values():
        # QuorumController replays a snapshot's records at its last contained offset, not their in-file ones.
        broker.register_record_offset = sid.end_offset - 1
    return image, count


def read_snapshot_image(path: str | os.PathLike[str]) -> MetadataImage:
    """The image held by one snapshot file (its name gives the provenance offset and epoch)."""
    p = Path(path)
    sid = parse_snapshot_file_name(p.name) or SnapshotId(0, 0)
    with gc_paused():
        return _load_snapshot(p, sid)[0]


def read_bootstrap_records(path: str | os.PathLike[str]) -> list[tuple[Any, int]]:
    """The (record, version) pairs of a `bootstrap.checkpoint` (or its directory), header/footer dropped."""
    p = Path(path)
    if p.is_dir():
        p = p / BOOTSTRAP_CHECKPOINT
    return [(e.record, e.version) for e in iter_snapshot(p) if not e.is_control]
