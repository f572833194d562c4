"""The bridge controller process: wiring and lifecycle (Kafka's ControllerServer, and QuorumController's
start, leadership and shutdown).

`BridgeController(config).run()` is `zk2kraft bridge run`; tests and tools use `start()` / `stop()`, which
run the same thing on a background thread. Requests come in through `ControllerApis` (`routing`); the
migration driver (`bridge.driver`) leads the way to DUAL_WRITE.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException

from bridge import broker_lifecycle, stopping
from bridge.api import ControllerHandler, DriverState
from bridge.broker_channel import BrokerChannel, ChannelSettings, Propagation
from bridge.broker_lifecycle import BrokerLifecycle
from bridge.brokers.cluster import ControllerSettings
from bridge.brokers.propagation import PropagationContext
from bridge.config import (
    EXIT_REFUSED,
    BridgeConfig,
    inter_broker_security,
    listener_principal_mapper,
    listener_sasl,
    listener_ssl_context,
    zk_connect_options,
)
from bridge.controller import startup
from bridge.controller.fence import watch_fence
from bridge.controller.foreign import ForeignWrites
from bridge.controller.handoff_hint import handoff_hint
from bridge.controller.quorum import QuorumSeat
from bridge.controller.routing import ControllerApis
from bridge.controller.zk_brokers import ZkBrokerTracking
from bridge.controller.zk_copy import FollowerZkCopy
from bridge.driver import FencedOut, MigrationDriver, MigrationMismatchError
from bridge.handlers.alter_partition import unclean_election_enabled
from bridge.handlers.registry import load_handlers
from bridge.kafka.listener import KafkaListener
from bridge.metrics import BridgeMetrics, BridgeStatus, ProcessStatus, StatusServer
from bridge.pipeline import DualWritePipeline, PublishedBatch
from bridge.raft import fetch_server
from bridge.raft.metadata_log import MetadataLog
from bridge.zk.broker_registry import ZkBrokerRegistry
from bridge.zk.foreign_writes import ForeignWriteWatcher
from bridge.zk.migration_client import ZkMigrationClient
from bridge.zk.scram_credentials import zookeeper_scram_credentials
from migrate.errors import (
    EXIT_FAILED,
    EXIT_FENCED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    UnreachableError,
    Zk2KraftError,
)
from migrate.kraft import metadata_version as mvs
from migrate.kraft.image import MetadataImage
from migrate.kraft.quorum_voters import render_quorum_voters
from migrate.zk import paths

log = logging.getLogger(__package__)  # the controller process logs as one: "bridge.controller"

LEADERSHIP_LOST_ANSWER_S = 2.0
"""How long a controller that renounced or was fenced lets the requests it fails NOT_CONTROLLER be answered."""
SHUTDOWN_WRITES_WAIT_S = 10.0
"""On a stop, how long the dual writes in flight may take; then the stop goes on without them (the log holds
their changes; the next leader reconciles ZooKeeper)."""
HAND_BACK_WAIT_S = 10.0
"""On a stop before DUAL_WRITE, how long handing ZooKeeper back (`MigrationDriver.abandon`) may take."""
ZK_CLOSE_WAIT_S = 5.0
"""On a stop, how long closing the ZooKeeper session may take (it cannot be closed while ZooKeeper is away)."""
STOP_DEADLINE_S = 30.0
"""`bridge run` ends this long after a stop began whatever still runs (exit 4, naming the threads)."""


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
        # SCRAM logins are checked against the live image: a credential committed now serves the next login.
        # Until the migration copied them, against ZooKeeper's, which the brokers check today.
        self._sasl = listener_sasl(
            config,
            lambda: self.log.image if self.log is not None else MetadataImage(),
            zookeeper_scram_credentials(lambda: self.kazoo),
        )
        broker_tls, broker_sasl = inter_broker_security(config)  # so do the channel's to the brokers
        self.zk_options = zk_connect_options(config)
        self.metrics = BridgeMetrics(config.node_id, foreign_writes_mode=config.foreign_zk_writes)
        self.metrics.process = ProcessStatus(
            pid=os.getpid(), metadata_dir=str(config.metadata_dir), zookeeper=config.zk_connect,
            voters=render_quorum_voters(config.voters) if config.voters else None,
        )  # fmt: skip
        zk_copy = FollowerZkCopy(self.zk_options) if len(config.voters) > 1 else None
        self.quorum = QuorumSeat(config, self.metrics, self.notify, zk_copy) if zk_copy is not None else None
        if handlers is None:
            loaded, loaded_supported = load_handlers()
            self.handlers: dict[int, ControllerHandler] = loaded
            self.supported: dict[int, tuple[int, int]] = dict(supported or loaded_supported)
        if handlers is None and self.quorum is None:
            # Fetch/FetchSnapshot/DescribeQuorum of __cluster_metadata, served from the live log while this
            # controller leads it; the voter is named with the address this controller listens on.
            fetch_server.register(
                self.handlers, self.supported, self._leading_log, self._voter_endpoint,
                self.config.controller_listener_name,
            )  # fmt: skip
        elif handlers is not None:
            self.handlers = dict(handlers)
            self.supported = dict(supported or {})
        # The brokers' own requests reach ControllerApis' broker path (before DUAL_WRITE too), not `_answer`.
        for api_key in broker_lifecycle.SUPPORTED:
            self.handlers.setdefault(api_key, broker_lifecycle.served_by_lifecycle)
            self.supported.setdefault(api_key, broker_lifecycle.SUPPORTED[api_key])
        self.broker_lifecycle: BrokerLifecycle | None = None
        self.new_uuid = new_uuid
        self.exit_code: int | None = None
        self.dry_run_lines: list[str] = []
        self.error: str | None = None
        self.kazoo: KazooClient | None = None
        self.zk: ZkMigrationClient | None = None
        self.log: MetadataLog | None = None
        self.driver: MigrationDriver | None = None
        self.listener: KafkaListener | None = None
        self.cluster_id: str | None = None  # ZooKeeper's /cluster/id, once read
        self.status_server: StatusServer | None = None
        # The listener and status server bound (their ports claimed) but not serving yet.
        self._bound: tuple[KafkaListener, StatusServer | None] | None = None
        self.brokers: ZkBrokerRegistry | None = None
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
        self.log_closed = False
        self.left_behind = False  # a stop left ZooKeeper behind the log (then no hand-off is suggested)
        self.apis = ControllerApis(self)
        self.foreign = ForeignWrites(self)
        self._broker_tracking = ZkBrokerTracking(self)
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
        elif self.fenced and (self.quorum is None or self.quorum.leading):  # a fenced voter follows afterwards
            status = status.model_copy(update={"state": "FENCED", "fenced": True})
        return status

    def run(self) -> int:
        """Run in the foreground until SIGTERM/SIGINT, a lost fence or a refusal; returns the exit code.

        Its stop ends within STOP_DEADLINE_S (by the interpreter's exit if a thread is in a ZooKeeper call)."""
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

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop the controller runs on; None before it started."""
        return self._loop

    @property
    def stopping(self) -> bool:
        return self._stop is not None and self._stop.is_set()

    @property
    def watcher(self) -> ForeignWriteWatcher | None:
        """The foreign-write watcher of this DUAL_WRITE leadership, if running."""
        return self.foreign.watcher

    @property
    def foreign_batches_handled(self) -> int:
        return self.foreign.batches_handled

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
            self.notify()
            self._ready.set()
        log.info("event=stopped exit_code=%d", code)
        if code == EXIT_OK and self.log is not None and not self.left_behind:
            log.info("%s", handoff_hint(self.config))
        return code

    def _on_signal(self, signum: int) -> None:
        log.info("event=signal signal=%s; shutting down", signal.Signals(signum).name)
        assert self._stop is not None
        self._stop.set()

    def _renounce(self, reason: str) -> None:
        """Event loop: the metadata log cannot take changes; serve nothing more and stop with EXIT_FAILED.

        Kafka's controller renounces on a failed append (its fatal fault handler then halts the process);
        ZooKeeper is released as the session closes, and holds nothing the log does not (dual writes follow
        durability). A supervisor restarts the bridge; in a quorum another voter takes over.
        """
        if self.renounced is not None:
            return
        self.renounced = reason
        self.error = f"renounced: {reason}"
        self.metrics.set_failed(reason)
        log.error(
            "event=renounced %s; this controller stops serving and exits with code %d so that a supervisor "
            "restarts it (or, in a quorum, another voter takes over)", reason, EXIT_FAILED,
        )  # fmt: skip
        self.notify()
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
        zk = self.zk = ZkMigrationClient(self.kazoo)
        cluster_id = await loop.run_in_executor(None, startup.zk_cluster_id, zk, config, options)
        if config.dry_run:
            await startup.dry_run(options, config.metadata_dir, self.dry_run_lines)
            return EXIT_OK
        await startup.check_before_writing(config, zk, options, cluster_id, voter=self.quorum is not None)
        await self._bind_addresses()
        self.brokers = await loop.run_in_executor(None, self._start_broker_registry)
        if self.quorum is not None:
            # A voter serves the Raft requests (and NOT_CONTROLLER) at once; it leads when the quorum elects it.
            await self._start_serving(cluster_id)
            self.log = await self.quorum.open(cluster_id)
            return await self._lead_when_elected(self.quorum)
        self.log = await self._open_log(cluster_id)
        if self.log.cluster_id not in (None, cluster_id):
            raise MigrationMismatchError(
                f"{config.metadata_dir} belongs to cluster {self.log.cluster_id}, but ZooKeeper "
                f"{config.zk_connect} holds cluster {cluster_id}"
            )
        self.driver = self._new_driver(self.log)
        await self._start_serving(cluster_id)
        self._sync_metrics()
        return await self._lead()

    async def _bind_addresses(self) -> tuple[KafkaListener, StatusServer | None]:
        """Claim --listen and --metrics (a busy one is refused, naming it) before anything is written."""
        if self._bound is not None:
            return self._bound
        config = self.config
        listener = KafkaListener(
            config.listen_host,
            config.listen_port,
            self.apis.listener_handlers(),
            self.apis.listener_versions(),
            ssl_context=self._ssl_context,
            features=self.apis.api_versions_features,
            sasl=self._sasl,
            principal_mapper=listener_principal_mapper(config),
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
            "event=listening listen=%s:%d metrics=%s node_id=%d cluster_id=%s",
            config.listen_host, self.listener.port,
            self.status_server.url if self.status_server else "off", config.node_id, cluster_id,
        )  # fmt: skip
        self._ready.set()

    def _start_broker_registry(self) -> ZkBrokerRegistry:
        assert self.kazoo is not None
        return ZkBrokerRegistry(self.kazoo, on_change=self._broker_tracking.on_zk_brokers).start()

    async def _open_log(self, cluster_id: str) -> MetadataLog:
        """Open the metadata log (a single bridge's: it leads it alone)."""
        loop = asyncio.get_running_loop()
        opened = await loop.run_in_executor(None, startup.open_metadata_log, self.config, cluster_id)
        self.log_closed = False
        return opened

    async def _lead(self) -> int:
        """Reach DUAL_WRITE and stay there until told to stop (EXIT_OK) or fenced by another controller."""
        assert self.driver is not None and self._stop is not None
        try:
            await self._until_stopped(self.driver.run())
            if self._stop.is_set():
                return EXIT_OK
            self._sync_metrics()
            await self._until_stopped(self._watch_fence())
        except FencedOut as exc:
            self._on_fenced(str(exc))
            await self._report_new_holder(str(exc))
            return EXIT_FENCED
        finally:
            await self.foreign.stop()
            await self.channel.stop()  # a fenced or stopping controller sends brokers nothing more
        return EXIT_FENCED if self.fenced else EXIT_OK

    async def _lead_when_elected(self, seat: QuorumSeat) -> int:
        """Follow the quorum's leader; whenever it elects this bridge, run the driver until the epoch ends."""
        assert self._stop is not None and self.log is not None
        while not self._stop.is_set():
            await self._until_stopped(seat.until_leading())
            if self._stop.is_set():
                break
            epoch = seat.epoch_led
            driver = self.driver = self._new_driver(self.log)
            self.metrics.set_fenced(False)
            self.notify()
            lost = asyncio.ensure_future(seat.until_not_leading(epoch))
            lost.add_done_callback(partial(_step_down_in_dual_write, driver, self.notify, seat.abandon_uncommitted))
            try:
                await self._until_stopped(stopping.until(self._run_driver(), lost, HAND_BACK_WAIT_S))
            except FencedOut as exc:  # another controller claimed ZooKeeper: let the quorum elect again
                self._on_fenced(str(exc))
                seat.resign()
            finally:
                await self.foreign.stop()
                await self.channel.stop()
                lost.cancel()
            self.driver.step_down(f"Raft leadership of epoch {epoch} ended")  # an earlier reason stays
            seat.abandon_uncommitted(self.driver.fenced_reason or "")
            log.info("event=leadership_lost epoch=%d reason=%r", epoch, self.driver.fenced_reason)
            self.metrics.set_fenced(False)  # a follower now: being fenced ended its leadership, not the bridge
            self.notify()
        return EXIT_OK

    async def _run_driver(self) -> None:
        assert self.driver is not None
        await self.driver.run()
        self._sync_metrics()
        await self._watch_fence()

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
        assert self.driver is not None and self.kazoo is not None
        await watch_fence(self.driver, self.kazoo)

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
        log.error("event=fenced reason=%r", reason)
        self.notify()

    async def _close_log(self) -> None:
        """Close the log (releasing its directory lock); requests are refused until it is reopened."""
        if self.log is None or self.log_closed:
            return
        self.log_closed = True
        await asyncio.get_running_loop().run_in_executor(None, self.log.close_with_snapshot)

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
            quorum_committed=self.quorum is not None,
            min_batch_size=self.config.min_batch_size,
            on_transition=self._on_transition,
            on_zk_write=self._on_zk_write,
            on_fenced=self._on_fence_lost,
            before_dual_write=self._before_dual_write,
            wait_for_brokers=None if self.config.rehearsal else self._broker_tracking.wait_for_brokers,
            warm_tree=None if self.quorum is None or self.quorum.zk_copy is None else self.quorum.zk_copy.take,
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
                on_change=self._broker_tracking.sync,
            )
            self.spawn(self.broker_lifecycle.expire_sessions)
            lifecycle = self.broker_lifecycle
            if self.config.auto_leader_rebalance_enable and not self.config.rehearsal:
                # In a rehearsal nobody registers: every preferred election would find no valid leader.
                interval = self.config.leader_imbalance_check_interval_s
                self.spawn(lambda: lifecycle.balance_leaders(interval))
            if not self.config.rehearsal:
                unclean_s = self.config.unclean_leader_election_interval_ms / 1000
                self.spawn(lambda: lifecycle.elect_unclean_leaders(unclean_s))
        self.broker_lifecycle.activate(metadata_log, driver)
        self._broker_tracking.sync()

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
        await self.foreign.stop()
        await self.channel.close()
        await asyncio.gather(*(stopping.cancelled(task) for task in list(self._tasks)))
        unwritten = await self.pipeline.close(SHUTDOWN_WRITES_WAIT_S)
        if self.quorum is not None:  # a leader resigns only now: the writes above needed it to commit
            await self.quorum.close()
            self.log_closed = True
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
        self.left_behind = self._log_left_behind(unwritten, session)

    def _log_left_behind(self, unwritten: int, session: str) -> bool:
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
        return bool(why or unwritten)

    # ------------------------------------------------------------------ metrics and status

    def notify(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def _on_transition(self, _old: DriverState, new: DriverState) -> None:
        self.metrics.set_state(new)
        self._sync_metrics()
        self._broker_tracking.sync()  # past WAIT_FOR_BROKERS, brokers that never registered are flagged
        self.notify()

    def _on_fence_lost(self, reason: str) -> None:
        """Any thread: a write found the fence gone; report it at once (the event loop then goes INACTIVE)."""
        self.metrics.set_fenced(True)
        self.metrics.set_last_error(reason)
        self.notify()

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

    # ------------------------------------------------------------------ what is served

    def _voter_endpoint(self) -> tuple[str, int] | None:
        """Where this voter listens (controller.quorum.voters names it so); None before it listens."""
        listener = self.listener
        return None if listener is None else (self.config.listen_host, listener.port)

    def serving(self) -> bool:
        """Whether requests are served: migrated, holding ZooKeeper (SYNC_KRAFT_TO_ZK on), not renounced."""
        return self.renounced is None and self.driver is not None and self.driver.accepts_writes

    def leads_log(self) -> bool:
        """Whether this controller leads its metadata log (Kafka: the Raft leader), whatever the driver's state."""
        return self.log is not None and not self.log_closed and not self.fenced and self.renounced is None

    def _leading_log(self) -> MetadataLog | None:
        """The log followers fetch: this controller's while it leads it, else none (NOT_CONTROLLER)."""
        return self.log if self.leads_log() else None

    # ------------------------------------------------------------------ requests to ZooKeeper-mode brokers

    async def _before_dual_write(self) -> None:
        """KRAFT_CONTROLLER_TO_BROKER_COMM: arm the foreign-write watches, then start the full sync of the
        brokers (after the initial migration, and after every restart or takeover)."""
        await self.foreign.start()
        driver, metadata_log = self.driver, self.log
        assert driver is not None and metadata_log is not None
        ctx = PropagationContext(
            controller_id=self.config.node_id,
            zk_controller_epoch=driver.leadership.zk_controller_epoch,
            inter_broker_listener=self.config.inter_broker_listener_name,
        )
        driver.brokers_synced = True  # incremental requests follow the full sync (nothing runs in between)
        self.channel.full_sync(metadata_log.image, ctx)

    def _may_send_to_brokers(self) -> bool:
        """Only a controller that holds ZooKeeper and has queued its full sync sends (any thread)."""
        driver = self.driver
        return driver is not None and driver.fenced_reason is None and driver.brokers_synced

    def _on_published(self, batch: PublishedBatch) -> None:
        """Event loop, in log order: a committed batch's incremental requests (if it touched topics or brokers)."""
        if self._may_send_to_brokers():
            self.channel.publish(batch.records, batch.before, batch.after, batch.image)

    # ------------------------------------------------------------------ background work

    def spawn(self, work: Callable[[], Any]) -> None:
        task = asyncio.ensure_future(work())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _step_down_in_dual_write(
    driver: MigrationDriver,
    notify: Callable[[], None],
    abandon: Callable[[str], None],
    ended: asyncio.Future[str],
) -> None:
    """Raft leadership lost in DUAL_WRITE, where nothing is handed back: refuse writes, stop claiming
    DUAL_WRITE and answer what waits for commit at once, not once the driver's task and the watchers have
    stopped (the foreign-write watcher's stop would wait for those writes)."""
    if not ended.cancelled() and driver.state == DriverState.DUAL_WRITE:
        driver.step_down(ended.result())
        abandon(ended.result())
        notify()
