"""A simulated KRaft-mode Kafka 3.9 broker, at the protocol level (controller-broker.md §4.1, §5.3).

Besides what every simulated broker does (`sim_broker.py`): ApiVersions first on every controller connection
(the answer is kept in `api_versions`), registration as a KRaft broker (`IsMigratingZkBroker = false`, the
default supported features, no ZooKeeper registration), heartbeats 10 ms apart until caught up, and once
unfenced an AssignReplicasToDirs for every hosted partition whose recorded directory is not its log dir
(migrated partitions carry none), as ReplicaManager does for directories it finds. It binds the listener it
advertises; a LeaderAndIsr, UpdateMetadata or StopReplica arriving there is recorded in `control_requests`
and the connection closed, as a KRaft broker's SocketServer does with an API it does not enable.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

from kio.schema.api_versions.v3 import request as api_versions_v3
from kio.schema.assign_replicas_to_dirs.v0 import request as assign_v0
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i64

from bridge.brokers.cluster import DEFAULT_SUPPORTED_FEATURES
from bridge.kafka.client import KafkaConnection
from tests.support.sim_broker import SimulatedBroker, log_dir_id

STARTING_HEARTBEAT_S = 0.01
"""BrokerLifecycleManager: heartbeats 10 ms apart while STARTING (until the controller says caught up)."""
ASSIGN_REPLICAS_TO_DIRS = 73
ZK_BROKER_ONLY_APIS = {4: "LeaderAndIsr", 5: "StopReplica", 6: "UpdateMetadata"}
"""Controller-to-broker requests only a ZooKeeper-mode broker serves (their schemas' listeners: zkBroker)."""


class SimulatedKraftBroker(SimulatedBroker):
    """One KRaft broker process; `start()`, then `shutdown()` or `kill()`."""

    is_migrating_zk_broker = False
    kind = "kraft-broker"

    def __init__(
        self, broker_id: int, controller: tuple[str, int], cluster_id: str, *, port: int = 0, **kwargs: Any
    ) -> None:
        """`port=0` binds a free port (what its registration then advertises), e.g. the one the broker used
        as a ZooKeeper-mode broker."""
        super().__init__(broker_id, controller, cluster_id, port=port, **kwargs)
        self.api_versions: Any = None
        self.directory = log_dir_id(broker_id)
        self.assignments_sent = 0
        self.assignment_errors: list[int] = []
        self.control_requests: list[tuple[str, int]] = []
        """(API name, version) of every ZooKeeper-broker-only request that reached its listener."""
        self._server: asyncio.Server | None = None

    def before_run(self) -> None:
        """Bind the advertised listener before registering."""
        self._server = self.on_loop(asyncio.start_server(self._serve, "127.0.0.1", self.port))
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def on_stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Read request headers; one of a ZooKeeper broker's control APIs is recorded and the connection closed
        (other APIs are not served here: the tests' clients talk to the controller)."""
        try:
            size = int.from_bytes(await reader.readexactly(4), "big", signed=True)
            payload = await reader.readexactly(size)
            api_key = int.from_bytes(payload[0:2], "big", signed=True)
            version = int.from_bytes(payload[2:4], "big", signed=True)
            if api_key in ZK_BROKER_ONLY_APIS:
                self.control_requests.append((ZK_BROKER_ONLY_APIS[api_key], version))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def features(self) -> tuple[tuple[str, int, int], ...]:
        """BrokerFeatures.defaultSupportedFeatures: metadata.version from the first KRaft level, kraft.version."""
        return tuple((name, low, high) for name, (low, high) in DEFAULT_SUPPORTED_FEATURES.items())

    def pause_s(self) -> float:
        return self.interval if self.view.is_caught_up else STARTING_HEARTBEAT_S

    async def on_connect(self, connection: KafkaConnection) -> None:
        """NodeToControllerChannelManager discovers the controller's versions on every connection."""
        self.api_versions = await connection.send(
            api_versions_v3.ApiVersionsRequest(
                client_software_name="zk2kraft-sim", client_software_version="3.9.0"
            ),
            timeout=self.request_timeout_s,
        )

    def controller_supports(self, api_key: int) -> bool:
        """Whether the controller's ApiVersions answer lists `api_key`."""
        answer = self.api_versions
        return answer is not None and any(int(k.api_key) == api_key for k in answer.api_keys)

    def unassigned(self) -> dict[uuid.UUID, list[int]]:
        """Hosted partitions whose directory in the metadata is not this broker's log dir, by topic id."""
        follower = self.follower
        if follower is None:
            return {}
        out: dict[uuid.UUID, list[int]] = {}
        for topic_id, topic in follower.image.topics_by_id.items():
            for partition_id, partition in sorted(topic.partitions.items()):
                if self.broker_id not in partition.replicas:
                    continue
                if partition.directories[partition.replicas.index(self.broker_id)] != self.directory:
                    out.setdefault(topic_id, []).append(partition_id)
        return out

    async def after_heartbeat(self, connection: KafkaConnection) -> None:
        """Once running (unfenced), tell the controller where its replicas are."""
        view = self.view
        if view.is_fenced or view.broker_epoch < 0 or not self.controller_supports(ASSIGN_REPLICAS_TO_DIRS):
            return
        wanted = self.unassigned()
        if not wanted:
            return
        request = assign_v0.AssignReplicasToDirsRequest(
            broker_id=i32(self.broker_id),
            broker_epoch=i64(view.broker_epoch),
            directories=(
                assign_v0.DirectoryData(
                    id_=self.directory,
                    topics=tuple(
                        assign_v0.TopicData(
                            topic_id=topic_id,
                            partitions=tuple(
                                assign_v0.PartitionData(partition_index=i32(p)) for p in partitions
                            ),
                        )
                        for topic_id, partitions in sorted(wanted.items())
                    ),
                ),
            ),
        )
        response = await connection.send(request, timeout=self.request_timeout_s)
        self.assignments_sent += 1
        if response.error_code != ErrorCode.none:
            self.assignment_errors.append(int(response.error_code))
            return
        self.assignment_errors += [
            int(p.error_code)
            for d in response.directories
            for t in d.topics
            for p in t.partitions
            if p.error_code != ErrorCode.none
        ]
        # The controller's records reach the observer soon; wait for them rather than sending the same again.
        assert self.follower is not None
        self.follower.wake()
