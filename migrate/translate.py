"""Translate a ZooKeeper-mode cluster into the KRaft record lists Kafka 3.9's migration produces.

Order and content follow `ZkMigrationClient.readAllMetadata` (migration-protocol.md §6.2): topics, broker
configs, client quotas with SCRAM credentials, the producer-id block, ACLs, delegation tokens. Each
element of `record_lists` is one list Kafka hands to its batch consumer, so batching can be reproduced.

Iteration order *within* a step follows ZooKeeper child lists and Java hash sets in Kafka, which is not
reproducible; we use sorted znode names (and the stored order of config keys and ACL entries) instead.
ACL resources are the exception: Kafka sorts them, and so do we.
"""

from __future__ import annotations

import base64
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, Literal

from migrate.errors import InvalidRequestError, ZnodeFormatError
from migrate.gcpause import gc_paused
from migrate.kraft import metadata_version as mvs
from migrate.kraft import records as rec
from migrate.kraft.metadata_version import MetadataVersion
from migrate.zk import paths
from migrate.zk.model import (
    SCRAM_MECHANISMS,
    AclResource,
    ClientQuotaConfig,
    DelegationToken,
    Topic,
    ZkClusterModel,
)

RecordAndVersion = tuple[Any, int]
"""A metadata record (one of `migrate.kraft.records`) and the version it is written at."""
MissingStatePolicy = Literal["fail", "repair"]

STEP_TOPICS = "topics"
STEP_BROKER_CONFIGS = "broker_configs"
STEP_CLIENT_QUOTAS = "client_quotas"
STEP_PRODUCER_IDS = "producer_ids"
STEP_ACLS = "acls"
STEP_DELEGATION_TOKENS = "delegation_tokens"
STEPS = (
    STEP_TOPICS,
    STEP_BROKER_CONFIGS,
    STEP_CLIENT_QUOTAS,
    STEP_PRODUCER_IDS,
    STEP_ACLS,
    STEP_DELEGATION_TOKENS,
)

ACL_LIST_SIZE = 100
"""ZkMigrationClient.MaxBatchSize: the ACL lists of one resource are cut every 100 records."""
CONFIG_RESOURCE_TOPIC = 2
CONFIG_RESOURCE_BROKER = 4
SCRAM_MECHANISM_IDS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
NO_LEADER = -1

_ZERO_UUID = uuid.UUID(int=0)
_METADATA_TOPIC_ID = uuid.UUID(int=1)
# DynamicBrokerConfig stores password configs encrypted (PasswordEncoder's "key:value,..." format).
_ENCRYPTED_PASSWORD = re.compile(r"(^|,)encryptedPassword:")


@dataclass(slots=True)
class RecordList:
    """One list as Kafka's migration hands it to the batch consumer, tagged with the step that made it."""

    step: str
    records: list[RecordAndVersion]


@dataclass(slots=True)
class TranslationResult:
    """The migrated record lists in Kafka's order, plus what was noticed on the way."""

    metadata_version: MetadataVersion
    lists: list[RecordList] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    broker_ids: set[int] = field(default_factory=set)
    """Broker ids seen in assignments and broker configs (Kafka's brokerIdConsumer, for the log line)."""

    @property
    def record_lists(self) -> list[list[RecordAndVersion]]:
        return [item.records for item in self.lists]

    def records(self, step: str | None = None) -> list[RecordAndVersion]:
        """All records (of one step, if given) in order."""
        return [r for item in self.lists if step is None or item.step == step for r in item.records]

    def lists_of(self, step: str) -> list[list[RecordAndVersion]]:
        return [item.records for item in self.lists if item.step == step]

    @property
    def uses_transactions(self) -> bool:
        return self.metadata_version.is_metadata_transaction_supported()


def kafka_random_uuid(source: Callable[[], uuid.UUID] = uuid.uuid4) -> uuid.UUID:
    """Kafka's Uuid.randomUuid: never the zero or metadata-topic id, never text starting with '-'."""
    while True:
        value = source()
        if value in (_ZERO_UUID, _METADATA_TOPIC_ID):
            continue
        if base64.urlsafe_b64encode(value.bytes).startswith(b"-"):
            continue
        return value


def delegation_token_record(token: DelegationToken) -> Any:
    """The DelegationTokenRecord (v0) Kafka's migration writes for a ZooKeeper token znode."""
    return rec.DelegationTokenRecord(
        owner=token.owner,
        requester=token.token_requester,
        renewers=list(token.renewers),
        issue_timestamp=token.issue_timestamp,
        max_timestamp=token.max_timestamp,
        expiration_timestamp=token.expiry_timestamp,
        token_id=token.token_id,
    )


def translate(
    model: ZkClusterModel,
    *,
    metadata_version: MetadataVersion | str | int = mvs.LATEST_PRODUCTION,
    on_missing_state: MissingStatePolicy = "fail",
    acl_id_factory: Callable[[], uuid.UUID] = uuid.uuid4,
    topic_id_factory: Callable[[], uuid.UUID] = uuid.uuid4,
) -> TranslationResult:
    """The record lists of Kafka 3.9's `readAllMetadata` for `model` at `metadata_version`.

    `on_missing_state`: where Kafka silently invents state (a partition without a state znode) or aborts
    (a topic without a topic id), "fail" raises an error naming the znode and "repair" does what Kafka
    would do (generating a topic id) and reports it as a warning.
    """
    if on_missing_state not in ("fail", "repair"):
        raise InvalidRequestError(f"on_missing_state must be 'fail' or 'repair', not {on_missing_state!r}")
    mv = mvs.coerce(metadata_version)
    if not mv.is_migration_supported():
        raise InvalidRequestError(
            f"metadata.version {mv.name} does not support ZooKeeper migration (needs {mvs.IBP_3_4_IV0.name} or later)"
        )
    t = _Translator(model, mv, on_missing_state == "repair", acl_id_factory, topic_id_factory)
    with gc_paused(promote=True):  # millions of acyclic records: collections would only walk them again
        t.run()
    return t.result


class _Translator:
    def __init__(
        self,
        model: ZkClusterModel,
        mv: MetadataVersion,
        repair: bool,
        acl_id_factory: Callable[[], uuid.UUID],
        topic_id_factory: Callable[[], uuid.UUID],
    ) -> None:
        self.model = model
        self.mv = mv
        self.repair = repair
        self.acl_id_factory = acl_id_factory
        self.topic_id_factory = topic_id_factory
        self.result = TranslationResult(mv)

    def emit(self, step: str, records: list[RecordAndVersion]) -> None:
        if records:
            self.result.lists.append(RecordList(step, records))

    def warn(self, message: str) -> None:
        self.result.warnings.append(message)

    def run(self) -> None:
        if not self.mv.is_metadata_transaction_supported():
            # QuorumController.MigrationRecordConsumer.beginMigration logs this and carries on.
            self.warn(
                f"metadata.version {self.mv.name} does not support metadata transactions "
                f"(needs {mvs.IBP_3_6_IV1.name}): the migration is written without Begin/EndTransaction, "
                f"which is not safe since a controller failover or processing error may leave partially "
                f"migrated metadata; Kafka 3.9 also refuses to start a migration on an empty log below "
                f"{mvs.IBP_3_6_IV1.name}"
            )
        self.topics()
        self.broker_configs()
        self.client_quotas()
        self.producer_ids()
        self.acls()
        self.delegation_tokens()

    # ------------------------------------------------------------------ step 1: topics

    def topics(self) -> None:
        pending = self.model.pending_topic_deletions
        for name in sorted(self.model.topics):
            if name in pending:
                self.warn(
                    f"topic {name} is pending deletion ({paths.delete_topic_path(name)} exists); "
                    f"it is not migrated, as in Kafka"
                )
                continue
            self.emit(STEP_TOPICS, self.topic_records(self.model.topics[name]))

    def topic_records(self, topic: Topic) -> list[RecordAndVersion]:
        topic_id = topic.topic_id
        if topic_id is None:
            topic_id = self.missing_topic_id(topic)
        out: list[RecordAndVersion] = [(rec.TopicRecord(name=topic.name, topic_id=topic_id), 0)]
        config = self.model.topic_configs.get(topic.name)
        if config is not None:
            # Kafka copies topic configs as stored (password-type decoding never applies to topic keys).
            for key, value in config.config.items():
                out.append(
                    (
                        rec.ConfigRecord(
                            resource_type=CONFIG_RESOURCE_TOPIC,
                            resource_name=topic.name,
                            name=key,
                            value=value,
                        ),
                        0,
                    )
                )
        partitions, adding_map, removing_map = topic.partitions, topic.adding_replicas, topic.removing_replicas
        states = topic.states
        partition_record = rec.PartitionRecord
        append = out.append
        for partition_id in sorted(partitions):
            replicas = list(partitions[partition_id])
            adding = list(adding_map[partition_id]) if partition_id in adding_map else []
            removing = list(removing_map[partition_id]) if partition_id in removing_map else []
            state = states.get(partition_id)
            if state is not None:
                record = partition_record(
                    partition_id,
                    topic_id,
                    replicas,
                    list(state.isr),
                    removing,
                    adding,
                    state.leader,
                    state.leader_recovery_state,
                    state.leader_epoch,
                    state.zk_version,
                )
            else:
                record = partition_record(
                    partition_id=partition_id,
                    topic_id=topic_id,
                    replicas=replicas,
                    removing_replicas=removing,
                    adding_replicas=adding,
                )
                self.missing_state(topic.name, partition_id, record)
            # Kafka writes PartitionRecord v0 during the migration whatever the metadata.version
            # (ZkMigrationClient.migrateTopics); snapshots later use the MV's version.
            append((record, 0))
        # One update per topic, not two per partition.
        broker_ids = self.result.broker_ids
        broker_ids.update(chain.from_iterable(partitions.values()))
        broker_ids.update(chain.from_iterable(adding_map[p] for p in partitions if p in adding_map))
        return out

    def missing_topic_id(self, topic: Topic) -> uuid.UUID:
        path = paths.topic_path(topic.name)
        if not self.repair:
            raise ZnodeFormatError(
                path,
                "has no topic_id; Kafka 3.9 aborts the migration for a topic without a topic id "
                "(use --on-missing-state repair to generate one)",
            )
        topic_id = kafka_random_uuid(self.topic_id_factory)
        text = base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")
        self.warn(
            f"repaired: {path} has no topic_id; generated topic id {text} for topic {topic.name} "
            f"(Kafka 3.9 would abort the migration). Brokers that know the topic without an id will learn "
            f"this one from KRaft; write it to the topic znode too if ZooKeeper stays in use"
        )
        return topic_id

    def missing_state(self, topic: str, partition_id: int, record: rec.PartitionRecord) -> None:
        path = paths.partition_state_path(topic, partition_id)
        replicas = record.replicas
        if not self.repair:
            raise ZnodeFormatError(
                path,
                f"is missing; Kafka 3.9 would silently invent ISR={replicas}, leader="
                f"{replicas[0] if replicas else NO_LEADER}, leader epoch 0 and partition epoch 0 "
                f"(use --on-missing-state repair to accept that)",
            )
        # ZkTopicMigrationClient: ISR = replicas, leader = first replica, epochs 0, RECOVERED. Kafka does
        # this silently and later treats the invented state as present (migration-protocol.md §13 #4),
        # which is why "fail" is our default.
        record.isr = list(replicas)
        record.leader = replicas[0] if replicas else NO_LEADER
        record.leader_epoch = 0
        record.partition_epoch = 0
        record.leader_recovery_state = 0
        self.warn(
            f"repaired: {path} is missing; partition {topic}-{partition_id} initialized with "
            f"ISR={replicas}, leader={record.leader}, leader epoch 0, partition epoch 0 (as Kafka 3.9 does)"
        )

    # ------------------------------------------------------------------ step 2: broker configs

    def broker_configs(self) -> None:
        for name in sorted(self.model.broker_configs):
            config = self.model.broker_configs[name]
            path = paths.config_path(f"{paths.CONFIG_BROKERS}/{name}")
            if name == paths.DEFAULT_ENTITY:
                resource = ""
            else:
                if not re.fullmatch(r"-?[0-9]+", name) or not -(2**31) <= int(name) < 2**31:
                    # Kafka parses the name as a broker id (Integer.valueOf) and fails the migration.
                    raise ZnodeFormatError(
                        path, f"broker config entity {name!r} is neither a broker id nor <default>"
                    )
                resource = name
                self.result.broker_ids.add(int(name))
            records: list[RecordAndVersion] = []
            for key, value in config.config.items():
                if _ENCRYPTED_PASSWORD.search(value):
                    self.warn(
                        f"{path}: {key} is an encrypted dynamic password config; Kafka decrypts it with "
                        f"password.encoder.secret, which zk2kraft does not have, so it is copied encrypted "
                        f"and must be set again once the controller runs"
                    )
                records.append(
                    (
                        rec.ConfigRecord(
                            resource_type=CONFIG_RESOURCE_BROKER,
                            resource_name=resource,
                            name=key,
                            value=value,
                        ),
                        0,
                    )
                )
            self.emit(STEP_BROKER_CONFIGS, records)

    # ------------------------------------------------------------------ step 3: client quotas and SCRAM

    def client_quotas(self) -> None:
        users, clients, user_clients, ips = _group_quota_entities(self.model.client_quotas)
        self.check_scram_supported(users)
        for cfg in users:
            user = cfg.entity_path.split("/", 1)[1]
            for mechanism in SCRAM_MECHANISMS:
                cred = cfg.scram.get(mechanism)
                if cred is None:
                    continue
                record = rec.UserScramCredentialRecord(
                    name=paths.desanitize(user, paths.config_path(cfg.entity_path)),
                    mechanism=SCRAM_MECHANISM_IDS[mechanism],
                    salt=cred.salt,
                    stored_key=cred.stored_key,
                    server_key=cred.server_key,
                    iterations=cred.iterations,
                )
                self.emit(STEP_CLIENT_QUOTAS, [(record, 0)])
            self.emit(STEP_CLIENT_QUOTAS, self.quota_records(cfg))
        for group in (clients, user_clients, ips):
            for cfg in group:
                self.emit(STEP_CLIENT_QUOTAS, self.quota_records(cfg))

    def check_scram_supported(self, users: list[ClientQuotaConfig]) -> None:
        if self.mv.is_scram_supported():
            return
        names = [paths.desanitize(c.entity_path.split("/", 1)[1]) for c in users if c.scram]
        if names:
            # KRaft cannot hold SCRAM credentials below 3.5-IV2: Kafka would migrate them into an image it
            # can never snapshot (ScramImage.write reports the loss), so we refuse up front.
            raise InvalidRequestError(
                f"SCRAM credentials of user(s) {', '.join(sorted(names))} cannot be migrated at metadata.version "
                f"{self.mv.name}: KRaft stores SCRAM credentials only from {mvs.IBP_3_5_IV2.name}; "
                f"use --metadata-version {mvs.IBP_3_5_IV2.name} or later"
            )

    def quota_records(self, cfg: ClientQuotaConfig) -> list[RecordAndVersion]:
        # `<default>` becomes a null EntityName (Kafka 3.9's buildClientQuotaEntityData); releases before
        # KAFKA-16222 wrote "" instead, which KRaft reads as an entity literally named "".
        path = paths.config_path(cfg.entity_path)
        entity = list(_entity_of(cfg, path))
        out: list[RecordAndVersion] = []
        for key, value in cfg.quotas.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ZnodeFormatError(
                    path, f"Unexpected client quota configuration value: {key} -> {value!r}"
                )
            record = rec.ClientQuotaRecord(
                entity=[rec.ClientQuotaRecord.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                key=key,
                value=float(value),
                remove=False,
            )
            out.append((record, 0))
        return out

    # ------------------------------------------------------------------ step 4: producer ids

    def producer_ids(self) -> None:
        block = self.model.producer_id_block
        if block is None:
            return
        record = rec.ProducerIdsRecord(
            broker_id=block.broker_id, broker_epoch=-1, next_producer_id=block.block_end + 1
        )
        self.emit(STEP_PRODUCER_IDS, [(record, 0)])

    # ------------------------------------------------------------------ step 5: ACLs

    def acls(self) -> None:
        for resource in sorted(self.model.acls.values(), key=_acl_resource_order):
            pattern = resource.pattern
            batch: list[RecordAndVersion] = []
            for ace in resource.acls:
                record = rec.AccessControlEntryRecord(
                    id=kafka_random_uuid(self.acl_id_factory),
                    resource_type=int(pattern.resource_type),
                    resource_name=pattern.name,
                    pattern_type=int(pattern.pattern_type),
                    principal=ace.principal,
                    host=ace.host,
                    operation=int(ace.operation),
                    permission_type=int(ace.permission_type),
                )
                batch.append((record, 0))
                if len(batch) == ACL_LIST_SIZE:
                    self.emit(STEP_ACLS, batch)
                    batch = []
            self.emit(STEP_ACLS, batch)

    # ------------------------------------------------------------------ step 6: delegation tokens

    def delegation_tokens(self) -> None:
        tokens = self.model.delegation_tokens
        if not tokens:
            return
        if not self.mv.is_delegation_token_supported():
            # Kafka copies the tokens regardless (migration-protocol.md §6.2), but a KRaft image below
            # 3.6-IV2 cannot hold them: DelegationTokenImage.write reports the loss on every snapshot.
            self.warn(
                f"delegation token(s) {', '.join(sorted(tokens))} are migrated as Kafka does, but "
                f"metadata.version {self.mv.name} cannot store delegation tokens in KRaft (needs "
                f"{mvs.IBP_3_6_IV2.name}); snapshots of this metadata will fail"
            )
        records = [(delegation_token_record(tokens[token_id]), 0) for token_id in sorted(tokens)]
        self.emit(STEP_DELEGATION_TOKENS, records)


def _group_quota_entities(
    quotas: dict[str, ClientQuotaConfig],
) -> tuple[
    list[ClientQuotaConfig], list[ClientQuotaConfig], list[ClientQuotaConfig], list[ClientQuotaConfig]
]:
    """Kafka's visiting order: users, clients, users/clients, ips (each by znode name)."""
    users, clients, user_clients, ips = [], [], [], []
    for entity_path in sorted(quotas, key=lambda p: p.split("/")):
        cfg = quotas[entity_path]
        parts = entity_path.split("/")
        if parts[0] == paths.CONFIG_USERS and len(parts) == 2:
            users.append(cfg)
        elif parts[0] == paths.CONFIG_USERS and len(parts) == 4 and parts[2] == paths.CONFIG_CLIENTS:
            user_clients.append(cfg)
        elif parts[0] == paths.CONFIG_CLIENTS and len(parts) == 2:
            clients.append(cfg)
        elif parts[0] == paths.CONFIG_IPS and len(parts) == 2:
            ips.append(cfg)
        else:
            raise ZnodeFormatError(paths.config_path(entity_path), "is not a client quota entity Kafka knows")
    return users, clients, user_clients, ips


def _entity_of(cfg: ClientQuotaConfig, path: str) -> Iterator[tuple[str, str | None]]:
    """(entity type, name) pairs, user before client-id; `<default>` is the null (default) name."""
    parts = cfg.entity_path.split("/")
    kinds = {paths.CONFIG_USERS: "user", paths.CONFIG_CLIENTS: "client-id", paths.CONFIG_IPS: "ip"}
    for i in range(0, len(parts) - 1, 2):
        name = parts[i + 1]
        yield kinds[parts[i]], None if name == paths.DEFAULT_ENTITY else paths.desanitize(name, path)


def _acl_resource_order(resource: AclResource) -> tuple[int, int, _Descending]:
    """AclAuthorizer.ResourceOrdering: resource type, pattern type, then name descending (Java order)."""
    p = resource.pattern
    return int(p.resource_type), int(p.pattern_type), _Descending(p.name.encode("utf-16-be", "surrogatepass"))


@dataclass(frozen=True, slots=True)
class _Descending:
    """Reverses the order of UTF-16 code units (Java's String.compareTo)."""

    key: bytes

    def __lt__(self, other: _Descending) -> bool:
        return self.key > other.key
