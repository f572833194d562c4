"""A tiny run of bench/bench_elections.py, so the benchmark cannot rot unnoticed.

No timing is asserted: only that the fence happened, ZooKeeper ended equal to the log, and the result reads right.
"""

from __future__ import annotations

import json

import pytest

from bench import bench_elections

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

    text = bench_elections.report(result)
    assert len(text.splitlines()) == 3, text
    assert f"{result['ratios']['zookeeper_over_floor']}x" in text, text
