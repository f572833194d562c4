"""kio's entity writers, except that the bytes of chosen nested entities are written once and then reused.

A CreateTopics v5+ response carries every new topic's ~36 effective configs; the handler shares those
CreatableTopicConfigs entities between responses (kio entities are immutable), and encoding them is
nine tenths of encoding the response. `memo_entity_writer` builds the writer of a response the way kio's
`entity_writer` does, field by field with kio's own field writers, but writes a remembered entity's
bytes from a cache keyed by the entity object. The output is byte-for-byte kio's (tests compare them).

Requests built to share parts (the controller's UpdateMetadata for every broker, LeaderAndIsr partition
states shared between replicas) mark them instead: an array built as `EncodedOnce` keeps its own bytes,
one built as `SharedItems` keeps its items' bytes in a dict the arrays of one build share. A writer made
with `sharing=True` honours both marks, and writes array lengths and int32 arrays without kio's per-value
checks (the bytes are kio's; a value out of range still fails, in `struct.pack`).
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable, Iterable
from dataclasses import MISSING, Field, fields
from typing import Any

from kio.serial import entity_writer
from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import (
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
)
from kio.serial._serialize import get_field_writer
from kio.serial.writers import (
    compact_array_writer,
    legacy_array_writer,
    write_legacy_array_length,
    write_tagged_field,
    write_unsigned_varint,
)
from kio.static.primitive import i32, uvarint

Writer = Callable[[Any, Any], None]
Memo = dict[int, tuple[Any, bytes]]
"""Encoded entities by id(entity), each kept with its entity (which the entry holds alive)."""

REMEMBERED_LIMIT = 4096
"""Encoded entities kept per remembered type; the cache starts over when full."""


def contains(entity_type: type[Any], remembered: frozenset[type[Any]]) -> bool:
    """Whether an array field of `entity_type`, at any depth, holds entities of a `remembered` type."""
    for field in fields(entity_type):
        kind = classify_field(field)
        if isinstance(kind, EntityTupleField) and (
            kind.type_ in remembered or contains(kind.type_, remembered)
        ):
            return True
    return False


class EncodedOnce(tuple[Any, ...]):
    """An entity array whose bytes a sharing writer keeps on it: written once however many requests hold it."""

    wire: bytes


class SharedItems(tuple[Any, ...]):
    """An entity array whose items' bytes a sharing writer keeps in `memo` (shared by the arrays of one build)."""

    memo: Memo

    def __new__(cls, items: Iterable[Any], memo: Memo) -> SharedItems:
        self = super().__new__(cls, items)
        self.memo = memo
        return self


def memo_entity_writer(
    entity_type: type[Any], remembered: frozenset[type[Any]], *, sharing: bool = False
) -> Writer:
    """The writer of `entity_type`: kio's, but items of `remembered` types in its arrays are encoded once,
    and with `sharing`, `EncodedOnce` and `SharedItems` arrays at any depth keep their bytes."""
    flexible = bool(entity_type.__flexible__)
    plain: list[tuple[str, Writer]] = []
    tagged: list[tuple[int, Field[Any], Writer, Any]] = []
    for field in fields(entity_type):
        tag = get_field_tag(field)
        writer = _field_writer(field, flexible, tag is not None, remembered, sharing)
        if tag is None:
            plain.append((field.name, writer))
        else:
            tagged.append((tag, field, writer, get_tagged_field_default(field)))
    tagged.sort(key=lambda entry: entry[0])

    def write_entity(buffer: Any, entity: Any) -> None:
        for name, writer in plain:
            writer(buffer, getattr(entity, name))
        if not flexible:
            return
        # Tagged fields as kio writes them: in tag order, default values left out, counted first.
        present = []
        for tag, field, writer, implicit_default in tagged:
            value = getattr(entity, field.name)
            if value == field.default or (field.default is MISSING and value == implicit_default):
                continue
            present.append((tag, writer, value))
        if not present:
            buffer.write(NO_TAGGED_FIELDS)
            return
        with io.BytesIO() as tag_buffer:
            for tag, writer, value in present:
                write_tagged_field(buffer=tag_buffer, tag=uvarint(tag), writer=writer, value=value)
            write_unsigned_varint(buffer, uvarint(len(present)))
            buffer.write(tag_buffer.getvalue())

    return write_entity


def _field_writer(
    field: Field[Any], flexible: bool, is_tag: bool, remembered: frozenset[type[Any]], sharing: bool
) -> Writer:
    kind = classify_field(field)
    if isinstance(kind, EntityTupleField):
        item: Writer | None = None
        if kind.type_ in remembered:
            item = _remembering(entity_writer(kind.type_))
        elif sharing or contains(kind.type_, remembered):
            item = memo_entity_writer(kind.type_, remembered, sharing=sharing)
        if item is not None:
            array = (compact_array_writer if flexible else legacy_array_writer)(item)
            return _sharing(array, item, flexible) if sharing else array
    writer: Writer = get_field_writer(field, flexible=flexible, is_request_header=False, is_tag=is_tag)
    if (
        sharing
        and flexible
        and not is_tag
        and isinstance(kind, PrimitiveTupleField)
        and get_schema_field_type(field) == "int32"
    ):
        return _int32_array(writer)
    return writer


NO_TAGGED_FIELDS = b"\x00"
"""A flexible struct's tagged-field count when none is written."""

_SHORT_VARINTS = tuple(bytes((n,)) for n in range(0x80))


def _write_uvarint(buffer: Any, value: int) -> None:
    """An unsigned varint, as kio's `write_unsigned_varint` writes it, without its per-call value check."""
    if value < 0x80:
        buffer.write(_SHORT_VARINTS[value])
        return
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    buffer.write(out)


def _int32_array(kio_writer: Writer) -> Writer:
    """A compact int32 array in one `struct.pack` (kio packs item by item); None goes to kio's writer."""

    def write_int32s(buffer: Any, items: Any) -> None:
        if items is None:
            kio_writer(buffer, items)
            return
        count = len(items)
        _write_uvarint(buffer, count + 1)
        buffer.write(struct.pack(f">{count}i", *items))

    return write_int32s


def _sharing(array: Writer, item: Writer, flexible: bool) -> Writer:
    """`array` (kio's writer of an entity array), honouring the `EncodedOnce` and `SharedItems` marks."""

    def write_array(buffer: Any, items: Any) -> None:
        kind = type(items)
        if kind is EncodedOnce:
            wire = getattr(items, "wire", None)
            if wire is None:
                out = io.BytesIO()
                array(out, items)
                wire = items.wire = out.getvalue()
            buffer.write(wire)
        elif kind is SharedItems:
            if flexible:
                _write_uvarint(buffer, len(items) + 1)
            else:
                write_legacy_array_length(buffer, i32(len(items)))
            memo = items.memo
            for entity in items:
                hit = memo.get(id(entity))
                if hit is None or hit[0] is not entity:
                    out = io.BytesIO()
                    item(out, entity)
                    hit = memo[id(entity)] = (entity, out.getvalue())
                buffer.write(hit[1])
        elif flexible and items is not None:
            _write_uvarint(buffer, len(items) + 1)
            for entity in items:
                item(buffer, entity)
        else:
            array(buffer, items)

    return write_array


def _remembering(write: Writer) -> Writer:
    """`write`, with each entity's bytes kept (keyed by the object, which the cache holds alive)."""
    cache: dict[int, tuple[Any, bytes]] = {}

    def write_remembered(buffer: Any, entity: Any) -> None:
        hit = cache.get(id(entity))
        if hit is None or hit[0] is not entity:
            out = io.BytesIO()
            write(out, entity)
            hit = (entity, out.getvalue())
            if len(cache) >= REMEMBERED_LIMIT:
                cache.clear()
            cache[id(entity)] = hit
        buffer.write(hit[1])

    return write_remembered
