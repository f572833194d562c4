"""CreateTopics, DeleteTopics and CreatePartitions handlers: records, responses and Kafka's error codes."""

from __future__ import annotations

import copy
import datetime
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta

from bridge.api import ControllerResult
from bridge.handlers import topics
from bridge.handlers._common import METADATA_TOPIC_ID, ZERO_UUID, build, nested
from bridge.handlers.placement import JavaRandom
from bridge.kafka import protocol
from migrate.kraft import metadata_version as mvs
from migrate.kraft import records as rec
from migrate.kraft.image import MIGRATING_DIRECTORY, UNASSIGNED_DIRECTORY, MetadataImage
from migrate.kraft.replay import replay_records
from tests.support.handlers import context, image_of, round_trip

DIR_A = uuid.UUID("11111111-1111-1111-1111-111111111111")
DIR_B = uuid.UUID("22222222-2222-2222-2222-222222222222")
EXISTING_ID = uuid.UUID("33333333-3333-3333-3333-333333333333")


def cluster_records(level: int = mvs.IBP_3_9_IV0.feature_level) -> list[tuple[Any, int]]:
    """Brokers 0-5: racks a/b/c, 4 fenced, 5 in controlled shutdown; topic existing.topic (2 partitions)."""
    mv = mvs.from_feature_level(level)
    out: list[tuple[Any, int]] = [(rec.FeatureLevelRecord(name="metadata.version", feature_level=level), 0)]
    racks = {0: "a", 1: "b", 2: "c", 3: "a", 4: "b", 5: "c"}
    for b, rack in racks.items():
        out.append(
            (
                rec.RegisterBrokerRecord(
                    broker_id=b,
                    incarnation_id=uuid.UUID(int=100 + b),
                    broker_epoch=1000 + b,
                    rack=rack,
                    fenced=b == 4,
                    in_controlled_shutdown=b == 5,
                    log_dirs=[DIR_A] if b == 0 and mv.is_directory_assignment_supported() else [],
                ),
                mv.register_broker_record_version(),
            )
        )
    out.append((rec.TopicRecord(name="existing.topic", topic_id=EXISTING_ID), 0))
    for p, replicas in enumerate([[0, 1, 2], [1, 2, 3]]):
        out.append(
            (
                rec.PartitionRecord(
                    partition_id=p,
                    topic_id=EXISTING_ID,
                    replicas=replicas,
                    isr=replicas,
                    leader=replicas[0],
                    leader_epoch=0,
                    partition_epoch=0,
                ),
                0,
            )
        )
    return out


def make_image(
    level: int = mvs.IBP_3_9_IV0.feature_level, extra: list[tuple[Any, int]] | None = None
) -> MetadataImage:
    return image_of(cluster_records(level), extra or [])


def uuids(*values: int) -> Callable[[], uuid.UUID]:
    it: Iterator[uuid.UUID] = iter([uuid.UUID(int=v) for v in values])
    return lambda: next(it)






def create_request(version: int, *specs: dict[str, Any], validate_only: bool = False) -> Any:
    cls = protocol.request_class(topics.CREATE_TOPICS, version)
    topic_cls = nested(cls, "CreatableTopic")
    assignment_cls = nested(cls, "CreatableReplicaAssignment")
    config_cls = nested(cls, "CreatableTopicConfig")
    built = []
    for spec in specs:
        built.append(
            topic_cls(
                name=spec["name"],
                num_partitions=spec.get("partitions", -1),
                replication_factor=spec.get("rf", -1),
                assignments=tuple(
                    assignment_cls(partition_index=i, broker_ids=tuple(b))
                    for i, b in spec.get("assignments", {}).items()
                ),
                configs=tuple(config_cls(name=k, value=v) for k, v in spec.get("configs", {}).items()),
            )
        )
    return build(cls, topics=tuple(built), validate_only=validate_only)


def create(
    image: MetadataImage, version: int, *specs: dict[str, Any], validate_only: bool = False, seed: int = 1
) -> ControllerResult:
    before = copy.deepcopy(image)
    result = topics.create_topics(
        context(image, version),
        create_request(version, *specs, validate_only=validate_only),
        rng=JavaRandom(seed),
    )
    assert image == before, "a handler must not mutate the image"
    round_trip(result, topics.CREATE_TOPICS, version)
    return result


def only_error(result: ControllerResult) -> tuple[ErrorCode, str | None]:
    [entry] = result.response.topics
    assert result.records == []
    return entry.error_code, entry.error_message


# ---------------------------------------------------------------- CreateTopics: success


@pytest.mark.parametrize("version", range(2, 8))
def test_create_topic_records_and_response(version: int) -> None:
    image = make_image()
    result = create(
        image, version, {"name": "orders", "partitions": 6, "rf": 3, "configs": {"retention.ms": "1000"}}
    )
    kinds = [type(r).__name__ for r, _ in result.records]
    assert kinds == ["TopicRecord", "ConfigRecord"] + ["PartitionRecord"] * 6
    topic_record = result.records[0][0]
    assert topic_record.name == "orders" and topic_record.topic_id == uuid.UUID(int=1000)
    config = result.records[1][0]
    assert (config.resource_type, config.resource_name, config.name, config.value) == (
        2,
        "orders",
        "retention.ms",
        "1000",
    )
    usable_unfenced = {0, 1, 2, 3}
    leaders = []
    for p, (record, record_version) in enumerate(result.records[2:]):
        assert record_version == 1  # PartitionRecord v1 (directories) at 3.9-IV0
        assert record.partition_id == p and record.topic_id == topic_record.topic_id
        assert len(set(record.replicas)) == 3 and set(record.replicas) <= usable_unfenced | {4}
        assert record.isr == [b for b in record.replicas if b != 4]
        assert record.leader == record.isr[0] == record.replicas[0]
        assert (record.leader_epoch, record.partition_epoch, record.leader_recovery_state) == (0, 0, 0)
        # Broker 0 has one log dir; the others registered none (MIGRATING).
        assert record.directories == [DIR_A if b == 0 else MIGRATING_DIRECTORY for b in record.replicas]
        assert len({image.cluster.brokers[b].rack for b in record.replicas}) == 3
        leaders.append(record.leader)
    assert len(set(leaders)) >= 3
    [entry] = result.response.topics
    assert entry.name == "orders" and entry.error_code == ErrorCode.none and entry.error_message is None
    if version >= 5:
        assert (entry.num_partitions, entry.replication_factor) == (6, 3)
        configs = {c.name: c for c in entry.configs}
        assert configs["retention.ms"].value == "1000" and configs["retention.ms"].config_source == 1
        assert configs["cleanup.policy"].value == "delete" and configs["cleanup.policy"].config_source == 5
        assert [c.name for c in entry.configs] == sorted(configs)
    if version >= 7:
        assert entry.topic_id == topic_record.topic_id
    # The records replay onto the image: the new topic is there with its config.
    after = replay_records(result.records, image=copy.deepcopy(image))
    assert len(after.topics_by_name["orders"].partitions) == 6
    assert after.configs[(2, "orders")] == {"retention.ms": "1000"}


def test_defaults_come_from_broker_configs() -> None:
    image = make_image(
        extra=[
            (rec.ConfigRecord(resource_type=4, resource_name="", name="num.partitions", value="4"), 0),
            (
                rec.ConfigRecord(
                    resource_type=4, resource_name="", name="default.replication.factor", value="2"
                ),
                0,
            ),
            (rec.ConfigRecord(resource_type=4, resource_name="", name="log.retention.hours", value="1"), 0),
        ]
    )
    result = create(image, 7, {"name": "defaults"})
    [entry] = result.response.topics
    assert (entry.num_partitions, entry.replication_factor) == (4, 2)
    retention = next(c for c in entry.configs if c.name == "retention.ms")
    assert (retention.value, retention.config_source) == ("3600000", 3)  # DYNAMIC_DEFAULT_BROKER_CONFIG
    assert sum(type(r).__name__ == "PartitionRecord" for r, _ in result.records) == 4


def test_defaults_without_broker_configs_are_one_and_one() -> None:
    result = create(make_image(), 7, {"name": "plain"})
    [entry] = result.response.topics
    assert (entry.num_partitions, entry.replication_factor) == (1, 1)


def test_validate_only_returns_the_result_without_records() -> None:
    result = create(make_image(), 7, {"name": "dry", "partitions": 2, "rf": 2}, validate_only=True)
    [entry] = result.response.topics
    assert result.records == []
    assert (
        entry.error_code == ErrorCode.none
        and entry.num_partitions == 2
        and entry.topic_id not in (None, ZERO_UUID)
    )


def test_topic_ids_skip_reserved_values() -> None:
    image = make_image()
    dash = uuid.UUID(bytes=bytes([62 << 2]) + bytes(15))  # base64 form starts with '-'
    ctx = context(image, 7, new_uuid=uuids(0, METADATA_TOPIC_ID.int, dash.int, EXISTING_ID.int, 0x77))
    result = topics.create_topics(ctx, create_request(7, {"name": "t", "partitions": 1, "rf": 1}))
    assert result.records[0][0].topic_id == uuid.UUID(int=0x77)


def test_before_directory_assignment_no_directories_and_v0_records() -> None:
    image = make_image(mvs.IBP_3_6_IV2.feature_level)
    result = create(image, 7, {"name": "old", "partitions": 2, "rf": 2})
    for record, version in result.records[1:]:
        assert version == 0 and record.directories == []


def test_manual_assignment() -> None:
    image = make_image()
    result = create(image, 7, {"name": "manual", "assignments": {0: [4, 1], 1: [2, 3]}})
    parts = [r for r, _ in result.records if isinstance(r, rec.PartitionRecord)]
    assert [(p.replicas, p.isr, p.leader) for p in parts] == [([4, 1], [1], 1), ([2, 3], [2, 3], 2)]
    [entry] = result.response.topics
    assert (entry.num_partitions, entry.replication_factor) == (2, 2)


def test_directory_of_broker_with_several_dirs_is_unassigned() -> None:
    image = make_image(
        extra=[
            (
                rec.RegisterBrokerRecord(
                    broker_id=9,
                    incarnation_id=uuid.UUID(int=9),
                    broker_epoch=9,
                    fenced=False,
                    log_dirs=[DIR_A, DIR_B],
                ),
                3,
            )
        ]
    )
    result = create(image, 7, {"name": "dirs", "assignments": {0: [9]}})
    assert result.records[1][0].directories == [UNASSIGNED_DIRECTORY]


# ---------------------------------------------------------------- CreateTopics: errors


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "Topic name is illegal, it can't be empty"),
        (".", 'Topic name cannot be "." or ".."'),
        ("..", 'Topic name cannot be "." or ".."'),
        (
            "x" * 250,
            "Topic name is illegal, it can't be longer than 249 characters, Topic name: " + "x" * 250,
        ),
        (
            "a b",
            "Topic name \"a b\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'",
        ),
        (
            "tópico",
            "Topic name \"tópico\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'",
        ),
        ("existing_topic", "Topic 'existing_topic' collides with existing topic: existing.topic"),
    ],
)
def test_invalid_topic_names(name: str, message: str) -> None:
    assert only_error(create(make_image(), 7, {"name": name, "partitions": 1, "rf": 1})) == (
        ErrorCode.invalid_topic_exception,
        message,
    )


def test_longest_legal_name_is_accepted() -> None:
    result = create(make_image(), 7, {"name": "x" * 249, "partitions": 1, "rf": 1})
    assert result.response.topics[0].error_code == ErrorCode.none


def test_existing_topic() -> None:
    assert only_error(create(make_image(), 7, {"name": "existing.topic", "partitions": 1, "rf": 1})) == (
        ErrorCode.topic_already_exists,
        "Topic 'existing.topic' already exists.",
    )


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"partitions": 0, "rf": 1},
            (ErrorCode.invalid_partitions, "Number of partitions was set to an invalid non-positive value."),
        ),
        (
            {"partitions": -2, "rf": 1},
            (ErrorCode.invalid_partitions, "Number of partitions was set to an invalid non-positive value."),
        ),
        (
            {"partitions": 1, "rf": 0},
            (
                ErrorCode.invalid_replication_factor,
                "Replication factor must be larger than 0, or -1 to use the default value.",
            ),
        ),
        (
            {"partitions": 1, "rf": -3},
            (
                ErrorCode.invalid_replication_factor,
                "Replication factor must be larger than 0, or -1 to use the default value.",
            ),
        ),
        (
            {"partitions": 1, "rf": 6},
            (
                ErrorCode.invalid_replication_factor,
                "Unable to replicate the partition 6 time(s): The target replication factor of 6 cannot be reached "
                "because only 5 broker(s) are registered.",
            ),
        ),
        (
            {"assignments": {0: [1]}, "rf": 1},
            (
                ErrorCode.invalid_request,
                "A manual partition assignment was specified, but replication factor was not set to -1.",
            ),
        ),
        (
            {"assignments": {0: [1]}, "partitions": 1},
            (
                ErrorCode.invalid_request,
                "A manual partition assignment was specified, but numPartitions was not set to -1.",
            ),
        ),
        (
            {"assignments": {0: [1, 7]}},
            (
                ErrorCode.invalid_replica_assignment,
                "The manual partition assignment includes broker 7, but no such broker is registered.",
            ),
        ),
        (
            {"assignments": {0: [1, 1]}},
            (
                ErrorCode.invalid_replica_assignment,
                "The manual partition assignment includes the broker 1 more than once.",
            ),
        ),
        (
            {"assignments": {0: []}},
            (
                ErrorCode.invalid_replica_assignment,
                "The manual partition assignment includes an empty replica list.",
            ),
        ),
        (
            {"assignments": {0: [1, 2], 1: [3]}},
            (
                ErrorCode.invalid_replica_assignment,
                "The manual partition assignment includes a partition with 1 replica(s), but this is not consistent "
                "with previous partitions, which have 2 replica(s).",
            ),
        ),
        (
            {"assignments": {0: [1], 2: [2]}},
            (
                ErrorCode.invalid_replica_assignment,
                "partitions should be a consecutive 0-based integer sequence",
            ),
        ),
        (
            {"assignments": {0: [4, 5]}},
            (
                ErrorCode.invalid_replica_assignment,
                "All brokers specified in the manual partition assignment for partition 0 are fenced or in controlled shutdown.",
            ),
        ),
    ],
)
def test_partition_and_replication_errors(spec: dict[str, Any], expected: tuple[ErrorCode, str]) -> None:
    for version in (2, 7):
        assert only_error(create(make_image(), version, {"name": "t", **spec})) == expected


def test_replication_factor_counts_fenced_brokers_but_not_shutting_down_ones() -> None:
    # 4 unfenced + 1 fenced usable brokers (5 is in controlled shutdown): RF 5 places onto the fenced one.
    result = create(make_image(), 7, {"name": "wide", "partitions": 1, "rf": 5})
    [(record, _)] = [r for r in result.records if isinstance(r[0], rec.PartitionRecord)]
    assert sorted(record.replicas) == [0, 1, 2, 3, 4] and 4 not in record.isr


def test_all_brokers_fenced() -> None:
    extra = [
        (rec.BrokerRegistrationChangeRecord(broker_id=b, broker_epoch=1000 + b, fenced=1), 0)
        for b in (0, 1, 2, 3)
    ]
    assert only_error(create(make_image(extra=extra), 7, {"name": "t", "partitions": 1, "rf": 1})) == (
        ErrorCode.invalid_replication_factor,
        "Unable to replicate the partition 1 time(s): All brokers are currently fenced.",
    )


def test_duplicate_names_and_metadata_topic() -> None:
    result = create(
        make_image(),
        7,
        {"name": "dup", "partitions": 1, "rf": 1},
        {"name": "ok", "partitions": 1, "rf": 1},
        {"name": "dup", "partitions": 1, "rf": 1},
        {"name": "__cluster_metadata", "partitions": 1, "rf": 1},
    )
    assert [(t.name, t.error_code, t.error_message) for t in result.response.topics] == [
        ("ok", ErrorCode.none, None),
        ("dup", ErrorCode.invalid_request, "Duplicate topic name."),
        ("__cluster_metadata", ErrorCode.topic_authorization_failed, "Authorization failed."),
    ]
    assert [r.name for r, _ in result.records if isinstance(r, rec.TopicRecord)] == ["ok"]


def test_one_bad_topic_does_not_stop_the_others() -> None:
    result = create(
        make_image(), 7, {"name": "good", "partitions": 1, "rf": 1}, {"name": "bad", "partitions": 0, "rf": 1}
    )
    assert [t.error_code for t in result.response.topics] == [ErrorCode.none, ErrorCode.invalid_partitions]
    assert [type(r).__name__ for r, _ in result.records] == ["TopicRecord", "PartitionRecord"]


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ({"retention.msx": "1"}, "Unknown topic config name: retention.msx"),
        (
            {"retention.ms": "soon"},
            "Invalid value soon for configuration retention.ms: Not a number of type LONG",
        ),
        (
            {"min.insync.replicas": "0"},
            "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1",
        ),
        (
            {"cleanup.policy": "delete,zap"},
            "Invalid value zap for configuration cleanup.policy: String must be one of: compact, delete",
        ),
        (
            {"preallocate": "yes"},
            "Invalid value yes for configuration preallocate: Expected value to be either true or false",
        ),
        (
            {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
            "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)",
        ),
    ],
)
def test_invalid_configs(configs: dict[str, str], message: str) -> None:
    assert only_error(
        create(make_image(), 7, {"name": "t", "partitions": 1, "rf": 1, "configs": configs})
    ) == (
        ErrorCode.invalid_config,
        message,
    )


def test_null_config_values() -> None:
    request = create_request(7, {"name": "t", "partitions": 1, "rf": 1})
    config_cls = nested(type(request), "CreatableTopicConfig")
    topic = request.topics[0]
    nulls = (config_cls(name="a", value=None), config_cls(name="b", value=None))
    request = build(type(request), topics=(build(type(topic), **{**_fields(topic), "configs": nulls}),))
    result = topics.create_topics(context(make_image(), 7), request, rng=JavaRandom(1))
    assert only_error(result) == (ErrorCode.invalid_config, "Null value not supported for topic configs: a,b")


def _fields(entity: Any) -> dict[str, Any]:
    return {name: getattr(entity, name) for name in entity.__dataclass_fields__}


def test_too_many_partitions_fail_the_whole_request() -> None:
    result = create(
        make_image(),
        7,
        {"name": "huge", "partitions": 10_000, "rf": 1},
        {"name": "x", "partitions": 1, "rf": 1},
    )
    assert result.records == []
    assert {(t.error_code, t.error_message) for t in result.response.topics} == {
        (ErrorCode.policy_violation, "Unable to perform excessively large batch operation.")
    }
    # 9,999 partitions + the TopicRecord is exactly the limit.
    ok = create(make_image(), 7, {"name": "big", "partitions": 9_999, "rf": 1})
    assert len(ok.records) == 10_000


# ---------------------------------------------------------------- DeleteTopics


def delete(
    image: MetadataImage,
    version: int,
    names: tuple[str, ...] = (),
    ids: tuple[tuple[str | None, uuid.UUID], ...] = (),
) -> ControllerResult:
    cls = protocol.request_class(topics.DELETE_TOPICS, version)
    if version < 6:
        request = _with_timeout(cls, topic_names=names)
    else:
        state = nested(cls, "DeleteTopicState")
        entries = [state(name=n, topic_id=ZERO_UUID) for n in names] + [
            state(name=n, topic_id=i) for n, i in ids
        ]
        request = _with_timeout(cls, topics=tuple(entries))
    before = copy.deepcopy(image)
    result = topics.delete_topics(context(image, version), request)
    assert image == before
    round_trip(result, topics.DELETE_TOPICS, version)
    return result


def _with_timeout(cls: type[Any], **values: Any) -> Any:
    return cls(timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)), **values)


@pytest.mark.parametrize("version", range(1, 7))
def test_delete_by_name(version: int) -> None:
    image = make_image()
    result = delete(image, version, ("existing.topic", "missing"))
    assert result.records == [(rec.RemoveTopicRecord(topic_id=EXISTING_ID), 0)]
    by_name = {r.name: r for r in result.response.responses}
    assert by_name["existing.topic"].error_code == ErrorCode.none
    assert by_name["missing"].error_code == ErrorCode.unknown_topic_or_partition
    if version >= 5:
        assert by_name["missing"].error_message == "This server does not host this topic-partition."
    if version >= 6:
        assert by_name["existing.topic"].topic_id == EXISTING_ID
    after = replay_records(result.records, image=copy.deepcopy(image))
    assert "existing.topic" not in after.topics_by_name


def test_delete_by_id_and_invalid_combinations() -> None:
    missing = uuid.UUID(int=0x999)
    result = delete(
        make_image(),
        6,
        names=("dup", "dup"),
        ids=((None, EXISTING_ID), (None, missing), (None, ZERO_UUID), ("both", missing)),
    )
    got = {(r.name, r.topic_id, r.error_code, r.error_message) for r in result.response.responses}
    assert got == {
        ("existing.topic", EXISTING_ID, ErrorCode.none, None),
        (None, missing, ErrorCode.unknown_topic_id, "This server does not host this topic ID."),
        (None, None, ErrorCode.invalid_request, "Neither topic name nor id were specified."),
        ("both", missing, ErrorCode.invalid_request, "You may not specify both topic name and topic id."),
        ("dup", None, ErrorCode.invalid_request, "Duplicate topic name."),
    }
    assert result.records == [(rec.RemoveTopicRecord(topic_id=EXISTING_ID), 0)]


def test_delete_name_and_id_of_the_same_topic_deletes_nothing() -> None:
    result = delete(make_image(), 6, names=("existing.topic",), ids=((None, EXISTING_ID),))
    assert result.records == []
    [entry] = result.response.responses
    assert (entry.name, entry.topic_id, entry.error_code) == (
        "existing.topic",
        EXISTING_ID,
        ErrorCode.invalid_request,
    )


def test_delete_duplicate_ids() -> None:
    result = delete(make_image(), 6, ids=((None, EXISTING_ID), (None, EXISTING_ID)))
    assert result.records == []
    assert [(r.topic_id, r.error_message) for r in result.response.responses] == [
        (EXISTING_ID, "Duplicate topic id.")
    ]


# ---------------------------------------------------------------- CreatePartitions


def create_partitions(
    image: MetadataImage,
    version: int,
    *specs: tuple[str, int, list[list[int]] | None],
    validate_only: bool = False,
) -> ControllerResult:
    cls = protocol.request_class(topics.CREATE_PARTITIONS, version)
    topic_cls = nested(cls, "CreatePartitionsTopic")
    assignment_cls = nested(cls, "CreatePartitionsAssignment")
    request = _with_timeout(
        cls,
        topics=tuple(
            topic_cls(
                name=name,
                count=count,
                assignments=None
                if assignments is None
                else tuple(assignment_cls(broker_ids=tuple(a)) for a in assignments),
            )
            for name, count, assignments in specs
        ),
        validate_only=validate_only,
    )
    before = copy.deepcopy(image)
    result = topics.create_partitions(context(image, version), request, rng=JavaRandom(5))
    assert image == before
    round_trip(result, topics.CREATE_PARTITIONS, version)
    return result


@pytest.mark.parametrize("version", range(0, 4))
def test_create_partitions_places_new_partitions(version: int) -> None:
    image = make_image()
    result = create_partitions(image, version, ("existing.topic", 5, None))
    assert [(r.error_code, r.error_message) for r in result.response.results] == [(ErrorCode.none, None)]
    parts = [r for r, _ in result.records]
    assert [p.partition_id for p in parts] == [2, 3, 4]
    for p in parts:
        assert p.topic_id == EXISTING_ID and len(set(p.replicas)) == 3 and p.leader == p.isr[0]
    after = replay_records(result.records, image=copy.deepcopy(image))
    assert sorted(after.topics_by_id[EXISTING_ID].partitions) == [0, 1, 2, 3, 4]


def test_create_partitions_manual_and_validate_only() -> None:
    result = create_partitions(make_image(), 3, ("existing.topic", 3, [[3, 4, 0]]))
    [(record, _)] = result.records
    assert (record.partition_id, record.replicas, record.isr, record.leader) == (2, [3, 4, 0], [3, 0], 3)
    dry = create_partitions(make_image(), 3, ("existing.topic", 3, [[3, 4, 0]]), validate_only=True)
    assert dry.records == [] and dry.response.results[0].error_code == ErrorCode.none


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (("missing", 3, None), (ErrorCode.unknown_topic_or_partition, None)),
        (("existing.topic", 2, None), (ErrorCode.invalid_partitions, "Topic already has 2 partition(s).")),
        (
            ("existing.topic", 1, None),
            (
                ErrorCode.invalid_partitions,
                "The topic existing.topic currently has 2 partition(s); 1 would not be an increase.",
            ),
        ),
        (
            ("existing.topic", 4, [[0, 1, 2]]),
            (
                ErrorCode.invalid_replica_assignment,
                "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.",
            ),
        ),
        (
            ("existing.topic", 3, [[0, 1]]),
            (
                ErrorCode.invalid_replica_assignment,
                "The manual partition assignment includes a partition with 2 replica(s), but this is not consistent "
                "with previous partitions, which have 3 replica(s).",
            ),
        ),
        (
            ("existing.topic", 3, [[4, 5, 9]]),
            (
                ErrorCode.invalid_replica_assignment,
                "The manual partition assignment includes broker 9, but no such broker is registered.",
            ),
        ),
        (
            ("existing.topic", 3, [[4, 5, 3]]),
            (ErrorCode.none, None),
        ),
    ],
)
def test_create_partitions_errors(
    spec: tuple[str, int, list[list[int]] | None], expected: tuple[ErrorCode, str | None]
) -> None:
    result = create_partitions(make_image(), 3, spec)
    assert [(r.error_code, r.error_message) for r in result.response.results] == [expected]
    assert (result.records == []) == (expected[0] != ErrorCode.none)


def test_create_partitions_duplicates() -> None:
    result = create_partitions(make_image(), 3, ("existing.topic", 3, None), ("existing.topic", 4, None))
    assert [(r.name, r.error_code, r.error_message) for r in result.response.results] == [
        ("existing.topic", ErrorCode.invalid_request, "Duplicate topic name.")
    ]
    assert result.records == []


def test_create_partitions_needs_enough_brokers() -> None:
    image = make_image(extra=[(rec.TopicRecord(name="wide", topic_id=uuid.UUID(int=5)), 0)])
    image = replay_records(
        [
            (
                rec.PartitionRecord(
                    partition_id=0,
                    topic_id=uuid.UUID(int=5),
                    replicas=[0, 1, 2, 3, 4, 5],
                    isr=[0],
                    leader=0,
                    leader_epoch=0,
                    partition_epoch=0,
                ),
                0,
            )
        ],
        image=image,
    )
    result = create_partitions(image, 3, ("wide", 2, None))
    assert [(r.error_code, r.error_message) for r in result.response.results] == [
        (
            ErrorCode.invalid_replication_factor,
            "The target replication factor of 6 cannot be reached because only 5 broker(s) are registered.",
        )
    ]


def test_supported_versions_have_kio_classes() -> None:
    for api_key, (low, high) in topics.SUPPORTED.items():
        assert api_key in topics.HANDLERS
        for version in range(low, high + 1):
            protocol.request_class(api_key, version)
            protocol.response_class(api_key, version)
