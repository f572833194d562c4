"""SASL on the Kafka listener: PLAIN and SCRAM-SHA-256/512 as Kafka's SaslServerAuthenticator runs them.

Real TCP throughout: librdkafka (confluent-kafka's AdminClient) as the client for whole logins, and raw
kio requests for the protocol corners (request order, handshake v0, failures and what the client is told).
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import hashlib
import hmac
import socket
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.api_versions.v3 import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12 import MetadataRequest
from kio.schema.sasl_authenticate.v2 import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v0 import SaslHandshakeRequest as SaslHandshakeRequestV0
from kio.schema.sasl_handshake.v1 import SaslHandshakeRequest

from bridge.handlers.scram import scram_keys
from bridge.kafka.client import ConnectionClosedError, KafkaConnection
from bridge.kafka.listener import KafkaListener, RequestContext
from bridge.kafka.protocol import ANONYMOUS, KafkaPrincipal, encode_request, frame
from bridge.kafka.sasl import SaslConfig, image_scram_credentials
from bridge.kafka.sasl_mechanisms import (
    PlainServer,
    SaslAuthenticationError,
    SaslCredentialError,
    SaslLogin,
    SaslProtocolError,
    ScramClient,
    ScramServer,
    StoredScramCredential,
)
from migrate.errors import Zk2KraftError
from migrate.kraft.image import MetadataImage, ScramCredential
from tests.support.listener import (
    ALL_MECHANISMS,
    CREDENTIALS,
    PASSWORDS,
    Cluster,
    lookup,
    sasl_config,
    serve,
    stored_credential,
)

HOST = "127.0.0.1"
TIMEOUT = 20.0
GENERIC_SCRAM_FAILURE = (
    "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"
)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    yield from serve(KafkaListener(HOST, 0, handlers={}, sasl=sasl_config()))


# ---------------------------------------------------------------- librdkafka end to end


def admin(
    port: int, mechanism: str, user: str, password: str, errors: list[str] | None = None
) -> AdminClient:
    config: dict[str, Any] = {
        "bootstrap.servers": f"{HOST}:{port}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
        "log_level": 0,  # refusals are expected; keep librdkafka's stderr quiet
    }
    if errors is not None:
        config["error_cb"] = lambda error: errors.append(str(error))
    return AdminClient(config)


@pytest.mark.parametrize("mechanism", ALL_MECHANISMS)
def test_librdkafka_logs_in_and_the_handler_sees_the_user(cluster: Cluster, mechanism: str) -> None:
    before = len(cluster.principals)
    metadata = admin(cluster.port, mechanism, "alice", PASSWORDS["alice"]).list_topics(timeout=TIMEOUT)
    assert metadata.cluster_id == "zk2kraft-sasl-test"
    assert cluster.principals[before:]
    assert set(cluster.principals[before:]) == {KafkaPrincipal("User", "alice")}


@pytest.mark.parametrize(
    ("mechanism", "user", "password", "told"),
    [
        ("PLAIN", "alice", "wrong", "Authentication failed: Invalid username or password"),
        ("PLAIN", "mallory", "anything", "Authentication failed: Invalid username or password"),
        ("SCRAM-SHA-256", "alice", "wrong", GENERIC_SCRAM_FAILURE.format("SCRAM-SHA-256")),
        ("SCRAM-SHA-512", "mallory", "anything", GENERIC_SCRAM_FAILURE.format("SCRAM-SHA-512")),
        # bob has a PLAIN password but no SCRAM credential: unknown to SCRAM, told nothing more.
        ("SCRAM-SHA-256", "bob", PASSWORDS["bob"], GENERIC_SCRAM_FAILURE.format("SCRAM-SHA-256")),
    ],
)
def test_librdkafka_with_bad_credentials_is_refused_with_kafkas_message(
    cluster: Cluster, mechanism: str, user: str, password: str, told: str
) -> None:
    before = len(cluster.principals)
    errors: list[str] = []
    client = admin(cluster.port, mechanism, user, password, errors)
    with pytest.raises(KafkaException):
        client.list_topics(timeout=1.5)
    client.poll(0.5)  # serves error_cb
    assert any(told in error for error in errors), errors
    assert len(cluster.principals) == before  # no request reached a handler


# ---------------------------------------------------------------- the protocol, request by request


async def connect(port: int) -> KafkaConnection:
    reader, writer = await asyncio.open_connection(HOST, port)
    return KafkaConnection(reader, writer, f"{HOST}:{port}", client_id="sasl-tests")


def scram_client_first(user: str, nonce: str = "fyko+d2lbbFgONRv9qkxdawL") -> bytes:
    return f"n,,n={user},r={nonce}".encode()


def scram_client_final(mechanism: str, password: str, client_first: bytes, server_first: bytes) -> bytes:
    """RFC 5802's client side, for driving the server from tests."""
    algorithm = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    fields = dict(item.split("=", 1) for item in server_first.decode().split(","))
    salted = hashlib.pbkdf2_hmac(
        algorithm, password.encode(), base64.b64decode(fields["s"]), int(fields["i"])
    )
    client_key = hmac.new(salted, b"Client Key", algorithm).digest()
    stored = hashlib.new(algorithm, client_key).digest()
    without_proof = f"c=biws,r={fields['r']}"
    auth = f"{client_first.decode()[3:]},{server_first.decode()},{without_proof}".encode()
    signature = hmac.new(stored, auth, algorithm).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def test_requests_before_authentication_close_the_connection(cluster: Cluster) -> None:
    async def scenario() -> None:
        connection = await connect(cluster.port)
        async with connection:
            with pytest.raises(ConnectionClosedError, match="without answering"):
                await connection.send(
                    MetadataRequest(
                        topics=None,
                        allow_auto_topic_creation=False,
                        include_topic_authorized_operations=False,
                    )
                )

    before = len(cluster.principals)
    asyncio.run(scenario())
    assert len(cluster.principals) == before


def test_api_versions_then_handshake_then_plain_then_requests(cluster: Cluster) -> None:
    async def scenario() -> None:
        connection = await connect(cluster.port)
        async with connection:
            versions = await connection.send(
                ApiVersionsRequest(client_software_name="t", client_software_version="1")
            )
            advertised = {
                entry.api_key: (entry.min_version, entry.max_version) for entry in versions.api_keys
            }
            assert advertised[17] == (0, 1) and advertised[36] == (0, 2)
            handshake = await connection.send(SaslHandshakeRequest(mechanism="PLAIN"))
            assert handshake.error_code == ErrorCode.none
            assert sorted(handshake.mechanisms) == sorted(ALL_MECHANISMS)
            done = await connection.send(SaslAuthenticateRequest(auth_bytes=b"\0bob\0bob-secret"))
            assert done.error_code == ErrorCode.none and done.auth_bytes == b""
            assert done.session_lifetime == datetime.timedelta(0)
            await connection.send(
                MetadataRequest(
                    topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
                )
            )
            # After authentication KafkaApis answers the SASL apis with ILLEGAL_SASL_STATE.
            again = await connection.send(SaslHandshakeRequest(mechanism="PLAIN"))
            assert again.error_code == ErrorCode.illegal_sasl_state and again.mechanisms == ()
            late = await connection.send(SaslAuthenticateRequest(auth_bytes=b"\0bob\0bob-secret"))
            assert late.error_code == ErrorCode.illegal_sasl_state
            assert late.error_message == "SaslAuthenticate request received after successful authentication"

    asyncio.run(scenario())
    assert cluster.principals[-1] == KafkaPrincipal("User", "bob")


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_exchange_ends_with_the_server_signature(cluster: Cluster, mechanism: str) -> None:
    async def scenario() -> None:
        connection = await connect(cluster.port)
        async with connection:
            assert (
                await connection.send(SaslHandshakeRequest(mechanism=mechanism))
            ).error_code == ErrorCode.none
            first = scram_client_first("alice")
            server_first = (await connection.send(SaslAuthenticateRequest(auth_bytes=first))).auth_bytes
            assert server_first.startswith(b"r=fyko+d2lbbFgONRv9qkxdawL")
            final = scram_client_final(mechanism, PASSWORDS["alice"], first, server_first)
            reply = await connection.send(SaslAuthenticateRequest(auth_bytes=final))
            assert reply.error_code == ErrorCode.none
            # The server proves it knows the server key: v=HMAC(ServerKey, AuthMessage).
            stored = CREDENTIALS[("alice", mechanism)]
            algorithm = "sha256" if mechanism.endswith("256") else "sha512"
            auth = b",".join([first[3:], server_first, final.rsplit(b",p=", 1)[0]])
            expected = hmac.new(stored.server_key, auth, algorithm).digest()
            assert reply.auth_bytes == b"v=" + base64.b64encode(expected)
            await connection.send(
                MetadataRequest(
                    topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
                )
            )

    asyncio.run(scenario())
    assert cluster.principals[-1] == KafkaPrincipal("User", "alice")


def test_unsupported_mechanism_is_answered_with_the_enabled_ones_then_closed(cluster: Cluster) -> None:
    async def scenario() -> None:
        connection = await connect(cluster.port)
        async with connection:
            reply = await connection.send(SaslHandshakeRequest(mechanism="GSSAPI"))
            assert reply.error_code == ErrorCode.unsupported_sasl_mechanism
            # Kafka's order: new ArrayList<>(new HashSet<>(sasl.enabled.mechanisms)); in a 16-bucket table
            # PLAIN and SCRAM-SHA-512 both hash to bucket 0 (in insertion order), SCRAM-SHA-256 to bucket 6.
            assert reply.mechanisms == ("PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256")
            with pytest.raises(ConnectionClosedError):
                await connection.send(SaslHandshakeRequest(mechanism="PLAIN"))

    asyncio.run(scenario())


def test_wrong_password_is_answered_then_the_connection_closes(cluster: Cluster) -> None:
    async def scenario() -> None:
        connection = await connect(cluster.port)
        async with connection:
            await connection.send(SaslHandshakeRequest(mechanism="PLAIN"))
            reply = await connection.send(SaslAuthenticateRequest(auth_bytes=b"\0alice\0nope"))
            assert reply.error_code == ErrorCode.sasl_authentication_failed
            assert reply.error_message == "Authentication failed: Invalid username or password"
            with pytest.raises(ConnectionClosedError):
                await connection.send(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"))

    asyncio.run(scenario())


def test_other_requests_mid_exchange_get_illegal_sasl_state_then_close(cluster: Cluster) -> None:
    async def scenario() -> None:
        connection = await connect(cluster.port)
        async with connection:
            await connection.send(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"))
            await connection.send(SaslAuthenticateRequest(auth_bytes=scram_client_first("alice")))
            versions = await connection.send(
                ApiVersionsRequest(client_software_name="t", client_software_version="1")
            )
            assert versions.error_code == ErrorCode.illegal_sasl_state
            with pytest.raises(ConnectionClosedError):
                await connection.send(SaslAuthenticateRequest(auth_bytes=b"c=biws"))

    asyncio.run(scenario())


def test_second_api_versions_before_the_handshake_closes(cluster: Cluster) -> None:
    async def scenario() -> None:
        connection = await connect(cluster.port)
        async with connection:
            request = ApiVersionsRequest(client_software_name="t", client_software_version="1")
            await connection.send(request)
            with pytest.raises(ConnectionClosedError):
                await connection.send(request)

    asyncio.run(scenario())


def test_unsupported_api_versions_version_may_be_retried_before_the_handshake(cluster: Cluster) -> None:
    async def scenario() -> None:
        connection = await connect(cluster.port)
        async with connection:
            request = ApiVersionsRequest(client_software_name="t", client_software_version="1")
            refused = await connection.send(request, api_version=9)
            assert refused.error_code == ErrorCode.unsupported_version
            assert (await connection.send(request)).error_code == ErrorCode.none
            assert (
                await connection.send(SaslHandshakeRequest(mechanism="PLAIN"))
            ).error_code == ErrorCode.none

    asyncio.run(scenario())


def test_handshake_v0_takes_bare_tokens(cluster: Cluster) -> None:
    with socket.create_connection((HOST, cluster.port), timeout=TIMEOUT) as sock:
        sock.sendall(frame(encode_request(SaslHandshakeRequestV0(mechanism="PLAIN"), 1, "raw")))
        size = struct.unpack(">i", recv_exactly(sock, 4))[0]
        recv_exactly(sock, size)
        sock.sendall(frame(b"\0alice\0alice-secret"))
        assert recv_exactly(sock, 4) == b"\0\0\0\0"  # PLAIN's empty challenge, as a bare frame
        request = MetadataRequest(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
        )
        sock.sendall(frame(encode_request(request, 2, "raw")))
        size = struct.unpack(">i", recv_exactly(sock, 4))[0]
        assert struct.unpack(">i", recv_exactly(sock, size)[:4])[0] == 2
    assert cluster.principals[-1] == KafkaPrincipal("User", "alice")


def test_handshake_v0_failure_closes_without_an_answer(cluster: Cluster) -> None:
    with socket.create_connection((HOST, cluster.port), timeout=TIMEOUT) as sock:
        sock.sendall(frame(encode_request(SaslHandshakeRequestV0(mechanism="PLAIN"), 1, "raw")))
        size = struct.unpack(">i", recv_exactly(sock, 4))[0]
        recv_exactly(sock, size)
        sock.sendall(frame(b"\0alice\0wrong"))
        assert sock.recv(16) == b""


def test_oversized_frame_before_authentication_closes(cluster: Cluster) -> None:
    with socket.create_connection((HOST, cluster.port), timeout=TIMEOUT) as sock:
        sock.sendall(struct.pack(">i", 524288 + 1))
        assert sock.recv(16) == b""


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {size} bytes")
        data += chunk
    return data


def test_plaintext_listener_keeps_anonymous_and_its_api_set() -> None:
    listener = KafkaListener(HOST, 0, handlers={3: Cluster().metadata}, supported={3: (0, 12)})
    assert 17 not in listener.supported and listener.security_protocol == "PLAINTEXT"
    sasl = KafkaListener(HOST, 0, handlers={3: Cluster().metadata}, sasl=sasl_config())
    assert sasl.supported[17] == (0, 1) and sasl.supported[36] == (0, 2)
    assert sasl.security_protocol == "SASL_PLAINTEXT"
    with pytest.raises(Zk2KraftError, match="SASL layer"):
        KafkaListener(HOST, 0, handlers={17: Cluster().metadata}, sasl=sasl_config())
    assert RequestContext(("h", 1), None, 0, 3, 12).principal == ANONYMOUS


# ---------------------------------------------------------------- the mechanisms on their own


def test_scram_sha_256_replays_rfc_7677s_example() -> None:
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    salted = hashlib.pbkdf2_hmac("sha256", b"pencil", salt, 4096)
    keys = scram_keys(1, salted)
    credential = StoredScramCredential(salt, keys.stored_key, keys.server_key, 4096)
    server = ScramServer(
        "SCRAM-SHA-256",
        lambda user, _: credential if user == "user" else None,
        nonce=lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
    )
    server_first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert (
        server_first
        == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    server_final = server.evaluate(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert server_final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.authorization_id == "user"


RFC_7677_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"


def test_scram_client_replays_rfc_7677s_example() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=lambda: "rOprNGfwEbeRWgbNEkqO")
    assert client.initial() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert client.evaluate(RFC_7677_SERVER_FIRST) == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert client.evaluate(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=") is None


@pytest.mark.parametrize(
    ("server_first", "server_final", "told"),
    [
        # A server that does not hold the user's keys cannot sign: the client refuses it.
        (RFC_7677_SERVER_FIRST, b"v=" + base64.b64encode(bytes(32)), "Invalid server signature"),
        (RFC_7677_SERVER_FIRST, b"e=other-error", "failed with error: other-error"),
        (b"r=someone-elses-nonce,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", None, "does not start with client nonce"),
        (RFC_7677_SERVER_FIRST.replace(b"i=4096", b"i=1024"), None, "Requested iterations 1024 is less"),
    ],
)
def test_scram_client_refuses_a_server_that_does_not_prove_itself(
    server_first: bytes, server_final: bytes | None, told: str
) -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=lambda: "rOprNGfwEbeRWgbNEkqO")
    client.initial()
    with pytest.raises(SaslCredentialError, match=told):
        client.evaluate(server_first)
        assert server_final is not None
        client.evaluate(server_final)


def test_scram_client_escapes_its_username_and_plain_sends_no_authorization_id() -> None:
    client = ScramClient("SCRAM-SHA-512", "a=b,c", "pw", nonce=lambda: "n0nce")
    assert client.initial() == b"n,,n=a=3Db=2Cc,r=n0nce"
    assert ScramClient("SCRAM-SHA-512", "a=b,c", "pw").initial() != client.initial()  # a fresh nonce each time
    plain = SaslLogin("PLAIN", "bob", "bob-secret").client()
    assert plain.initial() == b"\0bob\0bob-secret" and plain.evaluate(b"") is None
    assert "bob-secret" not in repr(SaslLogin("PLAIN", "bob", "bob-secret"))


def test_scram_failures_are_the_kinds_kafka_distinguishes() -> None:
    credential = stored_credential("SCRAM-SHA-256", "pw")
    low = credential._replace(iterations=4095)

    def server(found: StoredScramCredential | None = credential) -> ScramServer:
        return ScramServer("SCRAM-SHA-256", lambda user, mechanism: found)

    with pytest.raises(SaslCredentialError, match="Invalid user credentials"):
        server(None).evaluate(scram_client_first("ghost"))
    with pytest.raises(SaslAuthenticationError, match="authorization id that is different"):
        server().evaluate(b"n,a=root,n=alice,r=abc")
    with pytest.raises(SaslCredentialError, match="Iterations 4095 is less than the minimum 4096"):
        server(low).evaluate(scram_client_first("alice"))
    with pytest.raises(SaslCredentialError, match="client first message format"):
        server().evaluate(b"p=tls-unique,,n=alice,r=abc")
    with pytest.raises(SaslCredentialError, match="Token Authentication failed"):
        server().evaluate(b"n,,n=alice,r=abc,tokenauth=true")
    scram = server()
    first = scram_client_first("alice")
    server_first = scram.evaluate(first)
    wrong_nonce = scram_client_final("SCRAM-SHA-256", "pw", first, server_first).replace(b"r=fyko", b"r=xyko")
    with pytest.raises(SaslCredentialError, match="Invalid client nonce"):
        scram.evaluate(wrong_nonce)
    scram = server()
    server_first = scram.evaluate(first)
    with pytest.raises(SaslCredentialError, match="Invalid client credentials"):
        scram.evaluate(scram_client_final("SCRAM-SHA-256", "not-pw", first, server_first))
    scram = server()
    nonce = dict(item.split("=", 1) for item in scram.evaluate(first).decode().split(","))["r"]
    with pytest.raises(SaslProtocolError):  # a proof of the wrong length: IllegalArgumentException in Kafka
        scram.evaluate(f"c=biws,r={nonce},p=AAAA".encode())
    with pytest.raises(SaslProtocolError):
        scram.evaluate(first)  # the exchange failed; nothing more is evaluated


def test_scram_user_names_unescape_and_authzid_may_repeat_the_user() -> None:
    credential = stored_credential("SCRAM-SHA-512", "pw")
    seen: list[str] = []

    def find(user: str, mechanism: str) -> StoredScramCredential:
        seen.append(user)
        return credential

    ScramServer("SCRAM-SHA-512", find).evaluate(b"n,a=alice,n=alice,r=abc")
    ScramServer("SCRAM-SHA-512", find).evaluate(b"n,,n=a=2Cb=3Dc,r=abc")
    assert seen == ["alice", "a,b=c"]
    # Kafka compares the authzid as sent (still escaped) with the unescaped user name.
    with pytest.raises(SaslAuthenticationError):
        ScramServer("SCRAM-SHA-512", find).evaluate(b"n,a=a=2Cb=3Dc,n=a=2Cb=3Dc,r=abc")


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (b"alice", "expected 3 tokens, got 1"),
        (b"\0alice", "expected 3 tokens, got 2"),
        (b"\0alice\0pw\0extra", "expected 3 tokens, got 4"),
        (b"\0\0pw", "username not specified"),
        (b"\0alice\0", "password not specified"),
        (b"\0alice\0nope", "Invalid username or password"),
        (b"root\0alice\0alice-secret", "authorization id that is different from username"),
    ],
)
def test_plain_failures_carry_kafkas_messages(token: bytes, message: str) -> None:
    with pytest.raises(SaslAuthenticationError, match=message):
        PlainServer(PASSWORDS).evaluate(token)


def test_plain_accepts_an_authzid_equal_to_the_user() -> None:
    server = PlainServer(PASSWORDS)
    assert server.evaluate(b"alice\0alice\0alice-secret") == b""
    assert server.authorization_id == "alice"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.binary(max_size=200))
def test_arbitrary_tokens_only_raise_sasl_errors(first: bytes, second: bytes) -> None:
    for server in (PlainServer(PASSWORDS), ScramServer("SCRAM-SHA-256", lookup)):
        try:
            server.evaluate(first)
            server.evaluate(second)
        except Zk2KraftError:
            pass


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=120), max_size=5))
def test_arbitrary_frames_never_escape_the_authenticator(frames: list[bytes]) -> None:
    listener = KafkaListener(HOST, 0, handlers={3: Cluster().metadata}, sasl=sasl_config())
    assert listener.sasl is not None
    authenticator = listener.sasl.authenticator(listener._api_versions, listener.supported, "fuzz")
    for payload in frames:
        step = authenticator.receive(payload)
        if step.close:
            break


def test_image_lookup_reads_the_migrated_scram_records() -> None:
    image = MetadataImage()
    stored = CREDENTIALS[("alice", "SCRAM-SHA-512")]
    image.scram[("alice", 2)] = ScramCredential(stored.salt, stored.stored_key, stored.server_key, 4096)
    find = image_scram_credentials(lambda: image)
    assert find("alice", "SCRAM-SHA-512") == stored
    assert find("alice", "SCRAM-SHA-256") is None
    assert find("bob", "SCRAM-SHA-512") is None


def test_config_refuses_what_kafka_refuses() -> None:
    with pytest.raises(Zk2KraftError, match="No SASL mechanisms"):
        SaslConfig(mechanisms=())
    with pytest.raises(Zk2KraftError, match="GSSAPI"):
        SaslConfig(mechanisms=("GSSAPI",))
    with pytest.raises(Zk2KraftError, match="scram_credentials"):
        SaslConfig(mechanisms=("SCRAM-SHA-256",))
