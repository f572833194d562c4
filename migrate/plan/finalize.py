"""`zk2kraft finalize`: the gate Kafka 3.9 lacks, the controllers' configs without the migration, the restart order.

Kafka 3.9 finalizes with no check (handoff.md §5): the first controller that becomes Raft leader on a log in
MIGRATION with `zookeeper.metadata.migration.enable` unset appends ZkMigrationStateRecord(POST_MIGRATION) in its
activation batch (ActivationRecordsGenerator), whatever brokers are still ZooKeeper-mode ones. The gate is
`finalize_conditions` (status.py) plus `controller_configs_condition` over the files this command rewrites.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from migrate.errors import Zk2KraftError
from migrate.kraft.quorum_voters import QUORUM_VOTERS, parse_quorum_voters, voter_set
from migrate.plan.properties import PropertiesFile, edit_properties
from migrate.plan.status import Condition, Status, finalize_conditions

MIGRATION_FLAG = "zookeeper.metadata.migration.enable"
BOOTSTRAP_SERVERS = "controller.quorum.bootstrap.servers"
# The broker-channel setting only a migrating controller uses (it sends LeaderAndIsr/UpdateMetadata to ZooKeeper
# brokers); the phase-5 files of `plan` remove it too.
INTER_BROKER_LISTENER = "inter.broker.listener.name"


def migration_settings(file: PropertiesFile) -> set[str]:
    """The keys a finalized controller drops: the migration flag, `zookeeper.connect` and every `zookeeper.*`
    client setting (Kafka 3.9 docs, "Finalizing the migration"), and the inter-broker listener."""
    return {k for k in file.values if k.startswith("zookeeper.")} | ({INTER_BROKER_LISTENER} & set(file.values))


def finalized_controller_text(file: PropertiesFile) -> str:
    """The controller's file with the migration settings commented out, everything else as it was."""
    return edit_properties(file, set_values={}, remove=migration_settings(file), note="finalize")


def migration_enabled(file: PropertiesFile) -> bool:
    """Kafka's boolean parse (case-insensitive `true`); the flag's default is false."""
    return (file.get(MIGRATION_FLAG) or "false").strip().lower() == "true"


@dataclass(frozen=True, slots=True)
class ControllerFile:
    """One controller's properties file as finalize reads it."""

    file: PropertiesFile
    node_id: int
    metadata_dir: str | None
    """`metadata.log.dir`, else the first of `log.dirs` (Kafka's KafkaConfig.metadataLogDir)."""

    @property
    def out_name(self) -> str:
        return f"controller-{self.node_id}.properties"


def read_controller_file(file: PropertiesFile) -> ControllerFile:
    """The node id and metadata dir of one controller's file; a file without a usable `node.id` is bad input."""
    raw = file.get("node.id")
    if raw is None or not raw.strip().lstrip("-").isdigit():
        raise Zk2KraftError(f"{file.where('node.id')}: no integer node.id ({raw!r}): not a KRaft controller's config")
    log_dirs = file.get("log.dirs") or file.get("log.dir")
    metadata_dir = file.get("metadata.log.dir") or (log_dirs.split(",")[0].strip() if log_dirs else None)
    return ControllerFile(file, int(raw.strip()), metadata_dir)


def controller_configs_condition(controllers: list[ControllerFile], active_id: int | None) -> Condition:
    """`controller-configs`: one file per voter, all controllers, all migrating, the same quorum, the leader among them.

    A mix is refused because Kafka 3.9 finalizes as soon as any controller without the flag leads, and a
    controller that keeps the flag after POST_MIGRATION only logs that it ignores it."""
    problems: list[str] = []
    names = {c.node_id: c.file.path for c in controllers}
    seen: dict[int, str] = {}
    for c in controllers:
        if c.node_id in seen:
            problems.append(f"node.id {c.node_id} in both {seen[c.node_id]} and {c.file.path}")
        seen[c.node_id] = c.file.path
        roles = {r.strip() for r in (c.file.get("process.roles") or "").split(",") if r.strip()}
        if roles != {"controller"}:
            problems.append(
                f"{c.file.where('process.roles')}: process.roles={','.join(sorted(roles)) or '(unset)'}, not "
                "controller (Kafka migrates with dedicated controllers only)"
            )
    enabled = sorted(c.file.path for c in controllers if migration_enabled(c.file))
    disabled = sorted(c.file.path for c in controllers if not migration_enabled(c.file))
    if enabled and disabled:
        problems.append(
            f"{MIGRATION_FLAG}=true in {', '.join(enabled)} but not in {', '.join(disabled)}: the controllers "
            "disagree about the migration (a controller without the flag finalizes the moment it leads)"
        )
    elif disabled:
        problems.append(
            f"no file has {MIGRATION_FLAG}=true: these are not the migrating controllers' configs (or they were "
            "finalized already)"
        )
    voters_by_file: dict[str, frozenset[str]] = {}
    for c in controllers:
        text = c.file.get(QUORUM_VOTERS)
        if text is None:
            continue
        try:
            voters = voter_set(parse_quorum_voters(text, source=c.file.where(QUORUM_VOTERS)), source=c.file.where(QUORUM_VOTERS))
        except Zk2KraftError as exc:
            problems.append(str(exc))
            continue
        voters_by_file[c.file.path] = frozenset(v.entry for v in voters.values())
    if voters_by_file:
        distinct = set(voters_by_file.values())
        if len(distinct) > 1 or len(voters_by_file) != len(controllers):
            shown = "; ".join(
                f"{c.file.path}: {','.join(sorted(voters_by_file[c.file.path])) if c.file.path in voters_by_file else '(unset)'}"
                for c in controllers
            )
            problems.append(f"{QUORUM_VOTERS} differs between the files ({shown})")
        else:
            voter_ids = {int(entry.split("@", 1)[0]) for entry in next(iter(distinct))}
            missing = sorted(voter_ids - set(names))
            extra = sorted(set(names) - voter_ids)
            if missing:
                problems.append(
                    f"voter(s) {missing} have no --controller-config: every controller must be restarted without "
                    "the migration settings"
                )
            if extra:
                problems.append(f"node.id {extra} ({', '.join(names[i] for i in extra)}) is not among the voters")
    elif not any(c.file.get(BOOTSTRAP_SERVERS) for c in controllers):
        problems.append(f"no file sets {QUORUM_VOTERS} or {BOOTSTRAP_SERVERS}")
    if active_id is not None and active_id not in names:
        problems.append(
            f"the active controller in /controller is {active_id}, not one of the files' node ids {sorted(names)}: "
            "hand the quorum to these controllers first (docs/handoff.md), or give the active controller's file"
        )
    if problems:
        return Condition(id="controller-configs", verdict="fail", detail="; ".join(problems))
    flagged = ", ".join(f"{c.node_id} ({c.file.path})" for c in sorted(controllers, key=lambda c: c.node_id))
    return Condition(
        id="controller-configs",
        verdict="pass",
        detail=f"controllers {flagged}: all with {MIGRATION_FLAG}=true, the same quorum",
    )


def gate_conditions(status: Status, controllers: list[ControllerFile] | None, *, min_soak_ms: int) -> list[Condition]:
    """Every condition but the audit; `controllers` None: not given (finalize-check without files)."""
    conditions = finalize_conditions(status, min_soak_ms=min_soak_ms)
    if controllers is not None:
        conditions.append(controller_configs_condition(controllers, active_controller_id(status)))
    return conditions


def active_controller_id(status: Status) -> int | None:
    """The KRaft leader ZooKeeper's /controller names (the controller claims it on becoming leader)."""
    return status.controller.id if status.controller is not None and status.controller.kraft else None


@dataclass(frozen=True, slots=True)
class RestartStep:
    node_id: int
    config: str
    active: bool
    check: str
    expect: str


def restart_steps(
    controllers: list[ControllerFile], active_id: int | None, out_dir: str, zk_connect: str
) -> list[RestartStep]:
    """Followers first, one at a time, in node-id order; the active controller last.

    The followers only follow after their restart; the election after the active controller stops makes a
    controller without the flag leader, and that activation writes POST_MIGRATION."""
    ordered = sorted(controllers, key=lambda c: (c.node_id == active_id, c.node_id))
    voters = _voter_endpoints(controllers)
    steps = []
    for c in ordered:
        config = f"{out_dir.rstrip('/')}/{c.out_name}"
        if c.node_id == active_id:
            metadata = shlex.quote(c.metadata_dir) if c.metadata_dir else "<its metadata.log.dir>"
            steps.append(
                RestartStep(
                    c.node_id, config, True,
                    f"zk2kraft status --zk {shlex.quote(zk_connect)} --metadata-dir {metadata}",
                    "phase: finalized (ZkMigrationState POST_MIGRATION in the log)",
                )
            )  # fmt: skip
        else:
            endpoint = voters.get(c.node_id, "<its controller listener host:port>")
            steps.append(
                RestartStep(
                    c.node_id, config, False,
                    f"kafka-metadata-quorum.sh --bootstrap-controller {endpoint} describe --replication",
                    f"node {c.node_id} listed as a voter (Follower) with Lag 0 before the next restart",
                )
            )  # fmt: skip
    return steps


def _voter_endpoints(controllers: list[ControllerFile]) -> dict[int, str]:
    for c in controllers:
        text = c.file.get(QUORUM_VOTERS)
        if text:
            try:
                return {v.node_id: v.endpoint for v in parse_quorum_voters(text)}
            except Zk2KraftError:
                return {}
    return {}


def restart_lines(steps: list[RestartStep]) -> list[str]:
    """The operator's restart order as printed by `zk2kraft finalize`."""
    lines = [
        "Restart the controllers one at a time, in this order (followers first, the active controller last):",
    ]
    for number, step in enumerate(steps, start=1):
        role = "the active controller (last)" if step.active else "a follower"
        lines.append(f"  {number}. controller {step.node_id}, {role}: stop it, install {step.config}, start it")
        lines.append(f"     check: {step.check}")
        lines.append(f"     expect: {step.expect}")
    lines.extend(
        [
            "The first controller that becomes leader without zookeeper.metadata.migration.enable writes",
            "ZkMigrationStateRecord(POST_MIGRATION): the migration is finalized, and there is no rollback",
            "afterwards. From the first restart on, any leader change can be that moment. ZooKeeper is no longer",
            "written; once `zk2kraft status` says finalized it can be deprovisioned.",
        ]
    )
    return lines
