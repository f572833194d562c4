"""Kafka 3.9's PartitionChangeBuilder: the next state of one partition as a PartitionChangeRecord.

Eligible leader replicas (KIP-966) are off, as they always are in 3.9 (they need metadata.version
4.0-IV0, which 3.9 does not ship as production): an ISR is therefore never emptied; removing its last
member leaves it as it was and sets the leader to -1.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from migrate.kraft import records as rec
from migrate.kraft.image import (
    LOST_DIRECTORY,
    MIGRATING_DIRECTORY,
    NO_LEADER,
    NO_LEADER_CHANGE,
    UNASSIGNED_DIRECTORY,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
)
from migrate.kraft.metadata_version import MetadataVersion

RECOVERED = 0
RECOVERING = 1
NO_RECOVERY_STATE_CHANGE = -1


class Election(enum.Enum):
    """PartitionChangeBuilder.Election."""

    PREFERRED = "preferred"
    """The first replica if it may lead, else the current leader, else any valid ISR member."""
    ONLINE = "online"
    """Keep the current leader if it may still lead, else the first valid ISR member in replica order."""
    UNCLEAN = "unclean"
    """As ONLINE, then any acceptable replica even outside the ISR (data may be lost)."""


# ---------------------------------------------------------------- who may lead


def is_active(image: MetadataImage, broker_id: int) -> bool:
    """ClusterControlManager.isActive: registered, unfenced and not in controlled shutdown."""
    broker = image.cluster.brokers.get(broker_id)
    return broker is not None and not broker.fenced and not broker.in_controlled_shutdown


def is_online_directory(directory: uuid.UUID, online: list[uuid.UUID]) -> bool:
    """DirectoryId.isOnline (an empty list means the broker predates directory reporting)."""
    if directory in (UNASSIGNED_DIRECTORY, MIGRATING_DIRECTORY):
        return True
    if directory == LOST_DIRECTORY:
        return False
    return not online or directory in online


def has_online_directory(image: MetadataImage, partition: PartitionRegistration, broker_id: int) -> bool:
    """ClusterControlManager.hasOnlineDir for the directory holding `broker_id`'s replica of `partition`."""
    broker = image.cluster.brokers.get(broker_id)
    if broker is None or broker_id not in partition.replicas:
        return False
    directory = partition.directories[partition.replicas.index(broker_id)]
    return is_online_directory(directory, broker.log_dirs)


def leader_acceptor(
    image: MetadataImage,
    partition: PartitionRegistration,
    *,
    removing: int = NO_LEADER,
    adding: int = NO_LEADER,
) -> Callable[[int], bool]:
    """ReplicationControlManager.LeaderAcceptor: active (or being unfenced, not being removed), directory online."""

    def accept(broker_id: int) -> bool:
        if broker_id == removing:
            return False
        if broker_id != adding and not is_active(image, broker_id):
            return False
        return has_online_directory(image, partition, broker_id)

    return accept


def default_directory(image: MetadataImage, broker_id: int) -> uuid.UUID:
    """ClusterControlManager.defaultDir: where a new replica on `broker_id` is placed."""
    broker = image.cluster.brokers.get(broker_id)
    if broker is None:
        return UNASSIGNED_DIRECTORY
    if not broker.log_dirs:
        return MIGRATING_DIRECTORY
    if len(broker.log_dirs) == 1:
        return broker.log_dirs[0]
    return UNASSIGNED_DIRECTORY


# ---------------------------------------------------------------- the builder


@dataclass(slots=True)
class PartitionChangeBuilder:
    """PartitionChangeBuilder with ELR off; targets default to the partition's current state."""

    partition: PartitionRegistration
    topic_id: uuid.UUID
    partition_id: int
    is_acceptable_leader: Callable[[int], bool]
    metadata_version: MetadataVersion
    zk_migration_enabled: bool = False
    election: Election = Election.ONLINE
    target_isr: list[int] | None = None
    target_replicas: list[int] | None = None
    target_removing: list[int] | None = None
    target_adding: list[int] | None = None
    target_leader_recovery_state: int | None = None
    default_dir: Callable[[int], uuid.UUID] | None = None
    target_directories: dict[int, uuid.UUID] = field(default_factory=dict)
    """setDirectory: replicas moved to another directory (the others keep theirs)."""
    _isr: list[int] = field(init=False, default_factory=list)
    _replicas: list[int] = field(init=False, default_factory=list)
    _removing: list[int] = field(init=False, default_factory=list)
    _adding: list[int] = field(init=False, default_factory=list)

    def build(self) -> rec.PartitionChangeRecord | None:
        """PartitionChangeBuilder.build: the change record, or None when nothing would change."""
        p = self.partition
        self._isr = list(p.isr if self.target_isr is None else self.target_isr)
        self._replicas = list(p.replicas if self.target_replicas is None else self.target_replicas)
        self._removing = list(p.removing_replicas if self.target_removing is None else self.target_removing)
        self._adding = list(p.adding_replicas if self.target_adding is None else self.target_adding)
        record = rec.PartitionChangeRecord(partition_id=self.partition_id, topic_id=self.topic_id)
        self._complete_reassignment()
        self._try_election(record)
        if record.leader == NO_LEADER_CHANGE and not set(p.replicas) <= set(self._replicas):
            # A replica leaves the assignment: the leader epoch must move (same leader, next epoch).
            record.leader = p.leader
        # ELR off: whatever eligible-leader state is left over is cleared; the last known ELR is kept.
        if p.elr:
            record.eligible_leader_replicas = []
        if record.isr is None and self._isr and self._isr != p.isr:
            record.isr = list(self._isr)
        self._bump_leader_epoch_on_isr_shrink(record)
        self._set_assignment_changes(record)
        target_lrs = self.target_leader_recovery_state
        if target_lrs is not None and target_lrs != p.leader_recovery_state:
            record.leader_recovery_state = target_lrs
        if change_record_is_no_op(record):
            return None
        return record

    def _complete_reassignment(self) -> None:
        """PartitionReassignmentReplicas.maybeCompleteReassignment."""
        if not self._removing and not self._adding:
            return
        isr = [b for b in self._isr if b not in self._removing]
        replicas = [b for b in self._replicas if b not in self._removing]
        if not isr or not replicas or not set(replicas) <= set(isr):
            return
        self._isr, self._replicas = isr, replicas
        self._removing, self._adding = [], []

    def _valid_new_leader(self, broker_id: int) -> bool:
        return broker_id in self._isr and self.is_acceptable_leader(broker_id)

    def elect_leader(self) -> tuple[int, bool]:
        """PartitionChangeBuilder.electLeader: (new leader or -1, whether the election is unclean)."""
        current = self.partition.leader
        if self.election is Election.PREFERRED:
            preferred = self._replicas[0] if self._replicas else NO_LEADER
            if preferred != NO_LEADER and self._valid_new_leader(preferred):
                return preferred, False
            if self._valid_new_leader(current):
                return current, False
            for broker_id in self._replicas[1:]:
                if self._valid_new_leader(broker_id):
                    return broker_id, False
            return NO_LEADER, False
        if self._valid_new_leader(current):
            return current, False
        for broker_id in self._replicas:
            if self._valid_new_leader(broker_id):
                return broker_id, False
        if self.election is Election.UNCLEAN:
            for broker_id in self._replicas:
                if self.is_acceptable_leader(broker_id):
                    return broker_id, True
        return NO_LEADER, False

    def _try_election(self, record: rec.PartitionChangeRecord) -> None:
        leader, unclean = self.elect_leader()
        p = self.partition
        if leader == p.leader:
            return
        record.leader = leader
        if unclean:
            # The new leader was outside the ISR: it becomes the whole ISR and must recover first.
            record.isr = [leader]
            if p.leader_recovery_state != RECOVERING and self.metadata_version.is_leader_recovery_supported():
                record.leader_recovery_state = RECOVERING

    def _bump_leader_epoch_on_isr_shrink(self, record: rec.PartitionChangeRecord) -> None:
        """triggerLeaderEpochBumpForIsrShrinkIfNeeded: before 3.6, or while ZooKeeper brokers migrate."""
        if not (
            self.metadata_version.is_leader_epoch_bump_required_on_isr_shrink() or self.zk_migration_enabled
        ):
            return
        if record.leader != NO_LEADER_CHANGE or record.isr is None:
            return
        if not set(self.partition.isr) <= set(record.isr):
            record.leader = self.partition.leader

    def _set_assignment_changes(self, record: rec.PartitionChangeRecord) -> None:
        p = self.partition
        if self._replicas:
            if self.metadata_version.is_directory_assignment_supported():
                kept = dict(zip(p.replicas, p.directories, strict=False))
                kept.update(self.target_directories)
                directories = [kept[b] if b in kept else self._default_dir(b) for b in self._replicas]
                if directories != p.directories:
                    record.directories = directories
            if self._replicas != p.replicas:
                record.replicas = list(self._replicas)
        if self._removing != p.removing_replicas:
            record.removing_replicas = list(self._removing)
        if self._adding != p.adding_replicas:
            record.adding_replicas = list(self._adding)

    def _default_dir(self, broker_id: int) -> uuid.UUID:
        if self.default_dir is None:
            return UNASSIGNED_DIRECTORY
        return self.default_dir(broker_id)


def change_record_is_no_op(record: rec.PartitionChangeRecord) -> bool:
    """PartitionChangeBuilder.changeRecordIsNoOp."""
    return (
        record.isr is None
        and record.eligible_leader_replicas is None
        and record.last_known_elr is None
        and record.leader == NO_LEADER_CHANGE
        and record.replicas is None
        and record.removing_replicas is None
        and record.adding_replicas is None
        and record.leader_recovery_state == NO_RECOVERY_STATE_CHANGE
        and record.directories is None
    )


def merge(partition: PartitionRegistration, record: rec.PartitionChangeRecord) -> PartitionRegistration:
    """PartitionRegistration.merge: the partition after the change (epochs bumped as replay does)."""
    replicas = partition.replicas if record.replicas is None else record.replicas
    if record.directories is not None:
        directories = record.directories
    elif record.replicas is not None:
        kept = dict(zip(partition.replicas, partition.directories, strict=False))
        directories = [kept.get(b, UNASSIGNED_DIRECTORY) for b in replicas]
    else:
        directories = partition.directories
    leader_changed = record.leader != NO_LEADER_CHANGE
    return PartitionRegistration(
        replicas=list(replicas),
        directories=list(directories),
        isr=list(partition.isr if record.isr is None else record.isr),
        removing_replicas=list(
            partition.removing_replicas if record.removing_replicas is None else record.removing_replicas
        ),
        adding_replicas=list(
            partition.adding_replicas if record.adding_replicas is None else record.adding_replicas
        ),
        leader=record.leader if leader_changed else partition.leader,
        leader_recovery_state=(
            partition.leader_recovery_state
            if record.leader_recovery_state == NO_RECOVERY_STATE_CHANGE
            else record.leader_recovery_state
        ),
        leader_epoch=partition.leader_epoch + 1 if leader_changed else partition.leader_epoch,
        partition_epoch=partition.partition_epoch + 1,
        elr=list(
            partition.elr if record.eligible_leader_replicas is None else record.eligible_leader_replicas
        ),
        last_known_elr=list(
            partition.last_known_elr if record.last_known_elr is None else record.last_known_elr
        ),
    )


def partition_builder(
    image: MetadataImage,
    topic: TopicImage,
    partition_id: int,
    partition: PartitionRegistration,
    *,
    accept: Callable[[int], bool] | None = None,
    election: Election = Election.ONLINE,
    zk_migration_enabled: bool | None = None,
    **targets: Any,
) -> PartitionChangeBuilder:
    """The PartitionChangeBuilder ReplicationControlManager sets up for one partition; by default its leader
    acceptor, and migration on whenever the metadata.version supports it (the bridge always migrates)."""
    mv = image.metadata_version
    return PartitionChangeBuilder(
        partition=partition,
        topic_id=topic.topic_id,
        partition_id=partition_id,
        is_acceptable_leader=leader_acceptor(image, partition) if accept is None else accept,
        metadata_version=mv,
        zk_migration_enabled=mv.is_migration_supported() if zk_migration_enabled is None else zk_migration_enabled,
        election=election,
        default_dir=lambda b: default_directory(image, b),
        **targets,
    )

