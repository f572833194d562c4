"""Every command that connects to ZooKeeper takes the bridge's security options and reaches a ZooKeeper whose
Kafka znodes are ACL'd to a digest user; without the credentials it exits 2 naming the address and znode."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result
from kazoo.client import KazooClient
from kazoo.security import make_digest_acl

from cli.main import cli
from migrate.errors import EXIT_BAD_INPUT, EXIT_FINDING, EXIT_OK
from migrate.zk.embedded import EmbeddedZooKeeper
from migrate.zk.live import ZkConnectOptions
from tests.support.bridge_process import seed_small_cluster
from tests.support.secured_zk import DIGEST, PASSWORD, USER, files_holding, only_digest_user

SECURITY_OPTIONS = (
    "--zk-digest", "--zk-sasl-mechanism", "--zk-sasl-username", "--zk-sasl-password", "--zk-tls", "--zk-tls-ca",
    "--zk-tls-cert", "--zk-tls-key", "--zk-tls-key-password", "--zk-tls-no-hostname-check",
)  # fmt: skip
ZK_COMMANDS = (
    ("bridge", "run"), ("status",), ("rollback",), ("finalize-check",), ("zk", "export"), ("zk", "load"),
    ("migrate",), ("plan",), ("audit",),
)  # fmt: skip


def _command(path: tuple[str, ...]) -> click.Command:
    command: click.Command = cli
    for name in path:
        assert isinstance(command, click.Group)
        found = command.commands.get(name)
        assert found is not None, path
        command = found
    return command


def _security_help(path: tuple[str, ...]) -> list[tuple[str, str]]:
    command = _command(path)
    ctx = click.Context(command, info_name=path[-1])
    by_flag = {p.opts[0]: p for p in command.params if isinstance(p, click.Option)}
    records = []
    for flag in SECURITY_OPTIONS:
        assert flag in by_flag, f"{' '.join(path)} has no {flag}"
        record = by_flag[flag].get_help_record(ctx)
        assert record is not None
        records.append(record)
    return records


def test_every_command_that_connects_to_zookeeper_has_the_same_security_options_and_help() -> None:
    bridge = _security_help(("bridge", "run"))
    for path in ZK_COMMANDS:
        assert _security_help(path) == bridge, " ".join(path)
    helps = dict(bridge)
    for flag, env in (("--zk-digest", "ZK2KRAFT_ZK_DIGEST"), ("--zk-sasl-password", "ZK2KRAFT_ZK_SASL_PASSWORD")):
        assert env in next(text for opts, text in helps.items() if opts.startswith(flag)), flag


@pytest.fixture
def secured(zk_server: EmbeddedZooKeeper, zk_client: KazooClient, zk_chroot: str, zk_connect: str) -> str:
    """This test's chroot seeded with a small Kafka cluster whose every znode only the digest user may touch."""
    seed_small_cluster(zk_client)
    only_digest_user(zk_server.connect_string, zk_chroot)
    return zk_connect


def _run(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def _assert_refused(result: Result, zk_server: EmbeddedZooKeeper) -> None:
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    assert zk_server.connect_string in result.output, result.output
    assert re.search(r"znode /\S+ .*\(NOAUTH\)", result.output), result.output
    assert "Traceback" not in result.output


COMMANDS: dict[str, tuple[Callable[[str, Path], list[str]], set[int]]] = {
    "status": (lambda zk, out: ["status", "--zk", zk], {EXIT_OK}),
    "rollback": (lambda zk, out: ["rollback", "--zk", zk, "--dry-run", "--backup", str(out / "b.json")], {EXIT_OK}),
    # Brokers still in ZooKeeper mode: conditions not met is a finding, not an error.
    "finalize-check": (lambda zk, out: ["finalize-check", "--zk", zk, "--no-audit"], {EXIT_FINDING}),
    "zk-export": (lambda zk, out: ["zk", "export", "--zk", zk, "-o", str(out / "dump.jsonl")], {EXIT_OK}),
    "migrate": (lambda zk, out: ["migrate", "--zk", zk, "--out", str(out / "meta")], {EXIT_OK}),
    "plan": (lambda zk, out: ["plan", "--zk", zk, "--out", str(out / "plan")], {EXIT_OK, EXIT_FINDING}),
}


@pytest.mark.zookeeper
@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_command_reads_digest_protected_znodes_with_the_credentials_and_names_the_znode_without(
    name: str, zk_server: EmbeddedZooKeeper, secured: str, tmp_path: Path
) -> None:
    args, succeeded = COMMANDS[name]
    refused_dir, done_dir = tmp_path / "refused", tmp_path / "done"
    refused_dir.mkdir()
    done_dir.mkdir()
    _assert_refused(_run(*args(secured, refused_dir)), zk_server)
    assert not any(refused_dir.iterdir()), "a refusal writes nothing"
    done = _run(*args(secured, done_dir), "--zk-digest", DIGEST)
    assert done.exit_code in succeeded, done.output
    if name in ("zk-export", "migrate", "plan"):
        assert any(done_dir.iterdir()), done.output
    assert PASSWORD not in done.output
    assert files_holding(tmp_path, PASSWORD) == []


@pytest.mark.zookeeper
def test_zk_load_into_a_digest_protected_chroot_names_the_znode_and_rolls_back_without_credentials(
    zk_server: EmbeddedZooKeeper, secured: str, zk_admin: KazooClient, zk_chroot: str, tmp_path: Path
) -> None:
    dump = tmp_path / "dump.jsonl"
    assert _run("zk", "export", "--zk", secured, "-o", str(dump), "--zk-digest", DIGEST).exit_code == EXIT_OK
    target = f"{zk_chroot}-copy"
    zk_admin.create(target, acl=[make_digest_acl(USER, PASSWORD, all=True)])
    connect = zk_server.connect_string + target
    refused = _run("zk", "load", str(dump), "--zk", connect)
    _assert_refused(refused, zk_server)
    assert f"znode {target} " in refused.output, "the failing op of the multi is named"
    owner = ZkConnectOptions(connect=connect, auth_data=(("digest", DIGEST),)).start_client()
    try:
        assert owner.get_children("/") == [], "the failed load left nothing behind"
        loaded = _run("zk", "load", str(dump), "--zk", connect, env={"ZK2KRAFT_ZK_DIGEST": DIGEST})
        assert loaded.exit_code == EXIT_OK, loaded.output
        assert owner.exists("/cluster/id") is not None
    finally:
        owner.stop()
        owner.close()
    assert PASSWORD not in loaded.output + refused.output
    assert files_holding(tmp_path, PASSWORD) == []


def test_security_options_without_a_live_zookeeper_are_refused_unless_they_come_from_the_environment(
    tmp_path: Path,
) -> None:
    dump = tmp_path / "dump.jsonl"
    dump.write_text("")
    given = _run("migrate", "--zk-dump", str(dump), "--out", str(tmp_path / "meta"), "--zk-digest", DIGEST)
    assert given.exit_code == EXIT_BAD_INPUT, given.output
    assert "--zk-digest only go with --zk" in given.output
    from_env = _run("migrate", "--zk-dump", str(dump), "--out", str(tmp_path / "meta"), env={"ZK2KRAFT_ZK_DIGEST": DIGEST})
    assert "only go with --zk" not in from_env.output, "an exported variable meant for other commands is fine"
