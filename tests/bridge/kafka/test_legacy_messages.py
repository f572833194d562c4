"""LeaderAndIsr, StopReplica, UpdateMetadata and ControlledShutdown: every Kafka 3.9 version on the wire."""

import contextlib
import json
import struct
import subprocess
import sys
import uuid
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from bridge.kafka import legacy_messages as lm
from bridge.kafka import protocol
from bridge.kafka.protocol import decode_request, decode_response, encode_request, encode_response
from migrate.errors import CorruptDataError, Zk2KraftError
from tests.support.strategies import kio_entities

REPO = Path(__file__).resolve().parents[3]
SCHEMAS = REPO.parent / "shared" / "kafka-schemas"
TOPIC_ID = uuid.UUID("01020304-0506-0708-090a-0b0c0d0e0f10")

ALL_VERSIONS = sorted(lm.REQUESTS)


def _schema(name: str) -> dict[str, Any]:
    text = (SCHEMAS / "message" / f"{name}.json").read_text(encoding="utf-8")
    return json.loads("\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//")))


# ---------------------------------------------------------------- versions and headers


@pytest.mark.parametrize("api_key", sorted(lm.API_NAMES))
def test_every_version_kafka_39_defines_is_known_to_the_protocol_layer(api_key: int) -> None:
    if not (SCHEMAS / "message").is_dir():
        pytest.skip("../shared/kafka-schemas is not available")
    name = lm.API_NAMES[api_key]
    schema = _schema(f"{name}Request")
    assert schema["apiKey"] == api_key
    low, high = (int(v) for v in schema["validVersions"].split("-"))
    assert protocol.known_versions(api_key) == tuple(range(low, high + 1))
    assert protocol.api_name(api_key) == name
    flexible_from = int(schema["flexibleVersions"].rstrip("+"))
    for version in range(low, high + 1):
        request, response = protocol.request_class(api_key, version), protocol.response_class(api_key, version)
        assert request.__flexible__ == response.__flexible__ == (version >= flexible_from)
        # Kafka's ApiMessageType: flexible → request header v2 / response header v1; otherwise v1 / v0,
        # except ControlledShutdown v0, whose request header has no client id (v0)
        expected_request_header = 2 if version >= flexible_from else (0 if (api_key, version) == (7, 0) else 1)
        assert request.__header_schema__.__version__ == expected_request_header
        assert response.__header_schema__.__version__ == (1 if version >= flexible_from else 0)


def test_fields_exist_only_in_the_versions_the_schema_gives_them() -> None:
    def names(cls: type[Any]) -> set[str]:
        return {f.name for f in fields(cls)}

    assert "is_kraft_controller" in names(lm.LeaderAndIsrRequestV7)
    assert "is_kraft_controller" not in names(lm.LeaderAndIsrRequestV6)
    assert "type" in names(lm.LeaderAndIsrRequestV5) and "type" not in names(lm.LeaderAndIsrRequestV4)
    assert "topic_id" in names(lm.UpdateMetadataRequestV7.UpdateMetadataTopicState)
    assert "topic_id" not in names(lm.UpdateMetadataRequestV6.UpdateMetadataTopicState)
    assert "delete_partitions" in names(lm.StopReplicaRequestV2)
    assert "delete_partitions" not in names(lm.StopReplicaRequestV3)
    assert names(lm.UpdateMetadataRequestV0.UpdateMetadataBroker) == {"id", "v0_host", "v0_port"}
    # defaults are Kafka's: broker epoch -1, stop-replica leader epoch -1, UpdateMetadata Type 0
    assert lm.LeaderAndIsrRequestV7().broker_epoch == -1
    assert lm.StopReplicaRequestV4.StopReplicaPartitionState().leader_epoch == -1
    assert lm.UpdateMetadataRequestV8().type == 0


# ---------------------------------------------------------------- round trips


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), correlation_id=st.integers(-(2**31), 2**31 - 1))
@pytest.mark.parametrize("api", ALL_VERSIONS)
def test_requests_round_trip(api: tuple[int, int], data: st.DataObject, correlation_id: int) -> None:
    request = data.draw(kio_entities(lm.REQUESTS[api]))
    client_id = data.draw(st.none() | st.text(max_size=8))
    decoded = decode_request(encode_request(request, correlation_id, client_id), "test")
    assert decoded.body == request
    assert (decoded.api_key, decoded.api_version, decoded.correlation_id) == (*api, correlation_id)
    if api != (7, 0):
        assert decoded.client_id == client_id


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), correlation_id=st.integers(-(2**31), 2**31 - 1))
@pytest.mark.parametrize("api", ALL_VERSIONS)
def test_responses_round_trip(api: tuple[int, int], data: st.DataObject, correlation_id: int) -> None:
    response = data.draw(kio_entities(lm.RESPONSES[api]))
    assert decode_response(encode_response(correlation_id, response), *api, "test") == (correlation_id, response)


# ---------------------------------------------------------------- hostile bytes


@settings(max_examples=400, deadline=None)
@given(api=st.sampled_from(ALL_VERSIONS), rest=st.binary(max_size=200))
def test_arbitrary_request_bytes_raise_only_our_errors(api: tuple[int, int], rest: bytes) -> None:
    with contextlib.suppress(Zk2KraftError):
        decode_request(struct.pack(">hh", *api) + rest, "test")


@settings(max_examples=400, deadline=None)
@given(api=st.sampled_from(ALL_VERSIONS), payload=st.binary(max_size=200))
def test_arbitrary_response_bytes_raise_only_our_errors(api: tuple[int, int], payload: bytes) -> None:
    with contextlib.suppress(Zk2KraftError):
        decode_response(payload, *api, "test")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_valid_messages_raise_only_our_errors(data: st.DataObject) -> None:
    api = data.draw(st.sampled_from(ALL_VERSIONS))
    request = data.draw(kio_entities(lm.REQUESTS[api]))
    encoded = bytearray(encode_request(request, 1, "c"))
    for _ in range(data.draw(st.integers(1, 4))):
        encoded[data.draw(st.integers(4, len(encoded) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(4, len(encoded)))
    with contextlib.suppress(Zk2KraftError):
        decode_request(bytes(encoded[:cut]), "test")
    response = encode_response(1, data.draw(kio_entities(lm.RESPONSES[api])))
    with contextlib.suppress(Zk2KraftError):
        decode_response(response[: data.draw(st.integers(0, len(response)))], *api, "test")


def test_a_truncated_request_names_its_kind_and_offset() -> None:
    data = encode_request(lm.StopReplicaRequestV4(controller_id=1), 1, "c")
    with pytest.raises(CorruptDataError, match=r"StopReplica v4 \(api key 5\)") as info:
        decode_request(data[:-2], "broker 2")
    assert info.value.offset is not None


# ---------------------------------------------------------------- bytes assembled by hand from the schemas


def _hex(text: str) -> bytes:
    return bytes.fromhex("".join(line.split("#")[0] for line in text.splitlines()))


def test_leader_and_isr_v7_request_bytes() -> None:
    request = lm.LeaderAndIsrRequestV7(
        controller_id=3000,
        is_kraft_controller=True,
        controller_epoch=12,
        broker_epoch=42,
        type=2,
        topic_states=(
            lm.LeaderAndIsrRequestV7.LeaderAndIsrTopicState(
                topic_name="t",
                topic_id=TOPIC_ID,
                partition_states=(
                    lm.LeaderAndIsrRequestV7.LeaderAndIsrPartitionState(
                        partition_index=0,
                        controller_epoch=7,
                        leader=1,
                        leader_epoch=4,
                        isr=(1, 2),
                        partition_epoch=9,
                        replicas=(1, 2, 3),
                        adding_replicas=(3,),
                        is_new=True,
                    ),
                ),
            ),
        ),
        live_leaders=(lm.LeaderAndIsrRequestV7.LeaderAndIsrLiveLeader(broker_id=1, host_name="h", port=9092),),
    )
    expected = _hex("""
        0004 0007 00000005 0001 63 00   # api key 4, v7, correlation id 5, client id "c", header v2 tags
        00000bb8                        # ControllerId 3000
        01                              # isKRaftController
        0000000c                        # ControllerEpoch 12
        000000000000002a                # BrokerEpoch 42
        02                              # Type FULL
        02                              # TopicStates: compact array of 1
        0274                            #   TopicName "t"
        0102030405060708090a0b0c0d0e0f10  # TopicId
        02                              #   PartitionStates: 1
        00000000 00000007 00000001 00000004  # PartitionIndex, ControllerEpoch, Leader, LeaderEpoch
        03 00000001 00000002            #     Isr [1, 2]
        00000009                        #     PartitionEpoch
        04 00000001 00000002 00000003   #     Replicas
        02 00000003                     #     AddingReplicas [3]
        01                              #     RemovingReplicas []
        01 00 00                        #     IsNew, LeaderRecoveryState, tags
        00                              #   topic tags
        02 00000001 0268 00002384 00    # LiveLeaders: 1, "h":9092, tags
        00                              # request tags
    """)
    assert encode_request(request, 5, "c") == expected
    assert decode_request(expected, "test").body == request


def test_update_metadata_v8_request_bytes_carry_type_as_tagged_field_0() -> None:
    request = lm.UpdateMetadataRequestV8(
        controller_id=3000,
        is_kraft_controller=True,
        type=2,
        controller_epoch=12,
        broker_epoch=42,
        topic_states=(
            lm.UpdateMetadataRequestV8.UpdateMetadataTopicState(
                topic_name="t",
                topic_id=TOPIC_ID,
                partition_states=(
                    lm.UpdateMetadataRequestV8.UpdateMetadataPartitionState(
                        partition_index=0,
                        controller_epoch=7,
                        leader=1,
                        leader_epoch=4,
                        isr=(1,),
                        zk_version=9,
                        replicas=(1,),
                    ),
                ),
            ),
        ),
        live_brokers=(
            lm.UpdateMetadataRequestV8.UpdateMetadataBroker(
                id=1,
                endpoints=(
                    lm.UpdateMetadataRequestV8.UpdateMetadataEndpoint(
                        port=9092, host="h", listener="L", security_protocol=0
                    ),
                ),
                rack=None,
            ),
        ),
    )
    expected = _hex("""
        0006 0008 00000005 0001 63 00   # api key 6, v8, header v2
        00000bb8 01                     # ControllerId, isKRaftController (Type is tagged: at the end)
        0000000c 000000000000002a       # ControllerEpoch, BrokerEpoch
        02 0274                         # TopicStates: 1, "t"
        0102030405060708090a0b0c0d0e0f10
        02 00000000 00000007 00000001 00000004  # PartitionStates: 1; index, ctrl epoch, leader, epoch
        02 00000001                     #   Isr [1]
        00000009                        #   ZkVersion
        02 00000001                     #   Replicas [1]
        01 00                           #   OfflineReplicas [], tags
        00                              # topic tags
        02 00000001                     # LiveBrokers: 1, Id 1
        02 00002384 0268 024c 0000 00   #   Endpoints: 1, port 9092, "h", listener "L", PLAINTEXT, tags
        00 00                           #   Rack null, broker tags
        01 00 01 02                     # request tags: one, tag 0 (Type), 1 byte, FULL
    """)
    assert encode_request(request, 5, "c") == expected
    assert decode_request(expected, "test").body == request
    # Type at its default (UNKNOWN, 0) is not written at all
    assert encode_request(lm.UpdateMetadataRequestV8(), 5, "c").endswith(bytes.fromhex("01 01 00"))


def test_stop_replica_v4_and_v0_request_bytes() -> None:
    v4 = lm.StopReplicaRequestV4(
        controller_id=3000,
        is_kraft_controller=True,
        controller_epoch=12,
        broker_epoch=42,
        topic_states=(
            lm.StopReplicaRequestV4.StopReplicaTopicState(
                topic_name="t",
                partition_states=(
                    lm.StopReplicaRequestV4.StopReplicaPartitionState(
                        partition_index=1, leader_epoch=-2, delete_partition=True
                    ),
                ),
            ),
        ),
    )
    expected_v4 = _hex("""
        0005 0004 00000005 0001 63 00   # api key 5, v4, header v2
        00000bb8 01 0000000c 000000000000002a
        02 0274                         # TopicStates: 1, "t"
        02 00000001 fffffffe 01 00      # PartitionStates: 1; index 1, leader epoch -2, delete, tags
        00 00                           # topic tags, request tags
    """)
    assert encode_request(v4, 5, "c") == expected_v4
    assert decode_request(expected_v4, "test").body == v4

    v0 = lm.StopReplicaRequestV0(
        controller_id=3000,
        controller_epoch=12,
        delete_partitions=True,
        ungrouped_partitions=(lm.StopReplicaRequestV0.StopReplicaPartitionV0(topic_name="t", partition_index=2),),
    )
    expected_v0 = _hex("""
        0005 0000 00000005 0001 63      # api key 5, v0, header v1 (no tags)
        00000bb8 0000000c 01            # ControllerId, ControllerEpoch, DeletePartitions
        00000001 0001 74 00000002       # int32 array of 1: int16-length "t", partition 2
    """)
    assert encode_request(v0, 5, "c") == expected_v0
    assert decode_request(expected_v0, "test").body == v0


def test_controlled_shutdown_v0_request_has_no_client_id() -> None:
    request = lm.ControlledShutdownRequestV0(broker_id=4)
    expected = _hex("0007 0000 00000005 00000004")  # header v0: key, version, correlation id only
    assert encode_request(request, 5, "broker-4") == expected
    decoded = decode_request(expected, "test")
    assert (decoded.body, decoded.correlation_id, decoded.client_id) == (request, 5, "")


def test_response_bytes() -> None:
    cases = [
        (
            lm.LeaderAndIsrResponseV1(
                error_code=ErrorCode.none,
                partition_errors=(
                    lm.LeaderAndIsrResponseV1.LeaderAndIsrPartitionError(
                        topic_name="t", partition_index=0, error_code=ErrorCode.stale_controller_epoch
                    ),
                ),
            ),
            # header v0; ErrorCode; int32 array of 1: "t", partition 0, STALE_CONTROLLER_EPOCH (11)
            "00000005 0000 00000001 000174 00000000 000b",
        ),
        (
            lm.UpdateMetadataResponseV5(error_code=ErrorCode.stale_broker_epoch),
            "00000005 004d",  # header v0, STALE_BROKER_EPOCH (77)
        ),
        (
            lm.StopReplicaResponseV3(
                partition_errors=(
                    lm.StopReplicaResponseV3.StopReplicaPartitionError(topic_name="t", partition_index=1),
                ),
            ),
            # header v1 (tags); ErrorCode; compact array of 1: "t", 1, NONE, tags; response tags
            "00000005 00 0000 02 0274 00000001 0000 00 00",
        ),
        (
            lm.ControlledShutdownResponseV3(
                remaining_partitions=(
                    lm.ControlledShutdownResponseV3.RemainingPartition(topic_name="t", partition_index=1),
                ),
            ),
            "00000005 00 0000 02 0274 00000001 00 00",
        ),
        (
            lm.ControlledShutdownResponseV1(
                remaining_partitions=(
                    lm.ControlledShutdownResponseV1.RemainingPartition(topic_name="t", partition_index=1),
                ),
            ),
            "00000005 0000 00000001 000174 00000001",
        ),
    ]
    for response, hex_text in cases:
        expected = bytes.fromhex(hex_text)
        assert encode_response(5, response) == expected, type(response).__name__
        key, version = response.__api_key__, response.__version__
        assert decode_response(expected, key, version, "test") == (5, response)


# ---------------------------------------------------------------- the generator


def test_the_module_is_what_the_generator_writes(tmp_path: Path) -> None:
    if not (SCHEMAS / "message").is_dir():
        pytest.skip("../shared/kafka-schemas is not available")
    out = tmp_path / "legacy_messages.py"
    subprocess.run(
        [sys.executable, str(REPO / "tools" / "gen_records.py"), str(SCHEMAS), "--messages", "--output", str(out)],
        check=True,
        cwd=REPO,
    )
    committed = (REPO / "bridge" / "kafka" / "legacy_messages.py").read_text(encoding="utf-8")
    assert out.read_text(encoding="utf-8") == committed, "run `python tools/gen_records.py --messages` and commit"
    assert committed.startswith("# GENERATED by tools/gen_records.py")
    assert lm.SCHEMA_COMMIT in committed.splitlines()[1]
