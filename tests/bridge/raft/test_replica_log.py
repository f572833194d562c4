"""bridge.raft.replica_log: a leader's and a follower's metadata log on real files, replicated by hand."""

from __future__ import annotations

import copy
import dataclasses
import itertools
import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bridge.raft.client import RaftClient
from bridge.raft.log import end_offset_for_epoch, validate_offset_and_epoch
from bridge.raft.messages import Endpoint, OffsetAndEpoch
from bridge.raft.quorum import FileElectionStore, Role
from bridge.raft.replica_log import ReplicaLog
from bridge.raft.snapshots import SnapshotSchedule
from migrate.errors import CorruptDataError, Zk2KraftError
from migrate.kraft import records as rec
from migrate.kraft import snapshot as snapshot_writer
from migrate.kraft.image import MetadataImage, Provenance
from migrate.kraft.log_config import MetadataLogConfig, parse_metadata_log_config
from migrate.kraft.logdir import (
    LEADER_EPOCH_CHECKPOINT,
    QUORUM_STATE,
    SnapshotId,
    list_segments,
    list_snapshots,
)
from migrate.kraft.migration_state import ZkMigrationState
from migrate.kraft.reader import iter_log_dir, read_snapshot_image
from migrate.kraft.snapshot import write_snapshot

CLUSTER = "esQVtsr4Sh6LSPhdkKjbNw"
VOTERS = [1, 2, 3]
SEGMENT_BYTES = 700
"""Small enough that a few appends roll segments."""


def config(name: str, value: str = "v") -> tuple[Any, int]:
    return (rec.ConfigRecord(resource_type=4, resource_name="", name=name, value=value), 0)


def open_replica(directory: Path, node: int, **settings: int) -> ReplicaLog:
    """A replica with small segments; `settings` are MetadataLogConfig fields (snapshots, retention)."""
    config = MetadataLogConfig(segment_bytes=SEGMENT_BYTES, segment_min_bytes=SEGMENT_BYTES, **settings)
    return ReplicaLog.open(directory, node_id=node, cluster_id=CLUSTER, config=config)


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


# ---------------------------------------------------------------------------------------------- snapshots of its own

SNAPSHOT_EVERY = 400
"""Committed bytes between two snapshots in these tests (a handful of batches)."""


def snapshot_ids(log: ReplicaLog) -> list[SnapshotId]:
    log.wait_for_snapshot()
    return [sid for sid, _path in list_snapshots(log.partition_dir)]


def write_configs(log: ReplicaLog, names: list[str], *, committed: bool = True) -> None:
    for name in names:
        log.append_as_leader([config(name), config(name + "-2")], 1)
    log.flush()
    if committed:
        commit(log)


def snapshot_image(log: ReplicaLog, sid: SnapshotId) -> MetadataImage:
    image = read_snapshot_image(log.partition_dir / snapshot_writer.snapshot_file_name(sid))
    return dataclasses.replace(image, provenance=Provenance())


def test_a_replica_snapshots_its_committed_image_once_enough_committed_bytes_follow_the_last(
    tmp_path: Path,
) -> None:
    with open_replica(tmp_path, 1, max_record_bytes_between_snapshots=SNAPSHOT_EVERY) as leader:
        activated_leader(leader, [])
        commit(leader)
        assert snapshot_ids(leader) == []  # not enough bytes yet
        # Appended but not committed: the image runs ahead of the high watermark, so no snapshot of it.
        write_configs(leader, [f"u{i}" for i in range(8)], committed=False)
        leader.update_high_watermark(leader.end_offset() - 3)
        assert snapshot_ids(leader) == []
        commit(leader)
        (sid,) = snapshot_ids(leader)
        assert sid == SnapshotId(leader.end_offset(), 1)
        assert snapshot_image(leader, sid) == image_of(leader)
        assert leader.latest_snapshot_id() == OffsetAndEpoch(sid.end_offset, 1)
        # The counters start again: one more small commit takes no snapshot, enough bytes do.
        write_configs(leader, ["v0"])
        assert snapshot_ids(leader) == [sid]
        write_configs(leader, [f"w{i}" for i in range(8)])
        assert snapshot_ids(leader)[-1] == SnapshotId(leader.end_offset(), 1)


def test_a_snapshot_is_never_taken_inside_an_open_metadata_transaction(tmp_path: Path) -> None:
    with open_replica(tmp_path, 1, max_record_bytes_between_snapshots=SNAPSHOT_EVERY) as leader:
        activated_leader(leader, [])
        commit(leader)
        leader.append_as_leader([(rec.BeginTransactionRecord(name="migration"), 0)], 1)
        write_configs(leader, [f"t{i}" for i in range(8)])
        assert snapshot_ids(leader) == []
        leader.append_as_leader([(rec.EndTransactionRecord(), 0)], 1)
        write_configs(leader, ["after"])
        (sid,) = snapshot_ids(leader)
        assert sid.end_offset == leader.end_offset() and "t7" in config_names(leader)


def test_a_follower_snapshots_what_it_committed_not_what_it_fetched(
    replicas: tuple[ReplicaLog, ReplicaLog], tmp_path: Path
) -> None:
    leader, _unused = replicas
    with open_replica(tmp_path / "f", 2, max_record_bytes_between_snapshots=SNAPSHOT_EVERY) as follower:
        activated_leader(leader, [f"f{i}" for i in range(8)])
        replicate(leader, follower)
        assert snapshot_ids(follower) == []
        hw = leader.end_offset() - 2
        follower.update_high_watermark(hw)
        (sid,) = snapshot_ids(follower)
        assert sid.end_offset <= hw


def test_retention_moves_the_log_start_only_to_a_kept_snapshot_and_deletes_only_segments_wholly_below_it(
    tmp_path: Path,
) -> None:
    pdir = tmp_path / "__cluster_metadata-0"
    with open_replica(
        tmp_path, 1, max_record_bytes_between_snapshots=SNAPSHOT_EVERY, max_retention_bytes=0
    ) as leader:
        activated_leader(leader, [])
        write_configs(leader, [f"a{i}" for i in range(8)])
        assert len(snapshot_ids(leader)) == 1
        segments_before = list_segments(pdir)
        # One snapshot: Kafka keeps the whole log (the log start moves only to a second snapshot).
        assert not leader.maybe_clean() and leader.start_offset() == 0 and list_segments(pdir) == segments_before
        write_configs(leader, [f"b{i}" for i in range(8)])
        second = snapshot_ids(leader)[-1]
        before = [s.base_offset for s in list_segments(pdir)]
        write_configs(leader, ["c0"])  # a commit after the snapshot runs the cleaner
        assert leader.start_offset() == second.end_offset
        assert snapshot_ids(leader) == [second]  # the newest snapshot stays, older ones go
        # Exactly the segments whose next segment starts at or before the new log start are gone.
        wholly_below = {base for base, after in itertools.pairwise(before) if after <= second.end_offset}
        assert wholly_below
        assert [s.base_offset for s in list_segments(pdir)][: len(before) - len(wholly_below)] == [
            base for base in before if base not in wholly_below
        ]
        assert leader.start_offset() <= leader.metadata_log.committed_offset + 1
        assert leader.epoch_starts() == [(1, second.end_offset)]
        # Below the log start a Fetch is answered the snapshot; at it, the log.
        newest = OffsetAndEpoch(second.end_offset, 1)
        assert validate_offset_and_epoch(leader, 3, 1) == ("snapshot", newest)
        assert validate_offset_and_epoch(leader, second.end_offset, 1) == ("valid", None)
        assert leader.read(second.end_offset)


def test_a_cleaner_never_moves_the_log_start_past_the_high_watermark(tmp_path: Path) -> None:
    with open_replica(
        tmp_path, 1, max_record_bytes_between_snapshots=SNAPSHOT_EVERY, max_retention_bytes=0
    ) as leader:
        activated_leader(leader, [])
        for round_ in range(4):
            write_configs(leader, [f"r{round_}-{i}" for i in range(8)])
            # More appended than committed: neither snapshots nor the log start go past the high watermark.
            write_configs(leader, [f"x{round_}"], committed=False)
            leader.update_high_watermark(leader.end_offset() - 1)
            leader.maybe_clean()
            hw = leader.metadata_log.committed_offset + 1
            assert leader.start_offset() <= hw
            assert all(sid.end_offset <= hw for sid in snapshot_ids(leader))
            commit(leader)


def test_retention_by_time_goes_by_each_snapshots_last_record_and_minus_one_keeps_everything(
    tmp_path: Path,
) -> None:
    keep_all = {"max_retention_bytes": -1, "max_retention_ms": -1}
    with open_replica(tmp_path / "all", 1, max_record_bytes_between_snapshots=SNAPSHOT_EVERY, **keep_all) as log:
        activated_leader(log, [])
        for round_ in range(3):
            write_configs(log, [f"k{round_}-{i}" for i in range(8)])
        assert len(snapshot_ids(log)) == 3
        assert not log.maybe_clean(now_ms=2**60) and log.start_offset() == 0
    day = 86_400_000
    with open_replica(
        tmp_path / "ms", 1, max_record_bytes_between_snapshots=SNAPSHOT_EVERY, max_retention_bytes=-1,
        max_retention_ms=day,
    ) as log:  # fmt: skip
        activated_leader(log, [])
        for round_ in range(2):
            write_configs(log, [f"m{round_}-{i}" for i in range(8)])
        _first, second = snapshot_ids(log)
        assert not log.maybe_clean() and log.start_offset() == 0  # both younger than a day
        assert log.maybe_clean(now_ms=log.metadata_log.image.provenance.last_contained_log_time_ms + 2 * day)
        assert log.start_offset() == second.end_offset and snapshot_ids(log) == [second]


def test_reopening_a_log_that_starts_at_a_snapshot_recovers_its_image_and_serves_a_new_follower(
    tmp_path: Path,
) -> None:
    settings = {"max_record_bytes_between_snapshots": SNAPSHOT_EVERY, "max_retention_bytes": 0}
    with open_replica(tmp_path / "a", 1, **settings) as leader:
        activated_leader(leader, [])
        for round_ in range(3):
            write_configs(leader, [f"o{round_}-{i}" for i in range(8)])
        write_configs(leader, ["tail"], committed=False)
        commit(leader)
        start, end, image = leader.start_offset(), leader.end_offset(), image_of(leader)
        assert start > 0
    # The clean stop left a snapshot of the committed end.
    assert snapshot_ids_on_disk(tmp_path / "a")[-1] == SnapshotId(end, 1)
    with open_replica(tmp_path / "a", 1, **settings) as leader, open_replica(tmp_path / "b", 2) as follower:
        assert leader.end_offset() == end and image_of(leader) == image
        first_base = list_segments(leader.partition_dir)[0].base_offset
        assert leader.start_offset() == first_base <= start
        assert all(sid.end_offset >= first_base for sid in snapshot_ids(leader))
        # An empty follower is sent the newest snapshot, downloads it and continues from its end.
        latest = leader.latest_snapshot_id()
        assert latest == OffsetAndEpoch(end, 1)
        size = leader.snapshot_size(latest)
        assert size is not None
        follower.write_snapshot_chunk(latest, 0, leader.read_snapshot(latest, 0, size))
        follower.install_snapshot(latest)
        follower.update_high_watermark(latest.offset)
        assert image_of(follower) == image


def snapshot_ids_on_disk(directory: Path) -> list[SnapshotId]:
    return [sid for sid, _path in list_snapshots(directory / "__cluster_metadata-0")]


def test_a_snapshot_write_that_fails_or_crashes_leaves_no_snapshot_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pdir = tmp_path / "__cluster_metadata-0"
    real_control = snapshot_writer._BatchStream.control

    def fail_at_footer(stream: Any, records: Any) -> None:
        if isinstance(records[0], rec.SnapshotFooterRecord):
            raise OSError(28, "No space left on device")
        real_control(stream, records)

    with open_replica(tmp_path, 1, max_record_bytes_between_snapshots=SNAPSHOT_EVERY) as leader:
        activated_leader(leader, [])
        monkeypatch.setattr(snapshot_writer._BatchStream, "control", fail_at_footer)
        write_configs(leader, [f"e{i}" for i in range(8)])
        assert snapshot_ids(leader) == [] and not list(pdir.glob("*.part"))
        assert leader.latest_snapshot_id() is None
        monkeypatch.undo()
        write_configs(leader, ["still-appending"])  # the log goes on
        assert "still-appending" in config_names(leader)
        end = leader.end_offset()
    assert snapshot_ids_on_disk(tmp_path) == [SnapshotId(end, 1)]
    # A process killed mid-write leaves its part file: never counted, removed at the next open.
    crashed = pdir / f"{snapshot_writer.snapshot_file_name(SnapshotId(end + 5, 1))[:-11]}-0123.checkpoint.part"
    crashed.write_bytes(b"\x00" * 100)
    with open_replica(tmp_path, 1) as reopened:
        assert reopened.latest_snapshot_id() == OffsetAndEpoch(end, 1)
        assert not crashed.exists()


def test_the_metadata_log_settings_take_kafkas_names_and_refuse_what_kafka_refuses() -> None:
    parsed = parse_metadata_log_config(
        ["metadata.max.retention.bytes=-1", "metadata.log.max.snapshot.interval.ms = 0"], "--metadata-log-config"
    )
    assert parsed == MetadataLogConfig(max_retention_bytes=-1, max_snapshot_interval_ms=0)
    assert MetadataLogConfig().max_record_bytes_between_snapshots == 20 * 1024 * 1024
    assert MetadataLogConfig().max_retention_ms == 7 * 86_400_000
    for bad, why in [
        ("metadata.log.max.record.bytes.between.snapshots=0", "between 1 and"),
        ("metadata.max.retention.size=1", "NAME one of"),
        ("metadata.max.retention.ms=soon", "whole number"),
        ("metadata.log.segment.bytes=4096", "below metadata.log.segment.min.bytes"),
    ]:
        with pytest.raises(Zk2KraftError, match=why):
            parse_metadata_log_config([bad], "--metadata-log-config")


def test_a_voter_that_was_away_past_the_leaders_log_start_catches_up_through_fetch_snapshot(
    tmp_path: Path,
) -> None:
    settings = {"max_record_bytes_between_snapshots": SNAPSHOT_EVERY, "max_retention_bytes": 0}
    endpoints = {voter: Endpoint("localhost", 9000 + voter) for voter in VOTERS}
    logs = {voter: open_replica(tmp_path / str(voter), voter, **settings) for voter in VOTERS}
    away: set[int] = set()
    try:
        cores = {
            voter: RaftClient(
                node_id=voter, voters=endpoints, cluster_id=CLUSTER, log=log, rng=random.Random(voter),
                store=FileElectionStore(log.partition_dir / QUORUM_STATE, CLUSTER, tuple(VOTERS)),
            )
            for voter, log in logs.items()
        }  # fmt: skip
        now = 0

        def run(steps: int) -> None:
            nonlocal now
            for _ in range(steps):
                now += 50
                for voter, core in cores.items():
                    if voter in away:
                        continue
                    for out in core.poll(now):
                        if out.destination not in away:
                            answer = cores[out.destination].handle_request(now, voter, out.request)
                            core.handle_response(now, out.destination, out.request, answer)

        for core in cores.values():
            core.start(now)
        run(100)
        leader = next(core for core in cores.values() if core.role is Role.LEADER)
        leader_log = logs[leader.node_id]
        behind = next(voter for voter in VOTERS if voter != leader.node_id)
        leader.append(leader_log.activation_records(), now)
        run(20)
        away.add(behind)
        behind_end = logs[behind].end_offset()
        for i in range(40):
            leader.append([config(f"away-{i}"), config(f"away-{i}-b")], now)
            run(2)
            leader_log.wait_for_snapshot()
        run(10)
        assert leader_log.start_offset() > behind_end  # what the voter lacks is only in a snapshot now
        away.clear()
        run(60)
        behind_log = logs[behind]
        assert {core.high_watermark for core in cores.values()} == {leader_log.end_offset()}
        assert behind_log.start_offset() > behind_end  # it installed a snapshot instead of fetching the log
        assert image_of(behind_log) == image_of(leader_log)
        assert "away-39" in config_names(behind_log)
    finally:
        for log in logs.values():
            log.close()


def test_a_snapshot_is_due_at_the_first_commit_an_interval_after_the_last_and_never_with_zero() -> None:
    hourly = SnapshotSchedule(MetadataLogConfig(), now_ms=0)
    assert hourly.committed(100, now_ms=3_599_999) is None
    assert hourly.committed(0, now_ms=3_600_000) is None  # nothing committed: nothing to snapshot
    assert hourly.committed(100, now_ms=3_600_000) == "at least 3600000 ms passed since the last one"
    never = SnapshotSchedule(MetadataLogConfig(max_snapshot_interval_ms=0), now_ms=0)
    assert never.committed(100, now_ms=10**12) is None
    assert never.committed(20 * 1024 * 1024, now_ms=1) is not None  # the byte trigger still holds


def test_a_clean_stop_snapshots_the_committed_image_only(tmp_path: Path) -> None:
    with open_replica(tmp_path / "c", 1) as leader:
        activated_leader(leader, ["c0"])
        commit(leader)
        committed_end = leader.end_offset()
        write_configs(leader, ["in-flight"], committed=False)  # appended, never committed
    # The image ran ahead of the high watermark: no snapshot of it (the log keeps everything committed).
    assert snapshot_ids_on_disk(tmp_path / "c") == []
    with open_replica(tmp_path / "c", 1) as reopened:
        assert reopened.end_offset() > committed_end
        reopened.update_high_watermark(committed_end)  # what a quorum would say on restart
    assert snapshot_ids_on_disk(tmp_path / "c") == []  # the image holds the uncommitted tail again
    with open_replica(tmp_path / "d", 1) as leader:
        activated_leader(leader, ["d0"])
        commit(leader)
        end = leader.end_offset()
    assert snapshot_ids_on_disk(tmp_path / "d") == [SnapshotId(end, 1)]
    snapshot = tmp_path / "d" / "__cluster_metadata-0" / snapshot_writer.snapshot_file_name(SnapshotId(end, 1))
    assert read_snapshot_image(snapshot).configs[(4, "")]["d0"] == "v"
