"""Benchmark: the controller-to-broker channel under load, against floors measured in the same run.

    python -m bench.bench_broker_channel [--topics 2000 --partitions-per-topic 100] [--changes 100]

A private embedded ZooKeeper starts from a generated Kafka cluster (`bench.generate_cluster`: 3 brokers,
replication factor 3), and a bridge runs over it in a child process as Kafka's controller (no rehearsal).
Three stand-in ZooKeeper-mode brokers in this process register with it (BrokerRegistration v4, migrating, a
listener each), heartbeat every `--heartbeat-ms` with the offset one Raft observer of `__cluster_metadata`
has applied, and serve LeaderAndIsr / UpdateMetadata / StopReplica on their listeners cheaply: every frame is
read whole, its header parsed, and a success answer of the schema's shape sent (the body is not decoded).
Once the three are unfenced and the channel's queues are empty:

(a) DUAL-WRITE with a stuck broker: `--changes` CreateTopics (one partition, replicas on all three brokers)
    and IncrementalAlterConfigs round trips, one at a time, with every broker answering, then again with
    broker 3 reading requests and never answering. Reported: p50/p99 of each kind in both phases and the
    ratios, the requests brokers 1 and 2 answered in the second phase, broker 3's queue depth in /status.
(b) FULL SYNC: the bridge's channel is told to full-sync the image (the call it makes on entering
    KRAFT_CONTROLLER_TO_BROKER_COMM after a restart or takeover; sent over the child's stdin); measured until
    each broker has answered its UpdateMetadata, FULL LeaderAndIsr and FULL UpdateMetadata, and heartbeat
    round trips meanwhile (max, p99). FLOOR, after the bridge stopped: a process with no controller loads the
    same log's image, builds the same requests untimed, then encodes them with the channel's encoder and
    sends them to the same stand-ins, one in flight per broker, until all are answered.

Targets: (a) the stuck broker changes neither round trip's p50 (ratio ~1); (b) full sync within 2x its floor,
no heartbeat answered later than 50 ms while it runs. Prints a JSON result, then the verdicts.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import platform
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from bench import broker_requests
from bench.bench_bridge import Subprocess, create_topic, latency_summary, load_average, set_topic_config
from bench.bench_brokers import cancel_all
from bench.broker_requests import OK_ANSWERS, REQUEST_HEADER
from bench.generate_cluster import ClusterSpec, generate, write_data_dir
from bridge.brokers import propagation
from bridge.brokers.propagation import PropagationContext
from bridge.config import BridgeConfig
from bridge.controller import BridgeController
from bridge.kafka.client import ConnectionClosedError, KafkaConnection
from bridge.kafka.protocol import encode_response, frame
from bridge.shim.follower import MetadataFollower
from migrate.errors import Zk2KraftError
from migrate.kraft.reader import load_image
from migrate.zk.embedded import EmbeddedZooKeeper

CHROOT = "/kafka"
NODE_ID = 3000
BROKERS = (1, 2, 3)
STUCK = 3
LISTENER = broker_requests.LISTENER
CLIENT_ID = str(NODE_ID)
REQUEST_TIMEOUT_MS = 3000
"""The bridge's request.timeout.ms: the stuck broker's request is resent soon after it answers again."""
TARGET_FLOOR_RATIO = 2.0
TARGET_HEARTBEAT_MS = 50.0
READY_TIMEOUT_S = 1800.0


# ---------------------------------------------------------------- the bridge (a child process)


def serve(zk_connect: str, metadata_dir: Path) -> int:
    """Child: a bridge as Kafka's controller behaves; ports on stdout; `full-sync` lines on stdin start a full
    sync of the current image (what activation does); stops at stdin's EOF."""
    config = BridgeConfig.model_validate(
        {"zk_connect": zk_connect, "metadata_dir": metadata_dir, "node_id": NODE_ID, "fsync": True,
         "rehearsal": False, "request_timeout_ms": REQUEST_TIMEOUT_MS, "auto_leader_rebalance_enable": False}
    )  # fmt: skip
    controller = BridgeController(config).start()
    print(
        json.dumps({"listen_port": controller.listen_port, "metrics_port": controller.metrics_port}),
        flush=True,
    )
    loop = controller._loop  # instrumentation only: the controller's own loop, where the driver calls it
    assert loop is not None

    def full_sync() -> None:
        driver, metadata_log = controller.driver, controller.log
        assert driver is not None and metadata_log is not None
        ctx = PropagationContext(
            NODE_ID, driver.leadership.zk_controller_epoch, config.inter_broker_listener_name
        )
        controller.channel.full_sync(metadata_log.image, ctx)

    for line in sys.stdin:
        if line.strip() == "full-sync":
            loop.call_soon_threadsafe(full_sync)
    return controller.stop() or 0


class Bridge(Subprocess):
    """The bridge child (`python -m bench.bench_broker_channel --serve`) with its /status."""

    @classmethod
    def start_serving(cls, zk_connect: str, metadata_dir: Path) -> Bridge:
        return cls.start(zk_connect, metadata_dir, None, module="bench.bench_broker_channel")

    def command(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()


# ---------------------------------------------------------------- the stand-in brokers


@dataclass
class StandIn:
    """A ZooKeeper-mode broker: registration and heartbeats to the controller, and a listener that answers
    control requests with success without decoding them (one connection at a time, answers in order)."""

    broker_id: int
    cluster_id: str
    controller_port: int
    applied: Callable[[], int]
    interval_s: float
    port: int = 0
    broker_epoch: int = -1
    caught_up: bool = False
    fenced: bool = True
    unresponsive: bool = False
    answered: list[tuple[int, float]] = field(default_factory=list)
    """(api key, when answered) of every control request answered."""
    received: list[tuple[int, int, float]] = field(default_factory=list)
    """(api key, correlation id, when read) of every control request read, resends included."""
    heartbeats: list[tuple[float, float]] | None = None
    """(sent at, round trip) of each heartbeat while measuring; None otherwise."""
    errors: list[str] = field(default_factory=list)
    _server: asyncio.Server | None = None

    async def start(self) -> list[asyncio.Task[None]]:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return [asyncio.create_task(self._run())]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size = int.from_bytes(await reader.readexactly(4), "big")
                payload = await reader.readexactly(size)
                api_key, _version, correlation_id = REQUEST_HEADER.unpack_from(payload)
                self.received.append((api_key, correlation_id, time.perf_counter()))
                if self.unresponsive:
                    continue
                writer.write(frame(encode_response(correlation_id, OK_ANSWERS[api_key])))
                self.answered.append((api_key, time.perf_counter()))
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def _run(self) -> None:
        connection: KafkaConnection | None = None
        try:
            while True:
                try:
                    if connection is None:
                        connection = await KafkaConnection.open(
                            "127.0.0.1", self.controller_port, client_id=f"broker-{self.broker_id}"
                        )
                    if self.broker_epoch < 0:
                        await self._register(connection)
                    else:
                        await self._heartbeat(connection)
                except (TimeoutError, ConnectionClosedError, OSError) as exc:
                    self.errors.append(type(exc).__name__)
                    if connection is not None:
                        await connection.close()
                    connection = None
                await asyncio.sleep(self.interval_s)
        finally:
            if connection is not None:
                await connection.close()

    async def _register(self, connection: KafkaConnection) -> None:
        request = broker_requests.registration(self.broker_id, self.cluster_id, "127.0.0.1", self.port)
        response = await connection.send(request)
        if response.error_code == ErrorCode.none:
            self.broker_epoch = int(response.broker_epoch)
        elif response.error_code != ErrorCode.not_controller:  # NOT_CONTROLLER: still reading ZooKeeper
            self.errors.append(response.error_code.name)

    async def _heartbeat(self, connection: KafkaConnection) -> None:
        request = broker_requests.heartbeat(self.broker_id, self.broker_epoch, self.applied(), self.caught_up)
        sent = time.perf_counter()
        response = await connection.send(request)
        if self.heartbeats is not None:
            self.heartbeats.append((sent, time.perf_counter() - sent))
        if response.error_code != ErrorCode.none:
            self.errors.append(response.error_code.name)
            return
        self.caught_up = self.caught_up or bool(response.is_caught_up)
        self.fenced = bool(response.is_fenced)


class Fleet:
    """The three stand-ins and their Raft observer, on an event loop of their own thread."""

    def __init__(self, port: int, cluster_id: str, interval_s: float) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="stand-ins", daemon=True)
        self.follower = MetadataFollower([("127.0.0.1", port)], cluster_id=cluster_id, poll_interval=0.05)
        self.brokers = {
            b: StandIn(b, cluster_id, port, lambda: self.follower.position - 1, interval_s) for b in BROKERS
        }
        self.tasks: list[asyncio.Task[None]] = []

    def start(self) -> Fleet:
        self.thread.start()

        async def start() -> None:
            self.follower.start()
            for broker in self.brokers.values():
                self.tasks += await broker.start()

        self.on_loop(start())
        return self

    def stop_heartbeats(self) -> None:
        async def stop() -> None:
            await cancel_all(self.tasks)
            await self.follower.stop()

        self.on_loop(stop())

    def close(self) -> None:
        async def close() -> None:
            await cancel_all(self.tasks)
            await self.follower.stop()
            for broker in self.brokers.values():
                await broker.stop()

        self.on_loop(close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    def on_loop(self, work: Any, timeout: float = 120.0) -> Any:
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(timeout)

    def unfenced(self) -> bool:
        return all(b.broker_epoch >= 0 and not b.fenced for b in self.brokers.values())


def channel_idle(status: dict[str, Any]) -> bool:
    members = (status.get("broker_channel") or {}).get("brokers") or []
    return sorted(m["broker_id"] for m in members) == list(BROKERS) and all(
        m["queue_depth"] == 0 for m in members
    )


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise Zk2KraftError(f"{what} did not happen within {timeout} s")
        time.sleep(0.05)


# ---------------------------------------------------------------- (a) dual-write with a stuck broker


async def round_trips(port: int, changes: int, prefix: str, topic: str) -> dict[str, list[float]]:
    """`changes` CreateTopics and IncrementalAlterConfigs, alternating, one at a time; their round trips."""
    took: dict[str, list[float]] = {"create_topics": [], "alter_configs": []}
    async with await KafkaConnection.open(
        "127.0.0.1", port, client_id="bench-admin", timeout=30
    ) as connection:
        for n in range(changes):
            started = time.perf_counter()
            response = await connection.send(create_topic(f"{prefix}-{n}", 1, 3), timeout=60)
            took["create_topics"].append(time.perf_counter() - started)
            if [t.error_code for t in response.topics] != [ErrorCode.none]:
                raise Zk2KraftError(f"CreateTopics {prefix}-{n}: {response}")
            started = time.perf_counter()
            response = await connection.send(set_topic_config(topic, 3_600_000 + n), timeout=60)
            took["alter_configs"].append(time.perf_counter() - started)
            if [r.error_code for r in response.responses] != [ErrorCode.none]:
                raise Zk2KraftError(f"IncrementalAlterConfigs {topic}: {response}")
    return took


def dual_write_phase(bridge: Bridge, fleet: Fleet, changes: int, topic: str) -> dict[str, Any]:
    answering = asyncio.run(round_trips(bridge.listen_port, changes, "answering", topic))
    # The answering phase's last requests may still be on their way: broker 3 must have answered them
    # before it stops answering, or they count in its queue below.
    wait_until(lambda: channel_idle(bridge.status()), 120, "the answering phase's requests draining")
    stuck = fleet.brokers[STUCK]
    others = [fleet.brokers[b] for b in BROKERS if b != STUCK]
    before = [len(b.answered) for b in others]
    stuck_before = len(stuck.received)
    stuck.unresponsive = True
    stalled = asyncio.run(round_trips(bridge.listen_port, changes, "stuck", topic))
    members = {m["broker_id"]: m for m in bridge.status()["broker_channel"]["brokers"]}
    stuck_depth = members[STUCK]["queue_depth"]
    # Everything queued for the answering brokers reaches them while broker 3 is stuck.
    wait_until(
        lambda: all(m["queue_depth"] == 0 for b, m in _members(bridge).items() if b != STUCK), 120, "draining"
    )
    other_answers = [len(b.answered) - n for b, n in zip(others, before, strict=True)]
    stuck_received = len({c for _, c, _ in stuck.received[stuck_before:]})  # resends counted once
    stuck.unresponsive = False
    wait_until(lambda: channel_idle(bridge.status()), 300, "the stuck broker's queue draining")
    result: dict[str, Any] = {"changes": changes}
    for kind in ("create_topics", "alter_configs"):
        ok, slow = latency_summary(answering[kind]), latency_summary(stalled[kind])
        result[kind] = {
            "answering": ok,
            "one_stuck": slow,
            "p50_ratio": round(slow["p50_ms"] / max(ok["p50_ms"], 1e-3), 2),
            "p99_ratio": round(slow["p99_ms"] / max(ok["p99_ms"], 1e-3), 2),
        }
    result["answered_by_brokers_1_2_while_stuck"] = other_answers
    result["received_by_stuck_broker"] = stuck_received
    result["stuck_queue_depth"] = stuck_depth
    return result


def _members(bridge: Bridge) -> dict[int, dict[str, Any]]:
    return {m["broker_id"]: m for m in bridge.status()["broker_channel"]["brokers"]}


# ---------------------------------------------------------------- (b) the full sync and its floor


def full_sync_phase(bridge: Bridge, fleet: Fleet) -> dict[str, Any]:
    marks = {b: len(s.answered) for b, s in fleet.brokers.items()}
    received = {b: len(s.received) for b, s in fleet.brokers.items()}
    for broker in fleet.brokers.values():
        broker.heartbeats = []
    started = time.perf_counter()
    bridge.command("full-sync")

    def acknowledged() -> bool:
        return all(len(s.answered) - marks[b] >= 3 for b, s in fleet.brokers.items())

    wait_until(acknowledged, 1800, "the full sync's acknowledgements")
    done = {b: s.answered[marks[b] + 2][1] - started for b, s in fleet.brokers.items()}
    first = {b: s.received[received[b]][2] - started for b, s in fleet.brokers.items()}
    kinds = {b: [k for k, _ in s.answered[marks[b] : marks[b] + 3]] for b, s in fleet.brokers.items()}
    end = started + max(done.values())
    samples = [
        rtt
        for s in fleet.brokers.values()
        for sent, rtt in (s.heartbeats or [])
        if sent + rtt >= started and sent <= end
    ]
    for broker in fleet.brokers.values():
        broker.heartbeats = None
    summary = latency_summary(samples) if samples else {"count": 0}
    return {
        "acknowledged_s": round(max(done.values()), 3),
        "per_broker_acknowledged_s": {b: round(s, 3) for b, s in done.items()},
        "first_request_received_s": round(min(first.values()), 3),
        "requests_per_broker": kinds,
        "heartbeats": {**summary, "max_ms": round(max(samples, default=0.0) * 1000, 3)},
    }


def floor(metadata_dir: Path) -> dict[str, Any]:
    """Child, no controller: the log's image, the same full sync built untimed, then encoded with the
    channel's encoder and sent to the brokers it names, one in flight per broker, until all are answered."""
    image, _ = load_image(metadata_dir)
    members = propagation.migrating_brokers(image, LISTENER)
    ctx = PropagationContext(NODE_ID, 1, LISTENER)
    requests = propagation.full_sync(propagation.sync_view(image), ctx)
    gc.collect()
    started = time.perf_counter()
    by_broker: dict[int, list[bytes]] = {}
    for n, request in enumerate(requests):
        by_broker.setdefault(request.broker_id, []).append(propagation.encode(request.body, n, CLIENT_ID))
    encoded = time.perf_counter()

    async def send(broker_id: int, payloads: list[bytes]) -> None:
        address = members[broker_id]
        async with await KafkaConnection.open(address.host, address.port, client_id=CLIENT_ID) as connection:
            for payload in payloads:
                await connection.send_encoded(payload, timeout=600)

    async def send_all() -> None:
        await asyncio.gather(*(send(b, p) for b, p in by_broker.items()))

    asyncio.run(send_all())
    finished = time.perf_counter()
    return {
        "brokers": sorted(members),
        "requests": len(requests),
        "bytes": sum(len(p) for payloads in by_broker.values() for p in payloads),
        "encode_s": round(encoded - started, 3),
        "send_s": round(finished - encoded, 3),
        "total_s": round(finished - started, 3),
    }


def run_floor(metadata_dir: Path) -> dict[str, Any]:
    import subprocess

    out = subprocess.run(
        [sys.executable, "-m", "bench.bench_broker_channel", "--floor", str(metadata_dir)],
        cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True, check=False, timeout=3600,
    )  # fmt: skip
    if out.returncode != 0:
        raise Zk2KraftError(f"the floor process exited with {out.returncode}:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


# ---------------------------------------------------------------- the run


def run(
    topics: int, partitions_per_topic: int, *, changes: int = 100, heartbeat_ms: float = 50.0, seed: int = 7
) -> dict[str, Any]:
    load_before = load_average()
    spec = ClusterSpec(
        topics=topics, partitions_per_topic=partitions_per_topic, brokers=len(BROKERS), replication_factor=3,
        seed=seed,
    )  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench-broker-channel-") as tmp_text:
        tmp = Path(tmp_text)
        cluster = generate(spec, CHROOT)
        write_data_dir(cluster, tmp / "zk" / "data")
        partitions = sum(len(t.partitions) for t in cluster.model.topics.values())
        config_topic = sorted(cluster.model.topics)[0]
        with EmbeddedZooKeeper(tmp / "zk", startup_timeout=120) as zookeeper:
            started = time.perf_counter()
            bridge = Bridge.start_serving(zookeeper.connect_string + CHROOT, tmp / "meta")
            fleet = Fleet(bridge.listen_port, cluster.model.cluster_id or "", heartbeat_ms / 1000).start()
            try:
                wait_until(
                    lambda: fleet.unfenced() and channel_idle(bridge.status()), READY_TIMEOUT_S, "readiness"
                )
                ready_s = time.perf_counter() - started
                dual_write = dual_write_phase(bridge, fleet, changes, config_topic)
                sync = full_sync_phase(bridge, fleet)
                fleet.stop_heartbeats()
                bridge.stop()
                floor_result = run_floor(tmp / "meta")
            finally:
                if bridge.process.poll() is None:
                    bridge.process.kill()
                fleet.close()
    heartbeat_max = sync["heartbeats"]["max_ms"]
    return {
        "benchmark": "broker_channel",
        "machine": platform.platform(),
        "cluster": {"partitions": partitions, "brokers": len(BROKERS)},
        "ready_s": round(ready_s, 1),
        "dual_write": dual_write,
        "full_sync": sync,
        "floor": floor_result,
        "ratios": {
            "full_sync_over_floor": round(sync["acknowledged_s"] / max(floor_result["total_s"], 1e-3), 2),
            "create_topics_p50_stuck_over_answering": dual_write["create_topics"]["p50_ratio"],
            "alter_configs_p50_stuck_over_answering": dual_write["alter_configs"]["p50_ratio"],
        },
        "targets_met": {
            "full_sync_within_2x_floor": sync["acknowledged_s"]
            <= TARGET_FLOOR_RATIO * floor_result["total_s"],
            "heartbeats_within_50ms": heartbeat_max <= TARGET_HEARTBEAT_MS,
        },
        "load_average_before": load_before,
        "load_average_after": load_average(),
    }


def report(result: dict[str, Any]) -> str:
    dual, sync, floor_result, ratios = (
        result["dual_write"],
        result["full_sync"],
        result["floor"],
        result["ratios"],
    )
    met = result["targets_met"]
    lines = []
    for kind, name in (("create_topics", "CreateTopics"), ("alter_configs", "IncrementalAlterConfigs")):
        figures = dual[kind]
        lines.append(
            f"{name} p50 {figures['answering']['p50_ms']} ms with every broker answering, "
            f"{figures['one_stuck']['p50_ms']} ms with broker {STUCK} stuck ({figures['p50_ratio']}x; p99 "
            f"{figures['p99_ratio']}x); {dual['changes']} each"
        )
    lines.append(
        f"while stuck: brokers 1 and 2 answered {dual['answered_by_brokers_1_2_while_stuck']} requests, broker "
        f"{STUCK} received {dual['received_by_stuck_broker']} (unanswered) and had {dual['stuck_queue_depth']} queued"
    )
    lines.append(
        f"full sync of {result['cluster']['partitions']:,} partitions to {len(BROKERS)} brokers: acknowledged "
        f"after {sync['acknowledged_s']} s (first request after {sync['first_request_received_s']} s) = "
        f"{ratios['full_sync_over_floor']}x the floor ({floor_result['total_s']} s: encode "
        f"{floor_result['encode_s']} s + send {floor_result['send_s']} s): "
        f"{'met' if met['full_sync_within_2x_floor'] else 'NOT met'} (target {TARGET_FLOOR_RATIO:g}x)"
    )
    beats = sync["heartbeats"]
    lines.append(
        f"heartbeats during it: {beats['count']}, p99 {beats.get('p99_ms')} ms, max {beats['max_ms']} ms: "
        f"{'met' if met['heartbeats_within_50ms'] else 'NOT met'} (target {TARGET_HEARTBEAT_MS:g} ms); load "
        f"average {result['load_average_before']} -> {result['load_average_after']}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--topics", type=int, default=2000)
    parser.add_argument("--partitions-per-topic", type=int, default=100)
    parser.add_argument(
        "--changes", type=int, default=100, help="round trips of each kind in each phase of (a)"
    )
    parser.add_argument("--heartbeat-ms", type=float, default=50.0, help="the stand-ins' heartbeat interval")
    parser.add_argument("--serve", nargs=2, metavar=("ZK", "DIR"), help=argparse.SUPPRESS)
    parser.add_argument("--floor", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        sys.exit(serve(args.serve[0], Path(args.serve[1])))
    if args.floor:
        print(json.dumps(floor(Path(args.floor))))
        return
    result = run(args.topics, args.partitions_per_topic, changes=args.changes, heartbeat_ms=args.heartbeat_ms)
    print(json.dumps(result, indent=2))
    print(report(result))


if __name__ == "__main__":
    main()
