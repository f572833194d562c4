"""A directory's `quorum-state` voters, and `/migration`, against what a voter of a quorum is started with."""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge.driver import check_log_matches_migration
from bridge.raft.recovery import read_quorum
from bridge.zk.leadership import MigrationLeadershipState
from migrate.errors import InvalidRequestError
from migrate.kraft.image import MetadataImage
from migrate.kraft.logdir import QUORUM_STATE, QuorumState, write_quorum_state
from migrate.kraft.migration_state import ZkMigrationState


def _written(pdir: Path, voters: tuple[int, ...]) -> Path:
    pdir.mkdir(parents=True, exist_ok=True)
    write_quorum_state(
        pdir / QUORUM_STATE,
        QuorumState(leader_id=3000, leader_epoch=4, voted_id=-1, data_version=0, current_voters=voters),
    )
    return pdir


def test_a_quorum_members_directory_is_refused_to_a_bridge_started_alone(tmp_path: Path) -> None:
    pdir = _written(tmp_path / "p", (3000, 3001, 3002))
    with pytest.raises(InvalidRequestError, match=r"belongs to a quorum of bridges; start it with --voters"):
        read_quorum(pdir, 3000)


def test_a_static_voter_set_cannot_change_in_place(tmp_path: Path) -> None:
    pdir = _written(tmp_path / "p", (3000, 3001, 3002))
    with pytest.raises(InvalidRequestError, match=r"cannot change its voters in place"):
        read_quorum(pdir, 3000, frozenset({3000, 3001, 3003}))


def test_the_same_voters_and_a_single_bridges_directory_are_accepted(tmp_path: Path) -> None:
    voters = frozenset({3000, 3001, 3002})
    found = read_quorum(_written(tmp_path / "quorum", tuple(sorted(voters))), 3000, voters)
    assert found is not None and found.leader_epoch == 4
    single = read_quorum(_written(tmp_path / "single", (3000,)), 3000, voters)
    assert single is not None and single.current_voters == (3000,)


def test_a_copy_of_a_single_bridges_directory_may_be_any_voters(tmp_path: Path) -> None:
    voters = frozenset({3000, 3001, 3002})
    found = read_quorum(_written(tmp_path / "copy", (3000,)), 3002, voters)
    assert found is not None and found.current_voters == (3000,)


def test_a_quorum_log_migrated_before_its_leader_wrote_migration_is_not_refused() -> None:
    image = MetadataImage()
    image.features.zk_migration_state = ZkMigrationState.MIGRATION
    empty = MigrationLeadershipState()
    assert check_log_matches_migration(image, 500, 3, empty) is not None  # a single bridge refuses it
    assert check_log_matches_migration(image, 500, 3, empty, quorum_committed=True) is None

