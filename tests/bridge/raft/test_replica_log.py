"""bridge.raft.replica_log: a leader's and a follower's metadata log on real files, replicated by hand."""

from __future__ import annotations

import copy
import dataclasses
import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bridge.raft.client import RaftClient
from bridge.raft.log import end_offset_for_epoch
from bridge.raft.messages import Endpoint, OffsetAndEpoch
from bridge.raft.quorum import FileElectionStore, Role
from bridge.raft.replica_log import ReplicaLog
from migrate.errors import CorruptDataError, Zk2KraftError
from migrate.kraft import records as rec
from migrate.kraft.image import MetadataImage, Provenance
from migrate.kraft.logdir import LEADER_EPOCH_CHECKPOINT, QUORUM_STATE, list_segments
from migrate.kraft.migration_state import ZkMigrationState
from migrate.kraft.reader import iter_log_dir
from migrate.kraft.snapshot import write_snapshot

CLUSTER = "esQVtsr4Sh6LSPhdkKjbNw"
VOTERS = [1, 2, 3]
SEGMENT_BYTES = 700
"""Small enough that a few appends roll segments."""


def config(name: str, value: str = "v") -> tuple[Any, int]:
    return (rec.ConfigRecord(resource_type=4, resource_name="", name=name, value=value), 0)


def open_replica(directory: Path, node: int) -> ReplicaLog:
    return ReplicaLog.open(directory, node_id=node, cluster_id=CLUSTER, segment_bytes=SEGMENT_BYTES)


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[tuple[ReplicaLog, ReplicaLog]]:
    leader, follower = open_replica(tmp_path / "a", 1), open_replica(tmp_path / "b", 2)
    yield leader, follower
    leader.close()
    follower.close()


def lead(log: ReplicaLog, epoch: int, granting: list[int]) -> None:
    log.append_leader_change(epoch, log.metadata_log.node_id, VOTERS, granting)
    log.flush()


def replicate(leader: ReplicaLog, follower: ReplicaLog, max_bytes: int = 300) -> None:
    """What the Raft core's Fetch loop does, without the network (and without the high watermark)."""
    while data := leader.read(follower.end_offset(), max_bytes):
        follower.append_as_follower(data)
        follower.flush()


def commit(*logs: ReplicaLog) -> None:
    high_watermark = logs[0].end_offset()
    for log in logs:
        log.update_high_watermark(high_watermark)


def image_of(log: ReplicaLog) -> MetadataImage:
    with log.metadata_log.lock:
        return dataclasses.replace(copy.deepcopy(log.metadata_log.image), provenance=Provenance())


def config_names(log: ReplicaLog) -> set[str]:
    with log.metadata_log.lock:
        return set(log.metadata_log.image.configs.get((4, ""), {}))


def files(directory: Path, suffix: str) -> dict[str, bytes]:
    pdir = directory / "__cluster_metadata-0"
    return {p.name: p.read_bytes() for p in sorted(pdir.iterdir()) if p.name.endswith(suffix)}


def activated_leader(leader: ReplicaLog, names: list[str]) -> None:
    lead(leader, 1, [1, 2])
    leader.append_as_leader(leader.activation_records(), 1)
    for name in names:
        leader.append_as_leader([config(name), config(name + "-2")], 1)
    leader.flush()


# ---------------------------------------------------------------------------------------------- opening


def test_opening_a_replica_elects_nobody(tmp_path: Path) -> None:
    with open_replica(tmp_path, 1) as log:
        assert log.end_offset() == 0 and log.epoch_starts() == []
        assert not (tmp_path / "__cluster_metadata-0" / QUORUM_STATE).exists()
        # The controller's activation on an empty log: the bootstrap transaction, PRE_MIGRATION.
        activation = [type(r).__name__ for r, _ in log.activation_records()]
        assert activation[0] == "BeginTransactionRecord" and activation[-1] == "EndTransactionRecord"
        assert "ZkMigrationStateRecord" in activation
        with pytest.raises(Zk2KraftError, match="not leading"):
            log.metadata_log.append([config("x")])


# ---------------------------------------------------------------------------------------------- replication


def test_a_follower_holds_the_leaders_bytes_and_applies_only_what_is_committed(
    replicas: tuple[ReplicaLog, ReplicaLog], tmp_path: Path
) -> None:
    leader, follower = replicas
    activated_leader(leader, [f"c{i}" for i in range(12)])
    replicate(leader, follower)

    assert len(list_segments(tmp_path / "a" / "__cluster_metadata-0")) > 1  # the segments rolled
    assert files(tmp_path / "a", ".log") == files(tmp_path / "b", ".log")
    assert files(tmp_path / "a", LEADER_EPOCH_CHECKPOINT) == files(tmp_path / "b", LEADER_EPOCH_CHECKPOINT)
    assert follower.epoch_starts() == leader.epoch_starts() == [(1, 0)]
    assert follower.flushed_end_offset() == follower.end_offset() == leader.end_offset()
    assert config_names(follower) == set()  # nothing committed yet

    commit(leader, follower)
    assert "c11-2" in config_names(follower)
    assert image_of(follower) == image_of(leader)
    assert image_of(follower).features.zk_migration_state == ZkMigrationState.PRE_MIGRATION

    change = next(e.record for e in iter_log_dir(tmp_path / "b" / "__cluster_metadata-0") if e.is_control)
    assert isinstance(change, rec.LeaderChangeMessage)
    assert [v.voter_id for v in change.voters] == VOTERS
    assert [v.voter_id for v in change.granting_voters] == [1, 2]

    # The indexes the writer leaves at close are the same too.
    leader.close()
    follower.close()
    assert files(tmp_path / "a", ".index") == files(tmp_path / "b", ".index")
    assert files(tmp_path / "a", ".timeindex") == files(tmp_path / "b", ".timeindex")


def test_a_follower_refuses_malformed_or_misplaced_batches(replicas: tuple[ReplicaLog, ReplicaLog]) -> None:
    leader, follower = replicas
    activated_leader(leader, ["a", "b"])
    data = leader.read(0, 10_000)
    corrupt = bytearray(data)
    corrupt[-1] ^= 0xFF
    with pytest.raises(CorruptDataError, match="CRC"):
        follower.append_as_follower(bytes(corrupt))
    later = leader.read(leader.end_offset() - 1, 10_000)
    with pytest.raises(CorruptDataError, match="but the log ends at 0"):
        follower.append_as_follower(later)
    assert follower.end_offset() == 0
    follower.append_as_follower(data[:-5])  # a partial batch at the end is left for the next fetch
    assert 0 < follower.end_offset() < leader.end_offset()
    replicate(leader, follower)
    assert follower.end_offset() == leader.end_offset()


# ---------------------------------------------------------------------------------------------- truncation


def test_a_former_leader_truncates_its_uncommitted_tail_and_its_image_with_it(
    replicas: tuple[ReplicaLog, ReplicaLog], tmp_path: Path
) -> None:
    old, new = replicas
    activated_leader(old, ["kept"])
    replicate(old, new)
    commit(old, new)
    committed_image = image_of(old)

    lost = old.metadata_log.append([config("lost")])  # as the pipeline appends; never replicated
    old.flush()
    assert "lost" in config_names(old)

    lead(new, 2, [2, 3])
    new.append_as_leader([config("won")], 2)
    new.flush()
    commit(new)

    # What the Raft core does on a diverging epoch in the new leader's Fetch answer.
    diverging = end_offset_for_epoch(new, old.last_fetched_epoch())
    old.truncate_to(min(end_offset_for_epoch(old, diverging.epoch).offset, diverging.offset))
    assert "lost" not in config_names(old)
    assert image_of(old) == committed_image
    with pytest.raises(Zk2KraftError, match="truncated"):
        lost.durable.result(timeout=10)

    replicate(new, old)
    commit(new, old)
    assert old.epoch_starts() == new.epoch_starts() == [(1, 0), (2, diverging.offset)]
    assert files(tmp_path / "a", ".log") == files(tmp_path / "b", ".log")
    assert files(tmp_path / "a", LEADER_EPOCH_CHECKPOINT) == files(tmp_path / "b", LEADER_EPOCH_CHECKPOINT)
    assert image_of(old) == image_of(new)
    assert "won" in config_names(old)


def test_truncation_below_the_high_watermark_is_refused(replicas: tuple[ReplicaLog, ReplicaLog]) -> None:
    leader, follower = replicas
    activated_leader(leader, ["a", "b"])
    replicate(leader, follower)
    commit(leader, follower)
    end = follower.end_offset()
    with pytest.raises(Zk2KraftError, match="below the high watermark"):
        follower.truncate_to(end - 1)
    assert follower.end_offset() == end
    assert "b-2" in config_names(follower)


def test_a_truncation_refused_inside_a_committed_batch_leaves_the_log_usable(
    replicas: tuple[ReplicaLog, ReplicaLog],
) -> None:
    leader, follower = replicas
    activated_leader(leader, ["a"])
    replicate(leader, follower)
    last_batch = leader.end_offset() - 2  # the two records of config "a"
    follower.update_high_watermark(last_batch + 1)
    with pytest.raises(Zk2KraftError, match="inside a batch"):
        follower.truncate_to(last_batch + 1)
    leader.append_as_leader([config("b")], 1)
    leader.flush()
    replicate(leader, follower)
    commit(leader, follower)
    assert image_of(follower) == image_of(leader)


# ---------------------------------------------------------------------------------------------- snapshots


def test_a_follower_downloads_and_installs_the_leaders_snapshot(
    replicas: tuple[ReplicaLog, ReplicaLog], tmp_path: Path
) -> None:
    leader, follower = replicas
    activated_leader(leader, [f"s{i}" for i in range(6)])
    commit(leader)
    with leader.metadata_log.lock:
        write_snapshot(leader.partition_dir, leader.metadata_log.image)
    snapshot_id = leader.latest_snapshot_id()
    assert snapshot_id == OffsetAndEpoch(leader.end_offset(), 1) == leader.earliest_snapshot_id()
    size = leader.snapshot_size(snapshot_id)
    assert size is not None

    position = 0
    while position < size:
        chunk = leader.read_snapshot(snapshot_id, position, 100)
        follower.write_snapshot_chunk(snapshot_id, position, chunk)
        position += len(chunk)
        assert list((tmp_path / "b" / "__cluster_metadata-0").glob("*.checkpoint.part"))
    follower.install_snapshot(snapshot_id)
    follower.update_high_watermark(snapshot_id.offset)

    pdir = tmp_path / "b" / "__cluster_metadata-0"
    assert not list(pdir.glob("*.checkpoint.part"))
    assert [s.base_offset for s in list_segments(pdir)] == [snapshot_id.offset]
    assert follower.start_offset() == follower.end_offset() == snapshot_id.offset
    assert follower.latest_snapshot_id() == snapshot_id
    assert follower.last_fetched_epoch() == 1 and follower.epoch_starts() == []
    assert image_of(follower) == image_of(leader)

    leader.append_as_leader([config("after")], 1)
    leader.flush()
    replicate(leader, follower)
    commit(leader, follower)
    assert image_of(follower) == image_of(leader)
    follower.close()
    with open_replica(tmp_path / "b", 2) as reopened:
        assert image_of(reopened) == image_of(leader)
        assert reopened.start_offset() == snapshot_id.offset


def test_a_discarded_or_interrupted_download_leaves_nothing(tmp_path: Path) -> None:
    wanted = OffsetAndEpoch(10, 1)
    pdir = tmp_path / "__cluster_metadata-0"
    with open_replica(tmp_path, 2) as log:
        log.write_snapshot_chunk(wanted, 0, b"partial")
        log.discard_partial_snapshot(wanted)
        assert not list(pdir.glob("*.part"))
        log.write_snapshot_chunk(wanted, 0, b"not a snapshot at all, but long enough to look like one")
        with pytest.raises(Zk2KraftError):
            log.install_snapshot(wanted)
        assert not list(pdir.glob("*.part")) and log.latest_snapshot_id() is None
        log.write_snapshot_chunk(wanted, 0, b"crashed here")
    # A crash mid-download: the part file is removed when the directory is opened again.
    (pdir / "00000000000000000010-0000000001-123.checkpoint.part").write_bytes(b"x")
    with open_replica(tmp_path, 2) as log:
        assert not list(pdir.glob("*.part"))


# ---------------------------------------------------------------------------------------------- crashes


def test_reopening_after_a_torn_append_recovers_the_follower(
    replicas: tuple[ReplicaLog, ReplicaLog], tmp_path: Path
) -> None:
    leader, follower = replicas
    activated_leader(leader, ["a", "b", "c"])
    replicate(leader, follower)
    commit(leader, follower)
    end = follower.end_offset()
    follower.close()
    active = list_segments(tmp_path / "b" / "__cluster_metadata-0")[-1].path
    with open(active, "ab") as f:
        f.write(leader.read(0, 10_000)[:40])  # the start of a batch a crash cut short

    leader.append_as_leader([config("d")], 1)
    leader.flush()
    with open_replica(tmp_path / "b", 2) as reopened:
        assert reopened.metadata_log.recovery_warnings
        assert reopened.end_offset() == end
        assert reopened.epoch_starts() == [(1, 0)]
        replicate(leader, reopened)
        commit(leader, reopened)
        assert image_of(reopened) == image_of(leader)
        assert files(tmp_path / "a", ".log") == files(tmp_path / "b", ".log")


# ---------------------------------------------------------------------------------------------- durability


def test_durability_waits_for_the_high_watermark(replicas: tuple[ReplicaLog, ReplicaLog]) -> None:
    leader, _follower = replicas
    flushed = threading.Event()
    leader.on_flushed = flushed.set
    activated_leader(leader, [])
    assert flushed.wait(10)
    appended = leader.metadata_log.append([config("x")])  # as the pipeline appends
    leader.flush()
    assert leader.flushed_end_offset() == appended.last_offset + 1
    assert not appended.durable.done()
    assert leader.metadata_log.durable_offset < appended.last_offset

    leader.update_high_watermark(appended.last_offset)  # not past it yet
    assert not appended.durable.done()
    leader.update_high_watermark(appended.last_offset + 1)
    appended.durable.result(timeout=10)
    leader.metadata_log.wait_durable(appended.last_offset)
    assert leader.metadata_log.durable_offset == appended.last_offset


def test_durability_on_a_follower_needs_both_the_fsync_and_the_high_watermark(
    replicas: tuple[ReplicaLog, ReplicaLog],
) -> None:
    leader, follower = replicas
    activated_leader(leader, ["a"])
    follower.update_high_watermark(leader.end_offset())  # known before the records arrive
    assert follower.metadata_log.durable_offset == -1 and config_names(follower) == set()
    replicate(leader, follower)
    follower.update_high_watermark(leader.end_offset())
    assert follower.metadata_log.durable_offset == leader.end_offset() - 1
    assert "a" in config_names(follower)


# ---------------------------------------------------------------------------------------------- with the core


def test_three_replica_logs_driven_by_the_raft_core_hold_one_log(tmp_path: Path) -> None:
    endpoints = {voter: Endpoint("localhost", 9000 + voter) for voter in VOTERS}
    logs = {voter: open_replica(tmp_path / str(voter), voter) for voter in VOTERS}
    try:
        cores = {
            voter: RaftClient(
                node_id=voter,
                voters=endpoints,
                cluster_id=CLUSTER,
                log=log,
                store=FileElectionStore(log.partition_dir / QUORUM_STATE, CLUSTER, tuple(VOTERS)),
                rng=random.Random(voter),
            )
            for voter, log in logs.items()
        }
        now = 0

        def run(steps: int) -> None:
            nonlocal now
            for _ in range(steps):
                now += 50
                for voter, core in cores.items():
                    for out in core.poll(now):
                        answer = cores[out.destination].handle_request(now, voter, out.request)
                        core.handle_response(now, out.destination, out.request, answer)

        for core in cores.values():
            core.start(now)
        run(100)
        leader = next(core for core in cores.values() if core.role is Role.LEADER)
        leader_log = logs[leader.node_id]
        run(20)
        leader.append(leader_log.activation_records(), now)
        for i in range(5):
            leader.append([config(f"q{i}")], now)
        run(40)
        assert {core.high_watermark for core in cores.values()} == {leader_log.end_offset()}
        for voter, log in logs.items():
            assert image_of(log) == image_of(leader_log)
            assert files(tmp_path / str(voter), ".log") == files(tmp_path / str(leader.node_id), ".log")
            assert log.metadata_log.durable_offset == leader_log.end_offset() - 1
        assert "q4" in config_names(logs[VOTERS[0]])
    finally:
        for log in logs.values():
            log.close()
