"""A tiny run of bench/bench_shim.py on the shared test ZooKeeper, so the benchmark cannot rot unnoticed.

No timing is asserted: only that every series ran, every change and every connection was answered, and the
result reads right.
"""

from __future__ import annotations

import json

import pytest

from bench import bench_shim

pytestmark = pytest.mark.zookeeper


def test_tiny_benchmark_run_measures_every_series(zk_connect: str) -> None:
    result = bench_shim.run(10, 20, zk_connect=zk_connect, topics=3)

    for series in (
        "envelope_to_controller", "kio_through_shim", "admin_client_through_shim",
        "api_versions_to_controller", "api_versions_to_shim",
    ):  # fmt: skip
        assert result[series]["count"] == 10, series
    capacity = result["capacity"]
    assert (capacity["connections"], capacity["answered"], capacity["errors"]) == (20, 20, [])
    assert capacity["metadata_answered_while_open"] is True
    assert set(result["ratios"]) == {
        "shim_added_p50_ms", "shim_added_p99_ms", "admin_client_added_p50_ms", "shim_p50_over_envelope"
    }  # fmt: skip
    assert len(result["load_average_before"]) == 3 and len(result["load_average_after"]) == 3
    json.dumps(result)  # printable as the JSON result

    lines = bench_shim.report(result).splitlines()
    assert [line.split(":")[0] for line in lines[:3]] == [
        "Envelope straight to the controller",
        "kio request through the shim",
        "AdminClient through the shim",
    ]
    assert lines[3].startswith("the shim adds ") and lines[4].startswith("ApiVersions (no work behind it)")
    assert lines[5].startswith("capacity: 20/20 ") and lines[6].startswith("load average ")
