"""ElectLeaders (api 43) as Kafka 3.9's KRaft controller answers it (ReplicationControlManager.electLeaders).

Preferred (v0, or ElectionType 0) or unclean (ElectionType 1) elections of the named partitions, each
made by PartitionChangeBuilder; no partitions named (null) means every partition, and then those that
need no election are left out of the answer. Admin clients send it to a broker, which forwards it.
More than MAX_RECORDS_PER_USER_OP elections fail the whole request, as Kafka's BoundedList makes them; the
records of fewer may go in several batches (ControllerResult.of: not atomic).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from bridge.api import ControllerHandler, ControllerResult, HandlerContext, RecordAndVersion
from bridge.brokers.replication import ElectionType, elect_leader
from bridge.handlers._common import (
    MAX_RECORDS_PER_USER_OP,
    NO_THROTTLE,
    NONE,
    TOO_LARGE,
    ApiError,
    build,
    nested,
)
from bridge.kafka import protocol
from bridge.kafka.error_responses import error_response
from migrate.errors import InvalidRequestError

ELECT_LEADERS = 43


def _election_type(request: Any) -> ElectionType:
    """ReplicationControlManager.electionType: an unknown byte fails the whole request (INVALID_REQUEST)."""
    value = int(getattr(request, "election_type", ElectionType.PREFERRED))
    try:
        return ElectionType(value)
    except ValueError:
        raise InvalidRequestError(f"Unknown election type {value}") from None


def elect_leaders(ctx: HandlerContext, request: Any) -> ControllerResult:
    """ReplicationControlManager.electLeaders (the controller is in migration mode: epochs bump on ISR shrink)."""
    image = ctx.image
    response_cls = protocol.response_class(ELECT_LEADERS, ctx.api_version)
    topic_cls = nested(response_cls, "ReplicaElectionResult")
    partition_cls = nested(response_cls, "PartitionResult")
    election_type = _election_type(request)
    migrating = image.metadata_version.is_migration_supported()
    records: list[RecordAndVersion] = []
    results = []

    def elect(topic: str, partition_id: int) -> ApiError:
        outcome, found = elect_leader(image, topic, partition_id, election_type, migrating)
        if len(records) + len(found) > MAX_RECORDS_PER_USER_OP:
            raise _TooManyElections
        records.extend(found)
        if outcome.code == ErrorCode.none:
            return NONE
        # `new ApiError(Errors.X)` where electLeader gives no message: the error's default one.
        return (
            ApiError.of(outcome.code) if outcome.message is None else ApiError(outcome.code, outcome.message)
        )

    try:
        if request.topic_partitions is None:
            for name in sorted(image.topics_by_name):
                parts = []
                for partition_id in sorted(image.topics_by_name[name].partitions):
                    error = elect(name, partition_id)
                    if error.code != ErrorCode.election_not_needed:
                        parts.append(_result(partition_cls, partition_id, error))
                results.append(build(topic_cls, topic=name, partition_result=tuple(parts)))
        else:
            for wanted in request.topic_partitions:
                parts = []
                for partition_id in wanted.partitions:
                    parts.append(
                        _result(partition_cls, int(partition_id), elect(wanted.topic, int(partition_id)))
                    )
                results.append(build(topic_cls, topic=wanted.topic, partition_result=tuple(parts)))
    except _TooManyElections:
        # QuorumController turns the BoundedListTooLongException into this error for the whole request,
        # answered as ElectLeadersRequest.getErrorResponse does; nothing is elected.
        response = error_response(ELECT_LEADERS, ctx.api_version, request, TOO_LARGE.code, TOO_LARGE.message)
        return ControllerResult([], response, atomic=False)
    response = build(
        response_cls,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        replica_election_results=tuple(results),
    )
    return ControllerResult(records, response, atomic=False)


class _TooManyElections(Exception):
    """BoundedListTooLongException: the elections would exceed MAX_RECORDS_PER_USER_OP records."""


def _result(partition_cls: Any, partition_id: int, error: ApiError) -> Any:
    return build(
        partition_cls, partition_id=i32(partition_id), error_code=error.code, error_message=error.message
    )


HANDLERS: dict[int, ControllerHandler] = {ELECT_LEADERS: elect_leaders}
SUPPORTED: dict[int, tuple[int, int]] = {ELECT_LEADERS: (0, 2)}
