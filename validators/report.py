"""Audit outputs: summary.json (a pydantic model), discrepancies.parquet, and a self-contained report.html."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from migrate.atomic import atomic_write_text
from validators.compare import CLASSES, ERROR, EXPECTED, KINDS, LAG
from validators.tables import TABLES

Verdict = Literal["consistent", "lagging", "inconsistent"]
SAMPLE_ROWS = 20


class TableSummary(BaseModel):
    """Rows on each side and discrepancies of one table."""

    table: str
    zk_rows: int = 0
    kraft_rows: int = 0
    error: int = 0
    lag: int = 0
    expected: int = 0
    missing_in_kraft: int = 0
    missing_in_zk: int = 0
    mismatch: int = 0


class AuditFile(BaseModel):
    """One KRaft file of the input: read or skipped, the offsets it holds (when known) and why."""

    path: str
    kind: Literal["snapshot", "segment"]
    status: Literal["read", "skipped"]
    first_offset: int | None = None
    last_offset: int | None = None
    reason: str


class AuditInputs(BaseModel):
    zk: str
    zk_chroot: str
    accepted_older_zk_state: bool = Field(
        default=False, description="the ZooKeeper data was older than its newest (damaged) snapshot, by request"
    )
    zk_notes: list[str] = Field(default_factory=list)
    kraft: str
    kraft_snapshot: str | None = None
    kraft_segments: list[str] = Field(default_factory=list)
    kraft_bytes: int = 0
    kraft_ranges: int = 0
    kraft_files: list[AuditFile] = Field(default_factory=list)
    """Every snapshot and segment of the KRaft input: which were read, which were skipped and why."""


class MigrationCheck(BaseModel):
    """The /migration znode against the KRaft log: was it written from this log's history?"""

    controller_id: int
    controller_epoch: int
    metadata_offset: int
    metadata_epoch: int
    log_epoch_at_offset: int | None = None
    """Leader epoch of the log's batch at `metadata_offset` (None: the log does not hold it)."""
    log_leader_in_epoch: int | None = None
    """Leader of `controller_epoch` by the log's LeaderChangeMessage (None: not in the files read)."""
    verdict: Literal["matches", "differs"]
    problems: list[str] = Field(default_factory=list)
    not_checked: list[str] = Field(default_factory=list)
    used: bool
    """Whether the /migration offset was used (alignment, lag); not when it differs and --kraft-offset was given."""


class AuditOffsets(BaseModel):
    """Where the KRaft side was compared: `compared_through` is the last offset included (None = all)."""

    alignment: Literal["migration znode", "--kraft-offset", "end of log"]
    compared_through: int | None = None
    migration_offset: int | None = None
    snapshot_last_offset: int | None = None
    migration_check: MigrationCheck | None = None


class AuditSummary(BaseModel):
    """summary.json: verdict, inputs, offsets, counts per table and class, timings."""

    verdict: Verdict
    exit_code: int
    fail_on_lag: bool
    inputs: AuditInputs
    offsets: AuditOffsets
    classes: dict[str, int]
    kinds: dict[str, int]
    tables: list[TableSummary]
    timings_s: dict[str, float]
    spark_master: str
    warnings: list[str] = Field(default_factory=list)
    outputs: dict[str, str] = Field(default_factory=dict)

    @property
    def errors(self) -> int:
        return self.classes.get(ERROR, 0)


def verdict_of(classes: dict[str, int], fail_on_lag: bool) -> tuple[Verdict, int]:
    """(verdict, exit code): errors → inconsistent (1); lag → lagging (1 only with --fail-on lag)."""
    if classes.get(ERROR, 0):
        return "inconsistent", 1
    if classes.get(LAG, 0):
        return "lagging", 1 if fail_on_lag else 0
    return "consistent", 0


def table_summaries(
    counts: list[tuple[str, str, str, int]], zk_rows: dict[str, int], kraft_rows: dict[str, int]
) -> list[TableSummary]:
    by_table = {name: TableSummary(table=name, zk_rows=zk_rows.get(name, 0), kraft_rows=kraft_rows.get(name, 0)) for name in TABLES}
    for table, cls, kind, n in counts:
        summary = by_table[table]
        setattr(summary, cls, getattr(summary, cls) + n)
        setattr(summary, kind, getattr(summary, kind) + n)
    return list(by_table.values())


_COLLECT_ALL = 5000


def sample_rows(df: DataFrame, total: int, per_kind: int = SAMPLE_ROWS) -> dict[str, list[dict[str, Any]]]:
    """The first rows of each kind, errors first, then lag, then expected (one small job)."""
    out: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    if total <= _COLLECT_ALL:
        # Few rows: fetching them all is cheaper than a windowed query.
        priority = {ERROR: 0, LAG: 1, EXPECTED: 2}
        everything = sorted(
            (r.asDict() for r in df.collect()),
            key=lambda r: (priority.get(r["class"], 3), r["table"], r["key"], r["field"] or ""),
        )
        for item in everything:
            if len(out[item["kind"]]) < per_kind:
                out[item["kind"]].append(item)
        return out
    rank = F.when(F.col("class") == ERROR, 0).when(F.col("class") == LAG, 1).otherwise(2)
    order = Window.partitionBy("kind").orderBy(rank, "table", "key", "field")
    rows = (
        df.withColumn("_n", F.row_number().over(order))
        .filter(F.col("_n") <= per_kind)
        .orderBy("kind", "_n")
        .drop("_n")
        .collect()
    )
    for row in rows:
        out[row["kind"]].append(row.asDict())
    return out


def write_parquet(df: DataFrame, out_dir: Path) -> Path:
    """discrepancies.parquet: Spark's directory of part files (one part), readable by any Parquet reader."""
    target = out_dir / "discrepancies.parquet"
    df.coalesce(1).write.mode("overwrite").parquet(str(target))
    return target


def write_summary(summary: AuditSummary, out_dir: Path) -> Path:
    target = out_dir / "summary.json"
    atomic_write_text(target, summary.model_dump_json(indent=2) + "\n")
    target.chmod(0o644)  # a report to share, not a secret (the atomic writer creates files 0600)
    return target


# ---------------------------------------------------------------------------------------------- HTML

_COLORS = {ERROR: "#c62828", LAG: "#ef8f00", EXPECTED: "#9e9e9e"}
_VERDICT_COLORS = {"consistent": "#2e7d32", "lagging": "#ef8f00", "inconsistent": "#c62828"}
_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em;color:#222;max-width:1200px}
.verdict{padding:1em 1.5em;border-radius:6px;color:#fff;font-size:1.4em}
.verdict small{display:block;font-size:.6em;opacity:.9;margin-top:.3em}
table{border-collapse:collapse;margin:1em 0;font-size:.9em}
td,th{border:1px solid #ddd;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#f4f4f4}
td.num{text-align:right;font-variant-numeric:tabular-nums}
td.val{font-family:ui-monospace,monospace;max-width:420px;white-space:pre-wrap;word-break:normal;overflow-wrap:break-word}
.error{color:#c62828;font-weight:600}.lag{color:#ef8f00;font-weight:600}.expected{color:#777}
h2{margin-top:1.6em}
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def readable(value: str | None) -> str:
    """A discrepancy value as people read it: JSON once (field values that are themselves JSON text, such
    as `"[1,2]"`, are shown as the arrays they are) with a space after each separator, so long values
    wrap between items rather than inside a word."""
    if value is None:
        return "null"
    parsed = _parsed(value)
    if parsed is value:
        return value
    return json.dumps(parsed, ensure_ascii=False, separators=(", ", ": "))


def _shown(row: dict[str, Any], column: str) -> str:
    """One side's value in a table cell; the side a missing row is absent from shows that."""
    if row[column] is None and row["kind"] != "mismatch":
        return "(absent)"
    return readable(row[column])


def _parsed(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("[", "{"):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    if isinstance(value, dict):
        return {k: _parsed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_parsed(v) for v in value]
    return value


def chart_svg(tables: list[TableSummary]) -> str:
    """A horizontal stacked bar per table (error, lag, expected), on a log-free linear scale."""
    width, label_w, bar_h, gap = 760, 150, 18, 8
    biggest = max([t.error + t.lag + t.expected for t in tables] + [1])
    height = len(tables) * (bar_h + gap) + 30
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" aria-label="discrepancies per table">']
    for i, t in enumerate(tables):
        y = i * (bar_h + gap) + 4
        parts.append(f'<text x="0" y="{y + 13}" font-size="12">{_e(t.table)}</text>')
        x = float(label_w)
        for cls in (ERROR, LAG, EXPECTED):
            n = getattr(t, cls)
            if n:
                w = max(2.0, (width - label_w - 60) * n / biggest)
                parts.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{_COLORS[cls]}"><title>{cls}: {n}</title></rect>')
                x += w
        total = t.error + t.lag + t.expected
        parts.append(f'<text x="{x + 4:.1f}" y="{y + 13}" font-size="11" fill="#555">{total}</text>')
    legend_y = height - 8
    lx = label_w
    for cls in (ERROR, LAG, EXPECTED):
        parts.append(f'<rect x="{lx}" y="{legend_y - 10}" width="10" height="10" fill="{_COLORS[cls]}"/>')
        parts.append(f'<text x="{lx + 14}" y="{legend_y}" font-size="11">{cls}</text>')
        lx += 90
    parts.append("</svg>")
    return "".join(parts)


def render_html(summary: AuditSummary, samples: dict[str, list[dict[str, Any]]]) -> str:
    """The whole page: verdict first, then inputs, the chart, per-table counts and the first rows of each kind."""
    c = summary.classes
    color = _VERDICT_COLORS[summary.verdict]
    headline = {
        "consistent": "CONSISTENT: ZooKeeper and KRaft hold the same cluster",
        "lagging": "LAGGING: no divergence, but KRaft is ahead of ZooKeeper",
        "inconsistent": "INCONSISTENT: ZooKeeper and KRaft disagree",
    }[summary.verdict]
    out = [
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>zk2kraft audit</title>",
        f"<style>{_CSS}</style></head><body>",
        f'<div class=verdict style="background:{color}">{_e(headline)}'
        f"<small>{c.get(ERROR, 0)} error · {c.get(LAG, 0)} lag · {c.get(EXPECTED, 0)} expected · exit code {summary.exit_code}</small></div>",
        "<h2>Inputs</h2><table>",
    ]
    o, i = summary.offsets, summary.inputs
    facts = [
        ("ZooKeeper", f"{i.zk} (chroot {i.zk_chroot})"),
        ("KRaft", i.kraft),
        ("KRaft snapshot", i.kraft_snapshot or "none"),
        ("KRaft log segments", ", ".join(Path(s).name for s in i.kraft_segments) or "none"),
        ("compared through offset", "end of log" if o.compared_through is None else o.compared_through),
        ("alignment", o.alignment),
        ("/migration offset", "none" if o.migration_offset is None else o.migration_offset),
        ("Spark master", summary.spark_master),
        ("timings (s)", ", ".join(f"{k} {v:.2f}" for k, v in summary.timings_s.items())),
    ]
    out.extend(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in facts)
    out.append("</table>")
    for warning in summary.warnings:
        out.append(f"<p class=lag>warning: {_e(warning)}</p>")
    out.extend(_migration_check(o.migration_check))
    out.extend(_files_table(i.kraft_files))
    out.append("<h2>Discrepancies per table</h2>")
    out.append(chart_svg(summary.tables))
    out.append("<table><tr><th>table</th><th>ZooKeeper rows</th><th>KRaft rows</th><th>error</th><th>lag</th><th>expected</th>"
               "<th>missing in KRaft</th><th>missing in ZooKeeper</th><th>mismatch</th></tr>")
    for t in summary.tables:
        cells = [t.zk_rows, t.kraft_rows, t.error, t.lag, t.expected, t.missing_in_kraft, t.missing_in_zk, t.mismatch]
        out.append(f"<tr><td>{_e(t.table)}</td>" + "".join(f"<td class=num>{n:,}</td>" for n in cells) + "</tr>")
    out.append("</table>")
    titles = {"missing_in_kraft": "Missing in KRaft", "missing_in_zk": "Missing in ZooKeeper", "mismatch": "Field mismatches"}
    for kind in KINDS:
        rows = samples.get(kind, [])
        total = summary.kinds.get(kind, 0)
        out.append(f"<h2>{titles[kind]} ({total:,}{'; first ' + str(len(rows)) if total > len(rows) else ''})</h2>")
        if not rows:
            out.append("<p>none</p>")
            continue
        out.append("<table><tr><th>class</th><th>table</th><th>key</th><th>field</th><th>ZooKeeper</th><th>KRaft</th>"
                   "<th>KRaft offset</th><th>reason</th></tr>")
        for r in rows:
            out.append(
                f"<tr><td class={_e(r['class'])}>{_e(r['class'])}</td><td>{_e(r['table'])}</td><td class=val>{_e(r['key'])}</td>"
                f"<td>{_e(r['field'])}</td><td class=val>{_e(_shown(r, 'zk_value'))}</td><td class=val>{_e(_shown(r, 'kraft_value'))}</td>"
                f"<td class=num>{_e(r['kraft_offset'])}</td><td>{_e(r['reason'] or 'no reason recorded')}</td></tr>"
            )
        out.append("</table>")
    out.append("<p><small>Classes and rules: docs/audit.md. All rows: discrepancies.parquet.</small></p></body></html>")
    return "\n".join(out)


def _migration_check(check: MigrationCheck | None) -> list[str]:
    if check is None:
        return []
    out = [
        "<h2>/migration against the KRaft log</h2><table>",
        f"<tr><th>/migration</th><td>controller {check.controller_id}, leader epoch {check.controller_epoch}, "
        f"offset {check.metadata_offset} in epoch {check.metadata_epoch}</td></tr>",
        f"<tr><th>the log</th><td>offset {check.metadata_offset} in epoch {_e(_or_unknown(check.log_epoch_at_offset))}, "
        f"leader of epoch {check.controller_epoch}: {_e(_or_unknown(check.log_leader_in_epoch))}</td></tr>",
        f"<tr><th>verdict</th><td class={'error' if check.problems else 'expected'}>{_e(check.verdict)}"
        f"{'' if check.used else ' (its offset was not used)'}</td></tr>",
    ]
    out.extend(f"<tr><th>differs</th><td>{_e(p)}</td></tr>" for p in check.problems)
    out.extend(f"<tr><th>not checked</th><td>{_e(n)}</td></tr>" for n in check.not_checked)
    out.append("</table>")
    return out


def _or_unknown(value: int | None) -> str:
    return "unknown" if value is None else str(value)


def _files_table(files: list[AuditFile]) -> list[str]:
    """Every KRaft file of the input: read or skipped, its offsets and why."""
    if not files:
        return []
    out = ["<h2>KRaft files read and skipped</h2><table><tr><th>file</th><th>kind</th><th>status</th><th>offsets</th><th>why</th></tr>"]
    for f in files:
        offsets = "" if f.last_offset is None else f"{'' if f.first_offset is None else f.first_offset}..{f.last_offset}"
        css = "expected" if f.status == "read" else "lag"
        out.append(
            f"<tr><td class=val>{_e(Path(f.path).name)}</td><td>{_e(f.kind)}</td><td class={css}>{_e(f.status)}</td>"
            f"<td>{_e(offsets)}</td><td>{_e(f.reason)}</td></tr>"
        )
    out.append("</table>")
    return out


def write_html(summary: AuditSummary, samples: dict[str, list[dict[str, Any]]], out_dir: Path) -> Path:
    target = out_dir / "report.html"
    atomic_write_text(target, render_html(summary, samples))
    target.chmod(0o644)
    return target


__all__ = ["CLASSES", "AuditSummary", "TableSummary", "render_html", "verdict_of"]
