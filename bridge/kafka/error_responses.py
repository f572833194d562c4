"""Kafka's `AbstractRequest.getErrorResponse` for the controller's APIs: one error for every item of a request.

Used when the controller cannot take a request at all (NOT_CONTROLLER before DUAL_WRITE or once fenced,
UNKNOWN_SERVER_ERROR on a bug): each per-topic / per-resource / per-ACL result of the response carries the
error, echoing the identifying fields of the matching request item, as Kafka's error responses do.
"""

from __future__ import annotations

import dataclasses
import types
import typing
import uuid
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from bridge.kafka.protocol import response_class

# Response list field → the request list field(s) whose items it answers, one result per item.
_ITEM_LISTS: dict[int, tuple[str, tuple[str, ...]]] = {
    19: ("topics", ("topics",)),  # CreateTopics
    20: ("responses", ("topics", "topic_names")),  # DeleteTopics (v6+ by topics, before by names)
    30: ("results", ("creations",)),  # CreateAcls
    31: ("filter_results", ("filters",)),  # DeleteAcls
    33: ("responses", ("resources",)),  # AlterConfigs
    37: ("results", ("topics",)),  # CreatePartitions
    43: ("replica_election_results", ("topic_partitions",)),  # ElectLeaders (null topic_partitions: none)
    44: ("responses", ("resources",)),  # IncrementalAlterConfigs
    45: ("responses", ("topics",)),  # AlterPartitionReassignments
    46: ("topics", ("topics",)),  # ListPartitionReassignments (null topics: none)
    49: ("entries", ("entries",)),  # AlterClientQuotas
    51: ("results", ("deletions", "upsertions")),  # AlterUserScramCredentials (one result per user op)
}
_ALL_OF = {51}  # items of every listed request field are answered, not only of the first non-empty one
# Results nested in an item's result, one per element of the request item's own list (result field → request
# field): a partition result per partition of a topic, as Kafka's getErrorResponse builds them.
_NESTED_ITEM_LISTS: dict[int, dict[str, str]] = {
    43: {"partition_result": "partitions"},  # ElectLeaders (partition ids only)
    45: {"partitions": "partitions"},  # AlterPartitionReassignments
    46: {"partitions": "partition_indexes"},  # ListPartitionReassignments (partition indexes only)
}


def error_response(
    api_key: int, api_version: int, request: Any, error: ErrorCode, message: str | None = None
) -> Any:
    """The kio response of `api_key`/`api_version` that fails every item of `request` with `error`."""
    cls = response_class(api_key, api_version)
    items: list[Any] = []
    list_field = None
    if api_key in _ITEM_LISTS:
        list_field, sources = _ITEM_LISTS[api_key]
        for name in sources:
            found = list(getattr(request, name, None) or ())
            items.extend(found)
            if found and api_key not in _ALL_OF:
                break
    return _build(
        cls,
        request,
        error,
        message,
        {list_field: items} if list_field else {},
        _NESTED_ITEM_LISTS.get(api_key, {}),
    )


_HINTS: dict[type[Any], dict[str, Any]] = {}


def _hints(cls: type[Any]) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


def _build(
    cls: type[Any],
    source: Any,
    error: ErrorCode,
    message: str | None,
    lists: dict[str, list[Any]],
    nested_lists: dict[str, str] | None = None,
) -> Any:
    hints = _hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        kind = hints[f.name]
        entity = _entity_tuple(kind)
        if f.name == "error_code":
            values[f.name] = error
        elif f.name == "error_message":
            values[f.name] = message
        elif f.name == "throttle_time":
            values[f.name] = timedelta(0)
        elif f.name in lists or (f.name in _IDENTIFYING_LISTS and entity is not None):
            items = lists[f.name] if f.name in lists else list(getattr(source, f.name, None) or ())
            if entity is None:
                values[f.name] = tuple(items)
            else:
                values[f.name] = tuple(
                    _build(
                        entity, _as_source(item), error, message, _nested(item, nested_lists), nested_lists
                    )
                    for item in items
                )
        elif f.name in _IDENTIFYING and _identity(source, f.name) is not None:
            values[f.name] = _identity(source, f.name)
        elif f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            continue
        else:
            values[f.name] = _zero(kind)
    return cls(**values)


# Fields that say which item a result answers; everything else keeps its default (Kafka's error responses
# set only these, the error code and the message).
_IDENTIFYING = frozenset(
    {"name", "topic_id", "resource_type", "resource_name", "entity_type", "entity_name", "user",
     "partition_index", "partition_id", "topic", "topic_name"}
)  # fmt: skip
_IDENTIFYING_LISTS = frozenset({"entity"})  # AlterClientQuotas answers with the request's entity


def _identity(source: Any, name: str) -> Any:
    if isinstance(source, _Named):
        return source.name if name in ("name", "user") else None
    if isinstance(source, _Indexed):
        return source.partition_index if name in ("partition_index", "partition_id") else None
    if name == "user" and not hasattr(source, "user"):
        name = "name"  # AlterUserScramCredentials: request items have `name`, results `user`
    return getattr(source, name, None)


@dataclasses.dataclass(frozen=True, slots=True)
class _Named:
    """A request item that is only a name (DeleteTopics before v6 lists topic names)."""

    name: str


@dataclasses.dataclass(frozen=True, slots=True)
class _Indexed:
    """A request item that is only a partition index (ListPartitionReassignments' partition_indexes,
    ElectLeaders' partitions)."""

    partition_index: int


def _as_source(item: Any) -> Any:
    if isinstance(item, str):
        return _Named(item)
    return _Indexed(item) if isinstance(item, int) else item


def _nested(item: Any, nested_lists: dict[str, str] | None) -> dict[str, list[Any]]:
    """The nested result lists of one request item (`nested_lists`: result field → the item's field)."""
    if not nested_lists or isinstance(item, str | int):
        return {}
    return {field: list(getattr(item, source, None) or ()) for field, source in nested_lists.items()}


def _entity_tuple(kind: Any) -> type[Any] | None:
    """The entity class of a `tuple[Entity, ...]` (or optional one) field, else None."""
    for candidate in _unwrap_optional(kind):
        if typing.get_origin(candidate) is tuple:
            args = typing.get_args(candidate)
            if args and dataclasses.is_dataclass(args[0]) and isinstance(args[0], type):
                return args[0]
    return None


def _unwrap_optional(kind: Any) -> tuple[Any, ...]:
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        return tuple(a for a in typing.get_args(kind) if a is not type(None))
    return (kind,)


def _zero(kind: Any) -> Any:
    """A neutral value of a field type: None when nullable, else zero, empty or the nil uuid."""
    if typing.get_origin(kind) in (typing.Union, types.UnionType) and type(None) in typing.get_args(kind):
        return None
    if typing.get_origin(kind) is tuple:
        return ()
    base = kind
    while not isinstance(base, type) and hasattr(base, "__supertype__"):
        base = base.__supertype__
    if not isinstance(base, type):
        return None
    if issubclass(base, bool):
        return False
    if issubclass(base, uuid.UUID):
        return uuid.UUID(int=0)
    if issubclass(base, timedelta):
        return timedelta(0)
    if issubclass(base, str):
        return base("")
    if issubclass(base, bytes):
        return b""
    if issubclass(base, int | float):
        return base(0)
    return None
