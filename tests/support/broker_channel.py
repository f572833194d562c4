"""The controller-to-broker channel's test kit: hand-built broker requests and answers, and channel helpers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i64

from bridge.broker_channel import BrokerChannel, ChannelSettings
from bridge.brokers.propagation import BrokerRequest
from bridge.kafka import legacy_messages as lm

SUPPORTED = {4: (7, 7), 5: (4, 4), 6: (8, 8)}
"""LeaderAndIsr v7, StopReplica v4, UpdateMetadata v8: what a stand-in broker reads."""


def update_metadata(broker_id: int, marker: int, *, full: bool = False) -> BrokerRequest:
    """An UpdateMetadata whose broker epoch tells requests apart."""
    body = lm.UpdateMetadataRequestV8(
        controller_id=i32(3000), is_kraft_controller=True, controller_epoch=i32(7), broker_epoch=i64(marker)
    )
    return BrokerRequest(broker_id, body, full)


def leader_and_isr(broker_id: int, marker: int, *, full: bool = False) -> BrokerRequest:
    body = lm.LeaderAndIsrRequestV7(
        controller_id=i32(3000), is_kraft_controller=True, controller_epoch=i32(7), broker_epoch=i64(marker)
    )
    return BrokerRequest(broker_id, body, full)


def stop_replica(broker_id: int, marker: int) -> BrokerRequest:
    body = lm.StopReplicaRequestV4(
        controller_id=i32(3000), is_kraft_controller=True, controller_epoch=i32(7), broker_epoch=i64(marker)
    )
    return BrokerRequest(broker_id, body)


def ok_response(api_key: int, error: ErrorCode = ErrorCode.none) -> Any:
    return {
        4: lm.LeaderAndIsrResponseV7(error_code=error),
        5: lm.StopReplicaResponseV4(error_code=error),
        6: lm.UpdateMetadataResponseV8(error_code=error),
    }[api_key]


async def eventually(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.01)


def settings(**overrides: Any) -> ChannelSettings:
    return ChannelSettings(**{"client_id": "3000", "retry_backoff_s": 0.1, **overrides})


def send(channel: BrokerChannel, requests: Iterable[BrokerRequest]) -> None:
    channel.enqueue(channel.encode(requests))


def broker_status(channel: BrokerChannel, broker_id: int) -> Any:
    return next(b for b in channel.snapshot().brokers if b.broker_id == broker_id)
