"""Crash-safe writes: a set of files appears whole or not at all, next to what the directory already held."""

from __future__ import annotations

from pathlib import Path

import pytest

from migrate.atomic import atomic_write_files


def test_a_set_of_files_is_written_and_what_was_there_is_kept(tmp_path: Path) -> None:
    out = tmp_path / "final"
    out.mkdir()
    (out / "notes.txt").write_text("the operator's\n")
    (out / "controller-1.properties").write_text("old\n")
    written = atomic_write_files(out, {"controller-1.properties": "node.id=1\n", "controller-2.properties": "node.id=2\n"})
    assert written == [out / "controller-1.properties", out / "controller-2.properties"]
    assert {p.name: p.read_text() for p in out.iterdir()} == {
        "notes.txt": "the operator's\n",
        "controller-1.properties": "node.id=1\n",
        "controller-2.properties": "node.id=2\n",
    }


def test_a_failure_while_writing_the_second_file_leaves_the_directory_as_it_was(tmp_path: Path) -> None:
    out = tmp_path / "final"
    out.mkdir()
    (out / "controller-1.properties").write_text("old\n")
    # A lone surrogate cannot be encoded as UTF-8: the second file's write fails after the first was staged.
    texts = {"controller-1.properties": "node.id=1\n", "controller-2.properties": "node.id=\ud8002\n"}
    with pytest.raises(UnicodeEncodeError):
        atomic_write_files(out, texts)
    assert {p.name: p.read_text() for p in out.iterdir()} == {"controller-1.properties": "old\n"}  # no temp file either


def test_a_missing_directory_is_created(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b"
    atomic_write_files(out, {"x.properties": "x=1\n"})
    assert (out / "x.properties").read_text() == "x=1\n"
