"""`zk2kraft rollback` on a real ZooKeeper in migration state: backup first, exactly /controller and
/migration removed in one transaction, the controller-epoch condition, refusals; `status` afterwards."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from kazoo.client import KazooClient

from bridge.api import DriverState
from bridge.metrics import BridgeMetrics, StatusServer
from cli.main import cli
from migrate.kraft.logdir import MetaProperties, parse_meta_properties, write_meta_properties
from migrate.kraft.reader import iter_log_dir
from migrate.kraft.records import NoOpRecord
from migrate.plan.rollback import RollbackState, Znode, check_broker_meta, plan_rollback
from migrate.zk.embedded import EmbeddedZooKeeper
from migrate.zk.model import ControllerEpoch, MigrationState, ZkClusterModel
from migrate.zk.tree import ZTree
from tests.support.bridge import controller_config, running_bridge, start_controller
from tests.support.plan import CLUSTER_ID, healthy_model, seed

pytestmark = pytest.mark.zookeeper


def migrating_model(kraft_epoch: int = 7, zk_epoch: int = 3) -> ZkClusterModel:
    """Dual-write: KRaft controller 3000 owns /controller; partition states carry its epoch."""
    m = healthy_model()
    assert m.controller is not None
    m.controller = dataclasses.replace(m.controller, broker_id=3000, kraft_controller_epoch=kraft_epoch)
    m.controller_epoch = ControllerEpoch(epoch=zk_epoch)
    m.migration = MigrationState(3000, kraft_epoch, 1234, kraft_epoch)
    for topic in m.topics.values():
        for state in topic.states.values():
            state.controller_epoch = kraft_epoch
    return m


def snapshot(client: KazooClient, root: str) -> dict[str, bytes]:
    out: dict[str, bytes] = {}

    def walk(path: str) -> None:
        data, _ = client.get(path)
        out[path[len(root) :] or "/"] = data
        for child in client.get_children(path):
            walk(f"{path}/{child}")

    walk(root)
    return out


def test_dry_run_then_rollback_removes_exactly_controller_and_migration(
    zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str, tmp_path: Path
) -> None:
    root = zk_chroot + "/kafka"
    seed(zk_admin, migrating_model(), root)
    connect = zk_server.connect_string + root
    before = snapshot(zk_admin, root)
    runner = CliRunner()

    dry = runner.invoke(cli, ["rollback", "--zk", connect, "--dry-run", "--backup", str(tmp_path / "b.json")])
    assert dry.exit_code == 0, dry.output
    assert "would delete /controller" in dry.output and "would delete /migration" in dry.output
    assert "would set /controller_epoch 3 → 7" in dry.output
    assert snapshot(zk_admin, root) == before
    assert not (tmp_path / "b.json").exists()

    backup = tmp_path / "backup.json"
    real = runner.invoke(cli, ["rollback", "--zk", connect, "--yes", "--backup", str(backup)])
    assert real.exit_code == 0, real.output
    after = snapshot(zk_admin, root)
    assert set(before) - set(after) == {"/controller", "/migration"}
    changed = {p for p in after if after[p] != before[p]}
    assert changed == {"/controller_epoch"} and after["/controller_epoch"] == b"7"
    saved = json.loads(backup.read_text())
    assert saved["migration"]["data"] == before["/migration"].decode()
    assert saved["controller"]["data"] == before["/controller"].decode()
    assert saved["controller_epoch"]["data"] == "3"
    assert "remaining steps:" in real.output and "zookeeper.metadata.migration.enable" in real.output

    status = runner.invoke(cli, ["status", "--zk", connect, "--format", "json"])
    assert status.exit_code == 0, status.output
    assert json.loads(status.output)["phase"] == "zookeeper"
    again = runner.invoke(cli, ["rollback", "--zk", connect, "--yes"])
    assert again.exit_code == 0 and "nothing to do" in again.output


def test_no_epoch_raise_when_the_next_zk_epoch_is_high_enough(
    zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str, tmp_path: Path
) -> None:
    root = zk_chroot + "/kafka"
    seed(zk_admin, migrating_model(kraft_epoch=4, zk_epoch=3), root)
    result = CliRunner().invoke(
        cli, ["rollback", "--zk", zk_server.connect_string + root, "--yes", "--backup", str(tmp_path / "b.json")]
    )
    assert result.exit_code == 0, result.output
    assert "set /controller_epoch" not in result.output
    assert zk_admin.get(root + "/controller_epoch")[0] == b"3"
    assert zk_admin.exists(root + "/controller") is None


def test_refuses_while_brokers_run_in_kraft_mode_and_without_confirmation(
    zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str, tmp_path: Path
) -> None:
    root = zk_chroot + "/kafka"
    model = migrating_model()
    del model.brokers[3]  # broker 3 hosts replicas but is not in /brokers/ids: a KRaft broker
    seed(zk_admin, model, root)
    connect = zk_server.connect_string + root
    runner = CliRunner()
    refused = runner.invoke(cli, ["rollback", "--zk", connect, "--yes"])
    assert refused.exit_code == 2
    assert "broker(s) [3]" in refused.output
    assert zk_admin.exists(root + "/controller") is not None

    # Without --yes and with "n" typed, nothing is written (not even the backup).
    backup = tmp_path / "b.json"
    declined = runner.invoke(cli, ["rollback", "--zk", connect, "--force", "--backup", str(backup)], input="n\n")
    assert declined.exit_code != 0
    assert not backup.exists() and zk_admin.exists(root + "/migration") is not None


def test_refuses_after_finalization() -> None:
    z = Znode("/migration", b"{}", 3, 0, 0, 0)
    state = RollbackState(controller=None, controller_epoch=None, migration=z, broker_ids=[], assigned_broker_ids=[])
    assert plan_rollback(state, finalized=True).refusals
    assert plan_rollback(state, finalized=None).notes


def test_rollback_help_teaches_with_an_example() -> None:
    result = CliRunner().invoke(cli, ["rollback", "--help"])
    assert result.exit_code == 0 and "zk2kraft rollback --zk" in result.output


@pytest.fixture
def live_bridge_status() -> Iterator[tuple[BridgeMetrics, str]]:
    """The bridge's real /status server for node 3000 in DUAL_WRITE, ZooKeeper 18 records behind its log."""
    metrics = BridgeMetrics(node_id=3000)
    metrics.set_zk_migration_state(1)
    metrics.set_state(DriverState.DUAL_WRITE)
    metrics.set_offsets(log_end_offset=120, durable_offset=118, zk_offset=100)
    with StatusServer(metrics, "127.0.0.1", 0) as server:
        yield metrics, server.url


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "real"])
def test_refuses_while_the_bridge_is_alive_and_zookeeper_is_behind_its_log(
    dry_run: bool,
    live_bridge_status: tuple[BridgeMetrics, str],
    zk_admin: KazooClient,
    zk_server: EmbeddedZooKeeper,
    zk_chroot: str,
    tmp_path: Path,
) -> None:
    root = zk_chroot + "/kafka"
    seed(zk_admin, migrating_model(), root)
    before = snapshot(zk_admin, root)
    _metrics, url = live_bridge_status
    backup = tmp_path / "b.json"
    args = ["rollback", "--zk", zk_server.connect_string + root, "--bridge-status", url, "--yes", "--backup", str(backup)]
    refused = CliRunner().invoke(cli, args + (["--dry-run"] if dry_run else []))
    assert refused.exit_code == 2, refused.output
    (line,) = refused.stderr.strip().splitlines()  # every reason on one `error:` line
    assert line.startswith("error: rollback refused: a bridge is alive")
    assert "a bridge is alive" in refused.stderr and "state DUAL_WRITE" in refused.stderr
    assert "controller 3000 (/controller, KRaft epoch 7)" in refused.stderr
    assert "18 record(s) behind its metadata log" in refused.stderr and "--force" in refused.stderr
    assert snapshot(zk_admin, root) == before and not backup.exists()

    forced = CliRunner().invoke(cli, [*args, "--force"])
    assert forced.exit_code == 0, forced.output
    assert "note: --force: going ahead although a bridge is alive" in forced.output
    assert zk_admin.exists(root + "/migration") is None and backup.exists()


def test_an_unanswering_bridge_is_taken_as_stopped_and_said(
    zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str, tmp_path: Path
) -> None:
    root = zk_chroot + "/kafka"
    seed(zk_admin, migrating_model(), root)
    with StatusServer(BridgeMetrics(node_id=3000), "127.0.0.1", 0) as server:
        url = server.url  # a real endpoint, closed again: nothing answers there now
    args = ["rollback", "--zk", zk_server.connect_string + root, "--bridge-status", url, "--dry-run"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert f"cannot read the bridge status at {url}/status" in result.stderr and "taken as a stopped bridge" in result.stderr
    assert "would delete /controller" in result.output
    # It was given: the notes say it did not answer, and ask only for what is still missing.
    assert "--bridge-status" not in result.output
    assert f"the bridge at {url} did not answer and is taken as stopped, so controller 3000" in result.output
    assert "(give --metadata-dir of a controller)" in result.output


def test_without_bridge_status_the_unchecked_controller_is_named() -> None:
    controller = Znode("/controller", b'{"version":2,"brokerid":3000,"timestamp":"1","kraftControllerEpoch":7}', 0, 0, 0, 0)
    state = RollbackState(controller=controller, controller_epoch=None, migration=None, broker_ids=[], assigned_broker_ids=[])
    notes = plan_rollback(state, finalized=None).notes
    assert any("controller 3000" in n and "--bridge-status" in n for n in notes)


def test_the_lag_read_from_the_metadata_dir_refuses_unless_forced(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path
) -> None:
    """A real bridge's log against its /migration: trailing control records are no lag; ZooKeeper behind is."""
    with running_bridge(zk_client, zk_connect, real_tree, tmp_path):
        pass
    meta = tmp_path / "meta"
    # A second start appends a LeaderChange that ZooKeeper never needs: the log ends past /migration's offset.
    again = start_controller(controller_config(zk_connect, meta))
    assert again.wait_for_state(DriverState.DUAL_WRITE), again.error
    again.stop()
    entries = list(iter_log_dir(meta))
    assert entries[-1].is_control  # the second start's LeaderChange ends the log
    last = max(e.offset for e in entries if not e.is_control and not isinstance(e.record, NoOpRecord))
    migration = json.loads(zk_client.get("/migration")[0])
    # As a Kafka controller leaves it: /migration at the last metadata record, control records after it.
    zk_client.set("/migration", json.dumps({**migration, "kraft_metadata_offset": last}).encode())
    args = ["rollback", "--zk", zk_connect, "--metadata-dir", str(meta), "--dry-run"]
    in_sync = CliRunner().invoke(cli, args)
    assert in_sync.exit_code == 0, in_sync.output
    assert "record(s) behind" not in in_sync.output + in_sync.stderr

    behind = last - 3
    zk_client.set("/migration", json.dumps({**migration, "kraft_metadata_offset": behind}).encode())
    refused = CliRunner().invoke(cli, args)
    assert refused.exit_code == 2, refused.output
    assert f"ZooKeeper is 3 record(s) behind the metadata log in {meta}" in refused.stderr
    assert "--force" in refused.stderr
    forced = CliRunner().invoke(cli, [*args, "--force"])
    assert forced.exit_code == 0, forced.output
    assert "note: --force: going ahead although ZooKeeper is 3 record(s) behind" in forced.output

    checked = CliRunner().invoke(
        cli, ["finalize-check", "--zk", zk_connect, "--metadata-dir", str(meta), "--no-audit", "--format", "json"]
    )
    conditions = {c["id"]: c for c in json.loads(checked.output)["conditions"]}
    assert conditions["write-behind-lag"]["verdict"] == "fail"
    assert "lag 3" in conditions["write-behind-lag"]["detail"]


def broker_log_dir(tmp_path: Path, broker_id: int, meta: MetaProperties | None) -> Path:
    """A broker's log dir holding `meta` as Kafka writes it (the project's writer), or no meta.properties."""
    log_dir = tmp_path / f"kafka-logs-{broker_id}"
    log_dir.mkdir()
    if meta is not None:
        write_meta_properties(log_dir / "meta.properties", meta)
    return log_dir


def test_broker_meta_properties_version_0_passes_and_version_1_refuses_with_the_file_to_write(
    zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str, tmp_path: Path
) -> None:
    """A broker formatted during the migration has version 1: in ZooKeeper mode Kafka 3.9 accepts only 0."""
    root = zk_chroot + "/kafka"
    seed(zk_admin, migrating_model(), root)
    before = snapshot(zk_admin, root)
    directory_id = uuid.UUID("5a0b3c1e-2f4d-4e6a-8b9c-0d1e2f3a4b5c")
    kept = broker_log_dir(tmp_path, 1, MetaProperties(0, CLUSTER_ID, 1))
    formatted = broker_log_dir(tmp_path, 2, MetaProperties(1, CLUSTER_ID, 2, directory_id))
    backup = tmp_path / "b.json"
    args = [
        "rollback", "--zk", zk_server.connect_string + root, "--yes", "--backup", str(backup),
        "--broker-meta", str(kept / "meta.properties"), "--broker-meta", str(formatted),
    ]  # fmt: skip
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert snapshot(zk_admin, root) == before and not backup.exists()
    assert f"OK broker 1 ({kept / 'meta.properties'}): version 0" in result.output
    assert f"WOULD NOT START broker 2 ({formatted / 'meta.properties'}): meta.properties version=1" in result.output
    assert "Found unexpected version" in result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: rollback refused: broker 2") and "--force" in line
    # The file to write instead, printed line by line: version 0, broker.id, ZooKeeper's cluster.id, directory.id kept.
    fix = result.output.split(f"fix: replace {formatted / 'meta.properties'} with exactly:\n")[1].splitlines()
    content = "\n".join(line.strip() for line in fix if line.startswith("      ")) + "\n"
    rewritten = parse_meta_properties(content.encode(), "fix")
    assert rewritten == MetaProperties(0, CLUSTER_ID, 2, directory_id)
    assert "broker.id=2" in content and "node.id" not in content

    # Written as printed, the broker passes; so does the rollback.
    (formatted / "meta.properties").write_text(content)
    fixed = CliRunner().invoke(cli, args)
    assert fixed.exit_code == 0, fixed.output
    assert f"OK broker 2 ({formatted / 'meta.properties'})" in fixed.output


def test_broker_meta_properties_of_another_cluster_refuses_unless_forced(
    zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str, tmp_path: Path
) -> None:
    root = zk_chroot + "/kafka"
    seed(zk_admin, migrating_model(), root)
    other = broker_log_dir(tmp_path, 3, MetaProperties(0, "OtherClusterIdAAAAAAAA", 3))
    args = ["rollback", "--zk", zk_server.connect_string + root, "--dry-run", "--broker-meta", str(other)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert f"Expected {CLUSTER_ID}, but read OtherClusterIdAAAAAAAA" in result.output
    assert f"cluster.id={CLUSTER_ID}" in result.output  # the fix names ZooKeeper's id
    forced = CliRunner().invoke(cli, [*args, "--force"])
    assert forced.exit_code == 0, forced.output
    assert "note: --force: going ahead although broker 3" in forced.output


def test_a_broker_log_dir_without_meta_properties_is_said_and_does_not_refuse(
    zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str, tmp_path: Path
) -> None:
    """Kafka's ZooKeeper-mode broker needs no meta.properties: nothing to refuse, but the operator is told."""
    root = zk_chroot + "/kafka"
    seed(zk_admin, migrating_model(), root)
    empty = broker_log_dir(tmp_path, 4, None)
    args = ["rollback", "--zk", zk_server.connect_string + root, "--dry-run", "--broker-meta", str(empty)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert f"MISSING {empty / 'meta.properties'}: no meta.properties" in result.output
    missing_dir = CliRunner().invoke(cli, [*args[:-1], str(tmp_path / "nowhere" / "meta.properties")])
    assert missing_dir.exit_code == 2 and "no such log directory" in missing_dir.stderr


def test_broker_meta_check_is_kafkas_zookeeper_mode_start_up(tmp_path: Path) -> None:
    """An unreadable file takes the log dir offline in Kafka; the check says so and gives a template."""
    bad = tmp_path / "meta.properties"
    bad.write_text("version=7\nbroker.id=1\n")
    check = check_broker_meta(bad, CLUSTER_ID)
    assert check.verdict == "fails" and "offline" in check.kafka_would
    assert check.fix is not None and f"cluster.id={CLUSTER_ID}" in check.fix
    no_cluster = broker_log_dir(tmp_path, 5, MetaProperties(0, None, 5))
    assert check_broker_meta(no_cluster, CLUSTER_ID).verdict == "ok"  # Kafka adds ZooKeeper's id itself
