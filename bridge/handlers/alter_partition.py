"""AlterPartition (api 56, the successor of AlterIsr) as Kafka 3.9's KRaft controller handles it.

v0/v1 name topics (classes in alter_partition_legacy), v2+ use topic ids and v3 carries broker epochs
per ISR member. A request from a broker whose registration epoch differs fails as a whole with
STALE_BROKER_EPOCH. Each partition is checked as ReplicationControlManager.validateAlterPartitionData
does, then PartitionChangeBuilder turns the new ISR into a PartitionChangeRecord: completing a
reassignment, electing a new leader when the current one cannot lead, and bumping the leader epoch on
an ISR shrink while ZooKeeper migration is on (ZooKeeper-mode brokers need it). Eligible leader replicas
(KIP-966) are off, as by default in 3.9.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32

from bridge.api import ControllerHandler, ControllerResult, HandlerContext, RecordAndVersion
from bridge.brokers.partition_change import (
    RECOVERED,
    RECOVERING,
    Election,
    merge,
    partition_builder,
)
from bridge.handlers import alter_partition_legacy
from bridge.handlers._common import NO_THROTTLE, ZERO_UUID, build, check_broker_epoch, nested
from bridge.handlers.topic_configs import broker_default
from bridge.kafka import protocol
from migrate.kraft.image import (
    NO_LEADER_CHANGE,
    RESOURCE_TYPE_TOPIC,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
)

ALTER_PARTITION = 56


class _UnknownLeaderRecoveryState(Exception):
    """LeaderRecoveryState.of throws IllegalArgumentException: the whole request fails."""


# ---------------------------------------------------------------- validation


def _valid_isr(replicas: list[int], isr: list[int]) -> bool:
    """Replicas.validateIsr: no negatives, no duplicates, every member a replica."""
    return len(set(isr)) == len(isr) and all(b >= 0 and b in replicas for b in isr)


def _ineligible(image: MetadataImage, isr_with_epochs: list[tuple[int, int]]) -> list[str]:
    """ReplicationControlManager.ineligibleReplicasForIsr."""
    found = []
    for broker_id, epoch in isr_with_epochs:
        broker = image.cluster.brokers.get(broker_id)
        if broker is None:
            found.append(f"{broker_id} (not registered)")
        elif broker.in_controlled_shutdown:
            found.append(f"{broker_id} (shutting down)")
        elif broker.fenced:
            found.append(f"{broker_id} (fenced)")
        elif epoch != -1 and broker.epoch != epoch:
            found.append(f"{broker_id} (broker epoch mismatch: requested={epoch} VS expected={broker.epoch})")
    return found


def _validate(
    broker_id: int,
    partition: PartitionRegistration | None,
    version: int,
    data: Any,
    isr_with_epochs: list[tuple[int, int]],
    image: MetadataImage,
) -> ErrorCode:
    """ReplicationControlManager.validateAlterPartitionData, checks in Kafka's order."""
    if partition is None:
        return ErrorCode.unknown_topic_or_partition
    # A leader or partition epoch ahead of ours means we are probably not the active controller any more.
    if data.leader_epoch > partition.leader_epoch or data.partition_epoch > partition.partition_epoch:
        return ErrorCode.not_controller
    if data.leader_epoch < partition.leader_epoch:
        return ErrorCode.fenced_leader_epoch
    if broker_id != partition.leader:
        return ErrorCode.invalid_request
    if data.partition_epoch < partition.partition_epoch:
        return ErrorCode.invalid_update_version
    new_isr = [b for b, _ in isr_with_epochs]
    if not _valid_isr(partition.replicas, new_isr) or partition.leader not in new_isr:
        return ErrorCode.invalid_request
    lrs = _leader_recovery_state(data)
    if lrs == RECOVERING and len(new_isr) > 1:
        return ErrorCode.invalid_request
    if partition.leader_recovery_state == RECOVERED and lrs == RECOVERING:
        return ErrorCode.invalid_request
    if _ineligible(image, isr_with_epochs):
        return ErrorCode.ineligible_replica if version > 1 else ErrorCode.operation_not_attempted
    return ErrorCode.none


def _leader_recovery_state(data: Any) -> int:
    value = int(getattr(data, "leader_recovery_state", RECOVERED))
    if value not in (RECOVERED, RECOVERING):
        raise _UnknownLeaderRecoveryState(value)
    return value


# ---------------------------------------------------------------- elections


def unclean_election_enabled(image: MetadataImage, node_id: int, topic: str) -> bool:
    """ConfigurationControlManager.uncleanLeaderElectionEnabledForTopic."""
    value = image.configs.get((RESOURCE_TYPE_TOPIC, topic), {}).get("unclean.leader.election.enable")
    if value is None:
        value = broker_default(image, node_id, "unclean.leader.election.enable")
    return value is not None and value.strip().lower() == "true"


# ---------------------------------------------------------------- the handler


def _classes(version: int) -> tuple[Any, Any, Any]:
    """Response, response TopicData and PartitionData classes of a version (legacy ones below v2)."""
    if version < 2:
        legacy = alter_partition_legacy.NESTED
        response = protocol.response_class(ALTER_PARTITION, version)
        return response, legacy[(version, "response.TopicData")], legacy[(version, "response.PartitionData")]
    response = protocol.response_class(ALTER_PARTITION, version)
    return response, nested(response, "TopicData"), nested(response, "PartitionData")


def alter_partition(ctx: HandlerContext, request: Any) -> ControllerResult:
    """ReplicationControlManager.alterPartition (and ControllerApis' error response)."""
    image = ctx.image
    version = ctx.api_version
    response_cls, topic_cls, partition_cls = _classes(version)
    stale = check_broker_epoch(image, int(request.broker_id), int(request.broker_epoch))
    if stale is not None:
        return ControllerResult(
            [], build(response_cls, throttle_time=NO_THROTTLE, error_code=stale.code, topics=())
        )
    try:
        records, topics = _alter(ctx, request, topic_cls, partition_cls)
    except _UnknownLeaderRecoveryState:
        return ControllerResult(
            [],
            build(
                response_cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.unknown_server_error, topics=()
            ),
        )
    # ControllerResult.of: each partition's change stands alone, so the records may span batches.
    return ControllerResult(
        records,
        build(response_cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, topics=tuple(topics)),
        atomic=False,
    )


def _alter(
    ctx: HandlerContext, request: Any, topic_cls: Any, partition_cls: Any
) -> tuple[list[RecordAndVersion], list[Any]]:
    image = ctx.image
    version = ctx.api_version
    mv = image.metadata_version
    broker_id = int(request.broker_id)
    records: list[RecordAndVersion] = []
    topics_out = []
    for topic_data in request.topics:
        topic: TopicImage | None
        if version > 1:
            topic = image.topics_by_id.get(topic_data.topic_id or ZERO_UUID)
        else:
            topic = image.topics_by_name.get(topic_data.topic_name)
        names = {
            "topic_name": getattr(topic_data, "topic_name", None),
            "topic_id": getattr(topic_data, "topic_id", None),
        }
        if topic is None:
            error = ErrorCode.unknown_topic_id if version > 1 else ErrorCode.unknown_topic_or_partition
            parts = tuple(
                _partition_error(partition_cls, int(d.partition_index), error) for d in topic_data.partitions
            )
            topics_out.append(build(topic_cls, partitions=parts, **names))
            continue
        parts_out = []
        for data in topic_data.partitions:
            index = int(data.partition_index)
            if version >= 3:
                isr_with_epochs = [(int(s.broker_id), int(s.broker_epoch)) for s in data.new_isr_with_epochs]
            else:
                isr_with_epochs = [(int(b), -1) for b in data.new_isr]
            partition = topic.partitions.get(index)
            error = _validate(broker_id, partition, version, data, isr_with_epochs, image)
            if error != ErrorCode.none or partition is None:
                parts_out.append(_partition_error(partition_cls, index, error))
                continue
            unclean = unclean_election_enabled(image, ctx.node_id, topic.name)
            record = partition_builder(
                image, topic, index, partition,
                election=Election.UNCLEAN if unclean else Election.ONLINE,
                target_isr=[b for b, _ in isr_with_epochs],
                target_leader_recovery_state=_leader_recovery_state(data),
            ).build()  # fmt: skip
            if record is not None:
                records.append((record, mv.partition_change_record_version()))
                partition = merge(partition, record)
                if record.leader not in (broker_id, NO_LEADER_CHANGE):
                    # Completing a reassignment moved leadership away from the requester: tell it to refresh
                    # its metadata (the change is still committed).
                    moved = ErrorCode.new_leader_elected if version > 1 else ErrorCode.fenced_leader_epoch
                    parts_out.append(_partition_error(partition_cls, index, moved))
                    continue
            parts_out.append(
                build(
                    partition_cls,
                    partition_index=i32(index),
                    error_code=ErrorCode.none,
                    leader_id=i32(partition.leader),
                    leader_epoch=i32(partition.leader_epoch),
                    isr=tuple(i32(b) for b in partition.isr),
                    leader_recovery_state=i8(partition.leader_recovery_state),
                    partition_epoch=i32(partition.partition_epoch),
                )
            )
        topics_out.append(build(topic_cls, partitions=tuple(parts_out), **names))
    return records, topics_out


def _partition_error(partition_cls: Any, index: int, error: ErrorCode) -> Any:
    return build(
        partition_cls,
        partition_index=i32(index),
        error_code=error,
        leader_id=i32(0),
        leader_epoch=i32(0),
        isr=(),
        leader_recovery_state=i8(0),
        partition_epoch=i32(0),
    )


HANDLERS: dict[int, ControllerHandler] = {ALTER_PARTITION: alter_partition}
# Kafka 3.9 accepts AlterPartition 0-3; v0/v1 come from alter_partition_legacy (kio has 2-3).
SUPPORTED: dict[int, tuple[int, int]] = {ALTER_PARTITION: (0, 3)}
