"""Per-item authorization of forwarded requests, as Kafka 3.9's ControllerApis does it (authorizer.REQUEST_CHECKS).

`split` takes the refused topics / config resources out of a request before it is forwarded and keeps their
error results; `merge` puts them into the controller's response where ControllerApis puts them (CreateTopics
appends them, DeleteTopics / CreatePartitions / AlterConfigs / IncrementalAlterConfigs put them first).
A request with nothing left to forward is answered from the refusals alone. `FollowedAuthorizer` is a
StandardAuthorizer over the ACLs of the followed image, reloaded whenever the image moves on.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

from kio.schema.errors import ErrorCode

from bridge.handlers.authorizer import CLUSTER_NAME, StandardAuthorizer, cluster_refusal
from bridge.handlers.reads import Caller
from bridge.kafka.error_responses import error_response
from bridge.kafka.protocol import KafkaPrincipal
from migrate.kraft.image import MetadataImage
from migrate.zk.model import AclOperation, ResourceType

if TYPE_CHECKING:
    from bridge.kafka.listener import RequestContext

CREATE_TOPICS: Final = 19
DELETE_TOPICS: Final = 20
ALTER_CONFIGS: Final = 33
CREATE_PARTITIONS: Final = 37
INCREMENTAL_ALTER_CONFIGS: Final = 44
CHECKED: Final = frozenset(
    {CREATE_TOPICS, DELETE_TOPICS, ALTER_CONFIGS, CREATE_PARTITIONS, INCREMENTAL_ALTER_CONFIGS}
)

# ConfigResource.Type codes.
_CONFIG_TOPIC: Final = 2
_CONFIG_BROKER: Final = 4  # BROKER_LOGGER and others are INVALID_REQUEST at the controller, unchecked
_TOPIC_DENIED: Final = "Topic authorization failed."
_CLUSTER_DENIED: Final = "Cluster authorization failed."
# The response list each request's items are answered in, and the request list holding the items.
_FIELDS: Final = {
    CREATE_TOPICS: ("topics", "topics"),
    CREATE_PARTITIONS: ("results", "topics"),
    ALTER_CONFIGS: ("responses", "resources"),
    INCREMENTAL_ALTER_CONFIGS: ("responses", "resources"),
}


@dataclass(frozen=True, slots=True)
class Split:
    """A request with its refused items taken out (`forward` None: nothing left) and their error results."""

    forward: Any | None
    refused: tuple[Any, ...]
    refused_first: bool


class FollowedImage(Protocol):
    """What a FollowedAuthorizer reads: an image replayed in place and how far (the shim's MetadataFollower)."""

    @property
    def image(self) -> MetadataImage: ...

    @property
    def position(self) -> int: ...


class FollowedAuthorizer:
    """A StandardAuthorizer over the followed image's ACLs; reloads when the follower has replayed more."""

    def __init__(
        self,
        follower: FollowedImage,
        *,
        super_users: tuple[str, ...] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self.follower = follower
        self.authorizer = StandardAuthorizer(
            super_users=super_users, allow_everyone_if_no_acl_found=allow_everyone_if_no_acl_found
        )
        self._seen: tuple[int, int] | None = None

    def current(self) -> StandardAuthorizer:
        """The authorizer, reloaded first if the image changed (the image is replayed in place)."""
        image = self.follower.image
        seen = (id(image), self.follower.position)
        if seen != self._seen:
            self.authorizer.load(list(image.acls.values()))
            self._seen = seen
        return self.authorizer

    def __call__(
        self, principal: KafkaPrincipal, host: str, operation: int, resource_type: int, name: str
    ) -> bool:
        return self.current().authorize(principal, host, operation, resource_type, name)

    def gate(self, ctx: RequestContext, request: Any) -> Any | None:
        """The request-wide cluster checks (authorizer.cluster_refusal) for the connection's principal."""
        return cluster_refusal(
            self.current(), ctx.principal, ctx.peer[0], ctx.api_key, ctx.api_version, request
        )


def split(api_key: int, version: int, request: Any, caller: Caller, image: MetadataImage) -> Split:
    """Take out what `caller` may not do; every item allowed leaves the request as it was."""
    if api_key == CREATE_TOPICS:
        return _create_topics(version, request, caller)
    if api_key == DELETE_TOPICS:
        return _delete_topics(version, request, caller, image)
    if api_key == CREATE_PARTITIONS:
        # Duplicated names are not checked: the controller answers them INVALID_REQUEST.
        counts = Counter(t.name for t in request.topics)
        refused_names = {
            name
            for name, n in counts.items()
            if n == 1 and not caller.may(AclOperation.ALTER, ResourceType.TOPIC, name)
        }
        allowed = [t for t in request.topics if t.name not in refused_names]
        refused: list[tuple[Any, str | None]] = [(t, None) for t in request.topics if t.name in refused_names]
        return _split(api_key, version, request, "topics", allowed, refused, True)
    if api_key in (ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS):
        return _alter_configs(api_key, version, request, caller)
    return Split(request, (), False)


def merge(api_key: int, version: int, request: Any, part: Split, response: Any | None, caller: Caller) -> Any:
    """The controller's `response` (None: not forwarded) with the refused items' results where Kafka puts them."""
    response_field = "responses" if api_key == DELETE_TOPICS else _FIELDS[api_key][0]
    if response is None:
        empty = _only(api_key, version, request, [])
        response = error_response(api_key, version, empty, ErrorCode.none)
    answered = tuple(getattr(response, response_field))
    if api_key == CREATE_TOPICS and version >= 5:
        answered = tuple(_hide_configs(result, caller) for result in answered)
    items = part.refused + answered if part.refused_first else answered + part.refused
    return dataclasses.replace(response, **{response_field: items})


# ---------------------------------------------------------------------------------------------- per request


def _create_topics(version: int, request: Any, caller: Caller) -> Split:
    """CREATE on the cluster, else on each topic; duplicates stay for the controller (INVALID_REQUEST)."""
    if caller.may(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME):
        return Split(request, (), False)
    counts = Counter(t.name for t in request.topics)
    refused_names = {
        name
        for name, n in counts.items()
        if n == 1 and not caller.may(AclOperation.CREATE, ResourceType.TOPIC, name)
    }
    allowed = [t for t in request.topics if t.name not in refused_names]
    refused: list[tuple[Any, str | None]] = [
        (t, "Authorization failed.") for t in request.topics if t.name in refused_names
    ]
    return _split(CREATE_TOPICS, version, request, "topics", allowed, refused, False)


def _delete_topics(version: int, request: Any, caller: Caller, image: MetadataImage) -> Split:
    """DELETE on the cluster, else DESCRIBE and DELETE on each topic (by id: named in the answer only with
    DESCRIBE). ControllerApis shuffles the results, so where the refused ones go is free."""
    if caller.may(AclOperation.DELETE, ResourceType.CLUSTER, CLUSTER_NAME):
        return Split(request, (), True)
    by_state = version >= 6
    items = list(request.topics if by_state else request.topic_names)
    allowed: list[Any] = []
    refused: list[Any] = []
    for item in items:
        name = item.name if by_state else item
        if name is None:
            found = image.topics_by_id.get(item.topic_id)
            if found is None:
                allowed.append(item)  # the controller answers UNKNOWN_TOPIC_ID
                continue
            name = found.name
        describable = caller.may(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
        if describable and caller.may(AclOperation.DELETE, ResourceType.TOPIC, name):
            allowed.append(item)
        elif by_state and item.name is None:
            refused.append(dataclasses.replace(item, name=name if describable else None))
        else:
            refused.append(item)
    results: list[Any] = []
    for item in refused:
        one = _only(DELETE_TOPICS, version, request, [item])
        results.extend(
            error_response(
                DELETE_TOPICS, version, one, ErrorCode.topic_authorization_failed, _TOPIC_DENIED
            ).responses
        )
    forward = _only(DELETE_TOPICS, version, request, allowed) if allowed or not refused else None
    return Split(forward, tuple(results), True)


def _alter_configs(api_key: int, version: int, request: Any, caller: Caller) -> Split:
    """ALTER_CONFIGS on the cluster for BROKER/BROKER_LOGGER resources, on the topic for TOPIC ones."""
    allowed: list[Any] = []
    refused: list[tuple[Any, str | None, ErrorCode]] = []
    counts = Counter((int(r.resource_type), r.resource_name) for r in request.resources)
    duplicates = {key for key, n in counts.items() if n > 1}
    for resource in request.resources:
        kind = int(resource.resource_type)
        if (kind, resource.resource_name) in duplicates:
            allowed.append(resource)  # the controller answers INVALID_REQUEST "Duplicate resource."
        elif kind == _CONFIG_BROKER:
            if caller.may(AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
                allowed.append(resource)
            else:
                refused.append((resource, _CLUSTER_DENIED, ErrorCode.cluster_authorization_failed))
        elif kind == _CONFIG_TOPIC:
            if caller.may(AclOperation.ALTER_CONFIGS, ResourceType.TOPIC, resource.resource_name):
                allowed.append(resource)
            else:
                refused.append((resource, _TOPIC_DENIED, ErrorCode.topic_authorization_failed))
        else:
            allowed.append(resource)  # the controller answers INVALID_REQUEST
    return _split_with(api_key, version, request, "resources", allowed, refused, True)


# ---------------------------------------------------------------------------------------------- helpers


def _split(
    api_key: int, version: int, request: Any, field: str, allowed: list[Any], refused: list[tuple[Any, str | None]],
    refused_first: bool,
) -> Split:  # fmt: skip
    errors = [(item, message, ErrorCode.topic_authorization_failed) for item, message in refused]
    return _split_with(api_key, version, request, field, allowed, errors, refused_first)


def _split_with(
    api_key: int, version: int, request: Any, field: str, allowed: list[Any],
    refused: list[tuple[Any, str | None, ErrorCode]], refused_first: bool,
) -> Split:  # fmt: skip
    if not refused:
        return Split(request, (), refused_first)
    response_field = _FIELDS[api_key][0]
    results: list[Any] = []
    for item, message, error in refused:
        one = dataclasses.replace(request, **{field: (item,)})
        results.extend(getattr(error_response(api_key, version, one, error, message), response_field))
    forward = dataclasses.replace(request, **{field: tuple(allowed)}) if allowed else None
    return Split(forward, tuple(results), refused_first)


def _only(api_key: int, version: int, request: Any, items: list[Any]) -> Any:
    """`request` holding only `items` in its item list."""
    if api_key == DELETE_TOPICS:
        field = "topics" if version >= 6 else "topic_names"
    else:
        field = _FIELDS[api_key][1]
    return dataclasses.replace(request, **{field: tuple(items)})


def _hide_configs(result: Any, caller: Caller) -> Any:
    """A created topic's configs are shown only with DESCRIBE_CONFIGS on it (else topic_config_error_code)."""
    if result.error_code != ErrorCode.none or caller.may(
        AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, result.name
    ):
        return result
    return dataclasses.replace(
        result, topic_config_error_code=ErrorCode.topic_authorization_failed, configs=()
    )
