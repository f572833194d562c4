"""The `zk2kraft bridge run --inter-broker-*` options the brokers' inter-broker listener needs, from their configs.

Kafka's counterpart: KafkaConfig's inter-broker listener name, security protocol and SASL mechanism, which a
ZooKeeper-mode controller uses to send LeaderAndIsr, UpdateMetadata and StopReplica (the bridge does the same).
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from migrate.plan.inputs import BrokerConfig, PlanInputs, parse_listeners

DEFAULT_LISTENER = "PLAINTEXT"  # bridge run's --inter-broker-listener-name default
DEFAULT_SASL_MECHANISM = "GSSAPI"  # Kafka's sasl.mechanism.inter.broker.protocol default
BRIDGE_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")  # --inter-broker-sasl-mechanism choices
# bridge run reads the passwords from these (cli/bridge_cmd.py imports them from here).
SASL_PASSWORD_ENV = "ZK2KRAFT_INTER_BROKER_SASL_PASSWORD"
SSL_KEY_PASSWORD_ENV = "ZK2KRAFT_INTER_BROKER_SSL_KEY_PASSWORD"
# Placeholders the operator replaces: paths and the login name, never a secret.
CA_PLACEHOLDER = "<BROKERS_CA_PEM>"
CERT_PLACEHOLDER = "<CLIENT_CERT_PEM>"
KEY_PLACEHOLDER = "<CLIENT_KEY_PEM>"
USERNAME_PLACEHOLDER = "<SASL_USERNAME>"
PASSWORD_FILE_PLACEHOLDER = "<SASL_PASSWORD_FILE>"


def listener_value(broker: BrokerConfig, listener: str, key: str) -> tuple[str | None, str]:
    """`listener.name.<listener>.<key>`, else `<key>` (Kafka's listener override), and the key it came from."""
    prefixed = f"listener.name.{listener.lower()}.{key}"
    value = broker.file.get(prefixed)
    if value is not None:
        return value, prefixed
    return broker.file.get(key), key


@dataclass(frozen=True, slots=True)
class BrokerInterBroker:
    """One broker's inter-broker listener as Kafka derives it, and what a client of it must bring."""

    broker: BrokerConfig
    listener: str
    both_set: bool  # inter.broker.listener.name and security.inter.broker.protocol: Kafka refuses to start
    protocol: str | None  # None: the listener has no entry in listener.security.protocol.map
    mechanism: str | None  # sasl.mechanism.inter.broker.protocol (SASL protocols only)
    client_auth_required: bool
    hostname_check: bool

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def listed(self, name: str) -> bool | None:
        """Whether the broker registers a listener `name` (advertised.listeners, else listeners); None: unparsable."""
        key = "advertised.listeners" if self.broker.file.get("advertised.listeners") is not None else "listeners"
        try:
            return any(entry.name == name for entry in parse_listeners(self.broker.file.get(key) or ""))
        except ValueError:
            return None


def broker_inter_broker(broker: BrokerConfig) -> BrokerInterBroker:
    """Kafka's rules: `inter.broker.listener.name`, else the listener named after `security.inter.broker.protocol`."""
    f = broker.file
    name = broker.inter_broker_listener()
    both = bool((f.get("inter.broker.listener.name") or "").strip()) and f.get("security.inter.broker.protocol") is not None
    protocol = broker.protocol_map().get(name)
    mechanism = None
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        mechanism = (f.get("sasl.mechanism.inter.broker.protocol") or DEFAULT_SASL_MECHANISM).strip()
    client_auth = False
    if protocol == "SSL":
        value, _key = listener_value(broker, name, "ssl.client.auth")
        client_auth = (value or "").strip().lower() == "required"
    elif protocol == "SASL_SSL":
        # SASL_SSL listeners ask for a client certificate only when the listener-prefixed key says so (KIP-684).
        value = f.get(f"listener.name.{name.lower()}.ssl.client.auth")
        client_auth = (value or "").strip().lower() == "required"
    algorithm, _key = listener_value(broker, name, "ssl.endpoint.identification.algorithm")
    hostname_check = algorithm is None or algorithm.strip() != ""
    return BrokerInterBroker(broker, name, both, protocol, mechanism, client_auth, hostname_check)


class BridgeInterBroker(BaseModel):
    """The `bridge run` inter-broker options for these brokers (plan.json `bridge_inter_broker`)."""

    model_config = ConfigDict(extra="forbid")

    listener: str = Field(description="the brokers' inter-broker listener (the bridge's --inter-broker-listener-name)")
    security_protocols: list[str] = Field(description="the listener's security protocol(s) in the brokers' maps")
    sasl_mechanism: str | None = Field(None, description="sasl.mechanism.inter.broker.protocol (SASL protocols)")
    supported: bool = Field(description="false: the bridge cannot reach these brokers (see notes)")
    options: list[str] = Field(description="bridge run arguments, placeholders <...> for paths and the user")
    notes: list[str] = Field(default_factory=list, description="why each option is there, what replaces a placeholder")

    def command_text(self) -> str:
        return " ".join(self.options) if self.options else "(no --inter-broker-* option needed)"


def bridge_inter_broker(inputs: PlanInputs) -> BridgeInterBroker | None:
    """The options for the first broker's inter-broker listener (the one the controller files name); None: no configs."""
    if not inputs.brokers:
        return None
    found = [broker_inter_broker(b) for b in inputs.brokers]
    listener = found[0].listener
    on_it = [b for b in found if b.listener == listener]
    protocols = sorted({b.protocol for b in on_it if b.protocol is not None})
    options: list[str] = []
    notes: list[str] = []
    supported = True
    if listener != DEFAULT_LISTENER:
        options += ["--inter-broker-listener-name", listener]
    unmapped = [b.broker.name for b in on_it if b.protocol is None]
    if unmapped:
        notes.append(f"{listener} has no security protocol in the map of {', '.join(unmapped)} (see controller-listener)")
    if any(b.uses_tls for b in on_it):
        options += ["--inter-broker-ssl-ca", CA_PLACEHOLDER]
        stores = sorted({v for b in on_it if b.uses_tls and (v := listener_value(b.broker, listener, "ssl.truststore.location")[0])})
        notes.append(
            f"{CA_PLACEHOLDER}: the CA certificates (PEM) that sign the brokers' certificates"
            + (f" (what their ssl.truststore.location {', '.join(stores)} holds)" if stores else "")
            + "; leave --inter-broker-ssl-ca out if the system's CAs sign them."
        )
        if any(b.client_auth_required for b in on_it):
            options += ["--inter-broker-ssl-cert", CERT_PLACEHOLDER, "--inter-broker-ssl-key", KEY_PLACEHOLDER]
            notes.append(
                f"{CERT_PLACEHOLDER}, {KEY_PLACEHOLDER}: a client certificate and its key (PEM) the brokers trust, "
                f"since their {listener} listener has ssl.client.auth=required; an encrypted key's password goes in "
                f"env {SSL_KEY_PASSWORD_ENV}."
            )
        if any(not b.hostname_check for b in on_it):
            options.append("--inter-broker-ssl-no-hostname-check")
            notes.append(
                "--inter-broker-ssl-no-hostname-check: the brokers set ssl.endpoint.identification.algorithm empty, "
                "so their certificates need not match their advertised hosts."
            )
    mechanisms = list(dict.fromkeys(b.mechanism for b in on_it if b.mechanism is not None))
    mechanism = mechanisms[0] if mechanisms else None
    if mechanism is not None and mechanism not in BRIDGE_SASL_MECHANISMS:
        supported = False
        notes.append(
            f"The brokers log in to each other with SASL mechanism {mechanism} (sasl.mechanism.inter.broker.protocol"
            f"{'' if mechanism != DEFAULT_SASL_MECHANISM else ', Kafka default'}); bridge run supports only "
            f"{', '.join(BRIDGE_SASL_MECHANISMS)}: use Kafka's controllers, or give the brokers an inter-broker "
            "listener with one of those."
        )
    elif mechanism is not None:
        options += [
            "--inter-broker-sasl-mechanism", mechanism,
            "--inter-broker-sasl-username", USERNAME_PLACEHOLDER,
            "--inter-broker-sasl-password-file", PASSWORD_FILE_PLACEHOLDER,
        ]  # fmt: skip
        notes.append(
            f"{USERNAME_PLACEHOLDER}: the username of the brokers' {mechanism} login (their JAAS KafkaServer / "
            f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config); {PASSWORD_FILE_PLACEHOLDER}: a "
            f"file holding only its password (or leave the option out and set env {SASL_PASSWORD_ENV})."
        )
    if not options and supported:
        notes.append(f"{listener} is PLAINTEXT: bridge run's defaults reach the brokers, no --inter-broker-* option needed.")
    return BridgeInterBroker(
        listener=listener,
        security_protocols=protocols,
        sasl_mechanism=mechanism,
        supported=supported,
        options=options,
        notes=notes,
    )
