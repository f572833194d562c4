"""A read-only walk of a log segment's batch frames: the valid batches, then where and why they stop.

Kafka's counterpart is the batch loop of `LogSegment.recover` (`FileLogInputStream` plus
`RecordBatch.ensureValid` and the offset checks): lengths, magic, CRC-32C and offsets, records not decoded.
What to do where the walk stops is the caller's policy (a hand-off check reports Kafka's truncation, the
bridge truncates only a torn tail and refuses other damage).
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from crc32c import crc32c

from migrate.errors import Zk2KraftError
from migrate.kraft.batch import CRC_START, HEADER_SIZE, LOG_OVERHEAD, MAGIC, MIN_BATCH_LENGTH

__all__ = [
    "SegmentWalk",
    "StopKind",
    "WalkStop",
    "WalkedBatch",
    "intact_batch_after",
    "mapped_file",
    "walk_batches",
    "walk_segment",
]

_PREFIX = struct.Struct(">qiibI")  # baseOffset, batchLength, partitionLeaderEpoch, magic, crc
_AFTER_CRC = struct.Struct(">hiqq")  # attributes, lastOffsetDelta, baseTimestamp, maxTimestamp


class StopKind(StrEnum):
    """Why a walk stopped before the end of the file."""

    TORN = "torn tail"
    BAD_LENGTH = "bad length"
    BAD_MAGIC = "bad magic"
    BAD_CRC = "bad CRC"
    OFFSETS_BACK = "offsets going back"


@dataclass(frozen=True, slots=True)
class WalkedBatch:
    base_offset: int
    last_offset: int
    leader_epoch: int
    max_timestamp: int
    position: int
    size: int


@dataclass(frozen=True, slots=True)
class WalkStop:
    """Where (byte position) and why a walk stopped; `bytes_left` counts from there to the end of the file."""

    kind: StopKind
    position: int
    bytes_left: int
    problem: str


@dataclass(slots=True)
class SegmentWalk:
    """The valid batches of one segment, in order, and the stop before the end of the file if any."""

    source: str
    file_size: int
    batches: list[WalkedBatch] = field(default_factory=list)
    stop: WalkStop | None = None

    @property
    def valid_bytes(self) -> int:
        return self.stop.position if self.stop is not None else self.file_size


@contextmanager
def mapped_file(path: Path) -> Iterator[memoryview]:
    """The file's bytes, memory-mapped (segments reach a gigabyte), released on leaving."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else None
    except OSError as exc:
        raise Zk2KraftError(f"cannot read {path}: {exc.strerror or exc}") from None
    view = memoryview(mapped if mapped is not None else b"")
    try:
        yield view
    finally:
        view.release()
        if mapped is not None:
            mapped.close()


def walk_segment(path: Path, expected_offset: int) -> SegmentWalk:
    """Walk the segment file at `path`, whose first batch may not start below `expected_offset`."""
    with mapped_file(path) as view:
        return walk_batches(view, str(path), expected_offset)


def walk_batches(data: bytes | memoryview, source: str, expected_offset: int) -> SegmentWalk:
    """Check every batch frame of `data` (length, magic, CRC-32C, offsets) without decoding records."""
    view = memoryview(data)
    size = len(view)
    walk = SegmentWalk(source, size)
    pos = 0
    while pos < size:
        remaining = size - pos
        stop = _frame_problem(view, pos, remaining)
        if stop is None:
            base, length, epoch, _magic, _crc = _PREFIX.unpack_from(view, pos)
            _attributes, last_delta, _base_ts, max_ts = _AFTER_CRC.unpack_from(view, pos + CRC_START)
            if base < expected_offset or last_delta < 0:
                stop = (
                    StopKind.OFFSETS_BACK,
                    f"batch offsets {base}..{base + last_delta} do not follow offset {expected_offset - 1}",
                )
        if stop is not None:
            walk.stop = WalkStop(stop[0], pos, remaining, stop[1])
            break
        batch_size = length + LOG_OVERHEAD
        walk.batches.append(WalkedBatch(base, base + last_delta, epoch, max_ts, pos, batch_size))
        expected_offset = base + last_delta + 1
        pos += batch_size
    return walk


def _frame_problem(view: memoryview, pos: int, remaining: int) -> tuple[StopKind, str] | None:
    if remaining < HEADER_SIZE:
        return StopKind.TORN, f"only {remaining} bytes left, less than a {HEADER_SIZE}-byte batch header"
    _base, length, _epoch, magic, crc = _PREFIX.unpack_from(view, pos)
    batch_size = length + LOG_OVERHEAD
    if length < MIN_BATCH_LENGTH:
        return StopKind.BAD_LENGTH, f"impossible batch length {length}"
    if batch_size > remaining:
        return StopKind.TORN, f"batch of {batch_size} bytes but only {remaining} bytes left (torn write)"
    if magic != MAGIC:
        return StopKind.BAD_MAGIC, f"record batch magic {magic}; only magic 2 is supported"
    if crc32c(view[pos + CRC_START : pos + batch_size]) != crc:
        return StopKind.BAD_CRC, "CRC-32C does not match the batch bytes"
    return None


def intact_batch_after(view: memoryview, pos: int, expected_offset: int) -> bool:
    """Whether an intact batch (length, CRC, offset at or after `expected_offset`) starts after byte `pos`."""
    size = len(view)
    start = pos + 1
    data = view[start:size].tobytes()
    magic_at = data.find(b"\x02", 16)
    while magic_at >= 0:
        q = start + magic_at - 16
        if q + HEADER_SIZE <= size:
            base, length, _epoch, _magic, crc = _PREFIX.unpack_from(view, q)
            end = q + length + LOG_OVERHEAD
            if (
                length >= MIN_BATCH_LENGTH
                and end <= size
                and expected_offset <= base < expected_offset + 2**31
                and crc32c(view[q + CRC_START : end]) == crc
            ):
                return True
        magic_at = data.find(b"\x02", magic_at + 1)
    return False
