"""UnregisterBroker through the shim: forwarded to the controller in an envelope as KafkaApis forwards it, and
refused without ALTER on the cluster as ControllerApis refuses it (the error code only, no message)."""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from bridge.kafka.listener import RequestContext
from bridge.kafka.protocol import KafkaPrincipal
from bridge.shim.server import ShimConfig, ShimServer
from tests.support.requests import unregister_broker, unregister_broker_response

ADMIN = KafkaPrincipal("User", "admin")
BOB = KafkaPrincipal("User", "bob")
UNREGISTER_BROKER = 64


class RecordingChannel:
    """Stands in for the shim's ControllerChannel: records what is forwarded, answers as the controller."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.forwarded: list[tuple[Any, KafkaPrincipal]] = []

    async def forward(
        self, request: Any, correlation_id: int, client_id: str | None, principal: KafkaPrincipal,
        client_address: str, timeout: float,
    ) -> Any:  # fmt: skip
        self.forwarded.append((request, principal))
        return self.answer


def context(principal: KafkaPrincipal) -> RequestContext:
    return RequestContext(("10.0.0.7", 50000), "kafka-cluster", 11, UNREGISTER_BROKER, 0, principal)


def shim_with(channel: RecordingChannel) -> ShimServer:
    shim = ShimServer(ShimConfig(controllers=[("127.0.0.1", 9)]))
    shim.channel = channel  # type: ignore[assignment]
    return shim


def test_the_shim_serves_unregister_broker_v0_by_forwarding_it() -> None:
    channel = RecordingChannel(unregister_broker_response(ErrorCode.broker_id_not_registered))
    handlers, supported = shim_with(channel).handler_table()
    assert supported[UNREGISTER_BROKER] == (0, 0)
    response = asyncio.run(handlers[UNREGISTER_BROKER](context(ADMIN), unregister_broker(9)))
    assert response == unregister_broker_response(ErrorCode.broker_id_not_registered)
    assert channel.forwarded == [(unregister_broker(9), ADMIN)]


def test_unregister_broker_needs_alter_on_the_cluster() -> None:
    channel = RecordingChannel(unregister_broker_response())
    shim = shim_with(channel)
    shim.use_acl_authorizer(super_users=("User:admin",))
    handlers, _ = shim.handler_table()
    refused = asyncio.run(handlers[UNREGISTER_BROKER](context(BOB), unregister_broker(3)))
    assert refused == unregister_broker_response(ErrorCode.cluster_authorization_failed)
    assert channel.forwarded == []
    allowed = asyncio.run(handlers[UNREGISTER_BROKER](context(ADMIN), unregister_broker(3)))
    assert allowed == unregister_broker_response()
    assert channel.forwarded == [(unregister_broker(3), ADMIN)]
