"""Wire primitives under the record codecs: varints, compact strings/bytes/arrays, uuids."""

from __future__ import annotations

import pickle
import uuid

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from migrate.errors import CorruptDataError
from migrate.kraft import wire


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (300, "ac02"), (0xFFFF_FFFF, "ffffffff0f")],
)
def test_unsigned_varints(value: int, encoded: str) -> None:
    raw = bytes.fromhex(encoded)
    assert wire.write_uvarint(value) == raw
    assert wire.read_uvarint(raw, 0) == (value, len(raw))


@pytest.mark.parametrize(
    ("value", "encoded"), [(0, "00"), (-1, "01"), (1, "02"), (29, "3a"), (-64, "7f"), (64, "8001")]
)
def test_zigzag_varints(value: int, encoded: str) -> None:
    raw = bytes.fromhex(encoded)
    assert wire.write_varint(value) == raw
    assert wire.read_varint(raw, 0) == (value, len(raw))
    assert wire.write_varlong(value) == raw
    assert wire.read_varlong(raw, 0) == (value, len(raw))


@settings(max_examples=200)
@given(st.integers(-(1 << 63), (1 << 63) - 1))
def test_varlong_round_trip(value: int) -> None:
    raw = wire.write_varlong(value)
    assert wire.read_varlong(raw + b"\xff", 0) == (value, len(raw))
    assert wire.zigzag_decode(wire.zigzag_encode(value)) == value


@settings(max_examples=200)
@given(st.integers(-(1 << 31), (1 << 31) - 1))
def test_varint_round_trip(value: int) -> None:
    raw = wire.write_varint(value)
    assert wire.read_varint(raw, 0) == (value, len(raw))


@pytest.mark.parametrize(
    ("reader", "raw", "needle"),
    [
        (wire.read_uvarint, "", "truncated"),
        (wire.read_uvarint, "80", "truncated"),
        (wire.read_uvarint, "8080808080", "longer than 5 bytes"),
        (wire.read_uvarint, "8080808010", "does not fit in 32 bits"),
        (wire.read_varint, "ffffffff1f", "does not fit in 32 bits"),
        (wire.read_varlong, "ff" * 10 + "01", "longer than 10 bytes"),
    ],
)
def test_bad_varints_are_corrupt(reader: object, raw: str, needle: str) -> None:
    with pytest.raises(CorruptDataError, match=needle):
        reader(bytes.fromhex(raw), 0)  # type: ignore[operator]


def test_out_of_range_varints_are_refused_on_write() -> None:
    with pytest.raises(wire.InvalidValueError):
        wire.write_uvarint(-1)
    with pytest.raises(wire.InvalidValueError):
        wire.write_uvarint(1 << 32)
    with pytest.raises(wire.InvalidValueError):
        wire.write_varint(1 << 31)
    with pytest.raises(wire.InvalidValueError):
        wire.write_varlong(1 << 63)


def test_compact_strings_and_bytes() -> None:
    assert wire.write_compact_string(None) == b"\x00"
    assert wire.write_compact_string("") == b"\x01"
    assert wire.write_compact_string("é") == b"\x03\xc3\xa9"
    assert wire.read_compact_string(b"\x03\xc3\xa9", 0) == ("é", 3)
    assert wire.read_compact_string(b"\x00", 0, nullable=True) == (None, 1)
    assert wire.write_compact_bytes(b"\x00\x01") == b"\x03\x00\x01"
    assert wire.read_compact_bytes(b"\x03\x00\x01", 0) == (b"\x00\x01", 3)
    with pytest.raises(CorruptDataError, match="null string"):
        wire.read_compact_string(b"\x00", 0)
    with pytest.raises(CorruptDataError, match="UTF-8"):
        wire.read_compact_string(b"\x02\xff", 0)
    with pytest.raises(CorruptDataError, match="past the end"):
        wire.read_compact_string(b"\x05ab", 0)
    with pytest.raises(CorruptDataError, match="past the end"):
        wire.read_compact_bytes(b"\x05ab", 0)
    with pytest.raises(wire.InvalidValueError):
        wire.write_compact_string("x" * 32768)


def test_compact_arrays() -> None:
    assert wire.write_int32_array([1, -1]) == bytes.fromhex("03 00000001 ffffffff")
    assert wire.read_int32_array(bytes.fromhex("03 00000001 ffffffff"), 0) == ([1, -1], 9)
    assert wire.read_int32_array(b"\x00", 0, nullable=True) == (None, 1)
    assert wire.write_int32_array(None) == b"\x00"
    big = list(range(300))
    assert wire.read_int32_list(wire.write_int32_array(big), 0) == (big, 2 + 1200)
    ids = [uuid.UUID(int=i) for i in range(200)]
    assert wire.read_uuid_list(wire.write_uuid_array(ids), 0) == (ids, 2 + 3200)
    with pytest.raises(CorruptDataError, match="null array"):
        wire.read_int32_list(b"\x00", 0)
    with pytest.raises(CorruptDataError, match="past the end"):
        wire.read_int32_array(b"\x03\x00\x00\x00\x01", 0)
    with pytest.raises(CorruptDataError, match="past the end"):
        wire.read_uuid_array(b"\x02" + bytes(15), 0)


def test_decoded_uuids_are_ordinary_uuids() -> None:
    raw = uuid.UUID("6d660bbe-4352-41e5-9d2a-186bde7d2f37").bytes
    fast = wire.uuid_from_bytes(raw)
    normal = uuid.UUID(bytes=raw)
    assert fast == normal and hash(fast) == hash(normal) and str(fast) == str(normal)
    assert fast.version == normal.version and fast.is_safe == normal.is_safe
    assert pickle.loads(pickle.dumps(fast)) == normal
    assert wire.uuid_from_bytes(raw) is fast  # cached
    assert wire.uuid_to_text(fast) == "bWYLvkNSQeWdKhhr3n0vNw"


def test_tag_section_merges_and_checks_tags() -> None:
    assert wire.tag_section([], {}, "X", ()) == b"\x00"
    section = wire.tag_section([(1, b"\x05")], {0: b"", 200: b"ab"}, "X", (1,))
    assert section == bytes.fromhex("03 00 00 01 01 05 c801 02 6162")
    with pytest.raises(wire.InvalidValueError, match="tag 1"):
        wire.tag_section([], {1: b""}, "X", (1,))
    with pytest.raises(wire.InvalidValueError, match="unsigned 32-bit"):
        wire.tag_section([], {-1: b""}, "X", ())


@settings(max_examples=200, deadline=None)
@given(picks=st.lists(st.integers(0, 3), max_size=200), fresh=st.lists(st.booleans(), max_size=200))
def test_uuid_arrays_of_one_repeated_uuid_encode_like_any_other(picks: list[int], fresh: list[bool]) -> None:
    shared = [uuid.UUID(int=i * 0x0101) for i in range(4)]
    # The same uuid object repeated, equal copies of it, and mixtures.
    ids = [uuid.UUID(int=shared[p].int) if i < len(fresh) and fresh[i] else shared[p] for i, p in enumerate(picks)]
    expected = wire.write_uvarint(len(ids) + 1) + b"".join(u.bytes for u in ids)
    assert wire.write_uuid_array(ids) == expected
    assert wire.read_uuid_list(expected, 0) == (ids, len(expected))
