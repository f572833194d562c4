"""Rebuilding ZooKeeper's tree from a data directory: snapshot choice, log replay, fuzzy snapshots, digests."""

from __future__ import annotations

import gzip
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.security import make_acl

from migrate.errors import Zk2KraftError
from migrate.zk.embedded import EmbeddedZooKeeper, super_digest
from migrate.zk.files.digest import tree_digest
from migrate.zk.files.names import snapshot_file_name
from migrate.zk.files.owners import CONTAINER_OWNER, is_system_path
from migrate.zk.files.snapshot_read import read_snapshot
from migrate.zk.files.snapshot_write import system_nodes, write_snapshot
from migrate.zk.files.txnlog import encode_txn_log, read_txn_log
from migrate.zk.restore import list_logs, load_data_dir, logs_after
from migrate.zk.tree import OPEN_ACL_UNSAFE, Acl, Stat, ZNode, ZTree
from tests.support import FIXTURES

TXNLOG_DIR = FIXTURES / "zk-real-3.8-txnlog" / "version-2"
KAFKA_DATA_DIR = FIXTURES / "zk-real-kafka-3.5"
CHROOT = "/de-4-3-kafka-cluster"


@pytest.fixture(scope="module")
def log_bytes() -> bytes:
    """log.1 exactly as ZooKeeper wrote it: 19 entries, then zeros up to 64 MiB."""
    return gzip.decompress((TXNLOG_DIR / "log.1.gz").read_bytes())


@pytest.fixture(scope="module")
def short_log(log_bytes: bytes) -> bytes:
    """log.1 with most of its preallocated zeros cut (same entries, quicker to copy around)."""
    end = read_txn_log(TXNLOG_DIR / "log.1.gz").end.offset
    return log_bytes[: end + 4096]


@pytest.fixture
def data_dir(tmp_path: Path, log_bytes: bytes) -> Path:
    """A dataDir holding ZooKeeper's snapshot.0 and the plain (gunzipped) log.1 written after it."""
    version2 = tmp_path / "data" / "version-2"
    version2.mkdir(parents=True)
    shutil.copy(TXNLOG_DIR / "snapshot.0", version2)
    (version2 / "log.1").write_bytes(log_bytes)
    return tmp_path / "data"


@pytest.fixture(scope="module")
def final_tree() -> ZTree:
    return read_snapshot(TXNLOG_DIR / "snapshot.13.gz").tree


def test_replaying_the_log_onto_snapshot_0_gives_zookeepers_own_later_snapshots(data_dir: Path) -> None:
    tree, report = load_data_dir(data_dir)
    for name in ("snapshot.13.gz", "snapshot.13.snappy"):
        expected = read_snapshot(TXNLOG_DIR / name).tree
        assert tree.nodes == expected.nodes  # paths, data, every stat field, ACLs
    assert tree.last_zxid == 0x13
    assert report.snapshot is not None and report.snapshot.endswith("snapshot.0")
    assert [Path(p).name for p in report.logs_read] == ["log.1"]
    assert report.txns_applied == 19 and report.last_zxid == 0x13
    assert report.truncation is None and report.stops == []
    assert report.digests_checked and report.digest_matches == 18 and report.digest_mismatches == []
    assert report.sessions == {}  # the one session was closed by the last txn


def test_replay_semantics_visible_in_the_result(data_dir: Path) -> None:
    tree, _ = load_data_dir(data_dir)
    assert "/chroot/m2" not in tree.nodes  # failed multi: its leading create left no trace
    assert "/chroot/m1" in tree.nodes  # successful multi applied
    assert "/chroot/brokers/ids/1" not in tree.nodes  # ephemeral of the closed session
    assert tree.nodes["/chroot/brokers/ids"].stat.pzxid == 0x13  # deleted by closeSession at 0x13
    assert tree.nodes["/chroot/cont"].stat.cversion == 2  # one create + one delete, as clients count
    stored, _ = load_data_dir(data_dir, client_view=False)
    assert stored.nodes["/chroot/cont"].stat.cversion == 1  # ZooKeeper stores creates only
    assert tree.nodes["/chroot/c2"].acl == (Acl(1, "world", "anyone"),)


def test_up_to_zxid_stops_replay_there(data_dir: Path) -> None:
    tree, report = load_data_dir(data_dir, up_to_zxid=0x12)
    assert report.last_zxid == 0x12 and tree.last_zxid == 0x12
    ephemeral = tree.nodes["/chroot/brokers/ids/1"]
    assert ephemeral.data == b"m" and ephemeral.stat.version == 1  # set by the multi at 0xe
    assert ephemeral.stat.ephemeral_owner in report.sessions
    assert report.digest_matches == 17
    early, _ = load_data_dir(data_dir, up_to_zxid=0xD)
    assert "/chroot/m1" not in early.nodes and "/chroot/été" not in early.nodes


def test_accepts_data_dir_version_2_and_a_separate_log_dir(tmp_path: Path, log_bytes: bytes) -> None:
    snaps = tmp_path / "snaps" / "version-2"
    logs = tmp_path / "logs" / "version-2"
    snaps.mkdir(parents=True)
    logs.mkdir(parents=True)
    shutil.copy(TXNLOG_DIR / "snapshot.0", snaps)
    (logs / "log.1").write_bytes(log_bytes)
    a, _ = load_data_dir(snaps, logs)
    b, report = load_data_dir(tmp_path / "snaps", tmp_path / "logs")
    assert a.nodes == b.nodes and report.txns_applied == 19
    only_snapshot, report = load_data_dir(tmp_path / "snaps")
    assert report.txns_applied == 0 and "/chroot" not in only_snapshot.nodes


def test_newest_snapshot_wins_and_older_log_entries_are_recognised_as_included(data_dir: Path) -> None:
    shutil.copy(TXNLOG_DIR / "snapshot.13.gz", data_dir / "version-2")
    tree, report = load_data_dir(data_dir)
    assert report.snapshot is not None and report.snapshot.endswith("snapshot.13.gz")
    assert report.txns_applied == 0 and report.txns_in_snapshot == 19
    assert report.snapshot_digest == "verified"
    assert tree.nodes == read_snapshot(TXNLOG_DIR / "snapshot.13.gz").tree.nodes


def test_damaged_newest_snapshot_falls_back_to_an_older_one(data_dir: Path) -> None:
    stream = gzip.decompress((TXNLOG_DIR / "snapshot.13.gz").read_bytes())
    at = stream.index(b"v2")  # data of /chroot/c2: still parses, only the checksum can tell
    damaged = stream[:at] + b"X" + stream[at + 1 :]
    (data_dir / "version-2" / "snapshot.13").write_bytes(damaged)
    tree, report = load_data_dir(data_dir)
    assert report.snapshot is not None and report.snapshot.endswith("snapshot.0")
    assert len(report.skipped_snapshots) == 1
    skipped = report.skipped_snapshots[0]
    assert skipped.file.endswith("snapshot.13") and "Adler32" in skipped.reason
    assert tree.nodes == read_snapshot(TXNLOG_DIR / "snapshot.13.gz").tree.nodes


def test_torn_log_stops_at_the_last_complete_transaction_and_says_so(
    data_dir: Path, log_bytes: bytes
) -> None:
    entries = read_txn_log(data_dir / "version-2" / "log.1").entries
    torn_at = entries[17].offset  # the create of /chroot/été, zxid 0x12
    (data_dir / "version-2" / "log.1").write_bytes(log_bytes[: torn_at + 25])
    tree, report = load_data_dir(data_dir)
    assert report.last_zxid == 0x11 and report.txns_applied == 17
    assert report.truncation is not None
    assert str(report.truncation).startswith(
        f"stopped at zxid 0x11: truncated entry at byte {torn_at} of log.1"
    )
    expected, _ = load_data_dir(_copy_dir(data_dir, log_bytes[: entries[-1].offset + 200]), up_to_zxid=0x11)
    assert tree.nodes == expected.nodes


def _copy_dir(data_dir: Path, log_bytes: bytes) -> Path:
    other = data_dir.parent / "intact"
    (other / "version-2").mkdir(parents=True)
    shutil.copy(TXNLOG_DIR / "snapshot.0", other / "version-2")
    (other / "version-2" / "log.1").write_bytes(log_bytes)
    return other


def test_kafka_data_dir_restores_the_newest_snapshot() -> None:
    tree, report = load_data_dir(KAFKA_DATA_DIR)
    assert report.snapshot is not None and report.snapshot.endswith("snapshot.9f00000037")
    assert report.snapshot_digest == "verified"
    assert report.orphan_ephemerals_removed == []
    kafka = tree.with_chroot(CHROOT)
    assert kafka.children("/brokers/ids") == ["1", "2", "3"]
    assert {"__consumer_offsets", "current_stock"} == set(kafka.children("/brokers/topics"))
    assert b"esQVtsr4Sh6LSPhdkKjbNw" in (kafka.data("/cluster/id") or b"")
    older, report = load_data_dir(KAFKA_DATA_DIR, up_to_zxid=0x9F00000036)
    assert report.snapshot is not None and report.snapshot.endswith("snapshot.800000000")
    assert older.with_chroot(CHROOT).children("/brokers/ids") == ["1", "2", "3"]


def test_missing_files_are_refused_clearly(tmp_path: Path, log_bytes: bytes) -> None:
    (tmp_path / "version-2").mkdir()
    with pytest.raises(Zk2KraftError, match="no ZooKeeper snapshot or transaction log"):
        load_data_dir(tmp_path)
    with pytest.raises(Zk2KraftError, match="not a directory"):
        load_data_dir(tmp_path / "nope")
    (tmp_path / "version-2" / "log.1").write_bytes(log_bytes)
    with pytest.raises(Zk2KraftError, match="no valid snapshot"):
        load_data_dir(tmp_path)
    # Like zookeeper.snapshot.trust.empty: the log from zxid 1 alone rebuilds the whole tree.
    tree, report = load_data_dir(tmp_path, trust_empty_snapshot=True)
    assert tree.nodes == read_snapshot(TXNLOG_DIR / "snapshot.13.gz").tree.nodes
    assert report.digest_matches == 18


def test_only_damaged_snapshots_is_an_error_naming_each(tmp_path: Path) -> None:
    version2 = tmp_path / "version-2"
    version2.mkdir()
    data = (TXNLOG_DIR / "snapshot.0").read_bytes()
    (version2 / "snapshot.0").write_bytes(data[:100] + b"\xff" + data[101:])
    with pytest.raises(Zk2KraftError, match=r"not able to find a valid snapshot.*snapshot\.0.*Adler32"):
        load_data_dir(tmp_path)


def test_log_selection_follows_zookeeper() -> None:
    logs = [(1, Path("log.1")), (0x50, Path("log.50")), (0x90, Path("log.90"))]
    assert [p.name for p in logs_after(logs, 0x60)] == ["log.50", "log.90"]
    assert [p.name for p in logs_after(logs, 0x50)] == ["log.50", "log.90"]
    assert [p.name for p in logs_after(logs, 0)] == ["log.1", "log.50", "log.90"]
    assert [p.name for p in logs_after(logs, 0x100)] == ["log.90"]


def test_plain_log_is_preferred_over_its_gz_copy(tmp_path: Path, log_bytes: bytes) -> None:
    (tmp_path / "log.1").write_bytes(log_bytes)
    shutil.copy(TXNLOG_DIR / "log.1.gz", tmp_path)
    assert [p.name for _, p in list_logs(tmp_path)] == ["log.1"]


def test_progress_reports_snapshot_and_log_stages(data_dir: Path) -> None:
    seen: list[tuple[str, int, int]] = []
    load_data_dir(data_dir, progress=lambda stage, done, total: seen.append((stage, done, total)))
    stages = {s for s, _, _ in seen}
    assert stages == {"snapshot", "log log.1"}
    assert seen[-1][1] == seen[-1][2]


# ------------------------------------------------------------------------------- fuzzy snapshots

_STATES = [0, 1, 4, 5, 9, 10, 13, 14, 15, 16, 17, 18, 19]


@pytest.mark.parametrize("named", _STATES)
def test_fuzzy_snapshot_plus_replay_reaches_the_same_state(
    tmp_path: Path, short_log: bytes, named: int, final_tree: ZTree
) -> None:
    """A snapshot named `named` may hold the effects of any later txns: replay must still converge."""
    source = _copy_dir(tmp_path / "x", short_log)
    for holds in [z for z in _STATES if z >= named]:
        state, state_report = load_data_dir(source, up_to_zxid=holds, client_view=False)
        folder = tmp_path / f"fuzzy-{named}-{holds}" / "version-2"
        folder.mkdir(parents=True)
        write_snapshot(
            state,
            folder / snapshot_file_name(named),
            named,
            sessions=state_report.sessions,
            digest_zxid=holds,
            last_zxid=False,
            client_view=False,
        )
        (folder / "log.1").write_bytes(short_log)
        tree, report = load_data_dir(folder.parent)
        assert tree.nodes == final_tree.nodes, f"snapshot.{named:x} holding state {holds:#x}"
        assert report.digest_mismatches == []
        if holds > named:
            assert report.snapshot_digest == "verified"


def test_fuzzy_snapshot_digest_is_checked_only_once_its_zxid_is_reached(
    tmp_path: Path, short_log: bytes
) -> None:
    source = _copy_dir(tmp_path / "x", short_log)
    state, state_report = load_data_dir(source, up_to_zxid=0x10, client_view=False)
    folder = tmp_path / "fuzzy" / "version-2"
    folder.mkdir(parents=True)
    # Named 0x9 but holding 0x10: txn digests 0xa..0xf cannot match and must not be compared.
    write_snapshot(
        state, folder / "snapshot.9", 9, sessions=state_report.sessions, digest_zxid=0x10, client_view=False
    )
    (folder / "log.1").write_bytes(short_log)
    _, report = load_data_dir(folder.parent)
    assert report.snapshot_digest == "verified"
    assert report.digest_matches == 3  # 0x11, 0x12, 0x13 (0x10 is the digest-less error txn)
    assert report.ignored_errors.get("NODEEXISTS", 0) > 0


def test_missing_log_for_a_fuzzy_snapshot_is_warned_about(tmp_path: Path, short_log: bytes) -> None:
    source = _copy_dir(tmp_path / "x", short_log)
    state, state_report = load_data_dir(source, up_to_zxid=0x10)
    folder = tmp_path / "fuzzy" / "version-2"
    folder.mkdir(parents=True)
    write_snapshot(state, folder / "snapshot.9", 9, sessions=state_report.sessions, digest_zxid=0x10)
    _, report = load_data_dir(folder.parent)
    assert report.snapshot_digest == "not reached"
    assert any("transactions are missing" in w for w in report.warnings)


def test_orphan_ephemerals_are_expired_like_zookeeper_does_on_load(tmp_path: Path, short_log: bytes) -> None:
    source = _copy_dir(tmp_path / "x", short_log)
    state, _ = load_data_dir(source, up_to_zxid=0x12)
    folder = tmp_path / "orphans" / "version-2"
    folder.mkdir(parents=True)
    write_snapshot(state, folder, 0x12, sessions={})  # the ephemeral's session is not in the table
    tree, report = load_data_dir(folder.parent)
    assert report.orphan_ephemerals_removed == ["/chroot/brokers/ids/1"]
    assert "/chroot/brokers/ids/1" not in tree.nodes
    kept, report = load_data_dir(folder.parent, expire_orphan_ephemerals=False)
    assert "/chroot/brokers/ids/1" in kept.nodes and report.orphan_ephemerals_removed == []


def test_digest_verification_can_be_turned_off(data_dir: Path) -> None:
    tree, report = load_data_dir(data_dir, verify_digests=False, client_view=False)
    assert not report.digests_checked and report.digest_matches == 0
    assert report.snapshot_digest == "not checked"
    assert tree_digest(tree) == 16084744789  # the digest ZooKeeper logged after the last txn


# ------------------------------------------------------------------------ against a real ZooKeeper


def _live_tree(client: KazooClient) -> dict[str, tuple[bytes | None, Stat, tuple[Acl, ...]]]:
    """Every znode a client sees: data, full Stat and ACL, keyed by path."""
    out: dict[str, tuple[bytes | None, Stat, tuple[Acl, ...]]] = {}
    todo = ["/"]
    while todo:
        path = todo.pop()
        data, zstat = client.get(path)
        acls, _ = client.get_acls(path)
        stat = Stat(
            zstat.czxid, zstat.mzxid, zstat.ctime, zstat.mtime, zstat.version, zstat.cversion,
            zstat.aversion, zstat.ephemeralOwner, zstat.dataLength, zstat.numChildren, zstat.pzxid,
        )  # fmt: skip
        out[path] = (data, stat, tuple(Acl(a.perms, a.id.scheme, a.id.id) for a in acls))
        todo.extend(("" if path == "/" else path) + "/" + child for child in client.get_children(path))
    return out


def _kafka_like_tree() -> ZTree:
    """A small Kafka-shaped tree in stored form: null and empty data, a container, a digest ACL."""
    secret = (Acl(31, "digest", super_digest("admin", "secret")), Acl(1, "world", "anyone"))
    nodes = system_nodes(client_view=False)

    def add(
        path: str, data: bytes | None, zxid: int, acl: tuple[Acl, ...] = OPEN_ACL_UNSAFE, owner: int = 0
    ) -> None:
        stat = Stat(
            zxid, zxid + 1, 1_700_000_000_000 + zxid, 1_700_000_000_500 + zxid, 1, 0, 0, owner, 0, 0, zxid
        )
        nodes[path] = ZNode(path, data, stat, acl)

    add("/kafka", None, 0x500000001)
    add("/kafka/brokers", None, 0x500000002)
    add("/kafka/brokers/topics", None, 0x500000003)
    add("/kafka/brokers/topics/orders", b'{"version":3,"partitions":{"0":[1]}}', 0x500000004)
    add("/kafka/brokers/topics/orders/partitions", None, 0x500000005)
    add("/kafka/isr_change_notification", b"", 0x500000006)
    add("/kafka/cluster", None, 0x500000007)
    add("/kafka/cluster/id", b'{"version":"1","id":"esQVtsr4Sh6LSPhdkKjbNw"}', 0x500000008, secret)
    add("/kafka/locks", None, 0x500000009, owner=CONTAINER_OWNER)
    add("/kafka/locks/held", b"x", 0x50000000A)
    add("/kafka/old", b"gone soon", 0x50000000B)
    counts: dict[str, int] = {}
    for path in nodes:
        if path != "/":
            parent = path.rpartition("/")[0] or "/"
            counts[parent] = counts.get(parent, 0) + 1
    for path, node in nodes.items():
        creates = counts.get(path, 0) - (path == "/")  # the built-in /zookeeper was never created
        cversion = node.stat.cversion if is_system_path(path) else creates
        node.stat = replace(node.stat, cversion=cversion, num_children=counts.get(path, 0))
    return ZTree("synthetic", nodes, 0x50000000B)


@pytest.mark.zookeeper
def test_zookeeper_loads_our_snapshot_and_our_restore_matches_its_live_state(tmp_path: Path) -> None:
    tree = _kafka_like_tree()
    data_dir = tmp_path / "zk" / "data" / "version-2"
    data_dir.mkdir(parents=True)
    written = write_snapshot(tree, data_dir, tree.last_zxid, client_view=False)
    ours = read_snapshot(written, client_view=False)
    as_clients_see_it = read_snapshot(written).tree

    with EmbeddedZooKeeper(tmp_path / "zk") as server:
        # Authenticated as the digest user: ZooKeeper only shows digest ACL ids to their admins.
        client = KazooClient(hosts=server.connect_string, auth_data=[("digest", "admin:secret")])
        client.start(timeout=15)
        # ZooKeeper serves exactly what we wrote: data (null stays null), stats and ACLs.
        live = _live_tree(client)
        for path, node in as_clients_see_it.nodes.items():
            assert live[path] == (node.data, node.stat, node.acl), path
        # Now change things through the real server...
        client.create("/kafka/brokers/ids/1", b'{"host":"h1"}', ephemeral=True, makepath=True)
        client.create("/kafka/isr_change_notification/isr_change_", b"x", sequence=True)
        client.set("/kafka/brokers/topics/orders", b'{"version":3,"partitions":{"0":[1,2]}}')
        client.delete("/kafka/old")
        client.set_acls("/kafka/cluster", [make_acl("world", "anyone", read=True)])
        ok = client.transaction()
        ok.check("/kafka/brokers", 1)
        ok.create("/kafka/brokers/topics/orders/partitions/0", b"")
        ok.set_data("/kafka/brokers/topics/orders", b"{}")
        ok.commit()
        failed = client.transaction()
        failed.create("/kafka/never", b"")
        failed.check("/kafka/brokers", 99)
        failed.commit()
        client.create("/kafka/locks/second", b"")  # under the container
        client.stop()  # closes the session: its ephemeral goes
        client.close()
        reader = KazooClient(hosts=server.connect_string, auth_data=[("digest", "admin:secret")])
        reader.start(timeout=15)
        expected = _live_tree(reader)
        reader.stop()
        reader.close()
    assert "/kafka/never" not in expected and "/kafka/brokers/ids/1" not in expected

    # On start-up ZooKeeper recomputed our tree's digest and re-saved the tree under the same name.
    assert ours.digest is not None
    assert f"digest is {ours.digest.digest}" in server.log_path.read_text()
    assert read_snapshot(written, client_view=False).tree.nodes == ours.tree.nodes

    restored, report = load_data_dir(tmp_path / "zk" / "data")
    assert report.digest_mismatches == [] and report.digest_matches >= 8
    assert report.truncation is None
    got = {p: (n.data, n.stat, n.acl) for p, n in restored.nodes.items()}
    for path in expected.keys() | got.keys():
        if not path.startswith("/zookeeper"):
            assert got.get(path) == expected.get(path), path


def _split_log(folder: Path, short_log: bytes, at_zxid: int) -> list[Path]:
    """Write the fixture's txns as two logs, `log.1` and `log.<at_zxid>`, like a log roll would."""
    entries = read_txn_log(TXNLOG_DIR / "log.1.gz").entries
    first = [(e.header, e.record, e.digest) for e in entries if e.header.zxid < at_zxid]
    second = [(e.header, e.record, e.digest) for e in entries if e.header.zxid >= at_zxid]
    paths = [folder / "log.1", folder / f"log.{at_zxid:x}"]
    paths[0].write_bytes(encode_txn_log(first, padding=4096))
    paths[1].write_bytes(encode_txn_log(second, padding=4096))
    return paths


def test_replay_continues_across_rolled_logs(tmp_path: Path, short_log: bytes, final_tree: ZTree) -> None:
    folder = tmp_path / "version-2"
    folder.mkdir()
    shutil.copy(TXNLOG_DIR / "snapshot.0", folder)
    _split_log(folder, short_log, 0xB)
    tree, report = load_data_dir(folder)
    assert tree.nodes == final_tree.nodes
    assert [Path(p).name for p in report.logs_read] == ["log.1", "log.b"]
    assert report.digest_matches == 18 and report.warnings == []
    # A snapshot inside the first log: that log is still read (it holds txns after the snapshot).
    state, state_report = load_data_dir(folder, up_to_zxid=9, client_view=False)
    later = tmp_path / "later" / "version-2"
    later.mkdir(parents=True)
    write_snapshot(state, later, 9, sessions=state_report.sessions, client_view=False)
    _split_log(later, short_log, 0xB)
    tree, report = load_data_dir(later)
    assert tree.nodes == final_tree.nodes
    assert [Path(p).name for p in report.logs_read] == ["log.1", "log.b"]
    assert report.txns_in_snapshot == 9 and report.txns_applied == 10


def test_torn_end_of_an_older_log_is_reported_and_replay_goes_on(tmp_path: Path, short_log: bytes) -> None:
    folder = tmp_path / "version-2"
    folder.mkdir()
    shutil.copy(TXNLOG_DIR / "snapshot.0", folder)
    first, _ = _split_log(folder, short_log, 0xB)
    entries = read_txn_log(first).entries
    first.write_bytes(first.read_bytes()[: entries[-1].offset + 20])  # zxid 0xa torn
    tree, report = load_data_dir(folder)
    assert "/chroot/été" in tree.nodes  # created at 0x12, in the later log
    assert report.last_zxid == 0x13 and report.truncation is None
    assert len(report.stops) == 1 and str(report.stops[0]).startswith("stopped at zxid 0x9: truncated entry")
    assert any("0xa to 0xa are in no log" in w for w in report.warnings)
    assert "stopped at zxid 0x9" in report.summary()
