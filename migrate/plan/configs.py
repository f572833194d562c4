"""Per-node `.properties` for each phase, as Kafka 3.9's migration documentation gives them.

Broker files are the operator's own `server.properties` edited in place (comments kept, removed keys
commented out, new keys appended), so each phase's diff shows exactly what that rolling restart changes.
Controller files are written fresh.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Literal

from migrate.kraft.quorum_voters import QuorumVoter, render_quorum_voters
from migrate.plan.inputs import (
    ACL_AUTHORIZER,
    STANDARD_AUTHORIZER,
    BrokerConfig,
    PlanInputs,
    format_protocol_map,
    parse_listeners,
)
from migrate.plan.properties import PropertiesFile, edit_properties, parse_properties_text, render_properties
from migrate.zk.sources import split_connect_string

Role = Literal["broker", "controller"]
MIGRATION_FLAG = "zookeeper.metadata.migration.enable"
PLACEHOLDER_BASE_ID = 3000


@dataclass(slots=True)
class NodeFile:
    """One generated file: the node, its full text, its parsed values and the diff from its previous file."""

    node: str
    role: Role
    node_id: int | None
    text: str
    previous_text: str = ""
    previous_name: str = ""
    values: dict[str, str] = field(default_factory=dict)

    def diff(self, name: str) -> str:
        """Unified diff from the previous phase's file (empty for a file that is new in this phase)."""
        if not self.previous_name:
            return ""
        return "".join(
            difflib.unified_diff(
                self.previous_text.splitlines(keepends=True),
                self.text.splitlines(keepends=True),
                fromfile=self.previous_name,
                tofile=name,
            )
        )


def target_controllers(inputs: PlanInputs) -> list[QuorumVoter]:
    """The controllers given, or three placeholders (3000@controller-1:9093, ...) when none were."""
    if inputs.controllers:
        return inputs.controllers
    return [QuorumVoter(PLACEHOLDER_BASE_ID + i, f"controller-{i + 1}", 9093) for i in range(3)]


def quorum_settings(inputs: PlanInputs) -> dict[str, str]:
    """`controller.quorum.bootstrap.servers` (dynamic quorum, Kafka 3.9's default) or `controller.quorum.voters`."""
    ctrls = target_controllers(inputs)
    if inputs.quorum == "static":
        return {"controller.quorum.voters": render_quorum_voters(ctrls)}
    return {"controller.quorum.bootstrap.servers": ",".join(c.endpoint for c in ctrls)}


def _zk_client_configs(broker: BrokerConfig | None) -> dict[str, str]:
    """The brokers' ZooKeeper client settings (connect string first), minus the migration keys."""
    if broker is None:
        return {}
    out = {k: v for k, v in broker.file.values.items() if k.startswith("zookeeper.") and not k.startswith("zookeeper.metadata.migration.")}
    if "zookeeper.connect" in out:
        out = {"zookeeper.connect": out.pop("zookeeper.connect"), **out}
    return out


def _zookeeper_connect(inputs: PlanInputs) -> str:
    ref = inputs.brokers[0] if inputs.brokers else None
    if ref is not None and ref.file.get("zookeeper.connect"):
        return ref.file.values["zookeeper.connect"]
    if inputs.zk_connect:
        hosts, chroot = split_connect_string(inputs.zk_connect)
        return hosts + ("" if chroot == "/" else chroot)
    suffix = "" if inputs.zk_chroot == "/" else inputs.zk_chroot
    return "zookeeper-1:2181" + suffix


def controller_migration_file(inputs: PlanInputs, ctrl: QuorumVoter) -> NodeFile:
    """Phase 'provision-controllers': a KRaft controller ready for the migration (Kafka's sample + cluster specifics)."""
    ref = inputs.brokers[0] if inputs.brokers else None
    name = inputs.controller_listener
    entries: list[tuple[str, str]] = [("process.roles", "controller"), ("node.id", str(ctrl.node_id))]
    entries += list(quorum_settings(inputs).items())
    # Bind on every interface like Kafka's sample; the quorum reaches it at host:port.
    entries += [("controller.listener.names", name), ("listeners", f"{name}://:{ctrl.port}")]
    ibl = ref.inter_broker_listener() if ref is not None else "PLAINTEXT"
    if ref is not None and (ref.file.get("listener.security.protocol.map") is not None or inputs.controller_protocol != "PLAINTEXT"):
        # The controller reaches brokers on their inter-broker listener: it needs that listener's protocol.
        mapping = {name: inputs.controller_protocol, **{k: v for k, v in ref.protocol_map().items() if k != name}}
        entries.append(("listener.security.protocol.map", format_protocol_map(mapping)))
    if inputs.controller_log_dir:
        entries.append(("log.dirs", inputs.controller_log_dir))
    entries.append((MIGRATION_FLAG, "true"))
    zk = _zk_client_configs(ref) or {"zookeeper.connect": _zookeeper_connect(inputs)}
    entries += list(zk.items())
    entries.append(("inter.broker.listener.name", ibl))
    if ref is not None:
        entries += sorted((k, v) for k, v in ref.file.values.items() if k.startswith("password.encoder."))
        for key in ("delegation.token.secret.key", "delegation.token.master.key"):
            if ref.file.get(key) is not None:
                entries.append((key, ref.file.values[key]))
    header = [
        f"KRaft controller {ctrl.node_id}, ready for the ZooKeeper migration (generated by zk2kraft plan).",
        "Format with the cluster id from /cluster/id before the first start.",
    ]
    text = render_properties(entries, header)
    return NodeFile(f"controller-{ctrl.node_id}", "controller", ctrl.node_id, text, values=dict(entries))


def controller_final_file(inputs: PlanInputs, previous: NodeFile, previous_name: str) -> NodeFile:
    """Phase 'finalize': the controller without the migration flag and ZooKeeper settings."""
    prev = parse_properties_text(previous.text, previous_name)
    remove = {k for k in prev.values if k.startswith("zookeeper.")} | {"inter.broker.listener.name"}
    text = edit_properties(prev, set_values={}, remove=remove, note="finalize")
    return _node(previous.node, "controller", previous.node_id, text, previous.text, previous_name)


def broker_prepare_file(inputs: PlanInputs, broker: BrokerConfig) -> NodeFile | None:
    """Phase 'prepare': the original file with `inter.broker.protocol.version` set to the target; None if already so."""
    if (broker.file.get("inter.broker.protocol.version") or "").strip() == inputs.target_ibp:
        return None
    text = edit_properties(
        broker.file,
        set_values={"inter.broker.protocol.version": inputs.target_ibp},
        remove=set(),
        note="zk2kraft prepare",
    )
    return _node(broker.name, "broker", broker.label_id, text, broker.file.text, broker.file.path)


def broker_migration_file(inputs: PlanInputs, broker: BrokerConfig, base: PropertiesFile, base_name: str) -> NodeFile:
    """Phase 'brokers-migration-mode': a ZK broker that registers with the KRaft controllers."""
    name = inputs.controller_listener
    mapping = {**{k: v for k, v in _used_protocol_map(broker).items() if k != name}, name: inputs.controller_protocol}
    values = {
        "inter.broker.protocol.version": inputs.target_ibp,
        MIGRATION_FLAG: "true",
        **quorum_settings(inputs),
        "controller.listener.names": name,
        "listener.security.protocol.map": format_protocol_map(mapping),
    }
    text = edit_properties(base, set_values=values, remove=set(), note="zk2kraft migration mode")
    return _node(broker.name, "broker", broker.label_id, text, base.text, base_name)


def _used_protocol_map(broker: BrokerConfig) -> dict[str, str]:
    """The broker's explicit map, or (when it relies on the default) the default entries its listeners use."""
    full = broker.protocol_map()
    if broker.file.get("listener.security.protocol.map") is not None:
        return full
    used: list[str] = []
    for key in ("listeners", "advertised.listeners"):
        try:
            used += [listener.name for listener in parse_listeners(broker.file.get(key) or "")]
        except ValueError:
            return full
    used.append(broker.inter_broker_listener())
    kept = {name: full[name] for name in dict.fromkeys(used) if name in full}
    return kept or full


def broker_kraft_file(inputs: PlanInputs, broker: BrokerConfig, base: PropertiesFile, base_name: str) -> NodeFile:
    """Phase 'brokers-to-kraft': broker.id becomes node.id, process.roles=broker, ZooKeeper settings go."""
    remove = {k for k in base.values if k.startswith("zookeeper.")}
    remove |= {"inter.broker.protocol.version", "control.plane.listener.name", "broker.id.generation.enable"}
    values = {"process.roles": "broker"}
    if (base.get("authorizer.class.name") or "").strip() == ACL_AUTHORIZER:
        values["authorizer.class.name"] = STANDARD_AUTHORIZER
    text = edit_properties(base, set_values=values, remove=remove, rename={"broker.id": "node.id"}, note="zk2kraft KRaft mode")
    return _node(broker.name, "broker", broker.label_id, text, base.text, base_name)


def _node(node: str, role: Role, node_id: int | None, text: str, previous: str, previous_name: str) -> NodeFile:
    values = parse_properties_text(text, node).values
    return NodeFile(node, role, node_id, text, previous, previous_name, values)
