"""bridge.zk.migration_client / bridge.zk.leadership against a real ZooKeeper: Kafka's ZkMigrationClient scenarios.

Each test gets its own chroot (`zk_client` is rooted there), so `/` below is private to the test. Expected
bytes are either literal Kafka output (zk-layout.md examples, Kafka's own tests) or the project encoders'.
"""

from __future__ import annotations

import base64
import itertools
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from bench.generate_cluster import ClusterSpec, generate, load_into_zookeeper
from bridge.zk.leadership import (
    EMPTY_STATE,
    ControllerMovedError,
    CreateRequest,
    FencedError,
    MigrationClientError,
    MigrationLeadershipState,
)
from bridge.zk.migration_client import ZkMigrationClient
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
from bridge.zk.planner import plan_reconciliation
from migrate.errors import InvalidRequestError
from migrate.kraft.image import (
    MIGRATING_DIRECTORY,
    AclBinding,
    DelegationToken,
    PartitionRegistration,
    ScramCredential,
)
from migrate.kraft.replay import replay_records
from migrate.translate import translate
from migrate.zk import paths
from migrate.zk.cluster import from_tree, to_znodes
from migrate.zk.embedded import EmbeddedZooKeeper
from migrate.zk.live import read_tree
from migrate.zk.model import (
    AclEntry,
    AclOperation,
    AclPermissionType,
    AclResource,
    ControllerRegistration,
    MigrationState,
    PartitionState,
    PatternType,
    ProducerIdBlock,
    ResourcePattern,
    ResourceType,
    Topic,
    ZkClusterModel,
)
from migrate.zk.model import DelegationToken as ZkDelegationToken
from migrate.zk.protocol import NODEEXISTS, OK
from migrate.zk.znodes.acls import encode_acls
from migrate.zk.znodes.configs import decode_config_change, encode_config_map
from migrate.zk.znodes.controller import (
    decode_controller,
    decode_migration,
    encode_controller,
    encode_migration,
)
from migrate.zk.znodes.tokens import encode_delegation_token
from migrate.zk.znodes.topics import encode_partition_state, encode_topic

pytestmark = pytest.mark.zookeeper

NOW_MS = 1718000000000
KRAFT_EPOCH = 42  # ZkMigrationTestHarness.InitialControllerEpoch


# ---------------------------------------------------------------- helpers


def partition(
    replicas: list[int],
    isr: list[int] | None = None,
    leader: int | None = None,
    leader_epoch: int = 0,
    *,
    adding: list[int] | None = None,
    removing: list[int] | None = None,
    recovery: int = 0,
) -> PartitionRegistration:
    return PartitionRegistration(
        replicas=replicas,
        directories=[MIGRATING_DIRECTORY] * len(replicas),
        isr=list(replicas) if isr is None else isr,
        leader=replicas[0] if leader is None else leader,
        leader_epoch=leader_epoch,
        partition_epoch=-1,
        adding_replicas=adding or [],
        removing_replicas=removing or [],
        leader_recovery_state=recovery,
    )


def kafka_uuid(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


def model(client: KazooClient) -> ZkClusterModel:
    return from_tree(read_tree(client, acls=False))


def snapshot(client: KazooClient) -> dict[str, tuple[bytes | None, int, int, int, int]]:
    """Every znode with its data and the stat fields any write would move."""
    tree = read_tree(client, acls=False)
    return {
        path: (node.data, node.stat.version, node.stat.cversion, node.stat.mzxid, node.stat.pzxid)
        for path, node in tree.nodes.items()
    }


def data(client: KazooClient, path: str) -> bytes | None:
    return client.get(path)[0]


def version(client: KazooClient, path: str) -> int:
    return int(client.get(path)[1].version)


def notifications(client: KazooClient, parent: str) -> dict[str, bytes | None]:
    return {name: data(client, f"{parent}/{name}") for name in sorted(client.get_children(parent))}


def register_zk_controller(client: KazooClient, broker_id: int) -> tuple[int, int] | None:
    """A ZK broker winning the controller election (KafkaZkClient.registerControllerAndIncrementControllerEpoch)."""
    raw, stat = client.get(paths.CONTROLLER_EPOCH)
    epoch = int(raw) + 1
    transaction = client.transaction()
    registration = ControllerRegistration(broker_id, timestamp=NOW_MS, kraft_controller_epoch=-1)
    transaction.create(paths.CONTROLLER, encode_controller(registration), ephemeral=True)
    transaction.set_data(paths.CONTROLLER_EPOCH, str(epoch).encode(), stat.version)
    results = transaction.commit()
    if any(isinstance(r, Exception) for r in results):
        return None
    return epoch, results[1].version


@pytest.fixture
def kafka_zk(zk_client: KazooClient) -> KazooClient:
    """A chroot as ZkMigrationTestHarness leaves it: `/controller_epoch` = 1 (version 0)."""
    zk_client.create(paths.CONTROLLER_EPOCH, b"1")
    return zk_client


@pytest.fixture
def client(kafka_zk: KazooClient) -> ZkMigrationClient:
    return ZkMigrationClient(kafka_zk, clock=lambda: NOW_MS)


@pytest.fixture
def state(client: ZkMigrationClient, kafka_zk: KazooClient) -> MigrationLeadershipState:
    """Kafka's harness state: controller 3000 epoch 42 offset 100, ZK epoch read back, `/migration` at 0."""
    initial = MigrationLeadershipState(3000, KRAFT_EPOCH, 100, 0, NOW_MS).with_zk_controller(
        1, version(kafka_zk, paths.CONTROLLER_EPOCH)
    )
    created = client.get_or_create_migration_state(initial)
    assert created.migration_zk_version == 0
    return created


@pytest.fixture
def second_zk(zk_connect: str) -> Iterator[KazooClient]:
    """Another session on the same chroot: the other controller."""
    other = KazooClient(hosts=zk_connect)
    other.start(timeout=15)
    yield other
    other.stop()
    other.close()


# ---------------------------------------------------------------- state and /migration


def test_empty_state_has_kafkas_empty_values() -> None:
    assert MigrationLeadershipState() == EMPTY_STATE
    assert (EMPTY_STATE.kraft_controller_id, EMPTY_STATE.kraft_controller_epoch) == (-1, -1)
    assert (EMPTY_STATE.kraft_metadata_offset, EMPTY_STATE.kraft_metadata_epoch) == (-1, -1)
    assert EMPTY_STATE.last_updated_time_ms == -1
    assert EMPTY_STATE.migration_zk_version == -2
    assert (EMPTY_STATE.zk_controller_epoch, EMPTY_STATE.zk_controller_epoch_zk_version) == (-1, -2)
    assert not EMPTY_STATE.initial_zk_migration_complete
    assert not EMPTY_STATE.holds_zk_controller
    assert EMPTY_STATE.with_kraft_metadata_offset_and_epoch(1, 0).initial_zk_migration_complete


def test_first_read_creates_base_paths_and_empty_migration_znode(zk_client: KazooClient) -> None:
    client = ZkMigrationClient(zk_client)
    created = client.get_or_create_migration_state()
    assert created == EMPTY_STATE.with_migration_zk_version(0)
    # A 5-entry Scala Map: Jackson writes it in hash order (zk-layout.md §4.20 lists the keys by meaning).
    assert (
        data(zk_client, paths.MIGRATION)
        == encode_migration(MigrationState())
        == (
            b'{"version":0,"kraft_metadata_offset":-1,"kraft_controller_id":-1,"kraft_metadata_epoch":-1,'
            b'"kraft_controller_epoch":-1}'
        )
    )
    for path in paths.PERSISTENT_PATHS:
        assert zk_client.get(path)[0] is None, path  # containers carry null data, as Kafka's createRecursive

    zk_client.set(paths.MIGRATION, encode_migration(MigrationState(3000, 7, 18452, 7)))
    read = client.get_or_create_migration_state(MigrationLeadershipState(1, 1, 1, 1))
    stat = zk_client.get(paths.MIGRATION)[1]
    assert read == MigrationLeadershipState(3000, 7, 18452, 7, stat.mtime, 1)  # ZK controller unknown
    assert read.initial_zk_migration_complete


def test_set_migration_state_follows_the_znode_version(
    client: ZkMigrationClient, kafka_zk: KazooClient, state: MigrationLeadershipState
) -> None:
    moved = client.set_migration_state(state.with_kraft_metadata_offset_and_epoch(200, 3))
    assert moved.migration_zk_version == 1
    assert (
        decode_migration(paths.MIGRATION, data(kafka_zk, paths.MIGRATION)).kraft_metadata_offset == 200
    )

    with pytest.raises(FencedError, match=r"/migration expected version 0 but found version 1"):
        client.set_migration_state(state)
    with pytest.raises(InvalidRequestError, match="/migration"):
        client.set_migration_state(state, expected_version=-2)

    # The once-per-leadership write: match any version, learn the current one.
    learned = client.set_migration_state(state, expected_version=-1)
    assert learned.migration_zk_version == 2 == version(kafka_zk, paths.MIGRATION)


# ---------------------------------------------------------------- fenced writes (§2.4, §14.1, §14.4)


def test_empty_write_sends_nothing(
    zk_connect: str, client: ZkMigrationClient, state: MigrationLeadershipState
) -> None:
    stopped = KazooClient(hosts=zk_connect)  # never started: any request would fail
    outcome = ZkMigrationClient(stopped).fenced_write([], state)
    assert outcome.state == state
    assert outcome.results == ()


def test_failed_last_request_leaves_migration_unbumped_and_a_replay_succeeds(
    client: ZkMigrationClient, kafka_zk: KazooClient, state: MigrationLeadershipState
) -> None:
    bad = [CreateRequest(p, b"") for p in ("/foo", "/foo/bar", "/foo/bar/spam", "/foo")]
    outcome = client.fenced_write(bad, state)
    assert [r.code for r in outcome.results] == [OK, OK, OK, NODEEXISTS]
    assert outcome.state.migration_zk_version == 0
    assert client.get_or_create_migration_state().migration_zk_version == 0  # earlier multis stay applied
    assert kafka_zk.exists("/foo/bar/spam")

    good = [CreateRequest(p, b"") for p in ("/foo", "/foo/bar", "/foo/bar/spam", "/foo/bar/eggs")]
    outcome = client.fenced_write(good, state)
    assert [r.code for r in outcome.results] == [NODEEXISTS, NODEEXISTS, NODEEXISTS, OK]
    assert outcome.state.migration_zk_version == 1 == version(kafka_zk, paths.MIGRATION)
    # The last multi wrote the state as passed in to /migration.
    assert data(kafka_zk, paths.MIGRATION) == encode_migration(state.to_znode())


def test_fenced_write_needs_a_claimed_controller_epoch(
    client: ZkMigrationClient, kafka_zk: KazooClient, state: MigrationLeadershipState
) -> None:
    for unfit in (state.with_unknown_zk_controller(), state.with_zk_controller(1, -1)):
        with pytest.raises(InvalidRequestError, match="zkControllerEpochZkVersion"):
            client.fenced_write([CreateRequest("/foo")], unfit)
    with pytest.raises(InvalidRequestError, match="/migration version -1"):
        client.fenced_write([CreateRequest("/foo")], state.with_migration_zk_version(-1))
    assert not kafka_zk.exists("/foo")


# ---------------------------------------------------------------- claiming /controller (§3, §14.1, §14.4)


def test_claim_absent_controller(client: ZkMigrationClient, kafka_zk: KazooClient) -> None:
    claimed = client.claim_controller_leadership(EMPTY_STATE, 3000, 7)
    assert claimed.holds_zk_controller
    assert (claimed.zk_controller_epoch, claimed.zk_controller_epoch_zk_version) == (2, 1)
    assert (claimed.kraft_controller_id, claimed.kraft_controller_epoch) == (3000, 7)
    assert data(kafka_zk, paths.CONTROLLER_EPOCH) == b"2"
    raw, stat = kafka_zk.get(paths.CONTROLLER)
    assert raw == b'{"version":2,"brokerid":3000,"timestamp":"1718000000000","kraftControllerEpoch":7}'
    assert stat.ephemeralOwner == 0  # persistent: ZK brokers must not elect themselves meanwhile


def test_existing_kraft_controller_is_replaced_without_release(
    client: ZkMigrationClient, state: MigrationLeadershipState
) -> None:
    assert client.claim_controller_leadership(state).zk_controller_epoch_zk_version == 1
    other = EMPTY_STATE.with_new_kraft_controller(3001, 43).with_kraft_metadata_offset_and_epoch(100, 42)
    other = client.claim_controller_leadership(other)
    assert other.zk_controller_epoch_zk_version == 2
    assert (other.kraft_controller_id, other.kraft_controller_epoch) == (3001, 43)


def test_claim_with_older_or_same_kraft_epoch_is_rejected(
    client: ZkMigrationClient, kafka_zk: KazooClient, state: MigrationLeadershipState
) -> None:
    state = client.claim_controller_leadership(state, 3001, KRAFT_EPOCH)
    assert state.zk_controller_epoch_zk_version == 1
    for epoch in (KRAFT_EPOCH - 1, KRAFT_EPOCH):
        with pytest.raises(ControllerMovedError) as raised:
            client.claim_controller_leadership(state, 3001, epoch)
        assert str(raised.value) == (
            f"Cannot register KRaft controller 3001 with epoch {epoch} as the current controller register "
            f"in ZK has the same or newer epoch 42."
        )
    assert data(kafka_zk, paths.CONTROLLER_EPOCH) == b"2"  # the rejected claims changed nothing
    state = client.claim_controller_leadership(state, 3001, 100)
    assert (state.kraft_controller_id, state.kraft_controller_epoch) == (3001, 100)
    assert state.zk_controller_epoch == 3


def test_zk_and_kraft_controllers_take_turns_with_kafkas_numbers(
    client: ZkMigrationClient, kafka_zk: KazooClient, state: MigrationLeadershipState
) -> None:
    # KafkaZkClientTest.testRegisterZkControllerAfterKRaft, from /controller_epoch = 1 (version 0).
    kraft = client.claim_controller_leadership(state)
    assert (kraft.zk_controller_epoch, kraft.zk_controller_epoch_zk_version) == (2, 1)
    assert register_zk_controller(kafka_zk, 100) is None  # the persistent /controller blocks the election
    kafka_zk.delete(paths.CONTROLLER)
    assert register_zk_controller(kafka_zk, 100) == (3, 2)
    kraft = client.claim_controller_leadership(kraft, 3000, KRAFT_EPOCH + 1)
    assert (kraft.zk_controller_epoch, kraft.zk_controller_epoch_zk_version) == (4, 3)
    assert decode_controller(paths.CONTROLLER, data(kafka_zk, paths.CONTROLLER)).broker_id == 3000


def test_claim_over_zk_controller_then_release(
    client: ZkMigrationClient, kafka_zk: KazooClient, state: MigrationLeadershipState
) -> None:
    # ZkMigrationClientTest.testClaimAndReleaseExistingController.
    assert register_zk_controller(kafka_zk, 100) == (2, 1)
    state = client.claim_controller_leadership(state)
    assert state.zk_controller_epoch_zk_version == 2
    assert data(kafka_zk, paths.CONTROLLER_EPOCH) == b"3"
    assert decode_controller(paths.CONTROLLER, data(kafka_zk, paths.CONTROLLER)).broker_id == 3000
    assert register_zk_controller(kafka_zk, 100) is None
    released = client.release_controller_leadership(state)
    assert not released.holds_zk_controller
    assert not kafka_zk.exists(paths.CONTROLLER)
    assert register_zk_controller(kafka_zk, 100) == (4, 3)


def test_claim_without_controller_epoch_fails(zk_client: KazooClient) -> None:
    client = ZkMigrationClient(zk_client)
    with pytest.raises(MigrationClientError, match="no ZK controller epoch present"):
        client.claim_controller_leadership(EMPTY_STATE, 3000, 1)
    assert not zk_client.exists(paths.CONTROLLER)


def test_claim_that_loses_a_race_reports_failed_registration(
    kafka_zk: KazooClient, second_zk: KazooClient
) -> None:
    class RacedClient(ZkMigrationClient):
        """Another controller bumps /controller_epoch right after we read it."""

        def get(self, path: str):  # type: ignore[no-untyped-def]
            found = super().get(path)
            if path == paths.CONTROLLER:
                register_zk_controller(second_zk, 5)
            return found

    result = RacedClient(kafka_zk).claim_controller_leadership(EMPTY_STATE, 3000, 1)
    assert not result.holds_zk_controller
    assert (result.zk_controller_epoch, result.zk_controller_epoch_zk_version) == (-1, -2)
    assert decode_controller(paths.CONTROLLER, data(kafka_zk, paths.CONTROLLER)).broker_id == 5


def test_concurrent_claims_get_distinct_zk_epochs(zk_connect: str, kafka_zk: KazooClient) -> None:
    # KafkaZkClientTest.testConcurrentKRaftControllerClaim, scaled down.
    epochs = itertools.count(1)
    lock = threading.Lock()
    won: list[int] = []

    def claimant(node_id: int) -> None:
        session = KazooClient(hosts=zk_connect)
        session.start(timeout=15)
        try:
            client = ZkMigrationClient(session)
            for _ in range(40):
                with lock:
                    epoch = next(epochs)
                try:
                    claimed = client.claim_controller_leadership(EMPTY_STATE, node_id, epoch)
                except ControllerMovedError:
                    continue  # a newer epoch got there first
                if claimed.holds_zk_controller:
                    with lock:
                        won.append(claimed.zk_controller_epoch)
        finally:
            session.stop()
            session.close()

    threads = [threading.Thread(target=claimant, args=(3000 + i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert won
    assert len(set(won)) == len(won)
    assert int(data(kafka_zk, paths.CONTROLLER_EPOCH) or b"") == 1 + len(won)


# ---------------------------------------------------------------- topics (§7.2, §14.1)


def create_test_topic(
    client: ZkMigrationClient, state: MigrationLeadershipState
) -> tuple[MigrationLeadershipState, uuid.UUID]:
    topic_id = uuid.uuid4()
    op = CreateTopic(
        "CreateTopic",
        "Create topic test",
        name="test",
        topic_id=topic_id,
        partitions={0: partition([0, 1, 2]), 1: partition([1, 2, 3])},
    )
    return client.apply(op, state), topic_id


def test_create_topic_writes_kafkas_znodes(
    client: ZkMigrationClient, kafka_zk: KazooClient, state: MigrationLeadershipState
) -> None:
    topic_id = kafka_uuid("bWYLvkNSQeWdKhhr3n0vNw")
    op = CreateTopic(
        "CreateTopic",
        "Create topic orders",
        name="orders",
        topic_id=topic_id,
        partitions={
            0: partition([2, 1], leader=1, leader_epoch=2, isr=[1, 2]),
            1: partition([3, 2]),
            2: partition([1, 3], recovery=1),
        },
    )
    state = state.with_new_kraft_controller(3000, 2)
    new = client.apply(op, state)
    assert new.migration_zk_version == 1 == version(kafka_zk, paths.MIGRATION)

    # Byte for byte what the real Kafka 3.5 cluster in the fixtures holds for the same values.
    assert data(kafka_zk, "/brokers/topics/orders") == (
        b'{"partitions":{"0":[2,1],"1":[3,2],"2":[1,3]},"topic_id":"bWYLvkNSQeWdKhhr3n0vNw",'
        b'"adding_replicas":{},"removing_replicas":{},"version":3}'
    )
    assert data(kafka_zk, "/brokers/topics/orders/partitions/0/state") == (
        b'{"controller_epoch":2,"leader":1,"version":1,"leader_epoch":2,"isr":[1,2]}'
    )
    assert data(kafka_zk, "/config/topics/orders") == b'{"version":1,"config":{}}'
    assert data(kafka_zk, "/brokers/topics/orders/partitions") is None
    assert data(kafka_zk, "/brokers/topics/orders/partitions/1") is None
    assert notifications(kafka_zk, paths.CONFIG_CHANGES) == {}  # createTopic sends none

    topic = model(kafka_zk).topics["orders"]
    assert (topic.topic_id, topic.partitions) == (topic_id, {0: [2, 1], 1: [3, 2], 2: [1, 3]})
    assert topic.states[2] == PartitionState(1, 0, [1, 3], 2, leader_recovery_state=1, zk_version=0)
    assert topic.states[1].controller_epoch == 2  # the KRaft epoch, not /controller_epoch's


def test_create_topic_is_idempotent(client: ZkMigrationClient, state: MigrationLeadershipState) -> None:
    state, topic_id = create_test_topic(client, state)
    assert state.migration_zk_version == 1
    again = client.apply(
        CreateTopic(
            "CreateTopic", "again", name="test", topic_id=topic_id, partitions={0: partition([0, 1, 2])}
        ),
        state,
    )
    assert again.migration_zk_version == 1


def test_create_topic_failing_otherwise_raises(
    client: ZkMigrationClient, kafka_zk: KazooClient, state: MigrationLeadershipState
) -> None:
    kafka_zk.create("/config/topics/test", b"{}", makepath=True)
    with pytest.raises(MigrationClientError, match=r"Create /config/topics/test: NODEEXISTS"):
        create_test_topic(client, state)


def test_update_topic_then_add_partition(
    client: ZkMigrationClient, kafka_zk: KazooClient, state: MigrationLeadershipState
) -> None:
    # ZkMigrationClientTest.testUpdateExistingTopicWithNewAndChangedPartitions: versions 1, 2, 3.
    state, topic_id = create_test_topic(client, state)
    changed = {0: partition([1, 2, 3], adding=[3], removing=[0]), 1: partition([0, 1, 2])}
    state = client.apply(
        UpdateTopic("UpdateTopic", "", name="test", topic_id=topic_id, partitions=changed), state
    )
    assert state.migration_zk_version == 2
    expected = Topic("test", topic_id, {0: [1, 2, 3], 1: [0, 1, 2]}, {0: [3]}, {0: [0]})
    assert data(kafka_zk, "/brokers/topics/test") == encode_topic(expected)

    new = {"test": {2: partition([2, 3, 4], leader=1)}}
    state = client.apply(CreateTopicPartitions("UpdatePartition", "", partitions=new), state)
    assert state.migration_zk_version == 3
    topic = model(kafka_zk).topics["test"]
    assert topic.states[2] == PartitionState(1, 0, [2, 3, 4], KRAFT_EPOCH, zk_version=0)
    assert topic.states[2].partition_epoch == new["test"][2].partition_epoch + 1

    # A replay is accepted (all NODEEXISTS); the last multi failed, so /migration stays where it was.
    replay = client.apply(CreateTopicPartitions("UpdatePartition", "", partitions=new), state)
    assert replay.migration_zk_version == 3 == version(kafka_zk, paths.MIGRATION)


def test_update_partitions_of_a_zk_created_topic_then_delete_it(
    client: ZkMigrationClient, kafka_zk: KazooClient, state: MigrationLeadershipState
) -> None:
    # ZkMigrationClientTest.testUpdateExistingPartitions: the topic as a ZK controller wrote it.
    kafka_zk.create(
        "/brokers/topics/test", encode_topic(Topic("test", uuid.uuid4(), {0: [0, 1, 2], 1: [1, 2, 3]}))
    )
    for p, replicas in ((0, [0, 1, 2]), (1, [1, 2, 3])):
        raw = encode_partition_state(PartitionState(replicas[0], 5, replicas, 1))
        kafka_zk.create(f"/brokers/topics/test/partitions/{p}/state", raw, makepath=True)
    kafka_zk.create("/config/topics/test", b'{"version":1,"config":{}}')

    update = {"test": {0: partition([0, 1, 2], [1, 2], 1, 6), 1: partition([1, 2, 3], [3], 3, 7)}}
    state = client.apply(UpdateTopicPartitions("UpdatePartition", "", partitions=update), state)
    assert state.migration_zk_version == 1
    states = model(kafka_zk).topics["test"].states
    assert (states[0].leader, states[0].leader_epoch, states[0].isr) == (1, 6, [1, 2])
    assert (states[1].leader, states[1].leader_epoch, states[1].isr) == (3, 7, [3])
    assert states[0].zk_version == 1  # the partition epoch moved on

    state = client.apply(DeleteTopic("DeleteTopic", "", name="test"), state)
    assert state.migration_zk_version == 2
    assert kafka_zk.get_children("/brokers/topics") == []
    assert not kafka_zk.exists("/config/topics/test")
    assert notifications(kafka_zk, paths.CONFIG_CHANGES) == {}
    assert not kafka_zk.exists("/admin/delete_topics/test")


def test_update_of_a_missing_partition_state_fails(
    client: ZkMigrationClient, state: MigrationLeadershipState
) -> None:
    state, _ = create_test_topic(client, state)
    missing = {"test": {7: partition([1])}}
    with pytest.raises(
        MigrationClientError, match=r"SetData /brokers/topics/test/partitions/7/state: NONODE"
    ):
        client.apply(UpdateTopicPartitions("UpdatePartition", "", partitions=missing), state)
    assert client.apply(UpdateTopicPartitions("UpdatePartition", "", partitions={}), state) == state


def test_delete_topic_partitions_and_pending_deletions(
    client: ZkMigrationClient, kafka_zk: KazooClient, state: MigrationLeadershipState
) -> None:
    state, _ = create_test_topic(client, state)
    state = client.apply(DeletePartitionsOf("test", 1), state)
    assert state.migration_zk_version == 2
    assert kafka_zk.get_children("/brokers/topics/test/partitions") == ["0"]

    for name in ("a", "b"):
        kafka_zk.create(f"/admin/delete_topics/{name}")
    state = client.apply(
        ClearPendingTopicDeletions("DeletePendingTopicDeletion", "", names=("a", "b")), state
    )
    assert state.migration_zk_version == 3
    assert kafka_zk.get_children("/admin/delete_topics") == []
    with pytest.raises(MigrationClientError, match="Delete /admin/delete_topics/a: NONODE"):
        client.apply(ClearPendingTopicDeletions("DeletePendingTopicDeletion", "", names=("a",)), state)


def DeletePartitionsOf(topic: str, *ids: int) -> DeleteTopicPartitions:
    return DeleteTopicPartitions("DeletePartition", "", partitions={topic: ids})


# ---------------------------------------------------------------- configs (§7.2, §14.2)


def test_topic_configs_new_and_existing(
    client: ZkMigrationClient, kafka_zk: KazooClient, state: MigrationLeadershipState
) -> None:
    op = WriteConfigs(
        "UpdateConfig",
        "",
        resource_type=TOPIC_RESOURCE,
        resource_name="test",
        configs={"segment.ms": "100000"},
    )
    state = client.apply(op, state)  # testWriteNewTopicConfigs: no znode yet → Create
    assert state.migration_zk_version == 1
    assert data(kafka_zk, "/config/topics/test") == b'{"version":1,"config":{"segment.ms":"100000"}}'

    kafka_zk.set(
        "/config/topics/test", b'{"version":1,"config":{"flush.ms":"60000","retention.ms":"300000"}}'
    )
    state = client.apply(op, state)  # testWriteExistingTopicConfigs: only the new key remains
    assert state.migration_zk_version == 2
    assert model(kafka_zk).topic_configs["test"].config == {"segment.ms": "100000"}
    assert notifications(kafka_zk, paths.CONFIG_CHANGES) == {
        "config_change_0000000000": b'{"version":2,"entity_path":"topics/test"}',
        "config_change_0000000001": b'{"version":2,"entity_path":"topics/test"}',
    }


def test_broker_configs_write_delete_and_notifications(
    client: ZkMigrationClient, kafka_zk: KazooClient, state: MigrationLeadershipState
) -> None:
    kafka_zk.delete("/config/brokers")  # writeConfigs re-creates /config/<type> when it is missing
    configs = {"default.replication.factor": "2", "log.retention.ms": "43200000"}
    state = client.apply(
        WriteConfigs(
            "UpdateBrokerConfig", "", resource_type=BROKER_RESOURCE, resource_name="1", configs=configs
        ),
        state,
    )
    assert state.migration_zk_version == 1
    path = "/config/brokers/1"
    assert data(kafka_zk, path) == encode_config_map(path, configs, java8=False)
    state = client.apply(
        WriteConfigs(
            "UpdateBrokerConfig",
            "",
            resource_type=BROKER_RESOURCE,
            resource_name="",
            configs={"log.retention.ms": "86400000"},
        ),
        state,
    )
    assert (
        data(kafka_zk, "/config/brokers/<default>")
        == b'{"version":1,"config":{"log.retention.ms":"86400000"}}'
    )

    delete = DeleteConfigs("DeleteBrokerConfig", "", resource_type=BROKER_RESOURCE, resource_name="1")
    state = client.apply(delete, state)
    assert state.migration_zk_version == 3
    assert not kafka_zk.exists(path)
    assert client.apply(delete, state) == state  # NONODE: nothing to do, no notification
    assert notifications(kafka_zk, paths.CONFIG_CHANGES) == {
        "config_change_0000000000": b'{"version":2,"entity_path":"brokers/1"}',
        "config_change_0000000001": b'{"version":2,"entity_path":"brokers/<default>"}',
        "config_change_0000000002": b'{"version":2,"entity_path":"brokers/1"}',
    }
    assert set(model(kafka_zk).broker_configs) == {"<default>"}


def test_configs_of_other_resource_types_are_not_written(
    client: ZkMigrationClient, kafka_zk: KazooClient, state: MigrationLeadershipState
) -> None:
    before = snapshot(kafka_zk)
    client_metrics = 16
    op = WriteConfigs("UpdateConfig", "", resource_type=client_metrics, resource_name="m", configs={"a": "b"})
    assert client.apply(op, state) == state
    assert (
        client.apply(
            DeleteConfigs("DeleteConfig", "", resource_type=client_metrics, resource_name="m"), state
        )
        == state
    )
    assert snapshot(kafka_zk) == before


def test_password_encoder_sees_every_config(kafka_zk: KazooClient, state: MigrationLeadershipState) -> None:
    client = ZkMigrationClient(
        kafka_zk, password_encoder=lambda k, v: f"enc({v})" if k.endswith("password") else v
    )
    configs = {"ssl.keystore.password": "secret", "default.replication.factor": "1"}
    client.apply(
        WriteConfigs(
            "UpdateBrokerConfig", "", resource_type=BROKER_RESOURCE, resource_name="1", configs=configs
        ),
        state,
    )
    assert model(kafka_zk).broker_configs["1"].config == {
        "ssl.keystore.password": "enc(secret)",
        "default.replication.factor": "1",
    }


# ---------------------------------------------------------------- client quotas and SCRAM (§7.2, §14.2)


def quotas(
    entity: tuple[tuple[str, str | None], ...],
    values: dict[str, float],
    scram: dict[int, ScramCredential] | None = None,
) -> WriteClientQuotas:
    return WriteClientQuotas("UpdateClientQuota", "", entity=entity, quotas=values, scram=scram or {})


def test_existing_user_quotas_are_overwritten(
    client: ZkMigrationClient, kafka_zk: KazooClient, state: MigrationLeadershipState
) -> None:
    # ZkConfigMigrationClientTest.testWriteExistingClientQuotas: versions 1..5, ZK equals each write.
    kafka_zk.create("/config/users/user1", b'{"version":1,"config":{"producer_byte_rate":"100000"}}')
    steps = [
        ((("user", "user1"),), {"producer_byte_rate": 20000.0}, "users/user1"),
        ((("user", "user1"),), {"producer_byte_rate": 10000.0}, "users/user1"),
        ((("user", "user1"),), {}, "users/user1"),
        ((("user", "user1"),), {"consumer_byte_rate": 100.0}, "users/user1"),
        ((("user", None),), {"consumer_byte_rate": 200.0}, "users/<default>"),
    ]
    for expected_version, (entity, values, entity_path) in enumerate(steps, start=1):
        state = client.apply(quotas(entity, values), state)
        assert state.migration_zk_version == expected_version
        assert model(kafka_zk).client_quotas[entity_path].quotas == values
    assert data(kafka_zk, "/config/users/user1") == b'{"version":1,"config":{"consumer_byte_rate":"100"}}'


def test_new_quota_entities_match_kafkas_dual_write(
    client: ZkMigrationClient, kafka_zk: KazooClient, state: MigrationLeadershipState
) -> None:
    # The ZooKeeper contents ZkMigrationIntegrationTest.testDualWrite checks after KRaft wrote them.
    writes = [
        ((("user", "user@1"),), {"consumer_byte_rate": 1000.0}),
        (
            (("client-id", "clientA"), ("user", "user@1")),
            {"consumer_byte_rate": 800.0, "producer_byte_rate": 100.0},
        ),
        ((("user", None),), {"consumer_byte_rate": 900.0, "producer_byte_rate": 100.0}),
        ((("client-id", None),), {"consumer_byte_rate": 900.0}),
        ((("ip", "8.8.8.8"),), {"connection_creation_rate": 10.0}),
        ((("user", "user/1@prod"),), {"request_percentage": 50.0}),
    ]
    for entity, values in writes:
        state = client.apply(quotas(entity, values), state)
    assert state.migration_zk_version == len(writes)
    assert data(kafka_zk, "/config/users/user%401") == b'{"version":1,"config":{"consumer_byte_rate":"1000"}}'
    two = {"consumer_byte_rate": "800", "producer_byte_rate": "100"}
    path = "/config/users/user%401/clients/clientA"
    assert data(kafka_zk, path) == encode_config_map(path, two, java8=False)
    assert (
        data(kafka_zk, path)
        == b'{"version":1,"config":{"producer_byte_rate":"100","consumer_byte_rate":"800"}}'
    )
    path = "/config/users/<default>"
    assert data(kafka_zk, path) == encode_config_map(
        path, {**two, "consumer_byte_rate": "900"}, java8=False
    )
    assert (
        data(kafka_zk, "/config/clients/<default>") == b'{"version":1,"config":{"consumer_byte_rate":"900"}}'
    )
    assert (
        data(kafka_zk, "/config/ips/8.8.8.8") == b'{"version":1,"config":{"connection_creation_rate":"10"}}'
    )
    assert (
        data(kafka_zk, "/config/users/user%2F1%40prod")
        == b'{"version":1,"config":{"request_percentage":"50.0"}}'
    )
    assert data(kafka_zk, "/config/users/user%401/clients") is None  # created by createRecursive
    entity_paths = [
        decode_config_change("", raw).entity_path
        for raw in notifications(kafka_zk, paths.CONFIG_CHANGES).values()
    ]
    assert entity_paths == [
        "users/user%401",
        "users/user%401/clients/clientA",
        "users/<default>",
        "clients/<default>",
        "ips/8.8.8.8",
        "users/user%2F1%40prod",
    ]
    read = model(kafka_zk).client_quotas
    assert read["users/user%401/clients/clientA"].entity == {"user": "user@1", "client-id": "clientA"}
    assert read["users/user%2F1%40prod"].entity == {"user": "user/1@prod"}


def test_scram_credentials_are_stored_with_quotas(
    client: ZkMigrationClient, kafka_zk: KazooClient, state: MigrationLeadershipState
) -> None:
    credential = ScramCredential(
        salt=base64.b64decode("MXJicGtkdGcwZm83aGhhYTlmc3NqYjl2azE="),
        stored_key=base64.b64decode("7VkSPRPlbIHTfTYMtCm/FrMhmk7hxcJVyFoZ9cATT4I="),
        server_key=base64.b64decode("Hh1VMRx3VQgte1aXZrbVWQw/NviNAixrN7oO8AOAQ2A="),
        iterations=8192,
    )
    state = client.apply(
        quotas((("user", "alice"),), {"producer_byte_rate": 1048576.0}, {1: credential}), state
    )
    assert data(kafka_zk, "/config/users/alice") == (  # zk-layout.md §4.7's example
        b'{"version":1,"config":{"SCRAM-SHA-256":"salt=MXJicGtkdGcwZm83aGhhYTlmc3NqYjl2azE=,'
        b"stored_key=7VkSPRPlbIHTfTYMtCm/FrMhmk7hxcJVyFoZ9cATT4I=,"
        b'server_key=Hh1VMRx3VQgte1aXZrbVWQw/NviNAixrN7oO8AOAQ2A=,iterations=8192","producer_byte_rate":"1048576"}}'
    )
    read = model(kafka_zk).client_quotas["users/alice"]
    assert read.scram["SCRAM-SHA-256"].iterations == 8192
    # A user whose credentials and quotas are all gone keeps an empty config, never a deleted znode.
    client.apply(quotas((("user", "alice"),), {}), state)
    assert data(kafka_zk, "/config/users/alice") == b'{"version":1,"config":{}}'


def test_bad_quotas_are_refused_before_writing(
    client: ZkMigrationClient, kafka_zk: KazooClient, state: MigrationLeadershipState
) -> None:
    before = snapshot(kafka_zk)
    with pytest.raises(MigrationClientError, match="invalid configuration key connection_creation_rate"):
        client.apply(quotas((("user", "u"),), {"connection_creation_rate": 1.0}), state)
    with pytest.raises(InvalidRequestError, match="producer_byte_rate must be a whole number"):
        client.apply(quotas((("user", "u"),), {"producer_byte_rate": 1.5}), state)
    with pytest.raises(InvalidRequestError, match="empty name"):
        client.apply(quotas((("user", ""),), {}), state)
    assert snapshot(kafka_zk) == before


def test_a_full_sync_of_a_migrated_cluster_writes_back_what_zookeeper_holds(zk_client: KazooClient) -> None:
    """Kafka's full sync rewrites every quota entity, SCRAM user and token; what we write reads back equal,
    so every restart's reconciliation plans them as unchanged rewrites (float text, names, SCRAM, tokens)."""
    load_into_zookeeper(generate(ClusterSpec(topics=2, partitions_per_topic=1)), zk_client)
    image = replay_records(translate(model(zk_client)).records())
    client = ZkMigrationClient(zk_client, clock=lambda: NOW_MS)
    state = client.get_or_create_migration_state(
        MigrationLeadershipState(3000, KRAFT_EPOCH, 100, 0, NOW_MS).with_zk_controller(
            1, version(zk_client, paths.CONTROLLER_EPOCH)
        )
    )
    for _start in range(2):
        ops = plan_reconciliation(image, model(zk_client))
        assert len(ops) == 19 and [op.description for op in ops if not op.unchanged] == []
        state = client.apply_all(ops, state, final_state=state)
    assert version(zk_client, "/config/users/user-00") == 2  # written twice: Kafka's rewrite is kept


# ---------------------------------------------------------------- producer ids, ACLs, tokens


def test_producer_id_block(
    client: ZkMigrationClient, kafka_zk: KazooClient, state: MigrationLeadershipState
) -> None:
    state = client.apply(WriteProducerId("UpdateProducerId", "", next_producer_id=6000), state)
    assert state.migration_zk_version == 1
    assert data(kafka_zk, paths.LATEST_PRODUCER_ID_BLOCK) == (
        b'{"version":1,"broker":-1,"block_start":"6000","block_end":"6999"}'
    )
    block = model(kafka_zk).producer_id_block
    assert block is not None
    assert block.next_producer_id == 7000  # a reverted ZK controller hands out 7000 next


def acl(pattern: ResourcePatternKey, principal: str, operation: int, host: str = "*") -> AclBinding:
    return AclBinding(
        pattern.resource_type, pattern.name, pattern.pattern_type, principal, host, operation, 3
    )


def test_literal_and_prefixed_acls(
    client: ZkMigrationClient, kafka_zk: KazooClient, state: MigrationLeadershipState
) -> None:
    orders = ResourcePatternKey(2, "orders", 3)
    bar = ResourcePatternKey(2, "bar-", 4)
    write = WriteResourceAcls(
        "UpdateAcl",
        "",
        pattern=orders,
        acls=(acl(orders, "User:alice", 3), acl(orders, "User:alice", 4, "192.168.0.1")),
    )
    # No AclAuthorizer ever ran here: the write creates the stores as its start-up would (createAclPaths).
    assert not kafka_zk.exists("/kafka-acl")
    state = client.apply(write, state)
    assert state.migration_zk_version == 1
    for store in ("/kafka-acl", "/kafka-acl-extended/prefixed"):
        assert sorted(kafka_zk.get_children(store)) == [
            "Cluster", "DelegationToken", "Group", "Topic", "TransactionalId", "User"
        ]  # fmt: skip
    assert kafka_zk.get("/kafka-acl/Group")[0] is None  # containers carry null data, as createRecursive's
    expected = AclResource(
        _pattern(orders),
        [
            AclEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW),
            AclEntry("User:alice", "192.168.0.1", AclOperation.WRITE, AclPermissionType.ALLOW),
        ],
    )
    assert data(kafka_zk, "/kafka-acl/Topic/orders") == encode_acls(expected)
    assert model(kafka_zk).acls[_pattern(orders)].acls == expected.acls
    state = client.apply(
        WriteResourceAcls("UpdateAcl", "", pattern=bar, acls=(acl(bar, "User:*", 3),) * 2), state
    )
    once = AclResource(_pattern(bar), [AclEntry("User:*", "*", AclOperation.READ, AclPermissionType.ALLOW)])
    assert data(kafka_zk, "/kafka-acl-extended/prefixed/Topic/bar-") == encode_acls(once)  # a set
    state = client.apply(
        WriteResourceAcls("UpdateAcl", "", pattern=orders, acls=(acl(orders, "User:bob", 2),)), state
    )
    assert [a.principal for a in model(kafka_zk).acls[_pattern(orders)].acls] == ["User:bob"]
    state = client.apply(DeleteResourceAcls("DeleteAcl", "", pattern=orders), state)
    assert not kafka_zk.exists("/kafka-acl/Topic/orders")
    assert client.apply(DeleteResourceAcls("DeleteAcl", "", pattern=orders), state) == state  # NONODE: fine
    assert state.migration_zk_version == 4

    assert list(notifications(kafka_zk, "/kafka-acl-changes").values()) == [b"TOPIC:orders"] * 4
    assert notifications(kafka_zk, "/kafka-acl-extended-changes") == {
        "acl_changes_0000000000": b'{"version":1,"resourceType":"TOPIC","name":"bar-","patternType":"PREFIXED"}'
    }


def _pattern(key: ResourcePatternKey) -> ResourcePattern:
    return ResourcePattern(ResourceType(key.resource_type), key.name, PatternType(key.pattern_type))


TOKEN = DelegationToken(
    token_id="Xkq7bZ2sS3qVwP0oOQ7zVw",
    owner="User:alice",
    requester="User:alice",
    renewers=["User:bob"],
    issue_timestamp=1718000000000,
    max_timestamp=1718604800000,
    expiration_timestamp=1718086400000,
)


def test_delegation_tokens(
    client: ZkMigrationClient, kafka_zk: KazooClient, state: MigrationLeadershipState
) -> None:
    # Token authentication was never enabled here: the write creates the store (createDelegationTokenPaths).
    assert not kafka_zk.exists(paths.DELEGATION_TOKEN)
    path = "/delegation_token/tokens/Xkq7bZ2sS3qVwP0oOQ7zVw"
    state = client.apply(WriteDelegationToken("UpdateDelegationToken", "", token=TOKEN), state)
    assert kafka_zk.exists(paths.DELEGATION_TOKEN_CHANGES) is not None
    expected = ZkDelegationToken(
        "Xkq7bZ2sS3qVwP0oOQ7zVw",
        "User:alice",
        "User:alice",
        ["User:bob"],
        1718000000000,
        1718604800000,
        1718086400000,
    )
    assert data(kafka_zk, path) == encode_delegation_token(expected)
    assert b'"owner":"User%3Aalice"' in (data(kafka_zk, path) or b"")  # principals sanitised inside the JSON
    assert model(kafka_zk).delegation_tokens[TOKEN.token_id] == expected
    renewed = DelegationToken(
        TOKEN.token_id,
        TOKEN.owner,
        TOKEN.requester,
        TOKEN.renewers,
        TOKEN.issue_timestamp,
        TOKEN.max_timestamp,
        1718172800000,
    )
    state = client.apply(WriteDelegationToken("UpdateDelegationToken", "", token=renewed), state)
    assert model(kafka_zk).delegation_tokens[TOKEN.token_id].expiry_timestamp == 1718172800000
    state = client.apply(DeleteDelegationToken("DeleteDelegationToken", "", token_id=TOKEN.token_id), state)
    assert not kafka_zk.exists(path)
    assert (
        client.apply(DeleteDelegationToken("DeleteDelegationToken", "", token_id=TOKEN.token_id), state)
        == state
    )
    assert state.migration_zk_version == 3
    assert kafka_zk.get_children(paths.DELEGATION_TOKEN_CHANGES) == []  # Kafka sends no token notification


# ---------------------------------------------------------------- fencing between controllers


def every_operation(topic_id: uuid.UUID) -> list[ZkOperation]:
    """One operation of each kind, each of which would succeed against `fencing_setup`'s tree."""
    orders = ResourcePatternKey(2, "orders", 3)
    return [
        CreateTopic("CreateTopic", "", name="t2", topic_id=uuid.uuid4(), partitions={0: partition([1])}),
        UpdateTopic("UpdateTopic", "", name="test", topic_id=topic_id, partitions={0: partition([3, 2, 1])}),
        DeleteTopic("DeleteTopic", "", name="test"),
        ClearPendingTopicDeletions("DeletePendingTopicDeletion", "", names=("gone",)),
        CreateTopicPartitions("UpdatePartition", "", partitions={"test": {2: partition([1])}}),
        UpdateTopicPartitions(
            "UpdatePartition", "", partitions={"test": {0: partition([0, 1, 2], [0], 0, 9)}}
        ),
        DeletePartitionsOf("test", 1),
        WriteConfigs(
            "UpdateConfig", "", resource_type=TOPIC_RESOURCE, resource_name="test", configs={"a": "1"}
        ),
        WriteConfigs(
            "UpdateConfig", "", resource_type=BROKER_RESOURCE, resource_name="7", configs={"a": "1"}
        ),
        DeleteConfigs("DeleteConfig", "", resource_type=TOPIC_RESOURCE, resource_name="test"),
        quotas((("user", "alice"),), {"producer_byte_rate": 1.0}),
        WriteProducerId("UpdateProducerId", "", next_producer_id=5000),
        WriteResourceAcls("UpdateAcl", "", pattern=orders, acls=(acl(orders, "User:x", 3),)),
        DeleteResourceAcls("DeleteAcl", "", pattern=orders),
        WriteDelegationToken("UpdateDelegationToken", "", token=TOKEN),
        DeleteDelegationToken("DeleteDelegationToken", "", token_id=TOKEN.token_id),
    ]


def fencing_setup(
    client: ZkMigrationClient, kafka_zk: KazooClient, state: MigrationLeadershipState
) -> tuple[MigrationLeadershipState, uuid.UUID]:
    """Controller 3000 claims leadership and writes a topic, an ACL and a token."""
    state = client.claim_controller_leadership(state)
    state, topic_id = create_test_topic(client, state)
    kafka_zk.ensure_path("/kafka-acl/Topic")
    kafka_zk.ensure_path("/kafka-acl-changes")
    kafka_zk.ensure_path(paths.DELEGATION_TOKENS)
    kafka_zk.create("/admin/delete_topics/gone")
    orders = ResourcePatternKey(2, "orders", 3)
    state = client.apply(
        WriteResourceAcls("UpdateAcl", "", pattern=orders, acls=(acl(orders, "User:a", 3),)), state
    )
    state = client.apply(WriteDelegationToken("UpdateDelegationToken", "", token=TOKEN), state)
    return state, topic_id


def assert_every_write_refused(
    client: ZkMigrationClient,
    kafka_zk: KazooClient,
    state: MigrationLeadershipState,
    topic_id: uuid.UUID,
    error: type[Exception],
    message: str,
) -> None:
    before = snapshot(kafka_zk)
    for op in every_operation(topic_id):
        with pytest.raises(error, match=message):
            client.apply(op, state)
        assert snapshot(kafka_zk) == before, f"{type(op).__name__} changed ZooKeeper although fenced"


def test_new_leader_fences_the_old_one(
    client: ZkMigrationClient, kafka_zk: KazooClient, second_zk: KazooClient, state: MigrationLeadershipState
) -> None:
    old, topic_id = fencing_setup(client, kafka_zk, state)
    new_client = ZkMigrationClient(second_zk)
    new = new_client.get_or_create_migration_state()
    new = new_client.claim_controller_leadership(new, 3001, KRAFT_EPOCH + 1)
    new = new_client.set_migration_state(new, expected_version=-1)  # learn /migration despite the old leader
    assert_every_write_refused(
        client, kafka_zk, old, topic_id, ControllerMovedError,
        r"Controller epoch zkVersion check fails\. Expected zkVersion = 1 for /controller_epoch, found version 2",
    )  # fmt: skip
    # The new leader writes fine.
    new = new_client.apply(WriteProducerId("UpdateProducerId", "", next_producer_id=5000), new)
    assert new.migration_zk_version == version(kafka_zk, paths.MIGRATION)


def test_another_kraft_controller_writing_migration_fences_us(
    client: ZkMigrationClient, kafka_zk: KazooClient, second_zk: KazooClient, state: MigrationLeadershipState
) -> None:
    # ZkMigrationFailoverTest's race: the other controller updates /migration before it claims /controller.
    ours, topic_id = fencing_setup(client, kafka_zk, state)
    theirs = ZkMigrationClient(second_zk).set_migration_state(
        EMPTY_STATE.with_new_kraft_controller(3001, 43), -1
    )
    assert_every_write_refused(
        client, kafka_zk, ours, topic_id, FencedError,
        rf"/migration expected version {ours.migration_zk_version}, found version "
        rf"{theirs.migration_zk_version}: another KRaft controller is making writes to ZooKeeper",
    )  # fmt: skip


def test_fenced_errors_name_the_request(
    client: ZkMigrationClient, kafka_zk: KazooClient, state: MigrationLeadershipState
) -> None:
    state = client.claim_controller_leadership(state)
    assert register_zk_controller(kafka_zk, 1) is None
    kafka_zk.set(paths.CONTROLLER_EPOCH, b"9")
    with pytest.raises(ControllerMovedError, match="Create /x was not applied"):
        client.fenced_write([CreateRequest("/x")], state)


def test_everything_written_reencodes_to_the_same_bytes(
    client: ZkMigrationClient, kafka_zk: KazooClient, state: MigrationLeadershipState
) -> None:
    """Parse what one operation of each writing kind left, re-encode the model: every znode's bytes match."""
    for store in ("/kafka-acl/Topic", "/kafka-acl-extended/prefixed/Group", paths.DELEGATION_TOKENS):
        kafka_zk.ensure_path(store)
    state = client.claim_controller_leadership(state)
    state, topic_id = create_test_topic(client, state)
    scram = ScramCredential(b"salt", b"stored", b"server", 4096)
    group = ResourcePatternKey(3, "app-", 4)
    cluster = ResourcePatternKey(4, "kafka-cluster", 3)
    ops: list[ZkOperation] = [
        CreateTopic(
            "CreateTopic",
            "",
            name="many",
            topic_id=uuid.uuid4(),
            partitions={p: partition([p % 3, 5]) for p in range(40)},
        ),
        UpdateTopic(
            "UpdateTopic",
            "",
            name="test",
            topic_id=topic_id,
            partitions={0: partition([1, 2], adding=[2]), 1: partition([2, 3], removing=[4])},
        ),
        CreateTopicPartitions("UpdatePartition", "", partitions={"test": {2: partition([3], recovery=1)}}),
        UpdateTopicPartitions("UpdatePartition", "", partitions={"test": {0: partition([1, 2], [1], 1, 4)}}),
        WriteConfigs(
            "UpdateConfig",
            "",
            resource_type=TOPIC_RESOURCE,
            resource_name="test",
            configs={f"k{i}": f"v{i}" for i in range(12)},
        ),
        WriteConfigs(
            "UpdateConfig",
            "",
            resource_type=BROKER_RESOURCE,
            resource_name="",
            configs={"log.retention.ms": "1", "num.io.threads": "8"},
        ),
        quotas(
            (("user", "alice"),),
            {"producer_byte_rate": 1e6, "request_percentage": 12.5},
            {1: scram, 2: scram},
        ),
        quotas((("client-id", "app 1"), ("user", None)), {"controller_mutation_rate": 3.0}),
        quotas((("client-id", "c~1"),), {"consumer_byte_rate": 7.0}),
        quotas((("ip", "::1"),), {"connection_creation_rate": 2.0}),
        WriteProducerId("UpdateProducerId", "", next_producer_id=123456),
        WriteResourceAcls(
            "UpdateAcl",
            "",
            pattern=group,
            acls=(acl(group, "User:a", 3), acl(group, "User:b", 8, "10.0.0.1")),
        ),
        WriteResourceAcls("UpdateAcl", "", pattern=cluster, acls=(acl(cluster, "User:admin", 2),)),
        WriteDelegationToken("UpdateDelegationToken", "", token=TOKEN),
    ]
    for op in ops:
        state = client.apply(op, state)
    assert state.migration_zk_version == len(ops) + 1 == version(kafka_zk, paths.MIGRATION)

    tree = read_tree(kafka_zk, acls=False)
    written = from_tree(tree)
    assert set(written.client_quotas) == {
        "users/alice",
        "users/<default>/clients/app%201",
        "clients/c%7E1",
        "ips/%3A%3A1",
    }
    assert len(written.topics["many"].states) == 40
    assert written.topics["test"].adding_replicas == {0: [2]}
    assert written.broker_configs["<default>"].config == {"log.retention.ms": "1", "num.io.threads": "8"}
    reencoded = to_znodes(written, java8=False)
    for path, node in tree.nodes.items():
        if path != "/":
            assert reencoded.get(path, b"<missing>") == node.data, path


# ---------------------------------------------------------------- lost connections


@pytest.fixture
def private_zk(tmp_path: Path) -> Iterator[EmbeddedZooKeeper]:
    """A server of this test's own, so it can be stopped without disturbing the others."""
    server = EmbeddedZooKeeper(tmp_path / "zk")
    server.start()
    yield server
    server.close()


def test_writes_survive_a_server_restart_and_give_up_after_the_retry_timeout(
    private_zk: EmbeddedZooKeeper,
) -> None:
    session = KazooClient(hosts=private_zk.connect_string, timeout=30.0)
    session.start(timeout=15)
    try:
        session.create(paths.CONTROLLER_EPOCH, b"1")
        client = ZkMigrationClient(session, retry_timeout_s=60.0)
        state = client.claim_controller_leadership(client.get_or_create_migration_state(), 3000, 1)
        private_zk.stop()
        restarter = threading.Timer(0.5, private_zk.start)
        restarter.start()
        try:
            state = client.apply(WriteProducerId("UpdateProducerId", "", next_producer_id=1000), state)
        finally:
            restarter.join()
        assert state.migration_zk_version == 1 == version(session, paths.MIGRATION)
        assert model(session).producer_id_block == ProducerIdBlock(-1, 1000, 1999)

        private_zk.stop()
        impatient = ZkMigrationClient(session, retry_timeout_s=1.0)
        with pytest.raises(MigrationClientError, match=r"(did not come back|no reply from ZooKeeper) within 1 s"):
            impatient.apply(WriteProducerId("UpdateProducerId", "", next_producer_id=2000), state)
    finally:
        session.stop()
        session.close()
