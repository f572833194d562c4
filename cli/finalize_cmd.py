"""`zk2kraft finalize` and `zk2kraft finalize-check` (its read-only form): the gate before the point of no return."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import click

from cli.common import EXIT_FINDING, fail, handles_errors, zk_session
from cli.options import bridge_status_url, zk_connect_from, zk_security_options
from cli.status_cmd import kraft_views
from migrate.atomic import atomic_write_files
from migrate.errors import Zk2KraftError
from migrate.plan.finalize import (
    ControllerFile,
    active_controller_id,
    finalized_controller_text,
    gate_conditions,
    read_controller_file,
    restart_lines,
    restart_steps,
)
from migrate.plan.properties import read_properties_file
from migrate.plan.status import Condition, Status, parse_duration, read_status
from migrate.zk.live import ZkConnectOptions
from migrate.zk.sources import ZkSource


def refuse_files_in_the_way(out_dir: Path, texts: dict[str, str], overwrite: bool) -> None:
    """Exit 2 if a file finalize would write is already in `out_dir` and --overwrite was not given."""
    existing = sorted(name for name in texts if (out_dir / name).exists())
    if existing and not overwrite:
        fail(f"{out_dir}: {', '.join(existing)} already there (give --overwrite to replace); nothing written")


def audit_condition(
    zk: ZkConnectOptions, chroot: str | None, metadata_dir: Path | None, out: Path | None, skip: bool
) -> Condition:
    """Run `zk2kraft audit --fail-on lag` when a metadata dir was given: lag at the gate is a failure.

    Without `out` the report goes to a new temporary directory (named in the condition), never the
    current directory."""
    if skip:
        return Condition(id="audit", verdict="not-checked", detail="skipped (--no-audit)")
    if metadata_dir is None:
        return Condition(id="audit", verdict="not-checked", detail="needs --metadata-dir (the controller's metadata log)")
    if out is None:
        out = Path(tempfile.mkdtemp(prefix="zk2kraft-finalize-audit-")) / "audit"
    # Imported here: Spark's start-up cost belongs to this condition, not to `--help`.
    from validators.audit import AuditOptions, run_audit
    from validators.spark import spark_session

    with spark_session() as spark:
        source = ZkSource(connect=zk.connect, chroot=chroot, options=zk)
        options = AuditOptions(zk=source, kraft=metadata_dir, out=out, fail_on_lag=True)
        try:
            result = run_audit(spark, options)
        except Zk2KraftError as exc:
            # The other conditions are still worth showing: a refused audit fails this one, with its reason.
            return Condition(id="audit", verdict="fail", detail=f"the audit was refused: {exc}")
    return Condition(id="audit", verdict="pass" if result.exit_code == 0 else "fail", detail=f"audit report in {out} (exit code {result.exit_code})")



def gate_options(func: Any) -> Any:
    """The options `finalize` and `finalize-check` share (one gate, two commands)."""
    options = [
        click.option("--zk", "zk_connect", required=True, metavar="HOST:PORT[,...][/chroot]", help="Kafka's zookeeper.connect."),
        click.option("--chroot", help="Kafka's chroot, when not part of --zk."),
        click.option(
            "--bridge-status", metavar="URL", callback=bridge_status_url,
            help="The active controller's status endpoint (state, lag, registered and fenced brokers).",
        ),
        click.option(
            "--metadata-dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
            help="A controller's metadata log dir (migration state, broker registrations and fencing, audit input).",
        ),
        click.option("--min-soak", default="7d", show_default=True, help="No controller failover for at least this long (7d, 12h, 30m)."),
        click.option(
            "--audit-out", type=click.Path(file_okay=False, path_type=Path),
            help="Where the audit writes its report (default: a new temporary directory, named in the audit condition).",
        ),
        click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True),
        zk_security_options,
    ]  # fmt: skip
    for option in reversed(options):
        func = option(func)
    return func


def evaluate_gate(
    zk_connect: str,
    chroot: str | None,
    bridge_status: str | None,
    metadata_dir: Path | None,
    min_soak: str,
    zk_security: dict[str, Any],
    controllers: list[ControllerFile] | None,
) -> tuple[Status, list[Condition], ZkConnectOptions]:
    """Read ZooKeeper and the KRaft side; every condition but the audit."""
    try:
        soak_ms = parse_duration(min_soak)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--min-soak") from e
    zk = zk_connect_from(zk_connect, zk_security)
    with zk_session(zk, chroot) as client:
        status = read_status(client, kraft_views(bridge_status, metadata_dir))
    return status, gate_conditions(status, controllers, min_soak_ms=soak_ms), zk


def show_gate(status: Status, conditions: list[Condition], fmt: str, ok: bool, verdict: str) -> None:
    if fmt == "json":
        report = {"ok": ok, "phase": status.phase, "conditions": [c.model_dump() for c in conditions]}
        click.echo(json.dumps(report, indent=2))
        return
    click.echo(f"phase: {status.phase} — {status.description}")
    for c in conditions:
        click.echo(f"  {c.verdict.upper():12} {c.id}: {c.detail}")
    click.echo(verdict)


@click.command("finalize-check")
@gate_options
@click.option(
    "--controller-config", "controller_configs", multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A controller's properties file (repeatable): adds the controller-configs condition that finalize requires.",
)  # fmt: skip
@click.option("--no-audit", is_flag=True, help="Do not run the audit (the condition then does not pass).")
@handles_errors
def finalize_check_cmd(
    zk_connect: str,
    chroot: str | None,
    bridge_status: str | None,
    metadata_dir: Path | None,
    min_soak: str,
    audit_out: Path | None,
    fmt: str,
    controller_configs: tuple[Path, ...],
    no_audit: bool,
    **zk_security: Any,
) -> None:
    """Check every condition for finalizing the migration, read-only; exit 0 only when all pass.

    The same gate as `zk2kraft finalize`, which also rewrites the controllers' configs. Conditions:
    every broker re-registered as a KRaft broker (none left in /brokers/ids, none registered as a
    migrating ZooKeeper broker), no broker fenced, migration state MIGRATION, ZooKeeper write-behind
    lag 0, no controller failover within --min-soak, a clean `zk2kraft audit`, and (with
    --controller-config) the controllers' files agreeing about the migration and the quorum. A
    condition that cannot be checked with the inputs given is shown as "not checked" and does not
    pass. Exit 0 all pass, 1 otherwise.

    \b
    Example:
      zk2kraft finalize-check --zk zk1:2181/kafka --bridge-status http://ctrl1:9404 \\
          --metadata-dir /var/lib/kafka/controller --min-soak 14d
    """
    controllers = [read_controller_file(read_properties_file(p)) for p in controller_configs] or None
    status, conditions, zk = evaluate_gate(zk_connect, chroot, bridge_status, metadata_dir, min_soak, zk_security, controllers)
    conditions.append(audit_condition(zk, chroot, metadata_dir, audit_out, no_audit))
    ok = all(c.verdict == "pass" for c in conditions)
    show_gate(status, conditions, fmt, ok, "ready to finalize" if ok else "NOT ready to finalize")
    if not ok:
        sys.exit(EXIT_FINDING)


@click.command("finalize")
@gate_options
@click.option(
    "--controller-config", "controller_configs", multiple=True, required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Each controller's current properties file, e.g. the plan's handoff/controller-N.properties "
    "(repeatable; one per voter).",
)
@click.option(
    "--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
    help="Where to write controller-<id>.properties without the migration settings.",
)
@click.option("--overwrite", is_flag=True, help="Replace controller-<id>.properties files already in --out.")
@handles_errors
def finalize_cmd(
    zk_connect: str,
    chroot: str | None,
    bridge_status: str | None,
    metadata_dir: Path | None,
    min_soak: str,
    audit_out: Path | None,
    fmt: str,
    controller_configs: tuple[Path, ...],
    out_dir: Path,
    overwrite: bool,
    **zk_security: Any,
) -> None:
    """The gate Kafka 3.9 lacks: check, then write the controllers' configs without the migration.

    Refuses (exit 1, nothing written) unless every condition of `zk2kraft finalize-check` passes:
    no broker registered as a migrating ZooKeeper broker, none fenced, migration state MIGRATION,
    write-behind lag 0, the soak time, the controllers' files (one per voter, all with
    zookeeper.metadata.migration.enable=true, the same quorum, the active controller among them)
    and a clean audit (run last, only when the rest pass). Then writes, to --out, each controller's
    file with zookeeper.metadata.migration.enable, zookeeper.connect, every other zookeeper.*
    setting and inter.broker.listener.name commented out, and prints the restart order: followers
    one at a time, the active controller last, each with the command that checks it. The first
    controller that leads without the flag writes ZkMigrationStateRecord(POST_MIGRATION): no
    rollback afterwards. On a log already finalized it says so and exits 0, writing nothing. Bad
    input (an unreadable file, a file already in --out without --overwrite) is exit 2.

    \b
    Example:
      zk2kraft finalize --zk zk1:2181/kafka --metadata-dir /var/lib/zk2kraft/meta \\
          --controller-config plan/handoff/controller-3000.properties \\
          --controller-config plan/handoff/controller-3001.properties \\
          --controller-config plan/handoff/controller-3002.properties --out final/
    """
    controllers = [read_controller_file(read_properties_file(p)) for p in controller_configs]
    texts = {c.out_name: finalized_controller_text(c.file) for c in controllers}
    refuse_files_in_the_way(out_dir, texts, overwrite)
    status, conditions, zk = evaluate_gate(zk_connect, chroot, bridge_status, metadata_dir, min_soak, zk_security, controllers)
    if status.migration_state == "POST_MIGRATION":
        source = next((v.source for v in status.kraft if v.migration_state == "POST_MIGRATION"), "the KRaft side")
        click.echo(f"already finalized: ZkMigrationState POST_MIGRATION in {source}; nothing to do, nothing written")
        return
    if all(c.verdict == "pass" for c in conditions):
        conditions.append(audit_condition(zk, chroot, metadata_dir, audit_out, skip=False))
    else:
        # Spark's start-up is not worth it: the answer is already no.
        conditions.append(Condition(id="audit", verdict="not-checked", detail="not run: other conditions fail"))
    ok = all(c.verdict == "pass" for c in conditions)
    if not ok:
        show_gate(status, conditions, fmt, ok, "finalize refused: nothing written")
        sys.exit(EXIT_FINDING)
    refuse_files_in_the_way(out_dir, texts, overwrite)  # again: the audit may have taken minutes
    try:
        atomic_write_files(out_dir, texts)
    except OSError as exc:
        fail(f"{out_dir}: could not write the controllers' files: {exc.strerror or exc}")
    steps = restart_steps(controllers, active_controller_id(status), str(out_dir), zk_connect)
    if fmt == "json":
        report = {
            "ok": True, "phase": status.phase, "conditions": [c.model_dump() for c in conditions],
            "written": [str(out_dir / name) for name in texts],
            "restart_order": [
                {"node_id": s.node_id, "config": s.config, "active": s.active, "check": s.check, "expect": s.expect}
                for s in steps
            ],
        }  # fmt: skip
        click.echo(json.dumps(report, indent=2))
        return
    show_gate(status, conditions, fmt, ok, "ready to finalize")
    for name in texts:
        click.echo(f"wrote {out_dir / name}")
    for line in restart_lines(steps):
        click.echo(line)
