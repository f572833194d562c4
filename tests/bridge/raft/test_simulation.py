"""The Raft wing under a seeded simulated network: Kafka's RaftEventSimulationTest scenarios.

Every event is followed by the invariant check (one leader per epoch, monotonic epochs and high
watermarks, committed entries never lost or changed, each log a prefix of the leader's, a majority
holding the committed end). A failure names its seed; `RAFT_SIM_SEEDS=N` runs N seeds per case.
"""

from __future__ import annotations

import os

import pytest

from bridge.raft.quorum import Role
from tests.support.raft_sim import RaftSimulation, SimNode, SimSettings

SEEDS = list(range(1, int(os.environ.get("RAFT_SIM_SEEDS", "3")) + 1))
SHAPES = [(3, 0), (3, 2), (5, 1)]
"""(voters, observers)."""


def cluster(seed: int, voters: int, observers: int, **settings: object) -> RaftSimulation:
    sim = RaftSimulation(seed, SimSettings(voters=voters, observers=observers, **settings))  # type: ignore[arg-type]
    sim.start_all()
    return sim


def elect(sim: RaftSimulation, *, within_ms: int = 30_000) -> SimNode:
    sim.run_until(lambda: sim.leader() is not None, within_ms, "a leader")
    leader = sim.leader()
    assert leader is not None
    return leader


def progress(
    sim: RaftSimulation, by: int = 10, *, within_ms: int = 60_000, without: tuple[SimNode, ...] = ()
) -> int:
    """Run until every live node (but those `without`) has committed `by` offsets past the committed end."""
    target = sim.committed_end + by
    sim.run_until(
        lambda: all(sim.high_watermark(n.node_id) >= target for n in sim.alive() if n not in without),
        within_ms,
        f"every live node's high watermark at {target}",
    )
    return target


def followers(sim: RaftSimulation, leader: SimNode) -> list[SimNode]:
    return [n for n in sim.alive() if n.is_voter and n is not leader]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("voters", "observers"), SHAPES)
def test_initial_election(seed: int, voters: int, observers: int) -> None:
    sim = cluster(seed, voters, observers)
    leader = elect(sim)
    progress(sim, 30)
    assert sim.leader() is leader
    assert all(n.client is not None and n.client.leader_id == leader.node_id for n in sim.alive())


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("voters", "observers"), SHAPES)
def test_leader_failure(seed: int, voters: int, observers: int) -> None:
    sim = cluster(seed, voters, observers)
    old = elect(sim)
    progress(sim)
    assert old.client is not None
    old_epoch = old.client.epoch
    sim.kill(old.node_id)
    new = elect(sim)
    assert new is not old and new.client is not None and new.client.epoch > old_epoch
    progress(sim)
    sim.start(old.node_id)
    progress(sim)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("voters", "observers"), SHAPES)
def test_kill_all_and_restart(seed: int, voters: int, observers: int) -> None:
    sim = cluster(seed, voters, observers)
    elect(sim)
    committed = progress(sim, 15)
    for node_id in sorted(sim.nodes):
        sim.kill(node_id)
    sim.run_for(500)
    for node_id in sorted(sim.nodes):
        sim.start(node_id)
    elect(sim)
    assert progress(sim) > committed


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("voters", "observers"), SHAPES)
def test_partitioned_leader_resigns_and_truncates_its_tail(seed: int, voters: int, observers: int) -> None:
    sim = cluster(seed, voters, observers)
    old = elect(sim)
    progress(sim)
    assert old.client is not None
    old_epoch = old.client.epoch
    end_at_cut = old.log.end_offset()
    sim.partition(old.node_id)
    cut_at = sim.now
    # Check quorum: no majority fetches within 1.5 x fetch timeout, so the leader resigns.
    sim.run_until(lambda: old.client is not None and old.client.role is not Role.LEADER, 4_000, "resignation")
    assert sim.now - cut_at <= sim.settings.raft.fetch_timeout_ms * 3 // 2 + 100
    tail = range(end_at_cut, old.log.end_offset())  # appended after the cut: no one else has it
    assert tail, "the cut-off leader appended nothing of its own"
    new = elect(sim)
    assert new is not old and new.client is not None and new.client.epoch > old_epoch
    progress(sim, without=(old,))
    sim.heal()
    target = progress(sim)
    assert sim.high_watermark(old.node_id) >= target
    kept = range(max(old.log.start, tail.start), min(old.log.end_offset(), tail.stop))
    assert all(old.log.entry(o)[0] > old_epoch for o in kept), "the uncommitted tail survived the rejoin"


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("voters", "observers"), SHAPES)
def test_progress_while_a_majority_is_reachable(seed: int, voters: int, observers: int) -> None:
    sim = cluster(seed, voters, observers)
    leader = elect(sim)
    progress(sim)
    cut = followers(sim, leader)[: (voters - 1) // 2]
    for node in cut:
        sim.partition(node.node_id)
    progress(sim, 20, without=tuple(cut))
    assert sim.leader() is leader
    sim.heal()
    progress(sim)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("voters", "observers"), SHAPES)
def test_back_to_back_leader_failures(seed: int, voters: int, observers: int) -> None:
    sim = cluster(seed, voters, observers)
    first = elect(sim)
    progress(sim)
    sim.kill(first.node_id)
    second = elect(sim)
    if voters == 3:
        sim.start(first.node_id)  # two of three must stay up
    sim.kill(second.node_id)
    third = elect(sim)
    assert third is not second
    progress(sim)
    sim.start(first.node_id)
    sim.start(second.node_id)
    progress(sim)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("voters", "observers"), SHAPES)
def test_message_loss_reordering_and_chaos(seed: int, voters: int, observers: int) -> None:
    sim = cluster(seed, voters, observers, loss=0.1, max_delay_ms=80)
    sim.chaos()
    elect(sim)
    progress(sim)
    assert sim.steps > 2_000


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("voters", "observers"), SHAPES)
def test_graceful_shutdown_hands_over_at_once(seed: int, voters: int, observers: int) -> None:
    sim = cluster(seed, voters, observers)
    old = elect(sim)
    progress(sim)
    sim.shutdown(old.node_id)
    began = sim.now
    # EndQuorumEpoch: the first successor stands at once, well before any fetch timeout would fire.
    sim.run_until(lambda: (leader := sim.leader()) is not None and leader is not old, 5_000, "a successor")
    assert sim.now - began < sim.settings.raft.fetch_timeout_ms
    sim.kill(old.node_id)
    progress(sim)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("voters", "observers"), SHAPES)
def test_follower_far_behind_catches_up_through_fetch_snapshot(
    seed: int, voters: int, observers: int
) -> None:
    sim = cluster(seed, voters, observers)
    leader = elect(sim)
    progress(sim)
    behind = followers(sim, leader)[-1]
    sim.kill(behind.node_id)
    progress(sim, 4 * sim.settings.snapshot_every)
    assert behind.log.end_offset() < leader.log.start_offset(), "the leader kept the log the follower needs"
    sim.start(behind.node_id)
    progress(sim)
    assert behind.log.installed_snapshots >= 1


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("voters", "observers"), [(3, 0), (5, 2)])
def test_one_node_losing_its_disk_loses_no_committed_data(seed: int, voters: int, observers: int) -> None:
    """Kafka's canRecoverFromSingleNodeCommittedDataLoss: without the epoch and majority invariants."""
    sim = cluster(seed, voters, observers, check_majority=False, check_epochs=False)
    elect(sim)
    progress(sim)
    victim = sim.rng.choice([n.node_id for n in sim.alive()])
    sim.kill_and_delete(victim)
    sim.run_until(
        lambda: (leader := sim.leader()) is not None and leader.node_id != victim, 30_000, "a leader"
    )
    sim.start(victim)
    progress(sim)


def test_a_seed_replays_exactly() -> None:
    def run(seed: int) -> str:
        sim = cluster(seed, 3, 1, loss=0.2, max_delay_ms=50)
        elect(sim)
        sim.kill(sim.rng.choice(sorted(sim.nodes)))
        sim.run_for(5_000)
        return sim.digest()

    assert run(11) == run(11)
    assert run(11) != run(12)
