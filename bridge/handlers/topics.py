"""CreateTopics (19), DeleteTopics (20) and CreatePartitions (37) as Kafka 3.9's KRaft controller answers them.

Each handler does what ControllerApis does before calling the controller (duplicate names, the
`__cluster_metadata` topic, names vs ids) and then what ReplicationControlManager does (name rules,
existing topics, configs, manual assignments, striped placement, PartitionRecords). Authorization is
not modelled: the principal may do everything. Requests are answered in request order where Kafka's
order is a hash-set order or a deliberate shuffle.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i16, i32

from bridge.api import ControllerHandler, ControllerResult, HandlerContext, RecordAndVersion
from bridge.brokers.partition_change import default_directory as broker_default_directory
from bridge.handlers import topic_configs
from bridge.handlers._common import (
    MAX_RECORDS_PER_USER_OP,
    METADATA_TOPIC_ID,
    NO_THROTTLE,
    NONE,
    TOO_LARGE,
    ZERO_UUID,
    ApiError,
    KafkaApiException,
    build,
    is_active,
    nested,
)
from bridge.handlers.placement import (
    InvalidReplicationFactorError,
    JavaRandom,
    PlacementRandom,
    place_replicas,
    usable_brokers,
)
from bridge.kafka import protocol
from migrate.kraft import records as rec
from migrate.kraft.image import (
    MIGRATING_DIRECTORY,
    RESOURCE_TYPE_TOPIC,
    MetadataImage,
)

CREATE_TOPICS = 19
DELETE_TOPICS = 20
CREATE_PARTITIONS = 37

CLUSTER_METADATA_TOPIC = "__cluster_metadata"
MAX_NAME_LENGTH = 249
_LEGAL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


# ---------------------------------------------------------------- topic names (Kafka's Topic class)


def topic_name_error(name: str) -> str | None:
    """Topic.validate: why `name` is not a legal topic name, or None."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > MAX_NAME_LENGTH:
        return (
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, Topic name: {name}"
        )
    if not set(name) <= _LEGAL_CHARS:
        return f"Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
    return None


def has_collision_chars(name: str) -> bool:
    return "." in name or "_" in name


def unify_collision_chars(name: str) -> str:
    return name.replace(".", "_")


def _collisions(image: MetadataImage) -> dict[str, str]:
    """Existing topics whose names contain '.' or '_', by name with '.' replaced by '_' (first name wins)."""
    found: dict[str, str] = {}
    for name in sorted(image.topics_by_name):
        if has_collision_chars(name):
            found.setdefault(unify_collision_chars(name), name)
    return found


class _TakenIds:
    """The image's topic ids and those given out by this request (without copying the image's)."""

    __slots__ = ("_image", "_new")

    def __init__(self, image_ids: Mapping[uuid.UUID, Any]) -> None:
        self._image = image_ids
        self._new: set[uuid.UUID] = set()

    def __contains__(self, topic_id: object) -> bool:
        return topic_id in self._new or topic_id in self._image

    def add(self, topic_id: uuid.UUID) -> None:
        self._new.add(topic_id)


def new_topic_id(ctx: HandlerContext, taken: _TakenIds) -> uuid.UUID:
    """Uuid.randomUuid: never the zero or metadata-topic id, nor one whose base64 form starts with '-'."""
    while True:
        candidate = ctx.new_uuid()
        if candidate in (ZERO_UUID, METADATA_TOPIC_ID) or candidate.bytes[0] >> 2 == 62 or candidate in taken:
            continue
        taken.add(candidate)
        return candidate


# ---------------------------------------------------------------- partitions


def default_directory(image: MetadataImage, broker_id: int) -> uuid.UUID:
    """KRaftClusterDescriber.defaultDir: the broker's only log dir, MIGRATING, or UNASSIGNED."""
    if not image.metadata_version.is_directory_assignment_supported():
        return MIGRATING_DIRECTORY
    return broker_default_directory(image, broker_id)


def partition_record(
    image: MetadataImage, topic_id: uuid.UUID, partition_id: int, replicas: Sequence[int], isr: Sequence[int]
) -> RecordAndVersion:
    """PartitionRegistration.toRecord of a new partition: leader = first ISR member, epochs 0."""
    mv = image.metadata_version
    record = rec.PartitionRecord(
        partition_id=partition_id,
        topic_id=topic_id,
        replicas=list(replicas),
        isr=list(isr),
        removing_replicas=[],
        adding_replicas=[],
        leader=isr[0],
        leader_recovery_state=0,
        leader_epoch=0,
        partition_epoch=0,
    )
    if mv.is_directory_assignment_supported():
        record.directories = [broker_default_directory(image, b) for b in replicas]
    return record, mv.partition_record_version()


def validate_manual_assignment(
    image: MetadataImage, replicas: Sequence[int], replication_factor: int | None
) -> None:
    """ReplicationControlManager.validateManualPartitionAssignment (INVALID_REPLICA_ASSIGNMENT)."""
    if not replicas:
        raise KafkaApiException(
            ErrorCode.invalid_replica_assignment,
            "The manual partition assignment includes an empty replica list.",
        )
    previous = None
    for broker_id in sorted(replicas):
        if broker_id not in image.cluster.brokers:
            raise KafkaApiException(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes broker {broker_id}, but no such broker is registered.",
            )
        if broker_id == previous:
            raise KafkaApiException(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes the broker {previous} more than once.",
            )
        previous = broker_id
    if replication_factor is not None and len(replicas) != replication_factor:
        raise KafkaApiException(
            ErrorCode.invalid_replica_assignment,
            f"The manual partition assignment includes a partition with {len(replicas)} replica(s), but this is "
            f"not consistent with previous partitions, which have {replication_factor} replica(s).",
        )


class _TooManyRecords(Exception):
    """BoundedListTooLongException: the operation would exceed MAX_RECORDS_PER_USER_OP records."""


@dataclass(slots=True)
class _Records:
    """A record list bounded like Kafka's BoundedList for user operations."""

    items: list[RecordAndVersion] = field(default_factory=list)

    def extend(self, more: Sequence[RecordAndVersion]) -> None:
        if len(self.items) + len(more) > MAX_RECORDS_PER_USER_OP:
            raise _TooManyRecords
        self.items.extend(more)


# ---------------------------------------------------------------- CreateTopics


@dataclass(slots=True)
class _Created:
    topic_id: uuid.UUID
    num_partitions: int
    replication_factor: int
    configs: tuple[topic_configs.EffectiveConfig, ...]


def _int_config(image: MetadataImage, node_id: int, name: str, fallback: int) -> int:
    value = topic_configs.broker_default(image, node_id, name)
    try:
        return int(value) if value is not None else fallback
    except ValueError:
        return fallback


def create_topics(
    ctx: HandlerContext, request: Any, *, rng: PlacementRandom | None = None
) -> ControllerResult:
    """ControllerApis.createTopics + ReplicationControlManager.createTopics."""
    image = ctx.image
    seen: set[str] = set()
    duplicates: list[str] = []
    for topic in request.topics:
        if topic.name in seen and topic.name not in duplicates:
            duplicates.append(topic.name)
        seen.add(topic.name)
    rejected = [n for n in dict.fromkeys(t.name for t in request.topics) if n == CLUSTER_METADATA_TOPIC]
    topics = [t for t in request.topics if t.name not in duplicates and t.name != CLUSTER_METADATA_TOPIC]

    errors: dict[str, ApiError] = {}
    created: dict[str, _Created] = {}
    records = _Records()
    placer_rng = rng if rng is not None else JavaRandom()
    collisions: dict[str, str] | None = None  # built only when a name needs it (it scans every topic)
    taken_ids = _TakenIds(image.topics_by_id)
    try:
        for topic in topics:
            problem = topic_name_error(topic.name)
            if problem is not None:
                errors[topic.name] = ApiError(ErrorCode.invalid_topic_exception, problem)
            if has_collision_chars(topic.name):
                collisions = _collisions(image) if collisions is None else collisions
                if unify_collision_chars(topic.name) in collisions:
                    errors[topic.name] = ApiError(
                        ErrorCode.invalid_topic_exception,
                        f"Topic '{topic.name}' collides with existing topic: {collisions[unify_collision_chars(topic.name)]}",
                    )
            if topic.name in image.topics_by_name:
                errors[topic.name] = ApiError(
                    ErrorCode.topic_already_exists, f"Topic '{topic.name}' already exists."
                )
        for topic in topics:
            if topic.name in errors:
                continue
            nulls = [c.name for c in topic.configs if c.value is None]
            if nulls:
                errors[topic.name] = ApiError(
                    ErrorCode.invalid_config, "Null value not supported for topic configs: " + ",".join(nulls)
                )
        for topic in topics:
            if topic.name in errors:
                continue
            configs = {c.name: c.value for c in topic.configs}
            invalid = topic_configs.validate_creation_configs(configs) if configs else None
            if invalid is not None:
                errors[topic.name] = invalid
                continue
            try:
                created[topic.name] = _create_topic(ctx, topic, configs, records, placer_rng, taken_ids)
            except KafkaApiException as exc:
                errors[topic.name] = exc.error
    except _TooManyRecords:
        return _create_topics_failed(ctx, request, TOO_LARGE)

    response_cls = protocol.response_class(CREATE_TOPICS, ctx.api_version)
    result_cls = nested(response_cls, "CreatableTopicResult")
    config_cls = nested(response_cls, "CreatableTopicConfigs") if ctx.api_version >= 5 else None
    results = []
    if topics:
        for topic in topics:
            done = created.get(topic.name)
            if done is None:
                results.append(_topic_error(result_cls, topic.name, errors[topic.name]))
                continue
            entries = _config_entries(config_cls, done.configs) if config_cls is not None else ()
            results.append(
                build(
                    result_cls,
                    name=topic.name,
                    topic_id=done.topic_id,
                    error_code=ErrorCode.none,
                    error_message=None,
                    topic_config_error_code=i16(0),
                    num_partitions=i32(done.num_partitions),
                    replication_factor=i16(done.replication_factor),
                    configs=entries,
                )
            )
    results += [
        _topic_error(result_cls, n, ApiError(ErrorCode.invalid_request, "Duplicate topic name."))
        for n in duplicates
    ]
    results += [
        _topic_error(result_cls, n, ApiError(ErrorCode.topic_authorization_failed, "Authorization failed."))
        for n in rejected
    ]
    response = build(response_cls, throttle_time=NO_THROTTLE, topics=tuple(results))
    kept = [] if request.validate_only else records.items
    return ControllerResult(kept, response)


_CONFIG_ENTRIES: dict[tuple[type, topic_configs.EffectiveConfig], Any] = {}
_ENTRY_TUPLES: dict[tuple[type, int], tuple[tuple[topic_configs.EffectiveConfig, ...], tuple[Any, ...]]] = {}


def _config_entries(config_cls: type, configs: tuple[topic_configs.EffectiveConfig, ...]) -> tuple[Any, ...]:
    """The response entries of `configs`; the same tuple again for the same `configs` object (a topic
    created without configs gets the tuple effective_topic_configs keeps)."""
    key = (config_cls, id(configs))
    found = _ENTRY_TUPLES.get(key)
    if found is not None and found[0] is configs:  # the id is that object's: it is held here
        return found[1]
    entries = tuple(_config_entry(config_cls, c) for c in configs)
    if len(_ENTRY_TUPLES) >= 64:
        _ENTRY_TUPLES.clear()
    _ENTRY_TUPLES[key] = (configs, entries)
    return entries


def _config_entry(config_cls: type, config: topic_configs.EffectiveConfig) -> Any:
    """One CreatableTopicConfigs entry, shared between responses (kio entities are immutable): a new
    topic's ~36 effective configs are nearly always the same few."""
    key = (config_cls, config)
    entry = _CONFIG_ENTRIES.get(key)
    if entry is None:
        entry = config_cls(
            name=config.name,
            value=config.value,
            read_only=False,
            config_source=i8(config.source),
            is_sensitive=False,
        )
        if len(_CONFIG_ENTRIES) >= 4096:
            _CONFIG_ENTRIES.clear()
        _CONFIG_ENTRIES[key] = entry
    return entry


def _topic_error(result_cls: type[Any], name: str, error: ApiError) -> Any:
    return build(
        result_cls,
        name=name,
        topic_id=None,  # kio's form of Uuid.ZERO_UUID (same bytes on the wire)
        error_code=error.code,
        error_message=error.message,
        topic_config_error_code=i16(0),
        num_partitions=i32(-1),
        replication_factor=i16(-1),
        configs=(),
    )


def _create_topics_failed(ctx: HandlerContext, request: Any, error: ApiError) -> ControllerResult:
    """CreateTopicsRequest.getErrorResponse: every topic of the request gets the same error."""
    response_cls = protocol.response_class(CREATE_TOPICS, ctx.api_version)
    result_cls = nested(response_cls, "CreatableTopicResult")
    results = tuple(_topic_error(result_cls, t.name, error) for t in request.topics)
    return ControllerResult([], build(response_cls, throttle_time=NO_THROTTLE, topics=results))


def _create_topic(
    ctx: HandlerContext,
    topic: Any,
    configs: dict[str, str],
    records: _Records,
    rng: PlacementRandom,
    taken_ids: _TakenIds,
) -> _Created:
    """ReplicationControlManager.createTopic; raises KafkaApiException with Kafka's error."""
    image = ctx.image
    assignments: dict[int, tuple[list[int], list[int]]] = {}
    if topic.assignments:
        if topic.replication_factor != -1:
            raise KafkaApiException(
                ErrorCode.invalid_request,
                "A manual partition assignment was specified, but replication factor was not set to -1.",
            )
        if topic.num_partitions != -1:
            raise KafkaApiException(
                ErrorCode.invalid_request,
                "A manual partition assignment was specified, but numPartitions was not set to -1.",
            )
        replication_factor: int | None = None
        for assignment in topic.assignments:
            index = int(assignment.partition_index)
            if index in assignments:
                raise KafkaApiException(
                    ErrorCode.invalid_replica_assignment,
                    f"Found multiple manual partition assignments for partition {index}",
                )
            replicas = [int(b) for b in assignment.broker_ids]
            validate_manual_assignment(image, replicas, replication_factor)
            replication_factor = len(replicas)
            isr = [b for b in replicas if is_active(image, b)]
            if not isr:
                raise KafkaApiException(
                    ErrorCode.invalid_replica_assignment,
                    f"All brokers specified in the manual partition assignment for partition {index} are fenced "
                    "or in controlled shutdown.",
                )
            assignments[index] = (replicas, isr)
        if any(i not in assignments for i in range(len(assignments))):
            raise KafkaApiException(
                ErrorCode.invalid_replica_assignment,
                "partitions should be a consecutive 0-based integer sequence",
            )
    elif topic.replication_factor < -1 or topic.replication_factor == 0:
        raise KafkaApiException(
            ErrorCode.invalid_replication_factor,
            "Replication factor must be larger than 0, or -1 to use the default value.",
        )
    elif topic.num_partitions < -1 or topic.num_partitions == 0:
        raise KafkaApiException(
            ErrorCode.invalid_partitions, "Number of partitions was set to an invalid non-positive value."
        )
    else:
        num_partitions = (
            _int_config(image, ctx.node_id, "num.partitions", 1)
            if topic.num_partitions == -1
            else topic.num_partitions
        )
        factor = (
            _int_config(image, ctx.node_id, "default.replication.factor", 1)
            if topic.replication_factor == -1
            else topic.replication_factor
        )
        try:
            placed = place_replicas(usable_brokers(image), num_partitions, factor, rng)
        except InvalidReplicationFactorError as exc:
            raise KafkaApiException(
                ErrorCode.invalid_replication_factor,
                f"Unable to replicate the partition {factor} time(s): {exc}",
            ) from None
        for index, replicas in enumerate(placed):
            isr = [b for b in replicas if is_active(image, b)]
            if not isr:
                raise KafkaApiException(
                    ErrorCode.invalid_replication_factor,
                    f"Unable to replicate the partition {factor} time(s): All brokers are currently fenced or in "
                    "controlled shutdown.",
                )
            assignments[index] = (replicas, isr)
    topic_id = new_topic_id(ctx, taken_ids)
    new: list[RecordAndVersion] = [(rec.TopicRecord(name=topic.name, topic_id=topic_id), 0)]
    # ConfigRecords go after the TopicRecord and before the PartitionRecords, as in Kafka.
    existing = image.configs.get((RESOURCE_TYPE_TOPIC, topic.name), {})
    for name in sorted(configs):
        if existing.get(name) != configs[name]:
            new.append(
                (
                    rec.ConfigRecord(
                        resource_type=RESOURCE_TYPE_TOPIC,
                        resource_name=topic.name,
                        name=name,
                        value=configs[name],
                    ),
                    0,
                )
            )
    for index in sorted(assignments):
        replicas, isr = assignments[index]
        new.append(partition_record(image, topic_id, index, replicas, isr))
    records.extend(new)
    return _Created(
        topic_id=topic_id,
        num_partitions=len(assignments),
        replication_factor=len(assignments[0][0]),
        configs=topic_configs.effective_topic_configs(image, ctx.node_id, configs),
    )


# ---------------------------------------------------------------- DeleteTopics


@dataclass(slots=True)
class _Deletion:
    name: str | None
    topic_id: uuid.UUID
    error: ApiError


def delete_topics(ctx: HandlerContext, request: Any) -> ControllerResult:
    """ControllerApis.deleteTopics + ReplicationControlManager.deleteTopics (RemoveTopicRecord per topic)."""
    image = ctx.image
    out: list[_Deletion] = []
    names: dict[str, None] = {}
    duplicate_names: dict[str, None] = {}
    ids: dict[uuid.UUID, None] = {}
    duplicate_ids: dict[uuid.UUID, None] = {}

    def add_name(name: str) -> None:
        if name in duplicate_names or name in names:
            duplicate_names[name] = None
            names.pop(name, None)
        else:
            names[name] = None

    if ctx.api_version < 6:
        for name in request.topic_names:
            add_name(name)
    else:
        for state in request.topics:
            topic_id = state.topic_id or ZERO_UUID
            if state.name is None:
                if topic_id == ZERO_UUID:
                    out.append(
                        _Deletion(
                            None,
                            ZERO_UUID,
                            ApiError(ErrorCode.invalid_request, "Neither topic name nor id were specified."),
                        )
                    )
                elif topic_id in duplicate_ids or topic_id in ids:
                    duplicate_ids[topic_id] = None
                    ids.pop(topic_id, None)
                else:
                    ids[topic_id] = None
            elif topic_id == ZERO_UUID:
                add_name(state.name)
            else:
                out.append(
                    _Deletion(
                        state.name,
                        topic_id,
                        ApiError(
                            ErrorCode.invalid_request, "You may not specify both topic name and topic id."
                        ),
                    )
                )
    out += [
        _Deletion(n, ZERO_UUID, ApiError(ErrorCode.invalid_request, "Duplicate topic name."))
        for n in duplicate_names
    ]
    out += [
        _Deletion(None, i, ApiError(ErrorCode.invalid_request, "Duplicate topic id.")) for i in duplicate_ids
    ]

    to_delete: dict[uuid.UUID, str] = {}
    for topic_id in ids:
        topic = image.topics_by_id.get(topic_id)
        if topic is None:
            out.append(_Deletion(None, topic_id, ApiError.of(ErrorCode.unknown_topic_id)))
        else:
            to_delete[topic_id] = topic.name
    for name in names:
        found = image.topics_by_name.get(name)
        if found is None:
            out.append(_Deletion(name, ZERO_UUID, ApiError.of(ErrorCode.unknown_topic_or_partition)))
        elif found.topic_id in duplicate_ids or found.topic_id in to_delete:
            # A name that maps to an id also given: neither is deleted (Kafka's rule).
            duplicate_ids[found.topic_id] = None
            to_delete.pop(found.topic_id, None)
            out.append(
                _Deletion(
                    name,
                    found.topic_id,
                    ApiError(
                        ErrorCode.invalid_request,
                        "The provided topic name maps to an ID that was already supplied.",
                    ),
                )
            )
        else:
            to_delete[found.topic_id] = name

    if len(to_delete) > MAX_RECORDS_PER_USER_OP:
        return _delete_topics_failed(ctx, request, TOO_LARGE)
    records: list[RecordAndVersion] = [(rec.RemoveTopicRecord(topic_id=i), 0) for i in to_delete]
    out += [_Deletion(name, i, NONE) for i, name in to_delete.items()]
    return ControllerResult(records, _delete_response(ctx, out))


def _delete_response(ctx: HandlerContext, results: Sequence[_Deletion]) -> Any:
    response_cls = protocol.response_class(DELETE_TOPICS, ctx.api_version)
    result_cls = nested(response_cls, "DeletableTopicResult")
    entries = tuple(
        build(
            result_cls,
            name=r.name,
            topic_id=None if r.topic_id == ZERO_UUID else r.topic_id,
            error_code=r.error.code,
            error_message=r.error.message,
        )
        for r in results
    )
    return build(response_cls, throttle_time=NO_THROTTLE, responses=entries)


def _delete_topics_failed(ctx: HandlerContext, request: Any, error: ApiError) -> ControllerResult:
    """DeleteTopicsRequest.getErrorResponse: every topic of the request gets the same error."""
    if ctx.api_version < 6:
        results = [_Deletion(n, ZERO_UUID, error) for n in request.topic_names]
    else:
        results = [_Deletion(t.name, t.topic_id or ZERO_UUID, error) for t in request.topics]
    return ControllerResult([], _delete_response(ctx, results))


# ---------------------------------------------------------------- CreatePartitions


def create_partitions(
    ctx: HandlerContext, request: Any, *, rng: PlacementRandom | None = None
) -> ControllerResult:
    """ControllerApis.createPartitions + ReplicationControlManager.createPartitions."""
    seen: set[str] = set()
    duplicates: dict[str, None] = {}
    for topic in request.topics:
        if topic.name in seen:
            duplicates[topic.name] = None
        seen.add(topic.name)
    results: list[tuple[str, ApiError]] = [
        (n, ApiError(ErrorCode.invalid_request, "Duplicate topic name.")) for n in duplicates
    ]
    records = _Records()
    placer_rng = rng if rng is not None else JavaRandom()
    handled: set[str] = set()
    try:
        for topic in request.topics:
            if topic.name in duplicates or topic.name in handled:
                continue
            handled.add(topic.name)
            try:
                _create_partitions(ctx, topic, records, placer_rng)
                results.append((topic.name, NONE))
            except KafkaApiException as exc:
                results.append((topic.name, exc.error))
    except _TooManyRecords:
        error = TOO_LARGE
        results = [(t.name, error) for t in request.topics]
        records = _Records()
    response_cls = protocol.response_class(CREATE_PARTITIONS, ctx.api_version)
    result_cls = nested(response_cls, "CreatePartitionsTopicResult")
    response = build(
        response_cls,
        throttle_time=NO_THROTTLE,
        results=tuple(
            build(result_cls, name=name, error_code=e.code, error_message=e.message) for name, e in results
        ),
    )
    return ControllerResult([] if request.validate_only else records.items, response)


def _create_partitions(ctx: HandlerContext, topic: Any, records: _Records, rng: PlacementRandom) -> None:
    image = ctx.image
    info = image.topics_by_name.get(topic.name)
    if info is None:
        raise KafkaApiException(ErrorCode.unknown_topic_or_partition)
    current = len(info.partitions)
    count = int(topic.count)
    if count == current:
        raise KafkaApiException(ErrorCode.invalid_partitions, f"Topic already has {current} partition(s).")
    if count < current:
        raise KafkaApiException(
            ErrorCode.invalid_partitions,
            f"The topic {topic.name} currently has {current} partition(s); {count} would not be an increase.",
        )
    additional = count - current
    if topic.assignments is not None and len(topic.assignments) != additional:
        raise KafkaApiException(
            ErrorCode.invalid_replica_assignment,
            f"Attempted to add {additional} additional partition(s), but only {len(topic.assignments)} "
            "assignment(s) were specified.",
        )
    if not info.partitions:
        raise KafkaApiException(
            ErrorCode.unknown_server_error,
            f"Invalid state: topic {topic.name} appears to have no partitions.",
        )
    factor = len(info.partitions[min(info.partitions)].replicas)
    if topic.assignments is not None:
        placed = []
        for i, assignment in enumerate(topic.assignments):
            replicas = [int(b) for b in assignment.broker_ids]
            validate_manual_assignment(image, replicas, factor)
            if not any(is_active(image, b) for b in replicas):
                raise KafkaApiException(
                    ErrorCode.invalid_replica_assignment,
                    f"All brokers specified in the manual partition assignment for partition {current + i} are "
                    "fenced or in controlled shutdown.",
                )
            placed.append(replicas)
    else:
        try:
            placed = place_replicas(usable_brokers(image), additional, factor, rng)
        except InvalidReplicationFactorError as exc:
            raise KafkaApiException(ErrorCode.invalid_replication_factor, str(exc)) from None
    new: list[RecordAndVersion] = []
    for i, replicas in enumerate(placed):
        isr = [b for b in replicas if is_active(image, b)]
        if not isr:
            raise KafkaApiException(
                ErrorCode.invalid_replication_factor,
                f"Unable to replicate the partition {factor} time(s): All brokers are currently fenced or in "
                "controlled shutdown.",
            )
        new.append(partition_record(image, info.topic_id, current + i, replicas, isr))
    records.extend(new)


# ---------------------------------------------------------------- exports

HANDLERS: dict[int, ControllerHandler] = {
    CREATE_TOPICS: create_topics,
    DELETE_TOPICS: delete_topics,
    CREATE_PARTITIONS: create_partitions,
}
# Kafka 3.9's controller accepts CreateTopics 0-7 and DeleteTopics 0-6; kio defines 2-7 and 1-6.
SUPPORTED: dict[int, tuple[int, int]] = {
    CREATE_TOPICS: (2, 7),
    DELETE_TOPICS: (1, 6),
    CREATE_PARTITIONS: (0, 3),
}
