"""What the audit reads and where it writes: a /migration znode from another controller or epoch than the
log's, a damaged newest snapshot, the files read and skipped, a failed audit's --out, the HTML report."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

from cli.main import cli
from migrate.errors import EXIT_UNREACHABLE
from migrate.zk.model import MigrationState
from tests.support.audit import (
    PARTITION_DIR,
    REAL,
    REAL_CHROOT,
    REAL_KRAFT,
    copy_meta,
    discrepancy_rows,
    dump,
    keyed,
    migrate,
    real_tree,
    shared_spark,
    summary,
    with_migration_znode,
)
from validators.audit import check_migration
from validators.kraft_tasks import plan_kraft
from validators.report import readable

EXPECTED = {
    ("brokers", "broker_id=1", "missing_in_kraft", None),
    ("brokers", "broker_id=2", "missing_in_kraft", None),
    ("brokers", "broker_id=3", "missing_in_kraft", None),
    ("features", "name=metadata.version", "missing_in_zk", None),
}


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return migrate(real_tree(), tmp_path_factory.mktemp("real") / "meta")


def audit(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["audit", *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def _state(controller_id: int, controller_epoch: int, offset: int, epoch: int) -> MigrationState:
    return MigrationState(
        kraft_controller_id=controller_id, kraft_controller_epoch=controller_epoch, kraft_metadata_offset=offset, kraft_metadata_epoch=epoch
    )


# ---------------------------------------------------------------------------------------------- without Spark


def test_migration_znode_is_checked_against_the_real_logs_leader_and_epochs() -> None:
    # The real 3.7 log: node 1 leads epoch 1 (its LeaderChangeMessage), offsets 0..4928 all in epoch 1.
    plan = plan_kraft(REAL_KRAFT, stop_offset=101)
    ok = check_migration(_state(1, 1, 100, 1), plan)
    assert ok.verdict == "matches" and ok.used and ok.problems == []
    assert ok.log_epoch_at_offset == 1 and ok.log_leader_in_epoch == 1

    other_controller = check_migration(_state(3000, 1, 100, 1), plan)
    assert other_controller.verdict == "differs" and not other_controller.used
    assert "controller 3000" in other_controller.problems[0] and "node 1" in other_controller.problems[0]

    other_epoch = check_migration(_state(1, 1, 100, 4), plan)
    assert "epoch 4" in other_epoch.problems[0] and "leader epoch 1" in other_epoch.problems[0]

    newer_controller = check_migration(_state(1, 7, 100, 1), plan)
    assert "newest leader epoch is 1" in newer_controller.problems[0]

    past_the_end = check_migration(_state(1, 1, 9000, 1), plan_kraft(REAL_KRAFT))
    assert "ends at offset 4928" in past_the_end.problems[0]


def test_every_kraft_file_is_listed_as_read_or_skipped_with_why(migrated: Path, tmp_path: Path) -> None:
    # migrate writes the log (offsets 0..66) and a snapshot at its end: the snapshot covers the whole segment.
    plan = plan_kraft(migrated)
    by_kind = {f.kind: f for f in plan.files}
    assert by_kind["snapshot"].read and by_kind["snapshot"].last_offset == 66
    segment = by_kind["segment"]
    assert not segment.read and (segment.first_offset, segment.last_offset) == (0, 66)
    assert "damage in this segment is not seen" in segment.reason

    # Without the snapshot's help the segment is read; a snapshot past the comparison point is skipped.
    plan = plan_kraft(migrated, stop_offset=10)
    segment, snapshot = sorted(plan.files, key=lambda f: f.kind)
    assert not snapshot.read and "after the comparison point" in snapshot.reason
    assert segment.read and "offsets 0..9 read" in segment.reason and "offsets from 10 on" in segment.reason

    snapshot_path = next((migrated / PARTITION_DIR).glob("*.checkpoint"))
    plan = plan_kraft(migrated, damaged={snapshot_path: "CRC mismatch"})
    assert plan.snapshot is None and plan.segments == [migrated / PARTITION_DIR / "00000000000000000000.log"]
    skipped = next(f for f in plan.files if f.kind == "snapshot")
    assert not skipped.read and "damaged" in skipped.reason and "CRC mismatch" in skipped.reason
    assert "damaged, so the whole log was read instead" in skipped.reason  # no other snapshot to fall back on


def test_values_in_the_report_are_json_once_with_spaces_to_wrap_at() -> None:
    assert readable('{"replicas":"[1,2,3]","isr":"[1]","leader":"1"}') == '{"replicas": [1, 2, 3], "isr": [1], "leader": "1"}'
    assert readable("[1,2]") == "[1, 2]"
    assert readable("plain text") == "plain text" and readable("[not json") == "[not json"
    assert readable(None) == "null"


# ---------------------------------------------------------------------------------------------- on Spark


@pytest.fixture(scope="module")
def spark() -> SparkSession:
    return shared_spark()


@pytest.mark.spark
def test_a_failed_audit_leaves_out_as_it_was(spark: SparkSession, migrated: Path, tmp_path: Path) -> None:
    bad_dump = tmp_path / "bad.jsonl"
    bad_dump.write_text('{"format":"zk2kraft-zk-dump","version":1,"source":"x"}\n{"path":"/brokers/topics/t","data":"{nope"}\n')
    out = tmp_path / "out"
    code, _stdout, stderr = audit("--zk-dump", str(bad_dump), "--kraft", str(migrated), "--out", str(out))
    assert code == 2 and "/brokers/topics/t" in stderr
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl"]  # no staging directory left beside it

    # An earlier audit's --out survives a failed audit unchanged.
    out.mkdir()
    (out / "summary.json").write_text('{"earlier": true}\n')
    code, _stdout, _stderr = audit("--zk-dump", str(bad_dump), "--kraft", str(migrated), "--out", str(out))
    assert code == 2
    assert [p.name for p in out.iterdir()] == ["summary.json"] and json.loads((out / "summary.json").read_text()) == {"earlier": True}

    # A directory holding something else is refused before any work.
    (out / "notes.txt").write_text("mine")
    code, _stdout, stderr = audit("--zk-data-dir", str(REAL), "--chroot", REAL_CHROOT, "--kraft", str(migrated), "--out", str(out))
    assert code == 2 and "notes.txt" in stderr and (out / "notes.txt").read_text() == "mine"


@pytest.mark.spark
def test_a_segment_covered_by_the_snapshot_is_a_note_in_the_files_list_not_a_warning(
    spark: SparkSession, migrated: Path, tmp_path: Path
) -> None:
    out = tmp_path / "audit"
    code, stdout, stderr = audit("--zk-data-dir", str(REAL), "--chroot", REAL_CHROOT, "--kraft", str(migrated), "--out", str(out))
    assert code == 0, stdout + stderr
    assert "covered by the snapshot" not in stderr and not any("covered" in w for w in summary(out)["warnings"])
    assert "skipped 00000000000000000000.log: all its offsets are in snapshot" in stdout


@pytest.mark.spark
def test_an_unreachable_zookeeper_is_exit_5_naming_it(spark: SparkSession, migrated: Path, tmp_path: Path) -> None:
    """The error's kind survives the Spark task that reads ZooKeeper: unreachable is 5, not bad input."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{probe.getsockname()[1]}"  # bound, never listening: connections are refused
        code, _stdout, stderr = audit("--zk", address, "--kraft", str(migrated), "--out", str(tmp_path / "out"))
    assert code == EXIT_UNREACHABLE, stderr
    assert f"cannot reach ZooKeeper {address}" in stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.spark
def test_a_damaged_newest_snapshot_falls_back_to_the_log_and_says_so(spark: SparkSession, migrated: Path, tmp_path: Path) -> None:
    meta = copy_meta(migrated, tmp_path / "meta")
    snapshot = next((meta / PARTITION_DIR).glob("*.checkpoint"))
    data = bytearray(snapshot.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte inside a batch: its CRC no longer matches
    snapshot.write_bytes(bytes(data))
    out = tmp_path / "audit"
    code, stdout, stderr = audit("--zk-data-dir", str(REAL), "--chroot", REAL_CHROOT, "--kraft", str(meta), "--out", str(out))
    assert code == 0, stdout + stderr
    assert snapshot.name in stderr and "damaged" in stderr and "rebuilt from the log from offset 0" in stderr
    s = summary(out)
    assert any(snapshot.name in w and "damaged" in w for w in s["warnings"])
    files = {Path(f["path"]).name: f for f in s["inputs"]["kraft_files"]}
    assert files[snapshot.name]["status"] == "skipped" and "damaged" in files[snapshot.name]["reason"]
    assert files["00000000000000000000.log"]["status"] == "read"
    assert keyed(discrepancy_rows(spark, out)) == EXPECTED
    page = (out / "report.html").read_text()
    assert "KRaft files read and skipped" in page and snapshot.name in page


@pytest.mark.spark
def test_migration_znode_of_another_controller_is_refused_or_ignored_with_a_warning(spark: SparkSession, tmp_path: Path) -> None:
    # The real KRaft log was led by node 1 in epoch 1; this /migration says controller 3000 wrote it.
    zk_dump = dump(with_migration_znode(real_tree(), 100, controller_id=3000, controller_epoch=1), tmp_path / "zk.jsonl")
    out = tmp_path / "refused"
    code, _stdout, stderr = audit("--zk-dump", str(zk_dump), "--kraft", str(REAL_KRAFT), "--out", str(out))
    assert code == 2
    assert "/migration" in stderr and "controller 3000" in stderr and "node 1" in stderr and "--kraft-offset" in stderr
    assert not out.exists()

    # Compared at an offset the operator chose: the /migration offset is not used, loudly. The two real
    # clusters are unrelated, so the audit finds errors: every error row says why it is one.
    out = tmp_path / "chosen"
    code, stdout, stderr = audit("--zk-dump", str(zk_dump), "--kraft", str(REAL_KRAFT), "--out", str(out), "--kraft-offset", "4928")
    assert code == 1, stdout + stderr
    assert "does not match this KRaft log" in stderr
    s = summary(out)
    check = s["offsets"]["migration_check"]
    assert check["verdict"] == "differs" and check["used"] is False and check["log_leader_in_epoch"] == 1
    assert s["classes"]["lag"] == 0 and s["classes"]["error"] > 0
    rows = discrepancy_rows(spark, out)
    assert all(r["reason"] for r in rows)

    page = (out / "report.html").read_text()
    assert "overflow-wrap:anywhere" not in page and "word-break:break-all" not in page
    body = page[page.index("<h2>Missing in KRaft") :]
    error_rows = [row for row in body.split("<tr>")[1:] if row.startswith("<td class=error>")]
    assert error_rows and all(not row.endswith("<td></td></tr>") for row in error_rows)
    # Values are JSON once: an array field of a missing partition reads [0, 1], not "[0,1]" inside JSON text.
    assert "&quot;[" not in body and "&quot;replicas&quot;: [" in body
