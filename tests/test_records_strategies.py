"""Hypothesis strategies built generically from the generated record classes (shared by the record tests)."""

from __future__ import annotations

import functools
import uuid
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from migrate.kraft.records import CONTROL_RECORD_CLASSES, METADATA_RECORD_CLASSES
from migrate.kraft.wire import FieldInfo

ALL_CLASSES: tuple[type[Any], ...] = (*METADATA_RECORD_CLASSES, *CONTROL_RECORD_CLASSES)
ALL_VERSIONS: list[tuple[type[Any], int]] = [
    (cls, v) for cls in ALL_CLASSES for v in range(cls.LOWEST_VERSION, cls.HIGHEST_VERSION + 1)
]
VERSION_IDS = [f"{cls.__name__}-v{v}" for cls, v in ALL_VERSIONS]

_INT_BOUNDS = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "uint16": (0, 0xFFFF),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
}

texts = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
uuids = st.one_of(
    st.sampled_from([uuid.UUID(int=0), uuid.UUID(int=1), uuid.UUID(int=2)]),
    st.integers(0, (1 << 128) - 1).map(lambda i: uuid.UUID(int=i)),
)


def _element(info: FieldInfo, version: int) -> st.SearchStrategy[Any]:
    kind = info.element_type
    if info.struct is not None:
        return struct_strategy(info.struct, version)
    if kind in _INT_BOUNDS:
        lo, hi = _INT_BOUNDS[kind]
        return st.one_of(
            st.integers(lo, hi), st.sampled_from([lo, hi, -1, 0]).filter(lambda x: lo <= x <= hi)
        )
    if kind == "bool":
        return st.booleans()
    if kind == "float64":
        return st.floats(allow_nan=False)
    if kind == "string":
        return texts
    if kind == "bytes":
        return st.binary(max_size=12)
    if kind == "uuid":
        return uuids
    raise AssertionError(f"no strategy for {info.schema_type}")


def field_strategy(info: FieldInfo, version: int) -> st.SearchStrategy[Any]:
    """Any value the field may hold at `version` (None only where nullable)."""
    base = _element(info, version)
    values = st.lists(base, max_size=4) if info.is_array else base
    return st.one_of(st.none(), values) if info.nullable_in(version) else values


def unknown_tags_strategy(cls: type, version: int) -> st.SearchStrategy[dict[int, bytes]]:
    """Raw tagged fields with tags the schema does not define at `version`."""
    known = {info.tag for info in cls.FIELDS if info.tagged_in(version)}  # type: ignore[attr-defined]
    tags = st.one_of(st.integers(0, 12), st.integers(0, 0xFFFF_FFFF)).filter(lambda t: t not in known)
    return st.dictionaries(tags, st.binary(max_size=6), max_size=3)


@functools.cache
def struct_strategy(cls: type, version: int) -> st.SearchStrategy[Any]:
    """Records (or nested structs) of `cls` valid at `version`; absent fields keep their defaults."""
    kwargs: dict[str, st.SearchStrategy[Any]] = {
        info.name: field_strategy(info, version)
        for info in cls.FIELDS  # type: ignore[attr-defined]
        if info.present_in(version)
    }
    kwargs["unknown_tagged_fields"] = unknown_tags_strategy(cls, version)
    return st.builds(cls, **kwargs)


def test_every_record_type_and_version_is_covered() -> None:
    assert len(ALL_CLASSES) == 30
    names = {cls.__name__ for cls in ALL_CLASSES}
    assert {"PartitionRecord", "ZkMigrationStateRecord", "VotersRecord", "LeaderChangeMessage"} <= names
    # 25 metadata types (RegisterBroker 0-3, Partition/PartitionChange/BrokerRegistrationChange 0-2)
    # and 5 control types (LeaderChangeMessage 0-1).
    assert len(ALL_VERSIONS) == 25 + 3 + 2 * 3 + 5 + 1


@pytest.mark.parametrize(("cls", "version"), ALL_VERSIONS, ids=VERSION_IDS)
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_strategies_produce_records_of_the_version(cls: type, version: int, data: st.DataObject) -> None:
    record = data.draw(struct_strategy(cls, version))
    assert isinstance(record, cls)
    for info in cls.FIELDS:  # type: ignore[attr-defined]
        if not info.present_in(version):
            assert info.is_default(getattr(record, info.name))
