"""A tiny run of bench/bench_stress.py, so the benchmark cannot rot unnoticed.

No timing is asserted and no verdict either (tests/bridge/test_concurrency_stress.py judges the invariants):
only that the run drove the controller, checked the log batch by batch, and the result reads right.
"""

from __future__ import annotations

import json

import pytest

from bench import bench_stress

pytestmark = pytest.mark.zookeeper


def test_tiny_benchmark_run_steps_checks_and_reports_every_figure() -> None:
    result = bench_stress.run([7], 5)

    (seed,) = result["seeds"]
    assert seed["seed"] == 7 and 1 <= seed["steps"] <= 5
    assert seed["requests"] >= seed["steps"] and seed["settle_checks"] >= seed["steps"]
    assert seed["batches_checked"] > 0 and seed["steps_per_s"] > 0
    assert sum(seed["answers"].values()) >= seed["requests"]
    assert len(seed["first_violation"]) == len(seed["broken"])
    json.dumps(result)

    text = bench_stress.report(result)
    assert text.startswith(f"seed 7: {seed['steps']} steps"), text
    assert "steps/s" in text and "invariants broken:" in text, text
