"""Foreign writes: entity znodes whose content differs from the image, and how (pure)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from bridge.zk.foreign_writes.entities import (
    CHANGED,
    CREATED,
    DELETED,
    LEGACY_ADMIN,
    ForeignWrite,
    acl_pattern,
    quota_entity,
)
from bridge.zk.operations import BROKER_RESOURCE, PRODUCER_ID_BLOCK_SIZE, TOPIC_RESOURCE
from bridge.zk.planner import SCRAM_MECHANISM_IDS, ace_key
from migrate.kraft.image import (
    MetadataImage,
    uuid_sort_key,
)
from migrate.zk import paths
from migrate.zk.model import (
    AclResource,
    ClientQuotaConfig,
    ResourcePattern,
    ZkClusterModel,
)


def classify(image: MetadataImage, zk: ZkClusterModel, entity_paths: Iterable[str]) -> list[ForeignWrite]:
    """The entity znodes among `entity_paths` whose state in `zk` differs from `image`, in path order.

    `zk` must hold what ZooKeeper has now for those entities (absent = deleted). What is compared is what
    Kafka reads: config maps, quotas and SCRAM credentials, ACL entry sets, token fields, topic ids and
    replica assignments (not partition state, which only controllers write), the producer-id block;
    deletion markers and legacy admin requests are foreign whenever they exist.
    """
    out: list[ForeignWrite] = []
    for path in sorted(set(entity_paths)):
        write = _classify_one(image, zk, path)
        if write is not None:
            out.append(write)
    return out


def _kind(in_image: bool, in_zk: bool) -> str:
    return CREATED if in_zk and not in_image else DELETED if in_image and not in_zk else CHANGED


def _classify_one(image: MetadataImage, zk: ZkClusterModel, path: str) -> ForeignWrite | None:
    parts = path.split("/")
    raw = zk.other_znodes.get(path)
    # Null or empty data is "nothing stored" to Kafka's readers; other unparsed data is unreadable.
    if raw and path not in (paths.DELETE_TOPICS + "/" + parts[-1], *LEGACY_ADMIN):
        return ForeignWrite(path, CHANGED, _entity_name(path), "data Kafka cannot read")
    if path.startswith(paths.TOPICS + "/"):
        return _classify_topic(image, zk, path, parts[3])
    if path.startswith(paths.CONFIG + "/"):
        kind = parts[2]
        if kind == paths.CONFIG_TOPICS:
            cfg = zk.topic_configs.get(parts[3])
            return _diff_configs(path, "topic config", image.configs.get((TOPIC_RESOURCE, parts[3]), {}), cfg)
        if kind == paths.CONFIG_BROKERS:
            resource = "" if parts[3] == paths.DEFAULT_ENTITY else parts[3]
            cfg = zk.broker_configs.get(parts[3])
            return _diff_configs(
                path, "broker config", image.configs.get((BROKER_RESOURCE, resource), {}), cfg
            )
        return _classify_quota(image, zk, path)
    if path.startswith(paths.KAFKA_ACL):
        return _classify_acl(image, zk, path)
    if path.startswith(paths.DELETE_TOPICS + "/"):
        if raw is None and path not in zk.other_znodes and parts[3] not in zk.pending_topic_deletions:
            return None
        return ForeignWrite(
            path, CREATED, "topic deletion request", f"legacy request to delete topic {parts[3]}"
        )
    if path in LEGACY_ADMIN:
        if not _legacy_request_present(zk, path):
            return None
        return ForeignWrite(path, CREATED, "admin request", _legacy_request_detail(zk, path))
    if path.startswith(paths.DELEGATION_TOKENS + "/"):
        return _classify_token(image, zk, path, parts[3])
    if path == paths.LATEST_PRODUCER_ID_BLOCK:
        return _classify_producer_ids(image, zk, path)
    return None


def _entity_name(path: str) -> str:
    if path.startswith(paths.TOPICS):
        return "topic"
    if path.startswith(paths.CONFIG + "/topics/"):
        return "topic config"
    if path.startswith(paths.CONFIG + "/brokers/"):
        return "broker config"
    if path.startswith(paths.CONFIG):
        return "client quota"
    if path.startswith(paths.KAFKA_ACL):
        return "acl"
    if path.startswith(paths.DELEGATION_TOKENS):
        return "delegation token"
    return "znode"


def _legacy_request_detail(zk: ZkClusterModel, path: str) -> str:
    """What a legacy admin request asks for, in the partitions' own words (Kafka's KRaft controller ignores it)."""
    if path == paths.REASSIGN_PARTITIONS:
        asked = zk.legacy_reassignment
        moves = [f"{r.topic}-{r.partition} -> {r.replicas}" for r in asked.partitions] if asked else []
        return "legacy partition reassignment" + (": " + ", ".join(moves) if moves else "")
    asked_election = zk.preferred_replica_election
    named = [f"{tp.topic}-{tp.partition}" for tp in asked_election.partitions] if asked_election else []
    return "legacy preferred leader election" + (": " + ", ".join(named) if named else "")


def _legacy_request_present(zk: ZkClusterModel, path: str) -> bool:
    if path == paths.REASSIGN_PARTITIONS:
        return zk.legacy_reassignment is not None or path in zk.other_znodes
    return zk.preferred_replica_election is not None or path in zk.other_znodes


def _classify_topic(image: MetadataImage, zk: ZkClusterModel, path: str, name: str) -> ForeignWrite | None:
    kraft = image.topics_by_name.get(name)
    ours = zk.topics.get(name)
    if kraft is None and ours is None:
        return None
    if kraft is None or ours is None:
        return ForeignWrite(path, _kind(kraft is not None, ours is not None), "topic")
    if ours.topic_id != kraft.topic_id:
        return ForeignWrite(path, CHANGED, "topic", f"topic id {ours.topic_id} instead of {kraft.topic_id}")
    added = sorted(ours.partitions.keys() - kraft.partitions.keys())
    removed = sorted(kraft.partitions.keys() - ours.partitions.keys())
    moved = sorted(
        p
        for p in ours.partitions.keys() & kraft.partitions.keys()
        if ours.partitions[p] != kraft.partitions[p].replicas
        or ours.adding_replicas.get(p, []) != kraft.partitions[p].adding_replicas
        or ours.removing_replicas.get(p, []) != kraft.partitions[p].removing_replicas
    )
    if not (added or removed or moved):
        return None
    detail = "; ".join(
        f"{text} {','.join(map(str, ids))}"
        for text, ids in (("new partitions", added), ("missing partitions", removed), ("reassigned", moved))
        if ids
    )
    return ForeignWrite(path, CHANGED, "topic", detail)


def _diff_configs(path: str, entity: str, kraft: dict[str, str], cfg: Any) -> ForeignWrite | None:
    ours: dict[str, str] = dict(cfg.config) if cfg is not None else {}
    if ours == kraft:
        return None
    return ForeignWrite(path, _kind(bool(kraft), bool(ours)), entity, _map_diff(kraft, ours))


def _map_diff(kraft: dict[str, Any], ours: dict[str, Any]) -> str:
    changes = []
    for key in sorted(kraft.keys() | ours.keys()):
        if kraft.get(key) != ours.get(key):
            before = kraft.get(key, "(unset)")
            after = ours.get(key, "(unset)")
            changes.append(f"{key}: {before} -> {after}")
    return ", ".join(changes)


def scram_in_zk(cfg: ClientQuotaConfig | None) -> dict[int, tuple[bytes, bytes, bytes, int]]:
    if cfg is None:
        return {}
    return {
        SCRAM_MECHANISM_IDS[m]: (c.salt, c.stored_key, c.server_key, c.iterations)
        for m, c in cfg.scram.items()
    }


def scram_in_image(image: MetadataImage, user: str | None) -> dict[int, tuple[bytes, bytes, bytes, int]]:
    if user is None:
        return {}
    return {
        mechanism: (c.salt, c.stored_key, c.server_key, c.iterations)
        for (name, mechanism), c in image.scram.items()
        if name == user
    }


def _classify_quota(image: MetadataImage, zk: ZkClusterModel, path: str) -> ForeignWrite | None:
    entity_path_ = path[len(paths.CONFIG) + 1 :]
    entity = quota_entity(entity_path_)
    cfg = zk.client_quotas.get(entity_path_)
    ours = dict(cfg.quotas) if cfg is not None else {}
    kraft = dict(image.client_quotas.get(entity, {}))
    user_only = [t for t, _n in entity] == ["user"]
    user = dict(entity)["user"] if user_only else None
    zk_scram, kraft_scram = (scram_in_zk(cfg), scram_in_image(image, user)) if user_only else ({}, {})
    if ours == kraft and zk_scram == kraft_scram:
        return None
    details = []
    if ours != kraft:
        details.append(_map_diff(kraft, ours))
    if zk_scram != kraft_scram:
        mechanisms = sorted(
            m for m in zk_scram.keys() | kraft_scram.keys() if zk_scram.get(m) != kraft_scram.get(m)
        )
        details.append("SCRAM credentials " + ", ".join(_scram_name(m) for m in mechanisms))
    in_image, in_zk = bool(kraft or kraft_scram), bool(ours or zk_scram)
    return ForeignWrite(path, _kind(in_image, in_zk), "client quota", "; ".join(details))


def _scram_name(mechanism: int) -> str:
    return {v: k for k, v in SCRAM_MECHANISM_IDS.items()}.get(mechanism, str(mechanism))


def aces_in_image(
    image: MetadataImage, pattern: ResourcePattern
) -> dict[tuple[str, str, int, int], list[uuid.UUID]]:
    key = (int(pattern.resource_type), pattern.name, int(pattern.pattern_type))
    out: dict[tuple[str, str, int, int], list[uuid.UUID]] = {}
    for acl_id in sorted(image.acls, key=uuid_sort_key):
        acl = image.acls[acl_id]
        if (acl.resource_type, acl.resource_name, acl.pattern_type) == key:
            out.setdefault(ace_key(acl), []).append(acl_id)
    return out


def aces_in_zk(resource: AclResource | None) -> set[tuple[str, str, int, int]]:
    if resource is None:
        return set()
    return {(e.principal, e.host, int(e.operation), int(e.permission_type)) for e in resource.acls}


def _classify_acl(image: MetadataImage, zk: ZkClusterModel, path: str) -> ForeignWrite | None:
    pattern = acl_pattern(path)
    if pattern is None:
        return None
    kraft = set(aces_in_image(image, pattern))
    ours = aces_in_zk(zk.acls.get(pattern))
    if kraft == ours:
        return None
    added, removed = len(ours - kraft), len(kraft - ours)
    return ForeignWrite(
        path, _kind(bool(kraft), bool(ours)), "acl", f"{added} entries added, {removed} removed"
    )


def _classify_token(
    image: MetadataImage, zk: ZkClusterModel, path: str, token_id: str
) -> ForeignWrite | None:
    kraft = image.delegation_tokens.get(token_id)
    ours = zk.delegation_tokens.get(token_id)
    if kraft is None and ours is None:
        return None
    if kraft is not None and ours is not None:
        same = (
            ours.owner,
            ours.token_requester,
            list(ours.renewers),
            ours.issue_timestamp,
            ours.max_timestamp,
            ours.expiry_timestamp,
        ) == (
            kraft.owner,
            kraft.requester,
            list(kraft.renewers),
            kraft.issue_timestamp,
            kraft.max_timestamp,
            kraft.expiration_timestamp,
        )
        if same:
            return None
    return ForeignWrite(path, _kind(kraft is not None, ours is not None), "delegation token")


def _classify_producer_ids(image: MetadataImage, zk: ZkClusterModel, path: str) -> ForeignWrite | None:
    block = zk.producer_id_block
    expected = image.next_producer_id
    if block is None:
        return None if expected < 0 else ForeignWrite(path, DELETED, "producer id block")
    # Migrated blocks hold next-1 as their end; dual-write stores [next, next + 999] (Kafka's writeProducerId).
    if block.block_end + 1 == expected or (
        block.block_start == expected and block.block_end == expected + PRODUCER_ID_BLOCK_SIZE - 1
    ):
        return None
    return ForeignWrite(
        path,
        CREATED if expected < 0 else CHANGED,
        "producer id block",
        f"block {block.block_start}-{block.block_end}, image's next producer id {expected}",
    )
