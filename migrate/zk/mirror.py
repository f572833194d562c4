"""A copy of one chroot's znodes in memory, kept current through a persistent recursive watch.

A bridge that follows the Raft leader keeps one, so that once elected it reconciles ZooKeeper against a
tree that is already read: a `sync`, then the znodes changed since, instead of every znode again.
No Kafka counterpart: Kafka's KRaftMigrationZkWriter re-reads ZooKeeper at every leader change
(docs/architecture.md lists the departure). Needs ZooKeeper 3.6 or newer (addWatch, opcode 106).
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import ssl
import struct
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Self

from migrate.errors import CorruptDataError, UnsupportedVersionError, Zk2KraftError, error_text
from migrate.zk import paths
from migrate.zk.cluster import from_tree, reusable_topics
from migrate.zk.live import (
    _HEADER,
    _REPLY,
    ZkConnectOptions,
    _ConnectionLost,
    _normalise_path,
    _path_request,
    _Request,
    _Session,
    _TreeReader,
)
from migrate.zk.model import Topic, ZkClusterModel
from migrate.zk.protocol import (
    ADD_WATCH_PERSISTENT_RECURSIVE,
    EVENT_NODE_CREATED,
    EVENT_NODE_DELETED,
    INT,
    NONODE,
    OP_ADD_WATCH,
    OP_GET_DATA,
    OP_SYNC,
    UNIMPLEMENTED,
    XID_WATCH,
    jute_string,
)
from migrate.zk.tree import ZNode, ZTree

log = logging.getLogger(__name__)

_EVENT = struct.Struct("!ii")  # WatcherEvent: type, state; then the path


_TOPICS_PREFIX = paths.TOPICS + "/"
MAX_RETRY_S = 60.0
"""A mirror that keeps failing reads all of ZooKeeper again at most this often."""


@dataclass(frozen=True, slots=True)
class MirroredTree:
    """What a taker gets: the tree, and its topics already decoded from znodes unchanged since."""

    tree: ZTree
    decoded_topics: Mapping[str, Topic]

    def model(self) -> ZkClusterModel:
        """`from_tree(tree, strict=False)`, decoding only what the mirror had not decoded already."""
        return from_tree(self.tree, strict=False, reuse=self.decoded_topics)


class _MirrorReader(_TreeReader):
    """The bulk reader on a session that first sets the watch; afterwards it re-reads what the events name."""

    def __init__(self, options: ZkConnectOptions, root: str) -> None:
        super().__init__(
            options, root, progress=None, batch_size=200, max_batch_bytes=1 << 20, max_in_flight=128,
            max_retries=0, multi_read=None, acls=False,
        )  # fmt: skip
        self.changed: set[str] = set()
        self.copy: ZTree | None = None
        """The tree once loaded, kept current in place (so handing it over copies nothing)."""
        self.decoded: ZkClusterModel | None = None
        self.changed_topics: set[str] = set()
        """Topics with a znode read again since `decoded` was made."""
        self.decoded_at = 0.0
        self.barrier_xid: int | None = None
        self.barrier_answered = False

    def load(self) -> None:
        """Set the watch, then read every znode (changes during the read are noted and read again later)."""
        self.walk()
        for rel in self.got.gone:
            self.got.data.pop(rel, None)
        self.got.gone.clear()
        self.copy = self.build_tree()
        self.got.data.clear()
        self.walk_children = False  # each created or deleted znode has its own event from now on
        self.decode()

    def decode(self) -> None:
        """Decode the copy again, the unchanged topics taken over (the taker's decode then reuses them)."""
        assert self.copy is not None
        reuse = None if self.decoded is None else reusable_topics(self.decoded, self.changed_topics)
        self.decoded = from_tree(self.copy, strict=False, reuse=reuse)
        self.changed_topics.clear()
        self.decoded_at = time.monotonic()

    def refresh(self, wake: socket.socket, timeout_s: float) -> None:
        """One round: send reads for the changed znodes, then handle what arrives within `timeout_s`."""
        assert self._session is not None
        session = self._session
        if not self.barrier_answered:
            self._queue_changed()
        self.fill(session)
        session.ping_if_idle()
        sock = session.sock
        pending = isinstance(sock, ssl.SSLSocket) and sock.pending() > 0
        ready = [sock] if pending else select.select([sock, wake], [], [], timeout_s)[0]
        if wake in ready:
            wake.recv(64)
        if sock in ready:
            for frame in session.read_frames():
                self._on_frame(frame)

    def _queue_changed(self) -> None:
        self.todo.extend((OP_GET_DATA, rel) for rel in sorted(self.changed))
        self.changed.clear()

    def start_barrier(self) -> None:
        """A sync: once answered, every change ZooKeeper made before it has had its event here."""
        assert self._session is not None
        xid = self._session.xid()
        self.barrier_xid = xid
        self.outstanding.append((xid, _Request(OP_SYNC, [(OP_SYNC, "/")])))
        self._session.send(_path_request(xid, OP_SYNC, self.server_path("/")))

    def settled(self) -> bool:
        """The barrier is answered and every znode changed before it has been read again."""
        return self.barrier_answered and not self.todo and not self.outstanding

    def tree(self) -> ZTree:
        assert self.copy is not None
        return ZTree(source=self.copy.source, nodes=self.copy.nodes, last_zxid=self.last_zxid)

    def handover(self) -> MirroredTree:
        assert self.decoded is not None
        return MirroredTree(self.tree(), reusable_topics(self.decoded, self.changed_topics))

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

    # -- the reader's hooks

    def _ensure_session(self) -> _Session:
        if self._session is None:
            if self.got.data or self.copy is not None:
                raise _ConnectionLost("the watch session was lost: changes may have been missed")
            session = self.connect()
            self._session = session
            watch, sync = session.xid(), session.xid()
            path = self.server_path("/")
            self.outstanding.append((watch, _Request(OP_ADD_WATCH, [(OP_ADD_WATCH, "/")])))
            self.outstanding.append((sync, _Request(OP_SYNC, [(OP_SYNC, "/")])))
            body = jute_string(path) + INT.pack(ADD_WATCH_PERSISTENT_RECURSIVE)
            session.send(
                _HEADER.pack(8 + len(body), watch, OP_ADD_WATCH) + body + _path_request(sync, OP_SYNC, path)
            )
        return self._session

    def _connection_lost(self, exc: _ConnectionLost) -> None:
        raise exc  # events may have been missed: only a whole new read is a true copy

    def _on_frame(self, frame: bytes) -> None:
        xid = INT.unpack_from(frame, 0)[0] if len(frame) >= _REPLY.size else None
        if xid == XID_WATCH:
            self._on_event(frame)
            return
        if self.outstanding and self.outstanding[0][1].opcode == OP_ADD_WATCH:
            (err,) = INT.unpack_from(frame, _REPLY.size - 4)
            if err == UNIMPLEMENTED:
                raise UnsupportedVersionError(f"{self.source} has no persistent watches (ZooKeeper 3.6 or newer)")
        super()._on_frame(frame)
        if xid == self.barrier_xid and not self.barrier_answered:
            # Changes made after the sync are the new leader's to judge, not this copy's.
            self.barrier_answered = True
            self._queue_changed()

    def _on_result(self, op: tuple[int, str], err: int, frame: bytes, pos: int) -> int:
        copy = self.copy
        if copy is None:
            return super()._on_result(op, err, frame, pos)
        rel = op[1]
        if rel.startswith(_TOPICS_PREFIX):
            self.changed_topics.add(rel[len(_TOPICS_PREFIX) :].split("/", 1)[0])
        if err == NONODE:  # the znode is gone
            copy.nodes.pop(rel, None)
            return pos
        end = super()._on_result(op, err, frame, pos)
        found = self.got.data.pop(rel, None)
        if found is not None:
            copy.nodes[rel] = ZNode(rel, found[0], found[1], ())
        return end

    def _on_event(self, frame: bytes) -> None:
        try:
            kind, _state = _EVENT.unpack_from(frame, _REPLY.size)
            (length,) = INT.unpack_from(frame, _REPLY.size + _EVENT.size)
            start = _REPLY.size + _EVENT.size + 4
            if length < 0 or start + length != len(frame):
                raise CorruptDataError(f"watch event from {self.source}", start, f"path of {length} bytes")
            path = frame[start : start + length].decode("utf-8")
        except (struct.error, UnicodeDecodeError) as exc:
            raise CorruptDataError(f"watch event from {self.source}", None, str(exc)) from exc
        if self.root and path != self.root and not path.startswith(self.root + "/"):
            return
        rel = path[len(self.root) :] or "/"
        self.changed.add(rel)
        if kind in (EVENT_NODE_CREATED, EVENT_NODE_DELETED) and rel != "/":
            # The parent's Stat (children count, cversion, pzxid) changed too, without an event of its own.
            self.changed.add(rel.rpartition("/")[0] or "/")


class ZkMirror:
    """Keeps a copy of ZooKeeper's tree under `options`' chroot on its own thread and session."""

    def __init__(
        self, options: ZkConnectOptions, *, retry_s: float = 1.0, poll_s: float = 0.5, decode_s: float = 30.0
    ) -> None:
        self.options = options
        self.decode_s = decode_s
        """At most this often the copy is decoded again, for the topics changed since."""
        self.root = options.chroot + _normalise_path("/")
        self.retry_s = retry_s
        self.poll_s = poll_s
        self.loads = 0
        """Whole reads completed (the first, and one after each lost session)."""
        self._cond = threading.Condition()
        self._following = False
        self._take = False
        self._result: MirroredTree | None = None
        self._done = False
        self._stopped = threading.Event()
        self._wake_r, self._wake_w = socket.socketpair()
        self._thread: threading.Thread | None = None

    @property
    def following(self) -> bool:
        """Loaded and current: a `take` now needs only the sync and the changed znodes."""
        return self._following

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._run, name="zk-mirror", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stopped.set()
        self._poke()
        if self._thread is not None:
            self._thread.join(timeout)
        self._wake_r.close()
        self._wake_w.close()

    def wait_following(self, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._following or self._done, timeout)

    def take(self, timeout: float) -> MirroredTree | None:
        """ZooKeeper's tree as of this call, and the mirror stops; None if it is not loaded and current."""
        with self._cond:
            if not self._following:
                self._stopped.set()
                self._poke()
                return None
            self._take = True
        self._poke()
        with self._cond:
            self._cond.wait_for(lambda: self._done, timeout)
            result, self._result = self._result, None
        self._stopped.set()
        self._poke()
        return result

    def _poke(self) -> None:
        with contextlib.suppress(OSError):  # closed: the thread is gone already
            self._wake_w.send(b"\0")

    def _run(self) -> None:
        retry_s = self.retry_s
        try:
            while not self._stopped.is_set():
                reader = _MirrorReader(self.options, self.root)
                try:
                    reader.load()
                    self.loads += 1
                    retry_s = self.retry_s
                    log.info(
                        "event=zk_mirror_loaded znodes=%d root=%s", len(reader.tree()), self.root or "/"
                    )
                    with self._cond:
                        self._following = True
                        self._cond.notify_all()
                    self._follow(reader)
                    return
                except UnsupportedVersionError as exc:
                    log.warning("event=zk_mirror_off reason=%r: once elected, this bridge reads all of it", str(exc))
                    return
                except (_ConnectionLost, Zk2KraftError, OSError) as exc:
                    log.warning(
                        "event=zk_mirror_lost reason=%r (reading all of ZooKeeper again in %.0f s)",
                        error_text(exc), retry_s,
                    )  # fmt: skip
                    with self._cond:
                        self._following = False
                        if self._take:
                            return
                    self._stopped.wait(retry_s)
                    retry_s = min(retry_s * 2, MAX_RETRY_S)
                finally:
                    reader.close()
        finally:
            with self._cond:
                self._following = False
                self._done = True
                self._cond.notify_all()

    def _follow(self, reader: _MirrorReader) -> None:
        timeout = min(self.poll_s, max(0.05, self.options.session_timeout_ms / 3000.0))
        while not self._stopped.is_set():
            if self._take and reader.barrier_xid is None:
                reader.start_barrier()
            reader.refresh(self._wake_r, timeout)
            if reader.settled():
                copy = reader.handover()
                with self._cond:
                    self._result = copy
                return
            if reader.changed_topics and not self._take and time.monotonic() - reader.decoded_at > self.decode_s:
                reader.decode()
