"""Kafka wire protocol around kio: size-prefixed frames, request/response headers, bodies by api key/version.

kio supplies the message classes and their codecs. This module adds what a server needs around them:
frames with Kafka's size limit, choosing the header and body classes from the api key and version, Kafka's
special cases (ApiVersions), the principal bytes of forwarded requests, and a bounds check that runs before
kio's native reader, which reserves memory for whatever element count an array claims.
"""

from __future__ import annotations

import asyncio
import functools
import io
import struct
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Final

import kio.schema.create_topics.v5.response as create_topics_v5
import kio.schema.create_topics.v6.response as create_topics_v6
import kio.schema.create_topics.v7.response as create_topics_v7
import kio.schema.request_header.v1 as request_header_v1
import kio.schema.request_header.v2 as request_header_v2
from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.schema.default_principal_data.v0 import DefaultPrincipalData
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32
from kio.static.protocol import RequestHeader

from bridge.kafka import memo_writer
from migrate.errors import CorruptDataError, UnsupportedVersionError, Zk2KraftError

# Kafka's socket.request.max.bytes default.
MAX_REQUEST_BYTES: Final = 100 * 1024 * 1024
API_VERSIONS_KEY: Final = 18
ENVELOPE_KEY: Final = 58
# DefaultKafkaPrincipalBuilder prefixes the principal bytes with this DefaultPrincipalData version.
PRINCIPAL_DATA_VERSION: Final = 0

# Request/response classes kio lacks (Kafka 3.9 versions removed in 4.0, ZK-era APIs), by (key, version).
_registered: dict[tuple[int, int], tuple[type[Any], type[Any]]] = {}
_registered_names: dict[int, str] = {}


# ---------------------------------------------------------------- api lookup


def api_name(api_key: int) -> str:
    """Kafka's name of an api key (`Metadata`, `ApiVersions`), or `ApiKey<n>` when unknown."""
    if api_key in _registered_names:
        return _registered_names[api_key]
    snake = api_key_map.get(api_key)
    if snake is None:
        return f"ApiKey{api_key}"
    return "".join(part.capitalize() for part in snake.split("_"))


def describe_api(api_key: int, api_version: int) -> str:
    """`Metadata v12 (api key 3)`: how messages name a request kind."""
    return f"{api_name(api_key)} v{api_version} (api key {api_key})"


def register_api(request_cls: type[Any], response_cls: type[Any], name: str | None = None) -> None:
    """Make a request/response pair declared outside kio (kio-style entity classes) decodable by key/version."""
    key, version = int(request_cls.__api_key__), int(request_cls.__version__)
    if (int(response_cls.__api_key__), int(response_cls.__version__)) != (key, version):
        raise Zk2KraftError(
            f"register_api: {request_cls.__name__} is api key {key} v{version} but "
            f"{response_cls.__name__} is api key {response_cls.__api_key__} v{response_cls.__version__}"
        )
    _registered[(key, version)] = (request_cls, response_cls)
    if name is not None:
        _registered_names[key] = name


def known_versions(api_key: int) -> tuple[int, ...]:
    """Every version of `api_key` whose request class kio defines or `register_api` added, ascending."""
    versions = {v for (k, v) in _registered if k == api_key}
    snake = api_key_map.get(api_key)
    if snake is not None:
        versions.update(v for v, kinds in schema_name_map[snake].items() if EntityType.request in kinds)
    return tuple(sorted(versions))


def request_class(api_key: int, api_version: int) -> type[Any]:
    """The request body class for a key/version; `UnsupportedVersionError` when neither kio nor we define it."""
    return _schema_class(api_key, api_version, response=False)


def response_class(api_key: int, api_version: int) -> type[Any]:
    """The response body class for a key/version; `UnsupportedVersionError` when undefined."""
    return _schema_class(api_key, api_version, response=True)


def _schema_class(api_key: int, api_version: int, *, response: bool) -> type[Any]:
    registered = _registered.get((api_key, api_version))
    if registered is not None:
        return registered[1] if response else registered[0]
    return _kio_schema(api_key, api_version, response)


@functools.cache
def _kio_schema(api_key: int, api_version: int, response: bool) -> type[Any]:
    """kio's class (kio imports a module path on every call, so what it found is kept; failures are not)."""
    load = load_response_schema if response else load_request_schema
    try:
        return load(api_key, api_version)
    except KioIndexError:
        raise UnsupportedVersionError(_undefined_message(api_key, api_version)) from None


def _undefined_message(api_key: int, api_version: int) -> str:
    versions = known_versions(api_key)
    known = f"versions {versions[0]}-{versions[-1]} are defined" if versions else "no version is defined"
    return f"{describe_api(api_key, api_version)} has no schema ({known})"


# ---------------------------------------------------------------- bounds check before kio


class _Malformed(Exception):
    """Internal: where and why the bounds check stopped; turned into CorruptDataError by the caller."""

    def __init__(self, offset: int, problem: str) -> None:
        super().__init__(problem)
        self.offset = offset
        self.problem = problem


@dataclass(frozen=True, slots=True)
class _Sized:
    """A length-prefixed string or bytes field: `compact` (uvarint+1), `int16` or `int32` length."""

    prefix: str
    nullable: bool
    what: str


@dataclass(frozen=True, slots=True)
class _Array:
    element: _Step
    compact: bool
    nullable: bool


@dataclass(frozen=True, slots=True)
class _Struct:
    name: str
    flexible: bool
    nullable: bool
    steps: tuple[_Step, ...]
    tags: Mapping[int, _Step]


# A fixed-width field (or run of them) is just its byte count.
_Step = int | _Sized | _Array | _Struct

_FIXED_WIDTHS: Final = {
    "int8": 1, "uint8": 1, "bool": 1,
    "int16": 2, "uint16": 2, "error_code": 2,
    "int32": 4, "uint32": 4, "timedelta_i32": 4,
    "int64": 8, "uint64": 8, "float64": 8, "timedelta_i64": 8, "datetime_i64": 8,
    "uuid": 16,
}  # fmt: skip


def _primitive_step(kafka_type: str, flexible: bool, nullable: bool, owner: str) -> _Step:
    if kafka_type in _FIXED_WIDTHS:
        return _FIXED_WIDTHS[kafka_type]
    if kafka_type == "string":
        return _Sized("compact" if flexible else "int16", nullable, "string")
    if kafka_type in ("bytes", "records"):
        return _Sized("compact" if flexible else "int32", nullable, kafka_type)
    raise Zk2KraftError(f"{owner}: field type {kafka_type!r} is unknown to the protocol bounds check")


def _field_step(field: Any, flexible: bool, is_request_header: bool, tagged: bool, owner: str) -> _Step:
    # Mirrors kio's reader: RequestHeader.client_id is always a legacy nullable string (Kafka's rule), and
    # tagged primitives are never nullable on the wire.
    if is_request_header and field.name == "client_id":
        return _Sized("int16", True, "client id")
    match classify_field(field):
        case PrimitiveField():
            nullable = is_optional(field) and not tagged
            return _primitive_step(get_schema_field_type(field), flexible, nullable, owner)
        case PrimitiveTupleField():
            element = _primitive_step(get_schema_field_type(field), flexible, False, owner)
            return _Array(element, flexible, is_optional(field))
        case EntityField(type_=nested):
            return _struct_plan(nested, is_optional(field))
        case EntityTupleField(type_=nested):
            return _Array(_struct_plan(nested, False), flexible, is_optional(field))
    raise Zk2KraftError(f"{owner}: field {field.name} has a shape the protocol bounds check does not know")


_plans: dict[tuple[type[Any], bool], _Struct] = {}


def _struct_plan(entity_type: type[Any], nullable: bool) -> _Struct:
    plan = _plans.get((entity_type, nullable))
    if plan is None:
        plan = _plans[(entity_type, nullable)] = _compile_struct(entity_type, nullable)
    return plan


def _compile_struct(entity_type: type[Any], nullable: bool) -> _Struct:
    flexible = bool(entity_type.__flexible__)
    is_request_header = entity_type.__name__ == "RequestHeader"
    steps: list[_Step] = []
    tags: dict[int, _Step] = {}
    for field in fields(entity_type):
        tag = get_field_tag(field)
        step = _field_step(field, flexible, is_request_header, tag is not None, entity_type.__name__)
        if tag is not None:
            tags[int(tag)] = step
        elif isinstance(step, int) and steps and isinstance(steps[-1], int):
            steps[-1] += step  # merge runs of fixed-width fields into one bounds check
        else:
            steps.append(step)
    return _Struct(entity_type.__name__, flexible, nullable, tuple(steps), tags)


def _uvarint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    # Up to 5 bytes, as kio's reader (and Kafka's ByteUtils.readUnsignedVarint) accept.
    value = 0
    for index in range(5):
        if pos >= end:
            raise _Malformed(pos, "unsigned varint runs past the end")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << (7 * index)
        if not byte & 0x80:
            return value, pos
    raise _Malformed(pos - 5, "unsigned varint longer than 5 bytes")


def _signed(data: bytes, pos: int, end: int, width: int) -> tuple[int, int]:
    if pos + width > end:
        raise _Malformed(pos, f"needs {width} bytes, {end - pos} left")
    return int.from_bytes(data[pos : pos + width], "big", signed=True), pos + width


def _skip(step: _Step, data: bytes, pos: int, end: int) -> int:
    """Check that `step` fits in data[pos:end] and return where it ends (mirrors kio's reader)."""
    if isinstance(step, int):
        if pos + step > end:
            raise _Malformed(pos, f"needs {step} bytes, {end - pos} left")
        return pos + step
    if isinstance(step, _Sized):
        return _skip_sized(step, data, pos, end)
    if isinstance(step, _Array):
        return _skip_array(step, data, pos, end)
    return _skip_struct(step, data, pos, end)


def _skip_sized(step: _Sized, data: bytes, pos: int, end: int) -> int:
    start = pos
    if step.prefix == "compact":
        stored, pos = _uvarint(data, pos, end)
        length = stored - 1
    else:
        length, pos = _signed(data, pos, end, 2 if step.prefix == "int16" else 4)
    if length == -1:
        if not step.nullable:
            raise _Malformed(start, f"null where a non-nullable {step.what} is required")
        return pos
    if length < 0:
        raise _Malformed(start, f"negative {step.what} length {length}")
    if pos + length > end:
        raise _Malformed(start, f"{step.what} of {length} bytes but only {end - pos} remain")
    return pos + length


def _skip_array(step: _Array, data: bytes, pos: int, end: int) -> int:
    start = pos
    if step.compact:
        stored, pos = _uvarint(data, pos, end)
        count = stored - 1
    else:
        count, pos = _signed(data, pos, end, 4)
    if count == -1:
        if not step.nullable:
            raise _Malformed(start, "null where a non-nullable array is required")
        return pos
    if count < 0:
        raise _Malformed(start, f"negative array length {count}")
    # Every Kafka array element takes at least one byte; this bound is what keeps kio's reader from
    # reserving memory for billions of elements (which aborts the whole process).
    if count > end - pos:
        raise _Malformed(start, f"array claims {count} elements but only {end - pos} bytes remain")
    element = step.element
    if isinstance(element, int):
        return _skip(element * count, data, pos, end)
    for _ in range(count):
        pos = _skip(element, data, pos, end)
    return pos


def _skip_struct(step: _Struct, data: bytes, pos: int, end: int) -> int:
    if step.nullable:
        marker, after = _signed(data, pos, end, 1)
        if marker == -1:
            return after
        if marker != 1:
            raise _Malformed(pos, f"{step.name}: presence marker {marker} (must be -1 or 1)")
        pos = after
    for field_step in step.steps:
        pos = _skip(field_step, data, pos, end)
    if not step.flexible:
        return pos
    count, pos = _uvarint(data, pos, end)
    for _ in range(count):
        tag_start = pos
        tag, pos = _uvarint(data, pos, end)
        size, pos = _uvarint(data, pos, end)
        if pos + size > end:
            raise _Malformed(tag_start, f"{step.name}: tagged field {tag} of {size} bytes overruns the data")
        tag_step = step.tags.get(tag)
        if tag_step is None:
            # Kafka would skip it; kio's reader cannot, so the request is refused with a clear reason.
            raise _Malformed(tag_start, f"{step.name}: tagged field {tag} is not in the schema")
        field_end = _skip(tag_step, data, pos, pos + size)
        if field_end != pos + size:
            raise _Malformed(tag_start, f"{step.name}: tagged field {tag} is {size} bytes but holds less")
        pos = field_end
    return pos


# ---------------------------------------------------------------- entities


_readers: dict[type[Any], Any] = {}
_writers: dict[type[Any], Any] = {}


def _reader(entity_type: type[Any]) -> Any:
    reader = _readers.get(entity_type)
    if reader is None:
        reader = _readers[entity_type] = entity_reader(entity_type)
    return reader


REMEMBERED_ENTITIES: Final = frozenset(
    {
        create_topics_v5.CreatableTopicConfigs,
        create_topics_v6.CreatableTopicConfigs,
        create_topics_v7.CreatableTopicConfigs,
    }
)
"""Entities whose encoding is kept and reused (see bridge.kafka.memo_writer): a new topic's shared config entries."""


def _writer(entity_type: type[Any]) -> Any:
    writer = _writers.get(entity_type)
    if writer is None:
        if memo_writer.contains(entity_type, REMEMBERED_ENTITIES):
            writer = memo_writer.memo_entity_writer(entity_type, REMEMBERED_ENTITIES)
        else:
            writer = entity_writer(entity_type)
        _writers[entity_type] = writer
    return writer


def decode_entity(entity_type: type[Any], data: bytes, offset: int, source: str) -> tuple[Any, int]:
    """Decode one kio entity at `offset`; returns it and the offset after it. Bad bytes: CorruptDataError."""
    try:
        end = _skip(_struct_plan(entity_type, False), data, offset, len(data))
    except _Malformed as exc:
        raise CorruptDataError(source, exc.offset, f"{entity_type.__name__}: {exc.problem}") from None
    try:
        entity, size = _reader(entity_type)(data, offset)
    except Exception as exc:
        # kio's native reader reports bad values with builtin exceptions (ValueError, KeyError, ...).
        raise CorruptDataError(source, offset, f"{entity_type.__name__}: {exc}") from exc
    if offset + size != end:
        raise CorruptDataError(
            source, offset, f"{entity_type.__name__}: kio read {size} bytes, the bounds check {end - offset}"
        )
    return entity, end


def encode_entity(entity: Any) -> bytes:
    """The wire bytes of one kio entity (no size prefix)."""
    buffer = io.BytesIO()
    try:
        _writer(type(entity))(buffer, entity)
    except Exception as exc:
        # kio's writers report unencodable values with struct.error, TypeError, OutOfBoundValue, ...
        raise Zk2KraftError(f"cannot encode {type(entity).__name__}: {exc}") from exc
    return buffer.getvalue()


# ---------------------------------------------------------------- frames


def frame(payload: bytes) -> bytes:
    """Prefix `payload` with its int32 size, as every Kafka request and response is sent."""
    return len(payload).to_bytes(4, "big") + payload


WRITE_PIECE_BYTES = 1 << 20
"""A frame larger than this is handed to the transport in pieces of this size."""


async def write_frame(writer: asyncio.StreamWriter, payload: bytes) -> None:
    """Send `payload` as one size-prefixed frame and wait until the transport has taken it.

    A large frame goes in pieces with a drain between: written whole, a 30 MB UpdateMetadata is copied twice
    on the event loop (prefixing, then the transport's buffer), about 50 ms in which no heartbeat is answered.
    """
    if len(payload) <= WRITE_PIECE_BYTES:
        writer.write(frame(payload))
    else:
        writer.write(len(payload).to_bytes(4, "big"))
        view = memoryview(payload)
        for start in range(0, len(view), WRITE_PIECE_BYTES):
            writer.write(view[start : start + WRITE_PIECE_BYTES])
            await writer.drain()
    await writer.drain()


async def read_frame(reader: asyncio.StreamReader, max_bytes: int, source: str) -> bytes | None:
    """Read one size-prefixed frame; None on a clean end of stream. Oversized sizes fail before the body."""
    try:
        prefix = await reader.readexactly(4)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise CorruptDataError(
            source, 0, f"stream ended inside a size prefix ({len(exc.partial)} of 4 bytes)"
        ) from None
    size = int.from_bytes(prefix, "big", signed=True)
    if size < 0:
        raise CorruptDataError(source, 0, f"negative frame size {size}")
    if size > max_bytes:
        raise CorruptDataError(source, 0, f"frame of {size} bytes is larger than the {max_bytes}-byte limit")
    try:
        return await reader.readexactly(size)
    except asyncio.IncompleteReadError as exc:
        raise CorruptDataError(
            source, 4 + len(exc.partial), f"stream ended after {len(exc.partial)} of {size} frame bytes"
        ) from None


# ---------------------------------------------------------------- requests


@dataclass(frozen=True, slots=True)
class DecodedRequest:
    """A request's header and body; `body` is None for an ApiVersions version we do not support."""

    header: RequestHeader
    body: Any | None

    @property
    def api_key(self) -> int:
        return int(self.header.request_api_key)

    @property
    def api_version(self) -> int:
        return int(self.header.request_api_version)

    @property
    def correlation_id(self) -> int:
        return int(self.header.correlation_id)

    @property
    def client_id(self) -> str | None:
        return self.header.client_id


def peek_api(payload: bytes, source: str) -> tuple[int, int]:
    """The api key and version at the start of a request (header + body, no size prefix)."""
    if len(payload) < 4:
        raise CorruptDataError(source, 0, f"request of {len(payload)} bytes has no api key and version")
    key, version = struct.unpack_from(">hh", payload)
    return key, version


def _api_versions_header_class(api_version: int) -> type[Any]:
    # Kafka derives the header version from ApiVersions' flexibleVersions ("3+") even for versions it does
    # not support, so that it can still read the correlation id and answer.
    return request_header_v2.RequestHeader if api_version >= 3 else request_header_v1.RequestHeader


def decode_request_header(payload: bytes, source: str) -> tuple[RequestHeader, int]:
    """The header of a request of a defined key/version and the offset where its body starts."""
    api_key, api_version = peek_api(payload, source)
    header_class = request_class(api_key, api_version).__header_schema__
    header, offset = decode_entity(header_class, payload, 0, source)
    return header, offset


def decode_request(
    payload: bytes, source: str, supported: Mapping[int, tuple[int, int]] | None = None
) -> DecodedRequest:
    """Header and body of a request (no size prefix).

    `supported` limits the accepted key/versions (default: all kio knows). An unsupported ApiVersions
    version decodes to a header with `body=None` (Kafka answers it); anything else unsupported raises
    `UnsupportedVersionError`. Trailing bytes after the body are ignored, as Kafka does.
    """
    api_key, api_version = peek_api(payload, source)
    body_class: type[Any] | None = None
    if supported is None or _in_range(supported, api_key, api_version):
        try:
            body_class = request_class(api_key, api_version)
        except UnsupportedVersionError:
            body_class = None
    if body_class is None:
        if api_key == API_VERSIONS_KEY:
            header, _ = decode_entity(_api_versions_header_class(api_version), payload, 0, source)
            return DecodedRequest(header, None)
        raise UnsupportedVersionError(f"{source}: {describe_api(api_key, api_version)} is not supported")
    header, offset = decode_entity(body_class.__header_schema__, payload, 0, source)
    body, _ = decode_entity(body_class, payload, offset, f"{source} ({describe_api(api_key, api_version)})")
    return DecodedRequest(header, body)


def _in_range(supported: Mapping[int, tuple[int, int]], api_key: int, api_version: int) -> bool:
    limits = supported.get(api_key)
    return limits is not None and limits[0] <= api_version <= limits[1]


def encode_request(
    request: Any, correlation_id: int, client_id: str | None, api_version: int | None = None
) -> bytes:
    """Header + body bytes of a request (no size prefix), as Kafka's `RequestUtils.serialize` lays them out.

    `api_version` overrides the version written in the header (default: the body class's own version);
    only useful to probe how a server treats a version it does not know.
    """
    return encode_request_header(request, correlation_id, client_id, api_version) + encode_entity(request)


def encode_request_header(
    request: Any, correlation_id: int, client_id: str | None, api_version: int | None = None
) -> bytes:
    """The header bytes `encode_request` puts before `request`'s body."""
    version = int(request.__version__) if api_version is None else api_version
    try:
        header = request.__header_schema__(
            request_api_key=i16(request.__api_key__),
            request_api_version=i16(version),
            correlation_id=i32(correlation_id),
            client_id=client_id,
        )
    except TypeError as exc:
        raise Zk2KraftError(f"cannot build a request header for {type(request).__name__}: {exc}") from exc
    return encode_entity(header)


# ---------------------------------------------------------------- responses


class EncodedResponse:
    """A response body encoded ahead of sending (e.g. while the change it answers is being written).

    `body` stays None until someone calls `encode()`; `encode_response` uses it when it is there.
    """

    __slots__ = ("body", "response")

    def __init__(self, response: Any) -> None:
        self.response = response
        self.body: bytes | None = None

    def encode(self) -> None:
        self.body = encode_entity(self.response)


def unwrap_response(response: Any) -> Any:
    """The kio response object, whether or not its body was encoded ahead."""
    return response.response if isinstance(response, EncodedResponse) else response


def encode_response(correlation_id: int, response: Any) -> bytes:
    """Header + body bytes of a response (no size prefix); ApiVersions keeps header v0 (kio's classes know)."""
    body = response.body if isinstance(response, EncodedResponse) else None
    response = unwrap_response(response)
    try:
        tail = _header_tail(response.__header_schema__)
    except TypeError as exc:
        raise Zk2KraftError(f"cannot build a response header for {type(response).__name__}: {exc}") from exc
    header = _CORRELATION_ID.pack(correlation_id) + tail
    return header + (body if body is not None else encode_entity(response))


_CORRELATION_ID = struct.Struct(">i")


@functools.cache
def _header_tail(header_schema: type[Any]) -> bytes:
    """What a response header holds after its correlation id (a flexible header's empty tagged fields)."""
    return encode_entity(header_schema(correlation_id=i32(0)))[_CORRELATION_ID.size :]


def decode_response(payload: bytes, api_key: int, api_version: int, source: str) -> tuple[int, Any]:
    """Correlation id and body of a response to a request of `api_key`/`api_version` (no size prefix).

    Like Kafka's client, an ApiVersions response that does not parse in the requested version is read as
    v0: that is how a server answers an ApiVersions version it does not support.
    """
    try:
        body_class = response_class(api_key, api_version)
    except UnsupportedVersionError:
        if api_key != API_VERSIONS_KEY:
            raise
        body_class = response_class(API_VERSIONS_KEY, 0)
    header, offset = decode_entity(body_class.__header_schema__, payload, 0, source)
    what = f"{source} ({api_name(api_key)} v{api_version} response)"
    try:
        body, end = decode_entity(body_class, payload, offset, what)
        if api_key == API_VERSIONS_KEY and body_class.__version__ != 0 and end != len(payload):
            raise CorruptDataError(what, end, f"{len(payload) - end} bytes left over")
    except CorruptDataError:
        if api_key != API_VERSIONS_KEY or body_class.__version__ == 0:
            raise
        body, _ = decode_entity(response_class(API_VERSIONS_KEY, 0), payload, offset, f"{what} read as v0")
    return int(header.correlation_id), body


# ---------------------------------------------------------------- principals (EnvelopeRequest)


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    """Who sent a request: Kafka's KafkaPrincipal (type, name, whether a delegation token authenticated it)."""

    principal_type: str = "User"
    name: str = "ANONYMOUS"
    token_authenticated: bool = False

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


ANONYMOUS: Final = KafkaPrincipal()


def encode_principal(principal: KafkaPrincipal) -> bytes:
    """Envelope `RequestPrincipal` bytes: int16 version 0 + DefaultPrincipalData v0 (DefaultKafkaPrincipalBuilder)."""
    data = DefaultPrincipalData(
        type_=principal.principal_type,
        name=principal.name,
        token_authenticated=principal.token_authenticated,
    )
    return PRINCIPAL_DATA_VERSION.to_bytes(2, "big") + encode_entity(data)


def decode_principal(data: bytes, source: str) -> KafkaPrincipal:
    """The principal an EnvelopeRequest carries; unknown versions raise UnsupportedVersionError."""
    if len(data) < 2:
        raise CorruptDataError(source, 0, f"principal of {len(data)} bytes has no version")
    version = int.from_bytes(data[:2], "big", signed=True)
    if version != PRINCIPAL_DATA_VERSION:
        raise UnsupportedVersionError(f"{source}: DefaultPrincipalData version {version} (only 0 is defined)")
    entity, end = decode_entity(DefaultPrincipalData, data, 2, source)
    if end != len(data):
        raise CorruptDataError(source, end, f"{len(data) - end} bytes after the principal")
    return KafkaPrincipal(entity.type_, entity.name, entity.token_authenticated)
