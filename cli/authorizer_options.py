"""The authorizer options `bridge run` and `shim run` share (Kafka's authorizer.class.name, super.users,
allow.everyone.if.no.acl.found), with one parser for their values."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from bridge.handlers.authorizer import parse_super_users
from migrate.errors import Zk2KraftError

F = TypeVar("F", bound=Callable[..., Any])

AUTHORIZERS = ("none", "standard")
_ALIASES = {"acl": "standard"}
"""Earlier names still accepted (`shim run --authorizer acl`), not shown in --help."""


class AuthorizerChoice(click.Choice):  # type: ignore[type-arg]
    """none|standard; an old alias is taken as the value it stands for."""

    def __init__(self) -> None:
        super().__init__(AUTHORIZERS, case_sensitive=False)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and value.lower() in _ALIASES:
            return _ALIASES[value.lower()]
        return super().convert(value, param, ctx)


def _super_users(_ctx: click.Context, param: click.Parameter, value: str | None) -> frozenset[str]:
    try:
        return parse_super_users(value or "")
    except Zk2KraftError as exc:
        raise click.BadParameter(str(exc), param=param) from None


def authorizer_options(what: str) -> Callable[[F], F]:
    """`--authorizer`, `--super-users`, `--allow-everyone-if-no-acl-found` for a command serving `what`."""

    def decorate(command: F) -> F:
        options = [
            click.option(
                "--authorizer",
                type=AuthorizerChoice(),
                default="none",
                show_default=True,
                help=f"Kafka's authorizer.class.name for {what}. standard: Kafka's StandardAuthorizer over the "
                "cluster's own ACLs (the ones in the metadata log, so an ACL created or deleted takes effect "
                "for the next request, no restart), checking each request as Kafka 3.9 does (a refused "
                "request or item gets Kafka's *_AUTHORIZATION_FAILED error and changes nothing); none: every "
                "request is allowed, as Kafka without an authorizer.",
            ),
            click.option(
                "--super-users",
                metavar="User:a;User:b",
                callback=_super_users,
                help="Kafka's super.users (with --authorizer standard): these principals may do anything, "
                "whatever the ACLs say. Principals are User:<subject DN> for TLS client certificates (RFC "
                "2253 as Java prints it, e.g. User:CN=admin,O=example), User:<name> for SASL users, "
                "User:ANONYMOUS on PLAINTEXT.",
            ),
            click.option(
                "--allow-everyone-if-no-acl-found",
                is_flag=True,
                help="Kafka's allow.everyone.if.no.acl.found (with --authorizer standard): a resource no ACL "
                "matches is open to every principal; by default it is open to super users only.",
            ),
        ]
        for option in reversed(options):
            command = option(command)
        return command

    return decorate
