"""Builders of the admin requests tests send to handlers, a bridge or a shim (one per request kind)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

from bridge.brokers.cluster import UNREGISTER_BROKER
from bridge.handlers import alter_partition_legacy as legacy
from bridge.handlers._common import nested
from bridge.kafka import protocol

# ConfigResource types and IncrementalAlterConfigs operations, as Kafka numbers them.
TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

CREATE_TOPICS, DELETE_TOPICS, CREATE_ACLS, DELETE_ACLS, ALTER_CONFIGS = 19, 20, 30, 31, 33
CREATE_PARTITIONS, INCREMENTAL_ALTER_CONFIGS, ALTER_CLIENT_QUOTAS, ALTER_SCRAM = 37, 44, 49, 51
ALTER_PARTITION, ALLOCATE_PRODUCER_IDS = 56, 67
ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS = 45, 46

ConfigChange = tuple[str, int, str | None]  # (key, operation, value)


def incremental_request(
    version: int, resources: list[tuple[int, str, list[ConfigChange]]], *, validate_only: bool = False
) -> Any:
    """IncrementalAlterConfigs at `version` over (resource type, name, changes) resources."""
    cls = protocol.request_class(INCREMENTAL_ALTER_CONFIGS, version)
    resource, config = nested(cls, "AlterConfigsResource"), nested(cls, "AlterableConfig")
    return cls(
        resources=tuple(
            resource(
                resource_type=i8(t),
                resource_name=n,
                configs=tuple(config(name=k, config_operation=i8(op), value=v) for k, op, v in changes),
            )
            for t, n, changes in resources
        ),
        validate_only=validate_only,
    )


def incremental(resource_type: int, name: str, *changes: ConfigChange, version: int = 1) -> Any:
    """IncrementalAlterConfigs of one resource, e.g. `incremental(TOPIC, "orders", ("retention.ms", SET, "1"))`."""
    return incremental_request(version, [(resource_type, name, list(changes))])


def alter_configs_request(
    version: int,
    resources: list[tuple[int, str, list[tuple[str, str | None]]]],
    *,
    validate_only: bool = False,
) -> Any:
    """AlterConfigs (the whole-map replacement) at `version` over (resource type, name, key/values)."""
    cls = protocol.request_class(ALTER_CONFIGS, version)
    resource, config = nested(cls, "AlterConfigsResource"), nested(cls, "AlterableConfig")
    return cls(
        resources=tuple(
            resource(
                resource_type=i8(t), resource_name=n, configs=tuple(config(name=k, value=v) for k, v in cs)
            )
            for t, n, cs in resources
        ),
        validate_only=validate_only,
    )


def create_topic(name: str, partitions: int = 1, replication_factor: int = 1) -> Any:
    """CreateTopics v7 of one topic placed by the controller."""
    cls = protocol.request_class(CREATE_TOPICS, 7)
    topic = nested(cls, "CreatableTopic")(
        name=name,
        num_partitions=i32(partitions),
        replication_factor=i16(replication_factor),
        assignments=(),
        configs=(),
    )
    return cls(topics=(topic,))


def delete_topics(*names: str) -> Any:
    """DeleteTopics v6 of topics named by name."""
    cls = protocol.request_class(DELETE_TOPICS, 6)
    state = nested(cls, "DeleteTopicState")
    return cls(
        topics=tuple(state(name=n, topic_id=None) for n in names),
        timeout=i32Timedelta.parse(timedelta(seconds=30)),
    )


def create_partitions(
    name: str, count: int, assignments: list[list[int]] | None = None, *, validate_only: bool = False
) -> Any:
    """CreatePartitions v3 growing topic `name` to `count` partitions (None: the controller places them)."""
    cls = protocol.request_class(CREATE_PARTITIONS, 3)
    topic = nested(cls, "CreatePartitionsTopic")
    assignment = nested(cls, "CreatePartitionsAssignment")
    return cls(
        topics=(
            topic(
                name=name,
                count=i32(count),
                assignments=None
                if assignments is None
                else tuple(assignment(broker_ids=tuple(i32(b) for b in a)) for a in assignments),
            ),
        ),
        timeout=i32Timedelta.parse(timedelta(seconds=30)),
        validate_only=validate_only,
    )


def alter_reassignments(*items: tuple[str, int, list[int] | None]) -> Any:
    """AlterPartitionReassignments v0 over (topic, partition, target replicas or None to cancel)."""
    cls = protocol.request_class(ALTER_PARTITION_REASSIGNMENTS, 0)
    topic_cls, part_cls = nested(cls, "ReassignableTopic"), nested(cls, "ReassignablePartition")
    topics: dict[str, list[Any]] = {}
    for name, index, replicas in items:
        topics.setdefault(name, []).append(
            part_cls(
                partition_index=i32(index),
                replicas=None if replicas is None else tuple(i32(b) for b in replicas),
            )
        )
    return cls(topics=tuple(topic_cls(name=n, partitions=tuple(ps)) for n, ps in topics.items()))


def list_reassignments(topics: dict[str, list[int]] | None) -> Any:
    """ListPartitionReassignments v0 of `topics` by name (None: every reassigning partition)."""
    cls = protocol.request_class(LIST_PARTITION_REASSIGNMENTS, 0)
    topic_cls = nested(cls, "ListPartitionReassignmentsTopics")
    if topics is None:
        return cls(topics=None)
    return cls(
        topics=tuple(
            topic_cls(name=n, partition_indexes=tuple(i32(p) for p in ps)) for n, ps in topics.items()
        )
    )


def alter_client_quotas(
    version: int,
    entries: list[tuple[list[tuple[str, str | None]], list[tuple[str, float | None]]]],
    *,
    validate_only: bool = False,
) -> Any:
    """AlterClientQuotas at `version` over (entity parts, (key, value or None to remove)) entries."""
    cls = protocol.request_class(ALTER_CLIENT_QUOTAS, version)
    entry, entity, op = nested(cls, "EntryData"), nested(cls, "EntityData"), nested(cls, "OpData")
    return cls(
        entries=tuple(
            entry(
                entity=tuple(entity(entity_type=t, entity_name=n) for t, n in parts),
                ops=tuple(op(key=k, value=0.0 if v is None else v, remove=v is None) for k, v in ops),
            )
            for parts, ops in entries
        ),
        validate_only=validate_only,
    )


def alter_partition(
    version: int,
    broker: int,
    epoch: int,
    partition: int,
    leader_epoch: int,
    partition_epoch: int,
    isr: list[int],
    *,
    topic: str,
    topic_id: uuid.UUID,
    isr_epochs: dict[int, int] | None = None,
) -> Any:
    """AlterPartition (AlterIsr below v2) of one partition; from v3 the ISR carries broker epochs."""
    cls = protocol.request_class(ALTER_PARTITION, version)
    if version < 2:
        topic_cls = legacy.NESTED[(version, "request.TopicData")]
        part_cls = legacy.NESTED[(version, "request.PartitionData")]
    else:
        topic_cls, part_cls = nested(cls, "TopicData"), nested(cls, "PartitionData")
    values: dict[str, Any] = {
        "partition_index": i32(partition),
        "leader_epoch": i32(leader_epoch),
        "partition_epoch": i32(partition_epoch),
    }
    if version >= 1:
        values["leader_recovery_state"] = i8(0)
    if version >= 3:
        state = nested(cls, "BrokerState")
        values["new_isr_with_epochs"] = tuple(
            state(broker_id=i32(b), broker_epoch=i64((isr_epochs or {})[b])) for b in isr
        )
    else:
        values["new_isr"] = tuple(i32(b) for b in isr)
    name_or_id = {"topic_name": topic} if version < 2 else {"topic_id": topic_id}
    return cls(
        broker_id=i32(broker),
        broker_epoch=i64(epoch),
        topics=(topic_cls(partitions=(part_cls(**values),), **name_or_id),),
    )


ELECT_LEADERS = 43
PREFERRED, UNCLEAN = 0, 1


def elect_leaders(election_type: int, partitions: dict[str, list[int]] | None, *, version: int = 2) -> Any:
    """ElectLeaders of `partitions` by topic (None: every partition); v0 knows only preferred elections."""
    cls = protocol.request_class(ELECT_LEADERS, version)
    topics = None
    if partitions is not None:
        topic_cls = nested(cls, "TopicPartitions")
        topics = tuple(
            topic_cls(topic=t, partitions=tuple(i32(p) for p in ps)) for t, ps in partitions.items()
        )
    values: dict[str, Any] = {"topic_partitions": topics}
    if version >= 1:
        values["election_type"] = i8(election_type)
    return cls(**values)


def unregister_broker(broker_id: int) -> Any:
    """UnregisterBroker v0, what `kafka-cluster.sh unregister --id` sends."""
    return protocol.request_class(UNREGISTER_BROKER, 0)(broker_id=i32(broker_id))


def unregister_broker_response(error: ErrorCode = ErrorCode.none) -> Any:
    """Kafka 3.9's answer to UnregisterBroker: the error code only, never a message."""
    return protocol.response_class(UNREGISTER_BROKER, 0)(
        throttle_time=i32Timedelta.parse(timedelta(0)), error_code=error, error_message=None
    )
