"""`zk2kraft plan`: preflight checks and a phase-by-phase migration plan with generated configs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from cli.common import EXIT_FINDING, handles_errors, progress
from cli.options import print_source_notices, zk_source_from, zk_source_options
from cli.plan_live import DEFAULT_TIMEOUT, ask_cluster, read_command_config
from migrate.errors import Zk2KraftError
from migrate.plan.checks import run_checks
from migrate.plan.controller_listener import resolve_controller_listener
from migrate.plan.inputs import DEFAULT_BRIDGE_METADATA_DIR, BrokerConfig, parse_controllers
from migrate.plan.live import live_checks
from migrate.plan.load import load_inputs
from migrate.plan.phases import build_plan
from migrate.plan.properties import read_properties_file
from migrate.plan.render import check_out_dir, summary_lines, write_plan
from migrate.zk.model import SECURITY_PROTOCOLS


def _absolute_path(value: str) -> str:
    """A path the bridges and the Kafka controllers name alike on every host: an absolute one."""
    if not value.startswith("/"):
        raise click.BadParameter(f"{value!r} is not an absolute path (Kafka would resolve it against its working directory)")
    return value


def _check_controller_tls(protocol: str, keystore: str | None, truststore: str | None, *, source: str = "") -> None:
    """A TLS controller listener needs its key store; a plaintext one takes no TLS file (exit 2 before reading).
    `source` says where a protocol not given came from."""
    if "SSL" in protocol and keystore is None:
        named = f"{protocol} {source}" if source else f"--controller-protocol {protocol}"
        raise click.BadParameter(
            f"{named} needs --controller-ssl-keystore (the controllers' key and certificate "
            "chain, PEM): without it a Kafka controller cannot open its listener",
            param_hint="--controller-ssl-keystore",
        )
    if "SSL" not in protocol and (keystore is not None or truststore is not None):
        raise click.BadParameter(
            f"--controller-ssl-keystore/--controller-ssl-truststore go with --controller-protocol SSL or SASL_SSL, "
            f"not {protocol}",
            param_hint="--controller-protocol",
        )
    if truststore is not None and keystore is None:
        raise click.BadParameter("--controller-ssl-truststore needs --controller-ssl-keystore")


def _controller_listener(broker_files: list[Path], listener: str | None, protocol: str | None) -> tuple[str, str]:
    """`resolve_controller_listener` of the broker files, read here for these two settings only (before ZooKeeper)."""
    return resolve_controller_listener([BrokerConfig(read_properties_file(p)) for p in broker_files], listener, protocol)


@click.command("plan")
@zk_source_options
@click.option(
    "--broker-config",
    "broker_configs",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A broker's server.properties (repeat for every broker); read as Java's Properties reads it.",
)
@click.option(
    "--controllers",
    metavar="ID@HOST:PORT,...",
    help="The target KRaft controller quorum, e.g. 3000@ctrl1:9093,3001@ctrl2:9093,3002@ctrl3:9093.",
)
@click.option(
    "--meta-properties",
    "meta_files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A broker log dir's meta.properties to compare with /cluster/id (log.dirs found locally are read too).",
)
@click.option(
    "--out",
    "out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write plan.md, plan.json and configs into this new or empty folder (built beside it, then renamed).",
)
@click.option(
    "--force",
    is_flag=True,
    help="Replace an --out folder that holds an earlier plan (plan.json); other non-empty folders are refused.",
)
@click.option(
    "--quorum",
    type=click.Choice(["dynamic", "static"]),
    default="dynamic",
    show_default=True,
    help="dynamic: controller.quorum.bootstrap.servers (Kafka 3.9's docs); static: controller.quorum.voters.",
)
@click.option(
    "--controller-listener",
    help="Name of the controller listener [default: the first of the brokers' controller.listener.names, else "
    "CONTROLLER].",
)
@click.option(
    "--controller-protocol",
    type=click.Choice(SECURITY_PROTOCOLS),
    help="Security protocol of the controller listener [default: as the brokers' listener.security.protocol.map "
    "maps it, else PLAINTEXT]. With SASL_PLAINTEXT or SASL_SSL the listener's SASL settings are read from the "
    "broker files (listener.name.<listener>.sasl.enabled.mechanisms, sasl.mechanism.controller.protocol, the "
    "listener's JAAS logins).",
)
@click.option(
    "--controller-ssl-keystore",
    metavar="PEM",
    callback=lambda _ctx, _param, value: None if value is None else _absolute_path(value),
    help="With --controller-protocol SSL or SASL_SSL (needed then): a PEM file holding the controller's "
    "unencrypted PKCS#8 private key and certificate chain, at this path on every controller host: "
    "listener.name.<listener>.ssl.keystore.location (type PEM) in the controller files, --listen-ssl-cert in "
    "the bridge run lines.",
)
@click.option(
    "--controller-ssl-truststore",
    metavar="PEM",
    callback=lambda _ctx, _param, value: None if value is None else _absolute_path(value),
    help="CA certificates (PEM) that clients of the controller listener must present certificates from: "
    "listener.name.<listener>.ssl.truststore.location (type PEM) with ssl.client.auth=required, and "
    "--listen-ssl-ca in the bridge run lines.",
)
@click.option("--controller-log-dir", help="log.dirs for the generated controller configs.")
@click.option(
    "--bridge-metadata-dir",
    default=DEFAULT_BRIDGE_METADATA_DIR,
    show_default=True,
    callback=lambda _ctx, _param, value: _absolute_path(value),
    help="The bridges' --metadata-dir in the plan's bridge run lines, and metadata.log.dir of the Kafka "
    "controllers that take their place (handoff/).",
)
@click.option("--target-ibp", default="3.9", show_default=True, help="inter.broker.protocol.version to migrate at.")
@click.option(
    "--bootstrap-server",
    metavar="HOST:PORT[,HOST:PORT...]",
    help="Also ask the live brokers: software version (ApiVersions), live configs, offline/under-replicated partitions.",
)
@click.option(
    "--command-config",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Client security properties for --bootstrap-server (security.protocol, sasl.*, ssl.ca.location...).",
)
@click.option(
    "--live-timeout", type=float, default=DEFAULT_TIMEOUT, show_default=True, help="Seconds to wait for live brokers."
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@handles_errors
def plan_cmd(
    broker_configs: tuple[Path, ...],
    controllers: str | None,
    meta_files: tuple[Path, ...],
    out: Path | None,
    force: bool,
    quorum: str,
    controller_listener: str | None,
    controller_protocol: str | None,
    controller_ssl_keystore: str | None,
    controller_ssl_truststore: str | None,
    controller_log_dir: str | None,
    bridge_metadata_dir: str,
    target_ibp: str,
    bootstrap_server: str | None,
    command_config: Path | None,
    live_timeout: float,
    fmt: str,
    **kwargs: Any,
) -> None:
    """Check a ZooKeeper-mode cluster for the migration and write the rolling-upgrade plan.

    Runs every preflight check (blockers first, each with its evidence and the fix) and, with --out,
    writes plan.md, plan.json (schema in docs/plan.md) and one folder of generated .properties files
    (with diffs) per phase. --out must be a new or empty folder; --force replaces a folder holding an
    earlier plan whole (nothing of it stays). Exit 0 without blockers, 1 with blockers (the plan is
    still written), 2 on unreadable input or a refused --out.

    \b
    Example:
      zk2kraft plan --zk zk1:2181/kafka \\
          --broker-config server-1.properties --broker-config server-2.properties \\
          --broker-config server-3.properties \\
          --controllers 3000@ctrl1:9093,3001@ctrl2:9093,3002@ctrl3:9093 --out migration-plan
    \b
    With live brokers (versions, running configs, ISRs):
      zk2kraft plan --zk zk1:2181/kafka --broker-config server-1.properties \\
          --bootstrap-server kafka1:9092 --command-config client.properties
    \b
    Offline, from a ZooKeeper data dir:
      zk2kraft plan --zk-data-dir /var/lib/zookeeper --chroot /kafka --broker-config server.properties
    """
    listener, protocol = _controller_listener(list(broker_configs), controller_listener, controller_protocol)
    derived = "" if controller_protocol is not None else f"(as the brokers map {listener})"
    _check_controller_tls(protocol, controller_ssl_keystore, controller_ssl_truststore, source=derived)
    source = zk_source_from(kwargs)
    if out is not None:
        check_out_dir(out, force=force)  # before reading anything: a refusal costs nothing
    elif force:
        raise Zk2KraftError("--force needs --out")
    with progress(f"reading {source.describe()} and the broker configs"):
        inputs = load_inputs(
            source,
            list(broker_configs),
            parse_controllers(controllers) if controllers else [],
            meta_files=list(meta_files),
            quorum=quorum,
            controller_listener=listener,
            controller_protocol=protocol,
            controller_log_dir=controller_log_dir,
            bridge_metadata_dir=bridge_metadata_dir,
            controller_ssl_keystore=controller_ssl_keystore,
            controller_ssl_truststore=controller_ssl_truststore,
            target_ibp=target_ibp,
        )
    live = []
    if bootstrap_server:
        client_config = read_command_config(command_config) if command_config is not None else {}
        with progress(f"asking the cluster at {bootstrap_server}"):
            live = live_checks(inputs, ask_cluster(bootstrap_server, client_config, live_timeout))
    elif command_config is not None:
        raise Zk2KraftError("--command-config needs --bootstrap-server")
    checks = run_checks(inputs, live)
    plan, files = build_plan(inputs, checks)
    if out is not None:
        write_plan(plan, files, out, force=force)
    if fmt == "json":
        click.echo(plan.model_dump_json(indent=2))
    else:
        for line in summary_lines(plan):
            click.echo(line)
        if out is not None:
            handoff = f", hand-off controllers in {out}/handoff/" if plan.handoff is not None else ""
            click.echo(f"plan written to {out}/plan.md (configs per phase in {out}/<n>-<phase>/{handoff})")
        else:
            click.echo("(pass --out DIR to write plan.md, plan.json and the generated configs)")
    print_source_notices(inputs.zk_warnings, inputs.zk_notes, older_state=inputs.accepted_older_zk_state)
    if plan.blockers:
        sys.exit(EXIT_FINDING)
