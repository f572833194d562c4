"""The one module that relies on kazoo's internals; a kazoo upgrade is reviewed here (see the pin in
pyproject.toml).

What it relies on: the threading handler's `select` (replaced by a subclass passed as
`KazooClient(handler=...)`), `KazooClient._call` (queue a request without kazoo's async-result thread hop),
the connection thread calling a request's `serialize()` once per send, `TransactionRequest.operations`
(ops kazoo's builder refuses: null data), the private session timeout and SASL options a client was
built with, and two undocumented modules re-exported here for the rest of the code: the request tuples of
`kazoo.protocol.serialization` (the ops of a multi) and `kazoo.hosts.collect_hosts` (kazoo's own parse of a
connect string, so ours cannot disagree with it).
"""

from __future__ import annotations

import logging
import select
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from kazoo.client import KazooClient, TransactionRequest
from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.hosts import collect_hosts as collect_hosts
from kazoo.protocol.serialization import CheckVersion as CheckVersion
from kazoo.protocol.serialization import Create as Create
from kazoo.protocol.serialization import Delete as Delete
from kazoo.protocol.serialization import SetData as SetData
from kazoo.protocol.serialization import Transaction as Transaction

log = logging.getLogger(__name__)

_POLL_READ = select.POLLIN | select.POLLPRI | select.POLLHUP | select.POLLERR | select.POLLNVAL
_POLL_WRITE = select.POLLOUT | select.POLLHUP | select.POLLERR | select.POLLNVAL


def _fd(fileobj: Any) -> int:
    return fileobj if isinstance(fileobj, int) else int(fileobj.fileno())


def poll_select(
    rlist: Sequence[Any], wlist: Sequence[Any], xlist: Sequence[Any], timeout: float | None = None
) -> tuple[list[Any], list[Any], list[Any]]:
    """kazoo's handler `select` (utils.selector_select) over poll(2): the same answers, without creating and
    closing an epoll instance at every call (kazoo's connection thread selects several times per request).

    Like selector_select it has no fd-number limit, rejects negative timeouts and fds, and reports a ready
    fd as readable rather than writable when it was asked for both.
    """
    if timeout is not None and timeout < 0:
        raise ValueError("timeout must be non-negative")
    masks: dict[int, int] = {}
    for fileobj in rlist:
        fd = _fd(fileobj)
        masks[fd] = masks.get(fd, 0) | select.POLLIN | select.POLLPRI
    for fileobj in wlist:
        fd = _fd(fileobj)
        masks[fd] = masks.get(fd, 0) | select.POLLOUT
    poller = select.poll()
    for fd, mask in masks.items():
        if fd < 0:
            raise ValueError(f"Invalid file descriptor: {fd}")
        poller.register(fd, mask)
    ready = poller.poll(None if timeout is None else timeout * 1000)
    readable: list[Any] = []
    writable: list[Any] = []
    for fd, events in ready:
        if events & _POLL_READ and masks[fd] & select.POLLIN:
            readable.extend(f for f in rlist if _fd(f) == fd)
        elif events & _POLL_WRITE:
            writable.extend(f for f in wlist if _fd(f) == fd)
    return readable, writable, []


class PollSelectHandler(SequentialThreadingHandler):
    """kazoo's threading handler whose connection thread waits with `poll_select` (less CPU per request)."""

    def select(self, *args: Any, **kwargs: Any) -> tuple[list[Any], list[Any], list[Any]]:
        return poll_select(*args, **kwargs)


class ReplyRelay(Protocol):
    """Takes the outcome of one request from kazoo's connection thread (the part of its async result it uses)."""

    def set(self, value: Any) -> None: ...

    def set_exception(self, exception: BaseException) -> None: ...


class _SerializedTransaction(Transaction):
    """A kazoo multi request encoded ahead (kazoo's connection thread only sends the bytes).

    `on_send` runs once, on the connection thread, as it takes the bytes to send them.
    """

    encoded: bytes
    on_send: Callable[[], None] | None = None

    def serialize(self) -> bytes:
        hook, self.on_send = self.on_send, None
        if hook is not None:
            try:
                hook()
            except Exception:  # kazoo's connection thread must send regardless
                log.exception("the send hook of a ZooKeeper multi failed")
        return self.encoded


def encoded_transaction(encoded: bytes) -> Transaction:
    """kazoo's multi request whose body is `encoded` (kazoo parses the reply itself)."""
    multi = _SerializedTransaction([])
    multi.encoded = encoded
    return multi


def send_raw(
    client: KazooClient, request: Transaction, relay: ReplyRelay, on_send: Callable[[], None] | None = None
) -> None:
    """Queue `request` on `client`'s connection without waiting: `relay` hears the reply on the connection
    thread itself; `on_send` runs as an `encoded_transaction` goes out."""
    if on_send is not None and isinstance(request, _SerializedTransaction):
        request.on_send = on_send
    client._call(request, relay)


def add_ops(transaction: TransactionRequest, ops: Sequence[Any]) -> None:
    """Put kazoo op tuples into a transaction as they are (kazoo's builder refuses null data, which Kafka's
    containers need)."""
    transaction.operations.extend(ops)


def transaction_paths(transaction: TransactionRequest) -> list[str]:
    """The server path of each op queued in a transaction, in order (a multi's results follow that order)."""
    return [str(op.path) for op in transaction.operations]


def session_settings(client: KazooClient) -> tuple[int, Mapping[str, str] | None]:
    """The session timeout (ms) and SASL options `client` was built with."""
    sasl = getattr(getattr(client, "_connection", None), "sasl_options", None)
    return int(client._session_timeout), dict(sasl) if sasl else None
