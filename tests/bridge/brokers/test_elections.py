"""Fencing, unfencing and elections as Kafka 3.9's PartitionChangeBuilder makes them, and their invariants."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from bridge.brokers.partition_change import RECOVERING
from bridge.brokers.replication import ElectionType
from migrate.kraft import metadata_version as mvs
from migrate.kraft import records as rec
from migrate.kraft.image import PartitionRegistration
from tests.support.brokers import Controller, registration, running


def part(controller: Controller, topic: str = "t", pid: int = 0) -> PartitionRegistration:
    return controller.image.topics_by_name[topic].partitions[pid]


def fence(controller: Controller, broker_id: int) -> list[rec.PartitionChangeRecord]:
    records = controller.replication.handle_broker_fenced(controller.image, broker_id)
    controller.append(records)
    controller.cluster.heartbeats.fence(broker_id)  # as session expiry does
    return [r for r, _ in records if isinstance(r, rec.PartitionChangeRecord)]


def come_back(controller: Controller, broker_id: int, start: int = 1) -> None:
    """A restart: a new incarnation registers fenced, then catches up and is unfenced."""
    assert controller.register(registration(broker_id, start=start, mv=controller.mv)).error is None
    reply = controller.heartbeat(broker_id).reply
    assert reply is not None and not reply.is_fenced


def test_fenced_leader_is_replaced_by_the_next_isr_member_in_replica_order() -> None:
    controller = Controller()
    running(controller, 1, 2, 3)
    controller.add_topic("t", {0: ([1, 3, 2], [2, 1, 3], 1)})
    [change] = fence(controller, 1)
    assert (change.leader, change.isr) == (3, [2, 3])
    p = part(controller)
    assert (p.leader, p.isr, p.leader_epoch, p.partition_epoch) == (3, [2, 3], 6, 8)


def test_a_valid_current_leader_keeps_leading() -> None:
    controller = Controller()
    running(controller, 1, 2, 3)
    controller.add_topic("t", {0: ([1, 2, 3], [1, 2, 3], 2)})
    [change] = fence(controller, 3)
    assert (change.leader, change.isr) == (2, [1, 2])  # same leader, next epoch (ISR shrink while migrating)


@pytest.mark.parametrize(
    ("mv", "zk_migration", "bumps"),
    [
        (mvs.IBP_3_9_IV0, True, True),  # migrating: ZooKeeper brokers need the bump (KAFKA-15109)
        (mvs.IBP_3_9_IV0, False, False),
        (mvs.IBP_3_5_IV2, False, True),  # before 3.6 every ISR shrink bumps
    ],
)
def test_isr_shrink_bumps_the_leader_epoch_while_migrating(
    mv: mvs.MetadataVersion, zk_migration: bool, bumps: bool
) -> None:
    controller = Controller(mv=mv, zk_migration_enabled=zk_migration)
    running(controller, 1, 2, 3)
    controller.add_topic("t", {0: ([1, 2, 3], [1, 2, 3], 1)})
    [change] = fence(controller, 3)
    assert change.isr == [1, 2]
    assert change.leader == (1 if bumps else -2)
    assert part(controller).leader_epoch == (6 if bumps else 5)


def test_isr_is_never_emptied() -> None:
    controller = Controller()
    running(controller, 1, 2)
    controller.add_topic("t", {0: ([1, 2], [1], 1)})
    [change] = fence(controller, 1)
    assert change.leader == -1 and change.isr is None
    p = part(controller)
    assert (p.leader, p.isr, p.leader_epoch) == (-1, [1], 6)


def test_unclean_election_where_the_topic_allows_it() -> None:
    controller = Controller(unclean_topics={"t"})
    running(controller, 1, 2)
    controller.add_topic("t", {0: ([1, 2], [1], 1)})
    [change] = fence(controller, 1)
    assert (change.leader, change.isr, change.leader_recovery_state) == (2, [2], RECOVERING)
    assert part(controller).leader_recovery_state == RECOVERING


def test_returning_broker_leads_again_where_it_is_the_only_choice() -> None:
    controller = Controller()
    running(controller, 1, 2)
    controller.add_topic("t", {0: ([1, 2], [1], 1), 1: ([2, 1], [2, 1], 2)})
    fence(controller, 1)
    assert part(controller).leader == -1
    before = controller.next_offset
    come_back(controller, 1)
    changes = [r for r in controller.records_since(before) if isinstance(r, rec.PartitionChangeRecord)]
    assert [(c.partition_id, c.leader) for c in changes] == [(0, 1)]
    assert (part(controller).leader, part(controller).leader_epoch) == (1, 7)
    assert part(controller, pid=1).isr == [2]  # ISR expansion is the leader's business (AlterPartition)


def test_controlled_shutdown_broker_is_no_leader_candidate() -> None:
    controller = Controller()
    epochs = running(controller, 1, 2, 3)
    controller.add_topic("t", {0: ([1, 2, 3], [1, 2, 3], 1)})
    controller.append(
        controller.replication.handle_broker_in_controlled_shutdown(controller.image, 2, epochs[2])
    )
    assert controller.image.cluster.brokers[2].in_controlled_shutdown
    fence(controller, 1)
    assert (part(controller).leader, part(controller).isr) == (3, [3])


def test_controlled_shutdown_record_is_written_once() -> None:
    controller = Controller()
    epochs = running(controller, 1)
    first = controller.replication.handle_broker_in_controlled_shutdown(controller.image, 1, epochs[1])
    controller.append(first)
    again = controller.replication.handle_broker_in_controlled_shutdown(controller.image, 1, epochs[1])
    assert len(first) == 1 and again == []


def test_old_metadata_versions_use_fence_and_unfence_records() -> None:
    controller = Controller(mv=mvs.IBP_3_3_IV1, zk_migration_enabled=False)
    epoch = controller.register(registration(1, zk=False, mv=mvs.IBP_3_3_IV1, log_dirs=())).broker_epoch
    assert controller.heartbeat(1).records == [(rec.UnfenceBrokerRecord(id=1, epoch=epoch), 0)]
    assert [
        type(r).__name__ for r, _ in controller.replication.handle_broker_fenced(controller.image, 1)
    ] == ["FenceBrokerRecord"]


# ---------------------------------------------------------------- ElectLeaders and balancing


def test_preferred_election_moves_leadership_back() -> None:
    controller = Controller()
    running(controller, 1, 2)
    controller.add_topic("t", {0: ([1, 2], [1, 2], 1)})
    fence(controller, 1)
    come_back(controller, 1)
    assert part(controller).leader == 2
    # The returning broker is not yet back in the ISR: preferred leader not available.
    outcome, records = controller.replication.elect_leader(controller.image, "t", 0, ElectionType.PREFERRED)
    assert outcome.code == ErrorCode.preferred_leader_not_available and records == []
    controller.append(
        [
            (
                rec.PartitionChangeRecord(
                    topic_id=uuid.uuid5(uuid.NAMESPACE_DNS, "t"), partition_id=0, isr=[2, 1]
                ),
                0,
            )
        ]
    )
    outcome, records = controller.replication.elect_leader(controller.image, "t", 0, ElectionType.PREFERRED)
    assert outcome.code == ErrorCode.none
    controller.append(records)
    assert part(controller).leader == 1
    outcome, _ = controller.replication.elect_leader(controller.image, "t", 0, ElectionType.PREFERRED)
    assert outcome.code == ErrorCode.election_not_needed


def test_unclean_election_requests() -> None:
    controller = Controller()
    running(controller, 1, 2)
    controller.add_topic("t", {0: ([1, 2], [1], 1), 1: ([1], [1], 1)})
    image = controller.image
    assert controller.replication.elect_leader(image, "t", 0, ElectionType.UNCLEAN)[0].code == (
        ErrorCode.election_not_needed
    )
    fence(controller, 1)
    outcome, records = controller.replication.elect_leader(controller.image, "t", 0, ElectionType.UNCLEAN)
    assert outcome.code == ErrorCode.none and records[0][0].leader == 2 and records[0][0].isr == [2]
    outcome, _ = controller.replication.elect_leader(controller.image, "t", 1, ElectionType.UNCLEAN)
    assert outcome.code == ErrorCode.eligible_leaders_not_available
    for topic, pid in (("nope", 0), ("t", 9)):
        outcome, _ = controller.replication.elect_leader(controller.image, topic, pid, ElectionType.PREFERRED)
        assert outcome.code == ErrorCode.unknown_topic_or_partition


def test_balancing_and_the_periodic_unclean_pass() -> None:
    controller = Controller()
    running(controller, 1, 2, 3)
    controller.add_topic("t", {i: ([1, 2], [1, 2], 2) for i in range(3)})
    controller.add_topic("u", {0: ([3, 1], [3], 3)})
    controller.add_topic("v", {0: ([3, 1], [3], 3)})
    records, more = controller.replication.maybe_balance_partition_leaders(controller.image, max_elections=2)
    assert more and [r.partition_id for r, _ in records] == [0, 1]
    controller.append(records)
    fence(controller, 3)
    assert part(controller, "u").leader == part(controller, "v").leader == -1
    controller.unclean_topics.add("u")  # the topic config changed after the fencing
    records, more = controller.replication.maybe_elect_unclean_leaders(controller.image)
    assert not more
    assert [(r.topic_id, r.leader, r.isr, r.leader_recovery_state) for r, _ in records] == [
        (uuid.uuid5(uuid.NAMESPACE_DNS, "u"), 1, [1], RECOVERING)
    ]


# ---------------------------------------------------------------- invariants


BROKERS = (1, 2, 3, 4)


@st.composite
def partitions(draw: st.DrawFn) -> tuple[list[int], list[int], int]:
    replicas = draw(st.lists(st.sampled_from(BROKERS), min_size=1, max_size=4, unique=True))
    isr = draw(st.lists(st.sampled_from(replicas), min_size=1, max_size=len(replicas), unique=True))
    leader = draw(st.sampled_from([*isr, -1]))
    return replicas, isr, leader


events = st.lists(
    st.tuples(
        st.sampled_from(["fence", "return", "shutdown", "preferred", "balance", "unclean"]),
        st.sampled_from(BROKERS),
    ),
    max_size=12,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(partitions(), min_size=1, max_size=6), events, st.booleans())
def test_isr_never_empty_epochs_never_go_back_and_only_active_brokers_lead(
    layout: list[tuple[list[int], list[int], int]], steps: list[tuple[str, int]], unclean: bool
) -> None:
    controller = Controller(unclean_topics={"t"} if unclean else set())
    epochs = running(controller, *BROKERS)
    controller.add_topic("t", dict(enumerate(layout)))
    starts = dict.fromkeys(BROKERS, 0)
    for action, broker in steps:
        before = {
            pid: (p.leader, p.leader_epoch, p.partition_epoch) for pid, p in part_map(controller).items()
        }
        image = controller.image
        registered = image.cluster.brokers[broker]
        if action == "fence" and not registered.fenced:
            fence(controller, broker)
        elif action == "return" and registered.fenced:
            starts[broker] += 1
            come_back(controller, broker, starts[broker])
            epochs[broker] = controller.image.cluster.brokers[broker].epoch
        elif action == "shutdown" and not registered.fenced:
            controller.heartbeat(broker, want_shut_down=True)
        elif action == "preferred":
            controller.append(controller.replication.elect_leader(image, "t", 0, ElectionType.PREFERRED)[1])
        elif action == "balance":
            controller.append(controller.replication.maybe_balance_partition_leaders(image)[0])
        elif action == "unclean":
            controller.append(controller.replication.maybe_elect_unclean_leaders(image)[0])
        brokers = controller.image.cluster.brokers
        for pid, p in part_map(controller).items():
            old_leader, old_leader_epoch, old_partition_epoch = before[pid]
            assert p.isr, "the ISR is never emptied"
            assert set(p.isr) <= set(p.replicas)
            assert p.leader == -1 or p.leader in p.isr
            if p.leader != -1:
                assert not brokers[p.leader].fenced and not brokers[p.leader].in_controlled_shutdown
            assert p.leader_epoch >= old_leader_epoch and p.partition_epoch >= old_partition_epoch
            if p.leader != old_leader:
                assert p.leader_epoch > old_leader_epoch
            if p.leader_epoch > old_leader_epoch:
                assert p.partition_epoch > old_partition_epoch


def part_map(controller: Controller) -> dict[int, PartitionRegistration]:
    return controller.image.topics_by_name["t"].partitions
