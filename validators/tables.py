"""The normalized tables both sides of an audit become, and pure functions that build their rows.

Every compared table has key columns and field columns (`TableSpec`); a row is a plain tuple in schema order.
ZooKeeper rows come from the typed model objects of `migrate.zk.model` (one znode's worth at a time, so they
can be built inside Spark tasks); KRaft rows come from the state folded out of metadata records
(`validators.kraft_state`). Values are normalized so equal state compares equal: topic ids in Kafka's text
form, enums by name, SCRAM secrets and sensitive config values replaced by short digests.

Inside the Spark tasks all row kinds travel in one "wide" row (`wide`): the kind, the KRaft offset of the
last record that touched the row, a deleted flag, an error message, and one slot per kind, of which exactly
one is set. The tasks write each kind's rows to Parquet files of their own (`validators.columnar`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from migrate.zk import paths
from migrate.zk.model import (
    AclOperation,
    AclPermissionType,
    AclResource,
    BrokerRegistration,
    ClientQuotaConfig,
    DelegationToken,
    EntityConfig,
    FeatureStatus,
    FinalizedFeatures,
    MigrationState,
    PartitionState,
    PatternType,
    ProducerIdBlock,
    ResourceType,
    Topic,
    ZkClusterModel,
)
from migrate.zk.znodes.topics import format_uuid

Row = tuple[Any, ...]

_INT = IntegerType()
_LONG = LongType()
_STR = StringType()
_DOUBLE = DoubleType()
_INTS = ArrayType(IntegerType())
_STRS = ArrayType(StringType())

# ---------------------------------------------------------------------------------------------- names

SECURITY_PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}
"""org.apache.kafka.common.security.auth.SecurityProtocol ids as KRaft records store them."""
CONFIG_RESOURCE_TYPES = {2: "topic", 4: "broker", 8: "broker_logger", 16: "client_metrics", 32: "group"}
"""ConfigResource.Type ids; ZooKeeper mode only stores `topic` and `broker`."""
ZK_CONFIG_RESOURCE_TYPES = ("topic", "broker")
SCRAM_MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
PRODUCER_IDS_SCOPE = "cluster"
"""The single key of the producer_ids table."""
CLUSTER_SCOPE = "cluster"
"""The single key of the cluster table (the cluster id)."""

_SENSITIVE_MARKERS = ("password", "secret", "jaas.config", "keystore.key", "credentials")


def config_resource_type(type_id: int) -> str:
    return CONFIG_RESOURCE_TYPES.get(type_id, f"type-{type_id}")


def enum_name(enum: type, value: int) -> str:
    """An enum member's name, or the number when the code is unknown."""
    try:
        return str(enum(value).name)
    except ValueError:
        return str(value)


def endpoint_text(listener: str, protocol: str, host: str | None, port: int) -> str:
    """`LISTENER:PROTOCOL://host:port`, the same for ZooKeeper's and KRaft's endpoint forms."""
    return f"{listener}:{protocol}://{host or ''}:{port}"


def quota_entity_text(pairs: Sequence[tuple[str, str | None]]) -> str:
    """A client-quota entity as sorted JSON (`{"client-id":null,"user":"alice"}`; null = the default)."""
    return json.dumps(dict(sorted(pairs)), separators=(",", ":"), ensure_ascii=False)


def is_sensitive_config(name: str) -> bool:
    """Config keys whose values are secrets (or encrypted secrets): compared by digest, never printed."""
    lowered = name.lower()
    return any(marker in lowered for marker in _SENSITIVE_MARKERS)


def secret_digest(*parts: bytes) -> str:
    """A short SHA-256 digest of length-prefixed parts (equal inputs, equal digests; reveals nothing)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(4, "big"))
        h.update(part)
    return "sha256:" + h.hexdigest()[:16]


def sql_string(text: str) -> str:
    """`text` as a Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def config_value(name: str, value: str | None) -> str | None:
    """The comparable form of a config value: sensitive values become digests."""
    if value is None or not is_sensitive_config(name):
        return value
    return secret_digest(value.encode("utf-8"))


# ---------------------------------------------------------------------------------------------- specs


def _struct(columns: Sequence[tuple[str, DataType]]) -> StructType:
    return StructType([StructField(name, kind, True) for name, kind in columns])


@dataclass(frozen=True, slots=True)
class TableSpec:
    """A compared table: key columns identify a row, field columns are compared one by one."""

    name: str
    keys: tuple[tuple[str, DataType], ...]
    fields: tuple[tuple[str, DataType], ...]

    @property
    def key_names(self) -> list[str]:
        return [name for name, _ in self.keys]

    @property
    def field_names(self) -> list[str]:
        return [name for name, _ in self.fields]

    @property
    def schema(self) -> StructType:
        return _struct([*self.keys, *self.fields])


_PARTITION_FIELDS: tuple[tuple[str, DataType], ...] = (
    ("replicas", _INTS),
    ("isr", _INTS),
    ("leader", _INT),
    ("leader_epoch", _INT),
    ("partition_epoch", _INT),
    ("leader_recovery_state", _INT),
    ("adding_replicas", _INTS),
    ("removing_replicas", _INTS),
)
_ACL_BINDING: tuple[tuple[str, DataType], ...] = (
    ("resource_type", _STR),
    ("resource_name", _STR),
    ("pattern_type", _STR),
    ("principal", _STR),
    ("host", _STR),
    ("operation", _STR),
    ("permission_type", _STR),
)

TABLES: dict[str, TableSpec] = {
    spec.name: spec
    for spec in (
        TableSpec("brokers", (("broker_id", _INT),), (("endpoints", _STRS), ("rack", _STR))),
        TableSpec("topics", (("topic", _STR),), (("topic_id", _STR),)),
        TableSpec("partitions", (("topic", _STR), ("partition", _INT)), _PARTITION_FIELDS),
        TableSpec(
            "configs",
            (("resource_type", _STR), ("resource_name", _STR), ("name", _STR)),
            (("value", _STR),),
        ),
        TableSpec("client_quotas", (("entity", _STR), ("key", _STR)), (("value", _DOUBLE),)),
        TableSpec(
            "scram",
            (("user", _STR), ("mechanism", _STR)),
            (("iterations", _INT), ("credential_digest", _STR)),
        ),
        TableSpec("acls", _ACL_BINDING, (("count", _INT),)),
        TableSpec(
            "delegation_tokens",
            (("token_id", _STR),),
            (
                ("owner", _STR),
                ("requester", _STR),
                ("renewers", _STRS),
                ("issue_timestamp", _LONG),
                ("max_timestamp", _LONG),
                ("expiration_timestamp", _LONG),
            ),
        ),
        TableSpec("producer_ids", (("scope", _STR),), (("next_producer_id", _LONG),)),
        TableSpec("features", (("name", _STR),), (("level", _INT),)),
        TableSpec("cluster", (("scope", _STR),), (("cluster_id", _STR),)),
    )
}
"""The compared tables, in report order."""

# Row kinds that only exist on the way to a compared table.
INTERNAL_KINDS: dict[str, StructType] = {
    # ZooKeeper: a partition's assignment (topic znode) and its state (state znode) are separate znodes.
    "zk_assignments": _struct(
        [("topic", _STR), ("partition", _INT), ("replicas", _INTS), ("adding_replicas", _INTS), ("removing_replicas", _INTS)]
    ),
    "zk_states": _struct(
        [
            ("topic", _STR),
            ("partition", _INT),
            ("isr", _INTS),
            ("leader", _INT),
            ("leader_epoch", _INT),
            ("partition_epoch", _INT),
            ("leader_recovery_state", _INT),
        ]
    ),
    "zk_pending_deletions": _struct([("topic", _STR)]),
    "zk_migration": _struct(
        [
            ("kraft_metadata_offset", _LONG),
            ("kraft_metadata_epoch", _INT),
            ("kraft_controller_id", _INT),
            ("kraft_controller_epoch", _INT),
        ]
    ),
    # KRaft: partitions and ACLs are keyed by ids until joined with topics / grouped by binding.
    "kraft_partitions": _struct([("topic_id", _STR), ("partition", _INT), *_PARTITION_FIELDS]),
    "kraft_acls": _struct([("acl_id", _STR), *_ACL_BINDING]),
}

KINDS: dict[str, StructType] = {**{name: spec.schema for name, spec in TABLES.items()}, **INTERNAL_KINDS}
WIDE_PREFIX = ("kind", "offset", "deleted", "error")
KIND_INDEX = {kind: len(WIDE_PREFIX) + i for i, kind in enumerate(KINDS)}
_WIDTH = len(WIDE_PREFIX) + len(KINDS)
ERROR_KIND = "_error"


def wide(kind: str, row: Row, offset: int | None = None, deleted: bool = False) -> Row:
    """One wide row carrying `row` in the column of `kind`."""
    out: list[Any] = [None] * _WIDTH
    out[0], out[1], out[2] = kind, offset, deleted
    out[KIND_INDEX[kind]] = row
    return tuple(out)


def wide_error(message: str) -> Row:
    """A wide row that reports bad input found inside a task (the driver raises it)."""
    out: list[Any] = [None] * _WIDTH
    out[0], out[3] = ERROR_KIND, message
    return tuple(out)


# ---------------------------------------------------------------------------------------------- ZooKeeper


def zk_broker_row(b: BrokerRegistration) -> Row:
    endpoints = sorted(endpoint_text(e.listener, e.security_protocol, e.host, e.port) for e in b.endpoints)
    return (b.broker_id, endpoints, b.rack)


def zk_topic_row(t: Topic) -> Row:
    return (t.name, None if t.topic_id is None else format_uuid(t.topic_id))


def zk_assignment_rows(t: Topic) -> Iterator[Row]:
    adding, removing = t.adding_replicas, t.removing_replicas
    for partition, replicas in t.partitions.items():
        yield (t.name, partition, list(replicas), adding.get(partition, []), removing.get(partition, []))


def zk_state_row(topic: str, partition: int, s: PartitionState) -> Row:
    return (topic, partition, list(s.isr), s.leader, s.leader_epoch, s.zk_version, s.leader_recovery_state)


def zk_config_rows(c: EntityConfig) -> Iterator[Row]:
    """`/config/topics/<t>` and `/config/brokers/<id>` (`<default>` is KRaft's empty resource name)."""
    if c.entity_type == paths.CONFIG_TOPICS:
        resource_type, resource_name = "topic", c.name
    else:
        resource_type, resource_name = "broker", "" if c.is_default else c.name
    for key, value in c.config.items():
        yield (resource_type, resource_name, key, config_value(key, value))


def zk_quota_rows(c: ClientQuotaConfig) -> Iterator[Row]:
    entity = quota_entity_text(list(c.entity.items()))
    for key, value in c.quotas.items():
        yield (entity, key, float(value))


def zk_scram_rows(c: ClientQuotaConfig) -> Iterator[Row]:
    if not c.scram:
        return
    user = c.entity.get("user")
    for mechanism, cred in c.scram.items():
        yield (user, mechanism, cred.iterations, secret_digest(cred.salt, cred.stored_key, cred.server_key))


def acl_binding(
    resource_type: int, resource_name: str, pattern_type: int, principal: str, host: str, operation: int, permission: int
) -> Row:
    return (
        enum_name(ResourceType, resource_type),
        resource_name,
        enum_name(PatternType, pattern_type),
        principal,
        host,
        enum_name(AclOperation, operation),
        enum_name(AclPermissionType, permission),
    )


def zk_acl_rows(r: AclResource) -> Iterator[Row]:
    """One row per ACL entry with count 1 (the table sums duplicates)."""
    p = r.pattern
    for ace in r.acls:
        binding = acl_binding(
            int(p.resource_type), p.name, int(p.pattern_type), ace.principal, ace.host, int(ace.operation), int(ace.permission_type)
        )
        yield (*binding, 1)


def zk_token_row(t: DelegationToken) -> Row:
    return (t.token_id, t.owner, t.token_requester, list(t.renewers), t.issue_timestamp, t.max_timestamp, t.expiry_timestamp)


def zk_producer_ids_row(b: ProducerIdBlock) -> Row:
    return (PRODUCER_IDS_SCOPE, b.next_producer_id)


def zk_feature_rows(f: FinalizedFeatures) -> Iterator[Row]:
    """Finalized max levels; a disabled `/feature` finalizes nothing."""
    if f.status != FeatureStatus.ENABLED:
        return
    yield from f.features.items()


def zk_cluster_row(cluster_id: str) -> Row:
    """`/cluster/id`; KRaft's side is meta.properties' cluster.id."""
    return (CLUSTER_SCOPE, cluster_id)


def zk_migration_row(m: MigrationState) -> Row:
    return (m.kraft_metadata_offset, m.kraft_metadata_epoch, m.kraft_controller_id, m.kraft_controller_epoch)


def zk_model_rows(model: ZkClusterModel) -> Iterator[tuple[str, Row]]:
    """(kind, row) for a whole model: what the per-znode tasks produce, in one place (tests, small inputs)."""
    for broker in model.brokers.values():
        yield "brokers", zk_broker_row(broker)
    for topic in model.topics.values():
        yield "topics", zk_topic_row(topic)
        for row in zk_assignment_rows(topic):
            yield "zk_assignments", row
        for partition, state in topic.states.items():
            yield "zk_states", zk_state_row(topic.name, partition, state)
    for name in model.pending_topic_deletions:
        yield "zk_pending_deletions", (name,)
    for config in (*model.topic_configs.values(), *model.broker_configs.values()):
        for row in zk_config_rows(config):
            yield "configs", row
    for quotas in model.client_quotas.values():
        for row in zk_quota_rows(quotas):
            yield "client_quotas", row
        for row in zk_scram_rows(quotas):
            yield "scram", row
    for resource in model.acls.values():
        for row in zk_acl_rows(resource):
            yield "acls", row
    for token in model.delegation_tokens.values():
        yield "delegation_tokens", zk_token_row(token)
    if model.producer_id_block is not None:
        yield "producer_ids", zk_producer_ids_row(model.producer_id_block)
    if model.features is not None:
        for row in zk_feature_rows(model.features):
            yield "features", row
    if model.migration is not None:
        yield "zk_migration", zk_migration_row(model.migration)
    if model.cluster_id is not None:
        yield "cluster", zk_cluster_row(model.cluster_id)
