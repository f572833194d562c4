"""Notice ZooKeeper changes made by someone else during dual-write, and report, revert or import them.

Legacy tools (`kafka-configs --zookeeper`, `kafka-acls --authorizer-properties zookeeper.connect=...`,
scripts) keep writing Kafka's znodes while the bridge owns the metadata. `ForeignWriteWatcher` keeps
one-shot kazoo watches on the znodes dual-write owns (kazoo 2.11 has no persistent recursive watches) and,
for every entity znode that changed, compares what ZooKeeper now holds with the image ZooKeeper should
reflect. Only differences count, so our own writes (which make ZooKeeper equal to the image) are never
reported as long as the driver wraps them in `watcher.own_writes()`.

The pure part works on a ZooKeeper model and a MetadataImage, without ZooKeeper: `classify` finds foreign
writes, `records_to_import` turns them into KRaft records, `revert_operations` into dual-write operations.
"""

from __future__ import annotations

import enum
import logging
import queue
import threading
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.protocol.states import EventType, WatchedEvent

from bridge.api import RecordAndVersion
from bridge.metrics import BridgeMetrics
from bridge.zk.leadership import DeleteRequest, ZkRequest, ZkResult
from bridge.zk.operations import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    CreateTopicPartitions,
    DeleteTopicPartitions,
    UpdateTopicPartitions,
    ZkOperation,
)
from bridge.zk.planner import SCRAM_MECHANISM_IDS, ace_key, pattern_of, plan_reconciliation
from migrate.errors import Zk2KraftError
from migrate.kraft import records as rec
from migrate.kraft.image import (
    AclBinding,
    ConfigResource,
    MetadataImage,
    PartitionRegistration,
    QuotaEntity,
    uuid_sort_key,
)
from migrate.translate import delegation_token_record, kafka_random_uuid
from migrate.zk import paths
from migrate.zk.cluster import acl_path, from_tree
from migrate.zk.model import (
    AclResource,
    ClientQuotaConfig,
    PatternType,
    ResourcePattern,
    ResourceType,
    ZkClusterModel,
)
from migrate.zk.tree import Stat, ZNode, ZTree
from migrate.zk.znodes.acls import resource_type_from_name

log = logging.getLogger(__name__)

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
_LEGACY_ADMIN = (paths.REASSIGN_PARTITIONS, paths.PREFERRED_REPLICA_ELECTION)
_PRODUCER_ID_BLOCK_SIZE = 1000


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


@dataclass(slots=True)
class ImportPlan:
    """Records that make the image match ZooKeeper, and the foreign writes that cannot be imported (why)."""

    records: list[RecordAndVersion] = field(default_factory=list)
    not_imported: list[tuple[ForeignWrite, str]] = field(default_factory=list)


@dataclass(slots=True)
class ForeignWriteBatch:
    """Foreign writes noticed together, with the ZooKeeper state they were judged on (affected entities only)."""

    mode: ForeignWriteMode
    writes: list[ForeignWrite]
    zk: ZkClusterModel
    existing: frozenset[str] | None = None
    """Paths of the partition znodes (`/brokers/topics/<t>/partitions/<p>[/state]`) read for foreign topics."""

    def import_plan(self, image: MetadataImage) -> ImportPlan:
        return records_to_import(image, self.zk, self.writes)

    def revert_operations(self, image: MetadataImage) -> list[ZkOperation]:
        return revert_operations(image, self.zk, self.writes, existing=self.existing)


# ---------------------------------------------------------------------------------------------- paths


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
    if path in _LEGACY_ADMIN or path == paths.LATEST_PRODUCER_ID_BLOCK:
        return path
    if path.startswith(paths.DELEGATION_TOKENS + "/") and n == 4:
        return path
    return None


def _watch_kinds(path: str) -> tuple[bool, bool]:
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


def _quota_entity(entity_path_: str) -> QuotaEntity:
    return tuple(sorted(ClientQuotaConfig(entity_path_).entity.items(), key=lambda kv: kv[0]))


def _acl_znode(pattern: Any) -> str:
    return acl_path(
        ResourcePattern(ResourceType(pattern.resource_type), pattern.name, PatternType(pattern.pattern_type))
    )


def _acl_pattern(path: str) -> ResourcePattern | None:
    parts = path.split("/")
    pattern_type = PatternType.LITERAL if path.startswith(paths.KAFKA_ACL + "/") else PatternType.PREFIXED
    resource_type = resource_type_from_name(parts[-2])
    if resource_type.pascal_name != parts[-2]:
        return None  # Kafka never reads such a store
    return ResourcePattern(resource_type, parts[-1], pattern_type)


# ---------------------------------------------------------------------------------------------- classify


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
    if raw and path not in (paths.DELETE_TOPICS + "/" + parts[-1], *_LEGACY_ADMIN):
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
    if path in _LEGACY_ADMIN:
        if not _legacy_request_present(zk, path):
            return None
        return ForeignWrite(path, CREATED, "admin request", "legacy admin request; no controller acts on it")
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


def _zk_scram(cfg: ClientQuotaConfig | None) -> dict[int, tuple[bytes, bytes, bytes, int]]:
    if cfg is None:
        return {}
    return {
        SCRAM_MECHANISM_IDS[m]: (c.salt, c.stored_key, c.server_key, c.iterations)
        for m, c in cfg.scram.items()
    }


def _image_scram(image: MetadataImage, user: str | None) -> dict[int, tuple[bytes, bytes, bytes, int]]:
    if user is None:
        return {}
    return {
        mechanism: (c.salt, c.stored_key, c.server_key, c.iterations)
        for (name, mechanism), c in image.scram.items()
        if name == user
    }


def _classify_quota(image: MetadataImage, zk: ZkClusterModel, path: str) -> ForeignWrite | None:
    entity_path_ = path[len(paths.CONFIG) + 1 :]
    entity = _quota_entity(entity_path_)
    cfg = zk.client_quotas.get(entity_path_)
    ours = dict(cfg.quotas) if cfg is not None else {}
    kraft = dict(image.client_quotas.get(entity, {}))
    user_only = [t for t, _n in entity] == ["user"]
    user = dict(entity)["user"] if user_only else None
    zk_scram, kraft_scram = (_zk_scram(cfg), _image_scram(image, user)) if user_only else ({}, {})
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


def _image_aces(
    image: MetadataImage, pattern: ResourcePattern
) -> dict[tuple[str, str, int, int], list[uuid.UUID]]:
    key = (int(pattern.resource_type), pattern.name, int(pattern.pattern_type))
    out: dict[tuple[str, str, int, int], list[uuid.UUID]] = {}
    for acl_id in sorted(image.acls, key=uuid_sort_key):
        acl = image.acls[acl_id]
        if (acl.resource_type, acl.resource_name, acl.pattern_type) == key:
            out.setdefault(ace_key(acl), []).append(acl_id)
    return out


def _zk_aces(resource: AclResource | None) -> set[tuple[str, str, int, int]]:
    if resource is None:
        return set()
    return {(e.principal, e.host, int(e.operation), int(e.permission_type)) for e in resource.acls}


def _classify_acl(image: MetadataImage, zk: ZkClusterModel, path: str) -> ForeignWrite | None:
    pattern = _acl_pattern(path)
    if pattern is None:
        return None
    kraft = set(_image_aces(image, pattern))
    ours = _zk_aces(zk.acls.get(pattern))
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
        block.block_start == expected and block.block_end == expected + _PRODUCER_ID_BLOCK_SIZE - 1
    ):
        return None
    return ForeignWrite(
        path,
        CREATED if expected < 0 else CHANGED,
        "producer id block",
        f"block {block.block_start}-{block.block_end}, image's next producer id {expected}",
    )


# ---------------------------------------------------------------------------------------------- import


def records_to_import(image: MetadataImage, zk: ZkClusterModel, writes: Iterable[ForeignWrite]) -> ImportPlan:
    """KRaft records that make `image` hold what `zk` holds for the foreign writes that can be imported.

    Imported: topic and broker configs (ConfigRecord set/delete), client quotas (ClientQuotaRecord) and
    SCRAM credentials, ACLs (AccessControlEntryRecord / RemoveAccessControlEntryRecord), delegation tokens,
    a producer-id block that moved forward. Topics, partitions, deletion markers and admin requests are
    left in `not_imported` with the reason: their legacy paths bypass the controller's validation.
    """
    plan = ImportPlan()
    for write in writes:
        path = write.path
        parts = path.split("/")
        if zk.other_znodes.get(path):
            # Importing what cannot be read would wipe the entity's settings from the log.
            plan.not_imported.append((write, "ZooKeeper holds data Kafka cannot read"))
        elif path.startswith(paths.CONFIG + "/") and parts[2] == paths.CONFIG_TOPICS:
            if parts[3] not in image.topics_by_name:
                plan.not_imported.append((write, f"topic {parts[3]} does not exist in the metadata log"))
                continue
            cfg = zk.topic_configs.get(parts[3])
            plan.records += _config_records(
                (TOPIC_RESOURCE, parts[3]), image, dict(cfg.config) if cfg is not None else {}
            )
        elif path.startswith(paths.CONFIG + "/") and parts[2] == paths.CONFIG_BROKERS:
            name = parts[3]
            if name != paths.DEFAULT_ENTITY and not name.isdigit():
                plan.not_imported.append((write, f"{name!r} is neither a broker id nor <default>"))
                continue
            resource = "" if name == paths.DEFAULT_ENTITY else name
            cfg = zk.broker_configs.get(name)
            plan.records += _config_records(
                (BROKER_RESOURCE, resource), image, dict(cfg.config) if cfg is not None else {}
            )
        elif path.startswith(paths.CONFIG + "/"):
            plan.records += _quota_records(image, zk, path[len(paths.CONFIG) + 1 :])
        elif path.startswith(paths.KAFKA_ACL):
            pattern = _acl_pattern(path)
            if pattern is not None:
                plan.records += _acl_records(image, pattern, zk.acls.get(pattern))
        elif path.startswith(paths.DELEGATION_TOKENS + "/"):
            if not image.metadata_version.is_delegation_token_supported():
                plan.not_imported.append((write, "metadata.version cannot store delegation tokens"))
                continue
            plan.records += _token_records(zk, parts[3])
        elif path == paths.LATEST_PRODUCER_ID_BLOCK:
            block = zk.producer_id_block
            if block is None or block.block_end + 1 <= image.next_producer_id:
                plan.not_imported.append((write, "producer ids never move backwards"))
                continue
            record = rec.ProducerIdsRecord(
                broker_id=-1, broker_epoch=-1, next_producer_id=block.block_end + 1
            )
            plan.records.append((record, 0))
        else:
            plan.not_imported.append((write, _NOT_IMPORTABLE.get(write.entity, "not importable")))
    return plan


_NOT_IMPORTABLE = {
    "topic": "topics and partitions changed in ZooKeeper are not imported; use the Kafka admin API",
    "topic deletion request": "topic deletions requested in ZooKeeper are not imported; use DeleteTopics",
    "admin request": "legacy admin requests are not imported; use the Kafka admin API",
}


def _config_records(
    resource: ConfigResource, image: MetadataImage, ours: dict[str, str]
) -> list[RecordAndVersion]:
    kraft = image.configs.get(resource, {})
    out: list[RecordAndVersion] = []
    for key in sorted(kraft.keys() | ours.keys()):
        if kraft.get(key) != ours.get(key):
            record = rec.ConfigRecord(
                resource_type=resource[0], resource_name=resource[1], name=key, value=ours.get(key)
            )
            out.append((record, 0))
    return out


def _quota_records(image: MetadataImage, zk: ZkClusterModel, entity_path_: str) -> list[RecordAndVersion]:
    entity = _quota_entity(entity_path_)
    cfg = zk.client_quotas.get(entity_path_)
    ours = dict(cfg.quotas) if cfg is not None else {}
    kraft = image.client_quotas.get(entity, {})
    entity_data = [rec.ClientQuotaRecord.EntityData(entity_type=t, entity_name=n) for t, n in entity]
    out: list[RecordAndVersion] = []
    for key in sorted(kraft.keys() | ours.keys()):
        if kraft.get(key) == ours.get(key):
            continue
        value = ours.get(key)
        record = rec.ClientQuotaRecord(
            entity=list(entity_data), key=key, value=float(value or 0.0), remove=value is None
        )
        out.append((record, 0))
    if [t for t, _n in entity] != ["user"] or dict(entity)["user"] is None:
        return out
    user = dict(entity)["user"]
    assert user is not None
    zk_scram, kraft_scram = _zk_scram(cfg), _image_scram(image, user)
    for mechanism in sorted(zk_scram.keys() | kraft_scram.keys()):
        cred = zk_scram.get(mechanism)
        if cred == kraft_scram.get(mechanism):
            continue
        if cred is None:
            out.append((rec.RemoveUserScramCredentialRecord(name=user, mechanism=mechanism), 0))
        else:
            salt, stored_key, server_key, iterations = cred
            scram = rec.UserScramCredentialRecord(
                name=user,
                mechanism=mechanism,
                salt=salt,
                stored_key=stored_key,
                server_key=server_key,
                iterations=iterations,
            )
            out.append((scram, 0))
    return out


def _acl_records(
    image: MetadataImage, pattern: ResourcePattern, resource: AclResource | None
) -> list[RecordAndVersion]:
    kraft = _image_aces(image, pattern)
    ours = _zk_aces(resource)
    out: list[RecordAndVersion] = []
    for ace, ids in sorted(kraft.items()):
        if ace not in ours:
            out += [(rec.RemoveAccessControlEntryRecord(id=acl_id), 0) for acl_id in ids]
    for principal, host, operation, permission in sorted(ours - kraft.keys()):
        record = rec.AccessControlEntryRecord(
            id=kafka_random_uuid(),
            resource_type=int(pattern.resource_type),
            resource_name=pattern.name,
            pattern_type=int(pattern.pattern_type),
            principal=principal,
            host=host,
            operation=operation,
            permission_type=permission,
        )
        out.append((record, 0))
    return out


def _token_records(zk: ZkClusterModel, token_id: str) -> list[RecordAndVersion]:
    token = zk.delegation_tokens.get(token_id)
    if token is None:
        return [(rec.RemoveDelegationTokenRecord(token_id=token_id), 0)]
    return [(delegation_token_record(token), 0)]


# ---------------------------------------------------------------------------------------------- revert


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
            entity = _quota_entity(entity_path_)
            if entity in image.client_quotas:
                sub.client_quotas[entity] = image.client_quotas[entity]
            if [t for t, _n in entity] == ["user"]:
                user = dict(entity)["user"]
                sub.scram.update({k: v for k, v in image.scram.items() if k[0] == user})
            if entity_path_ in zk.client_quotas:
                out.client_quotas[entity_path_] = zk.client_quotas[entity_path_]
        elif path.startswith(paths.KAFKA_ACL):
            pattern = _acl_pattern(path)
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


# ---------------------------------------------------------------------------------------------- watcher

_ABSENT = object()
"""A znode that does not exist (unlike b"" or null data)."""
_UNKNOWN = object()
"""A znode created between two reads: its data was not read."""


class OwnWriteLog:
    """This controller's writes to entity znodes: the last one known landed, and those still unanswered.

    The ZooKeeper client that dual-writes tells it of each request (`sent`, before sending) and its reply
    (`settled`): it is that client's `observer`. A watch event whose znode holds what one of them wrote
    needs no judgment: the content is this controller's image at some moment, and any later change of the
    image brings a later write (and event) of its own. Anything else is judged. Newest `limit` znodes kept.
    """

    def __init__(self, limit: int = 65536) -> None:
        self.limit = limit
        self._last: dict[str, object] = {}
        self._pending: dict[str, list[ZkRequest]] = {}
        self._lock = threading.Lock()

    def sent(self, request: ZkRequest) -> None:
        path = request.path
        if entity_path(path) != path:
            return  # containers, partitions, notifications, /migration: nobody judges them alone
        with self._lock:
            self._pending.setdefault(path, []).append(request)

    def settled(self, result: ZkResult) -> None:
        request = result.request
        path = request.path
        with self._lock:
            pending = self._pending.get(path)
            if not pending:
                return
            index = next((i for i, r in enumerate(pending) if r is request), None)
            if index is None:
                return
            if result.ok:
                # One session's requests are applied in order: those sent before it are settled too.
                del pending[: index + 1]
                self._last.pop(path, None)
                self._last[path] = _content(request)
                if len(self._last) > self.limit:
                    del self._last[next(iter(self._last))]
            else:
                del pending[index]
            if not pending:
                del self._pending[path]

    def knows(self, path: str) -> bool:
        """Whether we wrote `path` (as far as the log remembers)."""
        with self._lock:
            return path in self._last or path in self._pending

    def matches(self, path: str, content: object) -> bool:
        """Whether `content` (data, None for null, or _ABSENT) is what one of our writes left at `path`."""
        with self._lock:
            if path in self._last and self._last[path] == content:
                return True
            return any(_content(r) == content for r in self._pending.get(path, ()))


def _content(request: ZkRequest) -> object:
    return _ABSENT if isinstance(request, DeleteRequest) else request.data


_RESCAN = ("rescan", "", "")
_STOP = ("stop", "", "")
_Item = tuple[str, str, str]


class ForeignWriteWatcher:
    """Watches the dual-written znodes through `client` and reports foreign writes to `on_change`.

    `expected()` returns the image ZooKeeper should reflect now. The driver wraps every dual-write in
    `with watcher.own_writes():` (from the image change until its ZooKeeper writes are done): events are
    judged only outside such blocks, against a fresh read of ZooKeeper, so our own writes compare equal.
    `on_change(batch)` runs on the watcher's thread; in report mode it may be omitted. After any
    reconnection every entity is compared again, since one-shot watches miss what happens meanwhile.
    """

    def __init__(
        self,
        client: KazooClient,
        expected: Callable[[], MetadataImage],
        on_change: Callable[[ForeignWriteBatch], None] | None = None,
        *,
        mode: ForeignWriteMode | str = ForeignWriteMode.REPORT,
        metrics: BridgeMetrics | None = None,
        settle_s: float = 0.05,
    ) -> None:
        self.client = client
        self.expected = expected
        self.on_change = on_change
        self.mode = ForeignWriteMode(mode)
        self.metrics = metrics
        self.settle_s = settle_s
        self.batches_seen = 0
        self._queue: queue.Queue[_Item] = queue.Queue()
        self._write_lock = threading.RLock()
        self._entities: set[str] = set()
        self._reported: dict[str, ForeignWrite] = {}
        self._children: dict[str, set[str]] = {}
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()
        self._idle = threading.Condition()
        self._pending = 0
        self._was_disconnected = False
        # path -> the kazoo async result of its watched get, sent ahead while events are processed
        self._prefetched: dict[str, Any] = {}
        self.written = OwnWriteLog()
        """Make it the `observer` of the ZooKeeper client that dual-writes."""

    # ------------------------------------------------------------------ lifecycle

    def start(self, *, scan: bool = False) -> ForeignWriteWatcher:
        """Arm the watches (synchronously, so changes made after start() returns are seen)."""
        if self._thread is not None:
            return self
        self._stopped.clear()
        self.client.add_listener(self._on_state)
        with self._write_lock:
            self._arm_all()
        self._thread = threading.Thread(target=self._run, name="foreign-zk-writes", daemon=True)
        self._thread.start()
        if scan:
            self._put(_RESCAN)
        return self

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stopped.set()
        self.client.remove_listener(self._on_state)
        self._put(_STOP)
        self._thread.join(timeout=10)
        self._thread = None

    def __enter__(self) -> ForeignWriteWatcher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @contextmanager
    def own_writes(self) -> Iterator[None]:
        """Hold off judging events while the driver changes the image and writes ZooKeeper."""
        with self._write_lock:
            yield

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Wait until every event queued so far has been judged (for tests and orderly shutdown)."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def scan(self, *, repeat: bool = False) -> ForeignWriteBatch | None:
        """Compare every entity (ZooKeeper's and the image's) now, on the caller's thread, and dispatch.

        Differences already reported are left out unless `repeat` (e.g. after a failed revert).
        """
        with self._write_lock:
            return self._check(self._entities | image_entity_paths(self.expected()), repeat=repeat)

    # ------------------------------------------------------------------ kazoo callbacks (never block)

    def _put(self, item: _Item) -> None:
        with self._idle:
            self._pending += 1
        self._queue.put(item)

    def _on_event(self, event: WatchedEvent) -> None:
        # Session events (expiry, closing) carry no path; the state listener rescans after reconnection.
        if event.path is not None and not self._stopped.is_set():
            self._put(("event", str(event.type), event.path))

    def _on_state(self, state: str) -> None:
        if state in (KazooState.SUSPENDED, KazooState.LOST):
            self._was_disconnected = True
        elif state == KazooState.CONNECTED and self._was_disconnected:
            self._was_disconnected = False
            self._put(_RESCAN)

    # ------------------------------------------------------------------ worker

    def _run(self) -> None:
        while True:
            items = [self._queue.get()]
            if items[0] is not _STOP and self.settle_s > 0:
                # A legacy tool writes the entity and then its change notification: judge them together.
                self._stopped.wait(self.settle_s)
            while True:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            try:
                if any(item is _STOP for item in items) or self._stopped.is_set():
                    return
                self._process(items)
            except KazooException as exc:
                # The connection went away; the CONNECTED listener queues a full rescan.
                log.warning("foreign-write watcher lost ZooKeeper while checking (%s); will rescan", exc)
                if self.client.connected:
                    self._put(_RESCAN)
            except Zk2KraftError as exc:
                log.error("foreign-write watcher could not judge ZooKeeper's state: %s", exc)
            except Exception:
                log.exception("foreign-write watcher failed")
            finally:
                with self._idle:
                    self._pending -= len(items)
                    self._idle.notify_all()

    def _process(self, items: list[_Item]) -> None:
        with self._write_lock:
            self._prefetched.clear()
            try:
                if any(item is _RESCAN for item in items):
                    self._arm_all()
                    self._check(self._entities | image_entity_paths(self.expected()))
                    return
                self._prefetch(path for _tag, _type, path in items if _watch_kinds(path)[1])
                affected: set[str] = set()
                for _tag, event_type, path in items:
                    affected |= self._on_znode_event(event_type, path)
            finally:
                self._prefetched.clear()
            if affected:
                self._check(affected)

    def _on_znode_event(self, event_type: str, path: str) -> set[str]:
        """Re-arm the watch an event consumed; the entity znodes it may have changed (not our own writes)."""
        entity = entity_path(path)
        # A new child (users/<u>/clients) leaves the parent's data as it was.
        data_event = entity is not None and event_type != str(EventType.CHILD)
        affected = self._arm(path, judge_self=data_event and entity == path)
        if data_event and entity != path:
            affected.add(entity)  # type: ignore[arg-type]
        return affected

    # ------------------------------------------------------------------ arming

    def _arm_all(self) -> None:
        self._children.clear()
        for root in WATCHED_ROOTS:
            self._arm(root)

    def _arm(self, path: str, *, judge_self: bool = False) -> set[str]:
        """Set the watches of `path` (and of new children); returns the entity znodes to judge: entities newly
        seen below it, and `path` itself if `judge_self`, unless they hold what we last wrote there."""
        children, data = _watch_kinds(path)
        new_entities: set[str] = set()
        if data:
            content = self._arm_data(path)
            if content is not _ABSENT and entity_path(path) == path:
                self._entities.add(path)
            if judge_self and not self._own(path, content):
                new_entities.add(path)
        elif judge_self:
            new_entities.add(path)
        if not children:
            return new_entities
        try:
            names = self.client.get_children(path, watch=self._on_event)
        except NoNodeError:
            self.client.exists(path, watch=self._on_event)  # fires when the container appears
            self._children.pop(path, None)
            return new_entities
        known = self._children.get(path, set())
        self._children[path] = set(names)
        new_children = [
            child
            for child in (f"{path}/{name}" for name in sorted(set(names) - known))
            if _watch_kinds(child) != (False, False)
        ]
        self._prefetch(child for child in new_children if _watch_kinds(child)[1])
        for child in new_children:
            new_entities |= self._arm(child, judge_self=entity_path(child) == child)
        return new_entities

    def _prefetch(self, znodes_: Iterable[str]) -> None:
        """Send the data reads `_arm_data` will make for `znodes_` at once (one round of waits, not one each)."""
        for path in znodes_:
            if path not in self._prefetched:
                self._prefetched[path] = self.client.get_async(path, watch=self._on_event)

    def _arm_data(self, path: str) -> object:
        """Leave a data watch on `path` (fires on create, change, delete); its data (None: null), _ABSENT, or
        _UNKNOWN when it appeared between the two reads."""
        sent = self._prefetched.pop(path, None)
        try:
            data, _stat = sent.get() if sent is not None else self.client.get(path, watch=self._on_event)
            return data
        except NoNodeError:
            # get() leaves no watch on a missing znode; exists() does, and fires when it is created.
            return _ABSENT if self.client.exists(path, watch=self._on_event) is None else _UNKNOWN

    def _own(self, path: str, content: object) -> bool:
        """ZooKeeper holds what we last wrote to entity `path`: no judgment, and it agrees with the image.

        A read answered just before a write of ours landed shows our previous content, which the log no longer
        counts once that write is answered: such a path is read once more (the watch the first read left
        catches whatever happens after it) rather than judged, which would hold appends.
        """
        if content is _UNKNOWN or not self.written.matches(path, content):
            if not self.written.knows(path):
                return False
            try:
                content = self.client.get(path)[0]
            except NoNodeError:
                content = _ABSENT
            if not self.written.matches(path, content):
                return False
        self._reported.pop(path, None)
        if content is _ABSENT:
            self._entities.discard(path)
        return True

    # ------------------------------------------------------------------ judging

    def _check(self, affected: set[str], *, repeat: bool = False) -> ForeignWriteBatch | None:
        image = self.expected()
        tree = _read_entities(self.client, affected, topic_subtrees=set())
        model = from_tree(tree, strict=False)
        writes = classify(image, model, affected)
        for write in writes:
            (self._entities.add if write.kind != DELETED else self._entities.discard)(write.path)
        differing = {w.path for w in writes}
        for path in affected - differing:
            self._reported.pop(path, None)  # ZooKeeper agrees with the image again
        # A difference is reported once, not at every later event that leaves it as it was.
        writes = [w for w in writes if repeat or self._reported.get(w.path) != w]
        if not writes:
            return None
        topics = {w.path for w in writes if w.path.startswith(paths.TOPICS + "/")}
        existing: frozenset[str] | None = None
        if topics:
            tree = _read_entities(self.client, affected, topic_subtrees=topics)
            model = from_tree(tree, strict=False)
            writes = classify(image, model, affected)
            existing = frozenset(
                p for p in tree.nodes if p.count("/") >= 5 and p.startswith(paths.TOPICS + "/")
            )
        self._reported.update((w.path, w) for w in writes)
        batch = ForeignWriteBatch(self.mode, writes, model, existing)
        self._dispatch(batch)
        return batch

    def _dispatch(self, batch: ForeignWriteBatch) -> None:
        self.batches_seen += 1
        action = {
            ForeignWriteMode.REPORT: "left as is (--foreign-zk-writes report)",
            ForeignWriteMode.REVERT: "to be reverted to the metadata log's state",
            ForeignWriteMode.IMPORT: "to be imported into the metadata log",
        }[batch.mode]
        for write in batch.writes:
            log.warning("foreign ZooKeeper write: znode %s %s by someone else (%s); %s", write.path, write.kind,
                        write.entity + (": " + write.detail if write.detail else ""), action)  # fmt: skip
        if self.metrics is not None:
            self.metrics.observe_foreign_writes([w.kind for w in batch.writes], batch.mode.value)
        if self.on_change is not None:
            self.on_change(batch)


def _read_entities(client: KazooClient, entity_paths: Iterable[str], *, topic_subtrees: set[str]) -> ZTree:
    """The affected entity znodes (and, for `topic_subtrees`, their partitions and states) as a ZTree."""
    tree = ZTree(source="ZooKeeper (foreign-write check)")
    pending = [(path, client.get_async(path)) for path in sorted(entity_paths)]
    for topic in sorted(topic_subtrees):
        try:
            partitions = client.get_children(f"{topic}/partitions")
        except NoNodeError:
            continue
        tree.nodes[f"{topic}/partitions"] = ZNode(f"{topic}/partitions", None)
        for p in partitions:
            pending.append((f"{topic}/partitions/{p}", client.get_async(f"{topic}/partitions/{p}")))
            pending.append(
                (f"{topic}/partitions/{p}/state", client.get_async(f"{topic}/partitions/{p}/state"))
            )
    for path, reply in pending:
        try:
            data, stat = reply.get()
        except NoNodeError:
            continue
        tree.nodes[path] = ZNode(
            path,
            data,
            Stat(czxid=stat.czxid, mzxid=stat.mzxid, version=stat.version, data_length=stat.data_length),
        )
    return tree
