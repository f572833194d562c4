"""`/controller`, `/controller_epoch` and `/migration` (Kafka's ControllerZNode, ControllerEpochZNode and MigrationZNode
in ZkData.scala)."""

from __future__ import annotations

from migrate.jvm import scala_map_order
from migrate.zk.model import ControllerEpoch, ControllerRegistration, MigrationState
from migrate.zk.znodes.jackson import (
    int_field,
    java_int_text,
    json_object,
    long_field,
    opt_int_field,
    opt_long_text_field,
    parse_object,
    utf8_text,
    version_field,
)


def decode_controller(
    path: str, data: bytes | None, *, zk_version: int = 0, ephemeral_owner: int = 0
) -> ControllerRegistration:
    obj = parse_object(path, data)
    version = version_field(obj, path, (1, 2))
    return ControllerRegistration(
        broker_id=int_field(obj, "brokerid", path),
        timestamp=opt_long_text_field(obj, "timestamp", path),
        kraft_controller_epoch=opt_int_field(obj, "kraftControllerEpoch", path),
        version=version,
        zk_version=zk_version,
        ephemeral_owner=ephemeral_owner,
    )


def encode_controller(c: ControllerRegistration) -> bytes:
    # Scala Map4: insertion order.
    parts = [f'"version":{c.version}', f'"brokerid":{c.broker_id}']
    if c.timestamp is not None:
        parts.append(f'"timestamp":"{c.timestamp}"')
    if c.kraft_controller_epoch is not None:
        parts.append(f'"kraftControllerEpoch":{c.kraft_controller_epoch}')
    return ("{" + ",".join(parts) + "}").encode()


def decode_controller_epoch(path: str, data: bytes | None, *, zk_version: int = 0) -> ControllerEpoch:
    return ControllerEpoch(java_int_text(path, "controller epoch", utf8_text(path, data)), zk_version)


def encode_controller_epoch(e: ControllerEpoch) -> bytes:
    return str(e.epoch).encode()


_MIGRATION_ORDER = scala_map_order(
    (
        "version",
        "kraft_controller_id",
        "kraft_controller_epoch",
        "kraft_metadata_offset",
        "kraft_metadata_epoch",
    )
)


def decode_migration(path: str, data: bytes | None, *, zk_version: int = 0, mtime: int = 0) -> MigrationState:
    obj = parse_object(path, data)
    version = version_field(obj, path, (0,))
    return MigrationState(
        kraft_controller_id=int_field(obj, "kraft_controller_id", path),
        kraft_controller_epoch=int_field(obj, "kraft_controller_epoch", path),
        kraft_metadata_offset=long_field(obj, "kraft_metadata_offset", path),
        kraft_metadata_epoch=int_field(obj, "kraft_metadata_epoch", path),
        version=version,
        zk_version=zk_version,
        last_updated_ms=mtime,
    )


def encode_migration(m: MigrationState) -> bytes:
    values = {
        "version": str(m.version),
        "kraft_controller_id": str(m.kraft_controller_id),
        "kraft_controller_epoch": str(m.kraft_controller_epoch),
        "kraft_metadata_offset": str(m.kraft_metadata_offset),
        "kraft_metadata_epoch": str(m.kraft_metadata_epoch),
    }
    return json_object(values, _MIGRATION_ORDER).encode()
