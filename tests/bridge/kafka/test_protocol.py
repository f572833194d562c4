"""Kafka wire protocol around kio: headers, frames, Kafka's special cases, and hostile bytes."""

# No `from __future__ import annotations`: this module declares kio entities, whose field types kio reads
# from the real annotations.

import asyncio
import contextlib
import datetime
import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.alter_partition.v3 import AlterPartitionRequest
from kio.schema.api_versions.v0 import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
from kio.schema.api_versions.v3 import ApiVersionsRequest, ApiVersionsResponse
from kio.schema.create_topics.v7 import CreateTopicsRequest
from kio.schema.describe_cluster.v1 import DescribeClusterRequest, DescribeClusterResponse
from kio.schema.envelope.v0 import EnvelopeRequest, EnvelopeResponse
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map
from kio.schema.metadata.v0 import MetadataRequest as MetadataRequestV0
from kio.schema.metadata.v0.request import MetadataRequestTopic as MetadataRequestTopicV0
from kio.schema.metadata.v12 import MetadataRequest, MetadataResponse
from kio.schema.types import TopicName
from kio.static.primitive import i16, i32, i32Timedelta, i64

from bridge.kafka import protocol
from bridge.kafka.legacy_messages import ControlledShutdownRequestV3 as ControlledShutdownRequest
from bridge.kafka.legacy_messages import ControlledShutdownResponseV3 as ControlledShutdownResponse
from bridge.kafka.protocol import (
    KafkaPrincipal,
    decode_principal,
    decode_request,
    decode_response,
    encode_principal,
    encode_request,
    encode_response,
    read_frame,
)
from migrate.errors import CorruptDataError, UnsupportedVersionError, Zk2KraftError

ZERO_MS = i32Timedelta.parse(datetime.timedelta(0))

# ---------------------------------------------------------------- byte layout (Kafka's protocol guide)


def test_flexible_request_uses_header_v2_with_a_legacy_client_id() -> None:
    request = ApiVersionsRequest(client_software_name="x", client_software_version="1")
    data = encode_request(request, correlation_id=1, client_id="c")
    assert data == bytes.fromhex(
        "0012 0003 00000001"  # api key 18, version 3, correlation id 1
        "0001 63"  # client id: int16 length + bytes even in header v2
        "00"  # header tagged fields
        "02 78 02 31 00"  # compact strings "x", "1", body tagged fields
    )


def test_non_flexible_request_uses_header_v1() -> None:
    request = MetadataRequestV0(topics=(MetadataRequestTopicV0(name=TopicName("t")),))
    data = encode_request(request, correlation_id=7, client_id=None)
    assert data == bytes.fromhex("0003 0000 00000007 ffff 00000001 0001 74")


def test_api_versions_response_keeps_header_v0_even_when_flexible() -> None:
    response = ApiVersionsResponse(error_code=ErrorCode.none, api_keys=(), throttle_time=ZERO_MS)
    assert encode_response(5, response) == bytes.fromhex("00000005 0000 01 00000000 00")


def test_other_flexible_responses_use_header_v1() -> None:
    response = DescribeClusterResponse(
        throttle_time=ZERO_MS, error_code=ErrorCode.none, cluster_id="c", brokers=()
    )
    data = encode_response(5, response)
    assert data.startswith(bytes.fromhex("00000005 00"))
    assert decode_response(data, 60, 1, "test") == (5, response)


# ---------------------------------------------------------------- round trips

ROUND_TRIP_REQUESTS = [
    ApiVersionsRequest,
    MetadataRequest,
    MetadataRequestV0,
    CreateTopicsRequest,
    AlterPartitionRequest,
    EnvelopeRequest,
    DescribeClusterRequest,
]
ROUND_TRIP_RESPONSES = [ApiVersionsResponse, MetadataResponse, EnvelopeResponse, DescribeClusterResponse]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    correlation_id=st.integers(-(2**31), 2**31 - 1),
    client_id=st.none() | st.text(max_size=20),
)
def test_requests_round_trip(data: st.DataObject, correlation_id: int, client_id: str | None) -> None:
    request_type = data.draw(st.sampled_from(ROUND_TRIP_REQUESTS))
    request = data.draw(st.from_type(request_type))
    decoded = decode_request(encode_request(request, correlation_id, client_id), "test")
    assert decoded.body == request
    assert (decoded.api_key, decoded.api_version) == (request.__api_key__, request.__version__)
    assert (decoded.correlation_id, decoded.client_id) == (correlation_id, client_id)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), correlation_id=st.integers(-(2**31), 2**31 - 1))
def test_responses_round_trip(data: st.DataObject, correlation_id: int) -> None:
    response_type = data.draw(st.sampled_from(ROUND_TRIP_RESPONSES))
    response = data.draw(st.from_type(response_type))
    payload = encode_response(correlation_id, response)
    key, version = response.__api_key__, response.__version__
    assert decode_response(payload, key, version, "test") == (correlation_id, response)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), correlation_id=st.integers(-(2**31), 2**31 - 1), ahead=st.booleans())
def test_a_response_encoded_ahead_is_sent_as_the_same_bytes(
    data: st.DataObject, correlation_id: int, ahead: bool
) -> None:
    response = data.draw(st.from_type(data.draw(st.sampled_from(ROUND_TRIP_RESPONSES))))
    encoded = protocol.EncodedResponse(response)
    if ahead:  # else: not encoded in time, encoded when sent
        encoded.encode()
    assert encode_response(correlation_id, encoded) == encode_response(correlation_id, response)
    assert protocol.unwrap_response(encoded) is response


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), correlation_id=st.integers(-(2**31), 2**31 - 1))
def test_a_response_header_is_what_kio_encodes(data: st.DataObject, correlation_id: int) -> None:
    response = data.draw(st.from_type(data.draw(st.sampled_from(ROUND_TRIP_RESPONSES))))
    header = response.__header_schema__(correlation_id=i32(correlation_id))
    expected = protocol.encode_entity(header) + protocol.encode_entity(response)
    assert encode_response(correlation_id, response) == expected


def test_trailing_bytes_after_a_request_body_are_ignored_as_kafka_does() -> None:
    request = DescribeClusterRequest(include_cluster_authorized_operations=True)
    decoded = decode_request(encode_request(request, 3, "c") + b"\x01\x02", "test")
    assert decoded.body == request


# ---------------------------------------------------------------- unsupported keys and versions


def test_unknown_api_key_is_unsupported() -> None:
    with pytest.raises(UnsupportedVersionError, match="api key 999"):
        decode_request(struct.pack(">hhi", 999, 0, 1) + b"\xff\xff", "test")


def test_version_outside_the_supported_range_is_unsupported() -> None:
    request = encode_request(MetadataRequest(topics=None, include_topic_authorized_operations=False), 1, "c")
    with pytest.raises(UnsupportedVersionError, match="Metadata v12"):
        decode_request(request, "test", supported={3: (0, 11)})
    with pytest.raises(UnsupportedVersionError):
        decode_request(request, "test", supported={18: (0, 4)})


def test_unsupported_api_versions_version_still_yields_its_header() -> None:
    request = ApiVersionsRequest(client_software_name="x", client_software_version="1")
    decoded = decode_request(encode_request(request, 42, "cli", api_version=9), "test")
    assert decoded.body is None
    assert (decoded.api_key, decoded.api_version, decoded.correlation_id, decoded.client_id) == (
        18,
        9,
        42,
        "cli",
    )


def test_api_versions_response_that_is_v0_is_read_as_v0() -> None:
    # What a server sends for an ApiVersions version it does not support (Kafka's client falls back too).
    v0 = ApiVersionsResponseV0(
        error_code=ErrorCode.unsupported_version,
        api_keys=(ApiVersionV0(api_key=i16(18), min_version=i16(0), max_version=i16(2)),),
    )
    correlation_id, body = decode_response(encode_response(9, v0), 18, 3, "test")
    assert (correlation_id, body) == (9, v0)
    correlation_id, body = decode_response(encode_response(9, v0), 18, 9, "test")
    assert (correlation_id, body) == (9, v0)


def test_versions_kio_lacks_are_reported_with_the_range_it_has() -> None:
    # Not AlterPartition: bridge.handlers.alter_partition_legacy registers its v0/v1 when imported.
    with pytest.raises(UnsupportedVersionError, match=r"CreateTopics v0 .*versions 2-7"):
        protocol.request_class(19, 0)


# ---------------------------------------------------------------- hostile bytes


def test_huge_array_counts_are_refused_before_kio_reserves_memory() -> None:
    # kio's native reader reserves capacity for the claimed count; 2**34 elements aborts the process.
    header = encode_request(MetadataRequest(topics=None, include_topic_authorized_operations=False), 1, "c")[
        :-4
    ]
    compact = header + bytes.fromhex("ffffffff0f")
    with pytest.raises(CorruptDataError, match="array claims") as info:
        decode_request(compact, "request from 10.0.0.1:1234")
    assert info.value.offset == len(header)
    assert "request from 10.0.0.1:1234" in str(info.value)
    legacy = encode_request(MetadataRequestV0(topics=()), 1, "c")[:-4] + struct.pack(">i", 2**31 - 1)
    with pytest.raises(CorruptDataError, match="array claims"):
        decode_request(legacy, "test")


def test_unknown_tagged_field_is_named() -> None:
    data = encode_request(DescribeClusterRequest(include_cluster_authorized_operations=False), 1, "c")
    data = data[:-1] + bytes.fromhex("01 63 01 00")  # one tagged field, tag 99, 1 byte
    with pytest.raises(CorruptDataError, match="tagged field 99"):
        decode_request(data, "test")


def test_truncated_request_names_the_offset() -> None:
    data = encode_request(CreateTopicsRequest(topics=(), timeout=ZERO_MS, validate_only=False), 1, "c")
    with pytest.raises(CorruptDataError) as info:
        decode_request(data[:-3], "test")
    assert info.value.offset is not None
    assert info.value.offset <= len(data)


_ALL_APIS = [(key, version) for key in sorted(api_key_map) for version in protocol.known_versions(key)]


@settings(max_examples=400, deadline=None)
@given(api=st.sampled_from(_ALL_APIS), rest=st.binary(max_size=200))
def test_arbitrary_bytes_after_a_known_key_and_version_raise_only_our_errors(
    api: tuple[int, int], rest: bytes
) -> None:
    with contextlib.suppress(Zk2KraftError):
        decode_request(struct.pack(">hh", *api) + rest, "test")


@settings(max_examples=300, deadline=None)
@given(payload=st.binary(max_size=100))
def test_arbitrary_request_bytes_raise_only_our_errors(payload: bytes) -> None:
    with contextlib.suppress(Zk2KraftError):
        decode_request(payload, "test")


@settings(max_examples=200, deadline=None)
@given(api=st.sampled_from(_ALL_APIS), payload=st.binary(max_size=200))
def test_arbitrary_response_bytes_raise_only_our_errors(api: tuple[int, int], payload: bytes) -> None:
    with contextlib.suppress(Zk2KraftError):
        decode_response(payload, api[0], api[1], "test")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_mutated_valid_requests_raise_only_our_errors(data: st.DataObject, seed: int) -> None:
    request = data.draw(st.from_type(data.draw(st.sampled_from(ROUND_TRIP_REQUESTS))))
    encoded = bytearray(encode_request(request, 1, "client"))
    rng = random.Random(seed)
    for _ in range(rng.randint(1, 4)):
        position = rng.randrange(len(encoded))
        encoded[position] = rng.choice([0x00, 0x7F, 0x80, 0xFF, rng.randrange(256)])
    with contextlib.suppress(Zk2KraftError):
        decode_request(bytes(encoded), "test")


# ---------------------------------------------------------------- principals


def test_principal_bytes_match_default_principal_builder() -> None:
    data = encode_principal(KafkaPrincipal("User", "alice", token_authenticated=True))
    assert data == bytes.fromhex("0000 05 55736572 06 616c696365 01 00")
    assert decode_principal(data, "test") == KafkaPrincipal("User", "alice", True)


def test_principal_of_an_unknown_version_is_unsupported() -> None:
    data = b"\x00\x01" + encode_principal(KafkaPrincipal())[2:]
    with pytest.raises(UnsupportedVersionError, match="DefaultPrincipalData version 1"):
        decode_principal(data, "test")


@settings(max_examples=200, deadline=None)
@given(payload=st.binary(max_size=40))
def test_arbitrary_principal_bytes_raise_only_our_errors(payload: bytes) -> None:
    with contextlib.suppress(Zk2KraftError):
        decode_principal(payload, "test")


# ---------------------------------------------------------------- frames


def _read(data: bytes, max_bytes: int, eof: bool = True) -> bytes | None:
    async def scenario() -> bytes | None:
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        if eof:
            reader.feed_eof()
        return await asyncio.wait_for(read_frame(reader, max_bytes, "test stream"), 30)

    return asyncio.run(scenario())


def test_frames_round_trip_and_clean_end_of_stream_is_none() -> None:
    assert _read(protocol.frame(b"abc"), 100) == b"abc"
    assert _read(b"", 100) is None


def test_oversized_frame_is_refused_from_its_size_alone() -> None:
    # No body and no end of stream: the size must suffice, or this would wait for the body.
    with pytest.raises(CorruptDataError, match="larger than the 100-byte limit"):
        _read(struct.pack(">i", 101), 100, eof=False)
    with pytest.raises(CorruptDataError, match="1073741824 bytes"):
        _read(struct.pack(">i", 1 << 30), protocol.MAX_REQUEST_BYTES, eof=False)


def test_negative_and_truncated_frames_are_corrupt() -> None:
    with pytest.raises(CorruptDataError, match="negative frame size"):
        _read(struct.pack(">i", -5), 100)
    with pytest.raises(CorruptDataError, match="size prefix"):
        _read(b"\x00\x00", 100)
    with pytest.raises(CorruptDataError, match="2 of 10 frame bytes"):
        _read(struct.pack(">i", 10) + b"ab", 100)


# ---------------------------------------------------------------- entities declared outside kio


def test_registered_entities_decode_like_kio_ones() -> None:
    # Kafka 3.9's ControlledShutdown (removed in Kafka 4.0, so kio has no class for it), generated from its schema
    assert protocol.known_versions(7) == (0, 1, 2, 3)
    request = ControlledShutdownRequest(broker_id=i32(4), broker_epoch=i64(77))
    data = encode_request(request, 5, "broker-4")
    assert data == bytes.fromhex("0007 0003 00000005 0008 62726f6b65722d34 00 00000004 000000000000004d 00")
    decoded = decode_request(data, "test")
    assert decoded.body == request
    response = ControlledShutdownResponse(
        error_code=ErrorCode.none,
        remaining_partitions=(ControlledShutdownResponse.RemainingPartition(topic_name="t", partition_index=i32(1)),),
    )
    assert decode_response(encode_response(5, response), 7, 3, "test") == (5, response)
    with pytest.raises(UnsupportedVersionError, match=r"ControlledShutdown v4 .*versions 0-3"):
        protocol.request_class(7, 4)


def test_register_api_refuses_mismatched_pairs() -> None:
    with pytest.raises(Zk2KraftError, match="api key 60"):
        protocol.register_api(ControlledShutdownRequest, DescribeClusterResponse)


class _RecordingWriter:
    """Collects what `write_frame` hands a transport, one entry per write call."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.drains = 0

    def write(self, data: bytes | memoryview) -> None:
        self.writes.append(bytes(data))

    async def drain(self) -> None:
        self.drains += 1


@pytest.mark.parametrize("size", [0, 1, protocol.WRITE_PIECE_BYTES, protocol.WRITE_PIECE_BYTES + 1, 5_300_000])
def test_write_frame_sends_one_frame_in_pieces_the_event_loop_can_copy_quickly(size: int) -> None:
    payload = random.Random(size).randbytes(size)
    writer = _RecordingWriter()
    asyncio.run(protocol.write_frame(writer, payload))  # type: ignore[arg-type]
    assert b"".join(writer.writes) == protocol.frame(payload)
    # A 30 MB UpdateMetadata written whole stalls the loop for tens of milliseconds; pieces bound each copy.
    assert max(len(w) for w in writer.writes) <= protocol.WRITE_PIECE_BYTES + 4
    assert writer.drains >= len(writer.writes) - 1


def test_a_large_frame_crosses_a_real_socket_intact() -> None:
    payload = random.Random(7).randbytes(3 * protocol.WRITE_PIECE_BYTES + 12345)

    async def exchange() -> bytes | None:
        received: asyncio.Future[bytes | None] = asyncio.get_running_loop().create_future()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            received.set_result(await protocol.read_frame(reader, 1 << 26, "test peer"))
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        _reader, writer = await asyncio.open_connection("127.0.0.1", port)
        await protocol.write_frame(writer, payload)
        got = await asyncio.wait_for(received, 30)
        writer.close()
        server.close()
        return got

    assert asyncio.run(exchange()) == payload
