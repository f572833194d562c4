"""`zk2kraft status --bridge-status` shows the brokers registered with a running bridge, from its /status.

Against a real ZooKeeper seeded with the real Kafka 3.5 cluster's tree (brokers 1, 2, 3) and simulated
ZooKeeper-mode brokers over TCP.
"""

from __future__ import annotations

import json
import logging
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner
from kazoo.client import KazooClient

from bridge.api import DriverState
from bridge.controller import BridgeController
from bridge.metrics import BridgeMetrics, RaftStatus, RaftVoterStatus, StatusServer
from cli.status_cmd import status_cmd
from migrate.plan.status import (
    BrokerChannelStatus,
    BrokersStatus,
    ChannelBroker,
    RequestMark,
    UnreachableBroker,
)
from migrate.zk import model as zk_model
from migrate.zk.load import load_tree
from migrate.zk.tree import ZTree
from migrate.zk.znodes.brokers import encode_broker
from tests.support.bridge import controller_config, eventually, start_controller
from tests.support.zk_broker import SimulatedZkBroker

SESSION_TIMEOUT_MS = 1500


def status(zk_connect: str, url: str, *fmt: str) -> str:
    shown = CliRunner().invoke(status_cmd, ["--zk", zk_connect, "--bridge-status", url, *fmt])
    assert shown.exit_code == 0, shown.output
    return shown.output


def started_bridge(zk_client: KazooClient, real_tree: ZTree, zk_connect: str, tmp_path: Path) -> BridgeController:
    """A bridge over the real cluster that waits for its brokers (no rehearsal), with short sessions."""
    load_tree(zk_client, real_tree)
    return start_controller(
        controller_config(
            zk_connect, tmp_path / "meta", rehearsal=False, broker_session_timeout_ms=SESSION_TIMEOUT_MS
        )
    )


def test_status_shows_the_registered_fenced_and_migrating_brokers_and_whom_the_migration_waits_for(
    zk_client: KazooClient, real_tree: ZTree, zk_connect: str, tmp_path: Path
) -> None:
    bridge = started_bridge(zk_client, real_tree, zk_connect, tmp_path)
    assert bridge.cluster_id is not None
    url = f"http://127.0.0.1:{bridge.metrics_port}"
    controller = ("127.0.0.1", bridge.listen_port)
    brokers: dict[int, SimulatedZkBroker] = {}

    def start(broker_id: int) -> None:
        assert bridge.cluster_id is not None
        brokers[broker_id] = SimulatedZkBroker(
            broker_id, controller, bridge.cluster_id, zk_connect=zk_connect
        ).start()

    try:
        start(1)
        start(2)
        eventually(lambda: bridge.status().brokers.waiting_for == [3], timeout=20)
        shown = status(zk_connect, url)
        # Not caught up before the migration (nothing to follow yet): both are still fenced.
        fenced = bridge.status().brokers.fenced
        assert (
            f"brokers registered ({url}/status): 2; fenced {fenced}, in controlled shutdown 0, "
            "migrating ZooKeeper brokers 2"
        ) in shown
        assert f"the migration waits for brokers to register ({url}/status): 3" in shown
        view = json.loads(status(zk_connect, url, "--format", "json"))["kraft"][0]["brokers"]
        assert (view["registered"], view["migrating_zk_brokers"], view["waiting_for"]) == (2, 2, [3])

        start(3)
        assert bridge.wait_for_state(DriverState.DUAL_WRITE), bridge.error
        eventually(lambda: bridge.status().brokers.fenced == 0, timeout=20)
        shown = status(zk_connect, url)
        assert "brokers registered (" in shown and ": 3; fenced 0, in controlled shutdown 0, " in shown
        assert "waits for brokers" not in shown

        brokers[1].kill()  # its session expires: fenced
        eventually(lambda: bridge.status().brokers.fenced == 1, timeout=SESSION_TIMEOUT_MS / 1000 + 10)
        shown = status(zk_connect, url)
        assert ": 3; fenced 1, in controlled shutdown 0, migrating ZooKeeper brokers 3" in shown
        view = json.loads(status(zk_connect, url, "--format", "json"))["kraft"][0]["brokers"]
        assert (view["registered"], view["fenced"], view["waiting_for"]) == (3, 1, None)
    finally:
        for broker in brokers.values():
            broker.kill()
        bridge.stop()


def dual_writing_metrics() -> BridgeMetrics:
    metrics = BridgeMetrics(node_id=3000)
    metrics.set_state(DriverState.DUAL_WRITE)
    return metrics


def status_of(metrics: BridgeMetrics, zk_client: KazooClient, real_tree: ZTree, zk_connect: str) -> tuple[str, str]:
    """`zk2kraft status` of the real cluster's ZooKeeper beside a bridge reporting `metrics`: its URL, the output."""
    load_tree(zk_client, real_tree)
    with StatusServer(metrics, "127.0.0.1", 0) as server:
        return server.url, status(zk_connect, server.url)


def test_in_a_rehearsal_status_says_zookeeper_stands_in_for_registrations(
    zk_client: KazooClient, real_tree: ZTree, zk_connect: str
) -> None:
    metrics = dual_writing_metrics()
    metrics.set_brokers(BrokersStatus(registered=3, migrating_zk_brokers=3, rehearsal=True))
    url, shown = status_of(metrics, zk_client, real_tree, zk_connect)
    assert (
        f"brokers ({url}/status): rehearsal, ZooKeeper's /brokers/ids stand in for 3 registrations"
        in shown
    )
    assert "brokers registered" not in shown


def test_status_shows_each_brokers_controller_requests_queue_acknowledgements_and_errors(
    zk_client: KazooClient, real_tree: ZTree, zk_connect: str
) -> None:
    load_tree(zk_client, real_tree)
    metrics = BridgeMetrics(node_id=3000)
    metrics.set_state(DriverState.DUAL_WRITE)
    channel = BrokerChannelStatus(
        active=True,
        full_syncs=2,
        last_full_sync_brokers=0,
        brokers=[
            ChannelBroker(
                broker_id=1, address="10.0.0.1:9092", queue_depth=0, connected=True,
                last_sent=RequestMark(api="UpdateMetadata", at_ms=1_700_000_000_000),
                last_acknowledged=RequestMark(api="UpdateMetadata", at_ms=1_700_000_000_000),
                errors={"STALE_BROKER_EPOCH": 2}, full_syncs_sent=2,
            ),
            ChannelBroker(
                broker_id=2, address="10.0.0.2:9092", queue_depth=3, network_failures=40,
                last_sent=RequestMark(api="LeaderAndIsr", at_ms=1_700_000_000_000),
                last_network_error="SASL/PLAIN login to 10.0.0.2:9092 as alice failed: SASL_AUTHENTICATION_FAILED",
                failure_kind="authentication", retry_backoff_ms=1000,
            ),
        ],
        unreachable=[
            UnreachableBroker(
                broker_id=3, listeners=["PLAINTEXT"],
                reason="no endpoint on the inter-broker listener NOPE (--inter-broker-listener-name); "
                "it registered PLAINTEXT",
            ),
        ],
    )  # fmt: skip
    source = lambda: metrics.status().model_copy(update={"broker_channel": channel})  # noqa: E731
    with StatusServer(metrics, "127.0.0.1", 0, status=source) as server:
        url = server.url
        shown = status(zk_connect, url)
        view = json.loads(status(zk_connect, url, "--format", "json"))["kraft"][0]["broker_channel"]
    assert f"controller requests to brokers ({url}/status): 2 broker(s), 2 full sync(s) (the last reached 0 broker(s)), 1 unreachable" in shown
    assert "  NOT REACHED: 1 migrating broker(s) get no requests: 3" in shown
    assert "  broker 3: unreachable, no endpoint on the inter-broker listener NOPE" in shown
    # Connected or not, and times as UTC with their date (1_700_000_000_000 ms since the epoch).
    assert (
        "  broker 1 (10.0.0.1:9092): connected, queue 0, last sent UpdateMetadata at 2023-11-14T22:13:20Z, "
        "last acknowledged UpdateMetadata at 2023-11-14T22:13:20Z, " in shown
    )
    assert "errors STALE_BROKER_EPOCH x2, full syncs 2" in shown
    assert "  broker 2 (10.0.0.2:9092): disconnected, queue 3, last sent LeaderAndIsr at 2023-11-14T22:13:20Z" in shown
    assert "last acknowledged none, errors none, full syncs 0, network failures 40 (last: SASL/PLAIN login" in shown
    assert "SASL_AUTHENTICATION_FAILED), failing (authentication), next try in 1000 ms" in shown
    assert [b["queue_depth"] for b in view["brokers"]] == [0, 3]
    assert view["brokers"][0]["errors"] == {"STALE_BROKER_EPOCH": 2}
    assert [b["broker_id"] for b in view["unreachable"]] == [3]


def test_a_broker_in_zookeeper_that_never_registers_is_flagged_and_stopped_zk_brokers_are_not_kraft_brokers(
    zk_client: KazooClient, real_tree: ZTree, zk_connect: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Broker 4 restarted without the migration flag: in /brokers/ids, never registered. Then every
    ZooKeeper-mode broker stops: /brokers/ids is empty, but they are not KRaft brokers."""
    bridge = started_bridge(zk_client, real_tree, zk_connect, tmp_path)
    assert bridge.cluster_id is not None
    url = f"http://127.0.0.1:{bridge.metrics_port}"
    controller = ("127.0.0.1", bridge.listen_port)
    brokers = [
        SimulatedZkBroker(i, controller, bridge.cluster_id, zk_connect=zk_connect).start() for i in (1, 2, 3)
    ]
    try:
        assert bridge.wait_for_state(DriverState.DUAL_WRITE), bridge.error
        assert bridge.status().brokers.unregistered_zk_brokers == []
        caplog.set_level(logging.INFO, logger="bridge.controller")
        without_flag = zk_model.BrokerRegistration(
            broker_id=4, endpoints=[zk_model.BrokerEndpoint("PLAINTEXT", "localhost", 9092, "PLAINTEXT")], timestamp=1
        )
        zk_client.create("/brokers/ids/4", encode_broker(without_flag), ephemeral=True)
        eventually(lambda: bridge.status().brokers.unregistered_zk_brokers == [4], timeout=10)
        warnings = [r.getMessage() for r in caplog.records if "zk_brokers_not_registered" in r.getMessage()]
        assert len(warnings) == 1 and "ids=4" in warnings[0] and "zookeeper.metadata.migration.enable" in warnings[0]
        with urllib.request.urlopen(f"{url}/metrics", timeout=10) as reply:
            assert "zk2kraft_unregistered_zk_broker_count 1.0" in reply.read().decode()
        shown = status(zk_connect, url)
        assert f"NOT REGISTERED ({url}/status): broker(s) 4 in /brokers/ids are not registered" in shown

        zk_client.delete("/brokers/ids/4")
        eventually(lambda: bridge.status().brokers.unregistered_zk_brokers == [], timeout=10)
        for broker in brokers:
            broker.kill()  # their ZooKeeper sessions end: /brokers/ids is empty
        eventually(lambda: zk_client.get_children("/brokers/ids") == [], timeout=10)
        shown = status(zk_connect, url)
        assert "brokers in /brokers/ids (live, ZooKeeper mode): none" in shown
        assert "every broker runs in KRaft mode" not in shown
        assert "phase: dual-write — dual-write; no broker in /brokers/ids, but 3 broker(s) still registered" in shown
        assert json.loads(status(zk_connect, url, "--format", "json"))["phase"] == "dual-write"
    finally:
        for broker in brokers:
            broker.kill()
        bridge.stop()


def test_a_registered_broker_restarted_in_zookeeper_mode_without_the_flag_is_flagged_once_fenced(
    zk_client: KazooClient, real_tree: ZTree, zk_connect: str, tmp_path: Path
) -> None:
    """Broker 3 registered, then came back in ZooKeeper mode without the migration flag: its znode is back in
    /brokers/ids but it never heartbeats; once its session expires and it is fenced, it is flagged."""
    bridge = started_bridge(zk_client, real_tree, zk_connect, tmp_path)
    assert bridge.cluster_id is not None
    controller = ("127.0.0.1", bridge.listen_port)
    brokers = [
        SimulatedZkBroker(i, controller, bridge.cluster_id, zk_connect=zk_connect).start() for i in (1, 2, 3)
    ]
    try:
        assert bridge.wait_for_state(DriverState.DUAL_WRITE), bridge.error
        eventually(lambda: bridge.status().brokers.fenced == 0 and bridge.status().brokers.registered == 3, 20)
        brokers[2].kill()
        eventually(lambda: "3" not in zk_client.get_children("/brokers/ids"), timeout=10)
        without_flag = zk_model.BrokerRegistration(
            broker_id=3, endpoints=[zk_model.BrokerEndpoint("PLAINTEXT", "localhost", 9092, "PLAINTEXT")], timestamp=2
        )
        zk_client.create("/brokers/ids/3", encode_broker(without_flag), ephemeral=True)
        eventually(lambda: bridge.status().brokers.fenced == 1, timeout=10)
        eventually(lambda: bridge.status().brokers.unregistered_zk_brokers == [3], timeout=10)
    finally:
        for broker in brokers:
            broker.kill()
        bridge.stop()


def test_status_says_a_bridge_that_renounced_failed_and_why(
    zk_client: KazooClient, real_tree: ZTree, zk_connect: str
) -> None:
    metrics = dual_writing_metrics()
    metrics.set_failed("writing /meta/__cluster_metadata-0 failed: [Errno 28] No space left on device")
    url, shown = status_of(metrics, zk_client, real_tree, zk_connect)
    assert (
        f"BRIDGE FAILED ({url}/status): writing /meta/__cluster_metadata-0 failed: [Errno 28] No space left on "
        "device; it renounced" in shown
    )


def test_status_shows_the_raft_quorum_and_names_a_lagging_voter(
    zk_client: KazooClient, real_tree: ZTree, zk_connect: str
) -> None:
    metrics = dual_writing_metrics()
    metrics.set_raft(
        RaftStatus(
            role="leader",
            leader_id=3000,
            epoch=4,
            high_watermark=120,
            voters=[
                RaftVoterStatus(id=3000, log_end_offset=121, last_fetch_ms_ago=0, caught_up=True),
                RaftVoterStatus(id=3001, log_end_offset=120, last_fetch_ms_ago=40, caught_up=True),
                RaftVoterStatus(id=3002, log_end_offset=37, last_fetch_ms_ago=5200, caught_up=False),
            ],
        )
    )
    url, shown = status_of(metrics, zk_client, real_tree, zk_connect)
    assert (
        f"Raft quorum ({url}/status): leader in epoch 4, leader 3000, high watermark 120; voters: 3000 at 121, "
        "3001 at 120, 3002 at 37 (LAGGING, last fetch 5200 ms ago)" in shown
    )



def test_status_says_when_a_follower_would_read_all_of_zookeeper_if_elected(
    zk_client: KazooClient, real_tree: ZTree, zk_connect: str
) -> None:
    metrics = dual_writing_metrics()
    metrics.set_raft(RaftStatus(role="follower", leader_id=3001, epoch=4, high_watermark=120, zookeeper_copy="loading"))
    url, shown = status_of(metrics, zk_client, real_tree, zk_connect)
    assert (
        f"Raft quorum ({url}/status): follower in epoch 4, leader 3001, high watermark 120; still reading its copy "
        "of ZooKeeper (elected now, it would read all of ZooKeeper)" in shown
    )
