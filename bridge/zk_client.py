"""Kafka's ZkMigrationClient write side: each dual-write operation as Kafka's exact znodes, fenced.

`ZkMigrationClient.apply(operation, state)` performs one `bridge.operations` operation the way Kafka 3.9's
ZkTopicMigrationClient, ZkConfigMigrationClient, ZkAclMigrationClient, ZkDelegationTokenMigrationClient and
ZkMigrationClient do (migration-protocol.md §7.2): the same requests, each through the fenced multi of
`bridge.leadership`, and the same result handling. Every znode's bytes come from `migrate.zk.znodes`.

Where Kafka 3.9 is evidently wrong we do what it meant instead (each place says so): deleteConfigs'
notification names `brokers/1`, not `Some(brokers)/1`; a partition's `state` child is deleted before the
partition; a failed producer-id or ACL write raises instead of passing silently.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from kazoo.client import KazooClient
from kazoo.security import ACL

from bridge.leadership import (
    NODEEXISTS,
    NONODE,
    OK,
    CreateRequest,
    DeleteRequest,
    MigrationClientError,
    MigrationLeadershipState,
    SetDataRequest,
    ZkLeadershipClient,
    ZkRequest,
    ZkResult,
    raise_for_results,
)
from bridge.operations import (
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
from migrate.errors import InvalidRequestError
from migrate.kraft.image import PartitionRegistration
from migrate.zk import paths, znodes
from migrate.zk.model import (
    AclChangeNotification,
    AclEntry,
    AclOperation,
    AclPermissionType,
    AclResource,
    ConfigChangeNotification,
    DelegationToken,
    PartitionState,
    PatternType,
    ProducerIdBlock,
    ResourcePattern,
    ResourceType,
    ScramCredential,
    Topic,
)

log = logging.getLogger(__name__)

PRODUCER_ID_BLOCK_SIZE = 1000
"""ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE: the block Kafka's dual-write records after the next id."""

SCRAM_MECHANISM_NAMES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}

# DynamicConfig.User/Client/Ip: the quota keys each entity type accepts.
_USER_CLIENT_QUOTA_KEYS = frozenset(
    {"producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate"}
)
_IP_QUOTA_KEYS = frozenset({"connection_creation_rate"})

_CONFIG_TYPES = {TOPIC_RESOURCE: paths.CONFIG_TOPICS, BROKER_RESOURCE: paths.CONFIG_BROKERS}

PasswordEncoder = Callable[[str, str], str]
"""(config name, value) → stored text; Kafka encrypts dynamic password configs with password.encoder.secret."""


class ZkMigrationClient(ZkLeadershipClient):
    """Kafka's ZkMigrationClient over a started kazoo client whose chroot is Kafka's.

    `password_encoder` turns a config value into what ZooKeeper stores; without one values are written as
    given, which is what Kafka does when `password.encoder.secret` is unset (its no-op encoder). `java8`
    picks the java.util.Properties key order of config znodes (Kafka on Java 8 instead of 11+).
    """

    def __init__(
        self,
        client: KazooClient,
        *,
        password_encoder: PasswordEncoder | None = None,
        java8: bool = False,
        acl_provider: Callable[[str], list[ACL]] | None = None,
        clock: Callable[[], int] | None = None,
        retry_timeout_s: float = 30.0,
    ) -> None:
        super().__init__(client, acl_provider=acl_provider, clock=clock, retry_timeout_s=retry_timeout_s)
        self.password_encoder = password_encoder
        self.java8 = java8
        self._handlers: dict[type, Callable[[Any, MigrationLeadershipState], MigrationLeadershipState]] = {
            CreateTopic: self._create_topic,
            UpdateTopic: self._update_topic,
            DeleteTopic: self._delete_topic,
            ClearPendingTopicDeletions: self._clear_pending_topic_deletions,
            CreateTopicPartitions: self._create_topic_partitions,
            UpdateTopicPartitions: self._update_topic_partitions,
            DeleteTopicPartitions: self._delete_topic_partitions,
            WriteConfigs: self._write_configs,
            DeleteConfigs: self._delete_configs,
            WriteClientQuotas: self._write_client_quotas,
            WriteProducerId: self._write_producer_id,
            WriteResourceAcls: self._write_resource_acls,
            DeleteResourceAcls: self._delete_resource_acls,
            WriteDelegationToken: self._write_delegation_token,
            DeleteDelegationToken: self._delete_delegation_token,
        }

    def apply(self, operation: ZkOperation, state: MigrationLeadershipState) -> MigrationLeadershipState:
        """Perform `operation` in ZooKeeper; returns the state to use for the next write."""
        handler = self._handlers.get(type(operation))
        if handler is None:
            raise InvalidRequestError(f"{type(operation).__name__} is not a ZooKeeper dual-write operation")
        return handler(operation, state)

    # ------------------------------------------------------------------ notifications (unfenced)

    def create_config_change_notification(self, entity_path: str) -> str:
        """Kafka's createConfigChangeNotification: `/config/changes/config_change_<seq>`; returns its path."""
        self.create_recursive(paths.CONFIG_CHANGES)
        data = znodes.encode_config_change(ConfigChangeNotification(entity_path, 2))
        prefix = f"{paths.CONFIG_CHANGES}/{paths.CONFIG_CHANGE_PREFIX}"
        result = self.request(CreateRequest(prefix, data), sequential=True)
        if not result.ok or result.created_path is None:
            raise_for_results(f"config change notification for {entity_path}", [result])
        return result.created_path

    def _acl_change_notification(self, pattern: ResourcePattern) -> None:
        """The literal or extended ACL change event ZK brokers' authorizers watch (result unchecked, as Kafka)."""
        if pattern.pattern_type == PatternType.LITERAL:
            store = paths.KAFKA_ACL_CHANGES
            data = znodes.encode_acl_change(AclChangeNotification(pattern))
        else:
            store = paths.KAFKA_ACL_EXTENDED_CHANGES
            data = znodes.encode_extended_acl_change(AclChangeNotification(pattern, 1))
        prefix = f"{store}/{paths.ACL_CHANGE_PREFIX}"
        result = self.request(CreateRequest(prefix, data), sequential=True)
        if not result.ok:
            # Kafka ignores this result; the store exists wherever an AclAuthorizer ever ran.
            log.warning("ACL change notification for %s not written: %s", pattern, result)

    # ------------------------------------------------------------------ topics

    def _topic_znode(
        self, name: str, topic_id: uuid.UUID, partitions: Mapping[int, PartitionRegistration]
    ) -> bytes:
        topic = Topic(
            name=name,
            topic_id=topic_id,
            partitions={p: list(r.replicas) for p, r in partitions.items()},
            adding_replicas={p: list(r.adding_replicas) for p, r in partitions.items() if r.adding_replicas},
            removing_replicas={
                p: list(r.removing_replicas) for p, r in partitions.items() if r.removing_replicas
            },
            version=3,
        )
        return znodes.encode_topic(topic)

    @staticmethod
    def _state_znode(registration: PartitionRegistration, state: MigrationLeadershipState) -> bytes:
        # Kafka writes the KRaft controller epoch here, not the ZK one (migration-protocol.md §13 #10).
        return znodes.encode_partition_state(
            PartitionState(
                leader=registration.leader,
                leader_epoch=registration.leader_epoch,
                isr=list(registration.isr),
                controller_epoch=state.kraft_controller_epoch,
                leader_recovery_state=registration.leader_recovery_state,
            )
        )

    def _partition_creates(
        self, topic: str, partitions: Mapping[int, PartitionRegistration], state: MigrationLeadershipState
    ) -> list[ZkRequest]:
        requests: list[ZkRequest] = [CreateRequest(paths.partitions_path(topic))]
        for p in sorted(partitions):
            requests.append(CreateRequest(paths.partition_path(topic, p)))
            requests.append(
                CreateRequest(paths.partition_state_path(topic, p), self._state_znode(partitions[p], state))
            )
        return requests

    def _create_topic(self, op: CreateTopic, state: MigrationLeadershipState) -> MigrationLeadershipState:
        topic_path = paths.topic_path(op.name)
        config_path = paths.config_path(f"{paths.CONFIG_TOPICS}/{op.name}")
        requests: list[ZkRequest] = [
            CreateRequest(topic_path, self._topic_znode(op.name, op.topic_id, op.partitions)),
            CreateRequest(config_path, znodes.encode_config_map(config_path, {}, self.java8)),
            *self._partition_creates(op.name, op.partitions, state),
        ]
        outcome = self.fenced_write(requests, state)
        codes = outcome.codes_by_path()
        if codes[topic_path] == NODEEXISTS:
            # Already created (a replay). Kafka returns the old state here; we keep the /migration version the
            # write actually left, which is the same unless the final create landed (§13 #6).
            return outcome.state
        if all(code == OK for code in codes.values()):
            return outcome.state
        raise_for_results(f"Failed to create or update topic {op.name}", outcome.results)

    def _update_topic(self, op: UpdateTopic, state: MigrationLeadershipState) -> MigrationLeadershipState:
        request = SetDataRequest(
            paths.topic_path(op.name), self._topic_znode(op.name, op.topic_id, op.partitions)
        )
        return self._all_ok(f"Failed to update topic metadata: {op.name}", [request], state)

    def _delete_topic(self, op: DeleteTopic, state: MigrationLeadershipState) -> MigrationLeadershipState:
        topic_path = paths.topic_path(op.name)
        requests: list[ZkRequest] = [DeleteRequest(p) for p in self._descendants(topic_path)]
        requests.append(DeleteRequest(paths.config_path(f"{paths.CONFIG_TOPICS}/{op.name}")))
        requests.append(DeleteRequest(topic_path))
        outcome = self.fenced_write(requests, state)
        if outcome.results[-1].ok:
            return outcome.state
        raise_for_results(f"Failed to delete topic {op.name}", outcome.results)

    def _descendants(self, path: str) -> list[str]:
        """Every znode below `path`, children before their parents (Kafka's recursiveChildren order)."""
        out: list[str] = []
        for child in sorted(self.get_children(path) or ()):
            child_path = f"{path}/{child}"
            out.extend(self._descendants(child_path))
            out.append(child_path)
        return out

    def _clear_pending_topic_deletions(
        self, op: ClearPendingTopicDeletions, state: MigrationLeadershipState
    ) -> MigrationLeadershipState:
        requests: list[ZkRequest] = [DeleteRequest(paths.delete_topic_path(t)) for t in op.names]
        return self._all_ok(f"Failed to delete pending topic deletions: {sorted(op.names)}", requests, state)

    def _create_topic_partitions(
        self, op: CreateTopicPartitions, state: MigrationLeadershipState
    ) -> MigrationLeadershipState:
        requests: list[ZkRequest] = []
        for topic, partitions in op.partitions.items():
            requests.extend(self._partition_creates(topic, partitions, state))
        outcome = self.fenced_write(requests, state)
        if all(code in (OK, NODEEXISTS) for code in outcome.codes_by_path().values()):
            return outcome.state
        raise_for_results("Failed to create partition states", outcome.results)

    def _update_topic_partitions(
        self, op: UpdateTopicPartitions, state: MigrationLeadershipState
    ) -> MigrationLeadershipState:
        requests: list[ZkRequest] = [
            SetDataRequest(paths.partition_state_path(topic, p), self._state_znode(registration, state))
            for topic, partitions in op.partitions.items()
            for p, registration in partitions.items()
        ]
        return self._all_ok("Failed to update partition states", requests, state)

    def _delete_topic_partitions(
        self, op: DeleteTopicPartitions, state: MigrationLeadershipState
    ) -> MigrationLeadershipState:
        # Kafka deletes only `<p>`, which ZooKeeper refuses while `<p>/state` exists (§13 #5); we delete
        # the state first and accept it being gone already.
        requests: list[ZkRequest] = []
        for topic, ids in op.partitions.items():
            for p in ids:
                requests.append(DeleteRequest(paths.partition_state_path(topic, p)))
                requests.append(DeleteRequest(paths.partition_path(topic, p)))
        outcome = self.fenced_write(requests, state)
        for result in outcome.results:
            if not (result.ok or (result.code == NONODE and result.path.endswith("/state"))):
                raise_for_results("Failed to delete partition states", outcome.results)
        return outcome.state

    def _all_ok(
        self, what: str, requests: list[ZkRequest], state: MigrationLeadershipState
    ) -> MigrationLeadershipState:
        outcome = self.fenced_write(requests, state)
        if all(r.ok for r in outcome.results):
            return outcome.state
        raise_for_results(what, outcome.results)

    # ------------------------------------------------------------------ configs and quotas

    def _write_entity_config(
        self, entity_type: str, entity: str, data: bytes, parent: str, state: MigrationLeadershipState
    ) -> MigrationLeadershipState:
        """Kafka's tryWriteEntityConfig twice: SetData, and on NONODE createRecursive(parent) then Create."""
        path = paths.config_path(f"{entity_type}/{entity}")
        outcome = self.fenced_write([SetDataRequest(path, data)], state)
        if outcome.results[0].code == NONODE:
            self.create_recursive(parent)
            outcome = self.fenced_write([CreateRequest(path, data)], state)
            if not outcome.results[0].ok:
                raise_for_results(
                    f"Could not write {path} on second attempt when using Create", outcome.results
                )
        elif not outcome.results[0].ok:
            raise_for_results(f"Could not write {path}", outcome.results)
        self.create_config_change_notification(f"{entity_type}/{entity}")
        return outcome.state

    def _write_configs(self, op: WriteConfigs, state: MigrationLeadershipState) -> MigrationLeadershipState:
        entity_type = _CONFIG_TYPES.get(op.resource_type)
        if entity_type is None:
            log.error(
                "Not updating ZK for config resource %d/%r: not a broker or topic",
                op.resource_type,
                op.resource_name,
            )
            return state
        entity = op.resource_name or paths.DEFAULT_ENTITY
        encode = self.password_encoder
        configs = {k: encode(k, v) for k, v in op.configs.items()} if encode else dict(op.configs)
        path = paths.config_path(f"{entity_type}/{entity}")
        data = znodes.encode_config_map(path, configs, self.java8)
        return self._write_entity_config(
            entity_type, entity, data, paths.config_type_path(entity_type), state
        )

    def _delete_configs(self, op: DeleteConfigs, state: MigrationLeadershipState) -> MigrationLeadershipState:
        entity_type = _CONFIG_TYPES.get(op.resource_type)
        if entity_type is None:
            log.error(
                "Not deleting ZK configs of resource %d/%r: not a broker or topic",
                op.resource_type,
                op.resource_name,
            )
            return state
        entity = op.resource_name or paths.DEFAULT_ENTITY
        outcome = self.fenced_write([DeleteRequest(paths.config_path(f"{entity_type}/{entity}"))], state)
        result = outcome.results[0]
        if result.code == NONODE:
            log.info("Did not delete %s/%s configs since the znode did not exist", entity_type, entity)
            return state
        if not result.ok:
            raise_for_results(f"Could not delete {entity_type}/{entity} configs", outcome.results)
        # Kafka 3.9 interpolates an Option here and writes "Some(brokers)/1", which brokers cannot parse.
        self.create_config_change_notification(f"{entity_type}/{entity}")
        return outcome.state

    def _write_client_quotas(
        self, op: WriteClientQuotas, state: MigrationLeadershipState
    ) -> MigrationLeadershipState:
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
            return state
        config: dict[str, str] = {}
        for key, value in op.quotas.items():
            if key not in keys:
                raise MigrationClientError(
                    f"client quota entity {op.entity}: invalid configuration key {key}"
                )
            config[key] = znodes.kafka_quota_text(key, value)
        for mechanism_id in sorted(op.scram):
            mechanism = SCRAM_MECHANISM_NAMES.get(mechanism_id)
            if mechanism is None or entity_type != paths.CONFIG_USERS or client is not None:
                raise InvalidRequestError(
                    f"client quota entity {op.entity}: cannot store SCRAM mechanism {mechanism_id} there"
                )
            c = op.scram[mechanism_id]
            config[mechanism] = znodes.encode_scram_credential(
                ScramCredential(mechanism, c.salt, c.stored_key, c.server_key, c.iterations)
            )
        path = paths.config_path(f"{entity_type}/{entity}")
        data = znodes.encode_config_map(path, config, self.java8)
        return self._write_entity_config(
            entity_type, entity, data, parent or paths.config_type_path(entity_type), state
        )

    # ------------------------------------------------------------------ producer ids, ACLs, tokens

    def _write_producer_id(
        self, op: WriteProducerId, state: MigrationLeadershipState
    ) -> MigrationLeadershipState:
        block = ProducerIdBlock(-1, op.next_producer_id, op.next_producer_id + PRODUCER_ID_BLOCK_SIZE - 1)
        request = SetDataRequest(paths.LATEST_PRODUCER_ID_BLOCK, znodes.encode_producer_id_block(block))
        # Kafka ignores this result; a lost block would let a reverted ZK controller reuse producer ids.
        return self._all_ok(f"Could not write next producer id {op.next_producer_id}", [request], state)

    def _write_resource_acls(
        self, op: WriteResourceAcls, state: MigrationLeadershipState
    ) -> MigrationLeadershipState:
        pattern = _acl_pattern(op.pattern)
        entries = _acl_entries(op)
        path = paths.acl_resource_path(
            pattern.pattern_type.name, pattern.resource_type.pascal_name, pattern.name
        )
        data = znodes.encode_acls(AclResource(pattern, entries))
        outcome = self.fenced_write([SetDataRequest(path, data)], state)
        if outcome.results[0].code == NONODE:
            outcome = self.fenced_write([CreateRequest(path, data)], state)
        if not outcome.results[0].ok:
            # Kafka writes the notification and carries on whatever the code; we report the failure.
            raise_for_results(
                f"Could not write ACLs for resource pattern {_show_pattern(pattern)}", outcome.results
            )
        self._acl_change_notification(pattern)
        return outcome.state

    def _delete_resource_acls(
        self, op: DeleteResourceAcls, state: MigrationLeadershipState
    ) -> MigrationLeadershipState:
        pattern = _acl_pattern(op.pattern)
        path = paths.acl_resource_path(
            pattern.pattern_type.name, pattern.resource_type.pascal_name, pattern.name
        )
        outcome = self.fenced_write([DeleteRequest(path)], state)
        if outcome.results[0].code not in (OK, NONODE):
            raise_for_results(
                f"Could not delete ACLs for resource pattern {_show_pattern(pattern)}", outcome.results
            )
        self._acl_change_notification(pattern)
        return outcome.state

    def _write_delegation_token(
        self, op: WriteDelegationToken, state: MigrationLeadershipState
    ) -> MigrationLeadershipState:
        token = op.token
        if token is None:
            raise InvalidRequestError("WriteDelegationToken without a token")
        model = DelegationToken(
            token_id=token.token_id,
            owner=token.owner,
            token_requester=token.requester,
            renewers=list(token.renewers),
            issue_timestamp=token.issue_timestamp,
            max_timestamp=token.max_timestamp,
            expiry_timestamp=token.expiration_timestamp,
            version=3,
        )
        path = paths.token_path(token.token_id)
        data = znodes.encode_delegation_token(model)
        outcome = self.fenced_write([SetDataRequest(path, data)], state)
        if outcome.results[0].code == NONODE:
            outcome = self.fenced_write([CreateRequest(path, data)], state)
        if not outcome.results[0].ok:
            raise_for_results(f"Could not write delegation token {token.token_id}", outcome.results)
        return outcome.state

    def _delete_delegation_token(
        self, op: DeleteDelegationToken, state: MigrationLeadershipState
    ) -> MigrationLeadershipState:
        outcome = self.fenced_write([DeleteRequest(paths.token_path(op.token_id))], state)
        result: ZkResult = outcome.results[0]
        if result.code == NONODE:
            log.info("Did not delete delegation token %s since the znode did not exist", op.token_id)
            return state
        if not result.ok:
            raise_for_results(f"Could not delete delegation token {op.token_id}", outcome.results)
        return outcome.state


def _zk_entity_name(op: WriteClientQuotas, name: str | None) -> str:
    """A quota entity's znode name: sanitised, `<default>` for the default entity."""
    if name is None:
        return paths.DEFAULT_ENTITY
    if not name:
        raise InvalidRequestError(f"client quota entity {op.entity}: an empty name cannot be a znode")
    return paths.sanitize(name)


def _acl_pattern(key: ResourcePatternKey) -> ResourcePattern:
    try:
        resource_type, pattern_type = ResourceType(key.resource_type), PatternType(key.pattern_type)
    except ValueError:
        raise InvalidRequestError(
            f"ACL resource pattern {key}: unknown resource type or pattern type code"
        ) from None
    if resource_type in (ResourceType.UNKNOWN, ResourceType.ANY) or pattern_type not in (
        PatternType.LITERAL,
        PatternType.PREFIXED,
    ):
        raise InvalidRequestError(
            f"ACL resource pattern {key}: ZooKeeper stores only concrete resource types with LITERAL or "
            f"PREFIXED patterns"
        )
    return ResourcePattern(resource_type, key.name, pattern_type)


def _acl_entries(op: WriteResourceAcls) -> list[AclEntry]:
    """The ACEs of `op` without duplicates (Kafka writes a Set), in the given order."""
    out: dict[AclEntry, None] = {}
    for binding in op.acls:
        try:
            entry = AclEntry(
                binding.principal,
                binding.host,
                AclOperation(binding.operation),
                AclPermissionType(binding.permission_type),
            )
        except ValueError:
            raise InvalidRequestError(
                f"ACL on {op.pattern}: unknown operation {binding.operation} or permission "
                f"{binding.permission_type}"
            ) from None
        out[entry] = None
    return list(out)


def _show_pattern(pattern: ResourcePattern) -> str:
    return f"{pattern.resource_type.name}:{pattern.pattern_type.name}:{pattern.name}"
