"""TLS on the Kafka listener (SSL and SASL_SSL) over real sockets, with throwaway certificates from openssl.

The principal of a client certificate is `User:<subject DN>` in Java's RFC 2253 form; clients without one
are ANONYMOUS (ssl.client.auth=requested) or refused (required).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from kio.schema.metadata.v12 import MetadataRequest

from bridge.kafka.client import ConnectionClosedError, KafkaConnection
from bridge.kafka.listener import KafkaListener
from bridge.kafka.protocol import ANONYMOUS, KafkaPrincipal
from bridge.kafka.sasl import SaslConfig
from bridge.kafka.tls import server_ssl_context, subject_name
from migrate.errors import Zk2KraftError
from tests.support.listener import PASSWORDS, Cluster, lookup, serve
from tests.support.pki import Pki, client_context, needs_openssl, new_pki, server_context

HOST = "127.0.0.1"
TIMEOUT = 20.0
ALICE_DN = "CN=alice,OU=eng,O=zk2kraft,C=US"

pytestmark = needs_openssl


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    pki = new_pki(tmp_path_factory.mktemp("pki"))
    pki.issue("alice", "/C=US/O=zk2kraft/OU=eng/CN=alice")
    pki.issue("bob", "/CN=bob, jr\\+x/emailAddress=bob@example.com")
    pki.issue("multi", "/DC=org/DC=example/CN=svc+UID=42/O=a;b", "-multivalue-rdn")
    pki.issue("unicode", "/CN=Zoë ", "-utf8")
    return pki


@pytest.fixture(scope="module")
def required(pki: Pki) -> Iterator[Cluster]:
    yield from serve(KafkaListener(HOST, 0, handlers={}, ssl_context=server_context(pki, "required")))


@pytest.fixture(scope="module")
def requested(pki: Pki) -> Iterator[Cluster]:
    yield from serve(KafkaListener(HOST, 0, handlers={}, ssl_context=server_context(pki, "requested")))


METADATA = MetadataRequest(
    topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
)


def metadata_over_tls(port: int, ctx: ssl.SSLContext) -> None:
    async def scenario() -> None:
        reader, writer = await asyncio.open_connection(HOST, port, ssl=ctx, server_hostname="localhost")
        async with KafkaConnection(reader, writer, f"{HOST}:{port}", client_id="tls-tests") as connection:
            await connection.send(METADATA, timeout=TIMEOUT)

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("cert", "principal"),
    [
        ("alice", ALICE_DN),
        # emailAddress is no RFC 2253 keyword: its OID and DER value in hex; ',' and '+' are escaped.
        ("bob", "1.2.840.113549.1.9.1=#16" + "0f" + b"bob@example.com".hex() + ",CN=bob\\, jr\\+x"),
        ("multi", "O=a\\;b,CN=svc+UID=42,DC=example,DC=org"),
        ("unicode", "CN=Zoë\\ "),
    ],
)
def test_client_certificate_principal_is_the_subject_dn(
    required: Cluster, pki: Pki, cert: str, principal: str
) -> None:
    metadata_over_tls(required.port, client_context(pki, cert))
    assert required.principals[-1] == KafkaPrincipal("User", principal)


def test_requested_client_auth_lets_certificate_less_clients_in_as_anonymous(
    requested: Cluster, pki: Pki
) -> None:
    metadata_over_tls(requested.port, client_context(pki, None))
    assert requested.principals[-1] == ANONYMOUS
    metadata_over_tls(requested.port, client_context(pki, "alice"))
    assert requested.principals[-1] == KafkaPrincipal("User", ALICE_DN)


def test_required_client_auth_refuses_clients_without_a_certificate(required: Cluster, pki: Pki) -> None:
    before = len(required.principals)
    with pytest.raises((ConnectionClosedError, ssl.SSLError, ConnectionError)):
        metadata_over_tls(required.port, client_context(pki, None))
    assert len(required.principals) == before
    metadata_over_tls(required.port, client_context(pki, "alice"))  # others are still served


def test_plaintext_client_on_a_tls_listener_is_dropped(requested: Cluster, pki: Pki) -> None:
    before = len(requested.principals)

    async def scenario() -> None:
        connection = await KafkaConnection.open(HOST, requested.port, timeout=TIMEOUT)
        async with connection:
            await connection.send(METADATA, timeout=TIMEOUT)

    with pytest.raises((ConnectionClosedError, Zk2KraftError)):
        asyncio.run(scenario())
    assert len(requested.principals) == before
    metadata_over_tls(requested.port, client_context(pki, None))


def test_librdkafka_over_ssl_with_a_client_certificate(required: Cluster, pki: Pki) -> None:
    client = AdminClient({
        "bootstrap.servers": f"localhost:{required.port}",
        "security.protocol": "SSL",
        "ssl.ca.location": str(pki.path("ca.crt")),
        "ssl.certificate.location": str(pki.path("alice.crt")),
        "ssl.key.location": str(pki.path("alice.key")),
    })  # fmt: skip
    before = len(required.principals)
    client.list_topics(timeout=TIMEOUT)
    assert set(required.principals[before:]) == {KafkaPrincipal("User", ALICE_DN)}


@pytest.fixture(scope="module")
def sasl_ssl(pki: Pki) -> Iterator[Cluster]:
    sasl = SaslConfig(mechanisms=("SCRAM-SHA-512", "PLAIN"), plain_users=PASSWORDS, scram_credentials=lookup)
    yield from serve(KafkaListener(HOST, 0, handlers={}, ssl_context=server_context(pki, "none"), sasl=sasl))


def sasl_ssl_admin(port: int, pki: Pki, password: str) -> AdminClient:
    return AdminClient({
        "bootstrap.servers": f"localhost:{port}",
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(pki.path("ca.crt")),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": password,
        "log_level": 0,
    })  # fmt: skip


def test_librdkafka_over_sasl_ssl(sasl_ssl: Cluster, pki: Pki) -> None:
    before = len(sasl_ssl.principals)
    sasl_ssl_admin(sasl_ssl.port, pki, PASSWORDS["alice"]).list_topics(timeout=TIMEOUT)
    # SASL decides the principal on SASL_SSL, not the (absent) client certificate.
    assert set(sasl_ssl.principals[before:]) == {KafkaPrincipal("User", "alice")}
    served = len(sasl_ssl.principals)
    with pytest.raises(KafkaException):
        sasl_ssl_admin(sasl_ssl.port, pki, "wrong").list_topics(timeout=1.5)
    assert len(sasl_ssl.principals) == served


def test_subject_name_rejects_garbage() -> None:
    for data in (b"", b"\x30", b"\x30\x84\xff\xff\xff\xff", b"\x30\x03\x30\x01\x00"):
        with pytest.raises(Zk2KraftError):
            subject_name(data)


def test_server_context_settings_are_checked(pki: Pki) -> None:
    with pytest.raises(Zk2KraftError, match="needs a CA file"):
        server_ssl_context(pki.path("server.crt"), pki.path("server.key"), client_auth="required")
    with pytest.raises(Zk2KraftError, match=r"ssl\.client\.auth"):
        server_ssl_context(pki.path("server.crt"), pki.path("server.key"), client_auth="always")  # type: ignore[arg-type]
    with pytest.raises(Zk2KraftError, match="cannot load"):
        server_ssl_context(pki.path("missing.crt"), pki.path("server.key"))
