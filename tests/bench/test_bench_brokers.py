"""A tiny run of bench/bench_brokers.py on the shared test ZooKeeper, so the benchmark cannot rot unnoticed.

No timing is asserted: only that both phases ran, every broker stayed unfenced and the report reads right.
"""

from __future__ import annotations

import json

import pytest

from bench import bench_brokers

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow]


def test_tiny_benchmark_run_measures_both_phases_and_fences_nobody(zk_connect: str) -> None:
    result = bench_brokers.run(8, 2, seconds=1.5, interval_s=0.5, zk_connect=zk_connect, topics=3)

    assert result["brokers"] == 8
    # Nobody was wrongly fenced, the bridge agrees, and no broker saw an error after registering.
    assert result["wrongly_fenced"] == 0
    assert result["fenced_in_status_at_end"] == 0
    assert result["registered_in_status_at_end"] == 8
    assert result["state_at_end"] == "DUAL_WRITE"
    assert result["broker_errors"] == []
    for name in ("brokers_only", "with_admin_load"):
        phase = result[name]
        assert phase["heartbeats"]["count"] > 0 and phase["floor_api_versions"]["count"] > 0
        assert phase["heartbeat_p99_over_floor_p99"] == pytest.approx(
            phase["heartbeats"]["p99_ms"] / phase["floor_api_versions"]["p99_ms"], rel=0.05, abs=0.01
        )
    assert "admin" not in result["brokers_only"]
    admin = result["with_admin_load"]["admin"]
    assert admin["clients"] == 2 and admin["changes"] > 0
    json.dumps(result)  # printable as the JSON result

    text = bench_brokers.report(result)
    assert len(text.splitlines()) == 4, text
    assert f"p99 under admin load {result['with_admin_load']['heartbeats']['p99_ms']} ms" in text, text
    assert "0 wrongly fenced" in text, text
