"""Kafka's znode path grammar shared by the migration's tree reader and the audit."""

from __future__ import annotations

import pytest

from migrate.zk.paths import canonical_int


@pytest.mark.parametrize(
    ("name", "value"),
    [("0", 0), ("7", 7), ("16383", 16383), ("16384", 16384), ("-1", -1), ("2147483647", 2**31 - 1)],
)
def test_ids_as_java_prints_them_are_read(name: str, value: int) -> None:
    assert canonical_int(name) == value


@pytest.mark.parametrize("name", ["007", "+1", " 1", "1 ", "1e3", "", "2147483648", "-2147483649", "٣"])
def test_names_java_would_not_print_are_not_ids(name: str) -> None:
    # A znode named like this was not written by Kafka: its path could not be rebuilt from the id.
    assert canonical_int(name) is None
