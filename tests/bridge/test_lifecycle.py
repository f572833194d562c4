"""What a refused or failed bridge leaves behind, on Kafka 3.5's real cluster in a real ZooKeeper: a refusal
changes neither ZooKeeper nor the metadata directory; a failure after claiming `/controller` releases it and
puts `/migration` back, and the error says what ZooKeeper holds and how to restore it."""

from __future__ import annotations

import json
import logging
import os
import shlex
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from kazoo.client import KazooClient

from bridge.api import DriverState
from bridge.config import EXIT_REFUSED, BridgeConfig
from bridge.controller import BridgeController
from bridge.driver import MigrationDriver
from cli.main import cli
from migrate.errors import EXIT_OK
from migrate.kraft.logdir import list_segments
from migrate.kraft.reader import METADATA_PARTITION_DIR
from migrate.plan.status import read_status
from migrate.zk.live import read_tree
from migrate.zk.load import load_tree
from migrate.zk.tree import ZTree
from tests.support.bridge import running_bridge

pytestmark = pytest.mark.zookeeper

NODE_ID = 3000
TOPIC = "current_stock"
TOPIC_ZNODE = f"/brokers/topics/{TOPIC}"
MALFORMED = b'{"version":3,"partitions":{"0":[1,2'


@pytest.fixture
def seeded(zk_client: KazooClient, real_tree: ZTree) -> KazooClient:
    """The real Kafka 3.5 cluster's znodes, with its ZooKeeper controller gone (so /controller is free)."""
    load_tree(zk_client, real_tree)
    if zk_client.exists("/controller"):
        zk_client.delete("/controller")
    return zk_client


def config(zk_connect: str, metadata_dir: Path, **overrides: object) -> BridgeConfig:
    values: dict[str, object] = {
        "zk_connect": zk_connect, "metadata_dir": metadata_dir, "node_id": NODE_ID, "metrics_port": 0,
        "fsync": False, "rehearsal": True,
    }  # fmt: skip
    values.update(overrides)
    return BridgeConfig.model_validate(values)


def run(cfg: BridgeConfig) -> BridgeController:
    bridge = BridgeController(cfg, handlers={}, supported={})
    bridge.run()
    return bridge


@pytest.fixture
def bridges() -> Iterator[list[BridgeController]]:
    started: list[BridgeController] = []
    yield started
    for bridge in started:
        bridge.stop()


def tree_state(zk_connect: str) -> dict[str, tuple[bytes | None, int]]:
    return {n.path: (n.data, n.stat.version) for n in read_tree(zk_connect, acls=False)}


def dir_bytes(directory: Path) -> dict[str, bytes]:
    """Every file under `directory` (names and contents)."""
    return {
        str(path.relative_to(directory)): path.read_bytes()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def migrated_dir(zk_connect: str, metadata_dir: Path, bridges: list[BridgeController]) -> None:
    """Run a bridge to DUAL_WRITE over `metadata_dir`, then stop it cleanly."""
    bridge = BridgeController(config(zk_connect, metadata_dir), handlers={}, supported={})
    bridges.append(bridge)
    bridge.start()
    assert bridge.wait_for_state(DriverState.DUAL_WRITE), bridge.error
    assert bridge.stop() == EXIT_OK


def foreign_migration(client: KazooClient) -> None:
    """`/migration` as another controller's longer log left it."""
    data, _stat = client.get("/migration")
    znode = json.loads(data)
    znode.update(kraft_controller_id=3999, kraft_metadata_offset=znode["kraft_metadata_offset"] + 1000)
    client.set("/migration", json.dumps(znode).encode())


def tear_tail(meta: Path) -> None:
    """Append the first bytes of a batch a crash interrupted to the newest segment."""
    segment = list_segments(meta / METADATA_PARTITION_DIR)[-1].path
    header = (10**6).to_bytes(8, "big") + (500).to_bytes(4, "big") + b"\x00\x00\x00\x07\x02"
    with open(segment, "ab") as f:
        f.write(header + os.urandom(20))


# ---------------------------------------------------------------------------------------------- refusals


def test_a_malformed_topic_znode_is_refused_before_claiming_or_formatting(
    seeded: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    seeded.set(TOPIC_ZNODE, MALFORMED)
    before = tree_state(zk_connect)
    bridge = run(config(zk_connect, tmp_path / "meta"))
    assert bridge.exit_code == EXIT_REFUSED, bridge.error
    assert bridge.error is not None and TOPIC_ZNODE in bridge.error
    assert tree_state(zk_connect) == before  # no /controller, /controller_epoch or /migration write
    assert not (tmp_path / "meta").exists()


def test_a_foreign_migration_znode_is_refused_before_formatting(
    seeded: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    leftover = {"version": 0, "kraft_controller_id": 3001, "kraft_controller_epoch": 7,
                "kraft_metadata_offset": 5000, "kraft_metadata_epoch": 7}  # fmt: skip
    seeded.create("/migration", json.dumps(leftover).encode())
    before = tree_state(zk_connect)
    bridge = run(config(zk_connect, tmp_path / "meta"))
    assert bridge.exit_code == EXIT_REFUSED
    assert bridge.error is not None and "5000" in bridge.error
    assert not (tmp_path / "meta").exists()
    assert tree_state(zk_connect) == before


def test_a_refusal_leaves_an_existing_metadata_dir_byte_identical(
    seeded: KazooClient, zk_connect: str, tmp_path: Path, bridges: list[BridgeController]
) -> None:
    meta = tmp_path / "meta"
    migrated_dir(zk_connect, meta, bridges)
    foreign_migration(seeded)
    before = dir_bytes(meta)
    bridge = run(config(zk_connect, meta))
    assert bridge.exit_code == EXIT_REFUSED
    assert bridge.error is not None and "beyond the end of this metadata log" in bridge.error
    assert dir_bytes(meta) == before


def test_a_refusal_does_not_truncate_a_torn_log_tail(
    seeded: KazooClient, zk_connect: str, tmp_path: Path, bridges: list[BridgeController]
) -> None:
    meta = tmp_path / "meta"
    migrated_dir(zk_connect, meta, bridges)
    tear_tail(meta)
    foreign_migration(seeded)
    before = dir_bytes(meta)
    bridge = run(config(zk_connect, meta))
    assert bridge.exit_code == EXIT_REFUSED, bridge.error
    assert dir_bytes(meta) == before  # the torn tail is still there: recovery waits for a real start


@pytest.mark.parametrize("torn", [False, True], ids=["intact-log", "torn-tail"])
def test_a_completed_log_against_a_reset_zookeeper_is_refused_before_any_write(
    seeded: KazooClient, zk_connect: str, tmp_path: Path, bridges: list[BridgeController], torn: bool
) -> None:
    meta = tmp_path / "meta"
    migrated_dir(zk_connect, meta, bridges)
    if torn:
        tear_tail(meta)
    seeded.delete("/migration")  # ZooKeeper was reset: the log's completed migration is unknown to it
    before_zk, before_dir = tree_state(zk_connect), dir_bytes(meta)
    bridge = run(config(zk_connect, meta))
    assert bridge.exit_code == EXIT_REFUSED, bridge.error
    assert bridge.error is not None and "records none" in bridge.error
    assert tree_state(zk_connect) == before_zk  # no /migration, /controller or /controller_epoch
    assert dir_bytes(meta) == before_dir  # no LeaderChange, quorum-state, checkpoint or truncation


@pytest.mark.parametrize("option", ["--listen", "--metrics"])
def test_a_busy_port_is_refused_naming_the_option_before_formatting_or_claiming(
    seeded: KazooClient, zk_connect: str, tmp_path: Path, caplog: pytest.LogCaptureFixture, option: str
) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        field = "listen_port" if option == "--listen" else "metrics_port"
        before = tree_state(zk_connect)
        bridge = run(config(zk_connect, tmp_path / "meta", **{field: port}))
    assert bridge.exit_code == EXIT_REFUSED, bridge.error
    assert bridge.error is not None and f"{option} 127.0.0.1:{port}" in bridge.error
    assert "already in use" in bridge.error
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    assert not (tmp_path / "meta").exists()
    assert tree_state(zk_connect) == before


def test_adopting_with_a_fresh_metadata_dir_is_refused_before_formatting(
    seeded: KazooClient, zk_connect: str, tmp_path: Path, bridges: list[BridgeController]
) -> None:
    """A fresh log's first epoch cannot outrank the KRaft controller in /controller: it could never take over."""
    migrated_dir(zk_connect, tmp_path / "first", bridges)
    before = tree_state(zk_connect)
    fresh = tmp_path / "fresh"
    bridge = run(config(zk_connect, fresh, node_id=NODE_ID + 1, adopt_existing_migration=True))
    assert bridge.exit_code == EXIT_REFUSED, bridge.error
    assert bridge.error is not None and "could never take control" in bridge.error
    assert f"KRaft controller {NODE_ID} holds /controller (kraftControllerEpoch 1" in bridge.error
    assert "fenced" not in bridge.error
    assert not fresh.exists()
    assert tree_state(zk_connect) == before


def test_a_rehearsal_over_brokers_with_live_sessions_is_refused_before_claiming(
    seeded: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    """A copy of ZooKeeper has no live broker sessions; live ones mean the rehearsal would take over a cluster."""
    data, _stat = seeded.get("/brokers/ids/1")
    seeded.delete("/brokers/ids/1")
    seeded.create("/brokers/ids/1", data, ephemeral=True)  # broker 1 as it registers while running
    session = seeded.exists("/brokers/ids/1").ephemeralOwner
    assert session != 0
    before = tree_state(zk_connect)
    bridge = run(config(zk_connect, tmp_path / "meta"))
    assert bridge.exit_code == EXIT_REFUSED, bridge.error
    assert bridge.error is not None
    assert f"broker 1 (session 0x{session:x})" in bridge.error
    assert "without --rehearsal" in bridge.error and "copy" in bridge.error
    assert not seeded.exists("/controller")
    assert tree_state(zk_connect) == before
    assert not (tmp_path / "meta").exists()


def test_without_rehearsal_live_broker_sessions_are_no_refusal(
    seeded: KazooClient, zk_connect: str, tmp_path: Path, bridges: list[BridgeController]
) -> None:
    """Kafka's own controller runs over live brokers: only a rehearsal refuses them."""
    data, _stat = seeded.get("/brokers/ids/1")
    seeded.delete("/brokers/ids/1")
    seeded.create("/brokers/ids/1", data, ephemeral=True)
    bridge = BridgeController(
        config(zk_connect, tmp_path / "meta", rehearsal=False), handlers={}, supported={}
    )
    bridges.append(bridge)
    bridge.start()
    assert bridge.wait_for_state(DriverState.WAIT_FOR_BROKERS), bridge.error


# ---------------------------------------------------------------------------------------------- failures


def test_a_failure_after_the_claim_releases_controller_and_restores_migration(
    seeded: KazooClient, zk_connect: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not seeded.exists("/migration")
    epoch_before = int(seeded.get("/controller_epoch")[0])
    claim = MigrationDriver.become_controller

    async def claim_then_damage(self: MigrationDriver) -> None:
        # A ZooKeeper-mode admin writes a malformed topic znode between the bridge's checks and its copy.
        await claim(self)
        seeded.set(TOPIC_ZNODE, MALFORMED)

    monkeypatch.setattr(MigrationDriver, "become_controller", claim_then_damage)
    bridge = run(config(zk_connect, tmp_path / "meta"))
    assert bridge.exit_code not in (None, EXIT_OK)
    error = bridge.error or ""
    assert TOPIC_ZNODE in error, error
    # The fault happened after the claim: /controller_epoch moved on.
    assert int(seeded.get("/controller_epoch")[0]) == epoch_before + 1
    assert "/controller_epoch" in error and "/controller" in error and "/migration" in error

    # /controller is free: a ZooKeeper-mode broker can be elected (its ephemeral create succeeds).
    assert not seeded.exists("/controller")
    # /migration is as it was (absent): status does not claim a migration is copying.
    assert not seeded.exists("/migration")
    status = read_status(seeded)
    assert status.phase == "zookeeper", status
    seeded.create("/controller", b'{"version":1,"brokerid":1,"timestamp":"1"}', ephemeral=True)


def test_a_failure_after_the_claim_puts_back_an_earlier_migration_znode(
    seeded: KazooClient, zk_connect: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    earlier = {"version": 0, "kraft_controller_id": 3001, "kraft_controller_epoch": 2,
               "kraft_metadata_offset": -1, "kraft_metadata_epoch": -1}  # fmt: skip
    seeded.create("/migration", json.dumps(earlier).encode())
    claim = MigrationDriver.become_controller

    async def claim_then_damage(self: MigrationDriver) -> None:
        await claim(self)
        assert json.loads(seeded.get("/migration")[0])["kraft_controller_id"] == NODE_ID
        seeded.set(TOPIC_ZNODE, MALFORMED)

    monkeypatch.setattr(MigrationDriver, "become_controller", claim_then_damage)
    bridge = run(config(zk_connect, tmp_path / "meta"))
    assert bridge.exit_code not in (None, EXIT_OK)
    assert not seeded.exists("/controller")
    assert json.loads(seeded.get("/migration")[0]) == earlier


def test_a_controller_claimed_by_someone_else_meanwhile_is_not_released(
    seeded: KazooClient, zk_connect: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    claim = MigrationDriver.become_controller
    rival = b'{"version":2,"brokerid":3001,"timestamp":"1","kraftControllerEpoch":99}'

    async def claim_then_lose(self: MigrationDriver) -> None:
        await claim(self)
        # Another KRaft controller takes over (its claim bumps /controller_epoch), then the copy fails.
        data, stat = seeded.get("/controller_epoch")
        transaction = seeded.transaction()
        transaction.set_data("/controller_epoch", str(int(data) + 1).encode(), stat.version)
        transaction.delete("/controller")
        transaction.create("/controller", rival)
        transaction.commit()
        seeded.set(TOPIC_ZNODE, MALFORMED)

    monkeypatch.setattr(MigrationDriver, "become_controller", claim_then_lose)
    bridge = run(config(zk_connect, tmp_path / "meta"))
    assert bridge.exit_code not in (None, EXIT_OK)
    assert seeded.get("/controller")[0] == rival
    assert "3001" in (bridge.error or "")



def test_a_clean_stop_names_the_hand_off_check_of_its_directory_and_that_check_passes(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="bridge.controller")
    with running_bridge(zk_client, zk_connect, real_tree, tmp_path):
        pass
    line = next(r.getMessage() for r in caplog.records if "event=next_step" in r.getMessage())
    command = shlex.split(line.split("check it first: ", 1)[1].split("; docs/handoff.md")[0])
    assert command[:5] == ["zk2kraft", "handoff", "check", "--metadata-dir", str(tmp_path / "meta")]
    result = CliRunner().invoke(cli, command[1:])
    assert result.exit_code == EXIT_OK, result.output
