"""Kafka 3.9's ClusterControlManager, broker side: registrations, broker epochs, registration offsets.

Registrations themselves live in the image (replayed RegisterBrokerRecords); this unit adds what Kafka
keeps beside them in memory: the log offset of each broker's latest RegisterBrokerRecord (taken from the
image by `activate`, then fed by `replay`) and the heartbeat manager, rebuilt by `activate`.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from bridge.brokers.heartbeats import BrokerHeartbeatManager
from migrate.kraft import metadata_version as mvs
from migrate.kraft import records as rec
from migrate.kraft.image import MetadataImage
from migrate.kraft.migration_state import ZkMigrationState
from migrate.zk.model import normalised_listener_name

log = logging.getLogger(__name__)

RecordAndVersion = tuple[Any, int]

KRAFT_VERSION_FEATURE = "kraft.version"
SECURITY_PROTOCOL_IDS = (0, 1, 2, 3)
"""SecurityProtocol.forId: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL."""
ZERO_UUID = uuid.UUID(int=0)

BROKER_REGISTRATION = 62
BROKER_HEARTBEAT = 63
UNREGISTER_BROKER = 64
SUPPORTED: dict[int, tuple[int, int]] = {
    BROKER_REGISTRATION: (0, 4),
    BROKER_HEARTBEAT: (0, 1),
    UNREGISTER_BROKER: (0, 0),
}
"""The versions Kafka 3.9's controller accepts (kio also knows BrokerHeartbeat v2, which 3.9 does not)."""


@dataclass(frozen=True, slots=True)
class BrokerError:
    """An ApiException Kafka's controller throws: the error code the broker sees and the message it logs."""

    code: ErrorCode
    message: str


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    """The controller configuration the broker side reads (KafkaConfig names in the field docs)."""

    cluster_id: str
    inter_broker_listener_name: str
    """The controller's `inter.broker.listener.name` (ZooKeeper brokers must have a listener of that name)."""
    node_id: int
    """The controller's `node.id`: no broker may register with it."""
    session_timeout_ms: int = 9000
    """`broker.session.timeout.ms`."""
    zk_migration_enabled: bool = True
    """`zookeeper.metadata.migration.enable`: the bridge is always a migrating controller."""
    kraft_version: int = 0
    """The Raft layer's kraft.version: 0 for a static voter set such as the bridge's."""


@dataclass(slots=True)
class RegistrationResult:
    """ClusterControlManager.registerBroker's outcome: the records to append atomically, or the error."""

    records: list[RecordAndVersion] = field(default_factory=list)
    broker_epoch: int = -1
    error: BrokerError | None = None


@dataclass(frozen=True, slots=True)
class RegistrationRequest:
    """The BrokerRegistrationRequest fields, with the defaults of fields older versions lack."""

    broker_id: int
    cluster_id: str
    incarnation_id: uuid.UUID
    listeners: tuple[tuple[str, str, int, int], ...]
    """(name, host, port, security protocol id), in request order."""
    features: tuple[tuple[str, int, int], ...]
    """(name, min supported, max supported), in request order."""
    rack: str | None
    is_migrating_zk_broker: bool = False
    log_dirs: tuple[uuid.UUID, ...] = ()
    previous_broker_epoch: int = -1

    @classmethod
    def of(cls, request: Any) -> RegistrationRequest:
        """From a kio BrokerRegistrationRequest of any version 0-4 (fields a version lacks take defaults)."""
        return cls(
            broker_id=int(request.broker_id),
            cluster_id=request.cluster_id,
            incarnation_id=request.incarnation_id or ZERO_UUID,
            listeners=tuple(
                (entry.name, entry.host, int(entry.port), int(entry.security_protocol))
                for entry in request.listeners
            ),
            features=tuple(
                (f.name, int(f.min_supported_version), int(f.max_supported_version)) for f in request.features
            ),
            rack=request.rack,
            is_migrating_zk_broker=bool(getattr(request, "is_migrating_zk_broker", False)),
            log_dirs=tuple(d or ZERO_UUID for d in getattr(request, "log_dirs", ())),
            previous_broker_epoch=int(getattr(request, "previous_broker_epoch", -1)),
        )


def is_reserved_directory(directory: uuid.UUID) -> bool:
    """DirectoryId.reserved: the first 100 ids (Java compares the low 64 bits as a signed long)."""
    msb, lsb = directory.int >> 64, directory.int & (2**64 - 1)
    signed_lsb = lsb - 2**64 if lsb >= 2**63 else lsb
    return msb == 0 and signed_lsb < 100


DEFAULT_SUPPORTED_FEATURES: dict[str, tuple[int, int]] = {
    mvs.FEATURE_NAME: (mvs.MINIMUM_KRAFT_VERSION.feature_level, mvs.LATEST_PRODUCTION.feature_level),
    KRAFT_VERSION_FEATURE: (0, 1),
}
"""BrokerFeatures.defaultSupportedFeatures of Kafka 3.9 (transaction.version and group.version are not
production there, so they are left out); a controller advertises these in ApiVersions."""


def finalized_features(image: MetadataImage, kraft_version: int) -> dict[str, int]:
    """FeatureControlManager.finalizedFeatures plus the Raft layer's kraft.version (QuorumController)."""
    features = {mvs.FEATURE_NAME: image.features.metadata_version}
    features.update(image.features.finalized_versions)
    features[KRAFT_VERSION_FEATURE] = kraft_version
    return features


class ClusterControl:
    """ClusterControlManager for brokers: registration checks and records, broker epochs, sessions."""

    def __init__(self, settings: ControllerSettings, clock: Callable[[], int] = time.monotonic_ns) -> None:
        self.settings = settings
        self.heartbeats = BrokerHeartbeatManager(settings.session_timeout_ms, clock)
        self.register_offsets: dict[int, int] = {}

    # ------------------------------------------------------------ replay and activation

    def replay(self, record: Any, offset: int) -> None:
        """Follow the log: the offset of each broker's latest RegisterBrokerRecord (needed to unfence it);
        an unregistered broker's offset and session are dropped."""
        if isinstance(record, rec.RegisterBrokerRecord):
            self.register_offsets[record.broker_id] = offset
        elif isinstance(record, rec.UnregisterBrokerRecord):
            self.register_offsets.pop(record.broker_id, None)
            self.heartbeats.remove(record.broker_id)

    def replay_all(self, entries: Iterable[tuple[Any, int]]) -> None:
        for record, offset in entries:
            self.replay(record, offset)

    def activate(self, image: MetadataImage) -> None:
        """ClusterControlManager.activate: every registered broker's session starts now; the registration
        offsets are those the image replayed (Kafka's controller replayed the same log into them)."""
        brokers = image.cluster.brokers.values()
        # An image not replayed from a log (built by hand) has no offset: its epoch, the first record's
        # offset, is the nearest bound.
        self.register_offsets = {
            b.broker_id: b.register_record_offset if b.register_record_offset >= 0 else b.epoch for b in brokers
        }
        self.heartbeats.activate((b.broker_id, b.fenced) for b in brokers)

    def register_broker_record_offset(self, broker_id: int) -> int | None:
        return self.register_offsets.get(broker_id)

    # ------------------------------------------------------------ checks

    def zk_registration_allowed(self, image: MetadataImage) -> bool:
        """ClusterControlManager.zkRegistrationAllowed: migration configured and metadata.version 3.4+."""
        return self.settings.zk_migration_enabled and image.metadata_version.is_migration_supported()

    @staticmethod
    def check_broker_epoch(image: MetadataImage, broker_id: int, broker_epoch: int) -> BrokerError | None:
        """ClusterControlManager.checkBrokerEpoch: STALE_BROKER_EPOCH unless registered with that epoch."""
        broker = image.cluster.brokers.get(broker_id)
        if broker is None:
            return BrokerError(
                ErrorCode.stale_broker_epoch, f"No broker registration found for broker id {broker_id}"
            )
        if broker.epoch != broker_epoch:
            return BrokerError(
                ErrorCode.stale_broker_epoch,
                f"Expected broker epoch {broker.epoch}, but got broker epoch {broker_epoch}",
            )
        return None

    # ------------------------------------------------------------ registration

    def register_broker(
        self, image: MetadataImage, request: RegistrationRequest, new_broker_epoch: int
    ) -> RegistrationResult:
        """ClusterControlManager.registerBroker, checks in Kafka's order; the new epoch is the next log offset."""
        try:
            return self._register(image, request, new_broker_epoch)
        except _Refused as refused:
            log.info("Broker %d registration refused: %s", request.broker_id, refused.error.message)
            return RegistrationResult(error=refused.error)

    def _register(
        self, image: MetadataImage, request: RegistrationRequest, new_epoch: int
    ) -> RegistrationResult:
        settings = self.settings
        mv = image.metadata_version
        broker_id = request.broker_id
        if request.cluster_id != settings.cluster_id:
            _refuse(
                ErrorCode.inconsistent_cluster_id,
                f"Expected cluster ID {settings.cluster_id}, but got cluster ID {request.cluster_id}",
            )
        self._check_broker_id(broker_id)
        existing = image.cluster.brokers.get(broker_id)
        previous_incarnation = existing.incarnation_id if existing is not None else None
        if (
            existing is not None
            and self.heartbeats.has_valid_session(broker_id)
            and request.incarnation_id != previous_incarnation
        ):
            _refuse(
                ErrorCode.duplicate_broker_registration, "Another broker is registered with that broker id."
            )
        if request.is_migrating_zk_broker and not self.zk_registration_allowed(image):
            _refuse(ErrorCode.broker_id_not_registered, "Controller does not support registering ZK brokers.")
        if not request.is_migrating_zk_broker and image.features.zk_migration_state == ZkMigrationState.PRE_MIGRATION:
            _refuse(
                ErrorCode.broker_id_not_registered,
                "Controller is in pre-migration mode and cannot register KRaft brokers until the metadata "
                "migration is complete.",
            )
        # Compared as Kafka's ListenerName.normalised names (upper-cased), as the channel finds the endpoint.
        listener_names = {normalised_listener_name(name) for name, _, _, _ in request.listeners}
        wanted = normalised_listener_name(settings.inter_broker_listener_name)
        if request.is_migrating_zk_broker and wanted not in listener_names:
            _refuse(
                ErrorCode.invalid_registration,
                f"Broker does not have the current inter.broker.listener {settings.inter_broker_listener_name}",
            )
        if mv.is_directory_assignment_supported():
            self._check_log_dirs(image, broker_id, request.log_dirs)
        record = rec.RegisterBrokerRecord(
            broker_id=broker_id,
            is_migrating_zk_broker=request.is_migrating_zk_broker,
            incarnation_id=request.incarnation_id,
            rack=request.rack,
            end_points=_endpoints(request),
        )
        record.features = self._features(image, request)
        if mv.is_directory_assignment_supported():
            record.log_dirs = list(request.log_dirs)
        if existing is not None and request.incarnation_id == previous_incarnation:
            # The same process registering again (e.g. after a lost reply) keeps its epoch and its state.
            log.info(
                "Amending registration of broker %d; broker epoch remains %d.", broker_id, existing.epoch
            )
            record.fenced = existing.fenced
            record.in_controlled_shutdown = existing.in_controlled_shutdown
            record.broker_epoch = existing.epoch
        else:
            log.info(
                "Registering a new incarnation of broker %d; broker epoch will be %d.", broker_id, new_epoch
            )
            record.broker_epoch = new_epoch
            self.heartbeats.remove(broker_id)
        self.heartbeats.register(broker_id, record.fenced)
        return RegistrationResult(
            records=[(record, mv.register_broker_record_version())], broker_epoch=record.broker_epoch
        )

    def _check_broker_id(self, broker_id: int) -> None:
        """Ids Kafka's brokers refuse in their own configuration, which its controller takes on trust.

        A negative id would match the image's "no leader" (-1) as a leader and ISR member; the controller's
        own id is the Raft leader's replica id, which no observer may fetch with.
        """
        if broker_id < 0:
            _refuse(
                ErrorCode.invalid_registration,
                f"Broker ID {broker_id} is negative; a broker's node.id (broker.id) must be at least 0",
            )
        if broker_id == self.settings.node_id:
            _refuse(
                ErrorCode.invalid_registration,
                f"Broker ID {broker_id} is the node id of this controller, a voter of the metadata quorum; "
                "a broker must not use a controller's node id",
            )

    @staticmethod
    def _check_log_dirs(image: MetadataImage, broker_id: int, log_dirs: tuple[uuid.UUID, ...]) -> None:
        if not log_dirs:
            _refuse(ErrorCode.invalid_registration, "No directories specified in request")
        if any(is_reserved_directory(d) for d in log_dirs):
            _refuse(ErrorCode.invalid_registration, "Reserved directory ID in request")
        if len(set(log_dirs)) != len(log_dirs):
            _refuse(ErrorCode.invalid_registration, "Duplicate directory ID in request")
        owners = {d: b.broker_id for b in image.cluster.brokers.values() for d in b.log_dirs}
        for directory in log_dirs:
            owner = owners.get(directory)
            if owner is not None and owner != broker_id:
                _refuse(
                    ErrorCode.invalid_registration,
                    f"Broker {owner} is already registered with directory {directory}",
                )

    def _features(self, image: MetadataImage, request: RegistrationRequest) -> list[Any]:
        """Every finalized feature must lie in the broker's range (processRegistrationFeature)."""
        finalized = finalized_features(image, self.settings.kraft_version)
        unverified = dict(finalized)
        out = []
        for name, low, high in request.features:
            out.append(_checked_feature(request.broker_id, finalized, name, low, high))
            unverified.pop(name, None)
        if not any(name == mvs.FEATURE_NAME for name, _, _ in request.features):
            # A broker sending no metadata.version range is taken to support only the first KRaft version.
            level = mvs.MINIMUM_KRAFT_VERSION.feature_level
            out.append(_checked_feature(request.broker_id, finalized, mvs.FEATURE_NAME, level, level))
            unverified.pop(mvs.FEATURE_NAME, None)
        for name in sorted(unverified):
            if unverified[name] != 0:
                _checked_feature(request.broker_id, finalized, name, 0, 0)
        return out


class _Refused(Exception):
    def __init__(self, error: BrokerError) -> None:
        super().__init__(error.message)
        self.error = error


def _refuse(code: ErrorCode, message: str) -> None:
    raise _Refused(BrokerError(code, message))


def _endpoints(request: RegistrationRequest) -> list[rec.RegisterBrokerRecord.BrokerEndpoint]:
    """ListenerInfo.fromBrokerRegistrationRequest: a repeated name keeps its first place and its last value."""
    by_name: dict[str, rec.RegisterBrokerRecord.BrokerEndpoint] = {}
    for name, host, port, protocol in request.listeners:
        if protocol not in SECURITY_PROTOCOL_IDS:
            # Kafka throws a plain RuntimeException here: the broker sees UNKNOWN_SERVER_ERROR.
            _refuse(
                ErrorCode.unknown_server_error, f"Unknown security protocol {protocol} in listener {name}"
            )
        by_name[name] = rec.RegisterBrokerRecord.BrokerEndpoint(
            name=name, host=host, port=port, security_protocol=protocol
        )
    return list(by_name.values())


def _checked_feature(
    broker_id: int, finalized: dict[str, int], name: str, low: int, high: int
) -> rec.RegisterBrokerRecord.BrokerFeature:
    # An unknown feature counts as finalized at 0, except metadata.version, whose floor is level 1.
    version = finalized.get(name, 1 if name == mvs.FEATURE_NAME else 0)
    if not low <= version <= high:
        _refuse(
            ErrorCode.unsupported_version,
            f"Unable to register because the broker does not support finalized version {version} of {name}. "
            f"The broker wants a version between {low} and {high}, inclusive.",
        )
    return rec.RegisterBrokerRecord.BrokerFeature(
        name=name, min_supported_version=low, max_supported_version=high
    )
