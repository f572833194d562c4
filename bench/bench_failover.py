"""Benchmark: the Raft leader of three bridges is SIGKILLed at 200,000 partitions; how long until a new leader
dual-writes and acknowledges an admin change, against floors measured in the same run.

    python -m bench.bench_failover [--partitions 200000] [--floor-kills 5] [--single-restart]

A private embedded ZooKeeper (2 GB heap) starts from a generated cluster (`bench.generate_cluster`, 100
partitions a topic, 3 brokers, replication factor 3); the snapshot's broker sessions are let expire, as on a
copy of ZooKeeper (every bridge runs with `--rehearsal`: no broker runs and nothing is sent to brokers). One
bridge migrates it to DUAL_WRITE and is stopped; three `--voters` bridges start on copies of its directory
(`node.id` set per copy), the way docs/operations.md moves one bridge to a quorum. Once one dual-writes and
both followers have caught up, one IncrementalAlterConfigs to it succeeds; then it is SIGKILLed. Measured
from the kill: when a survivor's `/status` first says DUAL_WRITE, and when that survivor then acknowledges an
IncrementalAlterConfigs (each survivor is sent one on a new connection in turns, every ~20 ms; a follower
answers NOT_CONTROLLER; a change acknowledged before DUAL_WRITE is reported, with whether ZooKeeper held it
right after, but does not count). Afterwards ZooKeeper must hold the acknowledged value. The new leader's
log lines after the kill (Raft roles, `raft_leading`, the driver's state transitions) give the phases.

FLOORS, same run, same ZooKeeper, same machine:
- MEASURED: the same kill and probe `--floor-kills` times on three voters over a small cluster (4 topics, in
  another chroot): everything a failover costs that does not grow with the metadata (the followers' fetch
  timeout, the vote, the quorum-state and first-entry fsyncs, claiming ZooKeeper, process wake-ups). The
  killed voter is restarted and caught up between kills. The ratio is against their median.
- DOCUMENTED: Kafka's election timeout (1,000 ms) plus two fsyncs (quorum-state, the epoch's first entry),
  each measured on this disk; and the PROTOCOL floor: Kafka 3.9's followers start an election only when their
  fetch timeout (2,000 ms) passes without a successful Fetch, so after a hard kill no Kafka 3.9 quorum can
  elect sooner than that plus a vote and the two fsyncs.
`--single-restart`: also the old way, measured on the single bridge before it is stopped: SIGKILLed and
restarted at once, until it says DUAL_WRITE and acknowledges a change again (full reconcile).
Prints a JSON result, then the verdict (target: < 5 s).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from bench.bench_bridge import load_average
from bench.generate_cluster import generate, write_data_dir
from bench.quorum_processes import (
    cluster_spec,
    first_topic,
    from_copies,
    fsync_seconds,
    log_phases,
    probe_change,
    quorum,
    single,
    stop_all,
    wait_caught_up,
    wait_for_leader,
    wait_zookeeper_copies,
)
from migrate.zk.embedded import EmbeddedZooKeeper
from migrate.zk.live import ZkConnectOptions
from tests.support.bridge_process import BridgeProcess, seeded_chroot

CHROOT = "/kafka"
FLOOR_CHROOT = "/floor"
ZK_HEAP = "-Xmx2g"
TARGET_S = 5.0
ELECTION_TIMEOUT_S = 1.0
FETCH_TIMEOUT_S = 2.0
FAILOVER_TIMEOUT_S = 600.0
DUAL_WRITE_TIMEOUT_S = 3600.0
PROBE_EVERY_S = 0.02


class Values:
    """retention.ms values that never repeat across the run (every change is a change)."""

    def __init__(self) -> None:
        self.last = 3_600_000

    def next(self) -> int:
        self.last += 1
        return self.last


# ---------------------------------------------------------------- one failover


def fail_over(
    bridges: list[BridgeProcess], leader: BridgeProcess, topic: str, values: Values, zk: KazooClient
) -> dict[str, Any]:
    """SIGKILL `leader`; seconds until a survivor says DUAL_WRITE and then acknowledges a change.

    A change acknowledged before its bridge said DUAL_WRITE is noted (time, and whether ZooKeeper held it
    right after the acknowledgement) but does not end the measurement."""
    warm = probe_change(leader.listen_port, topic, values.next(), timeout=60)
    if warm is not None:
        raise RuntimeError(f"the leader {leader.node_id} refused a change before the kill: {warm}")
    survivors = [b for b in bridges if b is not leader]
    assert leader.process is not None
    wall_start = time.time()
    start = time.perf_counter()
    leader.process.send_signal(signal.SIGKILL)
    dual_write_s: dict[int, float] = {}
    refusals: dict[str, int] = {}
    early: dict[str, Any] | None = None
    done: tuple[BridgeProcess, float, int] | None = None
    while done is None:
        if time.perf_counter() - start > FAILOVER_TIMEOUT_S:
            raise RuntimeError(
                f"no new leader acknowledged a change within {FAILOVER_TIMEOUT_S} s; refusals {refusals}\n"
                + "\n".join(b.log_tail(40) for b in survivors)
            )
        for bridge in survivors:
            if bridge.node_id not in dual_write_s:
                status = bridge.status()
                if status is not None and status.get("state") == "DUAL_WRITE":
                    dual_write_s[bridge.node_id] = time.perf_counter() - start
            in_dual_write = bridge.node_id in dual_write_s
            value = values.next()
            refused = probe_change(bridge.listen_port, topic, value, timeout=FAILOVER_TIMEOUT_S)
            acked_s = time.perf_counter() - start
            if refused is not None:
                kind = refused.split(": ")[-1][:60]
                refusals[kind] = refusals.get(kind, 0) + 1
            elif in_dual_write:
                done = (bridge, acked_s, value)
                break
            elif early is None:
                early = {"node": bridge.node_id, "acknowledged_s": round(acked_s, 3),
                         "zookeeper_held_it_right_after": zookeeper_value(zk, topic) == str(value)}  # fmt: skip
        time.sleep(PROBE_EVERY_S)
    leader.process.wait(30)
    new_leader, acked_s, value = done
    time.sleep(0.5)  # the log lines of the last steps
    return {
        "killed": leader.node_id,
        "new_leader": new_leader.node_id,
        "to_dual_write_s": round(dual_write_s[new_leader.node_id], 3),
        "to_acknowledged_change_s": round(acked_s, 3),
        "acknowledged_value": value,
        "zookeeper_holds_acknowledged_value": zookeeper_value(zk, topic) == str(value),
        "acknowledged_before_dual_write": early,
        "refusals_before": refusals,
        "phases": log_phases(new_leader.log_text(), wall_start),
        "_new_leader": new_leader,
    }


def rejoin(bridges: list[BridgeProcess], killed: BridgeProcess, leader: BridgeProcess) -> None:
    """Restart the killed voter on its directory and wait until the leader counts it caught up."""
    killed.extra_args = [a for a in killed.extra_args if a != "--format-empty-voter-directory"]
    killed.start().wait_for_status(120)
    wait_caught_up(leader, 300)
    wait_zookeeper_copies(bridges, 300)


# ---------------------------------------------------------------- the floors


def measured_floor(zk_connect: str, tmp: Path, kills: int, values: Values) -> dict[str, Any]:
    """The same failover `kills` times on three voters over a small cluster."""
    bridges = quorum(zk_connect, tmp, name="floor")
    samples: list[dict[str, Any]] = []
    try:
        for bridge in bridges:
            bridge.start()
        leader = wait_for_leader(bridges, 300)
        wait_caught_up(leader, 120)
        wait_zookeeper_copies(bridges, 120)
        for _ in range(kills):
            with zk_session(zk_connect) as zk:
                topic = sorted(t for t in zk.get_children("/brokers/topics") if not t.startswith("__"))[0]
                sample = fail_over(bridges, leader, topic, values, zk)
            killed = next(b for b in bridges if b.node_id == sample["killed"])
            leader = sample.pop("_new_leader")
            samples.append(sample)
            rejoin(bridges, killed, leader)
    finally:
        stop_all(bridges)
    acked = [s["to_acknowledged_change_s"] for s in samples]
    return {
        "kills": len(samples),
        "to_acknowledged_change_s": acked,
        "to_dual_write_s": [s["to_dual_write_s"] for s in samples],
        "median_s": round(statistics.median(acked), 3),
        "first_sample_phases": samples[0]["phases"] if samples else [],
    }


@contextlib.contextmanager
def zk_session(zk_connect: str) -> Iterator[KazooClient]:
    client = ZkConnectOptions(connect=zk_connect).kazoo_client()
    client.start(timeout=60)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def wait_for_expired_broker_sessions(zk_connect: str, timeout: float = 120.0) -> float:
    """Until no `/brokers/ids` znode has a live owner (the snapshot's sessions expire); seconds waited."""
    start = time.monotonic()
    with zk_session(zk_connect) as client:
        while time.monotonic() - start < timeout:
            owned = [
                b for b in client.get_children("/brokers/ids")
                if (stat := client.exists(f"/brokers/ids/{b}")) is not None and stat.ephemeralOwner
            ]  # fmt: skip
            if not owned:
                return round(time.monotonic() - start, 1)
            time.sleep(0.5)
    raise RuntimeError(f"the generated brokers' sessions did not expire within {timeout} s")


def zookeeper_value(zk: KazooClient, topic: str) -> str | None:
    """retention.ms of `topic` in ZooKeeper's `/config/topics/<topic>`."""
    data, _stat = zk.get(f"/config/topics/{topic}")
    return json.loads(data).get("config", {}).get("retention.ms")  # type: ignore[no-any-return]


# ---------------------------------------------------------------- the single bridge, for comparison


def restart(bridge: BridgeProcess, topic: str, values: Values) -> dict[str, Any]:
    """SIGKILL one bridge in DUAL_WRITE and start it again at once; until it says DUAL_WRITE and then
    acknowledges a change."""
    refused = probe_change(bridge.listen_port, topic, values.next(), timeout=60)
    if refused is not None:
        raise RuntimeError(f"the single bridge refused a change: {refused}")
    wall_start = time.time()
    start = time.perf_counter()
    bridge.kill()
    bridge.start()
    wait_for_leader([bridge], DUAL_WRITE_TIMEOUT_S)
    dual_write_s = time.perf_counter() - start
    while probe_change(bridge.listen_port, topic, values.next(), timeout=600) is not None:
        time.sleep(PROBE_EVERY_S)
    seconds = time.perf_counter() - start
    time.sleep(0.5)
    return {
        "to_dual_write_s": round(dual_write_s, 3),
        "to_acknowledged_change_s": round(seconds, 3),
        "phases": log_phases(bridge.log_text(), wall_start),
    }


# ---------------------------------------------------------------- the run


def run(
    partitions: int, *, floor_kills: int = 5, single_restart: bool = False, seed: int = 7
) -> dict[str, Any]:
    load_before = load_average()
    spec = cluster_spec(partitions, seed)
    values = Values()
    result: dict[str, Any] = {"machine": platform.platform(), "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="bench-failover-") as tmp_text:
        tmp = Path(tmp_text)
        started = time.perf_counter()
        cluster = generate(spec, CHROOT)
        topic = first_topic(cluster.model.topics)
        write_data_dir(cluster, tmp / "zk" / "data")
        result["cluster"] = {"partitions": cluster.model.partition_count, "topics": len(cluster.model.topics),
                             "generated_s": round(time.perf_counter() - started, 1)}  # fmt: skip
        fsync_s = fsync_seconds(tmp / "fsync-probe")
        with EmbeddedZooKeeper(tmp / "zk", startup_timeout=600, jvm_options=(ZK_HEAP,)) as zookeeper:
            floor = measured_floor(
                seeded_chroot(zookeeper.connect_string, FLOOR_CHROOT), tmp / "floor", floor_kills, values
            )
            zk_connect = zookeeper.connect_string + CHROOT
            result["broker_sessions_expired_after_s"] = wait_for_expired_broker_sessions(zk_connect)
            # One bridge migrates (a quorum's initial load at this size is not what is measured here), then
            # three voters start on copies of its directory, as docs/operations.md moves a bridge to a quorum.
            bridges = quorum(zk_connect, tmp / "quorum", empty=False)
            alone = single(zk_connect, tmp / "single")
            alone.listen_port, alone.metrics_port = bridges[0].listen_port, bridges[0].metrics_port
            try:
                started = time.perf_counter()
                alone.start()
                wait_for_leader([alone], DUAL_WRITE_TIMEOUT_S)
                result["single_start_to_dual_write_s"] = round(time.perf_counter() - started, 1)
                if single_restart:
                    result["single_bridge_restart"] = restart(alone, topic, values)
                alone.terminate()
                from_copies(alone.metadata_dir, bridges)
                started = time.perf_counter()
                for bridge in bridges:
                    bridge.start()
                leader = wait_for_leader(bridges, DUAL_WRITE_TIMEOUT_S)
                result["quorum_start_to_dual_write_s"] = round(time.perf_counter() - started, 1)
                wait_caught_up(leader, 600)
                copies_started = time.perf_counter()
                wait_zookeeper_copies(bridges, 600)
                result["followers_zookeeper_copy_s"] = round(time.perf_counter() - copies_started, 1)
                with zk_session(zk_connect) as zk:
                    failover = fail_over(bridges, leader, topic, values, zk)
                failover.pop("_new_leader")
            finally:
                stop_all([alone, *bridges])
    documented = ELECTION_TIMEOUT_S + 2 * fsync_s
    protocol = FETCH_TIMEOUT_S + 2 * fsync_s
    seconds = failover["to_acknowledged_change_s"]
    result.update(
        {
            "failover": failover,
            "floor_measured": floor,
            "fsync_s": round(fsync_s, 5),
            "floor_documented_s": round(documented, 3),
            "floor_protocol_s": round(protocol, 3),
            "ratios": {
                "over_measured_floor": round(seconds / floor["median_s"], 2),
                "over_documented_floor": round(seconds / documented, 2),
                "over_protocol_floor": round(seconds / protocol, 2),
            },
            "load_average_before": load_before,
            "load_average_after": load_average(),
        }
    )
    return result


def report(result: dict[str, Any]) -> str:
    failover, floor, ratios = result["failover"], result["floor_measured"], result["ratios"]
    seconds = failover["to_acknowledged_change_s"]
    lines = [
        f"{result['cluster']['partitions']:,} partitions; leader {failover['killed']} SIGKILLed -> "
        f"{failover['new_leader']} in DUAL_WRITE after {failover['to_dual_write_s']} s, "
        f"acknowledged a change after {seconds} s (target < {TARGET_S} s: "
        f"{'met' if seconds < TARGET_S else 'NOT met'}); ZooKeeper holds it: "
        f"{failover['zookeeper_holds_acknowledged_value']}",
        f"measured floor (small quorum, median of {floor['kills']}): {floor['median_s']} s -> "
        f"{ratios['over_measured_floor']}x",
        f"documented floor (election timeout + 2 fsyncs of {result['fsync_s'] * 1000:.2f} ms): "
        f"{result['floor_documented_s']} s -> {ratios['over_documented_floor']}x; protocol floor (fetch "
        f"timeout + 2 fsyncs): {result['floor_protocol_s']} s -> {ratios['over_protocol_floor']}x",
        f"a change acknowledged before its bridge said DUAL_WRITE: {failover['acknowledged_before_dual_write']}",
        "new leader's phases (ms after the kill):",
        *(f"  {p['ms']:>6}  {p['line']}" for p in failover["phases"]),
    ]
    if "single_bridge_restart" in result:
        restart = result["single_bridge_restart"]
        lines.append(
            f"single bridge SIGKILL + restart + reconcile: DUAL_WRITE after {restart['to_dual_write_s']} s, "
            f"a change acknowledged after {restart['to_acknowledged_change_s']} s"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", type=int, default=200_000)
    parser.add_argument("--floor-kills", type=int, default=5, help="leader kills on the small quorum")
    parser.add_argument(
        "--single-restart", action="store_true", help="also time one bridge's kill and restart"
    )
    args = parser.parse_args(argv)
    # A stopped run still stops its bridges and ZooKeeper (the `finally` blocks run).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    print(f"# {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC", flush=True)
    result = run(args.partitions, floor_kills=args.floor_kills, single_restart=args.single_restart)
    print(json.dumps(result, indent=2))
    print(report(result))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
