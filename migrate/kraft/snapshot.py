"""Write KRaft snapshot files (`<end offset>-<epoch>.checkpoint`) and `bootstrap.checkpoint` as Kafka 3.9 does.

Layout (RecordsSnapshotWriter over a BatchAccumulator with base offset 0 and the snapshot epoch as
every batch's partition leader epoch): a control batch with SnapshotHeaderRecord (plus KRaftVersionRecord
and VotersRecord when kraft.version >= 1), data batches, and a control batch with SnapshotFooterRecord.

Batching follows Kafka: the image writer hands records over in lists of 1024 (SnapshotEmitter's
DEFAULT_BATCH_SIZE through RaftSnapshotWriter), and the accumulator puts a whole list in the current
batch if it fits within the maximum batch size (KafkaRaftClient.MAX_BATCH_SIZE_BYTES, 8 MiB, for both
KafkaRaftClient.createSnapshot and BatchFileWriter), otherwise it starts a new batch.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from migrate.atomic import fsync_directory
from migrate.errors import InvalidRequestError, Zk2KraftError
from migrate.gcpause import gc_paused
from migrate.kraft import metadata_version as mvs
from migrate.kraft import records as rec
from migrate.kraft.batch import (
    HEADER_SIZE,
    MAX_DATA_RECORD_OVERHEAD,
    encode_kraft_batch,
    kraft_data_record_size,
)
from migrate.kraft.framing import encode_control_record, encode_metadata_record
from migrate.kraft.image import MetadataImage
from migrate.kraft.logdir import BOOTSTRAP_CHECKPOINT, SnapshotId, snapshot_file_name
from migrate.kraft.metadata_version import MetadataVersion

MAX_BATCH_SIZE_BYTES = 8 * 1024 * 1024
SNAPSHOT_RECORDS_PER_APPEND = 1024
BOOTSTRAP_RECORDS_PER_APPEND = 1  # BootstrapDirectory appends the bootstrap records one by one

Clock = Callable[[], int]
_TRANSACTION_RECORDS = (rec.BeginTransactionRecord, rec.EndTransactionRecord, rec.AbortTransactionRecord)


@dataclass(frozen=True, slots=True)
class WrittenSnapshot:
    """What write_snapshot / write_bootstrap_checkpoint produced."""

    path: Path
    snapshot_id: SnapshotId
    size_bytes: int
    record_count: int
    data_batches: int




def _system_clock() -> int:
    return time.time_ns() // 1_000_000


def _clock(timestamp_ms: int | Clock | None) -> Clock:
    if timestamp_ms is None:
        return _system_clock
    if callable(timestamp_ms):
        return timestamp_ms
    fixed = timestamp_ms
    return lambda: fixed


class _BatchStream:
    """Kafka's BatchAccumulator for one snapshot file: offsets from 0, one epoch, size-bounded batches."""

    def __init__(self, out: IO[bytes], epoch: int, clock: Clock, max_batch_bytes: int) -> None:
        self.out = out
        self.epoch = epoch
        self.clock = clock
        self.max_batch_bytes = max_batch_bytes
        self.next_offset = 0
        self.size = 0
        self.records = 0
        self.data_batches = 0
        self._values: list[tuple[None, bytes]] = []
        self._used = HEADER_SIZE  # exact bytes of the current batch; -1 when only the bound below is kept
        self._used_bound = HEADER_SIZE  # at least the bytes of the current batch
        self._batch_time = 0

    def append(self, values: Sequence[bytes]) -> None:
        """One accumulator append: all `values` go into one batch (the current one if they fit)."""
        bound = sum(map(len, values)) + MAX_DATA_RECORD_OVERHEAD * len(values)
        if self._used_bound + bound <= self.max_batch_bytes:
            # Surely fits: the exact size, needed only near the limit, is worked out if it ever is.
            if not self._values:
                self._batch_time = self.clock()
            self._values.extend((None, v) for v in values)
            self._used_bound += bound
            self._used = -1
            return
        if self._used < 0:
            self._used = HEADER_SIZE + self._bytes_needed([v for _, v in self._values], 0)
        needed = self._bytes_needed(values, len(self._values))
        if self._values and self._used + needed > self.max_batch_bytes:
            self._complete()
            needed = self._bytes_needed(values, 0)
        if not self._values:
            if HEADER_SIZE + needed > self.max_batch_bytes:
                raise Zk2KraftError(
                    f"{len(values)} records need a {HEADER_SIZE + needed}-byte batch, "
                    f"more than the maximum batch size of {self.max_batch_bytes} bytes"
                )
            self._batch_time = self.clock()
        self._values.extend((None, v) for v in values)
        self._used += needed
        self._used_bound = self._used

    def control(self, records: Sequence[Any]) -> None:
        """A control batch of its own (completing the current data batch first)."""
        self._complete()
        pairs = [encode_control_record(r) for r in records]
        self._write(encode_kraft_batch(self.next_offset, self.epoch, self.clock(), pairs, True), len(pairs))

    def _bytes_needed(self, values: Sequence[bytes], first_delta: int) -> int:
        return sum(kraft_data_record_size(first_delta + i, len(v)) for i, v in enumerate(values))

    def _complete(self) -> None:
        if not self._values:
            return
        values = self._values
        self._write(
            encode_kraft_batch(self.next_offset, self.epoch, self._batch_time, values, False), len(values)
        )
        self.records += len(values)
        self.data_batches += 1
        self._values = []
        self._used = self._used_bound = HEADER_SIZE

    def _write(self, data: bytes, count: int) -> None:
        self.out.write(data)
        self.size += len(data)
        self.next_offset += count


def _encode_values(records: Iterable[tuple[Any, int]], per_append: int) -> Iterable[list[bytes]]:
    chunk: list[bytes] = []
    allowed: set[type] = set()  # record types already checked
    for record, version in records:
        kind = type(record)
        if kind not in allowed:
            if isinstance(record, _TRANSACTION_RECORDS):
                raise InvalidRequestError(
                    f"{kind.__name__} cannot be written to a snapshot: snapshots never contain transaction records"
                )
            if getattr(kind, "API_KEY", None) is None:
                raise InvalidRequestError(f"{kind.__name__} is not a metadata record")
            allowed.add(kind)
        chunk.append(encode_metadata_record(record, version))
        if len(chunk) >= per_append:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _write_file(
    target: Path,
    records: Iterable[tuple[Any, int]],
    *,
    epoch: int,
    header_records: list[Any],
    clock: Clock,
    max_batch_bytes: int,
    per_append: int,
    overwrite: bool,
) -> tuple[int, int, int]:
    """Write header, data and footer batches to `<target>-<random>.part`, then rename it into place."""
    if target.exists() and not overwrite:
        raise InvalidRequestError(f"{target} already exists; refusing to overwrite it")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name.removesuffix('.checkpoint')}-{uuid.uuid4()}.checkpoint.part")
    try:
        with open(partial, "xb") as out, gc_paused():
            stream = _BatchStream(out, epoch, clock, max_batch_bytes)
            stream.control(header_records)
            for values in _encode_values(records, per_append):
                stream.append(values)
            stream.control([rec.SnapshotFooterRecord(version=0)])
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    fsync_directory(target.parent)
    return stream.size, stream.records, stream.data_batches


def write_snapshot(
    path_dir: str | os.PathLike[str],
    image_or_records: MetadataImage | Iterable[tuple[Any, int]],
    *,
    end_offset: int | None = None,
    epoch: int | None = None,
    last_contained_timestamp_ms: int | None = None,
    metadata_version: MetadataVersion | int | str | None = None,
    kraft_version: int = 0,
    voters: Any | None = None,
    max_batch_bytes: int = MAX_BATCH_SIZE_BYTES,
    timestamp_ms: int | Clock | None = None,
    overwrite: bool = False,
) -> WrittenSnapshot:
    """Write `<end_offset>-<epoch>.checkpoint` into `path_dir` (a `__cluster_metadata-0` directory).

    From an image, records come from `image.stream_records(metadata_version)` (default: the image's version)
    and `end_offset`/`epoch`/`last_contained_timestamp_ms` default to the image's provenance (last
    offset + 1). From (record, version) pairs they are required. `timestamp_ms` sets the batch
    timestamps (a number, or a clock called once per batch; default: the current time). `voters` is a
    VotersRecord written after the KRaftVersionRecord when `kraft_version` >= 1.
    """
    if isinstance(image_or_records, MetadataImage):
        image = image_or_records
        target_mv = image.metadata_version if metadata_version is None else mvs.coerce(metadata_version)
        records: Iterable[tuple[Any, int]] = image.stream_records(target_mv)
        provenance = image.provenance
        if end_offset is None:
            end_offset = provenance.last_contained_offset + 1
        if epoch is None:
            epoch = max(provenance.last_contained_epoch, 0)
        if last_contained_timestamp_ms is None:
            last_contained_timestamp_ms = max(provenance.last_contained_log_time_ms, 0)
    else:
        records = image_or_records
        if end_offset is None or epoch is None:
            raise InvalidRequestError("write_snapshot needs end_offset and epoch when given records")
        if last_contained_timestamp_ms is None:
            last_contained_timestamp_ms = 0
    if kraft_version not in (0, 1):
        raise InvalidRequestError(f"kraft.version {kraft_version} is not defined (Kafka 3.9 knows 0 and 1)")
    if voters is not None and kraft_version == 0:
        raise InvalidRequestError("a voter set is not expected when the kraft.version is 0")
    if max_batch_bytes <= HEADER_SIZE:
        raise InvalidRequestError(f"max_batch_bytes {max_batch_bytes} leaves no room for records")

    sid = SnapshotId(end_offset, epoch)
    target = Path(path_dir) / snapshot_file_name(sid)
    header: list[Any] = [
        rec.SnapshotHeaderRecord(version=0, last_contained_log_timestamp=last_contained_timestamp_ms)
    ]
    if kraft_version >= 1:
        header.append(rec.KRaftVersionRecord(version=0, kraft_version=kraft_version))
        if voters is not None:
            header.append(voters)
    size, count, batches = _write_file(
        target,
        records,
        epoch=epoch,
        header_records=header,
        clock=_clock(timestamp_ms),
        max_batch_bytes=max_batch_bytes,
        per_append=SNAPSHOT_RECORDS_PER_APPEND,
        overwrite=overwrite,
    )
    return WrittenSnapshot(target, sid, size, count, batches)


def write_bootstrap_checkpoint(
    directory: str | os.PathLike[str],
    records: Iterable[tuple[Any, int]],
    *,
    timestamp_ms: int | Clock | None = None,
    overwrite: bool = True,
) -> WrittenSnapshot:
    """Write `bootstrap.checkpoint` next to meta.properties, as `kafka-storage format` (BatchFileWriter) does.

    Epoch 0, header LastContainedLogTimestamp 0, records appended one at a time into 8 MiB batches.
    """
    target = Path(directory) / BOOTSTRAP_CHECKPOINT
    header = [rec.SnapshotHeaderRecord(version=0, last_contained_log_timestamp=0)]
    size, count, batches = _write_file(
        target,
        records,
        epoch=0,
        header_records=header,
        clock=_clock(timestamp_ms),
        max_batch_bytes=MAX_BATCH_SIZE_BYTES,
        per_append=BOOTSTRAP_RECORDS_PER_APPEND,
        overwrite=overwrite,
    )
    return WrittenSnapshot(target, SnapshotId(0, 0), size, count, batches)
