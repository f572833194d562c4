"""Kafka 3.9's BrokerHeartbeatManager: broker sessions, the heartbeat state machine, controlled-shutdown offsets.

This state lives in memory only, as in Kafka: a controller that becomes active starts every registered
broker's session afresh (`activate`), so a restart or failover never fences a broker for the time it
was away. Time comes from an injected monotonic clock in nanoseconds, never from wall time.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

log = logging.getLogger(__name__)

NS_PER_MS = 1_000_000
NO_OFFSET = -1
MAX_OFFSET = 2**63 - 1
"""Java's Long.MAX_VALUE: the lowest active offset when no broker is active, and "no check pending"."""


class BrokerControlState(enum.Enum):
    """BrokerControlState: where a broker stands, and the reply flags that follow from it."""

    FENCED = "fenced"
    UNFENCED = "unfenced"
    CONTROLLED_SHUTDOWN = "controlled_shutdown"
    SHUTDOWN_NOW = "shutdown_now"

    @property
    def fenced(self) -> bool:
        return self is BrokerControlState.FENCED or self is BrokerControlState.SHUTDOWN_NOW

    @property
    def should_shut_down(self) -> bool:
        return self is BrokerControlState.SHUTDOWN_NOW

    @property
    def in_controlled_shutdown(self) -> bool:
        return self is BrokerControlState.CONTROLLED_SHUTDOWN


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    """The BrokerHeartbeatRequest fields the state machine reads (any accepted version)."""

    broker_id: int
    broker_epoch: int
    current_metadata_offset: int
    want_fence: bool
    want_shut_down: bool

    @classmethod
    def of(cls, request: object) -> HeartbeatRequest:
        """From a kio BrokerHeartbeatRequest (v0 or v1)."""
        return cls(
            broker_id=int(request.broker_id),  # type: ignore[attr-defined]
            broker_epoch=int(request.broker_epoch),  # type: ignore[attr-defined]
            current_metadata_offset=int(request.current_metadata_offset),  # type: ignore[attr-defined]
            want_fence=bool(request.want_fence),  # type: ignore[attr-defined]
            want_shut_down=bool(request.want_shut_down),  # type: ignore[attr-defined]
        )


@dataclass(slots=True)
class BrokerHeartbeatState:
    """BrokerHeartbeatManager.BrokerHeartbeatState (fenced means: not in the unfenced list)."""

    broker_id: int
    last_contact_ns: int = 0
    metadata_offset: int = NO_OFFSET
    controlled_shutdown_offset: int = NO_OFFSET
    fenced: bool = True

    @property
    def shutting_down(self) -> bool:
        return self.controlled_shutdown_offset >= 0


class BrokerHeartbeatManager:
    """BrokerHeartbeatManager: who is heard from, who is stale, and what a heartbeat moves a broker to."""

    def __init__(self, session_timeout_ms: int, clock: Callable[[], int] = time.monotonic_ns) -> None:
        if session_timeout_ms <= 0:
            raise ValueError(f"broker.session.timeout.ms must be positive, got {session_timeout_ms}")
        self.session_timeout_ns = session_timeout_ms * NS_PER_MS
        self.clock = clock
        self._brokers: dict[int, BrokerHeartbeatState] = {}
        # Unfenced brokers by last contact, oldest first (Kafka's linked list); dicts keep insertion order.
        self._unfenced: dict[int, BrokerHeartbeatState] = {}

    # ------------------------------------------------------------ sessions

    def activate(self, brokers: Iterable[tuple[int, bool]]) -> None:
        """ClusterControlManager.activate: every registered (id, fenced) broker gets a fresh session now."""
        self._brokers.clear()
        self._unfenced.clear()
        for broker_id, fenced in brokers:
            self.register(broker_id, fenced)

    def state(self, broker_id: int) -> BrokerHeartbeatState | None:
        return self._brokers.get(broker_id)

    def silent(self, broker_id: int) -> bool:
        """Not heard from within the session timeout (or never since this leadership started)."""
        broker = self._brokers.get(broker_id)
        return broker is None or broker.last_contact_ns + self.session_timeout_ns < self.clock()

    def fence(self, broker_id: int) -> None:
        """Drop the broker's session (it stays known, with its last offset)."""
        broker = self._brokers.get(broker_id)
        if broker is not None:
            self._untrack(broker)

    def remove(self, broker_id: int) -> None:
        """Forget the broker (a new incarnation or an unregistration)."""
        broker = self._brokers.pop(broker_id, None)
        if broker is not None:
            self._untrack(broker)

    def has_valid_session(self, broker_id: int) -> bool:
        """Unfenced and heard from within the session timeout (fenced brokers never have a session)."""
        broker = self._brokers.get(broker_id)
        return broker is not None and self._valid(broker)

    def _valid(self, broker: BrokerHeartbeatState) -> bool:
        return not broker.fenced and broker.last_contact_ns + self.session_timeout_ns >= self.clock()

    def register(self, broker_id: int, fenced: bool) -> None:
        """A (re-)registration: the session starts now; the offset survives only a change of fencing."""
        broker = self._brokers.get(broker_id)
        metadata_offset = NO_OFFSET
        if broker is None:
            self._brokers[broker_id] = BrokerHeartbeatState(broker_id)
        elif broker.fenced != fenced:
            # Kafka keeps the offset exactly when the fencing differs; when it is equal it resets it.
            metadata_offset = broker.metadata_offset
        self.touch(broker_id, fenced, metadata_offset)

    def touch(self, broker_id: int, fenced: bool, metadata_offset: int) -> None:
        """Record contact now, with the broker's fencing after this heartbeat and the offset it reported."""
        broker = self._state_or_raise(broker_id)
        self._untrack(broker)
        broker.last_contact_ns = self.clock()
        broker.metadata_offset = metadata_offset
        if fenced:
            # A fenced broker leaves controlled shutdown; its next heartbeat shuts it down at once.
            broker.controlled_shutdown_offset = NO_OFFSET
        else:
            self._track_unfenced(broker)

    def _untrack(self, broker: BrokerHeartbeatState) -> None:
        if not broker.fenced:
            self._unfenced.pop(broker.broker_id, None)
            broker.fenced = True

    def _track_unfenced(self, broker: BrokerHeartbeatState) -> None:
        broker.fenced = False
        unfenced = self._unfenced
        if unfenced:
            newest = unfenced[next(reversed(unfenced))]
            if newest.last_contact_ns > broker.last_contact_ns:
                # Only an injected clock that moved backwards gets here: keep the list sorted, ties by age.
                ordered = sorted([*unfenced.values(), broker], key=lambda b: b.last_contact_ns)
                unfenced.clear()
                unfenced.update((b.broker_id, b) for b in ordered)
                return
        unfenced[broker.broker_id] = broker

    def lowest_active_offset(self) -> int:
        """The lowest offset reported by an active (unfenced, not shutting down) broker; MAX_OFFSET if none."""
        offsets = [b.metadata_offset for b in self._unfenced.values() if not b.shutting_down]
        return min(offsets) if offsets else MAX_OFFSET

    def controlled_shutdown_offset(self, broker_id: int) -> int | None:
        broker = self._brokers.get(broker_id)
        if broker is None or broker.controlled_shutdown_offset == NO_OFFSET:
            return None
        return broker.controlled_shutdown_offset

    def maybe_update_controlled_shutdown_offset(self, broker_id: int, offset: int) -> None:
        """Set once: the end offset of the batch that carried the broker's controlled-shutdown records."""
        broker = self._state_or_raise(broker_id)
        if broker.fenced:
            raise RuntimeError(f"fenced broker {broker_id} cannot enter controlled shutdown")
        if broker.controlled_shutdown_offset < 0:
            broker.controlled_shutdown_offset = offset

    def next_check_time_ns(self) -> int:
        """When the oldest unfenced session expires (MAX_OFFSET when no broker is unfenced)."""
        if not self._unfenced:
            return MAX_OFFSET
        oldest = self._unfenced[next(iter(self._unfenced))]
        return oldest.last_contact_ns + self.session_timeout_ns

    def find_one_stale_broker(self) -> int | None:
        """The unfenced broker heard from longest ago, if its session has expired."""
        if not self._unfenced:
            return None
        oldest = self._unfenced[next(iter(self._unfenced))]
        return None if self._valid(oldest) else oldest.broker_id

    # ------------------------------------------------------------ the state machine

    def current_state(self, broker_id: int) -> BrokerControlState:
        broker = self._state_or_raise(broker_id)
        if broker.shutting_down:
            return BrokerControlState.CONTROLLED_SHUTDOWN
        if broker.fenced:
            return BrokerControlState.FENCED
        return BrokerControlState.UNFENCED

    def calculate_next_state(
        self,
        request: HeartbeatRequest,
        register_broker_record_offset: int,
        has_leaderships: Callable[[], bool],
        *,
        quiet: bool = False,
    ) -> tuple[BrokerControlState, BrokerControlState]:
        """BrokerHeartbeatManager.calculateNextBrokerState: (current state, next state); `quiet` for a look
        ahead that logs nothing (the decision is logged when it is taken)."""
        info = (lambda *_args: None) if quiet else log.info
        broker_id = request.broker_id
        current = self.current_state(broker_id)
        if current is BrokerControlState.FENCED:
            if request.want_shut_down:
                info("Fenced broker %d has requested and been granted an immediate shutdown.", broker_id)
                return current, BrokerControlState.SHUTDOWN_NOW
            if not request.want_fence and request.current_metadata_offset >= register_broker_record_offset:
                info(
                    "Broker %d is unfenced: it has caught up with the offset %d of its registration.",
                    broker_id,
                    register_broker_record_offset,
                )
                return current, BrokerControlState.UNFENCED
            return current, BrokerControlState.FENCED
        if current is BrokerControlState.UNFENCED:
            if request.want_fence:
                if request.want_shut_down:
                    return current, BrokerControlState.SHUTDOWN_NOW
                info("Unfenced broker %d has requested and been granted fencing.", broker_id)
                return current, BrokerControlState.FENCED
            if request.want_shut_down:
                if has_leaderships():
                    info("Broker %d has requested and been granted a controlled shutdown.", broker_id)
                    return current, BrokerControlState.CONTROLLED_SHUTDOWN
                return current, BrokerControlState.SHUTDOWN_NOW
            return current, BrokerControlState.UNFENCED
        # CONTROLLED_SHUTDOWN: done once it leads nothing and every active broker has seen the shutdown.
        if has_leaderships():
            return current, BrokerControlState.CONTROLLED_SHUTDOWN
        broker = self._state_or_raise(broker_id)
        if broker.controlled_shutdown_offset <= self.lowest_active_offset():
            info(
                "Broker %d may shut down: every active broker has passed its shutdown records.", broker_id
            )
            return current, BrokerControlState.SHUTDOWN_NOW
        return current, BrokerControlState.CONTROLLED_SHUTDOWN

    def _state_or_raise(self, broker_id: int) -> BrokerHeartbeatState:
        broker = self._brokers.get(broker_id)
        if broker is None:
            raise KeyError(f"broker {broker_id} is not registered with the heartbeat manager")
        return broker
