"""The record strategies of tests.support.strategies cover every record type and version, and draw valid records."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from tests.support.strategies import ALL_CLASSES, ALL_VERSIONS, VERSION_IDS, struct_strategy


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
