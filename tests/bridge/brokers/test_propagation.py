"""The requests Kafka 3.9's MigrationPropagator sends ZooKeeper brokers, field by field (controller-broker.md §1)."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge.brokers import propagation as prop
from bridge.brokers.propagation import BrokerRequest, PropagationContext, PublishedDelta
from bridge.kafka import legacy_messages as lm
from bridge.kafka.memo_writer import EncodedOnce, SharedItems
from bridge.kafka.protocol import decode_request, encode_request
from bridge.zk.image_slice import cut, touched_keys
from migrate.kraft import records as rec
from tests.support.brokers import LISTENER, Controller, registration, running
from tests.support.strategies import kio_entities

CONTROLLER_ID = 3000
ZK_EPOCH = 42
KRAFT_EPOCH = 9
CTX = PropagationContext(CONTROLLER_ID, ZK_EPOCH, LISTENER)
LISR = lm.LeaderAndIsrRequestV7
UMR = lm.UpdateMetadataRequestV8
STOP = lm.StopReplicaRequestV4


def cluster() -> Controller:
    """ZooKeeper brokers 1-3 running, KRaft broker 4 running, ZooKeeper broker 5 registered but fenced;
    topic a: p0 on 1,2,3 led by 1, p1 on 2,4,9 (9 never registered) led by 2; topic b: p0 on 3,1 led by 3."""
    controller = Controller()
    running(controller, 1, 2, 3)
    assert controller.register(registration(4, zk=False, rack="r4")).error is None
    reply = controller.heartbeat(4).reply
    assert reply is not None and not reply.is_fenced
    assert controller.register(registration(5)).error is None
    controller.add_topic("a", {0: ([1, 2, 3], [1, 2, 3], 1), 1: ([2, 4, 9], [2, 4], 2)})
    controller.add_topic("b", {0: ([3, 1], [3, 1], 3)})
    published(controller)
    return controller


def published(controller: Controller) -> None:
    """The image as published after a batch of the current KRaft epoch."""
    controller.image.provenance.last_contained_epoch = KRAFT_EPOCH


def epoch_of(controller: Controller, broker_id: int) -> int:
    return controller.image.cluster.brokers[broker_id].epoch


def change(controller: Controller, action: Callable[[], Any]) -> PublishedDelta:
    """Run `action` on the controller and return what its records changed, as the pipeline computes it."""
    start = controller.next_offset
    before = prop.sync_view(controller.image)
    action()
    published(controller)
    records = [(r, v) for r, v, _ in controller.log[start:]]
    keys = touched_keys(records, before)
    return prop.delta_of(records, cut(before, keys), cut(controller.image, keys))


def by_broker(requests: list[BrokerRequest]) -> dict[int, list[Any]]:
    out: dict[int, list[Any]] = {}
    for request in requests:
        out.setdefault(request.broker_id, []).append(request.body)
    return out


def kinds(bodies: list[Any]) -> list[tuple[str, int]]:
    return [(type(b).__name__.removesuffix("RequestV7").removesuffix("RequestV8").removesuffix("RequestV4"),
             getattr(b, "type", -1)) for b in bodies]  # fmt: skip


def umr_partitions(body: Any) -> dict[tuple[str, int], Any]:
    return {(t.topic_name, p.partition_index): p for t in body.topic_states for p in t.partition_states}


def lisr_partitions(body: Any) -> dict[tuple[str, int], Any]:
    return {(t.topic_name, p.partition_index): p for t in body.topic_states for p in t.partition_states}


def stop_partitions(body: Any) -> dict[tuple[str, int], Any]:
    return {(t.topic_name, p.partition_index): p for t in body.topic_states for p in t.partition_states}


def assert_header(body: Any, controller: Controller, broker_id: int) -> None:
    assert body.controller_id == CONTROLLER_ID
    assert body.is_kraft_controller is True
    assert body.controller_epoch == ZK_EPOCH
    assert body.broker_epoch == epoch_of(controller, broker_id)


# ---------------------------------------------------------------- members


def test_channel_members_are_the_unfenced_migrating_zookeeper_brokers_at_their_inter_broker_endpoint() -> (
    None
):
    controller = cluster()
    # A ZooKeeper broker lacking the listener: registration refuses it, but a log may still hold one.
    controller.append(
        [
            (
                rec.RegisterBrokerRecord(
                    broker_id=6,
                    is_migrating_zk_broker=True,
                    incarnation_id=uuid.UUID(int=6),
                    broker_epoch=99,
                    end_points=[rec.RegisterBrokerRecord.BrokerEndpoint(name="OTHER", host="h6", port=1, security_protocol=0)],
                    fenced=False,
                ),
                controller.mv.register_broker_record_version(),
            )
        ]
    )  # fmt: skip
    members = prop.migrating_brokers(controller.image, LISTENER)
    assert sorted(members) == [1, 2, 3]  # not KRaft broker 4, not fenced 5, not listener-less 6
    assert members[2] == prop.BrokerAddress(2, "broker2", 9092, 0)


def test_a_broker_without_the_listener_is_reported_not_skipped_silently() -> None:
    controller = cluster()
    assert prop.migrating_brokers(controller.image, "REPLICATION") == {}
    # Fenced broker 5 and KRaft broker 4 are expected to get nothing; the running ZooKeeper brokers are not.
    assert prop.listenerless_brokers(controller.image, "REPLICATION") == {b: [LISTENER] for b in (1, 2, 3)}
    assert prop.listenerless_brokers(controller.image, LISTENER.lower()) == {}
    assert sorted(prop.migrating_brokers(controller.image, LISTENER.lower())) == [1, 2, 3]


# ---------------------------------------------------------------- full sync


def test_full_sync_sends_each_migrating_broker_umr_then_full_lisr_then_full_umr() -> None:
    controller = cluster()
    requests = prop.full_sync(controller.image, CTX)
    assert all(r.full for r in requests)
    per_broker = by_broker(requests)
    assert sorted(per_broker) == [1, 2, 3]  # KRaft broker 4 and fenced broker 5 get nothing
    for broker_id in (1, 2, 3):
        assert kinds(per_broker[broker_id]) == [
            ("UpdateMetadata", 0),
            ("LeaderAndIsr", 2),
            ("UpdateMetadata", 2),
        ]
        for body in per_broker[broker_id]:
            assert_header(body, controller, broker_id)
    # Batch 1 goes out to everyone before any LeaderAndIsr (KAFKA-14656).
    assert [type(r.body) for r in requests[:3]] == [UMR, UMR, UMR]


def test_full_sync_update_metadata_carries_every_partition_and_every_registered_broker() -> None:
    controller = cluster()
    image = controller.image
    first, _, last = by_broker(prop.full_sync(image, CTX))[1]
    assert first.topic_states == last.topic_states
    partitions = umr_partitions(first)
    assert sorted(partitions) == [("a", 0), ("a", 1), ("b", 0)]
    a1 = partitions[("a", 1)]
    assert (a1.controller_epoch, a1.leader, a1.leader_epoch, a1.zk_version) == (KRAFT_EPOCH, 2, 5, 7)
    assert (a1.isr, a1.replicas, a1.offline_replicas) == ((2, 4), (2, 4, 9), (9,))  # 9 is not registered
    assert partitions[("a", 0)].offline_replicas == ()
    assert {t.topic_name: t.topic_id for t in first.topic_states} == {
        "a": image.topics_by_name["a"].topic_id,
        "b": image.topics_by_name["b"].topic_id,
    }
    # LiveBrokers: every registration, the fenced ZooKeeper broker and the KRaft broker included.
    assert [b.id for b in first.live_brokers] == [1, 2, 3, 4, 5]
    four = first.live_brokers[3]
    assert four.rack == "r4"
    assert [(e.listener, e.host, e.port, e.security_protocol) for e in four.endpoints] == [
        (LISTENER, "broker4", 9092, 0)
    ]


def test_full_sync_leader_and_isr_holds_exactly_the_brokers_replicas_with_their_leaders() -> None:
    controller = cluster()
    per_broker = by_broker(prop.full_sync(controller.image, CTX))
    expected = {1: [("a", 0), ("b", 0)], 2: [("a", 0), ("a", 1)], 3: [("a", 0), ("b", 0)]}
    for broker_id, partitions in expected.items():
        lisr = per_broker[broker_id][1]
        assert sorted(lisr_partitions(lisr)) == partitions
    lisr = per_broker[2][1]
    a1 = lisr_partitions(lisr)[("a", 1)]
    assert (a1.controller_epoch, a1.leader, a1.leader_epoch, a1.partition_epoch) == (KRAFT_EPOCH, 2, 5, 7)
    assert (a1.isr, a1.replicas, a1.adding_replicas, a1.removing_replicas) == ((2, 4), (2, 4, 9), (), ())
    assert a1.is_new is True and a1.leader_recovery_state == 0
    assert [(x.broker_id, x.host_name, x.port) for x in lisr.live_leaders] == [
        (1, "broker1", 9092),
        (2, "broker2", 9092),
    ]
    assert {t.topic_name: t.topic_id for t in lisr.topic_states}["a"] == controller.image.topics_by_name[
        "a"
    ].topic_id


def test_full_sync_of_an_image_without_topics_sends_only_the_broker_list() -> None:
    controller = Controller()
    running(controller, 1, 2)
    per_broker = by_broker(prop.full_sync(controller.image, CTX))
    assert {b: kinds(bodies) for b, bodies in per_broker.items()} == {
        1: [("UpdateMetadata", 0)],
        2: [("UpdateMetadata", 0)],
    }
    assert per_broker[1][0].topic_states == ()


def test_an_image_before_migration_versions_is_refused() -> None:
    from migrate.errors import UnsupportedVersionError
    from migrate.kraft import metadata_version as mvs

    controller = Controller(mv=mvs.IBP_3_3_IV3)
    with pytest.raises(UnsupportedVersionError, match=r"3\.3-IV3"):
        prop.full_sync(controller.image, CTX)


# ---------------------------------------------------------------- incremental


def test_configs_only_change_sends_nothing() -> None:
    controller = cluster()
    record = rec.ConfigRecord(resource_type=2, resource_name="a", name="retention.ms", value="1")
    delta = change(controller, lambda: controller.append([(record, 0)]))
    assert delta.is_empty()
    assert prop.incremental(delta, controller.image, CTX) == []


def test_a_new_topic_gets_lisr_to_its_replicas_and_umr_to_every_migrating_broker() -> None:
    controller = cluster()
    delta = change(
        controller, lambda: controller.add_topic("c", {0: ([1, 2], [1, 2], 2), 1: ([3, 4], [3, 4], 4)})
    )
    requests = prop.incremental(delta, controller.image, CTX)
    assert not any(r.full for r in requests)
    per_broker = by_broker(requests)
    assert {b: kinds(v) for b, v in per_broker.items()} == {
        1: [("LeaderAndIsr", 1), ("UpdateMetadata", 1)],
        2: [("LeaderAndIsr", 1), ("UpdateMetadata", 1)],
        3: [("LeaderAndIsr", 1), ("UpdateMetadata", 1)],
    }
    assert sorted(lisr_partitions(per_broker[3][0])) == [("c", 1)]
    assert [x.broker_id for x in per_broker[3][0].live_leaders] == [4]  # a KRaft leader is a live leader too
    umr = per_broker[1][1]
    assert sorted(umr_partitions(umr)) == [("c", 0), ("c", 1)]
    assert [b.id for b in umr.live_brokers] == [1, 2, 3, 4, 5]
    for broker_id, bodies in per_broker.items():
        for body in bodies:
            assert_header(body, controller, broker_id)


def test_a_deleted_topic_gets_stop_replica_with_delete_and_a_deletion_entry() -> None:
    controller = cluster()
    topic_id = controller.image.topics_by_name["a"].topic_id
    delta = change(controller, lambda: controller.append([(rec.RemoveTopicRecord(topic_id=topic_id), 0)]))
    assert list(delta.deleted_topics) == [topic_id]
    per_broker = by_broker(prop.incremental(delta, controller.image, CTX))
    # UpdateMetadata (batch 2, INCREMENTAL) before StopReplica; broker 4 (KRaft) and 9 (unknown) get nothing.
    assert {b: kinds(v) for b, v in per_broker.items()} == {
        1: [("UpdateMetadata", 1), ("StopReplica", -1)],
        2: [("UpdateMetadata", 1), ("StopReplica", -1)],
        3: [("UpdateMetadata", 1), ("StopReplica", -1)],
    }
    umr, stop = per_broker[2]
    [topic_state] = umr.topic_states
    assert topic_state.topic_name == "a" and topic_state.topic_id is None  # ZERO_UUID: gone from the image
    a1 = {p.partition_index: p for p in topic_state.partition_states}[1]
    assert (a1.controller_epoch, a1.leader, a1.leader_epoch, a1.zk_version) == (ZK_EPOCH, -2, 0, 0)
    assert (a1.isr, a1.replicas) == ((2, 4), (2, 4, 9))
    # Kafka 3.9 lists the *registered* replicas here (brokers ignore them in a deletion entry).
    assert a1.offline_replicas == (2, 4)
    assert stop_partitions(stop) == {
        ("a", 0): STOP.StopReplicaPartitionState(partition_index=0, leader_epoch=-2, delete_partition=True),
        ("a", 1): STOP.StopReplicaPartitionState(partition_index=1, leader_epoch=-2, delete_partition=True),
    }
    assert sorted(stop_partitions(per_broker[1][1])) == [("a", 0)]
    assert_header(stop, controller, 2)


def test_a_deleted_topic_is_sent_as_gone_even_when_a_later_batch_already_recreated_its_name() -> None:
    controller = cluster()
    old_id = controller.image.topics_by_name["a"].topic_id
    delta = change(controller, lambda: controller.append([(rec.RemoveTopicRecord(topic_id=old_id), 0)]))
    # Another client's CreateTopics of the same name lands before the deletion is published.
    new_id = uuid.uuid4()
    controller.append([
        (rec.TopicRecord(name="a", topic_id=new_id), 0),
        (rec.PartitionRecord(partition_id=0, topic_id=new_id, replicas=[1, 2, 3], isr=[1, 2, 3], leader=1,
                             leader_epoch=5, partition_epoch=7, directories=[uuid.UUID(int=0)] * 3),
         controller.mv.partition_record_version()),
    ])  # fmt: skip
    per_broker = by_broker(prop.incremental(delta, controller.image, CTX))
    umr, stop = per_broker[1]
    [topic_state] = umr.topic_states
    assert topic_state.topic_id is None  # Kafka's image of the deleting delta has no topic "a"
    assert {p.leader_epoch for p in stop_partitions(stop).values()} == {-2}


def test_a_replica_leaving_the_assignment_gets_stop_replica_with_delete_at_the_current_leader_epoch() -> None:
    controller = cluster()
    topic_id = controller.image.topics_by_name["a"].topic_id
    shrink = rec.PartitionChangeRecord(partition_id=0, topic_id=topic_id, replicas=[1, 2], isr=[1, 2])
    delta = change(
        controller, lambda: controller.append([(shrink, controller.mv.partition_change_record_version())])
    )
    assert delta.removed_replicas == {(topic_id, 0): {3}}
    per_broker = by_broker(prop.incremental(delta, controller.image, CTX))
    assert kinds(per_broker[3]) == [("UpdateMetadata", 1), ("StopReplica", -1)]
    assert stop_partitions(per_broker[3][1]) == {
        ("a", 0): STOP.StopReplicaPartitionState(partition_index=0, leader_epoch=5, delete_partition=True)
    }
    assert kinds(per_broker[1]) == [("LeaderAndIsr", 1), ("UpdateMetadata", 1)]
    a0 = lisr_partitions(per_broker[1][0])[("a", 0)]
    assert (a0.replicas, a0.isr, a0.partition_epoch, a0.leader_epoch) == ((1, 2), (1, 2), 8, 5)


def test_an_unfenced_broker_gets_all_metadata_then_its_replicas_and_the_others_learn_of_it() -> None:
    controller = cluster()
    delta = change(controller, lambda: controller.heartbeat(2, want_fence=True))  # broker 2 asks to be fenced
    assert delta.changed_brokers == {2}
    delta = change(controller, lambda: controller.heartbeat(2))
    assert delta.changed_brokers == {2}
    per_broker = by_broker(prop.incremental(delta, controller.image, CTX))
    assert kinds(per_broker[2]) == [("UpdateMetadata", 0), ("LeaderAndIsr", 1), ("UpdateMetadata", 1)]
    assert sorted(umr_partitions(per_broker[2][0])) == [("a", 0), ("a", 1), ("b", 0)]
    assert sorted(lisr_partitions(per_broker[2][1])) == [("a", 0), ("a", 1)]
    # One partition map per batch: the others get the whole metadata too, then the partitions re-sent.
    for other in (1, 3):
        assert kinds(per_broker[other]) == [("UpdateMetadata", 0), ("UpdateMetadata", 1)]
        assert per_broker[other][0].topic_states == per_broker[2][0].topic_states
        assert sorted(umr_partitions(per_broker[other][1])) == [("a", 0), ("a", 1)]


def test_a_kraft_broker_joining_sends_zookeeper_brokers_only_the_broker_list() -> None:
    controller = cluster()
    delta = change(controller, lambda: controller.register(registration(7, zk=False)))
    per_broker = by_broker(prop.incremental(delta, controller.image, CTX))
    assert {b: kinds(v) for b, v in per_broker.items()} == {b: [("UpdateMetadata", 0)] for b in (1, 2, 3)}
    umr = per_broker[1][0]
    assert umr.topic_states == ()
    assert [b.id for b in umr.live_brokers] == [1, 2, 3, 4, 5, 7]


def test_a_fenced_broker_gets_nothing_but_stays_in_live_brokers() -> None:
    controller = cluster()
    delta = change(controller, lambda: controller.heartbeat(3, want_fence=True))
    per_broker = by_broker(prop.incremental(delta, controller.image, CTX))
    assert 3 not in per_broker
    assert 3 in [b.id for b in per_broker[1][0].live_brokers]


def test_a_fence_record_for_a_fenced_broker_sends_nothing() -> None:
    controller = cluster()
    epoch = epoch_of(controller, 5)
    no_op = [(rec.BrokerRegistrationChangeRecord(broker_id=5, broker_epoch=epoch, fenced=1), 2)]
    delta = change(controller, lambda: controller.append(no_op))
    assert delta.changed_brokers == set()
    assert prop.incremental(delta, controller.image, CTX) == []
    # Kafka's ClusterDelta judges each record against the registration the ones before it left: unfenced,
    # then fenced again in one batch is a change, though the batch ends where it began.
    there_and_back = [
        (rec.BrokerRegistrationChangeRecord(broker_id=5, broker_epoch=epoch, fenced=-1), 2),
        *no_op,
    ]
    delta = change(controller, lambda: controller.append(there_and_back))
    assert delta.changed_brokers == {5}
    assert {r.broker_id for r in prop.incremental(delta, controller.image, CTX)} == {1, 2, 3}


# ---------------------------------------------------------------- delta and view


def test_delta_of_a_topic_created_and_removed_in_one_batch_is_empty() -> None:
    controller = cluster()
    topic_id = uuid.uuid5(uuid.NAMESPACE_DNS, "brief")
    records = [
        (rec.TopicRecord(name="brief", topic_id=topic_id), 0),
        (rec.RemoveTopicRecord(topic_id=topic_id), 0),
    ]
    delta = change(controller, lambda: controller.append(records))
    assert delta.is_empty() and prop.incremental(delta, controller.image, CTX) == []


def test_delta_of_names_every_broker_a_registration_record_touches() -> None:
    empty = prop.sync_view(Controller().image)
    records = [
        (rec.RegisterBrokerRecord(broker_id=1), 2),
        (rec.BrokerRegistrationChangeRecord(broker_id=2, fenced=1), 2),
        (rec.FenceBrokerRecord(id=3), 0),
        (rec.UnfenceBrokerRecord(id=4), 0),
        (rec.UnregisterBrokerRecord(broker_id=5), 0),
        (rec.RegisterControllerRecord(controller_id=6), 0),  # a controller registration is no broker change
        (rec.BrokerRegistrationChangeRecord(broker_id=7, in_controlled_shutdown=1), 2),
        (rec.BrokerRegistrationChangeRecord(broker_id=8, log_dirs=[uuid.uuid4()]), 2),
        (rec.BrokerRegistrationChangeRecord(broker_id=9), 2),  # changes nothing, as ClusterDelta judges it
    ]
    delta = prop.delta_of(records, empty, empty)
    assert delta.changed_brokers == {1, 2, 3, 4, 5, 7, 8}
    assert not delta.changed_partitions and not delta.deleted_topics


def test_sync_view_is_unaffected_by_later_replay() -> None:
    controller = cluster()
    view = prop.sync_view(controller.image)
    expected = [encode_request(r.body, 0, "c") for r in prop.full_sync(controller.image, CTX)]
    topic_id = controller.image.topics_by_name["a"].topic_id
    controller.append([(rec.RemoveTopicRecord(topic_id=topic_id), 0)])
    controller.heartbeat(2, want_fence=True)
    controller.add_topic("z", {0: ([1], [1], 1)})
    assert [encode_request(r.body, 0, "c") for r in prop.full_sync(view, CTX)] == expected


# ---------------------------------------------------------------- encoding


def test_encode_is_encode_requests_bytes_for_every_request_of_a_sync() -> None:
    controller = cluster()
    topic_id = controller.image.topics_by_name["a"].topic_id
    requests = prop.full_sync(controller.image, CTX)
    delta = change(controller, lambda: controller.append([(rec.RemoveTopicRecord(topic_id=topic_id), 0)]))
    requests += prop.incremental(delta, controller.image, CTX)
    for correlation_id, request in enumerate(requests * 2):  # the second pass from the kept bytes
        data = prop.encode(request.body, correlation_id, "bridge")
        assert data == encode_request(request.body, correlation_id, "bridge")
        decoded = decode_request(data, "test")
        assert decoded.correlation_id == correlation_id and decoded.body == request.body


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_encode_with_shared_arrays_is_encode_requests_bytes(data: st.DataObject) -> None:
    memo: dict[int, Any] = {}

    def share(entity: Any) -> Any:
        # Mark entity arrays at any depth as the propagator does; some items appear twice.
        changes = {}
        for name in ("topic_states", "partition_states", "live_brokers", "live_leaders", "endpoints"):
            items = getattr(entity, name, None)
            if items:
                items = tuple(share(i) for i in items)
                items = items + items[:1]
                marked = data.draw(st.sampled_from([tuple, EncodedOnce, "shared"]))
                changes[name] = SharedItems(items, memo) if marked == "shared" else marked(items)
        return dataclasses.replace(entity, **changes)

    body = share(data.draw(kio_entities(data.draw(st.sampled_from([LISR, UMR, STOP])))))
    expected = encode_request(body, 7, "bridge")
    assert prop.encode(body, 7, "bridge") == expected
    assert prop.encode(body, 7, "bridge") == expected


def test_encode_of_arrays_longer_than_a_one_byte_length_is_encode_requests_bytes() -> None:
    controller = Controller()
    running(controller, 1, 2, 3)
    replicas = [1, 2, 3, *range(100, 400)]  # 303 replicas, 300 of them unregistered (offline)
    controller.add_topic("wide", {p: (replicas, [1, 2, 3], 1) for p in range(200)})
    published(controller)
    requests = prop.full_sync(controller.image, CTX)
    assert len(umr_partitions(requests[0].body)) == 200
    for request in requests * 2:
        assert prop.encode(request.body, 1, None) == encode_request(request.body, 1, None)
