"""Three `bridge run --voters` processes on one ZooKeeper: the leader SIGKILLed under admin load through the
shim, the leader cut off from the other voters by a TCP proxy, a follower stopped while the others go on.
Every acknowledged change survives in ZooKeeper and in every log, the recorded admin history is
linearizable, a cut-off leader writes nothing more to ZooKeeper, and a voter that was away ends with the
leader's log."""

from __future__ import annotations

import dataclasses
import math
import random
import threading
import time
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from kazoo.client import KazooClient
from kio.schema.errors import ErrorCode

from bridge.kafka.client import send_request_sync
from migrate.kraft.reader import load_image
from tests.support.bridge import running_shim
from tests.support.bridge_process import BridgeProcess, seed_small_cluster
from tests.support.linearizability import (
    CONFIG_READ,
    CONFIG_SET,
    CREATED,
    TOPIC_CREATE,
    TOPIC_LIST,
    ConfigRegisterModel,
    HistoryRecorder,
    Operation,
    Outcome,
    PendingOperation,
    TopicsModel,
    check,
)
from tests.support.quorum_process import VoterProcesses, log_entries, voter_processes
from tests.support.requests import create_topic

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow]

CONFIG_TOPIC = "lin-cfg"
CONFIG_KEY = "retention.ms"
TOPIC_PREFIX = "lin-t-"
ADMIN_TIMEOUT_S = 15.0
DYNAMIC_TOPIC_CONFIG = 1  # DescribeConfigs' ConfigSource of a topic's own setting

# Errors after which Kafka guarantees the change was not made (validation refused it before any record).
NOTHING_HAPPENED = frozenset(
    {
        KafkaError.INVALID_REQUEST,
        KafkaError.INVALID_CONFIG,
        KafkaError.POLICY_VIOLATION,
        KafkaError.INVALID_PARTITIONS,
        KafkaError.INVALID_REPLICATION_FACTOR,
        KafkaError.TOPIC_EXCEPTION,
        KafkaError.UNSUPPORTED_VERSION,
    }
)


def _error_code(exc: BaseException) -> int | None:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return int(exc.args[0].code())
    return None


def _finish_write_error(op: PendingOperation, exc: BaseException) -> None:
    """A write that errored: failed only if Kafka's answer proves nothing happened, else unknown."""
    if _error_code(exc) in NOTHING_HAPPENED:
        op.failed()
    else:
        op.unknown()


class AdminLoad:
    """Concurrent confluent-kafka AdminClients through the shim, every operation recorded for `check`.

    Two clients set and read `retention.ms` of one topic (a shared register); two create topics of their own
    and list them. Each thread has its own AdminClient and runs one operation at a time.
    """

    def __init__(self, bootstrap: str, seed: int) -> None:
        self.bootstrap = bootstrap
        self.recorder = HistoryRecorder()
        self.rng = random.Random(seed)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._errors: list[BaseException] = []
        self._values = iter(range(3_600_000, 10**9))
        self._lock = threading.Lock()
        self.acknowledged_topics: set[str] = set()

    def admin(self) -> AdminClient:
        return AdminClient(
            {"bootstrap.servers": self.bootstrap, "socket.timeout.ms": 20000, "retry.backoff.ms": 50}
        )

    def start(self) -> AdminLoad:
        for index, work in enumerate([self._configs, self._configs, self._topics, self._topics]):
            rng = random.Random(self.rng.random())
            thread = threading.Thread(target=self._guard, args=(work, index, rng), name=f"admin-{index}")
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(ADMIN_TIMEOUT_S * 3)
            assert not thread.is_alive(), f"{thread.name} did not stop"
        if self._errors:
            raise AssertionError(f"an admin client failed: {self._errors[0]!r}") from self._errors[0]

    def _guard(self, work: Any, index: int, rng: random.Random) -> None:
        try:
            admin = self.admin()
            while not self._stop.is_set():
                work(admin, index, rng)
                time.sleep(rng.uniform(0, 0.02))
        except BaseException as exc:  # a bug of the test itself
            self._errors.append(exc)

    def next_value(self) -> str:
        with self._lock:
            return str(next(self._values))

    # ------------------------------------------------------------------ the operations

    def set_config(self, admin: AdminClient, client: Hashable, value: str) -> bool:
        entry = ConfigEntry(CONFIG_KEY, value, incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(ResourceType.TOPIC, CONFIG_TOPIC, incremental_configs=[entry])
        with self.recorder.record(client, CONFIG_SET, (CONFIG_TOPIC, CONFIG_KEY, value)) as op:
            try:
                for future in admin.incremental_alter_configs([resource], request_timeout=ADMIN_TIMEOUT_S).values():
                    future.result(timeout=ADMIN_TIMEOUT_S + 5)
            except Exception as exc:
                _finish_write_error(op, exc)
                return False
            op.ok()
        return True

    def read_config(self, admin: AdminClient, client: Hashable) -> None:
        with self.recorder.record(client, CONFIG_READ, (CONFIG_TOPIC, CONFIG_KEY)) as op:
            try:
                futures = admin.describe_configs(
                    [ConfigResource(ResourceType.TOPIC, CONFIG_TOPIC)], request_timeout=ADMIN_TIMEOUT_S
                )
                (entries,) = [future.result(timeout=ADMIN_TIMEOUT_S + 5) for future in futures.values()]
            except Exception:
                return  # unknown: a read that did not answer constrains nothing
            entry = entries.get(CONFIG_KEY)
            op.ok(entry.value if entry is not None and entry.source == DYNAMIC_TOPIC_CONFIG else None)

    def create(self, admin: AdminClient, client: Hashable, name: str) -> None:
        with self.recorder.record(client, TOPIC_CREATE, name) as op:
            try:
                futures = admin.create_topics(
                    [NewTopic(name, num_partitions=1, replication_factor=2)], request_timeout=ADMIN_TIMEOUT_S
                )
                futures[name].result(timeout=ADMIN_TIMEOUT_S + 5)
            except Exception as exc:
                if _error_code(exc) == KafkaError.TOPIC_ALREADY_EXISTS:
                    # Ours alone: an attempt of this very call retried after a lost answer, or a real repeat.
                    op.unknown()
                    with self._lock:
                        self.acknowledged_topics.add(name)
                else:
                    _finish_write_error(op, exc)
                return
            op.ok(CREATED)
            with self._lock:
                self.acknowledged_topics.add(name)

    def list_topics(self, admin: AdminClient, client: Hashable) -> frozenset[str] | None:
        with self.recorder.record(client, TOPIC_LIST) as op:
            try:
                metadata = admin.list_topics(timeout=ADMIN_TIMEOUT_S)
            except Exception:
                return None
            names = frozenset(name for name in metadata.topics if name.startswith(TOPIC_PREFIX))
            op.ok(names)
            return names

    # ------------------------------------------------------------------ the clients

    def _configs(self, admin: AdminClient, index: int, rng: random.Random) -> None:
        if rng.random() < 0.5:
            self.set_config(admin, index, self.next_value())
        else:
            self.read_config(admin, index)

    def _topics(self, admin: AdminClient, index: int, rng: random.Random) -> None:
        if rng.random() < 0.5:
            self.create(admin, index, f"{TOPIC_PREFIX}{index}-{self.next_value()}")
        else:
            self.list_topics(admin, index)


def _code(response: Any) -> int:
    return int(response.topics[0].error_code)


def _create_direct(port: int, name: str, timeout: float = 20.0) -> int:
    """CreateTopics of `name` straight to the bridge at `port`; its error code."""
    return _code(send_request_sync("127.0.0.1", port, create_topic(name, 1, 2), timeout=timeout))


def _zk_topics(zk_client: KazooClient) -> set[str]:
    return set(zk_client.get_children("/brokers/topics"))


def _wait_for_state_not(bridge: BridgeProcess, state: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while (status := bridge.status() or {}).get("state") == state:
        assert time.monotonic() < deadline, f"still {state} after {timeout} s: {status}\n{bridge.log_tail()}"
        time.sleep(0.05)


def _leader_followed_by(quorum: VoterProcesses, node: int, timeout: float = 30.0) -> BridgeProcess:
    """The leader in DUAL_WRITE that `node` follows (waits until there is one)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        raft = (quorum.bridges[node].status() or {}).get("raft") or {}
        leader = raft.get("leader_id")
        if raft.get("role") == "follower" and leader in quorum.bridges:
            status = quorum.bridges[leader].status() or {}
            if (status.get("raft") or {}).get("role") == "leader" and status.get("state") == "DUAL_WRITE":
                return quorum.bridges[leader]
        time.sleep(0.05)
    raise AssertionError(f"voter {node} follows no leader in DUAL_WRITE: {quorum.statuses()}\n{quorum.log_tails()}")


def _stop_all(quorum: VoterProcesses, leader_last: int) -> None:
    """SIGTERM the followers, then the leader (so nobody leads a log the others no longer fetch)."""
    for node, bridge in quorum.bridges.items():
        if node != leader_last and bridge.running:
            assert bridge.terminate() == 0, bridge.log_tail()
    leader = quorum.bridges[leader_last]
    if leader.running:
        assert leader.terminate() == 0, leader.log_tail()


# ---------------------------------------------------------------------------------------------- the tests


def with_resends(history: list[Operation], killed_at: float, led_at: float) -> list[Operation]:
    """`history` plus, for each config set in flight while no leader served, a possible second application.

    The dead leader may have replicated the change before dying (the new leader then commits it) while its
    answer was lost; the shim sends the request again, as Kafka's forwarding does on a dropped controller
    connection, and the same value is set once more, later. That resend is an operation of its own, with an
    unknown outcome: it may or may not have taken effect, at any time after the first call.
    """
    resends = [
        dataclasses.replace(op, client=("resent", op.client), outcome=Outcome.UNKNOWN, ret=math.inf)
        for op in history
        if op.kind == CONFIG_SET and op.call <= led_at and op.ret >= killed_at
    ]
    return [*history, *resends]


def test_sigkill_of_the_leader_under_admin_load_loses_no_acknowledged_change_and_stays_linearizable(
    zk_client: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    seed_small_cluster(zk_client)
    seed = random.SystemRandom().randrange(1, 2**31)
    with voter_processes(zk_connect, tmp_path) as quorum:
        old = quorum.start().leader()
        assert _create_direct(old.listen_port, CONFIG_TOPIC) == ErrorCode.none
        controllers = [("127.0.0.1", bridge.listen_port) for bridge in quorum.bridges.values()]
        with running_shim(*controllers) as shim:
            load = AdminLoad(f"127.0.0.1:{shim.port}", seed)
            # The register's first value, acknowledged before anything else happens.
            assert load.set_config(load.admin(), "setup", load.next_value())
            load.start()
            try:
                time.sleep(2.0)
                killed_at = time.monotonic()  # the recorder's clock
                old.kill()
                new = quorum.leader(excluding=old.node_id)
                led_at = time.monotonic()
                settled = len(load.recorder.history())
                deadline = time.monotonic() + 20
                while len(load.recorder.history()) < settled + 20 and time.monotonic() < deadline:
                    time.sleep(0.1)  # acknowledged operations under the new leader too
            finally:
                load.stop()
            final_admin = load.admin()
            listed = load.list_topics(final_admin, "final")
            load.read_config(final_admin, "final")
        history = load.recorder.history()
        context = f"seed {seed}; old leader {old.node_id}, new leader {new.node_id}; {len(history)} operations"
        print(context)
        outcomes = [op.outcome.value for op in history]
        assert outcomes.count("ok") > 20, context
        for model in (ConfigRegisterModel(), TopicsModel()):
            kinds = (CONFIG_SET, CONFIG_READ) if isinstance(model, ConfigRegisterModel) else (TOPIC_CREATE, TOPIC_LIST)
            verdict = check([op for op in with_resends(history, killed_at, led_at) if op.kind in kinds], model)
            assert verdict.ok, f"{context}\n{verdict}"

        # Every acknowledged topic is in ZooKeeper, and ZooKeeper holds what the last read saw.
        assert listed is not None, context
        in_zk = {name for name in _zk_topics(zk_client) if name.startswith(TOPIC_PREFIX)}
        assert load.acknowledged_topics <= in_zk, (context, sorted(load.acknowledged_topics - in_zk))
        assert in_zk == listed, context
        final_read = history[-1]
        assert final_read.kind == CONFIG_READ and final_read.outcome.value == "ok", (context, final_read)
        zk_config, _ = zk_client.get(f"/config/topics/{CONFIG_TOPIC}")
        assert f'"{CONFIG_KEY}":"{final_read.output}"' in zk_config.decode().replace(" ", ""), zk_config

        # Both surviving logs hold the same records, and their images what ZooKeeper holds.
        survivors = [node for node in quorum.bridges if node != old.node_id]
        quorum.wait_caught_up(new, survivors)
        _stop_all(quorum, new.node_id)
        entries = {node: log_entries(quorum.bridges[node].metadata_dir) for node in survivors}
        assert entries[survivors[0]] == entries[survivors[1]], context
        for node in survivors:
            image, _report = load_image(quorum.bridges[node].metadata_dir)
            assert {n for n in image.topics_by_name if n.startswith(TOPIC_PREFIX)} == in_zk, (context, node)
            assert image.configs[(2, CONFIG_TOPIC)][CONFIG_KEY] == final_read.output, (context, node)


def test_a_leader_cut_off_from_the_other_voters_resigns_writes_nothing_more_and_rejoins_truncated(
    zk_client: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    seed_small_cluster(zk_client)
    with voter_processes(zk_connect, tmp_path) as quorum:
        old = quorum.start().leader()
        old_epoch = quorum.wait_for_raft(old.node_id, lambda raft: raft["role"] == "leader", "leading")["raft"]["epoch"]
        assert _create_direct(old.listen_port, "before-cut") == ErrorCode.none
        quorum.isolate(old.node_id)
        # A write sent to the cut-off leader: it may append it, never commit it, never write it to ZooKeeper.
        answer: dict[str, Any] = {}

        def write_to_old_leader() -> None:
            try:
                answer["code"] = _create_direct(old.listen_port, "after-cut", timeout=15.0)
            except Exception as exc:
                answer["error"] = exc

        writer = threading.Thread(target=write_to_old_leader)
        writer.start()
        quorum.wait_for_raft(
            old.node_id, lambda raft: raft["role"] != "leader", "the cut-off leader resigning", timeout=15.0
        )
        # Its driver steps down with it: no more DUAL_WRITE (it took 10 s, the watchers' grace, before).
        _wait_for_state_not(old, "DUAL_WRITE", timeout=6.0)
        new = quorum.leader(excluding=old.node_id)
        writer.join(30)
        assert answer.get("code", ErrorCode.not_controller) == ErrorCode.not_controller, answer
        assert (quorum.bridges[old.node_id].status() or {}).get("state") != "DUAL_WRITE"
        assert _create_direct(new.listen_port, "during-cut") == ErrorCode.none
        assert "after-cut" not in _zk_topics(zk_client)

        quorum.heal()
        # Its candidacies while cut off raised its epoch (Kafka 3.9 has no pre-vote): rejoining may bring an
        # election, which its log (with the uncommitted tail of its old epoch) cannot win.
        new = _leader_followed_by(quorum, old.node_id)
        assert _create_direct(new.listen_port, "after-heal") == ErrorCode.none
        quorum.wait_caught_up(new, list(quorum.bridges))
        new_epoch = quorum.wait_for_raft(new.node_id, lambda raft: raft["role"] == "leader", "leading")["raft"]["epoch"]
        assert new_epoch > old_epoch
        topics = _zk_topics(zk_client)
        assert {"before-cut", "during-cut", "after-heal"} <= topics and "after-cut" not in topics
        _stop_all(quorum, new.node_id)
    entries = {node: log_entries(bridge.metadata_dir) for node, bridge in quorum.bridges.items()}
    assert entries[old.node_id] == entries[new.node_id]
    image, _report = load_image(quorum.bridges[old.node_id].metadata_dir)
    assert "after-cut" not in image.topics_by_name and "during-cut" in image.topics_by_name
    old_log = quorum.bridges[old.node_id].log_text()
    # It resigned on its own: by check quorum (3 s after the cut), or fenced by the new leader's claim of
    # ZooKeeper (its 2 s fetch timeout plus an election), whichever came first.
    assert "event=raft_check_quorum_failed" in old_log or "event=fenced" in old_log
    assert "event=raft_truncated" in old_log  # and dropped the uncommitted tail of its epoch


def test_a_follower_that_was_stopped_catches_up_with_what_the_others_committed(
    zk_client: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    seed_small_cluster(zk_client)
    with voter_processes(zk_connect, tmp_path) as quorum:
        leader = quorum.start().leader()
        behind = next(node for node in quorum.bridges if node != leader.node_id)
        quorum.wait_caught_up(leader, list(quorum.bridges))
        assert quorum.bridges[behind].terminate() == 0
        for index in range(20):
            assert _create_direct(leader.listen_port, f"while-away-{index}") == ErrorCode.none
        quorum.bridges[behind].start()
        quorum.wait_for_raft(
            behind, lambda raft: raft["role"] == "follower" and raft["leader_id"] == leader.node_id, "following"
        )
        quorum.wait_caught_up(leader, list(quorum.bridges))
        _stop_all(quorum, leader.node_id)
    entries = {node: log_entries(bridge.metadata_dir) for node, bridge in quorum.bridges.items()}
    assert entries[behind] == entries[leader.node_id]
    assert all(entries[node] == entries[leader.node_id] for node in entries)
    image, _report = load_image(quorum.bridges[behind].metadata_dir)
    assert {f"while-away-{index}" for index in range(20)} <= set(image.topics_by_name)
