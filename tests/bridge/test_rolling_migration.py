"""The rolling migration end to end, as an operator runs it against Kafka 3.9.

Three ZooKeeper-mode brokers in migration mode (the real Kafka 3.5 cluster's tree in a real ZooKeeper) →
the bridge migrates → dual-write with admin traffic → each broker restarted, one at a time, as a KRaft
broker with the same id → `zk2kraft finalize-check` (with its Spark audit) passes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from kazoo.client import KazooClient
from kio.schema.errors import ErrorCode

from bridge.api import DriverState
from bridge.controller import BridgeController
from bridge.kafka.client import send_request_sync
from cli.main import cli
from migrate.kraft.image import MetadataImage
from migrate.zk.load import load_tree
from migrate.zk.tree import ZTree
from tests.support.audit import shared_spark, summary
from tests.support.bridge import controller_config, start_controller
from tests.support.kraft_broker import SimulatedKraftBroker
from tests.support.requests import SET, TOPIC, create_topic, delete_topics, incremental
from tests.support.zk_broker import SimulatedZkBroker
from tests.support.zk_broker_control import FOLLOWER, LEADER, LEADER_AND_ISR

pytestmark = [pytest.mark.zookeeper, pytest.mark.spark]

SESSION_TIMEOUT_MS = 1500
BROKER_IDS = (1, 2, 3)
MIGRATED_TOPIC = "current_stock"
"""The real cluster's topic, with replicas on all three brokers: deleted during dual-write."""
NEW_TOPIC = "rolling_orders"
RETENTION_MS = "86400000"
SETTLE_S = 30.0


@pytest.fixture
def bridge(
    zk_client: KazooClient, real_tree: ZTree, zk_connect: str, tmp_path: Path
) -> Iterator[BridgeController]:
    """A bridge as Kafka's controller behaves (no rehearsal): it waits for the brokers before migrating."""
    load_tree(zk_client, real_tree)
    controller = start_controller(
        controller_config(
            zk_connect, tmp_path / "meta", rehearsal=False, broker_session_timeout_ms=SESSION_TIMEOUT_MS
        )
    )
    yield controller
    controller.stop()


def image(bridge: BridgeController) -> MetadataImage:
    assert bridge.log is not None
    return bridge.log.image


def settle(check: Callable[[], str | None], timeout: float = SETTLE_S) -> None:
    """Wait until `check()` finds nothing wrong (None); fail with the last thing it found."""
    deadline = time.monotonic() + timeout
    while (wrong := check()) is not None:
        assert time.monotonic() < deadline, wrong
        time.sleep(0.05)


def zk_broker_disagrees(bridge: BridgeController, broker: SimulatedZkBroker) -> str | None:
    """What broker `broker` believes that the bridge's image does not say (None: they agree): its metadata
    cache holds every partition with the image's leader, epoch, ISR and replicas, and it hosts exactly its
    replicas, leading where the image names it leader."""
    snapshot = broker.control.snapshot()
    now = image(bridge)
    expected = {(t.name, p): part for t in now.topics_by_name.values() for p, part in t.partitions.items()}
    cached = {
        (name, p): state
        for name, states in snapshot.cache.partition_states.items()
        for p, state in states.items()
    }
    who = f"broker {broker.broker_id}"
    if set(cached) != set(expected):
        differ = sorted(set(cached) ^ set(expected))
        return (
            f"{who} caches {len(cached)} partitions, the image has {len(expected)}; e.g. {differ[:3]} differ"
        )
    for key, part in expected.items():
        state = cached[key]
        seen = (state.leader, state.leader_epoch, list(state.isr), list(state.replicas))
        if seen != (part.leader, part.leader_epoch, part.isr, part.replicas):
            return f"{who} caches {key} as {seen}; the image: {(part.leader, part.leader_epoch, part.isr, part.replicas)}"
    topic_ids = {t.name: t.topic_id for t in now.topics_by_name.values()}
    if snapshot.cache.topic_ids != topic_ids:
        return f"{who} caches topic ids {snapshot.cache.topic_ids}; the image: {topic_ids}"
    hosted = {key: log for key, log in snapshot.logs.items() if not log.stopped}
    mine = {key for key, part in expected.items() if broker.broker_id in part.replicas}
    if set(hosted) != mine:
        return f"{who} hosts {sorted(hosted)}; its replicas: {sorted(mine)}"
    for key in mine:
        log, part = hosted[key], expected[key]
        role = LEADER if part.leader == broker.broker_id else FOLLOWER
        if (log.role, log.leader, log.leader_epoch) != (role, part.leader, part.leader_epoch):
            return (
                f"{who} is {log.role} of {key} under {log.leader} epoch {log.leader_epoch}; the image: {part}"
            )
    return None


def runs_as_kraft_broker(bridge: BridgeController, kraft: SimulatedKraftBroker) -> str | None:
    registration = image(bridge).cluster.brokers.get(kraft.broker_id)
    if registration is None or registration.incarnation_id != kraft.incarnation:
        return f"broker {kraft.broker_id} has not re-registered as a KRaft broker: {registration}"
    if registration.is_migrating_zk_broker or registration.fenced or kraft.view.is_fenced:
        return f"broker {kraft.broker_id} is not yet an unfenced KRaft broker: {registration}, {kraft.view}"
    return None


def behind(bridge: BridgeController, krafts: Iterable[SimulatedKraftBroker]) -> str | None:
    """Which KRaft broker has not applied the controller's log up to its end (None: all have)."""
    end = image(bridge).provenance.last_contained_offset
    late = {k.broker_id: k.applied_offset() for k in krafts if k.applied_offset() < end}
    return f"KRaft brokers behind offset {end}: {late}" if late else None


def all_unfenced(bridge: BridgeController) -> bool:
    brokers = image(bridge).cluster.brokers
    return set(brokers) == set(BROKER_IDS) and not any(b.fenced for b in brokers.values())


def send(bridge: BridgeController, request: object) -> object:
    return send_request_sync("127.0.0.1", bridge.listen_port, request)


def test_brokers_roll_from_zookeeper_mode_to_kraft_and_finalize_check_passes(
    bridge: BridgeController, zk_client: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    shared_spark()  # finalize-check's audit joins the test process's session instead of starting its own
    cluster_id = bridge.cluster_id
    assert cluster_id is not None
    controller = ("127.0.0.1", bridge.listen_port)
    zk_brokers = {
        b: SimulatedZkBroker(b, controller, cluster_id, zk_connect=zk_connect).start() for b in BROKER_IDS
    }
    kraft_brokers: dict[int, SimulatedKraftBroker] = {}
    try:
        # 1. The bridge migrates once all three registered. Each broker gets its metadata from the full sync if
        # it was unfenced by then, else (as in Kafka) from the incremental requests its unfencing sends.
        assert bridge.wait_for_state(DriverState.DUAL_WRITE), bridge.error
        settle(
            lambda: (
                None
                if all_unfenced(bridge)
                else f"not every broker unfenced: {image(bridge).cluster.brokers}"
            )
        )
        for broker in zk_brokers.values():
            settle(lambda b=broker: zk_broker_disagrees(bridge, b))
            requests = broker.control.snapshot().requests
            assert any(r.api_key == LEADER_AND_ISR for r in requests)
            assert all(r.request.is_kraft_controller for r in requests)
            assert all(r.error_code == ErrorCode.none for r in requests), requests
        channel = {b.broker_id: b for b in bridge.status().broker_channel.brokers}
        assert sorted(channel) == list(BROKER_IDS) and all(not b.errors for b in channel.values())

        # 2. Dual-write with admin traffic: every broker follows; ZooKeeper holds each change.
        created = send(bridge, create_topic(NEW_TOPIC, 3, 2))
        assert [t.error_code for t in created.topics] == [ErrorCode.none]  # type: ignore[attr-defined]
        altered = send(bridge, incremental(TOPIC, NEW_TOPIC, ("retention.ms", SET, RETENTION_MS)))
        assert [r.error_code for r in altered.responses] == [ErrorCode.none]  # type: ignore[attr-defined]
        deleted = send(bridge, delete_topics(MIGRATED_TOPIC))
        assert [r.error_code for r in deleted.responses] == [ErrorCode.none]  # type: ignore[attr-defined]
        assert zk_client.exists(f"/brokers/topics/{MIGRATED_TOPIC}") is None
        assert json.loads(zk_client.get(f"/config/topics/{NEW_TOPIC}")[0])["config"] == {
            "retention.ms": RETENTION_MS
        }
        for broker in zk_brokers.values():
            settle(lambda b=broker: zk_broker_disagrees(bridge, b))
            # Its data of the deleted topic is gone (StopReplica with delete), not just stopped.
            gone = {(d.topic, d.partition) for d in broker.control.snapshot().deleted}
            assert {key for key in gone if key[0] == MIGRATED_TOPIC}, f"broker {broker.broker_id}: {gone}"

        # 3. One at a time: stop the ZooKeeper-mode broker, start it again as a KRaft broker, same id and port.
        for broker_id in BROKER_IDS:
            old = zk_brokers.pop(broker_id)
            assert old.shutdown(timeout=30), f"broker {broker_id} was never told to shut down: {old.view}"
            kraft = SimulatedKraftBroker(broker_id, controller, cluster_id, port=old.port).start()
            kraft_brokers[broker_id] = kraft
            settle(lambda k=kraft: runs_as_kraft_broker(bridge, k), SESSION_TIMEOUT_MS / 1000 + SETTLE_S)
            assert zk_client.exists(f"/brokers/ids/{broker_id}") is None
            # It fetches the log instead: it has applied what the controller has.
            settle(lambda k=kraft: behind(bridge, [k]))
            # The brokers still in ZooKeeper mode keep following the controller.
            for other in zk_brokers.values():
                settle(lambda b=other: zk_broker_disagrees(bridge, b))
        # A KRaft broker never gets the ZooKeeper brokers' control requests, whatever changes after it joined.
        again = send(bridge, incremental(TOPIC, NEW_TOPIC, ("retention.ms", SET, "3600000")))
        assert [r.error_code for r in again.responses] == [ErrorCode.none]  # type: ignore[attr-defined]
        more = send(bridge, create_topic(f"{NEW_TOPIC}_after", 1, 3))
        assert [t.error_code for t in more.topics] == [ErrorCode.none]  # type: ignore[attr-defined]
        settle(lambda: behind(bridge, kraft_brokers.values()))
        assert {b: k.control_requests for b, k in kraft_brokers.items()} == {b: [] for b in BROKER_IDS}
        settle(
            lambda: (
                None if bridge.status().brokers.migrating_zk_brokers == 0 else str(bridge.status().brokers)
            )
        )

        # 4. The gate before finalizing: every condition passes, the audit included.
        audit_out = tmp_path / "audit"
        status_url = f"http://127.0.0.1:{bridge.metrics_port}"
        args = [
            "finalize-check", "--zk", zk_connect, "--bridge-status", status_url,
            "--metadata-dir", str(tmp_path / "meta"), "--audit-out", str(audit_out),
            # The soak guards against a controller that fails over in production; this test's lasts seconds.
            "--min-soak", "1s", "--format", "json",
        ]  # fmt: skip
        result = CliRunner().invoke(cli, args)
        report = json.loads(result.stdout)
        verdicts = {c["id"]: c["verdict"] for c in report["conditions"]}
        assert verdicts == dict.fromkeys(
            ("brokers-kraft", "brokers-unfenced", "migration-state", "write-behind-lag", "soak", "audit"), "pass"
        ), report
        assert result.exit_code == 0 and report["ok"] and report["phase"] == "kraft-brokers"
        audit = summary(audit_out)
        assert (audit["verdict"], audit["exit_code"]) == ("consistent", 0), audit
    finally:
        for zk_broker in zk_brokers.values():
            zk_broker.kill()
        for kraft_broker in kraft_brokers.values():
            kraft_broker.kill()
