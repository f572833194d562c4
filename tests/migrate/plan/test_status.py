"""`zk2kraft status` phases on seeded ZooKeeper layouts; `zk2kraft finalize-check` conditions."""

from __future__ import annotations

import dataclasses
import json
import re
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from kazoo.client import KazooClient

from cli.main import cli
from migrate.plan.status import (
    BrokersStatus,
    Condition,
    ControllerInfo,
    KraftView,
    MigrationInfo,
    Status,
    finalize_conditions,
    name_phase,
    parse_duration,
    still_migrating,
)
from migrate.zk.embedded import EmbeddedZooKeeper
from migrate.zk.model import MigrationState, ZkClusterModel
from tests.support.audit import migrate
from tests.support.plan import healthy_model, seed

pytestmark = pytest.mark.zookeeper


def _zookeeper(m: ZkClusterModel) -> None:
    pass


def _controllers_ready(m: ZkClusterModel) -> None:
    m.migration = MigrationState()


def _migrating(m: ZkClusterModel) -> None:
    assert m.controller is not None
    m.controller = dataclasses.replace(m.controller, broker_id=3000, kraft_controller_epoch=5)
    m.migration = MigrationState(3000, 5, -1, -1)


def _dual_write(m: ZkClusterModel) -> None:
    _migrating(m)
    m.migration = MigrationState(3000, 5, 880, 5)


def _kraft_brokers(m: ZkClusterModel) -> None:
    _dual_write(m)
    m.brokers.clear()


def _reverted_incomplete(m: ZkClusterModel) -> None:
    m.migration = MigrationState(3000, 5, 880, 5)


LAYOUTS = [
    ("zookeeper", _zookeeper),
    ("controllers-ready", _controllers_ready),
    ("migrating", _migrating),
    ("dual-write", _dual_write),
    ("kraft-brokers", _kraft_brokers),
    ("reverted-incomplete", _reverted_incomplete),
]


@pytest.mark.parametrize(("phase", "mutate"), LAYOUTS, ids=[p for p, _ in LAYOUTS])
def test_status_names_the_phase(
    phase: str, mutate: object, zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str
) -> None:
    model = healthy_model()
    assert callable(mutate)
    mutate(model)
    root = zk_chroot + "/kafka"
    seed(zk_admin, model, root)
    result = CliRunner().invoke(cli, ["status", "--zk", zk_server.connect_string + root, "--format", "json"])
    assert result.exit_code == 0, result.output
    status = json.loads(result.output)
    assert status["phase"] == phase
    assert status["zk_brokers"] == sorted(model.brokers)
    text = CliRunner().invoke(cli, ["status", "--zk", zk_server.connect_string + root])
    assert text.output.startswith(f"phase: {phase}")


def test_an_empty_brokers_ids_alone_does_not_claim_every_broker_runs_in_kraft_mode() -> None:
    """/brokers/ids lists live ZooKeeper-mode brokers only: one stopped in ZooKeeper mode is not there."""
    controller = ControllerInfo(id=3000, kraft=True, kraft_controller_epoch=7, persistent=False)
    migration = MigrationInfo(
        kraft_controller_id=3000, kraft_controller_epoch=7, kraft_metadata_offset=10, kraft_metadata_epoch=7,
        zk_version=3, initial_migration_complete=True,
    )  # fmt: skip
    unchecked = name_phase(controller, migration, [], "MIGRATION")
    assert unchecked[0] == "kraft-brokers" and "give --bridge-status or --metadata-dir" in unchecked[1]
    assert "every broker runs in KRaft mode" not in unchecked[1]
    bridge = KraftView(source="http://ctrl1:9404/status", driver_state="DUAL_WRITE", brokers=BrokersStatus(registered=3, migrating_zk_brokers=2))
    phase, description = name_phase(controller, migration, [], "MIGRATION", still_migrating([bridge]))
    assert phase == "dual-write"
    assert "2 broker(s) still registered as migrating ZooKeeper brokers (http://ctrl1:9404/status)" in description
    log = KraftView(source="/meta", migrating_zk_brokers=[], kraft_brokers=[1, 2, 3])
    assert name_phase(controller, migration, [], "MIGRATION", still_migrating([log])) == (
        "kraft-brokers", "dual-write; every broker runs in KRaft mode (ready for finalize-check)"
    )


def test_finalize_check_reports_every_condition_and_fails_until_all_pass(
    zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str
) -> None:
    root = zk_chroot + "/kafka"
    model = healthy_model()
    _dual_write(model)
    seed(zk_admin, model, root)
    connect = zk_server.connect_string + root
    result = CliRunner().invoke(cli, ["finalize-check", "--zk", connect, "--format", "json", "--min-soak", "0s"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.output)
    verdicts = {c["id"]: c["verdict"] for c in report["conditions"]}
    assert verdicts == {
        "brokers-kraft": "fail",  # brokers 1-3 still in /brokers/ids
        "brokers-unfenced": "not-checked",
        "migration-state": "not-checked",
        "write-behind-lag": "not-checked",
        "soak": "pass",
        "audit": "not-checked",
    }
    # The failover just happened: a 7-day soak fails.
    for znode in ("/brokers/ids/1", "/brokers/ids/2", "/brokers/ids/3"):
        zk_admin.delete(root + znode)
    text = CliRunner().invoke(cli, ["finalize-check", "--zk", connect])
    assert text.exit_code == 1
    assert "PASS         brokers-kraft" in text.output
    assert "FAIL         soak" in text.output and "NOT ready to finalize" in text.output


def test_finalize_check_help_and_durations(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["finalize-check", "--help"])
    assert result.exit_code == 0 and "zk2kraft finalize-check --zk" in result.output
    assert parse_duration("14d") == 14 * 86_400_000 and parse_duration("90") == 90_000
    with pytest.raises(ValueError, match="cannot parse"):
        parse_duration("soon")


@pytest.mark.spark
def test_finalize_check_puts_its_audit_in_a_temp_dir_and_says_where(
    zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = zk_chroot + "/kafka"
    model = healthy_model()
    seed(zk_admin, model, root)
    meta = migrate(model, tmp_path / "meta")
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    args = ["finalize-check", "--zk", zk_server.connect_string + root, "--metadata-dir", str(meta), "--format", "json"]
    result = CliRunner().invoke(cli, args)
    assert list(work.iterdir()) == []  # nothing written into the current directory
    audit = {c["id"]: c for c in json.loads(result.stdout)["conditions"]}["audit"]
    match = re.fullmatch(r"audit report in (\S+) \(exit code \d\)", audit["detail"])
    assert match is not None, audit
    report = Path(match[1])
    assert report.is_relative_to(tempfile.gettempdir()) and (report / "summary.json").is_file()


def test_finalize_check_fails_on_a_migrating_zookeeper_broker_the_bridge_still_counts() -> None:
    """A broker that died in ZooKeeper mode has left /brokers/ids, but its registration with the controller is
    still a migrating ZooKeeper broker's: with only the bridge's /status, that count must block finalizing."""
    controller = ControllerInfo(id=3000, kraft=True, kraft_controller_epoch=5, persistent=False)
    migration = MigrationInfo(
        kraft_controller_id=3000, kraft_controller_epoch=5, kraft_metadata_offset=880, kraft_metadata_epoch=5,
        zk_version=3, initial_migration_complete=True,
    )  # fmt: skip

    def brokers_condition(brokers: BrokersStatus) -> Condition:
        view = KraftView(source="http://ctrl:9309/status", migration_state="MIGRATION", write_behind_lag=0, brokers=brokers)
        status = Status(
            phase="kraft-brokers", description="", controller=controller, controller_epoch=7,
            controller_epoch_mtime_ms=0, migration=migration, zk_brokers=[], migration_state="MIGRATION",
            write_behind_lag=0, kraft=[view], checked_at_ms=10_000,
        )  # fmt: skip
        return {c.id: c for c in finalize_conditions(status, min_soak_ms=0)}["brokers-kraft"]

    left = brokers_condition(BrokersStatus(registered=3, fenced=1, migrating_zk_brokers=1))
    assert left.verdict == "fail" and "1 broker" in left.detail and "migrating ZooKeeper" in left.detail
    assert brokers_condition(BrokersStatus(registered=3, migrating_zk_brokers=0)).verdict == "pass"
    # In a rehearsal no broker registers: /brokers/ids is the only witness.
    rehearsal = BrokersStatus(registered=3, migrating_zk_brokers=3, rehearsal=True)
    assert brokers_condition(rehearsal).verdict == "pass"
