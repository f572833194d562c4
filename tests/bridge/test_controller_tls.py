"""The controller's listener authenticated end to end: TLS with required client certificates and an
--envelope-principals allow list. A shim with the listed certificate follows the log and forwards an
AdminClient's CreateTopics; another certificate's Envelope or direct request is CLUSTER_AUTHORIZATION_FAILED
with nothing appended; a plaintext or certificate-less client gets no answer at all."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient
from kio.schema.errors import ErrorCode

from bridge.controller import BridgeController
from bridge.kafka.client import ConnectionClosedError, KafkaConnection, build_envelope
from bridge.kafka.protocol import KafkaPrincipal, decode_response, encode_request
from bridge.shim.server import ShimConfig, ShimServer, ShimThread
from cli.main import cli
from cli.shim_cmd import secure_controller_channel
from migrate.errors import Zk2KraftError
from migrate.zk.tree import ZTree
from tests.support.bridge import SHIM_ID, controller_config, running_bridge
from tests.support.pki import Pki, client_context, needs_openssl, new_pki
from tests.support.requests import create_topic

pytestmark = [
    pytest.mark.zookeeper,
    needs_openssl,
]

TIMEOUT = 30.0
SHIM_PRINCIPAL = "User:CN=shim-1,O=zk2kraft"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    pki = new_pki(tmp_path_factory.mktemp("controller-tls-pki"))
    pki.issue("shim", "/O=zk2kraft/CN=shim-1")
    pki.issue("intruder", "/O=zk2kraft/CN=intruder")
    return pki


def secure_fields(pki: Pki) -> dict[str, Any]:
    """A bridge listener with TLS, required client certificates and SHIM_PRINCIPAL as the one Envelope sender."""
    return {
        "listen_ssl_cert": pki.path("server.crt"),
        "listen_ssl_key": pki.path("server.key"),
        "listen_ssl_ca": pki.path("ca.crt"),
        "envelope_principals": frozenset({SHIM_PRINCIPAL}),
    }


@pytest.fixture
def bridge(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path, pki: Pki
) -> Iterator[BridgeController]:
    with running_bridge(zk_client, zk_connect, real_tree, tmp_path, **secure_fields(pki)) as controller:
        yield controller


@pytest.fixture
def shim(bridge: BridgeController, pki: Pki) -> Iterator[ShimServer]:
    config = ShimConfig(
        controllers=[("127.0.0.1", bridge.listen_port)], node_id=SHIM_ID, poll_interval_s=0.05
    )
    server = secure_controller_channel(
        ShimServer(config),
        cert=str(pki.path("shim.crt")),
        key=str(pki.path("shim.key")),
        ca=str(pki.path("ca.crt")),
    )
    with ShimThread(server):
        yield server


def send(port: int, request: Any, ctx: ssl.SSLContext | None) -> Any:
    async def scenario() -> Any:
        connection = await KafkaConnection.open("127.0.0.1", port, ssl_context=ctx, timeout=5.0)
        async with connection:
            return await connection.send(request, timeout=5.0)

    return asyncio.run(scenario())


def test_shim_with_the_listed_certificate_follows_and_forwards(
    shim: ShimServer, bridge: BridgeController
) -> None:
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{shim.port}", "socket.timeout.ms": 20000})
    futures = admin.create_topics(
        [NewTopic("tls-forwarded", num_partitions=2, replication_factor=1)],
        operation_timeout=TIMEOUT,
        request_timeout=TIMEOUT,
    )
    futures["tls-forwarded"].result(timeout=TIMEOUT)
    assert bridge.log is not None
    assert len(bridge.log.image.topics_by_name["tls-forwarded"].partitions) == 2
    # The shim's follower (Fetch over TLS) has the topic for the next read through the shim.
    listed = admin.list_topics(timeout=TIMEOUT).topics
    assert "tls-forwarded" in listed and len(listed["tls-forwarded"].partitions) == 2


def test_another_certificate_gets_cluster_authorization_failed_and_nothing_is_appended(
    bridge: BridgeController, pki: Pki
) -> None:
    assert bridge.log is not None
    end = bridge.log.end_offset
    intruder = client_context(pki, "intruder")
    inner = encode_request(create_topic("tls-injected"), 7, "intruder")
    envelope = build_envelope(inner, KafkaPrincipal("User", "admin"), "127.0.0.1")
    answer = send(bridge.listen_port, envelope, intruder)
    assert answer.error_code == ErrorCode.cluster_authorization_failed
    assert answer.response_data is None
    direct = send(bridge.listen_port, create_topic("tls-direct"), intruder)
    assert [t.error_code for t in direct.topics] == [ErrorCode.cluster_authorization_failed]
    assert bridge.log.end_offset == end
    assert not {"tls-injected", "tls-direct"} & set(bridge.log.image.topics_by_name)


def test_the_listed_certificate_may_send_envelopes_directly(bridge: BridgeController, pki: Pki) -> None:
    inner = encode_request(create_topic("tls-listed"), 9, "shim")
    envelope = build_envelope(inner, KafkaPrincipal("User", "admin"), "127.0.0.1")
    answer = send(bridge.listen_port, envelope, client_context(pki, "shim"))
    assert answer.error_code == ErrorCode.none
    _, response = decode_response(answer.response_data, 19, 7, "inner CreateTopics response")
    assert [t.error_code for t in response.topics] == [ErrorCode.none]
    assert bridge.log is not None and "tls-listed" in bridge.log.image.topics_by_name


def test_plaintext_or_certificate_less_clients_cannot_connect(bridge: BridgeController, pki: Pki) -> None:
    assert bridge.log is not None
    end = bridge.log.end_offset
    for ctx in (None, client_context(pki, None)):
        with pytest.raises(ConnectionClosedError):
            send(bridge.listen_port, create_topic("tls-plaintext"), ctx)
    assert bridge.log.end_offset == end


def test_inconsistent_listener_security_is_refused_before_starting(
    zk_connect: str, tmp_path: Path, pki: Pki
) -> None:
    with pytest.raises(Zk2KraftError, match="--listen-ssl-ca"):
        BridgeController(controller_config(zk_connect, tmp_path / "m", **{**secure_fields(pki), "listen_ssl_ca": None}))
    with pytest.raises(Zk2KraftError, match="--listen-ssl-cert"):
        BridgeController(controller_config(zk_connect, tmp_path / "m", **{**secure_fields(pki), "listen_ssl_cert": None}))
    result = CliRunner().invoke(
        cli,
        ["bridge", "run", "--zk", zk_connect, "--metadata-dir", str(tmp_path / "m"), "--node-id", "1",
         "--envelope-principals", "CN=shim-1"],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "TYPE:NAME" in result.output
    assert not (tmp_path / "m").exists()


def test_shim_run_refuses_a_controller_key_without_its_certificate(pki: Pki) -> None:
    result = CliRunner().invoke(
        cli,
        ["shim", "run", "--listen", "127.0.0.1:19999", "--controller", "127.0.0.1:1", "--node-id", "7000",
         "--controller-ssl-key", str(pki.path("shim.key"))],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "--controller-ssl-key needs --controller-ssl-cert" in result.output
