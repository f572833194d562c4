"""Crash-safe file and directory writes: temp file (or directory), fsync, rename, fsync of the directory."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any


def fsync_directory(directory: Path) -> None:
    """Make a rename or create inside `directory` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def atomic_writer(path: str | os.PathLike[str], mode: str = "wb") -> Iterator[IO[Any]]:
    """Stream into a temp file beside `path`; on success fsync and rename it into place.

    On any exception the temp file is removed and `path` is left as it was.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    encoding = None if "b" in mode else "utf-8"
    try:
        with os.fdopen(fd, mode, encoding=encoding) as tmp:
            yield tmp
            tmp.flush()
            os.fsync(tmp.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    fsync_directory(target.parent)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace `path` with `data` so readers see the old file or the new one, never a mix."""
    with atomic_writer(path, "wb") as out:
        out.write(data)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Text variant of atomic_write_bytes (UTF-8)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_files(directory: str | os.PathLike[str], texts: dict[str, str]) -> list[Path]:
    """Write a set of files into `directory`: every one to a fsynced temp file first, then all renamed.

    A failure while writing leaves `directory` as it was (the temp files removed); only a crash during the
    renames themselves, after every file is durable, can leave some renamed and the rest as temp files.
    """
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    staged: list[tuple[str, Path]] = []
    try:
        for name, text in texts.items():
            fd, tmp_name = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
            staged.append((tmp_name, folder / name))
            with os.fdopen(fd, "w", encoding="utf-8") as tmp:
                tmp.write(text)
                tmp.flush()
                os.fsync(tmp.fileno())
    except BaseException:
        for tmp_name, _target in staged:
            with suppress(FileNotFoundError):
                os.unlink(tmp_name)
        raise
    for tmp_name, target in staged:
        os.replace(tmp_name, target)
    fsync_directory(folder)
    return [target for _tmp, target in staged]


@contextmanager
def staged_directory(target: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary directory beside `target`, swapped into its place when the block succeeds.

    On any exception the staging directory is removed and `target` is left as it was (absent if it was
    absent). An existing `target` is replaced: the caller decides beforehand whether it may be.
    """
    final = Path(target)
    parent = final.absolute().parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=parent))
    try:
        yield staging
        swap_directory_into_place(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def swap_directory_into_place(staging: Path, target: Path) -> None:
    """Rename the finished `staging` dir to `target`; an existing `target` is moved aside first, removed last.

    Readers see the old directory or the new one; a crash between the two renames leaves both, the old one
    as `.<name>.old-*` beside `target`, so nothing is lost.
    """
    old: Path | None = None
    if target.exists():
        old = target.with_name(f".{target.name}.old-{uuid.uuid4().hex[:8]}")
        os.rename(target, old)
    try:
        os.rename(staging, target)
    except BaseException:
        if old is not None:
            os.rename(old, target)
        raise
    fsync_directory(target.absolute().parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
