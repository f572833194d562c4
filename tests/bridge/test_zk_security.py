"""`zk2kraft bridge run` reaches a secured ZooKeeper like Kafka's brokers do: digest credentials, SASL, TLS."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from kazoo.client import KazooClient
from kazoo.security import ACL, Id, Permissions

from cli.main import cli
from migrate.errors import EXIT_BAD_INPUT
from migrate.zk.embedded import EmbeddedZooKeeper
from migrate.zk.live import ZkConnectOptions
from tests.support.bridge import NODE_ID
from tests.support.bridge_process import bridge_process, seed_small_cluster, seeded_chroot
from tests.support.secured_zk import DIGEST, only_digest_user, walk


def test_bridge_with_the_digest_credentials_reaches_dual_write_and_without_them_names_the_znode(
    zk_server: EmbeddedZooKeeper, zk_client: KazooClient, zk_chroot: str, zk_connect: str, tmp_path: Path
) -> None:
    seed_small_cluster(zk_client)
    only_digest_user(zk_server.connect_string, zk_chroot)
    with bridge_process(
        zk_connect=zk_connect,
        metadata_dir=tmp_path / "refused",
        node_id=NODE_ID,
        log_path=tmp_path / "no-auth.log",
    ) as bare:
        code = bare.start().wait_exit(60)
        text = bare.log_text()
        assert code == EXIT_BAD_INPUT, bare.log_tail()
        assert "NOAUTH" in text, bare.log_tail()
        assert zk_server.connect_string in text and "/cluster/id" in text, bare.log_tail()
        assert not (tmp_path / "refused" / "__cluster_metadata-0").exists(), "nothing written when refused"
    with bridge_process(
        zk_connect=zk_connect,
        metadata_dir=tmp_path / "meta",
        node_id=NODE_ID,
        log_path=tmp_path / "digest.log",
        extra_args=["--zk-digest", DIGEST],
    ) as bridge:
        status = bridge.start().wait_for_state("DUAL_WRITE")
        assert status["state"] == "DUAL_WRITE"
        assert bridge.terminate() == 0, bridge.log_tail()
    assert DIGEST not in (tmp_path / "digest.log").read_text().split("\n", 2)[-1], (
        "no password logged"
    )


def test_bridge_over_tls_with_a_sasl_login_reaches_dual_write(
    zk_secure_server: EmbeddedZooKeeper, tmp_path: Path
) -> None:
    files = zk_secure_server.tls_files
    assert files is not None
    user, password = next(iter(zk_secure_server.sasl_users.items()))
    chroot = f"/bridge-tls-{tmp_path.name}"
    seeded_chroot(zk_secure_server.connect_string, chroot)
    admin = ZkConnectOptions(connect=zk_secure_server.connect_string).start_client()
    try:
        for path in walk(admin, chroot)[1:]:
            admin.set_acls(path, [ACL(Permissions.ALL, Id("sasl", user))])
    finally:
        admin.stop()
        admin.close()
    tls = ["--zk-tls", "--zk-tls-ca", str(files.ca), "--zk-tls-cert", str(files.client_cert)]
    tls += ["--zk-tls-key", str(files.client_key)]
    sasl = ["--zk-sasl-username", user, "--zk-sasl-password", password]
    connect = zk_secure_server.secure_connect_string + chroot
    with bridge_process(
        zk_connect=connect, metadata_dir=tmp_path / "meta", node_id=NODE_ID, log_path=tmp_path / "tls.log",
        extra_args=tls + sasl,
    ) as bridge:  # fmt: skip
        bridge.start().wait_for_state("DUAL_WRITE")
        assert "use_ssl: True" in bridge.log_text(), bridge.log_tail()
        assert bridge.terminate() == 0, bridge.log_tail()
    with bridge_process(
        zk_connect=connect, metadata_dir=tmp_path / "refused", node_id=NODE_ID, log_path=tmp_path / "no-sasl.log",
        extra_args=tls,
    ) as bare:  # fmt: skip
        assert bare.start().wait_exit(60) == EXIT_BAD_INPUT, bare.log_tail()
        assert "NOAUTH" in bare.log_text() and "/cluster/id" in bare.log_text(), bare.log_tail()


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--zk-tls-ca", "{pem}"], "--zk-tls-ca without --zk-tls"),
        (["--zk-digest", "no-colon"], "USER:PASSWORD"),
        (["--zk-sasl-username", "alice"], "--zk-sasl-password"),
    ],
)
def test_zookeeper_security_options_that_do_not_fit_are_bad_input(
    tmp_path: Path, args: list[str], named: str
) -> None:
    pem = tmp_path / "ca.pem"
    pem.write_text("not used")
    result = CliRunner().invoke(
        cli,
        ["bridge", "run", "--zk", "127.0.0.1:1", "--metadata-dir", str(tmp_path / "meta"), "--node-id", "1"]
        + [a.format(pem=pem) for a in args],
    )
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    assert named in result.output
    assert not (tmp_path / "meta").exists()
