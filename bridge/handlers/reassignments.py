"""AlterPartitionReassignments (api 45) and ListPartitionReassignments (api 46) as Kafka 3.9's KRaft controller
serves them (ReplicationControlManager.alterPartitionReassignments / listPartitionReassignments, KIP-455).

A new target adds its new replicas to the replica list (target first, then the ones being removed) with
adding/removing set; the reassignment completes in PartitionChangeBuilder once the ISR holds every target
replica (usually through AlterPartition), dropping the removed replicas and moving leadership off them. A
null replica list cancels: the replicas being added leave the replica list and the ISR. Each partition
succeeds or fails alone; the records of one request are committed together.
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from bridge.api import ControllerHandler, ControllerResult, HandlerContext, RecordAndVersion
from bridge.brokers.partition_change import (
    Election,
    partition_builder,
)
from bridge.handlers._common import (
    MAX_RECORDS_PER_USER_OP,
    NO_THROTTLE,
    NONE,
    ApiError,
    KafkaApiException,
    build,
    nested,
)
from bridge.handlers.alter_partition import unclean_election_enabled
from bridge.handlers.topics import validate_manual_assignment
from bridge.kafka import protocol
from migrate.kraft import records as rec
from migrate.kraft.image import PartitionRegistration, TopicImage

log = logging.getLogger(__name__)

ALTER_PARTITION_REASSIGNMENTS = 45
LIST_PARTITION_REASSIGNMENTS = 46


def is_reassigning(partition: PartitionRegistration) -> bool:
    """PartitionReassignmentReplicas.isReassignmentInProgress."""
    return bool(partition.removing_replicas or partition.adding_replicas)


# ---------------------------------------------------------------- AlterPartitionReassignments


def alter_partition_reassignments(ctx: HandlerContext, request: Any) -> ControllerResult:
    """ReplicationControlManager.alterPartitionReassignments (QuorumController answers an empty request itself)."""
    response_cls = protocol.response_class(ALTER_PARTITION_REASSIGNMENTS, ctx.api_version)
    if not request.topics:
        # QuorumController's early answer is a fresh response object: its message is "" rather than null.
        return ControllerResult(
            [], build(response_cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message="",
                      responses=())
        )  # fmt: skip
    topic_cls = nested(response_cls, "ReassignableTopicResponse")
    partition_cls = nested(response_cls, "ReassignablePartitionResponse")
    records: list[RecordAndVersion] = []
    topics_out = []
    succeeded = total = 0
    for topic in request.topics:
        parts = []
        for target in topic.partitions:
            index = int(target.partition_index)
            error = NONE
            try:
                record = _alter_one(ctx, topic.name, index, target.replicas)
                if record is not None:
                    if len(records) >= MAX_RECORDS_PER_USER_OP:
                        # BoundedListTooLongException: not an ApiException, so UNKNOWN_SERVER_ERROR.
                        raise KafkaApiException(ErrorCode.unknown_server_error)
                    records.append((record, ctx.image.metadata_version.partition_change_record_version()))
                succeeded += 1
            except KafkaApiException as exc:
                log.info(
                    "Unable to alter partition reassignment for %s:%d because of %s: %s",
                    topic.name, index, exc.error.code.name, exc.error.message,
                )  # fmt: skip
                error = exc.error
            except Exception:
                # Kafka answers any other failure of one partition UNKNOWN_SERVER_ERROR (ApiError.fromThrowable).
                log.exception("Unable to alter partition reassignment for %s:%d", topic.name, index)
                error = ApiError(ErrorCode.unknown_server_error, None)
            total += 1
            parts.append(
                build(
                    partition_cls,
                    partition_index=i32(index),
                    error_code=error.code,
                    error_message=error.message,
                )
            )
        topics_out.append(build(topic_cls, name=topic.name, partitions=tuple(parts)))
    log.info("Successfully altered %d out of %d partition reassignment(s).", succeeded, total)
    response = build(
        response_cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None,
        responses=tuple(topics_out),
    )  # fmt: skip
    return ControllerResult(records, response)


def _alter_one(
    ctx: HandlerContext, name: str, index: int, replicas: tuple[int, ...] | None
) -> rec.PartitionChangeRecord | None:
    """ReplicationControlManager.alterPartitionReassignment: one partition's record, or None for no change."""
    topic = ctx.image.topics_by_name.get(name)
    if topic is None:
        raise KafkaApiException(ErrorCode.unknown_topic_or_partition, f"Unable to find a topic named {name}.")
    partition = topic.partitions.get(index)
    if partition is None:
        raise KafkaApiException(
            ErrorCode.unknown_topic_or_partition, f"Unable to find partition {name}:{index}."
        )
    if replicas is None:
        return _cancel(ctx, topic, index, partition)
    return _change(ctx, topic, index, partition, [int(b) for b in replicas])


def _cancel(
    ctx: HandlerContext, topic: TopicImage, index: int, partition: PartitionRegistration
) -> rec.PartitionChangeRecord | None:
    """cancelPartitionReassignment with PartitionReassignmentRevert: back to the replicas before the adding ones."""
    if not is_reassigning(partition):
        raise KafkaApiException(ErrorCode.no_reassignment_in_progress)
    adding = set(partition.adding_replicas)
    replicas = [b for b in partition.replicas if b not in adding]
    isr = [b for b in partition.isr if b not in adding]
    unclean = False
    if not isr:
        # Only replicas being added are in sync: the first original replica becomes the ISR, an unclean step.
        if not replicas:
            raise KafkaApiException(
                ErrorCode.invalid_replica_assignment,
                "Invalid replica assignment: addingReplicas contains all replicas.",
            )
        isr = [replicas[0]]
        unclean = True
    unclean_enabled = unclean_election_enabled(ctx.image, ctx.node_id, topic.name)
    if unclean and not unclean_enabled:
        raise KafkaApiException(
            ErrorCode.invalid_replica_assignment,
            f"Unable to revert partition assignment for {topic.name}:{index} because it would require an "
            "unclean leader election.",
        )
    return partition_builder(
        ctx.image, topic, index, partition,
        election=Election.UNCLEAN if unclean_enabled else Election.ONLINE,
        target_isr=isr, target_replicas=replicas, target_removing=[], target_adding=[],
    ).build()  # fmt: skip


def _change(
    ctx: HandlerContext, topic: TopicImage, index: int, partition: PartitionRegistration, target: list[int]
) -> rec.PartitionChangeRecord | None:
    """changePartitionReassignment with PartitionReassignmentReplicas (adding/removing in broker id order)."""
    validate_manual_assignment(ctx.image, target, None)
    current = partition.replicas
    removing = sorted(set(current) - set(target))
    adding = sorted(set(target) - set(current))
    replicas = [*target, *removing]
    # Targets left unset keep the partition's own (an empty removing/adding list does not clear them).
    return partition_builder(
        ctx.image, topic, index, partition,
        target_replicas=replicas if replicas != current else None,
        target_removing=removing or None,
        target_adding=adding or None,
    ).build()  # fmt: skip


# ---------------------------------------------------------------- ListPartitionReassignments


def list_partition_reassignments(ctx: HandlerContext, request: Any) -> ControllerResult:
    """ReplicationControlManager.listPartitionReassignments: every reassigning partition, or those asked for,
    as of the last committed offset (Kafka reads them at lastStableOffset)."""
    image = ctx.image
    response_cls = protocol.response_class(LIST_PARTITION_REASSIGNMENTS, ctx.api_version)
    topic_cls = nested(response_cls, "OngoingTopicReassignment")
    partition_cls = nested(response_cls, "OngoingPartitionReassignment")
    wanted: list[tuple[TopicImage, list[int]]] = []
    if request.topics is None:
        # Kafka walks a hash map of reassigning topics; here topic names, then partitions, in order.
        for name in sorted(image.topics_by_name):
            topic = image.topics_by_name[name]
            wanted.append((topic, sorted(topic.partitions)))
    else:
        for asked in request.topics:
            found = image.topics_by_name.get(asked.name)
            if found is not None:  # unknown topics are left out, not reported
                wanted.append((found, [int(p) for p in asked.partition_indexes]))
    topics_out = []
    for topic, indexes in wanted:
        parts = []
        for index in indexes:
            partition = topic.partitions.get(index)
            if partition is None or not is_reassigning(partition):
                continue
            parts.append(
                build(
                    partition_cls,
                    partition_index=i32(index),
                    replicas=tuple(i32(b) for b in partition.replicas),
                    adding_replicas=tuple(i32(b) for b in partition.adding_replicas),
                    removing_replicas=tuple(i32(b) for b in partition.removing_replicas),
                )
            )
        if parts:
            topics_out.append(build(topic_cls, name=topic.name, partitions=tuple(parts)))
    response = build(
        response_cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None,
        topics=tuple(topics_out),
    )  # fmt: skip
    return ControllerResult([], response)


HANDLERS: dict[int, ControllerHandler] = {
    ALTER_PARTITION_REASSIGNMENTS: alter_partition_reassignments,
    LIST_PARTITION_REASSIGNMENTS: list_partition_reassignments,
}
# Kafka 3.9 knows only v0 of both (kio also has AlterPartitionReassignments v1, from a later Kafka).
SUPPORTED: dict[int, tuple[int, int]] = {
    ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    LIST_PARTITION_REASSIGNMENTS: (0, 0),
}
