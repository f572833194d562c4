"""Shared CLI plumbing: turning library errors into clear messages and exit codes."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, ParamSpec, TypeVar

import click
from rich.console import Console

from migrate.errors import (
    EXIT_BAD_INPUT,
    EXIT_CODES,
    EXIT_FAILED,
    EXIT_FENCED,
    EXIT_FINDING,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    UnreachableError,
    Zk2KraftError,
)

if TYPE_CHECKING:
    from kazoo.client import KazooClient

__all__ = [
    "EXIT_BAD_INPUT", "EXIT_CODES", "EXIT_FAILED", "EXIT_FENCED", "EXIT_FINDING", "EXIT_INTERRUPTED",
    "EXIT_OK", "EXIT_UNREACHABLE", "exit_codes_help", "fail", "handles_errors", "zk_session",
]  # fmt: skip

P = ParamSpec("P")
R = TypeVar("R")

stderr = Console(stderr=True, highlight=False, soft_wrap=True)


def fail(message: str, code: int = EXIT_BAD_INPUT) -> None:
    """Print an error line to stderr and exit with `code`."""
    stderr.print(f"[bold red]error:[/] {message}", markup=True, soft_wrap=True)
    sys.exit(code)


def exit_codes_help() -> str:
    """The exit-code table as `--help` shows it (the table itself lives in migrate.errors)."""
    return "\b\nExit codes (every command):\n" + "\n".join(f"  {code:<4} {meaning}" for code, meaning in EXIT_CODES)


def handles_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Report Zk2KraftError (and unreadable paths) as one clear line and its exit code, without a traceback."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except BrokenPipeError:
            # The reader of our output went away (`| head`): stop quietly, as Unix tools do.
            sys.stderr.close()
            sys.exit(0)
        except UnreachableError as exc:
            fail(str(exc), EXIT_UNREACHABLE)
        except Zk2KraftError as exc:
            fail(str(exc))
        except OSError as exc:
            name = exc.filename if exc.filename is not None else ""
            fail(f"{name}: {exc.strerror or exc}")
        except KeyboardInterrupt:
            fail("interrupted", EXIT_INTERRUPTED)
        raise AssertionError("unreachable")

    return wrapper


def progress_enabled() -> bool:
    """Progress bars only when stderr is a terminal (never in CI logs or pipes)."""
    return sys.stderr.isatty()


def echo_json_line(text: str) -> None:
    click.echo(text)


@contextmanager
def zk_session(connect: str, chroot: str | None = None, *, require_kafka: bool = True) -> Iterator[KazooClient]:
    """A started kazoo client rooted at Kafka's chroot (from the connect string or --chroot).

    Errors name the address and chroot; kazoo's retry warnings stay out of the output for the whole session.
    """
    from migrate.zk.live import ZkConnectOptions, kazoo_warnings_to_debug
    from migrate.zk.sources import split_connect_string

    hosts, own = split_connect_string(connect)
    if chroot and own != "/":
        raise Zk2KraftError("give the chroot either in --zk HOST:PORT/chroot or with --chroot, not both")
    root = (chroot or own).strip("/")
    options = ZkConnectOptions(connect=hosts + (f"/{root}" if root else ""))
    with kazoo_warnings_to_debug():
        client = options.start_client(timeout=15, require_kafka=require_kafka)
        try:
            yield client
        finally:
            client.stop()
            client.close()
