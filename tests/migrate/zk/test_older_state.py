"""A damaged newest ZooKeeper snapshot: refused, unless the logs cover it or an older state is accepted."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cli.main import cli
from migrate.errors import OlderStateError, Zk2KraftError
from migrate.zk.dump import iter_dump
from migrate.zk.files.snapshot_read import read_snapshot
from migrate.zk.files.txnlog import read_txn_log
from migrate.zk.restore import load_data_dir
from tests.support import FIXTURES

KAFKA_DATA_DIR = FIXTURES / "zk-real-kafka-3.5"
TXNLOG_DIR = FIXTURES / "zk-real-3.8-txnlog" / "version-2"
CHROOT = "/de-4-3-kafka-cluster"
NEWEST = "snapshot.9f00000037"  # the one conftest's damaged_real_data_dir damages


def flip_byte(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def txnlog_dir(tmp_path: Path, *, log_end: int | None = None) -> Path:
    """snapshot.0, log.1 (zxids 0x1-0x13) and a snapshot.13.gz whose gzip stream is damaged."""
    folder = tmp_path / "txn" / "version-2"
    folder.mkdir(parents=True)
    shutil.copy(TXNLOG_DIR / "snapshot.0", folder)
    log = gzip.decompress((TXNLOG_DIR / "log.1.gz").read_bytes())
    (folder / "log.1").write_bytes(log if log_end is None else log[:log_end])
    shutil.copy(TXNLOG_DIR / "snapshot.13.gz", folder)
    flip_byte(folder / "snapshot.13.gz", 200)
    return folder.parent


# ------------------------------------------------------------------ library


def test_damaged_newest_snapshot_without_logs_is_refused_naming_file_and_gap(damaged_real_data_dir: Path) -> None:
    with pytest.raises(OlderStateError) as caught:
        load_data_dir(damaged_real_data_dir)
    message = str(caught.value)
    assert NEWEST in message and "Adler32" in message
    assert "snapshot.800000000 (zxid 0x800000000)" in message
    assert "zxid 0x800000000 instead of at least 0x9f00000037" in message
    assert "no transaction log" in message and "--zk-log-dir" in message
    assert "--accept-older-zk-state" in message


def test_accepting_the_older_state_loads_it_and_records_that(damaged_real_data_dir: Path) -> None:
    tree, report = load_data_dir(damaged_real_data_dir, accept_older_state=True)
    assert report.older_state_accepted
    assert report.snapshot is not None and report.snapshot.endswith("snapshot.800000000")
    assert tree.last_zxid == 0x800000000
    assert any(w.startswith("OLDER ZOOKEEPER STATE ACCEPTED") and NEWEST in w for w in report.warnings)
    assert any(w.startswith(f"skipped damaged snapshot {NEWEST}") for w in report.warnings)
    intact, intact_report = load_data_dir(KAFKA_DATA_DIR)
    assert not intact_report.older_state_accepted and intact.last_zxid == 0x9F00000037


def test_logs_that_replay_past_the_damaged_snapshot_let_it_through_and_say_so(tmp_path: Path) -> None:
    tree, report = load_data_dir(txnlog_dir(tmp_path))
    assert report.snapshot is not None and report.snapshot.endswith("snapshot.0")
    assert report.last_zxid == 0x13 and not report.older_state_accepted
    assert tree.nodes == read_snapshot(TXNLOG_DIR / "snapshot.13.gz").tree.nodes
    assert any("skipped damaged snapshot snapshot.13.gz" in w and "gunzip" in w for w in report.warnings)
    assert any(
        "instead of the damaged snapshot.13.gz" in w and "up to zxid 0x13" in w and "nothing is lost" in w
        for w in report.warnings
    )


def test_logs_torn_before_the_damaged_snapshot_are_refused_saying_where(tmp_path: Path) -> None:
    entries = read_txn_log(TXNLOG_DIR / "log.1.gz").entries
    torn_at = entries[17].offset  # zxid 0x12
    data_dir = txnlog_dir(tmp_path, log_end=torn_at + 25)
    with pytest.raises(OlderStateError) as caught:
        load_data_dir(data_dir)
    message = str(caught.value)
    assert "snapshot.13.gz" in message and "replay it only up to zxid 0x11" in message
    assert f"truncated entry at byte {torn_at} of log.1" in message
    assert "zxid 0x11 instead of at least 0x13" in message


def test_logs_elsewhere_are_found_with_the_log_dir(tmp_path: Path) -> None:
    data_dir = txnlog_dir(tmp_path)
    logs = tmp_path / "datalog" / "version-2"
    logs.mkdir(parents=True)
    shutil.move(data_dir / "version-2" / "log.1", logs / "log.1")
    with pytest.raises(OlderStateError, match=r"no transaction log in .*--zk-log-dir"):
        load_data_dir(data_dir)
    _, report = load_data_dir(data_dir, logs.parent)
    assert report.last_zxid == 0x13 and not report.older_state_accepted


def test_only_torn_snapshots_and_no_logs_name_the_snapshots(tmp_path: Path) -> None:
    folder = tmp_path / "version-2"
    folder.mkdir()
    data = (TXNLOG_DIR / "snapshot.0").read_bytes()
    (folder / "snapshot.0").write_bytes(data[:-20])  # an interrupted write: no seal at the end
    with pytest.raises(Zk2KraftError, match=r"no valid snapshot in .*snapshot\.0: does not end with the '/' seal"):
        load_data_dir(tmp_path)


def test_snapshot_without_logs_notes_the_missing_logs() -> None:
    _, report = load_data_dir(KAFKA_DATA_DIR)
    assert report.warnings == []
    assert any("no transaction log" in n and "--zk-log-dir" in n for n in report.notes)


# ------------------------------------------------------------------ commands


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_zk_export_refuses_then_records_an_accepted_older_state(damaged_real_data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "kafka.jsonl"
    refused = run("zk", "export", "--zk-data-dir", str(damaged_real_data_dir), "--chroot", CHROOT, "-o", str(out))
    assert refused.exit_code == 2, refused.output
    assert NEWEST in refused.stderr and "0x9f00000037" in refused.stderr and "--zk-log-dir" in refused.stderr
    assert not out.exists()

    accepted = run(
        "zk", "export", "--zk-data-dir", str(damaged_real_data_dir), "--chroot", CHROOT, "-o", str(out),
        "--accept-older-zk-state",
    )  # fmt: skip
    assert accepted.exit_code == 0, accepted.output
    assert "OLDER ZOOKEEPER STATE ACCEPTED" in accepted.stderr
    header, _ = iter_dump(out)
    assert header.accepted_older_zk_state and header.last_zxid == 0x800000000
    assert any(NEWEST in w for w in header.warnings)


def test_migrate_refuses_then_records_an_accepted_older_state(damaged_real_data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "meta"
    refused = run("migrate", "--zk-data-dir", str(damaged_real_data_dir), "--chroot", CHROOT, "--out", str(out))
    assert refused.exit_code == 2, refused.output
    assert NEWEST in refused.stderr and "zxid 0x800000000 instead of at least 0x9f00000037" in refused.stderr
    assert not out.exists()

    accepted = run(
        "migrate", "--zk-data-dir", str(damaged_real_data_dir), "--chroot", CHROOT, "--out", str(out),
        "--format", "json", "--accept-older-zk-state",
    )  # fmt: skip
    assert accepted.exit_code == 0, accepted.output
    assert "OLDER ZOOKEEPER STATE ACCEPTED" in accepted.stderr
    report = json.loads(accepted.stdout)
    assert report["accepted_older_zk_state"] is True
    assert any("OLDER ZOOKEEPER STATE ACCEPTED" in w and NEWEST in w for w in report["warnings"])

    # A dump exported from the older state carries that into the next command's report.
    dump = tmp_path / "older.jsonl"
    assert run(
        "zk", "export", "--zk-data-dir", str(damaged_real_data_dir), "--chroot", CHROOT, "-o", str(dump),
        "--accept-older-zk-state",
    ).exit_code == 0  # fmt: skip
    again = run("migrate", "--zk-dump", str(dump), "--out", str(tmp_path / "meta2"), "--format", "json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["accepted_older_zk_state"] is True


def test_plan_refuses_then_records_an_accepted_older_state(damaged_real_data_dir: Path, tmp_path: Path) -> None:
    args = [
        "plan", "--zk-data-dir", str(damaged_real_data_dir), "--chroot", CHROOT,
        "--broker-config", str(KAFKA_DATA_DIR / "server.properties"), "--out", str(tmp_path / "p"),
    ]  # fmt: skip
    refused = run(*args)
    assert refused.exit_code == 2, refused.output
    assert NEWEST in refused.stderr and not (tmp_path / "p").exists()
    accepted = run(*args, "--accept-older-zk-state")
    assert accepted.exit_code == 1, accepted.output  # the sample cluster's own blockers
    assert "OLDER ZOOKEEPER STATE ACCEPTED" in accepted.stderr
    plan = json.loads((tmp_path / "p" / "plan.json").read_text())
    assert plan["accepted_older_zk_state"] is True
    assert any(NEWEST in w for w in plan["zk_warnings"])
    assert "OLDER ZOOKEEPER STATE ACCEPTED" in (tmp_path / "p" / "plan.md").read_text()


def test_accepting_an_older_state_needs_a_data_dir(tmp_path: Path) -> None:
    result = run("zk", "export", "--zk", "127.0.0.1:1/kafka", "--accept-older-zk-state", "-o", str(tmp_path / "x"))
    assert result.exit_code == 2 and "--accept-older-zk-state only goes with --zk-data-dir" in result.stderr
