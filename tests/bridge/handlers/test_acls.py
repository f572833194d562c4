"""CreateAcls / DeleteAcls handlers against Kafka 3.9's AclApis + AclControlManager + AclBindingFilter rules."""

from __future__ import annotations

import importlib
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from bridge.api import ControllerResult
from bridge.handlers import acls
from bridge.handlers.acls import Binding, Filter
from migrate.errors import InvalidRequestError
from migrate.kraft import records as r
from migrate.kraft.image import MetadataImage
from migrate.kraft.replay import replay_records
from tests.support.handlers import Records, context, image_of, round_trip

TOPIC, GROUP, CLUSTER = 2, 3, 4
ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
READ, WRITE, ALL = 3, 4, 2
DENY, ALLOW = 2, 3

# (id, resource type, name, pattern, principal, host, operation, permission)
STORED = [
    (uuid.UUID(int=101), TOPIC, "orders", LITERAL, "User:alice", "*", READ, ALLOW),
    (uuid.UUID(int=102), TOPIC, "*", LITERAL, "User:bob", "*", WRITE, ALLOW),
    (uuid.UUID(int=103), TOPIC, "ord", PREFIXED, "User:alice", "10.0.0.1", READ, DENY),
    (uuid.UUID(int=104), GROUP, "orders", LITERAL, "User:alice", "*", READ, ALLOW),
    (uuid.UUID(int=105), CLUSTER, "kafka-cluster", LITERAL, "User:admin", "*", ALL, ALLOW),
]


def acl_record(
    acl_id: uuid.UUID, rt: int, name: str, pt: int, principal: str, host: str, op: int, perm: int
) -> Any:
    return r.AccessControlEntryRecord(
        id=acl_id, resource_type=rt, resource_name=name, pattern_type=pt, principal=principal, host=host,
        operation=op, permission_type=perm,
    )  # fmt: skip


def image_after(*extra: Records) -> MetadataImage:
    return image_of([(acl_record(*row), 0) for row in STORED], *extra)








def create(
    image: MetadataImage, version: int, rows: list[tuple[Any, ...]], new_uuid: Any = None
) -> tuple[ControllerResult, Any]:
    module = importlib.import_module(f"kio.schema.create_acls.v{version}.request")
    request = module.CreateAclsRequest(
        creations=tuple(
            module.AclCreation(
                resource_type=i8(rt), resource_name=name, resource_pattern_type=i8(pt), principal=principal,
                host=host, operation=i8(op), permission_type=i8(perm),
            )
            for rt, name, pt, principal, host, op, perm in rows
        )
    )  # fmt: skip
    result = acls.handle_create_acls(context(image, version, new_uuid=new_uuid), request)
    return result, round_trip(result, 30, version)


def delete(
    image: MetadataImage, version: int, filters: list[tuple[Any, ...]]
) -> tuple[ControllerResult, Any]:
    module = importlib.import_module(f"kio.schema.delete_acls.v{version}.request")
    request = module.DeleteAclsRequest(
        filters=tuple(
            module.DeleteAclsFilter(
                resource_type_filter=i8(rt), resource_name_filter=name, pattern_type_filter=i8(pt),
                principal_filter=principal, host_filter=host, operation=i8(op), permission_type=i8(perm),
            )
            for rt, name, pt, principal, host, op, perm in filters
        )
    )  # fmt: skip
    result = acls.handle_delete_acls(context(image, version), request)
    return result, round_trip(result, 31, version)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_create_writes_records_with_new_ids(version: int) -> None:
    image = image_after()
    result, body = create(
        image,
        version,
        [
            (TOPIC, "payments", LITERAL, "User:carol", "*", WRITE, ALLOW),
            (TOPIC, "orders", LITERAL, "User:alice", "*", READ, ALLOW),  # exists: success, no record
            (TOPIC, "payments", LITERAL, "User:carol", "*", WRITE, ALLOW),  # repeated: success, no record
            (GROUP, "g-", PREFIXED, "User:carol", "*", READ, DENY),
        ],
    )
    assert [(x.error_code, x.error_message) for x in body.results] == [(ErrorCode.none, None)] * 4
    assert result.records == [
        (acl_record(uuid.UUID(int=1000), TOPIC, "payments", LITERAL, "User:carol", "*", WRITE, ALLOW), 0),
        (acl_record(uuid.UUID(int=1001), GROUP, "g-", PREFIXED, "User:carol", "*", READ, DENY), 0),
    ]
    after = image_after(result.records)
    assert len(after.acls) == len(STORED) + 2
    assert after.acls[uuid.UUID(int=1001)].resource_name == "g-"


def test_new_ids_skip_taken_and_reserved_ids() -> None:
    draws = iter([uuid.UUID(int=0), uuid.UUID(int=1), uuid.UUID(int=101), uuid.UUID(int=7)])
    result, _ = create(
        image_after(), 3, [(TOPIC, "t", LITERAL, "User:x", "*", READ, ALLOW)], lambda: next(draws)
    )
    assert result.records[0][0].id == uuid.UUID(int=7)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ((CLUSTER, "other", LITERAL, "User:x", "*", ALL, ALLOW), "The only valid name for the CLUSTER resource is kafka-cluster"),
        ((TOPIC, "", LITERAL, "User:x", "*", READ, ALLOW), "Invalid empty resource name"),
        ((ANY, "t", LITERAL, "User:x", "*", READ, ALLOW), "Invalid resourceType ANY"),
        ((99, "t", LITERAL, "User:x", "*", READ, ALLOW), "Invalid resourceType UNKNOWN"),
        ((TOPIC, "t", MATCH, "User:x", "*", READ, ALLOW), "Invalid patternType MATCH"),
        ((TOPIC, "t", ANY, "User:x", "*", READ, ALLOW), "Invalid patternType ANY"),
        ((TOPIC, "t", LITERAL, "User:x", "*", ANY, ALLOW), "Invalid operation ANY"),
        ((TOPIC, "t", LITERAL, "User:x", "*", 42, ALLOW), "Invalid operation UNKNOWN"),
        ((TOPIC, "t", LITERAL, "User:x", "*", READ, ANY), "Invalid permissionType ANY"),
    ],
)  # fmt: skip
def test_create_validation(row: tuple[Any, ...], message: str) -> None:
    result, body = create(image_after(), 2, [row, (TOPIC, "ok", LITERAL, "User:x", "*", READ, ALLOW)])
    assert [(x.error_code, x.error_message) for x in body.results] == [
        (ErrorCode.invalid_request, message),
        (ErrorCode.none, None),
    ]
    assert [rv[0].resource_name for rv in result.records] == ["ok"]


def test_unknown_codes_make_the_request_unparsable() -> None:
    with pytest.raises(InvalidRequestError, match="CreateAcls v3"):
        create(image_after(), 3, [(0, "t", LITERAL, "User:x", "*", READ, ALLOW)])
    with pytest.raises(InvalidRequestError, match="DeleteAcls v1"):
        delete(image_after(), 1, [(TOPIC, None, ANY, None, None, 0, ANY)])


@pytest.mark.parametrize("version", [1, 2, 3])
def test_delete_with_match_filter_and_overlapping_filters(version: int) -> None:
    image = image_after()
    result, body = delete(
        image,
        version,
        [
            (TOPIC, "orders", MATCH, None, None, ANY, ANY),  # literal orders, literal *, prefix ord
            (ANY, "orders", LITERAL, "User:alice", None, READ, ALLOW),  # topic and group "orders"
            (TOPIC, None, PREFIXED, None, None, ANY, ANY),
        ],
    )
    matched = [
        [(m.resource_type, m.resource_name, m.pattern_type) for m in f.matching_acls]
        for f in body.filter_results
    ]
    assert matched == [
        [(TOPIC, "orders", LITERAL), (TOPIC, "*", LITERAL), (TOPIC, "ord", PREFIXED)],
        [(TOPIC, "orders", LITERAL), (GROUP, "orders", LITERAL)],
        [(TOPIC, "ord", PREFIXED)],
    ]
    assert all(f.error_code == ErrorCode.none for f in body.filter_results)
    # Each ACL is removed once even when several filters match it.
    assert result.records == [
        (r.RemoveAccessControlEntryRecord(id=uuid.UUID(int=i)), 0) for i in (101, 102, 103, 104)
    ]
    assert set(image_after(result.records).acls) == {uuid.UUID(int=105)}


def test_delete_filter_errors() -> None:
    _, body = delete(
        image_after(),
        3,
        [
            (77, None, ANY, None, None, ANY, ANY),
            (TOPIC, None, ANY, None, None, ANY, 9),
            (CLUSTER, None, ANY, None, None, ANY, ANY),
        ],
    )
    assert [(f.error_code, f.error_message, len(f.matching_acls)) for f in body.filter_results] == [
        (ErrorCode.invalid_request, "Unknown patternFilter.", 0),
        (ErrorCode.invalid_request, "Unknown entryFilter.", 0),
        (ErrorCode.none, None, 1),
    ]


# ------------------------------------------------------------------------------------- filter matching property


def reference_matches(f: Filter, b: Binding) -> bool:
    """AclBindingFilter.matches restated as a table of independent conditions."""
    type_ok = f.resource_type in (ANY, b.resource_type)
    if f.pattern_type in (ANY, b.pattern_type):
        name_ok = f.resource_name is None or f.resource_name == b.resource_name
    elif f.pattern_type == MATCH:
        name_ok = (
            f.resource_name is None
            or (b.pattern_type == LITERAL and (b.resource_name == f.resource_name or b.resource_name == "*"))
            or (b.pattern_type == PREFIXED and f.resource_name[: len(b.resource_name)] == b.resource_name)
        )
    else:
        name_ok = False
    entry_ok = (
        f.principal in (None, b.principal)
        and f.host in (None, b.host)
        and f.operation in (ANY, b.operation)
        and f.permission_type in (ANY, b.permission_type)
    )
    return type_ok and name_ok and entry_ok


names = st.sampled_from(["", "*", "o", "or", "orders", "orders-1", "p"])
bindings = st.builds(
    Binding,
    st.sampled_from([TOPIC, GROUP, CLUSTER]),
    names,
    st.sampled_from([LITERAL, PREFIXED]),
    st.sampled_from(["User:a", "User:b"]),
    st.sampled_from(["*", "h"]),
    st.sampled_from([READ, WRITE, ALL]),
    st.sampled_from([DENY, ALLOW]),
)
filters = st.builds(
    Filter,
    st.sampled_from([ANY, TOPIC, GROUP, CLUSTER]),
    st.one_of(st.none(), names),
    st.sampled_from([ANY, MATCH, LITERAL, PREFIXED]),
    st.sampled_from([None, "User:a", "User:b"]),
    st.sampled_from([None, "*", "h"]),
    st.sampled_from([ANY, READ, WRITE, ALL]),
    st.sampled_from([ANY, DENY, ALLOW]),
)


@settings(max_examples=500, deadline=None)
@given(filters, bindings)
def test_filter_matching_against_reference(f: Filter, b: Binding) -> None:
    assert f.matches(b) == reference_matches(f, b)


@settings(max_examples=100, deadline=None)
@given(st.lists(bindings, max_size=6, unique=True), filters)
def test_delete_removes_exactly_the_matching_acls(stored: list[Binding], f: Filter) -> None:
    records = [
        (acl_record(uuid.UUID(int=i + 1), b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host,
                    b.operation, b.permission_type), 0)
        for i, b in enumerate(stored)
    ]  # fmt: skip
    image = replay_records(records)
    result, body = delete(
        image,
        3,
        [
            (
                f.resource_type,
                f.resource_name,
                f.pattern_type,
                f.principal,
                f.host,
                f.operation,
                f.permission_type,
            )
        ],
    )
    expected = [b for b in stored if reference_matches(f, b)]
    listed = [
        Binding(
            m.resource_type,
            m.resource_name,
            m.pattern_type,
            m.principal,
            m.host,
            m.operation,
            m.permission_type,
        )
        for m in body.filter_results[0].matching_acls
    ]
    assert listed == expected
    remaining = replay_records(records + result.records).acls.values()
    assert sorted(map(repr, map(Binding.of, remaining))) == sorted(
        repr(b) for b in stored if b not in expected
    )
