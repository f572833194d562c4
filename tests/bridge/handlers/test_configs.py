"""AlterConfigs / IncrementalAlterConfigs handlers and the topic config definitions, against Kafka 3.9's rules."""

from __future__ import annotations

import importlib
import math
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from bridge.api import ControllerResult, HandlerContext
from bridge.handlers import config_defs as defs
from bridge.handlers import configs
from migrate.kraft import metadata_version as mvs
from migrate.kraft import records as r
from migrate.kraft.image import MetadataImage
from tests.support.handlers import CONTROLLER_ID, Records, image_of, round_trip
from tests.support.handlers import context as handler_context

TOPIC, BROKER = 2, 4
ORDERS_ID = uuid.UUID("3f1d2c4b-0000-4000-8000-000000000001")


def base_records() -> Records:
    """metadata.version 3.9-IV0, brokers 0 and 1 (migrating ZK brokers), topic `orders` with retention.ms=1000."""
    mv = mvs.IBP_3_9_IV0
    out: Records = [(r.FeatureLevelRecord(name="metadata.version", feature_level=mv.feature_level), 0)]
    for broker_id in (0, 1):
        record = r.RegisterBrokerRecord(
            broker_id=broker_id,
            incarnation_id=uuid.UUID(int=broker_id + 1),
            broker_epoch=10,
            is_migrating_zk_broker=True,
            fenced=False,
        )
        out.append((record, mv.register_broker_record_version()))
    out.append((r.TopicRecord(name="orders", topic_id=ORDERS_ID), 0))
    out.append(
        (
            r.PartitionRecord(
                partition_id=0, topic_id=ORDERS_ID, replicas=[0, 1], isr=[0, 1], leader=0, directories=[]
            ),
            mv.partition_record_version(),
        )
    )
    out.append((config_record(TOPIC, "orders", "retention.ms", "1000"), 0))
    return out


def config_record(resource_type: int, name: str, key: str, value: str | None) -> r.ConfigRecord:
    return r.ConfigRecord(resource_type=resource_type, resource_name=name, name=key, value=value)


def image_after(*extra: Records) -> MetadataImage:
    """A fresh image of the base records plus `extra` (fresh: replay shares nested values)."""
    return image_of(base_records(), *extra)


def context(image: MetadataImage, version: int) -> HandlerContext:
    return handler_context(image, version, now_ms=1_700_000_000_000)




def incremental(version: int, resources: list[tuple[int, str, list[tuple[str, int, str | None]]]], *,
                validate_only: bool = False) -> Any:  # fmt: skip
    module = importlib.import_module(f"kio.schema.incremental_alter_configs.v{version}.request")
    return module.IncrementalAlterConfigsRequest(
        resources=tuple(
            module.AlterConfigsResource(
                resource_type=i8(t),
                resource_name=n,
                configs=tuple(
                    module.AlterableConfig(name=k, config_operation=i8(op), value=v) for k, op, v in cs
                ),
            )
            for t, n, cs in resources
        ),
        validate_only=validate_only,
    )


def legacy(version: int, resources: list[tuple[int, str, list[tuple[str, str | None]]]], *,
           validate_only: bool = False) -> Any:  # fmt: skip
    module = importlib.import_module(f"kio.schema.alter_configs.v{version}.request")
    return module.AlterConfigsRequest(
        resources=tuple(
            module.AlterConfigsResource(
                resource_type=i8(t),
                resource_name=n,
                configs=tuple(module.AlterableConfig(name=k, value=v) for k, v in cs),
            )
            for t, n, cs in resources
        ),
        validate_only=validate_only,
    )


def run_incremental(
    image: MetadataImage, version: int, resources: Any, **kw: Any
) -> tuple[ControllerResult, Any]:
    result = configs.handle_incremental_alter_configs(
        context(image, version), incremental(version, resources, **kw)
    )
    return result, round_trip(result, 44, version)


def run_legacy(image: MetadataImage, version: int, resources: Any, **kw: Any) -> tuple[ControllerResult, Any]:
    result = configs.handle_alter_configs(context(image, version), legacy(version, resources, **kw))
    return result, round_trip(result, 33, version)


def answers(body: Any) -> list[tuple[int, str, ErrorCode, str | None]]:
    return [(int(x.resource_type), x.resource_name, x.error_code, x.error_message) for x in body.responses]


SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


# ------------------------------------------------------------------------------------- incremental


@pytest.mark.parametrize("version", [0, 1])
def test_set_and_delete_on_a_topic(version: int) -> None:
    image = image_after()
    result, body = run_incremental(
        image,
        version,
        [(TOPIC, "orders", [("retention.ms", DELETE, None), ("cleanup.policy", SET, "compact")])],
    )
    assert answers(body) == [(TOPIC, "orders", ErrorCode.none, None)]
    assert result.records == [
        (config_record(TOPIC, "orders", "retention.ms", None), 0),
        (config_record(TOPIC, "orders", "cleanup.policy", "compact"), 0),
    ]
    assert image == image_after(), "handlers never touch the image"
    assert image_after(result.records).configs[(TOPIC, "orders")] == {"cleanup.policy": "compact"}


def test_unchanged_topic_value_writes_no_record_but_broker_values_always_do() -> None:
    image = image_after()
    result, body = run_incremental(
        image,
        1,
        [(TOPIC, "orders", [("retention.ms", SET, "1000")]), (BROKER, "", [("log.retention.ms", SET, "5")])],
    )
    assert [e[2] for e in answers(body)] == [ErrorCode.none, ErrorCode.none]
    assert result.records == [(config_record(BROKER, "", "log.retention.ms", "5"), 0)]
    again, _ = run_incremental(
        image_after(result.records), 1, [(BROKER, "", [("log.retention.ms", SET, "5")])]
    )
    # KAFKA-14136: brokers reload only on a record, so an unchanged broker value is written again.
    assert again.records == [(config_record(BROKER, "", "log.retention.ms", "5"), 0)]


def test_append_then_subtract_cleanup_policy() -> None:
    log: Records = []
    steps = [
        (APPEND, "compact", "delete,compact"),  # starts from the default "delete"
        (APPEND, "compact,delete", "delete,compact"),  # items already present are not repeated
        (SUBTRACT, "delete", "compact"),
        (SUBTRACT, "compact", ""),  # an empty list is a valid cleanup.policy in 3.9
        (APPEND, "delete", "delete"),
    ]
    for op, value, expected in steps:
        result, body = run_incremental(
            image_after(log), 1, [(TOPIC, "orders", [("cleanup.policy", op, value)])]
        )
        assert answers(body) == [(TOPIC, "orders", ErrorCode.none, None)]
        before = image_after(log).configs[(TOPIC, "orders")].get("cleanup.policy")
        # A topic value that does not change writes no record.
        wanted = (
            [] if before == expected else [(config_record(TOPIC, "orders", "cleanup.policy", expected), 0)]
        )
        assert result.records == wanted
        log += result.records
        assert image_after(log).configs[(TOPIC, "orders")]["cleanup.policy"] == expected


def test_append_to_broker_list_config_starts_from_kafkas_default() -> None:
    result, body = run_incremental(
        image_after(), 0, [(BROKER, "0", [("sasl.enabled.mechanisms", APPEND, "SCRAM-SHA-512")])]
    )
    assert answers(body) == [(BROKER, "0", ErrorCode.none, None)]
    assert result.records == [
        (config_record(BROKER, "0", "sasl.enabled.mechanisms", "GSSAPI,SCRAM-SHA-512"), 0)
    ]


@pytest.mark.parametrize(
    ("resource", "key", "op"),
    [
        ((TOPIC, "orders"), "retention.ms", APPEND),
        ((TOPIC, "orders"), "no.such.config", SUBTRACT),
        ((BROKER, ""), "listener.name.external.ssl.enabled.protocols", APPEND),
    ],
)
def test_append_subtract_only_for_list_configs(resource: tuple[int, str], key: str, op: int) -> None:
    result, body = run_incremental(image_after(), 1, [(*resource, [(key, op, "x")])])
    name = {APPEND: "APPEND", SUBTRACT: "SUBTRACT"}[op]
    message = f"Can't {name} to key {key} because its type is not LIST."
    assert answers(body) == [(*resource, ErrorCode.invalid_config, message)]
    assert result.records == []


def test_append_without_a_value_fails_the_whole_request() -> None:
    result, body = run_incremental(
        image_after(),
        1,
        [(TOPIC, "orders", [("cleanup.policy", APPEND, None)]), (BROKER, "", [("a", SET, "b")])],
    )
    assert result.records == []
    assert [(e[0], e[1], e[2]) for e in answers(body)] == [
        (TOPIC, "orders", ErrorCode.unknown_server_error),
        (BROKER, "", ErrorCode.unknown_server_error),
    ]


def test_missing_topic_and_validation_order() -> None:
    image = image_after()
    _, body = run_incremental(image, 1, [(TOPIC, "nope", [("retention.ms", SET, "5")])])
    assert answers(body) == [
        (TOPIC, "nope", ErrorCode.unknown_topic_or_partition, "The topic 'nope' does not exist.")
    ]
    # Config validation comes before the existence check.
    _, body = run_incremental(image, 1, [(TOPIC, "nope", [("retention.ms", SET, "-5")])])
    assert answers(body) == [
        (
            TOPIC,
            "nope",
            ErrorCode.invalid_config,
            "Invalid value -5 for configuration retention.ms: Value must be at least -1",
        )
    ]


def test_a_failing_resource_does_not_stop_the_others() -> None:
    result, body = run_incremental(
        image_after(),
        1,
        [
            (TOPIC, "orders", [("segment.bytes", SET, "1"), ("retention.ms", SET, "9")]),
            (TOPIC, "orders.bad", [("x", SET, "1")]),
            (BROKER, "1", [("log.retention.ms", SET, "7")]),
        ],
    )
    assert answers(body) == [
        (
            TOPIC,
            "orders",
            ErrorCode.invalid_config,
            "Invalid value 1 for configuration segment.bytes: Value must be at least 14",
        ),
        (TOPIC, "orders.bad", ErrorCode.invalid_config, "Unknown topic config name: x"),
        (BROKER, "1", ErrorCode.none, None),
    ]
    assert result.records == [(config_record(BROKER, "1", "log.retention.ms", "7"), 0)]


def test_existing_invalid_values_fail_any_change() -> None:
    image = image_after([(config_record(TOPIC, "orders", "min.insync.replicas", "0"), 0)])
    _, body = run_incremental(image, 1, [(TOPIC, "orders", [("retention.ms", SET, "5")])])
    assert answers(body)[0][2:] == (
        ErrorCode.invalid_config,
        "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1",
    )


@pytest.mark.parametrize(
    ("name", "error", "message"),
    [
        ("", ErrorCode.invalid_request, "Default topic resources are not allowed."),
        (
            "bad/name",
            ErrorCode.invalid_topic_exception,
            'Topic name "bad/name" is illegal, it contains a character other than ASCII alphanumerics, '
            "'.', '_' and '-'",
        ),
        ("..", ErrorCode.invalid_topic_exception, 'Topic name cannot be "." or ".."'),
    ],
)
def test_topic_resource_names(name: str, error: ErrorCode, message: str) -> None:
    _, body = run_incremental(image_after(), 1, [(TOPIC, name, [("retention.ms", SET, "5")])])
    assert answers(body) == [(TOPIC, name, error, message)]


@pytest.mark.parametrize(
    ("name", "error", "message"),
    [
        ("abc", ErrorCode.invalid_request, "Unable to parse broker name as a base 10 number."),
        ("-1", ErrorCode.invalid_request, "Invalid negative broker ID."),
        ("7", ErrorCode.broker_id_not_registered, "No node with id 7 found."),
        ("0", ErrorCode.none, None),
        ("+1", ErrorCode.none, None),  # Integer.parseInt accepts a plus sign
        (str(CONTROLLER_ID), ErrorCode.none, None),  # the controller's own node id
    ],
)
def test_broker_resource_names(name: str, error: ErrorCode, message: str | None) -> None:
    result, body = run_incremental(image_after(), 1, [(BROKER, name, [("num.io.threads", SET, "9")])])
    assert answers(body) == [(BROKER, name, error, message)]
    assert bool(result.records) == (error == ErrorCode.none)


def test_duplicate_resources_and_unknown_types() -> None:
    result, body = run_incremental(
        image_after(),
        1,
        [
            (TOPIC, "orders", [("retention.ms", SET, "1")]),
            (99, "x", []),
            (TOPIC, "orders", [("retention.ms", SET, "2")]),
            (TOPIC, "orders", [("retention.ms", SET, "3")]),
            (BROKER, "", [("a.b", SET, "c")]),
        ],
    )
    assert answers(body) == [
        (99, "x", ErrorCode.unsupported_version, "Unknown resource type 99."),
        (TOPIC, "orders", ErrorCode.invalid_request, "Duplicate resource."),
        (BROKER, "", ErrorCode.none, None),
    ]
    assert result.records == [(config_record(BROKER, "", "a.b", "c"), 0)]


def test_duplicate_keys_last_one_wins_as_in_controller_apis() -> None:
    result, _ = run_incremental(
        image_after(), 1, [(TOPIC, "orders", [("retention.ms", SET, "1"), ("retention.ms", SET, "2")])]
    )
    assert result.records == [(config_record(TOPIC, "orders", "retention.ms", "2"), 0)]


@pytest.mark.parametrize("version", [0, 1])
def test_validate_only_answers_but_writes_nothing(version: int) -> None:
    resources = [
        (TOPIC, "orders", [("retention.ms", SET, "5")]),
        (TOPIC, "nope", [("retention.ms", SET, "5")]),
    ]
    real, real_body = run_incremental(image_after(), version, resources)
    dry, dry_body = run_incremental(image_after(), version, resources, validate_only=True)
    assert real.records and dry.records == []
    assert answers(dry_body) == answers(real_body)


def test_unsupported_resource_types_are_refused() -> None:
    result, body = run_incremental(
        image_after(), 1, [(16, "metrics", [("interval.ms", SET, "1000")]), (8, "0", [("root", SET, "INFO")])]
    )
    assert [(e[0], e[2]) for e in answers(body)] == [
        (16, ErrorCode.invalid_request),
        (8, ErrorCode.invalid_request),
    ]
    assert result.records == []


# ------------------------------------------------------------------------------------- legacy


@pytest.mark.parametrize("version", [0, 1, 2])
def test_legacy_alter_replaces_the_whole_map(version: int) -> None:
    image = image_after([(config_record(TOPIC, "orders", "cleanup.policy", "compact"), 0)])
    result, body = run_legacy(
        image, version, [(TOPIC, "orders", [("segment.ms", "100"), ("cleanup.policy", "compact")])]
    )
    assert answers(body) == [(TOPIC, "orders", ErrorCode.none, None)]
    assert result.records == [
        (config_record(TOPIC, "orders", "segment.ms", "100"), 0),
        (config_record(TOPIC, "orders", "retention.ms", None), 0),
    ]
    after = image_after([(config_record(TOPIC, "orders", "cleanup.policy", "compact"), 0)], result.records)
    assert after.configs[(TOPIC, "orders")] == {"segment.ms": "100", "cleanup.policy": "compact"}


def test_legacy_null_topic_value_is_a_deletion_and_broker_logger_is_refused() -> None:
    # The controller validates the map after applying the records, where a null value is a removal, so
    # (unlike CreateTopics) a null topic value is not refused.
    result, body = run_legacy(
        image_after(),
        1,
        [(TOPIC, "orders", [("retention.ms", None), ("flush.ms", None)]), (8, "0", [("a", "b")])],
    )
    assert answers(body) == [
        (8, "0", ErrorCode.invalid_request, "Unexpected resource type BROKER_LOGGER."),
        (TOPIC, "orders", ErrorCode.none, None),
    ]
    assert result.records == [(config_record(TOPIC, "orders", "retention.ms", None), 0)]


def test_legacy_broker_null_value_deletes_and_validate_only() -> None:
    image = image_after([(config_record(BROKER, "", "x", "1"), 0), (config_record(BROKER, "", "y", "2"), 0)])
    result, _ = run_legacy(image, 2, [(BROKER, "", [("x", None), ("z", "3")])])
    assert result.records == [
        (config_record(BROKER, "", "x", None), 0),
        (config_record(BROKER, "", "z", "3"), 0),
        (config_record(BROKER, "", "y", None), 0),
    ]
    dry, _ = run_legacy(image, 2, [(BROKER, "", [("x", None)])], validate_only=True)
    assert dry.records == []


def test_supported_versions_have_kio_classes() -> None:
    assert configs.SUPPORTED == {33: (0, 2), 44: (0, 1)}
    assert set(configs.HANDLERS) == set(configs.SUPPORTED)


# ------------------------------------------------------------------------------------- config definitions


def test_config_definitions_messages() -> None:
    def first(cfg: dict[str, str | None]) -> str | None:
        problems = defs.validate_topic_configs(cfg)
        return problems[0].message if problems else None

    assert first({"preallocate": " TRUE "}) is None
    assert first({"preallocate": "yes"}) == (
        "Invalid value yes for configuration preallocate: Expected value to be either true or false"
    )
    assert (
        first({"segment.ms": "1_000"})
        == "Invalid value 1_000 for configuration segment.ms: Not a number of type LONG"
    )
    assert first({"segment.bytes": "2147483648"}) == (
        "Invalid value 2147483648 for configuration segment.bytes: Not a number of type INT"
    )
    assert first({"min.cleanable.dirty.ratio": "1e1"}) == (
        "Invalid value 10.0 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"
    )
    assert first({"min.cleanable.dirty.ratio": "NaN"}) is None  # Java's comparisons let NaN through
    assert first({"min.cleanable.dirty.ratio": "0x1p-1"}) is None
    assert first({"min.cleanable.dirty.ratio": "0.25d"}) is None
    assert first({"compression.type": "GZIP"}) == (
        "Invalid value GZIP for configuration compression.type: String must be one of: "
        "uncompressed, zstd, lz4, snappy, gzip, producer"
    )
    assert first({"compression.gzip.level": "0"}) == (
        "Invalid value 0 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1"
    )
    assert first({"compression.gzip.level": "-1"}) is None
    assert first({"compression.zstd.level": "-131073"}) == (
        "Invalid value -131073 for configuration compression.zstd.level: Value must be at least -131072"
    )
    assert first({"message.format.version": "2.8.1"}) is None
    assert first({"message.format.version": "0.10.2.1"}) is None
    assert first({"message.format.version": "3.7."}) == (
        "Invalid value 3.7. for configuration message.format.version: Version 3.7. is not a valid version"
    )
    assert first({"leader.replication.throttled.replicas": "*"}) is None
    assert first({"leader.replication.throttled.replicas": "0:1 , 1:2,"}) is None
    assert first({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}) == (
        "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"
    )
    assert first({"remote.storage.enable": "true"}) == (
        "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage."
    )
    assert (
        first({"a": "1", "segment.bytes": None})
        == "Null value not supported for topic configs: segment.bytes"
    )


def test_broker_dynamic_config_sets() -> None:
    assert defs.is_dynamic_broker_config("log.retention.ms")
    assert defs.is_dynamic_broker_config("listener.name.internal.ssl.keystore.location")
    assert not defs.is_dynamic_broker_config("log.retention.hours")
    assert not defs.is_dynamic_broker_config("broker.id")
    assert defs.is_per_broker_config("ssl.keystore.location")
    assert not defs.is_per_broker_config("max.connections")
    assert not defs.is_per_broker_config("listener.name.internal.max.connections")
    assert defs.is_per_broker_config("listener.name.internal.ssl.truststore.type")


def test_java_double_strings() -> None:
    assert [defs.java_double_str(x) for x in (0.5, 2.0, 1e10, 1e-4, 123456.789, 1e7, 0.001, -3.5, math.inf)] == [
        "0.5", "2.0", "1.0E10", "1.0E-4", "123456.789", "1.0E7", "0.001", "-3.5", "Infinity",
    ]  # fmt: skip


def _int_reference(text: str, low: int, high: int) -> int | None:
    """Java's Integer/Long.parse after String.trim, written independently."""
    trimmed = text.strip("".join(chr(c) for c in range(33)))
    body = trimmed[1:] if trimmed[:1] in "+-" else trimmed
    if not body or not all(ch.isdecimal() for ch in body):
        return None
    value = int(trimmed)
    return value if low <= value <= high else None


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.integers(-(2**40), 2**40).map(str), st.text(alphabet=" +-0123456789_x\t٣", max_size=8)))
def test_int_range_validator_against_reference(text: str) -> None:
    problems = defs.validate_topic_configs({"segment.index.bytes": text})
    parsed = _int_reference(text, defs.INT32_MIN, defs.INT32_MAX)
    if parsed is None:
        assert [p.message for p in problems] == [
            f"Invalid value {text} for configuration segment.index.bytes: Not a number of type INT"
        ]
    elif parsed < 4:
        assert [p.message for p in problems] == [
            f"Invalid value {parsed} for configuration segment.index.bytes: Value must be at least 4"
        ]
    else:
        assert problems == []


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True))
def test_double_range_validator_against_reference(value: float) -> None:
    problems = defs.validate_topic_configs(
        {"min.cleanable.dirty.ratio": repr(value).replace("inf", "Infinity").replace("nan", "NaN")}
    )
    valid = math.isnan(value) or 0 <= value <= 1
    assert (problems == []) == valid
    if not valid:
        bound = "at least 0" if value < 0 else "no more than 1"
        assert problems[0].message.endswith(f": Value must be {bound}")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["compact", "delete", "Compact", "", "x", " delete"]), max_size=4),
       st.sampled_from([",", ", ", " ,", ",\t"]))  # fmt: skip
def test_cleanup_policy_list_validator_against_reference(items: list[str], separator: str) -> None:
    text = separator.join(items)
    problems = defs.validate_topic_configs({"cleanup.policy": text})
    # Reference: trim the whole value; empty -> []; else split on commas and trim whitespace around them.
    trimmed = text.strip(" \t")
    elements = [] if not trimmed else [part.strip(" \t") for part in trimmed.split(",")]
    bad = [e for e in elements if e not in ("compact", "delete")]
    if bad:
        assert problems[0].message == (
            f"Invalid value {bad[0]} for configuration cleanup.policy: String must be one of: compact, delete"
        )
    else:
        assert problems == []


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([APPEND, SUBTRACT]), st.lists(st.sampled_from(["compact", "delete"]),
       min_size=1, max_size=2)), min_size=1, max_size=5))  # fmt: skip
def test_append_subtract_sequences_against_a_list_model(ops: list[tuple[int, list[str]]]) -> None:
    log: Records = []
    model = ["delete"]
    for op, items in ops:
        for item in items:
            if op == APPEND and item not in model:
                model.append(item)
            elif op == SUBTRACT and item in model:
                model.remove(item)
        result, body = run_incremental(
            image_after(log), 1, [(TOPIC, "orders", [("cleanup.policy", op, ",".join(items))])]
        )
        assert answers(body)[0][2] == ErrorCode.none
        log += result.records
        assert image_after(log).configs[(TOPIC, "orders")].get("cleanup.policy") == ",".join(model)


_SOME_KEYS = ["retention.ms", "min.compaction.lag.ms", "max.compaction.lag.ms", "cleanup.policy",
              "compression.type", "min.cleanable.dirty.ratio", "segment.bytes", "local.retention.ms"]  # fmt: skip
_SOME_VALUES = [
    "-2",
    "-1",
    "0",
    "1",
    "100",
    " 7 ",
    "x",
    "0.5",
    "2.0",
    "compact",
    "delete,compact",
    "gzip",
    "",
]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(_SOME_KEYS), st.sampled_from(_SOME_VALUES)), max_size=6))
def test_validation_does_not_depend_on_earlier_requests(maps: list[dict[str, str]]) -> None:
    # Values are checked once and remembered; each map must still get exactly what a fresh check says.
    remembered = [defs.validate_topic_configs(m) for m in maps]
    fresh = []
    for m in maps:
        defs._CHECKED.clear()
        fresh.append(defs.validate_topic_configs(m))
    assert remembered == fresh
    assert [defs.validate_topic_configs(m) for m in reversed(maps)] == fresh[::-1]
