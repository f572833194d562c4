"""The redirect shim end to end with real parts: real ZooKeeper seeded with Kafka 3.5's real cluster, the bridge
controller in DUAL_WRITE (serving its log with Fetch), one shim, and confluent-kafka's AdminClient (librdkafka)
talking only to the shim. After each admin call the change is in the controller's image and log, and in
ZooKeeper in Kafka's formats."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import ElectionType, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kazoo.client import KazooClient

from bridge.controller import BridgeController
from bridge.shim.server import ShimServer
from migrate.kraft.reader import load_image
from migrate.zk.cluster import from_tree
from migrate.zk.live import read_tree
from migrate.zk.model import ZkClusterModel
from tests.support.bridge import (
    SHIM_ID,
    TIMEOUT,
    result,
)

pytestmark = pytest.mark.zookeeper


@pytest.fixture
def admin(shim: ShimServer) -> AdminClient:
    return AdminClient({"bootstrap.servers": f"127.0.0.1:{shim.port}", "socket.timeout.ms": 20000})


def zk_model(zk_connect: str) -> ZkClusterModel:
    return from_tree(read_tree(zk_connect, acls=False))


# ---------------------------------------------------------------------------------------------- topics


def test_list_topics_shows_the_cluster_through_the_shim(
    admin: AdminClient, bridge: BridgeController, shim: ShimServer
) -> None:
    metadata = admin.list_topics(timeout=TIMEOUT)
    assert bridge.log is not None
    image = bridge.log.image
    assert set(metadata.topics) == set(image.topics_by_name)
    # The shim, and the brokers it answers for (at its own address): every broker holding a replica.
    replicas = {r for t in image.topics_by_name.values() for p in t.partitions.values() for r in p.replicas}
    assert set(metadata.brokers) == {SHIM_ID} | replicas
    assert {(b.host, b.port) for b in metadata.brokers.values()} == {("127.0.0.1", shim.port)}
    assert metadata.controller_id == SHIM_ID
    for name, topic in image.topics_by_name.items():
        listed = metadata.topics[name]
        assert set(listed.partitions) == set(topic.partitions)
        for index, partition in topic.partitions.items():
            assert listed.partitions[index].leader == partition.leader
            assert listed.partitions[index].replicas == partition.replicas
            assert listed.partitions[index].isrs == partition.isr


def test_create_topics_with_configs_and_assignment(
    admin: AdminClient, bridge: BridgeController, zk_connect: str
) -> None:
    brokers = sorted(zk_model(zk_connect).brokers)
    topics = [
        NewTopic(
            "shim-configs", num_partitions=3, replication_factor=1, config={"cleanup.policy": "compact"}
        ),
        NewTopic(
            "shim-assigned",
            num_partitions=2,
            replication_factor=-1,
            replica_assignment=[[brokers[0], brokers[1]], [brokers[1], brokers[0]]],
        ),
    ]
    result(admin.create_topics(topics, operation_timeout=TIMEOUT, request_timeout=TIMEOUT))
    assert bridge.log is not None
    image = bridge.log.image
    assert len(image.topics_by_name["shim-configs"].partitions) == 3
    assert image.configs[(2, "shim-configs")] == {"cleanup.policy": "compact"}
    assigned = image.topics_by_name["shim-assigned"].partitions
    assert [assigned[0].replicas, assigned[1].replicas] == [
        [brokers[0], brokers[1]],
        [brokers[1], brokers[0]],
    ]
    on_disk, _ = load_image(bridge.config.metadata_dir)
    assert set(on_disk.topics_by_name) >= {"shim-configs", "shim-assigned"}
    model = zk_model(zk_connect)
    assert model.topics["shim-configs"].topic_id == image.topics_by_name["shim-configs"].topic_id
    assert len(model.topics["shim-configs"].partitions) == 3
    assert model.topic_configs["shim-configs"].config == {"cleanup.policy": "compact"}
    assert model.topics["shim-assigned"].partitions[0] == [brokers[0], brokers[1]]
    # Read-after-write through the same shim: the new topics are listed at once.
    assert {"shim-configs", "shim-assigned"} <= set(admin.list_topics(timeout=TIMEOUT).topics)


def test_create_partitions_and_delete_topics(
    admin: AdminClient, bridge: BridgeController, zk_connect: str
) -> None:
    result(
        admin.create_topics(
            [NewTopic("shim-grow", num_partitions=1, replication_factor=1)], operation_timeout=TIMEOUT
        )
    )
    result(admin.create_partitions([NewPartitions("shim-grow", 4)], operation_timeout=TIMEOUT))
    assert bridge.log is not None
    assert len(bridge.log.image.topics_by_name["shim-grow"].partitions) == 4
    assert len(zk_model(zk_connect).topics["shim-grow"].partitions) == 4
    assert len(admin.list_topics(topic="shim-grow", timeout=TIMEOUT).topics["shim-grow"].partitions) == 4

    result(admin.delete_topics(["shim-grow"], operation_timeout=TIMEOUT))
    assert "shim-grow" not in bridge.log.image.topics_by_name
    model = zk_model(zk_connect)
    # Kafka's migration deletes the topic znodes (or queues them under /admin/delete_topics).
    assert "shim-grow" not in model.topics or "shim-grow" in model.pending_deletions
    assert "shim-grow" not in admin.list_topics(timeout=TIMEOUT).topics


def test_create_topic_errors_are_relayed(admin: AdminClient) -> None:
    existing = next(iter(admin.list_topics(timeout=TIMEOUT).topics))
    futures = admin.create_topics([NewTopic(existing, num_partitions=1, replication_factor=1)])
    with pytest.raises(KafkaException) as raised:
        futures[existing].result(timeout=TIMEOUT)
    assert raised.value.args[0].name() == "TOPIC_ALREADY_EXISTS"


# ---------------------------------------------------------------------------------------------- configs


def test_alter_and_describe_configs(admin: AdminClient, bridge: BridgeController, zk_connect: str) -> None:
    result(
        admin.create_topics(
            [NewTopic("shim-cfg", num_partitions=1, replication_factor=1)], operation_timeout=TIMEOUT
        )
    )
    topic = ConfigResource(ResourceType.TOPIC, "shim-cfg", set_config={"retention.ms": "3600000"})
    result(admin.alter_configs([topic]))
    assert bridge.log is not None
    assert bridge.log.image.configs[(2, "shim-cfg")] == {"retention.ms": "3600000"}
    assert zk_model(zk_connect).topic_configs["shim-cfg"].config == {"retention.ms": "3600000"}

    def incremental(op: AlterConfigOpType, name: str, value: str | None) -> None:
        # librdkafka allows one operation per key and request.
        entry = ConfigEntry(name, value, incremental_operation=op)
        result(
            admin.incremental_alter_configs(
                [ConfigResource(ResourceType.TOPIC, "shim-cfg", incremental_configs=[entry])]
            )
        )

    incremental(AlterConfigOpType.SET, "cleanup.policy", "compact")
    incremental(AlterConfigOpType.DELETE, "retention.ms", None)
    incremental(AlterConfigOpType.APPEND, "cleanup.policy", "delete")
    assert bridge.log.image.configs[(2, "shim-cfg")] == {"cleanup.policy": "compact,delete"}
    assert zk_model(zk_connect).topic_configs["shim-cfg"].config == {"cleanup.policy": "compact,delete"}
    incremental(AlterConfigOpType.SUBTRACT, "cleanup.policy", "delete")
    assert bridge.log.image.configs[(2, "shim-cfg")] == {"cleanup.policy": "compact"}
    assert zk_model(zk_connect).topic_configs["shim-cfg"].config == {"cleanup.policy": "compact"}

    described = result(admin.describe_configs([ConfigResource(ResourceType.TOPIC, "shim-cfg")]))
    (entries,) = described.values()
    assert entries["cleanup.policy"].value == "compact"
    assert entries["cleanup.policy"].source == 1  # DYNAMIC_TOPIC_CONFIG
    assert entries["retention.ms"].value == "604800000" and entries["retention.ms"].is_default


# ---------------------------------------------------------------------------------------------- ACLs


def test_create_describe_delete_acls(
    admin: AdminClient, bridge: BridgeController, zk_connect: str, zk_client: KazooClient
) -> None:
    # A cluster that uses ACLs runs an authorizer, whose start-up creates the ACL store paths
    # (KafkaZkClient.createAclPaths); the fixture cluster never had one.
    for resource_type in ("Topic", "Group", "Cluster", "TransactionalId", "DelegationToken", "User"):
        zk_client.ensure_path(f"/kafka-acl/{resource_type}")
        zk_client.ensure_path(f"/kafka-acl-extended/prefixed/{resource_type}")
    zk_client.ensure_path("/kafka-acl-changes")
    zk_client.ensure_path("/kafka-acl-extended-changes")
    binding = AclBinding(
        ResourceType.TOPIC, "shim-acl-", ResourcePatternType.PREFIXED, "User:alice", "*",
        AclOperation.READ, AclPermissionType.ALLOW,
    )  # fmt: skip
    result(admin.create_acls([binding]))
    assert bridge.log is not None
    assert any(
        a.resource_name == "shim-acl-" and a.principal == "User:alice" for a in bridge.log.image.acls.values()
    )
    model = zk_model(zk_connect)
    assert any(resource.name == "shim-acl-" for resource in model.acls)

    query = AclBindingFilter(
        ResourceType.TOPIC, "shim-acl-", ResourcePatternType.PREFIXED, None, None,
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    described = admin.describe_acls(query).result(timeout=TIMEOUT)
    assert described == [binding]

    deleted = result(admin.delete_acls([query]))
    assert list(deleted.values()) == [[binding]]
    assert not any(a.resource_name == "shim-acl-" for a in bridge.log.image.acls.values())
    assert not any(resource.name == "shim-acl-" for resource in zk_model(zk_connect).acls)
    assert admin.describe_acls(query).result(timeout=TIMEOUT) == []


# ---------------------------------------------------------------------------------------------- SCRAM


def test_alter_and_describe_scram_credentials(
    admin: AdminClient, bridge: BridgeController, zk_connect: str
) -> None:
    user = f"shim-user-{uuid.uuid4().hex[:6]}"
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192)
    result(
        admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion(user, info, b"secret", b"salt-salt")]
        )
    )
    assert bridge.log is not None
    assert bridge.log.image.scram[(user, 1)].iterations == 8192
    stored = zk_model(zk_connect).client_quotas
    assert any(user in path for path in stored)

    described = result(admin.describe_user_scram_credentials([user]))
    assert [(c.mechanism, c.iterations) for c in described[user].scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_256, 8192)
    ]
    result(
        admin.alter_user_scram_credentials([UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)])
    )
    assert (user, 1) not in bridge.log.image.scram
    with pytest.raises(KafkaException) as raised:
        result(admin.describe_user_scram_credentials([user]))
    assert raised.value.args[0].name() == "RESOURCE_NOT_FOUND"


def test_broker_configs_reach_the_broker_the_client_names(
    admin: AdminClient, bridge: BridgeController, zk_connect: str
) -> None:
    # librdkafka sends a BROKER resource's request to that broker id: the shim answers for it.
    entry = ConfigEntry("message.max.bytes", "2000000", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[entry])
    result(admin.incremental_alter_configs([resource], request_timeout=15))
    assert bridge.log is not None
    assert bridge.log.image.configs[(4, "1")] == {"message.max.bytes": "2000000"}
    assert zk_model(zk_connect).broker_configs["1"].config == {"message.max.bytes": "2000000"}
    described = result(admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")], request_timeout=15))
    (entries,) = described.values()
    assert entries["message.max.bytes"].value == "2000000"


# ---------------------------------------------------------------------------------------------- elections


def test_elect_leaders_preferred_and_unclean_through_the_shim(
    admin: AdminClient, bridge: BridgeController, zk_client: KazooClient
) -> None:
    assert bridge.log is not None
    # The real cluster has one partition led by its second replica, both replicas in sync.
    topic, index = next(
        (t.name, p)
        for t in bridge.log.image.topics_by_name.values()
        for p, partition in t.partitions.items()
        if partition.replicas == [2, 1] and partition.leader == 1
    )
    before = bridge.log.image.topics_by_name[topic].partitions[index]
    wanted = TopicPartition(topic, index)
    outcome = admin.elect_leaders(ElectionType.PREFERRED, [wanted]).result(timeout=TIMEOUT)
    assert {(tp.topic, tp.partition): error for tp, error in outcome.items()} == {(topic, index): None}
    after = bridge.log.image.topics_by_name[topic].partitions[index]
    assert (after.leader, after.leader_epoch) == (2, before.leader_epoch + 1)
    state, _ = zk_client.get(f"/brokers/topics/{topic}/partitions/{index}/state")
    assert json.loads(state)["leader"] == 2

    # Asked again, or uncleanly while it has a leader: nothing to do, and nothing written.
    for election in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        errors = list(admin.elect_leaders(election, [wanted]).result(timeout=TIMEOUT).values())
        assert [e.code() for e in errors] == [KafkaError.ELECTION_NOT_NEEDED], election
    assert bridge.log.image.topics_by_name[topic].partitions[index] == after


def test_partition_reassignment_through_the_shim_with_kafka_python(
    shim: ShimServer, bridge: BridgeController, zk_client: KazooClient
) -> None:
    # confluent-kafka (librdkafka) has no partition-reassignment API; kafka-python's admin client drives it.
    from kafka import TopicPartition as KafkaTopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.errors import NoReassignmentInProgressError

    assert bridge.log is not None
    admin = KafkaAdminClient(
        bootstrap_servers=f"127.0.0.1:{shim.port}", request_timeout_ms=int(TIMEOUT * 1000)
    )
    try:
        wanted = KafkaTopicPartition("current_stock", 0)  # [2, 1], led by 1, both in sync
        assert admin.alter_partition_reassignments({wanted: [3, 2]}) == {wanted: None}
        ongoing = {"replicas": [3, 2, 1], "adding_replicas": [3], "removing_replicas": [1]}
        assert admin.list_partition_reassignments() == {wanted: ongoing}
        assert admin.list_partition_reassignments({"current_stock": [0, 1]}) == {wanted: ongoing}
        topic = json.loads(zk_client.get("/brokers/topics/current_stock")[0])
        assert (topic["adding_replicas"], topic["removing_replicas"]) == ({"0": [3]}, {"0": [1]})

        assert admin.alter_partition_reassignments({wanted: None}) == {wanted: None}
        assert admin.list_partition_reassignments() == {}
        partition = bridge.log.image.topics_by_name["current_stock"].partitions[0]
        assert (partition.replicas, partition.adding_replicas, partition.removing_replicas) == (
            [2, 1],
            [],
            [],
        )
        topic = json.loads(zk_client.get("/brokers/topics/current_stock")[0])
        assert (topic["partitions"]["0"], topic["adding_replicas"], topic["removing_replicas"]) == (
            [2, 1],
            {},
            {},
        )
        # Nothing left to cancel: Kafka's error, per partition.
        assert admin.alter_partition_reassignments({wanted: None}) == {wanted: NoReassignmentInProgressError}
    finally:
        admin.close()
