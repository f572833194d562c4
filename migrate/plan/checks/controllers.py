"""Preflight checks of the target controllers and the listeners, authorizer and log directories they meet."""

from __future__ import annotations

from migrate.errors import UnsupportedVersionError
from migrate.kraft import metadata_version as mvs
from migrate.plan.checks.identity import LISTENER_KEYS
from migrate.plan.checks.registry import (
    Check,
    CheckSpec,
    Evidence,
    Severity,
    check,
    evidence_at,
    fail_check,
    no_configs,
    not_checked,
    pass_check,
)
from migrate.plan.controller_listener import bridge_listener, listener_security, mismatches, scram_users
from migrate.plan.inputs import (
    ACL_AUTHORIZER,
    STANDARD_AUTHORIZER,
    BrokerConfig,
    PlanInputs,
    parse_listeners,
    parse_protocol_map,
)
from migrate.plan.inter_broker import bridge_inter_broker, broker_inter_broker


@check(
    CheckSpec(
        "controller-quorum",
        "Target controller quorum",
        "--controllers names an odd number (3 or 5) of distinct controllers.",
    ),
)
def check_controller_quorum(inputs: PlanInputs) -> list[Check]:
    ctrls = inputs.controllers
    if not ctrls:
        return [
            fail_check(
                "controller-quorum",
                "warning",
                [evidence_at("--controllers", "not given: controller configs use placeholders 3000@controller-1:9093 ...")],
                "Give the target quorum: --controllers 3000@ctrl1:9093,3001@ctrl2:9093,3002@ctrl3:9093.",
            )
        ]
    evidence: list[Evidence] = []
    severity: Severity = "warning"
    # Two controllers of one id are refused when --controllers is read (voter_set); two of one address remain.
    addresses = [c.endpoint for c in ctrls]
    for address in sorted({a for a in addresses if addresses.count(a) > 1}):
        evidence.append(evidence_at("--controllers", f"{address} appears more than once"))
        severity = "blocker"
    if severity != "blocker" and (len(ctrls) < 3 or len(ctrls) % 2 == 0):
        evidence.append(
            evidence_at("--controllers", f"{len(ctrls)} controllers: a quorum of 3 or 5 survives 1 or 2 failures")
        )
    if evidence:
        return [fail_check("controller-quorum", severity, evidence, "Use 3 (or 5) controllers with distinct ids and addresses.")]
    return [pass_check("controller-quorum", ", ".join(c.entry for c in ctrls), "--controllers")]


def assigned_broker_ids(inputs: PlanInputs) -> set[int]:
    ids: set[int] = set()
    for topic in inputs.model.topics.values():
        for replicas in topic.partitions.values():
            ids.update(replicas)
        for replicas in topic.adding_replicas.values():
            ids.update(replicas)
    return ids


@check(
    CheckSpec(
        "controller-id-collision",
        "Controller ids differ from broker ids",
        "Brokers and controllers share one node-id space: a controller id must not be any broker's id.",
    ),
)
def check_controller_ids(inputs: PlanInputs) -> list[Check]:
    if not inputs.controllers:
        return [not_checked("controller-id-collision", "no --controllers given")]
    evidence: list[Evidence] = []
    configured = {b.broker_id: b for b in inputs.brokers if b.broker_id is not None}
    assigned = assigned_broker_ids(inputs)
    for c in inputs.controllers:
        if c.node_id in inputs.model.brokers:
            evidence.append(evidence_at(f"/brokers/ids/{c.node_id}", f"controller {c.node_id} has a registered broker's id"))
        if c.node_id in configured:
            b = configured[c.node_id]
            evidence.append(evidence_at(b.file.where("broker.id"), f"controller {c.node_id} has this broker's broker.id"))
        if c.node_id in assigned and c.node_id not in inputs.model.brokers:
            evidence.append(evidence_at("/brokers/topics", f"controller {c.node_id} is a broker id in replica assignments"))
    if evidence:
        return [
            fail_check(
                "controller-id-collision",
                "blocker",
                evidence,
                "Pick controller node ids no broker uses (Kafka's example uses 3000+).",
            )
        ]
    return [pass_check("controller-id-collision")]


@check(
    CheckSpec(
        "controller-listener",
        "Controller listener and listener maps",
        "No broker listener may use the controller listener name (mapping it ahead, as Kafka's guide does, is "
        "fine if the protocol is the controller's) and every listener must map to a security protocol.",
    ),
    CheckSpec(
        "control-plane-listener",
        "control.plane.listener.name",
        "Not supported by KRaft brokers; removed when brokers move to KRaft.",
    ),
)
def check_listeners(inputs: PlanInputs) -> list[Check]:
    if not inputs.brokers:
        return no_configs("controller-listener") + no_configs("control-plane-listener")
    name = inputs.controller_listener
    evidence: list[Evidence] = []
    for b in inputs.brokers:
        f = b.file
        raw_map = f.get("listener.security.protocol.map")
        mapping = dict(b.protocol_map())
        if raw_map is not None:
            try:
                mapping = parse_protocol_map(raw_map)
            except ValueError as e:
                evidence.append(evidence_at(f.where("listener.security.protocol.map"), str(e)))
        if raw_map is not None and name in mapping and mapping[name] != inputs.controller_protocol:
            # Mapping the name ahead (as Kafka's migration guide shows) is fine; to another protocol it is not.
            evidence.append(
                evidence_at(
                    f.where("listener.security.protocol.map"),
                    f"maps {name}:{mapping[name]} but the controller listener uses {inputs.controller_protocol} "
                    f"(--controller-protocol)",
                )
            )
        for key in LISTENER_KEYS:
            raw = f.get(key)
            if raw is None:
                continue
            try:
                listeners = parse_listeners(raw)
            except ValueError:
                continue  # reported by config-value
            for listener in listeners:
                if listener.name == name:
                    evidence.append(evidence_at(f.where(key), f"{key} already has a listener named {name}"))
                elif listener.name not in mapping:
                    evidence.append(evidence_at(f.where(key), f"listener {listener.name} has no security protocol in the map"))
        existing = f.get("controller.listener.names")
        if existing is not None and existing.strip().upper() != name:
            evidence.append(evidence_at(f.where("controller.listener.names"), f"controller.listener.names={existing} (plan uses {name})"))
        ibl = b.inter_broker_listener()
        if ibl not in mapping:
            evidence.append(evidence_at(f.path, f"inter-broker listener {ibl} has no security protocol in the map"))
    out: list[Check] = []
    if evidence:
        out.append(
            fail_check(
                "controller-listener",
                "blocker",
                evidence,
                f"Map every listener in listener.security.protocol.map, map {name} (if at all) to the controller "
                f"listener's protocol and keep {name} out of listeners (or choose another with --controller-listener).",
            )
        )
    else:
        out.append(pass_check("controller-listener", f"{name} is no broker listener; every listener is mapped"))
    cp = [
        evidence_at(b.file.where("control.plane.listener.name"), f"control.plane.listener.name={b.file.get('control.plane.listener.name')}")
        for b in inputs.brokers
        if b.file.get("control.plane.listener.name") is not None
    ]
    if cp:
        out.append(
            fail_check(
                "control-plane-listener",
                "warning",
                cp,
                "Keep it while brokers are in ZooKeeper mode; the 'brokers-to-kraft' configs remove it.",
            )
        )
    else:
        out.append(pass_check("control-plane-listener"))
    return out


@check(
    CheckSpec(
        "inter-broker-listener",
        "Inter-broker listener the controller (bridge) reaches the brokers on",
        "Kafka's inter.broker.listener.name (else the listener named after security.inter.broker.protocol), its "
        "protocol and sasl.mechanism.inter.broker.protocol: the same on every broker, and a SASL mechanism "
        "`zk2kraft bridge run` can log in with (PLAIN, SCRAM); the plan shows the --inter-broker-* options.",
    ),
)
def check_inter_broker_listener(inputs: PlanInputs) -> list[Check]:
    options = bridge_inter_broker(inputs)
    if options is None:
        return no_configs("inter-broker-listener")
    found = [broker_inter_broker(b) for b in inputs.brokers]
    listener = options.listener
    blocking: list[Evidence] = []
    warnings: list[Evidence] = []

    def where(b: BrokerConfig) -> str:
        key = "inter.broker.listener.name" if b.file.get("inter.broker.listener.name") is not None else "security.inter.broker.protocol"
        return b.file.where(key)

    for ib in found:
        if ib.both_set:
            blocking.append(
                evidence_at(
                    ib.broker.file.where("security.inter.broker.protocol"),
                    "both inter.broker.listener.name and security.inter.broker.protocol are set: Kafka refuses to start",
                )
            )
    if len({ib.listener for ib in found}) > 1:
        for ib in found:
            detail = f"inter-broker listener {ib.listener}"
            if ib.listener != listener and ib.listed(listener) is False:
                detail += f"; registers no {listener} listener, so a controller on {listener} cannot reach it"
                blocking.append(evidence_at(where(ib.broker), detail))
            else:
                warnings.append(evidence_at(where(ib.broker), detail))
    mechanisms = {ib.mechanism for ib in found if ib.listener == listener and ib.mechanism is not None}
    if len(mechanisms) > 1:
        warnings += [
            evidence_at(ib.broker.file.where("sasl.mechanism.inter.broker.protocol"), f"SASL mechanism {ib.mechanism}")
            for ib in found
            if ib.mechanism is not None
        ]
    if not options.supported:
        warnings.append(
            evidence_at(
                found[0].broker.file.where("sasl.mechanism.inter.broker.protocol"),
                f"{listener} ({', '.join(options.security_protocols)}) logs in with SASL {options.sasl_mechanism}, "
                "which zk2kraft bridge run cannot (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 only)",
            )
        )
    if blocking:
        return [
            fail_check(
                "inter-broker-listener",
                "blocker",
                blocking + warnings,
                f"Give every broker the same inter-broker listener ({listener}, or register it on every broker) and "
                "set only one of inter.broker.listener.name and security.inter.broker.protocol.",
            )
        ]
    if warnings:
        fix = []
        if len({ib.listener for ib in found}) > 1 or len(mechanisms) > 1:
            fix.append(
                f"Use one inter-broker listener and mechanism on every broker: the controller uses {listener}"
                + (f" with {options.sasl_mechanism}" if options.sasl_mechanism else "")
                + " for all of them."
            )
        if not options.supported:
            fix.append(
                f"The zk2kraft bridge cannot be this cluster's controller while the brokers use "
                f"{options.sasl_mechanism}: use Kafka 3.9's controllers, or move inter-broker traffic to a listener "
                "with SASL PLAIN or SCRAM first."
            )
        return [fail_check("inter-broker-listener", "warning", warnings, " ".join(fix))]
    protocols = ", ".join(options.security_protocols) or "protocol unknown"
    return [pass_check("inter-broker-listener", f"{listener} ({protocols}): bridge run {options.command_text()}", "-")]


@check(
    CheckSpec(
        "controller-listener-security",
        "Controller listener security the bridge can serve alike",
        "The controller listener's SASL mechanisms (listener.name.<l>.sasl.enabled.mechanisms, else "
        "sasl.enabled.mechanisms; the brokers' sasl.mechanism.controller.protocol, default GSSAPI), "
        "principal.builder.class and authorizer.class.name: `zk2kraft bridge run` serves PLAIN and SCRAM with "
        "Kafka's default principals and StandardAuthorizer's ACLs; the plan shows the matching options.",
    ),
)
def check_controller_listener_security(inputs: PlanInputs) -> list[Check]:
    options = bridge_listener(inputs)
    if options is None:
        return no_configs("controller-listener-security")
    users = scram_users(inputs)
    found = [listener_security(b, inputs.controller_listener, inputs.controller_protocol) for b in inputs.brokers]
    evidence = [evidence_at(m.where, m.detail) for f in found for m in mismatches(f, users)]
    settings = {(f.enabled_mechanisms, f.client_mechanism, f.authorizer, f.super_users) for f in found if f.uses_sasl or f.authorizer}
    if len(settings) > 1:
        evidence.append(evidence_at("-", "brokers differ in the controller listener's SASL mechanisms, login or authorizer; "
                                    f"the plan follows {found[0].broker.file.path}"))  # fmt: skip
    if evidence:
        fix = (
            "Kafka 3.9's controllers can serve these settings: use them instead of the bridge, or give the brokers "
            "a controller login with PLAIN or SCRAM, Kafka's default principal builder and its ACL authorizer first."
            if not options.supported
            else "The bridge serves the brokers; clients relying on what is listed are refused by it."
        )
        return [fail_check("controller-listener-security", "warning", evidence, fix)]
    detail = f"{options.listener} ({options.security_protocol}): bridge run {options.command_text()}"
    return [pass_check("controller-listener-security", detail, "-")]


@check(
    CheckSpec(
        "authorizer",
        "Authorizer class",
        "AclAuthorizer works on ZK brokers and is replaced by StandardAuthorizer on KRaft brokers.",
    ),
)
def check_authorizer(inputs: PlanInputs) -> list[Check]:
    if not inputs.brokers:
        return no_configs("authorizer")
    blockers_found: list[Evidence] = []
    warnings: list[Evidence] = []
    classes: set[str] = set()
    for b in inputs.brokers:
        raw = b.file.get("authorizer.class.name")
        value = (raw or "").strip()
        classes.add(value)
        where = b.file.where("authorizer.class.name")
        if not value:
            continue
        if value == ACL_AUTHORIZER:
            warnings.append(evidence_at(where, f"{ACL_AUTHORIZER}: switched to {STANDARD_AUTHORIZER} in 'brokers-to-kraft'"))
        elif value == "kafka.security.auth.SimpleAclAuthorizer":
            blockers_found.append(evidence_at(where, "SimpleAclAuthorizer was removed in Kafka 3.0"))
        elif value == STANDARD_AUTHORIZER:
            blockers_found.append(evidence_at(where, "StandardAuthorizer only works on KRaft nodes, not on a ZK broker"))
        else:
            warnings.append(evidence_at(where, f"custom authorizer {value}: it must work on KRaft brokers and controllers"))
    if len(classes) > 1:
        warnings.append(evidence_at("-", f"brokers use different authorizers: {sorted(c or '(none)' for c in classes)}"))
    if not any(classes) and inputs.model.acls:
        warnings.append(evidence_at("/kafka-acl", f"{len(inputs.model.acls)} ACL resources exist but no broker sets an authorizer"))
    if blockers_found:
        return [fail_check("authorizer", "blocker", blockers_found + warnings, "Use kafka.security.authorizer.AclAuthorizer on ZK brokers.")]
    if warnings:
        return [
            fail_check(
                "authorizer",
                "warning",
                warnings,
                "ACLs are migrated; KRaft brokers and controllers need StandardAuthorizer (the generated "
                "configs set it where AclAuthorizer was used).",
            )
        ]
    return [pass_check("authorizer")]


@check(
    CheckSpec(
        "jbod",
        "Several log directories (JBOD)",
        "JBOD brokers need IBP >= 3.7-IV2 to migrate; JBOD in KRaft is early access (KAFKA-16431).",
    ),
)
def check_jbod(inputs: PlanInputs) -> list[Check]:
    if not inputs.brokers:
        return no_configs("jbod")
    blockers_found: list[Evidence] = []
    warnings: list[Evidence] = []
    for b in inputs.brokers:
        dirs = b.log_dirs()
        if len(dirs) < 2:
            continue
        key = "log.dirs" if b.file.get("log.dirs") is not None else "log.dir"
        raw = b.file.get("inter.broker.protocol.version")
        try:
            mv = mvs.parse(raw, allow_unstable=True) if raw else None
        except UnsupportedVersionError:
            mv = None
        where = b.file.where(key)
        if mv is not None and mv < mvs.IBP_3_7_IV2:
            blockers_found.append(evidence_at(where, f"{len(dirs)} log dirs with IBP {mv.name} < 3.7-IV2"))
        else:
            warnings.append(evidence_at(where, f"{len(dirs)} log dirs: JBOD in KRaft is early access"))
    if blockers_found:
        return [fail_check("jbod", "blocker", blockers_found + warnings, "Raise IBP to 3.9 first (the 'prepare' phase).")]
    if warnings:
        return [
            fail_check(
                "jbod",
                "warning",
                warnings,
                "During the migration any log-dir failure shuts the broker down (KAFKA-16431); repair failed "
                "dirs first and consider moving to one dir per broker.",
            )
        ]
    return [pass_check("jbod")]
