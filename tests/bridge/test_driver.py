"""Bridge driver on a real ZooKeeper seeded with Kafka 3.5's real cluster: claim, migrate once, reconcile,
refuse a `/migration` that does not belong to the log, redo an interrupted migration, dry-run, fencing."""

from __future__ import annotations

import json
import logging
import re
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from kazoo.client import KazooClient
from kio.schema.errors import ErrorCode

from bridge.api import DriverState
from bridge.config import EXIT_REFUSED, BridgeConfig
from bridge.controller import BridgeController
from bridge.driver import MetadataLogLike
from bridge.kafka.client import send_request_sync
from bridge.raft.metadata_log import MetadataLog
from bridge.zk.migration_client import ZkMigrationClient
from bridge.zk.planner import describe, plan_reconciliation
from cli.main import cli
from migrate.errors import EXIT_FENCED, EXIT_OK
from migrate.kraft import records as rec
from migrate.kraft.reader import iter_log_dir
from migrate.zk.cluster import from_tree
from migrate.zk.embedded import EmbeddedZooKeeper
from migrate.zk.live import read_tree
from migrate.zk.load import load_tree
from migrate.zk.tree import ZTree
from tests.support.bridge import eventually
from tests.support.bridge_process import bridge_process
from tests.support.requests import SET, TOPIC, create_partitions, create_topic, incremental
from tests.support.zk_broker import SimulatedZkBroker
from tests.support.zookeeper import session_requests

pytestmark = pytest.mark.zookeeper

NODE_ID = 3000



@pytest.fixture
def seeded(zk_client: KazooClient, real_tree: ZTree) -> KazooClient:
    """The test's chroot holds the real Kafka 3.5 cluster's znodes."""
    load_tree(zk_client, real_tree)
    return zk_client


def config(zk_connect: str, metadata_dir: Path, **overrides: object) -> BridgeConfig:
    values: dict[str, object] = {
        "zk_connect": zk_connect,
        "metadata_dir": metadata_dir,
        "node_id": NODE_ID,
        "metrics_port": 0,
        "fsync": False,
        "rehearsal": True,
    }
    values.update(overrides)
    return BridgeConfig.model_validate(values)


@pytest.fixture
def bridges() -> Iterator[list[BridgeController]]:
    """Started controllers, stopped at the end of the test whatever happened."""
    started: list[BridgeController] = []
    yield started
    for bridge in started:
        bridge.stop()


def start(bridges: list[BridgeController], cfg: BridgeConfig) -> BridgeController:
    bridge = BridgeController(cfg, handlers={}, supported={})
    bridges.append(bridge)
    return bridge.start()


def mlog(bridge: BridgeController) -> MetadataLogLike:
    assert bridge.log is not None
    return bridge.log


def migration_znode(client: KazooClient) -> dict[str, int]:
    data, _stat = client.get("/migration")
    return json.loads(data)  # type: ignore[no-any-return]


def log_records(metadata_dir: Path) -> list[rec.Any]:  # type: ignore[name-defined]
    return [e.record for e in iter_log_dir(metadata_dir) if not e.is_control]


def test_claims_migrates_once_and_reaches_dual_write(
    seeded: KazooClient, zk_connect: str, tmp_path: Path, bridges: list[BridgeController]
) -> None:
    before = from_tree(read_tree(zk_connect, acls=False))
    bridge = start(bridges, config(zk_connect, tmp_path / "meta"))
    assert bridge.wait_for_state(DriverState.DUAL_WRITE), bridge.error
    status = bridge.status()
    assert status.state == "DUAL_WRITE" and status.migration_state == "MIGRATION"

    # /controller names us with the log's epoch; /controller_epoch moved on; /migration has our offset.
    controller = json.loads(seeded.get("/controller")[0])
    assert (
        controller["brokerid"] == NODE_ID and controller["kraftControllerEpoch"] == mlog(bridge).leader_epoch
    )
    assert int(seeded.get("/controller_epoch")[0]) == before.controller_epoch.epoch + 1  # type: ignore[union-attr]
    znode = migration_znode(seeded)
    assert znode["kraft_controller_id"] == NODE_ID
    assert znode["kraft_metadata_offset"] == bridge.driver.migration.last_offset  # type: ignore[union-attr]
    assert status.zk_metadata_offset == znode["kraft_metadata_offset"]

    # The log holds one "ZK Migration" transaction with the whole cluster, ending with MIGRATION.
    records = log_records(tmp_path / "meta")
    begins = [r for r in records if isinstance(r, rec.BeginTransactionRecord) and r.name == "ZK Migration"]
    assert len(begins) == 1
    image = mlog(bridge).image
    assert sorted(image.topics_by_name) == ["__consumer_offsets", "current_stock"]
    assert image.partition_count() == 53
    manifest = bridge.driver.migration.manifest  # type: ignore[union-attr]
    assert manifest.record_type_names()["PARTITION_RECORD"] == 53
    # ZooKeeper's Kafka data is unchanged by the reconciliation that follows a fresh migration.
    after = from_tree(read_tree(zk_connect, acls=False))
    assert after.topics == before.topics and after.topic_configs == before.topic_configs
    assert after.broker_configs == before.broker_configs and after.config_changes == before.config_changes
    assert bridge.stop() == EXIT_OK


def test_restart_does_not_migrate_again_and_finds_nothing_to_reconcile(
    seeded: KazooClient, zk_connect: str, tmp_path: Path, bridges: list[BridgeController]
) -> None:
    first = start(bridges, config(zk_connect, tmp_path / "meta"))
    assert first.wait_for_state(DriverState.DUAL_WRITE), first.error
    first_epoch = mlog(first).leader_epoch
    assert first.stop() == EXIT_OK

    second = start(bridges, config(zk_connect, tmp_path / "meta"))
    assert second.wait_for_state(DriverState.DUAL_WRITE), second.error
    assert second.driver.migration is None  # type: ignore[union-attr]
    assert second.driver.reconciliation_ops == []  # type: ignore[union-attr]
    assert mlog(second).leader_epoch == first_epoch + 1
    records = log_records(tmp_path / "meta")
    assert sum(isinstance(r, rec.BeginTransactionRecord) and r.name == "ZK Migration" for r in records) == 1
    assert migration_znode(seeded)["kraft_controller_epoch"] == first_epoch + 1


def test_the_reconciliation_after_a_fresh_migration_plans_from_the_load_without_reading_again(
    seeded: KazooClient,
    zk_connect: str,
    tmp_path: Path,
    bridges: list[BridgeController],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="bridge.driver")
    bridge = start(bridges, config(zk_connect, tmp_path / "meta"))
    assert bridge.wait_for_state(DriverState.DUAL_WRITE), bridge.error
    line = next(r.getMessage() for r in caplog.records if "event=reconciliation" in r.getMessage())
    assert "zookeeper=load read_s=0.00" in line, line
    # The same writes as against a fresh read of ZooKeeper.
    fresh = plan_reconciliation(mlog(bridge).image, from_tree(read_tree(zk_connect, acls=False)))
    assert describe(bridge.driver.reconciliation_ops) == describe(fresh)  # type: ignore[union-attr]
    assert bridge.driver.loaded_copy is None  # type: ignore[union-attr]


def test_the_reconciliation_log_line_names_what_it_rewrites(
    seeded: KazooClient, zk_connect: str, tmp_path: Path, bridges: list[BridgeController],
    caplog: pytest.LogCaptureFixture,
) -> None:
    first = start(bridges, config(zk_connect, tmp_path / "meta"))
    assert first.wait_for_state(DriverState.DUAL_WRITE), first.error
    assert first.stop() == EXIT_OK
    state = "/brokers/topics/current_stock/partitions/0/state"
    data, _stat = seeded.get(state)
    seeded.set(state, data)  # a foreign write while no bridge ran: the state's version moved on
    caplog.set_level(logging.INFO, logger="bridge.driver")
    second = start(bridges, config(zk_connect, tmp_path / "meta"))
    assert second.wait_for_state(DriverState.DUAL_WRITE), second.error
    line = next(r.getMessage() for r in caplog.records if "event=reconciliation" in r.getMessage())
    assert "ops=1 {UpdatePartition=1} writes: Updating Partitions for Topic current_stock" in line, line


def test_refuses_a_migration_znode_from_another_log_unless_adopted(
    seeded: KazooClient, zk_connect: str, tmp_path: Path, bridges: list[BridgeController]
) -> None:
    # The leftover-znode trap: ZooKeeper says a controller migrated up to offset 5000; our log is empty.
    leftover = {"version": 0, "kraft_controller_id": 3001, "kraft_controller_epoch": 7,
                "kraft_metadata_offset": 5000, "kraft_metadata_epoch": 7}  # fmt: skip
    seeded.create("/migration", json.dumps(leftover).encode())
    bridge = BridgeController(config(zk_connect, tmp_path / "meta"), handlers={}, supported={})
    assert bridge.run() == EXIT_REFUSED
    assert bridge.error is not None and "refusing to start" in bridge.error
    assert "--adopt-existing-migration" in bridge.error and "5000" in bridge.error
    assert migration_znode(seeded) == leftover  # nothing written
    assert (
        not seeded.exists("/controller")
        or json.loads(seeded.get("/controller")[0]).get("brokerid") != NODE_ID
    )

    adopted = start(bridges, config(zk_connect, tmp_path / "meta", adopt_existing_migration=True))
    assert adopted.wait_for_state(DriverState.DUAL_WRITE), adopted.error
    assert migration_znode(seeded)["kraft_metadata_offset"] == adopted.driver.migration.last_offset  # type: ignore[union-attr]


def test_refuses_when_zookeeper_is_ahead_of_the_log(
    seeded: KazooClient, zk_connect: str, tmp_path: Path, bridges: list[BridgeController]
) -> None:
    first = start(bridges, config(zk_connect, tmp_path / "meta"))
    assert first.wait_for_state(DriverState.DUAL_WRITE), first.error
    first.stop()
    znode = migration_znode(seeded)
    znode["kraft_metadata_offset"] += 1000  # another (longer) log reflected in ZooKeeper
    seeded.set("/migration", json.dumps(znode).encode())
    bridge = BridgeController(config(zk_connect, tmp_path / "meta"), handlers={}, supported={})
    assert bridge.run() == EXIT_REFUSED
    assert bridge.error is not None and "beyond the end of this metadata log" in bridge.error


def test_an_interrupted_migration_is_aborted_and_redone(
    seeded: KazooClient, zk_connect: str, tmp_path: Path, bridges: list[BridgeController]
) -> None:
    # A crash in the middle: the log has begun the migration transaction and written part of it.
    cluster_id = json.loads(seeded.get("/cluster/id")[0])["id"]
    partial = MetadataLog.open(tmp_path / "meta", node_id=NODE_ID, cluster_id=cluster_id, fsync=False)
    ghost = uuid.uuid4()
    partial.append([(rec.BeginTransactionRecord(name="ZK Migration"), 0)])
    partial.append([(rec.TopicRecord(name="ghost", topic_id=ghost), 0)])
    partial.close()

    bridge = start(bridges, config(zk_connect, tmp_path / "meta"))
    assert bridge.wait_for_state(DriverState.DUAL_WRITE), bridge.error
    assert "ghost" not in mlog(bridge).image.topics_by_name
    assert sorted(mlog(bridge).image.topics_by_name) == ["__consumer_offsets", "current_stock"]
    records = log_records(tmp_path / "meta")
    assert any(isinstance(r, rec.AbortTransactionRecord) for r in records)
    assert not seeded.exists("/brokers/topics/ghost")


def test_dry_run_prints_the_plan_and_writes_nothing(
    seeded: KazooClient, zk_connect: str, tmp_path: Path, bridges: list[BridgeController]
) -> None:
    first = start(bridges, config(zk_connect, tmp_path / "meta"))
    assert first.wait_for_state(DriverState.DUAL_WRITE), first.error
    first.stop()
    # Someone deletes a topic's config znode behind our back; the dry run plans to put it back.
    seeded.delete("/config/topics/current_stock")
    before = read_tree(zk_connect, acls=False)
    dry = BridgeController(config(zk_connect, tmp_path / "meta", dry_run=True), handlers={}, supported={})
    assert dry.run() == EXIT_OK
    assert any("current_stock" in line for line in dry.dry_run_lines), dry.dry_run_lines
    after = read_tree(zk_connect, acls=False)
    assert {n.path: (n.data, n.stat.version) for n in after} == {
        n.path: (n.data, n.stat.version) for n in before
    }


def test_fenced_controller_notices_without_a_write_and_exits_naming_the_new_holder(
    seeded: KazooClient,
    zk_connect: str,
    zk_server: EmbeddedZooKeeper,
    tmp_path: Path,
    bridges: list[BridgeController],
) -> None:
    bridge = start(bridges, config(zk_connect, tmp_path / "meta"))
    assert bridge.wait_for_state(DriverState.DUAL_WRITE), bridge.error
    # Another KRaft controller takes over ZooKeeper with a newer epoch.
    other = KazooClient(hosts=zk_connect)
    other.start(timeout=15)
    try:
        rival = ZkMigrationClient(other)
        state = rival.get_or_create_migration_state()
        state = rival.claim_controller_leadership(state, 3001, mlog(bridge).leader_epoch + 5)
        rival.set_migration_state(state, -1)
    finally:
        other.stop()
        other.close()
    # It notices without writing anything (its watches fire), reports FENCED and exits naming the new holder.
    assert bridge._thread is not None
    bridge._thread.join(30)
    assert bridge.exit_code == EXIT_FENCED, bridge.error
    assert bridge.status().state == "FENCED"
    assert bridge.error is not None and "KRaft controller 3001 holds /controller" in bridge.error
    assert b"zk2kraft_fenced 1.0" in bridge.metrics.exposition()
    assert json.loads(seeded.get("/migration")[0])["kraft_controller_id"] == 3001  # nothing of ours landed


def test_cli_runs_until_dual_write_and_exits_zero_on_sigterm(
    seeded: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    command = [
        sys.executable, "-m", "cli.main", "bridge", "run", "--zk", zk_connect,
        "--metadata-dir", str(tmp_path / "meta"), "--node-id", str(NODE_ID),
        "--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0", "--no-fsync", "--rehearsal",
    ]  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    try:
        assert process.stderr is not None
        url = None
        for line in process.stderr:
            lines.append(line)
            found = re.search(r"metrics=(http://\S+)", line)
            if found:
                url = found.group(1)
                break
        assert url is not None, "".join(lines)
        deadline = time.monotonic() + 60
        status: dict[str, object] = {}
        while time.monotonic() < deadline:
            with urllib.request.urlopen(f"{url}/status", timeout=5) as reply:
                status = json.loads(reply.read())
            if status["state"] == "DUAL_WRITE":
                break
            time.sleep(0.1)
        assert status["state"] == "DUAL_WRITE", status
        process.send_signal(signal.SIGTERM)
        _, rest = process.communicate(timeout=60)
        lines.append(rest)
        assert process.returncode == 0, "".join(lines)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    text = "".join(lines)
    # One structured line per transition, in Kafka's order.
    transitions = re.findall(r"event=state_transition from=(\w+) to=(\w+)", text)
    assert [to for _from, to in transitions] == [
        "INACTIVE", "WAIT_FOR_CONTROLLER_QUORUM", "BECOME_CONTROLLER", "ZK_MIGRATION", "SYNC_KRAFT_TO_ZK",
        "KRAFT_CONTROLLER_TO_BROKER_COMM", "DUAL_WRITE",
    ]  # fmt: skip
    assert "Completed migration of metadata from ZooKeeper to KRaft. " in text
    assert "The record types were {TOPIC_RECORD=2, PARTITION_RECORD=53" in text


def test_cli_help_teaches_with_an_example() -> None:
    result = CliRunner().invoke(cli, ["bridge", "run", "--help"])
    assert result.exit_code == 0
    assert "Example:" in result.output and "--adopt-existing-migration" in result.output


def test_a_restart_after_dual_write_topic_changes_reconciles_nothing(
    seeded: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    """Topics created and grown in DUAL_WRITE, placed on brokers that registered their log directories, are in
    ZooKeeper as the log has them (ZooKeeper holds no directories): a clean restart plans no write and names
    none, and a dry run lists none."""
    cluster_id = json.loads(seeded.get("/cluster/id")[0])["id"]
    log_path = tmp_path / "bridge.log"
    brokers: list[SimulatedZkBroker] = []
    try:
        with bridge_process(
            zk_connect=zk_connect, metadata_dir=tmp_path / "meta", node_id=NODE_ID, log_path=log_path,
            fsync=False, rehearsal=False,
        ) as bridge:  # fmt: skip
            bridge.start().wait_for_status()
            brokers += [
                SimulatedZkBroker(b, ("127.0.0.1", bridge.listen_port), cluster_id, zk_connect=zk_connect).start()
                for b in (1, 2, 3)
            ]
            bridge.wait_for_state("DUAL_WRITE")
            eventually(lambda: (bridge.status() or {}).get("brokers", {}).get("fenced") == 0, timeout=30)
            requests = [create_topic("t_new", partitions=2, replication_factor=2), create_partitions("t_new", 3)]
            for request in requests:
                response = send_request_sync("127.0.0.1", bridge.listen_port, request)
                items = getattr(response, "topics", None) or response.results
                assert [item.error_code for item in items] == [ErrorCode.none], response
            assert bridge.terminate() == EXIT_OK  # with the brokers connected: the channel stops at once
            for broker in brokers:  # the restart needs no broker: its log holds the migration
                broker.kill()
            first_start = bridge.log_text()
            bridge.start().wait_for_state("DUAL_WRITE")
            assert bridge.terminate() == EXIT_OK
    finally:
        for broker in brokers:
            broker.kill()
    restarted = bridge.log_text()[len(first_start) :]
    assert re.search(r"event=reconciliation zookeeper=read .*ops=0\b", restarted), restarted
    assert "t_new" not in restarted.split("event=reconciliation", 1)[1].splitlines()[0]
    dry = CliRunner().invoke(
        cli, ["bridge", "run", "--zk", zk_connect, "--metadata-dir", str(tmp_path / "meta"),
              "--node-id", str(NODE_ID), "--dry-run"],
    )  # fmt: skip
    assert dry.exit_code == 0, dry.output
    assert "t_new" not in dry.output, dry.output


def test_a_dual_write_costs_the_bridge_at_most_two_zookeeper_requests(
    bridge: BridgeController, zk_server: EmbeddedZooKeeper
) -> None:
    """A dual write of one config change costs the bridge's ZooKeeper session its multi and at most the
    foreign-write watcher's re-arming read; the fence's watches do not fire at our own writes, so no fence
    check's reads queue ahead of the next write's multi."""
    assert bridge.kazoo is not None
    session_id = bridge.kazoo.client_id[0]
    changes = 30
    before = session_requests(zk_server, session_id)
    for value in range(changes):
        request = incremental(TOPIC, "current_stock", ("retention.ms", SET, str(60_000 + value)))
        response = send_request_sync("127.0.0.1", bridge.listen_port, request)
        assert [r.error_code for r in response.responses] == [ErrorCode.none], response
    sent = session_requests(zk_server, session_id) - before
    # A ping or the periodic fence re-check may fall in between.
    assert changes <= sent <= 2 * changes + 8, sent
