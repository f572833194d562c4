"""ControllerApis' authorization of Raft requests from the other voters and observers (no listener, no ZooKeeper):
CLUSTER_ACTION on the cluster for Vote, Fetch and the rest, DESCRIBE for DescribeQuorum, as Kafka 3.9 checks
them, over the ACLs of the log's image as it moves; `--envelope-principals` hold CLUSTER_ACTION."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any, cast

from kio.schema.errors import ErrorCode

from bridge.controller.routing import ControllerApis
from bridge.kafka.listener import RequestContext
from bridge.kafka.protocol import KafkaPrincipal
from bridge.raft import codec
from migrate.kraft.image import AclBinding, MetadataImage
from migrate.zk.model import AclOperation, AclPermissionType, PatternType, ResourceType

HANDLED = object()


def controller(image: MetadataImage, **config: Any) -> Any:
    """What ControllerApis reads of a voter: its config, its log's image and end offset, its Raft seat."""

    async def raft_request(_ctx: RequestContext, _body: Any) -> Any:
        return HANDLED

    settings = {
        "authorizer": "standard", "super_users": frozenset({"User:CN=admin"}), "envelope_principals": None,
        "allow_everyone_if_no_acl_found": False, **config,
    }  # fmt: skip
    return SimpleNamespace(
        config=SimpleNamespace(**settings),
        log=SimpleNamespace(image=image, end_offset=10),
        quorum=SimpleNamespace(on_request=raft_request, replica=None),
        handlers={},
        metrics=SimpleNamespace(observe_request=lambda *_args: None),
    )


def ask(apis: ControllerApis, api_key: int, principal: str, version: int = 0) -> Any:
    kind, _, name = principal.partition(":")
    ctx = RequestContext(
        peer=("10.0.0.3", 40000), client_id="voter", correlation_id=1, api_key=api_key, api_version=version,
        principal=KafkaPrincipal(kind, name),
    )  # fmt: skip
    return asyncio.run(apis.listener_handlers()[api_key](ctx, None))


def cluster_acl(principal: str, operation: AclOperation) -> AclBinding:
    return AclBinding(
        int(ResourceType.CLUSTER), "kafka-cluster", int(PatternType.LITERAL), principal, "*", int(operation),
        int(AclPermissionType.ALLOW),
    )  # fmt: skip


def test_raft_requests_need_cluster_action_and_describe_quorum_describe() -> None:
    image = MetadataImage()
    image.acls[uuid.uuid4()] = cluster_acl("User:CN=voter-2", AclOperation.CLUSTER_ACTION)
    apis = ControllerApis(cast(Any, controller(image)))
    for api_key in (codec.VOTE_KEY, codec.BEGIN_QUORUM_EPOCH_KEY, codec.END_QUORUM_EPOCH_KEY, codec.FETCH_KEY,
                    codec.FETCH_SNAPSHOT_KEY):  # fmt: skip
        version = codec.supported_versions()[api_key][1]
        refused = ask(apis, api_key, "User:CN=stranger", version)
        assert refused.error_code == ErrorCode.cluster_authorization_failed, api_key
        assert ask(apis, api_key, "User:CN=voter-2", version) is HANDLED
        assert ask(apis, api_key, "User:CN=admin", version) is HANDLED  # a super user
    # DescribeQuorum wants DESCRIBE on the cluster, which CLUSTER_ACTION does not imply.
    refused = ask(apis, codec.DESCRIBE_QUORUM_KEY, "User:CN=voter-2")
    assert refused.error_code == ErrorCode.cluster_authorization_failed


def test_an_acl_committed_to_the_log_applies_to_the_next_raft_request() -> None:
    image = MetadataImage()
    voter = controller(image)
    apis = ControllerApis(cast(Any, voter))
    assert ask(apis, codec.VOTE_KEY, "User:CN=voter-3").error_code == ErrorCode.cluster_authorization_failed
    image.acls[uuid.uuid4()] = cluster_acl("User:CN=voter-3", AclOperation.ALL)  # replayed in place
    voter.log.end_offset += 1
    assert ask(apis, codec.VOTE_KEY, "User:CN=voter-3") is HANDLED
    assert ask(apis, codec.DESCRIBE_QUORUM_KEY, "User:CN=voter-3") is HANDLED


def test_envelope_principals_hold_cluster_action_and_nothing_else() -> None:
    apis = ControllerApis(cast(Any, controller(MetadataImage(), envelope_principals=frozenset({"User:CN=shim"}))))
    assert ask(apis, codec.FETCH_KEY, "User:CN=shim", 17) is HANDLED
    assert ask(apis, codec.DESCRIBE_QUORUM_KEY, "User:CN=shim").error_code == ErrorCode.cluster_authorization_failed


def test_without_an_authorizer_raft_requests_are_not_checked() -> None:
    apis = ControllerApis(cast(Any, controller(MetadataImage(), authorizer="none", super_users=frozenset())))
    assert ask(apis, codec.VOTE_KEY, "User:CN=stranger") is HANDLED
