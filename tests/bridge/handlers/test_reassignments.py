"""AlterPartitionReassignments / ListPartitionReassignments (v0): Kafka 3.9's validation order and error codes,
the PartitionChangeRecords and leader epochs of a start, an immediate completion, a completion through
AlterPartition or an election, and a cancellation."""

from __future__ import annotations

import copy
import uuid
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32, i32Timedelta

from bridge.api import ControllerResult
from bridge.brokers.partition_change import merge
from bridge.handlers import alter_partition as ap
from bridge.handlers import elect_leaders as el
from bridge.handlers import reassignments as ra
from bridge.handlers._common import nested
from bridge.handlers.registry import load_handlers
from bridge.kafka import protocol
from bridge.kafka.error_responses import error_response
from migrate.kraft import metadata_version as mvs
from migrate.kraft import records as rec
from migrate.kraft.image import NO_LEADER_CHANGE, MetadataImage, PartitionRegistration
from tests.support.handlers import context, image_of, round_trip
from tests.support.requests import alter_partition as alter_partition_request
from tests.support.requests import alter_reassignments as alter_request
from tests.support.requests import list_reassignments as list_request

MV = mvs.IBP_3_9_IV0
TOPIC_ID = uuid.UUID("66666666-6666-6666-6666-666666666666")
DIRS = {b: uuid.UUID(int=0xD000 + b) for b in range(1, 6)}


def partition(pid: int, replicas: list[int], isr: list[int], leader: int, **extra: Any) -> tuple[Any, int]:
    return (
        rec.PartitionRecord(
            partition_id=pid, topic_id=TOPIC_ID, replicas=replicas, isr=isr, leader=leader, leader_epoch=5,
            partition_epoch=7, directories=[DIRS[b] for b in replicas], **extra,
        ),
        2,
    )  # fmt: skip


def make_records(*extra: tuple[Any, int], unclean: bool = False) -> list[tuple[Any, int]]:
    """Brokers 1-4 active and 5 fenced, one log dir each; topic `t`:
    p0 [1,2,3] in sync; p1 reassigning [1,2] -> [2,3] (3 catching up); p2 [1,2];
    p3 reassigning [1] -> [3] with only 3 in sync; p4 as a ZooKeeper controller may leave one (ISR complete)."""
    records: list[tuple[Any, int]] = [
        (rec.FeatureLevelRecord(name="metadata.version", feature_level=MV.feature_level), 0)
    ]
    for b in (1, 2, 3, 4, 5):
        records.append((
            rec.RegisterBrokerRecord(
                broker_id=b, incarnation_id=uuid.UUID(int=b), broker_epoch=100 + b, fenced=b == 5,
                log_dirs=[DIRS[b]],
            ),
            3,
        ))  # fmt: skip
    records.append((rec.TopicRecord(name="t", topic_id=TOPIC_ID), 0))
    if unclean:
        records.append((rec.ConfigRecord(resource_type=2, resource_name="t",
                                         name="unclean.leader.election.enable", value="true"), 0))  # fmt: skip
    records += [
        partition(0, [1, 2, 3], [1, 2, 3], 1),
        partition(1, [2, 3, 1], [1, 2], 1, adding_replicas=[3], removing_replicas=[1]),
        partition(2, [1, 2], [1, 2], 1),
        partition(3, [3, 1], [3], 3, adding_replicas=[3], removing_replicas=[1]),
        partition(4, [2, 3, 1], [1, 2, 3], 1, adding_replicas=[3], removing_replicas=[1]),
        *extra,
    ]
    return records


def make_image(unclean: bool = False) -> MetadataImage:
    return image_of(make_records(unclean=unclean))


def alter(image: MetadataImage, *items: tuple[str, int, list[int] | None]) -> ControllerResult:
    before = copy.deepcopy(image)
    result = ra.alter_partition_reassignments(context(image, 0), alter_request(*items))
    assert image == before, "a handler must not mutate the image"
    round_trip(result, ra.ALTER_PARTITION_REASSIGNMENTS, 0)
    return result


def outcomes(result: ControllerResult) -> list[tuple[str, int, ErrorCode, str | None]]:
    return [
        (t.name, int(p.partition_index), p.error_code, p.error_message)
        for t in result.response.responses
        for p in t.partitions
    ]


def only_record(result: ControllerResult) -> rec.PartitionChangeRecord:
    [(record, version)] = result.records
    assert isinstance(record, rec.PartitionChangeRecord) and version == MV.partition_change_record_version()
    return record


def after(image: MetadataImage, record: rec.PartitionChangeRecord) -> PartitionRegistration:
    return merge(image.topics_by_name["t"].partitions[record.partition_id], record)


def started_image(*items: tuple[str, int, list[int] | None]) -> MetadataImage:
    """The image once the reassignment of `items` is committed (what the next request sees)."""
    return image_of(make_records(), alter(make_image(), *items).records)


# ---------------------------------------------------------------- validation, in Kafka's order


def test_each_refusal_has_kafkas_error_code_and_message_and_writes_nothing() -> None:
    image = make_image()
    result = alter(
        image,
        ("nope", 0, [1]),
        ("t", 9, [1]),
        ("t", 0, []),
        ("t", 0, [2, 1, 2]),
        ("t", 0, [1, 9]),
        ("t", 0, None),
    )
    assert result.records == []
    assert outcomes(result) == [
        ("nope", 0, ErrorCode.unknown_topic_or_partition, "Unable to find a topic named nope."),
        ("t", 9, ErrorCode.unknown_topic_or_partition, "Unable to find partition t:9."),
        ("t", 0, ErrorCode.invalid_replica_assignment,
         "The manual partition assignment includes an empty replica list."),
        ("t", 0, ErrorCode.invalid_replica_assignment,
         "The manual partition assignment includes the broker 2 more than once."),
        ("t", 0, ErrorCode.invalid_replica_assignment,
         "The manual partition assignment includes broker 9, but no such broker is registered."),
        # NoReassignmentInProgressException carries the default message, which ApiError drops.
        ("t", 0, ErrorCode.no_reassignment_in_progress, None),
    ]  # fmt: skip
    assert result.response.error_code == ErrorCode.none and result.response.error_message is None


def test_a_fenced_broker_may_be_a_target_and_failures_do_not_stop_the_others() -> None:
    # Kafka checks registration only: fenced broker 5 is a valid target.
    result = alter(make_image(), ("t", 0, [1, 2, 5]), ("t", 1, [9]), ("t", 2, [1, 2]))
    assert [o[2] for o in outcomes(result)] == [
        ErrorCode.none,
        ErrorCode.invalid_replica_assignment,
        ErrorCode.none,
    ]
    assert [r.partition_id for r, _v in result.records] == [0]  # p2's target is its assignment: no record


def test_an_empty_request_is_answered_without_records() -> None:
    cls = protocol.request_class(ra.ALTER_PARTITION_REASSIGNMENTS, 0)
    result = ra.alter_partition_reassignments(context(make_image(), 0), cls(topics=()))
    assert result.records == [] and result.response.responses == ()
    # QuorumController returns a fresh response: an empty message, not null.
    assert round_trip(result, ra.ALTER_PARTITION_REASSIGNMENTS, 0).error_message == ""


# ---------------------------------------------------------------- starting, completing, cancelling


def test_start_adds_the_new_replicas_without_a_leader_epoch_bump() -> None:
    image = make_image()
    result = alter(image, ("t", 0, [2, 3, 4]))
    assert outcomes(result) == [("t", 0, ErrorCode.none, None)]
    record = only_record(result)
    assert record.replicas == [2, 3, 4, 1]  # the target, then the replicas being removed
    assert (record.adding_replicas, record.removing_replicas) == ([4], [1])
    assert record.directories == [DIRS[2], DIRS[3], DIRS[4], DIRS[1]]
    assert record.leader == NO_LEADER_CHANGE and record.isr is None
    state = after(image, record)
    assert (state.leader, state.leader_epoch, state.partition_epoch) == (1, 5, 8)


def test_completion_through_alter_partition_drops_removed_replicas_and_moves_the_leader() -> None:
    started = started_image(("t", 0, [2, 3, 4]))
    # Leader 1 reports 4 in sync: the ISR holds every target replica, so the reassignment completes.
    req = alter_partition_request(2, 1, 101, 0, 5, 8, [1, 2, 3, 4], topic="t", topic_id=TOPIC_ID)
    result = ap.alter_partition(context(started, 2), req)
    record = only_record(result)
    assert record.replicas == [2, 3, 4] and record.isr == [2, 3, 4]
    assert (record.adding_replicas, record.removing_replicas) == ([], [])
    assert record.leader == 2 and record.directories == [DIRS[2], DIRS[3], DIRS[4]]
    done = merge(started.topics_by_name["t"].partitions[0], record)
    assert (done.leader, done.leader_epoch, done.partition_epoch) == (2, 6, 9)
    # The leader changed away from the requester: NEW_LEADER_ELECTED, the change still committed.
    [answer] = result.response.topics[0].partitions
    assert answer.error_code == ErrorCode.new_leader_elected


def test_alter_partition_short_of_the_target_does_not_complete() -> None:
    image = make_image()
    req = alter_partition_request(2, 1, 101, 1, 5, 7, [1], topic="t", topic_id=TOPIC_ID)
    record = only_record(ap.alter_partition(context(image, 2), req))
    # An ISR shrink while migrating bumps the leader epoch (KAFKA-15109); the reassignment stays.
    assert record.isr == [1] and record.leader == 1 and record.replicas is None
    assert record.adding_replicas is None and record.removing_replicas is None


def test_a_target_the_isr_already_covers_completes_at_once() -> None:
    image = make_image()
    record = only_record(alter(image, ("t", 2, [2])))
    assert record.replicas == [2] and record.isr == [2] and record.leader == 2
    assert record.adding_replicas is None and record.removing_replicas is None  # never set, nothing to clear
    state = after(image, record)
    assert (state.leader_epoch, state.partition_epoch, state.removing_replicas) == (6, 8, [])


def test_reordering_replicas_changes_the_list_only() -> None:
    image = make_image()
    record = only_record(alter(image, ("t", 0, [3, 2, 1])))
    assert record.replicas == [3, 2, 1] and record.directories == [DIRS[3], DIRS[2], DIRS[1]]
    assert record.leader == NO_LEADER_CHANGE and record.isr is None  # the same brokers: no epoch bump
    assert record.adding_replicas is None and record.removing_replicas is None


def test_cancel_reverts_to_the_original_replicas_with_a_leader_epoch_bump() -> None:
    image = make_image()
    result = alter(image, ("t", 1, None))
    assert outcomes(result) == [("t", 1, ErrorCode.none, None)]
    record = only_record(result)
    assert record.replicas == [2, 1] and record.directories == [DIRS[2], DIRS[1]]
    assert (record.adding_replicas, record.removing_replicas) == ([], [])
    assert record.isr is None  # no replica being added was in sync
    # A replica (3) leaves the assignment: same leader, next epoch.
    assert record.leader == 1
    assert after(image, record).leader_epoch == 6


def test_cancel_needing_an_unclean_election_is_refused_unless_the_topic_allows_it() -> None:
    result = alter(make_image(), ("t", 3, None))
    assert outcomes(result) == [(
        "t", 3, ErrorCode.invalid_replica_assignment,
        "Unable to revert partition assignment for t:3 because it would require an unclean leader election.",
    )]  # fmt: skip
    assert result.records == []
    image = make_image(unclean=True)
    record = only_record(alter(image, ("t", 3, None)))
    assert record.replicas == [1] and record.isr == [1] and record.leader == 1
    assert (record.adding_replicas, record.removing_replicas) == ([], [])


def test_an_election_completes_a_reassignment_whose_isr_is_complete() -> None:
    # p4 came from ZooKeeper with its ISR already holding the target: the next change completes it.
    image = make_image()
    cls = protocol.request_class(el.ELECT_LEADERS, 2)
    topic_cls = nested(cls, "TopicPartitions")
    req = cls(
        election_type=i8(0),
        topic_partitions=(topic_cls(topic="t", partitions=(i32(4),)),),
        timeout=i32Timedelta.parse(timedelta(seconds=30)),
    )
    result = el.elect_leaders(context(image, 2), req)
    record = only_record(result)
    assert record.replicas == [2, 3] and record.isr == [2, 3] and record.leader == 2
    assert (record.adding_replicas, record.removing_replicas) == ([], [])


# ---------------------------------------------------------------- listing


def test_list_shows_reassigning_partitions_all_or_those_asked_for() -> None:
    started = started_image(("t", 0, [2, 3, 4]))

    def listed(topics: dict[str, list[int]] | None) -> list[tuple[str, int, list[int], list[int], list[int]]]:
        result = ra.list_partition_reassignments(context(started, 0), list_request(topics))
        assert result.records == []
        body = round_trip(result, ra.LIST_PARTITION_REASSIGNMENTS, 0)
        assert body.error_code == ErrorCode.none and body.error_message is None
        return [
            (
                t.name,
                int(p.partition_index),
                list(p.replicas),
                list(p.adding_replicas),
                list(p.removing_replicas),
            )
            for t in body.topics
            for p in t.partitions
        ]

    assert listed(None) == [
        ("t", 0, [2, 3, 4, 1], [4], [1]),
        ("t", 1, [2, 3, 1], [3], [1]),
        ("t", 3, [3, 1], [3], [1]),
        ("t", 4, [2, 3, 1], [3], [1]),
    ]
    # Unknown topics and partitions, and partitions not reassigning, are left out.
    assert listed({"t": [2, 1, 9], "nope": [0]}) == [("t", 1, [2, 3, 1], [3], [1])]
    assert listed({"t": [2]}) == []


# ---------------------------------------------------------------- wiring


def test_registered_for_version_0_only_and_failing_every_partition_when_refused() -> None:
    handlers, supported = load_handlers()
    assert (
        handlers[45] is ra.alter_partition_reassignments and handlers[46] is ra.list_partition_reassignments
    )
    assert supported[45] == supported[46] == (0, 0)
    refused = error_response(45, 0, alter_request(("t", 0, [1]), ("t", 2, None)), ErrorCode.not_controller)
    assert [(p.partition_index, p.error_code) for t in refused.responses for p in t.partitions] == [
        (0, ErrorCode.not_controller), (2, ErrorCode.not_controller)
    ]  # fmt: skip
    listed = error_response(46, 0, list_request({"t": [3, 1]}), ErrorCode.cluster_authorization_failed)
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in listed.topics] == [("t", [3, 1])]
