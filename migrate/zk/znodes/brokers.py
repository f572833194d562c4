"""`/brokers/ids/<id>` (Kafka's BrokerIdZNode in ZkData.scala)."""

from __future__ import annotations

import re
from typing import Any

from migrate.errors import ZnodeFormatError
from migrate.jvm import java_hash_map_order, scala_map_order, scala_mutable_apply_order
from migrate.zk.model import SECURITY_PROTOCOLS, BrokerEndpoint, BrokerRegistration, FeatureRange
from migrate.zk.znodes.jackson import (
    INT16_MAX,
    bad,
    id_from_path,
    int_field,
    java_int_text,
    jnull,
    json_object,
    json_string,
    missing,
    opt_long_text_field,
    parse_object,
    str_array,
    str_field,
    str_list,
    utf8,
    version_field,
)

# SocketServerConfigs.URI_PARSE_REGEXP (Java `matches()`: the whole string).
_ENDPOINT_RE = re.compile(r"(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)")
_DEFAULT_PROTOCOL_MAP = {p: p for p in SECURITY_PROTOCOLS}


def decode_broker(
    path: str, data: bytes | None, *, czxid: int = 0, zk_version: int = 0, ephemeral_owner: int = 0
) -> BrokerRegistration:
    broker_id = id_from_path(path, "broker id")
    obj = parse_object(path, data)
    version = version_field(obj, path, (1, 2, 3, 4, 5))
    jmx_port = int_field(obj, "jmx_port", path)
    if version == 1:
        host, port = str_field(obj, "host", path), int_field(obj, "port", path)
        endpoints = [BrokerEndpoint("PLAINTEXT", host, port, "PLAINTEXT")]
    else:
        endpoints = _decode_endpoints(path, obj)
    rack = obj.get("rack")
    if rack is not None and type(rack) is not str:
        bad(path, "rack", "a string or null", rack)
    return BrokerRegistration(
        broker_id=broker_id,
        endpoints=endpoints,
        jmx_port=jmx_port,
        timestamp=opt_long_text_field(obj, "timestamp", path),
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
            bad(path, key, "an object of strings", raw)
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
        missing(path, "endpoints")
    out = []
    for text in str_array(path, "endpoints", obj["endpoints"]):
        m = _ENDPOINT_RE.fullmatch(text)
        if m is None:
            raise ZnodeFormatError(path, f"cannot parse endpoint {text!r}")
        listener = m.group(1).upper()
        protocol = protocols.get(listener)
        if protocol is None:
            raise ZnodeFormatError(path, f"no security protocol defined for listener {listener!r}")
        port = java_int_text(path, f"port of endpoint {text!r}", m.group(3))
        out.append(BrokerEndpoint(listener, m.group(2) or None, port, protocol))
    return out


def _decode_supported_features(path: str, raw: Any) -> dict[str, FeatureRange]:
    if raw is None:
        return {}
    if type(raw) is not dict:
        bad(path, "features", "an object", raw)
    out = {}
    for name, rng in raw.items():
        where = f"features.{name}"
        if type(rng) is not dict:
            bad(path, where, "an object", rng)
        lo = int_field(rng, "min_version", path, 0, INT16_MAX)
        hi = int_field(rng, "max_version", path, 0, INT16_MAX)
        if hi < lo:
            raise ZnodeFormatError(path, f"{where}: max_version {hi} < min_version {lo}")
        out[name] = FeatureRange(lo, hi)
    return out


def encode_broker(b: BrokerRegistration) -> bytes:
    path = f"/brokers/ids/{b.broker_id}"
    plain = b.plaintext_endpoint
    values = {
        "version": str(b.version),
        "host": "null" if plain is None else jnull(plain.host),
        "port": str(-1 if plain is None else plain.port),
        "jmx_port": str(b.jmx_port),
    }
    initial = ["version", "host", "port"]
    if b.version >= 2:
        values["endpoints"] = str_list(e.connection_string for e in b.endpoints)
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
        values["listener_security_protocol_map"] = json_object(
            {k: json_string(v) for k, v in protocols.items()}, order
        )
        added.append("listener_security_protocol_map")
    if b.version >= 5:
        ranges = {
            name: f'{{"min_version":{r.min_version},"max_version":{r.max_version}}}'
            for name, r in b.features.items()
        }
        values["features"] = json_object(ranges, java_hash_map_order(list(ranges)))
        added.append("features")
    return utf8(path, json_object(values, scala_mutable_apply_order(initial, added)))
