"""Record body codecs generated from Kafka's schemas: worked bytes, round trips, tags, errors, generator."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from migrate.errors import CorruptDataError, UnsupportedVersionError, Zk2KraftError
from migrate.kraft import _generated
from migrate.kraft.records import (
    CONTROL_RECORD_TYPES,
    METADATA_RECORD_TYPES,
    BeginTransactionRecord,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    DelegationTokenRecord,
    FeatureLevelRecord,
    InvalidValueError,
    KRaftVersionRecord,
    LeaderChangeMessage,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    TopicRecord,
    UserScramCredentialRecord,
    VotersRecord,
    ZkMigrationStateRecord,
)
from tests.support import REPO
from tests.support.strategies import ALL_CLASSES, ALL_VERSIONS, VERSION_IDS, struct_strategy

SCHEMAS = REPO.parent / "shared" / "kafka-schemas"
TOPIC_ID = uuid.UUID("6d660bbe-4352-41e5-9d2a-186bde7d2f37")  # bWYLvkNSQeWdKhhr3n0vNw


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


def decode(cls: type, body: bytes, version: int) -> Any:
    record, pos = cls.decode_body(body, 0, len(body), version)  # type: ignore[attr-defined]
    assert pos == len(body)
    return record


# ------------------------------------------------------------------ naming contract


def test_registries_hold_kafkas_api_keys_and_control_types() -> None:
    assert set(METADATA_RECORD_TYPES) == set(range(28)) - {6, 13, 16}
    assert set(CONTROL_RECORD_TYPES) == {2, 3, 4, 5, 6}
    assert METADATA_RECORD_TYPES[3] is PartitionRecord
    assert METADATA_RECORD_TYPES[21] is ZkMigrationStateRecord
    assert CONTROL_RECORD_TYPES[2] is LeaderChangeMessage
    assert CONTROL_RECORD_TYPES[6] is VotersRecord


def test_class_variables_follow_kafkas_names() -> None:
    assert (PartitionRecord.API_KEY, PartitionRecord.TYPE_NAME) == (3, "PARTITION_RECORD")
    assert ZkMigrationStateRecord.TYPE_NAME == "ZK_MIGRATION_STATE_RECORD"
    assert RegisterBrokerRecord.TYPE_NAME == "REGISTER_BROKER_RECORD"
    assert (RegisterBrokerRecord.LOWEST_VERSION, RegisterBrokerRecord.HIGHEST_VERSION) == (0, 3)
    assert (LeaderChangeMessage.CONTROL_TYPE, LeaderChangeMessage.TYPE_NAME) == (2, "LEADER_CHANGE")
    assert (VotersRecord.CONTROL_TYPE, VotersRecord.TYPE_NAME) == (6, "KRAFT_VOTERS")
    assert not hasattr(LeaderChangeMessage, "API_KEY")
    assert not hasattr(PartitionRecord, "CONTROL_TYPE")


def test_defaults_are_the_schema_defaults() -> None:
    assert PartitionRecord() == PartitionRecord(
        partition_id=-1, topic_id=uuid.UUID(int=0), leader=-1, leader_epoch=-1, partition_epoch=-1
    )
    assert PartitionRecord().eligible_leader_replicas is None
    assert RegisterBrokerRecord().fenced is True
    assert RegisterBrokerRecord().rack == ""
    assert PartitionChangeRecord().leader == -2
    assert PartitionChangeRecord().isr is None
    assert ProducerIdsRecord().broker_epoch == -1
    assert BeginTransactionRecord().name is None
    assert PartitionRecord().replicas is not PartitionRecord().replicas  # no shared mutable default


def test_nested_structs_and_snake_case_fields() -> None:
    endpoint = RegisterBrokerRecord.BrokerEndpoint(name="PLAINTEXT", host="h", port=9092, security_protocol=0)
    assert RegisterBrokerRecord(end_points=[endpoint], is_migrating_zk_broker=True).end_points == [endpoint]
    assert ClientQuotaRecord.EntityData(entity_type="user", entity_name=None).entity_name is None
    assert LeaderChangeMessage.Voter(voter_id=1).voter_directory_id == uuid.UUID(int=0)
    voter = VotersRecord.Voter()
    assert voter.kraft_version_feature == VotersRecord.KRaftVersionFeature()
    assert voter.kraft_version_feature is not VotersRecord.Voter().kraft_version_feature
    assert KRaftVersionRecord(kraft_version=1).kraft_version == 1


@pytest.mark.parametrize("cls", ALL_CLASSES, ids=lambda c: c.__name__)
def test_every_struct_is_a_slotted_dataclass_with_unknown_tags(cls: type) -> None:
    structs = [cls] + [
        value for value in vars(cls).values() if isinstance(value, type) and dataclasses.is_dataclass(value)
    ]
    for struct in structs:
        assert dataclasses.is_dataclass(struct)
        assert hasattr(struct, "__slots__")
        names = [f.name for f in dataclasses.fields(struct)]
        assert names[-1] == "unknown_tagged_fields"
        assert getattr(struct(), "unknown_tagged_fields") == {}  # noqa: B009


# ------------------------------------------------------------------ worked bytes (kraft-metadata.md b, a.4)

WORKED_BODIES: list[tuple[str, Any, int, str]] = [
    (
        "FeatureLevelRecord metadata.version=19 (fixture)",
        FeatureLevelRecord(name="metadata.version", feature_level=19),
        0,
        "11 6d65746164617461 2e76657273696f6e 0013 00",
    ),
    ("ZkMigrationStateRecord NONE (fixture)", ZkMigrationStateRecord(zk_migration_state=0), 0, "00 00"),
    ("ZkMigrationStateRecord MIGRATION", ZkMigrationStateRecord(zk_migration_state=1), 0, "01 00"),
    (
        "BeginTransactionRecord Bootstrap records (fixture)",
        BeginTransactionRecord(name="Bootstrap records"),
        0,
        "01 00 12 12 426f6f747374726170207265636f726473",
    ),
    (
        "BeginTransactionRecord ZK Migration",
        BeginTransactionRecord(name="ZK Migration"),
        0,
        "01 00 0d 0d 5a4b204d6967726174696f6e",
    ),
    ("NoOpRecord (fixture)", NoOpRecord(), 0, "00"),
    (
        "TopicRecord current_stock",
        TopicRecord(name="current_stock", topic_id=TOPIC_ID),
        0,
        "0e 63757272656e745f73746f636b 6d660bbe435241e59d2a186bde7d2f37 00",
    ),
    (
        "PartitionRecord p0",
        PartitionRecord(
            partition_id=0,
            topic_id=TOPIC_ID,
            replicas=[2, 1],
            isr=[1, 2],
            leader=1,
            leader_epoch=2,
            partition_epoch=3,
        ),
        0,
        "00000000 6d660bbe435241e59d2a186bde7d2f37 03 00000002 00000001 03 00000001 00000002 01 01"
        " 00000001 00000002 00000003 00",
    ),
    (
        "ConfigRecord retention.ms",
        ConfigRecord(resource_type=2, resource_name="current_stock", name="retention.ms", value="3600000"),
        0,
        "02 0e 63757272656e745f73746f636b 0d 726574656e74696f6e2e6d73 08 33363030303030 00",
    ),
    (
        "BrokerRegistrationChangeRecord unfence broker 1 epoch 8 (fixture)",
        BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=8, fenced=-1),
        0,
        "00000001 0000000000000008 01 00 01 ff",
    ),
    (
        "LeaderChangeMessage leader 1 voters [1] (fixture)",
        LeaderChangeMessage(
            leader_id=1, voters=[LeaderChangeMessage.Voter(1)], granting_voters=[LeaderChangeMessage.Voter(1)]
        ),
        0,
        "0000 00000001 02 00000001 00 02 00000001 00 00",
    ),
    ("SnapshotHeaderRecord (fixture)", SnapshotHeaderRecord(), 0, "0000 0000000000000000 00"),
    ("SnapshotFooterRecord (fixture)", SnapshotFooterRecord(), 0, "0000 00"),
]


@pytest.mark.parametrize(
    ("record", "version", "hex_body"), [w[1:] for w in WORKED_BODIES], ids=[w[0] for w in WORKED_BODIES]
)
def test_worked_bodies_decode_and_reencode_byte_exactly(record: Any, version: int, hex_body: str) -> None:
    body = h(hex_body)
    assert decode(type(record), body, version) == record
    assert record.encode_body(version) == body


def test_register_broker_v2_puts_is_migrating_between_broker_id_and_incarnation_id() -> None:
    record = RegisterBrokerRecord(
        broker_id=5, is_migrating_zk_broker=True, incarnation_id=uuid.UUID(int=7), broker_epoch=9, rack=None
    )
    body = record.encode_body(2)
    assert body[:5] == h("00000005 01")
    assert body[5:21] == uuid.UUID(int=7).bytes
    assert body[21:29] == h("0000000000000009")
    assert body[29:] == h(
        "01 01 00 01 00 00"
    )  # no endpoints, no features, null rack, fenced, not in shutdown, tags
    assert decode(RegisterBrokerRecord, body, 2) == record


def test_tagged_fields_are_written_in_tag_order_not_declaration_order() -> None:
    record = PartitionChangeRecord(
        partition_id=1,
        topic_id=TOPIC_ID,
        directories=[uuid.UUID(int=1)],
        eligible_leader_replicas=[3],
        leader=4,
    )
    body = record.encode_body(2)
    tags = body[20:]
    # 3 fields: tag 1 (leader, 4 bytes), tag 6 (ELR), tag 8 (directories, declared before the ELR fields)
    assert tags[:7] == h("03 01 04 00000004")
    assert tags[7:14] == h("06 05 02 00000003")
    assert tags[14:17] == h("08 11 02")
    assert decode(PartitionChangeRecord, body, 2) == record


def test_default_tagged_values_are_omitted_and_non_defaults_written() -> None:
    assert PartitionChangeRecord(leader=-2, leader_recovery_state=-1).encode_body(0)[-1:] == b"\x00"
    assert PartitionChangeRecord(isr=[]).encode_body(0)[20:] == h("01 00 01 01")  # empty is not null
    assert RegisterBrokerRecord(log_dirs=[]).encode_body(3)[-1:] == b"\x00"
    assert PartitionRecord(leader_recovery_state=1).encode_body(0)[-4:] == h("01 00 01 01")


# ------------------------------------------------------------------ round trips, every type and version


@pytest.mark.parametrize(("cls", "version"), ALL_VERSIONS, ids=VERSION_IDS)
@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_round_trip_every_type_and_version(cls: type, version: int, data: st.DataObject) -> None:
    record = data.draw(struct_strategy(cls, version))
    body = record.encode_body(version)
    assert decode(cls, body, version) == record
    assert decode(cls, body, version).encode_body(version) == body
    # inside a larger buffer (as batches hand them over), bytes or memoryview
    prefix, suffix = data.draw(st.binary(max_size=4)), data.draw(st.binary(max_size=4))
    buf = prefix + body + suffix
    for view in (buf, memoryview(buf)):
        decoded, pos = cls.decode_body(view, len(prefix), len(prefix) + len(body), version)  # type: ignore[attr-defined]
        assert (decoded, pos) == (record, len(prefix) + len(body))


@pytest.mark.parametrize(("cls", "version"), ALL_VERSIONS, ids=VERSION_IDS)
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_truncated_bodies_are_corrupt_never_short_records(
    cls: type, version: int, data: st.DataObject
) -> None:
    body = data.draw(struct_strategy(cls, version)).encode_body(version)
    cut = data.draw(st.integers(0, len(body) - 1))
    with pytest.raises(CorruptDataError, match=rf"{cls.__name__} v{version}"):
        cls.decode_body(body[:cut], 0, cut, version)  # type: ignore[attr-defined]
    # the bytes are there but the caller says the value ends early
    with pytest.raises(CorruptDataError):
        cls.decode_body(body, 0, cut, version)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("cls", "version"), ALL_VERSIONS, ids=VERSION_IDS)
@settings(max_examples=30, deadline=None)
@given(data=st.binary(max_size=64))
def test_arbitrary_bodies_raise_only_corrupt_data(cls: type, version: int, data: bytes) -> None:
    try:
        record, pos = cls.decode_body(data, 0, len(data), version)  # type: ignore[attr-defined]
    except CorruptDataError as e:
        assert e.offset is not None and 0 <= e.offset <= len(data)
        return
    assert 0 < pos <= len(data)
    assert isinstance(record, cls)


def test_versions_outside_the_valid_range_are_unsupported() -> None:
    with pytest.raises(UnsupportedVersionError, match="PartitionRecord has no version 3"):
        PartitionRecord().encode_body(3)
    with pytest.raises(UnsupportedVersionError):
        PartitionRecord.decode_body(b"", 0, 0, -1)
    with pytest.raises(UnsupportedVersionError):
        TopicRecord().encode_body(1)


# ------------------------------------------------------------------ multi-byte lengths and limits


def test_long_values_use_multi_byte_varint_lengths() -> None:
    many = list(range(200))
    dirs = [uuid.UUID(int=i) for i in range(130)]
    record = PartitionRecord(replicas=many, isr=many[:127], directories=dirs, eligible_leader_replicas=many)
    body = record.encode_body(2)
    assert body[20:22] == h("c901")  # 201 = count + 1 as a two-byte uvarint
    assert decode(PartitionRecord, body, 2) == record
    token = DelegationTokenRecord(owner="o" * 300, renewers=[f"User:{i}" for i in range(150)], token_id="t")
    assert decode(DelegationTokenRecord, token.encode_body(0), 0) == token
    endpoints = [RegisterBrokerRecord.BrokerEndpoint(name=f"L{i}", host="h", port=i) for i in range(130)]
    broker = RegisterBrokerRecord(end_points=endpoints, rack="r" * 127, log_dirs=dirs)
    assert decode(RegisterBrokerRecord, broker.encode_body(3), 3) == broker
    scram = UserScramCredentialRecord(name="alice", salt=bytes(range(256)), stored_key=b"k" * 1000)
    assert decode(UserScramCredentialRecord, scram.encode_body(0), 0) == scram


def test_strings_are_limited_to_32767_utf8_bytes_like_kafka() -> None:
    ok = TopicRecord(name="é" * 16383)  # 32766 bytes
    assert decode(TopicRecord, ok.encode_body(0), 0) == ok
    with pytest.raises(InvalidValueError, match="name"):
        TopicRecord(name="x" * 32768).encode_body(0)
    # a length prefix of 32768 + 1 on the wire is refused even if the bytes are present
    body = h("81 80 02") + b"x" * 32768 + bytes(17)
    with pytest.raises(CorruptDataError, match="32767"):
        decode(TopicRecord, body, 0)


# ------------------------------------------------------------------ unknown tagged fields


def test_unknown_tags_survive_decode_and_encode() -> None:
    # PartitionRecord v0 knows tag 0 only: tag 1 (ELR in v2) and tag 300 are unknown here
    body = h("00000000") + TOPIC_ID.bytes + h("01 01 01 01 ffffffff ffffffff ffffffff")
    tags = h("03 00 01 01 01 02 abcd ac02 00")
    record = decode(PartitionRecord, body + tags, 0)
    assert record.leader_recovery_state == 1
    assert record.unknown_tagged_fields == {1: h("abcd"), 300: b""}
    assert record.encode_body(0) == body + tags


def test_unknown_tags_are_merged_in_ascending_order_with_known_ones() -> None:
    record = PartitionChangeRecord(leader=3, directories=[], unknown_tagged_fields={7: b"\x07", 6: b"\x06"})
    tags = record.encode_body(1)[20:]
    assert tags == h("04 01 04 00000003 06 01 06 07 01 07 08 01 01")
    assert decode(PartitionChangeRecord, record.encode_body(1), 1) == record


def test_unknown_tags_inside_nested_structs_survive() -> None:
    endpoint = RegisterBrokerRecord.BrokerEndpoint(
        name="A", host="B", port=1, unknown_tagged_fields={9: b"zz"}
    )
    record = RegisterBrokerRecord(end_points=[endpoint])
    assert decode(RegisterBrokerRecord, record.encode_body(0), 0) == record


def test_unknown_tags_may_not_reuse_a_tag_the_version_defines() -> None:
    with pytest.raises(InvalidValueError, match="tag 0"):
        PartitionRecord(unknown_tagged_fields={0: b"\x01"}).encode_body(0)
    # tag 1 is unknown at v0 but is EligibleLeaderReplicas at v2
    assert PartitionRecord(unknown_tagged_fields={1: b"\x01"}).encode_body(0)
    with pytest.raises(InvalidValueError, match="tag 1"):
        PartitionRecord(unknown_tagged_fields={1: b"\x01"}).encode_body(2)
    with pytest.raises(InvalidValueError, match="bytes"):
        NoOpRecord(unknown_tagged_fields={3: 5}).encode_body(0)  # type: ignore[dict-item]


def test_known_tag_with_a_wrong_size_is_corrupt() -> None:
    body = h("00000000") + TOPIC_ID.bytes + h("01 01 01 01 ffffffff ffffffff ffffffff 01 00 02 01 01")
    with pytest.raises(CorruptDataError, match="tagged field 0"):
        decode(PartitionRecord, body, 0)


# ------------------------------------------------------------------ values that cannot be encoded


@pytest.mark.parametrize(
    ("record", "version", "needle"),
    [
        (PartitionRecord(replicas=None), 0, "replicas is null"),  # type: ignore[arg-type]
        (TopicRecord(name=None), 0, "name is null"),  # type: ignore[arg-type]
        (PartitionRecord(topic_id=None), 1, "topic_id is null"),  # type: ignore[arg-type]
        (PartitionChangeRecord(directories=None, isr=None), 1, None),
        (
            ClientQuotaRecord(entity=[ClientQuotaRecord.EntityData(entity_type=None)]),  # type: ignore[arg-type]
            0,
            "entity_type is null",
        ),
        (PartitionRecord(partition_id=1 << 31), 0, "partition_id"),
        (RegisterBrokerRecord(end_points=[RegisterBrokerRecord.BrokerEndpoint(port=70000)]), 0, "port"),
        (PartitionRecord(topic_id="bWYLvkNSQeWdKhhr3n0vNw"), 0, "topic_id"),  # type: ignore[arg-type]
        (PartitionRecord(replicas=[1, "2"]), 0, r"replicas\[1\]"),  # type: ignore[list-item]
        (TopicRecord(name="\ud800"), 0, "UTF-8"),
        (UserScramCredentialRecord(salt="salt"), 0, "salt"),  # type: ignore[arg-type]
    ],
)
def test_invalid_values_raise_invalid_value_error_naming_the_field(
    record: Any, version: int, needle: str | None
) -> None:
    if needle is None:  # nullable at this version: fine
        assert decode(type(record), record.encode_body(version), version) == record
        return
    with pytest.raises(InvalidValueError, match=needle) as info:
        record.encode_body(version)
    assert isinstance(info.value, Zk2KraftError)


def test_non_default_value_in_a_field_the_version_lacks_is_unsupported() -> None:
    with pytest.raises(UnsupportedVersionError, match="isMigratingZkBroker at version 1"):
        RegisterBrokerRecord(is_migrating_zk_broker=True).encode_body(1)
    with pytest.raises(UnsupportedVersionError, match="directories"):
        PartitionRecord(directories=[uuid.UUID(int=0)]).encode_body(0)
    voter = LeaderChangeMessage.Voter(voter_id=1, voter_directory_id=uuid.uuid4())
    with pytest.raises(UnsupportedVersionError, match="voterDirectoryId"):
        LeaderChangeMessage(voters=[voter]).encode_body(0)
    assert decode(LeaderChangeMessage, LeaderChangeMessage(voters=[voter]).encode_body(1), 1).voters == [
        voter
    ]
    # defaults are fine
    assert RegisterBrokerRecord(is_migrating_zk_broker=False).encode_body(0)


def test_nullable_fields_accept_null() -> None:
    for record in (
        ConfigRecord(value=None),
        RegisterBrokerRecord(rack=None),
        ClientQuotaRecord(entity=[ClientQuotaRecord.EntityData(entity_type="user", entity_name=None)]),
    ):
        assert decode(type(record), record.encode_body(0), 0) == record


# ------------------------------------------------------------------ the generator


def test_generated_module_is_what_the_generator_writes(tmp_path: Path) -> None:
    if not (SCHEMAS / "metadata").is_dir():
        pytest.skip("../shared/kafka-schemas is not available")
    out = tmp_path / "generated.py"
    subprocess.run(
        [sys.executable, str(REPO / "tools" / "gen_records.py"), str(SCHEMAS), "--output", str(out)],
        check=True,
        cwd=REPO,
    )
    committed = (REPO / "migrate" / "kraft" / "_generated.py").read_text(encoding="utf-8")
    assert out.read_text(encoding="utf-8") == committed, "run `python tools/gen_records.py` and commit"


def test_generated_module_names_its_schema_commit_and_carries_no_schema_prose() -> None:
    text = (REPO / "migrate" / "kraft" / "_generated.py").read_text(encoding="utf-8")
    assert text.startswith("# GENERATED by tools/gen_records.py")
    assert re.fullmatch(r"[0-9a-f]{40}", _generated.SCHEMA_COMMIT)
    assert _generated.SCHEMA_COMMIT in text.splitlines()[1]
    if not (SCHEMAS / "metadata").is_dir():
        return
    abouts: list[str] = []
    for path in sorted(SCHEMAS.glob("*/*.json")):
        lines = [line for line in path.read_text().splitlines() if not line.lstrip().startswith("//")]
        abouts += re.findall(r'"about":\s*"([^"]{25,})"', "\n".join(lines))
    assert len(abouts) > 50
    assert not [about for about in abouts if about in text]
    assert "Licensed to the Apache Software Foundation" not in text
    json.dumps(abouts)  # the scrape found real strings
