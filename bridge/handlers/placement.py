"""Kafka 3.9's StripedReplicaPlacer: rack-aware striped placement of new partitions' replicas.

The placer sorts the usable brokers (registered, not in controlled shutdown) into racks, each with an
unfenced and a fenced list, and hands out replicas round-robin over racks and over brokers within a
rack, starting at random offsets. Fenced brokers are used only when the unfenced ones run out; a
partition's first replica (its leader) is always unfenced. The random source is injected: `JavaRandom`
reproduces java.util.Random, so a seeded placer yields exactly what Kafka's placer yields for that
Random, including the order in which Kafka's HashMap of racks consumes random numbers.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from migrate.errors import InvalidRequestError
from migrate.jvm import java_hash_map_order
from migrate.kraft.image import MetadataImage

_MULTIPLIER = 0x5DEECE66D
_ADDEND = 0xB
_MASK48 = (1 << 48) - 1


def _int32(value: int) -> int:
    value &= 0xFFFF_FFFF
    return value - (1 << 32) if value >= 1 << 31 else value


class PlacementRandom(Protocol):
    """The two java.util.Random operations the placer uses."""

    def next_int(self, bound: int) -> int: ...

    def shuffle(self, items: list[int]) -> None: ...


class JavaRandom:
    """java.util.Random: the 48-bit linear congruential generator, nextInt(bound) and Collections.shuffle."""

    def __init__(self, seed: int | None = None) -> None:
        if seed is None:
            seed = int.from_bytes(os.urandom(8), "big")
        self._seed = (seed ^ _MULTIPLIER) & _MASK48

    def _next(self, bits: int) -> int:
        """Random.next(bits): the top `bits` bits of the next state, as a Java int."""
        self._seed = (self._seed * _MULTIPLIER + _ADDEND) & _MASK48
        return _int32(self._seed >> (48 - bits))

    def next_int(self, bound: int) -> int:
        """Random.nextInt(bound), including its rejection loop for bounds that are not powers of two."""
        if bound <= 0:
            raise ValueError(f"bound must be positive, not {bound}")
        r = self._next(31)
        m = bound - 1
        if bound & m == 0:
            return _int32((bound * r) >> 31)
        u = r
        while True:
            r = u % bound
            if _int32(u - r + m) >= 0:
                return r
            u = self._next(31)

    def shuffle(self, items: list[int]) -> None:
        """Collections.shuffle(list, random) for a random-access list."""
        for i in range(len(items), 1, -1):
            j = self.next_int(i)
            items[i - 1], items[j] = items[j], items[i - 1]


class InvalidReplicationFactorError(InvalidRequestError):
    """Kafka's InvalidReplicationFactorException from the placer; the message is Kafka's."""


@dataclass(frozen=True, slots=True)
class UsableBroker:
    """A broker the placer may use (Kafka's UsableBroker)."""

    broker_id: int
    rack: str | None
    fenced: bool


def usable_brokers(image: MetadataImage) -> list[UsableBroker]:
    """Registered brokers not in controlled shutdown, by id (Kafka's BrokerHeartbeatManager.usableBrokers)."""
    brokers = image.cluster.brokers
    return [
        UsableBroker(broker_id, brokers[broker_id].rack, brokers[broker_id].fenced)
        for broker_id in sorted(brokers)
        if not brokers[broker_id].in_controlled_shutdown
    ]


@dataclass(slots=True)
class _BrokerList:
    """Brokers of one rack and fencing state, iterated from a rotating offset once per epoch."""

    brokers: list[int] = field(default_factory=list)
    index: int = 0
    offset: int = 0
    epoch: int = 0

    def initialize(self, rng: PlacementRandom) -> None:
        if self.brokers:
            self.brokers.sort()
            self.offset = rng.next_int(len(self.brokers))

    def next(self, epoch: int) -> int:
        """The next broker in this epoch, or -1 when every broker was returned in it."""
        size = len(self.brokers)
        if size == 0:
            return -1
        if self.epoch != epoch:
            self.epoch = epoch
            self.index = 0
            self.offset = (self.offset + 1) % size
        if self.index >= size:
            return -1
        broker = self.brokers[(self.index + self.offset) % size]
        self.index += 1
        return broker


@dataclass(slots=True)
class _Rack:
    fenced: _BrokerList = field(default_factory=_BrokerList)
    unfenced: _BrokerList = field(default_factory=_BrokerList)

    def next(self, epoch: int) -> int:
        result = self.unfenced.next(epoch)
        return result if result >= 0 else self.fenced.next(epoch)


def _rack_sort_key(rack: str | None) -> tuple[bool, bytes]:
    """OptionalStringComparator: no rack first, then String.compareTo (UTF-16 code unit) order."""
    return (rack is not None, b"" if rack is None else rack.encode("utf-16-be"))


def _raise_if_non_positive(replication_factor: int) -> None:
    if replication_factor <= 0:
        raise InvalidReplicationFactorError(
            f"Invalid replication factor {replication_factor}: the replication factor must be positive."
        )


def _raise_if_all_fenced(num_unfenced: int) -> None:
    if num_unfenced == 0:
        raise InvalidReplicationFactorError("All brokers are currently fenced.")


def _raise_if_too_few(replication_factor: int, num_total: int) -> None:
    if replication_factor > num_total:
        raise InvalidReplicationFactorError(
            f"The target replication factor of {replication_factor} cannot be reached because only "
            f"{num_total} broker(s) are registered."
        )


class RackList:
    """Kafka's StripedReplicaPlacer.RackList: the racks, their brokers and the striping state."""

    def __init__(self, rng: PlacementRandom, brokers: Iterable[UsableBroker]) -> None:
        self._rng = rng
        self._racks: dict[str | None, _Rack] = {}
        self.num_total_brokers = 0
        self.num_unfenced_brokers = 0
        for broker in brokers:
            rack = self._racks.setdefault(broker.rack, _Rack())
            if broker.fenced:
                rack.fenced.brokers.append(broker.broker_id)
            else:
                self.num_unfenced_brokers += 1
                rack.unfenced.brokers.append(broker.broker_id)
            self.num_total_brokers += 1
        # Kafka iterates its HashMap of racks here; the order decides which rack draws which number.
        self._hash_order = java_hash_map_order(self._racks)  # a HashMap<Optional<String>, ?>
        for name in self._hash_order:
            self._racks[name].fenced.initialize(rng)
            self._racks[name].unfenced.initialize(rng)
        self.rack_names: list[str | None] = sorted(self._racks, key=_rack_sort_key)
        self._epoch = 0
        self._offset = rng.next_int(len(self.rack_names)) if self.rack_names else 0

    def place(self, replication_factor: int) -> list[int]:
        """Replicas for one partition: an unfenced leader, then one broker per rack in turn."""
        _raise_if_non_positive(replication_factor)
        _raise_if_too_few(replication_factor, self.num_total_brokers)
        _raise_if_all_fenced(self.num_unfenced_brokers)
        # After as many partitions as there are unfenced brokers, reshuffle to avoid repeating the same
        # assignments (never with a single unfenced broker: the epoch would never advance).
        if self._epoch == self.num_unfenced_brokers and self.num_unfenced_brokers > 1:
            self._shuffle()
            self._epoch = 0
        if self._offset == len(self.rack_names):
            self._offset = 0
        racks = [self._racks[name] for name in self.rack_names]
        first_rack = self._offset
        while True:
            leader = racks[first_rack].unfenced.next(self._epoch)
            if leader >= 0:
                break
            first_rack = (first_rack + 1) % len(racks)
        replicas = [leader]
        rack_index = self._offset
        for _ in range(1, replication_factor):
            result = -1
            while result < 0:
                if rack_index == first_rack:
                    first_rack = -1  # the leader's rack already gave a replica this round
                else:
                    result = racks[rack_index].next(self._epoch)
                rack_index = (rack_index + 1) % len(racks)
            replicas.append(result)
        self._epoch += 1
        self._offset += 1
        return replicas

    def _shuffle(self) -> None:
        names = self.rack_names
        order = list(range(len(names)))
        self._rng.shuffle(order)
        self.rack_names = [names[i] for i in order]
        for name in self._hash_order:
            self._rng.shuffle(self._racks[name].fenced.brokers)
            self._rng.shuffle(self._racks[name].unfenced.brokers)


def place_replicas(
    brokers: Iterable[UsableBroker], num_partitions: int, replication_factor: int, rng: PlacementRandom
) -> list[list[int]]:
    """Replica lists for `num_partitions` new partitions (Kafka's StripedReplicaPlacer.place).

    Raises InvalidReplicationFactorError with Kafka's message when the factor is not positive, no broker
    is unfenced, or fewer brokers (fenced included) are usable than the factor asks for.
    """
    racks = RackList(rng, brokers)
    _raise_if_non_positive(replication_factor)
    _raise_if_all_fenced(racks.num_unfenced_brokers)
    _raise_if_too_few(replication_factor, racks.num_total_brokers)
    return [racks.place(replication_factor) for _ in range(num_partitions)]
