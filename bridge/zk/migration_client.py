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
child counter either way. The znodes of each family are planned beside their Kafka counterparts
(`topic_client`, `config_client`, `acl_client`, `token_client`); notifications are `notifications`'.

Where Kafka 3.9 is evidently wrong we do what it meant instead (each place says so): deleteConfigs'
notification names `brokers/1`, not `Some(brokers)/1`; a partition's `state` child is deleted before the
partition; a failed producer-id or ACL write raises instead of passing silently; an ACL or delegation-token
write on a cluster that never ran AclAuthorizer or token authentication creates the store's containers first
(what those would have created at start-up; Kafka's write fails with NONODE there, forever).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.security import ACL

from bridge.zk import acl_client, config_client, planning, token_client, topic_client
from bridge.zk.leadership import (
    ControllerMovedError,
    CreateRequest,
    DeleteRequest,
    FencedError,
    GuardedMulti,
    MigrationClientError,
    MigrationLeadershipState,
    MultiReply,
    SetDataRequest,
    ZkLeadershipClient,
    ZkResult,
    parse_reply,
)
from bridge.zk.notifications import ChangeNotifier, within
from bridge.zk.operations import WriteProducerId, ZkOperation
from bridge.zk.planning import PasswordEncoder, Plan, PlanContext, Planner, all_ok
from migrate.errors import InvalidRequestError, Zk2KraftError
from migrate.zk import paths
from migrate.zk.kazoo_adapter import ReplyRelay
from migrate.zk.model import MigrationState
from migrate.zk.protocol import RUNTIMEINCONSISTENCY
from migrate.zk.znodes.controller import decode_migration, encode_migration
from migrate.zk.znodes.singletons import encode_producer_id_block

log = logging.getLogger(__name__)


def write_producer_id(ctx: PlanContext, op: WriteProducerId, state: MigrationLeadershipState) -> Plan:
    """Kafka's ZkMigrationClient.writeProducerId: the next block after `op`'s id."""
    request = SetDataRequest(paths.LATEST_PRODUCER_ID_BLOCK, encode_producer_id_block(op.block()))
    # Kafka ignores this result; a lost block would let a reverted ZK controller reuse producer ids.
    return all_ok(ctx, f"Could not write next producer id {op.next_producer_id}", [request])


PLANNERS: dict[type, Planner] = {
    WriteProducerId: write_producer_id,
    **topic_client.PLANNERS,
    **config_client.PLANNERS,
    **acl_client.PLANNERS,
    **token_client.PLANNERS,
}
"""Each dual-write operation's planner, by family (Kafka's MigrationClient topicClient(), configClient(),
aclClient(), delegationTokenClient()), and the producer-id block, which Kafka writes itself."""


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


@dataclass(frozen=True, slots=True, eq=False)
class PreparedOps:
    """Operations planned against `state`: their plans in order, and the error that stopped planning."""

    operations: Sequence[ZkOperation]
    state: MigrationLeadershipState
    plans: list[Plan]
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
    picks the java.util.Properties key order of config znodes (Kafka on Java 8 instead of 11+).
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
    ) -> None:
        super().__init__(client, acl_provider=acl_provider, clock=clock, retry_timeout_s=retry_timeout_s)
        self.password_encoder = password_encoder
        self.java8 = java8
        self.notifier = ChangeNotifier(self)

    # ------------------------------------------------------------------ public

    def apply(self, operation: ZkOperation, state: MigrationLeadershipState) -> MigrationLeadershipState:
        """Perform `operation` in ZooKeeper, writing `state` to `/migration` with it (as Kafka does per
        operation); returns the state to use for the next write. Errors are raised as they come."""
        return self._run([self._plan(operation, state)], [operation], state, state, batch=False)

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
        done = self._run(plans, ops, state, target, batch=True)
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
        plans: list[Plan] = []
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
            prepared.error is not None
            or not plans
            or any(plan.requests is None for plan in plans)
            or sum(plan.size for plan in plans) > planning.MAX_FUSED_BYTES
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
            self.notifier.forget_stores(reply.results)
            return
        for plan in one.prepared.plans:
            self.notifier.learn_stores(plan.notes)

    # ------------------------------------------------------------------ running plans

    def _plan(self, operation: ZkOperation, state: MigrationLeadershipState) -> Plan:
        planner = PLANNERS.get(type(operation))
        if planner is None:
            raise InvalidRequestError(f"{type(operation).__name__} is not a ZooKeeper dual-write operation")
        return planner(self, operation, state)

    def _run(
        self,
        plans: Sequence[Plan],
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
            fits_one = sum(plans[i].size for i in segment) <= planning.MAX_FUSED_BYTES
            if len(segment) > 1 and fits_one:
                together = self._run_together(
                    plans, ops, segment, current, final, final_data, batch, n, state
                )
                if together is not None:
                    current = together
                    continue
            # Many operations too big for one multi together go as a stream of multis, each as full as one
            # multi may be (ZooKeeper's per-multi cost paid once per group, not once per operation).
            # After a failed multi of them all, one multi each (the failing ones are then redone alone).
            units = [[i] for i in segment] if fits_one else _groups(plans, segment)
            multis = [
                GuardedMulti(
                    tuple(r for i in unit for r in plans[i].requests or ()),
                    version,
                    final_data if unit is units[-1] else None,
                )
                for unit in units
            ]
            try:
                self.require_fence(current, _name(ops[segment[0]]))
                replies = self.send_guarded(
                    multis,
                    epoch_version,
                    f"fenced write of {len(segment)} operation(s)",
                )
            except Zk2KraftError as exc:  # no reply: each of them may or may not have landed
                if not batch:
                    raise
                unknown = [*segment, *range(end, n)]
                self._abandon(exc, batch, unknown, n, ops, self._state_after_failure(current), state, final)
            for unit, reply in zip(units, replies, strict=True):
                # A lost fence: every multi behind this one failed as well.
                self.raise_if_fenced(reply, epoch_version, _name(ops[unit[0]]))
            if replies[-1].migration_stat is not None:
                current = final.with_migration_zk_version(replies[-1].migration_stat.version)
            failed: list[tuple[int, MultiReply]] = []
            landed: list[int] = []
            for unit, reply in zip(units, replies, strict=True):
                if reply.landed:  # a walk over the multi's results: once per multi
                    landed += unit
                    for i in unit:
                        self.notifier.learn_stores(plans[i].notes)
                else:
                    self.notifier.forget_stores(reply.results)
                    # Each operation of a multi that failed (none of it landed) is redone the Kafka way, in order.
                    failed += [(i, reply) for i in unit]
            for position, (i, reply) in enumerate(failed):
                clash = _clash(plans[i], [plans[j] for j in landed if j > i])
                unwritten = [*(f for f, _ in failed[position:]), *range(end, n)]
                if clash is not None:
                    error = MigrationClientError(
                        f"{_name(ops[i])} failed ({reply.first_failure()}) and cannot be redone in order: "
                        f"{clash} was written by an operation behind it"
                    )
                    self._abandon(error, batch, unwritten, n, ops, current, state, final)
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
        plans: Sequence[Plan],
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
            self.notifier.forget_stores(reply.results)
            return None
        for i in segment:
            self.notifier.learn_stores(plans[i].notes)
        if reply.migration_stat is not None:
            return final.with_migration_zk_version(reply.migration_stat.version)
        return current

    def _take_kafka_path(
        self,
        plans: Sequence[Plan],
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


def _state_after(one: OneMulti, reply: MultiReply) -> MigrationLeadershipState | None:
    """The leadership state `one` leaves once it landed (its `/migration` version from the reply), else None."""
    if not reply.landed or reply.migration_stat is None:
        return None
    return one.final.with_migration_zk_version(reply.migration_stat.version)


def _groups(plans: Sequence[Plan], segment: Sequence[int]) -> list[list[int]]:
    """`segment`'s operations cut into consecutive groups of at most MAX_FUSED_BYTES each (one multi each)."""
    groups: list[list[int]] = []
    size = planning.MAX_FUSED_BYTES + 1
    for i in segment:
        if size + plans[i].size > planning.MAX_FUSED_BYTES:
            groups.append([])
            size = 0
        groups[-1].append(i)
        size += plans[i].size
    return groups


def _name(op: ZkOperation) -> str:
    return f"{type(op).__name__} {op.description}".rstrip()


def _clash(plan: Plan, behind: Sequence[Plan]) -> str | None:
    """A znode whose outcome depends on the order of `plan` and one of `behind`: both write it, or one
    deletes an ancestor of what the other writes (notifications aside: their names are ZooKeeper's)."""
    mine = _written(plan)
    for other in behind:
        for path, deletes in _written(other):
            for own, own_deletes in mine:
                if path == own or (deletes and within(own, path)) or (own_deletes and within(path, own)):
                    return path
    return None


def _written(plan: Plan) -> list[tuple[str, bool]]:
    """(path, is a delete) of each request of `plan` but its sequential creates."""
    return [
        (r.path, isinstance(r, DeleteRequest))
        for r in plan.requests or ()
        if not (isinstance(r, CreateRequest) and r.sequential)
    ]
