"""`zk2kraft dump` and `zk2kraft snapshot` as an operator runs them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli
from tests.support import FIXTURES

FIXTURE = FIXTURES / "kraft-real-3.7"
LOG_DIR = FIXTURE / "__cluster_metadata-0"
ZK_DATA_DIR = FIXTURES / "zk-real-kafka-3.5"
EXPECTED_LOG_COUNTS = {
    "BeginTransactionRecord": 1,
    "BrokerRegistrationChangeRecord": 3,
    "ConfigRecord": 3,
    "EndTransactionRecord": 1,
    "FeatureLevelRecord": 1,
    "LeaderChangeMessage": 1,
    "NoOpRecord": 4801,
    "PartitionChangeRecord": 54,
    "PartitionRecord": 54,
    "ProducerIdsRecord": 1,
    "RegisterBrokerRecord": 2,
    "RegisterControllerRecord": 1,
    "TopicRecord": 5,
    "ZkMigrationStateRecord": 1,
}


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("target", [LOG_DIR, FIXTURE, LOG_DIR / "00000000000000000000.log"])
def test_summary_json_prints_exactly_kafkas_counts(target: Path) -> None:
    code, out, _ = run("dump", "--summary", "--format", "json", str(target))
    assert code == 0
    assert json.loads(out) == EXPECTED_LOG_COUNTS


def test_summary_with_two_jobs_is_the_same() -> None:
    code, out, _ = run("dump", "--summary", "--jobs", "2", str(LOG_DIR / "00000000000000000000.log"))
    assert code == 0 and json.loads(out) == EXPECTED_LOG_COUNTS


def test_each_record_is_one_json_object_in_offset_order() -> None:
    code, out, _ = run("dump", str(LOG_DIR))
    assert code == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert len(lines) == 4929
    assert [x["offset"] for x in lines] == list(range(4929))
    first_feature = next(x for x in lines if x["type"] == "FeatureLevelRecord")
    assert first_feature == {
        "offset": 2,
        "leaderEpoch": 1,
        "timestamp": first_feature["timestamp"],
        "control": False,
        "type": "FeatureLevelRecord",
        "kafkaType": "FEATURE_LEVEL_RECORD",
        "version": 0,
        "data": {"name": "metadata.version", "featureLevel": 19},
    }
    assert lines[0]["type"] == "LeaderChangeMessage" and lines[0]["control"] is True


def test_bootstrap_checkpoint_and_table_format() -> None:
    code, out, _ = run("dump", "--summary", "--format", "table", str(FIXTURE / "bootstrap.checkpoint"))
    assert code == 0
    assert "FeatureLevelRecord" in out and "SnapshotHeaderRecord" in out and "total" in out


def test_corrupt_segment_names_file_and_offset_and_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "00000000000000000000.log"
    data = bytearray((LOG_DIR / "00000000000000000000.log").read_bytes())
    data[1000] ^= 0x01
    bad.write_bytes(bytes(data))
    code, out, err = run("dump", "--summary", str(bad))
    assert code == 2
    assert "00000000000000000000.log at byte" in err
    assert "CRC" in err or "crc" in err.lower()
    assert out == ""


def test_snapshot_writes_a_checkpoint_dump_can_read(tmp_path: Path) -> None:
    meta = tmp_path / "meta"
    shutil.copytree(FIXTURE, meta)
    code, out, _ = run("snapshot", str(meta))
    assert code == 0, out
    checkpoint = meta / "__cluster_metadata-0" / "00000000000000004929-0000000001.checkpoint"
    assert checkpoint.exists()
    code, out, _ = run("dump", "--summary", str(checkpoint))
    counts = json.loads(out)
    assert counts["TopicRecord"] == 5 and counts["PartitionRecord"] == 54
    assert counts["SnapshotHeaderRecord"] == 1 and counts["SnapshotFooterRecord"] == 1
    assert "BeginTransactionRecord" not in counts and "NoOpRecord" not in counts
    # Running again finds nothing new to write and leaves the file alone.
    before = checkpoint.read_bytes()
    code, _, err = run("snapshot", str(meta))
    assert code == 0 and "nothing to write" in err
    assert checkpoint.read_bytes() == before


def test_help_teaches_with_examples() -> None:
    for command in (
        ["--help"],
        ["dump", "--help"],
        ["snapshot", "--help"],
        ["zk", "--help"],
        ["zk", "export", "--help"],
        ["zk", "load", "--help"],
        ["migrate", "--help"],
    ):
        code, out, _ = run(*command)
        assert code == 0
        assert "Example" in out


def test_files_that_are_not_kraft_logs_exit_2_naming_them(tmp_path: Path) -> None:
    export = tmp_path / "kafka-zk.jsonl"
    code, _out, err = run("zk", "export", "--zk-data-dir", str(ZK_DATA_DIR), "-o", str(export))
    assert code == 0, err
    for path in (FIXTURE / "meta.properties", export):
        for args in (["dump", str(path)], ["dump", "--summary", str(path)], ["dump", "--summary", "--jobs", "2", str(path)]):
            code, out, err = run(*args)
            assert code == 2, (args, out)
            assert f"{path}: not a KRaft log segment or snapshot" in err
            assert out == ""


def test_a_folder_without_a_metadata_log_exits_2(tmp_path: Path) -> None:
    (tmp_path / "meta.properties").write_bytes((FIXTURE / "meta.properties").read_bytes())
    code, out, err = run("dump", "--summary", str(tmp_path))
    assert code == 2
    assert f"{tmp_path}: no KRaft metadata log here" in err
    assert out == ""


def test_an_empty_newest_segment_is_still_a_log(tmp_path: Path) -> None:
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(b"")  # Kafka rolls a new segment as an empty file
    code, out, _err = run("dump", "--summary", str(tmp_path))
    assert code == 0 and out.strip() == "{}"
