"""The read-only segment walk: valid batches come back as written; whatever follows them stops the walk there."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from migrate.kraft.batch import encode_kraft_batch
from migrate.kraft.segment_walk import StopKind, WalkedBatch, walk_batches, walk_segment

_BATCH_SPEC = st.tuples(
    st.integers(0, 5),  # gap before the batch's base offset
    st.integers(0, 2**31 - 1),  # leader epoch
    st.lists(st.binary(max_size=40), min_size=1, max_size=4),  # record values
)


def _segment(specs: list[tuple[int, int, list[bytes]]], start: int = 0) -> tuple[bytes, list[WalkedBatch]]:
    data = bytearray()
    expected: list[WalkedBatch] = []
    offset = start
    for gap, epoch, values in specs:
        base = offset + gap
        batch = encode_kraft_batch(base, epoch, 1_700_000_000_000, [(None, v) for v in values], False)
        last = base + len(values) - 1
        expected.append(WalkedBatch(base, last, epoch, 1_700_000_000_000, len(data), len(batch)))
        data += batch
        offset = last + 1
    return bytes(data), expected


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_BATCH_SPEC, max_size=6), st.integers(0, 1000))
def test_valid_batches_walk_back_as_written(specs: list[tuple[int, int, list[bytes]]], start: int) -> None:
    data, expected = _segment(specs, start)
    walk = walk_batches(data, "seg", start)
    assert walk.batches == expected
    assert walk.stop is None and walk.valid_bytes == len(data)


def _damaged_tail(data: st.DataObject, batch: bytes) -> tuple[bytes, set[StopKind]]:
    """Bytes that cannot continue a log ending just before `batch`, and the stop kinds they may cause."""
    how = data.draw(st.sampled_from(["random", "repeat", "torn", "flip"]))
    if how == "random":
        return data.draw(st.binary(min_size=1, max_size=300)), set(StopKind) - {StopKind.OFFSETS_BACK}
    if how == "repeat":
        return batch, {StopKind.OFFSETS_BACK}
    if how == "torn":
        return batch[: data.draw(st.integers(1, len(batch) - 1))], {StopKind.TORN}
    # The base offset and leader epoch (bytes 0..7 and 12..15) are outside the CRC: not damage the walk sees.
    at = data.draw(st.sampled_from([*range(8, 12), *range(16, len(batch))]))
    flipped = bytearray(batch)
    flipped[at] ^= data.draw(st.integers(1, 255))
    return bytes(flipped), set(StopKind) - {StopKind.OFFSETS_BACK}


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_BATCH_SPEC, min_size=1, max_size=4), st.data())
def test_anything_after_valid_batches_stops_the_walk_there(
    specs: list[tuple[int, int, list[bytes]]], data: st.DataObject
) -> None:
    valid, expected = _segment(specs)
    last = expected[-1]
    tail, kinds = _damaged_tail(data, valid[last.position :])
    walk = walk_batches(valid + tail, "seg", 0)
    assert walk.batches == expected
    assert walk.stop is not None and walk.stop.kind in kinds
    assert walk.stop.position == walk.valid_bytes == len(valid)
    assert walk.stop.bytes_left == len(tail)


def test_a_segment_file_is_walked_read_only(tmp_path: Path) -> None:
    data, expected = _segment([(0, 3, [b"a", b"b"]), (0, 4, [b"c"])], start=10)
    path = tmp_path / "00000000000000000010.log"
    path.write_bytes(data + b"\x00" * 7)
    walk = walk_segment(path, 10)
    assert walk.batches == expected
    assert walk.stop is not None and walk.stop.kind is StopKind.TORN and walk.stop.bytes_left == 7
    assert path.read_bytes() == data + b"\x00" * 7
    empty = tmp_path / "00000000000000000020.log"
    empty.write_bytes(b"")
    assert walk_segment(empty, 0).batches == [] and walk_segment(empty, 0).stop is None
