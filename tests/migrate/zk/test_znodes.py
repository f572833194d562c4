"""Codecs of every znode Kafka writes: real bytes, documented examples, errors, round trips, a JVM oracle."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import math
import random
import re
import shutil
import struct
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from migrate import jvm
from migrate.errors import InvalidRequestError, ZnodeFormatError
from migrate.zk.model import (
    SECURITY_PROTOCOLS,
    AclChangeNotification,
    AclEntry,
    AclOperation,
    AclPermissionType,
    AclResource,
    BrokerEndpoint,
    BrokerRegistration,
    ConfigChangeNotification,
    ControllerEpoch,
    ControllerRegistration,
    DelegationToken,
    EntityConfig,
    FeatureRange,
    FeatureStatus,
    FinalizedFeatures,
    LegacyReassignment,
    LogDirEvent,
    MigrationState,
    PartitionList,
    PartitionState,
    PatternType,
    ProducerIdBlock,
    ReplicaReassignment,
    ResourcePattern,
    ResourceType,
    Topic,
    TopicPartition,
    pascal_case,
)
from migrate.zk.paths import desanitize, sanitize
from migrate.zk.znodes.acls import (
    decode_acl_change,
    decode_acls,
    decode_extended_acl_change,
    encode_acl_change,
    encode_acls,
    encode_extended_acl_change,
)
from migrate.zk.znodes.admin import (
    decode_log_dir_event,
    decode_partition_list,
    decode_reassignment,
    encode_log_dir_event,
    encode_partition_list,
    encode_reassignment,
)
from migrate.zk.znodes.brokers import decode_broker, encode_broker
from migrate.zk.znodes.configs import (
    decode_client_quota_config,
    decode_config_change,
    decode_entity_config,
    encode_client_quota_config,
    encode_config_change,
    encode_entity_config,
    kafka_quota_text,
)
from migrate.zk.znodes.controller import (
    decode_controller,
    decode_controller_epoch,
    decode_migration,
    encode_controller,
    encode_controller_epoch,
    encode_migration,
)
from migrate.zk.znodes.jackson import json_string
from migrate.zk.znodes.singletons import (
    decode_cluster_id,
    decode_features,
    decode_producer_id_block,
    encode_cluster_id,
    encode_features,
    encode_producer_id_block,
)
from migrate.zk.znodes.tokens import (
    decode_delegation_token,
    decode_token_change,
    encode_delegation_token,
    encode_token_change,
)
from migrate.zk.znodes.topics import (
    _checked_partition_state,
    decode_partition_state,
    decode_topic,
    encode_partition_state,
    encode_topic,
    format_uuid,
)
from tests.support import REPO
from tests.support.strategies import (
    CONFIG_MAP,
    INT32,
    NAME,
    acl_resources,
    brokers,
    client_quotas,
    config_changes,
    controllers,
    delegation_tokens,
    extended_acl_changes,
    finalized_features,
    literal_acl_changes,
    log_dir_events,
    migration_states,
    partition_lists,
    partition_states,
    producer_blocks,
    reassignments,
    topics,
)


def semantic(data: bytes) -> Any:
    return json.loads(data)


# ============================================================ real bytes (fixture zk-real-kafka-3.5)

FIXTURE_CASES = [
    (
        "/controller",
        b'{"version":2,"brokerid":3,"timestamp":"1709177855275","kraftControllerEpoch":-1}',
        decode_controller,
        encode_controller,
    ),
    ("/controller_epoch", b"2", decode_controller_epoch, encode_controller_epoch),
    (
        "/brokers/ids/1",
        b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://kafka01:9092"],'
        b'"jmx_port":-1,"port":9092,"host":"kafka01","version":5,"timestamp":"1709177854981"}',
        decode_broker,
        encode_broker,
    ),
    (
        "/brokers/topics/current_stock",
        b'{"partitions":{"0":[2,1],"1":[3,2],"2":[1,3]},"topic_id":"bWYLvkNSQeWdKhhr3n0vNw","adding_replicas":{},'
        b'"removing_replicas":{},"version":3}',
        decode_topic,
        encode_topic,
    ),
    (
        "/brokers/topics/current_stock/partitions/0/state",
        b'{"controller_epoch":2,"leader":1,"version":1,"leader_epoch":2,"isr":[1,2]}',
        decode_partition_state,
        encode_partition_state,
    ),
    (
        "/config/topics/current_stock",
        b'{"version":1,"config":{"retention.ms":"3600000"}}',
        decode_entity_config,
        encode_entity_config,
    ),
    (
        "/config/topics/__consumer_offsets",
        b'{"version":1,"config":{"segment.bytes":"104857600","cleanup.policy":"compact","compression.type":"producer"}}',
        decode_entity_config,
        encode_entity_config,
    ),
    (
        "/cluster/id",
        b'{"version":"1","id":"esQVtsr4Sh6LSPhdkKjbNw"}',
        decode_cluster_id,
        encode_cluster_id,
    ),
    ("/feature", b'{"features":{},"version":2,"status":1}', decode_features, encode_features),
]


@pytest.mark.parametrize(
    ("path", "data", "decode", "encode"), FIXTURE_CASES, ids=[c[0] for c in FIXTURE_CASES]
)
def test_real_kafka_bytes_re_encode_exactly(
    path: str, data: bytes, decode: Callable, encode: Callable
) -> None:
    assert encode(decode(path, data)) == data


def test_real_broker_registration_fields() -> None:
    data = FIXTURE_CASES[2][1]
    b = decode_broker("/brokers/ids/1", data, czxid=8589934647, zk_version=1, ephemeral_owner=7)
    assert b.broker_id == 1 and b.version == 5 and b.jmx_port == -1 and b.rack is None
    assert b.endpoints == [BrokerEndpoint("PLAINTEXT", "kafka01", 9092, "PLAINTEXT")]
    assert b.timestamp == 1709177854981 and b.features == {}
    assert b.broker_epoch == 8589934647


def test_real_topic_and_state_fields() -> None:
    t = decode_topic("/brokers/topics/current_stock", FIXTURE_CASES[3][1])
    assert t.name == "current_stock" and t.version == 3
    assert format_uuid(t.topic_id) == "bWYLvkNSQeWdKhhr3n0vNw"  # type: ignore[arg-type]
    assert (
        t.partitions == {0: [2, 1], 1: [3, 2], 2: [1, 3]} and t.adding_replicas == {} == t.removing_replicas
    )
    s = decode_partition_state(
        "/brokers/topics/current_stock/partitions/0/state", FIXTURE_CASES[4][1], zk_version=3
    )
    assert s == PartitionState(leader=1, leader_epoch=2, isr=[1, 2], controller_epoch=2, zk_version=3)
    assert s.partition_epoch == 3


def test_fifty_partition_topic_keeps_kafkas_hash_order() -> None:
    # The real __consumer_offsets znode lists partitions in Scala mutable.HashMap order: "44".."49" first.
    t = Topic("__consumer_offsets", uuid.UUID(int=7), {p: [p % 3 + 1] for p in range(50)})
    keys = list(json.loads(encode_topic(t))["partitions"])
    assert keys[:8] == ["44", "45", "46", "47", "48", "49", "10", "11"]
    assert keys[16:26] == [str(p) for p in range(10)]


@pytest.mark.parametrize("count", [1, 3, 50, 64, 65, 300])
def test_partition_keys_follow_scalas_map_order_for_small_and_large_topics(count: int) -> None:
    # Topics of up to 64 partitions take a cached order; larger ones are ordered each time.
    t = Topic("t", uuid.UUID(int=7), {p: [1] for p in range(count)})
    for _ in range(2):
        keys = list(json.loads(encode_topic(t))["partitions"])
        assert keys == jvm.scala_mutable_map_order([str(p) for p in range(count)])


def test_java8_and_java9_properties_orders_differ_and_both_are_kept() -> None:
    cfg = EntityConfig(
        "topics", "t", {"cleanup.policy": "compact", "segment.bytes": "1", "compression.type": "x"}
    )
    modern = json.loads(encode_entity_config(cfg, java8=False), object_pairs_hook=list)[1][1]
    legacy = json.loads(encode_entity_config(cfg, java8=True), object_pairs_hook=list)[1][1]
    assert [k for k, _ in modern] == ["compression.type", "cleanup.policy", "segment.bytes"]
    assert next(k for k, _ in legacy) == "segment.bytes"


# ============================================================ documented examples (zk-layout.md)


def test_controller_kraft_and_version_1() -> None:
    c = decode_controller(
        "/controller", b'{"version":2,"brokerid":3000,"timestamp":"1718000000000","kraftControllerEpoch":7}'
    )
    assert c.is_kraft_controller and c.broker_id == 3000 and c.kraft_controller_epoch == 7
    old = decode_controller("/controller", b'{"version":1,"brokerid":2,"timestamp":"1"}')
    assert old.kraft_controller_epoch is None and not old.is_kraft_controller
    assert encode_controller(old) == b'{"version":1,"brokerid":2,"timestamp":"1"}'


def test_broker_without_plaintext_listener_has_null_host() -> None:
    data = (
        b'{"version":5,"host":null,"port":-1,"jmx_port":-1,"timestamp":"1718000000123","endpoints":["INTERNAL://b1.example:9093",'
        b'"EXTERNAL://b1.example:9094"],"rack":"eu-west-1a","listener_security_protocol_map":{"INTERNAL":"SSL","EXTERNAL":"SASL_SSL"},'
        b'"features":{}}'
    )
    b = decode_broker("/brokers/ids/1", data)
    assert b.endpoints == [
        BrokerEndpoint("INTERNAL", "b1.example", 9093, "SSL"),
        BrokerEndpoint("EXTERNAL", "b1.example", 9094, "SASL_SSL"),
    ]
    assert b.rack == "eu-west-1a" and b.plaintext_endpoint is None
    again = encode_broker(b)
    assert semantic(again) == semantic(data)
    assert b'"host":null' in again and b'"port":-1' in again


def test_broker_versions_1_to_4() -> None:
    v1 = decode_broker(
        "/brokers/ids/7", b'{"version":1,"host":"h","port":9092,"jmx_port":9999,"timestamp":"5"}'
    )
    assert v1.endpoints == [BrokerEndpoint("PLAINTEXT", "h", 9092, "PLAINTEXT")] and v1.jmx_port == 9999
    assert semantic(encode_broker(v1)) == {
        "version": 1,
        "host": "h",
        "port": 9092,
        "jmx_port": 9999,
        "timestamp": "5",
    }
    # v2/v3 have no protocol map: listener names must be security protocol names.
    v3 = decode_broker(
        "/brokers/ids/7",
        b'{"version":3,"host":"h","port":1,"jmx_port":-1,"timestamp":"5","endpoints":["PLAINTEXT://h:1","SSL://[::1]:2"],"rack":"r"}',
    )
    assert v3.endpoints[1] == BrokerEndpoint("SSL", "::1", 2, "SSL") and v3.rack == "r"
    assert "SSL://[::1]:2" in semantic(encode_broker(v3))["endpoints"]
    v4 = decode_broker(
        "/brokers/ids/7",
        b'{"version":4,"jmx_port":-1,"endpoints":["CLIENT://:9"],"listener_security_protocol_map":{"CLIENT":"sasl_ssl"}}',
    )
    assert v4.endpoints == [BrokerEndpoint("CLIENT", None, 9, "SASL_SSL")] and v4.timestamp is None


def test_broker_supported_features() -> None:
    data = b'{"version":5,"jmx_port":-1,"endpoints":[],"features":{"f":{"min_version":1,"first_active_version":2,"max_version":3}}}'
    b = decode_broker("/brokers/ids/1", data)
    assert b.features == {"f": FeatureRange(1, 3)}
    assert semantic(encode_broker(b))["features"] == {"f": {"min_version": 1, "max_version": 3}}


def test_topic_with_reassignment_in_flight() -> None:
    data = (
        b'{"version":3,"topic_id":"q3W2l7m5Q8yq1o0c2mQy7A","partitions":{"0":[1,2,3,4]},'
        b'"adding_replicas":{"0":[4]},"removing_replicas":{"0":[1]}}'
    )
    t = decode_topic("/brokers/topics/orders", data)
    assert t.adding_replicas == {0: [4]} and t.removing_replicas == {0: [1]}
    assert semantic(encode_topic(t)) == semantic(data)


def test_topic_without_id_and_old_versions() -> None:
    t = decode_topic(
        "/brokers/topics/x",
        b'{"version":2,"partitions":{"1":[1]},"adding_replicas":{"1":[]},"removing_replicas":{}}',
    )
    assert t.topic_id is None and t.adding_replicas == {}
    assert "topic_id" not in semantic(encode_topic(t))
    v1 = decode_topic("/brokers/topics/x", b'{"version":1,"partitions":{"0":[1,2]}}')
    assert encode_topic(v1) == b'{"version":1,"partitions":{"0":[1,2]}}'


def test_leader_recovery_state_written_only_when_recovering() -> None:
    data = (
        b'{"version":1,"leader":3,"leader_epoch":9,"isr":[3],"controller_epoch":5,"leader_recovery_state":1}'
    )
    s = decode_partition_state("/s", data)
    assert s.leader_recovery_state == 1
    again = encode_partition_state(s)
    assert semantic(again) == semantic(data)
    s.leader_recovery_state = 0
    assert b"leader_recovery_state" not in encode_partition_state(s)


CLIENT_QUOTA_EXAMPLES = [
    ("/config/users/user%401", b'{"version":1,"config":{"consumer_byte_rate":"1000"}}', {"user": "user@1"}),
    (
        "/config/users/user%401/clients/clientA",
        b'{"version":1,"config":{"consumer_byte_rate":"800","producer_byte_rate":"100"}}',
        {"user": "user@1", "client-id": "clientA"},
    ),
    (
        "/config/users/<default>",
        b'{"version":1,"config":{"consumer_byte_rate":"900","producer_byte_rate":"100"}}',
        {"user": None},
    ),
    (
        "/config/clients/<default>",
        b'{"version":1,"config":{"consumer_byte_rate":"900"}}',
        {"client-id": None},
    ),
    ("/config/ips/8.8.8.8", b'{"version":1,"config":{"connection_creation_rate":"10"}}', {"ip": "8.8.8.8"}),
]


@pytest.mark.parametrize(("path", "data", "entity"), CLIENT_QUOTA_EXAMPLES)
def test_client_quota_examples(path: str, data: bytes, entity: dict[str, str | None]) -> None:
    q = decode_client_quota_config(path, data)
    assert q.entity == entity and not q.scram and not q.quota_text
    assert all(isinstance(v, float) for v in q.quotas.values())
    assert semantic(encode_client_quota_config(q)) == semantic(data)


SCRAM_EXAMPLE = (
    b'{"version":1,"config":{"SCRAM-SHA-256":"salt=MXJicGtkdGcwZm83aGhhYTlmc3NqYjl2azE=,stored_key=7VkSPRPlbIHTfTYMtCm/FrMhmk7hxcJVyFoZ9cATT4I=,'
    b'server_key=Hh1VMRx3VQgte1aXZrbVWQw/NviNAixrN7oO8AOAQ2A=,iterations=8192","producer_byte_rate":"1048576"}}'
)


def test_scram_credential_is_split_from_quotas_and_matches_the_password() -> None:
    q = decode_client_quota_config("/config/users/alice", SCRAM_EXAMPLE)
    assert q.quotas == {"producer_byte_rate": 1048576.0}
    cred = q.scram["SCRAM-SHA-256"]
    assert cred.iterations == 8192 and cred.salt == b"1rbpkdtg0fo7hhaa9fssjb9vk1"
    # RFC 5802 derivation from the documented password proves the bytes were decoded correctly.
    salted = hashlib.pbkdf2_hmac("sha256", b"alice-secret", cred.salt, cred.iterations)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    assert cred.stored_key == hashlib.sha256(client_key).digest()
    assert cred.server_key == hmac.new(salted, b"Server Key", "sha256").digest()
    assert semantic(encode_client_quota_config(q)) == semantic(SCRAM_EXAMPLE)


def test_scram_keys_are_quotas_outside_users() -> None:
    with pytest.raises(ZnodeFormatError, match="non-numeric"):
        decode_client_quota_config(
            "/config/clients/c", b'{"version":1,"config":{"SCRAM-SHA-256":"salt=AA==,x"}}'
        )


def test_quota_text_kafka_would_print_differently_is_kept() -> None:
    data = b'{"version":1,"config":{"request_percentage":"50","producer_byte_rate":"1024.0"}}'
    q = decode_client_quota_config("/config/clients/c", data)
    assert q.quotas == {"request_percentage": 50.0, "producer_byte_rate": 1024.0}
    assert q.quota_text == {"request_percentage": "50", "producer_byte_rate": "1024.0"}
    assert semantic(encode_client_quota_config(q)) == semantic(data)
    q.quotas["request_percentage"] = 58.58  # a changed value is printed the way Kafka prints it
    assert semantic(encode_client_quota_config(q))["config"]["request_percentage"] == "58.58"


def test_quota_values_as_kafka_prints_them() -> None:
    assert kafka_quota_text("producer_byte_rate", 1048576.0) == "1048576"
    assert kafka_quota_text("connection_creation_rate", 10.0000000001) == "10"
    assert kafka_quota_text("request_percentage", 50.0) == "50.0"
    assert kafka_quota_text("controller_mutation_rate", 10.0) == "10.0"
    with pytest.raises(InvalidRequestError, match="whole number"):
        kafka_quota_text("consumer_byte_rate", 1.5)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (50.0, "50.0"),
        (58.58, "58.58"),
        (0.001, "0.001"),
        (1e-4, "1.0E-4"),
        (1e7, "1.0E7"),
        (9999999.0, "9999999.0"),
        (123456789.0, "1.23456789E8"),
        (-0.0, "-0.0"),
        (0.0, "0.0"),
        (math.nan, "NaN"),
        (-math.inf, "-Infinity"),
        (1.5e300, "1.5E300"),
        (4.9e-324, "4.9E-324"),
    ],
)
def test_java_double_to_string(value: float, text: str) -> None:
    assert jvm.java_double_to_string(value) == text


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", 1.0),
        (" 2.5 ", 2.5),
        ("1e3", 1000.0),
        ("1.5d", 1.5),
        (".5", 0.5),
        ("5.", 5.0),
        ("-Infinity", -math.inf),
    ],
)
def test_parse_java_double(text: str, value: float) -> None:
    assert jvm.parse_java_double(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1_000", "nan", "inf", "NaNd", "0x10", "\u0661"])
def test_parse_java_double_rejects_what_java_rejects(text: str) -> None:
    assert jvm.parse_java_double(text) is None


def test_config_changes() -> None:
    assert decode_config_change(
        "/c", b'{"version":2,"entity_path":"brokers/1"}'
    ) == ConfigChangeNotification("brokers/1")
    assert (
        encode_config_change(ConfigChangeNotification("brokers/1"))
        == b'{"version":2,"entity_path":"brokers/1"}'
    )
    v1 = decode_config_change("/c", b'{"version":1,"entity_type":"topics","entity_name":"t"}')
    assert v1 == ConfigChangeNotification("topics/t", 1)
    assert semantic(encode_config_change(v1)) == {"version": 1, "entity_type": "topics", "entity_name": "t"}
    with pytest.raises(ZnodeFormatError, match="only topics, clients"):
        decode_config_change("/c", b'{"version":1,"entity_type":"users","entity_name":"u"}')


def test_admin_requests_and_notifications() -> None:
    r = b'{"version":1,"partitions":[{"topic":"orders","partition":3,"replicas":[4,5,6]}]}'
    assert decode_reassignment("/r", r) == LegacyReassignment([ReplicaReassignment("orders", 3, [4, 5, 6])])
    assert encode_reassignment(decode_reassignment("/r", r)) == r
    e = b'{"version":1,"partitions":[{"topic":"orders","partition":0},{"topic":"orders","partition":1}]}'
    assert decode_partition_list("/e", e).partitions == [
        TopicPartition("orders", 0),
        TopicPartition("orders", 1),
    ]
    assert encode_partition_list(decode_partition_list("/e", e)) == e
    d = b'{"version":1,"broker":2,"event":1}'
    assert decode_log_dir_event("/d", d) == LogDirEvent(2) and encode_log_dir_event(LogDirEvent(2)) == d


def test_producer_id_block() -> None:
    data = b'{"version":1,"broker":2,"block_start":"3000","block_end":"3999"}'
    b = decode_producer_id_block("/latest_producer_id_block", data)
    assert b == ProducerIdBlock(2, 3000, 3999) and b.next_producer_id == 4000
    assert encode_producer_id_block(b) == data
    with pytest.raises(ZnodeFormatError, match="does not fit an int"):
        decode_producer_id_block(
            "/p", b'{"version":1,"broker":2,"block_start":"0","block_end":"99999999999"}'
        )


def test_feature_versions() -> None:
    v1 = b'{"version":1,"status":1,"features":{"my.feature":{"min_version_level":1,"max_version_level":1}}}'
    f = decode_features("/feature", v1, zk_version=4)
    assert f == FinalizedFeatures(FeatureStatus.ENABLED, {"my.feature": 1}, 1, {}, 4)
    assert semantic(encode_features(f)) == semantic(v1)
    wide = b'{"version":1,"status":0,"features":{"f":{"min_version_level":1,"max_version_level":3}}}'
    assert semantic(encode_features(decode_features("/feature", wide))) == semantic(wide)
    v2 = decode_features(
        "/feature", b'{"version":2,"status":1,"features":{"metadata.version":{"max_version_level":14}}}'
    )
    assert v2.features == {"metadata.version": 14}


def test_migration_state() -> None:
    empty = b'{"version":0,"kraft_controller_id":-1,"kraft_controller_epoch":-1,"kraft_metadata_offset":-1,"kraft_metadata_epoch":-1}'
    m = decode_migration("/migration", empty, zk_version=0, mtime=5)
    assert m == MigrationState(last_updated_ms=5) and not m.initial_migration_complete
    mid = b'{"version":0,"kraft_controller_id":3000,"kraft_controller_epoch":7,"kraft_metadata_offset":18452,"kraft_metadata_epoch":7}'
    state = decode_migration("/migration", mid, zk_version=12)
    assert (
        state.initial_migration_complete and state.kraft_metadata_offset == 18452 and state.zk_version == 12
    )
    assert semantic(encode_migration(state)) == semantic(mid)
    # Scala immutable Map of five entries: CHAMP order, not insertion order.
    assert encode_migration(state).startswith(b'{"version":0,"kraft_metadata_offset":18452,')


ACL_EXAMPLES = [
    (
        "/kafka-acl/Topic/orders",
        b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"},'
        b'{"principal":"User:alice","permissionType":"Allow","operation":"Write","host":"192.168.0.1"}]}',
        ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL),
    ),
    (
        "/kafka-acl/Cluster/kafka-cluster",
        b'{"version":1,"acls":[{"principal":"User:admin","permissionType":"Allow","operation":"All","host":"*"}]}',
        ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL),
    ),
    (
        "/kafka-acl-extended/prefixed/Topic/bar-",
        b'{"version":1,"acls":[{"principal":"User:*","permissionType":"Allow","operation":"Read","host":"*"}]}',
        ResourcePattern(ResourceType.TOPIC, "bar-", PatternType.PREFIXED),
    ),
]


@pytest.mark.parametrize(("path", "data", "pattern"), ACL_EXAMPLES)
def test_acl_examples(path: str, data: bytes, pattern: ResourcePattern) -> None:
    r = decode_acls(path, data, zk_version=2)
    assert r.pattern == pattern and r.zk_version == 2
    assert semantic(encode_acls(r)) == semantic(data)
    # Java HashMap order of the keys.
    assert encode_acls(r).startswith(b'{"acls":[{"principal":')


def test_acl_names_are_matched_like_kafka() -> None:
    data = (
        b'{"version":1,"acls":[{"principal":"User:a","permissionType":"DENY","operation":"CLUSTERACTION","host":"*"},'
        b'{"principal":"User:a","permissionType":"allow","operation":"CLUSTER_ACTION","host":"*"}]}'
    )
    r = decode_acls("/kafka-acl/Cluster/kafka-cluster", data)
    assert r.acls == [
        AclEntry("User:a", "*", AclOperation.CLUSTER_ACTION, AclPermissionType.DENY),
        AclEntry("User:a", "*", AclOperation.UNKNOWN, AclPermissionType.ALLOW),
    ]
    assert decode_acls("/kafka-acl/TransactionalId/t", None).acls == []
    assert (
        decode_acls("/kafka-acl/TRANSACTIONALID/t", b"").pattern.resource_type
        == ResourceType.TRANSACTIONAL_ID
    )


def test_acl_change_notifications() -> None:
    lit = decode_acl_change("/kafka-acl-changes/acl_changes_0000000000", b"TOPIC:orders:x")
    assert lit.pattern == ResourcePattern(ResourceType.TOPIC, "orders:x", PatternType.LITERAL)
    assert encode_acl_change(lit) == b"TOPIC:orders:x"
    data = b'{"version":1,"resourceType":"TOPIC","name":"bar-","patternType":"PREFIXED"}'
    ext = decode_extended_acl_change("/x", data)
    assert ext.pattern == ResourcePattern(ResourceType.TOPIC, "bar-", PatternType.PREFIXED)
    assert encode_extended_acl_change(ext) == data


def test_delegation_token_principals_are_url_encoded() -> None:
    data = (
        b'{"version":3,"owner":"User%3Aalice","tokenRequester":"User%3Aalice","renewers":["User%3Abob"],'
        b'"issueTimestamp":1718000000000,"maxTimestamp":1718604800000,"expiryTimestamp":1718086400000,'
        b'"tokenId":"Xkq7bZ2sS3qVwP0oOQ7zVw"}'
    )
    t = decode_delegation_token("/delegation_token/tokens/Xkq7bZ2sS3qVwP0oOQ7zVw", data)
    assert t.owner == "User:alice" and t.renewers == ["User:bob"] and t.token_requester == "User:alice"
    assert semantic(encode_delegation_token(t)) == semantic(data)
    v1 = decode_delegation_token(
        "/t",
        b'{"version":1,"owner":"User%3Ao","renewers":[],"issueTimestamp":1,"maxTimestamp":2,"expiryTimestamp":3,"tokenId":"i"}',
    )
    assert v1.token_requester == "User:o" and "tokenRequester" not in semantic(encode_delegation_token(v1))


@pytest.mark.parametrize(
    ("name", "sanitized"),
    [
        ("alice", "alice"),
        ("user@1", "user%401"),
        ("a b*c~d+e", "a%20b%2Ac%7Ed%2Be"),
        ("CN=x,O=y", "CN%3Dx%2CO%3Dy"),
        ("ü/é", "%C3%BC%2F%C3%A9"),
        ("User:alice", "User%3Aalice"),
        ("a.b-c_d", "a.b-c_d"),
    ],
)
def test_sanitize_matches_javas_url_encoder(name: str, sanitized: str) -> None:
    assert sanitize(name) == sanitized
    assert desanitize(sanitized) == name


def test_desanitize_follows_url_decoder() -> None:
    assert desanitize("a+b") == "a b"
    assert desanitize("%e2%82%ac") == "€"
    with pytest.raises(ZnodeFormatError, match="malformed"):
        desanitize("bad%2", "/config/users/bad%2")


def test_json_strings_are_escaped_like_jackson() -> None:
    assert json_string('a"b\\c/d') == '"a\\"b\\\\c/d"'
    assert json_string("\x00\x1f\x08\t\n\x0c\r\x7f") == '"\\u0000\\u001F\\b\\t\\n\\f\\r\x7f"'
    assert json_string("é€😀") == '"é€😀"'


# ============================================================ errors name the znode


def _err(decode: Callable, path: str, data: bytes | None, *frags: str) -> None:
    with pytest.raises(ZnodeFormatError) as info:
        decode(path, data)
    message = str(info.value)
    assert path in message, message
    for frag in frags:
        assert frag in message, message


@pytest.mark.parametrize(
    ("decode", "path", "data", "frags"),
    [
        (decode_controller, "/controller", b"{not json", ("invalid JSON",)),
        (decode_controller, "/controller", None, ("null",)),
        (decode_controller, "/controller", b"\xff\xfe", ("not UTF-8",)),
        (decode_controller, "/controller", b"[1]", ("expected a JSON object",)),
        (decode_controller, "/controller", b'{"version":3,"brokerid":1}', ("unknown version 3",)),
        (decode_controller, "/controller", b'{"version":2}', ("missing field 'brokerid'",)),
        (
            decode_controller,
            "/controller",
            b'{"version":2,"brokerid":"1"}',
            ("'brokerid'", "32-bit integer"),
        ),
        (decode_controller, "/controller", b'{"version":2,"brokerid":1,"timestamp":12}', ("'timestamp'",)),
        (decode_controller, "/controller", b'{"version":2,"brokerid":NaN}', ("invalid JSON",)),
        (decode_controller, "/controller", b'{"version":2,"brokerid":2147483648}', ("32-bit",)),
        (decode_controller_epoch, "/controller_epoch", b" 2", ("decimal int",)),
        (decode_broker, "/brokers/ids/x", b"{}", ("broker id",)),
        (decode_broker, "/brokers/ids/1", b'{"version":0,"jmx_port":1}', ("unknown version 0",)),
        (
            decode_broker,
            "/brokers/ids/1",
            b'{"version":4,"jmx_port":1,"endpoints":["nope"]}',
            ("cannot parse endpoint",),
        ),
        (
            decode_broker,
            "/brokers/ids/1",
            b'{"version":4,"jmx_port":1,"endpoints":["X://h:1"],"listener_security_protocol_map":{}}',
            ("no security protocol",),
        ),
        (
            decode_broker,
            "/brokers/ids/1",
            b'{"version":4,"jmx_port":1,"endpoints":[],"listener_security_protocol_map":{"X":"TLS"}}',
            ("unknown security protocol",),
        ),
        (
            decode_broker,
            "/brokers/ids/1",
            b'{"version":5,"jmx_port":1,"endpoints":[],"features":{"f":{"min_version":2,"max_version":1}}}',
            ("max_version",),
        ),
        (decode_topic, "/brokers/topics/t", b'{"version":3,"partitions":{"a":[1]}}', ("partition key",)),
        (
            decode_topic,
            "/brokers/topics/t",
            b'{"version":3,"partitions":{"0":[true]}}',
            ("32-bit integers",),
        ),
        (
            decode_topic,
            "/brokers/topics/t",
            b'{"version":3,"partitions":{},"topic_id":"c2hvcnQ"}',
            ("16 bytes",),
        ),
        (
            decode_topic,
            "/brokers/topics/t",
            b'{"version":3,"partitions":{},"topic_id":"!!!!"}',
            ("base64url",),
        ),
        (
            decode_partition_state,
            "/brokers/topics/t/partitions/0/state",
            b'{"version":1,"leader":1}',
            ("missing field",),
        ),
        (
            decode_partition_state,
            "/brokers/topics/t/partitions/0/state",
            b'{"version":1,"leader":1,"leader_epoch":0,"isr":[1],"controller_epoch":1,"leader_recovery_state":2}',
            ("leader_recovery_state",),
        ),
        (
            decode_partition_state,
            "/brokers/topics/t/partitions/0/state",
            b'{"version":2,"leader":1,"leader_epoch":0,"isr":[1],"controller_epoch":1}',
            ("unknown version 2",),
        ),
        (
            decode_entity_config,
            "/config/topics/t",
            b'{"version":1,"config":{"a":1}}',
            ("config.a", "string"),
        ),
        (decode_entity_config, "/config/topics/t", b'{"version":1,"config":[]}', ("'config'",)),
        (
            decode_client_quota_config,
            "/config/users/u",
            b'{"version":1,"config":{"SCRAM-SHA-512":"salt=a"}}',
            ("SCRAM-SHA-512",),
        ),
        (
            decode_client_quota_config,
            "/config/users/u",
            b'{"version":1,"config":{"SCRAM-SHA-256":"salt=*,stored_key=AA==,server_key=AA==,iterations=1"}}',
            ("base64",),
        ),
        (decode_client_quota_config, "/config/topics/t", b"{}", ("not a client-quota config path",)),
        (
            decode_features,
            "/feature",
            b'{"version":2,"status":1,"features":{"f":{"max_version_level":0}}}',
            ("max_version_level",),
        ),
        (decode_features, "/feature", b'{"version":2,"status":2,"features":{}}', ("unknown status",)),
        (
            decode_features,
            "/feature",
            b'{"version":1,"status":1,"features":{"f":{"max_version_level":1}}}',
            ("min_version_level",),
        ),
        (decode_migration, "/migration", b'{"version":1}', ("unknown version 1",)),
        (decode_acls, "/kafka-acl/Topic/t", b'{"version":2,"acls":[]}', ("unknown version 2",)),
        (
            decode_acls,
            "/kafka-acl/Topic/t",
            b'{"version":1,"acls":[{"principal":"alice","permissionType":"Allow","operation":"Read","host":"*"}]}',
            ("principal",),
        ),
        (decode_acls, "/kafka-acl/Nope/t", b"", ("unknown ACL resource type",)),
        (decode_acls, "/kafka-acl-extended/match/Topic/t", b"", ("pattern type",)),
        (decode_acl_change, "/kafka-acl-changes/acl_changes_0000000001", b"TOPIC", ("ResourceType:name",)),
        (decode_delegation_token, "/delegation_token/tokens/t", b'{"version":4}', ("unknown version 4",)),
        (decode_cluster_id, "/cluster/id", b'{"version":1,"id":"x"}', ("unknown version",)),
        (
            decode_producer_id_block,
            "/latest_producer_id_block",
            b'{"version":1,"broker":1,"block_start":1,"block_end":"2"}',
            ("block_start",),
        ),
    ],
)
def test_malformed_data_is_reported_with_the_path(
    decode: Callable, path: str, data: bytes | None, frags: tuple[str, ...]
) -> None:
    _err(decode, path, data, *frags)


def test_deeply_nested_json_is_a_format_error() -> None:
    _err(decode_controller, "/controller", b"[" * 100000, "invalid JSON")


# ============================================================ hypothesis: round trips

# (strategy, encode, decode(model, data) -> model); path-derived identities are rebuilt from the model.
ROUND_TRIPS: dict[str, tuple[st.SearchStrategy[Any], Callable[[Any], bytes], Callable[[Any, bytes], Any]]] = {
    "controller": (
        controllers,
        encode_controller,
        lambda m, d: decode_controller(
            "/controller", d, zk_version=m.zk_version, ephemeral_owner=m.ephemeral_owner
        ),
    ),
    "controller_epoch": (
        st.builds(ControllerEpoch, INT32, INT32),
        encode_controller_epoch,
        lambda m, d: decode_controller_epoch("/controller_epoch", d, zk_version=m.zk_version),
    ),
    "broker": (
        brokers(),
        encode_broker,
        lambda m, d: decode_broker(
            f"/brokers/ids/{m.broker_id}",
            d,
            czxid=m.czxid,
            zk_version=m.zk_version,
            ephemeral_owner=m.ephemeral_owner,
        ),
    ),
    "topic": (topics(), encode_topic, lambda m, d: decode_topic(f"/brokers/topics/{m.name}", d)),
    "partition_state": (
        partition_states,
        encode_partition_state,
        lambda m, d: decode_partition_state("/s", d, zk_version=m.zk_version),
    ),
    "entity_config": (
        st.builds(EntityConfig, st.sampled_from(["topics", "brokers"]), NAME, CONFIG_MAP),
        encode_entity_config,
        lambda m, d: decode_entity_config(f"/config/{m.entity_type}/{m.name}", d),
    ),
    "client_quotas": (
        client_quotas(),
        encode_client_quota_config,
        lambda m, d: decode_client_quota_config(f"/config/{m.entity_path}", d),
    ),
    "config_change": (config_changes, encode_config_change, lambda m, d: decode_config_change("/c", d)),
    "reassignment": (reassignments, encode_reassignment, lambda m, d: decode_reassignment("/r", d)),
    "partition_list": (
        partition_lists,
        encode_partition_list,
        lambda m, d: decode_partition_list("/p", d),
    ),
    "log_dir_event": (log_dir_events, encode_log_dir_event, lambda m, d: decode_log_dir_event("/l", d)),
    "cluster_id": (
        st.text(max_size=30),
        encode_cluster_id,
        lambda m, d: decode_cluster_id("/cluster/id", d),
    ),
    "producer_id_block": (
        producer_blocks(),
        encode_producer_id_block,
        lambda m, d: decode_producer_id_block("/b", d),
    ),
    "features": (
        finalized_features(),
        encode_features,
        lambda m, d: decode_features("/feature", d, zk_version=m.zk_version),
    ),
    "migration": (
        migration_states,
        encode_migration,
        lambda m, d: decode_migration("/migration", d, zk_version=m.zk_version, mtime=m.last_updated_ms),
    ),
    "acls": (
        acl_resources(),
        encode_acls,
        lambda m, d: decode_acls(
            f"/kafka-acl{'' if m.pattern.pattern_type == PatternType.LITERAL else '-extended/prefixed'}"
            f"/{m.pattern.resource_type.pascal_name}/{m.pattern.name}",
            d,
            zk_version=m.zk_version,
        ),
    ),
    "acl_change": (literal_acl_changes, encode_acl_change, lambda m, d: decode_acl_change("/a", d)),
    "extended_acl_change": (
        extended_acl_changes,
        encode_extended_acl_change,
        lambda m, d: decode_extended_acl_change("/a", d),
    ),
    "delegation_token": (
        delegation_tokens(),
        encode_delegation_token,
        lambda m, d: decode_delegation_token("/t", d),
    ),
    "token_change": (
        st.text(max_size=30),
        encode_token_change,
        lambda m, d: decode_token_change("/t", d),
    ),
}


@pytest.mark.parametrize("kind", sorted(ROUND_TRIPS))
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_encode_decode_round_trip(kind: str, data: st.DataObject) -> None:
    strategy, encode, decode = ROUND_TRIPS[kind]
    model = data.draw(strategy)
    encoded = encode(model)
    assert decode(model, encoded) == model
    assert encode(decode(model, encoded)) == encoded


DECODERS: dict[str, Callable[[bytes | None], Any]] = {
    "controller": lambda d: decode_controller("/controller", d),
    "controller_epoch": lambda d: decode_controller_epoch("/controller_epoch", d),
    "broker": lambda d: decode_broker("/brokers/ids/1", d),
    "topic": lambda d: decode_topic("/brokers/topics/t", d),
    "partition_state": lambda d: decode_partition_state("/brokers/topics/t/partitions/0/state", d),
    "entity_config": lambda d: decode_entity_config("/config/topics/t", d),
    "client_quotas": lambda d: decode_client_quota_config("/config/users/u", d),
    "config_change": lambda d: decode_config_change("/config/changes/config_change_0000000000", d),
    "reassignment": lambda d: decode_reassignment("/admin/reassign_partitions", d),
    "partition_list": lambda d: decode_partition_list("/admin/preferred_replica_election", d),
    "log_dir_event": lambda d: decode_log_dir_event(
        "/log_dir_event_notification/log_dir_event_0000000000", d
    ),
    "cluster_id": lambda d: decode_cluster_id("/cluster/id", d),
    "producer_id_block": lambda d: decode_producer_id_block("/latest_producer_id_block", d),
    "features": lambda d: decode_features("/feature", d),
    "migration": lambda d: decode_migration("/migration", d),
    "acls": lambda d: decode_acls("/kafka-acl/Topic/t", d),
    "acl_change": lambda d: decode_acl_change("/kafka-acl-changes/acl_changes_0000000000", d),
    "extended_acl_change": lambda d: decode_extended_acl_change(
        "/kafka-acl-extended-changes/acl_changes_0000000000", d
    ),
    "delegation_token": lambda d: decode_delegation_token("/delegation_token/tokens/t", d),
    "token_change": lambda d: decode_token_change(
        "/delegation_token/token_changes/token_change_0000000000", d
    ),
}

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)


def _decodes_or_format_error(decode: Callable[[bytes | None], Any], data: bytes | None) -> None:
    with contextlib.suppress(ZnodeFormatError):
        decode(data)


@pytest.mark.parametrize("kind", sorted(DECODERS))
@settings(max_examples=150, deadline=None)
@given(data=st.binary(max_size=80) | st.none())
def test_arbitrary_bytes_raise_only_format_errors(kind: str, data: bytes | None) -> None:
    _decodes_or_format_error(DECODERS[kind], data)


@pytest.mark.parametrize("kind", sorted(DECODERS))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mangled_valid_json_raises_only_format_errors(kind: str, data: st.DataObject) -> None:
    """Valid encodings with one field removed or replaced by any JSON value: only our error type escapes."""
    strategy, encode, _ = ROUND_TRIPS[kind]
    encoded = encode(data.draw(strategy))
    try:
        obj = json.loads(encoded)
    except ValueError:
        obj = encoded.decode("utf-8", "replace")
    if isinstance(obj, dict) and obj:
        key = data.draw(st.sampled_from(sorted(obj)))
        if data.draw(st.booleans()):
            del obj[key]
        else:
            obj[key] = data.draw(JSON_VALUES)
    else:
        obj = data.draw(JSON_VALUES)
    mangled = json.dumps(obj, allow_nan=True).encode()
    _decodes_or_format_error(DECODERS[kind], mangled)


# ============================================================ JVM oracle (real Scala 2.13 collections + Jackson)

SPARK_JARS = REPO / ".venv/lib/python3.11/site-packages/pyspark/jars"

# Builds each znode's JSON the way ZkData.scala / AclEntry.java / DelegationTokenManagerZk.scala do: the same
# Scala and Java map types, filled in the same order, serialised by a default Jackson ObjectMapper.
ORACLE_SOURCE = r"""
import scala.jdk.CollectionConverters._
import scala.collection.mutable
import scala.beans.BeanProperty
import com.fasterxml.jackson.annotation.JsonProperty
import com.fasterxml.jackson.databind.{JsonNode, ObjectMapper}

case class Replicas(@BeanProperty @JsonProperty("topic") topic: String,
                    @BeanProperty @JsonProperty("partition") partition: Int,
                    @BeanProperty @JsonProperty("replicas") replicas: java.util.List[Int])
case class Reassignment(@BeanProperty @JsonProperty("version") version: Int,
                        @BeanProperty @JsonProperty("partitions") partitions: java.util.List[Replicas])
case class AclChange(@BeanProperty @JsonProperty("version") version: Int,
                     @BeanProperty @JsonProperty("resourceType") resourceType: String,
                     @BeanProperty @JsonProperty("name") name: String,
                     @BeanProperty @JsonProperty("patternType") patternType: String)

object Oracle {
  val mapper = new ObjectMapper()
  def arr(n: JsonNode): Seq[JsonNode] = n.elements().asScala.toSeq
  def strs(n: JsonNode): Seq[String] = arr(n).map(_.asText)
  def ints(n: JsonNode): Seq[Int] = arr(n).map(_.asInt)
  def optStr(n: JsonNode): String = if (n == null || n.isNull) null else n.asText
  def san(s: String): String = java.net.URLEncoder.encode(s, "UTF-8").replace("*", "%2A").replace("+", "%20")
  def json(o: Any): String = mapper.writeValueAsString(o)

  def encode(in: JsonNode): String = {
    def i(k: String) = in.get(k).asInt
    def l(k: String) = in.get(k).asLong
    def s(k: String) = in.get(k).asText
    in.get("k").asText match {
      case "immutable" => json(Map(strs(in.get("keys")).map(_ -> 0): _*).asJava)
      case "mutable" =>
        val m = mutable.Map(strs(in.get("keys")).map(_ -> 0).toVector: _*)  // a sized Seq, like a literal
        strs(in.get("added")).foreach(k => m += (k -> 0))
        json(m.asJava)
      case "hashmap" =>
        val m = new java.util.HashMap[String, Integer](); strs(in.get("keys")).foreach(m.put(_, 0)); json(m)
      case "properties" =>
        val p = new java.util.Properties(); strs(in.get("keys")).foreach(p.setProperty(_, "")); json(p)
      case "double" => java.lang.Double.toString(java.lang.Double.longBitsToDouble(l("bits")))
      case "sanitize" => san(s("name"))
      case "controller" =>
        json(Map("version" -> 2, "brokerid" -> i("id"), "timestamp" -> l("ts").toString, "kraftControllerEpoch" -> i("epoch")).asJava)
      case "broker" =>
        val v = i("version")
        val m = mutable.Map("version" -> v, "host" -> optStr(in.get("host")), "port" -> i("port"),
          "endpoints" -> strs(in.get("endpoints")).toBuffer.asJava, "jmx_port" -> i("jmx"), "timestamp" -> l("ts").toString)
        Option(optStr(in.get("rack"))).foreach(r => if (v >= 3) m += ("rack" -> r))
        if (v >= 4) m += ("listener_security_protocol_map" -> arr(in.get("lsp")).map(x => x.get(0).asText -> x.get(1).asText).toMap.asJava)
        if (v >= 5) {
          val f = new java.util.HashMap[String, java.util.Map[String, java.lang.Short]]()
          arr(in.get("features")).foreach { x =>
            val r = new java.util.LinkedHashMap[String, java.lang.Short]()
            r.put("min_version", x.get(1).asInt.toShort); r.put("max_version", x.get(2).asInt.toShort)
            f.put(x.get(0).asText, r)
          }
          m += ("features" -> f)
        }
        json(m.asJava)
      case "topic" =>
        val parts = mutable.Map[String, java.util.List[Int]]()
        val adding = mutable.Map[String, java.util.List[Int]]()
        val removing = mutable.Map[String, java.util.List[Int]]()
        arr(in.get("partitions")).foreach { x =>
          val p = x.get(0).asInt.toString
          parts += (p -> ints(x.get(1)).asJava)
          if (ints(x.get(2)).nonEmpty) adding += (p -> ints(x.get(2)).asJava)
          if (ints(x.get(3)).nonEmpty) removing += (p -> ints(x.get(3)).asJava)
        }
        val m = mutable.Map("version" -> i("version"), "partitions" -> parts.asJava,
          "adding_replicas" -> adding.asJava, "removing_replicas" -> removing.asJava)
        Option(optStr(in.get("topic_id"))).foreach(id => m += "topic_id" -> id)
        json(m.asJava)
      case "state" =>
        var m = Map("version" -> 1, "leader" -> i("leader"), "leader_epoch" -> i("epoch"),
          "controller_epoch" -> i("cepoch"), "isr" -> ints(in.get("isr")).asJava)
        if (i("lrs") != 0) m = m ++ Seq("leader_recovery_state" -> i("lrs"))
        json(m.asJava)
      case "config" =>
        val p = new java.util.Properties()
        arr(in.get("config")).foreach(x => p.setProperty(x.get(0).asText, x.get(1).asText))
        json(Map("version" -> 1, "config" -> p).asJava)
      case "feature" =>
        val v = i("version")
        val features: Map[String, Short] = Map(arr(in.get("features")).map(x => x.get(0).asText -> x.get(1).asInt.toShort): _*)
        def asJava(m: Map[String, Map[String, Short]]) =
          m.map { case (n, levels) => n -> levels.map { case (k, x) => k -> java.lang.Short.valueOf(x) }.asJava }.asJava
        val fs = if (v == 1) asJava(features.map { case (f, x) => f -> Map("max_version_level" -> x, "min_version_level" -> x) })
                 else asJava(features.map { case (f, x) => f -> Map("max_version_level" -> x) })
        json(mutable.Map("version" -> v, "status" -> i("status"), "features" -> fs).asJava)
      case "migration" =>
        json(Map("version" -> 0, "kraft_controller_id" -> i("id"), "kraft_controller_epoch" -> i("epoch"),
          "kraft_metadata_offset" -> l("offset"), "kraft_metadata_epoch" -> i("mepoch")).asJava)
      case "acls" =>
        val res = new java.util.HashMap[String, Object]()
        res.put("version", Integer.valueOf(1))
        val list = new java.util.ArrayList[Object]()
        arr(in.get("acls")).foreach { x =>
          val e = new java.util.HashMap[String, Object]()
          e.put("principal", x.get(0).asText); e.put("permissionType", x.get(1).asText)
          e.put("operation", x.get(2).asText); e.put("host", x.get(3).asText)
          list.add(e)
        }
        res.put("acls", list)
        json(res)
      case "token" =>
        val m = mutable.Map[String, Any]()
        m("version") = 3
        m("owner") = san(s("owner"))
        m("tokenRequester") = san(s("requester"))
        m("renewers") = strs(in.get("renewers")).map(san).asJava
        m("issueTimestamp") = l("issue")
        m("maxTimestamp") = l("max")
        m("expiryTimestamp") = l("expiry")
        m("tokenId") = s("id")
        json(m.toMap.asJava)
      case "cluster_id" => json(Map("version" -> "1", "id" -> s("id")).asJava)
      case "producer_block" =>
        json(Map("version" -> 1L, "broker" -> i("broker"), "block_start" -> l("start").toString, "block_end" -> l("end").toString).asJava)
      case "log_dir" => json(Map("version" -> 1, "broker" -> i("broker"), "event" -> 1).asJava)
      case "config_change" => json(Map("version" -> 2, "entity_path" -> s("path")).asJava)
      case "partition_list" =>
        json(Map("version" -> 1, "partitions" -> arr(in.get("partitions")).map(x =>
          Map("topic" -> x.get(0).asText, "partition" -> x.get(1).asInt).asJava).asJava).asJava)
      case "reassign" =>
        json(Reassignment(1, arr(in.get("partitions")).map(x => Replicas(x.get(0).asText, x.get(1).asInt, ints(x.get(2)).asJava)).asJava))
      case "ext_acl_change" => json(AclChange(1, s("type"), s("name"), s("pattern")))
    }
  }

  def main(args: Array[String]): Unit = {
    val in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in, "UTF-8"))
    val out = new java.io.PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, "UTF-8")
    var line = in.readLine()
    while (line != null) { out.println(encode(mapper.readTree(line))); line = in.readLine() }
  }
}
"""


def _jar(prefix: str) -> Path:
    found = sorted(SPARK_JARS.glob(f"{prefix}*.jar"))
    if not found:
        pytest.skip(f"{prefix} jar not available")
    return found[0]


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Callable[[list[dict[str, Any]]], list[str]]:
    if shutil.which("java") is None:
        pytest.skip("java not installed")
    scala = [_jar("scala-library-2.13"), _jar("scala-reflect-2.13"), _jar("scala-compiler-2.13")]
    jackson = [_jar("jackson-databind-2"), _jar("jackson-core-2"), _jar("jackson-annotations-2")]
    work = tmp_path_factory.mktemp("oracle")
    (work / "Oracle.scala").write_text(ORACLE_SOURCE)
    compile_cp = ":".join(map(str, scala))
    subprocess.run(
        [
            "java",
            "-cp",
            compile_cp,
            "scala.tools.nsc.Main",
            "-usejavacp",
            "-nowarn",
            "-cp",
            ":".join(map(str, jackson)),
            "-d",
            str(work),
            str(work / "Oracle.scala"),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    run_cp = ":".join(map(str, [work, scala[0], *jackson]))

    def run(requests: list[dict[str, Any]]) -> list[str]:
        lines = "\n".join(json.dumps(r) for r in requests) + "\n"
        done = subprocess.run(
            ["java", "-cp", run_cp, "Oracle"],
            input=lines.encode(),
            capture_output=True,
            timeout=300,
            check=True,
        )
        out = done.stdout.decode("utf-8").split("\n")[:-1]
        assert len(out) == len(requests), done.stderr.decode()[-2000:]
        return out

    return run


def _random_text(rng: random.Random, n: int = 8) -> str:
    alphabet = 'abcXYZ019._-:@ /*+~"\\\x00\x1f\té€😀'
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, n)))


def _oracle_cases(rng: random.Random) -> list[tuple[dict[str, Any], bytes]]:
    """Pairs of (oracle request, our bytes) covering every encoder and the JVM order helpers."""
    cases: list[tuple[dict[str, Any], bytes]] = []
    words = [
        "version",
        "config",
        "leader",
        "isr",
        "topic_id",
        "host",
        "port",
        "a",
        "bb",
        "Aa",
        "BB",
        "x.y",
        "ü",
    ]

    def key_sets(max_n: int) -> list[str]:
        return list(
            dict.fromkeys(rng.choice(words) + _random_text(rng, 4) for _ in range(rng.randint(0, max_n)))
        )

    for _ in range(60):
        keys = key_sets(40)
        cases.append(({"k": "immutable", "keys": keys}, _keys_json(list(jvm.scala_map_order(tuple(keys))), 0)))
        initial, added = keys[: len(keys) // 2], keys[len(keys) // 2 :]
        order = jvm.scala_mutable_apply_order(initial, added)
        cases.append(({"k": "mutable", "keys": initial, "added": added}, _keys_json(order, 0)))
        cases.append(({"k": "hashmap", "keys": keys}, _keys_json(jvm.java_hash_map_order(keys), 0)))
        small = keys[:11]  # below the first ConcurrentHashMap resize, where insertion order is not reshuffled
        cases.append(
            ({"k": "properties", "keys": small}, _keys_json(jvm.java_properties_order(small, java8=False), ""))
        )
    for _ in range(40):
        value = rng.choice(
            [
                rng.uniform(0, 1000),
                rng.randint(0, 10**6) / 100,
                10.0 ** rng.randint(-12, 12),
                rng.uniform(1e-6, 1e12),
            ]
        )
        bits = struct.unpack("<q", struct.pack("<d", value))[0]
        cases.append(({"k": "double", "bits": bits}, jvm.java_double_to_string(value).encode()))
        name = _random_text(rng, 10)
        cases.append(({"k": "sanitize", "name": name}, sanitize(name).encode()))
    for _ in range(40):
        c = ControllerRegistration(rng.randint(-5, 5000), rng.randint(0, 2**41), rng.randint(-1, 50))
        cases.append(
            (
                {"k": "controller", "id": c.broker_id, "ts": c.timestamp, "epoch": c.kraft_controller_epoch},
                encode_controller(c),
            )
        )
        cases.append(_oracle_broker(rng))
        cases.append(_oracle_topic(rng))
        s = PartitionState(
            rng.randint(-1, 9),
            rng.randint(0, 99),
            [rng.randint(0, 9) for _ in range(rng.randint(0, 4))],
            rng.randint(0, 9),
            rng.choice([0, 1]),
        )
        cases.append(
            (
                {
                    "k": "state",
                    "leader": s.leader,
                    "epoch": s.leader_epoch,
                    "cepoch": s.controller_epoch,
                    "isr": s.isr,
                    "lrs": s.leader_recovery_state,
                },
                encode_partition_state(s),
            )
        )
        config = {
            rng.choice(words) + _random_text(rng, 6): _random_text(rng) for _ in range(rng.randint(0, 11))
        }
        cfg = EntityConfig("topics", "t", config)
        cases.append(
            ({"k": "config", "config": list(config.items())}, encode_entity_config(cfg, java8=False))
        )
        feats = {
            rng.choice(words) + _random_text(rng, 3): rng.randint(1, 30) for _ in range(rng.randint(0, 7))
        }
        f = FinalizedFeatures(FeatureStatus(rng.randint(0, 1)), feats, rng.choice([1, 2]))
        cases.append(
            (
                {
                    "k": "feature",
                    "version": f.version,
                    "status": int(f.status),
                    "features": list(feats.items()),
                },
                encode_features(f),
            )
        )
        m = MigrationState(
            rng.randint(-1, 3000), rng.randint(-1, 9), rng.randint(-1, 2**40), rng.randint(-1, 9)
        )
        cases.append(
            (
                {
                    "k": "migration",
                    "id": m.kraft_controller_id,
                    "epoch": m.kraft_controller_epoch,
                    "offset": m.kraft_metadata_offset,
                    "mepoch": m.kraft_metadata_epoch,
                },
                encode_migration(m),
            )
        )
        acls = [
            AclEntry(
                "User:" + _random_text(rng),
                _random_text(rng),
                rng.choice(list(AclOperation)),
                rng.choice(list(AclPermissionType)),
            )
            for _ in range(rng.randint(0, 3))
        ]
        resource = AclResource(ResourcePattern(ResourceType.TOPIC, "t", PatternType.LITERAL), acls)
        rows = [
            [a.principal, pascal_case(a.permission_type.name), pascal_case(a.operation.name), a.host]
            for a in acls
        ]
        cases.append(({"k": "acls", "acls": rows}, encode_acls(resource)))
        t = DelegationToken(
            _random_text(rng),
            "User:" + _random_text(rng),
            "User:" + _random_text(rng),
            ["User:" + _random_text(rng) for _ in range(rng.randint(0, 2))],
            rng.randint(0, 2**42),
            rng.randint(0, 2**42),
            rng.randint(0, 2**42),
        )
        cases.append(
            (
                {
                    "k": "token",
                    "owner": t.owner,
                    "requester": t.token_requester,
                    "renewers": t.renewers,
                    "issue": t.issue_timestamp,
                    "max": t.max_timestamp,
                    "expiry": t.expiry_timestamp,
                    "id": t.token_id,
                },
                encode_delegation_token(t),
            )
        )
        cid = _random_text(rng, 22)
        cases.append(({"k": "cluster_id", "id": cid}, encode_cluster_id(cid)))
        start = rng.randint(0, 2**50)
        b = ProducerIdBlock(rng.randint(-1, 9), start, start + 999)
        cases.append(
            (
                {"k": "producer_block", "broker": b.broker_id, "start": b.block_start, "end": b.block_end},
                encode_producer_id_block(b),
            )
        )
        cases.append(
            ({"k": "log_dir", "broker": b.broker_id}, encode_log_dir_event(LogDirEvent(b.broker_id)))
        )
        entity = _random_text(rng, 12)
        cases.append(
            ({"k": "config_change", "path": entity}, encode_config_change(ConfigChangeNotification(entity)))
        )
        tps = [TopicPartition(_random_text(rng), rng.randint(0, 99)) for _ in range(rng.randint(0, 3))]
        cases.append(
            (
                {"k": "partition_list", "partitions": [[tp.topic, tp.partition] for tp in tps]},
                encode_partition_list(PartitionList(tps)),
            )
        )
        moves = [ReplicaReassignment(tp.topic, tp.partition, [rng.randint(0, 9)]) for tp in tps]
        cases.append(
            (
                {"k": "reassign", "partitions": [[r.topic, r.partition, r.replicas] for r in moves]},
                encode_reassignment(LegacyReassignment(moves)),
            )
        )
        change = AclChangeNotification(
            ResourcePattern(rng.choice(list(ResourceType)), _random_text(rng), rng.choice(list(PatternType)))
        )
        p = change.pattern
        cases.append(
            (
                {
                    "k": "ext_acl_change",
                    "type": p.resource_type.name,
                    "name": p.name,
                    "pattern": p.pattern_type.name,
                },
                encode_extended_acl_change(change),
            )
        )
    return cases


def _keys_json(keys: list[str], value: Any) -> bytes:
    return ("{" + ",".join(f"{json_string(k)}:{json.dumps(value)}" for k in keys) + "}").encode()


def _oracle_broker(rng: random.Random) -> tuple[dict[str, Any], bytes]:
    version = rng.choice([2, 3, 4, 5, 5, 5])
    names = rng.sample(
        ["PLAINTEXT", "SSL", "SASL_SSL", "SASL_PLAINTEXT", "INTERNAL", "EXTERNAL", "REPL", "CLIENT"],
        rng.randint(0, 6),
    )
    if version < 4:
        names = [n for n in names if n in SECURITY_PROTOCOLS]
    endpoints = [
        BrokerEndpoint(
            n,
            rng.choice([None, "host.example", "10.0.0.1", "::1"]),
            rng.randint(1, 65535),
            n if n in SECURITY_PROTOCOLS else rng.choice(SECURITY_PROTOCOLS),
        )
        for n in names
    ]
    features = {
        rng.choice(["metadata.version", "kraft.version", "group.version", "f"])
        + _random_text(rng, 2): FeatureRange(0, rng.randint(0, 20))
        for _ in range(rng.randint(0, 4))
    }
    b = BrokerRegistration(
        rng.randint(0, 999),
        endpoints,
        rng.choice([-1, 9999]),
        rng.randint(0, 2**41),
        rng.choice([None, "rack-" + _random_text(rng, 3)]),
        features if version == 5 else {},
        version,
    )
    plain = b.plaintext_endpoint
    request = {
        "k": "broker",
        "version": version,
        "host": None if plain is None else plain.host,
        "port": -1 if plain is None else plain.port,
        "endpoints": [e.connection_string for e in endpoints],
        "jmx": b.jmx_port,
        "ts": b.timestamp,
        "rack": b.rack,
        "lsp": [[e.listener, e.security_protocol] for e in endpoints],
        "features": [[n, r.min_version, r.max_version] for n, r in b.features.items()],
    }
    return request, encode_broker(b)


def _oracle_topic(rng: random.Random) -> tuple[dict[str, Any], bytes]:
    partitions = {
        p: [rng.randint(0, 9) for _ in range(rng.randint(1, 3))]
        for p in rng.sample(range(3000), rng.randint(0, 120))
    }
    adding = {p: [rng.randint(0, 9)] for p in partitions if rng.random() < 0.1}
    removing = {p: [rng.randint(0, 9)] for p in partitions if rng.random() < 0.1}
    t = Topic(
        "t",
        rng.choice([None, uuid.UUID(int=rng.getrandbits(128))]),
        partitions,
        adding,
        removing,
        rng.choice([2, 3]),
    )
    rows = [[p, r, adding.get(p, []), removing.get(p, [])] for p, r in partitions.items()]
    request = {
        "k": "topic",
        "version": t.version,
        "partitions": rows,
        "topic_id": None if t.topic_id is None else format_uuid(t.topic_id),
    }
    return request, encode_topic(t)


@pytest.mark.slow
def test_encoders_match_scala_and_jackson(oracle: Callable[[list[dict[str, Any]]], list[str]]) -> None:
    """Every encoder and order helper against real Scala 2.13 collections and Jackson (one JVM run)."""
    cases = _oracle_cases(random.Random(20240601))
    answers = oracle([request for request, _ in cases])
    mismatches = [
        (request["k"], ours, theirs)
        for (request, ours), theirs in zip(cases, answers, strict=True)
        if ours != theirs.encode()
    ]
    assert not mismatches, mismatches[:3]


def test_uuid_text_round_trip() -> None:
    u = uuid.UUID("6d660bbe-4352-41e5-9d2a-186bde7d2f37")
    assert format_uuid(u) == "bWYLvkNSQeWdKhhr3n0vNw"
    padded = base64.urlsafe_b64encode(u.bytes).decode()
    assert (
        decode_topic("/brokers/topics/t", f'{{"version":3,"topic_id":"{padded}"}}'.encode()).topic_id == u
    )


_STATE_KEYS = ["version", "leader", "leader_epoch", "controller_epoch", "isr", "leader_recovery_state", "other"]
_STATE_VALUES = st.one_of(
    st.sampled_from([0, 1, 2, -1, 2**31 - 1, -(2**31), 2**31, 2**63, 2**64, 10**23]),
    st.integers(),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False),
    st.text(max_size=3),
    st.lists(st.one_of(st.integers(min_value=-(2**65), max_value=2**65), st.booleans(), st.floats()), max_size=3),
)


@settings(max_examples=300, deadline=None)
@given(
    obj=st.dictionaries(st.sampled_from(_STATE_KEYS), _STATE_VALUES),
    usual=st.booleans(),
)
def test_partition_state_fast_path_reads_and_refuses_what_the_checked_decoder_does(
    obj: dict[str, Any], usual: bool
) -> None:
    if usual:  # most examples close to a real state znode, one field off
        obj = {"version": 1, "leader": 1, "leader_epoch": 2, "controller_epoch": 3, "isr": [1, 2]} | obj
    data = json.dumps(obj).encode()
    assert _outcome(decode_partition_state, data) == _outcome(_checked_partition_state, data)


@pytest.mark.parametrize(
    "data",
    [
        b'{"version":1,"leader":99999999999999999999999,"leader_epoch":0,"controller_epoch":0,"isr":[]}',
        b'{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":0,"isr":[1],"x":"\\ud800"}',
        b'{"version":1,"leader":NaN,"leader_epoch":0,"controller_epoch":0,"isr":[]}',
        b'{"version":1.0,"leader":1,"leader_epoch":0,"controller_epoch":0,"isr":[]}',
        b'\xef\xbb\xbf{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":0,"isr":[]}',
        b'{"version":1,"leader":1,"leader":2,"leader_epoch":0,"controller_epoch":0,"isr":[2]}',
        b'[1]',
        b'\xff',
    ],
)
def test_partition_state_znodes_json_readers_disagree_on_get_the_standard_answer(data: bytes) -> None:
    assert _outcome(decode_partition_state, data) == _outcome(_checked_partition_state, data)


@pytest.mark.parametrize(
    ("partitions", "expected"),
    [
        (b'{"007":[1],"+8":[2],"9":[]}', {7: [1], 8: [2], 9: []}),
        (b'{"2147483648":[1]}', "partition key '2147483648' in 'partitions' must be a decimal int"),
        (b'{"\xd9\xa3":[1]}', "partition key"),  # an Arabic-Indic digit: Java's parseInt takes ASCII only
        (b'{"1":[1.0]}', "field 'partitions.1' must be an array of 32-bit integers, got [1.0]"),
        (b'{"1":[true]}', "field 'partitions.1' must be an array of 32-bit integers, got [true]"),
        (b'{"1":[2147483648]}', "must be an array of 32-bit integers"),
    ],
)
def test_topic_partition_keys_and_replicas_follow_javas_rules(partitions: bytes, expected: Any) -> None:
    data = b'{"version":3,"partitions":' + partitions + b',"adding_replicas":{},"removing_replicas":{}}'
    if isinstance(expected, dict):
        assert decode_topic("/brokers/topics/t", data).partitions == expected
    else:
        with pytest.raises(ZnodeFormatError, match=re.escape(expected)):
            decode_topic("/brokers/topics/t", data)


def _outcome(decode: Callable[..., Any], data: bytes) -> Any:
    try:
        return decode("/brokers/topics/t/partitions/0/state", data, zk_version=4)
    except ZnodeFormatError as e:
        return str(e)


@settings(max_examples=300, deadline=None)
@given(
    partitions=st.dictionaries(
        st.one_of(st.sampled_from(["0", "7", "007", "+1", "-1", "", "2147483647", "123456789", "\u0663"]),
                  st.text(alphabet="0123456789+-", max_size=11)),
        st.one_of(
            st.lists(st.integers(min_value=-(2**32), max_value=2**32), max_size=4),
            st.lists(st.one_of(st.integers(0, 5), st.booleans(), st.floats(0, 5)), max_size=3),
            st.integers(),
            st.none(),
        ),
        max_size=6,
    )
)
def test_topic_assignments_read_a_whole_topic_at_once_as_partition_by_partition(
    partitions: dict[str, Any],
) -> None:
    from migrate.zk.znodes import topics as topic_codec

    data = json.dumps({"version": 3, "partitions": partitions}).encode()

    def outcome() -> Any:
        try:
            return decode_topic("/brokers/topics/t", data).partitions
        except ZnodeFormatError as e:
            return str(e)

    at_once = outcome()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(topic_codec, "_usual_replica_map", lambda raw: False)
        one_by_one = outcome()
    assert at_once == one_by_one
