"""The live reader returns exactly what ZooKeeper holds, through auth, TLS, chroots and lost connections."""

from __future__ import annotations

import contextlib
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import ACL, Id, make_acl, make_digest_acl

from migrate.errors import CorruptDataError, Zk2KraftError
from migrate.zk import live, protocol
from migrate.zk.embedded import EmbeddedEnsemble, EmbeddedZooKeeper, free_ports
from migrate.zk.live import ZkConnectOptions, read_tree
from migrate.zk.tree import Acl, Stat, ZNode

pytestmark = pytest.mark.zookeeper


def kazoo_walk(client: KazooClient, root: str = "/") -> dict[str, ZNode]:
    """The tree as synchronous kazoo get/get_children/get_acls see it, node by node."""
    out: dict[str, ZNode] = {}
    stack = [root]
    while stack:
        path = stack.pop()
        data, stat = client.get(path)
        acl, _ = client.get_acls(path)
        out[path] = ZNode(path, data, Stat(*stat), tuple(Acl(a.perms, a.id.scheme, a.id.id) for a in acl))
        stack.extend(f"{path.rstrip('/')}/{name}" for name in client.get_children(path))
    return out


def build_sample_tree(client: KazooClient) -> None:
    client.create("/a/b/c", b"deep", makepath=True)
    client.create("/binary", bytes(range(256)))
    client.create("/empty", b"")
    client.create("/null", None)
    client.create("/ephemeral", b"session-bound", ephemeral=True)
    client.create("/config_change_", b"{}", sequence=True)
    client.create("/ünïcode-名字", "ünïcode".encode())
    client.create(
        "/custom-acl",
        b"acl",
        acl=[make_acl("world", "anyone", read=True), make_acl("ip", "127.0.0.1", all=True)],
    )
    client.create("/many")
    for i in range(230):
        client.create_async(f"/many/child-{i:03d}", str(i).encode())
    client.sync("/")


def test_tree_equals_kazoo_node_by_node(zk_client: KazooClient, zk_connect: str) -> None:
    build_sample_tree(zk_client)
    tree = read_tree(zk_connect, batch_size=50)
    expected = kazoo_walk(zk_client)
    assert tree.nodes == expected
    assert len(tree) == 1 + 3 + 7 + 1 + 230
    assert tree.data("/null") is None
    assert tree.data("/empty") == b""
    assert tree.data("/binary") == bytes(range(256))
    assert tree.nodes["/ephemeral"].stat.ephemeral_owner == zk_client.client_id[0]
    assert tree.nodes["/custom-acl"].acl == (Acl(1, "world", "anyone"), Acl(31, "ip", "127.0.0.1"))
    assert any(p.startswith("/config_change_0000000") for p in tree.nodes)
    assert tree.children("/a") == ["b"]
    assert tree.last_zxid >= max(n.stat.mzxid for n in tree)


def test_single_request_fallback_reads_the_same_tree(zk_client: KazooClient, zk_connect: str) -> None:
    build_sample_tree(zk_client)
    assert read_tree(zk_connect, multi_read=False).nodes == read_tree(zk_connect).nodes


def test_skipping_acls_leaves_them_empty(zk_client: KazooClient, zk_connect: str) -> None:
    build_sample_tree(zk_client)
    tree = read_tree(zk_connect, acls=False)
    full = read_tree(zk_connect)
    assert {p: (n.data, n.stat) for p, n in tree.nodes.items()} == {
        p: (n.data, n.stat) for p, n in full.nodes.items()
    }
    assert all(n.acl == () for n in tree)


def test_chroot_of_connect_string_and_argument_compose(
    zk_server: EmbeddedZooKeeper, zk_client: KazooClient, zk_connect: str, zk_chroot: str
) -> None:
    build_sample_tree(zk_client)
    via_argument = read_tree(zk_server.connect_string, f"{zk_chroot}/a")
    via_both = read_tree(zk_connect, "a/")
    assert list(via_argument.nodes) == ["/", "/b", "/b/c"]
    assert via_argument.nodes == via_both.nodes
    assert via_argument.data("/b/c") == b"deep"
    assert via_argument.source.endswith(f"{zk_chroot}/a")
    whole = read_tree(zk_server.connect_string, zk_chroot)
    assert whole.with_chroot("/a").nodes == via_argument.nodes


def test_kazoo_client_as_source(zk_client: KazooClient, zk_connect: str) -> None:
    build_sample_tree(zk_client)
    assert read_tree(zk_client).nodes == read_tree(zk_connect).nodes


def test_missing_root_is_a_clear_error(zk_connect: str) -> None:
    with pytest.raises(Zk2KraftError, match=r"znode .*/does-not-exist does not exist"):
        read_tree(zk_connect, "/does-not-exist")


def test_missing_root_error_survives_a_znode_nobody_may_list(zk_client: KazooClient, zk_connect: str) -> None:
    # The "did you mean" search walks the ensemble; a znode it may not read must not hide the real error.
    zk_client.create("/locked", b"", acl=[make_digest_acl("someone", "secret", all=True)])
    with pytest.raises(NoAuthError):
        zk_client.get_children("/locked")
    with pytest.raises(Zk2KraftError, match=r"znode .*/does-not-exist does not exist"):
        read_tree(zk_connect, "/does-not-exist")


def test_progress_counts_up_to_the_tree_size(zk_client: KazooClient, zk_connect: str) -> None:
    build_sample_tree(zk_client)
    seen: list[int] = []
    tree = read_tree(zk_connect, progress=seen.append, batch_size=20)
    # How many replies one socket read brings varies, so only "during the read, and at the end" is certain.
    assert len(seen) >= 2
    assert seen == sorted(seen)
    assert seen[-1] == len(tree)


def test_nodes_deleted_during_the_read_are_skipped(zk_client: KazooClient, zk_connect: str) -> None:
    zk_client.create("/many")
    for i in range(300):
        zk_client.create_async(f"/many/n{i:03d}", b"x")
    zk_client.sync("/")
    deleted = False

    def delete_tail(_: int) -> None:
        nonlocal deleted
        if not deleted:
            deleted = True
            for i in range(250, 300):
                zk_client.delete(f"/many/n{i:03d}")

    tree = read_tree(zk_connect, progress=delete_tail, batch_size=20, max_in_flight=4)
    assert deleted
    assert tree.children("/many") == [f"n{i:03d}" for i in range(250)]


def test_digest_auth_reads_a_protected_znode(zk_client: KazooClient, zk_connect: str) -> None:
    zk_client.add_auth("digest", "alice:secret")
    zk_client.create("/secret", b"s3", acl=[make_digest_acl("alice", "secret", all=True)])
    with pytest.raises(Zk2KraftError, match=r"getData znode .*/secret .*NOAUTH"):
        read_tree(zk_connect)
    tree = read_tree(ZkConnectOptions(zk_connect, auth_data=(("digest", "alice:secret"),)))
    assert tree.data("/secret") == b"s3"
    assert tree.nodes["/secret"].acl == (Acl(31, "digest", make_digest_acl("alice", "secret").id.id),)


def test_sasl_digest_md5_login(zk_secure_server: EmbeddedZooKeeper) -> None:
    root = "/sasl-test"
    user, password = next(iter(zk_secure_server.sasl_users.items()))
    writer = KazooClient(hosts=zk_secure_server.connect_string)
    writer.start(timeout=15)
    writer.create(root, b"open")
    writer.create(f"{root}/private", b"only-alice", acl=[ACL(31, Id("sasl", user))])
    writer.stop()
    writer.close()
    with pytest.raises(Zk2KraftError, match="NOAUTH"):
        read_tree(zk_secure_server.connect_string, root)
    sasl = {"mechanism": "DIGEST-MD5", "username": user, "password": password}
    tree = read_tree(ZkConnectOptions(zk_secure_server.connect_string, sasl_options=sasl), root)
    assert tree.data("/private") == b"only-alice"
    wrong = {**sasl, "password": "wrong"}
    with pytest.raises(Zk2KraftError, match="rejected SASL DIGEST-MD5 login"):
        read_tree(ZkConnectOptions(zk_secure_server.connect_string, sasl_options=wrong), root)


def test_tls_read(zk_secure_server: EmbeddedZooKeeper) -> None:
    files = zk_secure_server.tls_files
    assert files is not None
    options = ZkConnectOptions(
        zk_secure_server.secure_connect_string,
        ssl_enable=True,
        ssl_cafile=str(files.ca),
        ssl_certfile=str(files.client_cert),
        ssl_keyfile=str(files.client_key),
    )
    client = options.kazoo_client()
    client.start(timeout=15)
    client.ensure_path("/tls-test/x")
    expected = kazoo_walk(client, "/tls-test")
    client.stop()
    client.close()
    tree = read_tree(options, "/tls-test")
    assert {f"/tls-test{p}".rstrip("/") for p in tree.nodes} == set(expected)
    untrusted = ZkConnectOptions(zk_secure_server.secure_connect_string, ssl_enable=True)
    with pytest.raises(Zk2KraftError, match="TLS handshake"):
        read_tree(untrusted, "/tls-test")


@pytest.mark.slow
def test_read_survives_a_server_restart(tmp_path: Path) -> None:
    with EmbeddedZooKeeper(tmp_path) as server:
        writer = KazooClient(hosts=server.connect_string)
        writer.start(timeout=15)
        writer.create("/big")
        for i in range(10):
            writer.create_async(f"/big/t{i}")
            for j in range(100):
                writer.create_async(f"/big/t{i}/p{j}", f"{i}/{j}".encode())
        writer.sync("/")
        writer.stop()
        writer.close()
        restarts: list[int] = []

        def restart_once(nodes_read: int) -> None:
            if not restarts:
                restarts.append(nodes_read)
                server.restart()

        tree = read_tree(server.connect_string, "/big", progress=restart_once, batch_size=100)
        assert restarts and restarts[0] < len(tree)
        assert len(tree) == 1 + 10 + 1000
        assert tree.nodes == read_tree(server.connect_string, "/big").nodes

        def restart_always(_: int) -> None:
            server.restart()

        with pytest.raises(Zk2KraftError, match=r"gave up reading .* lost 1 times"):
            read_tree(server.connect_string, "/big", progress=restart_always, batch_size=100, max_retries=0)


def test_unreachable_server_is_a_clear_error() -> None:
    port = free_ports(1)[0]
    options = ZkConnectOptions(f"127.0.0.1:{port}", connection_timeout_ms=300)
    with pytest.raises(Zk2KraftError, match=f"cannot reach ZooKeeper 127.0.0.1:{port} within"):
        read_tree(options)


def test_options_from_kafka_config() -> None:
    options = ZkConnectOptions.from_kafka_config(
        {
            "zookeeper.connect": "zk1:2181,zk2:2182/kafka",
            "zookeeper.session.timeout.ms": "6000",
            "zookeeper.ssl.client.enable": "true",
            "zookeeper.ssl.truststore.location": "/etc/ca.pem",
            "zookeeper.ssl.keystore.location": "/etc/client.pem",
            "zookeeper.ssl.keystore.password": "pw",
            "zookeeper.ssl.endpoint.identification.algorithm": "",
        }
    )
    assert options.hosts == [("zk1", 2181), ("zk2", 2182)]
    assert options.chroot == "/kafka"
    assert options.session_timeout_ms == 6000
    assert options.connect_timeout_s == 6.0
    assert (options.ssl_enable, options.ssl_cafile, options.ssl_certfile) == (
        True,
        "/etc/ca.pem",
        "/etc/client.pem",
    )
    assert options.ssl_keyfile_password == "pw"
    assert options.ssl_check_hostname is False
    with pytest.raises(Zk2KraftError, match=r"keystore.type is JKS: convert the store to PEM"):
        ZkConnectOptions.from_kafka_config(
            {
                "zookeeper.connect": "zk1:2181",
                "zookeeper.ssl.keystore.location": "/etc/ks.jks",
                "zookeeper.ssl.keystore.type": "JKS",
            }
        )


# ----------------------------------------------------------------- reply decoding, without a server

_XID = 7
_stats = st.builds(
    Stat,
    *(st.integers(-(2**63), 2**63 - 1) for _ in range(4)),
    *(st.integers(-(2**31), 2**31 - 1) for _ in range(3)),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(0, 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1),
)
_names = st.text(st.characters(exclude_characters="/", exclude_categories=["Cs"]), min_size=1, max_size=12)
_acls = st.lists(
    st.builds(
        Acl, st.integers(-(2**31), 2**31 - 1), st.sampled_from(["world", "digest", "sasl", "ip"]), _names
    ),
    min_size=1,
    max_size=3,
).map(tuple)


def _jute_buffer(data: bytes | None) -> bytes:
    return struct.pack("!i", -1) if data is None else struct.pack("!i", len(data)) + data


def _jute_string(text: str) -> bytes:
    return _jute_buffer(text.encode("utf-8"))


def _jute_stat(stat: Stat) -> bytes:
    return struct.pack(
        "!qqqqiiiqiiq", stat.czxid, stat.mzxid, stat.ctime, stat.mtime, stat.version, stat.cversion,
        stat.aversion, stat.ephemeral_owner, stat.data_length, stat.num_children, stat.pzxid,
    )  # fmt: skip


def _reply(body: bytes, err: int = 0, zxid: int = 42) -> bytes:
    return struct.pack("!iqi", _XID, zxid, err) + body


def _reader_expecting(opcode: int, ops: list[tuple[int, str]]) -> live._TreeReader:
    reader = live._TreeReader(
        ZkConnectOptions("127.0.0.1:1"), "/root", progress=None, batch_size=10, max_batch_bytes=1 << 20,
        max_in_flight=8, max_retries=0, multi_read=None, acls=True,
    )  # fmt: skip
    reader.todo.clear()
    reader.todo_acl.clear()
    reader.outstanding.append((_XID, live._Request(opcode, ops)))
    if opcode == protocol.OP_MULTI_READ:
        reader.multi_outstanding = 1
    return reader


@settings(max_examples=150, deadline=None)
@given(data=st.one_of(st.none(), st.binary(max_size=64)), stat=_stats, children=st.lists(_names, max_size=5))
def test_multi_read_reply_round_trip(data: bytes | None, stat: Stat, children: list[str]) -> None:
    body = (
        struct.pack("!i?i", protocol.OP_GET_DATA, False, 0) + _jute_buffer(data) + _jute_stat(stat)
        + struct.pack("!i?i", protocol.OP_GET_CHILDREN, False, 0) + struct.pack("!i", len(children))
        + b"".join(_jute_string(n) for n in children)
        + struct.pack("!i?i", -1, False, -101) + struct.pack("!i", -101)
        + struct.pack("!i?i", -1, True, -1)
    )  # fmt: skip
    ops = [(protocol.OP_GET_DATA, "/x"), (protocol.OP_GET_CHILDREN, "/x"), (protocol.OP_GET_DATA, "/gone")]
    reader = _reader_expecting(protocol.OP_MULTI_READ, ops)
    reader._on_frame(_reply(body))
    assert reader.got.data["/x"] == (data, stat)
    assert reader.got.gone == {"/gone"}
    assert [rel for op, rel in reader.todo if op == protocol.OP_GET_DATA] == [f"/x/{n}" for n in children]
    assert list(reader.todo_acl) == [f"/x/{n}" for n in children]
    assert reader.last_zxid == 42


@settings(max_examples=150, deadline=None)
@given(acl=_acls, stat=_stats)
def test_get_acl_reply_round_trip(acl: tuple[Acl, ...], stat: Stat) -> None:
    body = struct.pack("!i", len(acl)) + b"".join(
        struct.pack("!i", a.perms) + _jute_string(a.scheme) + _jute_string(a.id) for a in acl
    )
    reader = _reader_expecting(protocol.OP_GET_ACL, [(protocol.OP_GET_ACL, "/x")])
    reader._on_frame(_reply(body + _jute_stat(stat)))
    reader.outstanding.append((_XID, live._Request(protocol.OP_GET_ACL, [(protocol.OP_GET_ACL, "/y")])))
    reader._on_frame(_reply(body + _jute_stat(Stat())))  # same ACL again: served from the cache
    assert reader.got.acls == {"/x": acl, "/y": acl}


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from(["multi", "acl", "data", "children"]), junk=st.binary(max_size=200))
def test_arbitrary_reply_bytes_raise_only_our_errors(kind: str, junk: bytes) -> None:
    opcode, ops = {
        "multi": (protocol.OP_MULTI_READ, [(protocol.OP_GET_DATA, "/x"), (protocol.OP_GET_CHILDREN, "/x")]),
        "acl": (protocol.OP_GET_ACL, [(protocol.OP_GET_ACL, "/x")]),
        "data": (protocol.OP_GET_DATA, [(protocol.OP_GET_DATA, "/x")]),
        "children": (protocol.OP_GET_CHILDREN, [(protocol.OP_GET_CHILDREN, "/x")]),
    }[kind]
    reader = _reader_expecting(opcode, ops)
    with contextlib.suppress(Zk2KraftError):
        reader._on_frame(struct.pack("!i", _XID) + junk)


def test_truncated_reply_names_the_request() -> None:
    reader = _reader_expecting(protocol.OP_GET_DATA, [(protocol.OP_GET_DATA, "/x")])
    with pytest.raises(
        CorruptDataError, match=r"getData of /root/x at byte 16: buffer of 100 bytes runs past"
    ):
        reader._on_frame(_reply(struct.pack("!i", 100) + b"short"))


@pytest.mark.slow
def test_read_fails_over_to_another_ensemble_member(zk_ensemble: EmbeddedEnsemble) -> None:
    writer = KazooClient(hosts=zk_ensemble.connect_string)
    writer.start(timeout=15)
    writer.ensure_path("/failover")
    for i in range(600):
        writer.create_async(f"/failover/n{i:03d}", str(i).encode())
    writer.sync("/")
    writer.stop()
    writer.close()
    leader = zk_ensemble.leader_index()
    assert leader is not None
    stopped: list[int] = []

    def stop_server_in_use(_: int) -> None:
        if not stopped:
            # The reader tries hosts in order, so it is reading from the first member.
            stopped.append(0)
            zk_ensemble.stop_server(0)

    try:
        tree = read_tree(zk_ensemble.connect_string, "/failover", progress=stop_server_in_use, batch_size=50)
    finally:
        zk_ensemble.start_server(0)
    assert stopped
    assert tree.children("/") == [f"n{i:03d}" for i in range(600)]
    assert tree.data("/n599") == b"599"
