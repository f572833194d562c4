"""The ZooKeeper mirror: a copy kept current by a persistent recursive watch equals a fresh read of ZooKeeper."""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kazoo.client import KazooClient

from migrate.errors import Zk2KraftError
from migrate.zk.cluster import from_tree
from migrate.zk.embedded import EmbeddedZooKeeper
from migrate.zk.live import ZkConnectOptions, read_tree
from migrate.zk.load import load_tree
from migrate.zk.mirror import ZkMirror, _MirrorReader
from migrate.zk.tree import ZTree


def contents(tree: ZTree) -> dict[str, Any]:
    return {path: (node.data, node.stat) for path, node in tree.nodes.items()}


CURRENT_STOCK_STATE = "/brokers/topics/current_stock/partitions/0/state"
TOPIC = b'{"version":1,"partitions":{"0":[1],"1":[1],"2":[1]}}'


def state(leader: int) -> bytes:
    return b'{"controller_epoch":1,"leader":%d,"version":1,"leader_epoch":0,"isr":[1]}' % leader


def seed(client: KazooClient, topics: int = 30) -> None:
    for t in range(topics):
        client.create(f"/brokers/topics/t{t}", TOPIC, makepath=True)
        for p in range(3):
            client.create(f"/brokers/topics/t{t}/partitions/{p}/state", state(1), makepath=True)


def started(options: ZkConnectOptions, decode_s: float = 30.0) -> ZkMirror:
    mirror = ZkMirror(options, retry_s=0.1, decode_s=decode_s).start()
    assert mirror.wait_following(30)
    return mirror


def test_a_taken_copy_equals_a_fresh_read_after_creates_changes_and_deletes(
    zk_client: KazooClient, zk_connect: str, zk_admin: KazooClient, zk_chroot: str, real_tree: ZTree
) -> None:
    load_tree(zk_client, real_tree)
    seed(zk_client, topics=3)
    options = ZkConnectOptions(connect=zk_connect)
    mirror = started(options)
    try:
        data, _stat = zk_client.get(CURRENT_STOCK_STATE)
        zk_client.set(CURRENT_STOCK_STATE, data)  # a new version of the same state
        zk_client.set("/brokers/topics/t1/partitions/0/state", state(2))
        zk_client.delete("/brokers/topics/t2", recursive=True)
        zk_client.create("/config/topics/t3", b"{}", makepath=True)
        zk_admin.create(f"{zk_chroot}-outside", b"not ours")  # a sibling of the chroot, not inside it
        taken = mirror.take(30)
    finally:
        mirror.stop()
        zk_admin.delete(f"{zk_chroot}-outside")
    assert taken is not None
    assert mirror.loads == 1
    assert "/brokers/topics/t2" not in taken.tree.nodes
    assert taken.tree.nodes["/brokers/topics/t1/partitions/0/state"].data == state(2)
    fresh = read_tree(options, acls=False)
    assert contents(taken.tree) == contents(fresh)
    # A changed topic is decoded again by the taker; an unchanged one is taken over as the mirror decoded it.
    assert set(taken.decoded_topics) == {"__consumer_offsets"}
    assert taken.model() == from_tree(fresh, strict=False)


def test_changes_made_just_before_the_take_are_in_the_copy(zk_client: KazooClient, zk_connect: str) -> None:
    seed(zk_client, topics=10)
    options = ZkConnectOptions(connect=zk_connect)
    mirror = started(options)
    try:
        # Sent without waiting for replies: their events may still be on the wire when take() starts.
        pending = [zk_client.set_async(f"/brokers/topics/t{t}", f"v{t}".encode()) for t in range(10)]
        for result in pending:
            result.get(10)
        taken = mirror.take(30)
    finally:
        mirror.stop()
    assert taken is not None
    expected = [f"v{t}".encode() for t in range(10)]
    assert [taken.tree.nodes[f"/brokers/topics/t{t}"].data for t in range(10)] == expected
    assert contents(taken.tree) == contents(read_tree(options, acls=False))


def test_the_mirror_decodes_changed_topics_again_while_it_follows(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree
) -> None:
    load_tree(zk_client, real_tree)
    options = ZkConnectOptions(connect=zk_connect)
    mirror = started(options, decode_s=0.0)
    try:
        data, _stat = zk_client.get(CURRENT_STOCK_STATE)
        zk_client.set(CURRENT_STOCK_STATE, data)
        time.sleep(1.0)  # several rounds of the mirror's loop: it decodes again after a change
        taken = mirror.take(30)
    finally:
        mirror.stop()
    assert taken is not None
    assert set(taken.decoded_topics) == {"__consumer_offsets", "current_stock"}
    assert taken.model() == from_tree(read_tree(options, acls=False), strict=False)


def test_a_mirror_that_cannot_reach_zookeeper_gives_nothing_to_take() -> None:
    mirror = ZkMirror(ZkConnectOptions(connect="127.0.0.1:1", connection_timeout_ms=500), retry_s=0.1).start()
    try:
        assert not mirror.wait_following(1.0)
        assert mirror.take(5) is None  # the caller reads ZooKeeper itself
    finally:
        mirror.stop()


def test_a_lost_session_makes_the_mirror_read_everything_again(tmp_path: Path) -> None:
    with EmbeddedZooKeeper(tmp_path / "zk") as server:
        options = ZkConnectOptions(connect=server.connect_string + "/kafka")
        client = KazooClient(hosts=server.connect_string)
        client.start(timeout=15)
        try:
            client.ensure_path("/kafka")
            client.create("/kafka/brokers/topics/a", b"1", makepath=True)
            mirror = started(options)
            try:
                server.stop()
                client.stop()
                server.start()
                client.start(timeout=30)
                client.set("/kafka/brokers/topics/a", b"2")  # possibly while the mirror was away
                deadline = time.monotonic() + 60
                while mirror.loads < 2 and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert mirror.loads == 2
                assert mirror.wait_following(30)
                taken = mirror.take(30)
            finally:
                mirror.stop()
            assert taken is not None
            assert taken.tree.nodes["/brokers/topics/a"].data == b"2"
            assert contents(taken.tree) == contents(read_tree(options, acls=False))
        finally:
            client.stop()
            client.close()


def watch_frame(path: bytes, length: int | None = None) -> bytes:
    header = struct.pack("!iqi", -1, 7, 0) + struct.pack("!ii", 3, 3)
    return header + struct.pack("!i", len(path) if length is None else length) + path


def test_watch_events_name_paths_relative_to_the_chroot() -> None:
    reader = _MirrorReader(ZkConnectOptions(connect="127.0.0.1:1/kafka"), "/kafka")
    reader._on_frame(watch_frame(b"/kafka/brokers/topics/a"))
    reader._on_frame(watch_frame(b"/kafka"))
    reader._on_frame(watch_frame(b"/kafka2/x"))  # another chroot sharing the prefix
    assert reader.changed == {"/brokers/topics/a", "/"}  # data changes: the parents' Stat stays


@settings(max_examples=300, deadline=None)
@given(path=st.binary(max_size=40), length=st.integers(-5, 60) | st.none())
def test_malformed_watch_events_raise_our_error(path: bytes, length: int | None) -> None:
    reader = _MirrorReader(ZkConnectOptions(connect="127.0.0.1:1"), "")
    frame = watch_frame(path, length)
    try:
        reader._on_frame(frame)
    except Zk2KraftError:
        return
    assert length in (None, len(path))


@settings(max_examples=300, deadline=None)
@given(tail=st.binary(max_size=30))
def test_arbitrary_watch_frames_are_decoded_or_raise_our_error(tail: bytes) -> None:
    reader = _MirrorReader(ZkConnectOptions(connect="127.0.0.1:1"), "")
    try:
        reader._on_frame(struct.pack("!iqi", -1, 7, 0) + tail)
    except Zk2KraftError:
        return
    assert reader.changed


def test_a_zookeeper_without_persistent_watches_turns_the_mirror_off_for_good(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A ZooKeeper 3.5 answers addWatch UNIMPLEMENTED: no copy is kept, and ZooKeeper is not read again and again."""
    server = socket.create_server(("127.0.0.1", 0))
    connections: list[socket.socket] = []

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = server.accept()
                connections.append(conn)
                conn.recv(1024)  # ConnectRequest
                reply = struct.pack("!iiq", 0, 18000, 1) + struct.pack("!i", 16) + bytes(16) + b"\0"
                conn.sendall(struct.pack("!i", len(reply)) + reply)
                frame = conn.recv(1024)  # addWatch, then sync
                (xid,) = struct.unpack_from("!i", frame, 4)
                conn.sendall(struct.pack("!iiqi", 16, xid, 0, -6))

    threading.Thread(target=serve, daemon=True).start()
    port = server.getsockname()[1]
    mirror = ZkMirror(ZkConnectOptions(connect=f"127.0.0.1:{port}"), retry_s=0.05).start()
    try:
        with caplog.at_level(logging.WARNING, logger="migrate.zk.mirror"):
            assert mirror.wait_following(10)  # returns as the mirror ends
            time.sleep(0.5)
        assert mirror.take(1) is None
        assert len(connections) == 1 and mirror.loads == 0
        assert "event=zk_mirror_off" in caplog.text and "ZooKeeper 3.6 or newer" in caplog.text
    finally:
        mirror.stop()
        server.close()
