"""The controller-to-broker channel over TLS and SASL, as Kafka's ControllerChannelManager connects: the
security protocol of the broker's endpoint decides, with the controller's own TLS context and SASL login.

Stand-in brokers are real Kafka listeners (TLS with test certificates, SASL PLAIN and SCRAM users) over TCP;
the last test runs the bridge with simulated ZooKeeper-mode brokers whose registrations name the protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from pydantic import SecretStr

from bridge.api import DriverState
from bridge.broker_channel import BrokerChannel
from bridge.brokers.propagation import BrokerAddress
from bridge.config import inter_broker_security
from bridge.kafka.listener import KafkaListener, RequestContext
from bridge.kafka.protocol import ANONYMOUS, KafkaPrincipal
from bridge.kafka.sasl import SaslConfig
from bridge.kafka.sasl_mechanisms import SaslLogin
from bridge.kafka.tls import ClientAuth, client_ssl_context
from bridge.metrics import BridgeMetrics
from migrate.errors import Zk2KraftError
from migrate.zk.load import load_tree
from migrate.zk.tree import ZTree
from tests.support.bridge import controller_config, start_controller
from tests.support.bridge import eventually as bridge_eventually
from tests.support.broker_channel import (
    SUPPORTED,
    broker_status,
    eventually,
    leader_and_isr,
    ok_response,
    send,
    settings,
    update_metadata,
)
from tests.support.listener import PASSWORDS, sasl_config
from tests.support.pki import Pki, needs_openssl, new_pki, server_context
from tests.support.zk_broker import SimulatedZkBroker

pytestmark = [needs_openssl]

HOST = "127.0.0.1"
PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL = 0, 1, 2, 3
CONTROLLER_PRINCIPAL = KafkaPrincipal("User", "CN=controller-3000,O=zk2kraft")
ALICE = KafkaPrincipal("User", "alice")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    pki = new_pki(tmp_path_factory.mktemp("channel-pki"))
    pki.issue("controller", "/O=zk2kraft/CN=controller-3000")
    return pki


def controller_tls(pki: Pki, *, cert: bool = False) -> ssl.SSLContext:
    """The channel's context: trusts the test CA; with `cert`, presents the controller's certificate."""
    if not cert:
        return client_ssl_context(cafile=pki.path("ca.crt"))
    return client_ssl_context(
        cafile=pki.path("ca.crt"), certfile=pki.path("controller.crt"), keyfile=pki.path("controller.key")
    )


@dataclass
class SecuredBroker:
    """A ZooKeeper-mode broker's inter-broker listener speaking `protocol`; records who sent what."""

    broker_id: int
    protocol: int
    ssl_context: ssl.SSLContext | None = None
    sasl: SaslConfig | None = None
    received: list[tuple[int, KafkaPrincipal]] = field(default_factory=list)
    listener: KafkaListener | None = None

    @property
    def address(self) -> BrokerAddress:
        assert self.listener is not None
        return BrokerAddress(self.broker_id, HOST, self.listener.port, self.protocol)

    async def start(self) -> None:
        async def answer(ctx: RequestContext, _request: Any) -> Any:
            self.received.append((ctx.api_key, ctx.principal))
            return ok_response(ctx.api_key)

        handlers = {key: answer for key in SUPPORTED}
        self.listener = KafkaListener(
            HOST, 0, handlers, supported=SUPPORTED, ssl_context=self.ssl_context, sasl=self.sasl
        )
        await self.listener.start()


def tls_broker(broker_id: int, pki: Pki, client_auth: ClientAuth = "none", *, sasl: bool = False) -> SecuredBroker:
    return SecuredBroker(
        broker_id,
        SASL_SSL if sasl else SSL,
        ssl_context=server_context(pki, client_auth),
        sasl=sasl_config() if sasl else None,
    )


@contextlib.asynccontextmanager
async def channel_to(*brokers: SecuredBroker, **overrides: Any) -> AsyncIterator[BrokerChannel]:
    for broker in brokers:
        await broker.start()
    channel = BrokerChannel(settings(**overrides), metrics=BridgeMetrics(3000))
    channel.set_members({b.broker_id: b.address for b in brokers})
    try:
        yield channel
    finally:
        await channel.close()
        for broker in brokers:
            assert broker.listener is not None
            await broker.listener.stop()


async def full_sync_reaches(channel: BrokerChannel, broker: SecuredBroker) -> None:
    send(channel, [update_metadata(broker.broker_id, 1, full=True), leader_and_isr(broker.broker_id, 2, full=True)])
    await eventually(lambda: broker_status(channel, broker.broker_id).full_syncs_sent == 1)
    assert [key for key, _ in broker.received] == [6, 4]


async def fails_with(channel: BrokerChannel, broker: SecuredBroker, *kinds: str) -> str:
    """Sends one request that cannot get through; the reason /status shows once it failed twice (retried),
    and that /status tells this failure's kind (one of `kinds`) apart from a network failure."""
    send(channel, [update_metadata(broker.broker_id, 1)])
    await eventually(lambda: broker_status(channel, broker.broker_id).network_failures >= 2)
    status = broker_status(channel, broker.broker_id)
    assert status.queue_depth == 1 and status.last_acknowledged is None and not status.connected
    assert broker.received == []  # nothing reached the broker's request handling
    assert status.last_network_error is not None and status.failure_kind in kinds
    assert status.retry_backoff_ms is not None and status.retry_backoff_ms > 100  # backing off
    return status.last_network_error


@pytest.mark.parametrize(
    ("protocol", "mechanism"),
    [
        (SSL, None),
        (SASL_PLAINTEXT, "PLAIN"),
        (SASL_PLAINTEXT, "SCRAM-SHA-256"),
        (SASL_SSL, "SCRAM-SHA-512"),
        (SASL_SSL, "PLAIN"),
    ],
)
def test_requests_reach_a_broker_over_its_endpoints_security_protocol(
    pki: Pki, protocol: int, mechanism: str | None
) -> None:
    tls = protocol in (SSL, SASL_SSL)
    login = None if mechanism is None else SaslLogin(mechanism, "alice", PASSWORDS["alice"])
    broker = SecuredBroker(
        1,
        protocol,
        ssl_context=server_context(pki, "none") if tls else None,
        sasl=sasl_config() if login else None,
    )

    async def scenario() -> None:
        async with channel_to(broker, ssl_context=controller_tls(pki), sasl=login) as channel:
            await full_sync_reaches(channel, broker)
            status = broker_status(channel, 1)
            assert status.connected and status.network_failures == 0 and status.last_network_error is None

    asyncio.run(scenario())
    assert {principal for _, principal in broker.received} == {ALICE if login else ANONYMOUS}


def test_mutual_tls_presents_the_controllers_certificate_and_without_it_the_broker_is_unreachable(
    pki: Pki,
) -> None:
    with_cert = tls_broker(1, pki, "required")
    without_cert = tls_broker(2, pki, "required")

    async def scenario() -> tuple[str, str | None]:
        async with channel_to(with_cert, ssl_context=controller_tls(pki, cert=True)) as channel:
            await full_sync_reaches(channel, with_cert)
        async with channel_to(without_cert, ssl_context=controller_tls(pki)) as channel:
            reason = await fails_with(channel, without_cert, "tls", "network")
            return reason, broker_status(channel, 2).failure_kind

    reason, kind = asyncio.run(scenario())
    assert {principal for _, principal in with_cert.received} == {CONTROLLER_PRINCIPAL}
    # TLS 1.3: the refusal comes after the client's handshake, as an alert or a bare close.
    assert "CERTIFICATE_REQUIRED" in reason.upper() or "requires a client certificate" in reason
    assert kind == ("tls" if "CERTIFICATE_REQUIRED" in reason.upper() else "network")  # a bare close is ambiguous


@pytest.mark.parametrize(
    ("protocol", "mechanism", "told"),
    [
        (SASL_PLAINTEXT, "PLAIN", "Authentication failed: Invalid username or password"),
        (
            SASL_SSL,
            "SCRAM-SHA-256",
            "Authentication failed during authentication due to invalid credentials with SASL mechanism "
            "SCRAM-SHA-256",
        ),
    ],
)
def test_a_wrong_password_is_a_counted_network_failure_with_the_brokers_reason(
    pki: Pki, protocol: int, mechanism: str, told: str
) -> None:
    broker = SecuredBroker(
        1, protocol, ssl_context=server_context(pki, "none") if protocol == SASL_SSL else None, sasl=sasl_config()
    )
    wrong = "not-alices-password"

    async def scenario() -> str:
        login = SaslLogin(mechanism, "alice", wrong)
        async with channel_to(broker, ssl_context=controller_tls(pki), sasl=login) as channel:
            return await fails_with(channel, broker, "authentication")

    reason = asyncio.run(scenario())
    assert f"SASL/{mechanism} login to {HOST}:" in reason and "as alice failed: SASL_AUTHENTICATION_FAILED" in reason
    assert told in reason
    assert wrong not in reason


def test_a_mechanism_the_brokers_listener_does_not_enable_is_a_failure_naming_the_enabled_ones() -> None:
    broker = SecuredBroker(1, SASL_PLAINTEXT, sasl=sasl_config(("PLAIN",)))

    async def scenario() -> str:
        login = SaslLogin("SCRAM-SHA-512", "alice", PASSWORDS["alice"])
        async with channel_to(broker, sasl=login) as channel:
            return await fails_with(channel, broker, "authentication")

    reason = asyncio.run(scenario())
    assert "UNSUPPORTED_SASL_MECHANISM: the broker's listener enables [PLAIN], not SCRAM-SHA-512" in reason


def test_a_broker_whose_protocol_the_channel_has_no_settings_for_is_unreachable_with_the_option_to_give(
    pki: Pki,
) -> None:
    sasl_broker = tls_broker(1, pki, sasl=True)
    tls_broker_ = tls_broker(2, pki)

    async def scenario() -> tuple[str, str]:
        async with channel_to(sasl_broker, ssl_context=controller_tls(pki)) as channel:
            no_login = await fails_with(channel, sasl_broker, "settings")
        async with channel_to(tls_broker_) as channel:  # no TLS context at all
            no_tls = await fails_with(channel, tls_broker_, "settings")
        return no_login, no_tls

    no_login, no_tls = asyncio.run(scenario())
    assert "uses SASL_SSL and the bridge has no SASL login for it" in no_login
    assert "--inter-broker-sasl-mechanism" in no_login
    assert "uses SSL and the bridge has no TLS settings for it" in no_tls


def test_a_broker_certificate_the_controller_does_not_trust_is_a_failed_tls_handshake(
    pki: Pki, tmp_path: Path
) -> None:
    other = new_pki(tmp_path / "other-ca")
    broker = tls_broker(1, pki)

    async def scenario() -> str:
        async with channel_to(broker, ssl_context=client_ssl_context(cafile=other.path("ca.crt"))) as channel:
            return await fails_with(channel, broker, "tls")

    reason = asyncio.run(scenario())
    assert "TLS handshake failed" in reason and "certificate verify failed" in reason


@pytest.mark.zookeeper
def test_the_bridge_reaches_each_zookeeper_broker_with_the_protocol_its_registration_names(
    pki: Pki, zk_client: KazooClient, real_tree: ZTree, zk_connect: str, tmp_path: Path
) -> None:
    """Three brokers register listener INTERNAL, as SASL_SSL, SSL with client certificates and SASL_PLAINTEXT."""
    load_tree(zk_client, real_tree)
    config = controller_config(
        zk_connect,
        tmp_path / "meta",
        rehearsal=False,
        inter_broker_listener_name="INTERNAL",
        inter_broker_ssl_ca=pki.path("ca.crt"),
        inter_broker_ssl_cert=pki.path("controller.crt"),
        inter_broker_ssl_key=pki.path("controller.key"),
        inter_broker_sasl_mechanism="SCRAM-SHA-256",
        inter_broker_sasl_username="alice",
        inter_broker_sasl_password=SecretStr(PASSWORDS["alice"]),
    )
    bridge = start_controller(config)
    assert bridge.cluster_id is not None
    controller = (HOST, bridge.listen_port)
    securities: dict[int, dict[str, Any]] = {
        1: {"ssl_context": server_context(pki, "none"), "sasl": sasl_config()},
        2: {"ssl_context": server_context(pki, "required")},
        3: {"sasl": sasl_config()},
    }
    brokers = []
    try:
        for broker_id, security in securities.items():
            brokers.append(
                SimulatedZkBroker(
                    broker_id, controller, bridge.cluster_id, zk_connect=zk_connect, listener_name="INTERNAL",
                    **security,
                ).start()
            )
        assert [b.listener.security_protocol for b in brokers] == ["SASL_SSL", "SSL", "SASL_PLAINTEXT"]
        assert bridge.wait_for_state(DriverState.DUAL_WRITE), bridge.error

        def answered() -> bool:  # a broker that joins after the full sync gets incremental requests only
            channel = bridge.status().broker_channel
            return channel is not None and len(channel.brokers) == 3 and all(
                b.last_acknowledged is not None and b.network_failures == 0 for b in channel.brokers
            )

        try:
            bridge_eventually(answered, timeout=30)
        except AssertionError:
            raise AssertionError(f"the channel as /status shows it: {bridge.status().broker_channel}") from None
        assert [b.principals for b in brokers] == [{ALICE}, {CONTROLLER_PRINCIPAL}, {ALICE}]
        registered = bridge.channel.members
        assert sorted(address.security_protocol for address in registered.values()) == [SSL, SASL_PLAINTEXT, SASL_SSL]
    finally:
        for broker in brokers:
            broker.kill()
        bridge.stop()


def test_inter_broker_security_refuses_options_that_do_not_go_together(pki: Pki, tmp_path: Path) -> None:
    def refusal(**fields: Any) -> str:
        with pytest.raises(Zk2KraftError) as caught:
            inter_broker_security(controller_config("127.0.0.1:1", tmp_path / "m", **fields))
        return str(caught.value)

    assert "needs --inter-broker-sasl-username" in refusal(inter_broker_sasl_mechanism="PLAIN")
    assert "ZK2KRAFT_INTER_BROKER_SASL_PASSWORD" in refusal(
        inter_broker_sasl_mechanism="PLAIN", inter_broker_sasl_username="alice"
    )
    assert "need --inter-broker-sasl-mechanism" in refusal(
        inter_broker_sasl_username="alice", inter_broker_sasl_password=SecretStr("x")
    )
    assert "--inter-broker-ssl-key needs --inter-broker-ssl-cert" in refusal(
        inter_broker_ssl_key=pki.path("controller.key")
    )
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    assert "cannot load TLS material" in refusal(inter_broker_ssl_ca=garbage)
    context, login = inter_broker_security(
        controller_config(
            "127.0.0.1:1", tmp_path / "m", inter_broker_sasl_mechanism="SCRAM-SHA-512",
            inter_broker_sasl_username="alice", inter_broker_sasl_password=SecretStr("pw-of-alice"),
        )
    )  # fmt: skip
    assert login == SaslLogin("SCRAM-SHA-512", "alice", "pw-of-alice")
    assert "pw-of-alice" not in repr(login) and context.check_hostname
