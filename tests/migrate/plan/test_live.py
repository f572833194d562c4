"""`plan --bootstrap-server`: live checks against a cluster of real TCP Kafka-protocol listeners.

Each broker is a bridge KafkaListener answering ApiVersions (with the metadata.version range a Kafka
release advertises), Metadata and DescribeConfigs with chosen ISRs and configs; ZooKeeper is real.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import socket
import ssl
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from kazoo.client import KazooClient
from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType
from kio.static.primitive import i8

from bridge.kafka.listener import ApiVersionsFeatures, KafkaListener, ListenerThread, RequestContext
from bridge.kafka.sasl import SaslConfig
from bridge.kafka.tls import server_ssl_context
from cli.main import cli
from cli.plan_live import ask_cluster, read_command_config
from migrate.errors import Zk2KraftError
from migrate.plan.checks import CATALOG, LIVE_CHECK_IDS, blockers, run_checks
from migrate.plan.checks.registry import Check
from migrate.plan.inputs import PlanInputs, parse_controllers
from migrate.plan.live import live_checks
from migrate.plan.load import load_inputs
from migrate.zk.embedded import EmbeddedZooKeeper
from migrate.zk.model import BrokerEndpoint, BrokerRegistration
from migrate.zk.sources import ZkSource
from tests.support.pki import needs_openssl, new_pki
from tests.support.plan import healthy_model, seed, write_broker_files

pytestmark = pytest.mark.zookeeper

HOST = "127.0.0.1"
CLUSTER_ID = "Vb8gN2LhQeWkUuE9rXmS3A"
CONTROLLERS = "3000@ctrl1:9093,3001@ctrl2:9093,3002@ctrl3:9093"
STATIC, DEFAULT = 4, 5  # DescribeConfigs config_source values
LEVEL_3_9, LEVEL_3_5 = 21, 11


def build(cls: type[Any], **values: Any) -> Any:
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


@dataclass
class FakeBroker:
    """What one broker answers: its metadata.version range (None: a pre-3.3 broker) and its configs."""

    node_id: int
    metadata_level: int | None = LEVEL_3_9
    configs: dict[str, tuple[str, int]] = field(
        default_factory=lambda: {
            "inter.broker.protocol.version": ("3.9-IV0", STATIC),
            "log.message.format.version": ("3.0-IV1", DEFAULT),
        }
    )
    port: int = 0
    listed: bool = True  # appears in the Metadata response
    dead_port: int | None = None  # advertised at this port, where nothing listens


@dataclass
class FakeCluster:
    brokers: list[FakeBroker]
    # (topic, partition) -> (leader, replicas, isr)
    partitions: dict[tuple[str, int], tuple[int, list[int], list[int]]]
    cluster_id: str = CLUSTER_ID

    async def metadata(self, ctx: RequestContext, request: Any) -> Any:
        module = load_payload_module(3, ctx.api_version, EntityType.response)
        brokers = tuple(
            build(
                module.MetadataResponseBroker,
                node_id=b.node_id,
                host=HOST,
                port=b.dead_port or b.port,
                rack=None,
            )
            for b in self.brokers
            if b.listed
        )
        topics: dict[str, list[Any]] = {}
        for (name, p), (leader, replicas, isr) in sorted(self.partitions.items()):
            topics.setdefault(name, []).append(
                build(
                    module.MetadataResponsePartition,
                    error_code=ErrorCode.leader_not_available if leader < 0 else ErrorCode.none,
                    partition_index=p,
                    leader_id=leader,
                    leader_epoch=0,
                    replica_nodes=tuple(replicas),
                    isr_nodes=tuple(isr),
                    offline_replicas=(),
                )
            )
        return build(
            module.MetadataResponse,
            throttle_time=datetime.timedelta(0),
            brokers=brokers,
            cluster_id=self.cluster_id,
            controller_id=self.brokers[0].node_id,
            topics=tuple(
                build(
                    module.MetadataResponseTopic,
                    error_code=ErrorCode.none,
                    name=name,
                    topic_id=None,
                    is_internal=False,
                    partitions=tuple(parts),
                    topic_authorized_operations=-2147483648,
                )
                for name, parts in topics.items()
            ),
        )

    def describe_configs_for(self, broker: FakeBroker) -> Any:
        async def handle(ctx: RequestContext, request: Any) -> Any:
            module = load_payload_module(32, ctx.api_version, EntityType.response)
            results = []
            for resource in request.resources:
                keys = resource.configuration_keys
                configs = tuple(
                    build(
                        module.DescribeConfigsResourceResult,
                        name=name,
                        value=value,
                        read_only=True,
                        config_source=i8(source),
                        is_sensitive=False,
                        synonyms=(),
                        config_type=i8(2),
                        documentation=None,
                    )
                    for name, (value, source) in broker.configs.items()
                    if keys is None or name in keys
                )
                results.append(
                    build(
                        module.DescribeConfigsResult,
                        error_code=ErrorCode.none,
                        error_message=None,
                        resource_type=resource.resource_type,
                        resource_name=resource.resource_name,
                        configs=configs,
                    )
                )
            return build(
                module.DescribeConfigsResponse, throttle_time=datetime.timedelta(0), results=tuple(results)
            )

        return handle

    ssl_context: ssl.SSLContext | None = None
    sasl: SaslConfig | None = None

    def listener(self, broker: FakeBroker) -> KafkaListener:
        level = broker.metadata_level
        features = ApiVersionsFeatures(supported={"metadata.version": (1, level)} if level else {})
        return KafkaListener(
            HOST,
            0,
            handlers={3: self.metadata, 32: self.describe_configs_for(broker)},
            supported={3: (0, 12), 32: (1, 4)},
            features=lambda: features,
            ssl_context=self.ssl_context,
            sasl=self.sasl,
        )

    @contextlib.contextmanager
    def running(self) -> Iterator[str]:
        """Every broker listening (except those advertised at a dead port); yields the bootstrap address."""
        with contextlib.ExitStack() as stack:
            for b in self.brokers:
                if b.dead_port is None:
                    b.port = stack.enter_context(ListenerThread(self.listener(b)))
            yield f"{HOST}:{self.brokers[0].port}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def healthy_partitions() -> dict[tuple[str, int], tuple[int, list[int], list[int]]]:
    out = {}
    for name, count in (("__consumer_offsets", 3), ("orders", 2)):
        for p in range(count):
            replicas = [(p + k) % 3 + 1 for k in range(3)]
            out[(name, p)] = (replicas[0], replicas, list(replicas))
    return out


def zk_inputs(
    zk_admin: KazooClient,
    zk_server: EmbeddedZooKeeper,
    zk_chroot: str,
    tmp_path: Path,
    extra_broker: int | None = None,
    overrides: dict[int, dict[str, str]] | None = None,
) -> tuple[PlanInputs, str, list[Path]]:
    model = healthy_model()
    if extra_broker is not None:
        model.brokers[extra_broker] = BrokerRegistration(
            broker_id=extra_broker,
            endpoints=[BrokerEndpoint("PLAINTEXT", f"kafka{extra_broker}", 9092, "PLAINTEXT")],
            timestamp=1,
        )
    chroot = zk_chroot + "/kafka"
    seed(zk_admin, model, chroot)
    connect = zk_server.connect_string + chroot
    files = write_broker_files(tmp_path, connect, overrides)
    return load_inputs(ZkSource(connect=connect), files, parse_controllers(CONTROLLERS)), connect, files


def by_id(checks: list[Check]) -> dict[str, Check]:
    return {c.id: c for c in checks}


def details(check: Check) -> str:
    return " | ".join(f"{e.where}: {e.detail}" for e in check.evidence)


def test_healthy_39_cluster_passes_every_live_check(
    zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str, tmp_path: Path
) -> None:
    inputs, _, _ = zk_inputs(zk_admin, zk_server, zk_chroot, tmp_path)
    cluster = FakeCluster([FakeBroker(i) for i in (1, 2, 3)], healthy_partitions())
    with cluster.running() as bootstrap:
        live = ask_cluster(bootstrap, timeout=10)
    assert [b.node_id for b in live.brokers] == [1, 2, 3]
    assert all(b.metadata_version_max == LEVEL_3_9 for b in live.brokers)
    checks = run_checks(inputs, live_checks(inputs, live))
    assert {c.id for c in checks} == set(CATALOG)
    found = by_id(checks)
    for cid in LIVE_CHECK_IDS:
        assert found[cid].status == "pass", found[cid].model_dump()
    assert "run Kafka 3.9" in details(found["software-version"])
    assert blockers(checks) == []


def test_old_versions_live_configs_and_bad_partitions_are_named(
    zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str, tmp_path: Path
) -> None:
    inputs, _, _ = zk_inputs(zk_admin, zk_server, zk_chroot, tmp_path, extra_broker=4)
    partitions = healthy_partitions()
    partitions[("orders", 0)] = (1, [1, 2, 3], [1])
    partitions[("orders", 1)] = (-1, [2, 3, 1], [])
    brokers = [
        FakeBroker(1, configs={"inter.broker.protocol.version": ("3.6-IV2", STATIC),
                               "log.message.format.version": ("3.0-IV1", DEFAULT)}),
        FakeBroker(2, metadata_level=LEVEL_3_5, configs={"inter.broker.protocol.version": ("3.5-IV2", DEFAULT),
                                                         "log.message.format.version": ("2.8", STATIC)}),
        FakeBroker(3, metadata_level=None),
    ]  # fmt: skip
    cluster = FakeCluster(brokers, partitions)
    with cluster.running() as bootstrap:
        live = ask_cluster(bootstrap, timeout=10)
    checks = run_checks(inputs, live_checks(inputs, live))
    found = by_id(checks)

    version = found["software-version"]
    assert version.is_blocker
    assert "broker 2" in details(version) and "Kafka 3.5" in details(version)
    assert "broker 3" in details(version) and "older than 3.3" in details(version)
    assert "broker 1" not in details(version)

    ibp = found["live-ibp"]
    assert ibp.is_blocker
    assert "inter.broker.protocol.version=3.6-IV2 (STATIC_BROKER_CONFIG) < 3.9-IV0" in details(ibp)
    assert "3.5-IV2 (DEFAULT_CONFIG)" in details(ibp)
    assert "brokers disagree" in details(ibp)
    # The brokers' files say 3.9: they are not what brokers 1 and 2 run with.
    drift = [e for e in ibp.evidence if e.where.startswith(str(tmp_path))]
    assert [e.where.rsplit("/", 1)[-1] for e in drift] == ["server-1.properties:5", "server-2.properties:5"]
    assert drift[0].detail == "the file says 3.9-IV0, broker 1 runs with 3.6-IV2"

    fmt = found["log-message-format"]
    assert (fmt.status, fmt.severity) == ("fail", "warning")
    assert [e.where.split(" ")[:2] for e in fmt.evidence] == [["broker", "2"]]
    assert "log.message.format.version=2.8 (STATIC_BROKER_CONFIG)" in details(fmt)

    offline = found["live-offline-partitions"]
    assert offline.is_blocker and [e.where for e in offline.evidence] == ["orders-1"]
    urp = found["live-under-replicated"]
    assert (urp.status, urp.severity) == ("fail", "warning")
    assert [e.where for e in urp.evidence] == ["orders-0"]
    assert "ISR [1] of replicas [1, 2, 3]" in details(urp)

    reach = found["live-broker-reachable"]
    assert reach.is_blocker
    assert [e.where for e in reach.evidence] == ["/brokers/ids/4"]
    # Blockers first.
    assert checks[: len(blockers(checks))] == blockers(checks)


def test_file_ibp_that_differs_from_the_running_one_is_a_warning(
    zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str, tmp_path: Path
) -> None:
    overrides = {3: {"inter.broker.protocol.version": "3.8"}}
    inputs, _, _ = zk_inputs(zk_admin, zk_server, zk_chroot, tmp_path, overrides=overrides)
    cluster = FakeCluster([FakeBroker(i) for i in (1, 2, 3)], healthy_partitions())
    with cluster.running() as bootstrap:
        live = ask_cluster(bootstrap, timeout=10)
    ibp = by_id(live_checks(inputs, live))["live-ibp"]
    assert (ibp.status, ibp.severity) == ("fail", "warning")
    assert [e.detail for e in ibp.evidence] == ["the file says 3.8-IV0, broker 3 runs with 3.9-IV0"]
    assert ibp.evidence[0].where.endswith("server-3.properties:10")


def test_broker_in_metadata_but_unreachable_is_a_blocker(
    zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str, tmp_path: Path
) -> None:
    inputs, _, _ = zk_inputs(zk_admin, zk_server, zk_chroot, tmp_path)
    dead = free_port()
    cluster = FakeCluster([FakeBroker(1), FakeBroker(2), FakeBroker(3, dead_port=dead)], healthy_partitions())
    with cluster.running() as bootstrap:
        live = ask_cluster(bootstrap, timeout=5)
    reach = by_id(live_checks(inputs, live))["live-broker-reachable"]
    assert reach.is_blocker
    assert [e.where for e in reach.evidence] == [f"broker 3 ({HOST}:{dead})"]
    assert "not reachable" in details(reach)
    # Brokers that answered were still judged.
    assert by_id(live_checks(inputs, live))["live-ibp"].status == "pass"


def test_bootstrap_server_of_another_cluster_is_named(
    zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str, tmp_path: Path
) -> None:
    inputs, _, _ = zk_inputs(zk_admin, zk_server, zk_chroot, tmp_path)
    cluster = FakeCluster(
        [FakeBroker(i) for i in (1, 2, 3)], healthy_partitions(), cluster_id="OtherClusterXXXXXXXXXX"
    )
    with cluster.running() as bootstrap:
        live = ask_cluster(bootstrap, timeout=10)
    reach = by_id(live_checks(inputs, live))["live-broker-reachable"]
    assert reach.is_blocker
    assert reach.evidence[0].where == bootstrap
    assert reach.evidence[0].detail == f"cluster id OtherClusterXXXXXXXXXX, but /cluster/id is {CLUSTER_ID}"


def test_cli_plan_with_bootstrap_server_reports_live_checks(
    zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str, tmp_path: Path
) -> None:
    _, connect, files = zk_inputs(zk_admin, zk_server, zk_chroot, tmp_path)
    partitions = healthy_partitions()
    partitions[("orders", 1)] = (-1, [2, 3, 1], [])
    cluster = FakeCluster([FakeBroker(i) for i in (1, 2, 3)], partitions)
    args = ["plan", "--zk", connect, "--controllers", CONTROLLERS, "--format", "json", "--live-timeout", "10"]
    for f in files:
        args += ["--broker-config", str(f)]
    with cluster.running() as bootstrap:
        result = CliRunner().invoke(cli, [*args, "--bootstrap-server", bootstrap])
    assert result.exit_code == 1, result.output
    plan = json.loads(result.stdout)
    checks = {c["id"]: c for c in plan["checks"]}
    assert checks["live-offline-partitions"]["status"] == "fail"
    assert checks["live-offline-partitions"]["evidence"][0]["where"] == "orders-1"
    assert checks["software-version"]["status"] == "pass"


@needs_openssl
def test_tls_listeners_are_asked_with_the_command_config(
    zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str, tmp_path: Path
) -> None:
    _, connect, files = zk_inputs(zk_admin, zk_server, zk_chroot, tmp_path)
    pki = new_pki(tmp_path / "pki").directory
    client = tmp_path / "client.properties"
    client.write_text(f"security.protocol=SSL\nssl.ca.location={pki / 'ca.crt'}\n", encoding="utf-8")
    cluster = FakeCluster(
        [FakeBroker(1), FakeBroker(2, metadata_level=LEVEL_3_5), FakeBroker(3)], healthy_partitions()
    )
    cluster.ssl_context = server_ssl_context(pki / "server.crt", pki / "server.key")
    args = ["plan", "--zk", connect, "--controllers", CONTROLLERS, "--format", "json", "--live-timeout", "10"]
    for f in files:
        args += ["--broker-config", str(f)]
    with cluster.running() as bootstrap:
        result = CliRunner().invoke(
            cli, [*args, "--bootstrap-server", bootstrap, "--command-config", str(client)]
        )
    assert result.exit_code == 1, result.output
    checks = {c["id"]: c for c in json.loads(result.stdout)["checks"]}
    assert checks["software-version"]["status"] == "fail"
    assert [e["where"].split(" ")[:2] for e in checks["software-version"]["evidence"]] == [["broker", "2"]]
    assert checks["live-ibp"]["status"] == "pass"
    assert checks["live-broker-reachable"]["status"] == "pass"


def test_sasl_listeners_with_a_jaas_command_config(
    zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str, tmp_path: Path
) -> None:
    """sasl.jaas.config's user and password log librdkafka in; ApiVersions is answered before authentication."""
    _, connect, _ = zk_inputs(zk_admin, zk_server, zk_chroot, tmp_path)
    cluster = FakeCluster([FakeBroker(i) for i in (1, 2, 3)], healthy_partitions())
    cluster.sasl = SaslConfig(mechanisms=("PLAIN",), plain_users={"admin": "admin-secret"})
    client = tmp_path / "client.properties"
    args = [
        "plan",
        "--zk",
        connect,
        "--format",
        "json",
        "--live-timeout",
        "5",
        "--command-config",
        str(client),
    ]
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="{}";'
    with cluster.running() as bootstrap:
        client.write_text(
            f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config={jaas.format('admin-secret')}\n",
            encoding="utf-8",
        )
        good = CliRunner().invoke(cli, [*args, "--bootstrap-server", bootstrap])
        client.write_text(
            f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config={jaas.format('wrong')}\n",
            encoding="utf-8",
        )
        bad = CliRunner().invoke(cli, [*args, "--live-timeout", "2", "--bootstrap-server", bootstrap])
    checks = {c["id"]: c for c in json.loads(good.stdout)["checks"]}
    assert {checks[cid]["status"] for cid in LIVE_CHECK_IDS} == {"pass"}, good.output
    assert bad.exit_code == 2, bad.output
    assert f"--bootstrap-server {bootstrap}: cannot read the cluster's metadata" in bad.output


def test_cli_unreachable_bootstrap_server_exits_2(
    zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str, tmp_path: Path
) -> None:
    _, connect, _ = zk_inputs(zk_admin, zk_server, zk_chroot, tmp_path)
    address = f"{HOST}:{free_port()}"
    result = CliRunner().invoke(
        cli, ["plan", "--zk", connect, "--bootstrap-server", address, "--live-timeout", "2"]
    )
    assert result.exit_code == 2, result.output
    assert f"--bootstrap-server {address}: cannot read the cluster's metadata" in result.output


def test_command_config_is_read_as_java_properties(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        '    username="admin" password="s3cr#t";\n'
        "ssl.ca.location=/etc/kafka/ca.pem\n",
        encoding="utf-8",
    )
    assert read_command_config(path) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "admin",
        "sasl.password": "s3cr#t",
        "ssl.ca.location": "/etc/kafka/ca.pem",
    }
    path.write_text(
        "security.protocol=SSL\nssl.keystore.password=x\nssl.cipher.suites=\nbogus.key=1\n", encoding="utf-8"
    )
    with pytest.raises(Zk2KraftError, match=r"--command-config: librdkafka refuses .*bogus\.key"):
        ask_cluster(f"{HOST}:{free_port()}", read_command_config(path), timeout=1)
    path.write_text("ssl.truststore.location=/etc/kafka/truststore.jks\n", encoding="utf-8")
    with pytest.raises(Zk2KraftError, match=r"ssl\.ca\.location"):
        read_command_config(path)


def test_no_bootstrap_server_leaves_live_checks_not_checked(
    zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str, tmp_path: Path
) -> None:
    inputs, _, _ = zk_inputs(zk_admin, zk_server, zk_chroot, tmp_path)
    found = by_id(run_checks(inputs))
    assert {found[cid].status for cid in LIVE_CHECK_IDS} == {"not-checked"}
    # Each says why it was not checked, so a reader is not left to guess at a silent pass.
    whys = {cid: [e.detail for e in found[cid].evidence] for cid in LIVE_CHECK_IDS}
    assert all(any("needs --bootstrap-server" in d for d in details) for details in whys.values()), whys
