"""MetadataImage: the cluster state a KRaft metadata log describes, and the records that rebuild it.

The model mirrors Kafka's `org.apache.kafka.image.*Image` classes. Values are treated as immutable:
replay (migrate.kraft.replay) replaces objects instead of mutating them, so images can share them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from migrate.errors import UnsupportedVersionError
from migrate.gcpause import gc_paused
from migrate.kraft import metadata_version as mvs
from migrate.kraft import records as rec
from migrate.kraft.metadata_version import MetadataVersion
from migrate.kraft.migration_state import ZkMigrationState, zk_migration_state_name

MIGRATING_DIRECTORY = uuid.UUID(int=0)
UNASSIGNED_DIRECTORY = uuid.UUID(int=1)
LOST_DIRECTORY = uuid.UUID(int=2)

NO_LEADER = -1
NO_LEADER_CHANGE = -2

RESOURCE_TYPE_TOPIC = 2
RESOURCE_TYPE_BROKER = 4

ConfigResource = tuple[int, str]
"""(ConfigResource type id, resource name); the default broker entity is (4, "")."""

QuotaEntity = tuple[tuple[str, str | None], ...]
"""(entity type, entity name) pairs sorted by type; a None name is the default entity."""


def uuid_sort_key(value: uuid.UUID) -> tuple[int, int]:
    """Kafka's Uuid.compareTo order: most then least significant bits, each as a signed long."""
    msb, lsb = value.int >> 64, value.int & 0xFFFF_FFFF_FFFF_FFFF
    return (msb - (1 << 64) if msb >= 1 << 63 else msb, lsb - (1 << 64) if lsb >= 1 << 63 else lsb)


# ---------------------------------------------------------------------------------------------- model


@dataclass(slots=True)
class Endpoint:
    """One listener of a broker or controller registration."""

    name: str
    host: str
    port: int
    security_protocol: int


@dataclass(slots=True)
class BrokerRegistration:
    """A broker's current registration (Kafka's BrokerRegistration)."""

    broker_id: int
    epoch: int
    incarnation_id: uuid.UUID
    endpoints: list[Endpoint] = field(default_factory=list)
    supported_features: dict[str, tuple[int, int]] = field(default_factory=dict)
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False
    is_migrating_zk_broker: bool = False
    log_dirs: list[uuid.UUID] = field(default_factory=list)
    register_record_offset: int = field(default=-1, compare=False)
    """Log offset of its latest RegisterBrokerRecord (a snapshot's last contained offset when it came from
    one), as ClusterControlManager's registerBrokerRecordOffsets replays it; part of no record."""


@dataclass(slots=True)
class ControllerRegistration:
    """A controller's KIP-919 registration (Kafka's ControllerRegistration)."""

    controller_id: int
    incarnation_id: uuid.UUID
    zk_migration_ready: bool = False
    endpoints: list[Endpoint] = field(default_factory=list)
    supported_features: dict[str, tuple[int, int]] = field(default_factory=dict)


@dataclass(slots=True)
class PartitionRegistration:
    """Full state of one partition (Kafka's PartitionRegistration); directories parallel replicas."""

    replicas: list[int]
    directories: list[uuid.UUID]
    isr: list[int]
    removing_replicas: list[int] = field(default_factory=list)
    adding_replicas: list[int] = field(default_factory=list)
    leader: int = NO_LEADER
    leader_recovery_state: int = 0
    leader_epoch: int = 0
    partition_epoch: int = 0
    elr: list[int] = field(default_factory=list)
    last_known_elr: list[int] = field(default_factory=list)


@dataclass(slots=True)
class TopicImage:
    """A topic and its partitions by partition id."""

    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionRegistration] = field(default_factory=dict)


@dataclass(slots=True)
class AclBinding:
    """One ACL (AccessControlEntryRecord without its id); enum fields keep Kafka's codes."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(slots=True)
class ScramCredential:
    """Stored SCRAM credential of one user for one mechanism (1 SHA-256, 2 SHA-512)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


@dataclass(slots=True)
class DelegationToken:
    """One delegation token's metadata (DelegationTokenRecord)."""

    token_id: str
    owner: str
    requester: str
    renewers: list[str]
    issue_timestamp: int
    max_timestamp: int
    expiration_timestamp: int


@dataclass(slots=True)
class FeaturesImage:
    """metadata.version (feature level), other finalized features, and the ZK migration state."""

    metadata_version: int = mvs.MINIMUM_KRAFT_VERSION.feature_level
    finalized_versions: dict[str, int] = field(default_factory=dict)
    zk_migration_state: int = ZkMigrationState.NONE
    epoch: int = field(default=-1, compare=False)
    """FinalizedFeatures' epoch: the image offset when features (or the migration state) last changed, -1 never."""


@dataclass(slots=True)
class ClusterImage:
    """Registered brokers and controllers by node id."""

    brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    controllers: dict[int, ControllerRegistration] = field(default_factory=dict)


@dataclass(slots=True)
class Provenance:
    """Where the image comes from: the last log record applied (-1 when nothing was)."""

    last_contained_offset: int = -1
    last_contained_epoch: int = -1
    last_contained_log_time_ms: int = -1


@dataclass(slots=True)
class MetadataImage:
    """The whole metadata state, as Kafka's MetadataImage."""

    features: FeaturesImage = field(default_factory=FeaturesImage)
    cluster: ClusterImage = field(default_factory=ClusterImage)
    topics_by_id: dict[uuid.UUID, TopicImage] = field(default_factory=dict)
    topics_by_name: dict[str, TopicImage] = field(default_factory=dict)
    configs: dict[ConfigResource, dict[str, str]] = field(default_factory=dict)
    client_quotas: dict[QuotaEntity, dict[str, float]] = field(default_factory=dict)
    next_producer_id: int = -1
    acls: dict[uuid.UUID, AclBinding] = field(default_factory=dict)
    scram: dict[tuple[str, int], ScramCredential] = field(default_factory=dict)
    delegation_tokens: dict[str, DelegationToken] = field(default_factory=dict)
    provenance: Provenance = field(default_factory=Provenance)

    @property
    def metadata_version(self) -> MetadataVersion:
        return mvs.from_feature_level(self.features.metadata_version)

    def partition_count(self) -> int:
        return sum(len(topic.partitions) for topic in self.topics_by_id.values())

    def is_empty(self) -> bool:
        """True when replay produced nothing (Kafka's MetadataImage.isEmpty, ignoring provenance)."""
        return self == MetadataImage(provenance=self.provenance)

    def records(self, metadata_version: MetadataVersion | int | str | None = None) -> list[tuple[Any, int]]:
        """The (record, version) list that rebuilds this image, in Kafka's snapshot order.

        Raises UnsupportedVersionError when `metadata_version` cannot represent part of the image
        (Kafka's ImageWriterOptions default loss handler throws in the same cases). PartitionRecords
        share their lists with the image: treat the result as read-only.
        """
        target = self.metadata_version if metadata_version is None else mvs.coerce(metadata_version)
        with gc_paused():
            return _ImageWriter(self, target).write()

    def stream_records(self, metadata_version: MetadataVersion | int | str | None = None) -> Iterator[tuple[Any, int]]:
        """`records()` one topic at a time: a snapshot writer never holds a million records at once."""
        target = self.metadata_version if metadata_version is None else mvs.coerce(metadata_version)
        return _ImageWriter(self, target).stream()


# ---------------------------------------------------------------------------------------------- writing


class _ImageWriter:
    """Kafka's MetadataImage.write with ImageWriterOptions(metadataVersion)."""

    def __init__(self, image: MetadataImage, target: MetadataVersion) -> None:
        self.image = image
        self.mv = target
        self.out: list[tuple[Any, int]] = []

    def loss(self, what: str) -> None:
        raise UnsupportedVersionError(
            f"metadata.version {self.mv.name} cannot represent {what}; "
            f"write the snapshot at a higher metadata.version"
        )

    def write(self) -> list[tuple[Any, int]]:
        for step in self._steps():
            step()
        return self.out

    def stream(self) -> Iterator[tuple[Any, int]]:
        """The records of `write`, handed over a topic at a time instead of all in one list."""
        out = self.out
        for step in self._steps():
            if step == self.topics:
                for _topic in self._topic_steps():
                    yield from out
                    out.clear()
            else:
                step()
                yield from out
                out.clear()

    def _steps(self) -> list[Callable[[], None]]:
        return [
            self.features,
            self.cluster,
            self.topics,
            self.configs,
            self.client_quotas,
            self.producer_ids,
            self.acls,
            self.scram,
            self.delegation_tokens,
        ]

    def features(self) -> None:
        features = self.image.features
        others = {k: v for k, v in features.finalized_versions.items() if k != mvs.FEATURE_NAME}
        if self.mv < mvs.MINIMUM_BOOTSTRAP_VERSION:
            if others:
                self.loss("feature flag(s): " + ", ".join(sorted(others)))
        else:
            # metadata.version first: readers decode later records according to it.
            self.out.append(
                (rec.FeatureLevelRecord(name=mvs.FEATURE_NAME, feature_level=self.mv.feature_level), 0)
            )
            # Kafka iterates a HashMap here; sorted by name like kafka-storage's bootstrap file.
            for name in sorted(others):
                self.out.append((rec.FeatureLevelRecord(name=name, feature_level=others[name]), 0))
        if self.mv.is_migration_supported():
            self.out.append((rec.ZkMigrationStateRecord(zk_migration_state=features.zk_migration_state), 0))
        elif features.zk_migration_state != ZkMigrationState.NONE:
            self.loss(f"the ZK Migration state which was {zk_migration_state_name(features.zk_migration_state)}")

    def cluster(self) -> None:
        cluster = self.image.cluster
        # Kafka's HashMap<Integer, ...> iterates small non-negative ids in ascending order.
        for broker_id in sorted(cluster.brokers):
            self.out.append(self.broker_record(cluster.brokers[broker_id]))
        if cluster.controllers:
            if not self.mv.is_controller_registration_supported():
                self.loss("controller registration data")
            for controller_id in sorted(cluster.controllers):
                self.out.append(self.controller_record(cluster.controllers[controller_id]))

    def broker_record(self, broker: BrokerRegistration) -> tuple[Any, int]:
        record = rec.RegisterBrokerRecord(
            broker_id=broker.broker_id,
            incarnation_id=broker.incarnation_id,
            broker_epoch=broker.epoch,
            rack=broker.rack,
            fenced=broker.fenced,
        )
        if broker.in_controlled_shutdown:
            if not self.mv.is_in_controlled_shutdown_state_supported():
                self.loss("the inControlledShutdown state of one or more brokers")
            record.in_controlled_shutdown = True
        if broker.is_migrating_zk_broker:
            if not self.mv.is_migration_supported():
                self.loss("the isMigratingZkBroker state of one or more brokers")
            record.is_migrating_zk_broker = True
        if broker.log_dirs:
            if not self.mv.is_directory_assignment_supported():
                self.loss("the online log directories of one or more brokers")
            record.log_dirs = list(broker.log_dirs)
        record.end_points = [
            rec.RegisterBrokerRecord.BrokerEndpoint(
                name=e.name, host=e.host, port=e.port, security_protocol=e.security_protocol
            )
            for e in broker.endpoints
        ]
        record.features = [
            rec.RegisterBrokerRecord.BrokerFeature(
                name=name, min_supported_version=lo, max_supported_version=hi
            )
            for name, (lo, hi) in broker.supported_features.items()
        ]
        return record, self.mv.register_broker_record_version()

    def controller_record(self, controller: ControllerRegistration) -> tuple[Any, int]:
        record = rec.RegisterControllerRecord(
            controller_id=controller.controller_id,
            incarnation_id=controller.incarnation_id,
            zk_migration_ready=controller.zk_migration_ready,
            end_points=[
                rec.RegisterControllerRecord.ControllerEndpoint(
                    name=e.name, host=e.host, port=e.port, security_protocol=e.security_protocol
                )
                for e in controller.endpoints
            ],
            features=[
                rec.RegisterControllerRecord.ControllerFeature(
                    name=name, min_supported_version=lo, max_supported_version=hi
                )
                for name, (lo, hi) in controller.supported_features.items()
            ],
        )
        return record, self.mv.register_controller_record_version()

    def topics(self) -> None:
        for _topic in self._topic_steps():
            pass

    def _topic_steps(self) -> Iterator[None]:
        """Append each topic's records in turn, pausing after each topic."""
        version = self.mv.partition_record_version()
        with_dirs = self.mv.is_directory_assignment_supported()
        with_elr = self.mv.is_elr_supported()
        out = self.out
        partition_record = rec.PartitionRecord
        # Kafka iterates an immutable hash map keyed by topic id; we use topic-name order.
        for topic in sorted(self.image.topics_by_id.values(), key=_topic_name):
            topic_id = topic.topic_id
            out.append((rec.TopicRecord(name=topic.name, topic_id=topic_id), 0))
            partitions = topic.partitions
            for partition_id in sorted(partitions):
                p = partitions[partition_id]
                record = partition_record(
                    partition_id,
                    topic_id,
                    p.replicas,
                    p.isr,
                    p.removing_replicas,
                    p.adding_replicas,
                    p.leader,
                    p.leader_recovery_state,
                    p.leader_epoch,
                    p.partition_epoch,
                )
                if with_elr:
                    if p.elr:
                        record.eligible_leader_replicas = p.elr
                    if p.last_known_elr:
                        record.last_known_elr = p.last_known_elr
                if with_dirs:
                    record.directories = p.directories
                elif p.directories.count(MIGRATING_DIRECTORY) != len(p.directories):
                    self.loss("the directory assignment state of one or more replicas")
                out.append((record, version))
            yield

    def configs(self) -> None:
        # Kafka iterates HashMaps (resources, then keys); we sort both for a stable snapshot.
        for resource_type, resource_name in sorted(self.image.configs):
            values = self.image.configs[(resource_type, resource_name)]
            for key in sorted(values):
                record = rec.ConfigRecord(
                    resource_type=resource_type, resource_name=resource_name, name=key, value=values[key]
                )
                self.out.append((record, 0))

    def client_quotas(self) -> None:
        # Entities and keys sorted. Within an entity, types sorted by name happens to be the order
        # Kafka's HashMap yields for the three types ("client-id" before "user"; "ip" stands alone).
        for entity in sorted(self.image.client_quotas, key=_quota_entity_sort_key):
            quotas = self.image.client_quotas[entity]
            for key in sorted(quotas):
                record = rec.ClientQuotaRecord(
                    entity=[
                        rec.ClientQuotaRecord.EntityData(entity_type=t, entity_name=n) for t, n in entity
                    ],
                    key=key,
                    value=quotas[key],
                    remove=False,
                )
                self.out.append((record, 0))

    def producer_ids(self) -> None:
        if self.image.next_producer_id >= 0:
            record = rec.ProducerIdsRecord(
                broker_id=-1, broker_epoch=-1, next_producer_id=self.image.next_producer_id
            )
            self.out.append((record, 0))

    def acls(self) -> None:
        # HashMap keyed by ACL id in Kafka; we use Kafka's Uuid order.
        for acl_id in sorted(self.image.acls, key=uuid_sort_key):
            acl = self.image.acls[acl_id]
            record = rec.AccessControlEntryRecord(
                id=acl_id,
                resource_type=acl.resource_type,
                resource_name=acl.resource_name,
                pattern_type=acl.pattern_type,
                principal=acl.principal,
                host=acl.host,
                operation=acl.operation,
                permission_type=acl.permission_type,
            )
            self.out.append((record, 0))

    def scram(self) -> None:
        if not self.image.scram:
            return
        if not self.mv.is_scram_supported():
            self.loss("SCRAM credentials")
        # Kafka: HashMap by mechanism, then by user; we sort by mechanism id, then user name.
        for name, mechanism in sorted(self.image.scram, key=lambda k: (k[1], k[0])):
            cred = self.image.scram[(name, mechanism)]
            record = rec.UserScramCredentialRecord(
                name=name,
                mechanism=mechanism,
                salt=cred.salt,
                stored_key=cred.stored_key,
                server_key=cred.server_key,
                iterations=cred.iterations,
            )
            self.out.append((record, 0))

    def delegation_tokens(self) -> None:
        tokens = self.image.delegation_tokens
        if not tokens:
            return
        if not self.mv.is_delegation_token_supported():
            self.loss("delegation tokens " + ", ".join(sorted(tokens)))
        for token_id in sorted(tokens):
            token = tokens[token_id]
            record = rec.DelegationTokenRecord(
                owner=token.owner,
                requester=token.requester,
                renewers=list(token.renewers),
                issue_timestamp=token.issue_timestamp,
                max_timestamp=token.max_timestamp,
                expiration_timestamp=token.expiration_timestamp,
                token_id=token.token_id,
            )
            self.out.append((record, 0))


def _topic_name(topic: TopicImage) -> str:
    return topic.name


def _quota_entity_sort_key(entity: QuotaEntity) -> tuple[tuple[str, bool, str], ...]:
    return tuple((t, n is not None, n or "") for t, n in entity)
