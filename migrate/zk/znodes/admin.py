"""Admin requests and broker notifications: `/admin/reassign_partitions`, `/admin/preferred_replica_election`,
`isr_change_<n>` and `log_dir_event_<n>` (Kafka's ReassignPartitionsZNode, PreferredReplicaElectionZNode,
IsrChangeNotificationSequenceZNode, LogDirEventNotificationSequenceZNode)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from migrate.zk.model import (
    LegacyReassignment,
    LogDirEvent,
    PartitionList,
    ReplicaReassignment,
    TopicPartition,
)
from migrate.zk.znodes.jackson import (
    bad,
    check_int,
    int_array,
    int_field,
    int_list,
    json_string,
    missing,
    parse_object,
    str_field,
    utf8,
    version_field,
)


def _topic_partitions(path: str, obj: dict[str, Any]) -> list[TopicPartition]:
    if "partitions" not in obj:
        missing(path, "partitions")
    raw = obj["partitions"]
    if type(raw) is not list:
        bad(path, "partitions", "an array", raw)
    out = []
    for item in raw:
        if type(item) is not dict:
            bad(path, "partitions[]", "an object", item)
        out.append(TopicPartition(str_field(item, "topic", path), int_field(item, "partition", path)))
    return out


def _encode_topic_partitions(partitions: Iterable[TopicPartition]) -> str:
    items = (f'{{"topic":{json_string(tp.topic)},"partition":{tp.partition}}}' for tp in partitions)
    return "[" + ",".join(items) + "]"


def decode_partition_list(path: str, data: bytes | None) -> PartitionList:
    """`/admin/preferred_replica_election` or an `isr_change_<n>` notification."""
    obj = parse_object(path, data)
    version = version_field(obj, path, (1,))
    return PartitionList(_topic_partitions(path, obj), version)


def encode_partition_list(p: PartitionList) -> bytes:
    # The partition set's order depends on the writer's Scala Set; the model keeps it as read.
    return utf8(
        "partition list", f'{{"version":{p.version},"partitions":{_encode_topic_partitions(p.partitions)}}}'
    )


def decode_reassignment(path: str, data: bytes | None) -> LegacyReassignment:
    obj = parse_object(path, data)
    version = version_field(obj, path, (1,))
    raw = obj.get("partitions")
    if type(raw) is not list:
        bad(path, "partitions", "an array", raw)
    out = []
    for item in raw:
        if type(item) is not dict:
            bad(path, "partitions[]", "an object", item)
        if "replicas" not in item:
            missing(path, "replicas")
        replicas = int_array(path, "replicas", item["replicas"])
        out.append(
            ReplicaReassignment(str_field(item, "topic", path), int_field(item, "partition", path), replicas)
        )
    return LegacyReassignment(out, version)


def encode_reassignment(r: LegacyReassignment) -> bytes:
    items = (
        f'{{"topic":{json_string(x.topic)},"partition":{x.partition},"replicas":{int_list(x.replicas)}}}'
        for x in r.partitions
    )
    return utf8("/admin/reassign_partitions", f'{{"version":{r.version},"partitions":[{",".join(items)}]}}')


def decode_log_dir_event(path: str, data: bytes | None) -> LogDirEvent:
    obj = parse_object(path, data)
    version = version_field(obj, path, (1,))
    event = obj.get("event", 1)
    return LogDirEvent(int_field(obj, "broker", path), check_int(path, "event", event), version)


def encode_log_dir_event(e: LogDirEvent) -> bytes:
    return f'{{"version":{e.version},"broker":{e.broker_id},"event":{e.event}}}'.encode()
