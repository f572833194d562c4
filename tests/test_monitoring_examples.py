"""The monitoring examples (examples/monitoring/) use only metrics the bridge serves, so they cannot rot."""

from __future__ import annotations

import json
import re
from pathlib import Path

from bridge.api import DriverState
from bridge.metrics import BridgeMetrics

MONITORING = Path(__file__).resolve().parents[1] / "examples" / "monitoring"
METRIC = re.compile(r"\bzk2kraft_[a-z_]+")
_HISTOGRAM_SERIES = ("_bucket", "_sum", "_count")


def served_metrics() -> set[str]:
    """Every series name a bridge's /metrics can carry (histograms with their _bucket, _sum and _count)."""
    exposition = BridgeMetrics(node_id=3000).exposition().decode()
    names: set[str] = set()
    for line in exposition.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            names.add(name)
            if kind == "histogram":
                names.update(name + suffix for suffix in _HISTOGRAM_SERIES)
    return names


def dashboard_expressions() -> list[str]:
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def alert_expressions() -> list[str]:
    text = (MONITORING / "prometheus-alerts.yml").read_text()
    return [m.group(1) for m in re.finditer(r"^\s+expr:\s*(.+)$", text, re.M)]


def test_every_metric_the_dashboard_and_the_alerts_use_is_served() -> None:
    served = served_metrics()
    expressions = dashboard_expressions() + alert_expressions()
    assert len(alert_expressions()) >= 8 and len(dashboard_expressions()) >= 10
    used = {name for expr in expressions for name in METRIC.findall(expr)}
    assert used - served == set()
    # The migration's own states are Kafka's names, as the driver exports them.
    states = {m for expr in expressions for m in re.findall(r'state="([A-Z_]+)"', expr)}
    assert states and states <= {s.name for s in DriverState}


def test_the_dashboard_names_its_data_source_and_gives_each_panel_a_place() -> None:
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    assert all(panel["datasource"]["uid"] == "${datasource}" for panel in dashboard["panels"])
    assert all({"x", "y", "w", "h"} <= panel["gridPos"].keys() for panel in dashboard["panels"])
