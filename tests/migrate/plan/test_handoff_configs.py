"""`zk2kraft plan` writes, per bridge of the quorum, the Kafka 3.9 controller.properties of the real controller that
takes its place, and the rolling hand-off steps in plan.md."""

from __future__ import annotations

import shlex
from pathlib import Path

from click.testing import CliRunner

from cli.bridge_cmd import run_cmd
from cli.finalize_cmd import finalize_cmd
from cli.handoff_cmd import handoff_check_cmd
from cli.main import cli
from cli.options import zk_security_from
from cli.rollback_cmd import rollback_cmd
from migrate.plan.handoff import step_estimate
from migrate.plan.inputs import PlanInputs, parse_controllers
from migrate.plan.phases import Plan, build_plan
from migrate.plan.properties import parse_properties_text
from migrate.plan.render import plan_markdown, write_plan
from tests.support.plan import PLAN_CONTROLLERS, SASL_SSL_SCRAM, healthy_model, plan_for

CONTROLLERS = PLAN_CONTROLLERS
ZK_TLS_SASL = {
    "zookeeper.connect": "zk1:2182,zk2:2182/kafka",
    "zookeeper.ssl.client.enable": "true",
    "zookeeper.clientCnxnSocket": "org.apache.zookeeper.ClientCnxnSocketNetty",
    "zookeeper.ssl.truststore.location": "/etc/kafka/zk-truststore.jks",
    "zookeeper.ssl.truststore.password": "zk-trust-pw",
    "zookeeper.set.acl": "true",
}


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
    small, large = step_estimate("stop-leader", 20_000), step_estimate("stop-leader", 2_000_000)
    assert "bench/bench_clean_stop.py" in small and "0.4 s at 20,000 partitions" in small
    assert "41.3 s at 2,000,000 partitions" in large
    assert step_estimate(None, 20_000) == "(Time: not measured.)"


def handoff_section(plan: Plan) -> str:
    return plan_markdown(plan).split("## Hand-off: from the zk2kraft bridges to Kafka 3.9 controllers, then finalize")[1]


def command_in(step: str, start: str) -> str:
    """The backquoted command of `step` that begins with `start`."""
    return start + step.split(f"`{start}")[1].split("`")[0]


def test_each_estimate_grows_with_this_clusters_partitions_and_names_its_benchmark(tmp_path: Path) -> None:
    small, _ = plan_for(tmp_path, {})
    large_inputs = PlanInputs(model=healthy_model(), zk_origin="test", zk_chroot="/kafka", zk_connect="zk1:2181/kafka",
                              controllers=parse_controllers(CONTROLLERS))  # fmt: skip
    large_inputs.model.topics["orders"].partitions.update({p: [1, 2, 3] for p in range(2, 400_000)})
    large, _ = build_plan(large_inputs, [])
    assert small.handoff is not None and large.handoff is not None
    check_small = next(s for s in small.handoff.steps if s.startswith("Voter 3001: check"))
    check_large = next(s for s in large.handoff.steps if s.startswith("Voter 3001: check"))
    assert "under 0.1 s at 5 partitions, scaled linearly from 2.85 s at 200,000 (bench/bench_clean_stop.py" in check_small
    assert "about 5.7 s at 400,003 partitions, scaled linearly from 2.85 s at 200,000" in check_large
    stop_large = next(s for s in large.handoff.steps if s.startswith("Voter 3001 on ctrl2: stop"))
    assert "about 9.3 s for a follower, about 8.3 s for the leader bridge, at 400,003 partitions" in stop_large
    # The Kafka controller's start and catch-up were never measured: said so, not guessed.
    start_large = next(s for s in large.handoff.steps if s.startswith("Voter 3001: start"))
    assert start_large.endswith("(Time: not measured.)")
    # The first step sums the measured parts of the rolling procedure for these 3 voters.
    rolling = 2 * 4.65 + 4.13 + 3 * 2.85 + 4.74
    assert f"about {rolling * 400_003 / 200_000:.1f} s in all" in large.handoff.steps[0]
    assert "3 voters, 400,003 partitions" in large.handoff.steps[0]
    assert all("(Time: " in s or "time" in s.lower() for s in large.handoff.steps[2:])


PEM_ZK_TLS = {
    "zookeeper.connect": "zk1:2182,zk2:2182/kafka",
    "zookeeper.ssl.client.enable": "true",
    "zookeeper.clientCnxnSocket": "org.apache.zookeeper.ClientCnxnSocketNetty",
    "zookeeper.ssl.truststore.type": "PEM",
    "zookeeper.ssl.truststore.location": "/etc/kafka/zk-ca.pem",
    "zookeeper.ssl.keystore.type": "PEM",
    "zookeeper.ssl.keystore.location": "/etc/kafka/zk-client.pem",
    "zookeeper.ssl.keystore.password": "zk-key-pw",
    "zookeeper.ssl.endpoint.identification.algorithm": "",
    "zookeeper.set.acl": "true",
}


def test_the_printed_check_command_carries_the_brokers_zookeeper_tls_and_parses_as_zk2kraft_reads_it(
    tmp_path: Path,
) -> None:
    plan, _ = plan_for(tmp_path, PEM_ZK_TLS, bridge_metadata_dir="/data/bridge")
    assert plan.handoff is not None
    step = next(s for s in plan.handoff.steps if s.startswith("Voter 3002: check"))
    command = command_in(step, "zk2kraft handoff check ")
    assert command.endswith(
        "--zk-tls --zk-tls-ca /etc/kafka/zk-ca.pem --zk-tls-cert /etc/kafka/zk-client.pem --zk-tls-no-hostname-check"
    )
    assert "ZK2KRAFT_ZK_TLS_KEY_PASSWORD" in step and "zk-key-pw" not in plan_markdown(plan) + plan.model_dump_json()
    # The real command's parser takes it as written (its files made real), and its ZooKeeper options hold together.
    for name in ("zk-ca.pem", "zk-client.pem"):
        (tmp_path / name).write_text("pem\n", encoding="utf-8")
    argv = shlex.split(command.replace("/etc/kafka", str(tmp_path)).replace("/data/bridge", str(tmp_path)))[3:]
    params = dict(handoff_check_cmd.make_context("check", argv).params)
    assert params["node_id"] == 3002 and params["zk_tls"] and params["zk_tls_no_hostname_check"]
    security = zk_security_from(params)
    assert security["ssl_enable"] and security["ssl_cafile"] == str(tmp_path / "zk-ca.pem")
    assert security["ssl_certfile"] == str(tmp_path / "zk-client.pem") and not security["ssl_check_hostname"]
    # The finalize and rollback commands reach ZooKeeper the same way.
    finalize = next(s for s in plan.handoff.steps if s.startswith("Finalize"))
    assert "--zk zk1:2182,zk2:2182/kafka --zk-tls --zk-tls-ca /etc/kafka/zk-ca.pem" in finalize


def test_a_jks_truststore_and_a_sasl_login_become_placeholders_the_runbook_explains(tmp_path: Path) -> None:
    plan, _ = plan_for(tmp_path, ZK_TLS_SASL)  # JKS truststore, set.acl without a client certificate: SASL
    assert plan.handoff is not None
    step = next(s for s in plan.handoff.steps if s.startswith("Voter 3000: check"))
    command = command_in(step, "zk2kraft handoff check ")
    assert "--zk-tls --zk-tls-ca '<zk-ca.pem>' --zk-sasl-username '<zk-sasl-user>'" in command
    assert "<zk-ca.pem>: the CA certificates of /etc/kafka/zk-truststore.jks as PEM" in step
    assert "ZK2KRAFT_ZK_SASL_PASSWORD" in step and "zk-trust-pw" not in plan_markdown(plan)


def test_plaintext_zookeeper_gives_a_check_command_without_zookeeper_security_options(tmp_path: Path) -> None:
    plan, _ = plan_for(tmp_path, {})
    assert plan.handoff is not None
    step = next(s for s in plan.handoff.steps if s.startswith("Voter 3001: check"))
    command = command_in(step, "zk2kraft handoff check ")
    assert command.endswith(f"--voters {CONTROLLERS}")


def test_an_ssl_controller_listener_gets_its_pem_stores_in_the_files_and_the_bridge_line(tmp_path: Path) -> None:
    plan, files = plan_for(
        tmp_path, {**SASL_SSL_SCRAM}, controllers="3000@ctrl1:9093", controller_protocol="SSL",
        controller_ssl_keystore="/etc/kafka/ctrl.pem", controller_ssl_truststore="/etc/kafka/ca.pem",
    )  # fmt: skip
    tls = {
        "listener.name.controller.ssl.keystore.type": "PEM",
        "listener.name.controller.ssl.keystore.location": "/etc/kafka/ctrl.pem",
        "listener.name.controller.ssl.truststore.type": "PEM",
        "listener.name.controller.ssl.truststore.location": "/etc/kafka/ca.pem",
        "listener.name.controller.ssl.client.auth": "required",
    }
    for path in ("handoff/controller-3000.properties", "1-provision-controllers/controller-3000.properties"):
        values = parse_properties_text(files[path], path).values
        assert {k: values.get(k) for k in tls} == tls, path
        assert values["listener.security.protocol.map"].startswith("CONTROLLER:SSL,")
    # The bridge serves the same listener with the same files, and `bridge run` accepts the line as written.
    steps = next(p for p in plan.phases if p.id == "provision-controllers").steps
    line = command_in(next(s for s in steps if "`zk2kraft bridge run " in s), "zk2kraft bridge run ")
    assert "--listen 0.0.0.0:9093 --listen-ssl-cert /etc/kafka/ctrl.pem --listen-ssl-ca /etc/kafka/ca.pem" in line
    for name in ("ctrl.pem", "ca.pem"):
        (tmp_path / name).write_text("pem\n", encoding="utf-8")
    listener_part = line.split(" --inter-broker-")[0]  # the brokers' channel options hold PEM placeholders
    argv = shlex.split(listener_part.replace("/etc/kafka", str(tmp_path)))[3:]
    params = run_cmd.make_context("run", argv).params
    assert params["listen_ssl_cert"] == tmp_path / "ctrl.pem" and params["listen_ssl_ca"] == tmp_path / "ca.pem"
    # plan.json and plan.md list the hand-off file without its values; the brokers' secrets stay in the files.
    assert plan.handoff is not None and [c.changes for c in plan.handoff.configs] == [[]]
    shown = plan.model_dump_json() + plan_markdown(plan)
    assert "trust-s3cret" not in shown and "jaas-s3cret" not in shown
    assert "trust-s3cret" in files["handoff/controller-3000.properties"]


def test_a_quorum_of_bridges_serves_a_tls_controller_listener_voter_to_voter_too(tmp_path: Path) -> None:
    quorum_ssl, files = plan_for(
        tmp_path, {}, controller_protocol="SSL", controller_ssl_keystore="/etc/kafka/ctrl.pem",
        controller_ssl_truststore="/etc/kafka/ca.pem",
    )  # fmt: skip
    assert quorum_ssl.handoff is not None and "handoff/controller-3001.properties" in files
    steps = next(p for p in quorum_ssl.phases if p.id == "provision-controllers").steps
    lines = [command_in(s, "zk2kraft bridge run ") for s in steps if "`zk2kraft bridge run " in s]
    assert len(lines) == 3 and all("--voters" in line and "--listen-ssl-ca /etc/kafka/ca.pem" in line for line in lines)
    assert any("each bridge's certificate must name the host it has in --voters" in s for s in steps)
    values = parse_properties_text(files["1-provision-controllers/controller-3001.properties"], "c").values
    assert values["listener.name.controller.ssl.keystore.location"] == "/etc/kafka/ctrl.pem"


def test_no_bridge_and_no_hand_off_where_the_bridges_cannot_serve_the_controller_listener(tmp_path: Path) -> None:
    sasl, _ = plan_for(tmp_path, {}, controllers="3000@ctrl1:9093", controller_protocol="SASL_SSL",
                       controller_ssl_keystore="/etc/kafka/ctrl.pem")  # fmt: skip
    assert sasl.handoff is None


def test_a_tls_controller_listener_without_its_key_store_is_refused_before_zookeeper_is_read() -> None:
    result = CliRunner().invoke(cli, ["plan", "--zk", "127.0.0.1:1", "--controller-protocol", "SSL"])
    assert result.exit_code == 2, result.output
    assert "--controller-protocol SSL needs --controller-ssl-keystore" in result.output
    result = CliRunner().invoke(cli, ["plan", "--zk", "127.0.0.1:1", "--controller-ssl-keystore", "/k.pem"])
    assert result.exit_code == 2 and "not PLAINTEXT" in result.output, result.output


def test_the_runbook_runs_from_the_hand_off_through_brokers_to_kraft_finalize_and_rollback(tmp_path: Path) -> None:
    plan, files = plan_for(tmp_path, {}, bridge_metadata_dir="/data/bridge")
    section = handoff_section(plan)
    expected_in_order = [
        "Rolling (no controller outage)", "Cold (seconds without a controller)", "examples/monitoring/",
        "`zk2kraft bridge stop --status http://ctrl1:9404 --for-handoff`", "handoff check", "kafka-server-start.sh",
        "After the leader bridge", "Cold, instead of the rolling steps",
        "Phase 4 (4-brokers-to-kraft/ files, in its restart order)", "phase kraft-brokers",
        "`zk2kraft finalize --zk zk1:2182,zk2:2182/kafka --metadata-dir /data/bridge "
        "--controller-config handoff/controller-3000.properties --controller-config handoff/controller-3001.properties "
        "--controller-config handoff/controller-3002.properties --out finalize/`",
        "There is no rollback after finalization", "Rollback, only before finalizing",
        "--broker-meta <each broker's log dir>", "KAFKA-20762",
    ]  # fmt: skip
    at = 0
    for text in expected_in_order:
        found = section.find(text, at)
        assert found >= 0, f"{text!r} missing or out of order in:\n{section}"
        at = found + len(text)
    # The finalize command is one `zk2kraft finalize` accepts as written, on the plan's own files.
    write_plan(plan, files, tmp_path / "out")
    (tmp_path / "bridge").mkdir()
    finalize = command_in(section, "zk2kraft finalize ").replace("/data/bridge", str(tmp_path / "bridge"))
    argv = shlex.split(finalize.replace("handoff/", f"{tmp_path / 'out'}/handoff/"))[2:]
    params = finalize_cmd.make_context("finalize", argv).params
    assert len(params["controller_configs"]) == 3 and params["out_dir"] == Path("finalize")
    rollback = command_in(section, "zk2kraft rollback ").replace("/data/bridge", str(tmp_path / "bridge"))
    argv = shlex.split(rollback.replace("<each broker's log dir> ...", "/var/lib/kafka/data"))[2:]
    assert rollback_cmd.make_context("rollback", argv).params["broker_metas"] == (Path("/var/lib/kafka/data"),)
