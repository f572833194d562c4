"""Kafka's StripedReplicaPlacer: Kafka's own expectations (with its MockRandom) and placement properties."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.handlers.placement import (
    InvalidReplicationFactorError,
    JavaRandom,
    RackList,
    UsableBroker,
    place_replicas,
    usable_brokers,
)
from migrate.jvm import java_hash_map_order
from migrate.kraft import records as rec
from migrate.kraft.replay import replay_records


class KafkaMockRandom(JavaRandom):
    """Kafka's test MockRandom: a fixed 64-bit LCG behind java.util.Random's next(bits)."""

    def __init__(self, state: int = 17) -> None:
        super().__init__(0)
        self._state = state

    def _next(self, bits: int) -> int:
        self._state = (self._state * 2862933555777941757 + 3037000493) & 0xFFFF_FFFF_FFFF_FFFF
        value = (self._state >> (64 - bits)) & 0xFFFF_FFFF
        return value - (1 << 32) if value >= 1 << 31 else value


def _brokers(*spec: tuple[int, str | None, bool]) -> list[UsableBroker]:
    return [UsableBroker(b, rack, fenced) for b, rack, fenced in spec]


# ---------------------------------------------------------------- java.util.Random


def test_java_random_matches_java() -> None:
    # Values printed by OpenJDK 17: nextInt with small, power-of-two and huge (rejection loop) bounds.
    rng = JavaRandom(42)
    assert [rng.next_int(10) for _ in range(5)] == [0, 3, 8, 4, 0]
    assert JavaRandom(0).next_int(16) == 11
    big = JavaRandom(123456789)
    assert [big.next_int(1_000_000_007) for _ in range(8)] == [
        426010958,
        639209593,
        981296483,
        547328344,
        838606290,
        465137554,
        918435526,
        913732807,
    ]


def test_java_shuffle_matches_collections_shuffle() -> None:
    items = list(range(10))
    JavaRandom(1).shuffle(items)
    assert sorted(items) == list(range(10))
    assert items == [6, 9, 7, 8, 4, 2, 0, 3, 1, 5]


def test_rack_hash_map_order_matches_java() -> None:
    # Iteration order of a HashMap<Optional<String>, ?> filled in this order, printed by OpenJDK 17.
    keys: list[str | None] = [None, "rack-b", "rack-a", "z", "", "us-east-1a", "us-east-1b", "us-east-1c"]
    keys += ["1", "2", "3", "10", "20", "Aa", "BB", "x", "y", "q"]
    assert java_hash_map_order(keys) == [
        None,
        "",
        "Aa",
        "BB",
        "rack-b",
        "rack-a",
        "1",
        "q",
        "2",
        "3",
        "x",
        "us-east-1a",
        "y",
        "z",
        "us-east-1b",
        "us-east-1c",
        "20",
        "10",
    ]


# ---------------------------------------------------------------- Kafka's StripedReplicaPlacerTest


def test_avoid_fenced_replica_if_possible_on_single_rack() -> None:
    racks = RackList(
        KafkaMockRandom(),
        _brokers((3, None, False), (1, None, True), (0, None, False), (4, None, False), (2, None, False)),
    )
    assert (racks.num_total_brokers, racks.num_unfenced_brokers) == (5, 4)
    assert racks.rack_names == [None]
    for bad in (0, -1):
        with pytest.raises(InvalidReplicationFactorError):
            racks.place(bad)
    assert racks.place(4) == [3, 4, 0, 2]
    assert racks.place(4) == [4, 0, 2, 3]
    assert racks.place(4) == [0, 2, 3, 4]
    assert racks.place(4) == [2, 3, 4, 0]
    assert racks.place(4) == [0, 4, 3, 2]


def test_multi_partition_topic_on_single_unfenced_broker() -> None:
    brokers = _brokers((0, None, False), (1, None, True))
    assert place_replicas(brokers, 3, 1, KafkaMockRandom()) == [[0], [0], [0]]


def test_placement_on_fenced_replica_on_single_rack() -> None:
    racks = RackList(KafkaMockRandom(), _brokers((3, None, False), (1, None, True), (2, None, False)))
    assert (racks.num_total_brokers, racks.num_unfenced_brokers) == (3, 2)
    assert [racks.place(3) for _ in range(4)] == [[3, 2, 1], [2, 3, 1], [3, 2, 1], [2, 3, 1]]


def test_rack_list_with_multiple_racks() -> None:
    racks = RackList(
        KafkaMockRandom(),
        _brokers(
            (11, "1", False),
            (10, "1", False),
            (30, "3", False),
            (31, "3", False),
            (21, "2", False),
            (20, "2", True),
        ),
    )
    assert (racks.num_total_brokers, racks.num_unfenced_brokers) == (6, 5)
    assert racks.rack_names == ["1", "2", "3"]
    assert racks.place(4) == [11, 21, 31, 10]
    assert racks.place(4) == [21, 30, 10, 20]
    assert racks.place(4) == [31, 11, 21, 30]


def test_rack_list_with_invalid_racks() -> None:
    racks = RackList(
        KafkaMockRandom(),
        _brokers(
            (11, "1", False),
            (10, "1", False),
            (30, "3", True),
            (31, "3", True),
            (20, "2", True),
            (21, "2", True),
            (41, "4", False),
            (40, "4", True),
        ),
    )
    assert (racks.num_total_brokers, racks.num_unfenced_brokers) == (8, 3)
    assert racks.rack_names == ["1", "2", "3", "4"]
    assert racks.place(4) == [41, 11, 21, 30]
    assert racks.place(4) == [10, 20, 31, 41]
    assert racks.place(4) == [41, 21, 30, 11]


def test_all_brokers_fenced() -> None:
    brokers = _brokers((0, None, True), (1, None, True))
    with pytest.raises(InvalidReplicationFactorError, match=r"^All brokers are currently fenced\.$"):
        place_replicas(brokers, 1, 1, KafkaMockRandom())


def test_not_enough_brokers() -> None:
    brokers = _brokers((0, None, False), (1, None, True))
    with pytest.raises(
        InvalidReplicationFactorError,
        match=r"^The target replication factor of 3 cannot be reached because only 2 broker\(s\) are registered\.$",
    ):
        place_replicas(brokers, 1, 3, KafkaMockRandom())


def test_non_positive_replication_factor() -> None:
    with pytest.raises(InvalidReplicationFactorError, match=r"Invalid replication factor 0: the replication"):
        place_replicas(_brokers((0, None, False)), 1, 0, KafkaMockRandom())


def test_no_brokers_at_all() -> None:
    with pytest.raises(InvalidReplicationFactorError, match="All brokers are currently fenced"):
        place_replicas([], 1, 1, KafkaMockRandom())


def test_placement_follows_the_seed_and_keeps_no_state_between_calls() -> None:
    brokers = [UsableBroker(i, f"r{i % 3}", i == 4) for i in range(9)]
    first = place_replicas(brokers, 20, 3, JavaRandom(7))
    other = place_replicas(brokers, 20, 3, JavaRandom(8))
    assert other != first  # the seed is used
    assert place_replicas(brokers, 20, 3, JavaRandom(7)) == first  # the call in between left nothing behind


# ---------------------------------------------------------------- usable brokers of an image


def test_usable_brokers_skip_controlled_shutdown() -> None:
    records: list[tuple[Any, int]] = [
        (
            rec.RegisterBrokerRecord(
                broker_id=b,
                incarnation_id=uuid.UUID(int=b + 1),
                broker_epoch=10 + b,
                rack="a" if b % 2 else None,
                fenced=b == 2,
            ),
            1,
        )
        for b in (3, 1, 2, 4)
    ]
    records.append(
        (rec.BrokerRegistrationChangeRecord(broker_id=4, broker_epoch=14, in_controlled_shutdown=1), 1)
    )
    image = replay_records(records)
    assert usable_brokers(image) == [
        UsableBroker(1, "a", False),
        UsableBroker(2, None, True),
        UsableBroker(3, "a", False),
    ]


# ---------------------------------------------------------------- properties


@st.composite
def clusters(draw: st.DrawFn) -> list[UsableBroker]:
    ids = draw(st.lists(st.integers(0, 200), min_size=1, max_size=12, unique=True))
    rack_sets: list[list[str | None]] = [[None], ["a"], ["a", "b"], ["a", "b", "c"], [None, "x", "y", "z"]]
    racks = draw(st.sampled_from(rack_sets))
    brokers = [UsableBroker(b, draw(st.sampled_from(racks)), draw(st.booleans())) for b in ids]
    if all(b.fenced for b in brokers):
        first = brokers[0]
        brokers[0] = UsableBroker(first.broker_id, first.rack, False)
    return brokers


@settings(max_examples=150, deadline=None)
@given(clusters(), st.integers(1, 40), st.data(), st.integers(0, 2**48))
def test_placement_properties(
    brokers: list[UsableBroker], partitions: int, data: st.DataObject, seed: int
) -> None:
    rf = data.draw(st.integers(1, len(brokers)))
    placement = place_replicas(brokers, partitions, rf, JavaRandom(seed))
    by_id = {b.broker_id: b for b in brokers}
    unfenced = [b for b in brokers if not b.fenced]
    racks_available = {b.rack for b in brokers}
    assert len(placement) == partitions
    for replicas in placement:
        # RF distinct usable brokers; the leader is unfenced.
        assert len(replicas) == rf and len(set(replicas)) == rf
        assert all(r in by_id for r in replicas)
        assert not by_id[replicas[0]].fenced
    for replicas in placement[: len(unfenced)]:
        # Until the first reshuffle, a rack gives a fenced broker only once every unfenced broker of that
        # rack is in the partition. Spreading over racks comes first, as in Kafka, so a rack of fenced
        # brokers does get replicas. (After a reshuffle Kafka's per-rack epochs can be stale and a rack's
        # unfenced list reads as exhausted; the port keeps that quirk.)
        for r in replicas:
            if by_id[r].fenced:
                same_rack = {b.broker_id for b in unfenced if b.rack == by_id[r].rack}
                assert same_rack <= set(replicas)
        if len(racks_available) == 1 and rf <= len(unfenced):
            assert all(not by_id[r].fenced for r in replicas)
    for replicas in placement:
        # Racks spread: a partition covers as many racks as it can (one replica per rack per round).
        used = Counter(by_id[r].rack for r in replicas)
        if (
            rf <= len(racks_available)
            and rf <= len(unfenced)
            and len({b.rack for b in unfenced}) == len(racks_available)
        ):
            assert max(used.values()) == 1
    # Leaders spread over the unfenced brokers: with a single rack no broker leads more than its share
    # rounded up (striping visits every unfenced broker once per round).
    if len(racks_available) == 1:
        leaders = Counter(replicas[0] for replicas in placement)
        rounds = -(-partitions // len(unfenced))
        assert max(leaders.values()) <= rounds
