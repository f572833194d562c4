"""SCRAM credentials read from ZooKeeper's `/config/users/<user>` for logins before the migration has copied them.

Kafka's counterpart: a KRaft controller formatted with `kafka-storage format --add-scram` (KIP-900) holds
bootstrap credentials before any metadata exists. The bridge holds the cluster's own instead: the ones the
ZooKeeper-mode brokers check today, which ZK_MIGRATION then copies into the log unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from migrate.errors import Zk2KraftError
from migrate.zk import paths
from migrate.zk.znodes.configs import decode_config_map, decode_scram_credential

log = logging.getLogger(__name__)

READ_TIMEOUT_S = 1.0
"""A login waits at most this long for ZooKeeper (the lookup runs on the listener's event loop)."""


def zookeeper_scram_credentials(
    client: Callable[[], KazooClient | None], timeout_s: float = READ_TIMEOUT_S
) -> Callable[[str, str], tuple[bytes, bytes, bytes, int] | None]:
    """A lookup of `user`'s `mechanism` credential in `/config/users` (None: none, or ZooKeeper did not answer)."""

    def lookup(user: str, mechanism: str) -> tuple[bytes, bytes, bytes, int] | None:
        kazoo = client()
        if kazoo is None:
            return None
        path = paths.config_path(f"{paths.CONFIG_USERS}/{paths.sanitize(user)}")
        try:
            data, _stat = kazoo.get_async(path).get(timeout=timeout_s)
        except NoNodeError:
            return None
        except Exception as exc:  # a login fails closed: slow, lost or refused ZooKeeper reads alike
            log.warning("%s: not read for a SCRAM login (%s); the login is refused", path, type(exc).__name__)
            return None
        try:
            text = decode_config_map(path, data).get(mechanism)
            if text is None:
                return None
            credential = decode_scram_credential(path, mechanism, text)
        except Zk2KraftError:
            # Not the error's text: it may quote the salt.
            log.warning("%s: its %s credential does not parse; the login is refused", path, mechanism)
            return None
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    return lookup
