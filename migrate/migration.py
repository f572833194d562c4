"""Offline ZooKeeper → KRaft migration: batching, the metadata transaction, and the KRaft metadata directory.

The log we write is the one a freshly formatted single KRaft controller would have written while running
Kafka 3.9's migration (migration-protocol.md §6): the leader-change control batch, the bootstrap
transaction (PRE_MIGRATION), then `BeginTransaction("ZK Migration")`, the migrated records coalesced by
`BufferingBatchConsumer` semantics (one controller write per flushed list), and finally
`ZkMigrationState(MIGRATION)` + `EndTransaction`. A snapshot of the resulting image is written at the
last offset so a controller can load it directly.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from itertools import chain
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

from migrate.atomic import swap_directory_into_place
from migrate.errors import InvalidRequestError, UnsupportedVersionError, Zk2KraftError
from migrate.gcpause import gc_paused
from migrate.kraft import metadata_version as mvs
from migrate.kraft import records as rec
from migrate.kraft.activation import (
    bootstrap_records,
    bootstrap_transaction,
    encode_leader_change_batch,
    leader_change_message,
)
from migrate.kraft.batch import (
    HEADER_SIZE,
    MAX_DATA_RECORD_OVERHEAD,
    encode_kraft_batch,
    kraft_data_record_size,
)
from migrate.kraft.framing import encode_metadata_record
from migrate.kraft.image import MetadataImage
from migrate.kraft.logdir import (
    LEADER_EPOCH_CHECKPOINT,
    META_PROPERTIES,
    PARTITION_METADATA,
    QUORUM_STATE,
    EpochEntry,
    MetaProperties,
    QuorumState,
    write_leader_epoch_checkpoint,
    write_meta_properties,
    write_partition_metadata,
    write_quorum_state,
    write_segment,
)
from migrate.kraft.metadata_version import MetadataVersion
from migrate.kraft.migration_state import ZkMigrationState
from migrate.kraft.reader import METADATA_PARTITION_DIR
from migrate.kraft.replay import MetadataReplayer
from migrate.kraft.snapshot import MAX_BATCH_SIZE_BYTES, write_bootstrap_checkpoint, write_snapshot
from migrate.manifest import ManifestBuilder, MigrationManifest
from migrate.translate import MissingStatePolicy, RecordAndVersion, TranslationResult, translate
from migrate.zk import paths
from migrate.zk.cluster import from_tree
from migrate.zk.model import ZkClusterModel
from migrate.zk.tree import ZTree

T = TypeVar("T")

DEFAULT_MIN_BATCH_SIZE = 200
"""`zookeeper.metadata.migration.min.batch.size` default."""
MAX_RECORDS_PER_APPEND = 10_000
"""QuorumController's maxRecordsPerBatch: a non-atomic controller write is appended in chunks of this size."""
LEADER_EPOCH = 1
"""A freshly formatted single controller elects itself in epoch 1 (fixture kraft-real-3.7)."""
DEFAULT_CONTROLLER_ID = 3000
"""The controller node id Kafka's migration documentation and tests use."""

MIGRATION_TRANSACTION_NAME = "ZK Migration"
MIN_MIGRATION_VERSION = mvs.IBP_3_4_IV0


# ---------------------------------------------------------------------------------------------- batching


class BufferingBatchConsumer(Generic[T]):
    """Kafka's BufferingBatchConsumer: concatenate incoming lists until at least `min_batch_size` items.

    Lists are never split, so a flushed batch may exceed the minimum; `close()` flushes the remainder.
    """

    def __init__(self, downstream: Callable[[list[T]], None], min_batch_size: int = DEFAULT_MIN_BATCH_SIZE):
        if min_batch_size < 1:
            raise InvalidRequestError(
                f"the minimum migration batch size must be at least 1, not {min_batch_size}"
            )
        self._downstream = downstream
        self._min = min_batch_size
        self._buffer: list[T] = []

    def accept(self, items: Iterable[T]) -> None:
        self._buffer.extend(items)
        if len(self._buffer) >= self._min:
            batch, self._buffer = self._buffer, []
            self._downstream(batch)

    def close(self) -> None:
        if self._buffer:
            batch, self._buffer = self._buffer, []
            self._downstream(batch)


def coalesce(lists: Iterable[Sequence[T]], min_batch_size: int = DEFAULT_MIN_BATCH_SIZE) -> list[list[T]]:
    """The batches a BufferingBatchConsumer hands downstream for these lists."""
    out: list[list[T]] = []
    consumer = BufferingBatchConsumer(out.append, min_batch_size)
    for items in lists:
        consumer.accept(items)
    consumer.close()
    return out


# ---------------------------------------------------------------------------------------------- the log


WriteKind = Literal["bootstrap", "begin", "migration", "complete"]


@dataclass(slots=True)
class ControllerWrite:
    """One controller write event; `kind == "migration"` writes are the batches the manifest counts."""

    kind: WriteKind
    records: list[RecordAndVersion]


def plan_writes(
    translation: TranslationResult, *, min_batch_size: int = DEFAULT_MIN_BATCH_SIZE
) -> list[ControllerWrite]:
    """Controller writes in log order: activation (bootstrap), begin, migrated batches, completion."""
    mv = translation.metadata_version
    transactional = mv.is_metadata_transaction_supported()
    # Kafka 3.4/3.5 activated a migrating controller at these levels too: PRE_MIGRATION without a transaction.
    activation = bootstrap_transaction(bootstrap_records(mv), mv, ZkMigrationState.PRE_MIGRATION)
    writes = [ControllerWrite("bootstrap", activation)]
    if transactional:
        writes.append(ControllerWrite("begin", migration_begin_records()))
    for batch in coalesce(translation.record_lists, min_batch_size):
        writes.append(ControllerWrite("migration", batch))
    writes.append(ControllerWrite("complete", migration_completion_records(mv)))
    return writes


def migration_begin_records() -> list[RecordAndVersion]:
    """The write that opens the "ZK Migration" metadata transaction (KRaftMigrationDriver.MigrateMetadataEvent)."""
    return [(rec.BeginTransactionRecord(name=MIGRATION_TRANSACTION_NAME), 0)]


def migration_completion_records(metadata_version: MetadataVersion) -> list[RecordAndVersion]:
    """The write that ends the migration: ZkMigrationState MIGRATION, and EndTransaction when the
    metadata.version has transactions (below 3.6-IV1 the migration is not atomic)."""
    records: list[RecordAndVersion] = [
        (rec.ZkMigrationStateRecord(zk_migration_state=ZkMigrationState.MIGRATION.value), 0)
    ]
    if metadata_version.is_metadata_transaction_supported():
        records.append((rec.EndTransactionRecord(), 0))
    return records


def migration_completed_message(
    manifest: MigrationManifest, last_offset: int, last_epoch: int, broker_ids: Sequence[int]
) -> str:
    """Kafka's success log line for the migration (KRaftMigrationDriver.MigrateMetadataEvent)."""
    ids = ", ".join(str(b) for b in broker_ids)
    return (
        f"Completed migration of metadata from ZooKeeper to KRaft. {manifest}. "
        f"The current metadata offset is now {last_offset} with an epoch of {last_epoch}. "
        f"Saw {len(broker_ids)} brokers in the migrated metadata [{ids}]."
    )




@dataclass(slots=True)
class LogEntry:
    """One record of the written log with its offset (control records included)."""

    offset: int
    record: Any
    version: int
    is_control: bool


@dataclass(slots=True)
class EncodedLog:
    """The batches of the segment, the entries they hold and the manifest of the migrated part."""

    batches: list[bytes]
    entries: list[LogEntry]
    epoch: int
    timestamp_ms: int
    manifest: MigrationManifest
    migration_first_offset: int
    """Offset of the first migration record (BeginTransaction, or the first migrated record without one)."""

    @property
    def last_offset(self) -> int:
        return self.entries[-1].offset

    @property
    def size_bytes(self) -> int:
        return sum(len(b) for b in self.batches)


class _RaftAppender:
    """Kafka's BatchAccumulator as the controller uses it: a write's appends share the current batch
    while they fit in 8 MiB; each controller write starts a new batch (the driver waits for the commit)."""

    def __init__(self, epoch: int, timestamp_ms: int, max_batch_bytes: int) -> None:
        self.epoch = epoch
        self.timestamp_ms = timestamp_ms
        self.max_batch_bytes = max_batch_bytes
        self.next_offset = 0
        self.batches: list[bytes] = []
        self.entries: list[LogEntry] = []
        self._pending: list[tuple[None, bytes]] = []
        self._pending_entries: list[LogEntry] = []
        self._used = HEADER_SIZE  # exact bytes of the pending batch; -1 when only the bound below is kept
        self._used_bound = HEADER_SIZE  # at least the bytes of the pending batch

    def leader_change(self, leader_id: int) -> None:
        self.flush()
        self.batches.append(encode_leader_change_batch(self.next_offset, self.epoch, self.timestamp_ms, leader_id))
        self.entries.append(LogEntry(self.next_offset, leader_change_message(leader_id), 0, True))
        self.next_offset += 1

    def write(self, records: Sequence[RecordAndVersion]) -> int:
        """Append one controller write; returns the bytes of the batches it produced."""
        self.flush()
        before = len(self.batches)
        for start in range(0, len(records), MAX_RECORDS_PER_APPEND):
            self._append(records[start : start + MAX_RECORDS_PER_APPEND])
        self.flush()
        return sum(len(b) for b in self.batches[before:])

    def _append(self, records: Sequence[RecordAndVersion]) -> None:
        values = [encode_metadata_record(r, v) for r, v in records]
        bound = sum(map(len, values)) + MAX_DATA_RECORD_OVERHEAD * len(values)
        if self._used_bound + bound <= self.max_batch_bytes:
            # Surely fits: the exact size, needed only near the limit, is worked out if it ever is.
            self._add_pending(records, values)
            self._used_bound += bound
            self._used = -1
            return
        if self._used < 0:
            self._used = HEADER_SIZE + sum(
                kraft_data_record_size(i, len(v)) for i, (_, v) in enumerate(self._pending)
            )
        needed = sum(kraft_data_record_size(len(self._pending) + i, len(v)) for i, v in enumerate(values))
        if self._pending and self._used + needed > self.max_batch_bytes:
            self.flush()
            needed = sum(kraft_data_record_size(i, len(v)) for i, v in enumerate(values))
        if not self._pending and HEADER_SIZE + needed > self.max_batch_bytes:
            raise Zk2KraftError(
                f"{len(values)} migrated records need a {HEADER_SIZE + needed}-byte batch, more than KRaft's "
                f"maximum of {self.max_batch_bytes} bytes; Kafka's controller would fail this write too"
            )
        self._add_pending(records, values)
        self._used += needed
        self._used_bound = self._used

    def _add_pending(self, records: Sequence[RecordAndVersion], values: list[bytes]) -> None:
        base = self.next_offset + len(self._pending)
        pending, entries = self._pending, self._pending_entries
        for i, ((record, version), value) in enumerate(zip(records, values, strict=True)):
            pending.append((None, value))
            entries.append(LogEntry(base + i, record, version, False))

    def flush(self) -> None:
        if not self._pending:
            return
        self.batches.append(
            encode_kraft_batch(self.next_offset, self.epoch, self.timestamp_ms, self._pending, False)
        )
        self.entries.extend(self._pending_entries)
        self.next_offset += len(self._pending)
        self._pending, self._pending_entries, self._used = [], [], HEADER_SIZE
        self._used_bound = HEADER_SIZE


def encode_log(
    writes: Sequence[ControllerWrite],
    *,
    controller_id: int,
    epoch: int = LEADER_EPOCH,
    timestamp_ms: int | None = None,
    max_batch_bytes: int = MAX_BATCH_SIZE_BYTES,
    clock_ns: Callable[[], int] = time.monotonic_ns,
) -> EncodedLog:
    """The segment's batches: LeaderChangeMessage at offset 0, then one or more batches per write."""
    stamp = time.time_ns() // 1_000_000 if timestamp_ms is None else timestamp_ms
    manifest = ManifestBuilder(clock_ns)
    appender = _RaftAppender(epoch, stamp, max_batch_bytes)
    appender.leader_change(controller_id)
    migration_first_offset = -1
    with gc_paused(promote=True):
        for write in writes:
            if write.kind != "bootstrap" and migration_first_offset < 0:
                migration_first_offset = appender.next_offset
            started = clock_ns()
            size = appender.write(write.records)
            if write.kind == "migration":
                manifest.accept_batch(write.records, clock_ns() - started, size)
    return EncodedLog(
        batches=appender.batches,
        entries=appender.entries,
        epoch=epoch,
        timestamp_ms=stamp,
        manifest=manifest.build(),
        migration_first_offset=migration_first_offset,
    )


def replay_log(log: EncodedLog) -> MetadataImage:
    """The image a controller has after replaying the log (C's replayer, Kafka's semantics)."""
    replayer = MetadataReplayer(source="migrated metadata log")
    with gc_paused(promote=True):
        for entry in log.entries:
            if not entry.is_control:
                replayer.replay(
                    entry.record, entry.version, entry.offset, epoch=log.epoch, timestamp_ms=log.timestamp_ms
                )
    if replayer.in_transaction:
        raise Zk2KraftError(
            f"the migrated log ends inside the metadata transaction begun at offset "
            f"{replayer.pending_transaction_offset}; this is a bug in zk2kraft"
        )
    return replayer.image


# ---------------------------------------------------------------------------------------------- the directory


@dataclass(slots=True)
class MigrationResult:
    """What migrate_to_metadata_dir wrote and found."""

    metadata_dir: Path
    cluster_id: str
    controller_id: int
    metadata_version: MetadataVersion
    manifest: MigrationManifest
    warnings: list[str]
    last_offset: int
    last_epoch: int
    snapshot_name: str
    files: dict[str, int] = field(default_factory=dict)
    """Files written, relative to the metadata dir, with their sizes."""
    translation: TranslationResult | None = None
    image: MetadataImage | None = None

    def completion_message(self) -> str:
        """Kafka's success log line for the migration."""
        assert self.translation is not None
        return migration_completed_message(
            self.manifest, self.last_offset, self.last_epoch, sorted(self.translation.broker_ids)
        )


def _as_model(source: ZTree | ZkClusterModel) -> ZkClusterModel:
    return source if isinstance(source, ZkClusterModel) else from_tree(source)


def model_cluster_id(model: ZkClusterModel) -> str:
    """ZooKeeper's `/cluster/id`: the KRaft controllers must be formatted with it."""
    if not model.cluster_id:
        raise Zk2KraftError(
            f"{paths.CLUSTER_ID} is missing: the cluster has no id yet (no broker ever started), so there is "
            f"nothing the KRaft controller could be formatted with; give the cluster id explicitly"
        )
    return model.cluster_id


def model_broker_ids(model: ZkClusterModel) -> set[int]:
    """Registered broker ids plus every broker id in a topic assignment."""
    ids = set(model.brokers)
    for topic in model.topics.values():
        ids.update(chain.from_iterable(topic.partitions.values()))
        ids.update(chain.from_iterable(topic.adding_replicas.values()))
    return ids


def _check_out_dir(out_dir: Path, force: bool) -> None:
    if out_dir.exists():
        if not out_dir.is_dir():
            raise Zk2KraftError(f"{out_dir} exists and is not a directory")
        if any(out_dir.iterdir()) and not force:
            raise Zk2KraftError(
                f"{out_dir} is not empty; refusing to write a metadata directory over it (use --force to replace it)"
            )


def _check_controller_id(controller_id: int, model_brokers: set[int]) -> None:
    if not 0 <= controller_id <= 2**31 - 1:
        raise InvalidRequestError(f"controller id {controller_id} is not a non-negative int32")
    if controller_id in model_brokers:
        raise InvalidRequestError(
            f"controller id {controller_id} is also a ZooKeeper broker id; KRaft controllers and brokers "
            f"share one id space, so pick a controller node.id no broker uses"
        )


def migrate_to_metadata_dir(
    source: ZTree | ZkClusterModel,
    out_dir: str | os.PathLike[str],
    *,
    metadata_version: MetadataVersion | str = mvs.LATEST_PRODUCTION,
    controller_id: int = DEFAULT_CONTROLLER_ID,
    cluster_id: str | None = None,
    on_missing_state: MissingStatePolicy = "fail",
    force: bool = False,
    min_batch_size: int = DEFAULT_MIN_BATCH_SIZE,
    timestamp_ms: int | None = None,
    directory_id: uuid.UUID | None = None,
    acl_id_factory: Callable[[], uuid.UUID] = uuid.uuid4,
    clock_ns: Callable[[], int] = time.monotonic_ns,
) -> MigrationResult:
    """Translate a ZooKeeper-mode cluster and write the KRaft metadata directory a controller would have.

    `out_dir` becomes the controller's metadata log dir: meta.properties (v1, ZooKeeper's cluster id,
    node.id = `controller_id`), bootstrap.checkpoint and __cluster_metadata-0/ (segment, snapshot at the
    last offset, partition.metadata, leader-epoch-checkpoint, quorum-state). Everything is written to a
    temporary directory first and renamed into place, so a failure leaves nothing behind.
    """
    mv = mvs.coerce(metadata_version)
    if mv < MIN_MIGRATION_VERSION or not mv.is_kraft_supported():
        raise InvalidRequestError(
            f"metadata.version {mv.name} cannot hold a ZooKeeper migration (needs {MIN_MIGRATION_VERSION.name} or later)"
        )
    target = Path(out_dir)
    _check_out_dir(target, force)
    started = clock_ns()
    model = _as_model(source)
    del source
    resolved_cluster_id = cluster_id or model_cluster_id(model)
    _check_controller_id(controller_id, model_broker_ids(model))

    translation = translate(
        model, metadata_version=mv, on_missing_state=on_missing_state, acl_id_factory=acl_id_factory
    )
    warnings = [f"ZooKeeper data: {w}" for w in model.warnings] + translation.warnings
    # The records hold copies of what they need: a caller that handed the model over frees it here.
    del model
    writes = plan_writes(translation, min_batch_size=min_batch_size)
    log = encode_log(writes, controller_id=controller_id, timestamp_ms=timestamp_ms, clock_ns=clock_ns)
    image = replay_log(log)

    files, snapshot_name = _write_directory(
        target,
        log,
        image,
        mv=mv,
        cluster_id=resolved_cluster_id,
        controller_id=controller_id,
        directory_id=directory_id or uuid.uuid4(),
    )
    # Kafka's duration covers reading ZooKeeper and writing every batch; ours also covers the files.
    manifest = replace(log.manifest, duration_ns=clock_ns() - started)
    return MigrationResult(
        metadata_dir=target,
        cluster_id=resolved_cluster_id,
        controller_id=controller_id,
        metadata_version=mv,
        manifest=manifest,
        warnings=warnings,
        last_offset=log.last_offset,
        last_epoch=log.epoch,
        snapshot_name=snapshot_name,
        files=files,
        translation=translation,
        image=image,
    )


def _write_directory(
    target: Path,
    log: EncodedLog,
    image: MetadataImage,
    *,
    mv: MetadataVersion,
    cluster_id: str,
    controller_id: int,
    directory_id: uuid.UUID,
) -> tuple[dict[str, int], str]:
    """Build the metadata dir beside `target`, then swap it into place; returns (files, snapshot name)."""
    parent = target.absolute().parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent))
    try:
        write_meta_properties(
            staging / META_PROPERTIES, MetaProperties(1, cluster_id, controller_id, directory_id)
        )
        write_bootstrap_checkpoint(staging, bootstrap_records(mv), timestamp_ms=log.timestamp_ms)
        pdir = staging / METADATA_PARTITION_DIR
        pdir.mkdir()
        write_segment(pdir, 0, log.batches)
        write_leader_epoch_checkpoint(pdir / LEADER_EPOCH_CHECKPOINT, [EpochEntry(log.epoch, 0)])
        write_partition_metadata(pdir / PARTITION_METADATA)
        write_quorum_state(
            pdir / QUORUM_STATE,
            QuorumState(
                leader_id=controller_id,
                leader_epoch=log.epoch,
                voted_id=-1,
                data_version=0,
                current_voters=(controller_id,),
            ),
        )
        try:
            snapshot = write_snapshot(
                pdir,
                image,
                end_offset=log.last_offset + 1,
                epoch=log.epoch,
                last_contained_timestamp_ms=log.timestamp_ms,
                metadata_version=mv,
                timestamp_ms=log.timestamp_ms,
            )
        except UnsupportedVersionError as exc:
            # Kafka would commit these records and then fail every snapshot of the image.
            raise UnsupportedVersionError(
                f"the migrated metadata cannot be stored at metadata.version {mv.name}: {exc}; "
                f"pick a higher --metadata-version"
            ) from None
        files = {
            str(p.relative_to(staging)): p.stat().st_size for p in sorted(staging.rglob("*")) if p.is_file()
        }
        swap_directory_into_place(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return files, snapshot.path.name
