"""Where a migration stands, from ZooKeeper (plus, when given, the bridge's /status and a metadata dir).

Phases (the `phase` field, stable): zookeeper, controllers-ready, migrating, dual-write, kraft-brokers,
finalized, reverted-incomplete. The finalize gate's conditions are computed here too
(migrate/plan/finalize.py adds the controllers' configs).
"""

from __future__ import annotations

import time
from typing import Literal

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from pydantic import BaseModel, ConfigDict, Field

from migrate.errors import ZnodeFormatError
from migrate.zk import paths
from migrate.zk.znodes.controller import decode_controller, decode_controller_epoch, decode_migration

PHASES = ("zookeeper", "controllers-ready", "migrating", "dual-write", "kraft-brokers", "finalized", "reverted-incomplete")


class ControllerInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: int
    kraft: bool
    kraft_controller_epoch: int | None
    persistent: bool


class MigrationInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kraft_controller_id: int
    kraft_controller_epoch: int
    kraft_metadata_offset: int
    kraft_metadata_epoch: int
    zk_version: int
    initial_migration_complete: bool


class BrokersStatus(BaseModel):
    """The brokers registered with the bridge, as its `/status` shows them (Kafka's ControllerMetadataMetrics).

    `migrating_zk_brokers` is Kafka's MigratingZkBrokerCount; `rehearsal` says ZooKeeper's /brokers/ids
    stand in for registrations (`--rehearsal`); `waiting_for`, while in WAIT_FOR_BROKERS, names the broker
    ids that have not registered as migrating ZooKeeper brokers yet; `unregistered_zk_brokers`, after that
    wait, names the brokers in /brokers/ids not registered or fenced for silence (restarted without the
    migration flag?).
    """

    model_config = ConfigDict(extra="forbid")

    registered: int = 0
    fenced: int = 0
    in_controlled_shutdown: int = 0
    migrating_zk_brokers: int = 0
    rehearsal: bool = False
    waiting_for: list[int] | None = None
    unregistered_zk_brokers: list[int] = Field(
        default_factory=list,
        description="broker ids in ZooKeeper's /brokers/ids that are not registered with the controller as "
        "migrating ZooKeeper brokers (Kafka's WAIT_FOR_BROKERS check), once past that wait, or whose registration "
        "was fenced for silence while the broker runs in ZooKeeper: a broker restarted "
        "without zookeeper.metadata.migration.enable=true gets no metadata from the controller",
    )


class RequestMark(BaseModel):
    """One controller-to-broker request: its api name and when (ms since the epoch)."""

    model_config = ConfigDict(extra="forbid")

    api: str
    at_ms: int


class ChannelBroker(BaseModel):
    """One ZooKeeper-mode broker the bridge sends LeaderAndIsr, UpdateMetadata and StopReplica to."""

    model_config = ConfigDict(extra="forbid")

    broker_id: int
    address: str = Field(description="host:port on the controller's inter-broker listener")
    queue_depth: int = Field(0, description="requests waiting, the one in flight included")
    connected: bool = False
    last_sent: RequestMark | None = None
    last_acknowledged: RequestMark | None = Field(None, description="the last request the broker answered")
    errors: dict[str, int] = Field(
        default_factory=dict, description="answers carrying an error, by Kafka error name (never resent)"
    )
    full_syncs_sent: int = Field(0, description="full syncs whose last request this broker answered")
    network_failures: int = Field(
        0,
        description="sends that failed on the network (each resent after 100 ms, the wait doubling on each "
        "consecutive failure up to 1 s)",
    )
    last_network_error: str | None = None
    failure_kind: Literal["network", "tls", "authentication", "settings"] | None = Field(
        None,
        description="what the last failed send met: the network, a refused TLS handshake, a refused SASL login, "
        "or no bridge settings for the endpoint's security protocol (the last three need an operator)",
    )
    retry_backoff_ms: int | None = Field(
        None, description="the wait before the next resend while failing (None: the last send got through)"
    )


class UnreachableBroker(BaseModel):
    """A migrating, unfenced ZooKeeper-mode broker the bridge sends nothing to: no endpoint on its listener."""

    model_config = ConfigDict(extra="forbid")

    broker_id: int
    listeners: list[str] = Field(default_factory=list, description="the listener names it registered")
    reason: str


class BrokerChannelStatus(BaseModel):
    """The controller-to-broker channel (Kafka's ControllerChannelManager) as the bridge's `/status` shows it."""

    model_config = ConfigDict(extra="forbid")

    active: bool = Field(default=False, description="sending: from KRAFT_CONTROLLER_TO_BROKER_COMM until fenced or stopped")
    full_syncs: int = Field(default=0, description="full syncs started since this bridge started")
    last_full_sync_brokers: int | None = Field(
        default=None,
        description="how many brokers the last full sync was queued for (0: it reached none; None: none yet)",
    )
    build_failures: int = Field(
        default=0, description="changes whose requests could not be built: the brokers miss them until a full sync"
    )
    brokers: list[ChannelBroker] = Field(default_factory=list)
    unreachable: list[UnreachableBroker] = Field(
        default_factory=list,
        description="migrating unfenced ZooKeeper-mode brokers outside the channel: no endpoint on the "
        "inter-broker listener, so they get no LeaderAndIsr, UpdateMetadata or StopReplica",
    )


class KraftView(BaseModel):
    """What the KRaft side says (the bridge's /status or a replayed metadata dir)."""

    model_config = ConfigDict(extra="forbid")

    source: str
    migration_state: str | None = None
    write_behind_lag: int | None = None
    committed_offset: int | None = None
    last_metadata_offset: int | None = None
    """The log's last record ZooKeeper must reflect (control and NoOp records need no dual write)."""
    kraft_brokers: list[int] | None = None
    migrating_zk_brokers: list[int] | None = None
    fenced_brokers: list[int] | None = None
    """Registered brokers the controller has fenced (a replayed metadata dir; the bridge gives a count)."""
    driver_state: str | None = None
    last_error: str | None = None
    failed: str | None = None
    """Why the bridge renounced (its metadata log could not take a change); it is stopping."""
    stuck_write: str | None = None
    """The dual write ZooKeeper refuses: operation, request, error code, attempts."""
    brokers: BrokersStatus | None = None
    """The brokers registered with the bridge (its `/status`)."""
    broker_channel: BrokerChannelStatus | None = None
    """The bridge's requests to ZooKeeper-mode brokers (its `/status`)."""
    quorum: str | None = None
    """The Raft quorum as the bridge sees it: its role, the leader, the epoch, each voter's progress."""


class Status(BaseModel):
    """`zk2kraft status --format json`."""

    model_config = ConfigDict(extra="forbid")

    phase: str = Field(description=" | ".join(PHASES))
    description: str
    controller: ControllerInfo | None
    controller_epoch: int | None
    controller_epoch_mtime_ms: int | None
    migration: MigrationInfo | None
    zk_brokers: list[int] = Field(description="brokers registered in /brokers/ids: still in ZooKeeper mode")
    migration_state: str | None = Field(None, description="ZkMigrationState from the KRaft side, when known")
    write_behind_lag: int | None = None
    kraft: list[KraftView] = Field(default_factory=list)
    checked_at_ms: int


def read_status(client: KazooClient, kraft: list[KraftView] | None = None, *, now_ms: int | None = None) -> Status:
    """Read /controller, /controller_epoch, /migration and /brokers/ids (client rooted at Kafka's chroot)."""
    controller = None
    try:
        data, stat = client.get(paths.CONTROLLER)
        c = decode_controller(paths.CONTROLLER, data)
        controller = ControllerInfo(
            id=c.broker_id,
            kraft=c.is_kraft_controller,
            kraft_controller_epoch=c.kraft_controller_epoch,
            persistent=stat.ephemeralOwner == 0,
        )
    except (NoNodeError, ZnodeFormatError):
        pass
    epoch = epoch_mtime = None
    try:
        data, stat = client.get(paths.CONTROLLER_EPOCH)
        epoch = decode_controller_epoch(paths.CONTROLLER_EPOCH, data).epoch
        epoch_mtime = stat.mtime
    except (NoNodeError, ZnodeFormatError):
        pass
    migration = None
    try:
        data, stat = client.get(paths.MIGRATION)
        m = decode_migration(paths.MIGRATION, data, zk_version=stat.version)
        migration = MigrationInfo(
            kraft_controller_id=m.kraft_controller_id,
            kraft_controller_epoch=m.kraft_controller_epoch,
            kraft_metadata_offset=m.kraft_metadata_offset,
            kraft_metadata_epoch=m.kraft_metadata_epoch,
            zk_version=m.zk_version,
            initial_migration_complete=m.initial_migration_complete,
        )
    except (NoNodeError, ZnodeFormatError):
        pass
    try:
        brokers = sorted(int(c) for c in client.get_children(paths.BROKER_IDS) if c.lstrip("-").isdigit())
    except NoNodeError:
        brokers = []
    views = kraft or []
    state = next((v.migration_state for v in views if v.migration_state), None)
    lag = next((v.write_behind_lag for v in views if v.write_behind_lag is not None), None)
    if state == "POST_MIGRATION":
        # Finalized: ZooKeeper is no longer written, so the log running ahead of /migration is no lag.
        lag = None
    elif lag is None and migration is not None:
        lag = next((found for v in views if (found := log_lag(v, migration.kraft_metadata_offset)) is not None), None)
    phase, description = name_phase(controller, migration, brokers, state, still_migrating(views))
    return Status(
        phase=phase,
        description=description,
        controller=controller,
        controller_epoch=epoch,
        controller_epoch_mtime_ms=epoch_mtime,
        migration=migration,
        zk_brokers=brokers,
        migration_state=state,
        write_behind_lag=lag,
        kraft=views,
        checked_at_ms=now_ms if now_ms is not None else int(time.time() * 1000),
    )


def log_lag(view: KraftView, migration_offset: int) -> int | None:
    """How many offsets of `view`'s metadata log ZooKeeper misses, against `/migration`'s offset (Kafka's
    ZkWriteBehindLag, counted to the last record a dual write reflects); None: not known from `view`."""
    if view.last_metadata_offset is None or migration_offset < 0:
        return None
    return max(view.last_metadata_offset - migration_offset, 0)


def still_migrating(views: list[KraftView]) -> tuple[int, str] | None:
    """How many brokers the KRaft side still has registered as migrating ZooKeeper brokers, and whose word
    that is; None when no view knows (no view, a rehearsal, or a bridge that does not lead)."""
    for v in views:
        if v.migrating_zk_brokers is not None:
            return len(v.migrating_zk_brokers), v.source
        if v.brokers is not None and not v.brokers.rehearsal and v.driver_state not in (None, "UNINITIALIZED", "INACTIVE"):
            return v.brokers.migrating_zk_brokers, v.source
    return None


def name_phase(
    controller: ControllerInfo | None,
    migration: MigrationInfo | None,
    zk_brokers: list[int],
    state: str | None,
    migrating: tuple[int, str] | None = None,
) -> tuple[str, str]:
    """The phase name and a one-line description; `migrating` is `still_migrating` of the KRaft views."""
    kraft = controller is not None and controller.kraft
    if state == "POST_MIGRATION":
        return "finalized", "the migration is finalized: ZooKeeper is no longer written"
    if migration is None and not kraft:
        return "zookeeper", "ZooKeeper mode: no migration under way"
    if migration is not None and not kraft:
        if migration.initial_migration_complete:
            return (
                "reverted-incomplete",
                "a ZooKeeper controller runs but /migration records a completed migration: finish the rollback",
            )
        return "controllers-ready", "KRaft controllers have started; waiting for every broker to enter migration mode"
    if migration is None or not migration.initial_migration_complete:
        return "migrating", "a KRaft controller owns the cluster and is copying the metadata (initial load)"
    if zk_brokers:
        return "dual-write", f"dual-write; brokers still in ZooKeeper mode: {', '.join(map(str, zk_brokers))}"
    if migrating is None:
        # /brokers/ids only lists live ZooKeeper-mode brokers: one that stopped in ZooKeeper mode is not there.
        return (
            "kraft-brokers",
            "dual-write; no broker in /brokers/ids (give --bridge-status or --metadata-dir to check that every "
            "broker registered with the KRaft controller as a KRaft broker)",
        )
    count, source = migrating
    if count:
        return (
            "dual-write",
            f"dual-write; no broker in /brokers/ids, but {count} broker(s) still registered as migrating "
            f"ZooKeeper brokers ({source}): stopped in ZooKeeper mode; restart each as a KRaft broker",
        )
    return "kraft-brokers", "dual-write; every broker runs in KRaft mode (ready for finalize-check)"


Verdict = Literal["pass", "fail", "not-checked"]


class Condition(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    verdict: Verdict
    detail: str


def finalize_conditions(status: Status, *, min_soak_ms: int) -> list[Condition]:
    """The gate before finalizing, minus the audit (the CLI adds that one)."""
    out: list[Condition] = []
    kraft_brokers = next((v.migrating_zk_brokers for v in status.kraft if v.migrating_zk_brokers is not None), None)
    # The bridge counts registrations (Kafka's MigratingZkBrokerCount); a broker that died in ZooKeeper mode is
    # gone from /brokers/ids but still counted. In a rehearsal the count only mirrors /brokers/ids.
    counted = next(
        (v.brokers.migrating_zk_brokers for v in status.kraft if v.brokers is not None and not v.brokers.rehearsal),
        0,
    )
    if status.zk_brokers:
        out.append(Condition(id="brokers-kraft", verdict="fail", detail=f"still in ZooKeeper mode: {status.zk_brokers}"))
    elif kraft_brokers:
        out.append(Condition(id="brokers-kraft", verdict="fail", detail=f"registered as migrating ZK brokers: {kraft_brokers}"))
    elif counted:
        out.append(
            Condition(
                id="brokers-kraft",
                verdict="fail",
                detail=f"{counted} broker{'s' if counted > 1 else ''} still registered as migrating ZooKeeper "
                "brokers (the bridge's /status); restart each as a KRaft broker, or pass --metadata-dir for their ids",
            )
        )
    elif not status.kraft:
        out.append(Condition(id="brokers-kraft", verdict="pass", detail="no broker in /brokers/ids (ZooKeeper view only)"))
    else:
        out.append(Condition(id="brokers-kraft", verdict="pass", detail="no ZooKeeper-mode broker left"))
    out.append(fenced_condition(status))
    if status.migration_state is None:
        out.append(
            Condition(id="migration-state", verdict="not-checked", detail="needs --bridge-status or --metadata-dir")
        )
    else:
        ok = status.migration_state == "MIGRATION" and status.phase in ("kraft-brokers", "dual-write")
        out.append(
            Condition(id="migration-state", verdict="pass" if ok else "fail", detail=f"ZkMigrationState {status.migration_state}, phase {status.phase}")
        )
    if status.write_behind_lag is None:
        out.append(
            Condition(id="write-behind-lag", verdict="not-checked", detail="needs --bridge-status or --metadata-dir")
        )
    else:
        stuck = next((v.stuck_write for v in status.kraft if v.stuck_write), None)
        out.append(
            Condition(
                id="write-behind-lag",
                verdict="pass" if status.write_behind_lag == 0 and stuck is None else "fail",
                detail=f"ZooKeeper write-behind lag {status.write_behind_lag} records"
                + (f"; ZooKeeper refuses a write: {stuck}" if stuck else ""),
            )
        )
    if status.controller_epoch_mtime_ms is None or status.controller is None or not status.controller.kraft:
        out.append(Condition(id="soak", verdict="fail", detail="no KRaft controller registered in /controller"))
    else:
        age = status.checked_at_ms - status.controller_epoch_mtime_ms
        ok = age >= min_soak_ms
        out.append(
            Condition(
                id="soak",
                verdict="pass" if ok else "fail",
                detail=f"last controller failover (/controller_epoch change) {_human(age)} ago; --min-soak {_human(min_soak_ms)}",
            )
        )
    return out


def fenced_condition(status: Status) -> Condition:
    """`brokers-unfenced`: no registered broker fenced (stopped, or silent past its session timeout)."""
    listed = [v for v in status.kraft if v.fenced_brokers is not None]
    counted = [v for v in status.kraft if v.brokers is not None and not v.brokers.rehearsal]
    found = [f"{v.fenced_brokers} in {v.source}" for v in listed if v.fenced_brokers]
    found += [f"{v.brokers.fenced} in {v.source}" for v in counted if v.brokers is not None and v.brokers.fenced]
    if found:
        return Condition(
            id="brokers-unfenced",
            verdict="fail",
            detail=f"fenced broker(s): {'; '.join(found)}; start each as a KRaft broker and wait until it is unfenced",
        )
    if not listed and not counted:
        return Condition(id="brokers-unfenced", verdict="not-checked", detail="needs --bridge-status or --metadata-dir")
    return Condition(id="brokers-unfenced", verdict="pass", detail="no registered broker is fenced")


def parse_duration(text: str) -> int:
    """`7d`, `12h`, `30m`, `45s` or plain seconds → milliseconds."""
    units = {"d": 86_400_000, "h": 3_600_000, "m": 60_000, "s": 1000}
    t = text.strip().lower()
    if t and t[-1] in units and t[:-1].isdigit():
        return int(t[:-1]) * units[t[-1]]
    if t.isdigit():
        return int(t) * 1000
    raise ValueError(f"cannot parse duration {text!r} (use e.g. 7d, 12h, 30m, 45s)")


def _human(ms: int) -> str:
    s = max(0, ms) // 1000
    if s >= 86_400:
        return f"{s / 86_400:.1f}d"
    if s >= 3600:
        return f"{s / 3600:.1f}h"
    if s >= 60:
        return f"{s / 60:.1f}m"
    return f"{s}s"
