"""The plan says which `zk2kraft bridge run --inter-broker-*` options the brokers' inter-broker listener needs."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from cli.bridge_cmd import run_cmd
from cli.main import cli
from migrate.plan.checks import run_checks
from migrate.plan.checks.registry import Check
from migrate.plan.inputs import BrokerConfig, PlanInputs, parse_controllers
from migrate.plan.phases import Plan, build_plan
from migrate.plan.properties import parse_properties_text
from migrate.plan.render import plan_markdown, summary_lines
from tests.support import FIXTURES
from tests.support.plan import SASL_SSL_SCRAM, broker_properties, healthy_model

SECRETS = ("trust-s3cret", "jaas-s3cret", "key-s3cret")


def plan_for(tmp_path: Path, per_broker: dict[int, dict[str, str]]) -> tuple[Plan, list[Check]]:
    brokers = []
    for broker_id, extra in per_broker.items():
        text = broker_properties(broker_id, "zk1:2181/kafka", {k: v.format(id=broker_id) for k, v in extra.items()})
        path = tmp_path / f"server-{broker_id}.properties"
        path.write_text(text, encoding="utf-8")
        brokers.append(BrokerConfig(parse_properties_text(text, str(path))))
    inputs = PlanInputs(
        model=healthy_model(),
        zk_origin="test",
        zk_chroot="/kafka",
        zk_connect="zk1:2181/kafka",
        brokers=brokers,
        controllers=parse_controllers("3000@c1:9093,3001@c2:9093,3002@c3:9093"),
    )
    checks = run_checks(inputs)
    plan, _files = build_plan(inputs, checks)
    return plan, checks


def the_check(checks: list[Check]) -> Check:
    return next(c for c in checks if c.id == "inter-broker-listener")


def bridge_step(plan: Plan) -> str:
    steps = next(p for p in plan.phases if p.id == "provision-controllers").steps
    found = [s for s in steps if "bridge" in s]
    assert found, steps
    return "\n".join(found)


def everything_shown(plan: Plan) -> str:
    return plan_markdown(plan) + plan.model_dump_json() + "\n".join(summary_lines(plan))


def accepted_by_bridge_run(options: list[str], tmp_path: Path) -> dict[str, object]:
    """Parse the plan's options with `bridge run`'s own parser, placeholder paths made real files."""
    argv = ["--zk", "zk1:2181/kafka", "--metadata-dir", str(tmp_path / "meta"), "--node-id", "3000"]
    for token in options:
        if token.startswith("<") and token != "<SASL_USERNAME>":
            path = tmp_path / token.strip("<>")
            path.write_text("placeholder\n", encoding="utf-8")
            token = str(path)
        argv.append(token)
    return run_cmd.make_context("run", argv).params


def test_plaintext_needs_no_option_and_says_so(tmp_path: Path) -> None:
    plan, checks = plan_for(tmp_path, {i: {} for i in (1, 2, 3)})
    ib = plan.bridge_inter_broker
    assert ib is not None and ib.listener == "PLAINTEXT" and ib.security_protocols == ["PLAINTEXT"]
    assert ib.options == [] and ib.supported
    assert the_check(checks).status == "pass"
    step = bridge_step(plan)
    assert "zk2kraft bridge run --zk zk1:2181/kafka" in step and "--inter-broker" not in step.split("`")[1]
    assert "no --inter-broker-* option needed" in step
    assert any("no --inter-broker-* option needed" in line for line in summary_lines(plan))
    assert "no --inter-broker-* option needed" in plan_markdown(plan).split("## Preflight checks")[0]


def test_sasl_ssl_scram_shows_every_option_with_placeholders_and_no_secret(tmp_path: Path) -> None:
    plan, checks = plan_for(tmp_path, {i: SASL_SSL_SCRAM for i in (1, 2, 3)})
    ib = plan.bridge_inter_broker
    assert ib is not None and ib.supported and ib.sasl_mechanism == "SCRAM-SHA-512"
    assert ib.options == [
        "--inter-broker-listener-name", "INTERNAL",
        "--inter-broker-ssl-ca", "<BROKERS_CA_PEM>",
        "--inter-broker-sasl-mechanism", "SCRAM-SHA-512",
        "--inter-broker-sasl-username", "<SASL_USERNAME>",
        "--inter-broker-sasl-password-file", "<SASL_PASSWORD_FILE>",
    ]  # fmt: skip
    assert the_check(checks).status == "pass"
    command = " ".join(ib.options)
    assert command in bridge_step(plan)
    assert command in plan_markdown(plan).split("## Preflight checks")[0]
    assert any(command in line for line in summary_lines(plan))
    assert json.loads(plan.model_dump_json())["bridge_inter_broker"]["options"] == ib.options
    # The truststore the CA PEM corresponds to is named; no password, JAAS or truststore, is ever shown.
    assert "/etc/kafka/truststore.jks" in bridge_step(plan)
    shown = everything_shown(plan)
    assert not [s for s in SECRETS if s in shown]
    params = accepted_by_bridge_run(ib.options, tmp_path)
    assert params["inter_broker_listener_name"] == "INTERNAL"
    assert params["inter_broker_sasl_mechanism"] == "SCRAM-SHA-512"


def test_ssl_with_client_auth_and_no_hostname_check_gets_the_ssl_options(tmp_path: Path) -> None:
    ssl = {
        "listeners": "SSL://:9093",
        "advertised.listeners": "SSL://kafka{id}:9093",
        "security.inter.broker.protocol": "SSL",
        "listener.name.ssl.ssl.client.auth": "required",
        "ssl.endpoint.identification.algorithm": "",
        "ssl.key.password": "key-s3cret",
    }
    plan, checks = plan_for(tmp_path, {i: ssl for i in (1, 2, 3)})
    ib = plan.bridge_inter_broker
    assert ib is not None and ib.listener == "SSL" and ib.security_protocols == ["SSL"] and ib.sasl_mechanism is None
    assert ib.options == [
        "--inter-broker-listener-name", "SSL",
        "--inter-broker-ssl-ca", "<BROKERS_CA_PEM>",
        "--inter-broker-ssl-cert", "<CLIENT_CERT_PEM>", "--inter-broker-ssl-key", "<CLIENT_KEY_PEM>",
        "--inter-broker-ssl-no-hostname-check",
    ]  # fmt: skip
    assert the_check(checks).status == "pass"
    assert " ".join(ib.options) in bridge_step(plan)
    assert "ZK2KRAFT_INTER_BROKER_SSL_KEY_PASSWORD" in bridge_step(plan)
    assert "key-s3cret" not in everything_shown(plan)
    params = accepted_by_bridge_run(ib.options, tmp_path)
    assert params["inter_broker_ssl_no_hostname_check"] is True


def test_gssapi_inter_broker_login_is_a_warning_and_no_bridge_command(tmp_path: Path) -> None:
    # No sasl.mechanism.inter.broker.protocol: Kafka's default, GSSAPI (Kerberos).
    kerberos = {
        "listeners": "SASL_PLAINTEXT://:9093",
        "advertised.listeners": "SASL_PLAINTEXT://kafka{id}:9093",
        "security.inter.broker.protocol": "SASL_PLAINTEXT",
        "sasl.kerberos.service.name": "kafka",
    }
    plan, checks = plan_for(tmp_path, {i: kerberos for i in (1, 2, 3)})
    check = the_check(checks)
    assert check.status == "fail" and check.severity == "warning"
    assert "GSSAPI" in check.evidence[0].detail and "server-1.properties" in check.evidence[0].where
    assert "Kafka 3.9's controllers" in check.remediation
    ib = plan.bridge_inter_broker
    assert ib is not None and not ib.supported and ib.sasl_mechanism == "GSSAPI"
    assert not any(o.startswith("--inter-broker-sasl") for o in ib.options)
    step = bridge_step(plan)
    assert "cannot be this cluster's controller" in step and "bridge run --zk" not in step
    assert any("cannot reach" in line for line in summary_lines(plan))


def test_brokers_disagreeing_on_the_inter_broker_listener(tmp_path: Path) -> None:
    two = {
        "listeners": "PLAINTEXT://:9092,INTERNAL://:9093",
        "advertised.listeners": "PLAINTEXT://kafka{id}:9092,INTERNAL://kafka{id}:9093",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
    }
    # Broker 3 uses INTERNAL, but every broker registers PLAINTEXT: reachable, a warning.
    _plan, checks = plan_for(tmp_path, {1: two, 2: two, 3: {**two, "inter.broker.listener.name": "INTERNAL"}})
    check = the_check(checks)
    assert check.status == "fail" and check.severity == "warning"
    assert any("server-3.properties" in e.where and "INTERNAL" in e.detail for e in check.evidence)
    # Broker 1 (whose listener the controller files use) uses INTERNAL, broker 2 has no such listener: blocker.
    _plan, checks = plan_for(tmp_path, {1: {**two, "inter.broker.listener.name": "INTERNAL"}, 2: {}, 3: two})
    check = the_check(checks)
    assert check.is_blocker
    assert any("server-2.properties" in e.where and "registers no INTERNAL listener" in e.detail for e in check.evidence)


def test_both_listener_settings_is_a_blocker(tmp_path: Path) -> None:
    both = {"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"}
    _plan, checks = plan_for(tmp_path, {1: both, 2: {}, 3: {}})
    check = the_check(checks)
    assert check.is_blocker and "Kafka refuses to start" in check.evidence[0].detail


def test_plan_command_prints_the_bridge_options(tmp_path: Path) -> None:
    fixture = FIXTURES / "zk-real-kafka-3.5"
    text = broker_properties(1, "kafka01:2181/de-4-3-kafka-cluster", {k: v.format(id=1) for k, v in SASL_SSL_SCRAM.items()})
    server = tmp_path / "server.properties"
    server.write_text(text, encoding="utf-8")
    out = tmp_path / "p"
    args = [
        "plan", "--zk-data-dir", str(fixture), "--chroot", "/de-4-3-kafka-cluster",
        "--broker-config", str(server), "--out", str(out),
    ]  # fmt: skip
    result = CliRunner().invoke(cli, args)
    assert "bridge run inter-broker options (INTERNAL, SASL_SSL): --inter-broker-listener-name INTERNAL" in result.output
    plan = json.loads((out / "plan.json").read_text())
    assert "--inter-broker-sasl-password-file" in plan["bridge_inter_broker"]["options"]
    assert "--inter-broker-sasl-mechanism SCRAM-SHA-512" in (out / "plan.md").read_text()
    assert not [s for s in SECRETS if s in result.output + (out / "plan.md").read_text()]
