"""Shared parts of the shim tests: real ZooKeeper seeded with Kafka 3.5's real cluster, a bridge controller in
DUAL_WRITE that serves its log with Fetch, and one shim in front of it."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from bridge.api import DriverState
from bridge.config import BridgeConfig
from bridge.controller import BridgeController
from bridge.shim.server import ShimConfig, ShimServer, ShimThread
from migrate.zk.load import load_tree
from migrate.zk.tree import ZTree

NODE_ID = 3000
SHIM_ID = 7000
TIMEOUT = 30.0


def start_controller(config: BridgeConfig) -> BridgeController:
    """A bridge controller as `zk2kraft bridge run` builds it (it serves Fetch/FetchSnapshot of its log)."""
    return BridgeController(config).start()


def controller_config(zk_connect: str, metadata_dir: Path, *, standby: bool = False) -> BridgeConfig:
    return BridgeConfig.model_validate(
        {"zk_connect": zk_connect, "metadata_dir": metadata_dir, "node_id": NODE_ID, "fsync": False,
         "standby": standby}
    )  # fmt: skip


@contextlib.contextmanager
def running_bridge(
    zk_client: KazooClient, zk_connect: str, tree: ZTree, tmp_path: Path
) -> Iterator[BridgeController]:
    """ZooKeeper loaded with `tree`, and a bridge controller over it in DUAL_WRITE."""
    load_tree(zk_client, tree)
    controller = start_controller(controller_config(zk_connect, tmp_path / "meta"))
    try:
        assert controller.wait_for_state(DriverState.DUAL_WRITE), controller.error
        yield controller
    finally:
        controller.stop()


@contextlib.contextmanager
def running_shim(*controllers: BridgeController | tuple[str, int]) -> Iterator[ShimServer]:
    """One shim in front of `controllers` (tried in that order), on its own event-loop thread."""
    addresses = [c if isinstance(c, tuple) else ("127.0.0.1", c.listen_port) for c in controllers]
    server = ShimServer(ShimConfig(controllers=addresses, node_id=SHIM_ID, poll_interval_s=0.05))
    with ShimThread(server):
        yield server


def result(futures: dict[Any, Any]) -> dict[Any, Any]:
    """The results of an AdminClient call's futures, by key."""
    return {key: future.result(timeout=TIMEOUT) for key, future in futures.items()}


def eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)
