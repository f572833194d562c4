"""Helpers shared by the audit tests: one Spark session per test process, clusters on both sides."""

from __future__ import annotations

import atexit
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from bench.generate_cluster import ClusterSpec, build_tree, generate_model
from migrate.kraft.batch import encode_kraft_batch
from migrate.kraft.framing import encode_control_record, encode_metadata_record
from migrate.kraft.image import MetadataImage
from migrate.kraft.logdir import list_snapshots, write_segment
from migrate.kraft.reader import load_image
from migrate.kraft.snapshot import write_snapshot
from migrate.migration import migrate_to_metadata_dir
from migrate.zk.cluster import from_tree
from migrate.zk.dump import write_dump
from migrate.zk.model import MigrationState, ZkClusterModel
from migrate.zk.sources import ZkSource, read_source
from migrate.zk.tree import Stat, ZNode, ZTree
from migrate.zk.znodes import encode_migration
from validators.spark import build_session

REAL = Path(__file__).parent / "fixtures" / "zk-real-kafka-3.5"
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


def with_migration_znode(tree: ZTree, offset: int, epoch: int = 1) -> ZTree:
    """The tree plus the /migration znode a KRaft controller writes (its recorded metadata offset)."""
    state = MigrationState(kraft_controller_id=3000, kraft_controller_epoch=1, kraft_metadata_offset=offset, kraft_metadata_epoch=epoch)
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
