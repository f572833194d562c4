"""Simulated ZooKeeper-mode brokers register with the bridge over TCP, are unfenced, and a crashed one is fenced.

Against a real ZooKeeper seeded with the real Kafka 3.5 cluster's tree (brokers 1, 2, 3).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kio.schema.api_versions.v3 import request as api_versions_v3
from kio.schema.api_versions.v4 import request as api_versions_v4
from kio.schema.broker_heartbeat.v1 import request as heartbeat_v1
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i64

from bridge import pipeline
from bridge.api import DriverState
from bridge.controller import BridgeController
from bridge.driver import MigrationDriver
from bridge.kafka.client import send_envelope_sync, send_request_sync
from bridge.kafka.protocol import KafkaPrincipal, encode_request
from migrate.kraft import metadata_version as mvs
from migrate.kraft.image import MetadataImage
from migrate.kraft.migration_state import ZkMigrationState
from migrate.kraft.reader import iter_log_dir
from migrate.zk import paths
from migrate.zk.embedded import EmbeddedZooKeeper
from migrate.zk.load import load_tree
from migrate.zk.tree import ZTree
from tests.support.bridge import (
    appends_held,
    controller_config,
    eventually,
    partition_states,
    start_controller,
    zookeeper_matches_image,
)
from tests.support.bridge_process import (
    CONFIG_KEY,
    Change,
    ZkReplyCutter,
    build_request,
    config_value,
    response_codes,
    set_data_op_bytes,
)
from tests.support.kraft_broker import SimulatedKraftBroker
from tests.support.requests import (
    PREFERRED,
    SET,
    TOPIC,
    UNCLEAN,
    alter_partition,
    create_topic,
    elect_leaders,
    incremental,
    unregister_broker,
)
from tests.support.sim_broker import log_dir_id
from tests.support.zk_broker import SimulatedZkBroker

SESSION_TIMEOUT_MS = 1500
BROKER_IDS = (1, 2, 3)


@pytest.fixture
def seeded(zk_client: KazooClient, real_tree: ZTree) -> KazooClient:
    load_tree(zk_client, real_tree)
    return zk_client


def start_bridge(zk_connect: str, tmp_path: Path, **fields: object) -> BridgeController:
    """A bridge as Kafka's controller behaves (no rehearsal): it waits for the brokers before migrating."""
    return start_controller(
        controller_config(
            zk_connect, tmp_path / "meta", rehearsal=False, broker_session_timeout_ms=SESSION_TIMEOUT_MS,
            **fields,
        )
    )  # fmt: skip


def start_broker(bridge: BridgeController, broker_id: int, zk_connect: str) -> SimulatedZkBroker:
    cluster_id = bridge.cluster_id
    assert cluster_id is not None
    return SimulatedZkBroker(
        broker_id, ("127.0.0.1", bridge.listen_port), cluster_id, zk_connect=zk_connect
    ).start()


@pytest.fixture
def bridge(seeded: KazooClient, zk_connect: str, tmp_path: Path) -> Iterator[BridgeController]:
    controller = start_bridge(zk_connect, tmp_path)
    yield controller
    controller.stop()


@pytest.fixture
def brokers(bridge: BridgeController, zk_connect: str) -> Iterator[dict[int, SimulatedZkBroker]]:
    started = {broker_id: start_broker(bridge, broker_id, zk_connect) for broker_id in BROKER_IDS}
    assert bridge.wait_for_state(DriverState.DUAL_WRITE), bridge.error
    yield started
    for broker in started.values():
        broker.kill()


def image(bridge: BridgeController) -> MetadataImage:
    assert bridge.log is not None
    return bridge.log.image


def all_unfenced(bridge: BridgeController) -> bool:
    brokers = image(bridge).cluster.brokers
    return set(brokers) == set(BROKER_IDS) and not any(b.fenced for b in brokers.values())


def runs_as_kraft_broker(bridge: BridgeController, kraft: SimulatedKraftBroker) -> bool:
    registration = image(bridge).cluster.brokers.get(kraft.broker_id)
    return (
        registration is not None
        and registration.incarnation_id == kraft.incarnation
        and not registration.is_migrating_zk_broker
        and not registration.fenced
    )


def every_replica_placed(bridge: BridgeController) -> bool:
    return all(
        partition.directories == [log_dir_id(b) for b in partition.replicas]
        for topic in image(bridge).topics_by_id.values()
        for partition in topic.partitions.values()
    )


def test_the_migration_waits_until_every_broker_has_registered_and_status_names_the_missing(
    bridge: BridgeController, zk_connect: str
) -> None:
    first = [start_broker(bridge, broker_id, zk_connect) for broker_id in (1, 2)]
    try:
        eventually(lambda: bridge.status().brokers.waiting_for == [3], timeout=20)
        assert bridge.state is DriverState.WAIT_FOR_BROKERS
        assert bridge.log is not None
        assert bridge.log.image.features.zk_migration_state != ZkMigrationState.MIGRATION  # nothing migrated
        assert bridge.status().brokers.registered == 2
        first.append(start_broker(bridge, 3, zk_connect))
        assert bridge.wait_for_state(DriverState.DUAL_WRITE), bridge.error
        eventually(lambda: bridge.status().brokers.fenced == 0, timeout=20)
        status = bridge.status().brokers
        assert (status.registered, status.migrating_zk_brokers, status.waiting_for) == (3, 3, None)
        metrics = bridge.metrics.exposition().decode()
        assert "zk2kraft_migrating_zk_broker_count 3.0" in metrics
        assert "zk2kraft_fenced_broker_count 0.0" in metrics
    finally:
        for broker in first:
            broker.kill()


def test_brokers_register_as_migrating_zk_brokers_and_are_unfenced_once_caught_up(
    bridge: BridgeController, brokers: dict[int, SimulatedZkBroker]
) -> None:
    eventually(lambda: all_unfenced(bridge), timeout=20)
    registered = image(bridge).cluster.brokers
    for broker_id, broker in brokers.items():
        registration = registered[broker_id]
        assert registration.is_migrating_zk_broker
        assert registration.incarnation_id == broker.incarnation
        assert registration.epoch == broker.view.broker_epoch
        eventually(
            lambda b=broker: b.view.is_caught_up and not b.view.is_fenced, timeout=10
        )  # next heartbeat
        # Only NOT_CONTROLLER, while the bridge was still reading ZooKeeper (the broker retries).
        assert set(broker.view.errors) <= {ErrorCode.not_controller}


def test_a_crashed_broker_is_fenced_and_its_leaderships_move_in_the_log_and_in_zookeeper(
    bridge: BridgeController, brokers: dict[int, SimulatedZkBroker], zk_client: KazooClient
) -> None:
    eventually(lambda: all_unfenced(bridge), timeout=20)
    before = {
        (t.name, p): partition
        for t in image(bridge).topics_by_name.values()
        for p, partition in t.partitions.items()
    }
    led = {key for key, partition in before.items() if partition.leader == 1}
    assert led, "broker 1 leads partitions in the real cluster"

    brokers[1].kill()
    eventually(lambda: image(bridge).cluster.brokers[1].fenced, timeout=SESSION_TIMEOUT_MS / 1000 + 10)

    after = {
        (t.name, p): partition
        for t in image(bridge).topics_by_name.values()
        for p, partition in t.partitions.items()
    }
    for key in led:
        old, new = before[key], after[key]
        assert new.leader != 1
        survivors = [b for b in old.isr if b != 1]
        if survivors:
            # ONLINE election: the first surviving ISR member in replica-list order.
            assert new.leader == next(b for b in old.replicas if b in survivors)
            assert new.isr == survivors
        else:
            # The ISR is never emptied: the last member stays, and the partition has no leader.
            assert new.leader == -1 and new.isr == old.isr
        assert new.leader_epoch == old.leader_epoch + 1
    for key, old in before.items():
        if 1 in old.isr and key not in led:
            assert 1 not in after[key].isr
            assert after[key].leader_epoch == old.leader_epoch + 1  # ISR shrink bumps while migrating
    eventually(lambda: bridge.status().brokers.fenced == 1, timeout=10)  # /status follows the image
    # Brokers 2 and 3 keep their sessions.
    assert not image(bridge).cluster.brokers[2].fenced and not image(bridge).cluster.brokers[3].fenced

    def zookeeper_agrees() -> bool:
        states = partition_states(zk_client, image(bridge))
        return all(
            (state["leader"], state["isr"], state["leader_epoch"])
            == (after[key].leader, after[key].isr, after[key].leader_epoch)
            for key, state in states.items()
        )

    eventually(zookeeper_agrees, timeout=10)


def test_brokers_restarted_in_kraft_mode_reregister_and_status_shows_no_migrating_brokers(
    bridge: BridgeController, brokers: dict[int, SimulatedZkBroker], zk_client: KazooClient
) -> None:
    eventually(lambda: all_unfenced(bridge), timeout=20)
    assert bridge.cluster_id is not None
    restarted: list[SimulatedKraftBroker] = []
    try:
        for broker_id, zk_broker in brokers.items():
            zk_broker.kill()
            kraft = SimulatedKraftBroker(broker_id, ("127.0.0.1", bridge.listen_port), bridge.cluster_id)
            restarted.append(kraft.start())
            # Registered again as a KRaft broker (after its old session expired), then unfenced.
            eventually(
                lambda k=kraft: runs_as_kraft_broker(bridge, k), timeout=SESSION_TIMEOUT_MS / 1000 + 20
            )
            assert zk_client.exists(f"/brokers/ids/{broker_id}") is None  # no ZooKeeper registration
            eventually(lambda k=kraft: not k.view.is_fenced, timeout=10)  # its next heartbeat says so
            assert kraft.view.registrations == 1
            # Until the old session expired, the controller refused the new incarnation as a duplicate.
            assert set(kraft.view.errors) <= {ErrorCode.duplicate_broker_registration}
        # Migrated partitions carry no directory; the KRaft brokers place every replica in their log dir.
        eventually(lambda: every_replica_placed(bridge), timeout=20)
        eventually(lambda: all(k.assignments_sent >= 1 for k in restarted), timeout=10)  # answers arrived
        assert {k.broker_id: k.assignment_errors for k in restarted} == {b: [] for b in BROKER_IDS}
        eventually(lambda: zookeeper_matches_image(zk_client, image(bridge)), timeout=10)
        eventually(lambda: bridge.status().brokers.migrating_zk_brokers == 0, timeout=10)
        status = bridge.status().brokers
        assert (status.registered, status.fenced, status.migrating_zk_brokers) == (3, 0, 0)
        assert "zk2kraft_migrating_zk_broker_count 0.0" in bridge.metrics.exposition().decode()
    finally:
        for kraft in restarted:
            kraft.kill()


def test_api_versions_carries_the_controllers_features_and_zk_migration_ready(
    bridge: BridgeController, brokers: dict[int, SimulatedZkBroker]
) -> None:
    request = api_versions_v4.ApiVersionsRequest(client_software_name="test", client_software_version="1")
    response = send_request_sync("127.0.0.1", bridge.listen_port, request)
    assert response.error_code == ErrorCode.none
    supported = {f.name: (f.min_version, f.max_version) for f in response.supported_features}
    assert supported == {
        "metadata.version": (1, mvs.LATEST_PRODUCTION.feature_level),
        "kraft.version": (0, 1),
    }
    features = image(bridge).features
    finalized = {f.name: (f.min_version_level, f.max_version_level) for f in response.finalized_features}
    assert finalized == {"metadata.version": (features.metadata_version, features.metadata_version)}
    # The epoch is the log offset at which the migration recorded its state (the last feature change).
    assert response.finalized_features_epoch == features.epoch > 0
    assert response.zk_migration_ready
    # Before v4 a feature whose minimum is 0 is left out (KAFKA-17492).
    old = send_request_sync(
        "127.0.0.1",
        bridge.listen_port,
        api_versions_v3.ApiVersionsRequest(client_software_name="test", client_software_version="1"),
    )
    assert [f.name for f in old.supported_features] == ["metadata.version"]


def leaders_in_zookeeper(zk_client: KazooClient, bridge: BridgeController) -> dict[tuple[str, int], int]:
    return {key: int(str(state["leader"])) for key, state in partition_states(zk_client, image(bridge)).items()}


def test_controlled_shutdown_moves_every_leadership_away_before_the_broker_is_told_to_shut_down(
    bridge: BridgeController, brokers: dict[int, SimulatedZkBroker], zk_client: KazooClient
) -> None:
    eventually(lambda: all_unfenced(bridge), timeout=20)
    before = {
        (t.name, p): partition
        for t in image(bridge).topics_by_name.values()
        for p, partition in t.partitions.items()
    }
    led = {key for key, partition in before.items() if partition.leader == 2}
    assert led, "broker 2 leads partitions in the real cluster"

    assert brokers[2].shutdown(timeout=30), f"broker 2 was never told to shut down: {brokers[2].view}"

    # Read at once: the answer that let the broker go came after the moves were in the log and ZooKeeper.
    zk_leaders = leaders_in_zookeeper(zk_client, bridge)
    assert not [key for key, leader in zk_leaders.items() if leader == 2]
    after = image(bridge)
    assert after.cluster.brokers[2].in_controlled_shutdown or after.cluster.brokers[2].fenced
    for key in led:
        new = after.topics_by_name[key[0]].partitions[key[1]]
        survivors = [b for b in before[key].isr if b != 2]
        expected = next((b for b in before[key].replicas if b in survivors), -1)
        assert (new.leader, zk_leaders[key]) == (expected, expected)
        assert new.leader_epoch == before[key].leader_epoch + 1
    # The other brokers were never fenced by it.
    assert not after.cluster.brokers[1].fenced and not after.cluster.brokers[3].fenced


def alter_isr(
    bridge: BridgeController,
    leader: SimulatedZkBroker,
    topic: str,
    partition_id: int,
    isr_epochs: dict[int, int],
) -> ErrorCode:
    """AlterPartition v3 from `leader`, as its replica fetcher would send it, with the ISR's broker epochs."""
    topic_image = image(bridge).topics_by_name[topic]
    partition = topic_image.partitions[partition_id]
    request = alter_partition(
        3, leader.broker_id, leader.view.broker_epoch, partition_id, partition.leader_epoch,
        partition.partition_epoch, list(isr_epochs), topic=topic, topic_id=topic_image.topic_id,
        isr_epochs=isr_epochs,
    )  # fmt: skip
    response = send_request_sync("127.0.0.1", bridge.listen_port, request)
    assert response.error_code == ErrorCode.none
    return ErrorCode(response.topics[0].partitions[0].error_code)


def election_errors(response: object) -> dict[tuple[str, int], ErrorCode]:
    return {
        (topic.topic, int(result.partition_id)): ErrorCode(result.error_code)
        for topic in response.replica_election_results  # type: ignore[attr-defined]
        for result in topic.partition_result
    }


@pytest.mark.parametrize("incarnation", ["same", "new"])
def test_a_fenced_broker_back_leads_where_it_is_the_only_choice_and_preferred_elections_move_leadership_back(
    bridge: BridgeController,
    brokers: dict[int, SimulatedZkBroker],
    zk_client: KazooClient,
    zk_connect: str,
    incarnation: str,
) -> None:
    eventually(lambda: all_unfenced(bridge), timeout=20)
    port = bridge.listen_port
    old_epoch = brokers[1].view.broker_epoch
    if incarnation == "same":
        brokers[1].silent = True  # a long pause: the session expires, the process lives on
    else:
        brokers[1].kill()
    eventually(lambda: image(bridge).cluster.brokers[1].fenced, timeout=SESSION_TIMEOUT_MS / 1000 + 10)
    fenced = image(bridge)
    only_one = {
        (t.name, p): partition
        for t in fenced.topics_by_name.values()
        for p, partition in t.partitions.items()
        if partition.isr == [1]
    }
    assert only_one and all(p.leader == -1 for p in only_one.values())
    (shared_topic, shared_id), shared = next(
        ((t.name, p), partition)
        for t in fenced.topics_by_name.values()
        for p, partition in t.partitions.items()
        if partition.replicas == [1, 3]
    )
    assert (shared.leader, shared.isr) == (3, [3])
    some_topic, some_id = next(iter(only_one))

    # While fenced it may not rejoin an ISR, nor be elected, even uncleanly.
    assert alter_isr(
        bridge, brokers[3], shared_topic, shared_id, {3: brokers[3].view.broker_epoch, 1: old_epoch}
    ) == (ErrorCode.ineligible_replica)
    response = send_request_sync("127.0.0.1", port, elect_leaders(UNCLEAN, {some_topic: [some_id]}))
    assert election_errors(response) == {(some_topic, some_id): ErrorCode.eligible_leaders_not_available}

    if incarnation == "same":
        brokers[1].silent = False
    else:
        brokers[1] = start_broker(bridge, 1, zk_connect)
    eventually(lambda: not image(bridge).cluster.brokers[1].fenced, timeout=20)
    back = image(bridge)
    registration = back.cluster.brokers[1]
    assert registration.incarnation_id == brokers[1].incarnation
    assert (registration.epoch == old_epoch) == (incarnation == "same")
    # Unfencing elects it wherever it is the only valid choice; nowhere else moves.
    for (topic, partition_id), before in only_one.items():
        now = back.topics_by_name[topic].partitions[partition_id]
        assert (now.leader, now.isr, now.leader_epoch) == (1, [1], before.leader_epoch + 1)
    assert back.topics_by_name[shared_topic].partitions[shared_id].leader == 3

    # Not in the ISR yet: its preferred election cannot happen.
    response = send_request_sync("127.0.0.1", port, elect_leaders(PREFERRED, {shared_topic: [shared_id]}))
    assert election_errors(response) == {(shared_topic, shared_id): ErrorCode.preferred_leader_not_available}
    if incarnation == "new":  # the old incarnation's epoch no longer counts
        assert alter_isr(
            bridge, brokers[3], shared_topic, shared_id, {3: brokers[3].view.broker_epoch, 1: old_epoch}
        ) == (ErrorCode.ineligible_replica)
    caught_up = {3: brokers[3].view.broker_epoch, 1: registration.epoch}
    assert alter_isr(bridge, brokers[3], shared_topic, shared_id, caught_up) == ErrorCode.none

    # Preferred election forwarded by a broker in an Envelope: leadership moves back, in ZooKeeper too.
    inner = encode_request(
        elect_leaders(PREFERRED, {shared_topic: [shared_id]}), correlation_id=5, client_id="b-2"
    )
    result = send_envelope_sync(
        "127.0.0.1", port, inner, principal=KafkaPrincipal("User", "admin"), client_host_address="10.0.0.2"
    )
    assert result.error_code == ErrorCode.none and result.inner_response is not None
    assert election_errors(result.inner_response) == {(shared_topic, shared_id): ErrorCode.none}
    moved = image(bridge).topics_by_name[shared_topic].partitions[shared_id]
    assert (moved.leader, moved.isr) == (1, [3, 1])
    assert leaders_in_zookeeper(zk_client, bridge)[(shared_topic, shared_id)] == 1
    response = send_request_sync("127.0.0.1", port, elect_leaders(PREFERRED, {shared_topic: [shared_id]}))
    assert election_errors(response) == {(shared_topic, shared_id): ErrorCode.election_not_needed}
    # Every partition (null): those needing no election are left out, and none does now.
    response = send_request_sync("127.0.0.1", port, elect_leaders(PREFERRED, None))
    assert election_errors(response) == {}
    assert {t.topic for t in response.replica_election_results} == set(back.topics_by_name)


def test_with_auto_leader_rebalance_a_partition_goes_back_to_its_preferred_leader(
    seeded: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    controller = start_bridge(zk_connect, tmp_path, leader_imbalance_check_interval_s=0.5)
    started = [start_broker(controller, broker_id, zk_connect) for broker_id in BROKER_IDS]
    try:
        assert controller.wait_for_state(DriverState.DUAL_WRITE), controller.error
        migrated = image(controller)
        # The real cluster has a partition led by its second replica, both in sync.
        (topic, partition_id), partition = next(
            ((t.name, p), partition)
            for t in migrated.topics_by_name.values()
            for p, partition in t.partitions.items()
            if partition.replicas == [2, 1]
        )
        assert (partition.leader, partition.isr) == (1, [1, 2])

        def balanced() -> bool:
            now = image(controller).topics_by_name[topic].partitions[partition_id]
            return now.leader == 2 and leaders_in_zookeeper(seeded, controller)[(topic, partition_id)] == 2

        eventually(balanced, timeout=30)
        now = image(controller).topics_by_name[topic].partitions[partition_id]
        # (A pass before the brokers were unfenced may have left it leaderless for a moment, as Kafka would.)
        assert now.isr == [1, 2] and now.leader_epoch > partition.leader_epoch
    finally:
        for broker in started:
            broker.kill()
        controller.stop()



@pytest.fixture
def patient_zk(tmp_path: Path, real_tree: ZTree) -> Iterator[EmbeddedZooKeeper]:
    """A private ZooKeeper seeded with the real tree that grants the bridge its 18 s session (the shared one
    caps sessions at 10 s): kazoo keeps a connection whose answers are held for about 12 s before it gives
    up on it."""
    server = EmbeddedZooKeeper(tmp_path / "zk", config={"maxSessionTimeout": 30_000})
    server.start()
    try:
        client = KazooClient(hosts=server.connect_string)
        client.start(timeout=15)
        try:
            load_tree(client, real_tree)
        finally:
            client.stop()
            client.close()
        yield server
    finally:
        server.close()


@contextlib.contextmanager
def unfenced_behind_a_reply_cutter(
    patient_zk: EmbeddedZooKeeper, tmp_path: Path
) -> Iterator[tuple[ZkReplyCutter, BridgeController, dict[int, SimulatedZkBroker]]]:
    """A bridge reaching ZooKeeper through a reply cutter, in DUAL_WRITE with brokers 1-3 unfenced."""
    cutter = ZkReplyCutter(patient_zk.port)
    controller = start_bridge(cutter.connect_string, tmp_path)
    started = {b: start_broker(controller, b, patient_zk.connect_string) for b in BROKER_IDS}
    try:
        assert controller.wait_for_state(DriverState.DUAL_WRITE), controller.error
        eventually(lambda: all_unfenced(controller) and not any(b.view.is_fenced for b in started.values()), 30)
        yield cutter, controller, started
    finally:
        cutter.release()
        for broker in started.values():
            broker.kill()
        controller.stop()
        cutter.close()


def test_heartbeats_are_answered_while_a_dual_writes_zookeeper_answer_is_held(
    patient_zk: EmbeddedZooKeeper, tmp_path: Path
) -> None:
    """KAFKA-15441: heartbeats that change nothing never wait behind a dual write whose ZooKeeper answer is
    late; for longer than a session timeout every broker keeps being answered and nobody is fenced, and the
    write lands once ZooKeeper answers."""
    zk_connect = patient_zk.connect_string
    answers: list[object] = []
    sender: threading.Thread | None = None
    try:
        with unfenced_behind_a_reply_cutter(patient_zk, tmp_path) as (cutter, controller, started):
            topic = sorted(image(controller).topics_by_name)[0]
            seq = 4242
            cutter.arm(containing=set_data_op_bytes(paths.MIGRATION), hold=True)

            def change() -> None:
                request = build_request(Change(kind="config", entity=topic, seq=seq, client=0))
                answers.append(send_request_sync("127.0.0.1", controller.listen_port, request, timeout=120))

            sender = threading.Thread(target=change, daemon=True)
            sender.start()
            eventually(lambda: cutter.cuts == 1, timeout=30)  # the change's multi reached ZooKeeper; its answer is held
            held_at = time.monotonic()
            before = {b: broker.view.heartbeats_answered for b, broker in started.items()}
            errors = {b: len(broker.view.errors) for b, broker in started.items()}

            def counted() -> dict[int, int]:
                return {b: broker.view.heartbeats_answered - before[b] for b, broker in started.items()}

            def answered_through_a_session() -> bool:
                # Several heartbeats each, and longer than a session timeout: heartbeats stuck behind the held
                # write would have let the sessions expire by now.
                return time.monotonic() - held_at > 2 * SESSION_TIMEOUT_MS / 1000 and min(counted().values()) >= 5

            eventually(lambda: answered_through_a_session() or bool(answers), timeout=60)
            assert answers == [], f"the hold ended before the heartbeats were answered: {counted()} answered"
            assert sender.is_alive()
            assert all_unfenced(controller)
            assert {b: len(broker.view.errors) for b, broker in started.items()} == errors
            assert not any(broker.view.is_fenced for broker in started.values())

            cutter.release()
            sender.join(60)
            assert len(answers) == 1 and response_codes(answers[0]) == [ErrorCode.none], answers
            reader = KazooClient(hosts=zk_connect)
            reader.start(timeout=15)
            try:
                data, _ = reader.get(f"/config/topics/{topic}")
            finally:
                reader.stop()
                reader.close()
            assert json.loads(data)["config"][CONFIG_KEY] == config_value(seq)
            assert all_unfenced(controller)
    finally:
        if sender is not None:
            sender.join(10)


def test_a_fence_larger_than_one_batch_is_appended_in_chunks_and_lands_whole(
    bridge: BridgeController,
    brokers: dict[int, SimulatedZkBroker],
    zk_client: KazooClient,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Broker 1's fence here changes a few dozen partitions; in a 200,000-partition cluster it changes ~200,000,
    # more than one KRaft batch may hold (8 MiB). The chunk size is lowered so that the split shows.
    monkeypatch.setattr(pipeline, "MAX_RECORDS_PER_APPEND", 5)
    eventually(lambda: all_unfenced(bridge), timeout=20)
    fence_start = bridge.log.end_offset if bridge.log is not None else 0
    changed = [
        (t.name, p)
        for t in image(bridge).topics_by_name.values()
        for p, partition in t.partitions.items()
        if 1 in partition.isr
    ]
    assert len(changed) > 10, "broker 1 is in many ISRs of the real cluster"
    brokers[1].kill()
    eventually(lambda: image(bridge).cluster.brokers[1].fenced, timeout=SESSION_TIMEOUT_MS / 1000 + 10)
    metadata_log = bridge.log
    assert metadata_log is not None
    end = metadata_log.end_offset - 1
    eventually(lambda: metadata_log.durable_offset >= end)  # the image has the fence as soon as it is appended
    batches: dict[int, list[str]] = {}
    for entry in iter_log_dir(tmp_path / "meta", start_offset=fence_start):
        batches.setdefault(entry.batch_position, []).append(type(entry.record).__name__)
    fence_batches = [kinds for kinds in batches.values() if "PartitionChangeRecord" in kinds]
    assert len(fence_batches) >= len(changed) // 5
    assert all(len(kinds) <= 5 for kinds in fence_batches)
    after = image(bridge)
    assert all(1 not in after.topics_by_name[name].partitions[p].isr or
               after.topics_by_name[name].partitions[p].isr == [1] for name, p in changed)  # fmt: skip
    eventually(lambda: zookeeper_matches_image(zk_client, image(bridge)), timeout=10)


def partition_led_by_1_with_full_isr(bridge: BridgeController) -> tuple[str, int]:
    """A partition of a new three-replica topic that broker 1 leads."""
    response = send_request_sync("127.0.0.1", bridge.listen_port, create_topic("three-replicas", 3, 3))
    assert [t.error_code for t in response.topics] == [ErrorCode.none]
    for topic in sorted(image(bridge).topics_by_name.values(), key=lambda t: t.name):
        for partition_id, partition in sorted(topic.partitions.items()):
            if partition.leader == 1 and {1, 2, 3} <= set(partition.isr):
                return topic.name, partition_id
    raise AssertionError("no partition led by broker 1 with brokers 1, 2 and 3 in its ISR")


def test_a_session_expiring_while_the_leader_shrinks_the_isr_never_brings_the_removed_replica_back(
    bridge: BridgeController, brokers: dict[int, SimulatedZkBroker], zk_client: KazooClient
) -> None:
    """Broker 2's fence and leader 1's AlterPartition removing replica 3 wait behind held appends; each is
    computed from the image the other left, so an out-of-sync replica never re-enters the ISR."""
    eventually(lambda: all_unfenced(bridge), timeout=20)
    eventually(lambda: not any(b.view.is_fenced for b in brokers.values()), timeout=20)
    topic, partition_id = partition_led_by_1_with_full_isr(bridge)
    epochs = {b: image(bridge).cluster.brokers[b].epoch for b in (1, 2)}
    with ThreadPoolExecutor(1) as pool:
        with appends_held(bridge):
            brokers[2].kill()
            eventually(lambda: bridge.pipeline.events_waiting == 1, timeout=SESSION_TIMEOUT_MS / 1000 + 10)
            shrink = pool.submit(alter_isr, bridge, brokers[1], topic, partition_id, epochs)
            eventually(lambda: bridge.pipeline.events_waiting == 2)
        code = shrink.result(timeout=30)
    eventually(lambda: image(bridge).cluster.brokers[2].fenced)
    partition = image(bridge).topics_by_name[topic].partitions[partition_id]
    assert 2 not in partition.isr and partition.leader == 1
    if code == ErrorCode.none:
        assert partition.isr == [1], "replica 3 left the ISR through AlterPartition and came back without one"
    else:  # the fence came first: the leader's request named a partition epoch that had moved on
        assert code == ErrorCode.invalid_update_version and partition.isr == [1, 3]
    eventually(lambda: zookeeper_matches_image(zk_client, image(bridge)))
    assert bridge.renounced is None


def test_a_controlled_shutdown_and_a_fence_together_leave_neither_broker_leading_or_in_an_isr(
    bridge: BridgeController, brokers: dict[int, SimulatedZkBroker], zk_client: KazooClient
) -> None:
    """Broker 2 asks for a controlled shutdown while broker 3's session expires, both behind held appends:
    afterwards neither leads nor stays in an ISR it shares with others, and broker 2's shutdown completes."""
    eventually(lambda: all_unfenced(bridge), timeout=20)
    eventually(lambda: not any(b.view.is_fenced for b in brokers.values()), timeout=20)
    with appends_held(bridge):
        brokers[3].kill()
        eventually(lambda: bridge.pipeline.events_waiting == 1, timeout=SESSION_TIMEOUT_MS / 1000 + 10)
        brokers[2].begin_controlled_shutdown()
        eventually(lambda: bridge.pipeline.events_waiting == 2)
    eventually(lambda: image(bridge).cluster.brokers[3].fenced)
    eventually(lambda: brokers[2].view.should_shut_down, timeout=20)
    for topic in image(bridge).topics_by_name.values():
        for partition in topic.partitions.values():
            assert partition.leader not in (2, 3), (topic.name, partition)
            if len(partition.isr) > 1:
                assert not {2, 3} & set(partition.isr), (topic.name, partition)
    eventually(lambda: zookeeper_matches_image(zk_client, image(bridge)))
    assert bridge.renounced is None


def test_a_leaderless_partition_gets_an_unclean_leader_once_its_topic_allows_one(
    seeded: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    """Kafka's electUnclean task: unclean.leader.election.enable set after a partition lost its only in-sync
    replica gives it a leader at the next unclean.leader.election.interval.ms, with nothing else happening."""
    controller = start_bridge(zk_connect, tmp_path, unclean_leader_election_interval_ms=200)
    started = {broker_id: start_broker(controller, broker_id, zk_connect) for broker_id in BROKER_IDS}
    try:
        assert controller.wait_for_state(DriverState.DUAL_WRITE), controller.error
        eventually(lambda: all_unfenced(controller), timeout=20)
        response = send_request_sync("127.0.0.1", controller.listen_port, create_topic("fragile", 1, 2))
        assert [t.error_code for t in response.topics] == [ErrorCode.none]
        partition = image(controller).topics_by_name["fragile"].partitions[0]
        leader, follower = partition.leader, next(b for b in partition.replicas if b != partition.leader)
        epoch = image(controller).cluster.brokers[leader].epoch
        assert alter_isr(controller, started[leader], "fragile", 0, {leader: epoch}) == ErrorCode.none
        started[leader].kill()
        eventually(lambda: image(controller).cluster.brokers[leader].fenced, timeout=10)
        offline = image(controller).topics_by_name["fragile"].partitions[0]
        assert (offline.leader, offline.isr) == (-1, [leader])  # the last in-sync replica stays, leaderless
        time.sleep(0.5)  # a few timer periods: unclean elections are off, so nothing may change
        assert image(controller).topics_by_name["fragile"].partitions[0].leader == -1
        change = incremental(TOPIC, "fragile", ("unclean.leader.election.enable", SET, "true"))
        response = send_request_sync("127.0.0.1", controller.listen_port, change)
        assert [r.error_code for r in response.responses] == [ErrorCode.none]
        eventually(lambda: image(controller).topics_by_name["fragile"].partitions[0].leader == follower)
        assert image(controller).topics_by_name["fragile"].partitions[0].isr == [follower]
    finally:
        for broker in started.values():
            broker.kill()
        controller.stop()


def test_status_counts_a_fence_once_it_is_in_the_log_while_zookeeper_has_not_answered(
    patient_zk: EmbeddedZooKeeper, tmp_path: Path
) -> None:
    """`/status` counts brokers from the log: a fence committed while ZooKeeper holds its answer shows at once."""
    with unfenced_behind_a_reply_cutter(patient_zk, tmp_path) as (cutter, controller, started):
        cutter.arm(containing=set_data_op_bytes(paths.MIGRATION), hold=True)
        started[3].kill()
        eventually(lambda: cutter.cuts == 1, timeout=30)  # the fence's dual write reached ZooKeeper, unanswered
        eventually(lambda: controller.status().brokers.fenced == 1, timeout=5)
        assert cutter.cuts == 1 and image(controller).cluster.brokers[3].fenced


def test_after_a_restart_brokers_are_fenced_and_elections_served_while_zookeeper_is_being_reconciled(
    seeded: KazooClient, zk_connect: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka gates only PRE_MIGRATION: during SYNC_KRAFT_TO_ZK a dead broker is fenced (what it changes reaches
    ZooKeeper with the reconciliation); an ElectLeaders asked meanwhile is answered once ZooKeeper will have it."""
    first = start_bridge(zk_connect, tmp_path)
    started = {broker_id: start_broker(first, broker_id, zk_connect) for broker_id in BROKER_IDS}
    release = threading.Event()
    original = MigrationDriver.reconcile

    async def slow_reconcile(driver: MigrationDriver) -> Any:
        if driver.state is DriverState.SYNC_KRAFT_TO_ZK:  # a long reconciliation (a big cluster)
            await asyncio.get_running_loop().run_in_executor(None, release.wait, 60)
        return await original(driver)

    second: BridgeController | None = None
    try:
        assert first.wait_for_state(DriverState.DUAL_WRITE), first.error
        eventually(lambda: all_unfenced(first), timeout=20)
        first.stop()
        monkeypatch.setattr(MigrationDriver, "reconcile", slow_reconcile)
        second = start_bridge(zk_connect, tmp_path)
        for broker in started.values():
            broker.follow(("127.0.0.1", second.listen_port))
        assert second.wait_for_state(DriverState.SYNC_KRAFT_TO_ZK), second.error
        started[3].kill()
        eventually(lambda: image(second).cluster.brokers[3].fenced, timeout=SESSION_TIMEOUT_MS / 1000 + 10)
        assert second.state is DriverState.SYNC_KRAFT_TO_ZK  # fenced before the reconciliation ended
        with ThreadPoolExecutor(1) as pool:  # an admin change waits until ZooKeeper will have it
            asked = pool.submit(send_request_sync, "127.0.0.1", second.listen_port, elect_leaders(PREFERRED, None))
            time.sleep(0.3)
            assert not asked.done()
            release.set()
            assert asked.result(30).error_code == ErrorCode.none
        assert second.wait_for_state(DriverState.DUAL_WRITE), second.error
        eventually(lambda: zookeeper_matches_image(seeded, image(second)))
        assert not any(3 in p.isr and len(p.isr) > 1 for t in image(second).topics_by_name.values()
                       for p in t.partitions.values())  # fmt: skip
    finally:
        release.set()
        for broker in started.values():
            broker.kill()
        first.stop()
        if second is not None:
            second.stop()


def test_a_decommissioned_broker_is_unregistered_directly_or_forwarded_and_stops_counting_as_migrating(
    bridge: BridgeController, brokers: dict[int, SimulatedZkBroker], zk_client: KazooClient
) -> None:
    """`kafka-cluster.sh unregister --id 3`: the broker leaves every ISR and its registration goes, so it no
    longer counts as a migrating ZooKeeper broker; a second unregistration (forwarded by a broker in an
    Envelope) hears BROKER_ID_NOT_REGISTERED."""
    eventually(lambda: all_unfenced(bridge), timeout=20)
    brokers[3].kill()
    answer = send_request_sync("127.0.0.1", bridge.listen_port, unregister_broker(3))
    assert answer.error_code == ErrorCode.none
    assert 3 not in image(bridge).cluster.brokers
    assert not any(3 in p.isr and len(p.isr) > 1 for t in image(bridge).topics_by_name.values()
                   for p in t.partitions.values())  # fmt: skip
    assert bridge.status().brokers.migrating_zk_brokers == 2
    again = send_envelope_sync(
        "127.0.0.1", bridge.listen_port, encode_request(unregister_broker(3), 7, "admin"),
        principal=KafkaPrincipal("User", "admin"),
    )  # fmt: skip
    assert again.error_code == ErrorCode.none and again.inner_response is not None
    assert again.inner_response.error_code == ErrorCode.broker_id_not_registered
    eventually(lambda: zookeeper_matches_image(zk_client, image(bridge)))


def test_registrations_held_together_get_the_offsets_of_their_own_records_as_epochs(
    bridge: BridgeController, brokers: dict[int, SimulatedZkBroker]
) -> None:
    """Two new brokers register while appends are held: each epoch is the offset of its own RegisterBrokerRecord
    (Kafka's next write offset), never one epoch shared by both."""
    eventually(lambda: all_unfenced(bridge), timeout=20)
    cluster_id = bridge.cluster_id
    assert cluster_id is not None
    controller = ("127.0.0.1", bridge.listen_port)
    requests = [SimulatedKraftBroker(b, controller, cluster_id).registration_request() for b in (4, 5)]
    with ThreadPoolExecutor(2) as pool:
        with appends_held(bridge):
            answers = [pool.submit(send_request_sync, *controller, request) for request in requests]
            eventually(lambda: bridge.pipeline.events_waiting == 2)
        epochs = [int(answer.result(30).broker_epoch) for answer in answers]
    assert len(set(epochs)) == 2
    registered = image(bridge).cluster.brokers
    assert sorted(epochs) == sorted(registered[b].epoch for b in (4, 5))
    assert all(registered[b].register_record_offset == registered[b].epoch for b in (4, 5))


def test_a_heartbeat_whose_change_meets_a_fenced_controller_is_answered_not_controller(
    bridge: BridgeController, brokers: dict[int, SimulatedZkBroker], zk_client: KazooClient
) -> None:
    """Broker 2's controlled-shutdown heartbeat waits behind held appends while another controller takes
    ZooKeeper over: it is answered NOT_CONTROLLER (the broker looks for the new controller at once), never
    UNKNOWN_SERVER_ERROR or a dropped connection."""
    eventually(lambda: all_unfenced(bridge), timeout=20)
    eventually(lambda: not any(b.view.is_fenced for b in brokers.values()), timeout=20)
    shutdown = heartbeat_v1.BrokerHeartbeatRequest(
        broker_id=i32(2), broker_epoch=i64(brokers[2].view.broker_epoch),
        current_metadata_offset=i64(brokers[2].applied_offset()), want_fence=False, want_shut_down=True,
    )  # fmt: skip
    with ThreadPoolExecutor(1) as pool:
        with appends_held(bridge):
            answer = pool.submit(send_request_sync, "127.0.0.1", bridge.listen_port, shutdown)
            eventually(lambda: bridge.pipeline.events_waiting == 1)
            data, _stat = zk_client.get(paths.CONTROLLER_EPOCH)
            zk_client.set(paths.CONTROLLER_EPOCH, str(int(data) + 1).encode())  # another controller's claim
            eventually(lambda: bridge.fenced)
        assert answer.result(30).error_code == ErrorCode.not_controller
    assert not image(bridge).cluster.brokers[2].in_controlled_shutdown
