"""SCRAM credentials read from ZooKeeper's `/config/users/<user>` for logins before the migration has copied them.

Kafka's counterpart: a KRaft controller formatted with `kafka-storage format --add-scram` (KIP-900) holds
bootstrap credentials before any metadata exists. The bridge holds the cluster's own instead: the ones the
ZooKeeper-mode brokers check today, which ZK_MIGRATION then copies into the log unchanged. As a ZooKeeper-mode
broker's CredentialCache does, it keeps what it read and lets ZooKeeper's watches tell it of changes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NoNodeError

from migrate.errors import Zk2KraftError
from migrate.zk import paths
from migrate.zk.znodes.configs import decode_config_map, decode_scram_credential

log = logging.getLogger(__name__)

READ_TIMEOUT_S = 1.0
"""A login waits at most this long for ZooKeeper (the lookup runs on the listener's event loop)."""
CACHED_USERS = 4096
"""How many users' znodes (or their absence) are kept; beyond, the oldest are read again when asked."""

Credential = tuple[bytes, bytes, bytes, int]
_ABSENT = object()


class ZooKeeperScramCredentials:
    """A lookup of `user`'s `mechanism` credential in `/config/users` (None: none, or ZooKeeper did not answer).

    Each user's znode is read once and kept; a watch on it (data, or creation when absent) drops what was kept
    when the znode changes, and a lost session or another client drops everything, so a changed password
    serves the next login.
    """

    def __init__(
        self, client: Callable[[], KazooClient | None], timeout_s: float = READ_TIMEOUT_S, limit: int = CACHED_USERS
    ) -> None:
        self._client = client
        self._timeout_s = timeout_s
        self._limit = limit
        self._lock = threading.Lock()
        self._kazoo: KazooClient | None = None
        self._kept: dict[str, object] = {}  # path -> its data, or _ABSENT
        # path -> how often its watch fired: a read that a watch overtook is not kept.
        self._changes: dict[str, int] = {}

    def __call__(self, user: str, mechanism: str) -> Credential | None:
        kazoo = self._client()
        if kazoo is None:
            return None
        path = paths.config_path(f"{paths.CONFIG_USERS}/{paths.sanitize(user)}")
        with self._lock:
            self._follow(kazoo)
            kept = self._kept.get(path)
            changes = self._changes.get(path, 0)
        if kept is None:
            kept = self._read(kazoo, path)
            if kept is None:
                return None
            with self._lock:
                if self._kazoo is kazoo and self._changes.get(path, 0) == changes:
                    if len(self._kept) >= self._limit:
                        self._kept.pop(next(iter(self._kept)))
                    self._kept[path] = kept
        return None if kept is _ABSENT else _credential(path, mechanism, kept)

    def _follow(self, kazoo: KazooClient) -> None:
        """Under the lock: a new client (a new leadership) starts with nothing kept."""
        if self._kazoo is not kazoo:
            self._kazoo = kazoo
            self._kept.clear()
            kazoo.add_listener(self._on_state)

    def _on_state(self, state: str) -> None:
        """kazoo's thread: a lost session took its watches with it."""
        if state == KazooState.LOST:
            with self._lock:
                self._kept.clear()

    def _changed(self, event: Any) -> None:
        """kazoo's thread: the watched znode was created, changed or deleted."""
        with self._lock:
            self._kept.pop(event.path, None)
            self._changes[event.path] = self._changes.get(event.path, 0) + 1

    def _read(self, kazoo: KazooClient, path: str) -> object | None:
        """The znode's data with a watch left on it, _ABSENT, or None when ZooKeeper did not answer."""
        try:
            try:
                data, _stat = kazoo.get_async(path, watch=self._changed).get(timeout=self._timeout_s)
                return data or b""  # null data: no configs
            except NoNodeError:
                # get() leaves no watch on a missing znode; exists() does, and fires when it is created.
                created = kazoo.exists_async(path, watch=self._changed).get(timeout=self._timeout_s)
                return _ABSENT if created is None else None
        except Exception as exc:  # a login fails closed: slow, lost or refused ZooKeeper reads alike
            log.warning("%s: not read for a SCRAM login (%s); the login is refused", path, type(exc).__name__)
            return None


def _credential(path: str, mechanism: str, data: object) -> Credential | None:
    """The `mechanism` credential in the znode's data (None: none, or it does not parse)."""
    try:
        assert isinstance(data, bytes)
        text = decode_config_map(path, data).get(mechanism)
        if text is None:
            return None
        credential = decode_scram_credential(path, mechanism, text)
    except Zk2KraftError:
        # Not the error's text: it may quote the salt.
        log.warning("%s: its %s credential does not parse; the login is refused", path, mechanism)
        return None
    return credential.salt, credential.stored_key, credential.server_key, credential.iterations


def zookeeper_scram_credentials(
    client: Callable[[], KazooClient | None], timeout_s: float = READ_TIMEOUT_S
) -> Callable[[str, str], Credential | None]:
    """The lookup the bridge's SASL listener asks before the migration (see ZooKeeperScramCredentials)."""
    return ZooKeeperScramCredentials(client, timeout_s)
