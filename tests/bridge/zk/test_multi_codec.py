"""The bridge's own multi encoding sends exactly the bytes kazoo's Transaction would (hypothesis)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kazoo.client import KazooClient
from kazoo.protocol.serialization import Transaction
from kazoo.security import ACL, CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE, Id, make_digest_acl

from bridge.zk.leadership import (
    CreateRequest,
    DeleteRequest,
    GuardedMulti,
    SetDataRequest,
    ZkLeadershipClient,
    ZkRequest,
)
from bridge.zk.multi_codec import encode_multi, kazoo_string
from migrate.errors import InvalidRequestError

ACL_POLICIES: list[list[ACL]] = [
    list(OPEN_ACL_UNSAFE),
    list(CREATOR_ALL_ACL),
    [*CREATOR_ALL_ACL, *READ_ACL_UNSAFE],
    [make_digest_acl("kafka", "secret", all=True), ACL(1, Id("sasl", "bröker"))],
]

paths_ = st.text(min_size=1, max_size=30).map(lambda text: "/" + text)
datas = st.none() | st.binary(max_size=64)
versions = st.integers(min_value=-1, max_value=2**31 - 1)
requests: st.SearchStrategy[ZkRequest] = st.one_of(
    st.builds(CreateRequest, paths_, datas, st.booleans()),
    st.builds(SetDataRequest, paths_, st.binary(max_size=64), versions),
    st.builds(DeleteRequest, paths_, versions),
)
multis = st.builds(
    GuardedMulti,
    st.lists(requests, max_size=12).map(tuple),
    st.integers(min_value=0, max_value=2**31 - 1),
    st.none() | st.binary(max_size=64),
)


@pytest.fixture(scope="module")
def clients() -> Iterator[list[ZkLeadershipClient]]:
    """Unstarted clients (nothing is sent): no chroot, a chroot, and a per-path ACL policy."""
    made = [KazooClient(hosts="127.0.0.1:1"), KazooClient(hosts="127.0.0.1:1/kafka/prod")]

    def acl_of(path: str) -> list[ACL]:
        return ACL_POLICIES[len(path) % len(ACL_POLICIES)]

    yield [
        ZkLeadershipClient(made[0]),
        ZkLeadershipClient(made[1]),
        ZkLeadershipClient(made[1], acl_provider=acl_of),
    ]
    for client in made:
        client.close()


@settings(max_examples=300, deadline=None)
@given(multi=multis, epoch_version=versions, which=st.integers(min_value=0, max_value=2))
def test_a_multi_is_encoded_as_kazoo_encodes_it(
    clients: list[ZkLeadershipClient], multi: GuardedMulti, epoch_version: int, which: int
) -> None:
    client = clients[which]
    expected = bytes(Transaction(client.guarded_ops(multi, epoch_version)).serialize())
    assert client.encoded_multi(multi, epoch_version).serialize() == expected


def test_the_write_observer_hears_of_each_request_of_an_encoded_multi(
    clients: list[ZkLeadershipClient],
) -> None:
    """As of every multi the client builds: the `/migration` update first, then each request."""
    heard: list[ZkRequest] = []

    class Observer:
        def sent(self, request: ZkRequest) -> None:
            heard.append(request)

        def settled(self, result: object) -> None:
            raise AssertionError("nothing is settled when a multi is only encoded")

    requests_ = (CreateRequest("/a", b"x"), SetDataRequest("/b", b"y", 3), DeleteRequest("/c"))
    client = clients[1]
    client.observer = Observer()
    try:
        client.encoded_multi(GuardedMulti(requests_, 7, b"m"), 2)
    finally:
        client.observer = None
    assert heard == [SetDataRequest("/migration", b"m", 7), *requests_]


@given(st.none() | st.text(max_size=20))
def test_jute_strings_follow_kazoo_empty_and_absent_are_minus_one(text: str | None) -> None:
    from kazoo.protocol.serialization import write_string

    assert kazoo_string(text) == write_string(text)


def test_an_op_that_cannot_go_in_a_multi_is_refused_by_name() -> None:
    from kazoo.protocol.serialization import GetData

    with pytest.raises(InvalidRequestError, match="GetData"):
        encode_multi([GetData("/a", None)])
