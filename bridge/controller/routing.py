"""Request intake of the controller process: routing, envelopes, principals, refusals (Kafka's ControllerApis).

Requests are handled one at a time on the event loop against the log's image (Kafka's controller event
thread); a handler's records go to the dual-write pipeline, which answers once ZooKeeper has them.
With `--authorizer standard` each request is first authorized as ControllerApis does (authorizer's
CONTROLLER_CHECKS, per item with authorize_items) by a StandardAuthorizer over the ACLs of the log's image.
"""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from kio.schema.envelope.v0 import EnvelopeResponse
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from bridge import broker_lifecycle
from bridge.api import ControllerHandler, ControllerResult, HandlerContext
from bridge.broker_lifecycle import BrokerLifecycle
from bridge.brokers.cluster import BROKER_REGISTRATION, DEFAULT_SUPPORTED_FEATURES, UNREGISTER_BROKER
from bridge.config import BridgeConfig
from bridge.controller.quorum import RAFT_KEYS, QuorumSeat
from bridge.driver import FencedOut
from bridge.handlers import authorize_items, reads
from bridge.handlers.authorize_items import FollowedAuthorizer
from bridge.handlers.authorizer import (
    CLUSTER_NAME,
    CONTROLLER_CHECKS,
    DESCRIBE_CLUSTER,
    AclCheck,
    denied_check,
    java_host_address,
    refusal_response,
)
from bridge.handlers.reassignments import LIST_PARTITION_REASSIGNMENTS
from bridge.handlers.registry import response_error_code
from bridge.kafka.error_responses import error_response
from bridge.kafka.listener import ApiVersionsFeatures, RequestContext
from bridge.kafka.protocol import (
    ANONYMOUS,
    EncodedResponse,
    KafkaPrincipal,
    decode_principal,
    decode_request,
    describe_api,
    encode_response,
    unwrap_response,
)
from bridge.metrics import BridgeMetrics
from bridge.pipeline import Change, ControllerFailed, DualWritePipeline
from bridge.raft import codec, fetch_server
from bridge.raft.metadata_log import MetadataLog
from bridge.zk.broker_registry import ZkBrokerRegistry
from migrate.errors import UnsupportedVersionError, Zk2KraftError
from migrate.kraft import metadata_version as mvs
from migrate.kraft.image import MetadataImage
from migrate.zk.model import AclOperation, ResourceType

log = logging.getLogger(__package__)  # the controller process logs as one: "bridge.controller"

ENVELOPE_KEY = 58
# Kafka's ApiKeys with `forwardable` that a ZooKeeper-mode broker sends us in an EnvelopeRequest.
FORWARDABLE = frozenset(
    {19, 20, 30, 31, 33, 37, 43, 44, 45, 46, 49, 51, 64, fetch_server.DESCRIBE_QUORUM_KEY}
)

READ_ONLY_KEYS = frozenset(
    {*fetch_server.REPLICATION_KEYS, fetch_server.DESCRIBE_QUORUM_KEY, LIST_PARTITION_REASSIGNMENTS}
)
"""Requests that only read (Kafka's appendReadEvent): answered at once, not as write events."""
COMMITTED_READ_KEYS = frozenset({LIST_PARTITION_REASSIGNMENTS})
"""Reads Kafka answers at the last committed offset: answered once what they read is durable."""


class ServedController(Protocol):
    """What request intake reads of the controller process (its log and driver change with leadership)."""

    @property
    def config(self) -> BridgeConfig: ...
    @property
    def handlers(self) -> dict[int, ControllerHandler]: ...
    @property
    def supported(self) -> dict[int, tuple[int, int]]: ...
    @property
    def metrics(self) -> BridgeMetrics: ...
    @property
    def pipeline(self) -> DualWritePipeline: ...
    @property
    def new_uuid(self) -> Callable[[], uuid.UUID]: ...
    @property
    def log(self) -> MetadataLog | None: ...
    @property
    def log_closed(self) -> bool: ...
    @property
    def brokers(self) -> ZkBrokerRegistry | None: ...
    @property
    def broker_lifecycle(self) -> BrokerLifecycle | None: ...
    @property
    def cluster_id(self) -> str | None: ...
    @property
    def listen_port(self) -> int: ...
    @property
    def quorum(self) -> QuorumSeat | None: ...
    def serving(self) -> bool: ...
    def leads_log(self) -> bool: ...


class LogAcls:
    """The image the controller's authorizer reads ACLs from (a FollowedImage): the log this controller leads,
    else the one it replicates as a voter; empty before either is open."""

    def __init__(self, controller: ServedController) -> None:
        self._controller = controller
        self._empty = MetadataImage()

    def _log(self) -> MetadataLog | None:
        metadata_log = self._controller.log
        quorum = self._controller.quorum
        if metadata_log is None and quorum is not None and quorum.replica is not None:
            metadata_log = quorum.replica.metadata_log
        return metadata_log

    @property
    def image(self) -> MetadataImage:
        metadata_log = self._log()
        return self._empty if metadata_log is None else metadata_log.image

    @property
    def position(self) -> int:
        metadata_log = self._log()
        return -1 if metadata_log is None else metadata_log.end_offset


class ControllerApis:
    """Routes each request of the controller's listener to its handler and answers it (ControllerApis)."""

    def __init__(self, controller: ServedController) -> None:
        self._controller = controller
        # Connections already told they reached a controller instead of a broker.
        self._clients_told: set[tuple[str, int]] = set()
        config = controller.config
        # `--authorizer standard`: reloaded whenever the log moved, so the next request sees a committed ACL.
        self.authorizer: FollowedAuthorizer | None = None
        if config.authorizer == "standard":
            self.authorizer = FollowedAuthorizer(
                LogAcls(controller),
                super_users=tuple(sorted(config.super_users)),
                allow_everyone_if_no_acl_found=config.allow_everyone_if_no_acl_found,
            )
        # `--envelope-principals` with an authorizer: CLUSTER_ACTION on the cluster, whatever the ACLs.
        self._cluster_actors = config.envelope_principals or frozenset()

    def listener_handlers(self) -> dict[int, Any]:
        """The listener's handler of every api key this controller serves."""
        keys = [*self._controller.handlers, ENVELOPE_KEY]
        handlers: dict[int, Any] = {key: self.on_request for key in keys}
        handlers[reads.METADATA] = self.on_metadata
        handlers[reads.DESCRIBE_CLUSTER] = self.on_describe_cluster
        quorum = self._controller.quorum
        if quorum is not None:
            raft = self._raft_gate(quorum.on_request)
            handlers.update({key: raft for key in RAFT_KEYS})
        return handlers

    def listener_versions(self) -> dict[int, tuple[int, int]]:
        """The versions the listener's ApiVersions lists: the handlers', Envelope's, the identity reads'."""
        raft = codec.supported_versions() if self._controller.quorum is not None else {}
        return {
            **self._controller.supported,
            ENVELOPE_KEY: (0, 0),
            **reads.IDENTITY_VERSIONS,
            **{key: raft[key] for key in RAFT_KEYS if key in raft},
        }

    async def on_request(self, ctx: RequestContext, body: Any) -> Any:
        if not self._permitted(ctx):
            return self._refuse(ctx, body)
        if ctx.api_key == ENVELOPE_KEY:
            return await self._on_envelope(ctx, body)
        return await self._authorized(ctx, body)

    async def _dispatch(self, ctx: RequestContext, body: Any) -> Any:
        if ctx.api_key in broker_lifecycle.SUPPORTED:
            return await self._on_broker_request(ctx, body)
        return await self._process(ctx.api_key, ctx.api_version, body, ctx.principal, ctx.client_id)

    async def _authorized(self, ctx: RequestContext, body: Any) -> Any:
        """Run the request as far as its principal may (the checks ControllerApis makes for its api key); a
        request refused as a whole, or an item refused, runs nothing and gets Kafka's authorization error."""
        authorizer = self.authorizer
        if authorizer is None:
            return await self._dispatch(ctx, body)
        host = ctx.peer[0]
        check = denied_check(self._may, ctx.principal, host, ctx.api_key, CONTROLLER_CHECKS)
        if check is not None:
            return self._refuse_check(ctx, body, check)
        if ctx.api_key not in authorize_items.CHECKED:
            return await self._dispatch(ctx, body)
        caller = reads.Caller(ctx.principal, host, self._may)
        part = authorize_items.split(ctx.api_key, ctx.api_version, body, caller, authorizer.follower.image)
        if part.forward is None:
            response = None
            refused = ErrorCode.topic_authorization_failed if part.refused else ErrorCode.none
            self._controller.metrics.observe_request(ctx.api_key, int(refused), 0.0)
        else:
            response = unwrap_response(await self._dispatch(ctx, part.forward))
        return authorize_items.merge(ctx.api_key, ctx.api_version, body, part, response, caller)

    def _raft_gate(self, handle: Any) -> Any:
        """The Raft layer's `handle`, after the check ControllerApis makes for each Raft request."""

        async def gated(ctx: RequestContext, body: Any) -> Any:
            if self.authorizer is not None:
                check = denied_check(self._may, ctx.principal, ctx.peer[0], ctx.api_key, CONTROLLER_CHECKS)
                if check is not None:
                    return self._refuse_check(ctx, body, check)
            return await handle(ctx, body)

        return gated

    def _may(
        self, principal: KafkaPrincipal, host: str, operation: int, resource_type: int, name: str
    ) -> bool:
        """The authorizer's decision; `--envelope-principals` hold CLUSTER_ACTION on the cluster besides."""
        if (
            operation == AclOperation.CLUSTER_ACTION
            and resource_type == ResourceType.CLUSTER
            and str(principal) in self._cluster_actors
        ):
            return True
        return self.authorizer is None or self.authorizer(principal, host, operation, resource_type, name)

    def _may_cluster_action(self, principal: KafkaPrincipal, host: str) -> bool:
        return self._may(principal, host, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)

    def _refuse_check(self, ctx: RequestContext, body: Any, check: AclCheck) -> Any:
        """Kafka's answer to a failed request-wide check (authorizeClusterOperation); nothing is run."""
        log.info(
            "event=authorization_denied api=%s peer=%s principal=%s operation=%s resource=%s:%s",
            describe_api(ctx.api_key, ctx.api_version), ctx.peer_text, ctx.principal, check.operation.name,
            check.resource_type.name, check.resource,
        )  # fmt: skip
        self._controller.metrics.observe_request(ctx.api_key, int(check.error), 0.0)
        if ctx.api_key in RAFT_KEYS:
            return codec.error_response(ctx.api_key, ctx.api_version, int(check.error))
        return refusal_response(ctx.api_key, ctx.api_version, body, check)

    async def _on_envelope(self, ctx: RequestContext, envelope: Any) -> Any:
        """Unwrap a forwarded request, process it as its principal, wrap the inner response (KIP-590)."""
        source = f"EnvelopeRequest from {ctx.peer_text}"
        started = time.monotonic()
        if not self._may_cluster_action(ctx.principal, ctx.peer[0]):
            # Whatever the inner principal: only a principal with CLUSTER_ACTION may speak for others.
            log.info(
                "event=authorization_denied api=Envelope peer=%s principal=%s operation=CLUSTER_ACTION "
                "resource=CLUSTER:%s", ctx.peer_text, ctx.principal, CLUSTER_NAME,
            )  # fmt: skip
            return self._envelope_error(ErrorCode.cluster_authorization_failed, started)
        try:
            inner = decode_request(envelope.request_data, source, self._controller.supported)
            principal = decode_principal(envelope.request_principal, source)
            client_host = _client_host(envelope.client_host_address, source)
        except UnsupportedVersionError as exc:
            log.warning("%s", exc)
            return self._envelope_error(ErrorCode.unsupported_version, started)
        except Zk2KraftError as exc:
            log.warning("%s: %s", source, exc)
            return self._envelope_error(ErrorCode.invalid_request, started)
        if inner.api_key not in FORWARDABLE:
            log.warning("%s: %s cannot be forwarded", source, describe_api(inner.api_key, inner.api_version))
            return self._envelope_error(ErrorCode.invalid_request, started)
        # UnregisterBroker is RUNS_IN_PREMIGRATION, as brokers' other requests; the rest waits for DUAL_WRITE.
        if inner.api_key not in broker_lifecycle.SUPPORTED and not self._controller.serving():
            # The forwarding broker retries an envelope answered NOT_CONTROLLER (NodeToControllerChannelManager).
            return self._envelope_error(ErrorCode.not_controller, started)
        # As EnvelopeUtils: the inner request comes from the forwarded client's principal and address.
        forwarded = dataclasses.replace(
            ctx, api_key=inner.api_key, api_version=inner.api_version, principal=principal or ANONYMOUS,
            client_id=inner.client_id, correlation_id=inner.correlation_id, peer=(client_host, ctx.peer[1]),
        )  # fmt: skip
        response = await self._authorized(forwarded, inner.body)
        return EnvelopeResponse(
            response_data=encode_response(inner.correlation_id, response), error_code=ErrorCode.none
        )

    async def on_metadata(self, ctx: RequestContext, body: Any) -> Any:
        """Metadata, which Kafka's controllers do not serve: this controller as the only broker, its log's topics.

        A client pointed here by mistake (instead of at a shim or a broker) gets a working answer and the
        log says where it should go, instead of ApiVersions without Metadata and a silent wait.
        """
        self._tell_client(ctx)
        serving = self._permitted(ctx) and self._controller.serving() and self._controller.log is not None
        metadata_log = self._controller.log
        image = metadata_log.image if serving and metadata_log is not None else MetadataImage()
        caller = reads.Caller(ctx.principal, ctx.peer[0], self._may)
        response = reads.metadata(self._identity(ctx), image, body, ctx.api_version, caller)
        return response if serving else dataclasses.replace(response, controller_id=i32(-1))

    async def on_describe_cluster(self, ctx: RequestContext, body: Any) -> Any:
        """DescribeCluster as Kafka 3.9's ControllerApis answers it (controller endpoint); shims learn the cluster id."""
        if not self._permitted(ctx):
            return self._refuse(ctx, body)
        host = ctx.peer[0]
        # Kafka's controllers want ALTER on the cluster; shims and brokers (CLUSTER_ACTION) ask it too here.
        if not self._may_cluster_action(ctx.principal, host):
            check = denied_check(self._may, ctx.principal, host, DESCRIBE_CLUSTER, CONTROLLER_CHECKS)
            if check is not None:
                return self._refuse_check(ctx, body, check)
        if int(getattr(body, "endpoint_type", reads.ENDPOINT_BROKERS)) != reads.ENDPOINT_CONTROLLERS:
            self._tell_client(ctx)
        me = self._identity(ctx)
        controller = me.node_id if self._controller.serving() else -1
        response = reads.describe_cluster_as(
            reads.ENDPOINT_CONTROLLERS, me.cluster_id or "", controller, [me.node_id], me.host, me.port, None,
            body, ctx.api_version,
        )  # fmt: skip
        asked = body.include_cluster_authorized_operations
        if self.authorizer is not None and asked and response.error_code == ErrorCode.none:
            operations = self.authorizer.current().authorized_operations(
                ctx.principal, host, ResourceType.CLUSTER, CLUSTER_NAME
            )
            response = dataclasses.replace(response, cluster_authorized_operations=i32(operations))
        return response

    def _identity(self, ctx: RequestContext) -> reads.ShimIdentity:
        """This controller as clients reach it: the address the connection came in on."""
        host, port = ctx.local
        return reads.ShimIdentity(
            node_id=self._controller.config.node_id,
            host=host or self._controller.config.listen_host,
            port=port or self._controller.listen_port,
            cluster_id=self._controller.cluster_id,
        )

    def _tell_client(self, ctx: RequestContext) -> None:
        """Once per connection: a client asked the controller what brokers answer; say where to go instead."""
        if ctx.peer in self._clients_told:
            return
        if len(self._clients_told) >= 10_000:
            self._clients_told.clear()
        self._clients_told.add(ctx.peer)
        log.warning(
            "event=client_request_at_controller peer=%s client_id=%s api=%s: this is the bridge controller's "
            "listener; it answers Metadata and DescribeCluster to identify itself and takes metadata changes, "
            "but reads (DescribeConfigs, DescribeAcls, ...) only a shim serves: point admin clients at "
            "`zk2kraft shim run --controller %s:%d`",
            ctx.peer_text, ctx.client_id, describe_api(ctx.api_key, ctx.api_version),
            ctx.local[0] or self._controller.config.listen_host, ctx.local[1] or self._controller.listen_port,
        )  # fmt: skip

    def _permitted(self, ctx: RequestContext) -> bool:
        """Without an authorizer, whether the connection's principal may send requests at all
        (`--envelope-principals` as an allow list; unset: anyone). With one, the authorizer decides."""
        allowed = self._controller.config.envelope_principals
        return self.authorizer is not None or allowed is None or str(ctx.principal) in allowed

    def _refuse(self, ctx: RequestContext, body: Any) -> Any:
        """CLUSTER_AUTHORIZATION_FAILED, as ControllerApis answers a caller without CLUSTER_ACTION; nothing is run."""
        log.warning(
            "%s from %s refused: principal %s is not in --envelope-principals",
            describe_api(ctx.api_key, ctx.api_version), ctx.peer_text, ctx.principal,
        )  # fmt: skip
        error = ErrorCode.cluster_authorization_failed
        if ctx.api_key == ENVELOPE_KEY:
            return self._envelope_error(error, time.monotonic())
        self._controller.metrics.observe_request(ctx.api_key, int(error), 0.0)
        return error_response(ctx.api_key, ctx.api_version, body, error)

    def _envelope_error(self, error: ErrorCode, started: float) -> Any:
        self._controller.metrics.observe_request(ENVELOPE_KEY, int(error), time.monotonic() - started)
        return EnvelopeResponse(response_data=None, error_code=error)

    async def _process(
        self,
        api_key: int,
        api_version: int,
        body: Any,
        principal: KafkaPrincipal | None,
        client_id: str | None,
    ) -> Any:
        started = time.monotonic()
        response = await self._answer(api_key, api_version, body, principal or ANONYMOUS, client_id)
        # Counted right after the answer goes out: the metrics' label lookups are not the client's wait.
        asyncio.get_running_loop().call_soon(
            self._count_request, api_key, response, time.monotonic() - started
        )
        return response

    def _count_request(self, api_key: int, response: Any, seconds: float) -> None:
        error_code = response_error_code(unwrap_response(response))
        self._controller.metrics.observe_request(api_key, error_code, seconds)

    async def _answer(
        self, api_key: int, api_version: int, body: Any, principal: KafkaPrincipal, client_id: str | None
    ) -> Any:
        # The Raft leader serves its log to followers whenever it leads (brokers catch up while it waits for
        # them); every other request waits for DUAL_WRITE.
        replication = api_key in fetch_server.REPLICATION_KEYS and self._controller.leads_log()
        if not (replication or self._controller.serving()):
            return error_response(api_key, api_version, body, ErrorCode.not_controller)
        handler = self._controller.handlers[api_key]
        rehearsal_brokers = self._controller.brokers if self._controller.config.rehearsal else None
        now_ms = time.time_ns() // 1_000_000

        def generate(image: MetadataImage) -> tuple[Any, Change]:
            # In a write event, against the image the records are appended to (nothing runs in between).
            context = HandlerContext(
                image=rehearsal_brokers.with_brokers(image) if rehearsal_brokers is not None else image,
                api_version=api_version,
                node_id=self._controller.config.node_id,
                now_ms=now_ms,
                principal=principal,
                client_id=client_id,
                new_uuid=self._controller.new_uuid,
            )
            result: ControllerResult = handler(context, body)
            if not result.records:
                return result.response, Change([])
            # Encoded on the event loop while ZooKeeper writes the change (when it goes out as one multi).
            encoded = EncodedResponse(result.response)
            return encoded, Change(result.records, atomic=result.atomic, encoded=encoded)

        try:
            if api_key in READ_ONLY_KEYS:  # Kafka's read events: no write event, never behind one
                assert self._controller.log is not None
                answer = generate(self._controller.log.image)[0]
                if api_key in COMMITTED_READ_KEYS:
                    await self._controller.pipeline.committed()  # what it read is committed before it is told
                return answer
            # An admin change waits out SYNC_KRAFT_TO_ZK's read of ZooKeeper (brokers' own RPCs do not, as in
            # Kafka): it is answered only once ZooKeeper has it.
            await self._controller.pipeline.until_changes_reach_zookeeper()
            response, _last = await self._controller.pipeline.write(generate)
        except (FencedOut, ControllerFailed):
            return error_response(api_key, api_version, body, ErrorCode.not_controller)
        except Zk2KraftError as exc:
            log.warning("%s: %s", describe_api(api_key, api_version), exc)
            return error_response(api_key, api_version, body, ErrorCode.invalid_request, str(exc))
        except Exception:
            log.exception("%s failed", describe_api(api_key, api_version))
            return error_response(api_key, api_version, body, ErrorCode.unknown_server_error)
        return response

    async def _on_broker_request(self, ctx: RequestContext, body: Any) -> Any:
        """BrokerRegistration, BrokerHeartbeat, AssignReplicasToDirs (Kafka's ControllerApis), from WAIT_FOR_BROKERS on."""
        started = time.monotonic()
        lifecycle = self._controller.broker_lifecycle
        if lifecycle is None or self._controller.log_closed:
            response = error_response(ctx.api_key, ctx.api_version, body, ErrorCode.not_controller)
        elif ctx.api_key == BROKER_REGISTRATION:
            response = await lifecycle.register(body, ctx.api_version)
        elif ctx.api_key == broker_lifecycle.ASSIGN_REPLICAS_TO_DIRS:
            response = await lifecycle.assign_replicas_to_dirs(body, ctx.api_version)
        elif ctx.api_key == UNREGISTER_BROKER:
            response = await lifecycle.unregister(body, ctx.api_version)
        else:
            response = await lifecycle.heartbeat(body, ctx.api_version)
        asyncio.get_running_loop().call_soon(
            self._count_request, ctx.api_key, response, time.monotonic() - started
        )
        return response

    def api_versions_features(self) -> ApiVersionsFeatures:
        """SimpleApiVersionManager's feature fields: supported ranges, the log's finalized features with their
        epoch (FeaturesPublisher; a level of 0 is left out), and ZkMigrationReady (always migrating)."""
        metadata_log = self._controller.log
        features = metadata_log.image.features if metadata_log is not None else MetadataImage().features
        levels = {mvs.FEATURE_NAME: features.metadata_version, **features.finalized_versions}
        return ApiVersionsFeatures(
            supported=DEFAULT_SUPPORTED_FEATURES,
            finalized={name: (level, level) for name, level in levels.items() if level != 0},
            finalized_epoch=features.epoch,
            zk_migration_ready=True,
        )


def _client_host(address: bytes, source: str) -> str:
    """The forwarded client's address as InetAddress.getHostAddress writes it (as ACL hosts are written)."""
    try:
        return java_host_address(str(ipaddress.ip_address(bytes(address))))
    except ValueError:
        raise Zk2KraftError(
            f"{source}: its client address of {len(address)} bytes is no IPv4 or IPv6 address"
        ) from None
