"""Benchmark: brokers heartbeating through a leader failover of three bridges, against the same run without one.

    python -m bench.bench_quorum_brokers [--brokers 300] [--seconds 20] [--interval 2]

A private embedded ZooKeeper is seeded with a small synthetic Kafka cluster (`bench.generate_cluster`), and
three `zk2kraft bridge run --voters` processes form one Raft quorum over it, WITHOUT rehearsal (the leader
waits for the brokers and fences silent ones, as Kafka's controller does). A fleet of simulated
ZooKeeper-mode brokers in this process (`bench.bench_brokers.Fleet`: one asyncio loop, a connection each,
heartbeats every `--interval` s, Kafka's broker.heartbeat.interval.ms of 2 s by default, session 9 s) knows
the voters as `controller.quorum.voters`: a request answered NOT_CONTROLLER or a dropped connection sends a
broker to the next voter. Once every broker is unfenced, two phases of `--seconds` each:

- baseline: the fleet heartbeats, no failover;
- failover: the leader's process gets `--signal` as the phase starts (KILL: a crash, its connections reset;
  STOP: a paused process, its connections open and silent); another voter leads and reaches DUAL_WRITE.

Reported per phase: brokers fenced (a heartbeat answered fenced, or with an error other than NOT_CONTROLLER,
after the broker was unfenced; target 0), the longest time between two answered heartbeats of one broker,
and for the failover the time from the kill to a new leader in DUAL_WRITE; the new leader's /status counts at
the end (fenced target 0).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from bench import broker_requests
from bench.bench_bridge import CHROOT, ROOT, load_average, seed_cluster
from bench.bench_brokers import Fleet, FleetBroker
from bridge.kafka.client import ConnectionClosedError, KafkaConnection
from bridge.shim.follower import MetadataFollower
from migrate.errors import Zk2KraftError
from migrate.zk.embedded import EmbeddedZooKeeper, free_ports

VOTER_IDS = (3000, 3001, 3002)
READY_TIMEOUT_S = 300.0
REQUEST_TIMEOUT_S = 2.0
"""The fleet's controller channel gives up on an unanswered request after this long and tries another voter: a
Kafka broker's channel follows the leader its Raft observer learns, which gives up on a silent leader after the
fetch timeout (2 s)."""
Address = tuple[str, int]


# ---------------------------------------------------------------- the voters (child processes)


@dataclass
class Voter:
    """`zk2kraft bridge run --voters …` in a child process."""

    node_id: int
    listen_port: int
    metrics_port: int
    process: subprocess.Popen[bytes]
    log_path: Path

    @classmethod
    def start(
        cls, zk_connect: str, directory: Path, node_id: int, ports: tuple[int, int], voters: str
    ) -> Voter:
        listen_port, metrics_port = ports
        log_path = directory / f"voter-{node_id}.log"
        command = [
            sys.executable, "-m", "cli.main", "bridge", "run", "--zk", zk_connect,
            "--metadata-dir", str(directory / f"meta-{node_id}"), "--node-id", str(node_id),
            "--listen", f"127.0.0.1:{listen_port}", "--metrics", f"127.0.0.1:{metrics_port}",
            "--voters", voters, "--format-empty-voter-directory",
        ]  # fmt: skip
        with open(log_path, "wb") as out:
            process = subprocess.Popen(command, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        return cls(node_id, listen_port, metrics_port, process, log_path)

    @property
    def address(self) -> Address:
        return ("127.0.0.1", self.listen_port)

    def status(self) -> dict[str, Any] | None:
        """Its `/status`, or None while nothing answers."""
        if self.process.poll() is not None:
            return None
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/status", timeout=5) as reply:
                found: dict[str, Any] = json.loads(reply.read())
                return found
        except (OSError, urllib.error.URLError, ValueError):
            return None

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(30)

    def stopped(self) -> bool:
        """Paused by SIGSTOP (it would not answer the SIGTERM of `stop`)."""
        try:
            return Path(f"/proc/{self.process.pid}/stat").read_text().split(") ")[1].startswith("T")
        except (OSError, IndexError):
            return False

    def stop(self) -> None:
        if self.stopped():
            self.kill()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.kill()

    def log_tail(self) -> str:
        return self.log_path.read_text("utf-8", "replace")[-3000:]


async def leader_in_dual_write(voters: list[Voter]) -> Voter | None:
    """The voter whose /status says DUAL_WRITE as the Raft leader, if any."""
    loop = asyncio.get_running_loop()
    statuses = await asyncio.gather(*(loop.run_in_executor(None, voter.status) for voter in voters))
    for voter, status in zip(voters, statuses, strict=True):
        raft = (status or {}).get("raft") or {}
        if status is not None and status.get("state") == "DUAL_WRITE" and raft.get("role") == "leader":
            return voter
    return None


# ---------------------------------------------------------------- the fleet, following the quorum's leader


class _NotController(Exception):
    """The voter answered NOT_CONTROLLER: try the next one."""


class QuorumFleet(Fleet):
    """bench_brokers' fleet, each broker given every voter: it finds the leader by trying them in turn.

    A broker counts as fenced when, after its unfence, a heartbeat is answered fenced or with an error other
    than NOT_CONTROLLER (STALE_BROKER_EPOCH: its registration was lost)."""

    def __init__(self, voters: list[Address], cluster_id: str, count: int, interval_s: float) -> None:
        super().__init__(voters[0][1], cluster_id, count, interval_s)
        self.voters = voters
        self.follower = MetadataFollower(voters, cluster_id=cluster_id, poll_interval=0.05)
        self.last_answered: dict[int, float] = {}
        self.longest_gap: dict[int, float] = {}

    def reset_phase(self) -> None:
        """Measure gaps and fences from now on."""
        for broker in self.brokers:
            broker.wrongly_fenced = False
        self.longest_gap.clear()

    def fenced(self) -> int:
        return sum(1 for b in self.brokers if b.wrongly_fenced)

    def longest_gap_s(self) -> float:
        return max(self.longest_gap.values(), default=0.0)

    async def _run(self, broker: FleetBroker, delay: float) -> None:
        await asyncio.sleep(delay)
        at = broker.broker_id % len(self.voters)
        connection: KafkaConnection | None = None
        try:
            while True:
                try:
                    if connection is None:
                        connection = await KafkaConnection.open(
                            *self.voters[at],
                            client_id=f"broker-{broker.broker_id}",
                            timeout=REQUEST_TIMEOUT_S,
                        )
                    if broker.broker_epoch < 0:
                        await self._register_with_voter(connection, broker)
                    else:
                        await self._heartbeat(connection, broker)
                    pause = self.interval
                except (TimeoutError, ConnectionClosedError, OSError, _NotController):
                    if connection is not None:
                        await connection.close()
                    connection, at = None, (at + 1) % len(self.voters)
                    pause = 0.1  # Kafka's retry backoff: the next voter is tried at once
                await asyncio.sleep(pause)
        finally:
            if connection is not None:
                await connection.close()

    async def _register_with_voter(self, connection: KafkaConnection, broker: FleetBroker) -> None:
        request = broker_requests.registration(
            broker.broker_id,
            self.cluster_id,
            "localhost",
            9092 + broker.broker_id % 50000,
            broker.incarnation,
        )
        response = await connection.send(request, timeout=REQUEST_TIMEOUT_S)
        if response.error_code == ErrorCode.not_controller:
            raise _NotController
        if response.error_code == ErrorCode.none:
            broker.broker_epoch = int(response.broker_epoch)
        else:
            broker.errors.append(response.error_code.name)

    async def _heartbeat(self, connection: KafkaConnection, broker: FleetBroker) -> None:
        request = broker_requests.heartbeat(
            broker.broker_id, broker.broker_epoch, self.applied_offset(), broker.caught_up
        )
        response = await connection.send(request, timeout=REQUEST_TIMEOUT_S)
        if response.error_code == ErrorCode.not_controller:
            raise _NotController
        if response.error_code != ErrorCode.none:
            broker.errors.append(response.error_code.name)
            broker.wrongly_fenced = broker.wrongly_fenced or broker.unfenced_once
            return
        now = time.monotonic()
        last = self.last_answered.get(broker.broker_id)
        if last is not None:
            self.longest_gap[broker.broker_id] = max(self.longest_gap.get(broker.broker_id, 0.0), now - last)
        self.last_answered[broker.broker_id] = now
        broker.caught_up = broker.caught_up or bool(response.is_caught_up)
        broker.fenced = bool(response.is_fenced)
        if not broker.fenced:
            broker.unfenced_once = True
        elif broker.unfenced_once:
            broker.wrongly_fenced = True


# ---------------------------------------------------------------- the run


async def measure(
    fleet: QuorumFleet, voters: list[Voter], seconds: float, failure: signal.Signals
) -> dict[str, Any]:
    """Every broker unfenced, then the baseline and the failover phases; their figures."""
    fleet.start()
    started = time.monotonic()
    while fleet.unfenced() < len(fleet.brokers) or await leader_in_dual_write(voters) is None:
        if time.monotonic() - started > READY_TIMEOUT_S:
            raise Zk2KraftError(
                f"{fleet.unfenced()} of {len(fleet.brokers)} brokers unfenced after {READY_TIMEOUT_S:g} s"
            )
        await asyncio.sleep(0.5)
    ready_s = time.monotonic() - started
    await asyncio.sleep(fleet.interval)  # every broker heartbeats once more since its unfence

    print(f"... baseline: {seconds:g} s", file=sys.stderr, flush=True)
    fleet.reset_phase()
    await asyncio.sleep(seconds)
    baseline = {"fenced": fleet.fenced(), "longest_heartbeat_gap_s": round(fleet.longest_gap_s(), 3)}

    old = await leader_in_dual_write(voters)
    assert old is not None
    print(
        f"... failover: {failure.name} to voter {old.node_id}, then {seconds:g} s",
        file=sys.stderr,
        flush=True,
    )
    fleet.reset_phase()
    killed_at = time.monotonic()
    old.process.send_signal(failure)
    survivors = [v for v in voters if v is not old]
    new: Voter | None = None
    while new is None:
        if time.monotonic() - killed_at > READY_TIMEOUT_S:
            raise Zk2KraftError(f"no new leader in DUAL_WRITE {READY_TIMEOUT_S:g} s after the kill")
        await asyncio.sleep(0.05)
        new = await leader_in_dual_write(survivors)
    to_dual_write_s = time.monotonic() - killed_at
    await asyncio.sleep(max(seconds - to_dual_write_s, 3 * fleet.interval))
    failover = {
        "fenced": fleet.fenced(),
        "longest_heartbeat_gap_s": round(fleet.longest_gap_s(), 3),
        "signal": failure.name,
        "killed_voter": old.node_id,
        "new_leader": new.node_id,
        "kill_to_dual_write_s": round(to_dual_write_s, 2),
    }
    status = await asyncio.get_running_loop().run_in_executor(None, new.status)
    await fleet.stop()
    brokers = (status or {}).get("brokers") or {}
    return {
        "ready_s": round(ready_s, 1),
        "baseline": baseline,
        "failover": failover,
        "fenced_in_status_at_end": brokers.get("fenced"),
        "registered_in_status_at_end": brokers.get("registered"),
        "broker_errors": sorted({e for b in fleet.brokers for e in b.errors}),
    }


def run(
    brokers: int,
    *,
    seconds: float = 20.0,
    interval_s: float = 2.0,
    topics: int = 20,
    failure: signal.Signals = signal.SIGKILL,
) -> dict[str, Any]:
    if brokers < 6:
        raise ValueError("the seeded cluster has brokers 1-6; the fleet needs at least 6")
    load_before = load_average()
    with tempfile.TemporaryDirectory(prefix="bench-quorum-brokers-") as tmp_text:
        tmp = Path(tmp_text)
        zookeeper = EmbeddedZooKeeper(tmp / "zk").start()
        voters: list[Voter] = []
        try:
            cluster = seed_cluster(zookeeper.connect_string, CHROOT, topics, seed=4)
            ports = free_ports(2 * len(VOTER_IDS))
            listen, metrics = ports[: len(VOTER_IDS)], ports[len(VOTER_IDS) :]
            option = ",".join(
                f"{node}@127.0.0.1:{port}" for node, port in zip(VOTER_IDS, listen, strict=True)
            )
            for node, listen_port, metrics_port in zip(VOTER_IDS, listen, metrics, strict=True):
                voters.append(
                    Voter.start(
                        zookeeper.connect_string + CHROOT, tmp, node, (listen_port, metrics_port), option
                    )
                )
            assert cluster.model.cluster_id is not None
            fleet = QuorumFleet([v.address for v in voters], cluster.model.cluster_id, brokers, interval_s)
            try:
                measured = asyncio.run(measure(fleet, voters, seconds, failure))
            except BaseException:
                for voter in voters:
                    print(f"--- voter {voter.node_id} ---\n{voter.log_tail()}", file=sys.stderr)
                raise
        finally:
            for voter in voters:
                voter.stop()
            zookeeper.close()
    return {
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "brokers": brokers,
        "heartbeat_interval_s": interval_s,
        "phase_seconds": seconds,
        **measured,
        "load_average_before": load_before,
        "load_average_after": load_average(),
    }


def report(result: dict[str, Any]) -> str:
    baseline, failover = result["baseline"], result["failover"]
    fenced = failover["fenced"] + (result["fenced_in_status_at_end"] or 0)
    return "\n".join(
        [
            f"baseline (no failover): {baseline['fenced']} fenced, longest heartbeat gap "
            f"{baseline['longest_heartbeat_gap_s']} s (interval {result['heartbeat_interval_s']:g} s)",
            f"failover ({failover['signal']} to leader {failover['killed_voter']}, new leader {failover['new_leader']} in "
            f"DUAL_WRITE after {failover['kill_to_dual_write_s']} s): {failover['fenced']} fenced, longest "
            f"heartbeat gap {failover['longest_heartbeat_gap_s']} s",
            f"{result['brokers']:,} brokers: {failover['fenced']} fenced by the failover, "
            f"{result['fenced_in_status_at_end']} fenced in the new leader's /status at the end (target 0): "
            f"{'met' if fenced == 0 else 'NOT met'}; errors other than NOT_CONTROLLER: "
            f"{result['broker_errors'] or 'none'}",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--brokers", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each phase")
    parser.add_argument(
        "--interval", type=float, default=2.0, help="broker.heartbeat.interval.ms, in seconds"
    )
    parser.add_argument("--topics", type=int, default=20, help="topics of the seeded cluster")
    parser.add_argument(
        "--signal", choices=["KILL", "STOP"], default="KILL", help="what the leader's process gets"
    )
    args = parser.parse_args(argv)
    result = run(
        args.brokers,
        seconds=args.seconds,
        interval_s=args.interval,
        topics=args.topics,
        failure=signal.Signals[f"SIG{args.signal}"],
    )
    print(json.dumps(result, indent=2))
    print(report(result))


if __name__ == "__main__":
    main()
