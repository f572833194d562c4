"""Exit codes and error messages every command shares: an unreachable ZooKeeper, a wrong or missing
chroot, the documented table (`zk2kraft --help`, docs/operations.md)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from kazoo.client import KazooClient

from bridge.controller import BridgeConfig, BridgeController
from cli.common import EXIT_BAD_INPUT, EXIT_CODES, EXIT_UNREACHABLE
from cli.main import cli
from migrate.zk.embedded import EmbeddedZooKeeper
from tests.support import FIXTURES, REPO
from tests.support.plan import healthy_model, seed

REAL_DATA_DIR = FIXTURES / "zk-real-kafka-3.5"


def closed_port() -> str:
    """An address nothing listens on (a port just freed by this process)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def zk2kraft(*args: str) -> subprocess.CompletedProcess[str]:
    """The real console command in its own process: stderr is exactly what an operator sees."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-c", "from cli.main import main; main()", *args],
        capture_output=True, text=True, env=env, timeout=120, cwd=REPO,
    )  # fmt: skip


def test_top_level_help_and_the_docs_list_every_exit_code() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    docs = (REPO / "docs/operations.md").read_text()
    for code, meaning in EXIT_CODES:
        assert f"  {code:<4} {meaning}" in result.output
        assert f"| {code} |" in docs
    assert "docs/operations.md" in (REPO / "README.md").read_text()


@pytest.mark.parametrize(
    "command",
    [["status"], ["rollback", "--dry-run"], ["zk", "load"]],
    ids=["status", "rollback", "zk-load"],
)
def test_an_unreachable_zookeeper_names_the_address_and_exits_5_quietly(command: list[str], tmp_path: Path) -> None:
    address = closed_port()
    if command[0] == "zk":
        dump = tmp_path / "tree.jsonl"
        dump.write_text('{"format":"zk2kraft-zk-dump","version":1,"source":"test","chroot":"/","last_zxid":0,"znodes":0}\n')
        command = ["zk", "load", str(dump)]
    result = zk2kraft(*command, "--zk", f"{address}/kafka")
    assert result.returncode == EXIT_UNREACHABLE, result.stderr
    assert result.stdout == ""
    (line,) = result.stderr.strip().splitlines()  # one line: no traceback, none of kazoo's retry warnings
    assert line.startswith("error: cannot connect to ZooKeeper") and address in line
    assert "(chroot /kafka)" in line  # the chroot given, also where `zk load` connects at the root to create it
    assert "Connection refused" in line


@pytest.mark.zookeeper
@pytest.mark.parametrize("command", [["status"], ["rollback", "--dry-run"], ["finalize-check"]])
def test_a_missing_chroot_is_an_error_suggesting_the_real_one(
    command: list[str], zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str
) -> None:
    seed(zk_admin, healthy_model(), zk_chroot + "/kafka")
    result = zk2kraft(*command, "--zk", f"{zk_server.connect_string}{zk_chroot}/kafak")
    assert result.returncode == EXIT_BAD_INPUT, result.stdout + result.stderr
    assert f"chroot {zk_chroot}/kafak" in result.stderr and "does not exist" in result.stderr
    assert f"did you mean --zk {zk_server.connect_string}{zk_chroot}/kafka?" in result.stderr
    assert "nothing to do" not in result.stdout and "phase:" not in result.stdout
    assert "Warning" not in result.stderr  # kazoo's "No chroot path exists" is not shown raw


@pytest.mark.zookeeper
def test_status_above_the_chroot_is_an_error_not_an_empty_cluster(
    zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str
) -> None:
    seed(zk_admin, healthy_model(), zk_chroot + "/kafka")
    result = CliRunner().invoke(cli, ["status", "--zk", zk_server.connect_string + zk_chroot])
    assert result.exit_code == EXIT_BAD_INPUT
    assert "no Kafka cluster there" in result.stderr
    assert f"did you mean --zk {zk_server.connect_string}{zk_chroot}/kafka?" in result.stderr


def test_migrate_without_chroot_on_a_chrooted_data_dir_suggests_it(tmp_path: Path) -> None:
    out = tmp_path / "meta"
    result = CliRunner().invoke(cli, ["migrate", "--zk-data-dir", str(REAL_DATA_DIR), "--out", str(out)])
    assert result.exit_code == EXIT_BAD_INPUT
    assert f"ZooKeeper data dir {REAL_DATA_DIR}: no Kafka cluster under /" in result.stderr
    assert "did you mean --chroot /de-4-3-kafka-cluster?" in result.stderr
    assert not out.exists()

    typo = CliRunner().invoke(
        cli, ["plan", "--zk-data-dir", str(REAL_DATA_DIR), "--chroot", "/de-4-3-kafka", "--out", str(out)]
    )
    assert typo.exit_code == EXIT_BAD_INPUT
    assert "the chroot /de-4-3-kafka does not exist" in typo.stderr
    assert "did you mean --chroot /de-4-3-kafka-cluster?" in typo.stderr


@pytest.mark.zookeeper
def test_migrate_from_live_zookeeper_above_the_chroot_suggests_it(
    zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str, tmp_path: Path
) -> None:
    seed(zk_admin, healthy_model(), zk_chroot + "/kafka")
    out = tmp_path / "meta"
    result = CliRunner().invoke(cli, ["migrate", "--zk", zk_server.connect_string + zk_chroot, "--out", str(out)])
    assert result.exit_code == EXIT_BAD_INPUT
    assert f"did you mean --zk {zk_server.connect_string}{zk_chroot}/kafka?" in result.stderr
    assert not out.exists()


def test_a_bridge_that_cannot_reach_zookeeper_exits_5_naming_the_address(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    address = closed_port()
    config = BridgeConfig(
        zk_connect=f"{address}/kafka", metadata_dir=tmp_path / "meta", node_id=3000,
        listen_port=0, metrics_port=None, zk_session_timeout_s=3.0,
    )  # fmt: skip
    controller = BridgeController(config)
    assert controller.run() == EXIT_UNREACHABLE
    assert controller.error is not None and address in controller.error and "chroot /kafka" in controller.error
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    assert not (tmp_path / "meta").exists()


@pytest.mark.parametrize(
    "command", [["status"], ["finalize-check", "--no-audit"], ["rollback", "--dry-run"]],
    ids=["status", "finalize-check", "rollback"],
)  # fmt: skip
@pytest.mark.parametrize("url", ["127.0.0.1:19404", "ftp://ctrl1:9309"])
def test_a_bridge_status_that_is_not_an_http_url_is_bad_input_with_a_hint(command: list[str], url: str) -> None:
    """Not "unreachable, safe to retry": retrying the same option can never work."""
    result = zk2kraft(*command, "--zk", closed_port(), "--bridge-status", url)
    assert result.returncode == EXIT_BAD_INPUT, result.stderr
    assert "--bridge-status" in result.stderr and url in result.stderr
    if "://" not in url:
        assert f"http://{url}" in result.stderr, result.stderr
    else:
        assert "http:// or https://" in result.stderr, result.stderr


@pytest.mark.zookeeper
@pytest.mark.parametrize("partition_dir", [False, True], ids=["empty-dir", "empty-partition-dir"])
@pytest.mark.parametrize(
    "command", [["status"], ["finalize-check", "--no-audit"], ["rollback", "--yes"]],
    ids=["status", "finalize-check", "rollback"],
)  # fmt: skip
def test_a_metadata_dir_without_a_log_is_refused_naming_it(
    command: list[str], partition_dir: bool, zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str,
    tmp_path: Path,
) -> None:  # fmt: skip
    """Read as an empty log it said NONE, hid ZooKeeper's lag from rollback, and finalize-check asked for it."""
    root = zk_chroot + "/kafka"
    seed(zk_admin, healthy_model(), root)
    before = {path: zk_admin.get(f"{root}{path}")[0] for path in ("/controller", "/controller_epoch")}
    meta = tmp_path / "meta"
    (meta / "__cluster_metadata-0" if partition_dir else meta).mkdir(parents=True)
    args = [*command, "--zk", zk_server.connect_string + root, "--metadata-dir", str(meta)]
    result = CliRunner().invoke(cli, args + (["--backup", str(tmp_path / "b")] if command[0] == "rollback" else []))
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"error: --metadata-dir {meta}: no KRaft metadata log here")
    assert result.stdout == ""
    assert {path: zk_admin.get(f"{root}{path}")[0] for path in before} == before
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("option", ["--listen", "--metrics"])
def test_a_port_out_of_range_is_one_error_line_naming_the_option(option: str, tmp_path: Path) -> None:
    result = zk2kraft(
        "bridge", "run", "--zk", closed_port(), "--metadata-dir", str(tmp_path / "meta"), "--node-id", "3000",
        option, "127.0.0.1:99999",
    )  # fmt: skip
    assert result.returncode == EXIT_BAD_INPUT, result.stderr
    (line,) = result.stderr.strip().splitlines()  # no traceback
    assert line == f"error: {option} '127.0.0.1:99999' is not HOST:PORT: the port must be 0 to 65535"
    assert not (tmp_path / "meta").exists()


@pytest.mark.zookeeper
@pytest.mark.parametrize("option", ["--listen", "--metrics"])
def test_an_unresolvable_host_to_listen_on_is_named_with_its_option(
    option: str, zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str, tmp_path: Path
) -> None:
    """Not "Unknown error -2" (getaddrinfo's code read as an errno)."""
    root = zk_chroot + "/kafka"
    seed(zk_admin, healthy_model(), root)
    addresses = {"--listen": "127.0.0.1:0", "--metrics": "127.0.0.1:0", option: "no-such-host.invalid:9093"}
    result = CliRunner().invoke(
        cli,
        ["bridge", "run", "--zk", zk_server.connect_string + root, "--metadata-dir", str(tmp_path / "meta"),
         "--node-id", "3000", *(part for pair in addresses.items() for part in pair)],
    )  # fmt: skip
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    assert (
        f"error: cannot listen on {option} no-such-host.invalid:9093: the host 'no-such-host.invalid' could not "
        "be resolved"
    ) in result.stderr
    assert "Unknown error" not in result.stderr
    assert not (tmp_path / "meta").exists()


@pytest.mark.zookeeper
def test_an_unresolvable_bridge_status_host_is_named_with_its_option(
    zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str
) -> None:
    root = zk_chroot + "/kafka"
    seed(zk_admin, healthy_model(), root)
    url = "http://no-such-host.invalid:9404"
    result = CliRunner().invoke(cli, ["status", "--zk", zk_server.connect_string + root, "--bridge-status", url])
    assert result.exit_code == EXIT_UNREACHABLE, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(
        f"error: cannot read the bridge status at {url}/status: the host 'no-such-host.invalid' (--bridge-status) "
        "could not be resolved ("
    )
    assert "Errno -2" not in line
