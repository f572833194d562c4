"""Kafka's ZkMigrationClient write side: each dual-write operation as Kafka's exact znodes, fenced.

`ZkMigrationClient.apply(operation, state)` performs one `bridge.zk.operations` operation with the znodes
Kafka 3.9's ZkTopicMigrationClient, ZkConfigMigrationClient, ZkAclMigrationClient,
ZkDelegationTokenMigrationClient and ZkMigrationClient write (migration-protocol.md §7.2); every znode's bytes
come from `migrate.zk.znodes`. `apply_all(operations, state, final_state=...)` performs many, pipelined.

Fused writes (the default). Each operation is first sent as ONE multi: the `/controller_epoch` check, SetData
`/migration` at the version held, the operation's requests and its change notifications
(`/config/changes/config_change_<seq>`, ACL change nodes). It lands whole or not at all, so a deposed
controller lands nothing, notifications included. When that multi fails on a request (a znode missing or
present, a container missing, a replay) nothing of it landed and the operation is redone the way Kafka does it
("the Kafka path": one multi per request, each guarded, notifications in the last one, missing containers
created by guarded creates), which gives Kafka's znodes and Kafka's judgment of the result. On success both
paths leave the same znodes and data as Kafka; sequential names are assigned by ZooKeeper from the parent's
child counter either way. `fused=False` keeps the former grouping (Kafka's: notifications and
`createRecursive` unfenced, the offset in a separate `/migration` write) for comparisons.

Where Kafka 3.9 is evidently wrong we do what it meant instead (each place says so): deleteConfigs'
notification names `brokers/1`, not `Some(brokers)/1`; a partition's `state` child is deleted before the
partition; a failed producer-id or ACL write raises instead of passing silently; an ACL or delegation-token
write on a cluster that never ran AclAuthorizer or token authentication creates the store's containers first
(what those would have created at start-up; Kafka's write fails with NONODE there, forever).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.security import ACL

from bridge.zk.leadership import (
    NODEEXISTS,
    NONODE,
    OK,
    RUNTIMEINCONSISTENCY,
    ControllerMovedError,
    CreateRequest,
    DeleteRequest,
    FencedError,
    GuardedMulti,
    MigrationClientError,
    MigrationLeadershipState,
    MultiReply,
    ReplyRelay,
    SetDataRequest,
    WriteOutcome,
    ZkLeadershipClient,
    ZkRequest,
    ZkResult,
    parse_reply,
    raise_for_results,
)
from bridge.zk.operations import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    ClearPendingTopicDeletions,
    CreateTopic,
    CreateTopicPartitions,
    DeleteConfigs,
    DeleteDelegationToken,
    DeleteResourceAcls,
    DeleteTopic,
    DeleteTopicPartitions,
    ResourcePatternKey,
    UpdateTopic,
    UpdateTopicPartitions,
    WriteClientQuotas,
    WriteConfigs,
    WriteDelegationToken,
    WriteProducerId,
    WriteResourceAcls,
    ZkOperation,
)
from migrate.errors import InvalidRequestError, Zk2KraftError
from migrate.kraft.image import PartitionRegistration
from migrate.zk import paths
from migrate.zk.model import (
    AclChangeNotification,
    AclEntry,
    AclOperation,
    AclPermissionType,
    AclResource,
    ConfigChangeNotification,
    DelegationToken,
    MigrationState,
    PartitionState,
    PatternType,
    ProducerIdBlock,
    ResourcePattern,
    ResourceType,
    ScramCredential,
    Topic,
)
from migrate.zk.znodes.acls import encode_acl_change, encode_acls, encode_extended_acl_change
from migrate.zk.znodes.configs import (
    encode_config_change,
    encode_config_map,
    encode_scram_credential,
    kafka_quota_text,
)
from migrate.zk.znodes.controller import decode_migration, encode_migration
from migrate.zk.znodes.singletons import encode_producer_id_block
from migrate.zk.znodes.tokens import encode_delegation_token
from migrate.zk.znodes.topics import encode_partition_state, encode_topic

log = logging.getLogger(__name__)

PRODUCER_ID_BLOCK_SIZE = 1000
"""ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE: the block Kafka's dual-write records after the next id."""

SCRAM_MECHANISM_NAMES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}

MAX_FUSED_BYTES = 256 * 1024
"""Largest estimated multi sent for one operation; bigger ones (topics with thousands of partitions) take the
Kafka path. ZooKeeper refuses packets over jute.maxbuffer (1 MiB by default) by closing the connection."""
_REQUEST_OVERHEAD = 64  # opcode, lengths, flags and the ACL of one request inside a multi

# DynamicConfig.User/Client/Ip: the quota keys each entity type accepts.
_USER_CLIENT_QUOTA_KEYS = frozenset(
    {"producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate"}
)
_IP_QUOTA_KEYS = frozenset({"connection_creation_rate"})

_CONFIG_TYPES = {TOPIC_RESOURCE: paths.CONFIG_TOPICS, BROKER_RESOURCE: paths.CONFIG_BROKERS}

_ACL_RESOURCE_TYPES = [t.pascal_name for t in ResourceType if t not in (ResourceType.UNKNOWN, ResourceType.ANY)]
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

TOKEN_STORE_PATHS = (paths.DELEGATION_TOKEN, paths.DELEGATION_TOKEN_CHANGES, paths.DELEGATION_TOKENS)
"""KafkaZkClient.createDelegationTokenPaths (parents first)."""

PasswordEncoder = Callable[[str, str], str]
"""(config name, value) → stored text; Kafka encrypts dynamic password configs with password.encoder.secret."""


class ZkBatchError(MigrationClientError):
    """`apply_all` could not write every operation; `unwritten` are the indexes of those that did not land
    (or, when ZooKeeper gave no reply, may not have).

    Every other operation landed whole. An unwritten one may have landed in part, as in Kafka, and those
    after the first unwritten one were not all sent (SYNC_KRAFT_TO_ZK repairs ZooKeeper). `/migration`
    names the offset it had before the batch. `state` is the leadership state to continue with (the
    `/migration` version as ZooKeeper now has it); `failed_index` is the first unwritten operation.
    """

    def __init__(self, message: str, *, state: MigrationLeadershipState, unwritten: Sequence[int]) -> None:
        super().__init__(message)
        self.state = state
        self.unwritten = tuple(unwritten)
        self.failed_index = self.unwritten[0]


@dataclass(frozen=True, slots=True)
class _Note:
    """A change notification (a sequential create); `entity_path` is set for config changes.

    Config notifications are Kafka's createConfigChangeNotification: the store is created when missing and
    a failure is an error. ACL notifications: Kafka ignores the result (the store exists wherever an
    AclAuthorizer ever ran), so a missing store drops the notification with a warning.
    """

    request: CreateRequest
    entity_path: str | None = None

    @property
    def store(self) -> str:
        return self.request.path.rpartition("/")[0]


@dataclass(frozen=True, slots=True)
class _Plan:
    """One operation as one optimistic multi (`requests`), and the Kafka path (`kafka_path(state)`).

    `requests` empty: the operation writes nothing. None: too big for one multi; the Kafka path is taken at
    once. `notes` are the notifications inside `requests` (their stores are learnt when the multi lands).
    """

    requests: tuple[ZkRequest, ...] | None
    kafka_path: Callable[[MigrationLeadershipState], MigrationLeadershipState]
    notes: tuple[_Note, ...] = ()
    size: int = 0
    """Estimated bytes of `requests` in a multi."""


_NO_WRITE = _Plan((), lambda state: state)


@dataclass(frozen=True, slots=True, eq=False)
class PreparedOps:
    """Operations planned against `state`: their plans in order, and the error that stopped planning."""

    operations: Sequence[ZkOperation]
    state: MigrationLeadershipState
    plans: list[_Plan]
    error: Zk2KraftError | None


@dataclass(frozen=True, slots=True, eq=False)
class OneMulti:
    """A prepared batch as ONE guarded multi that also moves `/migration` to `final` (version aside)."""

    prepared: PreparedOps
    multi: GuardedMulti
    epoch_version: int
    final: MigrationLeadershipState
    request: Any
    """The multi as kazoo's request, encoded (the write observer has heard of it: send it, or `drop_one`)."""


class ZkMigrationClient(ZkLeadershipClient):
    """Kafka's ZkMigrationClient over a started kazoo client whose chroot is Kafka's.

    `password_encoder` turns a config value into what ZooKeeper stores; without one values are written as
    given, which is what Kafka does when `password.encoder.secret` is unset (its no-op encoder). `java8`
    picks the java.util.Properties key order of config znodes (Kafka on Java 8 instead of 11+). `fused=False`
    restores Kafka's grouping (unfenced notifications and createRecursive), kept for comparisons only.
    """

    def __init__(
        self,
        client: KazooClient,
        *,
        password_encoder: PasswordEncoder | None = None,
        java8: bool = False,
        acl_provider: Callable[[str], list[ACL]] | None = None,
        clock: Callable[[], int] | None = None,
        retry_timeout_s: float = 30.0,
        fused: bool = True,
    ) -> None:
        super().__init__(client, acl_provider=acl_provider, clock=clock, retry_timeout_s=retry_timeout_s)
        self.password_encoder = password_encoder
        self.java8 = java8
        self.fused = fused
        # Containers seen to exist (a notification landed in them, or we created them): the Kafka path skips
        # their guarded creates. Forgotten when a write into one answers NONODE.
        self._known_containers: set[str] = set()
        self._planners: dict[type, Callable[[Any, MigrationLeadershipState], _Plan]] = {
            CreateTopic: self._plan_create_topic,
            UpdateTopic: self._plan_update_topic,
            DeleteTopic: self._plan_delete_topic,
            ClearPendingTopicDeletions: self._plan_clear_pending_topic_deletions,
            CreateTopicPartitions: self._plan_create_topic_partitions,
            UpdateTopicPartitions: self._plan_update_topic_partitions,
            DeleteTopicPartitions: self._plan_delete_topic_partitions,
            WriteConfigs: self._plan_write_configs,
            DeleteConfigs: self._plan_delete_configs,
            WriteClientQuotas: self._plan_write_client_quotas,
            WriteProducerId: self._plan_write_producer_id,
            WriteResourceAcls: self._plan_write_resource_acls,
            DeleteResourceAcls: self._plan_delete_resource_acls,
            WriteDelegationToken: self._plan_write_delegation_token,
            DeleteDelegationToken: self._plan_delete_delegation_token,
        }

    # ------------------------------------------------------------------ public

    def apply(self, operation: ZkOperation, state: MigrationLeadershipState) -> MigrationLeadershipState:
        """Perform `operation` in ZooKeeper, writing `state` to `/migration` with it (as Kafka does per
        operation); returns the state to use for the next write. Errors are raised as they come."""
        plan = self._plan(operation, state)
        if not self.fused:
            return state if plan.requests == () else plan.kafka_path(state)
        return self._run([plan], [operation], state, state, batch=False)

    def apply_all(
        self,
        operations: Sequence[ZkOperation],
        state: MigrationLeadershipState,
        *,
        final_state: MigrationLeadershipState,
        prepared: PreparedOps | None = None,
    ) -> MigrationLeadershipState:
        """Perform `operations` in log order, pipelined, and leave `/migration` at `final_state`'s offset/epoch.

        All multis go out at once (one round of network waits) and each checks `/controller_epoch` and the
        `/migration` version `state` holds; only the last one sets `/migration`, to `final_state`'s offset
        and epoch (a guarded write of its own when the last operation writes nothing). So any write of
        another controller to either znode makes every multi behind it fail: a deposed controller lands
        nothing. ZooKeeper applies the multis in order and a failed one aborts only itself: an operation
        whose multi fails on a request (a new entity, a replay, a missing container) is redone the Kafka
        way after the pipeline, unless an operation behind it that landed wrote the same znodes (then the
        order cannot be kept). If that, or the Kafka path, fails, `/migration` is set back to the offset
        it had (it is never left naming changes that did not land) and ZkBatchError says which operations
        did not land. A lost fence raises FencedError or ControllerMovedError. `prepared` (from `prepare` with
        these very operations and this state) saves planning them again.
        """
        if (final_state.kraft_controller_id, final_state.kraft_controller_epoch) != (
            state.kraft_controller_id,
            state.kraft_controller_epoch,
        ):
            raise InvalidRequestError(
                f"apply_all: final state names KRaft controller {final_state.kraft_controller_id} epoch "
                f"{final_state.kraft_controller_epoch}, the state held names {state.kraft_controller_id} epoch "
                f"{state.kraft_controller_epoch}"
            )
        final = state.with_kraft_metadata_offset_and_epoch(
            final_state.kraft_metadata_offset, final_state.kraft_metadata_epoch
        )
        if prepared is None or prepared.operations is not operations or prepared.state != state:
            prepared = self.prepare(operations, state)
        plans, plan_error = prepared.plans, prepared.error
        ops = list(operations[: len(plans)])
        # A batch that cannot be written whole moves no offset.
        target = final if plan_error is None else state
        if self.fused:
            done = self._run(plans, ops, state, target, batch=True)
        else:
            done = self._run_unfused(plans, ops, state, target)
        if plan_error is not None:
            failed = len(plans)
            raise ZkBatchError(
                f"dual write of {len(operations)} operation(s) stopped at operation {failed + 1} "
                f"({_name(operations[failed])}): {plan_error}; the {failed} before it landed, none after it "
                f"was sent",
                state=done,
                unwritten=range(failed, len(operations)),
            ) from plan_error
        return done

    def prepare(self, operations: Sequence[ZkOperation], state: MigrationLeadershipState) -> PreparedOps:
        """Plan `operations` against `state` ahead of `apply_all` (the writer does it while the log fsyncs)."""
        plans: list[_Plan] = []
        plan_error: Zk2KraftError | None = None
        for op in operations:
            try:
                plans.append(self._plan(op, state))
            except Zk2KraftError as exc:
                plan_error = exc
                break
        return PreparedOps(operations, state, plans, plan_error)

    # ------------------------------------------------------------------ one multi, without waiting

    def one_multi(self, prepared: PreparedOps, final: MigrationLeadershipState) -> OneMulti | None:
        """`prepared` as one guarded multi leaving `/migration` at `final`, if it fits in one (else None).

        Only for the plain case: every operation planned and fused, something to write, a fence held.
        """
        state = prepared.state
        plans = prepared.plans
        if (
            not self.fused
            or prepared.error is not None
            or not plans
            or any(plan.requests is None for plan in plans)
            or sum(plan.size for plan in plans) > MAX_FUSED_BYTES
            or state.zk_controller_epoch_zk_version < 0
            or state.migration_zk_version < 0
            or (final.kraft_controller_id, final.kraft_controller_epoch)
            != (state.kraft_controller_id, state.kraft_controller_epoch)
        ):
            return None
        requests = tuple(request for plan in plans for request in plan.requests or ())
        if not requests:
            return None
        final = state.with_kraft_metadata_offset_and_epoch(
            final.kraft_metadata_offset, final.kraft_metadata_epoch
        )
        multi = GuardedMulti(requests, state.migration_zk_version, encode_migration(final.to_znode()))
        epoch_version = state.zk_controller_epoch_zk_version
        request = self.encoded_multi(multi, epoch_version)
        return OneMulti(prepared, multi, epoch_version, final, request)

    def send_one(self, one: OneMulti, relay: ReplyRelay, on_send: Callable[[], None] | None = None) -> None:
        """Queue `one` on the connection; `relay` hears how it ended and `on_send` runs as it goes out
        (both on kazoo's connection thread)."""
        self.send_multi(one.request, relay, on_send)

    def drop_one(self, one: OneMulti) -> None:
        """`one` will not be sent: the write observer hears that none of it landed."""
        if self.observer is not None:
            for request in one.multi.requests:
                self.observer.settled(ZkResult(request, RUNTIMEINCONSISTENCY))

    def landed_one(
        self, one: OneMulti, raw: Sequence[Any]
    ) -> tuple[MultiReply, MigrationLeadershipState | None]:
        """`one`'s reply, and the state once it landed (None: nothing of it landed). `settle_one` is due
        before the next write.

        Never blocks: a failed guard is not judged here (`apply_all` sending it again does that).
        """
        reply = parse_reply(one.multi, raw)
        return reply, _state_after(one, reply)

    def resend_one(self, one: OneMulti) -> MigrationLeadershipState | None:
        """Send `one` again after its reply was lost with the connection: as `landed_one` (settled), but a
        lost fence raises (FencedError / ControllerMovedError), and a first copy that landed counts as landed."""
        what = f"fenced write of {len(one.prepared.plans)} operation(s) in one multi"
        reply = self.send_guarded([one.multi], one.epoch_version, what, sent_before=True)[0]
        self.raise_if_fenced(reply, one.epoch_version, _name(one.prepared.operations[0]))
        self.settle_one(one, reply)
        return _state_after(one, reply)

    def settle_one(self, one: OneMulti, reply: MultiReply) -> None:
        """Tell the write observer how `one` ended, and learn (or forget) the containers it relied on."""
        if self.observer is not None:
            for result in reply.results:
                self.observer.settled(result)
        if not reply.landed:
            self._forget_stores(reply.results)
            return
        for plan in one.prepared.plans:
            self._learn_stores(plan.notes)

    # ------------------------------------------------------------------ running plans

    def _plan(self, operation: ZkOperation, state: MigrationLeadershipState) -> _Plan:
        planner = self._planners.get(type(operation))
        if planner is None:
            raise InvalidRequestError(f"{type(operation).__name__} is not a ZooKeeper dual-write operation")
        return planner(operation, state)

    def _run(
        self,
        plans: Sequence[_Plan],
        ops: Sequence[ZkOperation],
        state: MigrationLeadershipState,
        final: MigrationLeadershipState,
        *,
        batch: bool,
    ) -> MigrationLeadershipState:
        """Send the fused multis of `plans` pipelined, redo those that failed the Kafka way, then `final`.

        `current` is the state ZooKeeper's `/migration` matches: its version, and content either `state`'s
        or `final`'s.
        """
        n = len(plans)
        current = state
        k = 0
        while k < n:
            if plans[k].requests is None:  # too big for one multi
                current = self._take_kafka_path(plans, ops, k, current, state, final, batch, range(k, n))
                k += 1
                continue
            end = k
            while end < n and plans[end].requests is not None:
                end += 1
            segment = [i for i in range(k, end) if plans[i].requests]
            k = end
            if not segment:
                continue
            epoch_version, version = current.zk_controller_epoch_zk_version, current.migration_zk_version
            final_data = encode_migration(final.to_znode()) if end == n else None
            if len(segment) > 1 and sum(plans[i].size for i in segment) <= MAX_FUSED_BYTES:
                together = self._run_together(
                    plans, ops, segment, current, final, final_data, batch, n, state
                )
                if together is not None:
                    current = together
                    continue
            multis = [
                GuardedMulti(plans[i].requests or (), version, final_data if i == segment[-1] else None)
                for i in segment
            ]
            try:
                self.require_fence(current, _name(ops[segment[0]]))
                replies = self.send_guarded(
                    multis, epoch_version, f"fenced write of {len(multis)} operation(s)"
                )
            except Zk2KraftError as exc:  # no reply: each of them may or may not have landed
                if not batch:
                    raise
                unknown = [*segment, *range(end, n)]
                self._abandon(exc, batch, unknown, n, ops, self._state_after_failure(current), state, final)
            for i, reply in zip(segment, replies, strict=True):
                self.raise_if_fenced(reply, epoch_version, _name(ops[i]))  # the multis behind failed as well
            if replies[-1].migration_stat is not None:
                current = final.with_migration_zk_version(replies[-1].migration_stat.version)
            failed = [(i, r) for i, r in zip(segment, replies, strict=True) if not r.landed]
            for i, reply in zip(segment, replies, strict=True):
                if reply.landed:
                    self._learn_stores(plans[i].notes)
                else:
                    self._forget_stores(reply.results)
            for position, (i, _) in enumerate(failed):
                landed_behind = [j for j, r in zip(segment, replies, strict=True) if j > i and r.landed]
                clash = _clash(plans[i], [plans[j] for j in landed_behind])
                if clash is not None:
                    error = MigrationClientError(
                        f"{_name(ops[i])} failed ({replies[segment.index(i)].first_failure()}) and cannot be "
                        f"redone in order: {clash} was written by an operation behind it"
                    )
                    unwritten = [*(f for f, _ in failed[position:]), *range(end, n)]
                    self._abandon(error, batch, unwritten, n, ops, current, state, final)
                unwritten = [*(f for f, _ in failed[position:]), *range(end, n)]
                current = self._take_kafka_path(plans, ops, i, current, state, final, batch, unwritten)
        if current.to_znode() != final.to_znode():
            try:
                current = self.fenced_set_migration_state(
                    final.with_migration_zk_version(current.migration_zk_version)
                )
            except (FencedError, ControllerMovedError):
                raise
            except Zk2KraftError as exc:
                self._abandon(exc, batch, [], n, ops, current, state, final)
        return current

    def _run_together(
        self,
        plans: Sequence[_Plan],
        ops: Sequence[ZkOperation],
        segment: Sequence[int],
        current: MigrationLeadershipState,
        final: MigrationLeadershipState,
        final_data: bytes | None,
        batch: bool,
        n: int,
        state: MigrationLeadershipState,
    ) -> MigrationLeadershipState | None:
        """Send the multis of `segment` as ONE multi (ZooKeeper's per-multi cost is paid once); the new state
        if it landed, None if it failed on a request (nothing landed: the caller sends them one by one).

        Landed, it leaves what the one-by-one multis leave when they all land: the same requests in the same
        order, later ones seeing earlier ones' effects, sequential names in order.
        """
        requests = tuple(r for i in segment for r in plans[i].requests or ())
        epoch_version = current.zk_controller_epoch_zk_version
        try:
            self.require_fence(current, _name(ops[segment[0]]))
            reply = self.send_guarded(
                [GuardedMulti(requests, current.migration_zk_version, final_data)],
                epoch_version,
                f"fenced write of {len(segment)} operation(s) in one multi",
            )[0]
        except Zk2KraftError as exc:  # no reply: they may or may not have landed
            unknown = [*segment, *range(segment[-1] + 1, n)]
            self._abandon(exc, batch, unknown, n, ops, self._state_after_failure(current), state, final)
        self.raise_if_fenced(reply, epoch_version, _name(ops[segment[0]]))
        if not reply.landed:
            self._forget_stores(reply.results)
            return None
        for i in segment:
            self._learn_stores(plans[i].notes)
        if reply.migration_stat is not None:
            return final.with_migration_zk_version(reply.migration_stat.version)
        return current

    def _take_kafka_path(
        self,
        plans: Sequence[_Plan],
        ops: Sequence[ZkOperation],
        i: int,
        current: MigrationLeadershipState,
        state: MigrationLeadershipState,
        final: MigrationLeadershipState,
        batch: bool,
        unwritten: Sequence[int],
    ) -> MigrationLeadershipState:
        """Perform operation `i` the Kafka way (its fused multi landed nothing); it writes `/migration`'s
        content as it is, or `final`'s when it is the last operation (all before it have landed then).
        `unwritten` are the operations not landed (from `i` on) should it fail."""
        content = current
        if i == len(plans) - 1:
            content = final.with_migration_zk_version(current.migration_zk_version)
        try:
            new = plans[i].kafka_path(content)
        except (FencedError, ControllerMovedError):
            raise
        except Zk2KraftError as exc:
            if not batch:
                raise
            after = self._state_after_failure(current)
            self._abandon(exc, batch, unwritten, len(plans), ops, after, state, final)
        if new.migration_zk_version == current.migration_zk_version:
            return current  # it wrote nothing
        return content.with_migration_zk_version(new.migration_zk_version)

    def _abandon(
        self,
        error: Zk2KraftError,
        batch: bool,
        unwritten: Sequence[int],
        total: int,
        ops: Sequence[ZkOperation],
        current: MigrationLeadershipState,
        state: MigrationLeadershipState,
        final: MigrationLeadershipState,
    ) -> Any:
        """Raise `error` (one operation) or ZkBatchError, first setting `/migration`'s offset back if it
        already names the batch's end."""
        if not batch or isinstance(error, FencedError | ControllerMovedError):
            raise error
        if current.to_znode() == final.to_znode() != state.to_znode():
            try:
                current = self.fenced_set_migration_state(
                    state.with_migration_zk_version(current.migration_zk_version)
                )
            except Zk2KraftError as exc:
                log.error("%s still names offset %d although the batch failed: %s", paths.MIGRATION,
                          final.kraft_metadata_offset, exc)  # fmt: skip
        if unwritten:
            first = unwritten[0]
            where = f"operation {first + 1} ({_name(ops[first])})"
            what = f"{len(unwritten)} of {total} operation(s) did not land, from {where}"
        else:
            what = f"all {total} operation(s) landed but {paths.MIGRATION} could not be set to the new offset"
        raise ZkBatchError(
            f"dual write failed: {what}: {error}",
            state=current,
            unwritten=unwritten or [total],
        ) from error

    def _state_after_failure(self, current: MigrationLeadershipState) -> MigrationLeadershipState:
        """`current` with `/migration`'s version and offset as ZooKeeper has them, if the znode still names us.

        A failed operation of the Kafka path may have bumped `/migration` before failing; the next write
        must expect that version or it would take itself for fenced.
        """
        try:
            found = self.get(paths.MIGRATION)
        except Zk2KraftError as exc:
            log.warning("cannot re-read %s after a failed write: %s", paths.MIGRATION, exc)
            return current
        if found is None:
            return current
        data, stat = found
        try:
            znode: MigrationState = decode_migration(paths.MIGRATION, data, zk_version=stat.version)
        except Zk2KraftError:
            return current
        if (znode.kraft_controller_id, znode.kraft_controller_epoch) != (
            current.kraft_controller_id,
            current.kraft_controller_epoch,
        ):
            return current  # someone else's: the next write will find itself fenced
        return current.with_migration_zk_version(stat.version).with_kraft_metadata_offset_and_epoch(
            znode.kraft_metadata_offset, znode.kraft_metadata_epoch
        )

    def _run_unfused(
        self,
        plans: Sequence[_Plan],
        ops: Sequence[ZkOperation],
        state: MigrationLeadershipState,
        final: MigrationLeadershipState,
    ) -> MigrationLeadershipState:
        """The former grouping: each operation the Kafka way, then `/migration`'s offset in its own write."""
        current = state
        for i, plan in enumerate(plans):
            if plan.requests == ():
                continue
            try:
                current = plan.kafka_path(current)
            except Zk2KraftError as exc:
                self._abandon(
                    exc, True, [i], len(plans), ops, self._state_after_failure(current), state, state
                )
        if ops or final.to_znode() != state.to_znode():
            current = self.set_migration_state(final.with_migration_zk_version(current.migration_zk_version))
        return current

    def _fused(
        self,
        requests: Sequence[ZkRequest],
        kafka_path: Callable[[MigrationLeadershipState], MigrationLeadershipState],
        notes: Sequence[_Note] = (),
    ) -> _Plan:
        """A plan whose optimistic multi is `requests` then `notes`, unless that is too big for one multi."""
        everything = (*requests, *(note.request for note in notes))
        size = sum(
            len(r.path) + _REQUEST_OVERHEAD + (len(r.data or b"") if not isinstance(r, DeleteRequest) else 0)
            for r in everything
        )
        return _Plan(everything if size <= MAX_FUSED_BYTES else None, kafka_path, tuple(notes), size)

    # ------------------------------------------------------------------ notifications

    def _config_note(self, entity_path: str) -> _Note:
        data = encode_config_change(ConfigChangeNotification(entity_path, 2))
        prefix = f"{paths.CONFIG_CHANGES}/{paths.CONFIG_CHANGE_PREFIX}"
        return _Note(CreateRequest(prefix, data, sequential=True), entity_path)

    @staticmethod
    def _acl_note(pattern: ResourcePattern) -> _Note:
        """The literal or extended ACL change event ZK brokers' authorizers watch."""
        if pattern.pattern_type == PatternType.LITERAL:
            store = paths.KAFKA_ACL_CHANGES
            data = encode_acl_change(AclChangeNotification(pattern))
        else:
            store = paths.KAFKA_ACL_EXTENDED_CHANGES
            data = encode_extended_acl_change(AclChangeNotification(pattern, 1))
        return _Note(CreateRequest(f"{store}/{paths.ACL_CHANGE_PREFIX}", data, sequential=True))

    def create_config_change_notification(self, entity_path: str) -> str:
        """Kafka's createConfigChangeNotification, *unfenced* (`fused=False` only); returns the path created."""
        self.create_recursive(paths.CONFIG_CHANGES)
        note = self._config_note(entity_path)
        result = self.request(note.request)
        if not result.ok or result.created_path is None:
            raise_for_results(f"config change notification for {entity_path}", [result])
        return result.created_path

    def _notify_unfenced(self, notes: Sequence[_Note]) -> None:
        for note in notes:
            if note.entity_path is not None:
                self.create_config_change_notification(note.entity_path)
                continue
            result = self.request(note.request)
            if not result.ok:  # Kafka ignores this result
                log.warning("ACL change notification %s not written: %s", note.request.path, result)

    def _noted_write(
        self,
        requests: Sequence[ZkRequest],
        state: MigrationLeadershipState,
        notes: Sequence[_Note],
        *,
        retried: bool = False,
    ) -> WriteOutcome:
        """Kafka's write-then-notify: `requests` as `fenced_write` sends them, `notes` when the last one lands.

        Fused, the notes ride in the last request's multi, after guarded creates of config-change stores not
        known to exist (Kafka's createRecursive); an ACL note whose store is missing is dropped with a
        warning and the request sent alone. Unfused, the notes follow unfenced. The results are `requests`'.
        """
        if not notes:
            return self.fenced_write(requests, state)
        if not self.fused:
            outcome = self.fenced_write(requests, state)
            if outcome.results[-1].ok:
                self._notify_unfenced(notes)
            return outcome
        containers = [
            CreateRequest(p)
            for p in _unique(
                p for note in notes if note.entity_path is not None for p in _ancestry(note.store)
            )
            if p not in self._known_containers
        ]
        outcome = self.fenced_write([*containers, *requests], state, tail=[note.request for note in notes])
        self._forget_stores(outcome.results)
        results = outcome.results[len(containers) :]
        mine, noted = results[: len(requests)], results[len(requests) :]
        self._known_containers.update(
            r.path for r in outcome.results[: len(containers)] if r.code in (OK, NODEEXISTS)
        )
        if mine[-1].code == RUNTIMEINCONSISTENCY:  # rolled back: a notification failed
            failed = [
                (note, r) for note, r in zip(notes, noted, strict=True) if r.code != RUNTIMEINCONSISTENCY
            ]
            self._forget_stores([r for _, r in failed])
            if all(note.entity_path is None and r.code == NONODE for note, r in failed):
                for note, _ in failed:
                    log.warning("ACL change notification not written: %s does not exist", note.store)
                rest = [n for n in notes if all(n is not note for note, _ in failed)]
                again = self._noted_write(requests[-1:], outcome.state, rest, retried=retried)
                return WriteOutcome(again.state, (*mine[:-1], *again.results))
            if not retried and any(r.code == NONODE for _, r in failed):
                again = self._noted_write(requests[-1:], outcome.state, notes, retried=True)
                return WriteOutcome(again.state, (*mine[:-1], *again.results))
            raise_for_results(f"change notification with {requests[-1].path}", [r for _, r in failed])
        if mine[-1].ok:
            self._learn_stores(notes)
        return WriteOutcome(outcome.state, tuple(mine))

    def _notes_alone(self, notes: Sequence[_Note], state: MigrationLeadershipState) -> None:
        """Send `notes` without a write (Kafka notifies of a deleted ACL even when it was gone already)."""
        if not self.fused:
            self._notify_unfenced(notes)
            return
        self.require_fence(state, describe_notes(notes))
        epoch_version = state.zk_controller_epoch_zk_version
        multi = GuardedMulti(tuple(note.request for note in notes), state.migration_zk_version)
        reply = self.send_guarded([multi], epoch_version, describe_notes(notes))[0]
        self.raise_if_fenced(reply, epoch_version, describe_notes(notes))
        if reply.landed:
            self._learn_stores(notes)
            return
        failure = reply.first_failure()
        if (
            len(notes) == 1
            and notes[0].entity_path is None
            and failure is not None
            and failure.code == NONODE
        ):
            log.warning("ACL change notification not written: %s does not exist", notes[0].store)
            return
        raise_for_results(describe_notes(notes), reply.results)

    def _missing_containers(self, containers: Sequence[str]) -> list[ZkRequest]:
        """Guarded creates of `containers` not known to exist (existing ones answer NODEEXISTS, harmlessly:
        each goes in its own fenced multi)."""
        return [CreateRequest(p) for p in containers if p not in self._known_containers]

    def _learn_created(self, results: Sequence[ZkResult]) -> None:
        """Containers whose guarded create landed or found them there."""
        self._known_containers.update(r.path for r in results if r.code in (OK, NODEEXISTS))

    def _learn_stores(self, notes: Sequence[_Note]) -> None:
        for note in notes:
            self._known_containers.update(_ancestry(note.store))

    def _forget_stores(self, results: Sequence[ZkResult]) -> None:
        """A request answered NONODE: any cached container above it may be gone, and all below that."""
        for r in results:
            if r.code != NONODE:
                continue
            above = [c for c in self._known_containers if _within(r.path, c)]
            self._known_containers = {
                c for c in self._known_containers if not any(_within(c, a) for a in above)
            }

    # ------------------------------------------------------------------ topics

    def _topic_znode(
        self, name: str, topic_id: uuid.UUID, partitions: Mapping[int, PartitionRegistration]
    ) -> bytes:
        topic = Topic(
            name=name,
            topic_id=topic_id,
            partitions={p: list(r.replicas) for p, r in partitions.items()},
            adding_replicas={p: list(r.adding_replicas) for p, r in partitions.items() if r.adding_replicas},
            removing_replicas={
                p: list(r.removing_replicas) for p, r in partitions.items() if r.removing_replicas
            },
            version=3,
        )
        return encode_topic(topic)

    @staticmethod
    def _state_znode(registration: PartitionRegistration, state: MigrationLeadershipState) -> bytes:
        # Kafka writes the KRaft controller epoch here, not the ZK one (migration-protocol.md §13 #10).
        return encode_partition_state(
            PartitionState(
                leader=registration.leader,
                leader_epoch=registration.leader_epoch,
                isr=list(registration.isr),
                controller_epoch=state.kraft_controller_epoch,
                leader_recovery_state=registration.leader_recovery_state,
            )
        )

    def _partition_creates(
        self, topic: str, partitions: Mapping[int, PartitionRegistration], state: MigrationLeadershipState
    ) -> list[ZkRequest]:
        requests: list[ZkRequest] = [CreateRequest(paths.partitions_path(topic))]
        for p in sorted(partitions):
            requests.append(CreateRequest(paths.partition_path(topic, p)))
            requests.append(
                CreateRequest(paths.partition_state_path(topic, p), self._state_znode(partitions[p], state))
            )
        return requests

    def _plan_create_topic(self, op: CreateTopic, state: MigrationLeadershipState) -> _Plan:
        topic_path = paths.topic_path(op.name)
        config_path = paths.config_path(f"{paths.CONFIG_TOPICS}/{op.name}")
        requests: list[ZkRequest] = [
            CreateRequest(topic_path, self._topic_znode(op.name, op.topic_id, op.partitions)),
            CreateRequest(config_path, encode_config_map(config_path, {}, self.java8)),
            *self._partition_creates(op.name, op.partitions, state),
        ]

        def kafka_path(state: MigrationLeadershipState) -> MigrationLeadershipState:
            outcome = self.fenced_write(requests, state)
            codes = outcome.codes_by_path()
            if codes[topic_path] == NODEEXISTS:
                # Already created (a replay). Kafka returns the old state here; we keep the /migration version
                # the write actually left, which is the same unless the final create landed (§13 #6).
                return outcome.state
            if all(code == OK for code in codes.values()):
                return outcome.state
            raise_for_results(f"Failed to create or update topic {op.name}", outcome.results)

        return self._fused(requests, kafka_path)

    def _plan_update_topic(self, op: UpdateTopic, state: MigrationLeadershipState) -> _Plan:
        request = SetDataRequest(
            paths.topic_path(op.name), self._topic_znode(op.name, op.topic_id, op.partitions)
        )
        return self._all_ok(f"Failed to update topic metadata: {op.name}", [request])

    def _plan_delete_topic(self, op: DeleteTopic, state: MigrationLeadershipState) -> _Plan:
        def kafka_path(state: MigrationLeadershipState) -> MigrationLeadershipState:
            outcome = self.fenced_write(self._delete_topic_requests(op.name), state)
            if outcome.results[-1].ok:
                return outcome.state
            raise_for_results(f"Failed to delete topic {op.name}", outcome.results)

        # Read now; an earlier operation of the same batch changing the topic's children makes the fused
        # multi fail (NOTEMPTY or NONODE), and the Kafka path reads again.
        return self._fused(self._delete_topic_requests(op.name), kafka_path)

    def _delete_topic_requests(self, name: str) -> list[ZkRequest]:
        topic_path = paths.topic_path(name)
        requests: list[ZkRequest] = [DeleteRequest(p) for p in self._descendants(topic_path)]
        requests.append(DeleteRequest(paths.config_path(f"{paths.CONFIG_TOPICS}/{name}")))
        requests.append(DeleteRequest(topic_path))
        return requests

    def _descendants(self, path: str) -> list[str]:
        """Every znode below `path`, children before their parents (Kafka's recursiveChildren order)."""
        out: list[str] = []
        for child in sorted(self.get_children(path) or ()):
            child_path = f"{path}/{child}"
            out.extend(self._descendants(child_path))
            out.append(child_path)
        return out

    def _plan_clear_pending_topic_deletions(
        self, op: ClearPendingTopicDeletions, state: MigrationLeadershipState
    ) -> _Plan:
        requests: list[ZkRequest] = [DeleteRequest(paths.delete_topic_path(t)) for t in op.names]
        return self._all_ok(f"Failed to delete pending topic deletions: {sorted(op.names)}", requests)

    def _plan_create_topic_partitions(
        self, op: CreateTopicPartitions, state: MigrationLeadershipState
    ) -> _Plan:
        requests: list[ZkRequest] = []
        for topic, partitions in op.partitions.items():
            requests.extend(self._partition_creates(topic, partitions, state))

        def kafka_path(state: MigrationLeadershipState) -> MigrationLeadershipState:
            outcome = self.fenced_write(requests, state)
            if all(code in (OK, NODEEXISTS) for code in outcome.codes_by_path().values()):
                return outcome.state
            raise_for_results("Failed to create partition states", outcome.results)

        return self._fused(requests, kafka_path)

    def _plan_update_topic_partitions(
        self, op: UpdateTopicPartitions, state: MigrationLeadershipState
    ) -> _Plan:
        requests: list[ZkRequest] = [
            SetDataRequest(paths.partition_state_path(topic, p), self._state_znode(registration, state))
            for topic, partitions in op.partitions.items()
            for p, registration in partitions.items()
        ]
        return self._all_ok("Failed to update partition states", requests)

    def _plan_delete_topic_partitions(
        self, op: DeleteTopicPartitions, state: MigrationLeadershipState
    ) -> _Plan:
        # Kafka deletes only `<p>`, which ZooKeeper refuses while `<p>/state` exists (§13 #5); we delete
        # the state first and accept it being gone already.
        requests: list[ZkRequest] = []
        for topic, ids in op.partitions.items():
            for p in ids:
                requests.append(DeleteRequest(paths.partition_state_path(topic, p)))
                requests.append(DeleteRequest(paths.partition_path(topic, p)))

        def kafka_path(state: MigrationLeadershipState) -> MigrationLeadershipState:
            outcome = self.fenced_write(requests, state)
            for result in outcome.results:
                if not (result.ok or (result.code == NONODE and result.path.endswith("/state"))):
                    raise_for_results("Failed to delete partition states", outcome.results)
            return outcome.state

        return self._fused(requests, kafka_path)

    def _all_ok(self, what: str, requests: Sequence[ZkRequest]) -> _Plan:
        """A plan whose Kafka path needs every request to land."""

        def kafka_path(state: MigrationLeadershipState) -> MigrationLeadershipState:
            outcome = self.fenced_write(requests, state)
            if all(r.ok for r in outcome.results):
                return outcome.state
            raise_for_results(what, outcome.results)

        return self._fused(requests, kafka_path) if requests else _NO_WRITE

    # ------------------------------------------------------------------ configs and quotas

    def _entity_config_plan(self, entity_type: str, entity: str, data: bytes, parent: str) -> _Plan:
        """Kafka's tryWriteEntityConfig twice: SetData, and on NONODE createRecursive(parent) then Create;
        then (it landed) the config change notification."""
        path = paths.config_path(f"{entity_type}/{entity}")
        note = self._config_note(f"{entity_type}/{entity}")

        def kafka_path(state: MigrationLeadershipState) -> MigrationLeadershipState:
            outcome = self._noted_write([SetDataRequest(path, data)], state, [note])
            if outcome.results[0].code == NONODE:
                if self.fused:  # the parents as guarded creates; existing ones answer NODEEXISTS
                    parents = [CreateRequest(p) for p in _ancestry(parent) if p not in self._known_containers]
                else:
                    self.create_recursive(parent)
                    parents = []
                outcome = self._noted_write([*parents, CreateRequest(path, data)], state, [note])
                if not outcome.results[-1].ok:
                    raise_for_results(
                        f"Could not write {path} on second attempt when using Create", outcome.results[-1:]
                    )
                self._known_containers.update(_ancestry(parent))
            elif not outcome.results[0].ok:
                raise_for_results(f"Could not write {path}", outcome.results)
            return outcome.state

        return self._fused([SetDataRequest(path, data)], kafka_path, [note])

    def _plan_write_configs(self, op: WriteConfigs, state: MigrationLeadershipState) -> _Plan:
        entity_type = _CONFIG_TYPES.get(op.resource_type)
        if entity_type is None:
            log.error(
                "Not updating ZK for config resource %d/%r: not a broker or topic",
                op.resource_type,
                op.resource_name,
            )
            return _NO_WRITE
        entity = op.resource_name or paths.DEFAULT_ENTITY
        encode = self.password_encoder
        configs = {k: encode(k, v) for k, v in op.configs.items()} if encode else dict(op.configs)
        path = paths.config_path(f"{entity_type}/{entity}")
        data = encode_config_map(path, configs, self.java8)
        return self._entity_config_plan(entity_type, entity, data, paths.config_type_path(entity_type))

    def _plan_delete_configs(self, op: DeleteConfigs, state: MigrationLeadershipState) -> _Plan:
        entity_type = _CONFIG_TYPES.get(op.resource_type)
        if entity_type is None:
            log.error(
                "Not deleting ZK configs of resource %d/%r: not a broker or topic",
                op.resource_type,
                op.resource_name,
            )
            return _NO_WRITE
        entity = op.resource_name or paths.DEFAULT_ENTITY
        request = DeleteRequest(paths.config_path(f"{entity_type}/{entity}"))
        # Kafka 3.9 interpolates an Option here and writes "Some(brokers)/1", which brokers cannot parse.
        note = self._config_note(f"{entity_type}/{entity}")

        def kafka_path(state: MigrationLeadershipState) -> MigrationLeadershipState:
            outcome = self._noted_write([request], state, [note])
            result = outcome.results[0]
            if result.code == NONODE:
                log.info("Did not delete %s/%s configs since the znode did not exist", entity_type, entity)
                return state
            if not result.ok:
                raise_for_results(f"Could not delete {entity_type}/{entity} configs", outcome.results)
            return outcome.state

        return self._fused([request], kafka_path, [note])

    def _plan_write_client_quotas(self, op: WriteClientQuotas, state: MigrationLeadershipState) -> _Plan:
        names = dict(op.entity)
        user, client, ip = (
            _zk_entity_name(op, names[t]) if t in names else None for t in ("user", "client-id", "ip")
        )
        if user is not None:
            entity_type, keys = paths.CONFIG_USERS, _USER_CLIENT_QUOTA_KEYS
            entity = user if client is None else f"{user}/clients/{client}"
            parent = paths.config_path(f"{paths.CONFIG_USERS}/{user}/clients") if client is not None else None
        elif client is not None:
            entity_type, entity, keys, parent = paths.CONFIG_CLIENTS, client, _USER_CLIENT_QUOTA_KEYS, None
        elif ip is not None:
            entity_type, entity, keys, parent = paths.CONFIG_IPS, ip, _IP_QUOTA_KEYS, None
        else:
            log.error("Skipping unknown client quota entity %s", op.entity)
            return _NO_WRITE
        config: dict[str, str] = {}
        for key, value in op.quotas.items():
            if key not in keys:
                raise MigrationClientError(
                    f"client quota entity {op.entity}: invalid configuration key {key}"
                )
            config[key] = kafka_quota_text(key, value)
        for mechanism_id in sorted(op.scram):
            mechanism = SCRAM_MECHANISM_NAMES.get(mechanism_id)
            if mechanism is None or entity_type != paths.CONFIG_USERS or client is not None:
                raise InvalidRequestError(
                    f"client quota entity {op.entity}: cannot store SCRAM mechanism {mechanism_id} there"
                )
            c = op.scram[mechanism_id]
            config[mechanism] = encode_scram_credential(
                ScramCredential(mechanism, c.salt, c.stored_key, c.server_key, c.iterations)
            )
        path = paths.config_path(f"{entity_type}/{entity}")
        data = encode_config_map(path, config, self.java8)
        return self._entity_config_plan(
            entity_type, entity, data, parent or paths.config_type_path(entity_type)
        )

    # ------------------------------------------------------------------ producer ids, ACLs, tokens

    def _plan_write_producer_id(self, op: WriteProducerId, state: MigrationLeadershipState) -> _Plan:
        block = ProducerIdBlock(-1, op.next_producer_id, op.next_producer_id + PRODUCER_ID_BLOCK_SIZE - 1)
        request = SetDataRequest(paths.LATEST_PRODUCER_ID_BLOCK, encode_producer_id_block(block))
        # Kafka ignores this result; a lost block would let a reverted ZK controller reuse producer ids.
        return self._all_ok(f"Could not write next producer id {op.next_producer_id}", [request])

    def _plan_write_resource_acls(self, op: WriteResourceAcls, state: MigrationLeadershipState) -> _Plan:
        pattern = _acl_pattern(op.pattern)
        entries = _acl_entries(op)
        path = paths.acl_resource_path(
            pattern.pattern_type.name, pattern.resource_type.pascal_name, pattern.name
        )
        data = encode_acls(AclResource(pattern, entries))
        note = self._acl_note(pattern)

        def kafka_path(state: MigrationLeadershipState) -> MigrationLeadershipState:
            outcome = self._noted_write([SetDataRequest(path, data)], state, [note])
            if outcome.results[0].code == NONODE:
                # A cluster that never ran AclAuthorizer has no ACL store: create it as its start-up
                # (createAclPaths) would, each container a guarded create ahead of the znode.
                stores = self._missing_containers(ACL_STORE_PATHS)
                outcome = self._noted_write([*stores, CreateRequest(path, data)], state, [note])
                self._learn_created(outcome.results[:-1])
            if not outcome.results[-1].ok:
                # Kafka writes the notification and carries on whatever the code; we report the failure.
                raise_for_results(
                    f"Could not write ACLs for resource pattern {_show_pattern(pattern)}",
                    _failures(outcome.results),
                )
            return outcome.state

        return self._fused([SetDataRequest(path, data)], kafka_path, [note])

    def _plan_delete_resource_acls(self, op: DeleteResourceAcls, state: MigrationLeadershipState) -> _Plan:
        pattern = _acl_pattern(op.pattern)
        path = paths.acl_resource_path(
            pattern.pattern_type.name, pattern.resource_type.pascal_name, pattern.name
        )
        note = self._acl_note(pattern)

        def kafka_path(state: MigrationLeadershipState) -> MigrationLeadershipState:
            outcome = self._noted_write([DeleteRequest(path)], state, [note])
            code = outcome.results[0].code
            if code == NONODE:
                self._notes_alone([note], state)  # Kafka notifies whatever the delete answered
                return outcome.state
            if code != OK:
                raise_for_results(
                    f"Could not delete ACLs for resource pattern {_show_pattern(pattern)}", outcome.results
                )
            return outcome.state

        return self._fused([DeleteRequest(path)], kafka_path, [note])

    def _plan_write_delegation_token(
        self, op: WriteDelegationToken, state: MigrationLeadershipState
    ) -> _Plan:
        token = op.token
        if token is None:
            raise InvalidRequestError("WriteDelegationToken without a token")
        model = DelegationToken(
            token_id=token.token_id,
            owner=token.owner,
            token_requester=token.requester,
            renewers=list(token.renewers),
            issue_timestamp=token.issue_timestamp,
            max_timestamp=token.max_timestamp,
            expiry_timestamp=token.expiration_timestamp,
            version=3,
        )
        path = paths.token_path(token.token_id)
        data = encode_delegation_token(model)

        def kafka_path(state: MigrationLeadershipState) -> MigrationLeadershipState:
            outcome = self.fenced_write([SetDataRequest(path, data)], state)
            if outcome.results[0].code == NONODE:
                # Without token authentication ZooKeeper-mode Kafka never ran createDelegationTokenPaths.
                stores = self._missing_containers(TOKEN_STORE_PATHS)
                outcome = self.fenced_write([*stores, CreateRequest(path, data)], state)
                self._learn_created(outcome.results[:-1])
            if not outcome.results[-1].ok:
                raise_for_results(
                    f"Could not write delegation token {token.token_id}", _failures(outcome.results)
                )
            return outcome.state

        return self._fused([SetDataRequest(path, data)], kafka_path)

    def _plan_delete_delegation_token(
        self, op: DeleteDelegationToken, state: MigrationLeadershipState
    ) -> _Plan:
        request = DeleteRequest(paths.token_path(op.token_id))

        def kafka_path(state: MigrationLeadershipState) -> MigrationLeadershipState:
            outcome = self.fenced_write([request], state)
            result = outcome.results[0]
            if result.code == NONODE:
                log.info("Did not delete delegation token %s since the znode did not exist", op.token_id)
                return state
            if not result.ok:
                raise_for_results(f"Could not delete delegation token {op.token_id}", outcome.results)
            return outcome.state

        return self._fused([request], kafka_path)


def _state_after(one: OneMulti, reply: MultiReply) -> MigrationLeadershipState | None:
    """The leadership state `one` leaves once it landed (its `/migration` version from the reply), else None."""
    if not reply.landed or reply.migration_stat is None:
        return None
    return one.final.with_migration_zk_version(reply.migration_stat.version)


def _failures(results: Sequence[ZkResult]) -> list[ZkResult]:
    """The results that explain a failed write: the last request's and any container create that failed."""
    return [r for r in results[:-1] if r.code not in (OK, NODEEXISTS, RUNTIMEINCONSISTENCY)] + [results[-1]]


def _name(op: ZkOperation) -> str:
    return f"{type(op).__name__} {op.description}".rstrip()


def describe_notes(notes: Sequence[_Note]) -> str:
    return ", ".join(f"Create {note.request.path}" for note in notes)


def _ancestry(path: str) -> list[str]:
    """`path` and its ancestors below `/`, outermost first: what createRecursive(path) may create."""
    parts = path.strip("/").split("/")
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts)) if parts[0]]


def _clash(plan: _Plan, behind: Sequence[_Plan]) -> str | None:
    """A znode whose outcome depends on the order of `plan` and one of `behind`: both write it, or one
    deletes an ancestor of what the other writes (notifications aside: their names are ZooKeeper's)."""
    mine = _written(plan)
    for other in behind:
        for path, deletes in _written(other):
            for own, own_deletes in mine:
                if path == own or (deletes and _within(own, path)) or (own_deletes and _within(path, own)):
                    return path
    return None


def _written(plan: _Plan) -> list[tuple[str, bool]]:
    """(path, is a delete) of each request of `plan` but its sequential creates."""
    return [
        (r.path, isinstance(r, DeleteRequest))
        for r in plan.requests or ()
        if not (isinstance(r, CreateRequest) and r.sequential)
    ]


def _within(path: str, ancestor: str) -> bool:
    return path == ancestor or path.startswith(ancestor + "/")


def _unique(items: Any) -> list[str]:
    return list(dict.fromkeys(items))


def _zk_entity_name(op: WriteClientQuotas, name: str | None) -> str:
    """A quota entity's znode name: sanitised, `<default>` for the default entity."""
    if name is None:
        return paths.DEFAULT_ENTITY
    if not name:
        raise InvalidRequestError(f"client quota entity {op.entity}: an empty name cannot be a znode")
    return paths.sanitize(name)


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
