"""A metadata log directory as it is on disk: Kafka's tail recovery, the directory checks, loading.

`recover_segments` is Kafka's log recovery limited to the tail (a torn or corrupt last batch is truncated,
earlier damage is an error naming file and offset); `load_log` replays the newest snapshot and the segments
after it; `preview` reads a directory as `MetadataLog.open` would without changing a byte (refusals are
judged on it). The live log that appends, elects and rolls is `bridge.raft.metadata_log`. Kafka's counterparts:
`UnifiedLog`'s recovery (`LogLoader`) and `KafkaRaftClient`'s start-up read of its log and snapshots.
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from migrate.atomic import fsync_directory
from migrate.errors import CorruptDataError, InvalidRequestError, UnsupportedVersionError, Zk2KraftError
from migrate.gcpause import gc_paused
from migrate.kraft.batch import HEADER_SIZE, LOG_OVERHEAD, MIN_BATCH_LENGTH, peek_header
from migrate.kraft.image import MetadataImage
from migrate.kraft.logdir import (
    INDEX_SUFFIX,
    LEADER_EPOCH_CHECKPOINT,
    META_PROPERTIES,
    QUORUM_STATE,
    TIME_INDEX_SUFFIX,
    EpochEntry,
    MetaProperties,
    QuorumState,
    SegmentFile,
    SnapshotId,
    list_segments,
    list_snapshots,
    read_leader_epoch_checkpoint,
    read_meta_properties,
    read_quorum_state,
    segment_file_name,
)
from migrate.kraft.reader import (
    METADATA_PARTITION_DIR,
    iter_log_dir,
    load_image,
    read_snapshot_image,
)
from migrate.kraft.replay import MetadataReplayer
from migrate.kraft.segment_walk import (
    SegmentWalk,
    StopKind,
    WalkedBatch,
    intact_batch_after,
    mapped_file,
    walk_batches,
)
from migrate.kraft.snapshot import MAX_BATCH_SIZE_BYTES

__all__ = [
    "LoadedLog",
    "LogPreview",
    "RecoveredSegments",
    "SegmentScan",
    "check_meta",
    "cut_position",
    "index_paths",
    "is_unformatted",
    "load_log",
    "preview",
    "read_quorum",
    "recover_segments",
]

log = logging.getLogger(__name__)

_LENGTH = struct.Struct(">i")

# ---------------------------------------------------------------------------------------------- recovery scan


@dataclass(slots=True)
class SegmentScan:
    """One segment's walk and whether the bad bytes after its valid batches, if any, may be truncated."""

    segment: SegmentFile
    walk: SegmentWalk
    file_size: int
    tail_like: bool = False
    """The bad bytes are a torn or corrupt final batch (or zero fill), which recovery may truncate."""

    @property
    def batches(self) -> list[WalkedBatch]:
        return self.walk.batches

    @property
    def valid_bytes(self) -> int:
        return self.walk.valid_bytes

    @property
    def problem(self) -> str | None:
        return self.walk.stop.problem if self.walk.stop is not None else None

    @property
    def next_offset(self) -> int:
        return self.batches[-1].last_offset + 1 if self.batches else self.segment.base_offset


def _scan_segment(segment: SegmentFile, expected_offset: int) -> SegmentScan:
    """Walk a segment's batch frames; offsets going back are corruption wherever they are."""
    with mapped_file(segment.path) as view:
        walk = walk_batches(view, str(segment.path), expected_offset)
        scan = SegmentScan(segment, walk, walk.file_size)
        stop = walk.stop
        if stop is None:
            return scan
        if stop.kind is StopKind.OFFSETS_BACK:
            raise CorruptDataError(str(segment.path), stop.position, stop.problem)
        if stop.bytes_left < HEADER_SIZE:
            scan.tail_like = True
            return scan
        # Only the last batch of the log may be damaged: one a crash interrupted (its declared end
        # reaches past the end of the file), or zero fill the file system left after the last write.
        # A torn batch is at most KRaft's largest batch; more bytes than that are not one batch.
        pos, remaining = stop.position, stop.bytes_left
        (length,) = _LENGTH.unpack_from(view, pos + 8)
        batch_size = length + LOG_OVERHEAD
        reaches_end = length >= MIN_BATCH_LENGTH and batch_size >= remaining <= MAX_BATCH_SIZE_BYTES
        zero_fill = remaining <= 2 * MAX_BATCH_SIZE_BYTES and view[pos:].tobytes() == bytes(remaining)
        expected = walk.batches[-1].last_offset + 1 if walk.batches else expected_offset
        scan.tail_like = (reaches_end or zero_fill) and not intact_batch_after(view, pos, expected)
    return scan


@dataclass(slots=True)
class RecoveredSegments:
    """The segments after recovery, with the active (last) one's batches for its index."""

    segments: list[SegmentFile]
    active: SegmentScan | None
    log_start_offset: int | None
    log_end_offset: int | None
    last_batch_epoch: int
    epoch_starts: list[EpochEntry]
    truncations: list[str]


def recover_segments(pdir: Path) -> RecoveredSegments:
    """Kafka's log recovery, limited to the tail: truncate a damaged last batch, fail on earlier damage."""
    segments = list_segments(pdir)
    scans: list[SegmentScan] = []
    expected = 0
    for segment in segments:
        scan = _scan_segment(segment, expected)
        scans.append(scan)
        expected = scan.next_offset
    truncations: list[str] = []
    for i, scan in enumerate(scans):
        if scan.problem is None:
            continue
        later_data = any(s.file_size for s in scans[i + 1 :])
        if not scan.tail_like or later_data:
            follows = scan.file_size - scan.valid_bytes
            raise CorruptDataError(
                str(scan.segment.path),
                scan.valid_bytes,
                f"{scan.problem}; it is not the end of the log ({follows} bytes in this file from here"
                f"{' and later segments' if later_data else ''}), so this is corruption, not a torn write",
            )
        cut = scan.file_size - scan.valid_bytes
        message = (
            f"{scan.segment.path}: {scan.problem} at byte {scan.valid_bytes}; truncating the last {cut} "
            f"bytes (log recovery keeps offsets up to {scan.next_offset - 1})"
        )
        log.warning("%s", message)
        truncations.append(message)
        with open(scan.segment.path, "r+b") as f:
            f.truncate(scan.valid_bytes)
            os.fsync(f.fileno())
        scan.file_size = scan.valid_bytes
        for empty in scans[i + 1 :]:
            _delete_segment(empty.segment)
        scans = scans[: i + 1]
        break
    segments = [s.segment for s in scans]
    epoch_starts: list[EpochEntry] = []
    last_epoch = -1
    for scan in scans:
        for batch in scan.batches:
            if batch.leader_epoch > last_epoch:
                epoch_starts.append(EpochEntry(batch.leader_epoch, batch.base_offset))
                last_epoch = batch.leader_epoch
    return RecoveredSegments(
        segments=segments,
        active=scans[-1] if scans else None,
        log_start_offset=segments[0].base_offset if segments else None,
        log_end_offset=scans[-1].next_offset if scans else None,
        last_batch_epoch=last_epoch,
        epoch_starts=epoch_starts,
        truncations=truncations,
    )


def cut_position(path: Path, base_offset: int, offset: int) -> tuple[int, int]:
    """Byte position and offset of the first batch of a segment ending at or after `offset` (else its end)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return 0, base_offset
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            data = memoryview(mapped)
            try:
                position, next_offset = 0, base_offset
                while position < size:
                    header = peek_header(data, str(path), position)
                    if header.last_offset >= offset:
                        return position, header.base_offset
                    position += header.size_in_bytes
                    next_offset = header.last_offset + 1
            finally:
                data.release()
    return size, next_offset


def index_paths(pdir: Path, base_offset: int) -> tuple[Path, Path]:
    return (
        pdir / segment_file_name(base_offset, INDEX_SUFFIX),
        pdir / segment_file_name(base_offset, TIME_INDEX_SUFFIX),
    )


def _delete_segment(segment: SegmentFile) -> None:
    for path in (segment.path, *index_paths(segment.path.parent, segment.base_offset)):
        path.unlink(missing_ok=True)
    fsync_directory(segment.path.parent)


# ------------------------------------------------------------------------------------------- directory checks


def is_unformatted(directory: Path) -> bool:
    if (directory / META_PROPERTIES).exists():
        return False
    pdir = directory / METADATA_PARTITION_DIR
    if pdir.is_dir() and (list_segments(pdir) or list_snapshots(pdir)):
        raise Zk2KraftError(
            f"{directory} holds a metadata log in {METADATA_PARTITION_DIR} but no {META_PROPERTIES}; "
            f"refusing to guess its cluster and node id"
        )
    return True


def check_meta(directory: Path, node_id: int, cluster_id: str | None) -> MetaProperties:
    path = directory / META_PROPERTIES
    meta = read_meta_properties(path)
    if meta.version != 1:
        raise UnsupportedVersionError(
            f"{path} is version {meta.version} (ZooKeeper-era); a KRaft controller needs version 1"
        )
    if meta.node_id != node_id:
        raise InvalidRequestError(
            f"{path} has node.id {meta.node_id}, but this controller's node id is {node_id}"
        )
    if cluster_id is not None and meta.cluster_id != cluster_id:
        raise InvalidRequestError(
            f"{path} has cluster.id {meta.cluster_id}, but the cluster id given is {cluster_id}"
        )
    return meta


# ---------------------------------------------------------------------------------------------------- preview


@dataclass(frozen=True, slots=True)
class LogPreview:
    """What `MetadataLog.open` would find in a directory, read without changing a byte of it.

    `leader_epoch` is the epoch the open would lead in, `end_offset` the next offset before it writes
    anything, `cluster_id` None for a directory that is not formatted yet.
    """

    image: MetadataImage
    end_offset: int
    leader_epoch: int
    cluster_id: str | None
    torn_tail: str | None = None


def preview(
    directory: str | os.PathLike[str],
    *,
    node_id: int,
    cluster_id: str | None,
    voters: frozenset[int] | None = None,
) -> LogPreview:
    """Read `directory` as `MetadataLog.open` would, read-only (a torn tail is reported, not truncated).

    Raises what the open would raise for a directory of another node or cluster, before anything of it is
    created, formatted or recovered; refusals are judged on this.
    """
    root = Path(directory)
    if not root.exists() or is_unformatted(root):
        return LogPreview(MetadataImage(), 0, 1, None)
    meta = check_meta(root, node_id, cluster_id)
    pdir = root / METADATA_PARTITION_DIR
    if not pdir.is_dir():
        return LogPreview(MetadataImage(), 0, 1, meta.cluster_id)
    quorum = read_quorum(pdir, node_id, voters)
    image, report = load_image(pdir)
    if report.last_log_offset is not None:
        end = report.last_log_offset + 1
    else:
        end = report.snapshot_id.end_offset if report.snapshot_id is not None else 0
    checkpoint = pdir / LEADER_EPOCH_CHECKPOINT
    known = [image.provenance.last_contained_epoch]
    if checkpoint.exists():
        known.extend(e.epoch for e in read_leader_epoch_checkpoint(checkpoint))
    if quorum is not None:
        known.append(quorum.leader_epoch)
    if report.snapshot_id is not None:
        known.append(report.snapshot_id.epoch)
    torn = None
    if report.torn_tail is not None:
        path, tail = report.torn_tail
        torn = f"{path}: {tail.describe()}"
    return LogPreview(image, end, max(max(known), 0) + 1, meta.cluster_id, torn)


# ---------------------------------------------------------------------------------------------------- loading


def read_quorum(pdir: Path, node_id: int, voters: frozenset[int] | None = None) -> QuorumState | None:
    """`quorum-state`, refused when it names another voter set than this bridge's (`voters`, default itself).

    Kafka ignores the file's voters; a bridge checks them so that a quorum member is never started alone
    (two leaders) and a static voter set is never changed in place. A single bridge's directory (one voter)
    may become any voter's of a quorum (a copy per voter, all stopped first, as a rolling controller change
    would).
    """
    path = pdir / QUORUM_STATE
    if not path.exists():
        return None
    state = read_quorum_state(path)
    wanted = voters if voters is not None else frozenset({node_id})
    found = None if state.current_voters is None else frozenset(state.current_voters)
    if found is not None and found != wanted and not (len(found) == 1 and found <= wanted):
        if wanted == {node_id}:
            raise InvalidRequestError(
                f"{path} lists voters {sorted(found)}: this directory belongs to a quorum of bridges; start it "
                f"with --voters naming them, never alone (two controllers would lead at once)"
            )
        raise InvalidRequestError(
            f"{path} lists voters {sorted(found)}, not the --voters {sorted(wanted)}: a static quorum "
            f"(kraft.version 0) cannot change its voters in place; stop every bridge and start them all with "
            f"one voter set on copies of a voter's directory"
        )
    return state


@dataclass(slots=True)
class LoadedLog:
    replayer: MetadataReplayer
    snapshot: SnapshotId | None
    data_records: int


def load_log(pdir: Path, recovered: RecoveredSegments) -> tuple[LoadedLog, int]:
    """Newest snapshot within the log, then the log records after it; returns the state and end offset."""
    snapshots = list_snapshots(pdir)
    log_end = recovered.log_end_offset
    if snapshots and log_end is not None and snapshots[-1][0].end_offset > log_end:
        sid, path = snapshots[-1]
        raise CorruptDataError(
            str(path),
            None,
            f"the snapshot holds offsets up to {sid.end_offset - 1}, but the log ends at offset {log_end - 1}",
        )
    chosen = snapshots[-1] if snapshots else None
    start = chosen[0].end_offset if chosen is not None else 0
    log_start = recovered.log_start_offset
    if log_start is not None and log_start > start:
        after = "the snapshot's end offset" if chosen is not None else "the start of the log"
        raise CorruptDataError(
            str(pdir),
            None,
            f"the log starts at offset {log_start} but records from {after} ({start}) on are needed",
        )
    data_records = 0
    with gc_paused():
        image = read_snapshot_image(chosen[1]) if chosen is not None else MetadataImage()
        if chosen is not None and not image.is_empty():
            data_records += 1
        replayer = MetadataReplayer(image, source=str(pdir))
        for entry in iter_log_dir(pdir, start_offset=start):
            if entry.is_control:
                replayer.advance(entry.offset, epoch=entry.leader_epoch, timestamp_ms=entry.timestamp_ms)
                continue
            data_records += 1
            replayer.replay(
                entry.record,
                entry.version,
                entry.offset,
                epoch=entry.leader_epoch,
                timestamp_ms=entry.timestamp_ms,
                position=entry.batch_position,
            )
    end = log_end if log_end is not None else start
    return LoadedLog(replayer, chosen[0] if chosen is not None else None, data_records), end
