"""Fused, fenced dual writes (bridge.zk.migration_client) against a real ZooKeeper.

Each operation goes out as one guarded multi carrying its change notifications; `apply_all` pipelines many,
chained through `/migration`'s version. Checked here: the znodes (bytes, data versions, child counters, so
sequential names too) equal those of Kafka's own grouping (tests.support.kafka_grouping) and of one-by-one
application; a deposed controller lands nothing; a failure in a batch leaves a clean prefix; missing containers are created.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from kazoo.client import KazooClient

from bridge.zk import migration_client as zk_client_module
from bridge.zk import planning
from bridge.zk.foreign_writes import OwnWriteLog
from bridge.zk.leadership import (
    ControllerMovedError,
    FencedError,
    GuardedMulti,
    MigrationLeadershipState,
    MultiReply,
)
from bridge.zk.migration_client import ZkBatchError, ZkMigrationClient
from bridge.zk.operations import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    ClearPendingTopicDeletions,
    CreateTopic,
    CreateTopicPartitions,
    DeleteConfigs,
    DeleteDelegationToken,
    DeleteResourceAcls,
    DeleteTopic,
    DeleteTopicPartitions,
    ResourcePatternKey,
    UpdateTopic,
    UpdateTopicPartitions,
    WriteClientQuotas,
    WriteConfigs,
    WriteDelegationToken,
    WriteProducerId,
    WriteResourceAcls,
    ZkOperation,
)
from migrate.kraft.image import (
    MIGRATING_DIRECTORY,
    AclBinding,
    DelegationToken,
    PartitionRegistration,
    ScramCredential,
)
from migrate.zk import paths
from migrate.zk.embedded import EmbeddedZooKeeper
from migrate.zk.live import read_tree
from migrate.zk.znodes.controller import decode_migration
from tests.support.bridge_process import ZkReplyCutter, set_data_op_bytes
from tests.support.kafka_grouping import KafkaGroupingClient

pytestmark = pytest.mark.zookeeper

NOW_MS = 1718000000000
OFFSET, EPOCH = 100, 0
Tree = dict[str, tuple[bytes | None, int, int]]


# ---------------------------------------------------------------- helpers


class CountingClient(ZkMigrationClient):
    """Counts rounds of network waits (each `_multi` call waits once for all it sent)."""

    rounds = 0

    def _multi(
        self, batches: Sequence[Sequence[Any]], what: str, *, resent: set[int] | None = None
    ) -> list[list[Any]]:
        self.rounds += 1
        return super()._multi(batches, what, resent=resent)


def partition(replicas: list[int], leader_epoch: int = 0) -> PartitionRegistration:
    return PartitionRegistration(
        replicas=replicas,
        directories=[MIGRATING_DIRECTORY] * len(replicas),
        isr=list(replicas),
        leader=replicas[0],
        leader_epoch=leader_epoch,
        partition_epoch=-1,
    )


def topic_id(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_DNS, name)


def config(resource_type: int, name: str, configs: dict[str, str]) -> WriteConfigs:
    return WriteConfigs("UpdateConfig", "", resource_type=resource_type, resource_name=name, configs=configs)


def quotas(
    entity: tuple[tuple[str, str | None], ...],
    values: dict[str, float],
    scram: dict[int, ScramCredential] | None = None,
) -> WriteClientQuotas:
    return WriteClientQuotas("UpdateClientQuota", "", entity=entity, quotas=values, scram=scram or {})


def acl(pattern: ResourcePatternKey, principal: str, operation: int) -> AclBinding:
    return AclBinding(pattern.resource_type, pattern.name, pattern.pattern_type, principal, "*", operation, 3)


TOKEN = DelegationToken(
    "Xkq7bZ2sS3qVwP0oOQ7zVw", "User:alice", "User:alice", ["User:bob"], NOW_MS, NOW_MS + 10, NOW_MS + 5
)
ORDERS = ResourcePatternKey(2, "orders", 3)
GROUP = ResourcePatternKey(3, "app-", 4)


def every_operation_kind() -> list[ZkOperation]:
    """Every operation type, including the cases that take the Kafka path (missing entity, replay, NONODE,
    a missing ACL store, a write that changes nothing)."""
    scram = ScramCredential(b"salt", b"stored", b"server", 4096)
    return [
        CreateTopic("CreateTopic", "", name="test", topic_id=topic_id("test"), partitions={0: partition([1, 2]), 1: partition([2, 3])}),
        CreateTopic("CreateTopic", "", name="t2", topic_id=topic_id("t2"), partitions={0: partition([1])}),
        UpdateTopic("UpdateTopic", "", name="test", topic_id=topic_id("test"), partitions={0: partition([2, 1]), 1: partition([2, 3])}),
        CreateTopicPartitions("UpdatePartition", "", partitions={"test": {2: partition([3])}}),
        CreateTopicPartitions("UpdatePartition", "", partitions={"test": {2: partition([3])}}),  # replay
        UpdateTopicPartitions("UpdatePartition", "", partitions={"test": {0: partition([2, 1], 4)}}),
        DeleteTopicPartitions("DeletePartition", "", partitions={"test": (1,)}),
        config(TOPIC_RESOURCE, "test", {"retention.ms": "1000", "segment.ms": "5"}),
        config(BROKER_RESOURCE, "7", {"log.retention.ms": "1"}),  # new entity: SetData NONODE, Create
        config(BROKER_RESOURCE, "", {"num.io.threads": "8"}),
        DeleteConfigs("DeleteConfig", "", resource_type=BROKER_RESOURCE, resource_name="7"),
        DeleteConfigs("DeleteConfig", "", resource_type=BROKER_RESOURCE, resource_name="7"),  # NONODE
        config(16, "metrics", {"a": "b"}),  # a resource type ZooKeeper does not store
        quotas((("user", "alice"),), {"producer_byte_rate": 1e6}, {1: scram}),
        quotas((("client-id", "app"), ("user", "bob")), {"consumer_byte_rate": 5.0}),  # new parents
        quotas((("ip", "10.0.0.1"),), {"connection_creation_rate": 2.0}),
        WriteProducerId("UpdateProducerId", "", next_producer_id=5000),
        WriteResourceAcls("UpdateAcl", "", pattern=ORDERS, acls=(acl(ORDERS, "User:a", 3),)),
        WriteResourceAcls("UpdateAcl", "", pattern=GROUP, acls=(acl(GROUP, "User:b", 3),)),  # a store created above
        DeleteResourceAcls("DeleteAcl", "", pattern=ORDERS),
        DeleteResourceAcls("DeleteAcl", "", pattern=ORDERS),  # NONODE: notified all the same
        WriteDelegationToken("UpdateDelegationToken", "", token=TOKEN),
        DeleteDelegationToken("DeleteDelegationToken", "", token_id=TOKEN.token_id),
        DeleteDelegationToken("DeleteDelegationToken", "", token_id=TOKEN.token_id),  # NONODE
        ClearPendingTopicDeletions("DeletePendingTopicDeletion", "", names=("gone",)),
        DeleteTopic("DeleteTopic", "", name="t2"),
    ]  # fmt: skip


@pytest.fixture
def connect(zk_client: KazooClient, zk_connect: str) -> Iterator[Any]:
    """Opens sessions on sub-chroots of this test's chroot, each a Kafka cluster's ZooKeeper."""
    opened: list[KazooClient] = []

    def open_chroot(name: str) -> KazooClient:
        zk_client.ensure_path(f"/{name}")
        session = KazooClient(hosts=f"{zk_connect}/{name}")
        session.start(timeout=15)
        opened.append(session)
        return session

    yield open_chroot
    for session in opened:
        session.stop()
        session.close()


def kafka_cluster(session: KazooClient) -> None:
    """What the operations expect to find: Kafka's base paths, the ZK controller epoch, ACL stores, a pending
    deletion."""
    ZkMigrationClient(session).create_top_level_paths()
    session.create(paths.CONTROLLER_EPOCH, b"1")
    for store in ("/kafka-acl/Topic", "/kafka-acl-extended/prefixed/Group", "/kafka-acl-changes"):
        session.ensure_path(store)
    session.ensure_path(paths.DELEGATION_TOKENS)
    session.create("/admin/delete_topics/gone", makepath=True)


def leader(
    session: KazooClient,
    node_id: int = 3000,
    epoch: int = 42,
    cls: type[ZkMigrationClient] = ZkMigrationClient,
    **kw: Any,
) -> tuple[ZkMigrationClient, MigrationLeadershipState]:
    client = cls(session, clock=lambda: NOW_MS, **kw)
    state = client.get_or_create_migration_state()
    state = client.claim_controller_leadership(state, node_id, epoch)
    state = client.set_migration_state(state.with_kraft_metadata_offset_and_epoch(OFFSET, EPOCH), -1)
    return client, state


def tree(session: KazooClient) -> Tree:
    """Every znode: data, data version, child version (which names the next sequential child)."""
    return {
        path: (node.data, node.stat.version, node.stat.cversion)
        for path, node in read_tree(session, acls=False).nodes.items()
    }


def without_migration_version(nodes: Tree) -> Tree:
    data, _, cversion = nodes[paths.MIGRATION]
    return {**nodes, paths.MIGRATION: (data, -1, cversion)}


def migration_offset(session: KazooClient) -> tuple[int, int, int]:
    raw, stat = session.get(paths.MIGRATION)
    znode = decode_migration(paths.MIGRATION, raw)
    return znode.kraft_metadata_offset, znode.kraft_metadata_epoch, stat.version


def config_changes(session: KazooClient) -> dict[str, bytes | None]:
    return {
        c: session.get(f"{paths.CONFIG_CHANGES}/{c}")[0]
        for c in sorted(session.get_children(paths.CONFIG_CHANGES))
    }


# ---------------------------------------------------------------- same znodes as before


def test_fused_writes_leave_the_znodes_of_the_unfused_grouping(connect: Any) -> None:
    sessions = {name: connect(name) for name in ("unfused", "fused", "batch")}
    for session in sessions.values():
        kafka_cluster(session)
    unfused, u_state = leader(sessions["unfused"], cls=KafkaGroupingClient)
    fused, f_state = leader(sessions["fused"])
    batch, b_state = leader(sessions["batch"], cls=CountingClient)
    for op in every_operation_kind():
        u_state = unfused.apply(op, u_state)
        f_state = fused.apply(op, f_state)
    b_state = batch.apply_all(every_operation_kind(), b_state, final_state=b_state)

    expected = tree(sessions["unfused"])
    assert tree(sessions["fused"]) == expected  # /migration's version included: one bump per write, as before
    assert without_migration_version(tree(sessions["batch"])) == without_migration_version(expected)
    assert (
        f_state.migration_zk_version == u_state.migration_zk_version == migration_offset(sessions["fused"])[2]
    )
    assert b_state.migration_zk_version == migration_offset(sessions["batch"])[2]

    # Kafka's notifications, in order, with ZooKeeper's sequential names.
    assert config_changes(sessions["fused"]) == {
        f"config_change_{i:010d}": b'{"version":2,"entity_path":"%s"}' % e
        for i, e in enumerate(
            [
                b"topics/test",
                b"brokers/7",
                b"brokers/<default>",
                b"brokers/7",
                b"users/alice",
                b"users/bob/clients/app",
                b"ips/10.0.0.1",
            ]
        )
    }
    assert sorted(sessions["fused"].get_children("/kafka-acl-changes")) == [
        f"acl_changes_{i:010d}" for i in range(3)
    ]
    # The first ACL create made the whole ACL store (createAclPaths), the extended change store included.
    assert sessions["fused"].get_children("/kafka-acl-extended-changes") == ["acl_changes_0000000000"]
    assert sessions["fused"].get("/config/users/bob")[0] is None  # createRecursive's container


def test_a_batch_of_a_hundred_operations_equals_them_one_by_one_in_one_round(connect: Any) -> None:
    one, many = connect("one"), connect("many")
    for session in (one, many):
        kafka_cluster(session)
        for t in range(10):
            session.create(f"/config/topics/t{t}", b'{"version":1,"config":{}}', makepath=True)
            session.create(f"/brokers/topics/t{t}/partitions/0/state", b"{}", makepath=True)
        for u in range(7):
            session.create(f"/config/users/u{u}", b'{"version":1,"config":{}}', makepath=True)
        session.create("/kafka-acl/Topic/orders", b'{"version":1,"acls":[]}')
    ops: list[ZkOperation] = []
    for i in range(100):
        kind = i % 5
        if kind in (0, 1):
            ops.append(config(TOPIC_RESOURCE, f"t{i % 10}", {"retention.ms": str(i)}))
        elif kind == 2:
            ops.append(quotas((("user", f"u{i % 7}"),), {"producer_byte_rate": float(i)}))
        elif kind == 3:
            ops.append(
                UpdateTopicPartitions(
                    "UpdatePartition", "", partitions={f"t{i % 10}": {0: partition([1], i)}}
                )
            )
        else:
            ops.append(
                WriteResourceAcls("UpdateAcl", "", pattern=ORDERS, acls=(acl(ORDERS, f"User:{i}", 3),))
            )

    single, state = leader(one)
    for op in ops:
        state = single.apply(op, state)
    single.set_migration_state(state.with_kraft_metadata_offset_and_epoch(OFFSET + 100, 1))

    batch, b_state = leader(many, cls=CountingClient)
    assert isinstance(batch, CountingClient)
    batch.rounds = 0
    done = batch.apply_all(
        ops, b_state, final_state=b_state.with_kraft_metadata_offset_and_epoch(OFFSET + 100, 1)
    )
    assert batch.rounds == 1  # 100 operations and the offset, one round of network waits
    # ... and one ZooKeeper transaction: they fit one multi.
    written = [f"/config/topics/t{t}" for t in (0, 1, 5, 6)] + [paths.MIGRATION]
    assert len({many.exists(path).mzxid for path in written}) == 1
    assert without_migration_version(tree(many)) == without_migration_version(tree(one))
    assert migration_offset(many) == (OFFSET + 100, 1, done.migration_zk_version)
    assert (done.kraft_metadata_offset, done.kraft_metadata_epoch) == (OFFSET + 100, 1)
    assert len(config_changes(many)) == 60  # 40 topic configs, 20 quotas
    assert len(many.get_children("/kafka-acl-changes")) == 20


def test_a_batch_too_big_for_one_multi_goes_as_a_few_full_multis(
    connect: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, many = connect("one"), connect("many")
    for session in (one, many):
        kafka_cluster(session)
        for t in range(30):
            session.create(f"/brokers/topics/t{t}/partitions/0/state", b"{}", makepath=True)
    ops: list[ZkOperation] = [
        UpdateTopicPartitions("UpdatePartition", "", partitions={f"t{t}": {0: partition([1, 2], 5)}})
        for t in range(30)
    ]
    single, state = leader(one)
    sizes = [zk_client_module.PLANNERS[UpdateTopicPartitions](single, op, state).size for op in ops]
    monkeypatch.setattr(planning, "MAX_FUSED_BYTES", 10 * max(sizes))  # ten operations a multi
    for op in ops:
        state = single.apply(op, state)
    single.set_migration_state(state.with_kraft_metadata_offset_and_epoch(OFFSET + 30, 1))
    batch, b_state = leader(many)
    done = batch.apply_all(
        ops, b_state, final_state=b_state.with_kraft_metadata_offset_and_epoch(OFFSET + 30, 1)
    )
    # Three ZooKeeper transactions (one a multi), not one per operation; the znodes those one by one leave.
    states = [f"/brokers/topics/t{t}/partitions/0/state" for t in range(30)]
    assert len({many.exists(path).mzxid for path in states}) == 3
    assert without_migration_version(tree(many)) == without_migration_version(tree(one))
    assert migration_offset(many) == (OFFSET + 30, 1, done.migration_zk_version)


def test_a_failed_multi_of_a_stream_is_redone_the_kafka_way_in_order(
    connect: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(planning, "MAX_FUSED_BYTES", 400)
    one, many = connect("one"), connect("many")
    ops: list[ZkOperation] = [config(TOPIC_RESOURCE, f"t{t}", {"a": str(t)}) for t in range(6)]
    ops[3] = quotas((("user", "new"),), {"producer_byte_rate": 1.0})  # SetData NONODE: its multi fails
    for session in (one, many):
        kafka_cluster(session)
        for t in range(6):
            session.create(f"/config/topics/t{t}", b'{"version":1,"config":{}}')
    single, state = leader(one)
    for op in ops:
        state = single.apply(op, state)
    single.set_migration_state(state.with_kraft_metadata_offset_and_epoch(OFFSET + 6, 0))
    batch, b_state = leader(many)
    done = batch.apply_all(
        ops, b_state, final_state=b_state.with_kraft_metadata_offset_and_epoch(OFFSET + 6, 0)
    )
    assert many.get("/config/users/new")[0] == b'{"version":1,"config":{"producer_byte_rate":"1"}}'
    assert migration_offset(many) == (OFFSET + 6, 0, done.migration_zk_version)
    changes = f"{paths.CONFIG_CHANGES}/"
    left, right = without_migration_version(tree(many)), without_migration_version(tree(one))
    assert {p: v for p, v in left.items() if not p.startswith(changes)} == {
        p: v for p, v in right.items() if not p.startswith(changes)
    }
    assert sorted(config_changes(many).values()) == sorted(config_changes(one).values())


def test_an_operation_too_big_for_one_multi_takes_the_kafka_path_in_a_batch(
    connect: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(planning, "MAX_FUSED_BYTES", 2000)
    one, many = connect("one"), connect("many")
    big = CreateTopic(
        "CreateTopic",
        "",
        name="big",
        topic_id=topic_id("big"),
        partitions={p: partition([1]) for p in range(30)},
    )
    ops = [config(BROKER_RESOURCE, "", {"a": "1"}), big, config(TOPIC_RESOURCE, "big", {"b": "2"})]
    for session in (one, many):
        kafka_cluster(session)
    single, state = leader(one)
    for op in ops:
        state = single.apply(op, state)
    single.set_migration_state(state.with_kraft_metadata_offset_and_epoch(OFFSET + 3, 0))
    batch, b_state = leader(many)
    batch.apply_all(ops, b_state, final_state=b_state.with_kraft_metadata_offset_and_epoch(OFFSET + 3, 0))
    assert without_migration_version(tree(many)) == without_migration_version(tree(one))
    assert len(many.get_children("/brokers/topics/big/partitions")) == 30


# ---------------------------------------------------------------- /migration's offset


def test_the_offset_rides_in_the_last_multi_or_alone(connect: Any) -> None:
    session = connect("c")
    kafka_cluster(session)
    client, state = leader(session, cls=CountingClient)
    assert isinstance(client, CountingClient)
    version = state.migration_zk_version
    client.rounds = 0

    assert client.apply_all([], state, final_state=state) == state  # nothing to say
    assert client.rounds == 0
    moved = client.apply_all([], state, final_state=state.with_kraft_metadata_offset_and_epoch(150, 2))
    assert migration_offset(session) == (150, 2, version + 1)
    assert moved.migration_zk_version == version + 1

    # A batch whose last operation writes nothing: the offset rides with the last one that writes.
    ops = [config(TOPIC_RESOURCE, "x", {"a": "1"}), config(16, "m", {"a": "b"})]
    session.create("/config/topics/x", b"{}")
    client.rounds = 0
    done = client.apply_all(ops, moved, final_state=moved.with_kraft_metadata_offset_and_epoch(160, 2))
    assert migration_offset(session) == (160, 2, version + 2)
    assert done.migration_zk_version == version + 2
    assert client.rounds == 1

    # One whose last operation turns out to write nothing (the token is gone): the offset goes alone.
    gone = DeleteDelegationToken("DeleteDelegationToken", "", token_id="gone")
    client.rounds = 0
    done = client.apply_all([gone], done, final_state=done.with_kraft_metadata_offset_and_epoch(170, 2))
    assert migration_offset(session) == (170, 2, version + 3)
    assert done.migration_zk_version == version + 3
    assert client.rounds == 3  # the fused multi, the Kafka path's Delete (NONODE), the offset

    # One whose last operation is redone the Kafka way: it carries the offset itself.
    client.rounds = 0
    new_user = quotas((("user", "carol"),), {"producer_byte_rate": 1.0})
    done = client.apply_all([new_user], done, final_state=done.with_kraft_metadata_offset_and_epoch(180, 2))
    assert migration_offset(session) == (180, 2, version + 4)
    assert done.migration_zk_version == version + 4
    assert client.rounds == 3  # the fused multi, SetData (NONODE), the guarded Create with its note

    with pytest.raises(Exception, match="final state names KRaft controller 1"):
        client.apply_all([], done, final_state=done.with_new_kraft_controller(1, 1))


def test_a_failed_operation_in_a_batch_leaves_the_others_and_the_old_offset(connect: Any) -> None:
    session = connect("c")
    kafka_cluster(session)
    for t in ("a", "b", "c"):
        session.create(f"/config/topics/{t}", b'{"version":1,"config":{}}')
    client, state = leader(session)
    ops: list[ZkOperation] = [
        config(TOPIC_RESOURCE, "a", {"x": "1"}),
        config(TOPIC_RESOURCE, "b", {"x": "1"}),
        UpdateTopicPartitions("UpdatePartition", "", partitions={"gone": {7: partition([1])}}),
        config(TOPIC_RESOURCE, "c", {"x": "1"}),
        WriteProducerId("UpdateProducerId", "", next_producer_id=9000),
    ]
    with pytest.raises(
        ZkBatchError, match=r"1 of 5 operation\(s\) did not land, from operation 3 \(UpdateTopicPartitions\).*"
        r"/gone/partitions/7/state: NONODE",
    ) as raised:  # fmt: skip
        client.apply_all(ops, state, final_state=state.with_kraft_metadata_offset_and_epoch(999, 1))
    error = raised.value
    assert (error.failed_index, error.unwritten) == (2, (2,))
    # The others are independent of it and landed, in order, notifications included.
    assert [session.get(f"/config/topics/{t}")[0] for t in "abc"] == [b'{"version":1,"config":{"x":"1"}}'] * 3
    assert list(config_changes(session).values()) == [
        b'{"version":2,"entity_path":"topics/%s"}' % t for t in (b"a", b"b", b"c")
    ]
    assert session.get(paths.LATEST_PRODUCER_ID_BLOCK)[0] == (
        b'{"version":1,"broker":-1,"block_start":"9000","block_end":"9999"}'
    )
    # The last multi set the new offset; it was set back: /migration never claims what did not land.
    offset, epoch, version = migration_offset(session)
    assert (offset, epoch) == (OFFSET, EPOCH)
    assert error.state.migration_zk_version == version == state.migration_zk_version + 2
    assert (error.state.kraft_metadata_offset, error.state.kraft_metadata_epoch) == (OFFSET, EPOCH)

    # The controller carries on from the state the error gives (no false fencing).
    done = client.apply_all(
        ops[3:], error.state, final_state=error.state.with_kraft_metadata_offset_and_epoch(999, 1)
    )
    assert migration_offset(session) == (999, 1, done.migration_zk_version)


def test_a_failed_operation_is_not_redone_over_a_later_write_of_the_same_znode(connect: Any) -> None:
    session = connect("c")
    kafka_cluster(session)
    client, state = leader(session)
    one = {0: partition([1])}
    ops: list[ZkOperation] = [
        UpdateTopic("UpdateTopic", "", name="x", topic_id=topic_id("x"), partitions=one),  # no such topic
        CreateTopic("CreateTopic", "", name="x", topic_id=topic_id("x"), partitions=one),
    ]
    with pytest.raises(
        ZkBatchError, match=r"cannot be redone in order: /brokers/topics/x was written"
    ) as raised:
        client.apply_all(ops, state, final_state=state.with_kraft_metadata_offset_and_epoch(999, 1))
    assert raised.value.unwritten == (0,)
    assert session.exists("/brokers/topics/x/partitions/0/state")  # the operation behind it landed
    assert migration_offset(session)[:2] == (OFFSET, EPOCH)


def test_new_entities_in_a_batch_are_created_the_kafka_way_in_order(connect: Any) -> None:
    one, many = connect("one"), connect("many")
    ops: list[ZkOperation] = [
        quotas((("user", "new"),), {"producer_byte_rate": 1.0}),  # SetData NONODE: Kafka path
        quotas((("user", "new"),), {"producer_byte_rate": 2.0}),  # so is this one: it follows in order
        config(TOPIC_RESOURCE, "t", {"a": "1"}),  # lands in the pipeline, before them
    ]
    for session in (one, many):
        kafka_cluster(session)
        session.create("/config/topics/t", b'{"version":1,"config":{}}')
    single, state = leader(one)
    for op in ops:
        state = single.apply(op, state)
    single.set_migration_state(state.with_kraft_metadata_offset_and_epoch(OFFSET + 3, 0))
    batch, b_state = leader(many)
    done = batch.apply_all(
        ops, b_state, final_state=b_state.with_kraft_metadata_offset_and_epoch(OFFSET + 3, 0)
    )
    assert many.get("/config/users/new")[0] == b'{"version":1,"config":{"producer_byte_rate":"2"}}'
    assert migration_offset(many) == (OFFSET + 3, 0, done.migration_zk_version)
    # The same znodes; the notifications of the redone ones come after the topic's.
    left, right = without_migration_version(tree(many)), without_migration_version(tree(one))
    changes = f"{paths.CONFIG_CHANGES}/"
    assert {p: v for p, v in left.items() if not p.startswith(changes)} == {
        p: v for p, v in right.items() if not p.startswith(changes)
    }
    assert list(config_changes(many).values()) == [
        b'{"version":2,"entity_path":"topics/t"}',
        b'{"version":2,"entity_path":"users/new"}',
        b'{"version":2,"entity_path":"users/new"}',
    ]


def test_an_operation_refused_before_writing_stops_the_batch_there(connect: Any) -> None:
    session = connect("c")
    kafka_cluster(session)
    session.create("/config/topics/a", b"{}")
    client, state = leader(session)
    ops = [
        config(TOPIC_RESOURCE, "a", {"x": "1"}),
        quotas((("user", "u"),), {"connection_creation_rate": 1.0}),
    ]
    with pytest.raises(ZkBatchError, match="invalid configuration key connection_creation_rate") as raised:
        client.apply_all(ops, state, final_state=state.with_kraft_metadata_offset_and_epoch(999, 1))
    assert raised.value.failed_index == 1
    assert session.get("/config/topics/a")[0] == b'{"version":1,"config":{"x":"1"}}'
    assert migration_offset(session)[:2] == (OFFSET, EPOCH)


# ---------------------------------------------------------------- containers


def test_a_missing_config_change_store_is_created_and_the_write_retried(connect: Any) -> None:
    session = connect("c")
    kafka_cluster(session)
    session.create("/config/topics/a", b'{"version":1,"config":{}}')
    client, state = leader(session)
    state = client.apply(config(TOPIC_RESOURCE, "a", {"x": "1"}), state)  # the store is now known
    session.delete(paths.CONFIG_CHANGES, recursive=True)
    state = client.apply(config(TOPIC_RESOURCE, "a", {"x": "2"}), state)
    assert session.get(paths.CONFIG_CHANGES)[0] is None  # createRecursive's null data
    assert config_changes(session) == {"config_change_0000000000": b'{"version":2,"entity_path":"topics/a"}'}
    assert session.get("/config/topics/a")[0] == b'{"version":1,"config":{"x":"2"}}'
    assert state.migration_zk_version == migration_offset(session)[2]

    # Gone with its parent, in a batch: recreated both, the rest of the batch follows.
    session.delete("/config", recursive=True)
    ops = [config(BROKER_RESOURCE, "1", {"y": "1"}), config(BROKER_RESOURCE, "2", {"y": "2"})]
    state = client.apply_all(ops, state, final_state=state.with_kraft_metadata_offset_and_epoch(200, 0))
    assert session.get("/config")[0] is None
    assert session.get("/config/brokers")[0] is None
    assert list(config_changes(session).values()) == [
        b'{"version":2,"entity_path":"brokers/1"}',
        b'{"version":2,"entity_path":"brokers/2"}',
    ]
    assert migration_offset(session) == (200, 0, state.migration_zk_version)


# ---------------------------------------------------------------- fencing


def snapshot(session: KazooClient) -> dict[str, tuple[bytes | None, int, int, int, int]]:
    return {
        path: (node.data, node.stat.version, node.stat.cversion, node.stat.mzxid, node.stat.pzxid)
        for path, node in read_tree(session, acls=False).nodes.items()
    }


def test_a_deposed_controllers_batch_lands_nothing(connect: Any) -> None:
    session = connect("c")
    kafka_cluster(session)
    old, old_state = leader(session)
    new_session = connect("c")
    new, new_state = leader(new_session, 3001, 43)
    before = snapshot(session)
    with pytest.raises(ControllerMovedError, match="another controller took over"):
        old.apply_all(
            every_operation_kind(),
            old_state,
            final_state=old_state.with_kraft_metadata_offset_and_epoch(500, 1),
        )
    for op in every_operation_kind():
        if isinstance(op, WriteConfigs) and op.resource_type == 16:
            continue  # writes nothing
        with pytest.raises(ControllerMovedError):
            old.apply(op, old_state)
    with pytest.raises(ControllerMovedError):
        old.apply_all([], old_state, final_state=old_state.with_kraft_metadata_offset_and_epoch(500, 1))
    assert snapshot(session) == before  # counts /config/changes children (cversion) and every version
    new.apply(config(TOPIC_RESOURCE, "x", {"a": "1"}), new_state)  # the new leader writes fine
    assert len(config_changes(session)) == 1


def test_another_kraft_controller_writing_migration_fences_a_batch(connect: Any) -> None:
    session = connect("c")
    kafka_cluster(session)
    ours, state = leader(session)
    ZkMigrationClient(connect("c")).set_migration_state(MigrationLeadershipState(3001, 43), -1)
    before = snapshot(session)
    with pytest.raises(FencedError, match="another KRaft controller is making writes"):
        ours.apply_all(every_operation_kind(), state, final_state=state)
    assert snapshot(session) == before


class TakeoverBeforeSending(ZkMigrationClient):
    """Another controller claims leadership right before our next multi goes out."""

    take_over: Any = None

    def send_guarded(self, multis: Sequence[GuardedMulti], epoch_version: int, what: str) -> list[MultiReply]:
        if self.take_over is not None:
            self.take_over, take_over = None, self.take_over
            take_over()
        return super().send_guarded(multis, epoch_version, what)


def test_a_notification_racing_the_takeover_does_not_land(connect: Any) -> None:
    session = connect("c")
    kafka_cluster(session)
    session.create("/config/topics/a", b'{"version":1,"config":{}}')
    client, state = leader(session, cls=TakeoverBeforeSending)
    assert isinstance(client, TakeoverBeforeSending)
    other = connect("c")
    client.take_over = lambda: leader(other, 3001, 43)
    before = snapshot(session)
    with pytest.raises(ControllerMovedError):
        client.apply(config(TOPIC_RESOURCE, "a", {"retention.ms": "1"}), state)
    after = snapshot(session)
    assert config_changes(session) == {}
    changed = {p for p in after if after[p] != before.get(p)}
    assert changed <= {paths.CONTROLLER, paths.CONTROLLER_EPOCH, paths.MIGRATION, "/"}  # the claim's own


# ---------------------------------------------------------------- a reply lost with the connection


def test_lost_replies_are_not_taken_for_fencing(
    zk_server: EmbeddedZooKeeper, zk_client: KazooClient, zk_chroot: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    kafka_cluster(zk_client)
    for t in range(4):
        zk_client.create(f"/config/topics/t{t}", b'{"version":1,"config":{}}')
    cutter = ZkReplyCutter(zk_server.port)
    session = KazooClient(hosts=cutter.connect_string + zk_chroot)
    session.start(timeout=15)
    migration = set_data_op_bytes(f"{zk_chroot}{paths.MIGRATION}")
    try:
        client, state = leader(session)
        # One operation: its multi lands, the answer is lost, the client resends it; the copy is refused
        # by the version the first one moved on, and /migration holds exactly what it wrote.
        cutter.arm(containing=migration)
        state = client.apply_all(
            [config(TOPIC_RESOURCE, "t0", {"x": "1"})],
            state,
            final_state=state.with_kraft_metadata_offset_and_epoch(400, 1),
        )
        assert cutter.cuts == 1
        assert migration_offset(zk_client) == (400, 1, state.migration_zk_version)
        assert len(config_changes(zk_client)) == 1  # the resent copy wrote nothing

        # A batch that fits one multi is that one multi: the same holds.
        cutter.arm(containing=migration)
        ops: list[ZkOperation] = [config(TOPIC_RESOURCE, f"t{t}", {"x": "3"}) for t in range(4)]
        state = client.apply_all(ops, state, final_state=state.with_kraft_metadata_offset_and_epoch(450, 1))
        assert cutter.cuts == 2
        assert migration_offset(zk_client) == (450, 1, state.migration_zk_version)
        assert len(config_changes(zk_client)) == 5

        # A batch too big for one multi (each operation fits alone): the answers of the multis before the
        # last are lost too, and what became of them cannot be known (each landed, or failed on a request).
        # No fencing: a ZkBatchError for reconciliation, with /migration set back to the offset it had and
        # a state that writes on.
        monkeypatch.setattr(planning, "MAX_FUSED_BYTES", 300)
        cutter.arm(containing=migration, lose_earlier_replies=True)
        ops = [config(TOPIC_RESOURCE, f"t{t}", {"x": "2"}) for t in range(4)]
        with pytest.raises(ZkBatchError, match="whether they landed is unknown") as raised:
            client.apply_all(ops, state, final_state=state.with_kraft_metadata_offset_and_epoch(500, 1))
        assert cutter.cuts == 3
        assert migration_offset(zk_client)[:2] == (450, 1)
        assert len(config_changes(zk_client)) == 9  # they had landed
        state = client.apply_all(
            ops,
            raised.value.state,
            final_state=raised.value.state.with_kraft_metadata_offset_and_epoch(500, 1),
        )
        assert migration_offset(zk_client) == (500, 1, state.migration_zk_version)
    finally:
        session.stop()
        session.close()
        cutter.close()


# ---------------------------------------------------------------- planned ahead (while the log fsyncs)


class PlanCounting(ZkMigrationClient):
    planned = 0

    def _plan(self, operation: ZkOperation, state: MigrationLeadershipState) -> Any:
        self.planned += 1
        return super()._plan(operation, state)


def test_operations_prepared_ahead_write_the_same_and_are_replanned_once_the_state_moved(
    connect: Any,
) -> None:
    ahead, at_once = connect("ahead"), connect("at-once")
    for session in (ahead, at_once):
        kafka_cluster(session)
    ops = every_operation_kind()

    client, state = leader(ahead, cls=PlanCounting)
    assert isinstance(client, PlanCounting)
    prepared = client.prepare(ops, state)
    assert client.planned == len(ops) and prepared.error is None
    final = state.with_kraft_metadata_offset_and_epoch(OFFSET + 1, 1)
    done = client.apply_all(ops, state, final_state=final, prepared=prepared)
    assert client.planned == len(ops)  # the prepared plans were used, not made again

    direct, direct_state = leader(at_once)
    direct.apply_all(
        ops, direct_state, final_state=direct_state.with_kraft_metadata_offset_and_epoch(OFFSET + 1, 1)
    )
    assert without_migration_version(tree(ahead)) == without_migration_version(tree(at_once))

    # Prepared against the state before that write: planned again against the state given.
    stale = client.prepare([config(TOPIC_RESOURCE, "test", {"retention.ms": "7"})], state)
    client.apply_all(
        stale.operations,
        done,
        final_state=done.with_kraft_metadata_offset_and_epoch(OFFSET + 2, 1),
        prepared=stale,
    )
    assert client.planned == len(ops) + 2
    assert migration_offset(ahead)[:2] == (OFFSET + 2, 1)
    assert b'"retention.ms":"7"' in (ahead.get("/config/topics/test")[0] or b"")


# ---------------------------------------------------------------- one multi, sent without waiting


class Relay:
    """Takes a reply the way the controller's loop relay does (on kazoo's connection thread)."""

    def __init__(self) -> None:
        self.arrived = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None

    def set(self, value: Any) -> None:
        self.value = value
        self.arrived.set()

    def set_exception(self, exception: BaseException) -> None:
        self.error = exception
        self.arrived.set()


def send_and_wait(client: ZkMigrationClient, one: zk_client_module.OneMulti) -> Relay:
    relay = Relay()
    client.send_one(one, relay)
    assert relay.arrived.wait(15), "no reply relayed"
    return relay


def fits_one_multi() -> list[ZkOperation]:
    """Operations that land together as one multi (no new entity, nothing missing)."""
    return [
        CreateTopic("CreateTopic", "", name="test", topic_id=topic_id("test"), partitions={0: partition([1, 2]), 1: partition([2, 3])}),
        config(TOPIC_RESOURCE, "test", {"retention.ms": "1000"}),
        WriteProducerId("UpdateProducerId", "", next_producer_id=5000),
        DeleteTopicPartitions("DeletePartition", "", partitions={"test": (1,)}),
    ]  # fmt: skip


def test_one_multi_writes_what_apply_all_writes_and_moves_the_state_on(connect: Any) -> None:
    one_session, all_session = connect("one"), connect("all")
    for session in (one_session, all_session):
        kafka_cluster(session)
    ops = fits_one_multi()
    client, state = leader(one_session)
    final = state.with_kraft_metadata_offset_and_epoch(OFFSET + 1, 1)
    one = client.one_multi(client.prepare(ops, state), final)
    assert one is not None
    relay = send_and_wait(client, one)
    assert relay.error is None
    reply, landed = client.landed_one(one, relay.value)
    assert landed is not None
    client.settle_one(one, reply)
    assert landed.migration_zk_version == state.migration_zk_version + 1
    assert migration_offset(one_session) == (OFFSET + 1, 1, landed.migration_zk_version)

    direct, direct_state = leader(all_session)
    direct.apply_all(
        ops, direct_state, final_state=direct_state.with_kraft_metadata_offset_and_epoch(OFFSET + 1, 1)
    )
    assert without_migration_version(tree(one_session)) == without_migration_version(tree(all_session))


def test_a_batch_that_does_not_fit_one_multi_is_left_to_apply_all(
    connect: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = connect("c")
    kafka_cluster(session)
    client, state = leader(session)
    final = state.with_kraft_metadata_offset_and_epoch(OFFSET + 1, 1)
    assert client.one_multi(client.prepare([], state), final) is None  # nothing to write
    monkeypatch.setattr(planning, "MAX_FUSED_BYTES", 300)
    assert client.one_multi(client.prepare(fits_one_multi(), state), final) is None


def test_a_one_multi_failing_on_a_request_lands_nothing_and_apply_all_redoes_it(connect: Any) -> None:
    session = connect("c")
    kafka_cluster(session)
    client, state = leader(session)
    ops: list[ZkOperation] = [config(BROKER_RESOURCE, "7", {"log.retention.ms": "1"})]  # SetData: NONODE
    final = state.with_kraft_metadata_offset_and_epoch(OFFSET + 1, 1)
    one = client.one_multi(client.prepare(ops, state), final)
    assert one is not None
    before = snapshot(session)
    relay = send_and_wait(client, one)
    assert client.landed_one(one, relay.value)[1] is None
    assert snapshot(session) == before
    done = client.apply_all(ops, state, final_state=final)  # the Kafka way: Create after NONODE
    assert session.get("/config/brokers/7")[0] == b'{"version":1,"config":{"log.retention.ms":"1"}}'
    assert migration_offset(session) == (OFFSET + 1, 1, done.migration_zk_version)


def test_a_deposed_controllers_one_multi_lands_nothing_and_its_resend_raises(connect: Any) -> None:
    session = connect("c")
    kafka_cluster(session)
    old, old_state = leader(session)
    leader(connect("c"), 3001, 43)
    before = snapshot(session)
    one = old.one_multi(old.prepare(fits_one_multi(), old_state), old_state)
    assert one is not None
    relay = send_and_wait(old, one)
    assert old.landed_one(one, relay.value)[1] is None  # judged without blocking: not landed
    with pytest.raises(ControllerMovedError):
        old.resend_one(one)
    assert snapshot(session) == before


def test_a_one_multi_whose_reply_was_lost_is_taken_as_landed_when_resent(
    zk_server: EmbeddedZooKeeper, zk_client: KazooClient, zk_chroot: str
) -> None:
    kafka_cluster(zk_client)
    zk_client.create("/config/topics/t0", b'{"version":1,"config":{}}')
    cutter = ZkReplyCutter(zk_server.port)
    session = KazooClient(hosts=cutter.connect_string + zk_chroot)
    session.start(timeout=15)
    try:
        client, state = leader(session)
        ops: list[ZkOperation] = [config(TOPIC_RESOURCE, "t0", {"x": "1"})]
        one = client.one_multi(client.prepare(ops, state), state.with_kraft_metadata_offset_and_epoch(400, 1))
        assert one is not None
        cutter.arm(containing=set_data_op_bytes(f"{zk_chroot}{paths.MIGRATION}"))
        relay = send_and_wait(client, one)
        assert relay.error is not None and cutter.cuts == 1  # it landed; only the answer was lost
        landed = client.resend_one(one)
        assert landed is not None
        assert migration_offset(zk_client) == (400, 1, landed.migration_zk_version)
        assert len(config_changes(zk_client)) == 1  # the resent copy wrote nothing
    finally:
        session.stop()
        session.close()
        cutter.close()


def test_a_dropped_one_multi_leaves_the_write_observer_expecting_nothing(connect: Any) -> None:
    session = connect("c")
    kafka_cluster(session)
    client, state = leader(session)
    written = OwnWriteLog()
    client.observer = written
    ops: list[ZkOperation] = [config(TOPIC_RESOURCE, "test", {"retention.ms": "1"})]
    one = client.one_multi(client.prepare(ops, state), state)
    assert one is not None
    assert written.knows("/config/topics/test")  # told before it goes out
    client.drop_one(one)
    assert not written.knows("/config/topics/test")
