"""The portable ZooKeeper dump format: round trips, binary data, and clear errors on bad files."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from cli.main import cli
from migrate.errors import CorruptDataError
from migrate.zk.dump import read_dump, write_dump
from migrate.zk.tree import Acl, Stat, ZNode, ZTree
from tests.support import FIXTURES

REAL_DATA_DIR = FIXTURES / "zk-real-kafka-3.5"
REAL_CHROOT = "/de-4-3-kafka-cluster"

path_segment = st.text(alphabet=st.characters(blacklist_characters="/\x00", blacklist_categories=("Cs",)), min_size=1, max_size=8)


def sample_tree() -> ZTree:
    tree = ZTree(source="test", last_zxid=0x9F00000037)
    tree.nodes["/"] = ZNode("/", b"")
    tree.nodes["/brokers"] = ZNode("/brokers", None, Stat(czxid=5, num_children=1))
    tree.nodes["/brokers/ids"] = ZNode("/brokers/ids", b'{"version":5}', Stat(version=3, ephemeral_owner=0x1234))
    tree.nodes["/bin"] = ZNode("/bin", bytes(range(256)), acl=(Acl(1, "digest", "u:hash"), Acl(31, "world", "anyone")))
    return tree


def test_round_trip_keeps_data_stat_acl(tmp_path: Path) -> None:
    out = tmp_path / "dump.jsonl"
    assert write_dump(sample_tree(), out) == 4
    back = read_dump(out)
    assert back.nodes == sample_tree().nodes
    assert back.last_zxid == 0x9F00000037


def test_binary_data_is_base64_text_data_is_readable(tmp_path: Path) -> None:
    out = tmp_path / "dump.jsonl"
    write_dump(sample_tree(), out)
    lines = [json.loads(line) for line in out.read_text().splitlines()[1:]]
    by_path = {line["path"]: line for line in lines}
    assert by_path["/bin"]["encoding"] == "base64"
    assert by_path["/brokers/ids"]["data"] == '{"version":5}'
    assert by_path["/brokers"]["data"] is None


def test_not_a_dump_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "nodump.jsonl"
    bad.write_text("hello\n")
    with pytest.raises(CorruptDataError, match=r"nodump\.jsonl"):
        read_dump(bad)


def test_bad_line_names_line_number(tmp_path: Path) -> None:
    out = tmp_path / "dump.jsonl"
    write_dump(sample_tree(), out)
    with out.open("a") as fh:
        fh.write('{"path": "relative", "data": null}\n')
    with pytest.raises(CorruptDataError, match="line 6"):
        read_dump(out)


def test_failed_write_leaves_previous_file(tmp_path: Path) -> None:
    out = tmp_path / "dump.jsonl"
    write_dump(sample_tree(), out)
    before = out.read_bytes()
    broken = sample_tree()
    broken.nodes["/x"] = "not a znode"  # type: ignore[assignment]
    with pytest.raises(AttributeError):
        write_dump(broken, out)
    assert out.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["dump.jsonl"]


@settings(max_examples=40, deadline=None)
@given(
    st.dictionaries(
        st.lists(path_segment, min_size=1, max_size=3).map(lambda parts: "/" + "/".join(parts)),
        st.one_of(st.none(), st.binary(max_size=64), st.text(max_size=32).map(str.encode)),
        max_size=8,
    )
)
def test_any_tree_round_trips(tmp_path_factory: pytest.TempPathFactory, nodes: dict[str, bytes | None]) -> None:
    tree = ZTree(source="h")
    for path, data in nodes.items():
        tree.nodes[path] = ZNode(path, data, Stat(version=len(path)))
    out = tmp_path_factory.mktemp("d") / "dump.jsonl"
    write_dump(tree, out)
    assert read_dump(out).nodes == tree.nodes


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=200))
def test_garbage_raises_only_our_error(tmp_path_factory: pytest.TempPathFactory, garbage: bytes) -> None:
    out = tmp_path_factory.mktemp("g") / "dump.jsonl"
    out.write_bytes(b'{"format":"zk2kraft-zk-dump","version":1,"source":"x"}\n' + garbage)
    with contextlib.suppress(CorruptDataError):
        read_dump(out)


@pytest.mark.parametrize("consume", [False, True])
def test_with_chroot_makes_paths_relative(consume: bool) -> None:
    tree = ZTree(source="t")
    for path in ["/", "/kafka", "/kafka/brokers", "/kafka/brokers/ids", "/kafkaesque", "/other"]:
        tree.nodes[path] = ZNode(path, path.encode())
    sub = tree.with_chroot("/kafka", consume=consume)
    assert sorted(sub.nodes) == ["/", "/brokers", "/brokers/ids"]
    assert all(node.path == path for path, node in sub.nodes.items())
    assert sub.data("/brokers") == b"/kafka/brokers"
    assert sub.children("/") == ["brokers"]
    assert (len(tree) == 0) is consume


@pytest.fixture(scope="module")
def real_export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`zk export` of the real Kafka 3.5 cluster's data dir."""
    out = tmp_path_factory.mktemp("export") / "kafka.jsonl"
    result = CliRunner().invoke(
        cli, ["zk", "export", "--zk-data-dir", str(REAL_DATA_DIR), "--chroot", REAL_CHROOT, "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    return out


def test_a_truncated_export_is_refused_naming_both_counts(real_export: Path, tmp_path: Path) -> None:
    lines = real_export.read_text().splitlines(keepends=True)
    total = len(lines) - 1
    truncated = tmp_path / "truncated.jsonl"
    truncated.write_text("".join(lines[:-5]))  # cut at a line boundary: every remaining line is valid
    with pytest.raises(CorruptDataError, match=rf"truncated\.jsonl: the header says {total} znodes but the file holds {total - 5}"):
        read_dump(truncated)
    edited = tmp_path / "edited.jsonl"
    extra = json.loads(lines[-1]) | {"path": "/brokers/topics/added"}
    edited.write_text("".join(lines) + json.dumps(extra) + "\n")
    with pytest.raises(CorruptDataError, match=f"header says {total} znodes but the file holds {total + 1}"):
        read_dump(edited)
    assert len(read_dump(real_export)) == total


def test_commands_refuse_a_truncated_export(real_export: Path, tmp_path: Path) -> None:
    lines = real_export.read_text().splitlines(keepends=True)
    total = len(lines) - 1
    truncated = tmp_path / "truncated.jsonl"
    truncated.write_text("".join(lines[: len(lines) // 2]))
    expected = f"the header says {total} znodes but the file holds {len(lines) // 2 - 1}"
    runner = CliRunner()
    migrate = runner.invoke(cli, ["migrate", "--zk-dump", str(truncated), "--out", str(tmp_path / "meta")])
    assert migrate.exit_code == 2 and str(truncated) in migrate.stderr and expected in migrate.stderr
    assert not (tmp_path / "meta").exists()
    # Refused before any connection is tried (nothing listens on port 1).
    load = runner.invoke(cli, ["zk", "load", str(truncated), "--zk", "127.0.0.1:1/x"])
    assert load.exit_code == 2 and expected in load.stderr
