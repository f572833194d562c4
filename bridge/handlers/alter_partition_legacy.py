"""AlterPartition v0 and v1 (the AlterIsr form: topics by name), which Kafka 3.9 accepts and kio lacks.

Declared as kio-style entity classes from Kafka 3.9's AlterPartitionRequest/Response.json (flexible from
v0, request header v2, response header v1; v1 adds LeaderRecoveryState) and registered with
bridge.kafka.protocol on import so the listener decodes and encodes them like kio's own v2/v3 classes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

from bridge.kafka import protocol

API_KEY = 56


def _entity(
    name: str, kind: EntityType, version: int, header: type[Any], fields: list[tuple[str, Any, Any]]
) -> Any:
    namespace = {
        "__type__": kind,
        "__version__": i16(version),
        "__flexible__": True,
        "__api_key__": i16(API_KEY),
        "__header_schema__": header,
    }
    cls = dataclasses.make_dataclass(name, fields, namespace=namespace, frozen=True, slots=True, kw_only=True)
    cls.__module__ = __name__
    return cls


def _tuple_of(item: Any) -> Any:
    """`tuple[item, ...]` for a class made at runtime."""
    return tuple.__class_getitem__((item, ...))


def _int(kind: str, default: Any = dataclasses.MISSING) -> Any:
    return field(metadata={"kafka_type": kind}, default=default)


def _define(version: int) -> tuple[Any, Any, Any, Any, Any, Any]:
    """Request and response classes (with their nested entities) of one legacy version."""
    lrs: list[tuple[str, Any, Any]] = (
        [("leader_recovery_state", i8, _int("int8", i8(0)))] if version >= 1 else []
    )
    req_partition = _entity(
        f"AlterPartitionRequestV{version}PartitionData",
        EntityType.nested,
        version,
        RequestHeader,
        [
            ("partition_index", i32, _int("int32")),
            ("leader_epoch", i32, _int("int32")),
            ("new_isr", tuple[i32, ...], _int("int32", ())),
            *lrs,
            ("partition_epoch", i32, _int("int32")),
        ],
    )
    req_topic = _entity(
        f"AlterPartitionRequestV{version}TopicData",
        EntityType.nested,
        version,
        RequestHeader,
        [("topic_name", str, _int("string")), ("partitions", _tuple_of(req_partition), field())],
    )
    request = _entity(
        f"AlterPartitionRequestV{version}",
        EntityType.request,
        version,
        RequestHeader,
        [
            ("broker_id", i32, _int("int32")),
            ("broker_epoch", i64, _int("int64", i64(-1))),
            ("topics", _tuple_of(req_topic), field()),
        ],
    )
    resp_partition = _entity(
        f"AlterPartitionResponseV{version}PartitionData",
        EntityType.nested,
        version,
        ResponseHeader,
        [
            ("partition_index", i32, _int("int32")),
            ("error_code", ErrorCode, _int("error_code")),
            ("leader_id", i32, _int("int32")),
            ("leader_epoch", i32, _int("int32")),
            ("isr", tuple[i32, ...], _int("int32", ())),
            *lrs,
            ("partition_epoch", i32, _int("int32")),
        ],
    )
    resp_topic = _entity(
        f"AlterPartitionResponseV{version}TopicData",
        EntityType.nested,
        version,
        ResponseHeader,
        [("topic_name", str, _int("string")), ("partitions", _tuple_of(resp_partition), field())],
    )
    response = _entity(
        f"AlterPartitionResponseV{version}",
        EntityType.response,
        version,
        ResponseHeader,
        [
            ("throttle_time", i32Timedelta, _int("timedelta_i32")),
            ("error_code", ErrorCode, _int("error_code")),
            ("topics", _tuple_of(resp_topic), field()),
        ],
    )
    return request, req_topic, req_partition, response, resp_topic, resp_partition


(
    AlterPartitionRequestV0,
    RequestTopicDataV0,
    RequestPartitionDataV0,
    AlterPartitionResponseV0,
    ResponseTopicDataV0,
    ResponsePartitionDataV0,
) = _define(0)
(
    AlterPartitionRequestV1,
    RequestTopicDataV1,
    RequestPartitionDataV1,
    AlterPartitionResponseV1,
    ResponseTopicDataV1,
    ResponsePartitionDataV1,
) = _define(1)

# Nested classes by (version, Kafka's struct name), as kio modules expose them for v2+.
NESTED: dict[tuple[int, str], Any] = {
    (0, "request.TopicData"): RequestTopicDataV0,
    (0, "request.PartitionData"): RequestPartitionDataV0,
    (0, "response.TopicData"): ResponseTopicDataV0,
    (0, "response.PartitionData"): ResponsePartitionDataV0,
    (1, "request.TopicData"): RequestTopicDataV1,
    (1, "request.PartitionData"): RequestPartitionDataV1,
    (1, "response.TopicData"): ResponseTopicDataV1,
    (1, "response.PartitionData"): ResponsePartitionDataV1,
}

protocol.register_api(AlterPartitionRequestV0, AlterPartitionResponseV0, "AlterPartition")
protocol.register_api(AlterPartitionRequestV1, AlterPartitionResponseV1, "AlterPartition")
