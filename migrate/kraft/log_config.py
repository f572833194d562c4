"""The metadata log's snapshot, retention and segment settings under Kafka 3.9's names (KRaftConfigs).

Kafka's counterparts: `MetadataLogConfig` (segment and retention settings the log applies) and the two settings
its `SnapshotGenerator` reads. Defaults are Kafka's; `parse_metadata_log_config` reads `NAME=VALUE` settings
as given on a command line and refuses unknown names and out-of-range values as Kafka's ConfigDef does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from migrate.errors import InvalidRequestError

__all__ = ["KAFKA_NAMES", "MetadataLogConfig", "parse_metadata_log_config"]

_INT32_MAX = 2**31 - 1
_INT64 = (-(2**63), 2**63 - 1)
_LOG_OVERHEAD = 12  # Records.LOG_OVERHEAD: the least `atLeast` Kafka allows for the segment sizes


@dataclass(frozen=True, slots=True)
class MetadataLogConfig:
    """When a replica snapshots its committed image, and what of its log and snapshots it keeps."""

    max_record_bytes_between_snapshots: int = 20 * 1024 * 1024
    """metadata.log.max.record.bytes.between.snapshots: committed batch bytes that trigger a snapshot."""
    max_snapshot_interval_ms: int = 3_600_000
    """metadata.log.max.snapshot.interval.ms: a snapshot at the first commit this long after the last (0: never)."""
    max_retention_bytes: int = 100 * 1024 * 1024
    """metadata.max.retention.bytes: log plus snapshots above this delete the oldest snapshot (-1: no limit)."""
    max_retention_ms: int = 7 * 24 * 3_600_000
    """metadata.max.retention.ms: snapshots older than this (by their last record's time) go (-1: no limit)."""
    segment_bytes: int = 1024 * 1024 * 1024
    """metadata.log.segment.bytes: a segment rolls when the next batch would take it past this."""
    segment_min_bytes: int = 8 * 1024 * 1024
    """metadata.log.segment.min.bytes (Kafka: internal, for tests only): the least segment.bytes allowed."""

    def __post_init__(self) -> None:
        if self.segment_bytes < self.segment_min_bytes:
            raise InvalidRequestError(
                f"cannot set metadata.log.segment.bytes below metadata.log.segment.min.bytes "
                f"{self.segment_min_bytes}: {self.segment_bytes}"
            )


KAFKA_NAMES: dict[str, tuple[str, int, int]] = {
    "metadata.log.max.record.bytes.between.snapshots": ("max_record_bytes_between_snapshots", 1, _INT64[1]),
    "metadata.log.max.snapshot.interval.ms": ("max_snapshot_interval_ms", 0, _INT64[1]),
    "metadata.max.retention.bytes": ("max_retention_bytes", *_INT64),
    "metadata.max.retention.ms": ("max_retention_ms", *_INT64),
    "metadata.log.segment.bytes": ("segment_bytes", _LOG_OVERHEAD, _INT32_MAX),
    "metadata.log.segment.min.bytes": ("segment_min_bytes", _LOG_OVERHEAD, _INT32_MAX),
}
"""Kafka's name → (field, least value, greatest value), as KRaftConfigs defines them."""


def parse_metadata_log_config(settings: Iterable[str], source: str) -> MetadataLogConfig:
    """`NAME=VALUE` settings (Kafka's names) over Kafka's defaults; `source` names where they came from."""
    values: dict[str, int] = {}
    for setting in settings:
        name, sep, text = setting.partition("=")
        name = name.strip()
        if not sep or name not in KAFKA_NAMES:
            known = ", ".join(sorted(KAFKA_NAMES))
            raise InvalidRequestError(f"{source} {setting!r}: expected NAME=VALUE with NAME one of {known}")
        field, least, greatest = KAFKA_NAMES[name]
        try:
            value = int(text.strip())
        except ValueError:
            raise InvalidRequestError(f"{source} {setting!r}: {name} takes a whole number") from None
        if not least <= value <= greatest:
            raise InvalidRequestError(f"{source} {setting!r}: {name} must be between {least} and {greatest}")
        values[field] = value
    return dataclasses.replace(MetadataLogConfig(), **values)
