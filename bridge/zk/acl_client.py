"""Kafka's ZkAclMigrationClient write side: a resource pattern's ACLs as Kafka's znode, with its change event.

Read beside core/src/main/scala/kafka/zk/migration/ZkAclMigrationClient.scala (writeResourceAcls,
deleteResource).
"""

from __future__ import annotations

from bridge.zk.leadership import (
    CreateRequest,
    DeleteRequest,
    MigrationLeadershipState,
    SetDataRequest,
    raise_for_results,
)
from bridge.zk.notifications import acl_change
from bridge.zk.operations import DeleteResourceAcls, ResourcePatternKey, WriteResourceAcls
from bridge.zk.planning import Plan, PlanContext, Planner, failures, fused
from migrate.errors import InvalidRequestError
from migrate.zk import paths
from migrate.zk.model import (
    AclEntry,
    AclOperation,
    AclPermissionType,
    AclResource,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from migrate.zk.protocol import NONODE, OK
from migrate.zk.znodes.acls import encode_acls

_ACL_RESOURCE_TYPES = [
    t.pascal_name for t in ResourceType if t not in (ResourceType.UNKNOWN, ResourceType.ANY)
]
ACL_STORE_PATHS = (
    paths.KAFKA_ACL,
    *(f"{paths.KAFKA_ACL}/{t}" for t in _ACL_RESOURCE_TYPES),
    paths.KAFKA_ACL_EXTENDED,
    paths.KAFKA_ACL_PREFIXED,
    *(f"{paths.KAFKA_ACL_PREFIXED}/{t}" for t in _ACL_RESOURCE_TYPES),
    paths.KAFKA_ACL_CHANGES,
    paths.KAFKA_ACL_EXTENDED_CHANGES,
)
"""KafkaZkClient.createAclPaths: both ACL stores, a container per resource type in each, both change stores
(parents first)."""


def write_resource_acls(ctx: PlanContext, op: WriteResourceAcls, state: MigrationLeadershipState) -> Plan:
    pattern = _acl_pattern(op.pattern)
    entries = _acl_entries(op)
    path = paths.acl_resource_path(pattern.pattern_type.name, pattern.resource_type.pascal_name, pattern.name)
    data = encode_acls(AclResource(pattern, entries))
    note = acl_change(pattern)

    def kafka_path(state: MigrationLeadershipState) -> MigrationLeadershipState:
        notifier = ctx.notifier
        outcome = notifier.noted_write([SetDataRequest(path, data)], state, [note])
        if outcome.results[0].code == NONODE:
            # A cluster that never ran AclAuthorizer has no ACL store: create it as its start-up
            # (createAclPaths) would, each container a guarded create ahead of the znode.
            stores = notifier.missing_containers(ACL_STORE_PATHS)
            outcome = notifier.noted_write([*stores, CreateRequest(path, data)], state, [note])
            notifier.learn_created(outcome.results[:-1])
        if not outcome.results[-1].ok:
            # Kafka writes the notification and carries on whatever the code; we report the failure.
            raise_for_results(
                f"Could not write ACLs for resource pattern {_show_pattern(pattern)}",
                failures(outcome.results), where=ctx.where,
            )
        return outcome.state

    return fused([SetDataRequest(path, data)], kafka_path, [note])


def delete_resource(ctx: PlanContext, op: DeleteResourceAcls, state: MigrationLeadershipState) -> Plan:
    pattern = _acl_pattern(op.pattern)
    path = paths.acl_resource_path(pattern.pattern_type.name, pattern.resource_type.pascal_name, pattern.name)
    note = acl_change(pattern)

    def kafka_path(state: MigrationLeadershipState) -> MigrationLeadershipState:
        outcome = ctx.notifier.noted_write([DeleteRequest(path)], state, [note])
        code = outcome.results[0].code
        if code == NONODE:
            ctx.notifier.notes_alone([note], state)  # Kafka notifies whatever the delete answered
            return outcome.state
        if code != OK:
            raise_for_results(
                f"Could not delete ACLs for resource pattern {_show_pattern(pattern)}", outcome.results, where=ctx.where
            )
        return outcome.state

    return fused([DeleteRequest(path)], kafka_path, [note])


def _acl_pattern(key: ResourcePatternKey) -> ResourcePattern:
    try:
        resource_type, pattern_type = ResourceType(key.resource_type), PatternType(key.pattern_type)
    except ValueError:
        raise InvalidRequestError(
            f"ACL resource pattern {key}: unknown resource type or pattern type code"
        ) from None
    if resource_type in (ResourceType.UNKNOWN, ResourceType.ANY) or pattern_type not in (
        PatternType.LITERAL,
        PatternType.PREFIXED,
    ):
        raise InvalidRequestError(
            f"ACL resource pattern {key}: ZooKeeper stores only concrete resource types with LITERAL or "
            f"PREFIXED patterns"
        )
    return ResourcePattern(resource_type, key.name, pattern_type)


def _acl_entries(op: WriteResourceAcls) -> list[AclEntry]:
    """The ACEs of `op` without duplicates (Kafka writes a Set), in the given order."""
    out: dict[AclEntry, None] = {}
    for binding in op.acls:
        try:
            entry = AclEntry(
                binding.principal,
                binding.host,
                AclOperation(binding.operation),
                AclPermissionType(binding.permission_type),
            )
        except ValueError:
            raise InvalidRequestError(
                f"ACL on {op.pattern}: unknown operation {binding.operation} or permission "
                f"{binding.permission_type}"
            ) from None
        out[entry] = None
    return list(out)


def _show_pattern(pattern: ResourcePattern) -> str:
    return f"{pattern.resource_type.name}:{pattern.pattern_type.name}:{pattern.name}"


PLANNERS: dict[type, Planner] = {
    WriteResourceAcls: write_resource_acls,
    DeleteResourceAcls: delete_resource,
}
