"""migrate.jvm against a real JVM: a small Java program (compiled here with javac, Scala 2.13 from pyspark's jars)
prints String.hashCode, the iteration orders of Java and Scala hash maps, and Double text."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pyspark
import pytest

from migrate import jvm

SPARK_JARS = Path(pyspark.__file__).parent / "jars"

STRINGS = [
    "", "a", "topic", "leader_epoch", "isr", "partitions", "removing_replicas", "controller_epoch",
    "Aa", "BB",  # a classic collision
    "polygenelubricants", "a-much-longer-topic-name-whose-hash-wraps-around-many-times.v2",
    "é", "naïve-topic", "日本語", "emoji-😀",  # non-ASCII and a surrogate pair
]  # fmt: skip
KEY_SETS = [
    ["version", "acls"],
    ["principal", "permissionType", "operation", "host"],
    ["version", "partitions", "topic_id", "adding_replicas", "removing_replicas"],
    [str(p) for p in range(13)],  # one put past the first resize threshold
    [str(p) for p in range(100)],
    [f"key-{i}" for i in range(40)],
    ["cleanup.policy", "retention.ms", "segment.bytes", "min.insync.replicas", "compression.type",
     "max.message.bytes", "message.timestamp.type", "unclean.leader.election.enable", "flush.ms"],
]  # fmt: skip
DOUBLES = [0.5, 100.0, 1024.0, 1e7, 1e-4, 0.001, 123456.789, -2.5, -0.0, 1e100]

PROGRAM = r"""
import java.util.*;
import java.util.concurrent.ConcurrentHashMap;

public class Jvm {
    static String join(Iterable<?> keys) {
        StringBuilder b = new StringBuilder();
        for (Object k : keys) { if (b.length() > 0) b.append('\u0001'); b.append(k); }
        return b.toString();
    }
    static String join(scala.collection.Iterator<String> keys) {
        List<String> out = new ArrayList<>();
        while (keys.hasNext()) out.add(keys.next());
        return join(out);
    }
    public static void main(String[] args) throws Exception {
        Scanner in = new Scanner(System.in, "UTF-8").useDelimiter("\n");
        while (in.hasNext()) {
            String[] parts = in.next().split("\t", -1);
            String kind = parts[0];
            String[] keys = parts.length > 1 && !parts[1].isEmpty() ? parts[1].split("\u0001", -1) : new String[0];
            String out;
            switch (kind) {
                case "hash": out = Integer.toString(keys.length == 0 ? "".hashCode() : keys[0].hashCode()); break;
                case "hashmap": {
                    Map<String, Integer> m = new HashMap<>();
                    for (String k : keys) m.put(k, 0);
                    out = join(m.keySet()); break;
                }
                case "hashmap3": {
                    Map<String, Integer> m = new HashMap<>(3);
                    for (String k : keys) m.put(k, 0);
                    out = join(m.keySet()); break;
                }
                case "chm": {
                    Properties p = new Properties();  // Java 9+: a ConcurrentHashMap(8) inside
                    for (String k : keys) p.setProperty(k, "");
                    out = join(p.keySet()); break;
                }
                case "hashtable": {
                    Hashtable<String, String> t = new Hashtable<>();  // Java 8's Properties storage
                    for (String k : keys) t.put(k, "");
                    out = join(Collections.list(t.keys())); break;
                }
                case "scala": {
                    scala.collection.immutable.Map<String, Object> m = scala.collection.immutable.Map$.MODULE$.empty();
                    for (String k : keys) m = m.updated(k, (Object) 0);
                    out = join(m.keysIterator()); break;
                }
                case "scala-mutable": {
                    scala.collection.mutable.HashMap<String, Object> m = new scala.collection.mutable.HashMap<>();
                    for (String k : keys) m.update(k, 0);
                    out = join(m.keysIterator()); break;
                }
                case "double": out = Double.toString(Double.longBitsToDouble(Long.parseLong(keys[0]))); break;
                default: throw new IllegalArgumentException(kind);
            }
            System.out.println(out);
        }
    }
}
"""


@pytest.fixture(scope="module")
def ask(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """Run the program once over many requests: (kind, keys) -> the JVM's answer."""
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("no JDK (javac) installed")
    scala = sorted(SPARK_JARS.glob("scala-library-2.13*.jar"))
    if not scala:
        pytest.skip("scala-library-2.13 jar not available")
    work = tmp_path_factory.mktemp("jvm")
    (work / "Jvm.java").write_text(PROGRAM)
    subprocess.run(["javac", "-encoding", "UTF-8", "-cp", str(scala[0]), "-d", str(work), str(work / "Jvm.java")],
                   check=True, capture_output=True)  # fmt: skip

    def run(requests: list[tuple[str, list[str]]]) -> list[str]:
        text = "".join(f"{kind}\t{chr(1).join(keys)}\n" for kind, keys in requests)
        done = subprocess.run(
            ["java", "-Dfile.encoding=UTF-8", "-cp", f"{work}:{scala[0]}", "Jvm"],
            input=text.encode("utf-8", "surrogatepass"), capture_output=True, check=True,
        )  # fmt: skip
        return done.stdout.decode("utf-8", "surrogatepass").split("\n")[: len(requests)]

    return run


def test_string_hash_is_javas_hash_code(ask) -> None:  # type: ignore[no-untyped-def]
    printed = ask([("hash", [s]) for s in STRINGS])
    ours = [jvm.signed32(jvm.java_string_hash(s)) for s in STRINGS]
    assert ours == [int(p) for p in printed]
    assert all(0 <= jvm.java_string_hash(s) < 1 << 32 for s in STRINGS)  # unsigned, the one convention


def test_map_orders_are_the_jvms(ask) -> None:  # type: ignore[no-untyped-def]
    kinds = ["hashmap", "hashmap3", "chm", "hashtable", "scala", "scala-mutable"]
    printed = iter(ask([(kind, keys) for keys in KEY_SETS for kind in kinds]))
    for keys in KEY_SETS:
        got = {kind: next(printed).split("\u0001") for kind in kinds}
        assert jvm.java_hash_map_order(keys) == got["hashmap"], keys
        assert jvm.java_hash_map_order(keys, initial_capacity=3) == got["hashmap3"], keys
        assert jvm.concurrent_hash_map_order(keys) == got["chm"], keys
        # Properties orders keep the given order within a bucket, so the JVM's own order comes back unchanged.
        assert jvm.java_properties_order(got["chm"], java8=False) == got["chm"], keys
        assert jvm.java_properties_order(got["hashtable"], java8=True) == got["hashtable"], keys
        assert list(jvm.scala_map_order(tuple(keys))) == got["scala"], keys
        assert jvm.scala_mutable_map_order(keys) == got["scala-mutable"], keys


def test_double_text_is_javas(ask) -> None:  # type: ignore[no-untyped-def]
    import struct

    bits = [str(struct.unpack(">q", struct.pack(">d", x))[0]) for x in DOUBLES]
    printed = ask([("double", [b]) for b in bits])
    assert [jvm.java_double_to_string(x) for x in DOUBLES] == printed
    assert [jvm.parse_java_double(p) for p in printed] == DOUBLES
