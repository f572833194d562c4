"""The hand-off checks on the directory a bridge process leaves when it is SIGKILLed while clients write."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from tests.support.bridge_process import ChangeStream, bridge_process, bring_up, seed_small_cluster
from tests.support.handoff import failed
from validators.handoff import directory_checks, handoff_check

pytestmark = [pytest.mark.zookeeper]

NODE_ID = 3000
CLIENTS = 2


def test_a_sigkilled_bridges_directory_is_one_kafka_would_start_from(
    zk_client: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    seed_small_cluster(zk_client)
    metadata_dir = tmp_path / "meta"
    with bridge_process(zk_connect=zk_connect, metadata_dir=metadata_dir, node_id=NODE_ID,
                        log_path=tmp_path / "bridge.log") as bridge:  # fmt: skip
        bring_up(bridge, CLIENTS)
        stream = ChangeStream(bridge.listen_port, CLIENTS).start()
        deadline = time.monotonic() + 30
        while stream.acknowledged_count() < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert stream.acknowledged_count() >= 20, bridge.log_tail()
        bridge.kill()  # mid-write: no snapshot, no resignation, no hand-back
        stream.stop()

    _state, checks = directory_checks(metadata_dir, node_id=NODE_ID)
    verdicts = {c.id: c for c in checks}
    segments = verdicts.pop("log segments")
    # A kill leaves at worst a torn last batch, which Kafka's recovery drops; nothing else may be wrong.
    assert segments.verdict == "pass" or segments.kafka_would.startswith("truncates the log"), segments
    assert all(c.verdict == "pass" for c in verdicts.values()), {c.id: c.detail for c in verdicts.values()}
    assert verdicts["migration state"].verdict == "pass"  # the MIGRATION record survived

    report = handoff_check(metadata_dir, zk_client, node_id=NODE_ID)
    zk_failures = {
        k: v for k, v in failed(report).items() if k in ("/migration", "/controller", "cluster id")
    }
    assert not zk_failures, {k: (v.detail, v.kafka_would) for k, v in zk_failures.items()}
    migration = next(c for c in report.checks if c.id == "/migration")
    assert "resumes dual-write from /migration" in migration.kafka_would
