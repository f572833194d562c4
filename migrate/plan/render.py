"""plan.md, plan.json and the config folders: built beside the output directory, then swapped in whole."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from migrate.atomic import atomic_write_text, swap_directory_into_place
from migrate.errors import Zk2KraftError
from migrate.plan.checks.registry import Check
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


def bridge_lines(plan: Plan, prefix: str) -> list[str]:
    """What `zk2kraft bridge run` needs to reach the brokers (their inter-broker listener), in one line."""
    ibl = plan.bridge_inter_broker
    if ibl is None:
        return []
    if not ibl.supported:
        return [f"{prefix}bridge run: cannot reach the brokers' inter-broker listener {ibl.listener} (SASL {ibl.sasl_mechanism}; see inter-broker-listener)"]
    options = f"`{ibl.command_text()}`" if ibl.options else ibl.command_text()
    lines = [f"{prefix}bridge run inter-broker options ({ibl.listener}, {', '.join(ibl.security_protocols) or 'protocol unknown'}): {options}"]
    return lines + bridge_listener_lines(plan, prefix)


def bridge_listener_lines(plan: Plan, prefix: str) -> list[str]:
    """The `bridge run` options of the controller listener's SASL and authorizer, or why a bridge cannot match them."""
    security = plan.bridge_listener
    if security is None:
        return []
    where = f"{security.listener}, {security.security_protocol}"
    if not security.supported:
        return [f"{prefix}bridge run: cannot serve the brokers' controller listener {where} as their controllers do "
                "(see controller-listener-security)"]  # fmt: skip
    if not security.options:
        return []
    return [f"{prefix}bridge run listener options ({where}): `{security.command_text()}`"]


def bridge_quorum_lines(plan: Plan, prefix: str) -> list[str]:
    """The bridges' `--voters` and the brokers' controller.quorum.voters with them (none where no bridge can be
    the controller)."""
    if plan.handoff is None:  # the plan has no hand-off exactly when no bridge can be the controller
        return []
    voters = plan.bridge_voters
    return [f"{prefix}with zk2kraft bridges as the controllers: `--voters {voters}` on each bridge, "
            f"`controller.quorum.voters={voters}` on the brokers"]  # fmt: skip


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
        *bridge_lines(plan, "- "),
        *bridge_quorum_lines(plan, "- "),
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
    lines += handoff_lines(plan)
    return "\n".join(lines) + "\n"


def handoff_lines(plan: Plan) -> list[str]:
    """The hand-off from the bridges to Kafka 3.9 controllers (rolling or cold), brokers to KRaft, finalize and
    rollback (none where no bridge can be the controller)."""
    if plan.handoff is None:
        return []
    lines = [
        "",
        "## Hand-off: from the zk2kraft bridges to Kafka 3.9 controllers, then finalize",
        "",
        "Only with bridges as the controllers: after phase 3 (status shows dual-write), then phase 4, and in "
        "place of phase 5 (its files are for controllers provisioned in phase 1). Each Kafka controller takes its bridge's node.id, listener, "
        "directory and voters (docs/handoff.md). Each step gives the command that checks it and its time for "
        "this cluster, scaled linearly with partitions from a measured benchmark, or \"not measured\".",
        "",
    ]
    lines += [f"{i}. {s}" for i, s in enumerate(plan.handoff.steps, start=1)]
    lines += ["", "Configs:", *(f"- `{cfg.file}`" for cfg in plan.handoff.configs)]
    return lines


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
    out += [line.replace("`", "") for line in bridge_lines(plan, "") + bridge_quorum_lines(plan, "")]
    out.append("phases: " + " → ".join(p.id for p in plan.phases))
    return out


def check_out_dir(out: Path, *, force: bool) -> None:
    """Refuse an `--out` that holds anything, unless `force` and it holds an earlier plan (plan.json)."""
    if not out.exists():
        return
    if not out.is_dir():
        raise Zk2KraftError(f"--out {out}: exists and is not a directory")
    entries = sorted(p.name for p in out.iterdir())
    if not entries:
        return
    shown = ", ".join(entries[:3]) + (", ..." if len(entries) > 3 else "")
    if not force:
        raise Zk2KraftError(
            f"--out {out} is not empty ({len(entries)} entries: {shown}); the files of an earlier plan would "
            f"stay beside the new ones. Give a new or empty folder, or --force to replace an earlier plan"
        )
    if not (out / "plan.json").is_file():
        raise Zk2KraftError(
            f"--out {out} holds no plan.json ({len(entries)} entries: {shown}), so it is no earlier zk2kraft plan; "
            f"--force replaces only a plan folder: give a new or empty folder"
        )


def write_plan(plan: Plan, files: dict[str, str], out: Path, *, force: bool = False) -> list[Path]:
    """Write plan.md, plan.json and every generated file into a folder beside `out`, then swap it in.

    `out` must be missing or empty, or (with `force`) hold an earlier plan, which is replaced whole:
    no file of it stays beside the new ones. Returns the paths as they are under `out`.
    """
    check_out_dir(out, force=force)
    parent = out.absolute().parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=parent))
    texts = {
        **dict(sorted(files.items())),
        "plan.json": plan.model_dump_json(indent=2) + "\n",
        "plan.md": plan_markdown(plan),
    }
    try:
        for rel, text in texts.items():
            atomic_write_text(staging / rel, text)
        swap_directory_into_place(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return [out / rel for rel in texts]
