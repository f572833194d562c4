"""`zk2kraft migrate`: translate a ZooKeeper-mode cluster into the KRaft metadata directory Kafka 3.9 would write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from cli.common import handles_errors, progress, stderr
from cli.options import print_source_notices, zk_source_from, zk_source_options
from migrate.errors import Zk2KraftError
from migrate.kraft import metadata_version as mvs
from migrate.kraft.metadata_version import MetadataVersion
from migrate.manifest import ManifestModel, MigrationReportModel
from migrate.migration import DEFAULT_CONTROLLER_ID, MigrationResult, migrate_to_metadata_dir
from migrate.zk.cluster import from_tree_at
from migrate.zk.sources import read_source

_MIN = mvs.IBP_3_4_IV0


def _parse_metadata_version(_ctx: click.Context, _param: click.Parameter, value: str) -> MetadataVersion:
    try:
        mv = mvs.parse(value)
    except Zk2KraftError as exc:
        raise click.BadParameter(str(exc)) from None
    if mv < _MIN:
        raise click.BadParameter(
            f"{mv.name} predates ZooKeeper migration support ({_MIN.name} or later needed)"
        )
    return mv


@click.command("migrate")
@zk_source_options
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    metavar="METADATA_DIR",
    help="The KRaft controller's metadata log dir to create (must be empty or absent unless --force).",
)
@click.option(
    "--metadata-version",
    metavar="VERSION",
    callback=_parse_metadata_version,
    default=mvs.LATEST_PRODUCTION.name,
    show_default=True,
    help=f"metadata.version of the KRaft cluster, {_MIN.name} to {mvs.LATEST_PRODUCTION.name} (or a release "
    "such as 3.7); use the brokers' inter.broker.protocol.version. It picks record versions and whether the "
    f"migration is one metadata transaction ({mvs.IBP_3_6_IV1.name} and later).",
)
@click.option(
    "--controller-id",
    type=click.IntRange(0, 2**31 - 1),
    default=DEFAULT_CONTROLLER_ID,
    show_default=True,
    help="node.id of the KRaft controller that will own this directory (must not be a broker id).",
)
@click.option(
    "--on-missing-state",
    type=click.Choice(["fail", "repair"]),
    default="fail",
    show_default=True,
    help="A partition without a state znode or a topic without a topic id: fail with the znode's name, "
    "or repair as Kafka would (ISR = replicas, leader = first replica, epochs 0; a new topic id).",
)
@click.option("--force", is_flag=True, help="Replace METADATA_DIR even when it is not empty.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text: Kafka's manifest line and a summary; json: one machine-readable report.",
)
@handles_errors
def migrate_cmd(
    out_dir: Path,
    metadata_version: MetadataVersion,
    controller_id: int,
    on_missing_state: str,
    force: bool,
    fmt: str,
    **kwargs: Any,
) -> None:
    """Copy a ZooKeeper-mode cluster's metadata into a new KRaft metadata directory, offline.

    Reads Kafka's znodes (topics, partition states, configs, quotas, SCRAM credentials, producer ids,
    ACLs, delegation tokens) and writes what a KRaft controller running Kafka 3.9's ZooKeeper migration
    would have in its metadata log dir afterwards: meta.properties (ZooKeeper's cluster id, node.id =
    --controller-id), bootstrap.checkpoint, and __cluster_metadata-0/ with the log (bootstrap records,
    then the "ZK Migration" transaction ending in ZkMigrationState MIGRATION) and a snapshot at its last
    offset. The output appears atomically: a failure leaves nothing behind.

    \b
    Examples:
      zk2kraft migrate --zk zk1:2181,zk2:2181/kafka --out /var/lib/kafka/controller-meta
      zk2kraft migrate --zk-data-dir /backup/zookeeper --chroot /kafka --out ./meta \\
          --metadata-version 3.7-IV4 --controller-id 3000 --format json

    Read a dataDir from a backup copy, never from a running ZooKeeper's live directory. The manifest
    printed is Kafka's own "N records were generated in ..." line; warnings list every repair.
    """
    source = zk_source_from(kwargs)
    with progress(f"reading {source.describe()}") as bar:
        origin = read_source(source, progress=lambda n: bar.update(completed=n), in_place=True)
        origin_name = origin.origin
        source_warnings, source_notes, older = origin.warnings, origin.notes, origin.older_state_accepted
        bar.update("building the cluster model")
        # Keep only the model: the raw tree of a large cluster is gigabytes nobody needs from here on, so
        # it is emptied as the model is built. The model itself is handed over without a reference kept
        # here, so migrate_to_metadata_dir frees it once translated.
        tree, tree_chroot = origin.tree, origin.tree_chroot
        del origin
        models = [from_tree_at(tree, tree_chroot, consume=True)]
        del tree
        bar.update("translating and writing the metadata directory")
        result = migrate_to_metadata_dir(
            models.pop(),
            out_dir,
            metadata_version=metadata_version,
            controller_id=controller_id,
            on_missing_state="repair" if on_missing_state == "repair" else "fail",
            force=force,
        )
    # What reading ZooKeeper warned about comes first among the report's warnings.
    result.warnings = [f"ZooKeeper source: {w}" for w in source_warnings] + result.warnings
    if fmt == "json":
        click.echo(_report(result, origin_name, older).model_dump_json(indent=2))
        print_source_notices(source_warnings, source_notes, older_state=older)
    else:
        _print_text(result, origin_name)  # its warnings include the source's
        print_source_notices([], source_notes, older_state=older)


def _report(result: MigrationResult, origin: str, older_state: bool) -> MigrationReportModel:
    return MigrationReportModel(
        accepted_older_zk_state=older_state,
        metadata_dir=str(result.metadata_dir),
        cluster_id=result.cluster_id,
        controller_id=result.controller_id,
        metadata_version=result.metadata_version.name,
        source=origin,
        last_offset=result.last_offset,
        last_epoch=result.last_epoch,
        snapshot=result.snapshot_name,
        files=result.files,
        manifest=ManifestModel.from_manifest(result.manifest),
        warnings=result.warnings,
    )


def _print_text(result: MigrationResult, origin: str) -> None:
    manifest = result.manifest
    click.echo(f"migrated {origin} into {result.metadata_dir}")
    click.echo(str(manifest))
    click.echo(
        f"cluster id {result.cluster_id}, controller {result.controller_id}, metadata.version "
        f"{result.metadata_version.name}; last offset {result.last_offset} (epoch {result.last_epoch}), "
        f"{manifest.total_bytes} bytes of migrated batches, snapshot {result.snapshot_name}"
    )
    for name, count in manifest.record_type_names().items():
        click.echo(f"  {name:<32} {count:>10}")
    for warning in result.warnings:
        stderr.print(f"[yellow]warning:[/] {escape(warning)}", markup=True, soft_wrap=True, highlight=False)
