"""A tiny run of bench/bench_bridge.py on the shared test ZooKeeper, so the benchmark cannot rot unnoticed.

No timing is asserted: only that every phase ran, every request succeeded and the result reads right.
"""

from __future__ import annotations

import json

import pytest
from kazoo.client import KazooClient

from bench import bench_bridge

pytestmark = pytest.mark.zookeeper


@pytest.mark.parametrize("in_process", [False, True], ids=["subprocess", "in-process"])
def test_tiny_benchmark_run_measures_every_phase(zk_connect: str, in_process: bool) -> None:
    result = bench_bridge.run(8, 2, in_process=in_process, zk_connect=zk_connect, topics=3)

    assert result["controller"].startswith("in-process" if in_process else "subprocess")
    assert result["cluster"] == {"topics": 3, "brokers": 6}
    assert result["floor"]["sum"]["count"] == 50
    for own in ("incremental_alter_configs", "create_topics"):
        assert result["own_floors"][own]["sum"]["count"] == 50
        # The ratio the targets are judged by is the one of the figures reported beside it.
        own_floor_p50 = result["own_floors"][own]["sum"]["p50_ms"]
        assert result["ratios"][f"{own}_p50_over_own_floor"] == pytest.approx(
            result[own]["p50_ms"] / own_floor_p50, rel=0.05, abs=0.01
        )
    assert result["zk_write_patterns"]["one_change_one_multi"]["count"] == 20
    assert result["zk_write_patterns"]["per_change_16_in_one_multi"]["count"] == 1
    assert result["incremental_alter_configs"]["count"] == 8
    assert result["create_topics"]["count"] == 5
    # The controller's own metrics saw exactly the measured requests, each with its ZooKeeper write.
    # (taken in turns, so the ZooKeeper writes counted are both kinds': one per request).
    assert result["incremental_alter_configs"]["controller"]["requests"] == 8
    assert result["create_topics"]["controller"]["requests"] == 5
    assert result["incremental_alter_configs"]["controller"]["zk_writes"] == 8 + 5
    assert result["incremental_alter_configs"]["with_kio_client"]["count"] == 2
    assert result["throughput"]["changes"] == 8 and result["throughput"]["clients"] == 2
    assert result["ratios"]["changes_per_s"] == result["throughput"]["changes_per_s"] > 0
    assert result["zookeeper_force_sync"] == "external"
    assert len(result["load_average_before"]) == 3 and len(result["load_average_after"]) == 3
    json.dumps(result)  # printable as the JSON result

    # One line per target, each carrying the figure it is judged by (not pinned to its wording).
    text = bench_bridge.report(result)
    assert len(text.splitlines()) == 6, text
    for own in ("incremental_alter_configs", "create_topics"):
        assert f"{result['ratios'][f'{own}_p50_over_own_floor']}x" in text, text
    assert f"{result['throughput']['changes_per_s']:,} config changes/s" in text, text

    # The changes really went through the bridge into ZooKeeper: the created topics exist there.
    client = KazooClient(hosts=zk_connect + bench_bridge.CHROOT)
    client.start(timeout=15)
    try:
        created = [t for t in client.get_children("/brokers/topics") if t.startswith("bench-")]
        assert len(created) == 5
        assert client.exists("/migration") is not None
    finally:
        client.stop()
        client.close()
