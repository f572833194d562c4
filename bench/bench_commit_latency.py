"""Benchmark: the commit latency of one admin change on a quorum of three bridges against one bridge alone, on
the same machine in the same run.

    python -m bench.bench_commit_latency [--requests 1000]

One private embedded ZooKeeper holds the same small generated cluster (`tests.support.bridge_process`'s, 4
topics) in two chroots. One `zk2kraft bridge run --rehearsal` subprocess (a quorum of itself, the baseline)
serves one; three `--voters` subprocesses serve the other. Once both dual-write and the followers have caught
up, one client per target sends IncrementalAlterConfigs (SET retention.ms of a topic, a new value each time)
one after the other, timed on the wire (encoded before, decoded after: `bench_bridge.WireClient`). The two
series are taken in turns, a tenth of each per block, so a change of the machine's load falls on both alike.
The quorum leader's own `commit-latency` histogram (append to commit by a majority) is read from /metrics.

Prints a JSON result, then p50/p99 of both and the p50 ratio (target: three voters <= 1.5x one bridge).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from bench.bench_bridge import WireClient, latency_summary, load_average, set_topic_config
from bench.quorum_processes import quorum, single, stop_all, wait_caught_up, wait_for_leader
from migrate.zk.embedded import EmbeddedZooKeeper
from tests.support.bridge_process import SMALL_CLUSTER, BridgeProcess, seeded_chroot

TARGET_RATIO = 1.5
BLOCKS = 10
WARM_UP = 20
COMMIT_LATENCY = "zk2kraft_raft_commit_latency_ms"


def commit_latency_metric(bridge: BridgeProcess) -> dict[str, float]:
    """The bridge's Raft commit-latency histogram: count and mean (ms)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{bridge.metrics_port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    found = {"count": 0.0, "sum": 0.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == f"{COMMIT_LATENCY}_count":
                found["count"] = sample.value
            elif sample.name == f"{COMMIT_LATENCY}_sum":
                found["sum"] = sample.value
    return found


def series(client: WireClient, topic: str, first_value: int, count: int) -> list[float]:
    requests = [set_topic_config(topic, first_value + i) for i in range(count)]
    return client.exchange(requests, f"IncrementalAlterConfigs of {topic}")


def run(requests: int) -> dict[str, Any]:
    load_before = load_average()
    topic = sorted(t for t in _small_cluster_topics() if not t.startswith("__"))[0]
    with tempfile.TemporaryDirectory(prefix="bench-commit-latency-") as tmp_text:
        tmp = Path(tmp_text)
        with EmbeddedZooKeeper(tmp / "zk") as zookeeper:
            alone = single(seeded_chroot(zookeeper.connect_string, "/single"), tmp)
            voters = quorum(seeded_chroot(zookeeper.connect_string, "/quorum"), tmp / "quorum")
            try:
                for bridge in (alone, *voters):
                    bridge.start()
                wait_for_leader([alone], 300)
                leader = wait_for_leader(voters, 300)
                wait_caught_up(leader, 120)
                clients = {
                    "one_bridge": WireClient(alone.listen_port),
                    "three_voters": WireClient(leader.listen_port),
                }
                samples: dict[str, list[float]] = {name: [] for name in clients}
                value = 3_600_000
                for client in clients.values():
                    series(client, topic, value, WARM_UP)
                    value += WARM_UP
                before = commit_latency_metric(leader)
                for block in range(BLOCKS):
                    share = requests // BLOCKS + (1 if block < requests % BLOCKS else 0)
                    for name, client in clients.items():
                        samples[name] += series(client, topic, value, share)
                        value += share
                after = commit_latency_metric(leader)
                for client in clients.values():
                    client.close()
            finally:
                stop_all([alone, *voters])
    one, three = latency_summary(samples["one_bridge"]), latency_summary(samples["three_voters"])
    commits = after["count"] - before["count"]
    return {
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "requests_each": requests,
        "one_bridge": one,
        "three_voters": three,
        "leader_commit_latency_mean_ms": round((after["sum"] - before["sum"]) / commits, 3)
        if commits
        else None,
        "leader_commits": commits,
        "ratios": {
            "p50": round(three["p50_ms"] / one["p50_ms"], 2),
            "p99": round(three["p99_ms"] / one["p99_ms"], 2),
        },
        "load_average_before": load_before,
        "load_average_after": load_average(),
    }


def _small_cluster_topics() -> list[str]:
    from bench.generate_cluster import generate

    return list(generate(SMALL_CLUSTER, "/").model.topics)


def report(result: dict[str, Any]) -> str:
    one, three, ratio = result["one_bridge"], result["three_voters"], result["ratios"]["p50"]
    return "\n".join(
        [
            f"IncrementalAlterConfigs, {result['requests_each']} sequential each:",
            f"  one bridge:   p50 {one['p50_ms']} ms, p99 {one['p99_ms']} ms",
            f"  three voters: p50 {three['p50_ms']} ms, p99 {three['p99_ms']} ms "
            f"(the leader's commit-latency mean {result['leader_commit_latency_mean_ms']} ms)",
            f"  p50 ratio {ratio}x (target <= {TARGET_RATIO}x: {'met' if ratio <= TARGET_RATIO else 'NOT met'}); "
            f"p99 ratio {result['ratios']['p99']}x",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=1000, help="changes per target")
    args = parser.parse_args(argv)
    print(f"# {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC", flush=True)
    result = run(args.requests)
    print(json.dumps(result, indent=2))
    print(report(result))


if __name__ == "__main__":
    main()
