"""The threaded part: one-shot kazoo watches on the dual-written znodes, our own writes told apart."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.protocol.states import EventType, WatchedEvent

from bridge.metrics import BridgeMetrics
from bridge.zk.foreign_writes.classify import classify
from bridge.zk.foreign_writes.entities import (
    DELETED,
    LEGACY_ADMIN_ACTIONS,
    WATCHED_ROOTS,
    ForeignWrite,
    ForeignWriteMode,
    entity_path,
    image_entity_paths,
    watch_kinds,
)
from bridge.zk.foreign_writes.importing import ImportPlan, records_to_import
from bridge.zk.foreign_writes.revert import revert_operations
from bridge.zk.leadership import DeleteRequest, ZkRequest, ZkResult
from bridge.zk.operations import (
    ZkOperation,
)
from migrate.errors import Zk2KraftError
from migrate.kraft.image import (
    MetadataImage,
)
from migrate.zk import paths
from migrate.zk.cluster import from_tree
from migrate.zk.model import (
    ZkClusterModel,
)
from migrate.zk.tree import Stat, ZNode, ZTree

log = logging.getLogger(__name__)


@dataclass(slots=True)
class ForeignWriteBatch:
    """Foreign writes noticed together, with the ZooKeeper state they were judged on (affected entities only)."""

    mode: ForeignWriteMode
    writes: list[ForeignWrite]
    zk: ZkClusterModel
    existing: frozenset[str] | None = None
    """Paths of the partition znodes (`/brokers/topics/<t>/partitions/<p>[/state]`) read for foreign topics."""

    def import_plan(self, image: MetadataImage) -> ImportPlan:
        return records_to_import(image, self.zk, self.writes)

    def revert_operations(self, image: MetadataImage) -> list[ZkOperation]:
        return revert_operations(image, self.zk, self.writes, existing=self.existing)


ABSENT = object()
"""A znode that does not exist (unlike b"" or null data)."""
_UNKNOWN = object()
"""A znode created between two reads: its data was not read."""


class OwnWriteLog:
    """This controller's writes to entity znodes: the last one known landed, and those still unanswered.

    The ZooKeeper client that dual-writes tells it of each request (`sent`, before sending) and its reply
    (`settled`): it is that client's `observer`. A watch event whose znode holds what one of them wrote
    needs no judgment: the content is this controller's image at some moment, and any later change of the
    image brings a later write (and event) of its own. Anything else is judged. Newest `limit` znodes kept.
    """

    def __init__(self, limit: int = 65536) -> None:
        self.limit = limit
        self._last: dict[str, object] = {}
        self._pending: dict[str, list[ZkRequest]] = {}
        self._lock = threading.Lock()

    def sent(self, request: ZkRequest) -> None:
        path = request.path
        if entity_path(path) != path:
            return  # containers, partitions, notifications, /migration: nobody judges them alone
        with self._lock:
            self._pending.setdefault(path, []).append(request)

    def settled(self, result: ZkResult) -> None:
        request = result.request
        path = request.path
        with self._lock:
            pending = self._pending.get(path)
            if not pending:
                return
            index = next((i for i, r in enumerate(pending) if r is request), None)
            if index is None:
                return
            if result.ok:
                # One session's requests are applied in order: those sent before it are settled too.
                del pending[: index + 1]
                self._last.pop(path, None)
                self._last[path] = _content(request)
                if len(self._last) > self.limit:
                    del self._last[next(iter(self._last))]
            else:
                del pending[index]
            if not pending:
                del self._pending[path]

    def knows(self, path: str) -> bool:
        """Whether we wrote `path` (as far as the log remembers)."""
        with self._lock:
            return path in self._last or path in self._pending

    def matches(self, path: str, content: object) -> bool:
        """Whether `content` (data, None for null, or ABSENT) is what one of our writes left at `path`."""
        with self._lock:
            if path in self._last and self._last[path] == content:
                return True
            return any(_content(r) == content for r in self._pending.get(path, ()))


def _content(request: ZkRequest) -> object:
    return ABSENT if isinstance(request, DeleteRequest) else request.data


_RESCAN = ("rescan", "", "")
_STOP = ("stop", "", "")
_Item = tuple[str, str, str]


class ForeignWriteWatcher:
    """Watches the dual-written znodes through `client` and reports foreign writes to `on_change`.

    `expected()` returns the image ZooKeeper should reflect now. The driver wraps every dual-write in
    `with watcher.own_writes():` (from the image change until its ZooKeeper writes are done): events are
    judged only outside such blocks, against a fresh read of ZooKeeper, so our own writes compare equal.
    `on_change(batch)` runs on the watcher's thread; in report mode it may be omitted. After any
    reconnection every entity is compared again, since one-shot watches miss what happens meanwhile.
    """

    def __init__(
        self,
        client: KazooClient,
        expected: Callable[[], MetadataImage],
        on_change: Callable[[ForeignWriteBatch], None] | None = None,
        *,
        mode: ForeignWriteMode | str = ForeignWriteMode.REPORT,
        metrics: BridgeMetrics | None = None,
        settle_s: float = 0.05,
    ) -> None:
        self.client = client
        self.expected = expected
        self.on_change = on_change
        self.mode = ForeignWriteMode(mode)
        self.metrics = metrics
        self.settle_s = settle_s
        self.batches_seen = 0
        self._queue: queue.Queue[_Item] = queue.Queue()
        self._write_lock = threading.RLock()
        self._entities: set[str] = set()
        self._reported: dict[str, ForeignWrite] = {}
        self._children: dict[str, set[str]] = {}
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()
        self._idle = threading.Condition()
        self._pending = 0
        self._was_disconnected = False
        # path -> the kazoo async result of its watched get, sent ahead while events are processed
        self._prefetched: dict[str, Any] = {}
        self.written = OwnWriteLog()
        """Make it the `observer` of the ZooKeeper client that dual-writes."""

    # ------------------------------------------------------------------ lifecycle

    def start(self, *, scan: bool = False) -> ForeignWriteWatcher:
        """Arm the watches (synchronously, so changes made after start() returns are seen)."""
        if self._thread is not None:
            return self
        self._stopped.clear()
        self.client.add_listener(self._on_state)
        with self._write_lock:
            self._arm_all()
        self._thread = threading.Thread(target=self._run, name="foreign-zk-writes", daemon=True)
        self._thread.start()
        if scan:
            self._put(_RESCAN)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop judging; waits up to `timeout` s for the thread (it may be in a call to an unreachable ZooKeeper)."""
        if self._thread is None:
            return
        self._stopped.set()
        self.client.remove_listener(self._on_state)
        self._put(_STOP)
        self._thread.join(timeout)
        self._thread = None

    def __enter__(self) -> ForeignWriteWatcher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @contextmanager
    def own_writes(self) -> Iterator[None]:
        """Hold off judging events while the driver changes the image and writes ZooKeeper."""
        with self._write_lock:
            yield

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Wait until every event queued so far has been judged (for tests and orderly shutdown)."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def scan(self, *, repeat: bool = False) -> ForeignWriteBatch | None:
        """Compare every entity (ZooKeeper's and the image's) now, on the caller's thread, and dispatch.

        Differences already reported are left out unless `repeat` (e.g. after a failed revert).
        """
        with self._write_lock:
            return self._check(self._entities | image_entity_paths(self.expected()), repeat=repeat)

    # ------------------------------------------------------------------ kazoo callbacks (never block)

    def _put(self, item: _Item) -> None:
        with self._idle:
            self._pending += 1
        self._queue.put(item)

    def _on_event(self, event: WatchedEvent) -> None:
        # Session events (expiry, closing) carry no path; the state listener rescans after reconnection.
        if event.path is not None and not self._stopped.is_set():
            self._put(("event", str(event.type), event.path))

    def _on_state(self, state: str) -> None:
        if state in (KazooState.SUSPENDED, KazooState.LOST):
            self._was_disconnected = True
        elif state == KazooState.CONNECTED and self._was_disconnected:
            self._was_disconnected = False
            self._put(_RESCAN)

    # ------------------------------------------------------------------ worker

    def _run(self) -> None:
        while True:
            items = [self._queue.get()]
            if items[0] is not _STOP and self.settle_s > 0:
                # A legacy tool writes the entity and then its change notification: judge them together.
                self._stopped.wait(self.settle_s)
            while True:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            try:
                if any(item is _STOP for item in items) or self._stopped.is_set():
                    return
                self._process(items)
            except KazooException as exc:
                # The connection went away; the CONNECTED listener queues a full rescan.
                log.warning("foreign-write watcher lost ZooKeeper while checking (%s); will rescan", exc)
                if self.client.connected:
                    self._put(_RESCAN)
            except Zk2KraftError as exc:
                log.error("foreign-write watcher could not judge ZooKeeper's state: %s", exc)
            except Exception:
                log.exception("foreign-write watcher failed")
            finally:
                with self._idle:
                    self._pending -= len(items)
                    self._idle.notify_all()

    def _process(self, items: list[_Item]) -> None:
        with self._write_lock:
            self._prefetched.clear()
            try:
                if any(item is _RESCAN for item in items):
                    self._arm_all()
                    self._check(self._entities | image_entity_paths(self.expected()))
                    return
                self._prefetch(path for _tag, _type, path in items if watch_kinds(path)[1])
                affected: set[str] = set()
                for _tag, event_type, path in items:
                    affected |= self._on_znode_event(event_type, path)
            finally:
                self._prefetched.clear()
            if affected:
                self._check(affected)

    def _on_znode_event(self, event_type: str, path: str) -> set[str]:
        """Re-arm the watch an event consumed; the entity znodes it may have changed (not our own writes)."""
        entity = entity_path(path)
        # A new child (users/<u>/clients) leaves the parent's data as it was.
        data_event = entity is not None and event_type != str(EventType.CHILD)
        affected = self._arm(path, judge_self=data_event and entity == path)
        if data_event and entity != path:
            affected.add(entity)  # type: ignore[arg-type]
        return affected

    # ------------------------------------------------------------------ arming

    def _arm_all(self) -> None:
        self._children.clear()
        for root in WATCHED_ROOTS:
            self._arm(root)

    def _arm(self, path: str, *, judge_self: bool = False) -> set[str]:
        """Set the watches of `path` (and of new children); returns the entity znodes to judge: entities newly
        seen below it, and `path` itself if `judge_self`, unless they hold what we last wrote there."""
        children, data = watch_kinds(path)
        new_entities: set[str] = set()
        if data:
            content = self._arm_data(path)
            if content is not ABSENT and entity_path(path) == path:
                self._entities.add(path)
            if judge_self and not self._own(path, content):
                new_entities.add(path)
        elif judge_self:
            new_entities.add(path)
        if not children:
            return new_entities
        try:
            names = self.client.get_children(path, watch=self._on_event)
        except NoNodeError:
            self.client.exists(path, watch=self._on_event)  # fires when the container appears
            self._children.pop(path, None)
            return new_entities
        known = self._children.get(path, set())
        self._children[path] = set(names)
        new_children = [
            child
            for child in (f"{path}/{name}" for name in sorted(set(names) - known))
            if watch_kinds(child) != (False, False)
        ]
        self._prefetch(child for child in new_children if watch_kinds(child)[1])
        for child in new_children:
            new_entities |= self._arm(child, judge_self=entity_path(child) == child)
        return new_entities

    def _prefetch(self, znodes_: Iterable[str]) -> None:
        """Send the data reads `_arm_data` will make for `znodes_` at once (one round of waits, not one each)."""
        for path in znodes_:
            if path not in self._prefetched:
                self._prefetched[path] = self.client.get_async(path, watch=self._on_event)

    def _arm_data(self, path: str) -> object:
        """Leave a data watch on `path` (fires on create, change, delete); its data (None: null), ABSENT, or
        _UNKNOWN when it appeared between the two reads."""
        sent = self._prefetched.pop(path, None)
        try:
            data, _stat = sent.get() if sent is not None else self.client.get(path, watch=self._on_event)
            return data
        except NoNodeError:
            # get() leaves no watch on a missing znode; exists() does, and fires when it is created.
            return ABSENT if self.client.exists(path, watch=self._on_event) is None else _UNKNOWN

    def _own(self, path: str, content: object) -> bool:
        """ZooKeeper holds what we last wrote to entity `path`: no judgment, and it agrees with the image.

        A read answered just before a write of ours landed shows our previous content, which the log no longer
        counts once that write is answered: such a path is read once more (the watch the first read left
        catches whatever happens after it) rather than judged, which would hold appends.
        """
        if content is _UNKNOWN or not self.written.matches(path, content):
            if not self.written.knows(path):
                return False
            try:
                content = self.client.get(path)[0]
            except NoNodeError:
                content = ABSENT
            if not self.written.matches(path, content):
                return False
        self._reported.pop(path, None)
        if content is ABSENT:
            self._entities.discard(path)
        return True

    # ------------------------------------------------------------------ judging

    def _check(self, affected: set[str], *, repeat: bool = False) -> ForeignWriteBatch | None:
        image = self.expected()
        tree = _read_entities(self.client, affected, topic_subtrees=set())
        model = from_tree(tree, strict=False)
        writes = classify(image, model, affected)
        for write in writes:
            (self._entities.add if write.kind != DELETED else self._entities.discard)(write.path)
        differing = {w.path for w in writes}
        for path in affected - differing:
            self._reported.pop(path, None)  # ZooKeeper agrees with the image again
        # A difference is reported once, not at every later event that leaves it as it was.
        writes = [w for w in writes if repeat or self._reported.get(w.path) != w]
        if not writes:
            return None
        topics = {w.path for w in writes if w.path.startswith(paths.TOPICS + "/")}
        existing: frozenset[str] | None = None
        if topics:
            tree = _read_entities(self.client, affected, topic_subtrees=topics)
            model = from_tree(tree, strict=False)
            writes = classify(image, model, affected)
            existing = frozenset(
                p for p in tree.nodes if p.count("/") >= 5 and p.startswith(paths.TOPICS + "/")
            )
        self._reported.update((w.path, w) for w in writes)
        batch = ForeignWriteBatch(self.mode, writes, model, existing)
        self._dispatch(batch)
        return batch

    def _dispatch(self, batch: ForeignWriteBatch) -> None:
        self.batches_seen += 1
        action = {
            ForeignWriteMode.REPORT: "left as is (--foreign-zk-writes report)",
            ForeignWriteMode.REVERT: "to be reverted to the metadata log's state",
            ForeignWriteMode.IMPORT: "to be imported into the metadata log",
        }[batch.mode]
        for write in batch.writes:
            log.warning("foreign ZooKeeper write: znode %s %s by someone else (%s); %s", write.path, write.kind,
                        write.entity + (": " + write.detail if write.detail else ""),
                        LEGACY_ADMIN_ACTIONS.get(write.path, action))  # fmt: skip
        if self.metrics is not None:
            self.metrics.observe_foreign_writes([w.kind for w in batch.writes], batch.mode.value)
        if self.on_change is not None:
            self.on_change(batch)


def _read_entities(client: KazooClient, entity_paths: Iterable[str], *, topic_subtrees: set[str]) -> ZTree:
    """The affected entity znodes (and, for `topic_subtrees`, their partitions and states) as a ZTree."""
    tree = ZTree(source="ZooKeeper (foreign-write check)")
    pending = [(path, client.get_async(path)) for path in sorted(entity_paths)]
    for topic in sorted(topic_subtrees):
        try:
            partitions = client.get_children(f"{topic}/partitions")
        except NoNodeError:
            continue
        tree.nodes[f"{topic}/partitions"] = ZNode(f"{topic}/partitions", None)
        for p in partitions:
            pending.append((f"{topic}/partitions/{p}", client.get_async(f"{topic}/partitions/{p}")))
            pending.append(
                (f"{topic}/partitions/{p}/state", client.get_async(f"{topic}/partitions/{p}/state"))
            )
    for path, reply in pending:
        try:
            data, stat = reply.get()
        except NoNodeError:
            continue
        tree.nodes[path] = ZNode(
            path,
            data,
            Stat(czxid=stat.czxid, mzxid=stat.mzxid, version=stat.version, data_length=stat.data_length),
        )
    return tree
