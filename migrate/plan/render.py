"""plan.md, plan.json and the config folders, written atomically under the output directory."""

from __future__ import annotations

from pathlib import Path

from migrate.atomic import atomic_write_text
from migrate.plan.checks import Check
from migrate.plan.phases import Plan

_MARK = {"blocker": "BLOCKER", "warning": "warning", "info": "info"}


def check_lines(checks: list[Check], *, include_passed: bool = True) -> list[str]:
    """Markdown lines for the checks: failures (blockers first) with evidence and remediation, then the rest."""
    out: list[str] = []
    for c in checks:
        if c.status == "pass" and not include_passed:
            continue
        if c.status == "pass":
            detail = f" — {c.evidence[0].detail}" if c.evidence else ""
            out.append(f"- ok `{c.id}` {c.title}{detail}")
            continue
        if c.status == "not-checked":
            out.append(f"- not checked `{c.id}` {c.title}: {c.evidence[0].detail if c.evidence else ''}")
            continue
        out.append(f"- **{_MARK[c.severity]}** `{c.id}` {c.title}")
        out.extend(f"  - `{e.where}`: {e.detail}" for e in c.evidence)
        if c.remediation:
            out.append(f"  - fix: {c.remediation}")
    return out


def plan_markdown(plan: Plan) -> str:
    """The human-readable plan: summary, checks (blockers first), then each phase."""
    lines = [
        "# ZooKeeper → KRaft migration plan",
        "",
        f"- ZooKeeper: {plan.zk_source} (chroot `{plan.zk_chroot}`)",
        *(f"- **ZooKeeper source warning: {w}**" for w in plan.zk_warnings),
        f"- cluster id: `{plan.cluster_id}`",
        f"- brokers: {', '.join(map(str, plan.brokers)) or 'none registered'}",
        "- controllers: "
        + ", ".join(f"{c.node_id}@{c.host}:{c.port}" for c in plan.controllers)
        + (" (placeholders: pass --controllers)" if any(c.placeholder for c in plan.controllers) else ""),
        f"- quorum: {plan.quorum}, controller listener `{plan.controller_listener}`, "
        f"target inter.broker.protocol.version {plan.target_inter_broker_protocol_version}",
        f"- **{plan.blockers} blocker(s), {plan.warnings} warning(s)**",
        "",
        "## Preflight checks",
        "",
        *check_lines(plan.checks),
    ]
    for phase in plan.phases:
        lines += ["", f"## Phase {phase.number}: {phase.title} (`{phase.id}`)", "", phase.summary, ""]
        lines += [f"{i}. {s}" for i, s in enumerate(phase.steps, start=1)]
        if phase.restart_order:
            lines += ["", "Restart order: " + " → ".join(phase.restart_order)]
        if phase.configs:
            lines += ["", "Configs:"]
            for cfg in phase.configs:
                changes = ", ".join(
                    f"-{c.key}" if c.action == "remove" else f"{c.key}={c.new}" for c in cfg.changes
                )
                lines.append(f"- `{cfg.file}`" + (f" ({changes})" if cfg.diff_file and changes else ""))
        lines += ["", f"Before moving on: {phase.watch.description}", f"`{phase.watch.command}`"]
        if phase.watch.status_phase:
            lines.append("expects status phase: " + " or ".join(f"`{p}`" for p in phase.watch.status_phase))
        lines += ["", "If you must revert after this phase:"]
        lines += [f"- {r}" for r in phase.rollback]
    return "\n".join(lines) + "\n"


def summary_lines(plan: Plan) -> list[str]:
    """The short terminal summary `zk2kraft plan` prints."""
    out = [
        f"cluster {plan.cluster_id} at {plan.zk_source} (chroot {plan.zk_chroot}): "
        f"{len(plan.brokers)} brokers, {len(plan.controllers)} controllers, "
        f"{plan.blockers} blocker(s), {plan.warnings} warning(s)",
    ]
    for c in plan.checks:
        if c.status != "fail":
            continue
        first = c.evidence[0] if c.evidence else None
        where = f" — {first.where}: {first.detail}" if first else ""
        more = f" (+{len(c.evidence) - 1} more)" if len(c.evidence) > 1 else ""
        out.append(f"  {_MARK[c.severity]:8} {c.id}{where}{more}")
    out.append("phases: " + " → ".join(p.id for p in plan.phases))
    return out


def write_plan(plan: Plan, files: dict[str, str], out: Path) -> list[Path]:
    """Write plan.md, plan.json and every generated file (each atomically); returns the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for rel, text in sorted(files.items()):
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text)
        written.append(path)
    atomic_write_text(out / "plan.json", plan.model_dump_json(indent=2) + "\n")
    atomic_write_text(out / "plan.md", plan_markdown(plan))
    return [*written, out / "plan.json", out / "plan.md"]
