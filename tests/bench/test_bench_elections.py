"""A tiny run of bench/bench_elections.py, so the benchmark cannot rot unnoticed.

No timing is asserted: only that the fence happened, ZooKeeper ended equal to the log, and the result reads right.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from bench import bench_elections
from bench.generate_cluster import ClusterSpec, GeneratedCluster
from migrate.zk.live import ZkConnectOptions

pytestmark = pytest.mark.zookeeper


def test_tiny_benchmark_run_fences_the_broker_and_reports_every_figure() -> None:
    result = bench_elections.run(6, 4, multi_ops=10)

    cluster = result["cluster"]
    assert cluster["partitions"] == 24 and cluster["brokers"] == 3
    assert 0 < cluster["victim_leads"] <= cluster["partitions_changed"] <= 24
    # Every changed partition's record, then the fence itself.
    assert result["fence_records"] == cluster["partitions_changed"] + 1
    assert result["victim_fenced_in_image"] is True
    assert result["zk_mismatches"] == 0
    for floor in (result["floor_before"], result["floor_after"]):
        assert floor["znodes"] == cluster["partitions_changed"]
        assert floor["multis"] == -(-cluster["partitions_changed"] // 10)
    assert 0 <= result["fence_to_durable_s"] <= result["fence_to_zookeeper_s"]
    floor = max(min(result["floor_before"]["seconds"], result["floor_after"]["seconds"]), 1e-4)
    assert result["ratios"]["zookeeper_over_floor"] == pytest.approx(
        result["fence_to_zookeeper_s"] / floor, rel=0.05, abs=0.01
    )
    json.dumps(result)

    assert 0 <= result["start_to_dual_write_without_broker_wait_s"] <= result["start_to_dual_write_s"]
    assert "ZK_MIGRATION" in result["load_phases_s"]

    text = bench_elections.report(result)
    assert len(text.splitlines()) == 4, text
    assert text.startswith("initial load to DUAL_WRITE: ") and "without WAIT_FOR_BROKERS" in text, text
    assert f"{result['ratios']['zookeeper_over_floor']}x" in text, text


def test_brokers_hold_their_own_zookeeper_registrations_once_the_snapshots_sessions_expired(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At 200,000 partitions the generated snapshot's broker sessions expired before the bridge waited for
    brokers, and it waited forever for a broker under /brokers/ids: here they expire before the bridge starts."""
    generate, floor_write = bench_elections.generate, bench_elections.floor_write
    expired: list[bool] = []

    def short_sessions(spec: ClusterSpec, chroot: str) -> GeneratedCluster:
        cluster = generate(spec, chroot)
        cluster.sessions = dict.fromkeys(cluster.sessions, 1)  # expire at the server's first tick
        return cluster

    def floor_once_the_sessions_expired(zk_connect: str, paths: list[str], multi_ops: int) -> dict[str, Any]:
        if not expired:
            client = ZkConnectOptions(connect=zk_connect).kazoo_client()
            client.start(timeout=30)
            try:
                deadline = time.monotonic() + 60
                while client.get_children("/brokers/ids") and time.monotonic() < deadline:
                    time.sleep(0.1)
                expired.append(not client.get_children("/brokers/ids"))
            finally:
                client.stop()
                client.close()
        return floor_write(zk_connect, paths, multi_ops)

    monkeypatch.setattr(bench_elections, "generate", short_sessions)
    monkeypatch.setattr(bench_elections, "floor_write", floor_once_the_sessions_expired)
    monkeypatch.setattr(bench_elections, "DUAL_WRITE_TIMEOUT_S", 60)

    result = bench_elections.run(6, 4, multi_ops=10)

    assert expired == [True]
    assert result["victim_fenced_in_image"] is True
    assert result["zk_mismatches"] == 0
    assert result["broker_errors"] == []
