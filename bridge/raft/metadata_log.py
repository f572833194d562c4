"""The bridge controller's durable KRaft metadata log: format, recovery, leader election, group commit.

`MetadataLog.open` formats an empty `metadata.log.dir` as a fresh single-node Kafka 3.9 controller would,
or recovers and loads an existing one (`bridge.raft.recovery`: a torn or corrupt last batch is
truncated as Kafka's log recovery does, then the newest snapshot and the segments after it are replayed),
and then becomes leader in a new epoch: it
persists the election, appends Kafka's LeaderChangeMessage control batch and the controller's activation
records (bootstrap records on an empty log, AbortTransactionRecord for a transaction left open).

`append` assigns offsets, encodes one record batch exactly as Kafka's controller does, replays the records
into `image` at once and queues the bytes for a writer thread. The writer takes everything queued since
its previous round, writes it with one write call and one fsync, then resolves the durability futures
(group commit). Segments roll at `segment_bytes` with `.index`/`.timeindex` as Kafka writes them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import fcntl
import logging
import os
import struct
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from bridge.api import RecordAndVersion
from bridge.raft.recovery import (
    LoadedLog,
    RecoveredSegments,
    SegmentScan,
    check_meta,
    index_paths,
    is_unformatted,
    load_log,
    read_quorum,
    recover_segments,
)
from migrate.atomic import atomic_write_bytes, fsync_directory
from migrate.errors import CorruptDataError, InvalidRequestError, UnsupportedVersionError, Zk2KraftError
from migrate.kraft import metadata_version as mvs
from migrate.kraft.activation import activation_records, bootstrap_records, encode_leader_change_batch
from migrate.kraft.batch import HEADER_SIZE, encode_kraft_batch
from migrate.kraft.framing import encode_metadata_record
from migrate.kraft.image import MetadataImage
from migrate.kraft.logdir import (
    BOOTSTRAP_CHECKPOINT,
    LEADER_EPOCH_CHECKPOINT,
    META_PROPERTIES,
    METADATA_TOPIC_ID,
    PARTITION_METADATA,
    QUORUM_STATE,
    EpochEntry,
    MetaProperties,
    QuorumState,
    SegmentIndexBuilder,
    SnapshotId,
    list_snapshots,
    read_leader_epoch_checkpoint,
    read_partition_metadata,
    segment_file_name,
    snapshot_file_name,
    uuid_to_base64,
    write_leader_epoch_checkpoint,
    write_meta_properties,
    write_partition_metadata,
    write_quorum_state,
)
from migrate.kraft.metadata_version import MetadataVersion
from migrate.kraft.reader import (
    METADATA_PARTITION_DIR,
    read_bootstrap_records,
)
from migrate.kraft.snapshot import (
    MAX_BATCH_SIZE_BYTES,
    WrittenSnapshot,
    write_bootstrap_checkpoint,
    write_snapshot,
)

__all__ = [
    "DEFAULT_SEGMENT_BYTES",
    "MAX_BATCH_SIZE_BYTES",
    "AppendResult",
    "MetadataLog",
    "encode_data_batch",
]

log = logging.getLogger(__name__)

DEFAULT_SEGMENT_BYTES = 1024 * 1024 * 1024
"""`metadata.log.segment.bytes` default (1 GiB)."""
LOCK_FILE = ".lock"
"""Kafka locks every log directory with this file."""

_INT32_MAX = 2**31 - 1
_BASE_OFFSET = struct.Struct(">q")


_datasync = getattr(os, "fdatasync", os.fsync)  # appends only need the data and the file size durable


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


# ---------------------------------------------------------------------------------------------- batches


def encode_data_batch(
    base_offset: int, leader_epoch: int, timestamp_ms: int, records: Sequence[RecordAndVersion]
) -> bytes:
    """One data batch as Kafka's controller appends it (KRaft BatchBuilder: no compression, one timestamp)."""
    values = [(None, encode_metadata_record(r, v)) for r, v in records]
    return encode_kraft_batch(base_offset, leader_epoch, timestamp_ms, values, False)


# ---------------------------------------------------------------------------------------------- directory


def _lock_directory(directory: Path) -> int:
    """Take Kafka's `.lock` on the log directory so two controllers never share one log."""
    path = directory / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise Zk2KraftError(
            f"{directory} is in use: another process (or another MetadataLog here) holds {path}"
        ) from None
    return fd


def _random_directory_id() -> uuid.UUID:
    """DirectoryId.random(): a random Uuid outside the reserved low range whose text does not start with '-'."""
    while True:
        value = uuid.uuid4()
        if value.int >= 100 and not uuid_to_base64(value).startswith("-"):
            return value


def _format(directory: Path, node_id: int, cluster_id: str | None, mv: MetadataVersion) -> MetaProperties:
    """What `kafka-storage format` leaves: bootstrap.checkpoint, then meta.properties (which commits it)."""
    if not cluster_id:
        raise InvalidRequestError(
            f"{directory} is not formatted (no {META_PROPERTIES}); a cluster id is needed to format it"
        )
    meta = MetaProperties(1, cluster_id, node_id, _random_directory_id())
    write_bootstrap_checkpoint(directory, bootstrap_records(mv))
    write_meta_properties(directory / META_PROPERTIES, meta)
    log.info(
        "formatted %s for cluster %s, node %d, metadata.version %s", directory, cluster_id, node_id, mv.name
    )
    return meta


def _remove_stale_temp_files(*directories: Path) -> None:
    """Temp files of atomic writes a crash interrupted (`.<name>.<random>.tmp`); the real files are intact."""
    for directory in directories:
        for entry in directory.iterdir():
            if entry.name.startswith(".") and entry.name.endswith(".tmp") and entry.is_file():
                log.info("removing %s, left by an interrupted write", entry)
                entry.unlink(missing_ok=True)


def _check_partition_metadata(pdir: Path) -> None:
    path = pdir / PARTITION_METADATA
    if not path.exists():
        write_partition_metadata(path)
        return
    topic_id = read_partition_metadata(path)
    if topic_id != METADATA_TOPIC_ID:
        raise CorruptDataError(
            str(path),
            None,
            f"topic id {uuid_to_base64(topic_id)} is not the metadata topic's AAAAAAAAAAAAAAAAAAAAAQ",
        )


def _activation_bootstrap(directory: Path, mv: MetadataVersion) -> list[RecordAndVersion]:
    """Bootstrap records: bootstrap.checkpoint when present, else the metadata.version alone."""
    path = directory / BOOTSTRAP_CHECKPOINT
    if path.exists():
        return read_bootstrap_records(path)
    return bootstrap_records(mv)


# ---------------------------------------------------------------------------------------------- the log


def is_new_snapshot(partition_dir: Path, snapshot: SnapshotId, log_start: int = 0) -> bool:
    """KafkaMetadataLog.createNewSnapshot: not below the log start, newer than every snapshot kept."""
    kept = [sid for sid, _path in list_snapshots(partition_dir) if sid.end_offset >= log_start]
    return snapshot.end_offset >= log_start and (not kept or snapshot.end_offset > kept[-1].end_offset)


def write_image_snapshot(partition_dir: Path, source: CommittedImage) -> WrittenSnapshot:
    """Write `source` as the snapshot Kafka's SnapshotGenerator would (records in image order, atomically)."""
    sid = source.snapshot_id
    written = write_snapshot(
        partition_dir, source.records, end_offset=sid.end_offset, epoch=sid.epoch,
        last_contained_timestamp_ms=source.timestamp_ms,
    )  # fmt: skip
    log.info(
        "%s: wrote snapshot %s (%d records, %d bytes)",
        partition_dir, written.path.name, written.record_count, written.size_bytes,
    )  # fmt: skip
    return written


@dataclass(frozen=True)
class AppendResult:
    """Offsets given to one append; `durable` resolves after the fsync that covers them."""

    base_offset: int
    last_offset: int
    durable: concurrent.futures.Future[None]


@dataclass(frozen=True, slots=True)
class CommittedImage:
    """What a snapshot of the committed image holds: its id, its records, its last record's time."""

    snapshot_id: SnapshotId
    records: list[tuple[Any, int]]
    timestamp_ms: int


@dataclass(slots=True)
class _Pending:
    data: bytes
    base_offset: int
    last_offset: int
    timestamp_ms: int
    future: concurrent.futures.Future[None]


class MetadataLog:
    """A single-voter KRaft metadata log this process leads; build it with `MetadataLog.open`.

    `image` is mutated by `append` under `lock`; readers on other threads should hold `lock` too.
    """

    def __init__(
        self,
        directory: Path,
        *,
        node_id: int,
        cluster_id: str,
        loaded: LoadedLog,
        recovered: RecoveredSegments,
        end_offset: int,
        fsync: bool,
        segment_bytes: int,
        lock_fd: int,
    ) -> None:
        self.directory = directory
        self.partition_dir = directory / METADATA_PARTITION_DIR
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.leader_epoch = -1
        self.end_offset = end_offset
        self.durable_offset = end_offset - 1
        self.writing_offset = end_offset - 1
        """The last offset the writer thread has taken to write (durable once its fsync returns)."""
        self.on_writing: Callable[[], None] | None = None
        """Called on the writer thread once a round is written and its fsync starts (it releases the GIL):
        work that waits for durability can be readied meanwhile, without delaying the fsync."""
        self.fsync_count = 0
        self.batches_written = 0
        self.loaded_snapshot = loaded.snapshot
        self.recovery_warnings = list(recovered.truncations)
        self.lock = threading.Condition(threading.Lock())
        self._replayer = loaded.replayer
        self._fsync = fsync
        self._segment_bytes = segment_bytes
        self._lock_fd = lock_fd
        self._queue: list[_Pending] = []
        self._closing = False
        self.closed = False
        self._failure: BaseException | None = None
        self._segment_fd = -1
        self.open_active_segment(recovered.active, end_offset)
        self._writer = threading.Thread(
            target=self._run_writer, name=f"metadata-log-writer-{node_id}", daemon=True
        )
        self._writer.start()

    def open_active_segment(self, active: SegmentScan | None, end_offset: int) -> None:
        """Writer-thread state: append to `active` (recovered), or to a new segment at `end_offset`."""
        if active is None:
            base = end_offset
            path = self.partition_dir / segment_file_name(base)
        else:
            base, path = active.segment.base_offset, active.segment.path
        self._segment_base = base
        self._segment_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        if active is None:
            fsync_directory(self.partition_dir)
        # The active segment's indexes are rebuilt from its batches, as Kafka's recovery does; stale ones
        # (e.g. written by `zk2kraft migrate` or a previous close) would miss what we append next.
        for stale in index_paths(self.partition_dir, base):
            stale.unlink(missing_ok=True)
        self._builder = SegmentIndexBuilder(base)
        self._segment_size = 0
        if active is not None:
            for batch in active.batches:
                self._builder.add_batch(batch.base_offset, batch.last_offset, batch.max_timestamp, batch.size)
            self._segment_size = active.valid_bytes

    # ------------------------------------------------------------------------------ opening

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        *,
        node_id: int,
        cluster_id: str | None = None,
        metadata_version: MetadataVersion | str | None = None,
        fsync: bool = True,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        zk_migration_enabled: bool = True,
        now_ms: int | None = None,
        replica: bool = False,
    ) -> MetadataLog:
        """Format or recover `directory` (the controller's metadata.log.dir), then lead it in a new epoch.

        With `replica` it does not elect itself: a Raft core (`bridge.raft.replica_log`) decides epochs."""
        if not 0 <= node_id <= _INT32_MAX:
            raise InvalidRequestError(f"node id {node_id} is not a non-negative int32")
        if segment_bytes < 2 * HEADER_SIZE:
            raise InvalidRequestError(f"segment_bytes {segment_bytes} is too small for a record batch")
        root = Path(directory)
        root.mkdir(parents=True, exist_ok=True)
        lock_fd = _lock_directory(root)
        try:
            return cls._open_locked(
                root,
                lock_fd,
                node_id,
                cluster_id,
                metadata_version,
                fsync,
                segment_bytes,
                zk_migration_enabled,
                now_ms,
                replica,
            )
        except BaseException:
            os.close(lock_fd)
            raise

    @classmethod
    def _open_locked(
        cls,
        root: Path,
        lock_fd: int,
        node_id: int,
        cluster_id: str | None,
        metadata_version: MetadataVersion | str | None,
        fsync: bool,
        segment_bytes: int,
        zk_migration_enabled: bool,
        now_ms: int | None,
        replica: bool = False,
    ) -> MetadataLog:
        requested = mvs.coerce(metadata_version) if metadata_version is not None else None
        if is_unformatted(root):
            mv = requested or mvs.LATEST_PRODUCTION
            if zk_migration_enabled and not mv.is_metadata_transaction_supported():
                raise UnsupportedVersionError(
                    f"metadata.version {mv.name} does not support ZK migrations on a new log "
                    f"(Kafka 3.9 needs {mvs.IBP_3_6_IV1.name} or later)"
                )
            meta = _format(root, node_id, cluster_id, mv)
        else:
            meta = check_meta(root, node_id, cluster_id)
        assert meta.cluster_id is not None
        pdir = root / METADATA_PARTITION_DIR
        pdir.mkdir(exist_ok=True)
        _remove_stale_temp_files(root, pdir)
        _check_partition_metadata(pdir)
        # A replica's quorum-state (several voters) is the Raft core's (bridge.raft.quorum.FileElectionStore).
        quorum = None if replica else read_quorum(pdir, node_id)
        recovered = recover_segments(pdir)
        loaded, end_offset = load_log(pdir, recovered)
        if loaded.snapshot is not None:
            log.info(
                "%s: loaded snapshot %s, then the log from offset %d to its end %d",
                pdir, snapshot_file_name(loaded.snapshot), loaded.snapshot.end_offset, end_offset,
            )  # fmt: skip
        image = loaded.replayer.image
        if requested is not None and loaded.data_records and image.metadata_version != requested:
            log.warning(
                "%s: the log is at metadata.version %s; ignoring the requested %s (it only applies to a new log)",
                pdir,
                image.metadata_version.name,
                requested.name,
            )
        activation = (
            []
            if replica
            else _activation_records(root, loaded, requested or mvs.LATEST_PRODUCTION, zk_migration_enabled)
        )
        metadata_log = cls(
            root,
            node_id=node_id,
            cluster_id=meta.cluster_id,
            loaded=loaded,
            recovered=recovered,
            end_offset=end_offset,
            fsync=fsync,
            segment_bytes=segment_bytes,
            lock_fd=lock_fd,
        )
        try:
            if replica:
                metadata_log._replica_opened(loaded, recovered)
            else:
                metadata_log._become_leader(quorum, recovered, loaded, activation, now_ms)
        except BaseException:
            metadata_log._shutdown(write_indexes=False)
            raise
        return metadata_log

    def _replica_opened(self, loaded: LoadedLog, recovered: RecoveredSegments) -> None:
        """Replica mode, once open: no election here (the Raft core elects; subclasses keep what they need)."""

    def _become_leader(
        self,
        quorum: QuorumState | None,
        recovered: RecoveredSegments,
        loaded: LoadedLog,
        activation: list[RecordAndVersion],
        now_ms: int | None,
    ) -> None:
        """KafkaRaftClient's election of the only voter, then QuorumController's activation records."""
        pdir = self.partition_dir
        checkpoint_path = pdir / LEADER_EPOCH_CHECKPOINT
        old_entries = read_leader_epoch_checkpoint(checkpoint_path) if checkpoint_path.exists() else []
        known = [recovered.last_batch_epoch, *(e.epoch for e in old_entries)]
        if quorum is not None:
            known.append(quorum.leader_epoch)
        if loaded.snapshot is not None:
            known.append(loaded.snapshot.epoch)
        epoch = max(max(known), 0) + 1
        if epoch > _INT32_MAX:
            raise Zk2KraftError(f"{pdir}: leader epoch {epoch} does not fit in an int32")
        # The election is durable before anything is appended in the new epoch (FileQuorumStateStore).
        data_version = quorum.data_version if quorum is not None else 0
        write_quorum_state(
            pdir / QUORUM_STATE,
            QuorumState(
                leader_id=self.node_id,
                leader_epoch=epoch,
                voted_id=-1,
                data_version=data_version,
                current_voters=(self.node_id,) if data_version == 0 else None,
            ),
        )
        self.leader_epoch = epoch
        stamp = _now_ms() if now_ms is None else now_ms
        leader_change_offset = self.end_offset
        with self.lock:
            self._replayer.advance(leader_change_offset, epoch=epoch, timestamp_ms=stamp)
            data = encode_leader_change_batch(leader_change_offset, epoch, stamp, self.node_id)
            pending = [self.enqueue(data, leader_change_offset, leader_change_offset, stamp)]
        if activation:
            pending.append(self.append(activation, now_ms=stamp).durable)
        for future in pending:
            future.result()
        # Kafka's LeaderEpochFileCache: entries below the log start survive, the rest follow the batches.
        start = recovered.log_start_offset if recovered.log_start_offset is not None else leader_change_offset
        entries = [e for e in old_entries if e.start_offset < start]
        for entry in recovered.epoch_starts:
            if not entries or entry.epoch > entries[-1].epoch:
                entries.append(entry)
        entries.append(EpochEntry(epoch, leader_change_offset))
        write_leader_epoch_checkpoint(checkpoint_path, entries)
        log.info(
            "%s: node %d leads epoch %d from offset %d (%d activation records)",
            pdir,
            self.node_id,
            epoch,
            leader_change_offset,
            len(activation),
        )

    # ------------------------------------------------------------------------------ state

    @property
    def image(self) -> MetadataImage:
        """Replayed state, including records appended but not yet durable (open transactions excluded)."""
        return self._replayer.image

    @property
    def metadata_version(self) -> MetadataVersion:
        return self._replayer.image.metadata_version

    @property
    def transaction_start_offset(self) -> int | None:
        """Offset of the BeginTransactionRecord of the metadata transaction still open, else None."""
        return self._replayer.pending_transaction_offset

    def committed_image(self) -> CommittedImage | None:
        """The image's records if it holds exactly the log up to a committed offset outside any metadata
        transaction; a single voter commits what is fsynced (its high watermark is its flushed end)."""
        with self.lock:
            return self.image_up_to_locked(self.end_offset, self.durable_offset)

    def image_up_to_locked(self, applied_end: int, committed_offset: int) -> CommittedImage | None:
        """Caller holds `lock`: the image as a snapshot's content if it ends at `applied_end`, committed."""
        if self._failure is not None or self.closed:
            return None
        provenance = self._replayer.image.provenance
        end = provenance.last_contained_offset + 1
        if (
            end <= 0
            or end != applied_end
            or end - 1 > committed_offset
            or self._replayer.pending_transaction_offset is not None
        ):
            return None
        # Replay replaces the objects it changes, so these records stay as they are while the log goes on.
        snapshot = SnapshotId(end, max(provenance.last_contained_epoch, 0))
        return CommittedImage(snapshot, self._replayer.image.records(), max(provenance.last_contained_log_time_ms, 0))

    # ------------------------------------------------------------------------------ appending

    def append(self, records: Sequence[RecordAndVersion], *, now_ms: int | None = None) -> AppendResult:
        """Append `records` as one batch; the image reflects them on return, durability comes later."""
        if not records:
            raise InvalidRequestError(
                "an append needs at least one record (KRaft never writes an empty batch)"
            )
        stamp = _now_ms() if now_ms is None else now_ms
        # Base offset and leader epoch sit outside the CRC, so the batch is built before taking the lock
        # and only its first 8 bytes are filled in under it.
        blob = encode_data_batch(0, self.leader_epoch, stamp, records)
        if len(blob) > MAX_BATCH_SIZE_BYTES:
            raise InvalidRequestError(
                f"{len(records)} records need a {len(blob)}-byte batch, more than KRaft's maximum of "
                f"{MAX_BATCH_SIZE_BYTES} bytes; split the write"
            )
        count = len(records)
        with self.lock:
            self.check_usable()
            base = self.end_offset
            replay = self._replayer.replay
            epoch = self.leader_epoch
            try:
                for i, (record, version) in enumerate(records):
                    replay(record, version, base + i, epoch=epoch, timestamp_ms=stamp)
            except BaseException as exc:
                # Part of the batch may be in the image but none of it will be on disk: the image no
                # longer matches the log, so stop here (Kafka's controller renounces leadership).
                self._failure = exc
                raise
            future = self.enqueue(_BASE_OFFSET.pack(base) + blob[8:], base, base + count - 1, stamp)
        return AppendResult(base, base + count - 1, future)

    def wait_durable(self, offset: int) -> None:
        """Any thread but the writer's: block until `offset` is fsynced; raises if the log failed or closed first."""
        with self.lock:
            self.lock.wait_for(lambda: self.durable_offset >= offset or self._failure is not None or self.closed)
            if self.durable_offset < offset:
                self.check_usable()
                raise Zk2KraftError(f"the metadata log in {self.partition_dir} closed before offset {offset} was durable")

    async def append_and_wait(
        self, records: Sequence[RecordAndVersion], *, now_ms: int | None = None
    ) -> AppendResult:
        """Append, then wait for the covering fsync without blocking the event loop."""
        result = self.append(records, now_ms=now_ms)
        await asyncio.wrap_future(result.durable)
        return result

    def enqueue(self, data: bytes, base: int, last: int, stamp: int) -> concurrent.futures.Future[None]:
        """Queue one encoded batch (caller holds `lock` and has checked usability)."""
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._queue.append(_Pending(data, base, last, stamp, future))
        self.end_offset = last + 1
        self.lock.notify_all()
        return future

    def check_usable(self) -> None:
        if self._failure is not None:
            raise Zk2KraftError(
                f"the metadata log in {self.partition_dir} failed and takes no more appends "
                f"(close and reopen it): {self._failure}"
            )
        if self._closing:
            raise Zk2KraftError(f"the metadata log in {self.partition_dir} is closed")

    # ------------------------------------------------------------------------------ writer thread

    def _run_writer(self) -> None:
        while True:
            # Let appenders woken by the previous round's futures run first, so this round takes them
            # all (a GIL handoff costs microseconds; an extra fsync costs a millisecond).
            time.sleep(0)
            with self.lock:
                while not self._queue and not self._closing:
                    self.lock.wait()
                if not self._queue:
                    return
                items, self._queue = self._queue, []
            try:
                self._write(items)
            except BaseException as exc:
                with self.lock:
                    if self._failure is None:
                        self._failure = exc
                    items.extend(self._queue)
                    self._queue = []
                    self.lock.notify_all()
                error = Zk2KraftError(f"writing the metadata log in {self.partition_dir} failed: {exc}")
                log.error("%s", error)
                for item in items:
                    item.future.set_exception(error)
                continue  # appends are refused from now on; close() still stops the thread
            self._on_synced(items)

    def _on_written(self) -> None:
        """Writer thread, once a round is in the segment file and before its fsync (a replica's hook)."""

    def _on_synced(self, items: list[_Pending]) -> None:
        """Writer thread, after the fsync covering `items`: they are durable."""
        with self.lock:
            self.durable_offset = items[-1].last_offset
            self.batches_written += len(items)
            self.lock.notify_all()
        for item in items:
            item.future.set_result(None)

    def _write(self, items: list[_Pending]) -> None:
        """Group commit: one write per segment touched, then one fsync."""
        chunk: list[bytes] = []
        for item in items:
            size = len(item.data)
            if self._segment_size > 0 and (
                self._segment_size + size > self._segment_bytes
                or item.last_offset - self._segment_base > _INT32_MAX
            ):
                self._write_out(chunk)
                chunk = []
                self._roll(item.base_offset)
            self._builder.add_batch(item.base_offset, item.last_offset, item.timestamp_ms, size)
            self._segment_size += size
            chunk.append(item.data)
        self._write_out(chunk)
        self.writing_offset = items[-1].last_offset
        if self.on_writing is not None:
            try:
                self.on_writing()
            except Exception:  # the hook's failure is not the log's
                log.exception("the metadata log's on_writing hook failed")
        self._on_written()
        self._sync()

    def _write_out(self, chunk: list[bytes]) -> None:
        if not chunk:
            return
        view = memoryview(b"".join(chunk))
        while view:
            written = os.write(self._segment_fd, view)
            view = view[written:]

    def _sync(self) -> None:
        if self._fsync:
            _datasync(self._segment_fd)
            with self.lock:
                self.fsync_count += 1

    def _roll(self, new_base: int) -> None:
        """Close the active segment (fsync, final indexes) and start `<new_base>.log`, as Kafka's roll does."""
        self._sync()
        self._close_segment()
        path = self.partition_dir / segment_file_name(new_base)
        self._segment_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        fsync_directory(self.partition_dir)
        self._segment_base = new_base
        self._builder = SegmentIndexBuilder(new_base)
        self._segment_size = 0
        log.info("%s: rolled to a new segment at offset %d", self.partition_dir, new_base)

    def _close_segment(self) -> None:
        index, time_index = self._builder.close()
        index_path, time_index_path = index_paths(self.partition_dir, self._segment_base)
        atomic_write_bytes(index_path, index)
        atomic_write_bytes(time_index_path, time_index)
        os.close(self._segment_fd)
        self._segment_fd = -1

    # ------------------------------------------------------------------------------ closing

    def close(self) -> None:
        """Write and fsync everything pending, write the active segment's indexes, stop the writer."""
        self._shutdown(write_indexes=True)

    def close_with_snapshot(self) -> WrittenSnapshot | None:
        """A single voter's clean stop: everything pending fsynced, the image left as a snapshot if newer than
        every kept one (so whoever opens the directory next, a Kafka controller included, loads it instead of
        replaying the log), then `close`. The quorum's voters do the same in ReplicaLog.close."""
        written = None
        try:
            if not self.closed and self._failure is None:
                self.wait_durable(self.end_offset - 1)
            written = self.snapshot_committed_image()
        except Exception as exc:  # the log itself is whole; the next start replays it
            log.error("%s: writing the snapshot at close failed: %s", self.partition_dir, exc)
        finally:
            self.close()
        return written

    def snapshot_committed_image(self, log_start: int = 0) -> WrittenSnapshot | None:
        """At a clean stop: the committed image as a snapshot if newer than every one kept at or above
        `log_start`; None, said in the log, when the image is not at a committed offset."""
        source = self.committed_image()
        if source is None:
            log.info(
                "%s: no snapshot at close: the image is not at a committed offset outside a metadata "
                "transaction, or the log failed",
                self.partition_dir,
            )
            return None
        if not is_new_snapshot(self.partition_dir, source.snapshot_id, log_start):
            return None
        return write_image_snapshot(self.partition_dir, source)

    def _shutdown(self, *, write_indexes: bool) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
            self._closing = True
            self.lock.notify_all()
        self._writer.join()
        try:
            if self._segment_fd >= 0:
                if write_indexes and self._failure is None:
                    self._sync()
                    self._close_segment()
                else:
                    os.close(self._segment_fd)
                    self._segment_fd = -1
        finally:
            os.close(self._lock_fd)

    def __enter__(self) -> MetadataLog:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _activation_records(
    root: Path, loaded: LoadedLog, requested: MetadataVersion, zk_migration_enabled: bool
) -> list[RecordAndVersion]:
    """The activation records for this log: bootstrap records on an empty log, an abort for an open transaction."""
    replayer = loaded.replayer
    txn_offset = replayer.pending_transaction_offset
    # Empty: no data at all, or only an unfinished bootstrap transaction.
    empty = not loaded.data_records or (txn_offset is not None and replayer.image.is_empty())
    records = activation_records(
        _activation_bootstrap(root, requested) if empty else [],
        log_empty=empty,
        transaction_start_offset=txn_offset,
        zk_migration_enabled=zk_migration_enabled,
        source=str(root),
    )
    if txn_offset is not None:
        what = "partial bootstrap records" if empty else "in-progress metadata"
        log.warning("%s: aborting %s transaction at offset %d", root, what, txn_offset)
    return records
