"""The dual-write planner: which ZooKeeper operations Kafka's KRaftMigrationZkWriter performs.

Scenarios follow Kafka's KRaftMigrationZkWriterTest, KRaftMigrationDriverTest (topic dual-write),
ZkConfigMigrationClientTest and ZkAclMigrationClientTest (migration-protocol.md §14), with images built by
replaying records and ZooKeeper given as a ZkClusterModel.
"""

from __future__ import annotations

import copy
import dataclasses
import uuid
from functools import cache
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.generate_cluster import ClusterSpec, generate
from bridge.zk.operations import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    ClearPendingTopicDeletions,
    CreateTopic,
    CreateTopicPartitions,
    DeleteConfigs,
    DeleteDelegationToken,
    DeleteResourceAcls,
    DeleteTopic,
    DeleteTopicPartitions,
    ResourcePatternKey,
    UpdateTopic,
    UpdateTopicPartitions,
    WriteClientQuotas,
    WriteConfigs,
    WriteDelegationToken,
    WriteProducerId,
    WriteResourceAcls,
    ZkOperation,
)
from bridge.zk.planner import (
    count_op_types,
    describe,
    equals_zk_state,
    format_op_counts,
    plan_delta,
    plan_reconciliation,
    summarize,
    zk_partition_registration,
)
from migrate.errors import ZnodeFormatError
from migrate.kraft import records as r
from migrate.kraft.image import MIGRATING_DIRECTORY, MetadataImage, PartitionRegistration, ScramCredential
from migrate.kraft.replay import replay_records
from migrate.kraft.wire import uuid_from_text
from migrate.translate import translate
from migrate.zk.cluster import from_tree
from migrate.zk.model import (
    AclEntry,
    AclOperation,
    AclPermissionType,
    AclResource,
    ClientQuotaConfig,
    DelegationToken,
    EntityConfig,
    PartitionState,
    PatternType,
    ProducerIdBlock,
    ResourcePattern,
    ResourceType,
    Topic,
    ZkClusterModel,
)
from migrate.zk.model import ScramCredential as ZkScramCredential
from migrate.zk.restore import load_data_dir
from tests.support import FIXTURES

Records = list[tuple[Any, int]]

# Kafka's TopicsImageTest ids.
FOO = uuid_from_text("ThIaNwRnSM2Nt9Mx1v0RvA")
BAR = uuid_from_text("f62ptyETTjet8SL5ZeREiw")
BAZ = uuid_from_text("tgHBnRglT5W_RlENnuG5vg")

FIXTURE = FIXTURES / "zk-real-kafka-3.5"
CHROOT = "/de-4-3-kafka-cluster"


def image_of(*record_lists: Records) -> MetadataImage:
    """A fresh image from records (fresh each time: replay shares and mutates nested values)."""
    return replay_records([rv for records in record_lists for rv in records])


def topic(name: str, topic_id: uuid.UUID) -> Records:
    return [(r.TopicRecord(name=name, topic_id=topic_id), 0)]


def partition(
    topic_id: uuid.UUID,
    partition_id: int,
    replicas: list[int],
    isr: list[int],
    *,
    removing: list[int] | None = None,
    adding: list[int] | None = None,
    leader: int,
    leader_epoch: int,
    partition_epoch: int,
) -> Records:
    record = r.PartitionRecord(
        partition_id=partition_id,
        topic_id=topic_id,
        replicas=replicas,
        isr=isr,
        removing_replicas=removing or [],
        adding_replicas=adding or [],
        leader=leader,
        leader_epoch=leader_epoch,
        partition_epoch=partition_epoch,
    )
    return [(record, 0)]


def change(topic_id: uuid.UUID, partition_id: int, **fields: Any) -> Records:
    return [(r.PartitionChangeRecord(topic_id=topic_id, partition_id=partition_id, **fields), 0)]


def config(resource_type: int, name: str, key: str, value: str | None) -> Records:
    return [(r.ConfigRecord(resource_type=resource_type, resource_name=name, name=key, value=value), 0)]


def quota(entity: dict[str, str | None], key: str, value: float, remove: bool = False) -> Records:
    data = [r.ClientQuotaRecord.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()]
    return [(r.ClientQuotaRecord(entity=data, key=key, value=value, remove=remove), 0)]


def scram(user: str, mechanism: int = 1, iterations: int = 4096, salt: bytes = b"salt") -> Records:
    record = r.UserScramCredentialRecord(
        name=user,
        mechanism=mechanism,
        salt=salt,
        stored_key=b"stored",
        server_key=b"server",
        iterations=iterations,
    )
    return [(record, 0)]


def acl(
    acl_id: uuid.UUID,
    resource_name: str,
    principal: str = "User:alice",
    *,
    resource_type: int = ResourceType.TOPIC,
    pattern_type: int = PatternType.LITERAL,
    operation: int = AclOperation.READ,
) -> Records:
    record = r.AccessControlEntryRecord(
        id=acl_id,
        resource_type=resource_type,
        resource_name=resource_name,
        pattern_type=pattern_type,
        principal=principal,
        host="*",
        operation=operation,
        permission_type=AclPermissionType.ALLOW,
    )
    return [(record, 0)]


def token(token_id: str, expiration: int = 2000) -> Records:
    record = r.DelegationTokenRecord(
        owner="User:alice",
        requester="User:alice",
        renewers=["User:bob"],
        issue_timestamp=1000,
        max_timestamp=9000,
        expiration_timestamp=expiration,
        token_id=token_id,
    )
    return [(record, 0)]


def producer_ids(next_id: int) -> Records:
    return [(r.ProducerIdsRecord(broker_id=1, broker_epoch=-1, next_producer_id=next_id), 0)]


def kinds(ops: list[ZkOperation]) -> list[tuple[str, str]]:
    return [(type(op).__name__, op.op_type) for op in ops]


# Kafka's TopicsImageTest.IMAGE1, with the third `foo` partition KRaftMigrationZkWriterTest relies on.
IMAGE1_TOPICS: Records = [
    *topic("foo", FOO),
    *partition(FOO, 0, [2, 3, 4], [2, 3], leader=2, leader_epoch=1, partition_epoch=345),
    *partition(FOO, 1, [3, 4, 5], [3, 4, 5], leader=3, leader_epoch=4, partition_epoch=684),
    *partition(FOO, 2, [2, 4, 5], [2, 4, 5], leader=2, leader_epoch=1, partition_epoch=345),
    *topic("bar", BAR),
    *partition(
        BAR,
        0,
        [0, 1, 2, 3, 4],
        [0, 1, 2, 3],
        removing=[1],
        adding=[3, 4],
        leader=0,
        leader_epoch=1,
        partition_epoch=345,
    ),
]

# Kafka's TopicsImageTest.DELTA1_RECORDS: delete foo, move bar's leadership, create baz.
DELTA1_TOPICS: Records = [
    (r.RemoveTopicRecord(topic_id=FOO), 0),
    *change(BAR, 0, leader=1),
    *topic("baz", BAZ),
    *partition(
        BAZ, 0, [1, 2, 3, 4], [3, 4], removing=[2], adding=[1], leader=3, leader_epoch=2, partition_epoch=1
    ),
]


def zk_topic_from(image: MetadataImage, name: str, partition_ids: list[int] | None = None) -> Topic:
    """The ZooKeeper form of an image topic (state znode versions = partition epochs)."""
    t = image.topics_by_name[name]
    ids = sorted(t.partitions) if partition_ids is None else partition_ids
    zk = Topic(name=name, topic_id=t.topic_id, partitions={})
    for p in ids:
        reg = t.partitions[p]
        zk.partitions[p] = list(reg.replicas)
        if reg.adding_replicas:
            zk.adding_replicas[p] = list(reg.adding_replicas)
        if reg.removing_replicas:
            zk.removing_replicas[p] = list(reg.removing_replicas)
        zk.states[p] = PartitionState(
            leader=reg.leader,
            leader_epoch=reg.leader_epoch,
            isr=list(reg.isr),
            controller_epoch=1,
            leader_recovery_state=reg.leader_recovery_state,
            zk_version=reg.partition_epoch,
        )
    return zk


# ---------------------------------------------------------------------------------------------- summaries


def test_op_counts_print_like_kafkas_treemap() -> None:
    ops: list[ZkOperation] = [
        WriteConfigs("UpdateBrokerConfig", ""),
        CreateTopic("CreateTopic", ""),
        WriteConfigs("UpdateBrokerConfig", ""),
        CreateTopic("CreateTopic", ""),
    ]
    counts = count_op_types(ops)
    assert list(counts.items()) == [("CreateTopic", 2), ("UpdateBrokerConfig", 2)]
    assert format_op_counts(counts) == "{CreateTopic=2, UpdateBrokerConfig=2}"
    assert format_op_counts({}) == "{}"


def test_describe_gives_op_type_and_kafkas_log_message() -> None:
    ops = plan_delta(image_of(IMAGE1_TOPICS), image_of(IMAGE1_TOPICS, DELTA1_TOPICS))
    assert describe(ops) == [
        "DeleteTopic: Deleting topic foo, ID ThIaNwRnSM2Nt9Mx1v0RvA",
        "UpdatePartition: Updating Partitions for Topic bar, ID f62ptyETTjet8SL5ZeREiw",
        "CreateTopic: Create Topic baz, ID tgHBnRglT5W_RlENnuG5vg",
        "DeleteConfig: Delete configs for ConfigResource(type=TOPIC, name='foo')",
    ]


# ---------------------------------------------------------------------------------------------- delta: topics


def test_delta_no_change_writes_nothing() -> None:
    everything = [*IMAGE1_TOPICS, *config(BROKER_RESOURCE, "0", "a", "b"), *quota({"user": "u"}, "k", 1.0)]
    assert plan_delta(image_of(everything), image_of(everything)) == []


def test_delta_topic_dual_write_as_in_kafkas_driver_test() -> None:
    """KRaftMigrationDriverTest.testTopicDualWriteDelta: foo deleted, bar's leader moved, baz created."""
    previous = image_of(IMAGE1_TOPICS)
    current = image_of(IMAGE1_TOPICS, DELTA1_TOPICS)
    ops = plan_delta(previous, current)
    assert kinds(ops) == [
        ("DeleteTopic", "DeleteTopic"),
        ("UpdateTopicPartitions", "UpdatePartition"),
        ("CreateTopic", "CreateTopic"),
        ("DeleteConfigs", "DeleteConfig"),
    ]
    delete, update, create, delete_config = ops
    assert isinstance(delete, DeleteTopic) and delete.name == "foo"
    assert isinstance(update, UpdateTopicPartitions)
    assert list(update.partitions) == ["bar"] and list(update.partitions["bar"]) == [0]
    moved = update.partitions["bar"][0]
    assert (moved.leader, moved.leader_epoch, moved.partition_epoch) == (1, 2, 346)
    assert isinstance(create, CreateTopic)
    assert (create.name, create.topic_id, list(create.partitions)) == ("baz", BAZ, [0])
    assert create.partitions[0].adding_replicas == [1] and create.partitions[0].removing_replicas == [2]
    # A deleted topic's config resource is always deleted, even without configs (MetadataDelta does so).
    assert isinstance(delete_config, DeleteConfigs)
    assert (delete_config.resource_type, delete_config.resource_name) == (TOPIC_RESOURCE, "foo")


def test_delta_new_and_reassigned_partitions() -> None:
    previous = image_of(IMAGE1_TOPICS)
    current = image_of(
        IMAGE1_TOPICS,
        change(FOO, 0, replicas=[2, 3, 6], isr=[2, 3]),
        partition(FOO, 3, [1, 2, 3], [1, 2, 3], leader=1, leader_epoch=0, partition_epoch=0),
    )
    ops = plan_delta(previous, current)
    assert kinds(ops) == [
        ("UpdateTopic", "UpdateTopic"),
        ("CreateTopicPartitions", "UpdatePartition"),
        ("UpdateTopicPartitions", "UpdatePartition"),
    ]
    update_topic, create_partitions, update_partitions = ops
    assert isinstance(update_topic, UpdateTopic)
    assert update_topic.name == "foo" and list(update_topic.partitions) == [0, 1, 2, 3]
    assert update_topic.partitions[0].replicas == [2, 3, 6]
    assert update_topic.description == "Updating Topic foo, ID ThIaNwRnSM2Nt9Mx1v0RvA"
    assert isinstance(create_partitions, CreateTopicPartitions)
    assert {t: list(ps) for t, ps in create_partitions.partitions.items()} == {"foo": [3]}
    assert create_partitions.description == "Create new partitions for Topic foo, ID ThIaNwRnSM2Nt9Mx1v0RvA"
    assert isinstance(update_partitions, UpdateTopicPartitions)
    assert {t: list(ps) for t, ps in update_partitions.partitions.items()} == {"foo": [0]}


def test_delta_leader_and_isr_change_only_rewrites_partition_state() -> None:
    previous = image_of(IMAGE1_TOPICS)
    current = image_of(IMAGE1_TOPICS, change(FOO, 1, isr=[3, 4]), change(FOO, 2, leader=4))
    ops = plan_delta(previous, current)
    assert kinds(ops) == [("UpdateTopicPartitions", "UpdatePartition")]
    assert isinstance(ops[0], UpdateTopicPartitions)
    assert {p: reg.isr for p, reg in ops[0].partitions["foo"].items()} == {1: [3, 4], 2: [2, 4, 5]}


def test_delta_directory_change_is_an_assignment_change() -> None:
    directory = uuid.UUID(int=77)
    previous = image_of(IMAGE1_TOPICS)
    current = image_of(
        IMAGE1_TOPICS, change(FOO, 1, directories=[directory, MIGRATING_DIRECTORY, MIGRATING_DIRECTORY])
    )
    assert kinds(plan_delta(previous, current)) == [
        ("UpdateTopic", "UpdateTopic"),
        ("UpdateTopicPartitions", "UpdatePartition"),
    ]


# ---------------------------------------------------------------------------------------------- delta: configs


def test_delta_configs_as_in_kafkas_configurations_image_test() -> None:
    """ConfigurationsImageTest.DELTA1: broker 0 emptied, broker 1 changed, broker 2 new."""
    base = [
        *config(BROKER_RESOURCE, "0", "foo", "bar"),
        *config(BROKER_RESOURCE, "0", "baz", "quux"),
        *config(BROKER_RESOURCE, "1", "foobar", "foobaz"),
    ]
    delta = [
        *config(BROKER_RESOURCE, "0", "foo", None),
        *config(BROKER_RESOURCE, "0", "baz", None),
        *config(BROKER_RESOURCE, "1", "foobar", None),
        *config(BROKER_RESOURCE, "1", "barfoo", "bazfoo"),
        *config(BROKER_RESOURCE, "2", "foo", "bar"),
        *config(TOPIC_RESOURCE, "t", "retention.ms", "1000"),
        *config(16, "metrics", "interval.ms", "5"),  # CLIENT_METRICS: not dual-written
    ]
    ops = plan_delta(image_of(base), image_of(base, delta))
    assert [(op.op_type, getattr(op, "resource_name", None), getattr(op, "configs", None)) for op in ops] == [
        ("UpdateConfig", "t", {"retention.ms": "1000"}),
        ("DeleteConfig", "0", None),
        ("UpdateConfig", "1", {"barfoo": "bazfoo"}),
        ("UpdateConfig", "2", {"foo": "bar"}),
    ]
    assert ops[1].description == "Delete configs for ConfigResource(type=BROKER, name='0')"


def test_delta_config_write_carries_the_full_map() -> None:
    base = [*config(TOPIC_RESOURCE, "t", "a", "1"), *config(TOPIC_RESOURCE, "t", "b", "2")]
    ops = plan_delta(image_of(base), image_of(base, config(TOPIC_RESOURCE, "t", "b", "3")))
    assert len(ops) == 1 and isinstance(ops[0], WriteConfigs)
    assert ops[0].configs == {"a": "1", "b": "3"}


def test_delta_default_broker_config() -> None:
    ops = plan_delta(image_of(), image_of(config(BROKER_RESOURCE, "", "log.retention.ms", "1")))
    assert len(ops) == 1 and isinstance(ops[0], WriteConfigs)
    assert (ops[0].resource_type, ops[0].resource_name) == (BROKER_RESOURCE, "")


# ---------------------------------------------------------------------------------------------- delta: quotas, SCRAM


def test_delta_quotas_and_scram_collect_users() -> None:
    base = [
        *quota({"user": "alice"}, "producer_byte_rate", 1000.0),
        *quota({"client-id": "c1"}, "consumer_byte_rate", 10.0),
        *quota({"ip": "1.2.3.4"}, "connection_creation_rate", 5.0),
        *scram("bob"),
        *scram("dave"),
    ]
    delta = [
        *quota({"client-id": "c1"}, "consumer_byte_rate", 20.0),
        *quota({"user": "carol", "client-id": "app"}, "request_percentage", 50.0),
        *quota({"ip": "1.2.3.4"}, "connection_creation_rate", 0.0, remove=True),
        *scram("alice", mechanism=2),
        (r.RemoveUserScramCredentialRecord(name="bob", mechanism=1), 0),
        *quota({"user": None}, "producer_byte_rate", 7.0),
    ]
    ops = plan_delta(image_of(base), image_of(base, delta))
    assert all(isinstance(op, WriteClientQuotas) and op.op_type == "UpdateClientQuota" for op in ops)
    written = [(op.entity, op.quotas, sorted(op.scram)) for op in ops if isinstance(op, WriteClientQuotas)]
    assert written == [
        # non-user entities first, each with its quotas only
        ((("client-id", "app"), ("user", "carol")), {"request_percentage": 50.0}, []),
        ((("client-id", "c1"),), {"consumer_byte_rate": 20.0}, []),
        # Kafka would throw here (migration-protocol.md §13 #3); the emptied entity is written empty.
        ((("ip", "1.2.3.4"),), {}, []),
        # then users: user-only quotas plus all SCRAM credentials of the new image
        ((("user", None),), {"producer_byte_rate": 7.0}, []),
        ((("user", "alice"),), {"producer_byte_rate": 1000.0}, [2]),
        ((("user", "bob"),), {}, []),
    ]
    assert (
        ops[0].description == "Updating client quota ClientQuotaEntity(entries={client-id=app, user=carol})"
    )
    assert ops[4].description == "Updating client quota for ClientQuotaEntity(entries={user=alice})"
    assert ops[5].description == "Updating scram credentials for ClientQuotaEntity(entries={user=bob})"


# ---------------------------------------------------------------------------------------------- delta: the rest


def test_delta_producer_id() -> None:
    ops = plan_delta(image_of(producer_ids(1000)), image_of(producer_ids(1000), producer_ids(2000)))
    assert len(ops) == 1 and isinstance(ops[0], WriteProducerId)
    assert (ops[0].op_type, ops[0].next_producer_id, ops[0].description) == (
        "UpdateProducerId",
        2000,
        "Setting next producer ID",
    )


ACL_IDS = [uuid.UUID(int=i) for i in range(10, 20)]


def test_delta_delete_one_acl_of_many() -> None:
    """ZkAclMigrationClientTest.testDeleteOneAclOfMany: removing one of 3 ACLs rewrites the other 2."""
    base = [*acl(ACL_IDS[0], "t", "User:a"), *acl(ACL_IDS[1], "t", "User:b"), *acl(ACL_IDS[2], "t", "User:c")]
    ops = plan_delta(image_of(base), image_of(base, [(r.RemoveAccessControlEntryRecord(id=ACL_IDS[1]), 0)]))
    assert len(ops) == 1 and isinstance(ops[0], WriteResourceAcls)
    assert ops[0].pattern == ResourcePatternKey(ResourceType.TOPIC, "t", PatternType.LITERAL)
    assert [a.principal for a in ops[0].acls] == ["User:a", "User:c"]
    assert ops[0].description == (
        "Writing 2 for resource ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)"
    )


def test_delta_acl_update_and_delete() -> None:
    base = [
        *acl(ACL_IDS[0], "lit"),
        *acl(ACL_IDS[1], "pre", pattern_type=PatternType.PREFIXED),
        *acl(ACL_IDS[2], "grp", resource_type=ResourceType.GROUP),
    ]
    delta = [
        (r.RemoveAccessControlEntryRecord(id=ACL_IDS[1]), 0),
        *acl(ACL_IDS[3], "grp", "User:z", resource_type=ResourceType.GROUP),
        *acl(ACL_IDS[4], "new", operation=AclOperation.WRITE),
    ]
    ops = plan_delta(image_of(base), image_of(base, delta))
    assert kinds(ops) == [
        ("WriteResourceAcls", "UpdateAcl"),
        ("DeleteResourceAcls", "DeleteAcl"),
        ("WriteResourceAcls", "UpdateAcl"),
    ]
    new, pre, grp = ops
    assert isinstance(new, WriteResourceAcls) and new.pattern.name == "new"
    assert isinstance(pre, DeleteResourceAcls)
    assert pre.pattern == ResourcePatternKey(ResourceType.TOPIC, "pre", PatternType.PREFIXED)
    assert pre.description.endswith("patternType=PREFIXED) which has no more ACLs")
    assert isinstance(grp, WriteResourceAcls) and len(grp.acls) == 2


def test_delta_delegation_tokens() -> None:
    base = [*token("keep"), *token("renew"), *token("gone")]
    delta = [
        *token("renew", expiration=5000),
        (r.RemoveDelegationTokenRecord(token_id="gone"), 0),
        *token("new"),
    ]
    ops = plan_delta(image_of(base), image_of(base, delta))
    assert [(op.op_type, op.description) for op in ops] == [
        ("DeleteDelegationToken", "Delete DelegationToken for gone"),
        ("UpdateDelegationToken", "Update DelegationToken for new"),
        ("UpdateDelegationToken", "Update DelegationToken for renew"),
    ]
    assert isinstance(ops[2], WriteDelegationToken) and ops[2].token is not None
    assert ops[2].token.expiration_timestamp == 5000


def test_delta_sections_in_kafkas_order() -> None:
    delta = [
        *token("t"),
        *acl(ACL_IDS[0], "x"),
        *producer_ids(5),
        *scram("u"),
        *config(TOPIC_RESOURCE, "bar", "k", "v"),
        *change(BAR, 0, isr=[0, 1]),
    ]
    ops = plan_delta(image_of(IMAGE1_TOPICS), image_of(IMAGE1_TOPICS, delta))
    assert [op.op_type for op in ops] == [
        "UpdatePartition",
        "UpdateConfig",
        "UpdateClientQuota",
        "UpdateProducerId",
        "UpdateAcl",
        "UpdateDelegationToken",
    ]


# ---------------------------------------------------------------------------------------------- snapshot: Kafka's tests


def test_reconcile_snapshot_empty_zk() -> None:
    """KRaftMigrationZkWriterTest.testReconcileSnapshotEmptyZk."""
    image = image_of(
        IMAGE1_TOPICS,
        config(BROKER_RESOURCE, "0", "foo", "bar"),
        config(BROKER_RESOURCE, "0", "baz", "quux"),
        config(BROKER_RESOURCE, "1", "foobar", "foobaz"),
        producer_ids(789),
        acl(ACL_IDS[0], "foo"),
        acl(ACL_IDS[1], "foo", pattern_type=PatternType.PREFIXED),
        acl(ACL_IDS[2], "bar", resource_type=ResourceType.GROUP),
        acl(ACL_IDS[3], "kafka-cluster", resource_type=ResourceType.CLUSTER),
    )
    ops = plan_reconciliation(image, ZkClusterModel())
    assert (
        format_op_counts(count_op_types(ops))
        == "{CreateTopic=2, UpdateAcl=4, UpdateBrokerConfig=2, UpdateProducerId=1}"
    )
    assert sorted(op.name for op in ops if isinstance(op, CreateTopic)) == ["bar", "foo"]
    written = {op.resource_name: op.configs for op in ops if isinstance(op, WriteConfigs)}
    assert written == {"0": {"foo": "bar", "baz": "quux"}, "1": {"foobar": "foobaz"}}
    assert [op.description for op in ops if isinstance(op, WriteConfigs)] == [
        "Create configs for BROKER 0",
        "Create configs for BROKER 1",
    ]


def test_reconcile_snapshot_topics() -> None:
    """KRaftMigrationZkWriterTest.testReconcileSnapshotTopics: ZooKeeper's foo has no partitions."""
    image = image_of(IMAGE1_TOPICS)
    zk = ZkClusterModel(topics={"foo": Topic(name="foo", topic_id=FOO, partitions={})})
    ops = plan_reconciliation(image, zk)
    assert count_op_types(ops) == {"CreateTopic": 1, "UpdatePartition": 1, "UpdateTopic": 1}
    create, update, new_partitions = ops
    assert isinstance(create, CreateTopic) and create.name == "bar"
    assert (
        isinstance(update, UpdateTopic)
        and update.description == "Changed Topic foo, ID ThIaNwRnSM2Nt9Mx1v0RvA"
    )
    assert isinstance(new_partitions, UpdateTopicPartitions)
    assert {t: list(ps) for t, ps in new_partitions.partitions.items()} == {"foo": [0, 1, 2]}
    assert (
        new_partitions.description
        == "Creating additional partitions for Topic foo, ID ThIaNwRnSM2Nt9Mx1v0RvA"
    )


def test_extraneous_zk_partitions() -> None:
    """KRaftMigrationZkWriterTest.testExtraneousZkPartitions: ZooKeeper has 0, 2, 3; KRaft has 0, 1, 2."""
    image = image_of(IMAGE1_TOPICS)
    foo = zk_topic_from(image, "foo", [0, 2])
    foo.partitions[3] = [1, 2, 3]
    foo.states[3] = PartitionState(leader=1, leader_epoch=0, isr=[1, 2, 3], controller_epoch=1)
    zk = ZkClusterModel(topics={"foo": foo, "bar": zk_topic_from(image, "bar")})
    ops = plan_reconciliation(image, zk)
    assert kinds(ops) == [
        ("UpdateTopic", "UpdateTopic"),
        ("UpdateTopicPartitions", "UpdatePartition"),
        ("DeleteTopicPartitions", "DeletePartition"),
    ]
    update, created, deleted = ops
    assert isinstance(update, UpdateTopic) and len(update.partitions) == 3
    assert isinstance(created, UpdateTopicPartitions) and list(created.partitions["foo"]) == [1]
    assert isinstance(deleted, DeleteTopicPartitions) and deleted.partitions == {"foo": (3,)}
    assert deleted.description == "Deleting extraneous Partitions [3] for Topic foo"


def test_topic_dual_write_snapshot() -> None:
    """KRaftMigrationDriverTest.testTopicDualWriteSnapshot: ZooKeeper holds IMAGE1, the snapshot is IMAGE2."""
    previous = image_of(IMAGE1_TOPICS)
    zk = ZkClusterModel(topics={name: zk_topic_from(previous, name) for name in ("foo", "bar")})
    zk.topic_configs = {name: EntityConfig("topics", name, {}) for name in ("foo", "bar")}
    ops = plan_reconciliation(image_of(IMAGE1_TOPICS, DELTA1_TOPICS), zk)
    assert kinds(ops) == [
        ("CreateTopic", "CreateTopic"),
        ("DeleteTopic", "DeleteTopic"),
        ("DeleteConfigs", "UpdateTopicConfig"),
        ("UpdateTopicPartitions", "UpdatePartition"),
    ]
    create, delete, delete_config, update = ops
    assert isinstance(create, CreateTopic) and create.name == "baz"
    assert isinstance(delete, DeleteTopic) and delete.name == "foo"
    assert isinstance(delete_config, DeleteConfigs) and delete_config.resource_name == "foo"
    assert delete_config.description == "Updating Configs for Topic foo, ID ThIaNwRnSM2Nt9Mx1v0RvA"
    assert isinstance(update, UpdateTopicPartitions) and list(update.partitions["bar"]) == [0]


def test_snapshot_ignores_directories_zookeeper_cannot_hold() -> None:
    """Brokers that registered log directories give new replicas real directories; ZooKeeper's partitions
    have none, so they are no difference (Kafka 3.9 rewrites such topics at every full sync)."""
    directory = uuid.UUID(int=77)
    image = image_of(
        IMAGE1_TOPICS, change(FOO, 1, directories=[directory, MIGRATING_DIRECTORY, MIGRATING_DIRECTORY])
    )
    zk = ZkClusterModel(topics={name: zk_topic_from(image, name) for name in ("foo", "bar")})
    assert plan_reconciliation(image, zk) == []
    zk.topics["foo"].partitions[1] = [9, 8, 7]  # a replica change is still one
    assert kinds(plan_reconciliation(image, zk)) == [
        ("UpdateTopic", "UpdateTopic"),
        ("UpdateTopicPartitions", "UpdatePartition"),
    ]


def test_pending_topic_deletions_are_cleared_and_not_reconciled() -> None:
    image = image_of(IMAGE1_TOPICS)
    zk = ZkClusterModel(
        topics={name: zk_topic_from(image, name) for name in ("foo", "bar")},
        pending_topic_deletions={"old", "bar"},
    )
    zk.topics["old"] = Topic(name="old", topic_id=uuid.UUID(int=5), partitions={0: [1]})
    ops = plan_reconciliation(image, zk)
    # `bar` is skipped like any pending deletion, so it looks missing and is (idempotently) created.
    assert kinds(ops) == [
        ("ClearPendingTopicDeletions", "DeletePendingTopicDeletion"),
        ("CreateTopic", "CreateTopic"),
    ]
    assert isinstance(ops[0], ClearPendingTopicDeletions) and ops[0].names == ("bar", "old")


def test_zk_topic_without_id_is_reported_with_its_znode() -> None:
    zk = ZkClusterModel(topics={"legacy": Topic(name="legacy", topic_id=None, partitions={0: [1]})})
    with pytest.raises(ZnodeFormatError, match="/brokers/topics/legacy"):
        plan_reconciliation(image_of(), zk)


def test_zk_partition_without_state_is_read_as_kafka_invents_it() -> None:
    zk_topic = Topic(name="t", topic_id=FOO, partitions={0: [3, 1, 2]})
    assert zk_partition_registration(zk_topic, 0) == PartitionRegistration(
        replicas=[3, 1, 2], directories=[MIGRATING_DIRECTORY] * 3, isr=[3, 1, 2], leader=3
    )


# ---------------------------------------------------------------------------------------------- snapshot: the rest


def test_snapshot_configs() -> None:
    image = image_of(
        config(BROKER_RESOURCE, "", "log.retention.ms", "1"),  # equal to ZooKeeper's <default>
        config(BROKER_RESOURCE, "1", "a", "b"),  # only in the image
        config(BROKER_RESOURCE, "2", "a", "new"),  # differs
        config(TOPIC_RESOURCE, "t", "x", "y"),  # equal
        config(16, "metrics", "interval.ms", "5"),  # not a ZooKeeper resource: left out
    )
    zk = ZkClusterModel(
        broker_configs={
            "<default>": EntityConfig("brokers", "<default>", {"log.retention.ms": "1"}),
            "2": EntityConfig("brokers", "2", {"a": "old"}),
            "3": EntityConfig("brokers", "3", {"gone": "1"}),
            "4": EntityConfig("brokers", "4", {}),
        },
        topic_configs={
            "t": EntityConfig("topics", "t", {"x": "y"}),
            "orphan": EntityConfig("topics", "orphan", {"k": "v"}),
            "empty": EntityConfig("topics", "empty", {}),
        },
    )
    ops = plan_reconciliation(image, zk)
    assert [(op.op_type, op.description) for op in ops] == [
        ("UpdateBrokerConfig", "Create configs for BROKER 1"),
        ("DeleteTopicConfig", "Delete configs for TOPIC orphan"),
        ("UpdateBrokerConfig", "Update configs for BROKER 2"),
        ("DeleteBrokerConfig", "Delete configs for BROKER 3"),
    ]


def test_scram_and_quota_changes_in_snapshot() -> None:
    """ZkConfigMigrationClientTest.testScramAndQuotaChangesInSnapshot: stale ZooKeeper entries become empty."""
    image = image_of(quota({"user": "user2"}, "producer_byte_rate", 100.0), scram("george"))
    zk = ZkClusterModel(
        client_quotas={
            "users/user1": ClientQuotaConfig("users/user1", quotas={"producer_byte_rate": 50.0}),
            "users/alice": ClientQuotaConfig(
                "users/alice",
                scram={"SCRAM-SHA-256": ZkScramCredential("SCRAM-SHA-256", b"s", b"k", b"v", 4096)},
            ),
        }
    )
    ops = plan_reconciliation(image, zk)
    written = [(op.entity, op.quotas, sorted(op.scram)) for op in ops if isinstance(op, WriteClientQuotas)]
    assert len(written) == len(ops)
    assert written == [
        ((("user", "alice"),), {}, []),
        ((("user", "george"),), {}, [1]),
        ((("user", "user1"),), {}, []),
        ((("user", "user2"),), {"producer_byte_rate": 100.0}, []),
    ]
    assert ops[0].description == "Update client quotas for alice"


def test_snapshot_always_rewrites_image_quota_entities() -> None:
    image = image_of(
        quota({"client-id": "c"}, "consumer_byte_rate", 1.0),
        quota({"ip": None}, "connection_creation_rate", 2.0),
    )
    zk = ZkClusterModel(
        client_quotas={
            "clients/c": ClientQuotaConfig("clients/c", quotas={"consumer_byte_rate": 1.0}),
            "ips/<default>": ClientQuotaConfig("ips/<default>", quotas={"connection_creation_rate": 2.0}),
            "clients/old": ClientQuotaConfig("clients/old", quotas={"consumer_byte_rate": 3.0}),
        }
    )
    ops = plan_reconciliation(image, zk)
    assert [op.entity for op in ops if isinstance(op, WriteClientQuotas)] == [
        (("client-id", "c"),),
        (("client-id", "old"),),
        (("ip", None),),
    ]
    assert ops[1].description == "Update client quotas for ClientQuotaEntity(entries={client-id=old})"


@pytest.mark.parametrize(
    ("block", "image_next", "expected"),
    [
        (None, -1, 0),
        (None, 1000, 1),
        (ProducerIdBlock(1, 0, 999), 1000, 0),
        (ProducerIdBlock(1, 0, 999), 2000, 1),
    ],
)
def test_snapshot_producer_id(block: ProducerIdBlock | None, image_next: int, expected: int) -> None:
    image = image_of(producer_ids(image_next)) if image_next >= 0 else image_of()
    ops = plan_reconciliation(image, ZkClusterModel(producer_id_block=block))
    assert [(type(op), getattr(op, "next_producer_id", None)) for op in ops] == [
        (WriteProducerId, image_next)
    ] * expected


def _zk_acl(name: str, *principals: str) -> tuple[ResourcePattern, AclResource]:
    pattern = ResourcePattern(ResourceType.TOPIC, name, PatternType.LITERAL)
    entries = [AclEntry(p, "*", AclOperation.READ, AclPermissionType.ALLOW) for p in principals]
    return pattern, AclResource(pattern, entries)


def test_acls_changes_in_snapshot() -> None:
    """ZkAclMigrationClientTest.testAclsChangesInSnapshot."""
    image = image_of(
        acl(ACL_IDS[0], "resource1", "User:new"),
        acl(ACL_IDS[1], "resource3", "User:x"),
        acl(ACL_IDS[2], "same", "User:a"),
        acl(ACL_IDS[3], "same", "User:a"),  # a second id with the same entry: one ZooKeeper entry
    )
    zk = ZkClusterModel(
        acls=dict(
            [_zk_acl("resource1", "User:old"), _zk_acl("resource2", "User:y"), _zk_acl("same", "User:a")]
        )
    )
    ops = plan_reconciliation(image, zk)
    assert [(op.op_type, op.pattern.name) for op in ops] == [  # type: ignore[attr-defined]
        ("UpdateAcl", "resource3"),
        ("DeleteAcl", "resource2"),
        ("UpdateAcl", "resource1"),
    ]
    assert isinstance(ops[2], WriteResourceAcls) and [a.principal for a in ops[2].acls] == ["User:new"]
    assert ops[1].description == (
        "Deleting resource ResourcePattern(resourceType=TOPIC, name=resource2, patternType=LITERAL) "
        "which has no ACLs in snapshot"
    )


def test_snapshot_rewrites_every_token_and_deletes_zk_only_ones() -> None:
    zk = ZkClusterModel(
        delegation_tokens={
            tid: DelegationToken(tid, "User:alice", "User:alice", ["User:bob"], 1000, 9000, 2000)
            for tid in ("a", "z")
        }
    )
    ops = plan_reconciliation(image_of(token("a"), token("b")), zk)
    assert [(op.op_type, getattr(op, "token_id", None)) for op in ops] == [
        ("UpdateDelegationToken", None),
        ("UpdateDelegationToken", None),
        ("DeleteDelegationToken", "z"),
    ]
    assert isinstance(ops[2], DeleteDelegationToken)


def _migrated_generated_cluster() -> tuple[MetadataImage, ZkClusterModel]:
    """A generated cluster (quotas on every kind of entity, SCRAM users, tokens) and its migrated image."""
    zk = from_tree(generate(ClusterSpec(topics=2, partitions_per_topic=1)).kafka_tree())
    return image_of(list(translate(zk).records())), zk


def test_full_sync_after_migration_only_rewrites_what_kafka_always_rewrites_and_says_so() -> None:
    image, zk = _migrated_generated_cluster()
    ops = plan_reconciliation(image, zk)
    # KRaftMigrationZkWriter.handleClientQuotasSnapshot / handleDelegationTokenSnapshot: 9 users and 8 other
    # quota entities, 2 tokens, all rewritten although ZooKeeper holds exactly them.
    assert count_op_types(ops) == {"UpdateClientQuota": 17, "UpdateDelegationToken": 2}
    assert [op for op in ops if not op.unchanged] == []
    assert summarize(ops) == (
        "nothing that differs from ZooKeeper; 19 rewrites of what ZooKeeper already holds (Kafka 3.9's full "
        "sync rewrites every client quota entity, SCRAM user and delegation token of the log, and a "
        "dual-written producer-id block, changed or not)"
    )
    assert describe(ops)[-1] == (
        f"UpdateDelegationToken: Update DelegationToken for {sorted(image.delegation_tokens)[-1]} "
        "(unchanged in ZooKeeper, rewritten as Kafka does)"
    )


def test_full_sync_after_migration_tells_real_changes_from_kafkas_rewrites() -> None:
    _migrated, zk = _migrated_generated_cluster()
    image = image_of(list(translate(zk).records()), quota({"client-id": "app-1"}, "producer_byte_rate", 1.0))
    # Foreign edits while no controller ran: a user quota, a SCRAM-only user's credential, a SCRAM mechanism
    # dropped, an IP quota, a token renewed, an entity KRaft does not have.
    zk.client_quotas["users/user-01"].quotas["producer_byte_rate"] = 1.0
    user_02 = zk.client_quotas["users/user-02"].scram
    user_02["SCRAM-SHA-256"] = dataclasses.replace(user_02["SCRAM-SHA-256"], iterations=1)
    del zk.client_quotas["users/user-06"].scram["SCRAM-SHA-512"]
    zk.client_quotas["ips/2001%3Adb8%3A%3A1"].quotas["connection_creation_rate"] = 1.0
    renewed = sorted(zk.delegation_tokens)[0]
    zk.delegation_tokens[renewed].expiry_timestamp += 1
    zk.client_quotas["clients/stale"] = ClientQuotaConfig("clients/stale", quotas={"consumer_byte_rate": 1.0})
    ops = plan_reconciliation(image, zk)
    changed = [op.description for op in ops if not op.unchanged]
    assert changed == [
        "Update client quotas for ClientQuotaEntity(entries={client-id=app-1})",
        "Update client quotas for ClientQuotaEntity(entries={client-id=stale})",
        "Update client quotas for ClientQuotaEntity(entries={ip=2001:db8::1})",
        "Update client quotas for user-01",
        "Update client quotas for user-02",
        "Update client quotas for user-06",
        f"Update DelegationToken for {renewed}",
    ]
    assert len(ops) == 19 + 1  # the stale entity is the only write Kafka adds to its 19 rewrites
    assert summarize(ops).startswith("; ".join(changed[:5]) + "; and 2 more; 13 rewrites of what ZooKeeper")


def test_a_dual_written_producer_id_block_is_rewritten_unchanged() -> None:
    image = image_of(producer_ids(5000))
    (op,) = plan_reconciliation(image, ZkClusterModel(producer_id_block=ProducerIdBlock(-1, 5000, 5999)))
    assert op.unchanged
    (op,) = plan_reconciliation(image, ZkClusterModel(producer_id_block=ProducerIdBlock(1, 3000, 3999)))
    assert not op.unchanged


# ---------------------------------------------------------------------------------------------- the real fixture


@cache
def _fixture_model() -> ZkClusterModel:
    tree, _report = load_data_dir(FIXTURE)
    return from_tree(tree.with_chroot(CHROOT))


@cache
def _fixture_records() -> tuple[tuple[Any, int], ...]:
    return tuple(translate(_fixture_model()).records())


def fixture_model() -> ZkClusterModel:
    return copy.deepcopy(_fixture_model())


def fixture_image(*extra: Records) -> MetadataImage:
    return image_of(list(_fixture_records()), *extra)


def test_unchanged_real_cluster_needs_no_writes() -> None:
    model = fixture_model()
    assert model.topics and model.topic_configs  # the fixture has something to compare
    assert plan_reconciliation(fixture_image(), model) == []


def _a_partition(image: MetadataImage) -> tuple[str, uuid.UUID, int]:
    name = sorted(image.topics_by_name)[0]
    return name, image.topics_by_name[name].topic_id, 0


def test_real_cluster_isr_change_in_kraft() -> None:
    name, topic_id, p = _a_partition(fixture_image())
    replicas = fixture_image().topics_by_id[topic_id].partitions[p].replicas
    image = fixture_image(change(topic_id, p, isr=replicas[:1]))
    ops = plan_reconciliation(image, fixture_model())
    assert kinds(ops) == [("UpdateTopicPartitions", "UpdatePartition")]
    assert isinstance(ops[0], UpdateTopicPartitions)
    assert ops[0].partitions == {name: {p: image.topics_by_id[topic_id].partitions[p]}}


def test_real_cluster_leader_epoch_change_in_zk() -> None:
    image = fixture_image()
    name, _topic_id, p = _a_partition(image)
    model = fixture_model()
    model.topics[name].states[p].leader_epoch += 1
    ops = plan_reconciliation(image, model)
    assert kinds(ops) == [("UpdateTopicPartitions", "UpdatePartition")]


def test_real_cluster_partition_epoch_counts_too() -> None:
    image = fixture_image()
    name, _topic_id, p = _a_partition(image)
    model = fixture_model()
    model.topics[name].states[p].zk_version += 1
    assert kinds(plan_reconciliation(image, model)) == [("UpdateTopicPartitions", "UpdatePartition")]


def test_real_cluster_topic_config_change() -> None:
    model = fixture_model()
    name = sorted(model.topic_configs)[0]
    ops = plan_reconciliation(fixture_image(config(TOPIC_RESOURCE, name, "retention.ms", "1")), model)
    assert [(op.op_type, op.description) for op in ops] == [
        ("UpdateTopicConfig", f"Update configs for TOPIC {name}")
    ]
    assert isinstance(ops[0], WriteConfigs)
    assert ops[0].configs == {**model.topic_configs[name].config, "retention.ms": "1"}


def test_real_cluster_new_quota() -> None:
    ops = plan_reconciliation(
        fixture_image(quota({"client-id": "app"}, "consumer_byte_rate", 5.0)), fixture_model()
    )
    assert kinds(ops) == [("WriteClientQuotas", "UpdateClientQuota")]


def test_real_cluster_new_acl() -> None:
    ops = plan_reconciliation(fixture_image(acl(ACL_IDS[0], "payments")), fixture_model())
    assert kinds(ops) == [("WriteResourceAcls", "UpdateAcl")]


def test_real_cluster_zk_only_token() -> None:
    model = fixture_model()
    model.delegation_tokens["tok"] = DelegationToken("tok", "User:a", "User:a", [], 1, 2, 3)
    ops = plan_reconciliation(fixture_image(), model)
    assert [(op.op_type, getattr(op, "token_id", None)) for op in ops] == [("DeleteDelegationToken", "tok")]


def test_real_cluster_producer_id() -> None:
    ops = plan_reconciliation(fixture_image(producer_ids(4000)), fixture_model())
    assert kinds(ops) == [("WriteProducerId", "UpdateProducerId")]


def test_real_cluster_topic_only_in_kraft() -> None:
    new_id = uuid.UUID(int=999)
    image = fixture_image(
        topic("fresh", new_id), partition(new_id, 0, [1], [1], leader=1, leader_epoch=0, partition_epoch=0)
    )
    ops = plan_reconciliation(image, fixture_model())
    assert kinds(ops) == [("CreateTopic", "CreateTopic")]


def test_real_cluster_topic_only_in_zk() -> None:
    model = fixture_model()
    model.topics["stale"] = Topic(name="stale", topic_id=uuid.UUID(int=998), partitions={0: [1]})
    ops = plan_reconciliation(fixture_image(), model)
    assert kinds(ops) == [("DeleteTopic", "DeleteTopic"), ("DeleteConfigs", "UpdateTopicConfig")]


def test_real_cluster_partition_only_in_kraft() -> None:
    image = fixture_image()
    name, topic_id, _p = _a_partition(image)
    new_p = max(image.topics_by_id[topic_id].partitions) + 1
    image = fixture_image(partition(topic_id, new_p, [1], [1], leader=1, leader_epoch=0, partition_epoch=0))
    ops = plan_reconciliation(image, fixture_model())
    assert kinds(ops) == [("UpdateTopic", "UpdateTopic"), ("UpdateTopicPartitions", "UpdatePartition")]
    assert isinstance(ops[1], UpdateTopicPartitions) and list(ops[1].partitions[name]) == [new_p]


def test_real_cluster_partition_only_in_zk() -> None:
    image = fixture_image()
    name, _topic_id, _p = _a_partition(image)
    model = fixture_model()
    extra = max(model.topics[name].partitions) + 1
    model.topics[name].partitions[extra] = [1]
    ops = plan_reconciliation(image, model)
    # Kafka also submits an (empty, hence no-op) "additional partitions" write whenever the id sets differ.
    assert kinds(ops) == [
        ("UpdateTopic", "UpdateTopic"),
        ("UpdateTopicPartitions", "UpdatePartition"),
        ("DeleteTopicPartitions", "DeletePartition"),
    ]
    assert isinstance(ops[1], UpdateTopicPartitions) and ops[1].partitions == {name: {}}
    assert isinstance(ops[2], DeleteTopicPartitions) and ops[2].partitions == {name: (extra,)}


def test_scram_credential_type_is_the_images() -> None:
    ops = plan_delta(image_of(), image_of(scram("u", mechanism=2, iterations=8192)))
    assert isinstance(ops[0], WriteClientQuotas)
    assert ops[0].scram == {2: ScramCredential(b"salt", b"stored", b"server", 8192)}


def test_snapshot_recreated_topic_name_follows_kafkas_order() -> None:
    """ZooKeeper's `foo` has an old id, KRaft's `foo` a new one: Kafka creates before it deletes.

    Applied literally, the create hits NODEEXISTS (a no-op) and the delete then removes the topic, so ZooKeeper
    ends without `foo`; we keep Kafka's order and say so in bridge.zk.planner's docstring.
    """
    image = image_of(
        topic("foo", BAZ), partition(BAZ, 0, [1], [1], leader=1, leader_epoch=0, partition_epoch=0)
    )
    zk = ZkClusterModel(topics={"foo": Topic(name="foo", topic_id=FOO, partitions={0: [1]})})
    assert [op.op_type for op in plan_reconciliation(image, zk)] == [
        "CreateTopic",
        "DeleteTopic",
        "UpdateTopicConfig",
    ]


def test_dual_written_producer_id_is_rewritten_by_every_full_sync() -> None:
    """Kafka writes the block [next, next+999] but compares ZooKeeper's block_end+1 with the image's next id."""
    image = image_of(producer_ids(5000))
    zk = ZkClusterModel(producer_id_block=ProducerIdBlock(-1, 5000, 5999))
    assert [op.op_type for op in plan_reconciliation(image, zk)] == ["UpdateProducerId"]


# ---------------------------------------------------------------------------------------------- properties
#
# Random small images, a ZooKeeper model "in sync" with an image, and an in-memory ZooKeeper that applies the
# planned operations. Partition-state versions are set to the partition epoch (real ZooKeeper bumps them by
# one per write), and the snapshot's SetData on missing / Delete of non-empty partition znodes is applied
# leniently (real ZooKeeper refuses: migration-protocol.md §13 #4, #5).

TOPIC_IDS = {name: uuid.UUID(int=0xA0 + i) for i, name in enumerate("abc")}
QUOTA_ENTITIES: list[tuple[tuple[str, str | None], ...]] = [
    (("user", "u1"),),
    (("user", None),),
    (("client-id", "c1"),),
    (("client-id", "c1"), ("user", "u1")),
    (("ip", "10.0.0.1"),),
]
CONFIG_RESOURCES = [(BROKER_RESOURCE, ""), (BROKER_RESOURCE, "0"), *((TOPIC_RESOURCE, n) for n in "abc")]


def _partitions() -> Any:
    from hypothesis import strategies as st

    def one(replicas: list[int]) -> Any:
        return st.fixed_dictionaries(
            {
                "replicas": st.just(replicas),
                "isr": st.lists(st.sampled_from(replicas), min_size=1, unique=True),
                "leader_epoch": st.integers(0, 3),
                "partition_epoch": st.integers(0, 3),
                "adding": st.sampled_from([[], replicas[-1:]]),
            }
        )

    replica_lists = st.permutations([1, 2, 3]).flatmap(lambda p: st.integers(1, 3).map(lambda n: list(p[:n])))
    return st.lists(replica_lists.flatmap(one), min_size=1, max_size=3)


def _states() -> Any:
    from hypothesis import strategies as st

    values = st.sampled_from(["1", "2"])
    return st.fixed_dictionaries(
        {
            "topics": st.dictionaries(st.sampled_from("abc"), _partitions(), max_size=3),
            "configs": st.dictionaries(
                st.sampled_from(CONFIG_RESOURCES),
                st.dictionaries(st.sampled_from(["x", "y"]), values),
                max_size=3,
            ),
            "quotas": st.dictionaries(
                st.sampled_from(QUOTA_ENTITIES),
                st.dictionaries(
                    st.sampled_from(["producer_byte_rate", "consumer_byte_rate"]), st.sampled_from([1.0, 2.0])
                ),
                max_size=3,
            ),
            "scram": st.dictionaries(
                st.tuples(st.sampled_from(["u1", "u2"]), st.sampled_from([1, 2])),
                st.sampled_from([4096, 8192]),
            ),
            "acls": st.dictionaries(
                st.integers(0, 5),
                st.tuples(
                    st.sampled_from(["t1", "t2"]),
                    st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]),
                    st.sampled_from(["User:a", "User:b"]),
                ),
            ),
            "tokens": st.dictionaries(st.sampled_from(["k1", "k2"]), st.sampled_from([1, 2])),
            "next_producer_id": st.sampled_from([-1, 1000, 2000]),
        }
    )


def _image_from_state(state: dict[str, Any]) -> MetadataImage:
    records: Records = []
    for name, parts in sorted(state["topics"].items()):
        topic_id = TOPIC_IDS[name]
        records += topic(name, topic_id)
        for p, spec in enumerate(parts):
            records += partition(
                topic_id,
                p,
                spec["replicas"],
                spec["isr"],
                adding=spec["adding"],
                leader=spec["isr"][0],
                leader_epoch=spec["leader_epoch"],
                partition_epoch=spec["partition_epoch"],
            )
    for (resource_type, name), values in state["configs"].items():
        if resource_type == TOPIC_RESOURCE and name not in state["topics"]:
            continue
        for key, value in values.items():
            records += config(resource_type, name, key, value)
    for entity, quota_values in state["quotas"].items():
        for key, amount in quota_values.items():
            records += quota(dict(entity), key, amount)
    for (user, mechanism), iterations in state["scram"].items():
        records += scram(user, mechanism, iterations)
    for n, (name, pattern_type, principal) in state["acls"].items():
        records += acl(uuid.UUID(int=n + 1), name, principal, pattern_type=pattern_type)
    for token_id, expiration in state["tokens"].items():
        records += token(token_id, expiration)
    if state["next_producer_id"] >= 0:
        records += producer_ids(state["next_producer_id"])
    return image_of(records)


def _entity_path(entity: tuple[tuple[str, str | None], ...]) -> str:
    names = {t: "<default>" if n is None else n for t, n in entity}
    if "user" in names and "client-id" in names:
        return f"users/{names['user']}/clients/{names['client-id']}"
    kind, name = next(iter(names.items()))
    return {"user": "users", "client-id": "clients", "ip": "ips"}[kind] + "/" + name


def _zk_scram(mechanism: int, cred: ScramCredential) -> ZkScramCredential:
    name = "SCRAM-SHA-256" if mechanism == 1 else "SCRAM-SHA-512"
    return ZkScramCredential(name, cred.salt, cred.stored_key, cred.server_key, cred.iterations)


def _zk_state(reg: PartitionRegistration) -> PartitionState:
    return PartitionState(
        leader=reg.leader,
        leader_epoch=reg.leader_epoch,
        isr=list(reg.isr),
        controller_epoch=1,
        leader_recovery_state=reg.leader_recovery_state,
        zk_version=reg.partition_epoch,
    )


def _zk_in_sync_with(image: MetadataImage) -> ZkClusterModel:
    """What ZooKeeper holds when it matches `image` (as Kafka's migration would read it back)."""
    zk = ZkClusterModel()
    for name in image.topics_by_name:
        zk.topics[name] = zk_topic_from(image, name)
        zk.topic_configs[name] = EntityConfig(
            "topics", name, dict(image.configs.get((TOPIC_RESOURCE, name), {}))
        )
    for (resource_type, name), values in image.configs.items():
        if resource_type == BROKER_RESOURCE:
            zk_name = name or "<default>"
            zk.broker_configs[zk_name] = EntityConfig("brokers", zk_name, dict(values))
    for entity, amounts in image.client_quotas.items():
        path = _entity_path(entity)
        zk.client_quotas[path] = ClientQuotaConfig(path, quotas=dict(amounts))
    for (user, mechanism), cred in image.scram.items():
        path = _entity_path(((USER, user),))
        zk.client_quotas.setdefault(path, ClientQuotaConfig(path)).scram[
            _zk_scram(mechanism, cred).mechanism
        ] = _zk_scram(mechanism, cred)
    for acl_binding in image.acls.values():
        pattern = ResourcePattern(
            ResourceType(acl_binding.resource_type),
            acl_binding.resource_name,
            PatternType(acl_binding.pattern_type),
        )
        entry = AclEntry(
            acl_binding.principal,
            acl_binding.host,
            AclOperation(acl_binding.operation),
            AclPermissionType(acl_binding.permission_type),
        )
        resource = zk.acls.setdefault(pattern, AclResource(pattern, []))
        if entry not in resource.acls:
            resource.acls.append(entry)
    for token_id, t in image.delegation_tokens.items():
        zk.delegation_tokens[token_id] = DelegationToken(
            token_id,
            t.owner,
            t.requester,
            list(t.renewers),
            t.issue_timestamp,
            t.max_timestamp,
            t.expiration_timestamp,
        )
    if image.next_producer_id >= 0:
        zk.producer_id_block = ProducerIdBlock(-1, image.next_producer_id - 1000, image.next_producer_id - 1)
    return zk


USER = "user"


def _apply(ops: list[ZkOperation], zk: ZkClusterModel) -> None:
    """Apply planned operations to an in-memory ZooKeeper (Kafka's ZooKeeper effect, §7.2)."""
    for op in ops:
        if isinstance(op, CreateTopic):
            if op.name in zk.topics:
                continue  # NODEEXISTS: Kafka returns without writing anything
            zk.topics[op.name] = Topic(op.name, op.topic_id, {})
            zk.topic_configs[op.name] = EntityConfig("topics", op.name, {})
            _write_partitions(zk.topics[op.name], op.partitions, assignment=True)
        elif isinstance(op, UpdateTopic):
            t = zk.topics[op.name]
            t.topic_id = op.topic_id
            t.partitions = {p: list(reg.replicas) for p, reg in op.partitions.items()}
            t.adding_replicas = {
                p: list(reg.adding_replicas) for p, reg in op.partitions.items() if reg.adding_replicas
            }
            t.removing_replicas = {
                p: list(reg.removing_replicas) for p, reg in op.partitions.items() if reg.removing_replicas
            }
        elif isinstance(op, DeleteTopic):
            zk.topics.pop(op.name, None)
            zk.topic_configs.pop(op.name, None)
        elif isinstance(op, ClearPendingTopicDeletions):
            zk.pending_topic_deletions -= set(op.names)
        elif isinstance(op, CreateTopicPartitions | UpdateTopicPartitions):
            for name, parts in op.partitions.items():
                _write_partitions(zk.topics[name], parts, assignment=False)
        elif isinstance(op, DeleteTopicPartitions):
            for name, ids in op.partitions.items():
                for p in ids:
                    zk.topics[name].partitions.pop(p, None)
                    zk.topics[name].states.pop(p, None)
        elif isinstance(op, WriteConfigs):
            target = zk.broker_configs if op.resource_type == BROKER_RESOURCE else zk.topic_configs
            zk_name = (
                op.resource_name or "<default>" if op.resource_type == BROKER_RESOURCE else op.resource_name
            )
            target[zk_name] = EntityConfig("", zk_name, dict(op.configs))
        elif isinstance(op, DeleteConfigs):
            target = zk.broker_configs if op.resource_type == BROKER_RESOURCE else zk.topic_configs
            target.pop(
                op.resource_name or "<default>" if op.resource_type == BROKER_RESOURCE else op.resource_name,
                None,
            )
        elif isinstance(op, WriteClientQuotas):
            path = _entity_path(op.entity)
            zk.client_quotas[path] = ClientQuotaConfig(
                path,
                quotas=dict(op.quotas),
                scram={c.mechanism: c for c in (_zk_scram(m, s) for m, s in op.scram.items())},
            )
        elif isinstance(op, WriteProducerId):
            zk.producer_id_block = ProducerIdBlock(-1, op.next_producer_id, op.next_producer_id + 999)
        elif isinstance(op, WriteResourceAcls | DeleteResourceAcls):
            pattern = ResourcePattern(
                ResourceType(op.pattern.resource_type), op.pattern.name, PatternType(op.pattern.pattern_type)
            )
            zk.acls.pop(pattern, None)
            if isinstance(op, WriteResourceAcls):
                entries = [
                    AclEntry(
                        a.principal, a.host, AclOperation(a.operation), AclPermissionType(a.permission_type)
                    )
                    for a in op.acls
                ]
                zk.acls[pattern] = AclResource(pattern, entries)
        elif isinstance(op, WriteDelegationToken):
            assert op.token is not None
            tok = op.token
            zk.delegation_tokens[tok.token_id] = DelegationToken(
                tok.token_id,
                tok.owner,
                tok.requester,
                list(tok.renewers),
                tok.issue_timestamp,
                tok.max_timestamp,
                tok.expiration_timestamp,
            )
        elif isinstance(op, DeleteDelegationToken):
            zk.delegation_tokens.pop(op.token_id, None)
        else:
            raise AssertionError(f"unexpected operation {op}")


def _write_partitions(t: Topic, parts: dict[int, PartitionRegistration], *, assignment: bool) -> None:
    for p, reg in parts.items():
        if assignment:
            t.partitions[p] = list(reg.replicas)
            if reg.adding_replicas:
                t.adding_replicas[p] = list(reg.adding_replicas)
            if reg.removing_replicas:
                t.removing_replicas[p] = list(reg.removing_replicas)
        t.states[p] = _zk_state(reg)


def _comparable(zk: ZkClusterModel) -> dict[str, Any]:
    """The parts of a ZooKeeper model the dual-write keeps equal to KRaft, empty znodes ignored."""
    return {
        "topics": {
            n: (t.topic_id, t.partitions, t.adding_replicas, t.removing_replicas, t.states)
            for n, t in zk.topics.items()
        },
        "topic_configs": {n: c.config for n, c in zk.topic_configs.items() if c.config},
        "broker_configs": {n: c.config for n, c in zk.broker_configs.items() if c.config},
        "quotas": {p: (q.quotas, q.scram) for p, q in zk.client_quotas.items() if q.quotas or q.scram},
        "acls": {
            p: {(e.principal, e.host, e.operation, e.permission_type) for e in a.acls}
            for p, a in zk.acls.items()
            if a.acls
        },
        "tokens": zk.delegation_tokens,
    }


def _always_rewritten(image: MetadataImage) -> int:
    """Operations every full sync submits: image quota entities (users merged with SCRAM) and tokens."""
    users = {dict(e)[USER] for e in image.client_quotas if USER in dict(e) and "client-id" not in dict(e)}
    users |= {user for user, _m in image.scram}
    others = [e for e in image.client_quotas if not (USER in dict(e) and "client-id" not in dict(e))]
    return len(users) + len(others) + len(image.delegation_tokens)


def _property_settings() -> Any:
    from hypothesis import HealthCheck, settings

    return settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _given_two_states() -> Any:
    from hypothesis import given

    return given(_states(), _states())


@_property_settings()
@_given_two_states()
def test_delta_plan_brings_zookeeper_from_previous_to_current(
    prev_state: dict[str, Any], cur_state: dict[str, Any]
) -> None:
    from hypothesis import assume

    # KRaft never takes back a producer id block or a partition.
    assume(not (prev_state["next_producer_id"] >= 0 and cur_state["next_producer_id"] < 0))
    assume(
        all(len(parts) <= len(cur_state["topics"].get(n, parts)) for n, parts in prev_state["topics"].items())
    )
    previous, current = _image_from_state(prev_state), _image_from_state(cur_state)
    ops = plan_delta(previous, current)
    assert ops == plan_delta(previous, current)
    assert plan_delta(current, current) == []
    zk = _zk_in_sync_with(previous)
    _apply(ops, zk)
    assert _comparable(zk) == _comparable(_zk_in_sync_with(current))
    if current.next_producer_id != previous.next_producer_id:
        assert (
            zk.producer_id_block is not None and zk.producer_id_block.block_start == current.next_producer_id
        )
    # Only what differs is touched.
    changed_topics = {
        n
        for n in previous.topics_by_name.keys() | current.topics_by_name.keys()
        if previous.topics_by_name.get(n) != current.topics_by_name.get(n)
    }
    touched = {op.name for op in ops if isinstance(op, CreateTopic | UpdateTopic | DeleteTopic)}
    touched |= {
        n
        for op in ops
        if isinstance(op, CreateTopicPartitions | UpdateTopicPartitions)
        for n in op.partitions
    }
    assert touched <= changed_topics


@_property_settings()
@_given_two_states()
def test_reconciliation_makes_zookeeper_equal_to_the_image(
    prev_state: dict[str, Any], cur_state: dict[str, Any]
) -> None:
    previous, current = _image_from_state(prev_state), _image_from_state(cur_state)
    in_sync = _zk_in_sync_with(current)
    rewrites = plan_reconciliation(current, in_sync)
    assert len(rewrites) == _always_rewritten(current)
    assert all(op.unchanged for op in rewrites)
    zk = _zk_in_sync_with(previous)
    ops = plan_reconciliation(current, zk)
    assert ops == plan_reconciliation(current, copy.deepcopy(_zk_in_sync_with(previous)))
    _apply(ops, zk)
    assert _comparable(zk) == _comparable(in_sync)
    assert all(op.unchanged for op in plan_reconciliation(current, zk))


SMALL_LISTS = st.lists(st.integers(0, 2), max_size=3)


@settings(max_examples=400, deadline=None)
@given(
    replicas=SMALL_LISTS,
    isr=SMALL_LISTS,
    leader=st.integers(-1, 2),
    epochs=st.tuples(st.integers(0, 1), st.integers(0, 1)),
    recovery=st.integers(0, 1),
    moving=st.tuples(SMALL_LISTS, SMALL_LISTS),
    elr=SMALL_LISTS,
    data=st.data(),
)
def test_the_quick_partition_comparison_says_equal_only_when_the_whole_registrations_are(
    replicas: list[int],
    isr: list[int],
    leader: int,
    epochs: tuple[int, int],
    recovery: int,
    moving: tuple[list[int], list[int]],
    elr: list[int],
    data: st.DataObject,
) -> None:
    zk_topic = Topic(
        "t",
        uuid.UUID(int=1),
        {0: replicas},
        {0: moving[0]} if moving[0] else {},
        {0: moving[1]} if moving[1] else {},
        3,
    )
    if data.draw(st.booleans()):
        zk_topic.states[0] = PartitionState(leader, epochs[0], isr, 1, recovery, epochs[1])
    kraft = PartitionRegistration(
        replicas=data.draw(st.sampled_from([replicas, replicas[::-1]])),
        directories=[MIGRATING_DIRECTORY] * len(replicas),
        isr=data.draw(st.sampled_from([isr, replicas])),
        removing_replicas=data.draw(st.sampled_from([moving[1], []])),
        adding_replicas=data.draw(st.sampled_from([moving[0], []])),
        leader=data.draw(st.sampled_from([leader, -1])),
        leader_recovery_state=recovery,
        leader_epoch=epochs[0],
        partition_epoch=epochs[1],
        elr=data.draw(st.sampled_from([[], elr])),
    )
    in_zk = zk_partition_registration(zk_topic, 0)
    in_zk.directories = list(kraft.directories)
    if equals_zk_state(kraft, zk_topic, 0):
        assert kraft == in_zk
    elif 0 in zk_topic.states:
        assert kraft != in_zk
