"""Which znodes count as entities for the foreign-write watcher, and the image's entities as znode paths."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from bridge.zk.operations import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
)
from bridge.zk.planner import pattern_of
from migrate.kraft.image import (
    MetadataImage,
    QuotaEntity,
)
from migrate.zk import paths
from migrate.zk.cluster import acl_path
from migrate.zk.model import (
    ClientQuotaConfig,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from migrate.zk.znodes.acls import resource_type_from_name

WATCHED_ROOTS = (
    paths.TOPICS,
    paths.CONFIG,
    paths.KAFKA_ACL,
    paths.KAFKA_ACL_EXTENDED,
    paths.ADMIN,
    paths.DELEGATION_TOKEN,
    paths.LATEST_PRODUCER_ID_BLOCK,
)
"""The znodes dual-write owns (and the legacy admin requests), watched with everything below them."""

CREATED, CHANGED, DELETED = "created", "changed", "deleted"


LEGACY_ADMIN = (paths.REASSIGN_PARTITIONS, paths.PREFERRED_REPLICA_ELECTION)
# Kafka's KRaft controller never reads these requests and no dual-write operation owns them: whatever the mode,
# they are neither imported nor deleted (a ZooKeeper controller would act on them after a rollback).
_LEFT_IN_PLACE = "left in place whatever --foreign-zk-writes says: Kafka's KRaft controller ignores it; use "
LEGACY_ADMIN_ACTIONS = {
    paths.REASSIGN_PARTITIONS: _LEFT_IN_PLACE + "AlterPartitionReassignments "
    "(kafka-reassign-partitions --bootstrap-server) instead, and delete the znode",
    paths.PREFERRED_REPLICA_ELECTION: _LEFT_IN_PLACE + "ElectLeaders "
    "(kafka-leader-election --bootstrap-server) instead, and delete the znode",
}


class ForeignWriteMode(enum.Enum):
    """`--foreign-zk-writes`: what the bridge does with a change it did not make."""

    REPORT = "report"
    REVERT = "revert"
    IMPORT = "import"


@dataclass(frozen=True, slots=True)
class ForeignWrite:
    """One entity znode whose content differs from the image: `kind` says how, relative to the image."""

    path: str
    kind: str
    entity: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.path} {self.kind} ({self.entity}{': ' + self.detail if self.detail else ''})"


def entity_path(path: str) -> str | None:
    """The entity znode a changed znode belongs to, or None for containers and znodes nobody compares.

    Entities: topics (a partition's znodes belong to their topic), topic/broker configs, client-quota
    entities, ACL resources, delegation tokens, the producer-id block, topic-deletion markers and the
    legacy reassignment / preferred-election requests. Change notifications are not entities.
    """
    parts = path.split("/")
    n = len(parts)
    if path.startswith(paths.TOPICS + "/"):
        return paths.topic_path(parts[3]) if n >= 4 and parts[3] else None
    if path.startswith(paths.CONFIG + "/") and n >= 4 and parts[2] in paths.CONFIG_TYPES:
        if n == 4 or (n == 6 and parts[2] == paths.CONFIG_USERS and parts[4] == paths.CONFIG_CLIENTS):
            return path
        return None
    if path.startswith(paths.KAFKA_ACL + "/") and n == 4:
        return path
    if path.startswith(paths.KAFKA_ACL_PREFIXED + "/") and n == 5:
        return path
    if path.startswith(paths.DELETE_TOPICS + "/") and n == 4:
        return path
    if path in LEGACY_ADMIN or path == paths.LATEST_PRODUCER_ID_BLOCK:
        return path
    if path.startswith(paths.DELEGATION_TOKENS + "/") and n == 4:
        return path
    return None


def watch_kinds(path: str) -> tuple[bool, bool]:
    """(watch children, watch data) for a znode under the watched roots."""
    parts = path.split("/")
    n = len(parts)
    if path in (paths.TOPICS, paths.CONFIG, paths.KAFKA_ACL, paths.KAFKA_ACL_EXTENDED, paths.ADMIN):
        return True, False
    if path in (
        paths.KAFKA_ACL_PREFIXED,
        paths.DELETE_TOPICS,
        paths.DELEGATION_TOKEN,
        paths.DELEGATION_TOKENS,
    ):
        return True, False
    if path.startswith(paths.CONFIG + "/") and n >= 3 and parts[2] in paths.CONFIG_TYPES:
        if n == 3:
            return True, False
        if n == 4:
            return parts[2] == paths.CONFIG_USERS, True  # a user has `clients` below it
        if n == 5:
            return parts[2] == paths.CONFIG_USERS and parts[4] == paths.CONFIG_CLIENTS, False
        return False, entity_path(path) == path
    if (path.startswith(paths.KAFKA_ACL + "/") and n == 3) or (
        path.startswith(paths.KAFKA_ACL_PREFIXED + "/") and n == 4
    ):
        return True, False
    return False, entity_path(path) == path


def image_entity_paths(image: MetadataImage) -> set[str]:
    """The entity znodes the image says ZooKeeper holds (non-empty ones)."""
    out = {paths.topic_path(t.name) for t in image.topics_by_id.values()}
    for (resource_type, name), props in image.configs.items():
        if props and resource_type == TOPIC_RESOURCE:
            out.add(paths.config_path(f"{paths.CONFIG_TOPICS}/{name}"))
        elif props and resource_type == BROKER_RESOURCE:
            out.add(paths.config_path(f"{paths.CONFIG_BROKERS}/{name or paths.DEFAULT_ENTITY}"))
    out.update(paths.config_path(_quota_entity_path(entity)) for entity in image.client_quotas)
    out.update(paths.config_path(f"{paths.CONFIG_USERS}/{paths.sanitize(user)}") for user, _m in image.scram)
    out.update(_acl_znode(pattern_of(acl)) for acl in image.acls.values())
    out.update(paths.token_path(token_id) for token_id in image.delegation_tokens)
    if image.next_producer_id >= 0:
        out.add(paths.LATEST_PRODUCER_ID_BLOCK)
    return out


def _quota_entity_path(entity: QuotaEntity) -> str:
    names = dict(entity)
    parts: list[str] = []
    for key, kind in (
        ("user", paths.CONFIG_USERS),
        ("client-id", paths.CONFIG_CLIENTS),
        ("ip", paths.CONFIG_IPS),
    ):
        if key in names:
            name = names[key]
            parts += [kind, paths.DEFAULT_ENTITY if name is None else paths.sanitize(name)]
    return "/".join(parts)


def quota_entity(entity_path_: str) -> QuotaEntity:
    return tuple(sorted(ClientQuotaConfig(entity_path_).entity.items(), key=lambda kv: kv[0]))


def _acl_znode(pattern: Any) -> str:
    return acl_path(
        ResourcePattern(ResourceType(pattern.resource_type), pattern.name, PatternType(pattern.pattern_type))
    )


def acl_pattern(path: str) -> ResourcePattern | None:
    parts = path.split("/")
    pattern_type = PatternType.LITERAL if path.startswith(paths.KAFKA_ACL + "/") else PatternType.PREFIXED
    resource_type = resource_type_from_name(parts[-2])
    if resource_type.pascal_name != parts[-2]:
        return None  # Kafka never reads such a store
    return ResourcePattern(resource_type, parts[-1], pattern_type)
