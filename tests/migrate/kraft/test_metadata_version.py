"""metadata.version table: parsing, levels, predicates and record-version selectors."""

from __future__ import annotations

import pytest

from migrate.errors import UnsupportedVersionError, Zk2KraftError
from migrate.kraft import metadata_version as mv


def test_levels_match_kafka_3_9_table() -> None:
    expected = {
        "3.0-IV1": 1, "3.1-IV0": 2, "3.2-IV0": 3, "3.3-IV0": 4, "3.3-IV1": 5, "3.3-IV2": 6, "3.3-IV3": 7,
        "3.4-IV0": 8, "3.5-IV0": 9, "3.5-IV1": 10, "3.5-IV2": 11, "3.6-IV0": 12, "3.6-IV1": 13,
        "3.6-IV2": 14, "3.7-IV0": 15, "3.7-IV1": 16, "3.7-IV2": 17, "3.7-IV3": 18, "3.7-IV4": 19,
        "3.8-IV0": 20, "3.9-IV0": 21, "4.0-IV0": 22, "4.0-IV1": 23,
    }  # fmt: skip
    assert {v.name: v.feature_level for v in mv.KRAFT_VERSIONS} == expected


def test_did_metadata_change_flags() -> None:
    changed = {v.name for v in mv.KRAFT_VERSIONS if v.did_metadata_change}
    assert changed == {
        "3.0-IV1", "3.2-IV0", "3.3-IV1", "3.3-IV2", "3.3-IV3", "3.4-IV0", "3.5-IV2",
        "3.6-IV1", "3.6-IV2", "3.7-IV0", "3.7-IV2", "4.0-IV0",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("3.7", "3.7-IV4"),
        ("3.9", "3.9-IV0"),
        ("3.7-IV4", "3.7-IV4"),
        ("3.7-IV0", "3.7-IV0"),
        ("3.4", "3.4-IV0"),
        ("3.6.2", "3.6-IV2"),
        (" 3.5 ", "3.5-IV2"),
        ("2.8", "2.8-IV1"),
        ("0.10.0", "0.10.0-IV1"),
        ("0.10.2.1", "0.10.2-IV0"),
        ("0.9.0", "0.9.0"),
    ],
)
def test_parse_release_and_internal_versions(text: str, name: str) -> None:
    assert mv.parse(text).name == name


@pytest.mark.parametrize("text", ["", "3.10", "3.7-IV9", "banana", "4", "3.7-iv4", "9.9-IV0"])
def test_parse_unknown_version_names_the_input(text: str) -> None:
    with pytest.raises(UnsupportedVersionError) as info:
        mv.parse(text)
    assert repr(text) in str(info.value)
    assert isinstance(info.value, Zk2KraftError)


def test_unstable_versions_need_opt_in() -> None:
    with pytest.raises(UnsupportedVersionError, match="not production-ready"):
        mv.parse("4.0-IV0")
    assert mv.parse("4.0", allow_unstable=True) is mv.IBP_4_0_IV1
    assert not mv.IBP_4_0_IV0.is_production
    assert mv.IBP_3_9_IV0.is_production
    assert mv.LATEST_PRODUCTION is mv.IBP_3_9_IV0


def test_from_feature_level() -> None:
    assert mv.from_feature_level(19) is mv.IBP_3_7_IV4
    assert mv.from_feature_level(22) is mv.IBP_4_0_IV0
    for bad in (0, -1, 24, 1000):
        with pytest.raises(UnsupportedVersionError, match=str(bad)):
            mv.from_feature_level(bad)


def test_ordering_follows_the_table() -> None:
    assert mv.parse("2.8") < mv.IBP_3_0_IV1 < mv.IBP_3_4_IV0 < mv.IBP_3_9_IV0 < mv.IBP_4_0_IV0
    assert sorted(reversed(mv.ALL_VERSIONS)) == list(mv.ALL_VERSIONS)
    assert mv.parse("3.7") == mv.IBP_3_7_IV4
    assert len({mv.parse("3.7"), mv.IBP_3_7_IV4}) == 1
    assert not mv.parse("3.0-IV0").is_kraft_supported()
    assert mv.IBP_3_0_IV1.is_kraft_supported()


def test_every_comparison_follows_the_table_position() -> None:
    for i, a in enumerate(mv.ALL_VERSIONS):
        for j, b in enumerate(mv.ALL_VERSIONS):
            assert (a < b, a <= b, a > b, a >= b, a == b) == (i < j, i <= j, i > j, i >= j, i == j)


@pytest.mark.parametrize(
    ("predicate", "first"),
    [
        ("is_leader_recovery_supported", "3.2-IV0"),
        ("is_feature_level_record_supported", "3.3-IV0"),
        ("is_no_op_record_supported", "3.3-IV1"),
        ("is_broker_registration_change_record_supported", "3.3-IV2"),
        ("is_in_controlled_shutdown_state_supported", "3.3-IV3"),
        ("is_migration_supported", "3.4-IV0"),
        ("is_api_forwarding_enabled", "3.4-IV0"),
        ("is_scram_supported", "3.5-IV2"),
        ("is_metadata_transaction_supported", "3.6-IV1"),
        ("is_delegation_token_supported", "3.6-IV2"),
        ("is_controller_registration_supported", "3.7-IV0"),
        ("is_directory_assignment_supported", "3.7-IV2"),
        ("is_elr_supported", "4.0-IV0"),
    ],
)
def test_predicates_switch_on_at_their_level(predicate: str, first: str) -> None:
    threshold = mv.parse(first, allow_unstable=True)
    for version in mv.KRAFT_VERSIONS:
        assert getattr(version, predicate)() == (version >= threshold), version


def test_leader_epoch_bump_on_isr_shrink_only_before_3_6() -> None:
    assert mv.IBP_3_5_IV2.is_leader_epoch_bump_required_on_isr_shrink()
    assert not mv.IBP_3_6_IV0.is_leader_epoch_bump_required_on_isr_shrink()


def test_record_version_selectors() -> None:
    rb = {v.name: v.register_broker_record_version() for v in mv.KRAFT_VERSIONS}
    assert rb["3.3-IV2"] == 0 and rb["3.3-IV3"] == 1 and rb["3.4-IV0"] == 2 and rb["3.7-IV1"] == 2
    assert rb["3.7-IV2"] == 3 and rb["3.9-IV0"] == 3
    for v in mv.KRAFT_VERSIONS:
        expected = 2 if v >= mv.IBP_4_0_IV0 else 1 if v >= mv.IBP_3_7_IV2 else 0
        assert v.partition_record_version() == expected
        assert v.partition_change_record_version() == expected
    assert mv.IBP_3_7_IV0.register_controller_record_version() == 0
    with pytest.raises(UnsupportedVersionError, match=r"3\.6-IV2"):
        mv.IBP_3_6_IV2.register_controller_record_version()


def test_broker_registration_change_record_version() -> None:
    assert mv.IBP_3_9_IV0.broker_registration_change_record_version() == 0
    assert mv.IBP_3_9_IV0.broker_registration_change_record_version(in_controlled_shutdown=True) == 1
    assert mv.IBP_3_9_IV0.broker_registration_change_record_version(log_dirs=True) == 2
    with pytest.raises(UnsupportedVersionError):
        mv.IBP_3_3_IV1.broker_registration_change_record_version()
    with pytest.raises(UnsupportedVersionError):
        mv.IBP_3_6_IV2.broker_registration_change_record_version(log_dirs=True)


def test_coerce_accepts_levels_names_and_versions() -> None:
    assert mv.coerce(19) is mv.IBP_3_7_IV4
    assert mv.coerce("3.7-IV4") is mv.IBP_3_7_IV4
    assert mv.coerce(mv.IBP_3_7_IV4) is mv.IBP_3_7_IV4
    assert mv.coerce("4.0-IV0") is mv.IBP_4_0_IV0
