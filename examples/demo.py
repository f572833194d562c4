"""`make demo`: a migration rehearsal on an embedded ZooKeeper and the sample cluster in examples/.

Every step runs the real `zk2kraft` command, printed before it runs, so the demo doubles as a tutorial.
Then `zk2kraft bridge run --rehearsal` runs over the sample cluster until DUAL_WRITE and gets admin
requests over the Kafka protocol, directly and through `zk2kraft shim run` with confluent-kafka's
AdminClient; each change is shown in ZooKeeper and in the KRaft metadata log. Last, the real path: a
bridge without `--rehearsal` over a fresh copy of the cluster, three simulated ZooKeeper-mode brokers
(processes of their own) that register, are unfenced and get the controller's requests, and one of them
killed: it is fenced and its leaderships move, in the bridge's log and in ZooKeeper alike. Then the rolling
restart: each broker restarted as a KRaft broker, one at a time, and `zk2kraft finalize-check` with its audit.
Then the hand-off: the bridge stops cleanly, `zk2kraft handoff check` passes on its directory, a simulated Kafka
3.9 controller takes it over and claims ZooKeeper without re-migrating, `zk2kraft finalize` passes its gate and
writes the controller's file without the migration settings, and the controller restarted so finalizes
(POST_MIGRATION, read back by `zk2kraft status`). Last, three bridges as one Raft quorum (`--voters`), the leader killed under admin traffic (demo_quorum.py).
"""

from __future__ import annotations

import datetime
import json
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.rule import Rule

from migrate.kraft.logdir import read_meta_properties
from migrate.zk.embedded import EmbeddedZooKeeper
from migrate.zk.live import ZkConnectOptions

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BIN = Path(sys.executable).parent / "zk2kraft"
OUT = ROOT / "demo-out"
console = Console(highlight=False)


def run(*args: str) -> None:
    """Run one zk2kraft command, echoing it first; stop the demo if it fails."""
    console.print(f"[bold cyan]$ zk2kraft {' '.join(shlex.quote(a) for a in args)}[/]")
    result = subprocess.run([str(BIN), *args], cwd=ROOT)
    if result.returncode != 0:
        console.print(f"[bold red]demo step failed with exit code {result.returncode}[/]")
        sys.exit(result.returncode)


def run_tail(lines: int, *args: str) -> None:
    """Run one zk2kraft command and show only its last `lines` lines of output."""
    console.print(f"[bold cyan]$ zk2kraft {' '.join(shlex.quote(a) for a in args)} | tail -n {lines}[/]")
    result = subprocess.run([str(BIN), *args], cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        console.print(result.stderr)
        console.print(f"[bold red]demo step failed with exit code {result.returncode}[/]")
        sys.exit(result.returncode)
    for line in result.stdout.splitlines()[-lines:]:
        console.print(line, soft_wrap=True)


def step(title: str) -> None:
    console.print(Rule(f"[bold]{title}"))


def main() -> None:
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir()
    kraft_example = HERE / "kraft-metadata"

    step("1. Decode a real KRaft metadata log (Kafka 3.7 node) and count its records")
    run("dump", "--summary", "--format", "table", str(kraft_example / "__cluster_metadata-0"))

    step("2. Replay that log and write the snapshot a KRaft controller would write")
    copy = OUT / "kraft-metadata-copy"
    shutil.copytree(kraft_example, copy)
    run("snapshot", str(copy))
    newest = sorted((copy / "__cluster_metadata-0").glob("*.checkpoint"))[-1]
    run("dump", "--summary", "--format", "table", str(newest))

    step("3. Start an embedded ZooKeeper (from the jars inside pyspark)")
    with (
        tempfile.TemporaryDirectory(prefix="zk2kraft-demo-zk-") as zk_dir,
        EmbeddedZooKeeper(Path(zk_dir)) as zk,
    ):
        console.print(
            f"ZooKeeper {zk.four_letter_word('srvr').splitlines()[0]} serving on {zk.connect_string}"
        )
        _later_steps(zk)
    console.print("ZooKeeper stopped.")
    console.print(Rule("[bold green]demo finished"))
    console.print(f"Outputs are in {OUT.relative_to(ROOT)}/")


def _later_steps(zk: EmbeddedZooKeeper) -> None:
    """Steps that need ZooKeeper: load the sample cluster and migrate it (once those commands exist)."""
    from cli.main import cli

    if "migrate" not in cli.commands:
        return
    sample = HERE / "sample-cluster"
    chroot = "/de-4-3-kafka-cluster"
    step("4. Export the sample cluster from its ZooKeeper snapshots, offline, and load it into ZooKeeper")
    dump = OUT / "sample-cluster.jsonl"
    run("zk", "export", "--zk-data-dir", str(sample), "--chroot", chroot, "-o", str(dump))
    run("zk", "load", str(dump), "--zk", zk.connect_string + chroot)

    step("5. Migrate it: ZooKeeper → KRaft metadata directory, as Kafka 3.9's migration would")
    out = OUT / "kraft-from-zk"
    run("migrate", "--zk", zk.connect_string + chroot, "--out", str(out), "--controller-id", "3000")
    run("dump", "--summary", "--format", "table", str(out / "__cluster_metadata-0"))

    _bridge_steps(zk.connect_string + chroot)

    step("11. Audit with Spark: ZooKeeper (after dual-write) against the bridge's KRaft log")
    # Aligned at the offset /migration records; ZooKeeper's broker registrations are 'expected' differences.
    run(
        "audit",
        "--zk",
        zk.connect_string + chroot,
        "--kraft",
        str(OUT / "bridge-meta"),
        "--out",
        str(OUT / "audit"),
    )

    _broker_steps(zk, dump)

    from demo_quorum import quorum_steps

    quorum_steps(zk, dump)


# ---------------------------------------------------------------- step 6: the bridge controller

BRIDGE_READY_TIMEOUT_S = 60.0
TOPIC = "current_stock"
NEW_RETENTION_MS = "86400000"  # one day; the sample cluster has one hour
NEW_TOPIC = "demo_orders"


def _bridge_steps(zk_connect: str) -> None:
    """Run the bridge over the sample cluster, change metadata through it, show where the changes landed."""
    from bridge.kafka.client import send_request_sync

    step("6. Run the bridge controller over the sample cluster until it reaches DUAL_WRITE")
    meta = OUT / "bridge-meta"
    log_path = OUT / "bridge.log"
    args = [
        "bridge", "run", "--zk", zk_connect, "--metadata-dir", str(meta), "--node-id", "3000",
        "--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0", "--rehearsal",
    ]  # fmt: skip
    console.print(f"[bold cyan]$ zk2kraft {' '.join(shlex.quote(a) for a in args)} 2> {log_path.name} &[/]")
    with open(log_path, "w") as log_file:
        bridge = subprocess.Popen(
            [str(BIN), *args], cwd=ROOT, stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file
        )
    try:
        listen_port, status_url = _wait_until_listening(bridge, log_path)
        status = _wait_for_dual_write(bridge, status_url, log_path)
        for line in log_path.read_text().splitlines():
            shown = re.search(r"event=state_transition from=(\w+) to=(\w+)", line)
            if shown:
                console.print(f"  log: state {shown.group(1)} → {shown.group(2)}")
            elif "Completed migration" in line:
                console.print("  log: " + line[line.index("Completed migration") :], soft_wrap=True)
        console.print(f"[bold cyan]$ curl -s {status_url}/status[/]")
        console.print_json(json.dumps(status))

        step(f"7. Change metadata through the bridge's Kafka listener (127.0.0.1:{listen_port})")
        _show_zookeeper(zk_connect, [f"/config/topics/{TOPIC}"])
        console.print(f"IncrementalAlterConfigs: SET retention.ms={NEW_RETENTION_MS} on topic {TOPIC}")
        response = send_request_sync("127.0.0.1", listen_port, _set_retention(TOPIC, NEW_RETENTION_MS))
        for r in response.responses:
            console.print(f"  → {r.resource_name}: {r.error_code.name}")
        console.print(f"CreateTopics: {NEW_TOPIC} with 3 partitions, replication factor 2")
        created = send_request_sync("127.0.0.1", listen_port, _create_topic(NEW_TOPIC, 3, 2))
        for t in created.topics:
            console.print(f"  → {t.name}: {t.error_code.name} {t.error_message or ''}".rstrip())
        topic_created = all(t.error_code.value == 0 for t in created.topics)

        step("8. The changes in ZooKeeper, written exactly as Kafka 3.9 writes them in dual-write")
        changed = [f"/config/topics/{TOPIC}", "/config/changes/<newest>"]
        if topic_created:
            changed += [f"/brokers/topics/{NEW_TOPIC}", f"/brokers/topics/{NEW_TOPIC}/partitions/0/state"]
        _show_zookeeper(zk_connect, [*changed, "/migration"])

        shim_changes = _shim_step(zk_connect, listen_port)
    finally:
        _stop_bridge(bridge, log_path)

    step("10. The same changes in the bridge's KRaft metadata log")
    run("dump", "--summary", "--format", "table", str(meta / "__cluster_metadata-0"))
    # The last records: step 7's ConfigRecord, TopicRecord and PartitionRecords, then step 9's through the shim.
    run_tail((5 if topic_created else 1) + shim_changes, "dump", str(meta / "__cluster_metadata-0"))


# ---------------------------------------------------------------- step 9: a redirect shim

SHIM_TOPIC = "demo_payments"
SHIM_PARTITIONS = 2


def _shim_step(zk_connect: str, controller_port: int) -> int:
    """Admin changes with confluent-kafka through `zk2kraft shim run`; the number of records they made."""
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewTopic,
        ResourceType,
    )

    shim_port = _free_port()
    step("9. Admin changes through a redirect shim with confluent-kafka's AdminClient")
    log_path = OUT / "shim.log"
    args = [
        "shim",
        "run",
        "--listen",
        f"127.0.0.1:{shim_port}",
        "--controller",
        f"127.0.0.1:{controller_port}",
    ]
    console.print(f"[bold cyan]$ zk2kraft {' '.join(shlex.quote(a) for a in args)} 2> {log_path.name} &[/]")
    with open(log_path, "w") as log_file:
        shim = subprocess.Popen(
            [str(BIN), *args], cwd=ROOT, stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file
        )
    try:
        _wait_for_log(shim, log_path, r"event=shim_listening", "shim")
        # log_level 4: librdkafka's info lines (e.g. the disconnect when the shim stops) are noise here.
        admin = AdminClient(
            {"bootstrap.servers": f"127.0.0.1:{shim_port}", "socket.timeout.ms": 30000, "log_level": 4}
        )
        console.print(f"create_topics: {SHIM_TOPIC}, {SHIM_PARTITIONS} partitions, cleanup.policy=compact")
        new_topic = NewTopic(
            SHIM_TOPIC,
            num_partitions=SHIM_PARTITIONS,
            replication_factor=2,
            config={"cleanup.policy": "compact"},
        )
        for name, future in admin.create_topics([new_topic], operation_timeout=30).items():
            future.result(timeout=60)
            console.print(f"  → {name}: created")
        console.print(f"incremental_alter_configs: SET retention.ms={NEW_RETENTION_MS} on {SHIM_TOPIC}")
        entry = ConfigEntry("retention.ms", NEW_RETENTION_MS, incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(ResourceType.TOPIC, SHIM_TOPIC, incremental_configs=[entry])
        for changed, future in admin.incremental_alter_configs([resource]).items():
            future.result(timeout=60)
            console.print(f"  → {changed.name}: altered")
        topics = sorted(admin.list_topics(timeout=30).topics)
        console.print(f"list_topics: {', '.join(topics)}")
        _show_zookeeper(
            zk_connect,
            [f"/config/topics/{SHIM_TOPIC}", "/config/changes/<newest>", f"/brokers/topics/{SHIM_TOPIC}"],
        )
        del admin  # librdkafka would otherwise reconnect to the stopped shim and log the refusal
    finally:
        _stop_child(shim, log_path, "shim")
    # TopicRecord, a PartitionRecord each, the created config's ConfigRecord, the altered one's.
    return 1 + SHIM_PARTITIONS + 2


# ---------------------------------------------------------------- steps 12-19: brokers join, then roll to KRaft

REAL_CHROOT = "/demo-live-cluster"
BROKER_IDS = (1, 2, 3)
KILLED = 1
SESSION_TIMEOUT_S = 9.0  # Kafka's broker.session.timeout.ms default, which the bridge uses
BROKERS_TIMEOUT_S = 60.0


def _broker_steps(zk: EmbeddedZooKeeper, dump: Path) -> None:
    """The real path: a bridge that waits for brokers, three simulated brokers, one of them killed."""
    zk_connect = zk.connect_string + REAL_CHROOT
    step("12. Real path: a bridge without --rehearsal waits for the brokers")
    say("A fresh copy of the sample cluster stands for the live cluster (brokers 1, 2, 3).")
    run("zk", "load", str(dump), "--zk", zk_connect)
    meta = OUT / "bridge-live-meta"
    log_path = OUT / "bridge-live.log"
    args = [
        "bridge", "run", "--zk", zk_connect, "--metadata-dir", str(meta), "--node-id", "3000",
        "--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0",
    ]  # fmt: skip
    say(f"[bold cyan]$ zk2kraft {' '.join(shlex.quote(a) for a in args)} 2> {log_path.name} &[/]")
    with open(log_path, "w") as log_file:
        bridge = subprocess.Popen(
            [str(BIN), *args], cwd=ROOT, stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file
        )
    brokers: dict[int, tuple[subprocess.Popen[bytes], Path]] = {}
    agree = False
    try:
        listen_port, status_url = _wait_until_listening(bridge, log_path)
        waiting = _wait_for_status(bridge, log_path, status_url, "to wait for brokers", _waiting_for)
        say(f"  /status: state {waiting['state']}, waiting for brokers {waiting['brokers']['waiting_for']}")
        shown = re.search(r"event=waiting_for_brokers.*", log_path.read_text())
        if shown:
            say(f"  log: {shown.group(0)}")

        step("13. Three ZooKeeper-mode brokers register, are unfenced, get their metadata")
        say(
            "Each is a process of its own (tests/support/broker_process.py): it registers in ZooKeeper, follows "
            "__cluster_metadata, registers with the bridge (IsMigratingZkBroker=true) and heartbeats every 2 s."
        )
        for broker_id in BROKER_IDS:
            brokers[broker_id] = _start_broker(broker_id, zk_connect, listen_port)
        ports = {broker_id: _listening_port(log) for broker_id, (_, log) in brokers.items()}
        status = _wait_for_status(bridge, log_path, status_url, "to unfence all three brokers", _all_unfenced)
        # Once migrated, the bridge full-syncs the unfenced brokers; one unfenced later gets the same metadata
        # from the incremental requests its unfencing sends (UpdateMetadata with every partition, LeaderAndIsr).
        _wait_for_broker_logs(
            brokers, r", unfenced,.*received LeaderAndIsr [1-9]", "unfenced, with LeaderAndIsr received"
        )
        for line in log_path.read_text().splitlines():
            found = re.search(
                r"event=(state_transition from=\w+ to=(?:WAIT_FOR_BROKERS|DUAL_WRITE)|broker_registered .*)",
                line,
            )
            if found:
                say(f"  log: {found.group(0)}")
        for broker_id, (_, broker_log) in brokers.items():
            say(f"  broker {broker_id} log, last line: {broker_log.read_text().splitlines()[-1]}")
        say(f"  /status: state {status['state']}, brokers {status['brokers']}")
        _live_admin_step(listen_port, brokers)

        step(f"15. Kill broker {KILLED} (SIGKILL): it is fenced and its leaderships move")
        picks = _partitions_led_by(zk_connect, KILLED)
        say("Leaderships before (the bridge's log, through Metadata; ZooKeeper's state znodes):")
        _show_leaderships(listen_port, zk_connect, picks)
        process, _ = brokers.pop(KILLED)
        say(f"[bold cyan]$ kill -KILL {process.pid}[/]  (broker {KILLED})")
        killed_at = time.monotonic()
        process.kill()
        process.wait()
        _wait_for_status(bridge, log_path, status_url, f"to fence broker {KILLED}", _one_fenced)
        say(
            f"  broker {KILLED} fenced {time.monotonic() - killed_at:.1f} s after it died "
            f"(broker.session.timeout.ms = {SESSION_TIMEOUT_S * 1000:g})"
        )
        say("Leaderships after:")
        agree = _show_leaderships(listen_port, zk_connect, picks)
        say(
            "  the log and ZooKeeper agree on every partition shown"
            if agree
            else "[bold red]  the log and ZooKeeper DISAGREE (see above)[/]"
        )

        _rolling_steps(bridge, log_path, status_url, zk_connect, listen_port, meta, brokers, ports)

        step("22. Stop the KRaft brokers (controlled shutdown)")
        for broker_id, (process, broker_log) in sorted(brokers.items()):
            _stop_child(process, broker_log, f"broker {broker_id}")
            say(f"  broker {broker_id} log, last line: {broker_log.read_text().splitlines()[-1]}")
        brokers.clear()
    finally:
        for process, broker_log in brokers.values():
            _stop_child(process, broker_log, "broker")
        _stop_bridge(bridge, log_path)
    run("dump", "--summary", "--format", "table", str(meta / "__cluster_metadata-0"))
    if not agree:
        sys.exit(1)


LIVE_TOPIC = "demo_live_orders"
SCRATCH_TOPIC = "demo_live_scratch"


def _live_admin_step(listen_port: int, brokers: dict[int, tuple[subprocess.Popen[bytes], Path]]) -> None:
    """Dual-write with admin traffic: create two topics, alter one's config, delete the other; the brokers' logs
    count the requests the bridge sent them for it (a config change sends none, as in Kafka)."""
    from bridge.kafka.client import send_request_sync

    step("14. Admin changes in dual-write: the brokers hear of each topic change")
    before = {b: _received(log) for b, (_, log) in brokers.items()}
    for name, partitions in ((LIVE_TOPIC, 3), (SCRATCH_TOPIC, 1)):
        created = send_request_sync("127.0.0.1", listen_port, _create_topic(name, partitions, 2))
        say(f"CreateTopics {name} ({partitions} partitions, replication factor 2): {created.topics[0].error_code.name}")
    altered = send_request_sync("127.0.0.1", listen_port, _set_retention(LIVE_TOPIC, NEW_RETENTION_MS))
    say(f"IncrementalAlterConfigs retention.ms={NEW_RETENTION_MS} on {LIVE_TOPIC}: {altered.responses[0].error_code.name}")
    deleted = send_request_sync("127.0.0.1", listen_port, _delete_topic(SCRATCH_TOPIC))
    say(f"DeleteTopics {SCRATCH_TOPIC}: {deleted.responses[0].error_code.name}")
    # Both replicas of the scratch topic drop its data on StopReplica with delete.
    deadline = time.monotonic() + BROKERS_TIMEOUT_S
    while sum(_received(log).get("StopReplica", 0) - before[b].get("StopReplica", 0) for b, (_, log) in brokers.items()) < 2:
        if time.monotonic() > deadline:
            say(f"[bold red]the deleted topic's replicas got no StopReplica; see {OUT.relative_to(ROOT)}/broker-*.log[/]")
            break
        time.sleep(0.1)
    for broker_id, (_, broker_log) in sorted(brokers.items()):
        after = _received(broker_log)
        sent = ", ".join(f"{api} +{after[api] - before[broker_id].get(api, 0)}" for api in after)
        say(f"  broker {broker_id}: {sent}; log: {broker_log.read_text().splitlines()[-1].split('; ')[1]}")


def _received(log_path: Path) -> dict[str, int]:
    """The request counts on a ZooKeeper-mode broker's last log line ("received LeaderAndIsr 3, ...")."""
    found = re.search(r"received (.*) \(applied", log_path.read_text().splitlines()[-1])
    if found is None:
        return {}
    return {api: int(count) for api, count in (part.rsplit(" ", 1) for part in found.group(1).split(", "))}


FINALIZE_SOAK = "10s"
"""The demo's bridge has led for about a minute; in production keep the 7-day default (or longer)."""


def _rolling_steps(
    bridge: subprocess.Popen[bytes],
    log_path: Path,
    status_url: str,
    zk_connect: str,
    listen_port: int,
    meta: Path,
    brokers: dict[int, tuple[subprocess.Popen[bytes], Path]],
    ports: dict[int, int],
) -> None:
    """Restart every broker as a KRaft broker, one at a time, then run finalize-check (audit included)."""
    step("16. Rolling restart: each broker back as a KRaft broker, one at a time")
    say(
        "Same id, same listener port. A ZooKeeper-mode broker gets the controller's LeaderAndIsr, UpdateMetadata "
        "and StopReplica (counted in its log); restarted with --kraft it registers with IsMigratingZkBroker=false, "
        "fetches the metadata log instead and gets no controller requests (its log says so)."
    )
    for broker_id in BROKER_IDS:
        if broker_id in brokers:
            process, broker_log = brokers.pop(broker_id)
            say(f"  broker {broker_id} log before, last line: {broker_log.read_text().splitlines()[-1]}")
            _stop_child(process, broker_log, f"broker {broker_id} (ZooKeeper mode)")
        else:
            say(f"  broker {broker_id} is down since step 15 (killed)")
        brokers[broker_id] = _start_broker(
            broker_id, zk_connect, listen_port, kraft=True, port_of_broker=ports[broker_id], meta=meta
        )
        status = _wait_for_status(
            bridge, log_path, status_url, f"to register broker {broker_id} as a KRaft broker",
            lambda s, b=broker_id: _kraft_registered(s, b),
        )  # fmt: skip
        _wait_for_broker_logs({broker_id: brokers[broker_id]}, ", unfenced,")
        say(f"  broker {broker_id} log now, last line: {brokers[broker_id][1].read_text().splitlines()[-1]}")
        say(f"  /status: brokers {status['brokers']}")
    say("Every broker runs in KRaft mode; the bridge still dual-writes ZooKeeper until the migration is finalized.")

    step("17. The gate before finalizing: zk2kraft finalize-check")
    say(
        f"--min-soak {FINALIZE_SOAK}: the condition asks that no controller failover happened for that long; the "
        "demo's bridge has led for a minute or so, a production migration keeps the 7-day default."
    )
    run(
        "finalize-check", "--zk", zk_connect, "--bridge-status", status_url, "--metadata-dir", str(meta),
        "--min-soak", FINALIZE_SOAK, "--audit-out", str(OUT / "audit-final"),
    )  # fmt: skip

    step("18. The audit finalize-check ran: ZooKeeper against the log")
    summary = json.loads((OUT / "audit-final" / "summary.json").read_text())
    say(f"  {OUT.relative_to(ROOT)}/audit-final/summary.json: " + json.dumps(_audit_headline(summary)))
    _handoff_steps(bridge, log_path, status_url, zk_connect, listen_port, meta)


def _handoff_steps(
    bridge: subprocess.Popen[bytes], log_path: Path, status_url: str, zk_connect: str, listen_port: int, meta: Path
) -> None:
    """Hand the bridge's directory to a Kafka 3.9 controller (simulated), then finalize through the gate."""
    step("19. Hand-off: the bridge stops cleanly; its directory is checked as a Kafka 3.9 controller reads it")
    run("bridge", "stop", "--status", status_url, "--for-handoff")
    if bridge.wait(10) != 0:
        _bridge_failed(bridge, log_path, f"exited with code {bridge.returncode} on its stop")
    hint = re.search(r"event=next_step (.*)", log_path.read_text())
    if hint:
        say(f"  bridge log: {hint.group(1)}")

    step("20. A Kafka 3.9 controller takes over that directory (simulated: tests/support/real_controller.py)")
    say(
        "Same node.id, same host:port, same directory, zookeeper.metadata.migration.enable=true. Its migration "
        "driver reads /migration (offset > 0: no re-migration), claims /controller with its Raft epoch and "
        "/controller_epoch in one transaction, then dual-writes. The bridge's fence is gone with that claim."
    )
    _show_zookeeper(zk_connect, ["/controller", "/controller_epoch", "/migration"])
    _simulated_controller(meta, zk_connect)
    _show_zookeeper(zk_connect, ["/controller", "/controller_epoch", "/migration"])

    step("21. Finalize: the gate, the controllers' files without the migration, POST_MIGRATION")
    config = write_controller_properties(
        OUT / "handoff", 3000, f"3000@127.0.0.1:{listen_port}", listen_port, zk_connect, meta
    )
    say(
        "--min-soak 0s: the hand-off above was a controller failover seconds ago; a production migration keeps "
        "the 7-day default. Every broker is a KRaft broker, none fenced, ZooKeeper is at the log's end."
    )
    final = OUT / "finalize"
    shutil.rmtree(final, ignore_errors=True)
    run(
        "finalize", "--zk", zk_connect, "--metadata-dir", str(meta), "--controller-config", str(config),
        "--out", str(final), "--min-soak", "0s", "--audit-out", str(OUT / "audit-finalize"),
    )  # fmt: skip
    say(f"The controller restarts with {final.relative_to(ROOT)}/controller-3000.properties (no migration flag):")
    _simulated_controller(meta, zk_connect, "--no-migration")
    run("status", "--zk", zk_connect, "--metadata-dir", str(meta))


def write_controller_properties(folder: Path, node_id: int, voters: str, port: int, zk_connect: str, meta: Path) -> Path:
    """The Kafka 3.9 controller that takes a bridge's place, as `zk2kraft plan` writes one per voter (its
    handoff/controller-<id>.properties, reduced to what a loopback demo needs)."""
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / f"controller-{node_id}.properties"
    config.write_text(
        f"process.roles=controller\nnode.id={node_id}\ncontroller.quorum.voters={voters}\n"
        f"controller.listener.names=CONTROLLER\nlisteners=CONTROLLER://127.0.0.1:{port}\n"
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT\nzookeeper.metadata.migration.enable=true\n"
        f"zookeeper.connect={zk_connect}\nmetadata.log.dir={meta}\nlog.dirs={meta}\n"
    )
    return config


def _simulated_controller(meta: Path, zk_connect: str, *extra: str) -> None:
    args = ["-m", "tests.support.real_controller", "--metadata-dir", str(meta), "--zk", zk_connect, *extra]
    console.print(f"[bold cyan]$ python {' '.join(shlex.quote(a) for a in args)}[/]")
    result = subprocess.run([sys.executable, *args], cwd=ROOT)
    if result.returncode != 0:
        console.print(f"[bold red]the simulated controller did not take over (exit code {result.returncode})[/]")
        sys.exit(1)


def _audit_headline(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary's verdict, exit code and discrepancy counts by class (expected ones included)."""
    return {key: summary[key] for key in ("verdict", "exit_code", "classes")}


def _kraft_registered(status: dict[str, Any], broker_id: int) -> bool:
    """Registered again (now as a KRaft broker), unfenced, and one migrating ZooKeeper broker fewer."""
    brokers = status.get("brokers") or {}
    later = sum(1 for b in BROKER_IDS if b > broker_id)
    return (
        brokers.get("registered") == len(BROKER_IDS)
        and brokers.get("fenced") == 0
        and brokers.get("migrating_zk_brokers") == later
    )


def _start_broker(
    broker_id: int, zk_connect: str, port: int, *, kraft: bool = False, port_of_broker: int = 0,
    meta: Path | None = None,
) -> tuple[subprocess.Popen[bytes], Path]:
    args = [
        "-m", "tests.support.broker_process", "--id", str(broker_id), "--zk", zk_connect,
        "--controller", f"127.0.0.1:{port}",
    ]  # fmt: skip
    if kraft:
        # A KRaft broker keeps no zookeeper.connect: its cluster id comes from meta.properties, the same
        # cluster.id as in the controller's (the demo runs no tests' code in its own process).
        assert meta is not None
        cluster_id = read_meta_properties(meta / "meta.properties").cluster_id
        assert cluster_id is not None
        args = [
            "-m", "tests.support.broker_process", "--id", str(broker_id), "--kraft",
            "--cluster-id", cluster_id, "--port", str(port_of_broker),
            "--controller", f"127.0.0.1:{port}",
        ]  # fmt: skip
    log_path = OUT / f"broker-{broker_id}{'-kraft' if kraft else ''}.log"
    say(f"[bold cyan]$ python {' '.join(shlex.quote(a) for a in args)} > {log_path.name} &[/]")
    with open(log_path, "w") as log_file:
        process = subprocess.Popen(
            [sys.executable, *args], cwd=ROOT, stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file
        )
    return process, log_path


def _listening_port(log_path: Path) -> int:
    """The inter-broker listener's port from a broker process's first line (it restarts on the same one)."""
    deadline = time.monotonic() + BROKERS_TIMEOUT_S
    while time.monotonic() < deadline:
        found = re.search(r"listening on 127\.0\.0\.1:(\d+)", log_path.read_text())
        if found:
            return int(found.group(1))
        time.sleep(0.05)
    say(f"[bold red]{log_path.relative_to(ROOT)} never said which port it listens on[/]")
    sys.exit(1)


def _wait_for_broker_logs(
    brokers: dict[int, tuple[subprocess.Popen[bytes], Path]], pattern: str, what: str = "unfenced"
) -> None:
    """Until each broker's last line matches `pattern` (a heartbeat's answer reaches a broker just after
    /status; the controller's requests just after the bridge's state changes)."""
    deadline = time.monotonic() + BROKERS_TIMEOUT_S
    while time.monotonic() < deadline:
        lasts = [log.read_text().splitlines()[-1:] for _, log in brokers.values()]
        if all(last and re.search(pattern, last[0]) for last in lasts):
            return
        time.sleep(0.1)
    say(f"[bold red]not every broker's log says {what}; see {OUT.relative_to(ROOT)}/broker-*.log[/]")


def _waiting_for(status: dict[str, Any]) -> bool:
    return bool((status.get("brokers") or {}).get("waiting_for"))


def _all_unfenced(status: dict[str, Any]) -> bool:
    brokers = status.get("brokers") or {}
    return (
        status.get("state") == "DUAL_WRITE" and brokers.get("registered") == 3 and brokers.get("fenced") == 0
    )


def _one_fenced(status: dict[str, Any]) -> bool:
    return (status.get("brokers") or {}).get("fenced") == 1


def _wait_for_status(
    bridge: subprocess.Popen[bytes], log_path: Path, status_url: str, what: str, done: Any
) -> dict[str, Any]:
    """Poll /status until `done(status)`; a bridge that exits or takes too long ends the demo."""
    deadline = time.monotonic() + BROKERS_TIMEOUT_S
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        if bridge.poll() is not None:
            _bridge_failed(bridge, log_path, f"exited with code {bridge.returncode} waiting {what}")
        try:
            with urllib.request.urlopen(f"{status_url}/status", timeout=5) as reply:
                status = json.loads(reply.read())
        except OSError:  # the bridge is going away: the poll above says how
            time.sleep(0.1)
            continue
        if done(status):
            return status
        time.sleep(0.1)
    _bridge_failed(bridge, log_path, f"took more than {BROKERS_TIMEOUT_S:g} s {what}; /status: {status}")
    raise AssertionError("unreachable")


def _partitions_led_by(zk_connect: str, broker_id: int) -> list[tuple[str, int]]:
    """Every partition of `current_stock` (replication factor 2) and one of `__consumer_offsets` (1)
    that `broker_id` leads: one moves to another in-sync replica, one is left without a leader."""
    client = ZkConnectOptions(connect=zk_connect).kazoo_client()
    client.start(timeout=30)
    try:
        picks = [(TOPIC, int(p)) for p in sorted(client.get_children(f"/brokers/topics/{TOPIC}/partitions"))]
        for p in sorted(int(p) for p in client.get_children("/brokers/topics/__consumer_offsets/partitions")):
            data, _ = client.get(f"/brokers/topics/__consumer_offsets/partitions/{p}/state")
            if json.loads(data)["leader"] == broker_id:
                picks.append(("__consumer_offsets", p))
                break
    finally:
        client.stop()
        client.close()
    return picks


def _show_leaderships(port: int, zk_connect: str, picks: list[tuple[str, int]]) -> bool:
    """One line a partition: leader, leader epoch and ISR in the bridge's log and in ZooKeeper; all agree?"""
    from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
    from kio.schema.types import TopicName

    from bridge.kafka.client import send_request_sync

    topics = sorted({topic for topic, _ in picks})
    request = MetadataRequest(
        topics=tuple(MetadataRequestTopic(topic_id=None, name=TopicName(t)) for t in topics),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    response = send_request_sync("127.0.0.1", port, request)
    in_log = {
        (t.name, int(p.partition_index)): (
            int(p.leader_id),
            int(p.leader_epoch),
            sorted(map(int, p.isr_nodes)),
        )
        for t in response.topics
        for p in t.partitions
    }
    client = ZkConnectOptions(connect=zk_connect).kazoo_client()
    client.start(timeout=30)
    agree = True
    try:
        for topic, partition in picks:
            data, _ = client.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
            state = json.loads(data)
            in_zk = (state["leader"], state["leader_epoch"], sorted(state["isr"]))
            log_side = in_log.get((topic, partition))
            same = log_side == in_zk
            agree = agree and same
            shown = "(missing)" if log_side is None else _leadership(*log_side)
            name = f"{topic}-{partition}"
            say(
                f"  {name:<22} log: {shown:<34} ZooKeeper: {_leadership(*in_zk):<34} {'agree' if same else 'DIFFER'}"
            )
    finally:
        client.stop()
        client.close()
    return agree


def _leadership(leader: int, epoch: int, isr: list[int]) -> str:
    return f"leader {leader:>2}, epoch {epoch}, isr {isr}"


def say(text: str) -> None:
    """One line of the real-path steps, never wrapped (it stays one line in a log)."""
    console.print(text, soft_wrap=True)


def _free_port() -> int:
    """A TCP port nothing listens on right now (`shim run --listen` does not take port 0)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_for_log(child: subprocess.Popen[bytes], log_path: Path, pattern: str, what: str) -> None:
    deadline = time.monotonic() + BRIDGE_READY_TIMEOUT_S
    while not re.search(pattern, log_path.read_text()):
        if child.poll() is not None or time.monotonic() > deadline:
            console.print(f"[bold red]the {what} did not start; its log ends:[/]")
            console.print("\n".join(log_path.read_text().splitlines()[-20:]), soft_wrap=True)
            _stop_child(child, log_path, what)
            sys.exit(1)
        time.sleep(0.05)


def _stop_child(child: subprocess.Popen[bytes], log_path: Path, what: str) -> None:
    if child.poll() is not None:
        return
    console.print(f"[bold cyan]$ kill -TERM {child.pid}[/]")
    child.send_signal(signal.SIGTERM)
    try:
        code = child.wait(30)
    except subprocess.TimeoutExpired:
        child.kill()
        code = child.wait()
    console.print(f"{what} stopped (exit code {code}); its log is {log_path.relative_to(ROOT)}", soft_wrap=True)


def _bridge_failed(bridge: subprocess.Popen[bytes], log_path: Path, what: str) -> None:
    console.print(f"[bold red]the bridge {what}; its log ends:[/]")
    console.print("\n".join(log_path.read_text().splitlines()[-20:]), soft_wrap=True)
    if bridge.poll() is None:
        bridge.kill()
        bridge.wait()
    sys.exit(1)


def _wait_until_listening(bridge: subprocess.Popen[bytes], log_path: Path) -> tuple[int, str]:
    """The listener port and status URL from the bridge's `event=listening` log line."""
    deadline = time.monotonic() + BRIDGE_READY_TIMEOUT_S
    while time.monotonic() < deadline:
        found = re.search(r"event=listening listen=\S+:(\d+) metrics=(http://\S+)", log_path.read_text())
        if found:
            return int(found.group(1)), found.group(2)
        if bridge.poll() is not None:
            _bridge_failed(bridge, log_path, f"exited with code {bridge.returncode} while starting")
        time.sleep(0.1)
    _bridge_failed(bridge, log_path, f"was not listening after {BRIDGE_READY_TIMEOUT_S:g} s")
    raise AssertionError("unreachable")


def _wait_for_dual_write(bridge: subprocess.Popen[bytes], status_url: str, log_path: Path) -> dict[str, Any]:
    """Poll /status until the driver reports DUAL_WRITE; returns that status document."""
    deadline = time.monotonic() + BRIDGE_READY_TIMEOUT_S
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"{status_url}/status", timeout=5) as reply:
            status = json.loads(reply.read())
        if status.get("state") == "DUAL_WRITE":
            return status
        if bridge.poll() is not None:
            _bridge_failed(bridge, log_path, f"exited with code {bridge.returncode} before DUAL_WRITE")
        time.sleep(0.1)
    _bridge_failed(bridge, log_path, f"was still in {status.get('state')} after {BRIDGE_READY_TIMEOUT_S:g} s")
    raise AssertionError("unreachable")


def _set_retention(topic: str, value: str) -> Any:
    from kio.schema.incremental_alter_configs.v1.request import (
        AlterableConfig,
        AlterConfigsResource,
        IncrementalAlterConfigsRequest,
    )
    from kio.static.primitive import i8

    config = AlterableConfig(name="retention.ms", config_operation=i8(0), value=value)  # 0 = SET
    resource = AlterConfigsResource(resource_type=i8(2), resource_name=topic, configs=(config,))  # 2 = TOPIC
    return IncrementalAlterConfigsRequest(resources=(resource,), validate_only=False)


def _create_topic(name: str, partitions: int, replication_factor: int) -> Any:
    from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
    from kio.schema.types import TopicName
    from kio.static.primitive import i16, i32, i32Timedelta

    topic = CreatableTopic(
        name=TopicName(name),
        num_partitions=i32(partitions),
        replication_factor=i16(replication_factor),
        assignments=(),
        configs=(),
    )
    timeout = i32Timedelta.parse(datetime.timedelta(seconds=30))
    return CreateTopicsRequest(topics=(topic,), timeout=timeout, validate_only=False)


def _delete_topic(name: str) -> Any:
    from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
    from kio.schema.types import TopicName
    from kio.static.primitive import i32Timedelta

    timeout = i32Timedelta.parse(datetime.timedelta(seconds=30))
    return DeleteTopicsRequest(topics=(DeleteTopicState(name=TopicName(name), topic_id=None),), timeout=timeout)


def _show_zookeeper(zk_connect: str, paths: list[str]) -> None:
    """kazoo reads of `paths`; `/config/changes/<newest>` is the newest config change notification."""
    client = ZkConnectOptions(connect=zk_connect).kazoo_client()
    client.start(timeout=30)
    try:
        for path in paths:
            if path == "/config/changes/<newest>":
                changes = sorted(client.get_children("/config/changes"))
                if not changes:
                    console.print("  (no config change notification)")
                    continue
                path = f"/config/changes/{changes[-1]}"
            data, stat = client.get(path)
            console.print(f"[bold cyan]>>> kazoo.get({path!r})[/]")
            console.print(f"  {data.decode() if data else data!r}  (version {stat.version})", soft_wrap=True)
    finally:
        client.stop()
        client.close()


def _stop_bridge(bridge: subprocess.Popen[bytes], log_path: Path) -> None:
    """SIGTERM, as a service manager would; the bridge answers what it has, closes its log, exits 0."""
    if bridge.poll() is not None:
        return
    console.print(f"[bold cyan]$ kill -TERM {bridge.pid}[/]")
    bridge.send_signal(signal.SIGTERM)
    try:
        code = bridge.wait(60)
    except subprocess.TimeoutExpired:
        _bridge_failed(bridge, log_path, "did not stop within 60 s of SIGTERM")
        return
    if code != 0:
        _bridge_failed(bridge, log_path, f"exited with code {code} on SIGTERM")
    console.print(f"bridge stopped cleanly (exit code {code}); its log is {log_path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
