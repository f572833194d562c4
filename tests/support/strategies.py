"""Hypothesis strategies: KRaft records built generically from the generated classes, and ZooKeeper-side models."""

from __future__ import annotations

import dataclasses
import functools
import uuid
from typing import Any

import hypothesis.strategies as st
from kio.schema.errors import ErrorCode
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

from migrate.kraft.records import CONTROL_RECORD_CLASSES, METADATA_RECORD_CLASSES
from migrate.kraft.wire import FieldInfo
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
    ControllerRegistration,
    DelegationToken,
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
)
from migrate.zk.paths import sanitize
from migrate.zk.znodes.configs import QUOTA_KEY_TYPES
from migrate.zk.znodes.jackson import INT16_MAX, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN

ALL_CLASSES: tuple[type[Any], ...] = (*METADATA_RECORD_CLASSES, *CONTROL_RECORD_CLASSES)
ALL_VERSIONS: list[tuple[type[Any], int]] = [
    (cls, v) for cls in ALL_CLASSES for v in range(cls.LOWEST_VERSION, cls.HIGHEST_VERSION + 1)
]
VERSION_IDS = [f"{cls.__name__}-v{v}" for cls, v in ALL_VERSIONS]

_INT_BOUNDS = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "uint16": (0, 0xFFFF),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
}

texts = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
uuids = st.one_of(
    st.sampled_from([uuid.UUID(int=0), uuid.UUID(int=1), uuid.UUID(int=2)]),
    st.integers(0, (1 << 128) - 1).map(lambda i: uuid.UUID(int=i)),
)


def _element(info: FieldInfo, version: int) -> st.SearchStrategy[Any]:
    kind = info.element_type
    if info.struct is not None:
        return struct_strategy(info.struct, version)
    if kind in _INT_BOUNDS:
        lo, hi = _INT_BOUNDS[kind]
        return st.one_of(
            st.integers(lo, hi), st.sampled_from([lo, hi, -1, 0]).filter(lambda x: lo <= x <= hi)
        )
    if kind == "bool":
        return st.booleans()
    if kind == "float64":
        return st.floats(allow_nan=False)
    if kind == "string":
        return texts
    if kind == "bytes":
        return st.binary(max_size=12)
    if kind == "uuid":
        return uuids
    raise AssertionError(f"no strategy for {info.schema_type}")


def field_strategy(info: FieldInfo, version: int) -> st.SearchStrategy[Any]:
    """Any value the field may hold at `version` (None only where nullable)."""
    base = _element(info, version)
    values = st.lists(base, max_size=4) if info.is_array else base
    return st.one_of(st.none(), values) if info.nullable_in(version) else values


def unknown_tags_strategy(cls: type, version: int) -> st.SearchStrategy[dict[int, bytes]]:
    """Raw tagged fields with tags the schema does not define at `version`."""
    known = {info.tag for info in cls.FIELDS if info.tagged_in(version)}  # type: ignore[attr-defined]
    tags = st.one_of(st.integers(0, 12), st.integers(0, 0xFFFF_FFFF)).filter(lambda t: t not in known)
    return st.dictionaries(tags, st.binary(max_size=6), max_size=3)


@functools.cache
def struct_strategy(cls: type, version: int) -> st.SearchStrategy[Any]:
    """Records (or nested structs) of `cls` valid at `version`; absent fields keep their defaults."""
    kwargs: dict[str, st.SearchStrategy[Any]] = {
        info.name: field_strategy(info, version)
        for info in cls.FIELDS  # type: ignore[attr-defined]
        if info.present_in(version)
    }
    kwargs["unknown_tagged_fields"] = unknown_tags_strategy(cls, version)
    return st.builds(cls, **kwargs)


# ---------------------------------------------------------------- ZooKeeper-side models (migrate.zk.model)

INT32 = st.integers(INT32_MIN, INT32_MAX)
INT64 = st.integers(INT64_MIN, INT64_MAX)
NAME = st.text(min_size=1, max_size=12).filter(lambda s: "/" not in s)
PRINCIPAL = st.builds(lambda t, n: f"{t}:{n}", st.sampled_from(["User", "Group", "X"]), st.text(max_size=10))
LISTENER = st.from_regex(r"[A-Z][A-Z0-9_]{0,8}", fullmatch=True)
HOST = st.one_of(
    st.none(),
    st.from_regex(r"[0-9a-zA-Z%._-]{1,12}", fullmatch=True),
    st.from_regex(r"[0-9a-f]{0,4}(:[0-9a-f]{0,4}){2,7}", fullmatch=True),
)


@st.composite
def brokers(draw: st.DrawFn, broker_id: int | None = None) -> BrokerRegistration:
    version = draw(st.integers(1, 5))
    if version == 1:
        endpoints = [BrokerEndpoint("PLAINTEXT", draw(st.text(max_size=10)), draw(INT32), "PLAINTEXT")]
    else:
        if version < 4:
            names = draw(st.lists(st.sampled_from(SECURITY_PROTOCOLS), unique=True, max_size=4))
            protocols = names
        else:
            names = draw(st.lists(LISTENER, unique=True, max_size=5))
            protocols = [draw(st.sampled_from(SECURITY_PROTOCOLS)) for _ in names]
        endpoints = [
            BrokerEndpoint(n, draw(HOST), draw(INT32), p) for n, p in zip(names, protocols, strict=True)
        ]
    features: dict[str, FeatureRange] = {}
    if version == 5:
        for name in draw(st.lists(st.text(max_size=8), unique=True, max_size=5)):
            lo = draw(st.integers(0, INT16_MAX))
            features[name] = FeatureRange(lo, draw(st.integers(lo, INT16_MAX)))
    return BrokerRegistration(
        broker_id=draw(INT32) if broker_id is None else broker_id,
        endpoints=endpoints,
        jmx_port=draw(INT32),
        timestamp=draw(st.none() | INT64),
        rack=draw(st.none() | st.text(max_size=8)) if version >= 3 else None,
        features=features,
        version=version,
        czxid=draw(INT64),
        zk_version=draw(INT32),
        ephemeral_owner=draw(INT64),
    )


REPLICAS = st.lists(INT32, max_size=5)


@st.composite
def topics(draw: st.DrawFn, name: str | None = None) -> Topic:
    version = draw(st.integers(1, 3))
    partitions = draw(st.dictionaries(st.integers(-5, 2000) | INT32, REPLICAS, max_size=20))
    adding: dict[int, list[int]] = {}
    removing: dict[int, list[int]] = {}
    if version > 1:
        for p in partitions:
            if draw(st.booleans()):
                adding[p] = draw(st.lists(INT32, min_size=1, max_size=3))
            if draw(st.booleans()):
                removing[p] = draw(st.lists(INT32, min_size=1, max_size=3))
    topic_id = draw(st.none() | st.uuids()) if version > 1 else None
    return Topic(draw(NAME) if name is None else name, topic_id, partitions, adding, removing, version)


partition_states = st.builds(
    PartitionState,
    leader=INT32,
    leader_epoch=INT32,
    isr=REPLICAS,
    controller_epoch=INT32,
    leader_recovery_state=st.sampled_from([0, 1]),
    zk_version=INT32,
)

CONFIG_MAP = st.dictionaries(st.text(max_size=15), st.text(max_size=15), max_size=14)


@st.composite
def quota_values(draw: st.DrawFn, keys: list[str]) -> dict[str, float]:
    out = {}
    for key in keys:
        kind = QUOTA_KEY_TYPES.get(key, "DOUBLE")
        if kind == "LONG":  # Kafka's whole-number check only holds for quotas >= 0
            out[key] = float(draw(st.integers(0, 2**53)))
        elif kind == "INT":
            out[key] = float(draw(st.integers(0, INT32_MAX)))
        else:
            out[key] = draw(st.floats(allow_nan=False))
    return out


QUOTA_KEYS = st.lists(
    st.sampled_from(sorted(QUOTA_KEY_TYPES)) | st.text(min_size=1, max_size=8), unique=True, max_size=6
)
SANITIZED = st.text(min_size=1, max_size=8).map(sanitize)
scram_credentials = st.builds(
    ScramCredential,
    mechanism=st.just("SCRAM-SHA-256"),
    salt=st.binary(max_size=24),
    stored_key=st.binary(max_size=64),
    server_key=st.binary(max_size=64),
    iterations=INT32,
)


@st.composite
def client_quotas(draw: st.DrawFn, entity_path: str | None = None) -> ClientQuotaConfig:
    if entity_path is None:
        kind = draw(st.sampled_from(["users", "clients", "ips", "nested"]))
        name = draw(st.just("<default>") | SANITIZED)
        entity_path = f"users/{name}/clients/{draw(SANITIZED)}" if kind == "nested" else f"{kind}/{name}"
    is_user = entity_path.startswith("users/") and entity_path.count("/") == 1
    keys = [k for k in draw(QUOTA_KEYS) if not (is_user and k in SCRAM_MECHANISMS)]
    scram = {}
    if is_user:
        for mechanism in draw(st.lists(st.sampled_from(SCRAM_MECHANISMS), unique=True)):
            scram[mechanism] = dataclasses.replace(draw(scram_credentials), mechanism=mechanism)
    return ClientQuotaConfig(entity_path, draw(quota_values(keys)), scram)


TOPIC_PARTITIONS = st.builds(TopicPartition, st.text(max_size=8), INT32)
CONCRETE_TYPES = [t for t in ResourceType if t not in (ResourceType.UNKNOWN, ResourceType.ANY)]
acl_entries = st.builds(
    AclEntry,
    PRINCIPAL,
    st.text(max_size=8),
    st.sampled_from(AclOperation),
    st.sampled_from(AclPermissionType),
)


@st.composite
def acl_resources(draw: st.DrawFn) -> AclResource:
    pattern = ResourcePattern(
        draw(st.sampled_from(CONCRETE_TYPES)),
        draw(NAME),
        draw(st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED])),
    )
    return AclResource(pattern, draw(st.lists(acl_entries, max_size=4)), draw(INT32))


@st.composite
def delegation_tokens(draw: st.DrawFn) -> DelegationToken:
    version = draw(st.integers(1, 3))
    owner = draw(PRINCIPAL)
    return DelegationToken(
        token_id=draw(st.text(max_size=22)),
        owner=owner,
        token_requester=draw(PRINCIPAL) if version == 3 else owner,
        renewers=draw(st.lists(PRINCIPAL, max_size=3)),
        issue_timestamp=draw(INT64),
        max_timestamp=draw(INT64),
        expiry_timestamp=draw(INT64),
        version=version,
    )


@st.composite
def finalized_features(draw: st.DrawFn) -> FinalizedFeatures:
    version = draw(st.sampled_from([1, 2]))
    features = draw(st.dictionaries(st.text(max_size=10), st.integers(1, INT16_MAX), max_size=6))
    min_levels = {}
    if version == 1:
        for name, top in features.items():
            if top > 1 and draw(st.booleans()):
                min_levels[name] = draw(st.integers(1, top - 1))
    return FinalizedFeatures(draw(st.sampled_from(FeatureStatus)), features, version, min_levels, draw(INT32))


@st.composite
def producer_blocks(draw: st.DrawFn) -> ProducerIdBlock:
    start = draw(st.integers(INT64_MIN, INT64_MAX - INT32_MAX))
    return ProducerIdBlock(draw(INT32), start, start + draw(st.integers(0, INT32_MAX - 1)))


migration_states = st.builds(
    MigrationState,
    kraft_controller_id=INT32,
    kraft_controller_epoch=INT32,
    kraft_metadata_offset=INT64,
    kraft_metadata_epoch=INT32,
    zk_version=INT32,
    last_updated_ms=INT64,
)
controllers = st.builds(
    ControllerRegistration,
    broker_id=INT32,
    timestamp=st.none() | INT64,
    kraft_controller_epoch=st.none() | INT32,
    version=st.sampled_from([1, 2]),
    zk_version=INT32,
    ephemeral_owner=INT64,
)
config_changes = st.one_of(
    st.builds(ConfigChangeNotification, st.text(max_size=20), st.just(2)),
    st.builds(
        lambda t, n: ConfigChangeNotification(f"{t}/{n}", 1),
        st.sampled_from(["topics", "clients"]),
        st.text(max_size=10),
    ),
)
partition_lists = st.builds(PartitionList, st.lists(TOPIC_PARTITIONS, max_size=4))
reassignments = st.builds(
    LegacyReassignment,
    st.lists(st.builds(ReplicaReassignment, st.text(max_size=8), INT32, REPLICAS), max_size=4),
)
log_dir_events = st.builds(LogDirEvent, INT32, INT32)
literal_acl_changes = st.builds(
    lambda t, n: AclChangeNotification(ResourcePattern(t, n, PatternType.LITERAL)),
    st.sampled_from(ResourceType),
    st.text(max_size=10),
)
extended_acl_changes = st.builds(
    lambda t, n, p, v: AclChangeNotification(ResourcePattern(t, n, p), v),
    st.sampled_from(ResourceType),
    st.text(max_size=10),
    st.sampled_from(PatternType),
    st.integers(-3, 1),
)


# ---------------------------------------------------------------- kio entities (generated request classes)

_KIO_INTS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


def _kio_primitive(kafka_type: str, nullable: bool) -> st.SearchStrategy[Any]:
    if kafka_type in _KIO_INTS:
        bits = _KIO_INTS[kafka_type]
        values: st.SearchStrategy[Any] = st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    elif kafka_type == "bool":
        values = st.booleans()
    elif kafka_type == "string":
        values = st.text(max_size=8)
    elif kafka_type == "error_code":
        values = st.sampled_from(ErrorCode)
    elif kafka_type == "uuid":
        # kio reads the zero uuid as None, its name for it
        return st.none() | st.uuids().filter(lambda u: u.int != 0)
    else:
        raise AssertionError(f"no strategy for {kafka_type}")
    return st.none() | values if nullable else values


def kio_entities(cls: type[Any]) -> st.SearchStrategy[Any]:
    """A kio entity with every field drawn (hypothesis would leave fields with defaults at their default)."""
    drawn: dict[str, st.SearchStrategy[Any]] = {}
    for f in dataclasses.fields(cls):
        tagged = get_field_tag(f) is not None
        match classify_field(f):
            case PrimitiveField():
                drawn[f.name] = _kio_primitive(get_schema_field_type(f), is_optional(f) and not tagged)
            case PrimitiveTupleField():
                items = st.lists(_kio_primitive(get_schema_field_type(f), False), max_size=4).map(tuple)
                drawn[f.name] = st.none() | items if is_optional(f) else items
            case EntityField(type_=nested):
                drawn[f.name] = kio_entities(nested)
            case EntityTupleField(type_=nested):
                items = st.lists(kio_entities(nested), max_size=3).map(tuple)
                drawn[f.name] = st.none() | items if is_optional(f) else items
    return st.builds(cls, **drawn)
