"""`/config/<type>/<name>` with client quotas and SCRAM credentials, and `/config/changes` notifications
(Kafka's ConfigEntityZNode, ConfigEntityChangeNotificationSequenceZNode, ScramCredentialUtils)."""

from __future__ import annotations

import base64
import binascii
import math
import re

from migrate.errors import InvalidRequestError, ZnodeFormatError
from migrate.jvm import java_cast_to_integer, java_double_to_string, java_properties_order, parse_java_double
from migrate.zk.model import (
    SCRAM_MECHANISMS,
    ClientQuotaConfig,
    ConfigChangeNotification,
    EntityConfig,
    ScramCredential,
)
from migrate.zk.paths import CONFIG
from migrate.zk.znodes.jackson import (
    bad,
    java_int_text,
    json_object,
    json_string,
    parse_object,
    str_field,
    utf8,
    version_field,
)

# QuotaConfigs: the ConfigDef type of every client-quota key (decides how Kafka prints the value).
QUOTA_KEY_TYPES = {
    "producer_byte_rate": "LONG",
    "consumer_byte_rate": "LONG",
    "request_percentage": "DOUBLE",
    "controller_mutation_rate": "DOUBLE",
    "connection_creation_rate": "INT",
}


def kafka_quota_text(key: str, value: float) -> str:
    """How Kafka's KRaft dual-write prints a client-quota value (integer text for LONG/INT keys)."""
    kind = QUOTA_KEY_TYPES.get(key, "DOUBLE")
    if kind == "DOUBLE":
        return java_double_to_string(value)
    whole = java_cast_to_integer(value + 1e-6, 64 if kind == "LONG" else 32)
    if not abs(whole - value) <= 1e-6:
        raise InvalidRequestError(f"client quota {key} must be a whole number, got {value!r}")
    return str(whole)


def decode_config_map(path: str, data: bytes | None) -> dict[str, str]:
    """The `config` object of a config znode; null or empty data and a missing `config` mean no configs."""
    if data is None or len(data) == 0:
        return {}
    obj = parse_object(path, data)
    if "version" in obj:
        version_field(obj, path, (1,))
    raw = obj.get("config")
    if raw is None and "config" not in obj:
        return {}
    if type(raw) is not dict:
        bad(path, "config", "an object", raw)
    for k, v in raw.items():
        if type(v) is not str:
            bad(path, f"config.{k}", "a string", v)
    return raw


def encode_config_map(path: str, config: dict[str, str], java8: bool | None = None) -> bytes:
    """`{"version":1,"config":{...}}`, config keys in java.util.Properties order."""
    inner = json_object(
        {k: json_string(v) for k, v in config.items()}, java_properties_order(list(config), java8)
    )
    return utf8(path, f'{{"version":1,"config":{inner}}}')


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
        java_int_text(path, f"{mechanism} iterations", props["iterations"]),
    )


def encode_scram_credential(c: ScramCredential) -> str:
    b64 = base64.b64encode
    return (
        f"salt={b64(c.salt).decode()},stored_key={b64(c.stored_key).decode()},"
        f"server_key={b64(c.server_key).decode()},iterations={c.iterations}"
    )


def decode_config_change(path: str, data: bytes | None) -> ConfigChangeNotification:
    obj = parse_object(path, data)
    version = version_field(obj, path, (1, 2))
    if version == 2:
        return ConfigChangeNotification(str_field(obj, "entity_path", path), 2)
    entity_type = str_field(obj, "entity_type", path)
    if entity_type not in ("topics", "clients"):
        raise ZnodeFormatError(
            path, f"version 1 change notification for {entity_type!r} (only topics, clients)"
        )
    return ConfigChangeNotification(f"{entity_type}/{str_field(obj, 'entity_name', path)}", 1)


def encode_config_change(n: ConfigChangeNotification) -> bytes:
    path = "/config/changes"
    if n.version == 1:
        entity_type, _, name = n.entity_path.partition("/")
        return utf8(
            path,
            f'{{"version":1,"entity_type":{json_string(entity_type)},"entity_name":{json_string(name)}}}',
        )
    return utf8(path, f'{{"version":{n.version},"entity_path":{json_string(n.entity_path)}}}')
