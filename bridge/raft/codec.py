"""The Raft RPCs on the wire: version-neutral `bridge.raft.messages` to and from the kio entities Kafka 3.9 sends.

Kafka's counterpart is `RaftUtil` (the singleton* request/response builders and `hasValidTopicPartition`), with
the fields `KafkaRaftClient` fills around them, and the generated `*Data` classes' defaults for what it leaves
unset. Everything concerns the single partition `__cluster_metadata`-0 (named by METADATA_TOPIC_ID where Fetch
has topic ids). At kraft.version 0 every directory id is the zero uuid and endpoints come from the static
voters (`controller.quorum.voters`), registered under the first controller listener name.

Decoding a request that names another partition raises `RaftRequestRefused`, whose `response()` is Kafka's
answer; a response that does not name the metadata partition raises `InvalidRaftResponse` (Kafka drops it and
backs off). Bytes that are no message at all raise `CorruptDataError` from `bridge.kafka.protocol`.

Departures from Kafka, with reasons: Fetch v0-3 are not offered (kio has no schema for them; Kafka's
controller refuses them for the metadata partition anyway, having no topic id below v13). A FetchSnapshot
answer without data carries empty records where Kafka's object holds null, which its serializer cannot write.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any, Final

from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType
from kio.static.primitive import i8, i32, i32Timedelta, i64, u16

from bridge.handlers._common import NO_THROTTLE, build, default_message, nested
from bridge.kafka import protocol
from bridge.raft import messages as m
from migrate.errors import InvalidRequestError, UnsupportedVersionError, Zk2KraftError
from migrate.kraft.logdir import METADATA_TOPIC_ID

FETCH_KEY: Final = 1
VOTE_KEY: Final = 52
BEGIN_QUORUM_EPOCH_KEY: Final = 53
END_QUORUM_EPOCH_KEY: Final = 54
DESCRIBE_QUORUM_KEY: Final = 55
FETCH_SNAPSHOT_KEY: Final = 59
ADD_RAFT_VOTER_KEY: Final = 80
REMOVE_RAFT_VOTER_KEY: Final = 81
UPDATE_RAFT_VOTER_KEY: Final = 82

METADATA_TOPIC: Final = "__cluster_metadata"
METADATA_PARTITION: Final = 0
FIRST_TOPIC_ID_FETCH: Final = 13
"""Fetch has topic ids from v13; KafkaRaftClient refuses older versions (no topic id matches)."""
FIRST_REPLICA_STATE_FETCH: Final = 15
"""Fetch carries the replica id in the tagged ReplicaState from v15 (FetchRequest.replicaId)."""
FIRST_NODE_ENDPOINTS_FETCH: Final = 17
"""RaftUtil.singletonFetchResponse fills NodeEndpoints from v17 only (the field exists from v16)."""
KRAFT_VERSION_FEATURE: Final = "kraft.version"
UNSUPPORTED_VERSION: Final = int(ErrorCode.unsupported_version)
REQUEST_TIMED_OUT: Final = int(ErrorCode.request_timed_out)

_SUPPORTED: Final[Mapping[int, tuple[int, int]]] = {
    FETCH_KEY: (4, 17),
    VOTE_KEY: (0, 1),
    BEGIN_QUORUM_EPOCH_KEY: (0, 1),
    END_QUORUM_EPOCH_KEY: (0, 1),
    DESCRIBE_QUORUM_KEY: (0, 2),
    FETCH_SNAPSHOT_KEY: (0, 1),
    ADD_RAFT_VOTER_KEY: (0, 0),
    REMOVE_RAFT_VOTER_KEY: (0, 0),
    UPDATE_RAFT_VOTER_KEY: (0, 0),
}
_REQUEST_KEYS: Final[Mapping[type, int]] = {
    m.VoteRequest: VOTE_KEY,
    m.BeginQuorumEpochRequest: BEGIN_QUORUM_EPOCH_KEY,
    m.EndQuorumEpochRequest: END_QUORUM_EPOCH_KEY,
    m.FetchRequest: FETCH_KEY,
    m.FetchSnapshotRequest: FETCH_SNAPSHOT_KEY,
}
_RESPONSE_KEYS: Final[Mapping[type, int]] = {
    m.VoteResponse: VOTE_KEY,
    m.BeginQuorumEpochResponse: BEGIN_QUORUM_EPOCH_KEY,
    m.EndQuorumEpochResponse: END_QUORUM_EPOCH_KEY,
    m.FetchResponse: FETCH_KEY,
    m.FetchSnapshotResponse: FETCH_SNAPSHOT_KEY,
}
_RECONFIGURATION_VERBS: Final = {ADD_RAFT_VOTER_KEY: "adding", REMOVE_RAFT_VOTER_KEY: "removing"}


def request_api_key(request: m.RaftRequest) -> int:
    """The api key `request` travels as."""
    return _REQUEST_KEYS[type(request)]


def response_api_key(response: m.RaftResponse) -> int:
    """The api key `response` answers."""
    return _RESPONSE_KEYS[type(response)]


def supported_versions() -> dict[int, tuple[int, int]]:
    """The (min, max) version of each Raft api key this codec speaks, as a Kafka 3.9 controller's ApiVersions."""
    return dict(_SUPPORTED)


# ---------------------------------------------------------------------------------------------- errors


class RaftRequestRefused(InvalidRequestError):
    """A well-formed Raft request that does not name the metadata partition as Kafka requires.

    `response()` is Kafka's answer: top-level INVALID_REQUEST, or a partition-level UNKNOWN_TOPIC_OR_PARTITION
    naming what was asked (FetchSnapshot, DescribeQuorum).
    """

    def __init__(
        self,
        api_key: int,
        api_version: int,
        error_code: int,
        problem: str,
        asked: tuple[tuple[str, tuple[int, ...]], ...] = (),
    ) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.error_code = error_code
        self.problem = problem
        self.asked = asked
        """The (topic, partitions) the request named, for a partition-level answer."""
        super().__init__(f"{protocol.describe_api(api_key, api_version)}: {problem}")

    def response(
        self, *, leader_id: int = m.NO_LEADER, voters: Mapping[int, m.Endpoint] | None = None
    ) -> Any:
        """Kafka's answer to this request (FetchSnapshot v1 names the leader's endpoint, as RaftUtil does)."""
        if self.error_code != int(ErrorCode.unknown_topic_or_partition):
            return error_response(self.api_key, self.api_version, self.error_code)
        if self.api_key == DESCRIBE_QUORUM_KEY:
            return _describe_quorum_partition_errors(self.api_version, self.asked, self.error_code)
        topic, partitions = self.asked[0]
        module = _response_module(FETCH_SNAPSHOT_KEY, self.api_version)
        item = module.PartitionSnapshot(
            index=i32(partitions[0]),
            error_code=ErrorCode.unknown_topic_or_partition,
            snapshot_id=module.SnapshotId(end_offset=i64(0), epoch=i32(0)),
            current_leader=module.LeaderIdAndEpoch(leader_id=i32(0), leader_epoch=i32(0)),
            size=i64(0),
            position=i64(0),
            unaligned_records=b"",
        )
        return build(
            module.FetchSnapshotResponse,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none,
            topics=(module.TopicSnapshot(name=topic, partitions=(item,)),),
            node_endpoints=_node_endpoints(module, self.api_version >= 1, leader_id, voters or {}),
        )


class InvalidRaftResponse(Zk2KraftError):
    """A Raft response that does not answer for the metadata partition (Kafka counts it as a failed request)."""


# ---------------------------------------------------------------------------------------------- kio plumbing


def _request_module(api_key: int, version: int) -> Any:
    check_version(api_key, version)
    return load_payload_module(api_key, version, EntityType.request)


def _response_module(api_key: int, version: int) -> Any:
    check_version(api_key, version)
    return load_payload_module(api_key, version, EntityType.response)


def check_version(api_key: int, version: int) -> None:
    low, high = _SUPPORTED.get(api_key, (0, -1))
    if not low <= version <= high:
        raise UnsupportedVersionError(
            f"{protocol.describe_api(api_key, version)} is not a Raft version Kafka 3.9 speaks"
        )


def _error_code(code: int) -> ErrorCode:
    try:
        return ErrorCode(code)
    except ValueError:
        raise Zk2KraftError(f"error code {code} is not one Kafka defines") from None


def _converted(what: str, convert: Callable[[], Any]) -> Any:
    """Run a conversion, reporting out-of-range values (kio's bounded ints raise TypeError) as our error."""
    try:
        return convert()
    except Zk2KraftError:
        raise
    except (TypeError, ValueError, OverflowError) as exc:
        raise Zk2KraftError(f"cannot encode {what}: {exc}") from exc


def _first(entity: Any, *names: str) -> Any:
    """The value of the first of `names` the entity has (kio names some 3.9 fields as later Kafka renamed them)."""
    for name in names:
        if hasattr(entity, name):
            return getattr(entity, name)
    raise AttributeError(f"{type(entity).__name__} has none of {names}")


def _ms(value: timedelta) -> int:
    return value // timedelta(milliseconds=1)


def _leader_address(leader_id: int, voters: Mapping[int, m.Endpoint]) -> m.Endpoint | None:
    """Endpoints.address(listener) of the leader: known when it is one of the static voters."""
    return voters.get(leader_id) if leader_id >= 0 else None


def _node_endpoints(
    module: Any, present: bool, leader_id: int, voters: Mapping[int, m.Endpoint]
) -> tuple[Any, ...]:
    """The response NodeEndpoints RaftUtil fills: the leader's address on the request's listener, if known."""
    address = _leader_address(leader_id, voters)
    if not present or address is None:
        return ()
    return (
        build(
            module.NodeEndpoint, node_id=i32(leader_id), host=address.host, port=u16(address.port), rack=None
        ),
    )


def _leader_endpoints(
    module: Any, leader_id: int, voters: Mapping[int, m.Endpoint], listener: str
) -> tuple[Any, ...]:
    """Endpoints.toBeginQuorumEpochRequest: the leader's listeners (a static voter has the one it is named by)."""
    address = voters.get(leader_id)
    if address is None or not hasattr(module, "LeaderEndpoint"):
        return ()
    return (module.LeaderEndpoint(name=listener, host=address.host, port=u16(address.port)),)


def _single_partition(
    api_key: int,
    version: int,
    topics: tuple[Any, ...],
    name_of: Callable[[Any], Any],
    index_of: Callable[[Any], int],
) -> Any:
    """RaftUtil.hasValidTopicPartition for a request: exactly one topic, the metadata one, with partition 0."""
    if len(topics) != 1 or len(topics[0].partitions) != 1:
        counts = [len(t.partitions) for t in topics]
        raise RaftRequestRefused(
            api_key, version, int(ErrorCode.invalid_request),
            f"expected one topic with one partition, got {len(topics)} topics with {counts} partitions",
        )  # fmt: skip
    topic, partition = topics[0], topics[0].partitions[0]
    named = name_of(topic)
    if named != (METADATA_TOPIC_ID if api_key == FETCH_KEY else METADATA_TOPIC) or index_of(partition) != 0:
        raise RaftRequestRefused(
            api_key, version, int(ErrorCode.invalid_request),
            f"names {named}-{index_of(partition)}, not {METADATA_TOPIC}-{METADATA_PARTITION}",
        )  # fmt: skip
    return partition


def _response_partition(
    entity: Any, topics: tuple[Any, ...], name_of: Callable[[Any], Any], index_of: Callable[[Any], int]
) -> Any:
    """RaftUtil.hasValidTopicPartition for a response (Kafka drops one that fails it)."""
    expected = METADATA_TOPIC_ID if int(entity.__api_key__) == FETCH_KEY else METADATA_TOPIC
    if len(topics) != 1 or len(topics[0].partitions) != 1:
        raise InvalidRaftResponse(
            f"{_describe(entity)} response does not hold exactly one topic and partition"
        )
    topic, partition = topics[0], topics[0].partitions[0]
    if name_of(topic) != expected or index_of(partition) != METADATA_PARTITION:
        raise InvalidRaftResponse(
            f"{_describe(entity)} response names {name_of(topic)}-{index_of(partition)}, "
            f"not {METADATA_TOPIC}-{METADATA_PARTITION}"
        )
    return partition


def _describe(entity: Any) -> str:
    return protocol.describe_api(int(entity.__api_key__), int(entity.__version__))


# ---------------------------------------------------------------------------------------------- requests


def request_to_kio(
    request: m.RaftRequest, version: int, *, voters: Mapping[int, m.Endpoint], listener: str
) -> Any:
    """The kio request Kafka 3.9's KafkaRaftClient sends for `request` at `version` (RaftUtil.singleton*Request).

    `voters` and `listener` name the leader's endpoint in BeginQuorumEpoch v1's LeaderEndpoints.
    """
    api_key = _REQUEST_KEYS[type(request)]
    module = _request_module(api_key, version)
    return _converted(protocol.describe_api(api_key, version), lambda: _REQUEST_ENCODERS[api_key](
        module, version, request, voters, listener
    ))  # fmt: skip


def _vote_request(module: Any, version: int, r: m.VoteRequest, voters: Any, listener: str) -> Any:
    partition = build(
        module.PartitionData,
        partition_index=i32(METADATA_PARTITION),
        candidate_epoch=i32(r.candidate_epoch),
        replica_epoch=i32(r.candidate_epoch),
        candidate_id=i32(r.candidate_id),
        replica_id=i32(r.candidate_id),
        candidate_directory_id=None,
        replica_directory_id=None,
        voter_directory_id=None,
        last_offset_epoch=i32(r.last_offset_epoch),
        last_offset=i64(r.last_offset),
    )
    return build(
        module.VoteRequest,
        cluster_id=r.cluster_id,
        voter_id=i32(r.voter_id),
        topics=(module.TopicData(topic_name=METADATA_TOPIC, partitions=(partition,)),),
    )


def _begin_request(
    module: Any, version: int, r: m.BeginQuorumEpochRequest, voters: Any, listener: str
) -> Any:
    partition = build(
        module.PartitionData,
        partition_index=i32(METADATA_PARTITION),
        voter_directory_id=None,
        leader_id=i32(r.leader_id),
        leader_epoch=i32(r.leader_epoch),
    )
    return build(
        module.BeginQuorumEpochRequest,
        cluster_id=r.cluster_id,
        voter_id=i32(r.voter_id),
        topics=(module.TopicData(topic_name=METADATA_TOPIC, partitions=(partition,)),),
        leader_endpoints=_leader_endpoints(module, r.leader_id, voters, listener),
    )


def _end_request(module: Any, version: int, r: m.EndQuorumEpochRequest, voters: Any, listener: str) -> Any:
    candidates = (
        tuple(
            module.ReplicaInfo(candidate_id=i32(c), candidate_directory_id=None)
            for c in r.preferred_successors
        )
        if hasattr(module, "ReplicaInfo")
        else ()
    )
    partition = build(
        module.PartitionData,
        partition_index=i32(METADATA_PARTITION),
        leader_id=i32(r.leader_id),
        leader_epoch=i32(r.leader_epoch),
        preferred_successors=tuple(i32(c) for c in r.preferred_successors),
        preferred_candidates=candidates,
    )
    # RaftUtil.singletonEndQuorumEpochRequest leaves LeaderEndpoints empty in 3.9.
    return build(
        module.EndQuorumEpochRequest,
        cluster_id=r.cluster_id,
        topics=(module.TopicData(topic_name=METADATA_TOPIC, partitions=(partition,)),),
        leader_endpoints=(),
    )


def _fetch_request(module: Any, version: int, r: m.FetchRequest, voters: Any, listener: str) -> Any:
    partition = build(
        module.FetchPartition,
        partition=i32(METADATA_PARTITION),
        current_leader_epoch=i32(r.current_leader_epoch),
        fetch_offset=i64(r.fetch_offset),
        last_fetched_epoch=i32(r.last_fetched_epoch),
        log_start_offset=i64(-1),
        partition_max_bytes=i32(0),
        replica_directory_id=None,
    )
    replica_state = (
        {"replica_state": module.ReplicaState(replica_id=i32(r.replica_id), replica_epoch=i64(-1))}
        if version >= FIRST_REPLICA_STATE_FETCH
        else {"replica_id": i32(r.replica_id)}
    )
    return build(
        module.FetchRequest,
        cluster_id=r.cluster_id,
        **replica_state,
        max_wait=i32Timedelta.parse(timedelta(milliseconds=r.max_wait_ms)),
        min_bytes=i32(0),
        max_bytes=i32(r.max_bytes),
        isolation_level=i8(0),
        session_id=i32(0),
        session_epoch=i32(-1),
        topics=(
            build(
                module.FetchTopic, topic_id=METADATA_TOPIC_ID, topic=METADATA_TOPIC, partitions=(partition,)
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


def _fetch_snapshot_request(
    module: Any, version: int, r: m.FetchSnapshotRequest, voters: Any, listener: str
) -> Any:
    partition = build(
        module.PartitionSnapshot,
        partition=i32(METADATA_PARTITION),
        current_leader_epoch=i32(r.current_leader_epoch),
        snapshot_id=module.SnapshotId(end_offset=i64(r.snapshot_id.offset), epoch=i32(r.snapshot_id.epoch)),
        position=i64(r.position),
        replica_directory_id=None,
    )
    return module.FetchSnapshotRequest(
        cluster_id=r.cluster_id,
        replica_id=i32(r.replica_id),
        max_bytes=i32(r.max_bytes),
        topics=(module.TopicSnapshot(name=METADATA_TOPIC, partitions=(partition,)),),
    )


_REQUEST_ENCODERS: Final[dict[int, Callable[[Any, int, Any, Any, str], Any]]] = {
    VOTE_KEY: _vote_request,
    BEGIN_QUORUM_EPOCH_KEY: _begin_request,
    END_QUORUM_EPOCH_KEY: _end_request,
    FETCH_KEY: _fetch_request,
    FETCH_SNAPSHOT_KEY: _fetch_snapshot_request,
}


def request_from_kio(entity: Any) -> m.RaftRequest:
    """The neutral request of a kio Vote/BeginQuorumEpoch/EndQuorumEpoch/Fetch/FetchSnapshot request.

    A request that does not name `__cluster_metadata`-0 (by topic id for Fetch) raises `RaftRequestRefused`.
    """
    api_key, version = int(entity.__api_key__), int(entity.__version__)
    check_version(api_key, version)
    decode = _REQUEST_DECODERS.get(api_key)
    if decode is None:
        raise UnsupportedVersionError(f"{protocol.describe_api(api_key, version)} is not a Raft request")
    return decode(entity, version)


def _vote_from(entity: Any, version: int) -> m.VoteRequest:
    p = _single_partition(
        VOTE_KEY, version, entity.topics, lambda t: t.topic_name, lambda p: int(p.partition_index)
    )
    return m.VoteRequest(
        cluster_id=entity.cluster_id,
        candidate_epoch=int(_first(p, "candidate_epoch", "replica_epoch")),
        candidate_id=int(_first(p, "candidate_id", "replica_id")),
        last_offset_epoch=int(p.last_offset_epoch),
        last_offset=int(p.last_offset),
        voter_id=int(getattr(entity, "voter_id", m.NO_LEADER)),
    )


def _begin_from(entity: Any, version: int) -> m.BeginQuorumEpochRequest:
    p = _single_partition(
        BEGIN_QUORUM_EPOCH_KEY,
        version,
        entity.topics,
        lambda t: t.topic_name,
        lambda p: int(p.partition_index),
    )
    return m.BeginQuorumEpochRequest(
        cluster_id=entity.cluster_id,
        leader_id=int(p.leader_id),
        leader_epoch=int(p.leader_epoch),
        voter_id=int(getattr(entity, "voter_id", m.NO_LEADER)),
    )


def _end_from(entity: Any, version: int) -> m.EndQuorumEpochRequest:
    p = _single_partition(
        END_QUORUM_EPOCH_KEY, version, entity.topics, lambda t: t.topic_name, lambda p: int(p.partition_index)
    )
    # EndQuorumEpochRequest.preferredCandidates: the v1 list, else the v0 ids.
    candidates = getattr(p, "preferred_candidates", ())
    successors = (
        tuple(int(c.candidate_id) for c in candidates)
        if candidates
        else tuple(int(s) for s in getattr(p, "preferred_successors", ()))
    )
    return m.EndQuorumEpochRequest(
        cluster_id=entity.cluster_id,
        leader_id=int(p.leader_id),
        leader_epoch=int(p.leader_epoch),
        preferred_successors=successors,
    )


def _fetch_from(entity: Any, version: int) -> m.FetchRequest:
    if version < FIRST_TOPIC_ID_FETCH:
        raise RaftRequestRefused(
            FETCH_KEY, version, int(ErrorCode.invalid_request),
            f"has no topic id (from v{FIRST_TOPIC_ID_FETCH}), so cannot name {METADATA_TOPIC}",
        )  # fmt: skip
    p = _single_partition(FETCH_KEY, version, entity.topics, lambda t: t.topic_id, lambda p: int(p.partition))
    replica_id = (
        entity.replica_state.replica_id if version >= FIRST_REPLICA_STATE_FETCH else entity.replica_id
    )
    return m.FetchRequest(
        cluster_id=entity.cluster_id,
        replica_id=int(replica_id),
        current_leader_epoch=int(p.current_leader_epoch),
        fetch_offset=int(p.fetch_offset),
        last_fetched_epoch=int(p.last_fetched_epoch),
        max_wait_ms=_ms(entity.max_wait),
        max_bytes=int(entity.max_bytes),
    )


def _fetch_snapshot_from(entity: Any, version: int) -> m.FetchSnapshotRequest:
    topics = entity.topics
    # KafkaRaftClient's guard reads `size() != 1 && ...`: only a request without a first item fails it.
    if not topics or not topics[0].partitions:
        raise RaftRequestRefused(
            FETCH_SNAPSHOT_KEY, version, int(ErrorCode.invalid_request), "names no topic partition"
        )
    # FetchSnapshotRequest.forTopicPartition: any item naming the metadata partition.
    wanted = next(
        (p for t in topics if t.name == METADATA_TOPIC for p in t.partitions if int(p.partition) == 0), None
    )
    if wanted is None:
        first = topics[0]
        raise RaftRequestRefused(
            FETCH_SNAPSHOT_KEY, version, int(ErrorCode.unknown_topic_or_partition),
            f"names {first.name}-{int(first.partitions[0].partition)}, not {METADATA_TOPIC}-{METADATA_PARTITION}",
            ((first.name, (int(first.partitions[0].partition),)),),
        )  # fmt: skip
    return m.FetchSnapshotRequest(
        cluster_id=entity.cluster_id,
        replica_id=int(entity.replica_id),
        current_leader_epoch=int(wanted.current_leader_epoch),
        snapshot_id=m.OffsetAndEpoch(int(wanted.snapshot_id.end_offset), int(wanted.snapshot_id.epoch)),
        position=int(wanted.position),
        max_bytes=int(entity.max_bytes),
    )


_REQUEST_DECODERS: Final[dict[int, Callable[[Any, int], m.RaftRequest]]] = {
    VOTE_KEY: _vote_from,
    BEGIN_QUORUM_EPOCH_KEY: _begin_from,
    END_QUORUM_EPOCH_KEY: _end_from,
    FETCH_KEY: _fetch_from,
    FETCH_SNAPSHOT_KEY: _fetch_snapshot_from,
}


# ---------------------------------------------------------------------------------------------- responses


def response_to_kio(response: m.RaftResponse, version: int, *, voters: Mapping[int, m.Endpoint]) -> Any:
    """The kio response Kafka 3.9 answers with at `version` (RaftUtil.singleton*Response as KafkaRaftClient fills
    it): a top-level error alone, else the metadata partition and, where the version has them, NodeEndpoints
    naming the leader's address among `voters`."""
    api_key = _RESPONSE_KEYS[type(response)]
    if response.error_code != m.NONE:
        return error_response(api_key, version, response.error_code)
    module = _response_module(api_key, version)
    return _converted(protocol.describe_api(api_key, version), lambda: _RESPONSE_ENCODERS[api_key](
        module, version, response, voters
    ))  # fmt: skip


def _epoch_response(module: Any, version: int, r: Any, voters: Any, response_cls: str, **extra: Any) -> Any:
    """Vote/BeginQuorumEpoch/EndQuorumEpoch answers: one partition and, from v1, the leader's endpoint."""
    partition = build(
        module.PartitionData,
        partition_index=i32(METADATA_PARTITION),
        error_code=_error_code(r.partition_error),
        leader_id=i32(r.leader_id),
        leader_epoch=i32(r.leader_epoch),
        **extra,
    )
    return build(
        getattr(module, response_cls),
        error_code=ErrorCode.none,
        topics=(module.TopicData(topic_name=METADATA_TOPIC, partitions=(partition,)),),
        node_endpoints=_node_endpoints(module, version >= 1, r.leader_id, voters),
    )


def _vote_response(module: Any, version: int, r: m.VoteResponse, voters: Any) -> Any:
    return _epoch_response(module, version, r, voters, "VoteResponse", vote_granted=r.vote_granted)


def _begin_response(module: Any, version: int, r: m.BeginQuorumEpochResponse, voters: Any) -> Any:
    return _epoch_response(module, version, r, voters, "BeginQuorumEpochResponse")


def _end_response(module: Any, version: int, r: m.EndQuorumEpochResponse, voters: Any) -> Any:
    return _epoch_response(module, version, r, voters, "EndQuorumEpochResponse")


def _fetch_response(module: Any, version: int, r: m.FetchResponse, voters: Any) -> Any:
    partition_cls = module.PartitionData
    values: dict[str, Any] = {
        "partition_index": i32(METADATA_PARTITION),
        "error_code": _error_code(r.partition_error),
        "high_watermark": i64(r.high_watermark),
        "last_stable_offset": i64(-1),
        "log_start_offset": i64(r.log_start_offset),
        "current_leader": nested(partition_cls, "LeaderIdAndEpoch")(
            leader_id=i32(r.leader_id), leader_epoch=i32(r.leader_epoch)
        ),
        "aborted_transactions": (),  # the generated default: an empty list, not null
        "preferred_read_replica": i32(-1),
        "records": r.records,
    }
    if r.diverging_epoch is not None:
        values["diverging_epoch"] = nested(partition_cls, "EpochEndOffset")(
            epoch=i32(r.diverging_epoch.epoch), end_offset=i64(r.diverging_epoch.offset)
        )
    if r.snapshot_id is not None:
        values["snapshot_id"] = nested(partition_cls, "SnapshotId")(
            end_offset=i64(r.snapshot_id.offset), epoch=i32(r.snapshot_id.epoch)
        )
    topic = build(
        module.FetchableTopicResponse,
        topic_id=METADATA_TOPIC_ID,
        topic=METADATA_TOPIC,
        partitions=(build(partition_cls, **values),),
    )
    return build(
        module.FetchResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        session_id=i32(0),
        responses=(topic,),
        node_endpoints=_node_endpoints(module, version >= FIRST_NODE_ENDPOINTS_FETCH, r.leader_id, voters),
    )


def _fetch_snapshot_response(module: Any, version: int, r: m.FetchSnapshotResponse, voters: Any) -> Any:
    # Every answer past the partition check goes through addQuorumLeader; the snapshot id, size and position
    # are only set on success (the generated defaults are 0).
    snapshot = r.snapshot_id if r.snapshot_id is not None else m.OffsetAndEpoch(0, 0)
    item = module.PartitionSnapshot(
        index=i32(METADATA_PARTITION),
        error_code=_error_code(r.partition_error),
        snapshot_id=module.SnapshotId(end_offset=i64(snapshot.offset), epoch=i32(snapshot.epoch)),
        current_leader=module.LeaderIdAndEpoch(leader_id=i32(r.leader_id), leader_epoch=i32(r.leader_epoch)),
        size=i64(r.size),
        position=i64(r.position),
        unaligned_records=r.data,
    )
    return build(
        module.FetchSnapshotResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        topics=(module.TopicSnapshot(name=METADATA_TOPIC, partitions=(item,)),),
        node_endpoints=_node_endpoints(module, version >= 1, r.leader_id, voters),
    )


_RESPONSE_ENCODERS: Final[dict[int, Callable[[Any, int, Any, Any], Any]]] = {
    VOTE_KEY: _vote_response,
    BEGIN_QUORUM_EPOCH_KEY: _begin_response,
    END_QUORUM_EPOCH_KEY: _end_response,
    FETCH_KEY: _fetch_response,
    FETCH_SNAPSHOT_KEY: _fetch_snapshot_response,
}


def response_from_kio(entity: Any) -> m.RaftResponse:
    """The neutral response of a kio Raft response: a top-level error alone, else the metadata partition's
    answer (`InvalidRaftResponse` when it names another partition, as Kafka's hasValidTopicPartition checks)."""
    api_key, version = int(entity.__api_key__), int(entity.__version__)
    check_version(api_key, version)
    decode = _RESPONSE_DECODERS.get(api_key)
    if decode is None:
        raise UnsupportedVersionError(f"{protocol.describe_api(api_key, version)} is not a Raft response")
    return decode(entity)


def _epoch_partition(entity: Any) -> Any:
    return _response_partition(
        entity, entity.topics, lambda t: t.topic_name, lambda p: int(p.partition_index)
    )


def _vote_response_from(entity: Any) -> m.VoteResponse:
    if entity.error_code != ErrorCode.none:
        return m.VoteResponse(int(entity.error_code))
    p = _epoch_partition(entity)
    return m.VoteResponse(
        m.NONE, int(p.error_code), int(p.leader_id), int(p.leader_epoch), bool(p.vote_granted)
    )


def _begin_response_from(entity: Any) -> m.BeginQuorumEpochResponse:
    if entity.error_code != ErrorCode.none:
        return m.BeginQuorumEpochResponse(int(entity.error_code))
    p = _epoch_partition(entity)
    return m.BeginQuorumEpochResponse(m.NONE, int(p.error_code), int(p.leader_id), int(p.leader_epoch))


def _end_response_from(entity: Any) -> m.EndQuorumEpochResponse:
    if entity.error_code != ErrorCode.none:
        return m.EndQuorumEpochResponse(int(entity.error_code))
    p = _epoch_partition(entity)
    return m.EndQuorumEpochResponse(m.NONE, int(p.error_code), int(p.leader_id), int(p.leader_epoch))


def _fetch_response_from(entity: Any) -> m.FetchResponse:
    if int(entity.__version__) < FIRST_TOPIC_ID_FETCH:
        raise InvalidRaftResponse(f"{_describe(entity)} response has no topic id to name {METADATA_TOPIC}")
    if entity.error_code != ErrorCode.none:
        return m.FetchResponse(int(entity.error_code))
    p = _response_partition(entity, entity.responses, lambda t: t.topic_id, lambda p: int(p.partition_index))
    # FetchResponse.isDivergingEpoch, and KafkaRaftClient's snapshot test (either part non-negative).
    diverging = p.diverging_epoch
    snapshot = p.snapshot_id
    return m.FetchResponse(
        error_code=m.NONE,
        partition_error=int(p.error_code),
        leader_id=int(p.current_leader.leader_id),
        leader_epoch=int(p.current_leader.leader_epoch),
        high_watermark=int(p.high_watermark),
        log_start_offset=int(p.log_start_offset),
        records=bytes(p.records or b""),
        diverging_epoch=(
            m.OffsetAndEpoch(int(diverging.end_offset), int(diverging.epoch))
            if diverging.epoch >= 0
            else None
        ),
        snapshot_id=(
            m.OffsetAndEpoch(int(snapshot.end_offset), int(snapshot.epoch))
            if snapshot.epoch >= 0 or snapshot.end_offset >= 0
            else None
        ),
    )


def _fetch_snapshot_response_from(entity: Any) -> m.FetchSnapshotResponse:
    if entity.error_code != ErrorCode.none:
        return m.FetchSnapshotResponse(int(entity.error_code))
    topics = entity.topics
    # FetchSnapshotResponse.forTopicPartition: any item naming the metadata partition.
    p = next(
        (
            p
            for t in topics
            if t.name == METADATA_TOPIC
            for p in t.partitions
            if int(p.index) == METADATA_PARTITION
        ),
        None,
    )
    if p is None:
        raise InvalidRaftResponse(f"{_describe(entity)} response does not answer for {METADATA_TOPIC}-0")
    error = int(p.error_code)
    return m.FetchSnapshotResponse(
        error_code=m.NONE,
        partition_error=error,
        leader_id=int(p.current_leader.leader_id),
        leader_epoch=int(p.current_leader.leader_epoch),
        snapshot_id=(
            m.OffsetAndEpoch(int(p.snapshot_id.end_offset), int(p.snapshot_id.epoch))
            if error == m.NONE
            else None
        ),
        size=int(p.size),
        position=int(p.position),
        data=bytes(p.unaligned_records or b""),
    )


_RESPONSE_DECODERS: Final[dict[int, Callable[[Any], m.RaftResponse]]] = {
    VOTE_KEY: _vote_response_from,
    BEGIN_QUORUM_EPOCH_KEY: _begin_response_from,
    END_QUORUM_EPOCH_KEY: _end_response_from,
    FETCH_KEY: _fetch_response_from,
    FETCH_SNAPSHOT_KEY: _fetch_snapshot_response_from,
}


def error_response(api_key: int, version: int, error_code: int) -> Any:
    """A response carrying only a top-level error, as `new XResponseData().setErrorCode(error)` (RaftUtil.errorResponse;
    DescribeQuorum's also carries the error's message from v2, as DescribeQuorumRequest.getTopLevelErrorResponse)."""
    module = _response_module(api_key, version)
    code = _error_code(error_code)
    if api_key in (VOTE_KEY, BEGIN_QUORUM_EPOCH_KEY, END_QUORUM_EPOCH_KEY):
        name = {VOTE_KEY: "VoteResponse", BEGIN_QUORUM_EPOCH_KEY: "BeginQuorumEpochResponse"}.get(
            api_key, "EndQuorumEpochResponse"
        )
        return build(getattr(module, name), error_code=code, topics=(), node_endpoints=())
    if api_key == FETCH_KEY:
        return build(
            module.FetchResponse, throttle_time=NO_THROTTLE, error_code=code, session_id=i32(0), responses=()
        )
    if api_key == FETCH_SNAPSHOT_KEY:
        return build(module.FetchSnapshotResponse, throttle_time=NO_THROTTLE, error_code=code, topics=())
    if api_key == DESCRIBE_QUORUM_KEY:
        return build(
            module.DescribeQuorumResponse,
            error_code=code,
            error_message=default_message(code),
            topics=(),
            nodes=(),
        )
    return reconfiguration_refusal(api_key, version, error_code=error_code)


# ---------------------------------------------------------------------------------------------- DescribeQuorum


def describe_quorum_request(version: int) -> Any:
    """RaftUtil.singletonDescribeQuorumRequest: the metadata partition."""
    module = _request_module(DESCRIBE_QUORUM_KEY, version)
    partition = module.PartitionData(partition_index=i32(METADATA_PARTITION))
    return module.DescribeQuorumRequest(
        topics=(module.TopicData(topic_name=METADATA_TOPIC, partitions=(partition,)),)
    )


def check_describe_quorum_request(entity: Any) -> None:
    """KafkaRaftClient.handleDescribeQuorumRequest's partition check: `RaftRequestRefused` (answered
    UNKNOWN_TOPIC_OR_PARTITION on every partition asked) unless it names exactly `__cluster_metadata`-0."""
    version = int(entity.__version__)
    check_version(int(entity.__api_key__), version)
    topics = entity.topics
    if (
        len(topics) != 1
        or topics[0].topic_name != METADATA_TOPIC
        or len(topics[0].partitions) != 1
        or int(topics[0].partitions[0].partition_index) != METADATA_PARTITION
    ):
        asked = tuple((t.topic_name, tuple(int(p.partition_index) for p in t.partitions)) for t in topics)
        raise RaftRequestRefused(
            DESCRIBE_QUORUM_KEY, version, int(ErrorCode.unknown_topic_or_partition),
            f"asks for {asked}, not only {METADATA_TOPIC}-{METADATA_PARTITION}", asked,
        )  # fmt: skip


def _describe_quorum_partition_errors(
    version: int, asked: tuple[tuple[str, tuple[int, ...]], ...], error_code: int
) -> Any:
    """DescribeQuorumRequest.getPartitionLevelErrorResponse: the error on every partition asked."""
    module = _response_module(DESCRIBE_QUORUM_KEY, version)
    code = _error_code(error_code)
    return build(
        module.DescribeQuorumResponse,
        error_code=ErrorCode.none,
        error_message="",
        topics=tuple(
            module.TopicData(
                topic_name=topic,
                partitions=tuple(
                    _describe_quorum_error_partition(module, index, code) for index in partitions
                ),
            )
            for topic, partitions in asked
        ),
        nodes=(),
    )


def _describe_quorum_error_partition(module: Any, index: int, code: ErrorCode) -> Any:
    return build(
        module.PartitionData,
        partition_index=i32(index),
        error_code=code,
        error_message=default_message(code),
        leader_id=i32(0),
        leader_epoch=i32(0),
        high_watermark=i64(0),
        current_voters=(),
        observers=(),
    )


def describe_quorum_response(description: m.QuorumDescription, version: int, *, listener: str) -> Any:
    """RaftUtil.singletonDescribeQuorumResponse (or DescribeQuorumResponse.singletonErrorResponse when the
    description carries an error): from v2 every voter's listener in `Nodes`, named `listener`."""
    module = _response_module(DESCRIBE_QUORUM_KEY, version)
    if description.error_code != m.NONE:
        partition = _describe_quorum_error_partition(
            module, METADATA_PARTITION, _error_code(description.error_code)
        )
    else:

        def replica(state: m.ReplicaDescription) -> Any:
            return build(
                module.ReplicaState,
                replica_id=i32(state.replica_id),
                replica_directory_id=None,
                log_end_offset=i64(state.log_end_offset),
                last_fetch_timestamp=i64(state.last_fetch_timestamp),
                last_caught_up_timestamp=i64(state.last_caught_up_timestamp),
            )

        partition = _converted(f"DescribeQuorum v{version}", lambda: build(
            module.PartitionData,
            partition_index=i32(METADATA_PARTITION),
            error_code=ErrorCode.none,
            error_message="",
            leader_id=i32(description.leader_id),
            leader_epoch=i32(description.leader_epoch),
            high_watermark=i64(description.high_watermark),
            current_voters=tuple(replica(v) for v in description.voters),
            observers=tuple(replica(o) for o in description.observers),
        ))  # fmt: skip
    nodes: tuple[Any, ...] = ()
    if version >= 2 and description.error_code == m.NONE:
        nodes = _converted(f"DescribeQuorum v{version} nodes", lambda: tuple(
            module.Node(
                node_id=i32(v.replica_id),
                listeners=tuple(
                    module.Listener(name=listener, host=address.host, port=u16(address.port))
                    for address in [description.endpoints[v.replica_id]]
                    if v.replica_id in description.endpoints
                ),
            )
            for v in description.voters
        ))  # fmt: skip
    return build(
        module.DescribeQuorumResponse,
        error_code=ErrorCode.none,
        error_message="",
        topics=(module.TopicData(topic_name=METADATA_TOPIC, partitions=(partition,)),),
        nodes=nodes,
    )


def quorum_description(entity: Any) -> m.QuorumDescription:
    """The neutral description in a kio DescribeQuorum response (the error alone when it carries one)."""
    version = int(entity.__version__)
    check_version(int(entity.__api_key__), version)
    if entity.error_code != ErrorCode.none:
        return m.QuorumDescription(int(entity.error_code))
    p = _response_partition(entity, entity.topics, lambda t: t.topic_name, lambda p: int(p.partition_index))
    if p.error_code != ErrorCode.none:
        return m.QuorumDescription(int(p.error_code))

    def replica(state: Any) -> m.ReplicaDescription:
        return m.ReplicaDescription(
            int(state.replica_id),
            int(state.log_end_offset),
            int(getattr(state, "last_fetch_timestamp", -1)),
            int(getattr(state, "last_caught_up_timestamp", -1)),
        )

    endpoints: dict[int, m.Endpoint] = {}
    for node in getattr(entity, "nodes", ()):
        if node.listeners:
            endpoints[int(node.node_id)] = m.Endpoint(node.listeners[0].host, int(node.listeners[0].port))
    return m.QuorumDescription(
        m.NONE,
        int(p.leader_id),
        int(p.leader_epoch),
        int(p.high_watermark),
        tuple(replica(v) for v in p.current_voters),
        tuple(replica(o) for o in p.observers),
        endpoints,
    )


# ---------------------------------------------------------------------------------------------- reconfiguration


def reconfiguration_refusal(
    api_key: int,
    version: int,
    *,
    error_code: int = UNSUPPORTED_VERSION,
    leader_id: int = m.NO_LEADER,
    leader_epoch: int = m.NO_EPOCH,
    voters: Mapping[int, m.Endpoint] | None = None,
) -> Any:
    """AddRaftVoter/RemoveRaftVoter/UpdateRaftVoter refused as a static quorum (kraft.version 0) refuses them.

    Add/Remove carry Kafka's message naming the feature level (RaftUtil.addVoterResponse/removeVoterResponse);
    Update carries the leader and its address (RaftUtil.updateVoterResponse).
    """
    module = _response_module(api_key, version)
    code = _error_code(error_code)
    if api_key in _RECONFIGURATION_VERBS:
        message = (
            f"Cluster doesn't support {_RECONFIGURATION_VERBS[api_key]} voter because the "
            f"{KRAFT_VERSION_FEATURE} feature is 0"
            if error_code == UNSUPPORTED_VERSION
            else default_message(code)
        )
        response_cls = (
            module.AddRaftVoterResponse if api_key == ADD_RAFT_VOTER_KEY else module.RemoveRaftVoterResponse
        )
        return response_cls(throttle_time=NO_THROTTLE, error_code=code, error_message=message)
    if api_key != UPDATE_RAFT_VOTER_KEY:
        raise UnsupportedVersionError(f"{protocol.describe_api(api_key, version)} is not a Raft RPC")
    address = _leader_address(leader_id, voters or {})
    leader = module.CurrentLeader(
        leader_id=i32(leader_id),
        leader_epoch=i32(leader_epoch),
        host=address.host if address is not None else "",
        port=i32(address.port if address is not None else 0),
    )
    return module.UpdateRaftVoterResponse(throttle_time=NO_THROTTLE, error_code=code, current_leader=leader)
