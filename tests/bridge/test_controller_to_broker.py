"""The bridge drives three simulated ZooKeeper-mode brokers over TCP as Kafka 3.9's MigrationPropagator does:
after the migration, after topic and broker changes and through partition reassignments, the brokers' logs and
metadata caches, the bridge's log and ZooKeeper agree, and every request carries Kafka's field values
(controller-broker.md §1.4-1.6; expected values come from there, not from the bridge's code).

Against a real ZooKeeper seeded with the real Kafka 3.5 cluster's tree (brokers 1, 2, 3).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kio.schema.errors import ErrorCode

from bridge.api import DriverState
from bridge.controller import BridgeController
from bridge.kafka.client import send_request_sync
from migrate.kraft.image import MetadataImage, PartitionRegistration
from migrate.zk import paths
from migrate.zk.load import load_tree
from migrate.zk.tree import ZTree
from migrate.zk.znodes.topics import decode_topic
from tests.support.bridge import NODE_ID, controller_config, eventually, start_controller
from tests.support.requests import (
    SET,
    TOPIC,
    alter_partition,
    alter_reassignments,
    create_partitions,
    create_topic,
    delete_topics,
    incremental,
    list_reassignments,
)
from tests.support.zk_broker import SimulatedZkBroker
from tests.support.zk_broker_control import (
    FOLLOWER,
    LEADER,
    LEADER_AND_ISR,
    STOP_REPLICA,
    UPDATE_METADATA,
    CachedPartition,
    ReceivedRequest,
    ZkControlSnapshot,
)

pytestmark = pytest.mark.zookeeper

SESSION_TIMEOUT_MS = 3000
"""Long enough that a loaded machine does not fence a live broker mid-test (its heartbeats go every 0.2 s)."""
BROKER_IDS = (1, 2, 3)
LISTENER = "PLAINTEXT"
# controller-broker.md §1.6: the versions at metadata.version 3.4-IV0 or later, and the Type values.
VERSIONS = {LEADER_AND_ISR: 7, UPDATE_METADATA: 8, STOP_REPLICA: 4}
UNKNOWN, INCREMENTAL, FULL = 0, 1, 2
LEADER_DURING_DELETE = EPOCH_DURING_DELETE = -2

Key = tuple[str, int]


# ---------------------------------------------------------------------------------------------- harness


@dataclass
class Cluster:
    """The bridge, the live simulated brokers under it and a ZooKeeper client."""

    bridge: BridgeController
    brokers: dict[int, SimulatedZkBroker]
    zk: KazooClient
    zk_connect: str
    checked: dict[int, int] = field(default_factory=dict)
    """Requests already checked, by id() of the simulated broker."""
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    """Every topic's id seen so far (requests for a deleted topic name it)."""

    @property
    def image(self) -> MetadataImage:
        assert self.bridge.log is not None
        return self.bridge.log.image

    @property
    def kraft_epoch(self) -> int:
        """The bridge's Raft epoch (one leader throughout these tests): partition states' `ControllerEpoch`."""
        return self.image.provenance.last_contained_epoch

    def send(self, request: Any) -> Any:
        return send_request_sync("127.0.0.1", self.bridge.listen_port, request)

    def zk_controller_epoch(self) -> int:
        """The `/controller_epoch` the bridge claimed: every request's `ControllerEpoch`."""
        return int(self.zk.get(paths.CONTROLLER_EPOCH)[0])

    def marks(self) -> dict[int, int]:
        """How many requests each live broker has received so far (for `since`)."""
        return {b: len(sim.control.snapshot().requests) for b, sim in self.brokers.items()}

    def since(self, marks: dict[int, int]) -> dict[int, list[ReceivedRequest]]:
        return {b: sim.control.snapshot().requests[marks.get(b, 0) :] for b, sim in self.brokers.items()}

    def zk_state(self, name: str, partition_id: int) -> dict[str, Any]:
        data, _ = self.zk.get(f"/brokers/topics/{name}/partitions/{partition_id}/state")
        return dict(json.loads(data))

    def partitions(self) -> dict[Key, PartitionRegistration]:
        return {
            (t.name, p): part for t in self.image.topics_by_name.values() for p, part in t.partitions.items()
        }

    def agree(self, timeout: float = 20.0) -> None:
        """Wait until brokers, log and ZooKeeper agree (see `disagreements`), then check the requests received
        since the last call."""
        try:
            eventually(lambda: not self.disagreements(), timeout=timeout)
        except AssertionError:
            raise AssertionError("\n".join(self.disagreements()[:20])) from None
        self.topic_ids.update((t.name, t.topic_id) for t in self.image.topics_by_name.values())
        for broker_id, sim in self.brokers.items():
            requests = sim.control.snapshot().requests
            for request in requests[self.checked.get(id(sim), 0) :]:
                check_request(self, broker_id, request)
            self.checked[id(sim)] = len(requests)

    def disagreements(self) -> list[str]:
        """What differs between the image, each live broker's logs and metadata cache, and ZooKeeper's topic
        and partition state znodes (empty: they agree)."""
        image = self.image
        out: list[str] = []
        for broker_id, sim in self.brokers.items():
            snapshot = sim.control.snapshot()
            out += [f"broker {broker_id}: {d}" for d in log_disagreements(image, broker_id, snapshot)]
            out += [f"broker {broker_id} cache: {d}" for d in cache_disagreements(image, snapshot)]
        out += [f"zookeeper: {d}" for d in zookeeper_disagreements(image, self.zk)]
        return out


def log_disagreements(image: MetadataImage, broker_id: int, snapshot: ZkControlSnapshot) -> list[str]:
    """The broker hosts exactly its replicas, leads where the image says, with the image's epochs and ISR."""
    expected = {
        (t.name, p): (t.topic_id, part)
        for t in image.topics_by_name.values()
        for p, part in t.partitions.items()
        if broker_id in part.replicas
    }
    out = []
    if set(snapshot.logs) != set(expected):
        missing = sorted(set(expected) - set(snapshot.logs))
        extra = sorted(set(snapshot.logs) - set(expected))
        out.append(f"hosts {len(snapshot.logs)} logs; missing {missing[:5]}, not a replica of {extra[:5]}")
    for key, (topic_id, part) in expected.items():
        log = snapshot.logs.get(key)
        if log is None:
            continue
        got = (
            log.topic_id, log.role, log.stopped, log.leader, log.leader_epoch, log.partition_epoch, list(log.isr),
            list(log.replicas), list(log.adding_replicas), list(log.removing_replicas),
        )  # fmt: skip
        want = (
            topic_id, LEADER if part.leader == broker_id else FOLLOWER, False, part.leader, part.leader_epoch,
            part.partition_epoch, part.isr, part.replicas, part.adding_replicas, part.removing_replicas,
        )  # fmt: skip
        if got != want:
            out.append(f"{key}: {got} != image {want}")
    return out


def cache_disagreements(image: MetadataImage, snapshot: ZkControlSnapshot) -> list[str]:
    """The metadata cache holds every partition of the image as Kafka's UpdateMetadata carries it, every
    registered broker (fenced ones too, §1.6) and the bridge as a KRaft controller."""
    cache = snapshot.cache
    registered = image.cluster.brokers
    kraft_epoch = image.provenance.last_contained_epoch  # one Raft leader: constant
    expected = {
        t.name: {
            p: CachedPartition(
                leader=part.leader,
                leader_epoch=part.leader_epoch,
                isr=tuple(part.isr),
                replicas=tuple(part.replicas),
                offline_replicas=tuple(b for b in part.replicas if b not in registered),
                zk_version=part.partition_epoch,
                controller_epoch=kraft_epoch,
            )
            for p, part in t.partitions.items()
        }
        for t in image.topics_by_name.values()
    }
    out = []
    if cache.partition_states != expected:
        names = set(cache.partition_states) | set(expected)
        wrong = sorted(n for n in names if cache.partition_states.get(n) != expected.get(n))
        example = wrong[0]
        out.append(
            f"topics {wrong[:5]} differ, e.g. {example}: {cache.partition_states.get(example)} "
            f"!= {expected.get(example)}"
        )
    if cache.topic_ids != {t.name: t.topic_id for t in image.topics_by_name.values()}:
        out.append(f"topic ids {cache.topic_ids}")
    live = {
        b: tuple((e.name, e.host, e.port, e.security_protocol) for e in r.endpoints)
        for b, r in registered.items()
    }
    if {b: c.endpoints for b, c in cache.live_brokers.items()} != live:
        out.append(f"live brokers {cache.live_brokers} != registered {live}")
    if (cache.controller_id, cache.controller_is_kraft) != (NODE_ID, True):
        out.append(f"controller {cache.controller_id} (KRaft: {cache.controller_is_kraft})")
    return out


def zookeeper_disagreements(image: MetadataImage, zk: KazooClient) -> list[str]:
    """ZooKeeper's topics, assignments (adding/removing replicas too), leaders, ISRs and leader epochs."""
    out = []
    names = set(zk.get_children("/brokers/topics"))
    if names != set(image.topics_by_name):
        out.append(f"topics {sorted(names ^ set(image.topics_by_name))} differ")
    for name, topic in image.topics_by_name.items():
        if name not in names:
            continue
        path = f"/brokers/topics/{name}"
        znode = decode_topic(path, zk.get(path)[0])
        want_assignment = (
            topic.topic_id,
            {p: part.replicas for p, part in topic.partitions.items()},
            {p: part.adding_replicas for p, part in topic.partitions.items() if part.adding_replicas},
            {p: part.removing_replicas for p, part in topic.partitions.items() if part.removing_replicas},
        )
        got_assignment = (znode.topic_id, znode.partitions, znode.adding_replicas, znode.removing_replicas)
        if got_assignment != want_assignment:
            out.append(f"{path}: {got_assignment} != image {want_assignment}")
        for p, part in topic.partitions.items():
            state_path = f"{path}/partitions/{p}/state"
            state = json.loads(zk.get(state_path)[0])
            got = (state["leader"], state["leader_epoch"], state["isr"])
            if got != (part.leader, part.leader_epoch, part.isr):
                out.append(f"{state_path}: {got} != image {(part.leader, part.leader_epoch, part.isr)}")
    return out


def check_request(cluster: Cluster, broker_id: int, received: ReceivedRequest) -> None:
    """Kafka 3.9's header fields and per-partition values of one request (controller-broker.md §1.6), and the
    broker's answer: nothing the bridge sent was refused."""
    request = received.request
    api = received.api_key
    where = f"broker {broker_id}: {type(request).__name__}"
    assert received.api_version == VERSIONS[api], where
    assert request.is_kraft_controller and request.controller_id == NODE_ID, where
    assert request.controller_epoch == cluster.zk_controller_epoch(), where
    # The target's KRaft registration epoch (the simulated broker learnt it from its registration answer).
    assert request.broker_epoch == cluster.brokers[broker_id].view.broker_epoch, where
    assert (received.error_code, received.injected) == (ErrorCode.none, False), where
    assert set(received.partition_errors.values()) <= {ErrorCode.none}, (where, received.partition_errors)
    kraft_epoch = cluster.kraft_epoch
    registered = cluster.image.cluster.brokers
    if api == LEADER_AND_ISR:
        assert request.type in (INCREMENTAL, FULL), where
        leaders = set()
        for topic in request.topic_states:
            assert topic.topic_id == cluster.topic_ids[topic.topic_name], where
            for state in topic.partition_states:
                assert state.is_new and state.controller_epoch == kraft_epoch, (where, state)
                assert broker_id in state.replicas, (where, state)
                leaders.add(int(state.leader))
        # LiveLeaders: the requests' leaders, at their endpoint on the controller's inter-broker listener.
        expected_leaders = {
            (b, e.host, e.port) for b in leaders if b in registered for e in registered[b].endpoints if e.name == LISTENER
        }  # fmt: skip
        assert {
            (int(ll.broker_id), ll.host_name, int(ll.port)) for ll in request.live_leaders
        } == expected_leaders
    elif api == UPDATE_METADATA:
        assert request.type in (UNKNOWN, INCREMENTAL, FULL), where
        assert {int(b.id) for b in request.live_brokers} <= set(registered) | set(BROKER_IDS), where
        for topic in request.topic_states:
            for state in topic.partition_states:
                if state.leader == LEADER_DURING_DELETE:
                    # A deleted topic's entry: no topic id, leader -2, epochs 0, the ZooKeeper controller epoch.
                    assert topic.topic_id is None, where
                    assert (state.leader_epoch, state.zk_version) == (0, 0), (where, state)
                    assert state.controller_epoch == cluster.zk_controller_epoch(), (where, state)
                else:
                    assert state.controller_epoch == kraft_epoch, (where, state)
    else:
        for topic in request.topic_states:
            for state in topic.partition_states:
                assert state.delete_partition, (where, state)


def apis(requests: list[ReceivedRequest]) -> list[tuple[int, int | None]]:
    """(api key, Type) of each request; StopReplica has no Type."""
    return [(r.api_key, None if r.api_key == STOP_REPLICA else int(r.request.type)) for r in requests]


def partitions_in(request: ReceivedRequest) -> dict[Key, Any]:
    return {
        (t.topic_name, int(s.partition_index)): s
        for t in request.request.topic_states
        for s in t.partition_states
    }


def start_broker(bridge: BridgeController, broker_id: int, zk_connect: str) -> SimulatedZkBroker:
    assert bridge.cluster_id is not None
    return SimulatedZkBroker(
        broker_id, ("127.0.0.1", bridge.listen_port), bridge.cluster_id, zk_connect=zk_connect
    ).start()


@pytest.fixture
def cluster(zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path) -> Iterator[Cluster]:
    """The migrated real cluster in DUAL_WRITE under a bridge without rehearsal, its three brokers unfenced."""
    load_tree(zk_client, real_tree)
    bridge = start_controller(
        controller_config(
            zk_connect, tmp_path / "meta", rehearsal=False, broker_session_timeout_ms=SESSION_TIMEOUT_MS
        )
    )
    brokers: dict[int, SimulatedZkBroker] = {}
    try:
        for broker_id in BROKER_IDS:
            brokers[broker_id] = start_broker(bridge, broker_id, zk_connect)
        assert bridge.wait_for_state(DriverState.DUAL_WRITE), bridge.error
        found = Cluster(bridge, brokers, zk_client, zk_connect)
        eventually(lambda: not any(r.fenced for r in found.image.cluster.brokers.values()), timeout=20)
        yield found
    finally:
        for sim in brokers.values():
            sim.kill()
        bridge.stop()


def alter_isr(cluster: Cluster, leader: int, name: str, partition_id: int, isr: list[int]) -> ErrorCode:
    """AlterPartition v3 from the partition's leader, as its replica fetcher sends it once `isr` caught up."""
    topic = cluster.image.topics_by_name[name]
    part = topic.partitions[partition_id]
    epochs = {b: cluster.image.cluster.brokers[b].epoch for b in isr}
    request = alter_partition(
        3, leader, cluster.brokers[leader].view.broker_epoch, partition_id, part.leader_epoch,
        part.partition_epoch, isr, topic=name, topic_id=topic.topic_id, isr_epochs=epochs,
    )  # fmt: skip
    response = cluster.send(request)
    assert response.error_code == ErrorCode.none
    return ErrorCode(response.topics[0].partitions[0].error_code)


# ---------------------------------------------------------------------------------------------- tests


def test_after_the_migration_every_broker_has_the_full_metadata_and_exactly_its_replicas(
    cluster: Cluster,
) -> None:
    cluster.agree()
    partitions = cluster.partitions()
    assert len(partitions) > 50 and any(p.leader == b for p in partitions.values() for b in BROKER_IDS)
    for broker_id, sim in cluster.brokers.items():
        received = sim.control.snapshot().requests
        # Kafka's full sync (§1.4): UpdateMetadata with every partition, then a FULL LeaderAndIsr with the
        # broker's replicas and a FULL UpdateMetadata with every partition; a broker unfenced only after it
        # gets the same through the incremental path (§1.5: every partition, then LeaderAndIsr for its replicas).
        assert received, f"broker {broker_id} got nothing"
        first = received[0]
        assert (first.api_key, first.request.type) == (UPDATE_METADATA, UNKNOWN)
        assert set(partitions_in(first)) == set(partitions)
        led: dict[Key, Any] = {}
        for request in received:
            if request.api_key == LEADER_AND_ISR:
                led.update(partitions_in(request))
        assert set(led) == {k for k, p in partitions.items() if broker_id in p.replicas}
        if any(r.api_key == LEADER_AND_ISR and r.request.type == FULL for r in received):
            assert apis(received)[:3] == [
                (UPDATE_METADATA, UNKNOWN),
                (LEADER_AND_ISR, FULL),
                (UPDATE_METADATA, FULL),
            ]
            assert set(partitions_in(received[2])) == set(partitions)
        assert sim.control.snapshot().strays == [] and sim.control.snapshot().deleted == []


def test_topic_created_partition_added_configs_changed_and_topic_deleted(cluster: Cluster) -> None:
    cluster.agree()

    # A topic created: LeaderAndIsr to its replicas, then UpdateMetadata with its partitions to every broker.
    marks = cluster.marks()
    assert cluster.send(create_topic("fresh", partitions=3, replication_factor=2)).topics[0].error_code == 0
    cluster.agree()
    fresh = cluster.image.topics_by_name["fresh"]
    new = cluster.since(marks)
    for broker_id, requests in new.items():
        hosts = {p for p, part in fresh.partitions.items() if broker_id in part.replicas}
        assert apis(requests) == ([(LEADER_AND_ISR, INCREMENTAL)] if hosts else []) + [
            (UPDATE_METADATA, INCREMENTAL)
        ]
        if hosts:
            assert set(partitions_in(requests[0])) == {("fresh", p) for p in hosts}
        assert set(partitions_in(requests[-1])) == {("fresh", p) for p in fresh.partitions}
    # Dual-written partition states carry the KRaft controller epoch (migration-protocol.md, createTopic).
    assert {cluster.zk_state("fresh", p)["controller_epoch"] for p in fresh.partitions} == {
        cluster.kraft_epoch
    }

    # A partition added: the same for the new partition alone.
    marks = cluster.marks()
    assert cluster.send(create_partitions("fresh", 4)).results[0].error_code == 0
    cluster.agree()
    added = cluster.image.topics_by_name["fresh"].partitions[3]
    for broker_id, requests in cluster.since(marks).items():
        expected = [(LEADER_AND_ISR, INCREMENTAL)] if broker_id in added.replicas else []
        assert apis(requests) == [*expected, (UPDATE_METADATA, INCREMENTAL)]
        assert all(set(partitions_in(r)) == {("fresh", 3)} for r in requests)

    # Configs changed: no request (KAFKA-14668). The next change's requests come right after the mark, and
    # the channel sends in publish order, so nothing was sent for the config.
    marks = cluster.marks()
    response = cluster.send(incremental(TOPIC, "fresh", ("retention.ms", SET, "1000")))
    assert response.responses[0].error_code == ErrorCode.none
    # A topic deleted: StopReplica with delete (leader epoch -2) to every former replica, and deletion
    # entries in UpdateMetadata to every broker; every former replica drops the log.
    before = cluster.image.topics_by_name["fresh"]
    assert cluster.send(delete_topics("fresh")).responses[0].error_code == ErrorCode.none
    cluster.agree()
    assert "fresh" not in cluster.image.topics_by_name
    for broker_id, requests in cluster.since(marks).items():
        hosted = {p for p, part in before.partitions.items() if broker_id in part.replicas}
        assert apis(requests) == [(UPDATE_METADATA, INCREMENTAL)] + ([(STOP_REPLICA, None)] if hosted else [])
        deletion = partitions_in(requests[0])
        assert set(deletion) == {("fresh", p) for p in before.partitions}
        for (_, p), state in deletion.items():
            old = before.partitions[p]
            assert (state.leader, list(state.replicas), list(state.isr)) == (
                LEADER_DURING_DELETE,
                old.replicas,
                old.isr,
            )
            # Kafka 3.9's quirk, kept: the replicas still registered are listed as offline.
            registered = cluster.image.cluster.brokers
            assert list(state.offline_replicas) == [b for b in old.replicas if b in registered]
        if hosted:
            stops = partitions_in(requests[1])
            assert {k: (s.leader_epoch, s.delete_partition) for k, s in stops.items()} == {
                ("fresh", p): (EPOCH_DURING_DELETE, True) for p in hosted
            }
        deleted = cluster.brokers[broker_id].control.snapshot().deleted
        assert {(d.topic, d.partition, d.topic_id) for d in deleted} == {
            ("fresh", p, before.topic_id) for p in hosted
        }


def test_a_killed_brokers_leaderships_start_on_the_survivors_and_a_restarted_broker_gets_everything(
    cluster: Cluster,
) -> None:
    cluster.agree()
    before = cluster.partitions()
    led = {k for k, p in before.items() if p.leader == 1}
    assert led

    dead = cluster.brokers.pop(1)
    dead.kill()
    eventually(lambda: cluster.image.cluster.brokers[1].fenced, timeout=SESSION_TIMEOUT_MS / 1000 + 10)
    cluster.agree()
    after = cluster.partitions()
    for key in led:
        new_leader = after[key].leader
        assert new_leader != 1
        assert cluster.zk_state(*key)["controller_epoch"] == cluster.kraft_epoch
        if new_leader != -1:
            # The new leader leads it now, at the bumped epoch.
            assert (
                cluster.brokers[new_leader].control.snapshot().leaders()[key] == before[key].leader_epoch + 1
            )
    assert any(after[k].leader != -1 for k in led), "some partition moved to a survivor"

    # Restarted: it is sent every partition, then a LeaderAndIsr with all of its replicas.
    marks = cluster.marks()
    back = cluster.brokers[1] = dead.restarted()
    eventually(lambda: not cluster.image.cluster.brokers[1].fenced, timeout=SESSION_TIMEOUT_MS / 1000 + 20)
    cluster.agree()
    received = back.control.snapshot().requests
    first, second = received[0], received[1]
    assert (first.api_key, first.request.type) == (UPDATE_METADATA, UNKNOWN)
    now = cluster.partitions()
    assert set(partitions_in(first)) == set(now)
    assert (second.api_key, second.request.type) == (LEADER_AND_ISR, INCREMENTAL)
    assert set(partitions_in(second)) == {k for k, p in now.items() if 1 in p.replicas}
    # The survivors learnt of the new incarnation (and of any partition it leads again).
    assert all(cluster.since(marks)[b] for b in (2, 3))


def test_a_reassignment_completed_and_one_cancelled(cluster: Cluster) -> None:
    cluster.agree()
    assert cluster.send(create_topic("moving", partitions=2, replication_factor=2)).topics[0].error_code == 0
    cluster.agree()
    topic = cluster.image.topics_by_name["moving"]

    # Partition 0 moves off its leader: [leader, other] -> [other, spare].
    start = topic.partitions[0]
    leader = start.leader
    other = next(b for b in start.replicas if b != leader)
    spare = next(b for b in BROKER_IDS if b not in start.replicas)
    marks = cluster.marks()
    response = cluster.send(alter_reassignments(("moving", 0, [other, spare])))
    assert [p.error_code for t in response.responses for p in t.partitions] == [ErrorCode.none]
    cluster.agree()
    moving = cluster.image.topics_by_name["moving"].partitions[0]
    assert (moving.replicas, moving.adding_replicas, moving.removing_replicas) == (
        [other, spare, leader],
        [spare],
        [leader],
    )
    # KRaft does not bump the leader epoch when a reassignment starts: the replicas accepted an equal-epoch
    # LeaderAndIsr from a KRaft controller (KAFKA-16121), and the new replica follows.
    assert (moving.leader, moving.leader_epoch) == (leader, start.leader_epoch)
    for broker_id, requests in cluster.since(marks).items():
        expected = [(LEADER_AND_ISR, INCREMENTAL)] if broker_id in moving.replicas else []
        assert apis(requests) == [*expected, (UPDATE_METADATA, INCREMENTAL)]
        if expected:
            assert partitions_in(requests[0])[("moving", 0)].leader_epoch == start.leader_epoch
    assert cluster.brokers[spare].control.snapshot().followers()[("moving", 0)] == start.leader_epoch
    listed = cluster.send(list_reassignments(None))
    assert [
        (t.name, p.partition_index, list(p.adding_replicas)) for t in listed.topics for p in t.partitions
    ] == [("moving", 0, [spare])]

    # The new replica caught up: its leader adds it to the ISR, which completes the reassignment; leadership
    # moves off the removed leader, which Kafka tells it with NEW_LEADER_ELECTED (the change is committed).
    marks = cluster.marks()
    assert alter_isr(cluster, leader, "moving", 0, [leader, other, spare]) == ErrorCode.new_leader_elected
    cluster.agree()
    done = cluster.image.topics_by_name["moving"].partitions[0]
    assert (done.replicas, done.adding_replicas, done.removing_replicas) == ([other, spare], [], [])
    assert done.leader == other and done.leader_epoch == start.leader_epoch + 1
    # LeaderAndIsr to the new assignment; the removed replica gets none, but a StopReplica deleting its
    # log, with the current leader epoch (KAFKA-16120).
    received = cluster.since(marks)
    assert {b: apis(r) for b, r in received.items()} == {
        b: [(LEADER_AND_ISR, INCREMENTAL), (UPDATE_METADATA, INCREMENTAL)]
        if b in done.replicas
        else [(UPDATE_METADATA, INCREMENTAL), (STOP_REPLICA, None)]
        for b in BROKER_IDS
    }
    stop = received[leader][-1]
    assert {k: (s.leader_epoch, s.delete_partition) for k, s in partitions_in(stop).items()} == {
        ("moving", 0): (done.leader_epoch, True)
    }
    assert [(d.topic, d.partition) for d in cluster.brokers[leader].control.snapshot().deleted] == [
        ("moving", 0)
    ]
    assert cluster.brokers[other].control.snapshot().leaders()[("moving", 0)] == done.leader_epoch

    # Partition 1: a reassignment started, then cancelled; the replica being added leaves and drops its log.
    first = topic.partitions[1]
    spare = next(b for b in BROKER_IDS if b not in first.replicas)
    keep = first.replicas[0]
    response = cluster.send(alter_reassignments(("moving", 1, [keep, spare])))
    assert [p.error_code for t in response.responses for p in t.partitions] == [ErrorCode.none]
    cluster.agree()
    assert cluster.brokers[spare].control.snapshot().followers()[("moving", 1)] == first.leader_epoch
    marks = cluster.marks()
    response = cluster.send(alter_reassignments(("moving", 1, None)))
    assert [p.error_code for t in response.responses for p in t.partitions] == [ErrorCode.none]
    cluster.agree()
    cancelled = cluster.image.topics_by_name["moving"].partitions[1]
    assert (cancelled.replicas, cancelled.adding_replicas, cancelled.removing_replicas, cancelled.leader) == (
        first.replicas,
        [],
        [],
        first.leader,
    )
    # Leaving the replica set bumps the leader epoch; the replica that was being added is told to delete.
    assert cancelled.leader_epoch == first.leader_epoch + 1
    received = cluster.since(marks)
    assert apis(received[spare]) == [(UPDATE_METADATA, INCREMENTAL), (STOP_REPLICA, None)]
    assert {
        k: (s.leader_epoch, s.delete_partition) for k, s in partitions_in(received[spare][-1]).items()
    } == {("moving", 1): (cancelled.leader_epoch, True)}
    assert ("moving", 1) in {
        (d.topic, d.partition) for d in cluster.brokers[spare].control.snapshot().deleted
    }
    assert cluster.send(list_reassignments(None)).topics == ()


def test_a_reassignment_whose_target_is_in_sync_completes_at_once_and_moves_leadership(
    cluster: Cluster,
) -> None:
    cluster.agree()
    assert cluster.send(create_topic("wide", partitions=1, replication_factor=3)).topics[0].error_code == 0
    cluster.agree()
    start = cluster.image.topics_by_name["wide"].partitions[0]
    assert sorted(start.isr) == list(BROKER_IDS)
    target = [b for b in start.replicas if b != start.leader]
    marks = cluster.marks()
    response = cluster.send(alter_reassignments(("wide", 0, target)))
    assert [p.error_code for t in response.responses for p in t.partitions] == [ErrorCode.none]
    cluster.agree()
    done = cluster.image.topics_by_name["wide"].partitions[0]
    # No adding/removing phase: the target is the replica set, its first in-sync member leads, epoch bumped.
    assert (done.replicas, done.isr, done.leader) == (target, target, target[0])
    assert done.leader_epoch == start.leader_epoch + 1
    received = cluster.since(marks)
    assert {b: apis(r) for b, r in received.items()} == {
        b: [(LEADER_AND_ISR, INCREMENTAL), (UPDATE_METADATA, INCREMENTAL)]
        if b in target
        else [(UPDATE_METADATA, INCREMENTAL), (STOP_REPLICA, None)]
        for b in BROKER_IDS
    }
    assert {
        k: (s.leader_epoch, s.delete_partition) for k, s in partitions_in(received[start.leader][-1]).items()
    } == {("wide", 0): (done.leader_epoch, True)}
    assert cluster.brokers[target[0]].control.snapshot().leaders()[("wide", 0)] == done.leader_epoch
