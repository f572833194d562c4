"""`zk2kraft audit`: prove that ZooKeeper and the KRaft metadata log hold the same cluster (on Spark)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cli.common import EXIT_FINDING, handles_errors, progress, stderr
from cli.options import print_source_notices, zk_source_from, zk_source_options

if TYPE_CHECKING:
    from validators.report import AuditSummary

_STYLE = {"consistent": "bold green", "lagging": "bold yellow", "inconsistent": "bold red"}


@click.command("audit")
@zk_source_options
@click.option(
    "--kraft",
    "kraft_path",
    required=True,
    type=click.Path(exists=True, path_type=Path),
    metavar="PATH",
    help="A KRaft metadata log dir (or its __cluster_metadata-0/), one .checkpoint snapshot, or one .log segment.",
)
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    metavar="DIR",
    help="Where to write summary.json, discrepancies.parquet and report.html. Written beside it and renamed "
    "at the end: a failed audit leaves DIR as it was. An earlier audit's DIR is replaced; other files are refused.",
)
@click.option("--master", metavar="URL", help="Spark master: local[*] (default), spark://HOST:PORT, yarn, k8s://...")
@click.option(
    "--kraft-offset",
    type=click.IntRange(-1),
    metavar="N",
    help="Compare KRaft as of offset N (inclusive). Default: the /migration znode's offset when ZooKeeper has "
    "one and it matches the log (its controller and epochs; a mismatch is refused), else the end of the log. "
    "With N, a /migration that does not match the log is ignored, with a warning.",
)
@click.option(
    "--fail-on",
    type=click.Choice(["error", "lag"]),
    default="error",
    show_default=True,
    help="lag: exit 1 also when differences are only explained by write-behind lag (the finalize gate).",
)
@click.option("--driver-memory", default="1g", show_default=True, metavar="SIZE", help="spark.driver.memory.")
@click.option(
    "--shuffle-partitions", type=click.IntRange(1), default=8, show_default=True, help="spark.sql.shuffle.partitions."
)
@handles_errors
def audit_cmd(
    kraft_path: Path,
    out_dir: Path,
    master: str | None,
    kraft_offset: int | None,
    fail_on: str,
    driver_memory: str,
    shuffle_partitions: int,
    **kwargs: Any,
) -> None:
    """Compare a ZooKeeper-mode cluster with a KRaft metadata log, table by table, on Spark.

    Both sides become the same tables (brokers, topics, partitions, configs, client quotas, SCRAM
    credentials, ACLs, delegation tokens, producer ids, features); full outer joins find what is missing on
    either side or differs. Each discrepancy is classed error, expected (by design, e.g. ephemeral broker
    registrations) or lag (KRaft changed after the offset ZooKeeper holds in /migration). The KRaft side is
    replayed to that offset by default, so write-behind lag is not reported as drift.

    Exit code 0: no error-class discrepancy; 1: at least one (or lag, with --fail-on lag); 2: bad input,
    a /migration znode written from another history than the log's, or an --out holding other files.
    A damaged KRaft snapshot is skipped for an older one or the log, with a warning; every KRaft file read
    or skipped is listed with why (summary.json, report.html).

    \b
    Examples:
      zk2kraft audit --zk-data-dir /backup/zookeeper --chroot /kafka --kraft /var/lib/kafka/meta --out audit/
      zk2kraft audit --zk-dump cluster.jsonl --kraft meta/__cluster_metadata-0 --out audit/ \\
          --master spark://10.0.0.5:7077 --fail-on lag

    On a cluster (--master), every input path must be readable at the same path on every executor.
    """
    # Here, not at the top: the audit loads pyspark, a few hundred ms every other command would pay.
    from validators.audit import AuditOptions, check_out_dir, run_audit
    from validators.spark import spark_session

    check_out_dir(out_dir)  # before Spark starts: a refusal costs nothing
    source = zk_source_from(kwargs)
    options = AuditOptions(
        zk=source,
        kraft=kraft_path,
        out=out_dir,
        kraft_offset=kraft_offset,
        fail_on_lag=fail_on == "lag",
        shuffle_partitions=shuffle_partitions,
    )
    with (
        progress("starting Spark") as bar,
        spark_session(master, shuffle_partitions=shuffle_partitions, driver_memory=driver_memory) as spark,
    ):
        result = run_audit(spark, options, progress=bar.update)
    _print(result.summary)
    if result.exit_code:
        sys.exit(EXIT_FINDING)


def _print(summary: AuditSummary) -> None:
    console = Console(highlight=False, soft_wrap=True)
    c = summary.classes
    console.print(
        f"[{_STYLE[summary.verdict]}]{summary.verdict.upper()}[/]: {c.get('error', 0)} error, "
        f"{c.get('lag', 0)} lag, {c.get('expected', 0)} expected"
    )
    through = summary.offsets.compared_through
    if through is None:
        console.print("KRaft compared through the end of the log")
    else:
        console.print(f"KRaft compared through offset {through} ({summary.offsets.alignment})")
    table = Table("table", "ZooKeeper", "KRaft", "error", "lag", "expected", box=None, pad_edge=False)
    for t in summary.tables:
        if t.zk_rows or t.kraft_rows or t.error or t.lag or t.expected:
            table.add_row(
                t.table,
                f"{t.zk_rows:,}",
                f"{t.kraft_rows:,}",
                f"[red]{t.error:,}[/]" if t.error else "0",
                f"[yellow]{t.lag:,}[/]" if t.lag else "0",
                f"{t.expected:,}",
            )
    console.print(table)
    files = summary.inputs.kraft_files
    skipped = [f for f in files if f.status == "skipped"]
    if files:
        console.print(f"KRaft files: {len(files) - len(skipped)} read, {len(skipped)} skipped")
        for f in skipped:
            console.print(f"  skipped {Path(f.path).name}: {f.reason}")
    for warning in summary.warnings:
        stderr.print(f"[yellow]warning:[/] {escape(warning)}", markup=True, highlight=False)
    print_source_notices([], summary.inputs.zk_notes, older_state=summary.inputs.accepted_older_zk_state)
    console.print(f"report: {summary.outputs.get('report', '')}")
