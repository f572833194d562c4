"""Decoding one file on several processes gives exactly the sequential answer, damage included."""

from __future__ import annotations

import itertools
import shutil
from collections import Counter
from pathlib import Path

import pytest

from migrate.errors import CorruptDataError
from migrate.kraft.parallel import batch_boundaries, count_records_parallel, split_ranges
from migrate.kraft.reader import iter_file
from tests.support import FIXTURES

FIXTURE_LOG = FIXTURES / "kraft-real-3.7/__cluster_metadata-0/00000000000000000000.log"


def sequential_counts(path: Path) -> Counter[str]:
    return Counter(type(e.record).__name__ for e in iter_file(path))


def test_split_ranges_cover_the_file_on_batch_boundaries() -> None:
    data = FIXTURE_LOG.read_bytes()
    bounds = batch_boundaries(data, str(FIXTURE_LOG))
    assert len(bounds) == 4814 + 1 and bounds[-1] == len(data)
    ranges = split_ranges(bounds, 3)
    assert len(ranges) == 3
    assert ranges[0][0] == 0 and ranges[-1][1] == len(data)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
    assert all(start in bounds for start, _ in ranges)


@pytest.mark.parametrize("jobs", [1, 2, 3])
def test_parallel_counts_equal_sequential(jobs: int) -> None:
    assert count_records_parallel(FIXTURE_LOG, jobs) == sequential_counts(FIXTURE_LOG)


def test_damage_in_a_later_part_is_reported_with_file_and_offset(tmp_path: Path) -> None:
    damaged = tmp_path / "00000000000000000000.log"
    data = bytearray(FIXTURE_LOG.read_bytes())
    data[300_000] ^= 0xFF
    damaged.write_bytes(bytes(data))
    with pytest.raises(CorruptDataError, match=r"00000000000000000000\.log at byte \d+"):
        count_records_parallel(damaged, 2)


def test_torn_tail_is_ignored_like_kafka_recovery(tmp_path: Path) -> None:
    torn = tmp_path / "00000000000000000000.log"
    shutil.copy(FIXTURE_LOG, torn)
    with torn.open("ab") as fh:
        fh.write(FIXTURE_LOG.read_bytes()[:40])
    assert count_records_parallel(torn, 2) == sequential_counts(FIXTURE_LOG)


def test_errors_survive_pickling() -> None:
    import pickle

    from migrate.errors import ZnodeFormatError

    err = pickle.loads(pickle.dumps(CorruptDataError("a.log", 12, "bad CRC")))
    assert (err.source, err.offset, str(err)) == ("a.log", 12, "a.log at byte 12: bad CRC")
    znode = pickle.loads(pickle.dumps(ZnodeFormatError("/brokers/ids/1", "not JSON")))
    assert str(znode) == "znode /brokers/ids/1: not JSON"
