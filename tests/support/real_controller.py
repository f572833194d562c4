"""A simulated Kafka 3.9 controller taking over a stopped bridge's metadata directory (handoff.md §2.1-2.5, §4-5).

Two forms, both kept small:
- `take_over`: a cold take-over by one controller without Raft exchange. It reads the directory (meta.properties,
  quorum-state, the log), appends the LeaderChangeMessage a new leader writes first at one epoch above anything
  the directory holds, applies ActivationRecordsGenerator's rules on a non-empty log, then KRaftMigrationDriver's:
  `/migration` read (never a re-migration), the claim of `/controller` and `/controller_epoch` in one transaction
  checked on `/controller_epoch`'s version, the unconditional `/migration` write, and the SYNC_KRAFT_TO_ZK wait
  compared epoch first. With migration disabled on a MIGRATION log it appends ZkMigrationStateRecord(POST_MIGRATION)
  and touches no znode. No broker RPCs; ZooKeeper is not reconciled, only compared.
- `RealController`: a running voter of a mixed quorum, for the rolling and cold procedures. Its controller layer
  (activation, migration driver, broker heartbeats and registrations, UpdateMetadata to ZooKeeper-mode brokers) is
  written here from handoff.md; see the class for what it does and leaves out.

Departure: `RealController`'s Raft voter reuses the project's Raft wing (bridge/raft: RaftClient, RaftNode, ReplicaLog),
whose rules tests/support/raft_sim.py holds to Kafka's. The controller layer is independent of bridge/controller and
bridge/driver; every byte goes through kio and the project's Kafka codecs.

    python -m tests.support.real_controller --metadata-dir DIR --zk HOST:PORT/chroot [--node-id N] [--no-migration]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kio.schema.broker_heartbeat.v1 import response as heartbeat_v1_response
from kio.schema.broker_registration.v4 import response as registration_v4_response
from kio.schema.describe_cluster.v1 import response as describe_cluster_v1_response
from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

from bridge.kafka.client import KafkaConnection
from bridge.kafka.legacy_messages import (
    UpdateMetadataRequestV8,
    UpdateMetadataRequestV8UpdateMetadataBroker,
    UpdateMetadataRequestV8UpdateMetadataEndpoint,
    UpdateMetadataRequestV8UpdateMetadataPartitionState,
    UpdateMetadataRequestV8UpdateMetadataTopicState,
)
from bridge.kafka.listener import KafkaListener, RequestContext
from bridge.raft import codec
from bridge.raft import messages as m
from bridge.raft.client import RaftClient, RaftConfig
from bridge.raft.quorum import FileElectionStore
from bridge.raft.replica_log import ReplicaLog
from bridge.raft.transport import RaftNode, monotonic_ms
from migrate.errors import Zk2KraftError
from migrate.kraft import metadata_version as mvs
from migrate.kraft import records as rec
from migrate.kraft.activation import leader_change_message
from migrate.kraft.logdir import QUORUM_STATE, list_segments, parse_quorum_state, read_meta_properties
from migrate.kraft.migration_state import ZkMigrationState
from migrate.kraft.reader import METADATA_PARTITION_DIR, load_image
from migrate.kraft.segment_walk import walk_segment
from migrate.zk.live import ZkConnectOptions
from migrate.zk.model import ControllerRegistration, MigrationState
from migrate.zk.znodes.controller import (
    decode_controller,
    decode_migration,
    encode_controller,
    encode_migration,
)
from tests.support.audit import append_segment


@dataclass
class TakeOver:
    """What the simulated controller did; `state` is the driver state it ended in (or POST_MIGRATION)."""

    node_id: int
    epoch: int
    state: str
    reason: str = ""
    migration_before: MigrationState | None = None
    migration_after: MigrationState | None = None
    zk_controller_epoch: int | None = None
    remigrated: bool = False
    appended: list[str] = field(default_factory=list)

    def line(self) -> str:
        parts = [f"node={self.node_id}", f"raft_epoch={self.epoch}", f"state={self.state}"]
        if self.zk_controller_epoch is not None:
            parts.append(f"zk_controller_epoch={self.zk_controller_epoch}")
        if self.migration_after is not None:
            m = self.migration_after
            parts.append(f"migration=({m.kraft_metadata_offset},{m.kraft_metadata_epoch})")
        parts.append(f"remigrated={str(self.remigrated).lower()}")
        if self.appended:
            parts.append("appended=" + ",".join(self.appended))
        if self.reason:
            parts.append(f"reason={self.reason!r}")
        return "simulated Kafka 3.9 controller: " + " ".join(parts)


def _last_batch(pdir: Path) -> tuple[int, int]:
    """(last offset, its batch's epoch) of the log, or (-1, -1) without a batch (KafkaMetadataLog's end)."""
    for segment in reversed(list_segments(pdir)):
        batches = walk_segment(segment.path, segment.base_offset).batches
        if batches:
            return batches[-1].last_offset, batches[-1].leader_epoch
    return -1, -1


def take_over(
    metadata_dir: Path, zk: KazooClient, *, node_id: int | None = None, migration: bool = True
) -> TakeOver:
    """Lead on `metadata_dir` as a Kafka 3.9 controller would, with `zookeeper.metadata.migration.enable=migration`."""
    meta = read_meta_properties(metadata_dir / "meta.properties")
    node = node_id if node_id is not None else meta.node_id
    if node is None or meta.version != 1:
        raise AssertionError(
            f"{metadata_dir}/meta.properties: not a KRaft controller's (version {meta.version})"
        )
    pdir = metadata_dir / METADATA_PARTITION_DIR
    state_path = pdir / "quorum-state"
    quorum = parse_quorum_state(state_path.read_bytes(), str(state_path)) if state_path.exists() else None
    quorum_epoch = quorum.leader_epoch if quorum is not None else -1
    image, report = load_image(pdir)
    last_offset, last_epoch = _last_batch(pdir)
    if report.snapshot_id is not None:
        last_epoch = max(last_epoch, report.snapshot_id.epoch)
        last_offset = max(last_offset, report.snapshot_id.end_offset - 1)
    epoch = max(quorum_epoch, last_epoch) + 1
    result = TakeOver(node_id=node, epoch=epoch, state="INACTIVE")
    # KafkaRaftClient.onBecomeLeader: the epoch's first entry is a LeaderChangeMessage.
    voters = list(quorum.current_voters) if quorum is not None and quorum.current_voters else [node]
    append_segment(metadata_dir, last_offset + 1, [[(leader_change_message(node, voters), 0)]], epoch=epoch)
    next_offset = last_offset + 2

    # ActivationRecordsGenerator.recordsForNonEmptyLog
    state = image.features.zk_migration_state
    if migration and image.metadata_version < mvs.IBP_3_4_IV0:
        result.reason = f"Should not have ZK migrations enabled on a cluster running metadata.version {image.metadata_version}"
        return result
    if migration and state == ZkMigrationState.NONE:
        result.reason = "Should not have ZK migrations enabled on a cluster that was created in KRaft mode"
        return result
    abort = report.pending_transaction_offset is not None
    if not migration:
        if state == ZkMigrationState.MIGRATION:
            batch: list[tuple[object, int]] = []
            if abort:
                batch.append((rec.AbortTransactionRecord(reason="Controller failover"), 0))
                result.appended.append("AbortTransactionRecord")
            batch.append(
                (rec.ZkMigrationStateRecord(zk_migration_state=ZkMigrationState.POST_MIGRATION.value), 0)
            )
            result.appended.append("ZkMigrationStateRecord(POST_MIGRATION)")
            append_segment(metadata_dir, next_offset, [batch], epoch=epoch)
            result.state = "POST_MIGRATION"
        return result
    if abort:
        append_segment(metadata_dir, next_offset, [[(rec.AbortTransactionRecord(reason="Controller failover"), 0)]],
                       epoch=epoch)  # fmt: skip
        result.appended.append("AbortTransactionRecord")
    if state == ZkMigrationState.POST_MIGRATION:
        result.reason = (
            "KRaft controller indicates a completed migration, but the migration driver is somehow active."
        )
        return result

    # KRaftMigrationDriver: RecoverMigrationStateFromZKEvent, then KRaftLeaderEvent
    data, stat = zk.get("/migration")
    before = decode_migration("/migration", data, zk_version=stat.version)
    result.migration_before = before
    if before.kraft_metadata_offset <= 0:
        if state == ZkMigrationState.MIGRATION:
            result.state = "INACTIVE"
            result.reason = "KRaft controller indicates an active migration, but the ZK state does not."
        else:  # PRE_MIGRATION: the driver would migrate ZooKeeper's metadata itself
            result.remigrated = True
            result.state = "ZK_MIGRATION"
        return result
    result.state = "WAIT_FOR_CONTROLLER_QUORUM"

    # BECOME_CONTROLLER: KafkaZkClient.tryRegisterKRaftControllerAsActiveController
    claimed = claim_controller(zk, node, epoch)
    if isinstance(claimed, str):
        result.state = "BECOME_CONTROLLER"
        result.reason = claimed
        return result
    zk_epoch = claimed[0]
    result.zk_controller_epoch = zk_epoch
    after = MigrationState(
        kraft_controller_id=node, kraft_controller_epoch=epoch, kraft_metadata_offset=before.kraft_metadata_offset,
        kraft_metadata_epoch=before.kraft_metadata_epoch,
    )  # fmt: skip
    zk.set("/migration", encode_migration(after), version=-1)
    data, stat = zk.get("/migration")
    result.migration_after = decode_migration("/migration", data, zk_version=stat.version)

    # SYNC_KRAFT_TO_ZK: the image must reach /migration's (offset, epoch), compared epoch first
    if (last_epoch, last_offset) < (before.kraft_metadata_epoch, before.kraft_metadata_offset):
        result.state = "SYNC_KRAFT_TO_ZK"
        result.reason = (
            f"the log ends at ({last_offset}, epoch {last_epoch}), before /migration's "
            f"({before.kraft_metadata_offset}, epoch {before.kraft_metadata_epoch})"
        )
        return result
    result.state = "DUAL_WRITE"
    return result


# ---------------------------------------------------------------------------------------------- a running voter

LISTENER_NAME = "CONTROLLER"
RAFT_KEYS = (
    codec.FETCH_KEY, codec.VOTE_KEY, codec.BEGIN_QUORUM_EPOCH_KEY, codec.END_QUORUM_EPOCH_KEY,
    codec.DESCRIBE_QUORUM_KEY, codec.FETCH_SNAPSHOT_KEY, codec.ADD_RAFT_VOTER_KEY, codec.REMOVE_RAFT_VOTER_KEY,
    codec.UPDATE_RAFT_VOTER_KEY,
)  # fmt: skip
"""What KafkaRaftClient answers on every voter, leader or not."""
DESCRIBE_CLUSTER, BROKER_REGISTRATION, BROKER_HEARTBEAT = 60, 62, 63
SESSION_TIMEOUT_MS = 9000
"""broker.session.timeout.ms's default: a broker silent this long is fenced (ClusterControlManager)."""
NO_OP_INTERVAL_S = 0.5
"""metadata.max.idle.interval.ms's default: the active controller appends a NoOpRecord this often."""
BROKER_HEARTBEAT_VERSIONS = (1, 1)
BROKER_REGISTRATION_VERSIONS = (4, 4)
DESCRIBE_CLUSTER_VERSIONS = (1, 1)
FULL = 2
"""AbstractControlRequest.Type.FULL: the UpdateMetadata a new KRaft controller sends ZooKeeper-mode brokers."""
FENCE, UNFENCE = 1, -1
"""BrokerRegistrationFencingChange values of BrokerRegistrationChangeRecord.fenced."""


def parse_voters(text: str) -> dict[int, tuple[str, int]]:
    """`controller.quorum.voters` (id@host:port,...) as a map of node id to address."""
    voters = {}
    for entry in text.split(","):
        node, address = entry.split("@")
        host, port = address.rsplit(":", 1)
        voters[int(node)] = (host, int(port))
    return voters


@dataclass
class StartupRead:
    """What Kafka's start-up made of the directory (KafkaRaftClient + QuorumState.initialize)."""

    cluster_id: str
    node_id: int
    quorum_state: str
    """The state QuorumState.initialize resumes in (Resigned when quorum-state names this node the leader)."""
    log_end_offset: int
    snapshot: str | None


@dataclass
class Leadership:
    """One epoch this controller led: what its activation and its migration driver did."""

    epoch: int
    appended: list[str] = field(default_factory=list)
    driver_state: str = "INACTIVE"
    reason: str = ""
    migration_before: MigrationState | None = None
    zk_controller_epoch: int | None = None
    update_metadata: dict[int, tuple[int, int]] = field(default_factory=dict)
    """Per ZooKeeper-mode broker: (controller epoch sent, error code answered) of the full UpdateMetadata."""
    migration_offsets: list[int] = field(default_factory=list)
    """Every kraft_metadata_offset this controller wrote to /migration, in order."""
    remigrated: bool = False


class RealController:
    """A Kafka 3.9 controller with `zookeeper.metadata.migration.enable=true` on a bridge's directory, as a voter.

    Kafka's counterparts: QuorumController (activation through ActivationRecordsGenerator, NoOpRecords while idle,
    ClusterControlManager's heartbeats, registrations and session fencing), KRaftMigrationDriver (from `/migration`
    to DUAL_WRITE, writing `/migration` forward as the log commits) and ControllerRegistrationManager (one
    RegisterControllerRecord). Left out, for size: dual-write of the metadata itself to ZooKeeper (only `/migration`
    moves), controlled shutdown (answered at once), partition leadership and every admin API (a real controller
    would answer them; the procedures' tests send their admin traffic to the bridges).
    """

    def __init__(
        self,
        metadata_dir: Path,
        *,
        voters: dict[int, tuple[str, int]],
        zk_connect: str,
        node_id: int | None = None,
        migration: bool = True,
        session_timeout_ms: int = SESSION_TIMEOUT_MS,
    ) -> None:
        self.metadata_dir = metadata_dir
        self.voters = voters
        self.zk_connect = zk_connect
        self.migration = migration
        self.session_timeout_ms = session_timeout_ms
        meta = read_meta_properties(metadata_dir / "meta.properties")
        if meta.version != 1 or meta.node_id is None or meta.cluster_id is None:
            raise AssertionError(f"{metadata_dir}/meta.properties: not a KRaft controller's ({meta})")
        if node_id is not None and node_id != meta.node_id:
            raise AssertionError(f"{metadata_dir}/meta.properties: node.id {meta.node_id}, not {node_id}")
        self.node_id = meta.node_id
        self.cluster_id = meta.cluster_id
        self.incarnation = uuid.uuid4()
        self.startup: StartupRead | None = None
        self.leaderships: list[Leadership] = []
        self.fenced: list[int] = []
        """Brokers this controller fenced (their session expired)."""
        self.heartbeats_answered = 0
        self._sessions: dict[int, float] = {}
        self._active_epoch = -1
        self._replica: ReplicaLog | None = None
        self._core: RaftClient | None = None
        self._node: RaftNode | None = None
        self._listener: KafkaListener | None = None
        self._zk: KazooClient | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"real-ctl-{self.node_id}", daemon=True
        )
        self._tasks: list[asyncio.Task[None]] = []
        self._stopped = False

    # ------------------------------------------------------------------ control (test thread)

    def start(self) -> RealController:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._open(), self._loop).result(60)
        return self

    def stop(self) -> None:
        """A clean stop: a leader resigns (EndQuorumEpoch), the log is closed with its snapshot."""
        if self._stopped or not self._thread.is_alive():
            return
        self._stopped = True
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(60)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    @property
    def role(self) -> str:
        return "stopped" if self._core is None or self._stopped else self._core.role.value

    @property
    def epoch(self) -> int:
        return -1 if self._core is None else self._core.epoch

    @property
    def leader_id(self) -> int:
        return -1 if self._core is None else self._core.leader_id

    @property
    def end_offset(self) -> int:
        return -1 if self._replica is None else self._replica.end_offset()

    @property
    def leading(self) -> Leadership | None:
        """The epoch this controller leads now, once activated."""
        current = self.leaderships[-1] if self.leaderships else None
        if (
            current is None
            or self._core is None
            or not self._core.is_leader
            or self._core.epoch != current.epoch
        ):
            return None
        return current

    # ------------------------------------------------------------------ start and stop (its loop)

    async def _open(self) -> None:
        loop = asyncio.get_running_loop()
        replica = self._replica = await loop.run_in_executor(
            None,
            lambda: ReplicaLog.open(
                self.metadata_dir, node_id=self.node_id, cluster_id=self.cluster_id, fsync=False
            ),
        )
        endpoints = {node: m.Endpoint(host, port) for node, (host, port) in self.voters.items()}
        store = FileElectionStore(
            replica.partition_dir / QUORUM_STATE, self.cluster_id, tuple(sorted(endpoints))
        )
        core = self._core = RaftClient(
            node_id=self.node_id, voters=endpoints, cluster_id=self.cluster_id, log=replica, store=store,
            rng=random.Random(), config=RaftConfig(),
        )  # fmt: skip
        node = self._node = RaftNode(core, listener_name=LISTENER_NAME)
        replica.on_flushed = lambda: _wake_from(loop, node.wake)
        replica.metadata_log.on_written = replica.on_flushed
        core.start(monotonic_ms())
        snapshot = replica.latest_snapshot_id()
        self.startup = StartupRead(
            cluster_id=self.cluster_id, node_id=self.node_id, quorum_state=core.role.value,
            log_end_offset=replica.end_offset(),
            snapshot=None if snapshot is None else f"{snapshot.offset}-{snapshot.epoch}",
        )  # fmt: skip
        zk = self._zk = ZkConnectOptions(connect=self.zk_connect).kazoo_client()
        await loop.run_in_executor(None, lambda: zk.start(timeout=30))
        handlers: dict[int, Any] = {key: self._on_raft for key in RAFT_KEYS}
        handlers.update({BROKER_HEARTBEAT: self._on_heartbeat, BROKER_REGISTRATION: self._on_registration,
                         DESCRIBE_CLUSTER: self._on_describe_cluster})  # fmt: skip
        raft_versions = codec.supported_versions()
        supported = {key: raft_versions[key] for key in RAFT_KEYS}
        supported.update({BROKER_HEARTBEAT: BROKER_HEARTBEAT_VERSIONS,
                          BROKER_REGISTRATION: BROKER_REGISTRATION_VERSIONS,
                          DESCRIBE_CLUSTER: DESCRIBE_CLUSTER_VERSIONS})  # fmt: skip
        host, port = self.voters[self.node_id]
        self._listener = KafkaListener(host, port, handlers, supported)
        await self._listener.start()
        self._tasks = [loop.create_task(node.run()), loop.create_task(self._controller_loop())]

    async def _close(self) -> None:
        loop = asyncio.get_running_loop()
        if self._node is not None:
            await self._node.stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._listener is not None:
            await self._listener.stop()
        if self._replica is not None:
            await loop.run_in_executor(None, self._replica.close)
        if self._zk is not None:
            zk = self._zk
            await loop.run_in_executor(None, lambda: (zk.stop(), zk.close()))

    # ------------------------------------------------------------------ QuorumController and the migration driver

    async def _controller_loop(self) -> None:
        core, node = self._core, self._node
        assert core is not None and node is not None
        while True:
            await node.until(core.leader_ready, timeout=0.5)
            if not core.leader_ready():
                continue
            epoch = core.epoch
            led = Leadership(epoch)
            self.leaderships.append(led)
            try:
                await self._lead(led)
            except _LostLeadership:
                pass
            except Exception as exc:  # kept for the test to read: a stuck leader would only time out
                led.driver_state, led.reason = "FAILED", f"{type(exc).__name__}: {exc}"
            self._active_epoch = -1
            await node.until(lambda: not (core.is_leader and core.epoch == epoch), timeout=None)  # noqa: B023

    async def _append(self, records: list[tuple[Any, int]], epoch: int) -> int:
        """Append as leader of `epoch` and wait for the commit (_LostLeadership when the epoch ends first)."""
        node, core = self._node, self._core
        assert node is not None and core is not None
        if not (core.is_leader and core.epoch == epoch):
            raise _LostLeadership
        last = node.append(records)
        if not await node.wait_committed(last):
            raise _LostLeadership
        return last

    def _committed(self) -> tuple[int, int]:
        """(offset, epoch) of the last committed record: what the migration driver's image has reached."""
        core, replica = self._core, self._replica
        assert core is not None and replica is not None
        offset = core.high_watermark - 1
        epoch = -1
        for entry_epoch, start in replica.epoch_starts():
            if start <= offset:
                epoch = entry_epoch
        return offset, epoch

    async def _lead(self, led: Leadership) -> None:
        replica = self._replica
        assert replica is not None
        log = replica.metadata_log
        log.apply_up_to(log.end_offset)
        image = log.image
        state = image.features.zk_migration_state
        # ActivationRecordsGenerator.recordsForNonEmptyLog
        if self.migration and image.metadata_version < mvs.IBP_3_4_IV0:
            led.reason = f"Should not have ZK migrations enabled on metadata.version {image.metadata_version}"
            return
        if self.migration and state == ZkMigrationState.NONE:
            led.reason = "Should not have ZK migrations enabled on a cluster that was created in KRaft mode"
            return
        activation: list[tuple[Any, int]] = []
        if log.transaction_start_offset is not None:
            activation.append((rec.AbortTransactionRecord(reason="Controller failover"), 0))
        if not self.migration and state == ZkMigrationState.MIGRATION:
            activation.append(
                (rec.ZkMigrationStateRecord(zk_migration_state=ZkMigrationState.POST_MIGRATION.value), 0)
            )
        if activation:
            await self._append(activation, led.epoch)
            led.appended += [type(record).__name__ for record, _version in activation]
        # ClusterControlManager.activate: every registered broker gets a fresh session.
        now = time.monotonic()
        self._sessions = {broker: now for broker in image.cluster.brokers}
        self._active_epoch = led.epoch
        mv = image.metadata_version
        if mv.is_controller_registration_supported():  # ControllerRegistrationManager, after activation
            host, port = self.voters[self.node_id]
            registration = rec.RegisterControllerRecord(
                controller_id=self.node_id, incarnation_id=self.incarnation, zk_migration_ready=self.migration,
                end_points=[rec.RegisterControllerRecord.ControllerEndpoint(name=LISTENER_NAME, host=host, port=port)],
                features=[rec.RegisterControllerRecord.ControllerFeature(
                    name=mvs.FEATURE_NAME, min_supported_version=mvs.MINIMUM_KRAFT_VERSION.feature_level,
                    max_supported_version=mvs.LATEST_PRODUCTION.feature_level)],
            )  # fmt: skip
            await self._append([(registration, mv.register_controller_record_version())], led.epoch)
            led.appended.append("RegisterControllerRecord")
        if self.migration and state == ZkMigrationState.PRE_MIGRATION:
            # Kafka's driver would copy ZooKeeper into the log (ZK_MIGRATION); a hand-off must never get here.
            led.driver_state, led.remigrated = "ZK_MIGRATION", True
            await self._idle(led)
            return
        if not self.migration or state != ZkMigrationState.MIGRATION:
            led.driver_state = "INACTIVE" if self.migration else "DISABLED"
            await self._idle(led)
            return
        if not await self._claim_zookeeper(led):
            await self._idle(led)
            return
        await self._dual_write(led)

    async def _claim_zookeeper(self, led: Leadership) -> bool:
        """KRaftMigrationDriver from RecoverMigrationStateFromZKEvent to SYNC_KRAFT_TO_ZK; False: it stays put."""
        loop = asyncio.get_running_loop()
        zk = self._zk
        assert zk is not None
        data, stat = await loop.run_in_executor(None, lambda: zk.get("/migration"))
        before = decode_migration("/migration", data, zk_version=stat.version)
        led.migration_before = before
        if before.kraft_metadata_offset <= 0:
            led.reason = "KRaft controller indicates an active migration, but the ZK state does not."
            return False
        led.driver_state = "BECOME_CONTROLLER"
        claimed = await loop.run_in_executor(None, lambda: claim_controller(zk, self.node_id, led.epoch))
        if isinstance(claimed, str):
            led.reason = claimed
            return False
        led.zk_controller_epoch, self._epoch_version = claimed
        after = MigrationState(
            kraft_controller_id=self.node_id, kraft_controller_epoch=led.epoch,
            kraft_metadata_offset=before.kraft_metadata_offset, kraft_metadata_epoch=before.kraft_metadata_epoch,
        )  # fmt: skip
        written = await loop.run_in_executor(
            None, lambda: zk.set("/migration", encode_migration(after), version=-1)
        )
        self._migration_version = written.version
        led.migration_offsets.append(before.kraft_metadata_offset)
        led.driver_state = "SYNC_KRAFT_TO_ZK"
        target = (before.kraft_metadata_epoch, before.kraft_metadata_offset)
        node = self._node
        assert node is not None

        def reached() -> bool:
            offset, epoch = self._committed()
            return (epoch, offset) >= target

        while not reached():
            await node.until(reached, timeout=0.5)
            if self.leading is None:
                raise _LostLeadership
        await self._send_full_update_metadata(led)
        led.driver_state = "DUAL_WRITE"
        return True

    async def _send_full_update_metadata(self, led: Leadership) -> None:
        """KRaftMigrationDriver's SYNC_KRAFT_TO_ZK: a FULL UpdateMetadata to every migrating ZooKeeper broker."""
        replica = self._replica
        assert replica is not None and led.zk_controller_epoch is not None
        image = replica.metadata_log.image
        zk_epoch = led.zk_controller_epoch
        live = tuple(
            UpdateMetadataRequestV8UpdateMetadataBroker(
                id=BrokerId(b.broker_id),
                endpoints=tuple(
                    UpdateMetadataRequestV8UpdateMetadataEndpoint(
                        port=i32(e.port),
                        host=e.host,
                        listener=e.name,
                        security_protocol=i16(e.security_protocol),
                    )
                    for e in b.endpoints
                ),
                rack=b.rack,
            )
            for b in image.cluster.brokers.values()
            if not b.fenced
        )
        topics = tuple(
            UpdateMetadataRequestV8UpdateMetadataTopicState(
                topic_name=TopicName(topic.name),
                topic_id=topic.topic_id,
                partition_states=tuple(
                    UpdateMetadataRequestV8UpdateMetadataPartitionState(
                        partition_index=i32(pid),
                        controller_epoch=i32(zk_epoch),
                        leader=BrokerId(p.leader),
                        leader_epoch=i32(p.leader_epoch),
                        isr=tuple(BrokerId(r) for r in p.isr),
                        zk_version=i32(p.partition_epoch),
                        replicas=tuple(BrokerId(r) for r in p.replicas),
                        offline_replicas=(),
                    )
                    for pid, p in sorted(topic.partitions.items())
                ),
            )
            for topic in image.topics_by_id.values()
        )

        async def send(broker: Any) -> None:
            request = UpdateMetadataRequestV8(
                controller_id=BrokerId(self.node_id), is_kraft_controller=True, type=i8(FULL),
                controller_epoch=i32(zk_epoch), broker_epoch=i64(broker.epoch), topic_states=topics,
                live_brokers=live,
            )  # fmt: skip
            endpoint = broker.endpoints[0]
            error = -1
            with contextlib.suppress(OSError, Zk2KraftError, TimeoutError):
                connection = await KafkaConnection.open(endpoint.host, endpoint.port, timeout=5)
                try:
                    error = int((await connection.send(request, timeout=5)).error_code)
                finally:
                    await connection.close()
            led.update_metadata[broker.broker_id] = (zk_epoch, error)

        zk_brokers = [b for b in image.cluster.brokers.values() if b.is_migrating_zk_broker and not b.fenced]
        await asyncio.gather(*(send(b) for b in zk_brokers))

    async def _dual_write(self, led: Leadership) -> None:
        """DUAL_WRITE: `/migration` follows the committed log, checked on `/controller_epoch`'s version."""
        loop = asyncio.get_running_loop()
        zk = self._zk
        assert zk is not None
        written = led.migration_offsets[-1]
        while self.leading is not None:
            await self._idle_step(led)
            offset, epoch = self._committed()
            if offset <= written:
                continue
            state = MigrationState(
                kraft_controller_id=self.node_id, kraft_controller_epoch=led.epoch,
                kraft_metadata_offset=offset, kraft_metadata_epoch=epoch,
            )  # fmt: skip

            def write(state: MigrationState = state) -> list[Any]:
                tx = zk.transaction()
                tx.check("/controller_epoch", self._epoch_version)
                tx.set_data("/migration", encode_migration(state), version=self._migration_version)
                return list(tx.commit())

            outcome = await loop.run_in_executor(None, write)
            if any(isinstance(r, Exception) for r in outcome):
                led.driver_state = "FENCED"
                led.reason = f"a dual write was refused: {outcome}"
                await self._idle(led)
                return
            self._migration_version = outcome[1].version
            written = offset
            led.migration_offsets.append(offset)

    async def _idle(self, led: Leadership) -> None:
        while self.leading is not None:
            await self._idle_step(led)

    async def _idle_step(self, led: Leadership) -> None:
        """One NoOpRecord (QuorumController's idle writes), then the brokers whose session expired are fenced."""
        await asyncio.sleep(NO_OP_INTERVAL_S)
        replica = self._replica
        assert replica is not None
        if self.leading is None:
            raise _LostLeadership
        image = replica.metadata_log.image
        mv = image.metadata_version
        if mv.is_no_op_record_supported():
            await self._append([(rec.NoOpRecord(), 0)], led.epoch)
        now = time.monotonic()
        for broker, contact in sorted(self._sessions.items()):
            registration = image.cluster.brokers.get(broker)
            if registration is None or registration.fenced or now - contact < self.session_timeout_ms / 1000:
                continue
            change = rec.BrokerRegistrationChangeRecord(
                broker_id=broker, broker_epoch=registration.epoch, fenced=FENCE
            )
            await self._append([(change, mv.broker_registration_change_record_version())], led.epoch)
            self.fenced.append(broker)

    # ------------------------------------------------------------------ requests

    async def _on_raft(self, ctx: RequestContext, body: Any) -> Any:
        node, core = self._node, self._core
        assert node is not None and core is not None
        if ctx.api_key in (
            codec.ADD_RAFT_VOTER_KEY,
            codec.REMOVE_RAFT_VOTER_KEY,
            codec.UPDATE_RAFT_VOTER_KEY,
        ):
            return codec.reconfiguration_refusal(
                ctx.api_key,
                ctx.api_version,
                leader_id=core.leader_id,
                leader_epoch=core.epoch,
                voters=core.voters,
            )
        if ctx.api_key == codec.DESCRIBE_QUORUM_KEY:
            return codec.describe_quorum_response(node.describe(), ctx.api_version, listener=LISTENER_NAME)
        return await node.handle(body)

    def _active(self) -> bool:
        core = self._core
        return core is not None and core.is_leader and core.epoch == self._active_epoch

    async def _on_heartbeat(self, ctx: RequestContext, request: Any) -> Any:
        """ClusterControlManager.processBrokerHeartbeat, without controlled shutdown's leadership moves."""
        respond = heartbeat_v1_response.BrokerHeartbeatResponse
        zero = i32Timedelta.parse(timedelta(0))
        if not self._active():
            return respond(throttle_time=zero, error_code=ErrorCode.not_controller, should_shut_down=False)
        replica = self._replica
        assert replica is not None
        broker = int(request.broker_id)
        registration = replica.metadata_log.image.cluster.brokers.get(broker)
        if registration is None:
            return respond(
                throttle_time=zero, error_code=ErrorCode.broker_id_not_registered, should_shut_down=False
            )
        if registration.epoch != int(request.broker_epoch):
            return respond(
                throttle_time=zero, error_code=ErrorCode.stale_broker_epoch, should_shut_down=False
            )
        self._sessions[broker] = time.monotonic()
        caught_up = int(request.current_metadata_offset) >= registration.register_record_offset
        fenced = registration.fenced
        if fenced and caught_up and not request.want_fence:
            mv = replica.metadata_log.image.metadata_version
            change = rec.BrokerRegistrationChangeRecord(
                broker_id=broker, broker_epoch=registration.epoch, fenced=UNFENCE
            )
            try:
                await self._append(
                    [(change, mv.broker_registration_change_record_version())], self._active_epoch
                )
            except _LostLeadership:
                return respond(
                    throttle_time=zero, error_code=ErrorCode.not_controller, should_shut_down=False
                )
            fenced = False
        self.heartbeats_answered += 1
        return respond(
            throttle_time=zero, error_code=ErrorCode.none, is_caught_up=caught_up, is_fenced=fenced,
            should_shut_down=bool(request.want_shut_down),
        )  # fmt: skip

    async def _on_registration(self, ctx: RequestContext, request: Any) -> Any:
        """ClusterControlManager.registerBroker: the broker epoch is the offset of its RegisterBrokerRecord."""
        respond = registration_v4_response.BrokerRegistrationResponse
        zero = i32Timedelta.parse(timedelta(0))
        replica = self._replica
        if not self._active() or replica is None:
            return respond(throttle_time=zero, error_code=ErrorCode.not_controller)
        if request.cluster_id != self.cluster_id:
            return respond(throttle_time=zero, error_code=ErrorCode.inconsistent_cluster_id)
        mv = replica.metadata_log.image.metadata_version
        epoch = replica.end_offset()
        record = rec.RegisterBrokerRecord(
            broker_id=int(request.broker_id), is_migrating_zk_broker=bool(request.is_migrating_zk_broker),
            incarnation_id=request.incarnation_id, broker_epoch=epoch,
            end_points=[
                rec.RegisterBrokerRecord.BrokerEndpoint(
                    name=e.name, host=e.host, port=int(e.port), security_protocol=int(e.security_protocol)
                )
                for e in request.listeners
            ],
            features=[
                rec.RegisterBrokerRecord.BrokerFeature(
                    name=f.name, min_supported_version=int(f.min_supported_version),
                    max_supported_version=int(f.max_supported_version),
                )
                for f in request.features
            ],
            rack=request.rack, fenced=True, log_dirs=list(request.log_dirs),
        )  # fmt: skip
        try:
            await self._append([(record, mv.register_broker_record_version())], self._active_epoch)
        except _LostLeadership:
            return respond(throttle_time=zero, error_code=ErrorCode.not_controller)
        self._sessions[int(request.broker_id)] = time.monotonic()
        return respond(throttle_time=zero, error_code=ErrorCode.none, broker_epoch=i64(epoch))

    async def _on_describe_cluster(self, ctx: RequestContext, request: Any) -> Any:
        """ControllerApis.handleDescribeCluster with the controllers' endpoints (what a broker's observer asks)."""
        module = describe_cluster_v1_response
        return module.DescribeClusterResponse(
            throttle_time=i32Timedelta.parse(timedelta(0)), error_code=ErrorCode.none, endpoint_type=i8(2),
            cluster_id=self.cluster_id, controller_id=BrokerId(self.leader_id),
            brokers=tuple(
                module.DescribeClusterBroker(broker_id=BrokerId(node), host=host, port=i32(port))
                for node, (host, port) in sorted(self.voters.items())
            ),
        )  # fmt: skip


class _LostLeadership(Exception):
    """The epoch this controller led ended while it acted as leader."""


def claim_controller(zk: KazooClient, node: int, epoch: int) -> tuple[int, int] | str:
    """KafkaZkClient.tryRegisterKRaftControllerAsActiveController: `/controller` (version 2 JSON naming the KRaft
    epoch) and `/controller_epoch` + 1 in one multi checked on `/controller_epoch`'s version; the claimed epoch and
    its znode version, or why it is ControllerMoved."""
    try:
        held = decode_controller("/controller", zk.get("/controller")[0])
    except NoNodeError:
        held = None
    if held is not None and held.kraft_controller_epoch is not None and held.kraft_controller_epoch >= epoch:
        return f"ControllerMovedException: /controller holds KRaft epoch {held.kraft_controller_epoch} >= {epoch}"
    epoch_data, epoch_stat = zk.get("/controller_epoch")
    zk_epoch = int(epoch_data.decode()) + 1
    registration = encode_controller(
        ControllerRegistration(
            broker_id=node, timestamp=int(time.time() * 1000), kraft_controller_epoch=epoch
        )
    )
    tx = zk.transaction()
    tx.set_data("/controller_epoch", str(zk_epoch).encode(), version=epoch_stat.version)
    if held is None:
        tx.create("/controller", registration)
    else:
        tx.set_data("/controller", registration)
    outcome = tx.commit()
    failed = [r for r in outcome if isinstance(r, Exception)]
    if failed:
        if any(isinstance(r, BadVersionError | NodeExistsError) for r in failed):
            return f"ControllerMovedException: {failed}"
        raise AssertionError(f"the claim failed: {failed}")
    return zk_epoch, outcome[0].version


def _wake_from(loop: asyncio.AbstractEventLoop, wake: Callable[[], None]) -> None:
    if not loop.is_closed():
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(wake)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--metadata-dir", type=Path, required=True)
    parser.add_argument("--zk", required=True, help="zookeeper.connect, chroot included")
    parser.add_argument("--node-id", type=int)
    parser.add_argument(
        "--no-migration", action="store_true", help="zookeeper.metadata.migration.enable unset"
    )
    args = parser.parse_args(argv)
    client = ZkConnectOptions(connect=args.zk).kazoo_client()
    client.start(timeout=30)
    try:
        done = take_over(args.metadata_dir, client, node_id=args.node_id, migration=not args.no_migration)
    finally:
        client.stop()
        client.close()
    print(done.line(), flush=True)
    return 0 if done.state in ("DUAL_WRITE", "POST_MIGRATION") else 1


if __name__ == "__main__":
    sys.exit(main())
