"""bridge.metrics: Prometheus text and /status JSON over real HTTP, with Kafka's migration metric meanings."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from bridge.api import DriverState
from bridge.metrics import BridgeMetrics, BridgeStatus, StatusServer
from migrate.errors import InvalidRequestError


def fetch(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            return reply.status, reply.headers["Content-Type"], reply.read()
    except urllib.error.HTTPError as err:
        return err.code, err.headers["Content-Type"], err.read()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a Prometheus exposition, keyed by (name, sorted labels)."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


@pytest.fixture
def metrics() -> BridgeMetrics:
    return BridgeMetrics(node_id=3000)


@pytest.fixture
def server(metrics: BridgeMetrics) -> Iterator[StatusServer]:
    with StatusServer(metrics, "127.0.0.1", 0) as srv:
        yield srv


def scrape(server: StatusServer) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, content_type, body = fetch(server.url + "/metrics")
    assert status == 200
    assert content_type.startswith("text/plain")
    return samples(body.decode())


def test_fresh_bridge_reports_uninitialized_and_no_lag(server: StatusServer) -> None:
    s = scrape(server)
    assert s[("zk2kraft_driver_state", (("state", "UNINITIALIZED"),))] == 1
    assert s[("zk2kraft_driver_state", (("state", "DUAL_WRITE"),))] == 0
    assert s[("zk2kraft_zk_migration_state", ())] == 0
    assert s[("zk2kraft_zk_write_behind_lag", ())] == 0
    assert s[("zk2kraft_fenced", ())] == 0
    assert s[("zk2kraft_bridge_info", (("node_id", "3000"),))] == 1
    # Every state has a series, so dashboards can show a state as 0 before it is ever entered.
    assert {labels[0][1] for name, labels in s if name == "zk2kraft_driver_state"} == {
        state.name for state in DriverState
    }


def test_driver_progress_shows_in_metrics_and_status(metrics: BridgeMetrics, server: StatusServer) -> None:
    metrics.set_state(DriverState.BECOME_CONTROLLER)
    metrics.set_leadership(leader_epoch=7, zk_controller_epoch=4)
    metrics.set_zk_migration_state(1)
    metrics.set_offsets(log_end_offset=120, durable_offset=118, zk_offset=100)
    # Before dual-write Kafka reports no lag, whatever the offsets say.
    assert scrape(server)[("zk2kraft_zk_write_behind_lag", ())] == 0
    metrics.set_state(DriverState.DUAL_WRITE)
    s = scrape(server)
    assert s[("zk2kraft_driver_state", (("state", "DUAL_WRITE"),))] == 1
    assert s[("zk2kraft_driver_state", (("state", "BECOME_CONTROLLER"),))] == 0
    assert s[("zk2kraft_zk_migration_state", ())] == 1
    assert s[("zk2kraft_log_end_offset", ())] == 120
    assert s[("zk2kraft_durable_offset", ())] == 118
    assert s[("zk2kraft_zk_metadata_offset", ())] == 100
    assert s[("zk2kraft_zk_write_behind_lag", ())] == 18  # committed offset minus /migration's
    assert s[("zk2kraft_leader_epoch", ())] == 7

    status, content_type, body = fetch(server.url + "/status")
    assert status == 200 and content_type == "application/json"
    doc = BridgeStatus.model_validate_json(body)
    assert doc.node_id == 3000
    assert doc.state == "DUAL_WRITE"
    assert doc.migration_state == "MIGRATION"
    assert (doc.leader_epoch, doc.zk_controller_epoch) == (7, 4)
    assert (doc.log_end_offset, doc.durable_offset, doc.zk_metadata_offset) == (120, 118, 100)
    assert doc.zk_write_behind_lag == 18
    assert doc.fenced is False

    metrics.set_offsets(zk_offset=118)
    assert scrape(server)[("zk2kraft_zk_write_behind_lag", ())] == 0


def test_fenced_controller_reports_fenced_and_stops_counting_lag(
    metrics: BridgeMetrics, server: StatusServer
) -> None:
    metrics.set_state(DriverState.DUAL_WRITE)
    metrics.set_offsets(durable_offset=50, zk_offset=40)
    metrics.set_fenced()
    metrics.set_last_error("FENCED: /migration version changed (another KRaft controller writes)")
    s = scrape(server)
    assert s[("zk2kraft_fenced", ())] == 1
    assert s[("zk2kraft_zk_write_behind_lag", ())] == 0
    doc = BridgeStatus.model_validate_json(fetch(server.url + "/status")[2])
    assert doc.fenced is True
    assert doc.last_error is not None and "FENCED" in doc.last_error


def test_requests_are_counted_by_api_and_error(metrics: BridgeMetrics, server: StatusServer) -> None:
    metrics.observe_request(19, 0, 0.004)  # CreateTopics by api key
    metrics.observe_request("CreateTopics", 36, 0.002)
    metrics.observe_request("CreateTopics", 36, 0.003)
    metrics.observe_request(44, 0, 0.001)  # IncrementalAlterConfigs
    metrics.observe_request("AlterPartition", 9999, 0.001)  # a code kio does not know
    s = scrape(server)
    assert (
        s[("zk2kraft_requests_total", (("api", "CreateTopics"), ("error", "NONE"), ("error_code", "0")))] == 1
    )
    key = (
        "zk2kraft_requests_total",
        (("api", "CreateTopics"), ("error", "TOPIC_ALREADY_EXISTS"), ("error_code", "36")),
    )
    assert s[key] == 2
    assert (
        s[
            (
                "zk2kraft_requests_total",
                (("api", "IncrementalAlterConfigs"), ("error", "NONE"), ("error_code", "0")),
            )
        ]
        == 1
    )
    assert s[
        (
            "zk2kraft_requests_total",
            (("api", "AlterPartition"), ("error", "ERROR_9999"), ("error_code", "9999")),
        )
    ]
    assert s[("zk2kraft_request_latency_seconds_count", (("api", "CreateTopics"),))] == 3
    assert s[("zk2kraft_request_latency_seconds_sum", (("api", "CreateTopics"),))] == pytest.approx(0.009)
    assert s[("zk2kraft_request_latency_seconds_bucket", (("api", "CreateTopics"), ("le", "0.0025")))] == 1


def test_zk_write_times_are_milliseconds_with_op_counts(metrics: BridgeMetrics, server: StatusServer) -> None:
    metrics.observe_zk_write("snapshot", 1.5, {"CreateTopic": 2, "UpdateBrokerConfig": 1})
    metrics.observe_zk_write("delta", 0.003, {"UpdateConfig": 1})
    metrics.observe_zk_write("delta", -0.5)  # a clock step backwards is not a negative duration
    s = scrape(server)
    assert s[("zk2kraft_zk_write_snapshot_time_ms_count", ())] == 1
    assert s[("zk2kraft_zk_write_snapshot_time_ms_sum", ())] == pytest.approx(1500)
    assert s[("zk2kraft_zk_write_delta_time_ms_count", ())] == 2
    assert s[("zk2kraft_zk_write_delta_time_ms_sum", ())] == pytest.approx(3)
    assert s[("zk2kraft_zk_operations_total", (("op_type", "CreateTopic"),))] == 2
    assert s[("zk2kraft_zk_operations_total", (("op_type", "UpdateConfig"),))] == 1
    with pytest.raises(InvalidRequestError, match="snapshot"):
        metrics.observe_zk_write("full", 1.0)


def test_foreign_writes_counted_by_mode_and_kind(server: StatusServer) -> None:
    metrics = server.metrics
    metrics.observe_foreign_writes(["changed", "changed", "created"])
    metrics.observe_foreign_writes(["deleted"], mode="revert")
    s = scrape(server)
    assert s[("zk2kraft_foreign_zk_writes_total", (("kind", "changed"), ("mode", "report")))] == 2
    assert s[("zk2kraft_foreign_zk_writes_total", (("kind", "created"), ("mode", "report")))] == 1
    assert s[("zk2kraft_foreign_zk_writes_total", (("kind", "deleted"), ("mode", "report")))] == 0
    assert s[("zk2kraft_foreign_zk_writes_total", (("kind", "deleted"), ("mode", "revert")))] == 1
    assert BridgeStatus.model_validate_json(fetch(server.url + "/status")[2]).foreign_zk_writes == 4


def test_unknown_paths_are_404_and_query_strings_ignored(server: StatusServer) -> None:
    status, _, body = fetch(server.url + "/nope")
    assert status == 404
    assert "/metrics" in json.loads(body)["error"]
    assert fetch(server.url + "/")[0] == 404
    assert fetch(server.url + "/metrics?name[]=zk2kraft_fenced")[0] == 200


def test_driver_supplied_status_is_validated(metrics: BridgeMetrics) -> None:
    calls = []

    def good() -> dict[str, object]:
        calls.append(1)
        return {"node_id": 1, "state": "ZK_MIGRATION", "migration_state": "PRE_MIGRATION", "leader_epoch": 2}

    with StatusServer(metrics, status=good) as srv:
        doc = BridgeStatus.model_validate_json(fetch(srv.url + "/status")[2])
        assert (doc.state, doc.leader_epoch, doc.durable_offset) == ("ZK_MIGRATION", 2, -1)
        assert calls == [1]

    def broken() -> dict[str, object]:
        return {"node_id": "not a number", "state": "DUAL_WRITE", "migration_state": "MIGRATION"}

    with StatusServer(metrics, status=broken) as srv:
        status, _, body = fetch(srv.url + "/status")
        assert status == 500
        assert "node_id" in json.loads(body)["error"]
        # The server survives a failing status source.
        assert fetch(srv.url + "/metrics")[0] == 200


def test_stop_closes_the_port_and_two_bridges_do_not_share_metrics() -> None:
    a, b = BridgeMetrics(node_id=1), BridgeMetrics(node_id=2)
    a.set_state(DriverState.DUAL_WRITE)
    srv_a, srv_b = StatusServer(a).start(), StatusServer(b).start()
    try:
        assert scrape(srv_a)[("zk2kraft_driver_state", (("state", "DUAL_WRITE"),))] == 1
        assert scrape(srv_b)[("zk2kraft_driver_state", (("state", "DUAL_WRITE"),))] == 0
    finally:
        srv_b.stop()
    url = srv_a.url
    srv_a.stop()
    srv_a.stop()  # idempotent
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url + "/metrics", timeout=5)
    with pytest.raises(RuntimeError):
        _ = srv_a.port


def test_keep_alive_client_gets_several_answers(server: StatusServer) -> None:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        for path in ("/metrics", "/status", "/missing", "/status"):
            conn.request("GET", path)
            reply = conn.getresponse()
            reply.read()
            assert reply.status == (404 if path == "/missing" else 200)
    finally:
        conn.close()
