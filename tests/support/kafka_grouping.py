"""Kafka 3.9's own grouping of dual writes, as a reference the fused writes are compared with (tests only).

Kafka sends each request in its own fenced multi, then its change notifications and createRecursive
unfenced, and moves `/migration`'s offset in a write of its own. `KafkaGroupingClient` writes exactly that.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from kazoo.client import KazooClient

from bridge.zk.leadership import MigrationLeadershipState, WriteOutcome, ZkRequest, raise_for_results
from bridge.zk.migration_client import OneMulti, PreparedOps, ZkMigrationClient
from bridge.zk.notifications import ChangeNotification, ChangeNotifier
from bridge.zk.operations import ZkOperation
from bridge.zk.planning import Plan
from migrate.errors import Zk2KraftError
from migrate.zk import paths

log = logging.getLogger(__name__)


class UnfencedNotifier(ChangeNotifier):
    """Notifications after the write, unfenced, and containers made by createRecursive (Kafka's way)."""

    def noted_write(
        self,
        requests: Sequence[ZkRequest],
        state: MigrationLeadershipState,
        notes: Sequence[ChangeNotification],
        *,
        retried: bool = False,
    ) -> WriteOutcome:
        outcome = self.zk.fenced_write(requests, state)
        if notes and outcome.results[-1].ok:
            self.notify(notes)
        return outcome

    def notes_alone(self, notes: Sequence[ChangeNotification], state: MigrationLeadershipState) -> None:
        self.notify(notes)

    def parent_creates(self, parent: str) -> list[ZkRequest]:
        self.zk.create_recursive(parent)
        return []

    def notify(self, notes: Sequence[ChangeNotification]) -> None:
        for note in notes:
            if note.entity_path is not None:  # Kafka's createConfigChangeNotification
                self.zk.create_recursive(paths.CONFIG_CHANGES)
                result = self.zk.request(note.request)
                if not result.ok or result.created_path is None:
                    raise_for_results(f"config change notification for {note.entity_path}", [result], where=self.zk.where)
                continue
            result = self.zk.request(note.request)
            if not result.ok:  # Kafka ignores this result
                log.warning("ACL change notification %s not written: %s", note.request.path, result)


class KafkaGroupingClient(ZkMigrationClient):
    """Each operation the Kafka way, one multi per request, then `/migration`'s offset on its own."""

    def __init__(self, client: KazooClient, **kwargs: Any) -> None:
        super().__init__(client, **kwargs)
        self.notifier = UnfencedNotifier(self)

    def _run(
        self,
        plans: Sequence[Plan],
        ops: Sequence[ZkOperation],
        state: MigrationLeadershipState,
        final: MigrationLeadershipState,
        *,
        batch: bool,
    ) -> MigrationLeadershipState:
        if not batch:
            return state if plans[0].requests == () else plans[0].kafka_path(state)
        current = state
        for i, plan in enumerate(plans):
            if plan.requests == ():
                continue
            try:
                current = plan.kafka_path(current)
            except Zk2KraftError as exc:
                self._abandon(
                    exc, True, [i], len(plans), ops, self._state_after_failure(current), state, state
                )
        if ops or final.to_znode() != state.to_znode():
            current = self.set_migration_state(final.with_migration_zk_version(current.migration_zk_version))
        return current

    def one_multi(self, prepared: PreparedOps, final: MigrationLeadershipState) -> OneMulti | None:
        return None
