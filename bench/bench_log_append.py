"""Benchmark: fsynced appends to the bridge's metadata log, 1 appender vs N concurrent ones (group commit).

    python -m bench.bench_log_append [--appends 2000] [--threads 16] [--repeat 3]

Each appender appends one ConfigRecord (what an IncrementalAlterConfigs produces) and waits for its
fsync before the next, as a controller request does before answering. With one appender every append
costs one fsync; with N the writer thread covers everything queued in one write + fsync. Prints a JSON
result and the ratio (the group-commit gain), best of `--repeat` runs each.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bridge.raft.metadata_log import MetadataLog
from migrate.kraft import records as rec


def _record(name: str) -> tuple[Any, int]:
    return (rec.ConfigRecord(resource_type=2, resource_name="orders", name=name, value="3600000"), 0)


def measure(appends: int, threads: int) -> dict[str, float]:
    """appends/s and fsyncs per append for `threads` appenders sharing `appends` fsynced appends."""
    with tempfile.TemporaryDirectory(prefix="bench-log-") as tmp:
        log = MetadataLog.open(Path(tmp) / "meta", node_id=3000, cluster_id="bench-cluster")
        try:
            per_thread = appends // threads
            fsyncs_before = log.fsync_count
            barrier = threading.Barrier(threads + 1)

            def work(t: int) -> None:
                barrier.wait()
                for i in range(per_thread):
                    log.append([_record(f"k{t}-{i % 64}")]).durable.result()

            pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
            for thread in pool:
                thread.start()
            barrier.wait()
            started = time.perf_counter()
            for thread in pool:
                thread.join()
            elapsed = time.perf_counter() - started
            done = per_thread * threads
            return {
                "appends_per_s": round(done / elapsed),
                "fsyncs_per_append": round((log.fsync_count - fsyncs_before) / done, 3),
                "mean_latency_ms": round(elapsed / per_thread * 1000, 3),
            }
        finally:
            log.close()


def run(appends: int, threads: int, repeat: int) -> dict[str, Any]:
    single = max((measure(appends // 4, 1) for _ in range(repeat)), key=lambda r: r["appends_per_s"])
    grouped = max((measure(appends, threads) for _ in range(repeat)), key=lambda r: r["appends_per_s"])
    return {
        "machine": platform.platform(),
        "appenders_1": single,
        f"appenders_{threads}": grouped,
        "group_commit_gain": round(grouped["appends_per_s"] / single["appends_per_s"], 2),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--appends", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    result = run(args.appends, args.threads, args.repeat)
    print(json.dumps(result, indent=2))
    single, grouped = result["appenders_1"], result[f"appenders_{args.threads}"]
    print(
        f"1 appender: {single['appends_per_s']:,} fsynced appends/s; {args.threads} appenders: "
        f"{grouped['appends_per_s']:,} appends/s ({grouped['fsyncs_per_append']} fsyncs per append); "
        f"group commit gain {result['group_commit_gain']}x"
    )


if __name__ == "__main__":
    main()
