"""Preflight checks: a healthy 3.9 cluster has no blocker; each bad layout or config names its evidence.

ZooKeeper layouts are seeded into a real ZooKeeper and read back live; config problems are crafted files.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from migrate.errors import ZnodeFormatError
from migrate.kraft.logdir import read_meta_properties
from migrate.plan.checks import CATALOG, blockers, run_checks
from migrate.plan.checks.registry import REGISTERED, Check, CheckSpec, check
from migrate.plan.inputs import PlanInputs, parse_controllers
from migrate.plan.load import load_inputs
from migrate.zk.cluster import from_tree
from migrate.zk.embedded import EmbeddedZooKeeper
from migrate.zk.model import LegacyReassignment, MigrationState, ReplicaReassignment, ZkClusterModel
from migrate.zk.sources import ZkSource, read_source
from migrate.zk.znodes.topics import format_uuid
from tests.support import FIXTURES, REPO
from tests.support.plan import CLUSTER_ID, healthy_model, seed, write_broker_files

pytestmark = pytest.mark.zookeeper

FIXTURE = FIXTURES / "zk-real-kafka-3.5"
CONTROLLERS = "3000@ctrl1:9093,3001@ctrl2:9093,3002@ctrl3:9093"


def plan_inputs(
    zk_admin: KazooClient,
    zk_server: EmbeddedZooKeeper,
    zk_chroot: str,
    tmp_path: Path,
    model: ZkClusterModel,
    *,
    overrides: dict[int, dict[str, str]] | None = None,
    controllers: str = CONTROLLERS,
) -> PlanInputs:
    chroot = zk_chroot + "/kafka"
    seed(zk_admin, model, chroot)
    connect = zk_server.connect_string + chroot
    files = write_broker_files(tmp_path, connect, overrides)
    return load_inputs(ZkSource(connect=connect), files, parse_controllers(controllers))


def failing(checks: list[Check], cid: str) -> Check:
    found = [c for c in checks if c.id == cid and c.status == "fail"]
    assert found, f"{cid} did not fail: {[(c.id, c.status) for c in checks]}"
    return found[0]


def test_healthy_39_cluster_has_no_blocker_and_every_check_reports(
    zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str, tmp_path: Path
) -> None:
    checks = run_checks(plan_inputs(zk_admin, zk_server, zk_chroot, tmp_path, healthy_model()))
    assert blockers(checks) == [], [c.model_dump() for c in blockers(checks)]
    assert [c for c in checks if c.status == "fail" and c.severity == "warning"] == []
    assert {c.id for c in checks} == set(CATALOG)
    # Live reads fetch the ACLs of the znodes the controllers touch: open ACLs pass.
    assert next(c for c in checks if c.id == "zk-acls").status == "pass"


def test_each_producer_reports_exactly_the_ids_it_is_registered_with(
    zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str, tmp_path: Path
) -> None:
    inputs = plan_inputs(zk_admin, zk_server, zk_chroot, tmp_path, healthy_model())
    for registered in REGISTERED:
        reported = {c.id for c in registered.produce(inputs)}
        assert reported == {spec.id for spec in registered.specs}, registered.produce.__name__


def test_an_id_registered_twice_is_refused() -> None:
    taken = next(iter(CATALOG.values()))
    with pytest.raises(ValueError, match=taken.id):
        check(CheckSpec(taken.id, "again", "a second producer for the same id"))(lambda _inputs: [])


def _leftover_migration(m: ZkClusterModel) -> str:
    m.migration = MigrationState(3000, 5, 1234, 5)
    return "/migration"


def _kraft_controller(m: ZkClusterModel) -> str:
    assert m.controller is not None
    m.controller = dataclasses.replace(m.controller, broker_id=3000, kraft_controller_epoch=7)
    return "/controller"


def _topic_without_id(m: ZkClusterModel) -> str:
    m.topics["orders"].topic_id = None
    return "/brokers/topics/orders"


def _partition_without_state(m: ZkClusterModel) -> str:
    del m.topics["orders"].states[1]
    return "/brokers/topics/orders/partitions/1/state"


def _unregistered_broker(m: ZkClusterModel) -> str:
    m.topics["orders"].partitions[0] = [1, 2, 7]
    return "/brokers/topics/orders/partitions/0"


def _legacy_reassignment(m: ZkClusterModel) -> str:
    m.legacy_reassignment = LegacyReassignment([ReplicaReassignment("orders", 0, [3, 2, 1])])
    return "/admin/reassign_partitions"


def _generated_broker_id(m: ZkClusterModel) -> str:
    m.brokers[1001] = dataclasses.replace(m.brokers[3], broker_id=1001)
    return "/brokers/ids/1001"


def _no_cluster_id(m: ZkClusterModel) -> str:
    m.cluster_id = None
    return "/cluster/id"


ZK_BLOCKERS: list[tuple[str, Callable[[ZkClusterModel], str]]] = [
    ("migration-znode", _leftover_migration),
    ("kraft-controller", _kraft_controller),
    ("topic-id", _topic_without_id),
    ("partition-state", _partition_without_state),
    ("unregistered-broker", _unregistered_broker),
    ("pending-reassignment", _legacy_reassignment),
    ("broker-id", _generated_broker_id),
    ("cluster-id", _no_cluster_id),
]


@pytest.mark.parametrize(("cid", "mutate"), ZK_BLOCKERS, ids=[c for c, _ in ZK_BLOCKERS])
def test_zookeeper_layout_blockers_name_the_znode(
    cid: str,
    mutate: Callable[[ZkClusterModel], str],
    zk_admin: KazooClient,
    zk_server: EmbeddedZooKeeper,
    zk_chroot: str,
    tmp_path: Path,
) -> None:
    model = healthy_model()
    where = mutate(model)
    check = failing(run_checks(plan_inputs(zk_admin, zk_server, zk_chroot, tmp_path, model)), cid)
    assert check.severity == "blocker"
    assert any(e.where == where for e in check.evidence), check.evidence
    assert check.remediation


def test_zookeeper_layout_warnings(
    zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str, tmp_path: Path
) -> None:
    model = healthy_model()
    model.pending_topic_deletions.add("orders")
    model.topics["__consumer_offsets"].partitions = {0: [1], 1: [2], 2: [3]}
    model.topics["__consumer_offsets"].states = {
        p: dataclasses.replace(s, isr=[p + 1], leader=p + 1) for p, s in model.topics["__consumer_offsets"].states.items()
    }
    model.topics["orders"].states[0].isr = [model.topics["orders"].partitions[0][0]]
    model.topics["orders"].states[1].leader = -1
    checks = run_checks(plan_inputs(zk_admin, zk_server, zk_chroot, tmp_path, model))
    assert blockers(checks) == []
    assert failing(checks, "pending-deletion").evidence[0].where == "/admin/delete_topics/orders"
    rf = failing(checks, "internal-topic-rf")
    assert rf.evidence[0].where == "/brokers/topics/__consumer_offsets" and "1" in rf.evidence[0].detail
    assert failing(checks, "under-replicated").evidence[0].where == "/brokers/topics/orders/partitions/0/state"
    assert failing(checks, "offline-partitions").evidence[0].where == "/brokers/topics/orders/partitions/1/state"


CONFIG_CASES: list[tuple[str, dict[str, str], str, str]] = [
    # (check id, broker-1 overrides, expected severity, text the evidence must contain)
    ("ibp-version", {"inter.broker.protocol.version": "3.5"}, "blocker", "3.5-IV2 < 3.6-IV1"),
    ("ibp-version", {"inter.broker.protocol.version": "3.7"}, "blocker", "3.7-IV4 < 3.9-IV0"),
    ("ibp-consistent", {"inter.broker.protocol.version": "3.9-IV0"}, "pass", ""),
    ("broker-id", {"broker.id": "1 # first broker"}, "blocker", "not a number"),
    ("broker-id", {"broker.id": "2"}, "blocker", "broker.id=2 is set in 2 files"),
    ("broker-id", {"broker.id": "1500"}, "blocker", "not greater than reserved.broker.max.id=1000"),
    ("config-value", {"num.partitions": "3 # default"}, "blocker", "not a number of type INT"),
    ("inline-comment", {"log.dirs": "/data # disk 1"}, "warning", "'# disk 1'"),
    ("authorizer", {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}, "warning", "StandardAuthorizer"),
    ("authorizer", {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}, "blocker", "KRaft"),
    ("jbod", {"log.dirs": "/d1,/d2", "inter.broker.protocol.version": "3.7-IV1"}, "blocker", "3.7-IV2"),
    ("jbod", {"log.dirs": "/d1,/d2"}, "warning", "early access"),
    ("control-plane-listener", {"control.plane.listener.name": "CONTROL"}, "warning", "CONTROL"),
    ("controller-listener", {"listeners": "PLAINTEXT://:9092,CONTROLLER://:9093"}, "blocker", "CONTROLLER"),
    ("controller-listener", {"listeners": "INTERNAL://:9093"}, "blocker", "no security protocol"),
    ("chroot", {"zookeeper.connect": "zk:2181/other"}, "blocker", "chroot '/other'"),
    ("kraft-config", {"process.roles": "broker"}, "blocker", "process.roles=broker"),
    # Kafka 3.9's migration guide gives the ZK broker CONTROLLER:PLAINTEXT before the migration starts.
    ("controller-listener", {"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"}, "pass", ""),
    ("controller-listener", {"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL"}, "blocker", "CONTROLLER:SSL"),
    # KafkaConfig: with id generation (the default) -1 <= broker.id <= reserved.broker.max.id; without it only >= 0.
    ("broker-id", {"reserved.broker.max.id": "0"}, "blocker", "not greater than reserved.broker.max.id=0"),
    ("broker-id", {"broker.id": "1500", "broker.id.generation.enable": "false"}, "pass", ""),
    ("broker-id", {"broker.id": "-1", "broker.id.generation.enable": "false"}, "blocker", "broker.id must be greater than or equal to 0"),
    ("config-value", {"reserved.broker.max.id": "-1"}, "blocker", "Value must be at least 0"),
    ("config-value", {"listeners": "PLAINTEXT://:9092,plaintext://:9093"}, "blocker", "Each listener must have a different name"),
    ("config-value", {"advertised.listeners": "PLAINTEXT://a:9092,PLAINTEXT://b:9092"}, "blocker", "different name"),
    ("config-value", {"log.dirs": ""}, "blocker", "At least one log directory must be defined via log.dirs or log.dir"),
    ("config-value", {"log.dirs": " , "}, "blocker", "At least one log directory"),
    ("config-value", {"listeners": "PLAINTEXT://:9092,INTERNAL://:9092", "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT"}, "blocker", "different port (port 9092)"),
    ("config-value", {"listeners": "PLAINTEXT://127.0.0.1:9092,INTERNAL://[::1]:9092", "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT"}, "pass", ""),
    ("config-value", {"advertised.listeners": "PLAINTEXT://a:9092,INTERNAL://b:9092", "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT"}, "pass", ""),
    ("duplicate-key", {"broker.id": "1"}, "warning", "broker.id is set again at line 10"),
]


@pytest.mark.parametrize(("cid", "extra", "severity", "text"), CONFIG_CASES)
def test_broker_config_problems_name_file_and_line(
    cid: str,
    extra: dict[str, str],
    severity: str,
    text: str,
    zk_admin: KazooClient,
    zk_server: EmbeddedZooKeeper,
    zk_chroot: str,
    tmp_path: Path,
) -> None:
    checks = run_checks(plan_inputs(zk_admin, zk_server, zk_chroot, tmp_path, healthy_model(), overrides={1: extra}))
    if severity == "pass":
        assert all(c.status == "pass" for c in checks if c.id == cid)
        return
    check = failing(checks, cid)
    assert check.severity == severity
    details = " | ".join(f"{e.where} {e.detail}" for e in check.evidence)
    assert text in details
    if cid not in ("broker-id",) or "files" not in text:
        # Evidence points at the file and line that set the key (overrides are the last lines).
        assert "server-1.properties:" in details or "server-2.properties" in details


def _bad_topic_json(admin: KazooClient, chroot: str) -> str:
    admin.set(chroot + "/brokers/topics/orders", b'{"version":3,"partitions":{"0":[1,2')
    return "/brokers/topics/orders"


def _bad_partition_state(admin: KazooClient, chroot: str) -> str:
    admin.set(chroot + "/brokers/topics/orders/partitions/1/state", b'{"leader":"one"}')
    return "/brokers/topics/orders/partitions/1/state"


def _topic_without_data(admin: KazooClient, chroot: str) -> str:
    admin.set(chroot + "/brokers/topics/orders", None)
    return "/brokers/topics/orders"


MALFORMED: list[Callable[[KazooClient, str], str]] = [_bad_topic_json, _bad_partition_state, _topic_without_data]


@pytest.mark.parametrize("damage", MALFORMED, ids=[d.__name__.lstrip("_") for d in MALFORMED])
def test_malformed_znode_the_migration_reads_is_a_blocker_naming_it(
    damage: Callable[[KazooClient, str], str],
    zk_admin: KazooClient,
    zk_server: EmbeddedZooKeeper,
    zk_chroot: str,
    tmp_path: Path,
) -> None:
    chroot = zk_chroot + "/kafka"
    seed(zk_admin, healthy_model(), chroot)
    where = damage(zk_admin, chroot)
    connect = zk_server.connect_string + chroot
    inputs = load_inputs(ZkSource(connect=connect), write_broker_files(tmp_path, connect), parse_controllers(CONTROLLERS))
    check = failing(run_checks(inputs), "znode-format")
    assert check.severity == "blocker"
    assert [e.where for e in check.evidence] == [where]
    assert check.evidence[0].detail and check.remediation


def test_migrate_refuses_the_znodes_plan_blocks_on(
    zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str
) -> None:
    # The same damaged znode stops `migrate` (strict read): the plan must not call that cluster ready.
    chroot = zk_chroot + "/kafka"
    seed(zk_admin, healthy_model(), chroot)
    where = _bad_topic_json(zk_admin, chroot)
    tree = read_source(ZkSource(connect=zk_server.connect_string + chroot)).tree
    with pytest.raises(ZnodeFormatError) as raised:
        from_tree(tree)
    assert raised.value.path == where


def test_notification_znodes_kafka_ignores_are_no_blocker(
    zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str, tmp_path: Path
) -> None:
    chroot = zk_chroot + "/kafka"
    seed(zk_admin, healthy_model(), chroot)
    zk_admin.create(chroot + "/isr_change_notification/isr_change_0000000001", b"garbage", makepath=True)
    connect = zk_server.connect_string + chroot
    inputs = load_inputs(ZkSource(connect=connect), write_broker_files(tmp_path, connect), parse_controllers(CONTROLLERS))
    assert inputs.model.warnings  # read leniently, and said so
    assert next(c for c in run_checks(inputs) if c.id == "znode-format").status == "pass"


def test_cluster_id_without_meta_properties_is_not_checked(
    zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str, tmp_path: Path
) -> None:
    inputs = plan_inputs(zk_admin, zk_server, zk_chroot, tmp_path, healthy_model())
    check = next(c for c in run_checks(inputs) if c.id == "cluster-id")
    assert check.status == "not-checked"
    assert "no meta.properties" in check.evidence[0].detail and "--meta-properties" in check.evidence[0].detail
    meta = tmp_path / "meta.properties"
    meta.write_text(f"version=0\nbroker.id=1\ncluster.id={CLUSTER_ID}\n", encoding="utf-8")
    inputs.meta_properties = [(str(meta), read_meta_properties(meta))]
    check = next(c for c in run_checks(inputs) if c.id == "cluster-id")
    assert check.status == "pass" and "1 meta.properties" in check.evidence[0].detail


def test_controller_id_collision_and_quorum(
    zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str, tmp_path: Path
) -> None:
    checks = run_checks(
        plan_inputs(zk_admin, zk_server, zk_chroot, tmp_path, healthy_model(), controllers="3@c1:9093,3001@c2:9093")
    )
    collision = failing(checks, "controller-id-collision")
    assert collision.severity == "blocker"
    assert any(e.where == "/brokers/ids/3" for e in collision.evidence)
    assert any("server-3.properties:2" in e.where for e in collision.evidence)
    assert failing(checks, "controller-quorum").severity == "warning"


def test_encrypted_dynamic_password_needs_the_encoder_secret(
    zk_admin: KazooClient, zk_server: EmbeddedZooKeeper, zk_chroot: str, tmp_path: Path
) -> None:
    from migrate.zk.model import EntityConfig

    model = healthy_model()
    model.broker_configs["1"] = EntityConfig(
        "brokers", "1", {"listener.name.internal.ssl.key.password": "encryptedPassword:abc,salt:x,iterations:4096"}
    )
    checks = run_checks(plan_inputs(zk_admin, zk_server, zk_chroot, tmp_path, model))
    check = failing(checks, "password-encoder")
    assert check.severity == "blocker" and check.evidence[0].where == "/config/brokers/1"


def test_real_kafka_35_server_properties_gets_the_blockers_it_deserves() -> None:
    source = ZkSource(data_dir=FIXTURE, chroot="/de-4-3-kafka-cluster")
    inputs = load_inputs(source, [FIXTURE / "server.properties"], parse_controllers(CONTROLLERS))
    checks = run_checks(inputs)
    ids = {c.id for c in blockers(checks)}
    # Inline comments break broker.id, the listener list, typed values and the chroot.
    assert ids == {"broker-id", "config-value", "chroot"}
    config = failing(checks, "config-value")
    lines = {e.where.rsplit(":", 1)[-1] for e in config.evidence}
    assert {"24", "38", "68", "77"} <= lines  # broker.id, advertised.listeners, num.partitions, offsets RF
    chroot = failing(checks, "chroot")
    assert "/de-4-3-kafka-cluster # " in chroot.evidence[0].detail
    warnings = {c.id for c in checks if c.status == "fail" and c.severity == "warning"}
    assert {"inline-comment", "internal-topic-rf", "ibp-version", "broker-config-coverage"} <= warnings
    rf = failing(checks, "internal-topic-rf")
    assert any(e.where == "/brokers/topics/__consumer_offsets" and "1" in e.detail for e in rf.evidence)
    comments = failing(checks, "inline-comment")
    assert any(e.where.endswith(":77") for e in comments.evidence)  # `1 ㅇ# ...` counts too
    # Offline data dirs carry ACLs: Kafka's znodes there are open.
    assert next(c for c in checks if c.id == "zk-acls").status == "pass"


def test_topic_id_factory_is_stable() -> None:
    # The harness's ids are deterministic, so evidence in failures is reproducible.
    assert healthy_model().topics["orders"].topic_id == uuid.uuid5(uuid.NAMESPACE_DNS, "orders")
    assert format_uuid(uuid.UUID(int=1))


def test_docs_list_every_check_id() -> None:
    doc = (REPO / "docs/plan.md").read_text(encoding="utf-8")
    assert all(f"`{cid}`" in doc for cid in CATALOG)
