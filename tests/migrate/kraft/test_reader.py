"""Reading segments, snapshots and whole metadata directories; load_image on the real Kafka 3.7 fixture."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from migrate.errors import CorruptDataError, Zk2KraftError
from migrate.kraft import metadata_version as mvs
from migrate.kraft import records as r
from migrate.kraft.batch import encode_kraft_batch, iter_batches
from migrate.kraft.framing import encode_control_record, encode_metadata_record
from migrate.kraft.image import MetadataImage
from migrate.kraft.reader import (
    LogEntry,
    ReadReport,
    iter_file,
    iter_log_dir,
    iter_segment,
    iter_snapshot,
    load_image,
    read_bootstrap_records,
)
from migrate.kraft.snapshot import write_snapshot
from tests.support import FIXTURES

FIXTURE = FIXTURES / "kraft-real-3.7"
SEGMENT = FIXTURE / "__cluster_metadata-0" / "00000000000000000000.log"


@pytest.fixture(scope="module")
def loaded() -> tuple[MetadataImage, Any]:
    return load_image(FIXTURE)


@pytest.fixture
def log_copy(tmp_path: Path) -> Path:
    """A writable copy of the fixture's metadata log directory."""
    target = tmp_path / "meta"
    shutil.copytree(FIXTURE, target)
    return target / "__cluster_metadata-0"


# ------------------------------------------------------------------------------ real fixture


def test_fixture_image(loaded: tuple[MetadataImage, Any]) -> None:
    image, report = loaded
    assert len(image.topics_by_id) == 5 == len(image.topics_by_name)
    assert image.partition_count() == 54
    assert image.metadata_version is mvs.IBP_3_7_IV4 and image.features.metadata_version == 19
    assert image.features.zk_migration_state == 0  # NONE
    assert image.features.finalized_versions == {}
    # The log registers broker 1 twice (epochs 6 and 8): one broker, one controller.
    assert list(image.cluster.brokers) == [1]
    assert list(image.cluster.controllers) == [1]
    broker = image.cluster.brokers[1]
    assert broker.epoch == 8
    assert broker.fenced and broker.in_controlled_shutdown  # the log ends with a controlled shutdown
    assert sum(len(v) for v in image.configs.values()) == 3
    assert image.configs == {
        (2, "__consumer_offsets"): {
            "compression.type": "producer",
            "cleanup.policy": "compact",
            "segment.bytes": "104857600",
        }
    }
    assert image.next_producer_id == 1000
    assert set(image.topics_by_name) == {
        "__consumer_offsets",
        "batch2.work.notification.SHR_PROD.persistence",
        "subscription.matching.SHR_PROD.persistence",
        "TestTopicPatient",
        "Retry.TestTopicPatient",
    }
    assert image.provenance.last_contained_offset == 4928
    assert image.provenance.last_contained_epoch == 1
    assert report.snapshot is None and report.torn_tail is None
    assert report.pending_transaction_offset is None
    assert (report.first_log_offset, report.last_log_offset) == (0, 4928)
    assert report.segments == [SEGMENT]


def test_fixture_partitions_carry_implicit_epoch_bumps(loaded: tuple[MetadataImage, Any]) -> None:
    image, _ = loaded
    # 54 PartitionRecords (epochs 0) and 54 PartitionChangeRecords moving leadership off the fenced broker.
    for topic in image.topics_by_id.values():
        for p in topic.partitions.values():
            assert (p.leader, p.leader_epoch, p.partition_epoch, p.isr) == (-1, 1, 1, [1])


def test_fixture_segment_entries(tmp_path: Path) -> None:
    report = ReadReport()
    entries = list(iter_segment(SEGMENT, report=report))
    assert [e.offset for e in entries] == list(range(4929))
    first = entries[0]
    assert first.is_control and isinstance(first.record, r.LeaderChangeMessage)
    assert (first.leader_epoch, first.batch_position) == (1, 0)
    assert (
        isinstance(entries[1].record, r.BeginTransactionRecord)
        and entries[1].record.name == "Bootstrap records"
    )
    assert isinstance(entries[2].record, r.FeatureLevelRecord) and entries[2].version == 0
    assert report.files[0].valid_bytes == SEGMENT.stat().st_size and report.torn_tail is None
    assert list(iter_file(SEGMENT))[:3] == entries[:3]


def test_bootstrap_checkpoint_entries() -> None:
    entries = list(iter_file(FIXTURE / "bootstrap.checkpoint"))
    assert [type(e.record).__name__ for e in entries] == [
        "SnapshotHeaderRecord",
        "FeatureLevelRecord",
        "SnapshotFooterRecord",
    ]
    assert [e.offset for e in entries] == [0, 1, 2]
    assert read_bootstrap_records(FIXTURE) == [(entries[1].record, 0)]


# ------------------------------------------------------------------------------ torn tails, segments


def test_torn_tail_tolerated_only_on_newest_segment(log_copy: Path) -> None:
    segment = log_copy / SEGMENT.name
    data = segment.read_bytes()
    segment.write_bytes(data[:-10])
    _image, report = load_image(log_copy.parent)
    assert report.torn_tail is not None
    path, tail = report.torn_tail
    assert path == segment and tail.size == len(data) - 10 - tail.position
    assert report.last_log_offset is not None and report.last_log_offset < 4928
    assert any("truncated" in line for line in report.describe())
    with pytest.raises(CorruptDataError, match="ends mid-batch"):
        list(iter_segment(segment, newest=False))


def split_segment(log_dir: Path, at_offset: int) -> int:
    """Split the fixture segment at the batch holding `at_offset`; returns the new segment's base offset."""
    segment = log_dir / SEGMENT.name
    data = segment.read_bytes()
    for pos, batch in iter_batches(data, "split"):
        if batch.base_offset <= at_offset <= batch.last_offset:
            segment.write_bytes(data[:pos])
            (log_dir / f"{batch.base_offset:020d}.log").write_bytes(data[pos:])
            return batch.base_offset
    raise AssertionError("offset not found")


def test_several_segments_read_in_offset_order(log_copy: Path, loaded: tuple[MetadataImage, Any]) -> None:
    base = split_segment(log_copy, 2500)
    image, report = load_image(log_copy)
    assert image == loaded[0]
    assert [p.name for p in report.segments] == [SEGMENT.name, f"{base:020d}.log"]
    offsets = [e.offset for e in iter_log_dir(log_copy, start_offset=base + 1)]
    assert offsets == list(range(base + 1, 4929))
    assert [e.offset for e in iter_log_dir(log_copy, stop_offset=3)] == [0, 1, 2]


def test_torn_tail_in_older_segment_is_corrupt(log_copy: Path) -> None:
    split_segment(log_copy, 2500)
    older = log_copy / SEGMENT.name
    older.write_bytes(older.read_bytes()[:-5])
    with pytest.raises(CorruptDataError, match="ends mid-batch"):
        load_image(log_copy)


def test_missing_log_start_is_detected(log_copy: Path) -> None:
    split_segment(log_copy, 2500)
    (log_copy / SEGMENT.name).unlink()
    with pytest.raises(CorruptDataError, match="missing"):
        load_image(log_copy)


# ------------------------------------------------------------------------------ up_to_offset, snapshots


def test_up_to_offset_inside_the_bootstrap_transaction(log_copy: Path) -> None:
    image, report = load_image(log_copy, up_to_offset=4)  # offsets 0..3: Begin, MV, ZK state; End at 4
    assert report.pending_transaction_offset == 1 and report.pending_transaction_records == 2
    assert image.features.metadata_version == mvs.MINIMUM_KRAFT_VERSION.feature_level
    assert image.provenance.last_contained_offset == 0  # the LeaderChangeMessage before the transaction
    assert any("incomplete metadata transaction begun at offset 1" in line for line in report.describe())
    image, report = load_image(log_copy, up_to_offset=5)
    assert report.pending_transaction_offset is None
    assert image.features.metadata_version == 19 and image.provenance.last_contained_offset == 4


def test_load_starts_from_newest_usable_snapshot(log_copy: Path, loaded: tuple[MetadataImage, Any]) -> None:
    early, _ = load_image(log_copy, up_to_offset=500)
    later, _ = load_image(log_copy, up_to_offset=2300)
    write_snapshot(log_copy, early, timestamp_ms=1)
    written = write_snapshot(log_copy, later, timestamp_ms=1)
    assert written.path.name == "00000000000000002300-0000000001.checkpoint"

    image, report = load_image(log_copy)
    assert report.snapshot == written.path and report.snapshot_records > 0
    assert report.first_log_offset == 2300
    assert image == loaded[0]

    image, report = load_image(log_copy, up_to_offset=2299)
    assert report.snapshot is not None and report.snapshot.name.startswith("00000000000000000500-")
    assert image == load_image(FIXTURE, up_to_offset=2299)[0]

    # Once the log is truncated to the snapshot, only targets at or after the snapshot can be loaded.
    base = split_segment(log_copy, 2300)
    (log_copy / SEGMENT.name).unlink()
    assert 500 < base <= 2300
    assert load_image(log_copy)[0] == loaded[0]
    (log_copy / "00000000000000000500-0000000001.checkpoint").unlink()
    with pytest.raises(CorruptDataError, match="missing"):
        load_image(log_copy, up_to_offset=2299)
    (log_copy / written.path.name).unlink()
    with pytest.raises(CorruptDataError, match=f"offsets 0..{base - 1} are missing"):
        load_image(log_copy)


# ------------------------------------------------------------------------------ snapshot format checks


def control(*records: Any) -> list[tuple[bytes | None, bytes]]:
    return [encode_control_record(x) for x in records]


def data(*records: Any) -> list[tuple[bytes | None, bytes]]:
    return [(None, encode_metadata_record(x, 0)) for x in records]


HEADER = r.SnapshotHeaderRecord(last_contained_log_timestamp=5)
FOOTER = r.SnapshotFooterRecord()
FEATURE = r.FeatureLevelRecord(name="metadata.version", feature_level=21)


def snapshot_file(tmp_path: Path, *batches: tuple[bool, list[tuple[bytes | None, bytes]]]) -> Path:
    out = b""
    offset = 0
    for is_control, items in batches:
        out += encode_kraft_batch(offset, 3, 7, items, is_control)
        offset += len(items)
    path = tmp_path / "00000000000000000010-0000000003.checkpoint"
    path.write_bytes(out)
    return path


def test_well_formed_snapshot_reads(tmp_path: Path) -> None:
    path = snapshot_file(tmp_path, (True, control(HEADER)), (False, data(FEATURE)), (True, control(FOOTER)))
    entries = list(iter_snapshot(path))
    assert [type(e.record).__name__ for e in entries] == [
        "SnapshotHeaderRecord",
        "FeatureLevelRecord",
        "SnapshotFooterRecord",
    ]
    assert all(isinstance(e, LogEntry) and e.leader_epoch == 3 for e in entries)


@pytest.mark.parametrize(
    ("batches", "problem"),
    [
        ([(False, data(FEATURE)), (True, control(FOOTER))], "first batch is not a control batch"),
        ([(True, control(FOOTER))], "not a snapshot header"),
        ([(True, control(HEADER)), (False, data(FEATURE))], "does not end with a SnapshotFooterRecord"),
        (
            [(True, control(HEADER)), (True, control(FOOTER)), (False, data(FEATURE))],
            "after the snapshot footer",
        ),
        ([(True, control(HEADER, HEADER)), (True, control(FOOTER))], "second snapshot header"),
        (
            [
                (True, control(HEADER)),
                (False, data(r.BeginTransactionRecord(name="x"))),
                (True, control(FOOTER)),
            ],
            "never contain transaction records",
        ),
        ([], "holds no batches"),
    ],
)
def test_malformed_snapshots_are_corrupt(tmp_path: Path, batches: list[Any], problem: str) -> None:
    path = snapshot_file(tmp_path, *batches)
    with pytest.raises(CorruptDataError, match=problem):
        list(iter_snapshot(path))


def test_torn_snapshot_is_corrupt(tmp_path: Path) -> None:
    path = snapshot_file(tmp_path, (True, control(HEADER)), (False, data(FEATURE)), (True, control(FOOTER)))
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(CorruptDataError, match="ends mid-batch"):
        list(iter_snapshot(path))


def test_data_record_with_key_is_corrupt(tmp_path: Path) -> None:
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(encode_kraft_batch(0, 1, 1, [(b"k", encode_metadata_record(FEATURE, 0))], False))
    with pytest.raises(CorruptDataError, match="has a key"):
        list(iter_segment(segment))


def test_bad_record_inside_a_segment_names_file_and_offset(tmp_path: Path) -> None:
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(
        encode_kraft_batch(40, 1, 1, [(None, b"\x01\x06\x00\x00")], False)
    )  # apiKey 6 is unused
    with pytest.raises(CorruptDataError) as info:
        list(iter_segment(segment))
    assert str(segment) in str(info.value) and "offset 40" in str(info.value)


def test_batches_going_backwards_are_corrupt(tmp_path: Path) -> None:
    segment = tmp_path / "00000000000000000000.log"
    batch = encode_kraft_batch(5, 1, 1, data(FEATURE), False)
    segment.write_bytes(batch + batch)
    with pytest.raises(CorruptDataError, match="goes back"):
        list(iter_segment(segment))


def test_replay_error_names_the_log_offset(tmp_path: Path) -> None:
    log_dir = tmp_path / "__cluster_metadata-0"
    log_dir.mkdir()
    orphan = r.PartitionRecord(partition_id=0, topic_id=uuid.UUID(int=1234), replicas=[1], isr=[1])
    (log_dir / "00000000000000000000.log").write_bytes(
        encode_kraft_batch(0, 1, 1, data(FEATURE), False) + encode_kraft_batch(1, 1, 1, data(orphan), False)
    )
    with pytest.raises(CorruptDataError, match=r"offset 1\b.*unknown topic id"):
        load_image(tmp_path)


def test_not_a_directory_is_reported(tmp_path: Path) -> None:
    with pytest.raises(Zk2KraftError, match="not a directory"):
        load_image(tmp_path / "nope")


# ------------------------------------------------------------------------------ arbitrary bytes


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300), st.booleans())
def test_arbitrary_bytes_raise_only_our_errors(blob: bytes, as_snapshot: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        name = "00000000000000000001-0000000001.checkpoint" if as_snapshot else "00000000000000000000.log"
        path = Path(tmp) / name
        path.write_bytes(blob)
        with contextlib.suppress(Zk2KraftError):
            list(iter_file(path))


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_corrupted_fixture_bytes_raise_only_our_errors(draw: st.DataObject) -> None:
    raw = bytearray((FIXTURE / "bootstrap.checkpoint").read_bytes())
    for _ in range(draw.draw(st.integers(1, 4))):
        raw[draw.draw(st.integers(0, len(raw) - 1))] = draw.draw(st.integers(0, 255))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bootstrap.checkpoint"
        path.write_bytes(bytes(raw))
        with contextlib.suppress(Zk2KraftError):
            list(iter_snapshot(path))
