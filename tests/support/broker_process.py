"""One simulated broker as a process of its own: `python -m tests.support.broker_process`.

Run from the repository root. Like a Kafka 3.9 ZooKeeper-mode broker in migration mode it reads the cluster
id from ZooKeeper, opens its inter-broker listener (LeaderAndIsr, UpdateMetadata, StopReplica from the
controller), registers in ZooKeeper and with the controller, and heartbeats. With --kraft it is the same
broker restarted in KRaft mode (no ZooKeeper registration; it registers with IsMigratingZkBroker=false,
fetches the metadata log and gets no controller requests). SIGTERM shuts it down in a controlled way
(KafkaServer's and BrokerServer's shutdown hooks), SIGKILL is a crash. It prints one line per change of what
the controller told it, so a log shows its life (the demo runs three of these, then restarts each with --kraft).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from types import FrameType

from kazoo.exceptions import NoNodeError

from migrate.zk.live import ZkConnectOptions
from migrate.zk.znodes.singletons import decode_cluster_id
from tests.support.kraft_broker import SimulatedKraftBroker
from tests.support.sim_broker import HeartbeatView, SimulatedBroker
from tests.support.zk_broker import SimulatedZkBroker

SHUTDOWN_TIMEOUT_S = 20.0


def cluster_id_from_zookeeper(zk_connect: str) -> str:
    """`/cluster/id`, as a ZooKeeper-mode broker reads it at start-up."""
    client = ZkConnectOptions(connect=zk_connect).kazoo_client()
    client.start(timeout=15)
    try:
        data, _ = client.get("/cluster/id")
    except NoNodeError:
        raise SystemExit(f"{zk_connect}: no /cluster/id; is this a Kafka cluster's ZooKeeper?") from None
    finally:
        client.stop()
        client.close()
    return decode_cluster_id("/cluster/id", data)


def describe(view: HeartbeatView) -> str:
    if view.broker_epoch < 0:
        return "not registered"
    state = "fenced" if view.is_fenced else "unfenced"
    caught_up = "caught up" if view.is_caught_up else "catching up"
    return f"registered, broker epoch {view.broker_epoch}, {state}, {caught_up}"


def kraft_summary(broker: SimulatedKraftBroker) -> str:
    """One line: KRaft mode, and any ZooKeeper-broker-only request that reached its listener (never, rightly)."""
    received = broker.control_requests
    shown = ", ".join(f"{api} v{version}" for api, version in received) if received else "none"
    return f"KRaft mode, fetching the metadata log; controller requests received: {shown}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--id", type=int, required=True, help="broker.id (node.id in KRaft mode)")
    parser.add_argument(
        "--zk",
        help="zookeeper.connect, with the cluster's chroot (required in ZooKeeper mode; with --kraft, only "
        "read for the cluster id when --cluster-id is not given)",
    )
    parser.add_argument("--controller", required=True, metavar="HOST:PORT", help="the bridge's listener")
    parser.add_argument(
        "--voters",
        metavar="HOST:PORT,...",
        help="every bridge of a quorum (controller.quorum.voters' addresses): the broker finds the leader among them",
    )
    parser.add_argument(
        "--kraft",
        action="store_true",
        help="run as a KRaft broker (process.roles=broker), as after the rolling restart of a migration",
    )
    parser.add_argument("--cluster-id", help="the cluster id (KRaft mode: meta.properties' cluster.id)")
    parser.add_argument(
        "--heartbeat-interval-ms", type=int, default=2000, help="broker.heartbeat.interval.ms"
    )
    parser.add_argument(
        "--port", type=int, default=0, help="the inter-broker listener's port (default: any free port)"
    )
    args = parser.parse_args(argv)
    if args.zk is None and not (args.kraft and args.cluster_id):
        parser.error("--zk is required (with --kraft, --cluster-id may stand in for it)")
    host, _, port = args.controller.rpartition(":")
    voters = [(h, int(p)) for h, _, p in (v.strip().rpartition(":") for v in (args.voters or "").split(",") if v)]
    cluster_id = args.cluster_id or cluster_id_from_zookeeper(args.zk)
    broker: SimulatedBroker
    if args.kraft:
        kraft = SimulatedKraftBroker(
            args.id, (host, int(port)), cluster_id,
            heartbeat_interval_s=args.heartbeat_interval_ms / 1000, port=args.port, voters=voters,
        )  # fmt: skip
        broker, summary, where = kraft, (lambda: kraft_summary(kraft)), "in KRaft mode"
    else:
        zk_broker = SimulatedZkBroker(
            args.id, (host, int(port)), cluster_id, zk_connect=args.zk,
            heartbeat_interval_s=args.heartbeat_interval_ms / 1000, port=args.port, voters=voters,
        )  # fmt: skip
        broker, summary, where = zk_broker, zk_broker.control.summary, "registered in ZooKeeper"
    stop = threading.Event()

    def on_term(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    say = f"broker {args.id}:"
    broker.start()
    print(
        f"{say} listening on 127.0.0.1:{broker.port}, {where}; registering with the "
        f"controller at {args.controller}",
        flush=True,
    )
    shown = ""
    while not stop.wait(0.05):
        now = f"{describe(broker.view)}; {summary()}"
        if now != shown:
            print(f"{say} {now} (applied offset {broker.applied_offset()})", flush=True)
            shown = now
    print(f"{say} controlled shutdown requested", flush=True)
    started = time.monotonic()
    told = broker.shutdown(SHUTDOWN_TIMEOUT_S)
    took = time.monotonic() - started
    if told:
        print(f"{say} the controller said shut down after {took:.1f} s; stopped", flush=True)
        return 0
    print(f"{say} not told to shut down within {SHUTDOWN_TIMEOUT_S:g} s; stopped anyway", flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
