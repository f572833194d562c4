"""`zk2kraft zk export|load`: copy a ZooKeeper tree to a portable dump and back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from cli.common import handles_errors, progress, stderr, zk_session
from cli.options import (
    print_source_notices,
    zk_connect_from,
    zk_security_options,
    zk_source_from,
    zk_source_options,
)
from migrate.zk.dump import read_dump, write_dump
from migrate.zk.load import load_tree
from migrate.zk.sources import read_source, split_connect_string


@click.group("zk")
def zk_group() -> None:
    """Export a ZooKeeper tree to a portable dump, or load a dump into another ZooKeeper.

    \b
    Example (rehearse on a copy, never touching production):
      zk2kraft zk export --zk-data-dir /backup/zookeeper --chroot /kafka -o kafka.jsonl
      zk2kraft zk load kafka.jsonl --zk 127.0.0.1:2181/rehearsal
    """


@zk_group.command("export")
@zk_source_options
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True, help="Dump file to write.")
@handles_errors
def export_cmd(output: Path, **kwargs: Any) -> None:
    """Write every znode under Kafka's chroot to a JSON-lines dump (data, stat, ACL, ephemeral owner).

    \b
    Examples:
      zk2kraft zk export --zk zk1:2181,zk2:2181/kafka -o kafka-zk.jsonl
      zk2kraft zk export --zk-data-dir /var/lib/zookeeper --chroot /kafka -o kafka-zk.jsonl

    Reading a dataDir never touches the running ensemble: point it at a backup copy.
    """
    source = zk_source_from(kwargs)
    with progress(f"reading znodes from {source.describe()}") as bar:
        # An export may copy a whole ensemble (Kafka's chroot is chosen when the dump is read).
        result = read_source(source, progress=lambda n: bar.update(completed=n), acls=True, require_kafka=False)
    count = write_dump(
        result.tree,
        output,
        chroot=result.chroot,
        warnings=result.warnings,
        accepted_older_state=result.older_state_accepted,
    )
    stderr.print(f"exported {count} znodes from {result.origin} (chroot {result.chroot}) to {output}")
    print_source_notices(result.warnings, result.notes, older_state=result.older_state_accepted)


@zk_group.command("load")
@click.argument("dump", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--zk", "zk_connect", required=True, metavar="HOST:PORT[/chroot]", help="Target ZooKeeper (chroot included).")
@click.option("--force", is_flag=True, help="Overwrite the data of znodes that already exist in the target.")
@zk_security_options
@handles_errors
def load_cmd(dump: Path, zk_connect: str, force: bool, **zk_security: Any) -> None:
    """Recreate a dump's znodes in another ZooKeeper, for rehearsing a migration on a copy.

    \b
    Example:
      zk2kraft zk load kafka-zk.jsonl --zk 127.0.0.1:2181/rehearsal

    Znodes are created in multi-op transactions; a failure rolls back what this load created. Existing
    znodes are never overwritten unless --force. Ephemeral znodes (broker registrations) are created as
    persistent ones, and ZooKeeper's own /zookeeper subtree is skipped.
    """
    tree = read_dump(dump)
    _hosts, chroot = split_connect_string(zk_connect)
    # The target chroot is created by the load, so the session is at the ensemble's root.
    with zk_session(zk_connect_from(zk_connect, zk_security), require_kafka=False, create_chroot=True) as client, progress("loading znodes", total=len(tree)) as bar:
        report = load_tree(client, tree, chroot=chroot, force=force, progress=lambda n: bar.update(completed=n))
    stderr.print(
        f"loaded {report.created} znodes into {zk_connect} in {report.transactions} transactions"
        + (f", updated {report.updated}" if report.updated else "")
        + (f" ({report.ephemeral_as_persistent} ephemeral znodes created as persistent)" if report.ephemeral_as_persistent else "")
    )
