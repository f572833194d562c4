"""`zk2kraft bridge`: run the bridge-mode controller (migration leadership, initial load, dual-write)."""

from __future__ import annotations

import click


@click.group("bridge")
def bridge_group() -> None:
    """Run zk2kraft as the KRaft controller of a cluster in ZooKeeper → KRaft migration."""
