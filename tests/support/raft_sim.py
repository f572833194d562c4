"""A deterministic simulation of the Raft wing: Kafka's RaftEventSimulationTest with MockLog and MockNetwork.

Every node runs the real `RaftClient` over `SimLog` (an in-memory `ReplicatedLog` holding real record-batch
bytes) and `SimElectionStore`; one seeded `random.Random` drives a simulated clock, an event queue, message
delay, loss, reordering, partitions, kills and restarts. The leader keeps appending a replicated counter
(each committed value is the previous one plus one). `check_invariants` runs after every event and raises
`SimulationViolation` naming the seed, so `RaftSimulation(seed, ...)` replays the failing run exactly.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import heapq
import random
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bridge.raft import messages as m
from bridge.raft.client import Outbound, RaftClient, RaftConfig
from bridge.raft.messages import OffsetAndEpoch
from bridge.raft.quorum import NO_ID, Election, Role
from migrate.kraft import records as rec
from migrate.kraft.batch import encode_kraft_batch, iter_kraft_batches
from migrate.kraft.framing import encode_control_record
from tests.support.raft_wire import kafka_wire

COUNTER = struct.Struct(">q")
SNAPSHOT_FILLER = b"s" * 48
"""Padding records that make a snapshot span several FetchSnapshot chunks."""

WireHook = Callable[[Any], Any]
"""What the network does to each request and response on the way (`kafka_wire`: Kafka's bytes and back)."""


class SimulationViolation(AssertionError):
    """An invariant broke, or the core raised; the message names the seed that replays it."""


# ---------------------------------------------------------------------------------------------- the log


@dataclass(slots=True)
class _Batch:
    base: int
    epoch: int
    data: bytes
    values: tuple[int | None, ...]
    """The counter value of each record, None for a control record."""

    @property
    def end(self) -> int:
        return self.base + len(self.values)


class SimLog:
    """Kafka's MockLog: batches with offsets and epochs, an epoch cache, a flush point and snapshots."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.batches: list[_Batch] = []
        self._bases: list[int] = []
        self.start = 0
        self.epochs: list[tuple[int, int]] = []
        self.flushed = 0
        self.hwm = 0
        self.snapshots: dict[OffsetAndEpoch, bytes] = {}
        self.partial: dict[OffsetAndEpoch, bytearray] = {}
        self.installed_snapshots = 0
        self.on_truncate: Callable[[SimLog, int], None] | None = None
        """Called before entries at and after the offset are dropped (the invariant checker's hook)."""

    # -------------------------------------------------------------- queries

    def end_offset(self) -> int:
        return self.batches[-1].end if self.batches else self.start

    def start_offset(self) -> int:
        return self.start

    def last_fetched_epoch(self) -> int:
        if self.batches:
            return self.batches[-1].epoch
        at_start = self._snapshot_at(self.start)
        return at_start.epoch if at_start is not None else 0

    def epoch_starts(self) -> list[tuple[int, int]]:
        return list(self.epochs)

    def flushed_end_offset(self) -> int:
        return self.flushed

    def entry(self, offset: int) -> tuple[int, int | None]:
        """(epoch, counter value or None) of the record at `offset`, which must be held in the log."""
        i = bisect.bisect_right(self._bases, offset) - 1
        batch = self.batches[i]
        return batch.epoch, batch.values[offset - batch.base]

    def counter_before(self, offset: int) -> int:
        """The counter's value after every record below `offset` (from the log, else the snapshot at its start)."""
        i = bisect.bisect_right(self._bases, offset - 1) - 1
        while i >= 0:
            batch = self.batches[i]
            for value in reversed(batch.values[: max(0, offset - batch.base)]):
                if value is not None:
                    return value
            i -= 1
        at_start = self._snapshot_at(self.start)
        return snapshot_counter(self.snapshots[at_start]) if at_start is not None else 0

    def _snapshot_at(self, offset: int) -> OffsetAndEpoch | None:
        return next((s for s in self.snapshots if s.offset == offset), None)

    # -------------------------------------------------------------- appends

    def _add(self, batch: _Batch) -> None:
        if batch.base != self.end_offset():
            raise SimulationViolation(
                f"node {self.node_id}: batch at offset {batch.base} appended to a log ending at {self.end_offset()}"
            )
        last_epoch = self.epochs[-1][0] if self.epochs else -1
        if batch.epoch < last_epoch:
            raise SimulationViolation(
                f"node {self.node_id}: batch of epoch {batch.epoch} appended after epoch {last_epoch}"
            )
        if batch.epoch > last_epoch:
            self.epochs.append((batch.epoch, batch.base))
        self.batches.append(batch)
        self._bases.append(batch.base)

    def append_as_leader(self, records: list[Any], epoch: int) -> int:
        base = self.end_offset()
        values = tuple(int(v) for v in records)
        data = encode_kraft_batch(base, epoch, 0, [(None, COUNTER.pack(v)) for v in values], False)
        self._add(_Batch(base, epoch, data, values))
        return base + len(values) - 1

    def append_leader_change(self, epoch: int, leader_id: int, voters: Any, granting: Any) -> int:
        message = rec.LeaderChangeMessage(
            version=0,
            leader_id=leader_id,
            voters=[rec.LeaderChangeMessage.Voter(voter_id=v) for v in voters],
            granting_voters=[rec.LeaderChangeMessage.Voter(voter_id=v) for v in granting],
        )
        base = self.end_offset()
        data = encode_kraft_batch(base, epoch, 0, [encode_control_record(message)], True)
        self._add(_Batch(base, epoch, data, (None,)))
        return base

    def append_as_follower(self, data: bytes) -> None:
        batches = iter_kraft_batches(data, f"Fetch response to node {self.node_id}")
        for position, header, entries in batches:
            raw = data[position : position + header.size_in_bytes]
            if header.is_control:
                values: tuple[int | None, ...] = tuple(None for _ in entries)
            else:
                values = tuple(COUNTER.unpack(value or b"")[0] for _delta, _key, value in entries)
            self._add(_Batch(header.base_offset, header.partition_leader_epoch, raw, values))

    def truncate_to(self, offset: int) -> None:
        if offset < self.hwm:
            raise SimulationViolation(
                f"node {self.node_id}: truncation to {offset} below the log's high watermark {self.hwm}"
            )
        if offset >= self.end_offset():
            return
        if offset < self.start:
            raise SimulationViolation(f"node {self.node_id}: truncation to {offset} below the log start")
        if self.on_truncate is not None:
            self.on_truncate(self, offset)
        while self.batches and self.batches[-1].end > offset:
            self.batches.pop()
            self._bases.pop()
        end = self.end_offset()
        self.epochs = [(e, s) for e, s in self.epochs if s < end]
        self.flushed = min(self.flushed, end)

    def flush(self) -> None:
        self.flushed = self.end_offset()

    def update_high_watermark(self, offset: int) -> None:
        self.hwm = max(self.hwm, min(offset, self.end_offset()))

    def read(self, offset: int, max_bytes: int) -> bytes:
        if offset >= self.end_offset():
            return b""
        i = max(0, bisect.bisect_right(self._bases, offset) - 1)
        out: list[bytes] = []
        size = 0
        for batch in self.batches[i:]:
            if out and size + len(batch.data) > max_bytes:
                break
            out.append(batch.data)
            size += len(batch.data)
        return b"".join(out)

    # -------------------------------------------------------------- snapshots

    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        return max(self.snapshots, default=None)

    def earliest_snapshot_id(self) -> OffsetAndEpoch | None:
        return min(self.snapshots, default=None)

    def snapshot_size(self, snapshot_id: OffsetAndEpoch) -> int | None:
        data = self.snapshots.get(snapshot_id)
        return None if data is None else len(data)

    def read_snapshot(self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int) -> bytes:
        return self.snapshots[snapshot_id][position : position + max_bytes]

    def write_snapshot_chunk(self, snapshot_id: OffsetAndEpoch, position: int, data: bytes) -> None:
        partial = self.partial.setdefault(snapshot_id, bytearray())
        if position != len(partial):
            raise SimulationViolation(
                f"node {self.node_id}: snapshot chunk at {position} of a download holding {len(partial)} bytes"
            )
        partial.extend(data)

    def install_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        data = bytes(self.partial.pop(snapshot_id))
        snapshot_counter(data)  # parses: a download that is not whole would fail here
        if self.on_truncate is not None and self.batches:
            self.on_truncate(self, max(self.start, min(snapshot_id.offset, self.end_offset())))
        self.snapshots = {snapshot_id: data}
        self.batches.clear()
        self._bases.clear()
        self.epochs.clear()
        self.start = self.flushed = snapshot_id.offset
        self.hwm = max(self.hwm, snapshot_id.offset)
        self.installed_snapshots += 1

    def discard_partial_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        self.partial.pop(snapshot_id, None)

    def create_snapshot(self, offset: int) -> OffsetAndEpoch:
        """Snapshot the committed counter at `offset` (the state machine's SnapshotWriter)."""
        epoch, _value = self.entry(offset - 1)
        snapshot_id = OffsetAndEpoch(offset, epoch)
        self.snapshots[snapshot_id] = encode_snapshot(self.counter_before(offset), epoch)
        return snapshot_id

    def delete_before(self, snapshot_id: OffsetAndEpoch) -> bool:
        """KafkaMetadataLog.deleteBeforeSnapshot: drop older snapshots and the batches below this one."""
        offset = snapshot_id.offset
        if snapshot_id not in self.snapshots or offset <= self.start or offset > self.hwm:
            return False
        i = bisect.bisect_left(self._bases, offset)
        if i < len(self._bases) and self._bases[i] != offset and offset != self.end_offset():
            return False
        if i == len(self._bases) and offset != self.end_offset():
            return False
        del self.batches[:i]
        del self._bases[:i]
        kept = [(e, s) for e, s in self.epochs if s >= offset]
        older = [(e, s) for e, s in self.epochs if s < offset]
        if older and not (kept and kept[0][1] == offset):
            kept.insert(0, (older[-1][0], offset))
        self.epochs = kept if self.batches else []
        self.start = offset
        self.snapshots = {s: d for s, d in self.snapshots.items() if s.offset >= offset}
        return True

    def reopen(self) -> None:
        """A crash: everything after the flush point and every partial download is gone."""
        while self.batches and self.batches[-1].end > self.flushed:
            self.batches.pop()
            self._bases.pop()
        end = self.end_offset()
        self.epochs = [(e, s) for e, s in self.epochs if s < end]
        self.partial.clear()
        self.hwm = 0


def encode_snapshot(counter: int, epoch: int) -> bytes:
    records = [(None, COUNTER.pack(counter))] + [(None, SNAPSHOT_FILLER)] * 40
    return encode_kraft_batch(0, epoch, 0, records, False)


def snapshot_counter(data: bytes) -> int:
    for _position, _header, entries in iter_kraft_batches(data, "snapshot"):
        return int(COUNTER.unpack(entries[0][2] or b"")[0])
    raise SimulationViolation("empty snapshot")


class SimElectionStore:
    """Kafka's MockQuorumStateStore: what `write` persisted survives a kill."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.persisted: Election | None = None
        self.writes = 0

    def read(self) -> Election | None:
        return self.persisted

    def write(self, election: Election) -> None:
        if self.persisted is not None and election.epoch < self.persisted.epoch:
            raise SimulationViolation(
                f"node {self.node_id}: persisted epoch went back from {self.persisted.epoch} to {election.epoch}"
            )
        self.persisted = election
        self.writes += 1


# ---------------------------------------------------------------------------------------------- nodes


@dataclass(slots=True)
class SimNode:
    node_id: int
    is_voter: bool
    log: SimLog
    store: SimElectionStore
    client: RaftClient | None = None
    incarnation: int = 0
    poll_at: int | None = None
    parked: list[tuple[int, int, m.FetchRequest, int]] = field(default_factory=list)
    """Fetches waiting for new data: (sender, sender incarnation, request, deadline)."""
    parked_key: tuple[int, int, int, str] = (0, 0, 0, "")
    checked_to: int = 0
    """Offsets below this were compared with (or added to) the committed record at this incarnation."""
    last_hwm: int = -1

    @property
    def alive(self) -> bool:
        return self.client is not None


@dataclass(slots=True)
class _Message:
    seq: int
    src: int
    dst: int
    src_incarnation: int
    request: m.RaftRequest
    settled: bool = False


@dataclass(frozen=True, slots=True)
class SimSettings:
    """The knobs of one run (Kafka's defaults for the Raft timers)."""

    voters: int = 3
    observers: int = 0
    loss: float = 0.0
    min_delay_ms: int = 1
    max_delay_ms: int = 15
    poll_jitter_ms: int = 5
    append_every_ms: tuple[int, int] = (20, 60)
    snapshot_every: int = 20
    backlog: int = 60
    """The leader appends no more while this many offsets wait for commit."""
    check_majority: bool = True
    check_epochs: bool = True
    raft: RaftConfig = field(default_factory=lambda: RaftConfig(fetch_max_bytes=1024))


class RaftSimulation:
    """A seeded cluster of `RaftClient`s on a simulated clock and network; see the module docstring."""

    def __init__(self, seed: int, settings: SimSettings = SimSettings(), wire: WireHook = kafka_wire) -> None:
        self.seed = seed
        self.settings = settings
        self.wire = wire
        self.rng = random.Random(seed)
        self.now = 0
        self.steps = 0
        self._seq = 0
        self._queue: list[tuple[int, int, str, Any]] = []
        voter_ids = list(range(1, settings.voters + 1))
        observer_ids = list(range(101, 101 + settings.observers))
        self.voters = {v: m.Endpoint("sim", 9000 + v) for v in voter_ids}
        self.nodes: dict[int, SimNode] = {}
        for node_id in voter_ids + observer_ids:
            self.nodes[node_id] = self._new_disk(node_id, node_id in self.voters)
        self.blocked: set[tuple[int, int]] = set()
        """(source, destination) pairs whose traffic is dropped."""
        self.trace = hashlib.sha256()
        self.events: list[str] = []
        # invariant state
        self.leaders: dict[int, int] = {}
        """epoch → the one leader any node ever claimed or persisted for it."""
        self.committed: dict[int, tuple[int, int | None]] = {}
        self.committed_end = 0
        self.max_leader_hwm = -1
        self.max_elected_epoch = 0
        self.persisted_epochs: dict[int, int] = {}
        self.appended = 0
        self.lost_disk: set[int] = set()
        self._parked_messages: dict[int, _Message] = {}

    # -------------------------------------------------------------- cluster control

    def _new_disk(self, node_id: int, is_voter: bool) -> SimNode:
        node = SimNode(node_id, is_voter, SimLog(node_id), SimElectionStore(node_id))
        node.log.on_truncate = self._on_truncate
        return node

    def start(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node.alive:
            return
        node.incarnation += 1
        node.checked_to = 0
        node.last_hwm = -1
        node.client = RaftClient(
            node_id=node_id,
            voters=self.voters,
            cluster_id="sim-cluster",
            log=node.log,  # type: ignore[arg-type]
            store=node.store,
            rng=random.Random(self.rng.getrandbits(64)),
            config=self.settings.raft,
        )
        self._guard(node, lambda: node.client.start(self.now) if node.client else None)
        self._record(f"start {node_id}")
        self._schedule_poll(node, self.now)

    def start_all(self) -> None:
        for node_id in sorted(self.nodes):
            self.start(node_id)
        self._schedule(self.now, "append", None)

    def kill(self, node_id: int) -> None:
        """SIGKILL: volatile state and unflushed log lost; what the store persisted survives."""
        node = self.nodes[node_id]
        node.client = None
        node.poll_at = None
        for _sender, _incarnation, request, _deadline in node.parked:
            self._parked_messages.pop(id(request), None)
        node.parked.clear()
        node.log.reopen()
        self._record(f"kill {node_id}")

    def restart(self, node_id: int) -> None:
        self.kill(node_id)
        self.start(node_id)

    def kill_and_delete(self, node_id: int) -> None:
        """The lost-disk case: the node comes back with an empty log and no quorum-state."""
        self.kill(node_id)
        node = self.nodes[node_id]
        fresh = self._new_disk(node_id, node.is_voter)
        fresh.incarnation = node.incarnation
        self.nodes[node_id] = fresh
        self.persisted_epochs.pop(node_id, None)
        self.lost_disk.add(node_id)
        self._record(f"delete {node_id}")

    def shutdown(self, node_id: int) -> None:
        node = self.nodes[node_id]
        self._guard(node, lambda: node.client.shutdown(self.now) if node.client else None)
        self._record(f"shutdown {node_id}")
        if node.client is not None:
            self._schedule_poll(node, max(self.now, node.client.next_deadline(self.now)))

    def partition(self, node_id: int) -> None:
        """Drop all traffic to and from `node_id`."""
        for other in self.nodes:
            if other != node_id:
                self.blocked |= {(node_id, other), (other, node_id)}
        self._record(f"partition {node_id}")

    def block(self, source: int, destination: int) -> None:
        """Drop traffic from `source` to `destination` only (a one-way partition)."""
        self.blocked.add((source, destination))
        self._record(f"block {source}->{destination}")

    def chaos(self, rounds: int = 80) -> None:
        """Kills, restarts, partitions and one-way blocks at random moments, then every node healed and alive."""
        chaos = self.rng
        for _round in range(rounds):
            self.run_for(chaos.randint(100, 800))
            node_id = chaos.choice(sorted(self.nodes))
            action = chaos.randrange(6)
            if action == 0:
                self.kill(node_id)
            elif action == 1:
                self.start(node_id)
            elif action == 2:
                self.partition(node_id)
            elif action == 3:
                self.block(node_id, chaos.choice(sorted(self.nodes)))
            else:
                self.heal()
                for dead in sorted(self.nodes):
                    self.start(dead)
        self.heal()
        for node_id in sorted(self.nodes):
            self.start(node_id)

    def heal(self) -> None:
        self.blocked.clear()
        self._record("heal")

    def alive(self) -> list[SimNode]:
        return [n for _id, n in sorted(self.nodes.items()) if n.alive]

    def leader(self) -> SimNode | None:
        """The live leader of the newest epoch that ever had a leader (a stale leader does not count)."""
        for node in self.alive():
            client = node.client
            assert client is not None
            if client.role is Role.LEADER and client.epoch == self.max_elected_epoch:
                return node
        return None

    def high_watermark(self, node_id: int) -> int:
        client = self.nodes[node_id].client
        return client.high_watermark if client is not None else -1

    # -------------------------------------------------------------- running

    def run_until(self, done: Callable[[], bool], within_ms: int, what: str) -> None:
        deadline = self.now + within_ms
        while not done():
            if not self._queue or self._queue[0][0] > deadline:
                raise SimulationViolation(self._explain(f"{what}: not reached within {within_ms} ms"))
            self.step()

    def run_for(self, ms: int) -> None:
        deadline = self.now + ms
        while self._queue and self._queue[0][0] <= deadline:
            self.step()
        self.now = max(self.now, deadline)

    def step(self) -> None:
        at, _seq, kind, payload = heapq.heappop(self._queue)
        self.now = max(self.now, at)
        self.steps += 1
        if kind == "poll":
            self._on_poll(payload)
        elif kind == "deliver_request":
            self._on_deliver_request(payload)
        elif kind == "deliver_response":
            self._on_deliver_response(*payload)
        elif kind == "timeout":
            self._on_timeout(payload)
        elif kind == "park_deadline":
            self._complete_parked(self.nodes[payload], force=True)
        elif kind == "append":
            self._on_append()
        self.check_invariants()

    def _schedule(self, at: int, kind: str, payload: Any) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (at, self._seq, kind, payload))

    def _schedule_poll(self, node: SimNode, at: int) -> None:
        at += self.rng.randrange(self.settings.poll_jitter_ms + 1)
        if node.poll_at is not None and node.poll_at <= at:
            return
        node.poll_at = at
        self._schedule(at, "poll", (node.node_id, node.incarnation, at))

    def _record(self, line: str) -> None:
        entry = f"{self.now} {line}"
        self.trace.update(entry.encode())
        self.events.append(entry)
        if len(self.events) > 60:
            del self.events[:20]

    def _guard(self, node: SimNode, action: Callable[[], Any]) -> Any:
        try:
            return action()
        except SimulationViolation as exc:
            raise SimulationViolation(self._explain(str(exc))) from exc
        except Exception as exc:
            raise SimulationViolation(
                self._explain(f"node {node.node_id} raised {type(exc).__name__}: {exc}")
            ) from exc

    def _explain(self, problem: str) -> str:
        recent = "\n  ".join(self.events[-25:])
        states = "\n  ".join(self._describe(n) for n in self.nodes.values())
        return (
            f"{problem}\n(seed={self.seed}, step={self.steps}, t={self.now} ms; replay with "
            f"RaftSimulation({self.seed}, {self.settings!r}))\nnodes:\n  {states}\nrecent events:\n  {recent}"
        )

    def _describe(self, node: SimNode) -> str:
        client = node.client
        if client is None:
            return f"{node.node_id}: down, log end {node.log.end_offset()}, stored {node.store.persisted}"
        return (
            f"{node.node_id}: {client.role} epoch {client.epoch} leader {client.leader_id} "
            f"hwm {client.high_watermark} log [{node.log.start}, {node.log.end_offset()})"
        )

    # -------------------------------------------------------------- events

    def _on_poll(self, payload: tuple[int, int, int]) -> None:
        node_id, incarnation, at = payload
        node = self.nodes[node_id]
        if node.client is None or node.incarnation != incarnation or node.poll_at != at:
            return
        node.poll_at = None
        client = node.client
        outbound: list[Outbound] = self._guard(node, lambda: client.poll(self.now))
        for out in outbound:
            self._send(node, out)
        self._after(node)
        self._schedule_poll(node, max(self.now + 1, client.next_deadline(self.now)))

    def _send(self, node: SimNode, out: Outbound) -> None:
        self._seq += 1
        message = _Message(self._seq, node.node_id, out.destination, node.incarnation, out.request)
        self._record(f"send {node.node_id}->{out.destination} {type(out.request).__name__}")
        self._schedule(self.now + self.settings.raft.request_timeout_ms, "timeout", message)
        if self._lost(node.node_id, out.destination):
            return
        self._schedule(self.now + self._delay(), "deliver_request", message)

    def _lost(self, source: int, destination: int) -> bool:
        loss = self.settings.loss
        return (source, destination) in self.blocked or (loss > 0 and self.rng.random() < loss)

    def _delay(self) -> int:
        return self.rng.randint(self.settings.min_delay_ms, self.settings.max_delay_ms)

    def _on_deliver_request(self, message: _Message) -> None:
        node = self.nodes[message.dst]
        client = node.client
        if client is None or (message.src, message.dst) in self.blocked:
            return
        request = self.wire(message.request)
        response = self._guard(node, lambda: client.handle_request(self.now, message.src, request))
        if (
            isinstance(request, m.FetchRequest)
            and isinstance(response, m.FetchResponse)
            and _is_empty(response)
            and request.max_wait_ms > 0
        ):
            deadline = self.now + request.max_wait_ms
            node.parked.append((message.src, message.src_incarnation, request, deadline))
            node.parked_key = self._park_key(node)
            self._parked_messages[id(request)] = message
            self._schedule(deadline, "park_deadline", node.node_id)
        else:
            self._respond(message, response)
        self._after(node)
        self._schedule_poll(node, max(self.now, client.next_deadline(self.now)))

    def _respond(self, message: _Message, response: m.RaftResponse) -> None:
        if self._lost(message.dst, message.src):
            return
        self._schedule(self.now + self._delay(), "deliver_response", (message, self.wire(response)))

    def _on_deliver_response(self, message: _Message, response: m.RaftResponse) -> None:
        node = self.nodes[message.src]
        client = node.client
        if client is None or node.incarnation != message.src_incarnation or message.settled:
            return
        if (message.dst, message.src) in self.blocked:
            return
        message.settled = True
        self._record(
            f"answer {message.dst}->{message.src} {type(response).__name__} {response.partition_error}"
        )
        self._guard(node, lambda: client.handle_response(self.now, message.dst, message.request, response))
        self._after(node)
        self._schedule_poll(node, max(self.now, client.next_deadline(self.now)))

    def _on_timeout(self, message: _Message) -> None:
        node = self.nodes[message.src]
        client = node.client
        if client is None or node.incarnation != message.src_incarnation or message.settled:
            return
        message.settled = True
        self._guard(node, lambda: client.handle_response(self.now, message.dst, message.request, None))
        self._schedule_poll(node, max(self.now, client.next_deadline(self.now)))

    def _park_key(self, node: SimNode) -> tuple[int, int, int, str]:
        client = node.client
        assert client is not None
        return (node.log.end_offset(), client.high_watermark, client.epoch, str(client.role))

    def _complete_parked(self, node: SimNode, *, force: bool) -> None:
        """Answer the parked fetches whose wait ended, or all of them once the log, HWM or role moved."""
        client = node.client
        if client is None or not node.parked:
            return
        moved = self._park_key(node) != node.parked_key
        if not moved and not force:
            return
        still: list[tuple[int, int, m.FetchRequest, int]] = []
        for sender, incarnation, request, deadline in node.parked:
            if not moved and self.now < deadline:
                still.append((sender, incarnation, request, deadline))
                continue
            message = self._parked_messages.pop(id(request))
            response = self._guard(node, functools.partial(client.handle_request, self.now, sender, request))
            self._respond(message, response)
        node.parked = still
        node.parked_key = self._park_key(node)

    def _on_append(self) -> None:
        low, high = self.settings.append_every_ms
        self._schedule(self.now + self.rng.randint(low, high), "append", None)
        for node in self.alive():
            client = node.client
            assert client is not None
            # ReplicatedCounter.increment: only a leader whose epoch committed, with a bounded backlog.
            if (
                not client.leader_ready()
                or node.log.end_offset() - client.high_watermark > self.settings.backlog
            ):
                continue
            start = node.log.counter_before(node.log.end_offset())
            values = [start + 1 + i for i in range(self.rng.randint(1, 3))]
            self._guard(node, functools.partial(client.append, values, self.now))
            self.appended += len(values)
            self._record(f"append {node.node_id} {values}")
            self._after(node)

    def _after(self, node: SimNode) -> None:
        """Bookkeeping after `node` did something: commits, snapshots, parked fetches."""
        client = node.client
        if client is None:
            return
        self._note_commits(node)
        self._maybe_snapshot(node)
        if node.parked:
            self._complete_parked(node, force=False)

    # -------------------------------------------------------------- snapshots

    def _maybe_snapshot(self, node: SimNode) -> None:
        client = node.client
        assert client is not None
        hwm = client.high_watermark
        log = node.log
        latest = log.latest_snapshot_id()
        since = latest.offset if latest is not None else 0
        if hwm - since < self.settings.snapshot_every or hwm > log.end_offset() or hwm <= log.start:
            return
        snapshot_id = log.create_snapshot(hwm)
        self._check_snapshot(node, snapshot_id)
        older = sorted(s for s in log.snapshots if s != snapshot_id)
        if older:
            # Keep about one snapshot interval of log: a follower further behind needs FetchSnapshot.
            log.delete_before(older[-1])
        self._record(f"snapshot {node.node_id} {snapshot_id}")

    def _check_snapshot(self, node: SimNode, snapshot_id: OffsetAndEpoch) -> None:
        value = snapshot_counter(node.log.snapshots[snapshot_id])
        expected = self._committed_counter_before(snapshot_id.offset)
        if expected is not None and value != expected:
            raise SimulationViolation(
                self._explain(
                    f"node {node.node_id}: snapshot {snapshot_id} holds counter {value}, committed is {expected}"
                )
            )

    def _committed_counter_before(self, offset: int) -> int | None:
        for o in range(offset - 1, -1, -1):
            entry = self.committed.get(o)
            if entry is None:
                return None
            if entry[1] is not None:
                return entry[1]
        return 0

    # -------------------------------------------------------------- invariants

    def _on_truncate(self, log: SimLog, offset: int) -> None:
        end = min(log.end_offset(), self.committed_end)
        for o in range(max(offset, log.start), end):
            if self.committed.get(o) == log.entry(o):
                raise SimulationViolation(
                    f"node {log.node_id}: truncation to {offset} drops committed offset {o} {self.committed[o]}"
                )
        for node in self.nodes.values():
            if node.log is log:
                node.checked_to = min(node.checked_to, offset)

    def _note_commits(self, node: SimNode) -> None:
        client = node.client
        assert client is not None
        hwm = client.high_watermark
        log = node.log
        if hwm <= node.checked_to:
            return
        for o in range(max(node.checked_to, log.start), min(hwm, log.end_offset())):
            entry = log.entry(o)
            known = self.committed.get(o)
            if known is None:
                self._check_counter(node, o, entry)
                self.committed[o] = entry
            elif known != entry:
                raise SimulationViolation(
                    self._explain(
                        f"node {node.node_id}: committed offset {o} is {entry} here but {known} before"
                    )
                )
        node.checked_to = hwm
        self.committed_end = max(self.committed_end, hwm)

    def _check_counter(self, node: SimNode, offset: int, entry: tuple[int, int | None]) -> None:
        if entry[1] is None:
            return
        previous = self._committed_counter_before(offset)
        if previous is None and offset == node.log.start:
            previous = node.log.counter_before(offset)
        if previous is not None and entry[1] != previous + 1:
            raise SimulationViolation(
                self._explain(
                    f"node {node.node_id}: committed counter {entry[1]} at offset {offset} follows {previous}"
                )
            )

    def _claim(self, epoch: int, leader_id: int, who: str) -> None:
        known = self.leaders.setdefault(epoch, leader_id)
        if known != leader_id:
            raise SimulationViolation(
                self._explain(f"two leaders in epoch {epoch}: {known} and {leader_id} ({who})")
            )

    def check_invariants(self) -> None:
        """Kafka's RaftEventSimulationTest invariants, plus the committed-data ones, after every event."""
        settings = self.settings
        for node in self.nodes.values():
            persisted = node.store.persisted
            if persisted is not None:
                if persisted.leader_id != NO_ID:
                    self._claim(persisted.epoch, persisted.leader_id, f"persisted by {node.node_id}")
                if settings.check_epochs and node.node_id not in self.lost_disk:
                    before = self.persisted_epochs.get(node.node_id, -1)
                    if persisted.epoch < before:
                        raise SimulationViolation(
                            self._explain(f"node {node.node_id}: persisted epoch went back")
                        )
                    self.persisted_epochs[node.node_id] = persisted.epoch
            if node.log.start > 0 and node.log.earliest_snapshot_id() is None:
                raise SimulationViolation(
                    self._explain(f"node {node.node_id}: log starts past 0 without snapshot")
                )
            client = node.client
            if client is None:
                continue
            if client.leader_id != NO_ID:
                self._claim(client.epoch, client.leader_id, f"known by {node.node_id}")
            if client.role is Role.LEADER:
                self.max_elected_epoch = max(self.max_elected_epoch, client.epoch)
            if settings.check_epochs and persisted is not None and persisted.epoch != client.epoch:
                raise SimulationViolation(
                    self._explain(
                        f"node {node.node_id}: epoch {client.epoch} but persisted {persisted.epoch}"
                    )
                )
            if client.high_watermark < node.last_hwm:
                raise SimulationViolation(
                    self._explain(f"node {node.node_id}: high watermark fell from {node.last_hwm}")
                )
            node.last_hwm = client.high_watermark
            self._note_commits(node)
        leader = self.leader()
        if leader is not None:
            self._check_leader(leader)
        if settings.check_majority and self.committed_end > 0:
            holding = sum(
                1
                for n in self.nodes.values()
                if n.is_voter and n.log.flushed_end_offset() >= self.committed_end
            )
            if holding < len(self.voters) // 2 + 1:
                raise SimulationViolation(
                    self._explain(f"only {holding} voters hold the committed end {self.committed_end}")
                )

    def _check_leader(self, leader: SimNode) -> None:
        client = leader.client
        assert client is not None and client.leading is not None
        hwm = client.leading.high_watermark
        if hwm is not None:
            if hwm < self.max_leader_hwm:
                raise SimulationViolation(
                    self._explain(f"leader {leader.node_id}'s high watermark {hwm} < {self.max_leader_hwm}")
                )
            self.max_leader_hwm = hwm
        log = leader.log
        if log.end_offset() < self.committed_end:
            raise SimulationViolation(
                self._explain(f"leader {leader.node_id} lacks committed offsets up to {self.committed_end}")
            )
        # Every node's log up to its HWM matches `committed`; so the leader holding `committed` makes each a prefix.
        for o in range(max(leader.checked_to, log.start), self.committed_end):
            known = self.committed.get(o)
            if known is not None and known != log.entry(o):
                raise SimulationViolation(
                    self._explain(
                        f"leader {leader.node_id} holds {log.entry(o)} at committed offset {o} ({known})"
                    )
                )

    # -------------------------------------------------------------- summaries

    def digest(self) -> str:
        """A fingerprint of every event so far: the same seed gives the same digest."""
        return self.trace.hexdigest()

    def snapshot_installs(self) -> int:
        return sum(n.log.installed_snapshots for n in self.nodes.values())


def _is_empty(response: m.FetchResponse) -> bool:
    return (
        response.error_code == m.NONE
        and response.partition_error == m.NONE
        and not response.records
        and response.diverging_epoch is None
        and response.snapshot_id is None
    )
