"""AllocateProducerIds handler: blocks of 1000 ids, ProducerIdsRecord, broker epoch check."""

from __future__ import annotations

import copy
import uuid

from kio.schema.allocate_producer_ids.v0 import AllocateProducerIdsRequest
from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId
from kio.static.primitive import i64

from bridge.api import ControllerResult, HandlerContext
from bridge.handlers import producer_ids
from bridge.kafka import protocol
from migrate.kraft import records as rec
from migrate.kraft.image import MetadataImage
from migrate.kraft.replay import replay_records


def make_image() -> MetadataImage:
    return replay_records(
        [
            (rec.FeatureLevelRecord(name="metadata.version", feature_level=21), 0),
            (
                rec.RegisterBrokerRecord(
                    broker_id=1, incarnation_id=uuid.UUID(int=1), broker_epoch=10, fenced=False
                ),
                3,
            ),
        ]
    )


def allocate(image: MetadataImage, broker: int = 1, epoch: int = 10) -> ControllerResult:
    before = copy.deepcopy(image)
    ctx = HandlerContext(image=image, api_version=0, node_id=3000, now_ms=0)
    result = producer_ids.allocate_producer_ids(
        ctx, AllocateProducerIdsRequest(broker_id=BrokerId(broker), broker_epoch=i64(epoch))
    )
    assert image == before
    data = protocol.encode_response(1, result.response)
    assert protocol.decode_response(data, producer_ids.ALLOCATE_PRODUCER_IDS, 0, "test") == (
        1,
        result.response,
    )
    return result


def test_blocks_follow_each_other() -> None:
    image = make_image()
    first = allocate(image)
    assert (first.response.error_code, first.response.producer_id_start, first.response.producer_id_len) == (
        ErrorCode.none,
        0,
        1000,
    )
    assert first.records == [(rec.ProducerIdsRecord(broker_id=1, broker_epoch=10, next_producer_id=1000), 0)]
    assert first.atomic is False  # ControllerResult.of, as ProducerIdControlManager returns it
    image = replay_records(first.records, image=image)
    second = allocate(image)
    assert second.response.producer_id_start == 1000
    assert second.records[0][0].next_producer_id == 2000


def test_stale_or_unknown_broker() -> None:
    for broker, epoch in ((1, 9), (2, 10)):
        result = allocate(make_image(), broker, epoch)
        assert result.records == []
        assert (result.response.error_code, result.response.producer_id_len) == (
            ErrorCode.stale_broker_epoch,
            0,
        )


def test_exhausted_ids() -> None:
    image = make_image()
    image.next_producer_id = 2**63 - 1000 + 1
    result = allocate(image)
    assert result.records == [] and result.response.error_code == ErrorCode.unknown_server_error
