"""What a KRaft controller appends when it becomes the leader: the LeaderChange control batch, then the
activation records of Kafka 3.9's ActivationRecordsGenerator (the bootstrap transaction on an empty log).

The offline `migrate`, the bridge's metadata log and its migration driver all take these records from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from migrate.errors import UnsupportedVersionError
from migrate.kraft import metadata_version as mvs
from migrate.kraft import records as rec
from migrate.kraft.batch import encode_kraft_batch
from migrate.kraft.framing import encode_control_record
from migrate.kraft.metadata_version import MetadataVersion
from migrate.kraft.migration_state import ZkMigrationState

BOOTSTRAP_TRANSACTION_NAME = "Bootstrap records"
"""BeginTransactionRecord name ActivationRecordsGenerator gives the bootstrap records."""
ABORT_REASON = "Controller failover"
"""AbortTransactionRecord reason ActivationRecordsGenerator writes for a transaction left open."""

Records = list[tuple[Any, int]]


def leader_change_message(
    leader_id: int, voters: Sequence[int] | None = None, granting: Sequence[int] | None = None
) -> rec.LeaderChangeMessage:
    """The LeaderChangeMessage a leader appends first in its epoch (LeaderState, kraft.version 0): the voters
    at the epoch's start and those that granted the election (both just the leader when not given)."""
    voter_ids = voters if voters is not None else [leader_id]
    granting_ids = granting if granting is not None else [leader_id]
    return rec.LeaderChangeMessage(
        version=0,
        leader_id=leader_id,
        voters=[rec.LeaderChangeMessage.Voter(voter_id=v) for v in voter_ids],
        granting_voters=[rec.LeaderChangeMessage.Voter(voter_id=v) for v in granting_ids],
    )


def encode_leader_change_batch(
    offset: int,
    leader_epoch: int,
    timestamp_ms: int,
    leader_id: int,
    voters: Sequence[int] | None = None,
    granting: Sequence[int] | None = None,
) -> bytes:
    """The control batch holding `leader_change_message(leader_id, voters, granting)` at `offset`."""
    key, value = encode_control_record(leader_change_message(leader_id, voters, granting))
    return encode_kraft_batch(offset, leader_epoch, timestamp_ms, [(key, value)], True)


def bootstrap_records(metadata_version: MetadataVersion) -> Records:
    """What `kafka-storage format` puts in bootstrap.checkpoint (BootstrapMetadata.fromVersion)."""
    return [(rec.FeatureLevelRecord(name=mvs.FEATURE_NAME, feature_level=metadata_version.feature_level), 0)]


def bootstrap_metadata_version(bootstrap: Sequence[tuple[Any, int]]) -> MetadataVersion:
    """BootstrapMetadata.metadataVersion: the metadata.version level among the bootstrap records."""
    for record, _version in bootstrap:
        if isinstance(record, rec.FeatureLevelRecord) and record.name == mvs.FEATURE_NAME:
            return mvs.from_feature_level(record.feature_level)
    return mvs.MINIMUM_KRAFT_VERSION


def bootstrap_transaction(
    bootstrap: Sequence[tuple[Any, int]],
    metadata_version: MetadataVersion,
    migration_state: ZkMigrationState | None,
    *,
    abort_partial: bool = False,
) -> Records:
    """The records of recordsForEmptyLog: [an abort of a partial bootstrap,] BeginTransaction("Bootstrap
    records"), the bootstrap records, [ZkMigrationState,] EndTransaction; no transaction markers when
    `metadata_version` has no metadata transactions (the write is then one atomic batch)."""
    transactional = metadata_version.is_metadata_transaction_supported()
    records: Records = []
    if abort_partial:
        records.append((rec.AbortTransactionRecord(reason=ABORT_REASON), 0))
    if transactional:
        records.append((rec.BeginTransactionRecord(name=BOOTSTRAP_TRANSACTION_NAME), 0))
    records.extend(bootstrap)
    if migration_state is not None:
        records.append((rec.ZkMigrationStateRecord(zk_migration_state=int(migration_state)), 0))
    if transactional:
        records.append((rec.EndTransactionRecord(), 0))
    return records


def activation_records(
    bootstrap: Sequence[tuple[Any, int]],
    *,
    log_empty: bool,
    transaction_start_offset: int | None,
    zk_migration_enabled: bool,
    source: str,
) -> Records:
    """ActivationRecordsGenerator.generate (Kafka 3.9): on an empty log the bootstrap transaction with
    PRE_MIGRATION (migration enabled) or NONE; on a non-empty log only an abort of an open transaction.

    `bootstrap` is read only for an empty log; `source` names the log in refusals.
    """
    if not log_empty:
        if transaction_start_offset is None:
            return []
        return [(rec.AbortTransactionRecord(reason=ABORT_REASON), 0)]
    mv = bootstrap_metadata_version(bootstrap)
    transactional = mv.is_metadata_transaction_supported()
    if transaction_start_offset is not None and not transactional:
        raise UnsupportedVersionError(
            f"{source}: partial bootstrap transaction at offset {transaction_start_offset}, but metadata.version "
            f"{mv.name} does not support transactions"
        )
    if not transactional and zk_migration_enabled:
        raise UnsupportedVersionError(
            f"the bootstrap metadata.version {mv.name} does not support ZK migrations "
            f"(an empty log needs {mvs.IBP_3_6_IV1.name} or later)"
        )
    state = None
    if transactional:
        state = ZkMigrationState.PRE_MIGRATION if zk_migration_enabled else ZkMigrationState.NONE
    return bootstrap_transaction(bootstrap, mv, state, abort_partial=transaction_start_offset is not None)
