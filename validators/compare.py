"""Full outer join of the two sides → discrepancies, each classified as error, expected or lag (docs/audit.md).

Every table of both sides is projected to one generic shape — table, key (JSON of the key columns, for the
join; readable text, for people), field values as text in the table's field order — so all tables are
compared in a single full outer join on (table, key) instead of one join (and shuffle) per table. Values
are compared as text, which is exact: arrays print as `[1,2,3]`, numbers and strings as themselves.

The whole comparison is one SQL statement over the two sides' temporary views: Spark analyses it once,
where building the same plan through the DataFrame API costs hundreds of JVM round trips.

A discrepancy is one row: the table, the row's key, its kind (`missing_in_kraft`, `missing_in_zk`,
`mismatch`), the field (mismatches only), both values (a missing row shows the present side as JSON of its own types), the
class and the reason for it, and the KRaft offset of the last record that touched the row.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import ArrayType, DataType

from validators.kraft_tasks import kraft_ctes
from validators.tables import TABLES, ZK_CONFIG_RESOURCE_TYPES, TableSpec, sql_string
from validators.zk_tasks import zk_ctes

MISSING_IN_KRAFT = "missing_in_kraft"
MISSING_IN_ZK = "missing_in_zk"
MISMATCH = "mismatch"
KINDS = (MISSING_IN_KRAFT, MISSING_IN_ZK, MISMATCH)

ERROR = "error"
EXPECTED = "expected"
LAG = "lag"
CLASSES = (ERROR, LAG, EXPECTED)

BROKERS_EXPECTED = (
    "broker registrations are ephemeral: ZooKeeper-mode brokers register with the KRaft controller only once "
    "restarted in migration mode, and KRaft brokers never register in ZooKeeper"
)
FEATURES_EXPECTED = (
    "Kafka's migration does not copy /feature: KRaft finalizes metadata.version and other features itself"
)
KRAFT_ONLY_CONFIG = "a config resource type ZooKeeper mode cannot store"
PARTITION_EPOCH = (
    "the partition epoch is the state znode's version in ZooKeeper; dual writes do not keep it equal to "
    "KRaft's partition epoch"
)
LAG_REASON = "changed in KRaft after the offset ZooKeeper has caught up to (write-behind)"
ERROR_REASONS = {
    MISSING_IN_KRAFT: "in ZooKeeper but not in KRaft: the migration or a dual write lost it, or it was written to "
    "ZooKeeper behind the controller's back",
    MISSING_IN_ZK: "in KRaft but not in ZooKeeper: a dual write did not reach ZooKeeper",
    MISMATCH: "the two sides hold different values: a dual write did not reach ZooKeeper, or one side was "
    "changed behind the controller's back",
}
"""Why an error is one: what differs; no expected-difference rule and no lag explains it."""
NO_CLUSTER_ID = "one side has no cluster id to compare (a lone KRaft file has no meta.properties)"


@dataclass(frozen=True, slots=True)
class CompareOptions:
    """`migration_offset`: the KRaft offset ZooKeeper holds (from /migration); changes after it are lag.
    `dedupe`: collapse several KRaft rows of one key (only a log can produce them)."""


    migration_offset: int | None = None
    dedupe: bool = True
    kraft_cluster_id: str | None = None
    """cluster.id of the KRaft side's meta.properties (None when the input has none)."""


def _text(column: str, kind: DataType) -> str:
    """A value as text: arrays as `[1,2,3]`, everything else cast (null stays null)."""
    if isinstance(kind, ArrayType):
        return f"concat('[', array_join({column}, ','), ']')"
    return f"CAST({column} AS STRING)"


def _generic(spec: TableSpec, source: str, extra: str) -> str:
    """One table in the shape every table shares: tbl, jkey, key, vals (+ the side's extra columns)."""
    keys = spec.key_names
    jkey = "to_json(named_struct(" + ", ".join(f"'{k}', {k}" for k in keys) + "))"
    key = "concat_ws(' ', " + ", ".join(f"concat('{k}=', coalesce(CAST({k} AS STRING), 'null'))" for k in keys) + ")"
    vals = "array(" + ", ".join(_text(name, kind) for name, kind in spec.fields) + ")"
    # The row as JSON with its own types (arrays as arrays, nulls kept): what a missing row shows.
    doc = "to_json(named_struct(" + ", ".join(f"'{name}', {name}" for name, _ in spec.fields) + "), map('ignoreNullFields', 'false'))"
    return f"SELECT '{spec.name}' AS tbl, {jkey} AS jkey, {key} AS key, {vals} AS vals, {doc} AS doc, {extra} FROM {source}"


TYPED_TABLES = ("partitions",)
"""Tables joined on their own typed key columns instead of the generic JSON key: they hold nearly all rows,
so only their typed columns are shuffled, and text and JSON forms are made only for rows that differ."""


def _entry(kind: str, field: str, zk: str, kraft: str) -> str:
    return f"named_struct('kind', '{kind}', 'field', {field}, 'zk_value', {zk}, 'kraft_value', {kraft})"


_NULL = "CAST(NULL AS STRING)"


def _diffs(z_doc: str, k_doc: str, names: str, z_vals: str, k_vals: str) -> str:
    """The discrepancies of one joined row: missing on one side, or one entry per field that differs."""
    mismatches = (
        f"filter(transform({names}, (n, i) -> CASE WHEN NOT ({z_vals}[i] <=> {k_vals}[i]) THEN "
        + _entry(MISMATCH, "n", f"{z_vals}[i]", f"{k_vals}[i]")
        + " END), e -> e IS NOT NULL)"
    )
    return (
        f"CASE WHEN in_zk AND NOT in_kraft THEN array({_entry(MISSING_IN_KRAFT, _NULL, z_doc, _NULL)}) "
        f"WHEN in_kraft AND NOT in_zk THEN array({_entry(MISSING_IN_ZK, _NULL, _NULL, k_doc)}) "
        f"WHEN in_zk AND in_kraft THEN {mismatches} END"
    )


def _typed_join(spec: TableSpec, dedupe: bool) -> str:
    """One table's joined rows in the shape of `outcome_sql`'s generic join (tbl, key, z_note, k_offset,
    k_kraft_only, in_zk, in_kraft, ds), joined on its typed key columns (null-safe, as the JSON key is).
    The text and JSON forms are the generic ones, made after the join and only where they are shown."""
    keys, fields = spec.key_names, spec.field_names
    cols = ", ".join([*keys, *fields])
    ks = f"SELECT {cols}, CAST(_offset AS BIGINT) AS _offset, _deleted, true AS _present FROM k_{spec.name}"
    if dedupe:
        # The same pick as the generic dedupe: the live row of a key, else its last-written tombstone.
        picked = ", ".join(f"'{c}', {c}" for c in [*fields, "_offset", "_deleted", "_present"])
        ks = (
            f"SELECT {', '.join(keys)}, b.* FROM (SELECT {', '.join(keys)}, max_by(named_struct({picked}), "
            f"named_struct('live', NOT _deleted, 'koffset', _offset)) AS b FROM ({ks}) GROUP BY {', '.join(keys)})"
        )
    zs = f"SELECT {cols}, _note, true AS _present FROM z_{spec.name}"
    on = " AND ".join(f"z.{k} <=> k.{k}" for k in keys)
    key_cols = ", ".join(f"coalesce(z.{k}, k.{k}) AS {k}" for k in keys)
    side_cols = ", ".join(f"z.{f} AS z_{f}, k.{f} AS k_{f}" for f in fields)
    same = "named_struct(" + ", ".join(f"'{f}', z_{f}" for f in fields) + ") <=> named_struct(" + ", ".join(
        f"'{f}', k_{f}" for f in fields
    ) + ")"
    joined = (
        f"SELECT {key_cols}, {side_cols}, z._note AS z_note, k._offset AS k_offset, "
        "z._present IS NOT NULL AS in_zk, k._present IS NOT NULL AND NOT k._deleted AS in_kraft, "
        "CASE WHEN k._present IS NOT NULL THEN false END AS k_kraft_only "
        f"FROM ({zs}) z FULL OUTER JOIN ({ks}) k ON {on}"
    )
    differ = f"in_zk AND in_kraft AND NOT ({same})"
    texts = {
        side: f"CASE WHEN {differ} THEN array("
        + ", ".join(_text(f"{side}_{name}", kind) for name, kind in spec.fields)
        + ") END"
        for side in ("z", "k")
    }
    compared = f"SELECT *, {texts['z']} AS z_vals, {texts['k']} AS k_vals FROM ({joined})"

    def doc(side: str) -> str:
        pairs = ", ".join(f"'{f}', {side}_{f}" for f in fields)
        return f"to_json(named_struct({pairs}), map('ignoreNullFields', 'false'))"

    key = "concat_ws(' ', " + ", ".join(f"concat('{k}=', coalesce(CAST({k} AS STRING), 'null'))" for k in keys) + ")"
    names = "array(" + ", ".join(f"'{f}'" for f in fields) + ")"
    empty = "CAST(array() AS ARRAY<STRUCT<kind: STRING, field: STRING, zk_value: STRING, kraft_value: STRING>>)"
    ds = f"CASE WHEN in_zk AND in_kraft AND z_vals IS NULL THEN {empty} ELSE {_diffs(doc('z'), doc('k'), names, 'z_vals', 'k_vals')} END"
    return (
        f"SELECT '{spec.name}' AS tbl, {key} AS key, z_note, k_offset, k_kraft_only, in_zk, in_kraft, {ds} AS ds "
        f"FROM ({compared})"
    )


def outcome_sql(zk_views: Mapping[str, str], kraft_views: Mapping[str, str], options: CompareOptions) -> str:
    """The statement whose rows are, per joined row, its discrepancies (`d`, one row each, null when
    none: posexplode_outer keeps the row so the same pass counts rows) and presence flags."""
    zk_only_types = ", ".join(sql_string(t) for t in ZK_CONFIG_RESOURCE_TYPES)
    ctes = [*zk_ctes(zk_views), *kraft_ctes(kraft_views, options.kraft_cluster_id)]
    generic = {name: spec for name, spec in TABLES.items() if name not in TYPED_TABLES}
    zg = " UNION ALL ".join(_generic(spec, f"z_{name}", "_note AS note") for name, spec in generic.items())
    kg_parts = []
    for name, spec in generic.items():
        kraft_only = f"NOT resource_type IN ({zk_only_types})" if name == "configs" else "false"
        kg_parts.append(
            _generic(spec, f"k_{name}", f"CAST(_offset AS BIGINT) AS koffset, _deleted AS deleted, {kraft_only} AS kraft_only")
        )
    ctes.append(("zg", zg))
    ctes.append(("kg", " UNION ALL ".join(kg_parts)))
    if options.dedupe:
        ctes.append(
            (
                "kd",
                "SELECT tbl, jkey, b.key, b.vals, b.doc, b.koffset, b.deleted, b.kraft_only FROM (SELECT tbl, jkey, "
                "max_by(named_struct('key', key, 'vals', vals, 'doc', doc, 'koffset', koffset, 'deleted', deleted, 'kraft_only', kraft_only), "
                "named_struct('live', NOT deleted, 'koffset', koffset)) AS b FROM kg GROUP BY tbl, jkey)",
            )
        )
    else:
        ctes.append(("kd", "SELECT * FROM kg"))
    names = "map(" + ", ".join(
        f"'{name}', array(" + ", ".join(f"'{f}'" for f in spec.field_names) + ")" for name, spec in generic.items()
    ) + ")"
    ctes.append(
        (
            "joined",
            "SELECT coalesce(z.tbl, k.tbl) AS tbl, coalesce(z.key, k.key) AS key, z.vals AS z_vals, z.doc AS z_doc, "
            "k.doc AS k_doc, z.note AS z_note, "
            "z.tbl IS NOT NULL AS in_zk, k.tbl IS NOT NULL AND NOT k.deleted AS in_kraft, "
            "k.vals AS k_vals, k.koffset AS k_offset, k.kraft_only AS k_kraft_only, "
            f"element_at({names}, coalesce(z.tbl, k.tbl)) AS names "
            "FROM zg z FULL OUTER JOIN kd k ON z.tbl = k.tbl AND z.jkey = k.jkey",
        )
    )
    rows = [
        "SELECT tbl, key, z_note, k_offset, k_kraft_only, in_zk, in_kraft, "
        f"{_diffs('z_doc', 'k_doc', 'names', 'z_vals', 'k_vals')} AS ds FROM joined",
        *(_typed_join(TABLES[name], options.dedupe) for name in TYPED_TABLES),
    ]
    ctes.append(("differences", " UNION ALL ".join(rows)))
    body = (
        "SELECT tbl, pos, d, CASE WHEN d IS NOT NULL THEN key END AS key, z_note, k_offset, k_kraft_only, in_zk, in_kraft "
        "FROM (SELECT tbl, key, z_note, k_offset, k_kraft_only, in_zk, in_kraft, posexplode_outer(ds) AS (pos, d) FROM differences)"
    )
    return "WITH " + ",\n".join(f"{name} AS ({sql})" for name, sql in ctes) + "\n" + body


def classify_sql(options: CompareOptions) -> tuple[str, str]:
    """(class, reason) SQL expressions over an outcome row; the first rule that applies wins: the
    expected rules, then lag, then error."""
    rules = [
        ("tbl = 'brokers'", EXPECTED, sql_string(BROKERS_EXPECTED)),
        ("tbl = 'features'", EXPECTED, sql_string(FEATURES_EXPECTED)),
        (f"tbl = 'cluster' AND d.kind <> '{MISMATCH}'", EXPECTED, sql_string(NO_CLUSTER_ID)),
        (f"tbl = 'configs' AND d.kind = '{MISSING_IN_ZK}' AND k_kraft_only", EXPECTED, sql_string(KRAFT_ONLY_CONFIG)),
        (f"tbl = 'partitions' AND d.kind = '{MISMATCH}' AND d.field = 'partition_epoch'", EXPECTED, sql_string(PARTITION_EPOCH)),
        (f"z_note IS NOT NULL AND d.kind IN ('{MISSING_IN_KRAFT}', '{MISMATCH}')", EXPECTED, "z_note"),
    ]
    m = options.migration_offset
    if m is not None:
        why = f"concat({sql_string(LAG_REASON + ': KRaft offset ')}, CAST(k_offset AS STRING), ' > {m}')"
        rules.append((f"k_offset IS NOT NULL AND k_offset > {m}", LAG, why))
    cls = "CASE " + " ".join(f"WHEN {cond} THEN '{name}'" for cond, name, _ in rules) + f" ELSE '{ERROR}' END"
    reason = "CASE " + " ".join(f"WHEN {cond} THEN {why}" for cond, _, why in rules) + f" ELSE {_error_reason(m)} END"
    return cls, reason


def _error_reason(migration_offset: int | None) -> str:
    """The reason of an error row: what differs, and (when known) why write-behind does not explain it."""
    what = "CASE d.kind " + " ".join(f"WHEN '{k}' THEN {sql_string(v)}" for k, v in ERROR_REASONS.items()) + " END"
    if migration_offset is None:
        why = sql_string("; no rule for expected differences applies")
    else:
        why = (
            "CASE WHEN k_offset IS NULL THEN "
            + sql_string(f"; no rule for expected differences applies, and KRaft never wrote this row, so it is not lag (/migration offset {migration_offset})")
            + " ELSE concat("
            + sql_string("; no rule for expected differences applies, and KRaft last wrote this row at offset ")
            + ", CAST(k_offset AS STRING), "
            + sql_string(f", which ZooKeeper has caught up to (/migration offset {migration_offset}), so it is not lag")
            + ") END"
        )
    return f"concat({what}, {why})"


def compare_all(
    spark: SparkSession, zk_views: Mapping[str, str], kraft_views: Mapping[str, str], options: CompareOptions
) -> DataFrame:
    """The outcome of the comparison (see `outcome_sql`) over each side's views (row kind -> view); cache
    it, `discrepancies` and `tally` read it."""
    return spark.sql(outcome_sql(zk_views, kraft_views, options))


def discrepancies(spark: SparkSession, outcome_view: str, options: CompareOptions) -> DataFrame:
    """The discrepancy rows of an outcome, classified: table, key, kind, field, zk_value, kraft_value,
    class, reason, kraft_offset."""
    cls, reason = classify_sql(options)
    return spark.sql(
        f"SELECT tbl AS `table`, key, d.kind AS kind, d.field AS field, d.zk_value AS zk_value, "
        f"d.kraft_value AS kraft_value, {cls} AS `class`, {reason} AS reason, k_offset AS kraft_offset "
        f"FROM {outcome_view} WHERE d IS NOT NULL"
    )


def tally(
    spark: SparkSession, outcome_view: str, options: CompareOptions
) -> tuple[list[tuple[str, str, str, int]], dict[str, int], dict[str, int]]:
    """In one job: (table, class, kind, count) of the discrepancies, and rows per table on each side
    (ZooKeeper rows; live KRaft rows)."""
    cls, _reason = classify_sql(options)
    first = "(pos IS NULL OR pos = 0)"
    rows = spark.sql(
        f"SELECT tbl, CASE WHEN d IS NOT NULL THEN {cls} END AS `class`, d.kind AS kind, "
        "COUNT(d) AS n, "
        f"SUM(CASE WHEN {first} AND in_zk THEN 1 ELSE 0 END) AS zk, "
        f"SUM(CASE WHEN {first} AND in_kraft THEN 1 ELSE 0 END) AS kraft "
        f"FROM {outcome_view} GROUP BY 1, 2, 3"
    ).collect()
    counts: list[tuple[str, str, str, int]] = []
    zk_rows: dict[str, int] = {}
    kraft_rows: dict[str, int] = {}
    for table, klass, kind, n, zk, kraft in rows:
        zk_rows[table] = zk_rows.get(table, 0) + int(zk)
        kraft_rows[table] = kraft_rows.get(table, 0) + int(kraft)
        if klass is not None:
            counts.append((table, klass, kind, int(n)))
    return counts, zk_rows, kraft_rows


def side_tables(spark: SparkSession, ctes: list[tuple[str, str]], prefix: str) -> dict[str, DataFrame]:
    """The typed tables of one side (`zk_ctes` / `kraft_ctes`) as DataFrames, e.g. for inspection."""
    head = "WITH " + ",\n".join(f"{name} AS ({sql})" for name, sql in ctes) + "\n"
    return {name: spark.sql(head + f"SELECT * FROM {prefix}{name}") for name in TABLES}
