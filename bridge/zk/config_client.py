"""Kafka's ZkConfigMigrationClient write side: broker and topic configs, client quotas and SCRAM credentials.

Read beside core/src/main/scala/kafka/zk/migration/ZkConfigMigrationClient.scala (writeConfigs,
deleteConfigs, writeClientQuotas and their tryWriteEntityConfig); every write is followed by its config
change notification.
"""

from __future__ import annotations

import logging

from bridge.zk.leadership import (
    CreateRequest,
    DeleteRequest,
    MigrationClientError,
    MigrationLeadershipState,
    SetDataRequest,
    raise_for_results,
)
from bridge.zk.notifications import ancestry, config_change
from bridge.zk.operations import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    DeleteConfigs,
    WriteClientQuotas,
    WriteConfigs,
)
from bridge.zk.planning import NO_WRITE, Plan, PlanContext, Planner, fused
from migrate.errors import InvalidRequestError
from migrate.zk import paths
from migrate.zk.model import ScramCredential
from migrate.zk.protocol import NONODE
from migrate.zk.znodes.configs import encode_config_map, encode_scram_credential, kafka_quota_text

log = logging.getLogger(__name__)

SCRAM_MECHANISM_NAMES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}

# DynamicConfig.User/Client/Ip: the quota keys each entity type accepts.
_USER_CLIENT_QUOTA_KEYS = frozenset(
    {"producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate"}
)
_IP_QUOTA_KEYS = frozenset({"connection_creation_rate"})

_CONFIG_TYPES = {TOPIC_RESOURCE: paths.CONFIG_TOPICS, BROKER_RESOURCE: paths.CONFIG_BROKERS}


def entity_config(ctx: PlanContext, entity_type: str, entity: str, data: bytes, parent: str) -> Plan:
    """Kafka's tryWriteEntityConfig twice: SetData, and on NONODE createRecursive(parent) then Create;
    then (it landed) the config change notification."""
    path = paths.config_path(f"{entity_type}/{entity}")
    note = config_change(f"{entity_type}/{entity}")

    def kafka_path(state: MigrationLeadershipState) -> MigrationLeadershipState:
        notifier = ctx.notifier
        outcome = notifier.noted_write([SetDataRequest(path, data)], state, [note])
        if outcome.results[0].code == NONODE:
            parents = notifier.parent_creates(parent)
            outcome = notifier.noted_write([*parents, CreateRequest(path, data)], state, [note])
            if not outcome.results[-1].ok:
                raise_for_results(
                    f"Could not write {path} on second attempt when using Create", outcome.results[-1:], where=ctx.where
                )
            notifier.learn(ancestry(parent))
        elif not outcome.results[0].ok:
            raise_for_results(f"Could not write {path}", outcome.results, where=ctx.where)
        return outcome.state

    return fused([SetDataRequest(path, data)], kafka_path, [note])


def write_configs(ctx: PlanContext, op: WriteConfigs, state: MigrationLeadershipState) -> Plan:
    entity_type = _CONFIG_TYPES.get(op.resource_type)
    if entity_type is None:
        log.error(
            "Not updating ZK for config resource %d/%r: not a broker or topic",
            op.resource_type,
            op.resource_name,
        )
        return NO_WRITE
    entity = op.resource_name or paths.DEFAULT_ENTITY
    encode = ctx.password_encoder
    configs = {k: encode(k, v) for k, v in op.configs.items()} if encode else dict(op.configs)
    path = paths.config_path(f"{entity_type}/{entity}")
    data = encode_config_map(path, configs, ctx.java8)
    return entity_config(ctx, entity_type, entity, data, paths.config_type_path(entity_type))


def delete_configs(ctx: PlanContext, op: DeleteConfigs, state: MigrationLeadershipState) -> Plan:
    entity_type = _CONFIG_TYPES.get(op.resource_type)
    if entity_type is None:
        log.error(
            "Not deleting ZK configs of resource %d/%r: not a broker or topic",
            op.resource_type,
            op.resource_name,
        )
        return NO_WRITE
    entity = op.resource_name or paths.DEFAULT_ENTITY
    request = DeleteRequest(paths.config_path(f"{entity_type}/{entity}"))
    # Kafka 3.9 interpolates an Option here and writes "Some(brokers)/1", which brokers cannot parse.
    note = config_change(f"{entity_type}/{entity}")

    def kafka_path(state: MigrationLeadershipState) -> MigrationLeadershipState:
        outcome = ctx.notifier.noted_write([request], state, [note])
        result = outcome.results[0]
        if result.code == NONODE:
            log.info("Did not delete %s/%s configs since the znode did not exist", entity_type, entity)
            return state
        if not result.ok:
            raise_for_results(f"Could not delete {entity_type}/{entity} configs", outcome.results, where=ctx.where)
        return outcome.state

    return fused([request], kafka_path, [note])


def write_client_quotas(ctx: PlanContext, op: WriteClientQuotas, state: MigrationLeadershipState) -> Plan:
    names = dict(op.entity)
    user, client, ip = (
        _zk_entity_name(op, names[t]) if t in names else None for t in ("user", "client-id", "ip")
    )
    if user is not None:
        entity_type, keys = paths.CONFIG_USERS, _USER_CLIENT_QUOTA_KEYS
        entity = user if client is None else f"{user}/clients/{client}"
        parent = paths.config_path(f"{paths.CONFIG_USERS}/{user}/clients") if client is not None else None
    elif client is not None:
        entity_type, entity, keys, parent = paths.CONFIG_CLIENTS, client, _USER_CLIENT_QUOTA_KEYS, None
    elif ip is not None:
        entity_type, entity, keys, parent = paths.CONFIG_IPS, ip, _IP_QUOTA_KEYS, None
    else:
        log.error("Skipping unknown client quota entity %s", op.entity)
        return NO_WRITE
    config: dict[str, str] = {}
    for key, value in op.quotas.items():
        if key not in keys:
            raise MigrationClientError(f"client quota entity {op.entity}: invalid configuration key {key}")
        config[key] = kafka_quota_text(key, value)
    for mechanism_id in sorted(op.scram):
        mechanism = SCRAM_MECHANISM_NAMES.get(mechanism_id)
        if mechanism is None or entity_type != paths.CONFIG_USERS or client is not None:
            raise InvalidRequestError(
                f"client quota entity {op.entity}: cannot store SCRAM mechanism {mechanism_id} there"
            )
        c = op.scram[mechanism_id]
        config[mechanism] = encode_scram_credential(
            ScramCredential(mechanism, c.salt, c.stored_key, c.server_key, c.iterations)
        )
    path = paths.config_path(f"{entity_type}/{entity}")
    data = encode_config_map(path, config, ctx.java8)
    return entity_config(ctx, entity_type, entity, data, parent or paths.config_type_path(entity_type))


def _zk_entity_name(op: WriteClientQuotas, name: str | None) -> str:
    """A quota entity's znode name: sanitised, `<default>` for the default entity."""
    if name is None:
        return paths.DEFAULT_ENTITY
    if not name:
        raise InvalidRequestError(f"client quota entity {op.entity}: an empty name cannot be a znode")
    return paths.sanitize(name)


PLANNERS: dict[type, Planner] = {
    WriteConfigs: write_configs,
    DeleteConfigs: delete_configs,
    WriteClientQuotas: write_client_quotas,
}
