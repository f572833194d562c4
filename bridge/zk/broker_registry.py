"""The ZooKeeper-mode brokers under `/brokers/ids`, shown to request handlers as registered KRaft brokers.

Departure from Kafka 3.9: a migrating ZK broker registers with the KRaft controller through the
BrokerRegistration RPC (`IsMigratingZkBroker=true`), which puts a RegisterBrokerRecord in the log. The
bridge does not serve that RPC, so it reads the brokers' own ZooKeeper registrations instead and keeps
them in memory only (never in the log, never dual-written): each appears as a registered, unfenced,
migrating ZK broker whose epoch is the czxid of its `/brokers/ids/<id>` znode (the ZK-mode broker epoch).
Handlers see them through `with_brokers(image)`, so CreateTopics/CreatePartitions place replicas on them,
BROKER configs of live brokers validate, and AlterPartition/AllocateProducerIds check that epoch.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.protocol.states import WatchedEvent
from kazoo.recipe.watchers import ChildrenWatch

from migrate.errors import Zk2KraftError, error_text
from migrate.kraft.image import BrokerRegistration, ClusterImage, Endpoint, MetadataImage
from migrate.zk import model as zk_model
from migrate.zk import paths
from migrate.zk.znodes.brokers import decode_broker

log = logging.getLogger(__name__)

_PROTOCOL_IDS = {name: index for index, name in enumerate(zk_model.SECURITY_PROTOCOLS)}
"""Kafka's SecurityProtocol ids: PLAINTEXT 0, SSL 1, SASL_PLAINTEXT 2, SASL_SSL 3."""


def as_kraft_registration(broker: zk_model.BrokerRegistration) -> BrokerRegistration:
    """A ZooKeeper broker registration as the KRaft registration a migrating ZK broker would have."""
    return BrokerRegistration(
        broker_id=broker.broker_id,
        epoch=broker.czxid,
        # Stable per znode incarnation; Kafka's brokers pick a random one at every start.
        incarnation_id=uuid.UUID(int=((broker.broker_id & 0xFFFF_FFFF) << 64) | (broker.czxid & (2**64 - 1))),
        endpoints=[
            Endpoint(e.listener, e.host or "", e.port, _PROTOCOL_IDS[e.security_protocol])
            for e in broker.endpoints
        ],
        supported_features={name: (r.min_version, r.max_version) for name, r in broker.features.items()},
        rack=broker.rack,
        fenced=False,
        in_controlled_shutdown=False,
        is_migrating_zk_broker=True,
        log_dirs=[],  # ZK brokers report no directories: partitions get the MIGRATING directory
    )


def merge_brokers(image: MetadataImage, brokers: Mapping[int, BrokerRegistration]) -> MetadataImage:
    """A shallow copy of `image` whose cluster also holds `brokers` (the log's own registrations win)."""
    if not brokers:
        return image
    cluster = ClusterImage(
        brokers={**brokers, **image.cluster.brokers}, controllers=image.cluster.controllers
    )
    return replace(image, cluster=cluster)


class ZkBrokerRegistry:
    """Live view of `/brokers/ids/*` through `client` (a kazoo ChildrenWatch plus one data watch per broker).

    `brokers` is replaced as a whole on every change, so readers on other threads need no lock.
    `on_change(brokers)` runs on kazoo's callback thread after each change.
    """

    def __init__(
        self,
        client: KazooClient,
        on_change: Callable[[Mapping[int, BrokerRegistration]], None] | None = None,
    ) -> None:
        self.client = client
        self.on_change = on_change
        self.brokers: Mapping[int, BrokerRegistration] = {}
        self._lock = threading.RLock()
        self._generation = 0
        self._watching = -1
        self._children: list[str] = []
        self._stopped = True
        self._disconnected = False

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> ZkBrokerRegistry:
        """Read the current brokers (synchronously) and keep watching."""
        with self._lock:
            if not self._stopped:
                return self
            self._stopped = False
            self.client.add_listener(self._on_state)
            self._start_watch()
        return self

    def stop(self) -> None:
        """Publish nothing more. Takes no lock: a watch callback may hold it in a ZooKeeper call that only
        returns once the client is stopped (ZooKeeper unreachable); every callback checks `_stopped` first."""
        self._stopped = True
        self.client.remove_listener(self._on_state)

    def with_brokers(self, image: MetadataImage) -> MetadataImage:
        """`image` as handlers see it: the ZooKeeper brokers appear registered (see the module docstring)."""
        return merge_brokers(image, self.brokers)

    # ------------------------------------------------------------------ watching

    def _start_watch(self) -> None:
        """(Re)arm the watch on `/brokers/ids` itself and, when it exists, a fresh ChildrenWatch."""
        if self.client.exists(paths.BROKER_IDS, watch=self._on_ids_event) is None:
            log.info("%s does not exist (yet); no ZooKeeper brokers are registered", paths.BROKER_IDS)
            self._generation += 1  # a ChildrenWatch still running belongs to the deleted znode
            self._children = []
            self._publish({})
            return
        if self._watching == self._generation:
            return
        self._generation += 1
        generation = self._watching = self._generation
        # ChildrenWatch calls back at once (the current children), then after every change; it stops for
        # good when the znode is deleted, which the exists watch above notices.
        ChildrenWatch(self.client, paths.BROKER_IDS, lambda children: self._on_children(generation, children))

    def _on_ids_event(self, event: WatchedEvent) -> None:
        self.client.handler.spawn(self._restart)

    def _restart(self) -> None:
        with self._lock:
            if self._stopped:
                return
            try:
                self._start_watch()
            except KazooException as exc:
                log.warning(
                    "cannot watch %s (%s); will retry after reconnecting", paths.BROKER_IDS, error_text(exc)
                )

    def _on_children(self, generation: int, children: list[str]) -> bool:
        with self._lock:
            if self._stopped or generation != self._generation:
                return False
            self._children = list(children)
            self._refresh()
            return True

    def _on_data(self, event: WatchedEvent) -> None:
        if event.type in ("CHANGED", "CREATED"):
            with self._lock:
                if not self._stopped:
                    self.client.handler.spawn(self._refresh_locked)

    def _on_state(self, state: str) -> None:
        if state in (KazooState.SUSPENDED, KazooState.LOST):
            self._disconnected = True
        elif state == KazooState.CONNECTED and self._disconnected:
            # A broker may have re-registered (new czxid) while we were away: read everything again.
            self._disconnected = False
            self.client.handler.spawn(self._restart_and_refresh)

    def _restart_and_refresh(self) -> None:
        self._restart()
        self._refresh_locked()

    def _refresh_locked(self) -> None:
        with self._lock:
            if self._stopped:
                return
            try:
                self._refresh()
            except KazooException as exc:
                log.warning(
                    "cannot read %s (%s); will retry after reconnecting", paths.BROKER_IDS, error_text(exc)
                )

    def _refresh(self) -> None:
        """Read every broker znode (with a data watch) and publish the registrations."""
        pending: list[tuple[str, Any]] = []
        for name in sorted(self._children):
            path = f"{paths.BROKER_IDS}/{name}"
            pending.append((path, self.client.get_async(path, watch=self._on_data)))
        brokers: dict[int, BrokerRegistration] = {}
        for path, reply in pending:
            try:
                data, stat = reply.get()
            except NoNodeError:
                continue  # gone since the listing; the children watch fires again
            try:
                decoded = decode_broker(
                    path, data, czxid=stat.czxid, zk_version=stat.version, ephemeral_owner=stat.ephemeralOwner
                )
            except Zk2KraftError as exc:
                log.warning("ignoring unreadable ZooKeeper broker registration: %s", exc)
                continue
            brokers[decoded.broker_id] = as_kraft_registration(decoded)
        self._publish(brokers)

    def _publish(self, brokers: dict[int, BrokerRegistration]) -> None:
        if brokers.keys() != self.brokers.keys():
            log.info(
                "event=zk_brokers ids=%s", ",".join(str(b) for b in sorted(brokers)),
                extra={"event": "zk_brokers", "broker_ids": sorted(brokers)},
            )  # fmt: skip
        self.brokers = brokers
        if self.on_change is not None:
            self.on_change(brokers)
