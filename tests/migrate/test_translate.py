"""translate(): the record lists of Kafka 3.9's ZooKeeper migration, step by step, order and content."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import pytest

from migrate.errors import InvalidRequestError, ZnodeFormatError
from migrate.kraft import records as r
from migrate.translate import (
    STEP_ACLS,
    STEP_BROKER_CONFIGS,
    STEP_CLIENT_QUOTAS,
    STEP_DELEGATION_TOKENS,
    STEP_PRODUCER_IDS,
    STEP_TOPICS,
    kafka_random_uuid,
    translate,
)
from migrate.zk.cluster import from_tree
from migrate.zk.model import (
    AclEntry,
    AclOperation,
    AclPermissionType,
    AclResource,
    ClientQuotaConfig,
    DelegationToken,
    EntityConfig,
    PartitionState,
    PatternType,
    ProducerIdBlock,
    ResourcePattern,
    ResourceType,
    ScramCredential,
    Topic,
    ZkClusterModel,
)
from migrate.zk.tree import Stat, ZNode, ZTree

TOPIC_ID = uuid.UUID("6d660bbe-4352-41e5-9d2a-186bde7d2f37")  # bWYLvkNSQeWdKhhr3n0vNw
OTHER_ID = uuid.UUID("0f2a6c1e-9a7b-4c55-8d3e-2b1f00c0ffee")


def sequential_ids() -> Any:
    counter = itertools.count(1000)
    return lambda: uuid.UUID(int=next(counter))


def topic(name: str, topic_id: uuid.UUID | None, assignment: dict[int, list[int]], **kw: Any) -> Topic:
    states = {
        p: PartitionState(
            leader=replicas[0], leader_epoch=p + 1, isr=list(replicas), controller_epoch=1, zk_version=p + 5
        )
        for p, replicas in assignment.items()
    }
    states.update(kw.pop("states", {}))
    for p in kw.pop("without_state", ()):
        del states[p]
    return Topic(name=name, topic_id=topic_id, partitions=assignment, states=states, **kw)


def types(records: list[tuple[Any, int]]) -> list[str]:
    return [type(rec).__name__ for rec, _ in records]


# ------------------------------------------------------------------ step 1: topics


def test_topic_list_is_topic_then_configs_then_partitions_with_zk_state() -> None:
    t = topic(
        "orders", TOPIC_ID, {1: [3, 2], 0: [2, 1]}, adding_replicas={1: [3]}, removing_replicas={1: [1]}
    )
    t.states[0].leader_recovery_state = 1
    model = ZkClusterModel(
        topics={"orders": t},
        topic_configs={
            "orders": EntityConfig(
                "topics", "orders", {"retention.ms": "3600000", "cleanup.policy": "compact"}
            )
        },
    )
    result = translate(model)
    assert len(result.lists) == 1 and result.lists[0].step == STEP_TOPICS
    records = result.records()
    assert types(records) == [
        "TopicRecord",
        "ConfigRecord",
        "ConfigRecord",
        "PartitionRecord",
        "PartitionRecord",
    ]
    assert records[0] == (r.TopicRecord(name="orders", topic_id=TOPIC_ID), 0)
    assert [(rec.resource_type, rec.resource_name, rec.name, rec.value) for rec, _ in records[1:3]] == [
        (2, "orders", "retention.ms", "3600000"),
        (2, "orders", "cleanup.policy", "compact"),
    ]
    p0, p1 = records[3][0], records[4][0]
    assert records[3][1] == 0 and records[4][1] == 0  # Kafka writes PartitionRecord v0 whatever the MV
    assert (p0.partition_id, p0.replicas, p0.isr, p0.leader, p0.leader_epoch, p0.partition_epoch) == (
        0,
        [2, 1],
        [2, 1],
        2,
        1,
        5,
    )
    assert p0.leader_recovery_state == 1
    assert (p1.partition_id, p1.adding_replicas, p1.removing_replicas, p1.partition_epoch) == (1, [3], [1], 6)
    assert p1.topic_id == TOPIC_ID and p1.directories == []
    assert result.broker_ids == {1, 2, 3}
    assert result.warnings == []


def test_one_list_per_topic_and_pending_deletions_are_skipped_with_a_warning() -> None:
    model = ZkClusterModel(
        topics={
            "b": topic("b", OTHER_ID, {0: [1]}),
            "a": topic("a", TOPIC_ID, {0: [1]}),
            "gone": topic("gone", uuid.UUID(int=77), {0: [4]}),
        },
        pending_topic_deletions={"gone"},
    )
    result = translate(model)
    assert [lst[0][0].name for lst in result.lists_of(STEP_TOPICS)] == ["a", "b"]
    assert 4 not in result.broker_ids
    assert len(result.warnings) == 1 and "/admin/delete_topics/gone" in result.warnings[0]


def test_orphan_topic_configs_are_not_migrated() -> None:
    model = ZkClusterModel(topic_configs={"ghost": EntityConfig("topics", "ghost", {"retention.ms": "1"})})
    assert translate(model).lists == []


def test_missing_partition_state_fails_naming_the_znode() -> None:
    model = ZkClusterModel(topics={"t": topic("t", TOPIC_ID, {0: [1], 1: [3, 2]}, without_state=[1])})
    with pytest.raises(ZnodeFormatError) as info:
        translate(model)
    assert info.value.path == "/brokers/topics/t/partitions/1/state"
    assert "repair" in str(info.value)


def test_missing_partition_state_is_repaired_as_kafka_does() -> None:
    model = ZkClusterModel(topics={"t": topic("t", TOPIC_ID, {0: [1], 1: [3, 2]}, without_state=[1])})
    result = translate(model, on_missing_state="repair")
    p1 = result.records()[2][0]
    assert (p1.isr, p1.leader, p1.leader_epoch, p1.partition_epoch, p1.leader_recovery_state) == (
        [3, 2],
        3,
        0,
        0,
        0,
    )
    assert len(result.warnings) == 1
    assert "repaired" in result.warnings[0] and "/brokers/topics/t/partitions/1/state" in result.warnings[0]


def test_topic_without_id_fails_or_gets_a_generated_id() -> None:
    model = ZkClusterModel(topics={"old": topic("old", None, {0: [1]})})
    with pytest.raises(ZnodeFormatError) as info:
        translate(model)
    assert info.value.path == "/brokers/topics/old" and "topic_id" in str(info.value)

    result = translate(model, on_missing_state="repair", topic_id_factory=lambda: OTHER_ID)
    topic_record, partition_record = result.records()[0][0], result.records()[1][0]
    assert topic_record.topic_id == OTHER_ID == partition_record.topic_id
    assert len(result.warnings) == 1 and "generated topic id" in result.warnings[0]


def test_random_ids_follow_kafkas_rules() -> None:
    # Zero and the metadata topic id are never handed out, nor ids whose text starts with '-'.
    candidates = iter([uuid.UUID(int=0), uuid.UUID(int=1), uuid.UUID(bytes=b"\xfb" + b"\x00" * 15), OTHER_ID])
    assert kafka_random_uuid(lambda: next(candidates)) == OTHER_ID


# ------------------------------------------------------------------ step 2: broker configs


def test_broker_configs_one_list_per_broker_default_is_empty_name() -> None:
    model = ZkClusterModel(
        broker_configs={
            "1": EntityConfig("brokers", "1", {"log.retention.ms": "1000", "message.max.bytes": "2000"}),
            "<default>": EntityConfig("brokers", "<default>", {"log.retention.ms": "86400000"}),
            "2": EntityConfig("brokers", "2", {}),
        }
    )
    result = translate(model)
    lists = result.lists_of(STEP_BROKER_CONFIGS)
    assert [[(c.resource_type, c.resource_name, c.name, c.value) for c, _ in lst] for lst in lists] == [
        [(4, "1", "log.retention.ms", "1000"), (4, "1", "message.max.bytes", "2000")],
        [(4, "", "log.retention.ms", "86400000")],
    ]
    assert result.broker_ids == {1, 2}


def test_broker_config_of_a_non_numeric_entity_fails() -> None:
    model = ZkClusterModel(broker_configs={"abc": EntityConfig("brokers", "abc", {"x": "1"})})
    with pytest.raises(ZnodeFormatError, match="/config/brokers/abc"):
        translate(model)


def test_encrypted_broker_password_is_copied_with_a_warning() -> None:
    secret = "encryptedPassword:AAAA,keyLength:128,cipherAlgorithm:AES/CBC/PKCS5Padding,iterations:4096"
    model = ZkClusterModel(broker_configs={"1": EntityConfig("brokers", "1", {"ssl.key.password": secret})})
    result = translate(model)
    assert result.records()[0][0].value == secret
    assert len(result.warnings) == 1 and "ssl.key.password" in result.warnings[0]


# ------------------------------------------------------------------ step 3: quotas and SCRAM


SCRAM = ScramCredential("SCRAM-SHA-256", b"salt", b"stored", b"server", 8192)
SCRAM512 = ScramCredential("SCRAM-SHA-512", b"salt5", b"stored5", b"server5", 4096)


def quota_model() -> ZkClusterModel:
    entries = [
        ClientQuotaConfig("ips/1.1.1.1", {"connection_creation_rate": 10.0}),
        ClientQuotaConfig("ips/<default>", {"connection_creation_rate": 20.0}),
        ClientQuotaConfig("clients/clientB", {"producer_byte_rate": 100.0}),
        ClientQuotaConfig("clients/<default>", {"consumer_byte_rate": 900.0}),
        ClientQuotaConfig("users/<default>/clients/clientA", {"consumer_byte_rate": 800.0}),
        ClientQuotaConfig("users/user%401/clients/client%2F1", {"request_percentage": 50.0}),
        ClientQuotaConfig(
            "users/user%401",
            {"consumer_byte_rate": 1000.0, "producer_byte_rate": 100.0},
            scram={"SCRAM-SHA-512": SCRAM512, "SCRAM-SHA-256": SCRAM},
        ),
        ClientQuotaConfig("users/alice", {}, scram={"SCRAM-SHA-256": SCRAM}),
        ClientQuotaConfig("users/<default>", {"producer_byte_rate": 100.0}),
    ]
    return ZkClusterModel(client_quotas={e.entity_path: e for e in entries})


def entity_of(record: Any) -> list[tuple[str, str | None]]:
    return [(e.entity_type, e.entity_name) for e in record.entity]


def test_quota_and_scram_lists_in_kafkas_order() -> None:
    result = translate(quota_model())
    lists = result.lists_of(STEP_CLIENT_QUOTAS)
    summary = [
        (
            type(lst[0][0]).__name__,
            entity_of(lst[0][0]) if isinstance(lst[0][0], r.ClientQuotaRecord) else lst[0][0].name,
            len(lst),
        )
        for lst in lists
    ]
    assert summary == [
        # users: SCRAM-SHA-256, SCRAM-SHA-512, then the remaining keys as one quota list
        ("ClientQuotaRecord", [("user", None)], 1),
        ("UserScramCredentialRecord", "alice", 1),
        ("UserScramCredentialRecord", "user@1", 1),
        ("UserScramCredentialRecord", "user@1", 1),
        ("ClientQuotaRecord", [("user", "user@1")], 2),
        # clients
        ("ClientQuotaRecord", [("client-id", None)], 1),
        ("ClientQuotaRecord", [("client-id", "clientB")], 1),
        # users/clients: user first, names desanitised, <default> as null
        ("ClientQuotaRecord", [("user", None), ("client-id", "clientA")], 1),
        ("ClientQuotaRecord", [("user", "user@1"), ("client-id", "client/1")], 1),
        # ips (within a step: znode names in sorted order; Kafka follows ZooKeeper's child order)
        ("ClientQuotaRecord", [("ip", "1.1.1.1")], 1),
        ("ClientQuotaRecord", [("ip", None)], 1),
    ]
    sha256, sha512 = lists[2][0][0], lists[3][0][0]
    assert (sha256.mechanism, sha256.salt, sha256.stored_key, sha256.server_key, sha256.iterations) == (
        1,
        b"salt",
        b"stored",
        b"server",
        8192,
    )
    assert (sha512.mechanism, sha512.iterations) == (2, 4096)
    quota = lists[4]
    assert [(q.key, q.value, q.remove) for q, _ in quota] == [
        ("consumer_byte_rate", 1000.0, False),
        ("producer_byte_rate", 100.0, False),
    ]


def test_scram_below_3_5_iv2_is_refused_naming_the_users() -> None:
    with pytest.raises(InvalidRequestError) as info:
        translate(quota_model(), metadata_version="3.5-IV1")
    message = str(info.value)
    assert "alice" in message and "user@1" in message and "3.5-IV2" in message
    # quotas alone are fine at that version
    no_scram = quota_model()
    for cfg in no_scram.client_quotas.values():
        cfg.scram = {}
    assert translate(no_scram, metadata_version="3.4-IV0").records()


# ------------------------------------------------------------------ steps 4-6


def test_producer_id_block_becomes_the_next_block_start() -> None:
    model = ZkClusterModel(producer_id_block=ProducerIdBlock(broker_id=2, block_start=3000, block_end=3999))
    assert translate(model).lists_of(STEP_PRODUCER_IDS) == [
        [(r.ProducerIdsRecord(broker_id=2, broker_epoch=-1, next_producer_id=4000), 0)]
    ]
    assert translate(ZkClusterModel()).lists == []


def acl(principal: str, op: AclOperation = AclOperation.READ, host: str = "*") -> AclEntry:
    return AclEntry(principal, host, op, AclPermissionType.ALLOW)


def test_acls_sorted_by_type_pattern_and_name_descending_with_fresh_ids() -> None:
    resources = [
        AclResource(ResourcePattern(ResourceType.GROUP, "g", PatternType.LITERAL), [acl("User:a")]),
        AclResource(ResourcePattern(ResourceType.TOPIC, "bar-", PatternType.PREFIXED), [acl("User:*")]),
        AclResource(ResourcePattern(ResourceType.TOPIC, "apple", PatternType.LITERAL), [acl("User:b")]),
        AclResource(
            ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL),
            [acl("User:alice"), acl("User:alice", AclOperation.WRITE, "192.168.0.1")],
        ),
        AclResource(
            ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL),
            [acl("User:admin", AclOperation.ALL)],
        ),
        AclResource(ResourcePattern(ResourceType.TOPIC, "Zed", PatternType.LITERAL), [acl("User:z")]),
        AclResource(ResourcePattern(ResourceType.TOPIC, "empty", PatternType.LITERAL), []),
    ]
    model = ZkClusterModel(acls={res.pattern: res for res in resources})
    result = translate(model, acl_id_factory=sequential_ids())
    lists = result.lists_of(STEP_ACLS)
    order = [
        (rec.resource_type, rec.pattern_type, rec.resource_name, len(lst))
        for lst in lists
        for rec, _ in lst[:1]
    ]
    assert order == [
        (2, 3, "orders", 2),  # TOPIC LITERAL, names descending: lower case after upper case in Java
        (2, 3, "apple", 1),
        (2, 3, "Zed", 1),
        (2, 4, "bar-", 1),  # TOPIC PREFIXED after every TOPIC LITERAL
        (3, 3, "g", 1),
        (4, 3, "kafka-cluster", 1),
    ]
    first = lists[0]
    assert [(a.principal, a.host, a.operation, a.permission_type) for a, _ in first] == [
        ("User:alice", "*", 3, 3),
        ("User:alice", "192.168.0.1", 4, 3),
    ]
    ids = [rec.id for lst in lists for rec, _ in lst]
    assert ids == [uuid.UUID(int=i) for i in range(1000, 1007)]


def test_acl_names_compare_as_java_utf16_code_units() -> None:
    # U+FFFD is above a surrogate pair in Python's code-point order but below it in Java's UTF-16 order.
    names = ["\ufffd", "\U0001f600"]
    resources = [
        AclResource(ResourcePattern(ResourceType.TOPIC, n, PatternType.LITERAL), [acl("User:x")])
        for n in names
    ]
    result = translate(ZkClusterModel(acls={res.pattern: res for res in resources}))
    assert [lst[0][0].resource_name for lst in result.lists_of(STEP_ACLS)] == ["\ufffd", "\U0001f600"]


def test_acl_lists_are_cut_every_100_records() -> None:
    many = AclResource(
        ResourcePattern(ResourceType.TOPIC, "t", PatternType.LITERAL), [acl(f"User:u{i}") for i in range(250)]
    )
    result = translate(ZkClusterModel(acls={many.pattern: many}))
    assert [len(lst) for lst in result.lists_of(STEP_ACLS)] == [100, 100, 50]
    assert len({rec.id for rec, _ in result.records()}) == 250


def token(token_id: str) -> DelegationToken:
    return DelegationToken(
        token_id, "User:alice", "User:alice", ["User:bob"], 1718000000000, 1718604800000, 1718086400000
    )


def test_delegation_tokens_are_one_list() -> None:
    model = ZkClusterModel(delegation_tokens={"tok2": token("tok2"), "tok1": token("tok1")})
    result = translate(model)
    (records,) = result.lists_of(STEP_DELEGATION_TOKENS)
    assert records[0] == (
        r.DelegationTokenRecord(
            owner="User:alice",
            requester="User:alice",
            renewers=["User:bob"],
            issue_timestamp=1718000000000,
            max_timestamp=1718604800000,
            expiration_timestamp=1718086400000,
            token_id="tok1",
        ),
        0,
    )
    assert records[1][0].token_id == "tok2"
    assert result.warnings == []


def test_delegation_tokens_below_3_6_iv2_are_copied_with_a_warning() -> None:
    result = translate(ZkClusterModel(delegation_tokens={"tok1": token("tok1")}), metadata_version="3.6-IV1")
    assert len(result.records(STEP_DELEGATION_TOKENS)) == 1
    assert len(result.warnings) == 1 and "tok1" in result.warnings[0] and "3.6-IV2" in result.warnings[0]


# ------------------------------------------------------------------ the whole order and MV gating


def test_steps_come_in_kafkas_order() -> None:
    model = quota_model()
    model.topics = {"t": topic("t", TOPIC_ID, {0: [1]})}
    model.broker_configs = {"1": EntityConfig("brokers", "1", {"a": "b"})}
    model.producer_id_block = ProducerIdBlock(1, 0, 999)
    res = AclResource(ResourcePattern(ResourceType.TOPIC, "t", PatternType.LITERAL), [acl("User:x")])
    model.acls = {res.pattern: res}
    model.delegation_tokens = {"tok": token("tok")}
    steps = [item.step for item in translate(model).lists]
    assert list(dict.fromkeys(steps)) == [
        STEP_TOPICS,
        STEP_BROKER_CONFIGS,
        STEP_CLIENT_QUOTAS,
        STEP_PRODUCER_IDS,
        STEP_ACLS,
        STEP_DELEGATION_TOKENS,
    ]


def test_metadata_versions_gate_transactions_and_are_validated() -> None:
    model = ZkClusterModel(topics={"t": topic("t", TOPIC_ID, {0: [1]})})
    old = translate(model, metadata_version="3.4-IV0")
    assert not old.uses_transactions
    assert any("metadata transactions" in w for w in old.warnings)
    new = translate(model, metadata_version="3.9-IV0")
    assert new.uses_transactions and new.warnings == []
    assert old.records() == new.records()
    with pytest.raises(InvalidRequestError, match=r"3\.4-IV0"):
        translate(model, metadata_version="3.3-IV3")
    with pytest.raises(InvalidRequestError):
        translate(model, on_missing_state="ignore")  # type: ignore[arg-type]


# ------------------------------------------------------------------ through the ZooKeeper model's parser


def tree_of(znodes: dict[str, bytes | None], versions: dict[str, int] | None = None) -> ZTree:
    tree = ZTree(source="synthetic")
    for path, data in znodes.items():
        version = (versions or {}).get(path, 0)
        tree.nodes[path] = ZNode(path, data, Stat(version=version, data_length=len(data or b"")))
    return tree


def test_translate_a_tree_read_by_the_model() -> None:
    tree = tree_of(
        {
            "/brokers/topics/legacy": b'{"version":1,"partitions":{"0":[1,2]}}',
            "/brokers/topics/legacy/partitions/0/state": b'{"controller_epoch":1,"leader":2,"version":1,"leader_epoch":7,"isr":[2],"leader_recovery_state":1}',
            "/brokers/topics/doomed": b'{"version":3,"partitions":{"0":[1]},"topic_id":"bWYLvkNSQeWdKhhr3n0vNw","adding_replicas":{},"removing_replicas":{}}',
            "/admin/delete_topics/doomed": None,
            "/config/users/user%401": b'{"version":1,"config":{"consumer_byte_rate":"1000","request_percentage":"50.5"}}',
            "/config/users/user%401/clients/client%2A": b'{"version":1,"config":{"producer_byte_rate":"100"}}',
        },
        versions={"/brokers/topics/legacy/partitions/0/state": 9},
    )
    model = from_tree(tree)
    with pytest.raises(ZnodeFormatError, match="/brokers/topics/legacy"):
        translate(model)
    result = translate(model, on_missing_state="repair", topic_id_factory=lambda: OTHER_ID)
    topic_list = result.lists_of(STEP_TOPICS)
    assert len(topic_list) == 1  # `doomed` is pending deletion
    partition = topic_list[0][1][0]
    assert (partition.topic_id, partition.leader, partition.leader_epoch, partition.isr) == (
        OTHER_ID,
        2,
        7,
        [2],
    )
    assert (partition.partition_epoch, partition.leader_recovery_state) == (9, 1)
    quotas = result.lists_of(STEP_CLIENT_QUOTAS)
    assert [[(entity_of(q), q.key, q.value) for q, _ in lst] for lst in quotas] == [
        [
            ([("user", "user@1")], "consumer_byte_rate", 1000.0),
            ([("user", "user@1")], "request_percentage", 50.5),
        ],
        [([("user", "user@1"), ("client-id", "client*")], "producer_byte_rate", 100.0)],
    ]
    assert len(result.warnings) == 2  # the generated topic id and the skipped deletion
