"""The ZooKeeper-mode brokers as the controller tracks them: WAIT_FOR_BROKERS, and who never registered.

Kafka's counterpart: KRaftMigrationDriver's broker tracking (`isMigrationReady`'s check of /brokers/ids and
the assigned replicas against the registered ZooKeeper brokers), kept after the wait to flag newcomers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from bridge.api import DriverState
from bridge.broker_lifecycle import BrokerLifecycle
from bridge.config import BridgeConfig
from bridge.metrics import BridgeMetrics, BrokersStatus
from bridge.raft.metadata_log import MetadataLog
from bridge.zk.broker_registry import ZkBrokerRegistry
from migrate.zk import paths
from migrate.zk.znodes.topics import decode_topic

log = logging.getLogger(__package__)  # the controller process logs as one: "bridge.controller"

WAIT_FOR_BROKERS_POLL_S = 0.5


class TrackingController(Protocol):
    """What the broker tracking reads of the controller process."""

    @property
    def config(self) -> BridgeConfig: ...
    @property
    def metrics(self) -> BridgeMetrics: ...
    @property
    def kazoo(self) -> KazooClient | None: ...
    @property
    def log(self) -> MetadataLog | None: ...
    @property
    def brokers(self) -> ZkBrokerRegistry | None: ...
    @property
    def broker_lifecycle(self) -> BrokerLifecycle | None: ...
    @property
    def state(self) -> DriverState: ...
    @property
    def loop(self) -> asyncio.AbstractEventLoop | None: ...


class ZkBrokerTracking:
    """/brokers/ids against the registered migrating ZooKeeper brokers, for /status and the wait."""

    def __init__(self, controller: TrackingController) -> None:
        self._controller = controller

    def on_zk_brokers(self, brokers: Mapping[int, Any]) -> None:
        """kazoo's thread: in a rehearsal, ZooKeeper's brokers are the migrating ZK brokers; otherwise a
        broker that appears there without registering is flagged."""
        if self._controller.config.rehearsal:
            self._controller.metrics.set_brokers(
                BrokersStatus(registered=len(brokers), migrating_zk_brokers=len(brokers), rehearsal=True)
            )
            return
        loop = self._controller.loop
        if loop is not None and not loop.is_closed():
            # On the event loop, as every other sync: counts read here could overwrite newer ones.
            with contextlib.suppress(RuntimeError):  # the loop is closing
                loop.call_soon_threadsafe(self.sync)

    def sync(self, waiting_for: list[int] | None = None) -> None:
        """The brokers' counts (and who is missing or never registered) to /status, /metrics and the log."""
        lifecycle = self._controller.broker_lifecycle
        if self._controller.config.rehearsal or lifecycle is None:
            return
        counts = lifecycle.counts()
        if waiting_for is None and self._controller.state == DriverState.WAIT_FOR_BROKERS:
            # A registration or a ZooKeeper change while waiting: the wait's next poll says who is missing.
            waiting_for = self._controller.metrics.status().brokers.waiting_for
        in_zookeeper = self._controller.brokers.brokers.keys() if self._controller.brokers is not None else ()
        unregistered = self._unregistered_zk_brokers(in_zookeeper, waiting_for)
        previous = self._controller.metrics.set_brokers(
            BrokersStatus(
                registered=counts.registered, fenced=counts.fenced,
                in_controlled_shutdown=counts.in_controlled_shutdown,
                migrating_zk_brokers=counts.migrating_zk_brokers, waiting_for=waiting_for,
                unregistered_zk_brokers=unregistered,
            )
        )  # fmt: skip
        if previous.unregistered_zk_brokers != unregistered:
            if unregistered:
                log.warning(
                    "event=zk_brokers_not_registered ids=%s: in /brokers/ids but not registered with this "
                    "controller as migrating ZooKeeper brokers, or fenced for silence; restarted without "
                    "zookeeper.metadata.migration.enable=true? they get no metadata from this controller",
                    ",".join(map(str, unregistered)),
                )
            else:
                log.info("event=zk_brokers_not_registered ids=none: every broker in /brokers/ids is registered")

    def _unregistered_zk_brokers(self, in_zookeeper: Iterable[int], waiting_for: list[int] | None) -> list[int]:
        """Kafka's WAIT_FOR_BROKERS check kept after the wait: ids in /brokers/ids with no migrating ZooKeeper
        broker registration, or whose registration was fenced for silence while the broker runs in ZooKeeper
        (restarted without the migration flag). Empty until past the wait, where `waiting_for` names them."""
        controller = self._controller
        metadata_log = controller.log
        past_the_wait = controller.state.value >= DriverState.BECOME_CONTROLLER.value
        if waiting_for is not None or metadata_log is None or not past_the_wait:
            return []
        registered = metadata_log.image.cluster.brokers
        lifecycle = controller.broker_lifecycle
        heartbeats = lifecycle.cluster.heartbeats if lifecycle is not None else None

        def not_talking(broker_id: int) -> bool:
            broker = registered.get(broker_id)
            if broker is None or not broker.is_migrating_zk_broker:
                return True
            return broker.fenced and heartbeats is not None and heartbeats.silent(broker_id)

        return sorted(i for i in in_zookeeper if not_talking(i))

    async def wait_for_brokers(self) -> None:
        """WAIT_FOR_BROKERS (KRaftMigrationDriver): every broker under /brokers/ids and every broker named in
        a partition assignment must have registered as a migrating ZooKeeper broker (fenced ones count)."""
        loop = asyncio.get_running_loop()
        reported: list[int] | None = None
        while True:
            assert self._controller.log is not None and self._controller.brokers is not None
            in_zookeeper = set(self._controller.brokers.brokers)
            assigned = await loop.run_in_executor(None, self._assigned_broker_ids)
            brokers = self._controller.log.image.cluster.brokers
            registered = {b.broker_id for b in brokers.values() if b.is_migrating_zk_broker}
            missing = sorted((in_zookeeper | assigned) - registered)
            if in_zookeeper and registered and not missing:
                log.info("event=brokers_ready registered=%s", ",".join(map(str, sorted(registered))))
                self.sync()
                return
            if missing != reported:
                reported = missing
                log.warning(
                    "event=waiting_for_brokers missing=%s in_zookeeper=%s assigned=%s: the migration starts "
                    "once every broker runs in migration mode and has registered with this controller",
                    ",".join(map(str, missing)) or "none (no broker under /brokers/ids)",
                    ",".join(map(str, sorted(in_zookeeper))), ",".join(map(str, sorted(assigned))),
                )  # fmt: skip
            self.sync(missing)
            await asyncio.sleep(WAIT_FOR_BROKERS_POLL_S)

    def _assigned_broker_ids(self) -> set[int]:
        """The broker ids named in ZooKeeper's partition assignments (replicas and adding replicas)."""
        assert self._controller.kazoo is not None
        ids: set[int] = set()
        try:
            topics = self._controller.kazoo.get_children(paths.TOPICS)
        except NoNodeError:
            return ids
        for topic in topics:
            path = f"{paths.TOPICS}/{topic}"
            try:
                data, _stat = self._controller.kazoo.get(path)
            except NoNodeError:
                continue
            assignment = decode_topic(path, data)
            for replicas in assignment.partitions.values():
                ids.update(replicas)
            for replicas in assignment.adding_replicas.values():
                ids.update(replicas)
        return ids
