"""Per-item authorization of forwarded requests (bridge.handlers.authorize_items) as Kafka 3.9's ControllerApis does
it: which items are taken out, what their results say, and where they go in the controller's answer."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from kio.schema.create_partitions.v3 import request as cp
from kio.schema.create_partitions.v3 import response as cp_resp
from kio.schema.create_topics.v7 import request as ct
from kio.schema.create_topics.v7 import response as ct_resp
from kio.schema.delete_topics.v6 import request as dt
from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs.v1 import request as iac
from kio.schema.incremental_alter_configs.v1 import response as iac_resp
from kio.schema.types import TopicName
from kio.static.primitive import i8, i16, i32, i32Timedelta

from bridge.handlers.authorize_items import Split, merge, split
from bridge.handlers.authorizer import CLUSTER_NAME, StandardAuthorizer
from bridge.handlers.reads import Caller
from bridge.kafka.protocol import KafkaPrincipal
from migrate.kraft.image import AclBinding, MetadataImage, TopicImage
from migrate.zk.model import AclOperation, AclPermissionType, PatternType, ResourceType

ALICE = KafkaPrincipal("User", "alice")
TIMEOUT = i32Timedelta.parse(timedelta(seconds=30))


def caller(*grants: tuple[AclOperation, ResourceType, str]) -> Caller:
    acls = [
        AclBinding(
            int(rt), name, int(PatternType.LITERAL), "User:alice", "*", int(op), int(AclPermissionType.ALLOW)
        )
        for op, rt, name in grants
    ]
    authorizer = StandardAuthorizer(acls)
    return Caller(ALICE, "10.0.0.1", authorizer.authorize)


def forwarded(part: Split) -> Any:
    assert part.forward is not None, "nothing forwarded"
    return part.forward


def creatable(name: str) -> ct.CreatableTopic:
    return ct.CreatableTopic(
        name=TopicName(name), num_partitions=i32(1), replication_factor=i16(1), assignments=(), configs=()
    )


def created(name: str) -> ct_resp.CreatableTopicResult:
    config = ct_resp.CreatableTopicConfigs(
        name="cleanup.policy", value="delete", read_only=False, config_source=i8(5), is_sensitive=False
    )
    return ct_resp.CreatableTopicResult(
        name=TopicName(name), topic_id=uuid.uuid4(), error_code=ErrorCode.none, error_message=None,
        num_partitions=i32(1), replication_factor=i16(1), configs=(config,),
    )  # fmt: skip


def test_create_topics_refused_ones_are_taken_out_and_appended() -> None:
    who = caller((AclOperation.CREATE, ResourceType.TOPIC, "ok"))
    request = ct.CreateTopicsRequest(
        topics=(creatable("no"), creatable("ok"), creatable("dup"), creatable("dup")), timeout=TIMEOUT
    )
    part = split(19, 7, request, who, MetadataImage())
    # Duplicates are left to the controller (INVALID_REQUEST "Duplicate topic name."), unchecked.
    assert [t.name for t in forwarded(part).topics] == ["ok", "dup", "dup"]
    answer = ct_resp.CreateTopicsResponse(
        throttle_time=i32Timedelta.parse(timedelta(0)), topics=(created("ok"),)
    )
    merged = merge(19, 7, request, part, answer, who)
    assert [(t.name, t.error_code, t.error_message) for t in merged.topics] == [
        ("ok", ErrorCode.none, None),
        ("no", ErrorCode.topic_authorization_failed, "Authorization failed."),
    ]
    # Created without DESCRIBE_CONFIGS on it: no configs, topic_config_error_code says why.
    assert merged.topics[0].topic_config_error_code == ErrorCode.topic_authorization_failed
    assert merged.topics[0].configs == ()


def test_create_topics_fully_refused_is_not_forwarded() -> None:
    who = caller()
    request = ct.CreateTopicsRequest(topics=(creatable("a"), creatable("b")), timeout=TIMEOUT)
    part = split(19, 7, request, who, MetadataImage())
    assert part.forward is None
    merged = merge(19, 7, request, part, None, who)
    assert [(t.name, t.error_code) for t in merged.topics] == [
        ("a", ErrorCode.topic_authorization_failed),
        ("b", ErrorCode.topic_authorization_failed),
    ]


def test_create_on_the_cluster_allows_every_topic() -> None:
    who = caller(
        (AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME),
        (AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, "a"),
    )
    request = ct.CreateTopicsRequest(topics=(creatable("a"),), timeout=TIMEOUT)
    part = split(19, 7, request, who, MetadataImage())
    assert part.forward is request and part.refused == ()
    answer = ct_resp.CreateTopicsResponse(
        throttle_time=i32Timedelta.parse(timedelta(0)), topics=(created("a"),)
    )
    assert merge(19, 7, request, part, answer, who).topics == answer.topics


def test_create_partitions_refused_first_without_message() -> None:
    who = caller((AclOperation.ALTER, ResourceType.TOPIC, "ok"))
    request = cp.CreatePartitionsRequest(
        topics=(cp.CreatePartitionsTopic(name=TopicName("ok"), count=i32(3), assignments=None),
                cp.CreatePartitionsTopic(name=TopicName("no"), count=i32(3), assignments=None)),
        timeout=TIMEOUT, validate_only=False,
    )  # fmt: skip
    part = split(37, 3, request, who, MetadataImage())
    assert [t.name for t in forwarded(part).topics] == ["ok"]
    ok = cp_resp.CreatePartitionsTopicResult(
        name=TopicName("ok"), error_code=ErrorCode.none, error_message=None
    )
    answer = cp_resp.CreatePartitionsResponse(throttle_time=i32Timedelta.parse(timedelta(0)), results=(ok,))
    merged = merge(37, 3, request, part, answer, who)
    assert [(r.name, r.error_code, r.error_message) for r in merged.results] == [
        ("no", ErrorCode.topic_authorization_failed, None),
        ("ok", ErrorCode.none, None),
    ]


def test_incremental_alter_configs_per_resource_errors() -> None:
    who = caller((AclOperation.ALTER_CONFIGS, ResourceType.TOPIC, "ok"))

    def resource(kind: int, name: str) -> iac.AlterConfigsResource:
        return iac.AlterConfigsResource(resource_type=i8(kind), resource_name=name, configs=())

    request = iac.IncrementalAlterConfigsRequest(
        resources=(resource(2, "ok"), resource(2, "no"), resource(4, "1"), resource(8, "1")),
        validate_only=False,
    )
    part = split(44, 1, request, who, MetadataImage())
    # BROKER_LOGGER is not checked: ControllerApis answers it INVALID_REQUEST.
    assert [(r.resource_type, r.resource_name) for r in forwarded(part).resources] == [(2, "ok"), (8, "1")]
    merged = merge(44, 1, request, part, iac_resp.IncrementalAlterConfigsResponse(
        throttle_time=i32Timedelta.parse(timedelta(0)), responses=()), who)  # fmt: skip
    assert [(r.resource_type, r.resource_name, r.error_code, r.error_message) for r in merged.responses] == [
        (2, "no", ErrorCode.topic_authorization_failed, "Topic authorization failed."),
        (4, "1", ErrorCode.cluster_authorization_failed, "Cluster authorization failed."),
    ]


def test_delete_topics_by_id_names_the_topic_only_with_describe() -> None:
    image = MetadataImage()
    ids = {name: uuid.uuid4() for name in ("seen", "hidden", "ok")}
    for name, topic_id in ids.items():
        topic = TopicImage(name, topic_id)
        image.topics_by_id[topic_id] = image.topics_by_name[name] = topic
    who = caller(
        (AclOperation.DESCRIBE, ResourceType.TOPIC, "seen"), (AclOperation.DELETE, ResourceType.TOPIC, "ok")
    )
    unknown = uuid.uuid4()
    request = dt.DeleteTopicsRequest(
        topics=tuple(dt.DeleteTopicState(name=None, topic_id=t) for t in (*ids.values(), unknown)),
        timeout=TIMEOUT,
    )
    part = split(20, 6, request, who, image)
    # The unknown id goes on: the controller answers UNKNOWN_TOPIC_ID.
    assert [t.topic_id for t in forwarded(part).topics] == [ids["ok"], unknown]
    assert [(r.name, r.topic_id, r.error_code) for r in part.refused] == [
        ("seen", ids["seen"], ErrorCode.topic_authorization_failed),
        (None, ids["hidden"], ErrorCode.topic_authorization_failed),
    ]
