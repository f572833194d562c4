"""SIGKILL fault test: the bridge is killed at random moments, at least 20 times, while
four clients stream CreateTopics, IncrementalAlterConfigs and AlterClientQuotas at it, and restarted each
time on the same metadata dir and ZooKeeper. Afterwards every acknowledged change is in the log (and through
it in ZooKeeper), and ZooKeeper equals the log: reconciling it against the log's image plans no write."""

from __future__ import annotations

import os
import random
import resource
import signal
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kio.schema.errors import ErrorCode

from bridge.kafka.client import ConnectionClosedError, send_request_sync
from migrate.errors import EXIT_FAILED
from tests.support.bridge_process import (
    Change,
    ChangeStream,
    bridge_process,
    bring_up,
    check_acknowledged_and_converged,
    read_back,
    seed_small_cluster,
)
from tests.support.requests import create_topic

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow]

NODE_ID = 3000
CLIENTS = 4
KILLS = int(os.environ.get("ZK2KRAFT_FAULT_KILLS", "22"))
SEED = int(os.environ.get("ZK2KRAFT_FAULT_SEED", "0")) or random.SystemRandom().randrange(1, 2**31)


def test_sigkill_at_random_points_loses_no_acknowledged_change(
    zk_client: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    seed_small_cluster(zk_client)
    with bridge_process(
        zk_connect=zk_connect, metadata_dir=tmp_path / "meta", node_id=NODE_ID, log_path=tmp_path / "bridge.log"
    ) as bridge:
        bring_up(bridge, CLIENTS)
        stream = ChangeStream(bridge.listen_port, CLIENTS).start()
        kills = []
        try:
            for _ in range(KILLS):
                # Half the kills land in steady dual-write, the rest while starting: anywhere from the
                # process start on, or just after it serves (log recovery, claim, reconciliation).
                mode = rng.choices(["spawn", "serving", "dual-write"], [0.2, 0.3, 0.5])[0]
                if mode == "spawn":
                    delay = rng.uniform(0.0, 1.5)
                elif mode == "serving":
                    bridge.wait_for_status()
                    delay = rng.uniform(0.0, 0.15)
                else:
                    bridge.wait_for_state("DUAL_WRITE")
                    delay = rng.uniform(0.0, 0.4)
                time.sleep(delay)
                state = (bridge.status() or {}).get("state")
                assert bridge.running, f"bridge exited on its own (code {bridge.returncode})\n{bridge.log_tail()}"
                bridge.kill()
                assert bridge.returncode == -signal.SIGKILL, f"the kill did not land (exit {bridge.returncode})"
                kills.append((mode, round(delay, 3), state, stream.acknowledged_count()))
                bridge.start()
            bridge.wait_for_state("DUAL_WRITE")
            time.sleep(0.3)  # a last stretch of acknowledged changes after the final restart
        finally:
            outcomes = stream.stop()
        context = f"seed {SEED} (rerun with ZK2KRAFT_FAULT_SEED={SEED}); kills (mode, delay, state seen, acks so far): {kills}; {outcomes.summary()}"
        print(context)
        assert len(outcomes.acknowledged) > KILLS, context
        # A clean stop leaves the log closed and ZooKeeper as the last restart reconciled it.
        assert bridge.terminate() == 0, f"{context}\n{bridge.log_tail()}"
    readback = read_back(tmp_path / "meta", zk_connect)
    problems = check_acknowledged_and_converged(readback, outcomes)
    assert not problems, f"{context}\n" + "\n".join(problems[:30]) + f"\n{bridge.log_tail()}"
    # The check itself notices a lost change: pretend one more topic had been acknowledged.
    outcomes.acknowledged.append(Change("topic", "never-sent", 10**9, 0))
    assert check_acknowledged_and_converged(readback, outcomes) == [
        "acknowledged CreateTopics never-sent (seq 1000000000) is not in the log",
        "acknowledged CreateTopics never-sent (seq 1000000000) is not in ZooKeeper",
    ]


def test_a_full_disk_makes_the_bridge_renounce_with_exit_4_and_nothing_unacknowledged_in_zookeeper(
    zk_client: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    """`ulimit -f` on the running bridge: once its metadata log cannot grow, the change that hit the limit is
    answered NOT_CONTROLLER and never reaches ZooKeeper, /status says FAILED, and the process exits 4."""
    seed_small_cluster(zk_client)
    metadata_dir = tmp_path / "meta"
    with bridge_process(
        zk_connect=zk_connect, metadata_dir=metadata_dir, node_id=NODE_ID, log_path=tmp_path / "bridge.log",
    ) as bridge:  # fmt: skip
        bridge.start().wait_for_state("DUAL_WRITE")
        assert bridge.process is not None
        biggest = max(f.stat().st_size for f in [*metadata_dir.rglob("*.log"), tmp_path / "bridge.log"])
        limit = biggest + 64 * 1024
        resource.prlimit(bridge.process.pid, resource.RLIMIT_FSIZE, (limit, limit))
        created: list[str] = []
        refused: list[tuple[str, int]] = []
        for i in range(500):
            name = f"filler-{i}"
            try:
                answer = send_request_sync("127.0.0.1", bridge.listen_port, create_topic(name, 50))
            except ConnectionClosedError:
                # On a loaded machine the renouncing bridge may close before its 2 s of answering are over:
                # unanswered, not acknowledged (what follows still holds it out of ZooKeeper).
                refused.append((name, ErrorCode.not_controller))
                break
            code = int(answer.topics[0].error_code)
            if code != ErrorCode.none:
                refused.append((name, code))
                break
            created.append(name)
        assert refused and refused[0][1] == ErrorCode.not_controller, refused
        assert bridge.wait_exit(60) == EXIT_FAILED, bridge.log_tail()
        text = bridge.log_text()
        assert "event=renounced" in text and "File too large" in text
        topics = set(zk_client.get_children("/brokers/topics"))
        assert set(created) <= topics  # every acknowledged creation is in ZooKeeper
        assert refused[0][0] not in topics  # the refused one is not
