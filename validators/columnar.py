"""Rows of both audit sides as Parquet files written by the Python tasks themselves, read back as tables.

A task turns its wide rows (`validators.tables.wide`) into one Parquet file per row kind, in Arrow's
columns, and hands the driver only the file names, row counts and error messages. Spark then reads each
kind's files with its vectorized Parquet reader: no Python row crosses into the JVM one by one, and no row
set needs caching, since the files are the cache. Like the inputs, the work directory must be at the same
path on every executor (a shared filesystem on a real cluster).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from validators.tables import ERROR_KIND, KIND_INDEX, KINDS, Row

OFFSET_COLUMN = "_offset"
DELETED_COLUMN = "_deleted"
_FLUSH_ROWS = 65536
"""Rows of one kind buffered in a task before they become a Parquet row group (bounds worker memory)."""
MAX_ERRORS = 64


def _arrow_type(kind: DataType) -> pa.DataType:
    if isinstance(kind, ArrayType):
        return pa.list_(_arrow_type(kind.elementType))
    simple: dict[type, pa.DataType] = {
        IntegerType: pa.int32(),
        LongType: pa.int64(),
        StringType: pa.string(),
        DoubleType: pa.float64(),
        BooleanType: pa.bool_(),
    }
    return simple[type(kind)]


def kind_schema(kind: str, with_offsets: bool) -> StructType:
    """The Spark schema of one kind's files: its columns, plus `_offset` and `_deleted` on the KRaft side."""
    fields = list(KINDS[kind].fields)
    if with_offsets:
        fields += [StructField(OFFSET_COLUMN, LongType(), True), StructField(DELETED_COLUMN, BooleanType(), True)]
    return StructType(fields)


def _arrow_schema(schema: StructType) -> pa.Schema:
    return pa.schema([pa.field(f.name, _arrow_type(f.dataType), True) for f in schema.fields])


@dataclass(slots=True)
class TaskOutput:
    """What one task sends back to the driver: where its rows are, how many of each kind, what was wrong."""

    files: dict[str, list[str]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    lines: int = 0
    """Non-blank input lines read (ZooKeeper dumps)."""
    kept: dict[str, list[Row]] = field(default_factory=dict)
    """Rows of the kinds asked to be kept (a few single-znode kinds the driver needs, e.g. /migration)."""


class PartWriter:
    """Buffers one task's wide rows per kind and writes them as `<dir>/<kind>/<part>.parquet`."""

    def __init__(self, directory: str, part: str, *, with_offsets: bool, keep: Iterable[str] = ()) -> None:
        self.directory = directory
        self.part = part
        self.with_offsets = with_offsets
        self.keep = frozenset(keep)
        self.out = TaskOutput()
        self._rows: dict[str, list[Row]] = {}
        self._writers: dict[str, pq.ParquetWriter] = {}

    def add(self, row: Row) -> None:
        kind = row[0]
        if kind == ERROR_KIND:
            if len(self.out.errors) < MAX_ERRORS:
                self.out.errors.append(row[3])
            return
        payload = row[KIND_INDEX[kind]]
        if self.with_offsets:
            payload = (*payload, row[1], row[2])
        if kind in self.keep:
            self.out.kept.setdefault(kind, []).append(payload)
        rows = self._rows.get(kind)
        if rows is None:
            rows = self._rows[kind] = []
        rows.append(payload)
        if len(rows) >= _FLUSH_ROWS:
            self._flush(kind)

    def add_all(self, rows: Iterable[Row]) -> None:
        for row in rows:
            self.add(row)

    def _flush(self, kind: str) -> None:
        rows = self._rows.pop(kind, [])
        if not rows:
            return
        schema = _arrow_schema(kind_schema(kind, self.with_offsets))
        columns = list(zip(*rows, strict=True)) if rows else [()] * len(schema)
        table = pa.Table.from_arrays(
            [pa.array(column, type=f.type) for column, f in zip(columns, schema, strict=True)], schema=schema
        )
        writer = self._writers.get(kind)
        if writer is None:
            folder = os.path.join(self.directory, kind)
            os.makedirs(folder, exist_ok=True)
            path = os.path.join(folder, f"{self.part}.parquet")
            writer = self._writers[kind] = pq.ParquetWriter(path, schema, compression="none")
            self.out.files[kind] = [path]
        writer.write_table(table)
        self.out.counts[kind] = self.out.counts.get(kind, 0) + len(rows)

    def close(self) -> TaskOutput:
        for kind in list(self._rows):
            self._flush(kind)
        for writer in self._writers.values():
            writer.close()
        return self.out


def write_rows(rows: Iterable[Row], directory: str, part: str, *, with_offsets: bool) -> Iterator[TaskOutput]:
    """Inside a task: every wide row of `rows` into Parquet files; the one output, as an iterator for mapPartitions."""
    writer = PartWriter(directory, part, with_offsets=with_offsets)
    writer.add_all(rows)
    yield writer.close()


@dataclass(slots=True)
class ColumnarSide:
    """The files of one side, merged over its tasks."""

    directory: Path
    with_offsets: bool
    files: dict[str, list[str]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    lines: int = 0
    kept: dict[str, list[Row]] = field(default_factory=dict)

    def merge(self, outputs: Iterable[TaskOutput]) -> ColumnarSide:
        for out in outputs:
            for kind, paths in out.files.items():
                self.files.setdefault(kind, []).extend(paths)
            for kind, n in out.counts.items():
                self.counts[kind] = self.counts.get(kind, 0) + n
            for kind, rows in out.kept.items():
                self.kept.setdefault(kind, []).extend(rows)
            self.errors.extend(out.errors)
            self.lines += out.lines
        return self

    def frame(self, spark: SparkSession, kind: str) -> DataFrame:
        """One kind's rows (an empty table when no task produced any)."""
        schema = kind_schema(kind, self.with_offsets)
        paths = self.files.get(kind)
        if not paths:
            return spark.createDataFrame([], schema)
        return spark.read.schema(schema).parquet(*paths)

    def frames(self, spark: SparkSession, kinds: Iterable[str]) -> dict[str, DataFrame]:
        return {kind: self.frame(spark, kind) for kind in kinds}

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def fresh_directory(path: Path) -> Path:
    """An empty directory for one side's files (an earlier attempt's files are removed)."""
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def task_part(index: int) -> str:
    return f"part-{index:05d}"
