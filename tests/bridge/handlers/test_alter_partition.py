"""AlterPartition handler (v0-v3): ISR changes as PartitionChangeRecords and Kafka's error codes."""

from __future__ import annotations

import copy
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32, i64

from bridge.api import ControllerResult, HandlerContext
from bridge.handlers import alter_partition as ap
from bridge.handlers import alter_partition_legacy as legacy
from bridge.handlers._common import nested
from bridge.kafka import protocol
from migrate.kraft import metadata_version as mvs
from migrate.kraft import records as rec
from migrate.kraft.image import NO_LEADER_CHANGE, MetadataImage
from migrate.kraft.replay import replay_records

TOPIC_ID = uuid.UUID("44444444-4444-4444-4444-444444444444")
DIR_3 = uuid.UUID("55555555-5555-5555-5555-555555555555")
MV = mvs.IBP_3_9_IV0


def partition(pid: int, replicas: list[int], isr: list[int], leader: int, **extra: Any) -> tuple[Any, int]:
    values: dict[str, Any] = {"leader_epoch": 5, "partition_epoch": 7, **extra}
    return (
        rec.PartitionRecord(
            partition_id=pid, topic_id=TOPIC_ID, replicas=replicas, isr=isr, leader=leader, **values
        ),
        0,
    )


def make_image(*extra: tuple[Any, int]) -> MetadataImage:
    """Brokers 1-3 active, 4 fenced, 5 in controlled shutdown (epochs 100+id); broker 3 has one log dir."""
    records: list[tuple[Any, int]] = [
        (rec.FeatureLevelRecord(name="metadata.version", feature_level=MV.feature_level), 0)
    ]
    for b in (1, 2, 3, 4, 5):
        records.append(
            (
                rec.RegisterBrokerRecord(
                    broker_id=b,
                    incarnation_id=uuid.UUID(int=b),
                    broker_epoch=100 + b,
                    fenced=b == 4,
                    in_controlled_shutdown=b == 5,
                    log_dirs=[DIR_3] if b == 3 else [],
                ),
                3,
            )
        )
    records.append((rec.TopicRecord(name="t", topic_id=TOPIC_ID), 0))
    records.append(partition(0, [1, 2, 3], [1, 2, 3], 1))
    records.append(partition(1, [1, 2, 3], [1, 2], 1))
    # Reassignment [1, 2] -> [2, 3] under way: replicas [2, 3, 1], adding 3, removing 1.
    records.append(partition(2, [2, 3, 1], [1, 2], 1, adding_replicas=[3], removing_replicas=[1]))
    # Reassignment [1, 2] -> [1, 2, 3]: only adding 3.
    records.append(partition(3, [1, 2, 3], [1, 2], 1, adding_replicas=[3]))
    records.append(partition(4, [1, 2], [1], 1, leader_recovery_state=1))
    return replay_records(records + list(extra))


def request(
    version: int,
    partitions: list[dict[str, Any]],
    *,
    broker: int = 1,
    epoch: int = 101,
    topic: str = "t",
    topic_id: uuid.UUID = TOPIC_ID,
) -> Any:
    if version < 2:
        cls = protocol.request_class(ap.ALTER_PARTITION, version)
        topic_cls = legacy.NESTED[(version, "request.TopicData")]
        part_cls = legacy.NESTED[(version, "request.PartitionData")]
    else:
        cls = protocol.request_class(ap.ALTER_PARTITION, version)
        topic_cls, part_cls = nested(cls, "TopicData"), nested(cls, "PartitionData")
    parts = []
    for p in partitions:
        values: dict[str, Any] = {
            "partition_index": i32(p["index"]),
            "leader_epoch": i32(p.get("leader_epoch", 5)),
            "partition_epoch": i32(p.get("partition_epoch", 7)),
        }
        if version >= 1:
            values["leader_recovery_state"] = i8(p.get("lrs", 0))
        if version >= 3:
            state = nested(cls, "BrokerState")
            epochs = p.get("epochs", {})
            values["new_isr_with_epochs"] = tuple(
                state(broker_id=i32(b), broker_epoch=i64(epochs.get(b, 100 + b))) for b in p["isr"]
            )
        else:
            values["new_isr"] = tuple(i32(b) for b in p["isr"])
        parts.append(part_cls(**values))
    name_or_id = {"topic_name": topic} if version < 2 else {"topic_id": topic_id}
    return cls(
        broker_id=i32(broker),
        broker_epoch=i64(epoch),
        topics=(topic_cls(partitions=tuple(parts), **name_or_id),),
    )


def alter(image: MetadataImage, version: int, req: Any) -> ControllerResult:
    ctx = HandlerContext(image=image, api_version=version, node_id=3000, now_ms=0)
    before = copy.deepcopy(image)
    result = ap.alter_partition(ctx, req)
    assert image == before, "a handler must not mutate the image"
    # The request and the response survive Kafka's wire format in their version.
    assert protocol.decode_request(protocol.encode_request(req, 3, "broker-1"), "test").body == req
    data = protocol.encode_response(3, result.response)
    assert protocol.decode_response(data, ap.ALTER_PARTITION, version, "test") == (3, result.response)
    return result


def one_partition(result: ControllerResult) -> Any:
    assert result.response.error_code == ErrorCode.none
    [topic] = result.response.topics
    [part] = topic.partitions
    return part


# ---------------------------------------------------------------- accepted changes


@pytest.mark.parametrize("version", range(0, 4))
def test_isr_shrink_bumps_leader_epoch_in_migration_mode(version: int) -> None:
    image = make_image()
    result = alter(image, version, request(version, [{"index": 0, "isr": [1, 2]}]))
    [(record, record_version)] = result.records
    assert record_version == MV.partition_change_record_version()
    assert (record.topic_id, record.partition_id, record.isr, record.leader) == (TOPIC_ID, 0, [1, 2], 1)
    assert record.replicas is None and record.leader_recovery_state == -1
    part = one_partition(result)
    assert (part.error_code, part.leader_id, tuple(part.isr), part.leader_epoch, part.partition_epoch) == (
        ErrorCode.none,
        1,
        (1, 2),
        6,
        8,
    )
    # The response is the partition as the image holds it once the record is applied.
    after = replay_records(result.records, image=copy.deepcopy(image)).topics_by_id[TOPIC_ID].partitions[0]
    assert (after.isr, after.leader, after.leader_epoch, after.partition_epoch) == ([1, 2], 1, 6, 8)
    topic = result.response.topics[0]
    if version < 2:
        assert topic.topic_name == "t"
    else:
        assert topic.topic_id == TOPIC_ID


def test_isr_expansion_keeps_leader_epoch() -> None:
    result = alter(make_image(), 3, request(3, [{"index": 1, "isr": [1, 2, 3]}]))
    [(record, _)] = result.records
    assert (record.isr, record.leader) == ([1, 2, 3], NO_LEADER_CHANGE)
    part = one_partition(result)
    assert (tuple(part.isr), part.leader_epoch, part.partition_epoch) == ((1, 2, 3), 5, 8)


def test_same_isr_is_a_no_op() -> None:
    result = alter(make_image(), 2, request(2, [{"index": 0, "isr": [1, 2, 3]}]))
    assert result.records == []
    part = one_partition(result)
    assert (part.error_code, part.leader_epoch, part.partition_epoch) == (ErrorCode.none, 5, 7)


def test_reassignment_completion_moving_leadership() -> None:
    for version, expected in ((2, ErrorCode.new_leader_elected), (1, ErrorCode.fenced_leader_epoch)):
        result = alter(make_image(), version, request(version, [{"index": 2, "isr": [1, 2, 3]}]))
        [(record, _)] = result.records
        assert (record.replicas, record.isr, record.leader) == ([2, 3], [2, 3], 2)
        assert (record.removing_replicas, record.adding_replicas) == ([], [])
        assert record.directories is not None and len(record.directories) == 2
        assert one_partition(result).error_code == expected


def test_reassignment_completion_keeping_leader() -> None:
    result = alter(make_image(), 3, request(3, [{"index": 3, "isr": [1, 2, 3]}]))
    [(record, _)] = result.records
    assert (record.isr, record.adding_replicas, record.replicas, record.leader) == (
        [1, 2, 3],
        [],
        None,
        NO_LEADER_CHANGE,
    )
    assert one_partition(result).error_code == ErrorCode.none


def test_leader_recovery_finishes() -> None:
    result = alter(make_image(), 1, request(1, [{"index": 4, "isr": [1], "lrs": 0}]))
    [(record, _)] = result.records
    assert (record.leader_recovery_state, record.isr) == (0, None)
    assert one_partition(result).leader_recovery_state == 0


# ---------------------------------------------------------------- rejected changes


@pytest.mark.parametrize(
    ("change", "version", "expected"),
    [
        ({"index": 9, "isr": [1]}, 3, ErrorCode.unknown_topic_or_partition),
        ({"index": 0, "isr": [1], "leader_epoch": 4}, 3, ErrorCode.fenced_leader_epoch),
        ({"index": 0, "isr": [1], "leader_epoch": 6}, 3, ErrorCode.not_controller),
        ({"index": 0, "isr": [1], "partition_epoch": 8}, 3, ErrorCode.not_controller),
        ({"index": 0, "isr": [1], "partition_epoch": 6}, 3, ErrorCode.invalid_update_version),
        ({"index": 0, "isr": [2, 3]}, 3, ErrorCode.invalid_request),  # the leader left out
        ({"index": 0, "isr": [1, 9]}, 3, ErrorCode.invalid_request),  # not a replica
        ({"index": 0, "isr": [1, 1]}, 2, ErrorCode.invalid_request),  # duplicate
        ({"index": 0, "isr": [1, 2], "lrs": 1}, 1, ErrorCode.invalid_request),  # RECOVERED -> RECOVERING
        ({"index": 4, "isr": [1, 2], "lrs": 1}, 3, ErrorCode.invalid_request),  # recovering with 2 in ISR
        ({"index": 1, "isr": [1, 2, 3], "epochs": {3: 999}}, 3, ErrorCode.ineligible_replica),
    ],
)
def test_rejected(change: dict[str, Any], version: int, expected: ErrorCode) -> None:
    result = alter(make_image(), version, request(version, [change]))
    assert result.records == []
    assert one_partition(result).error_code == expected


def test_request_from_a_follower() -> None:
    result = alter(make_image(), 3, request(3, [{"index": 0, "isr": [1, 2]}], broker=2, epoch=102))
    assert one_partition(result).error_code == ErrorCode.invalid_request and result.records == []


@pytest.mark.parametrize(
    ("version", "expected"), [(2, ErrorCode.ineligible_replica), (1, ErrorCode.operation_not_attempted)]
)
def test_ineligible_replicas(version: int, expected: ErrorCode) -> None:
    image = make_image(partition(5, [1, 4, 5], [1], 1))
    for isr in ([1, 4], [1, 5]):  # fenced, in controlled shutdown
        result = alter(image, version, request(version, [{"index": 5, "isr": isr}]))
        assert one_partition(result).error_code == expected and result.records == []


def test_unknown_topic() -> None:
    result = alter(make_image(), 2, request(2, [{"index": 0, "isr": [1]}], topic_id=uuid.UUID(int=9)))
    assert one_partition(result).error_code == ErrorCode.unknown_topic_id
    result = alter(make_image(), 0, request(0, [{"index": 0, "isr": [1]}], topic="nope"))
    assert one_partition(result).error_code == ErrorCode.unknown_topic_or_partition


@pytest.mark.parametrize(("broker", "epoch"), [(1, 100), (7, 107)])
def test_stale_broker_epoch_fails_the_request(broker: int, epoch: int) -> None:
    result = alter(make_image(), 3, request(3, [{"index": 0, "isr": [1, 2]}], broker=broker, epoch=epoch))
    assert result.response.error_code == ErrorCode.stale_broker_epoch
    assert result.response.topics == () and result.records == []


def test_leader_in_controlled_shutdown_is_ineligible_in_its_own_isr() -> None:
    image = make_image(
        partition(5, [5, 1, 2], [5, 1, 2], 5),
    )
    ctx_request = request(3, [{"index": 5, "isr": [5, 1]}], broker=5, epoch=105)
    # Broker 5 is in controlled shutdown: it is ineligible in its own ISR, so the change is refused.
    assert one_partition(alter(image, 3, ctx_request)).error_code == ErrorCode.ineligible_replica


def test_leader_with_offline_directory_is_replaced() -> None:
    offline = uuid.UUID(int=0xD1)  # not among broker 3's online log dirs
    migrating = uuid.UUID(int=0)
    image = make_image(partition(5, [3, 1, 2], [3, 1, 2], 3, directories=[offline, migrating, migrating]))
    result = alter(image, 3, request(3, [{"index": 5, "isr": [3, 1]}], broker=3, epoch=103))
    [(record, _)] = result.records
    assert (record.leader, record.isr) == (1, [3, 1])
    assert one_partition(result).error_code == ErrorCode.new_leader_elected


def test_several_partitions_in_one_request() -> None:
    result = alter(
        make_image(),
        3,
        request(3, [{"index": 0, "isr": [1, 2]}, {"index": 1, "isr": [1, 2, 3]}, {"index": 7, "isr": [1]}]),
    )
    assert [p.error_code for p in result.response.topics[0].partitions] == [
        ErrorCode.none,
        ErrorCode.none,
        ErrorCode.unknown_topic_or_partition,
    ]
    assert [r.partition_id for r, _ in result.records] == [0, 1]
    # ControllerResult.of: the partitions' records may be split into several batches.
    assert result.atomic is False


def test_unclean_election_enabled_topic_still_keeps_the_requesting_leader() -> None:
    image = make_image(
        (
            rec.ConfigRecord(
                resource_type=2, resource_name="t", name="unclean.leader.election.enable", value="true"
            ),
            0,
        )
    )
    assert ap.unclean_election_enabled(image, 3000, "t")
    result = alter(image, 3, request(3, [{"index": 0, "isr": [1]}]))
    [(record, _)] = result.records
    assert (record.isr, record.leader, record.leader_recovery_state) == ([1], 1, -1)


def test_legacy_versions_are_registered() -> None:
    assert protocol.known_versions(ap.ALTER_PARTITION)[:4] == (0, 1, 2, 3)
    low, high = ap.SUPPORTED[ap.ALTER_PARTITION]
    for version in range(low, high + 1):
        protocol.request_class(ap.ALTER_PARTITION, version)
    # v0 bytes as Kafka 3.9 lays them out (flexible, header v2, topic by name).
    data = protocol.encode_request(request(0, [{"index": 0, "isr": [1, 2]}]), 9, "c")
    assert data.hex() == (
        "0038"
        "0000"
        "00000009"
        "000163"
        "00"  # header v2
        "00000001"
        "0000000000000065"  # broker id, broker epoch
        "02"
        "0274"
        "02"  # one topic "t", one partition
        "00000000"
        "00000005"
        "03"
        "00000001"
        "00000002"
        "00000007"
        "00"  # partition 0
        "00"
        "00"  # topic and request tagged fields
    )
