"""`zk2kraft plan` gives each `bridge run` line the listener security and authorizer options matching the brokers'
controller listener, warns where a bridge cannot match it, and puts the listener's SASL settings in the Kafka
controllers' files."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner
from kazoo.client import KazooClient

from cli.bridge_cmd import run_cmd
from cli.main import cli
from migrate.plan.controller_listener import resolve_controller_listener
from migrate.plan.inputs import BrokerConfig
from migrate.plan.phases import Plan
from migrate.plan.properties import parse_properties_text
from migrate.plan.render import plan_markdown, summary_lines
from tests.support.plan import (
    CONTROLLER_SASL_PLAIN,
    CONTROLLER_SASL_SSL_SCRAM,
    healthy_model,
    plan_for,
    seed,
    with_scram_user,
    write_broker_files,
)

# The options of `bridge run` other branches add, with how many values each takes: asserted token by token here.
NEW_OPTIONS = {
    "--listen-sasl-mechanisms": 1, "--listen-plain-users": 1, "--listen-ssl-principal-mapping-rules": 1,
    "--controller-sasl-mechanism": 1, "--controller-sasl-username": 1, "--controller-sasl-password-file": 1,
    "--authorizer": 1, "--super-users": 1, "--allow-everyone-if-no-acl-found": 0,
}  # fmt: skip
ACL_AUTHORIZER = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:admin;User:ctrl",
    "allow.everyone.if.no.acl.found": "true",
}


def bridge_lines(plan: Plan) -> list[str]:
    steps = next(p for p in plan.phases if p.id == "provision-controllers").steps
    return [s.split("`")[1] for s in steps if "`zk2kraft bridge run " in s]


def split_new_options(line: str) -> tuple[list[str], list[str]]:
    """The line's arguments after `zk2kraft bridge run`: the listener-security and authorizer ones in order, apart."""
    argv = shlex.split(line)[3:]
    today: list[str] = []
    new: list[str] = []
    i = 0
    while i < len(argv):
        count = NEW_OPTIONS.get(argv[i])
        if count is None:
            today.append(argv[i])
            i += 1
        else:
            new += argv[i : i + 1 + count]
            i += 1 + count
    return today, new


def parses(line: str, tmp_path: Path) -> dict[str, object]:
    """`bridge run`'s own parser over the whole line (paths made real, the placeholders made files)."""
    for name in ("ctrl.pem", "ca.pem", "plain-users", "controller-password"):
        (tmp_path / name).write_text("pem\n", encoding="utf-8")
    placeholders = {"<PLAIN_USERS_FILE>": "plain-users", "<CONTROLLER_SASL_PASSWORD_FILE>": "controller-password"}
    argv = [a.replace("/etc/kafka", str(tmp_path)) for a in shlex.split(line)[3:]]
    argv = [str(tmp_path / placeholders[a]) if a in placeholders else a for a in argv]
    return dict(run_cmd.make_context("run", argv).params)


def shown(plan: Plan) -> str:
    """Everything the plan shows: plan.json, plan.md and the printed summary."""
    return plan.model_dump_json() + plan_markdown(plan) + "\n".join(summary_lines(plan))


def handoff_values(files: dict[str, str], node_id: int) -> dict[str, str]:
    path = f"handoff/controller-{node_id}.properties"
    return parse_properties_text(files[path], path).values


def check(plan: Plan, cid: str = "controller-listener-security") -> tuple[str, str, str]:
    found = next(c for c in plan.checks if c.id == cid)
    return found.status, found.severity, " ".join(e.detail for e in found.evidence)


def test_sasl_plaintext_plain_gives_each_bridge_the_listener_and_voter_login_and_the_controllers_its_settings(
    tmp_path: Path,
) -> None:
    plan, files = plan_for(tmp_path, CONTROLLER_SASL_PLAIN, controller_protocol="SASL_PLAINTEXT")
    lines = bridge_lines(plan)
    assert len(lines) == 3
    for line in lines:
        _, new = split_new_options(line)
        assert new == [
            "--listen-sasl-mechanisms", "PLAIN", "--listen-plain-users", "<PLAIN_USERS_FILE>",
            "--controller-sasl-mechanism", "PLAIN", "--controller-sasl-username", "ctrl",
            "--controller-sasl-password-file", "<CONTROLLER_SASL_PASSWORD_FILE>",
        ]  # fmt: skip
        params = parses(line, tmp_path)
        assert params["voters"] == "3000@ctrl1:9093,3001@ctrl2:9094,3002@ctrl3:9095"
        assert (params["listen_sasl_mechanisms"], params["controller_sasl_username"]) == ("PLAIN", "ctrl")
    steps = " ".join(next(p for p in plan.phases if p.id == "provision-controllers").steps)
    assert "<PLAIN_USERS_FILE>: a file you write, one `user=password` line per PLAIN user" in steps
    assert "user_<name> entries: ctrl, admin" in steps
    assert check(plan)[0] == "pass"
    # The Kafka controllers (phase 1 and the hand-off) serve and log in to the same listener as the brokers set it.
    for path in ("handoff/controller-3001.properties", "1-provision-controllers/controller-3001.properties"):
        values = parse_properties_text(files[path], path).values
        assert values["listener.security.protocol.map"].startswith("CONTROLLER:SASL_PLAINTEXT,")
        assert values["listener.name.controller.sasl.enabled.mechanisms"] == "PLAIN"
        assert values["sasl.mechanism.controller.protocol"] == "PLAIN"
        jaas = CONTROLLER_SASL_PLAIN["listener.name.controller.plain.sasl.jaas.config"]
        assert values["listener.name.controller.plain.sasl.jaas.config"] == jaas
    # No secret shown anywhere but in the generated files.
    assert "s3cret" not in shown(plan)
    assert all("ctrl-s3cret" in files[f"handoff/controller-{i}.properties"] for i in (3000, 3001, 3002))


SASL_SSL_PLAIN_LOGIN_SCRAM_ENABLED = {
    **CONTROLLER_SASL_SSL_SCRAM,
    "sasl.mechanism.controller.protocol": "PLAIN",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
    "listener.name.controller.plain.sasl.jaas.config": (
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="ctrl" password="plain-s3cret" '
        'user_ctrl="plain-s3cret";'
    ),
}
"""Brokers logging in to a SASL_SSL controller listener with PLAIN, SCRAM-SHA-512 enabled beside it for others."""


def test_sasl_ssl_with_scram_beside_a_plain_login_gives_tls_both_mechanisms_and_the_principal_mapping_rules(
    tmp_path: Path,
) -> None:
    model = with_scram_user(healthy_model(), "ctrl", "SCRAM-SHA-512")
    plan, files = plan_for(
        tmp_path, SASL_SSL_PLAIN_LOGIN_SCRAM_ENABLED, controllers="3000@ctrl1:9093", model=model,
        controller_protocol="SASL_SSL", controller_ssl_keystore="/etc/kafka/ctrl.pem",
        controller_ssl_truststore="/etc/kafka/ca.pem",
    )  # fmt: skip
    [line] = bridge_lines(plan)
    _, new = split_new_options(line)
    assert new[:2] == ["--listen-sasl-mechanisms", "PLAIN,SCRAM-SHA-512"]
    assert new[new.index("--controller-sasl-mechanism") + 1] == "PLAIN"
    assert new[-2:] == ["--listen-ssl-principal-mapping-rules", "RULE:^CN=(.*?),.*$/$1/"]
    params = parses(line, tmp_path)
    assert params["listen_ssl_cert"] == tmp_path / "ctrl.pem" and params["listen_ssl_ca"] == tmp_path / "ca.pem"
    values = handoff_values(files, 3000)
    assert values["listener.security.protocol.map"].startswith("CONTROLLER:SASL_SSL,")
    assert values["listener.name.controller.ssl.keystore.location"] == "/etc/kafka/ctrl.pem"
    assert "plain-s3cret" in files["handoff/controller-3000.properties"]
    assert "s3cret" not in shown(plan)
    assert plan.bridge_listener is not None and plan.bridge_listener.sasl_mechanisms == ["PLAIN", "SCRAM-SHA-512"]


def test_brokers_logging_in_with_scram_get_a_bridge_line_whose_listener_checks_zookeepers_credentials(
    tmp_path: Path,
) -> None:
    """Before ZK_MIGRATION the bridge checks SCRAM logins against /config/users, as the brokers do today."""
    model = with_scram_user(healthy_model(), "ctrl", "SCRAM-SHA-512")
    plan, _files = plan_for(
        tmp_path, CONTROLLER_SASL_SSL_SCRAM, controllers="3000@ctrl1:9093", model=model,
        controller_protocol="SASL_SSL", controller_ssl_keystore="/etc/kafka/ctrl.pem",
    )  # fmt: skip
    [line] = bridge_lines(plan)
    _, new = split_new_options(line)
    assert new[:2] == ["--listen-sasl-mechanisms", "SCRAM-SHA-512"]
    assert new[new.index("--controller-sasl-mechanism") + 1] == "SCRAM-SHA-512"
    status, _severity, detail = check(plan)
    assert status == "pass", detail
    steps = " ".join(next(p for p in plan.phases if p.id == "provision-controllers").steps)
    assert "against ZooKeeper's /config/users until the migration has copied them" in steps
    assert "s3cret" not in shown(plan)


def test_a_scram_login_without_its_credential_in_zookeeper_gets_no_bridge_line(tmp_path: Path) -> None:
    plan, _files = plan_for(
        tmp_path, CONTROLLER_SASL_SSL_SCRAM, controllers="3000@ctrl1:9093",
        controller_protocol="SASL_SSL", controller_ssl_keystore="/etc/kafka/ctrl.pem",
    )  # fmt: skip
    assert bridge_lines(plan) == [] and plan.handoff is None
    status, severity, detail = check(plan)
    assert (status, severity) == ("fail", "warning")
    assert "user ctrl has no SCRAM-SHA-512 credential in ZooKeeper (/config/users/ctrl)" in detail


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"sasl.mechanism.controller.protocol": ""}, "with SASL GSSAPI (Kafka's default)"),
        (
            {"sasl.mechanism.controller.protocol": "OAUTHBEARER",
             "listener.name.controller.sasl.enabled.mechanisms": "OAUTHBEARER"},
            "with SASL OAUTHBEARER",
        ),
        (
            {"principal.builder.class": "com.example.Builder", **ACL_AUTHORIZER},
            "custom principal.builder.class com.example.Builder",
        ),
        ({"authorizer.class.name": "com.example.Authorizer"}, "custom authorizer com.example.Authorizer"),
    ],
)  # fmt: skip
def test_what_the_bridge_cannot_match_is_a_warning_and_no_bridge_line(
    tmp_path: Path, extra: dict[str, str], expected: str
) -> None:
    settings = {**CONTROLLER_SASL_PLAIN, **extra}
    if extra.get("sasl.mechanism.controller.protocol") == "":
        del settings["sasl.mechanism.controller.protocol"]  # unset: Kafka's default, GSSAPI
        settings["listener.name.controller.sasl.enabled.mechanisms"] = "GSSAPI"
    plan, files = plan_for(tmp_path, settings, controller_protocol="SASL_PLAINTEXT")
    status, severity, detail = check(plan)
    assert (status, severity) == ("fail", "warning") and expected in detail
    assert plan.blockers == 0  # Kafka's own controllers can serve it: no blocker for the migration
    assert bridge_lines(plan) == [] and plan.handoff is None
    assert not [f for f in files if f.startswith("handoff/")]
    steps = " ".join(next(p for p in plan.phases if p.id == "provision-controllers").steps)
    assert "The zk2kraft bridge cannot be this cluster's controller" in steps and expected in steps
    assert plan.bridge_listener is not None and not plan.bridge_listener.supported
    assert any("cannot serve the brokers' controller listener CONTROLLER, SASL_PLAINTEXT" in s for s in summary_lines(plan))
    assert "s3cret" not in shown(plan)


def test_another_enabled_mechanism_the_bridge_lacks_is_a_warning_but_the_brokers_login_is_served(tmp_path: Path) -> None:
    settings = {**CONTROLLER_SASL_PLAIN, "listener.name.controller.sasl.enabled.mechanisms": "GSSAPI,PLAIN"}
    plan, _files = plan_for(tmp_path, settings, controller_protocol="SASL_PLAINTEXT")
    status, severity, detail = check(plan)
    assert (status, severity) == ("fail", "warning") and "also enables GSSAPI" in detail
    _today, new = split_new_options(bridge_lines(plan)[0])
    assert new[:2] == ["--listen-sasl-mechanisms", "PLAIN"]
    assert plan.handoff is not None


def test_a_custom_principal_builder_without_an_authorizer_is_a_warning_only(tmp_path: Path) -> None:
    plan, _files = plan_for(tmp_path, {**CONTROLLER_SASL_PLAIN, "principal.builder.class": "com.example.Builder"},
                            controller_protocol="SASL_PLAINTEXT")  # fmt: skip
    status, severity, detail = check(plan)
    assert (status, severity) == ("fail", "warning") and "(no authorizer uses them here)" in detail
    assert len(bridge_lines(plan)) == 3 and plan.handoff is not None


def test_the_brokers_acl_authorizer_is_carried_over_to_the_bridges_and_their_successors(tmp_path: Path) -> None:
    plan, files = plan_for(tmp_path, ACL_AUTHORIZER)  # PLAINTEXT: the authorizer alone
    for line in bridge_lines(plan):
        _, new = split_new_options(line)
        assert new == ["--authorizer", "standard", "--super-users", "User:admin;User:ctrl", "--allow-everyone-if-no-acl-found"]
        assert "'User:admin;User:ctrl'" in line  # quoted for the shell
        assert parses(line, tmp_path)["authorizer"] == "standard"
    values = handoff_values(files, 3002)
    assert values["authorizer.class.name"] == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert values["super.users"] == "User:admin;User:ctrl" and values["allow.everyone.if.no.acl.found"] == "true"
    assert check(plan)[0] == "pass"


def test_plaintext_brokers_without_an_authorizer_get_no_new_option(tmp_path: Path) -> None:
    plan, files = plan_for(tmp_path, {})
    assert all(split_new_options(line)[1] == [] for line in bridge_lines(plan))
    values = handoff_values(files, 3000)
    assert not [k for k in values if "sasl" in k or k.startswith(("authorizer", "super.users"))]


def test_the_controller_listener_defaults_to_the_one_the_brokers_name_and_map(tmp_path: Path) -> None:
    def brokers(extra: dict[str, str]) -> list[BrokerConfig]:
        text = "\n".join(f"{k}={v}" for k, v in extra.items())
        return [BrokerConfig(parse_properties_text(text, str(tmp_path / "server.properties")))]

    named = brokers({"controller.listener.names": "quorum,OTHER", "listener.security.protocol.map": "QUORUM:SASL_SSL"})
    assert resolve_controller_listener(named, None, None) == ("QUORUM", "SASL_SSL")
    assert resolve_controller_listener(named, "ctl", "PLAINTEXT") == ("CTL", "PLAINTEXT")
    assert resolve_controller_listener(brokers({}), None, None) == ("CONTROLLER", "PLAINTEXT")


def test_zk2kraft_plan_reads_the_sasl_controller_listener_from_the_broker_files(
    tmp_path: Path, zk_client: KazooClient, zk_connect: str, zk_chroot: str
) -> None:
    seed(zk_client, healthy_model(), "/")
    files = write_broker_files(tmp_path, zk_connect, {i: CONTROLLER_SASL_PLAIN for i in (1, 2, 3)})
    out = tmp_path / "plan"
    args = ["plan", "--zk", zk_connect, *(a for f in files for a in ("--broker-config", str(f)))]
    result = CliRunner().invoke(cli, [*args, "--controllers", "3000@ctrl1:9093,3001@ctrl2:9093,3002@ctrl3:9093",
                                      "--out", str(out)])  # fmt: skip
    assert result.exit_code in (0, 1), result.output
    assert "bridge run listener options (CONTROLLER, SASL_PLAINTEXT): --listen-sasl-mechanisms PLAIN" in result.output
    written = (out / "plan.json").read_text(encoding="utf-8") + (out / "plan.md").read_text(encoding="utf-8")
    assert "s3cret" not in result.output + written
    assert "ctrl-s3cret" in (out / "handoff" / "controller-3000.properties").read_text(encoding="utf-8")
    # A TLS protocol taken from the brokers' map needs the key store, as a given one does (exit 2, nothing read).
    ssl_files = write_broker_files(tmp_path, zk_connect, {i: CONTROLLER_SASL_SSL_SCRAM for i in (1, 2, 3)})
    result = CliRunner().invoke(cli, ["plan", "--zk", "127.0.0.1:1", "--broker-config", str(ssl_files[0])])
    assert result.exit_code == 2, result.output
    assert "SASL_SSL (as the brokers map CONTROLLER) needs --controller-ssl-keystore" in result.output
