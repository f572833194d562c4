"""`zk2kraft snapshot`: replay a metadata log and write the snapshot a KRaft controller would write."""

from __future__ import annotations

from pathlib import Path

import click

from cli.common import handles_errors, progress, stderr
from migrate.errors import Zk2KraftError
from migrate.kraft.reader import load_image, partition_dir_of
from migrate.kraft.snapshot import write_snapshot


@click.command("snapshot")
@click.argument("metadata_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--up-to-offset",
    type=int,
    help="Snapshot only the records with offset < this (the snapshot's end offset). Default: the whole log.",
)
@handles_errors
def snapshot_cmd(metadata_dir: Path, up_to_offset: int | None) -> None:
    """Replay a metadata log and write a new snapshot `.checkpoint` of the image at its last offset.

    METADATA_DIR is a KRaft metadata log directory or its `__cluster_metadata-0`. Replay starts from the
    newest existing snapshot and applies the log after it with Kafka's semantics (an unfinished metadata
    transaction at the end is left out, as Kafka leaves it out). The file written is
    `<end offset>-<epoch>.checkpoint` in `__cluster_metadata-0`, the file a KRaft controller would write,
    created atomically.

    \b
    Example:
      zk2kraft snapshot /var/lib/kafka/meta
      zk2kraft dump --summary /var/lib/kafka/meta/__cluster_metadata-0/00000000000000004929-0000000001.checkpoint
    """
    pdir = partition_dir_of(metadata_dir)
    with progress(f"replaying {pdir}"):
        image, report = load_image(pdir, up_to_offset=up_to_offset)
    for line in report.describe():
        stderr.print(line)
    if image.provenance.last_contained_offset < 0:
        raise Zk2KraftError(f"{pdir}: no committed records to snapshot")
    if report.snapshot_id is not None and report.snapshot_id.end_offset == image.provenance.last_contained_offset + 1:
        stderr.print(f"{report.snapshot.name if report.snapshot else ''} already covers every record; nothing to write")
        return
    written = write_snapshot(pdir, image)
    click.echo(
        f"wrote {written.path} ({written.record_count} records in {written.data_batches} data batches, "
        f"{written.size_bytes} bytes; end offset {written.snapshot_id.end_offset}, epoch {written.snapshot_id.epoch})"
    )
