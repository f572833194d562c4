"""An asyncio Kafka-protocol server: one handler per api key, ApiVersions answered from what is registered.

Per connection, requests are handled one at a time and answered in order (Kafka mutes a channel while its
request is in flight). A connection that sends an oversized, malformed or unsupported request is logged
and closed; other connections are not affected. Optionally TLS (an ssl.SSLContext; a client certificate
makes the principal `User:<subject DN>`, mapped by `principal_mapper`'s ssl.principal.mapping.rules) and SASL (bridge.kafka.sasl.SaslConfig: the connection must
authenticate before any request reaches a handler; the principal is the SASL user).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import socket
import ssl
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from types import TracebackType
from typing import Any, Final

from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType
from kio.static.primitive import i16, i64

from bridge.kafka.protocol import (
    ANONYMOUS,
    API_VERSIONS_KEY,
    MAX_REQUEST_BYTES,
    DecodedRequest,
    KafkaPrincipal,
    decode_request,
    describe_api,
    encode_response,
    frame,
    known_versions,
    read_frame,
    unwrap_response,
    write_frame,
)
from bridge.kafka.sasl import SaslConfig
from bridge.kafka.tls import SslPrincipalMapper, ssl_principal
from bridge.stopping import cancelled
from migrate.errors import InvalidRequestError, Zk2KraftError

log = logging.getLogger(__name__)

# Kafka's connections.max.idle.ms default.
IDLE_TIMEOUT_SECONDS: Final = 600.0
# ApiVersionsRequest.isValid (v3+): the client software name and version must look like this.
_SOFTWARE_PATTERN: Final = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


@dataclass(slots=True)
class RequestContext:
    """What a handler knows about a request besides its body."""

    peer: tuple[str, int]
    client_id: str | None
    correlation_id: int
    api_key: int
    api_version: int
    # Who authenticated the connection (SASL user, TLS client certificate DN); ANONYMOUS on PLAINTEXT.
    principal: KafkaPrincipal = ANONYMOUS
    # The listener's address the client connected to (what it can reach this server at).
    local: tuple[str, int] = ("", 0)

    @property
    def peer_text(self) -> str:
        return _peer_text(self.peer)


# `async def handle(ctx, request) -> response` (None: send no response, like Produce with acks=0).
Handler = Callable[[RequestContext, Any], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class ApiVersionsFeatures:
    """Feature data an ApiVersions v3+ response carries (a KRaft controller's metadata.version, ...)."""

    supported: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    finalized: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    finalized_epoch: int = -1
    zk_migration_ready: bool = False


def bind_refusal(option: str, host: str, port: int, exc: OSError) -> InvalidRequestError:
    """The error for an address a server cannot bind: the option and address, and why."""
    shown = f"[{host}]" if ":" in host else host
    if isinstance(exc, socket.gaierror):
        # getaddrinfo's codes are not errno values: os.strerror(-2) would say "Unknown error -2".
        return InvalidRequestError(
            f"cannot listen on {option} {shown}:{port}: the host {host!r} could not be resolved "
            f"({exc.strerror or exc}); give an address or a name this machine resolves"
        )
    reason = os.strerror(exc.errno) if exc.errno else str(exc)
    return InvalidRequestError(
        f"cannot listen on {option} {shown}:{port}: {reason}; stop what holds that address or choose "
        f"another {option}"
    )


class KafkaListener:
    """A Kafka-protocol TCP listener dispatching decoded kio requests to async handlers by api key."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        handlers: Mapping[int, Handler] | None = None,
        supported: Mapping[int, tuple[int, int]] | None = None,
        max_request_bytes: int = MAX_REQUEST_BYTES,
        *,
        features: Callable[[], ApiVersionsFeatures] | None = None,
        idle_timeout: float = IDLE_TIMEOUT_SECONDS,
        backlog: int = 1024,
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslConfig | None = None,
        principal_mapper: SslPrincipalMapper | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.handlers = dict(handlers or {})
        if API_VERSIONS_KEY in self.handlers:
            raise Zk2KraftError("ApiVersions (api key 18) is answered by the listener; register no handler")
        self.ssl_context = ssl_context
        self.sasl = sasl
        self.principal_mapper = principal_mapper
        if sasl is not None:
            # The SASL apis are the listener's own: served before authentication, refused after it.
            sasl_handlers = sasl.handlers()
            taken = sorted(set(sasl_handlers) & set(self.handlers))
            if taken:
                raise Zk2KraftError(
                    f"api keys {taken} are answered by the listener's SASL layer; register no handler"
                )
            self.handlers.update(sasl_handlers)
            if supported is not None:
                supported = {**supported, **sasl.supported()}
        self.supported = _checked_ranges(self.handlers, supported)
        self.max_request_bytes = max_request_bytes
        self.features = features
        self.idle_timeout = idle_timeout
        self.backlog = backlog
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._answering = 0  # requests being answered now (read, not yet written back)

    # ------------------------------------------------------------ lifecycle

    async def bind(self, option: str = "--listen") -> int:
        """Claim the address without accepting yet, so a busy port is refused (naming `option`) before a
        caller changes anything; returns the bound port (useful with port 0)."""
        if self._server is None:
            try:
                self._server = await asyncio.start_server(
                    self._serve, self.host, self.port, backlog=self.backlog, ssl=self.ssl_context,
                    start_serving=False,
                )  # fmt: skip
            except OSError as exc:
                raise bind_refusal(option, self.host, self.port, exc) from exc
            self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def start(self) -> int:
        """Start listening (binding first unless `bind` did); returns the bound port (useful with port 0)."""
        await self.bind()
        assert self._server is not None
        await self._server.start_serving()
        log.info(
            "Kafka listener on %s:%d (%s, apis %s)",
            self.host,
            self.port,
            self.security_protocol,
            sorted(self.supported),
        )
        return self.port

    async def stop(self, answer_within_s: float = 0.0) -> None:
        """Stop accepting, let requests being answered finish for up to `answer_within_s`, then close every
        open connection and wait for their tasks to end."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        deadline = time.monotonic() + answer_within_s
        while self._answering and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await asyncio.gather(*(cancelled(task) for task in list(self._connections)))
        # Only after the connections end: from Python 3.12 on, wait_closed also waits for them.
        if server is not None:
            await server.wait_closed()

    async def __aenter__(self) -> KafkaListener:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    @property
    def open_connections(self) -> int:
        return len(self._connections)

    @property
    def security_protocol(self) -> str:
        """Kafka's name of what this listener speaks: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."""
        transport = "SSL" if self.ssl_context is not None else "PLAINTEXT"
        return transport if self.sasl is None else f"SASL_{transport}"

    # ------------------------------------------------------------ connections

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peer = _peer(writer)
        local = _peer(writer, "sockname")
        source = f"connection from {_peer_text(peer)}"
        try:
            if self.sasl is not None:
                authenticated = await self._authenticate(reader, writer, source, self.sasl)
                if authenticated is None:
                    return
                principal = authenticated
            else:
                principal = _tls_principal(writer, self.principal_mapper)
            while True:
                async with asyncio.timeout(self.idle_timeout):
                    payload = await read_frame(reader, self.max_request_bytes, source)
                if payload is None:
                    break
                self._answering += 1
                try:
                    response = await self._answer(peer, payload, source, principal, local)
                    if response is not None:
                        await write_frame(writer, response)
                finally:
                    self._answering -= 1
                if self._server is None:
                    # Stopping: the grace is for requests in flight, not for the next one a client sends.
                    break
        except Zk2KraftError as exc:
            # Decode errors already start with `source`; say it once.
            log.warning("closing %s: %s", source, str(exc).removeprefix(source).lstrip(": "))
        except TimeoutError:
            log.info("closing %s: idle for %.0f s", source, self.idle_timeout)
        except (ConnectionError, OSError) as exc:
            log.info("closing %s: %s", source, exc)
        except asyncio.CancelledError:
            pass
        except Exception:
            # A handler bug must not take the listener down; the client sees a closed connection.
            log.exception("closing %s: request handling failed", source)
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _authenticate(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, source: str, sasl: SaslConfig
    ) -> KafkaPrincipal | None:
        """Run the SASL exchange; the authenticated principal, or None once the connection must close."""
        authenticator = sasl.authenticator(self._api_versions, self.supported, source)
        # sasl.server.max.receive.size bounds every frame until authentication completes.
        limit = min(self.max_request_bytes, sasl.max_receive_size)
        while True:
            async with asyncio.timeout(self.idle_timeout):
                payload = await read_frame(reader, limit, source)
            if payload is None:
                return None
            step = authenticator.receive(payload)
            if step.response is not None:
                writer.write(frame(step.response))
                await writer.drain()
            if step.close:
                log.info("closing %s: %s", source, step.reason)
                return None
            if step.principal is not None:
                log.debug("%s authenticated as %s", source, step.principal)
                return step.principal

    async def _answer(
        self,
        peer: tuple[str, int],
        payload: bytes,
        source: str,
        principal: KafkaPrincipal = ANONYMOUS,
        local: tuple[str, int] = ("", 0),
    ) -> bytes | None:
        request = decode_request(payload, source, self.supported)
        if request.api_key == API_VERSIONS_KEY:
            return encode_response(request.correlation_id, self._api_versions(request))
        context = RequestContext(
            peer=peer,
            client_id=request.client_id,
            correlation_id=request.correlation_id,
            api_key=request.api_key,
            api_version=request.api_version,
            principal=principal,
            local=local,
        )
        answer = await self.handlers[request.api_key](context, request.body)
        if answer is None:
            return None
        response = unwrap_response(answer)
        if (int(response.__api_key__), int(response.__version__)) != (request.api_key, request.api_version):
            what = describe_api(request.api_key, request.api_version)
            raise Zk2KraftError(
                f"the {what} handler answered with {type(response).__name__} "
                f"v{response.__version__} (api key {response.__api_key__})"
            )
        return encode_response(request.correlation_id, answer)

    # ------------------------------------------------------------ ApiVersions

    def _api_versions(self, request: DecodedRequest) -> Any:
        low, high = self.supported[API_VERSIONS_KEY]
        if request.body is None:
            # Kafka answers an unsupported ApiVersions version with v0, UNSUPPORTED_VERSION and its own range.
            return api_versions_response(0, ErrorCode.unsupported_version, {API_VERSIONS_KEY: (low, high)})
        version = request.api_version
        if version >= 3 and not all(
            _SOFTWARE_PATTERN.fullmatch(text)
            for text in (request.body.client_software_name, request.body.client_software_version)
        ):
            return api_versions_response(version, ErrorCode.invalid_request, {})
        features = self.features() if self.features is not None else None
        return api_versions_response(version, ErrorCode.none, self.supported, features)


def api_versions_response(
    version: int,
    error: ErrorCode,
    ranges: Mapping[int, tuple[int, int]],
    features: ApiVersionsFeatures | None = None,
) -> Any:
    """An ApiVersionsResponse of `version` listing `ranges` by api key, with v3+ feature fields."""
    module = load_payload_module(API_VERSIONS_KEY, version, EntityType.response)
    values: dict[str, Any] = {
        "error_code": error,
        "api_keys": tuple(
            module.ApiVersion(api_key=i16(key), min_version=i16(low), max_version=i16(high))
            for key, (low, high) in sorted(ranges.items())
        ),
    }
    if version >= 1:
        values["throttle_time"] = timedelta(0)
    if version >= 3 and features is not None:
        values["supported_features"] = tuple(
            module.SupportedFeatureKey(name=name, min_version=i16(low), max_version=i16(high))
            for name, (low, high) in sorted(features.supported.items())
            # Before v4 a feature whose minimum is 0 is left out (KAFKA-17011).
            if version >= 4 or low != 0
        )
        values["finalized_features_epoch"] = i64(features.finalized_epoch)
        values["finalized_features"] = tuple(
            module.FinalizedFeatureKey(name=name, min_version_level=i16(low), max_version_level=i16(high))
            for name, (low, high) in sorted(features.finalized.items())
        )
        values["zk_migration_ready"] = features.zk_migration_ready
    return module.ApiVersionsResponse(**values)


def _checked_ranges(
    handlers: Mapping[int, Handler], supported: Mapping[int, tuple[int, int]] | None
) -> dict[int, tuple[int, int]]:
    """The version ranges to advertise: one per handler plus ApiVersions, each fully defined in kio."""
    ranges: dict[int, tuple[int, int]] = {}
    for api_key in [*handlers, API_VERSIONS_KEY]:
        versions = known_versions(api_key)
        if supported is not None and api_key in supported:
            low, high = supported[api_key]
        elif supported is not None and api_key != API_VERSIONS_KEY:
            raise Zk2KraftError(f"a handler is registered for api key {api_key} but no version range is")
        elif not versions:
            raise Zk2KraftError(f"api key {api_key} has no schema in kio; register_api its classes first")
        else:
            low, high = versions[0], versions[-1]
        missing = [v for v in range(low, high + 1) if v not in versions]
        if low > high or missing:
            raise Zk2KraftError(
                f"cannot advertise {describe_api(api_key, low)}..v{high}: no schema for versions {missing}"
            )
        ranges[api_key] = (low, high)
    extra = set(supported or {}) - set(ranges)
    if extra:
        raise Zk2KraftError(f"version ranges given for api keys without a handler: {sorted(extra)}")
    return ranges


def _tls_principal(writer: asyncio.StreamWriter, mapper: SslPrincipalMapper | None) -> KafkaPrincipal:
    ssl_object = writer.get_extra_info("ssl_object")
    if ssl_object is None:
        return ANONYMOUS
    return ssl_principal(ssl_object, mapper)


def _peer(writer: asyncio.StreamWriter, which: str = "peername") -> tuple[str, int]:
    address = writer.get_extra_info(which)
    if isinstance(address, tuple) and len(address) >= 2:
        return str(address[0]), int(address[1])
    return "unknown", 0


def _peer_text(peer: tuple[str, int]) -> str:
    return f"[{peer[0]}]:{peer[1]}" if ":" in peer[0] else f"{peer[0]}:{peer[1]}"


class ListenerThread:
    """Runs a KafkaListener on its own event loop in a background thread, for synchronous code and tests."""

    def __init__(self, listener: KafkaListener, timeout: float = 60.0) -> None:
        self.listener = listener
        self.timeout = timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> int:
        """Start the loop thread and the listener; returns the bound port."""
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="kafka-listener", daemon=True)
        self._thread.start()
        try:
            return asyncio.run_coroutine_threadsafe(self.listener.start(), loop).result(self.timeout)
        except BaseException:
            self._shut_loop()
            raise

    def stop(self) -> None:
        """Stop the listener (closing its connections) and the loop thread."""
        if self._loop is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self.listener.stop(), self._loop).result(self.timeout)
        finally:
            self._shut_loop()

    def _shut_loop(self) -> None:
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(self.timeout)
        if not thread.is_alive():
            loop.close()

    def __enter__(self) -> int:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
