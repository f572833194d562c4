"""Foreign ZooKeeper writes in DUAL_WRITE: the watcher's start and stop, then import or revert of what it found.

No Kafka counterpart: Kafka's migration never looks at ZooKeeper writes made by others (docs/architecture.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any, Protocol

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException

from bridge.api import DriverState
from bridge.config import BridgeConfig
from bridge.driver import FencedOut, MigrationDriver
from bridge.metrics import BridgeMetrics
from bridge.pipeline import Change, DualWritePipeline
from bridge.raft.metadata_log import MetadataLog
from bridge.zk.foreign_writes import ForeignWriteBatch, ForeignWriteMode, ForeignWriteWatcher
from bridge.zk.migration_client import ZkMigrationClient
from migrate.errors import Zk2KraftError, error_text
from migrate.kraft.image import MetadataImage

log = logging.getLogger(__package__)  # the controller process logs as one: "bridge.controller"


class WatchingController(Protocol):
    """What the foreign-write handling reads of the controller process."""

    @property
    def config(self) -> BridgeConfig: ...
    @property
    def metrics(self) -> BridgeMetrics: ...
    @property
    def pipeline(self) -> DualWritePipeline: ...
    @property
    def kazoo(self) -> KazooClient | None: ...
    @property
    def zk(self) -> ZkMigrationClient | None: ...
    @property
    def log(self) -> MetadataLog | None: ...
    @property
    def driver(self) -> MigrationDriver | None: ...
    @property
    def state(self) -> DriverState: ...
    @property
    def loop(self) -> asyncio.AbstractEventLoop | None: ...
    @property
    def stopping(self) -> bool: ...
    def serving(self) -> bool: ...
    def spawn(self, work: Callable[[], Any]) -> None: ...
    def notify(self) -> None: ...


class ForeignWrites:
    """The foreign-write watcher of one DUAL_WRITE leadership and the batches it hands over."""

    def __init__(self, controller: WatchingController) -> None:
        self._controller = controller
        self.watcher: ForeignWriteWatcher | None = None
        self.batches_handled = 0

    async def start(self) -> None:
        """In DUAL_WRITE: notice ZooKeeper changes made by others (`--foreign-zk-writes`)."""
        if self._controller.kazoo is None:
            return
        mode = ForeignWriteMode(self._controller.config.foreign_zk_writes)
        watcher = ForeignWriteWatcher(
            self._controller.kazoo,
            self._controller.pipeline.hold_appends,
            None if mode is ForeignWriteMode.REPORT else self._on_foreign_writes,
            mode=mode,
            metrics=self._controller.metrics,
        )
        self.watcher = watcher
        self._controller.pipeline.judged_by(watcher.own_writes)
        if self._controller.zk is not None:  # our own writes' watch events need no judgment (no appends held)
            self._controller.zk.observer = watcher.written
        # Armed before DUAL_WRITE; the first scan catches what changed since the reconciliation read.
        await asyncio.get_running_loop().run_in_executor(None, lambda: watcher.start(scan=True))

    async def stop(self) -> None:
        watcher, self.watcher = self.watcher, None
        self._controller.pipeline.judged_by(None)
        if self._controller.zk is not None:
            self._controller.zk.observer = None
        if watcher is not None:
            # Stopping, its thread is hardly waited for: it may be in a call to an unreachable ZooKeeper.
            join_s = 0.5 if self._controller.stopping else 10.0
            await asyncio.get_running_loop().run_in_executor(None, watcher.stop, join_s)
        self._controller.pipeline.release_appends()

    def _on_foreign_writes(self, batch: ForeignWriteBatch) -> None:
        """Watcher thread, right after judging (ZooKeeper and the image agree but for `batch`)."""
        loop = self._controller.loop
        if loop is None or loop.is_closed():
            return
        work: Callable[[], Any]
        if batch.mode is ForeignWriteMode.IMPORT:
            work = lambda: self._import_foreign(batch)  # noqa: E731
        else:
            work = lambda: self._revert_foreign(batch)  # noqa: E731
        with contextlib.suppress(RuntimeError):  # the loop is closing
            loop.call_soon_threadsafe(self._controller.spawn, work)

    async def _import_foreign(self, batch: ForeignWriteBatch) -> None:
        """Append the records that make the log say what ZooKeeper says, as if requested."""
        controller = self._controller
        if not controller.serving():
            log.warning(
                "foreign ZooKeeper writes not imported: not in DUAL_WRITE (%s)", controller.state.name
            )
            return

        def generate(image: MetadataImage) -> tuple[None, Change]:
            # Planned in the write event, against the image its records are appended to.
            plan = batch.import_plan(image)
            for write, why in plan.not_imported:
                log.warning("foreign ZooKeeper write at %s not imported: %s", write.path, why)
            return None, Change(plan.records)

        try:
            _none, offset = await self._controller.pipeline.write(generate)
            if offset is not None:
                log.info(
                    "event=foreign_import last_offset=%d paths=%s", offset, ",".join(w.path for w in batch.writes)
                )
        except (FencedOut, Zk2KraftError) as exc:
            log.error("foreign ZooKeeper writes not imported: %s", error_text(exc))
        finally:
            self.batches_handled += 1
            self._controller.notify()

    async def _revert_foreign(self, batch: ForeignWriteBatch) -> None:
        """Write the log's state back over the foreign writes (after any dual write queued before)."""
        controller = self._controller
        if not controller.serving():
            log.warning(
                "foreign ZooKeeper writes not reverted: not in DUAL_WRITE (%s)", controller.state.name
            )
            return
        assert self._controller.log is not None and self._controller.driver is not None
        try:
            # Planned on the event loop against the current image: it is what ZooKeeper must say.
            ops = batch.revert_operations(self._controller.log.image)
            if ops:
                await self._controller.pipeline.queue_revert(ops)
                log.info(
                    "event=foreign_revert ops=%d paths=%s", len(ops), ",".join(w.path for w in batch.writes)
                )
        except (FencedOut, Zk2KraftError, KazooException) as exc:
            log.error("foreign ZooKeeper writes not reverted: %s", exc)
        finally:
            self.batches_handled += 1
            self._controller.notify()
