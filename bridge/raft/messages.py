"""The Raft RPCs as the quorum core sees them: one version-neutral dataclass per request and response.

Kafka's counterpart is the generated `*RequestData`/`*ResponseData` of Vote, BeginQuorumEpoch,
EndQuorumEpoch, Fetch, FetchSnapshot and DescribeQuorum, restricted to the single `__cluster_metadata`
partition. `bridge.raft.codec` turns them into the exact bytes of any version Kafka 3.9 speaks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

NONE: Final = 0
NOT_LEADER_OR_FOLLOWER: Final = 6
BROKER_NOT_AVAILABLE: Final = 8
INVALID_REQUEST: Final = 42
SNAPSHOT_NOT_FOUND: Final = 98
POSITION_OUT_OF_RANGE: Final = 99
FENCED_LEADER_EPOCH: Final = 74
UNKNOWN_LEADER_EPOCH: Final = 75
INCONSISTENT_CLUSTER_ID: Final = 104
UNKNOWN_TOPIC_OR_PARTITION: Final = 3
NO_LEADER: Final = -1
NO_EPOCH: Final = -1


@dataclass(frozen=True, slots=True, order=True)
class OffsetAndEpoch:
    """Kafka's OffsetAndEpoch (ordered offset first, unlike Kafka's compareTo)."""

    offset: int
    epoch: int


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One listener of a voter: what `controller.quorum.voters` names (`id@host:port`)."""

    host: str
    port: int


@dataclass(frozen=True, slots=True)
class VoteRequest:
    cluster_id: str | None
    candidate_epoch: int
    candidate_id: int
    last_offset_epoch: int
    last_offset: int
    voter_id: int = NO_LEADER


@dataclass(frozen=True, slots=True)
class VoteResponse:
    error_code: int
    partition_error: int = NONE
    leader_id: int = NO_LEADER
    leader_epoch: int = NO_EPOCH
    vote_granted: bool = False


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    cluster_id: str | None
    leader_id: int
    leader_epoch: int
    voter_id: int = NO_LEADER


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    error_code: int
    partition_error: int = NONE
    leader_id: int = NO_LEADER
    leader_epoch: int = NO_EPOCH


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    cluster_id: str | None
    leader_id: int
    leader_epoch: int
    preferred_successors: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    error_code: int
    partition_error: int = NONE
    leader_id: int = NO_LEADER
    leader_epoch: int = NO_EPOCH


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """A follower's or observer's Fetch of `__cluster_metadata` (ReplicaId < 0 for a consumer)."""

    cluster_id: str | None
    replica_id: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    max_wait_ms: int = 500
    max_bytes: int = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class FetchResponse:
    error_code: int
    partition_error: int = NONE
    leader_id: int = NO_LEADER
    leader_epoch: int = NO_EPOCH
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes = b""
    diverging_epoch: OffsetAndEpoch | None = None
    """DivergingEpoch {Epoch, EndOffset}: truncate to the end offset of that epoch."""
    snapshot_id: OffsetAndEpoch | None = None
    """SnapshotId {EndOffset, Epoch}: fetch this snapshot instead."""


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    cluster_id: str | None
    replica_id: int
    current_leader_epoch: int
    snapshot_id: OffsetAndEpoch
    position: int
    max_bytes: int = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    error_code: int
    partition_error: int = NONE
    leader_id: int = NO_LEADER
    leader_epoch: int = NO_EPOCH
    snapshot_id: OffsetAndEpoch | None = None
    size: int = 0
    position: int = 0
    data: bytes = b""


@dataclass(frozen=True, slots=True)
class ReplicaDescription:
    """DescribeQuorum's ReplicaState: LastFetchTimestamp/LastCaughtUpTimestamp are -1 when unknown."""

    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int = -1
    last_caught_up_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class QuorumDescription:
    """DescribeQuorum's partition answer (RaftUtil.singletonDescribeQuorumResponse)."""

    error_code: int
    leader_id: int = NO_LEADER
    leader_epoch: int = NO_EPOCH
    high_watermark: int = -1
    voters: tuple[ReplicaDescription, ...] = ()
    observers: tuple[ReplicaDescription, ...] = ()
    endpoints: dict[int, Endpoint] = field(default_factory=dict)


RaftRequest = (
    VoteRequest | BeginQuorumEpochRequest | EndQuorumEpochRequest | FetchRequest | FetchSnapshotRequest
)
RaftResponse = (
    VoteResponse | BeginQuorumEpochResponse | EndQuorumEpochResponse | FetchResponse | FetchSnapshotResponse
)
