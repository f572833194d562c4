"""When a replica snapshots its committed image, and how far its log may then be cleaned.

`SnapshotSchedule` is Kafka's SnapshotGenerator's trigger: the bytes of committed batches since the last
snapshot reach `metadata.log.max.record.bytes.between.snapshots`, or a commit comes
`metadata.log.max.snapshot.interval.ms` after the last snapshot. `plan_clean` is KafkaMetadataLog.maybeClean:
while more than one snapshot is kept and the oldest breaks `metadata.max.retention.bytes` (log plus snapshots)
or `metadata.max.retention.ms`, the log start moves to the next snapshot's end offset (deleteBeforeSnapshot),
which frees the segments wholly below it and the older snapshots. The newest snapshot is never deleted, so
the log start never passes it, and snapshots are only taken at committed offsets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bridge.raft.recovery import index_paths
from migrate.atomic import fsync_directory
from migrate.kraft.batch import iter_kraft_batches
from migrate.kraft.log_config import MetadataLogConfig
from migrate.kraft.logdir import SnapshotId, list_segments, list_snapshots
from migrate.kraft.reader import decode_batch_entries

__all__ = [
    "CLEANER_INTERVAL_MS",
    "KeptSnapshot",
    "SnapshotSchedule",
    "delete_before",
    "plan_clean",
    "segments_below",
    "snapshot_timestamp",
]

CLEANER_INTERVAL_MS = 60_000
"""KafkaRaftClient's RaftMetadataLogCleanerManager runs maybeClean this often (and here after each snapshot)."""


class SnapshotSchedule:
    """SnapshotGenerator's counters: committed bytes and time since the last snapshot."""

    def __init__(self, config: MetadataLogConfig, now_ms: int) -> None:
        self.config = config
        self.bytes_since_snapshot = 0
        self.last_snapshot_ms = now_ms

    def reset(self, now_ms: int) -> None:
        """A snapshot was scheduled, or one was loaded (installed from the leader)."""
        self.bytes_since_snapshot = 0
        self.last_snapshot_ms = now_ms

    def committed(self, batch_bytes: int, now_ms: int) -> str | None:
        """SnapshotGenerator.publishLogDelta: why a snapshot is due after this commit, else None."""
        self.bytes_since_snapshot += batch_bytes
        config = self.config
        if self.bytes_since_snapshot >= config.max_record_bytes_between_snapshots:
            return f"at least {config.max_record_bytes_between_snapshots} bytes were committed since the last one"
        interval = config.max_snapshot_interval_ms
        if interval and batch_bytes and now_ms - self.last_snapshot_ms >= interval:
            return f"at least {interval} ms passed since the last one"
        return None


@dataclass(frozen=True, slots=True)
class KeptSnapshot:
    """A snapshot the log keeps: its id, size in bytes and last contained log timestamp."""

    snapshot_id: SnapshotId
    size: int
    timestamp_ms: int


def segments_below(bases: Sequence[int], log_start: int) -> int:
    """How many of the segments (base offsets, ascending) lie wholly below `log_start`: each one whose next
    segment starts at or before it (UnifiedLog.deleteOldSegments; the last, active segment always stays)."""
    count = 0
    while count + 1 < len(bases) and bases[count + 1] <= log_start:
        count += 1
    return count


def plan_clean(
    snapshots: Sequence[KeptSnapshot],
    segments: Sequence[tuple[int, int]],
    log_start: int,
    now_ms: int,
    config: MetadataLogConfig,
) -> SnapshotId | None:
    """KafkaMetadataLog.maybeClean on the snapshots kept (oldest first) and the segments ((base, size),
    ascending): the snapshot the log start should move to, or None when retention keeps everything."""
    kept = list(snapshots)
    bases = [base for base, _size in segments]
    start = log_start
    moved: SnapshotId | None = None

    def log_bytes() -> int:
        return sum(size for _base, size in segments[segments_below(bases, start) :])

    def clean(breached: Callable[[KeptSnapshot], bool]) -> None:
        # cleanSnapshots: the oldest of each pair goes when it breaches, by moving the log start to the next.
        nonlocal kept, start, moved
        while len(kept) >= 2 and breached(kept[0]):
            following = kept[1].snapshot_id
            if not start < following.end_offset:  # deleteBeforeSnapshot refuses: nothing more to clean
                return
            start, moved, kept = following.end_offset, following, kept[1:]

    if config.max_retention_bytes >= 0:
        total = sum(snapshot.size for snapshot in kept)

        def too_big(snapshot: KeptSnapshot) -> bool:
            nonlocal total
            if log_bytes() + total > config.max_retention_bytes:
                total -= snapshot.size
                return True
            return False

        clean(too_big)
    if config.max_retention_ms >= 0:
        clean(lambda snapshot: now_ms - snapshot.timestamp_ms > config.max_retention_ms)
    return moved


def delete_before(pdir: Path, log_start: int) -> tuple[int, int, list[SnapshotId]]:
    """The files of deleteBeforeSnapshot: segments wholly below `log_start` and snapshots ending before it.

    Returns the base offset of the first segment kept, how many segments went and which snapshots."""
    segments = list_segments(pdir)
    doomed = segments[: segments_below([segment.base_offset for segment in segments], log_start)]
    for segment in doomed:
        for path in (segment.path, *index_paths(pdir, segment.base_offset)):
            path.unlink(missing_ok=True)
    older = [(sid, path) for sid, path in list_snapshots(pdir) if sid.end_offset < log_start]
    for _sid, path in older:
        path.unlink(missing_ok=True)
    fsync_directory(pdir)
    first_kept = segments[len(doomed)].base_offset if segments else log_start
    return first_kept, len(doomed), [sid for sid, _path in older]


def snapshot_timestamp(path: Path) -> int:
    """Snapshots.lastContainedLogTimestamp: the LastContainedLogTimestamp of the snapshot's header record."""
    with open(path, "rb") as f:
        head = f.read(4096)  # the header batch holds one or three small records
    for position, header, raw in iter_kraft_batches(head, str(path), tolerate_torn_tail=True):
        for entry in decode_batch_entries(str(path), position, header, raw):
            return int(getattr(entry.record, "last_contained_log_timestamp", -1))
    return -1
