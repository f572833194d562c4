"""The Raft core's replicated log on disk: Kafka's KafkaMetadataLog over the bridge's metadata log.

`ReplicaLog.open` formats or recovers a `metadata.log.dir` as `MetadataLog.open` does (same files, same
recovery, snapshot and segments loaded into the image) but does not elect itself: the Raft core decides
epochs, keeps `quorum-state` (`bridge.raft.quorum.FileElectionStore`) and starts each of its epochs with
`append_leader_change`. A leader's appends replay into the image at once, as before; a follower's fetched
batches are written as they came and replayed only once the high watermark passes them (Kafka's standby
controllers apply committed data only). A truncation that removes records the image holds rebuilds the
image from the directory.

Durable means committed. `metadata_log` (what the pipeline, the driver and the brokers' Fetch use) is a
`MetadataLog` whose `durable_offset`, durability futures and `wait_durable` move only once a record is both
fsynced here and below the high watermark; a truncated append's future fails. `on_flushed`, set by the
owner, is called on the log's writer thread after each fsync (the transport wakes its node from it). Once
this replica leads and the high watermark has passed its LeaderChangeMessage, the controller appends
`activation_records()` (bootstrap records on an empty log, an abort of an open transaction).
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bridge.api import RecordAndVersion
from bridge.raft.fetch_server import MAX_FETCH_SIZE_BYTES, MetadataLogReader
from bridge.raft.messages import OffsetAndEpoch
from bridge.raft.metadata_log import (
    AppendResult,
    CommittedImage,
    MetadataLog,
    _activation_records,
    _Pending,
    is_new_snapshot,
    write_image_snapshot,
)
from bridge.raft.recovery import (
    LoadedLog,
    RecoveredSegments,
    cut_position,
    index_paths,
    load_log,
    recover_segments,
)
from bridge.raft.snapshots import (
    CLEANER_INTERVAL_MS,
    KeptSnapshot,
    SnapshotSchedule,
    delete_before,
    plan_clean,
    snapshot_timestamp,
)
from migrate.atomic import fsync_directory
from migrate.errors import CorruptDataError, Zk2KraftError
from migrate.kraft import metadata_version as mvs
from migrate.kraft.activation import encode_leader_change_batch
from migrate.kraft.batch import iter_kraft_batches
from migrate.kraft.log_config import MetadataLogConfig
from migrate.kraft.logdir import (
    LEADER_EPOCH_CHECKPOINT,
    EpochEntry,
    SnapshotId,
    list_segments,
    list_snapshots,
    read_leader_epoch_checkpoint,
    snapshot_file_name,
    write_leader_epoch_checkpoint,
)
from migrate.kraft.metadata_version import MetadataVersion
from migrate.kraft.reader import LogEntry, decode_batch_entries, read_snapshot_image
from migrate.kraft.snapshot import WrittenSnapshot

__all__ = ["CommittedMetadataLog", "ReplicaLog"]

log = logging.getLogger(__name__)

PARTIAL_SUFFIX = ".checkpoint.part"
"""Snapshots.PARTIAL_SUFFIX: a snapshot being downloaded (`<id>-<random>.checkpoint.part`)."""
DELETED_SUFFIX = ".checkpoint.deleted"
"""Snapshots.DELETE_SUFFIX: a snapshot marked for deletion."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _resolve(items: Sequence[_Pending], error: BaseException | None = None) -> None:
    for item in items:
        if item.future.done():
            continue
        if error is None:
            item.future.set_result(None)
        else:
            item.future.set_exception(error)


@dataclass(slots=True)
class _FetchedBatch:
    """A batch appended as follower, decoded, waiting for the high watermark to be replayed."""

    base_offset: int
    last_offset: int
    entries: list[LogEntry]


@dataclass(slots=True)
class _WrittenView:
    """What MetadataLogReader reads through: the log as written to its segments, fsynced or not (what a leader
    serves its followers; it counts its own end offset only once fsynced)."""

    partition_dir: Path
    cluster_id: str
    node_id: int
    lock: threading.Condition
    leader_epoch: int = -1
    durable_offset: int = -1
    end_offset: int = 0


class CommittedMetadataLog(MetadataLog):
    """A MetadataLog opened in replica mode: durable once fsynced and committed; the image follows commits.

    Built by `ReplicaLog.open`; the pipeline and the driver use it as they use a MetadataLog.
    """

    flushed_offset: int
    """The last offset the writer thread has fsynced."""
    committed_offset: int
    """The last offset below the high watermark."""
    leading: bool
    """Whether appends are taken (this replica leads `leader_epoch`)."""
    on_flushed: Callable[[], None] | None
    on_written: Callable[[], None] | None
    """Called on the writer thread once a round is in the file, before its fsync (followers may fetch it)."""
    applied_end: int
    """The image holds every record below this offset."""
    data_records: int
    opened: RecoveredSegments | None

    def _replica_opened(self, loaded: LoadedLog, recovered: RecoveredSegments) -> None:
        """Start state of a replica: everything on disk is in the image; committed is what a snapshot holds."""
        self.flushed_offset = self.end_offset - 1
        self.committed_offset = loaded.snapshot.end_offset - 1 if loaded.snapshot is not None else -1
        self.durable_offset = min(self.flushed_offset, self.committed_offset)
        self.leading = False
        self.on_flushed = None
        self.on_written = None
        self.applied_end = self.end_offset
        self.data_records = loaded.data_records
        self.opened = recovered
        self._awaiting: deque[_Pending] = deque()
        self._abandoned_end = 0
        self._abandoned_reason = ""
        self._unapplied: deque[_FetchedBatch] = deque()
        self._uncommitted_sizes: deque[tuple[int, int]] = deque()
        """(last offset, bytes) of each batch written since the high watermark, for the snapshot trigger."""
        self._committed_bytes = 0
        self._resolver = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix=f"metadata-log-commit-{self.node_id}"
        )
        for entry in self.partition_dir.iterdir():
            if entry.name.endswith((PARTIAL_SUFFIX, DELETED_SUFFIX)):
                log.info("removing %s, left by an interrupted snapshot download or deletion", entry)
                entry.unlink(missing_ok=True)

    # ------------------------------------------------------------------------------ durability

    def _on_written(self) -> None:
        _tell_owner(self.on_written, "on_written")

    def _on_synced(self, items: list[_Pending]) -> None:
        with self.lock:
            self.flushed_offset = items[-1].last_offset
            self.batches_written += len(items)
            abandoned = [p for p in items if p.last_offset < self._abandoned_end]
            self._awaiting.extend(p for p in items if p.last_offset >= self._abandoned_end)
            self._release_durable()
        if abandoned:
            _resolve(abandoned, Zk2KraftError(self._abandoned_reason))
        _tell_owner(self.on_flushed, "on_flushed")

    def abandon_uncommitted(self, reason: str) -> None:
        """Leadership lost: fail now what waits to be committed (the new leader may still commit it), as
        Kafka's QuorumController fails its pending events when it renounces."""
        with self.lock:
            self._abandoned_end, self._abandoned_reason = self.end_offset, reason
            left = [p for p in self._awaiting if p.last_offset > self.committed_offset]
            self._awaiting = deque(p for p in self._awaiting if p.last_offset <= self.committed_offset)
        _resolve(left, Zk2KraftError(reason))

    def commit(self, high_watermark: int) -> None:
        """Everything below `high_watermark` is committed: replay it, then let its durability futures go."""
        self.apply_up_to(high_watermark)
        with self.lock:
            if high_watermark - 1 > self.committed_offset:
                self.committed_offset = high_watermark - 1
                self._release_durable()
            sizes = self._uncommitted_sizes
            while sizes and sizes[0][0] <= self.committed_offset:
                self._committed_bytes += sizes.popleft()[1]

    def take_committed_bytes(self) -> int:
        """Bytes of the batches committed since the last call (SnapshotGenerator counts what it replays)."""
        with self.lock:
            taken, self._committed_bytes = self._committed_bytes, 0
        return taken

    def committed_image(self) -> CommittedImage | None:
        """The image's records if it holds exactly the log up to a committed offset outside any metadata
        transaction (a leader's image runs ahead of its high watermark while appends wait for the quorum)."""
        with self.lock:
            return self.image_up_to_locked(self.applied_end, self.committed_offset)

    def enqueue(self, data: bytes, base: int, last: int, stamp: int) -> concurrent.futures.Future[None]:
        future = super().enqueue(data, base, last, stamp)
        self._uncommitted_sizes.append((last, len(data)))
        return future

    def _release_durable(self) -> None:
        """Caller holds `lock`: move `durable_offset` and resolve (in order, on one thread) what it passed."""
        self.durable_offset = min(self.flushed_offset, self.committed_offset)
        ready: list[_Pending] = []
        while self._awaiting and self._awaiting[0].last_offset <= self.durable_offset:
            ready.append(self._awaiting.popleft())
        if ready:
            self._resolver.submit(_resolve, ready)
        self.lock.notify_all()

    def wait_flushed(self) -> None:
        """Block until everything appended so far is fsynced (raises if the log failed or closed first)."""
        with self.lock:
            target = self.end_offset - 1
            self.lock.wait_for(
                lambda: self.flushed_offset >= target or self._failure is not None or self.closed
            )
            if self.flushed_offset < target:
                self.check_usable()
                raise Zk2KraftError(f"the metadata log in {self.partition_dir} closed before it was flushed")

    # ------------------------------------------------------------------------------ appending

    def append(self, records: Sequence[RecordAndVersion], *, now_ms: int | None = None) -> AppendResult:
        """Append as the leader of `leader_epoch`, after the records before it are in the image."""
        if not self.leading:
            raise Zk2KraftError(
                f"the metadata log in {self.partition_dir} is not leading: appends go to the Raft leader"
            )
        self.apply_up_to(self.end_offset)
        result = super().append(records, now_ms=now_ms)
        with self.lock:
            self.applied_end = max(self.applied_end, result.last_offset + 1)
            self.data_records += len(records)
        return result

    def lead(
        self, epoch: int, voters: Sequence[int], granting: Sequence[int], now_ms: int | None = None
    ) -> int:
        """Start leading `epoch` with its LeaderChangeMessage (the image takes the whole log first)."""
        self.apply_up_to(self.end_offset)
        stamp = _now_ms() if now_ms is None else now_ms
        with self.lock:
            self.check_usable()
            offset = self.end_offset
            self._replayer.advance(offset, epoch=epoch, timestamp_ms=stamp)
            data = encode_leader_change_batch(offset, epoch, stamp, self.node_id, voters, granting)
            self.enqueue(data, offset, offset, stamp)
            self.applied_end = offset + 1
            self.leader_epoch = epoch
            self.leading = True
        return offset

    def append_fetched(self, data: bytes, batches: Sequence[tuple[int, int, _FetchedBatch, int]]) -> None:
        """Queue fetched batches as they are: (position in `data`, size, batch, max timestamp) each."""
        with self.lock:
            self.check_usable()
            self.leading = False
            for position, size, batch, max_timestamp in batches:
                if batch.base_offset != self.end_offset:
                    raise CorruptDataError(
                        "fetched records",
                        position,
                        f"batch at offset {batch.base_offset} is not at the log end",
                    )
                self.enqueue(
                    data[position : position + size], batch.base_offset, batch.last_offset, max_timestamp
                )
                self._unapplied.append(batch)

    def apply_up_to(self, end: int) -> None:
        """Replay the fetched batches that end below `end` into the image."""
        with self.lock:
            replayer = self._replayer
            while self._unapplied and self._unapplied[0].last_offset < end:
                batch = self._unapplied[0]
                try:
                    for entry in batch.entries:
                        if entry.is_control:
                            replayer.advance(
                                entry.offset, epoch=entry.leader_epoch, timestamp_ms=entry.timestamp_ms
                            )
                            continue
                        replayer.replay(
                            entry.record,
                            entry.version,
                            entry.offset,
                            epoch=entry.leader_epoch,
                            timestamp_ms=entry.timestamp_ms,
                        )
                        self.data_records += 1
                except BaseException as exc:
                    # The image no longer matches the log: refuse everything from now on (reopen to recover).
                    self._failure = exc
                    raise
                self._unapplied.popleft()
                self.applied_end = batch.last_offset + 1

    def activation_records(
        self, metadata_version: MetadataVersion, zk_migration_enabled: bool
    ) -> list[RecordAndVersion]:
        """What `_activation_records` gives for the whole log as it now is (the image first takes all of it)."""
        self.apply_up_to(self.end_offset)
        with self.lock:
            loaded = LoadedLog(self._replayer, self.loaded_snapshot, self.data_records)
            return _activation_records(self.directory, loaded, metadata_version, zk_migration_enabled)

    # ------------------------------------------------------------------------------ rewriting the log

    def _quiesce(self) -> None:
        """Caller holds `lock`: wait until the writer has written and fsynced everything queued."""
        self.check_usable()
        self.lock.wait_for(lambda: self.flushed_offset >= self.end_offset - 1 or self._failure is not None)
        self.check_usable()

    def _close_active_segment(self) -> None:
        """Caller holds `lock`, writer idle: the active segment is about to be rewritten."""
        if self._segment_fd >= 0:
            os.close(self._segment_fd)
            self._segment_fd = -1

    def truncate(self, offset: int) -> RecoveredSegments:
        """Drop every batch at or after `offset`, as UnifiedLog.truncateTo does; refuse below the high watermark."""
        dropped: list[_Pending] = []
        with self.lock:
            if offset <= self.committed_offset:
                raise Zk2KraftError(
                    f"{self.partition_dir}: refusing to truncate to offset {offset}, below the high watermark "
                    f"{self.committed_offset + 1} (committed records are never removed)"
                )
            self._quiesce()
            segments = list_segments(self.partition_dir)
            keep = [s for s in segments if s.base_offset <= offset] or segments[:1]
            cut_at, new_end = cut_position(keep[-1].path, keep[-1].base_offset, offset)
            if new_end <= self.committed_offset:
                raise Zk2KraftError(
                    f"{keep[-1].path}: offset {offset} is inside a batch starting at {new_end}, below the high "
                    f"watermark {self.committed_offset + 1}; refusing to truncate"
                )
            try:
                self._close_active_segment()
                for segment in segments[len(keep) :]:
                    for path in (segment.path, *index_paths(self.partition_dir, segment.base_offset)):
                        path.unlink(missing_ok=True)
                with open(keep[-1].path, "r+b") as f:
                    f.truncate(cut_at)
                    os.fsync(f.fileno())
                fsync_directory(self.partition_dir)
                recovered = recover_segments(self.partition_dir)
                end = recovered.log_end_offset if recovered.log_end_offset is not None else new_end
                self._reset_tail(recovered, end)
            except BaseException as exc:
                self._failure = self._failure or exc
                raise
            while self._awaiting and self._awaiting[-1].last_offset >= end:
                dropped.append(self._awaiting.pop())
            while self._unapplied and self._unapplied[-1].last_offset >= end:
                self._unapplied.pop()
            while self._uncommitted_sizes and self._uncommitted_sizes[-1][0] >= end:
                self._uncommitted_sizes.pop()
            if self.applied_end > end:
                # The image holds records that are gone (a former leader's uncommitted appends): reload it.
                log.warning(
                    "%s: truncated to %d below what the image holds; reloading it", self.partition_dir, end
                )
                self._reload(recovered)
        _resolve(
            dropped,
            Zk2KraftError(f"{self.partition_dir}: offset truncated by the Raft leader, not committed"),
        )
        return recovered

    def install(self, snapshot: SnapshotId) -> None:
        """The log now starts at the frozen `snapshot`'s end: delete every segment, reload the image from it."""
        with self.lock:
            self._quiesce()
            try:
                self._close_active_segment()
                for segment in list_segments(self.partition_dir):
                    for path in (segment.path, *index_paths(self.partition_dir, segment.base_offset)):
                        path.unlink(missing_ok=True)
                for older, path in list_snapshots(self.partition_dir):
                    if older != snapshot and older.end_offset <= snapshot.end_offset:
                        path.unlink(missing_ok=True)
                fsync_directory(self.partition_dir)
                self._reset_tail(recover_segments(self.partition_dir), snapshot.end_offset)
                self.committed_offset = max(self.committed_offset, snapshot.end_offset - 1)
                self._unapplied.clear()
                self._uncommitted_sizes.clear()
                self._reload(recover_segments(self.partition_dir))
            except BaseException as exc:
                self._failure = self._failure or exc
                raise
            dropped = [p for p in self._awaiting if p.last_offset >= snapshot.end_offset]
            self._awaiting = deque(p for p in self._awaiting if p.last_offset < snapshot.end_offset)
            self._release_durable()
        _resolve(dropped, Zk2KraftError(f"{self.partition_dir}: offset replaced by snapshot {snapshot}"))

    def _reset_tail(self, recovered: RecoveredSegments, end: int) -> None:
        """Caller holds `lock`, writer idle: append from `end` on the (new) active segment."""
        self.open_active_segment(recovered.active, end)
        self.end_offset = end
        self.flushed_offset = self.writing_offset = end - 1
        self.leading = False
        self.durable_offset = min(self.flushed_offset, self.committed_offset)

    def _reload(self, recovered: RecoveredSegments) -> None:
        """Caller holds `lock`: the image again from the newest snapshot and the segments after it."""
        loaded, end = load_log(self.partition_dir, recovered)
        self._replayer = loaded.replayer
        self.loaded_snapshot = loaded.snapshot
        self.data_records = loaded.data_records
        self.applied_end = end
        self._unapplied.clear()

    # ------------------------------------------------------------------------------ closing

    def _shutdown(self, *, write_indexes: bool) -> None:
        super()._shutdown(write_indexes=write_indexes)
        with self.lock:
            left = list(self._awaiting)
            self._awaiting.clear()
        self._resolver.shutdown(wait=True)
        _resolve(left, Zk2KraftError(f"the metadata log in {self.partition_dir} closed before committing"))


def _tell_owner(callback: Callable[[], None] | None, name: str) -> None:
    """Writer thread: run the owner's callback; its failure is not the log's."""
    if callback is not None:
        try:
            callback()
        except Exception:
            log.exception("the metadata log's %s callback failed", name)


# ---------------------------------------------------------------------------------------------- the log


@dataclass(slots=True)
class _Download:
    path: Path
    size: int = 0
    fd: int = -1


class ReplicaLog:
    """Kafka's KafkaMetadataLog: the `bridge.raft.log.ReplicatedLog` the Raft core drives, on disk."""

    def __init__(
        self,
        metadata_log: CommittedMetadataLog,
        *,
        metadata_version: MetadataVersion | None = None,
        zk_migration_enabled: bool = True,
        config: MetadataLogConfig | None = None,
    ) -> None:
        self.metadata_log = metadata_log
        self.partition_dir = metadata_log.partition_dir
        self._requested = metadata_version
        self._zk_migration_enabled = zk_migration_enabled
        self._downloads: dict[OffsetAndEpoch, _Download] = {}
        recovered = metadata_log.opened
        assert recovered is not None
        self._epochs = self._load_epochs(recovered)
        self._start = self._start_of(recovered)
        self._view = _WrittenView(
            metadata_log.partition_dir, metadata_log.cluster_id, metadata_log.node_id, metadata_log.lock
        )
        self._reader = MetadataLogReader(self._view)
        self.config = config or MetadataLogConfig()
        self._schedule = SnapshotSchedule(self.config, _now_ms())
        self._snapshot_due: str | None = None
        self._snapshotter = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix=f"metadata-log-snapshot-{metadata_log.node_id}"
        )
        self._writing: concurrent.futures.Future[WrittenSnapshot] | None = None
        self._snapshot_times: dict[SnapshotId, int] = {}
        self._next_clean_ms = _now_ms() + CLEANER_INTERVAL_MS
        self._clean_due = False
        """A snapshot was written since the cleaner last ran (it runs at the next commit)."""
        # KafkaMetadataLog.recoverSnapshots: a snapshot below the log start is never needed again.
        for sid, path in list_snapshots(self.partition_dir):
            if sid.end_offset < self._start:
                log.info(
                    "%s: deleting %s, below the log start %d", self.partition_dir, path.name, self._start
                )
                path.unlink(missing_ok=True)

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        *,
        node_id: int,
        cluster_id: str | None = None,
        metadata_version: MetadataVersion | str | None = None,
        fsync: bool = True,
        segment_bytes: int | None = None,
        zk_migration_enabled: bool = True,
        config: MetadataLogConfig | None = None,
    ) -> ReplicaLog:
        """Format or recover `directory` as `MetadataLog.open` does, without electing anyone; `config` says
        when to snapshot and what to keep (and the segment size, unless `segment_bytes` overrides it)."""
        config = config or MetadataLogConfig()
        opened = CommittedMetadataLog.open(
            directory,
            node_id=node_id,
            cluster_id=cluster_id,
            metadata_version=metadata_version,
            fsync=fsync,
            segment_bytes=config.segment_bytes if segment_bytes is None else segment_bytes,
            zk_migration_enabled=zk_migration_enabled,
            replica=True,
        )
        assert isinstance(opened, CommittedMetadataLog)
        requested = mvs.coerce(metadata_version) if metadata_version is not None else None
        try:
            return cls(
                opened, metadata_version=requested, zk_migration_enabled=zk_migration_enabled, config=config
            )
        except BaseException:
            opened.close()
            raise

    def close(self) -> None:
        """Finish a snapshot being written, snapshot the committed image if it is newer, close the log."""
        self._snapshotter.shutdown(wait=True)
        self._collect_written()
        self._snapshot_at_close()
        for snapshot_id in list(self._downloads):
            self.discard_partial_snapshot(snapshot_id)
        self.metadata_log.close()

    def __enter__(self) -> ReplicaLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------ the controller's side

    @property
    def on_flushed(self) -> Callable[[], None] | None:
        """Called on the writer thread after each fsync (`loop.call_soon_threadsafe(node.wake)`)."""
        return self.metadata_log.on_flushed

    @on_flushed.setter
    def on_flushed(self, callback: Callable[[], None] | None) -> None:
        self.metadata_log.on_flushed = callback

    def activation_records(self) -> list[RecordAndVersion]:
        """QuorumController's activation records for this log as it now is (the leader's, once committed past
        its LeaderChangeMessage): bootstrap records on an empty log, an abort of an open transaction."""
        return self.metadata_log.activation_records(
            self._requested or mvs.LATEST_PRODUCTION, self._zk_migration_enabled
        )

    # ------------------------------------------------------------------------------ offsets and epochs

    def end_offset(self) -> int:
        return self.metadata_log.end_offset

    def start_offset(self) -> int:
        return self._start

    def flushed_end_offset(self) -> int:
        return self.metadata_log.flushed_offset + 1

    def last_fetched_epoch(self) -> int:
        if self._epochs:
            return self._epochs[-1].epoch
        latest = self.latest_snapshot_id()
        return latest.epoch if latest is not None else 0

    def epoch_starts(self) -> Sequence[tuple[int, int]]:
        return [(entry.epoch, entry.start_offset) for entry in self._epochs]

    def _load_epochs(self, recovered: RecoveredSegments) -> list[EpochEntry]:
        """Kafka's LeaderEpochFileCache after recovery: entries below the log start survive, the rest follow
        the batches (only epochs above the cache's latest are appended)."""
        path = self.partition_dir / LEADER_EPOCH_CHECKPOINT
        old = read_leader_epoch_checkpoint(path) if path.exists() else []
        start = recovered.log_start_offset if recovered.log_start_offset is not None else self.end_offset()
        entries = [entry for entry in old if entry.start_offset < start]
        for entry in recovered.epoch_starts:
            if not entries or entry.epoch > entries[-1].epoch:
                entries.append(entry)
        if entries != old or not path.exists():
            write_leader_epoch_checkpoint(path, entries)
        return entries

    def _start_of(self, recovered: RecoveredSegments) -> int:
        if recovered.log_start_offset is not None:
            return recovered.log_start_offset
        snapshot = self.metadata_log.loaded_snapshot
        return snapshot.end_offset if snapshot is not None else self.end_offset()

    def _assign_epochs(self, starts: Sequence[EpochEntry]) -> None:
        """LeaderEpochFileCache.assign: epochs above the latest are appended, and the checkpoint written."""
        changed = False
        for entry in starts:
            if not self._epochs or entry.epoch > self._epochs[-1].epoch:
                self._epochs.append(entry)
                changed = True
        if changed:
            write_leader_epoch_checkpoint(self.partition_dir / LEADER_EPOCH_CHECKPOINT, self._epochs)

    # ------------------------------------------------------------------------------ appending

    def append_as_leader(self, records: Sequence[Any], epoch: int) -> int:
        ml = self.metadata_log
        if not ml.leading or epoch != ml.leader_epoch:
            raise Zk2KraftError(
                f"{self.partition_dir}: an append in epoch {epoch}, but this replica leads "
                f"{ml.leader_epoch if ml.leading else 'no epoch'}"
            )
        return ml.append(records).last_offset

    def append_leader_change(
        self, epoch: int, leader_id: int, voters: Sequence[int], granting: Sequence[int]
    ) -> int:
        ml = self.metadata_log
        if leader_id != ml.node_id:
            raise Zk2KraftError(f"node {ml.node_id} cannot start epoch {epoch} for leader {leader_id}")
        if self._epochs and epoch <= self._epochs[-1].epoch:
            raise Zk2KraftError(
                f"{self.partition_dir}: epoch {epoch} is not above the log's latest epoch {self._epochs[-1].epoch}"
            )
        offset = ml.lead(epoch, voters, granting)
        self._assign_epochs([EpochEntry(epoch, offset)])
        log.info("%s: node %d leads epoch %d from offset %d", self.partition_dir, ml.node_id, epoch, offset)
        return offset

    def append_as_follower(self, data: bytes) -> None:
        """Check and queue whole batches fetched from the leader (a trailing partial batch is ignored, as
        Kafka's ByteBufferLogInputStream does); nothing is written unless every batch is sound."""
        ml = self.metadata_log
        source = f"records fetched into {self.partition_dir}"
        expected = ml.end_offset
        last_epoch = self._epochs[-1].epoch if self._epochs else -1
        batches: list[tuple[int, int, _FetchedBatch, int]] = []
        starts: list[EpochEntry] = []
        scanner = iter_kraft_batches(data, source, tolerate_torn_tail=True)
        for position, header, raw in scanner:
            if header.base_offset != expected:
                raise CorruptDataError(
                    source, position, f"batch at offset {header.base_offset}, but the log ends at {expected}"
                )
            epoch = header.partition_leader_epoch
            if epoch < last_epoch:
                raise CorruptDataError(
                    source, position, f"batch in epoch {epoch} after a batch of epoch {last_epoch}"
                )
            if epoch > last_epoch:
                starts.append(EpochEntry(epoch, header.base_offset))
                last_epoch = epoch
            entries = list(decode_batch_entries(source, position, header, raw))
            batch = _FetchedBatch(header.base_offset, header.last_offset, entries)
            batches.append((position, header.size_in_bytes, batch, header.max_timestamp))
            expected = header.last_offset + 1
        if not batches:
            return
        ml.append_fetched(bytes(data), batches)
        self._assign_epochs(starts)

    def flush(self) -> None:
        """KafkaMetadataLog.flush: returns once everything appended so far is fsynced."""
        self.metadata_log.wait_flushed()

    def update_high_watermark(self, offset: int) -> None:
        """Commit below `offset`, then snapshot the image and clean the log when they are due."""
        self.metadata_log.commit(offset)
        self._after_commit(_now_ms())

    # ------------------------------------------------------------------------------ truncation

    def truncate_to(self, offset: int) -> None:
        """UnifiedLog.truncateTo plus the epoch cache's truncateFromEnd; refuses below the high watermark."""
        if offset >= self.end_offset():
            return
        if offset < self._start:
            raise Zk2KraftError(
                f"{self.partition_dir}: refusing to truncate to offset {offset}, before the log start {self._start}"
            )
        self.metadata_log.truncate(offset)
        end = self.end_offset()
        self._epochs = [entry for entry in self._epochs if entry.start_offset < end]
        write_leader_epoch_checkpoint(self.partition_dir / LEADER_EPOCH_CHECKPOINT, self._epochs)
        self._reader = MetadataLogReader(self._view)
        log.info("%s: truncated to offset %d", self.partition_dir, end)

    # ------------------------------------------------------------------------------ reading

    def read(self, offset: int, max_bytes: int = MAX_FETCH_SIZE_BYTES) -> bytes:
        ml = self.metadata_log
        with ml.lock:
            # Written, fsynced or not: followers fetch while the leader's fsync runs (as Kafka serves unflushed
            # batches); the leader counts its own end offset only once fsynced.
            self._view.durable_offset = ml.writing_offset
            self._view.end_offset = ml.end_offset
            self._view.leader_epoch = ml.leader_epoch
        self._reader.refresh()
        return self._reader.read(offset, max_bytes)

    # ------------------------------------------------------------------------------ snapshots

    def _snapshots(self) -> list[tuple[SnapshotId, Path]]:
        start = self._start
        return [(sid, path) for sid, path in list_snapshots(self.partition_dir) if sid.end_offset >= start]

    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        snapshots = self._snapshots()
        return OffsetAndEpoch(snapshots[-1][0].end_offset, snapshots[-1][0].epoch) if snapshots else None

    def earliest_snapshot_id(self) -> OffsetAndEpoch | None:
        snapshots = self._snapshots()
        return OffsetAndEpoch(snapshots[0][0].end_offset, snapshots[0][0].epoch) if snapshots else None

    def _snapshot_path(self, snapshot_id: OffsetAndEpoch) -> Path | None:
        wanted = SnapshotId(snapshot_id.offset, snapshot_id.epoch)
        return next((path for sid, path in self._snapshots() if sid == wanted), None)

    def snapshot_size(self, snapshot_id: OffsetAndEpoch) -> int | None:
        path = self._snapshot_path(snapshot_id)
        if path is None:
            return None
        try:
            return path.stat().st_size
        except FileNotFoundError:
            return None

    def read_snapshot(self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int) -> bytes:
        path = self._snapshot_path(snapshot_id)
        if path is None:
            raise Zk2KraftError(f"{self.partition_dir} has no snapshot {snapshot_id}")
        with open(path, "rb") as f:
            return os.pread(f.fileno(), max_bytes, position)

    def write_snapshot_chunk(self, snapshot_id: OffsetAndEpoch, position: int, data: bytes) -> None:
        """FileRawSnapshotWriter.append to `<id>-<random>.checkpoint.part`; a download restarts at 0."""
        download = self._downloads.get(snapshot_id)
        if position == 0 and download is not None:
            self.discard_partial_snapshot(snapshot_id)
            download = None
        if download is None:
            if position != 0:
                raise Zk2KraftError(
                    f"{self.partition_dir}: snapshot {snapshot_id} chunk at {position} without its beginning"
                )
            stem = snapshot_file_name(SnapshotId(snapshot_id.offset, snapshot_id.epoch))[
                : -len(".checkpoint")
            ]
            fd, name = tempfile.mkstemp(prefix=f"{stem}-", suffix=PARTIAL_SUFFIX, dir=self.partition_dir)
            download = self._downloads[snapshot_id] = _Download(Path(name), fd=fd)
        if position != download.size:
            raise Zk2KraftError(
                f"{download.path}: chunk at position {position}, but {download.size} bytes are written"
            )
        view = memoryview(data)
        while view:
            view = view[os.write(download.fd, view) :]
        download.size += len(data)

    def discard_partial_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        download = self._downloads.pop(snapshot_id, None)
        if download is None:
            return
        if download.fd >= 0:
            os.close(download.fd)
        download.path.unlink(missing_ok=True)

    def install_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        """Freeze the downloaded snapshot (fsync, rename) and truncate the whole log to it (Kafka's
        onSnapshotFrozen and truncateToLatestSnapshot): the log starts at its end offset, the image is its."""
        download = self._downloads.get(snapshot_id)
        if download is None:
            raise Zk2KraftError(f"{self.partition_dir}: no download of snapshot {snapshot_id} to install")
        sid = SnapshotId(snapshot_id.offset, snapshot_id.epoch)
        os.fsync(download.fd)
        try:
            read_snapshot_image(download.path)  # a snapshot that does not load is never installed
        except Zk2KraftError:
            self.discard_partial_snapshot(snapshot_id)
            raise
        del self._downloads[snapshot_id]
        os.close(download.fd)
        final = self.partition_dir / snapshot_file_name(sid)
        os.replace(download.path, final)
        fsync_directory(self.partition_dir)
        self.wait_for_snapshot()  # an older snapshot being written must not appear after the install
        self.metadata_log.install(sid)
        self._schedule.reset(_now_ms())  # SnapshotGenerator.publishSnapshot: the counters start again
        self._snapshot_due = None
        self._epochs = []
        write_leader_epoch_checkpoint(self.partition_dir / LEADER_EPOCH_CHECKPOINT, self._epochs)
        self._start = sid.end_offset
        self._reader = MetadataLogReader(self._view)
        log.info(
            "%s: installed snapshot %s; the log starts at offset %d",
            self.partition_dir,
            final.name,
            self._start,
        )

    # ------------------------------------------------------------------------------ snapshots of its own

    def _after_commit(self, now_ms: int) -> None:
        """SnapshotGenerator after each commit, and KafkaRaftClient's log cleaner (also after a new snapshot)."""
        self._collect_written()
        reason = self._schedule.committed(self.metadata_log.take_committed_bytes(), now_ms)
        self._snapshot_due = self._snapshot_due or reason
        if self._snapshot_due is not None and self._writing is None:
            self._start_snapshot(now_ms)
        if self._clean_due or now_ms >= self._next_clean_ms:
            self.maybe_clean(now_ms)

    def _start_snapshot(self, now_ms: int) -> None:
        """Take the committed image's records now; encode and write them on the snapshot thread."""
        source = self.metadata_log.committed_image()
        if source is None:
            return  # still due: the image is not at a committed offset yet (a leader's appends in flight)
        reason, self._snapshot_due = self._snapshot_due, None
        self._schedule.reset(now_ms)
        if not self._is_new(source.snapshot_id):
            return
        log.info(
            "%s: creating snapshot %s because %s",
            self.partition_dir, snapshot_file_name(source.snapshot_id), reason,
        )  # fmt: skip
        self._writing = self._snapshotter.submit(self._write_snapshot, source)

    def _is_new(self, snapshot: SnapshotId) -> bool:
        return is_new_snapshot(self.partition_dir, snapshot, self._start)

    def _write_snapshot(self, source: CommittedImage) -> WrittenSnapshot:
        written = write_image_snapshot(self.partition_dir, source)
        self._snapshot_times[source.snapshot_id] = source.timestamp_ms
        return written

    def wait_for_snapshot(self) -> bool:
        """Block until the snapshot being written, if any, is complete; whether one was."""
        if self._writing is not None:
            concurrent.futures.wait([self._writing])
        return self._collect_written()

    def _collect_written(self) -> bool:
        """Whether a snapshot the snapshot thread was writing is now complete (a failure is logged)."""
        job = self._writing
        if job is None or not job.done():
            return False
        self._writing = None
        error = job.exception()
        if error is not None:
            log.error("%s: writing a snapshot failed (the log is kept whole): %s", self.partition_dir, error)
            return False
        self._clean_due = True
        return True

    def _snapshot_at_close(self) -> None:
        """A clean stop leaves the committed image as a snapshot, so that whoever opens the directory next (a
        bridge or a Kafka controller) loads it instead of replaying the log."""
        try:
            self.metadata_log.snapshot_committed_image(self._start)
        except Exception as exc:  # the log itself is whole; the next start replays it
            log.error("%s: writing the snapshot at close failed: %s", self.partition_dir, exc)

    # ------------------------------------------------------------------------------ cleaning

    def maybe_clean(self, now_ms: int | None = None) -> bool:
        """KafkaMetadataLog.maybeClean: move the log start to a newer snapshot when retention says so, deleting
        the segments wholly below it and the older snapshots. Returns whether the log start moved."""
        now = _now_ms() if now_ms is None else now_ms
        self._next_clean_ms, self._clean_due = now + CLEANER_INTERVAL_MS, False
        kept = [
            KeptSnapshot(sid, path.stat().st_size, self._snapshot_times.get(sid) or snapshot_timestamp(path))
            for sid, path in self._snapshots()
        ]
        segments = [(s.base_offset, s.path.stat().st_size) for s in list_segments(self.partition_dir)]
        target = plan_clean(kept, segments, self._start, now, self.config)
        if target is None or target.end_offset > self.metadata_log.committed_offset + 1:
            return False
        self._delete_before(target)
        return True

    def _delete_before(self, target: SnapshotId) -> None:
        """KafkaMetadataLog.deleteBeforeSnapshot: the log starts at `target`'s end offset from now on."""
        start = target.end_offset
        first_kept, segments, older = delete_before(self.partition_dir, start)
        for sid in older:
            self._snapshot_times.pop(sid, None)
        self._start = start
        self._reader.forget_segments_below(first_kept)
        # LeaderEpochFileCache.truncateFromStart: the epoch holding the new start now starts there.
        below = [entry for entry in self._epochs if entry.start_offset <= start]
        if below:
            later = [entry for entry in self._epochs if entry.start_offset > start]
            self._epochs = [EpochEntry(below[-1].epoch, start), *later]
            write_leader_epoch_checkpoint(self.partition_dir / LEADER_EPOCH_CHECKPOINT, self._epochs)
        log.info(
            "%s: the log now starts at offset %d (snapshot %s); deleted %d segments and %d older snapshots",
            self.partition_dir, start, snapshot_file_name(target), segments, len(older),
        )  # fmt: skip
