"""The shim's channel to the controllers: forward requests in EnvelopeRequests (KIP-590) or send them as-is.

Like a bridge-release broker's ForwardingManager / NodeToControllerChannelManager: the inner request is
re-serialised with the client's own header (correlation id, client id), wrapped with the caller's principal
and address, and sent to the active controller; an envelope answered NOT_CONTROLLER, or a lost connection,
sends it to the next controller in the list until the request's time is up. AlterPartition is not
forwardable: brokers send it directly, and so does the shim.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from kio.schema.envelope.v0 import EnvelopeResponse
from kio.schema.errors import ErrorCode

from bridge.kafka.client import (
    ConnectionClosedError,
    KafkaConnection,
    build_envelope,
    unwrap_envelope_response,
)
from bridge.kafka.protocol import KafkaPrincipal, describe_api, encode_request
from bridge.kafka.sasl_mechanisms import SaslLogin
from bridge.shim.follower import Address, format_address
from migrate.errors import CorruptDataError, Zk2KraftError

log = logging.getLogger(__name__)

CLIENT_ID: Final = "zk2kraft-shim"
POOL_SIZE: Final = 8
RETRY_BACKOFF: Final = 0.05
MAX_RETRY_BACKOFF: Final = 1.0


class ForwardTimeoutError(Zk2KraftError):
    """No controller took the request within its time (the client gets REQUEST_TIMED_OUT)."""


@dataclass(frozen=True, slots=True)
class EnvelopeFailure:
    """The controller refused the envelope itself (not NOT_CONTROLLER, which is retried)."""

    error: ErrorCode


class ControllerChannel:
    """Pooled connections to the controllers; remembers which one answered last as the active one."""

    def __init__(
        self,
        controllers: Sequence[Address],
        *,
        client_id: str = CLIENT_ID,
        pool_size: int = POOL_SIZE,
        connect_timeout: float = 5.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        if not controllers:
            raise Zk2KraftError("the shim needs at least one controller address (--controller)")
        self.controllers = list(controllers)
        self.client_id = client_id
        self.connect_timeout = connect_timeout
        # TLS to the controllers (a client certificate authenticates the shim as an Envelope sender).
        self.ssl_context = ssl_context
        # The SASL login when the controllers' listener asks for one (it names the shim as an Envelope sender).
        self.sasl: SaslLogin | None = None
        self._active = 0
        self._idle: dict[int, list[KafkaConnection]] = {}
        self._slots = asyncio.Semaphore(pool_size)

    @property
    def active(self) -> str:
        return format_address(self.controllers[self._active])

    async def close(self) -> None:
        idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                await connection.close()

    # ------------------------------------------------------------------ forwarding

    async def forward(
        self, request: Any, correlation_id: int, client_id: str | None, principal: KafkaPrincipal,
        client_address: str, timeout: float,
    ) -> Any | EnvelopeFailure:  # fmt: skip
        """Forward `request` in an envelope; the controller's inner response (decoded), or the envelope's error."""
        api_key, version = int(request.__api_key__), int(request.__version__)
        inner = encode_request(request, correlation_id, client_id)
        envelope = build_envelope(inner, principal, _address_bytes(client_address))
        what = describe_api(api_key, version)

        def retry_on(response: Any) -> bool:
            return bool(response.error_code == ErrorCode.not_controller)

        response: EnvelopeResponse = await self._send(envelope, timeout, what, retry_on)
        if response.error_code != ErrorCode.none:
            return EnvelopeFailure(response.error_code)
        if response.response_data is None:
            raise CorruptDataError(f"envelope response to {what}", 0, "no error and no response data")
        source = f"envelope response data from {self.active} to {what}"
        return unwrap_envelope_response(response.response_data, api_key, version, correlation_id, source)

    async def send_direct(self, request: Any, timeout: float) -> Any:
        """Send `request` itself (AlterPartition); a top-level NOT_CONTROLLER moves on to the next controller."""
        what = describe_api(int(request.__api_key__), int(request.__version__))

        def retry_on(response: Any) -> bool:
            return getattr(response, "error_code", None) == ErrorCode.not_controller

        return await self._send(request, timeout, what, retry_on)

    async def _send(self, request: Any, timeout: float, what: str, retry_on: Any) -> Any:
        deadline = time.monotonic() + timeout
        backoff = RETRY_BACKOFF
        tried = 0
        last_problem = "no controller was tried"
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ForwardTimeoutError(
                    f"{what}: no controller answered within {timeout:.1f} s ({last_problem})"
                )
            index = self._active
            try:
                response = await self._exchange(index, request, left)
            except ConnectionClosedError as exc:
                last_problem = str(exc)
            else:
                if not retry_on(response):
                    return response
                last_problem = f"{format_address(self.controllers[index])} is not the active controller"
            # Another controller may have taken over: try the next one, pausing after a full round.
            if self._active == index:
                self._active = (index + 1) % len(self.controllers)
            tried += 1
            if tried % len(self.controllers) == 0:
                await asyncio.sleep(min(backoff, max(deadline - time.monotonic(), 0)))
                backoff = min(backoff * 2, MAX_RETRY_BACKOFF)

    async def _exchange(self, index: int, request: Any, timeout: float) -> Any:
        async with self._slots:
            idle = self._idle.get(index)
            if idle:
                connection = idle.pop()
                try:
                    return await self._use(index, connection, request, timeout)
                except ConnectionClosedError:
                    # A pooled connection the controller closed meanwhile (idle timeout): one fresh attempt.
                    pass
            host, port = self.controllers[index]
            connection = await KafkaConnection.open(
                host,
                port,
                client_id=self.client_id,
                timeout=min(timeout, self.connect_timeout),
                ssl_context=self.ssl_context,
                sasl=self.sasl,
            )
            return await self._use(index, connection, request, timeout)

    async def _use(self, index: int, connection: KafkaConnection, request: Any, timeout: float) -> Any:
        try:
            response = await connection.send(request, timeout=timeout)
        except BaseException:
            with contextlib.suppress(Exception):
                await connection.close()
            raise
        self._idle.setdefault(index, []).append(connection)
        return response


def _address_bytes(address: str) -> bytes:
    """The client's raw IP address for the envelope (0.0.0.0 when the peer is not an IP, e.g. a unix socket)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return bytes(4)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped.packed
    return ip.packed
