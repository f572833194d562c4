"""Kafka 3.9's MigrationPropagator, request side: the controller-to-broker requests a metadata change calls for.

Pure: an image (and, for a change, what it changed) in, the ordered LeaderAndIsr / UpdateMetadata / StopReplica
requests for each migrating ZooKeeper broker out (controller-broker.md §1.2-1.6). Sending them is the channel's
job (`bridge/broker_channel.py`).
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bridge.kafka import legacy_messages as lm
from bridge.kafka.memo_writer import EncodedOnce, Memo, SharedItems, Writer, memo_entity_writer
from bridge.kafka.protocol import encode_request_header
from migrate.errors import UnsupportedVersionError, Zk2KraftError
from migrate.gcpause import gc_paused
from migrate.kraft import records as rec
from migrate.kraft.image import (
    BrokerRegistration,
    ClusterImage,
    Endpoint,
    FeaturesImage,
    MetadataImage,
    PartitionRegistration,
    Provenance,
    TopicImage,
)
from migrate.kraft.replay import MetadataReplayer
from migrate.zk.model import normalised_listener_name

LEADER_AND_ISR = lm.LeaderAndIsrRequestV7
UPDATE_METADATA = lm.UpdateMetadataRequestV8
STOP_REPLICA = lm.StopReplicaRequestV4
"""The versions Kafka 3.9 sends at metadata.version 3.4-IV0 or later, which every migration has."""

TYPE_UNKNOWN = 0
TYPE_INCREMENTAL = 1
TYPE_FULL = 2
"""AbstractControlRequest.Type: the LeaderAndIsr `Type` field and UpdateMetadata's tagged `Type`."""

LEADER_DURING_DELETE = -2
EPOCH_DURING_DELETE = -2
NO_EPOCH = -1
"""kafka.api.LeaderAndIsr's sentinels."""

# kio's phantom int types check each value they wrap (~0.4 µs); the per-partition entities are built from
# plain ints through these untyped names (kio's writers encode both the same).
_LisrPartition: Any = LEADER_AND_ISR.LeaderAndIsrPartitionState
_LisrTopic: Any = LEADER_AND_ISR.LeaderAndIsrTopicState
_LiveLeader: Any = LEADER_AND_ISR.LeaderAndIsrLiveLeader
_Lisr: Any = LEADER_AND_ISR
_UmrPartition: Any = UPDATE_METADATA.UpdateMetadataPartitionState
_UmrTopic: Any = UPDATE_METADATA.UpdateMetadataTopicState
_UmrEndpoint: Any = UPDATE_METADATA.UpdateMetadataEndpoint
_UmrBroker: Any = UPDATE_METADATA.UpdateMetadataBroker
_Umr: Any = UPDATE_METADATA
_StopPartition: Any = STOP_REPLICA.StopReplicaPartitionState
_StopTopic: Any = STOP_REPLICA.StopReplicaTopicState
_Stop: Any = STOP_REPLICA


@dataclass(frozen=True, slots=True)
class PropagationContext:
    """What every request carries besides the image (controller-broker.md §1.6)."""

    controller_id: int
    """The bridge's `node.id` (request `ControllerId`)."""
    zk_controller_epoch: int
    """The `/controller_epoch` value the bridge wrote when it claimed `/controller` (request `ControllerEpoch`)."""
    inter_broker_listener: str
    """The controller's `inter.broker.listener.name`: LiveLeaders' endpoints and where the channel connects."""


@dataclass(frozen=True, slots=True)
class BrokerRequest:
    """One request for one broker, in the order it must be sent to that broker."""

    broker_id: int
    body: Any
    """A `bridge.kafka.legacy_messages` request entity (LeaderAndIsr v7, UpdateMetadata v8, StopReplica v4)."""
    full: bool = False
    """Part of a full sync (a broker's queue never holds two)."""


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    """Where the channel reaches a broker: its endpoint on the controller's inter-broker listener."""

    broker_id: int
    host: str
    port: int
    security_protocol: int


@dataclass(slots=True)
class PublishedDelta:
    """What one committed batch changed that the propagator cares about (a topics or cluster delta)."""

    changed_brokers: set[int] = field(default_factory=set)
    """Broker ids whose registration a record touched (register, change, fence, unfence, unregister)."""
    changed_partitions: dict[uuid.UUID, set[int]] = field(default_factory=dict)
    """Partitions created or changed, by topic id (topics still in the image); a topic created or changed
    without partition records has an empty set (Kafka's changed topic without partition changes)."""
    deleted_topics: dict[uuid.UUID, TopicImage] = field(default_factory=dict)
    """Topics removed, as they were before the batch."""
    removed_replicas: dict[tuple[uuid.UUID, int], set[int]] = field(default_factory=dict)
    """Replicas that left a partition's assignment (they get StopReplica with delete)."""

    def is_empty(self) -> bool:
        return not (self.changed_brokers or self.changed_partitions or self.deleted_topics)


# ---------------------------------------------------------------------------------------------- members


def migrating_brokers(image: MetadataImage, listener: str) -> dict[int, BrokerAddress]:
    """The channel's members: registered, migrating, unfenced ZooKeeper brokers, at their `listener` endpoint."""
    members: dict[int, BrokerAddress] = {}
    for broker in _migrating_unfenced(image):
        endpoint = _endpoint(broker, listener)
        if endpoint is not None:
            members[broker.broker_id] = BrokerAddress(
                broker.broker_id, endpoint.host, endpoint.port, endpoint.security_protocol
            )
    return members


def listenerless_brokers(image: MetadataImage, listener: str) -> dict[int, list[str]]:
    """Migrating unfenced ZooKeeper brokers with no endpoint on `listener`, with the listeners they registered:
    they get no request. Registration refuses such a broker; a log written under another listener name holds one."""
    return {
        broker.broker_id: [e.name for e in broker.endpoints]
        for broker in _migrating_unfenced(image)
        if _endpoint(broker, listener) is None
    }


def _migrating_unfenced(image: MetadataImage) -> list[BrokerRegistration]:
    brokers = image.cluster.brokers
    return [
        brokers[b] for b in sorted(brokers) if brokers[b].is_migrating_zk_broker and not brokers[b].fenced
    ]


def _endpoint(broker: BrokerRegistration, listener: str) -> Endpoint | None:
    wanted = normalised_listener_name(listener)
    for endpoint in broker.endpoints:
        if normalised_listener_name(endpoint.name) == wanted:
            return endpoint
    return None


# ---------------------------------------------------------------------------------------------- delta


def delta_of(
    records: Iterable[tuple[Any, int]], before: MetadataImage, after: MetadataImage
) -> PublishedDelta:
    """What `records` changed, from the image slices cut before and after they were applied."""
    delta = PublishedDelta()
    removed: list[uuid.UUID] = []
    registrations = _Registrations(before)
    for record, version in records:
        kind = type(record)
        if kind is rec.PartitionChangeRecord or kind is rec.PartitionRecord:
            delta.changed_partitions.setdefault(record.topic_id, set()).add(record.partition_id)
        elif kind is rec.TopicRecord:
            delta.changed_partitions.setdefault(record.topic_id, set())
        elif kind is rec.RemoveTopicRecord:
            removed.append(record.topic_id)
        elif kind in _REGISTRATION_RECORDS and registrations.changes(record, version):
            delta.changed_brokers.add(record.id if kind in _FENCING_RECORDS else record.broker_id)
    for topic_id in removed:
        # Kafka's TopicsDelta: a removed topic is no longer a changed one; one created in this batch was
        # never published, so nothing is sent for it.
        delta.changed_partitions.pop(topic_id, None)
        old = before.topics_by_id.get(topic_id)
        if old is not None:
            delta.deleted_topics[topic_id] = old
    for topic_id in [t for t in delta.changed_partitions if t not in after.topics_by_id]:
        del delta.changed_partitions[topic_id]
    for topic_id, partition_ids in delta.changed_partitions.items():
        old_topic = before.topics_by_id.get(topic_id)
        new_topic = after.topics_by_id[topic_id]
        if old_topic is None:
            continue
        for partition_id in partition_ids:
            old_partition = old_topic.partitions.get(partition_id)
            new_partition = new_topic.partitions.get(partition_id)
            if old_partition is None or new_partition is None:
                continue
            gone = set(old_partition.replicas).difference(new_partition.replicas)
            if gone:
                delta.removed_replicas[(topic_id, partition_id)] = gone
    return delta


_FENCING_RECORDS = (rec.FenceBrokerRecord, rec.UnfenceBrokerRecord)
_REGISTRATION_RECORDS = (
    rec.RegisterBrokerRecord,
    rec.UnregisterBrokerRecord,
    rec.BrokerRegistrationChangeRecord,
    *_FENCING_RECORDS,
)


class _Registrations:
    """The touched registrations as a batch's records change them one by one (ClusterDelta's `broker(id)`)."""

    def __init__(self, before: MetadataImage) -> None:
        scratch = MetadataImage(cluster=ClusterImage(brokers=dict(before.cluster.brokers)))
        self._replayer = MetadataReplayer(scratch, source="published batch")

    def changes(self, record: Any, version: int) -> bool:
        """ClusterDelta.replay: every record but BrokerRegistrationChangeRecord changes its broker; that one
        only when the registration it leaves differs (fencing a fenced broker is no change)."""
        brokers = self._replayer.image.cluster.brokers
        broker_id = record.broker_id if type(record) is rec.BrokerRegistrationChangeRecord else None
        prior = brokers.get(broker_id) if broker_id is not None else None
        try:
            self._replayer.replay(record, version, 0)
        except Zk2KraftError:
            # The slice lacks the broker (it was cut without registrations): judge by the record alone.
            if broker_id is None:
                return True
            return bool(record.fenced or record.in_controlled_shutdown or record.log_dirs)
        return broker_id is None or brokers.get(broker_id) is not prior


# ---------------------------------------------------------------------------------------------- requests


def full_sync(image: MetadataImage, ctx: PropagationContext) -> list[BrokerRequest]:
    """`sendRPCsToBrokersFromMetadataImage`: UpdateMetadata with every partition, then FULL LeaderAndIsr."""
    view = _View(image, ctx)
    brokers = view.brokers
    first = _Batch(view, TYPE_UNKNOWN, full=True)
    first.add_update_metadata_everything([b for b, r in brokers.items() if r.is_migrating_zk_broker])
    requests = first.requests()

    second = _Batch(view, TYPE_FULL, full=True)
    # No StopReplica: an image says nothing of replicas a broker holds outside the assignment; a FULL
    # LeaderAndIsr makes the broker find such stray logs itself.
    partitions = 0
    for topic in view.topics_in_order():
        topic_partitions = topic.partitions
        for partition_id in sorted(topic_partitions):
            partition = topic_partitions[partition_id]
            second.add_leader_and_isr(partition.replicas, topic, partition_id, partition, with_metadata=False)
            partitions += 1
    if partitions:
        # Every LeaderAndIsr addition queues its partition's UpdateMetadata to all registered brokers.
        second.add_update_metadata_everything(brokers)
    return requests + second.requests()


def incremental(delta: PublishedDelta, image: MetadataImage, ctx: PropagationContext) -> list[BrokerRequest]:
    """`sendRPCsToBrokersFromMetadataDelta`: the requests one published change calls for (none: empty list)."""
    if delta.is_empty():
        return []
    # The image is the log's as it is when the batch is published, which may already hold a later batch's
    # topic of a deleted one's name. In Kafka's image of this delta the name is gone (unless this very batch
    # created it again), so its StopReplica epoch is -2 and its topic id zero.
    recreated_here = {
        topic.name for topic_id in delta.changed_partitions if (topic := image.topics_by_id.get(topic_id))
    }
    view = _View(image, ctx, gone=frozenset(t.name for t in delta.deleted_topics.values()) - recreated_here)
    brokers = view.brokers
    changed = set()
    for broker_id in delta.changed_brokers:
        registration = brokers.get(broker_id)
        if registration is not None and registration.is_migrating_zk_broker and not registration.fenced:
            changed.add(broker_id)
    old = [b for b, r in brokers.items() if r.is_migrating_zk_broker and b not in changed]

    # Batch 1: the brokers (and, for a changed broker, every partition) before anything that relies on them.
    first = _Batch(view, TYPE_UNKNOWN, full=False)
    if changed:
        first.add_update_metadata_everything(changed)
    if delta.changed_brokers:
        first.add_update_metadata_brokers(old)
    requests = first.requests()

    second = _Batch(view, TYPE_INCREMENTAL, full=False)
    if changed:
        for topic in view.topics_in_order():
            topic_partitions = topic.partitions
            for partition_id in sorted(topic_partitions):
                partition = topic_partitions[partition_id]
                targets = [b for b in partition.replicas if b in changed]
                if targets:
                    second.add_leader_and_isr(targets, topic, partition_id, partition)
    if delta.deleted_topics or delta.changed_partitions:
        second.add_update_metadata_brokers(old)
    for deleted in delta.deleted_topics.values():
        for partition_id in sorted(deleted.partitions):
            partition = deleted.partitions[partition_id]
            second.add_stop_replica(partition.replicas, deleted.name, partition_id)
            second.add_update_metadata_deletion(old, deleted.name, partition_id, partition)
    for topic_id, partition_ids in delta.changed_partitions.items():
        changed_topic = image.topics_by_id.get(topic_id)
        if changed_topic is None:
            continue
        for partition_id in sorted(partition_ids):
            changed_partition = changed_topic.partitions.get(partition_id)
            if changed_partition is None:
                continue
            second.add_leader_and_isr(
                changed_partition.replicas, changed_topic, partition_id, changed_partition
            )
            gone = delta.removed_replicas.get((topic_id, partition_id))
            if gone:
                second.add_stop_replica(sorted(gone), changed_topic.name, partition_id)
    return requests + second.requests()


def sync_view(image: MetadataImage) -> MetadataImage:
    """A copy of the topics and brokers of `image`, cheap enough to take on the event loop at 200,000
    partitions, that `full_sync` and `incremental` may then read on a worker thread while the log moves on."""
    # Replay replaces PartitionRegistration and BrokerRegistration objects instead of mutating them, so
    # copying the dicts that hold them is enough; features and provenance are mutated, so copied.
    features = image.features
    provenance = image.provenance
    view = MetadataImage(
        features=FeaturesImage(
            metadata_version=features.metadata_version,
            finalized_versions=dict(features.finalized_versions),
            zk_migration_state=features.zk_migration_state,
            epoch=features.epoch,
        ),
        cluster=ClusterImage(
            brokers=dict(image.cluster.brokers), controllers=dict(image.cluster.controllers)
        ),
        provenance=Provenance(
            provenance.last_contained_offset,
            provenance.last_contained_epoch,
            provenance.last_contained_log_time_ms,
        ),
    )
    by_id = view.topics_by_id
    by_name = view.topics_by_name
    for topic_id, topic in image.topics_by_id.items():
        copy = TopicImage(topic.name, topic_id, dict(topic.partitions))
        by_id[topic_id] = copy
        by_name[topic.name] = copy
    return view


# ---------------------------------------------------------------------------------------------- encoding


_writers: dict[type[Any], Writer] = {}


def encode(body: Any, correlation_id: int, client_id: str | None) -> bytes:
    """The request's bytes (header and body), byte-for-byte `encode_request`'s, fast for a 200,000-partition
    request (shared nested entities are encoded once)."""
    kind = type(body)
    writer = _writers.get(kind)
    if writer is None:
        writer = _writers[kind] = memo_entity_writer(kind, frozenset(), sharing=True)
    buffer = io.BytesIO()
    buffer.write(encode_request_header(body, correlation_id, client_id))
    try:
        # The kept bytes of a large request are hundreds of thousands of new tuples: without the pause,
        # they set off full collections over the whole image.
        with gc_paused():
            writer(buffer, body)
    except Exception as exc:
        # kio's writers report unencodable values with struct.error, TypeError, OutOfBoundValue, ...
        raise Zk2KraftError(f"cannot encode {kind.__name__}: {exc}") from exc
    return buffer.getvalue()


# ---------------------------------------------------------------------------------------------- building


class _View:
    """What one call's requests read from the image (Kafka's MigrationControllerChannelContext)."""

    def __init__(self, image: MetadataImage, ctx: PropagationContext, gone: frozenset[str] = frozenset()) -> None:
        mv = image.metadata_version
        if not mv.is_migration_supported():
            raise UnsupportedVersionError(
                f"metadata.version {mv.name} predates ZooKeeper migration: no LeaderAndIsr v7, "
                "UpdateMetadata v8 or StopReplica v4 to send"
            )
        self.image = image
        self.ctx = ctx
        self.brokers = image.cluster.brokers
        self.members = migrating_brokers(image, ctx.inter_broker_listener)
        self.kraft_epoch = image.provenance.last_contained_epoch
        """The KRaft epoch of the image's latest batch: every partition state's `ControllerEpoch`."""
        self.memo: Memo = {}
        """Encoded entities shared by this call's requests (see `encode`)."""
        self._live_brokers: EncodedOnce | None = None
        self._live_leaders: dict[int, Any] = {}
        self._everything: EncodedOnce | None = None
        self.gone = gone
        """Names deleted by the change being sent and absent from its own image."""

    def topics_in_order(self) -> list[TopicImage]:
        return sorted(self.image.topics_by_id.values(), key=_topic_name)

    def topic_id(self, name: str) -> uuid.UUID | None:
        """The image's id for topic `name`; None (the zero uuid on the wire) for a name it lacks."""
        topic = None if name in self.gone else self.image.topics_by_name.get(name)
        return None if topic is None else topic.topic_id

    def stop_replica_epoch(self, name: str, partition_id: int) -> int:
        topic = None if name in self.gone else self.image.topics_by_name.get(name)
        if topic is None:
            return EPOCH_DURING_DELETE
        partition = topic.partitions.get(partition_id)
        return NO_EPOCH if partition is None else partition.leader_epoch

    def leader_and_isr_state(self, partition_id: int, p: PartitionRegistration) -> Any:
        return _LisrPartition(
            partition_index=partition_id,
            controller_epoch=self.kraft_epoch,
            leader=p.leader,
            leader_epoch=p.leader_epoch,
            isr=tuple(p.isr),
            partition_epoch=p.partition_epoch,
            replicas=tuple(p.replicas),
            adding_replicas=tuple(p.adding_replicas),
            removing_replicas=tuple(p.removing_replicas),
            is_new=True,
            leader_recovery_state=p.leader_recovery_state,
        )

    def update_metadata_state(self, partition_id: int, p: PartitionRegistration) -> Any:
        brokers = self.brokers
        return _UmrPartition(
            partition_index=partition_id,
            controller_epoch=self.kraft_epoch,
            leader=p.leader,
            leader_epoch=p.leader_epoch,
            isr=tuple(p.isr),
            zk_version=p.partition_epoch,
            replicas=tuple(p.replicas),
            offline_replicas=tuple(b for b in p.replicas if b not in brokers),
        )

    def deletion_state(self, partition_id: int, p: PartitionRegistration) -> Any:
        """A deleted topic's partition (LeaderAndIsr.duringDelete), with Kafka 3.9's offline replicas: those
        still registered (the broker drops the partition without reading them)."""
        brokers = self.brokers
        return _UmrPartition(
            partition_index=partition_id,
            controller_epoch=self.ctx.zk_controller_epoch,
            leader=LEADER_DURING_DELETE,
            leader_epoch=0,
            isr=tuple(p.isr),
            zk_version=0,
            replicas=tuple(p.replicas),
            offline_replicas=tuple(b for b in p.replicas if b in brokers),
        )

    def live_brokers(self) -> EncodedOnce:
        """UpdateMetadata's LiveBrokers: every registered broker (fenced and KRaft ones too), all endpoints."""
        if self._live_brokers is None:
            self._live_brokers = EncodedOnce(
                _UmrBroker(
                    id=broker_id,
                    endpoints=tuple(
                        _UmrEndpoint(
                            port=e.port, host=e.host, listener=e.name, security_protocol=e.security_protocol
                        )
                        for e in registration.endpoints
                    ),
                    rack=registration.rack,
                )
                for broker_id, registration in sorted(self.brokers.items())
            )
        return self._live_brokers

    def live_leader(self, broker_id: int) -> Any | None:
        """A registered leader's endpoint on the controller's inter-broker listener (None: not there)."""
        leader = self._live_leaders.get(broker_id)
        if leader is None and broker_id not in self._live_leaders:
            registration = self.brokers.get(broker_id)
            endpoint = (
                None if registration is None else _endpoint(registration, self.ctx.inter_broker_listener)
            )
            if endpoint is not None:
                leader = _LiveLeader(broker_id=broker_id, host_name=endpoint.host, port=endpoint.port)
            self._live_leaders[broker_id] = leader
        return leader

    def everything(self) -> EncodedOnce:
        """UpdateMetadata topic states holding every partition of the image."""
        if self._everything is None:
            self._everything = EncodedOnce(
                _UmrTopic(
                    topic_name=topic.name,
                    topic_id=topic.topic_id,
                    partition_states=tuple(
                        self.update_metadata_state(pid, topic.partitions[pid])
                        for pid in sorted(topic.partitions)
                    ),
                )
                for topic in self.topics_in_order()
            )
        return self._everything


class _Batch:
    """One AbstractControllerBrokerRequestBatch: additions gathered, then LISR, UMR and StopReplica made."""

    def __init__(self, view: _View, update_type: int, *, full: bool) -> None:
        self.view = view
        self.update_type = update_type
        self.full = full
        self.leader_and_isr: dict[str, dict[int, Any]] = {}
        """The partition states added, by topic name: the same for every replica they go to."""
        self.leader_and_isr_targets: dict[int, dict[str, dict[int, None]]] = {}
        """broker -> topic name -> partitions (in order of addition)."""
        self.metadata_brokers: set[int] = set()
        self.metadata_everything = False
        self.metadata: dict[str, dict[int, Any]] = {}
        """UpdateMetadata partition states by topic name and partition (Kafka's map keyed by TopicPartition)."""
        self.stop_replica: dict[int, dict[str, dict[int, Any]]] = {}
        self._whole_topics: dict[str, tuple[Any, set[int]]] = {}

    def add_leader_and_isr(
        self,
        broker_ids: Iterable[int],
        topic: TopicImage,
        partition_id: int,
        partition: PartitionRegistration,
        *,
        with_metadata: bool = True,
    ) -> None:
        name = topic.name
        states = self.leader_and_isr.get(name)
        if states is None:
            states = self.leader_and_isr[name] = {}
        if partition_id not in states:
            states[partition_id] = self.view.leader_and_isr_state(partition_id, partition)
        targets = self.leader_and_isr_targets
        for broker_id in broker_ids:
            if broker_id >= 0:
                per_broker = targets.get(broker_id)
                if per_broker is None:
                    per_broker = targets[broker_id] = {}
                per_topic = per_broker.get(name)
                if per_topic is None:
                    per_topic = per_broker[name] = {}
                per_topic[partition_id] = None
        if with_metadata:
            self.metadata_brokers.update(self.view.brokers)
            self.metadata.setdefault(name, {})[partition_id] = self.view.update_metadata_state(
                partition_id, partition
            )

    def add_update_metadata_everything(self, broker_ids: Iterable[int]) -> None:
        self.add_update_metadata_brokers(broker_ids)
        self.metadata_everything = True

    def add_update_metadata_brokers(self, broker_ids: Iterable[int]) -> None:
        self.metadata_brokers.update(b for b in broker_ids if b >= 0)

    def add_update_metadata_deletion(
        self, broker_ids: Iterable[int], name: str, partition_id: int, partition: PartitionRegistration
    ) -> None:
        self.add_update_metadata_brokers(broker_ids)
        self.metadata.setdefault(name, {})[partition_id] = self.view.deletion_state(partition_id, partition)

    def add_stop_replica(self, broker_ids: Iterable[int], name: str, partition_id: int) -> None:
        state = _StopPartition(
            partition_index=partition_id,
            leader_epoch=self.view.stop_replica_epoch(name, partition_id),
            delete_partition=True,
        )
        for broker_id in broker_ids:
            if broker_id >= 0:
                self.stop_replica.setdefault(broker_id, {}).setdefault(name, {})[partition_id] = state

    def requests(self) -> list[BrokerRequest]:
        """`sendRequestsToBrokers`: LeaderAndIsr, then UpdateMetadata, then StopReplica, to channel members."""
        view = self.view
        members = view.members
        out: list[BrokerRequest] = []
        for broker_id in sorted(self.leader_and_isr_targets):
            if broker_id in members:
                out.append(BrokerRequest(broker_id, self._leader_and_isr(broker_id), self.full))
        recipients = sorted(b for b in self.metadata_brokers if b in members)
        if recipients:
            topic_states = self._metadata_topic_states()
            live_brokers = view.live_brokers()
            for broker_id in recipients:
                body = _Umr(
                    controller_id=view.ctx.controller_id,
                    is_kraft_controller=True,
                    type=self.update_type,
                    controller_epoch=view.ctx.zk_controller_epoch,
                    broker_epoch=view.brokers[broker_id].epoch,
                    topic_states=topic_states,
                    live_brokers=live_brokers,
                )
                out.append(BrokerRequest(broker_id, body, self.full))
        for broker_id in sorted(self.stop_replica):
            if broker_id in members:
                out.append(BrokerRequest(broker_id, self._stop_replica(broker_id), self.full))
        return out

    def _leader_and_isr(self, broker_id: int) -> Any:
        view = self.view
        topic_states = []
        leaders: set[int] = set()
        for name, partition_ids in self.leader_and_isr_targets[broker_id].items():
            states = self.leader_and_isr[name]
            if len(partition_ids) == len(states):
                # The broker gets every partition this batch has for the topic: the same entity as its peers.
                topic_state, topic_leaders = self._whole_topic(name)
                leaders |= topic_leaders
            else:
                chosen = [states[p] for p in partition_ids]
                topic_state = _LisrTopic(
                    topic_name=name,
                    topic_id=view.topic_id(name),
                    partition_states=SharedItems(chosen, view.memo),
                )
                leaders.update(s.leader for s in chosen)
            topic_states.append(topic_state)
        live_leaders = []
        for leader_id in sorted(leaders):
            leader = view.live_leader(leader_id)
            if leader is not None:
                live_leaders.append(leader)
        return _Lisr(
            controller_id=view.ctx.controller_id,
            is_kraft_controller=True,
            controller_epoch=view.ctx.zk_controller_epoch,
            broker_epoch=view.brokers[broker_id].epoch,
            type=self.update_type,
            topic_states=SharedItems(topic_states, view.memo),
            live_leaders=tuple(live_leaders),
        )

    def _whole_topic(self, name: str) -> tuple[Any, set[int]]:
        """The topic state with all of the batch's partitions of `name`, and their leaders (made once)."""
        cache = self._whole_topics
        hit = cache.get(name)
        if hit is None:
            states = self.leader_and_isr[name]
            topic_state = _LisrTopic(
                topic_name=name,
                topic_id=self.view.topic_id(name),
                partition_states=SharedItems(states.values(), self.view.memo),
            )
            hit = cache[name] = (topic_state, {s.leader for s in states.values()})
        return hit

    def _metadata_topic_states(self) -> EncodedOnce:
        view = self.view
        if self.metadata_everything and not self.metadata:
            return view.everything()
        by_topic: dict[str, dict[int, Any]] = {}
        if self.metadata_everything:
            for topic_state in view.everything():
                by_topic[topic_state.topic_name] = {
                    s.partition_index: s for s in topic_state.partition_states
                }
        for name, states in self.metadata.items():
            by_topic.setdefault(name, {}).update(states)
        return EncodedOnce(
            _UmrTopic(topic_name=name, topic_id=view.topic_id(name), partition_states=tuple(states.values()))
            for name, states in by_topic.items()
        )

    def _stop_replica(self, broker_id: int) -> Any:
        view = self.view
        return _Stop(
            controller_id=view.ctx.controller_id,
            is_kraft_controller=True,
            controller_epoch=view.ctx.zk_controller_epoch,
            broker_epoch=view.brokers[broker_id].epoch,
            topic_states=tuple(
                _StopTopic(topic_name=name, partition_states=tuple(states.values()))
                for name, states in self.stop_replica[broker_id].items()
            ),
        )


def _topic_name(topic: TopicImage) -> str:
    return topic.name
