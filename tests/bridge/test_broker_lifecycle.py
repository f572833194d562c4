"""Simulated ZooKeeper-mode brokers register with the bridge over TCP, are unfenced, and a crashed one is fenced.

Against a real ZooKeeper seeded with the real Kafka 3.5 cluster's tree (brokers 1, 2, 3).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kio.schema.errors import ErrorCode

from bridge.api import DriverState
from bridge.controller import BridgeController
from migrate.kraft.image import MetadataImage
from migrate.kraft.migration_state import ZkMigrationState
from migrate.zk.load import load_tree
from migrate.zk.tree import ZTree
from tests.support.bridge import controller_config, eventually, start_controller
from tests.support.zk_broker import SimulatedZkBroker

SESSION_TIMEOUT_MS = 1500
BROKER_IDS = (1, 2, 3)


@pytest.fixture
def seeded(zk_client: KazooClient, real_tree: ZTree) -> KazooClient:
    load_tree(zk_client, real_tree)
    return zk_client


def start_bridge(zk_connect: str, tmp_path: Path) -> BridgeController:
    """A bridge as Kafka's controller behaves (no rehearsal): it waits for the brokers before migrating."""
    return start_controller(
        controller_config(
            zk_connect, tmp_path / "meta", rehearsal=False, broker_session_timeout_ms=SESSION_TIMEOUT_MS
        )
    )


def start_broker(bridge: BridgeController, broker_id: int, zk_connect: str) -> SimulatedZkBroker:
    cluster_id = bridge.cluster_id
    assert cluster_id is not None
    return SimulatedZkBroker(
        broker_id, ("127.0.0.1", bridge.listen_port), cluster_id, zk_connect=zk_connect
    ).start()


@pytest.fixture
def bridge(seeded: KazooClient, zk_connect: str, tmp_path: Path) -> Iterator[BridgeController]:
    controller = start_bridge(zk_connect, tmp_path)
    yield controller
    controller.stop()


@pytest.fixture
def brokers(bridge: BridgeController, zk_connect: str) -> Iterator[dict[int, SimulatedZkBroker]]:
    started = {broker_id: start_broker(bridge, broker_id, zk_connect) for broker_id in BROKER_IDS}
    assert bridge.wait_for_state(DriverState.DUAL_WRITE), bridge.error
    yield started
    for broker in started.values():
        broker.kill()


def image(bridge: BridgeController) -> MetadataImage:
    assert bridge.log is not None
    return bridge.log.image


def all_unfenced(bridge: BridgeController) -> bool:
    brokers = image(bridge).cluster.brokers
    return set(brokers) == set(BROKER_IDS) and not any(b.fenced for b in brokers.values())


def partition_states(
    zk_client: KazooClient, bridge: BridgeController
) -> dict[tuple[str, int], dict[str, object]]:
    states = {}
    for topic in image(bridge).topics_by_name.values():
        for partition_id in topic.partitions:
            data, _ = zk_client.get(f"/brokers/topics/{topic.name}/partitions/{partition_id}/state")
            states[(topic.name, partition_id)] = json.loads(data)
    return states


def test_the_migration_waits_until_every_broker_has_registered_and_status_names_the_missing(
    bridge: BridgeController, zk_connect: str
) -> None:
    first = [start_broker(bridge, broker_id, zk_connect) for broker_id in (1, 2)]
    try:
        eventually(lambda: bridge.status().brokers.waiting_for == [3], timeout=20)
        assert bridge.state is DriverState.WAIT_FOR_BROKERS
        assert bridge.log is not None
        assert bridge.log.image.features.zk_migration_state != ZkMigrationState.MIGRATION  # nothing migrated
        assert bridge.status().brokers.registered == 2
        first.append(start_broker(bridge, 3, zk_connect))
        assert bridge.wait_for_state(DriverState.DUAL_WRITE), bridge.error
        eventually(lambda: bridge.status().brokers.fenced == 0, timeout=20)
        status = bridge.status().brokers
        assert (status.registered, status.migrating_zk_brokers, status.waiting_for) == (3, 3, None)
        metrics = bridge.metrics.exposition().decode()
        assert "zk2kraft_migrating_zk_broker_count 3.0" in metrics
        assert "zk2kraft_fenced_broker_count 0.0" in metrics
    finally:
        for broker in first:
            broker.kill()


def test_brokers_register_as_migrating_zk_brokers_and_are_unfenced_once_caught_up(
    bridge: BridgeController, brokers: dict[int, SimulatedZkBroker]
) -> None:
    eventually(lambda: all_unfenced(bridge), timeout=20)
    registered = image(bridge).cluster.brokers
    for broker_id, broker in brokers.items():
        registration = registered[broker_id]
        assert registration.is_migrating_zk_broker
        assert registration.incarnation_id == broker.incarnation
        assert registration.epoch == broker.view.broker_epoch
        assert broker.view.is_caught_up and not broker.view.is_fenced
        # Only NOT_CONTROLLER, while the bridge was still reading ZooKeeper (the broker retries).
        assert set(broker.view.errors) <= {ErrorCode.not_controller}


def test_a_crashed_broker_is_fenced_and_its_leaderships_move_in_the_log_and_in_zookeeper(
    bridge: BridgeController, brokers: dict[int, SimulatedZkBroker], zk_client: KazooClient
) -> None:
    eventually(lambda: all_unfenced(bridge), timeout=20)
    before = {
        (t.name, p): partition
        for t in image(bridge).topics_by_name.values()
        for p, partition in t.partitions.items()
    }
    led = {key for key, partition in before.items() if partition.leader == 1}
    assert led, "broker 1 leads partitions in the real cluster"

    brokers[1].kill()
    eventually(lambda: image(bridge).cluster.brokers[1].fenced, timeout=SESSION_TIMEOUT_MS / 1000 + 10)

    after = {
        (t.name, p): partition
        for t in image(bridge).topics_by_name.values()
        for p, partition in t.partitions.items()
    }
    for key in led:
        old, new = before[key], after[key]
        assert new.leader != 1
        survivors = [b for b in old.isr if b != 1]
        if survivors:
            # ONLINE election: the first surviving ISR member in replica-list order.
            assert new.leader == next(b for b in old.replicas if b in survivors)
            assert new.isr == survivors
        else:
            # The ISR is never emptied: the last member stays, and the partition has no leader.
            assert new.leader == -1 and new.isr == old.isr
        assert new.leader_epoch == old.leader_epoch + 1
    for key, old in before.items():
        if 1 in old.isr and key not in led:
            assert 1 not in after[key].isr
            assert after[key].leader_epoch == old.leader_epoch + 1  # ISR shrink bumps while migrating
    eventually(lambda: bridge.status().brokers.fenced == 1, timeout=10)  # /status follows the image
    # Brokers 2 and 3 keep their sessions.
    assert not image(bridge).cluster.brokers[2].fenced and not image(bridge).cluster.brokers[3].fenced

    def zookeeper_agrees() -> bool:
        states = partition_states(zk_client, bridge)
        return all(
            (state["leader"], state["isr"], state["leader_epoch"])
            == (after[key].leader, after[key].isr, after[key].leader_epoch)
            for key, state in states.items()
        )

    eventually(zookeeper_agrees, timeout=10)


def leaders_in_zookeeper(zk_client: KazooClient, bridge: BridgeController) -> dict[tuple[str, int], int]:
    return {key: int(str(state["leader"])) for key, state in partition_states(zk_client, bridge).items()}


def test_controlled_shutdown_moves_every_leadership_away_before_the_broker_is_told_to_shut_down(
    bridge: BridgeController, brokers: dict[int, SimulatedZkBroker], zk_client: KazooClient
) -> None:
    eventually(lambda: all_unfenced(bridge), timeout=20)
    before = {
        (t.name, p): partition
        for t in image(bridge).topics_by_name.values()
        for p, partition in t.partitions.items()
    }
    led = {key for key, partition in before.items() if partition.leader == 2}
    assert led, "broker 2 leads partitions in the real cluster"

    assert brokers[2].shutdown(timeout=30), f"broker 2 was never told to shut down: {brokers[2].view}"

    # Read at once: the answer that let the broker go came after the moves were in the log and ZooKeeper.
    zk_leaders = leaders_in_zookeeper(zk_client, bridge)
    assert not [key for key, leader in zk_leaders.items() if leader == 2]
    after = image(bridge)
    assert after.cluster.brokers[2].in_controlled_shutdown or after.cluster.brokers[2].fenced
    for key in led:
        new = after.topics_by_name[key[0]].partitions[key[1]]
        survivors = [b for b in before[key].isr if b != 2]
        expected = next((b for b in before[key].replicas if b in survivors), -1)
        assert (new.leader, zk_leaders[key]) == (expected, expected)
        assert new.leader_epoch == before[key].leader_epoch + 1
    # The other brokers were never fenced by it.
    assert not after.cluster.brokers[1].fenced and not after.cluster.brokers[3].fenced
