"""Dual-write acceptance for every request the bridge serves, on a real ZooKeeper seeded with Kafka 3.5's real
cluster: each request goes over TCP (directly and, when forwardable, in an EnvelopeRequest); afterwards the log
on disk, the live image and ZooKeeper agree, ZooKeeper's znodes are byte for byte what Kafka's encoders give for
the expected cluster model (change notifications included), and errors are Kafka's."""

from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import json
import time
import urllib.request
import uuid
from datetime import timedelta
from typing import Any

import pytest
from click.testing import CliRunner
from kazoo.client import KazooClient
from kazoo.security import ACL, ANYONE_ID_UNSAFE, OPEN_ACL_UNSAFE, Permissions
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

from bridge.controller import BridgeController
from bridge.handlers._common import nested
from bridge.kafka import protocol
from bridge.kafka.client import send_envelope_sync, send_request_sync
from bridge.kafka.protocol import KafkaPrincipal, encode_request
from bridge.zk.planner import plan_reconciliation
from cli.status_cmd import status_cmd
from migrate import jvm
from migrate.kraft.reader import load_image
from migrate.zk.cluster import from_tree, to_znodes
from migrate.zk.live import read_tree
from migrate.zk.model import (
    AclChangeNotification,
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
    ScramCredential,
    Topic,
    ZkClusterModel,
)
from tests.support import requests
from tests.support.bridge import NODE_ID
from tests.support.requests import (
    ALLOCATE_PRODUCER_IDS,
    ALTER_SCRAM,
    APPEND,
    BROKER,
    CREATE_ACLS,
    CREATE_TOPICS,
    DELETE,
    DELETE_ACLS,
    DELETE_TOPICS,
    SET,
    SUBTRACT,
    TOPIC,
    alter_client_quotas,
    alter_configs_request,
    create_partitions,
    incremental,
)

pytestmark = pytest.mark.zookeeper

STOCK = "current_stock"
STOCK_ID = uuid.UUID("6d660bbe-4352-41e5-9d2a-186bde7d2f37")


# ---------------------------------------------------------------------------------------------- checking


class Cluster:
    """The test's view of one bridge: sends requests, and checks log, image and ZooKeeper after each."""

    def __init__(self, bridge: BridgeController, zk_connect: str) -> None:
        self.bridge = bridge
        self.zk_connect = zk_connect
        self.model = self.read()
        self.check(self.model)

    @property
    def port(self) -> int:
        return self.bridge.listen_port

    @property
    def end_offset(self) -> int:
        assert self.bridge.log is not None
        return self.bridge.log.end_offset

    @property
    def kraft_epoch(self) -> int:
        assert self.bridge.log is not None
        return self.bridge.log.leader_epoch

    def read(self) -> ZkClusterModel:
        return from_tree(read_tree(self.zk_connect, acls=False))

    def send(self, request: Any) -> Any:
        return send_request_sync("127.0.0.1", self.port, request)

    def forward(self, request: Any, correlation_id: int = 11) -> Any:
        """Send `request` as a ZooKeeper-mode broker forwards it (KIP-590); the inner response."""
        inner = encode_request(request, correlation_id=correlation_id, client_id="adminclient-1")
        result = send_envelope_sync(
            "127.0.0.1",
            self.port,
            inner,
            principal=KafkaPrincipal("User", "admin"),
            client_host_address="10.0.0.7",
        )
        assert result.error_code == ErrorCode.none and result.inner_correlation_id == correlation_id
        return result.inner_response

    def expect(self) -> ZkClusterModel:
        """A copy of the cluster as last checked, to be changed into what the next request should give."""
        return copy.deepcopy(self.model)

    def check(self, expected: ZkClusterModel) -> ZkClusterModel:
        """Log, image and ZooKeeper agree, and ZooKeeper holds exactly `expected`'s znodes (Kafka's bytes)."""
        bridge = self.bridge
        assert bridge.log is not None
        image = bridge.log.image
        on_disk, _report = load_image(bridge.config.metadata_dir)
        assert _comparable(on_disk) == _comparable(image)
        tree = read_tree(self.zk_connect, acls=False)
        model = from_tree(tree)
        assert [op for op in plan_reconciliation(image, model) if not op.unchanged] == []
        # /migration follows the log; the claim znodes stay ours.
        assert model.migration is not None
        assert model.migration.kraft_metadata_offset == bridge.log.end_offset - 1
        assert model.migration.kraft_controller_id == NODE_ID
        expected = copy.deepcopy(expected)
        expected.migration = model.migration
        actual = {node.path: node.data for node in tree}
        wanted = to_znodes(expected)
        assert {p: actual.get(p) for p in wanted} == wanted
        assert sorted(set(actual) - set(wanted) - {"/"}) == []
        self.model = model
        return model

    def unchanged(self, end_offset: int) -> None:
        """A rejected (or validate-only) request wrote nothing anywhere."""
        assert self.end_offset == end_offset
        self.check(self.model)


def quota_path(entity: tuple[tuple[str, str | None], ...]) -> str:
    parts = dict(entity)
    name = {k: "<default>" if v is None else v for k, v in parts.items()}
    if "user" in parts:
        return f"users/{name['user']}" + (f"/clients/{name['client-id']}" if "client-id" in parts else "")
    if "client-id" in parts:
        return f"clients/{name['client-id']}"
    return f"ips/{name['ip']}"


def props(config: dict[str, str]) -> dict[str, str]:
    """A config map in the order Kafka's java.util.Properties (Java 9+) iterates it, as written to znodes."""
    return {k: config[k] for k in jvm.java_properties_order(list(config), java8=False)}


def _comparable(image: Any) -> Any:
    copied = copy.copy(image)
    copied.provenance = None
    return copied


@pytest.fixture
def cluster(bridge: BridgeController, zk_connect: str) -> Cluster:
    return Cluster(bridge, zk_connect)


def config_change(expected: ZkClusterModel, entity_path: str) -> None:
    """The next `/config/changes/config_change_<n>` Kafka creates after a config write."""
    sequence = len(expected.config_changes)
    expected.config_changes[f"config_change_{sequence:010d}"] = ConfigChangeNotification(entity_path)


def request(api_key: int, version: int, **values: Any) -> Any:
    return protocol.request_class(api_key, version)(**values)


def errors(response: Any, field: str) -> list[ErrorCode]:
    return [item.error_code for item in getattr(response, field)]


# ---------------------------------------------------------------------------------------------- topics


def create_topics(*topics: dict[str, Any], version: int = 7, validate_only: bool = False) -> Any:
    cls = protocol.request_class(CREATE_TOPICS, version)
    topic_cls = nested(cls, "CreatableTopic")
    assignment_cls = nested(cls, "CreatableReplicaAssignment")
    config_cls = nested(cls, "CreatableTopicConfig")
    return cls(
        topics=tuple(
            topic_cls(
                name=spec["name"],
                num_partitions=i32(spec.get("partitions", -1)),
                replication_factor=i16(spec.get("rf", -1)),
                assignments=tuple(
                    assignment_cls(partition_index=i32(i), broker_ids=tuple(i32(b) for b in brokers))
                    for i, brokers in enumerate(spec.get("assignments", []))
                ),
                configs=tuple(config_cls(name=k, value=v) for k, v in spec.get("configs", {}).items()),
            )
            for spec in topics
        ),
        timeout=i32Timedelta.parse(timedelta(seconds=30)),
        validate_only=validate_only,
    )


def expect_new_topic(cluster: Cluster, expected: ZkClusterModel, name: str) -> None:
    """The znodes Kafka's dual-write creates for a topic the image now holds (placement and id from it)."""
    assert cluster.bridge.log is not None
    topic = cluster.bridge.log.image.topics_by_name[name]
    partitions = {p: list(reg.replicas) for p, reg in sorted(topic.partitions.items())}
    expected.topics[name] = Topic(
        name,
        topic.topic_id,
        partitions,
        states={
            # Leader = first replica, ISR = replicas, epochs 0, controller_epoch = the KRaft epoch.
            p: PartitionState(leader=r[0], leader_epoch=0, isr=list(r), controller_epoch=cluster.kraft_epoch)
            for p, r in partitions.items()
        },
    )


def test_create_topics_with_configs_explicit_assignment_and_validate_only(cluster: Cluster) -> None:
    # Placement over the ZooKeeper brokers 1-3; configs written to /config/topics/<t> and announced.
    response = cluster.send(
        create_topics({"name": "orders", "partitions": 4, "rf": 3, "configs": {"retention.ms": "86400000"}})
    )
    assert errors(response, "topics") == [ErrorCode.none]
    [created] = response.topics
    assert created.num_partitions == 4 and created.replication_factor == 3
    expected = cluster.expect()
    expect_new_topic(cluster, expected, "orders")
    assert {len(set(r)) for r in expected.topics["orders"].partitions.values()} == {3}
    expected.topic_configs["orders"] = EntityConfig("topics", "orders", {"retention.ms": "86400000"})
    config_change(expected, "topics/orders")
    cluster.check(expected)

    # An explicit assignment, forwarded by a ZooKeeper-mode broker.
    inner = cluster.forward(create_topics({"name": "payments", "assignments": [[3, 1], [1, 2]]}))
    assert errors(inner, "topics") == [ErrorCode.none]
    expected = cluster.expect()
    expect_new_topic(cluster, expected, "payments")
    assert expected.topics["payments"].partitions == {0: [3, 1], 1: [1, 2]}
    expected.topic_configs["payments"] = EntityConfig("topics", "payments", {})
    cluster.check(expected)

    # validate_only answers as if created, and writes nothing.
    end = cluster.end_offset
    response = cluster.send(create_topics({"name": "dry", "partitions": 2, "rf": 2}, validate_only=True))
    assert errors(response, "topics") == [ErrorCode.none]
    cluster.unchanged(end)

    # Kafka's errors: existing topic, too many replicas for 3 brokers, a bad config value.
    response = cluster.send(
        create_topics(
            {"name": STOCK, "partitions": 1, "rf": 1},
            {"name": "wide", "partitions": 1, "rf": 4},
            {"name": "bad", "partitions": 1, "rf": 1, "configs": {"cleanup.policy": "sideways"}},
        )
    )
    assert errors(response, "topics") == [
        ErrorCode.topic_already_exists,
        ErrorCode.invalid_replication_factor,
        ErrorCode.invalid_config,
    ]
    cluster.unchanged(end)


def test_delete_topics_by_name_and_by_id(cluster: Cluster) -> None:
    cls = protocol.request_class(DELETE_TOPICS, 6)
    state = nested(cls, "DeleteTopicState")
    timeout = i32Timedelta.parse(timedelta(seconds=30))
    end = cluster.end_offset
    response = cluster.send(cls(topics=(state(name="no_such_topic", topic_id=None),), timeout=timeout))
    assert errors(response, "responses") == [ErrorCode.unknown_topic_or_partition]
    response = cluster.send(cls(topics=(state(name=None, topic_id=uuid.uuid4()),), timeout=timeout))
    assert errors(response, "responses") == [ErrorCode.unknown_topic_id]
    cluster.unchanged(end)

    # Deleting removes the topic's znodes and its config znode; Kafka sends no notification for it.
    response = cluster.send(cls(topics=(state(name=STOCK, topic_id=None),), timeout=timeout))
    assert [(r.name, r.topic_id, r.error_code) for r in response.responses] == [
        (STOCK, STOCK_ID, ErrorCode.none)
    ]
    expected = cluster.expect()
    del expected.topics[STOCK], expected.topic_configs[STOCK]
    cluster.check(expected)

    offsets_id = cluster.model.topics["__consumer_offsets"].topic_id
    inner = cluster.forward(cls(topics=(state(name=None, topic_id=offsets_id),), timeout=timeout))
    assert errors(inner, "responses") == [ErrorCode.none]
    expected = cluster.expect()
    del expected.topics["__consumer_offsets"], expected.topic_configs["__consumer_offsets"]
    cluster.check(expected)
    assert cluster.model.topics == {}


def expect_new_partitions(cluster: Cluster, expected: ZkClusterModel, name: str) -> None:
    assert cluster.bridge.log is not None
    image_topic = cluster.bridge.log.image.topics_by_name[name]
    topic = expected.topics[name]
    for p, reg in sorted(image_topic.partitions.items()):
        if p not in topic.partitions:
            topic.partitions[p] = list(reg.replicas)
            topic.states[p] = PartitionState(
                leader=reg.replicas[0],
                leader_epoch=0,
                isr=list(reg.replicas),
                controller_epoch=cluster.kraft_epoch,
            )


def test_create_partitions_placed_and_explicit(cluster: Cluster) -> None:
    response = cluster.send(create_partitions(STOCK, 5))
    assert errors(response, "results") == [ErrorCode.none]
    expected = cluster.expect()
    expect_new_partitions(cluster, expected, STOCK)
    assert sorted(expected.topics[STOCK].partitions) == [0, 1, 2, 3, 4]
    assert all(len(set(r)) == 2 for r in expected.topics[STOCK].partitions.values())  # the topic's RF
    cluster.check(expected)

    inner = cluster.forward(create_partitions(STOCK, 6, [[2, 3]]))
    assert errors(inner, "results") == [ErrorCode.none]
    expected = cluster.expect()
    expect_new_partitions(cluster, expected, STOCK)
    assert expected.topics[STOCK].partitions[5] == [2, 3]
    cluster.check(expected)

    end = cluster.end_offset
    assert errors(cluster.send(create_partitions(STOCK, 4)), "results") == [ErrorCode.invalid_partitions]
    assert errors(cluster.send(create_partitions("nope", 4)), "results") == [
        ErrorCode.unknown_topic_or_partition
    ]
    assert errors(cluster.send(create_partitions(STOCK, 7, [[2, 9]])), "results") == [
        ErrorCode.invalid_replica_assignment
    ]
    assert errors(cluster.send(create_partitions(STOCK, 8, validate_only=True)), "results") == [
        ErrorCode.none
    ]
    cluster.unchanged(end)


# ---------------------------------------------------------------------------------------------- configs


def alter_configs(resource_type: int, name: str, configs: dict[str, str | None]) -> Any:
    return alter_configs_request(2, [(resource_type, name, list(configs.items()))])


def test_alter_configs_replaces_whole_config_maps(cluster: Cluster) -> None:
    response = cluster.send(
        alter_configs(TOPIC, STOCK, {"segment.ms": "600000", "cleanup.policy": "compact"})
    )
    assert errors(response, "responses") == [ErrorCode.none]
    expected = cluster.expect()
    expected.topic_configs[STOCK].config = props({"segment.ms": "600000", "cleanup.policy": "compact"})
    config_change(expected, f"topics/{STOCK}")
    cluster.check(expected)

    # Broker 1 is registered only in ZooKeeper (/brokers/ids/1): the bridge knows it all the same.
    inner = cluster.forward(alter_configs(BROKER, "1", {"log.cleaner.threads": "2"}))
    assert errors(inner, "responses") == [ErrorCode.none]
    expected = cluster.expect()
    expected.broker_configs["1"] = EntityConfig("brokers", "1", {"log.cleaner.threads": "2"})
    config_change(expected, "brokers/1")
    cluster.check(expected)

    end = cluster.end_offset
    assert errors(cluster.send(alter_configs(BROKER, "9", {"log.cleaner.threads": "2"})), "responses") == [
        ErrorCode.broker_id_not_registered
    ]
    assert errors(cluster.send(alter_configs(TOPIC, STOCK, {"retention.ms": "soon"})), "responses") == [
        ErrorCode.invalid_config
    ]
    assert errors(cluster.send(alter_configs(TOPIC, "nope", {"retention.ms": "1"})), "responses") == [
        ErrorCode.unknown_topic_or_partition
    ]
    cluster.unchanged(end)


def test_incremental_alter_configs_set_delete_append_subtract(cluster: Cluster) -> None:
    steps: list[tuple[Any, dict[str, str]]] = [
        (incremental(TOPIC, STOCK, ("segment.ms", SET, "600000"), ("retention.ms", DELETE, None)),
         {"segment.ms": "600000"}),
        # APPEND to a list config that is not set starts from its default ("delete"), as Kafka does.
        (incremental(TOPIC, STOCK, ("cleanup.policy", APPEND, "compact")),
         {"segment.ms": "600000", "cleanup.policy": "delete,compact"}),
        (incremental(TOPIC, STOCK, ("cleanup.policy", SUBTRACT, "delete")),
         {"segment.ms": "600000", "cleanup.policy": "compact"}),
        (incremental(TOPIC, STOCK, ("cleanup.policy", APPEND, "delete")),
         {"segment.ms": "600000", "cleanup.policy": "compact,delete"}),
    ]  # fmt: skip
    for i, (req, config) in enumerate(steps):
        response = cluster.forward(req) if i % 2 else cluster.send(req)
        assert errors(response, "responses") == [ErrorCode.none], i
        expected = cluster.expect()
        expected.topic_configs[STOCK].config = props(config)
        config_change(expected, f"topics/{STOCK}")
        cluster.check(expected)

    # Deleting the last dynamic config deletes the config znode (Kafka's deleteConfigs) and announces it.
    cluster.send(incremental(TOPIC, STOCK, ("segment.ms", DELETE, None), ("cleanup.policy", DELETE, None)))
    expected = cluster.expect()
    del expected.topic_configs[STOCK]
    config_change(expected, f"topics/{STOCK}")
    cluster.check(expected)

    response = cluster.send(incremental(BROKER, "", ("log.cleaner.threads", SET, "3")))
    assert errors(response, "responses") == [ErrorCode.none]
    expected = cluster.expect()
    expected.broker_configs["<default>"] = EntityConfig("brokers", "<default>", {"log.cleaner.threads": "3"})
    config_change(expected, "brokers/<default>")
    cluster.check(expected)

    end = cluster.end_offset
    response = cluster.send(incremental(TOPIC, STOCK, ("retention.ms", APPEND, "1")))
    assert errors(response, "responses") == [ErrorCode.invalid_config]
    cluster.unchanged(end)


# ---------------------------------------------------------------------------------------------- quotas, SCRAM


def quotas(*entries: tuple[dict[str, str | None], dict[str, float | None]]) -> Any:
    return alter_client_quotas(1, [(list(parts.items()), list(ops.items())) for parts, ops in entries])


def test_alter_client_quotas(cluster: Cluster) -> None:
    response = cluster.send(quotas(({"user": "alice"}, {"producer_byte_rate": 1024.0})))
    assert errors(response, "entries") == [ErrorCode.none]
    expected = cluster.expect()
    expected.client_quotas["users/alice"] = ClientQuotaConfig("users/alice", {"producer_byte_rate": 1024.0})
    config_change(expected, "users/alice")
    cluster.check(expected)

    inner = cluster.forward(
        quotas(
            ({"user": "alice", "client-id": "app"}, {"consumer_byte_rate": 2048.0}),
            ({"client-id": None}, {"request_percentage": 50.0}),
        )
    )
    assert errors(inner, "entries") == [ErrorCode.none, ErrorCode.none]
    expected = cluster.expect()
    expected.client_quotas["users/alice/clients/app"] = ClientQuotaConfig(
        "users/alice/clients/app", {"consumer_byte_rate": 2048.0}
    )
    expected.client_quotas["clients/<default>"] = ClientQuotaConfig(
        "clients/<default>", {"request_percentage": 50.0}
    )
    for path in sorted(p for p in expected.client_quotas if p != "users/alice"):
        config_change(expected, path)
    # Kafka writes the entities in its own order; the notifications must name both, whatever the order.
    written = {
        c.entity_path
        for name, c in cluster.read().config_changes.items()
        if name >= "config_change_0000000001"
    }
    assert written == {"users/alice/clients/app", "clients/<default>"}
    expected.config_changes = cluster.read().config_changes
    cluster.check(expected)

    # Removing the last quota leaves an empty config znode (Kafka never deletes quota znodes).
    response = cluster.send(quotas(({"user": "alice"}, {"producer_byte_rate": None})))
    assert errors(response, "entries") == [ErrorCode.none]
    expected = cluster.expect()
    expected.client_quotas["users/alice"].quotas = {}
    config_change(expected, "users/alice")
    cluster.check(expected)

    end = cluster.end_offset
    response = cluster.send(
        quotas(({"user": "bob"}, {"no_such_quota": 1.0}), ({"user": "carol"}, {"producer_byte_rate": -1.0}))
    )
    assert errors(response, "entries") == [ErrorCode.invalid_request, ErrorCode.invalid_request]
    cluster.unchanged(end)


def scram_request(
    upserts: tuple[tuple[str, int, bytes, bytes], ...] = (), deletions: tuple[tuple[str, int], ...] = ()
) -> Any:
    cls = protocol.request_class(ALTER_SCRAM, 0)
    upsertion, deletion = nested(cls, "ScramCredentialUpsertion"), nested(cls, "ScramCredentialDeletion")
    return cls(
        deletions=tuple(deletion(name=n, mechanism=i8(1)) for n, _m in deletions),
        upsertions=tuple(
            upsertion(name=n, mechanism=i8(1), iterations=i32(it), salt=salt, salted_password=salted)
            for n, it, salt, salted in upserts
        ),
    )


def scram_sha256(salt: bytes, salted_password: bytes, iterations: int) -> ScramCredential:
    """RFC 5802 keys from a salted password: StoredKey = H(HMAC(p, "Client Key")), ServerKey = HMAC(p, "Server Key")."""
    client_key = hmac.new(salted_password, b"Client Key", hashlib.sha256).digest()
    server_key = hmac.new(salted_password, b"Server Key", hashlib.sha256).digest()
    return ScramCredential("SCRAM-SHA-256", salt, hashlib.sha256(client_key).digest(), server_key, iterations)


def test_alter_user_scram_credentials(cluster: Cluster) -> None:
    salt = b"0123456789abcdef"
    salted = hashlib.pbkdf2_hmac("sha256", b"alice-secret", salt, 8192)
    response = cluster.send(scram_request(upserts=(("alice", 8192, salt, salted),)))
    assert [(r.user, r.error_code) for r in response.results] == [("alice", ErrorCode.none)]
    expected = cluster.expect()
    expected.client_quotas["users/alice"] = ClientQuotaConfig(
        "users/alice", scram={"SCRAM-SHA-256": scram_sha256(salt, salted, 8192)}
    )
    config_change(expected, "users/alice")
    model = cluster.check(expected)
    stored = json.loads(znode_text(model, "users/alice"))["config"]["SCRAM-SHA-256"]
    assert stored.startswith(f"salt={base64.b64encode(salt).decode()},stored_key=") and stored.endswith(
        ",iterations=8192"
    )

    inner = cluster.forward(scram_request(deletions=(("alice", 1),)))
    assert [(r.user, r.error_code) for r in inner.results] == [("alice", ErrorCode.none)]
    expected = cluster.expect()
    expected.client_quotas["users/alice"].scram = {}
    config_change(expected, "users/alice")
    cluster.check(expected)

    end = cluster.end_offset
    response = cluster.send(scram_request(upserts=(("bob", 1000, salt, salted),), deletions=(("carol", 1),)))
    assert sorted((r.user, r.error_code) for r in response.results) == [
        ("bob", ErrorCode.unacceptable_credential),
        ("carol", ErrorCode.resource_not_found),
    ]
    cluster.unchanged(end)


def znode_text(model: ZkClusterModel, entity_path: str) -> str:
    return to_znodes(model)[f"/config/{entity_path}"].decode()  # type: ignore[union-attr]


# ---------------------------------------------------------------------------------------------- ACLs

LITERAL_TOPIC = ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL)
PREFIXED_GROUP = ResourcePattern(ResourceType.GROUP, "app-", PatternType.PREFIXED)


def create_acls(*acls: tuple[ResourcePattern, str, AclOperation]) -> Any:
    cls = protocol.request_class(CREATE_ACLS, 3)
    creation = nested(cls, "AclCreation")
    return cls(
        creations=tuple(
            creation(
                resource_type=i8(pattern.resource_type),
                resource_name=pattern.name,
                resource_pattern_type=i8(pattern.pattern_type),
                principal=principal,
                host="*",
                operation=i8(operation),
                permission_type=i8(AclPermissionType.ALLOW),
            )
            for pattern, principal, operation in acls
        )
    )


def delete_acls(pattern: ResourcePattern, principal: str | None = None) -> Any:
    cls = protocol.request_class(DELETE_ACLS, 3)
    acl_filter = nested(cls, "DeleteAclsFilter")
    return cls(
        filters=(
            acl_filter(
                resource_type_filter=i8(pattern.resource_type),
                resource_name_filter=pattern.name,
                pattern_type_filter=i8(pattern.pattern_type),
                principal_filter=principal,
                host_filter=None,
                operation=i8(AclOperation.ANY),
                permission_type=i8(AclPermissionType.ANY),
            ),
        )
    )


ACL_STORE = [
    *(
        f"{store}/{kind}"
        for store in ("/kafka-acl", "/kafka-acl-extended/prefixed")
        for kind in ("Topic", "Group", "Cluster", "TransactionalId", "DelegationToken", "User")
    ),
    "/kafka-acl-changes",
    "/kafka-acl-extended-changes",
]
"""What Kafka's AclAuthorizer creates at start-up (KafkaZkClient.createAclPaths), leaves first."""


def wait_until(condition: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.05)


def test_create_and_delete_acls(cluster: Cluster, zk_client: KazooClient) -> None:
    # The real cluster never ran an authorizer, so ZooKeeper has no ACL store: the first ACL write creates
    # it as AclAuthorizer's start-up does, and the answer comes once ZooKeeper has the ACLs.
    assert not zk_client.exists("/kafka-acl")
    response = cluster.send(
        create_acls(
            (LITERAL_TOPIC, "User:alice", AclOperation.READ),
            (LITERAL_TOPIC, "User:bob", AclOperation.WRITE),
            (PREFIXED_GROUP, "User:alice", AclOperation.READ),
        )
    )
    assert errors(response, "results") == [ErrorCode.none] * 3
    assert cluster.bridge.zk_out_of_sync is None and cluster.bridge.status().last_error is None
    expected = cluster.expect()
    expected.other_znodes.update(dict.fromkeys(ACL_STORE, None))
    alice_read = AclEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
    bob_write = AclEntry("User:bob", "*", AclOperation.WRITE, AclPermissionType.ALLOW)
    expected.acls[LITERAL_TOPIC] = AclResource(LITERAL_TOPIC, acls_of(cluster, LITERAL_TOPIC))
    assert sorted(expected.acls[LITERAL_TOPIC].acls, key=str) == sorted([alice_read, bob_write], key=str)
    expected.acls[PREFIXED_GROUP] = AclResource(PREFIXED_GROUP, [alice_read])
    # Literal patterns are announced under /kafka-acl-changes, the others under /kafka-acl-extended-changes.
    expected.acl_changes["acl_changes_0000000000"] = AclChangeNotification(LITERAL_TOPIC)
    expected.extended_acl_changes["acl_changes_0000000000"] = AclChangeNotification(PREFIXED_GROUP)
    cluster.check(expected)  # /migration names the log's end offset

    inner = cluster.forward(delete_acls(LITERAL_TOPIC, "User:bob"))
    [result] = inner.filter_results
    assert result.error_code == ErrorCode.none and [m.principal for m in result.matching_acls] == ["User:bob"]
    expected = cluster.expect()
    expected.acls[LITERAL_TOPIC].acls = [alice_read]
    expected.acl_changes["acl_changes_0000000001"] = AclChangeNotification(LITERAL_TOPIC)
    cluster.check(expected)

    # The last ACL of a pattern gone: its znode is deleted, and that is announced too.
    response = cluster.send(delete_acls(PREFIXED_GROUP))
    assert errors(response, "filter_results") == [ErrorCode.none]
    expected = cluster.expect()
    del expected.acls[PREFIXED_GROUP]
    expected.other_znodes.update(dict.fromkeys(ACL_STORE, None))  # the store stays, as Kafka leaves it
    expected.extended_acl_changes["acl_changes_0000000001"] = AclChangeNotification(PREFIXED_GROUP)
    cluster.check(expected)

    end = cluster.end_offset
    bad = ResourcePattern(ResourceType.TOPIC, "", PatternType.LITERAL)
    response = cluster.send(create_acls((bad, "User:alice", AclOperation.READ)))
    assert errors(response, "results") == [ErrorCode.invalid_request]
    cluster.unchanged(end)


def test_a_write_zookeeper_keeps_refusing_is_shown_until_it_lands(
    cluster: Cluster, zk_client: KazooClient, zk_connect: str
) -> None:
    # An operator's ZooKeeper ACL on /kafka-acl lets nobody create below it: the ACL store cannot be made.
    read_only = [ACL(Permissions.READ | Permissions.ADMIN, ANYONE_ID_UNSAFE)]
    zk_client.create("/kafka-acl", acl=read_only)
    end = cluster.end_offset
    response = cluster.send(create_acls((LITERAL_TOPIC, "User:alice", AclOperation.READ)))
    # Committed in the log, so answered as done (docs/architecture.md); ZooKeeper is behind and says why.
    assert errors(response, "results") == [ErrorCode.none]
    assert cluster.end_offset > end
    assert cluster.read().acls == {}

    def stuck() -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{cluster.bridge.metrics_port}/status") as reply:
            return json.loads(reply.read())  # type: ignore[no-any-return]

    wait_until(lambda: (stuck()["stuck_write"] or {}).get("attempts", 0) >= 3)
    status = stuck()
    write = status["stuck_write"]
    assert write["operation"].startswith("UpdateAcl")
    assert (write["request"], write["znode"], write["error_code"]) == (
        "Create /kafka-acl/Topic", "/kafka-acl/Topic", "NOAUTH"
    )  # fmt: skip
    assert write["first_offset"] == end and write["last_offset"] == cluster.end_offset - 1
    assert "NOAUTH" in status["last_error"]
    assert f"ZooKeeper {zk_connect} refused" in status["last_error"], "the refused multi names the ensemble"
    # /migration stays at the offset before the refused change: it never names a change ZooKeeper lacks.
    migration = cluster.read().migration
    assert migration is not None and migration.kraft_metadata_offset == end - 1
    assert status["zk_write_behind_lag"] > 0
    assert "zk2kraft_zk_write_stuck 1.0" in metrics_of(cluster)  # what the example alert rules watch
    # Retried with backoff, without re-sending what already landed: no config notification per attempt.
    changes = zk_client.get_children("/config/changes")
    wait_until(lambda: stuck()["stuck_write"]["attempts"] >= 5, timeout=30)
    assert zk_client.get_children("/config/changes") == changes

    shown = CliRunner().invoke(
        status_cmd, ["--zk", zk_connect, "--bridge-status", f"http://127.0.0.1:{cluster.bridge.metrics_port}"]
    )
    assert shown.exit_code == 0, shown.output
    assert "ZooKeeper write stuck" in shown.output
    assert "UpdateAcl" in shown.output and "Create /kafka-acl/Topic: NOAUTH" in shown.output

    zk_client.set_acls("/kafka-acl", OPEN_ACL_UNSAFE)  # the operator lifts the restriction
    wait_until(lambda: stuck()["stuck_write"] is None, timeout=40)
    assert stuck()["last_error"] is None and stuck()["zk_write_behind_lag"] == 0
    assert "zk2kraft_zk_write_stuck 0.0" in metrics_of(cluster)
    assert acls_of(cluster, LITERAL_TOPIC) == [
        AclEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
    ]
    migration = cluster.read().migration
    assert migration is not None and migration.kraft_metadata_offset == cluster.end_offset - 1


def metrics_of(cluster: Cluster) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{cluster.bridge.metrics_port}/metrics") as reply:
        return reply.read().decode()


def acls_of(cluster: Cluster, pattern: ResourcePattern) -> list[AclEntry]:
    """The pattern's ACEs in the order the bridge wrote them (Kafka writes a set: any order is Kafka's)."""
    found = cluster.read().acls.get(pattern)
    return list(found.acls) if found is not None else []


# ---------------------------------------------------------------------------------------------- brokers' RPCs


def broker_epoch(zk_client: KazooClient, broker_id: int) -> int:
    """A ZooKeeper-mode broker's epoch: the czxid of its registration znode."""
    return int(zk_client.exists(f"/brokers/ids/{broker_id}").czxid)


def alter_partition(*args: Any, isr_epochs: dict[int, int] | None = None) -> Any:
    """AlterPartition of a `current_stock` partition (arguments as tests.support.requests.alter_partition)."""
    return requests.alter_partition(*args, topic=STOCK, topic_id=STOCK_ID, isr_epochs=isr_epochs)


def partition_reg(cluster: Cluster, partition: int) -> Any:
    assert cluster.bridge.log is not None
    return cluster.bridge.log.image.topics_by_name[STOCK].partitions[partition]


def test_alter_partition_all_versions_and_stale_epochs(cluster: Cluster, zk_client: KazooClient) -> None:
    epochs = {b: broker_epoch(zk_client, b) for b in (1, 2, 3)}
    # (version, partition, new ISR): shrink and expand partition 0 (leader 1) and 1 (leader 3).
    steps = [(0, 0, [1]), (1, 0, [1, 2]), (2, 1, [3]), (3, 1, [3, 2])]
    for version, p, isr in steps:
        before = partition_reg(cluster, p)
        leader = before.leader
        req = alter_partition(
            version,
            leader,
            epochs[leader],
            p,
            before.leader_epoch,
            before.partition_epoch,
            isr,
            isr_epochs=epochs,
        )
        response = cluster.send(req)
        assert response.error_code == ErrorCode.none, version
        [topic] = response.topics
        [answer] = topic.partitions
        after = partition_reg(cluster, p)
        assert answer.error_code == ErrorCode.none and list(answer.isr) == isr == after.isr, version
        assert (answer.leader_id, answer.leader_epoch, answer.partition_epoch) == (
            leader, after.leader_epoch, before.partition_epoch + 1
        )  # fmt: skip
        expected = cluster.expect()
        # The state znode is rewritten with the KRaft controller's epoch; its version is the partition epoch.
        expected.topics[STOCK].states[p] = PartitionState(
            leader=leader, leader_epoch=after.leader_epoch, isr=isr, controller_epoch=cluster.kraft_epoch
        )
        model = cluster.check(expected)
        assert model.topics[STOCK].states[p].zk_version == after.partition_epoch

    end = cluster.end_offset
    current = partition_reg(cluster, 0)
    stale_leader = alter_partition(2, 1, epochs[1], 0, current.leader_epoch - 1, current.partition_epoch, [1])
    stale_version = alter_partition(
        2, 1, epochs[1], 0, current.leader_epoch, current.partition_epoch - 1, [1]
    )
    for req, code in (
        (stale_leader, ErrorCode.fenced_leader_epoch),
        (stale_version, ErrorCode.invalid_update_version),
    ):
        response = cluster.send(req)
        assert response.error_code == ErrorCode.none
        assert [p.error_code for t in response.topics for p in t.partitions] == [code]
    # An old ZooKeeper session's epoch is stale for the whole request.
    response = cluster.send(
        alter_partition(2, 1, epochs[1] - 1, 0, current.leader_epoch, current.partition_epoch, [1])
    )
    assert response.error_code == ErrorCode.stale_broker_epoch
    # Brokers send AlterPartition directly; it is not forwardable.
    inner = encode_request(
        alter_partition(2, 1, epochs[1], 0, current.leader_epoch, current.partition_epoch, [1]), 5, "broker-1"
    )
    assert send_envelope_sync("127.0.0.1", cluster.port, inner).error_code == ErrorCode.invalid_request
    cluster.unchanged(end)


def test_allocate_producer_ids(cluster: Cluster, zk_client: KazooClient) -> None:
    cls = protocol.request_class(ALLOCATE_PRODUCER_IDS, 0)
    epoch = broker_epoch(zk_client, 2)
    first = cluster.send(cls(broker_id=i32(2), broker_epoch=i64(epoch)))
    assert first.error_code == ErrorCode.none
    assert (first.producer_id_start, first.producer_id_len) == (0, 1000)
    expected = cluster.expect()
    # Kafka's writeProducerId: the next block, owned by no broker (-1).
    expected.producer_id_block = ProducerIdBlock(broker_id=-1, block_start=1000, block_end=1999)
    cluster.check(expected)

    second = cluster.send(cls(broker_id=i32(3), broker_epoch=i64(broker_epoch(zk_client, 3))))
    assert (second.error_code, second.producer_id_start, second.producer_id_len) == (
        ErrorCode.none,
        1000,
        1000,
    )
    expected = cluster.expect()
    expected.producer_id_block = ProducerIdBlock(broker_id=-1, block_start=2000, block_end=2999)
    cluster.check(expected)

    end = cluster.end_offset
    assert (
        cluster.send(cls(broker_id=i32(2), broker_epoch=i64(epoch + 1))).error_code
        == ErrorCode.stale_broker_epoch
    )
    assert cluster.send(cls(broker_id=i32(9), broker_epoch=i64(1))).error_code == ErrorCode.stale_broker_epoch
    cluster.unchanged(end)


# ---------------------------------------------------------------------------------------------- reassignment


def reassign(*items: tuple[int, list[int] | None]) -> Any:
    """AlterPartitionReassignments v0 of `current_stock` partitions (None cancels)."""
    cls = protocol.request_class(45, 0)
    topic_cls, part_cls = nested(cls, "ReassignableTopic"), nested(cls, "ReassignablePartition")
    parts = tuple(
        part_cls(partition_index=i32(p), replicas=None if r is None else tuple(i32(b) for b in r))
        for p, r in items
    )
    return cls(topics=(topic_cls(name=STOCK, partitions=parts),))


def ongoing(cluster: Cluster) -> dict[int, tuple[list[int], list[int], list[int]]]:
    """ListPartitionReassignments (all topics): replicas, adding, removing by `current_stock` partition."""
    response = cluster.send(request(46, 0, topics=None))
    assert response.error_code == ErrorCode.none
    return {
        int(p.partition_index): (list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
        for t in response.topics
        if t.name == STOCK
        for p in t.partitions
    }


def zk_topic_json(zk_client: KazooClient) -> dict[str, Any]:
    data, _stat = zk_client.get(f"/brokers/topics/{STOCK}")
    return dict(json.loads(data))


def test_reassignment_started_completed_and_cancelled_is_dual_written(
    cluster: Cluster, zk_client: KazooClient
) -> None:
    epochs = {b: broker_epoch(zk_client, b) for b in (1, 2, 3)}
    # Partition 0 is [2, 1] led by 1 with ISR [1, 2]: move it to [3, 2] (forwarded by a ZooKeeper-mode broker).
    inner = cluster.forward(reassign((0, [3, 2])))
    assert [(p.partition_index, p.error_code) for t in inner.responses for p in t.partitions] == [
        (0, ErrorCode.none)
    ]
    started = partition_reg(cluster, 0)
    assert (started.replicas, started.adding_replicas, started.removing_replicas) == ([3, 2, 1], [3], [1])
    assert (started.leader, started.leader_epoch) == (1, 2)  # starting bumps no leader epoch
    expected = cluster.expect()
    expected.topics[STOCK].partitions[0] = [3, 2, 1]
    expected.topics[STOCK].adding_replicas = {0: [3]}
    expected.topics[STOCK].removing_replicas = {0: [1]}
    # Every changed partition's state znode is rewritten, with the KRaft controller's epoch.
    expected.topics[STOCK].states[0] = PartitionState(
        leader=1, leader_epoch=2, isr=[1, 2], controller_epoch=cluster.kraft_epoch
    )
    cluster.check(expected)
    assert zk_topic_json(zk_client)["adding_replicas"] == {"0": [3]}
    assert zk_topic_json(zk_client)["removing_replicas"] == {"0": [1]}
    assert ongoing(cluster) == {0: ([3, 2, 1], [3], [1])}

    # Leader 1 reports broker 3 caught up: the reassignment completes, 1 leaves, leadership moves to 3.
    response = cluster.send(
        alter_partition(2, 1, epochs[1], 0, started.leader_epoch, started.partition_epoch, [1, 2, 3])
    )
    assert [p.error_code for t in response.topics for p in t.partitions] == [ErrorCode.new_leader_elected]
    done = partition_reg(cluster, 0)
    assert (done.replicas, done.isr, done.adding_replicas, done.removing_replicas) == ([3, 2], [2, 3], [], [])
    assert (done.leader, done.leader_epoch) == (3, 3)
    expected = cluster.expect()
    expected.topics[STOCK].partitions[0] = [3, 2]
    expected.topics[STOCK].adding_replicas = {}
    expected.topics[STOCK].removing_replicas = {}
    expected.topics[STOCK].states[0] = PartitionState(
        leader=3, leader_epoch=3, isr=[2, 3], controller_epoch=cluster.kraft_epoch
    )
    cluster.check(expected)
    # Kafka's TopicZNode keeps both maps, empty, once nothing is reassigning.
    assert (zk_topic_json(zk_client)["adding_replicas"], zk_topic_json(zk_client)["removing_replicas"]) == (
        {},
        {},
    )
    assert ongoing(cluster) == {}

    # Partition 1 ([3, 2], leader 3): start a move to [1, 2], then cancel it.
    assert errors(cluster.send(reassign((1, [1, 2]))).responses[0], "partitions") == [ErrorCode.none]
    assert ongoing(cluster) == {1: ([1, 2, 3], [1], [3])}
    before = partition_reg(cluster, 1)
    assert errors(cluster.send(reassign((1, None))).responses[0], "partitions") == [ErrorCode.none]
    reverted = partition_reg(cluster, 1)
    # The revert keeps the replica list's order minus the added broker: [2, 3], not the original [3, 2].
    assert (reverted.replicas, reverted.isr, reverted.adding_replicas, reverted.removing_replicas) == (
        [2, 3], [3, 2], [], []
    )  # fmt: skip
    assert (reverted.leader, reverted.leader_epoch) == (3, before.leader_epoch + 1)  # broker 1 left the list
    expected = cluster.expect()
    expected.topics[STOCK].partitions[1] = [2, 3]
    expected.topics[STOCK].states[1] = PartitionState(
        leader=3, leader_epoch=reverted.leader_epoch, isr=[3, 2], controller_epoch=cluster.kraft_epoch
    )
    cluster.check(expected)
    assert ongoing(cluster) == {}

    # Refusals write nothing: nothing to cancel, an unregistered broker.
    end = cluster.end_offset
    response = cluster.send(reassign((2, None), (2, [1, 7])))
    assert errors(response.responses[0], "partitions") == [
        ErrorCode.no_reassignment_in_progress, ErrorCode.invalid_replica_assignment
    ]  # fmt: skip
    cluster.unchanged(end)
