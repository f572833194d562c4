"""Framing of one record value: metadata records (frame version, apiKey, version, body) and control records.

A metadata record value is `uvarint 1 | uvarint apiKey | uvarint version | body` with no length
prefix and nothing after the body. A control record has a 4-byte key (int16 key version, int16
control type) and a value that is the bare body at version 0.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from migrate.errors import CorruptDataError
from migrate.kraft._generated import BODY_DECODERS, CONTROL_RECORD_CLASSES, METADATA_RECORD_CLASSES
from migrate.kraft.records import ControlRecord, MetadataRecord
from migrate.kraft.wire import Buf, InvalidValueError, read_uvarint, write_uvarint

FRAME_VERSION = 1
# ControlRecordUtils.*_CURRENT_VERSION: Kafka 3.9 writes and reads every control body at version 0.
CONTROL_BODY_VERSION = 0
CONTROL_KEY_VERSION = 0
_MAX_SHORT = 0x7FFF
_CONTROL_KEY = struct.Struct(">hh")

_Decoder = Callable[[Buf, int, int], tuple[Any, int]]

_METADATA_BY_KEY: dict[int, type[MetadataRecord]] = {cls.API_KEY: cls for cls in METADATA_RECORD_CLASSES}
_CONTROL_BY_TYPE: dict[int, type[ControlRecord]] = {cls.CONTROL_TYPE: cls for cls in CONTROL_RECORD_CLASSES}


def _fast_table() -> dict[int, _Decoder]:
    # Key = (apiKey << 8) | version for single-byte apiKey/version varints: the value's bytes 1 and 2.
    table: dict[int, _Decoder] = {}
    for api_key, cls in _METADATA_BY_KEY.items():
        for index, decoder in enumerate(BODY_DECODERS[cls]):
            version = cls.LOWEST_VERSION + index
            if api_key < 0x80 and version < 0x80:
                table[(api_key << 8) | version] = decoder
    return table


_FAST_DECODERS = _fast_table()
_headers: dict[tuple[type, int], bytes] = {}


def _relabel(e: CorruptDataError, source: str, offset: int) -> CorruptDataError:
    where = offset + (e.offset or 0)
    return CorruptDataError(source, where, e.problem)


# ------------------------------------------------------------------ metadata records


def decode_metadata_record(
    value: Buf, source: str = "<bytes>", offset: int = 0
) -> tuple[MetadataRecord, int]:
    """Decode a framed metadata record value; returns (record, version).

    `offset` is the position of `value` inside `source`, so errors point at the right byte.
    """
    end = len(value)
    try:
        if end > 3 and value[0] == FRAME_VERSION:
            decoder = _FAST_DECODERS.get((value[1] << 8) | value[2])
            if decoder is not None:
                record, pos = decoder(value, 3, end)
                if pos == end:
                    return record, value[2]
    except CorruptDataError as e:
        raise _relabel(e, source, offset) from None
    return _decode_metadata_slowly(value, source, offset)


def _decode_metadata_slowly(value: Buf, source: str, offset: int) -> tuple[MetadataRecord, int]:
    """The same checks as the fast path, one at a time, for precise error messages."""
    end = len(value)
    if end == 0:
        raise CorruptDataError(source, offset, "empty metadata record value")
    try:
        frame, pos = read_uvarint(value, 0)
        if frame > _MAX_SHORT:
            raise CorruptDataError(source, offset, f"metadata record frame version {frame} is too large")
        if frame != FRAME_VERSION:
            if frame == 0:
                problem = "metadata record with frame version 0 (the unsupported Kafka 2.8 preview format)"
            else:
                problem = f"unknown metadata record frame version {frame} (only {FRAME_VERSION} is supported)"
            raise CorruptDataError(source, offset, problem)
        key_pos = pos
        api_key, pos = read_uvarint(value, pos)
        if api_key > _MAX_SHORT:
            raise CorruptDataError(source, offset + key_pos, f"metadata record apiKey {api_key} is too large")
        version_pos = pos
        version, pos = read_uvarint(value, pos)
        if version > _MAX_SHORT:
            raise CorruptDataError(
                source, offset + version_pos, f"metadata record version {version} is too large"
            )
    except CorruptDataError as e:
        if e.source == source:
            raise
        raise _relabel(e, source, offset) from None
    cls = _METADATA_BY_KEY.get(api_key)
    if cls is None:
        raise CorruptDataError(source, offset + key_pos, f"unknown metadata record apiKey {api_key}")
    lo, hi = cls.LOWEST_VERSION, cls.HIGHEST_VERSION
    if not lo <= version <= hi:
        raise CorruptDataError(
            source, offset + version_pos, f"{cls.TYPE_NAME} has no version {version} (valid: {lo}-{hi})"
        )
    try:
        record, body_end = BODY_DECODERS[cls][version - lo](value, pos, end)
    except CorruptDataError as e:
        raise _relabel(e, source, offset) from None
    if body_end != end:
        raise CorruptDataError(
            source,
            offset + body_end,
            f"Found {end - body_end} byte(s) of garbage after {cls.TYPE_NAME} v{version}",
        )
    return record, version


def encode_metadata_record(record: MetadataRecord, version: int) -> bytes:
    """Frame version 1, apiKey and version, then the body."""
    cls = type(record)
    header = _headers.get((cls, version))
    if header is None:
        api_key = getattr(cls, "API_KEY", None)
        if api_key is None or _METADATA_BY_KEY.get(api_key) is not cls:
            raise InvalidValueError(f"{cls.__qualname__} is not a metadata record")
        body = record.encode_body(version)  # checks the version before the header is cached
        header = write_uvarint(FRAME_VERSION) + write_uvarint(api_key) + write_uvarint(version)
        _headers[(cls, version)] = header
        return header + body
    return header + record.encode_body(version)


# ------------------------------------------------------------------ control records


def decode_control_record(
    key: Buf | None,
    value: Buf | None,
    source: str = "<bytes>",
    offset: int = 0,
    key_offset: int | None = None,
) -> tuple[ControlRecord, int]:
    """Decode a control record's key and value; returns (record, body version).

    `offset` is the position of the value inside `source` (`key_offset` that of the key, if known).
    """
    at_key = offset if key_offset is None else key_offset
    if key is None:
        raise CorruptDataError(source, at_key, "control record has no key")
    if len(key) < _CONTROL_KEY.size:
        raise CorruptDataError(
            source, at_key, f"control record key must have at least 4 bytes, but found only {len(key)}"
        )
    key_version, control_type = _CONTROL_KEY.unpack_from(key, 0)
    if key_version < 0:
        raise CorruptDataError(source, at_key, f"invalid control record key version {key_version}")
    # Kafka reads keys with a higher version as version 0 (their first 4 bytes mean the same).
    cls = _CONTROL_BY_TYPE.get(control_type)
    if cls is None:
        raise CorruptDataError(source, at_key + 2, f"unknown control record type {control_type}")
    if value is None:
        raise CorruptDataError(source, offset, f"{cls.TYPE_NAME} control record has no value")
    end = len(value)
    try:
        record, pos = BODY_DECODERS[cls][CONTROL_BODY_VERSION](value, 0, end)
    except CorruptDataError as e:
        raise _relabel(e, source, offset) from None
    if pos != end:
        raise CorruptDataError(
            source,
            offset + pos,
            f"Found {end - pos} byte(s) of garbage after {cls.TYPE_NAME} v{CONTROL_BODY_VERSION}",
        )
    return record, CONTROL_BODY_VERSION


def encode_control_record(record: ControlRecord, version: int = CONTROL_BODY_VERSION) -> tuple[bytes, bytes]:
    """The (key, value) of a control record: key version 0 + control type, then the body."""
    cls = type(record)
    control_type = getattr(cls, "CONTROL_TYPE", None)
    if control_type is None or _CONTROL_BY_TYPE.get(control_type) is not cls:
        raise InvalidValueError(f"{cls.__qualname__} is not a control record")
    return _CONTROL_KEY.pack(CONTROL_KEY_VERSION, control_type), record.encode_body(version)
