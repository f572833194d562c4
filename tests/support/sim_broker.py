"""What every simulated Kafka 3.9 broker does with its controller (controller-broker.md §2.1, §4.1, §5.2-5.3).

One process start: a Raft observer following `__cluster_metadata` (Fetch with the broker's id), registration
with a new incarnation, heartbeats every interval with the offset it has applied, asking to be unfenced once
the controller says it is caught up, controlled shutdown through heartbeats, or a crash. Given the quorum's
voters (`voters`), it finds the active controller as a broker with `controller.quorum.voters` does: a request
answered NOT_CONTROLLER, a dropped connection or one unanswered within `request_timeout_s` sends it on to the
next voter (Kafka's brokers learn the leader from their Raft client; trying each voter in turn gets there too).
The ZooKeeper-mode and KRaft brokers (`zk_broker.py`, `kraft_broker.py`) differ only in their hooks. Every
request and response goes through kio's classes.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Self, TypeVar

from kio.schema.broker_heartbeat.v1 import request as heartbeat_v1
from kio.schema.broker_registration.v4 import request as registration_v4
from kio.schema.errors import ErrorCode
from kio.static.primitive import i16, i32, i64, u16

from bridge.kafka.client import DEFAULT_TIMEOUT, ConnectionClosedError, KafkaConnection
from bridge.shim.follower import MetadataFollower
from migrate.kraft import metadata_version as mvs

LISTENER = "PLAINTEXT"
RegistrationRequest = registration_v4.BrokerRegistrationRequest
PLAINTEXT_ID = 0
T = TypeVar("T")
Address = tuple[str, int]


def log_dir_id(broker_id: int) -> uuid.UUID:
    """A stable, non-reserved directory id for the broker's one log dir."""
    return uuid.UUID(int=(broker_id << 64) | 0xD1D1 | (9 << 120))


@dataclass
class HeartbeatView:
    """What the broker last heard from the controller."""

    broker_epoch: int = -1
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False
    last_error: int = 0
    registrations: int = 0
    heartbeats_answered: int = 0
    """Heartbeats the controller answered without an error."""
    errors: list[int] = field(default_factory=list)
    times_fenced: int = 0
    """Heartbeat answers that said fenced after an earlier one had said unfenced."""
    last_answered_s: float | None = None
    """time.monotonic() of the last heartbeat answered without an error."""
    longest_gap_s: float = 0.0
    """The longest time between two heartbeats answered without an error (reset it to measure from a mark)."""


class SimulatedBroker:
    """One broker process; `start()`, then `shutdown()` or `kill()`. Subclasses say what kind of broker it is."""

    is_migrating_zk_broker = False
    kind = "broker"

    def __init__(
        self,
        broker_id: int,
        controller: tuple[str, int],
        cluster_id: str,
        *,
        metadata_version: mvs.MetadataVersion = mvs.LATEST_PRODUCTION,
        heartbeat_interval_s: float = 0.2,
        port: int = 9092,
        voters: Sequence[Address] = (),
        request_timeout_s: float = DEFAULT_TIMEOUT,
        controller_ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        """`voters`: every controller of the quorum (`controller` first among them); default `controller` alone.
        `controller_ssl_context`: TLS to the controllers (its client certificate names the broker's principal)."""
        self.broker_id = broker_id
        self.controller = controller
        self.voters = list(voters) or [controller]
        self.request_timeout_s = request_timeout_s
        self.controller_ssl_context = controller_ssl_context
        self.cluster_id = cluster_id
        self.metadata_version = metadata_version
        self.interval = heartbeat_interval_s
        self.port = port
        self.incarnation = uuid.uuid4()
        self.view = HeartbeatView()
        self.follower: MetadataFollower | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"sim-{self.kind}-{broker_id}", daemon=True
        )
        self._main: asyncio.Future[Any] | None = None
        self._want_shut_down = False
        self.silent = False
        """While set, the broker sends nothing (a long GC pause or a network partition): its session expires."""
        self.registration_fault: Callable[[RegistrationRequest], RegistrationRequest] | None = None
        """While set, every BrokerRegistrationRequest goes through it before it is sent (tests inject faults)."""
        self.last_registration: RegistrationRequest | None = None
        """The BrokerRegistrationRequest this process sent last, as sent."""

    # ------------------------------------------------------------------ control (test thread)

    def start(self) -> Self:
        """`before_run`, then the observer, registration and heartbeats, on the broker's own thread."""
        self._thread.start()
        try:
            self.before_run()
        except BaseException:
            self._stop_loop()
            raise
        self._main = asyncio.run_coroutine_threadsafe(self._run(), self._loop)  # type: ignore[assignment]
        return self

    def on_loop(self, work: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        """Run `work` on the broker's own event loop and return its result (from the test thread)."""
        return asyncio.run_coroutine_threadsafe(work, self._loop).result(timeout)

    def kill(self) -> None:
        """Crash: no more heartbeats, nothing is said to the controller."""
        self._stop_loop()

    def begin_controlled_shutdown(self) -> None:
        """Heartbeats ask for a controlled shutdown from now on (the broker keeps running)."""
        self._want_shut_down = True

    def shutdown(self, timeout: float = 30.0) -> bool:
        """Controlled shutdown through heartbeats (the cached controller is KRaft); True once told to shut down."""
        self.begin_controlled_shutdown()
        deadline = time.monotonic() + timeout
        while not self.view.should_shut_down and time.monotonic() < deadline:
            time.sleep(0.02)
        told = self.view.should_shut_down
        self.kill()
        return told

    def follow(self, controller: tuple[str, int]) -> None:
        """Turn to another controller (the new active one after a takeover), as a broker's quorum client does:
        its observer starts over there, its heartbeats go there from its next connection on."""
        self.controller = controller

        async def switch() -> None:
            if self.follower is not None:
                await self.follower.stop()
            self.follower = self._new_follower()
            self.follower.start()

        self.on_loop(switch())

    def applied_offset(self) -> int:
        follower = self.follower
        return -1 if follower is None else follower.position - 1

    # ------------------------------------------------------------------ hooks

    def before_run(self) -> None:
        """What the process does, on the test thread with its loop running, before it talks to the controller."""

    async def on_stop(self) -> None:
        """What ends with the process (on its loop), besides the observer and the controller connection."""

    def features(self) -> tuple[tuple[str, int, int], ...]:
        """The (name, min, max) feature ranges the registration carries."""
        raise NotImplementedError

    async def on_connect(self, connection: KafkaConnection) -> None:
        """Whatever the broker sends first on a new controller connection."""

    async def after_heartbeat(self, connection: KafkaConnection) -> None:
        """Whatever the broker sends once a heartbeat was answered (directory assignments, ...)."""

    def pause_s(self) -> float:
        """How long until the next heartbeat."""
        return self.interval

    # ------------------------------------------------------------------ the broker's loop

    def _stop_loop(self) -> None:
        loop = self._loop
        if loop.is_closed() or not self._thread.is_alive():
            return

        async def stop() -> None:
            if self._main is not None:
                self._main.cancel()
            if self.follower is not None:
                await self.follower.stop()
            await self.on_stop()
            # Every task ends before the loop stops ("Task was destroyed but it is pending!" otherwise); a cancel
            # can be swallowed by Python 3.11's wait_for as its inner wait ends, so it is repeated.
            pending = {task for task in asyncio.all_tasks() if task is not asyncio.current_task()}
            while pending:
                for task in pending:
                    task.cancel()
                _, pending = await asyncio.wait(pending, timeout=0.1)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        self._thread.join(10)

    def _new_follower(self) -> MetadataFollower:
        start = self.voters.index(self.controller) if self.controller in self.voters else 0
        controllers = self.voters[start:] + self.voters[:start] if len(self.voters) > 1 else [self.controller]
        return MetadataFollower(
            controllers, cluster_id=self.cluster_id, poll_interval=0.05, replica_id=self.broker_id,
            ssl_context=self.controller_ssl_context,
        )  # fmt: skip

    def _next_voter(self) -> None:
        """On to the next voter (a broker's controller channel, once the one it used is no longer active)."""
        if len(self.voters) > 1:
            at = self.voters.index(self.controller) if self.controller in self.voters else -1
            self.controller = self.voters[(at + 1) % len(self.voters)]

    async def _run(self) -> None:
        self.follower = self._new_follower()
        self.follower.start()
        connection: KafkaConnection | None = None
        while True:
            if self.silent:
                await asyncio.sleep(self.interval)
                continue
            try:
                if connection is None:
                    connection = await KafkaConnection.open(
                        *self.controller,
                        client_id=f"{self.kind}-{self.broker_id}",
                        timeout=self.request_timeout_s,
                        ssl_context=self.controller_ssl_context,
                    )
                    await self.on_connect(connection)
                if self.view.broker_epoch < 0:
                    await self._register(connection)
                else:
                    await self._heartbeat(connection)
                    await self.after_heartbeat(connection)
                if self.view.last_error == ErrorCode.not_controller and len(self.voters) > 1:
                    raise ConnectionClosedError(f"{self.controller} is not the active controller")
            except ConnectionClosedError:
                if connection is not None:
                    await connection.close()
                connection = None
                self._next_voter()
            await asyncio.sleep(self.pause_s())

    def registration_request(self) -> RegistrationRequest:
        """What BrokerLifecycleManager sends: this incarnation, its listener, features and log dir."""
        return registration_v4.BrokerRegistrationRequest(
            broker_id=i32(self.broker_id),
            cluster_id=self.cluster_id,
            incarnation_id=self.incarnation,
            listeners=(
                registration_v4.Listener(
                    name=LISTENER, host="localhost", port=u16(self.port), security_protocol=i16(PLAINTEXT_ID)
                ),
            ),
            features=tuple(
                registration_v4.Feature(
                    name=name, min_supported_version=i16(low), max_supported_version=i16(high)
                )
                for name, low, high in self.features()
            ),
            rack=None,
            is_migrating_zk_broker=self.is_migrating_zk_broker,
            log_dirs=(log_dir_id(self.broker_id),),
            previous_broker_epoch=i64(-1),
        )

    async def _register(self, connection: KafkaConnection) -> None:
        request = self.registration_request()
        if self.registration_fault is not None:
            request = self.registration_fault(request)
        self.last_registration = request
        response = await connection.send(request, timeout=self.request_timeout_s)
        self.view.last_error = int(response.error_code)
        if response.error_code == ErrorCode.none:
            self.view.broker_epoch = int(response.broker_epoch)
            self.view.registrations += 1
        else:
            self.view.errors.append(int(response.error_code))

    async def _heartbeat(self, connection: KafkaConnection) -> None:
        view = self.view
        request = heartbeat_v1.BrokerHeartbeatRequest(
            broker_id=i32(self.broker_id),
            broker_epoch=i64(view.broker_epoch),
            current_metadata_offset=i64(self.applied_offset()),
            # ready to unfence once the controller said it is caught up (initialCatchUpFuture)
            want_fence=not view.is_caught_up,
            want_shut_down=self._want_shut_down,
        )
        response = await connection.send(request, timeout=self.request_timeout_s)
        view.last_error = int(response.error_code)
        if response.error_code != ErrorCode.none:
            view.errors.append(int(response.error_code))
            return
        now = time.monotonic()
        if view.last_answered_s is not None:
            view.longest_gap_s = max(view.longest_gap_s, now - view.last_answered_s)
        view.last_answered_s = now
        view.heartbeats_answered += 1
        view.is_caught_up = view.is_caught_up or response.is_caught_up
        if response.is_fenced and not view.is_fenced:
            view.times_fenced += 1
        view.is_fenced = response.is_fenced
        view.should_shut_down = response.should_shut_down
