"""Raft requests and responses as whole Kafka frames: what a peer's bytes decode to, and the simulated wire."""

from __future__ import annotations

from typing import Any, Final

from bridge.kafka import protocol
from bridge.raft import codec
from bridge.raft import messages as m
from migrate.errors import UnsupportedVersionError


def decode_request_payload(payload: bytes, source: str) -> tuple[int, int, int, Any]:
    """(api key, version, correlation id, neutral request or kio DescribeQuorum request) of a Raft request frame.

    Raises only `Zk2KraftError`s: `CorruptDataError` for bytes that are no request, `UnsupportedVersionError`,
    and `RaftRequestRefused` (answer with its `response()`).
    """
    decoded = protocol.decode_request(payload, source, _RAFT_REQUESTS)
    if decoded.body is None:
        raise UnsupportedVersionError(
            f"{source}: {protocol.describe_api(decoded.api_key, decoded.api_version)}"
        )
    body = decoded.body
    if decoded.api_key == codec.DESCRIBE_QUORUM_KEY:
        codec.check_describe_quorum_request(body)
        return decoded.api_key, decoded.api_version, decoded.correlation_id, body
    return decoded.api_key, decoded.api_version, decoded.correlation_id, codec.request_from_kio(body)


_RAFT_REQUESTS: Final = {
    key: versions
    for key, versions in codec.supported_versions().items()
    if key not in (codec.ADD_RAFT_VOTER_KEY, codec.REMOVE_RAFT_VOTER_KEY, codec.UPDATE_RAFT_VOTER_KEY)
}


def decode_response_payload(
    payload: bytes, api_key: int, version: int, source: str
) -> tuple[int, m.RaftResponse]:
    """(correlation id, neutral response) of the answer to a Raft request of `api_key` at `version`.

    Raises only `Zk2KraftError`s (`CorruptDataError`, `InvalidRaftResponse`, `UnsupportedVersionError`).
    """
    codec.check_version(api_key, version)
    correlation_id, body = protocol.decode_response(payload, api_key, version, source)
    return correlation_id, codec.response_from_kio(body)


SIM_LISTENER = "CONTROLLER"
_SIM_ENDPOINTS: dict[int, m.Endpoint] = {}


def kafka_wire(message: Any) -> Any:
    """Every request and response as Kafka 3.9's bytes at the highest version both speak, and back."""
    if isinstance(
        message,
        m.VoteRequest
        | m.BeginQuorumEpochRequest
        | m.EndQuorumEpochRequest
        | m.FetchRequest
        | m.FetchSnapshotRequest,
    ):
        key = codec.request_api_key(message)
        version = codec.supported_versions()[key][1]
        entity = codec.request_to_kio(message, version, voters=_SIM_ENDPOINTS, listener=SIM_LISTENER)
        payload = protocol.encode_request(entity, 7, "raft-sim", version)
        return decode_request_payload(payload, "simulated request")[3]
    key = codec.response_api_key(message)
    version = codec.supported_versions()[key][1]
    entity = codec.response_to_kio(message, version, voters=_SIM_ENDPOINTS)
    return decode_response_payload(protocol.encode_response(7, entity), key, version, "simulated response")[1]
