"""Kafka's ControllerChannelManager, and the MigrationPropagator's side that the driver calls: the bridge's
LeaderAndIsr / UpdateMetadata / StopReplica requests to ZooKeeper-mode brokers (controller-broker.md §1.2-1.7).

One serial pipeline, in publish order: an event (a full sync, or one published batch) takes a
`sync_view` of the image on the event loop; a worker thread builds its requests and encodes them; back on
the loop, membership is re-diffed from that view (remove, then add) and the requests go to the members'
queues. Each member has one ordered queue and one task with at most one request in flight. A network
failure closes the connection, waits (100 ms, doubling on each consecutive failure up to 1 s, as Kafka's
NetworkClient backs off) and resends the same bytes until the broker leaves; an answer with an error is
logged and counted, never resent. A slow or dead broker holds only its own queue.
Each connection speaks the security protocol of the broker's endpoint (PLAINTEXT, SSL, SASL_PLAINTEXT,
SASL_SSL) with the controller's own TLS context and SASL login; a refused handshake or login is a network
failure like any other.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
import random
import ssl
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from bridge.brokers import propagation
from bridge.brokers.propagation import BrokerAddress, BrokerRequest, PropagationContext, PublishedDelta
from bridge.kafka.client import AuthenticationFailedError, KafkaConnection, TlsHandshakeError
from bridge.kafka.protocol import api_name, describe_api
from bridge.kafka.sasl_mechanisms import SaslLogin
from bridge.metrics import BridgeMetrics, error_name
from bridge.stopping import cancelled
from migrate.errors import Zk2KraftError
from migrate.gcpause import gc_paused
from migrate.kraft.image import MetadataImage
from migrate.plan.status import BrokerChannelStatus, ChannelBroker, RequestMark, UnreachableBroker
from migrate.zk.model import SECURITY_PROTOCOLS

log = logging.getLogger(__name__)

RETRY_BACKOFF_S: Final = 0.1
"""Kafka's RequestSendThread waits this long after a failed send before it connects and sends again."""
RETRY_BACKOFF_MAX_S: Final = 1.0
"""Kafka's `reconnect.backoff.max.ms`: consecutive failures double the wait up to this."""
RETRY_BACKOFF_JITTER: Final = 0.2
"""Kafka's ExponentialBackoff jitter: a doubled wait is scaled by a random factor in [0.8, 1.2]."""
NETWORK_LOG_EVERY_S: Final = 30.0
"""While a broker stays unreachable, how often its failures are logged again (each is counted)."""
BUILD_FAILURE_LOG_EVERY: Final = 100

FailureKind = Literal["network", "tls", "authentication", "settings"]
"""What a failed send met: the network, a refused TLS handshake, a refused SASL login, or an endpoint whose
security protocol the bridge has no settings for (the last three persist until settings or brokers change)."""

backoff_sleep: Callable[[float], Any] = asyncio.sleep
"""How a sender waits before resending (tests record the waits instead of timing them)."""


def retry_delay(failures: int, base_s: float, max_s: float = RETRY_BACKOFF_MAX_S) -> float:
    """Kafka's ExponentialBackoff for the wait after `failures` consecutive failures: `base_s` after the
    first, then doubling with jitter, capped at `max_s`."""
    if failures <= 1:
        return min(base_s, max_s)
    jitter = random.uniform(1 - RETRY_BACKOFF_JITTER, 1 + RETRY_BACKOFF_JITTER)
    return min(base_s * 2 ** (failures - 1) * jitter, max_s)


@dataclass(frozen=True, slots=True)
class Propagation:
    """The request builders the channel drives: `bridge.brokers.propagation`'s (tests substitute theirs)."""

    migrating_brokers: Callable[[MetadataImage, str], dict[int, BrokerAddress]] = (
        propagation.migrating_brokers
    )
    listenerless_brokers: Callable[[MetadataImage, str], dict[int, list[str]]] = propagation.listenerless_brokers
    delta_of: Callable[[Iterable[tuple[Any, int]], MetadataImage, MetadataImage], PublishedDelta] = (
        propagation.delta_of
    )
    full_sync: Callable[[MetadataImage, PropagationContext], list[BrokerRequest]] = propagation.full_sync
    incremental: Callable[[PublishedDelta, MetadataImage, PropagationContext], list[BrokerRequest]] = (
        propagation.incremental
    )
    sync_view: Callable[[MetadataImage], MetadataImage] = propagation.sync_view
    encode: Callable[[Any, int, str | None], bytes] = propagation.encode


@dataclass(frozen=True, slots=True)
class ChannelSettings:
    """How the channel talks to brokers (Kafka's names and defaults)."""

    client_id: str | None
    """Kafka's channel uses the controller's node id."""
    connect_timeout_s: float = 30.0
    """`controller.socket.timeout.ms`."""
    request_timeout_s: float = 30.0
    """`request.timeout.ms`."""
    retry_backoff_s: float = RETRY_BACKOFF_S
    """The wait after a first failed send (Kafka's RequestSendThread's 100 ms)."""
    retry_backoff_max_s: float = RETRY_BACKOFF_MAX_S
    """`reconnect.backoff.max.ms`: consecutive failures double the wait up to this."""
    ssl_context: ssl.SSLContext | None = None
    """For SSL and SASL_SSL endpoints: the inter-broker listener's ssl.* settings (None: such brokers fail)."""
    sasl: SaslLogin | None = None
    """For SASL_PLAINTEXT and SASL_SSL endpoints: `sasl.mechanism.inter.broker.protocol` and the JAAS login
    (None: such brokers fail)."""

    def security(self, protocol: int) -> tuple[ssl.SSLContext | None, SaslLogin | None] | str:
        """The TLS context and SASL login for an endpoint's security protocol id, or why there are none."""
        name = SECURITY_PROTOCOLS[protocol] if 0 <= protocol < len(SECURITY_PROTOCOLS) else None
        if name is None:
            return f"the broker's inter-broker listener has security protocol id {protocol}, which Kafka does not know"
        tls = name in ("SSL", "SASL_SSL")
        if tls and self.ssl_context is None:
            return f"the broker's inter-broker listener uses {name} and the bridge has no TLS settings for it"
        if name.startswith("SASL_") and self.sasl is None:
            return (
                f"the broker's inter-broker listener uses {name} and the bridge has no SASL login for it "
                "(--inter-broker-sasl-mechanism, --inter-broker-sasl-username and its password)"
            )
        return (self.ssl_context if tls else None, self.sasl if name.startswith("SASL_") else None)


@dataclass(slots=True)
class Outgoing:
    """One request encoded for one broker, waiting in its queue."""

    request: BrokerRequest
    payload: bytes
    correlation_id: int
    ends_full_sync: bool = False
    """The last request of a full sync for this broker (its answer counts the full sync as sent)."""

    @property
    def api(self) -> str:
        return api_name(int(self.request.body.__api_key__))

    @property
    def described(self) -> str:
        body = self.request.body
        kind = "full sync" if self.request.full else "incremental"
        return f"{describe_api(int(body.__api_key__), int(body.__version__))} ({kind}, correlation id {self.correlation_id})"


@dataclass(slots=True)
class _Event:
    """One step of the serial pipeline: a full sync, or the change one published batch made."""

    view: MetadataImage
    ctx: PropagationContext
    delta: PublishedDelta | None = None
    """None: a full sync."""


def _coalesced(events: deque[_Event]) -> tuple[_Event, int]:
    """The next event to build, taken from `events`, with how many it stands for: consecutive changes of broker
    registrations only (a burst of registrations, unfencings or fencings without elections) become one, built
    against the latest view, as Kafka's MetadataLoader publishes one delta for the batches it caught up on.
    Each would otherwise send every member the whole broker list again."""
    event, taken = events.popleft(), 1
    while event.delta is not None and _brokers_only(event.delta) and events:
        later = events[0]
        if later.ctx is not event.ctx or later.delta is None or not _brokers_only(later.delta):
            break
        events.popleft()
        brokers = event.delta.changed_brokers | later.delta.changed_brokers
        event = _Event(later.view, later.ctx, PublishedDelta(changed_brokers=brokers))
        taken += 1
    return event, taken


def _brokers_only(delta: PublishedDelta) -> bool:
    return not (delta.changed_partitions or delta.deleted_topics or delta.removed_replicas)


def answer_error_codes(response: Any) -> Counter[int]:
    """The error codes an answer carries: its top-level code and its partitions' (LeaderAndIsr, StopReplica),
    each with how many partitions carry it (1 for the top-level code)."""
    codes: Counter[int] = Counter()
    top = int(getattr(response, "error_code", 0))
    if top:
        codes[top] += 1
    partitions = list(getattr(response, "partition_errors", ()))
    for topic in getattr(response, "topics", ()):
        partitions.extend(getattr(topic, "partition_errors", ()))
    for partition in partitions:
        code = int(partition.error_code)
        if code:
            codes[code] += 1
    return codes


class BrokerChannel:
    """The controller-to-broker channel; see the module docstring.

    Event loop only, except `snapshot` (any thread). `full_sync` (re)starts sending, `publish` adds the
    change of one committed batch, `stop` ends sending (fenced, stepped down, shutting down), `close` also
    stops the worker thread. `may_send` is asked before every send: a fenced controller sends nothing more.
    """

    def __init__(
        self,
        settings: ChannelSettings,
        *,
        metrics: BridgeMetrics | None = None,
        builders: Propagation | None = None,
        may_send: Callable[[], bool] = lambda: True,
    ) -> None:
        self.settings = settings
        self.metrics = metrics
        self.builders = builders or Propagation()
        self.may_send = may_send
        self._ctx: PropagationContext | None = None
        self._events: deque[_Event] = deque()
        self._pending = 0  # events posted and not yet handed to the brokers
        self._event_ready: asyncio.Event | None = None
        self._pump: asyncio.Task[None] | None = None
        self._senders: dict[int, _BrokerSender] = {}
        self._stopping: set[asyncio.Future[None]] = set()
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="propagator")
        self._correlation_ids = itertools.count()  # read on the worker thread only
        self._lock = threading.Lock()  # the senders' table and statistics, read by /status's thread
        self.full_syncs = 0
        self.last_full_sync_brokers: int | None = None
        self.build_failures = 0
        self._unreachable: dict[int, UnreachableBroker] = {}

    # ------------------------------------------------------------------ the driver's side

    @property
    def active(self) -> bool:
        return self._ctx is not None

    @property
    def members(self) -> dict[int, BrokerAddress]:
        return {broker_id: sender.address for broker_id, sender in self._senders.items()}

    def full_sync(self, image: MetadataImage, ctx: PropagationContext) -> None:
        """Entering KRAFT_CONTROLLER_TO_BROKER_COMM: send from now on with `ctx`, starting with a full sync
        of `image` (UpdateMetadata with every partition, then FULL LeaderAndIsr)."""
        self._ctx = ctx
        self.full_syncs += 1
        try:
            view = self.builders.sync_view(image)
        except Exception:
            self._build_failed("full sync")
            return
        self._post(_Event(view, ctx))

    def publish(
        self,
        records: Iterable[tuple[Any, int]],
        before: MetadataImage,
        after: MetadataImage,
        image: MetadataImage,
    ) -> None:
        """One committed batch, in log order: its incremental requests, if it changed topics or brokers.

        `before`/`after`: the image slices cut around its append; `image`: the log's image now.
        """
        ctx = self._ctx
        if ctx is None:
            return
        try:
            delta = self.builders.delta_of(records, before, after)
            if delta.is_empty():
                return  # configs, ACLs, quotas, SCRAM, features, producer ids: nothing to send (KAFKA-14668)
            if not self._senders and not self._pending and not delta.changed_brokers:
                return  # no member, and none can join without a registration change (a rehearsal's case)
            view = self.builders.sync_view(image)
        except Exception:
            self._build_failed("incremental requests")
            return
        self._post(_Event(view, ctx, delta))

    async def stop(self) -> None:
        """Send nothing more: drop the pending events, stop every broker's task and clear its queue."""
        self._ctx = None
        self._events.clear()
        self._pending = 0
        pump, self._pump = self._pump, None
        if pump is not None:
            await cancelled(pump)
        with self._lock:
            senders = list(self._senders.values())
            self._senders.clear()
        self.set_unreachable({}, "")
        await asyncio.gather(*(sender.stop() for sender in senders), *self._stopping)

    async def close(self) -> None:
        """`stop`, then let the worker thread go (a build under way is not waited for)."""
        await self.stop()
        self._executor.shutdown(wait=False, cancel_futures=True)

    def snapshot(self) -> BrokerChannelStatus:
        """What `/status` shows (any thread)."""
        with self._lock:
            brokers = [self._senders[b].status() for b in sorted(self._senders)]
            return BrokerChannelStatus(
                active=self.active,
                full_syncs=self.full_syncs,
                last_full_sync_brokers=self.last_full_sync_brokers,
                build_failures=self.build_failures,
                brokers=brokers,
                unreachable=[self._unreachable[b] for b in sorted(self._unreachable)],
            )

    def _full_sync_queued(self, ctx: PropagationContext, brokers: list[int]) -> None:
        """A full sync goes to `brokers` (this event's members): logged and shown, a warning when none."""
        with self._lock:
            self.last_full_sync_brokers = len(brokers)
        line = (
            "event=broker_full_sync controller_id=%d zk_controller_epoch=%d listener=%s brokers=%d (%s)%s"
        )
        unreachable = len(self._unreachable)
        args = (
            ctx.controller_id, ctx.zk_controller_epoch, ctx.inter_broker_listener, len(brokers),
            ",".join(map(str, brokers)), f" unreachable={unreachable}" if unreachable else "",
        )  # fmt: skip
        if brokers:
            log.info(line, *args)
        else:
            log.warning(
                line + ": the full sync reached no broker (no unfenced migrating ZooKeeper-mode broker with an "
                "endpoint on the listener); a broker unfenced later gets its metadata from the requests its "
                "unfencing sends",
                *args,
            )

    def _build_failed(self, what: str) -> None:
        """Building requests raised: the brokers miss this change (until the next full sync); dual-write
        goes on. Logged with its traceback the first time, then every BUILD_FAILURE_LOG_EVERY-th time."""
        self.build_failures += 1
        if self.build_failures == 1 or self.build_failures % BUILD_FAILURE_LOG_EVERY == 0:
            log.exception(
                "event=broker_requests_failed building the %s failed (%d failure(s) so far); the brokers "
                "miss this change until the next full sync", what, self.build_failures,
            )  # fmt: skip

    # ------------------------------------------------------------------ the serial pipeline

    def _post(self, event: _Event) -> None:
        self._events.append(event)
        self._pending += 1
        if self._event_ready is None:
            self._event_ready = asyncio.Event()
        self._event_ready.set()
        if self._pump is None or self._pump.done():
            self._pump = asyncio.ensure_future(self._run_events())

    async def _run_events(self) -> None:
        """Build each event's requests on the worker thread, then hand them to the brokers, in order."""
        loop = asyncio.get_running_loop()
        ready = self._event_ready
        assert ready is not None
        while True:
            while not self._events:
                ready.clear()
                await ready.wait()
            event, taken = _coalesced(self._events)
            what = "full sync" if event.delta is None else "incremental requests"
            try:
                members, unreachable, outgoing = await loop.run_in_executor(self._executor, self._build, event)
            except Exception:
                self._build_failed(what)
                continue
            finally:
                self._pending = max(self._pending - taken, 0)
            if event.ctx is not self._ctx:
                continue  # stopped, or another leadership began meanwhile
            self.set_members(members)
            self.set_unreachable(unreachable, event.ctx.inter_broker_listener)
            if event.delta is None:
                self._full_sync_queued(event.ctx, sorted(members))
            self.enqueue(outgoing)

    def _build(
        self, event: _Event
    ) -> tuple[dict[int, BrokerAddress], dict[int, list[str]], dict[int, list[Outgoing]]]:
        """Worker thread: the members as of the event's view, the brokers left out for want of an endpoint on
        the listener (with the listeners they registered), and its requests, encoded, by broker."""
        builders, ctx = self.builders, event.ctx
        # A collector pass here would walk the whole image holding the GIL (0.4 s at 200,000 partitions),
        # stalling the event loop's heartbeats; the requests' entities are acyclic.
        with gc_paused(promote=True):
            members = builders.migrating_brokers(event.view, ctx.inter_broker_listener)
            unreachable = builders.listenerless_brokers(event.view, ctx.inter_broker_listener)
            if event.delta is None:
                requests = builders.full_sync(event.view, ctx)
            else:
                requests = builders.incremental(event.delta, event.view, ctx)
            return members, unreachable, self.encode(requests)

    def encode(self, requests: Iterable[BrokerRequest]) -> dict[int, list[Outgoing]]:
        """`requests` encoded with fresh correlation ids, by broker, in order (any one thread at a time)."""
        by_broker: dict[int, list[Outgoing]] = {}
        for request in requests:
            correlation_id = next(self._correlation_ids)
            payload = self.builders.encode(request.body, correlation_id, self.settings.client_id)
            by_broker.setdefault(request.broker_id, []).append(Outgoing(request, payload, correlation_id))
        for items in by_broker.values():
            last_full = next((item for item in reversed(items) if item.request.full), None)
            if last_full is not None:
                last_full.ends_full_sync = True
        return by_broker

    # ------------------------------------------------------------------ membership and queues (event loop)

    def set_members(self, members: dict[int, BrokerAddress]) -> None:
        """Kafka's `publishMetadata`: remove the brokers that left or moved (task stopped, queue cleared),
        then add the new ones."""
        removed = [
            sender for broker_id, sender in self._senders.items() if members.get(broker_id) != sender.address
        ]
        with self._lock:
            for sender in removed:
                del self._senders[sender.address.broker_id]
        for sender in removed:
            log.info(
                "event=broker_channel_removed broker=%d address=%s dropped_requests=%d",
                sender.address.broker_id, sender.where, sender.depth,
            )  # fmt: skip
            stopping = asyncio.ensure_future(sender.stop())
            self._stopping.add(stopping)
            stopping.add_done_callback(self._stopping.discard)
        for broker_id, address in sorted(members.items()):
            if broker_id in self._senders:
                continue
            sender = _BrokerSender(address, self)
            with self._lock:
                self._senders[broker_id] = sender
            log.info("event=broker_channel_added broker=%d address=%s", broker_id, sender.where)
            sender.start()

    def set_unreachable(self, listeners_of: dict[int, list[str]], listener: str) -> None:
        """The migrating unfenced brokers with no endpoint on `listener` (by id, the listeners they registered):
        shown on /status, counted in /metrics, and logged when one is first left out."""
        unreachable = {}
        for broker_id, listeners in sorted(listeners_of.items()):
            registered = ", ".join(listeners) or "no listener"
            reason = (
                f"no endpoint on the inter-broker listener {listener} (--inter-broker-listener-name); "
                f"it registered {registered}"
            )
            unreachable[broker_id] = UnreachableBroker(broker_id=broker_id, listeners=listeners, reason=reason)
            known = self._unreachable.get(broker_id)
            if known is None or known.reason != reason:
                log.warning(
                    "event=broker_channel_unreachable broker=%d listener=%s registered=%s: %s; it gets no "
                    "LeaderAndIsr, UpdateMetadata or StopReplica until it registers that listener",
                    broker_id, listener, ",".join(listeners), reason,
                )  # fmt: skip
        with self._lock:
            self._unreachable = unreachable
        if self.metrics is not None:
            self.metrics.set_broker_unreachable(len(unreachable))

    def enqueue(self, outgoing: dict[int, list[Outgoing]]) -> None:
        """Queue each broker's requests; those for a broker not in the channel are dropped ("offline")."""
        offline = []
        for broker_id, items in outgoing.items():
            sender = self._senders.get(broker_id)
            if sender is None:
                offline.append(broker_id)
                continue
            sender.put(items)
        if offline:
            log.warning(
                "event=broker_requests_dropped brokers=%s: not in the channel (not registered as unfenced "
                "migrating ZooKeeper brokers), as Kafka drops requests for a broker it considers offline",
                ",".join(map(str, sorted(offline))),
            )


@dataclass(slots=True)
class _Stats:
    connected: bool = False
    last_sent: RequestMark | None = None
    last_acknowledged: RequestMark | None = None
    errors: Counter[str] = field(default_factory=Counter)
    full_syncs_sent: int = 0
    network_failures: int = 0
    last_network_error: str | None = None
    failure_kind: FailureKind | None = None
    retry_backoff_s: float | None = None


class _BrokerSender:
    """Kafka's RequestSendThread for one broker: its queue, its connection, one request in flight."""

    def __init__(self, address: BrokerAddress, channel: BrokerChannel) -> None:
        self.address = address
        self.channel = channel
        self.queue: deque[Outgoing] = deque()
        self.in_flight: Outgoing | None = None
        self.stats = _Stats()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._connection: KafkaConnection | None = None
        host = f"[{address.host}]" if ":" in address.host else address.host
        self.where = f"{host}:{address.port}"

    @property
    def depth(self) -> int:
        return len(self.queue) + (self.in_flight is not None)

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        """Stop the task, close the connection, clear the queue."""
        task, self._task = self._task, None
        self.queue.clear()
        self.in_flight = None
        if task is not None:
            await cancelled(task)
        await self._disconnect()
        self._depth_changed()

    def put(self, items: list[Outgoing]) -> None:
        """Queue `items` in order; a full sync among them drops the unsent requests of an older one."""
        if any(item.request.full for item in items):
            kept = deque(queued for queued in self.queue if not queued.request.full)
            superseded = len(self.queue) - len(kept)
            if superseded:
                self.queue = kept
                log.info(
                    "event=full_sync_superseded broker=%d dropped_requests=%d: a newer full sync replaces them",
                    self.address.broker_id, superseded,
                )  # fmt: skip
        self.queue.extend(items)
        self._depth_changed()
        self._wake.set()

    def status(self) -> ChannelBroker:
        stats = self.stats
        return ChannelBroker(
            broker_id=self.address.broker_id,
            address=self.where,
            queue_depth=self.depth,
            connected=stats.connected,
            last_sent=stats.last_sent,
            last_acknowledged=stats.last_acknowledged,
            errors=dict(stats.errors),
            full_syncs_sent=stats.full_syncs_sent,
            network_failures=stats.network_failures,
            last_network_error=stats.last_network_error,
            failure_kind=stats.failure_kind,
            retry_backoff_ms=None if stats.retry_backoff_s is None else round(stats.retry_backoff_s * 1000),
        )

    async def _run(self) -> None:
        while True:
            while not self.queue:
                self._wake.clear()
                await self._wake.wait()
            item = self.queue.popleft()
            self.in_flight = item
            response = await self._deliver(item)
            self.in_flight = None
            self._depth_changed()
            self._judge(item, response)

    async def _deliver(self, item: Outgoing) -> Any:
        """Send `item` until it is answered: every network failure closes the connection, waits (backing off
        on consecutive failures) and resends."""
        settings = self.channel.settings
        failures = 0
        logged_at = 0.0
        while True:
            if not self.channel.may_send():  # fenced or stepping down: the channel is being stopped
                await asyncio.sleep(settings.retry_backoff_s)
                continue
            security = settings.security(self.address.security_protocol)
            kind: FailureKind = "network"
            if isinstance(security, str):
                problem, kind = security, "settings"
            else:
                tls, sasl = security
                try:
                    if self._connection is None:
                        self._connection = await KafkaConnection.open(
                            self.address.host,
                            self.address.port,
                            client_id=settings.client_id,
                            timeout=settings.connect_timeout_s,
                            ssl_context=tls,
                            sasl=sasl,
                        )
                        self._set(connected=True)
                    self._sent(item)
                    response = await self._connection.send_encoded(
                        item.payload, timeout=settings.request_timeout_s
                    )
                except (Zk2KraftError, OSError) as exc:
                    problem = str(exc)
                    if isinstance(exc, TlsHandshakeError):
                        kind = "tls"
                    elif isinstance(exc, AuthenticationFailedError):
                        kind = "authentication"
                    await self._disconnect()
                else:
                    self._set(retry_backoff_s=None)
                    if failures:
                        log.info(
                            "event=broker_reachable broker=%d address=%s after %d failed attempt(s) of %s",
                            self.address.broker_id, self.where, failures, item.described,
                        )  # fmt: skip
                    return response
            failures += 1
            delay = retry_delay(failures, settings.retry_backoff_s, settings.retry_backoff_max_s)
            self._network_failure(problem, kind, delay)
            if failures == 1 or time.monotonic() - logged_at >= NETWORK_LOG_EVERY_S:
                logged_at = time.monotonic()
                log.warning(
                    "event=broker_unreachable broker=%d address=%s request=%s attempts=%d kind=%s: %s; "
                    "resending after %.1f s, the wait doubling on each failure up to %.1f s, until it answers "
                    "or leaves the channel",
                    self.address.broker_id, self.where, item.described, failures, kind, problem,
                    delay, settings.retry_backoff_max_s,
                )  # fmt: skip
            await backoff_sleep(delay)

    def _judge(self, item: Outgoing, response: Any) -> None:
        """An answer: counted, and its errors logged (Kafka's callbacks only log; nothing is resent)."""
        codes = answer_error_codes(response)
        now = time.time()
        api = item.api
        with self.channel._lock:
            self.stats.last_acknowledged = RequestMark(api=api, at_ms=int(now * 1000))
            for code in codes:
                self.stats.errors[error_name(code)] += 1
            if item.ends_full_sync:
                self.stats.full_syncs_sent += 1
        metrics = self.channel.metrics
        if metrics is not None:
            metrics.observe_broker_answer(self.address.broker_id, api, now, codes)
            if item.ends_full_sync:
                metrics.observe_broker_full_sync(self.address.broker_id)
        if codes:
            shown = ", ".join(f"{error_name(code)} x{count}" for code, count in sorted(codes.items()))
            log.error(
                "event=broker_request_error broker=%d address=%s request=%s errors=%s: not resent; the "
                "next full sync repairs what the broker missed",
                self.address.broker_id, self.where, item.described, shown,
            )  # fmt: skip

    def _sent(self, item: Outgoing) -> None:
        now = time.time()
        self._set(last_sent=RequestMark(api=item.api, at_ms=int(now * 1000)))
        if self.channel.metrics is not None:
            self.channel.metrics.observe_broker_sent(self.address.broker_id, item.api, now)

    def _network_failure(self, problem: str, kind: FailureKind, delay: float) -> None:
        with self.channel._lock:
            self.stats.network_failures += 1
            self.stats.last_network_error = problem
            self.stats.failure_kind = kind
            self.stats.retry_backoff_s = delay
        if self.channel.metrics is not None:
            self.channel.metrics.observe_broker_network_failure(self.address.broker_id)

    def _set(self, **values: Any) -> None:
        with self.channel._lock:
            for name, value in values.items():
                setattr(self.stats, name, value)

    def _depth_changed(self) -> None:
        if self.channel.metrics is not None:
            self.channel.metrics.set_broker_queue_depth(self.address.broker_id, self.depth)

    async def _disconnect(self) -> None:
        connection, self._connection = self._connection, None
        self._set(connected=False)
        if connection is not None:
            # Aborted, not closed: a graceful close waits until a broker that stopped reading takes the
            # unsent bytes, and the bytes are resent on the next connection anyway.
            connection.abort()
