"""A standby controller's waits: for the metadata directory's lock, and for `/controller` to be free.

A standby shares its metadata directory (and node id) with the active controller of its node, as a Kafka
controller's failover shares a log directory: it opens the log only once the other process let its `.lock`
go (Kafka's LogManager lock), and leads only once `/controller` is free for it (KafkaController's election).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from bridge.raft.metadata_log import LOCK_FILE
from migrate.errors import Zk2KraftError
from migrate.zk import paths
from migrate.zk.znodes.controller import decode_controller

log = logging.getLogger(__name__)

STANDBY_POLL_S = 0.5


class Stopped(Exception):
    """Stop was requested while a standby waited for its metadata directory."""


def directory_locked(directory: Path) -> bool:
    """Whether another process holds the metadata directory's `.lock` (Kafka's log-directory lock)."""
    path = directory / LOCK_FILE
    if not path.exists():
        return False
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


async def wait_for_directory(directory: Path, stop: asyncio.Event) -> None:
    """Return once no other process holds `directory`'s lock; raise Stopped if `stop` is set first."""
    announced = False
    while directory_locked(directory):
        if not announced:
            log.info("event=standby waiting_for=%s", directory / LOCK_FILE)
            announced = True
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), STANDBY_POLL_S)
        if stop.is_set():
            raise Stopped()


async def wait_for_takeover(kazoo: KazooClient, node_id: int, directory: Path) -> None:
    """Return once `/controller` is free for `node_id`.

    Free means gone (released, or deleted by an operator), or naming this node id while no process holds
    `directory`: a controller sharing this directory (same node id) that died.
    """
    loop = asyncio.get_running_loop()
    changed = asyncio.Event()
    log.info("event=standby waiting_for=%s", paths.CONTROLLER)

    def watch(_event: Any) -> None:
        loop.call_soon_threadsafe(changed.set)

    def read() -> bytes | None:
        # exists() leaves a watch for deletion and data changes whether or not the znode is there.
        if kazoo.exists(paths.CONTROLLER, watch=watch) is None:
            return None
        try:
            data: bytes = kazoo.get(paths.CONTROLLER)[0]
        except NoNodeError:
            return None
        return data

    while True:
        changed.clear()
        found = await loop.run_in_executor(None, read)
        if found is None:
            return
        holder = controller_holder(found)
        if holder == node_id and not directory_locked(directory):
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(changed.wait(), STANDBY_POLL_S)


def controller_holder(data: bytes | None) -> int | None:
    """The `brokerid` of a `/controller` znode, or None when unreadable."""
    try:
        return decode_controller(paths.CONTROLLER, data).broker_id
    except Zk2KraftError:
        return None
