"""Change notifications sent with the writes they announce, and the containers known to hold them.

Kafka's counterparts: KafkaZkClient.createConfigChangeNotification (`/config/changes/config_change_<seq>`,
made after every config or quota write) and the ACL change events of AclAuthorizer
(`/kafka-acl-changes`, `/kafka-acl-extended-changes`). Here each rides in the fenced multi of the write it
announces, so a deposed controller lands neither.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bridge.zk.leadership import (
    CreateRequest,
    GuardedMulti,
    MigrationLeadershipState,
    WriteOutcome,
    ZkLeadershipClient,
    ZkRequest,
    ZkResult,
    raise_for_results,
)
from migrate.zk import paths
from migrate.zk.model import AclChangeNotification, ConfigChangeNotification, PatternType, ResourcePattern
from migrate.zk.protocol import NODEEXISTS, NONODE, OK, RUNTIMEINCONSISTENCY
from migrate.zk.znodes.acls import encode_acl_change, encode_extended_acl_change
from migrate.zk.znodes.configs import encode_config_change

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ChangeNotification:
    """A change notification (a sequential create); `entity_path` is set for config changes.

    Config notifications are Kafka's createConfigChangeNotification: the store is created when missing and
    a failure is an error. ACL notifications: Kafka ignores the result (the store exists wherever an
    AclAuthorizer ever ran), so a missing store drops the notification with a warning.
    """

    request: CreateRequest
    entity_path: str | None = None

    @property
    def store(self) -> str:
        return self.request.path.rpartition("/")[0]


def config_change(entity_path: str) -> ChangeNotification:
    """The config change event ZK brokers' dynamic-config managers watch, naming `entity_path`."""
    data = encode_config_change(ConfigChangeNotification(entity_path, 2))
    prefix = f"{paths.CONFIG_CHANGES}/{paths.CONFIG_CHANGE_PREFIX}"
    return ChangeNotification(CreateRequest(prefix, data, sequential=True), entity_path)


def acl_change(pattern: ResourcePattern) -> ChangeNotification:
    """The literal or extended ACL change event ZK brokers' authorizers watch."""
    if pattern.pattern_type == PatternType.LITERAL:
        store = paths.KAFKA_ACL_CHANGES
        data = encode_acl_change(AclChangeNotification(pattern))
    else:
        store = paths.KAFKA_ACL_EXTENDED_CHANGES
        data = encode_extended_acl_change(AclChangeNotification(pattern, 1))
    return ChangeNotification(CreateRequest(f"{store}/{paths.ACL_CHANGE_PREFIX}", data, sequential=True))


def describe_notes(notes: Sequence[ChangeNotification]) -> str:
    return ", ".join(f"Create {note.request.path}" for note in notes)


def ancestry(path: str) -> list[str]:
    """`path` and its ancestors below `/`, outermost first: what createRecursive(path) may create."""
    parts = path.strip("/").split("/")
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts)) if parts[0]]


def within(path: str, ancestor: str) -> bool:
    return path == ancestor or path.startswith(ancestor + "/")


class ChangeNotifier:
    """Fenced writes followed by their notifications, and the containers seen to exist.

    A container is known once a notification landed in it or we created it: the Kafka path then skips its
    guarded create. It is forgotten when a write into it answers NONODE.
    """

    def __init__(self, zk: ZkLeadershipClient) -> None:
        self.zk = zk
        self.known_containers: set[str] = set()

    def noted_write(
        self,
        requests: Sequence[ZkRequest],
        state: MigrationLeadershipState,
        notes: Sequence[ChangeNotification],
        *,
        retried: bool = False,
    ) -> WriteOutcome:
        """Kafka's write-then-notify: `requests` as `fenced_write` sends them, `notes` when the last one lands.

        The notes ride in the last request's multi, after guarded creates of config-change stores not known
        to exist (Kafka's createRecursive); an ACL note whose store is missing is dropped with a warning and
        the request sent alone. The results are `requests`'.
        """
        if not notes:
            return self.zk.fenced_write(requests, state)
        containers = [
            CreateRequest(p)
            for p in dict.fromkeys(
                p for note in notes if note.entity_path is not None for p in ancestry(note.store)
            )
            if p not in self.known_containers
        ]
        outcome = self.zk.fenced_write([*containers, *requests], state, tail=[note.request for note in notes])
        self.forget_stores(outcome.results)
        results = outcome.results[len(containers) :]
        mine, noted = results[: len(requests)], results[len(requests) :]
        self.learn_created(outcome.results[: len(containers)])
        if mine[-1].code == RUNTIMEINCONSISTENCY:  # rolled back: a notification failed
            failed = [
                (note, r) for note, r in zip(notes, noted, strict=True) if r.code != RUNTIMEINCONSISTENCY
            ]
            self.forget_stores([r for _, r in failed])
            if all(note.entity_path is None and r.code == NONODE for note, r in failed):
                for note, _ in failed:
                    log.warning("ACL change notification not written: %s does not exist", note.store)
                rest = [n for n in notes if all(n is not note for note, _ in failed)]
                again = self.noted_write(requests[-1:], outcome.state, rest, retried=retried)
                return WriteOutcome(again.state, (*mine[:-1], *again.results))
            if not retried and any(r.code == NONODE for _, r in failed):
                again = self.noted_write(requests[-1:], outcome.state, notes, retried=True)
                return WriteOutcome(again.state, (*mine[:-1], *again.results))
            raise_for_results(f"change notification with {requests[-1].path}", [r for _, r in failed], where=self.zk.where)
        if mine[-1].ok:
            self.learn_stores(notes)
        return WriteOutcome(outcome.state, tuple(mine))

    def notes_alone(self, notes: Sequence[ChangeNotification], state: MigrationLeadershipState) -> None:
        """Send `notes` without a write (Kafka notifies of a deleted ACL even when it was gone already)."""
        self.zk.require_fence(state, describe_notes(notes))
        epoch_version = state.zk_controller_epoch_zk_version
        multi = GuardedMulti(tuple(note.request for note in notes), state.migration_zk_version)
        reply = self.zk.send_guarded([multi], epoch_version, describe_notes(notes))[0]
        self.zk.raise_if_fenced(reply, epoch_version, describe_notes(notes))
        if reply.landed:
            self.learn_stores(notes)
            return
        failure = reply.first_failure()
        if (
            len(notes) == 1
            and notes[0].entity_path is None
            and failure is not None
            and failure.code == NONODE
        ):
            log.warning("ACL change notification not written: %s does not exist", notes[0].store)
            return
        raise_for_results(describe_notes(notes), reply.results, where=self.zk.where)

    def parent_creates(self, parent: str) -> list[ZkRequest]:
        """Kafka's createRecursive(parent) as guarded creates of the containers not known to exist (existing
        ones answer NODEEXISTS)."""
        return [CreateRequest(p) for p in ancestry(parent) if p not in self.known_containers]

    def missing_containers(self, containers: Sequence[str]) -> list[ZkRequest]:
        """Guarded creates of `containers` not known to exist (existing ones answer NODEEXISTS, harmlessly:
        each goes in its own fenced multi)."""
        return [CreateRequest(p) for p in containers if p not in self.known_containers]

    def learn(self, containers: Iterable[str]) -> None:
        self.known_containers.update(containers)

    def learn_created(self, results: Sequence[ZkResult]) -> None:
        """Containers whose guarded create landed or found them there."""
        self.known_containers.update(r.path for r in results if r.code in (OK, NODEEXISTS))

    def learn_stores(self, notes: Sequence[ChangeNotification]) -> None:
        for note in notes:
            self.known_containers.update(ancestry(note.store))

    def forget_stores(self, results: Sequence[ZkResult]) -> None:
        """A request answered NONODE: any cached container above it may be gone, and all below that."""
        for r in results:
            if r.code != NONODE:
                continue
            above = [c for c in self.known_containers if within(r.path, c)]
            self.known_containers = {c for c in self.known_containers if not any(within(c, a) for a in above)}
