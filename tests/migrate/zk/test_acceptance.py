"""Acceptance: the real Kafka 3.5 ZooKeeper snapshots, read offline, loaded into a live ZooKeeper
with `zk load` and read back live, give the identical model and the identical migrated records."""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner
from kazoo.client import KazooClient

from cli.main import cli
from migrate.kraft import records as rec
from migrate.kraft.metadata_version import parse as parse_mv
from migrate.translate import translate
from migrate.zk.cluster import from_tree
from migrate.zk.embedded import EmbeddedZooKeeper
from migrate.zk.live import read_tree
from migrate.zk.model import ZkClusterModel
from migrate.zk.restore import load_data_dir
from tests.support import FIXTURES

pytestmark = pytest.mark.zookeeper

FIXTURE = FIXTURES / "zk-real-kafka-3.5"
CHROOT = "/de-4-3-kafka-cluster"


def comparable(model: ZkClusterModel) -> ZkClusterModel:
    """The model minus what no copy can reproduce: the session and creating zxid of ephemeral znodes."""
    brokers = {i: dataclasses.replace(b, czxid=0, ephemeral_owner=0) for i, b in model.brokers.items()}
    controller = model.controller and dataclasses.replace(model.controller, ephemeral_owner=0)
    return dataclasses.replace(model, brokers=brokers, controller=controller)


def migrated_records(model: ZkClusterModel) -> list[tuple[str, object, int]]:
    fixed = uuid.UUID(int=1)
    result = translate(model, metadata_version=parse_mv("3.9-IV0"), acl_id_factory=lambda: fixed)
    return [(type(r).__name__, r, v) for batch in result.record_lists for r, v in batch]


@pytest.fixture(scope="module")
def offline_model() -> ZkClusterModel:
    tree, _report = load_data_dir(FIXTURE)
    return from_tree(tree.with_chroot(CHROOT))


def test_offline_model_has_the_real_cluster(offline_model: ZkClusterModel) -> None:
    assert offline_model.cluster_id == "esQVtsr4Sh6LSPhdkKjbNw"
    assert sorted(offline_model.brokers) == [1, 2, 3]
    assert sorted(offline_model.topics) == ["__consumer_offsets", "current_stock"]
    assert len(offline_model.topics["__consumer_offsets"].partitions) == 50
    assert len(offline_model.topics["current_stock"].partitions) == 3


def test_zk_load_then_live_read_gives_the_identical_model_and_records(
    offline_model: ZkClusterModel, zk_server: EmbeddedZooKeeper, zk_admin: KazooClient, zk_chroot: str, tmp_path: Path
) -> None:
    # Through the real commands: export offline to a dump, load the dump into ZooKeeper.
    dump = tmp_path / "sample.jsonl"
    runner = CliRunner()
    result = runner.invoke(cli, ["zk", "export", "--zk-data-dir", str(FIXTURE), "--chroot", CHROOT, "-o", str(dump)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(cli, ["zk", "load", str(dump), "--zk", zk_server.connect_string + zk_chroot])
    assert result.exit_code == 0, result.output

    live_model = from_tree(read_tree(zk_server.connect_string + zk_chroot, acls=False))
    assert comparable(live_model) == comparable(offline_model)
    assert migrated_records(live_model) == migrated_records(offline_model)


def test_migrated_records_carry_ids_assignments_leaders_isr_epochs_configs(offline_model: ZkClusterModel) -> None:
    records = migrated_records(offline_model)
    topics = {r.name: r.topic_id for name, r, _ in records if name == "TopicRecord"}
    assert set(topics) == {"__consumer_offsets", "current_stock"}
    for name, topic in offline_model.topics.items():
        assert str(topics[name]) == str(topic.topic_id) or topics[name] == topic.topic_id
    partitions = [r for name, r, v in records if name == "PartitionRecord" and v == 0]
    assert len(partitions) == 53
    by_key = {(r.topic_id, r.partition_id): r for r in partitions}
    for topic in offline_model.topics.values():
        for pid, state in topic.states.items():
            record = by_key[(topics[topic.name], pid)]
            assert record.replicas == list(topic.partitions[pid])
            assert record.leader == state.leader
            assert record.isr == list(state.isr)
            assert record.leader_epoch == state.leader_epoch
            assert record.partition_epoch == state.zk_version
    configs = [r for name, r, _ in records if name == "ConfigRecord"]
    assert configs and all(c.resource_type == 2 for c in configs)
    assert all(isinstance(r, rec.TopicRecord | rec.PartitionRecord | rec.ConfigRecord) for _, r, _ in records)
