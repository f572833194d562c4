"""Who this node is in the quorum and what it has promised: Kafka's QuorumState, ElectionState, quorum-state file.

`Election` is what Kafka 3.9 persists (ElectionState): the epoch, the leader if known, the vote if cast.
`FileElectionStore` writes it as Kafka's FileQuorumStateStore does (data_version 0 for a static quorum,
temp file, fsync, rename) before the transition it records takes effect.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from migrate.kraft.logdir import QuorumState, read_quorum_state, write_quorum_state

NO_ID = -1


class Role(enum.StrEnum):
    """The states of Kafka 3.9's QuorumState ("voted" is Unattached with a vote, as in 3.9)."""

    UNATTACHED = "unattached"
    VOTED = "voted"
    CANDIDATE = "candidate"
    FOLLOWER = "follower"
    LEADER = "leader"
    RESIGNED = "resigned"


@dataclass(frozen=True, slots=True)
class Election:
    """Kafka's ElectionState: epoch, leader id (-1 unknown) and voted id (-1 none)."""

    epoch: int
    leader_id: int = NO_ID
    voted_id: int = NO_ID


class ElectionStore(Protocol):
    """Kafka's QuorumStateStore."""

    def read(self) -> Election | None:
        """The last persisted election, or None when nothing was ever written."""

    def write(self, election: Election) -> None:
        """Persist durably before returning."""


class FileElectionStore:
    """FileQuorumStateStore: `quorum-state` in the metadata partition directory, data_version 0."""

    def __init__(self, path: Path, cluster_id: str, voters: tuple[int, ...]) -> None:
        self.path = path
        self._cluster_id = cluster_id
        self._voters = voters

    def read(self) -> Election | None:
        if not self.path.exists():
            return None
        state = read_quorum_state(self.path)
        return Election(state.leader_epoch, state.leader_id, state.voted_id)

    def write(self, election: Election) -> None:
        write_quorum_state(
            self.path,
            QuorumState(
                leader_id=election.leader_id,
                leader_epoch=election.epoch,
                voted_id=election.voted_id,
                data_version=0,
                current_voters=self._voters,
                cluster_id=self._cluster_id,
                applied_offset=0,
            ),
        )
