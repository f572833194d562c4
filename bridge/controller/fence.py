"""Noticing, in DUAL_WRITE, that another controller took ZooKeeper over (Kafka's KRaft controller learns it only
from a failed write's `/controller_epoch` check in KRaftMigrationZkWriter; watching makes it prompt)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException

from bridge.driver import FencedOut, MigrationDriver
from migrate.errors import Zk2KraftError, error_text
from migrate.zk import paths
from migrate.zk.znodes.controller import decode_migration

log = logging.getLogger(__package__)  # the controller process logs as one: "bridge.controller"

FENCE_RECHECK_S = 5.0
"""In DUAL_WRITE, how often the leadership znodes are read again besides their watches (a watch lost with
an expired session is set again then)."""


async def watch_fence(driver: MigrationDriver, kazoo: KazooClient) -> None:
    """In DUAL_WRITE: return (by raising FencedOut) as soon as another controller took ZooKeeper over.

    Watches on `/controller` and `/controller_epoch` make it prompt without any write of ours (a controller
    that takes over bumps `/controller_epoch` before it writes `/migration`); `/migration` is read at each
    check but not watched, since every dual write of ours changes it. A dual write that found the fence gone
    ends it too.
    """
    loop = asyncio.get_running_loop()
    changed = asyncio.Event()
    state = driver.leadership

    def watch(_event: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody watches any more
            loop.call_soon_threadsafe(changed.set)

    def taken_over() -> str | None:
        # exists() leaves a watch for creation, deletion and data changes whether or not the znode is there.
        kazoo.exists(paths.CONTROLLER, watch=watch)
        epoch = kazoo.exists(paths.CONTROLLER_EPOCH, watch=watch)
        # Not watched: a watch on it would fire at each of our own dual writes, and its re-arming reads
        # would queue in the session ahead of the next write's multi.
        migration = kazoo.exists(paths.MIGRATION)
        if epoch is None or epoch.version != state.zk_controller_epoch_zk_version:
            found = "absent" if epoch is None else f"at version {epoch.version}"
            return (
                f"{paths.CONTROLLER_EPOCH} is {found}, not version {state.zk_controller_epoch_zk_version} "
                f"this controller's claim left: another controller took over"
            )
        if migration is not None:
            data, stat = kazoo.get(paths.MIGRATION)
            znode = decode_migration(paths.MIGRATION, data, zk_version=stat.version)
            if (znode.kraft_controller_id, znode.kraft_controller_epoch) != (
                state.kraft_controller_id,
                state.kraft_controller_epoch,
            ):
                return (
                    f"{paths.MIGRATION} now names KRaft controller {znode.kraft_controller_id} (epoch "
                    f"{znode.kraft_controller_epoch}): another KRaft controller is making writes to ZooKeeper"
                )
        return None

    next_check = 0.0
    while driver.fenced_reason is None:
        if changed.is_set() or time.monotonic() >= next_check:
            changed.clear()
            next_check = time.monotonic() + FENCE_RECHECK_S
            try:
                reason = await loop.run_in_executor(None, taken_over)
            except (KazooException, Zk2KraftError) as exc:
                # Unreadable for now (connection trouble): the guards of every write still fence.
                log.warning("event=fence_check_failed %s", error_text(exc))
                reason = None
            if reason is not None and driver.fenced_reason is None:
                driver.note_fenced(reason)
                break
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(changed.wait(), 0.1)
    raise FencedOut(driver.fenced_reason)
