"""MigrationManifest: what a ZooKeeper → KRaft migration wrote, counted and printed the way Kafka 3.9 does.

Kafka counts every record that went through the buffering batch consumer (not the Begin/End transaction
records, not ZkMigrationStateRecord), the flushed batches, the time spent waiting on each batch and the
wall-clock duration (`MigrationManifest.java`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from pydantic import BaseModel, Field

from migrate.kraft.records import METADATA_RECORD_TYPES

_NS_PER_MS = 1_000_000


@dataclass(frozen=True, slots=True)
class MigrationManifest:
    """Totals of one migration; `str()` is Kafka's `MigrationManifest.toString()` text."""

    total_records: int
    total_batches: int
    total_batch_duration_ns: int
    duration_ns: int
    record_type_counts: dict[int, int] = field(default_factory=dict)
    """Records per apiKey."""
    total_bytes: int = 0
    """Encoded size of the migrated data batches (our addition; Kafka does not count bytes)."""

    @property
    def duration_ms(self) -> int:
        return self.duration_ns // _NS_PER_MS

    @property
    def avg_batch_duration_ms(self) -> float:
        """Whole milliseconds waited in total, divided by batches; -1 when there were no batches."""
        if self.total_batches == 0:
            return -1.0
        return (self.total_batch_duration_ns // _NS_PER_MS) / self.total_batches

    def record_type_names(self) -> dict[str, int]:
        """Counts keyed by Kafka's MetadataRecordType name, in enum (apiKey) order."""
        return {_type_name(key): self.record_type_counts[key] for key in sorted(self.record_type_counts)}

    def __str__(self) -> str:
        counts = ", ".join(f"{name}={count}" for name, count in self.record_type_names().items())
        return (
            f"{self.total_records} records were generated in {self.duration_ms} ms across "
            f"{self.total_batches} batches. The average time spent waiting on a batch was "
            f"{java_format_2f(self.avg_batch_duration_ms)} ms. The record types were {{{counts}}}"
        )


def _type_name(api_key: int) -> str:
    cls = METADATA_RECORD_TYPES.get(api_key)
    return cls.TYPE_NAME if cls is not None else f"UNKNOWN_{api_key}"


def java_format_2f(value: float) -> str:
    """Java's `String.format("%.2f", v)`: half-up rounding of the shortest decimal form of the double."""
    return str(Decimal(repr(value)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


class ManifestBuilder:
    """Collects batches as they are written (Kafka's MigrationManifest.Builder)."""

    def __init__(self, clock_ns: Callable[[], int] = time.monotonic_ns) -> None:
        self._clock_ns = clock_ns
        self._start_ns = clock_ns()
        self._counts: dict[int, int] = {}
        self._batches = 0
        self._total = 0
        self._batch_duration_ns = 0
        self._bytes = 0

    def accept_batch(self, records: Iterable[tuple[Any, int]], duration_ns: int, size_bytes: int = 0) -> None:
        """Count one flushed batch of (record, version) pairs that took `duration_ns` to write."""
        self._batches += 1
        self._batch_duration_ns += duration_ns
        self._bytes += size_bytes
        counts = self._counts
        for record, _version in records:
            key = record.API_KEY
            counts[key] = counts.get(key, 0) + 1
            self._total += 1

    def build(self) -> MigrationManifest:
        return MigrationManifest(
            total_records=self._total,
            total_batches=self._batches,
            total_batch_duration_ns=self._batch_duration_ns,
            duration_ns=self._clock_ns() - self._start_ns,
            record_type_counts=dict(self._counts),
            total_bytes=self._bytes,
        )


# ------------------------------------------------------------------------------ JSON output


class ManifestModel(BaseModel):
    """The manifest as `zk2kraft migrate --format json` prints it."""

    total_records: int
    batches: int
    bytes: int = Field(description="encoded size of the migrated data batches")
    duration_ms: int
    avg_batch_duration_ms: float
    record_types: dict[str, int] = Field(description="records per MetadataRecordType, in apiKey order")
    text: str = Field(description="Kafka's MigrationManifest.toString()")

    @classmethod
    def from_manifest(cls, manifest: MigrationManifest) -> ManifestModel:
        return cls(
            total_records=manifest.total_records,
            batches=manifest.total_batches,
            bytes=manifest.total_bytes,
            duration_ms=manifest.duration_ms,
            avg_batch_duration_ms=manifest.avg_batch_duration_ms,
            record_types=manifest.record_type_names(),
            text=str(manifest),
        )


class MigrationReportModel(BaseModel):
    """Everything `zk2kraft migrate --format json` reports: outputs, log position, manifest, warnings."""

    metadata_dir: str
    cluster_id: str
    controller_id: int
    metadata_version: str
    source: str
    last_offset: int = Field(description="offset of the last migration record (kraft_metadata_offset)")
    last_epoch: int = Field(description="its leader epoch (kraft_metadata_epoch)")
    snapshot: str = Field(description="file name of the snapshot written at the last offset")
    files: dict[str, int] = Field(description="files written, relative to the metadata dir, with sizes")
    manifest: ManifestModel
    warnings: list[str]
    accepted_older_zk_state: bool = Field(
        default=False, description="the ZooKeeper data was older than its newest (damaged) snapshot, by request"
    )
