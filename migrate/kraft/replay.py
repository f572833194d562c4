"""Replay metadata records into a MetadataImage with Kafka's semantics (MetadataDelta / MetadataBatchLoader).

Metadata transactions (KIP-868): records after a BeginTransactionRecord are buffered and applied together
when the EndTransactionRecord arrives; an AbortTransactionRecord drops them; a transaction still open at
the end of the input is never applied (`pending_transaction_offset` says where it started).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol

from migrate.errors import CorruptDataError, UnsupportedVersionError
from migrate.gcpause import gc_paused
from migrate.kraft import metadata_version as mvs
from migrate.kraft import records as rec
from migrate.kraft.image import (
    MIGRATING_DIRECTORY,
    NO_LEADER_CHANGE,
    RESOURCE_TYPE_TOPIC,
    UNASSIGNED_DIRECTORY,
    AclBinding,
    BrokerRegistration,
    ControllerRegistration,
    DelegationToken,
    Endpoint,
    MetadataImage,
    PartitionRegistration,
    QuotaEntity,
    ScramCredential,
    TopicImage,
    uuid_sort_key,
)
from migrate.kraft.migration_state import ZK_MIGRATION_STATES


class _Entry(Protocol):
    """What replay_all needs from a reader entry (migrate.kraft.reader.LogEntry has these)."""

    offset: int
    leader_epoch: int
    timestamp_ms: int
    batch_position: int
    is_control: bool
    record: Any
    version: int


@dataclass(slots=True)
class _Buffered:
    record: Any
    version: int
    offset: int
    position: int | None


class MetadataReplayer:
    """Applies records to `image` in place; after a raised error the image is unspecified.

    The image keeps the list fields of replayed records without copying them: do not mutate a record
    after handing it to the replayer.
    """

    def __init__(self, image: MetadataImage | None = None, *, source: str = "metadata log") -> None:
        self.image = image if image is not None else MetadataImage()
        self.source = source
        self.records_applied = 0
        self.warnings: list[str] = []
        self._txn: list[_Buffered] | None = None
        self._txn_offset: int | None = None
        self._txn_name: str | None = None
        self._offset = -1
        self._position: int | None = None
        self._features_changed = False
        self._handlers: dict[type, Callable[[Any], None]] = {
            rec.RegisterBrokerRecord: self._register_broker,
            rec.UnregisterBrokerRecord: self._unregister_broker,
            rec.TopicRecord: self._topic,
            rec.PartitionRecord: self._partition,
            rec.ConfigRecord: self._config,
            rec.PartitionChangeRecord: self._partition_change,
            rec.FenceBrokerRecord: self._fence,
            rec.UnfenceBrokerRecord: self._unfence,
            rec.RemoveTopicRecord: self._remove_topic,
            rec.DelegationTokenRecord: self._delegation_token,
            rec.UserScramCredentialRecord: self._scram,
            rec.FeatureLevelRecord: self._feature_level,
            rec.ClientQuotaRecord: self._client_quota,
            rec.ProducerIdsRecord: self._producer_ids,
            rec.BrokerRegistrationChangeRecord: self._broker_change,
            rec.AccessControlEntryRecord: self._acl,
            rec.RemoveAccessControlEntryRecord: self._remove_acl,
            rec.NoOpRecord: _ignore,
            rec.ZkMigrationStateRecord: self._zk_migration_state,
            rec.RemoveUserScramCredentialRecord: self._remove_scram,
            rec.RemoveDelegationTokenRecord: self._remove_delegation_token,
            rec.RegisterControllerRecord: self._register_controller,
        }

    # ------------------------------------------------------------------------------ public API

    @property
    def in_transaction(self) -> bool:
        return self._txn is not None

    @property
    def pending_transaction_offset(self) -> int | None:
        """Offset of the BeginTransactionRecord of a still-open transaction, else None."""
        return self._txn_offset

    @property
    def pending_transaction_records(self) -> int:
        return len(self._txn) if self._txn is not None else 0

    @property
    def pending_transaction_name(self) -> str | None:
        return self._txn_name if self._txn is not None else None

    def replay(
        self,
        record: Any,
        version: int,
        offset: int,
        *,
        epoch: int = -1,
        timestamp_ms: int = -1,
        position: int | None = None,
    ) -> None:
        """Apply one metadata record found at log `offset` (transaction records included)."""
        kind = type(record)
        if self._txn is None:
            handler = self._handlers.get(kind)
            if handler is not None:
                self._offset = offset
                self._position = position
                handler(record)
                self.records_applied += 1
            else:
                self._control_flow(kind, record, version, offset, position)
                if self._txn is not None:
                    return
        else:
            self._control_flow(kind, record, version, offset, position)
            if self._txn is not None:
                return
        provenance = self.image.provenance
        provenance.last_contained_offset = offset
        provenance.last_contained_epoch = epoch
        provenance.last_contained_log_time_ms = timestamp_ms
        if self._features_changed:
            # FeaturesPublisher: the image's offset once the change is applied (after a whole transaction).
            self._features_changed = False
            self.image.features.epoch = offset

    def _control_flow(self, kind: type, record: Any, version: int, offset: int, position: int | None) -> None:
        """Transaction records, records buffered inside a transaction, and unknown record types."""
        txn = self._txn
        if txn is not None:
            if kind is rec.EndTransactionRecord:
                self._txn = None
                self._txn_offset = None
                for item in txn:
                    self._apply(item.record, item.offset, item.position)
            elif kind is rec.AbortTransactionRecord:
                self._txn = None
                self._txn_offset = None
            elif kind is rec.BeginTransactionRecord:
                self._offset, self._position = offset, position
                self._fail(
                    record,
                    f"BeginTransactionRecord while the transaction begun at offset {self._txn_offset} is still open",
                )
            else:
                txn.append(_Buffered(record, version, offset, position))
        elif kind is rec.BeginTransactionRecord:
            self._txn = []
            self._txn_offset = offset
            self._txn_name = record.name
        elif kind is rec.EndTransactionRecord or kind is rec.AbortTransactionRecord:
            self._offset, self._position = offset, position
            self._fail(record, f"{kind.__name__} without a preceding BeginTransactionRecord")
        else:
            self._apply(record, offset, position)

    def advance(self, offset: int, *, epoch: int = -1, timestamp_ms: int = -1) -> None:
        """Account for a control record at `offset`: it moves the provenance unless a transaction is open."""
        if self._txn is None:
            provenance = self.image.provenance
            provenance.last_contained_offset = offset
            provenance.last_contained_epoch = epoch
            provenance.last_contained_log_time_ms = timestamp_ms

    def replay_all(self, entries: Iterable[_Entry | tuple[Any, int, int]]) -> MetadataImage:
        """Replay reader entries or (record, version, offset) tuples; control entries only advance the offset."""
        replay = self.replay
        with gc_paused():
            for entry in entries:
                if isinstance(entry, tuple):
                    replay(entry[0], entry[1], entry[2])
                elif entry.is_control:
                    self.advance(entry.offset, epoch=entry.leader_epoch, timestamp_ms=entry.timestamp_ms)
                else:
                    replay(
                        entry.record,
                        entry.version,
                        entry.offset,
                        epoch=entry.leader_epoch,
                        timestamp_ms=entry.timestamp_ms,
                        position=entry.batch_position,
                    )
        return self.image

    # ------------------------------------------------------------------------------ dispatch

    def _apply(self, record: Any, offset: int, position: int | None) -> None:
        handler = self._handlers.get(type(record))
        self._offset, self._position = offset, position
        if handler is None:
            self._fail(record, f"{type(record).__name__} is not a metadata record this replayer knows")
        handler(record)
        self.records_applied += 1

    def _fail(self, record: Any, problem: str) -> NoReturn:
        shown = repr(record)
        if len(shown) > 400:
            shown = shown[:400] + "..."
        raise CorruptDataError(
            f"{self.source} (offset {self._offset})", self._position, f"{problem}; record: {shown}"
        )

    # ------------------------------------------------------------------------------ cluster

    def _register_broker(self, r: Any) -> None:
        self.image.cluster.brokers[r.broker_id] = BrokerRegistration(
            broker_id=r.broker_id,
            epoch=r.broker_epoch,
            incarnation_id=r.incarnation_id,
            endpoints=[Endpoint(e.name, e.host, e.port, e.security_protocol) for e in r.end_points],
            supported_features={
                f.name: (f.min_supported_version, f.max_supported_version) for f in r.features
            },
            rack=r.rack,
            fenced=r.fenced,
            in_controlled_shutdown=r.in_controlled_shutdown,
            is_migrating_zk_broker=r.is_migrating_zk_broker,
            log_dirs=sorted(r.log_dirs, key=uuid_sort_key),
            register_record_offset=self._offset,
        )

    def _unregister_broker(self, r: Any) -> None:
        brokers = self.image.cluster.brokers
        current = brokers.get(r.broker_id)
        if current is None or current.epoch != r.broker_epoch:
            held = "no registration" if current is None else f"registration epoch {current.epoch}"
            self.warnings.append(
                f"{self.source} offset {self._offset}: UnregisterBrokerRecord for broker {r.broker_id} "
                f"epoch {r.broker_epoch} ignored ({held})"
            )
            return
        del brokers[r.broker_id]

    def _broker_at_epoch(self, record: Any, broker_id: int, epoch: int, action: str) -> BrokerRegistration:
        broker = self.image.cluster.brokers.get(broker_id)
        if broker is None:
            self._fail(record, f"tried to {action} broker {broker_id}, but that broker is not registered")
        if broker.epoch != epoch:
            self._fail(
                record,
                f"tried to {action} broker {broker_id} at epoch {epoch}, but its registration epoch is {broker.epoch}",
            )
        return broker

    def _with_broker_changes(
        self,
        broker: BrokerRegistration,
        fenced: bool | None,
        shutdown: bool | None,
        dirs: list[uuid.UUID] | None,
    ) -> None:
        new_fenced = broker.fenced if fenced is None else fenced
        new_shutdown = broker.in_controlled_shutdown if shutdown is None else shutdown
        new_dirs = broker.log_dirs if dirs is None else sorted(dirs, key=uuid_sort_key)
        if (new_fenced, new_shutdown, new_dirs) == (
            broker.fenced,
            broker.in_controlled_shutdown,
            broker.log_dirs,
        ):
            return
        self.image.cluster.brokers[broker.broker_id] = BrokerRegistration(
            broker_id=broker.broker_id,
            epoch=broker.epoch,
            incarnation_id=broker.incarnation_id,
            endpoints=broker.endpoints,
            supported_features=broker.supported_features,
            rack=broker.rack,
            fenced=new_fenced,
            in_controlled_shutdown=new_shutdown,
            is_migrating_zk_broker=broker.is_migrating_zk_broker,
            log_dirs=new_dirs,
            register_record_offset=broker.register_record_offset,
        )

    def _fence(self, r: Any) -> None:
        self._with_broker_changes(self._broker_at_epoch(r, r.id, r.epoch, "fence"), True, None, None)

    def _unfence(self, r: Any) -> None:
        self._with_broker_changes(self._broker_at_epoch(r, r.id, r.epoch, "unfence"), False, None, None)

    def _broker_change(self, r: Any) -> None:
        broker = self._broker_at_epoch(r, r.broker_id, r.broker_epoch, "change")
        fencing = {1: True, -1: False, 0: None}
        if r.fenced not in fencing:
            self._fail(r, f"unknown value {r.fenced} for Fenced (expected 1, -1 or 0)")
        shutdown = {1: True, 0: None}
        if r.in_controlled_shutdown not in shutdown:
            self._fail(
                r, f"unknown value {r.in_controlled_shutdown} for InControlledShutdown (expected 1 or 0)"
            )
        dirs = list(r.log_dirs) if r.log_dirs else None
        self._with_broker_changes(broker, fencing[r.fenced], shutdown[r.in_controlled_shutdown], dirs)

    def _register_controller(self, r: Any) -> None:
        self.image.cluster.controllers[r.controller_id] = ControllerRegistration(
            controller_id=r.controller_id,
            incarnation_id=r.incarnation_id,
            zk_migration_ready=r.zk_migration_ready,
            endpoints=[Endpoint(e.name, e.host, e.port, e.security_protocol) for e in r.end_points],
            supported_features={
                f.name: (f.min_supported_version, f.max_supported_version) for f in r.features
            },
        )

    # ------------------------------------------------------------------------------ features

    def _feature_level(self, r: Any) -> None:
        features = self.image.features
        self._features_changed = True
        if r.name == mvs.FEATURE_NAME:
            try:
                mvs.from_feature_level(r.feature_level)
            except UnsupportedVersionError as exc:
                raise UnsupportedVersionError(f"{self.source} (offset {self._offset}): {exc}") from None
            features.metadata_version = r.feature_level
        elif r.feature_level == 0:
            features.finalized_versions.pop(r.name, None)
        else:
            features.finalized_versions[r.name] = r.feature_level

    def _zk_migration_state(self, r: Any) -> None:
        if r.zk_migration_state not in ZK_MIGRATION_STATES:
            self._fail(r, f"unknown ZkMigrationState value {r.zk_migration_state}")
        self._features_changed = True
        self.image.features.zk_migration_state = r.zk_migration_state

    # ------------------------------------------------------------------------------ topics

    def _topic(self, r: Any) -> None:
        image = self.image
        existing = image.topics_by_name.get(r.name)
        if existing is not None and existing.topic_id != r.topic_id:
            self._fail(r, f"topic name {r.name!r} is already used by topic id {existing.topic_id}")
        old = image.topics_by_id.get(r.topic_id)
        if old is not None and old.name != r.name:
            del image.topics_by_name[old.name]
        topic = TopicImage(r.name, r.topic_id, {})
        image.topics_by_id[r.topic_id] = topic
        image.topics_by_name[r.name] = topic

    def _partition(self, r: Any) -> None:
        # Hot path (a migration writes one per partition): the image takes the record's lists as they are.
        topic = self.image.topics_by_id.get(r.topic_id)
        if topic is None:
            self._fail(r, f"PartitionRecord for partition {r.partition_id} of unknown topic id {r.topic_id}")
        replicas = r.replicas
        dirs = r.directories
        if not dirs:
            dirs = [MIGRATING_DIRECTORY] * len(replicas)
        elif len(dirs) != len(replicas):
            self._fail(r, f"{len(dirs)} directories for {len(replicas)} replicas")
        lrs = r.leader_recovery_state
        if lrs != 0 and lrs != 1:
            self._fail(r, f"unknown LeaderRecoveryState {lrs}")
        elr = r.eligible_leader_replicas
        last_known = r.last_known_elr
        topic.partitions[r.partition_id] = PartitionRegistration(
            replicas,
            dirs,
            r.isr,
            r.removing_replicas,
            r.adding_replicas,
            r.leader,
            lrs,
            r.leader_epoch,
            r.partition_epoch,
            [] if elr is None else elr,
            [] if last_known is None else last_known,
        )

    def _partition_change(self, r: Any) -> None:
        topic = self.image.topics_by_id.get(r.topic_id)
        old = topic.partitions.get(r.partition_id) if topic is not None else None
        if topic is None or old is None:
            self._fail(r, f"PartitionChangeRecord for unknown partition {r.topic_id}:{r.partition_id}")
        replicas = old.replicas if r.replicas is None else r.replicas
        if r.directories:
            if len(r.directories) != len(replicas):
                self._fail(r, f"{len(r.directories)} directories for {len(replicas)} replicas")
            dirs = r.directories
        elif r.replicas is not None:
            # Replicas that stay keep their directory; new ones are UNASSIGNED (DirectoryId.createDirectoriesFrom).
            kept = dict(zip(old.replicas, old.directories, strict=False))
            dirs = [kept.get(b, UNASSIGNED_DIRECTORY) for b in replicas]
        else:
            dirs = old.directories
        if not dirs and replicas:
            dirs = [MIGRATING_DIRECTORY] * len(replicas)
        if r.leader == NO_LEADER_CHANGE:
            leader, leader_epoch = old.leader, old.leader_epoch
        else:
            leader, leader_epoch = r.leader, old.leader_epoch + 1
        lrs = r.leader_recovery_state
        if lrs == -1:
            lrs = old.leader_recovery_state
        elif lrs not in (0, 1):
            self._fail(r, f"unknown LeaderRecoveryState {lrs}")
        topic.partitions[r.partition_id] = PartitionRegistration(
            replicas,
            dirs,
            old.isr if r.isr is None else r.isr,
            old.removing_replicas if r.removing_replicas is None else r.removing_replicas,
            old.adding_replicas if r.adding_replicas is None else r.adding_replicas,
            leader,
            lrs,
            leader_epoch,
            old.partition_epoch + 1,
            old.elr if r.eligible_leader_replicas is None else r.eligible_leader_replicas,
            old.last_known_elr if r.last_known_elr is None else r.last_known_elr,
        )

    def _remove_topic(self, r: Any) -> None:
        image = self.image
        topic = image.topics_by_id.pop(r.topic_id, None)
        if topic is None:
            self._fail(r, f"RemoveTopicRecord for unknown topic id {r.topic_id}")
        del image.topics_by_name[topic.name]
        image.configs.pop((RESOURCE_TYPE_TOPIC, topic.name), None)

    # ------------------------------------------------------------------------------ configs, quotas

    def _config(self, r: Any) -> None:
        key = (r.resource_type, r.resource_name)
        configs = self.image.configs
        if r.value is None:
            values = configs.get(key)
            if values is not None:
                values.pop(r.name, None)
                if not values:
                    del configs[key]
        else:
            configs.setdefault(key, {})[r.name] = r.value

    def _client_quota(self, r: Any) -> None:
        pairs = {d.entity_type: d.entity_name for d in r.entity}
        if len(pairs) != len(r.entity) or not pairs:
            self._fail(r, "ClientQuotaRecord entity must list 1 or more distinct entity types")
        entity: QuotaEntity = tuple(sorted(pairs.items(), key=lambda p: p[0]))
        quotas = self.image.client_quotas
        if r.remove:
            values = quotas.get(entity)
            if values is not None:
                values.pop(r.key, None)
                if not values:
                    del quotas[entity]
        else:
            quotas.setdefault(entity, {})[r.key] = r.value

    def _producer_ids(self, r: Any) -> None:
        self.image.next_producer_id = r.next_producer_id

    # ------------------------------------------------------------------------------ security

    def _acl(self, r: Any) -> None:
        self.image.acls[r.id] = AclBinding(
            r.resource_type,
            r.resource_name,
            r.pattern_type,
            r.principal,
            r.host,
            r.operation,
            r.permission_type,
        )

    def _remove_acl(self, r: Any) -> None:
        if self.image.acls.pop(r.id, None) is None:
            self._fail(r, f"RemoveAccessControlEntryRecord for unknown ACL id {r.id}")

    def _scram(self, r: Any) -> None:
        self.image.scram[(r.name, r.mechanism)] = ScramCredential(
            r.salt, r.stored_key, r.server_key, r.iterations
        )

    def _remove_scram(self, r: Any) -> None:
        self.image.scram.pop((r.name, r.mechanism), None)

    def _delegation_token(self, r: Any) -> None:
        self.image.delegation_tokens[r.token_id] = DelegationToken(
            r.token_id,
            r.owner,
            r.requester,
            list(r.renewers),
            r.issue_timestamp,
            r.max_timestamp,
            r.expiration_timestamp,
        )

    def _remove_delegation_token(self, r: Any) -> None:
        self.image.delegation_tokens.pop(r.token_id, None)


def _ignore(_record: Any) -> None:
    """NoOpRecord only advances the log."""


def replay_records(
    records: Iterable[tuple[Any, int]], *, image: MetadataImage | None = None, source: str = "records"
) -> MetadataImage:
    """Replay (record, version) pairs numbered from offset 0; handy for snapshots and tests."""
    replayer = MetadataReplayer(image, source=source)
    replay = replayer.replay
    with gc_paused():
        for offset, (record, version) in enumerate(records):
            replay(record, version, offset)
    return replayer.image
