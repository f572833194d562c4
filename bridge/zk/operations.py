"""The ZooKeeper operations a KRaft controller performs in dual-write, as plain data.

`bridge.zk.planner` decides *which* operations a metadata delta or snapshot needs (Kafka's
KRaftMigrationZkWriter); `bridge.zk.migration_client` performs each one with Kafka's exact znodes inside fenced
multi-ops (Kafka's ZkMigrationClient). Keeping them as data lets the planner be tested without ZooKeeper and
lets `--dry-run` print the plan.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from migrate.kraft.image import AclBinding, DelegationToken, PartitionRegistration, ScramCredential
from migrate.zk.model import DelegationToken as ZkDelegationToken
from migrate.zk.model import ProducerIdBlock

# Kafka's op-type strings, used in logs and metrics ({CreateTopic=2, UpdateBrokerConfig=1}).
OP_TYPES = (
    "CreateTopic",
    "UpdateTopic",
    "DeleteTopic",
    "DeletePendingTopicDeletion",
    "UpdatePartition",
    "DeletePartition",
    "UpdateBrokerConfig",
    "DeleteBrokerConfig",
    "UpdateTopicConfig",
    "DeleteTopicConfig",
    "UpdateConfig",
    "DeleteConfig",
    "UpdateClientQuota",
    "UpdateProducerId",
    "UpdateAcl",
    "DeleteAcl",
    "UpdateDelegationToken",
    "DeleteDelegationToken",
)

ZERO_UUID = uuid.UUID(int=0)

# ConfigRecord resource types that dual-write handles (ConfigResource.Type ids).
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4


@dataclass(frozen=True, slots=True)
class ResourcePatternKey:
    """An ACL resource pattern by Kafka's enum codes (resource type, pattern type)."""

    resource_type: int
    name: str
    pattern_type: int


@dataclass(slots=True)
class ZkOperation:
    """Base: `op_type` is one of OP_TYPES; `description` is the log line Kafka would print.

    `unchanged`: ZooKeeper already holds what the operation writes; Kafka's full sync writes it regardless.
    """

    op_type: str
    description: str
    unchanged: bool = field(default=False, kw_only=True)


@dataclass(slots=True)
class CreateTopic(ZkOperation):
    name: str = ""
    topic_id: uuid.UUID = ZERO_UUID
    partitions: dict[int, PartitionRegistration] = field(default_factory=dict)


@dataclass(slots=True)
class UpdateTopic(ZkOperation):
    """Rewrite the topic's assignment znode with all partitions of the new image."""

    name: str = ""
    topic_id: uuid.UUID = ZERO_UUID
    partitions: dict[int, PartitionRegistration] = field(default_factory=dict)


@dataclass(slots=True)
class DeleteTopic(ZkOperation):
    name: str = ""


@dataclass(slots=True)
class ClearPendingTopicDeletions(ZkOperation):
    names: tuple[str, ...] = ()


@dataclass(slots=True)
class CreateTopicPartitions(ZkOperation):
    """topic name → {partition id → registration}; NODEEXISTS accepted."""

    partitions: dict[str, dict[int, PartitionRegistration]] = field(default_factory=dict)


@dataclass(slots=True)
class UpdateTopicPartitions(ZkOperation):
    partitions: dict[str, dict[int, PartitionRegistration]] = field(default_factory=dict)


@dataclass(slots=True)
class DeleteTopicPartitions(ZkOperation):
    partitions: dict[str, tuple[int, ...]] = field(default_factory=dict)


@dataclass(slots=True)
class WriteConfigs(ZkOperation):
    """Full config map of one BROKER (name "" = `<default>`) or TOPIC resource."""

    resource_type: int = TOPIC_RESOURCE
    resource_name: str = ""
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class DeleteConfigs(ZkOperation):
    resource_type: int = TOPIC_RESOURCE
    resource_name: str = ""


@dataclass(slots=True)
class WriteClientQuotas(ZkOperation):
    """One quota entity's full quotas plus (user entities only) all its SCRAM credentials by mechanism id."""

    entity: tuple[tuple[str, str | None], ...] = ()
    quotas: dict[str, float] = field(default_factory=dict)
    scram: dict[int, ScramCredential] = field(default_factory=dict)


PRODUCER_ID_BLOCK_SIZE = 1000
"""ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE: the block Kafka's dual-write records after the next id."""


@dataclass(slots=True)
class WriteProducerId(ZkOperation):
    next_producer_id: int = 0

    def block(self) -> ProducerIdBlock:
        """What ZkMigrationClient.writeProducerId stores: the block that starts at the next id."""
        return ProducerIdBlock(-1, self.next_producer_id, self.next_producer_id + PRODUCER_ID_BLOCK_SIZE - 1)


@dataclass(slots=True)
class WriteResourceAcls(ZkOperation):
    pattern: ResourcePatternKey = field(default_factory=lambda: ResourcePatternKey(0, "", 0))
    acls: tuple[AclBinding, ...] = ()


@dataclass(slots=True)
class DeleteResourceAcls(ZkOperation):
    pattern: ResourcePatternKey = field(default_factory=lambda: ResourcePatternKey(0, "", 0))


@dataclass(slots=True)
class WriteDelegationToken(ZkOperation):
    token: DelegationToken | None = None

    def zk_token(self) -> ZkDelegationToken | None:
        """The token as its znode holds it (DelegationTokenInfoZNode, version 3); None without a token."""
        token = self.token
        if token is None:
            return None
        return ZkDelegationToken(
            token_id=token.token_id,
            owner=token.owner,
            token_requester=token.requester,
            renewers=list(token.renewers),
            issue_timestamp=token.issue_timestamp,
            max_timestamp=token.max_timestamp,
            expiry_timestamp=token.expiration_timestamp,
            version=3,
        )


@dataclass(slots=True)
class DeleteDelegationToken(ZkOperation):
    token_id: str = ""
