"""`zk2kraft shim run`: a Kafka-protocol front door that answers reads from the followed metadata image and
forwards every metadata change to the active bridge controller, as a bridge-release broker does (KIP-590).

The shim presents itself to clients as the cluster's only broker and its controller (Metadata,
DescribeCluster), so admin clients send it everything. Reads (Metadata, DescribeCluster, DescribeConfigs,
DescribeAcls, DescribeClientQuotas, DescribeUserScramCredentials) come from the image a MetadataFollower keeps
by fetching the controller's log. Mutations go to the controller in EnvelopeRequests carrying the caller's
principal and address; the controller's answer is relayed once the image has caught up with the controller,
so a client reading right after its write sees it. AlterPartition (AlterIsr's successor) from brokers is sent
to the controller as-is, never enveloped (the controller refuses it in an envelope, as Kafka's does).

Authentication plugs in through the listener (`ssl_context`, `sasl`: the connection's principal reaches every
handler); authorization through `authorize(principal, host, operation, resource_type, name)` (per-item checks
on the read paths; default: allow) and `request_gate(ctx, request)` (request-wide refusals; default: none).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import ssl
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from kio.schema.errors import ErrorCode
from pydantic import BaseModel, ConfigDict, Field

from bridge.brokers.cluster import SUPPORTED as BROKER_API_VERSIONS
from bridge.brokers.cluster import UNREGISTER_BROKER
from bridge.handlers import (
    alter_partition_legacy,  # noqa: F401  (registers AlterPartition v0/v1 with the codec)
    authorize_items,
    reads,
)
from bridge.handlers.registry import load_handlers
from bridge.kafka.error_responses import error_response
from bridge.kafka.listener import Handler, KafkaListener, RequestContext
from bridge.kafka.protocol import MAX_REQUEST_BYTES, describe_api
from bridge.shim.follower import Address, MetadataFollower, format_address
from bridge.shim.forward import ControllerChannel, EnvelopeFailure, ForwardTimeoutError
from migrate.errors import InvalidRequestError, UnsupportedVersionError, Zk2KraftError

if TYPE_CHECKING:
    from bridge.kafka.sasl import SaslConfig

log = logging.getLogger(__name__)

API_VERSIONS: Final = 18
ALTER_PARTITION: Final = 56
# Kafka's forwardable ApiKeys the shim sends to the controller in an envelope (the controller's FORWARDABLE).
FORWARDED: Final = frozenset({19, 20, 30, 31, 33, 37, 43, 44, 45, 46, 49, 51, UNREGISTER_BROKER})
# Kafka 3.9's version ranges for the reads, cut to what kio defines.
READ_VERSIONS: Final[dict[int, tuple[int, int]]] = {
    **reads.IDENTITY_VERSIONS,
    reads.DESCRIBE_CONFIGS: (1, 4),
    reads.DESCRIBE_ACLS: (1, 3),
    reads.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    reads.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
}
API_VERSIONS_RANGE: Final = (0, 3)  # Kafka 3.9's ApiVersions
# Outside broker.id's usual range (reserved.broker.max.id is 1000 and generated ids follow it).
DEFAULT_NODE_ID: Final = 1_000_000
DEFAULT_REQUEST_TIMEOUT_S: Final = 30.0
CATCH_UP_TIMEOUT_S: Final = 5.0
WAITING_LOG_INTERVAL_S: Final = 10.0

# Request-wide refusal (e.g. authorizer.cluster_refusal): a response to send instead, or None to go on.
RequestGate = Callable[[RequestContext, Any], Any | None]


def parse_address(text: str, what: str = "address", *, allow_any_port: bool = False) -> Address:
    """`HOST:PORT` or `[IPv6]:PORT`; port 0 (any free port) only where `allow_any_port`."""
    host, sep, port = text.strip().rpartition(":")
    lowest = 0 if allow_any_port else 1
    if not sep or not host or not port.isdigit():
        raise InvalidRequestError(f"{what} {text!r} is not HOST:PORT")
    if not lowest <= int(port) < 65536:
        raise InvalidRequestError(f"{what} {text!r} is not HOST:PORT: the port must be {lowest} to 65535")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def parse_addresses(text: str, what: str = "address") -> list[Address]:
    """A comma-separated list of `HOST:PORT`."""
    found = [parse_address(part, what) for part in text.split(",") if part.strip()]
    if not found:
        raise InvalidRequestError(f"{what}: no HOST:PORT given")
    return found


class ShimConfig(BaseModel):
    """Everything `zk2kraft shim run` is told."""

    model_config = ConfigDict(frozen=True)

    controllers: list[tuple[str, int]] = Field(min_length=1, description="bridge controllers, tried in order")
    listen_host: str = "127.0.0.1"
    listen_port: int = Field(default=0, ge=0, le=65535)
    advertised_host: str | None = None
    advertised_port: int | None = Field(default=None, ge=1, le=65535)
    node_id: int = Field(default=DEFAULT_NODE_ID, ge=0, le=2**31 - 1)
    cluster_id: str | None = None
    max_request_bytes: int = Field(default=MAX_REQUEST_BYTES, ge=1024)
    request_timeout_s: float = Field(default=DEFAULT_REQUEST_TIMEOUT_S, gt=0)
    poll_interval_s: float = Field(default=0.2, gt=0)
    startup_catch_up_s: float = Field(default=30.0, ge=0)


@dataclass(slots=True)
class ShimStats:
    """Counts a test or status page can read."""

    forwarded: int = 0
    forward_failures: int = 0
    direct: int = 0
    reads: int = 0


class ShimServer:
    """One redirect shim: listener + metadata follower + controller channel. `start()`/`stop()` on a loop."""

    def __init__(
        self,
        config: ShimConfig,
        *,
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslConfig | None = None,
        authorize: reads.Authorize = reads.allow_all,
        request_gate: RequestGate | None = None,
    ) -> None:
        self.config = config
        self.ssl_context = ssl_context
        self.sasl = sasl
        self.authorize = authorize
        self.request_gate = request_gate
        self.stats = ShimStats()
        # Read-after-write: changes relayed so far, and how many of them the image is known to show.
        self._changes_forwarded = 0
        self._changes_visible = 0
        controllers = [(host, port) for host, port in config.controllers]
        self.follower = MetadataFollower(
            controllers, cluster_id=config.cluster_id, poll_interval=config.poll_interval_s
        )
        self.channel = ControllerChannel(controllers)
        self.listener: KafkaListener | None = None
        self._stop: asyncio.Event | None = None
        self._fronted_cache: tuple[tuple[int, int], tuple[int, ...]] | None = None

    # ------------------------------------------------------------------ lifecycle

    @property
    def port(self) -> int:
        if self.listener is None:
            raise Zk2KraftError("the shim is not listening yet")
        return self.listener.port

    @property
    def identity(self) -> reads.ShimIdentity:
        config = self.config
        return reads.ShimIdentity(
            node_id=config.node_id,
            host=config.advertised_host or config.listen_host,
            port=config.advertised_port or self.port,
            cluster_id=self.follower.cluster_id,
            fronted=self._fronted(),
        )

    def _fronted(self) -> tuple[int, ...]:
        """The brokers the shim answers for; recomputed only when the image moves on (it walks every partition)."""
        image = self.follower.image
        key = (id(image), self.follower.position)
        if self._fronted_cache is None or self._fronted_cache[0] != key:
            self._fronted_cache = (key, reads.fronted_brokers(image))
        return self._fronted_cache[1]

    @property
    def controllers_text(self) -> str:
        return ",".join(format_address(c) for c in self.config.controllers)

    async def start(self) -> int:
        """Claim --listen; follow the controller's log; wait for the cluster id and (bounded) the first
        catch-up; then listen. A busy --listen is refused before any of the waiting."""
        handlers, supported = self.handler_table()
        self.listener = KafkaListener(
            self.config.listen_host,
            self.config.listen_port,
            handlers,
            supported,
            self.config.max_request_bytes,
            ssl_context=self.ssl_context,
            sasl=self.sasl,
        )
        await self.listener.bind("--listen")
        self.follower.start()
        if self.config.startup_catch_up_s > 0 and not await self.follower.catch_up(
            self.config.startup_catch_up_s
        ):
            log.warning(
                "event=shim_not_caught_up controllers=%s last_error=%s; serving anyway (reads may be stale)",
                self.controllers_text, self.follower.last_error,
            )  # fmt: skip
        while self.follower.cluster_id is None:
            # Clients are told the cluster id in every Metadata answer (librdkafka crashes on a null one).
            log.warning(
                "event=shim_waiting_for_controller controllers=%s last_error=%s; not listening until a "
                "controller names the cluster (or give --cluster-id)",
                self.controllers_text, self.follower.last_error,
            )  # fmt: skip
            await self.follower.catch_up(WAITING_LOG_INTERVAL_S)
        port = await self.listener.start()
        log.info(
            "event=shim_listening listen=%s:%d advertised=%s:%d node_id=%d cluster_id=%s controllers=%s",
            self.config.listen_host, port, self.identity.host, self.identity.port, self.config.node_id,
            self.follower.cluster_id, self.controllers_text,
        )  # fmt: skip
        return port

    async def stop(self) -> None:
        if self.listener is not None:
            await self.listener.stop()
        await self.follower.stop()
        await self.channel.close()

    async def run(self, *, install_signals: bool = True) -> int:
        """Serve until SIGTERM/SIGINT (`zk2kraft shim run`); returns the exit code."""
        self._stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        if install_signals:
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(signum, self._stop.set)
        # A stop request ends the start-up too (which may wait for an unreachable controller).
        stopping = asyncio.ensure_future(self._stop.wait())
        try:
            starting = asyncio.ensure_future(self.start())
            await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if starting.done():
                starting.result()
                await stopping
            else:
                starting.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await starting
                log.warning(
                    "event=shim_stopped_before_serving controllers=%s last_error=%s; stopped while "
                    "waiting for a controller",
                    self.controllers_text, self.follower.last_error or "no answer yet",
                )  # fmt: skip
        finally:
            stopping.cancel()
            await self.stop()
        return 0

    def request_stop(self) -> None:
        if self._stop is not None:
            self._stop.set()

    def handler_table(self) -> tuple[dict[int, Handler], dict[int, tuple[int, int]]]:
        """Handlers and the version ranges ApiVersions advertises: exactly what the shim serves."""
        _controller_handlers, controller_versions = load_handlers()
        # UnregisterBroker is served by the controller's broker side, not by a handler.
        controller_versions[UNREGISTER_BROKER] = BROKER_API_VERSIONS[UNREGISTER_BROKER]
        handlers: dict[int, Handler] = {
            reads.METADATA: self._metadata,
            reads.DESCRIBE_CLUSTER: self._describe_cluster,
            reads.DESCRIBE_CONFIGS: self._describe_configs,
            reads.DESCRIBE_ACLS: self._describe_acls,
            reads.DESCRIBE_CLIENT_QUOTAS: self._describe_client_quotas,
            reads.DESCRIBE_USER_SCRAM_CREDENTIALS: self._describe_user_scram_credentials,
            ALTER_PARTITION: self._alter_partition,
        }
        supported = {**READ_VERSIONS, ALTER_PARTITION: controller_versions[ALTER_PARTITION]}
        for api_key in sorted(FORWARDED):
            handlers[api_key] = self._forward
            supported[api_key] = controller_versions[api_key]
        supported[API_VERSIONS] = API_VERSIONS_RANGE
        return {key: self._gated(handler) for key, handler in handlers.items()}, supported

    def use_acl_authorizer(
        self, *, super_users: tuple[str, ...] = (), allow_everyone_if_no_acl_found: bool = False
    ) -> authorize_items.FollowedAuthorizer:
        """Authorize by the followed image's ACLs (`--authorizer standard`): per-item checks and request-wide refusals."""
        authorizer = authorize_items.FollowedAuthorizer(
            self.follower,
            super_users=super_users,
            allow_everyone_if_no_acl_found=allow_everyone_if_no_acl_found,
        )
        self.authorize = authorizer
        self.request_gate = authorizer.gate
        return authorizer

    def _gated(self, handler: Handler) -> Handler:
        async def gated(ctx: RequestContext, body: Any) -> Any:
            # Answers and authorization from the image must see every change this shim forwarded before.
            if ctx.api_key in READ_VERSIONS or self.request_gate is not None or self.authorize is not reads.allow_all:
                await self._settle()
            if self.request_gate is not None:
                refusal = self.request_gate(ctx, body)
                if refusal is not None:
                    return refusal
            return await handler(ctx, body)

        return gated

    def _caller(self, ctx: RequestContext) -> reads.Caller:
        return reads.Caller(ctx.principal, ctx.peer[0], self.authorize)

    # ------------------------------------------------------------------ reads

    async def _metadata(self, ctx: RequestContext, body: Any) -> Any:
        self.stats.reads += 1
        return reads.metadata(self.identity, self.follower.image, body, ctx.api_version, self._caller(ctx))

    async def _describe_cluster(self, ctx: RequestContext, body: Any) -> Any:
        self.stats.reads += 1
        return reads.describe_cluster(self.identity, body, ctx.api_version)

    async def _describe_configs(self, ctx: RequestContext, body: Any) -> Any:
        self.stats.reads += 1
        return reads.describe_configs(self.follower.image, body, ctx.api_version, self._caller(ctx))

    async def _describe_acls(self, ctx: RequestContext, body: Any) -> Any:
        self.stats.reads += 1
        return reads.describe_acls(self.follower.image, body, ctx.api_version)

    async def _describe_client_quotas(self, ctx: RequestContext, body: Any) -> Any:
        self.stats.reads += 1
        return reads.describe_client_quotas(self.follower.image, body, ctx.api_version)

    async def _describe_user_scram_credentials(self, ctx: RequestContext, body: Any) -> Any:
        self.stats.reads += 1
        return reads.describe_user_scram_credentials(self.follower.image, body, ctx.api_version)

    # ------------------------------------------------------------------ writes

    def _timeout(self, body: Any) -> float:
        """The request's own timeout (CreateTopics, DeleteTopics, CreatePartitions) when positive, else the default."""
        value = getattr(body, "timeout", None)
        seconds = value.total_seconds() if value is not None else 0.0
        return seconds if seconds > 0 else self.config.request_timeout_s

    async def _forward(self, ctx: RequestContext, body: Any) -> Any:
        """Refused items out (authorize_items), the rest forwarded, their errors merged into the controller's answer."""
        if ctx.api_key not in authorize_items.CHECKED or self.authorize is reads.allow_all:
            return await self._forward_whole(ctx, body)
        caller = self._caller(ctx)
        part = authorize_items.split(ctx.api_key, ctx.api_version, body, caller, self.follower.image)
        if part.forward is None:
            log.info("event=request_refused peer=%s principal=%s api=%s", ctx.peer_text, ctx.principal,
                     describe_api(ctx.api_key, ctx.api_version))  # fmt: skip
            return authorize_items.merge(ctx.api_key, ctx.api_version, body, part, None, caller)
        response = await self._forward_whole(ctx, part.forward)
        return authorize_items.merge(ctx.api_key, ctx.api_version, body, part, response, caller)

    async def _forward_whole(self, ctx: RequestContext, body: Any) -> Any:
        """Forward in an envelope and relay the inner response; the next image read waits for the change."""
        timeout = self._timeout(body)
        try:
            result = await self.channel.forward(
                body, ctx.correlation_id, ctx.client_id, ctx.principal, ctx.peer[0], timeout
            )
        except ForwardTimeoutError as exc:
            self.stats.forward_failures += 1
            log.warning("event=forward_timeout peer=%s %s", ctx.peer_text, exc)
            return error_response(ctx.api_key, ctx.api_version, body, ErrorCode.request_timed_out)
        if isinstance(result, EnvelopeFailure):
            self.stats.forward_failures += 1
            what = describe_api(ctx.api_key, ctx.api_version)
            log.warning(
                "event=envelope_refused peer=%s api=%s error=%s", ctx.peer_text, what, result.error.name
            )
            if result.error == ErrorCode.unsupported_version:
                # ForwardingManager: an envelope-level UNSUPPORTED_VERSION closes the client's connection.
                raise UnsupportedVersionError(
                    f"the controller does not support {what} forwarded by this shim"
                )
            return error_response(ctx.api_key, ctx.api_version, body, ErrorCode.unknown_server_error)
        self.stats.forwarded += 1
        self._changes_forwarded += 1
        return result

    async def _alter_partition(self, ctx: RequestContext, body: Any) -> Any:
        """AlterPartition (AlterIsr in v0/v1) goes to the controller directly, as brokers send it."""
        timeout = self.config.request_timeout_s
        try:
            response = await self.channel.send_direct(body, timeout)
        except ForwardTimeoutError as exc:
            self.stats.forward_failures += 1
            log.warning("event=forward_timeout peer=%s %s", ctx.peer_text, exc)
            return error_response(ctx.api_key, ctx.api_version, body, ErrorCode.request_timed_out)
        self.stats.direct += 1
        self._changes_forwarded += 1
        return response

    async def _settle(self) -> None:
        """Catch the image up once per batch of forwarded changes, when something is about to read it.

        Waiting here instead of before relaying each answer keeps back-to-back writes at one hop's cost
        while every later read (or authorization) on this shim still sees them.
        """
        target = self._changes_forwarded
        if self._changes_visible >= target:
            return
        if await self.follower.catch_up(CATCH_UP_TIMEOUT_S):
            self._changes_visible = max(self._changes_visible, target)
        else:
            log.warning("event=catch_up_timeout the answer goes out before the image shows earlier changes")


async def run_shim(config: ShimConfig, **options: Any) -> int:
    """`zk2kraft shim run` in the foreground."""
    return await ShimServer(config, **options).run()


class ShimThread:
    """A ShimServer on its own event loop in a background thread, for synchronous code and tests."""

    def __init__(self, server: ShimServer, timeout: float = 60.0) -> None:
        self.server = server
        self.timeout = timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: Any = None

    def _call(self, work: Callable[[], Awaitable[Any]]) -> Any:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(work(), self._loop).result(self.timeout)  # type: ignore[arg-type]

    def start(self) -> int:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="zk2kraft-shim", daemon=True)
        self._thread.start()
        return int(self._call(self.server.start))

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None:
            return
        with contextlib.suppress(Exception):
            self._call(self.server.stop)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(self.timeout)
        if not thread.is_alive():
            loop.close()
        self._loop = self._thread = None

    def __enter__(self) -> int:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()
