"""ACL znodes under `/kafka-acl` and `/kafka-acl-extended`, and their change notifications (Kafka's AclZNode,
ResourceZNode, AclChangeNotificationSequenceZNode; SecurityUtils for names and principals)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from migrate.errors import ZnodeFormatError
from migrate.jvm import java_hash_map_order
from migrate.zk.model import (
    AclChangeNotification,
    AclEntry,
    AclOperation,
    AclPermissionType,
    AclResource,
    PatternType,
    ResourcePattern,
    ResourceType,
    pascal_case,
)
from migrate.zk.paths import KAFKA_ACL, KAFKA_ACL_EXTENDED
from migrate.zk.znodes.jackson import (
    bad,
    int_field,
    json_object,
    json_string,
    missing,
    parse_object,
    str_field,
    utf8,
    utf8_text,
    version_field,
)


def _name_table(enum: Iterable[Any]) -> dict[str, Any]:
    table = {}
    for member in enum:
        table[pascal_case(member.name)] = member
        table[pascal_case(member.name).upper()] = member
    return table


_RESOURCE_TYPES = _name_table(ResourceType)
_OPERATIONS = _name_table(AclOperation)
_PERMISSIONS = _name_table(AclPermissionType)


def _lookup(table: dict[str, Any], name: str, unknown: Any) -> Any:
    """SecurityUtils.valueFromMap: exact PascalCase or upper-case name, else UNKNOWN."""
    found = table.get(name)
    return found if found is not None else table.get(name.upper(), unknown)


def resource_type_from_name(name: str) -> ResourceType:
    """`SecurityUtils.resourceType` (path segment, `Topic` or `TOPIC`); UNKNOWN when not a type."""
    result: ResourceType = _lookup(_RESOURCE_TYPES, name, ResourceType.UNKNOWN)
    return result


def acl_pattern_from_path(path: str) -> ResourcePattern:
    """The resource pattern an ACL znode stores: `/kafka-acl/<Type>/<name>` or `/kafka-acl-extended/prefixed/...`."""
    if path.startswith(KAFKA_ACL + "/"):
        pattern_type, rest = PatternType.LITERAL, path[len(KAFKA_ACL) + 1 :]
    elif path.startswith(KAFKA_ACL_EXTENDED + "/"):
        store, _, rest = path[len(KAFKA_ACL_EXTENDED) + 1 :].partition("/")
        if store != "prefixed":
            raise ZnodeFormatError(path, f"unknown ACL pattern type store {store!r} (only prefixed)")
        pattern_type = PatternType.PREFIXED
    else:
        raise ZnodeFormatError(path, "not an ACL path")
    type_name, slash, name = rest.partition("/")
    resource_type = resource_type_from_name(type_name)
    if not slash or resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise ZnodeFormatError(path, f"unknown ACL resource type {type_name!r}")
    return ResourcePattern(resource_type, name, pattern_type)


def kafka_principal(path: str, what: str, text: str) -> str:
    """SecurityUtils.parseKafkaPrincipal accepts `<type>:<name>` (split on the first colon)."""
    if ":" not in text:
        raise ZnodeFormatError(path, f"{what} {text!r} is not a principal of the form Type:name")
    return text


def decode_acls(path: str, data: bytes | None, *, zk_version: int = 0) -> AclResource:
    pattern = acl_pattern_from_path(path)
    if data is None or len(data) == 0:
        return AclResource(pattern, [], zk_version)
    obj = parse_object(path, data)
    version_field(obj, path, (1,))
    if "acls" not in obj:
        missing(path, "acls")
    raw = obj["acls"]
    if type(raw) is not list:
        bad(path, "acls", "an array", raw)
    acls = []
    for item in raw:
        if type(item) is not dict:
            bad(path, "acls[]", "an object", item)
        acls.append(
            AclEntry(
                principal=kafka_principal(path, "principal", str_field(item, "principal", path)),
                host=str_field(item, "host", path),
                operation=_lookup(_OPERATIONS, str_field(item, "operation", path), AclOperation.UNKNOWN),
                permission_type=_lookup(
                    _PERMISSIONS, str_field(item, "permissionType", path), AclPermissionType.UNKNOWN
                ),
            )
        )
    return AclResource(pattern, acls, zk_version)


_ACLS_ORDER = java_hash_map_order(["version", "acls"])
_ACL_ENTRY_ORDER = java_hash_map_order(["principal", "permissionType", "operation", "host"])


def encode_acls(r: AclResource) -> bytes:
    entries = []
    for a in r.acls:
        values = {
            "principal": json_string(a.principal),
            "permissionType": json_string(pascal_case(a.permission_type.name)),
            "operation": json_string(pascal_case(a.operation.name)),
            "host": json_string(a.host),
        }
        entries.append(json_object(values, _ACL_ENTRY_ORDER))
    # The ACL list comes from a Scala Set of AclEntry, whose order follows enum identity hashes: kept as read.
    text = json_object({"version": "1", "acls": "[" + ",".join(entries) + "]"}, _ACLS_ORDER)
    return utf8("ACL " + r.pattern.name, text)


def decode_acl_change(path: str, data: bytes | None) -> AclChangeNotification:
    """A literal-store notification: plain `RESOURCE_TYPE:name`."""
    text = utf8_text(path, data)
    type_name, colon, name = text.partition(":")
    if not colon:
        raise ZnodeFormatError(path, f"ACL change {text!r} is not ResourceType:name")
    resource_type = ResourceType.__members__.get(type_name.upper(), ResourceType.UNKNOWN)
    return AclChangeNotification(ResourcePattern(resource_type, name, PatternType.LITERAL))


def encode_acl_change(n: AclChangeNotification) -> bytes:
    return utf8("ACL change", f"{n.pattern.resource_type.name}:{n.pattern.name}")


def decode_extended_acl_change(path: str, data: bytes | None) -> AclChangeNotification:
    obj = parse_object(path, data)
    version = int_field(obj, "version", path)
    if version > 1:
        raise ZnodeFormatError(path, f"unknown version {version} (known: 1)")
    resource_type = ResourceType.__members__.get(
        str_field(obj, "resourceType", path).upper(), ResourceType.UNKNOWN
    )
    pattern_type = PatternType.__members__.get(
        str_field(obj, "patternType", path).upper(), PatternType.UNKNOWN
    )
    return AclChangeNotification(
        ResourcePattern(resource_type, str_field(obj, "name", path), pattern_type), version
    )


def encode_extended_acl_change(n: AclChangeNotification) -> bytes:
    p = n.pattern
    text = (
        f'{{"version":{n.version},"resourceType":{json_string(p.resource_type.name)},'
        f'"name":{json_string(p.name)},"patternType":{json_string(p.pattern_type.name)}}}'
    )
    return utf8("ACL change", text)
