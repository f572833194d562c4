"""The two requests the benchmarks' minimal brokers send: a migrating ZooKeeper broker's BrokerRegistration and
its BrokerHeartbeat (kio's classes, the versions Kafka 3.9's brokers send); and their answers to the
controller's requests."""

from __future__ import annotations

import struct
import uuid

from kio.schema.broker_heartbeat.v1 import request as heartbeat_v1
from kio.schema.broker_registration.v4 import request as registration_v4
from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId
from kio.static.primitive import i16, i64, u16

from bridge.kafka import legacy_messages as lm
from migrate.kraft import metadata_version as mvs

LISTENER = "PLAINTEXT"
PLAINTEXT_ID = 0
REQUEST_HEADER = struct.Struct(">hhi")
"""A request header's api key, api version and correlation id."""
OK_ANSWERS = {
    4: lm.LeaderAndIsrResponseV7(error_code=ErrorCode.none),
    5: lm.StopReplicaResponseV4(error_code=ErrorCode.none),
    6: lm.UpdateMetadataResponseV8(error_code=ErrorCode.none),
}
"""A reachable ZooKeeper-mode broker's answer to each control request (LeaderAndIsr, StopReplica,
UpdateMetadata), regardless of what it asked."""


def log_dir(broker_id: int) -> uuid.UUID:
    """A stable, non-reserved id for the broker's one log dir."""
    return uuid.UUID(int=(broker_id << 64) | 0xD1D1 | (9 << 120))


def registration(
    broker_id: int, cluster_id: str, host: str, port: int, incarnation: uuid.UUID | None = None
) -> registration_v4.BrokerRegistrationRequest:
    """A ZooKeeper-mode broker in migration mode registering: metadata.version pinned to its IBP, one log dir."""
    level = mvs.LATEST_PRODUCTION.feature_level
    return registration_v4.BrokerRegistrationRequest(
        broker_id=BrokerId(broker_id),
        cluster_id=cluster_id,
        incarnation_id=uuid.uuid4() if incarnation is None else incarnation,
        listeners=(
            registration_v4.Listener(name=LISTENER, host=host, port=u16(port), security_protocol=i16(PLAINTEXT_ID)),
        ),
        features=(
            registration_v4.Feature(
                name=mvs.FEATURE_NAME, min_supported_version=i16(level), max_supported_version=i16(level)
            ),
        ),
        rack=None,
        is_migrating_zk_broker=True,
        log_dirs=(log_dir(broker_id),),
        previous_broker_epoch=i64(-1),
    )


def heartbeat(
    broker_id: int, broker_epoch: int, applied_offset: int, caught_up: bool
) -> heartbeat_v1.BrokerHeartbeatRequest:
    """A heartbeat with the offset the broker applied; it asks to stay fenced until the controller says caught up."""
    return heartbeat_v1.BrokerHeartbeatRequest(
        broker_id=BrokerId(broker_id),
        broker_epoch=i64(broker_epoch),
        current_metadata_offset=i64(applied_offset),
        want_fence=not caught_up,
        want_shut_down=False,
    )
