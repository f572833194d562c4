"""Foreign writes turned into dual-write operations that put ZooKeeper back to the image (pure)."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable
from dataclasses import replace

from bridge.zk.foreign_writes.entities import (
    ForeignWrite,
    acl_pattern,
    quota_entity,
)
from bridge.zk.operations import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    CreateTopicPartitions,
    DeleteTopicPartitions,
    UpdateTopicPartitions,
    ZkOperation,
)
from bridge.zk.planner import plan_reconciliation
from migrate.kraft.image import (
    AclBinding,
    MetadataImage,
    PartitionRegistration,
)
from migrate.zk import paths
from migrate.zk.model import (
    ResourcePattern,
    ZkClusterModel,
)


def revert_operations(
    image: MetadataImage,
    zk: ZkClusterModel,
    writes: Iterable[ForeignWrite],
    *,
    existing: Collection[str] | None = None,
) -> list[ZkOperation]:
    """Dual-write operations that put the image's state back into ZooKeeper for these foreign writes.

    Kafka's snapshot reconciliation (`plan_reconciliation`) restricted to the affected entities.
    `existing`, when given, lists the partition znodes present for affected topics, so partitions only
    named in a foreign assignment are not deleted and partitions whose znodes are gone are created.
    Legacy admin requests are not reverted (no dual-write operation deletes them).
    """
    writes = list(writes)
    sub_image, sub_zk = _restrict(image, zk, {w.path for w in writes})
    ops = plan_reconciliation(sub_image, sub_zk)
    if existing is None:
        return ops
    return [fixed for op in ops for fixed in _fix_partition_op(op, existing)]


def _restrict(
    image: MetadataImage, zk: ZkClusterModel, affected: set[str]
) -> tuple[MetadataImage, ZkClusterModel]:
    """The parts of `image` and `zk` that describe the affected entities only."""
    sub = MetadataImage(features=image.features, provenance=image.provenance)
    out = ZkClusterModel()
    for path in affected:
        parts = path.split("/")
        if path.startswith(paths.TOPICS + "/"):
            name = parts[3]
            topic = image.topics_by_name.get(name)
            if topic is not None:
                sub.topics_by_id[topic.topic_id] = topic
                sub.topics_by_name[name] = topic
            zk_topic = zk.topics.get(name)
            if zk_topic is not None:
                # A topic without an id (legacy tools) cannot be in the image: any id marks it for deletion.
                out.topics[name] = zk_topic if zk_topic.topic_id else replace(zk_topic, topic_id=uuid.uuid4())
        elif path.startswith(paths.DELETE_TOPICS + "/"):
            out.pending_topic_deletions.add(parts[3])
        elif path.startswith(paths.CONFIG + "/") and parts[2] in (paths.CONFIG_TOPICS, paths.CONFIG_BROKERS):
            topics = parts[2] == paths.CONFIG_TOPICS
            resource = (TOPIC_RESOURCE if topics else BROKER_RESOURCE,
                        "" if parts[3] == paths.DEFAULT_ENTITY else parts[3])  # fmt: skip
            if resource in image.configs:
                sub.configs[resource] = image.configs[resource]
            source, target = (
                (zk.topic_configs, out.topic_configs) if topics else (zk.broker_configs, out.broker_configs)
            )
            if parts[3] in source:
                target[parts[3]] = source[parts[3]]
        elif path.startswith(paths.CONFIG + "/"):
            entity_path_ = path[len(paths.CONFIG) + 1 :]
            entity = quota_entity(entity_path_)
            if entity in image.client_quotas:
                sub.client_quotas[entity] = image.client_quotas[entity]
            if [t for t, _n in entity] == ["user"]:
                user = dict(entity)["user"]
                sub.scram.update({k: v for k, v in image.scram.items() if k[0] == user})
            if entity_path_ in zk.client_quotas:
                out.client_quotas[entity_path_] = zk.client_quotas[entity_path_]
        elif path.startswith(paths.KAFKA_ACL):
            pattern = acl_pattern(path)
            if pattern is None:
                continue
            for acl_id, acl in image.acls.items():
                if _same_pattern(acl, pattern):
                    sub.acls[acl_id] = acl
            if pattern in zk.acls:
                out.acls[pattern] = zk.acls[pattern]
        elif path.startswith(paths.DELEGATION_TOKENS + "/"):
            token_id = parts[3]
            if token_id in image.delegation_tokens:
                sub.delegation_tokens[token_id] = image.delegation_tokens[token_id]
            if token_id in zk.delegation_tokens:
                out.delegation_tokens[token_id] = zk.delegation_tokens[token_id]
        elif path == paths.LATEST_PRODUCER_ID_BLOCK:
            sub.next_producer_id = image.next_producer_id
            out.producer_id_block = zk.producer_id_block
    return sub, out


def _same_pattern(acl: AclBinding, pattern: ResourcePattern) -> bool:
    return (acl.resource_type, acl.resource_name, acl.pattern_type) == (
        int(pattern.resource_type),
        pattern.name,
        int(pattern.pattern_type),
    )


def _fix_partition_op(op: ZkOperation, existing: Collection[str]) -> list[ZkOperation]:
    """Partition operations that work on what ZooKeeper really has (Kafka's planner trusts assignments)."""
    if isinstance(op, DeleteTopicPartitions):
        kept = {
            topic: tuple(p for p in ids if paths.partition_path(topic, p) in existing)
            for topic, ids in op.partitions.items()
        }
        kept = {topic: ids for topic, ids in kept.items() if ids}
        return [replace(op, partitions=kept)] if kept else []
    if isinstance(op, UpdateTopicPartitions):
        # SetData on a missing state znode fails (migration-protocol.md §13 #4): create those instead.
        missing: dict[str, dict[int, PartitionRegistration]] = {}
        present: dict[str, dict[int, PartitionRegistration]] = {}
        for topic, regs in op.partitions.items():
            for p, reg in regs.items():
                gone = paths.partition_state_path(topic, p) not in existing
                (missing if gone else present).setdefault(topic, {})[p] = reg
        out: list[ZkOperation] = []
        if missing:
            names = ", ".join(sorted(missing))
            out.append(
                CreateTopicPartitions(
                    "UpdatePartition", f"Recreate partitions of {names}", partitions=missing
                )
            )
        if present:
            out.append(replace(op, partitions=present))
        return out
    return [op]
