"""`zk2kraft audit`: prove that ZooKeeper and the KRaft metadata log hold the same cluster (Spark)."""

from __future__ import annotations

import click

from cli.common import fail


@click.command("audit")
def audit_cmd() -> None:
    """Compare a ZooKeeper-mode cluster with a KRaft metadata log, on Spark (in progress)."""
    fail("audit is not implemented yet")
