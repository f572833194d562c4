"""`make demo`'s quorum steps: three bridges as one Raft quorum (`--voters`), the leader killed under load.

Each bridge has its own metadata directory; they replicate one log as Kafka's controllers do. Three simulated
ZooKeeper-mode brokers (processes of their own, given the voters as `controller.quorum.voters`) register with
whichever bridge leads and heartbeat; an admin client keeps changing a topic config, trying the voters until
the leader answers (as Kafka's clients follow the active controller). The leader is SIGKILLed; another voter
is elected, brings ZooKeeper up to the committed log, sends the brokers one full sync and serves in
DUAL_WRITE: every acknowledged change is in ZooKeeper and no broker is fenced. The killed bridge then
rejoins as a follower.
"""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import demo

from migrate.zk.embedded import EmbeddedZooKeeper, free_ports
from migrate.zk.live import ZkConnectOptions

VOTERS = (3000, 3001, 3002)
CHROOT = "/quorum-demo"
TOPIC = "current_stock"
FAILOVER_TIMEOUT_S = 60.0


class Voter:
    """One `zk2kraft bridge run --voters …` process and its status URL."""

    def __init__(self, node_id: int, port: int, metrics_port: int, args: list[str]) -> None:
        self.node_id, self.port = node_id, port
        self.status_url = f"http://127.0.0.1:{metrics_port}/status"
        self.log_path = demo.OUT / f"quorum-bridge-{node_id}.log"
        self.args = args
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, *, show: bool) -> None:
        if show:
            shown = " ".join(shlex.quote(a) for a in self.args)
            demo.console.print(f"[bold cyan]$ zk2kraft {shown} 2> {self.log_path.name} &[/]", soft_wrap=True)
        with open(self.log_path, "a") as log_file:
            self.process = subprocess.Popen(
                [str(demo.BIN), *self.args], cwd=demo.ROOT, stdin=subprocess.DEVNULL, stdout=log_file,
                stderr=log_file,
            )  # fmt: skip

    def status(self) -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(self.status_url, timeout=2) as reply:
                return dict(json.loads(reply.read()))
        except OSError:
            return None

    def leads(self) -> bool:
        status = self.status() or {}
        return status.get("state") == "DUAL_WRITE" and (status.get("raft") or {}).get("role") == "leader"


def quorum_steps(zk: EmbeddedZooKeeper, dump: Path) -> None:
    """Step 23: three voters over a fresh copy of the sample cluster, one SIGKILL of the leader."""
    demo.step("23. Three bridges as one Raft quorum (--voters); the leader is killed under admin traffic")
    zk_connect = zk.connect_string + CHROOT
    demo.run("zk", "load", str(dump), "--zk", zk_connect)
    ports = free_ports(2 * len(VOTERS))
    voters_option = ",".join(f"{node}@127.0.0.1:{port}" for node, port in zip(VOTERS, ports, strict=False))
    voters = []
    for index, node in enumerate(VOTERS):
        listen, metrics = ports[index], ports[len(VOTERS) + index]
        args = [
            "bridge", "run", "--zk", zk_connect, "--metadata-dir", str(demo.OUT / f"quorum-meta-{node}"),
            "--node-id", str(node), "--listen", f"127.0.0.1:{listen}", "--metrics", f"127.0.0.1:{metrics}",
            "--voters", voters_option, "--format-empty-voter-directory",
        ]  # fmt: skip
        voters.append(Voter(node, listen, metrics, args))
    brokers: dict[int, tuple[subprocess.Popen[bytes], Path]] = {}
    try:
        for voter in voters:
            voter.start(show=True)
        addresses = ",".join(f"127.0.0.1:{voter.port}" for voter in voters)
        for broker_id in demo.BROKER_IDS:
            brokers[broker_id] = _start_broker(broker_id, zk_connect, addresses)
        leader = _wait_for_leader(voters, "the first election, the brokers and the initial migration")
        _wait_until(leader, "every broker registered and unfenced", _brokers_unfenced)
        demo.say(f"voter {leader.node_id} leads and dual-writes; the others follow its log:")
        for voter in voters:
            raft = (voter.status() or {}).get("raft") or {}
            demo.say(
                f"  {voter.node_id}: {raft.get('role')} in epoch {raft.get('epoch')}, high watermark {raft.get('high_watermark')}"
            )
        traffic = _AdminTraffic(voters)
        traffic.start()
        time.sleep(2.0)
        assert leader.process is not None
        demo.console.print(
            f"[bold cyan]$ kill -KILL {leader.process.pid}   # voter {leader.node_id}, the leader[/]"
        )
        killed_at = time.monotonic()
        leader.process.send_signal(signal.SIGKILL)
        leader.process.wait()
        survivors = [v for v in voters if v is not leader]
        new_leader = _wait_for_leader(survivors, "a new leader")
        demo.say(
            f"voter {new_leader.node_id} leads in DUAL_WRITE {time.monotonic() - killed_at:.1f} s after the kill "
            f"(one election timeout is 1-2 s)"
        )
        time.sleep(2.0)
        after = (new_leader.status() or {}).get("brokers") or {}
        demo.say(
            f"brokers on the new leader: {after.get('registered')} registered, {after.get('fenced')} fenced "
            f"(their sessions carried over, as Kafka's ClusterControlManager.activate gives them)"
        )
        for broker_id, (_process, broker_log) in brokers.items():
            demo.say(f"  broker {broker_id}, last line: {broker_log.read_text().splitlines()[-1]}")
        if after.get("fenced"):
            raise SystemExit(1)
        traffic.stop()
        demo.say(
            f"admin traffic: {traffic.acknowledged} changes acknowledged, {traffic.refused} answered "
            f"NOT_CONTROLLER or unanswered while no leader was known (clients retry those)"
        )
        _show_last_change(zk_connect, traffic.last_value)
        demo.console.print(
            f"[bold cyan]$ zk2kraft bridge run …   # voter {leader.node_id} again, same directory[/]"
        )
        leader.start(show=False)
        deadline = time.monotonic() + FAILOVER_TIMEOUT_S
        while time.monotonic() < deadline:
            raft = (leader.status() or {}).get("raft") or {}
            if raft.get("role") == "follower" and raft.get("leader_id") == new_leader.node_id:
                demo.say(
                    f"voter {leader.node_id} rejoined as a follower of {new_leader.node_id} (epoch {raft.get('epoch')})"
                )
                break
            time.sleep(0.2)
        else:
            demo.say(
                f"[bold red]voter {leader.node_id} did not rejoin as a follower within {FAILOVER_TIMEOUT_S:g} s[/]"
            )
            raise SystemExit(1)
        _cold_handoff(voters, zk_connect, voters_option)
    finally:
        for broker_id, (process, broker_log) in brokers.items():
            demo._stop_child(process, broker_log, f"broker {broker_id}")
        for voter in voters:
            if voter.process is not None:
                demo._stop_child(voter.process, voter.log_path, f"bridge {voter.node_id}")


def _cold_handoff(voters: list[Voter], zk_connect: str, voters_option: str) -> None:
    """Step 24: every bridge stops cleanly; the leader's directory goes to a (simulated) Kafka 3.9 controller;
    the finalize gate refuses while the brokers are still ZooKeeper-mode brokers."""
    demo.step("24. Cold hand-off of the quorum to Kafka 3.9 controllers; the finalize gate refuses for now")
    demo.say(
        "Every bridge stops cleanly (followers first; the leader resigns last), each directory passes "
        "`zk2kraft handoff check`, and the controller that wins the first election (here: the leader's directory, "
        "the longest log) claims ZooKeeper. The brokers are still ZooKeeper-mode brokers: `zk2kraft finalize` "
        "must refuse, writing nothing."
    )
    leader = next(v for v in voters if v.leads())
    for voter in [v for v in voters if v is not leader] + [leader]:
        assert voter.process is not None
        demo._stop_child(voter.process, voter.log_path, f"bridge {voter.node_id}")
    configs = []
    for voter in voters:
        meta = demo.OUT / f"quorum-meta-{voter.node_id}"
        demo.run_tail(1, "handoff", "check", "--metadata-dir", str(meta), "--zk", zk_connect,
                      "--node-id", str(voter.node_id), "--voters", voters_option)  # fmt: skip
        config = demo.write_controller_properties(
            demo.OUT / "quorum-handoff", voter.node_id, voters_option, voter.port, zk_connect, meta
        )
        configs += ["--controller-config", str(config)]
    leader_meta = demo.OUT / f"quorum-meta-{leader.node_id}"
    demo._simulated_controller(leader_meta, zk_connect)
    args = ["finalize", "--zk", zk_connect, "--metadata-dir", str(leader_meta), *configs,
            "--out", str(demo.OUT / "quorum-finalize"), "--min-soak", "0s"]  # fmt: skip
    demo.console.print(f"[bold cyan]$ zk2kraft {' '.join(shlex.quote(a) for a in args)}[/]", soft_wrap=True)
    refused = subprocess.run([str(demo.BIN), *args], cwd=demo.ROOT, capture_output=True, text=True)
    for line in refused.stdout.splitlines():
        if "FAIL" in line or "refused" in line or "NOT" in line:
            demo.console.print(line, soft_wrap=True)
    written = (demo.OUT / "quorum-finalize").exists()
    demo.say(f"exit code {refused.returncode}; {demo.OUT.name}/quorum-finalize written: {written}")
    if refused.returncode != 1 or written:
        demo.say("[bold red]finalize should have refused (exit 1) and written nothing[/]")
        raise SystemExit(1)


def _start_broker(broker_id: int, zk_connect: str, voters: str) -> tuple[subprocess.Popen[bytes], Path]:
    args = [
        "-m", "tests.support.broker_process", "--id", str(broker_id), "--zk", zk_connect,
        "--controller", voters.split(",")[0], "--voters", voters,
    ]  # fmt: skip
    log_path = demo.OUT / f"quorum-broker-{broker_id}.log"
    demo.say(f"[bold cyan]$ python {' '.join(shlex.quote(a) for a in args)} > {log_path.name} &[/]")
    with open(log_path, "w") as log_file:
        process = subprocess.Popen(
            [sys.executable, *args], cwd=demo.ROOT, stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file
        )
    return process, log_path


def _brokers_unfenced(status: dict[str, Any]) -> bool:
    brokers = status.get("brokers") or {}
    return brokers.get("registered") == len(demo.BROKER_IDS) and brokers.get("fenced") == 0


def _wait_until(voter: Voter, what: str, done: Any) -> None:
    deadline = time.monotonic() + FAILOVER_TIMEOUT_S
    while time.monotonic() < deadline:
        if done(voter.status() or {}):
            return
        time.sleep(0.1)
    demo.say(f"[bold red]bridge {voter.node_id}: not {what} within {FAILOVER_TIMEOUT_S:g} s[/]")
    raise SystemExit(1)


def _wait_for_leader(voters: list[Voter], what: str) -> Voter:
    deadline = time.monotonic() + FAILOVER_TIMEOUT_S
    while time.monotonic() < deadline:
        for voter in voters:
            if voter.process is not None and voter.process.poll() is not None:
                demo.say(f"[bold red]bridge {voter.node_id} exited with code {voter.process.returncode}[/]")
                demo.say("\n".join(voter.log_path.read_text().splitlines()[-20:]))
                raise SystemExit(1)
            if voter.leads():
                return voter
        time.sleep(0.1)
    demo.say(f"[bold red]no voter led in DUAL_WRITE within {FAILOVER_TIMEOUT_S:g} s ({what})[/]")
    raise SystemExit(1)


class _AdminTraffic(threading.Thread):
    """IncrementalAlterConfigs of retention.ms, one at a time, sent to whichever voter answers as leader."""

    def __init__(self, voters: list[Voter]) -> None:
        super().__init__(daemon=True)
        self.voters = voters
        self.acknowledged = 0
        self.refused = 0
        self.last_value: str | None = None
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()
        self.join(30)

    def run(self) -> None:
        from bridge.kafka.client import send_request_sync

        value = 3_600_000
        while not self._halt.is_set():
            value += 1
            answered = False
            for voter in self.voters:
                try:
                    reply = send_request_sync(
                        "127.0.0.1", voter.port, demo._set_retention(TOPIC, str(value)), timeout=3
                    )
                except Exception:  # a killed voter: try the next
                    continue
                if all(r.error_code.value == 0 for r in reply.responses):
                    self.acknowledged += 1
                    self.last_value = str(value)
                    answered = True
                    break
            if not answered:
                self.refused += 1
                time.sleep(0.1)


def _show_last_change(zk_connect: str, value: str | None) -> None:
    client = ZkConnectOptions(connect=zk_connect).kazoo_client()
    client.start(timeout=30)
    try:
        data, _stat = client.get(f"/config/topics/{TOPIC}")
    finally:
        client.stop()
    in_zk = json.loads(data).get("config", {}).get("retention.ms")
    mark = "[green]equal[/]" if in_zk == value else "[bold red]DIFFERENT[/]"
    demo.say(
        f"last acknowledged retention.ms {value}; ZooKeeper's /config/topics/{TOPIC} holds {in_zk}: {mark}"
    )
    if in_zk != value:
        raise SystemExit(1)
