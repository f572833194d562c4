"""A tiny run of bench/bench_propagation.py, so the benchmark cannot rot unnoticed.

No timing is asserted: only that the sync reached every broker, matched encode_request byte for byte, and
the result reads right.
"""

from __future__ import annotations

import json

import pytest

from bench import bench_propagation


def test_tiny_benchmark_run_builds_encodes_and_reports_every_figure() -> None:
    result = bench_propagation.run(6, 4, brokers=3, repeat=1)

    assert result["cluster"] == {"topics": 6, "partitions": 24, "brokers": 3, "migrating_brokers": 3}
    # Per broker: UpdateMetadata, FULL LeaderAndIsr (every broker hosts replicas), FULL UpdateMetadata.
    assert result["requests"] == {"UpdateMetadataRequestV8": 6, "LeaderAndIsrRequestV7": 3}
    assert result["mismatches"] == 0 and result["bytes"] > 0
    for key in ("sync_view_s", "build_s", "encode_s", "floor_s"):
        assert result[key] >= 0, key
    floor = max(result["floor_s"], 1e-6)
    assert result["ratios"]["build_and_encode_over_floor"] == pytest.approx(
        (result["build_s"] + result["encode_s"]) / floor,
        abs=0.1,  # figures rounded to 0.1 ms
    )
    json.dumps(result)

    text = bench_propagation.report(result)
    assert len(text.splitlines()) == 2, text
    assert f"{result['ratios']['build_and_encode_over_floor']}x the floor" in text, text
