"""Gather the planner's inputs: read the ZooKeeper source once, the broker files, their meta.properties."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kazoo.exceptions import NoNodeError

from migrate.kraft.logdir import META_PROPERTIES, MetaProperties, read_meta_properties
from migrate.kraft.quorum_voters import QuorumVoter
from migrate.plan.checks.zookeeper_state import ACL_CHECK_PATHS
from migrate.plan.inputs import BrokerConfig, PlanInputs
from migrate.plan.properties import read_properties_file
from migrate.zk import paths
from migrate.zk.cluster import from_tree
from migrate.zk.sources import ZkSource, read_source
from migrate.zk.tree import Acl, ZTree


def acls_of(tree: ZTree, with_acls: bool) -> dict[str, tuple[Acl, ...]] | None:
    """ACLs of the znodes the controllers touch, or None when the tree was read without ACLs."""
    if not with_acls:
        return None
    wanted = (*ACL_CHECK_PATHS, paths.CONTROLLER, paths.MIGRATION)
    return {p: node.acl for p in wanted if (node := tree.get(p)) is not None}


def live_acls(source: ZkSource, chroot: str) -> dict[str, tuple[Acl, ...]]:
    """getACL of the few znodes the controllers touch (a live read skips ACLs: one request per znode)."""
    client = source.live_options(chroot).start_client(timeout=15)
    try:
        out: dict[str, tuple[Acl, ...]] = {}
        for p in (*ACL_CHECK_PATHS, paths.CONTROLLER, paths.MIGRATION):
            try:
                acl, _stat = client.get_acls(p)
            except NoNodeError:
                continue
            out[p] = tuple(Acl(a.perms, a.id.scheme, a.id.id) for a in acl)
        return out
    finally:
        client.stop()
        client.close()


def discover_meta_properties(brokers: Sequence[BrokerConfig]) -> list[tuple[str, MetaProperties]]:
    """meta.properties of each broker's log dirs that exist on this machine (the planner may run elsewhere)."""
    found = []
    for b in brokers:
        for d in b.log_dirs():
            path = Path(d) / META_PROPERTIES
            if path.is_file():
                found.append((str(path), read_meta_properties(path)))
    return found


def load_inputs(
    source: ZkSource,
    broker_files: Sequence[Path],
    controllers: Sequence[QuorumVoter],
    *,
    meta_files: Sequence[Path] = (),
    **options: str | None,
) -> PlanInputs:
    """Read everything once and build PlanInputs; `options` set the PlanInputs knobs (quorum, listener...)."""
    # Offline sources carry ACLs for free; a live read pays one getACL per znode, so only offline.
    with_acls = source.connect is None
    got = read_source(source, acls=with_acls)
    tree = got.tree
    znode_count = len(tree)
    znode_bytes = sum(len(n.data) for n in tree if n.data)
    acls = acls_of(tree, with_acls) if with_acls else live_acls(source, got.chroot)
    model = from_tree(tree, strict=False)
    brokers = [BrokerConfig(read_properties_file(p)) for p in broker_files]
    metas = [(str(p), read_meta_properties(p)) for p in meta_files]
    metas += [m for m in discover_meta_properties(brokers) if m[0] not in {x[0] for x in metas}]
    inputs = PlanInputs(
        model=model,
        zk_origin=got.origin,
        zk_chroot=got.chroot,
        zk_connect=source.connect,
        zk_warnings=got.warnings,
        zk_notes=got.notes,
        accepted_older_zk_state=got.older_state_accepted,
        brokers=brokers,
        controllers=list(controllers),
        meta_properties=metas,
        zk_acls=acls,
        znode_count=znode_count,
        znode_bytes=znode_bytes,
    )
    for key, value in options.items():
        if value is not None:
            setattr(inputs, key, value)
    return inputs
