"""`zk2kraft bridge`: run the bridge-mode controller (migration leadership, initial load, dual-write)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import click

from bridge.config import BridgeConfig
from cli.authorizer_options import authorizer_options
from cli.common import handles_errors
from cli.listener_security import (
    controller_sasl_from,
    controller_sasl_options,
    keep_secrets_out_of_debug_logs,
    listen_sasl_from,
    listen_sasl_options,
    read_secret,
)
from cli.options import zk_security_from, zk_security_options
from migrate.errors import InvalidRequestError, Zk2KraftError
from migrate.kraft.logdir import QUORUM_STATE, list_segments, list_snapshots
from migrate.kraft.reader import METADATA_PARTITION_DIR
from migrate.plan.inter_broker import SASL_PASSWORD_ENV, SSL_KEY_PASSWORD_ENV
from migrate.zk.model import listener_name_problem

_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
FORMAT_EMPTY_VOTER_DIRECTORY = "--format-empty-voter-directory"
QUORUM_FROM_ONE_BRIDGE = (
    "stop the bridge (SIGTERM), copy its --metadata-dir to every voter's host, set node.id in each copy's "
    "meta.properties to that voter's --node-id, and start them all with the same --voters, each on its copy "
    "(no flag needed: the copies hold the log), as a rolling Kafka controller change would; docs/operations.md, "
    '"A single bridge cannot grow into a quorum"'
)
"""The supported way from one bridge to a quorum: Kafka 3.9's static voters cannot grow a running quorum."""
STANDBY_REPLACED = (
    "--standby is no longer supported: a Raft quorum of three bridges (--voters) replaces it and its shared "
    "disk; when a voter fails the others elect a new leader within seconds, each on its own disk. A single "
    "bridge cannot grow into a quorum while it runs (Kafka 3.9's voters are static). To move: "
    + QUORUM_FROM_ONE_BRIDGE
    + ". Nothing was started or changed"
)


@click.group("bridge")
def bridge_group() -> None:
    """Run zk2kraft as the KRaft controller of a cluster in ZooKeeper → KRaft migration."""


def _principals(value: str | None) -> frozenset[str] | None:
    """`User:a;User:b` (Kafka's super.users form) as a set; None when the option is not given."""
    if value is None:
        return None
    names = frozenset(item.strip() for item in value.split(";") if item.strip())
    for name in names:
        kind, sep, rest = name.partition(":")
        if not sep or not kind or not rest:
            raise click.BadParameter(
                f"expected TYPE:NAME (e.g. User:CN=shim-1), got {name!r}", param_hint="--envelope-principals"
            )
    if not names:
        raise click.BadParameter("names no principal", param_hint="--envelope-principals")
    return names


def _listener_name(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    problem = listener_name_problem(value)
    if problem is not None:
        raise click.BadParameter(f"{value!r} {problem}", param_hint="--inter-broker-listener-name")
    return value


def _controller_listener_names(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    for name in value.split(","):
        problem = listener_name_problem(name)
        if problem is not None:
            raise click.BadParameter(f"the name {name!r} {problem}", param_hint="--controller-listener-names")
    return value


def check_voter_directory(config: BridgeConfig) -> None:
    """Refuse a voter of a quorum of several on a --metadata-dir with no log and no quorum-state, unless
    --format-empty-voter-directory: KIP-853's lost disk, which static voters cannot tell from a first start."""
    if len(config.quorum_voters) < 2 or config.format_empty_voter_directory:
        return
    if _holds_raft_state(config.metadata_dir):
        return
    raise InvalidRequestError(
        f"--metadata-dir {config.metadata_dir} holds no metadata log, and node {config.node_id} is one of "
        f"{len(config.quorum_voters)} --voters. If this voter ran before and lost its disk, starting it empty is "
        "KIP-853's lost-disk hazard: it has forgotten the vote it cast, so it could vote twice in one epoch (two "
        "leaders), and with an empty log it votes for any candidate, so it could help a voter that misses "
        "committed changes win (they would be lost). Kafka 3.9's static voters cannot replace a disk safely. "
        f"Pass {FORMAT_EMPTY_VOTER_DIRECTORY} on the first start of a new quorum (every voter empty), or for a "
        "lost disk only while the other voters run and have a leader, then stop or restart no other voter until "
        "/status shows this one caught up. A single bridge cannot grow into a quorum while it runs (Kafka 3.9's "
        f"voters are static); to move one to a quorum, {QUORUM_FROM_ONE_BRIDGE}"
    )


def _holds_raft_state(directory: Path) -> bool:
    """Whether `directory` holds anything of a voter's Raft state: quorum-state, a snapshot other than the
    bootstrap checkpoint at offset 0, or a log segment with bytes in it."""
    # Here, not at the top: the recovery module loads the metadata image machinery, which every other zk2kraft
    # command would pay for at start-up.
    from bridge.raft.recovery import is_unformatted

    if not directory.is_dir() or is_unformatted(directory):
        return False
    pdir = directory / METADATA_PARTITION_DIR
    if not pdir.is_dir():
        return False
    if (pdir / QUORUM_STATE).exists():
        return True
    if any(snapshot.end_offset > 0 for snapshot, _path in list_snapshots(pdir)):
        return True
    return any(segment.path.stat().st_size > 0 for segment in list_segments(pdir))


def inter_broker_options(func: Any) -> Any:
    """--inter-broker-*: how the channel reaches the brokers' inter-broker listener (Kafka's client side of it)."""
    options = [
        click.option(
            "--inter-broker-listener-name",
            default="PLAINTEXT",
            show_default=True,
            metavar="NAME",
            callback=_listener_name,
            help="Kafka's inter.broker.listener.name (compared upper-cased, as Kafka does): the listener of the brokers' registrations the bridge sends "
            "LeaderAndIsr, UpdateMetadata and StopReplica to. Each broker's endpoint on it says its security "
            "protocol (listener.security.protocol.map); the --inter-broker-ssl-* and --inter-broker-sasl-* "
            "options say how to meet it, as the controller's listener.name.<NAME>.ssl.* / sasl.* settings do.",
        ),
        click.option(
            "--inter-broker-ssl-ca",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="For SSL and SASL_SSL brokers: CA certificates (PEM) that sign the brokers' certificates "
            "(ssl.truststore.location; default: the system's CAs).",
        ),
        click.option(
            "--inter-broker-ssl-cert",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="Client certificate (PEM; may hold the key too) for brokers that require one "
            "(ssl.keystore.location; their ssl.client.auth=required).",
        ),
        click.option(
            "--inter-broker-ssl-key",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help=f"Its private key (PEM), when not in --inter-broker-ssl-cert; an encrypted key's password "
            f"comes from env {SSL_KEY_PASSWORD_ENV} (ssl.key.password).",
        ),
        click.option(
            "--inter-broker-ssl-no-hostname-check",
            is_flag=True,
            help="Do not check a broker's advertised host against its certificate "
            "(ssl.endpoint.identification.algorithm empty).",
        ),
        click.option(
            "--inter-broker-sasl-mechanism",
            type=click.Choice(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]),
            help="For SASL_PLAINTEXT and SASL_SSL brokers: sasl.mechanism.inter.broker.protocol (GSSAPI and "
            "OAUTHBEARER are not supported).",
        ),
        click.option(
            "--inter-broker-sasl-username",
            metavar="USER",
            help="The user the brokers' JAAS KafkaServer section logs in as (username=...).",
        ),
        click.option(
            "--inter-broker-sasl-password-file",
            type=click.Path(dir_okay=False, path_type=Path),
            help=f"A file holding its password (one line), else env {SASL_PASSWORD_ENV}; never on the "
            "command line, never printed.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def inter_broker_given() -> list[str]:
    """The --inter-broker-* options given on the command line (not left at their defaults)."""
    ctx = click.get_current_context()
    return [
        f"--{name.replace('_', '-')}"
        for name in ctx.params
        if name.startswith("inter_broker_")
        and ctx.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT)
    ]


def inter_broker_from(kwargs: dict[str, Any]) -> dict[str, Any]:
    """BridgeConfig's inter-broker fields from `inter_broker_options`' options (removed from kwargs)."""
    mechanism = kwargs.pop("inter_broker_sasl_mechanism")
    password_file = kwargs.pop("inter_broker_sasl_password_file")
    cert = kwargs.pop("inter_broker_ssl_cert")
    # An environment variable counts only with the option that uses it: set for another bridge, it must not
    # refuse this one. Set but empty, either is refused.
    password = read_secret(
        password_file, "--inter-broker-sasl-password-file", SASL_PASSWORD_ENV if mechanism else None
    )
    key_password = read_secret(None, "", SSL_KEY_PASSWORD_ENV if cert else None)
    return {
        "inter_broker_listener_name": kwargs.pop("inter_broker_listener_name"),
        "inter_broker_ssl_ca": kwargs.pop("inter_broker_ssl_ca"),
        "inter_broker_ssl_cert": cert,
        "inter_broker_ssl_key": kwargs.pop("inter_broker_ssl_key"),
        "inter_broker_ssl_key_password": key_password,
        "inter_broker_ssl_check_hostname": not kwargs.pop("inter_broker_ssl_no_hostname_check"),
        "inter_broker_sasl_mechanism": mechanism,
        "inter_broker_sasl_username": kwargs.pop("inter_broker_sasl_username"),
        "inter_broker_sasl_password": password,
    }


@bridge_group.command("run")
@click.option(
    "--zk",
    "zk_connect",
    required=True,
    metavar="HOST:PORT[,HOST:PORT...][/chroot]",
    help="The cluster's ZooKeeper, written as Kafka's zookeeper.connect (chroot included).",
)
@click.option(
    "--metadata-dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="The controller's metadata.log.dir (created and formatted when empty).",
)
@click.option(
    "--node-id",
    required=True,
    type=click.IntRange(0, 2**31 - 1),
    help="This controller's node.id; must differ from every broker id.",
)
@click.option(
    "--listen",
    default="127.0.0.1:9093",
    show_default=True,
    metavar="HOST:PORT",
    help="Kafka-protocol listener: the brokers' controller quorum (BrokerRegistration, BrokerHeartbeat, Fetch "
    "of the metadata log), their AlterPartition and AllocateProducerIds, and admin requests, forwarded or "
    "direct (CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs, IncrementalAlterConfigs, "
    "AlterPartitionReassignments, ListPartitionReassignments, ElectLeaders, ...).",
)
@click.option(
    "--metrics",
    default="127.0.0.1:9404",
    show_default=True,
    metavar="HOST:PORT",
    help="HTTP endpoint serving Prometheus /metrics and the JSON /status.",
)
@click.option("--metadata-version", metavar="V", help="metadata.version for a new log (default: 3.9-IV0).")
@click.option(
    "--voters",
    metavar="ID@HOST:PORT,...",
    help="The controller quorum this bridge is one voter of, in the syntax and meaning of Kafka's "
    "controller.quorum.voters (static voters, kraft.version 0), e.g. 3000@ctrl1:9093,3001@ctrl2:9093,"
    "3002@ctrl3:9093. Give every bridge the same value and the brokers controller.quorum.voters=<the same "
    "value>. --node-id must be one of the ids and --listen its endpoint, or a wildcard host (0.0.0.0, [::]) at "
    "its port. The voters elect one leader, which alone is the controller; a majority must run. Without it the "
    "bridge is a quorum of itself at --listen. The quorum is the one way to be highly available; a single "
    "bridge moves to one by being stopped and copied (docs/operations.md).",
)
@click.option(
    FORMAT_EMPTY_VOTER_DIRECTORY,
    is_flag=True,
    help="With --voters naming more than one voter: allow starting on a --metadata-dir that holds no log. "
    "Needed on the first start of a new quorum. For a voter that lost its disk it is unsafe (KIP-853: it may "
    "vote twice in an epoch or help elect a leader that misses committed changes); see docs/operations.md.",
)
@click.option("--standby", is_flag=True, hidden=True, help="Replaced by --voters: refused, saying how to move.")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print the ZooKeeper writes reconciliation would make for the existing log, then exit; "
    "nothing is written anywhere.",
)
@click.option(
    "--adopt-existing-migration",
    is_flag=True,
    help="Start even though ZooKeeper's /migration does not match this metadata log (ZooKeeper will "
    "be made to follow this log). This takes over from whichever controller /controller names and fences "
    "it if it still runs: only after checking why they differ and that no other controller runs.",
)
@click.option(
    "--foreign-zk-writes",
    type=click.Choice(["import", "revert", "report"]),
    default="report",
    show_default=True,
    help="What to do with ZooKeeper changes made by others during dual-write.",
)
@click.option(
    "--listen-ssl-cert",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Make --listen TLS with this server certificate (PEM).",
)
@click.option(
    "--listen-ssl-key",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Its private key (PEM).",
)
@click.option(
    "--listen-ssl-ca",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="CA certificates of the callers' client certificates; given, every caller must present one "
    "(Kafka's ssl.client.auth=required) and is User:<subject DN>.",
)
@listen_sasl_options
@controller_sasl_options
@click.option(
    "--envelope-principals",
    metavar="User:CN=...;User:CN=...",
    help="The shims' and brokers' principals (client certificates' User:<subject DN>, RFC 2253 as Java "
    "prints it, e.g. User:CN=shim-1,O=zk2kraft). With --authorizer standard they hold CLUSTER_ACTION on the "
    "cluster (a shorthand for that ACL: they may send EnvelopeRequests, Fetch the metadata log, register, "
    "heartbeat, AlterPartition, AllocateProducerIds; anything else they do is checked against the ACLs). "
    "Without --authorizer they are an allow list: only they may send requests; any other caller gets "
    "CLUSTER_AUTHORIZATION_FAILED and nothing is changed. Needs --listen-ssl-cert and --listen-ssl-ca; "
    "unset: every caller that can connect is served (and, with --authorizer standard, judged by the ACLs).",
)
@authorizer_options("the controller's listener (brokers, shims, other voters and admin clients)")
@zk_security_options
@inter_broker_options
@click.option(
    "--rehearsal",
    is_flag=True,
    help="For rehearsals on a COPY of ZooKeeper only (no brokers run): ZooKeeper's /brokers/ids stand in "
    "for broker registrations, no broker is ever fenced, the migration does not wait for brokers and no "
    "request is sent to a broker (so --inter-broker-* options are refused with it). "
    "Without it the bridge behaves as Kafka's controller: it waits (WAIT_FOR_BROKERS) until every broker "
    "runs in migration mode and has registered, and fences brokers whose session expires. Refused (exit 2, "
    "nothing written) while a broker under /brokers/ids has a live ZooKeeper session: on a live cluster a "
    "rehearsal would take control of it.",
)
@click.option(
    "--broker-session-timeout-ms",
    type=click.IntRange(min=1),
    default=9000,
    show_default=True,
    help="Kafka's broker.session.timeout.ms: a registered broker not heard from this long is fenced and its "
    "leaderships move (once the migration is done and this bridge holds ZooKeeper, also while it reconciles "
    "ZooKeeper after a restart; a restarted bridge judges sessions from its own start). Use the "
    "value the cluster's controllers would have.",
)
@click.option(
    "--controller-socket-timeout-ms",
    type=click.IntRange(min=1),
    default=30000,
    show_default=True,
    help="Kafka's controller.socket.timeout.ms: how long connecting (TLS and SASL login included) to a broker "
    "for LeaderAndIsr, UpdateMetadata and StopReplica may take before it counts as a failed send.",
)
@click.option(
    "--request-timeout-ms",
    type=click.IntRange(min=1),
    default=30000,
    show_default=True,
    help="Kafka's request.timeout.ms: how long a broker may take to answer such a request before the "
    "connection is closed and the request resent.",
)
@click.option(
    "--auto-leader-rebalance-enable/--no-auto-leader-rebalance-enable",
    default=True,
    show_default=True,
    help="Kafka's auto.leader.rebalance.enable: every --leader-imbalance-check-interval-seconds, move the "
    "leadership of each partition led by another than its preferred replica (the first in its assignment) "
    "back to it, when that replica is unfenced and in the ISR (as KRaft's controller does, for every such "
    "partition; leader.imbalance.per.broker.percentage is not used). Give --no-auto-leader-rebalance-enable "
    "when the cluster runs with auto.leader.rebalance.enable=false (leaders placed by hand or by a tool such "
    "as Cruise Control): with it on, the bridge moves leaders the operators placed.",
)
@click.option(
    "--leader-imbalance-check-interval-seconds",
    type=click.IntRange(min=1),
    default=300,
    show_default=True,
    help="Kafka's leader.imbalance.check.interval.seconds: how often the preferred-leader check above runs "
    "(the first one this long after the bridge starts; once the migration is done and ZooKeeper is held).",
)
@click.option(
    "--unclean-leader-election-interval-ms",
    type=click.IntRange(min=1),
    default=300_000,
    show_default=True,
    help="Kafka's unclean.leader.election.interval.ms: how often partitions left without a leader are retried "
    "with an unclean election (a replica outside the ISR becomes leader, losing what it lacks), only for "
    "topics with unclean.leader.election.enable=true (topic or broker config).",
)
@click.option(
    "--controller-listener-names",
    default="CONTROLLER",
    show_default=True,
    callback=_controller_listener_names,
    help="Kafka's controller.listener.names, as the brokers' configs give it (comma-separated): DescribeQuorum "
    "names this voter's endpoint after the first, as a Kafka controller with a static voter set does.",
)
@click.option(
    "--metadata-log-config",
    multiple=True,
    metavar="NAME=VALUE",
    help="A Kafka metadata log setting (repeatable): metadata.log.max.record.bytes.between.snapshots, "
    "metadata.log.max.snapshot.interval.ms, metadata.max.retention.bytes, metadata.max.retention.ms, "
    "metadata.log.segment.bytes; Kafka's defaults otherwise.",
)
@click.option("--no-fsync", is_flag=True, hidden=True, help="Skip fsync (tests and benchmarks only).")
@click.option("-v", "--verbose", is_flag=True, help="Debug logging.")
@handles_errors
def run_cmd(
    zk_connect: str,
    metadata_dir: Path,
    node_id: int,
    listen: str,
    metrics: str,
    metadata_version: str | None,
    voters: str | None,
    format_empty_voter_directory: bool,
    standby: bool,
    dry_run: bool,
    adopt_existing_migration: bool,
    foreign_zk_writes: str,
    listen_ssl_cert: Path | None,
    listen_ssl_key: Path | None,
    listen_ssl_ca: Path | None,
    envelope_principals: str | None,
    authorizer: str,
    super_users: frozenset[str],
    allow_everyone_if_no_acl_found: bool,
    rehearsal: bool,
    broker_session_timeout_ms: int,
    controller_socket_timeout_ms: int,
    request_timeout_ms: int,
    auto_leader_rebalance_enable: bool,
    leader_imbalance_check_interval_seconds: int,
    unclean_leader_election_interval_ms: int,
    controller_listener_names: str,
    metadata_log_config: tuple[str, ...],
    no_fsync: bool,
    verbose: bool,
    **security: Any,
) -> None:
    """Be the KRaft controller of a cluster being migrated off ZooKeeper.

    The bridge claims controllership in ZooKeeper (/controller, /controller_epoch, /migration), copies
    all of ZooKeeper into its KRaft metadata log once (one metadata transaction), makes ZooKeeper equal
    to the log, and then serves metadata changes: each is fsynced to the log, then written to ZooKeeper
    exactly as Kafka 3.9 writes it, so ZooKeeper-mode brokers and tools keep working. Progress is in the
    log lines (one per state, in Kafka's order: INACTIVE, WAIT_FOR_CONTROLLER_QUORUM, WAIT_FOR_BROKERS,
    BECOME_CONTROLLER, ZK_MIGRATION, SYNC_KRAFT_TO_ZK, KRAFT_CONTROLLER_TO_BROKER_COMM, DUAL_WRITE;
    WAIT_FOR_BROKERS lasts until every broker ZooKeeper lists has registered, ZK_MIGRATION runs once)
    and on http://METRICS/status.

    The brokers reach it as their KRaft controller: each broker, still in ZooKeeper mode, needs
    zookeeper.metadata.migration.enable=true, controller.quorum.voters=<--voters> (for a single bridge
    <--node-id>@<host>:<port of --listen>), controller.listener.names naming a listener mapped in listener.security.protocol.map to
    PLAINTEXT (SSL with --listen-ssl-cert, SASL_PLAINTEXT with --listen-sasl-mechanisms, SASL_SSL with both),
    and inter.broker.protocol.version equal to the metadata.version (3.9 by default; `zk2kraft plan` writes
    these files). SCRAM logins are checked against the SCRAM credentials in the bridge's own log, which holds
    none before the migration copies ZooKeeper: brokers and voters connecting before it log in with PLAIN
    (docs/operations.md, "The bridge's listener: TLS and SASL").

    It refuses to start when ZooKeeper's /migration belongs to another metadata log or a znode it would
    copy is malformed; a refusal changes nothing in ZooKeeper or --metadata-dir. A failure after claiming
    /controller and before dual-write hands /controller and /migration back, and the error says what
    ZooKeeper holds. From KRAFT_CONTROLLER_TO_BROKER_COMM on it sends LeaderAndIsr, UpdateMetadata and
    StopReplica to each migrating ZooKeeper-mode broker at its endpoint on --inter-broker-listener-name,
    speaking that endpoint's security protocol: PLAINTEXT, SSL (--inter-broker-ssl-*), SASL_PLAINTEXT or
    SASL_SSL (--inter-broker-sasl-*, PLAIN or SCRAM). A broker it cannot reach or log in to is retried after
    100 ms, the wait doubling on each consecutive failure up to 1 s, and shown with the reason and its kind
    (network, tls, authentication, settings) on /status. SIGTERM or SIGINT stop it cleanly (exit 0). Exit 2: refused or bad input; 3: another
    controller took over (the error names it); 4: failed while serving; 5: ZooKeeper unreachable (see
    `zk2kraft --help`).

    \b
    Example:
      zk2kraft bridge run --zk zk1:2181,zk2:2181/kafka --metadata-dir /var/lib/zk2kraft/meta \\
          --node-id 3000 --listen 0.0.0.0:9093 --metrics 0.0.0.0:9404
      curl -s http://ctrl1:9404/status   # {"state": "DUAL_WRITE", ...}
      zk2kraft status --zk zk1:2181,zk2:2181/kafka --bridge-status http://ctrl1:9404
    \b
    Secured (client certificates name the callers; the ACLs are the cluster's own, see --authorizer):
      zk2kraft bridge run --zk zk1:2181/kafka --metadata-dir /var/lib/zk2kraft/meta --node-id 3000 \\
          --listen 0.0.0.0:9093 --listen-ssl-cert ctrl.pem --listen-ssl-key ctrl.key --listen-ssl-ca ca.pem \\
          --authorizer standard --super-users 'User:CN=broker-1;User:CN=broker-2;User:CN=admin' \\
          --envelope-principals 'User:CN=shim-1'
    \b
    Three bridges, one quorum (the same --voters on each; the first start of a new quorum on empty
    directories needs --format-empty-voter-directory, once):
      zk2kraft bridge run --zk zk1:2181/kafka --metadata-dir /var/lib/zk2kraft/meta --node-id 3000 \\
          --listen 0.0.0.0:9093 --voters 3000@ctrl1:9093,3001@ctrl2:9093,3002@ctrl3:9093
    """
    if standby:
        raise InvalidRequestError(STANDBY_REPLACED)
    # Here, not at the top: the controller loads kio's request schemas, a few hundred ms every other
    # command would pay at start-up.
    from bridge.controller import BridgeController
    from bridge.shim.server import parse_address

    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO, format=_LOG_FORMAT, stream=sys.stderr
    )
    keep_secrets_out_of_debug_logs()
    if rehearsal and (given := inter_broker_given()):
        raise Zk2KraftError(
            f"{', '.join(given)} with --rehearsal: a rehearsal sends no request to any broker (it runs on a copy "
            "of ZooKeeper with no broker), so these options would go unused; drop them for the rehearsal and "
            "give them to the real run"
        )
    listen_host, listen_port = parse_address(listen, "--listen", allow_any_port=True)
    metrics_host, metrics_port = parse_address(metrics, "--metrics", allow_any_port=True)
    config = BridgeConfig.model_validate(
        dict(
            zk_connect=zk_connect,
            metadata_dir=metadata_dir,
            node_id=node_id,
            listen_host=listen_host,
            listen_port=listen_port,
            metrics_host=metrics_host,
            metrics_port=metrics_port,
            metadata_version=metadata_version,
            voters=voters if voters is not None else (),
            format_empty_voter_directory=format_empty_voter_directory,
            dry_run=dry_run,
            adopt_existing_migration=adopt_existing_migration,
            foreign_zk_writes=foreign_zk_writes,
            listen_ssl_cert=listen_ssl_cert,
            listen_ssl_key=listen_ssl_key,
            listen_ssl_ca=listen_ssl_ca,
            envelope_principals=_principals(envelope_principals),
            authorizer=authorizer,
            super_users=super_users,
            allow_everyone_if_no_acl_found=allow_everyone_if_no_acl_found,
            fsync=not no_fsync,
            **{f"zk_{name}": value for name, value in zk_security_from(security).items()},
            **inter_broker_from(security),
            **listen_sasl_from(security),
            **controller_sasl_from(security),
            rehearsal=rehearsal,
            broker_session_timeout_ms=broker_session_timeout_ms,
            controller_socket_timeout_ms=controller_socket_timeout_ms,
            request_timeout_ms=request_timeout_ms,
            auto_leader_rebalance_enable=auto_leader_rebalance_enable,
            leader_imbalance_check_interval_s=leader_imbalance_check_interval_seconds,
            unclean_leader_election_interval_ms=unclean_leader_election_interval_ms,
            controller_listener_names=controller_listener_names,
            metadata_log=metadata_log_config,
        )
    )
    check_voter_directory(config)
    controller = BridgeController(config)
    code = controller.run()
    if dry_run and code == 0:
        for line in controller.dry_run_lines:
            click.echo(line)
        if not controller.dry_run_lines:
            click.echo("# ZooKeeper already matches the metadata log: nothing to write")
    if code != 0:
        click.echo(f"error: {controller.error}", err=True)
    sys.exit(code)


@bridge_group.command("stop")
@click.option(
    "--status", "status", required=True, metavar="URL",
    help="The bridge's status endpoint (its --metrics address), e.g. http://127.0.0.1:9404.",
)  # fmt: skip
@click.option("--timeout", default=120.0, show_default=True, help="Seconds to wait for the bridge to exit.")
@click.option(
    "--for-handoff", is_flag=True,
    help="Then run `zk2kraft handoff check` on its directory and ZooKeeper (as its /status names them) and say "
    "the next step; exit 1 unless a Kafka 3.9 controller would lead from them.",
)  # fmt: skip
@zk_security_options
@handles_errors
@click.pass_context
def stop_cmd(ctx: click.Context, status: str, timeout: float, for_handoff: bool, **zk_security: Any) -> None:
    """Stop the bridge answering at --status (on this host) cleanly, as SIGTERM does, and wait for it to exit.

    A leader resigns first (EndQuorumEpoch), so the other voters elect at once; every bridge writes a
    snapshot and leaves its directory as a Kafka 3.9 controller's. Exit codes: 0 stopped (and, with
    --for-handoff, the directory is ready); 1 with --for-handoff, a hand-off check failed; 2 refused (that
    status names no bridge process of this host, or it did not exit within --timeout); 5 the status
    endpoint or ZooKeeper did not answer. The ZooKeeper TLS/SASL options are the bridge's own, for the check.

    \b
    Example (one voter of a rolling hand-off):
      zk2kraft bridge stop --status http://127.0.0.1:9404 --for-handoff
    """
    # Here, not at the top: the status model loads prometheus_client and kio, and the hand-off check the
    # metadata image machinery, which every other zk2kraft command would pay for at start-up.
    from bridge.controller.stop import running_bridge, stop_and_wait
    from cli.handoff_cmd import handoff_check_cmd

    state, process = running_bridge(status)
    role = f", Raft {state.raft.role} in epoch {state.raft.epoch}" if state.raft is not None else ""
    click.echo(f"stopping bridge {state.node_id} (pid {process.pid}, {state.state}{role}) with SIGTERM")
    seconds = stop_and_wait(process, timeout, lambda line: click.echo(line, err=True))
    click.echo(f"bridge {state.node_id} exited after {seconds:.1f} s; its directory: {process.metadata_dir}")
    if not for_handoff:
        return
    click.echo(f"checking {process.metadata_dir} as a Kafka 3.9 controller with node.id {state.node_id} would:")
    ctx.invoke(
        handoff_check_cmd, metadata_dir=Path(process.metadata_dir), zk_connect=process.zookeeper, chroot=None,
        node_id=state.node_id, voters=process.voters, as_json=False, **zk_security,
    )  # fmt: skip
    click.echo(
        f"next: start the Kafka 3.9 controller with node.id {state.node_id} on {process.metadata_dir} "
        "(plan/handoff/controller-<id>.properties), then wait until DescribeQuorum shows it caught up "
        "(docs/handoff.md)"
    )
