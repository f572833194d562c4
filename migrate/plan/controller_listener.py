"""The controller listener's security as the brokers configure it, and the `zk2kraft bridge run` options that match it.

Kafka's counterpart: KafkaConfig's controller.listener.names and listener.security.protocol.map, the listener's
SASL server side (ChannelBuilders with JaasContext.loadServerContext: `sasl.enabled.mechanisms` under the listener
prefix, the `listener.name.<l>.<mechanism>.sasl.jaas.config` login), the brokers' client side of it
(RaftManager and NodeToControllerChannelManager: `sasl.mechanism.controller.protocol` and the same login),
principal.builder.class, ssl.principal.mapping.rules, and authorizer.class.name with super.users and
allow.everyone.if.no.acl.found.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from migrate.plan.inputs import (
    ACL_AUTHORIZER,
    DEFAULT_CONTROLLER_LISTENER,
    STANDARD_AUTHORIZER,
    BrokerConfig,
    PlanInputs,
    java_bool,
)
from migrate.plan.inter_broker import BRIDGE_SASL_MECHANISMS, DEFAULT_SASL_MECHANISM, listener_value
from migrate.plan.properties import jaas_options
from migrate.zk.model import SCRAM_MECHANISMS
from migrate.zk.paths import sanitize

SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
DEFAULT_PRINCIPAL_BUILDER = "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"
DEFAULT_MAPPING_RULES = "DEFAULT"
# Placeholders the operator replaces: paths and the login name, never a secret.
PLAIN_USERS_PLACEHOLDER = "<PLAIN_USERS_FILE>"
CONTROLLER_USERNAME_PLACEHOLDER = "<CONTROLLER_SASL_USERNAME>"
CONTROLLER_PASSWORD_FILE_PLACEHOLDER = "<CONTROLLER_SASL_PASSWORD_FILE>"
def _comma_list(value: str) -> list[str]:
    return [m.strip() for m in value.split(",") if m.strip()]


def resolve_controller_listener(
    brokers: Sequence[BrokerConfig], listener: str | None, protocol: str | None
) -> tuple[str, str]:
    """The controller listener's name and protocol: as given, else as the brokers name it (the first of
    `controller.listener.names`) and map it (their explicit `listener.security.protocol.map`), else CONTROLLER and
    PLAINTEXT."""
    named = (_comma_list(b.file.get("controller.listener.names") or "") for b in brokers)
    name = listener.upper() if listener else next((n[0].upper() for n in named if n), DEFAULT_CONTROLLER_LISTENER)
    if protocol is None:
        mapped = (b.protocol_map() for b in brokers if b.file.get("listener.security.protocol.map") is not None)
        protocol = next((m[name] for m in mapped if name in m), "PLAINTEXT")
    return name, protocol


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    """One broker's settings of the controller listener as Kafka 3.9 resolves them (server and client side)."""

    broker: BrokerConfig
    listener: str
    protocol: str
    enabled_mechanisms: tuple[str, ...]  # the listener's sasl.enabled.mechanisms (Kafka's default: GSSAPI)
    enabled_from: str  # the key they came from, "" for Kafka's default
    client_mechanism: str  # sasl.mechanism.controller.protocol (Kafka's default: GSSAPI)
    principal_builder: str
    mapping_rules: str
    authorizer: str  # authorizer.class.name, "" for none
    super_users: str
    allow_everyone: bool

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS

    def jaas_key(self, mechanism: str) -> str:
        return f"listener.name.{self.listener.lower()}.{mechanism.lower()}.sasl.jaas.config"

    def jaas(self, mechanism: str) -> str | None:
        """The listener's login for `mechanism`; Kafka ignores a bare `sasl.jaas.config` for a listener (it warns)."""
        return self.broker.file.get(self.jaas_key(mechanism))


def listener_security(broker: BrokerConfig, listener: str, protocol: str) -> ListenerSecurity:
    """Kafka's resolution: the `listener.name.<listener>.` key first, then the bare one, then Kafka's default."""
    f = broker.file
    enabled, enabled_from = listener_value(broker, listener, "sasl.enabled.mechanisms")
    mechanisms = tuple(_comma_list(enabled)) if enabled is not None else (DEFAULT_SASL_MECHANISM,)
    builder, _key = listener_value(broker, listener, "principal.builder.class")
    rules, _key = listener_value(broker, listener, "ssl.principal.mapping.rules")
    return ListenerSecurity(
        broker=broker,
        listener=listener,
        protocol=protocol,
        enabled_mechanisms=mechanisms,
        enabled_from=enabled_from if enabled is not None else "",
        client_mechanism=(f.get("sasl.mechanism.controller.protocol") or DEFAULT_SASL_MECHANISM).strip(),
        principal_builder=(builder or DEFAULT_PRINCIPAL_BUILDER).strip(),
        mapping_rules=(rules or DEFAULT_MAPPING_RULES).strip(),
        authorizer=(f.get("authorizer.class.name") or "").strip(),
        super_users=(f.get("super.users") or "").strip(),
        allow_everyone=java_bool(f.get("allow.everyone.if.no.acl.found")) is True,
    )


@dataclass(frozen=True, slots=True)
class Mismatch:
    """Something of the brokers' controller listener the bridge cannot serve alike: where it is set, and what."""

    where: str
    detail: str
    blocks_bridge: bool  # True: a bridge would not serve the brokers as their controllers do (no bridge line)


def mismatches(found: ListenerSecurity, scram_users: dict[str, set[str]] | None = None) -> list[Mismatch]:
    """What the bridge's listener and authorizer cannot match of one broker's settings (`scram_users`: the SCRAM
    mechanisms each user has in ZooKeeper, to tell a login the bridge's image would refuse)."""
    f = found.broker.file
    out: list[Mismatch] = []
    if found.uses_sasl:
        client = found.client_mechanism
        where = f.where("sasl.mechanism.controller.protocol") if f.get("sasl.mechanism.controller.protocol") else f.path
        default = " (Kafka's default)" if f.get("sasl.mechanism.controller.protocol") is None else ""
        if client not in BRIDGE_SASL_MECHANISMS:
            out.append(Mismatch(where, f"the brokers log in to the controller listener {found.listener} with SASL "
                                f"{client}{default} (sasl.mechanism.controller.protocol); the bridge's listener "
                                f"offers only {', '.join(BRIDGE_SASL_MECHANISMS)}", True))  # fmt: skip
        elif client not in found.enabled_mechanisms:
            out.append(Mismatch(where, f"sasl.mechanism.controller.protocol={client} is not among the listener's "
                                f"enabled mechanisms {', '.join(found.enabled_mechanisms)}: Kafka's controller "
                                "refuses that login too", True))  # fmt: skip
        unsupported = [m for m in found.enabled_mechanisms if m not in BRIDGE_SASL_MECHANISMS]
        if unsupported and client in BRIDGE_SASL_MECHANISMS:
            enabled_where = f.where(found.enabled_from) if found.enabled_from else f.path
            out.append(Mismatch(enabled_where, f"the listener also enables {', '.join(unsupported)}, which the "
                                "bridge's listener does not offer: clients logging in with it (not the brokers) "
                                "are refused", False))  # fmt: skip
        if client in BRIDGE_SASL_MECHANISMS and found.jaas(client) is None:
            out.append(Mismatch(f.path, f"no {found.jaas_key(client)}: the login comes from a JAAS file "
                                "(KafkaServer section), which the plan cannot read; fill the placeholders from it",
                                False))  # fmt: skip
        username = jaas_options(found.jaas(client) or "").get("username")
        if client in SCRAM_MECHANISMS and username and scram_users is not None and client not in scram_users.get(username, set()):
            out.append(Mismatch(f.where(found.jaas_key(client)), f"user {username} has no {client} credential in "
                                f"ZooKeeper (/config/users/{sanitize(username)}): the bridge checks SCRAM logins "
                                "against the migrated credentials, so it would refuse the brokers", True))  # fmt: skip
    if found.principal_builder != DEFAULT_PRINCIPAL_BUILDER:
        # Principals matter to the bridge only through ACLs: without an authorizer, a warning alone.
        effect = "so its ACL decisions would differ" if found.authorizer else "(no authorizer uses them here)"
        out.append(Mismatch(f.where("principal.builder.class"), f"custom principal.builder.class "
                            f"{found.principal_builder}: the bridge builds Kafka's default principals, {effect}",
                            bool(found.authorizer)))  # fmt: skip
    if found.authorizer and found.authorizer not in (ACL_AUTHORIZER, STANDARD_AUTHORIZER):
        out.append(Mismatch(f.where("authorizer.class.name"), f"custom authorizer {found.authorizer}: the bridge "
                            "enforces only Kafka's ACLs (StandardAuthorizer)", True))  # fmt: skip
    return out


class BridgeListener(BaseModel):
    """The `bridge run` options of the controller listener's security and authorizer (plan.json `bridge_listener`)."""

    model_config = ConfigDict(extra="forbid")

    listener: str = Field(description="the controller listener (the bridge's --listen)")
    security_protocol: str = Field(description="its security protocol")
    sasl_mechanisms: list[str] = Field(default_factory=list, description="the listener's enabled SASL mechanisms")
    controller_sasl_mechanism: str | None = Field(None, description="sasl.mechanism.controller.protocol (SASL only)")
    authorizer: str | None = Field(None, description="the brokers' authorizer.class.name")
    supported: bool = Field(description="false: a bridge would not serve the listener as the brokers' controller does")
    options: list[str] = Field(default_factory=list, description="bridge run arguments, placeholders <...> for paths")
    notes: list[str] = Field(default_factory=list, description="why each option is there, what replaces a placeholder")

    def command_text(self) -> str:
        return shlex.join(self.options) if self.options else "(no listener security option needed)"


def scram_users(inputs: PlanInputs) -> dict[str, set[str]]:
    """The SCRAM mechanisms each user has in ZooKeeper's /config/users (what the bridge's image will hold)."""
    out: dict[str, set[str]] = {}
    for entity in inputs.model.client_quotas.values():
        user = entity.entity.get("user")
        if user and entity.scram and set(entity.entity) == {"user"}:
            out[user] = set(entity.scram)
    return out


def reference_security(inputs: PlanInputs) -> ListenerSecurity | None:
    """The first broker's settings of the plan's controller listener (the broker the controller files follow)."""
    if not inputs.brokers:
        return None
    return listener_security(inputs.brokers[0], inputs.controller_listener, inputs.controller_protocol)


def bridge_listener(inputs: PlanInputs) -> BridgeListener | None:
    """The listener options for the first broker's settings; None without broker configs."""
    found = reference_security(inputs)
    if found is None:
        return None
    problems = [m for m in mismatches(found, scram_users(inputs)) if m.blocks_bridge]
    options: list[str] = []
    notes: list[str] = []
    listener = found.listener
    if found.uses_sasl and not problems:
        served = [m for m in found.enabled_mechanisms if m in BRIDGE_SASL_MECHANISMS]
        options += ["--listen-sasl-mechanisms", ",".join(served)]
        notes.append(f"--listen-sasl-mechanisms: the listener's sasl.enabled.mechanisms ({found.enabled_from or 'Kafka default'}) "
                     f"the bridge offers; with --listen-ssl-cert the listener is SASL_SSL, else SASL_PLAINTEXT.")  # fmt: skip
        if "PLAIN" in served:
            options += ["--listen-plain-users", PLAIN_USERS_PLACEHOLDER]
            users = [k.removeprefix("user_") for k in jaas_options(found.jaas("PLAIN") or "") if k.startswith("user_")]
            notes.append(f"{PLAIN_USERS_PLACEHOLDER}: a file you write, one `user=password` line per PLAIN user of "
                         f"{found.jaas_key('PLAIN')} (its user_<name> entries"
                         + (f": {', '.join(users)}" if users else "") + "); keep it readable by the bridge only.")  # fmt: skip
        if any(m in SCRAM_MECHANISMS for m in served):
            notes.append("SCRAM logins are checked against ZooKeeper's /config/users until the migration has copied "
                         "them, then against the log's, as a KRaft controller checks its metadata's.")  # fmt: skip
        username = jaas_options(found.jaas(found.client_mechanism) or "").get("username")
        options += [
            "--controller-sasl-mechanism", found.client_mechanism,
            "--controller-sasl-username", username or CONTROLLER_USERNAME_PLACEHOLDER,
            "--controller-sasl-password-file", CONTROLLER_PASSWORD_FILE_PLACEHOLDER,
        ]  # fmt: skip
        notes.append(
            f"--controller-sasl-*: the login the voters use with each other, as the brokers' "
            f"sasl.mechanism.controller.protocol and {found.jaas_key(found.client_mechanism)} give it"
            + ("" if username else f" ({CONTROLLER_USERNAME_PLACEHOLDER}: its username)")
            + f"; {CONTROLLER_PASSWORD_FILE_PLACEHOLDER}: a file holding only its password."
        )
    if found.protocol in TLS_PROTOCOLS and found.mapping_rules != DEFAULT_MAPPING_RULES and not problems:
        options += ["--listen-ssl-principal-mapping-rules", found.mapping_rules]
        notes.append("--listen-ssl-principal-mapping-rules: the brokers' ssl.principal.mapping.rules, so certificate "
                     "principals are the ones their ACLs name.")  # fmt: skip
    if found.authorizer in (ACL_AUTHORIZER, STANDARD_AUTHORIZER) and not problems:
        options += ["--authorizer", "standard"]
        if found.super_users:
            options += ["--super-users", found.super_users]
        if found.allow_everyone:
            options.append("--allow-everyone-if-no-acl-found")
        notes.append(f"--authorizer standard: the brokers run {found.authorizer}; the bridge enforces the same ACLs "
                     "(migrated from ZooKeeper) with super.users"
                     + (" and allow.everyone.if.no.acl.found" if found.allow_everyone else "") + " carried over.")  # fmt: skip
    notes += [f"{m.detail}." for m in problems]
    return BridgeListener(
        listener=listener,
        security_protocol=found.protocol,
        sasl_mechanisms=list(found.enabled_mechanisms) if found.uses_sasl else [],
        controller_sasl_mechanism=found.client_mechanism if found.uses_sasl else None,
        authorizer=found.authorizer or None,
        supported=not problems,
        options=options,
        notes=notes,
    )


def controller_listener_sasl_configs(inputs: PlanInputs) -> list[tuple[str, str]]:
    """The controller listener's SASL settings as the first broker sets them (server and client side), for the
    Kafka controllers' files; secrets (JAAS logins) included, as Kafka needs them. None unless the listener is SASL."""
    found = reference_security(inputs)
    if found is None or not found.uses_sasl:
        return []
    prefix = f"listener.name.{found.listener.lower()}."
    entries = [(f"{prefix}sasl.enabled.mechanisms", ",".join(found.enabled_mechanisms)),
               ("sasl.mechanism.controller.protocol", found.client_mechanism)]  # fmt: skip
    taken = {k for k, _v in entries}
    for mechanism in dict.fromkeys([*found.enabled_mechanisms, found.client_mechanism]):
        key = found.jaas_key(mechanism)
        if key not in taken and (value := found.jaas(mechanism)) is not None:
            entries.append((key, value))
            taken.add(key)
    # The listener's other SASL settings (callback handlers, Kerberos service name, ...) as the brokers give them.
    entries += sorted(
        (k, v) for k, v in found.broker.file.values.items()
        if k.startswith(prefix) and ".sasl." in f".{k.removeprefix(prefix)}" and k not in taken
    )  # fmt: skip
    return entries


def controller_authorizer_configs(inputs: PlanInputs) -> list[tuple[str, str]]:
    """StandardAuthorizer with the brokers' super.users and allow.everyone.if.no.acl.found where the brokers run
    Kafka's ACL authorizer (what `bridge run --authorizer standard` enforces); none otherwise."""
    found = reference_security(inputs)
    if found is None or found.authorizer not in (ACL_AUTHORIZER, STANDARD_AUTHORIZER):
        return []
    entries = [("authorizer.class.name", STANDARD_AUTHORIZER)]
    if found.super_users:
        entries.append(("super.users", found.super_users))
    if found.allow_everyone:
        entries.append(("allow.everyone.if.no.acl.found", "true"))
    return entries
