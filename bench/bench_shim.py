"""Benchmark: what the redirect shim adds to a metadata change, against a direct Envelope in the same run.

    python -m bench.bench_shim [--requests 500] [--connections 1000] [--topics 20]

A private embedded ZooKeeper is seeded with a small synthetic Kafka cluster (`bench.generate_cluster`); the
bridge controller (`python -m bench.bench_bridge --serve`, fsynced log) and `zk2kraft shim run` each run in
their own process, the clients here. Measured, one sequential client each, interleaved in blocks so machine
load falls on all series alike:

- BASELINE: IncrementalAlterConfigs (SET retention.ms of a topic) inside an EnvelopeRequest sent straight to
  the controller on one kept-open connection: what a bridge-release broker's forwarding costs;
- the same request as a plain kio request to the shim, which forwards it in an envelope and answers once its
  metadata follower has caught up (the shim's own overhead: this minus the baseline);
- confluent-kafka's AdminClient (librdkafka) `incremental_alter_configs` through the shim, the acceptance
  client (its own queueing included);
- ApiVersions to each (answered by the listener itself): the cost of one hop with no work behind it;
- capacity: `--connections` connections opened to the shim at once, each sending ApiVersions; all must be
  answered, and a Metadata request must still be answered while they are open.

Prints a JSON result, then the ratios against the target (the shim adds <= 1 ms at p50).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import resource
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest

from bench.bench_bridge import (
    Subprocess,
    check_ok,
    latency_summary,
    load_average,
    seed_cluster,
    set_topic_config,
    user_topics,
)
from bridge.kafka.client import KafkaConnection, build_envelope
from bridge.kafka.protocol import ANONYMOUS, decode_response, encode_request, frame, read_frame
from migrate.errors import Zk2KraftError
from migrate.zk.embedded import EmbeddedZooKeeper

ROOT = Path(__file__).resolve().parent.parent
ZK2KRAFT = Path(sys.executable).parent / "zk2kraft"
TARGET_ADDED_P50_MS: Final = 1.0
BLOCKS: Final = 10
SHIM_START_TIMEOUT_S: Final = 60.0
INCREMENTAL_ALTER_CONFIGS: Final = 44


# ---------------------------------------------------------------- the shim process


def free_port() -> int:
    """A TCP port nothing listens on right now (bound to port 0, read, released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class ShimProcess:
    """`zk2kraft shim run` in a child process; its port is read from its `event=shim_listening` log line."""

    process: subprocess.Popen[bytes]
    log_path: Path
    port: int

    @classmethod
    def start(cls, controller_port: int, log_path: Path) -> ShimProcess:
        # `shim run --listen` refuses port 0 today, so take a free port the usual way.
        command = [str(ZK2KRAFT), "shim", "run", "--listen", f"127.0.0.1:{free_port()}", "--controller",
                   f"127.0.0.1:{controller_port}"]  # fmt: skip
        with open(log_path, "w") as log_file:
            process = subprocess.Popen(
                command, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file
            )
        deadline = time.monotonic() + SHIM_START_TIMEOUT_S
        while time.monotonic() < deadline:
            found = re.search(r"event=shim_listening listen=\S+:(\d+)", log_path.read_text())
            if found:
                return cls(process, log_path, int(found.group(1)))
            if process.poll() is not None:
                break
            time.sleep(0.05)
        process.kill()
        process.wait()
        raise Zk2KraftError(f"the shim did not start listening:\n{log_path.read_text()[-3000:]}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            code = self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise Zk2KraftError("the shim did not stop within 60 s of SIGTERM") from None
        if code != 0:
            raise Zk2KraftError(f"the shim exited with {code}:\n{self.log_path.read_text()[-3000:]}")


# ---------------------------------------------------------------- the three clients


async def envelope_change(connection: KafkaConnection, topic: str, value: int, correlation_id: int) -> float:
    """One IncrementalAlterConfigs inside an EnvelopeRequest straight to the controller; its latency."""
    inner = set_topic_config(topic, value)
    data = encode_request(inner, correlation_id, "bench-envelope")
    started = time.perf_counter()
    response = await connection.send(build_envelope(data, ANONYMOUS, "127.0.0.1"))
    elapsed = time.perf_counter() - started
    if response.error_code != ErrorCode.none or response.response_data is None:
        raise Zk2KraftError(f"envelope to the controller: {response.error_code.name}")
    _, body = decode_response(response.response_data, INCREMENTAL_ALTER_CONFIGS, 1, "envelope response")
    check_ok(body, f"enveloped IncrementalAlterConfigs of {topic}")
    return elapsed


async def shim_change(connection: KafkaConnection, topic: str, value: int) -> float:
    """The same request, plain, to the shim; its latency."""
    started = time.perf_counter()
    response = await connection.send(set_topic_config(topic, value))
    elapsed = time.perf_counter() - started
    check_ok(response, f"IncrementalAlterConfigs of {topic} through the shim")
    return elapsed


async def api_versions(connection: KafkaConnection) -> float:
    """One ApiVersions (answered by the listener itself): the cost of a hop with no work behind it."""
    request = ApiVersionsRequest(client_software_name="bench", client_software_version="1")
    started = time.perf_counter()
    response = await connection.send(request)
    elapsed = time.perf_counter() - started
    if response.error_code != ErrorCode.none:
        raise Zk2KraftError(f"ApiVersions to {connection.address}: {response.error_code.name}")
    return elapsed


def admin_change(admin: AdminClient, topic: str, value: int) -> float:
    """confluent-kafka's incremental_alter_configs through the shim; its latency."""
    entry = ConfigEntry("retention.ms", str(value), incremental_operation=AlterConfigOpType.SET)
    resource_ = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
    started = time.perf_counter()
    for future in admin.incremental_alter_configs([resource_]).values():
        future.result(timeout=60)
    return time.perf_counter() - started


def measure_latencies(controller_port: int, shim_port: int, topic: str, requests: int) -> dict[str, Any]:
    """The three series, interleaved in BLOCKS blocks after a warm-up of each."""
    loop = asyncio.new_event_loop()
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{shim_port}", "socket.timeout.ms": 30000})
    series: dict[str, list[float]] = {
        "envelope": [], "shim": [], "admin": [], "api_versions_controller": [], "api_versions_shim": []
    }  # fmt: skip
    value = iter(range(3_600_000, 3_600_000 + 10 * requests + 1000))
    try:
        direct = loop.run_until_complete(
            KafkaConnection.open("127.0.0.1", controller_port, client_id="bench")
        )
        via_shim = loop.run_until_complete(KafkaConnection.open("127.0.0.1", shim_port, client_id="bench"))
        ids = iter(range(1, 10**9))

        def block(count: int, keep: bool) -> None:
            for _ in range(count):
                e = loop.run_until_complete(envelope_change(direct, topic, next(value), next(ids)))
                s = loop.run_until_complete(shim_change(via_shim, topic, next(value)))
                a = admin_change(admin, topic, next(value))
                vc = loop.run_until_complete(api_versions(direct))
                vs = loop.run_until_complete(api_versions(via_shim))
                if keep:
                    for name, sample in (
                        ("envelope", e), ("shim", s), ("admin", a),
                        ("api_versions_controller", vc), ("api_versions_shim", vs),
                    ):  # fmt: skip
                        series[name].append(sample)

        block(max(3, min(50, requests // 10)), keep=False)
        per_block = max(1, requests // BLOCKS)
        for _ in range(BLOCKS):
            block(per_block, keep=True)
        loop.run_until_complete(direct.close())
        loop.run_until_complete(via_shim.close())
    finally:
        loop.close()
    return {name: latency_summary(samples) for name, samples in series.items()}


# ---------------------------------------------------------------- capacity


async def _api_versions_on(port: int, index: int) -> float:
    """Open one connection, send ApiVersions v3, wait for the answer; its latency. The connection stays open."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    request = ApiVersionsRequest(client_software_name="bench-capacity", client_software_version="1")
    started = time.perf_counter()
    writer.write(frame(encode_request(request, index, f"capacity-{index}")))
    await writer.drain()
    reply = await read_frame(reader, 1 << 20, f"ApiVersions answer on connection {index}")
    elapsed = time.perf_counter() - started
    if reply is None:
        raise Zk2KraftError(f"connection {index}: the shim closed it without answering")
    _, response = decode_response(reply, 18, 3, f"ApiVersions answer on connection {index}")
    if response.error_code != ErrorCode.none:
        raise Zk2KraftError(f"connection {index}: ApiVersions {response.error_code.name}")
    _open_writers.append(writer)
    return elapsed


_open_writers: list[asyncio.StreamWriter] = []


def measure_capacity(shim_port: int, connections: int) -> dict[str, Any]:
    """`connections` concurrent connections, each answered; then a Metadata request while all are open."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = min(hard, max(soft, connections + 256))
    resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))

    async def go() -> dict[str, Any]:
        started = time.perf_counter()
        results = await asyncio.gather(
            *(_api_versions_on(shim_port, i) for i in range(connections)), return_exceptions=True
        )
        elapsed = time.perf_counter() - started
        latencies = [r for r in results if isinstance(r, float)]
        errors = sorted({f"{type(r).__name__}: {r}" for r in results if isinstance(r, BaseException)})
        metadata_ok = False
        connection = await KafkaConnection.open("127.0.0.1", shim_port, client_id="bench-capacity")
        async with connection:
            response = await connection.send(
                MetadataRequest(
                    topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
                )
            )
            metadata_ok = len(response.topics) > 0
        for writer in _open_writers:
            writer.close()
        _open_writers.clear()
        return {
            "connections": connections,
            "answered": len(latencies),
            "errors": errors[:5],
            "seconds_to_answer_all": round(elapsed, 3),
            "api_versions": latency_summary(latencies) if latencies else None,
            "metadata_answered_while_open": metadata_ok,
        }

    return asyncio.run(go())


# ---------------------------------------------------------------- the whole run


def run(
    requests: int, connections: int, *, zk_connect: str | None = None, topics: int = 20
) -> dict[str, Any]:
    """The whole benchmark; `zk_connect` reuses a running ZooKeeper (a fresh chroot) instead of starting one."""
    load_before = load_average()
    chroot = f"/kafka-shim-{uuid.uuid4().hex[:6]}"
    with tempfile.TemporaryDirectory(prefix="bench-shim-") as tmp_text:
        tmp = Path(tmp_text)
        zookeeper = None
        if zk_connect is None:
            zookeeper = EmbeddedZooKeeper(tmp / "zk").start()
            zk_connect = zookeeper.connect_string
        try:
            topic_names = user_topics(seed_cluster(zk_connect, chroot, topics, seed=5))
            metadata_dir = tmp / "controller" / "meta"
            metadata_dir.parent.mkdir()
            controller = Subprocess.start(zk_connect + chroot, metadata_dir, None)
            try:
                shim = ShimProcess.start(controller.listen_port, tmp / "shim.log")
                try:
                    latencies = measure_latencies(controller.listen_port, shim.port, topic_names[0], requests)
                    capacity = measure_capacity(shim.port, connections)
                finally:
                    shim.stop()
            finally:
                controller.stop()
        finally:
            if zookeeper is not None:
                zookeeper.close()
    envelope, via_shim, admin = latencies["envelope"], latencies["shim"], latencies["admin"]
    return {
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "processes": "controller and shim each in their own process; clients here",
        "controller_log_fsync": True,
        "topic": topic_names[0],
        "envelope_to_controller": envelope,
        "kio_through_shim": via_shim,
        "admin_client_through_shim": admin,
        "api_versions_to_controller": latencies["api_versions_controller"],
        "api_versions_to_shim": latencies["api_versions_shim"],
        "capacity": capacity,
        "ratios": {
            "shim_added_p50_ms": round(via_shim["p50_ms"] - envelope["p50_ms"], 3),
            "shim_added_p99_ms": round(via_shim["p99_ms"] - envelope["p99_ms"], 3),
            "admin_client_added_p50_ms": round(admin["p50_ms"] - envelope["p50_ms"], 3),
            "shim_p50_over_envelope": round(via_shim["p50_ms"] / envelope["p50_ms"], 2),
        },
        "load_average_before": load_before,
        "load_average_after": load_average(),
    }


def report(result: dict[str, Any]) -> str:
    """The figures against the target, one line each."""
    envelope, via_shim, admin = (
        result["envelope_to_controller"], result["kio_through_shim"], result["admin_client_through_shim"]
    )  # fmt: skip
    ratios, capacity = result["ratios"], result["capacity"]
    added = ratios["shim_added_p50_ms"]
    verdict = "met" if added <= TARGET_ADDED_P50_MS else "NOT met"

    def line(name: str, s: dict[str, Any]) -> str:
        return f"{name}: p50 {s['p50_ms']} ms, p99 {s['p99_ms']} ms ({s['count']} changes)"

    return "\n".join(
        [
            line("Envelope straight to the controller", envelope),
            line("kio request through the shim", via_shim),
            line("AdminClient through the shim", admin),
            f"the shim adds {added} ms at p50 (target <= {TARGET_ADDED_P50_MS} ms: {verdict}), "
            f"{ratios['shim_added_p99_ms']} ms at p99; AdminClient adds {ratios['admin_client_added_p50_ms']} ms "
            "at p50 over the envelope",
            f"ApiVersions (no work behind it): p50 {result['api_versions_to_controller']['p50_ms']} ms to the "
            f"controller, {result['api_versions_to_shim']['p50_ms']} ms to the shim",
            f"capacity: {capacity['answered']}/{capacity['connections']} concurrent connections answered in "
            f"{capacity['seconds_to_answer_all']} s; Metadata answered while open: "
            f"{capacity['metadata_answered_while_open']}",
            f"load average {result['load_average_before']} -> {result['load_average_after']}",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=500, help="measured changes per series")
    parser.add_argument("--connections", type=int, default=1000, help="concurrent connections to the shim")
    parser.add_argument("--topics", type=int, default=20, help="topics of the seeded cluster")
    args = parser.parse_args(argv)
    result = run(args.requests, args.connections, topics=args.topics)
    print(json.dumps(result, indent=2))
    print(report(result))


if __name__ == "__main__":
    main()
