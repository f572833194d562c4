"""`zk2kraft handoff check` on a directory a real bridge left in DUAL_WRITE, then with one thing wrong at a time."""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from crc32c import crc32c
from kazoo.client import KazooClient

from cli.main import cli
from migrate.errors import EXIT_BAD_INPUT, EXIT_FINDING, EXIT_OK
from migrate.kraft import records as rec
from migrate.kraft.batch import CRC_START, HEADER_SIZE
from migrate.kraft.logdir import (
    BOOTSTRAP_CHECKPOINT,
    META_PROPERTIES,
    PARTITION_METADATA,
    QUORUM_STATE,
    read_meta_properties,
    write_partition_metadata,
)
from migrate.kraft.reader import METADATA_PARTITION_DIR
from migrate.kraft.segment_walk import walk_segment
from migrate.zk import paths
from migrate.zk.embedded import EmbeddedZooKeeper
from migrate.zk.live import ZkConnectOptions, read_tree
from migrate.zk.load import load_tree
from migrate.zk.tree import ZTree
from tests.support import FIXTURES
from tests.support.audit import append_segment
from tests.support.bridge import NODE_ID, running_bridge
from tests.support.handoff import copy_directory, failed, flip_byte, kafka_would_lead, last_segment
from tests.support.quorum import leader_of, running_quorum, voters_option
from validators.handoff import HandoffReport, directory_checks, handoff_check, recover_log


@pytest.fixture(scope="module")
def left_by_bridge(
    tmp_path_factory: pytest.TempPathFactory,
    zk_server: EmbeddedZooKeeper,
    zk_admin: KazooClient,
    real_tree: ZTree,
) -> tuple[Path, ZTree]:
    """A metadata directory and the ZooKeeper tree a bridge left after DUAL_WRITE and a clean stop (run once)."""
    chroot = f"/tests/handoff-{uuid.uuid4().hex[:8]}"
    zk_admin.ensure_path(chroot)
    connect = zk_server.connect_string + chroot
    client = ZkConnectOptions(connect=connect).kazoo_client()
    client.start(timeout=15)
    try:
        tmp = tmp_path_factory.mktemp("handoff-bridge")
        with running_bridge(client, connect, real_tree, tmp):
            pass
        return tmp / "meta", read_tree(client)
    finally:
        client.stop()
        client.close()


@pytest.fixture
def bridge_dir(left_by_bridge: tuple[Path, ZTree], zk_client: KazooClient, tmp_path: Path) -> Iterator[Path]:
    """A copy of that directory, and this test's ZooKeeper holding that tree without broker registrations: the
    bridge ran as a rehearsal (no broker registered with it); the snapshot's brokers are long dead."""
    meta, tree = left_by_bridge
    load_tree(zk_client, tree)
    for broker in zk_client.get_children(paths.BROKER_IDS):
        zk_client.delete(f"{paths.BROKER_IDS}/{broker}")
    yield copy_directory(meta, tmp_path / "meta")


def run_cli(metadata_dir: Path, zk_connect: str, *extra: str) -> tuple[int, HandoffReport]:
    result = CliRunner().invoke(
        cli, ["handoff", "check", "--metadata-dir", str(metadata_dir), "--zk", zk_connect, "--json", *extra]
    )
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, HandoffReport.model_validate_json(result.output)


def test_a_directory_left_by_a_bridge_passes_every_check(bridge_dir: Path, zk_connect: str) -> None:
    code, report = run_cli(bridge_dir, zk_connect, "--node-id", str(NODE_ID))
    assert code == EXIT_OK, failed(report)
    assert report.leads
    assert [c.id for c in report.checks] == [
        "meta.properties", "bootstrap.checkpoint", "log segments", "snapshots", "quorum-state", "metadata.version", "migration state",
        "open transaction", "cluster id", "/migration", "/controller", "/controller_epoch", "broker epochs",
    ]  # fmt: skip
    assert all(c.verdict == "pass" and c.kafka_class for c in report.checks)
    migration = next(c for c in report.checks if c.id == "/migration")
    assert "leads and resumes dual-write from /migration offset" in migration.kafka_would


def test_text_output_names_each_check_what_kafka_would_do_and_its_class(
    bridge_dir: Path, zk_connect: str
) -> None:
    result = CliRunner().invoke(
        cli, ["handoff", "check", "--metadata-dir", str(bridge_dir), "--zk", zk_connect]
    )
    assert result.exit_code == EXIT_OK, result.output
    assert "PASS" in result.output and "KRaftMigrationDriver" in result.output
    assert "MetaPropertiesEnsemble" in result.output
    assert "would lead from here without re-migrating" in result.output


def test_a_corrupt_byte_in_the_last_segment_is_the_truncation_kafka_would_do(
    bridge_dir: Path, zk_connect: str
) -> None:
    segment = last_segment(bridge_dir)
    before = recover_log(bridge_dir / METADATA_PARTITION_DIR)
    flip_byte(segment, -3)  # inside the last batch: its CRC no longer matches
    code, report = run_cli(bridge_dir, zk_connect)
    assert code == EXIT_FINDING
    log = failed(report)["log segments"]
    after = recover_log(bridge_dir / METADATA_PARTITION_DIR)
    assert after.end_offset < before.end_offset
    assert f"truncates the log to offset {after.end_offset}" in log.kafka_would
    assert "CRC-32C" in log.detail
    assert (
        segment.read_bytes() != b"" and recover_log(bridge_dir / METADATA_PARTITION_DIR) == after
    )  # read-only


def test_a_truncation_before_the_migration_record_loses_it(bridge_dir: Path, zk_connect: str) -> None:
    segment = last_segment(bridge_dir)
    flip_byte(segment, 200)  # an early batch: everything from it on is cut, the MIGRATION record with it
    code, report = run_cli(bridge_dir, zk_connect)
    assert code == EXIT_FINDING
    failures = failed(report)
    assert "truncates the log to offset" in failures["log segments"].kafka_would
    # The clean stop's snapshot still holds the MIGRATION record (Kafka truncates fully to it and loads it)...
    assert "migration state" not in failures
    # ...but a directory whose stop wrote none (SIGKILL) loses it with the truncated batches.
    for path in (bridge_dir / METADATA_PARTITION_DIR).glob("*.checkpoint"):
        path.unlink()
    code, report = run_cli(bridge_dir, zk_connect)
    assert code == EXIT_FINDING
    failures = failed(report)
    assert "not MIGRATION" in failures["migration state"].detail
    assert "after the truncation" in failures["migration state"].detail


def test_meta_properties_without_directory_id_passes_as_kafka_generates_one(
    bridge_dir: Path, zk_connect: str
) -> None:
    path = bridge_dir / META_PROPERTIES
    path.write_text(
        "".join(line + "\n" for line in path.read_text().splitlines() if "directory.id" not in line)
    )
    assert read_meta_properties(path).directory_id is None
    code, report = run_cli(bridge_dir, zk_connect)
    assert code == EXIT_OK, failed(report)
    check = next(c for c in report.checks if c.id == "meta.properties")
    assert check.verdict == "pass" and "no directory.id" in check.detail
    assert "generates a random directory.id" in check.kafka_would


def test_a_bootstrap_checkpoint_that_does_not_parse_is_refused(bridge_dir: Path, zk_connect: str) -> None:
    path = bridge_dir / BOOTSTRAP_CHECKPOINT
    shutil.copyfile(FIXTURES / "kraft-real-3.7" / BOOTSTRAP_CHECKPOINT, path)
    code, report = run_cli(bridge_dir, zk_connect)
    assert code == EXIT_OK, failed(report)  # Kafka's own file parses
    path.write_bytes(path.read_bytes()[:-7])  # a torn footer
    code, report = run_cli(bridge_dir, zk_connect)
    assert code == EXIT_FINDING
    check = failed(report)["bootstrap.checkpoint"]
    assert str(path) in check.detail and "refuses to start" in check.kafka_would
    assert "BootstrapDirectory" in check.kafka_class


def test_partition_metadata_with_another_topic_id_is_refused(bridge_dir: Path, zk_connect: str) -> None:
    path = bridge_dir / METADATA_PARTITION_DIR / PARTITION_METADATA
    write_partition_metadata(path, uuid.UUID(int=7))
    code, report = run_cli(bridge_dir, zk_connect)
    assert code == EXIT_FINDING
    check = failed(report)["log segments"]
    assert "not AAAAAAAAAAAAAAAAAAAAAQ" in check.detail
    assert "InconsistentTopicIdException" in check.kafka_would


def test_another_node_id_is_refused(bridge_dir: Path, zk_connect: str) -> None:
    code, report = run_cli(bridge_dir, zk_connect, "--node-id", str(NODE_ID + 1))
    assert code == EXIT_FINDING
    assert "refuses to start" in failed(report)["meta.properties"].kafka_would


def test_a_malformed_quorum_state(bridge_dir: Path, zk_connect: str) -> None:
    path = bridge_dir / METADATA_PARTITION_DIR / QUORUM_STATE
    state = json.loads(path.read_text())
    del state["leaderEpoch"]
    path.write_text(json.dumps(state))
    code, report = run_cli(bridge_dir, zk_connect)
    assert code == EXIT_FINDING
    check = failed(report)["quorum-state"]
    assert "leaderEpoch" in check.detail and "refuses to start" in check.kafka_would


def test_quorum_state_voters_other_than_the_voters_given(bridge_dir: Path, zk_connect: str) -> None:
    voters = f"{NODE_ID}@localhost:9093,{NODE_ID + 1}@localhost:9094,{NODE_ID + 2}@localhost:9095"
    code, report = run_cli(bridge_dir, zk_connect, "--voters", voters)
    path = bridge_dir / METADATA_PARTITION_DIR / QUORUM_STATE
    if json.loads(path.read_text()).get("currentVoters") is None:
        pytest.skip("this bridge writes quorum-state without voters (data_version 1)")
    assert code == EXIT_FINDING
    assert "not --voters" in failed(report)["quorum-state"].detail


def test_a_directory_of_another_cluster(bridge_dir: Path, zk_connect: str, zk_client: KazooClient) -> None:
    zk_client.set(paths.CLUSTER_ID, b'{"version":"1","id":"AAAAAAAAAAAAAAAAAAAAAA"}')
    code, report = run_cli(bridge_dir, zk_connect)
    assert code == EXIT_FINDING
    check = failed(report)["cluster id"]
    assert "AAAAAAAAAAAAAAAAAAAAAA" in check.detail and "INCONSISTENT_CLUSTER_ID" in check.kafka_would


def test_migration_znode_missing(bridge_dir: Path, zk_connect: str, zk_client: KazooClient) -> None:
    zk_client.delete(paths.MIGRATION)
    code, report = run_cli(bridge_dir, zk_connect)
    assert code == EXIT_FINDING
    check = failed(report)["/migration"]
    assert "does not exist" in check.detail
    assert "indicates an active migration, but the ZK state does not" in check.kafka_would


def test_migration_znode_beyond_the_log(bridge_dir: Path, zk_connect: str, zk_client: KazooClient) -> None:
    data, _ = zk_client.get(paths.MIGRATION)
    znode = json.loads(data)
    znode["kraft_metadata_offset"] = 10_000_000
    zk_client.set(paths.MIGRATION, json.dumps(znode).encode())
    code, report = run_cli(bridge_dir, zk_connect)
    assert code == EXIT_FINDING
    check = failed(report)["/migration"]
    assert "beyond the log's end" in check.detail and "rolled back" in check.kafka_would


def test_migration_znode_without_a_field(bridge_dir: Path, zk_connect: str, zk_client: KazooClient) -> None:
    data, _ = zk_client.get(paths.MIGRATION)
    znode = json.loads(data)
    del znode["kraft_metadata_epoch"]
    zk_client.set(paths.MIGRATION, json.dumps(znode).encode())
    code, report = run_cli(bridge_dir, zk_connect)
    assert code == EXIT_FINDING
    check = failed(report)["/migration"]
    assert "kraft_metadata_epoch" in check.detail and "INACTIVE" in check.kafka_would


def test_controller_held_by_a_zookeeper_mode_broker(
    bridge_dir: Path, zk_connect: str, zk_client: KazooClient
) -> None:
    zk_client.set(
        paths.CONTROLLER, b'{"version":2,"brokerid":1,"timestamp":"1700000000000","kraftControllerEpoch":-1}'
    )
    code, report = run_cli(bridge_dir, zk_connect)
    assert code == EXIT_FINDING
    assert "ZooKeeper-mode broker 1" in failed(report)["/controller"].detail


def test_controller_epoch_above_the_directory(
    bridge_dir: Path, zk_connect: str, zk_client: KazooClient
) -> None:
    zk_client.set(
        paths.CONTROLLER, b'{"version":2,"brokerid":3000,"timestamp":"1","kraftControllerEpoch":999}'
    )
    code, report = run_cli(bridge_dir, zk_connect)
    assert code == EXIT_FINDING
    assert "ControllerMovedException" in failed(report)["/controller"].kafka_would


def test_controller_epoch_znode_missing(bridge_dir: Path, zk_connect: str, zk_client: KazooClient) -> None:
    zk_client.delete(paths.CONTROLLER_EPOCH)
    code, report = run_cli(bridge_dir, zk_connect)
    assert code == EXIT_FINDING
    assert "no ZK controller epoch present" in failed(report)["/controller_epoch"].kafka_would


def test_a_zookeeper_broker_missing_from_the_log_is_a_warning(
    bridge_dir: Path, zk_connect: str, zk_client: KazooClient
) -> None:
    zk_client.ensure_path(f"{paths.BROKER_IDS}/42")
    code, report = run_cli(bridge_dir, zk_connect)
    assert code == EXIT_OK
    check = next(c for c in report.checks if c.id == "broker epochs")
    assert check.verdict == "warn" and "[42] are not registered in the log" in check.detail


def test_a_broker_epoch_kafka_could_not_have_given(bridge_dir: Path, zk_connect: str) -> None:
    recovery = recover_log(bridge_dir / METADATA_PARTITION_DIR)
    offset = recovery.end_offset
    registration = rec.RegisterBrokerRecord(
        broker_id=5, is_migrating_zk_broker=True, incarnation_id=uuid.uuid4(), broker_epoch=offset + 100
    )
    append_segment(bridge_dir, offset, [[(registration, 2)]], epoch=recovery.last_epoch)
    code, report = run_cli(bridge_dir, zk_connect)
    assert code == EXIT_FINDING
    check = failed(report)["broker epochs"]
    assert (
        f"broker 5 has epoch {offset + 100}, but its RegisterBrokerRecord is at offset {offset}"
        in check.detail
    )
    assert "STALE_BROKER_EPOCH" in check.kafka_would


def test_an_open_transaction_at_the_end_of_the_log(bridge_dir: Path, zk_connect: str) -> None:
    recovery = recover_log(bridge_dir / METADATA_PARTITION_DIR)
    open_txn = [[(rec.BeginTransactionRecord(name="open"), 0), (rec.NoOpRecord(), 0)]]
    append_segment(bridge_dir, recovery.end_offset, open_txn, epoch=recovery.last_epoch)
    code, report = run_cli(bridge_dir, zk_connect)
    assert code == EXIT_FINDING
    check = failed(report)["open transaction"]
    assert f"begun at offset {recovery.end_offset}" in check.detail
    assert "AbortTransactionRecord" in check.kafka_would


def test_the_real_kafka_directory_passes_the_start_up_checks(tmp_path: Path) -> None:
    """A real Kafka 3.7 KRaft node's directory (tests/fixtures/kraft-real-3.7): it starts; it never migrated."""
    directory = copy_directory(FIXTURES / "kraft-real-3.7", tmp_path / "real")
    _state, checks = directory_checks(directory, node_id=1)
    verdicts = {c.id: c.verdict for c in checks}
    assert verdicts == {
        "meta.properties": "pass", "bootstrap.checkpoint": "pass", "log segments": "pass", "snapshots": "pass",
        "quorum-state": "pass", "metadata.version": "pass", "migration state": "fail", "open transaction": "pass",
    }  # fmt: skip


def test_the_conformance_kit_accepts_the_bridge_directory(bridge_dir: Path, zk_client: KazooClient) -> None:
    report = kafka_would_lead(bridge_dir, zk_client, node_id=NODE_ID)
    assert report == handoff_check(bridge_dir, zk_client, node_id=NODE_ID)


def test_the_leaders_directory_of_a_stopped_quorum_passes_with_its_voters(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path
) -> None:
    with running_quorum(zk_client, zk_connect, real_tree, tmp_path) as controllers:
        leader = leader_of(controllers)
        voters = voters_option([c.listen_port for c in controllers])
        for follower in (c for c in controllers if c is not leader):
            follower.stop()
        leader.stop()
    for broker in zk_client.get_children(paths.BROKER_IDS):  # the snapshot's brokers are long dead
        zk_client.delete(f"{paths.BROKER_IDS}/{broker}")
    node = leader.config.node_id
    code, report = run_cli(tmp_path / f"meta-{node}", zk_connect, "--node-id", str(node), "--voters", voters)
    assert code == EXIT_OK, failed(report)
    code, report = run_cli(tmp_path / f"meta-{node}", zk_connect, "--voters", voters.split(",", 1)[1])
    assert code == EXIT_FINDING


def test_a_torn_last_write_is_the_truncation_a_crash_leaves(bridge_dir: Path, zk_connect: str) -> None:
    segment = last_segment(bridge_dir)
    before = recover_log(bridge_dir / METADATA_PARTITION_DIR)
    with open(segment, "r+b") as f:
        f.truncate(segment.stat().st_size - 5)  # a crash in the middle of the last append
    code, report = run_cli(bridge_dir, zk_connect)
    assert code == EXIT_FINDING
    check = failed(report)["log segments"]
    assert "truncated tail" in check.detail
    assert f"truncates the log to offset {recover_log(bridge_dir / METADATA_PARTITION_DIR).end_offset}" in (
        check.kafka_would
    )
    assert recover_log(bridge_dir / METADATA_PARTITION_DIR).end_offset < before.end_offset


def test_the_partition_directory_instead_of_the_metadata_dir_is_bad_input(
    bridge_dir: Path, zk_connect: str
) -> None:
    pdir = bridge_dir / METADATA_PARTITION_DIR
    result = CliRunner().invoke(cli, ["handoff", "check", "--metadata-dir", str(pdir), "--zk", zk_connect])
    assert result.exit_code == EXIT_BAD_INPUT
    assert f"give the metadata.log.dir that holds it (and meta.properties): {bridge_dir}" in result.output


def test_help_teaches_the_checks_the_exit_codes_and_an_example() -> None:
    result = CliRunner().invoke(cli, ["handoff", "check", "--help"])
    assert result.exit_code == 0
    for words in (
        "meta.properties",
        "quorum-state",
        "/migration",
        "Exit codes",
        "zk2kraft handoff check --metadata-dir",
    ):
        assert words in result.output


def test_a_record_that_does_not_decode_under_a_good_crc_fails_the_replay_not_recovery(
    bridge_dir: Path, zk_connect: str
) -> None:
    segment = last_segment(bridge_dir)
    last = walk_segment(segment, 0).batches[-1]
    data = bytearray(segment.read_bytes())
    data[last.position + HEADER_SIZE] = 0x7F  # the first record's length: negative
    end = last.position + last.size
    data[last.position + CRC_START - 4 : last.position + CRC_START] = crc32c(
        bytes(data[last.position + CRC_START : end])
    ).to_bytes(4, "big")
    segment.write_bytes(bytes(data))
    code, report = run_cli(bridge_dir, zk_connect)
    assert code == EXIT_FINDING
    failures = failed(report)
    assert "log segments" not in failures  # Kafka's recovery checks the CRC, it does not decode records
    assert "replay" in failures and str(segment) in failures["replay"].detail
