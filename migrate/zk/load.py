"""Recreate a ZooKeeper tree (from a dump or a snapshot) in a live ZooKeeper, for rehearsals on a copy.

Znodes are created parent-first in multi-op transactions; ACLs are applied last (deepest first) so that a
restrictive ACL on a parent cannot block the creation of its children. Each znode's data version is
reproduced by rewriting its data that many times, because Kafka reads meaning into versions (a partition's
KRaft epoch is its state znode's version). If a transaction fails, every znode this load created is
deleted again, so a failed load leaves the target as it found it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import (
    KazooException,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.security import ACL, OPEN_ACL_UNSAFE, Id

from migrate.errors import Zk2KraftError
from migrate.zk.kazoo_adapter import Create, SetData, add_ops, transaction_paths
from migrate.zk.live import NOAUTH_HINT, ZkConnectOptions
from migrate.zk.tree import ZNode, ZTree

# One multi request must stay well below jute.maxbuffer (1 MiB by default) on the server.
MAX_TXN_BYTES = 512 * 1024
MAX_TXN_OPS = 500
SYSTEM_PREFIX = "/zookeeper"


class LoadConflictError(Zk2KraftError):
    """The target already holds znodes the load would overwrite."""


@dataclass(slots=True)
class LoadReport:
    created: int = 0
    updated: int = 0
    ephemeral_as_persistent: int = 0
    version_bumps: int = 0
    transactions: int = 0
    skipped_system: int = 0
    existing: list[str] = field(default_factory=list)


def _target_path(chroot: str, path: str) -> str:
    base = "/" + chroot.strip("/") if chroot.strip("/") else ""
    if path == "/":
        return base or "/"
    return base + path


def _create(txn: TransactionRequest, path: str, data: bytes | None) -> None:
    """Queue a create that keeps null data null (kazoo's public API only takes bytes; Kafka tells them apart)."""
    add_ops(txn, [Create(txn.client.chroot + path if txn.client.chroot else path, data, OPEN_ACL_UNSAFE, 0)])


def _set_data(txn: TransactionRequest, path: str, data: bytes | None) -> None:
    add_ops(txn, [SetData(txn.client.chroot + path if txn.client.chroot else path, data, -1)])


def _kazoo_acl(node: ZNode) -> list[ACL]:
    return [ACL(a.perms, Id(a.scheme, a.id)) for a in node.acl]


def load_tree(
    client: KazooClient,
    tree: ZTree,
    *,
    chroot: str = "/",
    force: bool = False,
    preserve_versions: bool = True,
    progress: Callable[[int], None] | None = None,
) -> LoadReport:
    """Create every znode of `tree` under `chroot` in the ZooKeeper `client` is connected to.

    Refuses (LoadConflictError, nothing written) when any target znode exists, unless `force`, in which
    case existing znodes get the dump's data. `/zookeeper` system znodes are never written. With
    `preserve_versions`, new znodes end with the data version recorded in the tree.
    """
    report = LoadReport()
    nodes = sorted(
        (n for n in tree if not (n.path == SYSTEM_PREFIX or n.path.startswith(SYSTEM_PREFIX + "/"))),
        key=lambda n: (n.path.count("/") if n.path != "/" else 0, n.path),
    )
    report.skipped_system = len(tree) - len(nodes)
    # The chroot itself may exist (an empty chroot prepared for the load); only znodes below it conflict.
    existing = [
        n.path for n in nodes if n.path != "/" and client.exists(_target_path(chroot, n.path)) is not None
    ]
    if existing and not force:
        shown = ", ".join(existing[:5]) + (f" and {len(existing) - 5} more" if len(existing) > 5 else "")
        raise LoadConflictError(
            f"{len(existing)} znode(s) already exist in the target ({shown}); nothing was written. "
            "Use --force to overwrite their data, or load into an empty chroot."
        )
    report.existing = existing
    existing_set = set(existing)
    _ensure_parents(client, _target_path(chroot, "/"))

    created: list[str] = []
    txn = client.transaction()
    txn_bytes = 0
    txn_ops = 0
    done = 0

    def commit() -> None:
        nonlocal txn, txn_bytes, txn_ops
        if txn_ops == 0:
            return
        results = txn.commit()
        if any(isinstance(r, Exception) for r in results):
            _rollback(client, created)
            raise Zk2KraftError(_multi_failure(client, transaction_paths(txn), results))
        report.transactions += 1
        txn, txn_bytes, txn_ops = client.transaction(), 0, 0

    try:
        for node in nodes:
            target = _target_path(chroot, node.path)
            data = node.data
            if node.path == "/":
                if target == "/":
                    continue  # never rewrite ZooKeeper's own root
                _set_data(txn, target, data)
            elif node.path in existing_set:
                _set_data(txn, target, data)
                report.updated += 1
            else:
                _create(txn, target, data)
                created.append(target)
                report.created += 1
                if node.stat.ephemeral_owner:
                    report.ephemeral_as_persistent += 1
            txn_bytes += len(data or b"") + len(target) + 64
            txn_ops += 1
            if txn_ops >= MAX_TXN_OPS or txn_bytes >= MAX_TXN_BYTES:
                commit()
            if preserve_versions and node.path not in existing_set and target != "/":
                # Every setData bumps the version by one; later transactions see the create committed.
                for _ in range(node.stat.version):
                    _set_data(txn, target, data)
                    report.version_bumps += 1
                    txn_bytes += len(data or b"") + len(target) + 64
                    txn_ops += 1
                    if txn_ops >= MAX_TXN_OPS or txn_bytes >= MAX_TXN_BYTES:
                        commit()
            done += 1
            if progress is not None:
                progress(done)
        commit()
        for node in sorted(nodes, key=lambda n: -n.path.count("/")):
            target = _target_path(chroot, node.path)
            if target != "/" and node.acl:
                client.set_acls(target, _kazoo_acl(node))
    except KazooException as exc:
        _rollback(client, created)
        # Our clients' errors already name the address and znode (a ZkNoAuthError); kazoo's name neither.
        cause = str(exc) if isinstance(exc, Zk2KraftError) else repr(exc)
        raise Zk2KraftError(f"loading znodes failed and was rolled back: {cause}") from None
    return report


def _multi_failure(client: KazooClient, op_paths: list[str], results: list[object]) -> str:
    """The failing op of a multi as a message naming the ensemble, the znode and ZooKeeper's error."""
    failed = [
        (path, r)
        for path, r in zip(op_paths, results, strict=True)
        if isinstance(r, Exception) and not isinstance(r, RolledBackError | RuntimeInconsistency)
    ] or [(path, r) for path, r in zip(op_paths, results, strict=True) if isinstance(r, Exception)]
    path, error = failed[0]
    where = ZkConnectOptions.from_kazoo(client).describe()
    if isinstance(error, NoAuthError):
        return f"loading znodes failed and was rolled back: {where}: not allowed to write znode {path} (NOAUTH): {NOAUTH_HINT}"
    return f"loading znodes failed and was rolled back: {where}: znode {path}: {type(error).__name__}"


def _ensure_parents(client: KazooClient, path: str) -> None:
    if path != "/":
        client.ensure_path(path)


def _rollback(client: KazooClient, created: list[str]) -> None:
    for path in reversed(created):
        try:
            client.delete(path)
        except (NoNodeError, NodeExistsError):
            continue
        except KazooException:
            continue
