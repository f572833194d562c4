"""AlterClientQuotas handler against Kafka 3.9's ClientQuotaControlManager rules."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from bridge.api import ControllerResult
from bridge.handlers import quotas
from migrate import jvm
from migrate.kraft import records as r
from migrate.kraft.image import MetadataImage
from tests.support.handlers import Records, context, image_of, round_trip
from tests.support.requests import ALTER_CLIENT_QUOTAS, alter_client_quotas

Op = tuple[str, float | None]  # None removes


def base_records() -> Records:
    entity = [r.ClientQuotaRecord.EntityData(entity_type="user", entity_name="alice")]
    return [(r.ClientQuotaRecord(entity=entity, key="producer_byte_rate", value=1000.0), 0)]


def image_after(*extra: Records) -> MetadataImage:
    return image_of(base_records(), *extra)




def run(
    image: MetadataImage, version: int, entries: Any, validate_only: bool = False
) -> tuple[ControllerResult, Any]:
    result = quotas.handle_alter_client_quotas(
        context(image, version), alter_client_quotas(version, entries, validate_only=validate_only)
    )
    return result, round_trip(result, ALTER_CLIENT_QUOTAS, version)


def answers(body: Any) -> list[tuple[list[tuple[str, str | None]], ErrorCode, str | None]]:
    return [
        ([(e.entity_type, e.entity_name) for e in x.entity], x.error_code, x.error_message)
        for x in body.entries
    ]


def quota_record(
    entity: list[tuple[str, str | None]], key: str, value: float, remove: bool = False
) -> r.ClientQuotaRecord:
    data = [r.ClientQuotaRecord.EntityData(entity_type=t, entity_name=n) for t, n in entity]
    return r.ClientQuotaRecord(entity=data, key=key, value=value, remove=remove)


@pytest.mark.parametrize("version", [0, 1])
def test_set_change_and_remove(version: int) -> None:
    image = image_after()
    result, body = run(
        image,
        version,
        [
            ([("user", "alice")], [("producer_byte_rate", 1000.0), ("consumer_byte_rate", 5.0)]),
            ([("client-id", None), ("user", "bob")], [("request_percentage", 12.5)]),
            ([("ip", "10.0.0.1")], [("connection_creation_rate", 3.0)]),
        ],
    )
    assert [a[1] for a in answers(body)] == [ErrorCode.none] * 3
    # Unchanged producer_byte_rate writes nothing; entity parts follow Kafka's HashMap order.
    assert result.records == [
        (quota_record([("user", "alice")], "consumer_byte_rate", 5.0), 0),
        (quota_record([("client-id", None), ("user", "bob")], "request_percentage", 12.5), 0),
        (quota_record([("ip", "10.0.0.1")], "connection_creation_rate", 3.0), 0),
    ]
    after = image_after(result.records)
    assert after.client_quotas[(("user", "alice"),)] == {
        "producer_byte_rate": 1000.0,
        "consumer_byte_rate": 5.0,
    }
    assert after.client_quotas[(("client-id", None), ("user", "bob"))] == {"request_percentage": 12.5}

    removed, _ = run(
        after, version, [([("user", "alice")], [("producer_byte_rate", None), ("absent", None)])]
    )
    # Removing an unset key (even an unknown one) writes nothing.
    assert removed.records == [(quota_record([("user", "alice")], "producer_byte_rate", 0.0, remove=True), 0)]
    assert image_after(result.records, removed.records).client_quotas[(("user", "alice"),)] == {
        "consumer_byte_rate": 5.0
    }


@pytest.mark.parametrize(
    ("entity", "ops", "message"),
    [
        ([], [("producer_byte_rate", 1.0)], "Invalid empty client quota entity"),
        ([("group", "g")], [("producer_byte_rate", 1.0)], "Unhandled client quota entity type: group"),
        ([("user", "")], [("producer_byte_rate", 1.0)], "Empty user not supported"),
        (
            [("user", "u"), ("ip", "1.2.3.4")],
            [("producer_byte_rate", 1.0)],
            "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId",
        ),
        ([("ip", "no-such-host.invalid")], [("connection_creation_rate", 1.0)],
         "no-such-host.invalid is not a valid IP or resolvable host."),
        ([("user", "u")], [("connection_creation_rate", 1.0)], "Invalid configuration key connection_creation_rate"),
        ([("ip", None)], [("producer_byte_rate", 1.0)], "Invalid configuration key producer_byte_rate"),
        ([("user", "u")], [("producer_byte_rate", 0.0)], "Quota producer_byte_rate must be greater than 0"),
        ([("user", "u")], [("producer_byte_rate", 1.5)], "producer_byte_rate cannot be a fractional value."),
        ([("user", "u")], [("producer_byte_rate", 1e19)], "Proposed value for producer_byte_rate is too large for a LONG."),
        ([("ip", "::1")], [("connection_creation_rate", 3e9)],
         "Proposed value for connection_creation_rate is too large for an INT."),
    ],
)  # fmt: skip
def test_invalid_entities_and_values(
    entity: list[tuple[str, str | None]], ops: list[Op], message: str
) -> None:
    result, body = run(image_after(), 1, [(entity, ops), ([("user", "ok")], [("request_percentage", 1.0)])])
    assert answers(body)[0][1:] == (ErrorCode.invalid_request, message)
    assert answers(body)[1][1] == ErrorCode.none
    assert result.records == [(quota_record([("user", "ok")], "request_percentage", 1.0), 0)]


def test_duplicates() -> None:
    result, body = run(
        image_after(),
        1,
        [
            ([("user", "a"), ("client-id", "c")], [("producer_byte_rate", 2.0)]),
            ([("client-id", "c"), ("user", "a")], [("producer_byte_rate", 3.0)]),
            ([("user", "b")], [("producer_byte_rate", 2.0), ("producer_byte_rate", 3.0)]),
        ],
    )
    assert answers(body) == [
        (
            [("client-id", "c"), ("user", "a")],
            ErrorCode.invalid_request,
            "Ignoring duplicate entity ClientQuotaEntity(entries={client-id=c, user=a})",
        ),
        # A duplicate key is reported as a duplicate entity: Kafka overwrites the first message.
        (
            [("user", "b")],
            ErrorCode.invalid_request,
            "Ignoring duplicate entity ClientQuotaEntity(entries={user=b})",
        ),
    ]
    # The first occurrence was already accepted before the duplicate was seen.
    assert result.records == [
        (quota_record([("client-id", "c"), ("user", "a")], "producer_byte_rate", 2.0), 0)
    ]


def test_nan_passes_as_in_java_and_validate_only() -> None:
    # Java's comparisons let NaN through every check (kio itself refuses to build a NaN f64).
    assert not quotas.validate_quota_value(
        quotas.USER_AND_CLIENT_QUOTA_KEYS, "producer_byte_rate", math.nan
    ).is_failure
    dry, dry_body = run(
        image_after(), 0, [([("user", "x")], [("producer_byte_rate", 7.0)])], validate_only=True
    )
    assert dry.records == [] and answers(dry_body)[0][1] == ErrorCode.none


def test_java_hashmap_order_matches_known_java_results() -> None:
    # Worked by hand: String.hashCode, spread (h ^ h>>>16), bucket = low 4 bits of a 16-slot table.
    assert jvm.signed32(jvm.java_string_hash("user")) == 3599307
    assert jvm.java_hash_map_order(["user", "client-id", "ip"]) == ["ip", "client-id", "user"]
    assert jvm.java_hash_map_order(["b", "a", "c"]) == ["a", "b", "c"]


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(list(quotas.USER_AND_CLIENT_QUOTA_KEYS)),
    st.floats(allow_nan=False, allow_infinity=True, width=64),
)
def test_quota_value_rules_against_reference(key: str, value: float) -> None:
    error = quotas.validate_quota_value(quotas.USER_AND_CLIENT_QUOTA_KEYS, key, value)
    kind = quotas.USER_AND_CLIENT_QUOTA_KEYS[key]
    if value <= 0:
        expected = f"Quota {key} must be greater than 0"
    elif kind == "DOUBLE":
        expected = None
    elif value > 2.0**63:
        expected = f"Proposed value for {key} is too large for a LONG."
    elif value == 2.0**63:  # (double) Long.MAX_VALUE is 2^63: not greater, and integral
        expected = None
    elif value - math.floor(value) > 1e-6:
        expected = f"{key} cannot be a fractional value."
    else:
        expected = None
    assert error.message == expected
