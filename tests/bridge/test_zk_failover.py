"""ZooKeeper failures under load: the single server stopped and restarted (connection
loss), the bridge's session expired (the process frozen past the session timeout, as in a long GC pause),
and the leader of a 3-server ensemble restarted. The bridge survives each while four clients stream
changes: it stays up, serves again, loses no acknowledged change, and ZooKeeper converges to its log."""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss

from bridge.api import DriverState
from bridge.config import BridgeConfig
from bridge.controller import FENCE_RECHECK_S, BridgeController
from bridge.kafka.client import send_request_sync
from bridge.zk.leadership import CreateRequest
from bridge.zk.migration_client import ZkMigrationClient
from migrate.zk import paths
from migrate.zk.embedded import EmbeddedEnsemble, EmbeddedZooKeeper
from migrate.zk.model import ConfigChangeNotification, EntityConfig
from migrate.zk.znodes.configs import encode_config_change, encode_entity_config
from tests.support.bridge import eventually
from tests.support.bridge_process import (
    CONFIG_KEY,
    BridgeProcess,
    Change,
    ChangeStream,
    ZkReplyCutter,
    bridge_process,
    bring_up,
    build_request,
    check_acknowledged_and_converged,
    config_value,
    read_back,
    seeded_chroot,
    set_data_op_bytes,
)

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow]

NODE_ID = 3000
CLIENTS = 4
SESSION_TIMEOUT_MS = 3000  # the server's maxSessionTimeout: the bridge asks for 18 s and gets this
SEED = int(os.environ.get("ZK2KRAFT_FAULT_SEED", "0")) or random.SystemRandom().randrange(1, 2**31)


@pytest.fixture(scope="module")
def zk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedZooKeeper]:
    """A private server these tests may stop; short sessions so that a pause can expire one."""
    server = EmbeddedZooKeeper(
        tmp_path_factory.mktemp("zk-failover"), config={"maxSessionTimeout": SESSION_TIMEOUT_MS}
    )
    server.start()
    yield server
    server.close()


def survive(
    bridge: BridgeProcess, disrupt: Callable[[int], None], rounds: int, rng: random.Random
) -> tuple[ChangeStream, str]:
    """Stream changes, disrupt ZooKeeper `rounds` times, then see the bridge serve again; stops it cleanly.

    A bridge that fences itself (exit 3) with no other controller around hit the lost-reply defect, which
    test_a_lost_reply_to_a_dual_write_is_survived pins down; here it ends the test as an expected failure.
    """
    bring_up(bridge, CLIENTS)
    stream = ChangeStream(bridge.listen_port, CLIENTS).start()
    events: list[str] = []
    acked = 0
    try:
        for i in range(rounds):
            time.sleep(rng.uniform(0.2, 0.8))
            events.append(f"round {i} at {stream.acknowledged_count()} acks")
            disrupt(i)
            assert bridge.running, f"bridge exited (code {bridge.returncode}) after {events}\n{bridge.log_tail()}"
        bridge.wait_for_state("DUAL_WRITE", timeout=60)
        # It serves again: more changes are acknowledged after the last disruption.
        acked = stream.acknowledged_count()
        deadline = time.monotonic() + 60
        while stream.acknowledged_count() < acked + 20 and time.monotonic() < deadline and bridge.running:
            time.sleep(0.05)
        assert bridge.running, f"bridge exited (code {bridge.returncode}) after {events}\n{bridge.log_tail()}"
    finally:
        outcomes = stream.stop()
    context = f"seed {SEED}; {events}; {outcomes.summary()}"
    assert stream.acknowledged_count() >= acked + 20, f"no progress after recovery; {context}\n{bridge.log_tail()}"
    assert bridge.terminate() == 0, f"{context}\n{bridge.log_tail()}"
    return stream, context


def converged(bridge: BridgeProcess, stream: ChangeStream, context: str) -> None:
    problems = check_acknowledged_and_converged(read_back(bridge.metadata_dir, bridge.zk_connect), stream.outcomes)
    assert not problems, f"{context}\n" + "\n".join(problems[:30]) + f"\n{bridge.log_tail()}"


def test_zookeeper_server_restarts_lose_no_acknowledged_change(zk: EmbeddedZooKeeper, tmp_path: Path) -> None:
    rng = random.Random(SEED)
    connect = seeded_chroot(zk.connect_string, "/restarts")

    def restart(_round: int) -> None:
        zk.stop()
        time.sleep(rng.uniform(0.2, 1.5))  # shorter than the session timeout: the session survives
        zk.start()

    with bridge_process(zk_connect=connect, metadata_dir=tmp_path / "meta", node_id=NODE_ID, log_path=tmp_path / "bridge.log") as bridge:
        stream, context = survive(bridge, restart, 3, rng)
        # kazoo's line when the server closes the connection: every stop must have reached the bridge.
        drops = bridge.log_text().count("Connection dropped")
        assert drops >= 3, f"{drops} connections dropped in 3 restarts: the test proves too little\n{bridge.log_tail()}"
        converged(bridge, stream, context)


def test_expired_session_loses_no_acknowledged_change(zk: EmbeddedZooKeeper, tmp_path: Path) -> None:
    rng = random.Random(SEED)
    connect = seeded_chroot(zk.connect_string, "/expiry")
    with bridge_process(zk_connect=connect, metadata_dir=tmp_path / "meta", node_id=NODE_ID, log_path=tmp_path / "bridge.log") as bridge:

        def freeze(_round: int) -> None:
            # Frozen past the session timeout, like a long GC pause: ZooKeeper expires the session.
            assert bridge.process is not None
            bridge.process.send_signal(signal.SIGSTOP)
            try:
                time.sleep(SESSION_TIMEOUT_MS / 1000 * 2)
            finally:
                bridge.process.send_signal(signal.SIGCONT)

        stream, context = survive(bridge, freeze, 2, rng)
        # kazoo's line when ZooKeeper answers the reconnection with SESSION_EXPIRED.
        assert "Session has expired" in bridge.log_text(), f"no session expired: the test proves nothing\n{bridge.log_tail()}"
        converged(bridge, stream, context)


def test_ensemble_leader_restarts_lose_no_acknowledged_change(zk_ensemble: EmbeddedEnsemble, tmp_path: Path) -> None:
    rng = random.Random(SEED)
    connect = seeded_chroot(zk_ensemble.connect_string, "/leader-restarts")

    def restart_leader(_round: int) -> None:
        leader = zk_ensemble.wait_for_leader()
        zk_ensemble.stop_server(leader)
        time.sleep(rng.uniform(0.2, 1.0))
        zk_ensemble.start_server(leader)
        zk_ensemble.wait_for_leader()

    with bridge_process(zk_connect=connect, metadata_dir=tmp_path / "meta", node_id=NODE_ID, log_path=tmp_path / "bridge.log") as bridge:
        stream, context = survive(bridge, restart_leader, 2, rng)
        # A follower that loses its leader drops its clients too, so the bridge's session moved at least once.
        assert "Connection dropped" in bridge.log_text(), f"no connection dropped: the test proves nothing\n{bridge.log_tail()}"
        converged(bridge, stream, context)


# ------------------------------------------------------------------ a reply lost after ZooKeeper applied a write




def test_a_fenced_write_whose_reply_was_lost_is_not_taken_for_fencing(zk: EmbeddedZooKeeper) -> None:
    seeded_chroot(zk.connect_string, "/lost-reply")
    cutter = ZkReplyCutter(zk.port)
    client = KazooClient(hosts=cutter.connect_string + "/lost-reply")
    client.start(timeout=15)
    try:
        zk_client = ZkMigrationClient(client)
        state = zk_client.get_or_create_migration_state()
        state = zk_client.claim_controller_leadership(state, NODE_ID, 5)
        state = zk_client.set_migration_state(state, -1)
        cutter.arm(containing=set_data_op_bytes("/lost-reply/migration"))
        # The multi lands, its answer is lost with the connection; the client resends it once reconnected.
        # Before bba9526 the resent copy found /migration moved on by the first one and raised FencedError.
        outcome = zk_client.fenced_write([CreateRequest("/lost-reply-marker", b"1")], state)
        assert cutter.cuts == 1
        assert client.exists("/lost-reply-marker") is not None
        assert [r.ok for r in outcome.results] == [True]
        assert outcome.state.migration_zk_version == state.migration_zk_version + 1
    finally:
        client.stop()
        client.close()
        cutter.close()


def test_a_lost_reply_to_a_dual_write_is_survived(zk: EmbeddedZooKeeper, tmp_path: Path) -> None:
    rng = random.Random(SEED)
    seeded_chroot(zk.connect_string, "/lost-reply-bridge")
    cutter = ZkReplyCutter(zk.port)

    def cut(_round: int) -> None:
        # The multi of a dual write that moves /migration on: applied, its answer lost with the connection.
        cuts = cutter.cuts
        cutter.arm(containing=set_data_op_bytes("/lost-reply-bridge/migration"))
        deadline = time.monotonic() + 30
        while cutter.cuts == cuts and time.monotonic() < deadline and bridge.running:
            time.sleep(0.01)
        assert cutter.cuts == cuts + 1, f"no dual write went through the cutter\n{bridge.log_tail()}"
        time.sleep(0.5)

    try:
        with bridge_process(
            zk_connect=cutter.connect_string + "/lost-reply-bridge", metadata_dir=tmp_path / "meta",
            node_id=NODE_ID, log_path=tmp_path / "bridge.log",
        ) as bridge:  # fmt: skip
            stream, context = survive(bridge, cut, 2, rng)
            converged(bridge, stream, context)
    finally:
        cutter.close()


def test_a_shutdown_while_zookeeper_holds_a_dual_writes_answer_ends_cleanly(
    zk: EmbeddedZooKeeper, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Stopped while the one multi of a change waits for an answer that never comes, the controller gives up
    on it after its wait for in-flight writes, fails the request, stops, and logs no defect; restarted, it
    converges ZooKeeper to the log."""
    import bridge.controller.process as controller_module

    seq = 4242  # the change sent while ZooKeeper holds its answer
    monkeypatch.setattr(controller_module, "SHUTDOWN_WRITES_WAIT_S", 0.5)
    chroot = "/held-reply"
    seeded_chroot(zk.connect_string, chroot)
    cutter = ZkReplyCutter(zk.port)
    config = BridgeConfig.model_validate(
        {"zk_connect": cutter.connect_string + chroot, "metadata_dir": tmp_path / "meta", "node_id": NODE_ID,
         "rehearsal": True}
    )
    answers: list[object] = []
    try:
        controller = BridgeController(config).start()
        try:
            assert controller.wait_for_state(DriverState.DUAL_WRITE), controller.error
            topic = sorted(controller.log.image.topics_by_name)[0]  # type: ignore[union-attr]
            cutter.arm(containing=set_data_op_bytes(chroot + paths.MIGRATION), hold=True)

            def change() -> None:
                request = build_request(Change(kind="config", entity=topic, seq=seq, client=0))
                try:
                    answers.append(send_request_sync("127.0.0.1", controller.listen_port, request))
                except Exception as exc:  # the controller closed the connection
                    answers.append(exc)

            sender = threading.Thread(target=change, daemon=True)
            sender.start()
            deadline = time.monotonic() + 30
            while cutter.cuts == 0 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert cutter.cuts == 1, "the change's multi did not reach the relay"
            with caplog.at_level(logging.ERROR):
                started = time.monotonic()
                controller.stop(timeout=60)
                assert controller.exit_code is not None
                assert time.monotonic() - started < 30
            sender.join(15)
            assert answers and not _succeeded(answers[0]), answers
            defects = [
                r for r in caplog.records if r.exc_info is not None or "Exception in callback" in r.message
            ]
            assert defects == [], [r.getMessage() for r in defects]
        finally:
            controller.stop()
    finally:
        cutter.close()
    # The change was fsynced before it was sent: restarted without the relay, the controller has it and
    # ZooKeeper converges to the log.
    direct = config.model_copy(update={"zk_connect": zk.connect_string + chroot})
    restarted = BridgeController(direct).start()
    try:
        assert restarted.wait_for_state(DriverState.DUAL_WRITE), restarted.error
        assert restarted.log is not None
        assert restarted.log.image.configs[(2, topic)][CONFIG_KEY] == config_value(seq)
        client = KazooClient(hosts=zk.connect_string + chroot)
        client.start(timeout=15)
        try:
            data, _stat = client.get(paths.config_path(f"topics/{topic}"))
            assert json.loads(data)["config"][CONFIG_KEY] == config_value(seq)
        finally:
            client.stop()
            client.close()
    finally:
        restarted.stop()


def _succeeded(answer: object) -> bool:
    responses = getattr(answer, "responses", None)
    return bool(responses) and all(int(r.error_code) == 0 for r in responses)


# ------------------------------------------------------------------ foreign writes are still noticed afterwards


def kafka_configs_alter(zk_connect: str, topic: str, config: dict[str, str]) -> None:
    """What `kafka-configs --zookeeper ... --alter --entity-type topics` does: entity znode, then notification."""
    client = KazooClient(hosts=zk_connect)
    client.start(timeout=30)
    try:
        client.set(
            paths.config_path(f"topics/{topic}"), encode_entity_config(EntityConfig("topics", topic, config))
        )
        client.create(
            f"{paths.CONFIG_CHANGES}/{paths.CONFIG_CHANGE_PREFIX}",
            encode_config_change(ConfigChangeNotification(f"topics/{topic}")),
            sequence=True,
        )
    finally:
        client.stop()
        client.close()


@pytest.mark.parametrize("disruption", ["server-restart", "session-expiry"])
def test_foreign_writes_are_still_noticed_after_zookeeper_failures(
    zk: EmbeddedZooKeeper, tmp_path: Path, disruption: str
) -> None:
    connect = seeded_chroot(zk.connect_string, f"/foreign-{disruption}")
    with bridge_process(zk_connect=connect, metadata_dir=tmp_path / "meta", node_id=NODE_ID, log_path=tmp_path / "bridge.log") as bridge:
        bring_up(bridge, 1)
        if disruption == "server-restart":
            zk.stop()
            time.sleep(0.5)
            zk.start()
        elif disruption == "session-expiry":
            assert bridge.process is not None
            bridge.process.send_signal(signal.SIGSTOP)
            time.sleep(SESSION_TIMEOUT_MS / 1000 * 2)
            bridge.process.send_signal(signal.SIGCONT)
        bridge.wait_for_state("DUAL_WRITE")
        time.sleep(1.0)  # reconnected and re-armed its watches
        kafka_configs_alter(connect, "fault-cfg-0", {"retention.ms": "7200000"})
        deadline = time.monotonic() + 20
        status = bridge.status() or {}
        while status.get("foreign_zk_writes", 0) < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
            status = bridge.status() or {}
        assert status.get("foreign_zk_writes", 0) >= 1, f"the foreign write went unnoticed after {disruption}: {status}\n{bridge.log_tail()}"
        # The disruption reached the bridge (kazoo's lines), or noticing the write afterwards proves nothing.
        line = "Connection dropped" if disruption == "server-restart" else "Session has expired"
        assert line in bridge.log_text(), f"no {line!r} after {disruption}: the test proves nothing\n{bridge.log_tail()}"


def test_a_failed_fence_check_is_logged_with_a_reason_even_when_kazoos_error_has_no_message(
    bridge: BridgeController, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """kazoo's ConnectionLoss says nothing (str() is empty): the log line names its type instead."""
    caplog.set_level(logging.WARNING, logger="bridge.controller")
    assert bridge.kazoo is not None

    def connection_lost(*_args: object, **_kwargs: object) -> None:
        raise ConnectionLoss()

    monkeypatch.setattr(bridge.kazoo, "exists", connection_lost)
    try:
        # The periodic re-check (every FENCE_RECHECK_S) reads ZooKeeper without any change to wait for.
        eventually(lambda: any("fence_check_failed" in r.getMessage() for r in caplog.records), timeout=FENCE_RECHECK_S + 5)
    finally:
        monkeypatch.undo()
    (line,) = {r.getMessage() for r in caplog.records if "fence_check_failed" in r.getMessage()}
    assert line == "event=fence_check_failed ConnectionLoss"
