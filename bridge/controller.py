"""The bridge controller: wiring, lifecycle and request intake (Kafka's ControllerServer and ControllerApis).

`BridgeController(config).run()` is `zk2kraft bridge run`; tests and tools use `start()` / `stop()`, which
run the same thing on a background thread. Requests are handled one at a time on the event loop against
the log's image (Kafka's controller event thread); a handler's records go to the dual-write pipeline
(`bridge.pipeline`), which appends them, writes what they change to ZooKeeper once durable, and only then
lets the response go out, so a ZooKeeper-mode broker reading after the answer sees it. The migration
driver (`bridge.driver`) leads the way to DUAL_WRITE; a standby waits in `bridge.standby`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kio.schema.envelope.v0 import EnvelopeResponse
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from bridge import broker_lifecycle, standby, stopping
from bridge.api import ControllerHandler, ControllerResult, DriverState, HandlerContext
from bridge.broker_channel import BrokerChannel, ChannelSettings, Propagation
from bridge.broker_lifecycle import BrokerLifecycle
from bridge.brokers.cluster import (
    BROKER_REGISTRATION,
    DEFAULT_SUPPORTED_FEATURES,
    UNREGISTER_BROKER,
    ControllerSettings,
)
from bridge.brokers.propagation import PropagationContext
from bridge.config import (
    EXIT_REFUSED,
    BridgeConfig,
    inter_broker_security,
    listener_ssl_context,
    zk_connect_options,
)
from bridge.driver import (
    FencedOut,
    MigrationDriver,
    MigrationMismatchError,
    bootstrap_refusal,
    check_log_matches_migration,
    mismatch_refusal,
    plan_dry_run,
    read_migration_znode,
    read_zookeeper_for_migration,
    rehearsal_refusal,
)
from bridge.handlers import reads
from bridge.handlers.alter_partition import unclean_election_enabled
from bridge.handlers.reassignments import LIST_PARTITION_REASSIGNMENTS
from bridge.handlers.registry import load_handlers, response_error_code
from bridge.kafka.error_responses import error_response
from bridge.kafka.listener import ApiVersionsFeatures, KafkaListener, RequestContext
from bridge.kafka.protocol import (
    ANONYMOUS,
    EncodedResponse,
    KafkaPrincipal,
    decode_principal,
    decode_request,
    describe_api,
    encode_response,
    unwrap_response,
)
from bridge.metrics import BridgeMetrics, BridgeStatus, BrokersStatus, StatusServer
from bridge.pipeline import Change, ControllerFailed, DualWritePipeline, PublishedBatch
from bridge.raft import fetch_server
from bridge.raft.metadata_log import MetadataLog
from bridge.raft.recovery import preview
from bridge.zk.broker_registry import ZkBrokerRegistry
from bridge.zk.foreign_writes import ForeignWriteBatch, ForeignWriteMode, ForeignWriteWatcher
from bridge.zk.leadership import MigrationLeadershipState
from bridge.zk.migration_client import ZkMigrationClient
from migrate.errors import (
    EXIT_FAILED,
    EXIT_FENCED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    UnreachableError,
    UnsupportedVersionError,
    Zk2KraftError,
    ZnodeFormatError,
    error_text,
)
from migrate.kraft import metadata_version as mvs
from migrate.kraft.image import MetadataImage
from migrate.kraft.migration_state import ZkMigrationState
from migrate.kraft.reader import load_image
from migrate.zk import paths
from migrate.zk.znodes.controller import decode_migration
from migrate.zk.znodes.singletons import decode_cluster_id
from migrate.zk.znodes.topics import decode_topic

log = logging.getLogger(__name__)

ENVELOPE_KEY = 58
# Kafka's ApiKeys with `forwardable` that a ZooKeeper-mode broker sends us in an EnvelopeRequest.
FORWARDABLE = frozenset(
    {19, 20, 30, 31, 33, 37, 43, 44, 45, 46, 49, 51, 64, fetch_server.DESCRIBE_QUORUM_KEY}
)

READ_ONLY_KEYS = frozenset(
    {*fetch_server.REPLICATION_KEYS, fetch_server.DESCRIBE_QUORUM_KEY, LIST_PARTITION_REASSIGNMENTS}
)
"""Requests that only read (Kafka's appendReadEvent): answered at once, not as write events."""
COMMITTED_READ_KEYS = frozenset({LIST_PARTITION_REASSIGNMENTS})
"""Reads Kafka answers at the last committed offset: answered once what they read is durable."""

LEADERSHIP_LOST_ANSWER_S = 2.0
"""How long a controller that renounced or was fenced lets the requests it fails NOT_CONTROLLER be answered."""
FENCE_RECHECK_S = 5.0
"""In DUAL_WRITE, how often the leadership znodes are read again besides their watches (a watch lost with
an expired session is set again then)."""
SHUTDOWN_WRITES_WAIT_S = 10.0
"""On a stop, how long the dual writes in flight may take; then the stop goes on without them (the log holds
their changes; the next leader reconciles ZooKeeper)."""
HAND_BACK_WAIT_S = 10.0
"""On a stop before DUAL_WRITE, how long handing ZooKeeper back (`MigrationDriver.abandon`) may take."""
ZK_CLOSE_WAIT_S = 5.0
"""On a stop, how long closing the ZooKeeper session may take (it cannot be closed while ZooKeeper is away)."""
STOP_DEADLINE_S = 30.0
"""`bridge run` ends this long after a stop began whatever still runs (exit 4, naming the threads)."""
WAIT_FOR_BROKERS_POLL_S = 0.5


class BridgeController:
    """One bridge-mode KRaft controller; see the module docstring."""

    def __init__(
        self,
        config: BridgeConfig,
        *,
        handlers: Mapping[int, ControllerHandler] | None = None,
        supported: Mapping[int, tuple[int, int]] | None = None,
        new_uuid: Callable[[], uuid.UUID] = uuid.uuid4,
        propagation: Propagation | None = None,
    ) -> None:
        """`propagation`: the builders of the brokers' requests (default: bridge.brokers.propagation's)."""
        self.config = config
        self._ssl_context = listener_ssl_context(config)  # bad TLS options fail before anything starts
        broker_tls, broker_sasl = inter_broker_security(config)  # so do the channel's to the brokers
        self.zk_options = zk_connect_options(config)
        if handlers is None:
            loaded, loaded_supported = load_handlers()
            self.handlers: dict[int, ControllerHandler] = loaded
            self.supported: dict[int, tuple[int, int]] = dict(supported or loaded_supported)
            # Fetch/FetchSnapshot/DescribeQuorum of __cluster_metadata, served from the live log while this
            # controller leads it; the voter is named with the address this controller listens on.
            fetch_server.register(
                self.handlers, self.supported, self._leading_log, self._voter_endpoint,
                self.config.controller_listener_name,
            )  # fmt: skip
        else:
            self.handlers = dict(handlers)
            self.supported = dict(supported or {})
        # The brokers' own requests reach `_on_broker_request` (before DUAL_WRITE too), not `_answer`.
        for api_key in broker_lifecycle.SUPPORTED:
            self.handlers.setdefault(api_key, broker_lifecycle.served_by_lifecycle)
            self.supported.setdefault(api_key, broker_lifecycle.SUPPORTED[api_key])
        self.broker_lifecycle: BrokerLifecycle | None = None
        self.new_uuid = new_uuid
        self.metrics = BridgeMetrics(config.node_id, foreign_writes_mode=config.foreign_zk_writes)
        self.exit_code: int | None = None
        self.dry_run_lines: list[str] = []
        self.error: str | None = None
        self.kazoo: KazooClient | None = None
        self.zk: ZkMigrationClient | None = None
        self.log: MetadataLog | None = None
        self.driver: MigrationDriver | None = None
        self.listener: KafkaListener | None = None
        self.cluster_id: str | None = None  # ZooKeeper's /cluster/id, once read
        # Connections already told they reached a controller instead of a broker.
        self._clients_told: set[tuple[str, int]] = set()
        self.status_server: StatusServer | None = None
        # The listener and status server bound (their ports claimed) but not serving yet.
        self._bound: tuple[KafkaListener, StatusServer | None] | None = None
        self.brokers: ZkBrokerRegistry | None = None
        self.watcher: ForeignWriteWatcher | None = None
        self.foreign_batches_handled = 0
        # Committed batches through the log to ZooKeeper (its writer thread also runs the driver's writes).
        self.pipeline = DualWritePipeline(
            self.metrics, on_repaired=self._sync_metrics, on_published=self._on_published,
            on_failed=self._renounce,
        )  # fmt: skip
        # Why this controller renounced (its log could not take a change); it then stops, exit code EXIT_FAILED.
        self.renounced: str | None = None
        # LeaderAndIsr / UpdateMetadata / StopReplica to the ZooKeeper-mode brokers (MigrationPropagator).
        self.channel = BrokerChannel(
            ChannelSettings(
                client_id=str(config.node_id),
                connect_timeout_s=config.controller_socket_timeout_ms / 1000,
                request_timeout_s=config.request_timeout_ms / 1000,
                ssl_context=broker_tls,
                sasl=broker_sasl,
            ),
            metrics=self.metrics,
            builders=propagation,
            may_send=self._may_send_to_brokers,
        )
        self._log_closed = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        # The deadline of a foreground stop; lifted once the ZooKeeper client stopped (no call holds a thread).
        self._deadline: threading.Timer | None = None
        self._zk_client_stopped = False
        self._ready = threading.Event()
        self._changed = threading.Condition()

    # ------------------------------------------------------------------ public face

    @property
    def state(self) -> DriverState:
        """The driver's state; INACTIVE from the moment a write found this controller fenced."""
        driver = self.driver
        if driver is None:
            return DriverState.UNINITIALIZED
        if driver.fenced_reason is not None and driver.state != DriverState.UNINITIALIZED:
            return DriverState.INACTIVE
        return driver.state

    @property
    def zk_out_of_sync(self) -> str | None:
        """Why ZooKeeper misses a committed change until the pipeline's repair; None: in sync."""
        return self.pipeline.zk_out_of_sync

    @property
    def fenced(self) -> bool:
        return self.driver is not None and self.driver.fenced_reason is not None

    @property
    def listen_port(self) -> int:
        if self.listener is None:
            raise Zk2KraftError("the bridge controller is not listening yet")
        return self.listener.port

    @property
    def metrics_port(self) -> int:
        if self.status_server is None:
            raise Zk2KraftError("the bridge controller serves no metrics/status endpoint")
        return self.status_server.port

    def status(self) -> BridgeStatus:
        """The `/status` document; `state` reads FENCED once this controller lost leadership."""
        status = self.metrics.status().model_copy(update={"broker_channel": self.channel.snapshot()})
        if self.renounced is not None:
            status = status.model_copy(update={"state": "FAILED"})
        elif self.fenced:
            status = status.model_copy(update={"state": "FENCED", "fenced": True})
        return status

    def run(self) -> int:
        """Run in the foreground until SIGTERM/SIGINT, a lost fence or a refusal; returns the exit code.

        Its stop ends within STOP_DEADLINE_S, through the interpreter's exit too if a thread may still be in
        a ZooKeeper call."""
        try:
            return asyncio.run(self._main(install_signals=True))
        finally:
            if self._deadline is not None and self._zk_client_stopped:
                self._deadline.cancel()

    def start(self, timeout: float = 60.0) -> BridgeController:
        """Run on a background thread; returns once the listener and the status server are up."""
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._main(install_signals=False)),
            name="bridge-controller",
            daemon=True,
        )
        self._thread.start()
        if not self._ready.wait(timeout):
            raise Zk2KraftError(f"the bridge controller did not start within {timeout} s")
        if self.exit_code is not None and self.listener is None:
            raise Zk2KraftError(f"the bridge controller stopped while starting: {self.error}")
        return self

    def stop(self, timeout: float = 60.0) -> int | None:
        """Shut down cleanly (as on SIGTERM) and wait; returns the exit code."""
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stop.set)
        if self._thread is not None:
            self._thread.join(timeout)
        return self.exit_code

    def wait_for_state(self, state: DriverState, timeout: float = 60.0) -> bool:
        """Block until the driver is in `state` (True) or the controller stopped / time ran out (False)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while self.state != state:
                if self.exit_code is not None:
                    return False
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(min(left, 0.5))
        return True

    # ------------------------------------------------------------------ the main coroutine

    async def _main(self, *, install_signals: bool) -> int:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self.pipeline.start(self._loop)
        if self.config.gil_switch_interval_s is not None:
            # A request crosses four threads (event loop, log writer, ZooKeeper writer, kazoo's connection):
            # each woken thread waits up to this long for the GIL while another one computes.
            sys.setswitchinterval(min(sys.getswitchinterval(), self.config.gil_switch_interval_s))
        if install_signals:
            for signum in (signal.SIGTERM, signal.SIGINT):
                self._loop.add_signal_handler(signum, self._on_signal, signum)
        code = EXIT_FAILED
        try:
            code = await self._serve()
        except standby.Stopped:
            code = EXIT_OK
        except MigrationMismatchError as exc:
            self._fail(str(exc))
            code = EXIT_REFUSED
        except UnreachableError as exc:
            self._fail(str(exc))
            code = EXIT_UNREACHABLE
        except FencedOut as exc:
            self._fail(f"fenced: {exc}")
            code = EXIT_FENCED
        except Zk2KraftError as exc:
            self._fail(str(exc))
            code = EXIT_REFUSED if self.listener is None else EXIT_FAILED
        except Exception as exc:
            log.exception("the bridge controller failed")
            self._fail(f"{type(exc).__name__}: {exc}")
            code = EXIT_FAILED
        finally:
            if install_signals:  # the foreground process: a stop ends in bounded time, whatever hangs
                self._deadline = stopping.exit_unless_done(STOP_DEADLINE_S, EXIT_FAILED)
            await self._shutdown()
            if self.renounced is not None:
                code = EXIT_FAILED
            self.exit_code = code
            self._notify()
            self._ready.set()
        log.info("event=stopped exit_code=%d", code)
        return code

    def _on_signal(self, signum: int) -> None:
        log.info("event=signal signal=%s; shutting down", signal.Signals(signum).name)
        assert self._stop is not None
        self._stop.set()

    def _renounce(self, reason: str) -> None:
        """Event loop: the metadata log cannot take changes; serve nothing more and stop with EXIT_FAILED.

        Kafka's controller renounces on a failed append (its fatal fault handler then halts the process);
        ZooKeeper is released as the session closes, and holds nothing the log does not (dual writes follow
        durability). A supervisor restarts the bridge; a standby or another voter takes over.
        """
        if self.renounced is not None:
            return
        self.renounced = reason
        self.error = f"renounced: {reason}"
        self.metrics.set_failed(reason)
        log.error(
            "event=renounced %s; this controller stops serving and exits with code %d so that a supervisor "
            "restarts it (or a standby takes over)", reason, EXIT_FAILED,
        )  # fmt: skip
        self._notify()
        if self._stop is not None:
            self._stop.set()

    def _fail(self, message: str) -> None:
        self.error = message
        self.metrics.set_last_error(message)
        log.error("event=error %s", message)

    async def _serve(self) -> int:
        config = self.config
        loop = asyncio.get_running_loop()
        options = self.zk_options
        self.kazoo = await loop.run_in_executor(
            None, lambda: options.start_client(timeout=config.zk_session_timeout_s)
        )
        self.zk = ZkMigrationClient(self.kazoo)
        cluster_id = await loop.run_in_executor(None, self._zk_cluster_id)
        if config.dry_run:
            return await self._dry_run()
        if not (config.standby and standby.directory_locked(config.metadata_dir)):
            await self._check_before_writing(cluster_id)
        self.brokers = await loop.run_in_executor(None, self._start_broker_registry)
        if config.standby:
            # A standby answers (NOT_CONTROLLER) and reports its state while it waits for the log.
            await self._start_serving(cluster_id)
        self.log = await self._open_log(cluster_id)
        if self.log.cluster_id not in (None, cluster_id):
            raise MigrationMismatchError(
                f"{config.metadata_dir} belongs to cluster {self.log.cluster_id}, but ZooKeeper "
                f"{config.zk_connect} holds cluster {cluster_id}"
            )
        self.driver = self._new_driver(self.log)
        if not config.standby:
            await self._start_serving(cluster_id)
        self._sync_metrics()
        return await self._lead()

    async def _check_before_writing(self, cluster_id: str) -> None:
        """Every refusal, judged read-only before the metadata directory or ZooKeeper is changed: the
        directory's node and cluster, `/migration` against the log, and (when the log holds no completed
        migration) every znode the initial load will copy. A rehearsal first checks it runs on a copy."""
        config = self.config
        assert self.zk is not None
        loop = asyncio.get_running_loop()
        if config.rehearsal:
            problem = rehearsal_refusal(await loop.run_in_executor(None, self.zk.live_broker_sessions))
            if problem is not None:
                raise MigrationMismatchError(problem)
        found = await loop.run_in_executor(
            None, lambda: preview(config.metadata_dir, node_id=config.node_id, cluster_id=cluster_id or None)
        )
        if found.cluster_id not in (None, cluster_id):
            raise MigrationMismatchError(
                f"{config.metadata_dir} belongs to cluster {found.cluster_id}, but ZooKeeper "
                f"{config.zk_connect} holds cluster {cluster_id}"
            )
        mv = mvs.parse(config.metadata_version) if config.metadata_version else mvs.LATEST_PRODUCTION
        problem = bootstrap_refusal(found.image, mv)
        if problem is not None:
            raise MigrationMismatchError(problem)
        znode = await loop.run_in_executor(None, read_migration_znode, self.zk)
        if not config.adopt_existing_migration:
            # An absent /migration is what the driver would create: Kafka's EMPTY state, judged the same way.
            leadership = znode if znode is not None else MigrationLeadershipState()
            problem = check_log_matches_migration(
                found.image, found.end_offset, found.leader_epoch, leadership
            )
            if problem is not None:
                holder = await loop.run_in_executor(None, self.zk.controller_holder)
                raise MigrationMismatchError(mismatch_refusal(problem, holder, config.node_id))
        holder = await loop.run_in_executor(None, self.zk.controller_holder)
        if holder.present and holder.is_kraft and (holder.kraft_controller_epoch or 0) >= found.leader_epoch:
            # Kafka's registration refuses an epoch that is not newer: the claim could only fail as fenced.
            raise MigrationMismatchError(
                f"refusing to start: {holder.describe()}, and this metadata log ({config.metadata_dir}) would "
                f"claim it at epoch {found.leader_epoch}; a KRaft controller epoch must be newer than the one "
                f"registered, so this controller could never take control. The epoch lives in the metadata "
                f"log: start with controller {holder.broker_id}'s metadata dir (or a copy of it), not a fresh "
                f"or older one. Nothing was written to ZooKeeper or {config.metadata_dir}"
            )
        if found.image.features.zk_migration_state != ZkMigrationState.MIGRATION:
            try:
                await loop.run_in_executor(None, read_zookeeper_for_migration, self.zk_options)
            except ZnodeFormatError as exc:
                raise MigrationMismatchError(
                    f"refusing to start: {exc}. The initial migration copies every znode of the cluster and "
                    f"would fail on this one; nothing was written to ZooKeeper or {config.metadata_dir}. "
                    f"Fix or remove the znode (as Kafka's own tools would write it), then start again"
                ) from exc
        await self._bind_addresses()

    async def _bind_addresses(self) -> tuple[KafkaListener, StatusServer | None]:
        """Claim --listen and --metrics (a busy one is refused, naming it) before anything is written."""
        if self._bound is not None:
            return self._bound
        config = self.config
        handlers: dict[int, Any] = {key: self._on_request for key in [*self.handlers, ENVELOPE_KEY]}
        handlers[reads.METADATA] = self._on_metadata
        handlers[reads.DESCRIBE_CLUSTER] = self._on_describe_cluster
        listener = KafkaListener(
            config.listen_host,
            config.listen_port,
            handlers,
            {**self.supported, ENVELOPE_KEY: (0, 0), **reads.IDENTITY_VERSIONS},
            ssl_context=self._ssl_context,
            features=self._api_versions_features,
        )
        await listener.bind("--listen")
        status_server = None
        if config.metrics_port is not None:
            status_server = StatusServer(self.metrics, config.metrics_host, config.metrics_port, status=self.status)
            try:
                status_server.bind("--metrics")
            except Zk2KraftError:
                await listener.stop()
                raise
        self._bound = (listener, status_server)
        return self._bound

    async def _start_serving(self, cluster_id: str) -> None:
        """Start the Kafka-protocol listener and the metrics/status server; `start()` returns after this."""
        config = self.config
        self.cluster_id = cluster_id
        listener, status_server = await self._bind_addresses()
        self._bound = None
        self.listener, self.status_server = listener, status_server
        await listener.start()
        if status_server is not None:
            status_server.start()
        log.info(
            "event=listening listen=%s:%d metrics=%s node_id=%d cluster_id=%s standby=%s",
            config.listen_host, self.listener.port,
            self.status_server.url if self.status_server else "off", config.node_id, cluster_id, config.standby,
        )  # fmt: skip
        self._ready.set()

    def _api_versions_features(self) -> ApiVersionsFeatures:
        """SimpleApiVersionManager's feature fields: supported ranges, the log's finalized features with their
        epoch (FeaturesPublisher; a level of 0 is left out), and ZkMigrationReady (always migrating)."""
        features = self.log.image.features if self.log is not None else MetadataImage().features
        levels = {mvs.FEATURE_NAME: features.metadata_version, **features.finalized_versions}
        return ApiVersionsFeatures(
            supported=DEFAULT_SUPPORTED_FEATURES,
            finalized={name: (level, level) for name, level in levels.items() if level != 0},
            finalized_epoch=features.epoch,
            zk_migration_ready=True,
        )

    def _start_broker_registry(self) -> ZkBrokerRegistry:
        assert self.kazoo is not None
        return ZkBrokerRegistry(self.kazoo, on_change=self._on_zk_brokers).start()

    async def _open_log(self, cluster_id: str) -> MetadataLog:
        """Open the metadata log; a standby waits while another process holds its directory lock."""
        loop = asyncio.get_running_loop()
        assert self._stop is not None
        while True:
            if self.config.standby:
                await standby.wait_for_directory(self.config.metadata_dir, self._stop)
            try:
                opened = await loop.run_in_executor(None, _open_metadata_log, self.config, cluster_id)
            except Zk2KraftError:
                if self.config.standby and standby.directory_locked(self.config.metadata_dir):
                    continue  # another standby got there first
                raise
            self._log_closed = False
            return opened

    async def _lead(self) -> int:
        """Reach DUAL_WRITE and stay there until told to stop; standby waits out lost leadership."""
        assert self.driver is not None and self._stop is not None
        while True:
            try:
                await self._until_stopped(self.driver.run())
                if self._stop.is_set():
                    return EXIT_OK
                self._sync_metrics()
                await self._until_stopped(self._watch_fence())
            except FencedOut as exc:
                self._on_fenced(str(exc))
                await self._report_new_holder(str(exc))
                if not self.config.standby:
                    return EXIT_FENCED
            finally:
                await self._stop_watcher()
                await self.channel.stop()  # a fenced or stopping controller sends brokers nothing more
            if self._stop.is_set():
                return EXIT_OK if not self.fenced or self.config.standby else EXIT_FENCED
            # Let another process sharing the metadata directory take over while we wait.
            await self._close_log()
            assert self.kazoo is not None
            await self._until_stopped(
                standby.wait_for_takeover(self.kazoo, self.config.node_id, self.config.metadata_dir)
            )
            if self._stop.is_set():
                return EXIT_OK
            try:
                await self._reopen_for_takeover()
            except standby.Stopped:
                return EXIT_OK

    async def _until_stopped(self, work: Any) -> None:
        """Run `work` unless the stop event comes first (then it is cancelled)."""
        assert self._stop is not None
        task = asyncio.ensure_future(work)
        stopper = asyncio.ensure_future(self._stop.wait())
        done, _ = await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            stopper.cancel()
            task.result()
            return
        await stopping.cancelled(task, grace=HAND_BACK_WAIT_S)

    async def _watch_fence(self) -> None:
        """In DUAL_WRITE: return (by raising FencedOut) as soon as another controller took ZooKeeper over.

        Watches on `/controller`, `/controller_epoch` and `/migration` make it prompt without any write of
        ours; a dual write that found the fence gone ends it too.
        """
        driver, kazoo = self.driver, self.kazoo
        assert driver is not None and kazoo is not None
        loop = asyncio.get_running_loop()
        changed = asyncio.Event()
        state = driver.leadership

        def watch(_event: Any) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody watches any more
                loop.call_soon_threadsafe(changed.set)

        def taken_over() -> str | None:
            # exists() leaves a watch for creation, deletion and data changes whether or not the znode is there.
            kazoo.exists(paths.CONTROLLER, watch=watch)
            epoch = kazoo.exists(paths.CONTROLLER_EPOCH, watch=watch)
            migration = kazoo.exists(paths.MIGRATION, watch=watch)
            if epoch is None or epoch.version != state.zk_controller_epoch_zk_version:
                found = "absent" if epoch is None else f"at version {epoch.version}"
                return (
                    f"{paths.CONTROLLER_EPOCH} is {found}, not version {state.zk_controller_epoch_zk_version} "
                    f"this controller's claim left: another controller took over"
                )
            if migration is not None:
                data, stat = kazoo.get(paths.MIGRATION)
                znode = decode_migration(paths.MIGRATION, data, zk_version=stat.version)
                if (znode.kraft_controller_id, znode.kraft_controller_epoch) != (
                    state.kraft_controller_id,
                    state.kraft_controller_epoch,
                ):
                    return (
                        f"{paths.MIGRATION} now names KRaft controller {znode.kraft_controller_id} (epoch "
                        f"{znode.kraft_controller_epoch}): another KRaft controller is making writes to ZooKeeper"
                    )
            return None

        next_check = 0.0
        while driver.fenced_reason is None:
            if changed.is_set() or time.monotonic() >= next_check:
                changed.clear()
                next_check = time.monotonic() + FENCE_RECHECK_S
                try:
                    reason = await loop.run_in_executor(None, taken_over)
                except (KazooException, Zk2KraftError) as exc:
                    # Unreadable for now (connection trouble): the guards of every write still fence.
                    log.warning("event=fence_check_failed %s", error_text(exc))
                    reason = None
                if reason is not None and driver.fenced_reason is None:
                    driver.note_fenced(reason)
                    break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), 0.1)
        raise FencedOut(driver.fenced_reason)

    async def _report_new_holder(self, reason: str) -> None:
        """The error of a fenced controller: why, and who holds `/controller` now."""
        assert self.zk is not None
        try:
            holder = await asyncio.get_running_loop().run_in_executor(None, self.zk.controller_holder)
            now = holder.describe()
        except (KazooException, Zk2KraftError) as exc:
            now = f"{paths.CONTROLLER} could not be read ({exc})"
        self._fail(f"fenced: {reason}; now {now}")

    def _on_fenced(self, reason: str) -> None:
        assert self.driver is not None
        self.driver.step_down(reason)
        self.metrics.set_fenced(True)
        self.metrics.set_last_error(reason)
        log.error("event=fenced standby=%s reason=%r", self.config.standby, reason)
        self._notify()

    async def _close_log(self) -> None:
        """Close the log (releasing its directory lock); requests are refused until it is reopened."""
        if self.log is None or self._log_closed:
            return
        self._log_closed = True
        await asyncio.get_running_loop().run_in_executor(None, self.log.close)

    async def _reopen_for_takeover(self) -> None:
        """Re-open the log (a new leader epoch, and whatever another writer appended) and start again."""
        assert self.log is not None
        old = self.log
        await self._close_log()
        self.log = await self._open_log(old.cluster_id or "")
        self.driver = self._new_driver(self.log)
        self.metrics.set_fenced(False)
        self.metrics.set_last_error(None)
        self._notify()

    def _new_driver(self, metadata_log: MetadataLog) -> MigrationDriver:
        """The driver of a new leadership over `metadata_log`; the pipeline writes its commits through it."""
        assert self.zk is not None
        mv = mvs.parse(self.config.metadata_version) if self.config.metadata_version else None
        driver = MigrationDriver(
            self.zk,
            metadata_log,
            zk_options=self.zk_options,
            node_id=self.config.node_id,
            zk_executor=self.pipeline.writer,
            metadata_version=mv,
            adopt_existing_migration=self.config.adopt_existing_migration,
            min_batch_size=self.config.min_batch_size,
            on_transition=self._on_transition,
            on_zk_write=self._on_zk_write,
            on_fenced=self._on_fence_lost,
            before_dual_write=self._before_dual_write,
            wait_for_brokers=None if self.config.rehearsal else self._wait_for_brokers,
        )
        self.pipeline.attach(metadata_log, driver)
        self._activate_brokers(metadata_log, driver)
        return driver

    # ------------------------------------------------------------------ brokers

    def _activate_brokers(self, metadata_log: MetadataLog, driver: MigrationDriver) -> None:
        """A new leadership: the brokers' sessions start now; the session-expiry timer runs once per process."""
        if self.broker_lifecycle is None:
            settings = ControllerSettings(
                cluster_id=metadata_log.cluster_id or self.cluster_id or "",
                inter_broker_listener_name=self.config.inter_broker_listener_name,
                node_id=self.config.node_id,
                session_timeout_ms=self.config.broker_session_timeout_ms,
            )
            node_id = self.config.node_id
            self.broker_lifecycle = BrokerLifecycle(
                settings,
                self.pipeline,
                unclean_enabled=lambda image, topic: unclean_election_enabled(image, node_id, topic),
                on_change=self._sync_brokers,
            )
            self._spawn(self.broker_lifecycle.expire_sessions)
            lifecycle = self.broker_lifecycle
            if self.config.auto_leader_rebalance_enable and not self.config.rehearsal:
                # In a rehearsal nobody registers: every preferred election would find no valid leader.
                interval = self.config.leader_imbalance_check_interval_s
                self._spawn(lambda: lifecycle.balance_leaders(interval))
            if not self.config.rehearsal:
                unclean_s = self.config.unclean_leader_election_interval_ms / 1000
                self._spawn(lambda: lifecycle.elect_unclean_leaders(unclean_s))
        self.broker_lifecycle.activate(metadata_log, driver)
        self._sync_brokers()

    def _on_zk_brokers(self, brokers: Mapping[int, Any]) -> None:
        """kazoo's thread: in a rehearsal, ZooKeeper's brokers are the migrating ZK brokers; otherwise a
        broker that appears there without registering is flagged."""
        if self.config.rehearsal:
            self.metrics.set_brokers(
                BrokersStatus(registered=len(brokers), migrating_zk_brokers=len(brokers), rehearsal=True)
            )
            return
        loop = self._loop
        if loop is not None and not loop.is_closed():
            # On the event loop, as every other sync: counts read here could overwrite newer ones.
            with contextlib.suppress(RuntimeError):  # the loop is closing
                loop.call_soon_threadsafe(self._sync_brokers)

    def _sync_brokers(self, waiting_for: list[int] | None = None) -> None:
        """The brokers' counts (and who is missing or never registered) to /status, /metrics and the log."""
        lifecycle = self.broker_lifecycle
        if self.config.rehearsal or lifecycle is None:
            return
        counts = lifecycle.counts()
        if waiting_for is None and self.state == DriverState.WAIT_FOR_BROKERS:
            # A registration or a ZooKeeper change while waiting: the wait's next poll says who is missing.
            waiting_for = self.metrics.status().brokers.waiting_for
        in_zookeeper = self.brokers.brokers.keys() if self.brokers is not None else ()
        unregistered = self._unregistered_zk_brokers(in_zookeeper, waiting_for)
        previous = self.metrics.set_brokers(
            BrokersStatus(
                registered=counts.registered, fenced=counts.fenced,
                in_controlled_shutdown=counts.in_controlled_shutdown,
                migrating_zk_brokers=counts.migrating_zk_brokers, waiting_for=waiting_for,
                unregistered_zk_brokers=unregistered,
            )
        )  # fmt: skip
        if previous.unregistered_zk_brokers != unregistered:
            if unregistered:
                log.warning(
                    "event=zk_brokers_not_registered ids=%s: in /brokers/ids but not registered with this "
                    "controller as migrating ZooKeeper brokers, or fenced for silence; restarted without "
                    "zookeeper.metadata.migration.enable=true? they get no metadata from this controller",
                    ",".join(map(str, unregistered)),
                )
            else:
                log.info("event=zk_brokers_not_registered ids=none: every broker in /brokers/ids is registered")

    def _unregistered_zk_brokers(self, in_zookeeper: Iterable[int], waiting_for: list[int] | None) -> list[int]:
        """Kafka's WAIT_FOR_BROKERS check kept after the wait: ids in /brokers/ids with no migrating ZooKeeper
        broker registration, or whose registration was fenced for silence while the broker runs in ZooKeeper
        (restarted without the migration flag). Empty until past the wait, where `waiting_for` names them."""
        if waiting_for is not None or self.log is None or self.state.value < DriverState.BECOME_CONTROLLER.value:
            return []
        registered = self.log.image.cluster.brokers
        lifecycle = self.broker_lifecycle
        heartbeats = lifecycle.cluster.heartbeats if lifecycle is not None else None

        def not_talking(broker_id: int) -> bool:
            broker = registered.get(broker_id)
            if broker is None or not broker.is_migrating_zk_broker:
                return True
            return broker.fenced and heartbeats is not None and heartbeats.silent(broker_id)

        return sorted(i for i in in_zookeeper if not_talking(i))

    async def _wait_for_brokers(self) -> None:
        """WAIT_FOR_BROKERS (KRaftMigrationDriver): every broker under /brokers/ids and every broker named in
        a partition assignment must have registered as a migrating ZooKeeper broker (fenced ones count)."""
        loop = asyncio.get_running_loop()
        reported: list[int] | None = None
        while True:
            assert self.log is not None and self.brokers is not None
            in_zookeeper = set(self.brokers.brokers)
            assigned = await loop.run_in_executor(None, self._assigned_broker_ids)
            registered = {
                b.broker_id for b in self.log.image.cluster.brokers.values() if b.is_migrating_zk_broker
            }
            missing = sorted((in_zookeeper | assigned) - registered)
            if in_zookeeper and registered and not missing:
                log.info("event=brokers_ready registered=%s", ",".join(map(str, sorted(registered))))
                self._sync_brokers()
                return
            if missing != reported:
                reported = missing
                log.warning(
                    "event=waiting_for_brokers missing=%s in_zookeeper=%s assigned=%s: the migration starts "
                    "once every broker runs in migration mode and has registered with this controller",
                    ",".join(map(str, missing)) or "none (no broker under /brokers/ids)",
                    ",".join(map(str, sorted(in_zookeeper))), ",".join(map(str, sorted(assigned))),
                )  # fmt: skip
            self._sync_brokers(missing)
            await asyncio.sleep(WAIT_FOR_BROKERS_POLL_S)

    def _assigned_broker_ids(self) -> set[int]:
        """The broker ids named in ZooKeeper's partition assignments (replicas and adding replicas)."""
        assert self.kazoo is not None
        ids: set[int] = set()
        try:
            topics = self.kazoo.get_children(paths.TOPICS)
        except NoNodeError:
            return ids
        for topic in topics:
            path = f"{paths.TOPICS}/{topic}"
            try:
                data, _stat = self.kazoo.get(path)
            except NoNodeError:
                continue
            assignment = decode_topic(path, data)
            for replicas in assignment.partitions.values():
                ids.update(replicas)
            for replicas in assignment.adding_replicas.values():
                ids.update(replicas)
        return ids

    async def _on_broker_request(self, ctx: RequestContext, body: Any) -> Any:
        """BrokerRegistration, BrokerHeartbeat, AssignReplicasToDirs (Kafka's ControllerApis), from WAIT_FOR_BROKERS on."""
        started = time.monotonic()
        lifecycle = self.broker_lifecycle
        if lifecycle is None or self._log_closed:
            response = error_response(ctx.api_key, ctx.api_version, body, ErrorCode.not_controller)
        elif ctx.api_key == BROKER_REGISTRATION:
            response = await lifecycle.register(body, ctx.api_version)
        elif ctx.api_key == broker_lifecycle.ASSIGN_REPLICAS_TO_DIRS:
            response = await lifecycle.assign_replicas_to_dirs(body, ctx.api_version)
        elif ctx.api_key == UNREGISTER_BROKER:
            response = await lifecycle.unregister(body, ctx.api_version)
        else:
            response = await lifecycle.heartbeat(body, ctx.api_version)
        asyncio.get_running_loop().call_soon(
            self._count_request, ctx.api_key, response, time.monotonic() - started
        )
        return response

    def _zk_cluster_id(self) -> str:
        assert self.zk is not None
        found = self.zk.get(paths.CLUSTER_ID)
        if found is None:
            raise MigrationMismatchError(
                f"ZooKeeper {self.config.zk_connect} has no {paths.CLUSTER_ID}: no Kafka broker ever started "
                f"there, so there is no cluster to migrate" + self.zk_options.kafka_chroot_hint()
            )
        return decode_cluster_id(paths.CLUSTER_ID, found[0])

    async def _dry_run(self) -> int:
        """Print the ZooKeeper writes a reconciliation of the existing log would make; write nothing."""
        assert self.zk is not None
        loop = asyncio.get_running_loop()
        pdir = self.config.metadata_dir / "__cluster_metadata-0"
        image = MetadataImage()
        if pdir.is_dir():
            image, _report = await loop.run_in_executor(None, load_image, self.config.metadata_dir)
        if image.features.zk_migration_state != ZkMigrationState.MIGRATION:
            self.dry_run_lines = [
                f"# {self.config.metadata_dir} holds no completed migration: a real run would first migrate "
                f"ZooKeeper into the log; reconciling the empty image would plan these writes:"
            ]

        async def in_thread(fn: Callable[[], Any]) -> Any:
            return await loop.run_in_executor(None, fn)

        self.dry_run_lines += await plan_dry_run(self.zk_options, image, in_thread)
        return EXIT_OK

    async def _shutdown(self) -> None:
        """Stop in bounded time: serve nothing more, give the dual writes in flight SHUTDOWN_WRITES_WAIT_S,
        then stop the ZooKeeper client (which ends every call still waiting for ZooKeeper) and say what
        ZooKeeper was left without."""
        loop = asyncio.get_running_loop()
        if self._bound is not None:  # bound, never served: a refusal or failure came before serving
            bound_listener, bound_status = self._bound
            self._bound = None
            await bound_listener.stop()
            if bound_status is not None:
                bound_status.stop()
        if self.listener is not None:
            # A controller that renounced or was fenced answers what it failed NOT_CONTROLLER (Kafka fails its
            # pending events so), and brokers retry elsewhere at once instead of after a dropped connection.
            grace = LEADERSHIP_LOST_ANSWER_S if self.renounced is not None or self.fenced else 0.0
            with contextlib.suppress(Exception):
                await self.listener.stop(answer_within_s=grace)
        await self._stop_watcher()
        await self.channel.close()
        await asyncio.gather(*(stopping.cancelled(task) for task in list(self._tasks)))
        unwritten = await self.pipeline.close(SHUTDOWN_WRITES_WAIT_S)
        if self.brokers is not None:
            self.brokers.stop()
        session, self._zk_client_stopped = "closed", True
        if self.kazoo is not None:
            kazoo, connected = self.kazoo, self.kazoo.connected
            self._zk_client_stopped = await stopping.within(kazoo.stop, ZK_CLOSE_WAIT_S, "zk-client-stop")
            if not self._zk_client_stopped:
                session = f"not closed within {ZK_CLOSE_WAIT_S:.0f} s (the server expires it)"
            elif not connected:
                session = "not closed: ZooKeeper unreachable (the server expires it)"
            with contextlib.suppress(Exception):
                await loop.run_in_executor(None, kazoo.close)
        with contextlib.suppress(Exception):
            await self._close_log()
        if self.status_server is not None:
            self.status_server.stop()
        self._log_left_behind(unwritten, session)

    def _log_left_behind(self, unwritten: int, session: str) -> None:
        """One line, when a stop could not hand everything to ZooKeeper (unreachable or slow)."""
        driver, metadata_log = self.driver, self.log
        missing, why = "none", []
        if driver is not None and metadata_log is not None and driver.writes_to_zookeeper:
            zk_offset, durable = driver.leadership.kraft_metadata_offset, metadata_log.durable_offset
            if zk_offset < durable:
                missing = f"{zk_offset + 1}..{durable}"
                why.append(
                    "ZooKeeper lacks the committed changes at these offsets (unanswered requests among them "
                    "failed); the metadata log holds them and the next leader writes them to ZooKeeper as it "
                    "reconciles"
                )
        if (
            driver is not None
            and driver.fenced_reason is None  # fenced: nothing of ours to hand back
            and driver.state != DriverState.DUAL_WRITE
            and driver.leadership.holds_zk_controller
        ):
            why.append(
                f"{paths.CONTROLLER} and {paths.MIGRATION} were not handed back before DUAL_WRITE: `zk2kraft "
                f"status` shows who holds them once ZooKeeper answers"
            )
        if why or unwritten:
            log.warning(
                "event=stopped_with_zk_behind missing_offsets=%s unwritten_dual_writes=%d zk_session=%s: %s",
                missing, unwritten, session, "; ".join(why) or "ZooKeeper did not answer them in time",
            )  # fmt: skip

    # ------------------------------------------------------------------ metrics and status

    def _notify(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def _on_transition(self, _old: DriverState, new: DriverState) -> None:
        self.metrics.set_state(new)
        self._sync_metrics()
        self._sync_brokers()  # past WAIT_FOR_BROKERS, brokers that never registered are flagged
        self._notify()

    def _on_fence_lost(self, reason: str) -> None:
        """Any thread: a write found the fence gone; report it at once (the event loop then goes INACTIVE)."""
        self.metrics.set_fenced(True)
        self.metrics.set_last_error(reason)
        self._notify()

    def _on_zk_write(self, kind: str, seconds: float, ops: int) -> None:
        self.metrics.observe_zk_write(kind, seconds)

    def _sync_metrics(self) -> None:
        driver, metadata_log = self.driver, self.log
        if driver is None or metadata_log is None:
            return
        image = metadata_log.image
        self.metrics.set_zk_migration_state(image.features.zk_migration_state)
        leadership = driver.leadership
        self.metrics.set_leadership(metadata_log.leader_epoch, leadership.zk_controller_epoch)
        self.metrics.set_offsets(
            log_end_offset=metadata_log.end_offset - 1,
            durable_offset=metadata_log.durable_offset,
            zk_offset=leadership.kraft_metadata_offset,
        )

    # ------------------------------------------------------------------ requests

    async def _on_request(self, ctx: RequestContext, body: Any) -> Any:
        if not self._permitted(ctx):
            return self._refuse(ctx, body)
        if ctx.api_key == ENVELOPE_KEY:
            return await self._on_envelope(ctx, body)
        if ctx.api_key in broker_lifecycle.SUPPORTED:
            return await self._on_broker_request(ctx, body)
        return await self._process(ctx.api_key, ctx.api_version, body, ctx.principal, ctx.client_id)

    async def _on_envelope(self, ctx: RequestContext, envelope: Any) -> Any:
        """Unwrap a forwarded request, process it as its principal, wrap the inner response (KIP-590)."""
        source = f"EnvelopeRequest from {ctx.peer_text}"
        started = time.monotonic()
        try:
            inner = decode_request(envelope.request_data, source, self.supported)
            principal = decode_principal(envelope.request_principal, source)
        except UnsupportedVersionError as exc:
            log.warning("%s", exc)
            return self._envelope_error(ErrorCode.unsupported_version, started)
        except Zk2KraftError as exc:
            log.warning("%s: %s", source, exc)
            return self._envelope_error(ErrorCode.invalid_request, started)
        if inner.api_key not in FORWARDABLE:
            log.warning("%s: %s cannot be forwarded", source, describe_api(inner.api_key, inner.api_version))
            return self._envelope_error(ErrorCode.invalid_request, started)
        if inner.api_key in broker_lifecycle.SUPPORTED:  # UnregisterBroker: RUNS_IN_PREMIGRATION, as the others
            forwarded = dataclasses.replace(
                ctx, api_key=inner.api_key, api_version=inner.api_version, principal=principal,
                client_id=inner.client_id, correlation_id=inner.correlation_id,
            )  # fmt: skip
            response = await self._on_broker_request(forwarded, inner.body)
        elif not self._serving():
            # The forwarding broker retries an envelope answered NOT_CONTROLLER (NodeToControllerChannelManager).
            return self._envelope_error(ErrorCode.not_controller, started)
        else:
            response = await self._process(
                inner.api_key, inner.api_version, inner.body, principal, inner.client_id
            )
        return EnvelopeResponse(
            response_data=encode_response(inner.correlation_id, response), error_code=ErrorCode.none
        )

    async def _on_metadata(self, ctx: RequestContext, body: Any) -> Any:
        """Metadata, which Kafka's controllers do not serve: this controller as the only broker, its log's topics.

        A client pointed here by mistake (instead of at a shim or a broker) gets a working answer and the
        log says where it should go, instead of ApiVersions without Metadata and a silent wait.
        """
        self._tell_client(ctx)
        serving = self._permitted(ctx) and self._serving() and self.log is not None
        image = self.log.image if serving and self.log is not None else MetadataImage()
        caller = reads.Caller(ctx.principal, ctx.peer[0])
        response = reads.metadata(self._identity(ctx), image, body, ctx.api_version, caller)
        return response if serving else dataclasses.replace(response, controller_id=i32(-1))

    async def _on_describe_cluster(self, ctx: RequestContext, body: Any) -> Any:
        """DescribeCluster as Kafka 3.9's ControllerApis answers it (controller endpoint); shims learn the cluster id."""
        if not self._permitted(ctx):
            return self._refuse(ctx, body)
        if int(getattr(body, "endpoint_type", reads.ENDPOINT_BROKERS)) != reads.ENDPOINT_CONTROLLERS:
            self._tell_client(ctx)
        me = self._identity(ctx)
        controller = me.node_id if self._serving() else -1
        return reads.describe_cluster_as(
            reads.ENDPOINT_CONTROLLERS, me.cluster_id or "", controller, [me.node_id], me.host, me.port, None,
            body, ctx.api_version,
        )  # fmt: skip

    def _voter_endpoint(self) -> tuple[str, int] | None:
        """Where this voter listens (controller.quorum.voters names it so); None before it listens."""
        listener = self.listener
        return None if listener is None else (self.config.listen_host, listener.port)

    def _identity(self, ctx: RequestContext) -> reads.ShimIdentity:
        """This controller as clients reach it: the address the connection came in on."""
        host, port = ctx.local
        return reads.ShimIdentity(
            node_id=self.config.node_id,
            host=host or self.config.listen_host,
            port=port or self.listen_port,
            cluster_id=self.cluster_id,
        )

    def _tell_client(self, ctx: RequestContext) -> None:
        """Once per connection: a client asked the controller what brokers answer; say where to go instead."""
        if ctx.peer in self._clients_told:
            return
        if len(self._clients_told) >= 10_000:
            self._clients_told.clear()
        self._clients_told.add(ctx.peer)
        log.warning(
            "event=client_request_at_controller peer=%s client_id=%s api=%s: this is the bridge controller's "
            "listener; it answers Metadata and DescribeCluster to identify itself and takes metadata changes, "
            "but reads (DescribeConfigs, DescribeAcls, ...) only a shim serves: point admin clients at "
            "`zk2kraft shim run --controller %s:%d`",
            ctx.peer_text, ctx.client_id, describe_api(ctx.api_key, ctx.api_version),
            ctx.local[0] or self.config.listen_host, ctx.local[1] or self.listen_port,
        )  # fmt: skip

    def _permitted(self, ctx: RequestContext) -> bool:
        """Whether the connection's principal may send requests (`--envelope-principals`; unset: anyone)."""
        allowed = self.config.envelope_principals
        return allowed is None or str(ctx.principal) in allowed

    def _refuse(self, ctx: RequestContext, body: Any) -> Any:
        """CLUSTER_AUTHORIZATION_FAILED, as ControllerApis answers a caller without CLUSTER_ACTION; nothing is run."""
        log.warning(
            "%s from %s refused: principal %s is not in --envelope-principals",
            describe_api(ctx.api_key, ctx.api_version), ctx.peer_text, ctx.principal,
        )  # fmt: skip
        error = ErrorCode.cluster_authorization_failed
        if ctx.api_key == ENVELOPE_KEY:
            return self._envelope_error(error, time.monotonic())
        self.metrics.observe_request(ctx.api_key, int(error), 0.0)
        return error_response(ctx.api_key, ctx.api_version, body, error)

    def _envelope_error(self, error: ErrorCode, started: float) -> Any:
        self.metrics.observe_request(ENVELOPE_KEY, int(error), time.monotonic() - started)
        return EnvelopeResponse(response_data=None, error_code=error)

    def _serving(self) -> bool:
        """Whether requests are served: a migrated controller that holds ZooKeeper (SYNC_KRAFT_TO_ZK on) and
        has not renounced; Kafka's controller refuses only in PRE_MIGRATION."""
        return self.renounced is None and self.driver is not None and self.driver.accepts_writes

    def _leads_log(self) -> bool:
        """Whether this controller leads its metadata log (Kafka: the Raft leader), whatever the driver's state."""
        return self.log is not None and not self._log_closed and not self.fenced and self.renounced is None

    def _leading_log(self) -> MetadataLog | None:
        """The log followers fetch: this controller's while it leads it, else none (NOT_CONTROLLER)."""
        return self.log if self._leads_log() else None

    async def _process(
        self,
        api_key: int,
        api_version: int,
        body: Any,
        principal: KafkaPrincipal | None,
        client_id: str | None,
    ) -> Any:
        started = time.monotonic()
        response = await self._answer(api_key, api_version, body, principal or ANONYMOUS, client_id)
        # Counted right after the answer goes out: the metrics' label lookups are not the client's wait.
        asyncio.get_running_loop().call_soon(
            self._count_request, api_key, response, time.monotonic() - started
        )
        return response

    def _count_request(self, api_key: int, response: Any, seconds: float) -> None:
        self.metrics.observe_request(api_key, response_error_code(unwrap_response(response)), seconds)

    async def _answer(
        self, api_key: int, api_version: int, body: Any, principal: KafkaPrincipal, client_id: str | None
    ) -> Any:
        # The Raft leader serves its log to followers whenever it leads (brokers catch up while it waits for
        # them); every other request waits for DUAL_WRITE.
        replication = api_key in fetch_server.REPLICATION_KEYS and self._leads_log()
        if not (replication or self._serving()):
            return error_response(api_key, api_version, body, ErrorCode.not_controller)
        handler = self.handlers[api_key]
        rehearsal_brokers = self.brokers if self.config.rehearsal else None
        now_ms = time.time_ns() // 1_000_000

        def generate(image: MetadataImage) -> tuple[Any, Change]:
            # In a write event, against the image the records are appended to (nothing runs in between).
            context = HandlerContext(
                image=rehearsal_brokers.with_brokers(image) if rehearsal_brokers is not None else image,
                api_version=api_version,
                node_id=self.config.node_id,
                now_ms=now_ms,
                principal=principal,
                client_id=client_id,
                new_uuid=self.new_uuid,
            )
            result: ControllerResult = handler(context, body)
            if not result.records:
                return result.response, Change([])
            # Encoded on the event loop while ZooKeeper writes the change (when it goes out as one multi).
            encoded = EncodedResponse(result.response)
            return encoded, Change(result.records, atomic=result.atomic, encoded=encoded)

        try:
            if api_key in READ_ONLY_KEYS:  # Kafka's read events: no write event, never behind one
                assert self.log is not None
                answer = generate(self.log.image)[0]
                if api_key in COMMITTED_READ_KEYS:
                    await self.pipeline.committed()  # what it read is committed before it is told
                return answer
            response, _last = await self.pipeline.write(generate)
        except (FencedOut, ControllerFailed):
            return error_response(api_key, api_version, body, ErrorCode.not_controller)
        except Zk2KraftError as exc:
            log.warning("%s: %s", describe_api(api_key, api_version), exc)
            return error_response(api_key, api_version, body, ErrorCode.invalid_request, str(exc))
        except Exception:
            log.exception("%s failed", describe_api(api_key, api_version))
            return error_response(api_key, api_version, body, ErrorCode.unknown_server_error)
        return response

    # ------------------------------------------------------------------ requests to ZooKeeper-mode brokers

    async def _before_dual_write(self) -> None:
        """KRAFT_CONTROLLER_TO_BROKER_COMM: arm the foreign-write watches, then start the full sync of the
        brokers (after the initial migration, and after every restart or takeover)."""
        await self._start_watcher()
        driver, metadata_log = self.driver, self.log
        assert driver is not None and metadata_log is not None
        ctx = PropagationContext(
            controller_id=self.config.node_id,
            zk_controller_epoch=driver.leadership.zk_controller_epoch,
            inter_broker_listener=self.config.inter_broker_listener_name,
        )
        self.channel.full_sync(metadata_log.image, ctx)

    def _may_send_to_brokers(self) -> bool:
        """Only a controller that holds ZooKeeper, from KRAFT_CONTROLLER_TO_BROKER_COMM on, sends (any thread)."""
        driver = self.driver
        return (
            driver is not None
            and driver.fenced_reason is None
            and driver.state in (DriverState.KRAFT_CONTROLLER_TO_BROKER_COMM, DriverState.DUAL_WRITE)
        )

    def _on_published(self, batch: PublishedBatch) -> None:
        """Event loop, in log order: a committed batch's incremental requests (if it touched topics or brokers)."""
        if self._may_send_to_brokers():
            self.channel.publish(batch.records, batch.before, batch.after, batch.image)

    # ------------------------------------------------------------------ foreign ZooKeeper writes

    async def _start_watcher(self) -> None:
        """In DUAL_WRITE: notice ZooKeeper changes made by others (`--foreign-zk-writes`)."""
        if self.kazoo is None:
            return
        mode = ForeignWriteMode(self.config.foreign_zk_writes)
        watcher = ForeignWriteWatcher(
            self.kazoo,
            self.pipeline.hold_appends,
            None if mode is ForeignWriteMode.REPORT else self._on_foreign_writes,
            mode=mode,
            metrics=self.metrics,
        )
        self.watcher = watcher
        self.pipeline.judged_by(watcher.own_writes)
        if self.zk is not None:  # our own writes' watch events need no judgment (no appends held)
            self.zk.observer = watcher.written
        # Armed before DUAL_WRITE; the first scan catches what changed since the reconciliation read.
        await asyncio.get_running_loop().run_in_executor(None, lambda: watcher.start(scan=True))

    async def _stop_watcher(self) -> None:
        watcher, self.watcher = self.watcher, None
        self.pipeline.judged_by(None)
        if self.zk is not None:
            self.zk.observer = None
        if watcher is not None:
            # Stopping, its thread is hardly waited for: it may be in a call to an unreachable ZooKeeper.
            join_s = 0.5 if self._stop is not None and self._stop.is_set() else 10.0
            await asyncio.get_running_loop().run_in_executor(None, watcher.stop, join_s)
        self.pipeline.release_appends()

    def _on_foreign_writes(self, batch: ForeignWriteBatch) -> None:
        """Watcher thread, right after judging (ZooKeeper and the image agree but for `batch`)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        work: Callable[[], Any]
        if batch.mode is ForeignWriteMode.IMPORT:
            work = lambda: self._import_foreign(batch)  # noqa: E731
        else:
            work = lambda: self._revert_foreign(batch)  # noqa: E731
        with contextlib.suppress(RuntimeError):  # the loop is closing
            loop.call_soon_threadsafe(self._spawn, work)

    def _spawn(self, work: Callable[[], Any]) -> None:
        task = asyncio.ensure_future(work())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _import_foreign(self, batch: ForeignWriteBatch) -> None:
        """Append the records that make the log say what ZooKeeper says, as if requested."""
        if not self._serving():
            log.warning("foreign ZooKeeper writes not imported: not in DUAL_WRITE (%s)", self.state.name)
            return

        def generate(image: MetadataImage) -> tuple[None, Change]:
            # Planned in the write event, against the image its records are appended to.
            plan = batch.import_plan(image)
            for write, why in plan.not_imported:
                log.warning("foreign ZooKeeper write at %s not imported: %s", write.path, why)
            return None, Change(plan.records)

        try:
            _none, offset = await self.pipeline.write(generate)
            if offset is not None:
                log.info(
                    "event=foreign_import last_offset=%d paths=%s", offset, ",".join(w.path for w in batch.writes)
                )
        except (FencedOut, Zk2KraftError) as exc:
            log.error("foreign ZooKeeper writes not imported: %s", error_text(exc))
        finally:
            self.foreign_batches_handled += 1
            self._notify()

    async def _revert_foreign(self, batch: ForeignWriteBatch) -> None:
        """Write the log's state back over the foreign writes (after any dual write queued before)."""
        if not self._serving():
            log.warning("foreign ZooKeeper writes not reverted: not in DUAL_WRITE (%s)", self.state.name)
            return
        assert self.log is not None and self.driver is not None
        try:
            # Planned on the event loop against the current image: it is what ZooKeeper must say.
            ops = batch.revert_operations(self.log.image)
            if ops:
                await self.pipeline.queue_revert(ops)
                log.info(
                    "event=foreign_revert ops=%d paths=%s", len(ops), ",".join(w.path for w in batch.writes)
                )
        except (FencedOut, Zk2KraftError, KazooException) as exc:
            log.error("foreign ZooKeeper writes not reverted: %s", exc)
        finally:
            self.foreign_batches_handled += 1
            self._notify()


def _open_metadata_log(config: BridgeConfig, cluster_id: str) -> MetadataLog:
    return MetadataLog.open(
        config.metadata_dir,
        node_id=config.node_id,
        cluster_id=cluster_id or None,
        metadata_version=config.metadata_version,
        fsync=config.fsync,
    )
