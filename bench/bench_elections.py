"""Benchmark: a broker dies in a large cluster; how long until its partitions' elections are durable in the
log and ZooKeeper holds every new partition state, against a floor measured in the same run.

    python -m bench.bench_elections [--topics 2000 --partitions-per-topic 100] [--multi-ops 1000]

A private embedded ZooKeeper starts from a generated Kafka cluster (`bench.generate_cluster`: 3 brokers,
replication factor 3, so broker 1 leads about a third of the partitions and sits in nearly every ISR). A
BridgeController runs in this process as Kafka's controller (no rehearsal); three minimal brokers register
(BrokerRegistration v4, kio's classes) and heartbeat with the log end as their applied offset; each holds its
`/brokers/ids/<id>` in a ZooKeeper session of its own (the snapshot's sessions expire 18 s after the server
loads it, before the bridge waits for brokers at 200,000 partitions). Once all are unfenced and the bridge
dual-writes, broker 1 stops heartbeating (its ZooKeeper session stays, as for a hung broker process). Measured
from the fence decision (the session-expiry timer's `maybe_fence_one_stale_broker` returning the records):

- until the fence's records (every PartitionChangeRecord, then the BrokerRegistrationChangeRecord) are
  fsynced in the log;
- until the bridge's dual write of them has been answered by ZooKeeper (every new partition state written);
  afterwards every changed partition state znode is read back and compared with the log's image.

The initial load (`start_to_dual_write_s`, from the brokers' ZooKeeper sessions and `BridgeController.start`
to DUAL_WRITE) is given by phase
(`load_phases_s`, from the driver's state transitions): the start-up checks (one strict read of ZooKeeper),
WAIT_FOR_BROKERS (the minimal brokers register and are unfenced: Kafka's wait, not the bridge's copy),
ZK_MIGRATION (ZooKeeper read again after the claim, translated, appended, fsynced), SYNC_KRAFT_TO_ZK, and
the rest; `start_to_dual_write_without_broker_wait_s` leaves that wait out. Its same-run baseline
(`read_baseline_s`) is one plain read of every znode (`read_tree`, as the bridge reads) and its decode
(`from_tree`), before the bridge starts.

FLOOR: the same partition state znodes written directly with kazoo, `--multi-ops` setData ops a multi, up to
16 multis sent and unanswered at a time (pipelined), on the same ZooKeeper, once before the bridge
starts (the old states) and once after the fence (the new states); the target (ZooKeeper fully updated
within 2x its floor) is judged against the faster of the two. Prints a JSON result, then the verdict.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import itertools
import json
import logging
import os
import platform
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError
from kio.schema.errors import ErrorCode

from bench import broker_requests
from bench.generate_cluster import ClusterSpec, generate, write_data_dir
from bridge.api import DriverState
from bridge.config import BridgeConfig
from bridge.controller import BridgeController
from bridge.kafka.client import ConnectionClosedError, KafkaConnection
from migrate.errors import Zk2KraftError
from migrate.plan.status import BrokersStatus
from migrate.zk import paths as zk_paths
from migrate.zk.cluster import from_tree
from migrate.zk.embedded import EmbeddedZooKeeper
from migrate.zk.live import ZkConnectOptions, read_tree

CHROOT = "/kafka"
NODE_ID = 3000
BROKERS = (1, 2, 3)
VICTIM = 1
SESSION_TIMEOUT_MS = 2000
HEARTBEAT_S = 0.25
ZK_HEAP = "-Xmx2g"
MULTIS_IN_FLIGHT = 16
DUAL_WRITE_TIMEOUT_S = 1800
PROGRESS_S = 30
"""The floor keeps this many multis sent and unanswered (pipelined, without starving kazoo's pings)."""


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def state_path(topic: str, partition: int) -> str:
    return f"/brokers/topics/{topic}/partitions/{partition}/state"


# ---------------------------------------------------------------- minimal brokers


class Broker:
    """A ZooKeeper-mode broker in migration mode reduced to BrokerRegistration and heartbeats (kio's classes);
    its `/brokers/ids/<id>` is `register_in_zookeeper`'s.

    Its applied offset is the controller's log end (read in this process): no Raft observer is needed. Every
    exception and error code it meets is kept in `errors` and printed once: the loop survives them.
    """

    def __init__(self, broker_id: int, port: int, cluster_id: str, applied: Callable[[], int]) -> None:
        self.broker_id, self.port, self.cluster_id, self.applied = broker_id, port, cluster_id, applied
        self.epoch = -1
        self.caught_up = False
        self.fenced = True
        self.errors: list[str] = []
        self.not_controller = 0
        self.stopped = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    def start(self) -> Broker:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()
        self._thread.join(10)

    def _error(self, text: str) -> None:
        if text not in self.errors:
            self.errors.append(text)
            print(f"# broker {self.broker_id}: {text}", file=sys.stderr, flush=True)

    async def _run(self) -> None:
        connection: KafkaConnection | None = None
        while not self.stopped.is_set():
            try:
                if connection is None:
                    connection = await KafkaConnection.open(
                        "127.0.0.1", self.port, client_id=f"b{self.broker_id}"
                    )
                if self.epoch < 0:
                    await self._register(connection)
                else:
                    await self._heartbeat(connection)
            except ConnectionClosedError:
                connection = None
            except Exception as e:  # a benchmark broker reports every failure and carries on
                self._error(f"{type(e).__name__}: {e}")
                if connection is not None:
                    await connection.close()
                connection = None
            await asyncio.sleep(HEARTBEAT_S)
        if connection is not None:
            await connection.close()

    async def _register(self, connection: KafkaConnection) -> None:
        request = broker_requests.registration(self.broker_id, self.cluster_id, "localhost", 9092)
        response = await connection.send(request)
        if response.error_code == ErrorCode.none:
            self.epoch = int(response.broker_epoch)
        elif response.error_code == ErrorCode.not_controller:
            self.not_controller += 1  # the bridge is still starting: retried, as Kafka's brokers do
        else:
            self._error(f"BrokerRegistration answered {response.error_code.name}")

    async def _heartbeat(self, connection: KafkaConnection) -> None:
        request = broker_requests.heartbeat(self.broker_id, self.epoch, self.applied(), self.caught_up)
        response = await connection.send(request)
        if response.error_code == ErrorCode.none:
            self.caught_up = self.caught_up or response.is_caught_up
            self.fenced = response.is_fenced
        else:
            self._error(f"BrokerHeartbeat answered {response.error_code.name}")


def register_in_zookeeper(zk_connect: str, broker_id: int, data: bytes) -> KazooClient:
    """`/brokers/ids/<id>` as an ephemeral of a new session (Kafka's KafkaZkClient.registerBroker); returns
    the session's client.

    The generated snapshot's registration, owned by a session nobody holds, is replaced in one multi (a
    real broker would wait for that session to expire).
    """
    client = ZkConnectOptions(connect=zk_connect).kazoo_client()
    client.start(timeout=30)
    path = zk_paths.broker_path(broker_id)
    for _attempt in range(5):
        stat = client.exists(path)
        try:
            if stat is None:
                client.create(path, data, ephemeral=True)
                return client
            transaction = client.transaction()
            transaction.delete(path, version=stat.version)
            transaction.create(path, data, ephemeral=True)
            if not any(isinstance(r, Exception) for r in transaction.commit()):
                return client
        except (NodeExistsError, NoNodeError):
            pass  # the old session expired (or its node appeared) meanwhile: look again
    client.stop()
    client.close()
    raise Zk2KraftError(f"could not register broker {broker_id} at {path} in ZooKeeper {zk_connect}")


# ---------------------------------------------------------------- the floor


def floor_write(zk_connect: str, paths: list[str], multi_ops: int) -> dict[str, Any]:
    """Seconds to rewrite `paths` (their current data) with pipelined multis of `multi_ops` setData ops."""
    client = ZkConnectOptions(connect=zk_connect).kazoo_client()
    client.start(timeout=30)
    try:
        datas = [reply.get() for reply in windowed(client.get_async, paths)]
        start = time.perf_counter()
        multis = 0
        in_flight: list[Any] = []
        for first in range(0, len(paths), multi_ops):
            transaction = client.transaction()
            for path, (data, _stat) in zip(
                paths[first : first + multi_ops], datas[first : first + multi_ops], strict=True
            ):
                transaction.set_data(path, data)
            in_flight.append(transaction.commit_async())
            multis += 1
            if len(in_flight) >= MULTIS_IN_FLIGHT:
                _check_multi(in_flight.pop(0).get())
        for result in in_flight:
            _check_multi(result.get())
        seconds = time.perf_counter() - start
    finally:
        client.stop()
        client.close()
    return {"seconds": round(seconds, 4), "znodes": len(paths), "multis": multis}


def _check_multi(outcome: list[Any]) -> None:
    if any(isinstance(r, Exception) for r in outcome):
        raise Zk2KraftError(f"floor multi failed: {outcome[:3]}")


def windowed(send: Callable[[str], Any], paths: list[str], window: int = 2000) -> list[Any]:
    """`send(path)` for every path with at most `window` unanswered (kazoo's pings wait behind the queue)."""
    replies: list[Any] = []
    for first in range(0, len(paths), window):
        chunk = [send(p) for p in paths[first : first + window]]
        for reply in chunk:
            reply.get()
        replies += chunk
    return replies


# ---------------------------------------------------------------- the initial load's phases


class TransitionTimes(logging.Handler):
    """When the driver entered each state (its `event=state_transition` lines); warnings still go to stderr."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.entered: dict[str, float] = {}

    def emit(self, record: logging.LogRecord) -> None:
        state = getattr(record, "to_state", None)
        if isinstance(state, str):
            self.entered.setdefault(state, time.perf_counter())
        if record.levelno >= logging.WARNING:
            print(f"# {record.getMessage()}", file=sys.stderr, flush=True)


def load_phases(started: float, entered: dict[str, float]) -> dict[str, float]:
    """Seconds from `started` to the first transition, then in each state until the next (in order entered)."""
    marks = sorted(entered.items(), key=lambda item: item[1])
    phases = {"start_up_checks": round(marks[0][1] - started, 2)} if marks else {}
    for (state, at), (_next, until) in itertools.pairwise(marks):
        phases[state] = round(until - at, 2)
    return phases


def read_baseline(zk_connect: str) -> dict[str, float]:
    """One plain read of every znode and its decode: what one copy of ZooKeeper costs, same run."""
    started = time.perf_counter()
    tree = read_tree(ZkConnectOptions(connect=zk_connect), acls=False)
    read = time.perf_counter()
    from_tree(tree)
    return {"read_s": round(read - started, 2), "decode_s": round(time.perf_counter() - read, 2)}


# ---------------------------------------------------------------- the run


def run(
    topics: int, partitions_per_topic: int, *, multi_ops: int = 1000, seed: int = 7, fsync: bool = True
) -> dict[str, Any]:
    load_before = load_average()
    spec = ClusterSpec(
        topics=topics, partitions_per_topic=partitions_per_topic, brokers=len(BROKERS), replication_factor=3,
        seed=seed,
    )  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench-elections-") as tmp_text:
        tmp = Path(tmp_text)
        cluster = generate(spec, CHROOT)
        write_data_dir(cluster, tmp / "zk" / "data")
        model = cluster.model
        changed = sorted(
            (name, pid)
            for name, topic in model.topics.items()
            for pid, state in topic.states.items()
            if VICTIM in state.isr
        )
        led = sum(
            1 for topic in model.topics.values() for state in topic.states.values() if state.leader == VICTIM
        )
        partitions = sum(len(t.partitions) for t in model.topics.values())
        paths = [state_path(t, p) for t, p in changed]
        # The embedded server's default 256 MB heap is for tests; at 200,000 partitions it collects so often
        # that clients lose their sessions.
        with EmbeddedZooKeeper(tmp / "zk", startup_timeout=120, jvm_options=(ZK_HEAP,)) as zookeeper:
            zk_connect = zookeeper.connect_string + CHROOT
            floor_before = floor_write(zk_connect, paths, multi_ops)
            baseline = read_baseline(zk_connect)
            registrations = {
                b: cluster.tree.nodes[CHROOT + zk_paths.broker_path(b)].data or b"" for b in BROKERS
            }
            measured = _fence_through_bridge(
                zk_connect, tmp / "meta", model.cluster_id or "", fsync, registrations
            )
            floor_after = floor_write(zk_connect, paths, multi_ops)
            mismatches = _compare(zk_connect, measured.pop("image_states"), changed)
    floor = max(min(floor_before["seconds"], floor_after["seconds"]), 1e-4)
    return {
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "cluster": {"partitions": partitions, "brokers": len(BROKERS), "victim_leads": led,
                    "partitions_changed": len(changed)},
        "fsync": fsync,
        "multi_ops": multi_ops,
        "floor_before": floor_before,
        "floor_after": floor_after,
        "read_baseline_s": baseline,
        **measured,
        "zk_mismatches": mismatches,
        "ratios": {
            "zookeeper_over_floor": round(measured["fence_to_zookeeper_s"] / floor, 2),
            "durable_over_floor": round(measured["fence_to_durable_s"] / floor, 2),
        },
        "load_average_before": load_before,
        "load_average_after": load_average(),
    }  # fmt: skip


def _fence_through_bridge(
    zk_connect: str, metadata_dir: Path, cluster_id: str, fsync: bool, registrations: dict[int, bytes]
) -> dict[str, Any]:
    config = BridgeConfig.model_validate(
        {"zk_connect": zk_connect, "metadata_dir": metadata_dir, "node_id": NODE_ID, "fsync": fsync,
         "rehearsal": False, "broker_session_timeout_ms": SESSION_TIMEOUT_MS,
         "auto_leader_rebalance_enable": False}
    )  # fmt: skip
    sessions: list[KazooClient] = []
    brokers: list[Broker] = []
    transitions = TransitionTimes()
    driver_log = logging.getLogger("bridge.driver")
    driver_log.addHandler(transitions)
    level = driver_log.level
    driver_log.setLevel(logging.INFO)
    started = time.perf_counter()
    controller: BridgeController | None = None
    try:
        sessions = [register_in_zookeeper(zk_connect, b, registrations[b]) for b in BROKERS]
        controller = BridgeController(config).start()

        def applied() -> int:
            return -1 if controller.log is None else controller.log.end_offset - 1

        brokers = [Broker(b, controller.listen_port, cluster_id, applied).start() for b in BROKERS]
        _wait_for_dual_write(controller, brokers)
        migrated_s = time.perf_counter() - started
        phases = load_phases(started, transitions.entered)
        deadline = time.monotonic() + 120
        while any(b.fenced for b in brokers) or controller.status().brokers.fenced:
            if time.monotonic() > deadline:
                raise Zk2KraftError("the brokers were not unfenced within 120 s")
            time.sleep(0.05)
        lifecycle, metadata_log = controller.broker_lifecycle, controller.log
        assert lifecycle is not None and metadata_log is not None
        marks: dict[str, float] = {}
        fence_records: list[int] = []
        decide = lifecycle.replication.maybe_fence_one_stale_broker
        append = metadata_log.append
        write = controller.pipeline.write

        def timed_decide(image: Any) -> Any:
            records = decide(image)
            if records and "decision" not in marks:
                marks["decision"] = time.perf_counter()
                fence_records.append(len(records))
            return records

        # A fence of more than 10,000 records is committed in chunks (one batch and dual write each) by one
        # write event: it is durable once its last chunk is, and in ZooKeeper once that event returns.
        appended_count = [0]

        def timed_append(records: Any, *args: Any, **kwargs: Any) -> Any:
            appended = append(records, *args, **kwargs)
            if fence_records and "durable" not in marks:
                appended_count[0] += len(records)
                if appended_count[0] == fence_records[0]:
                    appended.durable.add_done_callback(
                        lambda _f: marks.setdefault("durable", time.perf_counter())
                    )
            return appended

        async def timed_write(generate: Any) -> Any:
            decided_here = []

            def watched(image: Any) -> Any:
                decided = len(fence_records)
                outcome = generate(image)
                if len(fence_records) > decided:
                    decided_here.append(True)
                return outcome

            outcome = await write(watched)
            if decided_here:
                marks.setdefault("zookeeper", time.perf_counter())
            return outcome

        # Instrumentation only: the same calls, timed (the bridge looks these up on its objects at call time).
        lifecycle.replication.maybe_fence_one_stale_broker = timed_decide  # type: ignore[method-assign]
        metadata_log.append = timed_append  # type: ignore[method-assign]
        controller.pipeline.write = timed_write  # type: ignore[method-assign]
        brokers[VICTIM - 1].stop()
        deadline = time.monotonic() + SESSION_TIMEOUT_MS / 1000 + 1800
        while "zookeeper" not in marks:
            if time.monotonic() > deadline or controller.error:
                raise Zk2KraftError(f"the fence did not reach ZooKeeper: {controller.error}")
            time.sleep(0.01)
        image = metadata_log.image
        fenced = image.cluster.brokers[VICTIM].fenced
        image_states = {
            (name, pid): (p.leader, list(p.isr), p.leader_epoch)
            for name, topic in image.topics_by_name.items()
            for pid, p in topic.partitions.items()
        }
    finally:
        driver_log.removeHandler(transitions)
        driver_log.setLevel(level)
        for broker in brokers:
            broker.stop()
        if controller is not None:
            controller.stop()
        for session in sessions:
            session.stop()
            session.close()
    return {
        "start_to_dual_write_s": round(migrated_s, 1),
        "start_to_dual_write_without_broker_wait_s": round(
            migrated_s - phases.get(DriverState.WAIT_FOR_BROKERS.name, 0.0), 1
        ),
        "load_phases_s": phases,
        "fence_records": fence_records[0],
        "victim_fenced_in_image": fenced,
        "fence_to_durable_s": round(marks["durable"] - marks["decision"], 4),
        "fence_to_zookeeper_s": round(marks["zookeeper"] - marks["decision"], 4),
        "image_states": image_states,
        "broker_errors": sorted({e for b in brokers for e in b.errors}),
        "registrations_retried_not_controller": sum(b.not_controller for b in brokers),
    }


def _wait_for_dual_write(controller: BridgeController, brokers: list[Broker]) -> None:
    """Until the bridge dual-writes; a progress line every PROGRESS_S seconds, the brokers' errors on failure."""
    deadline = time.monotonic() + DUAL_WRITE_TIMEOUT_S
    while not controller.wait_for_state(DriverState.DUAL_WRITE, timeout=PROGRESS_S):
        errors = sorted({f"broker {b.broker_id}: {e}" for b in brokers for e in b.errors})
        if controller.exit_code is not None or time.monotonic() > deadline:
            raise Zk2KraftError(
                f"the bridge did not reach DUAL_WRITE (state {controller.state.name}): {controller.error}; "
                f"broker errors: {errors or 'none'}"
            )
        status = controller.status().brokers or BrokersStatus()
        print(
            f"# waiting for DUAL_WRITE: state {controller.state.name}, registered {status.registered}, "
            f"waiting for {status.waiting_for}, broker epochs {[b.epoch for b in brokers]}, "
            f"errors {errors or 'none'}",
            file=sys.stderr, flush=True,
        )  # fmt: skip


def _compare(
    zk_connect: str,
    image_states: dict[tuple[str, int], tuple[int, list[int], int]],
    changed: list[tuple[str, int]],
) -> int:
    """How many changed partitions' state znodes differ from the log's image (leader, ISR, leader epoch)."""
    client = ZkConnectOptions(connect=zk_connect).kazoo_client()
    client.start(timeout=30)
    try:
        replies = windowed(client.get_async, [state_path(t, p) for t, p in changed])
        wrong = 0
        for key, reply in zip(changed, replies, strict=True):
            state = json.loads(reply.get()[0])
            if (state["leader"], state["isr"], state["leader_epoch"]) != image_states[key] or state[
                "leader"
            ] == VICTIM:
                wrong += 1
        return wrong
    finally:
        client.stop()
        client.close()


def report(result: dict[str, Any]) -> str:
    floor = min(result["floor_before"]["seconds"], result["floor_after"]["seconds"])
    ratio = result["ratios"]["zookeeper_over_floor"]
    cluster = result["cluster"]
    baseline = result["read_baseline_s"]
    copy_s = baseline["read_s"] + baseline["decode_s"]
    load_s = result["start_to_dual_write_without_broker_wait_s"]
    return "\n".join(
        [
            f"initial load to DUAL_WRITE: {result['start_to_dual_write_s']} s, {load_s} s without "
            f"WAIT_FOR_BROKERS (target < 10 s); one plain read + decode of ZooKeeper {copy_s:.2f} s -> "
            f"{load_s / max(copy_s, 1e-3):.2f}x; phases {result['load_phases_s']}",
            f"broker {VICTIM} fenced: {cluster['partitions_changed']:,} of {cluster['partitions']:,} partitions "
            f"changed ({cluster['victim_leads']:,} led by it), {result['fence_records']:,} records",
            f"fence -> durable in the log: {result['fence_to_durable_s']} s",
            f"fence -> ZooKeeper holds every new state: {result['fence_to_zookeeper_s']} s; floor {floor} s "
            f"-> {ratio}x (target <= 2x: {'met' if ratio <= 2 else 'NOT met'}); "
            f"{result['zk_mismatches']} znode(s) differ from the log",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--topics", type=int, default=2000)
    parser.add_argument("--partitions-per-topic", type=int, default=100)
    parser.add_argument("--multi-ops", type=int, default=1000, help="setData ops per multi in the floor")
    args = parser.parse_args(argv)
    print(f"# {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC", flush=True)
    result = run(args.topics, args.partitions_per_topic, multi_ops=args.multi_ops)
    print(json.dumps(result, indent=2))
    print(report(result))


if __name__ == "__main__":
    main()
