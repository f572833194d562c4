"""bridge.zk.broker_registry: ZooKeeper-mode brokers under /brokers/ids, seen by handlers as registered KRaft brokers."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss

from bridge.zk.broker_registry import ZkBrokerRegistry, merge_brokers
from migrate.kraft.image import BrokerRegistration, MetadataImage
from migrate.zk.model import BrokerEndpoint
from migrate.zk.model import BrokerRegistration as ZkBroker
from migrate.zk.znodes.brokers import encode_broker

pytestmark = pytest.mark.zookeeper


def register(client: KazooClient, broker_id: int, rack: str | None = None, *, ephemeral: bool = True) -> int:
    """What a ZooKeeper-mode broker does at start-up; returns the znode's czxid (its broker epoch)."""
    data = encode_broker(
        ZkBroker(
            broker_id,
            [
                BrokerEndpoint("PLAINTEXT", f"kafka{broker_id}", 9092, "PLAINTEXT"),
                BrokerEndpoint("SSL", f"kafka{broker_id}", 9093, "SSL"),
            ],
            timestamp=1709177854981,
            rack=rack,
        )
    )
    client.create(f"/brokers/ids/{broker_id}", data, ephemeral=ephemeral, makepath=True)
    return int(client.exists(f"/brokers/ids/{broker_id}").czxid)


def eventually(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


def test_brokers_appear_as_registered_unfenced_migrating_brokers_with_the_czxid_epoch(
    zk_client: KazooClient,
) -> None:
    epoch1 = register(zk_client, 1, rack="r1")
    counts: list[int] = []
    registry = ZkBrokerRegistry(zk_client, on_change=lambda brokers: counts.append(len(brokers))).start()
    try:
        broker = registry.brokers[1]
        assert broker.epoch == epoch1 and broker.rack == "r1"
        assert not broker.fenced and not broker.in_controlled_shutdown and broker.is_migrating_zk_broker
        assert [(e.name, e.host, e.port, e.security_protocol) for e in broker.endpoints] == [
            ("PLAINTEXT", "kafka1", 9092, 0),
            ("SSL", "kafka1", 9093, 1),
        ]
        assert broker.log_dirs == []

        # A broker joins, one changes its registration (rack), one leaves: the view follows.
        epoch2 = register(zk_client, 2)
        eventually(lambda: 2 in registry.brokers)
        assert registry.brokers[2].epoch == epoch2
        zk_client.set(
            "/brokers/ids/1",
            encode_broker(
                ZkBroker(1, [BrokerEndpoint("PLAINTEXT", "kafka1", 9092, "PLAINTEXT")], rack="r9")
            ),
        )
        eventually(lambda: registry.brokers[1].rack == "r9")
        assert registry.brokers[1].epoch == epoch1  # a data change is not a new registration
        zk_client.delete("/brokers/ids/2")
        eventually(lambda: 2 not in registry.brokers)

        # A restarted broker registers again: new znode, new epoch.
        zk_client.delete("/brokers/ids/1")
        new_epoch = register(zk_client, 1)
        eventually(lambda: 1 in registry.brokers and registry.brokers[1].epoch == new_epoch)
        assert new_epoch > epoch1
        assert counts[-1] == len(registry.brokers) == 1
    finally:
        registry.stop()


def test_a_missing_brokers_ids_znode_is_waited_for(zk_client: KazooClient) -> None:
    registry = ZkBrokerRegistry(zk_client).start()
    try:
        assert registry.brokers == {}
        register(zk_client, 5)
        eventually(lambda: 5 in registry.brokers)
        zk_client.delete("/brokers/ids/5")
        zk_client.delete("/brokers/ids")
        eventually(lambda: registry.brokers == {})
        register(zk_client, 6)
        eventually(lambda: set(registry.brokers) == {6})
    finally:
        registry.stop()


def test_a_watch_that_cannot_be_armed_is_logged_with_a_reason_even_without_a_message(
    zk_client: KazooClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """kazoo's ConnectionLoss says nothing (str() is empty): the warning names its type, not "()"."""
    register(zk_client, 1)
    registry = ZkBrokerRegistry(zk_client).start()
    caplog.set_level(logging.WARNING, logger="bridge.zk.broker_registry")

    def connection_lost(*_args: object, **_kwargs: object) -> None:
        raise ConnectionLoss()

    try:
        monkeypatch.setattr(zk_client, "exists", connection_lost)
        zk_client.set("/brokers/ids", b"")  # fires the watch on /brokers/ids: the registry re-arms it
        eventually(lambda: any("cannot watch" in r.getMessage() for r in caplog.records))
    finally:
        monkeypatch.undo()
        registry.stop()
    messages = [r.getMessage() for r in caplog.records if "cannot watch" in r.getMessage()]
    assert messages == ["cannot watch /brokers/ids (ConnectionLoss); will retry after reconnecting"]


def test_an_unreadable_registration_is_ignored(zk_client: KazooClient) -> None:
    register(zk_client, 1)
    zk_client.create("/brokers/ids/2", b"not json")
    registry = ZkBrokerRegistry(zk_client).start()
    try:
        assert set(registry.brokers) == {1}
    finally:
        registry.stop()


def test_handlers_view_is_a_shallow_copy_and_the_logs_registrations_win() -> None:
    image = MetadataImage()
    logged = BrokerRegistration(broker_id=1, epoch=77, incarnation_id=uuid.uuid4(), fenced=True)
    image.cluster.brokers[1] = logged
    zk = {
        1: BrokerRegistration(broker_id=1, epoch=5, incarnation_id=uuid.uuid4(), fenced=False),
        2: BrokerRegistration(broker_id=2, epoch=6, incarnation_id=uuid.uuid4(), fenced=False),
    }
    view = merge_brokers(image, zk)
    assert view.cluster.brokers == {1: logged, 2: zk[2]}
    assert image.cluster.brokers == {1: logged}  # the log's image is untouched
    assert view.topics_by_id is image.topics_by_id and view.configs is image.configs
    assert merge_brokers(image, {}) is image
