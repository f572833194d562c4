"""The audit's pure parts, without Spark: per-key folding against Kafka-semantics replay, znodes → rows
against the whole-model path, byte ranges at batch boundaries, transaction intervals."""

from __future__ import annotations

import random
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from migrate.errors import CorruptDataError, Zk2KraftError
from migrate.kraft import records as rec
from migrate.kraft import snapshot as snapshot_module
from migrate.kraft.batch import encode_kraft_batch
from migrate.kraft.framing import encode_metadata_record
from migrate.kraft.reader import load_image
from migrate.kraft.replay import replay_records
from migrate.kraft.snapshot import write_snapshot
from migrate.zk.znodes.topics import format_uuid
from tests.support.audit import PARTITION_DIR, append_segment, migrate, small_generated_model, tree_of
from validators.kraft_state import fold, merge_events, record_event, state_row
from validators.kraft_tasks import excluded_intervals, parse_range, plan_kraft, scan_markers
from validators.tables import KINDS, zk_model_rows
from validators.zk_tasks import dump_line_rows, dump_splits, split_lines


@st.composite
def histories(draw: st.DrawFn) -> list[tuple[Any, int]]:
    """Valid metadata histories of two topic names: creations (a new topic id each time, as Kafka),
    partition changes, config writes and removals."""
    out: list[tuple[Any, int]] = []
    live: dict[str, tuple[uuid.UUID, set[int]]] = {}
    ids = 0
    for _ in range(draw(st.integers(1, 40))):
        name = draw(st.sampled_from(["t0", "t1"]))
        action = draw(st.sampled_from(["create", "change", "config", "remove"]))
        replicas = draw(st.lists(st.integers(0, 4), min_size=1, max_size=3, unique=True))
        if name not in live:
            ids += 1
            topic = uuid.UUID(int=ids)
            out.append((rec.TopicRecord(name=name, topic_id=topic), 0))
            partitions = set(range(draw(st.integers(1, 3))))
            live[name] = (topic, partitions)
            for p in sorted(partitions):
                out.append((rec.PartitionRecord(partition_id=p, topic_id=topic, replicas=replicas, isr=replicas, leader=replicas[0]), 0))
            continue
        topic, partitions = live[name]
        if action == "change":
            change = rec.PartitionChangeRecord(partition_id=draw(st.sampled_from(sorted(partitions))), topic_id=topic)
            if draw(st.booleans()):
                change.isr = replicas
            if draw(st.booleans()):
                change.leader = draw(st.integers(-1, 4))
            if draw(st.booleans()):
                change.replicas = replicas
            out.append((change, 0))
        elif action == "config":
            value = draw(st.one_of(st.none(), st.sampled_from(["1", "2"])))
            out.append((rec.ConfigRecord(resource_type=2, resource_name=name, name="retention.ms", value=value), 0))
        elif action == "remove":
            out.append((rec.RemoveTopicRecord(topic_id=topic), 0))
            del live[name]
    return out


def folded(history: list[tuple[Any, int]], rng: random.Random) -> dict[tuple[Any, ...], tuple[Any, bool]]:
    """What the Spark pipeline computes: events per key, merged in random groupings, then folded."""
    per_key: dict[tuple[Any, ...], list[list[Any]]] = {}
    for offset, (record, _v) in enumerate(history):
        event = record_event(record)
        if event is not None:
            key, op, payload = event
            per_key.setdefault(key, []).append([(offset, op, payload)])
    out = {}
    for key, lists in per_key.items():
        rng.shuffle(lists)
        while len(lists) > 1:  # any order and grouping: merge_events must be associative and commutative
            i = rng.randrange(len(lists) - 1)
            lists[i : i + 2] = [merge_events(lists[i], lists[i + 1])]
        payload, deleted, _seq = fold(key, lists[0])
        out[key] = (state_row(key, payload), deleted)
    return out


@settings(max_examples=150, deadline=None)
@given(histories(), st.randoms(use_true_random=False))
def test_folding_per_key_gives_what_replay_gives(history: list[tuple[Any, int]], rng: random.Random) -> None:
    image = replay_records(history)
    state = folded(history, rng)
    live_topics = {k[1]: row for k, (row, deleted) in state.items() if k[0] == "topics" and not deleted}
    # Partitions of a removed topic stay in the fold; the SQL join with the deleted topic drops them.
    assert live_topics == {format_uuid(t.topic_id): (t.name, format_uuid(t.topic_id)) for t in image.topics_by_id.values()}
    partitions = {}
    for key, (row, deleted) in state.items():
        if key[0] == "kraft_partitions" and not deleted and key[1] in live_topics:
            partitions[(key[1], key[2])] = row[2:]
    expected = {
        (format_uuid(t.topic_id), p): (r.replicas, r.isr, r.leader, r.leader_epoch, r.partition_epoch, r.leader_recovery_state, r.adding_replicas, r.removing_replicas)
        for t in image.topics_by_id.values()
        for p, r in t.partitions.items()
    }
    assert partitions == expected
    # Configs: a removed topic's configs go too (the SQL side does it by name); here, live ones only.
    configs = {
        key[2]: row[3]
        for key, (row, deleted) in state.items()
        if key[0] == "configs" and not deleted and key[2] in {n for n, _ in live_topics.values()}
    }
    names = {r.topic_id: r.name for r, _v in history if isinstance(r, rec.TopicRecord)}
    removals = {
        names[r.topic_id]: offset for offset, (r, _v) in enumerate(history) if isinstance(r, rec.RemoveTopicRecord)
    }
    last_set = {
        r.resource_name: offset for offset, (r, _v) in enumerate(history) if isinstance(r, rec.ConfigRecord)
    }
    configs = {name: v for name, v in configs.items() if last_set.get(name, -1) > removals.get(name, -1)}
    assert configs == {name: values["retention.ms"] for (_t, name), values in image.configs.items() if "retention.ms" in values}


def test_a_change_to_an_unknown_partition_is_bad_input() -> None:
    event = record_event(rec.PartitionChangeRecord(partition_id=0, topic_id=uuid.UUID(int=1), isr=[1]))
    assert event is not None
    with pytest.raises(CorruptDataError, match="unknown partition"):
        fold(event[0], [(5, event[1], event[2])])


def test_znode_rows_equal_the_whole_model_rows(tmp_path: Path) -> None:
    from migrate.zk.dump import write_dump

    model = small_generated_model(seed=3)
    model.pending_topic_deletions.add(sorted(model.topics)[0])
    tree = tree_of(model)
    for name in model.pending_topic_deletions:
        from migrate.zk.tree import ZNode

        tree.nodes[f"/admin/delete_topics/{name}"] = ZNode(f"/admin/delete_topics/{name}", None)
    write_dump(tree, tmp_path / "d.jsonl")
    from_lines: Counter[tuple[str, Any]] = Counter()
    for line in (tmp_path / "d.jsonl").read_text().splitlines():
        for row in dump_line_rows(line, "/", "d.jsonl"):
            kind = row[0]
            from_lines[(kind, _hashable(row[4 + list(KINDS).index(kind)]))] += 1
    from_model = Counter((kind, _hashable(row)) for kind, row in zk_model_rows(model))
    assert from_lines == from_model
    assert {k for k, _ in from_lines} >= {"brokers", "topics", "zk_assignments", "zk_states", "configs", "client_quotas", "scram", "acls", "delegation_tokens", "producer_ids", "zk_pending_deletions", "cluster"}


def _hashable(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_hashable(v) for v in value)
    return value


def test_dump_lines_outside_the_chroot_or_malformed() -> None:
    assert dump_line_rows('{"path":"/other/brokers/ids/1","data":"{}"}', "/kafka", "d") == []
    bad = dump_line_rows('{"path":"/kafka/brokers/topics/t","data":"{nope"}', "/kafka", "d")
    assert bad[0][0] == "_error" and "/brokers/topics/t" in bad[0][3]
    assert dump_line_rows("not json", "/", "d")[0][0] == "_error"


def test_ranges_cut_at_batch_boundaries_parse_like_the_whole_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    meta = migrate(small_generated_model(seed=5), tmp_path / "meta")
    # Many small batches, so the snapshot can be cut into many ranges.
    image, _ = load_image(meta)
    old = next((meta / PARTITION_DIR).glob("*.checkpoint"))
    old.unlink()
    monkeypatch.setattr(snapshot_module, "SNAPSHOT_RECORDS_PER_APPEND", 4)
    write_snapshot(meta / PARTITION_DIR, image, max_batch_bytes=1024)
    whole = plan_kraft(meta)
    cut = plan_kraft(meta, target_bytes=1)  # one range per batch
    assert len(whole.ranges) == 1 and len(cut.ranges) > 10
    assert cut.ranges[0].start == 0 and cut.ranges[-1].end == whole.ranges[0].end
    assert all(a.end == b.start for a, b in zip(cut.ranges, cut.ranges[1:], strict=False))

    def events(plan: Any) -> list[Any]:
        return sorted(repr(e) for r in plan.ranges for e in parse_range(r, plan.start_offset, plan.stop_offset, []))

    assert events(cut) == events(whole)
    assert not any("_error" in e for e in events(cut))


def test_log_ranges_transactions_and_a_torn_tail(tmp_path: Path) -> None:
    meta = migrate(small_generated_model(seed=5), tmp_path / "meta")
    for snapshot in (meta / PARTITION_DIR).glob("*.checkpoint"):
        snapshot.unlink()
    plan = plan_kraft(meta)
    markers = [m for r in plan.log_ranges for m in scan_markers(r, plan.start_offset, plan.stop_offset)]
    # The migration log holds the bootstrap and the migration transaction, both committed.
    assert [kind for _o, kind in markers] == ["begin", "end", "begin", "end"]
    assert excluded_intervals(markers, "x") == []
    last = markers[-1][0]
    append_segment(meta, last + 1, [[(rec.BeginTransactionRecord(name="open"), 0), (rec.NoOpRecord(), 0)]])
    segment = sorted((meta / PARTITION_DIR).glob("*.log"))[-1]
    torn = encode_kraft_batch(last + 3, 1, 0, [(None, encode_metadata_record(rec.NoOpRecord(), 0))], False)
    with segment.open("ab") as f:
        f.write(torn[: len(torn) // 2])  # a torn tail on the newest segment: the write was cut short
    plan = plan_kraft(meta)
    assert plan.ranges[-1].tolerate_torn_tail and plan.ranges[-1].end == segment.stat().st_size
    markers = [m for r in plan.log_ranges for m in scan_markers(r, plan.start_offset, plan.stop_offset)]
    assert excluded_intervals(markers, "x") == [(last + 1, 1 << 63)]
    # Stopping before the new segment: it is not read at all.
    assert plan_kraft(meta, stop_offset=last + 1).segments == [sorted((meta / PARTITION_DIR).glob("*.log"))[0]]


def test_transaction_markers_out_of_order_are_bad_input() -> None:
    assert excluded_intervals([(3, "begin"), (5, "abort"), (7, "begin"), (9, "end")], "x") == [(3, 5)]
    with pytest.raises(CorruptDataError, match="without a BeginTransactionRecord"):
        excluded_intervals([(4, "end")], "x")
    with pytest.raises(CorruptDataError, match="is open"):
        excluded_intervals([(1, "begin"), (2, "begin")], "x")


def test_a_snapshot_cannot_be_replayed_backwards(tmp_path: Path) -> None:
    meta = migrate(small_generated_model(seed=5), tmp_path / "meta")
    snapshot = next((meta / PARTITION_DIR).glob("*.checkpoint"))
    with pytest.raises(Zk2KraftError, match="cannot be replayed only to"):
        plan_kraft(snapshot, stop_offset=3)
    with pytest.raises(Zk2KraftError, match="no such file"):
        plan_kraft(tmp_path / "missing")


def test_dump_splits_hand_every_line_to_exactly_one_task(tmp_path: Path) -> None:
    lines = [b"\n", b'{"path":"/a"}\n', b"x" * 70 + b"\n", b"\n", b"y\n", b"z" * 5 + b"\n", b"last-without-newline"]
    dump_file = tmp_path / "d.jsonl"
    dump_file.write_bytes(b"".join(lines))
    for tasks in range(1, len(dump_file.read_bytes()) + 2):
        splits = dump_splits(dump_file, tasks)
        assert splits[0][0] == 0 and splits[-1][1] == dump_file.stat().st_size
        got = [line for start, end in splits for line in split_lines(str(dump_file), start, end)]
        assert got == lines, tasks


def test_dump_lines_with_integers_past_64_bits_read_as_before() -> None:
    version = (1 << 70) + 1
    state = '{\\"controller_epoch\\":1,\\"leader\\":1,\\"version\\":1,\\"leader_epoch\\":0,\\"isr\\":[1]}'
    line = '{"path":"/brokers/topics/t/partitions/0/state","data":"' + state + '","stat":{"version":' + str(version) + "}}"
    for text in (line, line.encode()):
        (row,) = dump_line_rows(text, "/", "d")
        assert row[4 + list(KINDS).index("zk_states")][5] == version
    assert dump_line_rows('{"path":"/brokers/ids/x","stat":{"czxid":' + str(version) + "}}", "/", "d") == []
