"""Shared by the quorum benchmarks: three `zk2kraft bridge run --voters` subprocesses (or one bridge alone) over
one ZooKeeper, which of them leads, one timed IncrementalAlterConfigs, and the leader's log lines as phases."""

from __future__ import annotations

import datetime
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from bench.bench_bridge import WireClient, set_topic_config
from bench.generate_cluster import ClusterSpec
from migrate.errors import Zk2KraftError
from tests.support.bridge_process import BridgeProcess

VOTER_IDS = (3000, 3001, 3002)
PARTITIONS_PER_TOPIC = 100
STATUS_POLL_S = 0.02


# ---------------------------------------------------------------- processes


def cluster_spec(partitions: int, seed: int) -> ClusterSpec:
    """The quorum benchmarks' generated cluster: 100 partitions a topic, 3 brokers, replication factor 3."""
    per_topic = min(PARTITIONS_PER_TOPIC, partitions)
    return ClusterSpec(
        topics=max(1, partitions // per_topic), partitions_per_topic=per_topic, brokers=3, replication_factor=3,
        seed=seed,
    )


def first_topic(topics: Iterable[str]) -> str:
    """The first of the cluster's own topics (internal ones skipped): the one the benchmarks change."""
    return sorted(t for t in topics if not t.startswith("__"))[0]


def quorum(zk_connect: str, tmp: Path, *, name: str = "voter", empty: bool = True) -> list[BridgeProcess]:
    """Three voters of one quorum over `zk_connect` (rehearsal: no broker needed), not started yet; `empty`:
    on new directories (`--format-empty-voter-directory`), else on copies of one bridge's (`from_copies`)."""
    tmp.mkdir(parents=True, exist_ok=True)
    bridges = [
        BridgeProcess(zk_connect=zk_connect, metadata_dir=tmp / f"{name}-{node}", node_id=node,
                      log_path=tmp / f"{name}-{node}.log")
        for node in VOTER_IDS
    ]  # fmt: skip
    voters = ",".join(f"{b.node_id}@127.0.0.1:{b.listen_port}" for b in bridges)
    for bridge in bridges:
        bridge.extra_args = ["--voters", voters, *(["--format-empty-voter-directory"] if empty else [])]
    return bridges


def from_copies(source: Path, voters: Sequence[BridgeProcess]) -> None:
    """Each voter's directory a copy of a stopped bridge's `source`, its `node.id` set to the voter's (the way
    from one bridge to a quorum in docs/operations.md)."""
    for voter in voters:
        shutil.copytree(source, voter.metadata_dir)
        meta = voter.metadata_dir / "meta.properties"
        text = re.sub(r"(?m)^node\.id=.*$", f"node.id={voter.node_id}", meta.read_text())
        meta.write_text(text)


def single(zk_connect: str, tmp: Path, *, name: str = "single") -> BridgeProcess:
    """One bridge, a quorum of itself, as before `--voters` existed (not started yet)."""
    tmp.mkdir(parents=True, exist_ok=True)
    return BridgeProcess(
        zk_connect=zk_connect, metadata_dir=tmp / name, node_id=VOTER_IDS[0], log_path=tmp / f"{name}.log"
    )


def leader_in_dual_write(bridges: Sequence[BridgeProcess]) -> BridgeProcess | None:
    """The running bridge whose `/status` says DUAL_WRITE (the Raft leader, when it has a quorum)."""
    for bridge in bridges:
        if bridge.running:
            status = bridge.status()
            if status is not None and status.get("state") == "DUAL_WRITE":
                return bridge
    return None


def wait_for_leader(
    bridges: Sequence[BridgeProcess], timeout: float, progress_s: float = 30.0
) -> BridgeProcess:
    """The bridge that reaches DUAL_WRITE (a progress line every `progress_s`); fails with the logs' tails."""
    deadline = time.monotonic() + timeout
    shown = time.monotonic()
    while time.monotonic() < deadline:
        found = leader_in_dual_write(bridges)
        if found is not None:
            return found
        dead = [b for b in bridges if not b.running]
        if dead:
            raise RuntimeError("a bridge exited:\n" + "\n".join(b.log_tail(30) for b in dead))
        if time.monotonic() - shown > progress_s:
            shown = time.monotonic()
            states = [(b.node_id, (b.status() or {}).get("state")) for b in bridges]
            print(f"# waiting for DUAL_WRITE: {states}", file=sys.stderr, flush=True)
        time.sleep(STATUS_POLL_S)
    raise RuntimeError(
        f"no bridge reached DUAL_WRITE within {timeout} s\n" + "\n".join(b.log_tail(30) for b in bridges)
    )


def wait_caught_up(leader: BridgeProcess, timeout: float) -> None:
    """Until the leader's `/status` shows every voter caught up (its log end at the leader's)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        raft = (leader.status() or {}).get("raft") or {}
        voters = raft.get("voters") or []
        ends = {v.get("log_end_offset") for v in voters}
        if voters and all(v.get("caught_up") for v in voters) and len(ends) == 1:
            return
        time.sleep(0.1)
    raise RuntimeError(f"the followers did not catch up within {timeout} s: {leader.status()}")


def wait_zookeeper_copies(bridges: Sequence[BridgeProcess], timeout: float) -> None:
    """Until every running follower's `/status` says its copy of ZooKeeper is current."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rafts = [(b.status() or {}).get("raft") or {} for b in bridges if b.running]
        if all(r.get("role") == "leader" or r.get("zookeeper_copy") == "current" for r in rafts):
            return
        time.sleep(0.1)
    raise RuntimeError(f"the followers' copies of ZooKeeper were not current within {timeout} s")


def stop_all(bridges: Sequence[BridgeProcess]) -> None:
    for bridge in bridges:
        if bridge.running:
            try:
                bridge.terminate(timeout=60)
            except AssertionError as exc:
                print(f"# {exc}", file=sys.stderr)


# ---------------------------------------------------------------- admin requests


def probe_change(port: int, topic: str, value: int, timeout: float) -> str | None:
    """One IncrementalAlterConfigs (SET retention.ms of `topic` to `value`) on a new connection to `port`;
    None when it succeeded, else why not (refused, an error code, no answer)."""
    try:
        client = WireClient(port, client_id="bench-failover")
    except OSError as exc:
        return f"connect: {exc}"
    try:
        client.sock.settimeout(timeout)
        client.exchange([set_topic_config(topic, value)], f"IncrementalAlterConfigs of {topic}")
        return None
    except (OSError, Zk2KraftError) as exc:
        return str(exc)[:200]
    finally:
        client.close()


# ---------------------------------------------------------------- log lines


_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \w+ \S+ (.*)$")
PHASE_EVENTS = ("event=raft_role", "event=raft_leading", "event=state_transition", "event=controller_claimed",
                "event=reconciliation", "event=leadership_lost")  # fmt: skip


def log_phases(log_text: str, since_epoch_s: float, limit: int = 40) -> list[dict[str, Any]]:
    """The leader's log lines of interest after `since_epoch_s` (wall clock), each with ms since then."""
    phases: list[dict[str, Any]] = []
    for line in log_text.splitlines():
        match = _LINE.match(line)
        if match is None or not any(event in match.group(2) for event in PHASE_EVENTS):
            continue
        at = datetime.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()  # local time
        if at + 0.001 < since_epoch_s:
            continue
        phases.append({"ms": round((at - since_epoch_s) * 1000), "line": match.group(2)[:160]})
        if len(phases) >= limit:
            break
    return phases


# ---------------------------------------------------------------- the disk


def fsync_seconds(directory: Path, samples: int = 30) -> float:
    """Median seconds to write a small file and fsync it and its directory (a quorum-state write)."""
    directory.mkdir(parents=True, exist_ok=True)
    times: list[float] = []
    for i in range(samples):
        with tempfile.NamedTemporaryFile(dir=directory, delete=False) as handle:
            start = time.perf_counter()
            handle.write(b'{"leaderId":3000,"leaderEpoch":%d,"votedId":-1}' % i)
            handle.flush()
            os.fsync(handle.fileno())
            path = Path(handle.name)
        os.replace(path, directory / "quorum-state-probe")
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        times.append(time.perf_counter() - start)
    (directory / "quorum-state-probe").unlink()
    return sorted(times)[len(times) // 2]
