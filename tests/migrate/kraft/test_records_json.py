"""Kafka's JsonConverter view of records (what kafka-dump-log prints as "data") and its inverse."""

from __future__ import annotations

import dataclasses
import json
import uuid
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from migrate.errors import UnsupportedVersionError
from migrate.kraft.records import (
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    InvalidValueError,
    KRaftVersionRecord,
    LeaderChangeMessage,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UserScramCredentialRecord,
    VotersRecord,
    record_from_json,
    record_to_json,
)
from migrate.kraft.wire import uuid_from_text, uuid_to_text
from tests.support.strategies import ALL_VERSIONS, VERSION_IDS, struct_strategy

TOPIC_ID = uuid.UUID("6d660bbe-4352-41e5-9d2a-186bde7d2f37")


def without_unknown_tags(obj: Any) -> Any:
    """A copy with every struct's unknown_tagged_fields emptied (JSON does not carry them)."""
    if isinstance(obj, list):
        return [without_unknown_tags(x) for x in obj]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes = {
            f.name: without_unknown_tags(getattr(obj, f.name))
            for f in dataclasses.fields(obj)
            if f.name != "unknown_tagged_fields"
        }
        return dataclasses.replace(obj, **changes, unknown_tagged_fields={})  # type: ignore[type-var]
    return obj


# ------------------------------------------------------------------ uuid text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (uuid.UUID(int=0), "AAAAAAAAAAAAAAAAAAAAAA"),
        (uuid.UUID(int=1), "AAAAAAAAAAAAAAAAAAAAAQ"),
        (uuid.UUID(int=2), "AAAAAAAAAAAAAAAAAAAAAg"),
        (TOPIC_ID, "bWYLvkNSQeWdKhhr3n0vNw"),
        (uuid.UUID(int=(1 << 128) - 1), "_____________________w"),
    ],
)
def test_uuids_print_as_kafka_does(value: uuid.UUID, text: str) -> None:
    assert uuid_to_text(value) == text
    assert uuid_from_text(text) == value


@pytest.mark.parametrize(
    "text",
    [
        "",
        "AAAAAAAAAAAAAAAAAAAAA",
        "AAAAAAAAAAAAAAAAAAAAAAA",
        "AAAAAAAAAAAAAAAAAAAA+A",
        "AAAAAAAAAAAAAAAAAAAAAB",
    ],
)
def test_malformed_uuid_text_is_refused(text: str) -> None:
    with pytest.raises(InvalidValueError):
        uuid_from_text(text)


# ------------------------------------------------------------------ record → JSON


def test_topic_record_json() -> None:
    record = TopicRecord(name="current_stock", topic_id=TOPIC_ID)
    assert record_to_json(record, 0) == {"name": "current_stock", "topicId": "bWYLvkNSQeWdKhhr3n0vNw"}


def test_partition_record_json_keeps_schema_order_and_omits_default_tagged_fields() -> None:
    record = PartitionRecord(
        partition_id=0,
        topic_id=TOPIC_ID,
        replicas=[2, 1],
        isr=[1, 2],
        leader=1,
        leader_epoch=2,
        partition_epoch=3,
    )
    v0 = record_to_json(record, 0)
    assert list(v0) == [
        "partitionId",
        "topicId",
        "replicas",
        "isr",
        "removingReplicas",
        "addingReplicas",
        "leader",
        "leaderEpoch",
        "partitionEpoch",
    ]
    assert v0["replicas"] == [2, 1] and v0["removingReplicas"] == []
    recovering = record_to_json(dataclasses.replace(record, leader_recovery_state=1), 0)
    assert list(recovering)[7] == "leaderRecoveryState" and recovering["leaderRecoveryState"] == 1
    assert record_to_json(record, 1)["directories"] == []
    assert "eligibleLeaderReplicas" not in record_to_json(record, 2)
    assert (
        record_to_json(dataclasses.replace(record, eligible_leader_replicas=[]), 2)["eligibleLeaderReplicas"]
        == []
    )


def test_fields_absent_from_the_version_are_left_out() -> None:
    record = RegisterBrokerRecord(broker_id=1, rack=None)
    v0 = record_to_json(record, 0)
    assert "isMigratingZkBroker" not in v0 and "inControlledShutdown" not in v0 and "logDirs" not in v0
    assert v0["rack"] is None and v0["fenced"] is True
    assert record_to_json(record, 2)["isMigratingZkBroker"] is False
    with pytest.raises(UnsupportedVersionError, match="inControlledShutdown"):
        record_to_json(RegisterBrokerRecord(in_controlled_shutdown=True), 0)


def test_change_record_json_shows_only_what_changed() -> None:
    assert record_to_json(BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=8, fenced=-1), 0) == {
        "brokerId": 1,
        "brokerEpoch": 8,
        "fenced": -1,
    }
    change = PartitionChangeRecord(partition_id=3, topic_id=TOPIC_ID, leader=-1, isr=[1])
    assert record_to_json(change, 0) == {
        "partitionId": 3,
        "topicId": "bWYLvkNSQeWdKhhr3n0vNw",
        "isr": [1],
        "leader": -1,
    }


def test_bytes_are_base64_and_floats_are_numbers() -> None:
    scram = UserScramCredentialRecord(
        name="alice", mechanism=1, salt=b"\xfb\xff", stored_key=b"", iterations=4096
    )
    assert record_to_json(scram, 0) == {
        "name": "alice",
        "mechanism": 1,
        "salt": "+/8=",
        "storedKey": "",
        "serverKey": "",
        "iterations": 4096,
    }
    quota = ClientQuotaRecord(
        entity=[ClientQuotaRecord.EntityData(entity_type="user", entity_name=None)],
        key="producer_byte_rate",
        value=1024,
    )
    as_json = record_to_json(quota, 0)
    assert as_json == {
        "entity": [{"entityType": "user", "entityName": None}],
        "key": "producer_byte_rate",
        "value": 1024.0,
        "remove": False,
    }
    assert isinstance(as_json["value"], float)


def test_control_record_json_uses_kafkas_camel_case() -> None:
    assert record_to_json(KRaftVersionRecord(kraft_version=1), 0) == {"version": 0, "kRaftVersion": 1}
    voter = VotersRecord.Voter(
        voter_id=1,
        voter_directory_id=uuid.UUID(int=1),
        endpoints=[VotersRecord.Endpoint(name="CONTROLLER", host="localhost", port=9093)],
        kraft_version_feature=VotersRecord.KRaftVersionFeature(0, 1),
    )
    assert record_to_json(VotersRecord(voters=[voter]), 0) == {
        "version": 0,
        "voters": [
            {
                "voterId": 1,
                "voterDirectoryId": "AAAAAAAAAAAAAAAAAAAAAQ",
                "endpoints": [{"name": "CONTROLLER", "host": "localhost", "port": 9093}],
                "kRaftVersionFeature": {"minSupportedVersion": 0, "maxSupportedVersion": 1},
            }
        ],
    }
    leader = LeaderChangeMessage(leader_id=1, voters=[LeaderChangeMessage.Voter(1)])
    assert record_to_json(leader, 0)["voters"] == [{"voterId": 1}]
    assert record_to_json(leader, 1)["voters"] == [
        {"voterId": 1, "voterDirectoryId": "AAAAAAAAAAAAAAAAAAAAAA"}
    ]


def test_unknown_tagged_fields_never_appear_in_json() -> None:
    assert record_to_json(NoOpRecord(unknown_tagged_fields={5: b"x"}), 0) == {}


def test_to_json_rejects_versions_the_record_lacks() -> None:
    with pytest.raises(UnsupportedVersionError):
        record_to_json(TopicRecord(), 1)


# ------------------------------------------------------------------ JSON → record


def test_from_json_fills_missing_tagged_fields_with_defaults() -> None:
    record = record_from_json(
        PartitionChangeRecord, 0, {"partitionId": 3, "topicId": "bWYLvkNSQeWdKhhr3n0vNw", "leader": 2}
    )
    assert record == PartitionChangeRecord(partition_id=3, topic_id=TOPIC_ID, leader=2)
    config = record_from_json(
        ConfigRecord, 0, {"resourceType": 2, "resourceName": "t", "name": "k", "value": None}
    )
    assert config == ConfigRecord(resource_type=2, resource_name="t", name="k", value=None)


@pytest.mark.parametrize(
    ("cls", "version", "obj", "needle"),
    [
        (TopicRecord, 0, {"name": "t"}, "topicId is missing"),
        (TopicRecord, 0, {"name": "t", "topicId": "bWYLvkNSQeWdKhhr3n0vNw", "extra": 1}, "unknown field"),
        (TopicRecord, 0, {"name": 5, "topicId": "bWYLvkNSQeWdKhhr3n0vNw"}, "expected a JSON string"),
        (TopicRecord, 0, {"name": None, "topicId": "bWYLvkNSQeWdKhhr3n0vNw"}, "null but not nullable"),
        (TopicRecord, 0, {"name": "t", "topicId": "not-a-uuid"}, "not a Kafka uuid"),
        (TopicRecord, 0, [], "expected a JSON object"),
        (NoOpRecord, 0, {"partitionId": 1}, "unknown field"),
        (
            RegisterBrokerRecord,
            0,
            {
                "brokerId": 1,
                "isMigratingZkBroker": True,
                "incarnationId": "AAAAAAAAAAAAAAAAAAAAAA",
                "brokerEpoch": 0,
                "endPoints": [],
                "features": [],
                "rack": None,
                "fenced": True,
            },
            "not supported in version 0",
        ),
        (
            BrokerRegistrationChangeRecord,
            0,
            {"brokerId": 1 << 31, "brokerEpoch": 0},
            "out of range for int32",
        ),
        (BrokerRegistrationChangeRecord, 0, {"brokerId": True, "brokerEpoch": 0}, "expected an integer"),
        (BrokerRegistrationChangeRecord, 0, {"brokerId": 1.5, "brokerEpoch": 0}, "expected an integer"),
        (
            UserScramCredentialRecord,
            0,
            {"name": "a", "mechanism": 1, "salt": "%%", "storedKey": "", "serverKey": "", "iterations": 1},
            "not base64",
        ),
    ],
)
def test_from_json_refuses_what_kafka_would_not_read(cls: type, version: int, obj: Any, needle: str) -> None:
    with pytest.raises(InvalidValueError, match=needle):
        record_from_json(cls, version, obj)


@pytest.mark.parametrize(("cls", "version"), ALL_VERSIONS, ids=VERSION_IDS)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_json_round_trip_every_type_and_version(cls: type, version: int, data: st.DataObject) -> None:
    record = data.draw(struct_strategy(cls, version))
    as_json = record_to_json(record, version)
    text = json.dumps(as_json, allow_nan=True)
    assert json.loads(text) == as_json
    assert record_from_json(cls, version, json.loads(text)) == without_unknown_tags(record)
