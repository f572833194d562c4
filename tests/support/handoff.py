"""The hand-off conformance kit: read a bridge's directory and ZooKeeper as a Kafka 3.9 controller would.

`kafka_would_lead` runs every check of `zk2kraft handoff check` (validators.handoff, each naming its Kafka
class) and says which failed; bridge tests call it on the directories they leave behind. The helpers below
make one thing wrong at a time in a copy of such a directory.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from kazoo.client import KazooClient

from migrate.kraft.logdir import list_segments
from migrate.kraft.reader import METADATA_PARTITION_DIR
from validators.handoff import HandoffCheck, HandoffReport, handoff_check


def failed(report: HandoffReport) -> dict[str, HandoffCheck]:
    """The checks that did not pass (fail or not checked), by id."""
    return {c.id: c for c in report.checks if c.verdict not in ("pass", "warn")}


def kafka_would_lead(metadata_dir: Path, zk_client: KazooClient, node_id: int | None = None) -> HandoffReport:
    """Every hand-off check on `metadata_dir` and the ZooKeeper `zk_client` is rooted at; asserts all pass."""
    report = handoff_check(metadata_dir, zk_client, node_id=node_id)
    assert report.leads, "\n".join(f"{c.id}: {c.detail} -> {c.kafka_would}" for c in failed(report).values())
    return report


def copy_directory(source: Path, target: Path) -> Path:
    """A writable copy of a metadata directory (the shared fixtures are read-only)."""
    shutil.copytree(source, target)
    for f in target.rglob("*"):
        f.chmod(0o755 if f.is_dir() else 0o644)
    return target


def last_segment(metadata_dir: Path) -> Path:
    return list_segments(metadata_dir / METADATA_PARTITION_DIR)[-1].path


def flip_byte(path: Path, position: int) -> None:
    """Flip one bit of the byte at `position` (negative: from the end)."""
    data = bytearray(path.read_bytes())
    data[position] ^= 0x01
    path.write_bytes(bytes(data))
