"""A simulated ZooKeeper-mode Kafka 3.9 broker in migration mode, at the protocol level (controller-broker.md §5.2).

Besides what every simulated broker does (`sim_broker.py`), it registers in ZooKeeper first
(`/brokers/ids/<id>`, ephemeral, as a 3.9 broker writes it) and registers with the controller as a migrating
ZooKeeper broker (`IsMigratingZkBroker = true`, `metadata.version` pinned to its IBP). Killing it ends its
ZooKeeper session. It serves no LeaderAndIsr/UpdateMetadata yet (the bridge sends none).
"""

from __future__ import annotations

import contextlib
import time

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from migrate.kraft import metadata_version as mvs
from migrate.zk import model as zk_model
from migrate.zk.live import ZkConnectOptions
from migrate.zk.znodes.brokers import encode_broker
from tests.support.sim_broker import LISTENER, SimulatedBroker


class SimulatedZkBroker(SimulatedBroker):
    """One ZooKeeper-mode broker process in migration mode; `start()`, then `shutdown()` or `kill()`."""

    is_migrating_zk_broker = True
    kind = "zk-broker"

    def __init__(
        self,
        broker_id: int,
        controller: tuple[str, int],
        cluster_id: str,
        *,
        zk_connect: str | None = None,
        metadata_version: mvs.MetadataVersion = mvs.LATEST_PRODUCTION,
        heartbeat_interval_s: float = 0.2,
        port: int = 9092,
    ) -> None:
        super().__init__(
            broker_id, controller, cluster_id, metadata_version=metadata_version,
            heartbeat_interval_s=heartbeat_interval_s, port=port,
        )  # fmt: skip
        self.zk_connect = zk_connect
        self._zk: KazooClient | None = None

    def start(self) -> SimulatedZkBroker:
        """ZooKeeper registration first (as KafkaServer does), then the observer, registration and heartbeats."""
        if self.zk_connect is not None:
            self._register_in_zookeeper()
        super().start()
        return self

    def kill(self) -> None:
        """Crash: no more heartbeats, the ZooKeeper session ends, nothing is said to the controller."""
        super().kill()
        if self._zk is not None:
            with contextlib.suppress(Exception):
                self._zk.stop()
                self._zk.close()

    def features(self) -> tuple[tuple[str, int, int], ...]:
        """Only metadata.version, pinned to the IBP (KafkaServer)."""
        level = self.metadata_version.feature_level
        return ((mvs.FEATURE_NAME, level, level),)

    def _register_in_zookeeper(self) -> None:
        assert self.zk_connect is not None
        client = ZkConnectOptions(connect=self.zk_connect).kazoo_client()
        client.start(timeout=15)
        self._zk = client
        path = f"/brokers/ids/{self.broker_id}"
        registration = zk_model.BrokerRegistration(
            broker_id=self.broker_id,
            endpoints=[zk_model.BrokerEndpoint(LISTENER, "localhost", self.port, "PLAINTEXT")],
            timestamp=int(time.time() * 1000),
        )
        with contextlib.suppress(NoNodeError):  # the seeded tree's znode stands for an earlier session
            client.delete(path)
        client.create(path, encode_broker(registration), ephemeral=True, makepath=True)
