"""`zk2kraft shim`: run a redirect shim in front of the bridge controller (admin clients and brokers talk to it)."""

from __future__ import annotations

import asyncio
import logging
import sys

import click

from cli.common import handles_errors

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
    help="Where admin clients and brokers connect (the shim's Kafka-protocol listener).",
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
    help="The broker and controller id the shim reports in Metadata/DescribeCluster; pick one no broker uses.",
)
@click.option(
    "--cluster-id", metavar="ID", help="The cluster id to report (and to check the controller against)."
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
    verbose: bool,
) -> None:
    """Serve admin clients and brokers in front of the bridge controller, as a bridge-release broker does.

    \b
    What the shim does with each request:
      reads      Metadata, DescribeCluster, DescribeConfigs, DescribeAcls, DescribeClientQuotas and
                 DescribeUserScramCredentials are answered from the shim's copy of the cluster metadata,
                 which it keeps by fetching the controller's KRaft log (as a KRaft broker does).
      changes    CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs, IncrementalAlterConfigs,
                 AlterClientQuotas, AlterUserScramCredentials, CreateAcls and DeleteAcls are forwarded in an
                 EnvelopeRequest carrying the client's principal and address (KIP-590); the controller's
                 answer is returned unchanged once the shim's copy shows the change, so reading right
                 after a write sees it.
      brokers    AlterPartition (AlterIsr in versions 0-1) from ZooKeeper-mode brokers goes to the
                 controller as-is, never enveloped.

    The shim tells clients it is the cluster's only broker and its controller, so point admin tools'
    bootstrap servers at it. Anything else (Produce, Fetch, groups, ...) is not served. Several shims
    can run side by side, e.g. one per broker host. SIGTERM or SIGINT stop it (exit 0).

    \b
    Example:
      zk2kraft bridge run --zk zk1:2181/kafka --metadata-dir /var/lib/zk2kraft/meta \\
          --node-id 3000 --listen 10.0.0.5:9093 &
      zk2kraft shim run --listen 0.0.0.0:9192 --advertised kafka-admin.example.com:9192 \\
          --controller 10.0.0.5:9093,10.0.0.6:9093
      kafka-topics.sh --bootstrap-server kafka-admin.example.com:9192 --create --topic t --partitions 3
    """
    from bridge.shim.server import ShimConfig, parse_address, parse_addresses, run_shim

    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO, format=_LOG_FORMAT, stream=sys.stderr
    )
    listen_host, listen_port = parse_address(listen, "--listen")
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
    sys.exit(asyncio.run(run_shim(config)))
