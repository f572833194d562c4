"""The brokers' requests and sessions, wired to the log: BrokerRegistration, BrokerHeartbeat, session expiry.

Kafka's counterparts: ControllerApis.handleBrokerRegistration / handleBrokerHeartBeat and QuorumController's
registerBroker, processBrokerHeartbeat, maybeFenceStaleBroker, balancing and electUnclean events, over the
pure `bridge.brokers`. Each is one write event of the pipeline: computed from the current image and
appended in the same step, so no other change runs in between (partition state znodes follow elections
once this controller writes ZooKeeper). A heartbeat that changes nothing is answered at once, never behind
a pending append or ZooKeeper write (KAFKA-15441).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType
from kio.static.primitive import i32, i64

from bridge.api import ControllerResult, DriverState, HandlerContext, RecordAndVersion
from bridge.brokers.cluster import (
    BROKER_HEARTBEAT,
    BROKER_REGISTRATION,
    UNREGISTER_BROKER,
    ClusterControl,
    ControllerSettings,
    RegistrationRequest,
    RegistrationResult,
)
from bridge.brokers.cluster import SUPPORTED as CLUSTER_SUPPORTED
from bridge.brokers.heartbeats import MAX_OFFSET, BrokerControlState, HeartbeatRequest
from bridge.brokers.replication import AssignmentResult, ReplicationControl
from bridge.driver import FencedOut, MigrationDriver
from bridge.kafka.protocol import response_class
from bridge.pipeline import Change, ControllerFailed, DualWritePipeline
from bridge.raft.metadata_log import MetadataLog
from migrate.errors import Zk2KraftError, error_text
from migrate.kraft.image import MetadataImage
from migrate.kraft.migration_state import ZkMigrationState

log = logging.getLogger(__name__)

T = TypeVar("T")

ASSIGN_REPLICAS_TO_DIRS = 73
SUPPORTED = {**CLUSTER_SUPPORTED, ASSIGN_REPLICAS_TO_DIRS: (0, 0)}
"""The versions Kafka 3.9's controller accepts of the brokers' own requests (kio also knows BrokerHeartbeat v2)."""
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
        # Every batch the controller appends, in the same step: the offsets of registrations (Kafka replays
        # each record into ClusterControlManager as it is appended).
        pipeline.on_appended.append(self._replay)

    def activate(self, metadata_log: MetadataLog, driver: MigrationDriver) -> None:
        """ClusterControlManager.activate for a new leadership over `metadata_log`."""
        self.log, self.driver = metadata_log, driver
        self.cluster.activate(metadata_log.image)

    def _replay(self, records: list[RecordAndVersion], base_offset: int) -> None:
        replay = self.cluster.replay
        for i, (record, _version) in enumerate(records):
            replay(record, base_offset + i)

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
            and self.pipeline.failed is None
        )

    async def register(self, body: Any, version: int) -> Any:
        """BrokerRegistration: Kafka's checks, then the RegisterBrokerRecord, answered once durable."""
        response = response_class(BROKER_REGISTRATION, version)

        def answer(code: ErrorCode, epoch: int = -1) -> Any:
            return response(throttle_time=NO_THROTTLE, error_code=code, broker_epoch=i64(epoch))

        if not self._accepting():
            return answer(ErrorCode.not_controller)
        request = RegistrationRequest.of(body)

        def generate(image: MetadataImage) -> tuple[RegistrationResult, Change]:
            assert self.log is not None
            # The new epoch is the offset the record is appended at, in this same step.
            result = self.cluster.register_broker(image, request, self.log.end_offset)
            return result, self._change(result.records if result.error is None else [])

        outcome = await self._event(generate, f"registration of broker {request.broker_id}")
        if isinstance(outcome, ErrorCode):
            return answer(outcome)
        result = outcome[0]
        if result.error is not None:
            return answer(result.error.code)
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
        request = HeartbeatRequest.of(body)
        offline = [d for d in getattr(body, "offline_log_dirs", ()) if d is not None]

        def generate(image: MetadataImage) -> tuple[Any, Change]:
            driver = self.driver
            assert driver is not None
            if image.features.zk_migration_state == ZkMigrationState.MIGRATION and not driver.accepts_writes:
                # Migrated, and ZooKeeper not held yet (claiming it after a start): a state change would
                # elect leaders nobody can write to ZooKeeper. Keep the session alive; the change comes next time.
                return self._session_kept(image, request, answer), self._change([])
            result = self.replication.process_broker_heartbeat(image, request, offline)
            if result.error is not None:
                return answer(result.error.code), self._change([])
            reply = result.reply
            assert reply is not None
            flags = answer(
                ErrorCode.none, is_caught_up=reply.is_caught_up, is_fenced=reply.is_fenced,
                should_shut_down=reply.should_shut_down,
            )  # fmt: skip
            after: Callable[[int], None] | None = None
            if result.in_controlled_shutdown:  # processBatchEndOffset, also at the highest pending offset

                def after(last: int) -> None:
                    self.cluster.heartbeats.maybe_update_controlled_shutdown_offset(request.broker_id, last)

            return flags, self._change(result.records, after)

        assert self.log is not None
        image = self.log.image
        if not self._changes_state(image, request, offline):
            # Nothing to append: answered without waiting for held appends or a ZooKeeper write (KAFKA-15441),
            # once what it read is committed (Kafka defers it to the highest pending offset).
            value, change = generate(image)
            if not change.records:
                try:
                    self.pipeline.appended_nothing(change)
                    await self.pipeline.committed()
                except ControllerFailed:
                    return answer(ErrorCode.not_controller)
                return value
        else:
            # The session stays alive while the change waits for its turn (processExpiredBrokerHeartbeat).
            self.replication.process_expired_broker_heartbeat(image, request)
        outcome = await self._event(generate, f"heartbeat of broker {request.broker_id}")
        return answer(outcome) if isinstance(outcome, ErrorCode) else outcome[0]

    def _changes_state(self, image: MetadataImage, request: HeartbeatRequest, offline: list[Any]) -> bool:
        """Whether this heartbeat would append records against `image` (reads only)."""
        broker_id = request.broker_id
        register_offset = self.cluster.register_broker_record_offset(broker_id)
        if register_offset is None or self.cluster.check_broker_epoch(image, broker_id, request.broker_epoch):
            return False  # answered with its error
        current, following = self.cluster.heartbeats.calculate_next_state(
            request, register_offset, lambda: self.replication.has_leaderships(image, broker_id), quiet=True
        )
        if current is not following:
            return True
        broker = image.cluster.brokers[broker_id]
        return image.metadata_version.is_directory_assignment_supported() and any(
            d in offline for d in broker.log_dirs
        )

    def _session_kept(self, image: MetadataImage, request: HeartbeatRequest, answer: Callable[..., Any]) -> Any:
        """processExpiredBrokerHeartbeat's effect and the broker's state as it stands (no records)."""
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

    async def unregister(self, body: Any, version: int) -> Any:
        """UnregisterBroker (`kafka-cluster.sh unregister`): the broker leaves every ISR and leadership, then its
        registration goes (ReplicationControlManager.unregisterBroker; RUNS_IN_PREMIGRATION in Kafka)."""
        response = response_class(UNREGISTER_BROKER, version)

        def answer(code: ErrorCode) -> Any:
            return response(throttle_time=NO_THROTTLE, error_code=code, error_message=None)

        if not self._accepting():
            return answer(ErrorCode.not_controller)
        broker_id = int(body.broker_id)

        def generate(image: MetadataImage) -> tuple[ErrorCode, Change]:
            records, error = self.replication.unregister_broker(image, broker_id)
            if error is not None:
                log.info("UnregisterBroker of broker %d refused: %s", broker_id, error.message)
                return error.code, self._change([])
            return ErrorCode.none, self._change(records)

        outcome = await self._event(generate, f"unregistration of broker {broker_id}")
        code = outcome if isinstance(outcome, ErrorCode) else outcome[0]
        if code == ErrorCode.none:
            log.info("event=broker_unregistered broker_id=%d", broker_id)
        return answer(code)

    async def assign_replicas_to_dirs(self, body: Any, version: int) -> Any:
        """AssignReplicasToDirs (KRaft brokers placing replicas, e.g. migrated ones that carry no directory)."""
        response = response_class(ASSIGN_REPLICAS_TO_DIRS, version)
        module = load_payload_module(ASSIGN_REPLICAS_TO_DIRS, version, EntityType.response)

        def answer(code: ErrorCode, directories: tuple[Any, ...] = ()) -> Any:
            return response(throttle_time=NO_THROTTLE, error_code=code, directories=directories)

        # Not RUNS_IN_PREMIGRATION in Kafka; its records change partitions, which ZooKeeper must follow.
        if not self._accepting() or self.driver is None or not self.driver.accepts_writes:
            return answer(ErrorCode.not_controller)
        broker_id = int(body.broker_id)
        requested = [
            (d.id_, [(t.topic_id, [int(p.partition_index) for p in t.partitions]) for t in d.topics])
            for d in body.directories
        ]

        def generate(image: MetadataImage) -> tuple[AssignmentResult, Change]:
            result = self.replication.handle_assign_replicas_to_dirs(
                image, broker_id, int(body.broker_epoch), requested
            )
            return result, self._change(result.records if result.error is None else [])

        outcome = await self._event(generate, f"directory assignments of broker {broker_id}")
        if isinstance(outcome, ErrorCode):
            return answer(outcome)
        result = outcome[0]
        if result.error is not None:
            return answer(result.error.code)
        if result.records:
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

    # ------------------------------------------------------------------ timers

    async def expire_sessions(self) -> None:
        """The maybeFenceStaleBroker timer: fence one expired broker per event while this controller takes changes."""
        while True:
            wait_ns = self.cluster.heartbeats.next_check_time_ns() - self.clock()
            await asyncio.sleep(min(max(wait_ns / 1e9, 0.0), EXPIRY_CHECK_MAX_S))
            while self._takes_changes():
                fenced = await self._event(
                    lambda image: (None, self._change(self.replication.maybe_fence_one_stale_broker(image))),
                    "session expiry",
                )
                if isinstance(fenced, ErrorCode) or fenced[1] is None:
                    break

    async def balance_leaders(self, interval_s: float) -> None:
        """QuorumController's MAYBE_BALANCE_PARTITION_LEADERS event (auto.leader.rebalance.enable).

        Every `interval_s` (leader.imbalance.check.interval.seconds), a preferred election for each partition
        not led by its first replica, at most MAX_ELECTIONS_PER_IMBALANCE at a time; a pass that stopped at
        that limit is followed by the next one at once, as in Kafka.
        """
        await self._periodic(
            interval_s, self.replication.maybe_balance_partition_leaders, "preferred_leader_balance"
        )

    async def elect_unclean_leaders(self, interval_s: float) -> None:
        """QuorumController's electUnclean periodic task (unclean.leader.election.interval.ms): an unclean
        election for each leaderless partition of a topic that allows one, at most MAX_ELECTIONS_PER_IMBALANCE
        at a time, again at once after a pass that stopped at that limit."""
        await self._periodic(interval_s, self.replication.maybe_elect_unclean_leaders, "unclean_leader_election")

    async def _periodic(
        self,
        interval_s: float,
        elect: Callable[[MetadataImage], tuple[list[RecordAndVersion], bool]],
        event: str,
    ) -> None:
        again_now = False
        while True:
            if not again_now:
                await asyncio.sleep(interval_s)
            again_now = False
            if not self._takes_changes():
                continue

            def generate(image: MetadataImage) -> tuple[bool, Change]:
                records, more = elect(image)
                if records:
                    log.info("event=%s elections=%d more=%s", event, len(records), more)
                return more, self._change(records)

            outcome = await self._event(generate, event.replace("_", " "))
            again_now = not isinstance(outcome, ErrorCode) and outcome[0]

    def next_expiry_s(self) -> float | None:
        """Seconds until the oldest unfenced session expires (None: no broker is unfenced)."""
        at = self.cluster.heartbeats.next_check_time_ns()
        return None if at == MAX_OFFSET else (at - self.clock()) / 1e9

    # ------------------------------------------------------------------ write events

    def _takes_changes(self) -> bool:
        driver = self.driver
        return self.log is not None and driver is not None and driver.accepts_writes

    def _change(self, records: list[RecordAndVersion], after: Callable[[int], None] | None = None) -> Change:
        """A lifecycle change: split into batches like QuorumController's non-atomic appends (fencing a broker
        of a 200,000-partition cluster makes ~200,000 PartitionChangeRecords, more than one batch holds);
        `after(last_offset)` and the status counts follow the append in the same step."""

        def appended(last: int) -> None:
            if after is not None:
                after(last)
            if records:
                self.on_change()

        return Change(records, atomic=False, on_appended=appended if records or after is not None else None)

    async def _event(
        self, generate: Callable[[MetadataImage], tuple[T, Change]], what: str
    ) -> tuple[T, int | None] | ErrorCode:
        """Run one write event: its value and last offset (None: nothing appended), or the error to answer."""
        try:
            return await self.pipeline.write(generate)
        except (FencedOut, ControllerFailed) as exc:
            log.warning("%s not committed: %s", what, exc)
            return ErrorCode.not_controller
        except Exception as exc:
            # Its generation may have moved the in-memory broker state: renounce, as Kafka does on a
            # non-API exception in a write event.
            log.exception("%s: committing its records failed", what)
            self.pipeline.renounce(f"{what} failed unexpectedly: {error_text(exc)}")
            return ErrorCode.not_controller
