"""The checks a Kafka 3.9 controller makes on a metadata directory and ZooKeeper before it leads a migration.

Each check reads what the controller would read (handoff.md §2.1-2.5), in the order it reads it, and says
what Kafka would do with it. Nothing is changed: log recovery's truncation is computed, not performed.
Kafka's counterparts: MetaPropertiesEnsemble, KafkaMetadataLog/LogLoader, QuorumState, ActivationRecordsGenerator
and KRaftMigrationDriver with ZkMigrationClient.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import ZnodeStat
from pydantic import BaseModel

from migrate.errors import Zk2KraftError
from migrate.kraft import metadata_version as mvs
from migrate.kraft.image import MetadataImage
from migrate.kraft.logdir import (
    BOOTSTRAP_CHECKPOINT,
    META_PROPERTIES,
    METADATA_TOPIC_ID,
    PARTITION_METADATA,
    QUORUM_STATE,
    EpochEntry,
    MetaProperties,
    QuorumState,
    SnapshotId,
    list_segments,
    list_snapshots,
    read_meta_properties,
    read_partition_metadata,
    read_quorum_state,
    uuid_to_base64,
)
from migrate.kraft.migration_state import ZkMigrationState, zk_migration_state_name
from migrate.kraft.reader import METADATA_PARTITION_DIR, LoadReport, load_image, read_bootstrap_records
from migrate.kraft.segment_walk import StopKind, WalkStop, walk_segment
from migrate.zk import paths
from migrate.zk.model import ControllerRegistration, MigrationState
from migrate.zk.znodes.controller import decode_controller, decode_controller_epoch, decode_migration
from migrate.zk.znodes.singletons import decode_cluster_id

Verdict = Literal["pass", "warn", "fail", "not-checked"]


class HandoffCheck(BaseModel):
    """One check: what was found, what a Kafka 3.9 controller would do with it, and the class that does it."""

    id: str
    verdict: Verdict
    detail: str
    kafka_would: str
    kafka_class: str


class HandoffReport(BaseModel):
    """Every check, in the order a real controller makes them; `leads` when none fails."""

    metadata_dir: str
    zookeeper: str | None = None
    leads: bool
    checks: list[HandoffCheck]


# ------------------------------------------------------------------------------------------ log recovery


@dataclass(slots=True)
class LogRecovery:
    """What Kafka's log recovery (every segment checked, recovery point 0) would keep of a log, read-only."""

    log_start_offset: int | None = None
    end_offset: int = 0
    """Next offset after recovery."""
    last_epoch: int = -1
    epoch_starts: list[EpochEntry] = field(default_factory=list)
    truncated_segment: Path | None = None
    truncated_at_byte: int = 0
    dropped_bytes: int = 0
    dropped_segments: list[Path] = field(default_factory=list)
    problem: str | None = None

    def epoch_at(self, offset: int) -> int | None:
        """The leader epoch of the batch holding `offset`, None when the recovered log does not hold it."""
        if self.log_start_offset is None or not self.log_start_offset <= offset < self.end_offset:
            return None
        found = None
        for entry in self.epoch_starts:
            if entry.start_offset > offset:
                break
            found = entry.epoch
        return found


def recover_log(pdir: Path) -> LogRecovery:
    """Walk every batch of every segment as LogSegment.recover does (length, magic, CRC-32C, offsets); at the
    first bad batch Kafka truncates there and deletes every later segment."""
    result = LogRecovery()
    segments = list_segments(pdir)
    if segments:
        result.log_start_offset = result.end_offset = segments[0].base_offset
    for i, segment in enumerate(segments):
        walk = walk_segment(segment.path, result.end_offset)
        for batch in walk.batches:
            if batch.leader_epoch > result.last_epoch:
                result.epoch_starts.append(EpochEntry(batch.leader_epoch, batch.base_offset))
                result.last_epoch = batch.leader_epoch
            result.end_offset = batch.last_offset + 1
        if (stop := walk.stop) is not None:
            result.problem = _describe_stop(segment.path, stop)
            result.truncated_segment = segment.path
            result.truncated_at_byte = stop.position
            result.dropped_bytes = stop.bytes_left
            result.dropped_segments = [s.path for s in segments[i + 1 :]]
            break
    return result


def _describe_stop(path: Path, stop: WalkStop) -> str:
    if stop.kind is StopKind.TORN:
        return f"{path}: truncated tail of {stop.bytes_left} bytes at byte {stop.position} ({stop.problem})"
    return f"{path}: {stop.problem} at byte {stop.position}"


@contextmanager
def recovered_view(pdir: Path, recovery: LogRecovery) -> Iterator[Path]:
    """The partition directory as Kafka would leave it after recovery: itself when nothing is truncated, else a
    temporary copy (links to the intact files, the damaged segment cut at its last valid batch)."""
    if recovery.truncated_segment is None:
        yield pdir
        return
    with tempfile.TemporaryDirectory(prefix="zk2kraft-handoff-") as tmp:
        view = Path(tmp) / METADATA_PARTITION_DIR
        view.mkdir()
        dropped = set(recovery.dropped_segments)
        for segment in list_segments(pdir):
            if segment.path in dropped:
                continue
            if segment.path == recovery.truncated_segment:
                with open(segment.path, "rb") as src, open(view / segment.path.name, "wb") as dst:
                    dst.write(src.read(recovery.truncated_at_byte))
            else:
                os.symlink(segment.path, view / segment.path.name)
        for _sid, path in list_snapshots(pdir):
            os.symlink(path, view / path.name)
        yield view


# ------------------------------------------------------------------------------------------ the state read


@dataclass(slots=True)
class DirectoryState:
    """What the directory checks learned, for the checks after them."""

    root: Path
    pdir: Path
    node_id: int | None = None
    meta: MetaProperties | None = None
    recovery: LogRecovery | None = None
    snapshots: list[SnapshotId] = field(default_factory=list)
    quorum: QuorumState | None = None
    image: MetadataImage | None = None
    load: LoadReport | None = None

    @property
    def highest_known_epoch(self) -> int:
        """The highest epoch the directory has seen: a controller starting on it leads at a higher one."""
        known = [-1]
        if self.recovery is not None:
            known.append(self.recovery.last_epoch)
        if self.quorum is not None:
            known.append(self.quorum.leader_epoch)
        known.extend(s.epoch for s in self.snapshots)
        return max(known)


def _check(id: str, verdict: Verdict, detail: str, kafka_would: str, kafka_class: str) -> HandoffCheck:
    return HandoffCheck(
        id=id, verdict=verdict, detail=detail, kafka_would=kafka_would, kafka_class=kafka_class
    )


def _not_checked(id: str, why: str, kafka_class: str) -> HandoffCheck:
    return _check(id, "not-checked", why, "unknown", kafka_class)


# ------------------------------------------------------------------------------------------ directory checks

# Kafka 3.9's classes and the lines that make each check (~line numbers of apache/kafka 3.9, handoff.md §2).
META_CLASS = "MetaPropertiesEnsemble.verify ~L472-542 (KafkaRaftServer.initializeLogDirs ~L133-185)"
BOOTSTRAP_CLASS = "BootstrapDirectory.read ~L65-94 (KafkaRaftServer start-up)"
LOG_CLASS = "KafkaMetadataLog.apply ~L555-626 (UnifiedLog / LogLoader recovery)"
SNAPSHOT_CLASS = "KafkaMetadataLog.recoverSnapshots ~L628-675"
QUORUM_CLASS = "FileQuorumStateStore ~L88-139 / QuorumState.initialize ~L136-264"
REPLAY_CLASS = "QuorumController replay (MetadataLoader)"
MV_CLASS = "ActivationRecordsGenerator.recordsForNonEmptyLog ~L147-157 (QuorumController ~L1239-1254)"
MIGRATION_RECORD_CLASS = "ActivationRecordsGenerator ~L163-205"
TXN_CLASS = "ActivationRecordsGenerator ~L131-145 (AbortTransactionRecord on activation)"
MIGRATION_ZNODE_CLASS = (
    "KRaftMigrationDriver ~L627-672, ~L823-855 (WAIT_FOR_CONTROLLER_QUORUM, SYNC_KRAFT_TO_ZK) / "
    "ZkMigrationClient, MigrationZNode.decode ~L1063-1084"
)
CONTROLLER_CLASS = (
    "KafkaZkClient.tryRegisterKRaftControllerAsActiveController ~L194-243 (KRaftMigrationDriver)"
)
CLUSTER_ID_CLASS = (
    "ClusterControlManager.registerBroker (INCONSISTENT_CLUSTER_ID) / KafkaServer's /cluster/id"
)
BROKERS_CLASS = (
    "ClusterControlManager.activate ~L322-327 / BrokerHeartbeatManager ~L365-403 (checkBrokerEpoch)"
)


def check_meta_properties(state: DirectoryState, node_id: int | None) -> HandoffCheck:
    """meta.properties version 1 with node.id, cluster.id and directory.id; node.id as configured."""
    path = state.root / META_PROPERTIES
    if not path.exists():
        return _check(
            "meta.properties", "fail", f"{path} does not exist",
            f"refuses to start: No `{META_PROPERTIES}` found in {state.root} (have you run kafka-storage.sh?)",
            META_CLASS,
        )  # fmt: skip
    try:
        meta = read_meta_properties(path)
    except Zk2KraftError as exc:
        return _check(
            "meta.properties", "fail", str(exc), f"refuses to start: cannot read {path}", META_CLASS
        )
    state.meta = meta
    state.node_id = node_id if node_id is not None else meta.node_id
    if meta.version != 1:
        return _check(
            "meta.properties", "fail", f"{path} is version {meta.version} (ZooKeeper-era)",
            "reads broker.id as node.id, but a migration controller's directory is version 1; re-format it "
            "as a KRaft controller's (version=1, node.id, cluster.id, directory.id)",
            META_CLASS,
        )  # fmt: skip
    if node_id is not None and meta.node_id != node_id:
        return _check(
            "meta.properties", "fail", f"{path} has node.id {meta.node_id}, but --node-id is {node_id}",
            f"refuses to start: Stored node id {meta.node_id} doesn't match previous node id {node_id}",
            META_CLASS,
        )  # fmt: skip
    if meta.directory_id is None:
        return _check(
            "meta.properties", "pass",
            f"version 1, node.id {meta.node_id}, cluster.id {meta.cluster_id}; no directory.id (Kafka 3.9 "
            "generates one)",
            "generates a random directory.id and rewrites meta.properties at start-up, then starts as this node "
            "(harmless under a static controller.quorum.voters quorum, kraft.version 0)",
            META_CLASS,
        )  # fmt: skip
    return _check(
        "meta.properties", "pass",
        f"version 1, node.id {meta.node_id}, cluster.id {meta.cluster_id}, "
        f"directory.id {uuid_to_base64(meta.directory_id)}",
        "starts as this node", META_CLASS,
    )  # fmt: skip


def check_bootstrap_checkpoint(state: DirectoryState) -> HandoffCheck:
    """bootstrap.checkpoint, read at every start (used only for an empty log), must parse if present."""
    path = state.root / BOOTSTRAP_CHECKPOINT
    if not path.exists():
        return _check(
            "bootstrap.checkpoint", "pass", f"{path} is absent",
            "bootstraps from inter.broker.protocol.version only if the log were empty; this log is not",
            BOOTSTRAP_CLASS,
        )  # fmt: skip
    try:
        records = read_bootstrap_records(path)
    except (Zk2KraftError, ValueError, OSError) as exc:
        return _check(
            "bootstrap.checkpoint", "fail", f"{path} does not parse: {exc}",
            f"refuses to start: cannot read {path}", BOOTSTRAP_CLASS,
        )  # fmt: skip
    return _check(
        "bootstrap.checkpoint", "pass", f"{path} parses ({len(records)} record(s))",
        "reads it at start-up; uses it only for an empty log", BOOTSTRAP_CLASS,
    )  # fmt: skip


def check_log_segments(state: DirectoryState) -> HandoffCheck:
    """Every segment's batches (CRC-32C, length, magic, offsets), partition.metadata's topic id, and the
    truncation recovery would do at the first bad batch."""
    pdir = state.pdir
    if not pdir.is_dir() or not list_segments(pdir):
        return _check(
            "log segments", "fail", f"{pdir} holds no <offset>.log segment",
            "starts with an empty log: bootstraps a new cluster's metadata (re-migrates from ZooKeeper)",
            LOG_CLASS,
        )  # fmt: skip
    metadata_file = pdir / PARTITION_METADATA
    if metadata_file.exists():
        try:
            topic_id = read_partition_metadata(metadata_file)
        except Zk2KraftError as exc:
            return _check(
                "log segments", "fail", str(exc), f"refuses to start: cannot read {metadata_file}", LOG_CLASS
            )
        if topic_id != METADATA_TOPIC_ID:
            return _check(
                "log segments", "fail",
                f"{metadata_file} holds topic id {uuid_to_base64(topic_id)}, not {uuid_to_base64(METADATA_TOPIC_ID)}",
                "refuses to start: InconsistentTopicIdException", LOG_CLASS,
            )  # fmt: skip
    recovery = recover_log(pdir)
    state.recovery = recovery
    if recovery.truncated_segment is None:
        return _check(
            "log segments", "pass",
            f"offsets {recovery.log_start_offset}..{recovery.end_offset - 1}, last leader epoch {recovery.last_epoch}",
            "loads the log unchanged", LOG_CLASS,
        )  # fmt: skip
    dropped = f"{recovery.dropped_bytes} bytes of {recovery.truncated_segment.name}"
    if recovery.dropped_segments:
        dropped += f" and {len(recovery.dropped_segments)} later segment(s)"
    return _check(
        "log segments", "fail",
        f"{recovery.problem}; the log's valid part ends at offset {recovery.end_offset - 1}",
        f"truncates the log to offset {recovery.end_offset} (drops {dropped}); the checks below are of the "
        f"log as truncated",
        LOG_CLASS,
    )  # fmt: skip


def check_snapshots(state: DirectoryState) -> HandoffCheck:
    """Snapshots against the log start and end, as recoverSnapshots judges them."""
    recovery = state.recovery
    if recovery is None or recovery.log_start_offset is None:
        return _not_checked("snapshots", "no log to check them against", SNAPSHOT_CLASS)
    snapshots = [sid for sid, _ in list_snapshots(state.pdir)]
    state.snapshots = snapshots
    start, end = recovery.log_start_offset, recovery.end_offset
    if start > 0 and not any(s.end_offset >= start for s in snapshots):
        return _check(
            "snapshots", "fail", f"the log starts at offset {start} but no snapshot reaches it",
            "refuses to start: IllegalStateException (Inconsistent snapshot state)", SNAPSHOT_CLASS,
        )  # fmt: skip
    if not snapshots:
        return _check(
            "snapshots",
            "pass",
            "no snapshot; the log starts at offset 0",
            "replays the whole log",
            SNAPSHOT_CLASS,
        )
    newest = snapshots[-1]
    if newest.end_offset > end:
        return _check(
            "snapshots", "fail",
            f"the newest snapshot ends at offset {newest.end_offset}, past the log's end ({end})",
            f"truncates the whole log and starts it at offset {newest.end_offset} (the snapshot's end)",
            SNAPSHOT_CLASS,
        )  # fmt: skip
    return _check(
        "snapshots", "pass",
        f"{len(snapshots)} snapshot(s), newest ending at offset {newest.end_offset} (epoch {newest.epoch})",
        f"loads the snapshot and replays offsets {newest.end_offset}..{end - 1}", SNAPSHOT_CLASS,
    )  # fmt: skip


def check_quorum_state(state: DirectoryState, voters: frozenset[int] | None) -> HandoffCheck:
    """quorum-state in Kafka's JSON (mandatory keys, data_version 0 or 1), its voters against --voters, and the
    role it gives the controller at start."""
    path = state.pdir / QUORUM_STATE
    if voters is not None and state.node_id is not None and state.node_id not in voters:
        return _check(
            "quorum-state", "fail", f"node {state.node_id} is not one of --voters {sorted(voters)}",
            "refuses to start: controller.quorum.voters must contain node.id", QUORUM_CLASS,
        )  # fmt: skip
    if not path.exists():
        return _check("quorum-state", "pass", f"{path} absent (optional)", "starts Unattached", QUORUM_CLASS)
    try:
        quorum = read_quorum_state(path)
    except Zk2KraftError as exc:
        return _check("quorum-state", "fail", str(exc), f"refuses to start: cannot read {path}", QUORUM_CLASS)
    state.quorum = quorum
    if (
        voters is not None
        and quorum.current_voters is not None
        and frozenset(quorum.current_voters) != voters
    ):
        return _check(
            "quorum-state", "fail",
            f"{path} lists voters {sorted(quorum.current_voters)}, not --voters {sorted(voters)}",
            "ignores the file's voters, but a static voter set cannot change in place: the quorum these "
            "directories belong to is not the one configured",
            QUORUM_CLASS,
        )  # fmt: skip
    detail = f"data_version {quorum.data_version}, leader {quorum.leader_id} in epoch {quorum.leader_epoch}"
    return _check("quorum-state", "pass", detail, _start_role(state, quorum), QUORUM_CLASS)


def _start_role(state: DirectoryState, quorum: QuorumState) -> str:
    """QuorumState.initialize: the role a controller starts in with this file and this log."""
    log_epoch = state.recovery.last_epoch if state.recovery is not None else -1
    me = state.node_id
    if quorum.leader_epoch < log_epoch:
        return f"starts Unattached at the log's epoch {log_epoch}"
    if quorum.leader_id == me:
        return (
            f"starts Resigned in epoch {quorum.leader_epoch}, sends EndQuorumEpoch, then stands as Candidate "
            f"in epoch {quorum.leader_epoch + 1}"
        )
    if quorum.voted_id == me:
        return f"starts as Candidate in epoch {quorum.leader_epoch}"
    if quorum.leader_id >= 0:
        return f"starts as Follower of {quorum.leader_id} in epoch {quorum.leader_epoch}"
    return f"starts Unattached in epoch {quorum.leader_epoch}"


def load_recovered_image(state: DirectoryState) -> HandoffCheck | None:
    """Replay the snapshot and log as recovery would leave them; a failed replay is a check of its own."""
    if state.recovery is None or state.recovery.log_start_offset is None:
        return None
    try:
        with recovered_view(state.pdir, state.recovery) as view:
            state.image, state.load = load_image(view)
    except Zk2KraftError as exc:
        return _check(
            "replay", "fail", str(exc), "fails to load its metadata (fatal at start-up)", REPLAY_CLASS
        )
    return None


def check_metadata_version(state: DirectoryState) -> HandoffCheck:
    """metadata.version ≥ 3.4-IV0, without which activation with migration enabled is fatal."""
    if state.image is None:
        return _not_checked("metadata.version", "no log was loaded", MV_CLASS)
    mv = mvs.from_feature_level(state.image.features.metadata_version)
    if mv < mvs.IBP_3_4_IV0:
        return _check(
            "metadata.version", "fail", f"metadata.version {mv.name} (feature level {mv.feature_level})",
            f"fails activation: Should not have ZK migrations enabled on a cluster running metadata.version {mv.name}",
            MV_CLASS,
        )  # fmt: skip
    return _check("metadata.version", "pass", f"metadata.version {mv.name}", "activates", MV_CLASS)


def check_migration_record(state: DirectoryState) -> HandoffCheck:
    """ZkMigrationStateRecord(MIGRATION) in the log as recovery leaves it."""
    if state.image is None:
        return _not_checked("migration state", "no log was loaded", MIGRATION_RECORD_CLASS)
    migration = state.image.features.zk_migration_state
    name = zk_migration_state_name(migration)
    lost = ""
    if state.recovery is not None and state.recovery.truncated_segment is not None:
        lost = f" (after the truncation to offset {state.recovery.end_offset})"
    if migration == ZkMigrationState.MIGRATION:
        return _check(
            "migration state", "pass", f"ZkMigrationStateRecord MIGRATION{lost}",
            "activates without writing records (Staying in ZK migration mode)", MIGRATION_RECORD_CLASS,
        )  # fmt: skip
    would = {
        ZkMigrationState.NONE: "fails activation: a log with metadata but ZkMigrationState NONE cannot migrate",
        ZkMigrationState.PRE_MIGRATION: "re-migrates from ZooKeeper (the migration is not recorded as done)",
        ZkMigrationState.POST_MIGRATION: "does not migrate: the migration is finalized; its driver goes INACTIVE",
    }.get(ZkMigrationState(migration), "fails activation")
    return _check(
        "migration state",
        "fail",
        f"ZkMigrationState {name}{lost}, not MIGRATION",
        would,
        MIGRATION_RECORD_CLASS,
    )


def check_open_transaction(state: DirectoryState) -> HandoffCheck:
    """No metadata transaction open at the end of the log."""
    if state.load is None:
        return _not_checked("open transaction", "no log was loaded", TXN_CLASS)
    begun = state.load.pending_transaction_offset
    if begun is not None:
        return _check(
            "open transaction", "fail",
            f"a metadata transaction begun at offset {begun} ({state.load.pending_transaction_records} records) "
            f"is still open at the end of the log",
            "appends AbortTransactionRecord(Controller failover) at activation: every record since offset "
            f"{begun} is dropped",
            TXN_CLASS,
        )  # fmt: skip
    return _check(
        "open transaction", "pass", "no transaction open at the end of the log", "activates", TXN_CLASS
    )


def directory_checks(
    metadata_dir: Path, *, node_id: int | None = None, voters: frozenset[int] | None = None
) -> tuple[DirectoryState, list[HandoffCheck]]:
    """The start-up and activation checks of the directory alone, in a real controller's order."""
    root = Path(metadata_dir)
    pdir = root / METADATA_PARTITION_DIR
    state = DirectoryState(root, pdir)
    checks = [
        check_meta_properties(state, node_id),
        check_bootstrap_checkpoint(state),
        check_log_segments(state),
    ]
    checks.append(check_snapshots(state))
    checks.append(check_quorum_state(state, voters))
    if (replay_failed := load_recovered_image(state)) is not None:
        checks.append(replay_failed)
    checks.extend(
        [check_metadata_version(state), check_migration_record(state), check_open_transaction(state)]
    )
    return state, checks


# ------------------------------------------------------------------------------------------ ZooKeeper checks


def _get(zk: KazooClient, path: str) -> tuple[bytes | None, ZnodeStat] | None:
    try:
        data, stat = zk.get(path)
    except NoNodeError:
        return None
    return data, stat


def check_migration_znode(state: DirectoryState, zk: KazooClient) -> HandoffCheck:
    """`/migration` version 0 with its four fields, `kraft_metadata_offset > 0`, and (offset, epoch) a batch of
    this log: what the driver reads at start and compares in SYNC_KRAFT_TO_ZK."""
    migrated = (
        state.image is not None and state.image.features.zk_migration_state == ZkMigrationState.MIGRATION
    )
    found = _get(zk, paths.MIGRATION)
    if found is None:
        return _check(
            "/migration", "fail", f"{paths.MIGRATION} does not exist",
            "creates it empty (offset -1), then: KRaft controller indicates an active migration, but the ZK "
            "state does not; its driver stays INACTIVE (no ZooKeeper writes, no broker RPCs)"
            if migrated else "creates it empty and re-migrates from ZooKeeper",
            MIGRATION_ZNODE_CLASS,
        )  # fmt: skip
    data, stat = found
    try:
        znode = decode_migration(paths.MIGRATION, data, zk_version=stat.version)
    except Zk2KraftError as exc:
        return _check(
            "/migration", "fail", str(exc),
            "fails to decode it on every attempt (MigrationZNode.decode): the driver never leaves INACTIVE",
            MIGRATION_ZNODE_CLASS,
        )  # fmt: skip
    return _judge_migration_znode(state, znode, migrated)


def _judge_migration_znode(state: DirectoryState, znode: MigrationState, migrated: bool) -> HandoffCheck:
    offset, epoch = znode.kraft_metadata_offset, znode.kraft_metadata_epoch
    named = f"{paths.MIGRATION} names offset {offset} in epoch {epoch}"
    if offset <= 0:
        return _check(
            "/migration", "fail", f"{named}: no migration recorded in ZooKeeper",
            "KRaft controller indicates an active migration, but the ZK state does not; its driver stays "
            "INACTIVE" if migrated else "re-migrates from ZooKeeper",
            MIGRATION_ZNODE_CLASS,
        )  # fmt: skip
    recovery = state.recovery
    if recovery is None:
        return _not_checked("/migration", f"{named}; no log to compare it with", MIGRATION_ZNODE_CLASS)
    if offset >= recovery.end_offset:
        return _check(
            "/migration", "fail", f"{named}, beyond the log's end (next offset {recovery.end_offset})",
            f"leads, then SYNC_KRAFT_TO_ZK rewrites ZooKeeper from this log: ZooKeeper's changes after offset "
            f"{recovery.end_offset - 1} are rolled back",
            MIGRATION_ZNODE_CLASS,
        )  # fmt: skip
    at = recovery.epoch_at(offset)
    if at != epoch:
        held = "not held by the log (below its start)" if at is None else f"in epoch {at}"
        return _check(
            "/migration", "fail", f"{named}, but this log holds offset {offset} {held}",
            "waits in SYNC_KRAFT_TO_ZK until its image reaches that (offset, epoch), epoch first: ZooKeeper "
            "was written from another log",
            MIGRATION_ZNODE_CLASS,
        )  # fmt: skip
    return _check(
        "/migration", "pass", f"{named}, a batch of this log (committed once a majority of voters hold it)",
        f"leads and resumes dual-write from /migration offset {offset} (no re-migration)", MIGRATION_ZNODE_CLASS,
    )  # fmt: skip


def check_controller_znode(state: DirectoryState, zk: KazooClient) -> HandoffCheck:
    """`/controller` names a KRaft controller whose kraftControllerEpoch the next leader's Raft epoch exceeds."""
    found = _get(zk, paths.CONTROLLER)
    if found is None:
        return _check(
            "/controller", "pass", f"{paths.CONTROLLER} does not exist",
            "creates it when it claims the cluster", CONTROLLER_CLASS,
        )  # fmt: skip
    data, stat = found
    try:
        controller: ControllerRegistration = decode_controller(
            paths.CONTROLLER, data, zk_version=stat.version, ephemeral_owner=stat.ephemeralOwner
        )
    except Zk2KraftError as exc:
        return _check("/controller", "fail", str(exc), "fails its claim on every attempt", CONTROLLER_CLASS)
    if not controller.is_kraft_controller:
        return _check(
            "/controller", "fail",
            f"{paths.CONTROLLER} is held by ZooKeeper-mode broker {controller.broker_id} (no kraftControllerEpoch)",
            "seizes /controller from an active ZooKeeper controller: two controllers have been sending "
            "requests to the brokers, and the bridge is not the one in charge",
            CONTROLLER_CLASS,
        )  # fmt: skip
    epoch = controller.kraft_controller_epoch
    assert epoch is not None  # is_kraft_controller
    highest = state.highest_known_epoch
    detail = f"KRaft controller {controller.broker_id} with kraftControllerEpoch {epoch}"
    if epoch > highest:
        return _check(
            "/controller", "fail", f"{detail}, above every epoch this directory has seen ({highest})",
            "ControllerMovedException at each claim while it leads at an epoch ≤ "
            f"{epoch}: stays in BECOME_CONTROLLER (no ZooKeeper writes, no broker RPCs)",
            CONTROLLER_CLASS,
        )  # fmt: skip
    return _check(
        "/controller", "pass", f"{detail} (this directory has seen epoch {highest})",
        f"claims it at its own Raft epoch (> {highest})", CONTROLLER_CLASS,
    )  # fmt: skip


def check_controller_epoch(zk: KazooClient) -> HandoffCheck:
    """`/controller_epoch` exists and holds an integer (the claim bumps it)."""
    found = _get(zk, paths.CONTROLLER_EPOCH)
    if found is None:
        return _check(
            "/controller_epoch", "fail", f"{paths.CONTROLLER_EPOCH} does not exist",
            "IllegalStateException at the claim: no ZK controller epoch present", CONTROLLER_CLASS,
        )  # fmt: skip
    data, stat = found
    try:
        epoch = decode_controller_epoch(paths.CONTROLLER_EPOCH, data, zk_version=stat.version)
    except Zk2KraftError as exc:
        return _check(
            "/controller_epoch", "fail", str(exc), "fails its claim on every attempt", CONTROLLER_CLASS
        )
    return _check(
        "/controller_epoch", "pass", f"epoch {epoch.epoch} (znode version {epoch.zk_version})",
        f"bumps it to {epoch.epoch + 1} when it claims the cluster (fencing the bridge)", CONTROLLER_CLASS,
    )  # fmt: skip


def check_broker_registrations(state: DirectoryState, zk: KazooClient) -> HandoffCheck:
    """Each registration's epoch is one Kafka could have given (the offset of a RegisterBrokerRecord, never
    after its latest one); ZooKeeper-mode brokers not registered in the log are a warning."""
    if state.image is None:
        return _not_checked("broker epochs", "no log was loaded", BROKERS_CLASS)
    try:
        zk_ids = sorted(int(child) for child in zk.get_children(paths.BROKER_IDS))
    except NoNodeError:
        zk_ids = []
    brokers = state.image.cluster.brokers
    snapshot_end = state.snapshots[-1].end_offset if state.snapshots else 0
    problems = []
    for broker_id, broker in sorted(brokers.items()):
        in_log = broker.register_record_offset >= snapshot_end
        if broker.epoch < 0 or (in_log and broker.epoch > broker.register_record_offset):
            problems.append(
                f"broker {broker_id} has epoch {broker.epoch}, but its RegisterBrokerRecord is at offset "
                f"{broker.register_record_offset} (Kafka gives a new registration the offset of its record)"
            )
    if problems:
        return _check(
            "broker epochs", "fail", "; ".join(problems),
            "answers these brokers' heartbeats with STALE_BROKER_EPOCH: they are fenced and never re-register",
            BROKERS_CLASS,
        )  # fmt: skip
    described = ", ".join(f"{i}@{b.epoch}" for i, b in sorted(brokers.items())) or "none"
    unregistered = [i for i in zk_ids if i not in brokers]
    if unregistered:
        return _check(
            "broker epochs", "warn",
            f"registered brokers (id@epoch): {described}; ZooKeeper brokers {unregistered} are not registered "
            f"in the log",
            f"leads, but sends brokers {unregistered} no UpdateMetadata/LeaderAndIsr until they register (a "
            f"ZooKeeper-mode broker registers only with zookeeper.metadata.migration.enable=true)",
            BROKERS_CLASS,
        )  # fmt: skip
    return _check(
        "broker epochs", "pass", f"registered brokers (id@epoch): {described}; ZooKeeper brokers {zk_ids}",
        "re-registers every broker with a full session timeout; their heartbeats' epochs match", BROKERS_CLASS,
    )  # fmt: skip


def check_cluster_id(state: DirectoryState, zk: KazooClient) -> HandoffCheck:
    """meta.properties' cluster.id is ZooKeeper's /cluster/id: migrating brokers register with that one."""
    if state.meta is None or state.meta.cluster_id is None:
        return _not_checked("cluster id", "meta.properties was not read", CLUSTER_ID_CLASS)
    found = _get(zk, paths.CLUSTER_ID)
    if found is None:
        return _check(
            "cluster id", "fail", f"{paths.CLUSTER_ID} does not exist",
            "has no cluster for the ZooKeeper-mode brokers to agree with (they create /cluster/id at start)",
            CLUSTER_ID_CLASS,
        )  # fmt: skip
    try:
        zk_cluster_id = decode_cluster_id(paths.CLUSTER_ID, found[0])
    except Zk2KraftError as exc:
        return _check("cluster id", "fail", str(exc), "cannot be compared", CLUSTER_ID_CLASS)
    if zk_cluster_id != state.meta.cluster_id:
        return _check(
            "cluster id", "fail",
            f"meta.properties has cluster.id {state.meta.cluster_id}, {paths.CLUSTER_ID} has {zk_cluster_id}",
            "answers every ZooKeeper-mode broker's registration INCONSISTENT_CLUSTER_ID: this directory belongs "
            "to another cluster",
            CLUSTER_ID_CLASS,
        )  # fmt: skip
    return _check(
        "cluster id", "pass", f"{zk_cluster_id} in meta.properties and {paths.CLUSTER_ID}",
        "accepts the migrating brokers' registrations", CLUSTER_ID_CLASS,
    )  # fmt: skip


def zookeeper_checks(state: DirectoryState, zk: KazooClient) -> list[HandoffCheck]:
    """What the migration driver reads from ZooKeeper when it becomes leader, in its order."""
    return [
        check_cluster_id(state, zk),
        check_migration_znode(state, zk),
        check_controller_znode(state, zk),
        check_controller_epoch(zk),
        check_broker_registrations(state, zk),
    ]


def handoff_check(
    metadata_dir: Path,
    zk: KazooClient,
    *,
    zookeeper: str | None = None,
    node_id: int | None = None,
    voters: frozenset[int] | None = None,
) -> HandoffReport:
    """Every check, directory then ZooKeeper; `leads` when a real controller would lead without re-migrating."""
    state, checks = directory_checks(metadata_dir, node_id=node_id, voters=voters)
    checks.extend(zookeeper_checks(state, zk))
    leads = all(c.verdict in ("pass", "warn") for c in checks)
    return HandoffReport(metadata_dir=str(metadata_dir), zookeeper=zookeeper, leads=leads, checks=checks)
