"""bridge.raft.metadata_log: format, recovery, election, group commit and crash safety on real files."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from bridge.raft.metadata_log import LOCK_FILE, AppendResult, MetadataLog, encode_data_batch
from migrate.errors import CorruptDataError, InvalidRequestError, UnsupportedVersionError, Zk2KraftError
from migrate.kraft import records as rec
from migrate.kraft.activation import ABORT_REASON, encode_leader_change_batch
from migrate.kraft.batch import iter_kraft_batches
from migrate.kraft.image import MetadataImage, Provenance
from migrate.kraft.logdir import (
    INDEX_INTERVAL_BYTES,
    EpochEntry,
    MetaProperties,
    SegmentIndexBuilder,
    SnapshotId,
    list_segments,
    list_snapshots,
    read_leader_epoch_checkpoint,
    read_meta_properties,
    read_partition_metadata,
    read_quorum_state,
    snapshot_file_name,
    write_meta_properties,
    write_partition_metadata,
    write_segment,
)
from migrate.kraft.reader import LogEntry, iter_log_dir, load_image, read_bootstrap_records
from migrate.migration import migrate_to_metadata_dir
from migrate.zk.cluster import from_tree
from migrate.zk.restore import load_data_dir
from tests.support import FIXTURES, REPO

KRAFT_FIXTURE = FIXTURES / "kraft-real-3.7"
ZK_FIXTURE = FIXTURES / "zk-real-kafka-3.5"
ZK_CHROOT = "/de-4-3-kafka-cluster"
NODE = 3000
CLUSTER = "esQVtsr4Sh6LSPhdkKjbNw"
PDIR = "__cluster_metadata-0"


# ---------------------------------------------------------------------------------------------- helpers


def config(name: str, value: str | None = "v", resource: str = "") -> tuple[Any, int]:
    return (rec.ConfigRecord(resource_type=4, resource_name=resource, name=name, value=value), 0)


def entries(directory: Path) -> list[LogEntry]:
    return list(iter_log_dir(directory))


def without_provenance(image: MetadataImage) -> MetadataImage:
    return dataclasses.replace(image, provenance=Provenance())


def fresh(directory: Path, **kw: Any) -> MetadataLog:
    kw.setdefault("now_ms", 1_700_000_000_000)
    return MetadataLog.open(directory, node_id=NODE, cluster_id=CLUSTER, **kw)


def batch_positions(segment: Path) -> list[tuple[int, int, int]]:
    """(position, base offset, last offset) of every batch of a segment."""
    data = segment.read_bytes()
    return [(pos, h.base_offset, h.last_offset) for pos, h, _ in iter_kraft_batches(data, str(segment))]


def expected_indexes(segment: Path, base_offset: int) -> tuple[bytes, bytes]:
    """The `.index`/`.timeindex` Kafka's LogSegment.recover + close produce for this segment."""
    builder = SegmentIndexBuilder(base_offset)
    data = segment.read_bytes()
    for _pos, h, _ in iter_kraft_batches(data, str(segment)):
        builder.add_batch(h.base_offset, h.last_offset, h.max_timestamp, h.size_in_bytes)
    return builder.close()


# ---------------------------------------------------------------------------------------------- bytes


def test_batches_are_byte_identical_to_the_real_kafka_log() -> None:
    segment = KRAFT_FIXTURE / PDIR / "00000000000000000000.log"
    data = segment.read_bytes()
    by_offset: dict[int, list[LogEntry]] = {}
    for entry in iter_log_dir(KRAFT_FIXTURE, stop_offset=40):
        by_offset.setdefault(entry.batch_position, []).append(entry)
    checked = 0
    for pos, header, _ in iter_kraft_batches(data, str(segment)):
        if header.base_offset >= 40:
            break
        raw = data[pos : pos + header.size_in_bytes]
        batch_entries = by_offset[pos]
        if header.is_control:
            leader = batch_entries[0].record.leader_id
            ours = encode_leader_change_batch(header.base_offset, 1, header.base_timestamp, leader)
        else:
            ours = encode_data_batch(
                header.base_offset,
                header.partition_leader_epoch,
                header.base_timestamp,
                [(e.record, e.version) for e in batch_entries],
            )
        assert ours == raw, f"batch at byte {pos}"
        checked += 1
    assert checked >= 30


# ---------------------------------------------------------------------------------------------- format


def test_fresh_format_writes_a_single_node_controller_dir(tmp_path: Path) -> None:
    root = tmp_path / "meta"
    with fresh(root) as log:
        assert (log.end_offset, log.durable_offset, log.leader_epoch) == (5, 4, 1)
        assert (log.node_id, log.cluster_id) == (NODE, CLUSTER)
        assert log.image.metadata_version.name == "3.9-IV0"
        assert log.image.features.zk_migration_state == 2  # PRE_MIGRATION
    pdir = root / PDIR
    meta = read_meta_properties(root / "meta.properties")
    assert (meta.version, meta.cluster_id, meta.node_id) == (1, CLUSTER, NODE) and meta.directory_id
    assert read_bootstrap_records(root) == [
        (rec.FeatureLevelRecord(name="metadata.version", feature_level=21), 0)
    ]
    assert read_partition_metadata(pdir / "partition.metadata") == uuid.UUID(int=1)
    quorum = read_quorum_state(pdir / "quorum-state")
    assert (quorum.leader_id, quorum.leader_epoch, quorum.voted_id, quorum.current_voters) == (
        NODE,
        1,
        -1,
        (NODE,),
    )
    assert read_leader_epoch_checkpoint(pdir / "leader-epoch-checkpoint") == [EpochEntry(1, 0)]
    found = [(e.offset, e.leader_epoch, e.is_control, type(e.record).__name__) for e in entries(root)]
    assert found == [
        (0, 1, True, "LeaderChangeMessage"),
        (1, 1, False, "BeginTransactionRecord"),
        (2, 1, False, "FeatureLevelRecord"),
        (3, 1, False, "ZkMigrationStateRecord"),
        (4, 1, False, "EndTransactionRecord"),
    ]
    # Same shape as the real Kafka log's first two batches (leader change, then the bootstrap batch).
    segment = pdir / "00000000000000000000.log"
    assert [(b, last) for _, b, last in batch_positions(segment)] == [(0, 0), (1, 4)]
    assert (
        (pdir / "00000000000000000000.index").read_bytes(),
        (pdir / "00000000000000000000.timeindex").read_bytes(),
    ) == expected_indexes(segment, 0)


def test_reopen_bumps_the_epoch_and_keeps_the_image(tmp_path: Path) -> None:
    root = tmp_path / "meta"
    with fresh(root) as log:
        log.append([config("a"), config("b")], now_ms=5).durable.result()
        log.append([config("a", None)], now_ms=6).durable.result()
        before = without_provenance(log.image)
        end = log.end_offset
    leftover = root / PDIR / ".quorum-state.x1y2z3.tmp"  # an atomic write a crash interrupted
    leftover.write_bytes(b"{")
    with MetadataLog.open(root, node_id=NODE, now_ms=7) as log:
        assert not leftover.exists()
        assert log.leader_epoch == 2 and log.cluster_id == CLUSTER
        assert without_provenance(log.image) == before
        assert log.image.configs[(4, "")] == {"b": "v"}
        assert (log.end_offset, log.durable_offset) == (end + 1, end)
        assert log.image.provenance.last_contained_offset == end
        image = log.image
    last = entries(root)[-1]
    assert (last.offset, last.leader_epoch, last.is_control, last.timestamp_ms) == (end, 2, True, 7)
    assert last.record == rec.LeaderChangeMessage(
        leader_id=NODE,
        voters=[rec.LeaderChangeMessage.Voter(voter_id=NODE)],
        granting_voters=[rec.LeaderChangeMessage.Voter(voter_id=NODE)],
    )
    pdir = root / PDIR
    assert read_quorum_state(pdir / "quorum-state").leader_epoch == 2
    assert read_leader_epoch_checkpoint(pdir / "leader-epoch-checkpoint") == [
        EpochEntry(1, 0),
        EpochEntry(2, end),
    ]
    assert load_image(root)[0] == image


def test_a_clean_stop_leaves_the_image_as_a_snapshot_that_the_next_open_loads(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A single voter's clean stop snapshots its whole log (as the quorum's voters do), so that a Kafka controller
    taking the directory over loads it instead of replaying the log; a second clean stop adds no older one."""
    root = tmp_path / "meta"
    with fresh(root) as log:
        log.append([config("a"), config("b")], now_ms=5).durable.result()
        log.append([config("a", None)], now_ms=6)  # not yet durable: the stop fsyncs it first
        end, epoch = log.end_offset, log.leader_epoch
        image = log.image
        written = log.close_with_snapshot()
    assert written is not None and [sid for sid, _path in list_snapshots(root / PDIR)] == [SnapshotId(end, epoch)]
    assert load_image(root)[0] == image
    caplog.set_level(logging.INFO, logger="bridge.raft.metadata_log")
    with MetadataLog.open(root, node_id=NODE, now_ms=7) as log:
        assert without_provenance(log.image) == without_provenance(image)
        assert f"loaded snapshot {snapshot_file_name(SnapshotId(end, epoch))}" in caplog.text
        log.close_with_snapshot()
    assert [sid.end_offset for sid, _path in list_snapshots(root / PDIR)] == [end, end + 1]


def test_a_log_that_failed_closes_without_a_snapshot(tmp_path: Path) -> None:
    root = tmp_path / "meta"
    log = fresh(root)
    log.append([config("a")], now_ms=5).durable.result()
    with log.lock:
        log._failure = OSError("disk gone")  # what the writer thread records when a write or fsync fails
    with pytest.raises(Zk2KraftError, match="disk gone"):
        log.check_usable()
    assert log.close_with_snapshot() is None
    assert list_snapshots(root / PDIR) == []


def test_formatting_needs_a_cluster_id_and_a_migration_capable_version(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequestError, match="cluster id"):
        MetadataLog.open(tmp_path / "a", node_id=NODE)
    with pytest.raises(UnsupportedVersionError, match=r"3\.5-IV2"):
        MetadataLog.open(tmp_path / "b", node_id=NODE, cluster_id=CLUSTER, metadata_version="3.5-IV2")
    assert not (tmp_path / "b" / "meta.properties").exists()
    with MetadataLog.open(
        tmp_path / "c", node_id=NODE, cluster_id=CLUSTER, metadata_version="3.7-IV4"
    ) as log:
        assert log.metadata_version.name == "3.7-IV4"


def test_node_and_cluster_id_must_match_meta_properties(tmp_path: Path) -> None:
    root = tmp_path / "meta"
    fresh(root).close()
    with pytest.raises(InvalidRequestError, match=r"meta\.properties has node\.id 3000.* 3001"):
        MetadataLog.open(root, node_id=3001)
    with pytest.raises(InvalidRequestError, match=r"meta\.properties has cluster\.id"):
        MetadataLog.open(root, node_id=NODE, cluster_id="other")
    write_meta_properties(root / "meta.properties", MetaProperties(0, CLUSTER, NODE))
    with pytest.raises(UnsupportedVersionError, match="version 0"):
        MetadataLog.open(root, node_id=NODE)


def test_a_second_open_of_the_same_dir_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "meta"
    with fresh(root), pytest.raises(Zk2KraftError, match=LOCK_FILE):
        MetadataLog.open(root, node_id=NODE)
    MetadataLog.open(root, node_id=NODE).close()


def test_formatted_but_never_started_dir_gets_its_bootstrap_checkpoint_records(tmp_path: Path) -> None:
    root = tmp_path / "meta"
    root.mkdir()
    write_meta_properties(root / "meta.properties", MetaProperties(1, CLUSTER, NODE, uuid.uuid4()))
    shutil.copy(KRAFT_FIXTURE / "bootstrap.checkpoint", root)  # metadata.version 3.7-IV4
    with MetadataLog.open(root, node_id=NODE) as log:
        assert log.metadata_version.name == "3.7-IV4" and log.leader_epoch == 1
    assert read_partition_metadata(root / PDIR / "partition.metadata") == uuid.UUID(int=1)


# ---------------------------------------------------------------------------------------------- migrated dirs


@pytest.fixture(scope="module")
def migrated_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tree, _ = load_data_dir(ZK_FIXTURE)
    model = from_tree(tree.with_chroot(ZK_CHROOT))
    out = tmp_path_factory.mktemp("migrated") / "meta"
    migrate_to_metadata_dir(model, out, controller_id=NODE, timestamp_ms=1_700_000_000_000)
    return out


def test_reopen_a_dir_written_by_zk2kraft_migrate(migrated_dir: Path, tmp_path: Path) -> None:
    root = tmp_path / "meta"
    shutil.copytree(migrated_dir, root)
    reference, report = load_image(root)
    assert report.snapshot is not None
    end = report.snapshot_id.end_offset if report.snapshot_id else -1
    with MetadataLog.open(root, node_id=NODE) as log:
        assert log.loaded_snapshot == report.snapshot_id
        assert without_provenance(log.image) == without_provenance(reference)
        assert log.image.topics_by_name["current_stock"].partitions  # the real cluster is there
        assert log.image.features.zk_migration_state == 1  # MIGRATION: nothing to re-activate
        assert (log.leader_epoch, log.end_offset) == (2, end + 1)
        log.append([config("after-migration")]).durable.result()
        image = log.image
    assert load_image(root)[0] == image
    pdir = root / PDIR
    assert read_leader_epoch_checkpoint(pdir / "leader-epoch-checkpoint") == [
        EpochEntry(1, 0),
        EpochEntry(2, end),
    ]
    segment = pdir / "00000000000000000000.log"
    index = (
        (pdir / "00000000000000000000.index").read_bytes(),
        (pdir / "00000000000000000000.timeindex").read_bytes(),
    )
    assert index == expected_indexes(segment, 0)


# ---------------------------------------------------------------------------------------------- recovery


@pytest.fixture
def three_appends(tmp_path: Path) -> tuple[Path, list[AppendResult]]:
    root = tmp_path / "base"
    with fresh(root) as log:
        results = [log.append([config(f"k{i}", "x" * i)], now_ms=10 + i) for i in range(3)]
        results[-1].durable.result()
    return root, results


def test_every_torn_tail_is_truncated_to_the_previous_batch(
    three_appends: tuple[Path, list[AppendResult]], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    base, results = three_appends
    segment_name = "00000000000000000000.log"
    positions = batch_positions(base / PDIR / segment_name)
    last_pos, last_base, _ = positions[-1]
    assert last_base == results[-1].base_offset
    size = (base / PDIR / segment_name).stat().st_size
    before = [(e.offset, e.record) for e in entries(base) if e.offset < last_base]
    for cut in range(last_pos, size):
        root = tmp_path / f"cut{cut}"
        shutil.copytree(base, root)
        os.truncate(root / PDIR / segment_name, cut)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="bridge.raft.metadata_log"):
            log = MetadataLog.open(root, node_id=NODE)
        log.close()
        assert log.end_offset == last_base + 1  # the new leader change sits where the torn batch was
        if cut > last_pos:
            assert f"{segment_name}" in caplog.text and f"at byte {last_pos}" in caplog.text
        got = entries(root)
        assert [(e.offset, e.record) for e in got[:-1]] == before
        assert "k2" not in log.image.configs[(4, "")]
        assert log.image.configs[(4, "")] == {"k0": "", "k1": "x"}
        shutil.rmtree(root)


def test_a_bad_crc_or_zero_fill_at_the_end_is_truncated(
    three_appends: tuple[Path, list[AppendResult]], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    base, results = three_appends
    last_base = results[-1].base_offset
    for damage in ("crc", "zeros"):
        root = tmp_path / damage
        shutil.copytree(base, root)
        segment = root / PDIR / "00000000000000000000.log"
        data = bytearray(segment.read_bytes())
        if damage == "crc":
            data[-3] ^= 0x40
        else:
            data += bytes(4096)
        segment.write_bytes(bytes(data))
        with (
            caplog.at_level(logging.WARNING, logger="bridge.raft.metadata_log"),
            MetadataLog.open(root, node_id=NODE) as log,
        ):
            # A corrupt last batch is dropped; zero fill after intact batches loses nothing.
            assert log.end_offset == (last_base + 1 if damage == "crc" else last_base + 2)
            assert log.recovery_warnings and str(segment) in log.recovery_warnings[0]
        assert str(segment) in caplog.text


def test_corruption_before_the_tail_is_an_error_naming_the_file(
    three_appends: tuple[Path, list[AppendResult]], tmp_path: Path
) -> None:
    base, _ = three_appends
    segment = base / PDIR / "00000000000000000000.log"
    positions = batch_positions(segment)
    middle_pos = positions[2][0]  # the first appended batch, followed by two more
    for where in (middle_pos + 70, middle_pos + 9):  # inside a record; inside the length field
        root = tmp_path / f"bad{where}"
        shutil.copytree(base, root)
        bad = root / PDIR / segment.name
        data = bytearray(bad.read_bytes())
        data[where] ^= 0x01
        bad.write_bytes(bytes(data))
        with pytest.raises(CorruptDataError) as info:
            MetadataLog.open(root, node_id=NODE)
        assert str(bad) in str(info.value) and f"at byte {middle_pos}" in str(info.value)
        assert bad.read_bytes() == bytes(data)  # nothing was truncated
        # The lock was released: the repaired dir opens again.
        bad.write_bytes(segment.read_bytes())
        MetadataLog.open(root, node_id=NODE).close()


def test_an_open_transaction_left_by_a_crash_is_aborted(tmp_path: Path) -> None:
    root = tmp_path / "meta"
    topic_id = uuid.UUID(int=77)
    with fresh(root) as log:
        log.append([(rec.BeginTransactionRecord(name="ZK Migration"), 0)]).durable.result()
        log.append([(rec.TopicRecord(name="t", topic_id=topic_id), 0), config("in-txn")]).durable.result()
        assert log.transaction_start_offset == 5
        assert "t" not in log.image.topics_by_name  # not applied until the End
        end = log.end_offset
    with MetadataLog.open(root, node_id=NODE) as log:
        assert log.transaction_start_offset is None
        assert "t" not in log.image.topics_by_name and (4, "") not in log.image.configs
        assert log.end_offset == end + 2
        # A new transaction works after the abort.
        log.append([(rec.BeginTransactionRecord(name="ZK Migration"), 0)])
        log.append([(rec.TopicRecord(name="t", topic_id=topic_id), 0)])
        log.append([(rec.EndTransactionRecord(), 0)]).durable.result()
        assert log.image.topics_by_name["t"].topic_id == topic_id
        image = log.image
    tail = [(e.offset, e.is_control, e.record) for e in entries(root) if end <= e.offset < end + 2]
    assert tail[0][:2] == (end, True) and isinstance(tail[0][2], rec.LeaderChangeMessage)
    assert tail[1] == (end + 1, False, rec.AbortTransactionRecord(reason=ABORT_REASON))
    assert load_image(root)[0] == image


def test_a_torn_bootstrap_batch_is_redone(tmp_path: Path) -> None:
    root = tmp_path / "meta"
    fresh(root).close()
    segment = root / PDIR / "00000000000000000000.log"
    os.truncate(segment, batch_positions(segment)[1][0] + 30)
    with MetadataLog.open(root, node_id=NODE) as log:
        assert log.image.features.zk_migration_state == 2 and log.metadata_version.name == "3.9-IV0"
    kinds = [(e.offset, e.leader_epoch, type(e.record).__name__) for e in entries(root)]
    assert kinds[:3] == [
        (0, 1, "LeaderChangeMessage"),
        (1, 2, "LeaderChangeMessage"),
        (2, 2, "BeginTransactionRecord"),
    ]


def test_a_partial_bootstrap_transaction_is_aborted_and_rewritten(tmp_path: Path) -> None:
    root = tmp_path / "meta"
    pdir = root / PDIR
    pdir.mkdir(parents=True)
    write_meta_properties(root / "meta.properties", MetaProperties(1, CLUSTER, NODE, uuid.uuid4()))
    write_partition_metadata(pdir / "partition.metadata")
    begin = [(rec.BeginTransactionRecord(name="Bootstrap records"), 0)]
    feature = [(rec.FeatureLevelRecord(name="metadata.version", feature_level=21), 0)]
    write_segment(
        pdir, 0, [encode_leader_change_batch(0, 1, 1, NODE), encode_data_batch(1, 1, 1, begin + feature)]
    )
    with MetadataLog.open(root, node_id=NODE) as log:
        assert log.image.features.zk_migration_state == 2 and log.transaction_start_offset is None
    names = [type(e.record).__name__ for e in entries(root) if e.offset >= 3]
    assert names == [
        "LeaderChangeMessage",
        "AbortTransactionRecord",
        "BeginTransactionRecord",
        "FeatureLevelRecord",
        "ZkMigrationStateRecord",
        "EndTransactionRecord",
    ]


# ---------------------------------------------------------------------------------------------- appends


def test_append_rejects_empty_and_non_metadata_records_and_works_until_closed(tmp_path: Path) -> None:
    log = fresh(tmp_path / "meta")
    with pytest.raises(InvalidRequestError):
        log.append([])
    with pytest.raises(Zk2KraftError):
        log.append([(rec.LeaderChangeMessage(), 0)])
    assert log.end_offset == 5  # nothing was assigned
    log.close()
    with pytest.raises(Zk2KraftError, match="closed"):
        log.append([config("late")])


def test_a_record_the_image_cannot_take_stops_the_log(tmp_path: Path) -> None:
    root = tmp_path / "meta"
    with fresh(root) as log:
        good = log.append([config("good")])
        with pytest.raises(CorruptDataError, match="EndTransactionRecord without"):
            log.append([(rec.EndTransactionRecord(), 0)])
        good.durable.result()
        with pytest.raises(Zk2KraftError, match="reopen"):
            log.append([config("after")])
    with MetadataLog.open(root, node_id=NODE) as log:
        assert log.image.configs[(4, "")] == {"good": "v"}


def test_fifty_threads_group_commit(tmp_path: Path) -> None:
    root = tmp_path / "meta"
    threads, per_thread = 50, 20
    with fresh(root) as log:
        start_offset, fsyncs_before, batches_before = log.end_offset, log.fsync_count, log.batches_written
        results: dict[str, AppendResult] = {}
        guard = threading.Lock()
        barrier = threading.Barrier(threads)

        def worker(t: int) -> None:
            barrier.wait()
            for i in range(per_thread):
                name = f"t{t}-{i}"
                result = log.append([config(name, str(i))])
                result.durable.result()
                assert log.durable_offset >= result.last_offset
                with guard:
                    results[name] = result

        pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
        appends = threads * per_thread
        assert len(results) == appends
        assert log.batches_written - batches_before == appends
        fsyncs = log.fsync_count - fsyncs_before
        assert 1 <= fsyncs <= appends // 4, f"{fsyncs} fsyncs for {appends} appends"
        assert log.durable_offset == start_offset + appends - 1
        image = log.image
    got = [e for e in entries(root) if start_offset <= e.offset < start_offset + appends]
    assert [e.offset for e in got] == list(range(start_offset, start_offset + appends))
    names = [e.record.name for e in got]
    assert sorted(names) == sorted(results)  # every record exactly once
    for name, result in results.items():
        assert got[result.base_offset - start_offset].record.name == name
    for t in range(threads):  # each thread's appends in its own order
        mine = [int(n.split("-")[1]) for n in names if n.startswith(f"t{t}-")]
        assert mine == list(range(per_thread))
    assert image.configs[(4, "")]["t7-19"] == "19"


def test_append_and_wait_from_many_coroutines(tmp_path: Path) -> None:
    root = tmp_path / "meta"
    with fresh(root) as log:

        async def main() -> list[AppendResult]:
            return await asyncio.gather(*(log.append_and_wait([config(f"c{i}")]) for i in range(100)))

        results = asyncio.run(main())
        assert all(r.durable.done() and r.durable.exception() is None for r in results)
        assert log.durable_offset >= max(r.last_offset for r in results)
        assert sorted(r.base_offset for r in results) == list(range(5, 105))


def test_segments_roll_with_kafkas_indexes(tmp_path: Path) -> None:
    root = tmp_path / "meta"
    segment_bytes = INDEX_INTERVAL_BYTES + 2000
    with fresh(root, segment_bytes=segment_bytes) as log:
        for i in range(60):
            log.append([config(f"r{i}", "y" * 200), config(f"s{i}", "z" * 100)], now_ms=100 + i)
        log.append([config("last")]).durable.result()
        image = log.image
        end = log.end_offset
    pdir = root / PDIR
    segments = list_segments(pdir)
    assert len(segments) >= 4
    for segment in segments:
        size = segment.path.stat().st_size
        assert 0 < size <= segment_bytes
        index = (
            segment.path.with_suffix(".index").read_bytes(),
            segment.path.with_suffix(".timeindex").read_bytes(),
        )
        assert index == expected_indexes(segment.path, segment.base_offset)
    assert any(segment.path.with_suffix(".index").stat().st_size for segment in segments)
    assert [e.offset for e in entries(root)] == list(range(end))
    assert load_image(root)[0] == image
    with MetadataLog.open(root, node_id=NODE, segment_bytes=segment_bytes) as log:
        assert without_provenance(log.image) == without_provenance(image)
        log.append([config("reopened")]).durable.result()
    assert list_segments(pdir)[: len(segments)] == segments


def test_without_fsync_appends_are_written_but_not_synced(tmp_path: Path) -> None:
    with fresh(tmp_path / "meta", fsync=False) as log:
        result = log.append([config("x")])
        result.durable.result()
        assert log.fsync_count == 0 and log.durable_offset == result.last_offset


# ---------------------------------------------------------------------------------------------- SIGKILL

CHILD = """
import sys, threading
from bridge.raft.metadata_log import MetadataLog
from migrate.kraft import records as rec

log = MetadataLog.open(sys.argv[1], node_id=3000, cluster_id="esQVtsr4Sh6LSPhdkKjbNw", segment_bytes=32768)
out = threading.Lock()

def work(t):
    i = 0
    while True:
        name = f"w{t}-{i}"
        r = log.append([(rec.ConfigRecord(resource_type=4, resource_name="", name=name, value="v" * (i % 50)), 0)])
        r.durable.result()
        with out:
            sys.stdout.write(f"{r.base_offset} {name}\\n")
            sys.stdout.flush()
        i += 1

for t in range(4):
    threading.Thread(target=work, args=(t,), daemon=True).start()
threading.Event().wait()
"""


def test_sigkill_loses_nothing_reported_durable(tmp_path: Path) -> None:
    root = tmp_path / "meta"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    acknowledged: dict[int, str] = {}
    for round_ in range(3):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(root)], stdout=subprocess.PIPE, env=env, cwd=REPO, text=True
        )
        assert child.stdout is not None
        try:
            for n, line in enumerate(child.stdout):
                offset, name = line.split()
                acknowledged[int(offset)] = name
                if n == 150:
                    # The directory is readable while the writer appends.
                    assert entries(root)
                if n >= 300 + 37 * round_:
                    break
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
            child.stdout.close()
        assert child.returncode == -signal.SIGKILL
    with MetadataLog.open(root, node_id=NODE) as log:
        found = {
            e.offset: e.record.name
            for e in entries(root)
            if not e.is_control and isinstance(e.record, rec.ConfigRecord)
        }
        for acked_offset, acked_name in acknowledged.items():
            assert found.get(acked_offset) == acked_name
        assert set(acknowledged.values()) <= set(log.image.configs[(4, "")])
        assert log.leader_epoch == 4


# ---------------------------------------------------------------------------------------------- property

names = st.sampled_from(["a", "b", "c", "retention.ms", "ü"])
config_records = st.builds(
    lambda kind, resource, name, value: (
        rec.ConfigRecord(resource_type=kind, resource_name=resource, name=name, value=value),
        0,
    ),
    st.sampled_from([2, 4]),
    st.sampled_from(["", "topic-1", "1"]),
    names,
    st.none() | st.text(max_size=20),
)
quota_records = st.builds(
    lambda user, value, remove: (
        rec.ClientQuotaRecord(
            entity=[rec.ClientQuotaRecord.EntityData(entity_type="user", entity_name=user)],
            key="producer_byte_rate",
            value=value,
            remove=remove,
        ),
        0,
    ),
    st.none() | st.sampled_from(["alice", "bob"]),
    st.floats(0, 1e9),
    st.booleans(),
)
plain_appends = st.lists(
    st.one_of(config_records, quota_records, st.just((rec.NoOpRecord(), 0))), min_size=1, max_size=5
)


@st.composite
def append_sequences(draw: st.DrawFn) -> list[list[tuple[Any, int]]]:
    out: list[list[tuple[Any, int]]] = []
    for _ in range(draw(st.integers(1, 8))):
        batch: list[tuple[Any, int]] = list(draw(plain_appends))
        if draw(st.integers(0, 4)) == 0:  # a whole transaction in one append, committed or aborted
            closing = rec.EndTransactionRecord() if draw(st.booleans()) else rec.AbortTransactionRecord()
            batch = [(rec.BeginTransactionRecord(name="txn"), 0), *batch, (closing, 0)]
        out.append(batch)
    return out


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(append_sequences(), st.integers(200, 4000))
def test_any_sequence_of_appends_round_trips_through_reopen(
    appends: list[list[tuple[Any, int]]], segment_bytes: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "meta"
        with fresh(root, fsync=False, segment_bytes=segment_bytes) as log:
            results = [log.append(batch, now_ms=1000 + i) for i, batch in enumerate(appends)]
            image = without_provenance(log.image)
        results[-1].durable.result()
        by_offset = {e.offset: (e.record, e.version, e.timestamp_ms) for e in entries(root)}
        for i, (batch, result) in enumerate(zip(appends, results, strict=True)):
            assert result.last_offset - result.base_offset + 1 == len(batch)
            for j, (record, version) in enumerate(batch):
                assert by_offset[result.base_offset + j] == (record, version, 1000 + i)
        with MetadataLog.open(root, node_id=NODE, fsync=False, segment_bytes=segment_bytes) as log:
            assert without_provenance(log.image) == image
            assert log.end_offset == results[-1].last_offset + 2
