"""BrokerHeartbeat: Kafka 3.9's state table, reply flags, stale epochs, session expiry on an injected clock."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i64

from bridge.brokers.heartbeats import BrokerControlState, BrokerHeartbeatManager, HeartbeatRequest
from bridge.brokers.replication import HeartbeatReply
from migrate.kraft import records as rec
from migrate.kraft.reader import load_image
from migrate.kraft.snapshot import write_snapshot
from tests.support.brokers import (
    MIGRATION,
    PRE_MIGRATION,
    Controller,
    FakeClock,
    log_dir,
    registration,
    running,
)

FENCE = rec.BrokerRegistrationChangeRecord


def reply(result: object) -> HeartbeatReply:
    got = result.reply  # type: ignore[attr-defined]
    assert got is not None, result.error  # type: ignore[attr-defined]
    return got


# ---------------------------------------------------------------- errors


def test_heartbeat_before_registration_is_a_stale_epoch() -> None:
    result = Controller().heartbeat(7, epoch=3)
    assert result.error is not None and result.error.code == ErrorCode.stale_broker_epoch
    assert "before registration" in result.error.message


def test_wrong_epoch_is_stale_and_changes_nothing() -> None:
    controller = Controller()
    epochs = running(controller, 1)
    before = controller.next_offset
    result = controller.heartbeat(1, epoch=epochs[1] + 1, want_fence=True)
    assert result.error is not None and result.error.code == ErrorCode.stale_broker_epoch
    assert controller.next_offset == before and not controller.image.cluster.brokers[1].fenced


# ---------------------------------------------------------------- FENCED


def test_fenced_broker_behind_its_registration_stays_fenced() -> None:
    controller = Controller()
    registered_at = controller.register(registration(1)).broker_epoch
    got = reply(controller.heartbeat(1, offset=registered_at - 1))
    assert got == HeartbeatReply(
        is_caught_up=False, is_fenced=True, in_controlled_shutdown=False, should_shut_down=False
    )
    assert controller.image.cluster.brokers[1].fenced


def test_caught_up_broker_asking_to_stay_fenced_stays_fenced() -> None:
    controller = Controller()
    registered_at = controller.register(registration(1)).broker_epoch
    got = reply(controller.heartbeat(1, offset=registered_at, want_fence=True))
    assert got.is_caught_up and got.is_fenced


def test_caught_up_broker_is_unfenced() -> None:
    controller = Controller()
    registered_at = controller.register(registration(1)).broker_epoch
    before = controller.next_offset
    result = controller.heartbeat(1, offset=registered_at)
    assert reply(result) == HeartbeatReply(True, False, False, False)
    assert controller.records_since(before) == [FENCE(broker_id=1, broker_epoch=registered_at, fenced=-1)]
    assert not controller.image.cluster.brokers[1].fenced


def test_fenced_broker_asking_to_shut_down_is_told_to_at_once() -> None:
    controller = Controller()
    epoch = controller.register(registration(1)).broker_epoch
    got = reply(controller.heartbeat(1, want_shut_down=True))
    assert got.should_shut_down and got.is_fenced
    # Kafka writes the fence record again even though the broker is already fenced.
    assert controller.records_since(controller.next_offset - 1) == [
        FENCE(broker_id=1, broker_epoch=epoch, fenced=1)
    ]


def test_caught_up_is_judged_against_the_latest_registration_record() -> None:
    controller = Controller()
    running(controller, 1)
    first = controller.next_offset - 1
    controller.register(registration(1))  # same incarnation: a new record, same epoch
    assert not reply(controller.heartbeat(1, offset=first)).is_caught_up


def _fenced_broker_registered_again(controller: Controller) -> int:
    """Broker 1 registers, the log moves on, the same incarnation registers again; the latest record's offset."""
    epoch = controller.register(registration(1)).broker_epoch
    controller.add_topic("t", {0: ([1], [1], 1)})
    controller.register(registration(1))  # a lost reply: same incarnation, same epoch, a later record
    latest = controller.next_offset - 1
    assert controller.image.cluster.brokers[1].epoch == epoch < latest
    return latest


def test_after_a_restart_the_unfence_gate_is_the_latest_registration_record(tmp_path: Path) -> None:
    """Kafka replays the log into each broker's RegisterBrokerRecord offset; the broker epoch is older."""
    controller = Controller()
    latest = _fenced_broker_registered_again(controller)
    pdir = tmp_path / "__cluster_metadata-0"
    controller.write_log(pdir)
    controller.restart(load_image(pdir)[0])
    behind = reply(controller.heartbeat(1, offset=latest - 1))
    assert behind.is_fenced and not behind.is_caught_up
    assert controller.image.cluster.brokers[1].fenced
    assert not reply(controller.heartbeat(1, offset=latest)).is_fenced


def test_a_registration_loaded_from_a_snapshot_is_gated_at_the_snapshot_end(tmp_path: Path) -> None:
    """QuorumController replays a snapshot's records at its last contained offset."""
    controller = Controller()
    _fenced_broker_registered_again(controller)
    controller.add_topic("later", {0: ([1], [1], 1)})
    end = controller.next_offset
    pdir = tmp_path / "__cluster_metadata-0"
    controller.write_log(pdir)
    write_snapshot(pdir, controller.image)
    image, report = load_image(pdir)
    assert report.snapshot_id is not None and report.snapshot_id.end_offset == end
    controller.restart(image)
    assert reply(controller.heartbeat(1, offset=end - 2)).is_fenced
    assert not reply(controller.heartbeat(1, offset=end - 1)).is_fenced


# ---------------------------------------------------------------- UNFENCED


def test_unfenced_broker_asking_to_be_fenced() -> None:
    controller = Controller()
    running(controller, 1)
    got = reply(controller.heartbeat(1, want_fence=True))
    assert got == HeartbeatReply(True, True, False, False)
    assert controller.image.cluster.brokers[1].fenced


def test_unfenced_broker_asking_to_be_fenced_and_shut_down() -> None:
    controller = Controller()
    running(controller, 1)
    assert reply(controller.heartbeat(1, want_fence=True, want_shut_down=True)) == HeartbeatReply(
        True, True, False, True
    )


def test_unfenced_broker_leading_nothing_shuts_down_at_once() -> None:
    controller = Controller()
    running(controller, 1, 2)
    controller.add_topic("t", {0: ([2, 1], [2, 1], 2)})
    got = reply(controller.heartbeat(1, want_shut_down=True))
    assert got.should_shut_down and got.is_fenced
    assert controller.image.topics_by_name["t"].partitions[0].isr == [2]


def test_controlled_shutdown_moves_leadership_then_waits_for_the_active_brokers() -> None:
    controller = Controller()
    epochs = running(controller, 1, 2)
    controller.add_topic("t", {0: ([1, 2], [1, 2], 1)})
    before = controller.next_offset
    got = reply(controller.heartbeat(1, want_shut_down=True))
    assert got == HeartbeatReply(True, False, True, False)
    shutdown, change = controller.records_since(before)
    assert shutdown == FENCE(broker_id=1, broker_epoch=epochs[1], in_controlled_shutdown=1)
    assert controller.log[before][1] == 1  # BrokerRegistrationChangeRecord v1 carries InControlledShutdown
    assert isinstance(change, rec.PartitionChangeRecord) and change.leader == 2 and change.isr == [2]
    shutdown_offset = controller.next_offset - 1
    assert controller.cluster.heartbeats.controlled_shutdown_offset(1) == shutdown_offset
    # Broker 2 has not yet reported the shutdown records: broker 1 must wait.
    controller.heartbeat(2, offset=shutdown_offset - 1)
    assert reply(controller.heartbeat(1, want_shut_down=True)).in_controlled_shutdown
    controller.heartbeat(2, offset=shutdown_offset)
    final = reply(controller.heartbeat(1, want_shut_down=True))
    assert final.should_shut_down and final.is_fenced
    assert controller.image.cluster.brokers[1].fenced


def test_a_leader_outside_its_isr_does_not_hold_up_controlled_shutdown() -> None:
    """BrokersToIsrs indexes ISR members only: a leader outside its ISR leads nothing there."""
    controller = Controller()
    running(controller, 1, 2)
    controller.add_topic("t", {0: ([1, 2], [2], 1)})
    got = reply(controller.heartbeat(1, want_shut_down=True))
    assert got.should_shut_down and got.is_fenced
    assert controller.image.cluster.brokers[1].fenced


def test_controlled_shutdown_waits_while_it_still_leads() -> None:
    controller = Controller()
    running(controller, 1, 2)
    controller.add_topic("t", {0: ([1, 2], [1, 2], 1)})
    controller.heartbeat(1, want_shut_down=True)
    # A leadership appears after the shutdown began (as a late-arriving change would make it).
    controller.add_topic("late", {0: ([1], [1], 1)})
    assert reply(controller.heartbeat(1, want_shut_down=True)).in_controlled_shutdown


def test_controlled_shutdown_offset_is_set_once() -> None:
    manager = BrokerHeartbeatManager(9000, FakeClock())
    manager.register(1, fenced=False)
    manager.maybe_update_controlled_shutdown_offset(1, 50)
    manager.maybe_update_controlled_shutdown_offset(1, 60)
    assert manager.controlled_shutdown_offset(1) == 50


def test_the_state_table() -> None:
    """calculateNextBrokerState, row by row (testCalculateNextBrokerState)."""
    manager = BrokerHeartbeatManager(9000, FakeClock())

    def req(offset: int, want_fence: bool, want_shut_down: bool) -> HeartbeatRequest:
        return HeartbeatRequest(0, 0, offset, want_fence, want_shut_down)

    def leads(value: bool) -> Callable[[], bool]:
        return lambda: value

    s = BrokerControlState
    manager.register(0, fenced=True)
    assert manager.calculate_next_state(req(0, False, True), 100, leads(True)) == (s.FENCED, s.SHUTDOWN_NOW)
    assert manager.calculate_next_state(req(99, False, False), 100, leads(True)) == (s.FENCED, s.FENCED)
    assert manager.calculate_next_state(req(100, False, False), 100, leads(True)) == (s.FENCED, s.UNFENCED)
    assert manager.calculate_next_state(req(100, True, False), 100, leads(True)) == (s.FENCED, s.FENCED)
    manager.touch(0, fenced=False, metadata_offset=100)
    assert manager.calculate_next_state(req(100, True, True), 100, leads(True)) == (
        s.UNFENCED,
        s.SHUTDOWN_NOW,
    )
    assert manager.calculate_next_state(req(100, True, False), 100, leads(True)) == (s.UNFENCED, s.FENCED)
    assert manager.calculate_next_state(req(100, False, True), 100, leads(True)) == (
        s.UNFENCED,
        s.CONTROLLED_SHUTDOWN,
    )
    assert manager.calculate_next_state(req(100, False, True), 100, leads(False)) == (
        s.UNFENCED,
        s.SHUTDOWN_NOW,
    )
    assert manager.calculate_next_state(req(100, False, False), 100, leads(False)) == (s.UNFENCED, s.UNFENCED)
    manager.maybe_update_controlled_shutdown_offset(0, 200)
    assert manager.calculate_next_state(req(100, False, True), 100, leads(True)) == (
        s.CONTROLLED_SHUTDOWN,
        s.CONTROLLED_SHUTDOWN,
    )
    manager.register(1, fenced=False)
    manager.touch(1, fenced=False, metadata_offset=199)
    assert manager.calculate_next_state(req(100, False, True), 100, leads(False)) == (
        s.CONTROLLED_SHUTDOWN,
        s.CONTROLLED_SHUTDOWN,
    )
    manager.touch(1, fenced=False, metadata_offset=200)
    assert manager.calculate_next_state(req(100, False, True), 100, leads(False)) == (
        s.CONTROLLED_SHUTDOWN,
        s.SHUTDOWN_NOW,
    )


# ---------------------------------------------------------------- sessions


def test_silent_brokers_are_fenced_one_at_a_time_oldest_first() -> None:
    controller = Controller()
    running(controller, 1, 2, 3)
    controller.add_topic("t", {0: ([1, 2], [1, 2], 1)})
    controller.clock.advance_ms(5000)
    controller.heartbeat(3)
    controller.clock.advance_ms(4000)
    assert (
        controller.replication.maybe_fence_one_stale_broker(controller.image) == []
    )  # exactly at the timeout
    controller.clock.advance_ms(1)
    first = controller.replication.maybe_fence_one_stale_broker(controller.image)
    assert [type(r).__name__ for r, _ in first] == ["PartitionChangeRecord", "BrokerRegistrationChangeRecord"]
    assert first[-1][0].broker_id == 1 and first[-1][0].fenced == 1
    controller.append(first)
    second = controller.replication.maybe_fence_one_stale_broker(controller.image)
    assert second[-1][0].broker_id == 2
    controller.append(second)
    assert controller.replication.maybe_fence_one_stale_broker(controller.image) == []
    assert not controller.image.cluster.brokers[3].fenced
    partition = controller.image.topics_by_name["t"].partitions[0]
    assert (partition.leader, partition.isr) == (-1, [2])


def test_next_check_time_follows_the_oldest_unfenced_broker() -> None:
    clock = FakeClock()
    manager = BrokerHeartbeatManager(9000, clock)
    assert manager.next_check_time_ns() == 2**63 - 1
    manager.register(1, fenced=False)
    start = clock.now_ns
    clock.advance_ms(10)
    manager.register(2, fenced=False)
    assert manager.next_check_time_ns() == start + 9000 * 1_000_000
    manager.touch(1, fenced=False, metadata_offset=5)
    assert manager.next_check_time_ns() == start + 10 * 1_000_000 + 9000 * 1_000_000


def test_no_expiry_fencing_before_the_migration_completed() -> None:
    controller = Controller(migration_state=PRE_MIGRATION)
    running(controller, 1)
    controller.clock.advance_ms(60_000)
    assert controller.replication.maybe_fence_one_stale_broker(controller.image) == []
    assert not controller.image.cluster.brokers[1].fenced
    controller.append([(rec.ZkMigrationStateRecord(zk_migration_state=MIGRATION), 0)])
    records = controller.replication.maybe_fence_one_stale_broker(controller.image)
    assert records and records[-1][0].fenced == 1


def test_activation_starts_every_session_afresh() -> None:
    """A restarted or new active controller never fences brokers for the time it was away."""
    controller = Controller()
    running(controller, 1, 2)
    controller.clock.advance_ms(60_000)
    controller.cluster.activate(controller.image)
    assert controller.replication.maybe_fence_one_stale_broker(controller.image) == []
    controller.clock.advance_ms(9001)
    assert controller.replication.maybe_fence_one_stale_broker(controller.image) != []


def test_expired_heartbeat_still_keeps_the_session() -> None:
    controller = Controller()
    epochs = running(controller, 1)
    controller.clock.advance_ms(8000)
    request = HeartbeatRequest(1, epochs[1], controller.next_offset - 1, False, False)
    assert controller.replication.process_expired_broker_heartbeat(controller.image, request) is None
    controller.clock.advance_ms(8000)
    assert controller.replication.maybe_fence_one_stale_broker(controller.image) == []


@pytest.mark.parametrize("timeout", [0, -1])
def test_session_timeout_must_be_positive(timeout: int) -> None:
    with pytest.raises(ValueError, match=r"broker\.session\.timeout\.ms"):
        BrokerHeartbeatManager(timeout, FakeClock())


@pytest.mark.parametrize("version", [0, 1])
def test_heartbeat_from_kio_requests(version: int) -> None:
    module = importlib.import_module(f"kio.schema.broker_heartbeat.v{version}.request")
    kio_request = module.BrokerHeartbeatRequest(
        broker_id=i32(3),
        broker_epoch=i64(40),
        current_metadata_offset=i64(41),
        want_fence=True,
        want_shut_down=False,
    )
    assert HeartbeatRequest.of(kio_request) == HeartbeatRequest(3, 40, 41, True, False)


def test_offline_log_dir_moves_its_partitions_away() -> None:
    controller = Controller()
    epochs = running(controller, 1, 2)
    topic_id = controller.add_topic("t", {0: ([1, 2], [1, 2], 1)})
    on_dir = rec.PartitionChangeRecord(
        topic_id=topic_id, partition_id=0, directories=[log_dir(1), log_dir(2)]
    )
    controller.append([(on_dir, 1)])
    request = HeartbeatRequest(1, epochs[1], controller.next_offset - 1, False, False)
    result = controller.replication.process_broker_heartbeat(controller.image, request, [log_dir(1)])
    assert result.reply is not None and not result.reply.is_fenced
    change, dirs = (r for r, _ in result.records)
    assert (change.leader, change.isr) == (2, [2])
    assert dirs == FENCE(broker_id=1, broker_epoch=epochs[1], log_dirs=[])
    assert result.records[1][1] == 2
