"""Click options shared by every command that reads a ZooKeeper tree."""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.markup import escape

from cli.common import stderr
from migrate.zk.live import ZkConnectOptions
from migrate.zk.sources import ZkSource

F = TypeVar("F", bound=Callable[..., Any])


def zk_source_options(func: F) -> F:
    """--zk / --zk-dump / --zk-data-dir (+ --zk-log-dir, --chroot, --up-to-zxid, --accept-older-zk-state), and
    with --zk the options of `zk_security_options`."""
    options = [
        click.option(
            "--zk",
            "zk_connect",
            metavar="HOST:PORT[,HOST:PORT...][/chroot]",
            help="A live ZooKeeper ensemble, written as Kafka's zookeeper.connect (chroot included).",
        ),
        click.option(
            "--zk-dump",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="A dump written by `zk2kraft zk export`.",
        ),
        click.option(
            "--zk-data-dir",
            type=click.Path(exists=True, file_okay=False, path_type=Path),
            help="A ZooKeeper dataDir (or its version-2/), read offline: newest valid snapshot + transaction logs.",
        ),
        click.option(
            "--zk-log-dir",
            type=click.Path(exists=True, file_okay=False, path_type=Path),
            help="ZooKeeper's dataLogDir, when transaction logs live apart from the snapshots.",
        ),
        click.option("--chroot", metavar="/PATH", help="Kafka's chroot inside the tree (for dumps and data dirs)."),
        click.option(
            "--up-to-zxid",
            type=lambda s: int(s, 0),
            metavar="ZXID",
            help="With --zk-data-dir: replay transactions only up to this zxid (e.g. 0x9f00000037).",
        ),
        click.option(
            "--accept-older-zk-state",
            is_flag=True,
            help="With --zk-data-dir: when the newest snapshot is damaged and no transaction log brings an older "
            "one up to its zxid, use the older state anyway (refused by default; recorded in every report).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return zk_security_options(func)


def zk_source_from(kwargs: dict[str, Any]) -> ZkSource:
    """Build a ZkSource from the options added by `zk_source_options` (and remove them from kwargs)."""
    connect = kwargs.pop("zk_connect", None)
    if connect is None and (given := _given_on_command_line(_SECURITY_PARAMS, kwargs)):
        raise click.BadParameter(f"{', '.join(given)} only go with --zk (a live ZooKeeper)", param_hint="--zk")
    security = zk_security_from(kwargs)
    return ZkSource(
        connect=connect,
        options=ZkConnectOptions(connect=connect, **security) if connect else None,
        dump=kwargs.pop("zk_dump", None),
        data_dir=kwargs.pop("zk_data_dir", None),
        log_dir=kwargs.pop("zk_log_dir", None),
        chroot=kwargs.pop("chroot", None),
        up_to_zxid=kwargs.pop("up_to_zxid", None),
        accept_older_state=kwargs.pop("accept_older_zk_state", False),
    )


def print_source_notices(warnings: Sequence[str], notes: Sequence[str] = (), *, older_state: bool = False) -> None:
    """Say on stderr what reading the ZooKeeper source warned about; an accepted older state in bold red."""
    if older_state:
        stderr.print(
            "[bold red]WARNING: this uses an OLDER ZooKeeper state than the newest snapshot "
            "(--accept-older-zk-state); every report written records it[/]",
            markup=True,
            soft_wrap=True,
            highlight=False,
        )
    for warning in warnings:
        stderr.print(f"[yellow]warning:[/] {escape(warning)}", markup=True, soft_wrap=True, highlight=False)
    for note in notes:
        stderr.print(f"note: {escape(note)}", markup=True, soft_wrap=True, highlight=False)


_SECURITY_PARAMS = (
    "zk_digest", "zk_sasl_mechanism", "zk_sasl_username", "zk_sasl_password", "zk_tls", "zk_tls_ca",
    "zk_tls_cert", "zk_tls_key", "zk_tls_key_password", "zk_tls_no_hostname_check",
)  # fmt: skip


def _given_on_command_line(names: Sequence[str], kwargs: dict[str, Any]) -> list[str]:
    """The options among `names` given on the command line (an environment variable set for other
    commands does not count)."""
    ctx = click.get_current_context()
    return [
        "--" + name.replace("_", "-")
        for name in names
        if kwargs.get(name) and ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE
    ]


def zk_security_options(func: F) -> F:
    """--zk-digest, --zk-sasl-*, --zk-tls-*: the credentials and TLS Kafka's brokers use with ZooKeeper.

    Every command that connects to ZooKeeper takes these, with the same help; passwords may come from
    environment variables instead of the command line.
    """
    options = [
        click.option(
            "--zk-digest",
            metavar="USER:PASSWORD",
            envvar="ZK2KRAFT_ZK_DIGEST",
            help="Digest credentials sent with addAuth, for znodes ACL'd to a digest user (env "
            "ZK2KRAFT_ZK_DIGEST keeps the password out of the process list).",
        ),
        click.option(
            "--zk-sasl-mechanism",
            type=click.Choice(["DIGEST-MD5", "GSSAPI"]),
            help="SASL login, as the JAAS Client section of Kafka's brokers (default DIGEST-MD5 when "
            "--zk-sasl-username is given).",
        ),
        click.option("--zk-sasl-username", metavar="USER", help="SASL user (DIGEST-MD5)."),
        click.option(
            "--zk-sasl-password",
            metavar="PASSWORD",
            envvar="ZK2KRAFT_ZK_SASL_PASSWORD",
            help="SASL password (env ZK2KRAFT_ZK_SASL_PASSWORD keeps it out of the process list).",
        ),
        click.option("--zk-tls", is_flag=True, help="Connect with TLS (Kafka's zookeeper.ssl.client.enable=true)."),
        click.option(
            "--zk-tls-ca",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="CA certificates that sign the servers' certificates, PEM (zookeeper.ssl.truststore.location; "
            "default: the system's).",
        ),
        click.option(
            "--zk-tls-cert",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="Client certificate, PEM; may hold the key too (zookeeper.ssl.keystore.location).",
        ),
        click.option(
            "--zk-tls-key",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="Its private key, PEM, when not in --zk-tls-cert.",
        ),
        click.option(
            "--zk-tls-key-password",
            metavar="PASSWORD",
            envvar="ZK2KRAFT_ZK_TLS_KEY_PASSWORD",
            help="Password of the private key (env ZK2KRAFT_ZK_TLS_KEY_PASSWORD).",
        ),
        click.option(
            "--zk-tls-no-hostname-check",
            is_flag=True,
            help="Do not check the server's name against its certificate "
            "(zookeeper.ssl.endpoint.identification.algorithm empty).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def zk_connect_from(connect: str, kwargs: dict[str, Any]) -> ZkConnectOptions:
    """`--zk` with the options of `zk_security_options` (removed from kwargs) as ZkConnectOptions."""
    return ZkConnectOptions(connect=connect, **zk_security_from(kwargs))


def zk_security_from(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The ZkConnectOptions security fields from `zk_security_options`' options (removed from kwargs)."""
    digest = kwargs.pop("zk_digest", None)
    mechanism = kwargs.pop("zk_sasl_mechanism", None)
    username = kwargs.pop("zk_sasl_username", None)
    password = kwargs.pop("zk_sasl_password", None)
    tls = kwargs.pop("zk_tls", False)
    tls_files = {name: kwargs.pop(f"zk_tls_{name}", None) for name in ("ca", "cert", "key", "key_password")}
    no_hostname_check = kwargs.pop("zk_tls_no_hostname_check", False)
    if digest is not None and (":" not in digest or digest.startswith(":")):
        raise click.BadParameter("expected USER:PASSWORD", param_hint="--zk-digest")
    if (username is None) != (password is None):
        raise click.BadParameter("give both --zk-sasl-username and --zk-sasl-password", param_hint="--zk-sasl-*")
    if mechanism == "DIGEST-MD5" and username is None:
        raise click.BadParameter("DIGEST-MD5 needs --zk-sasl-username and --zk-sasl-password")
    given = [f"--zk-tls-{n.replace('_', '-')}" for n, v in tls_files.items() if v is not None]
    if no_hostname_check:
        given.append("--zk-tls-no-hostname-check")
    if tls_files["key"] is not None and tls_files["cert"] is None:
        raise click.BadParameter("--zk-tls-key needs --zk-tls-cert", param_hint="--zk-tls-key")
    if given and not tls:
        raise click.BadParameter(f"{', '.join(given)} without --zk-tls", param_hint="--zk-tls")
    sasl = None
    if mechanism is not None or username is not None:
        sasl = {"mechanism": mechanism or "DIGEST-MD5"}
        if username is not None:
            sasl |= {"username": username, "password": password}
    return {
        "auth_data": (("digest", digest),) if digest is not None else (),
        "sasl_options": sasl,
        "ssl_enable": tls,
        "ssl_cafile": str(tls_files["ca"]) if tls_files["ca"] else None,
        "ssl_certfile": str(tls_files["cert"]) if tls_files["cert"] else None,
        "ssl_keyfile": str(tls_files["key"] or tls_files["cert"]) if tls_files["cert"] else None,
        "ssl_keyfile_password": tls_files["key_password"],
        "ssl_check_hostname": not no_hostname_check,
    }


def bridge_status_url(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """`--bridge-status`: an http:// or https:// URL with a host, refused (exit 2) before anything is read."""
    if value is None:
        return None
    parts = urllib.parse.urlsplit(value)
    if parts.scheme in ("http", "https") and parts.hostname:
        return value
    if "://" not in value:
        raise click.BadParameter(
            f"{value!r} is not a URL; the bridge's status endpoint is served over HTTP: give http://{value}",
            param_hint="--bridge-status",
        )
    raise click.BadParameter(
        f"{value!r} is not an http:// or https:// URL with a host (e.g. http://ctrl1:9404)",
        param_hint="--bridge-status",
    )
