"""SASL principals judged by the cluster's ACLs: confluent-kafka clients logging in with SASL, straight to the bridge
and through a shim that authorizes nothing itself. A principal the ACLs do not allow changes nothing, whichever
way it comes; an ACL created through the bridge lets its next request through, with no restart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kazoo.client import KazooClient

from bridge.controller import BridgeController
from bridge.kafka.sasl_mechanisms import SaslLogin
from bridge.shim.server import ShimConfig, ShimServer, ShimThread
from cli.shim_cmd import secure_controller_channel, secure_shim
from migrate.zk.tree import ZTree
from tests.support.bridge import SHIM_ID, TIMEOUT, changeable_state, eventually, result, running_bridge
from tests.support.controller_sasl import (
    ADMIN,
    ADMIN_PASSWORD,
    ALICE,
    ALICE_PASSWORD,
    sasl_admin,
    sasl_fields,
)
from tests.support.quorum import leader_of, running_quorum

pytestmark = pytest.mark.zookeeper


def users_file(directory: Path) -> Path:
    """PLAIN's users of the bridge's listener and of the shim's: the super user and alice."""
    path = directory / "plain-users-with-alice"
    path.write_text(f"{ADMIN}={ADMIN_PASSWORD}\n{ALICE}={ALICE_PASSWORD}\n")
    return path


@pytest.fixture
def bridge(zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path) -> Iterator[BridgeController]:
    fields = sasl_fields(
        tmp_path, listen_plain_users=users_file(tmp_path), authorizer="standard", super_users=frozenset({"User:admin"})
    )
    with running_bridge(zk_client, zk_connect, real_tree, tmp_path, **fields) as controller:
        yield controller


@pytest.fixture
def shim(bridge: BridgeController, tmp_path: Path) -> Iterator[ShimServer]:
    """A SASL_PLAINTEXT shim without an authorizer, logging in to the bridge as the super user: what it forwards
    is judged by the bridge, as the principal its client logged in as."""
    config = ShimConfig(controllers=[("127.0.0.1", bridge.listen_port)], node_id=SHIM_ID, poll_interval_s=0.05)
    server = secure_controller_channel(ShimServer(config), ca=None, sasl=SaslLogin("PLAIN", ADMIN, ADMIN_PASSWORD))
    secure_shim(server, security_protocol="SASL_PLAINTEXT", sasl_mechanisms="PLAIN", plain_users=str(users_file(tmp_path)))
    with ShimThread(server):
        yield server


def create(client: AdminClient, name: str) -> Any:
    return client.create_topics([NewTopic(name, 1, 1)], request_timeout=TIMEOUT)[name]


def error_code(future: Any) -> int:
    with pytest.raises(KafkaException) as caught:
        future.result(timeout=TIMEOUT)
    code: int = caught.value.args[0].code()
    return code


def test_a_sasl_principal_gets_only_what_the_acls_allow_straight_to_the_bridge_and_through_a_shim(
    bridge: BridgeController, shim: ShimServer, zk_connect: str
) -> None:
    direct = sasl_admin(bridge.listen_port, ALICE, ALICE_PASSWORD)
    forwarded = sasl_admin(shim.port, ALICE, ALICE_PASSWORD)
    before = changeable_state(bridge, zk_connect)
    assert error_code(create(direct, "alice-direct")) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert error_code(create(forwarded, "alice-forwarded")) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert changeable_state(bridge, zk_connect) == before  # nothing in the log, nothing in ZooKeeper
    # The super user, logged in with SASL, grants alice CREATE on her topics through the bridge itself.
    admin = sasl_admin(bridge.listen_port, ADMIN, ADMIN_PASSWORD)
    granted = AclBinding(ResourceType.TOPIC, "alice-", ResourcePatternType.PREFIXED, f"User:{ALICE}", "*",
                         AclOperation.CREATE, AclPermissionType.ALLOW)  # fmt: skip
    result(admin.create_acls([granted]))
    # Her next requests pass, both ways, with no restart; a topic outside the grant is still refused.
    create(direct, "alice-direct").result(timeout=TIMEOUT)
    create(forwarded, "alice-forwarded").result(timeout=TIMEOUT)
    assert error_code(create(forwarded, "bob-topic")) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert bridge.log is not None
    assert {"alice-direct", "alice-forwarded"} <= set(bridge.log.image.topics_by_name)
    assert "bob-topic" not in bridge.log.image.topics_by_name


def test_a_quorum_whose_voters_log_in_as_a_super_user_elects_and_replicates_under_the_authorizer(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path
) -> None:
    """Vote, BeginQuorumEpoch and Fetch between voters need CLUSTER_ACTION: the voters' own login holds it."""
    fields = sasl_fields(
        tmp_path, listen_plain_users=users_file(tmp_path), authorizer="standard",
        super_users=frozenset({"User:admin"}), controller_sasl_mechanism="PLAIN", controller_sasl_username=ADMIN,
        controller_sasl_password=ADMIN_PASSWORD,
    )  # fmt: skip
    with running_quorum(zk_client, zk_connect, real_tree, tmp_path, **fields) as controllers:
        leader = leader_of(controllers)
        admin = sasl_admin(leader.listen_port, ADMIN, ADMIN_PASSWORD)  # kept: a destroyed client fails its futures
        create(admin, "quorum-t").result(timeout=TIMEOUT)
        followers = [c for c in controllers if c is not leader]
        eventually(lambda: all(f.log is not None and "quorum-t" in f.log.image.topics_by_name for f in followers), 20)
        alice = sasl_admin(leader.listen_port, ALICE, ALICE_PASSWORD)
        assert error_code(create(alice, "alice-t")) == KafkaError.TOPIC_AUTHORIZATION_FAILED
