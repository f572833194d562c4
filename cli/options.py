"""Click options shared by every command that reads a ZooKeeper tree."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.markup import escape

from cli.common import stderr
from migrate.zk.sources import ZkSource

F = TypeVar("F", bound=Callable[..., Any])


def zk_source_options(func: F) -> F:
    """--zk / --zk-dump / --zk-data-dir (+ --zk-log-dir, --chroot, --up-to-zxid, --accept-older-zk-state)."""
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
    return func


def zk_source_from(kwargs: dict[str, Any]) -> ZkSource:
    """Build a ZkSource from the options added by `zk_source_options` (and remove them from kwargs)."""
    return ZkSource(
        connect=kwargs.pop("zk_connect", None),
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
