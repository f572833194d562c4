"""`/brokers/topics/<topic>` and its partitions' `state` znodes (Kafka's TopicZNode, TopicPartitionStateZNode)."""

from __future__ import annotations

import base64
import binascii
import functools
import re
import uuid
from collections.abc import Iterable, Sequence
from itertools import chain
from typing import Annotated, Any, Literal

import msgspec

from migrate.errors import ZnodeFormatError
from migrate.jvm import (
    java_string_hash,
    scala_map_order,
    scala_mutable_apply_order,
    scala_table_size_after,
    signed32,
    spread,
)
from migrate.zk.model import PartitionState, Topic
from migrate.zk.znodes.jackson import (
    INT32_MAX,
    INT32_MIN,
    bad,
    int_array,
    int_list,
    java_int_text,
    json_object,
    last_name,
    missing,
    parse_object,
    utf8,
    version_field,
)

_INT_ONLY = {int}
_Int32 = Annotated[int, msgspec.Meta(ge=INT32_MIN, le=INT32_MAX)]
_LIST_ONLY = {list}


def _parse_uuid(path: str, text: str) -> uuid.UUID:
    """Kafka's `Uuid.fromString`: URL-safe base64 of 16 bytes, padding optional."""
    if len(text) > 24 or not re.fullmatch(r"[A-Za-z0-9_-]*={0,2}", text):
        raise ZnodeFormatError(path, f"topic_id {text!r} is not a base64url UUID")
    try:
        raw = base64.urlsafe_b64decode(text.rstrip("=") + "=" * (-len(text.rstrip("=")) % 4))
    except (binascii.Error, ValueError):
        raise ZnodeFormatError(path, f"topic_id {text!r} is not a base64url UUID") from None
    if len(raw) != 16:
        raise ZnodeFormatError(path, f"topic_id {text!r} does not hold 16 bytes")
    return uuid.UUID(bytes=raw)


def format_uuid(u: uuid.UUID) -> str:
    """Kafka's `Uuid.toString`: URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode()


def _replica_map(path: str, obj: dict[str, Any], key: str) -> dict[int, list[int]]:
    raw = obj.get(key)
    if raw is None and key not in obj:
        return {}
    if type(raw) is not dict:
        bad(path, key, "an object", raw)
    if raw and _usual_replica_map(raw):
        return dict(zip(map(int, raw), raw.values(), strict=True))
    out: dict[int, list[int]] = {}
    for p, replicas in raw.items():
        out[java_int_text(path, f"partition key {p!r} in {key!r}", p)] = int_array(
            path, f"{key}.{p}", replicas
        )
    return out


def _usual_replica_map(raw: dict[str, Any]) -> bool:
    """Whether every key is 1 to 9 ASCII digits and every value a list of int32s, checked a whole topic at
    once (a topic of many partitions would otherwise cost a dozen calls per partition)."""
    keys = "".join(raw)
    if not (keys.isascii() and keys.isdigit() and min(map(len, raw)) >= 1 and max(map(len, raw)) <= 9):
        return False
    values = raw.values()
    if {*map(type, values)} != _LIST_ONLY:
        return False
    flat = list(chain.from_iterable(values))
    return not flat or ({*map(type, flat)} == _INT_ONLY and min(flat) >= INT32_MIN and max(flat) <= INT32_MAX)


def decode_topic(path: str, data: bytes | None) -> Topic:
    obj = parse_object(path, data)
    version = version_field(obj, path, (1, 2, 3))
    partitions = _replica_map(path, obj, "partitions")
    topic_id = None
    if "topic_id" in obj:
        raw = obj["topic_id"]
        if type(raw) is not str:
            bad(path, "topic_id", "a string", raw)
        topic_id = _parse_uuid(path, raw)
    # Kafka reads these only for assigned partitions, and an empty set is the same as none.
    adding = {p: r for p, r in _replica_map(path, obj, "adding_replicas").items() if r and p in partitions}
    removing = {
        p: r for p, r in _replica_map(path, obj, "removing_replicas").items() if r and p in partitions
    }
    return Topic(last_name(path), topic_id, partitions, adding, removing, version)


def _partition_map(partitions: dict[int, list[int]], keys: Iterable[int]) -> str:
    return "{" + ",".join(f'"{p}":{int_list(partitions[p])}' for p in _partition_order(keys)) + "}"


def encode_topic(t: Topic) -> bytes:
    values = {"version": str(t.version), "partitions": _partition_map(t.partitions, t.partitions)}
    if t.version == 1:
        return utf8(f"/brokers/topics/{t.name}", json_object(values, ("version", "partitions")))
    adding = [p for p in t.partitions if t.adding_replicas.get(p)]
    removing = [p for p in t.partitions if t.removing_replicas.get(p)]
    values["adding_replicas"] = _partition_map(t.adding_replicas, adding)
    values["removing_replicas"] = _partition_map(t.removing_replicas, removing)
    added = []
    if t.topic_id is not None:
        values["topic_id"] = f'"{format_uuid(t.topic_id)}"'
        added.append("topic_id")
    order = scala_mutable_apply_order(
        ("version", "partitions", "adding_replicas", "removing_replicas"), added
    )
    return utf8(f"/brokers/topics/{t.name}", json_object(values, order))


_STATE_KEYS = ("version", "leader", "leader_epoch", "controller_epoch", "isr")
_STATE_ORDER = scala_map_order(_STATE_KEYS)
_STATE_ORDER_RECOVERY = scala_map_order((*_STATE_KEYS, "leader_recovery_state"))


def decode_partition_state(path: str, data: bytes | None, *, zk_version: int = 0) -> PartitionState:
    state = fast_partition_state(data, zk_version)
    return state if state is not None else _checked_partition_state(path, data, zk_version)



class _StateZnode(msgspec.Struct):
    """The fields of a state znode Kafka reads, with their types and ranges (other keys are ignored)."""

    version: Literal[1]
    leader: _Int32
    leader_epoch: _Int32
    controller_epoch: _Int32
    isr: list[_Int32]
    leader_recovery_state: Literal[0, 1] = 0


_STATE_DECODER = msgspec.json.Decoder(_StateZnode)


def fast_partition_state(data: bytes | None, zk_version: int = 0) -> PartitionState | None:
    """The state of a well-formed state znode, else None (then `decode_partition_state` says what is wrong).

    msgspec decodes and checks the fields in one C pass, several times faster than the standard scanner
    and the checks in Python on a million small znodes. Whatever it refuses takes the checked path, so
    results and errors stay those of `_checked_partition_state`.
    """
    try:
        state = _STATE_DECODER.decode(data)  # type: ignore[arg-type]
    except (msgspec.DecodeError, TypeError):
        return None
    return PartitionState(
        state.leader, state.leader_epoch, state.isr, state.controller_epoch, state.leader_recovery_state, zk_version
    )


def _checked_partition_state(path: str, data: bytes | None, zk_version: int) -> PartitionState:
    obj = parse_object(path, data)
    try:
        version, leader, leader_epoch = obj["version"], obj["leader"], obj["leader_epoch"]
        controller_epoch, isr = obj["controller_epoch"], obj["isr"]
    except KeyError as e:
        missing(path, str(e.args[0]))
    if type(version) is not int:
        bad(path, "version", "an integer", version)
    if version != 1:
        raise ZnodeFormatError(path, f"unknown version {version} (known: 1)")
    for key, v in (
        ("leader", leader),
        ("leader_epoch", leader_epoch),
        ("controller_epoch", controller_epoch),
    ):
        if type(v) is not int or not INT32_MIN <= v <= INT32_MAX:
            bad(path, key, "a 32-bit integer", v)
    recovery = obj.get("leader_recovery_state", 0)
    if recovery not in (0, 1) or type(recovery) is not int:
        bad(path, "leader_recovery_state", "0 (RECOVERED) or 1 (RECOVERING)", recovery)
    return PartitionState(
        leader, leader_epoch, int_array(path, "isr", isr), controller_epoch, recovery, zk_version
    )


def _state_template(order: Sequence[str]) -> str:
    """A state znode's text in Scala's key order, each value a `str.format` field named by its key."""
    return "{{" + ",".join(f'"{key}":{{{key}}}' for key in order) + "}}"


# Formatted in one call: an election of 200,000 partitions dual-writes 200,000 of these while ZooKeeper waits.
_STATE_TEMPLATE = _state_template(_STATE_ORDER)
_STATE_TEMPLATE_RECOVERY = _state_template(_STATE_ORDER_RECOVERY)


def encode_partition_state(s: PartitionState) -> bytes:
    template = _STATE_TEMPLATE_RECOVERY if s.leader_recovery_state else _STATE_TEMPLATE
    return template.format(
        version=1, leader=s.leader, leader_epoch=s.leader_epoch, controller_epoch=s.controller_epoch,
        isr=int_list(s.isr), leader_recovery_state=s.leader_recovery_state,
    ).encode()  # fmt: skip


# Decimal partition keys: cache the mutable-map hash of small ids (they repeat across topics).
_PARTITION_KEY_HASH: dict[int, int] = {}


def _partition_order(partitions: Iterable[int]) -> Sequence[int]:
    """Order of a Scala `mutable.Map[String, _]()` keyed by these partition ids as decimal strings."""
    ids = tuple(partitions)
    if len(ids) <= _CACHED_ORDER_MAX:
        return _small_partition_order(ids)
    return _order_partitions(ids)


# Most topics have a few partitions numbered from 0: the same small key sets come back on every write.
_CACHED_ORDER_MAX = 64


@functools.lru_cache(maxsize=256)
def _small_partition_order(ids: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(_order_partitions(ids))


def _order_partitions(ids: Sequence[int]) -> list[int]:
    size = scala_table_size_after(len(ids), 16)
    cache = _PARTITION_KEY_HASH
    keyed = []
    for i, p in enumerate(ids):
        h = cache.get(p)
        if h is None:
            h = spread(java_string_hash(str(p)))
            if 0 <= p < 1 << 16:
                cache[p] = h
        keyed.append((h & (size - 1), signed32(h), i, p))
    keyed.sort()
    return [k[3] for k in keyed]
