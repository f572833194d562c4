"""`zk2kraft dump`: decode KRaft metadata files, like `kafka-dump-log --cluster-metadata-decoder`."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from cli.common import handles_errors, stderr
from migrate.kraft.parallel import count_records_parallel
from migrate.kraft.reader import LogEntry, ReadReport, iter_file, iter_log_dir
from migrate.kraft.records import record_to_json


def entry_to_json(entry: LogEntry) -> dict[str, object]:
    """One output object: where the record sits, what it is, and all its fields as Kafka's JSON."""
    record = entry.record
    cls = type(record)
    return {
        "offset": entry.offset,
        "leaderEpoch": entry.leader_epoch,
        "timestamp": entry.timestamp_ms,
        "control": entry.is_control,
        "type": cls.__name__,
        "kafkaType": cls.TYPE_NAME,
        "version": entry.version,
        "data": record_to_json(record, entry.version),
    }


def iter_paths(paths: tuple[Path, ...], report: ReadReport) -> Iterator[LogEntry]:
    """Entries of every path in order; a directory means its whole `__cluster_metadata-0` log."""
    for path in paths:
        if path.is_dir():
            yield from iter_log_dir(path, report=report, require_log=True)
        else:
            yield from iter_file(path, report=report)


@click.command("dump")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--summary", is_flag=True, help="Print only the number of records of each type.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "table"]),
    default="json",
    show_default=True,
    help="json: one object per line (or one summary object); table: a readable table.",
)
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="With --summary: decode each file on this many processes (split at batch boundaries).",
)
@handles_errors
def dump_cmd(paths: tuple[Path, ...], summary: bool, fmt: str, jobs: int) -> None:
    """Decode KRaft log segments, snapshots and bootstrap.checkpoint.

    PATHS are `.log` segments, `.checkpoint` snapshots, `bootstrap.checkpoint`, or directories (a metadata log
    directory or its `__cluster_metadata-0`: the whole log, in offset order). Each record prints as one
    JSON object: offset, leader epoch, timestamp, record type (as Kafka names it), version and all fields.

    \b
    Examples:
      zk2kraft dump /var/lib/kafka/meta/__cluster_metadata-0/00000000000000000000.log
      zk2kraft dump --summary /var/lib/kafka/meta
      zk2kraft dump --summary --format table meta/__cluster_metadata-0/00000000000000004929-0000000001.checkpoint

    A torn batch at the end of the newest segment (a crash mid-write) is reported and skipped, as Kafka's
    log recovery does; any other damage stops the dump with the file and byte offset.
    """
    report = ReadReport()
    entries = iter_paths(paths, report)
    out = Console(highlight=False, soft_wrap=True)
    if summary:
        if jobs > 1 and all(p.is_file() for p in paths):
            counts: Counter[str] = Counter()
            for path in paths:
                counts.update(count_records_parallel(path, jobs))
        else:
            counts = Counter(type(e.record).__name__ for e in entries)
        ordered = dict(sorted(counts.items()))
        if fmt == "json":
            click.echo(json.dumps(ordered, separators=(",", ":")))
        else:
            table = Table("record type", "count", title=", ".join(str(p) for p in paths))
            for name, count in ordered.items():
                table.add_row(name, str(count))
            table.add_row("[bold]total", f"[bold]{sum(ordered.values())}")
            out.print(table)
    elif fmt == "json":
        for entry in entries:
            click.echo(json.dumps(entry_to_json(entry), separators=(",", ":")))
    else:
        table = Table("offset", "epoch", "type", "v", "fields")
        for entry in entries:
            data = json.dumps(record_to_json(entry.record, entry.version), separators=(",", ":"))
            table.add_row(str(entry.offset), str(entry.leader_epoch), type(entry.record).__name__, str(entry.version), data)
        out.print(table)
    torn = report.torn_tail
    if torn is not None:
        path, tail = torn
        stderr.print(f"warning: {path}: {tail.describe()}")
