"""Click options for SASL on a Kafka listener and for logging in to the controllers' listener, shared by
`bridge run` and `shim run`, and reading a password from a file or the environment."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import click

from bridge.config import CONTROLLER_SASL_PASSWORD_ENV
from migrate.errors import Zk2KraftError

MECHANISMS_HELP = "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (GSSAPI and OAUTHBEARER cannot be served)"


def read_secret(path: Path | None, option: str, env: str | None) -> str | None:
    """A password from the file `option` names, else from the environment variable `env` (never from the
    command line, where every user of the machine sees it); None when neither is given."""
    if path is not None:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise Zk2KraftError(f"{option} {path}: cannot read it: {exc}") from exc
        password = text.removesuffix("\n").removesuffix("\r")
        if not password:
            raise Zk2KraftError(f"{option} {path}: the file is empty")
        if "\n" in password or "\r" in password:
            raise Zk2KraftError(
                f"{option} {path}: holds more than one line; the password must be its only line (one "
                "trailing newline is fine)"
            )
        return password
    if env is None:
        return None
    value = os.environ.get(env)
    if value is not None and not value:
        raise Zk2KraftError(f"the environment variable {env} is set but empty")
    return value


def keep_secrets_out_of_debug_logs() -> None:
    """Hold kazoo's loggers at INFO even with -v: its DEBUG lines print every znode it reads or writes, and
    /config/users/<user> holds SCRAM salts and keys."""
    logging.getLogger("kazoo").setLevel(logging.INFO)


def _apply(func: Any, options: list[Any]) -> Any:
    for option in reversed(options):
        func = option(func)
    return func


def listen_sasl_options(func: Any) -> Any:
    """--listen-sasl-mechanisms, --listen-plain-users, --listen-ssl-principal-mapping-rules (bridge run)."""
    return _apply(func, [
        click.option(
            "--listen-sasl-mechanisms",
            metavar="MECH[,MECH...]",
            help=f"Make --listen SASL_PLAINTEXT (SASL_SSL with --listen-ssl-cert) with these mechanisms: "
            f"{MECHANISMS_HELP}; Kafka's listener.name.<controller listener>.sasl.enabled.mechanisms. Every "
            "connection logs in before any request is served and is User:<login name>. SCRAM logins are "
            "checked against the SCRAM credentials in the bridge's own metadata (migrated from ZooKeeper, "
            "changed by AlterUserScramCredentials), as a KRaft controller checks them: a credential committed "
            "now serves the next login. Give every voter the same value.",
        ),
        click.option(
            "--listen-plain-users",
            type=click.Path(dir_okay=False, path_type=Path),
            metavar="FILE",
            help="PLAIN's users (needed when --listen-sasl-mechanisms enables PLAIN): `user=password` lines, "
            "# comments, or the JAAS form user_<name>=\"<password>\" (PlainLoginModule's options). Keep it "
            "readable by the bridge only; its passwords are never logged or shown.",
        ),
        click.option(
            "--listen-ssl-principal-mapping-rules",
            metavar="RULES",
            help="Kafka's ssl.principal.mapping.rules for client certificates on a TLS listener without SASL "
            "(needs --listen-ssl-ca): comma-separated RULE:pattern/replacement/[L|U] and DEFAULT, the first "
            "rule whose pattern matches the whole subject DN names the principal, e.g. "
            "'RULE:^CN=([^,]*),OU=brokers.*$/$1/L,DEFAULT' makes CN=Kafka-1,OU=brokers,O=acme User:kafka-1. "
            "Default: DEFAULT (User:<subject DN>). A certificate no rule maps is refused.",
        ),
    ])


def controller_sasl_options(func: Any) -> Any:
    """--controller-sasl-mechanism/-username/-password-file: logging in to the controllers' listener."""
    return _apply(func, [
        click.option(
            "--controller-sasl-mechanism",
            metavar="MECH",
            help=f"Log in to the controllers' --listen with SASL ({MECHANISMS_HELP}); Kafka's "
            "sasl.mechanism.controller.protocol. Needed when the bridges' listener has --listen-sasl-mechanisms: "
            "on `bridge run` for the voters' connections to each other (the same on every voter; PLAIN unless "
            "the SCRAM credential is already in the metadata: before the migration copies ZooKeeper's "
            "credentials a new quorum has none), on `shim run` for its fetching and forwarding.",
        ),
        click.option("--controller-sasl-username", metavar="USER", help="The login name (the JAAS username)."),
        click.option(
            "--controller-sasl-password-file",
            type=click.Path(dir_okay=False, path_type=Path),
            metavar="FILE",
            help=f"A file holding the password (one line), else env {CONTROLLER_SASL_PASSWORD_ENV}; never on "
            "the command line, never printed.",
        ),
    ])


def listen_sasl_from(kwargs: dict[str, Any]) -> dict[str, Any]:
    """BridgeConfig's listener SASL fields from `listen_sasl_options`' options (removed from kwargs)."""
    mechanisms = kwargs.pop("listen_sasl_mechanisms")
    return {
        "listen_sasl_mechanisms": () if mechanisms is None else mechanisms,
        "listen_plain_users": kwargs.pop("listen_plain_users"),
        "listen_ssl_principal_mapping_rules": kwargs.pop("listen_ssl_principal_mapping_rules"),
    }


def controller_sasl_from(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The controller login's fields (mechanism, username, password) from `controller_sasl_options`' options
    (removed from kwargs); the environment's password counts only with a mechanism."""
    mechanism = kwargs.pop("controller_sasl_mechanism")
    password = read_secret(
        kwargs.pop("controller_sasl_password_file"),
        "--controller-sasl-password-file",
        CONTROLLER_SASL_PASSWORD_ENV if mechanism else None,
    )
    return {
        "controller_sasl_mechanism": mechanism,
        "controller_sasl_username": kwargs.pop("controller_sasl_username"),
        "controller_sasl_password": password,
    }
