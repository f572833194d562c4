"""What the quorum core needs from a replicated log: Kafka's `ReplicatedLog` (raft/ReplicatedLog.java).

`bridge.raft.metadata_log.MetadataLog` implements it on disk, exactly as Kafka's KafkaMetadataLog lays the
partition out; the simulation's in-memory log implements it as Kafka's MockLog does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from bridge.raft.messages import OffsetAndEpoch


class ReplicatedLog(Protocol):
    """Kafka's ReplicatedLog, restricted to what KafkaRaftClient calls."""

    def end_offset(self) -> int:
        """The log end offset (the next offset to be written)."""

    def start_offset(self) -> int:
        """The first offset held in segments (the end of the snapshot it starts from, else 0)."""

    def last_fetched_epoch(self) -> int:
        """The epoch of the last batch, or of the snapshot the log starts from, else 0."""

    def epoch_starts(self) -> Sequence[tuple[int, int]]:
        """The leader-epoch cache: (epoch, start offset) of each epoch in the log, ascending."""

    def flushed_end_offset(self) -> int:
        """The end offset of what is fsynced (what this replica may report as its own end offset)."""

    def append_as_leader(self, records: Sequence[Any], epoch: int) -> int:
        """Append one batch of `records` in `epoch` at the end; return its last offset."""

    def append_leader_change(
        self, epoch: int, leader_id: int, voters: Sequence[int], granting: Sequence[int]
    ) -> int:
        """Append the LeaderChangeMessage control batch that starts `epoch`; return its offset."""

    def append_as_follower(self, data: bytes) -> None:
        """Append record batches fetched from the leader (raise CorruptDataError on a malformed one)."""

    def truncate_to(self, offset: int) -> None:
        """Drop every batch at or after `offset` (and their epochs)."""

    def flush(self) -> None:
        """Make everything appended durable (or start doing so: `flushed_end_offset` says when)."""

    def update_high_watermark(self, offset: int) -> None:
        """Everything below `offset` is committed (readers may now apply it)."""

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one holding `offset`, at least one batch, about `max_bytes` at most."""

    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        """The newest snapshot's id (end offset, epoch), not counting the bootstrap checkpoint."""

    def earliest_snapshot_id(self) -> OffsetAndEpoch | None:
        """The oldest snapshot's id, not counting the bootstrap checkpoint."""

    def snapshot_size(self, snapshot_id: OffsetAndEpoch) -> int | None:
        """The size in bytes of that snapshot, or None if it does not exist."""

    def read_snapshot(self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int) -> bytes:
        """Bytes of that snapshot from `position`."""

    def write_snapshot_chunk(self, snapshot_id: OffsetAndEpoch, position: int, data: bytes) -> None:
        """Append `data` at `position` to the partial snapshot being downloaded."""

    def install_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        """Freeze the downloaded snapshot and truncate the whole log to it (its end becomes the log start)."""

    def discard_partial_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        """Forget a partial download (the leader no longer has that snapshot)."""


def end_offset_for_epoch(log: ReplicatedLog, epoch: int) -> OffsetAndEpoch:
    """KafkaMetadataLog.endOffsetForEpoch over LeaderEpochFileCache.endOffsetFor.

    The latest epoch ends at the log end; an older one where the next epoch starts; one older than every
    epoch in the cache at the first epoch's start (the oldest snapshot's id when that is the log start);
    an unknown newer one answers the log end and the last epoch.
    """
    starts = list(log.epoch_starts())
    found: OffsetAndEpoch | None = None
    if starts and starts[-1][0] == epoch:
        found = OffsetAndEpoch(log.end_offset(), epoch)
    else:
        higher = next((start for start_epoch, start in starts if start_epoch > epoch), None)
        if higher is not None:
            floors = [start_epoch for start_epoch, _start in starts if start_epoch <= epoch]
            found = OffsetAndEpoch(higher, floors[-1] if floors else epoch)
    if found is None:
        return OffsetAndEpoch(log.end_offset(), log.last_fetched_epoch())
    earliest = log.earliest_snapshot_id()
    if earliest is not None and found.offset == earliest.offset and found.epoch == epoch:
        return earliest
    return found


def validate_offset_and_epoch(
    log: ReplicatedLog, offset: int, epoch: int
) -> tuple[str, OffsetAndEpoch | None]:
    """ReplicatedLog.validateOffsetAndEpoch: ("valid", None), ("diverging", end) or ("snapshot", id)."""
    start = log.start_offset()
    if start == 0 and offset == 0:
        return "valid", None
    earliest = log.earliest_snapshot_id()
    if earliest is not None and (
        offset < start or (offset == start and epoch != earliest.epoch) or epoch < earliest.epoch
    ):
        latest = log.latest_snapshot_id()
        return "snapshot", latest if latest is not None else earliest
    end = end_offset_for_epoch(log, epoch)
    if end.epoch != epoch or end.offset < offset:
        return "diverging", end
    return "valid", None
