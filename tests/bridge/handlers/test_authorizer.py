"""StandardAuthorizer semantics: Kafka's StandardAuthorizerTest cases, a brute-force reference, the request table."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_payload_module
from kio.schema.create_acls.v3 import CreateAclsRequest
from kio.schema.describe_acls.v3 import DescribeAclsRequest
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType
from kio.static.primitive import i8, i32

from bridge.handlers._common import nested
from bridge.handlers.authorizer import (
    CLUSTER_NAME,
    CONTROLLER_CHECKS,
    REQUEST_CHECKS,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    StandardAuthorizer,
    cluster_refusal,
    denied_check,
    java_host_address,
)
from bridge.kafka import protocol
from bridge.kafka.protocol import KafkaPrincipal
from migrate.errors import Zk2KraftError
from migrate.kraft.image import AclBinding, MetadataImage

OP, RT, PT = AclOperation, ResourceType, PatternType
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
HOST = "192.168.0.1"


def acl(
    rt: ResourceType, name: str, pattern: PatternType, principal: str, op: AclOperation,
    permission: AclPermissionType, host: str = "*",
) -> AclBinding:  # fmt: skip
    return AclBinding(int(rt), name, int(pattern), principal, host, int(op), int(permission))


def foo_acl(op: AclOperation, permission: AclPermissionType) -> AclBinding:
    """StandardAuthorizerTest.newFooAcl: TOPIC foo_ PREFIXED User:bob *."""
    return acl(RT.TOPIC, "foo_", PT.PREFIXED, "User:bob", op, permission)


def bar_acl(op: AclOperation, permission: AclPermissionType) -> AclBinding:
    """StandardAuthorizerTest.newBarAcl: GROUP bar LITERAL User:* *."""
    return acl(RT.GROUP, "bar", PT.LITERAL, "User:*", op, permission)


def allowed(authorizer: StandardAuthorizer, user: str, op: AclOperation, rt: ResourceType, name: str) -> bool:
    return authorizer.authorize(KafkaPrincipal("User", user), HOST, op, rt, name)


# ---------------------------------------------------------------- StandardAuthorizerTest's cases


@pytest.mark.parametrize("implied_by", [OP.DESCRIBE, OP.READ, OP.WRITE, OP.DELETE, OP.ALTER])
def test_allow_acls_imply_describe(implied_by: AclOperation) -> None:
    assert allowed(StandardAuthorizer([foo_acl(implied_by, ALLOW)]), "bob", OP.DESCRIBE, RT.TOPIC, "foo_bar")


def test_create_does_not_imply_describe_and_deny_acls_imply_nothing() -> None:
    assert not allowed(
        StandardAuthorizer([foo_acl(OP.CREATE, ALLOW)]), "bob", OP.DESCRIBE, RT.TOPIC, "foo_bar"
    )
    for op in (OP.READ, OP.WRITE, OP.DELETE, OP.ALTER):
        # The DENY does not apply to DESCRIBE, and nothing allows it: denied by default, but a DESCRIBE
        # ALLOW next to it wins, which shows the DENY was not taken for DESCRIBE.
        authorizer = StandardAuthorizer([foo_acl(op, DENY), foo_acl(OP.DESCRIBE, ALLOW)])
        assert allowed(authorizer, "bob", OP.DESCRIBE, RT.TOPIC, "foo_bar")
    authorizer = StandardAuthorizer([foo_acl(OP.DESCRIBE, DENY), foo_acl(OP.READ, ALLOW)])
    assert not allowed(authorizer, "bob", OP.DESCRIBE, RT.TOPIC, "foo_bar")


def test_alter_configs_implies_describe_configs_for_allow_only() -> None:
    for op in (OP.DESCRIBE_CONFIGS, OP.ALTER_CONFIGS):
        assert allowed(
            StandardAuthorizer([foo_acl(op, ALLOW)]), "bob", OP.DESCRIBE_CONFIGS, RT.TOPIC, "foo_bar"
        )
    both = StandardAuthorizer([foo_acl(OP.ALTER_CONFIGS, DENY), foo_acl(OP.DESCRIBE_CONFIGS, ALLOW)])
    assert allowed(both, "bob", OP.DESCRIBE_CONFIGS, RT.TOPIC, "foo_bar")
    assert not allowed(both, "bob", OP.ALTER_CONFIGS, RT.TOPIC, "foo_bar")


def test_principal_matching() -> None:
    assert allowed(StandardAuthorizer([foo_acl(OP.READ, ALLOW)]), "bob", OP.READ, RT.TOPIC, "foo_bar")
    assert not allowed(StandardAuthorizer([foo_acl(OP.READ, ALLOW)]), "alice", OP.READ, RT.TOPIC, "foo_bar")
    wildcard_deny = StandardAuthorizer([bar_acl(OP.READ, DENY)], allow_everyone_if_no_acl_found=True)
    assert not allowed(wildcard_deny, "alice", OP.READ, RT.GROUP, "bar")


def test_simple_authorizations() -> None:
    authorizer = StandardAuthorizer(
        [foo_acl(OP.READ, ALLOW), foo_acl(OP.WRITE, ALLOW), bar_acl(OP.DESCRIBE_CONFIGS, ALLOW),
         bar_acl(OP.ALTER_CONFIGS, ALLOW)]
    )  # fmt: skip
    assert allowed(authorizer, "bob", OP.READ, RT.TOPIC, "foo_")
    assert allowed(authorizer, "fred", OP.ALTER_CONFIGS, RT.GROUP, "bar")


def test_topic_acl_with_operation_all() -> None:
    authorizer = StandardAuthorizer([
        acl(RT.TOPIC, "foo", PT.LITERAL, "User:*", OP.ALL, ALLOW),
        acl(RT.TOPIC, "bar", PT.PREFIXED, "User:alice", OP.ALL, ALLOW),
        acl(RT.TOPIC, "baz", PT.LITERAL, "User:bob", OP.ALL, ALLOW),
    ])  # fmt: skip
    expected = {
        "alice": [(OP.WRITE, "foo", True), (OP.DESCRIBE_CONFIGS, "bar", True), (OP.DESCRIBE, "baz", False)],
        "bob": [(OP.WRITE, "foo", True), (OP.READ, "bar", False), (OP.DESCRIBE, "baz", True)],
        "malory": [(OP.DESCRIBE, "foo", True), (OP.WRITE, "bar", False), (OP.READ, "baz", False)],
    }
    for user, actions in expected.items():
        assert [allowed(authorizer, user, op, RT.TOPIC, name) for op, name, _ in actions] == [
            result for _, _, result in actions
        ]


def test_authorization_with_many_acls() -> None:
    authorizer = StandardAuthorizer([
        acl(RT.TOPIC, "green2", PT.LITERAL, "User:*", OP.READ, ALLOW),
        acl(RT.TOPIC, "green", PT.PREFIXED, "User:bob", OP.READ, ALLOW),
        acl(RT.TOPIC, "betamax4", PT.LITERAL, "User:bob", OP.READ, ALLOW),
        acl(RT.TOPIC, "betamax", PT.LITERAL, "User:bob", OP.READ, ALLOW),
        acl(RT.TOPIC, "beta", PT.PREFIXED, "User:*", OP.READ, ALLOW),
        acl(RT.TOPIC, "alpha", PT.PREFIXED, "User:*", OP.READ, ALLOW),
        acl(RT.TOPIC, "alp", PT.PREFIXED, "User:bob", OP.READ, DENY),
        acl(RT.GROUP, "*", PT.LITERAL, "User:bob", OP.WRITE, ALLOW),
        acl(RT.GROUP, "wheel", PT.LITERAL, "User:*", OP.WRITE, DENY),
    ])  # fmt: skip
    assert allowed(authorizer, "bob", OP.READ, RT.TOPIC, "green1")
    assert not allowed(authorizer, "bob", OP.WRITE, RT.GROUP, "wheel")
    assert not allowed(authorizer, "bob", OP.READ, RT.TOPIC, "alpha")
    assert allowed(authorizer, "bob", OP.WRITE, RT.GROUP, "arbitrary")
    assert not allowed(authorizer, "bob", OP.READ, RT.TOPIC, "ala")


def test_configuration_super_users_and_default() -> None:
    assert StandardAuthorizer.from_properties({}).super_users == frozenset()
    assert StandardAuthorizer.from_properties({"super.users": " "}).super_users == frozenset()
    configured = StandardAuthorizer.from_properties({"super.users": ";  User:bob  ;  User:alice "})
    assert configured.super_users == {"User:bob", "User:alice"}
    with pytest.raises(Zk2KraftError, match="principalType:principalName but got bob"):
        StandardAuthorizer.from_properties({"super.users": "bob;:alice"})
    assert not StandardAuthorizer.from_properties({}).allow_everyone_if_no_acl_found
    assert StandardAuthorizer.from_properties(
        {"allow.everyone.if.no.acl.found": "true"}
    ).allow_everyone_if_no_acl_found
    # A super user passes even an explicit DENY; nobody else gets anything without an ACL.
    denied = acl(RT.CLUSTER, CLUSTER_NAME, PT.LITERAL, "User:*", OP.ALL, DENY)
    authorizer = StandardAuthorizer.from_properties({"super.users": "User:admin"}, [denied])
    assert allowed(authorizer, "admin", OP.ALTER, RT.CLUSTER, CLUSTER_NAME)
    assert not allowed(authorizer, "bob", OP.ALTER, RT.CLUSTER, CLUSTER_NAME)
    assert not allowed(authorizer, "bob", OP.READ, RT.TOPIC, "t")


def test_allow_everyone_only_where_no_acl_names_the_resource() -> None:
    authorizer = StandardAuthorizer(
        [acl(RT.TOPIC, "secret", PT.LITERAL, "User:alice", OP.READ, ALLOW)],
        allow_everyone_if_no_acl_found=True,
    )
    assert allowed(authorizer, "bob", OP.READ, RT.TOPIC, "public")
    assert not allowed(authorizer, "bob", OP.READ, RT.TOPIC, "secret")  # an ACL exists, none applies to bob
    assert allowed(authorizer, "alice", OP.READ, RT.TOPIC, "secret")


def test_hosts_match_as_kafka_prints_addresses() -> None:
    authorizer = StandardAuthorizer([
        acl(RT.TOPIC, "t", PT.LITERAL, "User:bob", OP.READ, ALLOW, host="0:0:0:0:0:0:0:1"),
        acl(RT.TOPIC, "t", PT.LITERAL, "User:bob", OP.WRITE, ALLOW, host="10.1.2.3"),
    ])  # fmt: skip
    bob = KafkaPrincipal("User", "bob")
    assert authorizer.authorize(bob, "::1", OP.READ, RT.TOPIC, "t")
    assert not authorizer.authorize(bob, "127.0.0.1", OP.READ, RT.TOPIC, "t")
    assert authorizer.authorize(bob, "::ffff:10.1.2.3", OP.WRITE, RT.TOPIC, "t")
    assert java_host_address("2001:db8::ff00:42:8329") == "2001:db8:0:0:0:ff00:42:8329"
    assert java_host_address("10.0.0.1") == "10.0.0.1"


def test_principal_types_and_user_wildcard() -> None:
    authorizer = StandardAuthorizer([
        acl(RT.GROUP, "g", PT.LITERAL, "Group:ops", OP.READ, ALLOW),
        acl(RT.GROUP, "h", PT.LITERAL, "Group:*", OP.READ, ALLOW),  # only User:* is a wildcard
    ])  # fmt: skip
    assert authorizer.authorize("Group:ops", HOST, OP.READ, RT.GROUP, "g")
    assert not authorizer.authorize("User:ops", HOST, OP.READ, RT.GROUP, "g")
    assert not authorizer.authorize("Group:dev", HOST, OP.READ, RT.GROUP, "h")


def test_authorized_operations_bitfield() -> None:
    authorizer = StandardAuthorizer([acl(RT.TOPIC, "t", PT.LITERAL, "User:bob", OP.WRITE, ALLOW)])
    bits = authorizer.authorized_operations(KafkaPrincipal("User", "bob"), HOST, RT.TOPIC, "t")
    assert bits == (1 << OP.WRITE) | (1 << OP.DESCRIBE)


def test_for_image_reads_the_migrated_acls() -> None:
    import uuid

    image = MetadataImage()
    image.acls[uuid.uuid4()] = acl(RT.TOPIC, "t", PT.PREFIXED, "User:bob", OP.READ, ALLOW)
    assert allowed(StandardAuthorizer.for_image(image), "bob", OP.READ, RT.TOPIC, "tx")


# ---------------------------------------------------------------- against a brute-force reference


def reference(
    acls: list[AclBinding], supers: set[str], allow_default: bool, principal: str, host: str,
    op: int, rt: int, name: str,
) -> bool:  # fmt: skip
    """The rules as written in Kafka's documentation of StandardAuthorizer, checked ACL by ACL."""
    if principal in supers:
        return True
    implied = {OP.DESCRIBE: {OP.DESCRIBE, OP.READ, OP.WRITE, OP.DELETE, OP.ALTER},
               OP.DESCRIBE_CONFIGS: {OP.DESCRIBE_CONFIGS, OP.ALTER_CONFIGS}}  # fmt: skip
    on_resource = [
        a for a in acls
        if a.resource_type == rt and (
            (a.pattern_type == PT.LITERAL and a.resource_name in (name, "*"))
            or (a.pattern_type == PT.PREFIXED and name.startswith(a.resource_name)))
    ]  # fmt: skip
    applying = [
        a for a in on_resource
        if a.principal in (principal, "User:*") and a.host in (host, "*") and (
            a.operation in (op, OP.ALL)
            or (a.permission_type == ALLOW and a.operation in implied.get(AclOperation(op), ())))
    ]  # fmt: skip
    if any(a.permission_type == DENY for a in applying):
        return False
    if applying:
        return True
    return allow_default and not on_resource


NAMES = st.sampled_from(["a", "ab", "abc", "b", "ba", "*", "a*", "kafka-cluster"])
ACLS = st.builds(
    AclBinding,
    resource_type=st.sampled_from([int(RT.TOPIC), int(RT.GROUP), int(RT.CLUSTER)]),
    resource_name=NAMES,
    pattern_type=st.sampled_from([int(PT.LITERAL), int(PT.PREFIXED)]),
    principal=st.sampled_from(["User:alice", "User:bob", "User:*", "Group:alice"]),
    host=st.sampled_from(["*", "10.0.0.1", "10.0.0.2"]),
    operation=st.sampled_from([int(op) for op in OP if op >= OP.ALL]),
    permission_type=st.sampled_from([int(DENY), int(ALLOW)]),
)


@settings(max_examples=500, deadline=None)
@given(
    acls=st.lists(ACLS, max_size=12),
    supers=st.sets(st.sampled_from(["User:alice", "User:carol"]), max_size=1),
    allow_default=st.booleans(),
    principal=st.sampled_from(["User:alice", "User:bob", "User:carol", "Group:alice"]),
    host=st.sampled_from(["10.0.0.1", "10.0.0.2"]),
    op=st.sampled_from([int(op) for op in OP if op > OP.ALL]),
    rt=st.sampled_from([int(RT.TOPIC), int(RT.GROUP), int(RT.CLUSTER)]),
    name=st.sampled_from(["a", "ab", "abc", "abd", "b", "ba", "c", "a*", "kafka-cluster"]),
)
def test_matches_the_brute_force_reference(
    acls: list[AclBinding], supers: set[str], allow_default: bool, principal: str, host: str,
    op: int, rt: int, name: str,
) -> None:  # fmt: skip
    authorizer = StandardAuthorizer(acls, super_users=supers, allow_everyone_if_no_acl_found=allow_default)
    expected = reference(acls, supers, allow_default, principal, host, op, rt, name)
    assert authorizer.authorize(principal, host, op, rt, name) == expected


# ---------------------------------------------------------------- the request table


def test_request_table_names_kafkas_checks() -> None:
    def checks(api_key: int) -> set[tuple[AclOperation, ResourceType]]:
        return {(c.operation, c.resource_type) for c in REQUEST_CHECKS[api_key].checks}

    assert checks(19) == {(OP.CREATE, RT.CLUSTER), (OP.CREATE, RT.TOPIC), (OP.DESCRIBE_CONFIGS, RT.TOPIC)}
    assert checks(33) == checks(44) == {(OP.ALTER_CONFIGS, RT.TOPIC), (OP.ALTER_CONFIGS, RT.CLUSTER)}
    assert checks(30) == checks(31) == checks(51) == {(OP.ALTER, RT.CLUSTER)}
    assert checks(29) == checks(50) == checks(46) == {(OP.DESCRIBE, RT.CLUSTER)}
    assert checks(45) == checks(43) == checks(64) == {(OP.ALTER, RT.CLUSTER)}
    assert checks(49) == {(OP.ALTER_CONFIGS, RT.CLUSTER)} and checks(48) == {
        (OP.DESCRIBE_CONFIGS, RT.CLUSTER)
    }
    assert (OP.DESCRIBE, RT.TOPIC) in checks(3)
    assert checks(56) == checks(58) == {(OP.CLUSTER_ACTION, RT.CLUSTER)}
    for api_key in (29, 30, 31, 43, 45, 46, 48, 49, 50, 51, 56, 64):
        assert REQUEST_CHECKS[api_key].request_wide
        assert {c.error for c in REQUEST_CHECKS[api_key].checks} == {ErrorCode.cluster_authorization_failed}
    for api_key in (19, 20, 37):
        assert ErrorCode.topic_authorization_failed in {c.error for c in REQUEST_CHECKS[api_key].checks}


def create_acls_request() -> Any:
    module = load_payload_module(30, 3, EntityType.request)
    creation = module.AclCreation(
        resource_type=2, resource_name="t", resource_pattern_type=3, principal="User:bob", host="*",
        operation=3, permission_type=3,
    )  # fmt: skip
    return CreateAclsRequest(creations=(creation, creation))


def test_cluster_refusal_builds_kafkas_error_response() -> None:
    authorizer = StandardAuthorizer(
        [acl(RT.CLUSTER, CLUSTER_NAME, PT.LITERAL, "User:admin", OP.ALTER, ALLOW)]
    )
    request = create_acls_request()
    refused = cluster_refusal(authorizer, "User:bob", HOST, 30, 3, request)
    assert refused is not None
    assert [r.error_code for r in refused.results] == [ErrorCode.cluster_authorization_failed] * 2
    assert cluster_refusal(authorizer, "User:admin", HOST, 30, 3, request) is None
    # ALTER implies DESCRIBE: the admin may list ACLs, bob may not.
    describe = DescribeAclsRequest(
        resource_type_filter=i8(1), resource_name_filter=None, pattern_type_filter=i8(1), principal_filter=None,
        host_filter=None, operation=i8(1), permission_type=i8(1),
    )  # fmt: skip
    assert cluster_refusal(authorizer, "User:admin", HOST, 29, 3, describe) is None
    refused_describe = cluster_refusal(authorizer, "User:bob", HOST, 29, 3, describe)
    assert refused_describe is not None
    assert refused_describe.error_code == ErrorCode.cluster_authorization_failed
    assert refused_describe.error_message == "Cluster authorization failed."
    assert cluster_refusal(authorizer, "User:bob", HOST, 19, 7, None) is None  # per-item, not request-wide


def test_reassignments_need_alter_or_describe_on_the_cluster() -> None:
    authorizer = StandardAuthorizer(
        [acl(RT.CLUSTER, CLUSTER_NAME, PT.LITERAL, "User:ops", OP.DESCRIBE, ALLOW)]
    )
    alter_cls = protocol.request_class(45, 0)
    topic_cls, part_cls = nested(alter_cls, "ReassignableTopic"), nested(alter_cls, "ReassignablePartition")
    alter = alter_cls(topics=(topic_cls(name="t", partitions=(part_cls(partition_index=i32(0)),)),))
    refused = cluster_refusal(authorizer, "User:ops", HOST, 45, 0, alter)
    assert refused is not None and refused.error_code == ErrorCode.cluster_authorization_failed
    assert [(p.partition_index, p.error_code) for t in refused.responses for p in t.partitions] == [
        (0, ErrorCode.cluster_authorization_failed)
    ]
    # DESCRIBE is enough to list; nobody else may.
    listing = protocol.request_class(46, 0)(topics=None)
    assert cluster_refusal(authorizer, "User:ops", HOST, 46, 0, listing) is None
    denied = cluster_refusal(authorizer, "User:bob", HOST, 46, 0, listing)
    assert denied is not None and denied.error_code == ErrorCode.cluster_authorization_failed


def test_elect_leaders_needs_alter_on_the_cluster() -> None:
    authorizer = StandardAuthorizer([acl(RT.CLUSTER, CLUSTER_NAME, PT.LITERAL, "User:ops", OP.ALTER, ALLOW)])
    elect_cls = protocol.request_class(43, 2)
    topic_cls = nested(elect_cls, "TopicPartitions")
    elect = elect_cls(
        election_type=i8(0), topic_partitions=(topic_cls(topic="t", partitions=(i32(0), i32(2))),), timeout=i32(60000)
    )
    assert cluster_refusal(authorizer, "User:ops", HOST, 43, 2, elect) is None
    refused = cluster_refusal(authorizer, "User:bob", HOST, 43, 2, elect)
    assert refused is not None and refused.error_code == ErrorCode.cluster_authorization_failed
    assert [
        (r.topic, p.partition_id, p.error_code, p.error_message)
        for r in refused.replica_election_results
        for p in r.partition_result
    ] == [("t", 0, ErrorCode.cluster_authorization_failed, None), ("t", 2, ErrorCode.cluster_authorization_failed, None)]


def test_controller_table_names_controllerapis_cluster_checks() -> None:
    def checks(api_key: int) -> set[tuple[AclOperation, ResourceType]]:
        return {(c.operation, c.resource_type) for c in CONTROLLER_CHECKS[api_key].checks}

    # Brokers' and voters' own RPCs, and every Envelope's sender: CLUSTER_ACTION on the cluster.
    for api_key in (1, 7, 52, 53, 54, 56, 58, 59, 62, 63, 67, 70, 73, 82):
        assert checks(api_key) == {(OP.CLUSTER_ACTION, RT.CLUSTER)}, api_key
        assert CONTROLLER_CHECKS[api_key].request_wide
    assert checks(55) == {(OP.DESCRIBE, RT.CLUSTER)}  # DescribeQuorum
    assert checks(57) == checks(80) == checks(81) == checks(64) == {(OP.ALTER, RT.CLUSTER)}
    # Unlike a broker, a controller wants ALTER on the cluster for DescribeCluster.
    assert checks(60) == {(OP.ALTER, RT.CLUSTER)} and CONTROLLER_CHECKS[60].request_wide
    assert not REQUEST_CHECKS[60].request_wide


def test_denied_check_names_the_failed_check() -> None:
    authorizer = StandardAuthorizer([acl(RT.CLUSTER, CLUSTER_NAME, PT.LITERAL, "User:broker", OP.CLUSTER_ACTION, ALLOW)])
    broker, alice = KafkaPrincipal("User", "broker"), KafkaPrincipal("User", "alice")
    assert denied_check(authorizer.authorize, broker, HOST, 62) is None
    refused = denied_check(authorizer.authorize, alice, HOST, 62)
    assert refused is not None and refused.operation == OP.CLUSTER_ACTION
    assert refused.error == ErrorCode.cluster_authorization_failed
    assert denied_check(authorizer.authorize, alice, HOST, 19) is None  # per item, not request-wide
