"""The synthetic-cluster generator (bench/generate_cluster.py): its snapshot, its live load, and migrate on it."""

from __future__ import annotations

import base64
import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from kazoo.client import KazooClient

from bench.generate_cluster import (
    ClusterSpec,
    GeneratedCluster,
    generate,
    load_into_zookeeper,
    main,
    scram_credential,
    write_data_dir,
)
from cli.main import cli
from migrate.zk.cluster import from_tree, from_tree_at
from migrate.zk.embedded import EmbeddedZooKeeper
from migrate.zk.live import read_tree
from migrate.zk.model import PatternType, ZkClusterModel
from migrate.zk.restore import load_data_dir

SPEC = ClusterSpec(topics=12, partitions_per_topic=5, brokers=5, replication_factor=3, seed=7)
CHROOT = "/kafka"


@pytest.fixture(scope="module")
def cluster() -> GeneratedCluster:
    return generate(SPEC, CHROOT)


@pytest.fixture(scope="module")
def data_dir(cluster: GeneratedCluster, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("generated") / "data"
    write_data_dir(cluster, folder)
    return folder


def without_session_facts(model: ZkClusterModel) -> ZkClusterModel:
    """The model minus what only a broker's own session can produce (czxid = broker epoch, owners)."""
    out = dataclasses.replace(model)
    out.brokers = {
        b: dataclasses.replace(reg, czxid=0, ephemeral_owner=0) for b, reg in model.brokers.items()
    }
    if model.controller is not None:
        out.controller = dataclasses.replace(model.controller, ephemeral_owner=0)
    return out


# ------------------------------------------------------------------ the snapshot, offline


def test_snapshot_reads_back_as_the_generated_model(cluster: GeneratedCluster, data_dir: Path) -> None:
    tree, report = load_data_dir(data_dir)
    assert report.warnings == [] and report.orphan_ephemerals_removed == []
    assert report.snapshot_digest == "verified"  # the tree digest ZooKeeper would check on load
    model = from_tree_at(tree, CHROOT)
    assert model.warnings == []
    assert model == cluster.model
    assert len(model.topics) == 12 and model.partition_count == 60
    assert len(model.brokers) == 5 and model.controller is not None
    assert model.controller.broker_id in model.brokers
    # Ephemerals survive the load because their sessions are in the snapshot, as after a clean shutdown.
    for broker in model.brokers.values():
        assert broker.ephemeral_owner in report.sessions and broker.czxid > 0
    assert tree.get(CHROOT) is not None and tree.get("/zookeeper") is not None


def test_generated_cluster_covers_every_kind_of_kafka_metadata(cluster: GeneratedCluster) -> None:
    m = cluster.model
    assert m.cluster_id and m.controller_epoch is not None and m.features is not None
    assert m.producer_id_block is not None and m.producer_id_block.block_end % 1000 == 999
    assert "<default>" in m.broker_configs and len(m.broker_configs) > 1
    assert m.topic_configs, "some topics carry configs"
    kinds = {
        q.entity_path.split("/")[0] + ("/clients" if "/clients/" in q.entity_path else "")
        for q in m.client_quotas.values()
    }
    assert kinds == {"users", "clients", "ips", "users/clients"}
    assert {"users/<default>", "clients/<default>", "ips/<default>"} <= set(m.client_quotas)
    mechanisms = {mech for q in m.client_quotas.values() for mech in q.scram}
    assert mechanisms == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
    assert {p.pattern_type for p in m.acls} == {PatternType.LITERAL, PatternType.PREFIXED}
    assert len({p.resource_type for p in m.acls}) >= 5
    assert max(len(r.acls) for r in m.acls.values()) > 100  # Kafka cuts ACL lists at 100
    assert len(m.delegation_tokens) == 2


def test_partition_states_are_consistent_with_assignments(cluster: GeneratedCluster) -> None:
    for topic in cluster.model.topics.values():
        assert topic.topic_id is not None and set(topic.states) == set(topic.partitions)
        for p, replicas in topic.partitions.items():
            state = topic.states[p]
            assert len(set(replicas)) == 3 and set(replicas) <= set(cluster.model.brokers)
            assert set(state.isr) <= set(replicas) and state.isr
            assert state.leader == -1 or state.leader in state.isr
            assert state.partition_epoch >= state.leader_epoch >= 0
            assert 1 <= state.controller_epoch <= cluster.model.controller_epoch.epoch  # type: ignore[union-attr]
    # Leaders are spread over brokers like Kafka's assignment: every broker leads something.
    firsts = {r[0] for t in cluster.model.topics.values() for r in t.partitions.values()}
    assert firsts == set(cluster.model.brokers)


def test_same_seed_same_bytes_other_seed_other_cluster(tmp_path: Path, data_dir: Path) -> None:
    again = generate(SPEC, CHROOT)
    write_data_dir(again, tmp_path / "a")
    (original,) = (data_dir / "version-2").iterdir()
    (repeat,) = (tmp_path / "a" / "version-2").iterdir()
    assert repeat.name == original.name and repeat.read_bytes() == original.read_bytes()
    other = generate(dataclasses.replace(SPEC, seed=8), CHROOT)
    assert other.model.cluster_id != again.model.cluster_id
    assert other.model.topics != again.model.topics


def test_scram_credentials_match_kafkas_documented_example() -> None:
    # zk-layout.md §4.7: password alice-secret, 8192 iterations, SCRAM-SHA-256.
    salt = base64.b64decode("MXJicGtkdGcwZm83aGhhYTlmc3NqYjl2azE=")
    cred = scram_credential("SCRAM-SHA-256", "alice-secret", salt, 8192)
    assert base64.b64encode(cred.stored_key).decode() == "7VkSPRPlbIHTfTYMtCm/FrMhmk7hxcJVyFoZ9cATT4I="
    assert base64.b64encode(cred.server_key).decode() == "Hh1VMRx3VQgte1aXZrbVWQw/NviNAixrN7oO8AOAQ2A="


def test_command_line_writes_a_data_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "zk"
    assert main(["--topics", "3", "--partitions-per-topic", "2", "--out", str(out), "--seed", "1"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["topics"] == 3 and result["partitions"] == 6 and result["chroot"] == "/"
    tree, _ = load_data_dir(out)
    assert from_tree(tree).partition_count == 6


# ------------------------------------------------------------------ zk2kraft migrate on the snapshot


def test_migrate_on_the_generated_data_dir(cluster: GeneratedCluster, data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "meta"
    result = CliRunner().invoke(
        cli,
        [
            "migrate",
            "--zk-data-dir",
            str(data_dir),
            "--chroot",
            CHROOT,
            "--out",
            str(out),
            "--format",
            "json",
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    m = cluster.model
    expected = {
        "TOPIC_RECORD": 12,
        "PARTITION_RECORD": 60,
        "CONFIG_RECORD": sum(len(c.config) for c in [*m.topic_configs.values(), *m.broker_configs.values()]),
        "CLIENT_QUOTA_RECORD": sum(len(q.quotas) for q in m.client_quotas.values()),
        "PRODUCER_IDS_RECORD": 1,
        "ACCESS_CONTROL_ENTRY_RECORD": sum(len(r.acls) for r in m.acls.values()),
        "USER_SCRAM_CREDENTIAL_RECORD": sum(len(q.scram) for q in m.client_quotas.values()),
        "DELEGATION_TOKEN_RECORD": 2,
    }
    assert report["manifest"]["record_types"] == expected
    assert report["cluster_id"] == m.cluster_id and report["warnings"] == []


# ------------------------------------------------------------------ the live path


@pytest.mark.zookeeper
def test_live_load_reads_back_as_the_same_model(
    cluster: GeneratedCluster, zk_server: EmbeddedZooKeeper, zk_admin: KazooClient, zk_chroot: str
) -> None:
    report = load_into_zookeeper(cluster, zk_admin, zk_chroot)
    assert report.created == len(cluster.kafka_tree()) - 1  # all but the chroot itself
    tree = read_tree(zk_server.connect_string, chroot=zk_chroot, acls=False)
    live = from_tree(tree)
    # Partition epochs (state znode versions) and other data versions were restored by the load.
    assert without_session_facts(live) == without_session_facts(cluster.model)
    assert any(s.zk_version > 0 for t in live.topics.values() for s in t.states.values())


@pytest.mark.zookeeper
def test_zookeeper_starts_from_the_generated_snapshot(
    cluster: GeneratedCluster, data_dir: Path, tmp_path: Path
) -> None:
    base = tmp_path / "server"
    (base / "data").mkdir(parents=True)
    write_data_dir(cluster, base / "data")
    with EmbeddedZooKeeper(base) as server:
        tree = read_tree(server.connect_string, chroot=CHROOT, acls=False)
    assert from_tree(tree) == cluster.model  # ephemerals kept: their sessions are in the snapshot
