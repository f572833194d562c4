"""The bridge controller's durable KRaft metadata log: format, recovery, leader election, group commit.

`MetadataLog.open` formats an empty `metadata.log.dir` as a fresh single-node Kafka 3.9 controller would,
or recovers an existing one (a torn or corrupt last batch is truncated as Kafka's log recovery does),
loads the newest snapshot, replays the segments after it, and then becomes leader in a new epoch: it
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
import mmap
import os
import struct
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from crc32c import crc32c

from bridge.api import RecordAndVersion
from migrate.atomic import atomic_write_bytes, fsync_directory
from migrate.errors import CorruptDataError, InvalidRequestError, UnsupportedVersionError, Zk2KraftError
from migrate.gcpause import gc_paused
from migrate.kraft import metadata_version as mvs
from migrate.kraft.activation import activation_records, bootstrap_records, encode_leader_change_batch
from migrate.kraft.batch import CRC_START, HEADER_SIZE, MAGIC, encode_kraft_batch
from migrate.kraft.framing import encode_metadata_record
from migrate.kraft.image import MetadataImage
from migrate.kraft.logdir import (
    BOOTSTRAP_CHECKPOINT,
    INDEX_SUFFIX,
    LEADER_EPOCH_CHECKPOINT,
    META_PROPERTIES,
    METADATA_TOPIC_ID,
    PARTITION_METADATA,
    QUORUM_STATE,
    TIME_INDEX_SUFFIX,
    EpochEntry,
    MetaProperties,
    QuorumState,
    SegmentFile,
    SegmentIndexBuilder,
    SnapshotId,
    list_segments,
    list_snapshots,
    read_leader_epoch_checkpoint,
    read_meta_properties,
    read_partition_metadata,
    read_quorum_state,
    segment_file_name,
    uuid_to_base64,
    write_leader_epoch_checkpoint,
    write_meta_properties,
    write_partition_metadata,
    write_quorum_state,
)
from migrate.kraft.metadata_version import MetadataVersion
from migrate.kraft.reader import (
    METADATA_PARTITION_DIR,
    iter_log_dir,
    load_image,
    read_bootstrap_records,
    read_snapshot_image,
)
from migrate.kraft.replay import MetadataReplayer
from migrate.kraft.snapshot import write_bootstrap_checkpoint

__all__ = [
    "DEFAULT_SEGMENT_BYTES",
    "MAX_BATCH_SIZE_BYTES",
    "AppendResult",
    "LogPreview",
    "MetadataLog",
    "encode_data_batch",
    "preview",
]

log = logging.getLogger(__name__)

DEFAULT_SEGMENT_BYTES = 1024 * 1024 * 1024
"""`metadata.log.segment.bytes` default (1 GiB)."""
MAX_BATCH_SIZE_BYTES = 8 * 1024 * 1024
"""KafkaRaftClient.MAX_BATCH_SIZE_BYTES: the largest batch the Raft leader writes."""
LOCK_FILE = ".lock"
"""Kafka locks every log directory with this file."""

_INT32_MAX = 2**31 - 1
_LOG_OVERHEAD = 12
_MIN_BATCH_LENGTH = HEADER_SIZE - _LOG_OVERHEAD
_PREFIX = struct.Struct(">qiibI")  # baseOffset, batchLength, partitionLeaderEpoch, magic, crc
_AFTER_CRC = struct.Struct(">hiqq")  # attributes, lastOffsetDelta, baseTimestamp, maxTimestamp
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


# ---------------------------------------------------------------------------------------------- recovery scan


@dataclass(slots=True)
class _BatchInfo:
    base_offset: int
    last_offset: int
    epoch: int
    max_timestamp: int
    size: int


@dataclass(slots=True)
class _SegmentScan:
    """Header walk of one segment: its valid batches and, if any, why the bytes after them are bad."""

    segment: SegmentFile
    file_size: int
    valid_bytes: int = 0
    batches: list[_BatchInfo] = field(default_factory=list)
    problem: str | None = None
    tail_like: bool = False
    """The bad bytes are a torn or corrupt final batch (or zero fill), which recovery may truncate."""

    @property
    def next_offset(self) -> int:
        return self.batches[-1].last_offset + 1 if self.batches else self.segment.base_offset


def _scan_segment(segment: SegmentFile, expected_offset: int) -> _SegmentScan:
    """Check every batch frame (length, magic, CRC-32C, offsets) of a segment without decoding records."""
    path = segment.path
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            data: mmap.mmap | bytes = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
    except OSError as exc:
        raise Zk2KraftError(f"cannot read {path}: {exc.strerror or exc}") from None
    scan = _SegmentScan(segment, size)
    try:
        view = memoryview(data)
        try:
            _walk_batches(scan, view, expected_offset)
        finally:
            view.release()
    finally:
        if isinstance(data, mmap.mmap):
            data.close()
    return scan


def _walk_batches(scan: _SegmentScan, view: memoryview, expected_offset: int) -> None:
    size = scan.file_size
    pos = 0
    while pos < size:
        remaining = size - pos
        if remaining < HEADER_SIZE:
            scan.problem = f"only {remaining} bytes left, less than a {HEADER_SIZE}-byte batch header"
            scan.tail_like = True
            break
        base, length, epoch, magic, crc = _PREFIX.unpack_from(view, pos)
        batch_size = length + _LOG_OVERHEAD
        if length < _MIN_BATCH_LENGTH:
            scan.problem = f"impossible batch length {length}"
        elif batch_size > remaining:
            scan.problem = f"batch of {batch_size} bytes but only {remaining} bytes left (torn write)"
        elif magic != MAGIC:
            scan.problem = f"record batch magic {magic}; only magic 2 is supported"
        elif crc32c(view[pos + CRC_START : pos + batch_size]) != crc:
            scan.problem = "CRC-32C does not match the batch bytes"
        if scan.problem is not None:
            # Only the last batch of the log may be damaged: one a crash interrupted (its declared end
            # reaches past the end of the file), or zero fill the file system left after the last write.
            # A torn batch is at most KRaft's largest batch; more bytes than that are not one batch.
            reaches_end = length >= _MIN_BATCH_LENGTH and batch_size >= remaining <= MAX_BATCH_SIZE_BYTES
            zero_fill = remaining <= 2 * MAX_BATCH_SIZE_BYTES and view[pos:size].tobytes() == bytes(remaining)
            scan.tail_like = (reaches_end or zero_fill) and not _valid_batch_after(
                view, pos, size, expected_offset
            )
            break
        _attributes, last_delta, _base_ts, max_ts = _AFTER_CRC.unpack_from(view, pos + CRC_START)
        if base < expected_offset or last_delta < 0:
            raise CorruptDataError(
                str(scan.segment.path),
                pos,
                f"batch offsets {base}..{base + last_delta} do not follow offset {expected_offset - 1}",
            )
        scan.batches.append(_BatchInfo(base, base + last_delta, epoch, max_ts, batch_size))
        expected_offset = base + last_delta + 1
        pos += batch_size
        scan.valid_bytes = pos


def _valid_batch_after(view: memoryview, pos: int, size: int, expected_offset: int) -> bool:
    """Whether an intact batch starts after `pos`: then the damage at `pos` (say a corrupt length
    field) is in the middle of the log, not a torn final write, whose bytes hold no complete batch."""
    data = view[pos + 1 : size].tobytes()
    start = pos + 1
    magic_at = data.find(b"\x02", 16)
    while magic_at >= 0:
        q = start + magic_at - 16
        if q + HEADER_SIZE <= size:
            base, length, _epoch, _magic, crc = _PREFIX.unpack_from(view, q)
            end = q + length + _LOG_OVERHEAD
            if (
                length >= _MIN_BATCH_LENGTH
                and end <= size
                and expected_offset <= base < expected_offset + 2**31
                and crc32c(view[q + CRC_START : end]) == crc
            ):
                return True
        magic_at = data.find(b"\x02", magic_at + 1)
    return False


@dataclass(slots=True)
class _Recovered:
    """The segments after recovery, with the active (last) one's batches for its index."""

    segments: list[SegmentFile]
    active: _SegmentScan | None
    log_start_offset: int | None
    log_end_offset: int | None
    last_batch_epoch: int
    epoch_starts: list[EpochEntry]
    truncations: list[str]


def _recover_segments(pdir: Path) -> _Recovered:
    """Kafka's log recovery, limited to the tail: truncate a damaged last batch, fail on earlier damage."""
    segments = list_segments(pdir)
    scans: list[_SegmentScan] = []
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
            if batch.epoch > last_epoch:
                epoch_starts.append(EpochEntry(batch.epoch, batch.base_offset))
                last_epoch = batch.epoch
    return _Recovered(
        segments=segments,
        active=scans[-1] if scans else None,
        log_start_offset=segments[0].base_offset if segments else None,
        log_end_offset=scans[-1].next_offset if scans else None,
        last_batch_epoch=last_epoch,
        epoch_starts=epoch_starts,
        truncations=truncations,
    )


def _index_paths(pdir: Path, base_offset: int) -> tuple[Path, Path]:
    return (
        pdir / segment_file_name(base_offset, INDEX_SUFFIX),
        pdir / segment_file_name(base_offset, TIME_INDEX_SUFFIX),
    )


def _delete_segment(segment: SegmentFile) -> None:
    for path in (segment.path, *_index_paths(segment.path.parent, segment.base_offset)):
        path.unlink(missing_ok=True)
    fsync_directory(segment.path.parent)


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


def _is_unformatted(directory: Path) -> bool:
    if (directory / META_PROPERTIES).exists():
        return False
    pdir = directory / METADATA_PARTITION_DIR
    if pdir.is_dir() and (list_segments(pdir) or list_snapshots(pdir)):
        raise Zk2KraftError(
            f"{directory} holds a metadata log in {METADATA_PARTITION_DIR} but no {META_PROPERTIES}; "
            f"refusing to guess its cluster and node id"
        )
    return True


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


def _check_meta(directory: Path, node_id: int, cluster_id: str | None) -> MetaProperties:
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


@dataclass(frozen=True)
class AppendResult:
    """Offsets given to one append; `durable` resolves after the fsync that covers them."""

    base_offset: int
    last_offset: int
    durable: concurrent.futures.Future[None]


@dataclass(slots=True)
class _Pending:
    data: bytes
    base_offset: int
    last_offset: int
    timestamp_ms: int
    future: concurrent.futures.Future[None]


@dataclass(slots=True)
class _Loaded:
    replayer: MetadataReplayer
    snapshot: SnapshotId | None
    data_records: int


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
        loaded: _Loaded,
        recovered: _Recovered,
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
        self._closed = False
        self._failure: BaseException | None = None
        # Writer-thread state: the active segment.
        active = recovered.active
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
        for stale in _index_paths(self.partition_dir, base):
            stale.unlink(missing_ok=True)
        self._builder = SegmentIndexBuilder(base)
        self._segment_size = 0
        if active is not None:
            for batch in active.batches:
                self._builder.add_batch(batch.base_offset, batch.last_offset, batch.max_timestamp, batch.size)
            self._segment_size = active.valid_bytes
        self._writer = threading.Thread(
            target=self._run_writer, name=f"metadata-log-writer-{node_id}", daemon=True
        )
        self._writer.start()

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
    ) -> MetadataLog:
        """Format or recover `directory` (the controller's metadata.log.dir), then lead it in a new epoch."""
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
    ) -> MetadataLog:
        requested = mvs.coerce(metadata_version) if metadata_version is not None else None
        if _is_unformatted(root):
            mv = requested or mvs.LATEST_PRODUCTION
            if zk_migration_enabled and not mv.is_metadata_transaction_supported():
                raise UnsupportedVersionError(
                    f"metadata.version {mv.name} does not support ZK migrations on a new log "
                    f"(Kafka 3.9 needs {mvs.IBP_3_6_IV1.name} or later)"
                )
            meta = _format(root, node_id, cluster_id, mv)
        else:
            meta = _check_meta(root, node_id, cluster_id)
        assert meta.cluster_id is not None
        pdir = root / METADATA_PARTITION_DIR
        pdir.mkdir(exist_ok=True)
        _remove_stale_temp_files(root, pdir)
        _check_partition_metadata(pdir)
        quorum = _read_quorum(pdir, node_id)
        recovered = _recover_segments(pdir)
        loaded, end_offset = _load(pdir, recovered)
        image = loaded.replayer.image
        if requested is not None and loaded.data_records and image.metadata_version != requested:
            log.warning(
                "%s: the log is at metadata.version %s; ignoring the requested %s (it only applies to a new log)",
                pdir,
                image.metadata_version.name,
                requested.name,
            )
        activation = _activation_records(
            root, loaded, requested or mvs.LATEST_PRODUCTION, zk_migration_enabled
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
            metadata_log._become_leader(quorum, recovered, loaded, activation, now_ms)
        except BaseException:
            metadata_log._shutdown(write_indexes=False)
            raise
        return metadata_log

    def _become_leader(
        self,
        quorum: QuorumState | None,
        recovered: _Recovered,
        loaded: _Loaded,
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
            pending = [self._enqueue(data, leader_change_offset, leader_change_offset, stamp)]
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
            self._check_usable()
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
            future = self._enqueue(_BASE_OFFSET.pack(base) + blob[8:], base, base + count - 1, stamp)
        return AppendResult(base, base + count - 1, future)

    async def append_and_wait(
        self, records: Sequence[RecordAndVersion], *, now_ms: int | None = None
    ) -> AppendResult:
        """Append, then wait for the covering fsync without blocking the event loop."""
        result = self.append(records, now_ms=now_ms)
        await asyncio.wrap_future(result.durable)
        return result

    def _enqueue(self, data: bytes, base: int, last: int, stamp: int) -> concurrent.futures.Future[None]:
        """Queue one encoded batch (caller holds `lock` and has checked usability)."""
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._queue.append(_Pending(data, base, last, stamp, future))
        self.end_offset = last + 1
        self.lock.notify_all()
        return future

    def _check_usable(self) -> None:
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
                error = Zk2KraftError(f"writing the metadata log in {self.partition_dir} failed: {exc}")
                log.error("%s", error)
                for item in items:
                    item.future.set_exception(error)
                continue  # appends are refused from now on; close() still stops the thread
            with self.lock:
                self.durable_offset = items[-1].last_offset
                self.batches_written += len(items)
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
        index_path, time_index_path = _index_paths(self.partition_dir, self._segment_base)
        atomic_write_bytes(index_path, index)
        atomic_write_bytes(time_index_path, time_index)
        os.close(self._segment_fd)
        self._segment_fd = -1

    # ------------------------------------------------------------------------------ closing

    def close(self) -> None:
        """Write and fsync everything pending, write the active segment's indexes, stop the writer."""
        self._shutdown(write_indexes=True)

    def _shutdown(self, *, write_indexes: bool) -> None:
        with self.lock:
            if self._closed:
                return
            self._closed = True
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


# ---------------------------------------------------------------------------------------------- preview


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


def preview(directory: str | os.PathLike[str], *, node_id: int, cluster_id: str | None) -> LogPreview:
    """Read `directory` as `MetadataLog.open` would, read-only (a torn tail is reported, not truncated).

    Raises what the open would raise for a directory of another node or cluster, before anything of it is
    created, formatted or recovered; refusals are judged on this.
    """
    root = Path(directory)
    if not root.exists() or _is_unformatted(root):
        return LogPreview(MetadataImage(), 0, 1, None)
    meta = _check_meta(root, node_id, cluster_id)
    pdir = root / METADATA_PARTITION_DIR
    if not pdir.is_dir():
        return LogPreview(MetadataImage(), 0, 1, meta.cluster_id)
    quorum = _read_quorum(pdir, node_id)
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


# ---------------------------------------------------------------------------------------------- loading


def _read_quorum(pdir: Path, node_id: int) -> QuorumState | None:
    path = pdir / QUORUM_STATE
    if not path.exists():
        return None
    state = read_quorum_state(path)
    if state.current_voters is not None and set(state.current_voters) != {node_id}:
        raise InvalidRequestError(
            f"{path} lists voters {list(state.current_voters)}; the bridge runs a single-voter quorum of "
            f"node {node_id}"
        )
    return state


def _load(pdir: Path, recovered: _Recovered) -> tuple[_Loaded, int]:
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
    return _Loaded(replayer, chosen[0] if chosen is not None else None, data_records), end


def _activation_records(
    root: Path, loaded: _Loaded, requested: MetadataVersion, zk_migration_enabled: bool
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
