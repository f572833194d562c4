"""Effective topic configurations for CreateTopics v5+ results, and the check of a new topic's configs.

Validation is bridge.handlers.config_defs.validate_topic_configs (Kafka 3.9's LogConfig rules). The
effective values follow KafkaConfigSchema.resolveEffectiveTopicConfigs: the topic's own value, else a
dynamic broker value of the controller node, else the dynamic cluster default (each through Kafka's
synonym list, with unit conversions), else the ConfigDef default. The controller's static
server.properties are not known here, so STATIC_BROKER_CONFIG never appears.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from bridge.handlers._common import ApiError
from bridge.handlers.config_defs import TOPIC_CONFIGS, ConfigDef, validate_topic_configs
from migrate.kraft.image import RESOURCE_TYPE_BROKER, MetadataImage

# DescribeConfigsResponse.ConfigSource ids (KafkaConfigSchema.translateConfigSource).
SOURCE_TOPIC_CONFIG = 1
SOURCE_DYNAMIC_BROKER_CONFIG = 2
SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG = 3
SOURCE_STATIC_BROKER_CONFIG = 4
SOURCE_DEFAULT_CONFIG = 5


# ---------------------------------------------------------------- synonyms


def _hours(value: str) -> str:
    return str(int(value) * 3_600_000)


def _minutes(value: str) -> str:
    return str(int(value) * 60_000)


def _same(value: str) -> str:
    return value


Synonym = tuple[str, Callable[[str], str]]


def _log(*names: str) -> tuple[Synonym, ...]:
    return tuple((f"log.{n}", _same) for n in names)


def _plain(name: str) -> tuple[Synonym, ...]:
    return ((name, _same),)


# ServerTopicConfigSynonyms.ALL_TOPIC_CONFIG_SYNONYMS of Kafka 3.9, in priority order.
SYNONYMS: dict[str, tuple[Synonym, ...]] = {
    "segment.bytes": _log("segment.bytes"),
    "segment.ms": (("log.roll.ms", _same), ("log.roll.hours", _hours)),
    "segment.jitter.ms": (("log.roll.jitter.ms", _same), ("log.roll.jitter.hours", _hours)),
    "segment.index.bytes": _log("index.size.max.bytes"),
    "flush.messages": _log("flush.interval.messages"),
    "flush.ms": _log("flush.interval.ms", "flush.scheduler.interval.ms"),
    "retention.bytes": _log("retention.bytes"),
    "retention.ms": (
        ("log.retention.ms", _same),
        ("log.retention.minutes", _minutes),
        ("log.retention.hours", _hours),
    ),
    "max.message.bytes": _plain("message.max.bytes"),
    "index.interval.bytes": _log("index.interval.bytes"),
    "delete.retention.ms": _log("cleaner.delete.retention.ms"),
    "min.compaction.lag.ms": _log("cleaner.min.compaction.lag.ms"),
    "max.compaction.lag.ms": _log("cleaner.max.compaction.lag.ms"),
    "file.delete.delay.ms": _log("segment.delete.delay.ms"),
    "min.cleanable.dirty.ratio": _log("cleaner.min.cleanable.ratio"),
    "cleanup.policy": _log("cleanup.policy"),
    "unclean.leader.election.enable": _plain("unclean.leader.election.enable"),
    "min.insync.replicas": _plain("min.insync.replicas"),
    "compression.type": _plain("compression.type"),
    "compression.gzip.level": _plain("compression.gzip.level"),
    "compression.lz4.level": _plain("compression.lz4.level"),
    "compression.zstd.level": _plain("compression.zstd.level"),
    "preallocate": _log("preallocate"),
    "message.format.version": _log("message.format.version"),
    "message.timestamp.type": _log("message.timestamp.type"),
    "message.timestamp.difference.max.ms": _log("message.timestamp.difference.max.ms"),
    "message.timestamp.before.max.ms": _log("message.timestamp.before.max.ms"),
    "message.timestamp.after.max.ms": _log("message.timestamp.after.max.ms"),
    "message.downconversion.enable": _log("message.downconversion.enable"),
    "local.retention.ms": _log("local.retention.ms"),
    "local.retention.bytes": _log("local.retention.bytes"),
}


# ---------------------------------------------------------------- validation and effective values


def validate_creation_configs(configs: Mapping[str, str]) -> ApiError | None:
    """LogConfig.validate for a new topic's configs: Kafka's first complaint as an ApiError, or None."""
    problems = validate_topic_configs(configs)
    if not problems:
        return None
    return ApiError(problems[0].error or ErrorCode.invalid_config, problems[0].message)


@dataclass(frozen=True, slots=True)
class EffectiveConfig:
    """One entry of a CreateTopics v5+ result: name, value and ConfigSource id."""

    name: str
    value: str | None
    source: int


def effective_topic_configs(
    image: MetadataImage, node_id: int, creation_configs: Mapping[str, str]
) -> tuple[EffectiveConfig, ...]:
    """ConfigurationControlManager.computeEffectiveTopicConfigs, sorted by name."""
    cluster = image.configs.get((RESOURCE_TYPE_BROKER, ""), {})
    node = image.configs.get((RESOURCE_TYPE_BROKER, str(node_id)), {})
    # Keyed by the broker configs' content (the image's maps change in place): the same tuple comes back
    # for every topic created without configs while they stay as they are.
    key = (tuple(node.items()), tuple(cluster.items()))
    inherited = _INHERITED.get(key)
    if inherited is None:
        inherited = tuple(_resolve(d.name, d.default, {}, node, cluster) for d in _BY_NAME)
        if len(_INHERITED) >= 64:
            _INHERITED.clear()
        _INHERITED[key] = inherited
    if not creation_configs:
        return inherited
    return tuple(
        EffectiveConfig(c.name, creation_configs[c.name], SOURCE_TOPIC_CONFIG)
        if c.name in creation_configs
        else c
        for c in inherited
    )


_INHERITED: dict[
    tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]], tuple[EffectiveConfig, ...]
] = {}


def _name(definition: ConfigDef) -> str:
    return definition.name


_BY_NAME = sorted(TOPIC_CONFIGS, key=_name)


def _resolve(
    name: str,
    default: str | None,
    topic: Mapping[str, str],
    node: Mapping[str, str],
    cluster: Mapping[str, str],
) -> EffectiveConfig:
    if name in topic:
        return EffectiveConfig(name, topic[name], SOURCE_TOPIC_CONFIG)
    sources = ((node, SOURCE_DYNAMIC_BROKER_CONFIG), (cluster, SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG))
    for values, source in sources:
        for synonym, convert in SYNONYMS.get(name, ()):
            if synonym in values:
                try:
                    return EffectiveConfig(name, convert(values[synonym]), source)
                except ValueError:
                    return EffectiveConfig(name, values[synonym], source)
    return EffectiveConfig(name, default, SOURCE_DEFAULT_CONFIG)


def broker_default(image: MetadataImage, node_id: int, name: str) -> str | None:
    """A broker config as the controller sees it: its own dynamic value, else the cluster default."""
    for entity in (str(node_id), ""):
        value = image.configs.get((RESOURCE_TYPE_BROKER, entity), {}).get(name)
        if value is not None:
            return value
    return None
