"""The controller-to-broker channel across a bridge SIGKILL and restart, a leader change of a quorum of three
bridges, and a broker that stops answering, with three simulated ZooKeeper-mode brokers over TCP
(controller-broker.md §1.2, §1.7).

Every activation sends exactly one full sync (KAFKA-15010): UpdateMetadata with every partition, then FULL
LeaderAndIsr and FULL UpdateMetadata; a broker that answered an incremental request with an error (so
applied nothing of it) has the change after that sync. A broker that reads requests and never answers holds
only its own queue: admin changes commit and the other brokers get their requests meanwhile.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kio.schema.errors import ErrorCode

from bridge.api import DriverState
from bridge.controller import BridgeController
from bridge.kafka.client import send_request_sync
from migrate.zk.load import load_tree
from migrate.zk.tree import ZTree
from tests.support.bridge import controller_config, eventually, start_controller
from tests.support.bridge_process import bridge_process, seed_small_cluster
from tests.support.quorum import leader_of, started_quorum, voter_addresses
from tests.support.requests import SET, TOPIC, create_topic, incremental
from tests.support.zk_broker import SimulatedZkBroker
from tests.support.zk_broker_control import (
    LEADER,
    LEADER_AND_ISR,
    UPDATE_METADATA,
    ReceivedRequest,
    assert_one_full_sync,
)

pytestmark = pytest.mark.zookeeper

BROKER_IDS = (1, 2, 3)
HOST = "127.0.0.1"
MISSED = "missed-by-broker-2"
REQUEST_TIMEOUT_S = 3.0
"""The brokers' controller channel gives up on an unanswered request after this long and tries another voter."""


def partition_states(client: KazooClient) -> dict[tuple[str, int], dict[str, Any]]:
    """Every partition's state znode: what the controller wrote (leader, ISR, epochs)."""
    states = {}
    for topic in client.get_children("/brokers/topics"):
        for partition in client.get_children(f"/brokers/topics/{topic}/partitions"):
            data, _ = client.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
            states[(topic, int(partition))] = json.loads(data)
    return states


def assignments(client: KazooClient) -> dict[tuple[str, int], list[int]]:
    found = {}
    for topic in client.get_children("/brokers/topics"):
        data, _ = client.get(f"/brokers/topics/{topic}")
        for partition, replicas in json.loads(data)["partitions"].items():
            found[(topic, int(partition))] = replicas
    return found


def create(port: int, name: str, partitions: int = 1) -> None:
    """A topic with a replica on every broker, through the bridge; fails unless it was committed."""
    response = send_request_sync(HOST, port, create_topic(name, partitions, replication_factor=3), timeout=30)
    assert [t.error_code for t in response.topics] == [ErrorCode.none], response


def hosts_as_zookeeper_says(broker: SimulatedZkBroker, client: KazooClient, topic: str) -> bool:
    """The broker hosts every partition of `topic` with the leader and leader epoch ZooKeeper holds, and its
    metadata cache knows the topic."""
    snapshot = broker.control.snapshot()
    states = {key: state for key, state in partition_states(client).items() if key[0] == topic}
    if not states or topic not in snapshot.cache.partition_states:
        return False
    for key, state in states.items():
        log = snapshot.logs.get(key)
        if log is None or log.stopped or log.leader_epoch != state["leader_epoch"]:
            return False
        if (log.role == LEADER) != (state["leader"] == broker.broker_id):
            return False
    return True


def miss_one_topic(port: int, brokers: dict[int, SimulatedZkBroker], client: KazooClient) -> None:
    """Broker 2 answers the incremental LeaderAndIsr and UpdateMetadata of a new topic with an error; the
    other brokers apply them."""
    victim = brokers[2]
    seen = len(victim.control.snapshot().requests)
    victim.control.fail_next(LEADER_AND_ISR, ErrorCode.unknown_server_error)
    victim.control.fail_next(UPDATE_METADATA, ErrorCode.unknown_server_error)
    create(port, MISSED, partitions=2)
    for broker_id in (1, 3):
        eventually(partial(hosts_as_zookeeper_says, brokers[broker_id], client, MISSED), timeout=30)

    def both_refused() -> bool:
        later = victim.control.snapshot().requests[seen:]
        return {r.api_key for r in later if r.injected} == {LEADER_AND_ISR, UPDATE_METADATA}

    eventually(both_refused, timeout=30)
    snapshot = victim.control.snapshot()
    assert not [key for key in snapshot.logs if key[0] == MISSED], "the fault did not keep the topic away"
    assert MISSED not in snapshot.cache.partition_states


def received_since(broker: SimulatedZkBroker, mark: int) -> list[ReceivedRequest]:
    return broker.control.snapshot().requests[mark:]


def settled(status: dict[str, Any] | None) -> bool:
    """Every broker is a member of the channel and has nothing queued."""
    channel = (status or {}).get("broker_channel") or {}
    members = channel.get("brokers") or []
    return sorted(b["broker_id"] for b in members) == list(BROKER_IDS) and all(
        b["queue_depth"] == 0 for b in members
    )


# ---------------------------------------------------------------------------------------------- SIGKILL


def test_a_sigkilled_bridge_sends_one_full_sync_after_its_restart_and_it_repairs_a_missed_change(
    zk_client: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    seed_small_cluster(zk_client)
    cluster_id = json.loads(zk_client.get("/cluster/id")[0])["id"]
    brokers: dict[int, SimulatedZkBroker] = {}
    try:
        with bridge_process(
            zk_connect=zk_connect, metadata_dir=tmp_path / "meta", node_id=3000,
            log_path=tmp_path / "bridge.log", rehearsal=False,
        ) as bridge:  # fmt: skip
            bridge.start().wait_for_status()
            for broker_id in BROKER_IDS:
                brokers[broker_id] = SimulatedZkBroker(
                    broker_id, (HOST, bridge.listen_port), cluster_id, zk_connect=zk_connect
                ).start()
            bridge.wait_for_state("DUAL_WRITE")
            eventually(lambda: settled(bridge.status()), timeout=60)
            miss_one_topic(bridge.listen_port, brokers, zk_client)
            eventually(lambda: settled(bridge.status()), timeout=30)
            errors = {
                b["broker_id"]: b["errors"] for b in (bridge.status() or {})["broker_channel"]["brokers"]
            }
            assert errors[2] == {"UNKNOWN_SERVER_ERROR": 2}, errors

            marks = {b: len(broker.control.snapshot().requests) for b, broker in brokers.items()}
            bridge.kill()
            assert bridge.returncode is not None and bridge.returncode < 0, bridge.log_tail()
            bridge.start().wait_for_state("DUAL_WRITE", timeout=90)

            # The restarted bridge's full sync gives broker 2 the topic it missed.
            eventually(lambda: hosts_as_zookeeper_says(brokers[2], zk_client, MISSED), timeout=60)
            # A change after the restart: once every broker has it, anything queued before it has arrived.
            create(bridge.listen_port, "after-restart")
            for broker in brokers.values():
                eventually(partial(hosts_as_zookeeper_says, broker, zk_client, "after-restart"), timeout=30)
            eventually(lambda: settled(bridge.status()), timeout=30)

            partitions = len(assignments(zk_client)) - 1  # "after-restart" came after the sync
            for broker_id, broker in brokers.items():
                assert_one_full_sync(received_since(broker, marks[broker_id]), partitions, broker_id)
                for topic in (MISSED, "after-restart"):
                    assert hosts_as_zookeeper_says(broker, zk_client, topic), (broker_id, topic)
            channel = (bridge.status() or {})["broker_channel"]
            assert channel["full_syncs"] == 1
            assert {b["broker_id"]: b["full_syncs_sent"] for b in channel["brokers"]} == dict.fromkeys(
                BROKER_IDS, 1
            )
            assert all(b["errors"] == {} for b in channel["brokers"]), channel
            assert bridge.terminate() == 0, bridge.log_tail()
    finally:
        for broker in brokers.values():
            broker.kill()


# ---------------------------------------------------------------------------------------------- a leader change


@pytest.fixture
def bridges() -> Iterator[list[BridgeController]]:
    started: list[BridgeController] = []
    yield started
    for bridge in started:
        bridge.stop()


def start_bridge(
    bridges: list[BridgeController], zk_connect: str, metadata_dir: Path, **fields: Any
) -> BridgeController:
    bridge = start_controller(controller_config(zk_connect, metadata_dir, rehearsal=False, **fields))
    bridges.append(bridge)
    return bridge


def in_process_settled(bridge: BridgeController) -> bool:
    return settled(bridge.status().model_dump())


def test_a_leader_change_sends_one_full_sync_from_the_new_leader_and_it_repairs_a_missed_change(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path
) -> None:
    with started_quorum(zk_client, zk_connect, real_tree, tmp_path, rehearsal=False) as controllers:
        voters = voter_addresses(controllers)
        cluster_id = controllers[0].cluster_id
        assert cluster_id is not None
        brokers = {
            broker_id: SimulatedZkBroker(
                broker_id, voters[n % len(voters)], cluster_id, zk_connect=zk_connect, voters=voters,
                request_timeout_s=REQUEST_TIMEOUT_S,
            ).start()
            for n, broker_id in enumerate(BROKER_IDS)
        }  # fmt: skip
        try:
            old = leader_of(controllers, timeout=60)
            eventually(lambda: in_process_settled(old), timeout=60)
            miss_one_topic(old.listen_port, brokers, zk_client)
            followers = [c for c in controllers if c is not old]
            assert [f.channel.full_syncs for f in followers] == [0, 0]  # a follower sends brokers nothing

            marks = {b: len(broker.control.snapshot().requests) for b, broker in brokers.items()}
            old.stop()
            new = leader_of(followers, timeout=60)

            # The new leader's full sync gives broker 2 the topic the old leader's incremental requests missed.
            eventually(lambda: hosts_as_zookeeper_says(brokers[2], zk_client, MISSED), timeout=60)
            create(new.listen_port, "after-failover")
            for broker in brokers.values():
                eventually(partial(hosts_as_zookeeper_says, broker, zk_client, "after-failover"), timeout=30)
            eventually(lambda: in_process_settled(new), timeout=30)

            assert new.log is not None
            partitions = new.log.image.partition_count() - 1  # "after-failover" came after the sync
            for broker_id, broker in brokers.items():
                assert_one_full_sync(received_since(broker, marks[broker_id]), partitions, broker_id)
            channel = new.status().broker_channel
            assert channel.full_syncs == 1
            assert {b.broker_id: b.full_syncs_sent for b in channel.brokers} == dict.fromkeys(BROKER_IDS, 1)
            assert all(b.errors == {} for b in channel.brokers), channel
        finally:
            for broker in brokers.values():
                broker.kill()


# ---------------------------------------------------------------------------------------------- a stuck broker


def test_a_broker_that_stops_answering_holds_only_its_own_queue(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path, bridges: list[BridgeController]
) -> None:
    load_tree(zk_client, real_tree)
    bridge = start_bridge(bridges, zk_connect, tmp_path / "meta", request_timeout_ms=2000)
    assert bridge.cluster_id is not None
    brokers = {
        b: SimulatedZkBroker(b, (HOST, bridge.listen_port), bridge.cluster_id, zk_connect=zk_connect).start()
        for b in BROKER_IDS
    }
    try:
        assert bridge.wait_for_state(DriverState.DUAL_WRITE), bridge.error
        eventually(lambda: in_process_settled(bridge), timeout=60)
        stuck = brokers[3]
        stuck.control.unresponsive = True
        seen = len(stuck.control.snapshot().requests)

        def depth() -> int:
            [member] = [b for b in bridge.status().broker_channel.brokers if b.broker_id == 3]
            return member.queue_depth

        topic = sorted(partition_states(zk_client))[0][0]
        depths = []
        for n in range(4):
            name = f"while-stuck-{n}"
            create(bridge.listen_port, name)
            # Committed in the log and ZooKeeper, and the answering brokers lead and follow it...
            for broker_id in (1, 2):
                eventually(partial(hosts_as_zookeeper_says, brokers[broker_id], zk_client, name), 30)
            # ...while broker 3 still has not answered the first request it was sent.
            later = received_since(stuck, seen)
            # (Resent after each request timeout: one request at a time, never the next.)
            assert later and all(r.request == later[0].request and r.response is None for r in later), later
            response = send_request_sync(
                HOST, bridge.listen_port, incremental(TOPIC, topic, ("retention.ms", SET, str(1000 + n)))
            )
            assert [r.error_code for r in response.responses] == [ErrorCode.none]
            depths.append(depth())
        # Its queue grows by each topic's LeaderAndIsr and UpdateMetadata; the config changes send nothing.
        assert depths == sorted(depths) and depths[-1] - depths[0] >= 6, depths
        assert json.loads(zk_client.get(f"/config/topics/{topic}")[0])["config"]["retention.ms"] == "1003"
        assert all(not b.fenced for b in bridge.log.image.cluster.brokers.values())  # type: ignore[union-attr]

        # Answering again: the unanswered request is resent after the request timeout and the queue drains.
        stuck.control.unresponsive = False
        eventually(lambda: in_process_settled(bridge), timeout=60)
        for n in range(4):
            assert hosts_as_zookeeper_says(stuck, zk_client, f"while-stuck-{n}")
        [member] = [b for b in bridge.status().broker_channel.brokers if b.broker_id == 3]
        assert member.network_failures >= 1 and member.errors == {}
    finally:
        for broker in brokers.values():
            broker.kill()
