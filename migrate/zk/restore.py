"""Rebuild ZooKeeper's latest consistent tree offline: newest valid snapshot + replay of the logs after it.

Mirrors `FileTxnSnapLog.restore` and `DataTree.processTxn` (ZooKeeper 3.8/3.9): fuzzy snapshots, the
NONODE/NODEEXISTS tolerance, atomic multis, cversion/pzxid rules, closed sessions' ephemerals, digests.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from migrate.errors import CorruptDataError, OlderStateError, Zk2KraftError
from migrate.zk.files.digest import digest_sum, node_digest, to_signed64
from migrate.zk.files.names import DIGEST_VERSION, LOG_PREFIX, SNAPSHOT_PREFIX, zxid_from_name
from migrate.zk.files.owners import parent_path, session_of_owner, to_client_view_in_place, ttl_owner
from migrate.zk.files.snapshot_read import Snapshot, quick_check_problem, read_snapshot
from migrate.zk.files.snapshot_write import system_nodes
from migrate.zk.files.txnlog import (
    CheckVersionTxn,
    CloseSessionTxn,
    CreateSessionTxn,
    CreateTxn,
    DeleteTxn,
    ErrorTxn,
    LogEntry,
    MultiTxn,
    OpCode,
    SetACLTxn,
    SetDataTxn,
    TxnRecord,
    open_txn_log,
)
from migrate.zk.tree import OPEN_ACL_UNSAFE, Acl, Stat, ZNode, ZTree

# KeeperException.Code values replay can produce.
OK = 0
NONODE = -101
NODEEXISTS = -110
_ERROR_NAMES = {NONODE: "NONODE", NODEEXISTS: "NODEEXISTS"}

MAX_SNAPSHOT_CANDIDATES = 100  # FileSnap.findNValidSnapshots(100)
OLDER_STATE_MARK = "OLDER ZOOKEEPER STATE ACCEPTED"

_OWNER_OF = operator.attrgetter("stat.ephemeral_owner")

Progress = Callable[[str, int, int], None]
"""progress(stage, done, total): stage `snapshot` (bytes), `log <name>` (bytes of that file)."""


@dataclass(frozen=True, slots=True)
class SkippedSnapshot:
    file: str
    reason: str
    zxid: int = 0


@dataclass(frozen=True, slots=True)
class LogStop:
    """A log that did not end cleanly: where, why, and the last zxid applied before it."""

    file: str
    offset: int
    kind: str  # LogEnd.kind: truncated, corrupt or short
    detail: str
    last_zxid: int

    def __str__(self) -> str:
        name = Path(self.file).name
        where = (
            f"{self.kind} entry at byte {self.offset} of {name}"
            if self.kind in ("truncated", "corrupt")
            else f"{name} is {self.kind}"
        )
        return f"stopped at zxid {self.last_zxid:#x}: {where}" + (f" ({self.detail})" if self.detail else "")


@dataclass(slots=True)
class RestoreReport:
    """What `load_data_dir` did: snapshot chosen (and skipped), logs replayed, checks, anomalies."""

    snapshot_dir: str
    log_dir: str
    snapshot: str | None = None
    snapshot_zxid: int = 0
    skipped_snapshots: list[SkippedSnapshot] = field(default_factory=list)
    logs_read: list[str] = field(default_factory=list)
    txns_applied: int = 0
    txns_in_snapshot: int = 0
    last_zxid: int = 0
    up_to_zxid: int | None = None
    stops: list[LogStop] = field(default_factory=list)
    missing: list[tuple[int, int]] = field(default_factory=list)  # zxid ranges no log holds
    ignored_errors: dict[str, int] = field(default_factory=dict)
    digests_checked: bool = False
    digest_matches: int = 0
    digest_mismatches: list[int] = field(default_factory=list)
    snapshot_digest: str = "absent"
    sessions: dict[int, int] = field(default_factory=dict)
    orphan_ephemerals_removed: list[str] = field(default_factory=list)
    unresolved_acls: list[str] = field(default_factory=list)
    older_state_accepted: bool = False
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def truncation(self) -> LogStop | None:
        """The torn or damaged end of the last log replayed, if that is where replay stopped."""
        if self.stops and self.logs_read and self.stops[-1].file == self.logs_read[-1]:
            return self.stops[-1]
        return None

    def summary(self) -> str:
        lines = [
            f"snapshot: {self.snapshot or '(none)'} (zxid {self.snapshot_zxid:#x})",
            *(f"skipped snapshot {s.file}: {s.reason}" for s in self.skipped_snapshots),
            f"logs read: {', '.join(Path(p).name for p in self.logs_read) or '(none)'}",
            f"transactions applied: {self.txns_applied} (already in snapshot: {self.txns_in_snapshot})",
            f"last zxid: {self.last_zxid:#x}",
        ]
        lines += [str(stop) for stop in self.stops]
        if self.digests_checked:
            lines.append(
                f"digests: snapshot {self.snapshot_digest}, {self.digest_matches} transaction digests match, "
                f"{len(self.digest_mismatches)} mismatch"
            )
        lines += [f"warning: {w}" for w in self.warnings]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def version_dir(path: str | os.PathLike[str], what: str) -> Path:
    """`path` itself if it holds the files, or its `version-2/` subdirectory."""
    folder = Path(path)
    if not folder.is_dir():
        raise Zk2KraftError(f"ZooKeeper {what} {folder} is not a directory")
    if folder.name != "version-2" and (folder / "version-2").is_dir():
        return folder / "version-2"
    return folder


def list_snapshots(folder: Path) -> list[tuple[int, Path]]:
    """Snapshot files by zxid, newest first (ties in name order)."""
    found = [(zxid_from_name(p.name, SNAPSHOT_PREFIX), p) for p in folder.iterdir() if p.is_file()]
    return sorted(((z, p) for z, p in found if z is not None), key=lambda zp: (-zp[0], zp[1].name))


def list_logs(folder: Path) -> list[tuple[int, Path]]:
    """Log files by start zxid, oldest first; a plain file wins over a `.gz` copy of the same log."""
    by_zxid: dict[int, Path] = {}
    for p in sorted(folder.iterdir(), key=lambda q: q.name.endswith(".gz")):
        zxid = zxid_from_name(p.name, LOG_PREFIX)
        if zxid is not None and p.is_file():
            by_zxid.setdefault(zxid, p)
    return sorted(by_zxid.items())


def logs_after(logs: list[tuple[int, Path]], snap_zxid: int) -> list[Path]:
    """FileTxnLog.getLogFiles: the newest log starting at or before `snap_zxid`, and every later one."""
    start = 0
    for zxid, _ in logs:
        if zxid > snap_zxid:
            break
        start = max(start, zxid)
    return [p for zxid, p in logs if zxid >= start]


def load_data_dir(
    data_dir: str | os.PathLike[str],
    log_dir: str | os.PathLike[str] | None = None,
    *,
    up_to_zxid: int | None = None,
    progress: Progress | None = None,
    verify_digests: bool = True,
    expire_orphan_ephemerals: bool = True,
    trust_empty_snapshot: bool = False,
    client_view: bool = True,
    accept_older_state: bool = False,
) -> tuple[ZTree, RestoreReport]:
    """The tree a ZooKeeper server would load from `data_dir` (and `log_dir`), with a report.

    `data_dir` / `log_dir` may be ZooKeeper's `dataDir` / `dataLogDir` or their `version-2/`. `up_to_zxid`
    stops replay after that zxid (and only considers snapshots at or before it). `verify_digests` compares
    the tree digest with those ZooKeeper recorded (about 10% more time). Like the server on start-up,
    ephemerals of sessions missing from the session table are removed (`expire_orphan_ephemerals`).
    Without any snapshot, logs are replayed onto an empty tree only with `trust_empty_snapshot`
    (zookeeper.snapshot.trust.empty). Stats are what clients see unless `client_view` is False.
    Where ZooKeeper silently falls back from a damaged snapshot to an older one, this refuses
    (OlderStateError) unless the logs replay past the damaged one's zxid or `accept_older_state` is set.
    """
    snap_dir = version_dir(data_dir, "data directory")
    txn_dir = snap_dir if log_dir is None else version_dir(log_dir, "log directory")
    report = RestoreReport(snapshot_dir=str(snap_dir), log_dir=str(txn_dir), up_to_zxid=up_to_zxid)
    logs = list_logs(txn_dir)

    snapshot = _choose_snapshot(snap_dir, up_to_zxid, report, progress, verify_digests)
    if snapshot is None:
        if not logs and report.skipped_snapshots:
            damaged = "; ".join(f"{Path(s.file).name}: {s.reason}" for s in report.skipped_snapshots)
            raise Zk2KraftError(f"no valid snapshot in {snap_dir} ({damaged}) and no transaction log in {txn_dir}")
        if not logs:
            raise Zk2KraftError(f"no ZooKeeper snapshot or transaction log in {snap_dir}")
        if not trust_empty_snapshot:
            at_or_before = "" if up_to_zxid is None else f" at or before zxid {up_to_zxid:#x}"
            raise Zk2KraftError(
                f"no valid snapshot{at_or_before} in {snap_dir}, but there are transaction logs in {txn_dir}: "
                "replaying them onto an empty tree may lose data (pass trust_empty_snapshot to do it anyway)"
            )
        tree = ZTree(source=str(snap_dir), nodes=system_nodes(client_view=False))
        snap_zxid, sessions = 0, {}
        report.warnings.append("no snapshot: logs replayed onto an empty tree")
    else:
        tree, snap_zxid, sessions = snapshot.tree, snapshot.zxid, dict(snapshot.sessions)
        report.snapshot, report.snapshot_zxid = snapshot.source, snap_zxid

    check = verify_digests
    start_digest = snapshot.computed_digest if snapshot is not None else None
    replay = Replay(tree.nodes, sessions, check_digests=check, digest=start_digest)
    report.digests_checked = check
    if not check:
        report.snapshot_digest = "not checked"
    elif snapshot is not None:
        _start_digest_checks(replay, snapshot, report)
    if (
        snapshot is not None
        and up_to_zxid is not None
        and snapshot.digest
        and snapshot.digest.zxid > up_to_zxid
    ):
        report.warnings.append(
            f"snapshot {Path(snapshot.source).name} may already hold changes up to zxid {snapshot.digest.zxid:#x}, "
            f"after the requested {up_to_zxid:#x} (fuzzy snapshot); choose an older snapshot for an exact state"
        )

    last_zxid = _replay_logs(replay, logs_after(logs, snap_zxid), snap_zxid, up_to_zxid, report, progress)

    if replay.pending_snapshot_digest is not None:
        report.snapshot_digest = "not reached"
        report.warnings.append(
            f"highest txn zxid {last_zxid:#x} does not reach the snapshot digest zxid "
            f"{replay.pending_snapshot_digest[0]:#x}: transactions are missing (is dataLogDir elsewhere?)"
        )
    report.warnings += [f"replay of {Path(stop.file).name} {stop}" for stop in report.stops]
    _judge_damaged_snapshots(report, bool(logs), last_zxid, accept_older_state)
    if not logs and not report.older_state_accepted:  # else its warning already says so
        report.notes.append(
            f"no transaction log in {txn_dir}: the state is the snapshot's alone; if ZooKeeper's dataLogDir "
            "is elsewhere, give it with --zk-log-dir to include the changes after the snapshot"
        )
    if expire_orphan_ephemerals:
        report.orphan_ephemerals_removed = replay.expire_orphans(last_zxid)
    if snapshot is not None:
        report.unresolved_acls = sorted(
            p for p in snapshot.unresolved_acls if p in tree.nodes and tree.nodes[p].acl == ()
        )
        if report.unresolved_acls:
            report.warnings.append(
                f"{len(report.unresolved_acls)} znodes reference ACLs missing from the snapshot's ACL cache "
                f"(first: {report.unresolved_acls[0]}); their ACL is shown as empty"
            )
    report.last_zxid = last_zxid
    report.sessions = dict(sessions)
    report.ignored_errors = {_ERROR_NAMES.get(k, str(k)): v for k, v in sorted(replay.ignored.items())}
    report.digest_matches = replay.digest_matches
    report.digest_mismatches = replay.digest_mismatches
    if replay.snapshot_digest_status:
        report.snapshot_digest = replay.snapshot_digest_status
    if client_view:
        to_client_view_in_place(tree.nodes)
    source = f"{snap_dir} ({Path(report.snapshot).name if report.snapshot else 'no snapshot'}"
    source += f" + {report.txns_applied} txns to zxid {last_zxid:#x})"
    return ZTree(source=source, nodes=tree.nodes, last_zxid=last_zxid), report


def _choose_snapshot(
    folder: Path, up_to_zxid: int | None, report: RestoreReport, progress: Progress | None, with_digest: bool
) -> Snapshot | None:
    """The newest snapshot that parses with all seals intact (older ones on failure), as FileSnap does."""
    candidates = [(z, p) for z, p in list_snapshots(folder) if up_to_zxid is None or z <= up_to_zxid]
    passed_quick = 0
    for zxid, path in candidates[:MAX_SNAPSHOT_CANDIDATES]:
        problem = quick_check_problem(path)
        if problem is not None:
            report.skipped_snapshots.append(SkippedSnapshot(str(path), problem, zxid))
            continue
        passed_quick += 1
        size = path.stat().st_size
        if progress:
            progress("snapshot", 0, size)
        try:
            snapshot = read_snapshot(path, client_view=False, with_digest=with_digest)
        except CorruptDataError as exc:
            where = f"at byte {exc.offset}: " if exc.offset is not None else ""
            report.skipped_snapshots.append(SkippedSnapshot(str(path), where + exc.problem, zxid))
            continue
        if progress:
            progress("snapshot", size, size)
        return snapshot
    if passed_quick:
        reasons = "; ".join(f"{Path(s.file).name}: {s.reason}" for s in report.skipped_snapshots)
        raise Zk2KraftError(f"not able to find a valid snapshot in {folder}: {reasons}")
    return None


def _judge_damaged_snapshots(report: RestoreReport, logs_found: bool, last_zxid: int, accept: bool) -> None:
    """Say which snapshots were skipped; refuse (unless `accept`) when the state read is older than one of them.

    FileSnap moves on to an older snapshot without a word; the logs may still bring that one up to date.
    """
    used = Path(report.snapshot).name if report.snapshot else "no snapshot"
    for skipped in report.skipped_snapshots:
        report.warnings.append(f"skipped damaged snapshot {Path(skipped.file).name}: {skipped.reason}")
    newer = [s for s in report.skipped_snapshots if s.zxid > report.snapshot_zxid]
    if not newer:
        return
    newest = max(newer, key=lambda s: s.zxid)
    name = Path(newest.file).name
    holes = [(lo, hi) for lo, hi in report.missing if lo <= newest.zxid]
    if last_zxid >= newest.zxid and not holes:
        report.warnings.append(
            f"used the older {used} (zxid {report.snapshot_zxid:#x}) instead of the damaged {name}; the "
            f"transaction logs replay it up to zxid {last_zxid:#x}, at least as far as {name} (zxid "
            f"{newest.zxid:#x}), so nothing is lost"
        )
        return
    if not logs_found:
        why = (
            f"there is no transaction log in {report.log_dir} (ZooKeeper's dataLogDir is often elsewhere: "
            "give it with --zk-log-dir)"
        )
    elif holes:
        lo, hi = holes[0]
        last_zxid = lo - 1
        why = f"the transaction logs in {report.log_dir} lack transactions {lo:#x} to {hi:#x}"
    else:
        stopped = f"; replay {report.stops[-1]}" if report.stops else ""
        why = f"the transaction logs in {report.log_dir} replay it only up to zxid {last_zxid:#x}{stopped}"
    gap = f"zxid {last_zxid:#x} instead of at least {newest.zxid:#x}"
    if not accept:
        raise OlderStateError(
            f"newest snapshot {newest.file} is damaged ({newest.reason}); the newest valid one, {used} (zxid "
            f"{report.snapshot_zxid:#x}), is older and {why}: the tree would be at {gap}, missing whatever "
            "changed in between. Copy an intact snapshot or the logs, or pass --accept-older-zk-state to "
            "use the older state anyway"
        )
    report.older_state_accepted = True
    report.warnings.append(
        f"{OLDER_STATE_MARK}: newest snapshot {name} is damaged and {why}; using {used}, at {gap}"
    )


def _start_digest_checks(replay: Replay, snapshot: Snapshot, report: RestoreReport) -> None:
    """Set up the snapshot digest comparison as DataTree.deserializeZxidDigest / FileSnap.deserialize do."""
    digest = snapshot.digest
    if digest is None:
        report.snapshot_digest = "absent"
    elif digest.zxid <= 0:
        report.snapshot_digest = "empty"
    elif digest.zxid < snapshot.zxid:
        report.snapshot_digest = "ignored (older than the snapshot)"
    elif digest.version != DIGEST_VERSION:
        report.snapshot_digest = f"skipped (digest version {digest.version})"
    elif digest.zxid == snapshot.zxid:
        ok = replay.current_digest() == digest.digest
        report.snapshot_digest = "verified" if ok else "mismatch"
    else:
        replay.pending_snapshot_digest = (digest.zxid, digest.digest)
        report.snapshot_digest = "not reached"


def _replay_logs(
    replay: Replay,
    files: list[Path],
    snap_zxid: int,
    up_to_zxid: int | None,
    report: RestoreReport,
    progress: Progress | None,
) -> int:
    """Apply every logged txn after `snap_zxid` (up to `up_to_zxid`); returns the highest zxid applied."""
    highest = snap_zxid
    started = False
    for path in files:
        with open_txn_log(path) as reader:
            report.logs_read.append(str(path))
            stage = f"log {path.name}"
            for count, entry in enumerate(reader):
                zxid = entry.header.zxid
                if not started:
                    # FileTxnIterator starts at the first txn after the snapshot's zxid...
                    if zxid <= snap_zxid:
                        report.txns_in_snapshot += 1
                        continue
                    started = True
                if up_to_zxid is not None and zxid > up_to_zxid:
                    return highest
                # ...and from there applies everything in file order, complaining if zxids go back.
                if zxid < highest and highest != 0:
                    report.warnings.append(
                        f"zxid went backwards in {path.name}: {zxid:#x} after {highest:#x}"
                    )
                else:
                    if zxid > highest + 1 and zxid >> 32 == highest >> 32:
                        # Every txn of an epoch takes the next zxid, failed ones included.
                        report.missing.append((highest + 1, zxid - 1))
                        report.warnings.append(
                            f"transactions {highest + 1:#x} to {zxid - 1:#x} are in no log (before {path.name})"
                        )
                    highest = zxid
                replay.apply(entry)
                report.txns_applied += 1
                if progress and count % 4096 == 0:
                    progress(stage, reader.position, reader.size)
            end = reader.end
            if progress:
                progress(stage, reader.size, reader.size)
        if end is not None and not end.clean:
            report.stops.append(LogStop(str(path), end.offset, end.kind, end.detail, highest))
    return highest


class Replay:
    """Applies transactions to a node map with ZooKeeper's restore semantics (DataTree.processTxn)."""

    def __init__(
        self,
        nodes: dict[str, ZNode],
        sessions: dict[int, int],
        *,
        check_digests: bool = True,
        digest: int | None = None,
    ) -> None:
        """`nodes` hold stored stats (client_view=False); `digest` is their tree digest if already known."""
        self.nodes = nodes
        self.sessions = sessions
        self.ephemerals: dict[int, set[str]] = {}
        owners = map(_OWNER_OF, nodes.values())
        for path, owner in [(p, o) for p, o in zip(nodes, owners, strict=True) if o]:
            session = session_of_owner(owner)
            if session is not None:
                self.ephemerals.setdefault(session, set()).add(path)
        self.check_digests = check_digests
        if not check_digests:
            self.digest = 0
        else:
            self.digest = digest_sum(nodes) if digest is None else digest
        self.pending_snapshot_digest: tuple[int, int] | None = None
        self.snapshot_digest_status = ""
        self.digest_matches = 0
        self.digest_mismatches: list[int] = []
        self.ignored: dict[int, int] = {}

    def current_digest(self) -> int:
        return to_signed64(self.digest)

    # ---------------------------------------------------------------- one logged transaction

    def apply(self, entry: LogEntry) -> None:
        """Apply one top-level logged txn, then compare digests as DataTree does."""
        header = entry.header
        self._process(header.type, entry.record, header.client_id, header.zxid, header.time)
        if not self.check_digests:
            return
        pending = self.pending_snapshot_digest
        if pending is not None and header.zxid == pending[0]:
            self.snapshot_digest_status = "verified" if self.current_digest() == pending[1] else "mismatch"
            self.pending_snapshot_digest = pending = None
        # While the snapshot is still fuzzy (its digest zxid not reached) txn digests cannot match.
        if pending is None and entry.digest is not None and entry.digest.version == DIGEST_VERSION:
            if entry.digest.digest == self.current_digest():
                self.digest_matches += 1
            else:
                self.digest_mismatches.append(header.zxid)

    def _process(self, op: int, record: TxnRecord | None, session: int, zxid: int, time: int) -> None:
        err = OK
        if op == OpCode.CREATE_SESSION:
            if isinstance(record, CreateSessionTxn):
                self.sessions[session] = record.timeout
        elif op == OpCode.CLOSE_SESSION:
            self.sessions.pop(session, None)
            paths = record.paths_to_delete if isinstance(record, CloseSessionTxn) else None
            self.kill_session(session, zxid, paths)
        elif isinstance(record, CreateTxn):
            owner = self._owner(op, record, session)
            err = self.create(record.path, record.data, record.acl, owner, record.parent_cversion, zxid, time)
            if op == OpCode.CREATE and err == NODEEXISTS:
                # A node serialized before its parent's snapshot copy: raise the parent's cversion/pzxid.
                parent = record.path[: record.path.rfind("/")]
                err = self.set_cversion_pzxid(parent or "/", record.parent_cversion, zxid)
        elif isinstance(record, DeleteTxn):
            err = self.delete(record.path, zxid)
        elif isinstance(record, SetDataTxn):
            err = self.set_data(record.path, record.data, record.version, zxid, time)
        elif isinstance(record, SetACLTxn):
            err = self.set_acl(record.path, record.acl, record.version)
        elif isinstance(record, MultiTxn):
            # One error sub-txn means the multi failed at prep time: none of it is applied.
            if not any(sub.type == OpCode.ERROR for sub in record.txns):
                for sub in record.txns:
                    self._process(sub.type, sub.record, session, zxid, time)
        elif isinstance(record, ErrorTxn | CheckVersionTxn) or record is None:
            pass
        if err != OK:
            self.ignored[err] = self.ignored.get(err, 0) + 1

    @staticmethod
    def _owner(op: int, record: CreateTxn, session: int) -> int:
        if op == OpCode.CREATE_CONTAINER:
            return -0x8000_0000_0000_0000
        if op == OpCode.CREATE_TTL:
            return ttl_owner(record.ttl or 0) if record.ttl else 0
        return session if record.ephemeral else 0

    # ---------------------------------------------------------------- tree operations

    def _restat(self, path: str, node: ZNode, stat: Stat) -> None:
        """Swap in a new Stat for `node`, keeping the running digest in step."""
        if self.check_digests:
            self.digest += node_digest(path, node.data, stat) - node_digest(path, node.data, node.stat)
        node.stat = stat

    def create(
        self,
        path: str,
        data: bytes | None,
        acl: tuple[Acl, ...] | None,
        owner: int,
        parent_cversion: int,
        zxid: int,
        time: int,
    ) -> int:
        parent_key = parent_path(path)
        parent = self.nodes.get(parent_key) if parent_key is not None else None
        if parent is None:
            return NONODE
        acls = OPEN_ACL_UNSAFE if acl is None else acl
        existing = self.nodes.get(path)
        if existing is not None:
            existing.acl = acls  # ZooKeeper replaces the ACL even though the create fails
            return NODEEXISTS
        assert parent_key is not None
        stat = parent.stat
        if parent_cversion == -1:
            parent_cversion = stat.cversion + 1
        if parent_cversion > stat.cversion:
            self._restat(
                parent_key, parent, _with_children(stat, parent_cversion, zxid, stat.num_children + 1)
            )
        else:
            parent.stat = _with_children(stat, stat.cversion, stat.pzxid, stat.num_children + 1)
        child = ZNode(
            path,
            data,
            Stat(zxid, zxid, time, time, 0, 0, 0, owner, 0 if data is None else len(data), 0, zxid),
            acls,
        )
        self.nodes[path] = child
        if self.check_digests:
            self.digest += node_digest(path, data, child.stat)
        session = session_of_owner(owner)
        if session is not None:
            self.ephemerals.setdefault(session, set()).add(path)
        return OK

    def delete(self, path: str, zxid: int) -> int:
        parent_key = parent_path(path)
        parent = self.nodes.get(parent_key) if parent_key is not None else None
        if parent is None:
            return NONODE
        assert parent_key is not None
        child = self.nodes.get(path)
        stat = parent.stat
        # pzxid moves even when the child is already gone (fuzzy snapshot), but never backwards.
        children = stat.num_children - (1 if child is not None else 0)
        if zxid > stat.pzxid:
            self._restat(parent_key, parent, _with_children(stat, stat.cversion, zxid, children))
        elif child is not None:
            parent.stat = _with_children(stat, stat.cversion, stat.pzxid, children)
        if child is None:
            return NONODE
        del self.nodes[path]
        if self.check_digests:
            self.digest -= node_digest(path, child.data, child.stat)
        session = session_of_owner(child.stat.ephemeral_owner)
        if session is not None and session in self.ephemerals:
            self.ephemerals[session].discard(path)
        return OK

    def set_data(self, path: str, data: bytes | None, version: int, zxid: int, time: int) -> int:
        node = self.nodes.get(path)
        if node is None:
            return NONODE
        old = node_digest(path, node.data, node.stat) if self.check_digests else 0
        s = node.stat
        node.data = data
        node.stat = Stat(
            s.czxid, zxid, s.ctime, time, version, s.cversion, s.aversion, s.ephemeral_owner,
            0 if data is None else len(data), s.num_children, s.pzxid,
        )  # fmt: skip
        if self.check_digests:
            self.digest += node_digest(path, data, node.stat) - old
        return OK

    def set_acl(self, path: str, acl: tuple[Acl, ...] | None, version: int) -> int:
        node = self.nodes.get(path)
        if node is None:
            return NONODE
        s = node.stat
        self._restat(path, node, Stat(s.czxid, s.mzxid, s.ctime, s.mtime, s.version, s.cversion, version,
                                      s.ephemeral_owner, s.data_length, s.num_children, s.pzxid))  # fmt: skip
        node.acl = OPEN_ACL_UNSAFE if acl is None else acl
        return OK

    def set_cversion_pzxid(self, path: str, cversion: int, zxid: int) -> int:
        node = self.nodes.get(path)
        if node is None:
            return NONODE
        if cversion == -1:
            cversion = node.stat.cversion + 1
        if cversion > node.stat.cversion:
            self._restat(path, node, _with_children(node.stat, cversion, zxid, node.stat.num_children))
        return OK

    def kill_session(self, session: int, zxid: int, paths_in_txn: tuple[str, ...] | None = None) -> None:
        """closeSession: delete the paths the txn lists, then whatever ephemerals the session still owns."""
        local = self.ephemerals.pop(session, set())
        for path in paths_in_txn or ():
            self.delete(path, zxid)
            local.discard(path)
        for path in sorted(local):
            self.delete(path, zxid)

    def expire_orphans(self, zxid: int) -> list[str]:
        """ZooKeeperServer.loadData: kill sessions that own ephemerals but are not in the session table."""
        removed: list[str] = []
        for session in sorted(s for s in self.ephemerals if s not in self.sessions):
            paths = sorted(p for p in self.ephemerals[session] if p in self.nodes)
            self.kill_session(session, zxid)
            removed.extend(paths)
        return removed


def _with_children(s: Stat, cversion: int, pzxid: int, num_children: int) -> Stat:
    """`s` with new child bookkeeping (a direct constructor call: dataclasses.replace is slow)."""
    return Stat(s.czxid, s.mzxid, s.ctime, s.mtime, s.version, cversion, s.aversion, s.ephemeral_owner,
                s.data_length, num_children, pzxid)  # fmt: skip
