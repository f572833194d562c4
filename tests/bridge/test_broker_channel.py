"""The controller-to-broker channel against stand-in ZooKeeper-mode brokers over TCP, with hand-built requests."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import logging
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from bench import bench_propagation
from bridge import broker_channel
from bridge.api import DriverState
from bridge.broker_channel import BrokerChannel, Propagation, _Event
from bridge.brokers import propagation
from bridge.brokers.propagation import BrokerAddress, BrokerRequest, PropagationContext, PublishedDelta
from bridge.controller import BridgeController
from bridge.kafka import legacy_messages as lm
from bridge.kafka.client import send_request_sync
from bridge.kafka.protocol import decode_request, encode_response, frame, read_frame
from bridge.metrics import BridgeMetrics
from bridge.pipeline import PublishedBatch
from bridge.zk.image_slice import cut, touched_keys
from migrate.errors import EXIT_FENCED
from migrate.kraft import records as rec
from migrate.kraft.image import MetadataImage
from migrate.zk import paths
from migrate.zk.load import load_tree
from migrate.zk.tree import ZTree
from tests.support.bridge import NODE_ID, controller_config
from tests.support.bridge import eventually as bridge_eventually
from tests.support.broker_channel import (
    SUPPORTED,
    broker_status,
    eventually,
    leader_and_isr,
    ok_response,
    send,
    settings,
    stop_replica,
    update_metadata,
)
from tests.support.brokers import Controller, registration, running
from tests.support.requests import SET, TOPIC, create_topic, incremental

HOST = "127.0.0.1"
CTX = PropagationContext(controller_id=3000, zk_controller_epoch=7, inter_broker_listener="PLAINTEXT")

Answer = Callable[[Any], Awaitable[Any]]


@dataclass
class StandIn:
    """A ZooKeeper-mode broker's inter-broker listener: reads every frame as it arrives (so a pipelining
    client would show), answers in order through `answer` (None: close the connection unanswered)."""

    broker_id: int
    answer: Callable[[int, Any], Awaitable[Any | None]] | None = None
    received: list[tuple[int, int]] = field(default_factory=list)
    """(api key, broker epoch marker) of every request read, resends included."""
    correlation_ids: list[int] = field(default_factory=list)
    connections: int = 0
    disconnects: int = 0
    unanswered: int = 0
    max_unanswered: int = 0
    port: int = 0
    _server: asyncio.Server | None = None

    @property
    def address(self) -> BrokerAddress:
        return BrokerAddress(self.broker_id, HOST, self.port, 0)

    @property
    def markers(self) -> list[int]:
        return [marker for _key, marker in self.received]

    async def start(self) -> StandIn:
        self._server = await asyncio.start_server(self._serve, HOST, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        pending: asyncio.Queue[Any] = asyncio.Queue()

        async def answer_in_order() -> None:
            while True:
                request = await pending.get()
                response = await self._answer(request)
                self.unanswered -= 1
                if response is None:
                    writer.close()
                    return
                writer.write(frame(encode_response(request.correlation_id, response)))

        answering = asyncio.ensure_future(answer_in_order())
        try:
            while (payload := await read_frame(reader, 1 << 20, "stand-in")) is not None:
                request = decode_request(payload, "stand-in", SUPPORTED)
                self.received.append((request.api_key, int(request.body.broker_epoch)))
                self.correlation_ids.append(request.correlation_id)
                self.unanswered += 1
                self.max_unanswered = max(self.max_unanswered, self.unanswered)
                pending.put_nowait(request)
        except (ConnectionError, OSError):
            pass
        finally:
            self.disconnects += 1
            answering.cancel()
            writer.close()

    async def _answer(self, request: Any) -> Any | None:
        if self.answer is not None:
            return await self.answer(request.api_key, request.body)
        return ok_response(request.api_key)


@contextlib.asynccontextmanager
async def channel_to(*stand_ins: StandIn, **overrides: Any) -> AsyncIterator[BrokerChannel]:
    for stand_in in stand_ins:
        await stand_in.start()
    channel = BrokerChannel(settings(**overrides), metrics=BridgeMetrics(3000))
    channel.set_members({s.broker_id: s.address for s in stand_ins})
    try:
        yield channel
    finally:
        await channel.close()
        for stand_in in stand_ins:
            await stand_in.stop()


def test_requests_reach_a_broker_in_order_one_at_a_time() -> None:
    release = asyncio.Event

    async def scenario() -> None:
        gate = release()

        async def held(api_key: int, _body: Any) -> Any:
            await gate.wait()
            return ok_response(api_key)

        broker = StandIn(1, held)
        async with channel_to(broker) as channel:
            requests = [
                update_metadata(1, 1), leader_and_isr(1, 2), stop_replica(1, 3), update_metadata(1, 4),
                leader_and_isr(1, 5),
            ]  # fmt: skip
            send(channel, requests)
            await eventually(lambda: broker.received == [(6, 1)])
            # The first is unanswered: the others wait in the queue, none is on the wire.
            status = broker_status(channel, 1)
            assert status.queue_depth == 5 and status.last_sent.api == "UpdateMetadata"
            assert status.last_acknowledged is None
            gate.set()
            await eventually(lambda: broker_status(channel, 1).queue_depth == 0)
            assert broker.received == [(6, 1), (4, 2), (5, 3), (6, 4), (4, 5)]
            assert broker.max_unanswered == 1
            status = broker_status(channel, 1)
            assert status.last_acknowledged is not None and status.last_acknowledged.api == "LeaderAndIsr"
            assert status.errors == {} and status.network_failures == 0

    asyncio.run(scenario())


def test_a_network_failure_resends_the_same_request_on_a_new_connection(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> None:
        dropped: list[int] = []

        async def drop_first(api_key: int, body: Any) -> Any | None:
            if not dropped:
                dropped.append(int(body.broker_epoch))
                return None  # the connection closes without an answer
            return ok_response(api_key)

        broker = StandIn(1, drop_first)
        async with channel_to(broker) as channel:
            send(channel, [leader_and_isr(1, 1), update_metadata(1, 2)])
            await eventually(lambda: broker_status(channel, 1).queue_depth == 0)
            assert dropped == [1]
            # Same request (same bytes, same correlation id) again, on a second connection, then the next.
            assert broker.received == [(4, 1), (4, 1), (6, 2)]
            assert broker.correlation_ids[0] == broker.correlation_ids[1] != broker.correlation_ids[2]
            assert broker.connections == 2
            status = broker_status(channel, 1)
            assert status.network_failures == 1 and status.connected
            assert status.last_network_error is not None and status.errors == {}
            assert "event=broker_unreachable broker=1" in caplog.text
            assert "event=broker_reachable broker=1" in caplog.text

    with caplog.at_level(logging.INFO, logger="bridge.broker_channel"):
        asyncio.run(scenario())


def test_consecutive_network_failures_back_off_exponentially_up_to_a_second_and_a_success_resets_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kafka's NetworkClient backs off exponentially (doubling, jitter 0.2, capped); the first retry stays 100 ms.
    The waits are recorded, not timed: each is asked of the channel's sleep, which the test shortens."""
    waits: list[float] = []

    async def recorded(delay: float) -> None:
        waits.append(delay)
        await asyncio.sleep(0.001)

    monkeypatch.setattr(broker_channel, "backoff_sleep", recorded)

    async def scenario() -> None:
        answered: list[int] = []

        async def drop_some(api_key: int, body: Any) -> Any | None:
            answered.append(int(body.broker_epoch))
            if len(answered) <= 7 or len(answered) == 9:
                return None  # the connection closes without an answer
            return ok_response(api_key)

        broker = StandIn(1, drop_some)
        async with channel_to(broker) as channel:
            send(channel, [update_metadata(1, 1)])
            await eventually(lambda: broker_status(channel, 1).queue_depth == 0)
            assert broker_status(channel, 1).failure_kind == "network"
            assert len(waits) == 7 and answered == [1] * 8
            send(channel, [update_metadata(1, 2)])  # its first failure after a success
            await eventually(lambda: broker_status(channel, 1).queue_depth == 0)
        assert answered == [1] * 8 + [2, 2]

    asyncio.run(scenario())
    first, *rest = waits
    assert first == 0.1
    for failures, wait in enumerate(rest[:6], start=2):
        doubled = 0.1 * 2 ** (failures - 1)
        assert min(doubled * 0.8, 1.0) <= wait <= min(doubled * 1.2, 1.0)
    assert waits[5:7] == [1.0, 1.0]  # 1.6 s and 3.2 s with jitter: capped
    assert waits[7] == 0.1


def test_a_request_not_answered_within_the_request_timeout_is_resent() -> None:
    async def scenario() -> None:
        calls: list[int] = []

        async def silent_once(api_key: int, _body: Any) -> Any:
            calls.append(api_key)
            if len(calls) == 1:
                await asyncio.Event().wait()  # never answers
            return ok_response(api_key)

        broker = StandIn(1, silent_once)
        async with channel_to(broker, request_timeout_s=0.3) as channel:
            send(channel, [update_metadata(1, 1)])
            await eventually(lambda: broker_status(channel, 1).last_acknowledged is not None)
            assert broker.received == [(6, 1), (6, 1)] and broker.connections == 2
            assert broker_status(channel, 1).network_failures == 1

    asyncio.run(scenario())


def test_an_error_answer_is_counted_and_logged_and_never_resent(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        async def answers(api_key: int, body: Any) -> Any:
            if int(body.broker_epoch) == 1:
                return ok_response(api_key, ErrorCode.stale_broker_epoch)
            if int(body.broker_epoch) == 2:  # one partition's log dir failed
                partition = lm.LeaderAndIsrResponseV7LeaderAndIsrPartitionError(
                    partition_index=i32(0), error_code=ErrorCode.kafka_storage_error
                )
                topic = lm.LeaderAndIsrResponseV7LeaderAndIsrTopicError(partition_errors=(partition,))
                return lm.LeaderAndIsrResponseV7(error_code=ErrorCode.none, topics=(topic,))
            return ok_response(api_key)

        broker = StandIn(1, answers)
        async with channel_to(broker) as channel:
            send(channel, [update_metadata(1, 1), leader_and_isr(1, 2), stop_replica(1, 3)])
            await eventually(lambda: broker_status(channel, 1).queue_depth == 0)
            assert broker.received == [(6, 1), (4, 2), (5, 3)]  # nothing resent
            status = broker_status(channel, 1)
            assert status.errors == {"STALE_BROKER_EPOCH": 1, "KAFKA_STORAGE_ERROR": 1}
            assert status.network_failures == 0
            exposition = channel.metrics.exposition().decode() if channel.metrics else ""
            assert (
                'zk2kraft_broker_channel_errors_total{api="UpdateMetadata",broker="1",error="STALE_BROKER_EPOCH",'
                'error_code="77"} 1.0'
            ) in exposition
            errors = [
                r.getMessage() for r in caplog.records if "event=broker_request_error" in r.getMessage()
            ]
            assert len(errors) == 2
            assert (
                "broker=1" in errors[0]
                and "UpdateMetadata v8" in errors[0]
                and "STALE_BROKER_EPOCH" in errors[0]
            )
            assert "LeaderAndIsr v7" in errors[1] and "KAFKA_STORAGE_ERROR x1" in errors[1]

    with caplog.at_level(logging.INFO, logger="bridge.broker_channel"):
        asyncio.run(scenario())


def test_a_broker_that_leaves_has_its_task_stopped_and_its_queue_cleared() -> None:
    async def scenario() -> None:
        gate = asyncio.Event()

        async def held(api_key: int, _body: Any) -> Any:
            await gate.wait()
            return ok_response(api_key)

        broker = StandIn(1, held)
        async with channel_to(broker) as channel:
            send(channel, [update_metadata(1, 1), leader_and_isr(1, 2), stop_replica(1, 3)])
            await eventually(lambda: broker.received == [(6, 1)])
            channel.set_members({})
            assert channel.snapshot().brokers == []
            send(channel, [update_metadata(1, 4)])  # offline: dropped
            await eventually(lambda: broker.disconnects == 1)  # its connection was closed
            # Back in the channel: a new queue, without the cleared requests.
            channel.set_members({1: broker.address})
            gate.set()
            send(channel, [update_metadata(1, 5)])
            await eventually(lambda: (6, 5) in broker.received)
            assert broker.received == [(6, 1), (6, 5)]
            assert broker.connections == 2

    asyncio.run(scenario())


def test_a_broker_whose_address_changed_is_replaced() -> None:
    async def scenario() -> None:
        old, new = StandIn(1), StandIn(1)
        await new.start()
        try:
            async with channel_to(old) as channel:
                send(channel, [update_metadata(1, 1)])
                await eventually(lambda: broker_status(channel, 1).last_acknowledged is not None)
                channel.set_members({1: new.address})
                send(channel, [update_metadata(1, 2)])
                await eventually(lambda: new.received == [(6, 2)])
                assert old.received == [(6, 1)]
                assert broker_status(channel, 1).address == f"{HOST}:{new.port}"
        finally:
            await new.stop()

    asyncio.run(scenario())


def test_a_new_full_sync_replaces_the_unsent_requests_of_an_older_one() -> None:
    async def scenario() -> None:
        gate = asyncio.Event()

        async def held(api_key: int, _body: Any) -> Any:
            await gate.wait()
            return ok_response(api_key)

        broker = StandIn(1, held)
        async with channel_to(broker) as channel:
            send(channel, [update_metadata(1, 1)])  # in flight
            await eventually(lambda: broker.received == [(6, 1)])
            send(channel, [update_metadata(1, 10, full=True), leader_and_isr(1, 11, full=True)])
            send(channel, [stop_replica(1, 2)])
            send(channel, [update_metadata(1, 20, full=True), leader_and_isr(1, 21, full=True)])
            assert broker_status(channel, 1).queue_depth == 4  # in flight, the StopReplica, the newer sync
            gate.set()
            await eventually(lambda: broker_status(channel, 1).queue_depth == 0)
            assert broker.received == [(6, 1), (5, 2), (6, 20), (4, 21)]
            assert broker_status(channel, 1).full_syncs_sent == 1

    asyncio.run(scenario())


def test_an_unresponsive_broker_does_not_delay_another() -> None:
    async def scenario() -> None:
        async def never(_api_key: int, _body: Any) -> Any:
            await asyncio.Event().wait()

        dead, alive = StandIn(1, never), StandIn(2)
        async with channel_to(dead, alive) as channel:
            for marker in range(3):
                send(channel, [update_metadata(1, marker), update_metadata(2, marker)])
            await eventually(lambda: broker_status(channel, 2).queue_depth == 0)
            assert alive.received == [(6, 0), (6, 1), (6, 2)]
            assert dead.received == [(6, 0)]
            status = broker_status(channel, 1)
            assert status.queue_depth == 3 and status.last_acknowledged is None

    asyncio.run(scenario())


def test_stopping_the_channel_does_not_wait_for_a_broker_that_stopped_reading() -> None:
    async def scenario() -> None:
        peers: list[asyncio.StreamWriter] = []

        async def never_read(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            peers.append(writer)  # kept open, never read: the request stays in the bridge's send buffer

        server = await asyncio.start_server(never_read, HOST, 0)
        address = BrokerAddress(1, HOST, server.sockets[0].getsockname()[1], 0)
        channel = BrokerChannel(settings(), metrics=BridgeMetrics(3000))
        channel.set_members({1: address})
        state = lm.UpdateMetadataRequestV8.UpdateMetadataPartitionState
        topic = lm.UpdateMetadataRequestV8.UpdateMetadataTopicState(
            topic_name="big", topic_id=None,
            partition_states=tuple(state(partition_index=i32(p), replicas=(1, 2, 3)) for p in range(200_000)),
        )  # fmt: skip
        body = dataclasses.replace(update_metadata(1, 1).body, topic_states=(topic,))
        send(channel, [BrokerRequest(1, body)])
        await eventually(lambda: broker_status(channel, 1).last_sent is not None)
        # A graceful close would wait for the peer to take the unsent bytes, i.e. forever.
        await asyncio.wait_for(channel.close(), 20)
        assert channel.snapshot().brokers == []
        server.close()
        for peer in peers:
            peer.close()

    asyncio.run(scenario())


# ---------------------------------------------------------------------------------- the serial pipeline


@dataclass
class FakePropagation:
    """Builders standing in for bridge.brokers.propagation: each view carries the members the test set when
    it was taken; requests are UpdateMetadata/LeaderAndIsr with markers."""

    members: dict[int, BrokerAddress]
    threads: list[str] = field(default_factory=list)
    contexts: list[PropagationContext] = field(default_factory=list)
    _views: dict[int, dict[int, BrokerAddress]] = field(default_factory=dict)

    def builders(self) -> Propagation:
        return Propagation(
            migrating_brokers=lambda view, _listener: self._views[id(view)],
            delta_of=self.delta_of,
            full_sync=self.full_sync,
            incremental=self.incremental,
            sync_view=self.sync_view,
        )

    def delta_of(
        self, records: Iterable[tuple[Any, int]], _before: MetadataImage, _after: MetadataImage
    ) -> PublishedDelta:
        # A record (marker, 1) changes brokers; (marker, 0) changes nothing the brokers care about.
        return PublishedDelta(changed_brokers={marker for marker, touches in records if touches})

    def sync_view(self, _image: MetadataImage) -> MetadataImage:
        self.threads.append(f"view:{threading.current_thread().name}")
        view = MetadataImage()
        self._views[id(view)] = dict(self.members)
        return view

    def full_sync(self, view: MetadataImage, ctx: PropagationContext) -> list[BrokerRequest]:
        self.threads.append(f"build:{threading.current_thread().name}")
        self.contexts.append(ctx)
        members = sorted(self._views[id(view)])
        return [
            r
            for b in members
            for r in (update_metadata(b, 100, full=True), leader_and_isr(b, 101, full=True))
        ]

    def incremental(
        self, delta: PublishedDelta, view: MetadataImage, _ctx: PropagationContext
    ) -> list[BrokerRequest]:
        self.threads.append(f"build:{threading.current_thread().name}")
        members = sorted(self._views[id(view)])
        return [update_metadata(b, marker) for b in members for marker in sorted(delta.changed_brokers)]


def test_nothing_is_sent_before_the_full_sync_then_events_go_out_in_publish_order() -> None:
    async def scenario() -> None:
        broker = StandIn(1)
        await broker.start()
        fake = FakePropagation({1: broker.address})
        channel = BrokerChannel(settings(), builders=fake.builders())
        image = MetadataImage()
        try:
            channel.publish([(1, 1)], image, image, image)  # before KRAFT_CONTROLLER_TO_BROKER_COMM
            assert not channel.active and channel.members == {}
            channel.full_sync(image, CTX)
            channel.publish([(5, 0)], image, image, image)  # touches nothing brokers hear of
            for marker in (2, 3, 4):
                channel.publish([(marker, 1)], image, image, image)
            await eventually(lambda: len(broker.received) == 5)
            await eventually(lambda: broker_status(channel, 1).queue_depth == 0)
            assert broker.received == [(6, 100), (4, 101), (6, 2), (6, 3), (6, 4)]
            status = channel.snapshot()
            assert status.active and status.full_syncs == 1 and status.brokers[0].full_syncs_sent == 1
            assert fake.contexts == [CTX]
            # The view is taken on the event loop, the requests built on the worker thread.
            loop_thread = threading.current_thread().name
            views = [t for t in fake.threads if t.startswith("view:")]
            builds = [t for t in fake.threads if t.startswith("build:")]
            assert views and all(t == f"view:{loop_thread}" for t in views)
            assert builds and all(t.startswith("build:propagator") for t in builds)
            await channel.stop()
            channel.publish([(9, 1)], image, image, image)
            assert not channel.snapshot().active and channel.snapshot().brokers == []
        finally:
            await channel.close()
            await broker.stop()
        assert (6, 9) not in broker.received

    asyncio.run(scenario())


def test_membership_follows_each_event_and_a_fenced_channel_sends_nothing() -> None:
    async def scenario() -> None:
        first, second = StandIn(1), StandIn(2)
        await first.start()
        await second.start()
        fake = FakePropagation({1: first.address})
        allowed = [True]
        channel = BrokerChannel(settings(), builders=fake.builders(), may_send=lambda: allowed[0])
        image = MetadataImage()
        try:
            channel.full_sync(image, CTX)
            await eventually(lambda: first.received == [(6, 100), (4, 101)])
            fake.members = {2: second.address}  # broker 1 leaves, broker 2 joins with this event
            channel.publish([(7, 1)], image, image, image)
            await eventually(lambda: second.received == [(6, 7)])
            assert channel.members == {2: second.address}
            await eventually(lambda: first.disconnects == 1)
            allowed[0] = False
            channel.publish([(8, 1)], image, image, image)
            await eventually(lambda: broker_status(channel, 2).queue_depth == 1)
            await asyncio.sleep(0.3)  # a few retry rounds: still nothing sent while not allowed
            assert second.received == [(6, 7)]
            assert broker_status(channel, 2).network_failures == 0  # waiting to be stopped is no failure
        finally:
            await channel.close()
            await first.stop()
            await second.stop()

    asyncio.run(scenario())


def no_requests() -> Propagation:
    """The real membership (who is a member, who cannot be reached) with no requests to send."""
    return Propagation(full_sync=lambda _view, _ctx: [], incremental=lambda _delta, _view, _ctx: [])


def test_listener_names_compare_upper_cased_and_brokers_without_the_listener_are_listed_counted_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Kafka's ListenerName.normalised upper-cases a name: `plaintext` is the brokers' PLAINTEXT. A migrating
    unfenced broker with no endpoint on the listener gets nothing: /status lists it, /metrics counts it."""
    controller = Controller()
    running(controller, 1, 2, 3)  # registered on PLAINTEXT

    async def scenario(listener: str) -> tuple[Any, dict[int, BrokerAddress], str]:
        metrics = BridgeMetrics(3000)
        channel = BrokerChannel(settings(), metrics=metrics, builders=no_requests())
        try:
            channel.full_sync(controller.image, dataclasses.replace(CTX, inter_broker_listener=listener))
            await eventually(lambda: bool(channel.members or channel.snapshot().unreachable))
            return channel.snapshot(), channel.members, metrics.exposition().decode()
        finally:
            await channel.close()

    with caplog.at_level(logging.INFO, logger="bridge.broker_channel"):
        status, members, _ = asyncio.run(scenario("plaintext"))
        assert sorted(members) == [1, 2, 3] and status.unreachable == []
        assert "event=broker_channel_unreachable" not in caplog.text
        status, members, exposed = asyncio.run(scenario("NOPE"))
    assert members == {} and status.brokers == []
    assert [b.broker_id for b in status.unreachable] == [1, 2, 3]
    assert status.unreachable[0].reason == (
        "no endpoint on the inter-broker listener NOPE (--inter-broker-listener-name); it registered PLAINTEXT"
    )
    assert status.unreachable[0].listeners == ["PLAINTEXT"]
    assert "zk2kraft_broker_channel_unreachable_brokers 3.0" in exposed
    assert "event=broker_channel_unreachable broker=2 " in caplog.text


def test_a_broker_that_registers_the_listener_later_leaves_the_unreachable_list() -> None:
    controller = Controller()
    running(controller, 2)
    # Registration refuses a broker without the listener; a log written under another listener name holds one.
    endpoint = rec.RegisterBrokerRecord.BrokerEndpoint(name="EXTERNAL", host="h1", port=1, security_protocol=0)
    controller.append(
        [(
            rec.RegisterBrokerRecord(
                broker_id=1, is_migrating_zk_broker=True, incarnation_id=uuid.UUID(int=1), broker_epoch=99,
                end_points=[endpoint], fenced=False,
            ),
            controller.mv.register_broker_record_version(),
        )]
    )  # fmt: skip

    async def scenario() -> tuple[list[int], list[int]]:
        channel = BrokerChannel(settings(), builders=no_requests())
        try:
            channel.full_sync(controller.image, CTX)
            await eventually(lambda: bool(channel.members))
            before = [b.broker_id for b in channel.snapshot().unreachable]
            start, view = controller.next_offset, propagation.sync_view(controller.image)
            running(controller, 1)  # restarted with its PLAINTEXT listener
            records = [(r, v) for r, v, _ in controller.log[start:]]
            keys = touched_keys(records, view)
            channel.publish(records, cut(view, keys), cut(controller.image, keys), controller.image)
            await eventually(lambda: 1 in channel.members)
            return before, [b.broker_id for b in channel.snapshot().unreachable]
        finally:
            await channel.close()

    assert asyncio.run(scenario()) == ([1], [])


def test_a_full_sync_says_how_many_brokers_it_went_to_even_none(caplog: pytest.LogCaptureFixture) -> None:
    controller = Controller()
    for broker_id in (1, 2):
        assert controller.register(registration(broker_id)).error is None  # registered, still fenced

    async def full_sync() -> Any:
        channel = BrokerChannel(settings(), builders=no_requests())
        try:
            channel.full_sync(controller.image, CTX)
            await eventually(lambda: channel.snapshot().last_full_sync_brokers is not None)
            return channel.snapshot()
        finally:
            await channel.close()

    with caplog.at_level(logging.INFO, logger="bridge.broker_channel"):
        status = asyncio.run(full_sync())
        assert status.full_syncs == 1 and status.last_full_sync_brokers == 0
        assert "event=broker_full_sync controller_id=3000 zk_controller_epoch=7 listener=PLAINTEXT brokers=0 " in (
            caplog.text
        )
        assert "reached no broker" in caplog.text
        running(controller, 1, 2)
        assert asyncio.run(full_sync()).last_full_sync_brokers == 2
    assert "listener=PLAINTEXT brokers=2 (1,2)" in caplog.text


# ---------------------------------------------------------------------------------- wired into the bridge


class StandInThread:
    """A StandIn served from its own event loop thread, for a bridge running on another thread."""

    def __init__(self, stand_in: StandIn) -> None:
        self.stand_in = stand_in
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="stand-in", daemon=True)

    def __enter__(self) -> StandIn:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.stand_in.start(), self.loop).result(10)
        return self.stand_in

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.stand_in.stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@dataclass
class TopicsPropagation(FakePropagation):
    """Like FakePropagation, over real records: a batch with a TopicRecord changes brokers' metadata (its
    incremental UpdateMetadata carries the batch's number), anything else does not."""

    slices: list[tuple[list[Any], MetadataImage, MetadataImage]] = field(default_factory=list)

    def delta_of(
        self, records: Iterable[tuple[Any, int]], before: MetadataImage, after: MetadataImage
    ) -> PublishedDelta:
        batch = [record for record, _version in records]
        self.slices.append((batch, before, after))
        topics = [r.topic_id for r in batch if isinstance(r, rec.TopicRecord)]
        return PublishedDelta(changed_brokers={200 + len(self.slices)} if topics else set())


@pytest.mark.zookeeper
def test_the_bridge_full_syncs_on_reaching_dual_write_then_sends_each_topic_change_in_log_order(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path
) -> None:
    load_tree(zk_client, real_tree)
    with StandInThread(StandIn(1)) as broker:
        fake = TopicsPropagation({1: broker.address})
        config = controller_config(zk_connect, tmp_path / "meta")
        bridge = BridgeController(config, propagation=fake.builders())
        published: list[PublishedBatch] = []
        hook = bridge.pipeline.on_published
        assert hook is not None

        def recording(batch: PublishedBatch) -> None:
            published.append(batch)
            hook(batch)

        bridge.pipeline.on_published = recording
        bridge.start()
        try:
            assert bridge.wait_for_state(DriverState.DUAL_WRITE), bridge.error
            bridge_eventually(lambda: broker.received == [(6, 100), (4, 101)])
            claimed = int(zk_client.get(paths.CONTROLLER_EPOCH)[0])
            assert fake.contexts == [PropagationContext(NODE_ID, claimed, "PLAINTEXT")]
            port = bridge.listen_port
            for name in ("orders", "payments"):
                response = send_request_sync("127.0.0.1", port, create_topic(name))
                assert response.topics[0].error_code == ErrorCode.none
            response = send_request_sync(
                "127.0.0.1", port, incremental(TOPIC, "orders", ("retention.ms", SET, "1"))
            )
            assert response.responses[0].error_code == ErrorCode.none
            bridge_eventually(lambda: len(broker.received) == 4)
            # One UpdateMetadata per topic creation, in log order; the config change sends nothing.
            assert broker.received == [(6, 100), (4, 101), (6, 201), (6, 202)]
            assert [b.last_offset for b in published] == sorted(b.last_offset for b in published)
            created = [
                (batch, before, after)
                for batch, before, after in fake.slices
                if any(isinstance(r, rec.TopicRecord) for r in batch)
            ]
            assert [
                next(r.name for r in batch if isinstance(r, rec.TopicRecord)) for batch, _, _ in created
            ] == [
                "orders",
                "payments",
            ]
            for batch, before, after in created:
                name = next(r.name for r in batch if isinstance(r, rec.TopicRecord))
                assert name not in before.topics_by_name and name in after.topics_by_name
            status = bridge.status().broker_channel
            assert status.active and status.full_syncs == 1
            (shown,) = status.brokers
            assert shown.broker_id == 1 and shown.full_syncs_sent == 1 and shown.queue_depth == 0
            assert shown.last_acknowledged is not None and shown.last_acknowledged.api == "UpdateMetadata"
            metrics = bridge.metrics.exposition().decode()
            assert (
                'zk2kraft_broker_channel_requests_acknowledged_total{api="UpdateMetadata",broker="1"} 3.0'
                in metrics
            )
            assert 'zk2kraft_broker_channel_full_syncs_total{broker="1"} 1.0' in metrics

            # The fence is lost (another controller bumped /controller_epoch): the bridge stops sending and exits
            # fenced, with nothing more sent. (A new leadership's one full sync: tests/bridge/test_quorum_brokers.py.)
            sent = list(broker.received)
            zk_client.set(paths.CONTROLLER_EPOCH, b"999")
            bridge_eventually(lambda: bridge.exit_code is not None, timeout=30)
            assert bridge.exit_code == EXIT_FENCED, bridge.error
        finally:
            bridge.stop()
        assert broker.received == sent and fake.contexts == [PropagationContext(NODE_ID, claimed, "PLAINTEXT")]
        assert not bridge.channel.active and bridge.channel.snapshot().brokers == []


def test_a_change_whose_requests_cannot_be_built_is_counted_and_the_next_one_goes_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> None:
        broker = StandIn(1)
        await broker.start()
        fake = FakePropagation({1: broker.address})
        builders = fake.builders()

        def incremental(
            delta: PublishedDelta, view: MetadataImage, ctx: PropagationContext
        ) -> list[BrokerRequest]:
            if 3 in delta.changed_brokers:
                raise ValueError("a defect in the request builder")
            return fake.incremental(delta, view, ctx)

        channel = BrokerChannel(settings(), builders=dataclasses.replace(builders, incremental=incremental))
        image = MetadataImage()
        try:
            channel.full_sync(image, CTX)
            # One at a time: changes waiting together would be built as one.
            channel.publish([(2, 1)], image, image, image)
            await eventually(lambda: (6, 2) in broker.received)
            channel.publish([(3, 1)], image, image, image)
            await eventually(lambda: channel.snapshot().build_failures == 1)
            channel.publish([(4, 1)], image, image, image)
            await eventually(lambda: (6, 4) in broker.received)
            assert broker.received == [(6, 100), (4, 101), (6, 2), (6, 4)]
            assert channel.snapshot().build_failures == 1
            assert "event=broker_requests_failed building the incremental requests failed" in caplog.text
        finally:
            await channel.close()
            await broker.stop()

    with caplog.at_level(logging.INFO, logger="bridge.broker_channel"):
        asyncio.run(scenario())


def test_a_full_sync_is_built_without_a_collector_pass_and_leaves_no_young_objects() -> None:
    """A cyclic-collector pass over a large image holds the GIL for hundreds of milliseconds (about 0.4 s at
    200,000 partitions) and so stalls heartbeats on the event loop: the worker builds and encodes with the
    collector paused, then hands what it made to the oldest generation, so no young pass walks it later."""
    image, listener = bench_propagation.cluster_image(20, 10, 3)
    channel = BrokerChannel(settings())
    event = _Event(propagation.sync_view(image), PropagationContext(3000, 7, listener))
    passes: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            passes.append(info["generation"])

    thresholds = gc.get_threshold()
    gc.set_threshold(100, 1, 1)  # a pass every 100 allocations, a full one every few
    gc.callbacks.append(seen)
    try:
        members, _unreachable, outgoing = channel._build(event)
        young = gc.get_count()[0]
    finally:
        gc.callbacks.remove(seen)
        gc.set_threshold(*thresholds)
        channel._executor.shutdown()
    assert sorted(members) == sorted(outgoing) == [1, 2, 3]
    assert passes == []
    assert young < 100


def test_a_burst_of_registration_changes_is_built_once_but_a_change_of_partitions_is_not_merged() -> None:
    """Broker-only changes waiting together are built as one against the latest view (each would send every
    member the broker list again); a change of partitions between them keeps its place and its own requests."""

    async def scenario() -> None:
        broker = StandIn(1)
        await broker.start()
        fake = FakePropagation({1: broker.address})
        partitions_of = {99: {uuid.UUID(int=1): {0}}}
        builders = fake.builders()
        builders = dataclasses.replace(
            builders,
            delta_of=lambda records, before, after: dataclasses.replace(
                fake.delta_of(records, before, after),
                changed_partitions=partitions_of.get(next(iter(records))[0], {}),
            ),
        )
        channel = BrokerChannel(settings(), builders=builders)
        image = MetadataImage()
        try:
            channel.full_sync(image, CTX)
            await eventually(lambda: len(broker.received) == 2)
            builds = len([t for t in fake.threads if t.startswith("build:")])
            for marker in (2, 3, 4, 99, 5, 6):  # published in one step: all wait together
                channel.publish([(marker, 1)], image, image, image)
            await eventually(lambda: len(broker.received) == 8)
            await eventually(lambda: broker_status(channel, 1).queue_depth == 0)
            # 2-4 as one, 99 alone, 5-6 as one: in publish order, every change sent.
            assert [t for t in fake.threads if t.startswith("build:")][builds:] == [fake.threads[-1]] * 3
            assert broker.received[2:] == [(6, 2), (6, 3), (6, 4), (6, 99), (6, 5), (6, 6)]
        finally:
            await channel.close()
            await broker.stop()

    asyncio.run(scenario())
