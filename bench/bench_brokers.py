"""Benchmark: many brokers heartbeating to the bridge while admin clients change configs, against a floor.

    python -m bench.bench_brokers [--brokers 2000] [--clients 16] [--seconds 20]

A private embedded ZooKeeper is seeded with a small synthetic Kafka cluster (`bench.generate_cluster`, brokers
1-6), and a bridge controller runs over it in a child process WITHOUT rehearsal: it waits for the brokers,
as Kafka's controller does. A fleet of simulated ZooKeeper-mode brokers in this process (one asyncio loop)
each opens its own connection to the bridge's listener, registers (BrokerRegistration v4, a new
incarnation, IsMigratingZkBroker; its inter-broker endpoint is a child process that answers every broker's
control requests with success, as reachable brokers do) and heartbeats every `--interval` seconds (BrokerHeartbeat v1, Kafka's
broker.heartbeat.interval.ms of 2 s by default) with the offset the fleet's one Raft observer of
`__cluster_metadata` has applied, asking to be unfenced once the controller says it is caught up. Every
byte goes through kio. Once every broker is unfenced, two phases of `--seconds` each:

- brokers only: heartbeats, and the FLOOR, an ApiVersions round trip every 20 ms on the same listener from
  the same event loop (no append, no ZooKeeper: what the listener and both event loops cost);
- brokers and `--clients` admin clients, each on its own connection, sending config changes
  (IncrementalAlterConfigs) back to back from a process of their own, with the floor probe still running.

Each phase also reads the bridge's own BrokerHeartbeat latency histogram (over the phase and the second before
it; from a request's arrival on the bridge's loop to its response): how much of the latency the fleet sees is
inside the bridge.

Reported: heartbeat p50/p99 in each phase, the floor's p99 in the same phase and the ratio; the brokers
wrongly fenced (a broker that kept its schedule but was answered fenced, or an error, after its unfence;
and the fenced count in the bridge's /status at the end); how late the fleet sent heartbeats (a fleet that
falls behind would be fenced rightly). Target: heartbeat p99 < 50 ms under admin load, no wrong fence.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode

from bench import broker_requests
from bench.bench_bridge import (
    CHROOT,
    NODE_ID,
    REQUEST_SECONDS,
    Subprocess,
    check_ok,
    latency_summary,
    load_average,
    metric_samples,
    seed_cluster,
    set_topic_config,
    user_topics,
)
from bench.broker_requests import OK_ANSWERS, REQUEST_HEADER
from bridge.config import BridgeConfig
from bridge.controller import BridgeController
from bridge.kafka.client import ConnectionClosedError, KafkaConnection
from bridge.kafka.protocol import encode_response, frame
from bridge.shim.follower import MetadataFollower
from migrate.errors import Zk2KraftError
from migrate.zk.embedded import EmbeddedZooKeeper

TARGET_P99_MS = 50.0
PROBE_EVERY_S = 0.02
SETTLE_S = 1.0
"""Between reading the bridge's /metrics and a phase's start: what waited meanwhile is not timed."""
READY_TIMEOUT_S = 600.0


# ---------------------------------------------------------------- the bridge (a child process)


def serve(zk_connect: str, metadata_dir: Path) -> int:
    """Child: a bridge as Kafka's controller behaves (no rehearsal); ports on stdout; stops at stdin's EOF."""
    config = BridgeConfig.model_validate(
        {"zk_connect": zk_connect, "metadata_dir": metadata_dir, "node_id": NODE_ID, "fsync": True}
    )
    controller = BridgeController(config).start()
    print(
        json.dumps({"listen_port": controller.listen_port, "metrics_port": controller.metrics_port}),
        flush=True,
    )
    sys.stdin.read()
    return controller.stop() or 0


class Bridge(Subprocess):
    """The bridge in a child process (`python -m bench.bench_brokers --serve`), with its /status."""

    @classmethod
    def start_serving(cls, zk_connect: str, metadata_dir: Path) -> Bridge:
        return cls.start(zk_connect, metadata_dir, None, module="bench.bench_brokers")



# ---------------------------------------------------------------- the brokers' listeners (a child process)


def answer_control_requests() -> int:
    """Child: every fleet broker's inter-broker listener, one port for all (LeaderAndIsr, UpdateMetadata and
    StopReplica answered with success without decoding them, in order); the port on stdout; stops at stdin's
    EOF. In a process of its own, so the bridge's full syncs do not load the fleet's event loop."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size = int.from_bytes(await reader.readexactly(4), "big")
                payload = await reader.readexactly(size)
                api_key, _version, correlation_id = REQUEST_HEADER.unpack_from(payload)
                writer.write(frame(encode_response(correlation_id, OK_ANSWERS[api_key])))
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(serve, "127.0.0.1", 0, backlog=4096)
        print(json.dumps({"port": server.sockets[0].getsockname()[1]}), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        server.close()

    asyncio.run(main())
    return 0


async def start_listeners() -> tuple[asyncio.subprocess.Process, int]:
    """`answer_control_requests` in a child process; it and its port."""
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.bench_brokers", "--answer", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert child.stdout is not None
    line = await child.stdout.readline()
    if not line:
        raise Zk2KraftError(f"the brokers' listener process exited with {await child.wait()}")
    return child, int(json.loads(line)["port"])


# ---------------------------------------------------------------- the fleet


@dataclass
class FleetBroker:
    """One simulated ZooKeeper-mode broker of the fleet: its own connection, incarnation and session."""

    broker_id: int
    incarnation: uuid.UUID = field(default_factory=uuid.uuid4)
    broker_epoch: int = -1
    caught_up: bool = False
    fenced: bool = True
    unfenced_once: bool = False
    wrongly_fenced: bool = False
    errors: list[str] = field(default_factory=list)
    last_sent: float = 0.0
    max_gap_s: float = 0.0


@dataclass
class Samples:
    """Latencies (seconds) of the phase being measured; None between phases."""

    heartbeats: list[float] | None = None
    floor: list[float] | None = None
    # How late the floor probe's sleeps woke: the fleet's own event loop lag, which every figure above carries.
    fleet_lag: list[float] | None = None


class Fleet:
    """`count` brokers heartbeating to the bridge at `port` from this event loop."""

    def __init__(self, port: int, cluster_id: str, count: int, interval_s: float) -> None:
        self.port = port
        self.cluster_id = cluster_id
        self.interval = interval_s
        self.brokers = [FleetBroker(broker_id) for broker_id in range(1, count + 1)]
        self.samples = Samples()
        self.follower = MetadataFollower([("127.0.0.1", port)], cluster_id=cluster_id, poll_interval=0.05)
        self.tasks: list[asyncio.Task[None]] = []
        self.measuring = False
        self.listener_port = 0
        """Where every broker's inter-broker listener answers (`answer_control_requests`)."""

    def start(self) -> None:
        self.follower.start()
        for i, broker in enumerate(self.brokers):
            # Spread over one interval, as brokers started at different times are.
            delay = self.interval * i / len(self.brokers)
            self.tasks.append(asyncio.create_task(self._run(broker, delay)))

    async def stop(self) -> None:
        await cancel_all(self.tasks)
        await self.follower.stop()

    def unfenced(self) -> int:
        return sum(1 for b in self.brokers if b.broker_epoch >= 0 and not b.fenced)

    def applied_offset(self) -> int:
        return self.follower.position - 1

    async def _run(self, broker: FleetBroker, delay: float) -> None:
        await asyncio.sleep(delay)
        connection: KafkaConnection | None = None
        try:
            while True:
                try:
                    if connection is None:
                        connection = await KafkaConnection.open(
                            "127.0.0.1", self.port, client_id=f"broker-{broker.broker_id}"
                        )
                    if broker.broker_epoch < 0:
                        await self._register(connection, broker)
                    else:
                        await self._heartbeat(connection, broker)
                except (TimeoutError, ConnectionClosedError, OSError) as exc:
                    broker.errors.append(type(exc).__name__)
                    if connection is not None:
                        await connection.close()
                    connection = None
                await asyncio.sleep(self.interval)
        finally:
            if connection is not None:
                await connection.close()

    async def _register(self, connection: KafkaConnection, broker: FleetBroker) -> None:
        request = broker_requests.registration(
            broker.broker_id, self.cluster_id, "127.0.0.1", self.listener_port, broker.incarnation
        )
        response = await connection.send(request)
        if response.error_code == ErrorCode.none:
            broker.broker_epoch = int(response.broker_epoch)
        elif response.error_code != ErrorCode.not_controller:  # NOT_CONTROLLER: still reading ZooKeeper
            broker.errors.append(response.error_code.name)

    async def _heartbeat(self, connection: KafkaConnection, broker: FleetBroker) -> None:
        request = broker_requests.heartbeat(
            broker.broker_id, broker.broker_epoch, self.applied_offset(), broker.caught_up
        )
        now = time.perf_counter()
        if broker.last_sent and self.measuring:
            broker.max_gap_s = max(broker.max_gap_s, now - broker.last_sent)
        broker.last_sent = now
        response = await connection.send(request)
        took = time.perf_counter() - now
        samples = self.samples.heartbeats
        if samples is not None:
            samples.append(took)
        if response.error_code != ErrorCode.none:
            broker.errors.append(response.error_code.name)
            if broker.unfenced_once:
                broker.wrongly_fenced = True
            return
        broker.caught_up = broker.caught_up or bool(response.is_caught_up)
        broker.fenced = bool(response.is_fenced)
        if not broker.fenced:
            broker.unfenced_once = True
        elif broker.unfenced_once:
            broker.wrongly_fenced = True


async def cancel_all(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel `tasks` until all are done: Python 3.11's wait_for (inside KafkaConnection) can swallow a cancel
    that lands as its inner wait ends (the same loop as MetadataFollower.stop)."""
    pending = {task for task in tasks if not task.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=0.1)


async def probe_floor(port: int, samples: Samples) -> None:
    """ApiVersions every PROBE_EVERY_S on its own connection; latencies go to the phase being measured."""
    connection = await KafkaConnection.open("127.0.0.1", port, client_id="bench-floor")
    async with connection:
        while True:
            started = time.perf_counter()
            await connection.send(
                ApiVersionsRequest(client_software_name="bench", client_software_version="1")
            )
            took = time.perf_counter() - started
            if samples.floor is not None:
                samples.floor.append(took)
            slept = time.perf_counter()
            await asyncio.sleep(PROBE_EVERY_S)
            if samples.fleet_lag is not None:
                samples.fleet_lag.append(max(time.perf_counter() - slept - PROBE_EVERY_S, 0.0))


async def admin_load(port: int, topics: list[str], clients: int, stop: asyncio.Event) -> dict[str, Any]:
    """`clients` connections sending config changes back to back until `stop`."""
    connections = [
        await KafkaConnection.open("127.0.0.1", port, client_id=f"bench-admin-{c}") for c in range(clients)
    ]
    latencies: list[float] = []

    async def client(c: int) -> None:
        topic, i = topics[c % len(topics)], 0
        while not stop.is_set():
            started = time.perf_counter()
            response = await connections[c].send(set_topic_config(topic, 7_200_000 + c * 1_000_000 + i))
            latencies.append(time.perf_counter() - started)
            check_ok(response, f"IncrementalAlterConfigs of {topic}")
            i += 1

    started = time.perf_counter()
    try:
        await asyncio.gather(*(client(c) for c in range(clients)))
    finally:
        for connection in connections:
            await connection.close()
    elapsed = time.perf_counter() - started
    return {
        "clients": clients,
        "changes": len(latencies),
        "changes_per_s": round(len(latencies) / elapsed) if elapsed else 0,
        "latency": latency_summary(latencies) if latencies else {"count": 0},
    }


def admin_process(port: int, topics: list[str], clients: int, seconds: float) -> dict[str, Any]:
    """Child: `admin_load` for `seconds`, its figures as one JSON line on stdout."""

    async def timed() -> dict[str, Any]:
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(seconds, stop.set)
        return await admin_load(port, topics, clients, stop)

    return asyncio.run(timed())


async def admin_load_elsewhere(port: int, topics: list[str], clients: int, seconds: float) -> dict[str, Any]:
    """`admin_load` in a child process of its own, as admin clients are not on the brokers' hosts: the fleet's
    loop then times heartbeats, not the admin clients' encoding."""
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.bench_brokers", "--admin", str(port), ",".join(topics), str(clients),
        str(seconds), stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, _err = await child.communicate()
    if child.returncode != 0:
        raise Zk2KraftError(f"the admin clients' process exited with {child.returncode}")
    return json.loads(out.decode().strip().splitlines()[-1])  # type: ignore[no-any-return]


def heartbeat_buckets(metrics_port: int) -> dict[float, float]:
    """The bridge's own BrokerHeartbeat latency histogram (cumulative count per upper bound, seconds)."""
    buckets: dict[float, float] = {}
    for sample in metric_samples(metrics_port):
        if sample.name == f"{REQUEST_SECONDS}_bucket" and sample.labels.get("api") == "BrokerHeartbeat":
            buckets[float(sample.labels["le"])] = sample.value
    return buckets


def bridge_side(before: dict[float, float], after: dict[float, float]) -> dict[str, Any]:
    """From arrival to response inside the bridge, over a phase: the share answered within the target, and
    the p99's histogram bucket."""
    counts = {le: after.get(le, 0.0) - before.get(le, 0.0) for le in sorted(after)}
    total = counts.get(float("inf"), 0.0)
    if not total:
        return {"count": 0}
    within = counts.get(TARGET_P99_MS / 1000, 0.0)
    p99_bucket = next(le for le, count in counts.items() if count >= 0.99 * total)
    return {
        "count": int(total),
        "within_target_share": round(within / total, 4),
        "p99_at_most_ms": None if p99_bucket == float("inf") else round(p99_bucket * 1000, 1),
    }


async def measure(
    fleet: Fleet, bridge: Bridge, topics: list[str], clients: int, seconds: float
) -> dict[str, Any]:
    """Wait until every broker is unfenced, then the two phases; their figures."""
    listeners, fleet.listener_port = await start_listeners()
    try:
        return await _measure(fleet, bridge, topics, clients, seconds)
    finally:
        assert listeners.stdin is not None
        listeners.stdin.close()
        await listeners.wait()


async def _measure(
    fleet: Fleet, bridge: Bridge, topics: list[str], clients: int, seconds: float
) -> dict[str, Any]:
    fleet.start()
    deadline = time.monotonic() + READY_TIMEOUT_S
    started = time.monotonic()
    last_shown = 0.0
    while fleet.unfenced() < len(fleet.brokers):
        if time.monotonic() > deadline:
            raise Zk2KraftError(
                f"{fleet.unfenced()} of {len(fleet.brokers)} brokers unfenced after {READY_TIMEOUT_S:g} s; "
                f"bridge state {bridge.status().get('state')}"
            )
        if bridge.process.poll() is not None:
            raise Zk2KraftError(f"the bridge exited with {bridge.process.returncode}")
        if time.monotonic() - last_shown > 10:
            registered = sum(1 for b in fleet.brokers if b.broker_epoch >= 0)
            print(
                f"... {registered} registered, {fleet.unfenced()} unfenced of {len(fleet.brokers)} "
                f"({time.monotonic() - started:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
            last_shown = time.monotonic()
        await asyncio.sleep(0.2)
    ready_s = time.monotonic() - started
    # One full interval more, so every broker has heartbeated since its unfence before measuring.
    await asyncio.sleep(fleet.interval)
    probe = asyncio.create_task(probe_floor(fleet.port, fleet.samples))
    loop = asyncio.get_running_loop()
    fleet.measuring = True
    try:
        phases: dict[str, Any] = {}
        for name, with_admin in (("brokers_only", False), ("with_admin_load", True)):
            print(f"... phase {name}: {seconds:g} s", file=sys.stderr, flush=True)
            # The bridge's /metrics is read off this loop and outside the phase (parsing it takes a while),
            # so the fleet's timings do not carry it.
            inside_before = await loop.run_in_executor(None, heartbeat_buckets, bridge.metrics_port)
            await asyncio.sleep(SETTLE_S)
            fleet.samples.heartbeats, fleet.samples.floor, fleet.samples.fleet_lag = [], [], []
            load = (
                asyncio.create_task(admin_load_elsewhere(fleet.port, topics, clients, seconds)) if with_admin else None
            )
            await asyncio.sleep(seconds)
            heartbeats, floor, lag = fleet.samples.heartbeats, fleet.samples.floor, fleet.samples.fleet_lag
            fleet.samples.heartbeats = fleet.samples.floor = fleet.samples.fleet_lag = None
            inside_after = await loop.run_in_executor(None, heartbeat_buckets, bridge.metrics_port)
            phase: dict[str, Any] = {
                "heartbeats": latency_summary(heartbeats),
                "heartbeats_inside_bridge": bridge_side(inside_before, inside_after),
                "floor_api_versions": latency_summary(floor),
                "fleet_loop_lag": latency_summary(lag),
            }
            phase["heartbeat_p99_over_floor_p99"] = round(
                phase["heartbeats"]["p99_ms"] / phase["floor_api_versions"]["p99_ms"], 2
            )
            if load is not None:
                phase["admin"] = await load
            phases[name] = phase
    finally:
        fleet.measuring = False
        await cancel_all([probe])
    # The brokers keep heartbeating a moment, so a fence decided at the end shows in /status.
    await asyncio.sleep(fleet.interval)
    status = bridge.status()
    await fleet.stop()
    gaps = [b.max_gap_s for b in fleet.brokers]
    return {
        "ready_s": round(ready_s, 1),
        **phases,
        "wrongly_fenced": sum(1 for b in fleet.brokers if b.wrongly_fenced),
        "fenced_in_status_at_end": (status.get("brokers") or {}).get("fenced"),
        "registered_in_status_at_end": (status.get("brokers") or {}).get("registered"),
        "state_at_end": status.get("state"),
        "broker_errors": sorted({e for b in fleet.brokers for e in b.errors}),
        "heartbeat_max_gap_s": round(max(gaps), 3),
    }


# ---------------------------------------------------------------- the whole run


def run(
    brokers: int,
    clients: int,
    *,
    seconds: float = 20.0,
    interval_s: float = 2.0,
    zk_connect: str | None = None,
    topics: int = 20,
) -> dict[str, Any]:
    """The whole benchmark; `zk_connect` (with a chroot) reuses a running ZooKeeper instead of starting one."""
    if brokers < 6:
        raise ValueError("the seeded cluster has brokers 1-6; the fleet needs at least 6")
    load_before = load_average()
    with tempfile.TemporaryDirectory(prefix="bench-brokers-") as tmp_text:
        tmp = Path(tmp_text)
        zookeeper = None
        if zk_connect is None:
            zookeeper = EmbeddedZooKeeper(tmp / "zk").start()
            zk_connect = zookeeper.connect_string
        try:
            cluster = seed_cluster(zk_connect, CHROOT, topics, seed=4)
            metadata_dir = tmp / "controller" / "meta"
            metadata_dir.parent.mkdir()
            bridge = Bridge.start_serving(zk_connect + CHROOT, metadata_dir)
            try:
                assert cluster.model.cluster_id is not None
                fleet = Fleet(bridge.listen_port, cluster.model.cluster_id, brokers, interval_s)
                measured = asyncio.run(measure(fleet, bridge, user_topics(cluster), clients, seconds))
            finally:
                bridge.stop()
        finally:
            if zookeeper is not None:
                zookeeper.close()
    return {
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "brokers": brokers,
        "heartbeat_interval_s": interval_s,
        "phase_seconds": seconds,
        **measured,
        "load_average_before": load_before,
        "load_average_after": load_average(),
    }


def report(result: dict[str, Any]) -> str:
    """The figures against the targets, one line each."""
    lines = []
    for name in ("brokers_only", "with_admin_load"):
        phase = result[name]
        beats, floor = phase["heartbeats"], phase["floor_api_versions"]
        line = (
            f"{name}: {beats['count']:,} heartbeats p50 {beats['p50_ms']} ms, p99 {beats['p99_ms']} ms; "
            f"floor (ApiVersions, same listener and load) p99 {floor['p99_ms']} ms; "
            f"ratio {phase['heartbeat_p99_over_floor_p99']}x"
        )
        line += f"; the fleet's own loop lag p99 {phase['fleet_loop_lag']['p99_ms']} ms"
        inside = phase.get("heartbeats_inside_bridge", {})
        if inside.get("count"):
            line += (
                f"; inside the bridge (arrival to response) {inside['within_target_share']:.2%} within "
                f"{TARGET_P99_MS:g} ms, p99 <= {inside['p99_at_most_ms']} ms"
            )
        if "admin" in phase:
            admin = phase["admin"]
            line += f"; {admin['clients']} admin clients made {admin['changes_per_s']:,} config changes/s"
        lines.append(line)
    p99 = result["with_admin_load"]["heartbeats"]["p99_ms"]
    wrong = result["wrongly_fenced"] + (result["fenced_in_status_at_end"] or 0)
    met = p99 < TARGET_P99_MS and wrong == 0
    lines.append(
        f"{result['brokers']:,} brokers: heartbeat p99 under admin load {p99} ms (target < {TARGET_P99_MS:g} ms), "
        f"{result['wrongly_fenced']} wrongly fenced, {result['fenced_in_status_at_end']} fenced in /status at the "
        f"end (target 0): {'met' if met else 'NOT met'}"
    )
    lines.append(
        f"fleet: all unfenced after {result['ready_s']} s; latest heartbeat gap {result['heartbeat_max_gap_s']} s "
        f"(interval {result['heartbeat_interval_s']:g} s); load average {result['load_average_before']} -> "
        f"{result['load_average_after']}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--brokers", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=16, help="admin clients making config changes")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each measured phase")
    parser.add_argument(
        "--interval", type=float, default=2.0, help="broker.heartbeat.interval.ms, in seconds"
    )
    parser.add_argument("--topics", type=int, default=20, help="topics of the seeded cluster")
    parser.add_argument("--serve", nargs=2, metavar=("ZK", "DIR"), help=argparse.SUPPRESS)
    parser.add_argument("--answer", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--admin", nargs=4, metavar=("PORT", "TOPICS", "CLIENTS", "SECONDS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        sys.exit(serve(args.serve[0], Path(args.serve[1])))
    if args.answer:
        sys.exit(answer_control_requests())
    if args.admin:
        port, topic_list, clients, seconds = args.admin
        print(json.dumps(admin_process(int(port), topic_list.split(","), int(clients), float(seconds))))
        return
    result = run(
        args.brokers, args.clients, seconds=args.seconds, interval_s=args.interval, topics=args.topics
    )
    print(json.dumps(result, indent=2))
    print(report(result))


if __name__ == "__main__":
    main()
