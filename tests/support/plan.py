"""Seeded layouts for the planner tests: a healthy Kafka 3.9 ZooKeeper-mode cluster and its broker files."""

from __future__ import annotations

import uuid
from pathlib import Path

from kazoo.client import KazooClient

from migrate.zk.cluster import to_tree
from migrate.zk.load import load_tree
from migrate.zk.model import (
    BrokerEndpoint,
    BrokerRegistration,
    ControllerEpoch,
    ControllerRegistration,
    FeatureStatus,
    FinalizedFeatures,
    PartitionState,
    Topic,
    ZkClusterModel,
)

CLUSTER_ID = "Vb8gN2LhQeWkUuE9rXmS3A"
BROKER_IDS = (1, 2, 3)
SASL_SSL_SCRAM = {
    "listeners": "INTERNAL://:9093,EXTERNAL://:9092",
    "advertised.listeners": "INTERNAL://kafka{id}:9093,EXTERNAL://kafka{id}:9092",
    "listener.security.protocol.map": "INTERNAL:SASL_SSL,EXTERNAL:SSL",
    "inter.broker.listener.name": "INTERNAL",
    "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
    "sasl.enabled.mechanisms": "SCRAM-SHA-512",
    "ssl.truststore.location": "/etc/kafka/truststore.jks",
    "ssl.truststore.password": "trust-s3cret",
    "listener.name.internal.scram-sha-512.sasl.jaas.config": (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="broker" password="jaas-s3cret";'
    ),
}
"""Brokers whose inter-broker listener is SASL_SSL with SCRAM (`{id}`: each broker's id); its secrets end in s3cret."""


def healthy_model() -> ZkClusterModel:
    """Three brokers, RF-3 internal and user topics, all in sync, a ZooKeeper controller (broker 2)."""
    m = ZkClusterModel(cluster_id=CLUSTER_ID)
    for i in BROKER_IDS:
        m.brokers[i] = BrokerRegistration(
            broker_id=i, endpoints=[BrokerEndpoint("PLAINTEXT", f"kafka{i}", 9092, "PLAINTEXT")], timestamp=1
        )
    for name, count in (("__consumer_offsets", 3), ("orders", 2)):
        replicas = {p: [(p + k) % 3 + 1 for k in range(3)] for p in range(count)}
        states = {p: PartitionState(leader=r[0], leader_epoch=0, isr=list(r), controller_epoch=1) for p, r in replicas.items()}
        m.topics[name] = Topic(name=name, topic_id=uuid.uuid5(uuid.NAMESPACE_DNS, name), partitions=replicas, states=states)
    m.controller = ControllerRegistration(broker_id=2, timestamp=1, kraft_controller_epoch=-1)
    m.controller_epoch = ControllerEpoch(epoch=1)
    m.features = FinalizedFeatures(status=FeatureStatus.ENABLED)
    return m


def seed(client: KazooClient, model: ZkClusterModel, chroot: str) -> None:
    """Write the model's znodes (Kafka's exact bytes) under `chroot` of a real ZooKeeper."""
    load_tree(client, to_tree(model), chroot=chroot)


def broker_properties(broker_id: int, zk_connect: str, extra: dict[str, str] | None = None) -> str:
    """A healthy Kafka 3.9 ZooKeeper-mode server.properties (shaped like Kafka's migration docs)."""
    lines = [
        "# Sample ZK broker server.properties",
        f"broker.id={broker_id}",
        "listeners=PLAINTEXT://:9092",
        f"advertised.listeners=PLAINTEXT://kafka{broker_id}:9092",
        "inter.broker.protocol.version=3.9",
        f"zookeeper.connect={zk_connect}",
        "log.dirs=/var/lib/kafka/data",
        "offsets.topic.replication.factor=3",
        "transaction.state.log.replication.factor=3",
    ]
    # Appended keys win (Java's Properties keeps the last), so `extra` can also override.
    lines += [f"{k}={v}" for k, v in (extra or {}).items()]
    return "\n".join(lines) + "\n"


def write_broker_files(tmp: Path, zk_connect: str, overrides: dict[int, dict[str, str]] | None = None) -> list[Path]:
    out = []
    for i in BROKER_IDS:
        path = tmp / f"server-{i}.properties"
        path.write_text(broker_properties(i, zk_connect, (overrides or {}).get(i)), encoding="utf-8")
        out.append(path)
    return out
