"""SASL on the bridge's own listener, end to end with confluent-kafka's AdminClient straight to the bridge:
SASL_PLAINTEXT and SASL_SSL, PLAIN from the users file and SCRAM-SHA-256/512 checked against the SCRAM
credentials in the bridge's image (created through the bridge itself); wrong passwords are authentication
errors and the bridge keeps serving; a quorum whose voters log in to each other elects and replicates."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kazoo.client import KazooClient

from bridge.api import DriverState
from bridge.controller import BridgeController
from bridge.kafka.sasl_mechanisms import SaslLogin
from migrate.zk.load import load_tree
from migrate.zk.tree import ZTree
from tests.support.bridge import (
    TIMEOUT,
    controller_config,
    eventually,
    result,
    running_bridge,
    start_controller,
)
from tests.support.controller_sasl import (
    ADMIN,
    ADMIN_PASSWORD,
    ALICE,
    ALICE_PASSWORD,
    sasl_admin,
    sasl_fields,
    sasl_shim,
    write_zookeeper_scram_credential,
)
from tests.support.pki import Pki, client_context, needs_openssl, new_pki
from tests.support.quorum import leader_of, running_quorum
from tests.support.zk_broker import SimulatedZkBroker

pytestmark = pytest.mark.zookeeper


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    pki = new_pki(tmp_path_factory.mktemp("controller-sasl-pki"))
    pki.issue("client", "/O=zk2kraft/CN=admin-client")
    return pki


@pytest.fixture(params=["SASL_PLAINTEXT", pytest.param("SASL_SSL", marks=needs_openssl)])
def protocol(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def tls(protocol: str, request: pytest.FixtureRequest) -> Pki | None:
    """The test CA for SASL_SSL, None for SASL_PLAINTEXT."""
    return request.getfixturevalue("pki") if protocol == "SASL_SSL" else None


@pytest.fixture
def bridge(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path, tls: Pki | None
) -> Iterator[BridgeController]:
    with running_bridge(zk_client, zk_connect, real_tree, tmp_path, **sasl_fields(tmp_path, tls)) as controller:
        yield controller


def give_alice_credentials(bridge: BridgeController, pki: Pki | None, *mechanisms: ScramMechanism) -> None:
    """AlterUserScramCredentials through a shim that logs in to the bridge (the bridge serves it enveloped)."""
    upserts = [
        UserScramCredentialUpsertion(ALICE, ScramCredentialInfo(mechanism, 4096), ALICE_PASSWORD.encode())
        for mechanism in mechanisms
    ]
    with sasl_shim(bridge.listen_port, pki) as shim:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{shim.port}", "socket.timeout.ms": 20000})
        for upsert in upserts:  # one alteration per user and request (Kafka's DUPLICATE_RESOURCE otherwise)
            result(admin.alter_user_scram_credentials([upsert]))
    assert bridge.log is not None
    assert all((ALICE, 1 if m == ScramMechanism.SCRAM_SHA_256 else 2) in bridge.log.image.scram for m in mechanisms)


def authentication_failed(admin: AdminClient, errors: list[KafkaError]) -> bool:
    """Serve the client's callbacks until it reports an authentication error (False if none within TIMEOUT)."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        admin.poll(0.1)
        if any(error.code() == KafkaError._AUTHENTICATION for error in errors):
            return True
    return False


def create_topic(
    bridge: BridgeController, name: str, user: str, password: str, mechanism: str, pki: Pki | None
) -> None:
    admin = sasl_admin(bridge.listen_port, user, password, mechanism, pki=pki)
    result(admin.create_topics([NewTopic(name, 1, 1)], request_timeout=TIMEOUT))
    assert bridge.log is not None and name in bridge.log.image.topics_by_name


def test_plain_and_scram_logins_create_topics_and_a_scram_credential_made_through_the_bridge_serves_the_next_login(
    bridge: BridgeController, tls: Pki | None
) -> None:
    pki = tls
    create_topic(bridge, "sasl-plain", ADMIN, ADMIN_PASSWORD, "PLAIN", pki)
    # Nobody holds a SCRAM credential yet: alice cannot log in.
    errors: list[KafkaError] = []
    refused = sasl_admin(bridge.listen_port, ALICE, ALICE_PASSWORD, "SCRAM-SHA-256", pki=pki, errors=errors)
    assert authentication_failed(refused, errors)
    # Alice gets credentials through the bridge (AlterUserScramCredentials, forwarded by a shim that logs in to
    # the bridge with SASL, committed to the bridge's log)...
    give_alice_credentials(bridge, pki, ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)
    # ... and her next connections log in with either mechanism, with no restart.
    create_topic(bridge, "sasl-scram-256", ALICE, ALICE_PASSWORD, "SCRAM-SHA-256", pki)
    create_topic(bridge, "sasl-scram-512", ALICE, ALICE_PASSWORD, "SCRAM-SHA-512", pki)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_a_wrong_password_is_an_authentication_error_and_the_bridge_keeps_serving(
    bridge: BridgeController, tls: Pki | None, mechanism: str
) -> None:
    pki = tls
    user, password = (ADMIN, ADMIN_PASSWORD) if mechanism == "PLAIN" else (ALICE, ALICE_PASSWORD)
    if mechanism != "PLAIN":
        give_alice_credentials(bridge, pki, ScramMechanism.SCRAM_SHA_512)
    assert bridge.log is not None
    end = bridge.log.end_offset
    errors: list[KafkaError] = []
    intruder = sasl_admin(bridge.listen_port, user, "not-" + password, mechanism, pki=pki, errors=errors)
    futures = intruder.create_topics([NewTopic("sasl-intruder", 1, 1)], request_timeout=3)
    assert authentication_failed(intruder, errors)
    with pytest.raises(Exception):  # noqa: B017 - librdkafka fails it as authentication or timeout
        futures["sasl-intruder"].result(timeout=TIMEOUT)
    assert bridge.log.end_offset == end and "sasl-intruder" not in bridge.log.image.topics_by_name
    create_topic(bridge, "sasl-after-intruder", user, password, mechanism, pki)


def test_a_quorum_with_sasl_on_every_listener_elects_a_leader_and_replicates(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path, tls: Pki | None
) -> None:
    """Over SASL_SSL the listeners require client certificates too: each voter presents its own."""
    password_login = {
        "controller_sasl_mechanism": "PLAIN",
        "controller_sasl_username": ADMIN,
        "controller_sasl_password": ADMIN_PASSWORD,
    }
    fields = sasl_fields(tmp_path, tls, **password_login)
    if tls is not None:
        fields["listen_ssl_ca"] = tls.path("ca.crt")
    with running_quorum(zk_client, zk_connect, real_tree, tmp_path, **fields) as controllers:
        leader = leader_of(controllers)
        create_topic(leader, "sasl-quorum", ADMIN, ADMIN_PASSWORD, "PLAIN", tls)
        followers = [c for c in controllers if c is not leader]
        eventually(
            lambda: all(f.log is not None and "sasl-quorum" in f.log.image.topics_by_name for f in followers), 20
        )
        for follower in followers:
            raft = follower.status().raft
            assert raft is not None and raft.role == "follower" and raft.leader_id == leader.config.node_id


@needs_openssl
def test_a_broker_logging_in_over_sasl_ssl_registers_and_heartbeats_one_with_a_wrong_password_never_registers(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path, pki: Pki
) -> None:
    """Before the migration the image holds no SCRAM credential yet: brokers log in with PLAIN, as they must to a
    KRaft controller of a migrating cluster."""
    load_tree(zk_client, real_tree)
    config = controller_config(zk_connect, tmp_path / "meta", rehearsal=False, **sasl_fields(tmp_path, pki))
    bridge = start_controller(config)
    brokers: list[SimulatedZkBroker] = []
    try:
        assert bridge.wait_for_state(DriverState.WAIT_FOR_BROKERS), bridge.error
        assert bridge.cluster_id is not None and bridge.log is not None
        controller = ("127.0.0.1", bridge.listen_port)
        tls = client_context(pki, None)

        def broker(broker_id: int, password: str) -> SimulatedZkBroker:
            login = SaslLogin("PLAIN", ADMIN, password)
            started = SimulatedZkBroker(
                broker_id, controller, bridge.cluster_id or "", controller_ssl_context=tls, controller_sasl=login
            )
            brokers.append(started.start())
            return started

        intruder = broker(2, "not-" + ADMIN_PASSWORD)
        good = broker(1, ADMIN_PASSWORD)
        eventually(lambda: good.view.is_caught_up and not good.view.is_fenced, timeout=20)
        beats = good.view.heartbeats_answered
        eventually(lambda: good.view.heartbeats_answered > beats + 2, timeout=20)
        assert good.view.errors == []
        assert 1 in bridge.log.image.cluster.brokers
        assert 2 not in bridge.log.image.cluster.brokers and intruder.view.registrations == 0
    finally:
        for started in brokers:
            started.kill()
        bridge.stop()


def test_before_the_migration_a_broker_logs_in_with_the_scram_credential_zookeeper_holds(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path
) -> None:
    """A SCRAM-only listener: until ZK_MIGRATION copies /config/users the log holds no credential, so the bridge
    checks the one ZooKeeper holds (as the brokers do today); a wrong password is still refused."""
    load_tree(zk_client, real_tree)
    write_zookeeper_scram_credential(zk_client, "broker", "SCRAM-SHA-512", ALICE_PASSWORD)
    config = controller_config(
        zk_connect, tmp_path / "meta", rehearsal=False, listen_sasl_mechanisms=("SCRAM-SHA-512",)
    )
    bridge = start_controller(config)
    brokers: list[SimulatedZkBroker] = []
    try:
        assert bridge.wait_for_state(DriverState.WAIT_FOR_BROKERS), bridge.error
        assert bridge.cluster_id is not None and bridge.log is not None and not bridge.log.image.scram
        controller = ("127.0.0.1", bridge.listen_port)
        for broker_id, password in ((2, "not-" + ALICE_PASSWORD), (1, ALICE_PASSWORD)):
            login = SaslLogin("SCRAM-SHA-512", "broker", password)
            brokers.append(SimulatedZkBroker(broker_id, controller, bridge.cluster_id, controller_sasl=login).start())
        intruder, good = brokers
        eventually(lambda: good.view.is_caught_up and not good.view.is_fenced, timeout=20)
        assert 1 in bridge.log.image.cluster.brokers
        assert 2 not in bridge.log.image.cluster.brokers and intruder.view.registrations == 0
    finally:
        for started in brokers:
            started.kill()
        bridge.stop()
