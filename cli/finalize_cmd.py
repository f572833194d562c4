"""`zk2kraft finalize-check`: the gate before the point of no return."""

from __future__ import annotations

import click

from cli.common import fail


@click.command("finalize-check")
def finalize_check_cmd() -> None:
    """Check every condition for finalizing the migration (in progress)."""
    fail("finalize-check is not implemented yet")
