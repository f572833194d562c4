"""Rules of Kafka 3.9's KafkaRaftClient that are easy to get wrong, on one RaftClient driven by hand."""

from __future__ import annotations

import random

import pytest

from bridge.raft import messages as m
from bridge.raft.client import RaftClient, RaftInvariantError
from bridge.raft.messages import OffsetAndEpoch
from bridge.raft.quorum import Election, Role
from tests.support.raft_sim import SimElectionStore, SimLog, encode_snapshot

CLUSTER = "sim-cluster"


def replica(
    node_id: int,
    voters: int = 3,
    *,
    store: SimElectionStore | None = None,
    log: SimLog | None = None,
    stored: Election | None = None,
) -> RaftClient:
    store = store or SimElectionStore(node_id)
    if stored is not None:
        store.persisted = stored
    client = RaftClient(
        node_id=node_id,
        voters={v: m.Endpoint("sim", 9000 + v) for v in range(1, voters + 1)},
        cluster_id=CLUSTER,
        log=log or SimLog(node_id),  # type: ignore[arg-type]
        store=store,
        rng=random.Random(node_id),
    )
    client.start(0)
    return client


def vote(candidate: int, epoch: int, last_epoch: int = 0, last_offset: int = 0) -> m.VoteRequest:
    return m.VoteRequest(CLUSTER, epoch, candidate, last_epoch, last_offset)


def granted(client: RaftClient, request: m.VoteRequest, now: int = 10) -> bool:
    response = client.handle_request(now, request.candidate_id, request)
    assert isinstance(response, m.VoteResponse) and response.partition_error == m.NONE
    return response.vote_granted


def follower_of(
    leader: int, epoch: int, node_id: int = 2, voters: int = 3, log: SimLog | None = None
) -> RaftClient:
    client = replica(node_id, voters, stored=Election(epoch, leader), log=log)
    assert client.role is Role.FOLLOWER
    return client


def fetch_of(client: RaftClient, now: int = 10) -> m.FetchRequest:
    (out,) = client.poll(now)
    assert isinstance(out.request, m.FetchRequest)
    return out.request


def test_vote_granting_per_state() -> None:
    unattached = replica(2)
    assert granted(unattached, vote(3, 1))
    assert unattached.role is Role.VOTED and unattached.voted_id == 3
    assert granted(unattached, vote(3, 1)), "the same candidate is granted again"
    assert not granted(unattached, vote(1, 1)), "one vote per epoch"

    log = SimLog(2)
    log.append_leader_change(1, 1, [1, 2, 3], [1, 2])
    behind = replica(2, log=log)
    assert not granted(behind, vote(3, 2, last_epoch=0, last_offset=5)), "a candidate with an older log"
    assert granted(behind, vote(3, 2, last_epoch=1, last_offset=1))

    follower = follower_of(1, 4)
    assert not granted(follower, vote(3, 4)), "a follower rejects in its own epoch"
    assert granted(follower, vote(3, 5)), "a newer epoch makes it unattached first"

    candidate = replica(2)
    candidate.poll(5_000)
    assert candidate.role is Role.CANDIDATE
    assert not granted(candidate, vote(3, candidate.epoch))


def test_a_persisted_vote_survives_a_restart() -> None:
    store = SimElectionStore(2)
    log = SimLog(2)
    first = replica(2, store=store, log=log)
    assert granted(first, vote(3, 7))
    assert store.persisted == Election(7, voted_id=3)
    again = replica(2, store=store, log=log)
    assert again.role is Role.VOTED and again.epoch == 7
    assert not granted(again, vote(1, 7)), "a restart must not allow a second vote in the epoch"
    assert granted(again, vote(3, 7))


def test_high_watermark_waits_for_the_leaders_own_epoch() -> None:
    log = SimLog(1)
    log.append_leader_change(1, 2, [1, 2, 3], [2, 3])
    log.append_as_leader([1, 2], 1)
    log.flush()
    leader = replica(1, log=log, stored=Election(1, 2))
    votes = leader.poll(5_000)  # fetch timeout: candidate in epoch 2
    assert leader.role is Role.CANDIDATE
    (request,) = [o.request for o in votes if o.destination == 2]
    leader.handle_response(5_001, 2, request, m.VoteResponse(m.NONE, m.NONE, -1, 2, True))
    assert leader.is_leader and leader.epoch == 2
    epoch_start = 3  # LeaderChangeMessage of epoch 2 at offset 3
    old_entries = m.FetchRequest(CLUSTER, 2, 2, epoch_start, 1)
    response = leader.handle_request(5_010, 2, old_entries)
    assert isinstance(response, m.FetchResponse) and response.high_watermark == -1
    assert leader.high_watermark == -1 and not leader.leader_ready(), "old-epoch entries alone commit nothing"
    leader.handle_request(5_020, 2, m.FetchRequest(CLUSTER, 2, 2, epoch_start + 1, 2))
    assert leader.high_watermark == epoch_start + 1 and leader.leader_ready()


@pytest.mark.parametrize(("node_id", "backoff"), [(3, 0), (2, 250), (4, 500), (5, 1000)])
def test_end_quorum_epoch_backoff_follows_the_successor_order(node_id: int, backoff: int) -> None:
    follower = follower_of(1, 3, node_id=node_id, voters=5)
    fetch_of(follower)
    follower.handle_request(100, 1, m.EndQuorumEpochRequest(CLUSTER, 1, 3, (3, 2, 4)))
    assert follower.next_deadline(100) == 100 + backoff


def _diverged_follower() -> tuple[RaftClient, SimLog]:
    log = SimLog(2)
    log.append_leader_change(1, 1, [1, 2, 3], [1, 2])
    log.append_as_leader([1, 2, 3], 1)  # offsets 1-3
    log.append_as_leader([4, 5], 2)  # offsets 4-5, which the new leader never had
    log.flush()
    follower = follower_of(1, 3, log=log)
    request = fetch_of(follower)
    follower.handle_response(20, 1, request, m.FetchResponse(m.NONE, m.NONE, 1, 3, high_watermark=2))
    assert follower.high_watermark == 2
    return follower, log


def test_a_diverging_fetch_truncates_to_the_common_epoch_end() -> None:
    follower, log = _diverged_follower()
    request = fetch_of(follower, 30)
    diverging = m.FetchResponse(m.NONE, m.NONE, 1, 3, 2, 0, diverging_epoch=OffsetAndEpoch(4, 1))
    follower.handle_response(40, 1, request, diverging)
    assert log.end_offset() == 4 and log.last_fetched_epoch() == 1


def test_a_diverging_fetch_never_truncates_below_the_high_watermark() -> None:
    follower, log = _diverged_follower()
    request = fetch_of(follower, 30)
    below = m.FetchResponse(m.NONE, m.NONE, 1, 3, 2, 0, diverging_epoch=OffsetAndEpoch(1, 1))
    with pytest.raises(RaftInvariantError, match="below the high watermark"):
        follower.handle_response(40, 1, request, below)
    assert log.end_offset() == 6


def _every_answer(client: RaftClient, epoch: int) -> list[m.RaftResponse]:
    requests: list[tuple[int, m.RaftRequest]] = [
        (3, vote(3, epoch + 1)),
        (3, vote(3, epoch)),
        (101, m.FetchRequest(CLUSTER, 101, epoch, 0, 0)),
        (101, m.FetchRequest(CLUSTER, 101, 0, 0, 0)),
        (-1, m.FetchRequest(CLUSTER, -1, epoch, 0, 0)),
        (3, m.FetchRequest(CLUSTER, 3, epoch + 1, 0, 0)),
        (3, m.FetchSnapshotRequest(CLUSTER, 3, epoch, OffsetAndEpoch(10, 1), 0)),
        (1, m.BeginQuorumEpochRequest(CLUSTER, 1, epoch)),
        (1, m.EndQuorumEpochRequest(CLUSTER, 1, epoch, ())),
        (3, m.BeginQuorumEpochRequest(CLUSTER, 3, epoch + 2)),
    ]
    return [client.handle_request(50, sender, request) for sender, request in requests]


@pytest.mark.parametrize("role", ["unattached", "follower", "leader"])
def test_well_formed_requests_are_never_answered_invalid_request(role: str) -> None:
    if role == "leader":
        client = replica(1, 1)
    elif role == "follower":
        client = follower_of(1, 2)
    else:
        client = replica(2)
    for response in _every_answer(client, max(client.epoch, 1)):
        assert m.INVALID_REQUEST not in (response.error_code, response.partition_error), response


def test_an_unattached_voter_keeps_its_election_timer_when_the_epoch_moves() -> None:
    """QuorumState.transitionToUnattached keeps the remaining time: hopeless candidates cannot stall it."""
    log = SimLog(2)
    log.append_leader_change(1, 1, [1, 2, 3], [1, 2])
    log.flush()
    voter = replica(2, log=log)
    voter.poll(0)
    deadline = voter.next_deadline(0)
    for epoch in range(2, 8):
        # Candidate 3 has an empty log: rejected, yet each request moves the voter to a newer epoch.
        now = deadline - 300 + 40 * epoch
        assert not granted(voter, vote(3, epoch), now=now)
        voter.poll(now)
        assert voter.next_deadline(now) == deadline
    voter.poll(deadline)
    assert voter.role is Role.CANDIDATE


def test_a_restarted_snapshot_download_starts_from_an_empty_file() -> None:
    snapshot_id = OffsetAndEpoch(30, 1)
    image = encode_snapshot(25, 1)
    follower = follower_of(1, 2)
    request = fetch_of(follower)
    follower.handle_response(
        20, 1, request, m.FetchResponse(m.NONE, m.NONE, 1, 2, 30, 30, snapshot_id=snapshot_id)
    )
    (out,) = follower.poll(21)
    assert isinstance(out.request, m.FetchSnapshotRequest) and out.request.position == 0
    half = m.FetchSnapshotResponse(m.NONE, m.NONE, 1, 2, snapshot_id, len(image), 0, image[:100])
    follower.handle_response(22, 1, out.request, half)
    # A new leader in epoch 3 points at the same snapshot: the download starts again from byte 0.
    follower.handle_request(30, 3, m.BeginQuorumEpochRequest(CLUSTER, 3, 3))
    request = fetch_of(follower, 31)
    follower.handle_response(
        32, 3, request, m.FetchResponse(m.NONE, m.NONE, 3, 3, 30, 30, snapshot_id=snapshot_id)
    )
    (out,) = follower.poll(33)
    assert isinstance(out.request, m.FetchSnapshotRequest) and out.request.position == 0
    whole = m.FetchSnapshotResponse(m.NONE, m.NONE, 3, 3, snapshot_id, len(image), 0, image)
    follower.handle_response(34, 3, out.request, whole)
    assert follower.log.start_offset() == 30 and follower.high_watermark == 30
    assert follower.log.read_snapshot(snapshot_id, 0, 1 << 20) == image


def test_a_new_follower_fetches_at_once() -> None:
    """next_deadline is `now` after a transition: a transport polling only at deadlines still fetches."""
    voter = replica(2)
    voter.poll(0)
    voter.handle_request(100, 1, m.BeginQuorumEpochRequest(CLUSTER, 1, 1))
    assert voter.role is Role.FOLLOWER
    assert voter.next_deadline(100) == 100
    assert isinstance(fetch_of(voter, 100), m.FetchRequest)
