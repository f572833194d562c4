"""`--foreign-zk-writes import|revert|report` on a bridge in DUAL_WRITE over Kafka 3.5's real cluster: a
`kafka-configs --zookeeper` style change made behind the bridge's back is imported into the log, reverted to
the log's state, or only reported (warning and metric); the bridge's own dual writes are never reported."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kio.schema.errors import ErrorCode

from bridge.api import DriverState
from bridge.config import BridgeConfig
from bridge.controller import BridgeController
from bridge.kafka.client import send_request_sync
from migrate.kraft import records as rec
from migrate.kraft.reader import iter_log_dir
from migrate.zk import paths
from migrate.zk.cluster import from_tree
from migrate.zk.live import read_tree
from migrate.zk.load import load_tree
from migrate.zk.model import ConfigChangeNotification, EntityConfig, LegacyReassignment, ReplicaReassignment
from migrate.zk.tree import ZTree
from migrate.zk.znodes.admin import encode_reassignment
from migrate.zk.znodes.configs import encode_config_change, encode_entity_config
from tests.support.requests import SET, TOPIC, incremental

pytestmark = pytest.mark.zookeeper

STOCK = "current_stock"
TOPIC_RESOURCE = 2


@pytest.fixture
def start_bridge(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path
) -> Iterator[Callable[[str], BridgeController]]:
    load_tree(zk_client, real_tree)
    started: list[BridgeController] = []

    def start(mode: str) -> BridgeController:
        config = BridgeConfig.model_validate(
            {"zk_connect": zk_connect, "metadata_dir": tmp_path / "meta", "node_id": 3000, "fsync": False,
             "foreign_zk_writes": mode, "rehearsal": True}
        )  # fmt: skip
        bridge = BridgeController(config).start()
        started.append(bridge)
        assert bridge.wait_for_state(DriverState.DUAL_WRITE), bridge.error
        return bridge

    yield start
    for bridge in started:
        bridge.stop()


def kafka_configs_alter(client: KazooClient, topic: str, config: dict[str, str]) -> None:
    """What `kafka-configs --zookeeper ... --alter --entity-type topics` does: entity znode, then notification."""
    client.set(
        paths.config_path(f"topics/{topic}"),
        encode_entity_config(EntityConfig("topics", topic, config)),
    )
    client.create(
        f"{paths.CONFIG_CHANGES}/{paths.CONFIG_CHANGE_PREFIX}",
        encode_config_change(ConfigChangeNotification(f"topics/{topic}")),
        sequence=True,
        makepath=True,
    )


def zk_topic_config(zk_connect: str) -> dict[str, str]:
    return from_tree(read_tree(zk_connect, acls=False)).topic_configs[STOCK].config


def image_topic_config(bridge: BridgeController) -> dict[str, str]:
    assert bridge.log is not None
    return dict(bridge.log.image.configs.get((TOPIC_RESOURCE, STOCK), {}))


def wait_until(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.05)


def settle(bridge: BridgeController) -> None:
    """Wait until the foreign-write watcher has judged every event so far."""
    assert bridge.watcher is not None and bridge.watcher.wait_idle(20)


def test_report_mode_warns_and_counts_but_changes_nothing(
    start_bridge: Callable[[str], BridgeController], zk_client: KazooClient, zk_connect: str,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    bridge = start_bridge("report")
    # The bridge's own writes are not foreign.
    for value in ("1000", "2000", "3000"):
        reply = send_request_sync(
            "127.0.0.1", bridge.listen_port, incremental(TOPIC, STOCK, ("retention.ms", SET, value))
        )
        assert [r.error_code for r in reply.responses] == [ErrorCode.none]
    settle(bridge)
    assert bridge.status().foreign_zk_writes == 0

    assert bridge.log is not None
    end = bridge.log.end_offset
    kafka_configs_alter(zk_client, STOCK, {"retention.ms": "7200000"})
    wait_until(lambda: bridge.status().foreign_zk_writes >= 1)
    settle(bridge)
    assert f"/config/topics/{STOCK}" in caplog.text and "foreign ZooKeeper write" in caplog.text
    assert (
        b'zk2kraft_foreign_zk_writes_total{kind="changed",mode="report"} 1.0' in bridge.metrics.exposition()
    )
    assert zk_topic_config(zk_connect) == {"retention.ms": "7200000"}
    assert image_topic_config(bridge) == {"retention.ms": "3000"}
    assert bridge.log.end_offset == end


def test_import_mode_appends_the_change_to_the_log(
    start_bridge: Callable[[str], BridgeController], zk_client: KazooClient, zk_connect: str
) -> None:
    bridge = start_bridge("import")
    kafka_configs_alter(zk_client, STOCK, {"retention.ms": "7200000", "segment.ms": "600000"})
    wait_until(lambda: image_topic_config(bridge) == {"retention.ms": "7200000", "segment.ms": "600000"})
    wait_until(lambda: bridge.foreign_batches_handled >= 1)
    settle(bridge)
    # In the log as if requested, and ZooKeeper says the same.
    records = [e.record for e in iter_log_dir(bridge.config.metadata_dir) if not e.is_control]
    configs = [
        (r.name, r.value) for r in records if isinstance(r, rec.ConfigRecord) and r.resource_name == STOCK
    ]
    assert sorted(configs[-2:]) == [("retention.ms", "7200000"), ("segment.ms", "600000")]
    assert zk_topic_config(zk_connect) == {"retention.ms": "7200000", "segment.ms": "600000"}
    assert bridge.status().zk_metadata_offset == bridge.status().log_end_offset


def test_revert_mode_puts_the_logs_state_back(
    start_bridge: Callable[[str], BridgeController], zk_client: KazooClient, zk_connect: str
) -> None:
    bridge = start_bridge("revert")
    assert bridge.log is not None
    end = bridge.log.end_offset
    kafka_configs_alter(zk_client, STOCK, {"retention.ms": "1"})
    wait_until(lambda: bridge.foreign_batches_handled >= 1)
    wait_until(lambda: zk_topic_config(zk_connect) == {"retention.ms": "3600000"})
    settle(bridge)
    assert image_topic_config(bridge) == {"retention.ms": "3600000"}
    assert bridge.log.end_offset == end
    # The revert is announced like any config write, so ZooKeeper-mode brokers reload the config.
    changes = from_tree(read_tree(zk_connect, acls=False)).config_changes
    assert [c.entity_path for _name, c in sorted(changes.items())][-2:] == [f"topics/{STOCK}"] * 2


@pytest.mark.parametrize("mode", ["report", "import", "revert"])
def test_a_legacy_reassignment_request_is_reported_and_left_alone_in_every_mode(
    mode: str, start_bridge: Callable[[str], BridgeController], zk_client: KazooClient, zk_connect: str,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    # `kafka-reassign-partitions --zookeeper` during dual-write: Kafka's KRaft controller never reads the znode.
    bridge = start_bridge(mode)
    assert bridge.log is not None
    end = bridge.log.end_offset
    topic_before = zk_client.get(paths.topic_path(STOCK))[0]
    request = encode_reassignment(LegacyReassignment([ReplicaReassignment(STOCK, 0, [3, 2])]))
    zk_client.create(paths.REASSIGN_PARTITIONS, request, makepath=True)
    wait_until(lambda: bridge.status().foreign_zk_writes >= 1)
    settle(bridge)
    if mode != "report":
        wait_until(lambda: bridge.foreign_batches_handled >= 1)
    warning = next(r.getMessage() for r in caplog.records if paths.REASSIGN_PARTITIONS in r.getMessage())
    assert f"{STOCK}-0 -> [3, 2]" in warning
    assert "left in place whatever --foreign-zk-writes says" in warning
    assert "kafka-reassign-partitions --bootstrap-server" in warning
    assert f'zk2kraft_foreign_zk_writes_total{{kind="created",mode="{mode}"}} 1.0'.encode() in (
        bridge.metrics.exposition()
    )
    # Nothing imported, nothing reverted: the request stays, the assignment and the log are unchanged.
    assert zk_client.get(paths.REASSIGN_PARTITIONS)[0] == request
    assert zk_client.get(paths.topic_path(STOCK))[0] == topic_before
    assert bridge.log.image.topics_by_name[STOCK].partitions[0].replicas == [2, 1]
    assert bridge.log.end_offset == end
