"""Kafka's ZkMigrationState (metadata/.../migration/ZkMigrationState.java): the value a ZkMigrationStateRecord carries."""

from __future__ import annotations

from enum import IntEnum


class ZkMigrationState(IntEnum):
    """Where a KRaft cluster stands in the ZooKeeper migration, with Kafka's byte values."""

    NONE = 0  # never migrated (or formatted before the migration existed)
    MIGRATION = 1  # the initial load is done: dual writes to ZooKeeper
    PRE_MIGRATION = 2  # the controllers came up with migration enabled; the load has not finished
    POST_MIGRATION = 3  # the migration was finalized: ZooKeeper is no longer written
    ZK = 4  # a ZooKeeper-mode cluster (never written to a KRaft log)


ZK_MIGRATION_STATES: dict[int, str] = {state.value: state.name for state in ZkMigrationState}


def zk_migration_state_name(value: int) -> str:
    """The name Kafka prints for a state, or the number for a value Kafka does not know."""
    return ZK_MIGRATION_STATES.get(value, str(value))
