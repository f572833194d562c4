"""Typed model of what Kafka keeps in ZooKeeper (shared/reference/zk-layout.md), one dataclass per znode kind.

Names that Kafka stores sanitised (users, client ids, ips in config paths) are kept as the znode names;
`desanitize` turns them back into the entity names. `zk_version` fields hold the znode's data version
where Kafka gives it meaning (partition epoch, fencing tokens, conditional updates).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import IntEnum

from migrate.zk.paths import DEFAULT_ENTITY, desanitize


def pascal_case(enum_name: str) -> str:
    """Kafka's `SecurityUtils.toPascalCase`: `CLUSTER_ACTION` → `ClusterAction`."""
    return "".join(part[:1].upper() + part[1:].lower() for part in enum_name.split("_"))


class ResourceType(IntEnum):
    """org.apache.kafka.common.resource.ResourceType (codes as in KRaft records)."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7

    @property
    def pascal_name(self) -> str:
        """The name used in ACL paths, e.g. `TransactionalId`."""
        return pascal_case(self.name)


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class FeatureStatus(IntEnum):
    DISABLED = 0
    ENABLED = 1


class LeaderRecoveryState(IntEnum):
    RECOVERED = 0
    RECOVERING = 1


SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def normalised_listener_name(name: str) -> str:
    """Kafka's ListenerName.normalised: listener names are compared upper-cased (Locale.ROOT)."""
    return name.upper()


def listener_name_problem(name: str) -> str | None:
    """Why `name` cannot be a Kafka listener name, else None: a name is what precedes `://` in an entry of
    `listeners` (a comma-separated list, spaces trimmed) and a key of `listener.security.protocol.map`
    (NAME:PROTOCOL), so it is not empty and holds no space, control character, comma, colon or slash."""
    if not name:
        return "is empty"
    for char in name:
        if char.isspace() or not char.isprintable():
            return f"holds the character {char!r} (no spaces or control characters)"
        if char in ",:/":
            return f"holds {char!r}, which Kafka's listeners and listener.security.protocol.map cannot carry in a name"
    return None


# ------------------------------------------------------------------ controller and brokers


@dataclass(slots=True)
class ControllerRegistration:
    """`/controller`; `kraft_controller_epoch` is None in version 1 (absent), -1 for a ZK controller."""

    broker_id: int
    timestamp: int | None = None
    kraft_controller_epoch: int | None = -1
    version: int = 2
    zk_version: int = 0
    ephemeral_owner: int = 0

    @property
    def is_kraft_controller(self) -> bool:
        """Kafka's test for "a KRaft controller owns the cluster" (`kraftControllerEpoch > 0`)."""
        return self.kraft_controller_epoch is not None and self.kraft_controller_epoch > 0


@dataclass(slots=True)
class ControllerEpoch:
    """`/controller_epoch`: the epoch, and the znode version every controller write is fenced on."""

    epoch: int
    zk_version: int = 0


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    """One advertised listener: upper-case listener name, host (None when empty), port, security protocol."""

    listener: str
    host: str | None
    port: int
    security_protocol: str

    @property
    def connection_string(self) -> str:
        """Kafka's `EndPoint.connectionString` (IPv6 hosts in brackets)."""
        if self.host is None:
            return f"{self.listener}://:{self.port}"
        if ":" in self.host:
            return f"{self.listener}://[{self.host}]:{self.port}"
        return f"{self.listener}://{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class FeatureRange:
    min_version: int
    max_version: int


@dataclass(slots=True)
class BrokerRegistration:
    """`/brokers/ids/<id>`; `czxid` (the znode's creation zxid) is the ZK-mode broker epoch."""

    broker_id: int
    endpoints: list[BrokerEndpoint]
    jmx_port: int = -1
    timestamp: int | None = None
    rack: str | None = None
    features: dict[str, FeatureRange] = field(default_factory=dict)
    version: int = 5
    czxid: int = 0
    zk_version: int = 0
    ephemeral_owner: int = 0

    @property
    def broker_epoch(self) -> int:
        return self.czxid

    @property
    def plaintext_endpoint(self) -> BrokerEndpoint | None:
        """The first PLAINTEXT endpoint: the legacy top-level `host`/`port`."""
        return next((e for e in self.endpoints if e.security_protocol == "PLAINTEXT"), None)


# ------------------------------------------------------------------ topics


@dataclass(slots=True)
class PartitionState:
    """`.../partitions/<p>/state`; `zk_version` is the znode version, i.e. the KRaft partition epoch."""

    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int
    leader_recovery_state: int = 0
    zk_version: int = 0

    @property
    def partition_epoch(self) -> int:
        return self.zk_version


@dataclass(slots=True)
class Topic:
    """`/brokers/topics/<name>` (replica assignment) plus the partition states below it."""

    name: str
    topic_id: uuid.UUID | None
    partitions: dict[int, list[int]]
    adding_replicas: dict[int, list[int]] = field(default_factory=dict)
    removing_replicas: dict[int, list[int]] = field(default_factory=dict)
    version: int = 3
    states: dict[int, PartitionState] = field(default_factory=dict)


# ------------------------------------------------------------------ configs, quotas, SCRAM


@dataclass(slots=True)
class EntityConfig:
    """A plain config map: `/config/topics/<topic>` or `/config/brokers/<id or <default>>`."""

    entity_type: str
    name: str
    config: dict[str, str]

    @property
    def is_default(self) -> bool:
        return self.name == DEFAULT_ENTITY


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """One SCRAM credential as stored under the mechanism name in `/config/users/<user>`."""

    mechanism: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


@dataclass(slots=True)
class ClientQuotaConfig:
    """Quotas (and, for users, SCRAM credentials) of one client-quota entity.

    `entity_path` is Kafka's sanitised entity path: `users/<u>`, `clients/<c>`, `ips/<ip>` or
    `users/<u>/clients/<c>`. `quota_text` keeps the stored text of values Kafka would print differently
    (e.g. `"50"` for a DOUBLE quota) and `key_order` the order the znode listed quotas and credentials in,
    so re-encoding reproduces the original bytes; `key_order` does not take part in `==`.
    """

    entity_path: str
    quotas: dict[str, float] = field(default_factory=dict)
    scram: dict[str, ScramCredential] = field(default_factory=dict)
    quota_text: dict[str, str] = field(default_factory=dict)
    key_order: list[str] = field(default_factory=list, compare=False)

    @property
    def entity(self) -> dict[str, str | None]:
        """Kafka's ClientQuotaEntity: `user` / `client-id` / `ip` → desanitised name, None for the default."""
        parts = self.entity_path.split("/")
        keys = {"users": "user", "clients": "client-id", "ips": "ip"}
        out: dict[str, str | None] = {}
        for i in range(0, len(parts) - 1, 2):
            name = parts[i + 1]
            out[keys.get(parts[i], parts[i])] = None if name == DEFAULT_ENTITY else desanitize(name)
        return out


# ------------------------------------------------------------------ notifications and admin requests


@dataclass(frozen=True, slots=True)
class TopicPartition:
    topic: str
    partition: int


@dataclass(slots=True)
class ConfigChangeNotification:
    """`/config/changes/config_change_<n>`: version 2 `entity_path`, or version 1 `<type>/<name>`."""

    entity_path: str
    version: int = 2


@dataclass(slots=True)
class ReplicaReassignment:
    topic: str
    partition: int
    replicas: list[int]


@dataclass(slots=True)
class LegacyReassignment:
    """`/admin/reassign_partitions` (deprecated tool request)."""

    partitions: list[ReplicaReassignment]
    version: int = 1


@dataclass(slots=True)
class PartitionList:
    """`/admin/preferred_replica_election` and `/isr_change_notification/isr_change_<n>`."""

    partitions: list[TopicPartition]
    version: int = 1


@dataclass(slots=True)
class LogDirEvent:
    """`/log_dir_event_notification/log_dir_event_<n>` (event 1 = log-dir failure)."""

    broker_id: int
    event: int = 1
    version: int = 1


# ------------------------------------------------------------------ cluster-wide singletons


@dataclass(slots=True)
class ProducerIdBlock:
    """`/latest_producer_id_block`: inclusive bounds of the last allocated block."""

    broker_id: int
    block_start: int
    block_end: int
    version: int = 1

    @property
    def next_producer_id(self) -> int:
        return self.block_end + 1


@dataclass(slots=True)
class FinalizedFeatures:
    """`/feature`: finalized feature max levels; `min_levels` only for version 1 when they differ from max."""

    status: FeatureStatus
    features: dict[str, int] = field(default_factory=dict)
    version: int = 2
    min_levels: dict[str, int] = field(default_factory=dict)
    zk_version: int = 0


@dataclass(slots=True)
class MigrationState:
    """`/migration` (ZkMigrationLeadershipState's stored part); mtime and data version come from the Stat."""

    kraft_controller_id: int = -1
    kraft_controller_epoch: int = -1
    kraft_metadata_offset: int = -1
    kraft_metadata_epoch: int = -1
    version: int = 0
    zk_version: int = 0
    last_updated_ms: int = 0

    @property
    def initial_migration_complete(self) -> bool:
        return self.kraft_metadata_offset > 0


# ------------------------------------------------------------------ ACLs and delegation tokens


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType


@dataclass(frozen=True, slots=True)
class AclEntry:
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType


@dataclass(slots=True)
class AclResource:
    """`/kafka-acl/<Type>/<name>` or `/kafka-acl-extended/prefixed/<Type>/<name>` with its znode version."""

    pattern: ResourcePattern
    acls: list[AclEntry]
    zk_version: int = 0


@dataclass(slots=True)
class AclChangeNotification:
    """`/kafka-acl-changes/...` (text `TYPE:name`) or `/kafka-acl-extended-changes/...` (JSON v1)."""

    pattern: ResourcePattern
    version: int = 1


@dataclass(slots=True)
class DelegationToken:
    """`/delegation_token/tokens/<id>`; principals are kept desanitised (`User:alice`)."""

    token_id: str
    owner: str
    token_requester: str
    renewers: list[str]
    issue_timestamp: int
    max_timestamp: int
    expiry_timestamp: int
    version: int = 3


# ------------------------------------------------------------------ the whole cluster


@dataclass(slots=True)
class ZkClusterModel:
    """Everything Kafka keeps under its chroot; `other_znodes` holds data the model does not interpret."""

    cluster_id: str | None = None
    controller: ControllerRegistration | None = None
    controller_epoch: ControllerEpoch | None = None
    brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    broker_sequence: int = 0
    topics: dict[str, Topic] = field(default_factory=dict)
    topic_configs: dict[str, EntityConfig] = field(default_factory=dict)
    broker_configs: dict[str, EntityConfig] = field(default_factory=dict)
    client_quotas: dict[str, ClientQuotaConfig] = field(default_factory=dict)
    config_changes: dict[str, ConfigChangeNotification] = field(default_factory=dict)
    pending_topic_deletions: set[str] = field(default_factory=set)
    legacy_reassignment: LegacyReassignment | None = None
    preferred_replica_election: PartitionList | None = None
    isr_changes: dict[str, PartitionList] = field(default_factory=dict)
    log_dir_events: dict[str, LogDirEvent] = field(default_factory=dict)
    producer_id_block: ProducerIdBlock | None = None
    features: FinalizedFeatures | None = None
    migration: MigrationState | None = None
    acls: dict[ResourcePattern, AclResource] = field(default_factory=dict)
    acl_changes: dict[str, AclChangeNotification] = field(default_factory=dict)
    extended_acl_changes: dict[str, AclChangeNotification] = field(default_factory=dict)
    delegation_tokens: dict[str, DelegationToken] = field(default_factory=dict)
    token_changes: dict[str, str] = field(default_factory=dict)
    other_znodes: dict[str, bytes | None] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list, compare=False)
    # Znodes a strict read refuses (path -> problem), kept raw by a lenient read so callers can report them.
    malformed: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def partition_count(self) -> int:
        return sum(len(t.partitions) for t in self.topics.values())
