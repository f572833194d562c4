"""Foreign writes turned into KRaft records that make the image match ZooKeeper (pure)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from bridge.api import RecordAndVersion
from bridge.zk.foreign_writes.classify import aces_in_image, aces_in_zk, scram_in_image, scram_in_zk
from bridge.zk.foreign_writes.entities import (
    ForeignWrite,
    acl_pattern,
    quota_entity,
)
from bridge.zk.operations import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
)
from migrate.kraft import records as rec
from migrate.kraft.image import (
    ConfigResource,
    MetadataImage,
)
from migrate.translate import delegation_token_record, kafka_random_uuid
from migrate.zk import paths
from migrate.zk.model import (
    AclResource,
    ResourcePattern,
    ZkClusterModel,
)

log = logging.getLogger(__name__)


@dataclass(slots=True)
class ImportPlan:
    """Records that make the image match ZooKeeper, and the foreign writes that cannot be imported (why)."""

    records: list[RecordAndVersion] = field(default_factory=list)
    not_imported: list[tuple[ForeignWrite, str]] = field(default_factory=list)


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
            pattern = acl_pattern(path)
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
    entity = quota_entity(entity_path_)
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
    zk_scram, kraft_scram = scram_in_zk(cfg), scram_in_image(image, user)
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
    kraft = aces_in_image(image, pattern)
    ours = aces_in_zk(resource)
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
