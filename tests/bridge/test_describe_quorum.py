"""DescribeQuorum over TCP as Kafka 3.9's only voter answers it, with simulated brokers fetching as observers.

Against a real ZooKeeper seeded with the real Kafka 3.5 cluster's tree (brokers 1, 2, 3), in DUAL_WRITE.
Admin clients send it to the controller directly (bootstrap controllers) or to a broker, which forwards it in
an Envelope (KafkaApis: forwardToControllerOrFail).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kio.schema.describe_quorum.v0 import request as describe_quorum_v0
from kio.schema.describe_quorum.v1 import request as describe_quorum_v1
from kio.schema.describe_quorum.v2 import request as describe_quorum_v2
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from bridge.api import DriverState
from bridge.controller import BridgeController
from bridge.kafka.client import send_envelope_sync, send_request_sync
from bridge.kafka.protocol import KafkaPrincipal, encode_request
from migrate.zk.load import load_tree
from migrate.zk.tree import ZTree
from tests.support.bridge import NODE_ID, controller_config, eventually, start_controller
from tests.support.zk_broker import SimulatedZkBroker

MODULES: dict[int, Any] = {0: describe_quorum_v0, 1: describe_quorum_v1, 2: describe_quorum_v2}
BROKER_IDS = (1, 2, 3)


def describe_quorum(version: int, topic: str = "__cluster_metadata", partition: int = 0) -> Any:
    m = MODULES[version]
    return m.DescribeQuorumRequest(
        topics=(m.TopicData(topic_name=topic, partitions=(m.PartitionData(partition_index=i32(partition)),)),)
    )


@pytest.fixture
def bridge(
    zk_client: KazooClient, real_tree: ZTree, zk_connect: str, tmp_path: Path
) -> Iterator[BridgeController]:
    load_tree(zk_client, real_tree)
    controller = start_controller(controller_config(zk_connect, tmp_path / "meta", rehearsal=False))
    yield controller
    controller.stop()


@pytest.fixture
def brokers(bridge: BridgeController, zk_connect: str) -> Iterator[dict[int, SimulatedZkBroker]]:
    assert bridge.cluster_id is not None
    started = {
        broker_id: SimulatedZkBroker(
            broker_id, ("127.0.0.1", bridge.listen_port), bridge.cluster_id, zk_connect=zk_connect
        ).start()
        for broker_id in BROKER_IDS
    }
    assert bridge.wait_for_state(DriverState.DUAL_WRITE), bridge.error
    yield started
    for broker in started.values():
        broker.kill()


def quiet_and_caught_up(bridge: BridgeController, brokers: dict[int, SimulatedZkBroker]) -> bool:
    """Every broker unfenced and its observer at the end of the durable log (nothing more being written)."""
    assert bridge.log is not None
    end = bridge.log.durable_offset + 1
    return bridge.log.end_offset == end and all(
        not b.view.is_fenced and b.follower is not None and b.follower.position == end
        for b in brokers.values()
    )


def the_partition(response: Any) -> Any:
    assert response.error_code == ErrorCode.none
    (topic,) = response.topics
    assert topic.topic_name == "__cluster_metadata"
    (partition,) = topic.partitions
    return partition


@pytest.mark.parametrize("version", [0, 1, 2])
def test_the_only_voter_leads_and_the_brokers_following_the_log_are_its_observers(
    bridge: BridgeController, brokers: dict[int, SimulatedZkBroker], version: int
) -> None:
    eventually(lambda: quiet_and_caught_up(bridge, brokers), timeout=30)
    assert bridge.log is not None
    end = bridge.log.end_offset
    before_ms = int(time.time() * 1000)
    response = send_request_sync("127.0.0.1", bridge.listen_port, describe_quorum(version))
    after_ms = int(time.time() * 1000)
    partition = the_partition(response)
    assert partition.error_code == ErrorCode.none
    assert (partition.leader_id, partition.leader_epoch) == (NODE_ID, bridge.log.leader_epoch)
    assert partition.high_watermark == end
    (voter,) = partition.current_voters
    assert (voter.replica_id, voter.log_end_offset) == (NODE_ID, end)
    observers = {o.replica_id: o for o in partition.observers}
    assert set(observers) == set(BROKER_IDS)
    # Each observer's offset is where its last fetch asked to read from: the end of the log, caught up.
    assert {o.log_end_offset for o in observers.values()} == {end}
    if version >= 1:
        # The leader reports itself fetched and caught up as of the answer.
        assert before_ms <= voter.last_fetch_timestamp == voter.last_caught_up_timestamp <= after_ms
        for observer in observers.values():
            assert 0 < observer.last_caught_up_timestamp <= observer.last_fetch_timestamp <= after_ms
    if version >= 2:
        # A static voter and ZooKeeper-mode observers have no directory id (the zero id, which kio reads as None).
        assert {o.replica_directory_id for o in (voter, *observers.values())} == {None}
        assert partition.error_message is None
        ((node_id, listeners),) = [(n.node_id, n.listeners) for n in response.nodes]
        assert node_id == NODE_ID
        assert [(x.name, x.host, x.port) for x in listeners] == [
            ("CONTROLLER", "127.0.0.1", bridge.listen_port)
        ]


def test_a_crashed_broker_stays_an_observer_whose_fetches_stopped(
    bridge: BridgeController, brokers: dict[int, SimulatedZkBroker]
) -> None:
    eventually(lambda: quiet_and_caught_up(bridge, brokers), timeout=30)
    port = bridge.listen_port

    def observers() -> dict[int, Any]:
        partition = the_partition(send_request_sync("127.0.0.1", port, describe_quorum(1)))
        return {o.replica_id: o for o in partition.observers}

    brokers[1].kill()
    first = observers()
    eventually(lambda: observers()[2].last_fetch_timestamp > first[2].last_fetch_timestamp, timeout=10)
    later = observers()
    assert set(later) == set(BROKER_IDS)  # Kafka forgets an observer after 5 minutes without a fetch
    assert later[1].last_fetch_timestamp == first[1].last_fetch_timestamp
    assert later[3].last_fetch_timestamp > first[3].last_fetch_timestamp


def test_forwarded_in_an_envelope_by_a_broker(
    bridge: BridgeController, brokers: dict[int, SimulatedZkBroker]
) -> None:
    eventually(lambda: quiet_and_caught_up(bridge, brokers), timeout=30)
    inner = encode_request(describe_quorum(2), correlation_id=7, client_id="adminclient-1")
    result = send_envelope_sync(
        "127.0.0.1", bridge.listen_port, inner, principal=KafkaPrincipal("User", "admin"),
        client_host_address="10.0.0.2",
    )  # fmt: skip
    assert result.error_code == ErrorCode.none and result.inner_response is not None
    partition = the_partition(result.inner_response)
    assert partition.leader_id == NODE_ID
    assert {o.replica_id for o in partition.observers} == set(BROKER_IDS)


@pytest.mark.parametrize(("topic", "partition"), [("__consumer_offsets", 0), ("__cluster_metadata", 1)])
def test_any_other_partition_is_unknown(
    bridge: BridgeController, brokers: dict[int, SimulatedZkBroker], topic: str, partition: int
) -> None:
    response = send_request_sync("127.0.0.1", bridge.listen_port, describe_quorum(2, topic, partition))
    assert response.error_code == ErrorCode.none
    (answer,) = response.topics
    (item,) = answer.partitions
    assert (answer.topic_name, item.partition_index) == (topic, partition)
    assert item.error_code == ErrorCode.unknown_topic_or_partition
    assert item.error_message == "This server does not host this topic-partition."
    assert item.observers == () and response.nodes == ()


def test_answered_before_the_migration_with_the_listener_controller_listener_names_gives(
    zk_client: KazooClient, real_tree: ZTree, zk_connect: str, tmp_path: Path
) -> None:
    # Kafka's Raft leader answers DescribeQuorum whatever the migration's state; the voter's endpoint carries
    # the first of controller.listener.names (the static voter set's listener).
    load_tree(zk_client, real_tree)
    config = controller_config(
        zk_connect, tmp_path / "meta", rehearsal=False, controller_listener_names="QUORUM,SECOND"
    )
    controller = start_controller(config)
    try:
        # No broker registers: the migration waits for them, with the log led and nothing migrated.
        assert controller.wait_for_state(DriverState.WAIT_FOR_BROKERS), controller.error
        response = send_request_sync("127.0.0.1", controller.listen_port, describe_quorum(2))
        partition = the_partition(response)
        assert partition.error_code == ErrorCode.none and partition.leader_id == NODE_ID
        ((node_id, listeners),) = [(n.node_id, n.listeners) for n in response.nodes]
        assert node_id == NODE_ID
        assert [(x.name, x.host, x.port) for x in listeners] == [("QUORUM", "127.0.0.1", controller.listen_port)]
    finally:
        controller.stop()
