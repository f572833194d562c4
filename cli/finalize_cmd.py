"""`zk2kraft finalize-check`: the gate before the point of no return."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import click

from cli.common import EXIT_FINDING, handles_errors, zk_session
from cli.options import bridge_status_url, zk_connect_from, zk_security_options
from cli.status_cmd import kraft_views
from migrate.errors import Zk2KraftError
from migrate.plan.status import Condition, finalize_conditions, parse_duration, read_status
from migrate.zk.live import ZkConnectOptions
from migrate.zk.sources import ZkSource


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


@click.command("finalize-check")
@click.option("--zk", "zk_connect", required=True, metavar="HOST:PORT[,...][/chroot]", help="Kafka's zookeeper.connect.")
@click.option("--chroot", help="Kafka's chroot, when not part of --zk.")
@click.option("--bridge-status", metavar="URL", callback=bridge_status_url, help="The active controller's status endpoint (state and lag).")
@click.option(
    "--metadata-dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A controller's metadata log dir (migration state, KRaft broker registrations, audit input).",
)
@click.option("--min-soak", default="7d", show_default=True, help="No controller failover for at least this long (7d, 12h, 30m).")
@click.option(
    "--audit-out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the audit writes its report (default: a new temporary directory, named in the audit condition).",
)
@click.option("--no-audit", is_flag=True, help="Do not run the audit (the condition then does not pass).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@zk_security_options
@handles_errors
def finalize_check_cmd(
    zk_connect: str,
    chroot: str | None,
    bridge_status: str | None,
    metadata_dir: Path | None,
    min_soak: str,
    audit_out: Path | None,
    no_audit: bool,
    fmt: str,
    **zk_security: Any,
) -> None:
    """Check every condition for finalizing the migration; exit 0 only when all pass.

    Conditions: every broker re-registered as a KRaft broker (none left in /brokers/ids), migration
    state MIGRATION, ZooKeeper write-behind lag 0, no controller failover within --min-soak, and a
    clean `zk2kraft audit`. A condition that cannot be checked with the inputs given is shown as
    "not checked" and does not pass. Exit 0 all pass, 1 otherwise.

    \b
    Example:
      zk2kraft finalize-check --zk zk1:2181/kafka --bridge-status http://ctrl1:9404 \\
          --metadata-dir /var/lib/kafka/controller --min-soak 14d
    """
    try:
        soak_ms = parse_duration(min_soak)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--min-soak") from e
    zk = zk_connect_from(zk_connect, zk_security)
    with zk_session(zk, chroot) as client:
        status = read_status(client, kraft_views(bridge_status, metadata_dir))
    conditions = finalize_conditions(status, min_soak_ms=soak_ms)
    conditions.append(audit_condition(zk, chroot, metadata_dir, audit_out, no_audit))
    ok = all(c.verdict == "pass" for c in conditions)
    if fmt == "json":
        click.echo(json.dumps({"ok": ok, "phase": status.phase, "conditions": [c.model_dump() for c in conditions]}, indent=2))
    else:
        click.echo(f"phase: {status.phase} — {status.description}")
        for c in conditions:
            click.echo(f"  {c.verdict.upper():12} {c.id}: {c.detail}")
        click.echo("ready to finalize" if ok else "NOT ready to finalize")
    if not ok:
        sys.exit(EXIT_FINDING)
