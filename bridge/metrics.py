"""Prometheus metrics and the `/metrics` + `/status` HTTP endpoint of the bridge controller.

Metric meanings follow Kafka 3.9's controller migration metrics (migration-protocol.md §10):
`zk2kraft_zk_migration_state` is KafkaController.ZkMigrationState, `zk2kraft_zk_write_behind_lag` is
ZkWriteBehindLag (last committed offset minus the offset in `/migration`; 0 when inactive or before the
first dual write), `zk2kraft_zk_write_snapshot_time_ms` / `..._delta_time_ms` are ZkWriteSnapshotTimeMs /
ZkWriteDeltaTimeMs. Everything lives on the metrics object's own CollectorRegistry, so several bridges
(tests) can run in one process.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kio.schema.errors import ErrorCode
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, ConfigDict, Field

from bridge.api import DriverState
from bridge.kafka.listener import bind_refusal
from bridge.kafka.protocol import api_name
from migrate.errors import InvalidRequestError, UnreachableError, Zk2KraftError
from migrate.kraft.migration_state import ZkMigrationState, zk_migration_state_name
from migrate.plan.status import BrokerChannelStatus, BrokersStatus

log = logging.getLogger(__name__)

PREFIX = "zk2kraft"
FOREIGN_WRITE_MODES = ("report", "revert", "import")
FOREIGN_WRITE_KINDS = ("created", "changed", "deleted")

# Dual-write states: Kafka's ZkWriteBehindLag is only meaningful once the driver may write deltas.
_DUAL_WRITE_STATES = frozenset({DriverState.KRAFT_CONTROLLER_TO_BROKER_COMM, DriverState.DUAL_WRITE})
_ACTIVE_STATES = frozenset(DriverState) - {DriverState.UNINITIALIZED, DriverState.INACTIVE}
# Kafka's histograms report milliseconds; the buckets span a single znode write to a million-partition sync.
_ZK_WRITE_MS_BUCKETS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000)
_REQUEST_SECONDS_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip


def error_name(error_code: int) -> str:
    """Kafka's upper-case error name (`TOPIC_ALREADY_EXISTS`), or `ERROR_<code>` for codes kio lacks."""
    try:
        return ErrorCode(error_code).name.upper()
    except ValueError:
        return f"ERROR_{error_code}"


class StuckWrite(BaseModel):
    """A dual write ZooKeeper refused: the operation, its failing request and how the retries go."""

    model_config = ConfigDict(extra="forbid")

    operation: str = Field(description="Kafka's op type and log line of the operation that did not land")
    request: str | None = Field(
        None, description="the failing ZooKeeper request, e.g. 'Create /kafka-acl/Topic/x'"
    )
    znode: str | None = Field(None, description="the znode of the failing request")
    error_code: str | None = Field(None, description="ZooKeeper's error code name, e.g. NONODE, NOAUTH")
    first_offset: int = Field(
        -1, description="first log offset ZooKeeper lacks (-1: only reverts of foreign writes)"
    )
    last_offset: int = Field(-1, description="last log offset of the write that failed")
    since_ms: int = Field(description="wall-clock time of the first failure (ms since the epoch)")
    attempts: int = Field(1, description="failed attempts so far (the dual write, then each repair)")
    next_retry_in_s: float | None = Field(None, description="seconds until the next repair attempt")
    error: str = Field(description="the full error")

    def line(self) -> str:
        """One line for logs and `zk2kraft status`."""
        what = f"{self.request}: {self.error_code}" if self.request else self.error
        retry = f", next retry in {self.next_retry_in_s:.1f} s" if self.next_retry_in_s is not None else ""
        lacks = (
            f"offsets {self.first_offset}..{self.last_offset} are not all in ZooKeeper"
            if self.first_offset >= 0
            else "reverts of foreign writes are not in ZooKeeper"
        )
        return f"{self.operation} failed ({what}); {lacks}; {self.attempts} attempt(s){retry}"


class RaftVoterStatus(BaseModel):
    """One voter as the leader sees it (DescribeQuorum's ReplicaState)."""

    model_config = ConfigDict(extra="forbid")

    id: int
    log_end_offset: int = Field(-1, description="the voter's log end offset as last fetched (-1 unknown)")
    last_fetch_ms_ago: int | None = Field(None, description="milliseconds since its last Fetch; null: never")
    caught_up: bool = Field(
        False, description="it fetched up to the leader's log end within the fetch timeout"
    )


class RaftStatus(BaseModel):
    """This replica's place in the Raft quorum (Kafka's QuorumState and LeaderState)."""

    model_config = ConfigDict(extra="forbid")

    role: str = Field(description="leader, follower, candidate, unattached, voted or resigned")
    leader_id: int | None = Field(None, description="the leader this replica knows of; null when none")
    epoch: int = Field(0, description="the current Raft epoch")
    high_watermark: int = Field(-1, description="the highest committed end offset this replica knows")
    voters: list[RaftVoterStatus] = Field(
        default_factory=list, description="every voter's progress; filled on the leader only"
    )
    zookeeper_copy: str = Field(
        "none",
        description="current: a copy of ZooKeeper is kept, so once elected this bridge re-reads only what changed; "
        "loading: it is still being read (elected now, it reads all of ZooKeeper); none: not kept (the leader)",
    )


class ProcessStatus(BaseModel):
    """Where this bridge runs: what `zk2kraft bridge stop` signals and what the hand-off check reads."""

    model_config = ConfigDict(extra="forbid")

    pid: int = Field(description="the bridge's process id on its host")
    metadata_dir: str = Field(description="--metadata-dir, the directory a Kafka controller takes over")
    zookeeper: str = Field(description="--zk, chroot included (credentials are never shown)")
    voters: str | None = Field(None, description="--voters as given; null for a bridge alone")


class BridgeStatus(BaseModel):
    """What `GET /status` answers: the driver's view of leadership, offsets and ZooKeeper lag."""

    model_config = ConfigDict(extra="forbid")

    node_id: int
    state: str = Field(description="driver state (Kafka's MigrationDriverState name)")
    migration_state: str = Field(description="ZkMigrationState of the image: NONE, MIGRATION, ...")
    leader_epoch: int = Field(-1, description="KRaft controller epoch this node leads with; -1 when not")
    zk_controller_epoch: int = Field(-1, description="/controller_epoch value claimed; -1 when not held")
    log_end_offset: int = Field(-1, description="offset of the last record appended to the metadata log")
    durable_offset: int = Field(-1, description="offset of the last fsynced (committed) record")
    zk_metadata_offset: int = Field(-1, description="kraftMetadataOffset recorded in /migration")
    zk_write_behind_lag: int = Field(0, description="records committed but not yet written to ZooKeeper")
    fenced: bool = False
    failed: str | None = Field(
        None,
        description="why this controller renounced (its metadata log could not take a change); it stops and "
        "exits non-zero, and serves nothing meanwhile",
    )
    foreign_zk_writes_mode: str = "report"
    foreign_zk_writes: int = Field(0, description="foreign ZooKeeper writes noticed since start")
    last_error: str | None = None
    stuck_write: StuckWrite | None = Field(
        None, description="the dual write ZooKeeper refuses, while it does; null once ZooKeeper has caught up"
    )
    brokers: BrokersStatus = BrokersStatus()
    raft: RaftStatus | None = Field(None, description="the Raft quorum as this replica sees it")
    process: ProcessStatus | None = Field(None, description="where the bridge runs; null outside a bridge process")
    broker_channel: BrokerChannelStatus = Field(
        default_factory=BrokerChannelStatus,
        description="LeaderAndIsr, UpdateMetadata and StopReplica sent to ZooKeeper-mode brokers, per broker",
    )


class BridgeMetrics:
    """The bridge's metrics on a private registry, with the setters the driver calls.

    Thread-safe: the listener, the driver and the foreign-write watcher may call it concurrently.
    `status()` builds a BridgeStatus from the last values set, so it can serve `/status` directly.
    """

    def __init__(self, node_id: int, *, foreign_writes_mode: str = "report") -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.node_id = node_id
        self.foreign_writes_mode = foreign_writes_mode
        self.process: ProcessStatus | None = None
        self._lock = threading.Lock()
        self._state = DriverState.UNINITIALIZED
        self._zk_migration_state = ZkMigrationState.NONE.value
        self._leader_epoch = -1
        self._zk_controller_epoch = -1
        self._log_end_offset = -1
        self._durable_offset = -1
        self._zk_offset = -1
        self._fenced = False
        self._failed: str | None = None
        self._foreign_total = 0
        self._last_error: str | None = None
        self._stuck_write: StuckWrite | None = None
        self._lag = 0
        self._brokers = BrokersStatus()
        self._raft: RaftStatus | None = None
        r = self.registry

        self.info = Gauge(
            f"{PREFIX}_bridge_info", "Constant 1, labelled with the node id", ["node_id"], registry=r
        )
        self.info.labels(node_id=str(node_id)).set(1)
        self.zk_migration_state = Gauge(
            f"{PREFIX}_zk_migration_state",
            "Kafka's ZkMigrationState of the image: 0 NONE, 1 MIGRATION, 2 PRE_MIGRATION, 3 POST_MIGRATION",
            registry=r,
        )
        self.driver_state = Gauge(
            f"{PREFIX}_driver_state",
            "1 for the migration driver's current state (Kafka's MigrationDriverState), 0 for the others",
            ["state"],
            registry=r,
        )
        self.zk_write_stuck = Gauge(
            f"{PREFIX}_zk_write_stuck",
            "1 while a dual write ZooKeeper refused is retried (/status stuck_write says which and why), else 0",
            registry=r,
        )
        self.zk_write_behind_lag = Gauge(
            f"{PREFIX}_zk_write_behind_lag",
            "Kafka's ZkWriteBehindLag: committed log offset minus the offset recorded in /migration",
            registry=r,
        )
        self.zk_write_snapshot_time_ms = Histogram(
            f"{PREFIX}_zk_write_snapshot_time_ms",
            "Kafka's ZkWriteSnapshotTimeMs: milliseconds spent reconciling a whole image into ZooKeeper",
            buckets=_ZK_WRITE_MS_BUCKETS,
            registry=r,
        )
        self.zk_write_delta_time_ms = Histogram(
            f"{PREFIX}_zk_write_delta_time_ms",
            "Kafka's ZkWriteDeltaTimeMs: milliseconds spent writing one metadata delta into ZooKeeper",
            buckets=_ZK_WRITE_MS_BUCKETS,
            registry=r,
        )
        self.zk_operations = Counter(
            f"{PREFIX}_zk_operations",
            "Dual-write ZooKeeper operations made, by Kafka's op type (CreateTopic, UpdateConfig, ...)",
            ["op_type"],
            registry=r,
        )
        self.log_end_offset = Gauge(
            f"{PREFIX}_log_end_offset", "Offset of the last record appended to the metadata log", registry=r
        )
        self.durable_offset = Gauge(
            f"{PREFIX}_durable_offset", "Offset of the last metadata record known to be fsynced", registry=r
        )
        self.zk_metadata_offset = Gauge(
            f"{PREFIX}_zk_metadata_offset", "kraftMetadataOffset recorded in the /migration znode", registry=r
        )
        self.leader_epoch = Gauge(
            f"{PREFIX}_leader_epoch", "KRaft controller epoch this node leads with (-1 when not)", registry=r
        )
        # Kafka's raft-metrics group (current-leader, current-epoch, high-watermark, commit-latency-*,
        # election-latency-*, fetch-records-rate), Prometheus-named.
        self.raft_current_leader = Gauge(
            f"{PREFIX}_raft_current_leader",
            "Kafka's current-leader: the known leader's id, -1 if none",
            registry=r,
        )
        self.raft_current_epoch = Gauge(
            f"{PREFIX}_raft_current_epoch", "Kafka's current-epoch: the current Raft epoch", registry=r
        )
        self.raft_high_watermark = Gauge(
            f"{PREFIX}_raft_high_watermark",
            "Kafka's high-watermark: the committed end offset known",
            registry=r,
        )
        self.raft_commit_latency_ms = Histogram(
            f"{PREFIX}_raft_commit_latency_ms",
            "Kafka's commit-latency: milliseconds from a leader's append to its commit by a majority",
            buckets=_ZK_WRITE_MS_BUCKETS,
            registry=r,
        )
        self.raft_election_latency_ms = Histogram(
            f"{PREFIX}_raft_election_latency_ms",
            "Kafka's election-latency: milliseconds from becoming candidate to becoming leader",
            buckets=_ZK_WRITE_MS_BUCKETS,
            registry=r,
        )
        self.raft_fetch_records = Counter(
            f"{PREFIX}_raft_fetch_records",
            "Records fetched from the leader (Kafka's fetch-records-rate is its rate)",
            registry=r,
        )
        self._request_series: dict[tuple[int | str, int], tuple[Any, Any]] = {}
        self.requests = Counter(
            f"{PREFIX}_requests",
            "Controller requests answered, by api and Kafka error code (and its name)",
            ["api", "error_code", "error"],
            registry=r,
        )
        self.request_latency = Histogram(
            f"{PREFIX}_request_latency_seconds",
            "Seconds from a request's arrival to its response (log append and fsync included)",
            ["api"],
            buckets=_REQUEST_SECONDS_BUCKETS,
            registry=r,
        )
        self.fenced = Gauge(
            f"{PREFIX}_fenced", "1 once another controller fenced this one's ZooKeeper writes", registry=r
        )
        self.failed = Gauge(
            f"{PREFIX}_controller_failed",
            "1 once this controller's metadata log could not take a change: it renounced and is stopping",
            registry=r,
        )
        self.foreign_zk_writes = Counter(
            f"{PREFIX}_foreign_zk_writes",
            "ZooKeeper changes made by someone other than this controller during dual-write",
            ["mode", "kind"],
            registry=r,
        )
        self.migrating_zk_brokers = Gauge(
            f"{PREFIX}_migrating_zk_broker_count",
            "Kafka's MigratingZkBrokerCount: registered brokers that are still ZooKeeper-mode brokers",
            registry=r,
        )
        self.unregistered_zk_brokers = Gauge(
            f"{PREFIX}_unregistered_zk_broker_count",
            "brokers in ZooKeeper's /brokers/ids not registered with this controller as migrating ZooKeeper "
            "brokers, once past WAIT_FOR_BROKERS (restarted without the migration flag?); /status names them",
            registry=r,
        )
        self.registered_brokers = Gauge(
            f"{PREFIX}_registered_broker_count", "brokers registered with this controller", registry=r
        )
        self.fenced_brokers = Gauge(
            f"{PREFIX}_fenced_broker_count",
            "Kafka's FencedBrokerCount: registered brokers that are fenced",
            registry=r,
        )
        self.controlled_shutdown_brokers = Gauge(
            f"{PREFIX}_controlled_shutdown_broker_count",
            "registered brokers in controlled shutdown",
            registry=r,
        )
        self.broker_queue_depth = Gauge(
            f"{PREFIX}_broker_channel_queue_depth",
            "Controller-to-broker requests waiting for a ZooKeeper-mode broker (the one in flight included)",
            ["broker"],
            registry=r,
        )
        self.broker_requests_sent = Counter(
            f"{PREFIX}_broker_channel_requests_sent",
            "LeaderAndIsr, UpdateMetadata and StopReplica requests sent to a broker (resends included)",
            ["broker", "api"],
            registry=r,
        )
        self.broker_requests_acknowledged = Counter(
            f"{PREFIX}_broker_channel_requests_acknowledged",
            "Controller-to-broker requests a broker answered (with or without an error)",
            ["broker", "api"],
            registry=r,
        )
        self.broker_last_sent = Gauge(
            f"{PREFIX}_broker_channel_last_sent_timestamp_seconds",
            "When the last controller-to-broker request was sent to a broker (seconds since the epoch)",
            ["broker"],
            registry=r,
        )
        self.broker_last_acknowledged = Gauge(
            f"{PREFIX}_broker_channel_last_acknowledged_timestamp_seconds",
            "When a broker last answered a controller-to-broker request (seconds since the epoch)",
            ["broker"],
            registry=r,
        )
        self.broker_request_errors = Counter(
            f"{PREFIX}_broker_channel_errors",
            "Answers carrying an error (top-level or per partition), by broker, api and Kafka error code; "
            "never resent",
            ["broker", "api", "error_code", "error"],
            registry=r,
        )
        self.broker_network_failures = Counter(
            f"{PREFIX}_broker_channel_network_failures",
            "Controller-to-broker sends that failed on the network (the request is resent after 100 ms, the wait "
            "doubling on each consecutive failure up to 1 s)",
            ["broker"],
            registry=r,
        )
        self.broker_unreachable = Gauge(
            f"{PREFIX}_broker_channel_unreachable_brokers",
            "Migrating unfenced ZooKeeper-mode brokers with no endpoint on the inter-broker listener: they get "
            "no LeaderAndIsr, UpdateMetadata or StopReplica",
            registry=r,
        )
        self.broker_full_syncs = Counter(
            f"{PREFIX}_broker_channel_full_syncs",
            "Full syncs (every partition) a broker has answered",
            ["broker"],
            registry=r,
        )
        for kind in FOREIGN_WRITE_KINDS:
            self.foreign_zk_writes.labels(mode=foreign_writes_mode, kind=kind)
        self.set_state(DriverState.UNINITIALIZED)
        self.set_zk_migration_state(ZkMigrationState.NONE.value)
        self.set_offsets(log_end_offset=-1, durable_offset=-1, zk_offset=-1)
        self.leader_epoch.set(-1)

    # ------------------------------------------------------------------ setters the driver calls

    def set_state(self, state: DriverState) -> None:
        with self._lock:
            self._state = state
            for s in DriverState:
                self.driver_state.labels(state=s.name).set(1 if s is state else 0)
            self._update_lag()

    def set_zk_migration_state(self, value: int) -> None:
        """The image's ZkMigrationStateRecord value (0 NONE, 1 MIGRATION, 2 PRE_MIGRATION, 3 POST_MIGRATION)."""
        with self._lock:
            self._zk_migration_state = value
            self.zk_migration_state.set(value)

    def set_leadership(self, leader_epoch: int, zk_controller_epoch: int = -1) -> None:
        with self._lock:
            self._leader_epoch = leader_epoch
            self._zk_controller_epoch = zk_controller_epoch
            self.leader_epoch.set(leader_epoch)

    def set_offsets(
        self,
        *,
        log_end_offset: int | None = None,
        durable_offset: int | None = None,
        zk_offset: int | None = None,
    ) -> None:
        """Update any of: last appended offset, last fsynced offset, offset recorded in `/migration`."""
        with self._lock:
            if log_end_offset is not None:
                self._log_end_offset = log_end_offset
                self.log_end_offset.set(log_end_offset)
            if durable_offset is not None:
                self._durable_offset = durable_offset
                self.durable_offset.set(durable_offset)
            if zk_offset is not None:
                self._zk_offset = zk_offset
                self.zk_metadata_offset.set(zk_offset)
            self._update_lag()

    def observe_request(self, api: int | str, error_code: int, seconds: float) -> None:
        """One answered request: `api` is the api key or Kafka's api name; `error_code` the top-level code."""
        series = self._request_series.get((api, error_code))
        if series is None:
            # Looked up once per api and code: labels() costs more than the count itself, on every request.
            name = api_name(api) if isinstance(api, int) else api
            series = (
                self.requests.labels(api=name, error_code=str(error_code), error=error_name(error_code)),
                self.request_latency.labels(api=name),
            )
            self._request_series[(api, error_code)] = series
        count, latency = series
        count.inc()
        latency.observe(max(seconds, 0.0))

    def observe_zk_write(self, kind: str, seconds: float, op_counts: Mapping[str, int] | None = None) -> None:
        """A finished ZooKeeper write: `kind` "snapshot" (full reconciliation) or "delta" (one change)."""
        if kind not in ("snapshot", "delta"):
            raise InvalidRequestError(f"ZooKeeper write kind must be 'snapshot' or 'delta', not {kind!r}")
        # Kafka 3.9 records a negative snapshot time (migration-protocol.md §13 #1); we never do.
        ms = max(seconds, 0.0) * 1000.0
        (self.zk_write_snapshot_time_ms if kind == "snapshot" else self.zk_write_delta_time_ms).observe(ms)
        for op_type, count in (op_counts or {}).items():
            self.zk_operations.labels(op_type=op_type).inc(count)

    def set_fenced(self, fenced: bool = True) -> None:
        with self._lock:
            self._fenced = fenced
            self.fenced.set(1 if fenced else 0)
            self._update_lag()

    def set_failed(self, reason: str) -> None:
        """The controller renounced: its log failed (`reason`); also the last error."""
        with self._lock:
            self._failed = reason
            self._last_error = reason
            self.failed.set(1)

    def observe_foreign_writes(self, kinds: Iterable[str], mode: str | None = None) -> None:
        """Count foreign ZooKeeper writes by kind (created, changed, deleted) under `mode`."""
        mode = mode or self.foreign_writes_mode
        with self._lock:
            for kind in kinds:
                self.foreign_zk_writes.labels(mode=mode, kind=kind).inc()
                self._foreign_total += 1

    def set_migrating_zk_brokers(self, count: int) -> None:
        self.migrating_zk_brokers.set(count)
        with self._lock:
            self._brokers = self._brokers.model_copy(update={"migrating_zk_brokers": count})

    def set_brokers(self, brokers: BrokersStatus) -> BrokersStatus:
        """The registered brokers' counts (and, while waiting for them, who is missing); returns what it
        replaces, so the one caller that changed a value can say so."""
        with self._lock:
            self.registered_brokers.set(brokers.registered)
            self.fenced_brokers.set(brokers.fenced)
            self.controlled_shutdown_brokers.set(brokers.in_controlled_shutdown)
            self.migrating_zk_brokers.set(brokers.migrating_zk_brokers)
            self.unregistered_zk_brokers.set(len(brokers.unregistered_zk_brokers))
            previous, self._brokers = self._brokers, brokers
        return previous

    def set_broker_queue_depth(self, broker_id: int, depth: int) -> None:
        """Requests waiting for a broker on the controller-to-broker channel (0 once it left the channel)."""
        self.broker_queue_depth.labels(broker=str(broker_id)).set(depth)

    def observe_broker_sent(self, broker_id: int, api: str, at_s: float) -> None:
        """A controller-to-broker request went out (`at_s`: seconds since the epoch)."""
        self.broker_requests_sent.labels(broker=str(broker_id), api=api).inc()
        self.broker_last_sent.labels(broker=str(broker_id)).set(at_s)

    def observe_broker_answer(
        self, broker_id: int, api: str, at_s: float, error_codes: Iterable[int]
    ) -> None:
        """A broker answered a controller-to-broker request; `error_codes`: the codes it carried (none: ok)."""
        broker = str(broker_id)
        self.broker_requests_acknowledged.labels(broker=broker, api=api).inc()
        self.broker_last_acknowledged.labels(broker=broker).set(at_s)
        for code in error_codes:
            self.broker_request_errors.labels(
                broker=broker, api=api, error_code=str(code), error=error_name(code)
            ).inc()

    def observe_broker_network_failure(self, broker_id: int) -> None:
        self.broker_network_failures.labels(broker=str(broker_id)).inc()

    def set_broker_unreachable(self, count: int) -> None:
        """Brokers outside the channel for want of an endpoint on the inter-broker listener."""
        self.broker_unreachable.set(count)

    def observe_broker_full_sync(self, broker_id: int) -> None:
        self.broker_full_syncs.labels(broker=str(broker_id)).inc()

    def set_raft(self, raft: RaftStatus) -> None:
        with self._lock:
            self._raft = raft
        self.raft_current_leader.set(-1 if raft.leader_id is None else raft.leader_id)
        self.raft_current_epoch.set(raft.epoch)
        self.raft_high_watermark.set(raft.high_watermark)

    def set_last_error(self, message: str | None) -> None:
        with self._lock:
            self._last_error = message

    def set_stuck_write(self, stuck: StuckWrite | None) -> None:
        with self._lock:
            self._stuck_write = stuck
            self.zk_write_stuck.set(0 if stuck is None else 1)

    @property
    def stuck_write(self) -> StuckWrite | None:
        with self._lock:
            return self._stuck_write

    # ------------------------------------------------------------------ reading back

    def _update_lag(self) -> None:
        # Kafka: 0 unless active and past the first dual write; else committed offset minus /migration's.
        active = self._state in _ACTIVE_STATES and not self._fenced
        if not active or self._state not in _DUAL_WRITE_STATES or self._zk_offset <= 0:
            lag = 0
        else:
            lag = max(self._durable_offset - self._zk_offset, 0)
        self._lag = lag
        self.zk_write_behind_lag.set(lag)

    @property
    def lag(self) -> int:
        """The current ZkWriteBehindLag value."""
        with self._lock:
            return self._lag

    def status(self) -> BridgeStatus:
        """The `/status` document from the values last set."""
        with self._lock:
            return BridgeStatus(
                node_id=self.node_id,
                state=self._state.name,
                migration_state=zk_migration_state_name(self._zk_migration_state),
                leader_epoch=self._leader_epoch,
                zk_controller_epoch=self._zk_controller_epoch,
                log_end_offset=self._log_end_offset,
                durable_offset=self._durable_offset,
                zk_metadata_offset=self._zk_offset,
                zk_write_behind_lag=self._lag,
                fenced=self._fenced,
                failed=self._failed,
                foreign_zk_writes_mode=self.foreign_writes_mode,
                foreign_zk_writes=self._foreign_total,
                last_error=self._last_error,
                stuck_write=self._stuck_write,
                brokers=self._brokers,
                raft=self._raft,
                process=self.process,
            )

    def exposition(self) -> bytes:
        """The registry in Prometheus text format."""
        return generate_latest(self.registry)


# ---------------------------------------------------------------------------------------------- HTTP


def status_url(url: str) -> str:
    """The `/status` address of a bridge given by its status endpoint or that address itself."""
    return url if url.rstrip("/").endswith("/status") else url.rstrip("/") + "/status"


def read_bridge_status(url: str, option: str) -> BridgeStatus:
    """GET a bridge's `/status` (validated); an error names the address and the option that gave it."""
    target = status_url(url)
    try:
        with urllib.request.urlopen(target, timeout=10) as reply:
            body = json.loads(reply.read())
    except urllib.error.URLError as e:
        if isinstance(e.reason, socket.gaierror):
            host = urllib.parse.urlsplit(target).hostname
            raise UnreachableError(
                f"cannot read the bridge status at {target}: the host {host!r} ({option}) could not be "
                f"resolved ({e.reason.strerror or e.reason})"
            ) from e
        raise UnreachableError(f"cannot read the bridge status at {target}: {e}") from e
    except OSError as e:
        raise UnreachableError(f"cannot read the bridge status at {target}: {e}") from e
    except ValueError as e:
        raise Zk2KraftError(f"the bridge status at {target} is not JSON: {e}") from e
    return BridgeStatus.model_validate(body)



StatusSource = Callable[[], BridgeStatus | Mapping[str, Any]]


class StatusServer:
    """`GET /metrics` (Prometheus text) and `GET /status` (BridgeStatus JSON) on HOST:PORT, in a thread.

    `status` defaults to `metrics.status`; a driver with more to say passes its own callable. Port 0 picks
    a free port; `.port` tells which once `start()` returned.
    """

    def __init__(
        self,
        metrics: BridgeMetrics,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        status: StatusSource | None = None,
    ) -> None:
        self.metrics = metrics
        self.host = host
        self.requested_port = port
        self.status_source: StatusSource = status or metrics.status
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("StatusServer is not started")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def bind(self, option: str = "--metrics") -> StatusServer:
        """Claim the address without serving yet, so a busy port is refused (naming `option`) before a
        caller changes anything."""
        if self._server is None:
            try:
                server = _Server((self.host, self.requested_port), _Handler)
            except OSError as exc:
                raise bind_refusal(option, self.host, self.requested_port, exc) from exc
            server.owner = self
            self._server = server
        return self

    def start(self) -> StatusServer:
        """Serve (binding first unless `bind` did)."""
        if self._thread is not None:
            return self
        self.bind()
        server = self._server
        assert server is not None
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.2}, name="bridge-status-http", daemon=True
        )
        self._thread.start()
        log.info("metrics and status served on %s (/metrics, /status)", self.url)
        return self

    def stop(self) -> None:
        """Stop serving, close the socket and wait for the serving thread."""
        server, thread = self._server, self._thread
        if server is None:
            return
        if thread is not None:  # shutdown() waits for serve_forever, which a bound-only server never ran
            server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> StatusServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def status_json(self) -> bytes:
        """The status document, validated against BridgeStatus."""
        value = self.status_source()
        status = value if isinstance(value, BridgeStatus) else BridgeStatus.model_validate(value)
        return status.model_dump_json().encode()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: StatusServer


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        owner = self.server.owner
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            self._send(HTTPStatus.OK, CONTENT_TYPE_LATEST, owner.metrics.exposition())
        elif path == "/status":
            try:
                body = owner.status_json()
            except Exception as exc:  # a broken status source must not kill the server
                log.exception("GET /status failed")
                error = json.dumps({"error": f"status unavailable: {exc}"}).encode()
                self._send(HTTPStatus.INTERNAL_SERVER_ERROR, "application/json", error)
                return
            self._send(HTTPStatus.OK, "application/json", body)
        else:
            body = json.dumps({"error": f"no such resource: {path}; try /metrics or /status"}).encode()
            self._send(HTTPStatus.NOT_FOUND, "application/json", body)

    def _send(self, status: HTTPStatus, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        # http.server writes every request to stderr; scrapes every few seconds belong at debug level.
        log.debug("%s %s", self.address_string(), format % args)
