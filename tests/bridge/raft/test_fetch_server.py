"""bridge.raft.fetch_server and bridge.shim.follower: a controller's log served over real TCP with Fetch/FetchSnapshot
as Kafka 3.9's KafkaRaftClient serves it, and followed into an image equal to the controller's."""

from __future__ import annotations

import asyncio
import copy
import functools
import shutil
import uuid
from collections.abc import Callable, Coroutine, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as fetch_v12
from kio.schema.fetch.v17 import request as fetch_v17
from kio.schema.fetch_snapshot.v1 import request as snapshot_v1
from kio.static.primitive import i8, i32, i32Timedelta, i64

from bridge.api import ControllerHandler, HandlerContext
from bridge.handlers import reads
from bridge.kafka.client import send_request
from bridge.kafka.listener import KafkaListener, RequestContext
from bridge.raft import fetch_server
from bridge.raft.metadata_log import MetadataLog
from bridge.shim.follower import MetadataFollower
from migrate.kraft import records as rec
from migrate.kraft.batch import iter_kraft_batches
from migrate.kraft.image import MetadataImage
from migrate.kraft.logdir import METADATA_TOPIC_ID, list_segments
from migrate.kraft.snapshot import write_snapshot
from tests.support import FIXTURES

KRAFT_FIXTURE = FIXTURES / "kraft-real-3.7"
PDIR = "__cluster_metadata-0"
CLUSTER = "q1w2e3r4t5y6u7i8o9p0"


def sync(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run an async test on a fresh event loop (no pytest-asyncio here)."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))

    return run


@pytest.fixture
def real_log(tmp_path: Path) -> Iterator[MetadataLog]:
    """The real Kafka 3.7 controller log, opened (and led in a new epoch) by the bridge's MetadataLog."""
    root = tmp_path / "meta"
    shutil.copytree(KRAFT_FIXTURE, root)
    metadata_log = MetadataLog.open(root, node_id=1, fsync=False)
    try:
        yield metadata_log
    finally:
        metadata_log.close()


def adapt(handlers: dict[int, ControllerHandler], node_id: int) -> dict[int, Any]:
    """Controller handlers as listener handlers (what BridgeController._answer does, minus the pipeline)."""

    async def call(ctx: RequestContext, body: Any) -> Any:
        context = HandlerContext(
            image=MetadataImage(), api_version=ctx.api_version, node_id=node_id, now_ms=0
        )
        return handlers[ctx.api_key](context, body).response

    return {key: call for key in handlers}


class Served:
    """A MetadataLog served on a real listener, with requests sent over TCP."""

    def __init__(self, metadata_log: MetadataLog, listener: KafkaListener) -> None:
        self.log = metadata_log
        self.listener = listener

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.listener.port)

    async def send(self, request: Any) -> Any:
        return await send_request("127.0.0.1", self.listener.port, request)

    async def fetch(self, offset: int, last_epoch: int, leader_epoch: int | None = None, **kw: Any) -> Any:
        epoch = self.log.leader_epoch if leader_epoch is None else leader_epoch
        response = await self.send(fetch17(offset, last_epoch, epoch, **kw))
        return response


async def serving(metadata_log: MetadataLog) -> Served:
    handlers = fetch_server.fetch_handlers(lambda: metadata_log)

    async def describe_cluster(ctx: RequestContext, body: Any) -> Any:
        # Followers learn the cluster id from the controller endpoint first, as from the bridge.
        node = metadata_log.node_id
        return reads.describe_cluster_as(
            reads.ENDPOINT_CONTROLLERS, metadata_log.cluster_id or "", node, [node], "127.0.0.1",
            listener.port, None, body, ctx.api_version,
        )  # fmt: skip

    listener = KafkaListener(
        handlers={**adapt(handlers, metadata_log.node_id), reads.DESCRIBE_CLUSTER: describe_cluster},
        supported={**fetch_server.SUPPORTED, reads.DESCRIBE_CLUSTER: (0, 1)},
    )
    await listener.start()
    return Served(metadata_log, listener)


def fetch17(
    offset: int,
    last_epoch: int,
    leader_epoch: int,
    *,
    topic_id: uuid.UUID = METADATA_TOPIC_ID,
    cluster_id: str | None = None,
    partition: int = 0,
) -> Any:
    m = fetch_v17
    return m.FetchRequest(
        cluster_id=cluster_id,
        max_wait=i32Timedelta.parse(timedelta(milliseconds=500)),
        min_bytes=i32(1),
        topics=(
            m.FetchTopic(
                topic_id=topic_id,
                partitions=(
                    m.FetchPartition(
                        partition=i32(partition),
                        current_leader_epoch=i32(leader_epoch),
                        fetch_offset=i64(offset),
                        last_fetched_epoch=i32(last_epoch),
                        partition_max_bytes=i32(1 << 20),
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
    )


def partition_of(response: Any) -> Any:
    assert response.error_code == ErrorCode.none
    (topic,) = response.responses
    assert topic.topic_id == METADATA_TOPIC_ID
    (data,) = topic.partitions
    return data


def comparable(image: MetadataImage) -> MetadataImage:
    copied = copy.copy(image)
    copied.provenance = None  # type: ignore[assignment]
    return copied


def segment_bytes(metadata_log: MetadataLog) -> bytes:
    (segment,) = list_segments(metadata_log.partition_dir)
    return Path(segment.path).read_bytes()


# ---------------------------------------------------------------------------------------------- Fetch


@sync
async def test_fetch_serves_whole_durable_batches_from_the_segment(real_log: MetadataLog) -> None:
    served = await serving(real_log)
    try:
        data = partition_of(await served.fetch(0, 0))
        on_disk = segment_bytes(real_log)
        records = bytes(data.records)
        # Byte-identical to the start of the segment, whole batches only, within Kafka's 8 MiB read.
        assert on_disk.startswith(records) and records
        positions = [pos for pos, _h, _e in iter_kraft_batches(on_disk, "segment")]
        assert len(records) in positions or len(records) == len(on_disk)
        assert data.high_watermark == real_log.durable_offset + 1
        assert data.log_start_offset == 0
        assert (data.current_leader.leader_id, data.current_leader.leader_epoch) == (1, real_log.leader_epoch)
        assert data.diverging_epoch.epoch == -1 and data.snapshot_id.epoch == -1

        # From the middle of a batch: that whole batch comes back (Kafka reads from the batch holding it).
        headers = [(pos, h) for pos, h, _e in iter_kraft_batches(on_disk, "segment")]
        pos, header = next((p, h) for p, h in headers if h.last_offset_delta > 0)
        middle = header.base_offset + 1
        data = partition_of(await served.fetch(middle, header.partition_leader_epoch))
        assert bytes(data.records).startswith(on_disk[pos : pos + header.size_in_bytes])

        # At the end: nothing, and the high watermark says so.
        end = real_log.durable_offset + 1
        data = partition_of(await served.fetch(end, real_log.leader_epoch))
        assert bytes(data.records or b"") == b"" and data.high_watermark == end

        # A new append becomes visible once durable.
        real_log.append([(rec.ConfigRecord(resource_type=4, resource_name="", name="x", value="y"), 0)])
        real_log.append([(rec.NoOpRecord(), 0)]).durable.result()
        data = partition_of(await served.fetch(end, real_log.leader_epoch))
        fetched = list(iter_kraft_batches(bytes(data.records), "fetched"))
        assert [h.base_offset for _p, h, _e in fetched] == [end, end + 1]
        assert data.high_watermark == end + 2
    finally:
        await served.listener.stop()


@sync
async def test_fetch_errors_are_kafkas(real_log: MetadataLog) -> None:
    served = await serving(real_log)
    epoch = real_log.leader_epoch
    try:
        # Leader epoch checks (KafkaRaftClient.validateLeaderOnlyRequest): the answer names the leader.
        data = partition_of(await served.fetch(0, 0, leader_epoch=epoch - 1))
        assert data.error_code == ErrorCode.fenced_leader_epoch
        assert (data.current_leader.leader_id, data.current_leader.leader_epoch) == (1, epoch)
        assert data.high_watermark == -1 and bytes(data.records or b"") == b""
        data = partition_of(await served.fetch(0, 0, leader_epoch=epoch + 1))
        assert data.error_code == ErrorCode.unknown_leader_epoch

        # Request checks.
        data = partition_of(await served.fetch(-1, 0))
        assert data.error_code == ErrorCode.invalid_request
        data = partition_of(await served.fetch(5, epoch + 1))  # last fetched epoch above the leader epoch
        assert data.error_code == ErrorCode.invalid_request
        response = await served.send(fetch17(0, 0, epoch, topic_id=uuid.uuid4()))
        assert response.error_code == ErrorCode.invalid_request and response.responses == ()
        response = await served.send(fetch17(0, 0, epoch, partition=1))
        assert response.error_code == ErrorCode.invalid_request
        response = await served.send(fetch17(0, 0, epoch, cluster_id="someone-else"))
        assert response.error_code == ErrorCode.inconsistent_cluster_id
        assert (
            partition_of(await served.send(fetch17(0, 0, epoch, cluster_id=CLUSTER))).error_code
            == ErrorCode.none
        )

        # Fetch before v13 names topics, which Kafka's metadata partition check never matches.
        m = fetch_v12
        old = m.FetchRequest(
            replica_id=i32(-1),
            max_wait=i32Timedelta.parse(timedelta(0)),
            min_bytes=i32(0),
            isolation_level=i8(0),
            topics=(
                m.FetchTopic(
                    topic="__cluster_metadata",
                    partitions=(
                        m.FetchPartition(
                            partition=i32(0),
                            current_leader_epoch=i32(epoch),
                            fetch_offset=i64(0),
                            last_fetched_epoch=i32(0),
                            partition_max_bytes=i32(1 << 20),
                        ),
                    ),
                ),
            ),
            forgotten_topics_data=(),
        )
        response = await served.send(old)
        assert response.error_code == ErrorCode.invalid_request
    finally:
        await served.listener.stop()


@sync
async def test_fetch_diverging_epoch(real_log: MetadataLog) -> None:
    served = await serving(real_log)
    epoch = real_log.leader_epoch
    try:
        end = real_log.durable_offset + 1
        # Ahead of the log in the current epoch: diverging at (epoch, log end).
        data = partition_of(await served.fetch(end + 10, epoch))
        assert (data.diverging_epoch.epoch, data.diverging_epoch.end_offset) == (epoch, end)
        assert bytes(data.records or b"") == b""
        # The fixture's log was led in epoch 1; this controller's epoch starts at its LeaderChange batch.
        data = partition_of(await served.fetch(end, 1))
        assert data.diverging_epoch.epoch == 1
        assert data.diverging_epoch.end_offset < end
        # Exactly at epoch 1's end with epoch 1: valid (no divergence).
        valid_at = int(data.diverging_epoch.end_offset)
        data = partition_of(await served.fetch(valid_at, 1))
        assert data.diverging_epoch.epoch == -1 and data.records
    finally:
        await served.listener.stop()


@sync
async def test_fetch_snapshot(real_log: MetadataLog) -> None:
    written = write_snapshot(real_log.partition_dir, real_log.image, timestamp_ms=1)
    served = await serving(real_log)
    epoch = real_log.leader_epoch
    try:
        # An empty follower is pointed at the newest snapshot (Kafka 3.9).
        data = partition_of(await served.fetch(0, 0))
        sid = written.snapshot_id
        assert (data.snapshot_id.end_offset, data.snapshot_id.epoch) == (sid.end_offset, sid.epoch)
        content = written.path.read_bytes()

        def request(
            position: int, max_bytes: int, end_offset: int = sid.end_offset, name: str = "__cluster_metadata"
        ) -> Any:
            m = snapshot_v1
            return m.FetchSnapshotRequest(
                max_bytes=i32(max_bytes),
                topics=(
                    m.TopicSnapshot(
                        name=name,
                        partitions=(
                            m.PartitionSnapshot(
                                partition=i32(0),
                                current_leader_epoch=i32(epoch),
                                snapshot_id=m.SnapshotId(end_offset=i64(end_offset), epoch=i32(sid.epoch)),
                                position=i64(position),
                            ),
                        ),
                    ),
                ),
            )

        got = b""
        while len(got) < len(content):
            response = await served.send(request(len(got), 1000))
            (item,) = response.topics[0].partitions
            assert (
                item.error_code == ErrorCode.none and item.size == len(content) and item.position == len(got)
            )
            got += bytes(item.unaligned_records)
        assert got == content
        (item,) = (await served.send(request(len(content), 1000))).topics[0].partitions
        assert item.error_code == ErrorCode.position_out_of_range
        (item,) = (await served.send(request(0, 1000, end_offset=sid.end_offset - 1))).topics[0].partitions
        assert item.error_code == ErrorCode.snapshot_not_found
        (item,) = (await served.send(request(0, 1000, name="other"))).topics[0].partitions
        assert item.error_code == ErrorCode.unknown_topic_or_partition
    finally:
        await served.listener.stop()


# ---------------------------------------------------------------------------------------------- follower


@sync
async def test_follower_replays_the_real_log_and_follows_appends(real_log: MetadataLog) -> None:
    served = await serving(real_log)
    follower = MetadataFollower([("127.0.0.1", 1), served.address], poll_interval=0.05, max_bytes=64 * 1024)
    follower.start()
    try:
        assert await follower.catch_up(30)
        assert follower.position == real_log.durable_offset + 1 == follower.high_watermark
        assert comparable(follower.image) == comparable(real_log.image)
        assert (
            follower.image.provenance.last_contained_offset == real_log.image.provenance.last_contained_offset
        )

        # Read-after-write: a durable append is in the image once catch_up returns.
        topic_id = uuid.uuid4()
        real_log.append([(rec.TopicRecord(name="followed", topic_id=topic_id), 0)]).durable.result()
        assert await follower.catch_up(10)
        assert follower.image.topics_by_id[topic_id].name == "followed"
        assert comparable(follower.image) == comparable(real_log.image)
    finally:
        await follower.stop()
        await served.listener.stop()


@sync
async def test_follower_applies_a_metadata_transaction_only_when_it_ends(real_log: MetadataLog) -> None:
    """Fetch serves an open transaction (up to the high watermark, as Kafka does); a follower applies none
    of it until its EndTransactionRecord and drops an aborted one, as Kafka's MetadataLoader does."""
    served = await serving(real_log)
    follower = MetadataFollower([served.address], poll_interval=0.05)
    follower.start()
    aborted, committed = uuid.uuid4(), uuid.uuid4()
    try:
        assert await follower.catch_up(30)
        begin = rec.BeginTransactionRecord(name="aborted")
        real_log.append([(begin, 0), (rec.TopicRecord(name="gone", topic_id=aborted), 0)]).durable.result()
        assert await follower.catch_up(10)
        assert follower.position == real_log.durable_offset + 1  # the open transaction was fetched
        assert aborted not in follower.image.topics_by_id  # and not applied
        real_log.append([(rec.AbortTransactionRecord(reason="test"), 0)]).durable.result()
        begin = rec.BeginTransactionRecord(name="kept")
        real_log.append([(begin, 0), (rec.TopicRecord(name="kept", topic_id=committed), 0)]).durable.result()
        assert await follower.catch_up(10)
        assert aborted not in follower.image.topics_by_id and committed not in follower.image.topics_by_id
        real_log.append([(rec.EndTransactionRecord(), 0)]).durable.result()
        assert await follower.catch_up(10)
        assert follower.image.topics_by_id[committed].name == "kept"
        assert aborted not in follower.image.topics_by_id
        assert comparable(follower.image) == comparable(real_log.image)
    finally:
        await follower.stop()
        await served.listener.stop()


@sync
async def test_follower_loads_a_snapshot_then_the_log_after_it(real_log: MetadataLog) -> None:
    write_snapshot(real_log.partition_dir, real_log.image, timestamp_ms=1)
    real_log.append(
        [(rec.ConfigRecord(resource_type=4, resource_name="", name="a", value="b"), 0)]
    ).durable.result()
    served = await serving(real_log)
    follower = MetadataFollower([served.address], poll_interval=0.05, max_bytes=10_000)
    follower.start()
    try:
        assert await follower.catch_up(30)
        assert comparable(follower.image) == comparable(real_log.image)
        assert follower.image.configs[(4, "")]["a"] == "b"
    finally:
        await follower.stop()
        await served.listener.stop()


@sync
async def test_follower_starts_over_when_the_log_diverges(tmp_path: Path, real_log: MetadataLog) -> None:
    served = await serving(real_log)
    follower = MetadataFollower([served.address], poll_interval=0.05)
    follower.start()
    try:
        assert await follower.catch_up(30)
        await served.listener.stop()
        # Another log (a fresh controller directory) now answers on a new port: the follower is ahead of it.
        other = MetadataLog.open(tmp_path / "other", node_id=1, cluster_id=CLUSTER, fsync=False)
        try:
            served2 = await serving(other)
            follower.controllers = [served2.address]
            await follower.stop()
            follower.start()
            assert await follower.catch_up(30)
            assert follower.resets >= 1
            assert comparable(follower.image) == comparable(other.image)
            await served2.listener.stop()
        finally:
            other.close()
    finally:
        await follower.stop()


@sync
async def test_follower_times_out_when_no_controller_answers() -> None:
    follower = MetadataFollower([("127.0.0.1", 1)], poll_interval=0.05)
    follower.start()
    try:
        assert not await follower.catch_up(0.5)
        assert follower.last_error is not None
    finally:
        await follower.stop()


def test_handlers_register_into_controller_tables() -> None:
    handlers: dict[int, Any] = {}
    supported: dict[int, tuple[int, int]] = {}
    fetch_server.register(handlers, supported, lambda: None)
    assert set(handlers) == {1, 55, 59} and supported == {1: (4, 17), 55: (0, 2), 59: (0, 1)}


@sync
async def test_follower_learns_the_cluster_id_and_refuses_another_cluster(real_log: MetadataLog) -> None:
    served = await serving(real_log)
    learning = MetadataFollower([served.address], poll_interval=0.05)
    told_otherwise = MetadataFollower([served.address], cluster_id="another-cluster", poll_interval=0.05)
    learning.start()
    told_otherwise.start()
    try:
        assert await learning.catch_up(30)
        assert learning.cluster_id == real_log.cluster_id is not None
        assert not await told_otherwise.catch_up(1)
        assert told_otherwise.position == 0
        assert told_otherwise.last_error == (
            f"127.0.0.1:{served.listener.port} belongs to cluster {real_log.cluster_id}, not another-cluster"
        )
    finally:
        await learning.stop()
        await told_otherwise.stop()
        await served.listener.stop()
