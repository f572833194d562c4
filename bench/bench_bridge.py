"""Benchmark: the bridge controller's request latency and throughput against a floor measured in the same run.

    python -m bench.bench_bridge [--requests 1000] [--clients 16] [--in-process] [--profile FILE]

A private embedded ZooKeeper is seeded with a small synthetic Kafka cluster (`bench.generate_cluster`),
and a BridgeController runs over it until DUAL_WRITE, by default in a child process (so the client side
here does not share its GIL). Measured:

- each request's OWN FLOOR, which the p50 <= 2x target is judged against: the records it appends, fsynced,
  then the one multi it needs (the bridge's two guards and the znodes it writes: 9 creates for a
  3-partition CreateTopics, a setData and a notification for a config change), sent with kazoo as the
  bridge's multi is and encoded before the clock starts: the I/O no controller can skip;
- the MINIMAL FLOOR, for reference: one fsynced append to a MetadataLog plus one ZooKeeper multi (check +
  setData), one after the other: less I/O than any request needs;
- the floors are sampled in turns with the two series below (BLOCKS), so load changes during the run fall
  on the floors and the requests alike;
- p50/p99 of one IncrementalAlterConfigs (SET a topic config) and one CreateTopics through the listener,
  one client, sequentially, timed on the wire (request encoded before, response decoded after: the
  client's own Python costs are not the controller's); the same through kio's client for reference;
- config changes/s with `--clients` concurrent clients, each on its own connection (group commit at work).

Prints a JSON result, then the ratios against the targets (p50 <= 2x the request's own floor, with the
ratio to the minimal floor beside it; >= 1,000 changes/s).
`--profile FILE` runs the controller under cProfile (every thread; figures are inflated by it) and prints
where its time goes.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import datetime
import json
import os
import platform
import pstats
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, Self

from kazoo.client import TransactionRequest
from kazoo.handlers.threading import SequentialThreadingHandler
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs.v1.request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kio.schema.types import TopicName
from kio.static.primitive import i8, i16, i32, i32Timedelta
from prometheus_client.parser import text_string_to_metric_families

from bench.generate_cluster import ClusterSpec, GeneratedCluster, generate, load_into_zookeeper
from bridge.api import DriverState
from bridge.config import BridgeConfig
from bridge.controller import BridgeController
from bridge.kafka.client import KafkaConnection
from bridge.kafka.protocol import decode_response, encode_request, frame
from bridge.raft.metadata_log import MetadataLog
from bridge.zk.multi_codec import encode_multi
from migrate.errors import Zk2KraftError
from migrate.kraft import records as rec
from migrate.zk.embedded import EmbeddedZooKeeper
from migrate.zk.kazoo_adapter import encoded_transaction, send_raw
from migrate.zk.live import ZkConnectOptions
from migrate.zk.model import EntityConfig, PartitionState, Topic
from migrate.zk.znodes.configs import encode_entity_config
from migrate.zk.znodes.topics import encode_partition_state, encode_topic

ROOT = Path(__file__).resolve().parent.parent
NODE_ID = 3000
CHROOT = "/kafka"
FLOOR_PATH = "/zk2kraft-bench-floor"
FLOOR_CONFIG = f"{FLOOR_PATH}/configs/floor"  # the topic config znode the floors' config changes write
TOPIC_RESOURCE = 2
SET = 0
TARGET_RATIO = 2.0
TARGET_CHANGES_PER_S = 1000


# ---------------------------------------------------------------- statistics


def percentile(samples: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) by nearest rank, as latency reports usually give it."""
    ordered = sorted(samples)
    rank = max(0, min(len(ordered) - 1, round(q * len(ordered) + 0.5) - 1))
    return ordered[rank]


def latency_summary(seconds: Sequence[float]) -> dict[str, float]:
    """p50/p99/mean in milliseconds."""
    return {
        "count": len(seconds),
        "p50_ms": round(percentile(seconds, 0.50) * 1000, 3),
        "p99_ms": round(percentile(seconds, 0.99) * 1000, 3),
        "mean_ms": round(statistics.fmean(seconds) * 1000, 3),
    }


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


# ---------------------------------------------------------------- the controller side


def start_controller(zk_connect: str, metadata_dir: Path) -> BridgeController:
    """A BridgeController in DUAL_WRITE over `zk_connect` (it sees the brokers of /brokers/ids itself)."""
    config = BridgeConfig.model_validate(
        {"zk_connect": zk_connect, "metadata_dir": metadata_dir, "node_id": NODE_ID, "fsync": True,
         "rehearsal": True}
    )
    controller = BridgeController(config).start()
    if not controller.wait_for_state(DriverState.DUAL_WRITE, timeout=120):
        controller.stop()
        raise Zk2KraftError(f"the bridge controller did not reach DUAL_WRITE: {controller.error}")
    return controller


class ThreadProfiles:
    """cProfile of every thread started after `install()` (cProfile itself only sees its own thread)."""

    def __init__(self) -> None:
        self.profiles: list[cProfile.Profile] = []
        self._lock = threading.Lock()

    def install(self) -> None:
        main = cProfile.Profile()
        self.profiles.append(main)
        threading.setprofile(self._start_in_thread)
        main.enable()

    def _start_in_thread(self, *_args: Any) -> None:
        sys.setprofile(None)
        profile = cProfile.Profile()
        with self._lock:
            self.profiles.append(profile)
        profile.enable()

    def dump(self, path: Path) -> None:
        threading.setprofile(None)  # type: ignore[arg-type]
        self.profiles[0].disable()
        stats = pstats.Stats(self.profiles[0])
        for profile in self.profiles[1:]:
            try:
                stats.add(profile)
            except TypeError:  # a thread that never made a call
                continue
        stats.dump_stats(str(path))


def serve(zk_connect: str, metadata_dir: Path, profile_path: Path | None) -> int:
    """Child process: run the controller, print its ports as one JSON line, stop when stdin closes."""
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    profiles = ThreadProfiles() if profile_path else None
    if profiles is not None:
        profiles.install()
    controller = start_controller(zk_connect, metadata_dir)
    print(
        json.dumps({"listen_port": controller.listen_port, "metrics_port": controller.metrics_port}),
        flush=True,
    )
    sys.stdin.read()
    code = controller.stop()
    if profiles is not None and profile_path is not None:
        profiles.dump(profile_path)
    return code or 0


class ControllerHandle(Protocol):
    listen_port: int
    metrics_port: int
    mode: str

    def stop(self) -> None: ...


@dataclass
class InProcess:
    """The controller on a background thread of this process (shares the GIL with the clients)."""

    controller: BridgeController
    listen_port: int
    metrics_port: int
    mode: str = "in-process (shares the client's GIL)"

    @classmethod
    def start(cls, zk_connect: str, metadata_dir: Path) -> InProcess:
        controller = start_controller(zk_connect, metadata_dir)
        return cls(controller, controller.listen_port, controller.metrics_port)

    def stop(self) -> None:
        self.controller.stop()


@dataclass
class Subprocess:
    """The controller in a child process (`python -m bench.bench_bridge --serve`)."""

    process: subprocess.Popen[str]
    log_path: Path
    listen_port: int
    metrics_port: int
    mode: str = "subprocess"

    @classmethod
    def start(
        cls, zk_connect: str, metadata_dir: Path, profile: Path | None, module: str = "bench.bench_bridge"
    ) -> Self:
        """`python -m MODULE --serve`: the child prints its ports, then serves until its stdin closes."""
        log_path = metadata_dir.parent / "controller.log"
        command = [sys.executable, "-m", module, "--serve", zk_connect, str(metadata_dir)]
        if profile is not None:
            command += ["--profile", str(profile)]
        with open(log_path, "w") as log_file:
            process = subprocess.Popen(
                command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log_file, text=True
            )
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line:
            process.wait(30)
            tail = log_path.read_text()[-3000:]
            raise Zk2KraftError(f"the bridge controller child exited with {process.returncode}:\n{tail}")
        ports = json.loads(line)
        return cls(process, log_path, int(ports["listen_port"]), int(ports["metrics_port"]))

    def status(self, timeout: float = 30.0) -> dict[str, Any]:
        """The child's `/status`."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/status", timeout=timeout) as reply:
            result: dict[str, Any] = json.loads(reply.read())
        return result

    def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(120)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.returncode != 0:
            tail = self.log_path.read_text()[-3000:]
            raise Zk2KraftError(f"the bridge controller child exited with {self.process.returncode}:\n{tail}")


# ---------------------------------------------------------------- the controller's own view (/metrics)

ZK_WRITE_MS = "zk2kraft_zk_write_delta_time_ms"
REQUEST_SECONDS = "zk2kraft_request_latency_seconds"


def metric_samples(metrics_port: int) -> Iterator[Any]:
    """Every sample of the controller's `/metrics` (prometheus_client's parsed samples)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    for family in text_string_to_metric_families(text):
        yield from family.samples


def scrape(metrics_port: int) -> dict[str, float]:
    """Sums and counts of the controller's ZooKeeper-write and per-API request-latency histograms."""
    values: dict[str, float] = {}
    for sample in metric_samples(metrics_port):
        if sample.name in (f"{ZK_WRITE_MS}_sum", f"{ZK_WRITE_MS}_count"):
            values[sample.name] = sample.value
        elif sample.name in (f"{REQUEST_SECONDS}_sum", f"{REQUEST_SECONDS}_count"):
            values[f"{sample.name}:{sample.labels.get('api')}"] = sample.value
    return values


def controller_means(before: dict[str, float], after: dict[str, float], api: str) -> dict[str, float]:
    """Between two scrapes: requests of `api`, their mean ms inside the controller; ZooKeeper writes and
    their mean ms (the driver's apply_ops: the change's znodes, notifications and /migration)."""

    def delta(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    requests = delta(f"{REQUEST_SECONDS}_count:{api}")
    writes = delta(f"{ZK_WRITE_MS}_count")
    return {
        "requests": requests,
        "request_in_controller_mean_ms": round(delta(f"{REQUEST_SECONDS}_sum:{api}") / requests * 1000, 3)
        if requests
        else 0.0,
        "zk_writes": writes,
        "zk_write_mean_ms": round(delta(f"{ZK_WRITE_MS}_sum") / writes, 3) if writes else 0.0,
    }


# ---------------------------------------------------------------- the floor


def seed_cluster(zk_connect: str, chroot: str, topics: int, *, seed: int) -> GeneratedCluster:
    """Load a synthetic Kafka cluster (6 partitions a topic) under `chroot`."""
    admin = ZkConnectOptions(connect=zk_connect).kazoo_client()
    admin.start(timeout=30)
    try:
        admin.ensure_path(chroot)
    finally:
        admin.stop()
        admin.close()
    cluster = generate(ClusterSpec(topics=topics, partitions_per_topic=6, seed=seed))
    seeder = ZkConnectOptions(connect=zk_connect + chroot).kazoo_client()
    seeder.start(timeout=30)
    try:
        load_into_zookeeper(cluster, seeder)
    finally:
        seeder.stop()
        seeder.close()
    return cluster


def user_topics(cluster: GeneratedCluster) -> list[str]:
    return sorted(t for t in cluster.model.topics if not t.startswith("__"))


RecordList = list[tuple[Any, int]]


@dataclass(frozen=True)
class FloorShape:
    """What one floor sample does: append `records(i)` fsynced, then one multi of two guards and `writes`.

    `writes(transaction, i)` adds the request's own ZooKeeper writes after the guards (none: the minimal floor).
    """

    name: str
    records: Callable[[int], RecordList]
    writes: Callable[[TransactionRequest, int], None] | None = None


def _minimal_records(i: int) -> RecordList:
    return [
        (
            rec.ConfigRecord(
                resource_type=TOPIC_RESOURCE,
                resource_name="floor",
                name="retention.ms",
                value=str(3_600_000 + i),
            ),
            0,
        )
    ]


MINIMAL_FLOOR = FloorShape("minimal", _minimal_records)
"""One ConfigRecord, then check + setData of one znode: what any durable, fenced dual write pays at least."""

_REPLICAS = {0: [1, 2, 3], 1: [2, 3, 4], 2: [3, 4, 5]}
_FLOOR_TOPIC_ID = uuid.UUID(int=0x5EED)


def _create_topic_records(i: int) -> RecordList:
    records: RecordList = [(rec.TopicRecord(name=f"ct-{i}", topic_id=_FLOOR_TOPIC_ID), 0)]
    for p, replicas in _REPLICAS.items():
        partition = rec.PartitionRecord(
            partition_id=p, topic_id=_FLOOR_TOPIC_ID, replicas=replicas, isr=replicas, leader=replicas[0]
        )
        records.append((partition, 0))
    return records


def _create_topic_writes(transaction: TransactionRequest, i: int) -> None:
    """The znodes the bridge creates for a 3-partition topic (bridge/zk/migration_client.py), under FLOOR_PATH."""
    name = f"ct-{i}"
    topic = f"{FLOOR_PATH}/topics/{name}"
    transaction.create(topic, encode_topic(Topic(name, _FLOOR_TOPIC_ID, _REPLICAS)))
    transaction.create(
        f"{FLOOR_PATH}/configs/{name}", encode_entity_config(EntityConfig("topics", name, {}))
    )
    transaction.create(f"{topic}/partitions")
    for p, replicas in _REPLICAS.items():
        transaction.create(f"{topic}/partitions/{p}")
        state = PartitionState(leader=replicas[0], leader_epoch=0, isr=replicas, controller_epoch=1)
        transaction.create(f"{topic}/partitions/{p}/state", encode_partition_state(state))


def _config_writes(transaction: TransactionRequest, i: int) -> None:
    """A topic config change as the bridge writes it: the config znode, then the change notification."""
    config = EntityConfig("topics", "floor", {"retention.ms": str(3_600_000 + i)})
    transaction.set_data(FLOOR_CONFIG, encode_entity_config(config))
    note = b'{"version":2,"entity_path":"topics/floor"}'
    transaction.create(f"{FLOOR_PATH}/changes/config_change_", note, sequence=True)


OWN_FLOORS = {
    "incremental_alter_configs": FloorShape("incremental_alter_configs", _minimal_records, _config_writes),
    "create_topics": FloorShape("create_topics", _create_topic_records, _create_topic_writes),
}
"""Each request's own floor: the records it appends and the ZooKeeper multi it needs, done directly."""


class FloorProbe:
    """A floor, one sample at a time: one fsynced MetadataLog append, then one ZooKeeper multi (encoded
    before the clock starts), sequentially.

    The minimal shape guards with check + setData of one znode; a request's own shape guards as the bridge
    does (check an epoch znode, setData a migration znode) and adds the request's writes.
    """

    def __init__(self, zk_connect: str, log_dir: Path, shape: FloorShape = MINIMAL_FLOOR) -> None:
        self.shape = shape
        # kazoo's own handler: the floor is measured as it always was, against bare kazoo.
        self.kazoo = ZkConnectOptions(connect=zk_connect).kazoo_client(handler=SequentialThreadingHandler())
        self.kazoo.start(timeout=30)
        self.log = MetadataLog.open(log_dir, node_id=NODE_ID, cluster_id="bench-floor")
        self.guard = FLOOR_PATH if shape.writes is None else f"{FLOOR_PATH}/{shape.name}-migration"
        self.epoch = f"{FLOOR_PATH}/epoch"
        for path in (self.guard, self.epoch, f"{FLOOR_PATH}/topics", f"{FLOOR_PATH}/changes", FLOOR_CONFIG):
            self.kazoo.ensure_path(path)
        self.version = self.kazoo.exists(self.guard).version
        self.epoch_version = self.kazoo.exists(self.epoch).version
        self.taken = 0
        self.appends: list[float] = []
        self.multis: list[float] = []
        self.sums: list[float] = []

    def sample(self, count: int, *, keep: bool = True) -> None:
        """Take `count` samples (`keep=False`: a warm-up, not counted)."""
        for _ in range(count):
            i = self.taken  # warm-ups included: every sample creates its own znodes
            self.taken += 1
            records = self.shape.records(i)
            multi = self._multi(i)
            started = time.perf_counter()
            self.log.append(records).durable.result()
            appended = time.perf_counter()
            reply = self.kazoo.handler.async_result()
            send_raw(self.kazoo, multi, reply)
            results = reply.get()
            done = time.perf_counter()
            if any(isinstance(r, Exception) for r in results):
                raise Zk2KraftError(f"{self.shape.name} floor multi under {FLOOR_PATH} failed: {results}")
            self.version += 1
            if not keep:
                continue
            self.appends.append(appended - started)
            self.multis.append(done - appended)
            self.sums.append(done - started)

    def _multi(self, i: int) -> Any:
        """Sample `i`'s multi, encoded before the clock starts by the bridge's own codec (the bridge encodes
        its multi while the log fsyncs): the floor holds only I/O, none of a client's encoding."""
        transaction = self.kazoo.transaction()
        if self.shape.writes is None:
            transaction.check(self.guard, self.version)
        else:
            transaction.check(self.epoch, self.epoch_version)
        transaction.set_data(self.guard, f'{{"offset":{i}}}'.encode(), self.version)
        if self.shape.writes is not None:
            self.shape.writes(transaction, i)
        return encoded_transaction(encode_multi(transaction.operations))

    def summary(self) -> dict[str, Any]:
        return {
            "fsynced_append": latency_summary(self.appends),
            "zk_multi": latency_summary(self.multis),
            "sum": latency_summary(self.sums),
        }

    def close(self) -> None:
        self.log.close()
        self.kazoo.stop()
        self.kazoo.close()


def measure_zk_patterns(zk_connect: str, count: int, batch: int = 16) -> dict[str, Any]:
    """ZooKeeper time per config change as the bridge groups its writes (bridge/zk/migration_client.py), bare kazoo.

    One change alone (a sequential request): one fenced multi — check /controller_epoch, setData
    /migration, setData the config znode, the sequential notification create. `batch` changes written
    together (concurrent requests merged by the writer thread): the same requests of all of them in ONE
    multi with one guard and one /migration update. Private znodes under FLOOR_PATH.
    """
    kazoo = ZkConnectOptions(connect=zk_connect).kazoo_client(handler=SequentialThreadingHandler())
    kazoo.start(timeout=30)
    epoch, migration = f"{FLOOR_PATH}/epoch", f"{FLOOR_PATH}/migration"
    try:
        for path in (epoch, migration, FLOOR_CONFIG, f"{FLOOR_PATH}/changes"):
            kazoo.ensure_path(path)
        epoch_version = kazoo.exists(epoch).version
        version = kazoo.exists(migration).version

        def write(values: range) -> None:
            nonlocal version
            transaction = kazoo.transaction()
            transaction.check(epoch, epoch_version)
            transaction.set_data(migration, b"m", version)
            for i in values:
                _config_writes(transaction, i)
            results = transaction.commit()
            if any(isinstance(r, Exception) for r in results):
                raise Zk2KraftError(f"ZooKeeper pattern multi under {FLOOR_PATH} failed: {results}")
            version += 1

        alone: list[float] = []
        together: list[float] = []
        for i in range(count):
            started = time.perf_counter()
            write(range(i, i + 1))
            alone.append(time.perf_counter() - started)
        for i in range(max(1, count // batch)):
            started = time.perf_counter()
            write(range(i * batch, (i + 1) * batch))
            together.append((time.perf_counter() - started) / batch)
        return {
            "one_change_one_multi": latency_summary(alone),
            f"per_change_{batch}_in_one_multi": latency_summary(together),
        }
    finally:
        kazoo.stop()
        kazoo.close()


# ---------------------------------------------------------------- the requests


def set_topic_config(topic: str, value: int) -> IncrementalAlterConfigsRequest:
    """IncrementalAlterConfigs v1: SET retention.ms of `topic` (a new value each time, so it is a change)."""
    return IncrementalAlterConfigsRequest(
        resources=(
            AlterConfigsResource(
                resource_type=i8(TOPIC_RESOURCE),
                resource_name=topic,
                configs=(AlterableConfig(name="retention.ms", config_operation=i8(SET), value=str(value)),),
            ),
        ),
        validate_only=False,
    )


def create_topic(name: str, partitions: int, replication_factor: int) -> CreateTopicsRequest:
    return CreateTopicsRequest(
        topics=(
            CreatableTopic(
                name=TopicName(name),
                num_partitions=i32(partitions),
                replication_factor=i16(replication_factor),
                assignments=(),
                configs=(),
            ),
        ),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
        validate_only=False,
    )


def check_ok(response: Any, what: str) -> None:
    items = getattr(response, "responses", None) or getattr(response, "topics", None) or ()
    for item in items:
        if item.error_code != ErrorCode.none:
            raise Zk2KraftError(f"{what}: {item.error_code.name} {item.error_message}")


class WireClient:
    """One connection; each timer covers only the bytes on the wire, from sending an encoded request to
    having its whole response frame. Requests are encoded before and responses decoded (and checked)
    after, so the client's own kio costs are not counted as the server's latency."""

    def __init__(self, port: int, client_id: str = "bench") -> None:
        self.client_id = client_id
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = self.sock.makefile("rb")
        self.sent = 0

    def exchange(self, requests: Sequence[Any], what: str) -> list[float]:
        """Send `requests` one after the other; the latency of each."""
        first = self.sent
        self.sent += len(requests)
        payloads = [
            frame(encode_request(request, first + i, self.client_id)) for i, request in enumerate(requests)
        ]
        replies: list[bytes] = []
        latencies: list[float] = []
        for payload in payloads:
            started = time.perf_counter()
            self.sock.sendall(payload)
            prefix = self.reader.read(4)
            size = int.from_bytes(prefix, "big")
            reply = self.reader.read(size)
            latencies.append(time.perf_counter() - started)
            if len(prefix) != 4 or len(reply) != size:
                raise Zk2KraftError(f"{what}: the controller closed the connection before answering in full")
            replies.append(reply)
        for i, (request, reply) in enumerate(zip(requests, replies, strict=True)):
            api_key, version = int(request.__api_key__), int(request.__version__)
            response_id, response = decode_response(reply, api_key, version, f"{what} response")
            if response_id != first + i:
                raise Zk2KraftError(f"{what}: correlation id {response_id}, expected {first + i}")
            check_ok(response, what)
        return latencies

    def close(self) -> None:
        self.reader.close()
        self.sock.close()


async def timed_requests(
    port: int, requests: Sequence[Any], what: str, client_id: str = "bench"
) -> list[float]:
    """Send `requests` one after the other on one connection; the latency of each."""
    connection = await KafkaConnection.open("127.0.0.1", port, client_id=client_id)
    latencies: list[float] = []
    async with connection:
        for request in requests:
            started = time.perf_counter()
            response = await connection.send(request)
            latencies.append(time.perf_counter() - started)
            check_ok(response, what)
    return latencies


async def throughput(port: int, topics: Sequence[str], clients: int, per_client: int) -> dict[str, Any]:
    """`clients` connections each sending `per_client` config changes back to back; changes/s overall."""
    connections = [
        await KafkaConnection.open("127.0.0.1", port, client_id=f"bench-{c}") for c in range(clients)
    ]
    latencies: list[float] = []

    async def client(c: int) -> None:
        topic = topics[c % len(topics)]
        for i in range(per_client):
            request = set_topic_config(topic, 7_200_000 + c * 1_000_000 + i)
            started = time.perf_counter()
            response = await connections[c].send(request)
            latencies.append(time.perf_counter() - started)
            check_ok(response, f"IncrementalAlterConfigs of {topic}")

    try:
        started = time.perf_counter()
        await asyncio.gather(*(client(c) for c in range(clients)))
        elapsed = time.perf_counter() - started
    finally:
        for connection in connections:
            await connection.close()
    return {
        "clients": clients,
        "changes": clients * per_client,
        "seconds": round(elapsed, 3),
        "changes_per_s": round(clients * per_client / elapsed),
        "latency_under_load": latency_summary(latencies),
    }


BLOCKS = 10
"""The floor and the two sequential series are taken in turns, a tenth of each per block, so a change of the
machine's load during the run falls on all three alike."""


def measure_requests(
    port: int,
    metrics_port: int,
    topics: Sequence[str],
    requests: int,
    clients: int,
    floors: dict[str, FloorProbe],
    floor_samples: int,
) -> dict[str, Any]:
    """Sequential latencies (ApiVersions as the listener's own cost; IncrementalAlterConfigs, CreateTopics and
    the floors, keyed by shape name, interleaved in BLOCKS) and the concurrent throughput; a short warm-up
    precedes each."""
    topic = topics[0]
    warm = max(5, min(50, requests // 10))
    creates = max(5, requests // 4)
    run_id = uuid.uuid4().hex[:6]
    iac = "IncrementalAlterConfigs"

    async def go() -> dict[str, Any]:
        wire = WireClient(port)
        try:
            api_versions = [
                ApiVersionsRequest(client_software_name="bench", client_software_version="1")
            ] * requests
            wire.exchange(api_versions[:warm], "ApiVersions")
            listener = wire.exchange(api_versions, "ApiVersions")
            wire.exchange([set_topic_config(topic, 1_000 + i) for i in range(warm)], "warm-up")
            wire.exchange([create_topic(f"warm-{run_id}-{i}", 3, 3) for i in range(warm)], "warm-up")
            for floor in floors.values():
                floor.sample(warm, keep=False)
            before = scrape(metrics_port)
            configs: list[float] = []
            created: list[float] = []
            for block in range(BLOCKS):
                for floor in floors.values():
                    floor.sample(_share(floor_samples, block))
                n = _share(requests, block)
                values = range(3_600_000 + len(configs), 3_600_000 + len(configs) + n)
                configs += wire.exchange([set_topic_config(topic, v) for v in values], iac)
                names = [f"bench-{run_id}-{len(created) + i}" for i in range(_share(creates, block))]
                created += wire.exchange([create_topic(name, 3, 3) for name in names], "CreateTopics")
            after = scrape(metrics_port)
        finally:
            wire.close()
        # The same through kio's client (its encode and decode inside the timer), for reference.
        configs_kio = await timed_requests(
            port, [set_topic_config(topic, 5_400_000 + i) for i in range(requests // 4)], iac
        )
        created_kio = await timed_requests(
            port, [create_topic(f"kio-{run_id}-{i}", 3, 3) for i in range(creates // 2)], "CreateTopics"
        )
        before_load = scrape(metrics_port)
        loaded = await throughput(port, topics, clients, max(1, requests // clients))
        loaded_inside = controller_means(before_load, scrape(metrics_port), iac)
        return {
            "floor": floors[MINIMAL_FLOOR.name].summary(),
            "own_floors": {
                name: floor.summary() for name, floor in floors.items() if name != MINIMAL_FLOOR.name
            },
            "api_versions": latency_summary(listener),
            "incremental_alter_configs": {
                **latency_summary(configs),
                "with_kio_client": latency_summary(configs_kio),
                "controller": controller_means(before, after, iac),
            },
            "create_topics": {
                **latency_summary(created),
                "with_kio_client": latency_summary(created_kio),
                "partitions": 3,
                "replication_factor": 3,
                "controller": controller_means(before, after, "CreateTopics"),
            },
            "throughput": {**loaded, "controller": loaded_inside},
        }

    return asyncio.run(go())


def _share(total: int, block: int) -> int:
    """Block `block`'s part of `total` samples split over BLOCKS (the first ones take the remainder)."""
    return total // BLOCKS + (1 if block < total % BLOCKS else 0)


# ---------------------------------------------------------------- the whole run


def run(
    requests: int,
    clients: int,
    *,
    in_process: bool = False,
    profile: Path | None = None,
    zk_connect: str | None = None,
    topics: int = 20,
    force_sync: bool = False,
) -> dict[str, Any]:
    """The whole benchmark; `zk_connect` (with a chroot) reuses a running ZooKeeper instead of starting one."""
    load_before = load_average()
    with tempfile.TemporaryDirectory(prefix="bench-bridge-") as tmp_text:
        tmp = Path(tmp_text)
        zookeeper = None
        if zk_connect is None:
            config = {"forceSync": "yes"} if force_sync else None
            zookeeper = EmbeddedZooKeeper(tmp / "zk", config=config).start()
            zk_connect = zookeeper.connect_string
        try:
            result = _run_against(zk_connect, tmp, requests, clients, in_process, profile, topics)
        finally:
            if zookeeper is not None:
                zookeeper.close()
    result["zookeeper_force_sync"] = force_sync if zookeeper is not None else "external"
    result["load_average_before"] = load_before
    result["load_average_after"] = load_average()
    return result


def _run_against(
    zk_connect: str,
    tmp: Path,
    requests: int,
    clients: int,
    in_process: bool,
    profile: Path | None,
    topics: int,
) -> dict[str, Any]:
    cluster = seed_cluster(zk_connect, CHROOT, topics, seed=4)
    topic_names = user_topics(cluster)
    patterns = measure_zk_patterns(zk_connect, max(20, min(requests, 300)))
    metadata_dir = tmp / "controller" / "meta"
    metadata_dir.parent.mkdir()
    handle: ControllerHandle
    if in_process:
        handle = InProcess.start(zk_connect + CHROOT, metadata_dir)
    else:
        handle = Subprocess.start(zk_connect + CHROOT, metadata_dir, profile)
    floors = {
        shape.name: FloorProbe(zk_connect, tmp / f"floor-log-{shape.name}", shape)
        for shape in (MINIMAL_FLOOR, *OWN_FLOORS.values())
    }
    try:
        measured = measure_requests(
            handle.listen_port,
            handle.metrics_port,
            topic_names,
            requests,
            clients,
            floors,
            max(50, min(requests, 500)),
        )
    finally:
        for floor in floors.values():
            floor.close()
        handle.stop()
    floor_p50 = measured["floor"]["sum"]["p50_ms"]
    own = {name: summary["sum"]["p50_ms"] for name, summary in measured["own_floors"].items()}
    configs, created, loaded = (
        measured["incremental_alter_configs"],
        measured["create_topics"],
        measured["throughput"],
    )
    return {
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "controller": handle.mode,
        "cluster": {"topics": len(cluster.model.topics), "brokers": len(cluster.model.brokers)},
        "zk_write_patterns": patterns,
        **measured,
        "ratios": {
            "incremental_alter_configs_p50_over_floor": round(configs["p50_ms"] / floor_p50, 2),
            "create_topics_p50_over_floor": round(created["p50_ms"] / floor_p50, 2),
            "incremental_alter_configs_p50_over_own_floor": round(
                configs["p50_ms"] / own["incremental_alter_configs"], 2
            ),
            "create_topics_p50_over_own_floor": round(created["p50_ms"] / own["create_topics"], 2),
            "changes_per_s": loaded["changes_per_s"],
        },
    }


def top_functions(profile: Path, limit: int = 25) -> str:
    """The profile's most expensive functions by own time, as pstats prints them."""
    import io

    out = io.StringIO()
    stats = pstats.Stats(str(profile), stream=out)
    stats.sort_stats("tottime").print_stats(limit)
    out.write("\n--- by cumulative time ---\n")
    stats.sort_stats("cumulative").print_stats(limit)
    return out.getvalue()


def report(result: dict[str, Any]) -> str:
    """The ratios against the targets, one line each."""
    floor, ratios = result["floor"]["sum"], result["ratios"]
    configs, created = result["incremental_alter_configs"], result["create_topics"]
    loaded = result["throughput"]

    def verdict(ok: bool) -> str:
        return "met" if ok else "NOT met"

    patterns = result["zk_write_patterns"]
    own = result["own_floors"]

    def latency(kind: str, label: str, request: dict[str, Any]) -> str:
        minimal, mine = ratios[f"{kind}_p50_over_floor"], ratios[f"{kind}_p50_over_own_floor"]
        return (
            f"{label}: p50 {request['p50_ms']} ms, p99 {request['p99_ms']} ms = {mine}x its own floor of "
            f"{own[kind]['sum']['p50_ms']} ms (target <= {TARGET_RATIO}x: {verdict(mine <= TARGET_RATIO)}); "
            f"{minimal}x the minimal floor; with kio's client p50 {request['with_kio_client']['p50_ms']} ms"
        )

    return "\n".join(
        [
            f"minimal floor (fsynced append + ZooKeeper multi): p50 {floor['p50_ms']} ms, p99 {floor['p99_ms']} ms "
            "(one ConfigRecord, check + setData: below any request's own floor)",
            latency("incremental_alter_configs", "IncrementalAlterConfigs", configs),
            latency("create_topics", "CreateTopics", created),
            f"ZooKeeper writes of one config change: alone in one multi p50 "
            f"{patterns['one_change_one_multi']['p50_ms']} ms; 16 changes in one multi p50 "
            f"{patterns['per_change_16_in_one_multi']['p50_ms']} ms per change",
            f"{loaded['clients']} clients: {loaded['changes_per_s']:,} config changes/s "
            f"(target >= {TARGET_CHANGES_PER_S:,}: {verdict(loaded['changes_per_s'] >= TARGET_CHANGES_PER_S)})",
            f"controller: {result['controller']}; load average {result['load_average_before']} -> "
            f"{result['load_average_after']}",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--requests",
        type=int,
        default=1000,
        help="sequential requests per kind, and the total config changes of the concurrent run",
    )
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--topics", type=int, default=20, help="topics of the seeded cluster")
    parser.add_argument("--in-process", action="store_true", help="run the controller on a thread here")
    parser.add_argument(
        "--zk-force-sync",
        action="store_true",
        help="ZooKeeper fsyncs its transaction log "
        "(production setting; the embedded default is forceSync=no)",
    )
    parser.add_argument(
        "--profile", type=Path, metavar="FILE", help="cProfile the controller child into FILE"
    )
    parser.add_argument("--serve", nargs=2, metavar=("ZK", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        sys.exit(serve(args.serve[0], Path(args.serve[1]), args.profile))
    if args.profile is not None and args.in_process:
        parser.error("--profile profiles the controller child; drop --in-process")
    result = run(
        args.requests,
        args.clients,
        in_process=args.in_process,
        profile=args.profile.resolve() if args.profile else None,
        topics=args.topics,
        force_sync=args.zk_force_sync,
    )
    print(json.dumps(result, indent=2))
    print(report(result))
    if args.profile is not None:
        print(top_functions(args.profile))


if __name__ == "__main__":
    main()
