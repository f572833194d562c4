"""Benchmark: live ZooKeeper read throughput of `read_tree` vs two kazoo baselines, measured in the same run.

    python -m bench.bench_zk_read [--topics 400] [--partitions-per-topic 50] [--repeat 3]

Generates a synthetic Kafka cluster (bench/generate_cluster.py), starts an embedded ZooKeeper 3.9 from
its snapshot (chroot /kafka), then reads the whole Kafka subtree four ways, best of `--repeat` each:
`read_tree(acls=False)` (what migrate and audit use), `read_tree(acls=True)` (what `zk export` uses),
and the baselines: one synchronous kazoo `get` + `get_children` per znode (a recursive walk), and kazoo's
pipelined `get_async` + `get_children_async`, level by level, keeping the raw replies (no parsing).
Prints a JSON result (znodes/s) and the ratios.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from kazoo.handlers.threading import SequentialThreadingHandler

from bench.generate_cluster import ClusterSpec, generate, write_data_dir
from migrate.zk.cluster import from_tree
from migrate.zk.embedded import EmbeddedZooKeeper
from migrate.zk.live import ZkConnectOptions, read_tree

CHROOT = "/kafka"


def best_of(repeat: int, func: Callable[[], int]) -> tuple[float, int]:
    """Smallest wall time of `repeat` runs (GC collected before each), and the last result."""
    best = float("inf")
    result = 0
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = func()
        best = min(best, time.perf_counter() - start)
    return best, result


def kazoo_sync_walk(client: KazooClient, root: str) -> int:
    """One synchronous `get` and `get_children` per znode, depth first: the obvious way to read a tree."""
    count = 0
    stack = [root]
    while stack:
        path = stack.pop()
        client.get(path)
        children = client.get_children(path)
        count += 1
        base = path.rstrip("/")
        stack.extend(f"{base}/{name}" for name in children)
    return count


def kazoo_async_walk(client: KazooClient, root: str) -> int:
    """Pipelined `get_async` + `get_children_async` for a whole level at a time; raw replies only."""
    count = 0
    level = [root]
    while level:
        data = [client.get_async(path) for path in level]
        kids = [client.get_children_async(path) for path in level]
        following: list[str] = []
        for path, got, names in zip(level, data, kids, strict=True):
            got.get()
            base = path.rstrip("/")
            following.extend(f"{base}/{name}" for name in names.get())
        count += len(level)
        level = following
    return count


def run(topics: int, per_topic: int, repeat: int, seed: int) -> dict[str, Any]:
    load_before = os.getloadavg()
    cluster = generate(ClusterSpec(topics=topics, partitions_per_topic=per_topic, seed=seed), CHROOT)
    expected_topics = cluster.model.topics
    # Without their sessions, ZooKeeper drops the brokers' ephemeral znodes on load: otherwise they would
    # vanish mid-run when those sessions time out.
    cluster.sessions.clear()
    with tempfile.TemporaryDirectory(prefix="zk2kraft-bench-") as tmp:
        base = Path(tmp)
        write_data_dir(cluster, base / "data")
        del cluster
        with EmbeddedZooKeeper(base, startup_timeout=120) as server:
            connect = server.connect_string
            tree = read_tree(connect, chroot=CHROOT, acls=False)
            assert from_tree(tree).topics == expected_topics, "the live tree is not the generated cluster"
            znodes = len(tree)
            del tree
            ours_s, ours_n = best_of(repeat, lambda: len(read_tree(connect, chroot=CHROOT, acls=False)))
            acls_s, acls_n = best_of(repeat, lambda: len(read_tree(connect, chroot=CHROOT, acls=True)))
            # kazoo's own handler: the baseline is kazoo as it comes.
            client = ZkConnectOptions(connect=connect, session_timeout_ms=30_000).kazoo_client(
                handler=SequentialThreadingHandler()
            )
            client.start(timeout=30)
            try:
                async_s, async_n = best_of(repeat, lambda: kazoo_async_walk(client, CHROOT))
                sync_s, sync_n = best_of(repeat, lambda: kazoo_sync_walk(client, CHROOT))
            finally:
                client.stop()
                client.close()
    assert ours_n == acls_n == async_n == sync_n == znodes, (ours_n, acls_n, async_n, sync_n, znodes)
    return {
        "benchmark": "zk_read",
        "topics": topics,
        "partitions": topics * per_topic,
        "znodes": znodes,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "read_tree_znodes_per_s": round(znodes / ours_s),
        "read_tree_acls_znodes_per_s": round(znodes / acls_s),
        "kazoo_sync_znodes_per_s": round(znodes / sync_s),
        "kazoo_async_znodes_per_s": round(znodes / async_s),
        "read_tree_vs_sync": round(sync_s / ours_s, 2),
        "read_tree_vs_async": round(async_s / ours_s, 2),
        "read_tree_acls_vs_sync": round(sync_s / acls_s, 2),
        "read_tree_acls_vs_async": round(async_s / acls_s, 2),
        "seconds": {
            "read_tree": round(ours_s, 3),
            "read_tree_acls": round(acls_s, 3),
            "kazoo_sync": round(sync_s, 3),
            "kazoo_async": round(async_s, 3),
        },
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--topics", type=int, default=400)
    parser.add_argument("--partitions-per-topic", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    result = run(args.topics, args.partitions_per_topic, args.repeat, args.seed)
    print(json.dumps(result, indent=2))
    print(
        f"read_tree {result['read_tree_znodes_per_s']:,} znodes/s ({result['read_tree_vs_sync']}x sync kazoo, "
        f"{result['read_tree_vs_async']}x async kazoo); with ACLs {result['read_tree_acls_znodes_per_s']:,} "
        f"znodes/s ({result['read_tree_acls_vs_sync']}x sync); baselines: sync "
        f"{result['kazoo_sync_znodes_per_s']:,}, async {result['kazoo_async_znodes_per_s']:,} znodes/s"
    )


if __name__ == "__main__":
    main()
