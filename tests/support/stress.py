"""A seeded concurrency stress kit: many brokers' and clients' requests in flight at once, Kafka's invariants
checked after every step.

Kafka's counterpart is the controller's own guarantee, not a test of it: QuorumController runs one event at a
time (ControllerWriteEvent computes a change's records from its in-memory state and replays them in the same
event), so whatever the brokers and clients send concurrently, every committed change was computed from the
state the one before it left. This kit drives one in-process bridge controller (`stressed_cluster`) with
simulated ZooKeeper-mode brokers: after the migration the kit takes over their heartbeats, and each step
sends, over the controller's listener and one connection per request (a connection is answered in order),
at once with `asyncio.gather`:

- a heartbeat from every broker that is up (caught up, or asking to shut down), or its registration anew
  after a controlled shutdown (a new incarnation);
- a few of: a heartbeat asking to be fenced; silence (the broker stops heartbeating for some steps, and the
  session-expiry timer fences it meanwhile, concurrently with whatever else runs); a controlled shutdown
  (heartbeats with WantShutDown until told to shut down); AlterPartition from a partition's leader shrinking
  or expanding its ISR; CreateTopics (sometimes two of one name at once); DeleteTopics;
  AlterPartitionReassignments (a new target or a cancellation); ElectLeaders (preferred or unclean).

The seed fixes every choice (`random.Random(seed)` over sorted state); the requests' epochs and ISRs follow
the state the log held at the start of the step, and session expiry follows the clock, so a replay sends the
same plan, not necessarily byte for byte the same requests. `Invariants` says what is checked.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from kio.schema.broker_heartbeat.v1 import request as heartbeat_v1
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i64

from bridge.api import DriverState
from bridge.controller import BridgeController
from bridge.handlers.alter_partition import unclean_election_enabled
from bridge.kafka.client import KafkaConnection
from bridge.zk.planner import describe, plan_reconciliation
from migrate.kraft import records as rec
from migrate.kraft.image import NO_LEADER, MetadataImage, PartitionRegistration, Provenance
from migrate.kraft.reader import iter_log_dir, load_image
from migrate.kraft.replay import MetadataReplayer
from migrate.zk.cluster import from_tree
from migrate.zk.live import read_tree
from tests.support.bridge import controller_config, start_controller, zookeeper_partition_mismatches
from tests.support.requests import (
    PREFERRED,
    UNCLEAN,
    alter_partition,
    alter_reassignments,
    create_topic,
    delete_topics,
    elect_leaders,
)
from tests.support.zk_broker import SimulatedZkBroker

SEED_ENV = "ZK2KRAFT_STRESS_SEED"
STEPS_ENV = "ZK2KRAFT_STRESS_STEPS"
SESSION_TIMEOUT_MS = 600
"""Short, so that a broker silent for a few dozen steps is fenced by the session-expiry timer mid-run."""
REQUEST_TIMEOUT_S = 15.0
SETTLE_TIMEOUT_S = 15.0
"""How long the log, the image and ZooKeeper may take to agree once a step's requests are answered."""
SHUTDOWN_STEPS, SHUTDOWN_S = 30, 10.0
"""A controlled shutdown must be granted within this many steps and seconds (both) while it is asked for."""
TOPIC_POOL = tuple(f"stress-{i}" for i in range(5))
FINAL_TOPIC = "stress-final"
ACTIONS = {
    "alter_partition": 4,
    "create_topics": 2,
    "delete_topics": 1,
    "reassign": 2,
    "elect_leaders": 2,
    "broker_trouble": 2,
}
"""The kinds of request a step adds to the brokers' heartbeats, and how often each is drawn."""
TERMINAL = ("no answer", "log", "zookeeper")
"""Violations after which a run stops: the controller no longer answers, or its log or ZooKeeper diverged
for good (what follows would only repeat them)."""


def seed_from_env(default: int) -> int:
    """ZK2KRAFT_STRESS_SEED when set (to replay a failing seed), else `default`."""
    value = os.environ.get(SEED_ENV)
    return default if not value else int(value)


def steps_from_env(default: int) -> int:
    """ZK2KRAFT_STRESS_STEPS when set, else `default`."""
    value = os.environ.get(STEPS_ENV)
    return default if not value else int(value)


# ---------------------------------------------------------------------------------------------- the cluster


@contextlib.contextmanager
def stressed_cluster(
    zk_connect: str, metadata_dir: Path, broker_ids: list[int]
) -> Iterator[tuple[BridgeController, dict[int, SimulatedZkBroker]]]:
    """A bridge as Kafka's controller (no rehearsal, short broker sessions) over the cluster ZooKeeper holds,
    and a simulated ZooKeeper-mode broker for each of `broker_ids`, once the bridge dual-writes and every
    broker is unfenced."""
    controller = start_controller(
        controller_config(
            zk_connect, metadata_dir, rehearsal=False, broker_session_timeout_ms=SESSION_TIMEOUT_MS
        )
    )
    brokers: dict[int, SimulatedZkBroker] = {}
    try:
        cluster_id = controller.cluster_id
        assert cluster_id is not None
        for broker_id in broker_ids:
            brokers[broker_id] = SimulatedZkBroker(
                broker_id, ("127.0.0.1", controller.listen_port), cluster_id, zk_connect=zk_connect
            ).start()
        assert controller.wait_for_state(DriverState.DUAL_WRITE), controller.error
        deadline = time.monotonic() + 30
        while not all_unfenced(controller, broker_ids):
            assert time.monotonic() < deadline, "the brokers were not all unfenced within 30 s"
            time.sleep(0.05)
        yield controller, brokers
    finally:
        for broker in brokers.values():
            broker.kill()
        controller.stop()


def all_unfenced(controller: BridgeController, broker_ids: list[int]) -> bool:
    assert controller.log is not None
    with controller.log.lock:
        registered = controller.log.image.cluster.brokers
        return all(b in registered and not registered[b].fenced for b in broker_ids)


# ---------------------------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken invariant: the step after which it was seen, the invariant's name and what was wrong."""

    step: int
    invariant: str
    detail: str

    def __str__(self) -> str:
        return f"step {self.step}: {self.invariant}: {self.detail}"


@dataclass(slots=True)
class StressReport:
    """What a run sent, what came back, and every violation (empty: all invariants held)."""

    seed: int
    steps: int = 0
    requests: int = 0
    answers: Counter[str] = field(default_factory=Counter)
    """"<api> <error>" -> how many answers carried it (every error code in the response counts)."""
    batches_checked: int = 0
    checks: int = 0
    seconds: float = 0.0
    violations: list[Violation] = field(default_factory=list)

    def summary(self) -> str:
        """The seed (to replay), each broken invariant's count and first occurrence, then the first violations."""
        head = (
            f"seed {self.seed} ({SEED_ENV}={self.seed} {STEPS_ENV}={self.steps} replays it): "
            f"{len(self.violations)} violation(s) in {self.steps} steps, {self.requests} requests"
        )
        first: dict[str, Violation] = {}
        counts: Counter[str] = Counter()
        for v in self.violations:
            first.setdefault(v.invariant, v)
            counts[v.invariant] += 1
        lines = [head, *(f"  {name} x{counts[name]}, first at {_short(str(v))}" for name, v in first.items())]
        lines += ["first violations:", *(f"  {_short(str(v))}" for v in self.violations[:15])]
        return "\n".join(lines)

    def broken(self) -> list[str]:
        """The invariants that broke, in the order they first did."""
        return list(dict.fromkeys(v.invariant for v in self.violations))


def _short(text: str, limit: int = 400) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------------------------------------- invariants


@dataclass(slots=True)
class StepSent:
    """What the kit sent in one step that may legitimately add a broker to an ISR."""

    proposed_isrs: dict[tuple[uuid.UUID, int], list[list[int]]] = field(default_factory=dict)
    """AlterPartition's proposed ISRs by (topic id, partition)."""
    unclean_elections: set[tuple[str, int]] = field(default_factory=set)
    unclean_everywhere: bool = False
    """An UNCLEAN ElectLeaders of every partition (null topics) was sent."""


class Invariants:
    """Kafka 3.9's invariants, checked on the log as written, batch by batch, and against the controller's
    image and ZooKeeper once a step's requests are answered.

    After every batch of the log (each batch is one change; the kit's cluster is far below the size where
    Kafka splits a change into several batches):

    - *leaders*: no partition is led by a fenced broker or one in controlled shutdown, and a leader is in its
      ISR and its replicas (PartitionChangeBuilder only elects acceptable ISR members, or any live replica
      in an unclean election, which sets the ISR to it alone);
    - *leaderless*: every partition with a live ISR member (registered, unfenced, not shutting down) has a
      leader (fencing, controlled shutdown, AlterPartition and reassignment elect whenever the leader
      leaves; unfencing elects, in the same batch, every leaderless partition the broker can lead);
    - *isr*: the ISR is never empty and is a subset of the replicas (fencing and controlled shutdown remove
      a broker from every ISR except where it is the last member: Kafka keeps that one);
    - *isr growth*: a PartitionChangeRecord adds broker b to an ISR (relative to the ISR just before it in
      the log) only if, in the step during which it was appended, the kit sent an AlterPartition of that
      partition (from its leader) whose proposed ISR holds b, or it is an unclean election (new ISR =
      [new leader]) of a partition the kit named in an UNCLEAN ElectLeaders that step, or of a topic with
      unclean.leader.election.enable. Fencing, controlled shutdown and unfencing never add; cancelling a
      reassignment adds only through an unclean election, which is refused while unclean election is off
      (PartitionReassignmentRevert); a new partition is not a growth.

    Once a step's requests are answered (and the log is durable, ZooKeeper written):

    - *answers*: every request was answered, none with UNKNOWN_SERVER_ERROR anywhere in its response;
    - *log*: the log replays (a record that does not apply means the log takes no more appends), and the
      image replayed from the files equals the controller's in-memory image;
    - *zookeeper*: every partition state znode holds the image's leader, ISR and leader epoch
      (`zookeeper_partition_mismatches`), and a reconciliation of ZooKeeper against the image would write
      nothing (`plan_reconciliation`: topics, assignments, configs, quotas, ...);
    - *shutdown*: a broker asking for a controlled shutdown is told to shut down within SHUTDOWN_STEPS steps
      and SHUTDOWN_S seconds (it then holds no leadership and the other brokers caught up with its moves).

    At the end: *appends*: a last CreateTopics succeeds and its topic is in the image.
    """

    def __init__(self, controller: BridgeController, zk_client: KazooClient, report: StressReport) -> None:
        assert controller.log is not None
        self.controller = controller
        self.metadata_dir = controller.config.metadata_dir
        self.node_id = controller.config.node_id
        self.zk_client = zk_client
        self.report = report
        self._wait_durable()
        image, _ = load_image(self.metadata_dir)
        self.replayer = MetadataReplayer(image, source=str(self.metadata_dir))
        self.next_offset = image.provenance.last_contained_offset + 1
        self.broken_log = False
        self._standing: set[tuple[str, str, int, tuple[int, ...]]] = set()

    @property
    def image(self) -> MetadataImage:
        """The image replayed from the log's files so far."""
        return self.replayer.image

    def violation(self, step: int, invariant: str, detail: str) -> None:
        self.report.violations.append(Violation(step, invariant, detail))

    # ------------------------------------------------------------------ the log, batch by batch

    def _wait_durable(self) -> None:
        metadata_log = self.controller.log
        assert metadata_log is not None
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while metadata_log.durable_offset < metadata_log.end_offset - 1 and time.monotonic() < deadline:
            time.sleep(0.005)

    def read_log(self, step: int, sent: StepSent) -> None:
        """Replay the batches appended since the last call, checking each."""
        if self.broken_log:
            return
        self._wait_durable()
        metadata_log = self.controller.log
        assert metadata_log is not None
        stop = metadata_log.durable_offset + 1
        if stop <= self.next_offset:
            return
        batch: list[Any] = []
        for entry in iter_log_dir(self.metadata_dir, start_offset=self.next_offset, stop_offset=stop):
            if batch and entry.batch_position != batch[0].batch_position:
                self._replay_batch(step, sent, batch)
                batch = []
            batch.append(entry)
        if batch:
            self._replay_batch(step, sent, batch)

    def _replay_batch(self, step: int, sent: StepSent, batch: list[Any]) -> None:
        if self.broken_log:
            return
        for entry in batch:
            self.next_offset = entry.offset + 1
            if entry.is_control:
                self.replayer.advance(entry.offset, epoch=entry.leader_epoch, timestamp_ms=entry.timestamp_ms)
                continue
            record = entry.record
            before: list[int] | None = None
            if isinstance(record, rec.PartitionChangeRecord):
                topic = self.image.topics_by_id.get(record.topic_id)
                partition = None if topic is None else topic.partitions.get(record.partition_id)
                before = None if partition is None else list(partition.isr)
            try:
                self.replayer.replay(
                    record, entry.version, entry.offset, epoch=entry.leader_epoch,
                    timestamp_ms=entry.timestamp_ms, position=entry.batch_position,
                )  # fmt: skip
            except Exception as exc:
                self.broken_log = True
                self.violation(step, "log", f"offset {entry.offset} does not replay: {exc}")
                return
            if before is not None:
                self._check_growth(step, sent, record, before)
        self.report.batches_checked += 1
        self._check_state(step, f"batch at offset {batch[0].offset}")

    def _check_growth(self, step: int, sent: StepSent, record: Any, before: list[int]) -> None:
        topic = self.image.topics_by_id[record.topic_id]
        partition = topic.partitions[record.partition_id]
        added = [b for b in partition.isr if b not in before]
        if not added:
            return
        key = (record.topic_id, record.partition_id)
        if any(set(added) <= set(isr) for isr in sent.proposed_isrs.get(key, [])):
            return
        unclean = (
            sent.unclean_everywhere
            or (topic.name, record.partition_id) in sent.unclean_elections
            or unclean_election_enabled(self.image, self.node_id, topic.name)
        )
        if unclean and partition.isr == [partition.leader]:
            return
        proposed = sent.proposed_isrs.get(key, [])
        self.violation(
            step, "isr growth",
            f"{topic.name}-{record.partition_id}: ISR {before} -> {partition.isr} adds {added}, which no "
            f"AlterPartition of this step proposed (proposed: {proposed}), at leader {partition.leader} epoch "
            f"{partition.leader_epoch}",
        )  # fmt: skip

    def _check_state(self, step: int, where: str) -> None:
        """leaders, leaderless and isr over every partition; a violation that stands is reported once."""
        image = self.image
        brokers = image.cluster.brokers

        def live(b: int) -> bool:
            registration = brokers.get(b)
            return registration is not None and not registration.fenced and not registration.in_controlled_shutdown

        standing: dict[tuple[str, str, int, tuple[int, ...]], str] = {}
        for topic in image.topics_by_id.values():
            for partition_id, partition in topic.partitions.items():
                name = f"{topic.name}-{partition_id}"
                for invariant, problem in self._partition_problems(partition, live):
                    state = f"leader {partition.leader}, ISR {partition.isr}, replicas {partition.replicas}"
                    key = (invariant, name, partition.leader, tuple(partition.isr))
                    standing[key] = f"{name} after the {where}: {problem} ({state})"
        for key, detail in standing.items():
            if key not in self._standing:
                self.violation(step, key[0], detail)
        self._standing = set(standing)

    def _partition_problems(
        self, partition: PartitionRegistration, live: Callable[[int], bool]
    ) -> list[tuple[str, str]]:
        brokers = self.image.cluster.brokers
        problems = []
        leader = partition.leader
        if leader != NO_LEADER:
            registration = brokers.get(leader)
            if registration is None or registration.fenced:
                problems.append(("leaders", f"fenced broker {leader} leads"))
            elif registration.in_controlled_shutdown:
                problems.append(("leaders", f"broker {leader} in controlled shutdown leads"))
            if leader not in partition.isr or leader not in partition.replicas:
                problems.append(("leaders", "the leader is outside its ISR or replicas"))
        elif any(live(b) for b in partition.isr):
            problems.append(("leaderless", "no leader although an ISR member is live"))
        if not partition.isr:
            problems.append(("isr", "empty ISR"))
        elif not set(partition.isr) <= set(partition.replicas):
            problems.append(("isr", "ISR outside the replicas"))
        return problems

    # ------------------------------------------------------------------ once a step is answered

    def settle(self, step: int, sent: StepSent) -> None:
        """Read the log to its end, then check that it, the controller's image and ZooKeeper agree."""
        self.report.checks += 1
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        problems: list[tuple[str, str]] = []
        while True:
            self.read_log(step, sent)
            if self.broken_log:
                return
            problems, final = self._disagreements()
            if not problems or final or time.monotonic() > deadline:
                break
            time.sleep(0.02)  # a timer's change (a session expiry) is still on its way to ZooKeeper
        for invariant, detail in problems:
            self.violation(step, invariant, detail)

    def _disagreements(self) -> tuple[list[tuple[str, str]], bool]:
        """What disagrees, and whether that is final (the same offset, different images)."""
        metadata_log = self.controller.log
        assert metadata_log is not None
        with metadata_log.lock:
            if metadata_log.end_offset != self.next_offset:
                return [("log", f"the log ends at {metadata_log.end_offset}, its files at {self.next_offset}")], False
            differences = image_differences(metadata_log.image, self.image)
            if differences:
                detail = "; ".join(differences[:5])
                return [("log", f"the controller's image is not what its log's files replay to: {detail}")], True
        pipeline = self.controller.pipeline
        if not pipeline.wait_idle(SETTLE_TIMEOUT_S):
            return [("zookeeper", "dual writes still in flight")], False
        if metadata_log.end_offset != self.next_offset:
            return [("log", "the log moved on while ZooKeeper was written")], False
        problems = [("zookeeper", m) for m in zookeeper_partition_mismatches(self.zk_client, self.image)]
        if not problems:
            model = from_tree(read_tree(self.zk_client, acls=False), strict=False)
            ops = [op for op in plan_reconciliation(self.image, model) if not op.unchanged]
            problems = [("zookeeper", f"a reconciliation would write {line}") for line in describe(ops)]
        return problems, False


def image_differences(held: MetadataImage, replayed: MetadataImage) -> list[str]:
    """How the controller's image differs from the one its log replays to (partitions and brokers named)."""
    if _without_provenance(held) == _without_provenance(replayed):
        return []
    found = []
    for topic_id in sorted(set(held.topics_by_id) | set(replayed.topics_by_id), key=str):
        a, b = held.topics_by_id.get(topic_id), replayed.topics_by_id.get(topic_id)
        if a is None or b is None:
            name = (a or b).name if (a or b) is not None else str(topic_id)  # type: ignore[union-attr]
            found.append(f"topic {name} only in the {'controller' if b is None else 'files'}")
            continue
        for p in sorted(set(a.partitions) | set(b.partitions)):
            if a.partitions.get(p) != b.partitions.get(p):
                found.append(f"{a.name}-{p}: controller {a.partitions.get(p)}, files {b.partitions.get(p)}")
    for broker_id in sorted(set(held.cluster.brokers) | set(replayed.cluster.brokers)):
        if held.cluster.brokers.get(broker_id) != replayed.cluster.brokers.get(broker_id):
            found.append(f"broker {broker_id} registration differs")
    return found or ["outside topics and brokers"]


def _without_provenance(image: MetadataImage) -> MetadataImage:
    return dataclasses.replace(image, provenance=Provenance())


# ---------------------------------------------------------------------------------------------- brokers


@dataclass(slots=True)
class KitBroker:
    """A simulated broker whose heartbeats the kit sends; `mode` is what it does next step."""

    sim: SimulatedZkBroker
    connection: KafkaConnection
    epoch: int
    mode: str = "up"
    """up | fence (heartbeats asking to be fenced) | silent | shutting_down | restarting"""
    steps_left: int = 0
    shutdown_asked: tuple[int, float] | None = None
    """(step, monotonic time) of its first heartbeat asking for a controlled shutdown."""

    @property
    def broker_id(self) -> int:
        return self.sim.broker_id

    def heartbeat(self, *, want_fence: bool = False, want_shut_down: bool = False) -> Any:
        return heartbeat_v1.BrokerHeartbeatRequest(
            broker_id=i32(self.sim.broker_id),
            broker_epoch=i64(self.epoch),
            current_metadata_offset=i64(self.sim.applied_offset()),
            want_fence=want_fence,
            want_shut_down=want_shut_down,
        )


# ---------------------------------------------------------------------------------------------- the kit


Work = Callable[[], Coroutine[Any, Any, Any]]


class StressKit:
    """Drives `controller` and `brokers` for `steps` steps from `seed` (see the module docstring)."""

    def __init__(
        self,
        controller: BridgeController,
        brokers: dict[int, SimulatedZkBroker],
        zk_client: KazooClient,
        seed: int,
        *,
        actions: dict[str, int] | None = None,
        on_step: Callable[[StressReport], None] | None = None,
    ) -> None:
        """`actions`: the kinds of request drawn and their weights (default ACTIONS); `on_step` is called with
        the report after each step's checks."""
        self.actions = dict(ACTIONS if actions is None else actions)
        self.on_step = on_step
        self.controller = controller
        self.sims = brokers
        self.zk_client = zk_client
        self.rng = random.Random(seed)
        self.report = StressReport(seed)
        self.address = ("127.0.0.1", controller.listen_port)
        self.brokers: dict[int, KitBroker] = {}
        self._admin: list[KafkaConnection] = []

    def run(self, steps: int) -> StressReport:
        """Run the steps on a private event loop; returns the report (its `violations` say what broke)."""
        started = time.monotonic()
        try:
            asyncio.run(self._run(steps))
        finally:
            self.report.seconds = time.monotonic() - started
        return self.report

    async def _run(self, steps: int) -> None:
        for sim in self.sims.values():
            sim.silent = True  # the kit heartbeats for it from now on
        for broker_id in sorted(self.sims):
            sim = self.sims[broker_id]
            connection = await KafkaConnection.open(*self.address, client_id=f"stress-broker-{broker_id}")
            self.brokers[broker_id] = KitBroker(sim, connection, sim.view.broker_epoch)
        invariants = Invariants(self.controller, self.zk_client, self.report)
        try:
            for step in range(1, steps + 1):
                sent = StepSent()
                works = self._broker_work(step) + self._admin_work(invariants.image, sent)
                await self._send_all(works)
                self.report.steps = step
                invariants.settle(step, sent)
                self._check_shutdowns(step)
                if self.on_step is not None:
                    self.on_step(self.report)
                if invariants.broken_log or any(v.invariant in TERMINAL for v in self.report.violations):
                    break
            await self._finish(invariants, steps + 1)
        finally:
            for connection in [*self._admin, *(b.connection for b in self.brokers.values())]:
                await connection.close()

    async def _send_all(self, works: list[Work]) -> None:
        results = await asyncio.gather(*(work() for work in works), return_exceptions=True)
        self.report.requests += len(works)
        for result in results:
            if isinstance(result, BaseException):
                self.report.violations.append(
                    Violation(self.report.steps + 1, "no answer", f"{type(result).__name__}: {result}")
                )

    async def _send(self, connection: KafkaConnection, request: Any) -> Any:
        response = await connection.send(request, timeout=REQUEST_TIMEOUT_S)
        api = type(request).__name__.removesuffix("Request")
        for code in error_codes(response):
            self.report.answers[f"{api} {code.name}"] += 1
            if code is ErrorCode.unknown_server_error:
                self.report.violations.append(
                    Violation(self.report.steps + 1, "answers", f"{api} answered UNKNOWN_SERVER_ERROR: {response}")
                )
        return response

    async def _admin_connection(self, index: int) -> KafkaConnection:
        while len(self._admin) <= index:
            self._admin.append(await KafkaConnection.open(*self.address, client_id=f"stress-admin-{len(self._admin)}"))
        return self._admin[index]

    def _admin_request(self, index: int, request: Any, then: Callable[[Any], None] | None = None) -> Work:
        async def work() -> None:
            response = await self._send(await self._admin_connection(index), request)
            if then is not None:
                then(response)

        return work

    # ------------------------------------------------------------------ brokers

    def _broker_work(self, step: int) -> list[Work]:
        works: list[Work] = []
        for broker_id in sorted(self.brokers):
            broker = self.brokers[broker_id]
            if broker.steps_left > 0:
                broker.steps_left -= 1
                if broker.steps_left == 0 and broker.mode in ("silent", "fence"):
                    broker.mode = "up"
            if broker.mode == "silent":
                continue
            if broker.mode == "restarting":
                works.append(self._register(broker))
                continue
            request = broker.heartbeat(
                want_fence=broker.mode == "fence", want_shut_down=broker.mode == "shutting_down"
            )
            if broker.mode == "shutting_down" and broker.shutdown_asked is None:
                broker.shutdown_asked = (step, time.monotonic())
            works.append(self._heartbeat(broker, request))
        return works

    def _heartbeat(self, broker: KitBroker, request: Any) -> Work:
        async def work() -> None:
            response = await self._send(broker.connection, request)
            if response.error_code == ErrorCode.stale_broker_epoch:
                broker.mode = "restarting"  # the controller forgot this incarnation: register anew
            elif response.error_code == ErrorCode.none and response.should_shut_down:
                broker.mode, broker.shutdown_asked = "restarting", None  # the process exits and starts again

        return work

    def _register(self, broker: KitBroker) -> Work:
        sim = broker.sim
        incarnation = uuid.UUID(int=self.rng.getrandbits(128))
        request = dataclasses.replace(sim.registration_request(), incarnation_id=incarnation)

        async def work() -> None:
            response = await self._send(broker.connection, request)
            if response.error_code == ErrorCode.none:
                broker.epoch = int(response.broker_epoch)
                broker.mode = "up"
                sim.incarnation = incarnation
                sim.view.broker_epoch = broker.epoch  # its listener checks the controller's requests by it

        return work

    def _check_shutdowns(self, step: int) -> None:
        for broker in self.brokers.values():
            if broker.mode != "shutting_down" or broker.shutdown_asked is None:
                continue
            asked_step, asked_at = broker.shutdown_asked
            if step - asked_step > SHUTDOWN_STEPS and time.monotonic() - asked_at > SHUTDOWN_S:
                self.report.violations.append(
                    Violation(
                        step, "shutdown",
                        f"broker {broker.broker_id} asked for a controlled shutdown at step {asked_step} and was "
                        f"never told to shut down",
                    )
                )  # fmt: skip
                broker.shutdown_asked = (step, time.monotonic())  # reported once per window

    # ------------------------------------------------------------------ admin requests

    def _admin_work(self, image: MetadataImage, sent: StepSent) -> list[Work]:
        rng = self.rng
        kinds = sorted(k for k, w in self.actions.items() if w > 0)
        weights = [self.actions[k] for k in kinds]
        works: list[Work] = []
        for _ in range(rng.randint(1, 5) if kinds else 0):
            kind = rng.choices(kinds, weights)[0]
            works += getattr(self, f"_{kind}")(image, sent, len(works))
        return works

    def _partitions(self, image: MetadataImage) -> list[tuple[str, int, PartitionRegistration]]:
        return [
            (name, p, image.topics_by_name[name].partitions[p])
            for name in sorted(image.topics_by_name)
            for p in sorted(image.topics_by_name[name].partitions)
        ]

    def _alter_partition(self, image: MetadataImage, sent: StepSent, lane: int) -> list[Work]:
        rng = self.rng
        up = {b for b, broker in self.brokers.items() if broker.mode in ("up", "shutting_down")}
        led = [(n, p, part) for n, p, part in self._partitions(image) if part.leader in up]
        if not led:
            return []
        name, partition_id, partition = rng.choice(led)
        isr = list(partition.isr)
        outside = [b for b in partition.replicas if b not in isr]
        if outside and (len(isr) == 1 or rng.random() < 0.5):
            isr.append(rng.choice(outside))  # expand: a follower caught up
        elif len(isr) > 1:
            isr.remove(rng.choice([b for b in isr if b != partition.leader]))  # shrink: a follower lags
        else:
            return []
        topic = image.topics_by_name[name]
        epochs = {b: (r.epoch if (r := image.cluster.brokers.get(b)) is not None else -1) for b in isr}
        leader = self.brokers[partition.leader]
        request = alter_partition(
            3, partition.leader, leader.epoch, partition_id, partition.leader_epoch, partition.partition_epoch,
            isr, topic=name, topic_id=topic.topic_id, isr_epochs=epochs,
        )  # fmt: skip
        sent.proposed_isrs.setdefault((topic.topic_id, partition_id), []).append(isr)
        return [self._admin_request(lane, request)]

    def _create_topics(self, image: MetadataImage, sent: StepSent, lane: int) -> list[Work]:
        rng = self.rng
        name = rng.choice(TOPIC_POOL)
        request = create_topic(name, partitions=rng.randint(1, 3), replication_factor=rng.randint(1, 3))
        works = [self._admin_request(lane, request)]
        if rng.random() < 0.4:  # several application instances creating one topic at once
            works.append(self._admin_request(lane + 1, request))
        return works

    def _delete_topics(self, image: MetadataImage, sent: StepSent, lane: int) -> list[Work]:
        existing = [n for n in TOPIC_POOL if n in image.topics_by_name]
        if not existing:
            return []
        return [self._admin_request(lane, delete_topics(self.rng.choice(existing)))]

    def _reassign(self, image: MetadataImage, sent: StepSent, lane: int) -> list[Work]:
        rng = self.rng
        partitions = self._partitions(image)
        if not partitions:
            return []
        name, partition_id, partition = rng.choice(partitions)
        target: list[int] | None
        if (partition.adding_replicas or partition.removing_replicas) and rng.random() < 0.5:
            target = None  # cancel
        else:
            ids = sorted(self.brokers)
            target = rng.sample(ids, rng.randint(1, len(ids)))
        return [self._admin_request(lane, alter_reassignments((name, partition_id, target)))]

    def _elect_leaders(self, image: MetadataImage, sent: StepSent, lane: int) -> list[Work]:
        rng = self.rng
        election = rng.choice((PREFERRED, UNCLEAN))
        partitions = self._partitions(image)
        named: dict[str, list[int]] | None = None
        if partitions and rng.random() < 0.9:
            named = {}
            for name, partition_id, _ in rng.sample(partitions, min(len(partitions), rng.randint(1, 3))):
                named.setdefault(name, []).append(partition_id)
        if election == UNCLEAN:
            if named is None:
                sent.unclean_everywhere = True
            else:
                sent.unclean_elections |= {(n, p) for n, ps in named.items() for p in ps}
        return [self._admin_request(lane, elect_leaders(election, named))]

    def _broker_trouble(self, image: MetadataImage, sent: StepSent, lane: int) -> list[Work]:
        """One up broker is fenced at its request, goes silent, or starts a controlled shutdown (at least one
        broker stays up)."""
        rng = self.rng
        up = [b for b in sorted(self.brokers) if self.brokers[b].mode == "up"]
        if len(up) < 2:
            return []
        broker = self.brokers[rng.choice(up)]
        trouble = rng.choice(("fence", "silent", "shutting_down"))
        broker.mode = trouble
        broker.steps_left = rng.randint(3, 10) if trouble == "fence" else rng.randint(10, 40)
        if trouble == "shutting_down":
            broker.steps_left = 0
        return []

    # ------------------------------------------------------------------ the end

    async def _finish(self, invariants: Invariants, step: int) -> None:
        """Every broker comes back; a last CreateTopics must succeed (the log still takes appends)."""
        if any(v.invariant == "no answer" for v in self.report.violations):
            return  # the run already ended on it
        for broker in self.brokers.values():
            if broker.mode in ("silent", "fence"):
                broker.mode, broker.steps_left = "up", 0
        answers: list[Any] = []
        works = self._broker_work(step)
        works.append(self._admin_request(0, create_topic(FINAL_TOPIC), answers.append))
        await self._send_all(works)
        diverged = invariants.broken_log or any(v.invariant in TERMINAL for v in self.report.violations)
        if not diverged:
            invariants.settle(step, StepSent())
        metadata_log = self.controller.log
        assert metadata_log is not None
        with metadata_log.lock:
            created = FINAL_TOPIC in metadata_log.image.topics_by_name
        codes = [] if not answers else [ErrorCode(t.error_code).name for t in answers[0].topics]
        if codes != ["none"] or not created:
            self.report.violations.append(
                Violation(step, "appends", f"the last CreateTopics was answered {codes} and its topic is "
                          f"{'in' if created else 'not in'} the log")
            )  # fmt: skip


def error_codes(response: Any) -> list[ErrorCode]:
    """Every `error_code` in a kio response, nested ones included."""
    found: list[ErrorCode] = []

    def walk(value: Any) -> None:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            for f in dataclasses.fields(value):
                inner = getattr(value, f.name)
                if f.name == "error_code":
                    found.append(ErrorCode(inner))
                else:
                    walk(inner)
        elif isinstance(value, tuple):
            for item in value:
                walk(item)

    walk(response)
    return found
