"""`--standby`: a second process for the same node and metadata directory waits (answering NOT_CONTROLLER)
while the active one holds the directory, and takes over when it stops; a fenced standby waits until
`/controller` is free and claims it again. Both reach DUAL_WRITE and serve requests on Kafka 3.5's real cluster."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kio.schema.errors import ErrorCode

from bridge.api import DriverState
from bridge.config import BridgeConfig
from bridge.controller import BridgeController
from bridge.kafka.client import send_request_sync
from bridge.zk.migration_client import ZkMigrationClient
from migrate.errors import EXIT_OK
from migrate.zk.cluster import from_tree
from migrate.zk.live import read_tree
from migrate.zk.load import load_tree
from migrate.zk.tree import ZTree
from tests.support.requests import SET, TOPIC, incremental

pytestmark = pytest.mark.zookeeper

NODE_ID = 3000
STOCK = "current_stock"



@pytest.fixture
def bridges() -> Iterator[list[BridgeController]]:
    started: list[BridgeController] = []
    yield started
    for bridge in started:
        bridge.stop()


def start(
    bridges: list[BridgeController], zk_connect: str, metadata_dir: Path, standby: bool
) -> BridgeController:
    config = BridgeConfig.model_validate(
        {"zk_connect": zk_connect, "metadata_dir": metadata_dir, "node_id": NODE_ID, "fsync": False,
         "standby": standby, "rehearsal": True}
    )  # fmt: skip
    bridge = BridgeController(config)
    bridges.append(bridge)
    return bridge.start()


def set_retention(bridge: BridgeController, value: str) -> ErrorCode:
    reply = send_request_sync(
        "127.0.0.1", bridge.listen_port, incremental(TOPIC, STOCK, ("retention.ms", SET, value))
    )
    [result] = reply.responses
    return ErrorCode(result.error_code)


def zk_retention(zk_connect: str) -> str | None:
    return from_tree(read_tree(zk_connect, acls=False)).topic_configs[STOCK].config.get("retention.ms")


def test_standby_takes_over_when_the_active_controller_stops(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path, bridges: list[BridgeController]
) -> None:
    load_tree(zk_client, real_tree)
    active = start(bridges, zk_connect, tmp_path / "meta", standby=False)
    assert active.wait_for_state(DriverState.DUAL_WRITE), active.error
    assert set_retention(active, "1000") == ErrorCode.none
    active_epoch = json.loads(zk_client.get("/controller")[0])["kraftControllerEpoch"]

    standby = start(bridges, zk_connect, tmp_path / "meta", standby=True)
    # Waiting for the metadata directory: up, answering NOT_CONTROLLER, not leading.
    assert not standby.wait_for_state(DriverState.DUAL_WRITE, timeout=1.0)
    assert standby.status().state != "DUAL_WRITE"
    assert set_retention(standby, "2000") == ErrorCode.not_controller

    assert active.stop() == EXIT_OK
    assert standby.wait_for_state(DriverState.DUAL_WRITE), standby.error
    controller = json.loads(zk_client.get("/controller")[0])
    assert controller["brokerid"] == NODE_ID and controller["kraftControllerEpoch"] == active_epoch + 1
    # It continues the same log: the earlier change is there, and new ones reach ZooKeeper.
    assert standby.log is not None
    assert standby.log.image.configs[(TOPIC, STOCK)]["retention.ms"] == "1000"
    assert set_retention(standby, "3000") == ErrorCode.none
    assert zk_retention(zk_connect) == "3000"


def test_fenced_standby_waits_for_a_free_controller_znode_and_claims_it_again(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path, bridges: list[BridgeController]
) -> None:
    load_tree(zk_client, real_tree)
    bridge = start(bridges, zk_connect, tmp_path / "meta", standby=True)
    assert bridge.wait_for_state(DriverState.DUAL_WRITE), bridge.error
    assert bridge.log is not None
    epoch = bridge.log.leader_epoch

    # Another KRaft controller takes ZooKeeper over with a newer epoch.
    rival = ZkMigrationClient(zk_client)
    state = rival.get_or_create_migration_state()
    state = rival.claim_controller_leadership(state, 3001, epoch + 5)
    rival.set_migration_state(state, -1)

    # The fence watch notices the takeover without a write: FENCED, still up, and a change sent now is
    # refused before it is committed, so nothing of it lands in the log or in ZooKeeper.
    deadline = time.monotonic() + 30
    while not bridge.status().fenced and time.monotonic() < deadline:
        time.sleep(0.05)
    assert bridge.status().state == "FENCED" and bridge.status().fenced
    assert set_retention(bridge, "1234") == ErrorCode.not_controller
    assert zk_retention(zk_connect) == "3600000"
    assert bridge.exit_code is None

    # The operator removes the other controller's /controller: the standby claims it and reconciles.
    zk_client.delete("/controller")
    assert bridge.wait_for_state(DriverState.DUAL_WRITE), bridge.error
    assert not bridge.status().fenced
    assert bridge.log is not None and bridge.log.leader_epoch == epoch + 1
    controller = json.loads(zk_client.get("/controller")[0])
    assert (controller["brokerid"], controller["kraftControllerEpoch"]) == (NODE_ID, epoch + 1)
    assert zk_retention(zk_connect) == "3600000"
    assert set_retention(bridge, "5000") == ErrorCode.none
    assert zk_retention(zk_connect) == "5000"
