"""`zk2kraft rollback`: the ZooKeeper side of reverting a migration that was not finalized."""

from __future__ import annotations

import click

from cli.common import fail


@click.command("rollback")
def rollback_cmd() -> None:
    """Revert the ZooKeeper side of an unfinalized migration (in progress)."""
    fail("rollback is not implemented yet")
