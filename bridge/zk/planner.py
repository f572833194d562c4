"""Which ZooKeeper operations a KRaft metadata change needs: Kafka 3.9's KRaftMigrationZkWriter as a pure planner.

`plan_delta` is `handleDelta` (dual-write of one metadata delta) and `plan_reconciliation` is
`handleSnapshot` (make ZooKeeper equal to a whole image). Kafka reads a `MetadataDelta`; we compare the
previous and current images instead, which yields the same operations except where a record changed
nothing (e.g. a ConfigRecord re-setting the same value), which Kafka still writes through.

Kafka walks Java hash maps and ZooKeeper child lists, so its order *within* a step is not reproducible; we
use name order there. The order of the steps, and of the kinds of operation inside a step, is Kafka's, even
where it hurts: a snapshot whose topic reuses the name of a ZooKeeper topic with another id plans
CreateTopic (a no-op on NODEEXISTS) before DeleteTopic, which leaves ZooKeeper without the topic. Kafka's
full sync also rewrites every quota entity, SCRAM user and token of the image, changed or not; we plan the
same writes and mark those ZooKeeper already holds `unchanged`, so logs can tell them from real changes.

Deliberate departures, each where Kafka 3.9 fails or cannot be reached (migration-protocol.md §13):
config resources other than BROKER/TOPIC are left out (Kafka's snapshot throws on them, its delta submits a
write the client skips); a non-user quota entity whose last quota went away is written empty (Kafka throws);
an ACL id whose binding moved to another pattern rewrites both patterns (KRaft never does that); a full
sync ignores partition directories, which ZooKeeper cannot hold (Kafka compares them with the MIGRATING ones
it reads, so it rewrites every topic placed on brokers that registered log directories at every full sync).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from bridge.zk.operations import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    ClearPendingTopicDeletions,
    CreateTopic,
    CreateTopicPartitions,
    DeleteConfigs,
    DeleteDelegationToken,
    DeleteResourceAcls,
    DeleteTopic,
    DeleteTopicPartitions,
    ResourcePatternKey,
    UpdateTopic,
    UpdateTopicPartitions,
    WriteClientQuotas,
    WriteConfigs,
    WriteDelegationToken,
    WriteProducerId,
    WriteResourceAcls,
    ZkOperation,
)
from migrate.errors import ZnodeFormatError
from migrate.jvm import java_hash_map_order
from migrate.kraft.image import (
    MIGRATING_DIRECTORY,
    NO_LEADER,
    AclBinding,
    ConfigResource,
    MetadataImage,
    PartitionRegistration,
    QuotaEntity,
    ScramCredential,
    TopicImage,
    uuid_sort_key,
)
from migrate.kraft.wire import uuid_to_text
from migrate.zk import paths
from migrate.zk.model import (
    SCRAM_MECHANISMS,
    ClientQuotaConfig,
    PatternType,
    ResourceType,
    Topic,
    ZkClusterModel,
)
from migrate.zk.model import ScramCredential as ZkScramCredential

USER = "user"
CLIENT_ID = "client-id"
SCRAM_MECHANISM_IDS = {name: i + 1 for i, name in enumerate(SCRAM_MECHANISMS)}
"""ZooKeeper's mechanism key → KRaft's mechanism id (1 SCRAM-SHA-256, 2 SCRAM-SHA-512)."""
_CONFIG_TYPE_NAMES = {TOPIC_RESOURCE: "TOPIC", BROKER_RESOURCE: "BROKER"}
_DUAL_WRITTEN_CONFIGS = frozenset(_CONFIG_TYPE_NAMES)

AceKey = tuple[str, str, int, int]
"""An access control entry as Kafka compares them: principal, host, operation, permission type."""


# ---------------------------------------------------------------------------------------------- summaries


def count_op_types(ops: Iterable[ZkOperation]) -> dict[str, int]:
    """Operations per op type, keys in the order of Kafka's TreeMap (`{CreateTopic=2, UpdateAcl=1}`)."""
    counts: dict[str, int] = {}
    for op in ops:
        counts[op.op_type] = counts.get(op.op_type, 0) + 1
    # All op types are ASCII, so Python's order is Java's String.compareTo order.
    return {key: counts[key] for key in sorted(counts)}


def format_op_counts(counts: dict[str, int]) -> str:
    """Kafka's rendering of the op-type counts, as in "Made the following ZK writes ...: {...}"."""
    return "{" + ", ".join(f"{key}={counts[key]}" for key in sorted(counts)) + "}"


UNCHANGED_REWRITES = (
    "Kafka 3.9's full sync rewrites every client quota entity, SCRAM user and delegation token of the log, "
    "and a dual-written producer-id block, changed or not"
)
"""Why a reconciliation writes what ZooKeeper already holds (KRaftMigrationZkWriter.handleSnapshot)."""


def describe(ops: Iterable[ZkOperation]) -> list[str]:
    """One line per operation for `--dry-run`: op type, Kafka's log message, and whether it is unchanged."""
    marks = {True: " (unchanged in ZooKeeper, rewritten as Kafka does)", False: ""}
    return [f"{op.op_type}: {op.description}{marks[op.unchanged]}" for op in ops]


def summarize(ops: Sequence[ZkOperation], limit: int = 5) -> str:
    """What a log line names: the first `limit` operations that change ZooKeeper, how many more, and how
    many rewrite what ZooKeeper already holds."""
    changing = [op for op in ops if not op.unchanged]
    named = "; ".join(op.description for op in changing[:limit])
    if len(changing) > limit:
        named += f"; and {len(changing) - limit} more"
    unchanged = len(ops) - len(changing)
    if not unchanged:
        return named or "nothing"
    rewrites = f"{unchanged} rewrite{'s' if unchanged > 1 else ''} of what ZooKeeper already holds"
    return f"{named or 'nothing that differs from ZooKeeper'}; {rewrites} ({UNCHANGED_REWRITES})"


# ---------------------------------------------------------------------------------------------- delta


def plan_delta(previous: MetadataImage, current: MetadataImage) -> list[ZkOperation]:
    """The ZooKeeper writes of Kafka's `handleDelta` for the change from `previous` to `current`."""
    ops: list[ZkOperation] = []
    deleted_topic_names = _topics_delta(previous, current, ops)
    _configs_delta(previous, current, deleted_topic_names, ops)
    _client_quotas_delta(previous, current, ops)
    if current.next_producer_id != previous.next_producer_id:
        ops.append(_write_producer_id(current.next_producer_id))
    _acls_delta(previous, current, ops)
    _delegation_tokens_delta(previous, current, ops)
    return ops


def _topics_delta(previous: MetadataImage, current: MetadataImage, ops: list[ZkOperation]) -> set[str]:
    deleted = [t for topic_id, t in previous.topics_by_id.items() if topic_id not in current.topics_by_id]
    for topic in sorted(deleted, key=_topic_name):
        ops.append(
            DeleteTopic(
                "DeleteTopic",
                f"Deleting topic {topic.name}, ID {uuid_to_text(topic.topic_id)}",
                name=topic.name,
            )
        )
    for topic in sorted(current.topics_by_id.values(), key=_topic_name):
        old = previous.topics_by_id.get(topic.topic_id)
        suffix = f"for Topic {topic.name}, ID {uuid_to_text(topic.topic_id)}"
        if old is None:
            ops.append(
                CreateTopic(
                    "CreateTopic",
                    f"Create Topic {topic.name}, ID {uuid_to_text(topic.topic_id)}",
                    name=topic.name,
                    topic_id=topic.topic_id,
                    partitions=_by_partition_id(topic.partitions),
                )
            )
            continue
        new_partitions = {p: reg for p, reg in topic.partitions.items() if p not in old.partitions}
        changed_partitions = {
            p: reg for p, reg in topic.partitions.items() if p in old.partitions and reg != old.partitions[p]
        }
        if new_partitions or any(
            not same_assignment(reg, old.partitions[p]) for p, reg in changed_partitions.items()
        ):
            ops.append(
                UpdateTopic(
                    "UpdateTopic",
                    f"Updating Topic {topic.name}, ID {uuid_to_text(topic.topic_id)}",
                    name=topic.name,
                    topic_id=topic.topic_id,
                    partitions=_by_partition_id(topic.partitions),
                )
            )
        if new_partitions:
            ops.append(
                CreateTopicPartitions(
                    "UpdatePartition",
                    f"Create new partitions {suffix}",
                    partitions={topic.name: _by_partition_id(new_partitions)},
                )
            )
        if changed_partitions:
            ops.append(
                UpdateTopicPartitions(
                    "UpdatePartition",
                    f"Updating Partitions {suffix}",
                    partitions={topic.name: _by_partition_id(changed_partitions)},
                )
            )
    return {t.name for t in deleted}


def _configs_delta(
    previous: MetadataImage, current: MetadataImage, deleted_topic_names: set[str], ops: list[ZkOperation]
) -> None:
    changed = {
        resource
        for resource in previous.configs.keys() | current.configs.keys()
        if previous.configs.get(resource, {}) != current.configs.get(resource, {})
    }
    # Kafka's MetadataDelta marks a deleted topic's config resource as changed even when it had no configs.
    changed.update((TOPIC_RESOURCE, name) for name in deleted_topic_names)
    for resource in sorted(changed):
        resource_type, name = resource
        if resource_type not in _DUAL_WRITTEN_CONFIGS:
            continue  # ZooKeeper has no place for them; Kafka's client logs an error and writes nothing
        props = current.configs.get(resource, {})
        text = _config_resource_text(resource)
        if props:
            ops.append(
                WriteConfigs(
                    "UpdateConfig",
                    f"Update configs for {text}",
                    resource_type=resource_type,
                    resource_name=name,
                    configs=dict(props),
                )
            )
        else:
            ops.append(
                DeleteConfigs(
                    "DeleteConfig",
                    f"Delete configs for {text}",
                    resource_type=resource_type,
                    resource_name=name,
                )
            )


def _client_quotas_delta(previous: MetadataImage, current: MetadataImage, ops: list[ZkOperation]) -> None:
    users: set[str | None] = {
        user
        for user, mechanism in previous.scram.keys() | current.scram.keys()
        if previous.scram.get((user, mechanism)) != current.scram.get((user, mechanism))
    }
    changed_entities = [
        entity
        for entity in previous.client_quotas.keys() | current.client_quotas.keys()
        if previous.client_quotas.get(entity, {}) != current.client_quotas.get(entity, {})
    ]
    for entity in sorted(changed_entities, key=_entity_sort_key):
        if _is_user_only(entity):
            users.add(_user_of(entity))
            continue
        # Kafka dereferences the entity in the new image, which throws once its last quota is gone
        # (migration-protocol.md §13 #3); we write the empty map it evidently meant to write.
        ops.append(
            WriteClientQuotas(
                "UpdateClientQuota",
                f"Updating client quota {_entity_text(entity)}",
                entity=entity,
                quotas=dict(current.client_quotas.get(entity, {})),
            )
        )
    scram = _scram_by_user(current)
    for user in sorted(users, key=_user_sort_key):
        user_entity: QuotaEntity = ((USER, user),)
        quotas = current.client_quotas.get(user_entity)
        what = "scram credentials" if quotas is None else "client quota"
        ops.append(
            WriteClientQuotas(
                "UpdateClientQuota",
                f"Updating {what} for {_entity_text(user_entity)}",
                entity=user_entity,
                quotas=dict(quotas or {}),
                scram=dict(scram.get(user, {})) if user is not None else {},
            )
        )


def _acls_delta(previous: MetadataImage, current: MetadataImage, ops: list[ZkOperation]) -> None:
    patterns: set[ResourcePatternKey] = set()
    for acl_id in previous.acls.keys() | current.acls.keys():
        old, new = previous.acls.get(acl_id), current.acls.get(acl_id)
        if old == new:
            continue
        # Kafka takes added ids under their new pattern and removed ones under their old pattern. An id
        # whose binding changed (which KRaft never does) would leave its old pattern stale there: take both.
        if new is not None:
            patterns.add(pattern_of(new))
        if old is not None and (new is None or pattern_of(old) != pattern_of(new)):
            patterns.add(pattern_of(old))
    grouped = _acls_by_pattern(current, patterns)
    for pattern in sorted(patterns, key=_pattern_sort_key):
        acls = grouped.get(pattern, [])
        if acls:
            ops.append(_write_acls(pattern, acls, len(acls)))
        else:
            ops.append(
                DeleteResourceAcls(
                    "DeleteAcl",
                    f"Deleting resource {_pattern_text(pattern)} which has no more ACLs",
                    pattern=pattern,
                )
            )


def _delegation_tokens_delta(previous: MetadataImage, current: MetadataImage, ops: list[ZkOperation]) -> None:
    old_tokens, new_tokens = previous.delegation_tokens, current.delegation_tokens
    for token_id in sorted(old_tokens.keys() | new_tokens.keys()):
        if old_tokens.get(token_id) == new_tokens.get(token_id):
            continue
        token = new_tokens.get(token_id)
        if token is None:
            ops.append(_delete_token(token_id))
        else:
            ops.append(
                WriteDelegationToken(
                    "UpdateDelegationToken", f"Update DelegationToken for {token_id}", token=token
                )
            )


# ---------------------------------------------------------------------------------------------- snapshot


def plan_reconciliation(image: MetadataImage, zk: ZkClusterModel) -> list[ZkOperation]:
    """The ZooKeeper writes of Kafka's `handleSnapshot`: what makes `zk` hold the metadata of `image`.

    Raises ZnodeFormatError for a ZooKeeper topic without a topic id (Kafka's reader fails there too).
    """
    ops: list[ZkOperation] = []
    _topics_snapshot(image, zk, ops)
    _configs_snapshot(image, zk, ops)
    _client_quotas_snapshot(image, zk, ops)
    if image.next_producer_id != -1:
        block = zk.producer_id_block
        if block is None or block.block_end + 1 != image.next_producer_id:
            op = _write_producer_id(image.next_producer_id)
            # A dual-written block ends 999 past the next id, so Kafka rewrites it at every full sync.
            op.unchanged = block == op.block()
            ops.append(op)
    _acls_snapshot(image, zk, ops)
    _delegation_tokens_snapshot(image, zk, ops)
    return ops


def zk_partition_registration(topic: Topic, partition_id: int) -> PartitionRegistration:
    """The PartitionRegistration Kafka's ZooKeeper reader builds for one partition of a ZooKeeper topic.

    The state znode gives ISR, leader, epochs (its version is the partition epoch); without one, Kafka
    invents ISR = replicas and leader = first replica. Directories are MIGRATING, as for any record
    without directories.
    """
    replicas = list(topic.partitions[partition_id])
    state = topic.states.get(partition_id)
    registration = PartitionRegistration(
        replicas=replicas,
        directories=[MIGRATING_DIRECTORY] * len(replicas),
        isr=list(replicas),
        removing_replicas=list(topic.removing_replicas.get(partition_id, [])),
        adding_replicas=list(topic.adding_replicas.get(partition_id, [])),
        leader=replicas[0] if replicas else NO_LEADER,
    )
    if state is not None:
        registration.isr = list(state.isr)
        registration.leader = state.leader
        registration.leader_epoch = state.leader_epoch
        registration.partition_epoch = state.zk_version
        registration.leader_recovery_state = state.leader_recovery_state
    return registration


@dataclass(slots=True)
class _TopicsWalk:
    """What Kafka's topic visitor collects while walking the ZooKeeper topics."""

    deleted: dict[uuid.UUID, str] = field(default_factory=dict)
    present: list[uuid.UUID] = field(default_factory=list)
    new_topics: set[uuid.UUID] = field(default_factory=set)
    changed_topics: set[uuid.UUID] = field(default_factory=set)
    partitions_in_zk: dict[uuid.UUID, set[int]] = field(default_factory=dict)
    changed_partitions: dict[uuid.UUID, dict[int, PartitionRegistration]] = field(default_factory=dict)
    new_partitions: dict[uuid.UUID, dict[int, PartitionRegistration]] = field(default_factory=dict)
    extraneous: dict[str, set[int]] = field(default_factory=dict)


def _topics_snapshot(image: MetadataImage, zk: ZkClusterModel, ops: list[ZkOperation]) -> None:
    if zk.pending_topic_deletions:
        ops.append(
            ClearPendingTopicDeletions(
                "DeletePendingTopicDeletion",
                "Delete pending topic deletions",
                names=tuple(sorted(zk.pending_topic_deletions)),
            )
        )
    walk = _walk_zk_topics(image, zk)
    by_id = image.topics_by_id

    def suffix(topic_id: uuid.UUID) -> str:
        return f"Topic {by_id[topic_id].name}, ID {uuid_to_text(topic_id)}"

    for topic_id in _ids_by_name(image, walk.new_topics):
        topic = by_id[topic_id]
        ops.append(
            CreateTopic(
                "CreateTopic",
                f"Create {suffix(topic_id)}",
                name=topic.name,
                topic_id=topic_id,
                partitions=_by_partition_id(topic.partitions),
            )
        )
    for topic_id in _ids_by_name(image, walk.changed_topics):
        topic = by_id[topic_id]
        ops.append(
            UpdateTopic(
                "UpdateTopic",
                f"Changed {suffix(topic_id)}",
                name=topic.name,
                topic_id=topic_id,
                partitions=_by_partition_id(topic.partitions),
            )
        )
    for topic_id, name in sorted(walk.deleted.items(), key=lambda item: item[1]):
        id_text = uuid_to_text(topic_id)
        ops.append(DeleteTopic("DeleteTopic", f"Delete Topic {name}, ID {id_text}", name=name))
        # Kafka counts this config deletion under UpdateTopicConfig.
        ops.append(
            DeleteConfigs(
                "UpdateTopicConfig",
                f"Updating Configs for Topic {name}, ID {id_text}",
                resource_type=TOPIC_RESOURCE,
                resource_name=name,
            )
        )
    # Kafka writes KRaft-only partitions with SetData only (migration-protocol.md §13 #4).
    for topic_id in _ids_by_name(image, walk.new_partitions.keys()):
        ops.append(
            UpdateTopicPartitions(
                "UpdatePartition",
                f"Creating additional partitions for {suffix(topic_id)}",
                partitions={by_id[topic_id].name: _by_partition_id(walk.new_partitions[topic_id])},
            )
        )
    for topic_id in _ids_by_name(image, walk.changed_partitions.keys()):
        ops.append(
            UpdateTopicPartitions(
                "UpdatePartition",
                f"Updating Partitions for {suffix(topic_id)}",
                partitions={by_id[topic_id].name: _by_partition_id(walk.changed_partitions[topic_id])},
            )
        )
    for name in sorted(walk.extraneous):
        ids = tuple(sorted(walk.extraneous[name]))
        ops.append(
            DeleteTopicPartitions(
                "DeletePartition",
                f"Deleting extraneous Partitions [{', '.join(map(str, ids))}] for Topic {name}",
                partitions={name: ids},
            )
        )


def _walk_zk_topics(image: MetadataImage, zk: ZkClusterModel) -> _TopicsWalk:
    walk = _TopicsWalk(new_topics=set(image.topics_by_id))
    for name in sorted(zk.topics):
        if name in zk.pending_topic_deletions:
            continue  # Kafka's reader skips topics marked for deletion
        zk_topic = zk.topics[name]
        if zk_topic.topic_id is None:
            raise ZnodeFormatError(
                paths.topic_path(name),
                "has no topic_id; Kafka 3.9 cannot reconcile a topic without a topic id",
            )
        topic = image.topics_by_id.get(zk_topic.topic_id)
        if topic is None:
            walk.deleted[zk_topic.topic_id] = name
            continue
        if zk_topic.topic_id in walk.new_topics:
            walk.new_topics.discard(topic.topic_id)
            walk.present.append(topic.topic_id)
        _visit_partitions(walk, topic, zk_topic)
    for topic_id in walk.present:
        topic = image.topics_by_id[topic_id]
        in_zk = walk.partitions_in_zk.setdefault(topic_id, set())
        if in_zk == topic.partitions.keys():
            continue
        walk.new_partitions[topic_id] = {p: reg for p, reg in topic.partitions.items() if p not in in_zk}
        extra = in_zk - topic.partitions.keys()
        if extra:
            walk.extraneous[topic.name] = extra
        walk.changed_topics.add(topic_id)
    return walk


def _visit_partitions(walk: _TopicsWalk, topic: TopicImage, zk_topic: Topic) -> None:
    for partition_id in sorted(zk_topic.partitions):
        walk.partitions_in_zk.setdefault(topic.topic_id, set()).add(partition_id)
        kraft = topic.partitions.get(partition_id)
        if kraft is None or equals_zk_state(kraft, zk_topic, partition_id):
            continue
        in_zk = zk_partition_registration(zk_topic, partition_id)
        # ZooKeeper holds no directories: the log's are no difference it could ever resolve.
        in_zk.directories = list(kraft.directories)
        if kraft != in_zk:
            walk.changed_partitions.setdefault(topic.topic_id, {})[partition_id] = kraft
        if not same_assignment(kraft, in_zk):
            walk.changed_topics.add(topic.topic_id)


def equals_zk_state(kraft: PartitionRegistration, zk_topic: Topic, partition_id: int) -> bool:
    """`kraft` equals what `zk_partition_registration` would make of a partition with a state znode, checked
    without building it (the bulk of a big cluster's full sync); False may also mean "compare in full"."""
    state = zk_topic.states.get(partition_id)
    return (
        state is not None
        and kraft.leader == state.leader
        and kraft.leader_epoch == state.leader_epoch
        and kraft.partition_epoch == state.zk_version
        and kraft.leader_recovery_state == state.leader_recovery_state
        and kraft.isr == state.isr
        and kraft.replicas == zk_topic.partitions[partition_id]
        and kraft.removing_replicas == zk_topic.removing_replicas.get(partition_id, [])
        and kraft.adding_replicas == zk_topic.adding_replicas.get(partition_id, [])
        and not kraft.elr
        and not kraft.last_known_elr
    )


def _configs_snapshot(image: MetadataImage, zk: ZkClusterModel, ops: list[ZkOperation]) -> None:
    # Kafka throws "Unknown config resource type" for any other type, failing every full sync
    # (migration-protocol.md §13 #2); ZooKeeper cannot hold them, so they are left out instead.
    new_resources = {r for r in image.configs if r[0] in _DUAL_WRITTEN_CONFIGS}
    to_update: set[ConfigResource] = set()
    zk_resources: list[tuple[ConfigResource, dict[str, str]]] = [
        ((BROKER_RESOURCE, "" if name == paths.DEFAULT_ENTITY else name), cfg.config)
        for name, cfg in zk.broker_configs.items()
    ]
    zk_resources += [((TOPIC_RESOURCE, name), cfg.config) for name, cfg in zk.topic_configs.items()]
    for resource, configs in zk_resources:
        new_resources.discard(resource)
        if image.configs.get(resource, {}) != configs:
            to_update.add(resource)
    for resource in sorted(new_resources):
        props = image.configs[resource]
        if props:
            ops.append(_write_configs_snapshot(resource, props, "Create"))
    for resource in sorted(to_update):
        props = image.configs.get(resource, {})
        if props:
            ops.append(_write_configs_snapshot(resource, props, "Update"))
        else:
            kind = "Broker" if resource[0] == BROKER_RESOURCE else "Topic"
            ops.append(
                DeleteConfigs(
                    f"Delete{kind}Config",
                    f"Delete configs for {_CONFIG_TYPE_NAMES[resource[0]]} {resource[1]}",
                    resource_type=resource[0],
                    resource_name=resource[1],
                )
            )


def _write_configs_snapshot(resource: ConfigResource, props: dict[str, str], verb: str) -> WriteConfigs:
    kind = "Broker" if resource[0] == BROKER_RESOURCE else "Topic"
    return WriteConfigs(
        f"Update{kind}Config",
        f"{verb} configs for {_CONFIG_TYPE_NAMES[resource[0]]} {resource[1]}",
        resource_type=resource[0],
        resource_name=resource[1],
        configs=dict(props),
    )


def _client_quotas_snapshot(image: MetadataImage, zk: ZkClusterModel, ops: list[ZkOperation]) -> None:
    # Every image user with quotas or SCRAM and every other image entity is rewritten, changed or not
    # (Kafka adds them all before it reads ZooKeeper); the ones ZooKeeper already holds are marked unchanged.
    changed_entities: set[QuotaEntity] = set()
    users: set[str | None] = {user for user, _mechanism in image.scram}
    for entity in image.client_quotas:
        if _is_user_only(entity):
            users.add(_user_of(entity))
        else:
            changed_entities.add(entity)
    in_zk: dict[QuotaEntity, ClientQuotaConfig] = {}
    for cfg in zk.client_quotas.values():
        entity = tuple(sorted(cfg.entity.items()))
        in_zk[entity] = cfg
        if cfg.quotas and image.client_quotas.get(entity, {}) != cfg.quotas:
            if _is_user_only(entity):
                users.add(_user_of(entity))
            else:
                changed_entities.add(entity)
        if not cfg.scram or len(cfg.entity) != 1:
            continue
        # Kafka reads SCRAM keys of any single-name entity and takes that name as the user's.
        user_name = next(iter(cfg.entity.values()))
        for mechanism, cred in cfg.scram.items():
            kraft = image.scram.get((user_name or "", SCRAM_MECHANISM_IDS[mechanism]))
            if kraft is None or _scram_fields(kraft) != _scram_fields(cred):
                users.add(user_name)
    for entity in sorted(changed_entities, key=_entity_sort_key):
        op = WriteClientQuotas(
            "UpdateClientQuota",
            f"Update client quotas for {_entity_text(entity)}",
            entity=entity,
            quotas=dict(image.client_quotas.get(entity, {})),
        )
        op.unchanged = _zk_holds(in_zk.get(entity), op)
        ops.append(op)
    scram = _scram_by_user(image)
    for user in sorted(users, key=_user_sort_key):
        entity = ((USER, user),)
        op = WriteClientQuotas(
            "UpdateClientQuota",
            f"Update client quotas for {_java_text(user)}",
            entity=entity,
            quotas=dict(image.client_quotas.get(entity, {})),
            scram=dict(scram.get(user, {})) if user is not None else {},
        )
        op.unchanged = _zk_holds(in_zk.get(entity), op)
        ops.append(op)


def _zk_holds(cfg: ClientQuotaConfig | None, op: WriteClientQuotas) -> bool:
    """Whether the entity's znode already holds the quotas and SCRAM credentials `op` writes."""
    if cfg is None or cfg.quotas != op.quotas:
        return False
    held = {SCRAM_MECHANISM_IDS[mechanism]: _scram_fields(cred) for mechanism, cred in cfg.scram.items()}
    return held == {mechanism_id: _scram_fields(cred) for mechanism_id, cred in op.scram.items()}


def _scram_fields(cred: ScramCredential | ZkScramCredential) -> tuple[bytes, bytes, bytes, int]:
    """What Kafka's ScramCredential.equals compares: salt, stored key, server key, iterations."""
    return (cred.salt, cred.stored_key, cred.server_key, cred.iterations)


def _acls_snapshot(image: MetadataImage, zk: ZkClusterModel, ops: list[ZkOperation]) -> None:
    grouped = _acls_by_pattern(image, None)
    in_image = {pattern: {ace_key(acl) for acl in acls} for pattern, acls in grouped.items()}
    new_patterns = set(in_image)
    to_delete: list[ResourcePatternKey] = []
    changed: list[ResourcePatternKey] = []
    for resource in zk.acls.values():
        pattern = ResourcePatternKey(
            int(resource.pattern.resource_type), resource.pattern.name, int(resource.pattern.pattern_type)
        )
        new_patterns.discard(pattern)
        if pattern not in in_image:
            to_delete.append(pattern)
        elif in_image[pattern] != {
            (e.principal, e.host, int(e.operation), int(e.permission_type)) for e in resource.acls
        }:
            changed.append(pattern)
    for pattern in sorted(new_patterns, key=_pattern_sort_key):
        ops.append(_write_acls(pattern, grouped[pattern], len(in_image[pattern])))
    for pattern in sorted(to_delete, key=_pattern_sort_key):
        ops.append(
            DeleteResourceAcls(
                "DeleteAcl",
                f"Deleting resource {_pattern_text(pattern)} which has no ACLs in snapshot",
                pattern=pattern,
            )
        )
    for pattern in sorted(changed, key=_pattern_sort_key):
        ops.append(_write_acls(pattern, grouped[pattern], len(in_image[pattern])))


def _delegation_tokens_snapshot(image: MetadataImage, zk: ZkClusterModel, ops: list[ZkOperation]) -> None:
    # Kafka rewrites every token of the image, changed or not; the ones ZooKeeper holds are marked unchanged.
    for token_id in sorted(image.delegation_tokens):
        op = WriteDelegationToken(
            "UpdateDelegationToken",
            f"Update DelegationToken for {token_id}",
            token=image.delegation_tokens[token_id],
        )
        op.unchanged = zk.delegation_tokens.get(token_id) == op.zk_token()
        ops.append(op)
    for token_id in sorted(zk.delegation_tokens):
        if token_id not in image.delegation_tokens:
            ops.append(_delete_token(token_id))


# ---------------------------------------------------------------------------------------------- shared


def same_assignment(a: PartitionRegistration, b: PartitionRegistration) -> bool:
    """Kafka's PartitionRegistration.hasSameAssignment: replicas, directories, adding and removing."""
    return (
        a.replicas == b.replicas
        and a.directories == b.directories
        and a.adding_replicas == b.adding_replicas
        and a.removing_replicas == b.removing_replicas
    )


def pattern_of(acl: AclBinding) -> ResourcePatternKey:
    return ResourcePatternKey(acl.resource_type, acl.resource_name, acl.pattern_type)


def ace_key(acl: AclBinding) -> AceKey:
    return (acl.principal, acl.host, acl.operation, acl.permission_type)


def _acls_by_pattern(
    image: MetadataImage, only: set[ResourcePatternKey] | None
) -> dict[ResourcePatternKey, list[AclBinding]]:
    """Image ACLs by pattern, in Kafka's Uuid order of their ids (`only` restricts the patterns)."""
    grouped: dict[ResourcePatternKey, list[AclBinding]] = {}
    for acl_id in sorted(image.acls, key=uuid_sort_key):
        acl = image.acls[acl_id]
        pattern = pattern_of(acl)
        if only is None or pattern in only:
            grouped.setdefault(pattern, []).append(acl)
    return grouped


def _write_acls(pattern: ResourcePatternKey, acls: list[AclBinding], count: int) -> WriteResourceAcls:
    # ZooKeeper keeps a set of entries: ids that carry the same entry collapse into one.
    unique: dict[AceKey, AclBinding] = {}
    for acl in acls:
        unique.setdefault(ace_key(acl), acl)
    return WriteResourceAcls(
        "UpdateAcl",
        f"Writing {count} for resource {_pattern_text(pattern)}",
        pattern=pattern,
        acls=tuple(unique.values()),
    )


def _write_producer_id(next_producer_id: int) -> WriteProducerId:
    return WriteProducerId("UpdateProducerId", "Setting next producer ID", next_producer_id=next_producer_id)


def _delete_token(token_id: str) -> DeleteDelegationToken:
    return DeleteDelegationToken(
        "DeleteDelegationToken", f"Delete DelegationToken for {token_id}", token_id=token_id
    )


def _scram_by_user(image: MetadataImage) -> dict[str, dict[int, ScramCredential]]:
    """The image's SCRAM credentials of each user, by mechanism id."""
    by_user: dict[str, dict[int, ScramCredential]] = {}
    for (name, mechanism), cred in sorted(image.scram.items()):
        by_user.setdefault(name, {})[mechanism] = cred
    return by_user


def _is_user_only(entity: QuotaEntity) -> bool:
    """Kafka's test for a user entity: it has a `user` and no `client-id`."""
    types = {t for t, _name in entity}
    return USER in types and CLIENT_ID not in types


def _user_of(entity: QuotaEntity) -> str | None:
    return dict(entity)[USER]


def _by_partition_id(partitions: dict[int, PartitionRegistration]) -> dict[int, PartitionRegistration]:
    return {p: partitions[p] for p in sorted(partitions)}


def _topic_name(topic: TopicImage) -> str:
    return topic.name


def _ids_by_name(image: MetadataImage, ids: Iterable[uuid.UUID]) -> list[uuid.UUID]:
    return sorted(ids, key=lambda topic_id: image.topics_by_id[topic_id].name)


def _user_sort_key(user: str | None) -> tuple[bool, str]:
    return (user is not None, user or "")


def _entity_sort_key(entity: QuotaEntity) -> tuple[tuple[str, bool, str], ...]:
    return tuple((t, n is not None, n or "") for t, n in entity)


def _pattern_sort_key(pattern: ResourcePatternKey) -> tuple[int, int, str]:
    return (pattern.resource_type, pattern.pattern_type, pattern.name)


# ---------------------------------------------------------------------------------------------- Java text


def _java_text(value: str | None) -> str:
    return "null" if value is None else value


def _enum_name(enum: type[ResourceType] | type[PatternType], code: int) -> str:
    try:
        return enum(code).name
    except ValueError:
        return str(code)


def _pattern_text(pattern: ResourcePatternKey) -> str:
    """Java's ResourcePattern.toString."""
    return (
        f"ResourcePattern(resourceType={_enum_name(ResourceType, pattern.resource_type)}, "
        f"name={pattern.name}, patternType={_enum_name(PatternType, pattern.pattern_type)})"
    )


def _config_resource_text(resource: ConfigResource) -> str:
    """Java's ConfigResource.toString."""
    return f"ConfigResource(type={_CONFIG_TYPE_NAMES[resource[0]]}, name='{resource[1]}')"


def _entity_text(entity: QuotaEntity) -> str:
    """Java's ClientQuotaEntity.toString; its entries HashMap (16 buckets) prints in bucket order."""

    order = java_hash_map_order(entity_type for entity_type, _ in entity)
    entries = sorted(entity, key=lambda pair: order.index(pair[0]))
    return "ClientQuotaEntity(entries={" + ", ".join(f"{t}={_java_text(n)}" for t, n in entries) + "})"
