"""Migration orchestration: batching, the log's transaction shape, the manifest, and the metadata dir on disk."""

from __future__ import annotations

import contextlib
import itertools
import struct
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from migrate.errors import InvalidRequestError, UnsupportedVersionError, Zk2KraftError
from migrate.kraft import records as r
from migrate.kraft.batch import iter_batches
from migrate.kraft.framing import decode_control_record, decode_metadata_record
from migrate.kraft.logdir import (
    read_leader_epoch_checkpoint,
    read_meta_properties,
    read_partition_metadata,
    read_quorum_state,
)
from migrate.kraft.reader import iter_snapshot, load_image, read_bootstrap_records
from migrate.manifest import ManifestBuilder, ManifestModel, MigrationManifest, java_format_2f
from migrate.migration import (
    BufferingBatchConsumer,
    ControllerWrite,
    coalesce,
    encode_log,
    migrate_to_metadata_dir,
    plan_writes,
)
from migrate.translate import translate
from migrate.zk.model import (
    AclEntry,
    AclOperation,
    AclPermissionType,
    AclResource,
    BrokerEndpoint,
    BrokerRegistration,
    ClientQuotaConfig,
    DelegationToken,
    EntityConfig,
    PartitionState,
    PatternType,
    ProducerIdBlock,
    ResourcePattern,
    ResourceType,
    ScramCredential,
    Topic,
    ZkClusterModel,
)

CLUSTER_ID = "esQVtsr4Sh6LSPhdkKjbNw"
TOPIC_ID = uuid.UUID("6d660bbe-4352-41e5-9d2a-186bde7d2f37")


# ------------------------------------------------------------------ BufferingBatchConsumer


@pytest.mark.parametrize(
    ("min_size", "sizes", "expected"),
    [
        # KRaftMigrationDriverTest.testCoalesceMigrationRecords, min batch size 200
        (200, [0, 0, 0, 0], []),
        (200, [0, 0, 1, 0], [1]),
        (200, [1, 1, 1, 1], [4]),
        (200, [201], [201]),
        (200, [200, 1], [200, 1]),
        # ... and 1000
        (1000, [999], [999]),
        (1000, [1000], [1000]),
        (1000, [1001], [1001]),
        (1000, [1000, 1], [1000, 1]),
        (1000, [1000, 1000, 1000], [1000, 1000, 1000]),
        # lists are concatenated until the minimum is reached, never split
        (200, [150, 100, 10, 300, 5], [250, 310, 5]),
    ],
)
def test_coalesce_matches_kafkas_buffering(min_size: int, sizes: list[int], expected: list[int]) -> None:
    counter = itertools.count()
    lists = [[next(counter) for _ in range(n)] for n in sizes]
    batches = coalesce(lists, min_size)
    assert [len(b) for b in batches] == expected
    assert [x for b in batches for x in b] == [x for lst in lists for x in lst]


def test_buffering_consumer_rejects_a_zero_minimum() -> None:
    with pytest.raises(InvalidRequestError):
        BufferingBatchConsumer(print, 0)


# ------------------------------------------------------------------ manifest text


def fake_clock(*values: int) -> Any:
    it = iter(values)
    return lambda: next(it)


def test_manifest_text_when_empty() -> None:
    manifest = ManifestBuilder(fake_clock(0, 0)).build()
    assert str(manifest) == (
        "0 records were generated in 0 ms across 0 batches. The average time spent waiting on a batch was "
        "-1.00 ms. The record types were {}"
    )


def test_manifest_text_lists_types_in_api_key_order() -> None:
    builder = ManifestBuilder(fake_clock(0, 10_000_000))
    batch = (
        [(r.ConfigRecord(), 0)]
        + [(r.TopicRecord(), 0)] * 2
        + [(r.PartitionRecord(), 0)] * 9
        + [(r.ConfigRecord(), 0)]
    )
    builder.accept_batch(batch, 20)
    manifest = builder.build()
    assert manifest.duration_ms == 10
    assert str(manifest) == (
        "13 records were generated in 10 ms across 1 batches. The average time spent waiting on a batch was "
        "0.00 ms. The record types were {TOPIC_RECORD=2, PARTITION_RECORD=9, CONFIG_RECORD=2}"
    )


def test_manifest_average_uses_whole_milliseconds_of_the_total() -> None:
    builder = ManifestBuilder(fake_clock(0, 60_000_000))
    builder.accept_batch([(r.TopicRecord(), 0)] * 5, 20_000_000)
    builder.accept_batch([(r.PartitionRecord(), 0)] * 7, 20_000_000)
    builder.accept_batch([(r.ConfigRecord(), 0)], 5_999_999)
    manifest = builder.build()
    assert manifest.avg_batch_duration_ms == 15.0  # 45.999999 ms truncates to 45 before dividing
    assert "across 3 batches. The average time spent waiting on a batch was 15.00 ms" in str(manifest)


@pytest.mark.parametrize(
    ("value", "text"), [(0.125, "0.13"), (1.005, "1.01"), (2 / 3, "0.67"), (-1.0, "-1.00"), (15.0, "15.00")]
)
def test_two_decimals_round_half_up_like_java(value: float, text: str) -> None:
    assert java_format_2f(value) == text


def test_manifest_json_model() -> None:
    manifest = MigrationManifest(3, 1, 2_500_000, 7_000_000, {3: 2, 2: 1}, total_bytes=321)
    model = ManifestModel.from_manifest(manifest)
    assert model.record_types == {"TOPIC_RECORD": 1, "PARTITION_RECORD": 2}
    assert list(model.record_types) == ["TOPIC_RECORD", "PARTITION_RECORD"]
    assert (model.total_records, model.batches, model.bytes, model.duration_ms) == (3, 1, 321, 7)
    assert model.avg_batch_duration_ms == 2.0 and model.text == str(manifest)


# ------------------------------------------------------------------ the log


def small_model(partitions: int = 3, **kw: Any) -> ZkClusterModel:
    assignment = {p: [1 + p % 3, 1 + (p + 1) % 3] for p in range(partitions)}
    states = {
        p: PartitionState(leader=a[0], leader_epoch=2, isr=list(a), controller_epoch=1, zk_version=4)
        for p, a in assignment.items()
    }
    model = ZkClusterModel(
        cluster_id=CLUSTER_ID,
        brokers={
            b: BrokerRegistration(b, [BrokerEndpoint("PLAINTEXT", f"kafka0{b}", 9092, "PLAINTEXT")])
            for b in (1, 2, 3)
        },
        topics={"current_stock": Topic("current_stock", TOPIC_ID, assignment, states=states)},
        topic_configs={"current_stock": EntityConfig("topics", "current_stock", {"retention.ms": "3600000"})},
        broker_configs={"<default>": EntityConfig("brokers", "<default>", {"log.retention.ms": "86400000"})},
        client_quotas={
            "users/alice": ClientQuotaConfig(
                "users/alice",
                {"producer_byte_rate": 1048576.0},
                scram={"SCRAM-SHA-256": ScramCredential("SCRAM-SHA-256", b"s", b"k", b"v", 8192)},
            ),
            "clients/<default>": ClientQuotaConfig("clients/<default>", {"consumer_byte_rate": 900.0}),
        },
        producer_id_block=ProducerIdBlock(2, 3000, 3999),
    )
    for key, value in kw.items():
        setattr(model, key, value)
    return model


def decoded_segment(path: Path) -> list[list[tuple[int, Any]]]:
    """Per batch: (offset, record) pairs."""
    out = []
    for _, batch in iter_batches(path.read_bytes(), str(path)):
        items: list[tuple[int, Any]] = []
        for rec_ in batch.records:
            offset = batch.base_offset + rec_.offset_delta
            if batch.is_control:
                items.append((offset, decode_control_record(rec_.key, rec_.value)[0]))
            else:
                items.append((offset, decode_metadata_record(rec_.value or b"")[0]))
        out.append(items)
    return out


def test_log_shape_with_transactions() -> None:
    translation = translate(small_model(), metadata_version="3.9-IV0")
    writes = plan_writes(translation)
    log = encode_log(writes, controller_id=3000, timestamp_ms=1_700_000_000_000)
    kinds = [type(e.record).__name__ for e in log.entries]
    migrated = translation.records()
    assert kinds[:5] == [
        "LeaderChangeMessage",
        "BeginTransactionRecord",
        "FeatureLevelRecord",
        "ZkMigrationStateRecord",
        "EndTransactionRecord",
    ]
    assert kinds[5] == "BeginTransactionRecord" and log.entries[5].record.name == "ZK Migration"
    assert [e.record for e in log.entries[6:-2]] == [rec_ for rec_, _ in migrated]
    assert kinds[-2:] == ["ZkMigrationStateRecord", "EndTransactionRecord"]
    assert log.entries[3].record.zk_migration_state == 2  # PRE_MIGRATION at bootstrap
    assert log.entries[-2].record.zk_migration_state == 1  # MIGRATION at the end
    assert [e.offset for e in log.entries] == list(range(len(log.entries)))
    assert log.migration_first_offset == 5
    assert log.manifest.total_records == len(migrated) and log.manifest.total_batches == 1


def test_log_without_transactions_below_3_6_iv1() -> None:
    model = small_model()
    model.client_quotas["users/alice"].scram = {}
    translation = translate(model, metadata_version="3.4-IV0")
    log = encode_log(plan_writes(translation), controller_id=3000, timestamp_ms=1)
    kinds = [type(e.record).__name__ for e in log.entries]
    assert "BeginTransactionRecord" not in kinds and "EndTransactionRecord" not in kinds
    assert kinds[:3] == ["LeaderChangeMessage", "FeatureLevelRecord", "ZkMigrationStateRecord"]
    assert kinds[-1] == "ZkMigrationStateRecord"
    assert log.migration_first_offset == 3


def test_each_controller_write_is_its_own_batch(tmp_path: Path) -> None:
    result = migrate_to_metadata_dir(small_model(partitions=450), tmp_path / "meta", timestamp_ms=5)
    batches = decoded_segment(tmp_path / "meta" / "__cluster_metadata-0" / "00000000000000000000.log")
    sizes = [len(b) for b in batches]
    # leader change, bootstrap txn, begin, one topic list of 452 records (never split), the remaining
    # lists (broker config, SCRAM, 2 quota lists, producer ids) flushed at the end, completion
    assert sizes == [1, 4, 1, 452, 5, 2]
    assert result.manifest.total_batches == 2 and result.manifest.total_records == 457
    assert result.last_offset == sum(sizes) - 1 and result.last_epoch == 1


# ------------------------------------------------------------------ the metadata dir


def test_metadata_dir_files_and_read_back(tmp_path: Path) -> None:
    out = tmp_path / "meta"
    dir_id = uuid.UUID("5c78648f-8b64-4ac3-bdd3-4a4e43cf8f7e")
    result = migrate_to_metadata_dir(
        small_model(), out, controller_id=3000, timestamp_ms=1_700_000_000_000, directory_id=dir_id
    )
    pdir = out / "__cluster_metadata-0"
    meta = read_meta_properties(out / "meta.properties")
    assert (meta.version, meta.cluster_id, meta.node_id, meta.directory_id) == (1, CLUSTER_ID, 3000, dir_id)
    assert read_bootstrap_records(out) == [
        (r.FeatureLevelRecord(name="metadata.version", feature_level=21), 0)
    ]
    assert read_partition_metadata(pdir / "partition.metadata") == uuid.UUID(int=1)
    assert [
        (e.epoch, e.start_offset) for e in read_leader_epoch_checkpoint(pdir / "leader-epoch-checkpoint")
    ] == [(1, 0)]
    quorum = read_quorum_state(pdir / "quorum-state")
    assert (
        quorum.leader_id,
        quorum.leader_epoch,
        quorum.voted_id,
        quorum.data_version,
        quorum.current_voters,
    ) == (
        3000,
        1,
        -1,
        0,
        (3000,),
    )
    snapshot_name = f"{result.last_offset + 1:020d}-0000000001.checkpoint"
    assert result.snapshot_name == snapshot_name and (pdir / snapshot_name).is_file()
    assert set(result.files) >= {
        "meta.properties",
        "bootstrap.checkpoint",
        "__cluster_metadata-0/00000000000000000000.log",
        f"__cluster_metadata-0/{snapshot_name}",
    }
    assert not [p for p in tmp_path.iterdir() if p.name != "meta"]  # no staging leftovers

    image, report = load_image(out)
    assert report.snapshot is not None and report.log_records == 0  # the snapshot covers the whole log
    assert image.features.zk_migration_state == 1 and image.metadata_version.name == "3.9-IV0"
    topic = image.topics_by_name["current_stock"]
    assert topic.topic_id == TOPIC_ID and sorted(topic.partitions) == [0, 1, 2]
    assert topic.partitions[1].replicas == [2, 3] and topic.partitions[1].partition_epoch == 4
    assert image.configs[(2, "current_stock")] == {"retention.ms": "3600000"}
    assert image.configs[(4, "")] == {"log.retention.ms": "86400000"}
    assert image.client_quotas[(("client-id", None),)] == {"consumer_byte_rate": 900.0}
    assert image.next_producer_id == 4000
    assert image.scram[("alice", 1)].iterations == 8192

    # the log alone (no snapshot) gives the same image
    (pdir / snapshot_name).unlink()
    from_log, log_report = load_image(out)
    assert log_report.snapshot is None and log_report.pending_transaction_offset is None
    assert from_log.topics_by_name == image.topics_by_name
    assert (from_log.configs, from_log.client_quotas, from_log.scram) == (
        image.configs,
        image.client_quotas,
        image.scram,
    )
    assert from_log.next_producer_id == image.next_producer_id


def test_snapshot_uses_the_metadata_versions_record_versions(tmp_path: Path) -> None:
    model = small_model()
    model.client_quotas["users/alice"].scram = {}
    old = migrate_to_metadata_dir(model, tmp_path / "old", metadata_version="3.4-IV0", timestamp_ms=1)
    new = migrate_to_metadata_dir(model, tmp_path / "new", metadata_version="3.9-IV0", timestamp_ms=1)

    def partition_versions(result: Any) -> set[int]:
        path = result.metadata_dir / "__cluster_metadata-0" / result.snapshot_name
        return {e.version for e in iter_snapshot(path) if isinstance(e.record, r.PartitionRecord)}

    assert partition_versions(old) == {0}
    assert partition_versions(new) == {1}  # 3.7-IV2+ snapshots carry (MIGRATING) directories
    assert load_image(tmp_path / "old")[0].metadata_version.name == "3.4-IV0"
    assert old.last_offset == new.last_offset - 4  # no Begin/End pairs in the bootstrap and migration


def test_acls_and_tokens_reach_the_image(tmp_path: Path) -> None:
    res = AclResource(
        ResourcePattern(ResourceType.TOPIC, "orders", PatternType.PREFIXED),
        [AclEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)],
    )
    token = DelegationToken("tok", "User:alice", "User:alice", [], 1, 2, 3)
    model = small_model(acls={res.pattern: res}, delegation_tokens={"tok": token})
    migrate_to_metadata_dir(model, tmp_path / "meta", timestamp_ms=1)
    image = load_image(tmp_path / "meta")[0]
    (binding,) = image.acls.values()
    assert (binding.resource_type, binding.pattern_type, binding.resource_name, binding.operation) == (
        2,
        4,
        "orders",
        3,
    )
    assert image.delegation_tokens["tok"].owner == "User:alice"


def test_tokens_below_3_6_iv2_fail_and_leave_nothing(tmp_path: Path) -> None:
    token = DelegationToken("tok", "User:alice", "User:alice", [], 1, 2, 3)
    model = small_model(delegation_tokens={"tok": token})
    with pytest.raises(UnsupportedVersionError, match="delegation tokens"):
        migrate_to_metadata_dir(model, tmp_path / "meta", metadata_version="3.6-IV1", timestamp_ms=1)
    assert list(tmp_path.iterdir()) == []


def test_refuses_a_non_empty_dir_unless_forced(tmp_path: Path) -> None:
    out = tmp_path / "meta"
    out.mkdir()
    (out / "keep.txt").write_text("precious")
    with pytest.raises(Zk2KraftError, match="not empty"):
        migrate_to_metadata_dir(small_model(), out)
    assert (out / "keep.txt").read_text() == "precious"
    migrate_to_metadata_dir(small_model(), out, force=True)
    assert not (out / "keep.txt").exists() and (out / "meta.properties").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["meta"]


def test_an_existing_empty_dir_is_used(tmp_path: Path) -> None:
    out = tmp_path / "meta"
    out.mkdir()
    migrate_to_metadata_dir(small_model(), out)
    assert (out / "__cluster_metadata-0").is_dir()


def test_failure_leaves_nothing_half_written(tmp_path: Path) -> None:
    model = small_model()
    model.topics["current_stock"].states.pop(1)
    with pytest.raises(Zk2KraftError, match="partitions/1/state"):
        migrate_to_metadata_dir(model, tmp_path / "meta")
    assert list(tmp_path.iterdir()) == []


def test_cluster_id_and_controller_id_are_checked(tmp_path: Path) -> None:
    with pytest.raises(Zk2KraftError, match="/cluster/id"):
        migrate_to_metadata_dir(small_model(cluster_id=None), tmp_path / "a")
    with pytest.raises(InvalidRequestError, match="broker id"):
        migrate_to_metadata_dir(small_model(), tmp_path / "b", controller_id=2)
    with pytest.raises(InvalidRequestError, match=r"3\.4-IV0"):
        migrate_to_metadata_dir(small_model(), tmp_path / "c", metadata_version="3.3-IV3")
    assert list(tmp_path.iterdir()) == []
    result = migrate_to_metadata_dir(small_model(cluster_id=None), tmp_path / "d", cluster_id="given-id")
    assert (
        read_meta_properties(tmp_path / "d" / "meta.properties").cluster_id == "given-id" == result.cluster_id
    )


def test_completion_message_is_kafkas_log_line(tmp_path: Path) -> None:
    result = migrate_to_metadata_dir(small_model(), tmp_path / "meta", timestamp_ms=1)
    message = result.completion_message()
    assert message.startswith("Completed migration of metadata from ZooKeeper to KRaft. ")
    assert f"The current metadata offset is now {result.last_offset} with an epoch of 1." in message
    assert message.endswith("Saw 3 brokers in the migrated metadata [1, 2, 3].")


def _kafka_batch_sizes(
    writes: list[list[tuple[Any, int]]], max_bytes: int, per_append: int
) -> list[int] | None:
    """Records per batch as Kafka's BatchAccumulator cuts them, sizing every record exactly (None: one
    append alone is too big, which fails the write)."""
    from migrate.kraft.batch import HEADER_SIZE, kraft_data_record_size
    from migrate.kraft.framing import encode_metadata_record

    counts: list[int] = []
    for records in writes:
        pending: list[bytes] = []
        used = HEADER_SIZE
        for start in range(0, len(records), per_append):
            values = [encode_metadata_record(rec_, v) for rec_, v in records[start : start + per_append]]
            needed = sum(kraft_data_record_size(len(pending) + i, len(v)) for i, v in enumerate(values))
            if pending and used + needed > max_bytes:
                counts.append(len(pending))
                pending, used = [], HEADER_SIZE
                needed = sum(kraft_data_record_size(i, len(v)) for i, v in enumerate(values))
            if not pending and HEADER_SIZE + needed > max_bytes:
                return None
            pending += values
            used += needed
        if pending:
            counts.append(len(pending))
    return counts


@settings(max_examples=150, deadline=None)
@given(
    sizes=st.lists(st.lists(st.integers(0, 300), min_size=1, max_size=12), min_size=1, max_size=5),
    max_bytes=st.integers(400, 1500),
    per_append=st.integers(1, 5),
)
def test_batches_are_cut_where_kafka_cuts_them_near_the_size_limit(
    sizes: list[list[int]], max_bytes: int, per_append: int
) -> None:
    import migrate.migration as migration_module

    writes = [
        [(r.ConfigRecord(resource_type=2, resource_name="t", name="k", value="v" * n), 0) for n in write]
        for write in sizes
    ]
    expected = _kafka_batch_sizes(writes, max_bytes, per_append)
    saved = migration_module.MAX_RECORDS_PER_APPEND
    migration_module.MAX_RECORDS_PER_APPEND = per_append
    try:
        with pytest.raises(Zk2KraftError) if expected is None else contextlib.nullcontext():
            log = encode_log(
                [ControllerWrite("migration", w) for w in writes], controller_id=1, max_batch_bytes=max_bytes
            )
    finally:
        migration_module.MAX_RECORDS_PER_APPEND = saved
    if expected is None:
        return
    counts = [struct.unpack_from(">i", batch, 57)[0] for batch in log.batches[1:]]
    assert counts == expected
