"""One event at a time: a change is computed from the image it is appended to, even when appends are held.

Appends are held while the foreign-write watcher judges a ZooKeeper change (or a repair runs); requests
arriving meanwhile must each be computed once appends go on, one after the other, as Kafka's controller
runs one write event at a time.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kio.schema.errors import ErrorCode

from bridge.api import DriverState
from bridge.controller import BridgeController
from bridge.driver import MigrationDriver
from bridge.kafka.client import send_request_sync
from bridge.pipeline import Change
from migrate.zk import paths
from migrate.zk.load import load_tree
from migrate.zk.tree import ZTree
from migrate.zk.znodes.controller import decode_migration
from tests.support.bridge import appends_held, controller_config, eventually, start_controller
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


def test_a_change_asked_while_zookeeper_is_reconciled_waits_and_is_answered_once_zookeeper_has_it(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a restart (or a new Raft leader), SYNC_KRAFT_TO_ZK reads ZooKeeper before it plans its writes; a
    change asked meanwhile is not appended then (it would be acknowledged before ZooKeeper has it), but once
    the plan is made, and it is answered only when ZooKeeper holds it."""
    load_tree(zk_client, real_tree)
    first = start_controller(controller_config(zk_connect, tmp_path / "meta"))
    assert first.wait_for_state(DriverState.DUAL_WRITE), first.error
    first.stop()
    reconcile_may_go = threading.Event()
    reconcile = MigrationDriver.reconcile

    async def slow_reconcile(driver: MigrationDriver) -> Any:
        if driver.state is DriverState.SYNC_KRAFT_TO_ZK:
            await asyncio.get_running_loop().run_in_executor(None, reconcile_may_go.wait, 30)
        return await reconcile(driver)

    monkeypatch.setattr(MigrationDriver, "reconcile", slow_reconcile)
    second = start_controller(controller_config(zk_connect, tmp_path / "meta"))
    try:
        assert second.wait_for_state(DriverState.SYNC_KRAFT_TO_ZK), second.error
        assert second.log is not None
        with ThreadPoolExecutor(1) as pool:
            change = pool.submit(send_request_sync, HOST, second.listen_port, create_topic("during-sync"))
            time.sleep(0.5)
            assert not change.done()
            assert "during-sync" not in second.log.image.topics_by_name
            reconcile_may_go.set()
            assert topic_codes(change.result(30)) == [ErrorCode.none]
            assert "during-sync" in zk_client.get_children("/brokers/topics")
        assert second.wait_for_state(DriverState.DUAL_WRITE), second.error
    finally:
        reconcile_may_go.set()
        second.stop()


def migration_offset(zk_client: KazooClient) -> int:
    data, stat = zk_client.get(paths.MIGRATION)
    return decode_migration(paths.MIGRATION, data, zk_version=stat.version).kraft_metadata_offset


def test_an_event_that_appends_nothing_still_runs_its_hook_at_the_highest_pending_offset(
    bridge: BridgeController,
) -> None:
    """Kafka's processBatchEndOffset for an event without records: the hook hears the log's last offset, and
    nothing is appended."""
    assert bridge.log is not None and bridge._loop is not None
    end = bridge.log.end_offset
    heard: list[int] = []
    event = bridge.pipeline.write(lambda _image: ("answer", Change([], on_appended=heard.append)))
    value, last = asyncio.run_coroutine_threadsafe(event, bridge._loop).result(30)
    assert (value, last, heard, bridge.log.end_offset) == ("answer", None, [end - 1], end)
