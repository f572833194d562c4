"""bridge.kafka.memo_writer: responses written with remembered nested entities are byte-for-byte kio's."""

from __future__ import annotations

import dataclasses
import datetime
import io
import uuid
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.api_versions.v3 import ApiVersionsResponse
from kio.schema.create_topics.v4 import CreateTopicsResponse as CreateTopicsResponseV4
from kio.schema.create_topics.v5 import CreateTopicsResponse as CreateTopicsResponseV5
from kio.schema.create_topics.v6 import CreateTopicsResponse as CreateTopicsResponseV6
from kio.schema.create_topics.v7 import CreateTopicsResponse as CreateTopicsResponseV7
from kio.schema.create_topics.v7.response import CreatableTopicConfigs, CreatableTopicResult
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.serial import entity_writer
from kio.static.primitive import i8, i16, i32, i32Timedelta

from bridge.kafka import memo_writer, protocol
from bridge.kafka.protocol import REMEMBERED_ENTITIES, encode_entity

REMEMBERING = [CreateTopicsResponseV5, CreateTopicsResponseV6, CreateTopicsResponseV7]


def kio_bytes(entity: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(type(entity))(out, entity)
    return out.getvalue()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_remembered_encoding_is_kios_byte_for_byte_first_and_second_time(data: st.DataObject) -> None:
    response = data.draw(st.from_type(data.draw(st.sampled_from(REMEMBERING))))
    expected = kio_bytes(response)
    assert encode_entity(response) == expected
    assert encode_entity(response) == expected  # now from the remembered entries


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_config_entries_shared_between_responses_encode_within_each(data: st.DataObject) -> None:
    response_type = data.draw(st.sampled_from(REMEMBERING))
    first = data.draw(st.from_type(response_type))
    second = data.draw(st.from_type(response_type))
    shared = tuple(c for t in first.topics for c in t.configs or ())
    # The second response's topics carry the first one's entries: the cache serves them there too.
    mixed = type(second)(
        throttle_time=second.throttle_time,
        topics=tuple(dataclasses.replace(t, configs=shared) for t in second.topics),
    )
    encode_entity(first)
    assert encode_entity(mixed) == kio_bytes(mixed)


def test_only_responses_holding_remembered_entities_get_the_remembering_writer() -> None:
    assert memo_writer.contains(CreateTopicsResponseV7, REMEMBERED_ENTITIES)
    assert not memo_writer.contains(CreateTopicsResponseV4, REMEMBERED_ENTITIES)
    assert not memo_writer.contains(ApiVersionsResponse, REMEMBERED_ENTITIES)
    assert protocol._writer(ApiVersionsResponse) is entity_writer(ApiVersionsResponse)


def test_a_full_cache_starts_over_and_still_encodes_right(monkeypatch: Any) -> None:
    monkeypatch.setattr(memo_writer, "REMEMBERED_LIMIT", 3)
    writer = memo_writer.memo_entity_writer(CreateTopicsResponseV7, REMEMBERED_ENTITIES)
    responses = [response_with_configs(n) for n in range(8)]
    for response in responses + responses:  # the second pass finds some, misses others
        out = io.BytesIO()
        writer(out, response)
        assert out.getvalue() == kio_bytes(response)


def response_with_configs(n: int) -> CreateTopicsResponseV7:
    configs = tuple(
        CreatableTopicConfigs(
            name=f"config.{n}.{i}", value=str(i), read_only=False, config_source=i8(5), is_sensitive=False
        )
        for i in range(n)
    )
    topic = CreatableTopicResult(
        name=TopicName(f"topic-{n}"),
        topic_id=uuid.UUID(int=n),
        error_code=ErrorCode.none,
        error_message=None,
        topic_config_error_code=i16(n % 2),
        num_partitions=i32(n),
        replication_factor=i16(3),
        configs=configs,
    )
    return CreateTopicsResponseV7(throttle_time=i32Timedelta.parse(datetime.timedelta(0)), topics=(topic,))
