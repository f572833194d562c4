"""The portable ZooKeeper dump format: round trips, binary data, and clear errors on bad files."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from migrate.errors import CorruptDataError
from migrate.zk.dump import read_dump, write_dump
from migrate.zk.tree import Acl, Stat, ZNode, ZTree

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
