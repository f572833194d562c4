"""Framing of metadata record values (frame version, apiKey, version) and control record key/value pairs."""

from __future__ import annotations

import contextlib
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from migrate.errors import CorruptDataError, Zk2KraftError
from migrate.kraft.batch import iter_batches
from migrate.kraft.framing import (
    decode_control_record,
    decode_metadata_record,
    encode_control_record,
    encode_metadata_record,
)
from migrate.kraft.records import (
    CONTROL_RECORD_CLASSES,
    METADATA_RECORD_CLASSES,
    BeginTransactionRecord,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    InvalidValueError,
    LeaderChangeMessage,
    NoOpRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    TopicRecord,
    ZkMigrationStateRecord,
)
from tests.support import FIXTURES
from tests.support.strategies import struct_strategy

FIXTURES = FIXTURES / "kraft-real-3.7"
TOPIC_ID = uuid.UUID("6d660bbe-4352-41e5-9d2a-186bde7d2f37")

METADATA_VERSIONS: list[tuple[type[Any], int]] = [
    (cls, v) for cls in METADATA_RECORD_CLASSES for v in range(cls.LOWEST_VERSION, cls.HIGHEST_VERSION + 1)
]


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


# ------------------------------------------------------------------ worked values (kraft-metadata.md b)

WORKED_VALUES: list[tuple[str, Any, str]] = [
    (
        "FeatureLevelRecord (fixture)",
        FeatureLevelRecord(name="metadata.version", feature_level=19),
        "01 0c 00 11 6d65746164617461 2e76657273696f6e 0013 00",
    ),
    ("ZkMigrationStateRecord NONE (fixture)", ZkMigrationStateRecord(zk_migration_state=0), "01 15 00 00 00"),
    ("ZkMigrationStateRecord MIGRATION", ZkMigrationStateRecord(zk_migration_state=1), "01 15 00 01 00"),
    (
        "BeginTransactionRecord (fixture)",
        BeginTransactionRecord(name="Bootstrap records"),
        "01 17 00 01 00 12 12 426f6f747374726170207265636f726473",
    ),
    (
        "BeginTransactionRecord ZK Migration",
        BeginTransactionRecord(name="ZK Migration"),
        "01 17 00 01 00 0d 0d 5a4b204d6967726174696f6e",
    ),
    ("EndTransactionRecord (fixture)", EndTransactionRecord(), "01 18 00 00"),
    ("NoOpRecord (fixture)", NoOpRecord(), "01 14 00 00"),
    (
        "TopicRecord",
        TopicRecord(name="current_stock", topic_id=TOPIC_ID),
        "01 02 00 0e 63757272656e745f73746f636b 6d660bbe435241e59d2a186bde7d2f37 00",
    ),
    (
        "PartitionRecord",
        PartitionRecord(
            partition_id=0,
            topic_id=TOPIC_ID,
            replicas=[2, 1],
            isr=[1, 2],
            leader=1,
            leader_epoch=2,
            partition_epoch=3,
        ),
        "01 03 00 00000000 6d660bbe435241e59d2a186bde7d2f37 03 00000002 00000001 03 00000001 00000002 01 01"
        " 00000001 00000002 00000003 00",
    ),
    (
        "ConfigRecord",
        ConfigRecord(resource_type=2, resource_name="current_stock", name="retention.ms", value="3600000"),
        "01 04 00 02 0e 63757272656e745f73746f636b 0d 726574656e74696f6e2e6d73 08 33363030303030 00",
    ),
    (
        "BrokerRegistrationChangeRecord (fixture)",
        BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=8, fenced=-1),
        "01 11 00 00000001 0000000000000008 01 00 01 ff",
    ),
]


@pytest.mark.parametrize(
    ("record", "hex_value"), [w[1:] for w in WORKED_VALUES], ids=[w[0] for w in WORKED_VALUES]
)
def test_worked_values_decode_and_reencode_byte_exactly(record: Any, hex_value: str) -> None:
    value = h(hex_value)
    assert decode_metadata_record(value) == (record, 0)
    assert decode_metadata_record(memoryview(value)) == (record, 0)
    assert encode_metadata_record(record, 0) == value


def test_worked_control_records() -> None:
    leader = LeaderChangeMessage(
        leader_id=1, voters=[LeaderChangeMessage.Voter(1)], granting_voters=[LeaderChangeMessage.Voter(1)]
    )
    cases: list[tuple[Any, str, str]] = [
        (leader, "0000 0002", "0000 00000001 02 00000001 00 02 00000001 00 00"),
        (SnapshotHeaderRecord(), "0000 0003", "0000 0000000000000000 00"),
        (SnapshotFooterRecord(), "0000 0004", "0000 00"),
    ]
    for record, key, value in cases:
        assert decode_control_record(h(key), h(value)) == (record, 0)
        assert encode_control_record(record) == (h(key), h(value))


# ------------------------------------------------------------------ real files


def _fixture_records(path: Path) -> list[tuple[bool, bytes | None, bytes | None]]:
    data = path.read_bytes()
    return [
        (batch.is_control, record.key, record.value)
        for _, batch in iter_batches(data, str(path))
        for record in batch.records
    ]


@pytest.mark.parametrize(
    "path",
    [FIXTURES / "__cluster_metadata-0" / "00000000000000000000.log", FIXTURES / "bootstrap.checkpoint"],
    ids=["log", "bootstrap.checkpoint"],
)
def test_every_record_of_the_real_kafka_files_round_trips_byte_exactly(path: Path) -> None:
    seen: Counter[tuple[str, int]] = Counter()
    for is_control, key, value in _fixture_records(path):
        assert value is not None
        if is_control:
            assert key is not None
            control, version = decode_control_record(key, value, str(path))
            assert encode_control_record(control, version) == (key, value)
            seen[(type(control).__name__, version)] += 1
        else:
            assert key is None
            record, version = decode_metadata_record(value, str(path))
            assert encode_metadata_record(record, version) == value
            seen[(type(record).__name__, version)] += 1
    if path.name == "bootstrap.checkpoint":
        assert seen == {
            ("SnapshotHeaderRecord", 0): 1,
            ("FeatureLevelRecord", 0): 1,
            ("SnapshotFooterRecord", 0): 1,
        }
    else:
        assert seen[("LeaderChangeMessage", 0)] == 1
        assert seen[("RegisterBrokerRecord", 3)] == 2
        assert seen[("PartitionRecord", 1)] == 54
        assert seen[("NoOpRecord", 0)] > 4000


def test_the_real_log_starts_with_the_bootstrap_transaction() -> None:
    path = FIXTURES / "__cluster_metadata-0" / "00000000000000000000.log"
    records = _fixture_records(path)
    decoded = [decode_metadata_record(value)[0] for is_control, _, value in records[1:5] if value is not None]
    assert decoded == [
        BeginTransactionRecord(name="Bootstrap records"),
        FeatureLevelRecord(name="metadata.version", feature_level=19),
        ZkMigrationStateRecord(zk_migration_state=0),
        EndTransactionRecord(),
    ]


# ------------------------------------------------------------------ rejected frames


@pytest.mark.parametrize(
    ("hex_value", "offset", "needle"),
    [
        ("", 100, "empty"),
        ("00 14 00 00", 100, "frame version 0"),
        ("02 14 00 00", 100, "frame version 2"),
        ("01 06 00 00", 101, "apiKey 6"),
        ("01 0d 00 00", 101, "apiKey 13"),
        ("01 10 00 00", 101, "apiKey 16"),
        ("01 1c 00 00", 101, "apiKey 28"),
        ("01 ffff03 00 00", 101, "apiKey 65535 is too large"),
        ("01 03 ffff03 00", 102, "version 65535 is too large"),
        ("01 03 03 00", 102, "PARTITION_RECORD has no version 3"),
        ("01 02 01 00", 102, "TOPIC_RECORD has no version 1"),
        ("01 14 00 00 00", 104, "Found 1 byte\\(s\\) of garbage after NO_OP_RECORD v0"),
        ("01 14 00 00 0102", 104, "Found 2 byte"),
        ("01 14 00", 103, "NoOpRecord v0: truncated"),
        ("01 02 00 05 6162", 104, "TopicRecord v0: string of 4 byte\\(s\\) runs past the end"),
        ("01 02 00 01" + "00" * 16 + "01 05 09", 123, "tagged field 5 of 9 byte"),
        ("01 80 80 80 80 80", 101, "longer than 5 bytes"),
        ("01", 101, "truncated unsigned varint"),
    ],
)
def test_bad_frames_are_corrupt_with_file_and_offset(hex_value: str, offset: int, needle: str) -> None:
    with pytest.raises(CorruptDataError, match=needle) as info:
        decode_metadata_record(h(hex_value), "seg.log", 100)
    assert info.value.source == "seg.log"
    assert info.value.offset == offset
    assert str(info.value).startswith(f"seg.log at byte {offset}: ")


def test_multi_byte_varints_in_the_frame_are_accepted() -> None:
    # apiKey 20 written as a two-byte varint is legal LEB128
    assert decode_metadata_record(h("01 9400 00 00")) == (NoOpRecord(), 0)


@pytest.mark.parametrize(
    ("key", "value", "needle"),
    [
        (None, "0000 00", "no key"),
        ("0000 00", "0000 00", "at least 4 bytes"),
        ("ffff 0004", "0000 00", "key version -1"),
        ("0000 0000", "0000 00", "unknown control record type 0"),
        ("0000 0001", "0000 00", "unknown control record type 1"),
        ("0000 0007", "0000 00", "unknown control record type 7"),
        ("0000 0004", None, "no value"),
        ("0000 0004", "0000", "truncated"),
        ("0000 0004", "0000 00 00", "Found 1 byte"),
    ],
)
def test_bad_control_records_are_corrupt(key: str | None, value: str | None, needle: str) -> None:
    with pytest.raises(CorruptDataError, match=needle):
        decode_control_record(
            None if key is None else h(key), None if value is None else h(value), "snap.checkpoint", 10
        )


def test_control_keys_with_a_higher_version_are_read_as_version_0() -> None:
    assert decode_control_record(h("0001 0004"), h("0000 00")) == (SnapshotFooterRecord(), 0)


def test_encoders_refuse_the_wrong_kind_of_record() -> None:
    with pytest.raises(InvalidValueError):
        encode_metadata_record(SnapshotHeaderRecord(), 0)  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError):
        encode_control_record(NoOpRecord())  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError):
        encode_control_record(RegisterBrokerRecord.BrokerEndpoint())  # type: ignore[arg-type]


# ------------------------------------------------------------------ properties


@pytest.mark.parametrize(
    ("cls", "version"), METADATA_VERSIONS, ids=[f"{c.__name__}-v{v}" for c, v in METADATA_VERSIONS]
)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_metadata_frame_round_trip(cls: type, version: int, data: st.DataObject) -> None:
    record = data.draw(struct_strategy(cls, version))
    value = encode_metadata_record(record, version)
    assert value[:3] == bytes((1, cls.API_KEY, version))  # type: ignore[attr-defined]
    assert decode_metadata_record(value, "x", 7) == (record, version)


@pytest.mark.parametrize("cls", CONTROL_RECORD_CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_control_record_round_trip(cls: type, data: st.DataObject) -> None:
    record = data.draw(struct_strategy(cls, 0))
    key, value = encode_control_record(record)
    assert key == bytes((0, 0, 0, cls.CONTROL_TYPE))  # type: ignore[attr-defined]
    assert decode_control_record(key, value) == (record, 0)


@settings(max_examples=400, deadline=None)
@given(value=st.binary(max_size=80))
def test_arbitrary_values_raise_only_our_errors(value: bytes) -> None:
    try:
        decode_metadata_record(value, "fuzz", 5)
    except Zk2KraftError as e:
        assert isinstance(e, CorruptDataError)
        assert e.source == "fuzz" and e.offset is not None and 5 <= e.offset <= 5 + len(value)


@settings(max_examples=400, deadline=None)
@given(api_key=st.integers(0, 30), version=st.integers(0, 4), body=st.binary(max_size=80))
def test_plausible_headers_with_arbitrary_bodies_raise_only_our_errors(
    api_key: int, version: int, body: bytes
) -> None:
    value = bytes((1, api_key, version)) + body
    try:
        record, got_version = decode_metadata_record(value, "fuzz", 0)
    except CorruptDataError as e:
        assert e.offset is not None and 0 <= e.offset <= len(value)
        return
    assert got_version == version
    assert api_key == type(record).API_KEY  # type: ignore[union-attr]


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_mutated_real_values_raise_only_our_errors(data: st.DataObject) -> None:
    cls, version = data.draw(st.sampled_from(METADATA_VERSIONS))
    value = bytearray(encode_metadata_record(data.draw(struct_strategy(cls, version)), version))
    index = data.draw(st.integers(0, len(value) - 1))
    value[index] = data.draw(st.integers(0, 255))
    with contextlib.suppress(CorruptDataError):
        decode_metadata_record(bytes(value))


@settings(max_examples=300, deadline=None)
@given(key=st.one_of(st.none(), st.binary(max_size=6)), value=st.one_of(st.none(), st.binary(max_size=60)))
def test_arbitrary_control_records_raise_only_our_errors(key: bytes | None, value: bytes | None) -> None:
    try:
        decode_control_record(key, value, "fuzz", 0)
    except Zk2KraftError as e:
        assert isinstance(e, CorruptDataError)
