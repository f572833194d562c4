"""Seeded layouts for the planner tests: a healthy Kafka 3.9 ZooKeeper-mode cluster and its broker files."""

from __future__ import annotations

import uuid
from pathlib import Path

from kazoo.client import KazooClient

from migrate.plan.checks import run_checks
from migrate.plan.inputs import BrokerConfig, PlanInputs, parse_controllers
from migrate.plan.phases import Plan, build_plan
from migrate.plan.properties import parse_properties_text
from migrate.zk.cluster import to_tree
from migrate.zk.load import load_tree
from migrate.zk.model import (
    BrokerEndpoint,
    BrokerRegistration,
    ClientQuotaConfig,
    ControllerEpoch,
    ControllerRegistration,
    FeatureStatus,
    FinalizedFeatures,
    PartitionState,
    ScramCredential,
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


CONTROLLER_SASL_PLAIN = {
    "controller.listener.names": "CONTROLLER",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
    "sasl.mechanism.controller.protocol": "PLAIN",
    "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
    "listener.name.controller.plain.sasl.jaas.config": (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="ctrl" password="ctrl-s3cret" user_ctrl="ctrl-s3cret" user_admin="admin-s3cret";'
    ),
}
"""Brokers that already name and map a SASL_PLAINTEXT controller listener with PLAIN; its secrets end in s3cret."""

CONTROLLER_SASL_SSL_SCRAM = {
    "controller.listener.names": "CONTROLLER",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL",
    "sasl.mechanism.controller.protocol": "SCRAM-SHA-512",
    "sasl.enabled.mechanisms": "SCRAM-SHA-512",  # the listener has no override: the bare key counts
    "ssl.principal.mapping.rules": "RULE:^CN=(.*?),.*$/$1/",
    "listener.name.controller.scram-sha-512.sasl.jaas.config": (
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="ctrl" password="scram-s3cret";'
    ),
}
"""Brokers with a SASL_SSL controller listener logging in with SCRAM-SHA-512 as `ctrl`; its secret ends in s3cret."""


def with_scram_user(model: ZkClusterModel, user: str, mechanism: str) -> ZkClusterModel:
    """`model` with a SCRAM credential of `mechanism` for `user` in /config/users (values are not checked here)."""
    credential = ScramCredential(mechanism, b"salt", b"stored", b"server", 4096)
    model.client_quotas[f"users/{user}"] = ClientQuotaConfig(f"users/{user}", scram={mechanism: credential})
    return model


PLAN_CONTROLLERS = "3000@ctrl1:9093,3001@ctrl2:9094,3002@ctrl3:9095"


def plan_for(
    tmp_path: Path,
    extra: dict[str, str],
    controllers: str | None = PLAN_CONTROLLERS,
    model: ZkClusterModel | None = None,
    **options: str,
) -> tuple[Plan, dict[str, str]]:
    """The plan of three brokers with `extra` settings (`{id}`: each broker's id) and its files, without ZooKeeper."""
    brokers = []
    for broker_id in BROKER_IDS:
        text = broker_properties(broker_id, "zk1:2181/kafka", {k: v.format(id=broker_id) for k, v in extra.items()})
        brokers.append(BrokerConfig(parse_properties_text(text, str(tmp_path / f"server-{broker_id}.properties"))))
    inputs = PlanInputs(
        model=model or healthy_model(),
        zk_origin="test",
        zk_chroot="/kafka",
        zk_connect="zk1:2182,zk2:2182/kafka",
        brokers=brokers,
        controllers=parse_controllers(controllers) if controllers else [],
        **options,  # type: ignore[arg-type]
    )
    return build_plan(inputs, run_checks(inputs))
