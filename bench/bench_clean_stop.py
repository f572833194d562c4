"""Benchmark: a bridge voter's clean stop at 200,000 partitions (its final snapshot included), then the whole
`zk2kraft handoff check` of the directory it leaves, against floors measured in the same run.

    python -m bench.bench_clean_stop [--partitions 200000]

A private embedded ZooKeeper starts from a generated cluster (`bench.generate_cluster`, 100 partitions a
topic, 3 brokers, replication factor 3; `--rehearsal`, the snapshot's broker sessions let expire). One
bridge migrates it and is stopped; three `--voters` bridges start on copies of its directory. Once one
dual-writes and the followers have caught up, one IncrementalAlterConfigs is acknowledged, so the committed
image is past the copied snapshot and a stop must write a new one. Then, timed from SIGTERM to the process's
exit: a follower's stop, then the leader's (it resigns, writes its snapshot, closes its ZooKeeper session).
Each stopped directory must hold a snapshot at its log end. Then `zk2kraft handoff check` (a child
process: start-up, directory and ZooKeeper checks) runs on the leader's directory.

FLOORS, same run: the snapshot's own write (`write_snapshot` of the leader's image, loaded in this process,
into a scratch directory) for the stop; for the check, the child process's start-up (`zk2kraft --help`)
plus the plain `load_image` of the same directory, the replay any reader of it pays.
Targets: clean stop < 5 s; handoff check < 10 s.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.bench_bridge import load_average
from bench.bench_failover import Values, wait_for_expired_broker_sessions
from bench.bench_migrate import zk2kraft_command
from bench.generate_cluster import generate, write_data_dir
from bench.quorum_processes import (
    cluster_spec,
    first_topic,
    from_copies,
    probe_change,
    quorum,
    single,
    stop_all,
    wait_caught_up,
    wait_for_leader,
)
from migrate.kraft.reader import METADATA_PARTITION_DIR, load_image
from migrate.kraft.snapshot import write_snapshot
from migrate.zk.embedded import EmbeddedZooKeeper
from tests.support.bridge_process import BridgeProcess

CHROOT = "/kafka"
ZK_HEAP = "-Xmx2g"
STOP_TARGET_S = 5.0
CHECK_TARGET_S = 10.0
DUAL_WRITE_TIMEOUT_S = 3600.0


def timed_stop(bridge: BridgeProcess) -> float:
    """Seconds from SIGTERM to the process's exit (which must be 0: a clean stop)."""
    assert bridge.process is not None
    start = time.perf_counter()
    bridge.process.send_signal(signal.SIGTERM)
    code = bridge.process.wait(300)
    seconds = time.perf_counter() - start
    if code != 0:
        raise RuntimeError(f"bridge {bridge.node_id} exited {code} on SIGTERM:\n{bridge.log_tail(40)}")
    return seconds


def snapshot_at_log_end(metadata_dir: Path) -> dict[str, Any]:
    """The newest snapshot in the directory against the last metadata record of its log: whether the next
    reader loads the snapshot instead of replaying records (control records after it do not count)."""
    pdir = metadata_dir / METADATA_PARTITION_DIR
    snapshots = sorted(pdir.glob("*.checkpoint"), key=lambda p: int(p.name.split("-")[0]))
    _image, report = load_image(pdir)
    last = report.last_metadata_offset
    newest = snapshots[-1].name if snapshots else None
    covers = newest is not None and (last is None or int(newest.split("-")[0]) > last)
    return {"newest_snapshot": newest, "last_log_offset": report.last_log_offset,
            "last_metadata_offset": last, "snapshot_at_log_end": covers}  # fmt: skip


def snapshot_floor(metadata_dir: Path, scratch: Path) -> float:
    """Seconds `write_snapshot` takes for the directory's image, written elsewhere (the stop's own floor)."""
    image, _report = load_image(metadata_dir / METADATA_PARTITION_DIR)
    scratch.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    write_snapshot(scratch, image)
    return time.perf_counter() - start


def timed_check(bridge: BridgeProcess, zk_connect: str, voters: str) -> tuple[float, int, str]:
    command = [*zk2kraft_command(), "handoff", "check", "--metadata-dir", str(bridge.metadata_dir),
               "--zk", zk_connect, "--node-id", str(bridge.node_id), "--voters", voters]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    return time.perf_counter() - start, done.returncode, done.stdout + done.stderr


def check_floor(metadata_dir: Path) -> float:
    """The check's floor: a child process's start-up plus the plain `load_image` of the directory."""
    start = time.perf_counter()
    subprocess.run([*zk2kraft_command(), "--help"], capture_output=True, check=True, timeout=120)
    startup = time.perf_counter() - start
    start = time.perf_counter()
    load_image(metadata_dir / METADATA_PARTITION_DIR)
    return startup + time.perf_counter() - start


def run(partitions: int, seed: int = 7) -> dict[str, Any]:
    load_before = load_average()
    spec = cluster_spec(partitions, seed)
    values = Values()
    result: dict[str, Any] = {"machine": platform.platform(), "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="bench-clean-stop-") as tmp_text:
        tmp = Path(tmp_text)
        cluster = generate(spec, CHROOT)
        topic = first_topic(cluster.model.topics)
        write_data_dir(cluster, tmp / "zk" / "data")
        result["partitions"] = cluster.model.partition_count
        with EmbeddedZooKeeper(tmp / "zk", startup_timeout=600, jvm_options=(ZK_HEAP,)) as zookeeper:
            zk_connect = zookeeper.connect_string + CHROOT
            wait_for_expired_broker_sessions(zk_connect)
            bridges = quorum(zk_connect, tmp / "quorum", empty=False)
            alone = single(zk_connect, tmp / "single")
            try:
                alone.start()
                wait_for_leader([alone], DUAL_WRITE_TIMEOUT_S)
                alone.terminate()
                from_copies(alone.metadata_dir, bridges)
                for bridge in bridges:
                    bridge.start()
                leader = wait_for_leader(bridges, DUAL_WRITE_TIMEOUT_S)
                wait_caught_up(leader, 600)
                refused = probe_change(leader.listen_port, topic, values.next(), timeout=60)
                if refused is not None:
                    raise RuntimeError(f"the leader refused a change: {refused}")
                wait_caught_up(leader, 600)
                follower = next(b for b in bridges if b is not leader)
                result["follower_stop_s"] = round(timed_stop(follower), 3)
                result["leader_stop_s"] = round(timed_stop(leader), 3)
                result["leader_stop_log"] = leader.log_tail(30).splitlines()
                result["follower_directory"] = snapshot_at_log_end(follower.metadata_dir)
                result["leader_directory"] = snapshot_at_log_end(leader.metadata_dir)
                voters = next(a for a in zip(leader.extra_args, leader.extra_args[1:], strict=False)
                              if a[0] == "--voters")[1]  # fmt: skip
                check_s, code, output = timed_check(leader, zk_connect, voters)
                result["handoff_check_s"] = round(check_s, 3)
                result["handoff_check_exit"] = code
                if code != 0:
                    result["handoff_check_output"] = output[-2000:]
                result["floor_snapshot_write_s"] = round(snapshot_floor(leader.metadata_dir, tmp / "scratch"), 3)
                result["floor_check_s"] = round(check_floor(leader.metadata_dir), 3)
            finally:
                stop_all([alone, *bridges])
                shutil.rmtree(tmp / "scratch", ignore_errors=True)
    result["ratios"] = {
        "leader_stop_over_snapshot_write": round(result["leader_stop_s"] / result["floor_snapshot_write_s"], 2),
        "check_over_floor": round(result["handoff_check_s"] / result["floor_check_s"], 2),
    }
    result["load_average_before"] = load_before
    result["load_average_after"] = load_average()
    return result


def report(result: dict[str, Any]) -> str:
    stop, check = result["leader_stop_s"], result["handoff_check_s"]
    return "\n".join([
        f"{result['partitions']:,} partitions; leader clean stop {stop} s (target < {STOP_TARGET_S} s: "
        f"{'met' if stop < STOP_TARGET_S else 'NOT met'}), {result['ratios']['leader_stop_over_snapshot_write']}x "
        f"its snapshot's own write ({result['floor_snapshot_write_s']} s); follower stop "
        f"{result['follower_stop_s']} s; snapshots at log end: leader "
        f"{result['leader_directory']['snapshot_at_log_end']}, follower "
        f"{result['follower_directory']['snapshot_at_log_end']}",
        f"handoff check {check} s, exit {result['handoff_check_exit']} (target < {CHECK_TARGET_S} s: "
        f"{'met' if check < CHECK_TARGET_S else 'NOT met'}), {result['ratios']['check_over_floor']}x its floor "
        f"(start-up + load_image, {result['floor_check_s']} s)",
    ])  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=200_000)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    print(f"# {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC", flush=True)
    result = run(args.partitions)
    print(json.dumps(result, indent=2))
    print(report(result))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
