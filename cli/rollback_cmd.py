"""`zk2kraft rollback`: the ZooKeeper side of reverting a migration that was not finalized."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from cli.common import fail, handles_errors, zk_session
from cli.options import bridge_status_url, zk_connect_from, zk_security_options
from cli.status_cmd import bridge_view, kraft_views
from migrate.atomic import atomic_write_text
from migrate.errors import UnreachableError
from migrate.kraft.migration_state import ZkMigrationState
from migrate.plan.properties import read_properties_file
from migrate.plan.rollback import (
    backup_text,
    broker_meta_lines,
    check_broker_meta,
    execute_rollback,
    manual_steps,
    plan_rollback,
    read_rollback_state,
)


@click.command("rollback")
@click.option("--zk", "zk_connect", required=True, metavar="HOST:PORT[,...][/chroot]", help="Kafka's zookeeper.connect.")
@click.option("--chroot", help="Kafka's chroot, when not part of --zk.")
@click.option(
    "--backup",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to save /controller, /controller_epoch and /migration first (default: zk2kraft-rollback-<time>.json).",
)
@click.option("--dry-run", is_flag=True, help="Show what would be backed up, deleted and changed; write nothing.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option(
    "--force",
    is_flag=True,
    help="Go ahead although brokers seem to still run in KRaft mode, or the bridge at --bridge-status still "
    "answers or has a write-behind lag (its acknowledged changes not yet in ZooKeeper are lost).",
)
@click.option(
    "--broker-config",
    "broker_configs",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A broker's current server.properties, to print its exact remaining edits (repeatable).",
)
@click.option(
    "--broker-meta",
    "broker_metas",
    multiple=True,
    type=click.Path(path_type=Path),
    help="A broker's log dir or its meta.properties (repeatable, every log dir of every broker): refuse while "
    "one would stop the broker in ZooKeeper mode (version 1, another cluster.id), printing the file to write.",
)
@click.option(
    "--bridge-status",
    metavar="URL",
    callback=bridge_status_url,
    help="The bridge's status endpoint: refuse if finalized, while it answers (a live controller) or while "
    "ZooKeeper is behind its log; a bridge that does not answer is taken as stopped.",
)
@click.option(
    "--metadata-dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A controller's metadata log dir: refuse if the migration was finalized, or while ZooKeeper's "
    "/migration is behind the log's last metadata record (its lag; control and NoOp records do not count).",
)
@zk_security_options
@handles_errors
def rollback_cmd(
    zk_connect: str,
    chroot: str | None,
    backup: Path | None,
    dry_run: bool,
    yes: bool,
    force: bool,
    broker_configs: tuple[Path, ...],
    broker_metas: tuple[Path, ...],
    bridge_status: str | None,
    metadata_dir: Path | None,
    **zk_security: Any,
) -> None:
    """Revert the ZooKeeper side of an unfinalized migration: back up, then delete /controller and /migration.

    Saves /controller, /controller_epoch and /migration to the backup file first, checks the
    controller-epoch condition (a KRaft epoch in partition states above the next ZooKeeper controller's
    epoch leaves those partitions offline; /controller_epoch is raised in the same transaction), deletes
    /controller and /migration in one version-checked transaction, and prints the per-broker steps left
    for the phase reached. Deprovision the KRaft controllers first; run this quickly — the cluster has
    no controller until /controller is gone. Refuses after finalization, and while the bridge at
    --bridge-status still answers or ZooKeeper is behind its metadata log (the write-behind lag, from
    --bridge-status or --metadata-dir), naming the controller in /controller and the lag, and while a
    broker's meta.properties (--broker-meta) would stop it in ZooKeeper mode: version 1 (a broker
    formatted during the migration) or a cluster.id other than ZooKeeper's; it prints the exact file to
    write for each (--force overrides all of these but finalization).

    \b
    Examples:
      zk2kraft rollback --zk zk1:2181/kafka --dry-run \\
          --broker-meta /var/lib/kafka/data --broker-meta /mnt/disk2/kafka
      zk2kraft rollback --zk zk1:2181/kafka --backup before-revert.json --yes \\
          --broker-config server-1.properties --broker-config server-2.properties
    """
    bridge = None
    if bridge_status:
        try:
            bridge = bridge_view(bridge_status)
        except UnreachableError as exc:
            # The expected case once the controllers are deprovisioned; said, not hidden.
            click.echo(f"note: {exc}: taken as a stopped bridge", err=True)
    metadata = kraft_views(None, metadata_dir)
    views = ([bridge] if bridge else []) + metadata
    states = [v.migration_state for v in views if v.migration_state]
    finalized = (states[0] == ZkMigrationState.POST_MIGRATION.name) if states else None
    with zk_session(zk_connect_from(zk_connect, zk_security), chroot) as client:
        state = read_rollback_state(client)
        metas = [check_broker_meta(p, state.cluster_id) for p in broker_metas]
        if metas and not finalized:
            for line in broker_meta_lines(metas):
                click.echo(line)
        plan = plan_rollback(
            state, finalized=finalized, force=force, bridge=bridge, metadata=metadata[0] if metadata else None,
            unanswered_bridge=bridge_status if bridge_status and bridge is None else None,
            broker_meta=metas if not finalized else None,
        )  # fmt: skip
        for note in plan.notes:
            click.echo(f"note: {note}")
        if plan.refusals:
            fail("rollback refused: " + "; ".join(plan.refusals))
        if plan.nothing_to_do:
            click.echo("nothing to do: no KRaft-owned /controller and no /migration (ZooKeeper mode)")
            return
        target = backup or Path(f"zk2kraft-rollback-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json")
        prefix = "would " if dry_run else ""
        click.echo(f"phase reached: {plan.phase}")
        click.echo(f"{prefix}back up /controller, /controller_epoch and /migration to {target}")
        if plan.set_epoch is not None:
            click.echo(f"{prefix}set /controller_epoch {state.epoch} → {plan.set_epoch} (version {state.controller_epoch.version if state.controller_epoch else '?'})")
        for z in plan.delete:
            text = z.data.decode("utf-8", "replace") if z.data else ""
            click.echo(f"{prefix}delete {z.path} (version {z.version}): {text}")
        if dry_run:
            click.echo("dry run: nothing written")
        else:
            if not yes and not click.confirm("Proceed?", default=False):
                fail("aborted: nothing written")
            atomic_write_text(target, backup_text(state, zk_connect))
            click.echo(f"backup written to {target}")
            execute_rollback(client, state, plan)
            click.echo("deleted " + " and ".join(z.path for z in plan.delete) + " in one transaction")
    files = [(str(p), read_properties_file(p).values) for p in broker_configs]
    click.echo("remaining steps:")
    for step in manual_steps(plan, files):
        click.echo(f"  {step}")
