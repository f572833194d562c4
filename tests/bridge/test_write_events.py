"""One event at a time: a change is computed from the image it is appended to, even when appends are held.

Appends are held while the foreign-write watcher judges a ZooKeeper change (or a repair runs); requests
arriving meanwhile must each be computed once appends go on, one after the other, as Kafka's controller
runs one write event at a time.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from bridge.controller import BridgeController
from bridge.kafka.client import send_request_sync
from tests.support.bridge import appends_held, eventually
from tests.support.requests import alter_reassignments, create_topic, list_reassignments

HOST = "127.0.0.1"


def sent_while_held(bridge: BridgeController, *requests: Any) -> list[Any]:
    """Send `requests` at once while appends are held; let appends go once all of them wait; their answers."""
    port = bridge.listen_port
    with ThreadPoolExecutor(len(requests)) as pool:
        answers: list[Future[Any]]
        with appends_held(bridge):
            answers = [pool.submit(send_request_sync, HOST, port, request) for request in requests]
            eventually(lambda: bridge.pipeline.events_waiting == len(requests))
        return [answer.result(timeout=30) for answer in answers]


def topic_codes(response: Any) -> list[ErrorCode]:
    return [ErrorCode(t.error_code) for t in response.topics]


def test_two_create_topics_of_one_name_held_behind_a_judgment_give_one_topic_and_topic_already_exists(
    bridge: BridgeController,
) -> None:
    first, second = sent_while_held(bridge, create_topic("streams-changelog", 3), create_topic("streams-changelog", 3))
    codes = sorted([*topic_codes(first), *topic_codes(second)], key=int)
    assert codes == [ErrorCode.none, ErrorCode.topic_already_exists]
    assert bridge.log is not None
    assert "streams-changelog" in bridge.log.image.topics_by_name
    # The log still takes changes: nothing broke its replay.
    assert topic_codes(send_request_sync(HOST, bridge.listen_port, create_topic("after-the-race"))) == [
        ErrorCode.none
    ]
    assert bridge.renounced is None


def test_list_partition_reassignments_is_answered_only_once_what_it_read_is_committed(
    bridge: BridgeController, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reassignment appended but not yet fsynced is not reported until it is durable (Kafka reads reassignments
    at the committed offset): a listing can never show what a failed write would take back."""
    assert bridge.log is not None
    name, partition_id, partition = next(
        (t.name, p, part)
        for t in sorted(bridge.log.image.topics_by_name.values(), key=lambda t: t.name)
        for p, part in sorted(t.partitions.items())
        if len(part.replicas) < 3
    )
    target = [*partition.replicas, next(b for b in (1, 2, 3) if b not in partition.replicas)]
    fsync_may_go = threading.Event()
    syncing = threading.Event()
    sync = bridge.log._sync

    def slow_disk() -> None:
        syncing.set()
        fsync_may_go.wait(30)
        sync()

    monkeypatch.setattr(bridge.log, "_sync", slow_disk)
    port = bridge.listen_port
    with ThreadPoolExecutor(2) as pool:
        try:
            moved = pool.submit(send_request_sync, HOST, port, alter_reassignments((name, partition_id, target)))
            assert syncing.wait(30)  # the reassignment is appended; its fsync has not returned
            listed = pool.submit(send_request_sync, HOST, port, list_reassignments(None))
            with pytest.raises(TimeoutError):
                listed.result(timeout=1.0)
        finally:
            fsync_may_go.set()
        assert [int(p.error_code) for t in moved.result(30).responses for p in t.partitions] == [ErrorCode.none]
        answer = listed.result(30)
    assert [(t.name, [int(p.partition_index) for p in t.partitions]) for t in answer.topics] == [
        (name, [partition_id])
    ]
