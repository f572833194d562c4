"""The `zk2kraft` command: one click group, one subcommand per job."""

from __future__ import annotations

import click

from cli.audit_cmd import audit_cmd
from cli.bridge_cmd import bridge_group
from cli.common import exit_codes_help
from cli.dump_cmd import dump_cmd
from cli.finalize_cmd import finalize_check_cmd, finalize_cmd
from cli.handoff_cmd import handoff_group
from cli.migrate_cmd import migrate_cmd
from cli.plan_cmd import plan_cmd
from cli.rollback_cmd import rollback_cmd
from cli.shim_cmd import shim_group
from cli.snapshot_cmd import snapshot_cmd
from cli.status_cmd import status_cmd
from cli.zk_cmd import zk_group


@click.group(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=exit_codes_help() + "\n\nDetails and guarantees: docs/operations.md.",
)
@click.version_option(package_name="zk2kraft")
def cli() -> None:
    """Move a Kafka cluster from ZooKeeper mode to KRaft mode, planned and verified.

    \b
    Examples:
      zk2kraft dump --summary /var/lib/kafka/meta/__cluster_metadata-0
      zk2kraft snapshot /var/lib/kafka/meta
    """


cli.add_command(audit_cmd)
cli.add_command(bridge_group)
cli.add_command(dump_cmd)
cli.add_command(finalize_check_cmd)
cli.add_command(finalize_cmd)
cli.add_command(handoff_group)
cli.add_command(migrate_cmd)
cli.add_command(plan_cmd)
cli.add_command(rollback_cmd)
cli.add_command(shim_group)
cli.add_command(snapshot_cmd)
cli.add_command(status_cmd)
cli.add_command(zk_group)


def main() -> None:
    """Console-script entry point."""
    cli()


if __name__ == "__main__":
    main()
