"""`zk2kraft bridge run --inter-broker-*`: the channel's TLS and SASL options are checked before anything starts.

--zk points at a closed port: reaching ZooKeeper would be exit 5, so exit 2 with --metadata-dir absent shows
the refusal came first and touched nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from bridge.config import BridgeConfig
from cli.bridge_cmd import SASL_PASSWORD_ENV, SSL_KEY_PASSWORD_ENV
from cli.main import cli
from tests.support.bridge import invoke_bridge_run, record_bridge_runs, refused_before_start
from tests.support.pki import Pki, needs_openssl, new_pki

PASSWORD = "s3cret-of-alice"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return new_pki(tmp_path_factory.mktemp("cli-pki"))


@pytest.fixture(autouse=True)
def no_password_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SASL_PASSWORD_ENV, raising=False)


def run(tmp_path: Path, *options: str, env: dict[str, str] | None = None) -> Result:
    return invoke_bridge_run(tmp_path, *options, env=env)


def refused(result: Result, tmp_path: Path, *told: str) -> None:
    refused_before_start(result, tmp_path, PASSWORD, *told)


def password_file(tmp_path: Path, text: str = PASSWORD + "\n") -> str:
    path = tmp_path / "password"
    path.write_text(text)
    return str(path)


def test_a_mechanism_needs_a_username_and_a_password(tmp_path: Path) -> None:
    refused(
        run(tmp_path, "--inter-broker-sasl-mechanism", "SCRAM-SHA-512"),
        tmp_path,
        "--inter-broker-sasl-mechanism SCRAM-SHA-512 needs --inter-broker-sasl-username",
    )
    refused(
        run(tmp_path, "--inter-broker-sasl-mechanism", "PLAIN", "--inter-broker-sasl-username", "alice"),
        tmp_path,
        "needs a password: --inter-broker-sasl-password-file",
        SASL_PASSWORD_ENV,
    )


def test_a_username_without_a_mechanism_is_refused_kafkas_default_gssapi_is_not_supported(tmp_path: Path) -> None:
    result = run(
        tmp_path, "--inter-broker-sasl-username", "alice", "--inter-broker-sasl-password-file", password_file(tmp_path)
    )
    refused(result, tmp_path, "need --inter-broker-sasl-mechanism", "GSSAPI is not supported")


def test_an_unreadable_or_empty_password_file_is_refused_naming_it(tmp_path: Path) -> None:
    login = ["--inter-broker-sasl-mechanism", "PLAIN", "--inter-broker-sasl-username", "alice"]
    missing = tmp_path / "no-such-file"
    refused(
        run(tmp_path, *login, "--inter-broker-sasl-password-file", str(missing)),
        tmp_path,
        f"--inter-broker-sasl-password-file {missing}: cannot read it",
    )
    empty = password_file(tmp_path, "\n")
    refused(
        run(tmp_path, *login, "--inter-broker-sasl-password-file", empty),
        tmp_path,
        f"--inter-broker-sasl-password-file {empty}: the file is empty",
    )


def test_the_password_may_come_from_the_environment_and_is_never_printed(tmp_path: Path) -> None:
    """The SASL login passes its checks (the refusal is about the CA file, checked after it)."""
    garbage = tmp_path / "ca.pem"
    garbage.write_text("not a certificate\n")
    login = ["--inter-broker-sasl-mechanism", "SCRAM-SHA-256", "--inter-broker-sasl-username", "alice"]
    result = run(tmp_path, *login, "--inter-broker-ssl-ca", str(garbage), env={SASL_PASSWORD_ENV: PASSWORD})
    refused(result, tmp_path, "--inter-broker-ssl-ca", "cannot load TLS material", str(garbage))
    result = run(tmp_path, *login, "--inter-broker-sasl-password-file", password_file(tmp_path),
                 "--inter-broker-ssl-ca", str(garbage))  # fmt: skip
    refused(result, tmp_path, "cannot load TLS material")


@needs_openssl
def test_a_client_key_without_its_certificate_is_refused(tmp_path: Path, pki: Pki) -> None:
    refused(
        run(tmp_path, "--inter-broker-ssl-key", str(pki.path("server.key"))),
        tmp_path,
        "--inter-broker-ssl-key needs --inter-broker-ssl-cert",
    )


def test_help_teaches_the_inter_broker_options() -> None:
    shown = CliRunner().invoke(cli, ["bridge", "run", "--help"], terminal_width=200).output
    for option in (
        "--inter-broker-listener-name",
        "--inter-broker-ssl-ca",
        "--inter-broker-ssl-cert",
        "--inter-broker-ssl-key",
        "--inter-broker-ssl-no-hostname-check",
        "--inter-broker-sasl-mechanism",
        "--inter-broker-sasl-username",
        "--inter-broker-sasl-password-file",
        SASL_PASSWORD_ENV,
        "sasl.mechanism.inter.broker.protocol",
        "ssl.truststore.location",
    ):
        assert option in shown
    assert "--inter-broker-sasl-password " not in shown  # no option takes the password itself


def test_a_password_file_of_more_than_one_line_is_refused_naming_it(tmp_path: Path) -> None:
    login = ["--inter-broker-sasl-mechanism", "PLAIN", "--inter-broker-sasl-username", "alice"]
    for text in (f"{PASSWORD}\nsecond line\n", f"{PASSWORD}\n\n", f"{PASSWORD}\r\nmore"):
        two_lines = password_file(tmp_path, text)
        refused(
            run(tmp_path, *login, "--inter-broker-sasl-password-file", two_lines),
            tmp_path,
            f"--inter-broker-sasl-password-file {two_lines}: holds more than one line",
        )
    # One trailing newline (either kind) is the end of the line: the login is accepted, the CA file refused.
    garbage = tmp_path / "ca.pem"
    garbage.write_text("not a certificate\n")
    for text in (PASSWORD, PASSWORD + "\n", PASSWORD + "\r\n"):
        result = run(tmp_path, *login, "--inter-broker-sasl-password-file", password_file(tmp_path, text),
                     "--inter-broker-ssl-ca", str(garbage))  # fmt: skip
        refused(result, tmp_path, "cannot load TLS material")


@pytest.mark.parametrize("name", ["", " ", "INTER NAL", "PLAINTEXT://", "A,B", "A:B", "\tX"])
def test_a_listener_name_kafka_could_not_hold_is_refused(tmp_path: Path, name: str) -> None:
    refused(run(tmp_path, "--inter-broker-listener-name", name), tmp_path, "--inter-broker-listener-name")


def test_inter_broker_options_with_rehearsal_are_refused_a_rehearsal_sends_to_no_broker(tmp_path: Path) -> None:
    for options in (
        ["--inter-broker-listener-name", "INTERNAL"],
        ["--inter-broker-ssl-no-hostname-check"],
        ["--inter-broker-sasl-mechanism", "PLAIN", "--inter-broker-sasl-username", "alice"],
    ):
        refused(run(tmp_path, "--rehearsal", *options), tmp_path, "--rehearsal", options[0], "no broker")


def test_a_password_file_alone_names_the_options_actually_missing(tmp_path: Path) -> None:
    result = run(tmp_path, "--inter-broker-sasl-password-file", password_file(tmp_path))
    refused(
        result,
        tmp_path,
        "--inter-broker-sasl-password-file needs --inter-broker-sasl-mechanism and --inter-broker-sasl-username",
    )
    assert "--inter-broker-sasl-username and" not in result.output


@needs_openssl
def test_an_empty_key_password_variable_is_refused_as_an_empty_sasl_password_variable_is(
    tmp_path: Path, pki: Pki
) -> None:
    cert = ["--inter-broker-ssl-cert", str(pki.path("server.crt")), "--inter-broker-ssl-key",
            str(pki.path("server.key"))]  # fmt: skip
    refused(run(tmp_path, *cert, env={SSL_KEY_PASSWORD_ENV: ""}), tmp_path, SSL_KEY_PASSWORD_ENV, "empty")
    login = ["--inter-broker-sasl-mechanism", "PLAIN", "--inter-broker-sasl-username", "alice"]
    refused(run(tmp_path, *login, env={SASL_PASSWORD_ENV: ""}), tmp_path, SASL_PASSWORD_ENV, "empty")


@pytest.fixture
def told(monkeypatch: pytest.MonkeyPatch) -> list[BridgeConfig]:
    """The BridgeConfig of each `bridge run` (the controller is a stand-in that only records what it was told)."""
    return record_bridge_runs(monkeypatch)


def test_the_channels_timeouts_are_options_with_kafkas_names(tmp_path: Path, told: list[BridgeConfig]) -> None:
    """They reach BridgeConfig."""
    result = run(tmp_path, "--controller-socket-timeout-ms", "5000", "--request-timeout-ms", "7000")
    assert result.exit_code == 0, result.output
    assert (told[0].controller_socket_timeout_ms, told[0].request_timeout_ms) == (5000, 7000)
    result = run(tmp_path)
    assert (told[1].controller_socket_timeout_ms, told[1].request_timeout_ms) == (30000, 30000)
    for option in ("--controller-socket-timeout-ms", "--request-timeout-ms"):
        refused(run(tmp_path, option, "0"), tmp_path, option)


def test_leader_balancing_and_unclean_retries_are_options_with_kafkas_names_and_defaults(
    tmp_path: Path, told: list[BridgeConfig]
) -> None:
    """A cluster run with auto.leader.rebalance.enable=false keeps its leaders where its operators put them."""
    assert run(tmp_path).exit_code == 0
    defaults = told[0]
    assert defaults.auto_leader_rebalance_enable is True
    assert (defaults.leader_imbalance_check_interval_s, defaults.unclean_leader_election_interval_ms) == (300, 300_000)
    off = [
        "--no-auto-leader-rebalance-enable", "--leader-imbalance-check-interval-seconds", "60",
        "--unclean-leader-election-interval-ms", "10000",
    ]  # fmt: skip
    result = run(tmp_path, *off)
    assert result.exit_code == 0, result.output
    assert told[1].auto_leader_rebalance_enable is False
    assert (told[1].leader_imbalance_check_interval_s, told[1].unclean_leader_election_interval_ms) == (60, 10_000)
    for option in ("--leader-imbalance-check-interval-seconds", "--unclean-leader-election-interval-ms"):
        refused(run(tmp_path, option, "0"), tmp_path, option)
    shown = " ".join(CliRunner().invoke(cli, ["bridge", "run", "--help"], terminal_width=200).output.split())
    for setting in ("auto.leader.rebalance.enable", "leader.imbalance.check.interval.seconds",
                    "unclean.leader.election.interval.ms", "auto.leader.rebalance.enable=false"):  # fmt: skip
        assert setting in shown


def test_controller_listener_names_as_the_brokers_give_them_name_the_voter_and_a_bad_name_is_refused(
    tmp_path: Path, told: list[BridgeConfig]
) -> None:
    assert run(tmp_path).exit_code == 0
    assert told[0].controller_listener_name == "CONTROLLER"
    assert run(tmp_path, "--controller-listener-names", "QUORUM,SECOND").exit_code == 0
    assert told[1].controller_listener_name == "QUORUM"
    refused(run(tmp_path, "--controller-listener-names", "QUORUM,BAD NAME"), tmp_path, "--controller-listener-names")


def test_help_lists_every_state_what_brokers_need_and_the_default_status_port() -> None:
    shown = " ".join(CliRunner().invoke(cli, ["bridge", "run", "--help"], terminal_width=200).output.split())
    states = [
        "INACTIVE", "WAIT_FOR_CONTROLLER_QUORUM", "WAIT_FOR_BROKERS", "BECOME_CONTROLLER", "ZK_MIGRATION",
        "SYNC_KRAFT_TO_ZK", "KRAFT_CONTROLLER_TO_BROKER_COMM", "DUAL_WRITE",
    ]  # fmt: skip
    assert ", ".join(states) in shown
    for setting in (
        "zookeeper.metadata.migration.enable=true", "controller.quorum.voters", "controller.listener.names",
        "inter.broker.protocol.version",
    ):  # fmt: skip
        assert setting in shown
    for api in ("AlterPartitionReassignments", "ListPartitionReassignments", "ElectLeaders"):
        assert api in shown
    assert "--metrics 0.0.0.0:9404" in shown and "--bridge-status http://ctrl1:9404" in shown
    finalize = CliRunner().invoke(cli, ["finalize-check", "--help"]).output
    assert "http://ctrl1:9404" in finalize and "9309" not in finalize
