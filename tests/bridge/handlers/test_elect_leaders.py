"""ElectLeaders as Kafka 3.9's ReplicationControlManager.electLeaders answers it: each partition's ApiError with
Kafka's messages, the records as a non-atomic result, and the whole request refused past
MAX_RECORDS_PER_USER_OP elections."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from bridge.api import ControllerResult
from bridge.handlers import elect_leaders as el
from migrate.kraft import metadata_version as mvs
from migrate.kraft import records as rec
from migrate.kraft.image import MetadataImage
from tests.support.handlers import context, image_of, round_trip
from tests.support.requests import PREFERRED, UNCLEAN
from tests.support.requests import elect_leaders as elect_request

TOPIC_ID = uuid.UUID("77777777-7777-7777-7777-777777777777")


def make_image() -> MetadataImage:
    """Brokers 1-3 active; topic `t`: p0 led by its first replica; p1 led by 2 with 1 out of sync; p2 and p3
    led by 2 with 1 in sync; p4 leaderless with only fenced broker 4 in its ISR."""
    records: list[tuple[Any, int]] = [
        (rec.FeatureLevelRecord(name="metadata.version", feature_level=mvs.IBP_3_9_IV0.feature_level), 0)
    ]
    for b in (1, 2, 3, 4):
        records.append((
            rec.RegisterBrokerRecord(broker_id=b, incarnation_id=uuid.UUID(int=b), broker_epoch=10 + b,
                                     fenced=b == 4, is_migrating_zk_broker=True),
            3,
        ))  # fmt: skip
    records.append((rec.TopicRecord(name="t", topic_id=TOPIC_ID), 0))
    for pid, replicas, isr, leader in (
        (0, [1, 2], [1, 2], 1),
        (1, [1, 2], [2], 2),
        (2, [1, 2], [1, 2], 2),
        (3, [1, 3], [1, 3], 3),
        (4, [4], [4], -1),
    ):
        records.append((
            rec.PartitionRecord(partition_id=pid, topic_id=TOPIC_ID, replicas=replicas, isr=isr, leader=leader,
                                leader_epoch=3, partition_epoch=3),
            0,
        ))  # fmt: skip
    return image_of(records)


def outcomes(result: ControllerResult, version: int = 2) -> list[tuple[str, int, ErrorCode, str | None]]:
    body = round_trip(result, el.ELECT_LEADERS, version)
    return [
        (t.topic, int(p.partition_id), p.error_code, p.error_message)
        for t in body.replica_election_results
        for p in t.partition_result
    ]


def test_each_partition_gets_kafkas_error_and_message() -> None:
    image = make_image()
    result = el.elect_leaders(context(image, 2), elect_request(PREFERRED, {"t": [0, 1, 2, 9], "nope": [0]}))
    assert outcomes(result) == [
        ("t", 0, ErrorCode.election_not_needed, "Leader election not needed for topic partition."),
        ("t", 1, ErrorCode.preferred_leader_not_available, "The preferred leader was not available."),
        ("t", 2, ErrorCode.none, None),
        ("t", 9, ErrorCode.unknown_topic_or_partition, "No such partition as t-9"),
        ("nope", 0, ErrorCode.unknown_topic_or_partition, "No such topic as nope"),
    ]
    assert [(r.partition_id, r.leader) for r, _ in result.records] == [(2, 1)]

    unclean = el.elect_leaders(context(image, 2), elect_request(UNCLEAN, {"t": [0, 4]}))
    assert outcomes(unclean) == [
        ("t", 0, ErrorCode.election_not_needed, "Leader election not needed for topic partition."),
        ("t", 4, ErrorCode.eligible_leaders_not_available, "Eligible topic partition leaders are not available."),
    ]
    assert unclean.records == []


def test_the_elections_are_a_non_atomic_result() -> None:
    # ControllerResult.of: the controller may split the records into several batches.
    result = el.elect_leaders(context(make_image(), 2), elect_request(PREFERRED, None))
    assert result.atomic is False
    assert sorted(r.partition_id for r, _ in result.records) == [2, 3]
    # Every partition asked for implicitly that needs no election is left out of the answer.
    assert [(t, p, code) for t, p, code, _ in outcomes(result)] == [
        ("t", 1, ErrorCode.preferred_leader_not_available),
        ("t", 2, ErrorCode.none),
        ("t", 3, ErrorCode.none),
        ("t", 4, ErrorCode.preferred_leader_not_available),
    ]


@pytest.mark.parametrize("named", [True, False])
def test_more_elections_than_one_user_operation_may_hold_fail_the_whole_request(
    monkeypatch: pytest.MonkeyPatch, named: bool
) -> None:
    monkeypatch.setattr(el, "MAX_RECORDS_PER_USER_OP", 1)
    request = elect_request(PREFERRED, {"t": [2, 0, 3]} if named else None)
    result = el.elect_leaders(context(make_image(), 2), request)
    assert result.records == []
    body = round_trip(result, el.ELECT_LEADERS, 2)
    assert body.error_code == ErrorCode.policy_violation
    message = "Unable to perform excessively large batch operation."
    if named:
        assert outcomes(result) == [("t", p, ErrorCode.policy_violation, message) for p in (2, 0, 3)]
    else:
        assert body.replica_election_results == ()
