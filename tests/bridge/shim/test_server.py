"""The shim's protocol face and its paths to the controller, over real TCP against the real bridge controller:
ApiVersions advertises exactly what the shim serves, AlterIsr-era and current AlterPartition from brokers reach
the controller directly (log and ZooKeeper change; stale epochs get Kafka's errors), and forwarded requests
survive a controller that is not active (NOT_CONTROLLER), one that is down, and a quorum's leader change. The
bridge's own listener identifies the cluster (Metadata, DescribeCluster) and says where admin clients belong."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType
from kazoo.client import KazooClient
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.describe_cluster.v1.request import DescribeClusterRequest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest
from kio.static.primitive import i8

from bridge.controller import BridgeController
from bridge.kafka.client import send_request_sync
from bridge.shim.server import ShimServer
from migrate.errors import EXIT_OK
from migrate.zk.cluster import from_tree
from migrate.zk.live import read_tree
from migrate.zk.tree import ZTree
from tests.support.bridge import running_shim
from tests.support.quorum import leader_of, running_quorum
from tests.support.requests import alter_partition

pytestmark = pytest.mark.zookeeper

STOCK = "current_stock"



def test_api_versions_advertise_exactly_what_the_shim_serves(shim: ShimServer) -> None:
    request = ApiVersionsRequest(client_software_name="test", client_software_version="1")
    response = send_request_sync("127.0.0.1", shim.port, request)
    assert response.error_code == ErrorCode.none
    advertised = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}
    assert advertised == {
        3: (0, 12), 18: (0, 3), 19: (2, 7), 20: (1, 6), 29: (1, 3), 30: (1, 3), 31: (1, 3), 32: (1, 4),
        33: (0, 2), 37: (0, 3), 43: (0, 2), 44: (0, 1), 45: (0, 0), 46: (0, 0), 48: (0, 1), 49: (0, 1),
        50: (0, 0), 51: (0, 0),
        56: (0, 3), 60: (0, 1), 64: (0, 0),
    }  # fmt: skip


# ---------------------------------------------------------------------------------------------- AlterPartition


def test_alter_isr_and_alter_partition_through_the_shim(
    shim: ShimServer, bridge: BridgeController, zk_client: KazooClient, zk_connect: str
) -> None:
    assert bridge.log is not None
    topic = bridge.log.image.topics_by_name[STOCK]
    for version, isr in ((0, None), (2, None)):
        before = bridge.log.image.topics_by_name[STOCK].partitions[0]
        leader = before.leader
        epoch = int(zk_client.exists(f"/brokers/ids/{leader}").czxid)
        new_isr = [leader] if len(before.isr) > 1 else sorted({leader, *before.replicas})
        request = alter_partition(
            version, leader, epoch, 0, before.leader_epoch, before.partition_epoch, isr or new_isr,
            topic=topic.name, topic_id=topic.topic_id,
        )
        response = send_request_sync("127.0.0.1", shim.port, request)
        assert response.error_code == ErrorCode.none, version
        [answer] = response.topics[0].partitions
        assert answer.error_code == ErrorCode.none and list(answer.isr) == new_isr
        after = bridge.log.image.topics_by_name[STOCK].partitions[0]
        assert after.isr == new_isr and after.partition_epoch == before.partition_epoch + 1
        state = from_tree(read_tree(zk_connect, acls=False)).topics[STOCK].states[0]
        assert state.isr == new_isr and state.zk_version == after.partition_epoch
        # A read through the shim after the answer sees the change (its image catches up before reading).
        metadata = send_request_sync("127.0.0.1", shim.port, MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        [shown] = [t for t in metadata.topics if t.name == STOCK]
        assert list(next(p for p in shown.partitions if p.partition_index == 0).isr_nodes) == new_isr

    current = bridge.log.image.topics_by_name[STOCK].partitions[0]
    epoch = int(zk_client.exists(f"/brokers/ids/{current.leader}").czxid)
    stale = alter_partition(
        2, current.leader, epoch, 0, current.leader_epoch - 1, current.partition_epoch, current.isr,
        topic=topic.name, topic_id=topic.topic_id,
    )
    response = send_request_sync("127.0.0.1", shim.port, stale)
    assert [p.error_code for t in response.topics for p in t.partitions] == [ErrorCode.fenced_leader_epoch]
    stale_broker = alter_partition(
        0, current.leader, epoch - 1, 0, current.leader_epoch, current.partition_epoch, current.isr,
        topic=topic.name, topic_id=topic.topic_id,
    )
    assert send_request_sync("127.0.0.1", shim.port, stale_broker).error_code == ErrorCode.stale_broker_epoch
    assert shim.stats.direct == 4 and shim.stats.forwarded == 0


# ---------------------------------------------------------------------------------------------- failover


def create(admin: AdminClient, name: str) -> None:
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=1, replication_factor=1)], request_timeout=60
    )
    futures[name].result(timeout=60)


def test_forwarding_finds_the_quorum_leader_and_follows_a_leader_change(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path
) -> None:
    with running_quorum(zk_client, zk_connect, real_tree, tmp_path) as voters:
        old = leader_of(voters)
        followers = [v for v in voters if v is not old]
        # The shim is told of a dead address and the followers (NOT_CONTROLLER) before the leader.
        controllers = [("127.0.0.1", 1), *followers, old]
        with running_shim(*controllers) as server:
            admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{server.port}"})
            create(admin, "before-failover")
            assert old.log is not None and "before-failover" in old.log.image.topics_by_name
            assert "before-failover" in admin.list_topics(timeout=30).topics
            old_epoch = json.loads(zk_client.get("/controller")[0])["kraftControllerEpoch"]

            assert old.stop() == EXIT_OK
            new = leader_of(followers, timeout=60)
            create(admin, "after-failover")
            assert new.log is not None
            assert {"before-failover", "after-failover"} <= set(new.log.image.topics_by_name)
            controller = json.loads(zk_client.get("/controller")[0])
            assert controller["brokerid"] == new.config.node_id and controller["kraftControllerEpoch"] > old_epoch
            assert {"before-failover", "after-failover"} <= set(zk_client.get_children("/brokers/topics"))
            deadline = time.monotonic() + 30
            while "after-failover" not in admin.list_topics(timeout=30).topics:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            # The same log, continued by the new leader: the shim's image never had to start over.
            assert server.follower.resets == 0


# ---------------------------------------------------------------------------------------------- the bridge's own listener


def test_an_admin_client_at_the_bridge_listener_is_answered_and_told_where_to_go(
    bridge: BridgeController, caplog: pytest.LogCaptureFixture
) -> None:
    assert bridge.log is not None and bridge.cluster_id is not None
    caplog.set_level(logging.WARNING, logger="bridge.controller")
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{bridge.listen_port}", "log_level": 0})
    listed = admin.list_topics(timeout=30)
    assert listed.cluster_id == bridge.cluster_id
    assert list(listed.brokers) == [bridge.config.node_id] and listed.controller_id == bridge.config.node_id
    assert set(listed.topics) == set(bridge.log.image.topics_by_name)
    told = [r.getMessage() for r in caplog.records if "event=client_request_at_controller" in r.getMessage()]
    assert told and "(api key 3)" in told[0] and "zk2kraft shim run --controller" in told[0]
    # A read only a shim serves fails at once on the client (not advertised), instead of a silent wait.
    futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, STOCK)], request_timeout=30)
    with pytest.raises(KafkaException) as raised:
        [future.result(timeout=60) for future in futures.values()]
    assert raised.value.args[0].code() == KafkaError._UNSUPPORTED_FEATURE


def test_the_bridge_answers_describe_cluster_as_a_kafka_controller(bridge: BridgeController) -> None:
    node = bridge.config.node_id
    asked = DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=i8(2))
    response = send_request_sync("127.0.0.1", bridge.listen_port, asked)
    assert response.error_code == ErrorCode.none and response.endpoint_type == 2
    assert response.cluster_id == bridge.cluster_id and response.controller_id == node
    assert [(b.broker_id, b.port) for b in response.brokers] == [(node, bridge.listen_port)]
    # Brokers are not described by a controller: Kafka's refusal, with its message.
    as_broker = DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=i8(1))
    refused = send_request_sync("127.0.0.1", bridge.listen_port, as_broker)
    assert refused.error_code == ErrorCode.mismatched_endpoint_type
    assert refused.error_message == (
        "The request was sent to an endpoint of type CONTROLLER, but we wanted an endpoint of type BROKER"
    )
