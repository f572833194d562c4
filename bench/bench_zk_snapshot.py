"""Benchmark: offline ZooKeeper snapshot read in MB/s vs reading the file's bytes, measured in the same run.

    python -m bench.bench_zk_snapshot [--topics 3500] [--partitions-per-topic 100] [--repeat 3] [--data-dir DIR]

Generates a synthetic Kafka cluster's snapshot (bench/generate_cluster.py; over 100 MB by default) unless
`--data-dir` names one already generated, then times, best of `--repeat` each: the baseline (the file's
bytes read into memory, from the page cache after the first pass), `read_snapshot` (decode every znode
into a ZTree, Adler32 seals checked) and `load_data_dir` (what `migrate --zk-data-dir` runs: snapshot
choice, decoding, tree-digest verification, transaction-log replay). Prints a JSON result and the ratios.
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

from bench.generate_cluster import ClusterSpec, generate, write_data_dir
from migrate.zk.files.snapshot_read import read_snapshot
from migrate.zk.restore import list_snapshots, load_data_dir, version_dir

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


def measure(data_dir: Path, repeat: int) -> dict[str, Any]:
    snapshots = list_snapshots(version_dir(data_dir, "data directory"))
    if not snapshots:
        raise SystemExit(f"no snapshot in {data_dir}")
    path = snapshots[-1][1]
    size = path.stat().st_size
    load_before = os.getloadavg()
    raw_s, raw_n = best_of(repeat, lambda: len(path.read_bytes()))
    snap_s, snap_n = best_of(repeat, lambda: len(read_snapshot(path).tree))
    load_s, load_n = best_of(repeat, lambda: len(load_data_dir(data_dir)[0]))
    assert raw_n == size and snap_n == load_n, (raw_n, size, snap_n, load_n)
    mb = size / 1e6
    return {
        "benchmark": "zk_snapshot",
        "snapshot": str(path),
        "snapshot_bytes": size,
        "znodes": snap_n,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "read_bytes_mb_per_s": round(mb / raw_s, 1),
        "read_snapshot_mb_per_s": round(mb / snap_s, 1),
        "load_data_dir_mb_per_s": round(mb / load_s, 1),
        "read_snapshot_znodes_per_s": round(snap_n / snap_s),
        "load_data_dir_znodes_per_s": round(load_n / load_s),
        "read_snapshot_vs_bytes": round(raw_s / snap_s, 4),
        "load_data_dir_vs_bytes": round(raw_s / load_s, 4),
        "seconds": {
            "read_bytes": round(raw_s, 3),
            "read_snapshot": round(snap_s, 3),
            "load_data_dir": round(load_s, 3),
        },
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--topics", type=int, default=3500)
    parser.add_argument("--partitions-per-topic", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-dir", type=Path, help="an already generated data dir (skips generation)")
    args = parser.parse_args(argv)
    if args.data_dir is not None:
        result = measure(args.data_dir, args.repeat)
    else:
        with tempfile.TemporaryDirectory(prefix="zk2kraft-bench-") as tmp:
            spec = ClusterSpec(
                topics=args.topics, partitions_per_topic=args.partitions_per_topic, seed=args.seed
            )
            write_data_dir(generate(spec, CHROOT), tmp)
            result = measure(Path(tmp), args.repeat)
    print(json.dumps(result, indent=2))
    print(
        f"read_snapshot {result['read_snapshot_mb_per_s']} MB/s ({result['read_snapshot_znodes_per_s']:,} znodes/s), "
        f"load_data_dir {result['load_data_dir_mb_per_s']} MB/s; baseline read_bytes {result['read_bytes_mb_per_s']} "
        f"MB/s (ratios {result['read_snapshot_vs_bytes']}, {result['load_data_dir_vs_bytes']})"
    )


if __name__ == "__main__":
    main()
