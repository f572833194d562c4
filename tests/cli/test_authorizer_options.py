"""`--authorizer`, `--super-users`, `--allow-everyone-if-no-acl-found` on `bridge run` and `shim run`: one set
of options, help that says what each does, bad values refused (exit 2) before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli
from tests.support.bridge import record_bridge_runs


def bridge_run(tmp_path: Path, *options: str) -> list[str]:
    return ["bridge", "run", "--zk", "127.0.0.1:1/kafka", "--metadata-dir", str(tmp_path / "m"),
            "--node-id", "3000", *options]  # fmt: skip


def test_bridge_run_passes_the_authorizer_settings_to_the_controller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    configs = record_bridge_runs(monkeypatch)
    result = CliRunner().invoke(
        cli,
        bridge_run(tmp_path, "--authorizer", "standard", "--super-users", "User:CN=admin; User:ops",
                   "--allow-everyone-if-no-acl-found"),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    [config] = configs
    assert config.authorizer == "standard"
    assert config.super_users == frozenset({"User:CN=admin", "User:ops"})
    assert config.allow_everyone_if_no_acl_found
    result = CliRunner().invoke(cli, bridge_run(tmp_path))
    assert result.exit_code == 0 and configs[1].authorizer == "none"


def test_authorizer_settings_without_an_authorizer_or_malformed_are_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, bridge_run(tmp_path, "--super-users", "User:admin"))
    assert result.exit_code == 2
    assert "--super-users needs --authorizer standard" in result.output
    result = CliRunner().invoke(cli, bridge_run(tmp_path, "--authorizer", "standard", "--super-users", "admin"))
    assert result.exit_code == 2 and "principalType:principalName" in result.output
    result = CliRunner().invoke(cli, bridge_run(tmp_path, "--authorizer", "simple"))
    assert result.exit_code == 2 and "'simple' is not one of 'none', 'standard'" in result.output
    assert not (tmp_path / "m").exists()


def test_help_teaches_the_options_and_the_envelope_principals_shorthand() -> None:
    bridge_help = CliRunner().invoke(cli, ["bridge", "run", "--help"]).output
    for text in ("--authorizer [none|standard]", "StandardAuthorizer", "--super-users", "User:ANONYMOUS",
                 "--allow-everyone-if-no-acl-found", "CLUSTER_ACTION"):  # fmt: skip
        assert text in bridge_help, text
    shim_help = CliRunner().invoke(cli, ["shim", "run", "--help"]).output
    assert "--authorizer [none|standard]" in shim_help and "acl" not in shim_help.split("--authorizer")[1][:40]


def test_the_shims_old_authorizer_name_is_still_accepted() -> None:
    from cli.authorizer_options import AuthorizerChoice

    assert AuthorizerChoice().convert("acl", None, None) == "standard"
    assert AuthorizerChoice().convert("standard", None, None) == "standard"
