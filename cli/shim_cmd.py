"""`zk2kraft shim`: run a redirect shim in front of the bridge controller (admin clients and brokers talk to it)."""

from __future__ import annotations

import asyncio
import logging
import ssl
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from bridge.config import CONTROLLER_SASL_PASSWORD_ENV
from bridge.handlers.authorizer import parse_super_users
from bridge.kafka.sasl import SaslConfig, listener_sasl_config, parse_mechanisms, sasl_login
from bridge.kafka.sasl_mechanisms import SaslLogin
from bridge.kafka.tls import ClientAuth, client_ssl_context, server_ssl_context
from cli.authorizer_options import authorizer_options
from cli.common import handles_errors
from cli.listener_security import controller_sasl_from, controller_sasl_options
from migrate.errors import Zk2KraftError
from migrate.zk.model import SECURITY_PROTOCOLS

if TYPE_CHECKING:
    from bridge.shim.server import ShimServer

_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


@click.group("shim")
def shim_group() -> None:
    """Kafka-protocol front doors that send metadata changes to the bridge controller."""


@shim_group.command("run")
@click.option(
    "--listen",
    default="127.0.0.1:9092",
    show_default=True,
    metavar="HOST:PORT",
    help="Where admin clients and brokers connect (the shim's Kafka-protocol listener); port 0 picks a free one (logged).",
)
@click.option(
    "--controller",
    "controllers",
    required=True,
    metavar="HOST:PORT[,HOST:PORT...]",
    help="The bridge controllers' --listen addresses. The shim follows the metadata log of the one that "
    "leads and forwards to it; when it answers NOT_CONTROLLER or goes away, the next one is tried.",
)
@click.option(
    "--advertised",
    metavar="HOST:PORT",
    help="The address clients must use to reach this shim (returned in Metadata as the only broker). "
    "Default: the --listen address.",
)
@click.option(
    "--node-id",
    type=click.IntRange(0, 2**31 - 1),
    default=1_000_000,
    show_default=True,
    help="The node id the shim reports as the controller in Metadata/DescribeCluster; pick one no broker uses.",
)
@click.option(
    "--cluster-id",
    metavar="ID",
    help="The cluster id to report and to check the controllers against. Default: learned from the first "
    "controller that answers (the shim listens only once it knows the id).",
)
@click.option(
    "--max-request-bytes",
    type=click.IntRange(1024, 2**31 - 1),
    default=100 * 1024 * 1024,
    show_default=True,
    help="Larger requests are refused (connection closed) before they are read into memory.",
)
@click.option(
    "--request-timeout",
    type=click.FloatRange(0.1, 3600),
    default=30.0,
    show_default=True,
    help="Seconds to find a controller for a forwarded request that carries no timeout of its own.",
)
@click.option(
    "--security-protocol",
    type=click.Choice(SECURITY_PROTOCOLS),
    default="PLAINTEXT",
    show_default=True,
    help="The listener's security.protocol: SSL and SASL_SSL need --ssl-cert; SASL_* need --sasl-mechanisms.",
)
@click.option("--ssl-cert", type=click.Path(exists=True, dir_okay=False), help="Server certificate (PEM).")
@click.option("--ssl-key", type=click.Path(exists=True, dir_okay=False), help="Its private key (PEM).")
@click.option(
    "--ssl-ca",
    type=click.Path(exists=True, dir_okay=False),
    help="CA certificates client certificates are verified with.",
)
@click.option(
    "--ssl-client-auth",
    type=click.Choice(["none", "requested", "required"]),
    default="none",
    show_default=True,
    help="Kafka's ssl.client.auth; a client certificate makes the principal User:<subject DN>.",
)
@click.option(
    "--sasl-mechanisms",
    default="SCRAM-SHA-256,SCRAM-SHA-512",
    show_default=True,
    metavar="MECH[,MECH...]",
    help="Enabled among PLAIN, SCRAM-SHA-256, SCRAM-SHA-512. SCRAM passwords are verified against the "
    "cluster's own SCRAM credentials (the followed metadata), as a broker does.",
)
@click.option(
    "--plain-users",
    type=click.Path(exists=True, dir_okay=False),
    help="PLAIN's users: a file of `user=password` lines (# comments), like PlainLoginModule's user_<name> options.",
)
@authorizer_options("the shim's listener (admin clients and brokers)")
@click.option(
    "--controller-ssl-cert",
    type=click.Path(exists=True, dir_okay=False),
    help="The shim's client certificate (PEM) for the controllers; it names the shim to their "
    "--envelope-principals as User:<subject DN>.",
)
@click.option(
    "--controller-ssl-key", type=click.Path(exists=True, dir_okay=False), help="Its private key (PEM)."
)
@click.option(
    "--controller-ssl-ca",
    type=click.Path(exists=True, dir_okay=False),
    help="CA certificates the controllers' certificates are verified with (hostname included). Any "
    "--controller-ssl-* option makes the Fetch and forwarding connections to the controllers TLS.",
)
@controller_sasl_options
@click.option("-v", "--verbose", is_flag=True, help="Debug logging.")
@handles_errors
def run_cmd(
    listen: str,
    controllers: str,
    advertised: str | None,
    node_id: int,
    cluster_id: str | None,
    max_request_bytes: int,
    request_timeout: float,
    security_protocol: str,
    ssl_cert: str | None,
    ssl_key: str | None,
    ssl_ca: str | None,
    ssl_client_auth: ClientAuth,
    sasl_mechanisms: str,
    plain_users: str | None,
    authorizer: str,
    super_users: frozenset[str],
    allow_everyone_if_no_acl_found: bool,
    controller_ssl_cert: str | None,
    controller_ssl_key: str | None,
    controller_ssl_ca: str | None,
    verbose: bool,
    **controller_sasl: Any,
) -> None:
    """Serve admin clients and brokers in front of the bridge controller, as a bridge-release broker does.

    \b
    What the shim does with each request:
      reads      Metadata, DescribeCluster, DescribeConfigs, DescribeAcls, DescribeClientQuotas and
                 DescribeUserScramCredentials are answered from the shim's copy of the cluster metadata,
                 which it keeps by fetching the controller's KRaft log (as a KRaft broker does).
      changes    CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs, IncrementalAlterConfigs,
                 AlterClientQuotas, AlterUserScramCredentials, CreateAcls, DeleteAcls,
                 AlterPartitionReassignments, ListPartitionReassignments, ElectLeaders and UnregisterBroker
                 are forwarded in an EnvelopeRequest carrying the client's principal and address
                 (KIP-590); the controller's answer is returned unchanged once the shim's copy shows the
                 change, so reading right after a write sees it.
      brokers    AlterPartition (AlterIsr in versions 0-1) from ZooKeeper-mode brokers goes to the
                 controller as-is, never enveloped.

    The shim tells clients it is the cluster's controller and answers, at its own address, for itself and
    for every broker holding a replica or broker configs (a BROKER config resource's request reaches it and
    is forwarded), so point admin tools' bootstrap servers at it. Anything else (Produce, Fetch, groups,
    ...) is not served. It starts listening once a controller has named the cluster id (clients are told
    it). Several shims can run side by side, e.g. one per broker host. SIGTERM or SIGINT stop it (exit 0),
    also while it still waits for a controller.

    \b
    Example:
      zk2kraft bridge run --zk zk1:2181/kafka --metadata-dir /var/lib/zk2kraft/meta \\
          --node-id 3000 --listen 10.0.0.5:9093 &
      zk2kraft shim run --listen 0.0.0.0:9192 --advertised kafka-admin.example.com:9192 \\
          --controller 10.0.0.5:9093,10.0.0.6:9093
      kafka-topics.sh --bootstrap-server kafka-admin.example.com:9192 --create --topic t --partitions 3

    \b
    Secured (SCRAM users are the cluster's own; ACLs are the cluster's own):
      zk2kraft shim run --listen 0.0.0.0:9194 --controller 10.0.0.5:9093 \\
          --security-protocol SASL_SSL --ssl-cert shim.pem --ssl-key shim.key \\
          --sasl-mechanisms SCRAM-SHA-512 --authorizer standard --super-users 'User:admin'
    """
    # Here, not at the top: the shim's modules load kio's request schemas, a few hundred ms every other
    # command would pay at start-up.
    from bridge.shim.server import ShimConfig, ShimServer, parse_address, parse_addresses

    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO, format=_LOG_FORMAT, stream=sys.stderr
    )
    listen_host, listen_port = parse_address(listen, "--listen", allow_any_port=True)
    advertised_host, advertised_port = (
        parse_address(advertised, "--advertised") if advertised else (None, None)
    )
    config = ShimConfig.model_validate(
        dict(
            controllers=parse_addresses(controllers, "--controller"),
            listen_host=listen_host,
            listen_port=listen_port,
            advertised_host=advertised_host,
            advertised_port=advertised_port,
            node_id=node_id,
            cluster_id=cluster_id,
            max_request_bytes=max_request_bytes,
            request_timeout_s=request_timeout,
        )
    )
    server = ShimServer(config)
    secure_shim(
        server,
        security_protocol=security_protocol,
        ssl_cert=ssl_cert,
        ssl_key=ssl_key,
        ssl_ca=ssl_ca,
        ssl_client_auth=ssl_client_auth,
        sasl_mechanisms=sasl_mechanisms,
        plain_users=plain_users,
        authorizer=authorizer,
        super_users=super_users,
        allow_everyone_if_no_acl_found=allow_everyone_if_no_acl_found,
    )
    login = controller_sasl_from(controller_sasl)
    secure_controller_channel(
        server, cert=controller_ssl_cert, key=controller_ssl_key, ca=controller_ssl_ca,
        sasl=controller_login(
            login["controller_sasl_mechanism"], login["controller_sasl_username"], login["controller_sasl_password"]
        ),
    )  # fmt: skip
    sys.exit(asyncio.run(server.run()))


def secure_controller_channel(
    server: ShimServer,
    *,
    cert: str | None = None,
    key: str | None = None,
    ca: str | None = None,
    sasl: SaslLogin | None = None,
) -> ShimServer:
    """TLS and the SASL login for the shim's connections to the controllers (Fetch and forwarding), before
    `server` starts."""
    context = controller_ssl_context(cert=cert, key=key, ca=ca)
    server.follower.ssl_context = context
    server.channel.ssl_context = context
    server.follower.sasl = sasl
    server.channel.sasl = sasl
    return server


def controller_login(mechanism: str | None, username: str | None, password: str | None) -> SaslLogin | None:
    """The shim's login to the controllers' SASL listener (--controller-sasl-*); None: none given."""
    return sasl_login(
        mechanism, username, password, options="--controller-sasl", password_env=CONTROLLER_SASL_PASSWORD_ENV
    )


def controller_ssl_context(
    *, cert: str | None = None, key: str | None = None, ca: str | None = None
) -> ssl.SSLContext | None:
    """A client context verifying the controller (`ca`, else the system's CAs) and holding `cert`; None: none given."""
    if cert is None and key is None and ca is None:
        return None
    if key is not None and cert is None:
        raise Zk2KraftError("--controller-ssl-key needs --controller-ssl-cert")
    return client_ssl_context(cafile=ca, certfile=cert, keyfile=key, what="the controller channel")


def secure_shim(
    server: ShimServer,
    *,
    security_protocol: str = "PLAINTEXT",
    ssl_cert: str | None = None,
    ssl_key: str | None = None,
    ssl_ca: str | None = None,
    ssl_client_auth: ClientAuth = "none",
    sasl_mechanisms: str = "SCRAM-SHA-256,SCRAM-SHA-512",
    plain_users: str | None = None,
    authorizer: str = "none",
    super_users: str | frozenset[str] = frozenset(),
    allow_everyone_if_no_acl_found: bool = False,
) -> ShimServer:
    """Give `server` the listener security and authorizer `shim run`'s options ask for (before it starts)."""
    if security_protocol not in SECURITY_PROTOCOLS:
        raise Zk2KraftError(f"--security-protocol {security_protocol!r} is not a Kafka security protocol")
    if security_protocol in ("SSL", "SASL_SSL"):
        if ssl_cert is None:
            raise Zk2KraftError(f"--security-protocol {security_protocol} needs --ssl-cert (and --ssl-key)")
        server.ssl_context = server_ssl_context(ssl_cert, ssl_key, cafile=ssl_ca, client_auth=ssl_client_auth)
    elif ssl_cert is not None:
        raise Zk2KraftError(f"--ssl-cert is given but --security-protocol {security_protocol} has no TLS")
    if security_protocol.startswith("SASL_"):
        server.sasl = sasl_config(server, sasl_mechanisms, plain_users)
    if authorizer in ("standard", "acl"):  # acl: the option's earlier name for it
        supers = parse_super_users(super_users) if isinstance(super_users, str) else super_users
        server.use_acl_authorizer(
            super_users=tuple(sorted(supers)), allow_everyone_if_no_acl_found=allow_everyone_if_no_acl_found
        )
    elif authorizer != "none":
        raise Zk2KraftError(f"--authorizer {authorizer!r}: expected none or standard")
    return server


def sasl_config(server: ShimServer, mechanisms: str, plain_users: str | None) -> SaslConfig:
    """SASL for the listener: PLAIN users from the file, SCRAM credentials from the followed image."""
    return listener_sasl_config(
        parse_mechanisms(mechanisms, "--sasl-mechanisms"),
        Path(plain_users) if plain_users else None,
        lambda: server.follower.image,
        mechanisms_option="--sasl-mechanisms",
        users_option="--plain-users",
    )
