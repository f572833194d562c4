"""What the JVM computes that Kafka's bytes depend on: `String.hashCode`, the iteration orders of Java and
Scala 2.13 hash maps, and Java's double text.

One decision for every caller: `java_string_hash` returns the hash as an unsigned 32-bit value (the bit
pattern Java's `>>>` and bucket masks work on); `signed32` turns it into the `int` Java prints.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Sequence
from decimal import ROUND_HALF_EVEN, Decimal
from typing import TypeVar

_M32 = 0xFFFFFFFF
_Key = TypeVar("_Key", bound=str | None)

# =================================================================== String.hashCode


def java_string_hash(s: str) -> int:
    """Java's `String.hashCode` as an unsigned 32-bit value (over UTF-16 code units)."""
    h = 0
    if s.isascii():
        for c in s.encode("ascii"):
            h = (31 * h + c) & _M32
        return h
    units = s.encode("utf-16-be", errors="surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & _M32
    return h


def signed32(x: int) -> int:
    """The Java `int` of an unsigned 32-bit value."""
    return x - 0x100000000 if x & 0x80000000 else x


def spread(h: int) -> int:
    """`h ^ (h >>> 16)`: Java HashMap's hash and Scala mutable.HashMap's improveHash."""
    return h ^ (h >> 16)


# =================================================================== Scala 2.13 maps


def _champ_improve(h: int) -> int:
    """scala.collection.Hashing.improve, on unsigned 32-bit values."""
    h = (h + ((h << 9) & _M32 ^ _M32)) & _M32
    h ^= h >> 14
    h = (h + (h << 4)) & _M32
    return h ^ (h >> 10)


@functools.lru_cache(maxsize=4096)
def scala_map_order(keys: tuple[str, ...]) -> tuple[str, ...]:
    """Iteration order of a Scala 2.13 immutable Map built from `keys` in this order.

    Up to four entries Map1..Map4 keep insertion order; larger maps are CHAMP tries: at each level the
    entries that end there (by 5 hash bits, ascending), then the sub-tries (ascending), depth first.
    """
    if len(keys) <= 4:
        return keys
    out: list[str] = []

    def walk(items: list[tuple[int, str]], shift: int) -> None:
        if shift >= 32:
            out.extend(k for _, k in items)  # full hash collision: insertion order
            return
        groups: dict[int, list[tuple[int, str]]] = {}
        for h, k in items:
            groups.setdefault((h >> shift) & 31, []).append((h, k))
        masks = sorted(groups)
        out.extend(groups[m][0][1] for m in masks if len(groups[m]) == 1)
        for m in masks:
            if len(groups[m]) > 1:
                walk(groups[m], shift + 5)

    walk([(_champ_improve(java_string_hash(k)), k) for k in keys], 0)
    return tuple(out)


def _scala_table_size(capacity: int) -> int:
    """scala.collection.mutable.HashMap.tableSizeFor."""
    return min((1 << (max(capacity - 1, 4).bit_length() - 1)) * 2, 1 << 30)


def scala_table_size_after(count: int, initial_capacity: int) -> int:
    """Table size of a Scala 2.13 `mutable.HashMap(initial_capacity)` after `count` puts (grows at 3/4 full)."""
    size = _scala_table_size(initial_capacity)
    threshold = int(size * 0.75)
    for n in range(count):
        if n + 1 >= threshold:
            size *= 2
            threshold = int(size * 0.75)
    return size


def scala_mutable_map_order(keys: Sequence[str], initial_capacity: int = 16) -> list[str]:
    """Iteration order of a Scala 2.13 `mutable.HashMap`: by bucket, then by improved hash (signed).

    `initial_capacity` is 16 for `mutable.Map()`; `mutable.Map(k1 -> v1, ...)` with n pairs starts at
    `((n + 1) / 0.75).toInt`.
    """
    size = scala_table_size_after(len(keys), initial_capacity)
    hashes = [spread(java_string_hash(k)) for k in keys]
    order = sorted(range(len(keys)), key=lambda i: (hashes[i] & (size - 1), signed32(hashes[i]), i))
    return [keys[i] for i in order]


def scala_mutable_apply_order(keys: Sequence[str], added: Sequence[str] = ()) -> list[str]:
    """Order of `mutable.Map(keys...)` followed by `+=` of `added`."""
    return list(_scala_mutable_apply_order(tuple(keys), tuple(added)))


@functools.lru_cache(maxsize=256)
def _scala_mutable_apply_order(keys: tuple[str, ...], added: tuple[str, ...]) -> tuple[str, ...]:
    # A pure function of the key names, asked for the same few key sets on every znode written.
    return tuple(scala_mutable_map_order([*keys, *added], int((len(keys) + 1) / 0.75)))


# =================================================================== Java maps


JAVA_HASH_MAP_CAPACITY = 16


def java_hash_map_capacity(count: int, initial_capacity: int | None = None) -> int:
    """Table size of `new HashMap<>(initial_capacity)` (the default constructor when None) after `count` puts."""
    if count == 0:
        return 0
    capacity = JAVA_HASH_MAP_CAPACITY if initial_capacity is None else _table_size_for(initial_capacity)
    threshold = int(capacity * 0.75)
    for size in range(1, count + 1):
        if size > threshold:
            old_capacity = capacity
            capacity *= 2
            threshold = threshold * 2 if old_capacity >= JAVA_HASH_MAP_CAPACITY else int(capacity * 0.75)
    return capacity


def _table_size_for(capacity: int) -> int:
    """HashMap.tableSizeFor: the power of two at or above `capacity` (at least 1)."""
    size = 1
    while size < capacity:
        size <<= 1
    return size


def java_hash_map_order(keys: Iterable[_Key], initial_capacity: int | None = None) -> list[_Key]:
    """Iteration order of a `java.util.HashMap` filled with `keys` in this order (repeats keep their first place).

    None stands for a key whose hashCode is 0 (null, `Optional.empty()`). Buckets are visited by index; a
    bucket keeps insertion order (resizes split buckets stably). Tree bins (8+ colliding keys) are not modelled.
    """
    inserted = list(dict.fromkeys(keys))
    mask = java_hash_map_capacity(len(inserted), initial_capacity) - 1
    return sorted(inserted, key=lambda k: 0 if k is None else spread(java_string_hash(k)) & mask)


def java_properties_order(keys: Sequence[str], java8: bool | None = None) -> list[str]:
    """Iteration order of a `java.util.Properties` holding `keys`, keys in one bucket keeping this order.

    Java 9+ backs Properties with a ConcurrentHashMap (16 buckets, doubling at 3/4 full, ascending);
    Java 8 with a Hashtable (11 buckets, 2n+1 growth, iterated from the last bucket down). Within a bucket
    the JVM's order depends on the caller's insertion order, which the JSON alone does not tell, so the
    given order is kept there. `java8=None` keeps the whole given order when either JVM could have
    produced it (so decode→encode reproduces Kafka's bytes) and otherwise uses the Java 9+ order.
    """
    if java8 is None:
        keys = list(keys)
        if keys == _properties_sort(keys, True) or keys == (modern := _properties_sort(keys, False)):
            return keys
        return modern
    return _properties_sort(keys, java8)


def _properties_sort(keys: Sequence[str], java8: bool) -> list[str]:
    n = len(keys)
    if java8:
        cap = 11
        while n > int(cap * 0.75):
            cap = cap * 2 + 1
        return sorted(keys, key=lambda k: -((java_string_hash(k) & 0x7FFFFFFF) % cap))
    size = 16
    while n >= size - (size >> 2):
        size *= 2
    return sorted(keys, key=lambda k: spread(java_string_hash(k)) & (size - 1))


def concurrent_hash_map_order(keys: list[str]) -> list[str]:
    """Iteration order of a Java 9-17 Properties (a ConcurrentHashMap(8)) filled in this key order.

    Bins are visited in index order; a bin lists keys in insertion order, and a resize (at 3/4 full)
    splits each bin the way ConcurrentHashMap.transfer does. Bins of 8+ colliding keys are not modelled.
    """
    size = 16
    table: list[list[tuple[int, str]]] = [[] for _ in range(size)]
    for count, key in enumerate(keys, start=1):
        h = java_string_hash(key)
        spread = (h ^ (h >> 16)) & 0x7FFFFFFF
        table[spread & (size - 1)].append((spread, key))
        if count >= size - (size >> 2):
            grown: list[list[tuple[int, str]]] = [[] for _ in range(2 * size)]
            for index, nodes in enumerate(table):
                if not nodes:
                    continue
                run_bit, last_run = nodes[0][0] & size, 0
                for j in range(1, len(nodes)):
                    if nodes[j][0] & size != run_bit:
                        run_bit, last_run = nodes[j][0] & size, j
                low = nodes[last_run:] if run_bit == 0 else []
                high = nodes[last_run:] if run_bit != 0 else []
                for node in nodes[:last_run]:  # copied by prepending, so they come out reversed
                    (high if node[0] & size else low).insert(0, node)
                grown[index], grown[index + size] = low, high
            table, size = grown, 2 * size
    return [key for nodes in table for _, key in nodes]


# =================================================================== Java number text


def java_double_to_string(x: float) -> str:
    """Java's `Double.toString` (shortest digits, as JDK 19+; `1.0E7`, `1.0E-4` outside [1e-3, 1e7))."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    digits, exp10 = _shortest_digits(abs(x))
    if 1e-3 <= abs(x) < 1e7:
        if exp10 >= 0:
            whole = digits[: exp10 + 1].ljust(exp10 + 1, "0")
            frac = digits[exp10 + 1 :] or "0"
        else:
            whole, frac = "0", "0" * (-exp10 - 1) + digits
        return f"{sign}{whole}.{frac}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exp10}"


def _shortest_digits(x: float) -> tuple[str, int]:
    """Significant digits and decimal exponent Java prints for positive `x`.

    Java uses at least two digits, choosing among two-digit decimals the one closest to `x` (this differs
    from Python's one-digit shortest form only for subnormals such as 4.9E-324).
    """
    t = Decimal(repr(x)).as_tuple()
    raw = "".join(map(str, t.digits))
    assert isinstance(t.exponent, int)
    exp10 = t.exponent + len(raw) - 1
    digits = raw.rstrip("0") or "0"
    if len(digits) == 1:
        exact = Decimal(x)
        two = exact.scaleb(-exact.adjusted() + 1).quantize(Decimal(1), rounding=ROUND_HALF_EVEN)
        candidate = Decimal(int(two)).scaleb(exact.adjusted() - 1)
        if float(candidate) == x:
            t2 = candidate.normalize().as_tuple()
            digits = "".join(map(str, t2.digits)).rstrip("0") or "0"
            assert isinstance(t2.exponent, int)
            exp10 = t2.exponent + len(t2.digits) - 1
    return digits, exp10


_JAVA_DOUBLE_RE = re.compile(
    r"(?P<num>[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?))[fFdD]?"
)


_JAVA_TRIM = "".join(map(chr, range(33)))  # String.trim() removes every char <= ' '


def parse_java_double(text: str) -> float | None:
    """Java's `Double.parseDouble` for decimal input (surrounding controls/spaces trimmed); None if invalid."""
    m = _JAVA_DOUBLE_RE.fullmatch(text.strip(_JAVA_TRIM))
    if m is None:
        return None
    num = m.group("num")
    word = num.lstrip("+-")
    if word in ("NaN", "Infinity"):
        if m.group(0) != num:
            return None  # no f/d suffix after NaN or Infinity
        return math.nan if word == "NaN" else -math.inf if num.startswith("-") else math.inf
    return float(num)


def java_cast_to_integer(x: float, bits: int) -> int:
    """Java's saturating `(long)` / `(int)` cast of a double."""
    if math.isnan(x):
        return 0
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    if x >= hi:
        return hi
    if x <= lo:
        return lo
    return int(x)
