"""`zk2kraft finalize` on a real ZooKeeper and a migrated metadata dir: refused (nothing written) for each reason,
allowed once every broker is an unfenced KRaft broker; `status` names a finalized log, `finalize` says so."""

from __future__ import annotations

import dataclasses
import json
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from kazoo.client import KazooClient

from cli import finalize_cmd
from cli.main import cli
from migrate.kraft import records as rec
from migrate.kraft.migration_state import ZkMigrationState
from migrate.kraft.reader import iter_log_dir
from migrate.plan.properties import parse_properties_text
from migrate.plan.status import Condition
from migrate.zk.embedded import EmbeddedZooKeeper
from migrate.zk.model import MigrationState, ZkClusterModel
from migrate.zk.znodes.controller import encode_migration
from tests.support.audit import append_segment, migrate, shared_spark
from tests.support.plan import healthy_model, seed

pytestmark = pytest.mark.zookeeper

CONTROLLERS = (3000, 3001, 3002)
VOTERS = "3000@ctrl0:9093,3001@ctrl1:9093,3002@ctrl2:9093"
KRAFT_EPOCH = 1
"""The migrated log's leader epoch: /controller and /migration name the controller that wrote it."""


def controller_text(node_id: int, *, migration: bool = True, voters: str = VOTERS) -> str:
    """A Kafka 3.9 migrating controller's file, as the plan's handoff/controller-N.properties look."""
    lines = [
        "# controller written by the plan",
        "process.roles=controller",
        f"node.id={node_id}",
        f"controller.quorum.voters={voters}",
        "controller.listener.names=CONTROLLER",
        "listeners=CONTROLLER://:9093",
        f"metadata.log.dir=/var/lib/zk2kraft/meta-{node_id}",
        "inter.broker.listener.name=PLAINTEXT",
    ]
    if migration:
        lines.append("zookeeper.metadata.migration.enable=true")
    lines += ["zookeeper.connect=zk1:2181/kafka", "zookeeper.ssl.client.enable=false", "zookeeper.session.timeout.ms=18000"]
    return "\n".join(lines) + "\n"


@dataclass
class Cluster:
    zk: KazooClient
    connect: str
    root: str
    meta: Path
    configs: list[Path]
    out: Path
    last_offset: int

    def register(self, *batch: tuple[object, int]) -> None:
        """A change the controller committed and dual-wrote: appended to the log, /migration moved to it."""
        append_segment(self.meta, self.last_offset + 1, [list(batch)])
        self.last_offset += len(batch)
        migration = MigrationState(3000, KRAFT_EPOCH, self.last_offset, 1)
        self.zk.set(self.root + "/migration", encode_migration(migration))

    def finalize(self, *extra: str, configs: list[Path] | None = None) -> Result:
        args = ["finalize", "--zk", self.connect, "--metadata-dir", str(self.meta), "--min-soak", "0s", "--out", str(self.out)]
        for path in configs if configs is not None else self.configs:
            args += ["--controller-config", str(path)]
        return CliRunner().invoke(cli, [*args, *extra])


def registration(broker_id: int, epoch: int, *, migrating: bool = False, fenced: bool = False) -> tuple[object, int]:
    record = rec.RegisterBrokerRecord(
        broker_id=broker_id, is_migrating_zk_broker=migrating, incarnation_id=uuid.uuid4(), broker_epoch=epoch, fenced=fenced
    )  # fmt: skip
    return record, 2


def dual_write_model() -> ZkClusterModel:
    """KRaft controller 3000 owns /controller; every broker left /brokers/ids (KRaft brokers now)."""
    m = healthy_model()
    assert m.controller is not None
    m.controller = dataclasses.replace(m.controller, broker_id=3000, kraft_controller_epoch=KRAFT_EPOCH)
    m.brokers.clear()
    return m


@pytest.fixture
def cluster(zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str, tmp_path: Path) -> Cluster:
    """Every broker registered with the controller as an unfenced KRaft broker; ZooKeeper has the log's last change."""
    meta = migrate(healthy_model(), tmp_path / "meta")
    start = max(entry.offset for entry in iter_log_dir(meta)) + 1
    append_segment(meta, start, [[registration(b, start + i)] for i, b in enumerate((1, 2, 3))])
    last = start + 2
    model = dual_write_model()
    model.migration = MigrationState(3000, KRAFT_EPOCH, last, 1)
    root = zk_chroot + "/kafka"
    seed(zk_admin, model, root)
    configs = []
    for node in CONTROLLERS:
        path = tmp_path / "handoff" / f"controller-{node}.properties"
        path.parent.mkdir(exist_ok=True)
        path.write_text(controller_text(node))
        configs.append(path)
    return Cluster(zk_admin, zk_server.connect_string + root, root, meta, configs, tmp_path / "final", last)


def refused(result: Result, cluster: Cluster, condition: str) -> None:
    """Exit 1, the condition failed, and nothing written."""
    assert result.exit_code == 1, result.output
    assert "finalize refused: nothing written" in result.output
    assert not cluster.out.exists()
    lines = [line.split() for line in result.output.splitlines() if line.startswith("  ")]
    verdicts = {parts[1].rstrip(":"): parts[0] for parts in lines}
    assert verdicts[condition] == "FAIL", result.output
    # Only this one: the others pass (the audit is not run once the answer is no).
    others = {c: v for c, v in verdicts.items() if c not in (condition, "audit")}
    assert others == dict.fromkeys(others, "PASS") and len(others) == (6 if condition == "audit" else 5), result.output
    assert verdicts["audit"] == ("FAIL" if condition == "audit" else "NOT-CHECKED")


def test_refused_while_a_broker_is_registered_as_a_migrating_zookeeper_broker(cluster: Cluster) -> None:
    """A broker that stopped in ZooKeeper mode left /brokers/ids but is still registered as a migrating one."""
    cluster.register(registration(3, cluster.last_offset + 1, migrating=True))
    result = cluster.finalize()
    refused(result, cluster, "brokers-kraft")
    assert "registered as migrating ZK brokers: [3]" in result.output


def test_refused_while_a_broker_is_fenced(cluster: Cluster) -> None:
    cluster.register(registration(2, cluster.last_offset + 1, fenced=True))
    result = cluster.finalize()
    refused(result, cluster, "brokers-unfenced")
    assert f"fenced broker(s): [2] in {cluster.meta}" in result.output


def test_refused_while_zookeeper_is_behind_the_log(cluster: Cluster, zk_admin: KazooClient) -> None:
    behind = MigrationState(3000, KRAFT_EPOCH, cluster.last_offset - 2, 1)
    zk_admin.set(cluster.root + "/migration", encode_migration(behind))
    result = cluster.finalize()
    refused(result, cluster, "write-behind-lag")
    assert "ZooKeeper write-behind lag 2 records" in result.output


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda: {3002: controller_text(3002, migration=False)}, "but not in"),
        (lambda: {3001: controller_text(3001, voters="3000@ctrl0:9093,3001@ctrl1:9093,3002@ctrl9:9093")}, "differs"),
        (lambda: {3002: None}, "voter(s) [3002] have no --controller-config"),
        (lambda: {3001: controller_text(3001).replace("process.roles=controller", "process.roles=broker,controller")}, "process.roles"),
    ],
    ids=["migration-flag-mix", "voters-disagree", "voter-without-file", "combined-mode"],
)
def test_refused_while_the_controllers_files_disagree_about_the_migration(
    cluster: Cluster, change: object, expected: str
) -> None:
    assert callable(change)
    configs = []
    for path, node in zip(cluster.configs, CONTROLLERS, strict=True):
        edits = change()
        if node in edits:
            if edits[node] is None:
                continue
            path.write_text(edits[node])
        configs.append(path)
    result = cluster.finalize(configs=configs)
    refused(result, cluster, "controller-configs")
    assert expected in result.output


def test_refused_when_the_active_controller_has_no_file(cluster: Cluster, zk_admin: KazooClient) -> None:
    """/controller names the bridge 3005, not one of the real controllers: the hand-off is not done."""
    data = json.loads(zk_admin.get(cluster.root + "/controller")[0])
    zk_admin.set(cluster.root + "/controller", json.dumps({**data, "brokerid": 3005}).encode())
    result = cluster.finalize()
    refused(result, cluster, "controller-configs")
    assert "the active controller in /controller is 3005" in result.output


def test_the_out_dir_is_not_overwritten_unless_told(cluster: Cluster) -> None:
    cluster.out.mkdir()
    (cluster.out / "controller-3001.properties").write_text("mine\n")
    result = cluster.finalize()
    assert result.exit_code == 2 and "controller-3001.properties already there" in result.stderr
    assert sorted(p.name for p in cluster.out.iterdir()) == ["controller-3001.properties"]
    assert (cluster.out / "controller-3001.properties").read_text() == "mine\n"


def test_a_file_written_into_out_while_the_gate_ran_is_not_overwritten(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The audit may take minutes: --out is checked again right before the write."""

    def audit_while_someone_writes(*_args: object, **_kwargs: object) -> Condition:
        cluster.out.mkdir(exist_ok=True)
        (cluster.out / "controller-3001.properties").write_text("written meanwhile\n")
        return Condition(id="audit", verdict="pass", detail="clean (stood in for Spark)")

    monkeypatch.setattr(finalize_cmd, "audit_condition", audit_while_someone_writes)
    result = cluster.finalize()
    assert result.exit_code == 2 and "controller-3001.properties already there" in result.stderr, result.output
    assert {p.name: p.read_text() for p in cluster.out.iterdir()} == {"controller-3001.properties": "written meanwhile\n"}


@pytest.mark.spark
def test_refused_while_the_audit_is_not_clean(cluster: Cluster, zk_admin: KazooClient) -> None:
    shared_spark()
    topic = sorted(zk_admin.get_children(cluster.root + "/brokers/topics"))[0]
    zk_admin.delete(cluster.root + f"/brokers/topics/{topic}", recursive=True)  # ZooKeeper lost a topic the log has
    result = cluster.finalize()
    refused(result, cluster, "audit")
    assert "exit code 1" in result.output  # a difference found, not a refused audit


@pytest.mark.spark
def test_allowed_once_every_broker_is_a_kraft_broker(cluster: Cluster) -> None:
    """Writes each controller's file without the migration settings and prints the restart order."""
    shared_spark()
    result = cluster.finalize("--audit-out", str(cluster.out.parent / "audit"))
    assert result.exit_code == 0, result.output
    written = sorted(p.name for p in cluster.out.iterdir())
    assert written == [f"controller-{n}.properties" for n in CONTROLLERS]
    for node, source in zip(CONTROLLERS, cluster.configs, strict=True):
        final = parse_properties_text((cluster.out / f"controller-{node}.properties").read_text(), "final").values
        before = parse_properties_text(source.read_text(), "before").values
        assert not [k for k in final if k.startswith("zookeeper.")]
        assert "inter.broker.listener.name" not in final
        kept = {k: v for k, v in before.items() if not k.startswith("zookeeper.") and k != "inter.broker.listener.name"}
        assert final == kept
    out = result.output
    order = [out.index(f"controller {n}, ") for n in (3001, 3002, 3000)]
    assert order == sorted(order), out  # followers first, the active controller (3000 in /controller) last
    assert "controller 3000, the active controller (last)" in out
    assert "kafka-metadata-quorum.sh --bootstrap-controller ctrl1:9093 describe --replication" in out
    assert f"zk2kraft status --zk {cluster.connect} --metadata-dir /var/lib/zk2kraft/meta-3000" in out
    assert "ZkMigrationStateRecord(POST_MIGRATION)" in out and "no rollback" in out

    again = cluster.finalize()
    assert again.exit_code == 2 and "already there" in again.stderr


def test_status_names_a_log_with_post_migration_finalized_and_finalize_says_so(cluster: Cluster) -> None:
    """What the first controller leading without the flag appends: status reads it from the log."""
    post = rec.ZkMigrationStateRecord(zk_migration_state=ZkMigrationState.POST_MIGRATION.value)
    append_segment(cluster.meta, cluster.last_offset + 1, [[(post, 0)]], epoch=2)
    args = ["status", "--zk", cluster.connect, "--metadata-dir", str(cluster.meta)]
    status = CliRunner().invoke(cli, [*args, "--format", "json"])
    assert status.exit_code == 0, status.output
    report = json.loads(status.output)
    assert (report["phase"], report["migration_state"]) == ("finalized", "POST_MIGRATION")
    assert report["write_behind_lag"] is None  # ZooKeeper is no longer written: no lag to report
    text = CliRunner().invoke(cli, args)
    assert text.output.startswith("phase: finalized") and "write-behind lag" not in text.output

    result = cluster.finalize()
    assert result.exit_code == 0, result.output
    assert f"already finalized: ZkMigrationState POST_MIGRATION in {cluster.meta}" in result.output
    assert not cluster.out.exists()


def test_finalize_help_teaches_with_an_example() -> None:
    result = CliRunner().invoke(cli, ["finalize", "--help"])
    assert result.exit_code == 0 and "zk2kraft finalize --zk" in result.output
    assert "POST_MIGRATION" in result.output
