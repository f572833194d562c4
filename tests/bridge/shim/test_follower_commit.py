"""The shim's metadata follower applies only what the quorum committed, as Kafka's brokers do."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from bridge.handlers import reads
from bridge.kafka.listener import KafkaListener, RequestContext
from bridge.raft import codec
from bridge.raft import messages as m
from bridge.raft.metadata_log import encode_data_batch
from bridge.shim.follower import MetadataFollower
from migrate.kraft import records as rec

CLUSTER = "q1w2e3r4t5y6u7i8o9p0"
LEADER = 3000


def test_records_above_the_high_watermark_are_not_applied_until_committed_nor_caught_up_without_one() -> None:
    committed_topic, pending_topic = uuid.uuid4(), uuid.uuid4()
    first = encode_data_batch(0, 1, 0, [(rec.TopicRecord(name="committed", topic_id=committed_topic), 0)])
    second = encode_data_batch(1, 1, 0, [(rec.TopicRecord(name="pending", topic_id=pending_topic), 0)])
    high_watermark = [1]  # the leader has the second batch, the quorum has not committed it yet
    leaderless = [False]  # the leader died: the voter asked knows a newer epoch, no leader yet

    async def fetch(ctx: RequestContext, body: Any) -> Any:
        offset = body.topics[0].partitions[0].fetch_offset
        if leaderless[0]:
            answer = m.FetchResponse(m.NONE, m.NOT_LEADER_OR_FOLLOWER, -1, 2, -1, 0)
            return codec.response_to_kio(answer, ctx.api_version, voters={})
        answer = m.FetchResponse(
            m.NONE, m.NONE, LEADER, 1, high_watermark[0], 0, first + second if offset == 0 else second
        )
        return codec.response_to_kio(answer, ctx.api_version, voters={})

    async def describe_cluster(ctx: RequestContext, body: Any) -> Any:
        return reads.describe_cluster_as(
            reads.ENDPOINT_CONTROLLERS, CLUSTER, LEADER, [LEADER], "127.0.0.1", 1, None, body, ctx.api_version
        )

    async def scenario() -> None:
        listener = KafkaListener(
            handlers={codec.FETCH_KEY: fetch, reads.DESCRIBE_CLUSTER: describe_cluster},
            supported={codec.FETCH_KEY: (13, 17), reads.DESCRIBE_CLUSTER: (0, 1)},
        )
        port = await listener.start()
        follower = MetadataFollower([("127.0.0.1", port)], poll_interval=0.05)
        follower.start()
        try:
            assert await follower.catch_up(10)
            assert committed_topic in follower.image.topics_by_id
            assert pending_topic not in follower.image.topics_by_id
            assert follower.position == 1
            high_watermark[0] = -1  # a new leader that has not committed in its epoch yet
            assert not await follower.catch_up(0.5)
            high_watermark[0] = 1
            assert await follower.catch_up(10)
            leaderless[0] = True  # what the last leader had committed no longer tells how far to read
            follower.wake()
            for _ in range(100):
                if follower.status().leader_epoch == 2:
                    break
                await asyncio.sleep(0.02)
            assert follower.status().leader_epoch == 2
            assert not follower.caught_up
            leaderless[0] = False
            high_watermark[0] = 2
            assert await follower.catch_up(10)
            assert pending_topic in follower.image.topics_by_id
        finally:
            await follower.stop()
            await listener.stop()

    asyncio.run(scenario())
