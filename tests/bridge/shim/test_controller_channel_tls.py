"""The shim's channel to the controllers over TLS with a client certificate: the controller side sees the shim
as `User:<subject DN>` (what an Envelope-sender allow list would name); a certificate-less channel is refused."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from kio.schema.metadata.v12 import MetadataRequest

from bridge.kafka.listener import KafkaListener
from bridge.kafka.protocol import KafkaPrincipal
from bridge.shim.forward import ControllerChannel, ForwardTimeoutError
from tests.support.listener import Cluster, serve
from tests.support.pki import Pki, client_context, needs_openssl, new_pki, server_context

pytestmark = needs_openssl

METADATA = MetadataRequest(
    topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False
)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    pki = new_pki(tmp_path_factory.mktemp("controller-pki"))
    pki.issue("shim", "/O=zk2kraft/CN=shim-1")
    return pki


@pytest.fixture(scope="module")
def controller(pki: Pki) -> Iterator[Cluster]:
    """A listener standing in for the controller: TLS with required client certificates."""
    yield from serve(KafkaListener("127.0.0.1", 0, handlers={}, ssl_context=server_context(pki, "required")))


def send(channel: ControllerChannel, timeout: float) -> None:
    async def scenario() -> None:
        try:
            await channel.send_direct(METADATA, timeout)
        finally:
            await channel.close()

    asyncio.run(scenario())


def test_channel_with_a_client_certificate_is_the_certificates_principal(
    controller: Cluster, pki: Pki
) -> None:
    channel = ControllerChannel([("127.0.0.1", controller.port)], ssl_context=client_context(pki, "shim"))
    send(channel, 10.0)
    assert controller.principals[-1] == KafkaPrincipal("User", "CN=shim-1,O=zk2kraft")


def test_channel_without_a_certificate_or_without_tls_gets_nowhere(controller: Cluster, pki: Pki) -> None:
    served = len(controller.principals)
    for ctx in (client_context(pki, None), None):
        channel = ControllerChannel([("127.0.0.1", controller.port)], ssl_context=ctx, connect_timeout=1.0)
        with pytest.raises(ForwardTimeoutError):
            send(channel, 1.5)
    assert len(controller.principals) == served
