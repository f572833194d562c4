"""A bridge controller in this process, in DUAL_WRITE over a real ZooKeeper, and a shim in front of it.

The `bridge` and `shim` fixtures of tests/conftest.py use these; a test that needs another configuration
passes its fields to `running_bridge`. For the bridge as a subprocess see tests.support.bridge_process."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from kazoo.client import KazooClient

from bridge.api import DriverState
from bridge.config import BridgeConfig
from bridge.controller import BridgeController
from bridge.shim.server import ShimConfig, ShimServer, ShimThread
from cli.main import cli
from migrate.kraft.image import MetadataImage
from migrate.zk.cluster import from_tree
from migrate.zk.live import read_tree
from migrate.zk.load import load_tree
from migrate.zk.tree import ZTree

NODE_ID = 3000
SHIM_ID = 7000
TIMEOUT = 30.0


def invoke_bridge_run(tmp_path: Path, *options: str, env: dict[str, str] | None = None) -> Result:
    """`zk2kraft bridge run` on `tmp_path / "meta"` with `options`, through click's runner."""
    args = ["bridge", "run", "--zk", "127.0.0.1:1", "--metadata-dir", str(tmp_path / "meta"), "--node-id", "3000"]
    return CliRunner().invoke(cli, [*args, *options], env=env)


def refused_before_start(result: Result, tmp_path: Path, secret: str, *told: str) -> None:
    """Exit 2, each of `told` said, `secret` never shown, and no metadata directory created."""
    assert result.exit_code == 2, result.output
    for text in told:
        assert text in result.output
    assert secret not in result.output
    assert not (tmp_path / "meta").exists()


def start_controller(config: BridgeConfig) -> BridgeController:
    """A bridge controller as `zk2kraft bridge run` builds it (it serves Fetch/FetchSnapshot of its log)."""
    return BridgeController(config).start()


def controller_config(zk_connect: str, metadata_dir: Path, **fields: Any) -> BridgeConfig:
    """The tests' bridge configuration (node NODE_ID, no fsync, a rehearsal: no brokers needed); `fields` add
    to or override it (`rehearsal=False` for tests that run simulated brokers)."""
    return BridgeConfig.model_validate(
        {
            "zk_connect": zk_connect,
            "metadata_dir": metadata_dir,
            "node_id": NODE_ID,
            "fsync": False,
            "rehearsal": True,
            **fields,
        }
    )


def record_bridge_runs(monkeypatch: pytest.MonkeyPatch) -> list[BridgeConfig]:
    """Make `zk2kraft bridge run` build a stand-in controller that only records its BridgeConfig (and exits 0)
    instead of starting; returns the configs it was told, one per run."""
    import bridge.controller

    configs: list[BridgeConfig] = []

    class Recording:
        error = None
        dry_run_lines: list[str] = []

        def __init__(self, config: BridgeConfig) -> None:
            configs.append(config)

        def run(self) -> int:
            return 0

    monkeypatch.setattr(bridge.controller, "BridgeController", Recording)
    return configs


@contextlib.contextmanager
def running_bridge(
    zk_client: KazooClient, zk_connect: str, tree: ZTree, tmp_path: Path, **fields: Any
) -> Iterator[BridgeController]:
    """ZooKeeper loaded with `tree`, and a bridge controller over it in DUAL_WRITE (`fields` as in controller_config)."""
    load_tree(zk_client, tree)
    controller = start_controller(controller_config(zk_connect, tmp_path / "meta", **fields))
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
    """Wait until `check()` holds; fail the test if it does not within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


@contextlib.contextmanager
def appends_held(bridge: BridgeController) -> Iterator[None]:
    """Hold the bridge's appends as its foreign-write watcher does while it judges a ZooKeeper change."""
    watcher = bridge.watcher
    assert watcher is not None
    with watcher.own_writes():
        bridge.pipeline.hold_appends()
        yield


def partition_states(zk_client: KazooClient, image: MetadataImage) -> dict[tuple[str, int], dict[str, object]]:
    """The partition state znodes (leader, isr, leader_epoch, ...) of every partition in `image`, by name."""
    states = {}
    for topic in image.topics_by_name.values():
        for partition_id in topic.partitions:
            data, _ = zk_client.get(f"/brokers/topics/{topic.name}/partitions/{partition_id}/state")
            states[(topic.name, partition_id)] = json.loads(data)
    return states


def zookeeper_partition_mismatches(zk_client: KazooClient, image: MetadataImage) -> list[str]:
    """Partitions whose state znode's (leader, isr, leader_epoch) differs from `image`, one line each."""
    mismatches = []
    for (name, partition_id), state in partition_states(zk_client, image).items():
        partition = image.topics_by_name[name].partitions[partition_id]
        in_zk = (state["leader"], state["isr"], state["leader_epoch"])
        in_image = (partition.leader, partition.isr, partition.leader_epoch)
        if in_zk != in_image:
            mismatches.append(f"{name}-{partition_id}: ZooKeeper {in_zk}, image {in_image}")
    return mismatches


def zookeeper_matches_image(zk_client: KazooClient, image: MetadataImage) -> bool:
    """Every partition state znode holds the image's leader, ISR and leader epoch."""
    return not zookeeper_partition_mismatches(zk_client, image)


def changeable_state(bridge: BridgeController, zk_connect: str) -> tuple[Any, ...]:
    """What a refused request must leave alone: the log's end offset; topics, configs, ACLs and change
    notifications in ZooKeeper."""
    assert bridge.log is not None
    model = from_tree(read_tree(zk_connect, acls=False))
    return (
        bridge.log.end_offset, model.topics, model.topic_configs, model.broker_configs, model.acls,
        model.config_changes,
    )  # fmt: skip
