"""The dual-write pipeline: a committed batch goes to the log, then (durable) to ZooKeeper, then is answered.

Kafka's counterpart is KRaftMigrationDriver's dual-write path (its event queue running
KRaftMigrationZkWriter on each metadata delta), fused here with the controller's own log append.

Threads, and what each runs here:

- **The event loop** (the controller's): `write` (one write event: compute, cut the image slices, append, queue the batch),
  `queue_revert`, the judging of a one-multi reply (`_one_answered`) and its bookkeeping (`_one_landed`),
  the repair (`_repair_zookeeper`), and encoding the responses ahead while ZooKeeper works.
- **The log writer** (`MetadataLog`'s thread): `_on_log_writing` as each fsync starts (it wakes the
  ZooKeeper writer), and `_send_when_durable`, the durability callback of a batch's last append, which
  sends the batch's one multi as soon as the fsync returns.
- **The ZooKeeper writer** (`writer`, one thread, shared with the driver's own ZooKeeper work so the two never
  interleave out of log order): `_drain_writes` takes every queued batch, plans its operations, builds and
  arms the one multi, or writes the batch the usual way (`_write_or_send`), and the redo of a one multi
  that did not simply land.
- **kazoo's connection thread**: relays a one multi's reply straight to the event loop (`_LoopRelay`).
- **Worker threads** (the loop's default executor): `wait_idle` and `_await_judgment`; the
  foreign-write watcher's thread calls `hold_appends`.

What each lock and flag guards:

- `_queue_lock`: `_queued_writes` (batches waiting for ZooKeeper, in log order), `_drain_scheduled` (a drain
  job is queued that has not taken the queue yet) and `_one_in_flight` (a batch went out as one multi and is
  not settled: no other dual write goes out meanwhile, since each is guarded by the `/migration` version the
  one before leaves).
- `_inflight_cond`: `_inflight`, the batches appended (or reverts queued) not yet written to ZooKeeper;
  `wait_idle` and the foreign-write hold wait on it.
- `_gate`: `_judging`, set while the foreign-write watcher judges: appends wait for the judgment to end
  (`_enter_append`), one shared waiter (`_judgment_over`) for all of them.
- `_appends_open` (event loop only): cleared while a repair reconciles ZooKeeper with the log.
- `zk_out_of_sync` and `_repairing` (event loop and writer thread): ZooKeeper misses a committed change
  until the repair; no one multi goes out and no offset is recorded meanwhile.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from kazoo.exceptions import KazooException

from bridge.api import RecordAndVersion
from bridge.driver import FencedOut, MigrationDriver
from bridge.kafka.protocol import EncodedResponse
from bridge.metrics import BridgeMetrics, StuckWrite
from bridge.raft.metadata_log import AppendResult, MetadataLog
from bridge.stopping import cancelled
from bridge.zk.image_slice import cut, touched_keys
from bridge.zk.leadership import MigrationClientError, code_name
from bridge.zk.migration_client import OneMulti, ZkBatchError
from bridge.zk.operations import ZkOperation
from bridge.zk.planner import plan_delta
from migrate.errors import InvalidRequestError, Zk2KraftError, error_text
from migrate.gcpause import gc_paused
from migrate.kraft.image import MetadataImage
from migrate.migration import MAX_RECORDS_PER_APPEND

log = logging.getLogger(__name__)

T = TypeVar("T")

REPAIR_FIRST_DELAY_S = 0.2
REPAIR_MAX_DELAY_S = 30.0
JUDGE_WAIT_S = 30.0
SYNC_POLL_S = 0.02
"""How often a write event waiting for SYNC_KRAFT_TO_ZK's plan looks again."""


class ControllerFailed(Zk2KraftError):
    """The metadata log cannot take the change (an append or fsync failed): this controller renounces."""


@dataclass(slots=True)
class Change:
    """What one write event appends: its records, whether they must go in one batch, and what runs right
    after the append in the same step (`on_appended(last_offset)`; e.g. in-memory state kept beside the image).

    `encoded`: the response, encoded ahead while ZooKeeper writes the change (one multi only).
    """

    records: list[RecordAndVersion]
    atomic: bool = True
    on_appended: Callable[[int], None] | None = None
    encoded: EncodedResponse | None = None

    def chunks(self) -> list[list[RecordAndVersion]]:
        """The batches: all records in one when atomic, else at most MAX_RECORDS_PER_APPEND each (in order)."""
        records = self.records
        if self.atomic or len(records) <= MAX_RECORDS_PER_APPEND:
            return [records]
        return [records[i : i + MAX_RECORDS_PER_APPEND] for i in range(0, len(records), MAX_RECORDS_PER_APPEND)]


class DualWritePipeline:
    """Commits of the controller: appended, made durable, written to ZooKeeper, then answered, in log order.

    Public surface: `start`, `attach` (the log and driver of the current leadership), `write` (one write
    event), `appended_nothing` and `committed` (for answers without records), `renounce`, `queue_revert`, `hold_appends` / `judged_by` / `release_appends` (the foreign-write watcher's hold),
    `wait_idle`, `close`, and `writer` (the ZooKeeper writer thread, for the driver).
    """

    def __init__(
        self,
        metrics: BridgeMetrics,
        *,
        on_repaired: Callable[[], None],
        on_published: Callable[[PublishedBatch], None] | None = None,
        on_failed: Callable[[str], None] = lambda _reason: None,
    ) -> None:
        self.metrics = metrics
        # Event loop, once: the log failed (`failed` says how); the controller renounces.
        self._on_failed = on_failed
        self.failed: str | None = None
        # Write events waiting for appends to be let go (a repair, a foreign-write judgment).
        self.events_waiting = 0
        # The latest append of a write event: a read is committed once it is durable.
        self.last_appended: AppendResult | None = None
        # Event loop, right after each batch is appended, in the same step: (records, base offset).
        self.on_appended: list[Callable[[list[RecordAndVersion], int], None]] = []
        self._on_repaired = on_repaired
        # Event loop, in log order: each committed batch once ZooKeeper was written (or is to be repaired)
        # and before its request is answered (the controller's MigrationPropagator hook).
        self.on_published = on_published
        self.writer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="zk-writer")
        self.log: MetadataLog | None = None
        self.driver: MigrationDriver | None = None
        self._queued_writes: list[_QueuedWrite] = []
        self._queue_lock = threading.Lock()
        self._drain_scheduled = False
        self._one_in_flight = False
        self._inflight = 0
        self._inflight_cond = threading.Condition()
        self._closed = False  # `close` gave up on the writes in flight
        self._gate = threading.Lock()
        self._judging = False
        self._judgment: Callable[[], AbstractContextManager[Any]] | None = None
        self._judgment_over: asyncio.Future[None] | None = None
        # Set when a dual write failed for another reason than fencing: ZooKeeper misses a committed change
        # until a reconciliation repairs it (meanwhile /migration's offset stays behind, so the lag shows).
        self.zk_out_of_sync: str | None = None
        self._repairing = False
        self._appends_open: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Event loop: the loop that commits and hears ZooKeeper's replies."""
        self._loop = loop
        self._appends_open = asyncio.Event()
        self._appends_open.set()

    def attach(self, metadata_log: MetadataLog, driver: MigrationDriver) -> None:
        """Write the commits of `metadata_log` through `driver` (a new leadership, or a takeover's)."""
        self.log, self.driver = metadata_log, driver
        metadata_log.on_writing = self._on_log_writing

    async def close(self, timeout: float) -> int:
        """Stop a repair, let the dual writes in flight finish (up to `timeout` s), then let the writer thread
        go; returns how many were left unwritten (their requests fail; the log holds their changes).

        The writer thread is not joined: while ZooKeeper is unreachable it may be in a call that ends only
        when the ZooKeeper client stops. A batch sent as one multi whose reply comes later is failed then.
        """
        await asyncio.gather(*(cancelled(task) for task in list(self._tasks)))
        await asyncio.get_running_loop().run_in_executor(None, self.wait_idle, timeout)
        with self._inflight_cond:
            self._closed = True
            left = self._inflight
            self._inflight_cond.notify_all()  # no one waits for writes any more
        self.writer.shutdown(wait=False, cancel_futures=True)
        with self._queue_lock:
            queued, self._queued_writes = self._queued_writes, []
        if queued:
            self._abandon_batch(queued)
        return left

    async def queue_revert(self, ops: list[ZkOperation]) -> None:
        """Write `ops` (a revert of foreign writes) after every change appended before it, before any after."""
        assert self.log is not None
        with self._inflight_cond:
            self._inflight += 1
        await self._queue_write(_QueuedWrite(None, ops, self.log.leader_epoch, self._new_future()))

    def judged_by(self, judgment: Callable[[], AbstractContextManager[Any]] | None) -> None:
        """The foreign-write watcher's lock, held for a whole judgment (None: no watcher any more)."""
        self._judgment = judgment

    def release_appends(self) -> None:
        """The watcher stopped: appends held for its judgment go on."""
        with self._gate:
            self._judging = False

    def _serving(self) -> bool:
        return self.driver is not None and self.driver.writes_to_zookeeper and self.failed is None

    def _spawn(self, work: Callable[[], Any]) -> None:
        if self._closed:  # a write failing as the ZooKeeper client stops: the next leader reconciles
            return
        task = asyncio.ensure_future(work())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def write(self, generate: Callable[[MetadataImage], tuple[T, Change]]) -> tuple[T, int | None]:
        """One controller write event: `generate` computes a change from the current image, and its records
        are appended in the same step (nothing runs in between); then they are made durable and, while this
        controller writes ZooKeeper, written there. Returns `generate`'s value and the last offset appended
        (None: no records).

        Kafka's ControllerWriteEvent: generateRecordsAndResult, then append and replay, with no other event
        in between. Raises ControllerFailed when the log cannot take the records (the controller renounces),
        FencedOut when another controller took ZooKeeper over.
        """
        metadata_log, driver = self.log, self.driver
        assert metadata_log is not None and driver is not None and self._appends_open is not None
        self.events_waiting += 1
        try:
            while True:
                while not self._appends_open.is_set():  # a repair of ZooKeeper is under way
                    await self._appends_open.wait()
                await self._enter_append()
                if self._appends_open.is_set():  # no repair began while a judgment held the append
                    break
                self._gate.release()
        finally:
            self.events_waiting -= 1
        items: list[_QueuedWrite] = []
        durable: list[concurrent.futures.Future[None]] = []
        last = -1
        try:
            self._check_writable(driver)
            value, change = generate(metadata_log.image)
            nothing_appended = not change.records
            if nothing_appended:
                self.appended_nothing(change)
            else:
                to_zookeeper = driver.writes_to_zookeeper
                for chunk in change.chunks():
                    appended, before, after = self._append(metadata_log, chunk, to_zookeeper, first=not durable)
                    durable.append(appended.durable)
                    last = int(appended.last_offset)
                    if to_zookeeper:
                        with self._inflight_cond:
                            self._inflight += 1
                        items.append(
                            _QueuedWrite(
                                appended, [], metadata_log.leader_epoch, self._new_future(),
                                change.encoded, (before, after),
                                None if self.on_published is None
                                else PublishedBatch(chunk, before, after, last, metadata_log.image),
                            )
                        )  # fmt: skip
                    base = int(appended.base_offset)
                    self._follow_in_memory(partial(self._run_appended_hooks, chunk, base), base, metadata_log)
                if change.on_appended is not None:
                    self._follow_in_memory(partial(change.on_appended, last), last, metadata_log)
        finally:
            self._gate.release()
            # Queued in log order (appends and this queue only move on the event loop, with no await
            # between), also the batches before a later one failed: they are answered and counted down.
            for item in items:
                self._enqueue_write(item)
        if nothing_appended:
            # Answered once what it read is committed, as Kafka defers an event without records to the highest
            # pending offset (a second CreateTopics never reports a topic the log could still lose).
            await self.committed()
            return value, None
        self.metrics.set_offsets(log_end_offset=last)
        try:
            if len(items) == 1:  # the usual change: one batch
                await items[0].done
            elif items:
                await asyncio.gather(*(item.done for item in items))
            else:  # before ZooKeeper is written (registrations while waiting for brokers): durable is enough
                await asyncio.gather(*(asyncio.wrap_future(future) for future in durable))
        except FencedOut:
            raise
        except Exception as exc:
            if self.failed is not None:
                raise ControllerFailed(self.failed) from exc
            if driver.fenced_reason is not None:  # a new Raft leader truncated what it never committed
                raise FencedOut(driver.fenced_reason) from exc
            raise
        return value, last

    async def until_changes_reach_zookeeper(self) -> None:
        """Wait while SYNC_KRAFT_TO_ZK still reads ZooKeeper: a change appended then would be acknowledged
        before ZooKeeper has it (the sync writes it later). Once the sync planned its writes, later changes
        are dual-written before they are answered."""
        driver = self.driver
        while driver is not None and driver.accepts_writes and not driver.writes_to_zookeeper:
            await asyncio.sleep(SYNC_POLL_S)
            driver = self.driver

    async def committed(self) -> None:
        """Wait until everything appended so far is durable (Kafka reads at the committed offset); raises
        ControllerFailed if the log failed."""
        appended = self.last_appended
        if appended is None or (appended.durable.done() and appended.durable.exception() is None):
            return
        try:
            await asyncio.wrap_future(appended.durable)
        except Exception as exc:
            raise ControllerFailed(self.failed or error_text(exc)) from exc

    def _check_writable(self, driver: MigrationDriver) -> None:
        """Refuse a write event of a controller that failed, was fenced, or does not hold the migration yet."""
        if self.failed is not None:
            raise ControllerFailed(self.failed)
        if driver.fenced_reason is not None:
            raise FencedOut(driver.fenced_reason)

    def _append(
        self, metadata_log: MetadataLog, records: list[RecordAndVersion], to_zookeeper: bool, *, first: bool
    ) -> tuple[AppendResult, MetadataImage, MetadataImage]:
        """Append one batch; the image slices before and after it (what ZooKeeper must follow)."""
        keys = touched_keys(records, metadata_log.image) if to_zookeeper else None
        before = cut(metadata_log.image, keys) if keys is not None else metadata_log.image
        try:
            appended = metadata_log.append(records)
        except InvalidRequestError:
            if first:  # refused before anything was replayed: the request fails, the log is fine
                raise
            self.renounce(f"a later batch of one change was refused by {metadata_log.partition_dir}")
            raise ControllerFailed(self.failed or "") from None
        except Exception as exc:
            # Replayed in part, or the log failed before: the image is no longer the log's (Kafka renounces).
            self.renounce(f"appending to {metadata_log.partition_dir} failed: {error_text(exc)}")
            raise ControllerFailed(self.failed or "") from exc
        appended.durable.add_done_callback(self._on_durable)
        self.last_appended = appended
        after = cut(metadata_log.image, keys) if keys is not None else metadata_log.image
        return appended, before, after

    def appended_nothing(self, change: Change) -> None:
        """Event loop: a change without records still runs its hook, at the highest pending offset (Kafka's
        processBatchEndOffset for an event that appended nothing)."""
        metadata_log = self.log
        if change.on_appended is not None and metadata_log is not None:
            last = metadata_log.end_offset - 1
            self._follow_in_memory(partial(change.on_appended, last), last, metadata_log)

    def _run_appended_hooks(self, records: list[RecordAndVersion], base_offset: int) -> None:
        for hook in self.on_appended:
            hook(records, base_offset)

    def _follow_in_memory(self, follow: Callable[[], None], offset: int, metadata_log: MetadataLog) -> None:
        """Run `follow`, which keeps memory beside the log at `offset`; a failure leaves memory behind the log,
        which is fatal as a replay failure is in Kafka."""
        try:
            follow()
        except Exception as exc:
            log.exception("following the append at offset %d in memory failed", offset)
            self.renounce(
                f"following the append at offset {offset} of {metadata_log.partition_dir} in memory failed: "
                f"{error_text(exc)}"
            )
            raise ControllerFailed(self.failed or "") from exc

    def _on_durable(self, durable: concurrent.futures.Future[None]) -> None:
        """Log writer thread: a write or fsync that failed is fatal to this controller."""
        error = durable.exception()
        driver = self.driver
        if driver is not None and driver.fenced_reason is not None:
            return  # no longer leading: a new Raft leader truncated this append, which is answered NOT_CONTROLLER
        if error is not None and self.log is not None:
            self.renounce(f"writing {self.log.partition_dir} failed: {error_text(error)}")

    def renounce(self, reason: str) -> None:
        """Any thread: the log takes no more appends; stop committing and tell the controller (once)."""
        with self._queue_lock:
            if self.failed is not None:
                return
            self.failed = reason
        self.metrics.set_last_error(reason)
        log.error("event=commit_failed %s; this controller can commit nothing more and renounces", reason)
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._on_failed, reason)

    def _new_future(self) -> asyncio.Future[None]:
        return asyncio.get_running_loop().create_future()

    async def _queue_write(self, item: _QueuedWrite) -> None:
        """Queue `item` for the writer thread and wait for its answer."""
        self._enqueue_write(item)
        await item.done

    def _enqueue_write(self, item: _QueuedWrite) -> None:
        """Queue `item` for the writer thread (one drain job for all queued meanwhile)."""
        metadata_log = self.log
        with self._queue_lock:
            self._queued_writes.append(item)
            # Woken when the log's fsync starts (`_on_log_writing`): the writer thread's planning then runs
            # beside the fsync instead of holding the GIL before it. Checked under the lock the hook takes.
            ready = (
                item.appended is None
                or metadata_log is None
                or metadata_log.on_writing is None
                or metadata_log.writing_offset >= item.appended.last_offset
            )
            schedule = ready and not self._drain_scheduled and not self._one_in_flight
            self._drain_scheduled |= schedule
        if schedule:
            try:
                self.writer.submit(self._drain_writes)
            except RuntimeError:  # closed: the writes left are the next leader's to reconcile
                with self._queue_lock:
                    self._queued_writes.remove(item)
                    self._drain_scheduled = False
                self._abandon_batch([item])
        elif not ready and item.appended is not None:
            # A write that fails never starts its fsync: the writer thread must hear of the batch anyway.
            item.appended.durable.add_done_callback(lambda _durable: self._on_log_writing())

    def _on_log_writing(self) -> None:
        """Log writer thread, as a round's fsync starts (or its write failed): let the writer thread take
        the queued batches."""
        with self._queue_lock:
            schedule = bool(self._queued_writes) and not self._drain_scheduled and not self._one_in_flight
            self._drain_scheduled |= schedule
        if schedule:
            with contextlib.suppress(RuntimeError):  # shutting down
                self.writer.submit(self._drain_writes)

    async def _enter_append(self) -> None:
        """Take `_gate` for an append (released by the caller), first waiting out a foreign-write judgment."""
        while True:
            self._gate.acquire()
            if not self._judging:
                return
            self._gate.release()
            over = self._judgment_over
            if over is None or over.done():
                over = self._judgment_over = asyncio.ensure_future(
                    asyncio.get_running_loop().run_in_executor(None, self._await_judgment)
                )
            await asyncio.shield(over)  # shared: a cancelled request must not cancel the others' wait

    def _await_judgment(self) -> None:
        """Worker thread: wait until the watcher finished judging, then let appends go on."""
        judgment = self._judgment
        if judgment is None:
            with self._gate:
                self._judging = False
            return
        with judgment(), self._gate:  # the watcher holds it for the whole judgment
            self._judging = False

    def _drain_writes(self) -> None:
        """Writer thread: write every queued batch to ZooKeeper in one pipelined `apply_ops`, then answer them.

        An empty queue means an earlier drain took this job's batch. The log fsyncs in order, so once the
        last batch is durable so are those before it; each answer goes out only after ZooKeeper has the change.
        """
        with self._queue_lock:
            self._drain_scheduled = False
            if self._one_in_flight:  # settling it schedules the next drain
                return
            batch, self._queued_writes = self._queued_writes, []
        if batch:
            self._write_or_send(batch, one_multi=True)

    def _write_or_send(
        self,
        batch: list[_QueuedWrite],
        *,
        one_multi: bool,
        lost: tuple[OneMulti, MigrationDriver] | None = None,
    ) -> None:
        """Writer thread: write `batch`, answer it, unless it went out as one multi answered on the event loop.

        `lost`: the batch's one multi whose reply was lost with the connection, and the driver that sent it
        (it is sent again first, by that driver: a successor's must not judge its predecessor's fence).
        """
        errors: list[BaseException | None] = [None] * len(batch)
        sent = False
        try:
            if lost is None or not self._resend_lost(batch, *lost, errors):
                # A big batch allocates an object or more per partition: a full collection over the
                # image's millions of objects would cost more than the write itself.
                with gc_paused():
                    sent = self._write_batch(batch, errors, one_multi=one_multi)
        except BaseException as exc:  # a defect: answer every request with it rather than leave them hanging
            log.exception("dual write of %d batch(es) failed unexpectedly", len(batch))
            errors = [exc] * len(batch)
            if any(item.appended is not None for item in batch):
                # Committed changes ZooKeeper may lack: no later offset is recorded until a repair lands.
                self._zk_write_failed(f"dual write failed unexpectedly: {error_text(exc)}")
        finally:
            if not sent:
                for _ in batch:
                    self._write_done()
                self._answer_writes(batch, errors)
                if not one_multi:  # this was the fallback of a batch sent as one multi
                    self._one_settled()

    def _write_batch(
        self, batch: list[_QueuedWrite], errors: list[BaseException | None], *, one_multi: bool
    ) -> bool:
        """Writer thread: apply the durable batches' operations in log order; failures go into `errors`.

        True: the batch went out as one multi (`one_multi` allows it) and is answered when its reply comes.
        """
        driver = self.driver
        assert driver is not None
        # Planned while the log fsyncs (the plans hold only if every batch turns out durable).
        self._plan_deltas(batch, errors)
        everything = [op for item in batch for op in item.ops]
        prepared = driver.prepare_ops(everything)
        one = None
        last = batch[-1].appended
        if (
            one_multi
            and last is not None
            and self.zk_out_of_sync is None
            and driver.zk_sync_failed is None
            and all(item.appended is not None for item in batch)
        ):
            # Built and encoded ready to send before the fsync returns.
            one = driver.one_multi(prepared, last.last_offset, batch[-1].epoch)
        if one is not None and last is not None:
            with self._queue_lock:
                self._one_in_flight = True
            # Sent by the log writer as soon as the fsync returns (or here, if it has): no wake-up of this
            # thread between the fsync and ZooKeeper. The log fsyncs in order, so the last durable means all.
            last.durable.add_done_callback(
                lambda durable: self._send_when_durable(batch, one, driver, durable)
            )
            return True
        durable = _durable_count(batch, errors)
        if durable == 0:
            return False
        written = batch[:durable]
        commits = [item.appended for item in written if item.appended is not None]
        ops = everything if durable == len(batch) else [op for item in written for op in item.ops]
        state = driver.leadership
        # A batch of reverts only leaves the offset; while ZooKeeper misses an earlier change, no offset is
        # recorded until the repair.
        record_offset = bool(commits) and self.zk_out_of_sync is None and driver.zk_sync_failed is None
        offset, epoch = state.kraft_metadata_offset, state.kraft_metadata_epoch
        if commits:
            offset, epoch = commits[-1].last_offset, written[-1].epoch
            self.metrics.set_offsets(durable_offset=offset)
        try:
            driver.apply_ops(ops, offset, epoch, "delta", record_offset=record_offset, prepared=prepared)
        except FencedOut as exc:
            errors[:durable] = [exc] * durable
        except (Zk2KraftError, KazooException) as exc:
            # Committed changes are answered as such; ZooKeeper gets them (and the reverts) by reconciliation.
            what = f"offsets {commits[0].base_offset}..{offset}" if commits else "foreign-write reverts"
            first = commits[0].base_offset if commits else -1
            self._zk_write_failed(
                f"dual write of {what} failed: {exc}", stuck_write(exc, ops, first, offset if commits else -1)
            )
            for i, item in enumerate(written):
                if item.appended is None:
                    errors[i] = exc
        self.metrics.set_offsets(zk_offset=driver.leadership.kraft_metadata_offset)
        return False

    def _plan_deltas(self, batch: list[_QueuedWrite], errors: list[BaseException | None]) -> None:
        """Writer thread: the ZooKeeper operations of each change not planned yet (from its image slices)."""
        for i, item in enumerate(batch):
            if item.delta is None:
                continue
            before, after = item.delta
            item.delta = None
            try:
                item.ops = plan_delta(before, after)
            except Exception as exc:
                # Committed, but ZooKeeper cannot be told the delta: a reconciliation repairs it. Marking
                # ZooKeeper out of sync also keeps this batch off the one multi (which answers all alike).
                offset = item.appended.last_offset if item.appended is not None else "?"
                self._zk_write_failed(f"planning the dual write of offset {offset} failed: {exc}")
                errors[i] = exc

    def _send_when_durable(
        self,
        batch: list[_QueuedWrite],
        one: OneMulti,
        driver: MigrationDriver,
        durable: concurrent.futures.Future[None],
    ) -> None:
        """Log writer thread (the durability callback of the batch's last append): send `one`, or, if the
        log failed, have the writer thread answer the batch the usual way."""
        try:
            if durable.exception() is None:
                self.metrics.set_offsets(durable_offset=one.final.kraft_metadata_offset)
                self._send_one(batch, one, driver)
                return
        except BaseException:  # a defect: the writer thread answers the batch
            log.exception("sending a dual write failed; it is written the usual way")
        driver.drop_one(one)
        self._redo_on_writer(batch)

    def _send_one(self, batch: list[_QueuedWrite], one: OneMulti, driver: MigrationDriver) -> None:
        """Send `one` and return; its reply is judged on the event loop (`_one_answered`)."""
        loop = self._loop
        assert loop is not None
        started = time.monotonic()

        def answered(raw: Any, error: BaseException | None) -> None:
            self._one_answered(batch, one, driver, started, raw, error)

        def encode_ahead() -> None:
            # The event loop is idle while ZooKeeper works: it encodes the answers then, once kazoo has
            # the multi's bytes (so it does not take the GIL from the send). Encoded by the writer thread
            # during the fsync instead, they held the GIL when the fsync returned.
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                loop.call_soon_threadsafe(_encode_ahead, batch)

        driver.send_one(one, _LoopRelay(loop, answered), encode_ahead)

    def _one_answered(
        self,
        batch: list[_QueuedWrite],
        one: OneMulti,
        driver: MigrationDriver,
        started: float,
        raw: Any,
        error: BaseException | None,
    ) -> None:
        """Event loop: settle a batch sent as one multi; what did not simply land goes to the writer thread."""
        if error is None:
            try:
                reply = driver.landed_one(one, raw)
            except Exception:
                log.exception("judging the reply of a dual write failed; it is redone")
                reply = None
            if reply is not None:
                for item in batch:
                    self._publish(item)
                    if not item.done.done():  # its request was not cancelled
                        item.done.set_result(None)
                # After the answers: the woken requests run first (and the next write waits for this).
                seconds = time.monotonic() - started
                asyncio.get_running_loop().call_soon(self._one_landed, batch, one, reply, driver, seconds)
                return
        # Not landed (nothing of it did: redone the Kafka way, which also judges a lost fence) or unanswered.
        self._redo_on_writer(batch, (one, driver) if error is not None else None)

    def _redo_on_writer(
        self, batch: list[_QueuedWrite], lost: tuple[OneMulti, MigrationDriver] | None = None
    ) -> None:
        """Any thread: have the writer thread write a batch sent as one multi the usual way (see
        `_write_or_send` for `lost`), or fail it if the writer thread is gone (shutting down)."""
        try:
            self.writer.submit(self._write_or_send, batch, one_multi=False, lost=lost)
        except RuntimeError:
            self._abandon_batch(batch)

    def _abandon_batch(self, batch: list[_QueuedWrite]) -> None:
        """Shutting down with `batch` unwritten: its requests fail (any thread)."""
        for _ in batch:
            self._write_done()
        self._answer_writes(
            batch, [Zk2KraftError("the controller stopped before ZooKeeper answered")] * len(batch)
        )
        self._one_settled()

    def _one_landed(
        self, batch: list[_QueuedWrite], one: OneMulti, reply: Any, driver: MigrationDriver, seconds: float
    ) -> None:
        """Event loop: the bookkeeping of a landed one multi, then let the next dual write go."""
        try:
            driver.settle_one(one, reply, seconds)
            self.metrics.set_offsets(zk_offset=driver.leadership.kraft_metadata_offset)
        except Exception:
            log.exception("bookkeeping after a dual write failed")
        finally:
            for _ in batch:
                self._write_done()
            self._one_settled()

    def _resend_lost(
        self,
        batch: list[_QueuedWrite],
        one: OneMulti,
        driver: MigrationDriver,
        errors: list[BaseException | None],
    ) -> bool:
        """Writer thread: `driver` sends again its one multi whose reply was lost; True when that settled
        the batch."""
        try:
            return driver.resend_one(one)
        except FencedOut as exc:
            errors[:] = [exc] * len(batch)
        except (Zk2KraftError, KazooException) as exc:
            # Committed and answered as such; ZooKeeper gets them by reconciliation.
            first, last = batch[0].appended, batch[-1].appended
            assert first is not None and last is not None  # only batches of commits go out as one multi
            self._zk_write_failed(
                f"dual write of offsets {first.base_offset}..{last.last_offset} failed: {exc}",
                stuck_write(exc, one.prepared.operations, first.base_offset, last.last_offset),
            )
        return True

    def _one_settled(self) -> None:
        """No one multi is in flight any more: let the writes queued meanwhile go."""
        with self._queue_lock:
            self._one_in_flight = False
            schedule = bool(self._queued_writes) and not self._drain_scheduled
            self._drain_scheduled |= schedule
        if schedule:
            with contextlib.suppress(RuntimeError):  # shutting down
                self.writer.submit(self._drain_writes)

    def _answer_writes(self, batch: list[_QueuedWrite], errors: list[BaseException | None]) -> None:
        """Writer thread: resolve the batch's waiters on the event loop, in one hand-off."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return

        def resolve() -> None:
            for item, error in zip(batch, errors, strict=True):
                if error is None:
                    self._publish(item)
                if item.done.done():  # its request was cancelled
                    continue
                if error is None:
                    item.done.set_result(None)
                else:
                    item.done.set_exception(error)

        with contextlib.suppress(RuntimeError):  # the loop is closing
            loop.call_soon_threadsafe(resolve)

    def _publish(self, item: _QueuedWrite) -> None:
        """Event loop: hand a committed batch to `on_published` (answered in log order, so called in it)."""
        published, item.published = item.published, None
        hook = self.on_published
        if published is None or hook is None:
            return
        try:
            hook(published)
        except Exception:
            log.exception("publishing offset %d to the brokers' channel failed", published.last_offset)

    def _zk_write_failed(self, reason: str, stuck: StuckWrite | None = None) -> None:
        """Writer thread: note that ZooKeeper misses a committed change and have it repaired.

        `stuck` (the refused operation) goes to `/status`; an earlier one not repaired yet keeps its start.
        """
        self.zk_out_of_sync = reason
        self.metrics.set_last_error(reason)
        if stuck is not None:
            self.metrics.set_stuck_write(_still_stuck(self.metrics.stuck_write, stuck))
        log.error(
            "event=zk_write_failed %s; ZooKeeper will be reconciled with the log%s",
            reason, f" (znode {stuck.znode}, {stuck.request}: {stuck.error_code})" if stuck and stuck.znode else "",
        )  # fmt: skip
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._spawn, self._repair_zookeeper)

    async def _repair_zookeeper(self) -> None:
        """Reconcile ZooKeeper with the log (SYNC_KRAFT_TO_ZK's writes), retrying with backoff.

        Appends pause meanwhile and every earlier batch is durable and written first, so the image
        reconciled is exactly the durable log and later dual writes follow it in order.
        """
        if self._repairing:
            return
        self._repairing = True
        assert self._appends_open is not None
        delay = REPAIR_FIRST_DELAY_S
        try:
            while self.zk_out_of_sync is not None and self._serving():
                await asyncio.sleep(delay)
                delay = min(delay * 2, REPAIR_MAX_DELAY_S)
                self._appends_open.clear()
                try:
                    await asyncio.get_running_loop().run_in_executor(None, self.wait_idle)
                    self.zk_out_of_sync = None
                    assert self.driver is not None
                    with self._inflight_cond:
                        self._inflight += 1  # the foreign-write watcher waits for the repair too
                    try:
                        ops = await self.driver.reconcile()
                    finally:
                        self._write_done()
                    stuck = self.metrics.stuck_write
                    log.info(
                        "event=zk_repaired ops=%d%s", len(ops),
                        f" after {stuck.attempts} failed attempt(s) of {stuck.operation}" if stuck else "",
                    )  # fmt: skip
                    self.metrics.set_last_error(None)
                    self.metrics.set_stuck_write(None)
                except FencedOut:
                    return
                except (Zk2KraftError, KazooException) as exc:
                    self.zk_out_of_sync = f"reconciliation failed: {exc}"
                    self.metrics.set_last_error(self.zk_out_of_sync)
                    assert self.log is not None and self.driver is not None
                    failed = stuck_write(exc, self.driver.reconciliation_ops, -1, self.log.end_offset - 1)
                    stuck = _still_stuck(self.metrics.stuck_write, failed).model_copy(
                        update={"next_retry_in_s": delay}
                    )
                    self.metrics.set_stuck_write(stuck)
                    # One line per attempt, with the znode and the code: a stuck write is never silent.
                    log.error("event=zk_repair_failed %s; retrying in %.1f s; %s", stuck.line(), delay, exc)
                finally:
                    self._appends_open.set()
        finally:
            self._repairing = False
            self._on_repaired()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Any thread but the loop's: wait until no dual write is in flight; False if `timeout` ran out or
        the pipeline closed with writes left."""
        with self._inflight_cond:
            return self._inflight_cond.wait_for(lambda: self._inflight == 0 or self._closed, timeout) and (
                self._inflight == 0
            )

    def _write_done(self) -> None:
        with self._inflight_cond:
            self._inflight -= 1
            self._inflight_cond.notify_all()

    def hold_appends(self) -> MetadataImage:
        """Watcher thread (inside its judgment, see `judged_by`): the image, once ZooKeeper holds all of it.

        New appends wait (`_judging`) and the dual writes in flight are let finish, so ZooKeeper reflects
        exactly this image while the watcher reads it; the image does not change meanwhile.
        """
        with self._gate:
            self._judging = True
        with self._inflight_cond:
            if not self._inflight_cond.wait_for(lambda: self._inflight == 0, JUDGE_WAIT_S):
                raise Zk2KraftError(
                    f"dual writes to ZooKeeper still in flight after {JUDGE_WAIT_S:.0f} s; foreign-write "
                    f"check postponed"
                )
        assert self.log is not None
        return self.log.image


def stuck_write(exc: BaseException, ops: Sequence[ZkOperation], first: int, last: int) -> StuckWrite:
    """What `/status` shows of a dual write that did not land: the operation, its failing request and code."""
    operation = "ZooKeeper write"
    if isinstance(exc, ZkBatchError) and exc.failed_index < len(ops):
        op = ops[exc.failed_index]
        operation = f"{op.op_type} ({op.description})" if op.description else op.op_type
    request = znode = code = None
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, MigrationClientError) and cause.failures:
            request, number = cause.failures[0]  # the first: a missing parent's refusal explains the rest
            znode, code = request.partition(" ")[2] or None, code_name(number)
            break
        cause = cause.__cause__
    return StuckWrite(
        operation=operation, request=request, znode=znode, error_code=code, first_offset=first,
        last_offset=last, since_ms=time.time_ns() // 1_000_000, attempts=1, next_retry_in_s=None,
        error=str(exc),
    )  # fmt: skip


def _still_stuck(earlier: StuckWrite | None, now: StuckWrite) -> StuckWrite:
    """`now`, counted as one more attempt of `earlier` (its start and first offset kept) when there was one."""
    if earlier is None:
        return now
    first = earlier.first_offset if earlier.first_offset >= 0 else now.first_offset
    return now.model_copy(
        update={"since_ms": earlier.since_ms, "attempts": earlier.attempts + 1, "first_offset": first}
    )


class _LoopRelay:
    """Passes one ZooKeeper reply from kazoo's connection thread straight to the event loop (first outcome only)."""

    __slots__ = ("_deliver", "_fired", "_lock", "_loop")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, deliver: Callable[[Any, BaseException | None], None]
    ) -> None:
        self._loop = loop
        self._deliver = deliver
        self._fired = False
        # kazoo may report from the sending thread (a closed connection) and later from its own.
        self._lock = threading.Lock()

    def set(self, value: Any) -> None:
        self._post(value, None)

    def set_exception(self, exception: BaseException) -> None:
        self._post(None, exception)

    def _post(self, value: Any, error: BaseException | None) -> None:
        with self._lock:
            if self._fired:
                return
            self._fired = True
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            self._loop.call_soon_threadsafe(self._deliver, value, error)


@dataclass(frozen=True, slots=True)
class PublishedBatch:
    """A committed batch as the brokers' channel hears of it: its records, the image slices cut before and
    after its append, its last offset, and the log's image (which may have moved on since)."""

    records: list[RecordAndVersion]
    before: MetadataImage
    after: MetadataImage
    last_offset: int
    image: MetadataImage


@dataclass(slots=True)
class _QueuedWrite:
    """A committed batch waiting for ZooKeeper: its append, its operations, its epoch and its waiter.

    `appended` is None for a revert of foreign writes (operations only, nothing in the log).
    """

    appended: AppendResult | None
    ops: list[ZkOperation]
    epoch: int
    done: asyncio.Future[None]
    encoded: EncodedResponse | None = None
    delta: tuple[MetadataImage, MetadataImage] | None = None
    """The image slices before and after the change, until the writer thread plans them into `ops`."""
    published: PublishedBatch | None = None
    """What `on_published` hears once the batch is answered as committed (None: no hook, or a revert)."""


def _encode_ahead(batch: list[_QueuedWrite]) -> None:
    """Encode the answers of `batch` before ZooKeeper's reply comes (those not already answered)."""
    for item in batch:
        if item.encoded is not None and item.encoded.body is None and not item.done.done():
            with contextlib.suppress(Zk2KraftError):  # encoded (and reported) again when sent
                item.encoded.encode()


def _durable_count(batch: list[_QueuedWrite], errors: list[BaseException | None]) -> int:
    """How many batches (from the first) are durable; the others' errors go into `errors`.

    The log fsyncs in order and a failed write fails every append behind it, so the durable ones are a prefix.
    """
    last = next((item.appended for item in reversed(batch) if item.appended is not None), None)
    try:
        if last is not None:
            last.durable.result()
        return len(batch)
    except Exception:
        pass
    count = 0
    first: BaseException | None = None
    for i, item in enumerate(batch):
        error = item.appended.durable.exception() if item.appended is not None else None
        first = first or error
        if first is None:
            count += 1
        else:  # not written: a revert behind a lost append waits for the repair too
            errors[i] = error or first
    return count
