"""The simulated ZooKeeper-mode broker answers the controller's requests as controller-broker.md §1.8 says.

Hand-built requests over TCP; no controller runs (the broker's heartbeats go nowhere), so these prove only
that the simulator is faithful, not anything about the bridge.
"""

from __future__ import annotations

import asyncio
import json
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient
from kio.schema.api_versions.v3 import request as api_versions_v3
from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i64

from bridge.kafka import legacy_messages as lm
from bridge.kafka.client import ConnectionClosedError, KafkaConnection, send_request_sync
from migrate.zk.model import Topic
from migrate.zk.znodes.topics import encode_topic
from tests.support.zk_broker import SimulatedZkBroker
from tests.support.zk_broker_control import LEADER_AND_ISR, UPDATE_METADATA, LogDir

BROKER = 1
KRAFT_EPOCH = 10
ORDERS, OLD = uuid.UUID(int=1), uuid.UUID(int=2)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def broker() -> Iterator[SimulatedZkBroker]:
    """Broker 1 with logs orders-0, orders-1 and old-0 on disk, registered with KRaft epoch 10."""
    logs = [LogDir("orders", 0, ORDERS), LogDir("orders", 1, ORDERS), LogDir("old", 0, OLD)]
    sim = SimulatedZkBroker(BROKER, ("127.0.0.1", free_port()), "cluster", logs=logs).start()
    sim.view.broker_epoch = KRAFT_EPOCH
    yield sim
    sim.kill()


def send(broker: SimulatedZkBroker, request: Any, timeout: float = 10.0) -> Any:
    return send_request_sync("127.0.0.1", broker.port, request, timeout=timeout)


def lisr(
    partitions: dict[tuple[str, uuid.UUID, int], tuple[int, int]],
    *,
    kraft: bool = True,
    full: bool = False,
    broker_epoch: int = KRAFT_EPOCH,
    controller_epoch: int = 5,
) -> Any:
    """LeaderAndIsr v7 for (topic, id, partition) -> (leader, leader epoch), replicas [1, 2]."""
    topics: dict[tuple[str, uuid.UUID], list[Any]] = {}
    for (name, topic_id, index), (leader, epoch) in partitions.items():
        topics.setdefault((name, topic_id), []).append(
            lm.LeaderAndIsrRequestV7LeaderAndIsrPartitionState(
                partition_index=i32(index),
                controller_epoch=i32(3),
                leader=BrokerId(leader),
                leader_epoch=i32(epoch),
                isr=(BrokerId(1), BrokerId(2)),
                partition_epoch=i32(epoch),
                replicas=(BrokerId(1), BrokerId(2)),
                is_new=True,
            )
        )
    return lm.LeaderAndIsrRequestV7(
        controller_id=BrokerId(3000), is_kraft_controller=kraft, controller_epoch=i32(controller_epoch),
        broker_epoch=i64(broker_epoch), type=i8(2 if full else 1),
        topic_states=tuple(
            lm.LeaderAndIsrRequestV7LeaderAndIsrTopicState(topic_name=TopicName(n), topic_id=t, partition_states=tuple(p))
            for (n, t), p in topics.items()
        ),
    )  # fmt: skip


def umr(topics: dict[str, uuid.UUID], *, full: bool = False, controller_epoch: int = 5) -> Any:
    """UpdateMetadata v8 with partition 0 of each topic led by broker 1."""
    return lm.UpdateMetadataRequestV8(
        controller_id=BrokerId(3000), is_kraft_controller=True, type=i8(2 if full else 0),
        controller_epoch=i32(controller_epoch), broker_epoch=i64(KRAFT_EPOCH),
        topic_states=tuple(
            lm.UpdateMetadataRequestV8UpdateMetadataTopicState(
                topic_name=TopicName(name), topic_id=topic_id,
                partition_states=(
                    lm.UpdateMetadataRequestV8UpdateMetadataPartitionState(
                        partition_index=i32(0), leader=BrokerId(1), leader_epoch=i32(1), isr=(BrokerId(1),),
                        zk_version=i32(1), replicas=(BrokerId(1),),
                    ),
                ),
            )
            for name, topic_id in topics.items()
        ),
        live_brokers=(
            lm.UpdateMetadataRequestV8UpdateMetadataBroker(
                id=BrokerId(1),
                endpoints=(lm.UpdateMetadataRequestV8UpdateMetadataEndpoint(
                    port=i32(9092), host="localhost", listener="PLAINTEXT"
                ),),
                rack=None,
            ),
        ),
    )  # fmt: skip


def stop_replica(partitions: dict[tuple[str, int], bool], leader_epoch: int = -2) -> Any:
    """StopReplica v4 for (topic, partition) -> delete."""
    return lm.StopReplicaRequestV4(
        controller_id=BrokerId(3000), is_kraft_controller=True, controller_epoch=i32(5),
        broker_epoch=i64(KRAFT_EPOCH),
        topic_states=tuple(
            lm.StopReplicaRequestV4StopReplicaTopicState(
                topic_name=TopicName(name),
                partition_states=(lm.StopReplicaRequestV4StopReplicaPartitionState(
                    partition_index=i32(index), leader_epoch=i32(leader_epoch), delete_partition=delete
                ),),
            )
            for (name, index), delete in partitions.items()
        ),
    )  # fmt: skip


def codes(response: Any) -> list[int]:
    return [int(p.error_code) for t in response.topics for p in t.partition_errors]


def test_it_binds_a_free_port_before_it_advertises_it_and_restarts_with_its_logs(
    zk_client: KazooClient, zk_connect: str
) -> None:
    assignment = {0: [1, 2], 1: [2, 3], 2: [3, 1]}
    zk_client.create(
        "/brokers/topics/orders", encode_topic(Topic("orders", ORDERS, assignment)), makepath=True
    )
    sim = SimulatedZkBroker(BROKER, ("127.0.0.1", free_port()), "cluster", zk_connect=zk_connect).start()
    try:
        znode = json.loads(zk_client.get(f"/brokers/ids/{BROKER}")[0])
        assert sim.port != 0 and znode["port"] == sim.port
        assert sim.registration_request().listeners[0].port == sim.port
        hello = api_versions_v3.ApiVersionsRequest(client_software_name="t", client_software_version="1")
        ranges = {int(k.api_key): (k.min_version, k.max_version) for k in send(sim, hello).api_keys}
        assert {4: (7, 7), 5: (4, 4), 6: (8, 8)}.items() <= ranges.items()
        assert set(sim.control.snapshot().logs) == {("orders", 0), ("orders", 2)}  # its replicas' logs
        send(sim, stop_replica({("orders", 2): True}))
    finally:
        sim.kill()
    with pytest.raises(ConnectionClosedError):
        send(sim, umr({}))
    again = sim.restarted()
    try:
        assert again.port == sim.port
        assert set(again.control.snapshot().logs) == {("orders", 0)}  # the deleted log stays deleted
    finally:
        again.kill()


def test_stale_broker_and_controller_epochs_are_refused_and_change_nothing(broker: SimulatedZkBroker) -> None:
    request = lisr({("orders", ORDERS, 0): (1, 0)}, broker_epoch=KRAFT_EPOCH - 1)
    stale = send(broker, request)
    assert int(stale.error_code) == ErrorCode.stale_broker_epoch
    assert codes(stale) == [ErrorCode.stale_broker_epoch]  # getErrorResponse: every partition too
    assert send(broker, umr({}, controller_epoch=5)).error_code == ErrorCode.none  # last seen: 5
    assert (
        send(broker, umr({"orders": ORDERS}, controller_epoch=4)).error_code
        == ErrorCode.stale_controller_epoch
    )
    assert send(broker, lisr({("orders", ORDERS, 0): (1, 0)}, controller_epoch=4)).error_code == (
        ErrorCode.stale_controller_epoch
    )
    state = broker.control.snapshot()
    assert state.leaders() == {} and state.cache.partition_states == {}
    assert [r.error_code for r in state.requests] == [77, 0, 11, 11]
    # -1 is never stale
    assert codes(send(broker, lisr({("orders", ORDERS, 0): (1, 0)}, broker_epoch=-1))) == [0]


def test_leader_epochs_lower_refused_equal_only_from_a_kraft_controller(broker: SimulatedZkBroker) -> None:
    assert codes(send(broker, lisr({("orders", ORDERS, 0): (1, 4), ("orders", ORDERS, 1): (2, 4)}))) == [0, 0]
    assert codes(send(broker, lisr({("orders", ORDERS, 0): (1, 3)}))) == [ErrorCode.stale_controller_epoch]
    assert codes(send(broker, lisr({("orders", ORDERS, 0): (1, 4)}, kraft=False))) == [
        ErrorCode.stale_controller_epoch
    ]
    assert codes(send(broker, lisr({("orders", ORDERS, 0): (2, 4)}))) == [0]  # KAFKA-16121
    state = broker.control.snapshot()
    assert state.leaders() == {} and state.followers() == {("orders", 0): 4, ("orders", 1): 4}


def test_a_full_leader_and_isr_renames_stray_logs_instead_of_deleting_them(broker: SimulatedZkBroker) -> None:
    recreated = uuid.UUID(int=9)
    response = send(broker, lisr({("orders", ORDERS, 0): (1, 0), ("old", recreated, 0): (2, 0)}, full=True))
    assert codes(response) == [0, 0]
    state = broker.control.snapshot()
    assert state.leaders() == {("orders", 0): 0} and state.followers() == {("old", 0): 0}
    assert state.logs[("old", 0)].topic_id == recreated
    assert {(s.topic, s.partition, s.topic_id) for s in state.strays} == {
        ("orders", 1, ORDERS),
        ("old", 0, OLD),
    }
    assert all(s.dir_name.endswith("-stray") for s in state.strays) and state.deleted == []


def test_a_full_update_metadata_deletes_topics_the_request_lacks(broker: SimulatedZkBroker) -> None:
    assert send(broker, umr({"orders": ORDERS, "old": OLD})).error_code == ErrorCode.none
    assert send(broker, umr({"orders": ORDERS})).error_code == ErrorCode.none  # not FULL: nothing implied
    assert set(broker.control.snapshot().cache.partition_states) == {"orders", "old"}
    assert send(broker, umr({"orders": ORDERS}, full=True)).error_code == ErrorCode.none
    cache = broker.control.snapshot().cache
    assert set(cache.partition_states) == {"orders"} and cache.topic_ids == {"orders": ORDERS}
    assert (cache.controller_id, cache.controller_is_kraft, list(cache.live_brokers)) == (3000, True, [1])


def test_stop_replica_deletes_the_log_only_when_asked(broker: SimulatedZkBroker) -> None:
    send(broker, lisr({("orders", ORDERS, 0): (1, 2), ("orders", ORDERS, 1): (1, 2)}))
    response = send(broker, stop_replica({("orders", 0): True, ("orders", 1): False}))
    assert [(p.topic_name, p.partition_index, p.error_code) for p in response.partition_errors] == [
        ("orders", 0, 0),
        ("orders", 1, 0),
    ]
    state = broker.control.snapshot()
    assert [(d.topic, d.partition) for d in state.deleted] == [("orders", 0)]
    assert ("orders", 0) not in state.logs and state.logs[("orders", 1)].stopped
    assert state.leaders() == {}
    fenced = send(broker, stop_replica({("orders", 1): True}, leader_epoch=1))
    assert [p.error_code for p in fenced.partition_errors] == [ErrorCode.fenced_leader_epoch]


def test_injected_errors_and_an_unresponsive_broker(broker: SimulatedZkBroker) -> None:
    broker.control.fail_next(LEADER_AND_ISR, ErrorCode.not_controller)
    assert codes(send(broker, lisr({("orders", ORDERS, 0): (1, 0)}))) == [ErrorCode.not_controller]
    assert broker.control.snapshot().leaders() == {}  # not applied
    assert codes(send(broker, lisr({("orders", ORDERS, 0): (1, 0)}))) == [0]  # only the next one

    broker.control.unresponsive = True

    async def unanswered() -> None:
        connection = await KafkaConnection.open("127.0.0.1", broker.port)
        async with connection:
            with pytest.raises(ConnectionClosedError, match="no response"):
                await connection.send(umr({"old": OLD}), timeout=0.5)

    asyncio.run(unanswered())
    state = broker.control.snapshot()
    assert state.counts == {LEADER_AND_ISR: 2, UPDATE_METADATA: 1}
    assert state.requests[-1].response is None and "old" not in state.cache.partition_states
    assert [r.injected for r in state.requests] == [True, False, False]
