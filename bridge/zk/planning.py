"""One dual-write operation planned two ways: as one optimistic fenced multi, and as Kafka would write it.

What the per-family planners (topic_client, config_client, acl_client, token_client) produce and
`ZkMigrationClient` runs; `PlanContext` is what a planner may use of the client.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from bridge.zk.leadership import (
    DeleteRequest,
    MigrationLeadershipState,
    WriteOutcome,
    ZkRequest,
    ZkResult,
    raise_for_results,
)
from bridge.zk.notifications import ChangeNotification, ChangeNotifier
from migrate.zk.protocol import NODEEXISTS, OK, RUNTIMEINCONSISTENCY

MAX_FUSED_BYTES = 256 * 1024
"""Largest estimated multi sent for one operation; bigger ones (topics with thousands of partitions) take the
Kafka path. ZooKeeper refuses packets over jute.maxbuffer (1 MiB by default) by closing the connection."""
_REQUEST_OVERHEAD = 64  # opcode, lengths, flags and the ACL of one request inside a multi

PasswordEncoder = Callable[[str, str], str]
"""(config name, value) → stored text; Kafka encrypts dynamic password configs with password.encoder.secret."""

KafkaPath = Callable[[MigrationLeadershipState], MigrationLeadershipState]


class PlanContext(Protocol):
    """What a planner reads and writes through (the migration client)."""

    java8: bool
    password_encoder: PasswordEncoder | None
    notifier: ChangeNotifier

    @property
    def where(self) -> str:
        """The ensemble written to, for messages (`ZooKeeper host:port/chroot`)."""

    def fenced_write(
        self,
        requests: Sequence[ZkRequest],
        state: MigrationLeadershipState,
        *,
        tail: Sequence[ZkRequest] = (),
    ) -> WriteOutcome: ...

    def get_children(self, path: str) -> list[str] | None: ...


@dataclass(frozen=True, slots=True)
class Plan:
    """One operation as one optimistic multi (`requests`), and the Kafka path (`kafka_path(state)`).

    `requests` empty: the operation writes nothing. None: too big for one multi; the Kafka path is taken at
    once. `notes` are the notifications inside `requests` (their stores are learnt when the multi lands).
    """

    requests: tuple[ZkRequest, ...] | None
    kafka_path: KafkaPath
    notes: tuple[ChangeNotification, ...] = ()
    size: int = 0
    """Estimated bytes of `requests` in a multi."""


NO_WRITE = Plan((), lambda state: state)

Planner = Callable[[PlanContext, Any, MigrationLeadershipState], Plan]
"""A family's planner of one operation type."""


def fused(
    requests: Sequence[ZkRequest], kafka_path: KafkaPath, notes: Sequence[ChangeNotification] = ()
) -> Plan:
    """A plan whose optimistic multi is `requests` then `notes`, unless that is too big for one multi."""
    everything = (*requests, *(note.request for note in notes))
    size = sum(
        len(r.path) + _REQUEST_OVERHEAD + (len(r.data or b"") if not isinstance(r, DeleteRequest) else 0)
        for r in everything
    )
    return Plan(everything if size <= MAX_FUSED_BYTES else None, kafka_path, tuple(notes), size)


def all_ok(ctx: PlanContext, what: str, requests: Sequence[ZkRequest]) -> Plan:
    """A plan whose Kafka path needs every request to land."""

    def kafka_path(state: MigrationLeadershipState) -> MigrationLeadershipState:
        outcome = ctx.fenced_write(requests, state)
        if all(r.ok for r in outcome.results):
            return outcome.state
        raise_for_results(what, outcome.results, where=ctx.where)

    return fused(requests, kafka_path) if requests else NO_WRITE


def failures(results: Sequence[ZkResult]) -> list[ZkResult]:
    """The results that explain a failed write: the last request's and any container create that failed."""
    return [r for r in results[:-1] if r.code not in (OK, NODEEXISTS, RUNTIMEINCONSISTENCY)] + [results[-1]]
