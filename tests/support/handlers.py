"""Scaffolding of the request-handler tests: images replayed from records, a handler context, responses that
must survive Kafka's wire format in their version."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable
from typing import Any

from bridge.api import ControllerResult, HandlerContext
from bridge.kafka.protocol import decode_response, encode_response
from migrate.kraft.image import MetadataImage
from migrate.kraft.replay import replay_records

Records = list[tuple[Any, int]]  # (record, record version)
CONTROLLER_ID = 3000


def image_of(*batches: Records) -> MetadataImage:
    """A fresh image replaying `batches` in order (fresh each call: replay shares nested values)."""
    return replay_records([rv for batch in batches for rv in batch])


def counting_uuids(start: int = 1000) -> Callable[[], uuid.UUID]:
    """UUIDs `start`, `start + 1`, ... as integers: new ids a test can predict."""
    counter = itertools.count(start)
    return lambda: uuid.UUID(int=next(counter))


def context(
    image: MetadataImage,
    version: int,
    *,
    new_uuid: Callable[[], uuid.UUID] | None = None,
    now_ms: int = 0,
) -> HandlerContext:
    """What the controller hands a handler for a request of `version` (node CONTROLLER_ID)."""
    return HandlerContext(
        image=image,
        api_version=version,
        node_id=CONTROLLER_ID,
        now_ms=now_ms,
        new_uuid=new_uuid or counting_uuids(),
    )


def round_trip(result: ControllerResult, api_key: int, version: int) -> Any:
    """The response as a client decodes it: it must encode in its version and read back equal."""
    correlation_id, body = decode_response(encode_response(7, result.response), api_key, version, "test")
    assert correlation_id == 7 and body == result.response
    return body
