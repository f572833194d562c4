"""Public face of the generated record classes: registries by apiKey / control type and Kafka's JSON view.

`record_to_json` gives what Kafka's generated `<Record>JsonConverter.write` produces (and so what
`kafka-dump-log --cluster-metadata-decoder` prints as `"data"`); `record_from_json` is its inverse.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from typing import Any, TypeVar

from migrate.errors import UnsupportedVersionError
from migrate.kraft._generated import (
    CONTROL_RECORD_CLASSES,
    METADATA_RECORD_CLASSES,
    SCHEMA_COMMIT,
    AbortTransactionRecord,
    AccessControlEntryRecord,
    BeginTransactionRecord,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    ControlRecord,
    DelegationTokenRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    KRaftVersionRecord,
    LeaderChangeMessage,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RegisterControllerRecord,
    RemoveAccessControlEntryRecord,
    RemoveDelegationTokenRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
    VotersRecord,
    ZkMigrationStateRecord,
)
from migrate.kraft.wire import FieldInfo, InvalidValueError, struct_problem, uuid_from_text, uuid_to_text

__all__ = [
    "CONTROL_RECORD_CLASSES",
    "CONTROL_RECORD_TYPES",
    "METADATA_RECORD_CLASSES",
    "METADATA_RECORD_TYPES",
    "SCHEMA_COMMIT",
    "AbortTransactionRecord",
    "AccessControlEntryRecord",
    "BeginTransactionRecord",
    "BrokerRegistrationChangeRecord",
    "ClientQuotaRecord",
    "ConfigRecord",
    "ControlRecord",
    "DelegationTokenRecord",
    "EndTransactionRecord",
    "FeatureLevelRecord",
    "FenceBrokerRecord",
    "FieldInfo",
    "InvalidValueError",
    "KRaftVersionRecord",
    "LeaderChangeMessage",
    "MetadataRecord",
    "NoOpRecord",
    "PartitionChangeRecord",
    "PartitionRecord",
    "ProducerIdsRecord",
    "RegisterBrokerRecord",
    "RegisterControllerRecord",
    "RemoveAccessControlEntryRecord",
    "RemoveDelegationTokenRecord",
    "RemoveTopicRecord",
    "RemoveUserScramCredentialRecord",
    "SnapshotFooterRecord",
    "SnapshotHeaderRecord",
    "TopicRecord",
    "UnfenceBrokerRecord",
    "UnregisterBrokerRecord",
    "UserScramCredentialRecord",
    "VotersRecord",
    "ZkMigrationStateRecord",
    "record_from_json",
    "record_to_json",
]

METADATA_RECORD_TYPES: dict[int, type[MetadataRecord]] = {cls.API_KEY: cls for cls in METADATA_RECORD_CLASSES}
CONTROL_RECORD_TYPES: dict[int, type[ControlRecord]] = {
    cls.CONTROL_TYPE: cls for cls in CONTROL_RECORD_CLASSES
}

R = TypeVar("R")

_INTEGER_TYPES = frozenset({"int8", "int16", "uint16", "int32", "int64"})


def _check_version(cls: type, version: int) -> None:
    lo, hi = cls.LOWEST_VERSION, cls.HIGHEST_VERSION  # type: ignore[attr-defined]
    if not isinstance(version, int) or not lo <= version <= hi:
        raise UnsupportedVersionError(f"{cls.__name__} has no version {version} (valid: {lo}-{hi})")


# ------------------------------------------------------------------ record → JSON


def record_to_json(record: object, version: int) -> dict[str, Any]:
    """Kafka's JsonConverter view of `record` at `version` (camelCase keys, only that version's fields).

    Tagged fields appear only when they differ from their default; unknown tagged fields never appear.
    """
    _check_version(type(record), version)
    return _struct_to_json(record, version, type(record).__name__)


def _struct_to_json(obj: object, version: int, path: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for info in type(obj).FIELDS:  # type: ignore[attr-defined]
        value = getattr(obj, info.name)
        if not info.present_in(version):
            if not info.ignorable and not info.is_default(value):
                raise UnsupportedVersionError(
                    f"Attempted to write a non-default {info.json_name} at version {version} of {path}"
                )
            continue
        if info.tagged_in(version) and info.is_default(value):
            continue
        out[info.json_name] = _field_to_json(info, value, version, f"{path}.{info.name}")
    return out


def _field_to_json(info: FieldInfo, value: Any, version: int, path: str) -> Any:
    if value is None:
        if info.nullable_in(version):
            return None
        raise InvalidValueError(f"{path} is null but not nullable in version {version}")
    if info.is_array:
        if not isinstance(value, list):
            raise InvalidValueError(f"{path}: array field holds {type(value).__name__}")
        return [_element_to_json(info, element, version, f"{path}[{i}]") for i, element in enumerate(value)]
    return _element_to_json(info, value, version, path)


def _element_to_json(info: FieldInfo, value: Any, version: int, path: str) -> Any:
    kind = info.element_type
    if info.struct is not None:
        if not isinstance(value, info.struct):
            raise InvalidValueError(
                f"{path}: expected {info.struct.__qualname__}, got {type(value).__name__}"
            )
        return _struct_to_json(value, version, path)
    if kind == "uuid":
        if not isinstance(value, uuid.UUID):
            raise InvalidValueError(f"{path}: uuid field holds {type(value).__name__}")
        return uuid_to_text(value)
    if kind == "bytes":
        if not isinstance(value, bytes | bytearray | memoryview):
            raise InvalidValueError(f"{path}: bytes field holds {type(value).__name__}")
        return base64.b64encode(bytes(value)).decode("ascii")
    if kind == "float64":
        return float(value)
    return value


# ------------------------------------------------------------------ JSON → record


def record_from_json(cls: type[R], version: int, obj: Any) -> R:
    """Build a `cls` record from its JsonConverter form at `version` (inverse of `record_to_json`).

    Missing tagged fields take their defaults; a missing regular field, a field the version lacks,
    an unknown key, or a value of the wrong type/range raises InvalidValueError.
    """
    _check_version(cls, version)
    record = _struct_from_json(cls, version, obj, cls.__name__)
    problem = struct_problem(record, version, cls.__name__)
    if problem is not None:
        raise InvalidValueError(problem)
    return record


def _struct_from_json(cls: type[R], version: int, obj: Any, path: str) -> R:
    if not isinstance(obj, dict):
        raise InvalidValueError(f"{path}: expected a JSON object, got {type(obj).__name__}")
    fields: tuple[FieldInfo, ...] = cls.FIELDS  # type: ignore[attr-defined]
    known = {info.json_name for info in fields}
    extra = sorted(str(key) for key in obj if key not in known)
    if extra:
        raise InvalidValueError(f"{path}: unknown field(s) {', '.join(extra)}")
    kwargs: dict[str, Any] = {}
    for info in fields:
        where = f"{path}.{info.json_name}"
        if info.json_name not in obj:
            if info.present_in(version) and not info.tagged_in(version):
                raise InvalidValueError(f"{where} is missing but mandatory in version {version}")
            continue
        if not info.present_in(version):
            raise InvalidValueError(f"{where} is not supported in version {version}")
        kwargs[info.name] = _field_from_json(info, obj[info.json_name], version, where)
    return cls(**kwargs)


def _field_from_json(info: FieldInfo, value: Any, version: int, path: str) -> Any:
    if value is None:
        if info.nullable_in(version):
            return None
        raise InvalidValueError(f"{path} is null but not nullable in version {version}")
    if info.is_array:
        if not isinstance(value, list):
            raise InvalidValueError(f"{path}: expected a JSON array, got {type(value).__name__}")
        return [_element_from_json(info, element, version, f"{path}[{i}]") for i, element in enumerate(value)]
    return _element_from_json(info, value, version, path)


def _element_from_json(info: FieldInfo, value: Any, version: int, path: str) -> Any:
    kind = info.element_type
    if info.struct is not None:
        return _struct_from_json(info.struct, version, value, path)
    if kind in _INTEGER_TYPES:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidValueError(f"{path}: expected an integer, got {type(value).__name__}")
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise InvalidValueError(f"{path}: expected a boolean, got {type(value).__name__}")
        return value
    if kind == "float64":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidValueError(f"{path}: expected a number, got {type(value).__name__}")
        return float(value)
    if not isinstance(value, str):
        raise InvalidValueError(f"{path}: expected a JSON string, got {type(value).__name__}")
    if kind == "string":
        return value
    if kind == "uuid":
        try:
            return uuid_from_text(value)
        except InvalidValueError as e:
            raise InvalidValueError(f"{path}: {e}") from None
    if kind == "bytes":
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidValueError(f"{path}: {value!r} is not base64") from None
    raise InvalidValueError(f"{path}: unsupported schema type {info.schema_type}")
