"""A tiny run of bench/bench_handoff_check.py, so the benchmark cannot rot unnoticed (no timing asserted)."""

from __future__ import annotations

import json

import pytest

from bench import bench_handoff_check


def test_tiny_benchmark_run_checks_a_migrated_directory(capsys: pytest.CaptureFixture[str]) -> None:
    bench_handoff_check.main(["--topics", "3", "--partitions-per-topic", "4", "--runs", "1"])
    out = capsys.readouterr().out
    result = json.loads(out[: out.rindex("}") + 1])
    assert result["partitions"] == 12
    assert set(result["verdicts"].values()) == {"pass"}  # a freshly migrated directory is a controller's
    assert result["check_vs_baseline"] > 0 and result["meets_target"] is True
    assert "handoff check of 12 partitions" in out
