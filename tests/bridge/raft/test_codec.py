"""The Raft codec against Kafka 3.9: every key and version it speaks, through the project's real frame codec."""

import contextlib
import dataclasses
import json
import re
import struct
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)
from kio.static.constants import EntityType
from kio.static.primitive import i32

from bridge.kafka import protocol
from bridge.raft import codec
from bridge.raft import messages as m
from migrate.errors import Zk2KraftError
from migrate.kraft.logdir import METADATA_TOPIC_ID
from tests.support.raft_wire import decode_request_payload, decode_response_payload
from tests.support.strategies import kio_entities

SCHEMAS = Path("/work/shared/kafka-schemas/message")
VOTERS = {3000: m.Endpoint("host1", 9093), 3001: m.Endpoint("host2", 9094), 3002: m.Endpoint("host3", 9095)}
LISTENER = "CONTROLLER"
FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
RAFT_VERSIONS = {
    codec.VOTE_KEY: range(0, 2),
    codec.BEGIN_QUORUM_EPOCH_KEY: range(0, 2),
    codec.END_QUORUM_EPOCH_KEY: range(0, 2),
    codec.FETCH_KEY: range(13, 18),
    codec.FETCH_SNAPSHOT_KEY: range(0, 2),
}

int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
ids = st.integers(-1, 2**31 - 1)
cluster_ids = st.none() | st.text(min_size=1, max_size=22)
errors = st.sampled_from([int(e) for e in ErrorCode])
partition_errors = st.sampled_from(
    [m.NONE, m.NOT_LEADER_OR_FOLLOWER, m.FENCED_LEADER_EPOCH, m.INVALID_REQUEST]
)
offsets_epochs = st.builds(m.OffsetAndEpoch, st.integers(0, 2**63 - 1), st.integers(0, 2**31 - 1))


def _send_request(request: Any, version: int) -> tuple[int, int, int, Any]:
    """Neutral → kio → frame bytes (the project's encoder) → neutral, as a bridge receives it."""
    entity = codec.request_to_kio(request, version, voters=VOTERS, listener=LISTENER)
    payload = protocol.encode_request(entity, 41, "raft-client-3000")
    return decode_request_payload(payload, "test peer")


def _send_response(response: Any, version: int) -> Any:
    entity = codec.response_to_kio(response, version, voters=VOTERS)
    correlation_id, back = decode_response_payload(
        protocol.encode_response(41, entity), codec._RESPONSE_KEYS[type(response)], version, "test peer"
    )
    assert correlation_id == 41
    return back


def _body(entity: Any) -> bytes:
    return protocol.encode_entity(entity)


# ---------------------------------------------------------------------------------------------- versions


def test_supported_versions_are_kafka_39s_raft_versions() -> None:
    # raft-quorum.md §2.1; Fetch from 4 as kio defines it (3.9 says 0, refusing <13 for this partition anyway).
    assert codec.supported_versions() == {
        1: (4, 17), 52: (0, 1), 53: (0, 1), 54: (0, 1), 55: (0, 2), 59: (0, 1), 80: (0, 0), 81: (0, 0), 82: (0, 0),
    }  # fmt: skip


def test_a_version_kafka_39_does_not_speak_is_refused() -> None:
    with pytest.raises(codec.UnsupportedVersionError):
        codec.request_to_kio(m.VoteRequest(None, 1, 1, 0, 0), 2, voters=VOTERS, listener=LISTENER)
    with pytest.raises(codec.UnsupportedVersionError):
        codec.response_to_kio(m.FetchResponse(0), 18, voters=VOTERS)


def _json_schema(name: str) -> dict[str, Any]:
    text = "\n".join(line for line in (SCHEMAS / f"{name}.json").read_text().splitlines()
                     if not line.lstrip().startswith("//"))  # fmt: skip
    return json.loads(text)  # type: ignore[no-any-return]


def _in(versions: str, version: int) -> bool:
    if not versions or versions == "none":
        return False
    if versions.endswith("+"):
        return version >= int(versions[:-1])
    low, _, high = versions.partition("-")
    return int(low) <= version <= int(high or low)


_KIO_TYPES = {"error_code": "int16", "timedelta_i32": "int32", "timedelta_i64": "int64"}


def _json_layout(fields: list[dict[str, Any]], version: int, structs: dict[str, Any]) -> list[Any]:
    layout = []
    for f in fields:
        if not _in(f["versions"], version):
            continue
        tag = f.get("tag") if _in(f.get("taggedVersions", ""), version) else None
        kind = f["type"]
        element = kind[2:] if kind.startswith("[]") else kind
        sub = f.get("fields") or structs.get(element, {}).get("fields")
        shape = _json_layout(sub, version, structs) if sub is not None else element
        nullable = tag is None and _in(f.get("nullableVersions", ""), version)
        layout.append((("[]" if kind.startswith("[]") else ""), shape, tag, nullable))
    return layout


def _kio_layout(cls: type) -> list[Any]:
    layout = []
    for f in dataclasses.fields(cls):
        tag = get_field_tag(f)
        nullable = tag is None and is_optional(f)
        match classify_field(f):
            case PrimitiveField():
                kind = get_schema_field_type(f)
                # kio types a uuid `UUID | None`, None being its name for the zero uuid: never null on the wire.
                layout.append(("", _KIO_TYPES.get(kind, kind), tag, nullable and kind != "uuid"))
            case PrimitiveTupleField():
                layout.append(("[]", get_schema_field_type(f), tag, nullable))
            case EntityField(type_=sub):
                layout.append(("", _kio_layout(sub), tag, nullable))
            case EntityTupleField(type_=sub):
                layout.append(("[]", _kio_layout(sub), tag, nullable))
    return layout


_SCHEMA_NAMES = {1: "Fetch", 52: "Vote", 53: "BeginQuorumEpoch", 54: "EndQuorumEpoch", 55: "DescribeQuorum",
                 59: "FetchSnapshot", 80: "AddRaftVoter", 81: "RemoveRaftVoter", 82: "UpdateRaftVoter"}  # fmt: skip


@pytest.mark.parametrize(
    ("api_key", "version", "kind"),
    [
        (k, v, kind)
        for k, (lo, hi) in codec.supported_versions().items()
        for v in range(lo, hi + 1)
        for kind in ("Request", "Response")
    ],
)
def test_kio_lays_each_message_out_as_kafka_39s_schema_does(api_key: int, version: int, kind: str) -> None:
    # kio follows newer Kafka schemas (Vote v1's fields are renamed there): the bytes must still be 3.9's.
    schema = _json_schema(_SCHEMA_NAMES[api_key] + kind)
    structs = {s["name"]: s for s in schema.get("commonStructs", [])}
    entity_type = EntityType.request if kind == "Request" else EntityType.response
    module = load_payload_module(api_key, version, entity_type)
    cls = getattr(module, _SCHEMA_NAMES[api_key] + kind)
    assert bool(cls.__flexible__) == _in(schema["flexibleVersions"], version)
    assert _kio_layout(cls) == _json_layout(schema["fields"], version, structs)


# ---------------------------------------------------------------------------------------------- requests


vote_requests = st.builds(m.VoteRequest, cluster_ids, int32, ids, int32, int64, ids)
begin_requests = st.builds(m.BeginQuorumEpochRequest, cluster_ids, ids, int32, ids)
end_requests = st.builds(
    m.EndQuorumEpochRequest,
    cluster_ids,
    ids,
    int32,
    st.lists(st.integers(0, 2**31 - 1), max_size=4).map(tuple),
)
fetch_requests = st.builds(
    m.FetchRequest, cluster_ids, ids, int32, int64, int32, st.integers(0, 2**31 - 1), int32
)
snapshot_requests = st.builds(
    m.FetchSnapshotRequest,
    cluster_ids, ids, int32, st.builds(m.OffsetAndEpoch, int64, int32), int64, int32,
)  # fmt: skip
REQUESTS = {
    codec.VOTE_KEY: vote_requests,
    codec.BEGIN_QUORUM_EPOCH_KEY: begin_requests,
    codec.END_QUORUM_EPOCH_KEY: end_requests,
    codec.FETCH_KEY: fetch_requests,
    codec.FETCH_SNAPSHOT_KEY: snapshot_requests,
}


def _as_received(request: Any, version: int) -> Any:
    """What a version carries of a request: v0 Vote and BeginQuorumEpoch have no VoterId."""
    if isinstance(request, m.VoteRequest | m.BeginQuorumEpochRequest) and version == 0:
        return dataclasses.replace(request, voter_id=-1)
    return request


@pytest.mark.parametrize(("api_key", "version"), [(k, v) for k, vs in RAFT_VERSIONS.items() for v in vs])
@FAST
@given(data=st.data())
def test_every_request_survives_the_wire_at_every_version(
    api_key: int, version: int, data: st.DataObject
) -> None:
    request = data.draw(REQUESTS[api_key])
    key, got_version, correlation_id, back = _send_request(request, version)
    assert (key, got_version, correlation_id) == (api_key, version, 41)
    assert back == _as_received(request, version)


# ---------------------------------------------------------------------------------------------- responses


def _leaders(draw: st.DrawFn) -> tuple[int, int]:
    return draw(st.sampled_from([-1, 3000, 3001, 3002, 7])), draw(int32)


@st.composite
def epoch_responses(draw: st.DrawFn, cls: type) -> Any:
    if draw(st.booleans()):
        return cls(draw(errors.filter(lambda e: e != 0)))
    leader, epoch = _leaders(draw)
    extra = (draw(st.booleans()),) if cls is m.VoteResponse else ()
    return cls(m.NONE, draw(partition_errors), leader, epoch, *extra)


@st.composite
def fetch_responses(draw: st.DrawFn) -> m.FetchResponse:
    if draw(st.booleans()):
        return m.FetchResponse(draw(errors.filter(lambda e: e != 0)))
    leader, epoch = _leaders(draw)
    return m.FetchResponse(
        m.NONE, draw(partition_errors), leader, epoch, draw(int64), draw(int64), draw(st.binary(max_size=64)),
        draw(st.none() | offsets_epochs), draw(st.none() | offsets_epochs),
    )  # fmt: skip


@st.composite
def snapshot_responses(draw: st.DrawFn) -> m.FetchSnapshotResponse:
    if draw(st.booleans()):
        return m.FetchSnapshotResponse(draw(errors.filter(lambda e: e != 0)))
    leader, epoch = _leaders(draw)
    error = draw(partition_errors)
    if error != m.NONE:  # Kafka sets the snapshot id, size, position and data only on success
        return m.FetchSnapshotResponse(m.NONE, error, leader, epoch)
    return m.FetchSnapshotResponse(
        m.NONE, m.NONE, leader, epoch, draw(st.builds(m.OffsetAndEpoch, int64, int32)), draw(int64), draw(int64),
        draw(st.binary(max_size=64)),
    )  # fmt: skip


RESPONSES = {
    codec.VOTE_KEY: epoch_responses(m.VoteResponse),
    codec.BEGIN_QUORUM_EPOCH_KEY: epoch_responses(m.BeginQuorumEpochResponse),
    codec.END_QUORUM_EPOCH_KEY: epoch_responses(m.EndQuorumEpochResponse),
    codec.FETCH_KEY: fetch_responses(),
    codec.FETCH_SNAPSHOT_KEY: snapshot_responses(),
}


@pytest.mark.parametrize(("api_key", "version"), [(k, v) for k, vs in RAFT_VERSIONS.items() for v in vs])
@FAST
@given(data=st.data())
def test_every_response_survives_the_wire_at_every_version(
    api_key: int, version: int, data: st.DataObject
) -> None:
    response = data.draw(RESPONSES[api_key])
    assert _send_response(response, version) == response


@pytest.mark.parametrize("version", range(0, 3))
@FAST
@given(data=st.data())
def test_a_quorum_description_survives_the_wire(version: int, data: st.DataObject) -> None:
    replicas = st.builds(m.ReplicaDescription, st.integers(0, 2**31 - 1), int64, int64, int64)
    voters = data.draw(st.lists(replicas, max_size=3, unique_by=lambda r: r.replica_id).map(tuple))
    description = m.QuorumDescription(
        m.NONE, data.draw(ids), data.draw(int32), data.draw(int64), voters,
        data.draw(st.lists(replicas, max_size=3).map(tuple)),
        {v.replica_id: m.Endpoint(f"h{v.replica_id}", 9000 + v.replica_id % 1000) for v in voters},
    )  # fmt: skip
    entity = codec.describe_quorum_response(description, version, listener=LISTENER)
    _, body = protocol.decode_response(protocol.encode_response(5, entity), 55, version, "test")
    back = codec.quorum_description(body)
    expected = description
    if version == 0:  # no timestamps before v1
        blank = [dataclasses.replace(r, last_fetch_timestamp=-1, last_caught_up_timestamp=-1) for r in voters]
        expected = dataclasses.replace(
            expected, voters=tuple(blank),
            observers=tuple(dataclasses.replace(r, last_fetch_timestamp=-1, last_caught_up_timestamp=-1)
                            for r in description.observers),
        )  # fmt: skip
    if version < 2:  # no Nodes before v2
        expected = dataclasses.replace(expected, endpoints={})
    assert back == expected


def test_a_describe_quorum_answer_from_a_non_leader_is_kafkas_singleton_error() -> None:
    entity = codec.describe_quorum_response(
        m.QuorumDescription(m.NOT_LEADER_OR_FOLLOWER, 3001, 4), 2, listener=LISTENER
    )
    partition = entity.topics[0].partitions[0]
    assert (entity.error_code, entity.error_message, entity.nodes) == (ErrorCode.none, "", ())
    assert partition.error_code == ErrorCode.not_leader_or_follower
    assert partition.error_message.startswith("For requests intended only for the leader")
    assert (partition.leader_id, partition.leader_epoch, partition.high_watermark) == (0, 0, 0)
    assert codec.quorum_description(entity) == m.QuorumDescription(m.NOT_LEADER_OR_FOLLOWER)


# ---------------------------------------------------------------------------------------------- bytes Kafka fills


def _cstr(text: str) -> bytes:
    data = text.encode()
    return bytes([len(data) + 1]) + data


TOPIC = _cstr("__cluster_metadata")
ZERO_UUID = bytes(16)


def test_vote_v0_carries_no_voter_or_directory_ids_and_v1_carries_them_zero() -> None:
    request = m.VoteRequest("c", 7, 3000, 6, 1234, voter_id=3001)
    partition = struct.pack(">iii", 0, 7, 3000)
    tail = struct.pack(">iq", 6, 1234) + b"\x00"  # partition tagged fields
    v0 = codec.request_to_kio(request, 0, voters=VOTERS, listener=LISTENER)
    assert _body(v0) == _cstr("c") + b"\x02" + TOPIC + b"\x02" + partition + tail + b"\x00" + b"\x00"
    v1 = codec.request_to_kio(request, 1, voters=VOTERS, listener=LISTENER)
    assert _body(v1) == (
        _cstr("c") + struct.pack(">i", 3001) + b"\x02" + TOPIC + b"\x02" + partition + ZERO_UUID + ZERO_UUID + tail
        + b"\x00" + b"\x00"
    )  # fmt: skip


def test_vote_response_v1_names_the_leaders_endpoint_and_v0_cannot() -> None:
    response = m.VoteResponse(m.NONE, m.NONE, 3001, 7, True)
    partition = struct.pack(">ihii?", 0, 0, 3001, 7, True) + b"\x00"
    head = struct.pack(">h", 0) + b"\x02" + TOPIC + b"\x02" + partition + b"\x00"
    v0 = codec.response_to_kio(response, 0, voters=VOTERS)
    assert _body(v0) == head + b"\x00"
    endpoint = struct.pack(">i", 3001) + _cstr("host2") + struct.pack(">H", 9094) + b"\x00"
    tagged = b"\x02" + endpoint
    v1 = codec.response_to_kio(response, 1, voters=VOTERS)
    assert _body(v1) == head + b"\x01" + b"\x00" + bytes([len(tagged)]) + tagged
    # An unknown leader has no endpoint (RaftUtil: leaderId >= 0 and an address on the listener).
    unknown = codec.response_to_kio(m.VoteResponse(m.NONE, m.NONE, -1, 7, False), 1, voters=VOTERS)
    assert unknown.node_endpoints == ()


def test_begin_quorum_epoch_v1_names_the_leaders_listener_and_the_voter() -> None:
    entity = codec.request_to_kio(
        m.BeginQuorumEpochRequest(None, 3000, 9, 3002), 1, voters=VOTERS, listener="RAFT"
    )
    assert entity.voter_id == 3002
    assert entity.topics[0].partitions[0].voter_directory_id is None  # the zero uuid at kraft.version 0
    assert [(e.name, e.host, e.port) for e in entity.leader_endpoints] == [("RAFT", "host1", 9093)]
    v0 = codec.request_to_kio(
        m.BeginQuorumEpochRequest(None, 3000, 9, 3002), 0, voters=VOTERS, listener="RAFT"
    )
    assert _body(v0) == b"\xff\xff" + struct.pack(">i", 1) + struct.pack(">h", 18) + b"__cluster_metadata" + (
        struct.pack(">iiii", 1, 0, 3000, 9)
    )


def test_end_quorum_epoch_orders_successors_by_version_and_sends_no_leader_endpoints() -> None:
    request = m.EndQuorumEpochRequest("c", 3000, 9, (3002, 3001))
    v0 = codec.request_to_kio(request, 0, voters=VOTERS, listener=LISTENER)
    assert v0.topics[0].partitions[0].preferred_successors == (3002, 3001)
    v1 = codec.request_to_kio(request, 1, voters=VOTERS, listener=LISTENER)
    candidates = v1.topics[0].partitions[0].preferred_candidates
    assert [(c.candidate_id, c.candidate_directory_id) for c in candidates] == [(3002, None), (3001, None)]
    assert v1.leader_endpoints == ()  # RaftUtil.singletonEndQuorumEpochRequest leaves them out in 3.9


def test_fetch_request_is_kafkas_raft_fetch() -> None:
    request = m.FetchRequest("c", 3001, 9, 120, 8)
    v17 = codec.request_to_kio(request, 17, voters=VOTERS, listener=LISTENER)
    assert v17.replica_state.replica_id == 3001 and v17.replica_state.replica_epoch == -1
    assert (v17.min_bytes, v17.max_bytes, v17.isolation_level, v17.session_id, v17.session_epoch) == (
        0, 8 * 1024 * 1024, 0, 0, -1,
    )  # fmt: skip
    (topic,) = v17.topics
    assert topic.topic_id == METADATA_TOPIC_ID
    (partition,) = topic.partitions
    assert (partition.partition, partition.current_leader_epoch, partition.fetch_offset) == (0, 9, 120)
    assert (partition.last_fetched_epoch, partition.log_start_offset, partition.partition_max_bytes) == (
        8,
        -1,
        0,
    )
    v14 = codec.request_to_kio(request, 14, voters=VOTERS, listener=LISTENER)
    assert v14.replica_id == 3001  # before v15 the replica id is a plain field
    # An observer without an id (-1) writes no ReplicaState at all: the tagged field's default.
    anonymous = _body(codec.request_to_kio(dataclasses.replace(request, replica_id=-1), 17, voters=VOTERS,
                                           listener=LISTENER))  # fmt: skip
    assert anonymous.endswith(b"\x01" + b"\x00" + b"\x02" + _cstr("c"))  # one tagged field: ClusterId


def test_fetch_response_v17_names_the_leader_and_v16_does_not() -> None:
    response = m.FetchResponse(m.NONE, m.NOT_LEADER_OR_FOLLOWER, 3002, 9, -1, 0)
    v17 = codec.response_to_kio(response, 17, voters=VOTERS)
    assert [(e.node_id, e.host, e.port, e.rack) for e in v17.node_endpoints] == [(3002, "host3", 9095, None)]
    assert codec.response_to_kio(response, 16, voters=VOTERS).node_endpoints == ()
    partition = v17.responses[0].partitions[0]
    assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (3002, 9)
    assert partition.aborted_transactions == ()  # Kafka's generated default: empty, not null
    assert (partition.last_stable_offset, partition.preferred_read_replica) == (-1, -1)
    assert partition.records == b""
    # Diverging epoch and snapshot id stay at their -1 defaults, so neither tag is written.
    assert (partition.diverging_epoch.epoch, partition.snapshot_id.end_offset) == (-1, -1)
    body = _body(v17)
    assert b"\x02" + struct.pack(">i", 3002) + _cstr("host3") + struct.pack(">i", 9095) + b"\x00" in body


def test_fetch_response_diverging_epoch_and_snapshot_id_are_tags_0_and_2() -> None:
    diverging = codec.response_to_kio(
        m.FetchResponse(m.NONE, m.NONE, 3000, 9, 50, 0, b"", diverging_epoch=m.OffsetAndEpoch(40, 7)),
        17,
        voters={},
    )
    partition = diverging.responses[0].partitions[0]
    assert (partition.diverging_epoch.epoch, partition.diverging_epoch.end_offset) == (7, 40)
    assert b"\x00\x0d" + struct.pack(">iq", 7, 40) + b"\x00" in _body(diverging)
    snapshot = codec.response_to_kio(
        m.FetchResponse(m.NONE, m.NONE, 3000, 9, 50, 0, b"", snapshot_id=m.OffsetAndEpoch(40, 7)),
        17,
        voters={},
    )
    assert b"\x02\x0d" + struct.pack(">qi", 40, 7) + b"\x00" in _body(snapshot)


def test_fetch_snapshot_v1_names_the_leader_and_v0_cannot() -> None:
    response = m.FetchSnapshotResponse(m.NONE, m.NONE, 3000, 9, m.OffsetAndEpoch(100, 8), 4096, 0, b"data")
    v1 = codec.response_to_kio(response, 1, voters=VOTERS)
    assert [(e.node_id, e.host, e.port) for e in v1.node_endpoints] == [(3000, "host1", 9093)]
    assert not hasattr(codec.response_to_kio(response, 0, voters=VOTERS), "node_endpoints")
    request = codec.request_to_kio(
        m.FetchSnapshotRequest("c", 3001, 9, m.OffsetAndEpoch(100, 8), 0), 1, voters=VOTERS, listener=LISTENER
    )
    assert request.topics[0].partitions[0].replica_directory_id is None  # zero uuid: the tag is not written


def test_describe_quorum_v2_lists_every_voters_listener_and_empty_messages() -> None:
    description = m.QuorumDescription(
        m.NONE, 3000, 9, 77,
        tuple(m.ReplicaDescription(v, 77, 1000, 1000) for v in sorted(VOTERS)),
        (m.ReplicaDescription(1, 70, 900, 800),),
        dict(VOTERS),
    )  # fmt: skip
    entity = codec.describe_quorum_response(description, 2, listener="RAFT")
    assert [(n.node_id, [(x.name, x.host, x.port) for x in n.listeners]) for n in entity.nodes] == [
        (3000, [("RAFT", "host1", 9093)]), (3001, [("RAFT", "host2", 9094)]), (3002, [("RAFT", "host3", 9095)]),
    ]  # fmt: skip
    assert entity.error_message == "" and entity.topics[0].partitions[0].error_message == ""
    assert all(r.replica_directory_id is None for r in entity.topics[0].partitions[0].current_voters)
    assert codec.describe_quorum_request(2).topics[0].topic_name == "__cluster_metadata"


def test_top_level_errors_carry_nothing_else() -> None:
    for key, versions in RAFT_VERSIONS.items():
        for version in versions:
            entity = codec.error_response(key, version, m.INCONSISTENT_CLUSTER_ID)
            assert entity.error_code == ErrorCode.inconsistent_cluster_id
            assert getattr(entity, "topics", getattr(entity, "responses", None)) == ()
            assert getattr(entity, "node_endpoints", ()) == ()
    quorum = codec.error_response(codec.DESCRIBE_QUORUM_KEY, 2, int(ErrorCode.cluster_authorization_failed))
    assert quorum.error_message == "Cluster authorization failed."


@pytest.mark.parametrize(
    ("api_key", "message"),
    [
        (80, "Cluster doesn't support adding voter because the kraft.version feature is 0"),
        (81, "Cluster doesn't support removing voter because the kraft.version feature is 0"),
    ],
)
def test_add_and_remove_voter_are_refused_as_a_static_quorum(api_key: int, message: str) -> None:
    entity = codec.reconfiguration_refusal(api_key, 0)
    assert (entity.error_code, entity.error_message) == (ErrorCode.unsupported_version, message)
    _, back = protocol.decode_response(protocol.encode_response(3, entity), api_key, 0, "test")
    assert back == entity


def test_update_voter_is_refused_naming_the_leader() -> None:
    entity = codec.reconfiguration_refusal(82, 0, leader_id=3000, leader_epoch=9, voters=VOTERS)
    assert entity.error_code == ErrorCode.unsupported_version
    leader = entity.current_leader
    assert (leader.leader_id, leader.leader_epoch, leader.host, leader.port) == (3000, 9, "host1", 9093)
    _, back = protocol.decode_response(protocol.encode_response(3, entity), 82, 0, "test")
    assert back == entity


# ---------------------------------------------------------------------------------------------- refusals


def _vote_entity(version: int, **changes: Any) -> Any:
    entity = codec.request_to_kio(
        m.VoteRequest("c", 7, 3000, 6, 10), version, voters=VOTERS, listener=LISTENER
    )
    return dataclasses.replace(entity, **changes)


@pytest.mark.parametrize("version", [0, 1])
def test_a_vote_for_another_partition_is_an_invalid_request(version: int) -> None:
    good = _vote_entity(version)
    topic = good.topics[0]
    wrong = [
        dataclasses.replace(good, topics=()),
        dataclasses.replace(good, topics=(topic, topic)),
        dataclasses.replace(good, topics=(dataclasses.replace(topic, topic_name="other"),)),
        dataclasses.replace(good, topics=(dataclasses.replace(topic, partitions=()),)),
        dataclasses.replace(good, topics=(dataclasses.replace(
            topic, partitions=(dataclasses.replace(topic.partitions[0], partition_index=i32(1)),)),)),
    ]  # fmt: skip
    for entity in wrong:
        with pytest.raises(codec.RaftRequestRefused) as refused:
            decode_request_payload(protocol.encode_request(entity, 1, None), "peer")
        assert refused.value.error_code == m.INVALID_REQUEST
        answer = refused.value.response()
        assert (answer.error_code, answer.topics) == (ErrorCode.invalid_request, ())


def test_a_fetch_without_the_metadata_topic_id_is_an_invalid_request() -> None:
    good = codec.request_to_kio(m.FetchRequest("c", 1, 9, 0, 0), 17, voters=VOTERS, listener=LISTENER)
    topic = good.topics[0]
    for entity in (
        dataclasses.replace(good, topics=(dataclasses.replace(topic, topic_id=uuid.uuid4()),)),
        dataclasses.replace(good, topics=(topic, topic)),
    ):
        with pytest.raises(codec.RaftRequestRefused) as refused:
            codec.request_from_kio(entity)
        answer = refused.value.response()
        assert (answer.error_code, answer.responses) == (ErrorCode.invalid_request, ())
    old = load_payload_module(1, 12, EntityType.request)
    v12 = old.FetchRequest(
        replica_id=i32(1), max_wait=good.max_wait, min_bytes=i32(0),
        topics=(old.FetchTopic(topic="__cluster_metadata", partitions=()),), forgotten_topics_data=(), rack_id="",
    )  # fmt: skip
    with pytest.raises(codec.RaftRequestRefused, match="no topic id"):
        decode_request_payload(protocol.encode_request(v12, 1, None), "peer")


def test_a_fetch_snapshot_of_another_partition_is_unknown_naming_it() -> None:
    good = codec.request_to_kio(
        m.FetchSnapshotRequest("c", 1, 9, m.OffsetAndEpoch(10, 2), 0), 1, voters=VOTERS, listener=LISTENER
    )
    other = dataclasses.replace(good.topics[0], name="orders")
    with pytest.raises(codec.RaftRequestRefused) as refused:
        codec.request_from_kio(dataclasses.replace(good, topics=(other,)))
    answer = refused.value.response(leader_id=3000, voters=VOTERS)
    partition = answer.topics[0].partitions[0]
    assert (answer.error_code, answer.topics[0].name) == (ErrorCode.none, "orders")
    assert (partition.index, partition.error_code) == (0, ErrorCode.unknown_topic_or_partition)
    assert [(e.node_id, e.host) for e in answer.node_endpoints] == [(3000, "host1")]
    protocol.encode_response(1, answer)  # encodable (Kafka's own object holds null records here)
    # Kafka's guard only fails a request with no first topic partition; extra ones are ignored.
    assert codec.request_from_kio(dataclasses.replace(good, topics=(other, good.topics[0]))).replica_id == 1
    with pytest.raises(codec.RaftRequestRefused) as empty:
        codec.request_from_kio(dataclasses.replace(good, topics=()))
    assert empty.value.response().error_code == ErrorCode.invalid_request


def test_a_describe_quorum_of_other_partitions_answers_each_unknown() -> None:
    module = load_payload_module(55, 2, EntityType.request)
    request = module.DescribeQuorumRequest(topics=(
        module.TopicData(topic_name="__cluster_metadata", partitions=(module.PartitionData(partition_index=i32(0)),)),
        module.TopicData(topic_name="orders", partitions=(module.PartitionData(partition_index=i32(3)),)),
    ))  # fmt: skip
    with pytest.raises(codec.RaftRequestRefused) as refused:
        decode_request_payload(protocol.encode_request(request, 1, None), "peer")
    answer = refused.value.response()
    assert [
        (t.topic_name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in answer.topics
    ] == [
        ("__cluster_metadata", [(0, ErrorCode.unknown_topic_or_partition)]),
        ("orders", [(3, ErrorCode.unknown_topic_or_partition)]),
    ]
    assert answer.topics[0].partitions[0].error_message == "This server does not host this topic-partition."
    codec.check_describe_quorum_request(codec.describe_quorum_request(2))


def test_a_response_for_another_partition_is_not_taken() -> None:
    good = codec.response_to_kio(m.VoteResponse(m.NONE, m.NONE, 3000, 7, True), 1, voters=VOTERS)
    other = dataclasses.replace(good, topics=(dataclasses.replace(good.topics[0], topic_name="x"),))
    with pytest.raises(codec.InvalidRaftResponse):
        decode_response_payload(protocol.encode_response(1, other), 52, 1, "peer")


# ---------------------------------------------------------------------------------------------- hostile bytes


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([*sorted(RAFT_VERSIONS), 55]), st.integers(0, 17), st.binary(max_size=200))
def test_arbitrary_request_bytes_raise_only_our_errors(api_key: int, version: int, tail: bytes) -> None:
    payload = struct.pack(">hhi", api_key, version, 1) + tail
    with contextlib.suppress(Zk2KraftError):
        decode_request_payload(payload, "fuzz")


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([(k, v) for k, vs in RAFT_VERSIONS.items() for v in vs]), st.binary(max_size=200))
def test_arbitrary_response_bytes_raise_only_our_errors(key_version: tuple[int, int], payload: bytes) -> None:
    with contextlib.suppress(Zk2KraftError):
        decode_response_payload(payload, *key_version, "fuzz")


@pytest.mark.parametrize(("api_key", "version"), [(k, v) for k, vs in RAFT_VERSIONS.items() for v in vs])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_damaged_real_requests_raise_only_our_errors(api_key: int, version: int, data: st.DataObject) -> None:
    entity = codec.request_to_kio(data.draw(REQUESTS[api_key]), version, voters=VOTERS, listener=LISTENER)
    payload = bytearray(protocol.encode_request(entity, 1, "c"))
    for _ in range(data.draw(st.integers(1, 4))):
        payload[data.draw(st.integers(4, len(payload) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(4, len(payload)))
    with contextlib.suppress(Zk2KraftError):
        decode_request_payload(bytes(payload[:cut]), "fuzz")


# The requests tests.support.strategies.kio_entities can draw (it has no strategy for durations or uint16).
@pytest.mark.parametrize(("api_key", "version"), [(52, 0), (52, 1), (53, 0), (54, 0), (59, 0), (59, 1)])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_well_formed_request_decodes_or_is_refused(
    api_key: int, version: int, data: st.DataObject
) -> None:
    cls = getattr(load_payload_module(api_key, version, EntityType.request), re.sub(
        r"(^|_)(\w)", lambda g: g.group(2).upper(), protocol.api_key_map[api_key]) + "Request")  # fmt: skip
    entity = data.draw(kio_entities(cls))
    try:
        codec.request_from_kio(entity)
    except codec.RaftRequestRefused as refused:
        protocol.encode_response(1, refused.response(leader_id=3000, voters=VOTERS))


@pytest.mark.parametrize("version", range(0, 3))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_any_well_formed_describe_quorum_is_checked_or_answered(version: int, data: st.DataObject) -> None:
    entity = data.draw(
        kio_entities(load_payload_module(55, version, EntityType.request).DescribeQuorumRequest)
    )
    try:
        codec.check_describe_quorum_request(entity)
    except codec.RaftRequestRefused as refused:
        answer = refused.response()
        assert sum(len(t.partitions) for t in answer.topics) == sum(len(t.partitions) for t in entity.topics)
        protocol.encode_response(1, answer)
