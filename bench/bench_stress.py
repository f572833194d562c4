"""Benchmark: a long concurrency stress run, steps per second and invariant checks, seed by seed.

    python -m bench.bench_stress [--seeds 1 2 3] [--steps 300] [--without create_topics ...]

A private embedded ZooKeeper is loaded with the real Kafka 3.5 cluster's tree (tests/fixtures, brokers 1, 2,
3); for each seed a BridgeController runs in this process as Kafka's controller (no rehearsal, 600 ms broker
sessions) with three simulated ZooKeeper-mode brokers, and `tests.support.stress` drives it: every step sends
the brokers' heartbeats and a few admin requests at once (AlterPartition from leaders, CreateTopics, two of
one name at times, DeleteTopics, reassignments, ElectLeaders, brokers fenced, silent or shutting down), then
checks Kafka's invariants on every new batch of the log and the log, the image and ZooKeeper against each
other (`tests.support.stress.Invariants`). `--without KIND` leaves a kind of request out (to see what else
breaks once one violation is known). A run stops early at a violation after which nothing more can be
learnt (no answer, the log or ZooKeeper diverged for good).

Prints a JSON result, then one line per seed: steps/s, batches and states checked, and each broken
invariant with its first occurrence. ZK2KRAFT_STRESS_SEED / ZK2KRAFT_STRESS_STEPS replay a seed in
tests/bridge/test_concurrency_stress.py.
"""

from __future__ import annotations

import argparse
import datetime
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from migrate.zk.embedded import EmbeddedZooKeeper
from migrate.zk.load import load_tree
from migrate.zk.restore import load_data_dir
from tests.support import FIXTURES
from tests.support.stress import ACTIONS, StressKit, StressReport, stressed_cluster

REAL_CLUSTER = FIXTURES / "zk-real-kafka-3.5"
REAL_CHROOT = "/de-4-3-kafka-cluster"
BROKER_IDS = [1, 2, 3]


def run_seed(zk_server: EmbeddedZooKeeper, seed: int, steps: int, actions: dict[str, int], tmp: Path) -> dict[str, Any]:
    """One seed against a fresh chroot of `zk_server` and a fresh metadata directory."""
    tree, _report = load_data_dir(REAL_CLUSTER)
    chroot = f"/stress-{seed}-{time.monotonic_ns()}"
    admin = KazooClient(hosts=zk_server.connect_string)
    admin.start(timeout=15)
    try:
        admin.ensure_path(chroot)
    finally:
        admin.stop()
        admin.close()
    zk_connect = zk_server.connect_string + chroot
    client = KazooClient(hosts=zk_connect)
    client.start(timeout=15)
    try:
        load_tree(client, tree.with_chroot(REAL_CHROOT))
        with stressed_cluster(zk_connect, tmp / f"meta-{seed}", BROKER_IDS) as (controller, brokers):
            report = StressKit(controller, brokers, client, seed, actions=actions).run(steps)
    finally:
        client.stop()
        client.close()
    return result_of(report)


def result_of(report: StressReport) -> dict[str, Any]:
    first: dict[str, str] = {}
    for violation in report.violations:
        first.setdefault(violation.invariant, str(violation)[:300])
    return {
        "seed": report.seed,
        "steps": report.steps,
        "requests": report.requests,
        "seconds": round(report.seconds, 3),
        "steps_per_s": round(report.steps / report.seconds, 2) if report.seconds > 0 else 0.0,
        "batches_checked": report.batches_checked,
        "settle_checks": report.checks,
        "violations": len(report.violations),
        "broken": report.broken(),
        "first_violation": first,
        "answers": dict(sorted(report.answers.items())),
    }


def run(seeds: list[int], steps: int, without: list[str] | None = None) -> dict[str, Any]:
    actions = {kind: weight for kind, weight in ACTIONS.items() if kind not in (without or [])}
    with tempfile.TemporaryDirectory(prefix="bench-stress-") as tmp_dir:
        tmp = Path(tmp_dir)
        with EmbeddedZooKeeper(tmp / "zk") as zk_server:
            results = [run_seed(zk_server, seed, steps, actions, tmp) for seed in seeds]
    return {"steps": steps, "actions": actions, "seeds": results}


def report(result: dict[str, Any]) -> str:
    lines = []
    for seed in result["seeds"]:
        broken = ", ".join(seed["broken"]) or "none"
        lines.append(
            f"seed {seed['seed']}: {seed['steps']} steps, {seed['requests']} requests, {seed['steps_per_s']} "
            f"steps/s, {seed['batches_checked']} batches and {seed['settle_checks']} settled states checked; "
            f"invariants broken: {broken}"
        )
        lines += [f"    {text}" for text in seed["first_violation"].values()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--without", nargs="*", default=[], choices=sorted(ACTIONS), help="kinds left out")
    args = parser.parse_args(argv)
    print(f"# {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC", flush=True)
    result = run(args.seeds, args.steps, args.without)
    print(json.dumps(result, indent=2))
    print(report(result))


if __name__ == "__main__":
    main()
