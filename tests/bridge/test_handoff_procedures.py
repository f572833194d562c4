"""Hand-off to Kafka 3.9 controllers (simulated, tests/support/real_controller.py): a controller taking over a
stopped quorum's directory and ZooKeeper as they are left, then the two procedures of handoff.md §5 rehearsed with
bridge processes and simulated brokers: cold (every bridge stops, then the controllers start) and rolling (one
voter at a time through a mixed quorum)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError
from kio.schema.describe_quorum.v1 import request as describe_quorum_v1
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i32

from bridge.kafka.client import send_request_sync
from bridge.zk.leadership import ControllerMovedError, MigrationLeadershipState
from bridge.zk.migration_client import ZkMigrationClient
from cli.main import cli
from migrate.errors import EXIT_OK, Zk2KraftError
from migrate.kraft import records as rec
from migrate.kraft.logdir import list_snapshots
from migrate.kraft.migration_state import ZkMigrationState
from migrate.kraft.reader import METADATA_PARTITION_DIR, iter_log_dir, load_image
from migrate.zk import paths
from migrate.zk.load import load_tree
from migrate.zk.tree import ZTree
from migrate.zk.znodes.controller import decode_migration
from tests.support.bridge_process import REPO, BridgeProcess, bridge_process
from tests.support.handoff import copy_directory, failed, kafka_would_lead
from tests.support.kraft_broker import SimulatedKraftBroker
from tests.support.quorum import leader_of, running_quorum
from tests.support.quorum_process import VoterProcesses, voter_processes
from tests.support.real_controller import FENCE, FULL, RealController, parse_voters, take_over
from tests.support.requests import create_topic
from tests.support.sim_broker import SimulatedBroker
from tests.support.zk_broker import SimulatedZkBroker
from tests.support.zk_broker_control import UPDATE_METADATA, ReceivedRequest


@pytest.fixture
def stopped_quorum(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path
) -> tuple[Path, int, object]:
    """Three voters reach DUAL_WRITE and stop cleanly, followers first: the leader's directory, its node id and
    the ZooKeeper fence the leader held when it stopped."""
    with running_quorum(zk_client, zk_connect, real_tree, tmp_path) as controllers:
        leader = leader_of(controllers)
        for follower in (c for c in controllers if c is not leader):
            follower.stop()
        leader.stop()
    assert leader.driver is not None
    for broker in zk_client.get_children(paths.BROKER_IDS):  # the snapshot's brokers are long dead
        zk_client.delete(f"{paths.BROKER_IDS}/{broker}")
    return tmp_path / f"meta-{leader.config.node_id}", leader.config.node_id, leader.driver.leadership


def test_a_kafka_controller_resumes_dual_write_from_a_stopped_quorums_directory(
    stopped_quorum: tuple[Path, int, object], zk_client: KazooClient
) -> None:
    meta, node, bridge_fence = stopped_quorum
    report = kafka_would_lead(meta, zk_client, node_id=node)
    assert report.leads, failed(report)
    held = json.loads(zk_client.get(paths.CONTROLLER)[0])
    zk_epoch_before = int(zk_client.get(paths.CONTROLLER_EPOCH)[0])

    done = take_over(meta, zk_client, node_id=node)

    assert done.state == "DUAL_WRITE", done.line()
    assert not done.remigrated and done.migration_before is not None and done.migration_after is not None
    # /migration moves on from where the bridges left it: the same (offset, epoch), the new controller's name.
    assert (done.migration_after.kraft_metadata_offset, done.migration_after.kraft_metadata_epoch) == (
        done.migration_before.kraft_metadata_offset, done.migration_before.kraft_metadata_epoch,
    )  # fmt: skip
    assert done.migration_before.kraft_metadata_offset > 0
    claimed = json.loads(zk_client.get(paths.CONTROLLER)[0])
    assert claimed["kraftControllerEpoch"] == done.epoch > held["kraftControllerEpoch"]
    assert done.zk_controller_epoch == zk_epoch_before + 1 == int(zk_client.get(paths.CONTROLLER_EPOCH)[0])

    # A late write of the stopped bridge, with the fence it held, is refused by ZooKeeper.
    late = ZkMigrationClient(zk_client)
    with pytest.raises(ControllerMovedError, match="another controller took over"):
        late.fenced_set_migration_state(bridge_fence)  # type: ignore[arg-type]
    after = json.loads(zk_client.get(paths.MIGRATION)[0])
    assert after["kraft_controller_id"] == node and after["kraft_controller_epoch"] == done.epoch


def test_status_reads_the_write_behind_lag_of_a_directory_ending_in_its_snapshot(
    stopped_quorum: tuple[Path, int, object], zk_connect: str
) -> None:
    """A clean stop leaves a snapshot at the log's end; the lag finalize needs is still read from the segments."""
    meta, _node, _fence = stopped_quorum
    _image, report = load_image(meta / METADATA_PARTITION_DIR)
    assert report.snapshot is not None and report.last_metadata_offset is None  # what made the lag unknown
    result = CliRunner().invoke(
        cli, ["status", "--zk", zk_connect, "--metadata-dir", str(meta), "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["write_behind_lag"] == 0


def test_a_kafka_controller_refuses_a_migration_znode_that_says_nothing_was_migrated(
    stopped_quorum: tuple[Path, int, object], zk_client: KazooClient
) -> None:
    """Kafka's driver never re-migrates a MIGRATION log: with /migration reset it stays INACTIVE, claims nothing."""
    meta, node, _fence = stopped_quorum
    data = json.loads(zk_client.get(paths.MIGRATION)[0])
    data["kraft_metadata_offset"] = -1
    zk_client.set(paths.MIGRATION, json.dumps(data).encode())
    controller_before = zk_client.get(paths.CONTROLLER)[0]

    done = take_over(meta, zk_client, node_id=node)

    assert (done.state, done.remigrated) == ("INACTIVE", False)
    assert "the ZK state does not" in done.reason
    assert zk_client.get(paths.CONTROLLER)[0] == controller_before


def test_finalization_appends_post_migration_and_touches_no_znode(
    stopped_quorum: tuple[Path, int, object], zk_client: KazooClient, tmp_path: Path
) -> None:
    """A controller restarted without zookeeper.metadata.migration.enable finalizes as it leads."""
    meta, node, _fence = stopped_quorum
    copy = copy_directory(meta, tmp_path / "finalized")
    controller_before = zk_client.get(paths.CONTROLLER)

    done = take_over(copy, zk_client, node_id=node, migration=False)

    assert done.state == "POST_MIGRATION" and done.appended == ["ZkMigrationStateRecord(POST_MIGRATION)"]
    image, _report = load_image(copy / METADATA_PARTITION_DIR)
    assert image.features.zk_migration_state == ZkMigrationState.POST_MIGRATION
    assert zk_client.get(paths.CONTROLLER) == controller_before


def test_a_kafka_controller_backs_off_when_controller_holds_a_newer_kraft_epoch(
    stopped_quorum: tuple[Path, int, object], zk_client: KazooClient
) -> None:
    """KafkaZkClient's claim: a /controller naming a KRaft epoch at or above its own is ControllerMoved, nothing written."""
    meta, node, _fence = stopped_quorum
    held = json.loads(zk_client.get(paths.CONTROLLER)[0])
    held["kraftControllerEpoch"] = 10_000
    zk_client.set(paths.CONTROLLER, json.dumps(held).encode())
    controller_before, epoch_before = (
        zk_client.get(paths.CONTROLLER)[0],
        zk_client.get(paths.CONTROLLER_EPOCH)[0],
    )
    migration_before = zk_client.get(paths.MIGRATION)[0]

    done = take_over(meta, zk_client, node_id=node)

    assert (done.state, done.remigrated, done.zk_controller_epoch) == ("BECOME_CONTROLLER", False, None)
    assert "ControllerMovedException" in done.reason
    assert zk_client.get(paths.CONTROLLER)[0] == controller_before
    assert zk_client.get(paths.CONTROLLER_EPOCH)[0] == epoch_before
    assert zk_client.get(paths.MIGRATION)[0] == migration_before


def test_a_sigtermed_bridge_process_hands_its_directory_to_the_controller_command(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path
) -> None:
    """`zk2kraft bridge run` stopped by SIGTERM; `python -m tests.support.real_controller` (the demo's) leads from it."""
    load_tree(zk_client, real_tree)
    meta, node = tmp_path / "meta", 3000
    with bridge_process(
        zk_connect=zk_connect, metadata_dir=meta, node_id=node, log_path=tmp_path / "bridge.log", fsync=False,
    ) as bridge:  # fmt: skip
        bridge.start().wait_for_state("DUAL_WRITE")
        assert bridge.terminate() == EXIT_OK, bridge.log_tail()
    # Its clean stop left the whole log as a snapshot: the controller below loads it instead of replaying.
    assert [sid.end_offset for sid, _ in list_snapshots(meta / METADATA_PARTITION_DIR)][-1:] == [last_offset(meta) + 1]
    for broker in zk_client.get_children(
        paths.BROKER_IDS
    ):  # the seeded registrations belong to no live broker
        zk_client.delete(f"{paths.BROKER_IDS}/{broker}")
    report = kafka_would_lead(meta, zk_client, node_id=node)
    assert report.leads, failed(report)
    held = json.loads(zk_client.get(paths.CONTROLLER)[0])
    epoch_before, fence = zk_client.get(paths.CONTROLLER_EPOCH)
    offset_before = json.loads(zk_client.get(paths.MIGRATION)[0])["kraft_metadata_offset"]

    command = [
        sys.executable,
        "-m",
        "tests.support.real_controller",
        "--metadata-dir",
        str(meta),
        "--zk",
        zk_connect,
    ]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "state=DUAL_WRITE" in done.stdout and "remigrated=false" in done.stdout, done.stdout
    claimed = json.loads(zk_client.get(paths.CONTROLLER)[0])
    assert claimed["brokerid"] == node and claimed["kraftControllerEpoch"] > held["kraftControllerEpoch"]
    assert int(zk_client.get(paths.CONTROLLER_EPOCH)[0]) == int(epoch_before) + 1
    assert f"zk_controller_epoch={int(epoch_before) + 1}" in done.stdout
    assert json.loads(zk_client.get(paths.MIGRATION)[0])["kraft_metadata_offset"] >= offset_before > 0
    # The stopped bridge's late write, checked on the /controller_epoch version it held, is refused.
    late = zk_client.transaction()
    late.check(paths.CONTROLLER_EPOCH, fence.version)
    late.set_data(paths.MIGRATION, b"{}")
    assert isinstance(late.commit()[0], BadVersionError)
    assert (
        json.loads(zk_client.get(paths.MIGRATION)[0])["kraft_controller_epoch"]
        == claimed["kraftControllerEpoch"]
    )


# ---------------------------------------------------------------------------------------------- the procedures

ZK_BROKER_IDS = (1, 2, 3)
"""The real cluster's brokers: ZooKeeper-mode brokers in migration mode."""
KRAFT_BROKER_IDS = (11, 12)
BROKER_REQUEST_TIMEOUT_S = 3.0
"""A broker's controller channel gives up on an unanswered request after this long and tries another voter."""
PROCEDURE_TIMEOUT_S = 90.0
"""Generous bound on each wait of a procedure (a loaded 2-core machine runs three bridges, three controllers)."""


def running(broker: SimulatedBroker) -> bool:
    view = broker.view
    return view.broker_epoch >= 0 and not view.is_fenced and view.heartbeats_answered > 0


def wait_until(check: Callable[[], bool], what: str, timeout: float = PROCEDURE_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what}: not seen within {timeout} s"
        time.sleep(0.05)


@dataclass
class Cluster:
    """Three bridge voters (processes) and the simulated brokers heartbeating to whichever leads."""

    quorum: VoterProcesses
    brokers: list[SimulatedBroker]
    cluster_id: str

    @property
    def zk_brokers(self) -> list[SimulatedZkBroker]:
        return [b for b in self.brokers if isinstance(b, SimulatedZkBroker)]

    def voters_of(self, node: int) -> dict[int, tuple[str, int]]:
        """`controller.quorum.voters` as voter `node`'s bridge was given it (its peers through the proxies)."""
        bridge = self.quorum.bridges[node]
        return parse_voters(bridge.extra_args[bridge.extra_args.index("--voters") + 1])


@contextlib.contextmanager
def cluster_in_dual_write(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path
) -> Iterator[Cluster]:
    """The real cluster's tree, three bridges in DUAL_WRITE with its ZooKeeper-mode brokers and two KRaft brokers
    running unfenced, and a few topics created through the leader (the admin traffic of the migration)."""
    load_tree(zk_client, real_tree)
    cluster_id = zk_client.get(paths.CLUSTER_ID)[0]
    cluster_id_text = json.loads(cluster_id)["id"]
    brokers: list[SimulatedBroker] = []
    with voter_processes(zk_connect, tmp_path) as quorum:
        try:
            for bridge in quorum.bridges.values():
                bridge.rehearsal = False  # the migration waits for the ZooKeeper-mode brokers
                bridge.fsync = False
            quorum.start()
            addresses = [("127.0.0.1", bridge.listen_port) for bridge in quorum.bridges.values()]
            for n, broker_id in enumerate(ZK_BROKER_IDS):
                brokers.append(
                    SimulatedZkBroker(
                        broker_id, addresses[n % 3], cluster_id_text, zk_connect=zk_connect, voters=addresses,
                        request_timeout_s=BROKER_REQUEST_TIMEOUT_S,
                    ).start()
                )  # fmt: skip
            leader = quorum.leader(timeout=PROCEDURE_TIMEOUT_S)
            for n, broker_id in enumerate(KRAFT_BROKER_IDS):
                brokers.append(
                    SimulatedKraftBroker(
                        broker_id, addresses[n % 3], cluster_id_text, voters=addresses,
                        request_timeout_s=BROKER_REQUEST_TIMEOUT_S,
                    ).start()
                )  # fmt: skip
            wait_until(lambda: all(running(b) for b in brokers), "every broker running unfenced")
            for n in range(3):
                response = send_request_sync("127.0.0.1", leader.listen_port, create_topic(f"before-handoff-{n}", 2, 2),
                                             timeout=30.0)  # fmt: skip
                assert [int(t.error_code) for t in response.topics] == [ErrorCode.none], response
            yield Cluster(quorum, brokers, cluster_id_text)
        finally:
            for broker in brokers:
                broker.kill()


@dataclass(frozen=True)
class BridgeFence:
    """What the last bridge leader held in ZooKeeper when it stopped: its claim and `/migration`."""

    leadership: MigrationLeadershipState
    zk_controller_epoch: int
    migration_offset: int


def bridge_fence(zk_client: KazooClient) -> BridgeFence:
    epoch_data, epoch_stat = zk_client.get(paths.CONTROLLER_EPOCH)
    data, stat = zk_client.get(paths.MIGRATION)
    migration = decode_migration(paths.MIGRATION, data, zk_version=stat.version)
    leadership = MigrationLeadershipState.from_znode(migration).with_zk_controller(
        int(epoch_data), epoch_stat.version
    )
    return BridgeFence(leadership, int(epoch_data), migration.kraft_metadata_offset)


def stop_cleanly(bridge: BridgeProcess) -> None:
    assert bridge.terminate() == EXIT_OK, bridge.log_tail()


def real_leader(controllers: list[RealController], timeout: float = PROCEDURE_TIMEOUT_S) -> RealController:
    """The one simulated Kafka controller that leads in DUAL_WRITE (waits for it)."""
    found: list[RealController] = []

    def one_leads() -> bool:
        found[:] = [
            c for c in controllers if (led := c.leading) is not None and led.driver_state == "DUAL_WRITE"
        ]
        return len(found) == 1

    try:
        wait_until(one_leads, "a simulated Kafka controller leading in DUAL_WRITE", timeout)
    except AssertionError as exc:
        seen = {c.node_id: (c.role, c.epoch, c.leaderships) for c in controllers}
        raise AssertionError(f"{exc}: {seen}") from None
    return found[0]


def last_offset(metadata_dir: Path) -> int:
    return max(e.offset for e in iter_log_dir(metadata_dir))


def remigrations_and_fences_after(metadata_dir: Path, offset: int) -> list[Any]:
    """Records after `offset` that a re-migration (ZkMigrationStateRecord) or a fenced broker would have written."""
    return [
        e.record
        for e in iter_log_dir(metadata_dir)
        if e.offset > offset
        and (
            isinstance(e.record, rec.ZkMigrationStateRecord | rec.FenceBrokerRecord)
            or (isinstance(e.record, rec.BrokerRegistrationChangeRecord) and e.record.fenced == FENCE)
        )
    ]


def assert_no_broker_fenced(
    cluster: Cluster, controllers: list[RealController], epochs: dict[int, int]
) -> None:
    for broker in cluster.brokers:
        view = broker.view
        assert (view.registrations, view.times_fenced, view.is_fenced) == (1, 0, False), (
            broker.broker_id,
            view,
        )
        assert view.broker_epoch == epochs[broker.broker_id]
        assert set(view.errors) <= {ErrorCode.not_controller}, (broker.broker_id, view.errors)
    assert [c.fenced for c in controllers] == [[] for _ in controllers]


def assert_first_update_metadata_from(cluster: Cluster, marks: dict[int, int], leader: RealController) -> int:
    """The first UpdateMetadata each ZooKeeper-mode broker received after `marks` is the new leader's FULL one, under
    the `/controller_epoch` it claimed; returns that epoch."""
    led = leader.leading
    assert led is not None and led.zk_controller_epoch is not None
    for broker in cluster.zk_brokers:

        def update_metadata_since_mark(broker: SimulatedZkBroker = broker) -> list[ReceivedRequest]:
            received = broker.control.snapshot().requests[marks[broker.broker_id] :]
            return [r for r in received if r.api_key == UPDATE_METADATA]

        wait_until(
            lambda: bool(update_metadata_since_mark()), f"an UpdateMetadata at broker {broker.broker_id}"
        )
        first = update_metadata_since_mark()[0]
        request = first.request
        assert (int(request.controller_id), int(request.controller_epoch)) == (
            leader.node_id,
            led.zk_controller_epoch,
        )
        assert (
            request.is_kraft_controller and int(request.type) == FULL and first.error_code == ErrorCode.none
        )
        assert led.update_metadata[broker.broker_id] == (led.zk_controller_epoch, ErrorCode.none)
    return led.zk_controller_epoch


def heartbeat_again(brokers: list[SimulatedBroker], times: int = 3) -> None:
    answered = {b.broker_id: b.view.heartbeats_answered for b in brokers}
    wait_until(lambda: all(b.view.heartbeats_answered >= answered[b.broker_id] + times for b in brokers),
               f"{times} more heartbeats of every broker answered")  # fmt: skip


def test_cold_handoff_every_bridge_stops_and_kafka_controllers_lead_from_their_directories(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path
) -> None:
    """handoff.md §5's cold procedure: every bridge SIGTERMed, then a Kafka 3.9 controller started on each directory.
    Brokers of both kinds ride through on their sessions; the driver resumes from `/migration` without re-migrating;
    the ZooKeeper-mode brokers' first UpdateMetadata carries the new `/controller_epoch`; the stopped bridges'
    fence no longer holds."""
    with cluster_in_dual_write(zk_client, zk_connect, real_tree, tmp_path) as cluster:
        quorum = cluster.quorum
        leader = quorum.leader()
        epochs = {b.broker_id: b.view.broker_epoch for b in cluster.brokers}
        for node, bridge in quorum.bridges.items():
            if node != leader.node_id:
                stop_cleanly(bridge)
        fence = bridge_fence(zk_client)  # the leader's, as it stops: nothing else claims ZooKeeper meanwhile
        stop_cleanly(leader)
        for node in quorum.bridges:
            kafka_would_lead(tmp_path / f"meta-{node}", zk_client, node_id=node)
        ends = {node: last_offset(tmp_path / f"meta-{node}") for node in quorum.bridges}
        marks = {b.broker_id: len(b.control.snapshot().requests) for b in cluster.zk_brokers}

        controllers = [
            RealController(tmp_path / f"meta-{node}", voters=cluster.voters_of(node), zk_connect=zk_connect)
            for node in quorum.bridges
        ]
        try:
            for controller in controllers:
                controller.start()
            # Kafka's start-up: the stopped leader's quorum-state names itself (it resumes Resigned, the others
            # as its followers), and each directory ends in the snapshot of its clean stop (no replay of the log).
            resumed = {c.node_id: c.startup for c in controllers}
            assert {node: read.quorum_state for node, read in resumed.items() if read is not None} == {
                node: "resigned" if node == leader.node_id else "follower" for node in quorum.bridges
            }
            for node, read in resumed.items():
                assert read is not None and read.snapshot is not None
                assert int(read.snapshot.split("-")[0]) == read.log_end_offset == ends[node] + 1
            real = real_leader(controllers)
            led = real.leading
            assert led is not None and led.migration_before is not None
            # No re-migration: /migration resumes where the bridges left it and only moves forward.
            assert (led.remigrated, led.migration_before.kraft_metadata_offset) == (
                False,
                fence.migration_offset,
            )
            assert led.migration_offsets[0] == fence.migration_offset and led.migration_offsets == sorted(
                led.migration_offsets
            )
            zk_epoch = assert_first_update_metadata_from(cluster, marks, real)
            assert zk_epoch > fence.zk_controller_epoch
            heartbeat_again(cluster.brokers)
            assert_no_broker_fenced(cluster, controllers, epochs)
            # The stopped bridge's late write, through its own fenced path, is refused by ZooKeeper.
            with pytest.raises(ControllerMovedError, match="another controller took over"):
                ZkMigrationClient(zk_client).fenced_set_migration_state(fence.leadership)
            migration = json.loads(zk_client.get(paths.MIGRATION)[0])
            assert (migration["kraft_controller_id"], migration["kraft_controller_epoch"]) == (
                real.node_id,
                led.epoch,
            )
            assert migration["kraft_metadata_offset"] >= fence.migration_offset
        finally:
            for controller in controllers:
                controller.stop()
        for node in quorum.bridges:
            assert remigrations_and_fences_after(tmp_path / f"meta-{node}", ends[node]) == []


def described_quorum(ports: list[int]) -> tuple[int, int, dict[int, int]] | None:
    """DescribeQuorum asked of each voter in turn: (leader, epoch, every voter's log end offset) from the leader."""
    request = describe_quorum_v1.DescribeQuorumRequest(
        topics=(
            describe_quorum_v1.TopicData(
                topic_name=TopicName("__cluster_metadata"),
                partitions=(describe_quorum_v1.PartitionData(partition_index=i32(0)),),
            ),
        )
    )
    for port in ports:
        try:
            response = send_request_sync("127.0.0.1", port, request, timeout=5.0)
        except (Zk2KraftError, OSError):
            continue
        if response.error_code != ErrorCode.none:
            continue
        partition = response.topics[0].partitions[0]
        if partition.error_code == ErrorCode.none:
            ends = {int(v.replica_id): int(v.log_end_offset) for v in partition.current_voters}
            return int(partition.leader_id), int(partition.leader_epoch), ends
    return None


def wait_caught_up(cluster: Cluster, *nodes: int) -> tuple[int, int]:
    """Until the leader's DescribeQuorum shows each of `nodes` at the leader's log end offset; (leader, epoch)."""
    ports = [bridge.listen_port for bridge in cluster.quorum.bridges.values()]
    seen: list[tuple[int, int, dict[int, int]] | None] = [None]

    def caught_up() -> bool:
        seen[0] = found = described_quorum(ports)
        return found is not None and all(
            found[2].get(n, -1) == found[2].get(found[0], -2) >= 0 for n in nodes
        )

    wait_until(caught_up, f"voters {nodes} caught up ({seen[0]})")
    assert seen[0] is not None
    return seen[0][0], seen[0][1]


def bridge_follows(cluster: Cluster, node: int, leader: int) -> None:
    cluster.quorum.wait_for_raft(
        node, lambda raft: raft["role"] == "follower" and raft["leader_id"] == leader, f"following {leader}",
        timeout=PROCEDURE_TIMEOUT_S,
    )  # fmt: skip


@pytest.mark.parametrize("leader_goes", ["last", "second"])
def test_rolling_handoff_one_voter_at_a_time_through_a_mixed_quorum(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path, leader_goes: str
) -> None:
    """handoff.md §5's rolling procedure: one bridge voter at a time is SIGTERMed and a Kafka 3.9 controller started on
    its directory, which catches up before the next. `last`: the leader bridge goes last and its resignation
    (EndQuorumEpoch) elects a Kafka controller; `second`: the leader goes after the first follower (its host must
    restart), the Kafka controller it names first is elected and the remaining bridge follows it. Brokers keep their
    sessions throughout; the driver resumes from `/migration`; the bridges' fence no longer holds."""
    with cluster_in_dual_write(zk_client, zk_connect, real_tree, tmp_path) as cluster:
        quorum = cluster.quorum
        bridge_leader = quorum.leader().node_id
        first, second = sorted(n for n in quorum.bridges if n != bridge_leader)
        epochs = {b.broker_id: b.view.broker_epoch for b in cluster.brokers}
        started: dict[int, RealController] = {}

        def hand_over(node: int, *, kit: bool = True) -> RealController:
            """`kit`: the directory is checked as one a Kafka controller would lead from; not once a Kafka controller
            leads (ZooKeeper then names epochs and offsets the stopped voter's log never saw: it only follows)."""
            bridge = quorum.bridges[node]
            if bridge.running:
                stop_cleanly(bridge)
            if kit:
                kafka_would_lead(tmp_path / f"meta-{node}", zk_client, node_id=node)
            started[node] = RealController(
                tmp_path / f"meta-{node}", voters=cluster.voters_of(node), zk_connect=zk_connect
            )
            return started[node].start()

        try:
            real = hand_over(first)
            # A Kafka controller follows the bridge leader; admin traffic through the bridge reaches it.
            assert wait_caught_up(cluster, first)[0] == bridge_leader
            response = send_request_sync("127.0.0.1", quorum.bridges[bridge_leader].listen_port,
                                         create_topic("during-handoff", 2, 2), timeout=30.0)  # fmt: skip
            assert [int(t.error_code) for t in response.topics] == [ErrorCode.none], response
            assert wait_caught_up(cluster, first)[0] == bridge_leader
            assert (real.role, real.leader_id, real.leaderships) == ("follower", bridge_leader, [])
            if leader_goes == "last":
                hand_over(second)
                assert wait_caught_up(cluster, second)[0] == bridge_leader
                assert started[second].role == "follower"
            # Both followers at the leader's end: its resignation names them by log end offset, then by id.
            assert wait_caught_up(cluster, first, second)[0] == bridge_leader
            fence = bridge_fence(zk_client)
            ends = {
                node: last_offset(tmp_path / f"meta-{node}")
                for node in quorum.bridges
                if quorum.bridges[node].running
            }
            marks = {b.broker_id: len(b.control.snapshot().requests) for b in cluster.zk_brokers}
            stop_cleanly(
                quorum.bridges[bridge_leader]
            )  # it resigns: the successor it names first stands at once
            elected = real_leader(list(started.values()))
            if leader_goes == "second":
                assert (
                    elected is real
                )  # the first of the leader's preferred successors (equal logs: lowest id)
                bridge_follows(cluster, second, real.node_id)  # a bridge follows a Kafka leader
                heartbeat_again(cluster.brokers)
                hand_over(bridge_leader, kit=False)
                wait_caught_up(cluster, bridge_leader)
                hand_over(second, kit=False)
                wait_caught_up(cluster, second)
            else:
                hand_over(bridge_leader, kit=False)
                wait_caught_up(cluster, bridge_leader)
            assert all(not bridge.running for bridge in quorum.bridges.values())
            led = elected.leading
            assert led is not None and led.migration_before is not None and not led.remigrated
            assert led.migration_before.kraft_metadata_offset == fence.migration_offset
            assert led.migration_offsets[0] == fence.migration_offset and led.migration_offsets == sorted(
                led.migration_offsets
            )
            assert assert_first_update_metadata_from(cluster, marks, elected) > fence.zk_controller_epoch
            heartbeat_again(cluster.brokers)
            assert_no_broker_fenced(cluster, list(started.values()), epochs)
            with pytest.raises(ControllerMovedError, match="another controller took over"):
                ZkMigrationClient(zk_client).fenced_set_migration_state(fence.leadership)
        finally:
            for controller in started.values():
                controller.stop()
        for node, end in ends.items():
            assert remigrations_and_fences_after(tmp_path / f"meta-{node}", end) == []
