"""The quorum core: Kafka 3.9's KafkaRaftClient for a static voter set (kraft.version 0), without I/O.

`RaftClient` holds the election state and the replicated log. Time passes only through the `now_ms`
given to each call, randomness comes from the `random.Random` it is given, and it sends nothing itself:
`poll` returns the requests due, `handle_request` answers one, `handle_response` takes one back (None when
it failed or timed out). The same code therefore runs under the deterministic simulation and under the
asyncio transport of a bridge process.

Departures from Kafka, with reasons: no pre-vote (3.9 has none); no KIP-853 reconfiguration (the quorum is
static: Add/Remove/UpdateRaftVoter are answered UNSUPPORTED_VERSION by the transport); a parked Fetch is
re-asked by the transport rather than kept in a purgatory here (same answers, simpler core); a consistency
violation that Kafka throws as IllegalStateException raises `RaftInvariantError`, which the bridge treats
as fatal as Kafka does.
"""

from __future__ import annotations

import dataclasses
import logging
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bridge.raft import messages as m
from bridge.raft.log import ReplicatedLog, end_offset_for_epoch, validate_offset_and_epoch
from bridge.raft.messages import OffsetAndEpoch
from bridge.raft.quorum import NO_ID, Election, ElectionStore, Role
from migrate.errors import CorruptDataError, Zk2KraftError

log = logging.getLogger(__name__)

OBSERVER_SESSION_TIMEOUT_MS = 300_000
"""LeaderState.OBSERVER_SESSION_TIMEOUT_MS: an observer that has not fetched for this long is forgotten."""


class RaftInvariantError(Zk2KraftError):
    """A message or request that would break Raft's safety (Kafka throws IllegalStateException)."""


class NotLeaderError(Zk2KraftError):
    """An append asked of a replica that does not lead (Kafka's NotLeaderException)."""


@dataclass(frozen=True, slots=True)
class RaftConfig:
    """Kafka's QuorumConfig defaults (controller.quorum.*)."""

    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_max_ms: int = 1000
    request_timeout_ms: int = 2000
    retry_backoff_ms: int = 20
    fetch_max_wait_ms: int = 500
    fetch_max_bytes: int = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Outbound:
    """A request to send to `destination`; its answer (or None) goes back through `handle_response`."""

    destination: int
    request: m.RaftRequest


@dataclass(slots=True)
class ReplicaProgress:
    """LeaderState.ReplicaState: what the leader knows of one voter's or observer's log."""

    end_offset: int = -1
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    last_fetch_leader_end: int = -1


@dataclass(slots=True)
class _Leading:
    epoch_start_offset: int
    granting: tuple[int, ...]
    replicas: dict[int, ReplicaProgress]
    observers: dict[int, ReplicaProgress] = field(default_factory=dict)
    high_watermark: int | None = None
    fetched_voters: set[int] = field(default_factory=set)
    check_quorum_deadline: int = 0
    begin_epoch_due: int = 0


@dataclass(slots=True)
class _Candidacy:
    granted: set[int]
    rejected: set[int]
    retries: int
    backoff_until: int | None = None


@dataclass(slots=True)
class _SnapshotDownload:
    snapshot_id: OffsetAndEpoch
    position: int = 0


class RaftClient:
    """KafkaRaftClient + QuorumState for one replica of a static quorum (a voter, or an observer)."""

    def __init__(
        self,
        *,
        node_id: int,
        voters: Mapping[int, m.Endpoint],
        cluster_id: str,
        log: ReplicatedLog,
        store: ElectionStore,
        rng: random.Random,
        config: RaftConfig = RaftConfig(),
        on_role_change: Callable[[RaftClient], None] | None = None,
    ) -> None:
        self.node_id = node_id
        self.voters = dict(voters)
        self.cluster_id = cluster_id
        self.log = log
        self.config = config
        self._store = store
        self._rng = rng
        self._on_role_change = on_role_change
        self.role = Role.UNATTACHED
        self.epoch = 0
        self.leader_id = NO_ID
        self.voted_id = NO_ID
        self.high_watermark = -1
        """The highest committed end offset this replica knows (-1 unknown); never decreases."""
        self.leading: _Leading | None = None
        self._candidacy: _Candidacy | None = None
        self._download: _SnapshotDownload | None = None
        self._deadline = 0
        """Election timer (unattached/candidate/resigned voter) or fetch timer (follower)."""
        self._inflight: dict[int, m.RaftRequest] = {}
        self._retry_at: dict[int, int] = {}
        self._acknowledged: set[int] = set()
        """BeginQuorumEpoch (leader) or EndQuorumEpoch (resigned) acknowledgements of this epoch."""
        self._successors: tuple[int, ...] = ()
        self._shutting_down = False
        self._poll_due = True
        """A transition or a response happened since the last poll: requests may be due at once."""

    # ------------------------------------------------------------------------------ queries

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voters

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def leader_ready(self) -> bool:
        """The leader has committed an entry of its own epoch: the state machine may now act as leader."""
        return self.leading is not None and self.leading.high_watermark is not None

    def next_deadline(self, now_ms: int) -> int:
        """When `poll` next has something to do (the caller may also poll earlier)."""
        if self._poll_due:
            return now_ms
        due = [self._deadline] if self._deadline else []
        due.extend(at for at in self._retry_at.values() if at > now_ms)
        if self.leading is not None:
            due.extend((self.leading.check_quorum_deadline, self.leading.begin_epoch_due))
        if self._candidacy is not None and self._candidacy.backoff_until is not None:
            due.append(self._candidacy.backoff_until)
        return min(due) if due else now_ms + self.config.election_timeout_ms

    # ------------------------------------------------------------------------------ start-up

    def start(self, now_ms: int) -> None:
        """QuorumState.initialize: resume from `quorum-state` and the log, persisting the result."""
        stored = self._store.read() or Election(0)
        last_log_epoch = self.log.last_fetched_epoch()
        if stored.epoch < last_log_epoch:
            self._become_unattached(now_ms, last_log_epoch)
        elif stored.leader_id == self.node_id and self.is_voter:
            self._set(Role.RESIGNED, stored.epoch, self.node_id, NO_ID, persist=False)
            self._successors = ()  # Kafka resumes a Resigned state with no preferred successors
            self._deadline = now_ms + self._random_election_timeout()
        elif stored.voted_id == self.node_id and self.is_voter:
            self._set(Role.CANDIDATE, stored.epoch, NO_ID, self.node_id)
            self._candidacy = _Candidacy({self.node_id}, set(), 1)
            self._deadline = now_ms + self._random_election_timeout()
        elif stored.voted_id != NO_ID:
            self._set(Role.VOTED, stored.epoch, NO_ID, stored.voted_id)
            self._deadline = now_ms + self._random_election_timeout()
        elif stored.leader_id != NO_ID and stored.leader_id in self.voters:
            self._become_follower(now_ms, stored.epoch, stored.leader_id)
        else:
            self._become_unattached(now_ms, stored.epoch)
        if self.is_voter and len(self.voters) == 1 and self.role is not Role.LEADER:
            self._become_candidate(now_ms)

    # ------------------------------------------------------------------------------ transitions

    def _set(self, role: Role, epoch: int, leader_id: int, voted_id: int, *, persist: bool = True) -> None:
        if epoch < self.epoch:
            raise RaftInvariantError(f"node {self.node_id} cannot go back from epoch {self.epoch} to {epoch}")
        if persist:
            # The promise is durable before it takes effect (QuorumState.durableTransitionTo).
            self._store.write(Election(epoch, leader_id, voted_id))
        changed = (role, epoch, leader_id) != (self.role, self.epoch, self.leader_id)
        self.role, self.epoch, self.leader_id, self.voted_id = role, epoch, leader_id, voted_id
        self.leading = None
        self._candidacy = None
        self._abandon_download()
        self._poll_due = True
        self._inflight.clear()
        self._retry_at.clear()
        self._acknowledged = set()
        if changed and self._on_role_change is not None:
            self._on_role_change(self)

    def _become_unattached(self, now_ms: int, epoch: int) -> None:
        # QuorumState.transitionToUnattached: an unattached or candidate voter keeps the election time it
        # has left, else a stream of hopeless candidates bumping the epoch would keep it from ever standing.
        keeps_timer = self._deadline > 0 and self.role in (Role.UNATTACHED, Role.VOTED, Role.CANDIDATE)
        remaining = self._deadline if keeps_timer else now_ms + self._random_election_timeout()
        self._set(Role.UNATTACHED, epoch, NO_ID, NO_ID)
        self._deadline = remaining if self.is_voter else 0

    def _become_follower(self, now_ms: int, epoch: int, leader_id: int) -> None:
        self._set(Role.FOLLOWER, epoch, leader_id, NO_ID)
        self._deadline = now_ms + self.config.fetch_timeout_ms

    def _become_candidate(self, now_ms: int) -> None:
        retries = self._candidacy.retries + 1 if self._candidacy is not None else 1
        self._set(Role.CANDIDATE, self.epoch + 1, NO_ID, self.node_id)
        self._candidacy = _Candidacy({self.node_id}, set(), retries)
        self._deadline = now_ms + self._random_election_timeout()
        if len(self._candidacy.granted) >= self.majority:
            self._become_leader(now_ms)

    def _become_leader(self, now_ms: int) -> None:
        assert self._candidacy is not None
        granting = tuple(sorted(self._candidacy.granted))
        self._set(Role.LEADER, self.epoch, self.node_id, self.node_id)
        start = self.log.end_offset()
        self.leading = _Leading(
            epoch_start_offset=start,
            granting=granting,
            replicas={v: ReplicaProgress() for v in self.voters},
            check_quorum_deadline=now_ms + self._check_quorum_timeout(),
            begin_epoch_due=now_ms,
        )
        self._deadline = 0
        self.log.append_leader_change(self.epoch, self.node_id, sorted(self.voters), granting)
        self.log.flush()
        self._after_leader_append(now_ms)

    def _resign(self, now_ms: int) -> None:
        """LeaderState → ResignedState: successors ordered by how far they have fetched, highest first."""
        leading = self.leading
        by_progress: list[int] = []
        if leading is not None:
            others = [v for v in self.voters if v != self.node_id]
            by_progress = sorted(others, key=lambda v: (-leading.replicas[v].end_offset, v))
        self._set(Role.RESIGNED, self.epoch, self.node_id, self.voted_id, persist=False)
        self._successors = tuple(by_progress)
        self._deadline = now_ms + self._random_election_timeout()

    def resign(self, now_ms: int) -> None:
        """RaftClient.resign: the state machine gives up leadership of the current epoch."""
        if self.role is Role.LEADER:
            log.info("event=raft_resigned node=%s epoch=%s", self.node_id, self.epoch)
            self._resign(now_ms)

    def shutdown(self, now_ms: int) -> None:
        """Graceful shutdown: a leader resigns so the others elect at once (EndQuorumEpoch)."""
        self._shutting_down = True
        self.resign(now_ms)

    def _maybe_transition(self, now_ms: int, leader_id: int, epoch: int) -> None:
        """KafkaRaftClient.maybeTransition: follow what a message says about a newer or unknown leadership."""
        if leader_id >= 0 and not self._consistent_leader(epoch, leader_id):
            raise RaftInvariantError(
                f"node {self.node_id}: epoch {epoch} is led by {self.leader_id}, a message says {leader_id}"
            )
        if epoch < self.epoch:
            return
        if leader_id == self.node_id:
            return
        if epoch > self.epoch:
            if leader_id >= 0:
                self._become_follower(now_ms, epoch, leader_id)
            else:
                self._become_unattached(now_ms, epoch)
        elif leader_id >= 0 and self.leader_id == NO_ID:
            self._become_follower(now_ms, epoch, leader_id)

    def _consistent_leader(self, epoch: int, leader_id: int) -> bool:
        if epoch != self.epoch:
            return True
        if leader_id == self.node_id:
            return self.role is Role.LEADER or self.role is Role.RESIGNED
        return self.leader_id == NO_ID or self.leader_id == leader_id

    # ------------------------------------------------------------------------------ timers

    def _random_election_timeout(self) -> int:
        base = self.config.election_timeout_ms
        return base + self._rng.randrange(base)

    def _check_quorum_timeout(self) -> int:
        return self.config.fetch_timeout_ms * 3 // 2

    def _candidate_backoff(self, retries: int) -> int:
        """KafkaRaftClient.binaryExponentialElectionBackoffMs."""
        cap = self.config.election_backoff_max_ms
        return min(cap, 100 * self._rng.randrange(1 << min(retries, 20)) if retries > 0 else 0)

    def poll(self, now_ms: int) -> list[Outbound]:
        """Run what the timers say is due; return the requests to send now."""
        self._poll_due = False
        if self.role is Role.LEADER:
            return self._poll_leader(now_ms)
        if self.role is Role.CANDIDATE:
            return self._poll_candidate(now_ms)
        if self.role is Role.FOLLOWER:
            return self._poll_follower(now_ms)
        if self.role is Role.RESIGNED:
            return self._poll_resigned(now_ms)
        return self._poll_unattached(now_ms)

    def _poll_unattached(self, now_ms: int) -> list[Outbound]:
        if self.is_voter:
            if now_ms >= self._deadline and not self._shutting_down:
                self._become_candidate(now_ms)
                return self.poll(now_ms)
            return []
        # An observer that knows no leader asks any voter (maybeSendAnyVoterFetch).
        voters = [v for v in sorted(self.voters) if self._can_send(v, now_ms)]
        if not voters or self._inflight:
            return []
        return self._send(self._rng.choice(voters), self._fetch_request())

    def _poll_candidate(self, now_ms: int) -> list[Outbound]:
        candidacy = self._candidacy
        assert candidacy is not None
        if candidacy.backoff_until is not None:
            if now_ms >= candidacy.backoff_until:
                self._become_candidate(now_ms)
                return self.poll(now_ms)
            return []
        if now_ms >= self._deadline:
            candidacy.backoff_until = now_ms + self._candidate_backoff(candidacy.retries)
            return self._poll_candidate(now_ms)
        request = m.VoteRequest(
            self.cluster_id, self.epoch, self.node_id, self.log.last_fetched_epoch(), self.log.end_offset()
        )
        out: list[Outbound] = []
        for voter in sorted(self.voters):
            if voter in candidacy.granted or voter in candidacy.rejected or not self._can_send(voter, now_ms):
                continue
            out.extend(self._send(voter, dataclasses.replace(request, voter_id=voter)))
        return out

    def _poll_follower(self, now_ms: int) -> list[Outbound]:
        if now_ms >= self._deadline and self._deadline:
            if self.is_voter and not self._shutting_down:
                self._become_candidate(now_ms)
            else:
                self._become_unattached(now_ms, self.epoch)
            return self.poll(now_ms)
        if not self._can_send(self.leader_id, now_ms):
            return []
        if self._download is not None:
            request: m.RaftRequest = m.FetchSnapshotRequest(
                self.cluster_id,
                self.node_id,
                self.epoch,
                self._download.snapshot_id,
                self._download.position,
                self.config.fetch_max_bytes,
            )
        else:
            request = self._fetch_request()
        return self._send(self.leader_id, request)

    def _poll_leader(self, now_ms: int) -> list[Outbound]:
        leading = self.leading
        assert leading is not None
        self._after_leader_append(now_ms)
        if now_ms >= leading.check_quorum_deadline:
            if len(self.voters) > 1:
                log.warning(
                    "event=raft_check_quorum_failed node=%s epoch=%s heard_from=%s",
                    self.node_id, self.epoch, sorted(leading.fetched_voters),
                )  # fmt: skip
                self._resign(now_ms)
                return self.poll(now_ms)
            leading.check_quorum_deadline = now_ms + self._check_quorum_timeout()
        for observer, progress in list(leading.observers.items()):
            if now_ms - progress.last_fetch_ms >= OBSERVER_SESSION_TIMEOUT_MS:
                del leading.observers[observer]
        out: list[Outbound] = []
        if now_ms >= leading.begin_epoch_due:
            # KAFKA-16536: sent to every other voter, at once and then every fetch timeout / 2.
            leading.begin_epoch_due = now_ms + self.config.fetch_timeout_ms // 2
            self._acknowledged.clear()
        for voter in sorted(self.voters):
            if voter == self.node_id or voter in self._acknowledged or not self._can_send(voter, now_ms):
                continue
            out.extend(
                self._send(voter, m.BeginQuorumEpochRequest(self.cluster_id, self.node_id, self.epoch, voter))
            )
        return out

    def _poll_resigned(self, now_ms: int) -> list[Outbound]:
        if now_ms >= self._deadline and not self._shutting_down:
            if self.is_voter:
                self._become_candidate(now_ms)
            else:
                self._become_unattached(now_ms, self.epoch + 1)
            return self.poll(now_ms)
        out: list[Outbound] = []
        for voter in sorted(self.voters):
            if voter == self.node_id or voter in self._acknowledged or not self._can_send(voter, now_ms):
                continue
            request = m.EndQuorumEpochRequest(self.cluster_id, self.node_id, self.epoch, self._successors)
            out.extend(self._send(voter, request))
        return out

    def _fetch_request(self) -> m.FetchRequest:
        return m.FetchRequest(
            self.cluster_id,
            self.node_id,
            self.epoch,
            self.log.end_offset(),
            self.log.last_fetched_epoch(),
            self.config.fetch_max_wait_ms,
            self.config.fetch_max_bytes,
        )

    def _can_send(self, destination: int, now_ms: int) -> bool:
        return destination not in self._inflight and self._retry_at.get(destination, 0) <= now_ms

    def _send(self, destination: int, request: m.RaftRequest) -> list[Outbound]:
        self._inflight[destination] = request
        return [Outbound(destination, request)]

    # ------------------------------------------------------------------------------ the leader's log

    def append(self, records: Sequence[Any], now_ms: int) -> int:
        """RaftClient.scheduleAtomicAppend: append in the leader's epoch; committed once the HWM passes it."""
        if self.role is not Role.LEADER:
            raise NotLeaderError(
                f"node {self.node_id} does not lead (it is {self.role} in epoch {self.epoch})"
            )
        last = self.log.append_as_leader(records, self.epoch)
        self.log.flush()
        self._after_leader_append(now_ms)
        return last

    def _after_leader_append(self, now_ms: int) -> None:
        """The leader's own end offset counts once fsynced (KafkaRaftClient.flushLeaderLog)."""
        leading = self.leading
        if leading is None:
            return
        mine = leading.replicas.get(self.node_id)
        if mine is not None:
            mine.end_offset = self.log.flushed_end_offset()
            mine.last_fetch_ms = mine.last_caught_up_ms = now_ms
        self._maybe_advance_high_watermark()

    def _maybe_advance_high_watermark(self) -> None:
        """LeaderState.maybeUpdateHighWatermark: the majority's end offset, once past the epoch's start."""
        leading = self.leading
        assert leading is not None
        ends = sorted((p.end_offset for p in leading.replicas.values()), reverse=True)
        candidate = ends[len(ends) // 2]
        if candidate > leading.epoch_start_offset and (
            leading.high_watermark is None or candidate > leading.high_watermark
        ):
            leading.high_watermark = candidate
            self._commit(candidate)

    def _commit(self, offset: int) -> None:
        if offset > self.high_watermark:
            self.high_watermark = offset
            self.log.update_high_watermark(offset)

    # ------------------------------------------------------------------------------ requests

    def handle_request(self, now_ms: int, sender: int, request: m.RaftRequest) -> m.RaftResponse:
        """Answer one request (Fetch is answered at once; the transport may re-ask to park it)."""
        if request.cluster_id is not None and request.cluster_id != self.cluster_id:
            return _error_response(request, m.INCONSISTENT_CLUSTER_ID)
        if isinstance(request, m.VoteRequest):
            return self._on_vote(now_ms, request)
        if isinstance(request, m.BeginQuorumEpochRequest):
            return self._on_begin_epoch(now_ms, request)
        if isinstance(request, m.EndQuorumEpochRequest):
            return self._on_end_epoch(now_ms, request)
        if isinstance(request, m.FetchRequest):
            return self._on_fetch(now_ms, request)
        return self._on_fetch_snapshot(now_ms, request)

    def _voter_only_error(self, sender_id: int, epoch: int) -> int | None:
        if epoch < self.epoch:
            return m.FENCED_LEADER_EPOCH
        if sender_id < 0:
            return m.INVALID_REQUEST
        return None

    def _leader_only_error(self, epoch: int) -> int | None:
        if epoch < self.epoch:
            return m.FENCED_LEADER_EPOCH
        if epoch > self.epoch:
            return m.UNKNOWN_LEADER_EPOCH
        if self.role is not Role.LEADER:
            return m.NOT_LEADER_OR_FOLLOWER
        if self._shutting_down:
            return m.BROKER_NOT_AVAILABLE
        return None

    def _on_vote(self, now_ms: int, request: m.VoteRequest) -> m.VoteResponse:
        """KafkaRaftClient.handleVoteRequest."""
        if request.last_offset < 0 or request.last_offset_epoch < 0:
            return m.VoteResponse(m.NONE, m.INVALID_REQUEST, self.leader_id, self.epoch)
        if request.last_offset_epoch >= request.candidate_epoch:
            return m.VoteResponse(m.NONE, m.INVALID_REQUEST, self.leader_id, self.epoch)
        error = self._voter_only_error(request.candidate_id, request.candidate_epoch)
        if error is not None:
            return m.VoteResponse(m.NONE, error, self.leader_id, self.epoch)
        if request.candidate_epoch > self.epoch:
            self._become_unattached(now_ms, request.candidate_epoch)
        granted = self._grant(request)
        if granted and self.role is Role.UNATTACHED:
            self._set(Role.VOTED, self.epoch, NO_ID, request.candidate_id)
            self._deadline = now_ms + self._random_election_timeout()
        return m.VoteResponse(m.NONE, m.NONE, self.leader_id, self.epoch, granted)

    def _grant(self, request: m.VoteRequest) -> bool:
        """The state's canGrantVote (3.9): only an unattached replica votes, once per epoch."""
        if self.role is Role.VOTED:
            return self.voted_id == request.candidate_id
        if self.role is not Role.UNATTACHED:
            return False
        mine = (self.log.last_fetched_epoch(), self.log.end_offset())
        return (request.last_offset_epoch, request.last_offset) >= mine

    def _on_begin_epoch(self, now_ms: int, request: m.BeginQuorumEpochRequest) -> m.BeginQuorumEpochResponse:
        """KafkaRaftClient.handleBeginQuorumEpochRequest."""
        error = self._voter_only_error(request.leader_id, request.leader_epoch)
        if error is not None:
            return m.BeginQuorumEpochResponse(m.NONE, error, self.leader_id, self.epoch)
        self._maybe_transition(now_ms, request.leader_id, request.leader_epoch)
        return m.BeginQuorumEpochResponse(m.NONE, m.NONE, self.leader_id, self.epoch)

    def _on_end_epoch(self, now_ms: int, request: m.EndQuorumEpochRequest) -> m.EndQuorumEpochResponse:
        """KafkaRaftClient.handleEndQuorumEpochRequest: the named successors stand at once, in their order."""
        error = self._voter_only_error(request.leader_id, request.leader_epoch)
        if error is not None:
            return m.EndQuorumEpochResponse(m.NONE, error, self.leader_id, self.epoch)
        self._maybe_transition(now_ms, request.leader_id, request.leader_epoch)
        if self.role is Role.FOLLOWER and self.leader_id == request.leader_id:
            self._deadline = now_ms + self._end_epoch_backoff(request.preferred_successors)
        return m.EndQuorumEpochResponse(m.NONE, m.NONE, self.leader_id, self.epoch)

    def _end_epoch_backoff(self, successors: Sequence[int]) -> int:
        cap = self.config.election_backoff_max_ms
        position = list(successors).index(self.node_id) if self.node_id in successors else len(successors)
        if position == 0:
            return 0
        if position >= len(successors):
            return cap
        return min(cap, (cap >> (len(successors) - 1)) << (position - 1))

    def _on_fetch(self, now_ms: int, request: m.FetchRequest) -> m.FetchResponse:
        """KafkaRaftClient.handleFetchRequest / tryCompleteFetchRequest."""
        if (
            request.max_wait_ms < 0
            or request.fetch_offset < 0
            or request.last_fetched_epoch < 0
            or request.last_fetched_epoch > request.current_leader_epoch
        ):
            return self._fetch_response(m.INVALID_REQUEST)
        error = self._leader_only_error(request.current_leader_epoch)
        if error is not None:
            return self._fetch_response(error)
        leading = self.leading
        assert leading is not None
        latest = self.log.latest_snapshot_id()
        if request.fetch_offset == 0 and latest is not None:
            return self._fetch_response(m.NONE, snapshot_id=latest)
        kind, where = validate_offset_and_epoch(self.log, request.fetch_offset, request.last_fetched_epoch)
        if kind == "snapshot":
            return self._fetch_response(m.NONE, snapshot_id=where)
        if kind == "diverging":
            return self._fetch_response(m.NONE, diverging=where)
        records = self.log.read(request.fetch_offset, request.max_bytes)
        self._record_fetch(now_ms, request.replica_id, request.fetch_offset)
        return self._fetch_response(m.NONE, records=records)

    def _record_fetch(self, now_ms: int, replica_id: int, fetch_offset: int) -> None:
        """LeaderState.updateReplicaState, and the check-quorum bookkeeping of a voter's fetch."""
        leading = self.leading
        assert leading is not None
        if replica_id < 0:
            return
        if replica_id in leading.replicas:
            progress = leading.replicas[replica_id]
            self._note_voter_fetch(now_ms, replica_id)
        else:
            progress = leading.observers.setdefault(replica_id, ReplicaProgress())
        leader_end = self.log.end_offset()
        if fetch_offset >= leader_end:
            progress.last_caught_up_ms = max(progress.last_caught_up_ms, now_ms)
        elif progress.last_fetch_leader_end > 0 and fetch_offset >= progress.last_fetch_leader_end:
            progress.last_caught_up_ms = max(progress.last_caught_up_ms, progress.last_fetch_ms)
        progress.last_fetch_leader_end = leader_end
        progress.last_fetch_ms = now_ms
        if replica_id in leading.replicas and fetch_offset > progress.end_offset:
            progress.end_offset = fetch_offset
            self._maybe_advance_high_watermark()
        elif replica_id not in leading.replicas:
            progress.end_offset = fetch_offset

    def _note_voter_fetch(self, now_ms: int, voter: int) -> None:
        leading = self.leading
        assert leading is not None
        leading.fetched_voters.add(voter)
        others_needed = self.majority - (1 if self.is_voter else 0)
        if len(leading.fetched_voters) >= others_needed:
            leading.fetched_voters.clear()
            leading.check_quorum_deadline = now_ms + self._check_quorum_timeout()

    def _fetch_response(
        self,
        partition_error: int,
        *,
        records: bytes = b"",
        diverging: OffsetAndEpoch | None = None,
        snapshot_id: OffsetAndEpoch | None = None,
    ) -> m.FetchResponse:
        hwm = self.leading.high_watermark if self.leading is not None else None
        return m.FetchResponse(
            m.NONE,
            partition_error,
            self.leader_id,
            self.epoch,
            -1 if hwm is None else hwm,
            self.log.start_offset(),
            records,
            diverging,
            snapshot_id,
        )

    def _on_fetch_snapshot(self, now_ms: int, request: m.FetchSnapshotRequest) -> m.FetchSnapshotResponse:
        """KafkaRaftClient.handleFetchSnapshotRequest."""
        error = self._leader_only_error(request.current_leader_epoch)
        if error is not None:
            return m.FetchSnapshotResponse(m.NONE, error, self.leader_id, self.epoch)
        size = self.log.snapshot_size(request.snapshot_id)
        if size is None or request.snapshot_id == OffsetAndEpoch(0, 0):
            return m.FetchSnapshotResponse(m.NONE, m.SNAPSHOT_NOT_FOUND, self.leader_id, self.epoch)
        if request.position < 0 or request.position >= size:
            return m.FetchSnapshotResponse(m.NONE, m.POSITION_OUT_OF_RANGE, self.leader_id, self.epoch)
        if request.replica_id in self.voters:
            self._note_voter_fetch(now_ms, request.replica_id)
        data = self.log.read_snapshot(request.snapshot_id, request.position, request.max_bytes)
        return m.FetchSnapshotResponse(
            m.NONE, m.NONE, self.leader_id, self.epoch, request.snapshot_id, size, request.position, data
        )

    def describe(self, now_ms: int) -> m.QuorumDescription:
        """KafkaRaftClient.handleDescribeQuorumRequest: the leader's view of every replica."""
        leading = self.leading
        if leading is None:
            return m.QuorumDescription(m.NOT_LEADER_OR_FOLLOWER, self.leader_id, self.epoch)

        def describe(replica: int, progress: ReplicaProgress) -> m.ReplicaDescription:
            if replica == self.node_id:
                return m.ReplicaDescription(replica, progress.end_offset, now_ms, now_ms)
            return m.ReplicaDescription(
                replica, progress.end_offset, progress.last_fetch_ms, progress.last_caught_up_ms
            )

        return m.QuorumDescription(
            m.NONE,
            self.node_id,
            self.epoch,
            -1 if leading.high_watermark is None else leading.high_watermark,
            tuple(describe(v, p) for v, p in sorted(leading.replicas.items())),
            tuple(describe(o, p) for o, p in sorted(leading.observers.items())),
            dict(self.voters),
        )

    # ------------------------------------------------------------------------------ responses

    def handle_response(
        self, now_ms: int, source: int, request: m.RaftRequest, response: m.RaftResponse | None
    ) -> None:
        """Take back the answer to a request `poll` returned (None: it failed, timed out or was cut off)."""
        if self._inflight.get(source) is not request:
            return  # A request of an earlier state: Kafka drops responses it no longer waits for.
        del self._inflight[source]
        self._poll_due = True
        if response is None:
            self._retry_at[source] = now_ms + self.config.retry_backoff_ms
            return
        if response.error_code != m.NONE:
            # Top-level errors (cluster id, malformed request) are the sender's configuration fault.
            log.warning(
                "event=raft_request_refused node=%s to=%s request=%s error=%s",
                self.node_id, source, type(request).__name__, response.error_code,
            )  # fmt: skip
            self._retry_at[source] = now_ms + self.config.retry_backoff_ms
            return
        handled = self._common_response(now_ms, source, response)
        if handled:
            return
        if isinstance(response, m.VoteResponse):
            self._on_vote_response(now_ms, source, response)
        elif isinstance(response, m.BeginQuorumEpochResponse | m.EndQuorumEpochResponse):
            if response.partition_error == m.NONE:
                self._acknowledged.add(source)
        elif isinstance(response, m.FetchResponse):
            self._on_fetch_response(now_ms, response)
        elif isinstance(response, m.FetchSnapshotResponse):
            self._on_fetch_snapshot_response(now_ms, response)

    def _common_response(self, now_ms: int, source: int, response: m.RaftResponse) -> bool:
        """KafkaRaftClient.maybeHandleCommonResponse: True when the response needs nothing more."""
        error, leader, epoch = response.partition_error, response.leader_id, response.leader_epoch
        if error == m.INVALID_REQUEST:
            raise RaftInvariantError(f"node {source} answered INVALID_REQUEST to node {self.node_id}")
        if epoch < self.epoch or error == m.UNKNOWN_LEADER_EPOCH:
            return True
        if epoch > self.epoch or error in (m.FENCED_LEADER_EPOCH, m.NOT_LEADER_OR_FOLLOWER):
            self._maybe_transition(now_ms, leader, epoch)
            return True
        if epoch == self.epoch and leader >= 0 and self.leader_id == NO_ID:
            self._become_follower(now_ms, epoch, leader)
            return error != m.NONE
        if error == m.BROKER_NOT_AVAILABLE:
            self._retry_at[source] = now_ms + self.config.retry_backoff_ms
            return True
        return False

    def _on_vote_response(self, now_ms: int, source: int, response: m.VoteResponse) -> None:
        candidacy = self._candidacy
        if self.role is not Role.CANDIDATE or candidacy is None or response.partition_error != m.NONE:
            return
        if response.vote_granted:
            candidacy.granted.add(source)
            if len(candidacy.granted & set(self.voters)) >= self.majority:
                self._become_leader(now_ms)
        else:
            candidacy.rejected.add(source)
            if len(self.voters) - len(candidacy.rejected) < self.majority and candidacy.backoff_until is None:
                candidacy.backoff_until = now_ms + self._candidate_backoff(candidacy.retries)

    def _on_fetch_response(self, now_ms: int, response: m.FetchResponse) -> None:
        """KafkaRaftClient.handleFetchResponse for a follower."""
        if self.role is not Role.FOLLOWER or response.partition_error != m.NONE:
            return
        self._deadline = now_ms + self.config.fetch_timeout_ms
        if response.diverging_epoch is not None:
            target = response.diverging_epoch
            if self.high_watermark >= 0 and target.offset < self.high_watermark:
                raise RaftInvariantError(
                    f"node {self.node_id}: leader {self.leader_id} asked to truncate to {target.offset}, below "
                    f"the high watermark {self.high_watermark}"
                )
            local = end_offset_for_epoch(self.log, target.epoch)
            offset = min(local.offset, target.offset)
            if self.high_watermark >= 0 and offset < self.high_watermark:
                raise RaftInvariantError(
                    f"node {self.node_id}: truncation to {offset} is below the high watermark {self.high_watermark}"
                )
            log.info("event=raft_truncated node=%s to_offset=%s epoch=%s", self.node_id, offset, self.epoch)
            self.log.truncate_to(offset)
            return
        if response.snapshot_id is not None:
            # A fresh download (Kafka creates a new snapshot writer): bytes of an abandoned one must not stay.
            self._abandon_download()
            self.log.discard_partial_snapshot(response.snapshot_id)
            self._download = _SnapshotDownload(response.snapshot_id)
            return
        if response.records:
            try:
                self.log.append_as_follower(response.records)
            except CorruptDataError as exc:
                log.warning("event=raft_fetch_rejected node=%s reason=%s", self.node_id, exc)
                return
            self.log.flush()  # voters fsync before the next Fetch reports the new end offset
        if response.high_watermark >= 0:
            self._commit(min(response.high_watermark, self.log.flushed_end_offset()))

    def _abandon_download(self) -> None:
        """FollowerState.close: a snapshot download that will not be finished leaves no partial bytes."""
        if self._download is not None:
            self.log.discard_partial_snapshot(self._download.snapshot_id)
            self._download = None

    def _on_fetch_snapshot_response(self, now_ms: int, response: m.FetchSnapshotResponse) -> None:
        download = self._download
        if self.role is not Role.FOLLOWER or download is None:
            return
        if response.partition_error == m.SNAPSHOT_NOT_FOUND:
            self._abandon_download()
            return
        if response.partition_error != m.NONE or response.snapshot_id != download.snapshot_id:
            return
        self._deadline = now_ms + self.config.fetch_timeout_ms
        if response.position != download.position:
            return
        self.log.write_snapshot_chunk(download.snapshot_id, download.position, response.data)
        download.position += len(response.data)
        if download.position >= response.size:
            self.log.install_snapshot(download.snapshot_id)
            self._download = None
            self._commit(download.snapshot_id.offset)


def _error_response(request: m.RaftRequest, error: int) -> m.RaftResponse:
    """A top-level error answer of the request's own kind."""
    if isinstance(request, m.VoteRequest):
        return m.VoteResponse(error)
    if isinstance(request, m.BeginQuorumEpochRequest):
        return m.BeginQuorumEpochResponse(error)
    if isinstance(request, m.EndQuorumEpochRequest):
        return m.EndQuorumEpochResponse(error)
    if isinstance(request, m.FetchRequest):
        return m.FetchResponse(error)
    return m.FetchSnapshotResponse(error)
