"""Files of a metadata log directory: the real Kafka node's files parse and re-encode byte-exactly."""

from __future__ import annotations

import random
import shutil
import subprocess
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from migrate.errors import CorruptDataError, UnsupportedVersionError, Zk2KraftError
from migrate.kraft.batch import build_batch, encode_batch, iter_batches
from migrate.kraft.logdir import (
    METADATA_TOPIC_ID,
    EpochEntry,
    MetaProperties,
    OffsetIndexEntry,
    QuorumState,
    SegmentIndexBuilder,
    SnapshotId,
    TimeIndexEntry,
    decode_offset_index,
    decode_time_index,
    encode_leader_epoch_checkpoint,
    encode_meta_properties,
    encode_offset_index,
    encode_partition_metadata,
    encode_quorum_state,
    encode_time_index,
    format_java_properties,
    list_segments,
    list_snapshots,
    parse_java_properties,
    parse_leader_epoch_checkpoint,
    parse_meta_properties,
    parse_partition_metadata,
    parse_quorum_state,
    parse_segment_file_name,
    parse_snapshot_file_name,
    read_leader_epoch_checkpoint,
    read_meta_properties,
    read_partition_metadata,
    read_quorum_state,
    segment_file_name,
    snapshot_file_name,
    uuid_from_base64,
    uuid_to_base64,
    write_leader_epoch_checkpoint,
    write_meta_properties,
    write_partition_metadata,
    write_quorum_state,
    write_segment,
)
from tests.support import FIXTURES

FIXTURE = FIXTURES / "kraft-real-3.7"
PARTITION_DIR = FIXTURE / "__cluster_metadata-0"
LOG = PARTITION_DIR / "00000000000000000000.log"

# ------------------------------------------------------------------ the real node's files


def test_fixture_quorum_state() -> None:
    path = PARTITION_DIR / "quorum-state"
    state = read_quorum_state(path)
    assert state == QuorumState(
        leader_id=1,
        leader_epoch=1,
        voted_id=-1,
        data_version=0,
        current_voters=(1,),
        cluster_id="",
        applied_offset=0,
    )
    assert encode_quorum_state(state) == path.read_bytes()


def test_quorum_state_v1_as_documented() -> None:
    text = b'{"leaderId":-1,"leaderEpoch":2,"votedId":1,"votedDirectoryId":"J8aAPcfLQt2bqs1JT_rMgQ","data_version":1}'
    state = parse_quorum_state(text, "quorum-state")
    assert (state.leader_id, state.leader_epoch, state.voted_id, state.data_version) == (-1, 2, 1, 1)
    assert uuid_to_base64(state.voted_directory_id) == "J8aAPcfLQt2bqs1JT_rMgQ"
    assert encode_quorum_state(state) == text


def test_fixture_partition_metadata() -> None:
    path = PARTITION_DIR / "partition.metadata"
    assert read_partition_metadata(path) == METADATA_TOPIC_ID
    assert encode_partition_metadata() == path.read_bytes()
    assert len(encode_partition_metadata()) == 43


def test_fixture_leader_epoch_checkpoint() -> None:
    path = PARTITION_DIR / "leader-epoch-checkpoint"
    entries = read_leader_epoch_checkpoint(path)
    assert entries == [EpochEntry(epoch=1, start_offset=0)]
    assert encode_leader_epoch_checkpoint(entries) == path.read_bytes() == b"0\n1\n1 0\n"


def test_fixture_meta_properties() -> None:
    path = FIXTURE / "meta.properties"
    meta = read_meta_properties(path)
    assert meta == MetaProperties(
        version=1,
        cluster_id="q1w2e3r4t5y6u7i8o9p0",
        node_id=1,
        directory_id=uuid_from_base64("XHhkr4tkSsD900pOQ8pPfg", "t"),
    )
    written = encode_meta_properties(meta)
    assert parse_java_properties(written.decode(), "w") == parse_java_properties(path.read_text(), "f")
    assert written.startswith(b"#\n#")
    # With the fixture's own timestamp, even the comment lines and Java 17's key order match.
    when = datetime(2026, 1, 30, 16, 43, 51, tzinfo=UTC)
    assert encode_meta_properties(meta, now=when) == path.read_bytes()


def test_meta_properties_sorted_key_order_of_java_18_and_later() -> None:
    meta = MetaProperties(1, "abc", 3, None)
    text = encode_meta_properties(meta, now=datetime(2024, 2, 3, 4, 5, 6, tzinfo=UTC), key_order="sorted")
    assert text == b"#\n#Sat Feb 03 04:05:06 UTC 2024\ncluster.id=abc\nnode.id=3\nversion=1\n"


def test_meta_properties_version_0_uses_broker_id() -> None:
    meta = parse_meta_properties(b"#\n#x\nbroker.id=7\nversion=0\ncluster.id=zk-cluster\n", "m")
    assert meta == MetaProperties(0, "zk-cluster", 7, None)
    assert parse_meta_properties(encode_meta_properties(meta), "m") == meta
    assert b"broker.id=7\n" in encode_meta_properties(meta)
    assert parse_meta_properties(b"broker.id=2\n", "m") == MetaProperties(0, None, 2, None)  # no version key


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (b"version=1\ncluster.id=c\n", "node.id was not found"),
        (b"version=1\nnode.id=1\n", "cluster.id was not found"),
        (b"version=1\nnode.id=1 \ncluster.id=c\n", "node.id '1 ' is not a base-10 integer"),
        (b"version=x\n", "version 'x' is not a base-10 integer"),
        (b"version=0\ndirectory.id=nope\n", "is not a base64url Kafka Uuid"),
        (b"version=1\nnode.id=1\ncluster.id=c\nkey=\\u12\n", "malformed \\\\uxxxx"),
    ],
)
def test_meta_properties_errors_name_the_file(text: bytes, problem: str) -> None:
    with pytest.raises(CorruptDataError, match=problem) as err:
        parse_meta_properties(text, "/data/kafka/meta.properties")
    assert str(err.value).startswith("/data/kafka/meta.properties")


def test_meta_properties_unknown_version() -> None:
    with pytest.raises(UnsupportedVersionError, match=r"unknown meta\.properties version number 2"):
        parse_meta_properties(b"version=2\n", "m")


def test_writers_replace_files_atomically(tmp_path: Path) -> None:
    write_quorum_state(tmp_path / "quorum-state", QuorumState(3, 4, -1, 1, uuid.UUID(int=5)))
    write_partition_metadata(tmp_path / "partition.metadata")
    write_leader_epoch_checkpoint(
        tmp_path / "leader-epoch-checkpoint", [EpochEntry(1, 0), EpochEntry(4, 120)]
    )
    write_meta_properties(tmp_path / "meta.properties", MetaProperties(1, "c", 1, uuid.UUID(int=9)))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "leader-epoch-checkpoint",
        "meta.properties",
        "partition.metadata",
        "quorum-state",
    ]
    assert read_quorum_state(tmp_path / "quorum-state").voted_directory_id == uuid.UUID(int=5)
    assert read_leader_epoch_checkpoint(tmp_path / "leader-epoch-checkpoint")[1] == EpochEntry(4, 120)
    assert read_meta_properties(tmp_path / "meta.properties").directory_id == uuid.UUID(int=9)
    assert read_partition_metadata(tmp_path / "partition.metadata") == METADATA_TOPIC_ID


# ------------------------------------------------------------------ parse errors name the file


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (b"1\n1\n1 0\n", None),
        (b"0\n2\n1 0\n", "header says 2 entries but the file has 1"),
        (b"0\n1\n1\t0 5\n", "is not '<epoch> <start offset>'"),
        (b"0\n1\n 1 0\n", "is not '<epoch> <start offset>'"),
        (b"0\nx\n", "entry count 'x'"),
        (b"0\n1\n1 99999999999999999999\n", "out of range"),
    ],
)
def test_leader_epoch_checkpoint_errors(text: bytes, problem: str | None) -> None:
    with pytest.raises(
        (CorruptDataError, UnsupportedVersionError), match=problem or "checkpoint version 1"
    ) as err:
        parse_leader_epoch_checkpoint(text, "/m/__cluster_metadata-0/leader-epoch-checkpoint")
    assert "/m/__cluster_metadata-0/leader-epoch-checkpoint" in str(err.value)


def test_leader_epoch_checkpoint_accepts_what_kafka_accepts() -> None:
    assert parse_leader_epoch_checkpoint(b"", "x") == []
    assert parse_leader_epoch_checkpoint(b"0\n", "x") == []
    assert parse_leader_epoch_checkpoint(b"0\r\n2\r\n1 0\r\n3\t\t17\r\n", "x") == [
        EpochEntry(1, 0),
        EpochEntry(3, 17),
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (b"version: 1\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ", "version 1"),
        (b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", "zero Uuid"),
        (b"version: 0\n", "expected a 'version:' line and a 'topic_id:' line"),
        (b"version: 0\ntopicid: AAAAAAAAAAAAAAAAAAAAAQ", "malformed topic id line"),
        (b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAA+Q", "not a base64url Kafka Uuid"),
    ],
)
def test_partition_metadata_errors(text: bytes, problem: str) -> None:
    with pytest.raises((CorruptDataError, UnsupportedVersionError), match=problem) as err:
        parse_partition_metadata(text, "/m/partition.metadata")
    assert "/m/partition.metadata" in str(err.value)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (b"", "file is empty"),
        (b"{", "invalid JSON"),
        (b"[1]", "not a JSON object"),
        (b'{"leaderId":1}', "'data_version' is missing"),
        (b'{"data_version":2}', "data_version \\(2\\)"),
        (b'{"leaderId":1,"leaderEpoch":1,"votedId":-1,"data_version":1}', "'votedDirectoryId' is missing"),
        (b'{"leaderId":true,"leaderEpoch":1,"votedId":-1,"data_version":0}', "'leaderId' is True"),
        (
            b'{"clusterId":"","leaderId":1,"leaderEpoch":1,"votedId":-1,"appliedOffset":0,"data_version":0}',
            "currentVoters",
        ),
    ],
)
def test_quorum_state_errors(text: bytes, problem: str) -> None:
    with pytest.raises((CorruptDataError, UnsupportedVersionError), match=problem) as err:
        parse_quorum_state(text, "/m/quorum-state")
    assert "/m/quorum-state" in str(err.value)


def test_quorum_state_null_voters_and_extra_keys() -> None:
    text = b'{"clusterId":"","leaderId":-1,"leaderEpoch":0,"votedId":-1,"appliedOffset":0,"currentVoters":null,"data_version":0}'
    state = parse_quorum_state(text + b"\n", "q")
    assert state.current_voters is None
    assert encode_quorum_state(state) == text
    extra = b'{"leaderId":1,"leaderEpoch":1,"votedId":1,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","x":1,"data_version":1}'
    assert parse_quorum_state(extra, "q").leader_id == 1


# ------------------------------------------------------------------ Java properties


def test_java_properties_syntax() -> None:
    text = (
        "# comment\n"
        "! another comment\n"
        "   \n"
        "a=1\n"
        "b : 2\n"
        "c 3\n"
        "d\t=\t 4 \n"
        "e\n"
        "f=multi\\\n"
        "     line\\\n"
        "\tvalue\n"
        "g\\ key\\:x=\\u0041\\t\\n\\=\\\\\n"
        "h==x\n"
        "i:=y\n"
        "  j = #not a comment\r\n"
        "k=crlf\r"
        "l=last"
    )
    assert parse_java_properties(text, "p") == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "4 ",
        "e": "",
        "f": "multilinevalue",
        "g key:x": "A\t\n=\\",
        "h": "=x",
        "i": "=y",
        "j": "#not a comment",
        "k": "crlf",
        "l": "last",
    }


def test_java_properties_writer_escapes() -> None:
    text = format_java_properties([(" a=b", " c#d\\"), ("é", "\tx")], comment=None, key_order="given")
    body = text.split("\n", 1)[1]
    assert body == "\\ a\\=b=\\ c\\#d\\\\\né=\\tx\n"
    assert parse_java_properties(text, "p") == {" a=b": " c#d\\", "é": "\tx"}


texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)


@given(st.dictionaries(texts, texts, max_size=8), st.sampled_from(["hashtable", "sorted", "given"]))
@settings(max_examples=300, deadline=None)
def test_java_properties_round_trip(props: dict[str, str], order: str) -> None:
    text = format_java_properties(props.items(), key_order=order)  # type: ignore[arg-type]
    assert parse_java_properties(text, "p") == props
    assert text.count("\n") == 2 + len(props)  # line breaks inside keys and values are escaped


@given(st.text(max_size=60))
@settings(max_examples=300, deadline=None)
def test_java_properties_parser_raises_only_corrupt_data(text: str) -> None:
    try:
        parse_java_properties(text, "p")
    except CorruptDataError as exc:
        assert exc.source == "p"


_JAVA_PROBE = r"""
import java.io.*;
import java.nio.file.*;
import java.util.*;

public class PropsProbe {
    static String hex(String s) {
        StringBuilder b = new StringBuilder();
        for (char c : s.toCharArray()) b.append(String.format("%04x", (int) c));
        return b.length() == 0 ? "-" : b.toString();
    }
    static String unhex(String h) {
        if (h.equals("-")) return "";
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < h.length(); i += 4) b.append((char) Integer.parseInt(h.substring(i, i + 4), 16));
        return b.toString();
    }
    public static void main(String[] args) throws Exception {
        Path dir = Paths.get(args[0]);
        for (String name : Files.readAllLines(dir.resolve("loads.txt"))) {
            Properties p = new Properties();
            try (InputStream in = Files.newInputStream(dir.resolve(name))) {
                p.load(in);
                List<String> keys = new ArrayList<>(p.stringPropertyNames());
                Collections.sort(keys);
                StringBuilder line = new StringBuilder("LOAD");
                for (String k : keys) line.append(" ").append(hex(k)).append(" ").append(hex(p.getProperty(k)));
                System.out.println(line);
            } catch (IllegalArgumentException e) {
                System.out.println("LOAD ERROR");
            }
        }
        for (String line : Files.readAllLines(dir.resolve("stores.txt"))) {
            Properties p = new Properties();
            String[] parts = line.split(" ");
            for (int i = 0; i + 1 < parts.length; i += 2) p.setProperty(unhex(parts[i]), unhex(parts[i + 1]));
            StringWriter w = new StringWriter();
            p.store(w, "");
            String text = w.toString();
            int second = text.indexOf('\n', text.indexOf('\n') + 1);
            System.out.println("STORE " + hex(text.substring(second + 1)));
        }
    }
}
"""


def _hex(text: str) -> str:
    return "".join(f"{ord(c):04x}" for c in text) or "-"


def _unhex(text: str) -> str:
    return "" if text == "-" else "".join(chr(int(text[i : i + 4], 16)) for i in range(0, len(text), 4))


@pytest.mark.skipif(shutil.which("java") is None, reason="needs a JDK to compare with java.util.Properties")
def test_java_properties_agree_with_the_jdk(tmp_path: Path) -> None:
    """Our parser and writer against the local JDK's Properties.load/store on tricky random input."""
    rng = random.Random(20240601)
    pieces = [
        "a",
        "b",
        "=",
        ":",
        " ",
        "\t",
        "\f",
        "\\",
        "\\",
        "\n",
        "\r",
        "\r\n",
        "#",
        "!",
        "\\u0041",
        "é",
        "\\n",
        "\\\n",
    ]
    loads = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 30))) for _ in range(800)]
    for i, text in enumerate(loads):
        (tmp_path / f"{i}.properties").write_bytes(text.encode("latin-1"))
    (tmp_path / "loads.txt").write_text("".join(f"{i}.properties\n" for i in range(len(loads))))
    chars = ["a", "b", "=", ":", " ", "\t", "\f", "\\", "\n", "\r", "#", "!", "é", "\x01", "€", ".", "0"]
    words = ["node.id", "cluster.id", "version", "directory.id", "broker.id"] + [f"k{i}" for i in range(60)]
    stores: list[list[tuple[str, str]]] = []
    for _ in range(150):  # escaping of arbitrary keys and values
        stores.append(
            [
                (
                    "".join(rng.choices(chars, k=rng.randint(0, 6))),
                    "".join(rng.choices(chars, k=rng.randint(0, 6))),
                )
                for _ in range(rng.randint(1, 6))
            ]
        )
    for _ in range(150):  # key order of a Java 17 Properties, across table resizes
        stores.append([(key, "v") for key in rng.sample(words, rng.randint(1, 40))])
    (tmp_path / "stores.txt").write_text(
        "".join(" ".join(f"{_hex(k)} {_hex(v)}" for k, v in s) + "\n" for s in stores)
    )
    (tmp_path / "PropsProbe.java").write_text(_JAVA_PROBE)
    result = subprocess.run(
        ["java", str(tmp_path / "PropsProbe.java"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == len(loads) + len(stores)
    for text, line in zip(loads, lines[: len(loads)], strict=True):
        fields = line.split(" ")[1:]
        try:
            ours: object = sorted(parse_java_properties(text, "p").items())
        except CorruptDataError:
            ours = "ERROR"
        theirs: object = (
            "ERROR"
            if fields == ["ERROR"]
            else [(_unhex(fields[i]), _unhex(fields[i + 1])) for i in range(0, len(fields), 2)]
        )
        assert ours == theirs, repr(text)
    for entries, line in zip(stores, lines[len(loads) :], strict=True):
        ours_text = format_java_properties(entries, key_order="hashtable").split("\n", 2)[2]
        assert ours_text == _unhex(line.split(" ")[1]), entries


# ------------------------------------------------------------------ file names


def test_segment_names() -> None:
    assert segment_file_name(12345) == "00000000000000012345.log"
    assert segment_file_name(7, ".timeindex") == "00000000000000000007.timeindex"
    assert parse_segment_file_name("00000000000000012345.log") == 12345
    for other in ("00000000000000012345.index", "00000000000000012345.log.deleted", "12345.log", "x.log"):
        assert parse_segment_file_name(other) is None


def test_list_segments_in_offset_order(tmp_path: Path) -> None:
    for name in (
        "00000000000000000100.log",
        "00000000000000000020.log",
        "00000000000000000020.index",
        "junk",
    ):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "00000000000000000005.log.swap").write_bytes(b"")
    assert [(s.base_offset, s.path.name) for s in list_segments(tmp_path)] == [
        (20, "00000000000000000020.log"),
        (100, "00000000000000000100.log"),
    ]


def test_snapshot_names(tmp_path: Path) -> None:
    assert snapshot_file_name(SnapshotId(12345, 7)) == "00000000000000012345-0000000007.checkpoint"
    assert parse_snapshot_file_name("00000000000000012345-0000000007.checkpoint") == SnapshotId(12345, 7)
    for ignored in (
        "00000000000000012345-0000000007.checkpoint.part",
        "00000000000000012345-0000000007-3b2c.checkpoint.part",
        "00000000000000012345-0000000007.checkpoint.deleted",
        "00000000000000012345.log",
        "bootstrap.checkpoint",
        "00000000000000012345-9999999999.checkpoint",  # epoch beyond int32
    ):
        assert parse_snapshot_file_name(ignored) is None
    for name in (
        "00000000000000000900-0000000002.checkpoint",
        "00000000000000000100-0000000001.checkpoint",
        "00000000000000000100-0000000001.checkpoint.part",
    ):
        (tmp_path / name).write_bytes(b"")
    assert [s for s, _ in list_snapshots(tmp_path)] == [SnapshotId(100, 1), SnapshotId(900, 2)]
    with pytest.raises(Zk2KraftError):
        snapshot_file_name(SnapshotId(-1, 0))


def test_uuid_text_form() -> None:
    assert uuid_to_base64(METADATA_TOPIC_ID) == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert uuid_from_base64("AAAAAAAAAAAAAAAAAAAAAQ==", "x") == METADATA_TOPIC_ID
    with pytest.raises(CorruptDataError, match=r"in\.file"):
        uuid_from_base64("AAAA", "in.file")


# ------------------------------------------------------------------ segments and indexes


def test_write_segment_reproduces_the_fixture_log_and_kafkas_indexes(tmp_path: Path) -> None:
    data = LOG.read_bytes()
    batches = list(iter_batches(data, "log"))
    written = write_segment(tmp_path, 0, [encode_batch(b) for _, b in batches])
    assert written.log_path.read_bytes() == data
    assert written.next_offset == batches[-1][1].last_offset + 1
    assert (written.batch_count, written.size_in_bytes) == (len(batches), len(data))
    offsets = decode_offset_index(written.index_path.read_bytes(), 0, "index")
    times = decode_time_index(written.time_index_path.read_bytes(), 0, "timeindex")

    # LogSegment.recover: an entry for a batch once more than 4096 bytes were appended since the last one.
    by_position = {p: b for p, b in batches}
    expected, last_entry = [], 0
    for position, batch in batches:
        if position - last_entry > 4096:
            expected.append(OffsetIndexEntry(batch.last_offset, position))
            last_entry = position
    assert offsets == expected
    assert len(offsets) > 50
    assert all(by_position[e.position].last_offset == e.offset for e in offsets)

    # time entries only when the max timestamp grew; the last one is the segment's max (written on close)
    assert [t.timestamp for t in times] == sorted({t.timestamp for t in times})
    max_ts = max(b.max_timestamp for _, b in batches)
    first_with_max = next(b for _, b in batches if b.max_timestamp == max_ts)
    assert times[-1] == TimeIndexEntry(max_ts, first_with_max.last_offset)


def test_write_segment_accepts_batches_and_checks_offsets(tmp_path: Path) -> None:
    first = build_batch(100, 1, 1000, [(None, b"a"), (None, b"b")], control=False)
    second = build_batch(102, 1, 900, [(None, b"c")], control=False)
    written = write_segment(tmp_path, 100, [first, second], interval_bytes=0)
    assert written.log_path.name == "00000000000000000100.log"
    assert written.next_offset == 103
    # interval 0: every batch after the first gets an entry; time entry only for a growing timestamp
    assert decode_offset_index(written.index_path.read_bytes(), 100, "i") == [
        OffsetIndexEntry(102, first.size_in_bytes)
    ]
    assert decode_time_index(written.time_index_path.read_bytes(), 100, "t") == [TimeIndexEntry(1000, 101)]
    with pytest.raises(Zk2KraftError, match="do not follow"):
        write_segment(tmp_path / "b", 100, [second, first])
    with pytest.raises(Zk2KraftError, match="below the segment base offset 200"):
        write_segment(tmp_path / "c", 200, [first])
    with pytest.raises(Zk2KraftError, match="cannot be indexed"):
        write_segment(
            tmp_path / "c", 100, [first, build_batch(100 + 2**31, 1, 5, [(None, b"x")], control=False)]
        )
    corrupt = bytearray(encode_batch(first))
    corrupt[-1] ^= 1
    with pytest.raises(CorruptDataError, match="CRC-32C"):
        write_segment(tmp_path / "d", 100, [bytes(corrupt)])
    assert not (tmp_path / "d" / "00000000000000000100.log").exists()


def test_index_builder_time_index_waits_for_growth() -> None:
    builder = SegmentIndexBuilder(0, interval_bytes=10)
    for i, (ts, size) in enumerate([(5, 20), (5, 20), (4, 20), (9, 20)]):
        builder.add_batch(i, i, ts, size)
    index, timeindex = builder.close()
    assert decode_offset_index(index, 0, "i") == [
        OffsetIndexEntry(1, 20),
        OffsetIndexEntry(2, 40),
        OffsetIndexEntry(3, 60),
    ]
    assert decode_time_index(timeindex, 0, "t") == [TimeIndexEntry(5, 0), TimeIndexEntry(9, 3)]


def test_index_codecs() -> None:
    entries = [OffsetIndexEntry(10, 0), OffsetIndexEntry(15, 4200)]
    raw = encode_offset_index(entries, 10)
    assert raw == bytes.fromhex("00000000 00000000 00000005 00001068")
    assert decode_offset_index(raw, 10, "i") == entries
    times = [TimeIndexEntry(1700000000000, 12)]
    assert decode_time_index(encode_time_index(times, 10), 10, "t") == times
    with pytest.raises(CorruptDataError, match=r"00000000000000000010\.index"):
        decode_offset_index(raw[:-1], 10, "00000000000000000010.index")
    with pytest.raises(CorruptDataError, match="multiple of 12"):
        decode_time_index(b"\x00" * 13, 10, "t")


# ------------------------------------------------------------------ properties


int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
uuids = st.builds(uuid.UUID, int=st.integers(0, 2**128 - 1))


@given(st.lists(st.builds(EpochEntry, int32, int64), max_size=10))
def test_leader_epoch_checkpoint_round_trip(entries: list[EpochEntry]) -> None:
    assert parse_leader_epoch_checkpoint(encode_leader_epoch_checkpoint(entries), "x") == entries


@given(
    st.one_of(
        st.builds(QuorumState, int32, int32, int32, st.just(1), uuids, st.none()),
        st.builds(
            QuorumState,
            int32,
            int32,
            int32,
            st.just(0),
            st.just(uuid.UUID(int=0)),
            st.none() | st.tuples(int32, int32).map(tuple),
            st.text(max_size=8),
            int64,
        ),
    )
)
def test_quorum_state_round_trip(state: QuorumState) -> None:
    assert parse_quorum_state(encode_quorum_state(state), "q") == state


@given(
    st.one_of(
        st.builds(MetaProperties, st.just(1), st.text(min_size=1, max_size=12), int32, st.none() | uuids),
        st.builds(
            MetaProperties, st.just(0), st.none() | st.text(max_size=12), st.none() | int32, st.none() | uuids
        ),
    )
)
@settings(deadline=None)
def test_meta_properties_round_trip(meta: MetaProperties) -> None:
    # Kafka reads the UTF-8 file as ISO-8859-1, so only Latin-1 text survives a round trip.
    data = encode_meta_properties(meta)
    parsed = parse_meta_properties(data, "m")
    if meta.cluster_id is None or meta.cluster_id.isascii():
        assert parsed == meta


@given(st.binary(max_size=200))
@settings(max_examples=300)
def test_file_parsers_raise_only_our_errors(data: bytes) -> None:
    for parse in (
        parse_leader_epoch_checkpoint,
        parse_partition_metadata,
        parse_quorum_state,
        parse_meta_properties,
    ):
        try:
            parse(data, "f")
        except Zk2KraftError as exc:
            assert "f" in str(exc)
