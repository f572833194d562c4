"""The cold hand-off: every bridge of a quorum stops cleanly, and a Kafka 3.9 controller (simulated,
tests/support/real_controller.py) takes over the directory and ZooKeeper as they are left."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError

from bridge.zk.leadership import ControllerMovedError
from bridge.zk.migration_client import ZkMigrationClient
from cli.main import cli
from migrate.errors import EXIT_OK
from migrate.kraft.migration_state import ZkMigrationState
from migrate.kraft.reader import METADATA_PARTITION_DIR, load_image
from migrate.zk import paths
from migrate.zk.load import load_tree
from migrate.zk.tree import ZTree
from tests.support.bridge_process import REPO, bridge_process
from tests.support.handoff import copy_directory, failed, kafka_would_lead
from tests.support.quorum import leader_of, running_quorum
from tests.support.real_controller import take_over


@pytest.fixture
def stopped_quorum(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path
) -> tuple[Path, int, object]:
    """Three voters reach DUAL_WRITE and stop cleanly, followers first: the leader's directory, its node id and
    the ZooKeeper fence the leader held when it stopped."""
    with running_quorum(zk_client, zk_connect, real_tree, tmp_path) as controllers:
        leader = leader_of(controllers)
        for follower in (c for c in controllers if c is not leader):
            follower.stop()
        leader.stop()
    assert leader.driver is not None
    for broker in zk_client.get_children(paths.BROKER_IDS):  # the snapshot's brokers are long dead
        zk_client.delete(f"{paths.BROKER_IDS}/{broker}")
    return tmp_path / f"meta-{leader.config.node_id}", leader.config.node_id, leader.driver.leadership


def test_a_kafka_controller_resumes_dual_write_from_a_stopped_quorums_directory(
    stopped_quorum: tuple[Path, int, object], zk_client: KazooClient
) -> None:
    meta, node, bridge_fence = stopped_quorum
    report = kafka_would_lead(meta, zk_client, node_id=node)
    assert report.leads, failed(report)
    held = json.loads(zk_client.get(paths.CONTROLLER)[0])
    zk_epoch_before = int(zk_client.get(paths.CONTROLLER_EPOCH)[0])

    done = take_over(meta, zk_client, node_id=node)

    assert done.state == "DUAL_WRITE", done.line()
    assert not done.remigrated and done.migration_before is not None and done.migration_after is not None
    # /migration moves on from where the bridges left it: the same (offset, epoch), the new controller's name.
    assert (done.migration_after.kraft_metadata_offset, done.migration_after.kraft_metadata_epoch) == (
        done.migration_before.kraft_metadata_offset, done.migration_before.kraft_metadata_epoch,
    )  # fmt: skip
    assert done.migration_before.kraft_metadata_offset > 0
    claimed = json.loads(zk_client.get(paths.CONTROLLER)[0])
    assert claimed["kraftControllerEpoch"] == done.epoch > held["kraftControllerEpoch"]
    assert done.zk_controller_epoch == zk_epoch_before + 1 == int(zk_client.get(paths.CONTROLLER_EPOCH)[0])

    # A late write of the stopped bridge, with the fence it held, is refused by ZooKeeper.
    late = ZkMigrationClient(zk_client)
    with pytest.raises(ControllerMovedError, match="another controller took over"):
        late.fenced_set_migration_state(bridge_fence)  # type: ignore[arg-type]
    after = json.loads(zk_client.get(paths.MIGRATION)[0])
    assert after["kraft_controller_id"] == node and after["kraft_controller_epoch"] == done.epoch


def test_status_reads_the_write_behind_lag_of_a_directory_ending_in_its_snapshot(
    stopped_quorum: tuple[Path, int, object], zk_connect: str
) -> None:
    """A clean stop leaves a snapshot at the log's end; the lag finalize needs is still read from the segments."""
    meta, _node, _fence = stopped_quorum
    _image, report = load_image(meta / METADATA_PARTITION_DIR)
    assert report.snapshot is not None and report.last_metadata_offset is None  # what made the lag unknown
    result = CliRunner().invoke(cli, ["status", "--zk", zk_connect, "--metadata-dir", str(meta), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["write_behind_lag"] == 0


def test_a_kafka_controller_refuses_a_migration_znode_that_says_nothing_was_migrated(
    stopped_quorum: tuple[Path, int, object], zk_client: KazooClient
) -> None:
    """Kafka's driver never re-migrates a MIGRATION log: with /migration reset it stays INACTIVE, claims nothing."""
    meta, node, _fence = stopped_quorum
    data = json.loads(zk_client.get(paths.MIGRATION)[0])
    data["kraft_metadata_offset"] = -1
    zk_client.set(paths.MIGRATION, json.dumps(data).encode())
    controller_before = zk_client.get(paths.CONTROLLER)[0]

    done = take_over(meta, zk_client, node_id=node)

    assert (done.state, done.remigrated) == ("INACTIVE", False)
    assert "the ZK state does not" in done.reason
    assert zk_client.get(paths.CONTROLLER)[0] == controller_before


def test_finalization_appends_post_migration_and_touches_no_znode(
    stopped_quorum: tuple[Path, int, object], zk_client: KazooClient, tmp_path: Path
) -> None:
    """A controller restarted without zookeeper.metadata.migration.enable finalizes as it leads."""
    meta, node, _fence = stopped_quorum
    copy = copy_directory(meta, tmp_path / "finalized")
    controller_before = zk_client.get(paths.CONTROLLER)

    done = take_over(copy, zk_client, node_id=node, migration=False)

    assert done.state == "POST_MIGRATION" and done.appended == ["ZkMigrationStateRecord(POST_MIGRATION)"]
    image, _report = load_image(copy / METADATA_PARTITION_DIR)
    assert image.features.zk_migration_state == ZkMigrationState.POST_MIGRATION
    assert zk_client.get(paths.CONTROLLER) == controller_before


def test_a_kafka_controller_backs_off_when_controller_holds_a_newer_kraft_epoch(
    stopped_quorum: tuple[Path, int, object], zk_client: KazooClient
) -> None:
    """KafkaZkClient's claim: a /controller naming a KRaft epoch at or above its own is ControllerMoved, nothing written."""
    meta, node, _fence = stopped_quorum
    held = json.loads(zk_client.get(paths.CONTROLLER)[0])
    held["kraftControllerEpoch"] = 10_000
    zk_client.set(paths.CONTROLLER, json.dumps(held).encode())
    controller_before, epoch_before = zk_client.get(paths.CONTROLLER)[0], zk_client.get(paths.CONTROLLER_EPOCH)[0]
    migration_before = zk_client.get(paths.MIGRATION)[0]

    done = take_over(meta, zk_client, node_id=node)

    assert (done.state, done.remigrated, done.zk_controller_epoch) == ("BECOME_CONTROLLER", False, None)
    assert "ControllerMovedException" in done.reason
    assert zk_client.get(paths.CONTROLLER)[0] == controller_before
    assert zk_client.get(paths.CONTROLLER_EPOCH)[0] == epoch_before
    assert zk_client.get(paths.MIGRATION)[0] == migration_before


def test_a_sigtermed_bridge_process_hands_its_directory_to_the_controller_command(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path
) -> None:
    """`zk2kraft bridge run` stopped by SIGTERM; `python -m tests.support.real_controller` (the demo's) leads from it."""
    load_tree(zk_client, real_tree)
    meta, node = tmp_path / "meta", 3000
    with bridge_process(
        zk_connect=zk_connect, metadata_dir=meta, node_id=node, log_path=tmp_path / "bridge.log", fsync=False,
    ) as bridge:  # fmt: skip
        bridge.start().wait_for_state("DUAL_WRITE")
        assert bridge.terminate() == EXIT_OK, bridge.log_tail()
    for broker in zk_client.get_children(paths.BROKER_IDS):  # the seeded registrations belong to no live broker
        zk_client.delete(f"{paths.BROKER_IDS}/{broker}")
    report = kafka_would_lead(meta, zk_client, node_id=node)
    assert report.leads, failed(report)
    held = json.loads(zk_client.get(paths.CONTROLLER)[0])
    epoch_before, fence = zk_client.get(paths.CONTROLLER_EPOCH)
    offset_before = json.loads(zk_client.get(paths.MIGRATION)[0])["kraft_metadata_offset"]

    command = [sys.executable, "-m", "tests.support.real_controller", "--metadata-dir", str(meta), "--zk", zk_connect]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "state=DUAL_WRITE" in done.stdout and "remigrated=false" in done.stdout, done.stdout
    claimed = json.loads(zk_client.get(paths.CONTROLLER)[0])
    assert claimed["brokerid"] == node and claimed["kraftControllerEpoch"] > held["kraftControllerEpoch"]
    assert int(zk_client.get(paths.CONTROLLER_EPOCH)[0]) == int(epoch_before) + 1
    assert f"zk_controller_epoch={int(epoch_before) + 1}" in done.stdout
    assert json.loads(zk_client.get(paths.MIGRATION)[0])["kraft_metadata_offset"] >= offset_before > 0
    # The stopped bridge's late write, checked on the /controller_epoch version it held, is refused.
    late = zk_client.transaction()
    late.check(paths.CONTROLLER_EPOCH, fence.version)
    late.set_data(paths.MIGRATION, b"{}")
    assert isinstance(late.commit()[0], BadVersionError)
    assert json.loads(zk_client.get(paths.MIGRATION)[0])["kraft_controller_epoch"] == claimed["kraftControllerEpoch"]
