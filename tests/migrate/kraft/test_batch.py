"""Record batch v2: real Kafka files decode and re-encode byte-exactly; corruption is reported precisely."""

from __future__ import annotations

import dataclasses
import struct
from pathlib import Path

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.records.readers import read_batch as kio_read_batch

from migrate.errors import CorruptDataError, Zk2KraftError
from migrate.kraft.batch import (
    ATTR_CONTROL,
    BatchRecord,
    CompressionType,
    RecordBatch,
    TimestampType,
    TornTail,
    build_batch,
    decode_batch,
    encode_batch,
    encode_kraft_batch,
    iter_batches,
    iter_kraft_batches,
    peek_header,
)
from migrate.kraft.compression import compress
from tests.support import FIXTURES

FIXTURE = FIXTURES / "kraft-real-3.7"
LOG = FIXTURE / "__cluster_metadata-0" / "00000000000000000000.log"
BOOTSTRAP = FIXTURE / "bootstrap.checkpoint"


def _refresh_crc(batch: bytes) -> bytes:
    """Recompute a (deliberately edited) batch's CRC so only the edit itself is wrong."""
    return batch[:17] + crc32c(batch[21:]).to_bytes(4, "big") + batch[21:]


def _key_values(batch: RecordBatch) -> list[tuple[bytes | None, bytes]]:
    pairs = []
    for record in batch.records:
        assert record.value is not None
        pairs.append((record.key, record.value))
    return pairs


# ------------------------------------------------------------------ real files


@pytest.mark.parametrize(("path", "expected_batches"), [(LOG, 4814), (BOOTSTRAP, 3)])
def test_real_kafka_files_reencode_byte_identically(path: Path, expected_batches: int) -> None:
    data = path.read_bytes()
    pieces = []
    for position, batch in iter_batches(data, str(path)):
        encoded = encode_batch(batch)
        assert encoded == data[position : position + len(encoded)], f"batch at byte {position}"
        assert batch.size_in_bytes == len(encoded)
        pieces.append(encoded)
    assert len(pieces) == expected_batches
    assert b"".join(pieces) == data


@pytest.mark.parametrize("path", [LOG, BOOTSTRAP])
def test_build_batch_reproduces_what_kraft_wrote(path: Path) -> None:
    data = path.read_bytes()
    for position, batch in iter_batches(data, str(path)):
        rebuilt = build_batch(
            batch.base_offset,
            batch.partition_leader_epoch,
            batch.base_timestamp,
            _key_values(batch),
            control=batch.is_control,
        )
        expected = data[position : position + batch.size_in_bytes]
        assert encode_batch(rebuilt) == expected
        assert (
            encode_kraft_batch(
                batch.base_offset,
                batch.partition_leader_epoch,
                batch.base_timestamp,
                _key_values(batch),
                control=batch.is_control,
            )
            == expected
        )


def test_bootstrap_checkpoint_decodes_to_the_documented_batches() -> None:
    batches = [b for _, b in iter_batches(BOOTSTRAP.read_bytes(), "bootstrap.checkpoint")]
    header, data, footer = batches
    assert [b.base_offset for b in batches] == [0, 1, 2]
    assert header.is_control and footer.is_control and not data.is_control
    assert header.records[0].key == b"\x00\x00\x00\x03"
    assert header.records[0].value == bytes.fromhex("0000 0000000000000000 00")
    assert footer.records[0].key == b"\x00\x00\x00\x04"
    assert data.crc == 0xFD1096D8
    assert data.base_timestamp == data.max_timestamp == 0x19C0FCA2154
    assert (data.producer_id, data.producer_epoch, data.base_sequence) == (-1, -1, -1)
    assert data.compression is CompressionType.NONE
    assert data.timestamp_type is TimestampType.CREATE_TIME
    assert not data.is_transactional
    assert data.last_offset == 1
    record = data.records[0]
    assert record.key is None and record.headers == [] and record.timestamp_delta == 0
    assert record.value == bytes.fromhex("010c00116d657461646174612e76657273696f6e001300")


def test_fixture_log_matches_kios_reader() -> None:
    data = LOG.read_bytes()
    for position, batch in iter_batches(data, "log"):
        theirs, size = kio_read_batch(data, position)
        assert size == batch.size_in_bytes
        assert (theirs.base_offset, theirs.crc, theirs.attributes) == (
            batch.base_offset,
            batch.crc,
            batch.attributes,
        )
        assert [(r.offset, r.key, r.value) for r in theirs.records] == [
            (batch.base_offset + r.offset_delta, r.key, r.value) for r in batch.records
        ]


def test_kraft_fast_path_agrees_with_full_decode_on_fixture() -> None:
    data = LOG.read_bytes()
    full = list(iter_batches(data, "log"))
    fast = list(iter_kraft_batches(data, "log"))
    assert len(full) == len(fast)
    for (pos_a, batch), (pos_b, header, entries) in zip(full, fast, strict=True):
        assert pos_a == pos_b
        assert header.size_in_bytes == batch.size_in_bytes
        assert (
            header.base_offset,
            header.partition_leader_epoch,
            header.is_control,
            header.record_count,
        ) == (
            batch.base_offset,
            batch.partition_leader_epoch,
            batch.is_control,
            len(batch.records),
        )
        assert entries == [(r.offset_delta, r.key, r.value) for r in batch.records]


def test_memoryview_and_start_position() -> None:
    data = BOOTSTRAP.read_bytes()
    positions = [p for p, _ in iter_batches(memoryview(data), "b")]
    assert positions[0] == 0
    resumed = [p for p, _ in iter_batches(bytearray(data), "b", start_position=positions[1])]
    assert resumed == positions[1:]


# ------------------------------------------------------------------ corruption


@pytest.mark.parametrize("batch_index", [0, 1, 2])
def test_any_flipped_bit_under_the_crc_raises_with_file_and_batch_offset(batch_index: int) -> None:
    data = BOOTSTRAP.read_bytes()
    positions = [p for p, _ in iter_batches(data, "x")] + [len(data)]
    start, end = positions[batch_index], positions[batch_index + 1]
    for flip in range(start + 17, end):  # the CRC field and everything it covers
        corrupt = bytearray(data)
        corrupt[flip] ^= 0x10
        with pytest.raises(CorruptDataError) as err:
            list(iter_batches(bytes(corrupt), "meta/bootstrap.checkpoint"))
        assert err.value.source == "meta/bootstrap.checkpoint"
        assert err.value.offset == start
        assert "CRC-32C mismatch" in str(err.value)
        assert f"meta/bootstrap.checkpoint at byte {start}" in str(err.value)


def test_crc_flip_in_the_middle_of_the_log_names_that_batch() -> None:
    data = bytearray(LOG.read_bytes())
    positions = [p for p, _ in iter_batches(bytes(data), "x")]
    target = positions[2500]
    data[target + 40] ^= 0x01
    seen = []
    batches = iter_batches(bytes(data), "00000000000000000000.log")
    with pytest.raises(CorruptDataError, match=rf"00000000000000000000\.log at byte {target}: CRC-32C"):
        for position, _ in batches:
            seen.append(position)
    assert seen == positions[:2500]
    assert batches.position == target  # the valid prefix ends where the bad batch starts


def test_record_error_leaves_position_at_the_bad_batch() -> None:
    good = encode_kraft_batch(0, 1, 5, [(None, b"a")], control=False)
    bad = bytearray(encode_kraft_batch(1, 1, 5, [(None, b"b")], control=False))
    bad[-1] = 1  # header count 1 without a header
    data = good + _refresh_crc(bytes(bad))
    for make in (iter_batches, iter_kraft_batches):
        batches = make(data, "seg")
        with pytest.raises(CorruptDataError) as err:
            list(batches)
        assert batches.position == len(good)
        assert err.value.offset is not None and err.value.offset >= len(good)


def test_peek_header() -> None:
    raw = encode_kraft_batch(42, 3, 77, [(None, b"a"), (None, b"b")], control=True)
    header = peek_header(b"xx" + raw, "p", 2)
    assert (header.base_offset, header.last_offset, header.record_count, header.is_control) == (
        42,
        43,
        2,
        True,
    )
    assert header.size_in_bytes == len(raw)
    with pytest.raises(CorruptDataError, match="does not fit"):
        peek_header(raw[:-1], "p")
    with pytest.raises(CorruptDataError, match="less than a 61-byte batch header"):
        peek_header(raw[:60], "p")


def test_torn_tail_raises_unless_tolerated() -> None:
    data = LOG.read_bytes()
    positions = [p for p, _ in iter_batches(data, "x")]
    resume, last = positions[-40], positions[-1]  # start late in the file to keep the test quick
    for cut in (last + 1, last + 11, last + 16, last + 17, last + 30, len(data) - 1):
        torn = data[:cut]
        with pytest.raises(CorruptDataError, match="file ends mid-batch") as err:
            list(iter_batches(torn, "seg.log", start_position=resume))
        assert err.value.offset == last
        batches = iter_batches(torn, "seg.log", start_position=resume, tolerate_torn_tail=True)
        assert [p for p, _ in batches] == positions[-40:-1]
        assert batches.torn_tail == TornTail(last, cut - last)
        assert batches.position == last
        assert batches.torn_tail.describe() == f"truncated tail of {cut - last} bytes at byte {last} ignored"
        fast = iter_kraft_batches(torn, "seg.log", start_position=resume, tolerate_torn_tail=True)
        assert len(list(fast)) == 39
        assert fast.torn_tail == TornTail(last, cut - last)


def test_clean_end_reports_no_torn_tail() -> None:
    data = BOOTSTRAP.read_bytes()
    batches = iter_batches(data, "b", tolerate_torn_tail=True)
    assert len(list(batches)) == 3
    assert batches.torn_tail is None
    assert batches.position == len(data)


@pytest.mark.parametrize("length", [0, 48, -1, -(2**31)])
def test_impossible_batch_length_raises_even_when_tolerating(length: int) -> None:
    data = bytearray(BOOTSTRAP.read_bytes())
    data[8:12] = struct.pack(">i", length)
    with pytest.raises(CorruptDataError, match=f"impossible batch length {length}") as err:
        list(iter_batches(bytes(data), "b", tolerate_torn_tail=True))
    assert err.value.offset == 0


def test_wrong_magic_raises() -> None:
    data = bytearray(BOOTSTRAP.read_bytes())
    data[16] = 1
    with pytest.raises(CorruptDataError, match="magic 1") as err:
        list(iter_batches(bytes(data), "b"))
    assert err.value.offset == 16


def test_record_count_larger_than_the_records_raises() -> None:
    data = BOOTSTRAP.read_bytes()
    first_size = next(iter(iter_batches(data, "b")))[1].size_in_bytes
    second = bytearray(data[first_size : first_size + 91])
    second[57:61] = struct.pack(">i", 2)
    corrupt = data[:first_size] + _refresh_crc(bytes(second)) + data[first_size + 91 :]
    with pytest.raises(CorruptDataError, match="declares 2 records but its data ends after 1") as err:
        list(iter_batches(corrupt, "b"))
    assert err.value.offset == first_size + 91
    with pytest.raises(CorruptDataError, match="declares 2 records"):
        list(iter_kraft_batches(corrupt, "b"))


def test_record_count_smaller_than_the_records_raises() -> None:
    batch = build_batch(0, 1, 5, [(None, b"a"), (None, b"b")], control=False)
    raw = bytearray(encode_batch(batch))
    raw[57:61] = struct.pack(">i", 1)
    with pytest.raises(CorruptDataError, match="bytes are left after the 1 records"):
        decode_batch(_refresh_crc(bytes(raw)), "b")


def test_record_length_mismatch_names_the_record_offset() -> None:
    raw = bytearray(encode_batch(build_batch(7, 1, 5, [(None, b"abc")], control=False)))
    raw[61] += 2  # record length 9 -> 10 (zig-zag), one byte past its fields
    raw += b"\x00"
    raw[8:12] = struct.pack(">i", len(raw) - 12)
    with pytest.raises(CorruptDataError) as err:
        decode_batch(_refresh_crc(bytes(raw)), "seg")
    assert err.value.offset == 61
    assert "record 0 declares" in str(err.value)


def test_kraft_fast_path_rejects_what_krafts_reader_rejects() -> None:
    with_delta = RecordBatch(0, 0, 2, 0, 0, 0, 10, 10, -1, -1, -1, [BatchRecord(0, 3, 0, None, b"v", [])])
    with pytest.raises(CorruptDataError, match="timestamp delta 3; KRaft requires 0"):
        list(iter_kraft_batches(encode_batch(with_delta), "s"))
    with_header = RecordBatch(
        0, 0, 2, 0, 0, 0, 10, 10, -1, -1, -1, [BatchRecord(0, 0, 0, None, b"v", [("h", None)])]
    )
    with pytest.raises(CorruptDataError, match="KRaft requires 0"):
        list(iter_kraft_batches(encode_batch(with_header), "s"))
    # both are legal record batches for the generic reader
    assert decode_batch(encode_batch(with_header), "s").records[0].headers == [("h", None)]


def test_unknown_compression_codec_raises() -> None:
    raw = bytearray(encode_batch(build_batch(0, 0, 0, [(None, b"x")], control=False)))
    raw[22] = 5
    with pytest.raises(CorruptDataError, match="unknown compression codec id 5"):
        list(iter_batches(_refresh_crc(bytes(raw)), "s"))


def test_corrupt_compressed_payload_raises() -> None:
    batch = dataclasses.replace(build_batch(0, 0, 0, [(None, b"x" * 100)], control=False), attributes=1)
    raw = bytearray(encode_batch(batch))
    raw[-3] ^= 0xFF  # inside the gzip trailer (CRC-32 / size)
    with pytest.raises(CorruptDataError) as err:
        list(iter_batches(_refresh_crc(bytes(raw)), "s"))
    assert err.value.offset == 61


def test_build_batch_rejects_empty() -> None:
    with pytest.raises(Zk2KraftError):
        build_batch(0, 0, 0, [], control=False)


def test_kafka_stream_headers_of_compressed_batches() -> None:
    assert compress(CompressionType.GZIP, b"abc")[:10] == bytes.fromhex("1f8b0800000000000000")
    assert compress(CompressionType.SNAPPY, b"abc")[:16] == b"\x82SNAPPY\x00" + bytes.fromhex(
        "0000000100000001"
    )
    assert compress(CompressionType.LZ4, b"abc")[:7] == bytes.fromhex("04224d18604082")
    assert compress(CompressionType.LZ4, b"abc")[-4:] == b"\x00\x00\x00\x00"


# ------------------------------------------------------------------ properties

int8 = st.integers(-(2**7), 2**7 - 1)
int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
blobs = st.none() | st.binary(max_size=300)

records = st.builds(
    BatchRecord,
    attributes=int8,
    timestamp_delta=int64,
    offset_delta=int32,
    key=blobs,
    value=blobs,
    headers=st.lists(st.tuples(st.text(max_size=10), blobs), max_size=3),
)


@st.composite
def batches(draw: st.DrawFn) -> RecordBatch:
    codec = draw(st.sampled_from(CompressionType))
    flags = draw(st.sampled_from([0, 0x08, 0x10, 0x20, 0x30, 0x40]))
    return RecordBatch(
        base_offset=draw(int64),
        partition_leader_epoch=draw(int32),
        magic=2,
        crc=0,
        attributes=codec | flags,
        last_offset_delta=draw(int32),
        base_timestamp=draw(int64),
        max_timestamp=draw(int64),
        producer_id=draw(int64),
        producer_epoch=draw(int16),
        base_sequence=draw(int32),
        records=draw(st.lists(records, max_size=8)),
    )


@given(st.lists(batches(), min_size=1, max_size=3))
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_encode_decode_round_trip(originals: list[RecordBatch]) -> None:
    data = b"".join(encode_batch(b) for b in originals)
    decoded = list(iter_batches(data, "prop"))
    assert len(decoded) == len(originals)
    for (_, got), want in zip(decoded, originals, strict=True):
        assert got == dataclasses.replace(want, crc=got.crc)
        assert encode_batch(got) == encode_batch(want)


kraft_records = st.lists(
    st.tuples(st.none() | st.binary(min_size=1, max_size=8), st.binary(min_size=1, max_size=9000)),
    min_size=1,
    max_size=20,
)


@given(kraft_records, st.booleans(), int64, int32, int64)
@settings(max_examples=100, deadline=None)
def test_kraft_batches_round_trip_through_the_fast_path(
    recs: list[tuple[bytes | None, bytes]], control: bool, base: int, epoch: int, ts: int
) -> None:
    data = encode_kraft_batch(base, epoch, ts, recs, control)
    assert data == encode_batch(build_batch(base, epoch, ts, recs, control))
    ((_, header, entries),) = list(iter_kraft_batches(data, "k"))
    assert entries == [(i, k, v) for i, (k, v) in enumerate(recs)]
    assert (header.base_offset, header.partition_leader_epoch, header.base_timestamp) == (base, epoch, ts)
    assert header.attributes == (ATTR_CONTROL if control else 0)


@given(st.binary(max_size=400), st.booleans())
@settings(max_examples=300, deadline=None)
def test_arbitrary_bytes_raise_only_corrupt_data(data: bytes, tolerate: bool) -> None:
    for make in (iter_batches, iter_kraft_batches):
        try:
            list(make(data, "fuzz", tolerate_torn_tail=tolerate))
        except CorruptDataError as exc:
            assert exc.source == "fuzz"


@given(st.binary(max_size=300), st.integers(-2, 40), st.sampled_from(CompressionType), st.booleans())
@settings(max_examples=500, deadline=None)
def test_arbitrary_records_under_a_valid_crc_raise_only_corrupt_data(
    payload: bytes, count: int, codec: CompressionType, fuzz_compressed_stream: bool
) -> None:
    body = payload if fuzz_compressed_stream or codec is CompressionType.NONE else compress(codec, payload)
    after_crc = struct.pack(">hiqqqhii", int(codec), 0, 0, 0, -1, -1, -1, count) + body
    raw = struct.pack(">qiib", 0, 49 + len(body), 0, 2) + crc32c(after_crc).to_bytes(4, "big") + after_crc
    for make in (iter_batches, iter_kraft_batches):
        try:
            list(make(raw, "fuzz"))
        except CorruptDataError as exc:
            assert exc.source == "fuzz"
