"""The ZooKeeper side of reverting an unfinalized migration (Kafka's revert table, migration-protocol.md §11.2).

Reads `/controller`, `/controller_epoch`, `/migration`, the registered brokers and every partition state;
decides what to delete and whether the controller epoch must be raised; writes a backup; then deletes
`/controller` and `/migration` in one ZooKeeper transaction, conditioned on the versions that were read.

The epoch condition: KRaft writes its own (Raft) epoch into partition states' `controller_epoch`. The ZooKeeper
controller elected after the revert gets `/controller_epoch + 1` and refuses to elect leaders for partitions
whose state carries a higher epoch (PartitionStateMachine: "aborted leader election ... already written by
another controller"), leaving them offline. So when the highest state epoch exceeds `/controller_epoch + 1`,
the same transaction sets `/controller_epoch` to that highest epoch.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import ZnodeStat

from migrate.errors import Zk2KraftError, ZnodeFormatError
from migrate.kraft.logdir import MetaProperties, encode_meta_properties, parse_meta_properties
from migrate.plan.status import KraftView, log_lag
from migrate.zk import paths
from migrate.zk.model import ControllerRegistration, MigrationState
from migrate.zk.znodes.controller import decode_controller, decode_migration
from migrate.zk.znodes.singletons import decode_cluster_id
from migrate.zk.znodes.topics import decode_partition_state, decode_topic


@dataclass(slots=True)
class Znode:
    path: str
    data: bytes | None
    version: int
    ephemeral_owner: int
    ctime: int
    mtime: int


@dataclass(slots=True)
class RollbackState:
    """What the revert decision needs, read from ZooKeeper."""

    controller: Znode | None
    controller_epoch: Znode | None
    migration: Znode | None
    broker_ids: list[int]
    assigned_broker_ids: list[int]
    max_state_epoch: int = -1
    max_state_epoch_path: str = ""
    cluster_id: str | None = None
    """ZooKeeper's /cluster/id: the cluster.id a ZooKeeper-mode broker checks its meta.properties against."""

    def decoded_controller(self) -> ControllerRegistration | None:
        if self.controller is None:
            return None
        try:
            return decode_controller(paths.CONTROLLER, self.controller.data)
        except ZnodeFormatError:
            return None

    def decoded_migration(self) -> MigrationState | None:
        if self.migration is None:
            return None
        try:
            return decode_migration(paths.MIGRATION, self.migration.data)
        except ZnodeFormatError:
            return None

    @property
    def epoch(self) -> int | None:
        if self.controller_epoch is None or self.controller_epoch.data is None:
            return None
        try:
            return int(self.controller_epoch.data.decode("utf-8").strip())
        except ValueError:
            return None


@dataclass(slots=True)
class RollbackPlan:
    """What `zk2kraft rollback` will do, and why it may refuse."""

    delete: list[Znode] = field(default_factory=list)
    set_epoch: int | None = None
    refusals: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    phase: str = "zookeeper"
    kraft_brokers: list[int] = field(default_factory=list)

    @property
    def nothing_to_do(self) -> bool:
        return not self.delete and self.set_epoch is None


def _znode(client: KazooClient, path: str) -> Znode | None:
    try:
        data, stat = client.get(path)
    except NoNodeError:
        return None
    return _from_stat(path, data, stat)


def _from_stat(path: str, data: bytes | None, stat: ZnodeStat) -> Znode:
    return Znode(path, data, stat.version, stat.ephemeralOwner, stat.ctime, stat.mtime)


def read_rollback_state(client: KazooClient) -> RollbackState:
    """Read the znodes the decision needs (client rooted at Kafka's chroot)."""
    try:
        broker_ids = sorted(int(c) for c in client.get_children(paths.BROKER_IDS) if c.lstrip("-").isdigit())
    except NoNodeError:
        broker_ids = []
    assigned: set[int] = set()
    max_epoch, max_path = -1, ""
    try:
        topics = client.get_children(paths.TOPICS)
    except NoNodeError:
        topics = []
    topic_reads = [(t, client.get_async(paths.topic_path(t))) for t in topics]
    state_reads = []
    for topic, reply in topic_reads:
        try:
            data, _stat = reply.get()
            decoded = decode_topic(paths.topic_path(topic), data)
        except (NoNodeError, ZnodeFormatError):
            continue
        for p, replicas in decoded.partitions.items():
            assigned.update(replicas)
            path = paths.partition_state_path(topic, p)
            state_reads.append((path, client.get_async(path)))
    for path, reply in state_reads:
        try:
            data, stat = reply.get()
            state = decode_partition_state(path, data, zk_version=stat.version)
        except (NoNodeError, ZnodeFormatError):
            continue
        if state.controller_epoch > max_epoch:
            max_epoch, max_path = state.controller_epoch, path
    return RollbackState(
        controller=_znode(client, paths.CONTROLLER),
        controller_epoch=_znode(client, paths.CONTROLLER_EPOCH),
        migration=_znode(client, paths.MIGRATION),
        broker_ids=broker_ids,
        assigned_broker_ids=sorted(assigned),
        max_state_epoch=max_epoch,
        max_state_epoch_path=max_path,
        cluster_id=_cluster_id(client),
    )


def _cluster_id(client: KazooClient) -> str | None:
    try:
        data, _stat = client.get(paths.CLUSTER_ID)
        return decode_cluster_id(paths.CLUSTER_ID, data)
    except (NoNodeError, ZnodeFormatError):
        return None


def plan_rollback(
    state: RollbackState,
    *,
    finalized: bool | None,
    force: bool = False,
    bridge: KraftView | None = None,
    metadata: KraftView | None = None,
    unanswered_bridge: str | None = None,
    broker_meta: list[BrokerMetaCheck] | None = None,
) -> RollbackPlan:
    """Decide the ZooKeeper writes; `finalized` is True/False when known (metadata dir, bridge), else None.

    `bridge` is what a bridge's /status answered (None: not asked, or it did not answer: then
    `unanswered_bridge` is the URL asked, taken as a stopped bridge). A bridge that
    answers is a live controller, and its write-behind lag is acknowledged changes ZooKeeper lacks:
    both refuse the rollback unless `force`. `metadata` is a controller's replayed metadata dir: records
    past `/migration`'s offset are such changes too. `broker_meta`: a broker whose meta.properties would stop it
    in ZooKeeper mode refuses the rollback unless `force`.
    """
    plan = RollbackPlan()
    stuck = [m for m in broker_meta or [] if m.verdict == "fails"]
    if stuck:
        message = "; ".join(f"{m.who} would not start in ZooKeeper mode ({m.reason})" for m in stuck) + (
            ": rewrite each meta.properties as printed above (version 0 also serves a migrating or KRaft broker)"
        )
        if force:
            plan.notes.append("--force: going ahead although " + message)
        else:
            plan.refusals.append(message + ", or give --force")
    ctrl = state.decoded_controller()
    kraft_owned = state.controller is not None and (
        state.controller.ephemeral_owner == 0 or (ctrl is not None and ctrl.is_kraft_controller)
    )
    holder = (
        f"controller {ctrl.broker_id} (/controller, KRaft epoch {ctrl.kraft_controller_epoch})"
        if ctrl is not None and kraft_owned
        else "no KRaft controller in /controller"
    )
    if bridge is not None and (kraft_owned or state.migration is not None):
        lag = bridge.write_behind_lag or 0
        message = f"a bridge is alive: {bridge.source} answers in state {bridge.driver_state}; {holder}"
        if lag > 0:
            message += (
                f"; ZooKeeper is {lag} record(s) behind its metadata log (write-behind lag {lag}): changes "
                "already acknowledged to clients exist only in that log and would be lost"
            )
        message += "; stop the controller (after the lag is 0) and deprovision it first"
        if force:
            plan.notes.append("--force: going ahead although " + message)
        else:
            plan.refusals.append(message + ", or give --force to lose them knowingly")
    mig = state.decoded_migration()
    log_behind = log_lag(metadata, mig.kraft_metadata_offset) if metadata is not None and mig is not None else None
    if log_behind and metadata is not None and mig is not None:
        message = (
            f"ZooKeeper is {log_behind} record(s) behind the metadata log in {metadata.source} ({paths.MIGRATION} "
            f"records offset {mig.kraft_metadata_offset}, the log's last metadata record is at offset "
            f"{metadata.last_metadata_offset}): changes already acknowledged to clients exist only in that "
            "log and would be lost; start its controller again so it writes them to ZooKeeper"
        )
        if force:
            plan.notes.append("--force: going ahead although " + message)
        else:
            plan.refusals.append(message + ", or give --force to lose them knowingly")
    if bridge is None and kraft_owned:
        unchecked = "liveness" if metadata is not None else "liveness or write-behind lag"
        if unanswered_bridge is not None:
            told = f"the bridge at {unanswered_bridge} did not answer and is taken as stopped, so {holder} was not checked for {unchecked}"
        else:
            told = f"{holder} was not checked for {unchecked} (give --bridge-status URL)"
        plan.notes.append(
            f"{told}: if it still runs, changes it acknowledged but has not written to ZooKeeper are lost"
        )
    if finalized:
        plan.refusals.append(
            "the migration is finalized (ZkMigrationState POST_MIGRATION): reverting to ZooKeeper is impossible"
        )
    elif finalized is None and state.migration is not None:
        give = "--metadata-dir of a controller" + ("" if unanswered_bridge is not None else " or --bridge-status")
        plan.notes.append(
            f"could not verify that the migration is not finalized (give {give}); reverting after finalization "
            "loses every change made since"
        )
    if kraft_owned and state.controller is not None:
        plan.delete.append(state.controller)
    elif state.controller is not None:
        owner = ctrl.broker_id if ctrl is not None else "?"
        plan.notes.append(f"/controller belongs to ZooKeeper-mode broker {owner}: left in place")
    if state.migration is not None:
        plan.delete.append(state.migration)
    kraft_brokers = sorted(set(state.assigned_broker_ids) - set(state.broker_ids))
    plan.kraft_brokers = kraft_brokers
    if kraft_brokers and state.migration is not None:
        plan.phase = "brokers-to-kraft"
        message = (
            f"broker(s) {kraft_brokers} host replicas but are not registered in ZooKeeper (running as KRaft "
            "brokers?): roll them back to their migration-mode configs first (ZooKeeper mode, "
            "zookeeper.metadata.migration.enable=true), then deprovision the controllers, then run rollback"
        )
        (plan.notes if force else plan.refusals).append(message)
    elif mig is not None and mig.initial_migration_complete:
        plan.phase = "migration-complete"
    elif state.migration is not None or kraft_owned:
        plan.phase = "brokers-migration-mode"
    epoch = state.epoch
    if plan.delete and epoch is not None and state.max_state_epoch > epoch + 1:
        plan.set_epoch = state.max_state_epoch
        plan.notes.append(
            f"partition state {state.max_state_epoch_path} carries controller epoch {state.max_state_epoch} but "
            f"the next ZooKeeper controller would get {epoch + 1} and refuse to elect its leader: /controller_epoch "
            f"is raised to {state.max_state_epoch} in the same transaction"
        )
    elif plan.delete and state.controller_epoch is None:
        plan.refusals.append("/controller_epoch is missing: this does not look like a Kafka chroot")
    return plan


def backup_document(state: RollbackState, source: str, now: datetime | None = None) -> dict[str, Any]:
    """The backup written before any change: each znode's data (text and base64) and Stat fields."""

    def entry(z: Znode | None) -> dict[str, Any] | None:
        if z is None:
            return None
        text = None
        if z.data is not None:
            try:
                text = z.data.decode("utf-8")
            except UnicodeDecodeError:
                text = None
        return {
            "path": z.path,
            "data": text,
            "data_base64": None if z.data is None else base64.b64encode(z.data).decode("ascii"),
            "version": z.version,
            "ephemeral_owner": z.ephemeral_owner,
            "ctime": z.ctime,
            "mtime": z.mtime,
        }

    return {
        "kind": "zk2kraft-rollback-backup",
        "version": 1,
        "taken_at": (now or datetime.now(UTC)).isoformat(timespec="seconds"),
        "source": source,
        "controller": entry(state.controller),
        "controller_epoch": entry(state.controller_epoch),
        "migration": entry(state.migration),
        "registered_brokers": state.broker_ids,
        "max_partition_state_controller_epoch": state.max_state_epoch,
    }


def backup_text(state: RollbackState, source: str, now: datetime | None = None) -> str:
    return json.dumps(backup_document(state, source, now), indent=2) + "\n"


def execute_rollback(client: KazooClient, state: RollbackState, plan: RollbackPlan) -> None:
    """One transaction: [raise /controller_epoch], delete /controller, delete /migration, all version-checked."""
    if plan.refusals:
        raise Zk2KraftError("rollback refused: " + "; ".join(plan.refusals))
    txn = client.transaction()
    if plan.set_epoch is not None:
        assert state.controller_epoch is not None
        txn.set_data(paths.CONTROLLER_EPOCH, str(plan.set_epoch).encode(), version=state.controller_epoch.version)
    elif state.controller_epoch is not None:
        # A controller election between our read and our write changes the situation: fail instead.
        txn.check(paths.CONTROLLER_EPOCH, state.controller_epoch.version)
    for z in plan.delete:
        txn.delete(z.path, version=z.version)
    results = txn.commit()
    failed = [(op, r) for op, r in zip(["epoch", *(z.path for z in plan.delete)], results, strict=False) if isinstance(r, Exception)]
    if failed:
        detail = ", ".join(f"{what}: {type(r).__name__}" for what, r in failed)
        raise Zk2KraftError(
            f"the rollback transaction was rejected and changed nothing ({detail}); ZooKeeper changed since it "
            "was read (a controller moved?) — run rollback again"
        )


def manual_steps(plan: RollbackPlan, broker_files: list[tuple[str, dict[str, str]]]) -> list[str]:
    """The per-broker steps that remain after the ZooKeeper side (Kafka's revert table for the phase)."""
    remove_keys = (
        "zookeeper.metadata.migration.enable",
        "controller.listener.names",
        "controller.quorum.bootstrap.servers",
        "controller.quorum.voters",
    )
    steps = []
    if plan.phase == "brokers-to-kraft":
        steps.append(
            "Before this: every KRaft broker was rolled back to ZooKeeper mode (process.roles removed, node.id → "
            "broker.id, zookeeper.connect restored, zookeeper.metadata.migration.enable=true kept)."
        )
    steps.append("Deprovision the KRaft controllers if not done yet (stop them, keep their logs for debugging).")
    steps.append("Rolling restart of every broker with the migration settings removed:")
    if broker_files:
        for path, values in broker_files:
            present = [k for k in remove_keys if k in values]
            rename = " and node.id → broker.id" if "node.id" in values else ""
            steps.append(f"  {path}: remove {', '.join(present) or '(nothing left to remove)'}{rename}")
    else:
        steps.append(f"  on each broker remove {', '.join(remove_keys)} (where set); keep broker.id")
    steps.append("Errors about reaching the KRaft controller in broker logs stop after that restart.")
    return steps


META_PROPERTIES = "meta.properties"


@dataclass(frozen=True, slots=True)
class BrokerMetaCheck:
    """One broker log dir's meta.properties as a ZooKeeper-mode Kafka 3.9 broker reads it after the rollback."""

    path: str
    broker_id: int | None
    verdict: Literal["ok", "missing", "fails"]
    reason: str
    """Short: what is wrong (or right)."""
    kafka_would: str
    fix: str | None = None
    """The exact content to write in place of the file (None: nothing to fix)."""

    @property
    def who(self) -> str:
        return f"broker {self.broker_id} ({self.path})" if self.broker_id is not None else self.path


def meta_properties_path(path: Path) -> Path:
    """A broker's log dir or its meta.properties file → the file; a directory that is not there is bad input."""
    target = path / META_PROPERTIES if path.is_dir() else path
    if not target.parent.is_dir():
        raise Zk2KraftError(f"--broker-meta {path}: no such log directory {target.parent}")
    return target


def check_broker_meta(path: Path, zk_cluster_id: str | None, *, now: datetime | None = None) -> BrokerMetaCheck:
    """What Kafka 3.9's KafkaServer does with this file once the broker runs in ZooKeeper mode without the
    migration flag: MetaPropertiesEnsemble.verify with REQUIRE_V0 and ZooKeeper's cluster id (handoff.md §6)."""
    target = meta_properties_path(path)
    shown = str(target)
    try:
        data = target.read_bytes()
    except FileNotFoundError:
        return BrokerMetaCheck(
            shown, None, "missing", "no meta.properties",
            "starts: a ZooKeeper-mode broker takes a log dir without meta.properties as new and needs none; "
            "nothing to verify here (is this the broker's log dir?)",
        )  # fmt: skip
    except OSError as exc:
        return _unreadable(shown, f"cannot be read ({exc.strerror or exc})", zk_cluster_id)
    try:
        meta = parse_meta_properties(data, shown)
    except Zk2KraftError as exc:
        return _unreadable(shown, f"does not parse ({exc})", zk_cluster_id)
    problems: list[str] = []
    kafka: list[str] = []
    if meta.version != 0:
        problems.append(f"meta.properties version={meta.version}")
        kafka.append(
            f"exits at start-up: without zookeeper.metadata.migration.enable a ZooKeeper-mode broker accepts only "
            f"version 0 (\"Found unexpected version in {shown}\"), so under a supervisor it crash-loops; with the "
            "flag still on (the first rolling restart of a revert) it starts, and fails at the last restart"
        )
    if meta.cluster_id is not None and zk_cluster_id is not None and meta.cluster_id != zk_cluster_id:
        problems.append(f"cluster.id {meta.cluster_id}, ZooKeeper's /cluster/id is {zk_cluster_id}")
        kafka.append(
            f"exits at start-up (\"Invalid cluster.id in: {shown}. Expected {zk_cluster_id}, but read "
            f"{meta.cluster_id}\"); the directory was formatted for another cluster id: keep its data only if "
            "you are sure it is this broker's"
        )
    if not problems:
        return BrokerMetaCheck(
            shown, meta.node_id, "ok", f"version 0, broker.id {meta.node_id}, cluster.id {meta.cluster_id}",
            "starts: version 0 is what a ZooKeeper-mode broker requires",
        )  # fmt: skip
    fixed = MetaProperties(0, zk_cluster_id or meta.cluster_id, meta.node_id, meta.directory_id)
    fix = encode_meta_properties(fixed, now=now).decode("utf-8")
    return BrokerMetaCheck(shown, meta.node_id, "fails", "; ".join(problems), "; ".join(kafka), fix)


def _unreadable(shown: str, what: str, zk_cluster_id: str | None) -> BrokerMetaCheck:
    template = f"version=0\nbroker.id=<this broker's broker.id>\ncluster.id={zk_cluster_id or '<ZooKeeper /cluster/id>'}\n"
    return BrokerMetaCheck(
        shown, None, "fails", f"meta.properties {what}",
        "takes this log dir offline (Kafka's loader counts it as an error dir): its replicas stay offline, and "
        "a broker with every log dir offline shuts down",
        template,
    )  # fmt: skip


def broker_meta_lines(checks: list[BrokerMetaCheck]) -> list[str]:
    """The per-broker report `rollback` prints before deciding."""
    lines = ["brokers' meta.properties, as a ZooKeeper-mode Kafka 3.9 broker reads them after the rollback:"]
    for m in checks:
        label = {"ok": "OK", "missing": "MISSING", "fails": "WOULD NOT START"}[m.verdict]
        lines.append(f"  {label} {m.who}: {m.reason}: {m.kafka_would}")
        if m.fix is not None:
            lines.append(f"    fix: replace {m.path} with exactly:")
            lines.extend(f"      {line}" for line in m.fix.splitlines())
    return lines
