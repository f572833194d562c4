"""UnregisterBroker (`kafka-cluster.sh unregister`) as Kafka 3.9's ReplicationControlManager serves it."""

from __future__ import annotations

from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from bridge.brokers import replication
from bridge.brokers.propagation import delta_of, sync_view
from bridge.zk.operations import UpdateTopicPartitions
from bridge.zk.planner import plan_delta
from migrate.kraft import records as rec
from migrate.kraft.reader import load_image
from tests.support.brokers import Controller, registration, running


def test_an_unknown_broker_is_not_registered() -> None:
    controller = Controller()
    running(controller, 1)
    before = controller.next_offset
    error = controller.unregister(9)
    assert error is not None and error.code == ErrorCode.broker_id_not_registered
    assert error.message == "Broker ID 9 is not currently registered"
    assert controller.next_offset == before


def test_the_broker_leaves_every_isr_and_leadership_then_its_registration() -> None:
    controller = Controller()
    epochs = running(controller, 1, 2)
    controller.add_topic("t", {0: ([1, 2], [1, 2], 1), 1: ([2, 1], [2, 1], 2), 2: ([1], [1], 1)})
    controller.add_topic("other", {0: ([2], [2], 2)})
    before = controller.next_offset
    assert controller.unregister(1) is None
    *changes, last = controller.records_since(before)
    assert last == rec.UnregisterBrokerRecord(broker_id=1, broker_epoch=epochs[1])
    assert all(isinstance(c, rec.PartitionChangeRecord) for c in changes) and len(changes) == 3
    partitions = controller.image.topics_by_name["t"].partitions
    assert (partitions[0].leader, partitions[0].isr) == (2, [2])
    assert (partitions[1].leader, partitions[1].isr) == (2, [2])
    # As when fenced: the last ISR member leaves the leadership but the ISR is never emptied.
    assert (partitions[2].leader, partitions[2].isr) == (-1, [1])
    assert 1 not in controller.image.cluster.brokers


def test_replaying_the_record_forgets_the_brokers_session_and_registration_offset() -> None:
    controller = Controller()
    running(controller, 1, 2)
    assert controller.unregister(1) is None
    assert controller.cluster.heartbeats.state(1) is None
    assert controller.cluster.register_broker_record_offset(1) is None
    # Its session can no longer expire (fencing a broker that is gone would fail) ...
    controller.clock.advance_ms(60_000)
    records = controller.replication.maybe_fence_one_stale_broker(controller.image)
    assert [r.broker_id for r, _ in records if isinstance(r, rec.BrokerRegistrationChangeRecord)] == [2]
    # ... and its heartbeats are refused as from an unregistered broker.
    result = controller.heartbeat(1, epoch=controller.image.cluster.brokers[2].epoch)
    assert result.error is not None and result.error.code == ErrorCode.stale_broker_epoch


def test_the_broker_may_register_again_with_a_new_epoch() -> None:
    controller = Controller()
    epochs = running(controller, 1)
    controller.unregister(1)
    again = controller.register(registration(1))  # even the same incarnation is a new registration now
    assert again.error is None and again.broker_epoch > epochs[1]
    assert controller.image.cluster.brokers[1].fenced


def test_more_records_than_one_user_operation_may_make_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    controller = Controller()
    running(controller, 1, 2)
    controller.add_topic("t", {p: ([1, 2], [1, 2], 1) for p in range(3)})
    monkeypatch.setattr(replication, "MAX_RECORDS_PER_USER_OP", 3)
    before = controller.next_offset
    error = controller.unregister(1)
    assert error is not None and error.code == ErrorCode.policy_violation
    assert error.message == "Unable to perform excessively large batch operation."
    assert controller.next_offset == before and 1 in controller.image.cluster.brokers


def test_zookeeper_is_told_only_of_the_partition_changes() -> None:
    """Registrations are not in ZooKeeper (the dual write plans nothing for them); ZooKeeper-mode brokers
    are told of the registration change."""
    controller = Controller()
    running(controller, 1, 2, 3)
    controller.add_topic("t", {0: ([1, 2], [1, 2], 1)})
    before = sync_view(controller.image)
    records, error = controller.replication.unregister_broker(controller.image, 1)
    assert error is None
    controller.append(records)
    assert [type(op) for op in plan_delta(before, controller.image)] == [UpdateTopicPartitions]
    assert delta_of(records, before, controller.image).changed_brokers == {1}
    quiet = sync_view(controller.image)
    assert controller.unregister(3) is None  # in no ISR: only its UnregisterBrokerRecord
    assert plan_delta(quiet, controller.image) == []


def test_a_restarted_controller_does_not_know_the_unregistered_broker(tmp_path: Path) -> None:
    controller = Controller()
    running(controller, 1, 2)
    controller.unregister(1)
    pdir = tmp_path / "__cluster_metadata-0"
    controller.write_log(pdir)
    controller.restart(load_image(pdir)[0])
    assert sorted(controller.image.cluster.brokers) == [2]
    assert controller.cluster.register_broker_record_offset(1) is None
    assert controller.cluster.heartbeats.state(1) is None
