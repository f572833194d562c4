"""`zk2kraft handoff`: moving the quorum from bridges to real Kafka 3.9 controllers (`check` first)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from cli.common import EXIT_FINDING, handles_errors, zk_session
from cli.options import zk_connect_from, zk_security_options
from migrate.errors import Zk2KraftError
from migrate.kraft.quorum_voters import parse_quorum_voters, voter_set
from migrate.kraft.reader import METADATA_PARTITION_DIR
from validators.handoff import HandoffReport, handoff_check


@click.group("handoff")
def handoff_group() -> None:
    """Hand the quorum from the bridges to real Kafka 3.9 controllers (docs/handoff.md)."""


def report_lines(report: HandoffReport) -> list[str]:
    """One block per check: verdict, what was found, what Kafka would do, and the Kafka class."""
    lines = [
        f"metadata dir: {report.metadata_dir}"
        + (f", ZooKeeper: {report.zookeeper}" if report.zookeeper else "")
    ]
    for c in report.checks:
        lines.append(f"  {c.verdict.upper():12} {c.id}: {c.detail}")
        lines.append(f"  {'':12} Kafka 3.9 {c.kafka_would}  [{c.kafka_class}]")
    lines.append(
        "a real Kafka 3.9 controller would lead from here without re-migrating"
        if report.leads
        else "NOT ready: a real Kafka 3.9 controller would not lead from here as it stands"
    )
    return lines


@handoff_group.command("check")
@click.option(
    "--metadata-dir",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="The bridge's metadata.log.dir (holding meta.properties and __cluster_metadata-0), stopped or copied.",
)
@click.option(
    "--zk", "zk_connect", required=True, metavar="HOST:PORT[,...][/chroot]", help="Kafka's zookeeper.connect."
)
@click.option("--chroot", help="Kafka's chroot, when not part of --zk.")
@click.option(
    "--node-id", type=int, help="The real controller's node.id (default: meta.properties' node.id)."
)
@click.option(
    "--voters",
    metavar="ID@HOST:PORT,...",
    help="The real controllers' controller.quorum.voters; checked against quorum-state and --node-id.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (the HandoffReport model).")
@zk_security_options
@handles_errors
def handoff_check_cmd(
    metadata_dir: Path,
    zk_connect: str,
    chroot: str | None,
    node_id: int | None,
    voters: str | None,
    as_json: bool,
    **zk_security: Any,
) -> None:
    """Run the checks a Kafka 3.9 controller makes on this directory and ZooKeeper; exit 0 only when it
    would lead from them without re-migrating.

    Read-only: log recovery's truncation is computed, not done. In a real controller's order:
    meta.properties (version 1, node.id, cluster.id, directory.id); every segment's CRC and the truncation
    recovery would do at the first bad batch; snapshots against the log start; quorum-state (Kafka's JSON,
    voters); metadata.version ≥ 3.4-IV0; the ZkMigrationStateRecord MIGRATION; no open metadata transaction;
    /migration (version 0, four fields, its offset and epoch a batch of this log); /controller (a KRaft
    controller below the next leader's epoch); /controller_epoch; broker registrations and epochs. Each line
    says what Kafka would do and the Kafka class that does it (docs/handoff.md says how to fix each).

    \b
    Exit codes: 0 a real controller would lead and resume dual-write from /migration;
    1 a check failed (Kafka would refuse, truncate, re-migrate or stall); 2 bad input; 5 ZooKeeper unreachable.

    \b
    Example (after stopping the bridge):
      zk2kraft handoff check --metadata-dir /var/lib/kafka/controller --zk zk1:2181/kafka \\
          --node-id 3000 --voters 3000@ctrl1:9093,3001@ctrl2:9093,3002@ctrl3:9093
    """
    if metadata_dir.name == METADATA_PARTITION_DIR:
        raise Zk2KraftError(
            f"--metadata-dir {metadata_dir} is the log's partition directory; give the metadata.log.dir that "
            f"holds it (and meta.properties): {metadata_dir.parent}"
        )
    voter_ids = None
    if voters is not None:
        voter_ids = frozenset(voter_set(parse_quorum_voters(voters, source="--voters"), source="--voters"))
    zk = zk_connect_from(zk_connect, zk_security)
    with zk_session(zk, chroot) as client:
        where = zk_connect if chroot is None else f"{zk_connect} (chroot {chroot})"
        report = handoff_check(metadata_dir, client, zookeeper=where, node_id=node_id, voters=voter_ids)
    if as_json:
        click.echo(report.model_dump_json(indent=2))
    else:
        click.echo("\n".join(report_lines(report)))
    if not report.leads:
        sys.exit(EXIT_FINDING)
