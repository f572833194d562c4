"""AlterConfigs (api 33) and IncrementalAlterConfigs (api 44) as Kafka 3.9's controller handles them.

ControllerApis sorts the request (unknown resource types, duplicate resources), then
ConfigurationControlManager computes ConfigRecords per resource: the legacy API replaces a resource's
whole config map, the incremental one applies SET / DELETE / APPEND / SUBTRACT. Each resource is
validated on its resulting full map (ControllerConfigurationValidator) and must exist; a failing
resource contributes no records. validate_only answers the same but appends nothing.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from types import ModuleType
from typing import Any, Final

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from bridge.api import ControllerHandler, ControllerResult, HandlerContext, RecordAndVersion
from bridge.handlers import config_defs as defs
from bridge.kafka.protocol import response_class
from migrate.kraft import records as rec
from migrate.kraft.image import MetadataImage

ALTER_CONFIGS_KEY: Final = 33
INCREMENTAL_ALTER_CONFIGS_KEY: Final = 44

# AlterConfigOp.OpType ids.
OP_SET: Final = 0
OP_DELETE: Final = 1
OP_APPEND: Final = 2
OP_SUBTRACT: Final = 3
_OP_NAMES: Final = {OP_SET: "SET", OP_DELETE: "DELETE", OP_APPEND: "APPEND", OP_SUBTRACT: "SUBTRACT"}

TOPIC_NAME_MAX_LENGTH: Final = 249
_TOPIC_NAME_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


@dataclass(frozen=True, slots=True)
class ApiError:
    """Kafka's ApiError: an error code and its message (None for success)."""

    error: ErrorCode
    message: str | None = None

    @property
    def is_failure(self) -> bool:
        return self.error != ErrorCode.none


NONE: Final = ApiError(ErrorCode.none)


class _UnexpectedError(Exception):
    """A failure Kafka's controller does not expect (e.g. APPEND with a null value): the whole request fails."""


# ------------------------------------------------------------------------------------- validation


def validate_topic_name(name: str) -> ApiError:
    """Kafka's Topic.validate, with InvalidTopicException's error code."""
    message: str | None = None
    if not name:
        message = "Topic name is illegal, it can't be empty"
    elif name in (".", ".."):
        message = 'Topic name cannot be "." or ".."'
    elif len(name.encode("utf-16-le")) // 2 > TOPIC_NAME_MAX_LENGTH:
        message = (
            f"Topic name is illegal, it can't be longer than {TOPIC_NAME_MAX_LENGTH} characters, "
            f"Topic name: {name}"
        )
    elif not set(name) <= _TOPIC_NAME_CHARS:
        message = (
            f'Topic name "{name}" is illegal, it contains a character other than ASCII alphanumerics, '
            "'.', '_' and '-'"
        )
    return NONE if message is None else ApiError(ErrorCode.invalid_topic_exception, message)


def _parse_java_int(text: str) -> int | None:
    """Integer.parseInt: optional sign and decimal digits within int32."""
    return defs.parse_java_long(text, defs.INT32_MIN, defs.INT32_MAX)


def validate_resource_configs(
    image: MetadataImage, resource: tuple[int, str], all_configs: Mapping[str, str | None]
) -> ApiError:
    """ControllerConfigurationValidator.validate(resource, configs) for TOPIC and BROKER resources."""
    resource_type, name = resource
    if resource_type == defs.RESOURCE_TOPIC:
        if not name:
            return ApiError(ErrorCode.invalid_request, "Default topic resources are not allowed.")
        topic_error = validate_topic_name(name)
        if topic_error.is_failure:
            return topic_error
        existing = image.configs.get((resource_type, name), {})
        problems = defs.validate_topic_configs(all_configs, existing=existing)
        if problems:
            return ApiError(problems[0].error, problems[0].message)
        return NONE
    if resource_type == defs.RESOURCE_BROKER and name:
        broker_id = _parse_java_int(name)
        if broker_id is None:
            return ApiError(ErrorCode.invalid_request, "Unable to parse broker name as a base 10 number.")
        if broker_id < 0:
            return ApiError(ErrorCode.invalid_request, "Invalid negative broker ID.")
    return NONE


def check_resource_exists(image: MetadataImage, resource: tuple[int, str], controller_id: int) -> ApiError:
    """QuorumController's ConfigResourceExistenceChecker: the topic, or the broker / controller node, exists."""
    resource_type, name = resource
    if resource_type == defs.RESOURCE_TOPIC:
        if name not in image.topics_by_name:
            return ApiError(ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.")
    elif resource_type == defs.RESOURCE_BROKER and name:
        node_id = _parse_java_int(name)
        if node_id is None:
            return ApiError(ErrorCode.invalid_request, f"Invalid broker name {name}")
        known = (
            node_id in image.cluster.brokers
            or node_id in image.cluster.controllers
            or node_id == controller_id
        )
        if not known:
            return ApiError(ErrorCode.broker_id_not_registered, f"No node with id {node_id} found.")
    return NONE


def _validate_alter(
    ctx: HandlerContext,
    resource: tuple[int, str],
    altered: list[rec.ConfigRecord],
    implicitly_deleted: list[rec.ConfigRecord],
) -> ApiError:
    """ConfigurationControlManager.validateAlterConfig: validate the resulting map, then existence."""
    all_configs: dict[str, str | None] = dict(ctx.image.configs.get(resource, {}))
    for record in altered:
        if record.value is None:
            all_configs.pop(record.name, None)
        else:
            all_configs[record.name] = record.value
    for record in implicitly_deleted:
        all_configs.pop(record.name, None)
    error = validate_resource_configs(ctx.image, resource, all_configs)
    if error.is_failure:
        return error
    return check_resource_exists(ctx.image, resource, ctx.node_id)


def _config_record(resource: tuple[int, str], name: str, value: str | None) -> rec.ConfigRecord:
    return rec.ConfigRecord(resource_type=resource[0], resource_name=resource[1], name=name, value=value)


# ------------------------------------------------------------------------------------- incremental


def _java_split(text: str, separator: str) -> list[str]:
    """Java's String.split(literal): no match gives [text]; trailing empty strings are dropped."""
    if separator not in text:
        return [text]
    parts = text.split(separator)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _list_parts(value: str | None, resource: tuple[int, str], key: str) -> list[str]:
    """ConfigurationControlManager.getParts: the current (or default) value's non-empty items."""
    if value is None:
        value = defs.config_default(resource[0], key)
    if value is None:
        return []
    return [part for part in _java_split(value, ",") if part]


def incremental_alter_resource(
    ctx: HandlerContext, resource: tuple[int, str], ops: Mapping[str, tuple[int, str | None]]
) -> tuple[ApiError, list[rec.ConfigRecord]]:
    """ConfigurationControlManager.incrementalAlterConfigResource: the records of one resource, or its error."""
    current = ctx.image.configs.get(resource, {})
    records: list[rec.ConfigRecord] = []
    for key, (op, op_value) in ops.items():
        current_value = current.get(key)
        new_value = current_value
        if op == OP_SET:
            new_value = op_value
        elif op == OP_DELETE:
            new_value = None
        elif op in (OP_APPEND, OP_SUBTRACT):
            if defs.config_type(resource[0], key) is not defs.ConfigType.LIST:
                return (
                    ApiError(
                        ErrorCode.invalid_config,
                        f"Can't {_OP_NAMES[op]} to key {key} because its type is not LIST.",
                    ),
                    [],
                )
            if op_value is None:
                raise _UnexpectedError(f"{_OP_NAMES[op]} of {key} without a value")
            parts = _list_parts(new_value, resource, key)
            for item in _java_split(op_value, ","):
                if op == OP_APPEND:
                    if item not in parts:
                        parts.append(item)
                elif item in parts:
                    parts.remove(item)
            new_value = ",".join(parts)
        else:
            # AlterConfigOp.OpType.forId throws for other ids: the whole request fails.
            raise _UnexpectedError(f"Unknown operation type {op}")
        # KAFKA-14136: broker configs are rewritten even when unchanged so brokers reload them.
        if current_value != new_value or resource[0] == defs.RESOURCE_BROKER:
            records.append(_config_record(resource, key, new_value))
    error = _validate_alter(ctx, resource, records, [])
    return (error, []) if error.is_failure else (NONE, records)


def legacy_alter_resource(
    ctx: HandlerContext, resource: tuple[int, str], new_configs: Mapping[str, str | None]
) -> tuple[ApiError, list[rec.ConfigRecord]]:
    """ConfigurationControlManager.legacyAlterConfigResource: set these keys, delete every other key."""
    current = ctx.image.configs.get(resource, {})
    altered = [
        _config_record(resource, key, value)
        for key, value in new_configs.items()
        if current.get(key) != value or resource[0] == defs.RESOURCE_BROKER
    ]
    implicitly_deleted = [_config_record(resource, key, None) for key in current if key not in new_configs]
    error = _validate_alter(ctx, resource, altered, implicitly_deleted)
    return (error, []) if error.is_failure else (NONE, altered + implicitly_deleted)


# ------------------------------------------------------------------------------------- request plumbing


@dataclass(slots=True)
class _Sorted:
    """ControllerApis' first pass: early responses, and the changes per resource in request order."""

    early: list[tuple[int, str, ApiError]]
    changes: dict[tuple[int, str], Any]
    logger_responses: list[tuple[int, str, ApiError]]


def _sort_resources(resources: Iterable[Any], incremental: bool) -> _Sorted:
    sorted_ = _Sorted([], {}, [])
    duplicates: set[tuple[int, str]] = set()
    for resource in resources:
        type_id, name = int(resource.resource_type), str(resource.resource_name)
        key = (type_id, name)
        if incremental and type_id == defs.RESOURCE_BROKER_LOGGER:
            # Kafka's controller changes its own log4j levels here; the bridge has none to change.
            message = "BROKER_LOGGER resources are not supported by the zk2kraft bridge controller."
            sorted_.logger_responses.append((type_id, name, ApiError(ErrorCode.invalid_request, message)))
        elif type_id not in defs.RESOURCE_TYPE_NAMES:
            message = f"Unknown resource type {type_id}."
            sorted_.early.append((type_id, name, ApiError(ErrorCode.unsupported_version, message)))
        elif key not in duplicates:
            if incremental:
                change: dict[str, Any] = {
                    c.name: (int(c.config_operation), c.value) for c in resource.configs
                }
            else:
                change = {c.name: c.value for c in resource.configs}
            if key in sorted_.changes:
                duplicates.add(key)
                del sorted_.changes[key]
                sorted_.early.append(
                    (type_id, name, ApiError(ErrorCode.invalid_request, "Duplicate resource."))
                )
            else:
                sorted_.changes[key] = change
    return sorted_


def _unsupported_type(resource: tuple[int, str]) -> ApiError | None:
    """Resource types Kafka's controller takes that the bridge does not (no ZooKeeper home in migration)."""
    if resource[0] in (defs.RESOURCE_TOPIC, defs.RESOURCE_BROKER):
        return None
    if resource[0] == defs.RESOURCE_BROKER_LOGGER:
        # ControllerApis.authorizeAlterResource for the legacy API.
        return ApiError(ErrorCode.invalid_request, "Unexpected resource type BROKER_LOGGER.")
    type_name = defs.RESOURCE_TYPE_NAMES[resource[0]]
    return ApiError(
        ErrorCode.invalid_request,
        f"{type_name} resources are not supported by the zk2kraft bridge controller.",
    )


def _response_module(api_key: int, version: int) -> ModuleType:
    return importlib.import_module(response_class(api_key, version).__module__)


def _respond(
    api_key: int, version: int, response_name: str, entries: Iterable[tuple[int, str, ApiError]]
) -> Any:
    module = _response_module(api_key, version)
    return getattr(module, response_name)(
        throttle_time=timedelta(0),
        responses=tuple(
            module.AlterConfigsResourceResponse(
                error_code=error.error,
                error_message=error.message,
                resource_type=i8(type_id),
                resource_name=name,
            )
            for type_id, name, error in entries
        ),
    )


def _handle(ctx: HandlerContext, request: Any, api_key: int, incremental: bool) -> ControllerResult:
    version = int(request.__version__)
    response_name = "IncrementalAlterConfigsResponse" if incremental else "AlterConfigsResponse"
    sorted_ = _sort_resources(request.resources, incremental)
    entries = list(sorted_.early)
    records: list[RecordAndVersion] = []
    # Like ControllerApis' authorization pass: refused resources answer before the controller's results.
    changes = {}
    for resource, change in sorted_.changes.items():
        unsupported = _unsupported_type(resource)
        if unsupported is not None:
            entries.append((*resource, unsupported))
        else:
            changes[resource] = change
    try:
        for resource, change in changes.items():
            if incremental:
                error, resource_records = incremental_alter_resource(ctx, resource, change)
            else:
                error, resource_records = legacy_alter_resource(ctx, resource, change)
            entries.append((*resource, error))
            records.extend((record, 0) for record in resource_records)
    except _UnexpectedError:
        # The controller event fails; ControllerApis answers every resource of the request with it.
        # ApiError.fromThrowable leaves UNKNOWN_SERVER_ERROR without a message (nothing leaks).
        failure = ApiError(ErrorCode.unknown_server_error, None)
        every = [(int(r.resource_type), str(r.resource_name), failure) for r in request.resources]
        return ControllerResult([], _respond(api_key, version, response_name, every))
    entries.extend(sorted_.logger_responses)
    if request.validate_only:
        records = []
    return ControllerResult(records, _respond(api_key, version, response_name, entries))


def handle_alter_configs(ctx: HandlerContext, request: Any) -> ControllerResult:
    """AlterConfigs v0-2: replace each resource's configs (keys not given are deleted)."""
    return _handle(ctx, request, ALTER_CONFIGS_KEY, incremental=False)


def handle_incremental_alter_configs(ctx: HandlerContext, request: Any) -> ControllerResult:
    """IncrementalAlterConfigs v0-1: SET / DELETE / APPEND / SUBTRACT per key."""
    return _handle(ctx, request, INCREMENTAL_ALTER_CONFIGS_KEY, incremental=True)


HANDLERS: Final[dict[int, ControllerHandler]] = {
    ALTER_CONFIGS_KEY: handle_alter_configs,
    INCREMENTAL_ALTER_CONFIGS_KEY: handle_incremental_alter_configs,
}
SUPPORTED: Final[dict[int, tuple[int, int]]] = {
    ALTER_CONFIGS_KEY: (0, 2),
    INCREMENTAL_ALTER_CONFIGS_KEY: (0, 1),
}
