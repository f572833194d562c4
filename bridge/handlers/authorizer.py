"""Kafka 3.9's StandardAuthorizer over the cluster's own ACLs, and the checks Kafka makes per request.

`StandardAuthorizer.authorize` decides as StandardAuthorizerData does: super users may do anything;
otherwise every ACL whose resource pattern matches (LITERAL name, LITERAL `*`, PREFIXED prefix of the name)
counts, an ACL applies when its principal is the caller or `User:*`, its host is the caller's address or
`*`, and its operation is the action's, ALL, or (ALLOW only) one implying it (READ/WRITE/DELETE/ALTER imply
DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS). Any applying DENY wins; else any applying ALLOW allows;
else `allow.everyone.if.no.acl.found` decides only when no ACL matched the resource at all.

`REQUEST_CHECKS` lists, for each request the shim or the bridge's controller serves, the (operation,
resource) checks KafkaApis / ControllerApis make and the error a denied caller gets (`CONTROLLER_CHECKS`:
where a controller checks otherwise); `denied_check` finds a failed request-wide one, `cluster_refusal`
answers it.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from kio.schema.errors import ErrorCode

from bridge.kafka.error_responses import error_response
from bridge.kafka.protocol import KafkaPrincipal
from migrate.errors import Zk2KraftError
from migrate.kraft.image import AclBinding, MetadataImage
from migrate.zk.model import AclOperation, AclPermissionType, PatternType, ResourceType

CLUSTER_NAME: Final = "kafka-cluster"
WILDCARD: Final = "*"
WILDCARD_PRINCIPAL: Final = ("User", "*")

# ALLOW ACLs for these operations also allow DESCRIBE / DESCRIBE_CONFIGS (StandardAuthorizerData).
_IMPLIES_DESCRIBE: Final = frozenset(
    {AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}
)
_IMPLIES_DESCRIBE_CONFIGS: Final = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})

# AclEntry.supportedOperations: what `authorized_operations` reports on, per resource type.
SUPPORTED_OPERATIONS: Final[dict[ResourceType, frozenset[AclOperation]]] = {
    ResourceType.TOPIC: frozenset({AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                                   AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.ALTER,
                                   AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE}),
    ResourceType.CLUSTER: frozenset({AclOperation.CREATE, AclOperation.CLUSTER_ACTION,
                                     AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
                                     AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER, AclOperation.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({AclOperation.DESCRIBE, AclOperation.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({AclOperation.DESCRIBE}),
    ResourceType.USER: frozenset({AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS}),
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Entry:
    """The part of an ACL checked once its resource pattern matched."""

    principal: tuple[str, str]
    host: str
    operation: int
    permission: int


class StandardAuthorizer:
    """Authorization decisions over a set of ACL bindings (reload with `load` when the image changes)."""

    def __init__(
        self,
        acls: Iterable[AclBinding] = (),
        *,
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._literal: dict[int, dict[str, list[_Entry]]] = {}
        self._prefixed: dict[int, dict[str, list[_Entry]]] = {}
        self.load(acls)

    @classmethod
    def from_properties(
        cls, properties: Mapping[str, str], acls: Iterable[AclBinding] = ()
    ) -> StandardAuthorizer:
        """Configured as Kafka is: `super.users` (`User:a;User:b`), `allow.everyone.if.no.acl.found`."""
        supers = parse_super_users(properties.get("super.users", ""))
        allow = properties.get("allow.everyone.if.no.acl.found", "false").strip().lower() == "true"
        return cls(acls, super_users=supers, allow_everyone_if_no_acl_found=allow)

    @classmethod
    def for_image(cls, image: MetadataImage, **options: Any) -> StandardAuthorizer:
        return cls(image.acls.values(), **options)

    def load(self, acls: Iterable[AclBinding]) -> None:
        """Replace the ACLs decisions are made from."""
        literal: dict[int, dict[str, list[_Entry]]] = {}
        prefixed: dict[int, dict[str, list[_Entry]]] = {}
        for acl in acls:
            if acl.pattern_type == PatternType.LITERAL:
                table = literal
            elif acl.pattern_type == PatternType.PREFIXED:
                table = prefixed
            else:
                continue  # no other pattern type can be stored
            principal_type, colon, principal_name = acl.principal.partition(":")
            # An unparsable principal cannot be stored either; it matches nobody.
            principal = (principal_type, principal_name) if colon else ("", "\0")
            entry = _Entry(principal, acl.host, acl.operation, acl.permission_type)
            table.setdefault(acl.resource_type, {}).setdefault(acl.resource_name, []).append(entry)
        self._literal, self._prefixed = literal, prefixed

    def authorize(
        self,
        principal: KafkaPrincipal | str,
        host: str,
        operation: AclOperation | int,
        resource_type: ResourceType | int,
        name: str,
    ) -> bool:
        """Whether `principal` connecting from `host` may do `operation` on the LITERAL resource `name`."""
        caller = _principal(principal)
        if f"{caller[0]}:{caller[1]}" in self.super_users:
            return True
        address = java_host_address(host)
        matched = False
        allowed = False
        for entry in self._matching_acls(int(resource_type), name):
            matched = True
            result = _result(entry, caller, address, int(operation))
            if result is AclPermissionType.DENY:
                return False
            allowed = allowed or result is AclPermissionType.ALLOW
        if allowed:
            return True
        return not matched and self.allow_everyone_if_no_acl_found

    def authorized_operations(
        self, principal: KafkaPrincipal | str, host: str, resource_type: ResourceType | int, name: str
    ) -> int:
        """AuthHelper.authorizedOperations: a bit (1 << code) per supported operation that is allowed."""
        bits = 0
        for operation in SUPPORTED_OPERATIONS[ResourceType(resource_type)]:
            if self.authorize(principal, host, operation, resource_type, name):
                bits |= 1 << int(operation)
        return bits

    def _matching_acls(self, resource_type: int, name: str) -> Iterable[_Entry]:
        literal = self._literal.get(resource_type, {})
        yield from literal.get(name, ())
        if name != WILDCARD:
            yield from literal.get(WILDCARD, ())
        prefixed = self._prefixed.get(resource_type)
        if prefixed:
            for end in range(1, len(name) + 1):
                yield from prefixed.get(name[:end], ())


def parse_super_users(text: str) -> frozenset[str]:
    """`User:a;User:b` as StandardAuthorizer reads super.users (blank entries skipped, `TYPE:NAME` each)."""
    supers = frozenset(entry.strip() for entry in text.split(";") if entry.strip())
    for entry in supers:
        if ":" not in entry:
            raise Zk2KraftError(
                f"super.users: expected a string in format principalType:principalName but got {entry}"
            )
    return supers


def _principal(principal: KafkaPrincipal | str) -> tuple[str, str]:
    if isinstance(principal, KafkaPrincipal):
        return principal.principal_type, principal.name
    principal_type, _, name = principal.partition(":")
    return principal_type, name


def _result(entry: _Entry, caller: tuple[str, str], host: str, operation: int) -> AclPermissionType | None:
    """StandardAuthorizerData.findResult: DENY/ALLOW when the ACL applies to the action, else None."""
    if entry.principal != caller and entry.principal != WILDCARD_PRINCIPAL:
        return None
    if entry.host != WILDCARD and entry.host != host:
        return None
    if entry.operation != AclOperation.ALL:
        if entry.permission == AclPermissionType.ALLOW:
            if operation == AclOperation.DESCRIBE:
                if entry.operation not in _IMPLIES_DESCRIBE:
                    return None
            elif operation == AclOperation.DESCRIBE_CONFIGS:
                if entry.operation not in _IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif operation != entry.operation:
                return None
        elif operation != entry.operation:
            return None
    return AclPermissionType.ALLOW if entry.permission == AclPermissionType.ALLOW else AclPermissionType.DENY


@functools.lru_cache(maxsize=4096)
def java_host_address(host: str) -> str:
    """InetAddress.getHostAddress of a client address: IPv6 uncompressed (`0:0:0:0:0:0:0:1`), mapped IPv4 plain.

    ACL hosts are compared as text with this form, so `::1` must be written as Kafka writes it.
    """
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv4Address):
        return str(address)
    if address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    groups = address.packed
    text = ":".join(f"{int.from_bytes(groups[i : i + 2], 'big'):x}" for i in range(0, 16, 2))
    return f"{text}%{address.scope_id}" if address.scope_id else text


# ---------------------------------------------------------------- what Kafka checks per request


@dataclass(frozen=True, slots=True)
class AclCheck:
    """One authorization call: `operation` on `resource_type` named `resource` (CLUSTER_NAME or the item)."""

    operation: AclOperation
    resource_type: ResourceType
    resource: str
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class RequestChecks:
    """What Kafka 3.9 checks for one request kind and what a denied caller sees."""

    api: str
    checks: tuple[AclCheck, ...]
    # True: one cluster-level check guards the whole request (the error response of the request).
    request_wide: bool
    on_denial: str


_TOPIC = "each topic name"
_RESOURCE = "each config resource"


def _check(op: AclOperation, rt: ResourceType, resource: str, error: ErrorCode) -> AclCheck:
    return AclCheck(op, rt, resource, error)


_CLUSTER_AUTH = ErrorCode.cluster_authorization_failed
_TOPIC_AUTH = ErrorCode.topic_authorization_failed
_OP, _RT = AclOperation, ResourceType

REQUEST_CHECKS: Final[dict[int, RequestChecks]] = {
    3: RequestChecks("Metadata", (
        _check(_OP.DESCRIBE, _RT.TOPIC, _TOPIC, _TOPIC_AUTH),
        _check(_OP.CREATE, _RT.CLUSTER, CLUSTER_NAME, _TOPIC_AUTH),
        _check(_OP.CREATE, _RT.TOPIC, _TOPIC, _TOPIC_AUTH),
        _check(_OP.DESCRIBE, _RT.CLUSTER, CLUSTER_NAME, ErrorCode.none),
    ), False, "all-topics listing leaves out topics without DESCRIBE; named topics without DESCRIBE come back "
              "as TOPIC_AUTHORIZATION_FAILED with a zero topic id (by id: name null); auto-creation needs CREATE "
              "on the cluster or the topic (else TOPIC_AUTHORIZATION_FAILED); authorized-operation bitfields "
              "only when asked (cluster ones need DESCRIBE on the cluster, else 0)"),
    60: RequestChecks("DescribeCluster", (
        _check(_OP.DESCRIBE, _RT.CLUSTER, CLUSTER_NAME, ErrorCode.none),
    ), False, "never refused; cluster_authorized_operations is 0 without DESCRIBE on the cluster"),
    32: RequestChecks("DescribeConfigs", (
        _check(_OP.DESCRIBE_CONFIGS, _RT.CLUSTER, "each BROKER / BROKER_LOGGER / CLIENT_METRICS resource",
               _CLUSTER_AUTH),
        _check(_OP.DESCRIBE_CONFIGS, _RT.TOPIC, "each TOPIC resource", _TOPIC_AUTH),
    ), False, "per resource: the error with its default message and no configs; authorized ones first"),
    29: RequestChecks("DescribeAcls", (_check(_OP.DESCRIBE, _RT.CLUSTER, CLUSTER_NAME, _CLUSTER_AUTH),),
                      True, "the request's error response"),
    48: RequestChecks("DescribeClientQuotas",
                      (_check(_OP.DESCRIBE_CONFIGS, _RT.CLUSTER, CLUSTER_NAME, _CLUSTER_AUTH),),
                      True, "the request's error response"),
    50: RequestChecks("DescribeUserScramCredentials",
                      (_check(_OP.DESCRIBE, _RT.CLUSTER, CLUSTER_NAME, _CLUSTER_AUTH),),
                      True, "the request's error response"),
    19: RequestChecks("CreateTopics", (
        _check(_OP.CREATE, _RT.CLUSTER, CLUSTER_NAME, _TOPIC_AUTH),
        _check(_OP.CREATE, _RT.TOPIC, _TOPIC, _TOPIC_AUTH),
        _check(_OP.DESCRIBE_CONFIGS, _RT.TOPIC, _TOPIC, _TOPIC_AUTH),
    ), False, "CREATE on the cluster allows every topic, else CREATE per topic; refused topics answer "
              "TOPIC_AUTHORIZATION_FAILED 'Authorization failed.' (duplicates stay INVALID_REQUEST); created "
              "topics without DESCRIBE_CONFIGS get topic_config_error_code TOPIC_AUTHORIZATION_FAILED, no configs"),
    20: RequestChecks("DeleteTopics", (
        _check(_OP.DELETE, _RT.CLUSTER, CLUSTER_NAME, _TOPIC_AUTH),
        _check(_OP.DESCRIBE, _RT.TOPIC, _TOPIC, _TOPIC_AUTH),
        _check(_OP.DELETE, _RT.TOPIC, _TOPIC, _TOPIC_AUTH),
    ), False, "DELETE on the cluster allows every topic; else a topic needs DELETE (and DESCRIBE to be "
              "named in the answer when given by id); refused ones answer TOPIC_AUTHORIZATION_FAILED"),
    37: RequestChecks("CreatePartitions", (_check(_OP.ALTER, _RT.TOPIC, _TOPIC, _TOPIC_AUTH),),
                      False, "per topic: TOPIC_AUTHORIZATION_FAILED without a message"),
    33: RequestChecks("AlterConfigs", (
        _check(_OP.ALTER_CONFIGS, _RT.CLUSTER, "each BROKER resource", _CLUSTER_AUTH),
        _check(_OP.ALTER_CONFIGS, _RT.TOPIC, "each TOPIC resource", _TOPIC_AUTH),
    ), False, "per resource, with the error's default message; other resource types INVALID_REQUEST"),
    44: RequestChecks("IncrementalAlterConfigs", (
        _check(_OP.ALTER_CONFIGS, _RT.CLUSTER, "each BROKER resource", _CLUSTER_AUTH),
        _check(_OP.ALTER_CONFIGS, _RT.TOPIC, "each TOPIC resource", _TOPIC_AUTH),
    ), False, "per resource, with the error's default message; other resource types INVALID_REQUEST"),
    49: RequestChecks("AlterClientQuotas", (_check(_OP.ALTER_CONFIGS, _RT.CLUSTER, CLUSTER_NAME, _CLUSTER_AUTH),),
                      True, "the request's error response (every entry fails)"),
    51: RequestChecks("AlterUserScramCredentials", (_check(_OP.ALTER, _RT.CLUSTER, CLUSTER_NAME, _CLUSTER_AUTH),),
                      True, "the request's error response (every user fails)"),
    43: RequestChecks("ElectLeaders", (_check(_OP.ALTER, _RT.CLUSTER, CLUSTER_NAME, _CLUSTER_AUTH),),
                      True, "top-level and every asked partition CLUSTER_AUTHORIZATION_FAILED, no message"),
    45: RequestChecks("AlterPartitionReassignments", (_check(_OP.ALTER, _RT.CLUSTER, CLUSTER_NAME, _CLUSTER_AUTH),),
                      True, "the request's error response (every partition fails)"),
    46: RequestChecks("ListPartitionReassignments", (_check(_OP.DESCRIBE, _RT.CLUSTER, CLUSTER_NAME, _CLUSTER_AUTH),),
                      True, "the request's error response (each asked partition echoed, no replicas)"),
    30: RequestChecks("CreateAcls", (_check(_OP.ALTER, _RT.CLUSTER, CLUSTER_NAME, _CLUSTER_AUTH),),
                      True, "the request's error response (every creation fails)"),
    31: RequestChecks("DeleteAcls", (_check(_OP.ALTER, _RT.CLUSTER, CLUSTER_NAME, _CLUSTER_AUTH),),
                      True, "the request's error response (every filter fails)"),
    64: RequestChecks("UnregisterBroker", (_check(_OP.ALTER, _RT.CLUSTER, CLUSTER_NAME, _CLUSTER_AUTH),),
                      True, "top-level CLUSTER_AUTHORIZATION_FAILED, no message"),
    56: RequestChecks("AlterPartition", (_check(_OP.CLUSTER_ACTION, _RT.CLUSTER, CLUSTER_NAME, _CLUSTER_AUTH),),
                      True, "top-level CLUSTER_AUTHORIZATION_FAILED (AlterIsr's old versions likewise)"),
    58: RequestChecks("Envelope", (_check(_OP.CLUSTER_ACTION, _RT.CLUSTER, CLUSTER_NAME, _CLUSTER_AUTH),),
                      True, "CLUSTER_AUTHORIZATION_FAILED: only brokers (and shims) may forward"),
    # Brokers' and controllers' own RPCs (ControllerApis: authorizeClusterOperation before anything runs).
    **{key: RequestChecks(api, (_check(_OP.CLUSTER_ACTION, _RT.CLUSTER, CLUSTER_NAME, _CLUSTER_AUTH),),
                          True, "top-level CLUSTER_AUTHORIZATION_FAILED")
       for key, api in ((1, "Fetch"), (7, "ControlledShutdown"), (52, "Vote"), (53, "BeginQuorumEpoch"),
                        (54, "EndQuorumEpoch"), (59, "FetchSnapshot"), (62, "BrokerRegistration"),
                        (63, "BrokerHeartbeat"), (67, "AllocateProducerIds"), (70, "ControllerRegistration"),
                        (73, "AssignReplicasToDirs"), (82, "UpdateRaftVoter"))},
    55: RequestChecks("DescribeQuorum", (_check(_OP.DESCRIBE, _RT.CLUSTER, CLUSTER_NAME, _CLUSTER_AUTH),),
                      True, "top-level CLUSTER_AUTHORIZATION_FAILED"),
    **{key: RequestChecks(api, (_check(_OP.ALTER, _RT.CLUSTER, CLUSTER_NAME, _CLUSTER_AUTH),),
                          True, "top-level CLUSTER_AUTHORIZATION_FAILED")
       for key, api in ((57, "UpdateFeatures"), (80, "AddRaftVoter"), (81, "RemoveRaftVoter"))},
}  # fmt: skip

DESCRIBE_CLUSTER: Final = 60
CONTROLLER_CHECKS: Final[dict[int, RequestChecks]] = {
    **REQUEST_CHECKS,
    DESCRIBE_CLUSTER: RequestChecks(
        "DescribeCluster", (_check(_OP.ALTER, _RT.CLUSTER, CLUSTER_NAME, _CLUSTER_AUTH),), True,
        "at a controller (unlike a broker) ALTER on the cluster, else the request's error response",
    ),
}  # fmt: skip
"""REQUEST_CHECKS as a controller's ControllerApis makes them (Metadata it does not serve at all)."""

Authorize = Callable[[KafkaPrincipal, str, int, int, str], bool]
"""`(principal, host, operation, resource_type, name) -> allowed`, as reads.Authorize."""


ELECT_LEADERS = 43
UNREGISTER_BROKER = 64
# Refusals answered without a message: KafkaApis' own ElectLeaders answer (ApiError with a null message)
# and the error responses of requests whose getErrorResponse sets the code only.
_NO_MESSAGE: Final = frozenset({ELECT_LEADERS, UNREGISTER_BROKER})


def cluster_refusal(
    authorizer: StandardAuthorizer,
    principal: KafkaPrincipal | str,
    host: str,
    api_key: int,
    api_version: int,
    request: Any,
) -> Any | None:
    """The response Kafka sends when a request-wide cluster check fails; None when the request may go on."""
    caller = principal if isinstance(principal, KafkaPrincipal) else KafkaPrincipal(*_principal(principal))
    check = denied_check(authorizer.authorize, caller, host, api_key)
    return None if check is None else refusal_response(api_key, api_version, request, check)


def denied_check(
    authorize: Authorize,
    principal: KafkaPrincipal,
    host: str,
    api_key: int,
    table: Mapping[int, RequestChecks] = REQUEST_CHECKS,
) -> AclCheck | None:
    """The first request-wide check of `api_key` in `table` that `authorize` refuses; None: none refused."""
    checks = table.get(api_key)
    if checks is None or not checks.request_wide:
        return None
    for check in checks.checks:
        if not authorize(principal, host, check.operation, check.resource_type, check.resource):
            return check
    return None


def refusal_response(api_key: int, api_version: int, request: Any, check: AclCheck) -> Any:
    """The request's error response for a failed request-wide `check` (with Errors.message(), as Kafka)."""
    message = None if api_key in _NO_MESSAGE else _DEFAULT_MESSAGES.get(check.error)
    return error_response(api_key, api_version, request, check.error, message)


# Errors.message(): the default message an ApiError built from the error alone carries.
_DEFAULT_MESSAGES: Final = {
    ErrorCode.cluster_authorization_failed: "Cluster authorization failed.",
    ErrorCode.topic_authorization_failed: "Topic authorization failed.",
    ErrorCode.group_authorization_failed: "Group authorization failed.",
}
