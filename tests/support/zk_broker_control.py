"""What a simulated ZooKeeper-mode broker does with LeaderAndIsr, UpdateMetadata and StopReplica (controller-broker.md §1.8).

Kafka's counterparts: KafkaApis' three control handlers with ZkBrokerEpochManager's stale-epoch check,
ReplicaManager.becomeLeaderOrFollower / stopReplicas / maybeUpdateMetadataCache, LogManager's stray
detection and ZkMetadataCache.updateMetadata. The broker is always in migration mode. Its "local log" is
which partitions it hosts and what it believes about them; `ZkControlState.snapshot()` is what tests read.

Deliberate omissions: no ACLs, so the CLUSTER_ACTION check always passes; no log dirs go offline, so
KAFKA_STORAGE_ERROR never happens; only the versions a 3.4+ controller sends (LeaderAndIsr v7, UpdateMetadata
v8, StopReplica v4) are served.
"""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32

from bridge.kafka.legacy_messages import (
    LeaderAndIsrRequestV7,
    LeaderAndIsrResponseV7,
    LeaderAndIsrResponseV7LeaderAndIsrPartitionError,
    LeaderAndIsrResponseV7LeaderAndIsrTopicError,
    StopReplicaRequestV4,
    StopReplicaResponseV4,
    StopReplicaResponseV4StopReplicaPartitionError,
    UpdateMetadataRequestV8,
    UpdateMetadataResponseV8,
)

LEADER_AND_ISR = 4
STOP_REPLICA = 5
UPDATE_METADATA = 6
SUPPORTED = {LEADER_AND_ISR: (7, 7), STOP_REPLICA: (4, 4), UPDATE_METADATA: (8, 8)}
"""What a controller at metadata.version 3.4-IV0 or later sends (controller-broker.md §1.6)."""
_NAMES = {LEADER_AND_ISR: "LeaderAndIsr", STOP_REPLICA: "StopReplica", UPDATE_METADATA: "UpdateMetadata"}

FULL = 2
"""AbstractControlRequest.Type.FULL (LeaderAndIsr `Type`, UpdateMetadata tagged `Type`)."""
UNKNOWN_BROKER_EPOCH = -1
LEADER_DURING_DELETE = -2
"""LeaderAndIsr.LeaderDuringDelete: an UpdateMetadata entry with this leader removes the partition."""
EPOCH_DURING_DELETE = -2
NO_EPOCH = -1
INITIAL_CONTROLLER_EPOCH = 0

LEADER = "leader"
FOLLOWER = "follower"
LOADED = "loaded"
"""A log found on disk that no LeaderAndIsr has reached yet (Kafka: no Partition object)."""

TopicPartition = tuple[str, int]


@dataclass
class HostedLog:
    """One partition's local log and what the broker's Partition object holds for it."""

    topic: str
    partition: int
    topic_id: uuid.UUID | None
    role: str = LOADED
    """LEADER, FOLLOWER, or LOADED (on disk, no LeaderAndIsr yet)."""
    stopped: bool = False
    """A StopReplica without delete stopped it (fetchers gone); the log and its state stay."""
    leader: int = -1
    leader_epoch: int = -1
    partition_epoch: int = -1
    isr: tuple[int, ...] = ()
    replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@dataclass(frozen=True)
class LogDir:
    """A log directory: one it hosts, a stray (renamed `<topic>-<partition>.<unique id>-stray`) or a deleted one."""

    topic: str
    partition: int
    topic_id: uuid.UUID | None
    dir_name: str = ""


@dataclass(frozen=True)
class CachedPartition:
    """One UpdateMetadataPartitionState as the metadata cache keeps it."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    zk_version: int
    controller_epoch: int


@dataclass(frozen=True)
class CachedBroker:
    """A live broker from UpdateMetadata: endpoints as (listener, host, port, security protocol id)."""

    broker_id: int
    endpoints: tuple[tuple[str, str, int, int], ...]
    rack: str | None


@dataclass
class MetadataCache:
    """ZkMetadataCache's snapshot: partition states by topic, topic ids, live brokers, cached controller."""

    partition_states: dict[str, dict[int, CachedPartition]] = field(default_factory=dict)
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    live_brokers: dict[int, CachedBroker] = field(default_factory=dict)
    controller_id: int | None = None
    controller_is_kraft: bool = False


@dataclass(frozen=True)
class ReceivedRequest:
    """One control request as received, and what was answered."""

    api_key: int
    api_version: int
    request: Any
    """The decoded kio entity, as the controller sent it."""
    response: Any | None
    """None: not answered (unresponsive mode)."""
    error_code: int | None
    """The answer's top-level error code (None: not answered)."""
    partition_errors: dict[TopicPartition, int]
    """Per-partition error codes of the answer, by topic name and partition."""
    injected: bool = False
    """Answered by an injected fault, not applied."""


@dataclass
class ZkControlSnapshot:
    """A copy of the broker's local log state, for tests to read."""

    logs: dict[TopicPartition, HostedLog]
    strays: list[LogDir]
    deleted: list[LogDir]
    cache: MetadataCache
    controller_epoch: int
    requests: list[ReceivedRequest]
    counts: dict[int, int]
    """Requests received per api key (answered or not)."""

    def leaders(self) -> dict[TopicPartition, int]:
        """Partitions it leads (not stopped), with their leader epoch."""
        return {k: v.leader_epoch for k, v in self.logs.items() if v.role == LEADER and not v.stopped}

    def followers(self) -> dict[TopicPartition, int]:
        """Partitions it follows (not stopped), with their leader epoch."""
        return {k: v.leader_epoch for k, v in self.logs.items() if v.role == FOLLOWER and not v.stopped}

    def received(self, api_key: int) -> list[ReceivedRequest]:
        return [r for r in self.requests if r.api_key == api_key]


@dataclass
class _Fault:
    error: ErrorCode
    remaining: int


class ZkControlState:
    """A ZooKeeper-mode broker's replica manager and metadata cache; thread-safe (handled on the broker's loop,
    read from tests).

    `broker_epochs` returns (KRaft registration epoch, ZooKeeper broker epoch): the epochs a request's
    `BrokerEpoch` is checked against for a KRaft and a ZooKeeper controller (ZkBrokerEpochManager).
    """

    def __init__(self, broker_id: int, broker_epochs: Callable[[], tuple[int, int]]) -> None:
        self.broker_id = broker_id
        self.broker_epochs = broker_epochs
        self._lock = threading.Lock()
        self._logs: dict[TopicPartition, HostedLog] = {}
        self._strays: list[LogDir] = []
        self._deleted: list[LogDir] = []
        self._cache = MetadataCache()
        self._controller_epoch = INITIAL_CONTROLLER_EPOCH
        self._requests: list[ReceivedRequest] = []
        self._counts: Counter[int] = Counter()
        self._faults: dict[int, _Fault] = {}
        self.unresponsive = False
        """While set, requests are read and logged but neither applied nor answered (a stuck broker)."""

    # ------------------------------------------------------------------ for tests

    def snapshot(self) -> ZkControlSnapshot:
        """A consistent copy of everything (between two requests); later requests do not change it."""
        with self._lock:
            cache = self._cache
            return ZkControlSnapshot(
                logs={key: dataclasses.replace(log) for key, log in self._logs.items()},
                strays=list(self._strays),
                deleted=list(self._deleted),
                cache=MetadataCache(
                    {name: dict(states) for name, states in cache.partition_states.items()},
                    dict(cache.topic_ids),
                    dict(cache.live_brokers),
                    cache.controller_id,
                    cache.controller_is_kraft,
                ),
                controller_epoch=self._controller_epoch,
                requests=list(self._requests),
                counts=dict(self._counts),
            )

    def fail_next(self, api_key: int, error: ErrorCode, count: int = 1) -> None:
        """Answer the next `count` requests of `api_key` with `error` (top-level, and on every partition of a
        LeaderAndIsr, as Kafka's getErrorResponse shapes it) without applying them; replaces an earlier count."""
        with self._lock:
            self._faults[api_key] = _Fault(error, count)

    def summary(self) -> str:
        """One line: what it leads and follows, strays and deleted logs, requests received (cheap, no copy)."""
        with self._lock:
            active = [log.role for log in self._logs.values() if not log.stopped]
            received = ", ".join(f"{_NAMES[key]} {self._counts[key]}" for key in sorted(SUPPORTED))
            return (
                f"leads {active.count(LEADER)}, follows {active.count(FOLLOWER)}, strays {len(self._strays)}, "
                f"deleted {len(self._deleted)}; received {received}"
            )

    def load(self, logs: Iterable[LogDir]) -> None:
        """The logs found on disk at start (LogManager.loadLogs): hosted, no LeaderAndIsr yet."""
        with self._lock:
            self._logs = {(d.topic, d.partition): HostedLog(d.topic, d.partition, d.topic_id) for d in logs}

    def hosted(self) -> list[LogDir]:
        """The logs on its disk (topic, partition, topic id), e.g. to restart the broker with them."""
        with self._lock:
            return [LogDir(log.topic, log.partition, log.topic_id) for log in self._logs.values()]

    # ------------------------------------------------------------------ the handler

    def handle(self, api_key: int, api_version: int, request: Any) -> Any | None:
        """The answer to one control request (None: no answer), after applying it as §1.8 says."""
        with self._lock:
            self._counts[api_key] += 1
            if self.unresponsive:
                self._requests.append(ReceivedRequest(api_key, api_version, request, None, None, {}))
                return None
            fault = self._faults.get(api_key)
            if fault is not None and fault.remaining > 0:
                fault.remaining -= 1
                response = _error_response(request, fault.error)
                injected = True
            else:
                response = self._apply(request)
                injected = False
            self._requests.append(
                ReceivedRequest(
                    api_key, api_version, request, response, int(response.error_code),
                    _partition_errors(request, response), injected,
                )
            )  # fmt: skip
            return response

    def _apply(self, request: Any) -> Any:
        if self._is_broker_epoch_stale(int(request.broker_epoch), request.is_kraft_controller):
            return _error_response(request, ErrorCode.stale_broker_epoch)
        if isinstance(request, LeaderAndIsrRequestV7):
            return self._leader_and_isr(request)
        if isinstance(request, StopReplicaRequestV4):
            return self._stop_replica(request)
        return self._update_metadata(request)

    def _is_broker_epoch_stale(self, epoch: int, from_kraft: bool) -> bool:
        """ZkBrokerEpochManager.isBrokerEpochStale: -1 is never stale; older than the current epoch is."""
        if epoch == UNKNOWN_BROKER_EPOCH:
            return False
        kraft_epoch, zk_epoch = self.broker_epochs()
        return epoch < (kraft_epoch if from_kraft else zk_epoch)

    # ------------------------------------------------------------------ LeaderAndIsr

    def _leader_and_isr(self, request: LeaderAndIsrRequestV7) -> Any:
        """ReplicaManager.becomeLeaderOrFollower."""
        if request.controller_epoch < self._controller_epoch:
            return _error_response(request, ErrorCode.stale_controller_epoch)
        if request.is_kraft_controller and request.type == FULL:
            # Strays first: a re-created topic's old log must move aside before the new one is made.
            wanted = {
                (t.topic_name, p.partition_index): t.topic_id
                for t in request.topic_states
                for p in t.partition_states
            }
            if any(log.topic_id is None for log in self._logs.values()):
                # LogManager.findStrayReplicas refuses logs without a topic id; the request fails as a whole.
                return _error_response(request, ErrorCode.unknown_server_error)
            for key, log in list(self._logs.items()):
                if key not in wanted or wanted[key] != log.topic_id:
                    del self._logs[key]
                    assert log.topic_id is not None
                    dir_name = f"{log.topic}-{log.partition}.{uuid.uuid4().hex}-stray"
                    self._strays.append(LogDir(log.topic, log.partition, log.topic_id, dir_name))
        self._controller_epoch = int(request.controller_epoch)
        errors: dict[TopicPartition, ErrorCode] = {}
        for topic in request.topic_states:
            for state in topic.partition_states:
                key = (topic.topic_name, int(state.partition_index))
                errors[key] = self._become(key, topic.topic_id, state, request.is_kraft_controller)
        ids: dict[str, uuid.UUID | None] = {t.topic_name: t.topic_id for t in request.topic_states}
        by_topic: dict[uuid.UUID | None, list[Any]] = {}
        for (name, partition), error in errors.items():
            by_topic.setdefault(ids[name], []).append(
                LeaderAndIsrResponseV7LeaderAndIsrPartitionError(
                    partition_index=i32(partition), error_code=error
                )
            )
        return LeaderAndIsrResponseV7(
            error_code=ErrorCode.none,
            topics=tuple(
                LeaderAndIsrResponseV7LeaderAndIsrTopicError(
                    topic_id=topic_id, partition_errors=tuple(partitions)
                )
                for topic_id, partitions in by_topic.items()
            ),
        )

    def _become(
        self, key: TopicPartition, topic_id: uuid.UUID | None, state: Any, from_kraft: bool
    ) -> ErrorCode:
        """One partition of a LeaderAndIsr: topic id and leader epoch checks, then makeLeader/makeFollower."""
        log = self._logs.get(key)
        current_epoch = -1 if log is None or log.role == LOADED else log.leader_epoch
        log_id = None if log is None else log.topic_id
        epoch = int(state.leader_epoch)
        if topic_id is not None and log_id is not None and log_id != topic_id:
            return ErrorCode.inconsistent_topic_id
        if epoch > current_epoch or (epoch == current_epoch and from_kraft):
            if self.broker_id not in state.replicas:
                return ErrorCode.unknown_topic_or_partition
            if log is None:
                log = self._logs[key] = HostedLog(key[0], key[1], topic_id)
            elif log.topic_id is None:
                log.topic_id = topic_id
            log.role = LEADER if state.leader == self.broker_id else FOLLOWER
            log.stopped = False
            log.leader, log.leader_epoch = int(state.leader), epoch
            log.partition_epoch = int(state.partition_epoch)
            log.isr, log.replicas = _ints(state.isr), _ints(state.replicas)
            log.adding_replicas, log.removing_replicas = (
                _ints(state.adding_replicas),
                _ints(state.removing_replicas),
            )
            return ErrorCode.none
        if epoch < current_epoch:
            return ErrorCode.stale_controller_epoch
        if log is not None and topic_id is not None and log.topic_id is None:
            log.topic_id = topic_id  # a ZooKeeper controller upgrading to topic ids without an epoch bump
            return ErrorCode.none
        return ErrorCode.stale_controller_epoch

    # ------------------------------------------------------------------ StopReplica

    def _stop_replica(self, request: StopReplicaRequestV4) -> Any:
        """ReplicaManager.stopReplicas: delete drops the log; without delete it is stopped but kept."""
        if request.controller_epoch < self._controller_epoch:
            return _error_response(request, ErrorCode.stale_controller_epoch)
        self._controller_epoch = int(request.controller_epoch)
        answers = []
        for topic in request.topic_states:
            for state in topic.partition_states:
                key = (topic.topic_name, int(state.partition_index))
                error = self._stop(key, int(state.leader_epoch), state.delete_partition)
                answers.append(
                    StopReplicaResponseV4StopReplicaPartitionError(
                        topic_name=topic.topic_name, partition_index=state.partition_index, error_code=error
                    )
                )
        return StopReplicaResponseV4(error_code=ErrorCode.none, partition_errors=tuple(answers))

    def _stop(self, key: TopicPartition, epoch: int, delete: bool) -> ErrorCode:
        log = self._logs.get(key)
        # Deletion's sentinel epoch and "no epoch" pass; otherwise an older leader epoch is fenced.
        epoch_checked = epoch not in (EPOCH_DURING_DELETE, NO_EPOCH)
        if log is not None and log.role != LOADED and epoch_checked and epoch < log.leader_epoch:
            return ErrorCode.fenced_leader_epoch
        if log is None:
            return ErrorCode.none
        if delete:
            del self._logs[key]
            self._deleted.append(LogDir(log.topic, log.partition, log.topic_id))
        elif log.role != LOADED:
            log.stopped = True
        return ErrorCode.none

    # ------------------------------------------------------------------ UpdateMetadata

    def _update_metadata(self, request: UpdateMetadataRequestV8) -> Any:
        """ReplicaManager.maybeUpdateMetadataCache and ZkMetadataCache.updateMetadata."""
        if request.controller_epoch < self._controller_epoch:
            # ControllerMovedException, answered as STALE_CONTROLLER_EPOCH
            return _error_response(request, ErrorCode.stale_controller_epoch)
        cache = self._cache
        topic_states = list(request.topic_states)
        if request.is_kraft_controller and request.type == FULL:
            topic_states = self._implied_deletions(request, topic_states) + topic_states
        cache.controller_id = None if request.controller_id < 0 else int(request.controller_id)
        cache.controller_is_kraft = cache.controller_id is not None and request.is_kraft_controller
        cache.live_brokers = {
            int(b.id): CachedBroker(
                int(b.id),
                tuple((e.listener, e.host, int(e.port), int(e.security_protocol)) for e in b.endpoints),
                b.rack,
            )
            for b in request.live_brokers
        }
        for topic in topic_states:
            if topic.topic_id is None:
                cache.topic_ids.pop(topic.topic_name, None)
            else:
                cache.topic_ids[topic.topic_name] = topic.topic_id
        for topic in topic_states:
            for state in topic.partition_states:
                partitions = cache.partition_states.get(topic.topic_name)
                if state.leader == LEADER_DURING_DELETE:
                    if partitions is not None:
                        partitions.pop(int(state.partition_index), None)
                        if not partitions:
                            del cache.partition_states[topic.topic_name]
                            cache.topic_ids.pop(topic.topic_name, None)
                    continue
                cache.partition_states.setdefault(topic.topic_name, {})[int(state.partition_index)] = (
                    CachedPartition(
                        leader=int(state.leader), leader_epoch=int(state.leader_epoch), isr=_ints(state.isr),
                        replicas=_ints(state.replicas), offline_replicas=_ints(state.offline_replicas),
                        zk_version=int(state.zk_version), controller_epoch=int(state.controller_epoch),
                    )
                )  # fmt: skip
        self._controller_epoch = int(request.controller_epoch)
        return UpdateMetadataResponseV8(error_code=ErrorCode.none)

    def _implied_deletions(self, request: UpdateMetadataRequestV8, topic_states: list[Any]) -> list[Any]:
        """ZkMetadataCache.transformKRaftControllerFullMetadataRequest: deletion entries, placed first, for every
        cached topic id the FULL request lacks (a topic re-created under another id included).

        3.9's per-partition branch compares the wrong way round (it deletes, then re-adds, partitions the request
        has and the cache lacks), so it changes nothing; partitions the cache has and the request lacks stay, as
        in 3.9 (a Kafka topic never loses partitions). As in 3.9, a topic re-created under a new id in one FULL
        request ends cached without a topic id (removing its last old partition drops the new id too) until
        a later UpdateMetadata names it.
        """
        wanted = {t.topic_id for t in topic_states}
        deletions = []
        for name, topic_id in self._cache.topic_ids.items():
            cached = self._cache.partition_states.get(name)
            if topic_id in wanted or cached is None:
                continue
            deletions.append(
                request.UpdateMetadataTopicState(
                    topic_name=TopicName(name),
                    topic_id=topic_id,
                    partition_states=tuple(
                        request.UpdateMetadataPartitionState(
                            partition_index=i32(index),
                            leader=BrokerId(LEADER_DURING_DELETE),
                            controller_epoch=request.controller_epoch,
                            isr=tuple(BrokerId(b) for b in state.isr),
                            replicas=tuple(BrokerId(b) for b in state.replicas),
                        )
                        for index, state in cached.items()
                    ),
                )
            )
        return deletions


def _ints(values: Any) -> tuple[int, ...]:
    return tuple(int(v) for v in values)


def _error_response(request: Any, error: ErrorCode) -> Any:
    """The answer that applies nothing: LeaderAndIsrRequest.getErrorResponse puts `error` on every partition
    too; StopReplica and UpdateMetadata carry the top-level code only."""
    if isinstance(request, LeaderAndIsrRequestV7):
        return LeaderAndIsrResponseV7(
            error_code=error,
            topics=tuple(
                LeaderAndIsrResponseV7LeaderAndIsrTopicError(
                    topic_id=topic.topic_id,
                    partition_errors=tuple(
                        LeaderAndIsrResponseV7LeaderAndIsrPartitionError(
                            partition_index=state.partition_index, error_code=error
                        )
                        for state in topic.partition_states
                    ),
                )
                for topic in request.topic_states
            ),
        )
    if isinstance(request, StopReplicaRequestV4):
        return StopReplicaResponseV4(error_code=error)
    return UpdateMetadataResponseV8(error_code=error)


def _partition_errors(request: Any, response: Any) -> dict[TopicPartition, int]:
    """The answer's per-partition codes by (topic name, partition); LeaderAndIsr v7 names topics by id."""
    if isinstance(response, StopReplicaResponseV4):
        return {(p.topic_name, int(p.partition_index)): int(p.error_code) for p in response.partition_errors}
    if isinstance(response, LeaderAndIsrResponseV7):
        names = {t.topic_id: t.topic_name for t in request.topic_states}
        return {
            (names[t.topic_id], int(p.partition_index)): int(p.error_code)
            for t in response.topics
            for p in t.partition_errors
        }
    return {}


def partition_count(request: Any) -> int:
    """The partitions a LeaderAndIsr or UpdateMetadata request names."""
    return sum(len(topic.partition_states) for topic in request.topic_states)


def assert_one_full_sync(requests: list[ReceivedRequest], partitions: int, broker_id: int) -> None:
    """`requests` (what one broker received since an activation) begin with one full sync, and hold no
    other: UpdateMetadata (Type 0) with every partition, FULL LeaderAndIsr, FULL UpdateMetadata."""
    first = requests[:3]
    assert [(r.api_key, int(r.request.type)) for r in first] == [
        (UPDATE_METADATA, 0),
        (LEADER_AND_ISR, FULL),
        (UPDATE_METADATA, FULL),
    ], f"broker {broker_id}: {[(r.api_key, int(r.request.type)) for r in requests]}"
    assert partition_count(first[0].request) == partitions
    assert partition_count(first[2].request) == partitions
    later_full = [r for r in requests[3:] if int(r.request.type) == FULL]
    assert later_full == [], f"broker {broker_id} got a second full sync"
    assert all(r.error_code == 0 and not r.injected for r in first), first
