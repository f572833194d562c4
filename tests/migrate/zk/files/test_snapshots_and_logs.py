"""ZooKeeper snapshot and transaction-log files: real fixtures, corruption, writer round trips, properties."""

from __future__ import annotations

import contextlib
import gzip
import struct
import zlib
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from migrate.errors import CorruptDataError, Zk2KraftError
from migrate.zk.files.digest import tree_digest
from migrate.zk.files.names import (
    decompress_snapshot,
    snapshot_file_name,
    xerial_snappy_compress,
    xerial_snappy_decompress,
    zxid_from_name,
)
from migrate.zk.files.owners import (
    CONTAINER_OWNER,
    client_owner,
    is_system_path,
    path_problem,
    session_of_owner,
    ttl_of_owner,
    without_system_nodes,
)
from migrate.zk.files.snapshot_read import decode_snapshot, quick_check_problem, read_snapshot
from migrate.zk.files.snapshot_write import encode_snapshot, write_snapshot
from migrate.zk.files.txnlog import (
    CheckVersionTxn,
    CloseSessionTxn,
    CreateSessionTxn,
    CreateTxn,
    DeleteTxn,
    ErrorTxn,
    MultiTxn,
    OpCode,
    SetACLTxn,
    SetDataTxn,
    SubTxn,
    TxnDigest,
    TxnHeader,
    decode_txn,
    encode_txn,
    encode_txn_log,
    parse_txn_log,
    read_txn_log,
)
from migrate.zk.jute import JuteReader, JuteWriter, decode_string, encode_string
from migrate.zk.tree import OPEN_ACL_UNSAFE, Acl, Stat, ZNode, ZTree
from tests.support import FIXTURES

TXNLOG_DIR = FIXTURES / "zk-real-3.8-txnlog" / "version-2"
KAFKA_DIR = FIXTURES / "zk-real-kafka-3.5" / "version-2"
CHROOT = "/de-4-3-kafka-cluster"


@pytest.fixture(scope="module")
def log_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture's log.1, gunzipped: the exact 64 MiB preallocated file ZooKeeper wrote."""
    target = tmp_path_factory.mktemp("txnlog") / "log.1"
    target.write_bytes(gzip.decompress((TXNLOG_DIR / "log.1.gz").read_bytes()))
    return target


# ------------------------------------------------------------------------------------------ names


@pytest.mark.parametrize(
    ("name", "prefix", "zxid"),
    [
        ("snapshot.0", "snapshot", 0),
        ("snapshot.9f00000037", "snapshot", 0x9F00000037),
        ("snapshot.13.gz", "snapshot", 0x13),
        ("snapshot.13.tmp", "snapshot", 0x13),
        ("log.1", "log", 1),
        ("log.1", "snapshot", None),
        ("snapshot", "snapshot", None),
        ("snapshot.xyz", "snapshot", None),
        ("snapshot.1_0", "snapshot", None),
        ("snapshot.ffffffffffffffff", "snapshot", None),
    ],
)
def test_zxid_from_name_follows_zookeeper(name: str, prefix: str, zxid: int | None) -> None:
    assert zxid_from_name(name, prefix) == zxid


def test_snapshot_file_name_is_lowercase_hex() -> None:
    assert snapshot_file_name(0x12700000087) == "snapshot.12700000087"
    assert snapshot_file_name(0xAB, "snappy") == "snapshot.ab.snappy"


# -------------------------------------------------------------------------------- real snapshots


def test_empty_standalone_snapshot_has_zookeepers_builtin_nodes() -> None:
    snap = read_snapshot(TXNLOG_DIR / "snapshot.0")
    assert snap.zxid == 0 and snap.dbid == -1 and snap.version == 2
    assert snap.sessions == {}
    assert snap.seals == 2
    assert snap.digest is not None and snap.digest.zxid == 0 and not snap.has_digest
    assert sorted(snap.tree.nodes) == ["/", "/zookeeper", "/zookeeper/config", "/zookeeper/quota"]
    root = snap.tree.nodes["/"]
    assert root.data == b"" and root.acl == OPEN_ACL_UNSAFE and root.stat.num_children == 1
    config = snap.tree.nodes["/zookeeper/config"]
    assert config.acl == (Acl(1, "world", "anyone"),)
    assert config.stat.aversion == -1


def test_gz_and_snappy_snapshots_hold_the_same_tree() -> None:
    gz = read_snapshot(TXNLOG_DIR / "snapshot.13.gz", client_view=False)
    snappy = read_snapshot(TXNLOG_DIR / "snapshot.13.snappy", client_view=False)
    assert gz.zxid == snappy.zxid == 0x13
    assert gz.tree.nodes == snappy.tree.nodes
    assert gz.digest is not None and gz.digest.zxid == 0x13
    assert gz.digest.digest == tree_digest(gz.tree)
    assert snappy.digest is not None and snappy.digest.zxid == 0  # written after a restart: empty digest


def test_snapshot_keeps_null_empty_data_and_special_owners_apart() -> None:
    tree = read_snapshot(TXNLOG_DIR / "snapshot.13.gz", client_view=False).tree
    assert tree.data("/chroot") is None
    assert tree.data("/chroot/isr_change_notification") == b""
    assert tree.data("/chroot/été") == b"utf"
    assert tree.nodes["/chroot/cont"].stat.ephemeral_owner == CONTAINER_OWNER
    assert ttl_of_owner(tree.nodes["/chroot/ttl"].stat.ephemeral_owner) == 600_000
    assert session_of_owner(tree.nodes["/chroot/ttl"].stat.ephemeral_owner) is None
    c2 = tree.nodes["/chroot/c2"]
    assert c2.data == b"v2" and c2.stat.version == 1 and c2.stat.aversion == 1
    assert c2.acl == (Acl(1, "world", "anyone"),)
    assert c2.stat.data_length == 2
    assert tree.nodes["/chroot"].stat.num_children == 7
    assert tree.children("/chroot") == sorted(
        ["brokers", "m1", "isr_change_notification", "cont", "ttl", "été", "c2"]
    )


def test_client_view_shows_stats_as_zookeeper_reports_them_to_clients() -> None:
    stored = read_snapshot(TXNLOG_DIR / "snapshot.13.gz", client_view=False).tree.nodes
    client = read_snapshot(TXNLOG_DIR / "snapshot.13.gz").tree.nodes
    # cversion counts creates on disk but creates + deletes for clients (DataNode.copyStat)
    assert (stored["/chroot/cont"].stat.cversion, client["/chroot/cont"].stat.cversion) == (1, 2)
    assert (stored["/zookeeper"].stat.cversion, client["/zookeeper"].stat.cversion) == (0, -2)
    assert client["/chroot"].stat.cversion == 7  # seven creates, no deletes
    # containers and TTL nodes show no owner to clients
    assert client["/chroot/cont"].stat.ephemeral_owner == 0
    assert client["/chroot/ttl"].stat.ephemeral_owner == 0
    assert {p: (n.data, n.acl) for p, n in client.items()} == {p: (n.data, n.acl) for p, n in stored.items()}


@pytest.mark.parametrize("name", ["snapshot.800000000", "snapshot.9f00000037"])
def test_kafka_cluster_snapshots(name: str) -> None:
    snap = read_snapshot(KAFKA_DIR / name)
    assert len(snap.tree) == 142
    assert snap.acl_cache == {1: (Acl(1, "world", "anyone"),), 2: OPEN_ACL_UNSAFE}
    assert set(snap.sessions.values()) == {18000}
    kafka = snap.tree.with_chroot(CHROOT)
    assert kafka.children("/brokers/ids") == ["1", "2", "3"]
    assert kafka.children("/brokers/topics") == ["__consumer_offsets", "current_stock"]
    assert len(kafka.children("/brokers/topics/__consumer_offsets/partitions")) == 50
    assert b"esQVtsr4Sh6LSPhdkKjbNw" in (kafka.data("/cluster/id") or b"")
    assert kafka.data(CHROOT) is None and kafka.data("/") is None
    owners = {n.path: n.stat.ephemeral_owner for n in kafka if n.stat.ephemeral_owner}
    assert set(owners) == {"/controller", "/brokers/ids/1", "/brokers/ids/2", "/brokers/ids/3"}
    assert set(owners.values()) <= set(snap.sessions)


def test_kafka_snapshot_digest_matches_the_recomputed_tree_digest() -> None:
    snap = read_snapshot(KAFKA_DIR / "snapshot.9f00000037", client_view=False)
    assert snap.digest is not None and snap.digest.zxid == snap.zxid == 0x9F00000037
    assert snap.digest.digest == tree_digest(snap.tree) == 302594382448
    # computed while decoding, whichever view of the stats is asked for
    assert read_snapshot(KAFKA_DIR / "snapshot.9f00000037", with_digest=True).computed_digest == 302594382448


def test_system_nodes_are_easy_to_leave_out() -> None:
    tree = read_snapshot(KAFKA_DIR / "snapshot.800000000").tree
    user = without_system_nodes(tree)
    assert "/zookeeper" in tree.nodes and "/zookeeper" not in user.nodes
    assert not any(is_system_path(p) for p in user.nodes)
    assert len(user) == len(tree) - 3
    assert not is_system_path("/zookeeperish")


# ------------------------------------------------------------------------------------- corruption


def _corrupt(data: bytes, offset: int) -> bytes:
    return data[:offset] + bytes([data[offset] ^ 0x01]) + data[offset + 1 :]


def test_flipped_data_byte_is_reported_as_adler32_corruption_with_the_file_name(tmp_path: Path) -> None:
    data = (KAFKA_DIR / "snapshot.9f00000037").read_bytes()
    where = data.index(b"esQVtsr4Sh6LSPhdkKjbNw")
    bad = tmp_path / "snapshot.9f00000037"
    bad.write_bytes(_corrupt(data, where))
    with pytest.raises(CorruptDataError, match="Adler32") as info:
        read_snapshot(bad)
    assert str(bad) in str(info.value)
    assert info.value.offset is not None and info.value.offset > where


def test_checksum_can_be_skipped_like_zookeepers_formatter() -> None:
    data = (KAFKA_DIR / "snapshot.9f00000037").read_bytes()
    where = data.index(b"esQVtsr4Sh6LSPhdkKjbNw")
    snap = decode_snapshot(_corrupt(data, where), "x", verify_checksums=False)
    assert b"dsQVtsr4Sh6LSPhdkKjbNw" in (snap.tree.data(CHROOT + "/cluster/id") or b"")


def test_damaged_structure_names_the_file_and_offset() -> None:
    data = (KAFKA_DIR / "snapshot.800000000").read_bytes()
    with pytest.raises(CorruptDataError, match="snap-x at byte"):
        decode_snapshot(data[:5000], "snap-x")
    with pytest.raises(CorruptDataError, match="magic"):
        decode_snapshot(b"ZKLG" + data[4:], "snap-x")


def test_compressed_snapshot_damage_is_a_corrupt_data_error(tmp_path: Path) -> None:
    raw = (TXNLOG_DIR / "snapshot.13.snappy").read_bytes()
    bad = tmp_path / "snapshot.13.snappy"
    bad.write_bytes(raw[:-7])
    with pytest.raises(CorruptDataError, match=r"snapshot\.13\.snappy"):
        read_snapshot(bad)
    badgz = tmp_path / "snapshot.13.gz"
    badgz.write_bytes((TXNLOG_DIR / "snapshot.13.gz").read_bytes()[:-9])
    with pytest.raises(CorruptDataError, match="gunzip"):
        read_snapshot(badgz)


def test_quick_check_spots_incomplete_files(tmp_path: Path) -> None:
    good = TXNLOG_DIR / "snapshot.0"
    assert quick_check_problem(good) is None
    assert quick_check_problem(TXNLOG_DIR / "snapshot.13.snappy") is None
    torn = tmp_path / "snapshot.5"
    torn.write_bytes(good.read_bytes()[:-1])
    assert "seal marker" in (quick_check_problem(torn) or "")
    fake = tmp_path / "snapshot.5.gz"
    fake.write_bytes(good.read_bytes())
    assert "gzip" in (quick_check_problem(fake) or "")


# ------------------------------------------------------------------------------------ transaction log


def test_real_log_decodes_every_op_zookeeper_wrote(log_file: Path) -> None:
    log = read_txn_log(log_file)
    assert log.dbid == 0 and log.version == 2
    assert log.end.kind == "padding" and log.end.clean
    assert [e.header.zxid for e in log.entries] == list(range(1, 20))
    ops = [e.header.type for e in log.entries]
    assert ops[0] == OpCode.CREATE_SESSION and ops[-1] == OpCode.CLOSE_SESSION
    assert {OpCode.CREATE2, OpCode.CREATE_CONTAINER, OpCode.CREATE_TTL, OpCode.SET_ACL, OpCode.MULTI} <= set(
        ops
    )
    by_zxid = {e.header.zxid: e for e in log.entries}
    assert by_zxid[1].record == CreateSessionTxn(18000)
    assert by_zxid[11].record == CreateTxn("/chroot/ttl", b"t", OPEN_ACL_UNSAFE, False, 5, 600000)
    failed = by_zxid[15].record
    assert isinstance(failed, MultiTxn)
    assert [s.type for s in failed.txns] == [OpCode.CREATE, OpCode.ERROR]
    assert failed.txns[1].record == ErrorTxn(-103)
    assert by_zxid[16].record == ErrorTxn(-110) and by_zxid[16].digest is None
    assert by_zxid[19].record == CloseSessionTxn(("/chroot/brokers/ids/1",))
    assert by_zxid[18].record == CreateTxn("/chroot/été", b"utf", OPEN_ACL_UNSAFE, False, 7)
    assert all(e.digest is not None and e.digest.version == 2 for e in log.entries if e.header.zxid != 16)


def test_gzipped_log_is_read_transparently() -> None:
    log = read_txn_log(TXNLOG_DIR / "log.1.gz")
    assert len(log.entries) == 19 and log.end.kind == "padding"


def test_log_encoder_reproduces_zookeepers_bytes(log_file: Path) -> None:
    log = read_txn_log(log_file)
    original = log_file.read_bytes()
    encoded = encode_txn_log([(e.header, e.record, e.digest) for e in log.entries])
    assert encoded == original[: len(encoded)]
    assert not original[len(encoded) :].strip(b"\x00")


def test_torn_last_entry_ends_the_log_and_says_where(log_file: Path) -> None:
    data = log_file.read_bytes()
    entries = read_txn_log(log_file).entries
    cut = entries[10].offset + 30  # inside the entry of zxid 11
    log = parse_txn_log(data[:cut], "log.1")
    assert [e.header.zxid for e in log.entries] == list(range(1, 11))
    assert log.end.kind == "truncated" and not log.end.clean
    assert log.end.offset == entries[10].offset
    # A torn write can also leave the body without its end-of-record byte.
    end = entries[11].offset - 1
    log = parse_txn_log(data[:end] + b"\x00" * 100, "log.1")
    assert len(log.entries) == 10 and log.end.kind == "truncated"


def test_checksum_failure_inside_the_log_is_corruption_but_at_the_end_is_a_stop(log_file: Path) -> None:
    data = log_file.read_bytes()
    entries = read_txn_log(log_file).entries
    inside = entries[5].offset + 40
    with pytest.raises(CorruptDataError, match="Adler32") as info:
        parse_txn_log(_corrupt(data, inside), "log.1")
    assert info.value.offset == entries[5].offset
    last = entries[-1].offset + 40
    log = parse_txn_log(_corrupt(data, last), "log.1")
    assert len(log.entries) == 18 and log.end.kind == "corrupt"


def test_log_with_only_a_header_or_nothing_is_empty() -> None:
    assert parse_txn_log(b"", "log.5").entries == []
    header_only = encode_txn_log([])
    log = parse_txn_log(header_only, "log.5")
    assert log.entries == [] and log.end.clean
    with pytest.raises(CorruptDataError, match="magic"):
        parse_txn_log(b"ZKSN" + header_only[4:], "log.5")


def test_close_session_without_record_is_told_apart_from_one_with_paths() -> None:
    header = TxnHeader(7, 1, 9, 1000, OpCode.CLOSE_SESSION)
    digest_only = encode_txn(header, None, TxnDigest(2, 12345))
    assert decode_txn(digest_only, 0, len(digest_only), "x")[1:] == (None, TxnDigest(2, 12345))
    bare = encode_txn(header, None)
    assert decode_txn(bare, 0, len(bare), "x")[1:] == (None, None)
    with_paths = encode_txn(header, CloseSessionTxn(("/abc",)))  # 12 record bytes, no digest
    assert decode_txn(with_paths, 0, len(with_paths), "x")[1] == CloseSessionTxn(("/abc",))


# ------------------------------------------------------------------------------------ snapshot writer


def test_written_snapshot_reads_back_equal_in_every_format(tmp_path: Path) -> None:
    snap = read_snapshot(KAFKA_DIR / "snapshot.9f00000037")
    digest = tree_digest(read_snapshot(KAFKA_DIR / "snapshot.9f00000037", client_view=False).tree)
    for suffix in ("", "gz", "snappy"):
        out = write_snapshot(
            snap.tree, tmp_path / snapshot_file_name(snap.zxid, suffix), snap.zxid, sessions=snap.sessions
        )
        back = read_snapshot(out)
        assert back.tree.nodes == snap.tree.nodes
        assert back.sessions == snap.sessions
        assert back.digest is not None and back.digest.digest == digest == 302594382448
        assert back.seals == 3 and back.last_processed_zxid == snap.zxid
        assert quick_check_problem(out) is None


def test_writer_into_a_directory_names_the_file_after_the_zxid(tmp_path: Path) -> None:
    tree = read_snapshot(TXNLOG_DIR / "snapshot.13.gz").tree
    out = write_snapshot(tree, tmp_path, 0x13)
    assert out == tmp_path / "snapshot.13"


@pytest.mark.parametrize(
    ("digest", "last_zxid", "trailer"),
    [(False, False, 13), (True, False, 46), (True, True, 67), (False, True, 34)],
)
def test_all_trailer_layouts_are_written_and_read(digest: bool, last_zxid: bool, trailer: int) -> None:
    tree = read_snapshot(TXNLOG_DIR / "snapshot.13.gz").tree
    data = encode_snapshot(tree, zxid=0x13, digest=digest, last_zxid=last_zxid)
    body = encode_snapshot(tree, zxid=0x13, digest=False, last_zxid=False)[:-13]
    assert len(data) - len(body) == trailer
    back = decode_snapshot(data, "x", 0x13)
    assert back.tree.nodes == tree.nodes
    assert (back.digest is not None) == digest
    assert back.last_processed_zxid == (0x13 if last_zxid else None)
    assert back.seals == 1 + digest + last_zxid
    # Every seal is checked: a flipped byte in the last section is caught too.
    with pytest.raises(CorruptDataError, match="Adler32"):
        decode_snapshot(_corrupt(data, len(data) - 14), "x", 0x13)


def test_writer_matches_zookeepers_layout_byte_for_byte_on_a_single_branch_tree() -> None:
    # snapshot.0 has no sibling order ambiguity among user nodes; only /zookeeper's two children, which
    # ZooKeeper happened to write as config, quota (also sorted order).
    original = (TXNLOG_DIR / "snapshot.0").read_bytes()
    snap = decode_snapshot(original, "x", 0)
    assert encode_snapshot(snap.tree, zxid=0, digest=True, last_zxid=False, digest_zxid=0) == original


def test_writer_fills_in_zookeepers_nodes_and_rejects_orphans(tmp_path: Path) -> None:
    tree = ZTree("t", {"/a": ZNode("/a", b"x", Stat(num_children=0))})
    back = decode_snapshot(encode_snapshot(tree, zxid=5), "x", 5)
    assert {"/zookeeper", "/zookeeper/quota", "/zookeeper/config"} <= set(back.tree.nodes)
    root = back.tree.nodes["/"].stat
    assert (root.num_children, root.cversion) == (2, 0)  # one create (/a) plus the built-in /zookeeper
    assert back.tree.nodes["/zookeeper"].stat.cversion == -2
    orphan = ZTree("t", {"/": ZNode("/", b""), "/a/b": ZNode("/a/b", None)})
    with pytest.raises(Zk2KraftError, match="/a/b has no parent"):
        encode_snapshot(orphan, zxid=1)


@pytest.mark.parametrize("path", ["/a/", "a", "/a//b", "/a/./b", "/..", "/\U0001f600", "/a\x01", "/\ue000"])
def test_writer_refuses_paths_zookeeper_refuses(path: str) -> None:
    tree = ZTree("t", {"/": ZNode("/", b""), path: ZNode(path, None)})
    with pytest.raises(Zk2KraftError, match="znode path"):
        encode_snapshot(tree, zxid=1)


# ---------------------------------------------------------------------------------------- properties

# Names ZooKeeper accepts (PathUtils): no controls, surrogates, private use, specials or astral characters.
_names = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0xD7FF, exclude_characters="/\x7f"),
    min_size=1,
    max_size=8,
).filter(lambda name: name not in (".", "..") and not any(0x7F <= ord(c) <= 0x9F for c in name))
_acl_text = st.text(max_size=12)  # any code points, astral and lone surrogates included
_acls = st.lists(st.builds(Acl, st.integers(0, 31), _acl_text, _acl_text), min_size=0, max_size=3).map(tuple)
_i64 = st.integers(-(2**63), 2**63 - 1)
_i32 = st.integers(-(2**31), 2**31 - 1)
_data = st.one_of(st.none(), st.binary(max_size=40))


@st.composite
def trees(draw: st.DrawFn) -> ZTree:
    nodes = {"/": ZNode("/", b"")}
    for _ in range(draw(st.integers(0, 12))):
        parent = draw(st.sampled_from(sorted(nodes)))
        path = (parent.rstrip("/")) + "/" + draw(_names)
        if path in nodes or is_system_path(path):
            continue
        nodes[path] = ZNode(path, draw(_data), Stat(), draw(_acls))
    out: dict[str, ZNode] = {}
    for path, node in nodes.items():
        kids = sum(1 for p in nodes if p != "/" and (p.rpartition("/")[0] or "/") == path)
        stat = Stat(
            czxid=draw(_i64), mzxid=draw(_i64), ctime=draw(_i64), mtime=draw(_i64),
            version=draw(_i32), cversion=draw(_i32), aversion=draw(_i32), ephemeral_owner=draw(_i64),
            data_length=len(node.data or b""), num_children=kids, pzxid=draw(_i64),
        )  # fmt: skip
        out[path] = ZNode(path, node.data, stat, node.acl if path != "/" else OPEN_ACL_UNSAFE)
    return ZTree("generated", out)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(trees(), st.booleans(), st.booleans(), st.dictionaries(_i64, _i32, max_size=3))
def test_write_then_read_gives_the_same_tree(
    tree: ZTree, digest: bool, last: bool, sessions: dict[int, int]
) -> None:
    data = encode_snapshot(
        tree,
        zxid=77,
        sessions=sessions,
        digest=digest,
        last_zxid=last,
        add_system_nodes=False,
        client_view=False,
    )
    back = decode_snapshot(data, "x", 77, client_view=False, with_digest=True)
    assert back.tree.nodes == tree.nodes
    assert back.sessions == sessions
    assert back.computed_digest == tree_digest(tree)
    if digest:
        assert back.digest is not None and back.digest.digest == tree_digest(tree)


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(trees())
def test_client_view_trees_survive_a_write_and_read(tree: ZTree) -> None:
    # What a client can see: cversion = 2 * creates - children, never a container or TTL owner.
    for node in tree.nodes.values():
        creates = abs(node.stat.cversion) % 1000 + node.stat.num_children
        owner = client_owner(node.stat.ephemeral_owner)
        node.stat = replace(node.stat, cversion=2 * creates - node.stat.num_children, ephemeral_owner=owner)
    back = decode_snapshot(encode_snapshot(tree, zxid=5, add_system_nodes=False), "x", 5)
    assert back.tree.nodes == tree.nodes


@settings(max_examples=300)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_escape_as_anything_but_corrupt_data(data: bytes) -> None:
    for attempt in (
        lambda: decode_snapshot(data, "fuzz"),
        lambda: decode_snapshot(b"ZKSN" + data, "fuzz"),
        lambda: parse_txn_log(data, "fuzz"),
        lambda: parse_txn_log(struct.pack(">iiq", 0x5A4B4C47, 2, 0) + data, "fuzz"),
        lambda: xerial_snappy_decompress(b"\x82SNAPPY\x00" + data, "fuzz"),
        lambda: decompress_snapshot(data, "snapshot.1.gz", "fuzz"),
    ):
        with contextlib.suppress(CorruptDataError):
            attempt()


@settings(max_examples=200)
@given(st.integers(0, 10_000), st.integers(1, 255))
def test_any_damaged_byte_of_a_snapshot_is_caught_or_harmless(position: int, flip: int) -> None:
    data = (TXNLOG_DIR / "snapshot.13.gz").read_bytes()
    stream = gzip.decompress(data)
    at = position % len(stream)
    damaged = stream[:at] + bytes([stream[at] ^ flip]) + stream[at + 1 :]
    try:
        back = decode_snapshot(damaged, "x", 0x13)
    except CorruptDataError:
        return
    # Only the very last seal's "/" marker is outside every checksum.
    assert at >= len(stream) - 1
    assert back.tree.nodes == decode_snapshot(stream, "x", 0x13).tree.nodes


@settings(max_examples=100)
@given(st.binary(max_size=200), st.integers(0, 199), st.integers(1, 255))
def test_damaged_log_entries_raise_only_corrupt_data(extra: bytes, position: int, flip: int) -> None:
    base = encode_txn_log([(TxnHeader(1, 2, 3, 4, OpCode.DELETE), DeleteTxn("/a"), TxnDigest(2, 9))] * 3)
    data = base + extra
    at = position % len(data)
    damaged = data[:at] + bytes([data[at] ^ flip]) + data[at + 1 :]
    with contextlib.suppress(CorruptDataError):
        parse_txn_log(damaged, "fuzz")


_paths = st.lists(_names, min_size=1, max_size=3).map(lambda parts: "/" + "/".join(parts))
_sub_records = st.one_of(
    st.builds(
        lambda p, d, a, e, c: (OpCode.CREATE, CreateTxn(p, d, a, e, c)),
        _paths,
        _data,
        _acls,
        st.booleans(),
        _i32,
    ),
    st.builds(
        lambda p, d, a, c: (OpCode.CREATE_CONTAINER, CreateTxn(p, d, a, False, c)), _paths, _data, _acls, _i32
    ),
    st.builds(
        lambda p, d, a, c, t: (OpCode.CREATE_TTL, CreateTxn(p, d, a, False, c, t)),
        _paths,
        _data,
        _acls,
        _i32,
        _i64,
    ),
    st.builds(lambda p: (OpCode.DELETE, DeleteTxn(p)), _paths),
    st.builds(lambda p, d, v: (OpCode.SET_DATA, SetDataTxn(p, d, v)), _paths, _data, _i32),
    st.builds(lambda p, v: (OpCode.CHECK, CheckVersionTxn(p, v)), _paths, _i32),
    st.builds(lambda e: (OpCode.ERROR, ErrorTxn(e)), _i32),
)
_top_records = st.one_of(
    _sub_records.filter(lambda r: r[0] != OpCode.CHECK),
    st.builds(lambda p, a, v: (OpCode.SET_ACL, SetACLTxn(p, a, v)), _paths, _acls, _i32),
    st.builds(lambda t: (OpCode.CREATE_SESSION, CreateSessionTxn(t)), _i32),
    st.builds(lambda ps: (OpCode.CLOSE_SESSION, CloseSessionTxn(tuple(ps))), st.lists(_paths, max_size=3)),
    st.builds(
        lambda subs: (OpCode.MULTI, MultiTxn(tuple(SubTxn(op, r) for op, r in subs))),
        st.lists(_sub_records, max_size=4),
    ),
)


@settings(max_examples=300)
@given(_top_records, _i64, _i32, _i64, _i64, st.one_of(st.none(), st.builds(TxnDigest, st.just(2), _i64)))
def test_txn_encode_decode_round_trip(
    op_record: tuple[int, object], client: int, cxid: int, zxid: int, time: int, digest: TxnDigest | None
) -> None:
    op, record = op_record
    header = TxnHeader(client, cxid, zxid, time, op)
    data = encode_txn(header, record, digest)  # type: ignore[arg-type]
    assert decode_txn(data, 0, len(data), "x") == (header, record, digest)
    log = parse_txn_log(encode_txn_log([(header, record, digest)] * 2, padding=64), "x")  # type: ignore[list-item]
    assert [e.record for e in log.entries] == [record, record] and log.end.kind == "padding"


@given(st.text())
def test_jute_strings_round_trip_like_javas_encoder(text: str) -> None:
    raw = encode_string(text)
    assert decode_string(raw) == text
    if not any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        # Without surrogate code points, each UTF-16 unit becomes 1-3 bytes, as Java writes them.
        units = len(text.encode("utf-16-be")) // 2
        assert len(raw) <= 3 * units


def test_astral_characters_are_written_as_java_does() -> None:
    assert encode_string("\U0001f600") == b"\xed\xa0\xbd\xed\xb8\x80"
    assert decode_string(b"\xed\xa0\xbd\xed\xb8\x80") == "\U0001f600"
    assert decode_string(b"\xff\xfe") == "\ufffd\ufffd"  # Java's decoder replaces malformed bytes


def test_snappy_stream_round_trip_uses_32k_blocks() -> None:
    data = bytes(range(256)) * 600
    packed = xerial_snappy_compress(data)
    assert packed.startswith(b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01")
    assert xerial_snappy_decompress(packed, "x") == data
    # snappy-java also reads concatenated streams
    assert xerial_snappy_decompress(packed + packed, "x") == data + data


def test_adler32_is_over_the_uncompressed_stream() -> None:
    stream = decompress_snapshot((TXNLOG_DIR / "snapshot.13.snappy").read_bytes(), "snapshot.13.snappy", "x")
    seal_at = stream.index(b"\x00\x00\x00\x01/") + 5  # end marker of the tree
    (stored,) = struct.unpack_from(">q", stream, seal_at)
    assert stored == zlib.adler32(stream[:seal_at])


@settings(max_examples=300)
@given(st.text(max_size=6))
def test_writer_refuses_exactly_the_paths_zookeeper_refuses(name: str) -> None:
    path = "/" + name
    tree = ZTree("t", {"/": ZNode("/", b""), path: ZNode(path, None)})
    try:
        encode_snapshot(tree, zxid=1)
    except Zk2KraftError as exc:
        assert path_problem(path) is not None or "has no parent" in str(exc)
    else:
        assert path_problem(path) is None


# ------------------------------------------------------------------------------------------- jute


def test_jute_reader_keeps_null_and_empty_apart_and_names_offsets() -> None:
    data = struct.pack(">i", -1) + struct.pack(">i", 0) + struct.pack(">i", 3) + b"abc" + struct.pack(">i", 9)
    r = JuteReader(data, "rec.bin")
    assert r.buffer() is None
    assert r.buffer() == b""
    assert r.ustring() == "abc"
    with pytest.raises(CorruptDataError, match=r"rec\.bin at byte 15: data: length 9 runs past the end"):
        r.buffer("data")
    r = JuteReader(struct.pack(">i", -5), "rec.bin")
    with pytest.raises(CorruptDataError, match="negative length -5"):
        r.buffer()
    r = JuteReader(struct.pack(">i", 1_000_000), "rec.bin")
    with pytest.raises(CorruptDataError, match="ACL list: length 1000000 runs past the end"):
        r.acl_list()
    with pytest.raises(CorruptDataError, match="at byte 2: long: needs 8 bytes but only 1 are left"):
        JuteReader(b"\x00\x00\x00", "rec.bin", pos=2).int64()


@given(st.lists(st.one_of(st.none(), st.binary(max_size=20))), st.lists(_acls, max_size=3))
def test_jute_writer_and_reader_round_trip(
    buffers: list[bytes | None], acl_lists: list[tuple[Acl, ...]]
) -> None:
    w = JuteWriter()
    for b in buffers:
        w.buffer(b)
    for acls in acl_lists:
        w.acl_list(acls)
    data = w.getvalue()
    r = JuteReader(data, "x")
    assert [r.buffer() for _ in buffers] == buffers
    assert [r.acl_list() for _ in acl_lists] == acl_lists
    r.expect_end("record")


@pytest.mark.parametrize("name", ["snapshot.800000000", "snapshot.9f00000037"])
def test_a_plain_snapshot_file_reads_as_its_bytes_decode_in_small_chunks_and_windows(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from migrate.zk.files import snapshot_read

    # Chunks and checksum windows far smaller than the file: pages are handed back many times.
    monkeypatch.setattr(snapshot_read, "_CHUNK", 7)
    monkeypatch.setattr(snapshot_read, "_CHECKSUM_WINDOW", 4096)
    data = (KAFKA_DIR / name).read_bytes()
    from_file = read_snapshot(KAFKA_DIR / name, with_digest=True)
    from_bytes = decode_snapshot(data, str(KAFKA_DIR / name), from_file.zxid, with_digest=True)
    assert from_file == from_bytes
    torn = tmp_path / name
    torn.write_bytes(data[:-9000] + data[-8999:])  # one byte gone from the node records
    with pytest.raises(CorruptDataError) as from_file_error:
        read_snapshot(torn)
    with pytest.raises(CorruptDataError) as from_bytes_error:
        decode_snapshot(torn.read_bytes(), str(torn), from_file.zxid)
    assert str(from_file_error.value) == str(from_bytes_error.value)
