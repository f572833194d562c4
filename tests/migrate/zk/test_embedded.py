"""The embedded ZooKeeper really serves clients, keeps data across restarts and fails clearly."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import make_digest_acl

from migrate.errors import Zk2KraftError
from migrate.zk.embedded import EmbeddedEnsemble, EmbeddedZooKeeper, zookeeper_classpath

pytestmark = pytest.mark.zookeeper


def _client(hosts: str, **kwargs: object) -> KazooClient:
    client = KazooClient(hosts=hosts, **kwargs)
    client.start(timeout=15)
    return client


def test_start_stop_restart_keeps_data(tmp_path: Path) -> None:
    with EmbeddedZooKeeper(tmp_path / "zk") as server:
        client = _client(server.connect_string)
        client.create("/kept", b"\x00value\xff", makepath=True)
        client.stop()
        client.close()

        server.restart()
        assert server.running
        client = _client(server.connect_string)
        assert client.get("/kept")[0] == b"\x00value\xff"
        client.stop()
        client.close()

        server.stop()
        assert not server.running
        with pytest.raises(OSError), socket.create_connection(("127.0.0.1", server.port), timeout=2):
            pass
    assert (tmp_path / "zk" / "data" / "version-2").is_dir()
    assert (tmp_path / "zk" / "zookeeper.log").stat().st_size > 0


def test_temp_folder_removed_on_close() -> None:
    server = EmbeddedZooKeeper()
    folder = server.base_dir
    assert folder.is_dir()
    server.close()
    assert not folder.exists()


def test_port_already_in_use_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(Zk2KraftError, match=f"port {port} .*already in use"):
            EmbeddedZooKeeper(tmp_path, port=port).start()


def test_server_that_dies_at_start_reports_its_log(tmp_path: Path) -> None:
    server = EmbeddedZooKeeper(tmp_path, config={"tickTime": "not-a-number"})
    with pytest.raises(Zk2KraftError, match=r"exited .* before serving clients(?s:.*)last lines of"):
        server.start()
    assert not server.running


def test_missing_java_tells_user_to_install_a_jre(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(Zk2KraftError, match="`java` is not on PATH; install a Java runtime"):
        EmbeddedZooKeeper(tmp_path / "zk").start()


def test_chroot_fixtures_isolate_tests(zk_client: KazooClient, zk_chroot: str, zk_admin: KazooClient) -> None:
    zk_client.create("/mine", b"x")
    assert zk_admin.get(f"{zk_chroot}/mine")[0] == b"x"
    assert zk_client.get_children("/") == ["mine"]


def test_digest_auth_protects_a_znode(zk_server: EmbeddedZooKeeper, zk_connect: str) -> None:
    owner = _client(zk_connect, auth_data=[("digest", "alice:secret")])
    owner.create("/secret", b"s3", acl=[make_digest_acl("alice", "secret", all=True)])
    stranger = _client(zk_connect)
    try:
        with pytest.raises(NoAuthError):
            stranger.get("/secret")
        assert owner.get("/secret")[0] == b"s3"
    finally:
        for client in (owner, stranger):
            client.stop()
            client.close()


def test_tls_client_port(zk_secure_server: EmbeddedZooKeeper) -> None:
    files = zk_secure_server.tls_files
    assert files is not None
    client = _client(
        zk_secure_server.secure_connect_string,
        use_ssl=True,
        ca=str(files.ca),
        certfile=str(files.client_cert),
        keyfile=str(files.client_key),
    )
    client.ensure_path("/over-tls")
    client.set("/over-tls", b"t")
    assert client.get("/over-tls")[0] == b"t"
    client.stop()
    client.close()


def test_sasl_digest_md5_login(zk_secure_server: EmbeddedZooKeeper, tmp_path: Path) -> None:
    """kazoo needs the optional `pure-sasl` package for SASL, so ZooKeeper's own Java CLI checks the server."""
    user, password = next(iter(zk_secure_server.sasl_users.items()))
    jaas = tmp_path / "client-jaas.conf"
    jaas.write_text(
        "Client {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
        f'  username="{user}" password="{password}";\n}};\n'
    )
    classpath = os.pathsep.join(str(p) for p in zookeeper_classpath())
    done = subprocess.run(
        ["java", "-XX:TieredStopAtLevel=1", "-Dzookeeper.fips-mode=false",
         f"-Djava.security.auth.login.config={jaas}", "-cp", classpath,
         "org.apache.zookeeper.ZooKeeperMain", "-server", zk_secure_server.connect_string, "whoami"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert f"sasl: {user}" in done.stdout, done.stdout + done.stderr


@pytest.mark.slow
def test_ensemble_survives_losing_its_leader(zk_ensemble: EmbeddedEnsemble) -> None:
    leader = zk_ensemble.leader_index()
    assert leader is not None
    assert sorted(zk_ensemble.mode(i) or "" for i in range(3)) == ["follower", "follower", "leader"]
    client = _client(zk_ensemble.connect_string)
    try:
        client.create("/before", b"1", makepath=True)
        zk_ensemble.stop_server(leader)
        new_leader = zk_ensemble.wait_for_leader()
        assert new_leader != leader
        client.retry(client.create, "/after", b"2")
        assert client.retry(client.get, "/before")[0] == b"1"
    finally:
        zk_ensemble.start_server(leader)
        client.stop()
        client.close()
    assert zk_ensemble.mode(leader) == "follower"
    rejoined = _client(zk_ensemble.server_connect_string(leader))
    rejoined.sync("/")
    assert rejoined.get("/after")[0] == b"2"
    rejoined.stop()
    rejoined.close()
