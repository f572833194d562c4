"""AlterClientQuotas (api 49) as Kafka 3.9's ClientQuotaControlManager handles it.

Each entry names an entity (user / client-id / ip, a null name being the default entity) and quota ops
(set a value, or remove). Entities and keys are validated as Kafka does; a failing entity contributes no
records; removing a quota that is not set writes nothing; setting an unchanged value writes nothing.
Kafka keeps entities in Java HashMaps, so the order of entity parts in records, responses and messages
is the HashMap's: reproduced here so the bytes and messages are Kafka's.
"""

from __future__ import annotations

import importlib
import ipaddress
import math
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from kio.schema.errors import ErrorCode

from bridge.api import ControllerHandler, ControllerResult, HandlerContext, RecordAndVersion
from bridge.handlers.configs import NONE, ApiError
from bridge.kafka.protocol import response_class
from migrate.jvm import java_hash_map_order
from migrate.kraft import records as rec
from migrate.kraft.image import MetadataImage, QuotaEntity

ALTER_CLIENT_QUOTAS_KEY: Final = 49

USER: Final = "user"
CLIENT_ID: Final = "client-id"
IP: Final = "ip"

# QuotaConfig.userAndClientQuotaConfigs() and ipConfigs(): key -> ConfigDef type.
USER_AND_CLIENT_QUOTA_KEYS: Final = {
    "producer_byte_rate": "LONG",
    "consumer_byte_rate": "LONG",
    "request_percentage": "DOUBLE",
    "controller_mutation_rate": "DOUBLE",
}
IP_QUOTA_KEYS: Final = {"connection_creation_rate": "INT"}
_INTEGRAL_LIMITS: Final = {
    "SHORT": (float((1 << 15) - 1), "a SHORT"),
    "INT": (float((1 << 31) - 1), "an INT"),
    "LONG": (float((1 << 63) - 1), "a LONG"),
}


@dataclass(frozen=True, slots=True, eq=False)
class Entity:
    """Kafka's ClientQuotaEntity: its parts in the order the backing HashMap iterates them.

    Equal when the maps are equal, whatever the order (as ClientQuotaEntity.equals).
    """

    parts: tuple[tuple[str, str | None], ...]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Entity) and frozenset(self.parts) == frozenset(other.parts)

    def __hash__(self) -> int:
        return hash(frozenset(self.parts))

    @classmethod
    def from_request(cls, entity_data: Sequence[Any]) -> Entity:
        """AlterClientQuotasRequest.entries(): a HashMap sized to the list; a repeated type keeps the last name."""
        names: dict[str, str | None] = {}
        for data in entity_data:
            names[str(data.entity_type)] = data.entity_name
        order = java_hash_map_order((str(d.entity_type) for d in entity_data), len(entity_data))
        return cls(tuple((t, names[t]) for t in order))

    @property
    def key(self) -> QuotaEntity:
        """The image's key: parts sorted by type."""
        return tuple(sorted(self.parts, key=lambda p: p[0]))

    def __str__(self) -> str:
        inner = ", ".join(f"{t}={'null' if n is None else n}" for t, n in self.parts)
        return f"ClientQuotaEntity(entries={{{inner}}})"


# ------------------------------------------------------------------------------------- validation


def _is_valid_ip_entity(ip: str | None) -> bool:
    """InetAddress.getByName succeeds: an address literal (IPv6 may be bracketed) or a resolvable host."""
    if ip is None:
        return True
    literal = ip[1:-1] if ip.startswith("[") and ip.endswith("]") else ip
    try:
        ipaddress.ip_address(literal)
        return True
    except ValueError:
        if literal is not ip:
            return False
    try:
        socket.getaddrinfo(ip, None)
    except (OSError, UnicodeError):
        return False
    return True


def _validate_entity(entity: Entity) -> ApiError:
    """ClientQuotaControlManager.validateEntity."""
    if not entity.parts:
        return ApiError(ErrorCode.invalid_request, "Invalid empty client quota entity")
    for entity_type, name in entity.parts:
        if entity_type not in (USER, CLIENT_ID, IP):
            return ApiError(ErrorCode.invalid_request, f"Unhandled client quota entity type: {entity_type}")
        if name is not None and name == "":
            return ApiError(ErrorCode.invalid_request, f"Empty {entity_type} not supported")
    return NONE


def _config_keys(entity: Entity) -> tuple[ApiError, dict[str, str]]:
    """ClientQuotaControlManager.configKeysForEntityType."""
    names = dict(entity.parts)
    if IP in names:
        if USER in names or CLIENT_ID in names:
            # Kafka's message lacks the space between "should" and "not".
            return ApiError(
                ErrorCode.invalid_request,
                "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId",
            ), {}
        if not _is_valid_ip_entity(names[IP]):
            return ApiError(
                ErrorCode.invalid_request, f"{names[IP]} is not a valid IP or resolvable host."
            ), {}
        return NONE, IP_QUOTA_KEYS
    return NONE, USER_AND_CLIENT_QUOTA_KEYS


def validate_quota_value(keys: dict[str, str], key: str, value: float) -> ApiError:
    """ClientQuotaControlManager.validateQuotaKeyValue (NaN passes every check, as in Java)."""
    config_type = keys.get(key)
    if config_type is None:
        return ApiError(ErrorCode.invalid_request, f"Invalid configuration key {key}")
    if value <= 0.0:
        return ApiError(ErrorCode.invalid_request, f"Quota {key} must be greater than 0")
    if config_type == "DOUBLE":
        return NONE
    limit, article = _INTEGRAL_LIMITS[config_type]
    if value > limit:
        return ApiError(ErrorCode.invalid_request, f"Proposed value for {key} is too large for {article}.")
    if abs(math.fmod(value, 1.0)) > 1e-6:
        return ApiError(ErrorCode.invalid_request, f"{key} cannot be a fractional value.")
    return NONE


def _record_entity(entity: Entity) -> list[rec.ClientQuotaRecord.EntityData]:
    """The record's entity list: validatedEntityMap (a HashMap of capacity 3) in its iteration order."""
    names = dict(entity.parts)
    order = java_hash_map_order((t for t, _ in entity.parts), 3)
    return [rec.ClientQuotaRecord.EntityData(entity_type=t, entity_name=names[t]) for t in order]


def alter_entity(
    image: MetadataImage, entity: Entity, ops: dict[str, float | None]
) -> tuple[ApiError, list[rec.ClientQuotaRecord]]:
    """ClientQuotaControlManager.alterClientQuotaEntity: the records for one entity, or its error."""
    error = _validate_entity(entity)
    if error.is_failure:
        return error, []
    error, keys = _config_keys(entity)
    if error.is_failure:
        return error, []
    current = image.client_quotas.get(entity.key, {})
    records: list[rec.ClientQuotaRecord] = []
    for key, value in ops.items():
        if value is None:
            if key in current:
                records.append(
                    rec.ClientQuotaRecord(entity=_record_entity(entity), key=key, value=0.0, remove=True)
                )
            continue
        error = validate_quota_value(keys, key, value)
        if error.is_failure:
            return error, []
        # Objects.equals on Doubles: NaN equals NaN, 0.0 differs from -0.0.
        old = current.get(key)
        unchanged = old is not None and (
            (math.isnan(old) and math.isnan(value))
            or (old == value and math.copysign(1, old) == math.copysign(1, value))
        )
        if not unchanged:
            records.append(
                rec.ClientQuotaRecord(entity=_record_entity(entity), key=key, value=value, remove=False)
            )
    return NONE, records


# ------------------------------------------------------------------------------------- handler


def handle_alter_client_quotas(ctx: HandlerContext, request: Any) -> ControllerResult:
    """AlterClientQuotas v0-1 (ClientQuotaControlManager.alterClientQuotas + ControllerApis)."""
    version = int(request.__version__)
    results: dict[Entity, ApiError] = {}
    records: list[RecordAndVersion] = []
    for entry in request.entries:
        entity = Entity.from_request(entry.entity)
        ops: dict[str, float | None] = {}
        for op in entry.ops:
            if op.key in ops:
                results[entity] = ApiError(
                    ErrorCode.invalid_request,
                    f"Duplicate quota key {op.key} not updating quota for this entity {entity}",
                )
            else:
                ops[op.key] = None if op.remove else float(op.value)
        if entity in results:
            # Also replaces a duplicate-key error: Kafka reports both cases this way.
            results[entity] = ApiError(ErrorCode.invalid_request, f"Ignoring duplicate entity {entity}")
            continue
        error, entity_records = alter_entity(ctx.image, entity, ops)
        results[entity] = error
        records.extend((record, 0) for record in entity_records)
    if request.validate_only:
        records = []
    return ControllerResult(records, _response(version, results))


def _response(version: int, results: dict[Entity, ApiError]) -> Any:
    module = importlib.import_module(response_class(ALTER_CLIENT_QUOTAS_KEY, version).__module__)
    return module.AlterClientQuotasResponse(
        throttle_time=timedelta(0),
        entries=tuple(
            module.EntryData(
                error_code=error.error,
                error_message=error.message,
                entity=tuple(module.EntityData(entity_type=t, entity_name=n) for t, n in entity.parts),
            )
            for entity, error in results.items()
        ),
    )


HANDLERS: Final[dict[int, ControllerHandler]] = {ALTER_CLIENT_QUOTAS_KEY: handle_alter_client_quotas}
SUPPORTED: Final[dict[int, tuple[int, int]]] = {ALTER_CLIENT_QUOTAS_KEY: (0, 1)}
