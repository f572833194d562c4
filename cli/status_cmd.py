"""`zk2kraft status`: which migration phase the cluster is in (ZooKeeper, optionally the bridge and a metadata dir)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click

from bridge.metrics import RaftStatus, read_bridge_status, status_url
from cli.common import handles_errors, zk_session
from cli.options import bridge_status_url, zk_connect_from, zk_security_options
from migrate.kraft.migration_state import zk_migration_state_name
from migrate.kraft.reader import last_metadata_offset, load_image, require_metadata_log
from migrate.plan.status import (
    BrokerChannelStatus,
    BrokersStatus,
    KraftView,
    RequestMark,
    Status,
    read_status,
)


def bridge_view(url: str) -> KraftView:
    """GET the bridge's /status (validated as BridgeStatus)."""
    s = read_bridge_status(url, "--bridge-status")
    return KraftView(
        source=status_url(url),
        migration_state=s.migration_state,
        write_behind_lag=s.zk_write_behind_lag,
        committed_offset=s.durable_offset,
        driver_state=s.state,
        last_error=s.last_error,
        failed=s.failed,
        stuck_write=s.stuck_write.line() if s.stuck_write is not None else None,
        brokers=s.brokers,
        broker_channel=s.broker_channel,
        quorum=quorum_line(s.raft) if s.raft is not None else None,
    )


def quorum_line(raft: RaftStatus) -> str:
    """One line for `zk2kraft status`: role, leader, epoch, high watermark, and the voters the leader sees."""
    leader = "none known" if raft.leader_id is None else str(raft.leader_id)
    line = f"{raft.role} in epoch {raft.epoch}, leader {leader}, high watermark {raft.high_watermark}"
    voters = [
        f"{v.id} at {v.log_end_offset}"
        + (
            ""
            if v.caught_up
            else " (LAGGING"
            + (")" if v.last_fetch_ms_ago is None else f", last fetch {v.last_fetch_ms_ago} ms ago)")
        )
        for v in raft.voters
    ]
    if raft.zookeeper_copy == "loading":
        line += "; still reading its copy of ZooKeeper (elected now, it would read all of ZooKeeper)"
    return line + (f"; voters: {', '.join(voters)}" if voters else "")


def metadata_view(metadata_dir: Path) -> KraftView:
    """Replay a controller's metadata dir: ZkMigrationState and the brokers registered with KRaft. A dir with
    no log is refused: read as an empty log, it would say NONE and hide the write-behind lag."""
    image, report = load_image(require_metadata_log(metadata_dir, "--metadata-dir"))
    brokers = image.cluster.brokers
    return KraftView(
        source=str(metadata_dir),
        migration_state=zk_migration_state_name(image.features.zk_migration_state),
        committed_offset=image.provenance.last_contained_offset,
        # A clean stop leaves a snapshot at the log's end, which keeps no record offsets: read the segments.
        last_metadata_offset=(
            report.last_metadata_offset
            if report.last_metadata_offset is not None or report.snapshot is None
            else last_metadata_offset(metadata_dir)
        ),
        kraft_brokers=sorted(i for i, b in brokers.items() if not b.is_migrating_zk_broker),
        migrating_zk_brokers=sorted(i for i, b in brokers.items() if b.is_migrating_zk_broker),
        fenced_brokers=sorted(i for i, b in brokers.items() if b.fenced),
    )


def kraft_views(bridge_status: str | None, metadata_dir: Path | None) -> list[KraftView]:
    views = []
    if bridge_status:
        views.append(bridge_view(bridge_status))
    if metadata_dir is not None:
        views.append(metadata_view(metadata_dir))
    return views


def status_lines(s: Status) -> list[str]:
    lines = [f"phase: {s.phase} — {s.description}"]
    if s.controller is not None:
        kind = (
            f"KRaft controller (epoch {s.controller.kraft_controller_epoch})"
            if s.controller.kraft
            else "ZooKeeper broker"
        )
        lines.append(f"/controller: {s.controller.id}, {kind}")
    else:
        lines.append("/controller: none")
    lines.append(f"/controller_epoch: {s.controller_epoch}")
    if s.migration is not None:
        m = s.migration
        lines.append(
            f"/migration: KRaft controller {m.kraft_controller_id} epoch {m.kraft_controller_epoch}, "
            f"offset {m.kraft_metadata_offset} (version {m.zk_version})"
        )
    else:
        lines.append("/migration: none")
    # /brokers/ids holds only live ZooKeeper-mode brokers: the KRaft side's lines below say who is still migrating.
    lines.append(
        "brokers in /brokers/ids (live, ZooKeeper mode): " + (", ".join(map(str, s.zk_brokers)) or "none")
    )
    if s.migration_state is not None:
        lines.append(f"migration state: {s.migration_state}")
    if s.write_behind_lag is not None:
        lines.append(f"ZooKeeper write-behind lag: {s.write_behind_lag}")
    for v in s.kraft:
        if v.failed is not None:
            lines.append(
                f"BRIDGE FAILED ({v.source}): {v.failed}; it renounced, serves nothing and exits with code 4: "
                "restart it once the cause (disk full?) is fixed (in a quorum, another voter leads meanwhile)"
            )
        if v.quorum is not None:
            lines.append(f"Raft quorum ({v.source}): {v.quorum}")
        if v.stuck_write is not None:
            lines.append(f"ZooKeeper write stuck ({v.source}): {v.stuck_write}")
        if v.last_error is not None:
            lines.append(f"last error ({v.source}): {v.last_error}")
        if v.brokers is not None:
            lines.extend(broker_lines(v.brokers, v.source))
        if v.broker_channel is not None:
            lines.extend(channel_lines(v.broker_channel, v.source))
        if v.kraft_brokers is not None:
            lines.append(f"KRaft brokers ({v.source}): {', '.join(map(str, v.kraft_brokers)) or 'none'}")
    return lines


def broker_lines(b: BrokersStatus, source: str) -> list[str]:
    """The bridge's registered brokers: counts, and who the migration still waits for."""
    if b.rehearsal:
        stand_in = f"ZooKeeper's /brokers/ids stand in for {b.registered} registrations"
        return [f"brokers ({source}): rehearsal, {stand_in}"]
    lines = [
        f"brokers registered ({source}): {b.registered}; fenced {b.fenced}, in controlled shutdown "
        f"{b.in_controlled_shutdown}, migrating ZooKeeper brokers {b.migrating_zk_brokers}"
    ]
    if b.waiting_for is not None:
        waiting = ", ".join(map(str, b.waiting_for)) or "none"
        lines.append(f"the migration waits for brokers to register ({source}): {waiting}")
    if b.unregistered_zk_brokers:
        lines.append(
            f"NOT REGISTERED ({source}): broker(s) {', '.join(map(str, b.unregistered_zk_brokers))} in /brokers/ids "
            "are not registered with the controller, or were fenced for silence while running in ZooKeeper "
            "(restarted without zookeeper.metadata.migration.enable=true?): "
            "they get no metadata from it; restart each in migration mode"
        )
    return lines


def channel_lines(c: BrokerChannelStatus, source: str) -> list[str]:
    """The bridge's requests to ZooKeeper-mode brokers: one line per broker in the channel."""
    if not c.active and not c.brokers and not c.unreachable:
        return [
            f"controller requests to brokers ({source}): not sending (only from KRAFT_CONTROLLER_TO_BROKER_COMM "
            "on, while this bridge holds ZooKeeper)"
        ]
    lines = [
        f"controller requests to brokers ({source}): {len(c.brokers)} broker(s), {c.full_syncs} full sync(s)"
    ]
    if c.last_full_sync_brokers is not None:
        lines[0] += f" (the last reached {c.last_full_sync_brokers} broker(s))"
    if c.unreachable:
        lines[0] += f", {len(c.unreachable)} unreachable"
    if c.build_failures:
        lines[0] += f", {c.build_failures} change(s) whose requests could not be built (see the bridge's log)"
    for b in c.brokers:
        sent = _mark(b.last_sent)
        acked = _mark(b.last_acknowledged)
        errors = ", ".join(f"{name} x{count}" for name, count in sorted(b.errors.items())) or "none"
        line = (
            f"  broker {b.broker_id} ({b.address}): {'connected' if b.connected else 'disconnected'}, "
            f"queue {b.queue_depth}, last sent {sent}, last acknowledged "
            f"{acked}, errors {errors}, full syncs {b.full_syncs_sent}"
        )
        if b.network_failures:
            line += f", network failures {b.network_failures} (last: {b.last_network_error})"
        if b.retry_backoff_ms is not None and b.failure_kind is not None:
            line += f", failing ({b.failure_kind}), next try in {b.retry_backoff_ms} ms"
        lines.append(line)
    if c.unreachable:
        ids = ", ".join(str(b.broker_id) for b in c.unreachable)
        lines.append(f"  NOT REACHED: {len(c.unreachable)} migrating broker(s) get no requests: {ids}")
        lines.extend(f"  broker {b.broker_id}: unreachable, {b.reason}" for b in c.unreachable)
    return lines


def _mark(mark: RequestMark | None) -> str:
    if mark is None:
        return "none"
    return f"{mark.api} at {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(mark.at_ms / 1000))}"


@click.command("status")
@click.option(
    "--zk", "zk_connect", required=True, metavar="HOST:PORT[,...][/chroot]", help="Kafka's zookeeper.connect."
)
@click.option("--chroot", help="Kafka's chroot, when not part of --zk.")
@click.option(
    "--bridge-status",
    metavar="URL",
    callback=bridge_status_url,
    help="The bridge controller's status endpoint, e.g. http://ctrl1:9404.",
)
@click.option(
    "--metadata-dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A controller's metadata log dir, replayed for ZkMigrationState and KRaft broker registrations.",
)
@click.option(
    "--watch",
    "watch",
    type=float,
    default=None,
    metavar="SECONDS",
    help="Refresh every SECONDS until interrupted.",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@zk_security_options
@handles_errors
def status_cmd(
    zk_connect: str,
    chroot: str | None,
    bridge_status: str | None,
    metadata_dir: Path | None,
    watch: float | None,
    fmt: str,
    **zk_security: Any,
) -> None:
    """Name the migration phase: ZooKeeper controller and epoch, /migration, brokers still in ZooKeeper mode.

    Phases: zookeeper, controllers-ready, migrating, dual-write, kraft-brokers, finalized,
    reverted-incomplete. With --bridge-status and --metadata-dir it also shows the migration state,
    the ZooKeeper write-behind lag and the brokers registered with KRaft; with --bridge-status, how many
    of them are fenced, in controlled shutdown or still ZooKeeper-mode brokers, and which broker ids the
    initial migration still waits for; and, per ZooKeeper-mode broker, the bridge's LeaderAndIsr /
    UpdateMetadata / StopReplica queue, last request sent and acknowledged, and errors by code.

    \b
    Examples:
      zk2kraft status --zk zk1:2181/kafka
      zk2kraft status --zk zk1:2181/kafka --bridge-status http://ctrl1:9404 --format json
      zk2kraft status --zk zk1:2181/kafka --watch 5
    """
    with zk_session(zk_connect_from(zk_connect, zk_security), chroot) as client:
        while True:
            s = read_status(client, kraft_views(bridge_status, metadata_dir))
            if fmt == "json":
                click.echo(s.model_dump_json(indent=None if watch else 2))
            else:
                if watch:
                    click.echo(time.strftime("--- %Y-%m-%d %H:%M:%S"))
                for line in status_lines(s):
                    click.echo(line)
            if not watch:
                return
            time.sleep(watch)
