"""Kafka's KRaftMigrationDriver for one bridge controller: claim ZooKeeper, migrate once, reconcile, dual-write.

States and transitions follow migration-protocol.md §5: UNINITIALIZED → INACTIVE (read `/migration`) →
WAIT_FOR_CONTROLLER_QUORUM (check the log against `/migration`) → BECOME_CONTROLLER (claim `/controller`,
bump `/controller_epoch`, unconditional `/migration` write) → ZK_MIGRATION (only when the log holds no
completed migration) → SYNC_KRAFT_TO_ZK (write only the differences) → KRAFT_CONTROLLER_TO_BROKER_COMM
(we send no broker RPCs; passed through) → DUAL_WRITE. Blocking ZooKeeper calls run on the caller's single
writer thread so every ZooKeeper write keeps log order.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from typing import Any, NoReturn, Protocol, TypeVar

from kazoo.exceptions import KazooException

from bridge.api import DriverState
from bridge.zk.leadership import (
    MATCH_ANY_VERSION,
    ControllerHolder,
    ControllerMovedError,
    FencedError,
    MigrationLeadershipState,
    MultiReply,
    ReplyRelay,
)
from bridge.zk.migration_client import OneMulti, PreparedOps, ZkBatchError, ZkMigrationClient
from bridge.zk.operations import ZkOperation
from bridge.zk.planner import count_op_types, describe, format_op_counts, plan_reconciliation, summarize
from migrate.errors import InvalidRequestError, Zk2KraftError, error_text
from migrate.kraft import metadata_version as mvs
from migrate.kraft.activation import bootstrap_records, bootstrap_transaction
from migrate.kraft.image import MetadataImage
from migrate.kraft.migration_state import ZkMigrationState
from migrate.manifest import ManifestBuilder, MigrationManifest
from migrate.migration import (
    DEFAULT_MIN_BATCH_SIZE,
    MAX_RECORDS_PER_APPEND,
    coalesce,
    migration_begin_records,
    migration_completed_message,
    migration_completion_records,
)
from migrate.translate import RecordAndVersion, translate
from migrate.zk import paths
from migrate.zk.cluster import from_tree, reusable_topics
from migrate.zk.live import ZkConnectOptions, read_tree
from migrate.zk.mirror import MirroredTree
from migrate.zk.model import ZkClusterModel
from migrate.zk.znodes.controller import decode_migration

log = logging.getLogger(__name__)

T = TypeVar("T")


# Kafka's isValidStateChange (migration-protocol.md §5.1); anything may also "move" to itself.
VALID_TRANSITIONS: dict[DriverState, frozenset[DriverState]] = {
    DriverState.UNINITIALIZED: frozenset({DriverState.INACTIVE}),
    DriverState.INACTIVE: frozenset({DriverState.WAIT_FOR_CONTROLLER_QUORUM}),
    DriverState.WAIT_FOR_CONTROLLER_QUORUM: frozenset(
        {DriverState.INACTIVE, DriverState.WAIT_FOR_BROKERS, DriverState.BECOME_CONTROLLER}
    ),
    DriverState.WAIT_FOR_BROKERS: frozenset({DriverState.INACTIVE, DriverState.BECOME_CONTROLLER}),
    DriverState.BECOME_CONTROLLER: frozenset(
        {DriverState.INACTIVE, DriverState.ZK_MIGRATION, DriverState.SYNC_KRAFT_TO_ZK}
    ),
    DriverState.ZK_MIGRATION: frozenset({DriverState.INACTIVE, DriverState.SYNC_KRAFT_TO_ZK}),
    DriverState.SYNC_KRAFT_TO_ZK: frozenset(
        {DriverState.INACTIVE, DriverState.KRAFT_CONTROLLER_TO_BROKER_COMM}
    ),
    DriverState.KRAFT_CONTROLLER_TO_BROKER_COMM: frozenset({DriverState.INACTIVE, DriverState.DUAL_WRITE}),
    DriverState.DUAL_WRITE: frozenset({DriverState.INACTIVE}),
}

WRITING_STATES = frozenset(
    {DriverState.SYNC_KRAFT_TO_ZK, DriverState.KRAFT_CONTROLLER_TO_BROKER_COMM, DriverState.DUAL_WRITE}
)
"""The states in which a migrated controller takes changes (it holds ZooKeeper and writes what they change)."""


class MigrationMismatchError(Zk2KraftError):
    """ZooKeeper's `/migration` does not describe this metadata log; starting would corrupt one of them."""


class FencedOut(Zk2KraftError):
    """This controller lost ZooKeeper leadership (another controller wrote); it must stop writing."""


class AppendResultLike(Protocol):
    base_offset: int
    last_offset: int
    durable: Future[Any]


class MetadataLogLike(Protocol):
    """What the driver needs from bridge.raft.metadata_log.MetadataLog."""

    @property
    def image(self) -> MetadataImage: ...
    @property
    def end_offset(self) -> int: ...
    @property
    def leader_epoch(self) -> int: ...
    @property
    def cluster_id(self) -> str | None: ...
    def append(self, records: Sequence[RecordAndVersion]) -> Any: ...
    def wait_durable(self, offset: int) -> None: ...
    def close(self) -> None: ...


@dataclass(slots=True)
class MigrationOutcome:
    """What the initial load wrote: the manifest, the last offset/epoch and the brokers seen."""

    manifest: MigrationManifest
    last_offset: int
    last_epoch: int
    broker_ids: list[int]
    warnings: list[str] = field(default_factory=list)

    def completion_message(self) -> str:
        """Kafka's success log line (KRaftMigrationDriver.MigrateMetadataEvent)."""
        return migration_completed_message(self.manifest, self.last_offset, self.last_epoch, self.broker_ids)


TransitionListener = Callable[[DriverState, DriverState], None]


def check_log_matches_migration(
    image: MetadataImage,
    end_offset: int,
    log_epoch: int,
    znode: MigrationLeadershipState,
    *,
    quorum_committed: bool = False,
) -> str | None:
    """Why ZooKeeper's `/migration` cannot belong to this metadata log, or None when it can.

    `end_offset` is the log's next offset, `log_epoch` its current leader epoch. Kafka's driver would
    stall (offset beyond the log), re-migrate over a live cluster (ZooKeeper migrated, log empty) or refuse
    to start (log migrated, `/migration` empty); each is reported instead. A quorum's committed log may hold a
    completed migration that `/migration` does not record yet (`quorum_committed`): its leader died between
    the commit and that write, and the next leader writes it.
    """
    zk_offset = znode.kraft_metadata_offset
    log_migrated = image.features.zk_migration_state == ZkMigrationState.MIGRATION
    who = f"KRaft controller {znode.kraft_controller_id} (epoch {znode.kraft_controller_epoch})"
    if zk_offset > 0 and not log_migrated:
        return (
            f"ZooKeeper's {paths.MIGRATION} says {who} already migrated this cluster and reflected the "
            f"metadata log up to offset {zk_offset}, but this metadata log holds no completed migration. "
            f"A new migration would replace the cluster's KRaft metadata with a fresh copy of ZooKeeper "
            f"(a leftover {paths.MIGRATION} from an earlier attempt is the classic way clusters get wiped)"
        )
    if log_migrated and zk_offset <= 0 and not quorum_committed:
        return (
            f"this metadata log holds a completed migration, but ZooKeeper's {paths.MIGRATION} records none "
            f"(offset {zk_offset}): ZooKeeper was reset or replaced since, or this log belongs to another "
            f"cluster; reconciling would overwrite ZooKeeper with this log"
        )
    if zk_offset >= end_offset and zk_offset > 0:
        return (
            f"ZooKeeper's {paths.MIGRATION} says {who} reflected metadata up to offset {zk_offset}, beyond "
            f"the end of this metadata log (next offset {end_offset}): another controller's log is ahead of "
            f"this one, whose changes would be rolled back in ZooKeeper"
        )
    if zk_offset > 0 and znode.kraft_metadata_epoch >= log_epoch:
        return (
            f"ZooKeeper's {paths.MIGRATION} names metadata epoch {znode.kraft_metadata_epoch} at offset "
            f"{zk_offset}, but this log has only reached epoch {log_epoch - 1}: it was written by another log"
        )
    return None


def bootstrap_refusal(image: MetadataImage, mv: mvs.MetadataVersion) -> str | None:
    """Why a log in this state cannot start (or bootstrap) a ZooKeeper migration, or None when it can."""
    state = image.features.zk_migration_state
    if state in (ZkMigrationState.PRE_MIGRATION, ZkMigrationState.MIGRATION):
        return None
    if state == ZkMigrationState.POST_MIGRATION:
        return (
            "this metadata log says the migration was finalised (ZkMigrationState POST_MIGRATION); a "
            "finalised cluster is not written to ZooKeeper any more"
        )
    if image != MetadataImage(features=image.features, provenance=image.provenance):
        return (
            "this metadata log belongs to a cluster created in KRaft mode (ZkMigrationState NONE with "
            "metadata in it); Kafka refuses ZooKeeper migration on such a cluster, and so do we"
        )
    if not mv.is_migration_supported():
        return f"metadata.version {mv.name} cannot hold a ZooKeeper migration"
    return None


def rehearsal_refusal(live_sessions: Mapping[int, int]) -> str | None:
    """Why `--rehearsal` must not start over these brokers (id to ZooKeeper session), or None when none is live.

    A copy of ZooKeeper (`zk load`, or a restored data dir once its old sessions expired) owns no ephemeral
    znode; a broker znode with a live owner means a running cluster, which a rehearsal would take over."""
    if not live_sessions:
        return None
    named = ", ".join(f"broker {b} (session 0x{s:x})" for b, s in sorted(live_sessions.items()))
    return (
        f"refusing to start: --rehearsal is for a copy of ZooKeeper, but {paths.BROKER_IDS} holds live "
        f"registrations: {named}. A rehearsal on a live cluster takes control of it: it claims "
        f"{paths.CONTROLLER}, migrates at once and sends LeaderAndIsr/UpdateMetadata to these brokers without "
        f"waiting for them to run in migration mode. Rehearse on a copy (`zk2kraft zk load` of a dump into "
        f"another ZooKeeper or chroot; a ZooKeeper restored from a copied data dir keeps the old sessions "
        f"until their timeout expires them), or migrate this cluster without --rehearsal. Nothing was "
        f"written to ZooKeeper or the metadata directory"
    )


def mismatch_refusal(problem: str, holder: ControllerHolder, node_id: int) -> str:
    """The refusal for a `/migration` that does not describe this log: who holds `/controller`, and a hint
    that never offers to take over a controller that may be running without saying so."""
    text = f"refusing to start: {problem}. {holder.describe()}"
    flag = "--adopt-existing-migration"
    if holder.present and holder.session:
        return (
            f"{text}. {flag} would take {paths.CONTROLLER} from that live broker; migrate only once the "
            f"brokers run in migration mode, and only if ZooKeeper should follow this metadata log"
        )
    if holder.present and holder.is_kraft and holder.broker_id != node_id:
        return (
            f"{text}. ZooKeeper cannot tell whether a KRaft controller still runs (its {paths.CONTROLLER} "
            f"is persistent): if controller {holder.broker_id} runs, it is this cluster's controller and this "
            f"one must not start — check its /status. {flag} would take over from it and fence it; use it "
            f"only once controller {holder.broker_id} is stopped for good and ZooKeeper should follow this "
            f"metadata log"
        )
    return f"{text}. If you are sure ZooKeeper should follow this metadata log, start with {flag}"


def read_zookeeper_for_migration(options: ZkConnectOptions) -> ZkClusterModel:
    """The model the initial load copies, read strictly: a malformed znode raises ZnodeFormatError naming it."""
    return read_copy_for_migration(options)[1]


def read_copy_for_migration(options: ZkConnectOptions) -> tuple[MirroredTree, ZkClusterModel]:
    """`read_zookeeper_for_migration`'s model, and the tree it was read from with every topic decoded (so a
    reconciliation against that same tree decodes only the few znodes outside topics)."""
    tree = read_tree(options, acls=False)
    model = from_tree(tree)
    return MirroredTree(tree, reusable_topics(model, ())), model


class AbandonedError(Zk2KraftError):
    """The way to DUAL_WRITE failed after the claim; ZooKeeper was handed back (the message says how far)."""


class MigrationDriver:
    """One controller's migration state machine over a ZkMigrationClient and a durable metadata log.

    `run_zk(fn, *args)` must run `fn` on the single ZooKeeper writer thread (the controller's), so that
    driver writes and dual-write writes never interleave out of log order.
    """

    def __init__(
        self,
        zk: ZkMigrationClient,
        metadata_log: MetadataLogLike,
        *,
        zk_options: ZkConnectOptions,
        node_id: int,
        zk_executor: Executor,
        metadata_version: mvs.MetadataVersion | None = None,
        adopt_existing_migration: bool = False,
        quorum_committed: bool = False,
        min_batch_size: int = DEFAULT_MIN_BATCH_SIZE,
        on_transition: TransitionListener | None = None,
        on_zk_write: Callable[[str, float, int], None] | None = None,
        on_fenced: Callable[[str], None] | None = None,
        before_dual_write: Callable[[], Awaitable[None]] | None = None,
        wait_for_brokers: Callable[[], Awaitable[None]] | None = None,
        warm_tree: Callable[[], MirroredTree | None] | None = None,
    ) -> None:
        self.zk = zk
        self.log = metadata_log
        self.zk_options = zk_options
        """How `zk`'s session was opened: the tree reads open their own sessions with the same credentials."""
        self.node_id = node_id
        self.zk_executor = zk_executor
        self.metadata_version = metadata_version
        self.adopt_existing_migration = adopt_existing_migration
        self.quorum_committed = quorum_committed
        """The log is a Raft quorum's, led after its committed entries: what it holds was committed."""
        self.brokers_synced = False
        """KRAFT_CONTROLLER_TO_BROKER_COMM queued the full sync of the brokers: incremental requests may follow."""
        self.warm_tree = warm_tree
        """Blocking: ZooKeeper's tree as of the call from a copy kept while following (`ZkMirror.take`), its
        unchanged topics decoded already; or None, and SYNC_KRAFT_TO_ZK reads every znode itself."""
        self.min_batch_size = min_batch_size
        self.on_transition = on_transition
        self.on_zk_write = on_zk_write
        self.on_fenced = on_fenced
        self.state = DriverState.UNINITIALIZED
        self.leadership = MigrationLeadershipState()
        self.fenced_reason: str | None = None
        self.migration: MigrationOutcome | None = None
        self.reconciliation_ops: list[ZkOperation] = []
        self.zk_sync_planned = False
        """SYNC_KRAFT_TO_ZK planned its writes: later changes go to ZooKeeper through the pipeline."""
        self.zk_sync_failed: str | None = None
        """Why SYNC_KRAFT_TO_ZK's writes failed: ZooKeeper misses changes no later dual write may paper over."""
        self.migration_before: bytes | None = None
        """`/migration` as it was before this driver read (or created) it; None: absent."""
        self.loaded_copy: MirroredTree | None = None
        """ZooKeeper as the initial load read it after the claim, for the reconciliation right after (then None)."""
        # Awaited right before DUAL_WRITE (the controller arms its foreign-write watches there).
        self.before_dual_write = before_dual_write
        # Awaited in WAIT_FOR_BROKERS, before an initial migration only (None: that state is skipped).
        self.wait_for_brokers = wait_for_brokers

    # ------------------------------------------------------------------ plumbing

    async def run_zk(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a blocking ZooKeeper call on the writer thread."""
        return await asyncio.get_running_loop().run_in_executor(self.zk_executor, fn, *args)

    def transition(self, new: DriverState, **fields: Any) -> None:
        """Move to `new` (Kafka's valid transitions only) and log one structured line."""
        old = self.state
        if new != old and new not in VALID_TRANSITIONS[old]:
            raise Zk2KraftError(f"invalid migration driver transition {old.name} -> {new.name}")
        self.state = new
        parts = " ".join(f"{k}={v}" for k, v in fields.items())
        log.info(
            "event=state_transition from=%s to=%s node_id=%d %s", old.name, new.name, self.node_id, parts,
            extra={"event": "state_transition", "from_state": old.name, "to_state": new.name, **fields},
        )  # fmt: skip
        if self.on_transition is not None:
            self.on_transition(old, new)

    def note_fenced(self, reason: str) -> None:
        """Another controller took ZooKeeper over (seen without a write of ours): no more writes from now on."""
        if self.fenced_reason is None:
            self.fenced_reason = reason
            if self.on_fenced is not None:
                self.on_fenced(reason)

    def step_down(self, reason: str) -> None:
        """Fenced: keep the first reason, and go INACTIVE where Kafka's transitions allow it."""
        if self.fenced_reason is None:
            self.fenced_reason = reason
        if self.state != DriverState.INACTIVE and DriverState.INACTIVE in VALID_TRANSITIONS[self.state]:
            self.transition(DriverState.INACTIVE, reason=repr(self.fenced_reason))

    @property
    def dual_write(self) -> bool:
        return self.state == DriverState.DUAL_WRITE and self.fenced_reason is None

    @property
    def accepts_writes(self) -> bool:
        """Whether controller write events run: once the log holds a completed migration and this driver holds
        ZooKeeper (SYNC_KRAFT_TO_ZK on), as Kafka gates only PRE_MIGRATION (RUNS_IN_PREMIGRATION)."""
        return (
            self.fenced_reason is None
            and self.state in WRITING_STATES
            and self.log.image.features.zk_migration_state == ZkMigrationState.MIGRATION
        )

    @property
    def writes_to_zookeeper(self) -> bool:
        """Whether a change appended now must be written to ZooKeeper by the pipeline: in DUAL_WRITE, and in
        the states before it once SYNC_KRAFT_TO_ZK planned its writes (earlier changes are in that plan)."""
        if self.fenced_reason is not None:
            return False
        return self.state == DriverState.DUAL_WRITE or (self.state in WRITING_STATES and self.zk_sync_planned)

    # ------------------------------------------------------------------ the way to DUAL_WRITE

    async def run(self) -> None:
        """Drive from UNINITIALIZED/INACTIVE to DUAL_WRITE; raises MigrationMismatchError or FencedOut.

        A failure after the claim and before DUAL_WRITE hands ZooKeeper back (`abandon`) and raises
        AbandonedError saying what ZooKeeper holds then.
        """
        if self.state == DriverState.UNINITIALIZED:
            self.migration_before = await self.run_zk(self._migration_data)
            self.leadership = await self.run_zk(self.zk.get_or_create_migration_state)
            self.transition(
                DriverState.INACTIVE,
                migration_offset=self.leadership.kraft_metadata_offset,
                migration_zk_version=self.leadership.migration_zk_version,
            )
        await self.ensure_bootstrapped()
        self.transition(DriverState.WAIT_FOR_CONTROLLER_QUORUM, log_end_offset=self.log.end_offset)
        await self.check_against_zookeeper()
        if (
            self.wait_for_brokers is not None
            and self.log.image.features.zk_migration_state != ZkMigrationState.MIGRATION
        ):
            self.transition(DriverState.WAIT_FOR_BROKERS)
            await self.wait_for_brokers()
        self.transition(DriverState.BECOME_CONTROLLER, leader_epoch=self.log.leader_epoch)
        try:
            await self.become_controller()
            if self.log.image.features.zk_migration_state != ZkMigrationState.MIGRATION:
                self.transition(DriverState.ZK_MIGRATION)
                await self.migrate()
            self.transition(
                DriverState.SYNC_KRAFT_TO_ZK,
                metadata_offset=self.leadership.kraft_metadata_offset,
            )
            await self.reconcile()
            self.transition(DriverState.KRAFT_CONTROLLER_TO_BROKER_COMM)
            if self.before_dual_write is not None:
                await self.before_dual_write()
        except FencedOut:
            raise  # another controller holds ZooKeeper now: nothing of ours to hand back
        except BaseException as exc:
            if not self.leadership.holds_zk_controller:
                raise
            left = await self.abandon()
            if isinstance(exc, Zk2KraftError | KazooException):
                raise AbandonedError(f"{exc}. {left}") from exc
            log.error("event=abandoned %s", left)
            raise
        self.transition(
            DriverState.DUAL_WRITE,
            metadata_offset=self.leadership.kraft_metadata_offset,
            migration_zk_version=self.leadership.migration_zk_version,
        )

    def _migration_data(self) -> bytes | None:
        found = self.zk.get(paths.MIGRATION)
        return None if found is None else (found[0] or b"")

    async def abandon(self) -> str:
        """Hand ZooKeeper back after a failure before DUAL_WRITE; returns what ZooKeeper holds then, and
        the commands that finish the job when something could not be undone."""
        state = self.leadership
        released = restored = False
        try:
            released, restored = await self.run_zk(self.zk.abandon_leadership, state, self.migration_before)
        except (Zk2KraftError, KazooException) as exc:
            log.error("event=release_failed %s", exc)
        self.leadership = state.with_unknown_zk_controller()
        if self.state != DriverState.INACTIVE:
            self.transition(DriverState.INACTIVE, reason="failed before DUAL_WRITE", released=released)
        try:
            holder = await self.run_zk(self.zk.controller_holder)
            epoch = await self.run_zk(self.zk.get, paths.CONTROLLER_EPOCH)
        except (Zk2KraftError, KazooException) as exc:
            return f"ZooKeeper could not be read back after the failure ({exc}); check {paths.CONTROLLER}"
        shell = f"bin/zookeeper-shell.sh {self.zk_options.connect}"
        epoch_text = "absent" if epoch is None else (epoch[0] or b"").decode(errors="replace")
        parts = ["This bridge stopped before DUAL_WRITE; ZooKeeper is left as follows:"]
        if released:
            parts.append(f"{paths.CONTROLLER} released by this bridge, now: {holder.describe()};")
        elif holder.names(state.kraft_controller_id, state.kraft_controller_epoch):
            parts.append(
                f"{paths.CONTROLLER} still names this KRaft controller {state.kraft_controller_id}, so no "
                f"ZooKeeper-mode broker can be elected controller: free it with `{shell} delete "
                f"{paths.CONTROLLER}`;"
            )
        else:
            parts.append(f"{holder.describe()}, not released by this bridge;")
        if restored:
            parts.append(
                f"{paths.MIGRATION} put back as it was before this bridge started"
                + (" (absent);" if self.migration_before is None else ";")
            )
        elif self.migration_before is None:
            parts.append(
                f"{paths.MIGRATION} was created by this bridge and is still there: remove it with "
                f"`{shell} delete {paths.MIGRATION}` (only when no other KRaft controller runs);"
            )
        else:
            before = self.migration_before.decode(errors="replace")
            parts.append(
                f"{paths.MIGRATION} was not put back: restore it with `{shell} set {paths.MIGRATION} "
                f"'{before}'` (only when no other KRaft controller runs);"
            )
        parts.append(
            f"{paths.CONTROLLER_EPOCH} is {epoch_text} (this bridge's claim moved it on by one; that only "
            f"fences the controller before it, nothing to restore)."
        )
        if self.log.image.features.zk_migration_state == ZkMigrationState.MIGRATION and restored:
            parts.append(
                "The metadata log holds a completed copy ZooKeeper no longer follows: move --metadata-dir "
                "aside before starting again (a fresh copy is made)."
            )
        else:
            parts.append("The metadata log holds no completed copy; the next start copies ZooKeeper again.")
        return " ".join(parts)

    async def ensure_bootstrapped(self) -> None:
        """An empty log gets Kafka's bootstrap transaction (metadata.version, PRE_MIGRATION) first."""
        image = self.log.image
        state = image.features.zk_migration_state
        if state in (ZkMigrationState.PRE_MIGRATION, ZkMigrationState.MIGRATION):
            return
        mv = self.metadata_version or mvs.LATEST_PRODUCTION
        problem = bootstrap_refusal(image, mv)
        if problem is not None:
            raise MigrationMismatchError(problem)
        bootstrap = [] if image.features.metadata_version == mv.feature_level else bootstrap_records(mv)
        records = bootstrap_transaction(bootstrap, mv, ZkMigrationState.PRE_MIGRATION)
        await self._append_durably([records])
        log.info("event=bootstrap metadata_version=%s log_end_offset=%d", mv.name, self.log.end_offset)

    async def check_against_zookeeper(self) -> None:
        """Refuse a `/migration` that does not describe this log, unless told to adopt it."""
        problem = check_log_matches_migration(
            self.log.image, self.log.end_offset, self.log.leader_epoch, self.leadership,
            quorum_committed=self.quorum_committed,
        )  # fmt: skip
        if problem is None:
            return
        if not self.adopt_existing_migration:
            holder = await self.run_zk(self.zk.controller_holder)
            raise MigrationMismatchError(mismatch_refusal(problem, holder, self.node_id))
        log.warning("event=adopt_existing_migration problem=%r", problem)
        if self.log.image.features.zk_migration_state != ZkMigrationState.MIGRATION:
            # Adopting means: migrate ZooKeeper's current state into our log as if /migration were empty.
            self.leadership = self.leadership.with_kraft_metadata_offset_and_epoch(-1, -1)

    async def become_controller(self) -> None:
        """Claim `/controller` + `/controller_epoch`, then write `/migration` unconditionally (§3, §2.3)."""
        backoff = 0.1
        while True:
            try:
                claimed = await self.run_zk(
                    self.zk.claim_controller_leadership, self.leadership, self.node_id, self.log.leader_epoch
                )
            except ControllerMovedError as exc:
                raise FencedOut(str(exc)) from exc
            if claimed.holds_zk_controller:
                self.leadership = claimed  # held from here on: a failure below hands it back
                break
            log.info("event=claim_retry reason=raced backoff_s=%.1f", backoff)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 5.0)
        self.leadership = await self.run_zk(self.zk.set_migration_state, claimed, MATCH_ANY_VERSION)
        log.info(
            "event=controller_claimed zk_controller_epoch=%d kraft_controller_epoch=%d migration_zk_version=%d",
            self.leadership.zk_controller_epoch,
            self.leadership.kraft_controller_epoch,
            self.leadership.migration_zk_version,
        )

    async def migrate(self) -> MigrationOutcome:
        """Copy ZooKeeper into the log in one metadata transaction, then record its end in `/migration`."""
        started = time.monotonic_ns()
        copy, model = await asyncio.get_running_loop().run_in_executor(
            None, read_copy_for_migration, self.zk_options
        )
        mv = self.log.image.metadata_version
        # Off the event loop, and the appends below yield between batches: a quorum's Raft layer shares the
        # loop and must keep answering the other voters (they elect another leader after 2 s of silence).
        translation = await asyncio.get_running_loop().run_in_executor(
            None, lambda: translate(model, metadata_version=mv)
        )
        manifest = ManifestBuilder()
        transactional = mv.is_metadata_transaction_supported()
        writes: list[list[RecordAndVersion]] = []
        if transactional:
            writes.append(migration_begin_records())
        batches = coalesce(translation.record_lists, self.min_batch_size)
        completion = migration_completion_records(mv)
        if not transactional:
            log.warning("metadata.version %s has no metadata transactions: the migration is not atomic", mv)
        last = None
        for records in writes:
            last = self.log.append(records)
        for batch in batches:
            batch_started = time.monotonic_ns()
            for start in range(0, len(batch), MAX_RECORDS_PER_APPEND):
                last = self._append_split(batch[start : start + MAX_RECORDS_PER_APPEND])
            manifest.accept_batch(batch, time.monotonic_ns() - batch_started)
            await asyncio.sleep(0)
        last = self.log.append(completion)
        await asyncio.wrap_future(last.durable)
        built = manifest.build()
        outcome = MigrationOutcome(
            manifest=MigrationManifest(
                total_records=built.total_records,
                total_batches=built.total_batches,
                total_batch_duration_ns=built.total_batch_duration_ns,
                duration_ns=time.monotonic_ns() - started,
                record_type_counts=built.record_type_counts,
            ),
            last_offset=last.last_offset,
            last_epoch=self.log.leader_epoch,
            broker_ids=sorted(translation.broker_ids),
            warnings=[*model.warnings, *translation.warnings],
        )
        for warning in outcome.warnings:
            log.warning("event=migration_warning %s", warning)
        self.leadership = await self.run_zk(
            self.zk.set_migration_state,
            self.leadership.with_kraft_metadata_offset_and_epoch(outcome.last_offset, outcome.last_epoch),
        )
        self.migration = outcome
        self.loaded_copy = copy
        log.info(outcome.completion_message(), extra={"event": "migration_complete"})
        return outcome

    async def reconcile(self) -> list[ZkOperation]:
        """SYNC_KRAFT_TO_ZK: write to ZooKeeper what differs from the log's image, and what Kafka's full sync always
        rewrites (§7.5)."""
        loop = asyncio.get_running_loop()
        started = time.perf_counter()
        copy = await loop.run_in_executor(None, self.warm_tree) if self.warm_tree is not None else None
        source = "read" if copy is None else "mirror"
        loaded, self.loaded_copy = self.loaded_copy, None
        if copy is None and loaded is not None:
            # Right after the initial load: ZooKeeper as it read it after the claim, its topics decoded.
            # Since then only this controller wrote (/migration); a hand edit meanwhile is the foreign-write
            # watcher's first scan's to find.
            copy, source = loaded, "load"
        if copy is None:
            options = self.zk_options
            tree = await loop.run_in_executor(None, lambda: read_tree(options, acls=False))
            copy = MirroredTree(tree, {})
        read = time.perf_counter()
        model: ZkClusterModel = await loop.run_in_executor(None, copy.model)
        parsed = time.perf_counter()
        ops = plan_reconciliation(self.log.image, model)
        seconds = f"read_s={read - started:.2f} parse_s={parsed - read:.2f} plan_s={time.perf_counter() - parsed:.2f}"
        # Changes appended from now on are written after these ops, by the pipeline, in log order.
        self.zk_sync_planned = True
        self.reconciliation_ops = ops
        offset = self.log.image.provenance.last_contained_offset
        # Queued on the writer thread now (before any later change's dual write), written once the image it
        # planned from is durable: /migration must never name an offset the log could still lose.
        await self.run_zk(self._apply_when_durable, ops, offset, self.log.leader_epoch)
        log.info(
            "event=reconciliation zookeeper=%s %s ops=%d %s writes: %s",
            source, seconds, len(ops), format_op_counts(count_op_types(ops)), summarize(ops),
            extra={"event": "reconciliation", "ops": len(ops), "zookeeper": source},
        )  # fmt: skip
        return ops

    # ------------------------------------------------------------------ writes (on the writer thread)

    def _apply_when_durable(self, ops: Sequence[ZkOperation], offset: int, epoch: int) -> None:
        try:
            self.log.wait_durable(offset)
            self.apply_ops(ops, offset, epoch, "snapshot")
        except BaseException as exc:
            # The dual writes queued behind it must not record offsets over a partial reconciliation.
            self.zk_sync_failed = error_text(exc)
            raise

    def prepare_ops(self, ops: Sequence[ZkOperation]) -> PreparedOps | None:
        """Plan `ops` for `apply_ops` ahead of time (writer thread, while the log fsyncs); None: plan then."""
        if self.fenced_reason is not None or not ops:
            return None
        try:
            return self.zk.prepare(ops, self.leadership)
        except (Zk2KraftError, KazooException):  # a read while planning failed: apply_ops meets it again
            return None

    def apply_ops(
        self,
        ops: Sequence[ZkOperation],
        offset: int,
        epoch: int,
        kind: str,
        *,
        record_offset: bool = True,
        prepared: PreparedOps | None = None,
    ) -> None:
        """Apply `ops` in order, pipelined, recording `offset`/`epoch` in `/migration` with the last (§7.4).

        Runs on the ZooKeeper writer thread. `record_offset=False` leaves `/migration`'s offset as it is. A
        lost fence marks the driver fenced and raises FencedOut; a batch that did not land whole raises
        ZkBatchError (the driver keeps `/migration`'s version as the batch left it). `prepared`: from
        `prepare_ops(ops)` while nothing was written since (else `ops` are planned again).
        """
        if self.fenced_reason is not None:
            raise FencedOut(f"not writing to ZooKeeper: {self.fenced_reason}")
        started = time.monotonic()
        try:
            state = self.leadership
            final = state
            if record_offset and (offset > state.kraft_metadata_offset or ops):
                final = state.with_kraft_metadata_offset_and_epoch(offset, epoch)
            self.leadership = self.zk.apply_all(ops, state, final_state=final, prepared=prepared)
        except (FencedError, ControllerMovedError) as exc:
            self._fence(exc)
        except ZkBatchError as exc:
            self.leadership = exc.state  # /migration's version as the failed batch left it
            raise
        except (Zk2KraftError, KazooException):
            self._resync_migration_version()
            raise
        if self.on_zk_write is not None and ops:
            self.on_zk_write(kind, time.monotonic() - started, len(ops))

    def one_multi(self, prepared: PreparedOps | None, offset: int, epoch: int) -> OneMulti | None:
        """`prepared` as one multi recording `offset`/`epoch`, to send without waiting (None: `apply_ops`).

        The caller keeps every other ZooKeeper write of the driver back until `landed_one` or
        `resend_one` has been called with it.
        """
        if self.fenced_reason is not None or prepared is None or prepared.state != self.leadership:
            return None
        final = self.leadership.with_kraft_metadata_offset_and_epoch(offset, epoch)
        return self.zk.one_multi(prepared, final)

    def send_one(self, one: OneMulti, relay: ReplyRelay, on_send: Callable[[], None] | None = None) -> None:
        """Send `one` without waiting: `relay` hears its reply and `on_send` runs as it goes out (both on
        kazoo's connection thread); the reply goes to `landed_one`."""
        self.zk.send_one(one, relay, on_send)

    def drop_one(self, one: OneMulti) -> None:
        """`one` will not be sent (its batch is written the usual way)."""
        self.zk.drop_one(one)

    def landed_one(self, one: OneMulti, raw: Any) -> MultiReply | None:
        """`one`'s reply if it landed (any thread, never blocks): the leadership has moved on, and
        `settle_one(one, reply, seconds)` is due before the next write.

        None: nothing of it landed (settled already); `apply_ops` with the same operations redoes them (and
        judges a fence).
        """
        reply, state = self.zk.landed_one(one, raw)
        if state is None:
            self.zk.settle_one(one, reply)
            return None
        self.leadership = state
        return reply

    def settle_one(self, one: OneMulti, reply: MultiReply, seconds: float) -> None:
        """The bookkeeping of a landed `one` (write observer, known containers, metrics)."""
        self.zk.settle_one(one, reply)
        self._wrote(one, seconds)

    def resend_one(self, one: OneMulti) -> bool:
        """After `one`'s reply was lost with the connection (writer thread): send it again; True if it
        landed (then settled and the leadership moved on). A lost fence marks the driver fenced and raises
        FencedOut."""
        started = time.monotonic()
        try:
            state = self.zk.resend_one(one)
        except (FencedError, ControllerMovedError) as exc:
            self._fence(exc)
        except (Zk2KraftError, KazooException):
            self._resync_migration_version()
            raise
        if state is None:
            return False
        self.leadership = state
        self._wrote(one, time.monotonic() - started)
        return True

    def _wrote(self, one: OneMulti, seconds: float) -> None:
        if self.on_zk_write is not None:
            self.on_zk_write("delta", seconds, len(one.prepared.operations))

    def _fence(self, exc: Exception) -> NoReturn:
        self.fenced_reason = str(exc)
        log.error("event=fenced reason=%r", str(exc), extra={"event": "fenced"})
        if self.on_fenced is not None:
            self.on_fenced(str(exc))
        raise FencedOut(str(exc)) from exc

    def _resync_migration_version(self) -> None:
        """After a failed write: adopt `/migration`'s version if the znode still names us.

        An op can fail after its fenced multi bumped `/migration` (e.g. in an unfenced notification that
        follows); without this the next write would see BADVERSION and wrongly take itself for fenced.
        """
        try:
            found = self.zk.get(paths.MIGRATION)
        except (Zk2KraftError, KazooException) as exc:
            log.warning("cannot re-read %s after a failed write: %s", paths.MIGRATION, exc)
            return
        if found is None:
            return
        data, stat = found
        try:
            znode = decode_migration(paths.MIGRATION, data, zk_version=stat.version, mtime=stat.mtime)
        except Zk2KraftError:
            return
        state = self.leadership
        ours = (znode.kraft_controller_id, znode.kraft_controller_epoch) == (
            state.kraft_controller_id,
            state.kraft_controller_epoch,
        )
        if ours and stat.version != state.migration_zk_version:
            self.leadership = state.with_migration_zk_version(stat.version)

    def _append_split(self, records: list[RecordAndVersion]) -> Any:
        """Append a non-atomic controller write, halving it while a batch would exceed KRaft's size limit."""
        try:
            return self.log.append(records)
        except InvalidRequestError:
            if len(records) < 2:
                raise
            middle = len(records) // 2
            self._append_split(records[:middle])
            return self._append_split(records[middle:])

    async def _append_durably(self, batches: list[list[RecordAndVersion]]) -> Any:
        last = None
        for records in batches:
            last = self.log.append(records)
        assert last is not None
        await asyncio.wrap_future(last.durable)
        return last


async def plan_dry_run(
    options: ZkConnectOptions,
    image: MetadataImage,
    run_in_thread: Callable[[Callable[[], ZkClusterModel]], Awaitable[ZkClusterModel]],
) -> list[str]:
    """The lines `--dry-run` prints: the reconciliation SYNC_KRAFT_TO_ZK would write for `image`."""
    model = await run_in_thread(lambda: from_tree(read_tree(options, acls=False), strict=False))
    return describe(plan_reconciliation(image, model))


def read_migration_znode(zk: ZkMigrationClient) -> MigrationLeadershipState | None:
    """`/migration` as it is, without creating it (for read-only runs)."""
    found = zk.get(paths.MIGRATION)
    if found is None:
        return None
    data, stat = found
    return MigrationLeadershipState.from_znode(
        decode_migration(paths.MIGRATION, data, zk_version=stat.version, mtime=stat.mtime)
    )
