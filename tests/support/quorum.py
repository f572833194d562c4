"""Three bridge controllers in this process forming one Raft quorum (`--voters`) over a real ZooKeeper."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from bridge.api import DriverState
from bridge.controller import BridgeController
from migrate.zk.embedded import free_ports
from migrate.zk.load import load_tree
from migrate.zk.tree import ZTree
from tests.support.bridge import controller_config

VOTER_IDS = (3000, 3001, 3002)


def voters_option(ports: list[int]) -> str:
    return ",".join(f"{node}@127.0.0.1:{port}" for node, port in zip(VOTER_IDS, ports, strict=True))


def leader_of(controllers: list[BridgeController], timeout: float = 30.0) -> BridgeController:
    """The one controller in DUAL_WRITE (waits for it); fails if two are."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        leading = [c for c in controllers if c.state == DriverState.DUAL_WRITE and not c.fenced]
        assert len(leading) <= 1, [c.config.node_id for c in leading]
        if leading:
            return leading[0]
        time.sleep(0.05)
    raise AssertionError(
        f"no bridge reached DUAL_WRITE within {timeout} s: {[c.status() for c in controllers]}"
    )


def start_voter(
    zk_connect: str, tmp_path: Path, node_id: int, port: int, voters: str, **fields: Any
) -> BridgeController:
    config = controller_config(
        zk_connect, tmp_path / f"meta-{node_id}", node_id=node_id, listen_port=port, voters=voters,
        format_empty_voter_directory=True, **fields,
    )  # fmt: skip
    return BridgeController(config).start()


def voter_addresses(controllers: list[BridgeController]) -> list[tuple[str, int]]:
    """Where the voters listen, in node-id order (what `controller.quorum.voters` gives brokers)."""
    return [("127.0.0.1", controller.listen_port) for controller in controllers]


@contextlib.contextmanager
def started_quorum(
    zk_client: KazooClient, zk_connect: str, tree: ZTree, tmp_path: Path, **fields: Any
) -> Iterator[list[BridgeController]]:
    """ZooKeeper loaded with `tree` and three voters started over it (not waited for: with `rehearsal=False`
    the leader waits for brokers before it migrates)."""
    load_tree(zk_client, tree)
    ports = free_ports(len(VOTER_IDS))
    voters = voters_option(ports)
    controllers: list[BridgeController] = []
    try:
        for node, port in zip(VOTER_IDS, ports, strict=True):
            controllers.append(start_voter(zk_connect, tmp_path, node, port, voters, **fields))
        yield controllers
    finally:
        for controller in controllers:
            controller.stop()


@contextlib.contextmanager
def running_quorum(
    zk_client: KazooClient, zk_connect: str, tree: ZTree, tmp_path: Path, **fields: Any
) -> Iterator[list[BridgeController]]:
    """ZooKeeper loaded with `tree` and three voters over it, one of them in DUAL_WRITE."""
    with started_quorum(zk_client, zk_connect, tree, tmp_path, **fields) as controllers:
        leader_of(controllers, timeout=60.0)
        yield controllers


@contextlib.contextmanager
def frozen(controller: BridgeController) -> Iterator[None]:
    """The controller's event loop blocked, as a SIGSTOPped process: its connections stay open and it answers
    nothing, resigns nothing, sends nothing (its ZooKeeper session lives on); released on leaving."""
    loop = controller.loop
    assert loop is not None
    blocked, release = threading.Event(), threading.Event()

    def block() -> None:
        blocked.set()
        release.wait()

    loop.call_soon_threadsafe(block)
    assert blocked.wait(10), "the controller's event loop did not stop"
    try:
        yield
    finally:
        release.set()
