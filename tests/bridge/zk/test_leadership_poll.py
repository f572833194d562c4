"""migrate.zk.kazoo_adapter.poll_select: kazoo's connection-thread select over poll(2), same answers as kazoo's own."""

from __future__ import annotations

import selectors
import socket

import pytest
from kazoo.client import KazooClient
from kazoo.handlers.utils import selector_select

from bridge.zk.leadership import ZkLeadershipClient
from migrate.zk.kazoo_adapter import PollSelectHandler, poll_select
from migrate.zk.live import ZkConnectOptions


def test_answers_as_kazoos_selector_select() -> None:
    a, b = socket.socketpair()
    try:
        for select in (poll_select, selector_select):
            assert select([a], [], [], 0) == ([], [], [])  # nothing to read yet
            assert select([], [a], [], 0) == ([], [a], [])  # room to write
        b.send(b"x")
        for select in (poll_select, selector_select):
            assert select([a, b.fileno()], [], [], 1) == ([a], [], [])
            assert select([a], [b], [], 1) == ([a], [b], [])
        b.close()
        assert poll_select([a], [], [], 1) == ([a], [], [])  # the peer hung up: reading says so
        with pytest.raises(ValueError):
            poll_select([a], [], [], -1)
        with pytest.raises(ValueError):
            poll_select([b], [], [], 0)  # closed: fileno() is -1
    finally:
        a.close()
        b.close()


def test_a_leadership_client_waits_on_zookeeper_without_a_selector_per_wait(
    zk_client: KazooClient, zk_connect: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    created: list[int] = []

    class CountingSelector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
        def __init__(self) -> None:
            created.append(1)
            super().__init__()

    monkeypatch.setattr(selectors, "DefaultSelector", CountingSelector)
    # kazoo's own handler opens and closes a selector (an epoll instance) per wait; seeing them proves
    # this test can see them.
    plain = KazooClient(hosts=zk_connect)
    plain.start(timeout=15)
    try:
        plain.get_children("/")
    finally:
        plain.stop()
        plain.close()
    assert created, "kazoo's own client made no selector: the test proves nothing"

    client = ZkLeadershipClient(zk_client)
    zk_client.ensure_path("/poll")
    created.clear()
    for _ in range(20):
        assert client.get("/poll") is not None
        assert client.get_children("/poll") == []
    assert created == []


def test_clients_built_from_connect_options_wait_on_poll(zk_connect: str) -> None:
    client = ZkConnectOptions(connect=zk_connect).kazoo_client()
    assert isinstance(client.handler, PollSelectHandler)
    client.start(timeout=15)
    try:
        client.ensure_path("/poll")
        leadership = ZkLeadershipClient(client)
        assert leadership.get("/poll") is not None
        assert leadership.get_children("/poll") == []
    finally:
        client.stop()
        client.close()


def test_a_leadership_client_leaves_the_kazoo_client_it_is_given_alone(zk_client: KazooClient) -> None:
    handler = type(zk_client.handler)
    ZkLeadershipClient(zk_client)
    assert type(zk_client.handler) is handler and "select" not in vars(zk_client.handler)
