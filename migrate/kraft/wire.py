"""Primitive readers/writers of Kafka's wire format, shared by the generated record codecs.

Message bodies use unsigned varints (LEB128, no zig-zag); record-batch fields use zig-zag varints.
Readers take `(buf, pos)` and return `(value, new_pos)`; they raise `CorruptDataError` (source
`BODY_SOURCE`, offset = position in `buf`) on truncated or impossible input.
"""

from __future__ import annotations

import base64
import binascii
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from migrate.errors import CorruptDataError, UnsupportedVersionError, Zk2KraftError

Buf = bytes | bytearray | memoryview

# Source name of errors raised while decoding a bare body; framing re-labels them with the real file.
BODY_SOURCE = "<record body>"

MAX_STRING_BYTES = 0x7FFF
MAX_UVARINT = 0xFFFF_FFFF
NO_VERSION = 0x7FFF  # upper bound FieldInfo gives an open version range such as "0+"


class InvalidValueError(Zk2KraftError):
    """A value that cannot be written in Kafka's wire or text form (type, range, nullability)."""


# ------------------------------------------------------------------ unsigned varints

UVARINT_1: tuple[bytes, ...] = tuple(bytes((n,)) for n in range(0x80))


def read_uvarint(buf: Buf, pos: int) -> tuple[int, int]:
    """Read an unsigned varint of at most 5 bytes (a Java int's worth of bits, as Kafka does)."""
    start = pos
    result = 0
    shift = 0
    try:
        while True:
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                break
            shift += 7
            if shift > 28:
                raise CorruptDataError(BODY_SOURCE, start, "unsigned varint longer than 5 bytes")
    except IndexError:
        raise CorruptDataError(BODY_SOURCE, start, "truncated unsigned varint") from None
    if result > MAX_UVARINT:
        raise CorruptDataError(BODY_SOURCE, start, f"unsigned varint {result} does not fit in 32 bits")
    return result, pos


def write_uvarint(n: int) -> bytes:
    """Encode `0 <= n < 2**32` as an unsigned varint."""
    if 0 <= n < 0x80:
        return UVARINT_1[n]
    if n < 0 or n > MAX_UVARINT:
        raise InvalidValueError(f"{n} cannot be written as an unsigned 32-bit varint")
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


# ------------------------------------------------------------------ zig-zag varints (record batches)


def zigzag_encode(n: int) -> int:
    """Map a signed integer to the unsigned zig-zag form (0, -1, 1, -2 → 0, 1, 2, 3)."""
    return (n << 1) ^ (n >> 63) if n < 0 else n << 1


def zigzag_decode(n: int) -> int:
    """Inverse of `zigzag_encode`."""
    return (n >> 1) ^ -(n & 1)


def _read_unsigned(buf: Buf, pos: int, max_bytes: int, what: str) -> tuple[int, int]:
    start = pos
    result = 0
    shift = 0
    try:
        for _ in range(max_bytes):
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result, pos
            shift += 7
    except IndexError:
        raise CorruptDataError(BODY_SOURCE, start, f"truncated {what}") from None
    raise CorruptDataError(BODY_SOURCE, start, f"{what} longer than {max_bytes} bytes")


def read_varint(buf: Buf, pos: int) -> tuple[int, int]:
    """Read a zig-zag varint that must fit a signed 32-bit int (record length, key length, ...)."""
    raw, new_pos = _read_unsigned(buf, pos, 5, "varint")
    if raw > MAX_UVARINT:
        raise CorruptDataError(BODY_SOURCE, pos, f"varint {raw} does not fit in 32 bits")
    return zigzag_decode(raw), new_pos


def read_varlong(buf: Buf, pos: int) -> tuple[int, int]:
    """Read a zig-zag varint that must fit a signed 64-bit long (timestamp delta)."""
    raw, new_pos = _read_unsigned(buf, pos, 10, "varlong")
    if raw >= 1 << 64:
        raise CorruptDataError(BODY_SOURCE, pos, f"varlong {raw} does not fit in 64 bits")
    return zigzag_decode(raw), new_pos


def write_varint(n: int) -> bytes:
    """Encode a signed 32-bit int as a zig-zag varint."""
    if not -(1 << 31) <= n < 1 << 31:
        raise InvalidValueError(f"{n} does not fit a signed 32-bit varint")
    return write_uvarint(zigzag_encode(n))


def write_varlong(n: int) -> bytes:
    """Encode a signed 64-bit long as a zig-zag varint."""
    if not -(1 << 63) <= n < 1 << 63:
        raise InvalidValueError(f"{n} does not fit a signed 64-bit varlong")
    z = zigzag_encode(n)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


# ------------------------------------------------------------------ compact strings, bytes, arrays


def read_compact_length(buf: Buf, pos: int, nullable: bool, what: str) -> tuple[int, int]:
    """Read `length + 1` as an unsigned varint; -1 means null (an error unless `nullable`)."""
    raw, new_pos = read_uvarint(buf, pos)
    if raw == 0 and not nullable:
        raise CorruptDataError(BODY_SOURCE, pos, f"null {what} where the schema does not allow null")
    return raw - 1, new_pos


def read_string_length(buf: Buf, pos: int, nullable: bool) -> tuple[int, int]:
    """Read a compact string's length (-1 = null), refusing lengths above 32767 as Kafka does."""
    n, start = read_compact_length(buf, pos, nullable, "string")
    if n > MAX_STRING_BYTES:
        raise CorruptDataError(BODY_SOURCE, pos, f"string length {n} exceeds {MAX_STRING_BYTES}")
    return n, start


def read_string(buf: Buf, pos: int) -> tuple[str, int]:
    """Read a compact non-nullable UTF-8 string."""
    s, new_pos = read_compact_string(buf, pos, False)
    assert s is not None
    return s, new_pos


def read_compact_string(buf: Buf, pos: int, nullable: bool = False) -> tuple[str | None, int]:
    """Read a compact (nullable) UTF-8 string."""
    n, start = read_string_length(buf, pos, nullable)
    if n < 0:
        return None, start
    end = start + n
    if end > len(buf):
        raise CorruptDataError(BODY_SOURCE, pos, f"string of {n} bytes runs past the end of the data")
    try:
        return str(buf[start:end], "utf-8"), end
    except UnicodeDecodeError:
        raise CorruptDataError(BODY_SOURCE, start, "string is not valid UTF-8") from None


def read_compact_bytes(buf: Buf, pos: int, nullable: bool = False) -> tuple[bytes | None, int]:
    """Read compact (nullable) bytes."""
    n, start = read_compact_length(buf, pos, nullable, "bytes")
    if n < 0:
        return None, start
    end = start + n
    if end > len(buf):
        raise CorruptDataError(BODY_SOURCE, pos, f"bytes field of {n} bytes runs past the end of the data")
    return bytes(buf[start:end]), end


def read_compact_bytes_nn(buf: Buf, pos: int) -> tuple[bytes, int]:
    """Read compact non-nullable bytes."""
    b, new_pos = read_compact_bytes(buf, pos, False)
    assert b is not None
    return b, new_pos


def encode_string(s: str) -> bytes:
    """UTF-8 bytes of a string field, refusing what Kafka refuses (> 32767 bytes)."""
    data = s.encode("utf-8")
    if len(data) > MAX_STRING_BYTES:
        raise InvalidValueError(f"string of {len(data)} UTF-8 bytes is longer than {MAX_STRING_BYTES}")
    return data


def encode_string_length(n: int) -> bytes:
    """Compact length prefix of an n-byte string, refusing what Kafka refuses (> 32767 bytes)."""
    if n > MAX_STRING_BYTES:
        raise InvalidValueError(f"string of {n} UTF-8 bytes is longer than {MAX_STRING_BYTES}")
    return write_uvarint(n + 1)


def write_compact_string(s: str | None) -> bytes:
    """Encode a compact (nullable) string."""
    if s is None:
        return b"\x00"
    data = encode_string(s)
    return write_uvarint(len(data) + 1) + data


def write_compact_bytes(b: bytes | None) -> bytes:
    """Encode compact (nullable) bytes."""
    if b is None:
        return b"\x00"
    return write_uvarint(len(b) + 1) + bytes(b)


# ------------------------------------------------------------------ int32 arrays

_I32_CACHE_LIMIT = 4096
_i32_structs: dict[int, struct.Struct] = {}


def int32s_struct(n: int) -> struct.Struct:
    """A cached `>{n}i` Struct."""
    s = _i32_structs.get(n)
    if s is None:
        s = struct.Struct(f">{n}i")
        if n < _I32_CACHE_LIMIT:
            _i32_structs[n] = s
    return s


# Index = element count (< 127, so `count + 1` is a single varint byte).
I32_UNPACK: tuple[Callable[[Buf, int], tuple[Any, ...]], ...] = tuple(
    int32s_struct(n).unpack_from for n in range(0x7F)
)
# Index = element count; packs the one-byte compact length followed by the elements.
I32_PACK_PREFIXED: tuple[Callable[..., bytes], ...] = tuple(
    struct.Struct(f">B{n}i").pack for n in range(0x7F)
)


def read_int32_array(buf: Buf, pos: int, nullable: bool = False) -> tuple[list[int] | None, int]:
    """Read a compact `[]int32`."""
    n, start = read_compact_length(buf, pos, nullable, "array")
    if n < 0:
        return None, start
    if start + 4 * n > len(buf):
        raise CorruptDataError(BODY_SOURCE, pos, f"array of {n} int32s runs past the end of the data")
    return [*int32s_struct(n).unpack_from(buf, start)], start + 4 * n


def read_int32_list(buf: Buf, pos: int) -> tuple[list[int], int]:
    """Read a compact non-nullable `[]int32`."""
    a, new_pos = read_int32_array(buf, pos, False)
    assert a is not None
    return a, new_pos


def write_int32_array(a: list[int] | None) -> bytes:
    """Encode a compact `[]int32` (None → null)."""
    if a is None:
        return b"\x00"
    n = len(a)
    if n < 0x7F:
        return I32_PACK_PREFIXED[n](n + 1, *a)
    return write_uvarint(n + 1) + int32s_struct(n).pack(*a)


# ------------------------------------------------------------------ uuids

ZERO_UUID = uuid.UUID(int=0)
_UUID_CACHE_LIMIT = 1 << 17
_uuid_cache: dict[bytes, uuid.UUID] = {}
uuid_cache_get = _uuid_cache.get
_new_object = object.__new__
_set_attribute = object.__setattr__
_SAFE_UNKNOWN = uuid.SafeUUID.unknown


def _make_uuid_fast(raw: bytes) -> uuid.UUID:
    # uuid.UUID(bytes=...) validates its arguments at ~1 µs a call; the fields it sets are fixed.
    u = _new_object(uuid.UUID)
    _set_attribute(u, "int", int.from_bytes(raw, "big"))
    _set_attribute(u, "is_safe", _SAFE_UNKNOWN)
    return u


def _make_uuid_safe(raw: bytes) -> uuid.UUID:
    return uuid.UUID(bytes=bytes(raw))


def _pick_uuid_maker() -> Callable[[bytes], uuid.UUID]:
    probe = bytes(range(16))
    try:
        fast = _make_uuid_fast(probe)
        if fast == uuid.UUID(bytes=probe) and hash(fast) == hash(uuid.UUID(bytes=probe)) and str(fast):
            return _make_uuid_fast
    except (AttributeError, TypeError):
        pass
    return _make_uuid_safe


_make_uuid = _pick_uuid_maker()


def new_uuid(raw: bytes) -> uuid.UUID:
    """UUID for 16 raw bytes, remembering it so repeated ids (topic ids, dir ids) are cheap."""
    u = _make_uuid(raw)
    if len(_uuid_cache) >= _UUID_CACHE_LIMIT:
        _uuid_cache.clear()
    _uuid_cache[bytes(raw)] = u
    return u


def uuid_from_bytes(raw: bytes) -> uuid.UUID:
    """UUID for 16 raw bytes (most significant first), via the cache."""
    return uuid_cache_get(raw) or new_uuid(raw)


def read_uuid_array(buf: Buf, pos: int, nullable: bool = False) -> tuple[list[uuid.UUID] | None, int]:
    """Read a compact `[]uuid`."""
    n, start = read_compact_length(buf, pos, nullable, "array")
    if n < 0:
        return None, start
    end = start + 16 * n
    if end > len(buf):
        raise CorruptDataError(BODY_SOURCE, pos, f"array of {n} uuids runs past the end of the data")
    raw = bytes(buf[start:end])
    return [uuid_cache_get(raw[i : i + 16]) or new_uuid(raw[i : i + 16]) for i in range(0, 16 * n, 16)], end


def read_uuid_list(buf: Buf, pos: int) -> tuple[list[uuid.UUID], int]:
    """Read a compact non-nullable `[]uuid`."""
    a, new_pos = read_uuid_array(buf, pos, False)
    assert a is not None
    return a, new_pos


# Index = element count (< 127); unpacks that many raw 16-byte uuids.
U16_UNPACK: tuple[Callable[[Buf, int], tuple[Any, ...]], ...] = tuple(
    struct.Struct("16s" * n).unpack_from for n in range(0x7F)
)


_uuid_tuple_cache: dict[bytes, tuple[uuid.UUID, ...]] = {}
uuid_tuple_cache_get = _uuid_tuple_cache.get


def new_uuid_tuple(raw: bytes, n: int) -> tuple[uuid.UUID, ...]:
    """The n UUIDs in `raw` (16 * n bytes), remembered: replica directory lists repeat a lot."""
    result = tuple(uuid_cache_get(r) or new_uuid(r) for r in U16_UNPACK[n](raw, 0))
    if len(raw) != 16 * n:
        raise struct.error(f"expected {16 * n} bytes of uuids, got {len(raw)}")
    if len(_uuid_tuple_cache) >= _UUID_CACHE_LIMIT:
        _uuid_tuple_cache.clear()
    _uuid_tuple_cache[raw] = result
    return result


def write_uuid_array(a: list[uuid.UUID] | None) -> bytes:
    """Encode a compact `[]uuid` (None → null)."""
    if a is None:
        return b"\x00"
    n = len(a)
    head = UVARINT_1[n + 1] if n < 0x7F else write_uvarint(n + 1)
    if n > 1 and a[-1] is a[0] and a.count(a[0]) == n:
        # One uuid repeated (a replica list's directories while migrating): its bytes are made once.
        return head + a[0].bytes * n
    return head + b"".join([u.bytes for u in a])


def uuid_to_text(u: uuid.UUID) -> str:
    """Kafka's text form of a Uuid: base64url of the 16 bytes without padding (22 characters)."""
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode("ascii")


def uuid_from_text(text: str) -> uuid.UUID:
    """Parse Kafka's 22-character base64url Uuid text."""
    if not isinstance(text, str) or len(text) != 22:
        raise InvalidValueError(f"{text!r} is not a Kafka uuid (22 base64url characters)")
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (binascii.Error, ValueError):
        raise InvalidValueError(f"{text!r} is not a Kafka uuid (invalid base64url)") from None
    if len(raw) != 16 or uuid_to_text(uuid.UUID(bytes=raw)) != text:
        raise InvalidValueError(f"{text!r} is not a Kafka uuid (not the canonical 16-byte form)")
    return uuid_from_bytes(raw)


# ------------------------------------------------------------------ tagged fields


def tag_section(
    known: list[tuple[int, bytes]], unknown: dict[int, bytes], where: str, known_tags: tuple[int, ...]
) -> bytes:
    """Tagged-field section: known (ascending) and unknown raw tags merged in ascending tag order.

    `known_tags` are the tags the schema defines at this version; raw fields may not reuse them.
    """
    if unknown:
        for tag in unknown:
            if not isinstance(tag, int) or not 0 <= tag <= MAX_UVARINT:
                raise InvalidValueError(f"{where}: tag {tag!r} is not an unsigned 32-bit integer")
            if not isinstance(unknown[tag], bytes | bytearray | memoryview):
                raise InvalidValueError(f"{where}: unknown tagged field {tag} does not hold bytes")
            if tag in known_tags:
                raise InvalidValueError(
                    f"{where}: unknown_tagged_fields holds tag {tag}, which this version defines"
                )
        known = sorted([*known, *((tag, bytes(raw)) for tag, raw in unknown.items())])
    parts = [write_uvarint(len(known))]
    for tag, payload in known:
        parts.append(write_uvarint(tag))
        parts.append(write_uvarint(len(payload)))
        parts.append(payload)
    return b"".join(parts)


# ------------------------------------------------------------------ schema description of fields


@dataclass(frozen=True, slots=True)
class FieldInfo:
    """How one schema field sits on the wire, per version (used by JSON, validation and tests)."""

    name: str  # python attribute (snake_case)
    json_name: str  # Kafka's JSON / camelCase name (first letter lowered)
    schema_type: str  # "int32", "string", "[]int32", "[]BrokerEndpoint", "KRaftVersionFeature", ...
    struct: type | None  # class of a struct or struct-array element
    versions: tuple[int, int]
    nullable_versions: tuple[int, int] | None
    tag: int | None
    tagged_versions: tuple[int, int] | None
    default: Any  # immutable default; lists are given as () and structs as None
    ignorable: bool

    @property
    def is_array(self) -> bool:
        return self.schema_type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.schema_type[2:] if self.is_array else self.schema_type

    def present_in(self, version: int) -> bool:
        return self.versions[0] <= version <= self.versions[1]

    def nullable_in(self, version: int) -> bool:
        nv = self.nullable_versions
        return nv is not None and nv[0] <= version <= nv[1]

    def tagged_in(self, version: int) -> bool:
        tv = self.tagged_versions
        return tv is not None and tv[0] <= version <= tv[1]

    def default_value(self) -> Any:
        """A fresh default value (new list / struct instance where mutable)."""
        if self.default == () and self.is_array:
            return []
        if self.struct is not None and not self.is_array and self.default is None:
            return self.struct()
        return self.default

    def is_default(self, value: Any) -> bool:
        """Whether `value` equals the default (Kafka omits such tagged fields)."""
        if self.default is None and (self.struct is None or self.is_array):
            return value is None
        return bool(value == self.default_value())


_INT_RANGES = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "uint16": (0, 0xFFFF),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
}


def _value_problem(info: FieldInfo, type_name: str, value: Any, version: int, path: str) -> str | None:
    """Why `value` cannot be written as `type_name` (an element type when inside an array)."""
    if type_name in _INT_RANGES:
        lo, hi = _INT_RANGES[type_name]
        if not isinstance(value, int) or isinstance(value, bool):
            return f"{path}: {type_name} field holds {type(value).__name__}"
        if not lo <= value <= hi:
            return f"{path}: {value} is out of range for {type_name}"
        return None
    if type_name == "bool":
        return None if isinstance(value, bool) else f"{path}: bool field holds {type(value).__name__}"
    if type_name == "float64":
        ok = isinstance(value, float | int) and not isinstance(value, bool)
        return None if ok else f"{path}: float64 field holds {type(value).__name__}"
    if type_name == "uuid":
        return None if isinstance(value, uuid.UUID) else f"{path}: uuid field holds {type(value).__name__}"
    if type_name == "string":
        if not isinstance(value, str):
            return f"{path}: string field holds {type(value).__name__}"
        try:
            encode_string(value)
        except UnicodeEncodeError:
            return f"{path}: string is not encodable as UTF-8"
        except InvalidValueError as e:
            return f"{path}: {e}"
        return None
    if type_name == "bytes":
        ok = isinstance(value, bytes | bytearray | memoryview)
        return None if ok else f"{path}: bytes field holds {type(value).__name__}"
    if info.struct is not None:
        if not isinstance(value, info.struct):
            return f"{path}: expected {info.struct.__qualname__}, got {type(value).__name__}"
        return struct_problem(value, version, path)
    return f"{path}: unknown schema type {type_name}"


def struct_problem(obj: Any, version: int, path: str) -> str | None:
    """First reason `obj` cannot be encoded at `version`, or None."""
    fields: tuple[FieldInfo, ...] = type(obj).FIELDS
    for info in fields:
        value = getattr(obj, info.name)
        where = f"{path}.{info.name}"
        if not info.present_in(version):
            if not info.ignorable and not info.is_default(value):
                return f"{where} is not in version {version} but holds a non-default value"
            continue
        if value is None:
            if info.nullable_in(version):
                continue
            return f"{where} is null but not nullable in version {version}"
        if info.is_array:
            if not isinstance(value, list):
                return f"{where}: array field holds {type(value).__name__}"
            for i, element in enumerate(value):
                problem = _value_problem(info, info.element_type, element, version, f"{where}[{i}]")
                if problem:
                    return problem
            continue
        problem = _value_problem(info, info.schema_type, value, version, where)
        if problem:
            return problem
    unknown = getattr(obj, "unknown_tagged_fields", None)
    if not isinstance(unknown, dict):
        return f"{path}.unknown_tagged_fields must be a dict of int to bytes"
    known_tags = {info.tag for info in fields if info.tagged_in(version)}
    for tag, raw in unknown.items():
        if not isinstance(tag, int) or not 0 <= tag <= MAX_UVARINT:
            return f"{path}.unknown_tagged_fields: tag {tag!r} is not an unsigned 32-bit integer"
        if tag in known_tags:
            return f"{path}.unknown_tagged_fields holds tag {tag}, which version {version} defines"
        if not isinstance(raw, bytes | bytearray):
            return f"{path}.unknown_tagged_fields[{tag}] holds {type(raw).__name__}, not bytes"
    return None


def encode_failure(obj: Any, version: int, exc: BaseException) -> Zk2KraftError:
    """The error to raise when a generated encoder failed on `obj` (names the offending field)."""
    name = type(obj).__qualname__
    problem = struct_problem(obj, version, name)
    if problem is None:
        problem = f"{name}: {type(exc).__name__}: {exc}"
    return InvalidValueError(f"cannot encode {name} v{version}: {problem}")


def absent_field_error(type_name: str, field_name: str, version: int) -> UnsupportedVersionError:
    """Kafka's "non-ignorable field" error: a non-default value in a field the version lacks."""
    return UnsupportedVersionError(
        f"Attempted to write a non-default {field_name} at version {version} of {type_name}"
    )


def decode_failure(what: str, pos: int, exc: BaseException, end: int) -> CorruptDataError:
    """CorruptDataError for a body decoder failure near `pos` (what = "PartitionRecord v0").

    Offsets past `end` (a length that ran beyond the data) are reported at `end`.
    """
    if isinstance(exc, CorruptDataError):
        offset = exc.offset if exc.offset is not None else pos
        problem = exc.problem
    elif isinstance(exc, UnicodeDecodeError):
        offset, problem = pos, "string is not valid UTF-8"
    elif isinstance(exc, IndexError | struct.error):
        offset, problem = pos, "truncated (a field runs past the end of the data)"
    else:
        offset, problem = pos, f"malformed field ({exc})"
    return CorruptDataError(BODY_SOURCE, min(offset, end), f"{what}: {problem}")


def corrupt(pos: int, problem: str) -> CorruptDataError:
    """CorruptDataError at `pos` of a body (the top-level decoder adds the record type and version)."""
    return CorruptDataError(BODY_SOURCE, pos, problem)
