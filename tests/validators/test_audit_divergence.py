"""Acceptance: divergences injected into a KRaft snapshot are reported exactly, with the right class; lag
after the /migration offset is told apart from drift; aborted and unfinished transactions are not state."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

from cli.main import cli
from migrate.kraft import records as rec
from migrate.kraft.reader import load_image
from migrate.zk.model import ZkClusterModel
from tests.support.audit import (
    append_segment,
    baseline_expected,
    copy_meta,
    discrepancy_rows,
    dump,
    inject_divergences,
    keyed,
    migrate,
    shared_spark,
    small_generated_model,
    summary,
    tree_of,
    with_migration_znode,
)

pytestmark = pytest.mark.spark


@pytest.fixture(scope="session")
def spark() -> SparkSession:
    return shared_spark()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> tuple[ZkClusterModel, Path, Path]:
    """A generated cluster (every entity kind): its model, a ZooKeeper dump and the migrated KRaft dir."""
    base = tmp_path_factory.mktemp("generated")
    model = small_generated_model()
    return model, dump(tree_of(model), base / "cluster.jsonl"), migrate(model, base / "meta")


def audit(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["audit", *args], catch_exceptions=False)
    return result.exit_code, result.stdout + result.stderr  # the report first; progress lines go to stderr


def test_injected_divergences_are_reported_exactly(spark: SparkSession, cluster: tuple[ZkClusterModel, Path, Path], tmp_path: Path) -> None:
    model, zk_dump, meta = cluster
    meta = copy_meta(meta, tmp_path / "meta")
    expected = inject_divergences(model, meta)
    out = tmp_path / "audit"
    code, output = audit("--zk-dump", str(zk_dump), "--kraft", str(meta), "--out", str(out))
    assert code == 1, output
    assert output.startswith("INCONSISTENT")
    found = discrepancy_rows(spark, out)
    assert keyed(found, "error") == expected
    # Every row says why it is what it is; an error row names its kind of difference.
    assert all(r["reason"] for r in found)
    assert all("ZooKeeper" in r["reason"] for r in found if r["class"] == "error")
    assert keyed(found, "expected") == baseline_expected(model)
    assert not keyed(found, "lag")
    s = summary(out)
    assert s["verdict"] == "inconsistent" and s["classes"]["error"] == len(expected)
    isr_row = next(r for r in found if r["field"] == "isr")
    assert isr_row["zk_value"].startswith("[") and isr_row["kraft_value"].count(",") == 0
    # Secrets never reach the outputs: SCRAM rows show iterations, credentials only as digests.
    page = (out / "report.html").read_text()
    assert "INCONSISTENT" in page[: page.index("<h2>")]
    for cred in (c for q in model.client_quotas.values() for c in q.scram.values()):
        assert cred.salt.hex() not in page and cred.stored_key.hex() not in page


def test_lag_after_the_migration_offset_and_transactions(spark: SparkSession, cluster: tuple[ZkClusterModel, Path, Path], tmp_path: Path) -> None:
    model, _dump, meta = cluster
    meta = copy_meta(meta, tmp_path / "meta")
    image, _ = load_image(meta)
    last = image.provenance.last_contained_offset
    # ZooKeeper caught up to `last` (its /migration znode says so); KRaft went on writing afterwards.
    zk_dump = dump(with_migration_znode(tree_of(model), last), tmp_path / "cluster.jsonl")
    names = sorted(t for t in model.topics if not t.startswith("__"))
    changed, configured, removed, aborted, unfinished = names[0], names[1], names[2], names[3], names[4]
    tid = {name: image.topics_by_name[name].topic_id for name in names}
    isr = image.topics_by_name[changed].partitions[0].isr[:1]
    append_segment(
        meta,
        last + 1,
        [
            [(rec.PartitionChangeRecord(topic_id=tid[changed], partition_id=0, isr=isr), 0)],
            [(rec.ConfigRecord(resource_type=2, resource_name=configured, name="retention.ms", value="1234"), 0)],
            [(rec.RemoveTopicRecord(topic_id=tid[removed]), 0)],
            [
                (rec.BeginTransactionRecord(name="aborted"), 0),
                (rec.PartitionChangeRecord(topic_id=tid[aborted], partition_id=0, leader=-1), 0),
                (rec.AbortTransactionRecord(), 0),
            ],
            [(rec.BeginTransactionRecord(name="open"), 0), (rec.RemoveTopicRecord(topic_id=tid[unfinished]), 0)],
        ],
    )
    newest = last + 8

    # Default: KRaft is compared as of the /migration offset, so the writes after it are not drift.
    out = tmp_path / "aligned"
    code, output = audit("--zk-dump", str(zk_dump), "--kraft", str(meta), "--out", str(out))
    assert code == 0, output
    s = summary(out)
    check = s["offsets"].pop("migration_check")
    assert s["offsets"] == {"alignment": "migration znode", "compared_through": last, "migration_offset": last, "snapshot_last_offset": last}
    # /migration names controller 3000 in epoch 1 and offset `last` in epoch 1, as the migrated log holds them.
    assert check["verdict"] == "matches" and check["used"] and check["log_leader_in_epoch"] == 3000
    assert s["classes"]["error"] == 0 and s["classes"]["lag"] == 0

    # Compared at the newest offset: the committed writes after /migration are lag; the aborted and the
    # unfinished transaction change nothing.
    out = tmp_path / "newest"
    code, output = audit("--zk-dump", str(zk_dump), "--kraft", str(meta), "--out", str(out), "--kraft-offset", str(newest))
    assert code == 0, output
    assert output.startswith("LAGGING")
    found = discrepancy_rows(spark, out)
    lag = keyed(found, "lag")
    removed_partitions = {("partitions", f"topic={removed} partition={p}", "missing_in_kraft", None) for p in model.topics[removed].partitions}
    removed_configs = {
        ("configs", f"resource_type=topic resource_name={removed} name={k}", "missing_in_kraft", None)
        for k in (model.topic_configs[removed].config if removed in model.topic_configs else {})
    }
    assert lag == {
        ("partitions", f"topic={changed} partition=0", "mismatch", "isr"),
        ("configs", f"resource_type=topic resource_name={configured} name=retention.ms", _config_kind(model, configured), _config_field(model, configured)),
        ("topics", f"topic={removed}", "missing_in_kraft", None),
    } | removed_partitions | removed_configs
    assert not keyed(found, "error")
    assert all(r["kraft_offset"] > last for r in found if r["class"] == "lag")

    code, output = audit("--zk-dump", str(zk_dump), "--kraft", str(meta), "--out", str(tmp_path / "gate"), "--kraft-offset", str(newest), "--fail-on", "lag")
    assert code == 1, output


def _config_kind(model: ZkClusterModel, topic: str) -> str:
    config = model.topic_configs.get(topic)
    return "mismatch" if config is not None and "retention.ms" in config.config else "missing_in_zk"


def _config_field(model: ZkClusterModel, topic: str) -> str | None:
    return "value" if _config_kind(model, topic) == "mismatch" else None
