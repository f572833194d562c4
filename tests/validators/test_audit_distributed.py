"""Acceptance: the same audit on a Spark standalone cluster (a master and one worker on loopback, started
from the pyspark install) gives the same result as on local[*]."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

from tests.support.audit import (
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
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SPARK_HOME = Path(pyspark.__file__).parent
ZK2KRAFT = Path(sys.executable).parent / "zk2kraft"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Daemon:
    """One Spark daemon run by bin/spark-class in its own process group, its log in a file."""

    def __init__(self, name: str, args: list[str], log: Path) -> None:
        self.name = name
        self.log = log
        env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1"}
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                [str(SPARK_HOME / "bin" / "spark-class"), *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )

    def wait_for(self, text: str, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log.read_text(errors="replace"):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        raise AssertionError(f"Spark {self.name} did not log {text!r}:\n{self.log.read_text(errors='replace')[-3000:]}")

    def stop(self) -> None:
        if self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=15)


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`spark://127.0.0.1:PORT` of a master with one registered worker (2 cores, 2 GiB)."""
    base = tmp_path_factory.mktemp("spark-standalone")
    port = free_port()
    master = _Daemon(
        "master",
        ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(free_port())],
        base / "master.log",
    )
    worker: _Daemon | None = None
    try:
        master.wait_for("I have been elected leader")
        url = f"spark://127.0.0.1:{port}"
        worker = _Daemon(
            "worker",
            [
                "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port", str(free_port()),
                "--webui-port", str(free_port()), "--cores", "2", "--memory", "2g", "--work-dir", str(base / "work"), url,
            ],
            base / "worker.log",
        )  # fmt: skip
        worker.wait_for("Successfully registered with master")
        yield url
    finally:
        if worker is not None:
            worker.stop()
        master.stop()


def test_standalone_cluster_gives_the_local_result(standalone: str, tmp_path: Path) -> None:
    # The scenario of test_audit_divergence (one injected divergence of each kind), whose local[*] result
    # is asserted there: the cluster must report exactly the same rows.
    model = small_generated_model()
    zk_dump = dump(tree_of(model), tmp_path / "cluster.jsonl")
    meta = migrate(model, tmp_path / "meta")
    expected = inject_divergences(model, copy_meta(meta, tmp_path / "diverged"))
    out = tmp_path / "remote"
    # The driver is short-lived: a JVM without its optimizing compiler starts working sooner.
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "JAVA_TOOL_OPTIONS": "-XX:TieredStopAtLevel=1"}
    remote = subprocess.run(
        [str(ZK2KRAFT), "audit", "--zk-dump", str(zk_dump), "--kraft", str(tmp_path / "diverged"), "--out", str(out), "--master", standalone],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert remote.returncode == 1, remote.stdout + remote.stderr
    assert remote.stdout.startswith("INCONSISTENT")
    s = summary(out)
    assert s["spark_master"] == standalone
    assert s["classes"] == {"error": len(expected), "lag": 0, "expected": len(baseline_expected(model))}
    rows = discrepancy_rows(shared_spark(), out)
    assert keyed(rows, "error") == expected
    assert keyed(rows, "expected") == baseline_expected(model)
    assert len(rows) == len(expected) + len(baseline_expected(model))
