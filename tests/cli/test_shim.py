"""`zk2kraft shim run`: its help teaches, bad addresses are refused with a clear message (exit 2), and a stop
request is obeyed at once even while no controller answers."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

from click.testing import CliRunner

from cli.shim_cmd import shim_group
from tests.support import REPO

ROOT = str(REPO)


def test_help_explains_and_shows_an_example() -> None:
    result = CliRunner().invoke(shim_group, ["run", "--help"])
    assert result.exit_code == 0
    for text in ("EnvelopeRequest", "AlterPartition", "--controller", "Example:", "zk2kraft shim run"):
        assert text in result.output


def test_help_names_every_request_the_shim_forwards() -> None:
    from bridge.kafka.protocol import api_name
    from bridge.shim.server import FORWARDED

    result = CliRunner().invoke(shim_group, ["run", "--help"])
    missing = [api_name(key) for key in sorted(FORWARDED) if api_name(key) not in result.output]
    assert not missing, result.output


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


def test_sigterm_while_no_controller_answers_stops_the_shim_cleanly() -> None:
    """SIGTERM during start-up (the controller is unreachable) stops `shim run` at once, naming the address."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{probe.getsockname()[1]}"  # nothing listens there once the probe is closed
    command = [sys.executable, "-m", "cli.main", "shim", "run", "--listen", "127.0.0.1:0", "--controller", closed]
    shim = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": ROOT})
    assert shim.stderr is not None
    lines: list[str] = []
    try:
        # Once the follower reports the refused connection, the shim is inside its start-up wait.
        for line in shim.stderr:
            lines.append(line)
            if f"cannot connect to {closed}" in line:
                break
        shim.send_signal(signal.SIGTERM)
        # Bounded only so a regression fails instead of hanging; the start-up wait alone lasts 30 s.
        _out, rest = shim.communicate(timeout=20)
    finally:
        if shim.poll() is None:
            shim.kill()
            shim.wait()
    output = "".join(lines) + rest
    assert shim.returncode == 0, output
    assert "event=shim_stopped_before_serving" in output and closed in output, output
    assert "Traceback" not in output


def test_a_busy_listen_port_is_refused_at_once_naming_it() -> None:
    """The port is bound before the shim waits for a controller: a busy one is exit 2, not a wait or a traceback."""
    with socket.socket() as busy, socket.socket() as probe:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        probe.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{probe.getsockname()[1]}"  # bound, never listening: connections are refused
        address = f"127.0.0.1:{busy.getsockname()[1]}"
        command = [sys.executable, "-m", "cli.main", "shim", "run", "--listen", address, "--controller", closed]
        # Bounded only so a regression fails instead of hanging (it would wait for the controller).
        shim = subprocess.run(
            command, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ROOT}, timeout=60
        )
    assert shim.returncode == 2, shim.stderr
    assert f"--listen {address}" in shim.stderr and "already in use" in shim.stderr
    assert "Traceback" not in shim.stderr
