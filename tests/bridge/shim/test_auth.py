"""Authentication and authorization through the shim, end to end: real ZooKeeper seeded with Kafka 3.5's real
cluster, the bridge controller in DUAL_WRITE, a shim secured as `zk2kraft shim run --security-protocol
SASL_PLAINTEXT --authorizer acl` secures it, and confluent-kafka's AdminClient. A refused client changes
nothing: the controller's log end offset and ZooKeeper stay as they were."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from bridge.controller import BridgeController
from bridge.kafka.sasl import read_plain_users
from bridge.shim.server import ShimConfig, ShimServer, ShimThread
from cli.shim_cmd import secure_shim
from migrate.errors import Zk2KraftError
from migrate.zk.cluster import from_tree
from migrate.zk.live import read_tree
from tests.support.bridge import SHIM_ID, TIMEOUT, eventually, result

pytestmark = pytest.mark.zookeeper

ADMIN_PASSWORD = "admin-secret"
ALICE_PASSWORD = "alice-secret"



def shim_server(bridge: BridgeController, **security: Any) -> ShimServer:
    config = ShimConfig(
        controllers=[("127.0.0.1", bridge.listen_port)], node_id=SHIM_ID, poll_interval_s=0.05
    )
    return secure_shim(ShimServer(config), **security)


@pytest.fixture
def shim(bridge: BridgeController, tmp_path: Path) -> Iterator[ShimServer]:
    """SASL_PLAINTEXT: the super user admin logs in with PLAIN, everyone else with SCRAM-SHA-256; ACLs apply."""
    users = tmp_path / "plain-users"
    users.write_text(f'# PLAIN users\nadmin="{ADMIN_PASSWORD}"\n')
    server = shim_server(
        bridge,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanisms="PLAIN,SCRAM-SHA-256",
        plain_users=str(users),
        authorizer="acl",
        super_users="User:admin",
    )
    with ShimThread(server):
        yield server


def client(shim: ShimServer, user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> AdminClient:
    return AdminClient({
        "bootstrap.servers": f"127.0.0.1:{shim.port}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
        "socket.timeout.ms": 20000,
        "log_level": 0,
    })  # fmt: skip


def admin(shim: ShimServer) -> AdminClient:
    return client(shim, "admin", ADMIN_PASSWORD, "PLAIN")


def create_alice(shim: ShimServer, bridge: BridgeController) -> None:
    """The super user gives alice a SCRAM-SHA-256 credential (AlterUserScramCredentials through the shim)."""
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    upsert = UserScramCredentialUpsertion("alice", info, ALICE_PASSWORD.encode(), b"alice-salt")
    superuser = admin(shim)  # kept: a destroyed client fails its pending futures
    result(superuser.alter_user_scram_credentials([upsert]))
    eventually(lambda: ("alice", 1) in shim.follower.image.scram)
    assert bridge.log is not None and ("alice", 1) in bridge.log.image.scram


def state(bridge: BridgeController, zk_connect: str) -> tuple[Any, ...]:
    """What a refused request must leave alone: the log's end offset; topics, configs, ACLs and change
    notifications in ZooKeeper."""
    assert bridge.log is not None
    model = from_tree(read_tree(zk_connect, acls=False))
    return bridge.log.end_offset, model.topics, model.topic_configs, model.acls, model.config_changes


def topic_error(futures: dict[str, Any], name: str) -> KafkaError:
    with pytest.raises(KafkaException) as caught:
        futures[name].result(timeout=TIMEOUT)
    error: KafkaError = caught.value.args[0]
    return error


# ---------------------------------------------------------------------------------------------- acceptance


def test_wrong_scram_password_is_refused_and_changes_nothing(
    shim: ShimServer, bridge: BridgeController, zk_connect: str
) -> None:
    create_alice(shim, bridge)
    before = state(bridge, zk_connect)
    intruder = client(shim, "alice", "wrong-password")
    futures = intruder.create_topics([NewTopic("auth-intruder", 1, 1)], request_timeout=3)
    with pytest.raises(KafkaException) as caught:
        futures["auth-intruder"].result(timeout=TIMEOUT)
    assert caught.value.args[0].code() in (
        KafkaError._AUTHENTICATION,
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
    )
    assert state(bridge, zk_connect) == before
    # The right password gets in (and, without ACLs, still may not create anything).
    assert client(shim, "alice", ALICE_PASSWORD).list_topics(timeout=TIMEOUT).brokers


def test_principal_without_acls_is_refused_per_topic_until_granted(
    shim: ShimServer, bridge: BridgeController, zk_connect: str
) -> None:
    create_alice(shim, bridge)
    alice = client(shim, "alice", ALICE_PASSWORD)
    before = state(bridge, zk_connect)
    futures = alice.create_topics([NewTopic("auth-alice", 2, 1)], request_timeout=TIMEOUT)
    assert topic_error(futures, "auth-alice").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert state(bridge, zk_connect) == before
    # Without DESCRIBE on any topic, alice's listing shows none of the cluster's topics.
    assert alice.list_topics(timeout=TIMEOUT).topics == {}

    grant = AclBinding(ResourceType.TOPIC, "auth-alice", ResourcePatternType.LITERAL, "User:alice", "*",
                       AclOperation.CREATE, AclPermissionType.ALLOW)  # fmt: skip
    superuser = admin(shim)
    result(superuser.create_acls([grant]))
    eventually(lambda: bool(shim.follower.image.acls))

    # One request, two topics: the granted one is created, the other refused; only the first reaches ZooKeeper.
    futures = alice.create_topics(
        [NewTopic("auth-alice", 2, 1), NewTopic("auth-other", 1, 1)], request_timeout=TIMEOUT
    )
    futures["auth-alice"].result(timeout=TIMEOUT)
    assert topic_error(futures, "auth-other").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert bridge.log is not None
    assert len(bridge.log.image.topics_by_name["auth-alice"].partitions) == 2
    assert "auth-other" not in bridge.log.image.topics_by_name
    topics = from_tree(read_tree(zk_connect, acls=False)).topics
    assert "auth-alice" in topics and "auth-other" not in topics
    # CREATE implies nothing else: no ALTER for partitions, no DELETE, no ALTER_CONFIGS, no cluster ALTER.
    before = state(bridge, zk_connect)
    more = alice.create_partitions([NewPartitions("auth-alice", 3)], request_timeout=TIMEOUT)
    assert topic_error(more, "auth-alice").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    gone = alice.delete_topics(["auth-alice"], request_timeout=TIMEOUT)
    assert topic_error(gone, "auth-alice").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    entry = ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.TOPIC, "auth-alice", incremental_configs=[entry])
    with pytest.raises(KafkaException) as caught:
        alice.incremental_alter_configs([resource])[resource].result(timeout=TIMEOUT)
    assert caught.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as caught:
        result(alice.create_acls([grant]))
    assert caught.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert state(bridge, zk_connect) == before


def test_ssl_required_refuses_a_plaintext_client(
    bridge: BridgeController, zk_connect: str, tmp_path: Path
) -> None:
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", "server.key", "-out", "server.crt", "-subj", "/CN=localhost", "-days", "2",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        cwd=tmp_path, check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    server = shim_server(
        bridge,
        security_protocol="SSL",
        ssl_cert=str(tmp_path / "server.crt"),
        ssl_key=str(tmp_path / "server.key"),
    )
    with ShimThread(server):
        before = state(bridge, zk_connect)
        plain = AdminClient({"bootstrap.servers": f"127.0.0.1:{server.port}", "log_level": 0})
        futures = plain.create_topics([NewTopic("auth-plaintext", 1, 1)], request_timeout=3)
        with pytest.raises(KafkaException):
            futures["auth-plaintext"].result(timeout=TIMEOUT)
        assert state(bridge, zk_connect) == before
        tls = AdminClient({
            "bootstrap.servers": f"localhost:{server.port}",
            "security.protocol": "SSL",
            "ssl.ca.location": str(tmp_path / "server.crt"),
            "log_level": 0,
        })  # fmt: skip
        assert "auth-plaintext" not in tls.list_topics(timeout=TIMEOUT).topics


# ---------------------------------------------------------------------------------------------- options


def test_plain_users_file_and_bad_options(tmp_path: Path, bridge: BridgeController) -> None:
    users = tmp_path / "users"
    users.write_text('# comment\n\nalice=a=b\nuser_bob="secret";\n')
    assert read_plain_users(users) == {"alice": "a=b", "bob": "secret"}
    users.write_text("no-separator\n")
    with pytest.raises(Zk2KraftError, match="line 1"):
        read_plain_users(users)
    with pytest.raises(Zk2KraftError, match="needs --ssl-cert"):
        shim_server(bridge, security_protocol="SASL_SSL")
    with pytest.raises(Zk2KraftError, match="no --plain-users"):
        shim_server(bridge, security_protocol="SASL_PLAINTEXT", sasl_mechanisms="PLAIN")
    with pytest.raises(Zk2KraftError, match=r"super\.users"):
        shim_server(bridge, authorizer="acl", super_users="admin")


def test_shim_run_refuses_inconsistent_security_options() -> None:
    from click.testing import CliRunner

    from cli.shim_cmd import shim_group

    base = ["run", "--controller", "127.0.0.1:9093"]
    result = CliRunner().invoke(shim_group, [*base, "--security-protocol", "SASL_SSL"])
    assert result.exit_code == 2 and "needs --ssl-cert" in result.output
    result = CliRunner().invoke(shim_group, [*base, "--authorizer", "acl", "--super-users", "User:a;bob"])
    assert result.exit_code == 2 and "principalType:principalName" in result.output
    result = CliRunner().invoke(shim_group, ["run", "--help"])
    assert "--security-protocol" in result.output and "--authorizer" in result.output
