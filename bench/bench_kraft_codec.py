"""Benchmark: KRaft snapshot encode/decode throughput vs a per-record kio decode, measured in the same run.

    python -m bench.bench_kraft_codec [--partitions 1000000] [--partitions-per-topic 100] [--repeat 3]

Builds a synthetic snapshot (metadata.version 3.9-IV0: PartitionRecord v1 with directories, replication
factor 3), then times: writing it (encode), decoding every record into objects on one core, decoding on
two processes (`dump --summary --jobs 2`), and the baseline (kio's `read_batch` + kio's native
`entity_reader` per record). Prints a JSON result and the ratios.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.kio_baseline import kio_decode_file
from migrate.kraft import records as rec
from migrate.kraft.parallel import count_records_parallel
from migrate.kraft.reader import iter_snapshot
from migrate.kraft.snapshot import write_snapshot

DIRECTORY = uuid.UUID("5c7864af-8b6d-4ac4-bdf7-4a4e43ca4f7e")


def synthetic_records(partitions: int, per_topic: int, brokers: int = 6) -> list[tuple[Any, int]]:
    """features, then topics each followed by their PartitionRecords: a snapshot's shape."""
    out: list[tuple[Any, int]] = [
        (rec.FeatureLevelRecord(name="metadata.version", feature_level=21), 0),
        (rec.ZkMigrationStateRecord(zk_migration_state=0), 0),
    ]
    topics = (partitions + per_topic - 1) // per_topic
    made = 0
    for t in range(topics):
        topic_id = uuid.UUID(int=(t + 1) << 64 | 0xC0FFEE)
        out.append((rec.TopicRecord(name=f"topic-{t:07d}", topic_id=topic_id), 0))
        for p in range(min(per_topic, partitions - made)):
            replicas = [(t + p + i) % brokers for i in range(3)]
            out.append(
                (
                    rec.PartitionRecord(
                        partition_id=p,
                        topic_id=topic_id,
                        replicas=replicas,
                        isr=list(replicas),
                        leader=replicas[0],
                        leader_epoch=4,
                        partition_epoch=7,
                        directories=[DIRECTORY] * 3,
                    ),
                    1,
                )
            )
        made += min(per_topic, partitions - made)
    out.append((rec.ProducerIdsRecord(broker_id=-1, broker_epoch=-1, next_producer_id=5000), 0))
    return out


def best_of(repeat: int, func: Callable[[], int]) -> tuple[float, int]:
    """Smallest wall time of `repeat` runs (GC collected before each, as a long-running tool would be)."""
    best = float("inf")
    result = 0
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = func()
        best = min(best, time.perf_counter() - start)
    return best, result


def decode_single(path: Path) -> int:
    count = 0
    for _entry in iter_snapshot(path):
        count += 1
    return count


def run(partitions: int, per_topic: int, repeat: int) -> dict[str, Any]:
    records = synthetic_records(partitions, per_topic)
    with tempfile.TemporaryDirectory(prefix="zk2kraft-bench-") as tmp:
        folder = Path(tmp)

        def encode() -> int:
            for old in folder.glob("*.checkpoint"):
                old.unlink()
            written = write_snapshot(folder, iter(records), end_offset=len(records), epoch=1, timestamp_ms=0)
            return written.record_count

        encode_s, encoded = best_of(repeat, encode)
        path = next(folder.glob("*.checkpoint"))
        size = path.stat().st_size
        data = path.read_bytes()
        records.clear()  # free the objects before timing decodes
        gc.collect()
        single_s, single_n = best_of(repeat, lambda: decode_single(path))
        parallel_s, parallel_counts = best_of(repeat, lambda: sum(count_records_parallel(path, 2).values()))
        kio_s, kio_n = best_of(repeat, lambda: kio_decode_file(data))
    assert single_n == parallel_counts == kio_n, (single_n, parallel_counts, kio_n)
    n = single_n
    result = {
        "benchmark": "kraft_codec",
        "partitions": partitions,
        "records": n,
        "snapshot_bytes": size,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "encode_records_per_s": round(encoded / encode_s),
        "decode_records_per_s": round(n / single_s),
        "decode_2proc_records_per_s": round(n / parallel_s),
        "kio_baseline_records_per_s": round(n / kio_s),
        "decode_vs_kio": round(kio_s / single_s, 2),
        "decode_2proc_vs_kio": round(kio_s / parallel_s, 2),
        "decode_mb_per_s": round(size / single_s / 1e6, 1),
    }
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=1_000_000)
    parser.add_argument("--partitions-per-topic", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    result = run(args.partitions, args.partitions_per_topic, args.repeat)
    print(json.dumps(result, indent=2))
    print(
        f"decode {result['decode_records_per_s']:,} rec/s on 1 core ({result['decode_vs_kio']}x kio), "
        f"{result['decode_2proc_records_per_s']:,} rec/s on 2 processes ({result['decode_2proc_vs_kio']}x kio); "
        f"kio baseline {result['kio_baseline_records_per_s']:,} rec/s; encode {result['encode_records_per_s']:,} rec/s"
    )


if __name__ == "__main__":
    main()
