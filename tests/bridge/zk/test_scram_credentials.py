"""The SCRAM credentials the bridge reads from ZooKeeper before the migration: read once, kept current by
watches (a real ZooKeeper)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kazoo.client import KazooClient

from bridge.zk.scram_credentials import ZooKeeperScramCredentials
from migrate.zk.embedded import EmbeddedZooKeeper
from tests.support.bridge import eventually
from tests.support.controller_sasl import write_zookeeper_scram_credential
from tests.support.zookeeper import session_requests

pytestmark = pytest.mark.zookeeper

MECHANISM = "SCRAM-SHA-256"


def salt_of(lookup: Callable[[str, str], tuple[bytes, bytes, bytes, int] | None], user: str) -> bytes | None:
    found = lookup(user, MECHANISM)
    return None if found is None else found[0]


def test_a_user_is_read_once_and_a_changed_or_deleted_credential_serves_the_next_login(
    zk_client: KazooClient, zk_server: EmbeddedZooKeeper
) -> None:
    write_zookeeper_scram_credential(zk_client, "alice", MECHANISM, "first")
    lookup = ZooKeeperScramCredentials(lambda: zk_client)
    first = salt_of(lookup, "alice")
    assert first is not None
    assert lookup("alice", "SCRAM-SHA-512") is None  # a mechanism the znode does not hold

    asked = session_requests(zk_server, zk_client.client_id[0])
    assert all(salt_of(lookup, "alice") == first for _ in range(50))
    assert session_requests(zk_server, zk_client.client_id[0]) == asked  # no read: kept

    write_zookeeper_scram_credential(zk_client, "alice", MECHANISM, "second")  # a new salt
    eventually(lambda: salt_of(lookup, "alice") not in (None, first))
    zk_client.delete("/config/users/alice")
    eventually(lambda: salt_of(lookup, "alice") is None)


def test_an_unknown_user_is_kept_absent_until_its_znode_is_created(
    zk_client: KazooClient, zk_server: EmbeddedZooKeeper
) -> None:
    lookup = ZooKeeperScramCredentials(lambda: zk_client)
    assert salt_of(lookup, "bob") is None
    asked = session_requests(zk_server, zk_client.client_id[0])
    assert all(salt_of(lookup, "bob") is None for _ in range(20))
    assert session_requests(zk_server, zk_client.client_id[0]) == asked
    write_zookeeper_scram_credential(zk_client, "bob", MECHANISM, "pw")
    eventually(lambda: salt_of(lookup, "bob") is not None)
