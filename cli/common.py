"""Shared CLI plumbing: turning library errors into clear messages and exit codes."""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, ParamSpec, TypeVar

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

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
from migrate.zk.live import ZkConnectOptions, kazoo_warnings_to_debug
from migrate.zk.sources import split_connect_string

if TYPE_CHECKING:
    from kazoo.client import KazooClient

__all__ = [
    "EXIT_BAD_INPUT", "EXIT_CODES", "EXIT_FAILED", "EXIT_FENCED", "EXIT_FINDING", "EXIT_INTERRUPTED",
    "EXIT_OK", "EXIT_UNREACHABLE", "exit_codes_help", "fail", "handles_errors", "progress", "zk_session",
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


PROGRESS_EVERY_S = 5.0
PROGRESS_ENV = "ZK2KRAFT_PROGRESS_INTERVAL"


def progress_interval() -> float:
    """Seconds between progress lines in a log: $ZK2KRAFT_PROGRESS_INTERVAL, else 5 (0: every step at once)."""
    value = os.environ.get(PROGRESS_ENV)
    if value is None:
        return PROGRESS_EVERY_S
    try:
        return max(0.0, float(value))
    except ValueError:
        raise Zk2KraftError(f"${PROGRESS_ENV} is {value!r}, not a number of seconds") from None


class ProgressReporter:
    """The current step of a long command and how far it got; `progress()` shows it."""

    def __init__(self, description: str, total: int | None) -> None:
        self.description = description
        self.total = total
        self.completed: int | None = None
        self.started = time.monotonic()
        self.lock = threading.Lock()
        self._bar: tuple[Progress, TaskID] | None = None
        self._log = False

    def update(self, description: str | None = None, *, completed: int | None = None) -> None:
        """A new step (printed at once in logs) and/or a new count (shown with the next periodic line)."""
        with self.lock:
            changed = description is not None and description != self.description
            if changed:
                self.completed = None  # a count belongs to its step
            if description is not None:
                self.description = description
            if completed is not None:
                self.completed = completed
            if self._bar is not None:
                bar, task = self._bar
                bar.update(task, description=self.description, completed=self.completed or 0)
            elif self._log and changed:
                self._print_line()

    def line(self) -> str:
        count = ""
        if self.completed is not None:
            count = f": {self.completed:,}" + (f"/{self.total:,}" if self.total is not None else "")
        return f"progress: {self.description}{count} ({time.monotonic() - self.started:.0f} s)"

    def _print_line(self) -> None:
        stderr.print(self.line(), markup=False, highlight=False)


@contextmanager
def progress(description: str, *, total: int | None = None, every_s: float | None = None) -> Iterator[ProgressReporter]:
    """Show a long command's progress on stderr: a transient bar on a terminal. In a log or pipe, a command
    that ends within `every_s` seconds (default `progress_interval()`) prints nothing; a longer one prints
    its step then, every `every_s` seconds after, and at each change of step."""
    reporter = ProgressReporter(description, total)
    if sys.stderr.isatty():
        columns = [SpinnerColumn(), TextColumn("{task.description}")]
        if total is not None:
            columns += [BarColumn(), MofNCompleteColumn()]
        with Progress(*columns, TimeElapsedColumn(), console=stderr, transient=True) as bar:
            reporter._bar = (bar, bar.add_task(description, total=total))
            yield reporter
        return
    interval = progress_interval() if every_s is None else every_s
    if interval <= 0:
        reporter._log = True
        reporter._print_line()
        yield reporter
        return
    done = threading.Event()

    def tick() -> None:
        while not done.wait(interval):
            with reporter.lock:
                reporter._log = True
                reporter._print_line()

    ticker = threading.Thread(target=tick, name="zk2kraft-progress", daemon=True)
    ticker.start()
    try:
        yield reporter
    finally:
        done.set()
        ticker.join()


def echo_json_line(text: str) -> None:
    click.echo(text)


@contextmanager
def zk_session(
    options: ZkConnectOptions, chroot: str | None = None, *, require_kafka: bool = True, create_chroot: bool = False
) -> Iterator[KazooClient]:
    """A started kazoo client with `options`' credentials and TLS, rooted at Kafka's chroot (from the connect
    string or --chroot); with `create_chroot`, rooted at the ensemble's root instead (the caller creates
    the chroot).

    Errors name the address and chroot; kazoo's retry warnings stay out of the output for the whole session.
    """
    hosts, own = split_connect_string(options.connect)
    if chroot and own != "/":
        raise Zk2KraftError("give the chroot either in --zk HOST:PORT/chroot or with --chroot, not both")
    root = (chroot or own).strip("/")
    rooted = replace(options, connect=hosts + (f"/{root}" if root else ""))
    session = replace(options, connect=hosts) if create_chroot else rooted
    with kazoo_warnings_to_debug():
        try:
            client = session.start_client(timeout=15, require_kafka=require_kafka)
        except UnreachableError as exc:
            if session is rooted:
                raise
            # Connected at the root only to create the chroot: the operator gave the chroot, so name it.
            raise UnreachableError(str(exc).replace(session.describe(), rooted.describe())) from None
        try:
            yield client
        finally:
            client.stop()
            client.close()
