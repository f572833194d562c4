"""A simulated ZooKeeper-mode Kafka 3.9 broker in migration mode, at the protocol level (controller-broker.md §5.2).

Besides what every simulated broker does (`sim_broker.py`), it binds its inter-broker listener, then registers
in ZooKeeper (`/brokers/ids/<id>`, ephemeral, as a 3.9 broker writes it, with the bound port) and with the
controller as a migrating ZooKeeper broker (`IsMigratingZkBroker = true`, `metadata.version` pinned to its
IBP). On that listener it serves LeaderAndIsr v7, UpdateMetadata v8 and StopReplica v4 as §1.8 says
(`zk_broker_control.py`; ApiVersions too, though the controller's channel never asks). Killing it closes
the listener and ends its ZooKeeper session. The listener may be secured (`ssl_context`, `sasl`): both
registrations then carry its name and security protocol, as a broker's listener.security.protocol.map says.

Tests read `broker.control.snapshot()` (hosted logs, leaders, followers, strays, deleted logs, metadata
cache, every request with its answer) and inject faults with `broker.control.fail_next(...)` and
`broker.control.unresponsive`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import ssl
import time
from collections.abc import Iterable, Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kio.static.primitive import i16

from bridge.kafka.client import DEFAULT_TIMEOUT
from bridge.kafka.listener import KafkaListener, RequestContext
from bridge.kafka.protocol import KafkaPrincipal
from bridge.kafka.sasl import SaslConfig
from bridge.kafka.sasl_mechanisms import SaslLogin
from migrate.kraft import metadata_version as mvs
from migrate.zk import model as zk_model
from migrate.zk.live import ZkConnectOptions
from migrate.zk.znodes.brokers import encode_broker
from migrate.zk.znodes.topics import decode_topic
from tests.support.sim_broker import LISTENER, Address, RegistrationRequest, SimulatedBroker
from tests.support.zk_broker_control import SUPPORTED, LogDir, ZkControlState

HOST = "localhost"


class SimulatedZkBroker(SimulatedBroker):
    """One ZooKeeper-mode broker process in migration mode; `start()`, then `shutdown()` or `kill()`.

    `port=0` binds a free port (what its znode and registration then advertise). `logs` are the partition logs
    on its disk at start; by default (with `zk_connect`) the replicas ZooKeeper assigns to it, as a broker of
    the migrated cluster holds them; pass `()` for an empty disk.
    """

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
        port: int = 0,
        logs: Iterable[LogDir] | None = None,
        listener_name: str = LISTENER,
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslConfig | None = None,
        voters: Sequence[Address] = (),
        request_timeout_s: float = DEFAULT_TIMEOUT,
        controller_ssl_context: ssl.SSLContext | None = None,
        controller_sasl: SaslLogin | None = None,
    ) -> None:
        """`ssl_context`, `sasl`: its own listener's security; `controller_*`: how it reaches the controller."""
        super().__init__(
            broker_id, controller, cluster_id, metadata_version=metadata_version,
            heartbeat_interval_s=heartbeat_interval_s, port=port, voters=voters, request_timeout_s=request_timeout_s,
            controller_ssl_context=controller_ssl_context, controller_sasl=controller_sasl,
        )  # fmt: skip
        self.zk_connect = zk_connect
        self._zk: KazooClient | None = None
        self._initial_logs = None if logs is None else list(logs)
        self.zk_broker_epoch = -1
        """The czxid of its `/brokers/ids` znode: the epoch a ZooKeeper controller's requests must carry."""
        self.control = ZkControlState(broker_id, lambda: (self.view.broker_epoch, self.zk_broker_epoch))
        """Its replica manager and metadata cache: what the controller's requests did (read `snapshot()`)."""
        self.listener_name = listener_name
        self.listener = KafkaListener(
            "127.0.0.1", port, {key: self._handle for key in SUPPORTED}, supported=SUPPORTED,
            ssl_context=ssl_context, sasl=sasl,
        )  # fmt: skip
        self.principals: set[KafkaPrincipal] = set()
        """Who sent the controller's requests (the TLS client certificate's or the SASL user's principal)."""

    def before_run(self) -> None:
        """Bind the listener first (the advertised port is the bound one), then register in ZooKeeper."""
        self.port = self.on_loop(self.listener.start())
        if self.zk_connect is not None:
            self._register_in_zookeeper()
        else:
            self.control.load(self._initial_logs or ())

    async def on_stop(self) -> None:
        await self.listener.stop()

    def kill(self) -> None:
        """Crash: no more heartbeats or answers, the ZooKeeper session ends, nothing is said to the controller."""
        super().kill()
        if self._zk is not None:
            with contextlib.suppress(Exception):
                self._zk.stop()
                self._zk.close()

    def restarted(self) -> SimulatedZkBroker:
        """A new process of this broker (after `kill()` or `shutdown()`), started with the logs this one left
        on disk and the same port."""
        return SimulatedZkBroker(
            self.broker_id, self.controller, self.cluster_id, zk_connect=self.zk_connect,
            metadata_version=self.metadata_version, heartbeat_interval_s=self.interval, port=self.port,
            logs=self.control.hosted(), listener_name=self.listener_name,
            ssl_context=self.listener.ssl_context, sasl=self.listener.sasl, voters=self.voters,
            request_timeout_s=self.request_timeout_s,
        ).start()  # fmt: skip

    def features(self) -> tuple[tuple[str, int, int], ...]:
        """Only metadata.version, pinned to the IBP (KafkaServer)."""
        level = self.metadata_version.feature_level
        return ((mvs.FEATURE_NAME, level, level),)

    def registration_request(self) -> RegistrationRequest:
        """Its one listener under its name, with the security protocol the listener speaks."""
        request = super().registration_request()
        protocol = zk_model.SECURITY_PROTOCOLS.index(self.listener.security_protocol)
        listeners = tuple(
            dataclasses.replace(listener, name=self.listener_name, security_protocol=i16(protocol))
            for listener in request.listeners
        )
        return dataclasses.replace(request, listeners=listeners)

    async def _handle(self, context: RequestContext, request: Any) -> Any:
        self.principals.add(context.principal)
        return self.control.handle(context.api_key, context.api_version, request)

    def _register_in_zookeeper(self) -> None:
        assert self.zk_connect is not None
        client = ZkConnectOptions(connect=self.zk_connect).kazoo_client()
        client.start(timeout=15)
        self._zk = client
        logs = self._initial_logs
        if logs is None:
            logs = replicas_in_zookeeper(client, self.broker_id)
        self.control.load(logs)
        path = f"/brokers/ids/{self.broker_id}"
        registration = zk_model.BrokerRegistration(
            broker_id=self.broker_id,
            endpoints=[
                zk_model.BrokerEndpoint(self.listener_name, HOST, self.port, self.listener.security_protocol)
            ],
            timestamp=int(time.time() * 1000),
        )
        with contextlib.suppress(NoNodeError):  # the seeded tree's znode stands for an earlier session
            client.delete(path)
        _, stat = client.create(
            path, encode_broker(registration), ephemeral=True, makepath=True, include_data=True
        )
        self.zk_broker_epoch = int(stat.czxid)


def replicas_in_zookeeper(client: KazooClient, broker_id: int) -> list[LogDir]:
    """The partitions `/brokers/topics` assigns to `broker_id`: the logs its disk holds."""
    logs = []
    with contextlib.suppress(NoNodeError):
        for name in sorted(client.get_children("/brokers/topics")):
            path = f"/brokers/topics/{name}"
            data, _ = client.get(path)
            topic = decode_topic(path, data)
            logs += [
                LogDir(name, partition, topic.topic_id)
                for partition, replicas in sorted(topic.partitions.items())
                if broker_id in replicas
            ]
    return logs
