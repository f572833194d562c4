"""Kafka 3.9's ReplicationControlManager, broker side: heartbeats, fencing, unfencing, controlled shutdown, elections.

Every method is pure apart from the heartbeat manager (in memory, as in Kafka): it reads the image and
returns the records to append. Partitions are visited in topic-name then partition order; Kafka visits
them in the hash order of its indexes, so only the order of records within one batch can differ.
"""

from __future__ import annotations

import enum
import logging
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from bridge.brokers.cluster import BrokerError, ClusterControl, RecordAndVersion
from bridge.brokers.heartbeats import BrokerControlState, HeartbeatRequest
from bridge.brokers.partition_change import (
    Election,
    PartitionChangeBuilder,
    is_online_directory,
    leader_acceptor,
    partition_builder,
)
from migrate.kraft import records as rec
from migrate.kraft.image import NO_LEADER, MetadataImage, PartitionRegistration, TopicImage
from migrate.kraft.migration_state import ZkMigrationState
from migrate.migration import MAX_RECORDS_PER_APPEND

log = logging.getLogger(__name__)

MAX_ELECTIONS_PER_IMBALANCE = 1_000
"""ReplicationControlManager.MAX_ELECTIONS_PER_IMBALANCE: elections per balancing or unclean pass."""
MAX_RECORDS_PER_USER_OP = MAX_RECORDS_PER_APPEND
"""QuorumController.MAX_RECORDS_PER_USER_OP, which is its records-per-batch limit."""

FENCE = 1
UNFENCE = -1
IN_CONTROLLED_SHUTDOWN = 1


class ElectionType(enum.IntEnum):
    """org.apache.kafka.common.ElectionType (the ElectLeaders request's byte)."""

    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True, slots=True)
class HeartbeatReply:
    """BrokerHeartbeatReply: the flags of a successful BrokerHeartbeatResponse."""

    is_caught_up: bool
    is_fenced: bool
    in_controlled_shutdown: bool
    should_shut_down: bool


@dataclass(slots=True)
class HeartbeatResult:
    """A heartbeat's records and reply, or its error.

    When `in_controlled_shutdown` is set, the caller passes the end offset of the batch holding these
    records to `ClusterControl.heartbeats.maybe_update_controlled_shutdown_offset` once it is appended.
    """

    records: list[RecordAndVersion] = field(default_factory=list)
    reply: HeartbeatReply | None = None
    error: BrokerError | None = None
    in_controlled_shutdown: bool = False


@dataclass(frozen=True, slots=True)
class ElectionOutcome:
    """The ApiError of one partition's election."""

    code: ErrorCode
    message: str | None = None


PartitionRef = tuple[TopicImage, int, PartitionRegistration]
DirectoryAssignment = tuple[uuid.UUID, list[tuple[uuid.UUID, list[int]]]]
"""An AssignReplicasToDirs directory: its id and, per topic id, the partition indexes placed in it."""


@dataclass(slots=True)
class AssignmentResult:
    """AssignReplicasToDirs' records and per-partition errors (same shape as the request), or its error."""

    records: list[RecordAndVersion] = field(default_factory=list)
    directories: list[tuple[uuid.UUID, list[tuple[uuid.UUID, list[tuple[int, ErrorCode]]]]]] = field(
        default_factory=list
    )
    error: BrokerError | None = None


def elect_leader(
    image: MetadataImage,
    topic_name: str,
    partition_id: int,
    election_type: ElectionType,
    zk_migration_enabled: bool,
) -> tuple[ElectionOutcome, list[RecordAndVersion]]:
    """ReplicationControlManager.electLeader: one partition's preferred or unclean election."""
    topic = image.topics_by_name.get(topic_name)
    if topic is None:
        return ElectionOutcome(ErrorCode.unknown_topic_or_partition, f"No such topic as {topic_name}"), []
    partition = topic.partitions.get(partition_id)
    if partition is None:
        return (
            ElectionOutcome(
                ErrorCode.unknown_topic_or_partition, f"No such partition as {topic_name}-{partition_id}"
            ),
            [],
        )
    preferred = partition.replicas[0] if partition.replicas else NO_LEADER
    if (election_type is ElectionType.PREFERRED and partition.leader == preferred) or (
        election_type is ElectionType.UNCLEAN and partition.leader != NO_LEADER
    ):
        return ElectionOutcome(ErrorCode.election_not_needed), []
    election = Election.UNCLEAN if election_type is ElectionType.UNCLEAN else Election.PREFERRED
    record = partition_builder(
        image, topic, partition_id, partition, election=election, zk_migration_enabled=zk_migration_enabled
    ).build()
    if record is None:
        if election_type is ElectionType.PREFERRED:
            return ElectionOutcome(ErrorCode.preferred_leader_not_available), []
        return ElectionOutcome(ErrorCode.eligible_leaders_not_available), []
    return ElectionOutcome(ErrorCode.none), [(record, image.metadata_version.partition_change_record_version())]


class ReplicationControl:
    """ReplicationControlManager's broker-driven parts over a ClusterControl.

    `unclean_enabled(topic)` answers ConfigurationControlManager.uncleanLeaderElectionEnabledForTopic.
    """

    def __init__(
        self, cluster: ClusterControl, unclean_enabled: Callable[[MetadataImage, str], bool]
    ) -> None:
        self.cluster = cluster
        self.unclean_enabled = unclean_enabled

    # ------------------------------------------------------------ partition indexes (BrokersToIsrs)

    @staticmethod
    def _partitions(
        image: MetadataImage, wanted: Callable[[PartitionRegistration], bool]
    ) -> Iterator[PartitionRef]:
        for name in sorted(image.topics_by_name):
            topic = image.topics_by_name[name]
            for partition_id in sorted(topic.partitions):
                partition = topic.partitions[partition_id]
                if wanted(partition):
                    yield topic, partition_id, partition

    def partitions_with_broker_in_isr(self, image: MetadataImage, broker_id: int) -> Iterator[PartitionRef]:
        return self._partitions(image, lambda p: broker_id in p.isr)

    def partitions_with_no_leader(self, image: MetadataImage) -> Iterator[PartitionRef]:
        return self._partitions(image, lambda p: p.leader == NO_LEADER)

    @staticmethod
    def has_leaderships(image: MetadataImage, broker_id: int) -> bool:
        """BrokersToIsrs.hasLeaderships: it indexes ISR members, so a leader outside its ISR does not count."""
        return any(
            p.leader == broker_id and broker_id in p.isr
            for topic in image.topics_by_id.values()
            for p in topic.partitions.values()
        )

    # ------------------------------------------------------------ elections

    def _builder(
        self,
        image: MetadataImage,
        topic: TopicImage,
        partition_id: int,
        partition: PartitionRegistration,
        accept: Callable[[int], bool],
        election: Election,
    ) -> PartitionChangeBuilder:
        return partition_builder(
            image, topic, partition_id, partition, accept=accept, election=election,
            zk_migration_enabled=self.cluster.zk_registration_allowed(image),
        )  # fmt: skip

    def generate_leader_and_isr_updates(
        self,
        image: MetadataImage,
        partitions: Iterator[PartitionRef],
        *,
        broker_to_remove: int = NO_LEADER,
        broker_to_add: int = NO_LEADER,
    ) -> list[RecordAndVersion]:
        """ReplicationControlManager.generateLeaderAndIsrUpdates (no unclean-shutdown replicas: ELR is off)."""
        version = image.metadata_version.partition_change_record_version()
        out: list[RecordAndVersion] = []
        for topic, partition_id, partition in partitions:
            election = Election.UNCLEAN if self.unclean_enabled(image, topic.name) else Election.ONLINE
            builder = self._builder(
                image,
                topic,
                partition_id,
                partition,
                leader_acceptor(image, partition, removing=broker_to_remove, adding=broker_to_add),
                election,
            )
            builder.target_isr = [b for b in partition.isr if b != broker_to_remove]
            record = builder.build()
            if record is not None:
                out.append((record, version))
        return out

    def elect_leader(
        self, image: MetadataImage, topic_name: str, partition_id: int, election_type: ElectionType
    ) -> tuple[ElectionOutcome, list[RecordAndVersion]]:
        """ReplicationControlManager.electLeader: one partition's preferred or unclean election."""
        return elect_leader(
            image, topic_name, partition_id, election_type, self.cluster.zk_registration_allowed(image)
        )

    def imbalanced_partitions(self, image: MetadataImage) -> Iterator[PartitionRef]:
        """ReplicationControlManager.imbalancedPartitions: led by someone other than the first replica."""
        return self._partitions(image, lambda p: p.leader != (p.replicas[0] if p.replicas else NO_LEADER))

    def maybe_balance_partition_leaders(
        self, image: MetadataImage, max_elections: int = MAX_ELECTIONS_PER_IMBALANCE
    ) -> tuple[list[RecordAndVersion], bool]:
        """maybeBalancePartitionLeaders: preferred elections; True when the pass stopped at the limit."""
        version = image.metadata_version.partition_change_record_version()
        out: list[RecordAndVersion] = []
        for topic, partition_id, partition in self.imbalanced_partitions(image):
            if len(out) >= max_elections:
                break
            record = self._builder(
                image, topic, partition_id, partition, leader_acceptor(image, partition), Election.PREFERRED
            ).build()
            if record is not None:
                out.append((record, version))
        return out, len(out) >= max_elections

    def maybe_elect_unclean_leaders(
        self, image: MetadataImage, max_elections: int = MAX_ELECTIONS_PER_IMBALANCE
    ) -> tuple[list[RecordAndVersion], bool]:
        """maybeElectUncleanLeaders: leaderless partitions of topics allowing unclean elections."""
        out: list[RecordAndVersion] = []
        for topic, partition_id, _ in self.partitions_with_no_leader(image):
            if len(out) >= max_elections:
                break
            if not self.unclean_enabled(image, topic.name):
                continue
            outcome, records = self.elect_leader(image, topic.name, partition_id, ElectionType.UNCLEAN)
            if outcome.code == ErrorCode.none:
                log.error("Unclean leader election for offline partition %s-%d.", topic.name, partition_id)
            out.extend(records)
        return out, len(out) >= max_elections

    # ------------------------------------------------------------ broker state changes

    def handle_broker_fenced(self, image: MetadataImage, broker_id: int) -> list[RecordAndVersion]:
        """handleBrokerFenced: out of every ISR and leadership, then the fence record."""
        broker = image.cluster.brokers.get(broker_id)
        if broker is None:
            raise KeyError(f"Can't find broker registration for broker {broker_id}")
        records = self.generate_leader_and_isr_updates(
            image, self.partitions_with_broker_in_isr(image, broker_id), broker_to_remove=broker_id
        )
        if image.metadata_version.is_broker_registration_change_record_supported():
            records.append(
                (
                    rec.BrokerRegistrationChangeRecord(
                        broker_id=broker_id, broker_epoch=broker.epoch, fenced=FENCE
                    ),
                    0,
                )
            )
        else:
            records.append((rec.FenceBrokerRecord(id=broker_id, epoch=broker.epoch), 0))
        return records

    def handle_broker_unregistered(
        self, image: MetadataImage, broker_id: int, broker_epoch: int
    ) -> list[RecordAndVersion]:
        """handleBrokerUnregistered: out of every ISR and leadership (ELR is off), then the unregister record."""
        records = self.generate_leader_and_isr_updates(
            image, self.partitions_with_broker_in_isr(image, broker_id), broker_to_remove=broker_id
        )
        records.append((rec.UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=broker_epoch), 0))
        return records

    def unregister_broker(
        self, image: MetadataImage, broker_id: int
    ) -> tuple[list[RecordAndVersion], BrokerError | None]:
        """ReplicationControlManager.unregisterBroker (UnregisterBroker, `kafka-cluster.sh unregister`).

        The records may be appended in several batches (Kafka's ControllerResult.of), but like every user
        operation they are bounded: past MAX_RECORDS_PER_USER_OP the request fails as a whole.
        """
        broker = image.cluster.brokers.get(broker_id)
        if broker is None:
            return [], BrokerError(
                ErrorCode.broker_id_not_registered, f"Broker ID {broker_id} is not currently registered"
            )
        records = self.handle_broker_unregistered(image, broker_id, broker.epoch)
        if len(records) > MAX_RECORDS_PER_USER_OP:
            return [], BrokerError(
                ErrorCode.policy_violation, "Unable to perform excessively large batch operation."
            )
        return records, None

    def handle_broker_unfenced(
        self, image: MetadataImage, broker_id: int, broker_epoch: int
    ) -> list[RecordAndVersion]:
        """handleBrokerUnfenced: the unfence record, then leaders for leaderless partitions it may now lead."""
        records: list[RecordAndVersion] = []
        if image.metadata_version.is_broker_registration_change_record_supported():
            records.append(
                (
                    rec.BrokerRegistrationChangeRecord(
                        broker_id=broker_id, broker_epoch=broker_epoch, fenced=UNFENCE
                    ),
                    0,
                )
            )
        else:
            records.append((rec.UnfenceBrokerRecord(id=broker_id, epoch=broker_epoch), 0))
        records += self.generate_leader_and_isr_updates(
            image, self.partitions_with_no_leader(image), broker_to_add=broker_id
        )
        return records

    def handle_broker_in_controlled_shutdown(
        self, image: MetadataImage, broker_id: int, broker_epoch: int
    ) -> list[RecordAndVersion]:
        """handleBrokerInControlledShutdown: the shutdown record (once), then out of every ISR and leadership."""
        records: list[RecordAndVersion] = []
        broker = image.cluster.brokers.get(broker_id)
        already = broker is not None and broker.in_controlled_shutdown
        if image.metadata_version.is_in_controlled_shutdown_state_supported() and not already:
            change = rec.BrokerRegistrationChangeRecord(
                broker_id=broker_id, broker_epoch=broker_epoch, in_controlled_shutdown=IN_CONTROLLED_SHUTDOWN
            )
            records.append(
                (
                    change,
                    image.metadata_version.broker_registration_change_record_version(
                        in_controlled_shutdown=True
                    ),
                )
            )
        records += self.generate_leader_and_isr_updates(
            image, self.partitions_with_broker_in_isr(image, broker_id), broker_to_remove=broker_id
        )
        return records

    def handle_directories_offline(
        self, image: MetadataImage, broker_id: int, broker_epoch: int, offline: list[uuid.UUID]
    ) -> list[RecordAndVersion]:
        """handleDirectoriesOffline: partitions on newly offline directories lose the broker; its dirs shrink."""
        broker = image.cluster.brokers[broker_id]
        newly_offline = [d for d in broker.log_dirs if d in offline]
        if not newly_offline:
            return []
        records: list[RecordAndVersion] = []
        for directory in newly_offline:

            def on_directory(p: PartitionRegistration, directory: uuid.UUID = directory) -> bool:
                return broker_id in p.replicas and p.directories[p.replicas.index(broker_id)] == directory

            records += self.generate_leader_and_isr_updates(
                image, self._partitions(image, on_directory), broker_to_remove=broker_id
            )
        online = [d for d in broker.log_dirs if d not in offline]
        change = rec.BrokerRegistrationChangeRecord(
            broker_id=broker_id, broker_epoch=broker_epoch, log_dirs=online
        )
        records.append((change, 2))
        log.warning(
            "Directories %s of broker %d marked offline; remaining: %s", newly_offline, broker_id, online
        )
        return records

    # ------------------------------------------------------------ directory assignments

    def handle_assign_replicas_to_dirs(
        self, image: MetadataImage, broker_id: int, broker_epoch: int, directories: list[DirectoryAssignment]
    ) -> AssignmentResult:
        """handleAssignReplicasToDirs: record each replica's new directory; replicas on an offline one lose the
        broker from their ISR and leadership."""
        if not image.metadata_version.is_directory_assignment_supported():
            return AssignmentResult(
                error=BrokerError(ErrorCode.unsupported_version, "Directory assignment is not supported yet.")
            )
        stale = self.cluster.check_broker_epoch(image, broker_id, broker_epoch)
        if stale is not None:
            return AssignmentResult(error=stale)
        broker = image.cluster.brokers[broker_id]
        version = image.metadata_version.partition_change_record_version()
        result = AssignmentResult()
        offline_refs: list[PartitionRef] = []
        for directory, topics in directories:
            directory_offline = not is_online_directory(directory, broker.log_dirs)
            answered_topics: list[tuple[uuid.UUID, list[tuple[int, ErrorCode]]]] = []
            for topic_id, partition_ids in topics:
                topic = image.topics_by_id.get(topic_id)
                if topic is None:
                    log.warning(
                        "AssignReplicasToDirsRequest from broker %d references unknown topic ID %s",
                        broker_id, topic_id,
                    )  # fmt: skip
                answered: list[tuple[int, ErrorCode]] = []
                for partition_id in partition_ids:
                    if topic is None:
                        answered.append((partition_id, ErrorCode.unknown_topic_id))
                        continue
                    partition = topic.partitions.get(partition_id)
                    if partition is None:
                        log.warning(
                            "AssignReplicasToDirsRequest from broker %d references unknown partition %s-%d",
                            broker_id, topic.name, partition_id,
                        )  # fmt: skip
                        answered.append((partition_id, ErrorCode.unknown_topic_or_partition))
                        continue
                    if broker_id not in partition.replicas:
                        log.warning(
                            "AssignReplicasToDirsRequest from broker %d references non assigned partition %s-%d",
                            broker_id, topic.name, partition_id,
                        )  # fmt: skip
                        answered.append((partition_id, ErrorCode.not_leader_or_follower))
                        continue
                    builder = self._builder(
                        image,
                        topic,
                        partition_id,
                        partition,
                        leader_acceptor(image, partition),
                        Election.ONLINE,
                    )
                    builder.target_directories = {broker_id: directory}
                    record = builder.build()
                    if record is not None:
                        result.records.append((record, version))
                    if directory_offline:
                        offline_refs.append((topic, partition_id, partition))
                    answered.append((partition_id, ErrorCode.none))
                answered_topics.append((topic_id, answered))
            result.directories.append((directory, answered_topics))
        if offline_refs:
            result.records += self.generate_leader_and_isr_updates(
                image, iter(offline_refs), broker_to_remove=broker_id
            )
        return result

    # ------------------------------------------------------------ heartbeats and sessions

    def process_broker_heartbeat(
        self, image: MetadataImage, request: HeartbeatRequest, offline_log_dirs: list[uuid.UUID] | None = None
    ) -> HeartbeatResult:
        """QuorumController.processBrokerHeartbeat and ReplicationControlManager.processBrokerHeartbeat."""
        broker_id = request.broker_id
        register_offset = self.cluster.register_broker_record_offset(broker_id)
        if register_offset is None:
            return HeartbeatResult(
                error=BrokerError(
                    ErrorCode.stale_broker_epoch,
                    f"Receive a heartbeat from broker {broker_id} before registration",
                )
            )
        stale = self.cluster.check_broker_epoch(image, broker_id, request.broker_epoch)
        if stale is not None:
            return HeartbeatResult(error=stale)
        heartbeats = self.cluster.heartbeats
        current, following = heartbeats.calculate_next_state(
            request, register_offset, lambda: self.has_leaderships(image, broker_id)
        )
        records: list[RecordAndVersion] = []
        if current is not following:
            if following is BrokerControlState.FENCED or following is BrokerControlState.SHUTDOWN_NOW:
                records += self.handle_broker_fenced(image, broker_id)
            elif following is BrokerControlState.UNFENCED:
                records += self.handle_broker_unfenced(image, broker_id, request.broker_epoch)
            else:
                records += self.handle_broker_in_controlled_shutdown(image, broker_id, request.broker_epoch)
        heartbeats.touch(broker_id, following.fenced, request.current_metadata_offset)
        if image.metadata_version.is_directory_assignment_supported() and offline_log_dirs:
            records += self.handle_directories_offline(
                image, broker_id, request.broker_epoch, offline_log_dirs
            )
        reply = HeartbeatReply(
            is_caught_up=request.current_metadata_offset >= register_offset,
            is_fenced=following.fenced,
            in_controlled_shutdown=following.in_controlled_shutdown,
            should_shut_down=following.should_shut_down,
        )
        return HeartbeatResult(records, reply, in_controlled_shutdown=following.in_controlled_shutdown)

    def process_expired_broker_heartbeat(
        self, image: MetadataImage, request: HeartbeatRequest
    ) -> BrokerError | None:
        """processExpiredBrokerHeartbeat: a heartbeat answered too late still keeps the session alive."""
        stale = self.cluster.check_broker_epoch(image, request.broker_id, request.broker_epoch)
        if stale is not None:
            return stale
        fenced = image.cluster.brokers[request.broker_id].fenced
        self.cluster.heartbeats.touch(request.broker_id, fenced, request.current_metadata_offset)
        return None

    def maybe_fence_one_stale_broker(self, image: MetadataImage) -> list[RecordAndVersion]:
        """maybeFenceOneStaleBroker: fence the one broker whose session expired first (never in PRE_MIGRATION).

        Kafka fences one broker per event so that each fencing is visible before the next; call again
        until nothing comes back.
        """
        if image.features.zk_migration_state == ZkMigrationState.PRE_MIGRATION:
            return []
        heartbeats = self.cluster.heartbeats
        broker_id = heartbeats.find_one_stale_broker()
        if broker_id is None:
            return []
        log.info("Fencing broker %d because its session has timed out.", broker_id)
        records = self.handle_broker_fenced(image, broker_id)
        heartbeats.fence(broker_id)
        return records
