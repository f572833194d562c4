"""Generated configs per phase match Kafka 3.9's migration documentation key by key; `zk2kraft plan` end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from kazoo.client import KazooClient

from cli.main import cli
from migrate.plan.checks import run_checks
from migrate.plan.inputs import BrokerConfig, PlanInputs, parse_controllers
from migrate.plan.phases import PHASE_IDS, build_plan
from migrate.plan.properties import parse_properties_text
from migrate.zk.embedded import EmbeddedZooKeeper
from tests.support import FIXTURES
from tests.support.plan import healthy_model, seed, write_broker_files

FIXTURE = FIXTURES / "zk-real-kafka-3.5"

# Kafka 3.9 docs/ops.html, "ZooKeeper to KRaft Migration": the broker before the migration ...
DOCS_ZK_BROKER = """\
broker.id=0
listeners=PLAINTEXT://:9092
advertised.listeners=PLAINTEXT://localhost:9092
inter.broker.protocol.version=3.9
zookeeper.connect=localhost:2181
"""
# ... "Here is a sample config for a KRaft controller that is ready for migration"
DOCS_CONTROLLER = {
    "process.roles": "controller",
    "node.id": "3000",
    "controller.quorum.bootstrap.servers": "localhost:9093",
    "controller.listener.names": "CONTROLLER",
    "listeners": "CONTROLLER://:9093",
    "zookeeper.metadata.migration.enable": "true",
    "zookeeper.connect": "localhost:2181",
    "inter.broker.listener.name": "PLAINTEXT",
}
# ... "Here is a sample config for a broker that is ready for migration"
DOCS_MIGRATING_BROKER = {
    "broker.id": "0",
    "listeners": "PLAINTEXT://:9092",
    "advertised.listeners": "PLAINTEXT://localhost:9092",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "inter.broker.protocol.version": "3.9",
    "zookeeper.metadata.migration.enable": "true",
    "zookeeper.connect": "localhost:2181",
    "controller.quorum.bootstrap.servers": "localhost:9093",
    "controller.listener.names": "CONTROLLER",
}
# ... "Sample KRaft broker server.properties"
DOCS_KRAFT_BROKER = {
    "process.roles": "broker",
    "node.id": "0",
    "listeners": "PLAINTEXT://:9092",
    "advertised.listeners": "PLAINTEXT://localhost:9092",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "controller.quorum.bootstrap.servers": "localhost:9093",
    "controller.listener.names": "CONTROLLER",
}
# ... "Finalizing the migration"
DOCS_FINAL_CONTROLLER = {
    "process.roles": "controller",
    "node.id": "3000",
    "controller.quorum.bootstrap.servers": "localhost:9093",
    "controller.listener.names": "CONTROLLER",
    "listeners": "CONTROLLER://:9093",
}


def docs_plan(tmp_path: Path, broker_text: str = DOCS_ZK_BROKER, **knobs: str) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    path = tmp_path / "server.properties"
    path.write_text(broker_text, encoding="utf-8")
    model = healthy_model()
    inputs = PlanInputs(
        model=model,
        zk_origin="test",
        zk_chroot="/",
        zk_connect="localhost:2181",
        brokers=[BrokerConfig(parse_properties_text(broker_text, str(path)))],
        controllers=parse_controllers("3000@localhost:9093"),
    )
    for k, v in knobs.items():
        setattr(inputs, k, v)
    _plan, files = build_plan(inputs, run_checks(inputs))
    values = {
        rel: parse_properties_text(text, rel).values for rel, text in files.items() if rel.endswith(".properties")
    }
    return files, values


def test_each_phase_matches_kafka_docs_key_by_key(tmp_path: Path) -> None:
    files, values = docs_plan(tmp_path)
    assert values["1-provision-controllers/controller-3000.properties"] == DOCS_CONTROLLER
    assert values["2-brokers-migration-mode/broker-0.properties"] == DOCS_MIGRATING_BROKER
    assert values["4-brokers-to-kraft/broker-0.properties"] == DOCS_KRAFT_BROKER
    assert values["5-finalize/controller-3000.properties"] == DOCS_FINAL_CONTROLLER
    # IBP already 3.9: no 'prepare' config; 'migration-complete' changes no config.
    assert not any(rel.startswith(("0-prepare/", "3-migration-complete/")) for rel in files)


def test_diffs_show_only_the_phase_changes_and_keep_comments(tmp_path: Path) -> None:
    text = "# my broker\nbroker.id=0\n# where ZooKeeper lives\nzookeeper.connect=localhost:2181\nlisteners=PLAINTEXT://:9092\n"
    files, values = docs_plan(tmp_path, text)
    prepared = files["0-prepare/broker-0.properties"]
    assert "# my broker" in prepared and values["0-prepare/broker-0.properties"]["inter.broker.protocol.version"] == "3.9"
    diff = files["4-brokers-to-kraft/broker-0.diff"]
    assert "-broker.id=0\n+node.id=0\n" in diff
    assert "+process.roles=broker" in diff
    assert "# where ZooKeeper lives" in files["4-brokers-to-kraft/broker-0.properties"]
    removed = [line for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    assert {line.split("=")[0][1:] for line in removed} == {
        "broker.id", "zookeeper.connect", "inter.broker.protocol.version", "zookeeper.metadata.migration.enable",
    }  # fmt: skip


def test_kraft_phase_swaps_acl_authorizer_and_drops_control_plane_listener(tmp_path: Path) -> None:
    text = DOCS_ZK_BROKER + (
        "authorizer.class.name=kafka.security.authorizer.AclAuthorizer\n"
        "control.plane.listener.name=CONTROL\n"
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROL:SSL\n"
        "zookeeper.ssl.protocol=TLSv1.3\n"
        "password.encoder.secret=s3cret\n"
    )
    _files, values = docs_plan(tmp_path, text)
    kraft = values["4-brokers-to-kraft/broker-0.properties"]
    assert kraft["authorizer.class.name"] == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert "control.plane.listener.name" not in kraft and "zookeeper.ssl.protocol" not in kraft
    migrating = values["2-brokers-migration-mode/broker-0.properties"]
    assert migrating["listener.security.protocol.map"] == "PLAINTEXT:PLAINTEXT,CONTROL:SSL,CONTROLLER:PLAINTEXT"
    ctrl = values["1-provision-controllers/controller-3000.properties"]
    # The controller gets the brokers' ZooKeeper client settings, password secret and protocol map.
    assert ctrl["zookeeper.ssl.protocol"] == "TLSv1.3"
    assert ctrl["password.encoder.secret"] == "s3cret"
    assert ctrl["listener.security.protocol.map"] == "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,CONTROL:SSL"
    final = values["5-finalize/controller-3000.properties"]
    assert not any(k.startswith("zookeeper.") for k in final)


def test_a_repeated_key_means_in_every_generated_file_what_java_reads(tmp_path: Path) -> None:
    # Java's Properties keeps the last line of a repeated key; an earlier line must not come back to life.
    text = "broker.id=5\nzookeeper.connect=old-zk:2181\n" + DOCS_ZK_BROKER + "listeners=PLAINTEXT://:9092\n"
    files, values = docs_plan(tmp_path, text)
    kraft = values["4-brokers-to-kraft/broker-0.properties"]
    assert kraft["node.id"] == "0" and "broker.id" not in kraft
    assert not any(k.startswith("zookeeper.") for k in kraft)
    assert values["2-brokers-migration-mode/broker-0.properties"]["zookeeper.connect"] == "localhost:2181"
    assert "# zk2kraft KRaft mode: removed broker.id=5 (repeated; line 3 set it last)" in files["4-brokers-to-kraft/broker-0.properties"]
    # The generated files are named after, and the checks read, the value Java keeps.
    assert "4-brokers-to-kraft/broker-5.properties" not in files


def test_static_quorum_uses_voters(tmp_path: Path) -> None:
    _files, values = docs_plan(tmp_path, quorum="static")
    assert values["2-brokers-migration-mode/broker-0.properties"]["controller.quorum.voters"] == "3000@localhost:9093"
    assert "controller.quorum.bootstrap.servers" not in values["4-brokers-to-kraft/broker-0.properties"]


@pytest.mark.zookeeper
def test_plan_command_writes_plan_and_exits_by_blockers(
    zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str, tmp_path: Path
) -> None:
    chroot = zk_chroot + "/kafka"
    seed(zk_admin, healthy_model(), chroot)
    connect = zk_server.connect_string + chroot
    files = write_broker_files(tmp_path, connect)
    out = tmp_path / "plan"
    args = ["plan", "--zk", connect, "--controllers", "3000@c1:9093,3001@c2:9093,3002@c3:9093", "--out", str(out)]
    for f in files:
        args += ["--broker-config", str(f)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "0 blocker(s)" in result.output
    plan = json.loads((out / "plan.json").read_text())
    assert plan["schema_version"] == 1 and plan["blockers"] == 0
    assert [p["id"] for p in plan["phases"]] == list(PHASE_IDS)
    migration = next(p for p in plan["phases"] if p["id"] == "brokers-migration-mode")
    # The current ZooKeeper controller (broker 2) restarts last.
    assert migration["restart_order"] == ["broker-1", "broker-3", "broker-2"]
    assert all((out / c["file"]).is_file() for p in plan["phases"] for c in p["configs"])
    assert "## Phase 2: Enter migration mode on the brokers" in (out / "plan.md").read_text()

    # A broker id collides with a controller id: blocker, exit 1, plan still written, blockers first.
    out2 = tmp_path / "plan2"
    args2 = [a if a != str(out) else str(out2) for a in args]
    args2[args2.index("--controllers") + 1] = "1@c1:9093"
    result = CliRunner().invoke(cli, args2)
    assert result.exit_code == 1, result.output
    plan2 = json.loads((out2 / "plan.json").read_text())
    assert plan2["blockers"] >= 1 and plan2["checks"][0]["severity"] == "blocker"
    assert plan2["checks"][0]["status"] == "fail"


def test_plan_on_the_sample_cluster_offline(tmp_path: Path) -> None:
    args = [
        "plan", "--zk-data-dir", str(FIXTURE), "--chroot", "/de-4-3-kafka-cluster",
        "--broker-config", str(FIXTURE / "server.properties"), "--out", str(tmp_path / "p"),
    ]  # fmt: skip
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert "3 blocker(s)" in lines[0]
    assert lines[1].lstrip().startswith("BLOCKER")
    assert (tmp_path / "p" / "plan.md").is_file()
    # Without --controllers the plan uses placeholders and says so.
    plan = json.loads((tmp_path / "p" / "plan.json").read_text())
    assert all(c["placeholder"] for c in plan["controllers"])


def test_plan_out_refuses_a_folder_holding_an_earlier_plan_unless_forced(tmp_path: Path) -> None:
    out = tmp_path / "p"
    args = [
        "plan", "--zk-data-dir", str(FIXTURE), "--chroot", "/de-4-3-kafka-cluster",
        "--broker-config", str(FIXTURE / "server.properties"), "--out", str(out),
    ]  # fmt: skip
    assert CliRunner().invoke(cli, args).exit_code == 1  # blockers; the plan is written
    # A per-broker file of an earlier plan for a broker that is gone since.
    stale = out / "2-brokers-migration-mode" / "broker-9.properties"
    stale.write_text("broker.id=9\n", encoding="utf-8")
    before = (out / "plan.json").read_bytes()

    refused = CliRunner().invoke(cli, args)
    assert refused.exit_code == 2, refused.output
    assert str(out) in refused.output and "not empty" in refused.output and "--force" in refused.output
    assert stale.is_file() and (out / "plan.json").read_bytes() == before  # refused before touching it

    forced = CliRunner().invoke(cli, [*args, "--force"])
    assert forced.exit_code == 1, forced.output
    assert not stale.exists() and (out / "plan.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p"]  # no staging or old folder left beside it

    # --force never replaces a folder that holds something else than a plan.
    other = tmp_path / "notes"
    other.mkdir()
    (other / "todo.txt").write_text("keep me\n", encoding="utf-8")
    args[args.index("--out") + 1] = str(other)
    result = CliRunner().invoke(cli, [*args, "--force"])
    assert result.exit_code == 2 and "no plan.json" in result.output
    assert [p.name for p in other.iterdir()] == ["todo.txt"]


def test_plan_help_teaches_with_an_example() -> None:
    result = CliRunner().invoke(cli, ["plan", "--help"])
    assert result.exit_code == 0
    assert "zk2kraft plan --zk" in result.output and "--controllers 3000@" in result.output
