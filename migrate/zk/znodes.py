"""Decode and encode the data of every znode Kafka writes, as Kafka 3.9 writes it.

Kafka serialises Java/Scala maps with a default Jackson ObjectMapper, so the key order of its JSON is the
iteration order of the map it built. The `*_order` helpers reproduce those orders (Scala 2.13 immutable
and mutable HashMap, Java HashMap, java.util.Properties) so the encoders give Kafka's exact bytes wherever
Kafka's own output does not depend on its caller. Decoders raise only `ZnodeFormatError`.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import math
import re
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NoReturn

from migrate.errors import InvalidRequestError, ZnodeFormatError
from migrate.jvm import (
    java_cast_to_integer,
    java_double_to_string,
    java_hash_map_order,
    java_properties_order,
    java_string_hash,
    parse_java_double,
    scala_map_order,
    scala_mutable_apply_order,
    scala_table_size_after,
    signed32,
    spread,
)
from migrate.zk.model import (
    SCRAM_MECHANISMS,
    SECURITY_PROTOCOLS,
    AclChangeNotification,
    AclEntry,
    AclOperation,
    AclPermissionType,
    AclResource,
    BrokerEndpoint,
    BrokerRegistration,
    ClientQuotaConfig,
    ConfigChangeNotification,
    ControllerEpoch,
    ControllerRegistration,
    DelegationToken,
    EntityConfig,
    FeatureRange,
    FeatureStatus,
    FinalizedFeatures,
    LegacyReassignment,
    LogDirEvent,
    MigrationState,
    PartitionList,
    PartitionState,
    PatternType,
    ProducerIdBlock,
    ReplicaReassignment,
    ResourcePattern,
    ResourceType,
    ScramCredential,
    Topic,
    TopicPartition,
    pascal_case,
)
from migrate.zk.paths import (
    CONFIG,
    KAFKA_ACL,
    KAFKA_ACL_EXTENDED,
    desanitize,
    sanitize,
)

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INT16_MAX = 2**15 - 1
_M32 = 0xFFFFFFFF

# QuotaConfigs: the ConfigDef type of every client-quota key (decides how Kafka prints the value).
QUOTA_KEY_TYPES = {
    "producer_byte_rate": "LONG",
    "consumer_byte_rate": "LONG",
    "request_percentage": "DOUBLE",
    "controller_mutation_rate": "DOUBLE",
    "connection_creation_rate": "INT",
}

# =================================================================== JVM map iteration orders




























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


# =================================================================== JSON writing (Jackson's rules)

_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f]')
_ESCAPES = {i: f"\\u{i:04X}" for i in range(32)} | {
    8: "\\b",
    9: "\\t",
    10: "\\n",
    12: "\\f",
    13: "\\r",
    34: '\\"',
    92: "\\\\",
}


def json_string(s: str) -> str:
    """A JSON string as Jackson writes it: short escapes, `\\u00XX` (upper-case) for other controls, no `\\/`."""
    if _NEEDS_ESCAPE.search(s) is None:
        return f'"{s}"'
    return '"' + s.translate(_ESCAPES) + '"'


def _jnull(s: str | None) -> str:
    return "null" if s is None else json_string(s)


def _int_list(xs: Iterable[int]) -> str:
    return "[" + ",".join(map(str, xs)) + "]"


def _str_list(xs: Iterable[str]) -> str:
    return "[" + ",".join(map(json_string, xs)) + "]"


def _object(values: dict[str, str], order: Iterable[str]) -> str:
    """`{...}` with the already-encoded `values`, keys in `order`."""
    return "{" + ",".join(f"{json_string(k)}:{values[k]}" for k in order) + "}"


def _utf8(path: str, text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ZnodeFormatError(
            path, f"cannot encode: string has an unpaired surrogate at {e.start}"
        ) from None


# =================================================================== JSON reading


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not valid JSON")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
_SCAN: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]


def _show(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _text(path: str, data: bytes | None) -> str:
    if data is None:
        raise ZnodeFormatError(path, "has no data (null)")
    try:
        return str(data, "utf-8")
    except UnicodeDecodeError as e:
        raise ZnodeFormatError(path, f"data is not UTF-8 (bad byte at offset {e.start})") from None


def _parse(path: str, data: bytes | None) -> Any:
    text = _text(path, data)
    try:
        try:  # fast path: the C scanner on text that is exactly one JSON value
            value, end = _SCAN(text, 0)
            if end == len(text):
                return value
        except StopIteration:
            pass
        return _DECODER.decode(text)  # whitespace around the value, or the error message
    except ValueError as e:
        raise ZnodeFormatError(path, f"invalid JSON: {e}") from None
    except RecursionError:
        raise ZnodeFormatError(path, "invalid JSON: nested too deeply") from None


def _parse_object(path: str, data: bytes | None) -> dict[str, Any]:
    obj = _parse(path, data)
    if type(obj) is not dict:
        raise ZnodeFormatError(path, f"expected a JSON object, got {_show(obj)}")
    return obj


def _missing(path: str, key: str) -> NoReturn:
    raise ZnodeFormatError(path, f"missing field {key!r}")


def _bad(path: str, key: str, want: str, value: Any) -> NoReturn:
    raise ZnodeFormatError(path, f"field {key!r} must be {want}, got {_show(value)}")


def _check_int(path: str, key: str, v: Any, lo: int = INT32_MIN, hi: int = INT32_MAX) -> int:
    if type(v) is not int or not lo <= v <= hi:
        _bad(path, key, "a 32-bit integer" if hi == INT32_MAX else f"an integer in [{lo}, {hi}]", v)
    return v


def _int(obj: dict[str, Any], key: str, path: str, lo: int = INT32_MIN, hi: int = INT32_MAX) -> int:
    if key not in obj:
        _missing(path, key)
    return _check_int(path, key, obj[key], lo, hi)


def _long(obj: dict[str, Any], key: str, path: str) -> int:
    return _int(obj, key, path, INT64_MIN, INT64_MAX)


def _opt_int(obj: dict[str, Any], key: str, path: str) -> int | None:
    return None if key not in obj else _check_int(path, key, obj[key])


def _str(obj: dict[str, Any], key: str, path: str) -> str:
    if key not in obj:
        _missing(path, key)
    v = obj[key]
    if type(v) is not str:
        _bad(path, key, "a string", v)
    return v


_INT_ONLY = {int}


def _ints(path: str, key: str, v: Any) -> list[int]:
    if type(v) is not list or (
        v and ({*map(type, v)} != _INT_ONLY or min(v) < INT32_MIN or max(v) > INT32_MAX)
    ):
        _bad(path, key, "an array of 32-bit integers", v)
    return v


def _strs(path: str, key: str, v: Any) -> list[str]:
    if type(v) is not list or not all(type(x) is str for x in v):
        _bad(path, key, "an array of strings", v)
    return v


def _version(obj: dict[str, Any], path: str, allowed: Iterable[int]) -> int:
    version = _int(obj, "version", path)
    if version not in allowed:
        raise ZnodeFormatError(path, f"unknown version {version} (known: {', '.join(map(str, allowed))})")
    return version


_JAVA_INT_RE = re.compile(r"[+-]?[0-9]+")


def _java_int_text(path: str, what: str, text: str, lo: int = INT32_MIN, hi: int = INT32_MAX) -> int:
    """Java's Integer/Long.parseInt on `text` (sign, ASCII digits, in range)."""
    if len(text) > 21 or not _JAVA_INT_RE.fullmatch(text) or not lo <= (value := int(text)) <= hi:
        raise ZnodeFormatError(
            path, f"{what} must be a decimal {'long' if hi > INT32_MAX else 'int'}, got {text!r}"
        )
    return value


def _opt_long_text(obj: dict[str, Any], key: str, path: str) -> int | None:
    """A long that Kafka writes as a JSON string (timestamps)."""
    if key not in obj:
        return None
    v = obj[key]
    if type(v) is not str:
        _bad(path, key, "a string holding a number", v)
    return _java_int_text(path, f"field {key!r}", v, INT64_MIN, INT64_MAX)


def _last_name(path: str) -> str:
    return path.rpartition("/")[2]


def _id_from_path(path: str, what: str) -> int:
    return _java_int_text(path, what, _last_name(path))


# =================================================================== Java number formatting














def kafka_quota_text(key: str, value: float) -> str:
    """How Kafka's KRaft dual-write prints a client-quota value (integer text for LONG/INT keys)."""
    kind = QUOTA_KEY_TYPES.get(key, "DOUBLE")
    if kind == "DOUBLE":
        return java_double_to_string(value)
    whole = java_cast_to_integer(value + 1e-6, 64 if kind == "LONG" else 32)
    if not abs(whole - value) <= 1e-6:
        raise InvalidRequestError(f"client quota {key} must be a whole number, got {value!r}")
    return str(whole)


# =================================================================== /controller and /controller_epoch


def decode_controller(
    path: str, data: bytes | None, *, zk_version: int = 0, ephemeral_owner: int = 0
) -> ControllerRegistration:
    obj = _parse_object(path, data)
    version = _version(obj, path, (1, 2))
    return ControllerRegistration(
        broker_id=_int(obj, "brokerid", path),
        timestamp=_opt_long_text(obj, "timestamp", path),
        kraft_controller_epoch=_opt_int(obj, "kraftControllerEpoch", path),
        version=version,
        zk_version=zk_version,
        ephemeral_owner=ephemeral_owner,
    )


def encode_controller(c: ControllerRegistration) -> bytes:
    # Scala Map4: insertion order.
    parts = [f'"version":{c.version}', f'"brokerid":{c.broker_id}']
    if c.timestamp is not None:
        parts.append(f'"timestamp":"{c.timestamp}"')
    if c.kraft_controller_epoch is not None:
        parts.append(f'"kraftControllerEpoch":{c.kraft_controller_epoch}')
    return ("{" + ",".join(parts) + "}").encode()


def decode_controller_epoch(path: str, data: bytes | None, *, zk_version: int = 0) -> ControllerEpoch:
    return ControllerEpoch(_java_int_text(path, "controller epoch", _text(path, data)), zk_version)


def encode_controller_epoch(e: ControllerEpoch) -> bytes:
    return str(e.epoch).encode()


# =================================================================== /brokers/ids/<id>

# SocketServerConfigs.URI_PARSE_REGEXP (Java `matches()`: the whole string).
_ENDPOINT_RE = re.compile(r"(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)")
_DEFAULT_PROTOCOL_MAP = {p: p for p in SECURITY_PROTOCOLS}


def decode_broker(
    path: str, data: bytes | None, *, czxid: int = 0, zk_version: int = 0, ephemeral_owner: int = 0
) -> BrokerRegistration:
    broker_id = _id_from_path(path, "broker id")
    obj = _parse_object(path, data)
    version = _version(obj, path, (1, 2, 3, 4, 5))
    jmx_port = _int(obj, "jmx_port", path)
    if version == 1:
        host, port = _str(obj, "host", path), _int(obj, "port", path)
        endpoints = [BrokerEndpoint("PLAINTEXT", host, port, "PLAINTEXT")]
    else:
        endpoints = _decode_endpoints(path, obj)
    rack = obj.get("rack")
    if rack is not None and type(rack) is not str:
        _bad(path, "rack", "a string or null", rack)
    return BrokerRegistration(
        broker_id=broker_id,
        endpoints=endpoints,
        jmx_port=jmx_port,
        timestamp=_opt_long_text(obj, "timestamp", path),
        rack=rack,
        features=_decode_supported_features(path, obj.get("features")),
        version=version,
        czxid=czxid,
        zk_version=zk_version,
        ephemeral_owner=ephemeral_owner,
    )


def _decode_endpoints(path: str, obj: dict[str, Any]) -> list[BrokerEndpoint]:
    key = "listener_security_protocol_map"
    if key in obj:
        raw = obj[key]
        if type(raw) is not dict or not all(type(v) is str for v in raw.values()):
            _bad(path, key, "an object of strings", raw)
        protocols: dict[str, str] = {}
        for listener, protocol in raw.items():
            if protocol.upper() not in SECURITY_PROTOCOLS:
                raise ZnodeFormatError(
                    path, f"listener {listener!r} has unknown security protocol {protocol!r}"
                )
            protocols[listener] = protocol.upper()
    else:
        protocols = _DEFAULT_PROTOCOL_MAP
    if "endpoints" not in obj:
        _missing(path, "endpoints")
    out = []
    for text in _strs(path, "endpoints", obj["endpoints"]):
        m = _ENDPOINT_RE.fullmatch(text)
        if m is None:
            raise ZnodeFormatError(path, f"cannot parse endpoint {text!r}")
        listener = m.group(1).upper()
        protocol = protocols.get(listener)
        if protocol is None:
            raise ZnodeFormatError(path, f"no security protocol defined for listener {listener!r}")
        port = _java_int_text(path, f"port of endpoint {text!r}", m.group(3))
        out.append(BrokerEndpoint(listener, m.group(2) or None, port, protocol))
    return out


def _decode_supported_features(path: str, raw: Any) -> dict[str, FeatureRange]:
    if raw is None:
        return {}
    if type(raw) is not dict:
        _bad(path, "features", "an object", raw)
    out = {}
    for name, rng in raw.items():
        where = f"features.{name}"
        if type(rng) is not dict:
            _bad(path, where, "an object", rng)
        lo = _int(rng, "min_version", path, 0, INT16_MAX)
        hi = _int(rng, "max_version", path, 0, INT16_MAX)
        if hi < lo:
            raise ZnodeFormatError(path, f"{where}: max_version {hi} < min_version {lo}")
        out[name] = FeatureRange(lo, hi)
    return out


def encode_broker(b: BrokerRegistration) -> bytes:
    path = f"/brokers/ids/{b.broker_id}"
    plain = b.plaintext_endpoint
    values = {
        "version": str(b.version),
        "host": "null" if plain is None else _jnull(plain.host),
        "port": str(-1 if plain is None else plain.port),
        "jmx_port": str(b.jmx_port),
    }
    initial = ["version", "host", "port"]
    if b.version >= 2:
        values["endpoints"] = _str_list(e.connection_string for e in b.endpoints)
        initial.append("endpoints")
    initial.append("jmx_port")
    if b.timestamp is not None:
        values["timestamp"] = f'"{b.timestamp}"'
        initial.append("timestamp")
    added = []
    if b.version >= 3 and b.rack is not None:
        values["rack"] = json_string(b.rack)
        added.append("rack")
    if b.version >= 4:
        protocols = {e.listener: e.security_protocol for e in b.endpoints}
        order = scala_map_order(tuple(protocols))
        values["listener_security_protocol_map"] = _object(
            {k: json_string(v) for k, v in protocols.items()}, order
        )
        added.append("listener_security_protocol_map")
    if b.version >= 5:
        ranges = {
            name: f'{{"min_version":{r.min_version},"max_version":{r.max_version}}}'
            for name, r in b.features.items()
        }
        values["features"] = _object(ranges, java_hash_map_order(list(ranges)))
        added.append("features")
    return _utf8(path, _object(values, scala_mutable_apply_order(initial, added)))


# =================================================================== /brokers/topics/<topic>


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
        _bad(path, key, "an object", raw)
    out: dict[int, list[int]] = {}
    for p, replicas in raw.items():
        out[_java_int_text(path, f"partition key {p!r} in {key!r}", p)] = _ints(path, f"{key}.{p}", replicas)
    return out


def decode_topic(path: str, data: bytes | None) -> Topic:
    obj = _parse_object(path, data)
    version = _version(obj, path, (1, 2, 3))
    partitions = _replica_map(path, obj, "partitions")
    topic_id = None
    if "topic_id" in obj:
        raw = obj["topic_id"]
        if type(raw) is not str:
            _bad(path, "topic_id", "a string", raw)
        topic_id = _parse_uuid(path, raw)
    # Kafka reads these only for assigned partitions, and an empty set is the same as none.
    adding = {p: r for p, r in _replica_map(path, obj, "adding_replicas").items() if r and p in partitions}
    removing = {
        p: r for p, r in _replica_map(path, obj, "removing_replicas").items() if r and p in partitions
    }
    return Topic(_last_name(path), topic_id, partitions, adding, removing, version)


def _partition_map(partitions: dict[int, list[int]], keys: Iterable[int]) -> str:
    return "{" + ",".join(f'"{p}":{_int_list(partitions[p])}' for p in _partition_order(keys)) + "}"


def encode_topic(t: Topic) -> bytes:
    values = {"version": str(t.version), "partitions": _partition_map(t.partitions, t.partitions)}
    if t.version == 1:
        return _utf8(f"/brokers/topics/{t.name}", _object(values, ("version", "partitions")))
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
    return _utf8(f"/brokers/topics/{t.name}", _object(values, order))


# =================================================================== .../partitions/<p>/state

_STATE_KEYS = ("version", "leader", "leader_epoch", "controller_epoch", "isr")
_STATE_ORDER = scala_map_order(_STATE_KEYS)
_STATE_ORDER_RECOVERY = scala_map_order((*_STATE_KEYS, "leader_recovery_state"))


def decode_partition_state(path: str, data: bytes | None, *, zk_version: int = 0) -> PartitionState:
    obj = _parse_object(path, data)
    try:
        version, leader, leader_epoch = obj["version"], obj["leader"], obj["leader_epoch"]
        controller_epoch, isr = obj["controller_epoch"], obj["isr"]
    except KeyError as e:
        _missing(path, str(e.args[0]))
    if type(version) is not int:
        _bad(path, "version", "an integer", version)
    if version != 1:
        raise ZnodeFormatError(path, f"unknown version {version} (known: 1)")
    for key, v in (
        ("leader", leader),
        ("leader_epoch", leader_epoch),
        ("controller_epoch", controller_epoch),
    ):
        if type(v) is not int or not INT32_MIN <= v <= INT32_MAX:
            _bad(path, key, "a 32-bit integer", v)
    recovery = obj.get("leader_recovery_state", 0)
    if recovery not in (0, 1) or type(recovery) is not int:
        _bad(path, "leader_recovery_state", "0 (RECOVERED) or 1 (RECOVERING)", recovery)
    return PartitionState(
        leader, leader_epoch, _ints(path, "isr", isr), controller_epoch, recovery, zk_version
    )


def encode_partition_state(s: PartitionState) -> bytes:
    values = {
        "version": "1",
        "leader": str(s.leader),
        "leader_epoch": str(s.leader_epoch),
        "controller_epoch": str(s.controller_epoch),
        "isr": _int_list(s.isr),
    }
    if s.leader_recovery_state:
        values["leader_recovery_state"] = str(s.leader_recovery_state)
        order = _STATE_ORDER_RECOVERY
    else:
        order = _STATE_ORDER
    return ("{" + ",".join(f'"{k}":{values[k]}' for k in order) + "}").encode()


# =================================================================== /config/<type>/<name>


def decode_config_map(path: str, data: bytes | None) -> dict[str, str]:
    """The `config` object of a config znode; null or empty data and a missing `config` mean no configs."""
    if data is None or len(data) == 0:
        return {}
    obj = _parse_object(path, data)
    if "version" in obj:
        _version(obj, path, (1,))
    raw = obj.get("config")
    if raw is None and "config" not in obj:
        return {}
    if type(raw) is not dict:
        _bad(path, "config", "an object", raw)
    for k, v in raw.items():
        if type(v) is not str:
            _bad(path, f"config.{k}", "a string", v)
    return raw


def encode_config_map(path: str, config: dict[str, str], java8: bool | None = None) -> bytes:
    """`{"version":1,"config":{...}}`, config keys in java.util.Properties order."""
    inner = _object(
        {k: json_string(v) for k, v in config.items()}, java_properties_order(list(config), java8)
    )
    return _utf8(path, f'{{"version":1,"config":{inner}}}')


def _config_entity(path: str) -> tuple[str, str]:
    prefix = CONFIG + "/"
    if not path.startswith(prefix) or path.count("/") < 3:
        raise ZnodeFormatError(path, "not a /config/<type>/<name> path")
    entity_type, _, name = path[len(prefix) :].partition("/")
    return entity_type, name


def decode_entity_config(path: str, data: bytes | None) -> EntityConfig:
    entity_type, name = _config_entity(path)
    return EntityConfig(entity_type, name, dict(decode_config_map(path, data)))


def encode_entity_config(c: EntityConfig, java8: bool | None = None) -> bytes:
    return encode_config_map(f"{CONFIG}/{c.entity_type}/{c.name}", c.config, java8)


_QUOTA_ENTITY_RE = re.compile(r"(?:users/[^/]+(?:/clients/[^/]+)?|clients/[^/]+|ips/[^/]+)")


def quota_entity_path(path: str) -> str:
    """The entity path of a client-quota config znode (`users/u`, `users/u/clients/c`, `clients/c`, `ips/i`)."""
    entity_path = path[len(CONFIG) + 1 :] if path.startswith(CONFIG + "/") else ""
    if not _QUOTA_ENTITY_RE.fullmatch(entity_path):
        raise ZnodeFormatError(
            path, "not a client-quota config path (users, clients, ips, users/<u>/clients)"
        )
    return entity_path


def decode_client_quota_config(path: str, data: bytes | None) -> ClientQuotaConfig:
    """Split a user/client/ip config like Kafka's migration: SCRAM keys (users only), the rest quotas."""
    entity_path = quota_entity_path(path)
    config = dict(decode_config_map(path, data))
    out = ClientQuotaConfig(entity_path, key_order=list(config))
    if entity_path.startswith("users/") and "/" not in entity_path[6:]:
        for mechanism in SCRAM_MECHANISMS:
            if mechanism in config:
                out.scram[mechanism] = decode_scram_credential(path, mechanism, config.pop(mechanism))
    for key, text in config.items():
        value = parse_java_double(text)
        if value is None:
            raise ZnodeFormatError(path, f"client quota {key!r} has a non-numeric value {text!r}")
        out.quotas[key] = value
        try:
            canonical = kafka_quota_text(key, value)
        except InvalidRequestError:
            canonical = None
        if canonical != text:
            out.quota_text[key] = text
    return out


def _same_double(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def encode_client_quota_config(q: ClientQuotaConfig, java8: bool | None = None) -> bytes:
    config: dict[str, str] = {}
    for key, value in q.quotas.items():
        text = q.quota_text.get(key)
        parsed = None if text is None else parse_java_double(text)
        config[key] = (
            text
            if text is not None and parsed is not None and _same_double(parsed, value)
            else (kafka_quota_text(key, value))
        )
    for mechanism, credential in q.scram.items():
        config[mechanism] = encode_scram_credential(credential)
    if q.key_order:
        known = [k for k in q.key_order if k in config]
        config = {k: config[k] for k in [*known, *(k for k in config if k not in set(known))]}
    return encode_config_map(f"{CONFIG}/{q.entity_path}", config, java8)


_B64_RE = re.compile(r"[A-Za-z0-9+/]*={0,2}")


def _b64(path: str, what: str, text: str) -> bytes:
    """Java's basic Base64 decoder: standard alphabet, padding optional but exact when present."""
    body = text.rstrip("=")
    if not _B64_RE.fullmatch(text) or len(body) % 4 == 1 or ("=" in text and len(text) % 4):
        raise ZnodeFormatError(path, f"{what} is not valid base64: {text!r}")
    try:
        return base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ZnodeFormatError(path, f"{what} is not valid base64: {text!r}") from None


def decode_scram_credential(path: str, mechanism: str, text: str) -> ScramCredential:
    """ScramCredentialUtils.credentialFromString: exactly salt, stored_key, server_key, iterations."""
    tokens = text.split(",")
    while len(tokens) > 1 and tokens[-1] == "":
        tokens.pop()  # Java's String.split drops trailing empty strings
    props: dict[str, str] = {}
    for token in tokens:
        key, eq, value = token.partition("=")
        if not key or not eq:
            raise ZnodeFormatError(path, f"{mechanism} credential is not key=value pairs: {text!r}")
        props[key] = value
    if set(props) != {"salt", "stored_key", "server_key", "iterations"}:
        raise ZnodeFormatError(
            path, f"{mechanism} credential needs exactly salt, stored_key, server_key, iterations"
        )
    return ScramCredential(
        mechanism,
        _b64(path, f"{mechanism} salt", props["salt"]),
        _b64(path, f"{mechanism} stored_key", props["stored_key"]),
        _b64(path, f"{mechanism} server_key", props["server_key"]),
        _java_int_text(path, f"{mechanism} iterations", props["iterations"]),
    )


def encode_scram_credential(c: ScramCredential) -> str:
    b64 = base64.b64encode
    return (
        f"salt={b64(c.salt).decode()},stored_key={b64(c.stored_key).decode()},"
        f"server_key={b64(c.server_key).decode()},iterations={c.iterations}"
    )


# =================================================================== notifications and admin znodes


def decode_config_change(path: str, data: bytes | None) -> ConfigChangeNotification:
    obj = _parse_object(path, data)
    version = _version(obj, path, (1, 2))
    if version == 2:
        return ConfigChangeNotification(_str(obj, "entity_path", path), 2)
    entity_type = _str(obj, "entity_type", path)
    if entity_type not in ("topics", "clients"):
        raise ZnodeFormatError(
            path, f"version 1 change notification for {entity_type!r} (only topics, clients)"
        )
    return ConfigChangeNotification(f"{entity_type}/{_str(obj, 'entity_name', path)}", 1)


def encode_config_change(n: ConfigChangeNotification) -> bytes:
    path = "/config/changes"
    if n.version == 1:
        entity_type, _, name = n.entity_path.partition("/")
        return _utf8(
            path,
            f'{{"version":1,"entity_type":{json_string(entity_type)},"entity_name":{json_string(name)}}}',
        )
    return _utf8(path, f'{{"version":{n.version},"entity_path":{json_string(n.entity_path)}}}')


def _topic_partitions(path: str, obj: dict[str, Any]) -> list[TopicPartition]:
    if "partitions" not in obj:
        _missing(path, "partitions")
    raw = obj["partitions"]
    if type(raw) is not list:
        _bad(path, "partitions", "an array", raw)
    out = []
    for item in raw:
        if type(item) is not dict:
            _bad(path, "partitions[]", "an object", item)
        out.append(TopicPartition(_str(item, "topic", path), _int(item, "partition", path)))
    return out


def _encode_topic_partitions(partitions: Iterable[TopicPartition]) -> str:
    items = (f'{{"topic":{json_string(tp.topic)},"partition":{tp.partition}}}' for tp in partitions)
    return "[" + ",".join(items) + "]"


def decode_partition_list(path: str, data: bytes | None) -> PartitionList:
    """`/admin/preferred_replica_election` or an `isr_change_<n>` notification."""
    obj = _parse_object(path, data)
    version = _version(obj, path, (1,))
    return PartitionList(_topic_partitions(path, obj), version)


def encode_partition_list(p: PartitionList) -> bytes:
    # The partition set's order depends on the writer's Scala Set; the model keeps it as read.
    return _utf8(
        "partition list", f'{{"version":{p.version},"partitions":{_encode_topic_partitions(p.partitions)}}}'
    )


def decode_reassignment(path: str, data: bytes | None) -> LegacyReassignment:
    obj = _parse_object(path, data)
    version = _version(obj, path, (1,))
    raw = obj.get("partitions")
    if type(raw) is not list:
        _bad(path, "partitions", "an array", raw)
    out = []
    for item in raw:
        if type(item) is not dict:
            _bad(path, "partitions[]", "an object", item)
        if "replicas" not in item:
            _missing(path, "replicas")
        replicas = _ints(path, "replicas", item["replicas"])
        out.append(ReplicaReassignment(_str(item, "topic", path), _int(item, "partition", path), replicas))
    return LegacyReassignment(out, version)


def encode_reassignment(r: LegacyReassignment) -> bytes:
    items = (
        f'{{"topic":{json_string(x.topic)},"partition":{x.partition},"replicas":{_int_list(x.replicas)}}}'
        for x in r.partitions
    )
    return _utf8("/admin/reassign_partitions", f'{{"version":{r.version},"partitions":[{",".join(items)}]}}')


def decode_log_dir_event(path: str, data: bytes | None) -> LogDirEvent:
    obj = _parse_object(path, data)
    version = _version(obj, path, (1,))
    event = obj.get("event", 1)
    return LogDirEvent(_int(obj, "broker", path), _check_int(path, "event", event), version)


def encode_log_dir_event(e: LogDirEvent) -> bytes:
    return f'{{"version":{e.version},"broker":{e.broker_id},"event":{e.event}}}'.encode()


# =================================================================== cluster-wide singletons


def decode_cluster_id(path: str, data: bytes | None) -> str:
    obj = _parse_object(path, data)
    if "version" in obj and obj["version"] != "1":
        raise ZnodeFormatError(path, f'unknown version {_show(obj["version"])} (known: "1")')
    return _str(obj, "id", path)


def encode_cluster_id(cluster_id: str) -> bytes:
    return _utf8("/cluster/id", f'{{"version":"1","id":{json_string(cluster_id)}}}')


def decode_producer_id_block(path: str, data: bytes | None) -> ProducerIdBlock:
    obj = _parse_object(path, data)
    version = _version(obj, path, (1,))
    start = _java_int_text(path, "block_start", _str(obj, "block_start", path), INT64_MIN, INT64_MAX)
    end = _java_int_text(path, "block_end", _str(obj, "block_end", path), INT64_MIN, INT64_MAX)
    if not INT32_MIN <= end - start + 1 <= INT32_MAX:
        raise ZnodeFormatError(path, f"block size {end - start + 1} does not fit an int")
    return ProducerIdBlock(_int(obj, "broker", path), start, end, version)


def encode_producer_id_block(b: ProducerIdBlock) -> bytes:
    return (
        f'{{"version":{b.version},"broker":{b.broker_id},"block_start":"{b.block_start}","block_end":"{b.block_end}"}}'
    ).encode()


def decode_features(path: str, data: bytes | None, *, zk_version: int = 0) -> FinalizedFeatures:
    obj = _parse_object(path, data)
    version = _version(obj, path, (1, 2))
    status = _int(obj, "status", path)
    if status not in (0, 1):
        raise ZnodeFormatError(path, f"unknown status {status} (0 disabled, 1 enabled)")
    raw = obj.get("features")
    if type(raw) is not dict:
        _bad(path, "features", "an object", raw)
    features: dict[str, int] = {}
    min_levels: dict[str, int] = {}
    for name, levels in raw.items():
        if type(levels) is not dict:
            _bad(path, f"features.{name}", "an object", levels)
        top = _int(levels, "max_version_level", path, 1, INT16_MAX)
        if version == 1:
            low = _int(levels, "min_version_level", path, 1, INT16_MAX)
            if top < low:
                raise ZnodeFormatError(
                    path, f"feature {name!r}: max_version_level {top} < min_version_level {low}"
                )
            if low != top:
                min_levels[name] = low
        features[name] = top
    return FinalizedFeatures(FeatureStatus(status), features, version, min_levels, zk_version)


def encode_features(f: FinalizedFeatures) -> bytes:
    if f.version == 1:
        levels = {
            name: f'{{"max_version_level":{top},"min_version_level":{f.min_levels.get(name, top)}}}'
            for name, top in f.features.items()
        }
    else:
        levels = {name: f'{{"max_version_level":{top}}}' for name, top in f.features.items()}
    values = {
        "version": str(f.version),
        "status": str(int(f.status)),
        "features": _object(levels, scala_map_order(tuple(levels))),
    }
    return _utf8("/feature", _object(values, scala_mutable_apply_order(("version", "status", "features"))))


_MIGRATION_ORDER = scala_map_order(
    (
        "version",
        "kraft_controller_id",
        "kraft_controller_epoch",
        "kraft_metadata_offset",
        "kraft_metadata_epoch",
    )
)


def decode_migration(path: str, data: bytes | None, *, zk_version: int = 0, mtime: int = 0) -> MigrationState:
    obj = _parse_object(path, data)
    version = _version(obj, path, (0,))
    return MigrationState(
        kraft_controller_id=_int(obj, "kraft_controller_id", path),
        kraft_controller_epoch=_int(obj, "kraft_controller_epoch", path),
        kraft_metadata_offset=_long(obj, "kraft_metadata_offset", path),
        kraft_metadata_epoch=_int(obj, "kraft_metadata_epoch", path),
        version=version,
        zk_version=zk_version,
        last_updated_ms=mtime,
    )


def encode_migration(m: MigrationState) -> bytes:
    values = {
        "version": str(m.version),
        "kraft_controller_id": str(m.kraft_controller_id),
        "kraft_controller_epoch": str(m.kraft_controller_epoch),
        "kraft_metadata_offset": str(m.kraft_metadata_offset),
        "kraft_metadata_epoch": str(m.kraft_metadata_epoch),
    }
    return _object(values, _MIGRATION_ORDER).encode()


# =================================================================== ACLs


def _name_table(enum: Iterable[Any]) -> dict[str, Any]:
    table = {}
    for member in enum:
        table[pascal_case(member.name)] = member
        table[pascal_case(member.name).upper()] = member
    return table


_RESOURCE_TYPES = _name_table(ResourceType)
_OPERATIONS = _name_table(AclOperation)
_PERMISSIONS = _name_table(AclPermissionType)


def _lookup(table: dict[str, Any], name: str, unknown: Any) -> Any:
    """SecurityUtils.valueFromMap: exact PascalCase or upper-case name, else UNKNOWN."""
    found = table.get(name)
    return found if found is not None else table.get(name.upper(), unknown)


def resource_type_from_name(name: str) -> ResourceType:
    """`SecurityUtils.resourceType` (path segment, `Topic` or `TOPIC`); UNKNOWN when not a type."""
    result: ResourceType = _lookup(_RESOURCE_TYPES, name, ResourceType.UNKNOWN)
    return result


def acl_pattern_from_path(path: str) -> ResourcePattern:
    """The resource pattern an ACL znode stores: `/kafka-acl/<Type>/<name>` or `/kafka-acl-extended/prefixed/...`."""
    if path.startswith(KAFKA_ACL + "/"):
        pattern_type, rest = PatternType.LITERAL, path[len(KAFKA_ACL) + 1 :]
    elif path.startswith(KAFKA_ACL_EXTENDED + "/"):
        store, _, rest = path[len(KAFKA_ACL_EXTENDED) + 1 :].partition("/")
        if store != "prefixed":
            raise ZnodeFormatError(path, f"unknown ACL pattern type store {store!r} (only prefixed)")
        pattern_type = PatternType.PREFIXED
    else:
        raise ZnodeFormatError(path, "not an ACL path")
    type_name, slash, name = rest.partition("/")
    resource_type = resource_type_from_name(type_name)
    if not slash or resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise ZnodeFormatError(path, f"unknown ACL resource type {type_name!r}")
    return ResourcePattern(resource_type, name, pattern_type)


def _principal(path: str, what: str, text: str) -> str:
    """SecurityUtils.parseKafkaPrincipal accepts `<type>:<name>` (split on the first colon)."""
    if ":" not in text:
        raise ZnodeFormatError(path, f"{what} {text!r} is not a principal of the form Type:name")
    return text


def decode_acls(path: str, data: bytes | None, *, zk_version: int = 0) -> AclResource:
    pattern = acl_pattern_from_path(path)
    if data is None or len(data) == 0:
        return AclResource(pattern, [], zk_version)
    obj = _parse_object(path, data)
    _version(obj, path, (1,))
    if "acls" not in obj:
        _missing(path, "acls")
    raw = obj["acls"]
    if type(raw) is not list:
        _bad(path, "acls", "an array", raw)
    acls = []
    for item in raw:
        if type(item) is not dict:
            _bad(path, "acls[]", "an object", item)
        acls.append(
            AclEntry(
                principal=_principal(path, "principal", _str(item, "principal", path)),
                host=_str(item, "host", path),
                operation=_lookup(_OPERATIONS, _str(item, "operation", path), AclOperation.UNKNOWN),
                permission_type=_lookup(
                    _PERMISSIONS, _str(item, "permissionType", path), AclPermissionType.UNKNOWN
                ),
            )
        )
    return AclResource(pattern, acls, zk_version)


_ACLS_ORDER = java_hash_map_order(["version", "acls"])
_ACL_ENTRY_ORDER = java_hash_map_order(["principal", "permissionType", "operation", "host"])


def encode_acls(r: AclResource) -> bytes:
    entries = []
    for a in r.acls:
        values = {
            "principal": json_string(a.principal),
            "permissionType": json_string(pascal_case(a.permission_type.name)),
            "operation": json_string(pascal_case(a.operation.name)),
            "host": json_string(a.host),
        }
        entries.append(_object(values, _ACL_ENTRY_ORDER))
    # The ACL list comes from a Scala Set of AclEntry, whose order follows enum identity hashes: kept as read.
    text = _object({"version": "1", "acls": "[" + ",".join(entries) + "]"}, _ACLS_ORDER)
    return _utf8("ACL " + r.pattern.name, text)


def decode_acl_change(path: str, data: bytes | None) -> AclChangeNotification:
    """A literal-store notification: plain `RESOURCE_TYPE:name`."""
    text = _text(path, data)
    type_name, colon, name = text.partition(":")
    if not colon:
        raise ZnodeFormatError(path, f"ACL change {text!r} is not ResourceType:name")
    resource_type = ResourceType.__members__.get(type_name.upper(), ResourceType.UNKNOWN)
    return AclChangeNotification(ResourcePattern(resource_type, name, PatternType.LITERAL))


def encode_acl_change(n: AclChangeNotification) -> bytes:
    return _utf8("ACL change", f"{n.pattern.resource_type.name}:{n.pattern.name}")


def decode_extended_acl_change(path: str, data: bytes | None) -> AclChangeNotification:
    obj = _parse_object(path, data)
    version = _int(obj, "version", path)
    if version > 1:
        raise ZnodeFormatError(path, f"unknown version {version} (known: 1)")
    resource_type = ResourceType.__members__.get(
        _str(obj, "resourceType", path).upper(), ResourceType.UNKNOWN
    )
    pattern_type = PatternType.__members__.get(_str(obj, "patternType", path).upper(), PatternType.UNKNOWN)
    return AclChangeNotification(
        ResourcePattern(resource_type, _str(obj, "name", path), pattern_type), version
    )


def encode_extended_acl_change(n: AclChangeNotification) -> bytes:
    p = n.pattern
    text = (
        f'{{"version":{n.version},"resourceType":{json_string(p.resource_type.name)},'
        f'"name":{json_string(p.name)},"patternType":{json_string(p.pattern_type.name)}}}'
    )
    return _utf8("ACL change", text)


# =================================================================== delegation tokens

_TOKEN_KEYS = (
    "version",
    "owner",
    "tokenRequester",
    "renewers",
    "issueTimestamp",
    "maxTimestamp",
    "expiryTimestamp",
)
_TOKEN_ORDER = scala_map_order((*_TOKEN_KEYS, "tokenId"))
_TOKEN_ORDER_V1 = scala_map_order((*(k for k in _TOKEN_KEYS if k != "tokenRequester"), "tokenId"))


def decode_delegation_token(path: str, data: bytes | None) -> DelegationToken:
    obj = _parse_object(path, data)
    version = _version(obj, path, (1, 2, 3))
    owner = _principal(path, "owner", desanitize(_str(obj, "owner", path), path))
    requester = owner
    if version >= 3:
        requester = _principal(path, "tokenRequester", desanitize(_str(obj, "tokenRequester", path), path))
    if "renewers" not in obj:
        _missing(path, "renewers")
    renewers = [
        _principal(path, "renewer", desanitize(r, path)) for r in _strs(path, "renewers", obj["renewers"])
    ]
    return DelegationToken(
        token_id=_str(obj, "tokenId", path),
        owner=owner,
        token_requester=requester,
        renewers=renewers,
        issue_timestamp=_long(obj, "issueTimestamp", path),
        max_timestamp=_long(obj, "maxTimestamp", path),
        expiry_timestamp=_long(obj, "expiryTimestamp", path),
        version=version,
    )


def encode_delegation_token(t: DelegationToken) -> bytes:
    values = {
        "version": str(t.version),
        "owner": json_string(sanitize(t.owner)),
        "tokenRequester": json_string(sanitize(t.token_requester)),
        "renewers": _str_list(sanitize(r) for r in t.renewers),
        "issueTimestamp": str(t.issue_timestamp),
        "maxTimestamp": str(t.max_timestamp),
        "expiryTimestamp": str(t.expiry_timestamp),
        "tokenId": json_string(t.token_id),
    }
    order = _TOKEN_ORDER if t.version >= 3 else _TOKEN_ORDER_V1
    return _utf8(f"/delegation_token/tokens/{t.token_id}", _object(values, order))


def decode_token_change(path: str, data: bytes | None) -> str:
    return _text(path, data)


def encode_token_change(token_id: str) -> bytes:
    return _utf8("token change", token_id)
