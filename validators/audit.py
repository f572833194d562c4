"""One audit from inputs to outputs: ZooKeeper rows, the aligned KRaft state, discrepancies, report files."""

from __future__ import annotations

import itertools
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from migrate.errors import Zk2KraftError
from migrate.zk.sources import ZkSource
from validators import report
from validators.compare import CompareOptions, compare_all, discrepancies, tally
from validators.kraft_tasks import kraft_cluster_id, kraft_wide, plan_kraft
from validators.report import AuditInputs, AuditOffsets, AuditSummary
from validators.spark import DEFAULT_SHUFFLE_PARTITIONS
from validators.zk_tasks import prepare_zk_input, read_migration_offset, remove_temporary, zk_wide


@dataclass(slots=True)
class AuditOptions:
    """What `zk2kraft audit` was asked; `kraft_offset` is the last KRaft offset to include."""

    zk: ZkSource
    kraft: Path
    out: Path
    kraft_offset: int | None = None
    fail_on_lag: bool = False
    shuffle_partitions: int = DEFAULT_SHUFFLE_PARTITIONS


SMALL_INPUT_BYTES = 64 * 1024 * 1024
"""Below this much input, Spark SQL runs interpreted: compiling generated code costs more than it saves."""
# Small inputs: no code generation, one shuffle partition, no adaptive re-planning (which runs each
# shuffle stage as a job of its own). Each saves seconds of fixed cost on a few thousand rows.
_SMALL_SETTINGS = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.shuffle.partitions": "1",
    "spark.sql.adaptive.enabled": "false",
}


@contextmanager
def _sql_conf(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """Runtime SQL settings for the duration of one audit, restored afterwards (the session may be shared)."""
    before: dict[str, str | None] = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in before.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


class _Views:
    """Temporary views of one audit, named uniquely so audits can share a session."""

    _counter = itertools.count(1)

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.names: list[str] = []
        self.audit = next(self._counter)

    def add(self, name: str, df: DataFrame) -> str:
        view = f"zk2kraft_audit{self.audit}_{name}"
        df.createOrReplaceTempView(view)
        self.names.append(view)
        return view

    def drop(self) -> None:
        for view in self.names:
            self.spark.catalog.dropTempView(view)


@dataclass(slots=True)
class AuditResult:
    summary: AuditSummary
    samples: dict[str, list[dict[str, object]]] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return self.summary.exit_code


def run_audit(spark: SparkSession, options: AuditOptions, *, progress: Callable[[str], None] | None = None) -> AuditResult:
    """Compare the two sides and write summary.json, discrepancies.parquet and report.html into `out`."""
    say = progress or (lambda _msg: None)
    timings: dict[str, float] = {}
    warnings: list[str] = []
    out = options.out
    out.mkdir(parents=True, exist_ok=True)
    work = out / ".work"
    parallelism = spark.sparkContext.defaultParallelism

    started = time.monotonic()
    say("reading ZooKeeper")
    zk_input = prepare_zk_input(spark, options.zk, work)
    warnings += [f"ZooKeeper source: {w}" for w in zk_input.warnings]
    timings["zk_read_driver"] = time.monotonic() - started
    cached: list[DataFrame] = []
    stack = ExitStack()
    try:
        t0 = time.monotonic()
        say("parsing znodes")
        small_zk = zk_input.dump.stat().st_size < SMALL_INPUT_BYTES
        zk_df = zk_wide(spark, zk_input, min_partitions=1 if small_zk else max(2, parallelism))
        cached.append(zk_df)
        migration_offset = read_migration_offset(spark, zk_df)
        timings["zk_parse"] = time.monotonic() - t0

        if options.kraft_offset is not None:
            stop: int | None = options.kraft_offset + 1
            alignment = "--kraft-offset"
        elif migration_offset is not None:
            stop = migration_offset + 1
            alignment = "migration znode"
        else:
            stop = None
            alignment = "end of log"
        limit = stop if migration_offset is None else min(x for x in (stop, migration_offset + 1) if x is not None)

        t0 = time.monotonic()
        say("parsing the KRaft metadata")
        plan = plan_kraft(options.kraft, stop_offset=stop, snapshot_limit=limit)
        kraft_df = kraft_wide(spark, plan, shuffle_partitions=options.shuffle_partitions)
        cached.append(kraft_df)
        timings["kraft_parse"] = time.monotonic() - t0
        if plan.snapshot is not None and migration_offset is not None and plan.snapshot_last_offset > migration_offset:
            warnings.append(
                f"the KRaft snapshot holds offsets up to {plan.snapshot_last_offset}, past the /migration offset "
                f"{migration_offset}: differences in it count as lag because the offset of each change is unknown"
            )

        t0 = time.monotonic()
        say("comparing")
        small = zk_input.dump.stat().st_size + plan.bytes < SMALL_INPUT_BYTES
        stack.enter_context(_sql_conf(spark, _SMALL_SETTINGS if small else {}))
        views = _Views(spark)
        stack.callback(views.drop)
        compare_options = CompareOptions(
            migration_offset=migration_offset, dedupe=bool(plan.log_ranges), kraft_cluster_id=kraft_cluster_id(options.kraft)
        )
        outcome = compare_all(spark, views.add("zk", zk_df), views.add("kraft", kraft_df), compare_options).cache()
        cached.append(outcome)
        outcome_view = views.add("outcome", outcome)
        counts, zk_rows, kraft_rows = tally(spark, outcome_view, compare_options)
        found = discrepancies(spark, outcome_view, compare_options)
        timings["compare"] = time.monotonic() - t0

        t0 = time.monotonic()
        say("writing the report")
        classes = {cls: 0 for cls in report.CLASSES}
        kinds: dict[str, int] = {}
        for _table, cls, kind, n in counts:
            classes[cls] += n
            kinds[kind] = kinds.get(kind, 0) + n
        verdict, exit_code = report.verdict_of(classes, options.fail_on_lag)
        parquet = report.write_parquet(found, out)
        samples = report.sample_rows(found, sum(kinds.values()))
        summary = AuditSummary(
            verdict=verdict,
            exit_code=exit_code,
            fail_on_lag=options.fail_on_lag,
            inputs=AuditInputs(
                zk=zk_input.origin,
                zk_chroot=zk_input.kafka_chroot,
                accepted_older_zk_state=zk_input.older_state_accepted,
                zk_notes=zk_input.notes,
                kraft=str(options.kraft),
                kraft_snapshot=None if plan.snapshot is None else str(plan.snapshot),
                kraft_segments=[str(s) for s in plan.segments],
                kraft_bytes=plan.bytes,
                kraft_ranges=len(plan.ranges),
            ),
            offsets=AuditOffsets(
                alignment=alignment,  # type: ignore[arg-type]
                compared_through=None if stop is None else stop - 1,
                migration_offset=migration_offset,
                snapshot_last_offset=None if plan.snapshot is None else plan.snapshot_last_offset,
            ),
            classes=classes,
            kinds=kinds,
            tables=report.table_summaries(counts, zk_rows, kraft_rows),
            timings_s={},
            spark_master=spark.sparkContext.master or "",
            warnings=warnings,
            outputs={"summary": str(out / "summary.json"), "discrepancies": str(parquet), "report": str(out / "report.html")},
        )
        timings["report"] = time.monotonic() - t0
        timings["total"] = time.monotonic() - started
        summary.timings_s = {k: round(v, 3) for k, v in timings.items()}
        report.write_summary(summary, out)
        report.write_html(summary, samples, out)
        return AuditResult(summary, samples)
    finally:
        stack.close()
        for df in cached:
            df.unpersist()
        remove_temporary(zk_input)
        shutil.rmtree(work, ignore_errors=True)


__all__ = ["AuditOptions", "AuditResult", "Zk2KraftError", "run_audit"]
