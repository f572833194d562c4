"""MetadataImage replay rules (Kafka's semantics) and image.records() ordering."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from migrate.errors import CorruptDataError, UnsupportedVersionError
from migrate.kraft import metadata_version as mvs
from migrate.kraft import records as r
from migrate.kraft.image import (
    MIGRATING_DIRECTORY,
    UNASSIGNED_DIRECTORY,
    Endpoint,
    MetadataImage,
    PartitionRegistration,
)
from migrate.kraft.migration_state import ZkMigrationState, zk_migration_state_name
from migrate.kraft.replay import MetadataReplayer, replay_records

T1 = uuid.UUID("6d660bbe-4352-41e5-9d2a-186bde7d2f37")
T2 = uuid.UUID("11111111-2222-3333-4444-555555555555")
INC = uuid.UUID("aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee")
DIR_A = uuid.UUID("0fa0e4a4-0000-4000-8000-000000000001")
DIR_B = uuid.UUID("8fa0e4a4-0000-4000-8000-000000000002")


def mv_record(level: int = 21) -> tuple[Any, int]:
    return r.FeatureLevelRecord(name="metadata.version", feature_level=level), 0


def topic(name: str = "orders", topic_id: uuid.UUID = T1) -> tuple[Any, int]:
    return r.TopicRecord(name=name, topic_id=topic_id), 0


def partition(pid: int = 0, topic_id: uuid.UUID = T1, **kw: Any) -> tuple[Any, int]:
    fields: dict[str, Any] = dict(
        replicas=[1, 2, 3], isr=[1, 2, 3], leader=1, leader_epoch=5, partition_epoch=7
    )
    fields.update(kw)
    return r.PartitionRecord(partition_id=pid, topic_id=topic_id, **fields), 0


def change(pid: int = 0, topic_id: uuid.UUID = T1, **kw: Any) -> tuple[Any, int]:
    return r.PartitionChangeRecord(partition_id=pid, topic_id=topic_id, **kw), 0


def broker(bid: int = 1, epoch: int = 10, **kw: Any) -> tuple[Any, int]:
    fields: dict[str, Any] = dict(
        incarnation_id=INC,
        end_points=[
            r.RegisterBrokerRecord.BrokerEndpoint(name="PLAINTEXT", host="h", port=9092, security_protocol=0)
        ],
        features=[
            r.RegisterBrokerRecord.BrokerFeature(
                name="metadata.version", min_supported_version=1, max_supported_version=21
            )
        ],
    )
    fields.update(kw)
    return r.RegisterBrokerRecord(broker_id=bid, broker_epoch=epoch, **fields), 3


def replay(*items: tuple[Any, int]) -> MetadataImage:
    return replay_records(items)


def only_partition(image: MetadataImage, topic_id: uuid.UUID = T1, pid: int = 0) -> PartitionRegistration:
    return image.topics_by_id[topic_id].partitions[pid]


# ------------------------------------------------------------------------------------ partitions


def test_partition_record_v0_gets_migrating_directories() -> None:
    p = only_partition(replay(topic(), partition()))
    assert p.directories == [MIGRATING_DIRECTORY] * 3
    assert (p.leader, p.leader_epoch, p.partition_epoch) == (1, 5, 7)


def test_partition_change_applies_only_present_fields_and_bumps_epochs() -> None:
    image = replay(topic(), partition(), change(isr=[1, 2]))
    p = only_partition(image)
    assert p.isr == [1, 2]
    assert p.replicas == [1, 2, 3]
    assert (p.leader, p.leader_epoch, p.partition_epoch) == (1, 5, 8)

    image = replay(topic(), partition(), change(leader=2))
    p = only_partition(image)
    assert (p.leader, p.leader_epoch, p.partition_epoch) == (2, 6, 8)
    assert p.isr == [1, 2, 3]


def test_partition_change_to_same_leader_still_bumps_leader_epoch() -> None:
    # Before 3.6-IV0 the controller encodes "bump the leader epoch on ISR shrink" as Leader = current leader.
    p = only_partition(replay(topic(), partition(), change(isr=[1], leader=1)))
    assert (p.leader, p.leader_epoch, p.partition_epoch, p.isr) == (1, 6, 8, [1])


def test_partition_change_to_no_leader() -> None:
    p = only_partition(replay(topic(), partition(), change(leader=-1, isr=[])))
    assert (p.leader, p.leader_epoch) == (-1, 6)


def test_partition_change_recovery_state_and_reassignment() -> None:
    image = replay(
        topic(),
        partition(),
        change(leader_recovery_state=1),
        change(replicas=[1, 2, 3, 4], adding_replicas=[4]),
        change(replicas=[2, 3, 4], removing_replicas=[], adding_replicas=[]),
    )
    p = only_partition(image)
    assert p.leader_recovery_state == 1
    assert p.replicas == [2, 3, 4]
    assert p.adding_replicas == [] and p.removing_replicas == []
    assert p.partition_epoch == 10
    # Replica 4 was added without a directory: UNASSIGNED; 2 and 3 keep MIGRATING.
    assert p.directories == [MIGRATING_DIRECTORY, MIGRATING_DIRECTORY, UNASSIGNED_DIRECTORY]


def test_partition_change_with_directories() -> None:
    image = replay(
        topic(),
        partition(replicas=[1, 2], isr=[1, 2], directories=[DIR_A, DIR_B]),
        change(directories=[DIR_B, DIR_A]),
    )
    assert only_partition(image).directories == [DIR_B, DIR_A]
    with pytest.raises(CorruptDataError, match="directories"):
        replay(topic(), partition(replicas=[1, 2], isr=[1, 2]), change(directories=[DIR_A]))
    with pytest.raises(CorruptDataError, match="directories"):
        replay(topic(), partition(replicas=[1, 2], isr=[1, 2], directories=[DIR_A]))


def test_partition_elr_fields() -> None:
    image = replay(topic(), partition(), change(eligible_leader_replicas=[2], last_known_elr=[3]))
    p = only_partition(image)
    assert (p.elr, p.last_known_elr) == ([2], [3])
    assert only_partition(replay(topic(), partition())).elr == []


def test_partition_record_replaces_existing_partition() -> None:
    image = replay(topic(), partition(), partition(leader=3, leader_epoch=9))
    assert only_partition(image).leader == 3


def test_unknown_topic_or_partition_is_corrupt_and_names_offset() -> None:
    with pytest.raises(CorruptDataError) as info:
        replay(topic(), partition(topic_id=T2))
    assert "offset 1" in str(info.value) and str(T2) in str(info.value)
    assert "PartitionRecord" in str(info.value)
    with pytest.raises(CorruptDataError, match=r"offset 2.*unknown partition"):
        replay(topic(), partition(), change(pid=5, isr=[1]))
    with pytest.raises(CorruptDataError, match="unknown topic id"):
        replay((r.RemoveTopicRecord(topic_id=T2), 0))


def test_bad_leader_recovery_state_is_corrupt() -> None:
    with pytest.raises(CorruptDataError, match="LeaderRecoveryState"):
        replay(topic(), partition(leader_recovery_state=7))
    with pytest.raises(CorruptDataError, match="LeaderRecoveryState"):
        replay(topic(), partition(), change(leader_recovery_state=3))


# ------------------------------------------------------------------------------------ topics, configs


def test_remove_topic_removes_partitions_and_topic_configs() -> None:
    image = replay(
        topic(),
        partition(0),
        partition(1),
        topic("payments", T2),
        (r.ConfigRecord(resource_type=2, resource_name="orders", name="retention.ms", value="1000"), 0),
        (r.ConfigRecord(resource_type=2, resource_name="payments", name="retention.ms", value="2000"), 0),
        (r.ConfigRecord(resource_type=4, resource_name="", name="log.retention.ms", value="3000"), 0),
        (r.RemoveTopicRecord(topic_id=T1), 0),
    )
    assert list(image.topics_by_name) == ["payments"]
    assert list(image.topics_by_id) == [T2]
    assert image.partition_count() == 0
    assert image.configs == {(2, "payments"): {"retention.ms": "2000"}, (4, ""): {"log.retention.ms": "3000"}}


def test_topic_name_reuse_by_other_id_is_corrupt() -> None:
    with pytest.raises(CorruptDataError, match="already used"):
        replay(topic("orders", T1), topic("orders", T2))


def test_recreated_topic_after_removal() -> None:
    image = replay(topic(), partition(), (r.RemoveTopicRecord(topic_id=T1), 0), topic("orders", T2))
    assert image.topics_by_name["orders"].topic_id == T2
    assert image.topics_by_name["orders"].partitions == {}


def test_config_null_value_deletes_key_and_empty_resource() -> None:
    image = replay(
        (r.ConfigRecord(resource_type=4, resource_name="1", name="a", value="1"), 0),
        (r.ConfigRecord(resource_type=4, resource_name="1", name="b", value="2"), 0),
        (r.ConfigRecord(resource_type=4, resource_name="1", name="a", value=None), 0),
    )
    assert image.configs == {(4, "1"): {"b": "2"}}
    image = replay(
        (r.ConfigRecord(resource_type=4, resource_name="1", name="a", value="1"), 0),
        (r.ConfigRecord(resource_type=4, resource_name="1", name="a", value=None), 0),
        (r.ConfigRecord(resource_type=4, resource_name="2", name="x", value=None), 0),
    )
    assert image.configs == {}


def test_client_quota_set_and_remove() -> None:
    user_client = [
        r.ClientQuotaRecord.EntityData(entity_type="user", entity_name="alice"),
        r.ClientQuotaRecord.EntityData(entity_type="client-id", entity_name=None),
    ]
    default_ip = [r.ClientQuotaRecord.EntityData(entity_type="ip", entity_name=None)]
    image = replay(
        (r.ClientQuotaRecord(entity=user_client, key="producer_byte_rate", value=1024.0), 0),
        (r.ClientQuotaRecord(entity=user_client, key="consumer_byte_rate", value=2048.0), 0),
        (r.ClientQuotaRecord(entity=default_ip, key="connection_creation_rate", value=5.0), 0),
        (r.ClientQuotaRecord(entity=user_client, key="consumer_byte_rate", remove=True), 0),
        (r.ClientQuotaRecord(entity=default_ip, key="connection_creation_rate", remove=True), 0),
    )
    assert image.client_quotas == {(("client-id", None), ("user", "alice")): {"producer_byte_rate": 1024.0}}


# ------------------------------------------------------------------------------------ brokers


def test_register_broker_starts_fenced_and_changes_apply() -> None:
    image = replay(broker(log_dirs=[DIR_B, DIR_A]))
    b = image.cluster.brokers[1]
    assert b.fenced and not b.in_controlled_shutdown
    assert b.endpoints == [Endpoint("PLAINTEXT", "h", 9092, 0)]
    assert b.supported_features == {"metadata.version": (1, 21)}
    assert b.log_dirs == [DIR_B, DIR_A]  # Kafka's signed-long Uuid order: 0x8f... sorts first

    image = replay(
        broker(),
        (r.BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, fenced=-1), 0),
        (r.BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, in_controlled_shutdown=1), 1),
    )
    b = image.cluster.brokers[1]
    assert (b.fenced, b.in_controlled_shutdown) == (False, True)
    image = replay(broker(), (r.BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, fenced=1), 0))
    assert image.cluster.brokers[1].fenced
    image = replay(
        broker(), (r.BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, log_dirs=[DIR_A]), 2)
    )
    assert image.cluster.brokers[1].log_dirs == [DIR_A]
    image = replay(broker(), (r.BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10), 0))
    assert image.cluster.brokers[1].fenced


def test_fence_and_unfence_records() -> None:
    image = replay(broker(), (r.UnfenceBrokerRecord(id=1, epoch=10), 0))
    assert not image.cluster.brokers[1].fenced
    image = replay(
        broker(), (r.UnfenceBrokerRecord(id=1, epoch=10), 0), (r.FenceBrokerRecord(id=1, epoch=10), 0)
    )
    assert image.cluster.brokers[1].fenced


@pytest.mark.parametrize(
    "bad",
    [
        r.UnfenceBrokerRecord(id=1, epoch=9),
        r.FenceBrokerRecord(id=2, epoch=10),
        r.BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=11, fenced=-1),
        r.BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, fenced=2),
        r.BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, in_controlled_shutdown=-1),
    ],
)
def test_broker_changes_need_matching_epoch_and_known_values(bad: Any) -> None:
    with pytest.raises(CorruptDataError, match="offset 1"):
        replay(broker(), (bad, 0))


def test_unregister_broker_only_when_epoch_matches() -> None:
    replayer = MetadataReplayer()
    replayer.replay(*broker(), 0)
    replayer.replay(r.UnregisterBrokerRecord(broker_id=1, broker_epoch=9), 0, 1)
    assert 1 in replayer.image.cluster.brokers
    assert "ignored" in replayer.warnings[0] and "offset 1" in replayer.warnings[0]
    replayer.replay(r.UnregisterBrokerRecord(broker_id=1, broker_epoch=10), 0, 2)
    assert replayer.image.cluster.brokers == {}


def test_register_controller() -> None:
    record = r.RegisterControllerRecord(
        controller_id=3000,
        incarnation_id=INC,
        zk_migration_ready=True,
        end_points=[r.RegisterControllerRecord.ControllerEndpoint(name="CONTROLLER", host="c", port=9093)],
    )
    image = replay((record, 0))
    c = image.cluster.controllers[3000]
    assert c.zk_migration_ready and c.endpoints == [Endpoint("CONTROLLER", "c", 9093, 0)]


# ------------------------------------------------------------------------------------ features etc.


def test_features_and_migration_state() -> None:
    image = replay(
        mv_record(19),
        (r.FeatureLevelRecord(name="group.version", feature_level=1), 0),
        (r.FeatureLevelRecord(name="transaction.version", feature_level=2), 0),
        (r.FeatureLevelRecord(name="transaction.version", feature_level=0), 0),
        (r.ZkMigrationStateRecord(zk_migration_state=2), 0),
    )
    assert image.features.metadata_version == 19
    assert image.metadata_version is mvs.IBP_3_7_IV4
    assert image.features.finalized_versions == {"group.version": 1}
    assert image.features.zk_migration_state == 2


def test_unknown_metadata_version_level_is_refused() -> None:
    with pytest.raises(UnsupportedVersionError, match=r"offset 0.*level 99"):
        replay(mv_record(99))


def test_producer_ids_acls_scram_tokens() -> None:
    acl_id = uuid.UUID(int=12345)
    acl = r.AccessControlEntryRecord(
        id=acl_id, resource_type=2, resource_name="orders", pattern_type=3, principal="User:alice",
        host="*", operation=3, permission_type=3,
    )  # fmt: skip
    image = replay(
        (r.ProducerIdsRecord(broker_id=1, broker_epoch=-1, next_producer_id=5000), 0),
        (acl, 0),
        (r.UserScramCredentialRecord(name="alice", mechanism=1, salt=b"s", stored_key=b"k", server_key=b"v",
                                     iterations=4096), 0),
        (r.UserScramCredentialRecord(name="bob", mechanism=2, salt=b"s", stored_key=b"k", server_key=b"v",
                                     iterations=8192), 0),
        (r.RemoveUserScramCredentialRecord(name="bob", mechanism=2), 0),
        (r.DelegationTokenRecord(token_id="t1", owner="User:alice", requester="User:alice", renewers=["User:bob"],
                                 issue_timestamp=1, max_timestamp=3, expiration_timestamp=2), 0),
        (r.DelegationTokenRecord(token_id="t2", owner="User:bob", requester="User:bob"), 0),
        (r.RemoveDelegationTokenRecord(token_id="t2"), 0),
    )  # fmt: skip
    assert image.next_producer_id == 5000
    assert image.acls[acl_id].principal == "User:alice"
    assert list(image.scram) == [("alice", 1)]
    assert image.scram[("alice", 1)].iterations == 4096
    assert list(image.delegation_tokens) == ["t1"]
    assert image.delegation_tokens["t1"].renewers == ["User:bob"]
    image2 = replay((acl, 0), (r.RemoveAccessControlEntryRecord(id=acl_id), 0))
    assert image2.acls == {}
    with pytest.raises(CorruptDataError, match="unknown ACL id"):
        replay((r.RemoveAccessControlEntryRecord(id=acl_id), 0))


def test_no_op_records_advance_provenance_only() -> None:
    replayer = MetadataReplayer()
    replayer.replay(r.NoOpRecord(), 0, 41, epoch=3, timestamp_ms=777)
    assert replayer.image.is_empty()
    assert replayer.image.provenance.last_contained_offset == 41
    assert replayer.image.provenance.last_contained_epoch == 3
    assert replayer.image.provenance.last_contained_log_time_ms == 777


# ------------------------------------------------------------------------------------ transactions


def feed(replayer: MetadataReplayer, items: list[tuple[Any, int]], start: int = 0) -> None:
    for offset, (record, version) in enumerate(items, start):
        replayer.replay(record, version, offset)


BEGIN = (r.BeginTransactionRecord(name="ZK Migration"), 0)
END = (r.EndTransactionRecord(), 0)
ABORT = (r.AbortTransactionRecord(reason="Controller failover"), 0)


def test_complete_transaction_is_applied_at_end() -> None:
    replayer = MetadataReplayer()
    feed(replayer, [BEGIN, topic(), partition()])
    assert replayer.image.topics_by_id == {}
    assert replayer.in_transaction and replayer.pending_transaction_offset == 0
    assert replayer.pending_transaction_records == 2
    assert replayer.pending_transaction_name == "ZK Migration"
    feed(replayer, [END], start=3)
    assert replayer.image.partition_count() == 1
    assert not replayer.in_transaction and replayer.pending_transaction_offset is None
    assert replayer.image.provenance.last_contained_offset == 3


def test_aborted_transaction_is_dropped() -> None:
    replayer = MetadataReplayer()
    feed(replayer, [topic(), BEGIN, partition(), (r.RemoveTopicRecord(topic_id=T1), 0), ABORT, partition(1)])
    image = replayer.image
    assert list(image.topics_by_id[T1].partitions) == [1]
    assert image.provenance.last_contained_offset == 5


def test_unterminated_transaction_is_not_applied_and_reported() -> None:
    replayer = MetadataReplayer()
    feed(replayer, [mv_record(), topic(), BEGIN, topic("payments", T2), partition(0, T2)])
    assert set(replayer.image.topics_by_name) == {"orders"}
    assert replayer.pending_transaction_offset == 2
    assert replayer.image.provenance.last_contained_offset == 1


def test_transaction_errors_surface_at_the_offending_record() -> None:
    replayer = MetadataReplayer()
    feed(replayer, [BEGIN, partition(topic_id=T2)])
    with pytest.raises(CorruptDataError, match="offset 1"):
        feed(replayer, [END], start=2)


@pytest.mark.parametrize(
    ("items", "problem"),
    [
        ([BEGIN, BEGIN], "still open"),
        ([END], "without a preceding"),
        ([ABORT], "without a preceding"),
        ([BEGIN, END, END], "without a preceding"),
    ],
)
def test_transaction_misuse_is_corrupt(items: list[tuple[Any, int]], problem: str) -> None:
    with pytest.raises(CorruptDataError, match=problem):
        feed(MetadataReplayer(), items)


# ------------------------------------------------------------------------------------ records()


def build_sample_image() -> MetadataImage:
    ctrl = r.RegisterControllerRecord(controller_id=3000, incarnation_id=INC, zk_migration_ready=True)
    return replay(
        mv_record(21),
        (r.FeatureLevelRecord(name="kraft.test", feature_level=1), 0),
        (r.FeatureLevelRecord(name="group.version", feature_level=1), 0),
        (r.ZkMigrationStateRecord(zk_migration_state=1), 0),
        broker(2, 5),
        broker(1, 4, log_dirs=[DIR_A]),
        (ctrl, 0),
        topic("zeta", T1),
        partition(1, T1),
        partition(0, T1),
        topic("alpha", T2),
        partition(0, T2),
        (r.ConfigRecord(resource_type=4, resource_name="", name="b", value="2"), 0),
        (r.ConfigRecord(resource_type=2, resource_name="zeta", name="z", value="1"), 0),
        (r.ConfigRecord(resource_type=2, resource_name="zeta", name="a", value="1"), 0),
        (r.ClientQuotaRecord(entity=[r.ClientQuotaRecord.EntityData(entity_type="user", entity_name="u")],
                             key="k", value=1.0), 0),
        (r.ProducerIdsRecord(broker_id=2, broker_epoch=-1, next_producer_id=1000), 0),
        (r.AccessControlEntryRecord(id=uuid.UUID(int=7), principal="User:x", host="*"), 0),
        (r.UserScramCredentialRecord(name="u", mechanism=1, iterations=4096), 0),
        (r.DelegationTokenRecord(token_id="tok", owner="User:u", requester="User:u"), 0),
    )  # fmt: skip


def test_records_follow_kafka_snapshot_order() -> None:
    image = build_sample_image()
    out = image.records()
    kinds = [type(rec).__name__ for rec, _ in out]
    assert kinds == [
        "FeatureLevelRecord", "FeatureLevelRecord", "FeatureLevelRecord", "ZkMigrationStateRecord",
        "RegisterBrokerRecord", "RegisterBrokerRecord", "RegisterControllerRecord",
        "TopicRecord", "PartitionRecord", "TopicRecord", "PartitionRecord", "PartitionRecord",
        "ConfigRecord", "ConfigRecord", "ConfigRecord", "ClientQuotaRecord", "ProducerIdsRecord",
        "AccessControlEntryRecord", "UserScramCredentialRecord", "DelegationTokenRecord",
    ]  # fmt: skip
    records = [rec for rec, _ in out]
    assert records[0].name == "metadata.version" and records[0].feature_level == 21
    assert [records[1].name, records[2].name] == ["group.version", "kraft.test"]
    assert [records[4].broker_id, records[5].broker_id] == [1, 2]
    assert [records[7].name, records[9].name] == ["alpha", "zeta"]
    assert [records[10].partition_id, records[11].partition_id] == [0, 1]
    assert [(c.resource_type, c.resource_name, c.name) for c in records[12:15]] == [
        (2, "zeta", "a"), (2, "zeta", "z"), (4, "", "b"),
    ]  # fmt: skip
    pid = records[16]
    assert (pid.broker_id, pid.broker_epoch, pid.next_producer_id) == (-1, -1, 1000)


def test_records_use_versions_implied_by_metadata_version() -> None:
    image = build_sample_image()
    versions = {type(rec).__name__: v for rec, v in image.records("3.9")}
    assert versions["RegisterBrokerRecord"] == 3 and versions["PartitionRecord"] == 1
    assert all(v == 0 for k, v in versions.items() if k not in {"RegisterBrokerRecord", "PartitionRecord"})
    directories = [rec.directories for rec, _ in image.records("3.9") if isinstance(rec, r.PartitionRecord)]
    assert directories[0] == [MIGRATING_DIRECTORY] * 3


def test_records_at_lower_metadata_version_drop_or_refuse() -> None:
    image = replay(mv_record(21), topic(), partition(), (r.ZkMigrationStateRecord(zk_migration_state=0), 0))
    out = image.records(mvs.IBP_3_4_IV0)
    assert [type(x).__name__ for x, _ in out] == [
        "FeatureLevelRecord", "ZkMigrationStateRecord", "TopicRecord", "PartitionRecord",
    ]  # fmt: skip
    assert out[0][0].feature_level == 8 and out[3][1] == 0
    assert [type(x).__name__ for x, _ in image.records(mvs.IBP_3_3_IV3)][:2] == [
        "FeatureLevelRecord",
        "TopicRecord",
    ]
    assert next(type(x).__name__ for x, _ in image.records(mvs.IBP_3_2_IV0)) == "TopicRecord"

    with pytest.raises(UnsupportedVersionError, match="online log directories"):
        build_sample_image().records(mvs.IBP_3_6_IV2)
    controller = r.RegisterControllerRecord(controller_id=3000, incarnation_id=INC)
    with pytest.raises(UnsupportedVersionError, match="controller registration"):
        replay(mv_record(21), (controller, 0)).records(mvs.IBP_3_6_IV2)
    migrating = replay(mv_record(21), (r.ZkMigrationStateRecord(zk_migration_state=1), 0))
    with pytest.raises(UnsupportedVersionError, match="ZK Migration state"):
        migrating.records(mvs.IBP_3_3_IV3)
    with_dirs = replay(topic(), partition(replicas=[1], isr=[1], directories=[DIR_A]))
    with pytest.raises(UnsupportedVersionError, match="directory assignment"):
        with_dirs.records(mvs.IBP_3_6_IV2)


def test_records_replay_back_to_the_same_image() -> None:
    image = build_sample_image()
    again = replay_records(image.records())
    again.provenance = image.provenance
    assert again == image


def test_control_records_advance_provenance_outside_transactions() -> None:
    replayer = MetadataReplayer()
    replayer.replay(*mv_record(), 0, epoch=1, timestamp_ms=10)
    replayer.advance(1, epoch=2, timestamp_ms=20)
    assert replayer.image.provenance.last_contained_offset == 1
    replayer.replay(*BEGIN, 2)
    replayer.advance(3, epoch=2, timestamp_ms=30)
    assert replayer.image.provenance.last_contained_offset == 1


def test_zk_migration_states_are_kafkas_and_an_unknown_one_is_refused() -> None:
    for state in ZkMigrationState:
        image = replay((r.ZkMigrationStateRecord(zk_migration_state=state.value), 0))
        assert image.features.zk_migration_state == state
    assert [(s.name, s.value) for s in ZkMigrationState] == [
        ("NONE", 0), ("MIGRATION", 1), ("PRE_MIGRATION", 2), ("POST_MIGRATION", 3), ("ZK", 4),
    ]  # fmt: skip  (metadata/.../migration/ZkMigrationState.java)
    assert zk_migration_state_name(3) == "POST_MIGRATION" and zk_migration_state_name(9) == "9"
    with pytest.raises(CorruptDataError, match="unknown ZkMigrationState value 5"):
        replay((r.ZkMigrationStateRecord(zk_migration_state=5), 0))
