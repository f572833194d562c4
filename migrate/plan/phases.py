"""The phase-by-phase plan: configs per node, restart order, the condition to watch, how to revert.

`build_plan` returns the plan (plan.json's model, schema in docs/plan.md) and the generated files by
relative path; `migrate.plan.render` writes them.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field

from migrate.kraft.quorum_voters import render_quorum_voters
from migrate.plan import configs as gen
from migrate.plan.checks import blockers
from migrate.plan.checks.registry import Check
from migrate.plan.controller_listener import BridgeListener, bridge_listener
from migrate.plan.handoff import BRIDGE_METRICS_PORT, HANDOFF_FOLDER, handoff_steps
from migrate.plan.inputs import PlanInputs
from migrate.plan.inter_broker import BridgeInterBroker, bridge_inter_broker
from migrate.plan.properties import PropertiesFile, parse_properties_text

SCHEMA_VERSION = 1
PHASE_IDS = ("prepare", "provision-controllers", "brokers-migration-mode", "migration-complete", "brokers-to-kraft", "finalize")


class ConfigChange(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str
    action: str = Field(description="set | remove")
    old: str | None = None
    new: str | None = None


class NodeConfig(BaseModel):
    """One generated file of a phase."""

    model_config = ConfigDict(extra="forbid")

    node: str
    role: str
    node_id: int | None
    file: str = Field(description="path relative to the plan directory")
    diff_file: str | None = None
    changes: list[ConfigChange] = Field(default_factory=list)


class Watch(BaseModel):
    """What must hold before moving on: a human description and the `zk2kraft status --format json` test."""

    model_config = ConfigDict(extra="forbid")

    description: str
    command: str
    status_phase: list[str] = Field(default_factory=list, description="acceptable `phase` values of status")


class Phase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    number: int
    id: str
    title: str
    summary: str
    steps: list[str]
    restart_order: list[str] = Field(default_factory=list)
    configs: list[NodeConfig] = Field(default_factory=list)
    watch: Watch
    rollback: list[str] = Field(description="how to revert once this phase is complete (Kafka's table)")
    reversible: bool = True


class ControllerEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    node_id: int
    host: str
    port: int
    placeholder: bool = False


class HandOff(BaseModel):
    """The rolling hand-off from the bridges to Kafka 3.9 controllers: steps and the controllers' files."""

    model_config = ConfigDict(extra="forbid")

    steps: list[str]
    configs: list[NodeConfig] = Field(default_factory=list)


class Plan(BaseModel):
    """plan.json: stable, versioned by `schema_version`."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    generated_at: str
    zk_source: str
    zk_chroot: str
    zk_warnings: list[str] = Field(default_factory=list, description="what reading the ZooKeeper source warned about")
    accepted_older_zk_state: bool = Field(
        default=False, description="the ZooKeeper data was older than its newest (damaged) snapshot, by request"
    )
    cluster_id: str | None
    target_inter_broker_protocol_version: str
    quorum: str
    controller_listener: str
    controllers: list[ControllerEntry]
    brokers: list[int] = Field(description="broker ids registered in ZooKeeper")
    broker_configs: list[str] = Field(description="the server.properties files the plan was made from")
    bridge_voters: str = Field(
        description="`zk2kraft bridge run --voters` of bridges as the controllers, and the brokers' "
        "controller.quorum.voters with them"
    )
    bridge_inter_broker: BridgeInterBroker | None = Field(
        default=None, description="the `zk2kraft bridge run --inter-broker-*` options the brokers need (None: no configs)"
    )
    bridge_listener: BridgeListener | None = Field(
        default=None,
        description="the `zk2kraft bridge run` options of the controller listener's SASL and authorizer (None: no configs)",
    )
    blockers: int
    warnings: int
    checks: list[Check]
    phases: list[Phase]
    handoff: HandOff | None = Field(
        default=None, description="from the bridges to Kafka 3.9 controllers (None: no bridge can be the controller)"
    )


SECRET_KEY_ENDINGS = ("password", "jaas.config", "secret", "secret.key", "master.key", "keystore.key")
"""Kafka's PASSWORD-type settings end so (ssl.*.password, sasl.jaas.config, password.encoder.secret, ...)."""
HIDDEN = "[hidden]"


def _shown(key: str, value: str | None) -> str | None:
    """A value as plan.json and plan.md may show it: a secret's is hidden (it stays in the generated file)."""
    return HIDDEN if value is not None and key.endswith(SECRET_KEY_ENDINGS) else value


def _changes(before: dict[str, str], after: dict[str, str]) -> list[ConfigChange]:
    out = [ConfigChange(key=k, action="remove", old=_shown(k, v)) for k, v in before.items() if k not in after]
    out += [
        ConfigChange(key=k, action="set", old=_shown(k, before.get(k)), new=_shown(k, v))
        for k, v in after.items()
        if before.get(k) != v
    ]
    return sorted(out, key=lambda c: c.key)


def _restart_order(inputs: PlanInputs) -> list[str]:
    """Brokers by id, the current ZooKeeper controller last (one controller move instead of one per restart)."""
    names = {b.label_id: b.name for b in inputs.brokers}
    ctrl = inputs.model.controller
    current = ctrl.broker_id if ctrl is not None and not ctrl.is_kraft_controller else None
    ordered = sorted((i for i in names if i is not None), key=lambda i: (i == current, i))
    return [names[i] for i in ordered] + [b.name for b in inputs.brokers if b.label_id is None]


def build_plan(inputs: PlanInputs, checks: list[Check], *, now: datetime | None = None) -> tuple[Plan, dict[str, str]]:
    """The plan and its files (relative path → text)."""
    files: dict[str, str] = {}
    ctrls = gen.target_controllers(inputs)
    order = _restart_order(inputs)
    ctrl_order = [f"controller-{c.node_id}" for c in ctrls]
    cluster_id = inputs.model.cluster_id or "<cluster id from /cluster/id>"

    def add(folder: str, node: gen.NodeFile) -> NodeConfig:
        path = f"{folder}/{node.node}.properties"
        files[path] = node.text
        diff = node.diff(path)
        diff_path = None
        if diff:
            diff_path = f"{folder}/{node.node}.diff"
            files[diff_path] = diff
        before = parse_properties_text(node.previous_text, node.previous_name).values if node.previous_name else {}
        return NodeConfig(
            node=node.node, role=node.role, node_id=node.node_id, file=path, diff_file=diff_path,
            changes=_changes(before, node.values),
        )  # fmt: skip

    folders = {pid: f"{i}-{pid}" for i, pid in enumerate(PHASE_IDS)}
    # Per broker: the file each phase starts from (the original, or the 'prepare' output).
    base: dict[str, tuple[PropertiesFile, str]] = {b.name: (b.file, b.file.path) for b in inputs.brokers}

    prepare_configs = []
    for b in inputs.brokers:
        node = gen.broker_prepare_file(inputs, b)
        if node is not None:
            cfg = add(folders["prepare"], node)
            prepare_configs.append(cfg)
            base[b.name] = (parse_properties_text(node.text, cfg.file), cfg.file)
    migration_configs, migration_files = [], {}
    for b in inputs.brokers:
        start, start_name = base[b.name]
        node = gen.broker_migration_file(inputs, b, start, start_name)
        migration_configs.append(add(folders["brokers-migration-mode"], node))
        migration_files[b.name] = node
    kraft_configs = []
    for b in inputs.brokers:
        node = migration_files[b.name]
        path = f"{folders['brokers-migration-mode']}/{b.name}.properties"
        kraft_configs.append(add(folders["brokers-to-kraft"], gen.broker_kraft_file(inputs, b, parse_properties_text(node.text, path), path)))
    ctrl_configs, final_configs = [], []
    for c in ctrls:
        node = gen.controller_migration_file(inputs, c)
        ctrl_configs.append(add(folders["provision-controllers"], node))
        path = f"{folders['provision-controllers']}/{node.node}.properties"
        final_configs.append(add(folders["finalize"], gen.controller_final_file(inputs, node, path)))

    zk = inputs.zk_connect or "<zookeeper.connect>"
    status_cmd = f"zk2kraft status --zk {zk} --format json"
    format_cmds = _format_commands(inputs, cluster_id, folders["provision-controllers"])
    ibl = bridge_inter_broker(inputs)
    handoff = None
    if (ibl is None or ibl.supported) and bridge_listener_problem(inputs) is None:
        # Files new in whole, listed without their values: they carry the brokers' TLS and SASL secrets.
        handoff_configs = [add(HANDOFF_FOLDER, gen.handoff_controller_file(inputs, c)).model_copy(update={"changes": []}) for c in ctrls]
        kraft_phase = PHASE_IDS.index("brokers-to-kraft")
        brokers_to_kraft = f"Phase {kraft_phase} ({folders['brokers-to-kraft']}/ files, in its restart order)"
        handoff = HandOff(steps=handoff_steps(inputs, zk, brokers_to_kraft), configs=handoff_configs)
    phases = [
        Phase(
            number=0, id="prepare", title="Prepare: Kafka 3.9 and inter.broker.protocol.version",
            summary=f"Every broker runs Kafka 3.9 with inter.broker.protocol.version={inputs.target_ibp}; fix every blocker.",
            steps=[
                "Upgrade every broker to Kafka 3.9 (rolling restart) if it is not there yet.",
                f"Roll the brokers with the files in {folders['prepare']}/ (IBP {inputs.target_ibp})."
                if prepare_configs else "No config change needed: every broker already sets the target IBP.",
                "Add log4j.logger.org.apache.kafka.metadata.migration=TRACE to the controllers' log4j config.",
                "Re-run `zk2kraft plan` until it reports no blocker.",
            ],
            restart_order=order if prepare_configs else [],
            configs=prepare_configs,
            watch=Watch(
                description="Every broker re-registered after its restart; no offline or under-replicated partitions.",
                command=status_cmd, status_phase=["zookeeper"],
            ),
            rollback=["Nothing to undo for the migration (the IBP cannot be lowered once raised)."],
        ),
        Phase(
            number=1, id="provision-controllers", title="Provision the KRaft controller quorum",
            summary="Format and start the controllers with the cluster's id and the migration enabled.",
            steps=[
                *format_cmds,
                "Start each controller: bin/kafka-server-start.sh <its properties file>.",
                *_bridge_steps(inputs, ibl, zk),
            ],
            restart_order=ctrl_order,
            configs=ctrl_configs,
            watch=Watch(
                description="The quorum has a leader (kafka-metadata-quorum.sh describe --status) and the active "
                "controller created /migration; brokers are still ZooKeeper brokers.",
                command=status_cmd, status_phase=["zookeeper", "controllers-ready"],
            ),
            rollback=["Deprovision the KRaft controllers (stop them, wipe their metadata log dirs)."],
        ),
        Phase(
            number=2, id="brokers-migration-mode", title="Enter migration mode on the brokers",
            summary="Rolling restart of every broker with the migration flag and the controller quorum.",
            steps=[
                f"Restart the brokers one at a time with the files in {folders['brokers-migration-mode']}/, "
                "waiting after each until its partitions are back in sync.",
                "The migration starts by itself once the last broker has registered with the controllers.",
            ],
            restart_order=order,
            configs=migration_configs,
            watch=Watch(
                description="A KRaft controller owns /controller and /migration records a KRaft offset "
                "(the controller logs 'Completed migration of metadata from ZooKeeper to KRaft').",
                command=status_cmd, status_phase=["dual-write"],
            ),
            rollback=_ROLLBACK_MIGRATION_MODE,
        ),
        Phase(
            number=3, id="migration-complete", title="Migration complete: dual-write",
            summary="No config change: check the initial load and the dual-write before touching the brokers again.",
            steps=[
                "Confirm the phase with `zk2kraft status`; optionally audit with `zk2kraft audit`.",
                "Metadata changes now go to KRaft and are written back to ZooKeeper.",
            ],
            watch=Watch(
                description="status phase dual-write, ZooKeeper write-behind lag 0 (--bridge-status or the controller's "
                "ZkWriteBehindLag metric), every broker still listed as a ZooKeeper broker.",
                command=status_cmd, status_phase=["dual-write"],
            ),
            rollback=_ROLLBACK_MIGRATION_MODE,
        ),
        Phase(
            number=4, id="brokers-to-kraft", title="Migrate the brokers to KRaft",
            summary="Rolling restart of every broker as a KRaft broker (node.id = old broker.id).",
            steps=[
                f"Restart the brokers one at a time with the files in {folders['brokers-to-kraft']}/, waiting "
                "after each until its partitions are back in sync.",
            ],
            restart_order=order,
            configs=kraft_configs,
            watch=Watch(
                description="No broker left in /brokers/ids (every broker registered as a KRaft broker).",
                command=status_cmd, status_phase=["kraft-brokers"],
            ),
            rollback=_rollback_kraft_brokers(folders),
        ),
        Phase(
            number=5, id="finalize", title="Finalize (point of no return)",
            summary="Restart the controllers one at a time without the migration flag.",
            steps=[
                "Gate: `zk2kraft finalize-check` must pass (all brokers KRaft, state MIGRATION, lag 0, soak time, audit).",
                f"Restart the controllers one at a time with the files in {folders['finalize']}/.",
                "Afterwards ZooKeeper is no longer written and can be decommissioned.",
            ],
            restart_order=ctrl_order,
            configs=final_configs,
            watch=Watch(
                description="The controllers report ZkMigrationState POST_MIGRATION; /migration stops changing.",
                command=status_cmd, status_phase=["finalized"],
            ),
            rollback=["Cannot be reverted: after finalization the cluster can no longer go back to ZooKeeper."],
            reversible=False,
        ),
    ]  # fmt: skip
    found = [c for c in checks if c.status == "fail"]
    plan = Plan(
        generated_at=(now or datetime.now(UTC)).isoformat(timespec="seconds"),
        zk_source=inputs.zk_origin,
        zk_chroot=inputs.zk_chroot,
        zk_warnings=inputs.zk_warnings,
        accepted_older_zk_state=inputs.accepted_older_zk_state,
        cluster_id=inputs.model.cluster_id,
        target_inter_broker_protocol_version=inputs.target_ibp,
        quorum=inputs.quorum,
        controller_listener=inputs.controller_listener,
        controllers=[
            ControllerEntry(node_id=c.node_id, host=c.host, port=c.port, placeholder=not inputs.controllers) for c in ctrls
        ],
        brokers=sorted(inputs.model.brokers),
        broker_configs=[b.file.path for b in inputs.brokers],
        bridge_voters=render_quorum_voters(ctrls),
        bridge_inter_broker=ibl,
        bridge_listener=bridge_listener(inputs),
        blockers=len(blockers(checks)),
        warnings=sum(1 for c in found if c.severity == "warning"),
        checks=checks,
        phases=phases,
        handoff=handoff,
    )
    return plan, files


def _bridge_steps(inputs: PlanInputs, ibl: BridgeInterBroker | None, zk: str) -> list[str]:
    """Phase 1 with `zk2kraft bridge run` as the controller: one command per bridge (with several, each a voter of
    `--voters`), the brokers' controller.quorum.voters, and the inter-broker options."""
    ctrls = gen.target_controllers(inputs)
    if ibl is not None and not ibl.supported:
        return ["The zk2kraft bridge cannot be this cluster's controller: " + " ".join(ibl.notes)]
    if (problem := bridge_listener_problem(inputs)) is not None:
        return [f"The zk2kraft bridge cannot be this cluster's controller: {problem}"]
    voters = render_quorum_voters(ctrls)
    quorum = f" --voters {voters}" if len(ctrls) > 1 else ""
    extra = f" {' '.join(ibl.options)}" if ibl is not None and ibl.options else ""
    tls = ""
    if "SSL" in inputs.controller_protocol and inputs.controller_ssl_keystore is not None:
        tls = f" --listen-ssl-cert {inputs.controller_ssl_keystore}"
        if inputs.controller_ssl_truststore is not None:
            tls += f" --listen-ssl-ca {inputs.controller_ssl_truststore}"
    security = bridge_listener(inputs)
    if security is not None and security.options:
        tls += f" {security.command_text()}"
    commands = [
        f"zk2kraft bridge run --zk {zk} --metadata-dir {inputs.bridge_metadata_dir} --node-id {c.node_id} "
        f"--listen {gen.BRIDGE_LISTEN_HOST}:{c.port}{tls} --metrics 0.0.0.0:{BRIDGE_METRICS_PORT}{quorum}{extra}"
        for c in ctrls
    ]
    lead = "Or, with the zk2kraft bridge as the controller (docs/operations.md): "
    if len(ctrls) == 1:
        steps = [f"{lead}`{commands[0]}`"]
    else:
        steps = [
            f"{lead}a quorum of {len(ctrls)} bridges, one per controller host, each on its own disk:",
            *(f"Bridge {c.node_id} on {c.host}: `{command}`" for c, command in zip(ctrls, commands, strict=True)),
            "Their first start, on empty --metadata-dir directories, needs --format-empty-voter-directory on each; "
            "leave it out of every later start (a voter restarted on an empty directory is KIP-853's lost disk).",
        ]
        if tls.startswith(" --listen-ssl-cert"):
            steps.append(
                "The voters reach each other over TLS on the same listener: each presents its --listen-ssl-cert and "
                "checks the others' against --listen-ssl-ca, host name included, so each bridge's certificate must "
                "name the host it has in --voters."
            )
    broker_line = f"controller.quorum.voters={voters}"
    if inputs.quorum == "static":
        steps.append(f"The brokers find the bridges' leader through the voter set: `{broker_line}` (in their files).")
    else:
        steps.append(
            f"The bridges are a static quorum: the brokers need `{broker_line}` in place of "
            "controller.quorum.bootstrap.servers (make the plan with --quorum static to have it in their files)."
        )
    if security is not None and security.options:
        steps.append(
            f"The bridge serves the controller listener {security.listener} ({security.security_protocol}) as the "
            "brokers' controllers do: " + " ".join(security.notes)
        )
    if ibl is None:
        steps.append(
            "Add the --inter-broker-* options of the brokers' inter-broker listener to each bridge command "
            "(give --broker-config to have them derived)."
        )
        return steps
    protocols = ", ".join(ibl.security_protocols) or "protocol unknown"
    mechanism = f", SASL {ibl.sasl_mechanism}" if ibl.sasl_mechanism else ""
    steps.append(
        f"The bridge sends LeaderAndIsr, UpdateMetadata and StopReplica on the brokers' inter-broker listener "
        f"{ibl.listener} ({protocols}{mechanism}): " + " ".join(ibl.notes)
    )
    return steps


def bridge_listener_problem(inputs: PlanInputs) -> str | None:
    """Why `bridge run` cannot serve the controller listener the plan asks for; None when it can: any protocol
    (voters of a TLS listener reach each other over TLS too) with the brokers' SASL mechanism, principals and
    authorizer (`controller_listener.mismatches`)."""
    protocol = inputs.controller_protocol
    security = bridge_listener(inputs)
    if security is not None and not security.supported:
        return (
            f"the brokers' controller listener {security.listener} ({protocol}) is one its listener cannot match "
            "(see controller-listener-security): " + " ".join(security.notes)
        )
    return None


def _format_commands(inputs: PlanInputs, cluster_id: str, folder: str) -> list[str]:
    ctrls = gen.target_controllers(inputs)
    if inputs.quorum == "static":
        return [
            f"On controller {c.node_id}: bin/kafka-storage.sh format --cluster-id {cluster_id} "
            f"--config {folder}/controller-{c.node_id}.properties"
            for c in ctrls
        ]
    if len(ctrls) == 1:
        c = ctrls[0]
        return [
            f"On controller {c.node_id}: bin/kafka-storage.sh format --standalone --cluster-id {cluster_id} "
            f"--config {folder}/controller-{c.node_id}.properties"
        ]
    initial = ",".join(f"{c.entry}:<directory id of {c.node_id}>" for c in ctrls)
    return [
        "Make one directory id per controller with bin/kafka-storage.sh random-uuid.",
        *(
            f"On controller {c.node_id}: bin/kafka-storage.sh format --cluster-id {cluster_id} "
            f'--initial-controllers "{initial}" --config {folder}/controller-{c.node_id}.properties'
            for c in ctrls
        ),
    ]


_ROLLBACK_MIGRATION_MODE = [
    "Deprovision the KRaft controllers.",
    "Run `zk2kraft rollback` right away (backs up, then deletes /controller and /migration in one transaction; "
    "the cluster has no controller until /controller is gone).",
    "Roll every broker back to its file from before 'brokers-migration-mode' (no migration flag, no controller "
    "quorum settings, broker.id kept).",
]


def _rollback_kraft_brokers(folders: dict[str, str]) -> list[str]:
    return [
        f"Roll every broker back to its {folders['brokers-migration-mode']}/ file (ZooKeeper mode, "
        "zookeeper.metadata.migration.enable still true, node.id back to broker.id).",
        "Deprovision the KRaft controllers.",
        "Run `zk2kraft rollback` right away (deletes /controller and /migration).",
        "Roll every broker a second time with its file from before 'brokers-migration-mode' (migration flag and "
        "controller settings removed).",
    ]
