"""A small Kafka-protocol client: send a kio request, get the decoded kio response (async and sync forms).

A connection may be TLS (an ssl.SSLContext) and may log in with SASL first, as Kafka's
SaslClientAuthenticator does: ApiVersions, SaslHandshake v1, then SaslAuthenticate until the mechanism is done.

Also builds Kafka's EnvelopeRequest (KIP-590 forwarding): the inner request's header + body bytes, the
principal as DefaultPrincipalData, and the client's raw IP address, and unwraps the inner response.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import itertools
import ssl
import struct
from dataclasses import dataclass
from importlib import metadata
from types import TracebackType
from typing import Any, Final

from kio.schema.api_versions.v0 import ApiVersionsRequest as ApiVersionsRequestV0
from kio.schema.api_versions.v3 import ApiVersionsRequest
from kio.schema.envelope.v0 import EnvelopeRequest, EnvelopeResponse
from kio.schema.errors import ErrorCode
from kio.schema.sasl_handshake.v1 import SaslHandshakeRequest

from bridge.kafka.protocol import (
    ANONYMOUS,
    KafkaPrincipal,
    decode_request_header,
    decode_response,
    describe_api,
    encode_principal,
    encode_request,
    read_frame,
    request_class,
    write_frame,
)
from bridge.kafka.sasl import SASL_AUTHENTICATE_KEY, SASL_HANDSHAKE_KEY
from bridge.kafka.sasl_mechanisms import SaslLogin
from migrate.errors import CorruptDataError, Zk2KraftError


def _installed_version() -> str:
    try:
        return metadata.version("zk2kraft")
    except metadata.PackageNotFoundError:
        return "unknown"


DEFAULT_CLIENT_ID: Final = "zk2kraft"
# ApiVersions v3's client software name and version (Kafka's brokers show them per connection).
CLIENT_SOFTWARE: Final = "zk2kraft"
CLIENT_VERSION: Final = _installed_version()
DEFAULT_TIMEOUT: Final = 30.0
# A sanity bound against reading a non-Kafka server's bytes as a huge size; real responses are far smaller.
MAX_RESPONSE_BYTES: Final = 1 << 30
# A request header starts with api key, api version and correlation id in every version.
_HEADER_START: Final = struct.Struct(">hhi")


SASL_AUTHENTICATE_MAX: Final = 2  # the newest SaslAuthenticate version Kafka 3.9 clients send


class ConnectionClosedError(Zk2KraftError):
    """The server refused, dropped or closed the connection before answering."""


class AuthenticationFailedError(ConnectionClosedError):
    """The server refused the TLS handshake or the SASL login (Kafka's AuthenticationException)."""


class TlsHandshakeError(AuthenticationFailedError):
    """The TLS handshake failed, or the server refused it with an alert (Kafka's SslAuthenticationException)."""


class KafkaConnection:
    """One TCP connection to a Kafka-protocol server; requests go one at a time with rising correlation ids."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        address: str,
        client_id: str | None = DEFAULT_CLIENT_ID,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        self.address = address
        self.client_id = client_id
        self.max_response_bytes = max_response_bytes
        self._reader = reader
        self._writer = writer
        self._correlation_ids = itertools.count()
        self._lock = asyncio.Lock()
        self._broken = False
        self._answered = False  # has the server answered anything on this connection yet

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        *,
        client_id: str | None = DEFAULT_CLIENT_ID,
        timeout: float = DEFAULT_TIMEOUT,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslLogin | None = None,
    ) -> KafkaConnection:
        """Connect to host:port (over TLS with `ssl_context`, e.g. one holding a client certificate), then log
        in with `sasl` when given; `timeout` bounds the whole of it."""
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        try:
            async with asyncio.timeout(timeout):
                try:
                    reader, writer = await asyncio.open_connection(host, port, ssl=ssl_context)
                except ssl.SSLError as exc:
                    raise TlsHandshakeError(
                        f"cannot connect to {address}: TLS handshake failed: {exc}"
                    ) from exc
                except OSError as exc:
                    raise ConnectionClosedError(f"cannot connect to {address}: {exc}") from exc
                connection = cls(reader, writer, address, client_id, max_response_bytes)
                if sasl is not None:
                    try:
                        await connection.authenticate(sasl, timeout)
                    except BaseException:
                        await connection.close()
                        raise
        except TimeoutError:
            raise ConnectionClosedError(
                f"cannot connect to {address}: no answer within {timeout} s"
            ) from None
        return connection

    async def authenticate(self, login: SaslLogin, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Kafka's SaslClientAuthenticator: ApiVersions, SaslHandshake v1 naming the mechanism, then
        SaslAuthenticate with each token until the mechanism is complete. A refusal raises
        AuthenticationFailedError with what the server said."""
        what = f"SASL/{login.mechanism} login to {self.address} as {login.username}"
        authenticate_version = await self._sasl_versions(what, timeout)
        handshake = await self.send(SaslHandshakeRequest(mechanism=login.mechanism), timeout=timeout)
        if handshake.error_code != ErrorCode.none:
            enabled = ", ".join(handshake.mechanisms)
            raise AuthenticationFailedError(
                f"{what} failed: {handshake.error_code.name.upper()}: the broker's listener enables "
                f"[{enabled}], not {login.mechanism}"
            )
        mechanism = login.client()
        authenticate = request_class(SASL_AUTHENTICATE_KEY, authenticate_version)
        token: bytes | None = mechanism.initial()
        while token is not None:
            reply = await self.send(authenticate(auth_bytes=token), timeout=timeout)
            if reply.error_code != ErrorCode.none:
                raise AuthenticationFailedError(
                    f"{what} failed: {reply.error_code.name.upper()}: {reply.error_message}"
                )
            try:
                token = mechanism.evaluate(bytes(reply.auth_bytes))
            except Zk2KraftError as exc:
                raise AuthenticationFailedError(f"{what} failed: {exc}") from exc

    async def _sasl_versions(self, what: str, timeout: float) -> int:
        """The SaslAuthenticate version to use, from the server's ApiVersions (v3, else v0 as Kafka retries)."""
        versions = await self.send(
            ApiVersionsRequest(client_software_name=CLIENT_SOFTWARE, client_software_version=CLIENT_VERSION),
            timeout=timeout,
        )
        if versions.error_code == ErrorCode.unsupported_version:
            versions = await self.send(ApiVersionsRequestV0(), timeout=timeout)
        if versions.error_code != ErrorCode.none:
            raise AuthenticationFailedError(
                f"{what} failed: ApiVersions answered {versions.error_code.name.upper()}"
            )
        ranges = {int(api.api_key): (int(api.min_version), int(api.max_version)) for api in versions.api_keys}
        handshake = ranges.get(SASL_HANDSHAKE_KEY)
        authenticate = ranges.get(SASL_AUTHENTICATE_KEY)
        if handshake is None or handshake[1] < 1 or authenticate is None:
            raise AuthenticationFailedError(
                f"{what} failed: the server does not serve SaslHandshake v1 and SaslAuthenticate "
                "(not a SASL listener of a Kafka broker of 1.0 or later)"
            )
        return min(authenticate[1], SASL_AUTHENTICATE_MAX)

    async def send(
        self, request: Any, *, api_version: int | None = None, timeout: float = DEFAULT_TIMEOUT
    ) -> Any:
        """Send one kio request and return the decoded kio response.

        `api_version` overrides the version in the header (default: the request class's); a server answers
        an ApiVersions version it lacks with a v0 response, which is decoded as such.
        """
        api_key = int(request.__api_key__)
        version = int(request.__version__) if api_version is None else api_version
        async with self._lock:
            correlation_id = next(self._correlation_ids)
            payload = encode_request(request, correlation_id, self.client_id, api_version)
            reply = await self._exchange(payload, describe_api(api_key, version), timeout)
        return self._decode(reply, api_key, version, correlation_id)

    async def send_encoded(self, payload: bytes, *, timeout: float = DEFAULT_TIMEOUT) -> Any:
        """Send one request encoded ahead (header + body, no size prefix) and return the decoded response.

        The payload's own correlation id is the one the response must carry; the connection's counter is
        not used, so the same bytes may be sent again on a new connection.
        """
        if len(payload) < _HEADER_START.size:
            raise CorruptDataError(
                f"request to {self.address}", 0, f"request of {len(payload)} bytes has no complete header"
            )
        api_key, version, correlation_id = _HEADER_START.unpack_from(payload)
        async with self._lock:
            reply = await self._exchange(payload, describe_api(api_key, version), timeout)
        return self._decode(reply, api_key, version, correlation_id)

    def _decode(self, reply: bytes, api_key: int, version: int, correlation_id: int) -> Any:
        source = f"response from {self.address} to {describe_api(api_key, version)}"
        response_id, response = decode_response(reply, api_key, version, source)
        if response_id != correlation_id:
            raise CorruptDataError(source, 0, f"correlation id {response_id}, expected {correlation_id}")
        return response

    async def _exchange(self, payload: bytes, api: str, timeout: float) -> bytes:
        """Under the lock: write `payload`, read one answer (`api` names the request in errors)."""
        what = f"{api} to {self.address}"
        if self._broken:
            raise ConnectionClosedError(f"{what}: the connection failed earlier")
        try:
            await asyncio.wait_for(write_frame(self._writer, payload), timeout)
            reply = await asyncio.wait_for(
                read_frame(self._reader, self.max_response_bytes, f"response to {what}"), timeout
            )
        except TimeoutError:
            self._broken = True
            raise ConnectionClosedError(f"{what}: no response within {timeout} s") from None
        except ssl.SSLError as exc:  # a TLS alert: e.g. TLS 1.3's refusal of the client certificate
            self._broken = True
            raise TlsHandshakeError(f"{what}: {exc}{self._refusal_hint()}") from exc
        except OSError as exc:
            self._broken = True
            raise ConnectionClosedError(f"{what}: {exc}{self._refusal_hint()}") from exc
        except CorruptDataError:
            self._broken = True
            raise
        if reply is None:
            self._broken = True
            hint = self._refusal_hint()
            raise ConnectionClosedError(f"{what}: the server closed the connection without answering{hint}")
        self._answered = True
        return reply

    def _refusal_hint(self) -> str:
        """Why a first request over TLS may meet a closed or reset connection."""
        if self._answered or self._writer.get_extra_info("ssl_object") is None:
            return ""
        # TLS 1.3 ends the handshake before the server judges the client certificate: its refusal may reach
        # the client only as a closed (or, mid-write, reset) connection.
        return (
            " (over TLS, first request: a server that requires a client certificate and got none, or one it "
            "does not trust, closes like this)"
        )

    async def close(self) -> None:
        self._broken = True
        self._writer.close()
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()

    def abort(self) -> None:
        """Drop the connection now, unsent bytes included: `close` waits for a peer that stopped reading."""
        self._broken = True
        self._writer.transport.abort()

    async def __aenter__(self) -> KafkaConnection:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


async def send_request(
    host: str,
    port: int,
    request: Any,
    api_version: int | None = None,
    client_id: str | None = DEFAULT_CLIENT_ID,
    *,
    timeout: float = DEFAULT_TIMEOUT,
) -> Any:
    """Open a connection, send one kio request, return the decoded response, close."""
    connection = await KafkaConnection.open(host, port, client_id=client_id, timeout=timeout)
    async with connection:
        return await connection.send(request, api_version=api_version, timeout=timeout)


def send_request_sync(
    host: str,
    port: int,
    request: Any,
    api_version: int | None = None,
    client_id: str | None = DEFAULT_CLIENT_ID,
    *,
    timeout: float = DEFAULT_TIMEOUT,
) -> Any:
    """`send_request` for synchronous code (runs its own event loop)."""
    return asyncio.run(send_request(host, port, request, api_version, client_id, timeout=timeout))


# ---------------------------------------------------------------- EnvelopeRequest


@dataclass(frozen=True, slots=True)
class EnvelopeResult:
    """An EnvelopeResponse and, when it carries one, the inner response decoded for the inner request."""

    error_code: ErrorCode
    response_data: bytes | None
    inner_correlation_id: int | None
    inner_response: Any | None


def build_envelope(
    request_data: bytes, principal: KafkaPrincipal, client_host_address: str | bytes
) -> EnvelopeRequest:
    """EnvelopeRequest v0 as Kafka's ForwardingManager builds it (request_data = inner header + body)."""
    if isinstance(client_host_address, str):
        try:
            address = ipaddress.ip_address(client_host_address).packed
        except ValueError as exc:
            raise Zk2KraftError(f"envelope client address {client_host_address!r}: {exc}") from None
    else:
        address = client_host_address
    if len(address) not in (4, 16):
        raise Zk2KraftError(f"envelope client address must be 4 or 16 bytes, got {len(address)}")
    return EnvelopeRequest(
        request_data=request_data,
        request_principal=encode_principal(principal),
        client_host_address=address,
    )


async def send_envelope(
    host: str,
    port: int,
    request_data: bytes,
    *,
    principal: KafkaPrincipal = ANONYMOUS,
    client_host_address: str | bytes = "127.0.0.1",
    client_id: str | None = DEFAULT_CLIENT_ID,
    timeout: float = DEFAULT_TIMEOUT,
) -> EnvelopeResult:
    """Forward a serialized request (header + body bytes) in an EnvelopeRequest and unwrap the answer."""
    inner_header, _ = decode_request_header(request_data, "envelope request data")
    inner_key = int(inner_header.request_api_key)
    inner_version = int(inner_header.request_api_version)
    envelope = build_envelope(request_data, principal, client_host_address)
    response: EnvelopeResponse = await send_request(
        host, port, envelope, client_id=client_id, timeout=timeout
    )
    if response.response_data is None:
        return EnvelopeResult(response.error_code, None, None, None)
    source = f"envelope response data from {host}:{port}"
    expected = int(inner_header.correlation_id)
    inner = unwrap_envelope_response(response.response_data, inner_key, inner_version, expected, source)
    return EnvelopeResult(response.error_code, response.response_data, expected, inner)


def unwrap_envelope_response(
    data: bytes, api_key: int, api_version: int, correlation_id: int, source: str
) -> Any:
    """The inner response an EnvelopeResponse carries, checked to answer the request with `correlation_id`."""
    inner_id, body = decode_response(data, api_key, api_version, source)
    if inner_id != correlation_id:
        raise CorruptDataError(source, 0, f"inner correlation id {inner_id}, expected {correlation_id}")
    return body


def send_envelope_sync(
    host: str,
    port: int,
    request_data: bytes,
    *,
    principal: KafkaPrincipal = ANONYMOUS,
    client_host_address: str | bytes = "127.0.0.1",
    client_id: str | None = DEFAULT_CLIENT_ID,
    timeout: float = DEFAULT_TIMEOUT,
) -> EnvelopeResult:
    """`send_envelope` for synchronous code (runs its own event loop)."""
    return asyncio.run(
        send_envelope(
            host,
            port,
            request_data,
            principal=principal,
            client_host_address=client_host_address,
            client_id=client_id,
            timeout=timeout,
        )
    )
