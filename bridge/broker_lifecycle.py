"""The brokers' requests and sessions, wired to the log: BrokerRegistration, BrokerHeartbeat, session expiry.

Kafka's counterparts: ControllerApis.handleBrokerRegistration / handleBrokerHeartBeat and QuorumController's
registerBroker, processBrokerHeartbeat and maybeFenceStaleBroker events, over the pure `bridge.brokers`.
In DUAL_WRITE their records go through the dual-write pipeline like any change (partition state znodes
follow elections); before it (registrations while the driver waits for brokers) they are appended to the
log directly, since they change nothing ZooKeeper holds. A heartbeat that changes nothing is answered at
once, never behind a pending append or ZooKeeper write (KAFKA-15441).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType
from kio.static.primitive import i32, i64

from bridge.api import ControllerResult, DriverState, HandlerContext, RecordAndVersion
from bridge.brokers.cluster import (
    BROKER_HEARTBEAT,
    BROKER_REGISTRATION,
    ClusterControl,
    ControllerSettings,
    RegistrationRequest,
)
from bridge.brokers.heartbeats import MAX_OFFSET, BrokerControlState, HeartbeatRequest
from bridge.brokers.replication import ReplicationControl
from bridge.driver import FencedOut, MigrationDriver
from bridge.kafka.protocol import response_class
from bridge.metadata_log import MetadataLog
from bridge.pipeline import DualWritePipeline
from migrate.errors import Zk2KraftError
from migrate.kraft.image import MetadataImage
from migrate.kraft.migration_state import ZkMigrationState
from migrate.migration import MAX_RECORDS_PER_APPEND

log = logging.getLogger(__name__)

ASSIGN_REPLICAS_TO_DIRS = 73
SUPPORTED = {BROKER_REGISTRATION: (0, 4), BROKER_HEARTBEAT: (0, 1), ASSIGN_REPLICAS_TO_DIRS: (0, 0)}
"""The versions Kafka 3.9's controller accepts (kio also knows BrokerHeartbeat v2)."""
EXPIRY_CHECK_MAX_S = 0.25
"""The session-expiry timer wakes at least this often (a heartbeat may move the next expiry earlier)."""
NO_THROTTLE = timedelta(0)


def served_by_lifecycle(ctx: HandlerContext, request: Any) -> ControllerResult:
    """The handler-table entry of BrokerRegistration/BrokerHeartbeat: the controller sends them to a
    BrokerLifecycle instead (they are served before DUAL_WRITE and keep state between requests)."""
    raise Zk2KraftError("broker lifecycle requests are not served by a pure handler")


@dataclass(frozen=True, slots=True)
class BrokerCounts:
    """What `/status` and `/metrics` show of the registered brokers (ControllerMetadataMetrics)."""

    registered: int
    fenced: int
    in_controlled_shutdown: int
    migrating_zk_brokers: int
    """Kafka's MigratingZkBrokerCount: registered brokers whose registration says IsMigratingZkBroker."""

    @classmethod
    def of(cls, image: MetadataImage) -> BrokerCounts:
        brokers = image.cluster.brokers.values()
        return cls(
            registered=len(brokers),
            fenced=sum(1 for b in brokers if b.fenced),
            in_controlled_shutdown=sum(1 for b in brokers if b.in_controlled_shutdown),
            migrating_zk_brokers=sum(1 for b in brokers if b.is_migrating_zk_broker),
        )


class BrokerLifecycle:
    """Serves BrokerRegistration and BrokerHeartbeat and fences expired sessions, for one leadership at a time.

    `activate(log, driver)` on every new leadership (sessions start then, so a restart fences nobody);
    `expire_sessions()` runs while it leads. `on_change()` runs after each commit of broker records.
    """

    def __init__(
        self,
        settings: ControllerSettings,
        pipeline: DualWritePipeline,
        *,
        unclean_enabled: Callable[[MetadataImage, str], bool],
        on_change: Callable[[], None] = lambda: None,
        clock: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        self.cluster = ClusterControl(settings, clock)
        self.replication = ReplicationControl(self.cluster, unclean_enabled)
        self.pipeline = pipeline
        self.on_change = on_change
        self.clock = clock
        self.log: MetadataLog | None = None
        self.driver: MigrationDriver | None = None

    def activate(self, metadata_log: MetadataLog, driver: MigrationDriver) -> None:
        """ClusterControlManager.activate for a new leadership over `metadata_log`."""
        self.log, self.driver = metadata_log, driver
        image = metadata_log.image
        # Kafka replays the log into its registration offsets; a registration's record sits at its epoch
        # unless the same incarnation registered again later (then the gate to unfence is a little lower).
        self.cluster.register_offsets = {b.broker_id: b.epoch for b in image.cluster.brokers.values()}
        self.cluster.activate(image)

    def counts(self) -> BrokerCounts:
        return BrokerCounts.of(self.log.image if self.log is not None else MetadataImage())

    # ------------------------------------------------------------------ requests

    def _accepting(self) -> bool:
        """Active: the log is ours and the driver is past reading ZooKeeper, and not fenced."""
        driver = self.driver
        return (
            self.log is not None
            and driver is not None
            and driver.fenced_reason is None
            and driver.state not in (DriverState.UNINITIALIZED, DriverState.INACTIVE)
        )

    async def register(self, body: Any, version: int) -> Any:
        """BrokerRegistration: Kafka's checks, then the RegisterBrokerRecord, answered once durable."""
        response = response_class(BROKER_REGISTRATION, version)

        def answer(code: ErrorCode, epoch: int = -1) -> Any:
            return response(throttle_time=NO_THROTTLE, error_code=code, broker_epoch=i64(epoch))

        if not self._accepting():
            return answer(ErrorCode.not_controller)
        assert self.log is not None
        request = RegistrationRequest.of(body)
        result = self.cluster.register_broker(self.log.image, request, self.log.end_offset)
        if result.error is not None:
            return answer(result.error.code)
        code = await self._commit(result.records, f"registration of broker {request.broker_id}")
        if code != ErrorCode.none:
            return answer(code)
        log.info(
            "event=broker_registered broker_id=%d broker_epoch=%d migrating_zk_broker=%s incarnation=%s",
            request.broker_id, result.broker_epoch, request.is_migrating_zk_broker, request.incarnation_id,
        )  # fmt: skip
        return answer(ErrorCode.none, result.broker_epoch)

    async def heartbeat(self, body: Any, version: int) -> Any:
        """BrokerHeartbeat: the state machine; records only when the broker's state changes."""
        response = response_class(BROKER_HEARTBEAT, version)

        def answer(code: ErrorCode, **flags: bool) -> Any:
            return response(
                throttle_time=NO_THROTTLE, error_code=code, should_shut_down=flags.pop("should_shut_down", False),
                **flags,
            )  # fmt: skip

        if not self._accepting():
            return answer(ErrorCode.not_controller)
        assert self.log is not None and self.driver is not None
        image = self.log.image
        request = HeartbeatRequest.of(body)
        if image.features.zk_migration_state == ZkMigrationState.MIGRATION and not self.driver.dual_write:
            # Migrated, not yet dual-writing: a state change would elect leaders ZooKeeper cannot be told
            # of yet. Keep the session alive and answer the state as it is (the change comes next time).
            error = self.replication.process_expired_broker_heartbeat(image, request)
            if error is not None:
                return answer(error.code)
            state = self.cluster.heartbeats.current_state(request.broker_id)
            register_offset = self.cluster.register_broker_record_offset(request.broker_id)
            caught_up = register_offset is not None and request.current_metadata_offset >= register_offset
            return answer(
                ErrorCode.none, is_caught_up=caught_up, is_fenced=state.fenced,
                should_shut_down=state is BrokerControlState.SHUTDOWN_NOW,
            )  # fmt: skip
        offline = [d for d in getattr(body, "offline_log_dirs", ()) if d is not None]
        result = self.replication.process_broker_heartbeat(image, request, offline)
        if result.error is not None:
            return answer(result.error.code)
        assert result.reply is not None
        if result.records:
            last = await self._commit_offset(result.records, f"heartbeat of broker {request.broker_id}")
            if last is None:
                return answer(ErrorCode.unknown_server_error)
            if result.in_controlled_shutdown:
                try:
                    self.cluster.heartbeats.maybe_update_controlled_shutdown_offset(request.broker_id, last)
                except (KeyError, RuntimeError) as exc:  # fenced meanwhile: its next heartbeat shuts it down
                    log.info(
                        "broker %d left controlled shutdown before it was recorded: %s",
                        request.broker_id,
                        exc,
                    )
        reply = result.reply
        return answer(
            ErrorCode.none, is_caught_up=reply.is_caught_up, is_fenced=reply.is_fenced,
            should_shut_down=reply.should_shut_down,
        )  # fmt: skip

    async def assign_replicas_to_dirs(self, body: Any, version: int) -> Any:
        """AssignReplicasToDirs (KRaft brokers placing replicas, e.g. migrated ones that carry no directory)."""
        response = response_class(ASSIGN_REPLICAS_TO_DIRS, version)
        module = load_payload_module(ASSIGN_REPLICAS_TO_DIRS, version, EntityType.response)

        def answer(code: ErrorCode, directories: tuple[Any, ...] = ()) -> Any:
            return response(throttle_time=NO_THROTTLE, error_code=code, directories=directories)

        # Not RUNS_IN_PREMIGRATION in Kafka; its records change partitions, which ZooKeeper must follow.
        if not self._accepting() or self.driver is None or not self.driver.dual_write:
            return answer(ErrorCode.not_controller)
        assert self.log is not None
        broker_id = int(body.broker_id)
        requested = [
            (d.id_, [(t.topic_id, [int(p.partition_index) for p in t.partitions]) for t in d.topics])
            for d in body.directories
        ]
        result = self.replication.handle_assign_replicas_to_dirs(
            self.log.image, broker_id, int(body.broker_epoch), requested
        )
        if result.error is not None:
            return answer(result.error.code)
        if result.records:
            code = await self._commit(result.records, f"directory assignments of broker {broker_id}")
            if code != ErrorCode.none:
                return answer(code)
            log.info(
                "event=replicas_assigned_to_dirs broker_id=%d partitions_changed=%d",
                broker_id, len(result.records),
            )  # fmt: skip
        return answer(
            ErrorCode.none,
            tuple(
                module.DirectoryData(
                    id_=directory,
                    topics=tuple(
                        module.TopicData(
                            topic_id=topic_id,
                            partitions=tuple(
                                module.PartitionData(partition_index=i32(p), error_code=code)
                                for p, code in parts
                            ),
                        )
                        for topic_id, parts in topics
                    ),
                )
                for directory, topics in result.directories
            ),
        )

    # ------------------------------------------------------------------ session expiry

    async def expire_sessions(self) -> None:
        """The maybeFenceStaleBroker timer: fence one expired broker at a time while dual-writing."""
        while True:
            wait_ns = self.cluster.heartbeats.next_check_time_ns() - self.clock()
            await asyncio.sleep(min(max(wait_ns / 1e9, 0.0), EXPIRY_CHECK_MAX_S))
            driver, metadata_log = self.driver, self.log
            if driver is None or metadata_log is None or not driver.dual_write:
                continue  # nobody is fenced for silence before the migration completed
            while driver.dual_write:
                records = self.replication.maybe_fence_one_stale_broker(metadata_log.image)
                if not records:
                    break
                await self._commit_offset(records, "session expiry")

    # ------------------------------------------------------------------ preferred-leader balancing

    async def balance_leaders(self, interval_s: float) -> None:
        """QuorumController's MAYBE_BALANCE_PARTITION_LEADERS event (auto.leader.rebalance.enable).

        Every `interval_s` (leader.imbalance.check.interval.seconds) while dual-writing, a preferred election
        for each partition not led by its first replica, at most MAX_ELECTIONS_PER_IMBALANCE at a time; a
        pass that stopped at that limit is followed by the next one at once, as in Kafka.
        """
        again_now = False
        while True:
            if not again_now:
                await asyncio.sleep(interval_s)
            again_now = False
            driver, metadata_log = self.driver, self.log
            if driver is None or metadata_log is None or not driver.dual_write:
                continue
            records, more = self.replication.maybe_balance_partition_leaders(metadata_log.image)
            if not records:
                continue
            log.info("event=preferred_leader_balance elections=%d more=%s", len(records), more)
            committed = await self._commit_offset(records, "preferred leader balancing")
            again_now = more and committed is not None

    def next_expiry_s(self) -> float | None:
        """Seconds until the oldest unfenced session expires (None: no broker is unfenced)."""
        at = self.cluster.heartbeats.next_check_time_ns()
        return None if at == MAX_OFFSET else (at - self.clock()) / 1e9

    # ------------------------------------------------------------------ appending

    async def _commit(self, records: list[RecordAndVersion], what: str) -> ErrorCode:
        last = await self._commit_offset(records, what)
        if last is None:
            fenced = self.driver is None or self.driver.fenced_reason is not None
            return ErrorCode.not_controller if fenced else ErrorCode.unknown_server_error
        return ErrorCode.none

    async def _commit_offset(self, records: list[RecordAndVersion], what: str) -> int | None:
        """Append `records` (dual-written in DUAL_WRITE) and replay them; their last offset, None: failed.

        Like QuorumController's non-atomic appends, more than `MAX_RECORDS_PER_APPEND` records go in chunks
        of that many, each its own batch (and dual write): fencing a broker of a 200,000-partition cluster
        makes ~200,000 PartitionChangeRecords, more than one batch may hold.
        """
        chunks = [records[i : i + MAX_RECORDS_PER_APPEND] for i in range(0, len(records), MAX_RECORDS_PER_APPEND)]
        # Every chunk is appended at once, in order (each commit appends before its first suspension), and
        # their dual writes follow in log order; awaiting each before appending the next would serialize
        # fsync and ZooKeeper round trips that the pipeline overlaps.
        commits = [asyncio.ensure_future(self._commit_chunk(chunk, what)) for chunk in chunks or [records]]
        lasts = await asyncio.gather(*commits)
        return None if any(last is None for last in lasts) else lasts[-1]

    async def _commit_chunk(self, records: list[RecordAndVersion], what: str) -> int | None:
        driver, metadata_log = self.driver, self.log
        assert driver is not None and metadata_log is not None
        try:
            if driver.dual_write:
                last = await self.pipeline.commit(records)
            else:
                appended = metadata_log.append(records)
                await asyncio.wrap_future(appended.durable)
                last = appended.last_offset
        except FencedOut as exc:
            log.warning("%s not committed: %s", what, exc)
            return None
        except Exception:
            # Kafka's controller renounces leadership here: its in-memory broker state ran ahead of the log.
            log.exception("%s: committing its records failed", what)
            return None
        base = last - len(records) + 1
        for i, (record, _version) in enumerate(records):
            self.cluster.replay(record, base + i)
        self.on_change()
        return int(last)
