"""Helpers shared by the audit tests: one Spark session per test process, clusters on both sides."""

from __future__ import annotations

import atexit
import dataclasses
import json
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from bench.generate_cluster import ClusterSpec, build_tree, generate_model
from migrate.kraft.batch import encode_kraft_batch
from migrate.kraft.framing import encode_control_record, encode_metadata_record
from migrate.kraft.image import AclBinding, MetadataImage, ScramCredential
from migrate.kraft.logdir import list_snapshots, write_segment
from migrate.kraft.reader import load_image
from migrate.kraft.snapshot import write_snapshot
from migrate.migration import migrate_to_metadata_dir
from migrate.zk.cluster import from_tree
from migrate.zk.dump import write_dump
from migrate.zk.model import MigrationState, ZkClusterModel
from migrate.zk.sources import ZkSource, read_source
from migrate.zk.tree import Stat, ZNode, ZTree
from migrate.zk.znodes.controller import encode_migration
from tests.support import FIXTURES
from validators.spark import build_session
from validators.tables import quota_entity_text

REAL = FIXTURES / "zk-real-kafka-3.5"
REAL_KRAFT = FIXTURES / "kraft-real-3.7"
"""A Kafka 3.7 node's metadata dir: one segment, offsets 0..4928, leader epoch 1, leader (node) 1."""
REAL_CHROOT = "/de-4-3-kafka-cluster"
PARTITION_DIR = "__cluster_metadata-0"


def shared_spark() -> SparkSession:
    """The test process's SparkSession (local[2], 2 shuffle partitions), started once, stopped at exit."""
    existing = SparkSession.getActiveSession()
    if existing is not None:
        return existing
    # Tests run many small audits: a JVM that skips its optimizing compiler starts working sooner.
    session = build_session("local[2]", shuffle_partitions=2, java_options="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
    atexit.register(session.stop)
    return session


def real_source() -> ZkSource:
    return ZkSource(data_dir=REAL, chroot=REAL_CHROOT)


def real_tree() -> ZTree:
    return read_source(real_source()).tree


def small_generated_model(seed: int = 7) -> ZkClusterModel:
    """A synthetic cluster with every kind of entity (quotas, SCRAM, ACLs, tokens, producer ids)."""
    spec = ClusterSpec(topics=6, partitions_per_topic=4, brokers=4, users=3, acl_resources=6, tokens=2, seed=seed)
    return generate_model(spec)


def tree_of(model: ZkClusterModel) -> ZTree:
    return build_tree(model, "/").kafka_tree()


def with_migration_znode(tree: ZTree, offset: int, epoch: int = 1, *, controller_id: int = 3000, controller_epoch: int = 1) -> ZTree:
    """The tree plus the /migration znode a KRaft controller writes (its recorded metadata offset)."""
    state = MigrationState(
        kraft_controller_id=controller_id, kraft_controller_epoch=controller_epoch, kraft_metadata_offset=offset, kraft_metadata_epoch=epoch
    )
    out = ZTree(source=tree.source, nodes=dict(tree.nodes), last_zxid=tree.last_zxid)
    out.nodes["/migration"] = ZNode("/migration", encode_migration(state), Stat(version=1))
    return out


def dump(tree: ZTree, path: Path) -> Path:
    write_dump(tree, path)
    return path


def migrate(model_or_tree: ZkClusterModel | ZTree, out: Path) -> Path:
    """The KRaft metadata directory `zk2kraft migrate` makes (log + snapshot at its last offset)."""
    model = model_or_tree if isinstance(model_or_tree, ZkClusterModel) else from_tree(model_or_tree)
    migrate_to_metadata_dir(model, out)
    return out


def rewrite_snapshot(meta_dir: Path, mutate: Callable[[MetadataImage], None]) -> Path:
    """Replace the newest snapshot of `meta_dir` by one of the mutated image (the project's writer)."""
    pdir = meta_dir / PARTITION_DIR
    image, _ = load_image(meta_dir)
    mutate(image)
    sid, path = list_snapshots(pdir)[-1]
    path.unlink()
    write_snapshot(pdir, image, end_offset=sid.end_offset, epoch=sid.epoch, timestamp_ms=1_700_000_000_000)
    return pdir / path.name


def drop_snapshots(meta_dir: Path) -> None:
    for _sid, path in list_snapshots(meta_dir / PARTITION_DIR):
        path.unlink()


def append_segment(meta_dir: Path, base_offset: int, batches: list[list[Any]], epoch: int = 1) -> None:
    """A new log segment at `base_offset`: each inner list is one batch of metadata records (or one
    control record). Records are (record, version) pairs."""
    out: list[bytes] = []
    offset = base_offset
    for batch in batches:
        if len(batch) == 1 and getattr(type(batch[0][0]), "CONTROL_TYPE", None) is not None:
            key, value = encode_control_record(batch[0][0])
            out.append(encode_kraft_batch(offset, epoch, 1_700_000_000_000, [(key, value)], True))
        else:
            values = [(None, encode_metadata_record(r, v)) for r, v in batch]
            out.append(encode_kraft_batch(offset, epoch, 1_700_000_000_000, values, False))
        offset += len(batch)
    write_segment(meta_dir / PARTITION_DIR, base_offset, out)


def copy_meta(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def summary(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return data


def discrepancy_rows(spark: SparkSession, out: Path) -> list[dict[str, Any]]:
    """Every row of discrepancies.parquet as a dict."""
    return [row.asDict() for row in spark.read.parquet(str(out / "discrepancies.parquet")).collect()]


def keyed(rows: list[dict[str, Any]], cls: str | None = None) -> set[tuple[str, str, str, str | None]]:
    """(table, key, kind, field) of the rows, optionally of one class only."""
    return {(r["table"], r["key"], r["kind"], r["field"]) for r in rows if cls is None or r["class"] == cls}


Keyed = set[tuple[str, str, str, str | None]]


def inject_divergences(model: ZkClusterModel, meta: Path) -> Keyed:
    """Rewrite the newest snapshot of `meta` (migrated from `model`) with one divergence of each kind;
    returns the (table, key, kind, field) the audit must report for them, as errors."""
    topics = sorted(model.topics)
    dropped_topic = next(t for t in topics if t not in model.topic_configs)
    grown, isr_topic, epoch_topic = [t for t in topics if t != dropped_topic and not t.startswith("__")][:3]
    config_topic = sorted(model.topic_configs)[0]
    config_key = sorted(model.topic_configs[config_topic].config)[0]
    quota_entity_path = sorted(p for p, q in model.client_quotas.items() if q.quotas)[0]
    quota_key = sorted(model.client_quotas[quota_entity_path].quotas)[0]
    scram_user, scram_mechanism = next(
        (str(q.entity["user"]), mechanism)
        for _path, q in sorted(model.client_quotas.items())
        for mechanism in sorted(q.scram)
    )
    expected: Keyed = set()

    def mutate(image: MetadataImage) -> None:
        # 1. a missing topic (and so its partitions)
        gone = image.topics_by_name.pop(dropped_topic)
        del image.topics_by_id[gone.topic_id]
        expected.add(("topics", f"topic={dropped_topic}", "missing_in_kraft", None))
        expected.update(("partitions", f"topic={dropped_topic} partition={p}", "missing_in_kraft", None) for p in gone.partitions)
        # 2. an extra partition
        partitions = image.topics_by_name[grown].partitions
        partitions[99] = dataclasses.replace(partitions[0])
        expected.add(("partitions", f"topic={grown} partition=99", "missing_in_zk", None))
        # 3. a changed ISR
        p = image.topics_by_name[isr_topic].partitions[0]
        image.topics_by_name[isr_topic].partitions[0] = dataclasses.replace(p, isr=p.isr[:1])
        assert p.isr[:1] != p.isr
        expected.add(("partitions", f"topic={isr_topic} partition=0", "mismatch", "isr"))
        # 4. a changed leader epoch
        p = image.topics_by_name[epoch_topic].partitions[1]
        image.topics_by_name[epoch_topic].partitions[1] = dataclasses.replace(p, leader_epoch=p.leader_epoch + 1)
        expected.add(("partitions", f"topic={epoch_topic} partition=1", "mismatch", "leader_epoch"))
        # 5. a dropped config
        del image.configs[(2, config_topic)][config_key]
        expected.add(("configs", f"resource_type=topic resource_name={config_topic} name={config_key}", "missing_in_kraft", None))
        # 6. an extra ACL
        image.acls[uuid.UUID(int=12345)] = AclBinding(2, "payments", 3, "User:mallory", "*", 4, 3)
        expected.add(
            ("acls", "resource_type=TOPIC resource_name=payments pattern_type=LITERAL principal=User:mallory host=* "
             "operation=WRITE permission_type=ALLOW", "missing_in_zk", None)
        )
        # 7. a changed quota
        entity = next(e for e in image.client_quotas if quota_key in image.client_quotas[e] and _matches(e, model, quota_entity_path))
        image.client_quotas[entity][quota_key] *= 2
        expected.add(("client_quotas", f"entity={_entity_text(entity)} key={quota_key}", "mismatch", "value"))
        # 8. a changed SCRAM iteration count
        mechanism_id = 1 if scram_mechanism == "SCRAM-SHA-256" else 2
        cred = image.scram[(scram_user, mechanism_id)]
        image.scram[(scram_user, mechanism_id)] = ScramCredential(cred.salt, cred.stored_key, cred.server_key, cred.iterations + 1)
        expected.add(("scram", f"user={scram_user} mechanism={scram_mechanism}", "mismatch", "iterations"))

    rewrite_snapshot(meta, mutate)
    return expected


def _entity_text(entity: tuple[tuple[str, str | None], ...]) -> str:
    return quota_entity_text(list(entity))


def _matches(entity: tuple[tuple[str, str | None], ...], model: ZkClusterModel, entity_path: str) -> bool:
    return dict(entity) == model.client_quotas[entity_path].entity


def baseline_expected(model: ZkClusterModel) -> Keyed:
    """What differs by design between a cluster and its migration: broker registrations, metadata.version."""
    brokers: Keyed = {("brokers", f"broker_id={b}", "missing_in_kraft", None) for b in model.brokers}
    return brokers | {("features", "name=metadata.version", "missing_in_zk", None)}
