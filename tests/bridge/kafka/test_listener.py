"""The Kafka-protocol listener over real TCP: kio clients, librdkafka, hostile clients, many connections."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import ipaddress
import logging
import socket
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_payload_module
from kio.schema.api_versions.v0 import ApiVersionsRequest as ApiVersionsRequestV0
from kio.schema.api_versions.v3 import ApiVersionsRequest
from kio.schema.api_versions.v4 import ApiVersionsRequest as ApiVersionsRequestV4
from kio.schema.create_topics.v7 import CreateTopicsRequest
from kio.schema.describe_cluster.v1 import DescribeClusterRequest
from kio.schema.envelope.v0 import EnvelopeRequest, EnvelopeResponse
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12 import MetadataRequest
from kio.schema.metadata.v13 import MetadataRequest as MetadataRequestV13
from kio.static.constants import EntityType
from kio.static.primitive import i32Timedelta

from bridge.kafka.client import ConnectionClosedError, KafkaConnection, send_envelope_sync, send_request_sync
from bridge.kafka.listener import ApiVersionsFeatures, KafkaListener, ListenerThread, RequestContext
from bridge.kafka.protocol import (
    KafkaPrincipal,
    decode_principal,
    decode_request,
    encode_request,
    encode_response,
    frame,
)
from migrate.errors import Zk2KraftError

HOST = "127.0.0.1"
CLUSTER_ID = "zk2kraft-test-cluster"
TIMEOUT = 30.0
CLIENT_REQUEST = ApiVersionsRequest(client_software_name="zk2kraft-tests", client_software_version="1.0")


def build(entity_type: type[Any], **values: Any) -> Any:
    """An entity of `entity_type` from the values its version has (versions differ in their fields)."""
    names = {field.name for field in dataclasses.fields(entity_type)}
    return entity_type(**{name: value for name, value in values.items() if name in names})


class FakeCluster:
    """Handlers of a one-broker cluster whose broker is the listener itself; records what they saw."""

    def __init__(self) -> None:
        self.port = 0
        self.seen: list[tuple[RequestContext, Any]] = []

    async def metadata(self, ctx: RequestContext, request: Any) -> Any:
        self.seen.append((ctx, request))
        module = load_payload_module(3, ctx.api_version, EntityType.response)
        broker = build(module.MetadataResponseBroker, node_id=1, host=HOST, port=self.port, rack=None)
        return build(
            module.MetadataResponse,
            throttle_time=datetime.timedelta(0),
            brokers=(broker,),
            cluster_id=CLUSTER_ID,
            controller_id=1,
            topics=(),
        )

    async def describe_cluster(self, ctx: RequestContext, request: Any) -> Any:
        self.seen.append((ctx, request))
        if ctx.client_id == "boom":
            raise RuntimeError("handler bug")
        if ctx.client_id == "ordering" and ctx.correlation_id == 0:
            await asyncio.sleep(0.3)  # later requests on this connection must still wait their turn
        module = load_payload_module(60, ctx.api_version, EntityType.response)
        if ctx.client_id == "wrong-version":
            module = load_payload_module(60, 0, EntityType.response)
        broker = build(module.DescribeClusterBroker, broker_id=1, host=HOST, port=self.port)
        return build(
            module.DescribeClusterResponse,
            throttle_time=datetime.timedelta(0),
            error_code=ErrorCode.none,
            cluster_id=CLUSTER_ID,
            controller_id=1,
            brokers=(broker,),
        )

    async def envelope(self, ctx: RequestContext, request: EnvelopeRequest) -> EnvelopeResponse:
        principal = decode_principal(request.request_principal or b"", "envelope principal")
        if principal.name == "denied":
            return EnvelopeResponse(response_data=None, error_code=ErrorCode.cluster_authorization_failed)
        inner = decode_request(request.request_data, "envelope request data", {60: (0, 1)})
        address = ipaddress.ip_address(request.client_host_address)
        inner_ctx = RequestContext(
            peer=(str(address), 0),
            client_id=inner.client_id,
            correlation_id=inner.correlation_id,
            api_key=inner.api_key,
            api_version=inner.api_version,
            principal=principal,
        )
        inner_response = await self.describe_cluster(inner_ctx, inner.body)
        return EnvelopeResponse(
            response_data=encode_response(inner.correlation_id, inner_response), error_code=ErrorCode.none
        )

    def listener(self, **options: Any) -> KafkaListener:
        return KafkaListener(
            HOST,
            0,
            handlers={3: self.metadata, 60: self.describe_cluster, 58: self.envelope},
            supported={3: (0, 12), 60: (0, 1), 58: (0, 0)},
            **options,
        )


@pytest.fixture(scope="module")
def cluster() -> Iterator[FakeCluster]:
    fake = FakeCluster()
    with ListenerThread(fake.listener()) as port:
        fake.port = port
        yield fake


def raw_connection(port: int) -> socket.socket:
    return socket.create_connection((HOST, port), timeout=TIMEOUT)


def wait_until_closed_by_server(sock: socket.socket) -> None:
    """Read until the server closes; a socket timeout (the server kept it open) fails the test."""
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        pass


def api_keys(response: Any) -> list[tuple[int, int, int]]:
    return [(entry.api_key, entry.min_version, entry.max_version) for entry in response.api_keys]


# ---------------------------------------------------------------- ApiVersions


def test_api_versions_advertises_exactly_the_registered_apis(cluster: FakeCluster) -> None:
    expected = [(3, 0, 12), (18, 0, 4), (58, 0, 0), (60, 0, 1)]
    for request in (CLIENT_REQUEST, ApiVersionsRequestV0(), ApiVersionsRequestV4(**vars_of(CLIENT_REQUEST))):
        response = send_request_sync(HOST, cluster.port, request, timeout=TIMEOUT)
        assert response.error_code == ErrorCode.none
        assert api_keys(response) == expected
        assert response.__version__ == request.__version__


def vars_of(entity: Any) -> dict[str, Any]:
    return {field.name: getattr(entity, field.name) for field in dataclasses.fields(entity)}


def test_unsupported_api_versions_version_gets_a_v0_unsupported_version_answer(cluster: FakeCluster) -> None:
    response = send_request_sync(HOST, cluster.port, CLIENT_REQUEST, api_version=9, timeout=TIMEOUT)
    assert response.__version__ == 0
    assert response.error_code == ErrorCode.unsupported_version
    assert api_keys(response) == [(18, 0, 4)]


def test_invalid_client_software_name_gets_invalid_request(cluster: FakeCluster) -> None:
    request = ApiVersionsRequest(client_software_name="bad name!", client_software_version="1.0")
    response = send_request_sync(HOST, cluster.port, request, timeout=TIMEOUT)
    assert response.error_code == ErrorCode.invalid_request
    assert api_keys(response) == []


def test_api_versions_carries_features_and_hides_min_zero_ones_before_v4() -> None:
    features = ApiVersionsFeatures(
        supported={"metadata.version": (1, 21), "kraft.version": (0, 1)},
        finalized={"metadata.version": (21, 21)},
        finalized_epoch=7,
        zk_migration_ready=True,
    )
    listener = KafkaListener(HOST, 0, features=lambda: features)
    with ListenerThread(listener) as port:
        v3 = send_request_sync(HOST, port, CLIENT_REQUEST, timeout=TIMEOUT)
        v4 = send_request_sync(HOST, port, ApiVersionsRequestV4(**vars_of(CLIENT_REQUEST)), timeout=TIMEOUT)
    assert api_keys(v3) == [(18, 0, 4)]
    assert [f.name for f in v3.supported_features] == ["metadata.version"]
    assert [(f.name, f.min_version, f.max_version) for f in v4.supported_features] == [
        ("kraft.version", 0, 1),
        ("metadata.version", 1, 21),
    ]
    finalized = v4.finalized_features[0]
    assert (finalized.name, finalized.min_version_level, finalized.max_version_level) == (
        "metadata.version",
        21,
        21,
    )
    assert (v4.finalized_features_epoch, v4.zk_migration_ready) == (7, True)


# ---------------------------------------------------------------- handlers


def test_registered_handler_answers_with_its_request_context(cluster: FakeCluster) -> None:
    async def scenario() -> list[Any]:
        connection = await KafkaConnection.open(HOST, cluster.port, client_id="ctx-test", timeout=TIMEOUT)
        async with connection:
            request = DescribeClusterRequest(include_cluster_authorized_operations=False)
            return [await connection.send(request, timeout=TIMEOUT) for _ in range(2)]

    responses = asyncio.run(scenario())
    assert [r.cluster_id for r in responses] == [CLUSTER_ID, CLUSTER_ID]
    assert [(b.broker_id, b.host, b.port) for b in responses[0].brokers] == [(1, HOST, cluster.port)]
    contexts = [ctx for ctx, _ in cluster.seen if ctx.client_id == "ctx-test"]
    assert [(c.api_key, c.api_version, c.correlation_id) for c in contexts] == [(60, 1, 0), (60, 1, 1)]
    assert contexts[0].peer[0] == HOST
    assert str(contexts[0].principal) == "User:ANONYMOUS"


def test_librdkafka_admin_client_reads_the_metadata_we_serve(cluster: FakeCluster) -> None:
    admin = AdminClient({"bootstrap.servers": f"{HOST}:{cluster.port}", "client.id": "rdkafka-test"})
    metadata = admin.list_topics(timeout=TIMEOUT)
    assert metadata.cluster_id == CLUSTER_ID
    assert metadata.controller_id == 1
    assert {node: (b.host, b.port) for node, b in metadata.brokers.items()} == {1: (HOST, cluster.port)}
    assert metadata.topics == {}
    assert any(ctx.client_id == "rdkafka-test" and ctx.api_key == 3 for ctx, _ in cluster.seen)


def test_responses_follow_request_order_on_a_connection(cluster: FakeCluster) -> None:
    request = DescribeClusterRequest(include_cluster_authorized_operations=False)
    pipelined = b"".join(frame(encode_request(request, cid, "ordering")) for cid in range(3))
    with raw_connection(cluster.port) as sock:
        sock.sendall(pipelined)
        stream = sock.makefile("rb")
        correlation_ids = []
        for _ in range(3):
            (size,) = struct.unpack(">i", stream.read(4))
            correlation_ids.append(struct.unpack(">i", stream.read(size)[:4])[0])
    assert correlation_ids == [0, 1, 2]


def test_failing_handler_closes_only_its_connection(cluster: FakeCluster) -> None:
    request = DescribeClusterRequest(include_cluster_authorized_operations=False)
    for client_id in ("boom", "wrong-version"):
        with pytest.raises(ConnectionClosedError, match="closed the connection"):
            send_request_sync(HOST, cluster.port, request, client_id=client_id, timeout=TIMEOUT)
    assert send_request_sync(HOST, cluster.port, request, timeout=TIMEOUT).cluster_id == CLUSTER_ID


def test_envelope_carries_principal_address_and_inner_response(cluster: FakeCluster) -> None:
    inner = encode_request(DescribeClusterRequest(include_cluster_authorized_operations=True), 77, "admin-1")
    alice = KafkaPrincipal("User", "alice")
    result = send_envelope_sync(
        HOST, cluster.port, inner, principal=alice, client_host_address="10.1.2.3", timeout=TIMEOUT
    )
    assert result.error_code == ErrorCode.none
    assert result.inner_correlation_id == 77
    assert result.inner_response is not None
    assert result.inner_response.cluster_id == CLUSTER_ID
    forwarded = [ctx for ctx, _ in cluster.seen if ctx.client_id == "admin-1"]
    assert [(c.principal, c.peer[0], c.correlation_id) for c in forwarded] == [(alice, "10.1.2.3", 77)]

    denied = send_envelope_sync(
        HOST, cluster.port, inner, principal=KafkaPrincipal("User", "denied"), client_host_address="::1"
    )
    assert (denied.error_code, denied.response_data, denied.inner_response) == (
        ErrorCode.cluster_authorization_failed,
        None,
        None,
    )


# ---------------------------------------------------------------- refused requests


def test_unsupported_versions_and_unregistered_apis_close_the_connection(cluster: FakeCluster) -> None:
    metadata_v13 = MetadataRequestV13(topics=None, include_topic_authorized_operations=False)
    create_topics = CreateTopicsRequest(
        topics=(), timeout=i32Timedelta.parse(datetime.timedelta(0)), validate_only=False
    )
    for request in (metadata_v13, create_topics):
        with pytest.raises(ConnectionClosedError, match="closed the connection"):
            send_request_sync(HOST, cluster.port, request, timeout=TIMEOUT)
    with raw_connection(cluster.port) as sock:
        sock.sendall(frame(struct.pack(">hhi", 999, 0, 1) + b"\xff\xff"))
        wait_until_closed_by_server(sock)


def test_oversized_frame_closes_the_connection_without_waiting_for_its_body(cluster: FakeCluster) -> None:
    with raw_connection(cluster.port) as sock:
        sock.sendall(struct.pack(">i", 1 << 30))  # announce 1 GiB, send nothing more
        wait_until_closed_by_server(sock)
    small = FakeCluster().listener(max_request_bytes=64)
    with ListenerThread(small) as port:
        fits = MetadataRequest(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
        )
        assert send_request_sync(HOST, port, fits, timeout=TIMEOUT).cluster_id == CLUSTER_ID
        with raw_connection(port) as sock:
            sock.sendall(struct.pack(">i", 65))
            wait_until_closed_by_server(sock)


def test_garbage_frames_close_only_that_connection(
    cluster: FakeCluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="bridge.kafka.listener")
    request = DescribeClusterRequest(include_cluster_authorized_operations=False)
    garbage_peers: list[str] = []

    async def scenario() -> None:
        good = await KafkaConnection.open(HOST, cluster.port, client_id="steady", timeout=TIMEOUT)
        async with good:
            assert (await good.send(request, timeout=TIMEOUT)).cluster_id == CLUSTER_ID
            for garbage in (b"", b"\x00\x3c", b"\x00\x3c\x00\x01\xff\xff\xff\xff\xff\xff", bytes(range(256))):
                reader, writer = await asyncio.open_connection(HOST, cluster.port)
                garbage_peers.append("{}:{}".format(*writer.get_extra_info("sockname")[:2]))
                writer.write(frame(garbage))
                assert await asyncio.wait_for(reader.read(), TIMEOUT) == b""
                writer.close()
                assert (await good.send(request, timeout=TIMEOUT)).cluster_id == CLUSTER_ID

    asyncio.run(scenario())
    messages = [record.getMessage() for record in caplog.records]
    for peer in garbage_peers:
        assert any(message.startswith(f"closing connection from {peer}: ") for message in messages), peer


_SERVED_APIS = (
    [(3, v) for v in range(13)] + [(18, v) for v in range(6)] + [(58, 0), (60, 0), (60, 1), (60, 2)]
)


@settings(max_examples=80, deadline=None)
@given(api=st.sampled_from(_SERVED_APIS), rest=st.binary(max_size=120))
def test_arbitrary_frames_never_disturb_the_listener(
    cluster: FakeCluster, api: tuple[int, int], rest: bytes
) -> None:
    with raw_connection(cluster.port) as sock:
        sock.sendall(frame(struct.pack(">hh", *api) + rest))
        sock.shutdown(socket.SHUT_WR)  # the server answers or refuses, then sees the end of the stream
        wait_until_closed_by_server(sock)
    assert send_request_sync(HOST, cluster.port, CLIENT_REQUEST, timeout=TIMEOUT).error_code == ErrorCode.none


# ---------------------------------------------------------------- scale and lifecycle


def test_three_hundred_concurrent_connections() -> None:
    async def scenario() -> None:
        async with KafkaListener(HOST, 0) as listener:
            connections = await asyncio.gather(
                *(KafkaConnection.open(HOST, listener.port, timeout=TIMEOUT) for _ in range(300))
            )
            try:
                responses = await asyncio.gather(
                    *(c.send(CLIENT_REQUEST, timeout=TIMEOUT) for c in connections)
                )
                assert listener.open_connections == 300
            finally:
                await asyncio.gather(*(c.close() for c in connections))
        assert all(r.error_code == ErrorCode.none and api_keys(r) == [(18, 0, 4)] for r in responses)

    asyncio.run(scenario())


def test_stop_closes_open_connections_and_the_port() -> None:
    async def scenario() -> None:
        listener = KafkaListener(HOST, 0)
        port = await listener.start()
        connection = await KafkaConnection.open(HOST, port, timeout=TIMEOUT)
        assert (await connection.send(CLIENT_REQUEST, timeout=TIMEOUT)).error_code == ErrorCode.none
        await listener.stop()
        assert listener.open_connections == 0
        with pytest.raises(ConnectionClosedError):
            await connection.send(CLIENT_REQUEST, timeout=TIMEOUT)
        with pytest.raises(ConnectionClosedError, match="cannot connect"):
            await KafkaConnection.open(HOST, port, timeout=TIMEOUT)

    asyncio.run(scenario())


def test_a_stopping_listener_answers_the_request_in_flight_and_reads_no_other() -> None:
    """A stop with a grace lets the request being answered finish; a connection that keeps sending (a Raft
    follower's next Fetch) gets no further request read, so the grace does not run out waiting for it."""
    release = asyncio.Event()
    answered: list[int] = []

    async def handler(ctx: RequestContext, request: Any) -> Any:
        await release.wait()
        answered.append(ctx.correlation_id)
        module = load_payload_module(60, ctx.api_version, EntityType.response)
        return build(module.DescribeClusterResponse, throttle_time=datetime.timedelta(0), error_code=ErrorCode.none,
                     cluster_id=CLUSTER_ID, controller_id=1, brokers=())  # fmt: skip

    async def scenario() -> None:
        listener = KafkaListener(HOST, 0, handlers={60: handler}, supported={60: (0, 1)})
        port = await listener.start()
        reader, writer = await asyncio.open_connection(HOST, port)
        request = DescribeClusterRequest(include_cluster_authorized_operations=False)
        writer.write(frame(encode_request(request, 1, "first")) + frame(encode_request(request, 2, "second")))
        await writer.drain()
        while listener._answering == 0:  # the first request is being answered
            await asyncio.sleep(0.01)
        stopping = asyncio.ensure_future(listener.stop(answer_within_s=TIMEOUT))
        await asyncio.sleep(0.05)
        release.set()
        await asyncio.wait_for(stopping, TIMEOUT)
        received = await asyncio.wait_for(reader.read(), TIMEOUT)  # up to the end of the stream
        writer.close()
        (size,) = struct.unpack(">i", received[:4])
        assert len(received) == 4 + size, "exactly one response before the connection closed"
        assert answered == [1]

    asyncio.run(scenario())


def test_idle_connections_are_closed() -> None:
    with ListenerThread(KafkaListener(HOST, 0, idle_timeout=0.2)) as port, raw_connection(port) as sock:
        wait_until_closed_by_server(sock)


def test_listener_refuses_ranges_it_cannot_decode() -> None:
    async def handler(ctx: RequestContext, request: Any) -> Any:
        return None

    with pytest.raises(Zk2KraftError, match=r"no schema for versions \[0, 1\]"):
        KafkaListener(handlers={19: handler}, supported={19: (0, 7)})
    with pytest.raises(Zk2KraftError, match="answered by the listener"):
        KafkaListener(handlers={18: handler})
    with pytest.raises(Zk2KraftError, match="no version range"):
        KafkaListener(handlers={60: handler}, supported={3: (0, 12)})
    assert KafkaListener(handlers={19: handler}).supported == {19: (2, 7), 18: (0, 4)}
