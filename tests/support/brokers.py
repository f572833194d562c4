"""A small in-memory controller around bridge.brokers: a log with offsets, the image it replays, a fake clock.

Every record appended goes through Kafka's metadata record encoding and back, so a record version the
metadata.version cannot carry fails the test.
"""

from __future__ import annotations

import importlib
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kio.static.primitive import i16, i32, i64, u16

from bridge.brokers.cluster import (
    BrokerError,
    ClusterControl,
    ControllerSettings,
    RegistrationRequest,
    RegistrationResult,
)
from bridge.brokers.heartbeats import NS_PER_MS, HeartbeatRequest
from bridge.brokers.replication import HeartbeatResult, ReplicationControl
from migrate.kraft import metadata_version as mvs
from migrate.kraft import records as rec
from migrate.kraft.batch import encode_kraft_batch
from migrate.kraft.framing import decode_metadata_record, encode_metadata_record
from migrate.kraft.image import MetadataImage
from migrate.kraft.logdir import write_segment
from migrate.kraft.metadata_version import MetadataVersion
from migrate.kraft.migration_state import ZkMigrationState
from migrate.kraft.replay import MetadataReplayer
from tests.support.handlers import CONTROLLER_ID

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
LISTENER = "PLAINTEXT"
MIGRATION = ZkMigrationState.MIGRATION
PRE_MIGRATION = ZkMigrationState.PRE_MIGRATION


def incarnation(broker_id: int, start: int = 0) -> uuid.UUID:
    return uuid.UUID(int=(broker_id << 32) | (start + 1) | (1 << 100))


def log_dir(broker_id: int, index: int = 0) -> uuid.UUID:
    return uuid.UUID(int=(broker_id << 16) | index | (7 << 120))


def kio_registration(version: int, **fields: Any) -> Any:
    """A kio BrokerRegistrationRequest of `version`, with only the fields that version has."""
    module = importlib.import_module(f"kio.schema.broker_registration.v{version}.request")
    listeners = tuple(
        module.Listener(name=n, host=h, port=u16(p), security_protocol=i16(s))
        for n, h, p, s in fields.pop("listeners")
    )
    features = tuple(
        module.Feature(name=n, min_supported_version=i16(lo), max_supported_version=i16(hi))
        for n, lo, hi in fields.pop("features")
    )
    values: dict[str, Any] = {
        "broker_id": i32(fields.pop("broker_id")),
        "cluster_id": fields.pop("cluster_id"),
        "incarnation_id": fields.pop("incarnation_id"),
        "listeners": listeners,
        "features": features,
        "rack": fields.pop("rack"),
    }
    if version >= 1:
        values["is_migrating_zk_broker"] = fields.pop("is_migrating_zk_broker")
    if version >= 2:
        values["log_dirs"] = tuple(fields.pop("log_dirs"))
    if version >= 3:
        values["previous_broker_epoch"] = i64(fields.pop("previous_broker_epoch", -1))
    return module.BrokerRegistrationRequest(**values)


@dataclass
class FakeClock:
    now_ns: int = 1_000 * NS_PER_MS

    def __call__(self) -> int:
        return self.now_ns

    def advance_ms(self, ms: int) -> None:
        self.now_ns += ms * NS_PER_MS


@dataclass
class Controller:
    """The image, the log's next offset, ClusterControl and ReplicationControl wired as the bridge will be."""

    mv: MetadataVersion = mvs.IBP_3_9_IV0
    migration_state: int = MIGRATION
    unclean_topics: set[str] = field(default_factory=set)
    session_timeout_ms: int = 9000
    zk_migration_enabled: bool = True
    clock: FakeClock = field(default_factory=FakeClock)
    log: list[tuple[Any, int, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.replayer = MetadataReplayer(source="test log")
        self.cluster = ClusterControl(
            ControllerSettings(
                CLUSTER_ID,
                LISTENER,
                CONTROLLER_ID,
                session_timeout_ms=self.session_timeout_ms,
                zk_migration_enabled=self.zk_migration_enabled,
            ),
            self.clock,
        )
        self.replication = ReplicationControl(self.cluster, lambda image, topic: topic in self.unclean_topics)
        records: list[tuple[Any, int]] = [
            (rec.FeatureLevelRecord(name="metadata.version", feature_level=self.mv.feature_level), 0)
        ]
        if self.mv.is_migration_supported():
            records.append((rec.ZkMigrationStateRecord(zk_migration_state=self.migration_state), 0))
        self.append(records)

    @property
    def image(self) -> MetadataImage:
        return self.replayer.image

    def restart(self, image: MetadataImage) -> None:
        """A new active controller over `image` (e.g. loaded from disk): fresh in-memory state, then activate."""
        self.replayer = MetadataReplayer(image, source="restarted test log")
        self.cluster = ClusterControl(self.cluster.settings, self.clock)
        self.replication = ReplicationControl(self.cluster, self.replication.unclean_enabled)
        self.cluster.activate(image)

    def write_log(self, partition_dir: Path) -> None:
        """The log so far as one segment in `partition_dir` (a `__cluster_metadata-0`), leader epoch 1."""
        values = [(None, encode_metadata_record(record, version)) for record, version, _ in self.log]
        write_segment(partition_dir, 0, [encode_kraft_batch(0, 1, 0, values, False)])

    @property
    def next_offset(self) -> int:
        return len(self.log)

    def append(self, records: list[tuple[Any, int]]) -> int:
        """Append and replay; returns the offset of the last record (the batch end offset)."""
        for record, version in records:
            decoded, decoded_version = decode_metadata_record(
                encode_metadata_record(record, version), "test", 0
            )
            assert (decoded, decoded_version) == (record, version)
            offset = self.next_offset
            self.log.append((record, version, offset))
            self.replayer.replay(record, version, offset)
            self.cluster.replay(record, offset)
        return self.next_offset - 1

    def records_since(self, offset: int) -> list[Any]:
        return [r for r, _, o in self.log if o >= offset]

    # ------------------------------------------------------------ requests

    def register(self, request: RegistrationRequest) -> RegistrationResult:
        result = self.cluster.register_broker(self.image, request, self.next_offset)
        if result.error is None:
            self.append(result.records)
        return result

    def heartbeat(
        self,
        broker_id: int,
        offset: int | None = None,
        *,
        epoch: int | None = None,
        want_fence: bool = False,
        want_shut_down: bool = False,
    ) -> HeartbeatResult:
        if epoch is None:
            broker = self.image.cluster.brokers.get(broker_id)
            epoch = broker.epoch if broker is not None else -1
        request = HeartbeatRequest(
            broker_id=broker_id,
            broker_epoch=epoch,
            current_metadata_offset=self.next_offset - 1 if offset is None else offset,
            want_fence=want_fence,
            want_shut_down=want_shut_down,
        )
        result = self.replication.process_broker_heartbeat(self.image, request)
        if result.error is None and result.records:
            end = self.append(result.records)
            if result.in_controlled_shutdown:
                self.cluster.heartbeats.maybe_update_controlled_shutdown_offset(broker_id, end)
        return result

    def unregister(self, broker_id: int) -> BrokerError | None:
        records, error = self.replication.unregister_broker(self.image, broker_id)
        if error is None:
            self.append(records)
        return error

    def add_topic(self, name: str, partitions: dict[int, tuple[list[int], list[int], int]]) -> uuid.UUID:
        """partitions: id -> (replicas, isr, leader); epochs start at leader epoch 5, partition epoch 7."""
        topic_id = uuid.uuid5(uuid.NAMESPACE_DNS, name)
        version = self.mv.partition_record_version()
        records: list[tuple[Any, int]] = [(rec.TopicRecord(name=name, topic_id=topic_id), 0)]
        for pid, (replicas, isr, leader) in partitions.items():
            part = rec.PartitionRecord(
                partition_id=pid,
                topic_id=topic_id,
                replicas=replicas,
                isr=isr,
                leader=leader,
                leader_epoch=5,
                partition_epoch=7,
            )
            if self.mv.is_directory_assignment_supported():
                part.directories = [uuid.UUID(int=0)] * len(replicas)
            records.append((part, version))
        self.append(records)
        return topic_id


def registration(
    broker_id: int,
    *,
    start: int = 0,
    zk: bool = True,
    mv: MetadataVersion = mvs.IBP_3_9_IV0,
    cluster_id: str = CLUSTER_ID,
    listeners: tuple[tuple[str, str, int, int], ...] | None = None,
    features: tuple[tuple[str, int, int], ...] | None = None,
    log_dirs: tuple[uuid.UUID, ...] | None = None,
    rack: str | None = None,
) -> RegistrationRequest:
    """What a broker sends: a ZooKeeper broker pins metadata.version to its IBP, a KRaft one sends a range."""
    if features is None:
        level = mv.feature_level
        features = ((mvs.FEATURE_NAME, level, level),) if zk else ((mvs.FEATURE_NAME, 1, 21),)
    return RegistrationRequest(
        broker_id=broker_id,
        cluster_id=cluster_id,
        incarnation_id=incarnation(broker_id, start),
        listeners=listeners if listeners is not None else ((LISTENER, f"broker{broker_id}", 9092, 0),),
        features=features,
        rack=rack,
        is_migrating_zk_broker=zk,
        log_dirs=log_dirs if log_dirs is not None else (log_dir(broker_id),),
    )


def running(controller: Controller, *broker_ids: int) -> dict[int, int]:
    """Register the brokers (ZooKeeper brokers while migrating) and unfence them; returns their epochs."""
    epochs = {}
    for broker_id in broker_ids:
        zk = controller.zk_migration_enabled and controller.mv.is_migration_supported()
        dirs = None if controller.mv.is_directory_assignment_supported() else ()
        result = controller.register(registration(broker_id, mv=controller.mv, zk=zk, log_dirs=dirs))
        assert result.error is None, result.error
        epochs[broker_id] = result.broker_epoch
    for broker_id in broker_ids:
        reply = controller.heartbeat(broker_id).reply
        assert reply is not None and not reply.is_fenced
    return epochs
