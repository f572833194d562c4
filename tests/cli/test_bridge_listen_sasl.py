"""`zk2kraft bridge run --listen-sasl-*`, `--listen-ssl-principal-mapping-rules`, `--controller-sasl-*` and
`zk2kraft shim run --controller-sasl-*`: what cannot work is refused before anything starts (exit 2, no
--metadata-dir, ZooKeeper at a closed port never reached) and no password is ever printed."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from bridge.config import CONTROLLER_SASL_PASSWORD_ENV
from cli.main import cli
from tests.support.bridge import invoke_bridge_run, record_bridge_runs, refused_before_start
from tests.support.pki import Pki, needs_openssl, new_pki

PASSWORD = "pl41n-Pa55-in-a-file"
VOTERS = "3000@127.0.0.1:9093,3001@127.0.0.1:9094,3002@127.0.0.1:9095"


@pytest.fixture(autouse=True)
def no_password_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CONTROLLER_SASL_PASSWORD_ENV, raising=False)


def run(tmp_path: Path, *options: str, env: dict[str, str] | None = None) -> Result:
    return invoke_bridge_run(tmp_path, *options, env=env)


def refused(result: Result, tmp_path: Path, *told: str) -> None:
    refused_before_start(result, tmp_path, PASSWORD, *told)


def users(tmp_path: Path, text: str = f"admin={PASSWORD}\n") -> str:
    path = tmp_path / "plain-users"
    path.write_text(text)
    return str(path)


def secret_file(tmp_path: Path) -> str:
    path = tmp_path / "controller-password"
    path.write_text(PASSWORD + "\n")
    return str(path)


def test_plain_needs_a_users_file_and_a_users_file_needs_plain(tmp_path: Path) -> None:
    refused(run(tmp_path, "--listen-sasl-mechanisms", "PLAIN,SCRAM-SHA-512"), tmp_path, "no --listen-plain-users")
    refused(
        run(tmp_path, "--listen-sasl-mechanisms", "SCRAM-SHA-512", "--listen-plain-users", users(tmp_path)),
        tmp_path,
        "--listen-plain-users is given but --listen-sasl-mechanisms does not enable PLAIN",
    )


@pytest.mark.parametrize("mechanism", ["GSSAPI", "OAUTHBEARER"])
def test_mechanisms_the_bridge_cannot_serve_are_refused_saying_so(tmp_path: Path, mechanism: str) -> None:
    refused(
        run(tmp_path, "--listen-sasl-mechanisms", f"SCRAM-SHA-256,{mechanism}"),
        tmp_path,
        f"cannot serve SASL/{mechanism}",
        "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512",
    )
    refused(run(tmp_path, "--listen-sasl-mechanisms", "SCRAM-SHA-1"), tmp_path, "unknown SASL mechanism 'SCRAM-SHA-1'")


def test_an_unreadable_or_malformed_users_file_is_refused_naming_it_never_its_passwords(tmp_path: Path) -> None:
    plain = ["--listen-sasl-mechanisms", "PLAIN"]
    missing = tmp_path / "no-such-users"
    refused(run(tmp_path, *plain, "--listen-plain-users", str(missing)), tmp_path, f"{missing}: cannot read it")
    not_utf8 = tmp_path / "latin1-users"
    not_utf8.write_bytes(b"admin=caf\xe9\n")
    refused(run(tmp_path, *plain, "--listen-plain-users", str(not_utf8)), tmp_path, f"{not_utf8}: cannot read it")
    # A line without `=`: named by its number, its text (here a password after a colon) never shown.
    malformed = users(tmp_path, f"# users\nadmin:{PASSWORD}\n")
    refused(run(tmp_path, *plain, "--listen-plain-users", malformed), tmp_path, f"{malformed}, line 2")


def test_principal_mapping_rules_need_client_certificates_and_must_parse(tmp_path: Path) -> None:
    refused(
        run(tmp_path, "--listen-ssl-principal-mapping-rules", "RULE:^CN=(.*)$/$1/L"),
        tmp_path,
        "needs --listen-ssl-cert and --listen-ssl-ca",
    )


@needs_openssl
def test_principal_mapping_rules_are_parsed_and_useless_ones_refused(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    pki: Pki = new_pki(tmp_path_factory.mktemp("listen-sasl-pki"))
    tls = ["--listen-ssl-cert", str(pki.path("server.crt")), "--listen-ssl-key", str(pki.path("server.key")),
           "--listen-ssl-ca", str(pki.path("ca.crt"))]  # fmt: skip
    refused(
        run(tmp_path, *tls, "--listen-ssl-principal-mapping-rules", "RULE:^CN=(.*)$/$1/LU"),
        tmp_path,
        "--listen-ssl-principal-mapping-rules: invalid rule",
    )
    refused(
        run(tmp_path, *tls, "--listen-sasl-mechanisms", "SCRAM-SHA-256",
            "--listen-ssl-principal-mapping-rules", "DEFAULT"),
        tmp_path,
        "the principal is the SASL user",
    )


def test_voters_of_a_sasl_listener_must_log_in_to_each_other(tmp_path: Path) -> None:
    quorum = ["--voters", VOTERS, "--listen", "127.0.0.1:9093", "--listen-sasl-mechanisms", "SCRAM-SHA-512"]
    refused(run(tmp_path, *quorum), tmp_path, "give --controller-sasl-mechanism")
    login = ["--controller-sasl-mechanism", "PLAIN", "--controller-sasl-username", "admin"]
    refused(
        run(tmp_path, *quorum, *login, "--controller-sasl-password-file", secret_file(tmp_path)),
        tmp_path,
        "--controller-sasl-mechanism PLAIN is not among --listen-sasl-mechanisms SCRAM-SHA-512",
    )
    refused(run(tmp_path, *quorum, *login[:2]), tmp_path, "--controller-sasl-mechanism PLAIN needs --controller-sasl-username")
    refused(
        run(tmp_path, *quorum, "--controller-sasl-mechanism", "SCRAM-SHA-512", "--controller-sasl-username", "admin"),
        tmp_path,
        "needs a password: --controller-sasl-password-file",
        CONTROLLER_SASL_PASSWORD_ENV,
    )
    refused(run(tmp_path, *login, "--controller-sasl-password-file", secret_file(tmp_path)), tmp_path,
            "the voters' listeners serve no SASL")  # fmt: skip


def test_the_options_reach_the_bridge_the_password_from_a_file_or_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    configs = record_bridge_runs(monkeypatch)
    quorum = ["--voters", VOTERS, "--listen", "127.0.0.1:9093", "--format-empty-voter-directory"]
    sasl = ["--listen-sasl-mechanisms", "plain,SCRAM-SHA-512", "--listen-plain-users", users(tmp_path),
            "--controller-sasl-mechanism", "PLAIN", "--controller-sasl-username", "admin"]  # fmt: skip
    result = run(tmp_path, *quorum, *sasl, "--controller-sasl-password-file", secret_file(tmp_path))
    assert result.exit_code == 0, result.output
    result = run(tmp_path, *quorum, *sasl, env={CONTROLLER_SASL_PASSWORD_ENV: PASSWORD})
    assert result.exit_code == 0, result.output
    for config in configs:
        assert config.listen_sasl_mechanisms == ("PLAIN", "SCRAM-SHA-512")
        assert config.controller_sasl_password is not None
        assert config.controller_sasl_password.get_secret_value() == PASSWORD
        assert PASSWORD not in repr(config)
    assert len(configs) == 2


def test_shim_run_refuses_a_half_given_controller_login(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["shim", "run", "--controller", "127.0.0.1:1", "--controller-sasl-username", "shim",
              "--controller-sasl-password-file", secret_file(tmp_path)],
    )
    assert result.exit_code == 2, result.output
    assert "need --controller-sasl-mechanism" in result.output and PASSWORD not in result.output


def test_help_teaches_the_listener_sasl_options() -> None:
    shown = CliRunner().invoke(cli, ["bridge", "run", "--help"], terminal_width=200).output
    for text in (
        "--listen-sasl-mechanisms",
        "--listen-plain-users",
        "--listen-ssl-principal-mapping-rules",
        "--controller-sasl-mechanism",
        "--controller-sasl-username",
        "--controller-sasl-password-file",
        CONTROLLER_SASL_PASSWORD_ENV,
        "sasl.enabled.mechanisms",
        "ssl.principal.mapping.rules",
        "SASL_SSL",
    ):
        assert text in shown, text
    assert "--controller-sasl-password " not in shown
    shim = CliRunner().invoke(cli, ["shim", "run", "--help"], terminal_width=200).output
    assert "--controller-sasl-mechanism" in shim and CONTROLLER_SASL_PASSWORD_ENV in shim
