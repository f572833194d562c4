"""bridge.zk.foreign_writes: changes legacy tools make in ZooKeeper during dual-write, reported, imported or reverted.

The pure part (classify / records_to_import / revert_operations) is checked on models; the watcher runs
against a real ZooKeeper seeded with a small cluster's Kafka layout, and foreign writes are made with kazoo
the way `kafka-configs --zookeeper` / `kafka-acls` / scripts make them (entity znode, then notification).
"""

from __future__ import annotations

import copy
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from bridge.api import DriverState
from bridge.metrics import BridgeMetrics
from bridge.zk.foreign_writes import (
    CHANGED,
    CREATED,
    DELETED,
    ForeignWrite,
    ForeignWriteBatch,
    ForeignWriteMode,
    ForeignWriteWatcher,
    OwnWriteLog,
    classify,
    entity_path,
    image_entity_paths,
    records_to_import,
    revert_operations,
    watcher,
)
from bridge.zk.leadership import DeleteRequest, MigrationLeadershipState, SetDataRequest, ZkResult
from bridge.zk.migration_client import ZkMigrationClient
from bridge.zk.operations import DeleteTopic, UpdateTopic, WriteConfigs
from migrate.kraft import metadata_version as mvs
from migrate.kraft import records as rec
from migrate.kraft.image import MetadataImage
from migrate.kraft.replay import replay_records
from migrate.translate import translate
from migrate.zk import paths
from migrate.zk.cluster import from_tree, to_tree
from migrate.zk.embedded import EmbeddedZooKeeper
from migrate.zk.live import read_tree
from migrate.zk.load import load_tree
from migrate.zk.model import (
    AclEntry,
    AclOperation,
    AclPermissionType,
    AclResource,
    ClientQuotaConfig,
    ConfigChangeNotification,
    EntityConfig,
    PartitionState,
    PatternType,
    ProducerIdBlock,
    ResourcePattern,
    ResourceType,
    Topic,
    ZkClusterModel,
)
from migrate.zk.protocol import NONODE, OK
from migrate.zk.znodes.acls import encode_acls
from migrate.zk.znodes.configs import encode_client_quota_config, encode_config_change, encode_entity_config
from migrate.zk.znodes.singletons import encode_producer_id_block
from migrate.zk.znodes.topics import encode_topic
from tests.support.bridge import eventually

FOO_ID = uuid.UUID("6c1f7b0e-3c9a-4d55-9f0e-2a1b3c4d5e6f")
FOO_ACL = ResourcePattern(ResourceType.TOPIC, "foo", PatternType.LITERAL)


def cluster() -> ZkClusterModel:
    """A small ZooKeeper-mode cluster: one topic with a config, broker configs, a quota, an ACL, producer ids."""
    states = {p: PartitionState(leader=1, leader_epoch=3, isr=[1, 2], controller_epoch=5) for p in (0, 1)}
    model = ZkClusterModel(cluster_id="cluster-1")
    model.topics["foo"] = Topic("foo", FOO_ID, {0: [1, 2], 1: [2, 1]}, states=states)
    model.topic_configs["foo"] = EntityConfig("topics", "foo", {"retention.ms": "1000"})
    model.broker_configs["1"] = EntityConfig("brokers", "1", {"log.cleaner.threads": "2"})
    model.client_quotas["users/alice"] = ClientQuotaConfig(
        "users/alice", quotas={"producer_byte_rate": 1024.0}
    )
    model.acls[FOO_ACL] = AclResource(
        FOO_ACL, [AclEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)]
    )
    model.producer_id_block = ProducerIdBlock(broker_id=1, block_start=0, block_end=999)
    return model


def image_of(model: ZkClusterModel) -> MetadataImage:
    """The image Kafka's migration makes of `model`."""
    head = [
        (rec.FeatureLevelRecord(name=mvs.FEATURE_NAME, feature_level=mvs.LATEST_PRODUCTION.feature_level), 0),
        (rec.ZkMigrationStateRecord(zk_migration_state=1), 0),
    ]
    return replay_records(head + translate(model).records())


def apply(image: MetadataImage, records: list[Any]) -> MetadataImage:
    return replay_records(records, image=copy.deepcopy(image))


def zk_model(client: KazooClient) -> ZkClusterModel:
    return from_tree(read_tree(client, acls=False))


def set_topic_config(client: KazooClient, topic: str, config: dict[str, str]) -> None:
    """What `kafka-configs --zookeeper --alter --entity-type topics` does: entity znode, then notification."""
    client.set(
        paths.config_path(f"topics/{topic}"),
        encode_entity_config(EntityConfig("topics", topic, config)),
    )
    client.create(
        f"{paths.CONFIG_CHANGES}/{paths.CONFIG_CHANGE_PREFIX}",
        encode_config_change(ConfigChangeNotification(f"topics/{topic}")),
        sequence=True,
        makepath=True,
    )


# ---------------------------------------------------------------------------------------------- pure part


def test_entity_paths_group_partitions_under_their_topic_and_skip_notifications() -> None:
    assert entity_path("/brokers/topics/foo/partitions/0/state") == "/brokers/topics/foo"
    assert entity_path("/brokers/topics/foo") == "/brokers/topics/foo"
    assert entity_path("/config/users/alice/clients/app") == "/config/users/alice/clients/app"
    assert entity_path("/config/users/alice/clients") is None
    assert entity_path("/config/changes/config_change_0000000001") is None
    assert entity_path("/kafka-acl-extended/prefixed/Group/g-") == "/kafka-acl-extended/prefixed/Group/g-"
    assert entity_path("/kafka-acl-changes/acl_changes_0000000001") is None
    assert entity_path("/delegation_token/token_changes/token_change_0000000001") is None
    assert entity_path("/latest_producer_id_block") == "/latest_producer_id_block"
    assert entity_path("/brokers/ids/1") is None


def test_a_migrated_cluster_has_no_foreign_writes() -> None:
    model = cluster()
    image = image_of(model)
    assert classify(image, model, image_entity_paths(image)) == []
    assert image_entity_paths(image) == {
        "/brokers/topics/foo",
        "/config/topics/foo",
        "/config/brokers/1",
        "/config/users/alice",
        "/kafka-acl/Topic/foo",
        "/latest_producer_id_block",
    }


def test_classify_names_path_kind_and_what_changed() -> None:
    image = image_of(cluster())
    zk = cluster()
    zk.topic_configs["foo"].config = {"retention.ms": "2000", "cleanup.policy": "compact"}
    del zk.broker_configs["1"]
    zk.client_quotas["clients/app"] = ClientQuotaConfig("clients/app", quotas={"consumer_byte_rate": 10.0})
    zk.acls[FOO_ACL].acls.append(AclEntry("User:bob", "*", AclOperation.WRITE, AclPermissionType.ALLOW))
    zk.topics["foo"].partitions[2] = [1, 2]  # kafka-topics --alter --partitions 3 through ZooKeeper
    zk.topics["bar"] = Topic("bar", None, {0: [1]})
    zk.pending_topic_deletions.add("foo")
    # Dual-write stores [next, next + 999]: our own producer-id write is not foreign.
    zk.producer_id_block = ProducerIdBlock(broker_id=-1, block_start=1000, block_end=1999)
    changed = [
        "/brokers/topics/foo",
        "/brokers/topics/bar",
        "/config/topics/foo",
        "/config/brokers/1",
        "/config/clients/app",
        "/kafka-acl/Topic/foo",
        "/admin/delete_topics/foo",
        "/latest_producer_id_block",
    ]
    writes = {w.path: w for w in classify(image, zk, changed)}
    assert writes["/config/topics/foo"] == ForeignWrite(
        "/config/topics/foo",
        CHANGED,
        "topic config",
        "cleanup.policy: (unset) -> compact, retention.ms: 1000 -> 2000",
    )
    assert writes["/config/brokers/1"].kind == DELETED
    assert writes["/config/clients/app"].kind == CREATED
    assert writes["/kafka-acl/Topic/foo"].detail == "1 entries added, 0 removed"
    assert writes["/brokers/topics/foo"].detail == "new partitions 2"
    assert writes["/brokers/topics/bar"].kind == CREATED
    assert writes["/admin/delete_topics/foo"].entity == "topic deletion request"
    assert "/latest_producer_id_block" not in writes
    zk.producer_id_block = ProducerIdBlock(broker_id=1, block_start=5000, block_end=5999)
    assert classify(image, zk, ["/latest_producer_id_block"])[0].kind == CHANGED


def test_imported_records_make_the_image_match_zookeeper() -> None:
    image = image_of(cluster())
    zk = cluster()
    zk.topic_configs["foo"].config = {"cleanup.policy": "compact"}
    zk.broker_configs["<default>"] = EntityConfig("brokers", "<default>", {"log.retention.ms": "5"})
    zk.client_quotas["users/alice"].quotas = {"consumer_byte_rate": 2048.0}
    zk.client_quotas["users/alice/clients/app"] = ClientQuotaConfig(
        "users/alice/clients/app", quotas={"request_percentage": 50.0}
    )
    zk.acls[FOO_ACL].acls = [AclEntry("User:bob", "*", AclOperation.WRITE, AclPermissionType.ALLOW)]
    zk.producer_id_block = ProducerIdBlock(broker_id=1, block_start=5000, block_end=5999)
    zk.topics["bar"] = Topic("bar", uuid.uuid4(), {0: [1]})
    writes = classify(image, zk, image_entity_paths(image) | {
        "/config/brokers/<default>", "/config/users/alice/clients/app", "/brokers/topics/bar"
    })  # fmt: skip
    plan = records_to_import(image, zk, writes)
    kinds = sorted({type(r).__name__ for r, _v in plan.records})
    assert kinds == [
        "AccessControlEntryRecord",
        "ClientQuotaRecord",
        "ConfigRecord",
        "ProducerIdsRecord",
        "RemoveAccessControlEntryRecord",
    ]
    configs = {
        (r.resource_type, r.resource_name, r.name): r.value
        for r, _ in plan.records
        if isinstance(r, rec.ConfigRecord)
    }
    assert configs == {
        (2, "foo", "retention.ms"): None,  # a ConfigRecord with a null value deletes the key
        (2, "foo", "cleanup.policy"): "compact",
        (4, "", "log.retention.ms"): "5",
    }
    assert [(w.path, reason.split(";")[0]) for w, reason in plan.not_imported] == [
        ("/brokers/topics/bar", "topics and partitions changed in ZooKeeper are not imported")
    ]
    after = apply(image, plan.records)
    assert [w.path for w in classify(after, zk, [w.path for w in writes])] == ["/brokers/topics/bar"]
    assert after.next_producer_id == 6000


def test_revert_plans_the_images_state_for_the_changed_entities_only() -> None:
    image = image_of(cluster())
    zk = cluster()
    zk.topic_configs["foo"].config = {"retention.ms": "2000"}
    zk.topics["foo"].partitions[2] = [1, 2]
    zk.topics["bar"] = Topic("bar", None, {0: [1]})
    writes = classify(image, zk, image_entity_paths(image) | {"/brokers/topics/bar"})
    existing = {
        "/brokers/topics/foo/partitions/0",
        "/brokers/topics/foo/partitions/0/state",
        "/brokers/topics/foo/partitions/1",
        "/brokers/topics/foo/partitions/1/state",
    }
    ops = revert_operations(image, zk, writes, existing=existing)
    by_type = {type(op).__name__: op for op in ops}
    assert isinstance(by_type["WriteConfigs"], WriteConfigs)
    assert by_type["WriteConfigs"].configs == {"retention.ms": "1000"}
    assert isinstance(by_type["UpdateTopic"], UpdateTopic)
    assert sorted(by_type["UpdateTopic"].partitions) == [0, 1]
    assert isinstance(by_type["DeleteTopic"], DeleteTopic) and by_type["DeleteTopic"].name == "bar"
    # Partition 2 exists only in the foreign assignment: nothing to delete below the topic.
    assert "DeleteTopicPartitions" not in by_type
    assert {op.op_type for op in ops} >= {"UpdateTopicConfig", "UpdateTopic", "DeleteTopic"}


# ---------------------------------------------------------------------------------------------- ZooKeeper


class Driver:
    """The part of a driver the watcher talks to: the image ZooKeeper should reflect, and received batches."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self.batches: list[ForeignWriteBatch] = []
        self.received = threading.Event()

    def on_change(self, batch: ForeignWriteBatch) -> None:
        self.batches.append(batch)
        self.received.set()

    def writes(self) -> list[tuple[str, str]]:
        return [(w.path, w.kind) for b in self.batches for w in b.writes]


@pytest.fixture
def seeded(zk_client: KazooClient) -> tuple[KazooClient, ZkClusterModel]:
    model = cluster()
    load_tree(zk_client, to_tree(model))
    for container in paths.PERSISTENT_PATHS:
        zk_client.ensure_path(container)
    return zk_client, model


def start_watcher(
    client: KazooClient, driver: Driver, mode: str = "report", metrics: BridgeMetrics | None = None
) -> ForeignWriteWatcher:
    return ForeignWriteWatcher(
        client, lambda: driver.image, driver.on_change, mode=mode, metrics=metrics, settle_s=0.02
    ).start()


@pytest.fixture
def watched(
    seeded: tuple[KazooClient, ZkClusterModel],
) -> Iterator[tuple[KazooClient, Driver, ForeignWriteWatcher]]:
    client, model = seeded
    driver = Driver(image_of(model))
    metrics = BridgeMetrics(node_id=3000)
    metrics.set_state(DriverState.DUAL_WRITE)
    watcher = start_watcher(client, driver, metrics=metrics)
    yield client, driver, watcher
    watcher.stop()


def settle(watcher: ForeignWriteWatcher) -> None:
    assert watcher.wait_idle(10)


def test_kafka_configs_through_zookeeper_is_reported_with_its_path(
    watched: tuple[KazooClient, Driver, ForeignWriteWatcher], caplog: pytest.LogCaptureFixture
) -> None:
    client, driver, watcher = watched
    with caplog.at_level(logging.WARNING, logger="bridge.zk.foreign_writes"):
        set_topic_config(client, "foo", {"retention.ms": "2000"})
        assert driver.received.wait(10)
        settle(watcher)
    assert driver.writes() == [("/config/topics/foo", CHANGED)]
    assert "retention.ms: 1000 -> 2000" in driver.batches[0].writes[0].detail
    assert any("/config/topics/foo" in r.getMessage() and "report" in r.getMessage() for r in caplog.records)
    assert watcher.metrics is not None and watcher.metrics.status().foreign_zk_writes == 1
    # The watch was re-armed: the next change is seen too.
    set_topic_config(client, "foo", {"retention.ms": "1000"})  # back to the image's value: nothing foreign
    client.delete(paths.config_path("brokers/1"))
    eventually(lambda: len(driver.writes()) > 1)  # the watch event may come after the watcher went idle
    settle(watcher)
    assert driver.writes()[1:] == [("/config/brokers/1", DELETED)]


def test_new_entities_under_watched_containers_are_seen(
    watched: tuple[KazooClient, Driver, ForeignWriteWatcher],
) -> None:
    client, driver, watcher = watched
    bob = ClientQuotaConfig("users/bob", quotas={"consumer_byte_rate": 5.0})
    client.create("/config/users/bob", encode_client_quota_config(bob))
    settle(watcher)
    app = ClientQuotaConfig("users/bob/clients/app", quotas={"request_percentage": 20.0})
    client.create("/config/users/bob/clients/app", encode_client_quota_config(app), makepath=True)
    prefixed = AclResource(
        ResourcePattern(ResourceType.GROUP, "g-", PatternType.PREFIXED),
        [AclEntry("User:bob", "*", AclOperation.READ, AclPermissionType.ALLOW)],
    )
    client.create("/kafka-acl-extended/prefixed/Group/g-", encode_acls(prefixed), makepath=True)
    client.create("/admin/delete_topics/foo", b"", makepath=True)
    eventually(lambda: len(driver.writes()) >= 4)  # the watch events may come after the watcher went idle
    settle(watcher)
    assert sorted(driver.writes()) == [
        ("/admin/delete_topics/foo", CREATED),
        ("/config/users/bob", CREATED),
        ("/config/users/bob/clients/app", CREATED),
        ("/kafka-acl-extended/prefixed/Group/g-", CREATED),
    ]


def test_own_writes_are_not_reported(watched: tuple[KazooClient, Driver, ForeignWriteWatcher]) -> None:
    client, driver, watcher = watched
    with watcher.own_writes():
        driver.image = apply(
            driver.image,
            [(rec.ConfigRecord(resource_type=2, resource_name="foo", name="retention.ms", value="7"), 0)],
        )
        set_topic_config(client, "foo", {"retention.ms": "7"})
    settle(watcher)
    assert driver.batches == []
    # Without the block, a write that matches the image is not foreign either (content decides).
    set_topic_config(client, "foo", {"retention.ms": "7"})
    settle(watcher)
    assert driver.batches == []


def test_import_mode_turns_an_acl_change_into_records(
    seeded: tuple[KazooClient, ZkClusterModel],
) -> None:
    client, model = seeded
    driver = Driver(image_of(model))
    watcher = start_watcher(client, driver, mode="import")
    try:
        # kafka-acls with a ZooKeeper authorizer: rewrite the resource znode, then the change notification.
        resource = AclResource(
            FOO_ACL,
            [
                AclEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW),
                AclEntry("User:bob", "*", AclOperation.WRITE, AclPermissionType.ALLOW),
            ],
        )
        client.set("/kafka-acl/Topic/foo", encode_acls(resource))
        client.create("/kafka-acl-changes/acl_changes_", b"Topic:LITERAL:foo", sequence=True, makepath=True)
        set_topic_config(client, "foo", {"retention.ms": "1000", "min.insync.replicas": "2"})
        settle(watcher)
        batches = driver.batches
        assert {b.mode for b in batches} == {ForeignWriteMode.IMPORT}
        plan = records_to_import(
            driver.image, from_tree(read_tree(client, acls=False)), [w for b in batches for w in b.writes]
        )
        merged = [r for b in batches for r in b.import_plan(driver.image).records]
        assert [type(r).__name__ for r, _ in merged] == [type(r).__name__ for r, _ in plan.records]
        acl = next(r for r, _ in merged if isinstance(r, rec.AccessControlEntryRecord))
        assert (acl.principal, acl.operation, acl.resource_name) == (
            "User:bob",
            int(AclOperation.WRITE),
            "foo",
        )
        config = next(r for r, _ in merged if isinstance(r, rec.ConfigRecord))
        assert (config.resource_name, config.name, config.value) == ("foo", "min.insync.replicas", "2")
        # Once the driver appends them, ZooKeeper and the image agree.
        with watcher.own_writes():
            driver.image = apply(driver.image, merged)
        assert watcher.scan() is None
    finally:
        watcher.stop()


def test_revert_mode_restores_the_images_znodes(
    seeded: tuple[KazooClient, ZkClusterModel],
) -> None:
    client, model = seeded
    driver = Driver(image_of(model))
    before = zk_model(client)
    client.create(paths.CONTROLLER_EPOCH, b"1")
    migration = ZkMigrationClient(client)
    state = migration.get_or_create_migration_state(MigrationLeadershipState(3000, 7, 100, 1, 0))
    state = migration.claim_controller_leadership(state)
    watcher = start_watcher(client, driver, mode="revert")
    try:
        set_topic_config(client, "foo", {"retention.ms": "1"})
        client.set(
            "/brokers/topics/foo",
            encode_topic(Topic("foo", FOO_ID, {0: [1, 2], 1: [2, 1], 2: [1, 2]})),
        )
        # Idle is not enough: ZooKeeper may not have delivered the watch events yet.
        expected = [("/brokers/topics/foo", CHANGED), ("/config/topics/foo", CHANGED)]
        eventually(lambda: sorted(driver.writes()) == expected)
        settle(watcher)
        assert sorted(driver.writes()) == expected
        ops = [op for batch in driver.batches for op in batch.revert_operations(driver.image)]
        assert {op.op_type for op in ops} >= {"UpdateTopic", "UpdateTopicConfig"}
        with watcher.own_writes():
            for batch in driver.batches:
                for op in batch.revert_operations(driver.image):
                    state = migration.apply(op, state)
        settle(watcher)
        reported = driver.writes()
        assert sorted(reported) == [("/brokers/topics/foo", CHANGED), ("/config/topics/foo", CHANGED)]
        settle(watcher)
        assert driver.writes() == reported  # our reverting writes are not foreign
        after = zk_model(client)
        assert after.topic_configs == before.topic_configs
        assert after.topics["foo"].partitions == before.topics["foo"].partitions
        assert watcher.scan() is None
    finally:
        watcher.stop()


def test_own_write_log_keeps_the_last_landed_write_and_the_unanswered_ones() -> None:
    log = OwnWriteLog()
    path = "/config/topics/foo"
    w1, w2 = SetDataRequest(path, b"1"), SetDataRequest(path, b"2")
    log.sent(w1)
    log.sent(SetDataRequest("/config/changes/config_change_", b"n"))  # not an entity: ignored
    assert log.matches(path, b"1") and not log.knows("/config/changes/config_change_")
    log.settled(ZkResult(w1, OK))
    log.sent(w2)
    assert log.matches(path, b"1") and log.matches(path, b"2")  # landed, and on its way
    log.settled(ZkResult(w2, OK))
    assert not log.matches(path, b"1") and log.matches(path, b"2")  # overwritten by our own next write
    gone = DeleteRequest(path)
    log.sent(gone)
    log.settled(ZkResult(gone, NONODE))  # did not land: forgotten
    assert log.matches(path, b"2") and not log.matches(path, watcher.ABSENT)
    log.sent(gone)
    log.settled(ZkResult(gone, OK))
    assert log.matches(path, watcher.ABSENT) and not log.matches(path, b"2")


class CountingDriver(Driver):
    """A driver that counts judgments (each one holds the controller's appends while it runs)."""

    def __init__(self, image: MetadataImage) -> None:
        super().__init__(image)
        self.judgments = 0

    def expected(self) -> MetadataImage:
        self.judgments += 1
        return self.image


def test_own_writes_through_the_observed_client_need_no_judgment(
    seeded: tuple[KazooClient, ZkClusterModel],
) -> None:
    client, model = seeded
    driver = CountingDriver(image_of(model))
    client.create(paths.CONTROLLER_EPOCH, b"1")
    migration = ZkMigrationClient(client)
    state = migration.get_or_create_migration_state(MigrationLeadershipState(3000, 7, 100, 1, 0))
    state = migration.claim_controller_leadership(state)
    watcher = ForeignWriteWatcher(client, driver.expected, driver.on_change, settle_s=0.02).start()
    migration.observer = watcher.written
    try:
        for value in ("7", "8", "9"):
            driver.image = apply(
                driver.image,
                [
                    (
                        rec.ConfigRecord(
                            resource_type=2, resource_name="foo", name="retention.ms", value=value
                        ),
                        0,
                    )
                ],
            )
            op = WriteConfigs(
                "UpdateTopicConfig", "foo", resource_name="foo", configs={"retention.ms": value}
            )
            state = migration.apply(op, state)
            settle(watcher)
        assert driver.judgments == 0 and driver.batches == []
        # Someone else's write after ours is still judged and reported.
        set_topic_config(client, "foo", {"retention.ms": "1"})
        assert driver.received.wait(10)
        settle(watcher)
        assert driver.writes() == [("/config/topics/foo", CHANGED)]
        assert "retention.ms: 9 -> 1" in driver.batches[0].writes[0].detail
        # Our write of the image's value puts it right; the next foreign write is reported again.
        state = migration.apply(
            WriteConfigs("UpdateTopicConfig", "foo", resource_name="foo", configs={"retention.ms": "9"}),
            state,
        )
        settle(watcher)
        driver.received.clear()
        set_topic_config(client, "foo", {"retention.ms": "2"})
        assert driver.received.wait(10)
        settle(watcher)
        assert driver.writes() == [("/config/topics/foo", CHANGED)] * 2
        assert "retention.ms: 9 -> 2" in driver.batches[1].writes[0].detail
    finally:
        migration.observer = None
        watcher.stop()


def test_scan_finds_what_happened_while_nobody_watched(seeded: tuple[KazooClient, ZkClusterModel]) -> None:
    client, model = seeded
    driver = Driver(image_of(model))
    client.delete("/kafka-acl/Topic/foo")
    client.set(
        paths.LATEST_PRODUCER_ID_BLOCK, encode_producer_id_block(ProducerIdBlock(1, 5000, 5999))
    )
    watcher = start_watcher(client, driver)
    try:
        batch = watcher.scan()
        assert batch is not None
        assert [(w.path, w.kind) for w in batch.writes] == [
            ("/kafka-acl/Topic/foo", DELETED),
            ("/latest_producer_id_block", CHANGED),
        ]
        plan = batch.import_plan(driver.image)
        assert sorted(type(r).__name__ for r, _ in plan.records) == [
            "ProducerIdsRecord",
            "RemoveAccessControlEntryRecord",
        ]
    finally:
        watcher.stop()


def test_watches_are_rearmed_after_a_server_restart(tmp_path: Path) -> None:
    with EmbeddedZooKeeper(tmp_path / "zk") as server:
        session = KazooClient(hosts=server.connect_string, timeout=30.0)
        session.start(timeout=15)
        writer = KazooClient(hosts=server.connect_string, timeout=30.0)
        try:
            load_tree(session, to_tree(cluster()))
            driver = Driver(image_of(cluster()))
            watcher = start_watcher(session, driver)
            server.stop()
            server.start()
            # one reconnection attempt that meets the JVM still loading can hang for the whole 30 s session
            # timeout before kazoo tries again, so the wait outlasts that
            deadline = time.monotonic() + 90
            while not session.connected and time.monotonic() < deadline:
                time.sleep(0.05)
            assert session.connected
            settle(watcher)  # the reconnection queued a full rescan, which re-armed every watch
            assert driver.batches == []
            writer.start(timeout=15)
            set_topic_config(writer, "foo", {"retention.ms": "3"})
            assert driver.received.wait(10)
            assert driver.writes() == [("/config/topics/foo", CHANGED)]
            watcher.stop()
        finally:
            writer.stop()
            session.stop()
            session.close()
            writer.close()


def test_empty_znodes_mean_no_configs_and_garbage_is_reported_unreadable() -> None:
    base = cluster()
    base.topic_configs.clear()
    image = image_of(base)
    zk = cluster()
    del zk.topic_configs["foo"]
    zk.other_znodes["/config/topics/foo"] = b""
    zk.other_znodes["/config/brokers/1"] = b"{not json"
    del zk.broker_configs["1"]
    writes = classify(image, zk, ["/config/topics/foo", "/config/brokers/1"])
    assert writes == [ForeignWrite("/config/brokers/1", CHANGED, "broker config", "data Kafka cannot read")]
    plan = records_to_import(image, zk, writes)
    assert plan.records == []
    assert plan.not_imported == [(writes[0], "ZooKeeper holds data Kafka cannot read")]
    [op] = revert_operations(image, zk, writes)
    assert isinstance(op, WriteConfigs) and op.configs == {"log.cleaner.threads": "2"}
