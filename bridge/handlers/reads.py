"""Read answers from an image: Metadata, DescribeCluster, DescribeConfigs, DescribeAcls, DescribeClientQuotas,
DescribeUserScramCredentials (Kafka's KafkaApis read paths over its MetadataCache).

Each function is pure: (who answers, the image, the kio request, its version) -> the kio response of that
version. The shim serves all of them, presenting itself as the cluster's only broker and its controller, so
clients send it every admin request; the controller answers Metadata and DescribeCluster with them.
Partitions keep the image's leaders and replicas (the ZooKeeper-mode brokers).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType
from kio.static.primitive import i8, i32

from bridge.handlers._common import build, default_message
from bridge.handlers.acls import UNKNOWN, Binding, Filter, _UnsupportedPattern, filter_of
from bridge.handlers.config_defs import TOPIC_CONFIGS, ConfigType
from bridge.kafka.protocol import ANONYMOUS, KafkaPrincipal
from migrate.kraft.image import NO_LEADER, RESOURCE_TYPE_BROKER, RESOURCE_TYPE_TOPIC, MetadataImage

METADATA: Final = 3
DESCRIBE_CONFIGS: Final = 32
DESCRIBE_ACLS: Final = 29
DESCRIBE_CLIENT_QUOTAS: Final = 48
DESCRIBE_USER_SCRAM_CREDENTIALS: Final = 50
DESCRIBE_CLUSTER: Final = 60
# Kafka 3.9's version ranges of the two requests that identify a cluster (cut to what kio defines).
IDENTITY_VERSIONS: Final[dict[int, tuple[int, int]]] = {METADATA: (0, 12), DESCRIBE_CLUSTER: (0, 1)}

# Kafka's AclOperation codes used for the describe checks.
OP_DESCRIBE: Final = 8
OP_DESCRIBE_CONFIGS: Final = 10
RT_TOPIC: Final = 2
RT_CLUSTER: Final = 4
CLUSTER_NAME: Final = "kafka-cluster"
# Kafka's ConfigSource codes (DescribeConfigsResponse.ConfigSource).
SOURCE_TOPIC_CONFIG: Final = 1
SOURCE_DYNAMIC_BROKER_CONFIG: Final = 2
SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG: Final = 4
SOURCE_DEFAULT_CONFIG: Final = 5
# DescribeConfigsResponse.ConfigType codes by ConfigDef type.
_CONFIG_TYPE_CODES: Final = {
    ConfigType.BOOLEAN: 1, ConfigType.STRING: 2, ConfigType.INT: 3, ConfigType.SHORT: 4, ConfigType.LONG: 5,
    ConfigType.DOUBLE: 6, ConfigType.LIST: 7, ConfigType.CLASS: 8, ConfigType.PASSWORD: 9,
}  # fmt: skip
INTERNAL_TOPICS: Final = frozenset({"__consumer_offsets", "__transaction_state"})
# The operation bits Kafka reports when authorized operations are not asked for.
AUTHORIZED_OPERATIONS_OMITTED: Final = -(2**31)
SCRAM_MECHANISMS: Final = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}

# (principal, host, operation, resource type, name) -> allowed?
Authorize = Callable[[KafkaPrincipal, str, int, int, str], bool]


def allow_all(
    _principal: KafkaPrincipal, _host: str, _operation: int, _resource_type: int, _name: str
) -> bool:
    """The default authorizer: everything is allowed (Kafka without an authorizer)."""
    return True


@dataclass(frozen=True, slots=True)
class ShimIdentity:
    """Who the shim says it is: its node id, the address clients reach it at, the cluster id if known.

    `fronted`: the ids of the cluster's brokers the shim answers for at its own address (see fronted_brokers).
    """

    node_id: int
    host: str
    port: int
    cluster_id: str | None = None
    rack: str | None = None
    fronted: tuple[int, ...] = ()

    def broker_ids(self) -> list[int]:
        """Every node id the shim answers as: its own first, then the fronted brokers'."""
        return [self.node_id, *sorted(set(self.fronted) - {self.node_id})]


def fronted_brokers(image: MetadataImage) -> tuple[int, ...]:
    """The brokers the image knows of: replicas of its partitions, and brokers with their own configs.

    Clients address per-broker requests (a BROKER config resource) to that broker's id, so the shim lists
    these ids at its own address and forwards what comes for them, as a broker forwards to its controller.
    """
    ids: set[int] = set()
    for topic in image.topics_by_id.values():
        for partition in topic.partitions.values():
            ids.update(partition.replicas)
    for rtype, rname in image.configs:
        if rtype == RESOURCE_TYPE_BROKER and rname.isdigit():
            ids.add(int(rname))
    ids.discard(NO_LEADER)
    return tuple(sorted(ids))


@dataclass(frozen=True, slots=True)
class Caller:
    """Who asks: the authenticated principal and the client address, plus the authorization hook."""

    principal: KafkaPrincipal = ANONYMOUS
    host: str = "127.0.0.1"
    authorize: Authorize = allow_all

    def may(self, operation: int, resource_type: int, name: str) -> bool:
        return self.authorize(self.principal, self.host, operation, resource_type, name)


def _module(api_key: int, version: int) -> Any:
    return load_payload_module(api_key, version, EntityType.response)


# ---------------------------------------------------------------------------------------------- Metadata


def metadata(shim: ShimIdentity, image: MetadataImage, request: Any, version: int, caller: Caller) -> Any:
    """Metadata v0-12: the shim as the only broker and the controller; topics and partitions from the image."""
    m = _module(METADATA, version)
    brokers = tuple(
        build(m.MetadataResponseBroker, node_id=i32(node), host=shim.host, port=i32(shim.port), rack=shim.rack)
        for node in shim.broker_ids()
    )
    topics: list[Any] = []
    requested = request.topics
    if requested is None or (version == 0 and not requested):
        for name in sorted(image.topics_by_name):
            if caller.may(OP_DESCRIBE, RT_TOPIC, name):
                topics.append(_topic(m, image, name, version, request, caller))
    else:
        for wanted in requested:
            name = wanted.name
            topic_id = getattr(wanted, "topic_id", None)
            if name is None and topic_id not in (None, uuid.UUID(int=0)):
                found = image.topics_by_id.get(topic_id)
                if found is None:
                    topics.append(_missing(m, None, topic_id, ErrorCode.unknown_topic_id))
                    continue
                name = found.name
            if name is None:
                topics.append(_missing(m, None, None, ErrorCode.invalid_request))
            elif not caller.may(OP_DESCRIBE, RT_TOPIC, name):
                topics.append(_missing(m, name, None, ErrorCode.topic_authorization_failed))
            elif name not in image.topics_by_name:
                # No auto-creation through the shim: an unknown topic is reported as such.
                topics.append(_missing(m, name, None, ErrorCode.unknown_topic_or_partition))
            else:
                topics.append(_topic(m, image, name, version, request, caller))
    cluster_ops = AUTHORIZED_OPERATIONS_OMITTED
    if getattr(request, "include_cluster_authorized_operations", False):
        cluster_ops = 0
    return build(
        m.MetadataResponse,
        throttle_time=timedelta(0),
        brokers=brokers,
        cluster_id=shim.cluster_id,
        controller_id=i32(shim.node_id),
        topics=tuple(topics),
        cluster_authorized_operations=i32(cluster_ops),
    )


def _topic(m: Any, image: MetadataImage, name: str, version: int, request: Any, caller: Caller) -> Any:
    topic = image.topics_by_name[name]
    partitions = []
    for index in sorted(topic.partitions):
        p = topic.partitions[index]
        partitions.append(
            build(
                m.MetadataResponsePartition,
                error_code=ErrorCode.leader_not_available if p.leader == NO_LEADER else ErrorCode.none,
                partition_index=i32(index),
                leader_id=i32(p.leader),
                leader_epoch=i32(p.leader_epoch),
                replica_nodes=tuple(i32(r) for r in p.replicas),
                isr_nodes=tuple(i32(r) for r in p.isr),
                # The shim cannot tell which ZooKeeper-mode brokers are down; none is reported offline.
                offline_replicas=(),
            )
        )
    ops = AUTHORIZED_OPERATIONS_OMITTED
    if getattr(request, "include_topic_authorized_operations", False):
        ops = 0
    return build(
        m.MetadataResponseTopic,
        error_code=ErrorCode.none,
        name=name,
        topic_id=topic.topic_id,
        is_internal=name in INTERNAL_TOPICS,
        partitions=tuple(partitions),
        topic_authorized_operations=i32(ops),
    )


def _missing(m: Any, name: str | None, topic_id: uuid.UUID | None, error: ErrorCode) -> Any:
    return build(
        m.MetadataResponseTopic,
        error_code=error,
        name=name,
        topic_id=topic_id or uuid.UUID(int=0),
        is_internal=False,
        partitions=(),
        topic_authorized_operations=i32(AUTHORIZED_OPERATIONS_OMITTED),
    )


# ---------------------------------------------------------------------------------------------- DescribeCluster


ENDPOINT_BROKERS: Final = 1
ENDPOINT_CONTROLLERS: Final = 2
_ENDPOINT_NAMES: Final = {ENDPOINT_BROKERS: "BROKER", ENDPOINT_CONTROLLERS: "CONTROLLER"}


def describe_cluster(shim: ShimIdentity, request: Any, version: int) -> Any:
    """DescribeCluster v0-1 as a broker answers it: the shim and the brokers it fronts; the shim is controller."""
    return describe_cluster_as(
        ENDPOINT_BROKERS, shim.cluster_id or "", shim.node_id, shim.broker_ids(), shim.host, shim.port,
        shim.rack, request, version,
    )  # fmt: skip


def describe_cluster_as(
    endpoint_type: int, cluster_id: str, controller_id: int, node_ids: list[int], host: str, port: int,
    rack: str | None, request: Any, version: int,
) -> Any:  # fmt: skip
    """Kafka 3.9's AuthHelper.computeDescribeClusterResponse for an endpoint of `endpoint_type`.

    A request for the other endpoint type is refused (MISMATCHED_ENDPOINT_TYPE, INVALID_REQUEST at v0) as
    Kafka refuses it; a controller id not among the nodes is reported as -1.
    """
    m = _module(DESCRIBE_CLUSTER, version)
    wanted = int(getattr(request, "endpoint_type", ENDPOINT_BROKERS))
    error, message = ErrorCode.none, None
    if wanted not in _ENDPOINT_NAMES:
        error = ErrorCode.invalid_request if version == 0 else ErrorCode.unsupported_endpoint_type
        message = f"Unsupported endpoint type {wanted}"
    elif wanted != endpoint_type:
        error = ErrorCode.invalid_request if version == 0 else ErrorCode.mismatched_endpoint_type
        message = (
            f"The request was sent to an endpoint of type {_ENDPOINT_NAMES[endpoint_type]}, "
            f"but we wanted an endpoint of type {_ENDPOINT_NAMES[wanted]}"
        )
    if error != ErrorCode.none:
        # Kafka leaves every other field at its default.
        return build(
            m.DescribeClusterResponse, throttle_time=timedelta(0), error_code=error, error_message=message,
            endpoint_type=i8(ENDPOINT_BROKERS), cluster_id="", controller_id=i32(-1), brokers=(),
            cluster_authorized_operations=i32(AUTHORIZED_OPERATIONS_OMITTED),
        )  # fmt: skip
    brokers = tuple(
        m.DescribeClusterBroker(broker_id=i32(node), host=host, port=i32(port), rack=rack) for node in node_ids
    )
    ops = 0 if request.include_cluster_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED
    return build(
        m.DescribeClusterResponse,
        throttle_time=timedelta(0),
        error_code=error,
        error_message=message,
        endpoint_type=i8(endpoint_type),
        cluster_id=cluster_id,
        controller_id=i32(controller_id if controller_id in node_ids else -1),
        brokers=brokers,
        cluster_authorized_operations=i32(ops),
    )


# ---------------------------------------------------------------------------------------------- DescribeConfigs


def describe_configs(image: MetadataImage, request: Any, version: int, caller: Caller) -> Any:
    """DescribeConfigs v1-4: dynamic configs from the image, topic defaults from Kafka 3.9's LogConfig."""
    m = _module(DESCRIBE_CONFIGS, version)
    results = []
    for resource in request.resources:
        rtype, rname = int(resource.resource_type), resource.resource_name
        keys = None if resource.configuration_keys is None else set(resource.configuration_keys)
        error, message, configs = _describe_resource(m, image, rtype, rname, keys, version, caller)
        results.append(
            build(
                m.DescribeConfigsResult,
                error_code=error,
                error_message=message,
                resource_type=i8(rtype),
                resource_name=rname,
                configs=tuple(configs),
            )
        )
    return build(m.DescribeConfigsResponse, throttle_time=timedelta(0), results=tuple(results))


def _describe_resource(
    m: Any, image: MetadataImage, rtype: int, rname: str, keys: set[str] | None, version: int, caller: Caller
) -> tuple[ErrorCode, str | None, list[Any]]:
    entries: list[tuple[str, str | None, int, ConfigType | None]] = []
    if rtype == RESOURCE_TYPE_TOPIC:
        if not caller.may(OP_DESCRIBE_CONFIGS, RT_TOPIC, rname):
            return (
                ErrorCode.topic_authorization_failed,
                default_message(ErrorCode.topic_authorization_failed),
                [],
            )
        if rname not in image.topics_by_name:
            return ErrorCode.unknown_topic_or_partition, f"Topic {rname} does not exist.", []
        dynamic = image.configs.get((rtype, rname), {})
        for definition in TOPIC_CONFIGS:
            if definition.name in dynamic:
                entries.append(
                    (definition.name, dynamic[definition.name], SOURCE_TOPIC_CONFIG, definition.type)
                )
            else:
                entries.append((definition.name, definition.default, SOURCE_DEFAULT_CONFIG, definition.type))
        known = {d.name for d in TOPIC_CONFIGS}
        entries += [(k, v, SOURCE_TOPIC_CONFIG, None) for k, v in sorted(dynamic.items()) if k not in known]
    elif rtype == RESOURCE_TYPE_BROKER:
        if not caller.may(OP_DESCRIBE_CONFIGS, RT_CLUSTER, CLUSTER_NAME):
            return (
                ErrorCode.cluster_authorization_failed,
                default_message(ErrorCode.cluster_authorization_failed),
                [],
            )
        if rname and not rname.isdigit():
            return ErrorCode.invalid_request, f"Broker id must be an integer, but it is: {rname}", []
        source = SOURCE_DYNAMIC_BROKER_CONFIG if rname else SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG
        entries = [(k, v, source, None) for k, v in sorted(image.configs.get((rtype, rname), {}).items())]
    else:
        return ErrorCode.invalid_request, f"Unsupported resource type {rtype}", []
    configs = []
    for name, value, source, config_type in entries:
        if keys is not None and name not in keys:
            continue
        sensitive = config_type == ConfigType.PASSWORD or _looks_sensitive(name)
        configs.append(
            build(
                m.DescribeConfigsResourceResult,
                name=name,
                value=None if sensitive else value,
                read_only=False,
                config_source=i8(source),
                is_sensitive=sensitive,
                synonyms=(),
                config_type=i8(_CONFIG_TYPE_CODES.get(config_type, 0) if config_type is not None else 0),
                documentation=None,
            )
        )
    return ErrorCode.none, None, configs


def _looks_sensitive(name: str) -> bool:
    """Broker PASSWORD-type keys (listener keystore/truststore passwords, SASL JAAS configs) are hidden."""
    return name.endswith((".password", "sasl.jaas.config")) or "password" in name.split(".")[-1]


# ---------------------------------------------------------------------------------------------- DescribeAcls


def describe_acls(image: MetadataImage, request: Any, version: int) -> Any:
    """DescribeAcls v1-3: the image's ACLs that match the request's filter, grouped by resource pattern."""
    m = _module(DESCRIBE_ACLS, version)
    acl_filter: Filter = filter_of(request)
    if UNKNOWN in (
        acl_filter.resource_type,
        acl_filter.pattern_type,
        acl_filter.operation,
        acl_filter.permission_type,
    ):
        return build(
            m.DescribeAclsResponse,
            throttle_time=timedelta(0),
            error_code=ErrorCode.invalid_request,
            error_message="The filter contained UNKNOWN elements.",
            resources=(),
        )
    grouped: dict[tuple[int, str, int], list[Binding]] = {}
    try:
        for acl in image.acls.values():
            binding = Binding.of(acl)
            if acl_filter.matches(binding):
                key = (binding.resource_type, binding.resource_name, binding.pattern_type)
                grouped.setdefault(key, []).append(binding)
    except _UnsupportedPattern:
        return build(
            m.DescribeAclsResponse, throttle_time=timedelta(0), error_code=ErrorCode.unknown_server_error,
            error_message=None, resources=(),
        )  # fmt: skip
    resources = []
    for (rtype, rname, ptype), bindings in sorted(grouped.items()):
        acls = tuple(
            m.AclDescription(
                principal=b.principal,
                host=b.host,
                operation=i8(b.operation),
                permission_type=i8(b.permission_type),
            )
            for b in sorted(bindings, key=lambda b: (b.principal, b.host, b.operation, b.permission_type))
        )
        resources.append(
            build(
                m.DescribeAclsResource,
                resource_type=i8(rtype),
                resource_name=rname,
                pattern_type=i8(ptype),
                acls=acls,
            )
        )
    return build(
        m.DescribeAclsResponse, throttle_time=timedelta(0), error_code=ErrorCode.none, error_message=None,
        resources=tuple(resources),
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------- quotas


MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2


def describe_client_quotas(image: MetadataImage, request: Any, version: int) -> Any:
    """DescribeClientQuotas v0-1: entities matching every component (and only those types when strict)."""
    m = _module(DESCRIBE_CLIENT_QUOTAS, version)
    seen: set[str] = set()
    for component in request.components:
        if component.entity_type in seen:
            return _quota_error(m, f"Duplicate entity type in filter component: {component.entity_type}")
        seen.add(component.entity_type)
        if component.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY):
            return _quota_error(m, f"Unexpected match type: {component.match_type}")
        if component.match_type == MATCH_EXACT and component.match is None:
            return _quota_error(m, "Exact match requested but no entity name provided")
    entries = []
    for entity, values in sorted(
        image.client_quotas.items(), key=lambda kv: [(t, n or "") for t, n in kv[0]]
    ):
        names = dict(entity)
        if request.strict and set(names) != seen:
            continue
        if not all(_component_matches(c, names) for c in request.components):
            continue
        entries.append(
            m.EntryData(
                entity=tuple(m.EntityData(entity_type=t, entity_name=n) for t, n in entity),
                values=tuple(m.ValueData(key=k, value=float(v)) for k, v in sorted(values.items())),
            )
        )
    return m.DescribeClientQuotasResponse(
        throttle_time=timedelta(0), error_code=ErrorCode.none, error_message=None, entries=tuple(entries)
    )


def _component_matches(component: Any, names: dict[str, str | None]) -> bool:
    if component.entity_type not in names:
        return False
    name = names[component.entity_type]
    if component.match_type == MATCH_EXACT:
        return name == component.match
    if component.match_type == MATCH_DEFAULT:
        return name is None
    return True


def _quota_error(m: Any, message: str) -> Any:
    return m.DescribeClientQuotasResponse(
        throttle_time=timedelta(0), error_code=ErrorCode.invalid_request, error_message=message, entries=None
    )


# ---------------------------------------------------------------------------------------------- SCRAM


def describe_user_scram_credentials(image: MetadataImage, request: Any, version: int) -> Any:
    """DescribeUserScramCredentials v0: mechanisms and iterations of the named users (all when none named)."""
    m = _module(DESCRIBE_USER_SCRAM_CREDENTIALS, version)
    by_user: dict[str, list[tuple[int, int]]] = {}
    for (user, mechanism), credential in image.scram.items():
        by_user.setdefault(user, []).append((mechanism, credential.iterations))
    results = []
    wanted = [u.name for u in request.users] if request.users else None
    if wanted is None:
        names = sorted(by_user)
    else:
        names = list(dict.fromkeys(wanted))
    duplicates = {n for n in names if wanted is not None and wanted.count(n) > 1}
    for name in names:
        if name in duplicates:
            error, message = (
                ErrorCode.duplicate_resource,
                "Cannot describe SCRAM credentials for the same user twice in a single request",
            )
            infos: tuple[Any, ...] = ()
        elif name not in by_user:
            error, message, infos = (
                ErrorCode.resource_not_found,
                "Attempt to describe a user credential that does not exist",
                (),
            )
        else:
            error, message = ErrorCode.none, None
            infos = tuple(
                m.CredentialInfo(mechanism=i8(mech), iterations=i32(iters))
                for mech, iters in sorted(by_user[name])
            )
        results.append(
            m.DescribeUserScramCredentialsResult(
                user=name, error_code=error, error_message=message, credential_infos=infos
            )
        )
    return m.DescribeUserScramCredentialsResponse(
        throttle_time=timedelta(0), error_code=ErrorCode.none, error_message=None, results=tuple(results)
    )
