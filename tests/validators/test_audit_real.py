"""Acceptance: the real ZooKeeper snapshots of a Kafka 3.5 cluster against the KRaft dir migrate makes of them."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from kazoo.client import KazooClient
from pyspark.sql import SparkSession

from cli.main import cli
from migrate.zk.embedded import EmbeddedZooKeeper
from migrate.zk.live import ZkConnectOptions
from migrate.zk.load import load_tree
from migrate.zk.model import MigrationState
from migrate.zk.znodes.controller import encode_migration
from tests.support.audit import (
    REAL,
    REAL_CHROOT,
    copy_meta,
    discrepancy_rows,
    drop_snapshots,
    dump,
    keyed,
    migrate,
    real_tree,
    shared_spark,
    summary,
)
from tests.support.bridge_process import seed_small_cluster
from tests.support.secured_zk import DIGEST, PASSWORD, files_holding, only_digest_user

pytestmark = pytest.mark.spark

# What differs by design: ZooKeeper's 3 broker registrations (KRaft has none until the brokers restart in
# migration mode) and metadata.version, which only KRaft finalizes.
EXPECTED = {
    ("brokers", "broker_id=1", "missing_in_kraft", None),
    ("brokers", "broker_id=2", "missing_in_kraft", None),
    ("brokers", "broker_id=3", "missing_in_kraft", None),
    ("features", "name=metadata.version", "missing_in_zk", None),
}


@pytest.fixture(scope="session")
def spark() -> SparkSession:
    return shared_spark()


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return migrate(real_tree(), tmp_path_factory.mktemp("real") / "meta")


def audit(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["audit", *args], catch_exceptions=False)
    return result.exit_code, result.stdout + result.stderr  # the report first; progress lines go to stderr


def test_real_snapshots_against_their_migration_are_consistent(spark: SparkSession, migrated: Path, tmp_path: Path) -> None:
    out = tmp_path / "audit"
    code, output = audit("--zk-data-dir", str(REAL), "--chroot", REAL_CHROOT, "--kraft", str(migrated), "--out", str(out))
    assert code == 0, output
    assert output.startswith("CONSISTENT: 0 error, 0 lag, 4 expected")
    assert "report: " in output
    s = summary(out)
    assert s["verdict"] == "consistent" and s["exit_code"] == 0
    assert s["classes"] == {"error": 0, "lag": 0, "expected": 4}
    rows = {t["table"]: (t["zk_rows"], t["kraft_rows"]) for t in s["tables"]}
    assert rows["topics"] == (2, 2) and rows["partitions"] == (53, 53) and rows["configs"] == (4, 4)
    assert s["offsets"]["alignment"] == "end of log" and s["offsets"]["snapshot_last_offset"] == 66
    found = discrepancy_rows(spark, out)
    assert keyed(found) == EXPECTED and all(r["class"] == "expected" and r["reason"] for r in found)
    page = (out / "report.html").read_text()
    assert page.index("CONSISTENT") < page.index("<h2>Inputs")
    assert "<svg" in page and "broker_id=1" in page and "http" not in page.replace("http://www.w3.org/2000/svg", "")


def test_dump_and_log_replay_give_the_same_answer(spark: SparkSession, migrated: Path, tmp_path: Path) -> None:
    # The same cluster as a `zk export` dump, and the KRaft side replayed from its log (no snapshot):
    # the bootstrap and migration metadata transactions are read from the segment.
    source = dump(real_tree(), tmp_path / "cluster.jsonl")
    meta = copy_meta(migrated, tmp_path / "meta")
    drop_snapshots(meta)
    out = tmp_path / "audit"
    code, output = audit("--zk-dump", str(source), "--kraft", str(meta / "__cluster_metadata-0"), "--out", str(out))
    assert code == 0, output
    s = summary(out)
    assert s["inputs"]["kraft_snapshot"] is None and len(s["inputs"]["kraft_segments"]) == 1
    assert keyed(discrepancy_rows(spark, out)) == EXPECTED


def test_a_single_snapshot_file_is_an_input_too(spark: SparkSession, migrated: Path, tmp_path: Path) -> None:
    snapshot = next((migrated / "__cluster_metadata-0").glob("*.checkpoint"))
    out = tmp_path / "audit"
    code, output = audit("--zk-data-dir", str(REAL), "--chroot", REAL_CHROOT, "--kraft", str(snapshot), "--out", str(out))
    assert code == 0, output
    # A lone snapshot has no meta.properties, so there is no cluster id to compare.
    assert keyed(discrepancy_rows(spark, out)) == EXPECTED | {("cluster", "scope=cluster", "missing_in_kraft", None)}


def test_bad_input_exits_2_naming_the_file(spark: SparkSession, tmp_path: Path) -> None:
    garbage = tmp_path / "00000000000000000000.log"
    garbage.write_bytes(b"\x00" * 12 + b"\x00\x00\x00\x40" + b"\xff" * 80)
    code, output = audit("--zk-data-dir", str(REAL), "--chroot", REAL_CHROOT, "--kraft", str(garbage), "--out", str(tmp_path / "o"))
    assert code == 2
    assert str(garbage) in output

    bad_dump = tmp_path / "bad.jsonl"
    bad_dump.write_text('{"format":"zk2kraft-zk-dump","version":1,"source":"x"}\n{"path":"/brokers/topics/t","data":"{nope"}\n')
    snapshot = tmp_path / "none"
    snapshot.mkdir()
    code, output = audit("--zk-dump", str(bad_dump), "--kraft", str(garbage), "--out", str(tmp_path / "o2"))
    assert code == 2
    assert "/brokers/topics/t" in output


def test_a_damaged_newest_snapshot_is_refused_unless_an_older_state_is_accepted(
    spark: SparkSession, migrated: Path, damaged_real_data_dir: Path, tmp_path: Path
) -> None:
    args = ["--zk-data-dir", str(damaged_real_data_dir), "--chroot", REAL_CHROOT, "--kraft", str(migrated)]
    code, output = audit(*args, "--out", str(tmp_path / "refused"))
    assert code == 2, output
    assert "snapshot.9f00000037" in output and "0x9f00000037" in output and "--zk-log-dir" in output
    out = tmp_path / "accepted"
    code, output = audit(*args, "--out", str(out), "--accept-older-zk-state")
    assert code == 0, output  # epochs 0x8 to 0x9f changed no znode of this cluster
    assert "OLDER ZooKeeper state" in output
    s = summary(out)
    assert s["inputs"]["accepted_older_zk_state"] is True
    assert any("OLDER ZOOKEEPER STATE ACCEPTED" in w and "snapshot.9f00000037" in w for w in s["warnings"])


def test_a_truncated_dump_is_refused_naming_both_counts(spark: SparkSession, migrated: Path, tmp_path: Path) -> None:
    lines = dump(real_tree(), tmp_path / "cluster.jsonl").read_text().splitlines(keepends=True)
    truncated = tmp_path / "truncated.jsonl"
    truncated.write_text("".join(lines[:-3]))
    code, output = audit("--zk-dump", str(truncated), "--kraft", str(migrated), "--out", str(tmp_path / "o"))
    assert code == 2, output
    assert str(truncated) in output
    assert f"the header says {len(lines) - 1} znodes but the file holds {len(lines) - 4}" in output


def test_a_dump_of_the_whole_ensemble_without_chroot_suggests_it(spark: SparkSession, migrated: Path, tmp_path: Path) -> None:
    whole = tmp_path / "whole.jsonl"
    exported = CliRunner().invoke(cli, ["zk", "export", "--zk-data-dir", str(REAL), "-o", str(whole)])
    assert exported.exit_code == 0, exported.output
    code, output = audit("--zk-dump", str(whole), "--kraft", str(migrated), "--out", str(tmp_path / "o"))
    assert code == 2
    assert f"dump {whole}: no Kafka znodes" in output and f"did you mean --chroot {REAL_CHROOT}?" in output


@pytest.mark.zookeeper
def test_a_live_ensemble_is_a_source_too(spark: SparkSession, migrated: Path, zk_client: KazooClient, zk_connect: str, tmp_path: Path) -> None:
    # The real cluster loaded into a real ZooKeeper (versions preserved, ephemerals made persistent),
    # then audited through --zk: the driver reads the tree, the tasks parse it.
    load_tree(zk_client, real_tree())
    out = tmp_path / "audit"
    code, output = audit("--zk", zk_connect, "--kraft", str(migrated), "--out", str(out))
    assert code == 0, output
    assert keyed(discrepancy_rows(spark, out)) == EXPECTED
    assert summary(out)["inputs"]["zk_chroot"] == zk_connect[zk_connect.index("/") :]
    assert not (out / ".work").exists()


@pytest.mark.zookeeper
def test_a_digest_protected_ensemble_is_read_in_the_spark_task_with_the_credentials_never_written(
    spark: SparkSession,
    zk_server: EmbeddedZooKeeper,
    zk_client: KazooClient,
    zk_chroot: str,
    zk_connect: str,
    tmp_path: Path,
) -> None:
    seed_small_cluster(zk_client)
    only_digest_user(zk_server.connect_string, zk_chroot)
    meta = tmp_path / "meta"
    migrated = CliRunner().invoke(cli, ["migrate", "--zk", zk_connect, "--out", str(meta), "--zk-digest", DIGEST])
    assert migrated.exit_code == 0, migrated.output
    code, output = audit("--zk", zk_connect, "--kraft", str(meta), "--out", str(tmp_path / "refused"))
    assert code == 2, output
    assert zk_server.connect_string in output and "NOAUTH" in output and "znode /" in output, output
    assert not (tmp_path / "refused").exists()
    out = tmp_path / "audit"
    code, output = audit("--zk", zk_connect, "--kraft", str(meta), "--out", str(out), "--zk-digest", DIGEST)
    assert code == 0, output
    assert summary(out)["inputs"]["zk_chroot"] == zk_chroot
    assert PASSWORD not in output
    assert files_holding(tmp_path, PASSWORD) == [], "no password in summary.json, the report or the work files"


@pytest.mark.zookeeper
def test_finalize_check_runs_the_audit_as_its_last_gate(
    spark: SparkSession, migrated: Path, zk_client: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    from cli.finalize_cmd import audit_condition

    load_tree(zk_client, real_tree())
    zk = ZkConnectOptions(connect=zk_connect)
    passed = audit_condition(zk, None, migrated, tmp_path / "ok", skip=False)
    assert passed.verdict == "pass", passed.detail
    # A topic's config znode vanishing from ZooKeeper is a real divergence: the gate stays shut.
    topic = sorted(zk_client.get_children("/config/topics"))[0]
    zk_client.delete(f"/config/topics/{topic}")
    failed = audit_condition(zk, None, migrated, tmp_path / "bad", skip=False)
    assert failed.verdict == "fail" and "exit code 1" in failed.detail
    # A /migration written by a controller this log never had: the audit is refused, the gate fails with
    # the reason, and the other conditions are still shown.
    zk_client.create("/migration", encode_migration(MigrationState(kraft_controller_id=3001, kraft_controller_epoch=1, kraft_metadata_offset=66, kraft_metadata_epoch=1)))
    refused = audit_condition(zk, None, migrated, tmp_path / "refused", skip=False)
    assert refused.verdict == "fail" and "refused" in refused.detail and "controller 3001" in refused.detail
    assert not (tmp_path / "refused").exists()
