"""Kafka 3.9's config definitions the controller validates against: topic configs (LogConfig) and broker facts.

Topic configs are parsed and validated the way Kafka's ConfigDef does (Java trimming, Java number syntax,
Range / ValidString / ValidList / ThrottledReplicaListValidator / MetadataVersionValidator), with the
messages ConfigException builds, so a rejected value reads exactly as Kafka's controller reports it.
Broker configs: the LIST-typed ones (APPEND/SUBTRACT need them) and which ones are dynamically updatable.
"""

from __future__ import annotations

import decimal
import enum
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from kio.schema.errors import ErrorCode

from migrate.kraft import metadata_version as mvs

INT32_MIN: Final = -(1 << 31)
INT32_MAX: Final = (1 << 31) - 1
INT64_MIN: Final = -(1 << 63)
INT64_MAX: Final = (1 << 63) - 1

# ConfigResource.Type ids (org.apache.kafka.common.config.ConfigResource).
RESOURCE_UNKNOWN: Final = 0
RESOURCE_TOPIC: Final = 2
RESOURCE_BROKER: Final = 4
RESOURCE_BROKER_LOGGER: Final = 8
RESOURCE_CLIENT_METRICS: Final = 16
RESOURCE_GROUP: Final = 32
RESOURCE_TYPE_NAMES: Final = {
    RESOURCE_TOPIC: "TOPIC",
    RESOURCE_BROKER: "BROKER",
    RESOURCE_BROKER_LOGGER: "BROKER_LOGGER",
    RESOURCE_CLIENT_METRICS: "CLIENT_METRICS",
    RESOURCE_GROUP: "GROUP",
}


class ConfigType(enum.Enum):
    """ConfigDef.Type; the name is what Kafka prints in "Not a number of type INT"."""

    BOOLEAN = "BOOLEAN"
    STRING = "STRING"
    INT = "INT"
    SHORT = "SHORT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    LIST = "LIST"
    CLASS = "CLASS"
    PASSWORD = "PASSWORD"


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    """One reason a config map is rejected; Kafka's controller answers it with `error` and `message`."""

    message: str
    config: str | None = None
    error: ErrorCode = ErrorCode.invalid_config


class ConfigError(Exception):
    """Kafka's ConfigException: `Invalid value V for configuration N: why` (or a bare message)."""

    def __init__(
        self, name: str | None, value: Any = None, why: str | None = None, *, bare: str | None = None
    ):
        self.name = name
        if bare is not None:
            message = bare
        else:
            message = f"Invalid value {java_str(value)} for configuration {name}"
            if why is not None:
                message += f": {why}"
        self.message = message
        super().__init__(message)


# ------------------------------------------------------------------------------------- Java semantics


def java_trim(text: str) -> str:
    """Java's String.trim: strips every character <= U+0020, nothing else (not U+00A0)."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def java_double_str(value: float) -> str:
    """Java's Double.toString (shortest digits): 0.5, 2.0, 1.0E10, 1.0E-4, NaN, Infinity."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    sign = "-" if str(value).startswith("-") else ""
    magnitude = abs(value)
    if magnitude == 0.0:
        return sign + "0.0"
    digits_tuple = decimal.Decimal(repr(magnitude)).normalize().as_tuple()
    digits = "".join(str(d) for d in digits_tuple.digits)
    exponent = int(digits_tuple.exponent) + len(digits) - 1  # position of the first digit
    if 1e-3 <= magnitude < 1e7:
        if exponent >= 0:
            whole = digits[: exponent + 1].ljust(exponent + 1, "0")
            fraction = digits[exponent + 1 :] or "0"
        else:
            whole = "0"
            fraction = "0" * (-exponent - 1) + digits
        return f"{sign}{whole}.{fraction}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"


def java_str(value: Any) -> str:
    """How Java's string concatenation shows a parsed config value (Boolean, Double, List...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double_str(value)
    if isinstance(value, list):
        return "[" + ", ".join(java_str(v) for v in value) + "]"
    return str(value)


_JAVA_INTEGER = re.compile(r"[+-]?\d+")  # Character.digit accepts any Unicode decimal digit, as \d does
_ASCII_DIGITS = r"[0-9]"
_JAVA_DOUBLE = re.compile(
    r"[+-]?(?:NaN|Infinity|"
    rf"(?:(?:{_ASCII_DIGITS}+\.?{_ASCII_DIGITS}*|\.{_ASCII_DIGITS}+)(?:[eE][+-]?{_ASCII_DIGITS}+)?)|"
    r"(?:0[xX](?:[0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)[pP][+-]?[0-9]+))[fFdD]?"
)
_LIST_SEPARATOR = re.compile(r"[ \t\n\x0b\f\r]*,[ \t\n\x0b\f\r]*")


def parse_java_long(text: str, low: int, high: int) -> int | None:
    """Integer.parseInt / Long.parseLong of an already trimmed string; None when Java would throw."""
    if not _JAVA_INTEGER.fullmatch(text):
        return None
    number = int(text)
    return number if low <= number <= high else None


def parse_java_double(text: str) -> float | None:
    """Double.parseDouble (which trims again); None when Java would throw NumberFormatException."""
    text = java_trim(text)
    if not _JAVA_DOUBLE.fullmatch(text):
        return None
    # Every alternative of the grammar ends in a digit, '.', "NaN" or "Infinity": a final f/d is the suffix.
    body = text[:-1] if text[-1] in "fFdD" else text
    if "NaN" in body:
        return float("nan")
    if "Infinity" in body:
        return float("-inf") if body.startswith("-") else float("inf")
    if "x" in body or "X" in body:
        return float.fromhex(body)
    try:
        return float(body)
    except (ValueError, OverflowError):  # pragma: no cover - the regex admits only parseable text
        return None


def parse_list(text: str) -> list[str]:
    """ConfigDef's LIST parsing: trim, empty -> [], else split on commas with surrounding whitespace."""
    trimmed = java_trim(text)
    if not trimmed:
        return []
    return _LIST_SEPARATOR.split(trimmed)


def parse_value(name: str, config_type: ConfigType, value: str) -> Any:
    """ConfigDef.parseType for a String value; raises ConfigError with Kafka's message."""
    trimmed = java_trim(value)
    if config_type is ConfigType.BOOLEAN:
        if trimmed.lower() == "true":
            return True
        if trimmed.lower() == "false":
            return False
        raise ConfigError(name, value, "Expected value to be either true or false")
    if config_type in (ConfigType.STRING, ConfigType.PASSWORD, ConfigType.CLASS):
        return trimmed
    if config_type is ConfigType.LIST:
        return parse_list(value)
    if config_type is ConfigType.DOUBLE:
        number = parse_java_double(trimmed)
    else:
        bounds = {
            ConfigType.SHORT: (-(1 << 15), (1 << 15) - 1),
            ConfigType.INT: (INT32_MIN, INT32_MAX),
            ConfigType.LONG: (INT64_MIN, INT64_MAX),
        }[config_type]
        number = parse_java_long(trimmed, *bounds)  # type: ignore[assignment]
    if number is None:
        raise ConfigError(name, value, f"Not a number of type {config_type.value}")
    return number


# ------------------------------------------------------------------------------------- validators

Validator = Callable[[str, Any], None]


def at_least(minimum: int) -> Validator:
    """ConfigDef.Range.atLeast."""
    return between(minimum, None)


def between(minimum: int | None, maximum: int | None) -> Validator:
    """ConfigDef.Range.between (NaN passes, as Java's comparisons make it)."""

    def check(name: str, value: Any) -> None:
        if minimum is not None and value < minimum:
            raise ConfigError(name, value, f"Value must be at least {minimum}")
        if maximum is not None and value > maximum:
            raise ConfigError(name, value, f"Value must be no more than {maximum}")

    return check


def valid_string(*allowed: str) -> Validator:
    """ConfigDef.ValidString.in (case-sensitive)."""

    def check(name: str, value: Any) -> None:
        if value not in allowed:
            raise ConfigError(name, value, "String must be one of: " + ", ".join(allowed))

    return check


def valid_list(*allowed: str) -> Validator:
    """ConfigDef.ValidList.in as of 3.9: every element must be allowed (an empty list passes)."""
    element = valid_string(*allowed)

    def check(name: str, value: Any) -> None:
        for item in value:
            element(name, item)

    return check


_REPLICA_PAIR = re.compile(r"(?:[0-9]+:[0-9]+)?")


def throttled_replica_list(name: str, value: Any) -> None:
    """ThrottledReplicaListValidator: `*` alone, or partitionId:brokerId pairs (empty items allowed)."""
    proposed = [java_trim(item) for item in value]
    if not (all(_REPLICA_PAIR.fullmatch(item) for item in proposed) or "".join(proposed) == "*"):
        raise ConfigError(
            name,
            value,
            f"{name} must be the literal '*' or a list of replicas in the following format: "
            "[partitionId]:[brokerId],[partitionId]:[brokerId],...",
        )


def _java_split_dots(text: str) -> list[str]:
    """String.split(".") in Java: trailing empty strings are dropped."""
    parts = text.split(".")
    while parts and parts[-1] == "":
        parts.pop()
    return parts or ([text] if text == "" else [])


_VERSION_KEYS: Final = frozenset(
    {mv.name for mv in mvs.ALL_VERSIONS} | {mv.release for mv in mvs.ALL_VERSIONS}
)


def is_valid_metadata_version(text: str) -> bool:
    """MetadataVersion.fromVersionString succeeds (`2.8`, `2.8.1`, `3.7-IV4`, `0.10.0-IV1`)."""
    segments = _java_split_dots(text)
    keep = 3 if text.startswith("0.") else 2
    key = text if keep >= len(segments) else ".".join(segments[:keep])
    return key in _VERSION_KEYS


def metadata_version_validator(name: str, value: Any) -> None:
    """MetadataVersionValidator."""
    if not is_valid_metadata_version(value):
        raise ConfigError(name, value, f"Version {value} is not a valid version")


def gzip_level(name: str, value: Any) -> None:
    """CompressionType.GZIP.levelValidator: 1..9 or the Deflater default -1."""
    if value > 9 or (value < 1 and value != -1):
        raise ConfigError(name, value, "Value must be between 1 and 9 or equal to -1")


# ------------------------------------------------------------------------------------- definitions


@dataclass(frozen=True, slots=True)
class ConfigDef:
    """One ConfigDef.define: name, type, default (as ConfigDef.convertToString gives it), validator."""

    name: str
    type: ConfigType
    default: str | None
    validator: Validator | None = None


_L = ConfigType.LONG
_I = ConfigType.INT
_B = ConfigType.BOOLEAN
_S = ConfigType.STRING
_LONG_MAX = str(INT64_MAX)

# LogConfig's CONFIG in Kafka 3.9, in definition order (ConfigDef.parse reports the first bad key in
# this order). Defaults are those of a broker with default settings.
TOPIC_CONFIGS: Final[tuple[ConfigDef, ...]] = (
    ConfigDef("segment.bytes", _I, "1073741824", at_least(14)),  # LegacyRecord.RECORD_OVERHEAD_V0
    ConfigDef("segment.ms", _L, "604800000", at_least(1)),
    ConfigDef("segment.jitter.ms", _L, "0", at_least(0)),
    ConfigDef("segment.index.bytes", _I, "10485760", at_least(4)),
    ConfigDef("flush.messages", _L, _LONG_MAX, at_least(1)),
    ConfigDef("flush.ms", _L, _LONG_MAX, at_least(0)),
    ConfigDef("retention.bytes", _L, "-1"),
    ConfigDef("retention.ms", _L, "604800000", at_least(-1)),
    ConfigDef("max.message.bytes", _I, "1048588", at_least(0)),
    ConfigDef("index.interval.bytes", _I, "4096", at_least(0)),
    ConfigDef("delete.retention.ms", _L, "86400000", at_least(0)),
    ConfigDef("min.compaction.lag.ms", _L, "0", at_least(0)),
    ConfigDef("max.compaction.lag.ms", _L, _LONG_MAX, at_least(1)),
    ConfigDef("file.delete.delay.ms", _L, "60000", at_least(0)),
    ConfigDef("min.cleanable.dirty.ratio", ConfigType.DOUBLE, "0.5", between(0, 1)),
    ConfigDef("cleanup.policy", ConfigType.LIST, "delete", valid_list("compact", "delete")),
    ConfigDef("unclean.leader.election.enable", _B, "false"),
    ConfigDef("min.insync.replicas", _I, "1", at_least(1)),
    ConfigDef(
        "compression.type",
        _S,
        "producer",
        valid_string("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    ),
    ConfigDef("compression.gzip.level", _I, "-1", gzip_level),
    ConfigDef("compression.lz4.level", _I, "9", between(1, 17)),
    ConfigDef("compression.zstd.level", _I, "3", between(-131072, 22)),
    ConfigDef("preallocate", _B, "false"),
    ConfigDef("message.format.version", _S, "3.0-IV1", metadata_version_validator),
    ConfigDef("message.timestamp.type", _S, "CreateTime", valid_string("CreateTime", "LogAppendTime")),
    ConfigDef("message.timestamp.difference.max.ms", _L, _LONG_MAX, at_least(0)),
    ConfigDef("message.timestamp.before.max.ms", _L, _LONG_MAX, at_least(0)),
    ConfigDef("message.timestamp.after.max.ms", _L, _LONG_MAX, at_least(0)),
    ConfigDef("leader.replication.throttled.replicas", ConfigType.LIST, "", throttled_replica_list),
    ConfigDef("follower.replication.throttled.replicas", ConfigType.LIST, "", throttled_replica_list),
    ConfigDef("message.downconversion.enable", _B, "true"),
    ConfigDef("remote.storage.enable", _B, "false"),
    ConfigDef("local.retention.ms", _L, "-2", at_least(-2)),
    ConfigDef("local.retention.bytes", _L, "-2", at_least(-2)),
    ConfigDef("remote.log.copy.disable", _B, "false"),
    ConfigDef("remote.log.delete.on.disable", _B, "false"),
)
TOPIC_CONFIG_DEFS: Final[dict[str, ConfigDef]] = {d.name: d for d in TOPIC_CONFIGS}

# KafkaConfig's LIST-typed keys with their defaults (convertToString): the broker keys APPEND and
# SUBTRACT accept. Listener-prefixed names are not keys of KafkaConfig, so Kafka refuses them too.
BROKER_LIST_CONFIGS: Final[dict[str, str | None]] = {
    "log.cleanup.policy": "delete",
    "metric.reporters": "",
    "kafka.metrics.reporters": "",
    "ssl.cipher.suites": "",
    "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
    "sasl.enabled.mechanisms": "GSSAPI",
    "sasl.kerberos.principal.to.local.rules": "DEFAULT",
    "sasl.oauthbearer.expected.audience": None,
    "process.roles": "",
    "controller.quorum.voters": "",
    "controller.quorum.bootstrap.servers": "",
    "group.coordinator.rebalance.protocols": "classic",
    "group.consumer.assignors": (
        "org.apache.kafka.coordinator.group.assignor.UniformAssignor,"
        "org.apache.kafka.coordinator.group.assignor.RangeAssignor"
    ),
}

# DynamicBrokerConfig.AllDynamicConfigs of Kafka 3.9, by the component that reconfigures them.
_SSL_RECONFIGURABLE = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates",
})  # fmt: skip
_LOG_CLEANER = frozenset({
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size", "message.max.bytes", "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.backoff.ms",
})  # fmt: skip
# ServerTopicConfigSynonyms.TOPIC_CONFIG_SYNONYMS values: the broker-level name of each topic config.
TOPIC_CONFIG_SYNONYMS: Final[dict[str, str]] = {
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "segment.jitter.ms": "log.roll.jitter.ms",
    "segment.index.bytes": "log.index.size.max.bytes",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms",
    "max.message.bytes": "message.max.bytes",
    "index.interval.bytes": "log.index.interval.bytes",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "cleanup.policy": "log.cleanup.policy",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "min.insync.replicas": "min.insync.replicas",
    "compression.type": "compression.type",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.zstd.level": "compression.zstd.level",
    "preallocate": "log.preallocate",
    "message.format.version": "log.message.format.version",
    "message.timestamp.type": "log.message.timestamp.type",
    "message.timestamp.difference.max.ms": "log.message.timestamp.difference.max.ms",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "message.downconversion.enable": "log.message.downconversion.enable",
    "local.retention.ms": "log.local.retention.ms",
    "local.retention.bytes": "log.local.retention.bytes",
}
_THREAD_POOLS = frozenset({"num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
                           "background.threads"})  # fmt: skip
_LISTENER = frozenset({
    "advertised.listeners", "listeners", "listener.security.protocol.map",
    "principal.builder.class", "ssl.protocol", "ssl.provider", "ssl.cipher.suites", "ssl.enabled.protocols",
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm", "ssl.endpoint.identification.algorithm",
    "ssl.secure.random.implementation", "ssl.client.auth", "ssl.engine.factory.class",
    "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config", "sasl.enabled.mechanisms",
    "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd", "sasl.kerberos.ticket.renew.window.factor",
    "sasl.kerberos.ticket.renew.jitter", "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.principal.to.local.rules", "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter", "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.buffer.seconds",
    "max.connections", "max.connection.creation.rate", "num.network.threads",
})  # fmt: skip
_SOCKET_SERVER = frozenset({"max.connections.per.ip", "max.connections.per.ip.overrides", "max.connections",
                            "max.connection.creation.rate"})  # fmt: skip
_PRODUCER_STATE = frozenset({"producer.id.expiration.ms", "transaction.partition.verification.enable"})
_REMOTE_LOG = frozenset({
    "remote.log.index.file.cache.total.size.bytes", "remote.fetch.max.wait.ms",
    "remote.log.manager.copy.max.bytes.per.second", "remote.log.manager.fetch.max.bytes.per.second",
})  # fmt: skip
DYNAMIC_BROKER_CONFIGS: Final[frozenset[str]] = (
    _SSL_RECONFIGURABLE
    | _LOG_CLEANER
    | frozenset(TOPIC_CONFIG_SYNONYMS.values())
    | _THREAD_POOLS
    | frozenset({"metric.reporters"})
    | _LISTENER
    | _SOCKET_SERVER
    | _PRODUCER_STATE
    | _REMOTE_LOG
)
_CLUSTER_LEVEL_LISTENER_CONFIGS: Final = frozenset({"max.connections", "max.connection.creation.rate",
                                                   "num.network.threads"})  # fmt: skip
# Settable only on one broker (ids "0", "1"...), not on the cluster default "".
PER_BROKER_CONFIGS: Final[frozenset[str]] = (
    _SSL_RECONFIGURABLE | _LISTENER
) - _CLUSTER_LEVEL_LISTENER_CONFIGS
_LISTENER_PREFIX = re.compile(r"listener\.name\.[^.]*\.(.*)", re.DOTALL)


def is_dynamic_broker_config(name: str) -> bool:
    """Whether a broker may take `name` as a dynamic config (DynamicBrokerConfig.validateConfigs' first rule).

    Listener-prefixed keys (`listener.name.x.<key>`) are always accepted. Kafka's controller does not
    enforce this: brokers check it before forwarding (ConfigAdminManager.preprocess).
    """
    return name in DYNAMIC_BROKER_CONFIGS or _LISTENER_PREFIX.fullmatch(name) is not None


def is_per_broker_config(name: str) -> bool:
    """Keys a broker accepts only for one broker id, not for the cluster default resource ""."""
    match = _LISTENER_PREFIX.fullmatch(name)
    if match is not None:
        return match.group(1) not in _CLUSTER_LEVEL_LISTENER_CONFIGS
    return name in PER_BROKER_CONFIGS


def config_type(resource_type: int, name: str) -> ConfigType | None:
    """KafkaConfigSchema's view of a key's type: LIST for the keys APPEND/SUBTRACT may touch."""
    if resource_type == RESOURCE_TOPIC:
        found = TOPIC_CONFIG_DEFS.get(name)
        return found.type if found is not None else None
    if resource_type == RESOURCE_BROKER and name in BROKER_LIST_CONFIGS:
        return ConfigType.LIST
    return None


def config_default(resource_type: int, name: str) -> str | None:
    """KafkaConfigSchema.getDefault: the default as a string, None when there is none."""
    if resource_type == RESOURCE_TOPIC:
        found = TOPIC_CONFIG_DEFS.get(name)
        return found.default if found is not None else None
    if resource_type == RESOURCE_BROKER:
        return BROKER_LIST_CONFIGS.get(name)
    return None


# ------------------------------------------------------------------------------------- topic validation


def validate_topic_configs(
    configs: Mapping[str, str | None],
    *,
    existing: Mapping[str, str] | None = None,
    remote_storage_system_enabled: bool = False,
) -> list[ConfigProblem]:
    """What Kafka 3.9's controller says about a topic's full config map; [] when it is accepted.

    The checks of ControllerConfigurationValidator + LogConfig.validate, in their order: null values,
    unknown names, each value in definition order (type, then validator), min/max compaction lag,
    remote storage rules. Kafka stops at the first failure, so report `problems[0]` to clients; the
    rest are extra findings. `existing` is the topic's current map (for turning remote storage off);
    `remote_storage_system_enabled` mirrors the controller's remote.log.storage.system.enable.
    """
    nulls = [name for name, value in configs.items() if value is None]
    if nulls:
        return [ConfigProblem("Null value not supported for topic configs: " + ",".join(nulls))]
    values: dict[str, str] = {name: value for name, value in configs.items() if value is not None}
    problems = [
        ConfigProblem(f"Unknown topic config name: {name}", name)
        for name in values
        if name not in TOPIC_CONFIG_DEFS
    ]
    parsed: dict[str, Any] = {}
    for definition in TOPIC_CONFIGS:
        value, message = _parse_checked(definition, values.get(definition.name, definition.default))
        if message is not None:
            problems.append(ConfigProblem(message, definition.name))
            continue
        parsed[definition.name] = value
    if problems:
        return problems
    try:
        _check_cross_values(parsed, existing or {}, remote_storage_system_enabled)
    except ConfigError as exc:
        problems.append(ConfigProblem(exc.message, exc.name))
    return problems


_CHECKED: dict[tuple[str, str | None], tuple[Any, str | None]] = {}
_CHECKED_LIMIT: Final = 8192


def _parse_checked(definition: ConfigDef, text: str | None) -> tuple[Any, str | None]:
    """(parsed value, None) or (None, ConfigException message) for one key's text: type, then validator.

    Memoized: every request re-validates the topic's whole map (~36 keys), which rarely changes. Parsing
    and validators are pure; parsed values are shared, so callers must not mutate them.
    """
    key = (definition.name, text)
    found = _CHECKED.get(key)
    if found is not None:
        return found
    try:
        value = parse_value(definition.name, definition.type, text) if text is not None else None
        if definition.validator is not None:
            definition.validator(definition.name, value)
        found = (value, None)
    except ConfigError as exc:
        found = (None, exc.message)
    if len(_CHECKED) >= _CHECKED_LIMIT:  # values set once each (the benchmark's) must not grow it forever
        _CHECKED.clear()
    _CHECKED[key] = found
    return found


def _check_cross_values(parsed: Mapping[str, Any], existing: Mapping[str, str], system_enabled: bool) -> None:
    """LogConfig.validateValues + validateTopicLogConfigValues (remote storage)."""
    min_lag, max_lag = parsed["min.compaction.lag.ms"], parsed["max.compaction.lag.ms"]
    if min_lag > max_lag:
        raise ConfigError(
            "min.compaction.lag.ms",
            bare=f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > "
            f"max.compaction.lag.ms ({max_lag})",
        )
    if not parsed["remote.storage.enable"]:
        was_enabled = existing.get("remote.storage.enable", "false").lower() == "true"
        if was_enabled and not parsed["remote.log.delete.on.disable"]:
            raise ConfigError(
                "remote.storage.enable",
                bare="It is invalid to disable remote storage without deleting remote data. If you want to "
                "keep the remote data and turn to read only, please set `remote.storage.enable=true,"
                "remote.log.copy.disable=true`. If you want to disable remote storage and delete all remote "
                "data, please set `remote.storage.enable=false,remote.log.delete.on.disable=true`.",
            )
        return
    if not system_enabled:
        raise ConfigError(
            "remote.storage.enable",
            bare="Tiered Storage functionality is disabled in the broker. Topic cannot be configured with "
            "remote log storage.",
        )
    if "compact" in ",".join(parsed["cleanup.policy"]).lower():
        raise ConfigError("cleanup.policy", bare="Remote log storage is unsupported for the compacted topics")
    for total_key, local_key, unlimited in (
        ("retention.bytes", "local.retention.bytes", lambda v: v <= -1),
        ("retention.ms", "local.retention.ms", lambda v: v == -1),
    ):
        total, local = parsed[total_key], parsed[local_key]
        if not unlimited(total) and local != -2:
            if local == -1:
                raise ConfigError(
                    local_key, local, f"Value must not be -1 as {total_key} value is set as {total}."
                )
            if local > total:
                raise ConfigError(
                    local_key, local, f"Value must not be more than {total_key} property value: {total}"
                )
    if parsed["remote.log.copy.disable"]:
        for total_key, local_key in (
            ("retention.bytes", "local.retention.bytes"),
            ("retention.ms", "local.retention.ms"),
        ):
            if parsed[local_key] != -2 and parsed[local_key] != parsed[total_key]:
                raise ConfigError(
                    local_key,
                    bare=f"When `remote.log.copy.disable` is set to true, the `{local_key}` and `{total_key}` "
                    "must be set to the identical value because there will be no more logs copied to the "
                    "remote storage.",
                )
