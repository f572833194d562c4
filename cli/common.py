"""Shared CLI plumbing: turning library errors into clear messages and exit codes."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import click
from rich.console import Console

from migrate.errors import Zk2KraftError

P = ParamSpec("P")
R = TypeVar("R")

# Exit codes: 0 ok, 1 a finding (audit error, plan blocker), 2 bad input or failed operation.
EXIT_FINDING = 1
EXIT_BAD_INPUT = 2

stderr = Console(stderr=True, highlight=False, soft_wrap=True)


def fail(message: str, code: int = EXIT_BAD_INPUT) -> None:
    """Print an error line to stderr and exit with `code`."""
    stderr.print(f"[bold red]error:[/] {message}", markup=True, soft_wrap=True)
    sys.exit(code)


def handles_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Report Zk2KraftError (and unreadable paths) as one clear line and exit 2, without a traceback."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except BrokenPipeError:
            # The reader of our output went away (`| head`): stop quietly, as Unix tools do.
            sys.stderr.close()
            sys.exit(0)
        except Zk2KraftError as exc:
            fail(str(exc))
        except OSError as exc:
            name = exc.filename if exc.filename is not None else ""
            fail(f"{name}: {exc.strerror or exc}")
        except KeyboardInterrupt:
            fail("interrupted", 130)
        raise AssertionError("unreachable")

    return wrapper


def progress_enabled() -> bool:
    """Progress bars only when stderr is a terminal (never in CI logs or pipes)."""
    return sys.stderr.isatty()


def echo_json_line(text: str) -> None:
    click.echo(text)
