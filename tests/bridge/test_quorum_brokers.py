"""Brokers across a leader change of a quorum of three bridges (controller-broker.md §3.3, §4.1; handoff.md
§2.4-2.5): simulated ZooKeeper-mode and KRaft brokers heartbeat to whichever voter leads.

When the leader goes, the new one gives every registered broker a fresh session (ClusterControlManager.activate),
so nobody is fenced and nobody re-registers; it claims ZooKeeper with its Raft epoch and sends the ZooKeeper-mode
brokers one full sync under the `/controller_epoch` it claimed.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kio.schema.errors import ErrorCode

from bridge.controller import BridgeController
from migrate.kraft import records as rec
from migrate.kraft.reader import iter_log_dir
from migrate.zk import paths
from migrate.zk.tree import ZTree
from tests.support.bridge import eventually
from tests.support.kraft_broker import SimulatedKraftBroker
from tests.support.quorum import frozen, leader_of, started_quorum, voter_addresses
from tests.support.sim_broker import SimulatedBroker
from tests.support.zk_broker import SimulatedZkBroker
from tests.support.zk_broker_control import assert_one_full_sync

pytestmark = pytest.mark.zookeeper

ZK_BROKER_IDS = (1, 2, 3)
"""The real cluster's brokers: the ZooKeeper-mode brokers the migration waits for."""
KRAFT_BROKER_IDS = (11, 12)
REQUEST_TIMEOUT_S = 3.0
"""The brokers' controller channel gives up on an unanswered request after this long and tries another voter."""


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


@pytest.mark.parametrize("leader_goes", ["stopped", "frozen"])
def test_brokers_keep_their_sessions_across_a_leader_change_and_zk_brokers_get_one_full_sync_from_the_new_leader(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path, leader_goes: str
) -> None:
    """`stopped`: the leader shuts down (it resigns, its connections close); `frozen`: it stops answering
    mid-flight (a SIGSTOPped process: connections open, no resignation, its ZooKeeper session alive)."""
    with (
        started_quorum(zk_client, zk_connect, real_tree, tmp_path, rehearsal=False) as controllers,
        contextlib.ExitStack() as released_after_the_checks,
    ):
        voters = voter_addresses(controllers)
        cluster_id = controllers[0].cluster_id
        assert cluster_id is not None
        brokers: list[SimulatedBroker] = []
        try:
            for n, broker_id in enumerate(ZK_BROKER_IDS):
                first = voters[n % len(voters)]  # not necessarily the leader: they find it
                brokers.append(
                    SimulatedZkBroker(
                        broker_id, first, cluster_id, zk_connect=zk_connect, voters=voters,
                        request_timeout_s=REQUEST_TIMEOUT_S,
                    ).start()
                )  # fmt: skip
            old = leader_of(controllers, timeout=60)
            for n, broker_id in enumerate(KRAFT_BROKER_IDS):
                brokers.append(
                    SimulatedKraftBroker(
                        broker_id, voters[n % len(voters)], cluster_id, voters=voters,
                        request_timeout_s=REQUEST_TIMEOUT_S,
                    ).start()
                )  # fmt: skip
            eventually(lambda: all(running(b) for b in brokers), timeout=30)
            eventually(lambda: channel_settled(old), timeout=30)
            assert old.log is not None
            epochs = {b.broker_id: b.view.broker_epoch for b in brokers}
            registered = {b: old.log.image.cluster.brokers[b].epoch for b in epochs}
            assert registered == epochs  # the registration reply's epoch is the record's
            end_before = old.log.end_offset - 1
            marks = {b.broker_id: len(b.control.snapshot().requests) for b in brokers if isinstance(b, SimulatedZkBroker)}

            if leader_goes == "stopped":
                old.stop()
            else:
                released_after_the_checks.enter_context(frozen(old))
            survivors = [c for c in controllers if c is not old]
            new = leader_of(survivors, timeout=60)
            answered = {b.broker_id: b.view.heartbeats_answered for b in brokers}
            # Every broker heartbeats to the new leader, which answers it unfenced.
            eventually(lambda: all(b.view.heartbeats_answered >= answered[b.broker_id] + 3 for b in brokers), 30)
            eventually(lambda: channel_settled(new, full_syncs=1), timeout=30)

            assert new.log is not None and new.driver is not None
            image = new.log.image
            for broker in brokers:
                view = broker.view
                assert view.registrations == 1, (broker.broker_id, view)  # no re-registration
                assert view.times_fenced == 0 and not view.is_fenced, (broker.broker_id, view)
                assert view.broker_epoch == epochs[broker.broker_id]
                assert set(view.errors) <= {ErrorCode.not_controller}, (broker.broker_id, view.errors)
                in_log = image.cluster.brokers[broker.broker_id]
                assert in_log.epoch == view.broker_epoch and not in_log.fenced
            assert fences(new.config.metadata_dir, after=end_before) == []

            # ZooKeeper as a real controller will read it (handoff.md §2.4).
            raft_epoch = new.quorum.epoch_led if new.quorum is not None else -1
            assert znode_json(zk_client, paths.CONTROLLER)["kraftControllerEpoch"] == raft_epoch
            assert znode_json(zk_client, paths.CONTROLLER)["brokerid"] == new.config.node_id
            claimed = int(zk_client.get(paths.CONTROLLER_EPOCH)[0])
            assert new.driver.leadership.zk_controller_epoch == claimed
            migration = znode_json(zk_client, paths.MIGRATION)
            assert migration["kraft_controller_id"] == new.config.node_id
            assert migration["kraft_controller_epoch"] == raft_epoch
            offset = migration["kraft_metadata_offset"]
            assert migration["kraft_metadata_epoch"] == batch_epoch(new.config.metadata_dir, offset)

            # One full sync from the new leader, under the /controller_epoch it claimed.
            partitions = image.partition_count()
            for broker in brokers:
                if not isinstance(broker, SimulatedZkBroker):
                    continue
                received = broker.control.snapshot().requests[marks[broker.broker_id] :]
                assert_one_full_sync(received, partitions, broker.broker_id)
                assert {(int(r.request.controller_id), int(r.request.controller_epoch)) for r in received} == {
                    (new.config.node_id, claimed)
                }, broker.broker_id
        finally:
            for broker in brokers:
                broker.kill()
