"""`zk2kraft status`: which migration phase the cluster is in."""

from __future__ import annotations

import click

from cli.common import fail


@click.command("status")
def status_cmd() -> None:
    """Show the migration phase of a cluster (in progress)."""
    fail("status is not implemented yet")
