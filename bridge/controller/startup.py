"""What the controller process reads before it writes anything: ZooKeeper's cluster id, every refusal, the
dry run, and the opening of the metadata log (Kafka's counterparts: ControllerServer's and KafkaRaftManager's
start-up checks of the log directory, KRaftMigrationDriver's checks of `/migration` and `/controller`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bridge.config import BridgeConfig
from bridge.driver import (
    MigrationMismatchError,
    bootstrap_refusal,
    check_log_matches_migration,
    mismatch_refusal,
    plan_dry_run,
    read_migration_znode,
    read_zookeeper_for_migration,
    rehearsal_refusal,
)
from bridge.raft.metadata_log import MetadataLog
from bridge.raft.recovery import preview
from bridge.zk.leadership import MigrationLeadershipState
from bridge.zk.migration_client import ZkMigrationClient
from migrate.errors import ZnodeFormatError
from migrate.kraft import metadata_version as mvs
from migrate.kraft.image import MetadataImage
from migrate.kraft.migration_state import ZkMigrationState
from migrate.kraft.reader import load_image
from migrate.zk import paths
from migrate.zk.live import ZkConnectOptions
from migrate.zk.znodes.singletons import decode_cluster_id


def zk_cluster_id(zk: ZkMigrationClient, config: BridgeConfig, zk_options: ZkConnectOptions) -> str:
    found = zk.get(paths.CLUSTER_ID)
    if found is None:
        raise MigrationMismatchError(
            f"ZooKeeper {config.zk_connect} has no {paths.CLUSTER_ID}: no Kafka broker ever started "
            f"there, so there is no cluster to migrate" + zk_options.kafka_chroot_hint()
        )
    return decode_cluster_id(paths.CLUSTER_ID, found[0])


async def check_before_writing(
    config: BridgeConfig,
    zk: ZkMigrationClient,
    zk_options: ZkConnectOptions,
    cluster_id: str,
    *,
    voter: bool = False,
) -> None:
    """Every refusal, judged read-only before the metadata directory or ZooKeeper is changed: the
    directory's node and cluster, `/migration` against the log, and (when the log holds no completed
    migration) every znode the initial load will copy. A rehearsal first checks it runs on a copy."""
    loop = asyncio.get_running_loop()
    if config.rehearsal:
        problem = rehearsal_refusal(await loop.run_in_executor(None, zk.live_broker_sessions))
        if problem is not None:
            raise MigrationMismatchError(problem)
    found = await loop.run_in_executor(
        None,
        lambda: preview(
            config.metadata_dir,
            node_id=config.node_id,
            cluster_id=cluster_id or None,
            voters=[voter.node_id for voter in config.voters],
        ),
    )
    if found.cluster_id not in (None, cluster_id):
        raise MigrationMismatchError(
            f"{config.metadata_dir} belongs to cluster {found.cluster_id}, but ZooKeeper "
            f"{config.zk_connect} holds cluster {cluster_id}"
        )
    mv = mvs.parse(config.metadata_version) if config.metadata_version else mvs.LATEST_PRODUCTION
    problem = bootstrap_refusal(found.image, mv)
    if problem is not None:
        raise MigrationMismatchError(problem)
    if voter:
        # A voter's log may lag /migration (the quorum's leader wrote it): it catches up through Raft, and
        # the leader's driver judges /migration against the committed log when it takes ZooKeeper.
        return
    znode = await loop.run_in_executor(None, read_migration_znode, zk)
    if not config.adopt_existing_migration:
        # An absent /migration is what the driver would create: Kafka's EMPTY state, judged the same way.
        leadership = znode if znode is not None else MigrationLeadershipState()
        problem = check_log_matches_migration(
            found.image, found.end_offset, found.leader_epoch, leadership
        )
        if problem is not None:
            holder = await loop.run_in_executor(None, zk.controller_holder)
            raise MigrationMismatchError(mismatch_refusal(problem, holder, config.node_id))
    holder = await loop.run_in_executor(None, zk.controller_holder)
    if holder.present and holder.is_kraft and (holder.kraft_controller_epoch or 0) >= found.leader_epoch:
        # Kafka's registration refuses an epoch that is not newer: the claim could only fail as fenced.
        raise MigrationMismatchError(
            f"refusing to start: {holder.describe()}, and this metadata log ({config.metadata_dir}) would "
            f"claim it at epoch {found.leader_epoch}; a KRaft controller epoch must be newer than the one "
            f"registered, so this controller could never take control. The epoch lives in the metadata "
            f"log: start with controller {holder.broker_id}'s metadata dir (or a copy of it), not a fresh "
            f"or older one. Nothing was written to ZooKeeper or {config.metadata_dir}"
        )
    if found.image.features.zk_migration_state != ZkMigrationState.MIGRATION:
        try:
            await loop.run_in_executor(None, read_zookeeper_for_migration, zk_options)
        except ZnodeFormatError as exc:
            raise MigrationMismatchError(
                f"refusing to start: {exc}. The initial migration copies every znode of the cluster and "
                f"would fail on this one; nothing was written to ZooKeeper or {config.metadata_dir}. "
                f"Fix or remove the znode (as Kafka's own tools would write it), then start again"
            ) from exc


async def dry_run(zk_options: ZkConnectOptions, metadata_dir: Path, lines: list[str]) -> None:
    """To `lines`: the ZooKeeper writes a reconciliation of the existing log would make; writes nothing."""
    loop = asyncio.get_running_loop()
    pdir = metadata_dir / "__cluster_metadata-0"
    image = MetadataImage()
    if pdir.is_dir():
        image, _report = await loop.run_in_executor(None, load_image, metadata_dir)
    if image.features.zk_migration_state != ZkMigrationState.MIGRATION:
        lines[:] = [
            f"# {metadata_dir} holds no completed migration: a real run would first migrate "
            f"ZooKeeper into the log; reconciling the empty image would plan these writes:"
        ]

    async def in_thread(fn: Callable[[], Any]) -> Any:
        return await loop.run_in_executor(None, fn)

    lines += await plan_dry_run(zk_options, image, in_thread)


def open_metadata_log(config: BridgeConfig, cluster_id: str) -> MetadataLog:
    """The metadata log of `config`, formatted or recovered (cluster id from ZooKeeper's)."""
    return MetadataLog.open(
        config.metadata_dir,
        node_id=config.node_id,
        cluster_id=cluster_id or None,
        metadata_version=config.metadata_version,
        fsync=config.fsync,
    )
