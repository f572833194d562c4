"""What `zk2kraft bridge run` is told (BridgeConfig, which refuses a voter set the bridge cannot be one of), its
exit codes, and the TLS and SASL settings from it: the listener's TLS context, and the TLS context and SASL login
of the channel to the brokers.

Kafka's counterpart is KafkaConfig's controller part (`process.roles=controller`, `controller.quorum.voters`,
listeners, security).
"""

from __future__ import annotations

import ipaddress
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from bridge.kafka.sasl import SaslConfig, listener_sasl_config, parse_mechanisms, sasl_login
from bridge.kafka.sasl_mechanisms import SaslLogin, ScramCredentialLookup
from bridge.kafka.tls import SslPrincipalMapper, client_ssl_context, server_ssl_context
from migrate.errors import EXIT_BAD_INPUT, InvalidRequestError, Zk2KraftError
from migrate.kraft.image import MetadataImage
from migrate.kraft.log_config import MetadataLogConfig, parse_metadata_log_config
from migrate.kraft.quorum_voters import QuorumVoter, parse_quorum_voters, render_quorum_voters, voter_set
from migrate.plan.inputs import DEFAULT_CONTROLLER_LISTENER
from migrate.plan.inter_broker import SASL_PASSWORD_ENV
from migrate.zk.live import ZkConnectOptions
from migrate.zk.model import listener_name_problem, normalised_listener_name

# A refused bridge exits with the table's bad-input code (migrate.errors holds the whole table).
EXIT_REFUSED = EXIT_BAD_INPUT

ForeignWrites = Literal["import", "revert", "report"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
# Listen hosts that bind every interface: such a listener serves the voter's endpoint whatever its host.
WILDCARD_LISTEN_HOSTS = frozenset({"", "0.0.0.0", "::"})


class BridgeConfig(BaseModel):
    """Everything `zk2kraft bridge run` is told (the `--...` options)."""

    model_config = ConfigDict(frozen=True)

    zk_connect: str = Field(description="Kafka's zookeeper.connect, chroot included")
    metadata_dir: Path
    node_id: int = Field(ge=0, le=2**31 - 1)
    listen_host: str = "127.0.0.1"
    listen_port: int = Field(0, ge=0, le=65535)
    metrics_host: str = "127.0.0.1"
    metrics_port: int | None = Field(0, ge=0, le=65535, description="None: no metrics/status server")
    metadata_version: str | None = None
    voters: tuple[QuorumVoter, ...] = Field(
        (), description="--voters, Kafka's controller.quorum.voters; empty: a quorum of this bridge alone"
    )
    metadata_log: MetadataLogConfig = Field(
        default_factory=MetadataLogConfig,
        description="--metadata-log-config NAME=VALUE: Kafka's snapshot, retention and segment settings",
    )
    format_empty_voter_directory: bool = Field(
        False, description="a voter of several may start on a directory with no log (a new quorum, or a lost disk)"
    )
    dry_run: bool = False
    adopt_existing_migration: bool = False
    foreign_zk_writes: ForeignWrites = "report"
    fsync: bool = True
    min_batch_size: int = Field(200, ge=1)
    zk_session_timeout_s: float = 18.0
    # ZooKeeper credentials and TLS (`--zk-digest`, `--zk-sasl-*`, `--zk-tls-*`), ZkConnectOptions' fields.
    zk_auth_data: tuple[tuple[str, str], ...] = Field((), repr=False, description="addAuth (scheme, credentials)")
    zk_sasl_options: dict[str, str] | None = Field(None, repr=False, description="kazoo's sasl_options")
    zk_ssl_enable: bool = False
    zk_ssl_cafile: str | None = None
    zk_ssl_certfile: str | None = None
    zk_ssl_keyfile: str | None = None
    zk_ssl_keyfile_password: str | None = Field(None, repr=False)
    zk_ssl_check_hostname: bool = True
    gil_switch_interval_s: float | None = Field(
        0.0005,
        gt=0,
        description="sys.setswitchinterval for the process while it runs a controller (None: Python's 5 ms)",
    )
    rehearsal: bool = Field(
        False,
        description="a rehearsal on a copy of ZooKeeper: /brokers/ids stand in for broker registrations, "
        "nobody is fenced and the migration does not wait for brokers",
    )
    broker_session_timeout_ms: int = Field(
        9000, gt=0, description="Kafka's broker.session.timeout.ms: a broker silent this long is fenced"
    )
    auto_leader_rebalance_enable: bool = Field(
        True,
        description="Kafka's auto.leader.rebalance.enable: preferred-leader elections run every "
        "leader_imbalance_check_interval_s while a partition is led by another than its first replica",
    )
    leader_imbalance_check_interval_s: float = Field(
        300.0, gt=0, description="Kafka's leader.imbalance.check.interval.seconds"
    )
    unclean_leader_election_interval_ms: int = Field(
        300_000,
        gt=0,
        description="Kafka's unclean.leader.election.interval.ms: how often leaderless partitions of topics with "
        "unclean.leader.election.enable=true are retried with an unclean election",
    )
    inter_broker_listener_name: str = Field(
        "PLAINTEXT",
        description="Kafka's inter.broker.listener.name (upper-cased, as Kafka normalises it): migrating "
        "ZooKeeper brokers must register a listener of it",
    )
    controller_socket_timeout_ms: int = Field(
        30000, gt=0, description="Kafka's controller.socket.timeout.ms: how long a connection to a broker may take"
    )
    request_timeout_ms: int = Field(
        30000,
        gt=0,
        description="Kafka's request.timeout.ms: how long a broker may take to answer a controller request "
        "before the connection is closed and the request resent",
    )
    # Listener security (`--listen-ssl-*`, `--envelope-principals`): see listener_ssl_context and _permitted.
    listen_ssl_cert: Path | None = None
    listen_ssl_key: Path | None = None
    listen_ssl_ca: Path | None = Field(None, description="CA of client certificates; given: required")
    envelope_principals: frozenset[str] | None = Field(
        None, description="None: every caller is served; else only these principals' requests (User:<DN>)"
    )
    # Authorization of the listener's requests (`--authorizer`, `--super-users`,
    # `--allow-everyone-if-no-acl-found`): see routing.ControllerApis. With "standard", envelope_principals
    # hold CLUSTER_ACTION on the cluster.
    authorizer: Literal["none", "standard"] = Field(
        "none", description="Kafka's authorizer.class.name: none, or StandardAuthorizer over the log's ACLs"
    )
    super_users: frozenset[str] = Field(frozenset(), description="Kafka's super.users (TYPE:NAME each)")
    allow_everyone_if_no_acl_found: bool = Field(False, description="Kafka's allow.everyone.if.no.acl.found")

    @model_validator(mode="after")
    def _authorizer_settings_need_an_authorizer(self) -> Self:
        """super.users and allow.everyone.if.no.acl.found mean nothing without an authorizer: refused."""
        if self.authorizer == "none" and (self.super_users or self.allow_everyone_if_no_acl_found):
            given = "--super-users" if self.super_users else "--allow-everyone-if-no-acl-found"
            raise InvalidRequestError(
                f"{given} needs --authorizer standard (without an authorizer every request is allowed)"
            )
        return self

    # The channel to the brokers (`--inter-broker-ssl-*`, `--inter-broker-sasl-*`): see inter_broker_security.
    # Which of them a connection uses is the security protocol of the broker's registered endpoint.
    inter_broker_ssl_ca: Path | None = Field(None, description="ssl.truststore.location (None: the system's CAs)")
    inter_broker_ssl_cert: Path | None = Field(None, description="ssl.keystore.location: certificate for mutual TLS")
    inter_broker_ssl_key: Path | None = Field(None, description="its private key, when not in the certificate file")
    inter_broker_ssl_key_password: SecretStr | None = Field(None, description="ssl.key.password")
    inter_broker_ssl_check_hostname: bool = Field(True, description="ssl.endpoint.identification.algorithm=https")
    inter_broker_sasl_mechanism: SaslMechanism | None = Field(
        None, description="sasl.mechanism.inter.broker.protocol (None: no SASL login)"
    )
    inter_broker_sasl_username: str | None = None
    inter_broker_sasl_password: SecretStr | None = None
    # SASL on the listener (`--listen-sasl-*`, `--listen-ssl-principal-mapping-rules`) and the voters' own login
    # to each other's listener (`--controller-sasl-*`): see listener_sasl, listener_principal_mapper, voter_login.
    listen_sasl_mechanisms: tuple[SaslMechanism, ...] = Field(
        (), description="listener.name.<l>.sasl.enabled.mechanisms; empty: no SASL"
    )
    listen_plain_users: Path | None = Field(None, description="PLAIN's user=password file (PlainLoginModule)")
    listen_ssl_principal_mapping_rules: str | None = Field(None, description="ssl.principal.mapping.rules")
    controller_sasl_mechanism: SaslMechanism | None = Field(
        None, description="sasl.mechanism.controller.protocol: how a voter logs in to the other voters"
    )
    controller_sasl_username: str | None = None
    controller_sasl_password: SecretStr | None = Field(None, repr=False)

    @field_validator("listen_sasl_mechanisms", mode="before")
    @classmethod
    def _parse_listen_sasl_mechanisms(cls, value: Any) -> Any:
        return parse_mechanisms(value, "--listen-sasl-mechanisms") if isinstance(value, str) else value

    @field_validator("controller_sasl_mechanism", mode="before")
    @classmethod
    def _parse_controller_sasl_mechanism(cls, value: Any) -> Any:
        if isinstance(value, str):
            (value,) = parse_mechanisms(value, "--controller-sasl-mechanism")
        return value

    @model_validator(mode="after")
    def _listener_security_fits(self) -> Self:
        """Listener SASL options that cannot work together are refused before anything is touched."""
        rules = self.listen_ssl_principal_mapping_rules
        if rules is not None:
            if self.listen_ssl_cert is None or self.listen_ssl_ca is None:
                raise InvalidRequestError(
                    "--listen-ssl-principal-mapping-rules maps client certificates' names: it needs "
                    "--listen-ssl-cert and --listen-ssl-ca (callers present certificates)"
                )
            if self.listen_sasl_mechanisms:
                raise InvalidRequestError(
                    "--listen-ssl-principal-mapping-rules with --listen-sasl-mechanisms: on a SASL listener the "
                    "principal is the SASL user (as in Kafka), so the rules would never apply; drop one"
                )
            SslPrincipalMapper.from_rules(rules, "--listen-ssl-principal-mapping-rules")
        if self.listen_plain_users is not None and "PLAIN" not in self.listen_sasl_mechanisms:
            raise InvalidRequestError(
                "--listen-plain-users is given but --listen-sasl-mechanisms does not enable PLAIN"
            )
        if "PLAIN" in self.listen_sasl_mechanisms and self.listen_plain_users is None:
            raise InvalidRequestError(
                "--listen-sasl-mechanisms includes PLAIN but no --listen-plain-users file is given"
            )
        login = voter_login(self)
        several = len(self.quorum_voters) > 1
        if login is not None and not self.listen_sasl_mechanisms:
            raise InvalidRequestError(
                "--controller-sasl-mechanism: the voters' listeners serve no SASL (give --listen-sasl-mechanisms "
                "to every voter, or drop the --controller-sasl-* options)"
            )
        if several and self.listen_sasl_mechanisms and login is None:
            raise InvalidRequestError(
                "--listen-sasl-mechanisms with --voters: the voters log in to each other's --listen too; give "
                "--controller-sasl-mechanism, --controller-sasl-username and --controller-sasl-password-file "
                "(the same on every voter)"
            )
        if login is not None and login.mechanism not in self.listen_sasl_mechanisms:
            raise InvalidRequestError(
                f"--controller-sasl-mechanism {login.mechanism} is not among --listen-sasl-mechanisms "
                f"{','.join(self.listen_sasl_mechanisms)}: every voter's listener must accept it"
            )
        return self

    @field_validator("metadata_log", mode="before")
    @classmethod
    def _parse_metadata_log(cls, value: Any) -> Any:
        return parse_metadata_log_config(value, "--metadata-log-config") if isinstance(value, list | tuple) else value

    @field_validator("voters", mode="before")
    @classmethod
    def _parse_voters(cls, value: Any) -> Any:
        """`--voters` as given on the command line, in Kafka's syntax (given, it names at least one voter)."""
        if not isinstance(value, str):
            return value
        return tuple(voter_set(parse_quorum_voters(value, source="--voters"), source="--voters").values())

    @model_validator(mode="after")
    def _one_of_the_voters(self) -> Self:
        """With --voters: a set a quorum can run with, this node one of them at its --listen endpoint. Refused
        here, before any directory or ZooKeeper is touched."""
        if not self.voters:
            if self.metadata_log != MetadataLogConfig():
                raise InvalidRequestError(
                    "--metadata-log-config needs --voters: only a quorum's voters snapshot and clean their logs; "
                    "a single bridge keeps its whole log"
                )
            return self
        voters = voter_set(self.voters, source="--voters")
        given = render_quorum_voters(self.voters)
        me = voters.get(self.node_id)
        if me is None:
            raise InvalidRequestError(
                f"--node-id {self.node_id} is not one of --voters {given}: a bridge is one of the voters, as "
                "Kafka refuses a controller whose node.id is not in controller.quorum.voters"
            )
        listen = QuorumVoter(self.node_id, self.listen_host, self.listen_port).endpoint
        if self.listen_port != me.port or not _serves_host(self.listen_host, me.host):
            raise InvalidRequestError(
                f"--listen {listen}: --voters names node {self.node_id} at {me.endpoint}, so the other voters and "
                f"the brokers connect there; listen on {me.endpoint}, or on every interface at its port "
                f"(0.0.0.0:{me.port} or [::]:{me.port})"
            )
        return self

    @property
    def quorum_voters(self) -> dict[int, QuorumVoter]:
        """The voter set by node id: --voters, or without it this bridge alone at its --listen endpoint."""
        if self.voters:
            return {voter.node_id: voter for voter in self.voters}
        return {self.node_id: QuorumVoter(self.node_id, self.listen_host, self.listen_port)}

    @field_validator("inter_broker_listener_name")
    @classmethod
    def _listener_name(cls, name: str) -> str:
        """Kafka's ListenerName.normalised: `plaintext` is the brokers' PLAINTEXT."""
        problem = listener_name_problem(name)
        if problem is not None:
            raise ValueError(f"--inter-broker-listener-name {name!r} {problem}")
        return normalised_listener_name(name)

    controller_listener_names: str = Field(
        DEFAULT_CONTROLLER_LISTENER,
        description="Kafka's controller.listener.names (comma-separated, as the brokers' configs give it): "
        "DescribeQuorum names the voter's endpoint after the first, as Kafka's static voter set does",
    )

    @field_validator("controller_listener_names")
    @classmethod
    def _controller_listener_names(cls, names: str) -> str:
        """KafkaConfig.controllerListenerNames splits on commas and keeps each name as written."""
        for name in names.split(","):
            problem = listener_name_problem(name)
            if problem is not None:
                raise ValueError(f"controller.listener.names {names!r}: the name {name!r} {problem}")
        return names

    @property
    def controller_listener_name(self) -> str:
        """The first of controller.listener.names: the listener the voters are known by."""
        return self.controller_listener_names.split(",")[0]


def _serves_host(listen_host: str, voter_host: str) -> bool:
    """A listener on `listen_host` serves connections to `voter_host`: a wildcard serves every host, otherwise
    the same host (names compared case-insensitively, addresses as addresses; nothing is resolved)."""
    if listen_host in WILDCARD_LISTEN_HOSTS or listen_host.lower() == voter_host.lower():
        return True
    try:
        return ipaddress.ip_address(listen_host) == ipaddress.ip_address(voter_host)
    except ValueError:
        return False


def zk_connect_options(config: BridgeConfig) -> ZkConnectOptions:
    """How the bridge reaches ZooKeeper: `--zk`, the session timeout, the credentials and TLS."""
    return ZkConnectOptions(
        connect=config.zk_connect,
        session_timeout_ms=int(config.zk_session_timeout_s * 1000),
        auth_data=config.zk_auth_data,
        sasl_options=config.zk_sasl_options,
        ssl_enable=config.zk_ssl_enable,
        ssl_cafile=config.zk_ssl_cafile,
        ssl_certfile=config.zk_ssl_certfile,
        ssl_keyfile=config.zk_ssl_keyfile,
        ssl_keyfile_password=config.zk_ssl_keyfile_password,
        ssl_check_hostname=config.zk_ssl_check_hostname,
    )


def listener_ssl_context(config: BridgeConfig) -> ssl.SSLContext | None:
    """The listener's TLS context (client certificates required when a CA is given); None: PLAINTEXT."""
    # With SASL the callers are named by their login, with TLS client certificates by their subject.
    names_callers = bool(config.listen_sasl_mechanisms)
    if config.listen_ssl_cert is None:
        if config.listen_ssl_key is not None or config.listen_ssl_ca is not None:
            raise Zk2KraftError("--listen-ssl-key/--listen-ssl-ca need --listen-ssl-cert")
        if config.envelope_principals is not None and not names_callers:
            raise Zk2KraftError(
                "--envelope-principals needs callers with names: --listen-ssl-cert and --listen-ssl-ca, or "
                "--listen-sasl-mechanisms"
            )
        return None
    if config.envelope_principals is not None and config.listen_ssl_ca is None and not names_callers:
        raise Zk2KraftError(
            "--envelope-principals needs --listen-ssl-ca (certificates name callers) or --listen-sasl-mechanisms"
        )
    return server_ssl_context(
        config.listen_ssl_cert,
        config.listen_ssl_key,
        cafile=config.listen_ssl_ca,
        client_auth="none" if config.listen_ssl_ca is None else "required",
    )


def inter_broker_security(config: BridgeConfig) -> tuple[ssl.SSLContext, SaslLogin | None]:
    """The channel's TLS context (for SSL and SASL_SSL endpoints) and SASL login (for SASL_* endpoints; None
    when no SASL option is given); options that do not go together or files that do not load are refused."""
    password = config.inter_broker_sasl_password
    login = sasl_login(
        config.inter_broker_sasl_mechanism,
        config.inter_broker_sasl_username,
        None if password is None else password.get_secret_value(),
        options="--inter-broker-sasl",
        password_env=SASL_PASSWORD_ENV,
    )
    if config.inter_broker_ssl_key is not None and config.inter_broker_ssl_cert is None:
        raise Zk2KraftError("--inter-broker-ssl-key needs --inter-broker-ssl-cert")
    key_password = config.inter_broker_ssl_key_password
    context = client_ssl_context(
        cafile=config.inter_broker_ssl_ca,
        certfile=config.inter_broker_ssl_cert,
        keyfile=config.inter_broker_ssl_key,
        password=None if key_password is None else key_password.get_secret_value(),
        check_hostname=config.inter_broker_ssl_check_hostname,
        what="--inter-broker-ssl-ca/--inter-broker-ssl-cert/--inter-broker-ssl-key",
    )
    return context, login


def listener_sasl(
    config: BridgeConfig,
    image: Callable[[], MetadataImage],
    before_migration: ScramCredentialLookup | None = None,
) -> SaslConfig | None:
    """The listener's SASL (None: none): PLAIN users from --listen-plain-users, SCRAM credentials from `image()`,
    the bridge's live metadata image, as a KRaft controller checks them (`before_migration` until it is migrated)."""
    if not config.listen_sasl_mechanisms:
        return None
    return listener_sasl_config(
        config.listen_sasl_mechanisms,
        config.listen_plain_users,
        image,
        mechanisms_option="--listen-sasl-mechanisms",
        users_option="--listen-plain-users",
        before_migration=before_migration,
    )


def listener_principal_mapper(config: BridgeConfig) -> SslPrincipalMapper | None:
    """--listen-ssl-principal-mapping-rules (None: client certificates are User:<subject DN>)."""
    rules = config.listen_ssl_principal_mapping_rules
    return None if rules is None else SslPrincipalMapper.from_rules(rules, "--listen-ssl-principal-mapping-rules")


CONTROLLER_SASL_PASSWORD_ENV: Final = "ZK2KRAFT_CONTROLLER_SASL_PASSWORD"
"""Where --controller-sasl-password-file's password comes from when the option is not given."""


def voter_login(config: BridgeConfig) -> SaslLogin | None:
    """How this voter logs in to the other voters' listeners (--controller-sasl-*); None: no SASL."""
    password = config.controller_sasl_password
    return sasl_login(
        config.controller_sasl_mechanism,
        config.controller_sasl_username,
        None if password is None else password.get_secret_value(),
        options="--controller-sasl",
        password_env=CONTROLLER_SASL_PASSWORD_ENV,
    )


def voter_ssl_context(config: BridgeConfig) -> ssl.SSLContext | None:
    """TLS for this voter's connections to the other voters' TLS listeners (None: --listen is not TLS): their
    certificates verified against --listen-ssl-ca (else the system's CAs), this voter's certificate presented."""
    if config.listen_ssl_cert is None or len(config.quorum_voters) < 2:
        return None
    return client_ssl_context(
        cafile=config.listen_ssl_ca,
        certfile=config.listen_ssl_cert,
        keyfile=config.listen_ssl_key,
        what="the voters' connections to each other (--listen-ssl-cert/--listen-ssl-key/--listen-ssl-ca)",
    )
