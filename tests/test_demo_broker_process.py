"""`make demo` runs each simulated broker as `python -m tests.support.broker_process` (ZooKeeper mode, then
`--kraft`): it must import and start."""

from __future__ import annotations

import subprocess
import sys

from tests.support import REPO


def test_the_demos_broker_process_imports_and_explains_itself() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.broker_process", "--help"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "--controller" in done.stdout and "--zk" in done.stdout and "--kraft" in done.stdout


def test_a_kraft_broker_process_needs_the_cluster_id_from_somewhere() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.broker_process", "--id", "1", "--controller", "127.0.0.1:1", "--kraft"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--zk is required (with --kraft, --cluster-id may stand in for it)" in done.stderr
