"""Kafka 3.9's topic configurations (LogConfig) for CreateTopics: known names, value checks, effective values.

A minimal stand-in for the full validation that bridge/handlers/configs.py is to provide: names must be
Kafka 3.9 topic configs and values must parse with ConfigDef's types and pass the validators LogConfig
declares, with ConfigException's message format. Effective values follow KafkaConfigSchema: the topic's
own value, else a dynamic broker value of the controller node, else the dynamic cluster default, else the
ConfigDef default (the controller's static server.properties are not known here).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from bridge.handlers._common import ApiError
from migrate.errors import UnsupportedVersionError
from migrate.kraft import metadata_version as mvs
from migrate.kraft.image import RESOURCE_TYPE_BROKER, MetadataImage

LONG_MAX = 2**63 - 1
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN = -(2**63)

# DescribeConfigsResponse.ConfigSource ids (KafkaConfigSchema.translateConfigSource).
SOURCE_TOPIC_CONFIG = 1
SOURCE_DYNAMIC_BROKER_CONFIG = 2
SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG = 3
SOURCE_STATIC_BROKER_CONFIG = 4
SOURCE_DEFAULT_CONFIG = 5

Value = int | float | bool | str | list[str]
Validator = Callable[[str, Value], None]


class ConfigError(Exception):
    """Kafka's ConfigException: `Invalid value V for configuration N: why`."""

    def __init__(self, name: str, value: object, why: str | None) -> None:
        super().__init__(
            f"Invalid value {_java_str(value)} for configuration {name}" + (f": {why}" if why else "")
        )


def _java_str(value: object) -> str:
    """Object.toString of the parsed value as Java would print it (lists as [a, b], doubles as 1.0)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return repr(value) if not value.is_integer() or abs(value) >= 1e7 else f"{value:.1f}"
    if isinstance(value, list):
        return "[" + ", ".join(value) + "]"
    return str(value)


# ---------------------------------------------------------------- ConfigDef types

_INT_RE = re.compile(r"[+-]?[0-9]+")
_DOUBLE_RE = re.compile(r"[+-]?(NaN|Infinity|(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?))[fFdD]?")


def _java_trim(text: str) -> str:
    """String.trim: strips every char <= U+0020 at both ends."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def _parse(kind: str, name: str, raw: str) -> Value:
    """ConfigDef.parseType for a string value."""
    text = _java_trim(raw)
    if kind == "boolean":
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise ConfigError(name, raw, "Expected value to be either true or false")
    if kind == "string":
        return text
    if kind in ("int", "long"):
        low, high = (INT_MIN, INT_MAX) if kind == "int" else (LONG_MIN, LONG_MAX)
        if _INT_RE.fullmatch(text) and low <= int(text) <= high:
            return int(text)
        raise ConfigError(name, raw, f"Not a number of type {kind.upper()}")
    if kind == "double":
        if _DOUBLE_RE.fullmatch(text):
            return float(text.rstrip("fFdD").replace("Infinity", "inf"))
        raise ConfigError(name, raw, "Not a number of type DOUBLE")
    if kind == "list":
        return [] if not text else re.split(r"\s*,\s*", text)
    raise AssertionError(f"unknown config type {kind}")


def _at_least(minimum: int) -> Validator:
    def check(name: str, value: Value) -> None:
        assert isinstance(value, int | float)
        if value < minimum:
            raise ConfigError(name, value, f"Value must be at least {minimum}")

    return check


def _between(minimum: int, maximum: int) -> Validator:
    def check(name: str, value: Value) -> None:
        assert isinstance(value, int | float)
        if value < minimum:
            raise ConfigError(name, value, f"Value must be at least {minimum}")
        if value > maximum:
            raise ConfigError(name, value, f"Value must be no more than {maximum}")

    return check


def _one_of(*allowed: str) -> Validator:
    def check(name: str, value: Value) -> None:
        for item in value if isinstance(value, list) else [value]:
            if item not in allowed:
                raise ConfigError(name, item, "String must be one of: " + ", ".join(allowed))

    return check


def _gzip_level(name: str, value: Value) -> None:
    assert isinstance(value, int)
    if value > 9 or (value < 1 and value != -1):
        raise ConfigError(name, value, "Value must be between 1 and 9 or equal to -1")


def _metadata_version(name: str, value: Value) -> None:
    try:
        mvs.parse(str(value), allow_unstable=True)
    except UnsupportedVersionError:
        raise ConfigError(name, value, f"Version {value} is not a valid version") from None


_REPLICA_ENTRY = re.compile(r"([0-9]+:[0-9]+)?")


def _throttled_replicas(name: str, value: Value) -> None:
    assert isinstance(value, list)
    entries = [_java_trim(part) for part in ",".join(value).split(",")]
    if not (all(_REPLICA_ENTRY.fullmatch(e) for e in entries) or "".join(entries) == "*"):
        raise ConfigError(
            name,
            value,
            f"{name} must be the literal '*' or a list of replicas in the following format: "
            "[partitionId]:[brokerId],[partitionId]:[brokerId],...",
        )


# ---------------------------------------------------------------- the table


def _hours(value: str) -> str:
    return str(int(value) * 3_600_000)


def _minutes(value: str) -> str:
    return str(int(value) * 60_000)


def _same(value: str) -> str:
    return value


Synonym = tuple[str, Callable[[str], str]]


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    """One LogConfig key: its ConfigDef type, default (as ConfigDef.convertToString gives it) and synonyms."""

    name: str
    kind: str
    default: str
    validator: Validator | None = None
    synonyms: tuple[Synonym, ...] = ()


def _log(*names: str) -> tuple[Synonym, ...]:
    return tuple((f"log.{n}", _same) for n in names)


_DEFS = [
    TopicConfigDef("segment.bytes", "int", "1073741824", _at_least(14), _log("segment.bytes")),
    TopicConfigDef(
        "segment.ms", "long", "604800000", _at_least(1), (("log.roll.ms", _same), ("log.roll.hours", _hours))
    ),
    TopicConfigDef(
        "segment.jitter.ms",
        "long",
        "0",
        _at_least(0),
        (("log.roll.jitter.ms", _same), ("log.roll.jitter.hours", _hours)),
    ),
    TopicConfigDef("segment.index.bytes", "int", "10485760", _at_least(4), _log("index.size.max.bytes")),
    TopicConfigDef("flush.messages", "long", str(LONG_MAX), _at_least(1), _log("flush.interval.messages")),
    TopicConfigDef(
        "flush.ms",
        "long",
        str(LONG_MAX),
        _at_least(0),
        _log("flush.interval.ms", "flush.scheduler.interval.ms"),
    ),
    TopicConfigDef("retention.bytes", "long", "-1", None, _log("retention.bytes")),
    TopicConfigDef(
        "retention.ms",
        "long",
        "604800000",
        _at_least(-1),
        (("log.retention.ms", _same), ("log.retention.minutes", _minutes), ("log.retention.hours", _hours)),
    ),
    TopicConfigDef("max.message.bytes", "int", "1048588", _at_least(0), (("message.max.bytes", _same),)),
    TopicConfigDef("index.interval.bytes", "int", "4096", _at_least(0), _log("index.interval.bytes")),
    TopicConfigDef(
        "delete.retention.ms", "long", "86400000", _at_least(0), _log("cleaner.delete.retention.ms")
    ),
    TopicConfigDef("min.compaction.lag.ms", "long", "0", _at_least(0), _log("cleaner.min.compaction.lag.ms")),
    TopicConfigDef(
        "max.compaction.lag.ms", "long", str(LONG_MAX), _at_least(1), _log("cleaner.max.compaction.lag.ms")
    ),
    TopicConfigDef("file.delete.delay.ms", "long", "60000", _at_least(0), _log("segment.delete.delay.ms")),
    TopicConfigDef(
        "min.cleanable.dirty.ratio", "double", "0.5", _between(0, 1), _log("cleaner.min.cleanable.ratio")
    ),
    TopicConfigDef("cleanup.policy", "list", "delete", _one_of("compact", "delete"), _log("cleanup.policy")),
    TopicConfigDef(
        "unclean.leader.election.enable",
        "boolean",
        "false",
        None,
        (("unclean.leader.election.enable", _same),),
    ),
    TopicConfigDef("min.insync.replicas", "int", "1", _at_least(1), (("min.insync.replicas", _same),)),
    TopicConfigDef(
        "compression.type",
        "string",
        "producer",
        _one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
        (("compression.type", _same),),
    ),
    TopicConfigDef("compression.gzip.level", "int", "-1", _gzip_level, (("compression.gzip.level", _same),)),
    TopicConfigDef("compression.lz4.level", "int", "9", _between(1, 17), (("compression.lz4.level", _same),)),
    TopicConfigDef(
        "compression.zstd.level", "int", "3", _between(-131072, 22), (("compression.zstd.level", _same),)
    ),
    TopicConfigDef("preallocate", "boolean", "false", None, _log("preallocate")),
    TopicConfigDef(
        "message.format.version", "string", "3.0-IV1", _metadata_version, _log("message.format.version")
    ),
    TopicConfigDef(
        "message.timestamp.type",
        "string",
        "CreateTime",
        _one_of("CreateTime", "LogAppendTime"),
        _log("message.timestamp.type"),
    ),
    TopicConfigDef(
        "message.timestamp.difference.max.ms",
        "long",
        str(LONG_MAX),
        _at_least(0),
        _log("message.timestamp.difference.max.ms"),
    ),
    TopicConfigDef(
        "message.timestamp.before.max.ms",
        "long",
        str(LONG_MAX),
        _at_least(0),
        _log("message.timestamp.before.max.ms"),
    ),
    TopicConfigDef(
        "message.timestamp.after.max.ms",
        "long",
        str(LONG_MAX),
        _at_least(0),
        _log("message.timestamp.after.max.ms"),
    ),
    TopicConfigDef("leader.replication.throttled.replicas", "list", "", _throttled_replicas),
    TopicConfigDef("follower.replication.throttled.replicas", "list", "", _throttled_replicas),
    TopicConfigDef(
        "message.downconversion.enable", "boolean", "true", None, _log("message.downconversion.enable")
    ),
    TopicConfigDef("remote.storage.enable", "boolean", "false"),
    TopicConfigDef("local.retention.ms", "long", "-2", _at_least(-2), _log("local.retention.ms")),
    TopicConfigDef("local.retention.bytes", "long", "-2", _at_least(-2), _log("local.retention.bytes")),
    TopicConfigDef("remote.log.copy.disable", "boolean", "false"),
    TopicConfigDef("remote.log.delete.on.disable", "boolean", "false"),
]

TOPIC_CONFIGS: dict[str, TopicConfigDef] = {d.name: d for d in _DEFS}


# ---------------------------------------------------------------- validation and effective values


def validate_creation_configs(configs: Mapping[str, str]) -> ApiError | None:
    """LogConfig.validate for a new topic's configs: INVALID_CONFIG with Kafka's message, or None."""
    for name in configs:
        if name not in TOPIC_CONFIGS:
            return ApiError(ErrorCode.invalid_config, f"Unknown topic config name: {name}")
    parsed: dict[str, Value] = {}
    try:
        # ConfigDef.parse visits keys in definition order; the first bad one is reported.
        for definition in _DEFS:
            raw = configs.get(definition.name, definition.default)
            value = _parse(definition.kind, definition.name, raw)
            if definition.validator is not None:
                definition.validator(definition.name, value)
            parsed[definition.name] = value
    except ConfigError as exc:
        return ApiError(ErrorCode.invalid_config, str(exc))
    min_lag, max_lag = parsed["min.compaction.lag.ms"], parsed["max.compaction.lag.ms"]
    assert isinstance(min_lag, int) and isinstance(max_lag, int)
    if min_lag > max_lag:
        return ApiError(
            ErrorCode.invalid_config,
            f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > max.compaction.lag.ms ({max_lag})",
        )
    if parsed["remote.storage.enable"] is True:
        # remote.log.storage.system.enable is false unless configured; the bridge has no tiered storage.
        return ApiError(
            ErrorCode.invalid_config,
            "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.",
        )
    return None


@dataclass(frozen=True, slots=True)
class EffectiveConfig:
    """One entry of a CreateTopics v5+ result: name, value and ConfigSource id."""

    name: str
    value: str
    source: int


def effective_topic_configs(
    image: MetadataImage, node_id: int, creation_configs: Mapping[str, str]
) -> list[EffectiveConfig]:
    """ConfigurationControlManager.computeEffectiveTopicConfigs, sorted by name."""
    cluster = image.configs.get((RESOURCE_TYPE_BROKER, ""), {})
    node = image.configs.get((RESOURCE_TYPE_BROKER, str(node_id)), {})
    result = []
    for name in sorted(TOPIC_CONFIGS):
        definition = TOPIC_CONFIGS[name]
        result.append(_resolve(definition, creation_configs, node, cluster))
    return result


def _resolve(
    definition: TopicConfigDef, topic: Mapping[str, str], node: Mapping[str, str], cluster: Mapping[str, str]
) -> EffectiveConfig:
    if definition.name in topic:
        return EffectiveConfig(definition.name, topic[definition.name], SOURCE_TOPIC_CONFIG)
    for values, source in (
        (node, SOURCE_DYNAMIC_BROKER_CONFIG),
        (cluster, SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG),
    ):
        for synonym, convert in definition.synonyms:
            if synonym in values:
                try:
                    return EffectiveConfig(definition.name, convert(values[synonym]), source)
                except ValueError:
                    return EffectiveConfig(definition.name, values[synonym], source)
    return EffectiveConfig(definition.name, definition.default, SOURCE_DEFAULT_CONFIG)


def broker_default(image: MetadataImage, node_id: int, name: str) -> str | None:
    """A broker config as the controller sees it: its own dynamic value, else the cluster default."""
    for entity in (str(node_id), ""):
        value = image.configs.get((RESOURCE_TYPE_BROKER, entity), {}).get(name)
        if value is not None:
            return value
    return None
