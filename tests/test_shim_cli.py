"""`zk2kraft shim run`: its help teaches, bad addresses are refused with a clear message (exit 2)."""

from __future__ import annotations

from click.testing import CliRunner

from cli.shim_cmd import shim_group


def test_help_explains_and_shows_an_example() -> None:
    result = CliRunner().invoke(shim_group, ["run", "--help"])
    assert result.exit_code == 0
    for text in ("EnvelopeRequest", "AlterPartition", "--controller", "Example:", "zk2kraft shim run"):
        assert text in result.output


def test_bad_controller_address_is_refused() -> None:
    result = CliRunner().invoke(shim_group, ["run", "--controller", "nohostport"])
    assert result.exit_code == 2
    assert "--controller 'nohostport' is not HOST:PORT" in result.output


def test_bad_listen_address_is_refused() -> None:
    result = CliRunner().invoke(shim_group, ["run", "--controller", "127.0.0.1:9093", "--listen", "x:99999"])
    assert result.exit_code == 2
    assert "--listen 'x:99999' is not HOST:PORT" in result.output


def test_listen_port_zero_is_any_free_port_but_controllers_need_a_real_one() -> None:
    from bridge.shim.server import parse_address

    assert parse_address("127.0.0.1:0", "--listen", allow_any_port=True) == ("127.0.0.1", 0)
    result = CliRunner().invoke(shim_group, ["run", "--controller", "127.0.0.1:0"])
    assert result.exit_code == 2 and "--controller '127.0.0.1:0' is not HOST:PORT" in result.output
