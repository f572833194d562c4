"""`zk2kraft migrate` end to end: the real Kafka 3.5 fixture from a data dir, a dump, and a live ZooKeeper."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from kazoo.client import KazooClient

from cli.common import PROGRESS_ENV, progress
from cli.main import cli
from migrate.kraft import records as r
from migrate.kraft.logdir import read_meta_properties
from migrate.kraft.reader import iter_log_dir, load_image
from migrate.zk.dump import write_dump
from migrate.zk.embedded import EmbeddedZooKeeper
from migrate.zk.load import load_tree
from migrate.zk.restore import load_data_dir
from migrate.zk.tree import Stat, ZNode, ZTree
from tests.support import FIXTURES

FIXTURE = FIXTURES / "zk-real-kafka-3.5"
CHROOT = "/de-4-3-kafka-cluster"
CLUSTER_ID = "esQVtsr4Sh6LSPhdkKjbNw"
CURRENT_STOCK_ID = uuid.UUID("6d660bbe-4352-41e5-9d2a-186bde7d2f37")  # bWYLvkNSQeWdKhhr3n0vNw


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["migrate", *args], catch_exceptions=False)


@pytest.fixture(scope="module")
def fixture_tree() -> ZTree:
    full, _ = load_data_dir(FIXTURE, None)
    return full.with_chroot(CHROOT)


def migrated_records(metadata_dir: Path) -> list[tuple[int, Any, int]]:
    """(offset, record, version) of every data record in the log, ACL ids zeroed (they are random)."""
    out = []
    for e in iter_log_dir(metadata_dir):
        if e.is_control:
            continue
        record = e.record
        if isinstance(record, r.AccessControlEntryRecord):
            record = dataclasses.replace(record, id=uuid.UUID(int=0))
        out.append((e.offset, record, e.version))
    return out


# ------------------------------------------------------------------ the real fixture, offline


def test_real_fixture_from_the_data_dir(tmp_path: Path, fixture_tree: ZTree) -> None:
    out = tmp_path / "meta"
    result = run("--zk-data-dir", str(FIXTURE), "--chroot", CHROOT, "--out", str(out))
    assert result.exit_code == 0, result.output
    assert (
        "59 records were generated in " in result.stdout
        and "across 1 batches" in result.stdout
        and "The record types were {TOPIC_RECORD=2, PARTITION_RECORD=53, CONFIG_RECORD=4}" in result.stdout
    )

    meta = read_meta_properties(out / "meta.properties")
    assert (meta.version, meta.cluster_id, meta.node_id) == (1, CLUSTER_ID, 3000)
    image, report = load_image(out)
    assert report.snapshot is not None and report.pending_transaction_offset is None
    assert image.features.zk_migration_state == 1  # MIGRATION
    assert sorted(image.topics_by_name) == ["__consumer_offsets", "current_stock"]

    stock = image.topics_by_name["current_stock"]
    assert stock.topic_id == CURRENT_STOCK_ID
    got = {
        p: (reg.replicas, reg.leader, reg.leader_epoch, reg.isr, reg.partition_epoch)
        for p, reg in stock.partitions.items()
    }
    # partition epoch = version of the state znode (3, 2 and 0 in this cluster)
    assert got == {
        0: ([2, 1], 1, 2, [1, 2], 3),
        1: ([3, 2], 3, 1, [3, 2], 2),
        2: ([1, 3], 1, 0, [1, 3], 0),
    }
    assert image.configs[(2, "current_stock")] == {"retention.ms": "3600000"}
    assert image.configs[(2, "__consumer_offsets")] == {
        "segment.bytes": "104857600",
        "cleanup.policy": "compact",
        "compression.type": "producer",
    }

    # every __consumer_offsets partition against the raw znodes (JSON read here, not by the model)
    offsets = image.topics_by_name["__consumer_offsets"]
    topic_json = json.loads(fixture_tree.data("/brokers/topics/__consumer_offsets") or b"")
    assert offsets.topic_id == uuid.UUID(bytes=_b64url(topic_json["topic_id"]))
    assert len(offsets.partitions) == 50
    for p, reg in offsets.partitions.items():
        node = fixture_tree.nodes[f"/brokers/topics/__consumer_offsets/partitions/{p}/state"]
        state = json.loads(node.data or b"")
        assert reg.replicas == topic_json["partitions"][str(p)]
        assert (reg.leader, reg.leader_epoch, reg.isr) == (
            state["leader"],
            state["leader_epoch"],
            state["isr"],
        )
        assert reg.partition_epoch == node.stat.version


def _b64url(text: str) -> bytes:
    import base64

    return base64.urlsafe_b64decode(text + "==")


def test_json_report(tmp_path: Path) -> None:
    out = tmp_path / "meta"
    result = run(
        "--zk-data-dir", str(FIXTURE), "--chroot", CHROOT, "--out", str(out),
        "--format", "json", "--metadata-version", "3.7", "--controller-id", "9",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["cluster_id"] == CLUSTER_ID and report["controller_id"] == 9
    assert report["metadata_version"] == "3.7-IV4"
    assert report["manifest"]["record_types"] == {
        "TOPIC_RECORD": 2,
        "PARTITION_RECORD": 53,
        "CONFIG_RECORD": 4,
    }
    assert report["manifest"]["total_records"] == 59 and report["manifest"]["batches"] == 1
    assert report["manifest"]["bytes"] > 0 and report["warnings"] == []
    assert report["last_offset"] == 66 and report["last_epoch"] == 1
    assert (out / "__cluster_metadata-0" / report["snapshot"]).is_file()
    assert report["files"]["meta.properties"] == (out / "meta.properties").stat().st_size


def test_help_teaches_with_an_example() -> None:
    result = CliRunner().invoke(cli, ["migrate", "--help"])
    assert result.exit_code == 0
    assert "zk2kraft migrate --zk " in result.output and "--zk-data-dir" in result.output
    assert "--on-missing-state" in result.output and "--metadata-version" in result.output


# ------------------------------------------------------------------ errors and repairs


def tree_without(tree: ZTree, *removed: str) -> ZTree:
    out = ZTree(source="edited fixture", last_zxid=tree.last_zxid)
    out.nodes = {p: n for p, n in tree.nodes.items() if p not in removed}
    return out


def test_missing_state_fails_with_exit_2_then_repairs(tmp_path: Path, fixture_tree: ZTree) -> None:
    dump = tmp_path / "zk.jsonl"
    write_dump(tree_without(fixture_tree, "/brokers/topics/current_stock/partitions/1/state"), dump)
    out = tmp_path / "meta"
    failed = run("--zk-dump", str(dump), "--out", str(out))
    assert failed.exit_code == 2
    assert "/brokers/topics/current_stock/partitions/1/state" in failed.stderr
    assert "Traceback" not in failed.output and not out.exists()

    repaired = run("--zk-dump", str(dump), "--out", str(out), "--on-missing-state", "repair")
    assert repaired.exit_code == 0, repaired.output
    assert "warning:" in repaired.stderr and "repaired" in repaired.stderr
    reg = load_image(out)[0].topics_by_name["current_stock"].partitions[1]
    assert (reg.isr, reg.leader, reg.leader_epoch, reg.partition_epoch) == ([3, 2], 3, 0, 0)


def test_bad_inputs_exit_2_with_a_clear_message(tmp_path: Path, fixture_tree: ZTree) -> None:
    out = tmp_path / "meta"
    out.mkdir()
    (out / "x").write_text("x")
    busy = run("--zk-data-dir", str(FIXTURE), "--chroot", CHROOT, "--out", str(out))
    assert busy.exit_code == 2 and "not empty" in busy.stderr and "--force" in busy.stderr
    forced = run("--zk-data-dir", str(FIXTURE), "--chroot", CHROOT, "--out", str(out), "--force")
    assert forced.exit_code == 0 and not (out / "x").exists()

    old = run(
        "--zk-data-dir",
        str(FIXTURE),
        "--chroot",
        CHROOT,
        "--out",
        str(tmp_path / "o"),
        "--metadata-version",
        "3.3",
    )
    assert old.exit_code == 2 and "3.4-IV0" in old.output

    clash = run(
        "--zk-data-dir",
        str(FIXTURE),
        "--chroot",
        CHROOT,
        "--out",
        str(tmp_path / "c"),
        "--controller-id",
        "2",
    )
    assert clash.exit_code == 2 and "broker id" in clash.stderr

    none = run("--out", str(tmp_path / "n"))
    assert none.exit_code == 2 and "exactly one ZooKeeper source" in none.stderr

    bad = dict(fixture_tree.nodes)
    bad["/config/clients"] = ZNode("/config/clients", None)
    bad["/config/clients/app"] = ZNode(
        "/config/clients/app", b'{"version":1,"config":{"producer_byte_rate":"fast"}}'
    )
    dump = tmp_path / "bad.jsonl"
    write_dump(ZTree(source="bad", nodes=bad), dump)
    quota = run("--zk-dump", str(dump), "--out", str(tmp_path / "q"))
    assert quota.exit_code == 2 and "/config/clients/app" in quota.stderr and "fast" in quota.stderr


# ------------------------------------------------------------------ a richer cluster, through a live ZooKeeper

SCRAM_ALICE = (
    "salt=MXJicGtkdGcwZm83aGhhYTlmc3NqYjl2azE=,stored_key=7VkSPRPlbIHTfTYMtCm/FrMhmk7hxcJVyFoZ9cATT4I=,"
    "server_key=Hh1VMRx3VQgte1aXZrbVWQw/NviNAixrN7oO8AOAQ2A=,iterations=8192"
)
EXTRA_ZNODES: dict[str, bytes | None] = {
    "/config/users/alice": json.dumps(
        {"version": 1, "config": {"SCRAM-SHA-256": SCRAM_ALICE, "producer_byte_rate": "1048576"}}
    ).encode(),
    "/config/users/user%401": b'{"version":1,"config":{"consumer_byte_rate":"1000"}}',
    "/config/users/user%401/clients": None,
    "/config/users/user%401/clients/clientA": b'{"version":1,"config":{"consumer_byte_rate":"800","producer_byte_rate":"100"}}',
    "/config/users/<default>": b'{"version":1,"config":{"consumer_byte_rate":"900","producer_byte_rate":"100"}}',
    "/config/clients/<default>": b'{"version":1,"config":{"consumer_byte_rate":"900"}}',
    "/config/ips/8.8.8.8": b'{"version":1,"config":{"connection_creation_rate":"10"}}',
    "/config/brokers/<default>": b'{"version":1,"config":{"log.retention.ms":"86400000"}}',
    "/config/brokers/1": b'{"version":1,"config":{"log.retention.ms":"1000"}}',
    "/kafka-acl": None,
    "/kafka-acl/Topic": None,
    "/kafka-acl/Topic/current_stock": (
        b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"},'
        b'{"principal":"User:alice","permissionType":"Allow","operation":"Write","host":"192.168.0.1"}]}'
    ),
    "/kafka-acl/Cluster": None,
    "/kafka-acl/Cluster/kafka-cluster": (
        b'{"version":1,"acls":[{"principal":"User:admin","permissionType":"Allow","operation":"All","host":"*"}]}'
    ),
    "/kafka-acl-extended": None,
    "/kafka-acl-extended/prefixed": None,
    "/kafka-acl-extended/prefixed/Topic": None,
    "/kafka-acl-extended/prefixed/Topic/bar-": (
        b'{"version":1,"acls":[{"principal":"User:*","permissionType":"Allow","operation":"Read","host":"*"}]}'
    ),
    "/delegation_token": None,
    "/delegation_token/tokens": None,
    "/delegation_token/tokens/Xkq7bZ2sS3qVwP0oOQ7zVw": (
        b'{"version":3,"owner":"User%3Aalice","tokenRequester":"User%3Aalice","renewers":["User%3Abob"],'
        b'"issueTimestamp":1718000000000,"maxTimestamp":1718604800000,"expiryTimestamp":1718086400000,'
        b'"tokenId":"Xkq7bZ2sS3qVwP0oOQ7zVw"}'
    ),
}


def rich_tree(base: ZTree) -> ZTree:
    nodes = dict(base.nodes)
    for path, data in EXTRA_ZNODES.items():
        nodes[path] = ZNode(path, data, Stat(data_length=len(data or b"")))
    nodes["/latest_producer_id_block"] = ZNode(
        "/latest_producer_id_block", b'{"version":1,"broker":2,"block_start":"3000","block_end":"3999"}'
    )
    return ZTree(source="fixture plus quotas, SCRAM, ACLs, a token", nodes=nodes, last_zxid=base.last_zxid)


def copy_into_zookeeper(client: KazooClient, tree: ZTree, chroot: str) -> None:
    """Load `tree`; load_tree reproduces each znode's version (a state znode's version is the partition epoch)."""
    load_tree(client, tree, chroot=chroot)


@pytest.mark.zookeeper
def test_live_zookeeper_gives_the_same_records_as_offline_sources(
    tmp_path: Path, fixture_tree: ZTree, zk_server: EmbeddedZooKeeper, zk_admin: KazooClient, zk_chroot: str
) -> None:
    # the real fixture: live ZooKeeper vs. its data dir
    copy_into_zookeeper(zk_admin, fixture_tree, zk_chroot + "/plain")
    live = run("--zk", zk_server.connect_string + zk_chroot + "/plain", "--out", str(tmp_path / "live"))
    assert live.exit_code == 0, live.output
    offline = run("--zk-data-dir", str(FIXTURE), "--chroot", CHROOT, "--out", str(tmp_path / "offline"))
    assert offline.exit_code == 0, offline.output
    assert migrated_records(tmp_path / "live") == migrated_records(tmp_path / "offline")
    assert read_meta_properties(tmp_path / "live" / "meta.properties").cluster_id == CLUSTER_ID

    # every kind of metadata: live ZooKeeper vs. a dump of the same tree
    rich = rich_tree(fixture_tree)
    copy_into_zookeeper(zk_admin, rich, zk_chroot + "/rich")
    live_rich = run(
        "--zk", zk_server.connect_string + zk_chroot + "/rich", "--out", str(tmp_path / "live-rich")
    )
    assert live_rich.exit_code == 0, live_rich.output
    dump = tmp_path / "rich.jsonl"
    write_dump(rich, dump)
    dumped = run("--zk-dump", str(dump), "--out", str(tmp_path / "dump-rich"))
    assert dumped.exit_code == 0, dumped.output
    records = migrated_records(tmp_path / "live-rich")
    assert records == migrated_records(tmp_path / "dump-rich")
    kinds = {type(rec).__name__ for _, rec, _ in records}
    assert {
        "UserScramCredentialRecord",
        "ClientQuotaRecord",
        "ProducerIdsRecord",
        "AccessControlEntryRecord",
        "DelegationTokenRecord",
    } <= kinds

    image = load_image(tmp_path / "live-rich")[0]
    assert image.next_producer_id == 4000
    assert image.scram[("alice", 1)].iterations == 8192
    assert image.client_quotas[(("client-id", "clientA"), ("user", "user@1"))] == {
        "consumer_byte_rate": 800.0,
        "producer_byte_rate": 100.0,
    }
    assert image.client_quotas[(("user", None),)] == {
        "consumer_byte_rate": 900.0,
        "producer_byte_rate": 100.0,
    }
    assert image.configs[(4, "")] == {"log.retention.ms": "86400000"}
    assert len(image.acls) == 4
    assert image.delegation_tokens["Xkq7bZ2sS3qVwP0oOQ7zVw"].renewers == ["User:bob"]


def test_progress_reaches_a_log_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    # CliRunner's stderr is not a terminal, as in CI logs and `2> log`; interval 0: every step is a line.
    result = CliRunner(env={PROGRESS_ENV: "0"}).invoke(
        cli,
        ["migrate", "--zk-data-dir", str(FIXTURE), "--chroot", "/de-4-3-kafka-cluster", "--out", str(tmp_path / "m")],
    )
    assert result.exit_code == 0, result.output
    steps = [line for line in result.stderr.splitlines() if line.startswith("progress: ")]
    assert steps[0].startswith(f"progress: reading ZooKeeper data dir {FIXTURE}")
    assert any(s.startswith("progress: translating and writing the metadata directory") for s in steps)


def test_a_long_step_prints_a_line_every_few_seconds_in_a_log() -> None:
    out = io.StringIO()
    with contextlib.redirect_stderr(out), progress("loading znodes", total=10, every_s=0.01) as bar:
        bar.update(completed=4)
        deadline = time.monotonic() + 30
        while out.getvalue().count("\n") < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
    lines = out.getvalue().splitlines()
    assert lines and all(line.startswith("progress: loading znodes: 4/10 (") for line in lines)
