"""`bridge run --authorizer standard`, end to end: the controller's TLS listener names alice, bob, a broker, a
shim (--envelope-principals) and a super user by their client certificates, and authorizes each request as
Kafka 3.9's ControllerApis does over the ACLs in the bridge's own log. A refused request or item changes
nothing: the log's end offset and ZooKeeper stay as they were."""

from __future__ import annotations

import asyncio
import dataclasses
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kazoo.client import KazooClient
from kio.schema.broker_heartbeat.v1 import request as heartbeat_v1
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i64

from bridge.controller import BridgeController
from bridge.kafka.client import KafkaConnection, build_envelope
from bridge.kafka.protocol import KafkaPrincipal, decode_response, encode_request
from migrate.zk.tree import ZTree
from tests.support.bridge import TIMEOUT, changeable_state, eventually, result, running_bridge
from tests.support.kraft_broker import SimulatedKraftBroker
from tests.support.pki import Pki, client_context, needs_openssl, new_pki
from tests.support.requests import BROKER, SET, TOPIC, create_topic, incremental

pytestmark = [pytest.mark.zookeeper, needs_openssl]

ALICE, BOB, ADMIN, SHIM = "User:CN=alice", "User:CN=bob", "User:CN=admin", "User:CN=shim-1"
BROKER_PRINCIPAL = "User:CN=broker-10"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    pki = new_pki(tmp_path_factory.mktemp("authorizer-pki"))
    for name, subject in (("alice", "/CN=alice"), ("bob", "/CN=bob"), ("admin", "/CN=admin"),
                          ("shim", "/CN=shim-1"), ("broker", "/CN=broker-10")):  # fmt: skip
        pki.issue(name, subject)
    return pki


@pytest.fixture
def bridge(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path, pki: Pki
) -> Iterator[BridgeController]:
    """As `zk2kraft bridge run --listen-ssl-* --authorizer standard --super-users User:CN=admin
    --envelope-principals User:CN=shim-1`."""
    with running_bridge(
        zk_client, zk_connect, real_tree, tmp_path,
        listen_ssl_cert=pki.path("server.crt"), listen_ssl_key=pki.path("server.key"),
        listen_ssl_ca=pki.path("ca.crt"), envelope_principals=frozenset({SHIM}),
        authorizer="standard", super_users=frozenset({ADMIN}),
    ) as controller:  # fmt: skip
        yield controller


def admin_client(bridge: BridgeController, pki: Pki, name: str) -> AdminClient:
    """confluent-kafka's AdminClient straight to the bridge over SSL with certificate `name`."""
    return AdminClient({
        "bootstrap.servers": f"127.0.0.1:{bridge.listen_port}",
        "security.protocol": "SSL",
        "ssl.ca.location": str(pki.path("ca.crt")),
        "ssl.certificate.location": str(pki.path(f"{name}.crt")),
        "ssl.key.location": str(pki.path(f"{name}.key")),
        "socket.timeout.ms": 20000,
        "log_level": 0,
    })  # fmt: skip


def send(bridge: BridgeController, request: Any, ctx: ssl.SSLContext) -> Any:
    async def scenario() -> Any:
        connection = await KafkaConnection.open("127.0.0.1", bridge.listen_port, ssl_context=ctx, timeout=5.0)
        async with connection:
            return await connection.send(request, timeout=10.0)

    return asyncio.run(scenario())


def enveloped(bridge: BridgeController, pki: Pki, sender: str, principal: str, inner: Any, api_key: int) -> Any:
    """An EnvelopeRequest from certificate `sender` carrying `inner` as `principal`; (envelope, inner answer)."""
    kind, _, name = principal.partition(":")
    envelope = build_envelope(encode_request(inner, 11, "forwarder"), KafkaPrincipal(kind, name), "10.0.0.9")
    answer = send(bridge, envelope, client_context(pki, sender))
    if answer.response_data is None:
        return answer, None
    _, response = decode_response(answer.response_data, api_key, int(inner.__version__), "inner response")
    return answer, response


def acl(resource: ResourceType, name: str, principal: str, operation: AclOperation,
        pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> AclBinding:  # fmt: skip
    return AclBinding(resource, name, pattern, principal, "*", operation, AclPermissionType.ALLOW)


def grant(bridge: BridgeController, pki: Pki, *acls: AclBinding) -> None:
    """CreateAcls by the super user, through the bridge itself."""
    superuser = admin_client(bridge, pki, "admin")  # kept: a destroyed client fails its pending futures
    result(superuser.create_acls(list(acls)))


def failure(future: Any) -> int:
    with pytest.raises(KafkaException) as caught:
        future.result(timeout=TIMEOUT)
    code: int = caught.value.args[0].code()
    return code


def topics(bridge: BridgeController) -> set[str]:
    assert bridge.log is not None
    return set(bridge.log.image.topics_by_name)


def two_topics(first: str, second: str) -> Any:
    one, other = create_topic(first), create_topic(second)
    return dataclasses.replace(one, topics=one.topics + other.topics)


# ---------------------------------------------------------------------------------------------- admin requests


def test_acl_allowed_changes_are_done_and_denied_ones_change_nothing(
    bridge: BridgeController, pki: Pki, zk_connect: str
) -> None:
    grant(
        bridge, pki,
        acl(ResourceType.TOPIC, "alice-", ALICE, AclOperation.CREATE, ResourcePatternType.PREFIXED),
        acl(ResourceType.TOPIC, "alice-", ALICE, AclOperation.ALTER_CONFIGS, ResourcePatternType.PREFIXED),
    )  # fmt: skip
    alice = admin_client(bridge, pki, "alice")
    result(alice.create_topics([NewTopic("alice-orders", 2, 1)], request_timeout=TIMEOUT))
    entry = ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.TOPIC, "alice-orders", incremental_configs=[entry])
    result(alice.incremental_alter_configs([resource]))
    assert bridge.log is not None
    assert len(bridge.log.image.topics_by_name["alice-orders"].partitions) == 2
    assert changeable_state(bridge, zk_connect)[2]["alice-orders"].config["retention.ms"] == "3600000"

    before = changeable_state(bridge, zk_connect)
    bob = admin_client(bridge, pki, "bob")
    assert failure(bob.create_topics([NewTopic("bob-t", 1, 1)], request_timeout=TIMEOUT)["bob-t"]) == (
        KafkaError.TOPIC_AUTHORIZATION_FAILED
    )
    bob_entry = ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)
    bob_resource = ConfigResource(ResourceType.TOPIC, "alice-orders", incremental_configs=[bob_entry])
    assert failure(bob.incremental_alter_configs([bob_resource])[bob_resource]) == (
        KafkaError.TOPIC_AUTHORIZATION_FAILED
    )
    assert failure(bob.delete_topics(["alice-orders"], request_timeout=TIMEOUT)["alice-orders"]) == (
        KafkaError.TOPIC_AUTHORIZATION_FAILED
    )
    with pytest.raises(KafkaException) as caught:
        result(bob.create_acls([acl(ResourceType.TOPIC, "*", BOB, AclOperation.ALL)]))
    assert caught.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # A broker config needs ALTER_CONFIGS on the cluster (raw request: the bridge is no broker 1 to send it to).
    answer = send(bridge, incremental(BROKER, "1", ("log.cleaner.threads", SET, "2")), client_context(pki, "bob"))
    assert [r.error_code for r in answer.responses] == [ErrorCode.cluster_authorization_failed]
    assert changeable_state(bridge, zk_connect) == before  # nothing in the log, nothing in ZooKeeper

    # One request, two topics: alice's is created, the other refused (Kafka's per-item answer).
    answer = send(bridge, two_topics("alice-more", "other-more"), client_context(pki, "alice"))
    assert {t.name: t.error_code for t in answer.topics} == {
        "alice-more": ErrorCode.none, "other-more": ErrorCode.topic_authorization_failed,
    }  # fmt: skip
    assert "alice-more" in topics(bridge) and "other-more" not in topics(bridge)
    in_zookeeper = changeable_state(bridge, zk_connect)[1]
    assert "alice-more" in in_zookeeper and "other-more" not in in_zookeeper


def test_create_acls_through_the_bridge_takes_effect_for_the_next_request(
    bridge: BridgeController, pki: Pki, zk_connect: str
) -> None:
    bob = admin_client(bridge, pki, "bob")
    before = changeable_state(bridge, zk_connect)
    assert failure(bob.create_topics([NewTopic("bob-1", 1, 1)], request_timeout=TIMEOUT)["bob-1"]) == (
        KafkaError.TOPIC_AUTHORIZATION_FAILED
    )
    assert changeable_state(bridge, zk_connect) == before
    grant(bridge, pki, acl(ResourceType.TOPIC, "bob-1", BOB, AclOperation.CREATE))
    result(bob.create_topics([NewTopic("bob-1", 1, 1)], request_timeout=TIMEOUT))  # no restart in between
    assert "bob-1" in topics(bridge)
    # Deleting the ACL takes the right away again for the next request.
    superuser = admin_client(bridge, pki, "admin")
    granted = AclBindingFilter(ResourceType.TOPIC, "bob-1", ResourcePatternType.LITERAL, BOB, "*",
                               AclOperation.CREATE, AclPermissionType.ALLOW)  # fmt: skip
    result(superuser.delete_acls([granted]))
    second = send(bridge, create_topic("bob-1"), client_context(pki, "bob"))
    assert [t.error_code for t in second.topics] == [ErrorCode.topic_authorization_failed]


def test_a_super_user_passes_everything(bridge: BridgeController, pki: Pki, zk_connect: str) -> None:
    admin = admin_client(bridge, pki, "admin")
    result(admin.create_topics([NewTopic("admin-t", 1, 1)], request_timeout=TIMEOUT))
    answer = send(bridge, incremental(BROKER, "1", ("log.cleaner.threads", SET, "2")), client_context(pki, "admin"))
    assert [r.error_code for r in answer.responses] == [ErrorCode.none]
    grant(bridge, pki, acl(ResourceType.TOPIC, "x", BOB, AclOperation.READ))
    result(admin.delete_topics(["admin-t"], request_timeout=TIMEOUT))
    # It may speak for others too (a super user holds CLUSTER_ACTION), and the inner principal is judged.
    envelope, inner = enveloped(bridge, pki, "admin", ADMIN, create_topic("admin-e"), 19)
    assert envelope.error_code == ErrorCode.none and [t.error_code for t in inner.topics] == [ErrorCode.none]
    state = changeable_state(bridge, zk_connect)
    assert "admin-t" not in state[1] and "admin-e" in state[1] and state[3]["1"].config["log.cleaner.threads"] == "2"


# ---------------------------------------------------------------------------------------------- envelopes


@pytest.mark.parametrize("allow_list", [True, False], ids=["with-envelope-principals", "acls-only"])
def test_an_envelope_from_a_principal_without_cluster_action_is_refused_whatever_its_inner_principal(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path, pki: Pki, allow_list: bool
) -> None:
    with running_bridge(
        zk_client, zk_connect, real_tree, tmp_path,
        listen_ssl_cert=pki.path("server.crt"), listen_ssl_key=pki.path("server.key"),
        listen_ssl_ca=pki.path("ca.crt"), envelope_principals=frozenset({SHIM}) if allow_list else None,
        authorizer="standard", super_users=frozenset({ADMIN}),
    ) as bridge:  # fmt: skip
        # The broker's certificate holds CLUSTER_ACTION by ACL: it may forward.
        grant(bridge, pki, acl(ResourceType.BROKER, "kafka-cluster", BROKER_PRINCIPAL, AclOperation.CLUSTER_ACTION))
        before = changeable_state(bridge, zk_connect)
        for inner_principal in (ADMIN, ALICE, "User:ANONYMOUS"):
            envelope, inner = enveloped(bridge, pki, "alice", inner_principal, create_topic("smuggled"), 19)
            assert envelope.error_code == ErrorCode.cluster_authorization_failed and inner is None
        assert changeable_state(bridge, zk_connect) == before
        envelope, inner = enveloped(bridge, pki, "broker", ADMIN, create_topic("forwarded"), 19)
        assert envelope.error_code == ErrorCode.none and [t.error_code for t in inner.topics] == [ErrorCode.none]
        assert "forwarded" in topics(bridge)


def test_an_envelope_from_a_cluster_action_holder_is_authorized_as_its_inner_principal(
    bridge: BridgeController, pki: Pki, zk_connect: str
) -> None:
    grant(bridge, pki, acl(ResourceType.TOPIC, "alice-", ALICE, AclOperation.CREATE, ResourcePatternType.PREFIXED))
    before = changeable_state(bridge, zk_connect)
    # The shim (--envelope-principals) forwards for bob, who may do nothing: refused per item.
    envelope, inner = enveloped(bridge, pki, "shim", BOB, two_topics("bob-a", "bob-b"), 19)
    assert envelope.error_code == ErrorCode.none
    assert [(t.name, t.error_code) for t in inner.topics] == [
        ("bob-a", ErrorCode.topic_authorization_failed), ("bob-b", ErrorCode.topic_authorization_failed),
    ]  # fmt: skip
    envelope, inner = enveloped(bridge, pki, "shim", BOB, incremental(TOPIC, "__consumer_offsets"), 44)
    assert [r.error_code for r in inner.responses] == [ErrorCode.topic_authorization_failed]
    assert changeable_state(bridge, zk_connect) == before
    # For alice, her topic is created and the other refused in the same request.
    envelope, inner = enveloped(bridge, pki, "shim", ALICE, two_topics("alice-e", "bob-e"), 19)
    assert {t.name: t.error_code for t in inner.topics} == {
        "alice-e": ErrorCode.none, "bob-e": ErrorCode.topic_authorization_failed,
    }  # fmt: skip
    assert "alice-e" in topics(bridge) and "bob-e" not in topics(bridge)


# ---------------------------------------------------------------------------------------------- brokers


def test_a_broker_needs_cluster_action_to_register_heartbeat_and_fetch(bridge: BridgeController, pki: Pki) -> None:
    assert bridge.cluster_id is not None and bridge.log is not None
    controller = ("127.0.0.1", bridge.listen_port)
    # alice's certificate holds no CLUSTER_ACTION: refused registration, heartbeat and Fetch of the log.
    intruder = SimulatedKraftBroker(
        10, controller, bridge.cluster_id, controller_ssl_context=client_context(pki, "alice")
    ).start()
    try:
        eventually(lambda: ErrorCode.cluster_authorization_failed in intruder.view.errors, timeout=TIMEOUT)
        assert intruder.view.registrations == 0 and 10 not in bridge.log.image.cluster.brokers
        follower = intruder.follower
        assert follower is not None
        eventually(lambda: "cluster_authorization_failed" in (follower.last_error or "").lower(), timeout=TIMEOUT)
        assert follower.position == 0
    finally:
        intruder.kill()
    heartbeat = heartbeat_v1.BrokerHeartbeatRequest(
        broker_id=i32(10), broker_epoch=i64(0), current_metadata_offset=i64(0), want_fence=False,
        want_shut_down=False,
    )  # fmt: skip
    assert send(bridge, heartbeat, client_context(pki, "alice")).error_code == ErrorCode.cluster_authorization_failed

    # An ACL gives the broker's certificate CLUSTER_ACTION: it registers, heartbeats and follows the log.
    grant(bridge, pki, acl(ResourceType.BROKER, "kafka-cluster", BROKER_PRINCIPAL, AclOperation.CLUSTER_ACTION))
    broker = SimulatedKraftBroker(
        10, controller, bridge.cluster_id, controller_ssl_context=client_context(pki, "broker")
    ).start()
    try:
        eventually(lambda: broker.view.heartbeats_answered >= 2, timeout=TIMEOUT)
        assert 10 in bridge.log.image.cluster.brokers
        assert ErrorCode.cluster_authorization_failed not in broker.view.errors
    finally:
        broker.kill()
