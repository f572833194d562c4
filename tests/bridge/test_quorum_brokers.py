"""Brokers across a leader change of a quorum of three bridges (controller-broker.md §3.3, §4.1; handoff.md
§2.4-2.5): simulated ZooKeeper-mode and KRaft brokers heartbeat to whichever voter leads.

When the leader goes, the new one gives every registered broker a fresh session (ClusterControlManager.activate),
so nobody is fenced and nobody re-registers; it claims ZooKeeper with its Raft epoch and sends the ZooKeeper-mode
brokers one full sync under the `/controller_epoch` it claimed.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kio.schema.errors import ErrorCode

from bridge.controller import BridgeController
from bridge.kafka.client import send_request_sync
from migrate.kraft import records as rec
from migrate.kraft.reader import iter_log_dir
from migrate.zk import paths
from migrate.zk.tree import ZTree
from tests.support.bridge import eventually
from tests.support.kraft_broker import SimulatedKraftBroker
from tests.support.quorum import frozen, leader_of, started_quorum, voter_addresses
from tests.support.requests import create_topic
from tests.support.sim_broker import SimulatedBroker
from tests.support.zk_broker import SimulatedZkBroker
from tests.support.zk_broker_control import ReceivedRequest, assert_one_full_sync

pytestmark = pytest.mark.zookeeper

ZK_BROKER_IDS = (1, 2, 3)
"""The real cluster's brokers: the ZooKeeper-mode brokers the migration waits for."""
KRAFT_BROKER_IDS = (11, 12)
SHORT_SESSION_MS = 3000
HEARTBEATS_PAST_A_SESSION = 20
"""Heartbeats 0.2 s apart: more than a short session passes between them."""
HEARTBEATS_PAST_A_DEFAULT_SESSION = 50
"""Heartbeats 0.2 s apart: more than broker.session.timeout.ms (9 s) passes between them."""
REQUEST_TIMEOUT_S = 3.0
"""The brokers' controller channel gives up on an unanswered request after this long and tries another voter."""
AFTER_FAILOVER = "created-after-the-failover"


def running(broker: SimulatedBroker) -> bool:
    view = broker.view
    return view.broker_epoch >= 0 and not view.is_fenced and view.heartbeats_answered > 0


def channel_settled(controller: BridgeController, full_syncs: int | None = None) -> bool:
    """The leader's channel has every ZooKeeper-mode broker, each with nothing queued (and `full_syncs` full
    syncs sent; the first leader's may reach none of them: those unfenced after it get all by their unfencing)."""
    members = controller.status().broker_channel.brokers
    return sorted(b.broker_id for b in members) == list(ZK_BROKER_IDS) and all(
        b.queue_depth == 0 and full_syncs in (None, b.full_syncs_sent) for b in members
    )


def fences(metadata_dir: Path, after: int) -> list[tuple[int, Any]]:
    """Records after offset `after` that fence a broker."""
    return [
        (e.offset, e.record)
        for e in iter_log_dir(metadata_dir)
        if e.offset > after
        and (
            isinstance(e.record, rec.FenceBrokerRecord)
            or (isinstance(e.record, rec.BrokerRegistrationChangeRecord) and e.record.fenced == 1)
        )
    ]


def batch_epoch(metadata_dir: Path, offset: int) -> int:
    """The Raft epoch of the batch holding `offset` in the log of `metadata_dir`."""
    return next(e.leader_epoch for e in iter_log_dir(metadata_dir, start_offset=offset) if e.offset == offset)


def znode_json(client: KazooClient, path: str) -> Any:
    return json.loads(client.get(path)[0])


@contextlib.contextmanager
def brokers_of(controllers: list[BridgeController], zk_connect: str) -> Iterator[list[SimulatedBroker]]:
    """The ZooKeeper-mode brokers (which the migration waits for), then the KRaft brokers, each given every
    voter and starting at one that need not lead; yielded once all run unfenced and the channel is idle."""
    voters = voter_addresses(controllers)
    cluster_id = controllers[0].cluster_id
    assert cluster_id is not None
    brokers: list[SimulatedBroker] = []
    try:
        for n, broker_id in enumerate(ZK_BROKER_IDS):
            brokers.append(
                SimulatedZkBroker(
                    broker_id, voters[n % len(voters)], cluster_id, zk_connect=zk_connect, voters=voters,
                    request_timeout_s=REQUEST_TIMEOUT_S,
                ).start()
            )  # fmt: skip
        leader = leader_of(controllers, timeout=60)
        for n, broker_id in enumerate(KRAFT_BROKER_IDS):
            brokers.append(
                SimulatedKraftBroker(
                    broker_id, voters[n % len(voters)], cluster_id, voters=voters,
                    request_timeout_s=REQUEST_TIMEOUT_S,
                ).start()
            )  # fmt: skip
        eventually(lambda: all(running(b) for b in brokers), timeout=30)
        eventually(lambda: channel_settled(leader), timeout=30)
        yield brokers
    finally:
        for broker in brokers:
            broker.kill()


def zk_brokers(brokers: list[SimulatedBroker]) -> list[SimulatedZkBroker]:
    return [b for b in brokers if isinstance(b, SimulatedZkBroker)]


def heartbeat_again(brokers: list[SimulatedBroker], times: int = 3) -> None:
    """Wait until every broker had `times` more heartbeats answered."""
    answered = {b.broker_id: b.view.heartbeats_answered for b in brokers}
    eventually(lambda: all(b.view.heartbeats_answered >= answered[b.broker_id] + times for b in brokers), 30)


def assert_sessions_kept(
    brokers: list[SimulatedBroker], epochs: dict[int, int], leader: BridgeController
) -> None:
    """No broker was fenced or registered again; each heartbeats with the epoch of its RegisterBrokerRecord."""
    assert leader.log is not None
    image = leader.log.image
    for broker in brokers:
        view = broker.view
        assert view.registrations == 1, (broker.broker_id, view)
        assert view.times_fenced == 0 and not view.is_fenced, (broker.broker_id, view)
        assert view.broker_epoch == epochs[broker.broker_id]
        assert set(view.errors) <= {ErrorCode.not_controller}, (broker.broker_id, view.errors)
        in_log = image.cluster.brokers[broker.broker_id]
        assert in_log.epoch == view.broker_epoch and not in_log.fenced


def assert_zookeeper_as_a_real_controller_reads_it(client: KazooClient, leader: BridgeController) -> int:
    """handoff.md §2.4: `/controller` and `/migration` name the leader's Raft epoch, `/migration` the Raft epoch
    of the batch it names; returns the `/controller_epoch` the leader claimed."""
    assert leader.quorum is not None and leader.driver is not None
    raft_epoch = leader.quorum.epoch_led
    controller = znode_json(client, paths.CONTROLLER)
    assert (controller["brokerid"], controller["kraftControllerEpoch"]) == (leader.config.node_id, raft_epoch)
    claimed = int(client.get(paths.CONTROLLER_EPOCH)[0])
    assert leader.driver.leadership.zk_controller_epoch == claimed
    migration = znode_json(client, paths.MIGRATION)
    assert (migration["kraft_controller_id"], migration["kraft_controller_epoch"]) == (
        leader.config.node_id,
        raft_epoch,
    )
    offset = migration["kraft_metadata_offset"]
    assert migration["kraft_metadata_epoch"] == batch_epoch(leader.config.metadata_dir, offset)
    return claimed


def knows_topic(broker: SimulatedZkBroker, topic: str) -> bool:
    return topic in broker.control.snapshot().cache.partition_states


def received_since(broker: SimulatedZkBroker, marks: dict[int, int]) -> list[ReceivedRequest]:
    return broker.control.snapshot().requests[marks[broker.broker_id] :]


def assert_sent_only_by(
    brokers: list[SimulatedBroker], marks: dict[int, int], sender: tuple[int, int]
) -> None:
    """Every request the ZooKeeper-mode brokers received since `marks` came from `sender` (id, controller epoch)."""
    for broker in zk_brokers(brokers):
        received = received_since(broker, marks)
        sent_by = {(int(r.request.controller_id), int(r.request.controller_epoch)) for r in received}
        assert sent_by == {sender}, broker.broker_id


@pytest.mark.parametrize("leader_goes", ["stopped", "frozen"])
def test_brokers_keep_their_sessions_across_a_leader_change_and_zk_brokers_get_one_full_sync_from_the_new_leader(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path, leader_goes: str
) -> None:
    """`stopped`: the leader shuts down (it resigns, its connections close); `frozen`: it stops answering
    mid-flight (a SIGSTOPped process: connections open, no resignation, its ZooKeeper session alive)."""
    with (
        started_quorum(zk_client, zk_connect, real_tree, tmp_path, rehearsal=False) as controllers,
        contextlib.ExitStack() as released_after_the_checks,
        brokers_of(controllers, zk_connect) as brokers,
    ):
        old = leader_of(controllers)
        assert old.log is not None
        epochs = {b.broker_id: b.view.broker_epoch for b in brokers}
        registered = {b: old.log.image.cluster.brokers[b].epoch for b in epochs}
        assert registered == epochs  # the registration reply's epoch is the record's
        end_before = old.log.end_offset - 1
        marks = {b.broker_id: len(b.control.snapshot().requests) for b in zk_brokers(brokers)}

        if leader_goes == "stopped":
            old.stop()
        else:
            released_after_the_checks.enter_context(frozen(old))
        new = leader_of([c for c in controllers if c is not old], timeout=60)
        heartbeat_again(brokers)  # to the new leader, which answers them unfenced
        eventually(lambda: channel_settled(new, full_syncs=1), timeout=30)

        assert_sessions_kept(brokers, epochs, new)
        assert fences(new.config.metadata_dir, after=end_before) == []
        claimed = assert_zookeeper_as_a_real_controller_reads_it(zk_client, new)
        assert new.log is not None
        partitions = new.log.image.partition_count()
        for broker in zk_brokers(brokers):
            assert_one_full_sync(received_since(broker, marks), partitions, broker.broker_id)
        assert_sent_only_by(brokers, marks, (new.config.node_id, claimed))

        # A change through the new leader: /migration names its batch, of the new epoch; the brokers learn it
        # under the same controller epoch.
        created = send_request_sync("127.0.0.1", new.listen_port, create_topic(AFTER_FAILOVER, partitions=3))
        assert [t.error_code for t in created.topics] == [ErrorCode.none], created
        eventually(lambda: all(knows_topic(b, AFTER_FAILOVER) for b in zk_brokers(brokers)), timeout=30)
        assert znode_json(zk_client, paths.MIGRATION)["kraft_metadata_epoch"] == led_epoch(new)
        assert_zookeeper_as_a_real_controller_reads_it(zk_client, new)
        assert_sent_only_by(brokers, marks, (new.config.node_id, claimed))
        if leader_goes == "frozen":
            # It wakes up past every session it knew of: it rejoins as a follower and fences nobody.
            heartbeat_again(brokers, times=HEARTBEATS_PAST_A_DEFAULT_SESSION)
            released_after_the_checks.close()
            eventually(lambda: raft_role(old) == "follower", timeout=30)
            heartbeat_again(brokers)
            assert_sessions_kept(brokers, epochs, new)
            assert fences(new.config.metadata_dir, after=end_before) == []
            assert fences(old.config.metadata_dir, after=end_before) == []  # nothing of its own kept either
            assert leader_of(controllers) is new
            assert_sent_only_by(brokers, marks, (new.config.node_id, claimed))


def raft_role(controller: BridgeController) -> str | None:
    raft = controller.status().raft
    return None if raft is None else raft.role


def resign(controller: BridgeController) -> None:
    """QuorumController.renounce: the leader gives up its Raft epoch (and stays a voter)."""
    assert controller.loop is not None and controller.quorum is not None
    controller.loop.call_soon_threadsafe(controller.quorum.resign)


def led_epoch(controller: BridgeController) -> int:
    assert controller.quorum is not None
    return controller.quorum.epoch_led


def leader_after(controllers: list[BridgeController], epoch: int) -> BridgeController:
    """The controller in DUAL_WRITE as the leader of an epoch after `epoch` (waits for it)."""
    eventually(lambda: led_epoch(leader_of(controllers)) > epoch, timeout=30)
    return leader_of(controllers)


def test_leadership_that_comes_back_to_an_earlier_leader_fences_no_broker_and_each_leader_syncs_once(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path
) -> None:
    """Leaders resign until one that led before leads again (more than a session after it last led): it starts
    fresh sessions over its old broker state, and every leadership sends the ZooKeeper-mode brokers one full
    sync under its own, higher controller epoch."""
    with (
        started_quorum(
            zk_client,
            zk_connect,
            real_tree,
            tmp_path,
            rehearsal=False,
            broker_session_timeout_ms=SHORT_SESSION_MS,
        ) as controllers,
        brokers_of(controllers, zk_connect) as brokers,
    ):
        leader = leader_of(controllers)
        epochs = {b.broker_id: b.view.broker_epoch for b in brokers}
        marks = {b.broker_id: len(b.control.snapshot().requests) for b in zk_brokers(brokers)}
        led_before = {leader.config.node_id}
        leaders: list[tuple[int, int]] = []  # (node id, claimed /controller_epoch) of each later leadership
        while not leaders or leaders[-1][0] not in led_before:
            assert len(leaders) < len(controllers), leaders  # a successor is always another voter
            led_before |= {node for node, _ in leaders}
            led = led_epoch(leader)
            resign(leader)
            leader = leader_after(controllers, led)
            heartbeat_again(
                brokers, times=HEARTBEATS_PAST_A_SESSION
            )  # the sessions earlier leaders knew expire
            eventually(lambda: channel_settled(leader, full_syncs=1), timeout=30)  # noqa: B023
            claimed = assert_zookeeper_as_a_real_controller_reads_it(zk_client, leader)
            leaders.append((leader.config.node_id, claimed))
        assert_sessions_kept(brokers, epochs, leader)
        assert leader.log is not None
        partitions = leader.log.image.partition_count()
        for broker in zk_brokers(brokers):
            received = received_since(broker, marks)
            runs: list[tuple[tuple[int, int], list[ReceivedRequest]]] = []
            for request in received:
                sender = (int(request.request.controller_id), int(request.request.controller_epoch))
                if not runs or runs[-1][0] != sender:
                    runs.append((sender, []))
                runs[-1][1].append(request)
            assert [sender for sender, _ in runs] == leaders, broker.broker_id
            for _, run in runs:
                assert_one_full_sync(run, partitions, broker.broker_id)
