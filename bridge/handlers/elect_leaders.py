"""ElectLeaders (api 43) as Kafka 3.9's KRaft controller answers it (ReplicationControlManager.electLeaders).

Preferred (v0, or ElectionType 0) or unclean (ElectionType 1) elections of the named partitions, each
made by PartitionChangeBuilder; no partitions named (null) means every partition, and then those that
need no election are left out of the answer. Admin clients send it to a broker, which forwards it.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from bridge.api import ControllerHandler, ControllerResult, HandlerContext, RecordAndVersion
from bridge.brokers.replication import ElectionType, elect_leader
from bridge.handlers._common import NO_THROTTLE, build, nested
from bridge.kafka import protocol
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

    def elect(topic: str, partition_id: int) -> tuple[ErrorCode, str | None]:
        outcome, found = elect_leader(image, topic, partition_id, election_type, migrating)
        records.extend(found)
        return outcome.code, outcome.message

    if request.topic_partitions is None:
        for name in sorted(image.topics_by_name):
            parts = []
            for partition_id in sorted(image.topics_by_name[name].partitions):
                code, message = elect(name, partition_id)
                if code != ErrorCode.election_not_needed:
                    parts.append(_result(partition_cls, partition_id, code, message))
            results.append(build(topic_cls, topic=name, partition_result=tuple(parts)))
    else:
        for wanted in request.topic_partitions:
            parts = []
            for partition_id in wanted.partitions:
                code, message = elect(wanted.topic, int(partition_id))
                parts.append(_result(partition_cls, int(partition_id), code, message))
            results.append(build(topic_cls, topic=wanted.topic, partition_result=tuple(parts)))
    response = build(
        response_cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, replica_election_results=tuple(results)
    )
    return ControllerResult(records, response)


def _result(partition_cls: Any, partition_id: int, code: ErrorCode, message: str | None) -> Any:
    return build(partition_cls, partition_id=i32(partition_id), error_code=code, error_message=message)


HANDLERS: dict[int, ControllerHandler] = {ELECT_LEADERS: elect_leaders}
SUPPORTED: dict[int, tuple[int, int]] = {ELECT_LEADERS: (0, 2)}
