"""Decode one large segment or snapshot on several cores: split at batch boundaries, one process per part.

Workers decode every record fully (so damage anywhere is found) and send back only per-type counts, which
is what a summary or a consistency check of a multi-gigabyte snapshot needs.
"""

from __future__ import annotations

import mmap
import multiprocessing
import os
from collections import Counter
from pathlib import Path

from migrate.errors import CorruptDataError
from migrate.kraft.batch import check_batch_file, iter_kraft_batches, peek_header
from migrate.kraft.framing import decode_control_record, decode_metadata_record


def batch_boundaries(data: bytes | memoryview, source: str) -> list[int]:
    """Byte positions of every batch start plus the end of the last whole batch (headers only, no CRC)."""
    positions = [0]
    pos = 0
    end = len(data)
    while pos < end:
        if end - pos < 61:
            break  # a torn tail: the worker that owns the end of the file reports it
        try:
            header = peek_header(data, source, pos)
        except CorruptDataError:
            break  # likewise: damage is reported, with its offset, by the worker that decodes it
        pos += header.size_in_bytes
        positions.append(pos)
    return positions


def split_ranges(boundaries: list[int], parts: int) -> list[tuple[int, int]]:
    """Cut the byte span into at most `parts` ranges of about equal size, each on batch boundaries."""
    total = boundaries[-1]
    if parts <= 1 or len(boundaries) <= 2:
        return [(0, total)]
    ranges: list[tuple[int, int]] = []
    start = 0
    target = total / parts
    for pos in boundaries[1:-1]:
        if pos - start >= target and len(ranges) < parts - 1:
            ranges.append((start, pos))
            start = pos
    ranges.append((start, total))
    return ranges


def _open(path: Path) -> bytes | mmap.mmap:
    with path.open("rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            return b""
        return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)


def count_records(path: str, start: int, end: int, tolerate_torn_tail: bool = False) -> Counter[str]:
    """Fully decode the batches in [start, end) of `path`; count records per type name."""
    data = _open(Path(path))
    view = memoryview(data)[:end]
    counts: Counter[str] = Counter()
    try:
        for pos, header, entries in iter_kraft_batches(
            view, path, start_position=start, tolerate_torn_tail=tolerate_torn_tail
        ):
            if header.is_control:
                for _delta, key, value in entries:
                    control, _version = decode_control_record(key, value, path, pos)
                    counts[type(control).__name__] += 1
                continue
            for _delta, key, value in entries:
                if key is not None or value is None:
                    raise CorruptDataError(path, pos, "KRaft data record with a key or without a value")
                record, _version = decode_metadata_record(value, path, pos)
                counts[type(record).__name__] += 1
    finally:
        view.release()
    return counts


def count_records_parallel(path: str | os.PathLike[str], jobs: int | None = None) -> Counter[str]:
    """Per-type record counts of one file, decoded on `jobs` processes (default: all cores)."""
    source = str(path)
    jobs = jobs or os.cpu_count() or 1
    data = _open(Path(source))
    view = memoryview(data)
    try:
        check_batch_file(view, source)
        ranges = split_ranges(batch_boundaries(view, source), jobs)
        file_size = len(data)
    finally:
        view.release()
        if isinstance(data, mmap.mmap):
            data.close()
    # The last range runs to the end of the file so a torn tail (or trailing damage) is seen there.
    ranges[-1] = (ranges[-1][0], file_size)
    if len(ranges) == 1:
        return count_records(source, 0, file_size, tolerate_torn_tail=True)
    context = multiprocessing.get_context("fork")
    with context.Pool(len(ranges)) as pool:
        parts = pool.starmap(
            count_records,
            [(source, start, end, i == len(ranges) - 1) for i, (start, end) in enumerate(ranges)],
        )
    total: Counter[str] = Counter()
    for part in parts:
        total.update(part)
    return total
