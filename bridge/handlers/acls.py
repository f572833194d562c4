"""CreateAcls (api 30) and DeleteAcls (api 31) as Kafka 3.9's controller handles them with StandardAuthorizer.

AclApis checks the CLUSTER resource name and empty names, AclControlManager validates each binding
and writes an AccessControlEntryRecord (fresh id) for each ACL not already present. DeleteAcls matches
every stored ACL against each filter exactly as AclBindingFilter.matches does (ANY, MATCH with
wildcard `*` and prefixes, LITERAL, PREFIXED) and removes each match once, listing it for every filter
it matched.
"""

from __future__ import annotations

import importlib
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from bridge.api import ControllerHandler, ControllerResult, HandlerContext, RecordAndVersion
from bridge.handlers.configs import NONE, ApiError
from bridge.kafka.protocol import response_class
from migrate.errors import InvalidRequestError
from migrate.kraft import records as rec
from migrate.kraft.image import AclBinding, MetadataImage

CREATE_ACLS_KEY: Final = 30
DELETE_ACLS_KEY: Final = 31

CLUSTER_NAME: Final = "kafka-cluster"
WILDCARD_RESOURCE: Final = "*"

# Kafka's enums by code; codes Kafka does not know read as UNKNOWN (fromCode).
RESOURCE_TYPES: Final = {0: "UNKNOWN", 1: "ANY", 2: "TOPIC", 3: "GROUP", 4: "CLUSTER", 5: "TRANSACTIONAL_ID",
                         6: "DELEGATION_TOKEN", 7: "USER"}  # fmt: skip
PATTERN_TYPES: Final = {0: "UNKNOWN", 1: "ANY", 2: "MATCH", 3: "LITERAL", 4: "PREFIXED"}
OPERATIONS: Final = {0: "UNKNOWN", 1: "ANY", 2: "ALL", 3: "READ", 4: "WRITE", 5: "CREATE", 6: "DELETE", 7: "ALTER",
                     8: "DESCRIBE", 9: "CLUSTER_ACTION", 10: "DESCRIBE_CONFIGS", 11: "ALTER_CONFIGS",
                     12: "IDEMPOTENT_WRITE", 13: "CREATE_TOKENS", 14: "DESCRIBE_TOKENS"}  # fmt: skip
PERMISSION_TYPES: Final = {0: "UNKNOWN", 1: "ANY", 2: "DENY", 3: "ALLOW"}
UNKNOWN, ANY = 0, 1
RESOURCE_CLUSTER = 4
PATTERN_MATCH, PATTERN_LITERAL, PATTERN_PREFIXED = 2, 3, 4
PERMISSION_DENY, PERMISSION_ALLOW = 2, 3

# Uuid.randomUuid never hands these out.
_RESERVED_IDS: Final = frozenset({uuid.UUID(int=0), uuid.UUID(int=1)})


def from_code(table: dict[int, str], code: int) -> int:
    """Kafka's fromCode: a known code, else UNKNOWN (0)."""
    return code if code in table else UNKNOWN


@dataclass(frozen=True, slots=True)
class Binding:
    """AclBinding / StandardAcl with codes normalised through fromCode (equality is StandardAcl's)."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int

    @classmethod
    def of(cls, acl: AclBinding) -> Binding:
        return cls(
            from_code(RESOURCE_TYPES, acl.resource_type),
            acl.resource_name,
            from_code(PATTERN_TYPES, acl.pattern_type),
            acl.principal,
            acl.host,
            from_code(OPERATIONS, acl.operation),
            from_code(PERMISSION_TYPES, acl.permission_type),
        )


@dataclass(frozen=True, slots=True)
class Filter:
    """AclBindingFilter: None for name, principal or host matches anything."""

    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission_type: int

    def matches(self, binding: Binding) -> bool:
        """AclBindingFilter.matches: ResourcePatternFilter.matches and AccessControlEntryFilter.matches."""
        return self._pattern_matches(binding) and self._entry_matches(binding)

    def _pattern_matches(self, binding: Binding) -> bool:
        if self.resource_type != ANY and self.resource_type != binding.resource_type:
            return False
        if self.pattern_type not in (ANY, PATTERN_MATCH) and self.pattern_type != binding.pattern_type:
            return False
        if self.resource_name is None:
            return True
        if self.pattern_type in (ANY, binding.pattern_type):
            return self.resource_name == binding.resource_name
        # MATCH: the filter names a concrete resource; which stored patterns cover it?
        if binding.pattern_type == PATTERN_LITERAL:
            return binding.resource_name in (self.resource_name, WILDCARD_RESOURCE)
        if binding.pattern_type == PATTERN_PREFIXED:
            return self.resource_name.startswith(binding.resource_name)
        # Kafka throws IllegalArgumentException here; deleteAcls turns it into the filter's error.
        raise _UnsupportedPattern(f"Unsupported PatternType: {PATTERN_TYPES[binding.pattern_type]}")

    def _entry_matches(self, binding: Binding) -> bool:
        if self.principal is not None and self.principal != binding.principal:
            return False
        if self.host is not None and self.host != binding.host:
            return False
        if self.operation != ANY and self.operation != binding.operation:
            return False
        return self.permission_type == ANY or self.permission_type == binding.permission_type


class _UnsupportedPattern(Exception):
    """A stored ACL whose pattern type a MATCH filter cannot evaluate."""


# ------------------------------------------------------------------------------------- CreateAcls


def _check_parsable(what: str, codes: Iterable[int]) -> None:
    """CreateAclsRequest / DeleteAclsRequest refuse code 0 (UNKNOWN) when parsing: Kafka drops the request."""
    if UNKNOWN in codes:
        raise InvalidRequestError(
            f"{what}: a resource type, pattern type, operation or permission type is 0 (UNKNOWN)"
        )


def validate_new_acl(binding: Binding) -> ApiError:
    """AclApis' resource name checks, then AclControlManager.validateNewAcl."""
    if binding.resource_type == RESOURCE_CLUSTER and binding.resource_name != CLUSTER_NAME:
        return ApiError(
            ErrorCode.invalid_request, f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
        )
    if not binding.resource_name:
        return ApiError(ErrorCode.invalid_request, "Invalid empty resource name")
    if binding.resource_type in (UNKNOWN, ANY):
        return ApiError(
            ErrorCode.invalid_request, f"Invalid resourceType {RESOURCE_TYPES[binding.resource_type]}"
        )
    if binding.pattern_type not in (PATTERN_LITERAL, PATTERN_PREFIXED):
        return ApiError(
            ErrorCode.invalid_request, f"Invalid patternType {PATTERN_TYPES[binding.pattern_type]}"
        )
    if binding.operation in (UNKNOWN, ANY):
        return ApiError(ErrorCode.invalid_request, f"Invalid operation {OPERATIONS[binding.operation]}")
    if binding.permission_type not in (PERMISSION_DENY, PERMISSION_ALLOW):
        return ApiError(
            ErrorCode.invalid_request, f"Invalid permissionType {PERMISSION_TYPES[binding.permission_type]}"
        )
    return NONE


def _new_acl_id(new_uuid: Callable[[], uuid.UUID], taken: set[uuid.UUID]) -> uuid.UUID:
    """AclControlManager.newAclId: draw until the id is unused."""
    while True:
        candidate = new_uuid()
        if candidate not in taken and candidate not in _RESERVED_IDS:
            taken.add(candidate)
            return candidate


def handle_create_acls(ctx: HandlerContext, request: Any) -> ControllerResult:
    """CreateAcls v1-3."""
    version = int(request.__version__)
    _check_parsable(
        f"CreateAcls v{version}",
        (
            code
            for c in request.creations
            for code in (c.resource_type, c.resource_pattern_type, c.operation, c.permission_type)
        ),
    )
    existing = {Binding.of(acl) for acl in ctx.image.acls.values()}
    taken = set(ctx.image.acls)
    results: list[ApiError] = []
    records: list[RecordAndVersion] = []
    for creation in request.creations:
        binding = Binding(
            from_code(RESOURCE_TYPES, int(creation.resource_type)),
            creation.resource_name,
            from_code(PATTERN_TYPES, int(creation.resource_pattern_type)),
            creation.principal,
            creation.host,
            from_code(OPERATIONS, int(creation.operation)),
            from_code(PERMISSION_TYPES, int(creation.permission_type)),
        )
        error = validate_new_acl(binding)
        results.append(error)
        if error.is_failure or binding in existing:
            continue  # an ACL that already exists is a success without a record
        existing.add(binding)
        record = rec.AccessControlEntryRecord(
            id=_new_acl_id(ctx.new_uuid, taken),
            resource_type=binding.resource_type,
            resource_name=binding.resource_name,
            pattern_type=binding.pattern_type,
            principal=binding.principal,
            host=binding.host,
            operation=binding.operation,
            permission_type=binding.permission_type,
        )
        records.append((record, 0))
    module = importlib.import_module(response_class(CREATE_ACLS_KEY, version).__module__)
    response = module.CreateAclsResponse(
        throttle_time=timedelta(0),
        results=tuple(module.AclCreationResult(error_code=e.error, error_message=e.message) for e in results),
    )
    return ControllerResult(records, response)


# ------------------------------------------------------------------------------------- DeleteAcls


def filter_of(data: Any) -> Filter:
    """DeleteAclsRequest.aclFilter: request fields to an AclBindingFilter."""
    return Filter(
        from_code(RESOURCE_TYPES, int(data.resource_type_filter)),
        data.resource_name_filter,
        from_code(PATTERN_TYPES, int(data.pattern_type_filter)),
        data.principal_filter,
        data.host_filter,
        from_code(OPERATIONS, int(data.operation)),
        from_code(PERMISSION_TYPES, int(data.permission_type)),
    )


def delete_matches(
    image: MetadataImage, acl_filter: Filter
) -> tuple[ApiError, list[tuple[uuid.UUID, Binding]]]:
    """AclControlManager.validateFilter + deleteAclsForFilter: the filter's error, or the ACLs it matches."""
    if UNKNOWN in (acl_filter.resource_type, acl_filter.pattern_type):
        return ApiError(ErrorCode.invalid_request, "Unknown patternFilter."), []
    if UNKNOWN in (acl_filter.operation, acl_filter.permission_type):
        return ApiError(ErrorCode.invalid_request, "Unknown entryFilter."), []
    matched: list[tuple[uuid.UUID, Binding]] = []
    try:
        for acl_id, acl in image.acls.items():
            binding = Binding.of(acl)
            if acl_filter.matches(binding):
                matched.append((acl_id, binding))
    except _UnsupportedPattern:
        # IllegalArgumentException -> ApiError.fromThrowable: UNKNOWN_SERVER_ERROR, no message.
        return ApiError(ErrorCode.unknown_server_error, None), []
    return NONE, matched


def handle_delete_acls(ctx: HandlerContext, request: Any) -> ControllerResult:
    """DeleteAcls v1-3."""
    version = int(request.__version__)
    _check_parsable(
        f"DeleteAcls v{version}",
        (
            code
            for f in request.filters
            for code in (f.resource_type_filter, f.pattern_type_filter, f.operation, f.permission_type)
        ),
    )
    module = importlib.import_module(response_class(DELETE_ACLS_KEY, version).__module__)
    removed: dict[uuid.UUID, None] = {}
    filter_results = []
    for data in request.filters:
        error, matched = delete_matches(ctx.image, filter_of(data))
        for acl_id, _ in matched:
            removed.setdefault(acl_id, None)
        filter_results.append(
            module.DeleteAclsFilterResult(
                error_code=error.error,
                error_message=error.message,
                matching_acls=tuple(
                    module.DeleteAclsMatchingAcl(
                        error_code=ErrorCode.none,
                        error_message=None,
                        resource_type=i8(b.resource_type),
                        resource_name=b.resource_name,
                        pattern_type=i8(b.pattern_type),
                        principal=b.principal,
                        host=b.host,
                        operation=i8(b.operation),
                        permission_type=i8(b.permission_type),
                    )
                    for _, b in matched
                ),
            )
        )
    records: list[RecordAndVersion] = [
        (rec.RemoveAccessControlEntryRecord(id=acl_id), 0) for acl_id in removed
    ]
    response = module.DeleteAclsResponse(throttle_time=timedelta(0), filter_results=tuple(filter_results))
    return ControllerResult(records, response)


HANDLERS: Final[dict[int, ControllerHandler]] = {
    CREATE_ACLS_KEY: handle_create_acls,
    DELETE_ACLS_KEY: handle_delete_acls,
}
# Kafka 3.9 accepts v0-3 of both; kio defines v1-3.
SUPPORTED: Final[dict[int, tuple[int, int]]] = {CREATE_ACLS_KEY: (1, 3), DELETE_ACLS_KEY: (1, 3)}
