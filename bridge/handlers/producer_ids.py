"""AllocateProducerIds (api 67) as Kafka 3.9's ProducerIdControlManager: blocks of 1000 ids per request.

The next block starts where the image's last ProducerIdsRecord says (0 when there is none). The record
names the broker and its epoch; a broker whose registration epoch differs gets STALE_BROKER_EPOCH.
"""

from __future__ import annotations

from typing import Any

from kio.schema.allocate_producer_ids.v0 import AllocateProducerIdsResponse
from kio.schema.errors import ErrorCode
from kio.schema.types import ProducerId
from kio.static.primitive import i32

from bridge.api import ControllerHandler, ControllerResult, HandlerContext
from bridge.handlers._common import NO_THROTTLE, check_broker_epoch
from migrate.kraft import records as rec

ALLOCATE_PRODUCER_IDS = 67
# ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
BLOCK_SIZE = 1000
LONG_MAX = 2**63 - 1


def _error(code: ErrorCode) -> AllocateProducerIdsResponse:
    return AllocateProducerIdsResponse(
        throttle_time=NO_THROTTLE, error_code=code, producer_id_start=ProducerId(0), producer_id_len=i32(0)
    )


def allocate_producer_ids(ctx: HandlerContext, request: Any) -> ControllerResult:
    """ProducerIdControlManager.generateNextProducerId; errors as ControllerApis' handleError gives them."""
    broker_id, broker_epoch = int(request.broker_id), int(request.broker_epoch)
    stale = check_broker_epoch(ctx.image, broker_id, broker_epoch)
    if stale is not None:
        return ControllerResult([], _error(stale.code))
    first = max(ctx.image.next_producer_id, 0)
    if first > LONG_MAX - BLOCK_SIZE:
        # "Exhausted all producerIds as the next block's end producerId has exceeded the int64 type limit"
        return ControllerResult([], _error(ErrorCode.unknown_server_error))
    record = rec.ProducerIdsRecord(
        broker_id=broker_id, broker_epoch=broker_epoch, next_producer_id=first + BLOCK_SIZE
    )
    response = AllocateProducerIdsResponse(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        producer_id_start=ProducerId(first),
        producer_id_len=i32(BLOCK_SIZE),
    )
    # ControllerResult.of: Kafka does not ask for one batch (one record always fits).
    return ControllerResult([(record, 0)], response, atomic=False)


HANDLERS: dict[int, ControllerHandler] = {ALLOCATE_PRODUCER_IDS: allocate_producer_ids}
SUPPORTED: dict[int, tuple[int, int]] = {ALLOCATE_PRODUCER_IDS: (0, 0)}
