"""`zk2kraft plan` writes, per bridge of the quorum, the Kafka 3.9 controller.properties of the real controller that
takes its place, and the rolling hand-off steps in plan.md."""

from __future__ import annotations

import shlex
from pathlib import Path

from click.testing import CliRunner

from cli.handoff_cmd import handoff_check_cmd
from cli.main import cli
from migrate.plan.checks import run_checks
from migrate.plan.handoff import step_estimate
from migrate.plan.inputs import BrokerConfig, PlanInputs, parse_controllers
from migrate.plan.phases import Plan, build_plan
from migrate.plan.properties import parse_properties_text
from migrate.plan.render import plan_markdown, write_plan
from tests.support.plan import SASL_SSL_SCRAM, broker_properties, healthy_model

CONTROLLERS = "3000@ctrl1:9093,3001@ctrl2:9094,3002@ctrl3:9095"
ZK_TLS_SASL = {
    "zookeeper.connect": "zk1:2182,zk2:2182/kafka",
    "zookeeper.ssl.client.enable": "true",
    "zookeeper.clientCnxnSocket": "org.apache.zookeeper.ClientCnxnSocketNetty",
    "zookeeper.ssl.truststore.location": "/etc/kafka/zk-truststore.jks",
    "zookeeper.ssl.truststore.password": "zk-trust-pw",
    "zookeeper.set.acl": "true",
}


def plan_for(
    tmp_path: Path, extra: dict[str, str], controllers: str | None = CONTROLLERS, **options: str
) -> tuple[Plan, dict[str, str]]:
    brokers = []
    for broker_id in (1, 2, 3):
        text = broker_properties(broker_id, "zk1:2181/kafka", {k: v.format(id=broker_id) for k, v in extra.items()})
        brokers.append(BrokerConfig(parse_properties_text(text, str(tmp_path / f"server-{broker_id}.properties"))))
    inputs = PlanInputs(
        model=healthy_model(),
        zk_origin="test",
        zk_chroot="/kafka",
        zk_connect="zk1:2182,zk2:2182/kafka",
        brokers=brokers,
        controllers=parse_controllers(controllers) if controllers else [],
        **options,  # type: ignore[arg-type]
    )
    return build_plan(inputs, run_checks(inputs))


def bridge_options(plan: Plan) -> dict[int, dict[str, str]]:
    """Each generated `bridge run` line's options, by --node-id."""
    steps = next(p for p in plan.phases if p.id == "provision-controllers").steps
    out = {}
    for step in steps:
        if step.startswith("Bridge "):
            argv = shlex.split(step.split("`")[1])
            options = {argv[i]: argv[i + 1] for i in range(len(argv) - 1) if argv[i].startswith("--")}
            out[int(options["--node-id"])] = options
    return out


def handoff_values(files: dict[str, str], node_id: int) -> dict[str, str]:
    path = f"handoff/controller-{node_id}.properties"
    return parse_properties_text(files[path], path).values


def test_each_voter_gets_the_controller_that_takes_its_bridges_place(tmp_path: Path) -> None:
    plan, files = plan_for(tmp_path, {**SASL_SSL_SCRAM, **ZK_TLS_SASL}, bridge_metadata_dir="/data/bridge")
    bridges = bridge_options(plan)
    assert sorted(bridges) == [3000, 3001, 3002]
    for node_id, bridge in bridges.items():
        values = handoff_values(files, node_id)
        assert values == {
            "process.roles": "controller",
            "node.id": str(node_id),
            "controller.quorum.voters": bridge["--voters"],
            "controller.listener.names": "CONTROLLER",
            "listeners": f"CONTROLLER://{bridge['--listen']}",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,INTERNAL:SASL_SSL,EXTERNAL:SSL",
            "metadata.log.dir": bridge["--metadata-dir"],
            "log.dirs": bridge["--metadata-dir"],
            "zookeeper.metadata.migration.enable": "true",
            **ZK_TLS_SASL,
            "inter.broker.listener.name": bridge["--inter-broker-listener-name"],
            "sasl.mechanism.inter.broker.protocol": bridge["--inter-broker-sasl-mechanism"],
            "ssl.truststore.location": "/etc/kafka/truststore.jks",
            "ssl.truststore.password": "trust-s3cret",
            "listener.name.internal.scram-sha-512.sasl.jaas.config": SASL_SSL_SCRAM[
                "listener.name.internal.scram-sha-512.sasl.jaas.config"
            ],
        }
        assert values["controller.quorum.voters"] == CONTROLLERS
        assert bridge["--metadata-dir"] == "/data/bridge"
    assert [bridges[i]["--listen"] for i in (3000, 3001, 3002)] == ["0.0.0.0:9093", "0.0.0.0:9094", "0.0.0.0:9095"]
    # The files are listed in plan.json without their values: they carry the brokers' secrets.
    assert plan.handoff is not None and [c.file for c in plan.handoff.configs] == [
        f"handoff/controller-{i}.properties" for i in (3000, 3001, 3002)
    ]
    shown = plan.model_dump_json() + plan_markdown(plan)
    assert "jaas-s3cret" not in shown and "trust-s3cret" not in shown


def test_plaintext_brokers_give_a_plaintext_channel_and_the_default_directory(tmp_path: Path) -> None:
    plan, files = plan_for(tmp_path, {})
    values = handoff_values(files, 3001)
    assert values["metadata.log.dir"] == bridge_options(plan)[3001]["--metadata-dir"] == "/var/lib/zk2kraft/meta"
    assert values["listener.security.protocol.map"] == "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
    assert values["inter.broker.listener.name"] == "PLAINTEXT"
    assert values["zookeeper.connect"] == "zk1:2181/kafka"
    assert not [k for k in values if k.startswith(("ssl.", "sasl.", "listener.name."))]


def test_without_controllers_the_handoff_files_use_the_same_placeholders_as_the_other_controller_files(
    tmp_path: Path,
) -> None:
    plan, files = plan_for(tmp_path, {}, controllers=None)
    assert all(c.placeholder for c in plan.controllers)
    for c in plan.controllers:
        assert f"1-provision-controllers/controller-{c.node_id}.properties" in files
        assert handoff_values(files, c.node_id)["controller.quorum.voters"] == plan.bridge_voters
    assert sorted(f for f in files if f.startswith("handoff/")) == [
        f"handoff/controller-{i}.properties" for i in (3000, 3001, 3002)
    ]


def test_no_handoff_where_no_bridge_can_be_the_controller(tmp_path: Path) -> None:
    gssapi = {**SASL_SSL_SCRAM, "sasl.mechanism.inter.broker.protocol": "GSSAPI"}
    plan, files = plan_for(tmp_path, gssapi)
    assert plan.handoff is None
    assert not [f for f in files if f.startswith("handoff/")]
    assert "Hand-off" not in plan_markdown(plan)


def test_the_runbook_hands_over_one_voter_at_a_time_with_each_command(tmp_path: Path) -> None:
    plan, files = plan_for(tmp_path, {}, bridge_metadata_dir="/data/bridge")
    markdown = plan_markdown(plan)
    section = markdown.split("## Hand-off: from the zk2kraft bridges to Kafka 3.9 controllers, then finalize")[1]
    quorum = "bin/kafka-metadata-quorum.sh --bootstrap-controller ctrl1:9093,ctrl2:9094,ctrl3:9095 describe"
    expected_in_order = [f"`{quorum} --status` (LeaderId)", "the leader bridge with its four steps, last"]
    for node_id in (3000, 3001, 3002):
        expected_in_order += [
            f"stop bridge {node_id} cleanly, on its host: `zk2kraft bridge stop --status http://ctrl{node_id - 2999}:9404 "
            "--for-handoff`",
            f"`zk2kraft handoff check --metadata-dir /data/bridge --zk zk1:2182,zk2:2182/kafka --node-id {node_id} "
            f"--voters {CONTROLLERS}`",
            f"`bin/kafka-server-start.sh handoff/controller-{node_id}.properties`",
            f"`{quorum} --replication` lists node {node_id} with the leader's LogEndOffset",
        ]
    expected_in_order += [
        "After the leader bridge", "zk2kraft status --zk zk1:2182,zk2:2182/kafka", "Cold, instead of the rolling",
        "`zk2kraft finalize --zk zk1:2182,zk2:2182/kafka --metadata-dir /data/bridge --controller-config "
        "handoff/controller-3000.properties", "no rollback after finalization", "`zk2kraft rollback --zk",
    ]  # fmt: skip
    at = 0
    for text in expected_in_order:
        found = section.find(text, at)
        assert found >= 0, f"{text!r} missing or out of order in:\n{section}"
        at = found + len(text)
    # The check command is one zk2kraft accepts as written (its directory made real).
    command = section.split("`zk2kraft handoff check ")[1].split("`")[0]
    argv = shlex.split(command.replace("/data/bridge", str(tmp_path)))
    params = handoff_check_cmd.make_context("check", argv).params
    assert params["node_id"] == 3000 and params["voters"] == CONTROLLERS
    # The files the steps start are written under --out.
    write_plan(plan, files, tmp_path / "out")
    assert (tmp_path / "out" / "handoff" / "controller-3002.properties").is_file()
    assert "## Hand-off" in (tmp_path / "out" / "plan.md").read_text(encoding="utf-8")


def test_a_relative_bridge_metadata_dir_is_refused_before_zookeeper_is_read() -> None:
    # Nothing listens at 127.0.0.1:1: reading ZooKeeper would be exit 5.
    result = CliRunner().invoke(cli, ["plan", "--zk", "127.0.0.1:1", "--bridge-metadata-dir", "meta"])
    assert result.exit_code == 2, result.output
    assert "'meta' is not an absolute path" in result.output


def test_plan_json_and_plan_md_hide_every_secret_the_generated_files_carry(tmp_path: Path) -> None:
    plan, files = plan_for(tmp_path, {**SASL_SSL_SCRAM, **ZK_TLS_SASL})
    secrets = ["zk-trust-pw", "trust-s3cret", "jaas-s3cret"]
    shown = plan.model_dump_json() + plan_markdown(plan)
    assert [s for s in secrets if s in shown] == []
    assert '"new":"[hidden]"' in plan.model_dump_json().replace(" ", "")  # the change is listed, its value not
    assert all(any(s in text for text in files.values()) for s in secrets)  # the files carry them, as Kafka needs


def test_each_hand_off_step_says_how_long_it_takes_from_a_named_benchmark_or_that_it_was_not_measured() -> None:
    small, large = step_estimate("stop", 20_000), step_estimate("stop", 2_000_000)
    assert "bench/bench_clean_stop.py" in small and "0.4 s at 20,000 partitions" in small
    assert "41.3 s at 2,000,000 partitions" in large
    assert step_estimate(None, 20_000) == "(Time: not measured.)"
