"""Benchmark: the directory part of `zk2kraft handoff check` on a 200,000-partition metadata directory.

    python -m bench.bench_handoff_check [--topics 2000] [--partitions-per-topic 100] [--data-dir DIR]

Generates the cluster's ZooKeeper data dir (bench/generate_cluster.py, chroot /kafka) unless `--data-dir`
names one, and migrates it offline (`zk2kraft migrate`, a child process) into a metadata directory such as a
bridge leaves: the log with the migration, and a snapshot at its end. Then, in this process, times the
hand-off check's directory checks (`directory_checks`: meta.properties, the segment walk, snapshots,
quorum-state, the replay, metadata.version, the MIGRATION record, open transactions) against the baseline
measured in the same run: the plain `load_image` of the same partition directory, the replay any reader
of the directory pays. The ZooKeeper checks are not timed (they read a handful of znodes).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.bench_migrate import CHROOT, run_child, zk2kraft_command

TARGET_S = 10.0


def _best_of(runs: int, action: Any) -> float:
    best = float("inf")
    for _ in range(runs):
        gc.collect()
        start = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - start)
    return best


def measure(data_dir: Path, runs: int) -> dict[str, Any]:
    from migrate.kraft.reader import METADATA_PARTITION_DIR, load_image
    from validators.handoff import directory_checks

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="zk2kraft-bench-") as tmp:
        meta = Path(tmp) / "meta"
        command = [*zk2kraft_command(), "migrate", "--zk-data-dir", str(data_dir), "--chroot", CHROOT]
        run_child([*command, "--out", str(meta), "--format", "json"])
        pdir = meta / METADATA_PARTITION_DIR
        dir_bytes = sum(p.stat().st_size for p in pdir.iterdir())
        image, _report = load_image(pdir)
        partitions = image.partition_count()
        del image
        baseline = _best_of(runs, lambda: load_image(pdir))
        check = _best_of(runs, lambda: directory_checks(meta))
        _state, checks = directory_checks(meta)
    return {
        "benchmark": "handoff check (directory checks)",
        "partitions": partitions,
        "partition_dir_bytes": dir_bytes,
        "runs": runs,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "check_s": round(check, 3),
        "baseline_load_image_s": round(baseline, 3),
        "check_vs_baseline": round(check / baseline, 2),
        "target_s": TARGET_S,
        "meets_target": check < TARGET_S,
        "verdicts": {c.id: c.verdict for c in checks},
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--topics", type=int, default=2_000)
    parser.add_argument("--partitions-per-topic", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", type=int, default=2, help="timed runs of each; the best is reported")
    parser.add_argument("--data-dir", type=Path, help="an already generated data dir with chroot /kafka")
    args = parser.parse_args(argv)
    if args.data_dir is not None:
        result = measure(args.data_dir, args.runs)
    else:
        from bench.generate_cluster import ClusterSpec, generate, write_data_dir

        with tempfile.TemporaryDirectory(prefix="zk2kraft-bench-data-") as tmp:
            spec = ClusterSpec(
                topics=args.topics, partitions_per_topic=args.partitions_per_topic, seed=args.seed
            )
            write_data_dir(generate(spec, CHROOT), tmp)
            result = measure(Path(tmp), args.runs)
    print(json.dumps(result, indent=2))
    verdict = "meets" if result["meets_target"] else "MISSES"
    print(
        f"handoff check of {result['partitions']:,} partitions: {result['check_s']} s ({verdict} the "
        f"{TARGET_S:.0f} s target); {result['check_vs_baseline']}x the plain load_image of the directory "
        f"({result['baseline_load_image_s']} s)"
    )


if __name__ == "__main__":
    main()
