"""The controller's side of KRaft replication: serve `__cluster_metadata` to observers with Fetch and FetchSnapshot.

KRaft brokers (and the redirect shim) follow the metadata log by fetching it from the active controller, as
Kafka 3.9's KafkaRaftClient serves it: one partition named by METADATA_TOPIC_ID (Fetch v13+; older versions
carry no topic id and are refused with INVALID_REQUEST as Kafka's `RaftUtil.hasValidTopicPartition` does),
whole record batches read from the segment files from the batch holding the fetch offset (at most one segment
and 8 MiB per response, at least one batch), the high watermark, and the leader's epoch. A fetch offset/epoch
that does not match the log answers with a diverging epoch, and one below the log start (or 0 while a
snapshot exists) with the snapshot id to download with FetchSnapshot.

It also answers DescribeQuorum (v0-2) as the only voter does (RaftUtil.singletonDescribeQuorumResponse): the
leader, its epoch, the high watermark, itself as the voter, and as observers every replica id that fetched the
log (LeaderState's observer states: fetch offset, last fetch and last caught-up times, forgotten after five
minutes without a fetch, reset with a new leadership).

Unlike Kafka's leader this serves only durable (fsynced) batches: for a single-voter quorum that is exactly the
committed log, so an observer never sees a batch the controller could still lose. Fetches are answered at once
(the pure-handler contract cannot park a request until `MaxWaitMs`); followers poll. The controller serves Fetch
and FetchSnapshot whenever it leads its log, before the migration too (brokers catch up while it waits for
them); as in Kafka, followers get an open metadata transaction (the migration's) and apply it only at its
EndTransactionRecord, dropping it at an AbortTransactionRecord.
"""

from __future__ import annotations

import bisect
import logging
import mmap
import os
import struct
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Final, Protocol

from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType
from kio.static.primitive import i32, i64, u16

from bridge.api import ControllerHandler, ControllerResult, HandlerContext
from bridge.handlers._common import build, nested
from migrate.errors import CorruptDataError
from migrate.kraft.batch import HEADER_SIZE, MAGIC
from migrate.kraft.logdir import METADATA_TOPIC_ID, SnapshotId, list_segments, list_snapshots
from migrate.plan.inputs import DEFAULT_CONTROLLER_LISTENER

log = logging.getLogger(__name__)

FETCH_KEY: Final = 1
FETCH_SNAPSHOT_KEY: Final = 59
DESCRIBE_QUORUM_KEY: Final = 55
METADATA_TOPIC: Final = "__cluster_metadata"
METADATA_PARTITION: Final = 0
# KafkaRaftClient.MAX_FETCH_SIZE_BYTES: what one read of the metadata log returns at most (beyond one batch).
MAX_FETCH_SIZE_BYTES: Final = 8 * 1024 * 1024
# Kafka 3.9 answers Fetch 0-17 and FetchSnapshot 0-1; kio has Fetch from v4. Below v13 a request has no
# topic id, which Kafka's controller refuses (INVALID_REQUEST) for the metadata partition.
FIRST_TOPIC_ID_VERSION: Final = 13
REPLICATION_KEYS: Final = frozenset({FETCH_KEY, FETCH_SNAPSHOT_KEY, DESCRIBE_QUORUM_KEY})
"""The Raft requests (what followers replicate the log with, and DescribeQuorum): served whenever this
controller leads its log, as KafkaRaftClient answers them whatever the migration's state (before the migration
too; followers apply a metadata transaction only at its EndTransactionRecord)."""
SUPPORTED: Final[dict[int, tuple[int, int]]] = {
    FETCH_KEY: (4, 17),
    FETCH_SNAPSHOT_KEY: (0, 1),
    DESCRIBE_QUORUM_KEY: (0, 2),
}
OBSERVER_SESSION_TIMEOUT_MS: Final = 300_000
"""LeaderState.OBSERVER_SESSION_TIMEOUT_MS: an observer that has not fetched for this long is forgotten."""
ZERO_UUID: Final = uuid.UUID(int=0)

_NO_EPOCH: Final = -1
_NO_OFFSET: Final = -1
# baseOffset int64, batchLength int32, partitionLeaderEpoch int32, magic int8, crc uint32, attributes int16,
# lastOffsetDelta int32: the batch-header prefix an index needs.
_PREFIX = struct.Struct(">qiibIhi")
_LOG_OVERHEAD = 12


class MetadataLogSource(Protocol):
    """What serving needs from bridge.raft.metadata_log.MetadataLog (which has all of it)."""

    partition_dir: Path
    cluster_id: str
    node_id: int
    leader_epoch: int
    durable_offset: int
    end_offset: int
    lock: threading.Condition


# ---------------------------------------------------------------------------------------------- reading


@dataclass(slots=True)
class _Segment:
    """One segment file and the batches of it known to be durable, in file order."""

    base_offset: int
    path: Path
    scanned: int = 0  # bytes of whole durable batches indexed
    last_offsets: list[int] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class OffsetAndEpoch:
    offset: int
    epoch: int


class MetadataLogReader:
    """Durable batches of one metadata log directory by offset, plus its leader-epoch history.

    Batch headers are indexed incrementally as the durable offset moves; only the first 27 bytes of each batch
    are read for that. `refresh` must run before the other methods see new batches.
    """

    def __init__(self, source: MetadataLogSource) -> None:
        self.source = source
        self.pdir = Path(source.partition_dir)
        self._segments: list[_Segment] = []
        # (epoch, start offset), epochs rising, as Kafka's LeaderEpochFileCache holds them.
        self._epochs: list[tuple[int, int]] = []
        self.end_offset = 0  # one past the last indexed (durable) offset
        self._lock = threading.Lock()

    @property
    def start_offset(self) -> int:
        """The log start offset: the first segment's base offset (nothing is ever deleted before it)."""
        if self._segments:
            return self._segments[0].base_offset
        return self.end_offset

    @property
    def high_watermark(self) -> int:
        return self.end_offset

    def refresh(self) -> None:
        """Index every batch up to the log's durable offset."""
        with self.source.lock:
            durable = self.source.durable_offset
        with self._lock:
            if durable < self.end_offset:
                return
            known = {segment.base_offset for segment in self._segments}
            for found in list_segments(self.pdir):
                if found.base_offset not in known and (
                    not self._segments or found.base_offset > self._segments[-1].base_offset
                ):
                    self._segments.append(_Segment(found.base_offset, Path(found.path)))
            for segment in self._segments:
                if segment.last_offsets and segment.last_offsets[-1] >= durable:
                    continue
                self._scan(segment, durable)

    def forget_segments_below(self, base_offset: int) -> None:
        """Segments before `base_offset` were deleted (the log start moved past them): stop serving them."""
        with self._lock:
            self._segments = [segment for segment in self._segments if segment.base_offset >= base_offset]

    def _scan(self, segment: _Segment, durable: int) -> None:
        source = str(segment.path)
        try:
            with open(segment.path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size <= segment.scanned:
                    return
                with mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as data:
                    pos = segment.scanned
                    while pos + HEADER_SIZE <= size:
                        base, length, epoch, magic, _crc, _attrs, last_delta = _PREFIX.unpack_from(data, pos)
                        total = length + _LOG_OVERHEAD
                        if magic != MAGIC or length < HEADER_SIZE - _LOG_OVERHEAD:
                            raise CorruptDataError(source, pos, f"not a v2 record batch (magic {magic})")
                        last = base + last_delta
                        if last > durable or pos + total > size:
                            break
                        if base < self.end_offset:
                            raise CorruptDataError(
                                source,
                                pos,
                                f"batch at offset {base} goes back before offset {self.end_offset}",
                            )
                        segment.last_offsets.append(last)
                        segment.positions.append(pos)
                        segment.sizes.append(total)
                        if not self._epochs or epoch > self._epochs[-1][0]:
                            self._epochs.append((epoch, base))
                        self.end_offset = last + 1
                        pos += total
                    segment.scanned = pos
        except OSError as exc:
            raise CorruptDataError(source, segment.scanned, f"cannot read: {exc.strerror or exc}") from None

    def read(self, offset: int, max_bytes: int = MAX_FETCH_SIZE_BYTES) -> bytes:
        """Whole batches from the one holding `offset`, within one segment, up to `max_bytes` (at least one)."""
        with self._lock:
            bases = [segment.base_offset for segment in self._segments]
            index = bisect.bisect_right(bases, offset) - 1
            if index < 0 or offset >= self.end_offset:
                return b""
            segment = self._segments[index]
            first = bisect.bisect_left(segment.last_offsets, offset)
            if first >= len(segment.last_offsets):
                return b""
            start = segment.positions[first]
            end = first + 1
            total = segment.sizes[first]
            while end < len(segment.sizes) and total + segment.sizes[end] <= max_bytes:
                total += segment.sizes[end]
                end += 1
            path = segment.path
        with open(path, "rb") as f:
            data = os.pread(f.fileno(), total, start)
        if len(data) != total:
            raise CorruptDataError(str(path), start, f"expected {total} bytes of batches, read {len(data)}")
        return data

    # ------------------------------------------------------------------ Kafka's offset/epoch validation

    def snapshots(self) -> list[tuple[SnapshotId, Path]]:
        """Complete snapshots Kafka would keep (end offset at or after the log start), oldest first."""
        start = self.start_offset
        return [(sid, path) for sid, path in list_snapshots(self.pdir) if sid.end_offset >= start]

    def last_fetched_epoch(self) -> int:
        """ReplicatedLog.lastFetchedEpoch: the latest batch epoch, else an empty log's snapshot epoch, else 0."""
        if self._epochs:
            return self._epochs[-1][0]
        snapshots = self.snapshots()
        return snapshots[-1][0].epoch if snapshots else 0

    def _epoch_end_offset(self, epoch: int) -> OffsetAndEpoch | None:
        """LeaderEpochFileCache.endOffsetFor with the log end offset; None for Kafka's undefined answer."""
        if epoch == _NO_EPOCH or not self._epochs:
            return None
        if self._epochs[-1][0] == epoch:
            return OffsetAndEpoch(self.end_offset, epoch)
        epochs = [e for e, _ in self._epochs]
        higher = bisect.bisect_right(epochs, epoch)
        if higher >= len(epochs):
            return None
        floor = higher - 1
        higher_start = self._epochs[higher][1]
        if floor < 0:
            return OffsetAndEpoch(higher_start, epoch)
        return OffsetAndEpoch(higher_start, self._epochs[floor][0])

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """KafkaMetadataLog.endOffsetForEpoch."""
        found = self._epoch_end_offset(epoch)
        snapshots = self.snapshots()
        if found is not None and snapshots:
            earliest = snapshots[0][0]
            if found.offset == earliest.end_offset and found.epoch == epoch:
                return OffsetAndEpoch(earliest.end_offset, earliest.epoch)
        if found is not None:
            return found
        return OffsetAndEpoch(self.end_offset, self.last_fetched_epoch())

    def validate(self, offset: int, epoch: int) -> tuple[str, OffsetAndEpoch | None]:
        """ReplicatedLog.validateOffsetAndEpoch: ("valid", None), ("diverging", end) or ("snapshot", id)."""
        start = self.start_offset
        if start == 0 and offset == 0:
            return "valid", None
        snapshots = self.snapshots()
        if snapshots:
            earliest = snapshots[0][0]
            if offset < start or (offset == start and epoch != earliest.epoch) or epoch < earliest.epoch:
                latest = snapshots[-1][0]
                return "snapshot", OffsetAndEpoch(latest.end_offset, latest.epoch)
        end = self.end_offset_for_epoch(epoch)
        if end.epoch != epoch or end.offset < offset:
            return "diverging", end
        return "valid", None


# ---------------------------------------------------------------------------------------------- observers


@dataclass(slots=True)
class ObserverState:
    """LeaderState.ReplicaState of an observer (a broker following the log): what its fetches told us."""

    replica_id: int
    directory_id: uuid.UUID
    end_offset: int = _NO_OFFSET
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    last_fetch_leader_end: int = -1

    def update(self, now_ms: int, fetch_offset: int, leader_end_offset: int) -> None:
        """ReplicaState.updateFollowerState: caught up at this fetch if it reached the leader's end offset,
        or at the previous fetch if it reached the end offset the leader had then."""
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif self.last_fetch_leader_end > 0 and fetch_offset >= self.last_fetch_leader_end:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.last_fetch_leader_end = leader_end_offset
        self.last_fetch_ms = max(self.last_fetch_ms, now_ms)
        self.end_offset = fetch_offset


# ---------------------------------------------------------------------------------------------- handlers


class MetadataFetchServer:
    """Fetch, FetchSnapshot and DescribeQuorum handlers over whatever log `log_provider` returns (None: no log
    open). `voter_endpoint` gives the (host, port) DescribeQuorum v2 names for the voter (None: none known), on
    the listener `voter_listener` (the first of controller.listener.names)."""

    def __init__(
        self,
        log_provider: Callable[[], MetadataLogSource | None],
        voter_endpoint: Callable[[], tuple[str, int] | None] = lambda: None,
        voter_listener: str = DEFAULT_CONTROLLER_LISTENER,
    ) -> None:
        self.log_provider = log_provider
        self.voter_endpoint = voter_endpoint
        self.voter_listener = voter_listener
        self._reader: MetadataLogReader | None = None
        self._observers: dict[tuple[int, uuid.UUID], ObserverState] = {}
        self._observers_lock = threading.Lock()

    @property
    def handlers(self) -> dict[int, ControllerHandler]:
        return {
            FETCH_KEY: self.fetch,
            FETCH_SNAPSHOT_KEY: self.fetch_snapshot,
            DESCRIBE_QUORUM_KEY: self.describe_quorum,
        }

    def _current(self) -> MetadataLogReader | None:
        source = self.log_provider()
        if source is None:
            return None
        reader = self._reader
        # A controller reopens its log on takeover: a new object, perhaps more batches by another writer.
        if reader is None or reader.source is not source:
            reader = self._reader = MetadataLogReader(source)
            with self._observers_lock:
                self._observers.clear()  # a new leadership: Kafka's LeaderState starts without observers
        reader.refresh()
        return reader

    def _observed(
        self, request: Any, version: int, wanted: Any, reader: MetadataLogReader, now_ms: int
    ) -> None:
        """LeaderState.updateReplicaState for a fetch read from the log: fetches with a replica id are observers'."""
        state = getattr(request, "replica_state", None)
        replica_id = int(state.replica_id) if version >= 15 and state is not None else int(request.replica_id)
        source = reader.source
        if replica_id < 0 or replica_id == source.node_id:
            return  # a consumer-like fetch (no replica), or ourselves
        directory = getattr(wanted, "replica_directory_id", None) or ZERO_UUID
        with self._observers_lock:
            observer = self._observers.setdefault(
                (replica_id, directory), ObserverState(replica_id, directory)
            )
            observer.update(now_ms, int(wanted.fetch_offset), max(source.end_offset, reader.end_offset))

    # ------------------------------------------------------------------ Fetch

    def fetch(self, ctx: HandlerContext, request: Any) -> ControllerResult:
        """KafkaRaftClient.handleFetchRequest (answered at once, whatever MaxWaitMs says)."""
        version = ctx.api_version
        reader = self._current()
        if reader is None:
            return ControllerResult([], _fetch_top_level(version, ErrorCode.not_controller))
        source = reader.source
        if request.cluster_id is not None and request.cluster_id != source.cluster_id:
            return ControllerResult([], _fetch_top_level(version, ErrorCode.inconsistent_cluster_id))
        topics = request.topics
        if (
            version < FIRST_TOPIC_ID_VERSION
            or len(topics) != 1
            or topics[0].topic_id != METADATA_TOPIC_ID
            or len(topics[0].partitions) != 1
            or topics[0].partitions[0].partition != METADATA_PARTITION
        ):
            return ControllerResult([], _fetch_top_level(version, ErrorCode.invalid_request))
        wanted = topics[0].partitions[0]
        max_wait_ms = request.max_wait.total_seconds() * 1000
        if (
            max_wait_ms < 0
            or wanted.fetch_offset < 0
            or wanted.last_fetched_epoch < 0
            or wanted.last_fetched_epoch > wanted.current_leader_epoch
        ):
            return ControllerResult([], _fetch_partition(version, reader, ErrorCode.invalid_request))
        leader_error = _leader_only_error(source, int(wanted.current_leader_epoch))
        if leader_error is not None:
            return ControllerResult([], _fetch_partition(version, reader, leader_error))
        offset, epoch = int(wanted.fetch_offset), int(wanted.last_fetched_epoch)
        snapshots = reader.snapshots()
        where: OffsetAndEpoch | None
        if offset == 0 and snapshots:
            # Kafka 3.9: an empty follower is sent the newest snapshot rather than the whole log.
            kind, where = "snapshot", OffsetAndEpoch(snapshots[-1][0].end_offset, snapshots[-1][0].epoch)
        else:
            kind, where = reader.validate(offset, epoch)
        records = b""
        if kind == "valid":
            if offset < reader.start_offset:
                # Kafka's read throws OffsetOutOfRangeException here; its fetch path answers that generically.
                return ControllerResult([], _fetch_partition(version, reader, ErrorCode.unknown_server_error))
            records = reader.read(offset)
            self._observed(request, version, wanted, reader, ctx.now_ms)
        response = _fetch_partition(
            version, reader, ErrorCode.none, records=records, high_watermark=reader.high_watermark,
            diverging=where if kind == "diverging" else None, snapshot=where if kind == "snapshot" else None,
        )  # fmt: skip
        return ControllerResult([], response)

    # ------------------------------------------------------------------ DescribeQuorum

    def describe_quorum(self, ctx: HandlerContext, request: Any) -> ControllerResult:
        """KafkaRaftClient.handleDescribeQuorumRequest for the only voter, which leads (RaftUtil's answer)."""
        version = ctx.api_version
        module = load_payload_module(DESCRIBE_QUORUM_KEY, version, EntityType.response)
        topics = request.topics
        if not (
            len(topics) == 1
            and topics[0].topic_name == METADATA_TOPIC
            and len(topics[0].partitions) == 1
            and topics[0].partitions[0].partition_index == METADATA_PARTITION
        ):
            return ControllerResult(
                [], _quorum_partition_errors(module, request, ErrorCode.unknown_topic_or_partition)
            )
        reader = self._current()
        if reader is None:
            return ControllerResult(
                [], _quorum_partition_errors(module, request, ErrorCode.not_leader_or_follower)
            )
        source = reader.source
        now = ctx.now_ms
        with self._observers_lock:
            for key in [
                k for k, o in self._observers.items() if now - o.last_fetch_ms >= OBSERVER_SESSION_TIMEOUT_MS
            ]:
                del self._observers[key]
            observers = sorted(self._observers.values(), key=lambda o: (o.replica_id, o.directory_id.int))
            replicas = [
                (o.replica_id, o.directory_id, o.end_offset, o.last_fetch_ms, o.last_caught_up_ms)
                for o in observers
            ]
        state_cls = module.ReplicaState
        leader_end = max(source.end_offset, reader.end_offset)

        def replica(replica_id: int, directory: uuid.UUID, end: int, fetched: int, caught_up: int) -> Any:
            return build(
                state_cls, replica_id=i32(replica_id), replica_directory_id=directory, log_end_offset=i64(end),
                last_fetch_timestamp=i64(fetched), last_caught_up_timestamp=i64(caught_up),
            )  # fmt: skip

        partition = build(
            module.PartitionData,
            partition_index=i32(METADATA_PARTITION),
            error_code=ErrorCode.none,
            error_message=None,
            leader_id=i32(source.node_id),
            leader_epoch=i32(source.leader_epoch),
            high_watermark=i64(reader.high_watermark),
            # The leader reports itself as fetched and caught up now; a static voter has no directory id.
            current_voters=(replica(source.node_id, ZERO_UUID, leader_end, now, now),),
            observers=tuple(replica(*r) for r in replicas),
        )
        endpoint = self.voter_endpoint()
        listeners = (
            ()
            if endpoint is None or not hasattr(module, "Listener")
            else (module.Listener(name=self.voter_listener, host=endpoint[0], port=u16(endpoint[1])),)
        )
        response = build(
            module.DescribeQuorumResponse,
            error_code=ErrorCode.none,
            error_message=None,
            topics=(module.TopicData(topic_name=METADATA_TOPIC, partitions=(partition,)),),
            nodes=(module.Node(node_id=i32(source.node_id), listeners=listeners),)
            if hasattr(module, "Node")
            else (),
        )
        return ControllerResult([], response)

    # ------------------------------------------------------------------ FetchSnapshot

    def fetch_snapshot(self, ctx: HandlerContext, request: Any) -> ControllerResult:
        """KafkaRaftClient.handleFetchSnapshotRequest."""
        version = ctx.api_version
        module = load_payload_module(FETCH_SNAPSHOT_KEY, version, EntityType.response)
        reader = self._current()
        if reader is None:
            return ControllerResult([], _snapshot_top_level(module, ErrorCode.not_controller))
        source = reader.source
        if request.cluster_id is not None and request.cluster_id != source.cluster_id:
            return ControllerResult([], _snapshot_top_level(module, ErrorCode.inconsistent_cluster_id))
        topics = request.topics
        # Kafka's check reads `size() != 1 && ...` (so only a request with no usable first item fails here).
        if not topics or not topics[0].partitions:
            return ControllerResult([], _snapshot_top_level(module, ErrorCode.invalid_request))
        wanted = next(
            (
                p
                for t in topics
                if t.name == METADATA_TOPIC
                for p in t.partitions
                if p.partition == METADATA_PARTITION
            ),
            None,
        )
        if wanted is None:
            first = topics[0]
            return ControllerResult(
                [],
                _snapshot_partition(
                    module,
                    first.name,
                    int(first.partitions[0].partition),
                    ErrorCode.unknown_topic_or_partition,
                ),
            )
        leader = (source.node_id, source.leader_epoch)
        leader_error = _leader_only_error(source, int(wanted.current_leader_epoch))
        if leader_error is not None:
            return ControllerResult([], _snapshot_partition(module, METADATA_TOPIC, 0, leader_error, leader))
        wanted_id = SnapshotId(int(wanted.snapshot_id.end_offset), int(wanted.snapshot_id.epoch))
        path = next((p for sid, p in reader.snapshots() if sid == wanted_id), None)
        try:
            size = path.stat().st_size if path is not None else -1
        except OSError:
            size = -1
        if path is None or size < 0:
            return ControllerResult(
                [], _snapshot_partition(module, METADATA_TOPIC, 0, ErrorCode.snapshot_not_found, leader)
            )
        position = int(wanted.position)
        if position < 0 or position >= size:
            return ControllerResult(
                [], _snapshot_partition(module, METADATA_TOPIC, 0, ErrorCode.position_out_of_range, leader)
            )
        length = min(int(request.max_bytes), size - position)
        with open(path, "rb") as f:
            chunk = os.pread(f.fileno(), length, position)
        response = _snapshot_partition(
            module, METADATA_TOPIC, 0, ErrorCode.none, leader,
            snapshot=wanted_id, size=size, position=position, records=chunk,
        )  # fmt: skip
        return ControllerResult([], response)


def _leader_only_error(source: MetadataLogSource, request_epoch: int) -> ErrorCode | None:
    """KafkaRaftClient.validateLeaderOnlyRequest for the only voter, which leads."""
    if request_epoch < source.leader_epoch:
        return ErrorCode.fenced_leader_epoch
    if request_epoch > source.leader_epoch:
        return ErrorCode.unknown_leader_epoch
    return None


def _fetch_top_level(version: int, error: ErrorCode) -> Any:
    """`new FetchResponseData().setErrorCode(error)`: no topics."""
    module = load_payload_module(FETCH_KEY, version, EntityType.response)
    return build(
        module.FetchResponse, throttle_time=timedelta(0), error_code=error, session_id=i32(0), responses=()
    )


def _fetch_partition(
    version: int,
    reader: MetadataLogReader,
    error: ErrorCode,
    *,
    records: bytes = b"",
    high_watermark: int = _NO_OFFSET,
    diverging: OffsetAndEpoch | None = None,
    snapshot: OffsetAndEpoch | None = None,
) -> Any:
    """RaftUtil.singletonFetchResponse as KafkaRaftClient.buildFetchResponse fills it."""
    module = load_payload_module(FETCH_KEY, version, EntityType.response)
    source = reader.source
    partition_cls = module.PartitionData
    values: dict[str, Any] = {
        "partition_index": i32(METADATA_PARTITION),
        "error_code": error,
        "high_watermark": i64(high_watermark),
        "log_start_offset": i64(reader.start_offset),
        "aborted_transactions": None,
        "records": records,
        "current_leader": nested(partition_cls, "LeaderIdAndEpoch")(
            leader_id=i32(source.node_id), leader_epoch=i32(source.leader_epoch)
        ),
    }
    if diverging is not None:
        values["diverging_epoch"] = nested(partition_cls, "EpochEndOffset")(
            epoch=i32(diverging.epoch), end_offset=i64(diverging.offset)
        )
    if snapshot is not None:
        values["snapshot_id"] = nested(partition_cls, "SnapshotId")(
            end_offset=i64(snapshot.offset), epoch=i32(snapshot.epoch)
        )
    partition = build(partition_cls, **values)
    topic = build(
        module.FetchableTopicResponse,
        topic_id=METADATA_TOPIC_ID,
        topic=METADATA_TOPIC,
        partitions=(partition,),
    )
    return build(
        module.FetchResponse,
        throttle_time=timedelta(0),
        error_code=ErrorCode.none,
        session_id=i32(0),
        responses=(topic,),
    )


_ERROR_MESSAGES: Final = {
    ErrorCode.unknown_topic_or_partition: "This server does not host this topic-partition.",
    ErrorCode.not_leader_or_follower: "For requests intended only for the leader, this error indicates that the "
    "broker is not the current leader. For requests intended for any replica, this error indicates that the "
    "broker is not a replica of the topic partition.",
}
"""Errors.message() of the errors DescribeQuorum answers with (v2 carries them)."""


def _quorum_partition_errors(module: Any, request: Any, error: ErrorCode) -> Any:
    """DescribeQuorumRequest.getPartitionLevelErrorResponse: `error` on every requested partition."""
    message = _ERROR_MESSAGES.get(error)
    return build(
        module.DescribeQuorumResponse,
        error_code=ErrorCode.none,
        error_message=None,
        topics=tuple(
            module.TopicData(
                topic_name=topic.topic_name,
                partitions=tuple(
                    build(
                        module.PartitionData,
                        partition_index=p.partition_index,
                        error_code=error,
                        error_message=message,
                        leader_id=i32(0),
                        leader_epoch=i32(0),
                        high_watermark=i64(0),
                        current_voters=(),
                        observers=(),
                    )
                    for p in topic.partitions
                ),
            )
            for topic in request.topics
        ),
        nodes=(),
    )


def _snapshot_top_level(module: Any, error: ErrorCode) -> Any:
    return module.FetchSnapshotResponse(throttle_time=timedelta(0), error_code=error, topics=())


def _snapshot_partition(
    module: Any,
    topic: str,
    partition: int,
    error: ErrorCode,
    leader: tuple[int, int] | None = None,
    *,
    snapshot: SnapshotId | None = None,
    size: int = -1,
    position: int = -1,
    records: bytes = b"",
) -> Any:
    """FetchSnapshotResponse.singleton with `addQuorumLeader` when `leader` is given (Kafka's defaults else)."""
    leader_id, leader_epoch = leader if leader is not None else (-1, -1)
    sid = snapshot if snapshot is not None else SnapshotId(-1, -1)
    item = module.PartitionSnapshot(
        index=i32(partition),
        error_code=error,
        snapshot_id=module.SnapshotId(end_offset=i64(sid.end_offset), epoch=i32(sid.epoch)),
        current_leader=module.LeaderIdAndEpoch(leader_id=i32(leader_id), leader_epoch=i32(leader_epoch)),
        size=i64(size),
        position=i64(position),
        unaligned_records=records,
    )
    return module.FetchSnapshotResponse(
        throttle_time=timedelta(0),
        error_code=ErrorCode.none,
        topics=(module.TopicSnapshot(name=topic, partitions=(item,)),),
    )


# ---------------------------------------------------------------------------------------------- wiring


def fetch_handlers(
    log_provider: Callable[[], MetadataLogSource | None],
    voter_endpoint: Callable[[], tuple[str, int] | None] = lambda: None,
    voter_listener: str = DEFAULT_CONTROLLER_LISTENER,
) -> dict[int, ControllerHandler]:
    """HANDLERS for Fetch/FetchSnapshot/DescribeQuorum over the log `log_provider` returns (a controller's
    `lambda: self.log`)."""
    return MetadataFetchServer(log_provider, voter_endpoint, voter_listener).handlers


def register(
    handlers: dict[int, Any],
    supported: dict[int, tuple[int, int]],
    log_provider: Callable[[], MetadataLogSource | None],
    voter_endpoint: Callable[[], tuple[str, int] | None] = lambda: None,
    voter_listener: str = DEFAULT_CONTROLLER_LISTENER,
) -> None:
    """Add Fetch, FetchSnapshot and DescribeQuorum to a controller's handler and version tables."""
    handlers.update(fetch_handlers(log_provider, voter_endpoint, voter_listener))
    supported.update(SUPPORTED)
