"""`make demo`: a migration rehearsal on an embedded ZooKeeper and the sample cluster in examples/.

Every step runs the real `zk2kraft` command, printed before it runs, so the demo doubles as a tutorial.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.rule import Rule

from migrate.zk.embedded import EmbeddedZooKeeper

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BIN = Path(sys.executable).parent / "zk2kraft"
OUT = ROOT / "demo-out"
console = Console(highlight=False)


def run(*args: str) -> None:
    """Run one zk2kraft command, echoing it first; stop the demo if it fails."""
    console.print(f"[bold cyan]$ zk2kraft {' '.join(shlex.quote(a) for a in args)}[/]")
    result = subprocess.run([str(BIN), *args], cwd=ROOT)
    if result.returncode != 0:
        console.print(f"[bold red]demo step failed with exit code {result.returncode}[/]")
        sys.exit(result.returncode)


def step(title: str) -> None:
    console.print(Rule(f"[bold]{title}"))


def main() -> None:
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir()
    kraft_example = HERE / "kraft-metadata"

    step("1. Decode a real KRaft metadata log (Kafka 3.7 node) and count its records")
    run("dump", "--summary", "--format", "table", str(kraft_example / "__cluster_metadata-0"))

    step("2. Replay that log and write the snapshot a KRaft controller would write")
    copy = OUT / "kraft-metadata-copy"
    shutil.copytree(kraft_example, copy)
    run("snapshot", str(copy))
    newest = sorted((copy / "__cluster_metadata-0").glob("*.checkpoint"))[-1]
    run("dump", "--summary", "--format", "table", str(newest))

    step("3. Start an embedded ZooKeeper (from the jars inside pyspark)")
    with tempfile.TemporaryDirectory(prefix="zk2kraft-demo-zk-") as zk_dir, EmbeddedZooKeeper(Path(zk_dir)) as zk:
        console.print(f"ZooKeeper {zk.four_letter_word('srvr').splitlines()[0]} serving on {zk.connect_string}")
        _later_steps(zk)
    console.print("ZooKeeper stopped.")
    console.print(Rule("[bold green]demo finished"))
    console.print(f"Outputs are in {OUT.relative_to(ROOT)}/")


def _later_steps(zk: EmbeddedZooKeeper) -> None:
    """Steps that need ZooKeeper: load the sample cluster and migrate it (once those commands exist)."""
    from cli.main import cli

    if "migrate" not in cli.commands:
        return
    sample = HERE / "sample-cluster"
    chroot = "/de-4-3-kafka-cluster"
    step("4. Export the sample cluster from its ZooKeeper snapshots, offline, and load it into ZooKeeper")
    dump = OUT / "sample-cluster.jsonl"
    run("zk", "export", "--zk-data-dir", str(sample), "--chroot", chroot, "-o", str(dump))
    run("zk", "load", str(dump), "--zk", zk.connect_string + chroot)

    step("5. Migrate it: ZooKeeper → KRaft metadata directory, as Kafka 3.9's migration would")
    out = OUT / "kraft-from-zk"
    run("migrate", "--zk", zk.connect_string + chroot, "--out", str(out), "--controller-id", "3000")
    run("dump", "--summary", "--format", "table", str(out / "__cluster_metadata-0"))


if __name__ == "__main__":
    main()
