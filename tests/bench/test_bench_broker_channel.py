"""A tiny run of bench/bench_broker_channel.py, so the benchmark cannot rot unnoticed.

No timing is asserted: only that every phase happened as described (the stuck broker held one request while
the others got theirs, the full sync and its floor reached all three brokers) and the result reads right.
"""

from __future__ import annotations

import json

import pytest

from bench import bench_broker_channel

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow]


def test_tiny_benchmark_run_measures_both_phases_and_reports_every_figure() -> None:
    result = bench_broker_channel.run(4, 3, changes=3)

    assert result["cluster"] == {"partitions": 12, "brokers": 3}
    dual = result["dual_write"]
    # Each new topic (replicas on all three brokers) sends LeaderAndIsr and UpdateMetadata to each broker.
    assert dual["answered_by_brokers_1_2_while_stuck"] == [6, 6]
    assert dual["received_by_stuck_broker"] == 1  # one in flight, never answered
    assert dual["stuck_queue_depth"] == 6
    for kind in ("create_topics", "alter_configs"):
        assert dual[kind]["answering"]["count"] == dual[kind]["one_stuck"]["count"] == 3
    sync = result["full_sync"]
    assert sync["requests_per_broker"] == {b: [6, 4, 6] for b in (1, 2, 3)}  # UMR, FULL LISR, FULL UMR
    assert 0 < sync["first_request_received_s"] <= sync["acknowledged_s"]
    floor = result["floor"]
    assert (floor["brokers"], floor["requests"]) == ([1, 2, 3], 9) and floor["bytes"] > 0
    assert result["ratios"]["full_sync_over_floor"] == pytest.approx(
        sync["acknowledged_s"] / max(floor["total_s"], 1e-3), abs=0.2
    )
    json.dumps(result)

    text = bench_broker_channel.report(result)
    assert len(text.splitlines()) == 5, text
    assert f"{result['ratios']['full_sync_over_floor']}x the floor" in text, text
