"""Snapshot and bootstrap.checkpoint writing: Kafka's layout, batching, atomicity, and image round trips."""

from __future__ import annotations

import itertools
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from migrate.errors import InvalidRequestError, UnsupportedVersionError, Zk2KraftError
from migrate.kraft import records as r
from migrate.kraft.batch import iter_batches
from migrate.kraft.framing import decode_control_record, decode_metadata_record
from migrate.kraft.image import MetadataImage, Provenance
from migrate.kraft.reader import iter_snapshot, load_image, read_bootstrap_records, read_snapshot_image
from migrate.kraft.replay import replay_records
from migrate.kraft.snapshot import (
    MAX_BATCH_SIZE_BYTES,
    write_bootstrap_checkpoint,
    write_snapshot,
)
from tests.support import FIXTURES

FIXTURE = FIXTURES / "kraft-real-3.7"


@pytest.fixture(scope="module")
def fixture_image() -> MetadataImage:
    return load_image(FIXTURE)[0]


def batches_of(path: Path) -> list[Any]:
    return [batch for _, batch in iter_batches(path.read_bytes(), str(path))]


def test_bootstrap_checkpoint_is_byte_identical_to_kafkas(tmp_path: Path) -> None:
    records = read_bootstrap_records(FIXTURE)
    clock = iter([1769791430952, 1769791430996, 1769791430997])  # the fixture's three batch timestamps
    written = write_bootstrap_checkpoint(tmp_path, records, timestamp_ms=lambda: next(clock))
    assert written.path == tmp_path / "bootstrap.checkpoint"
    assert written.path.read_bytes() == (FIXTURE / "bootstrap.checkpoint").read_bytes()
    assert written.size_bytes == 249 and written.record_count == 1


def test_bootstrap_checkpoint_records_are_appended_one_by_one(tmp_path: Path) -> None:
    records: list[tuple[Any, int]] = [(r.FeatureLevelRecord(name="metadata.version", feature_level=21), 0)]
    records += [
        (r.UserScramCredentialRecord(name=f"user{i}", mechanism=1, iterations=4096), 0) for i in range(3000)
    ]
    written = write_bootstrap_checkpoint(tmp_path, records, timestamp_ms=5)
    batches = batches_of(written.path)
    assert [len(b.records) for b in batches] == [1, 3001, 1]
    assert read_bootstrap_records(tmp_path) == records


def test_fixture_snapshot_layout(tmp_path: Path, fixture_image: MetadataImage) -> None:
    written = write_snapshot(tmp_path, fixture_image, timestamp_ms=1_700_000_000_000)
    assert written.path.name == "00000000000000004929-0000000001.checkpoint"
    assert list(tmp_path.iterdir()) == [written.path]  # no .part file left behind

    batches = batches_of(written.path)
    header, *data, footer = batches
    assert all(b.partition_leader_epoch == 1 for b in batches)
    expected_base = 0
    for b in batches:
        assert b.base_offset == expected_base
        assert b.base_timestamp == b.max_timestamp == 1_700_000_000_000
        assert (b.producer_id, b.producer_epoch, b.base_sequence) == (-1, -1, -1)
        assert b.attributes & 0x07 == 0  # uncompressed
        expected_base += len(b.records)

    assert header.is_control and len(header.records) == 1
    head, _ = decode_control_record(header.records[0].key, header.records[0].value)
    assert isinstance(head, r.SnapshotHeaderRecord)
    assert head.last_contained_log_timestamp == fixture_image.provenance.last_contained_log_time_ms
    assert footer.is_control and len(footer.records) == 1
    foot, _ = decode_control_record(footer.records[0].key, footer.records[0].value)
    assert isinstance(foot, r.SnapshotFooterRecord)
    assert data and not any(b.is_control for b in data)

    decoded = [decode_metadata_record(rec.value) for b in data for rec in b.records]
    assert all(rec.key is None for b in data for rec in b.records)
    assert decoded == fixture_image.records()
    assert written.record_count == len(decoded) == 67


def test_fixture_snapshot_reads_back_to_the_same_image(tmp_path: Path, fixture_image: MetadataImage) -> None:
    written = write_snapshot(tmp_path, fixture_image)
    assert read_snapshot_image(written.path) == fixture_image


def big_image(partitions: int) -> MetadataImage:
    topic_id = uuid.UUID(int=0x1234_5678_9ABC_DEF0_1234_5678_9ABC_DEF0)
    records: list[tuple[Any, int]] = [
        (r.FeatureLevelRecord(name="metadata.version", feature_level=21), 0),
        (r.TopicRecord(name="big", topic_id=topic_id), 0),
    ]
    records += [
        (r.PartitionRecord(partition_id=i, topic_id=topic_id, replicas=[1, 2, 3], isr=[1, 2, 3], leader=1), 0)
        for i in range(partitions)
    ]
    image = replay_records(records)
    image.provenance = Provenance(99, 3, 1234)
    return image


def partition_records(count: int) -> list[tuple[Any, int]]:
    topic_id = uuid.UUID(int=99)
    return [
        (r.PartitionRecord(partition_id=i, topic_id=topic_id, replicas=[1, 2, 3], isr=[1, 2, 3], leader=1), 0)
        for i in range(count)
    ]


def test_data_batches_hold_whole_1024_record_appends_up_to_the_size_limit(tmp_path: Path) -> None:
    # Equal-sized records; the limit is the size of a batch of exactly two appends (2048 records).
    two = write_snapshot(tmp_path / "a", partition_records(2048), end_offset=1, epoch=1, timestamp_ms=1)
    raw = two.path.read_bytes()
    positions = [pos for pos, _ in iter_batches(raw, "snapshot")]
    limit = positions[2] - positions[1]
    records = partition_records(5000)

    written = write_snapshot(tmp_path / "b", records, end_offset=1, epoch=1, max_batch_bytes=limit)
    assert [len(b.records) for b in batches_of(written.path)] == [1, 2048, 2048, 904, 1]
    assert written.data_batches == 3 and written.record_count == 5000

    smaller = write_snapshot(tmp_path / "c", records, end_offset=1, epoch=1, max_batch_bytes=limit - 1)
    assert [len(b.records) for b in batches_of(smaller.path)] == [1, 1024, 1024, 1024, 1928, 1]
    raw = smaller.path.read_bytes()
    bounds = [pos for pos, _ in iter_batches(raw, "snapshot")] + [len(raw)]
    assert all(b - a <= limit - 1 for a, b in itertools.pairwise(bounds))
    assert [(e.record, e.version) for e in iter_snapshot(smaller.path) if not e.is_control] == records


def test_image_snapshot_with_several_data_batches_reads_back(tmp_path: Path) -> None:
    image = big_image(5000)
    written = write_snapshot(tmp_path, image, max_batch_bytes=256 * 1024, timestamp_ms=1)
    assert written.data_batches > 2
    assert read_snapshot_image(written.path) == image


def test_default_batch_limit_is_kafkas_8_mib(tmp_path: Path) -> None:
    assert MAX_BATCH_SIZE_BYTES == 8 * 1024 * 1024
    written = write_snapshot(tmp_path, big_image(3000), timestamp_ms=1)
    assert [len(b.records) for b in batches_of(written.path)] == [1, 3003, 1]


def test_batch_limit_too_small_for_one_append_is_refused(tmp_path: Path) -> None:
    with pytest.raises(Zk2KraftError, match="maximum batch size"):
        write_snapshot(tmp_path, big_image(2000), max_batch_bytes=4096)
    assert list(tmp_path.iterdir()) == []


def test_kraft_version_1_header_batch_has_version_and_voters(tmp_path: Path) -> None:
    voters = r.VotersRecord(
        version=0,
        voters=[r.VotersRecord.Voter(voter_id=1, voter_directory_id=uuid.UUID(int=77))],
    )
    records = [(r.FeatureLevelRecord(name="metadata.version", feature_level=21), 0)]
    written = write_snapshot(tmp_path, records, end_offset=0, epoch=0, kraft_version=1, voters=voters)
    assert written.path.name == "00000000000000000000-0000000000.checkpoint"
    header = [e.record for e in iter_snapshot(written.path) if e.is_control][:3]
    assert [type(x).__name__ for x in header] == [
        "SnapshotHeaderRecord",
        "KRaftVersionRecord",
        "VotersRecord",
    ]
    assert header[1].kraft_version == 1 and header[2] == voters
    assert len(batches_of(written.path)[0].records) == 3


def test_invalid_requests_are_refused(tmp_path: Path) -> None:
    feature = (r.FeatureLevelRecord(name="metadata.version", feature_level=21), 0)
    with pytest.raises(InvalidRequestError, match="voter set"):
        write_snapshot(tmp_path, [feature], end_offset=1, epoch=1, voters=r.VotersRecord())
    with pytest.raises(InvalidRequestError, match="end_offset and epoch"):
        write_snapshot(tmp_path, [feature])
    with pytest.raises(InvalidRequestError, match="transaction records"):
        write_snapshot(tmp_path, [feature, (r.BeginTransactionRecord(name="x"), 0)], end_offset=1, epoch=1)
    with pytest.raises(InvalidRequestError, match="not a metadata record"):
        write_snapshot(tmp_path, [(r.SnapshotFooterRecord(), 0)], end_offset=1, epoch=1)
    assert list(tmp_path.iterdir()) == []


def test_existing_snapshot_is_not_overwritten_unless_asked(tmp_path: Path) -> None:
    feature = [(r.FeatureLevelRecord(name="metadata.version", feature_level=21), 0)]
    first = write_snapshot(tmp_path, feature, end_offset=10, epoch=2, timestamp_ms=1)
    before = first.path.read_bytes()
    with pytest.raises(InvalidRequestError, match="already exists"):
        write_snapshot(tmp_path, feature, end_offset=10, epoch=2, timestamp_ms=2)
    assert first.path.read_bytes() == before
    write_snapshot(tmp_path, feature, end_offset=10, epoch=2, timestamp_ms=2, overwrite=True)
    assert first.path.read_bytes() != before


def test_failed_write_leaves_no_partial_file(tmp_path: Path) -> None:
    bad = r.TopicRecord(name="x" * 40000, topic_id=uuid.UUID(int=5))  # longer than a Kafka string allows
    with pytest.raises(Zk2KraftError):
        write_snapshot(tmp_path, [(bad, 0)], end_offset=3, epoch=1)
    assert list(tmp_path.iterdir()) == []


def test_snapshot_at_lower_metadata_version(tmp_path: Path, fixture_image: MetadataImage) -> None:
    # The fixture broker has an online log dir, which 3.6-IV2 cannot carry: Kafka refuses such a snapshot.
    with pytest.raises(UnsupportedVersionError, match="log directories"):
        write_snapshot(tmp_path, fixture_image, metadata_version="3.6-IV2")
    assert list(tmp_path.iterdir()) == []
    image = big_image(3)
    written = write_snapshot(tmp_path, image, metadata_version="3.6-IV2")
    versions = {type(e.record).__name__: e.version for e in iter_snapshot(written.path) if not e.is_control}
    assert versions == {
        "FeatureLevelRecord": 0,
        "ZkMigrationStateRecord": 0,
        "TopicRecord": 0,
        "PartitionRecord": 0,
    }
    first = next(e.record for e in iter_snapshot(written.path) if not e.is_control)
    assert first.feature_level == 14


# ------------------------------------------------------------------------------ hypothesis round trip

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789._-", min_size=1, max_size=12)
uuids = st.integers(min_value=100, max_value=(1 << 128) - 1).map(lambda n: uuid.UUID(int=n))
broker_ids = st.lists(st.integers(0, 20), min_size=1, max_size=4)


@st.composite
def image_records(draw: st.DrawFn) -> list[tuple[Any, int]]:
    out: list[tuple[Any, int]] = [(r.FeatureLevelRecord(name="metadata.version", feature_level=21), 0)]
    for name, level in draw(st.dictionaries(names, st.integers(1, 5), max_size=2)).items():
        out.append((r.FeatureLevelRecord(name=name, feature_level=level), 0))
    out.append((r.ZkMigrationStateRecord(zk_migration_state=draw(st.integers(0, 3))), 0))
    for bid in draw(st.sets(st.integers(0, 10), max_size=3)):
        endpoint = r.RegisterBrokerRecord.BrokerEndpoint(
            name="PLAINTEXT", host=draw(names), port=draw(st.integers(1, 65535))
        )
        out.append(
            (
                r.RegisterBrokerRecord(
                    broker_id=bid,
                    broker_epoch=draw(st.integers(0, 1 << 40)),
                    incarnation_id=draw(uuids),
                    end_points=[endpoint],
                    rack=draw(st.none() | names),
                    fenced=draw(st.booleans()),
                    in_controlled_shutdown=draw(st.booleans()),
                    log_dirs=draw(st.lists(uuids, max_size=2)),
                ),
                3,
            )
        )
    topic_names = draw(st.sets(names, max_size=4))
    for tname in sorted(topic_names):
        tid = draw(uuids)
        out.append((r.TopicRecord(name=tname, topic_id=tid), 0))
        for pid in range(draw(st.integers(0, 4))):
            replicas = draw(broker_ids)
            out.append(
                (
                    r.PartitionRecord(
                        partition_id=pid,
                        topic_id=tid,
                        replicas=replicas,
                        isr=draw(st.lists(st.sampled_from(replicas), max_size=3)),
                        leader=draw(st.sampled_from([-1, *replicas])),
                        leader_recovery_state=draw(st.integers(0, 1)),
                        leader_epoch=draw(st.integers(0, 1000)),
                        partition_epoch=draw(st.integers(0, 1000)),
                        directories=draw(st.lists(uuids, min_size=len(replicas), max_size=len(replicas))),
                    ),
                    1,
                )
            )
        for key, value in draw(st.dictionaries(names, names, max_size=2)).items():
            out.append((r.ConfigRecord(resource_type=2, resource_name=tname, name=key, value=value), 0))
    for key, value in draw(st.dictionaries(names, names, max_size=2)).items():
        out.append((r.ConfigRecord(resource_type=4, resource_name="", name=key, value=value), 0))
    for user, quota_key, rate in draw(
        st.lists(st.tuples(st.none() | names, names, st.floats(0, 1e9)), max_size=3)
    ):
        entity = [r.ClientQuotaRecord.EntityData(entity_type="user", entity_name=user)]
        out.append((r.ClientQuotaRecord(entity=entity, key=quota_key, value=rate), 0))
    if draw(st.booleans()):
        out.append((r.ProducerIdsRecord(broker_id=1, next_producer_id=draw(st.integers(0, 1 << 50))), 0))
    for acl_id in draw(st.sets(uuids, max_size=2)):
        out.append(
            (
                r.AccessControlEntryRecord(
                    id=acl_id, resource_name=draw(names), principal="User:" + draw(names)
                ),
                0,
            )
        )
    for user, mech in draw(st.sets(st.tuples(names, st.integers(1, 2)), max_size=2)):
        out.append(
            (
                r.UserScramCredentialRecord(
                    name=user, mechanism=mech, salt=draw(st.binary(max_size=8)), iterations=4096
                ),
                0,
            )
        )
    for token in draw(st.sets(names, max_size=2)):
        out.append(
            (
                r.DelegationTokenRecord(
                    token_id=token, owner="User:o", requester="User:o", renewers=["User:r"]
                ),
                0,
            )
        )
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(image_records(), st.integers(1, 1 << 40), st.integers(0, 1000), st.integers(0, 1 << 41))
def test_image_snapshot_read_round_trip(
    records: list[tuple[Any, int]], end: int, epoch: int, ts: int
) -> None:
    image = replay_records(records)
    image.provenance = Provenance(end - 1, epoch, ts)
    assert replay_records(image.records()).topics_by_id == image.topics_by_id
    with _tmpdir() as tmp:
        written = write_snapshot(tmp, image, timestamp_ms=ts)
        assert written.snapshot_id.end_offset == end and written.snapshot_id.epoch == epoch
        assert read_snapshot_image(written.path) == image


class _tmpdir:
    """A temporary directory per hypothesis example (function-scoped fixtures are shared across examples)."""

    def __enter__(self) -> Path:
        self.path = Path(tempfile.mkdtemp(prefix="zk2kraft-snap-"))
        return self.path

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
