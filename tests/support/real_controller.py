"""A simulated Kafka 3.9 controller taking over a stopped bridge's metadata directory (handoff.md §2.1-2.4, §5).

What a real controller does with the directory and ZooKeeper when it becomes the Raft leader, kept small:
start-up reads (meta.properties, quorum-state, the log), the LeaderChangeMessage a new leader appends first,
ActivationRecordsGenerator's rules on a non-empty log,
then KRaftMigrationDriver's: `/migration` read (never a re-migration), the claim of `/controller` and
`/controller_epoch` in one transaction checked on `/controller_epoch`'s version, the unconditional `/migration`
write, and the SYNC_KRAFT_TO_ZK wait compared epoch first. With migration disabled on a MIGRATION log it
appends ZkMigrationStateRecord(POST_MIGRATION) in its activation batch and touches no znode.

Departures from Kafka, for size: no Raft exchange (it stands for a cold take-over where every voter is
replaced, so it leads at one epoch above anything the directory holds, as the candidate that wins the first
election would); no broker RPCs (heartbeats, UpdateMetadata); ZooKeeper is not reconciled, only compared.
Independent of bridge/controller and bridge/driver: it reads with migrate/'s codecs only.

    python -m tests.support.real_controller --metadata-dir DIR --zk HOST:PORT/chroot [--node-id N] [--no-migration]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from migrate.kraft import metadata_version as mvs
from migrate.kraft import records as rec
from migrate.kraft.activation import leader_change_message
from migrate.kraft.logdir import list_segments, parse_quorum_state, read_meta_properties
from migrate.kraft.migration_state import ZkMigrationState
from migrate.kraft.reader import METADATA_PARTITION_DIR, load_image
from migrate.kraft.segment_walk import walk_segment
from migrate.zk.live import ZkConnectOptions
from migrate.zk.model import ControllerRegistration, MigrationState
from migrate.zk.znodes.controller import (
    decode_controller,
    decode_migration,
    encode_controller,
    encode_migration,
)
from tests.support.audit import append_segment


@dataclass
class TakeOver:
    """What the simulated controller did; `state` is the driver state it ended in (or POST_MIGRATION)."""

    node_id: int
    epoch: int
    state: str
    reason: str = ""
    migration_before: MigrationState | None = None
    migration_after: MigrationState | None = None
    zk_controller_epoch: int | None = None
    remigrated: bool = False
    appended: list[str] = field(default_factory=list)

    def line(self) -> str:
        parts = [f"node={self.node_id}", f"raft_epoch={self.epoch}", f"state={self.state}"]
        if self.zk_controller_epoch is not None:
            parts.append(f"zk_controller_epoch={self.zk_controller_epoch}")
        if self.migration_after is not None:
            m = self.migration_after
            parts.append(f"migration=({m.kraft_metadata_offset},{m.kraft_metadata_epoch})")
        parts.append(f"remigrated={str(self.remigrated).lower()}")
        if self.appended:
            parts.append("appended=" + ",".join(self.appended))
        if self.reason:
            parts.append(f"reason={self.reason!r}")
        return "simulated Kafka 3.9 controller: " + " ".join(parts)


def _last_batch(pdir: Path) -> tuple[int, int]:
    """(last offset, its batch's epoch) of the log, or (-1, -1) without a batch (KafkaMetadataLog's end)."""
    for segment in reversed(list_segments(pdir)):
        batches = walk_segment(segment.path, segment.base_offset).batches
        if batches:
            return batches[-1].last_offset, batches[-1].leader_epoch
    return -1, -1


def take_over(metadata_dir: Path, zk: KazooClient, *, node_id: int | None = None, migration: bool = True) -> TakeOver:
    """Lead on `metadata_dir` as a Kafka 3.9 controller would, with `zookeeper.metadata.migration.enable=migration`."""
    meta = read_meta_properties(metadata_dir / "meta.properties")
    node = node_id if node_id is not None else meta.node_id
    if node is None or meta.version != 1:
        raise AssertionError(f"{metadata_dir}/meta.properties: not a KRaft controller's (version {meta.version})")
    pdir = metadata_dir / METADATA_PARTITION_DIR
    state_path = pdir / "quorum-state"
    quorum = parse_quorum_state(state_path.read_bytes(), str(state_path)) if state_path.exists() else None
    quorum_epoch = quorum.leader_epoch if quorum is not None else -1
    image, report = load_image(pdir)
    last_offset, last_epoch = _last_batch(pdir)
    if report.snapshot_id is not None:
        last_epoch = max(last_epoch, report.snapshot_id.epoch)
        last_offset = max(last_offset, report.snapshot_id.end_offset - 1)
    epoch = max(quorum_epoch, last_epoch) + 1
    result = TakeOver(node_id=node, epoch=epoch, state="INACTIVE")
    # KafkaRaftClient.onBecomeLeader: the epoch's first entry is a LeaderChangeMessage.
    voters = list(quorum.current_voters) if quorum is not None and quorum.current_voters else [node]
    append_segment(metadata_dir, last_offset + 1, [[(leader_change_message(node, voters), 0)]], epoch=epoch)
    next_offset = last_offset + 2

    # ActivationRecordsGenerator.recordsForNonEmptyLog
    state = image.features.zk_migration_state
    if migration and image.metadata_version < mvs.IBP_3_4_IV0:
        result.reason = f"Should not have ZK migrations enabled on a cluster running metadata.version {image.metadata_version}"
        return result
    if migration and state == ZkMigrationState.NONE:
        result.reason = "Should not have ZK migrations enabled on a cluster that was created in KRaft mode"
        return result
    abort = report.pending_transaction_offset is not None
    if not migration:
        if state == ZkMigrationState.MIGRATION:
            batch: list[tuple[object, int]] = []
            if abort:
                batch.append((rec.AbortTransactionRecord(reason="Controller failover"), 0))
                result.appended.append("AbortTransactionRecord")
            batch.append((rec.ZkMigrationStateRecord(zk_migration_state=ZkMigrationState.POST_MIGRATION.value), 0))
            result.appended.append("ZkMigrationStateRecord(POST_MIGRATION)")
            append_segment(metadata_dir, next_offset, [batch], epoch=epoch)
            result.state = "POST_MIGRATION"
        return result
    if abort:
        append_segment(metadata_dir, next_offset, [[(rec.AbortTransactionRecord(reason="Controller failover"), 0)]],
                       epoch=epoch)  # fmt: skip
        result.appended.append("AbortTransactionRecord")
    if state == ZkMigrationState.POST_MIGRATION:
        result.reason = "KRaft controller indicates a completed migration, but the migration driver is somehow active."
        return result

    # KRaftMigrationDriver: RecoverMigrationStateFromZKEvent, then KRaftLeaderEvent
    data, stat = zk.get("/migration")
    before = decode_migration("/migration", data, zk_version=stat.version)
    result.migration_before = before
    if before.kraft_metadata_offset <= 0:
        if state == ZkMigrationState.MIGRATION:
            result.state = "INACTIVE"
            result.reason = "KRaft controller indicates an active migration, but the ZK state does not."
        else:  # PRE_MIGRATION: the driver would migrate ZooKeeper's metadata itself
            result.remigrated = True
            result.state = "ZK_MIGRATION"
        return result
    result.state = "WAIT_FOR_CONTROLLER_QUORUM"

    # BECOME_CONTROLLER: KafkaZkClient.tryRegisterKRaftControllerAsActiveController
    try:
        held = decode_controller("/controller", zk.get("/controller")[0])
    except NoNodeError:
        held = None
    if held is not None and held.kraft_controller_epoch is not None and held.kraft_controller_epoch >= epoch:
        result.state = "BECOME_CONTROLLER"
        result.reason = f"ControllerMovedException: /controller holds KRaft epoch {held.kraft_controller_epoch} >= {epoch}"
        return result
    epoch_data, epoch_stat = zk.get("/controller_epoch")
    zk_epoch = int(epoch_data.decode()) + 1
    registration = encode_controller(
        ControllerRegistration(broker_id=node, timestamp=int(time.time() * 1000), kraft_controller_epoch=epoch)
    )
    tx = zk.transaction()
    tx.set_data("/controller_epoch", str(zk_epoch).encode(), version=epoch_stat.version)
    if held is None:
        tx.create("/controller", registration)
    else:
        tx.set_data("/controller", registration)
    outcome = tx.commit()
    failed = [r for r in outcome if isinstance(r, Exception)]
    if failed:
        if any(isinstance(r, BadVersionError | NodeExistsError) for r in failed):
            result.state = "BECOME_CONTROLLER"
            result.reason = f"ControllerMovedException: {failed}"
            return result
        raise AssertionError(f"the claim failed: {failed}")
    result.zk_controller_epoch = zk_epoch
    after = MigrationState(
        kraft_controller_id=node, kraft_controller_epoch=epoch, kraft_metadata_offset=before.kraft_metadata_offset,
        kraft_metadata_epoch=before.kraft_metadata_epoch,
    )  # fmt: skip
    zk.set("/migration", encode_migration(after), version=-1)
    data, stat = zk.get("/migration")
    result.migration_after = decode_migration("/migration", data, zk_version=stat.version)

    # SYNC_KRAFT_TO_ZK: the image must reach /migration's (offset, epoch), compared epoch first
    if (last_epoch, last_offset) < (before.kraft_metadata_epoch, before.kraft_metadata_offset):
        result.state = "SYNC_KRAFT_TO_ZK"
        result.reason = (
            f"the log ends at ({last_offset}, epoch {last_epoch}), before /migration's "
            f"({before.kraft_metadata_offset}, epoch {before.kraft_metadata_epoch})"
        )
        return result
    result.state = "DUAL_WRITE"
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--metadata-dir", type=Path, required=True)
    parser.add_argument("--zk", required=True, help="zookeeper.connect, chroot included")
    parser.add_argument("--node-id", type=int)
    parser.add_argument("--no-migration", action="store_true", help="zookeeper.metadata.migration.enable unset")
    args = parser.parse_args(argv)
    client = ZkConnectOptions(connect=args.zk).kazoo_client()
    client.start(timeout=30)
    try:
        done = take_over(args.metadata_dir, client, node_id=args.node_id, migration=not args.no_migration)
    finally:
        client.stop()
        client.close()
    print(done.line(), flush=True)
    return 0 if done.state in ("DUAL_WRITE", "POST_MIGRATION") else 1


if __name__ == "__main__":
    sys.exit(main())
