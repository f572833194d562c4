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

from migrate.atomic import staged_directory
from migrate.errors import Zk2KraftError
from migrate.zk.model import MigrationState
from migrate.zk.sources import ZkSource
from validators import report
from validators.columnar import ColumnarSide
from validators.compare import CompareOptions, compare_all, discrepancies, tally
from validators.kraft_tasks import (
    KRAFT_KINDS,
    DamagedSnapshotError,
    KraftPlan,
    kraft_cluster_id,
    kraft_side,
    plan_kraft,
)
from validators.report import AuditFile, AuditInputs, AuditOffsets, AuditSummary, MigrationCheck
from validators.spark import DEFAULT_SHUFFLE_PARTITIONS
from validators.zk_tasks import ZK_KINDS, prepare_zk_input, read_migration_state, remove_temporary, zk_side


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

    def add_side(self, side: str, frames: dict[str, DataFrame]) -> dict[str, str]:
        """A view per row kind of one side: kind -> view name."""
        return {kind: self.add(f"{side}_{kind}", df) for kind, df in frames.items()}

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


AUDIT_OUTPUTS = frozenset({"summary.json", "report.html", "discrepancies.parquet"})
"""What an audit writes into --out: an earlier audit's --out holds only these and may be replaced."""


def check_out_dir(out: Path) -> None:
    """Refuse an --out that is a file or holds anything but an earlier audit's outputs (before any work)."""
    if not out.exists():
        return
    if not out.is_dir():
        raise Zk2KraftError(f"--out {out}: exists and is not a directory")
    foreign = sorted(child.name for child in out.iterdir() if child.name not in AUDIT_OUTPUTS)
    if foreign:
        shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        raise Zk2KraftError(
            f"--out {out}: holds files that are not an audit's outputs ({shown}); refusing to replace it "
            f"(give an empty or new directory)"
        )


def run_audit(spark: SparkSession, options: AuditOptions, *, progress: Callable[[str], None] | None = None) -> AuditResult:
    """Compare the two sides and write summary.json, discrepancies.parquet and report.html into `out`.

    Everything is written into a directory beside `out` and renamed into place at the end: on failure
    `out` is left as it was (absent if it was absent); an earlier audit's `out` is replaced.
    """
    check_out_dir(options.out)
    with staged_directory(options.out) as staging:
        return _audit_into(spark, options, staging, progress or (lambda _msg: None))


def check_migration(state: MigrationState, plan: KraftPlan) -> MigrationCheck:
    """Was /migration written from this log's history? Its offset must be in the log with the epoch
    /migration records for it, and its controller must be the log's leader in its epoch."""
    offset, epoch = state.kraft_metadata_offset, state.kraft_metadata_epoch
    controller, controller_epoch = state.kraft_controller_id, state.kraft_controller_epoch
    problems: list[str] = []
    not_checked: list[str] = []
    last = plan.last_offset
    at_offset = plan.epoch_at(offset)
    if last is None or offset > last:
        problems.append(
            f"/migration says ZooKeeper holds KRaft offset {offset}, but this log ends at "
            f"{'no offset' if last is None else f'offset {last}'}"
        )
    elif at_offset is None:
        not_checked.append(f"the epoch of offset {offset}: it is inside snapshot {plan.snapshot.name if plan.snapshot else ''}")
    elif epoch >= 0 and at_offset != epoch:
        problems.append(
            f"/migration records offset {offset} with epoch {epoch}, but this log holds offset {offset} in leader "
            f"epoch {at_offset}: ZooKeeper was written from another history of the log"
        )
    leader = plan.leaders.get(controller_epoch)
    newest = plan.newest_epoch
    if controller_epoch < 0:
        not_checked.append("the controller: /migration names no controller epoch")
    elif newest is not None and controller_epoch > newest:
        problems.append(
            f"/migration was written by controller {controller} in leader epoch {controller_epoch}, but this log's "
            f"newest leader epoch is {newest}: it is behind, or another cluster's"
        )
    elif leader is None:
        not_checked.append(f"the controller: the files read hold no LeaderChangeMessage of epoch {controller_epoch}")
    elif leader[0] != controller:
        problems.append(
            f"/migration was written by controller {controller} in leader epoch {controller_epoch}, but this log's "
            f"leader in epoch {controller_epoch} was node {leader[0]} (LeaderChangeMessage at offset {leader[1]})"
        )
    return MigrationCheck(
        controller_id=controller,
        controller_epoch=controller_epoch,
        metadata_offset=offset,
        metadata_epoch=epoch,
        log_epoch_at_offset=at_offset,
        log_leader_in_epoch=None if leader is None else leader[0],
        verdict="differs" if problems else "matches",
        problems=problems,
        not_checked=not_checked,
        used=not problems,
    )


def _alignment(kraft_offset: int | None, migration_offset: int | None) -> tuple[int | None, int | None, str]:
    """(stop offset (exclusive), snapshot limit, alignment) of the KRaft side."""
    if kraft_offset is not None:
        stop: int | None = kraft_offset + 1
        alignment = "--kraft-offset"
    elif migration_offset is not None:
        stop = migration_offset + 1
        alignment = "migration znode"
    else:
        stop = None
        alignment = "end of log"
    limit = stop if migration_offset is None else min(x for x in (stop, migration_offset + 1) if x is not None)
    return stop, limit, alignment


def _load_kraft(
    spark: SparkSession,
    options: AuditOptions,
    stop: int | None,
    limit: int | None,
    warnings: list[str],
    say: Callable[[str], None],
    directory: Path,
) -> tuple[KraftPlan, ColumnarSide]:
    """Plan and parse the KRaft side; a damaged snapshot is skipped for an older one or the log, loudly."""
    damaged: dict[Path, str] = {}
    while True:
        plan = plan_kraft(options.kraft, stop_offset=stop, snapshot_limit=limit, damaged=damaged)
        try:
            return plan, kraft_side(spark, plan, directory, shuffle_partitions=options.shuffle_partitions)
        except DamagedSnapshotError as exc:
            snapshot = Path(exc.path)
            if options.kraft.is_file() or snapshot in damaged:
                raise Zk2KraftError(exc.problem) from None
            damaged[snapshot] = exc.problem
            try:
                fallback = plan_kraft(options.kraft, stop_offset=stop, snapshot_limit=limit, damaged=damaged)
            except Zk2KraftError as no_fallback:
                raise Zk2KraftError(
                    f"snapshot {snapshot} is damaged ({exc.problem}) and nothing else holds its state: {no_fallback}"
                ) from None
            instead = (
                f"snapshot {fallback.snapshot.name} and the log from offset {fallback.start_offset}"
                if fallback.snapshot is not None
                else f"the log from offset {fallback.start_offset}"
            )
            warning = f"snapshot {snapshot} is damaged and was skipped ({exc.problem}); the state was rebuilt from {instead}"
            warnings.append(warning)
            say(f"warning: {warning}")


def _audit_into(spark: SparkSession, options: AuditOptions, out: Path, say: Callable[[str], None]) -> AuditResult:
    timings: dict[str, float] = {}
    warnings: list[str] = []
    work = out / ".work"
    final = options.out
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
        zk = zk_side(spark, zk_input, work / "zk", min_partitions=1 if small_zk else max(2, parallelism))
        migration = read_migration_state(zk)
        migration_offset = None if migration is None else migration.kraft_metadata_offset
        timings["zk_parse"] = time.monotonic() - t0

        t0 = time.monotonic()
        say("parsing the KRaft metadata")
        stop, limit, alignment = _alignment(options.kraft_offset, migration_offset)
        check: MigrationCheck | None = None
        if migration is not None:
            check = check_migration(migration, plan_kraft(options.kraft, stop_offset=stop, snapshot_limit=limit))
            if check.problems and options.kraft_offset is None:
                raise Zk2KraftError(
                    "the /migration znode does not match this KRaft log: " + "; ".join(check.problems) + ". Comparing "
                    "at its offset would compare two different points. Give the metadata log of the controller that "
                    f"wrote /migration (node {migration.kraft_controller_id}), or --kraft-offset N to compare at an "
                    "offset you choose (the /migration offset is then not used)"
                )
            if check.problems:
                warnings.append(
                    "the /migration znode does not match this KRaft log (" + "; ".join(check.problems) + "): its "
                    "offset is not used, so no difference is classed as lag"
                )
                migration_offset = None
                stop, limit, alignment = _alignment(options.kraft_offset, None)
        plan, kraft = _load_kraft(spark, options, stop, limit, warnings, say, work / "kraft")
        timings["kraft_parse"] = time.monotonic() - t0
        if plan.snapshot is not None and migration_offset is not None and plan.snapshot_last_offset > migration_offset:
            warnings.append(
                f"the KRaft snapshot holds offsets up to {plan.snapshot_last_offset}, past the /migration offset "
                f"{migration_offset}: differences in it count as lag because the offset of each change is unknown"
            )
        # A segment the snapshot covers is skipped on every healthy run: the files list says so (with its
        # reason), which is a note, not a warning.

        t0 = time.monotonic()
        say("comparing")
        small = zk_input.dump.stat().st_size + plan.bytes < SMALL_INPUT_BYTES
        stack.enter_context(_sql_conf(spark, _SMALL_SETTINGS if small else {}))
        views = _Views(spark)
        stack.callback(views.drop)
        compare_options = CompareOptions(
            migration_offset=migration_offset, dedupe=bool(plan.log_ranges), kraft_cluster_id=kraft_cluster_id(options.kraft)
        )
        zk_views = views.add_side("zk", zk.frames(spark, ZK_KINDS))
        kraft_views = views.add_side("kraft", kraft.frames(spark, KRAFT_KINDS))
        outcome = compare_all(spark, zk_views, kraft_views, compare_options).cache()
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
        report.write_parquet(found, out)
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
                kraft_files=[
                    AuditFile(
                        path=f.path,
                        kind=f.kind,  # type: ignore[arg-type]
                        status="read" if f.read else "skipped",
                        first_offset=f.first_offset,
                        last_offset=f.last_offset,
                        reason=f.reason,
                    )
                    for f in plan.files
                ],
            ),
            offsets=AuditOffsets(
                alignment=alignment,  # type: ignore[arg-type]
                compared_through=None if stop is None else stop - 1,
                migration_offset=None if migration is None else migration.kraft_metadata_offset,
                snapshot_last_offset=None if plan.snapshot is None else plan.snapshot_last_offset,
                migration_check=check,
            ),
            classes=classes,
            kinds=kinds,
            tables=report.table_summaries(counts, zk_rows, kraft_rows),
            timings_s={},
            spark_master=spark.sparkContext.master or "",
            warnings=warnings,
            outputs={
                "summary": str(final / "summary.json"),
                "discrepancies": str(final / "discrepancies.parquet"),
                "report": str(final / "report.html"),
            },
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
