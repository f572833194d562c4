"""This bridge's seat in a Raft quorum of bridges (`--voters`): Kafka's RaftManager and the controller's view of it.

It opens the metadata directory as one replica of the quorum's log, runs the Raft core and its transport,
answers the Raft requests of the other voters and of observers, and tells the controller process when this
replica leads (with its epoch's first entry and the activation records committed) and when it stops leading.
While it waits to lead it keeps a copy of ZooKeeper (`zk_copy`) for the reconciliation once elected.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Final

from bridge.config import BridgeConfig, voter_login, voter_ssl_context
from bridge.controller.zk_copy import FollowerZkCopy
from bridge.kafka.listener import RequestContext
from bridge.metrics import BridgeMetrics, RaftStatus, RaftVoterStatus
from bridge.raft import codec
from bridge.raft import messages as m
from bridge.raft.client import RaftClient, RaftConfig
from bridge.raft.metadata_log import MetadataLog
from bridge.raft.quorum import FileElectionStore, Role
from bridge.raft.replica_log import ReplicaLog
from bridge.raft.transport import RaftNode, monotonic_ms
from migrate.errors import Zk2KraftError
from migrate.kraft.logdir import QUORUM_STATE

log = logging.getLogger(__package__)

RAFT_KEYS: Final = frozenset(
    {
        codec.FETCH_KEY,
        codec.VOTE_KEY,
        codec.BEGIN_QUORUM_EPOCH_KEY,
        codec.END_QUORUM_EPOCH_KEY,
        codec.DESCRIBE_QUORUM_KEY,
        codec.FETCH_SNAPSHOT_KEY,
        codec.ADD_RAFT_VOTER_KEY,
        codec.REMOVE_RAFT_VOTER_KEY,
        codec.UPDATE_RAFT_VOTER_KEY,
    }
)
"""Answered by the Raft layer on every replica, leader or not (Kafka's KafkaRaftClient handles them)."""


class QuorumSeat:
    """Kafka's RaftManager for one bridge: its ReplicaLog, RaftClient and RaftNode."""

    def __init__(
        self,
        config: BridgeConfig,
        metrics: BridgeMetrics,
        on_change: Callable[[], None],
        zk_copy: FollowerZkCopy | None = None,
    ) -> None:
        self.config = config
        self.zk_copy = zk_copy
        self.metrics = metrics
        self.voters = {voter.node_id: m.Endpoint(voter.host, voter.port) for voter in config.voters}
        self._on_change = on_change
        self.replica: ReplicaLog | None = None
        self.core: RaftClient | None = None
        self.node: RaftNode | None = None
        self._task: asyncio.Task[None] | None = None
        self._candidate_since: int | None = None
        self.epoch_led = -1
        """The epoch `until_leading` last returned."""
        self._seen_end = -1
        self._appended: deque[tuple[int, float]] = deque()
        """(log end offset, when) of the leader's appends not yet committed."""

    @property
    def leading(self) -> bool:
        return self.core is not None and self.core.is_leader

    @property
    def failure(self) -> BaseException | None:
        return None if self.node is None else self.node.failure

    async def open(self, cluster_id: str) -> MetadataLog:
        """Open the directory as a replica (no election of its own) and start taking part in the quorum."""
        config = self.config
        loop = asyncio.get_running_loop()
        replica = self.replica = await loop.run_in_executor(
            None,
            lambda: ReplicaLog.open(
                config.metadata_dir,
                node_id=config.node_id,
                cluster_id=cluster_id or None,
                metadata_version=config.metadata_version,
                fsync=config.fsync,
                config=config.metadata_log,
            ),
        )
        store = FileElectionStore(
            replica.partition_dir / QUORUM_STATE, cluster_id, tuple(sorted(self.voters))
        )
        core = self.core = RaftClient(
            node_id=config.node_id,
            voters=self.voters,
            cluster_id=cluster_id,
            log=replica,
            store=store,
            rng=random.Random(),
            config=RaftConfig(),
            on_role_change=self._on_role_change,
        )
        node = self.node = RaftNode(
            core, listener_name=config.controller_listener_name, ssl_context=voter_ssl_context(config),
            sasl=voter_login(config),
        )  # fmt: skip
        node.watch(self._changed)
        replica.on_flushed = lambda: _wake_from_thread(loop, node.wake)
        replica.metadata_log.on_written = replica.on_flushed  # parked fetches take it while the fsync runs
        core.start(monotonic_ms())
        self._task = loop.create_task(node.run())
        self._task.add_done_callback(lambda _task: self._changed())
        return replica.metadata_log

    def _on_role_change(self, core: RaftClient) -> None:
        now = monotonic_ms()
        if core.role is Role.CANDIDATE and self._candidate_since is None:
            self._candidate_since = now
        elif core.role is Role.LEADER and self._candidate_since is not None:
            self.metrics.raft_election_latency_ms.observe(now - self._candidate_since)
            self._candidate_since = None
        elif core.role is Role.FOLLOWER:
            self._candidate_since = None
        log.info(
            "event=raft_role node=%s role=%s epoch=%s leader=%s",
            core.node_id, core.role.value, core.epoch, core.leader_id,
        )  # fmt: skip

    def _changed(self) -> None:
        if self.core is not None:
            self._measure(self.core)
            self.metrics.set_raft(self.status())
        self._on_change()

    def _measure(self, core: RaftClient) -> None:
        """Kafka's commit-latency (a leader's append until the high watermark passes it) and fetch-records."""
        end, now = core.log.end_offset(), time.monotonic()
        if core.is_leader:
            if end > self._seen_end:
                self._appended.append((end, now))
            while self._appended and self._appended[0][0] <= core.high_watermark:
                self.metrics.raft_commit_latency_ms.observe((now - self._appended.popleft()[1]) * 1000)
        else:
            self._appended.clear()
            if end > self._seen_end >= 0:
                self.metrics.raft_fetch_records.inc(end - self._seen_end)
        self._seen_end = end

    async def _wait_for(self, predicate: Callable[[], bool]) -> None:
        """Until `predicate()` holds or the Raft layer stopped (woken by the node's "moved" signal; a stopped
        node announces nothing, hence the half-second look)."""
        node, task = self.node, self._task
        assert node is not None
        while not await node.until(lambda: predicate() or (task is not None and task.done()), timeout=0.5):
            pass

    async def until_leading(self) -> int:
        """Wait until this replica leads with its epoch's first entry and its activation records committed."""
        core, node, replica = self.core, self.node, self.replica
        assert core is not None and node is not None and replica is not None
        if self.zk_copy is not None:
            self.zk_copy.follow()
        while True:
            await self._wait_for(lambda: core.leader_ready() or self.failure is not None)
            if self.failure is not None:
                raise self.failure
            if not core.leader_ready():
                if self._task is not None and self._task.done():
                    raise Zk2KraftError("the Raft layer stopped before this bridge was elected")
                continue
            epoch = core.epoch
            records = replica.activation_records()
            if records and not await node.wait_committed(node.append(records)):
                continue  # lost the epoch before its activation committed: wait for the next one
            if core.epoch == epoch and core.is_leader:
                log.info("event=raft_leading node=%s epoch=%s", core.node_id, epoch)
                self.epoch_led = epoch
                return epoch

    async def until_not_leading(self, epoch: int) -> str:
        """Return (with the reason) once this replica no longer leads `epoch`."""
        core = self.core
        assert core is not None
        await self._wait_for(lambda: not (core.is_leader and core.epoch == epoch) or self.failure is not None)
        if self.failure is not None:
            return f"the Raft layer failed: {self.failure}"
        leader = "unknown" if core.leader_id < 0 else str(core.leader_id)
        return f"Raft leadership of epoch {epoch} lost (now {core.role.value} in epoch {core.epoch}, leader {leader})"

    def abandon_uncommitted(self, reason: str) -> None:
        """No longer leading: what waits for commit is answered now (NOT_CONTROLLER, the driver stepped down)."""
        if self.replica is not None:
            self.replica.metadata_log.abandon_uncommitted(reason)

    def resign(self) -> None:
        """Give up leadership of the current epoch (Kafka's QuorumController.renounce → RaftClient.resign)."""
        if self.core is not None:
            self.core.resign(monotonic_ms())
        if self.node is not None:
            self.node.wake()

    async def on_request(self, ctx: RequestContext, body: Any) -> Any:
        """A Raft request from another voter or an observer (a broker, a shim)."""
        node, core = self.node, self.core
        key, version = ctx.api_key, ctx.api_version
        if node is None or core is None:
            return codec.error_response(key, version, m.BROKER_NOT_AVAILABLE)
        if key in (codec.ADD_RAFT_VOTER_KEY, codec.REMOVE_RAFT_VOTER_KEY, codec.UPDATE_RAFT_VOTER_KEY):
            # kraft.version 0: the voter set is static (Kafka 3.9 answers UNSUPPORTED_VERSION the same way).
            return codec.reconfiguration_refusal(
                key, version, leader_id=core.leader_id, leader_epoch=core.epoch, voters=core.voters
            )
        if key == codec.DESCRIBE_QUORUM_KEY:
            try:
                codec.check_describe_quorum_request(body)
            except codec.RaftRequestRefused as refused:
                return refused.response(leader_id=core.leader_id, voters=core.voters)
            return codec.describe_quorum_response(
                node.describe(), version, listener=self.config.controller_listener_name
            )
        return await node.handle(body)

    def status(self) -> RaftStatus:
        core = self.core
        assert core is not None
        voters: list[RaftVoterStatus] = []
        if core.leading is not None:
            now = monotonic_ms()
            caught_up_window = core.config.fetch_timeout_ms
            for voter, progress in sorted(core.leading.replicas.items()):
                mine = voter == core.node_id
                voters.append(
                    RaftVoterStatus(
                        id=voter,
                        log_end_offset=progress.end_offset,
                        last_fetch_ms_ago=0 if mine else (None if progress.last_fetch_ms < 0 else now - progress.last_fetch_ms),
                        caught_up=mine or (progress.last_caught_up_ms >= 0 and now - progress.last_caught_up_ms <= caught_up_window),
                    )
                )  # fmt: skip
        return RaftStatus(
            role=core.role.value,
            leader_id=None if core.leader_id < 0 else core.leader_id,
            epoch=core.epoch,
            high_watermark=core.high_watermark,
            voters=voters,
            zookeeper_copy="none" if self.zk_copy is None else self.zk_copy.state,
        )

    async def close(self) -> None:
        """Leave the quorum: a leader resigns (EndQuorumEpoch) so another is elected at once; close the log."""
        if self.zk_copy is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.zk_copy.stop)
        if self.node is not None:
            await self.node.stop()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self.replica is not None:
            replica, self.replica = self.replica, None
            await asyncio.get_running_loop().run_in_executor(None, replica.close)


def _wake_from_thread(loop: asyncio.AbstractEventLoop, wake: Callable[[], None]) -> None:
    if not loop.is_closed():
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(wake)
