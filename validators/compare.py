"""Full outer join of the two sides → discrepancies, each classified as error, expected or lag (docs/audit.md).

Every table of both sides is projected to one generic shape — table, key (JSON of the key columns, for the
join; readable text, for people), field values as text in the table's field order — so all tables are
compared in a single full outer join on (table, key) instead of one join (and shuffle) per table. Values
are compared as text, which is exact: arrays print as `[1,2,3]`, numbers and strings as themselves.

A discrepancy is one row: the table, the row's key, its kind (`missing_in_kraft`, `missing_in_zk`,
`mismatch`), the field (mismatches only), both values (a missing row shows the present side as JSON), the
class and the reason for it, and the KRaft offset of the last record that touched the row.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, LongType, StringType, StructField, StructType

from validators.tables import TABLES, ZK_CONFIG_RESOURCE_TYPES, TableSpec

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

DISCREPANCY_SCHEMA = StructType(
    [
        StructField("table", StringType(), False),
        StructField("key", StringType(), False),
        StructField("kind", StringType(), False),
        StructField("field", StringType(), True),
        StructField("zk_value", StringType(), True),
        StructField("kraft_value", StringType(), True),
        StructField("class", StringType(), False),
        StructField("reason", StringType(), True),
        StructField("kraft_offset", LongType(), True),
    ]
)


@dataclass(frozen=True, slots=True)
class CompareOptions:
    """`migration_offset`: the KRaft offset ZooKeeper holds (from /migration); changes after it are lag."""

    migration_offset: int | None = None


def _text(column: Column, kind: DataType) -> Column:
    """A value as text: arrays as `[1,2,3]`, everything else cast (null stays null)."""
    if isinstance(kind, ArrayType):
        return F.when(column.isNull(), F.lit(None)).otherwise(F.concat(F.lit("["), F.array_join(column, ","), F.lit("]")))
    return column.cast("string")


def generic(spec: TableSpec, df: DataFrame, extra: list[Column]) -> DataFrame:
    """One table in the shape every table shares: table, jkey, key, vals (+ the side's extra columns)."""
    keys = spec.key_names
    return df.select(
        F.lit(spec.name).alias("table"),
        F.to_json(F.struct(*[F.col(k) for k in keys])).alias("jkey"),
        F.concat_ws(" ", *[F.concat(F.lit(k + "="), F.coalesce(F.col(k).cast("string"), F.lit("null"))) for k in keys]).alias("key"),
        F.array(*[_text(F.col(name), kind) for name, kind in spec.fields]).alias("vals"),
        *extra,
    )


def zk_generic(tables: dict[str, DataFrame]) -> DataFrame:
    return _union([generic(spec, tables[name], [F.col("_note").alias("note")]) for name, spec in TABLES.items()])


def kraft_generic(tables: dict[str, DataFrame], *, dedupe: bool = True) -> DataFrame:
    """KRaft rows; several rows of one key (a topic deleted and created again) collapse to the live one.

    Only a log can hold several rows of one key: for a snapshot alone `dedupe=False` skips a shuffle.
    """
    frames = []
    for name, spec in TABLES.items():
        df = tables[name]
        kraft_only = (
            ~F.col("resource_type").isin(*ZK_CONFIG_RESOURCE_TYPES) if name == "configs" else F.lit(False)
        )
        frames.append(
            generic(spec, df, [F.col("_offset").cast("long").alias("offset"), F.col("_deleted").alias("deleted"), kraft_only.alias("kraft_only")])
        )
    rows = _union(frames)
    if not dedupe:
        return rows
    best = F.max_by(
        F.struct("key", "vals", "offset", "deleted", "kraft_only"),
        F.struct((~F.col("deleted")).alias("live"), F.col("offset")),
    )
    return rows.groupBy("table", "jkey").agg(best.alias("b")).select("table", "jkey", "b.*")


def _union(frames: list[DataFrame]) -> DataFrame:
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


_ENTRY = ArrayType(
    StructType(
        [
            StructField("kind", StringType()),
            StructField("field", StringType()),
            StructField("zk_value", StringType()),
            StructField("kraft_value", StringType()),
        ]
    )
)


def compare_all(zk: dict[str, DataFrame], kraft: dict[str, DataFrame], *, dedupe: bool = True) -> DataFrame:
    """The outcome of the join: per joined row its discrepancies (`d`, one row each) and presence flags.

    Cache it: `discrepancies` and `row_counts` read it.
    """
    z = zk_generic(zk).select(
        "table", "jkey", F.col("key").alias("z_key"), F.col("vals").alias("z_vals"), F.col("note").alias("z_note"), F.lit(True).alias("z_present")
    )
    k = kraft_generic(kraft, dedupe=dedupe).select(
        F.col("table").alias("k_table"),
        F.col("jkey").alias("k_jkey"),
        F.col("key").alias("k_key"),
        F.col("vals").alias("k_vals"),
        F.col("offset").alias("k_offset"),
        F.col("deleted").alias("k_deleted"),
        F.col("kraft_only").alias("k_kraft_only"),
    )
    joined = z.join(k, (z["table"] == k["k_table"]) & (z["jkey"] == k["k_jkey"]), "full_outer")
    table = F.coalesce(F.col("table"), F.col("k_table"))
    names = F.create_map(*[x for name, spec in TABLES.items() for x in (F.lit(name), F.array(*[F.lit(f) for f in spec.field_names]))])
    field_names = F.element_at(names, table)

    in_zk = F.col("z_present").isNotNull()
    in_kraft = F.col("k_table").isNotNull() & ~F.col("k_deleted")
    null = F.lit(None).cast("string")

    def as_json(vals: str) -> Column:
        return F.to_json(F.map_from_arrays(field_names, F.col(vals)))

    mismatches = F.filter(
        F.transform(
            field_names,
            lambda name, i: F.when(
                ~F.col("z_vals")[i].eqNullSafe(F.col("k_vals")[i]),
                F.struct(
                    F.lit(MISMATCH).alias("kind"),
                    name.alias("field"),
                    F.col("z_vals")[i].alias("zk_value"),
                    F.col("k_vals")[i].alias("kraft_value"),
                ),
            ),
        ),
        lambda d: d.isNotNull(),
    )
    diffs = (
        F.when(
            in_zk & ~in_kraft,
            F.array(F.struct(F.lit(MISSING_IN_KRAFT).alias("kind"), null.alias("field"), as_json("z_vals").alias("zk_value"), null.alias("kraft_value"))),
        )
        .when(
            ~in_zk & in_kraft,
            F.array(F.struct(F.lit(MISSING_IN_ZK).alias("kind"), null.alias("field"), null.alias("zk_value"), as_json("k_vals").alias("kraft_value"))),
        )
        .when(in_zk & in_kraft, mismatches)
        .otherwise(F.array().cast(_ENTRY))
    )
    # posexplode_outer keeps rows without discrepancies (d null), so the same pass also counts rows.
    return joined.select(
        table.alias("table"),
        F.posexplode_outer(diffs).alias("pos", "d"),
        F.coalesce(F.col("z_key"), F.col("k_key")).alias("key"),
        "z_note",
        "k_offset",
        "k_kraft_only",
        in_zk.alias("in_zk"),
        in_kraft.alias("in_kraft"),
    ).select(
        "table",
        "pos",
        "d",
        F.when(F.col("d").isNotNull(), F.col("key")).alias("key"),
        "z_note",
        "k_offset",
        "k_kraft_only",
        "in_zk",
        "in_kraft",
    )


def discrepancies(outcome: DataFrame, options: CompareOptions) -> DataFrame:
    """The discrepancy rows of `compare_all`'s outcome, classified (DISCREPANCY_SCHEMA)."""
    cls, reason = _classify(options)
    return outcome.filter(F.col("d").isNotNull()).select(
        "table",
        "key",
        F.col("d.kind").alias("kind"),
        F.col("d.field").alias("field"),
        F.col("d.zk_value").alias("zk_value"),
        F.col("d.kraft_value").alias("kraft_value"),
        cls.alias("class"),
        reason.alias("reason"),
        F.col("k_offset").alias("kraft_offset"),
    )


def tally(outcome: DataFrame, options: CompareOptions) -> tuple[list[tuple[str, str, str, int]], dict[str, int], dict[str, int]]:
    """In one job: (table, class, kind, count) of the discrepancies, and rows per table on each side
    (ZooKeeper rows; live KRaft rows)."""
    cls, _reason = _classify(options)
    first = F.col("pos").isNull() | (F.col("pos") == 0)
    rows = (
        outcome.select(
            "table",
            F.when(F.col("d").isNotNull(), cls).alias("class"),
            F.col("d.kind").alias("kind"),
            F.when(first & F.col("in_zk"), 1).otherwise(0).alias("zk"),
            F.when(first & F.col("in_kraft"), 1).otherwise(0).alias("kraft"),
        )
        .groupBy("table", "class", "kind")
        .agg(F.count(F.lit(1)).alias("n"), F.sum("zk").alias("zk"), F.sum("kraft").alias("kraft"))
        .collect()
    )
    counts: list[tuple[str, str, str, int]] = []
    zk_rows: dict[str, int] = {}
    kraft_rows: dict[str, int] = {}
    for table, klass, kind, n, zk, kraft in rows:
        zk_rows[table] = zk_rows.get(table, 0) + int(zk)
        kraft_rows[table] = kraft_rows.get(table, 0) + int(kraft)
        if klass is not None:
            counts.append((table, klass, kind, int(n)))
    return counts, zk_rows, kraft_rows


def _classify(options: CompareOptions) -> tuple[Column, Column]:
    """(class, reason) columns; the first rule that applies wins: expected rules, then lag, then error."""
    table, kind, field = F.col("table"), F.col("d.kind"), F.col("d.field")
    rules: list[tuple[Column, str, Column]] = [
        (table == "brokers", EXPECTED, F.lit(BROKERS_EXPECTED)),
        (table == "features", EXPECTED, F.lit(FEATURES_EXPECTED)),
        ((table == "configs") & (kind == MISSING_IN_ZK) & F.col("k_kraft_only"), EXPECTED, F.lit(KRAFT_ONLY_CONFIG)),
        ((table == "partitions") & (kind == MISMATCH) & (field == "partition_epoch"), EXPECTED, F.lit(PARTITION_EPOCH)),
        (F.col("z_note").isNotNull() & kind.isin(MISSING_IN_KRAFT, MISMATCH), EXPECTED, F.col("z_note")),
    ]
    if options.migration_offset is not None:
        m = options.migration_offset
        lagging = F.col("k_offset").isNotNull() & (F.col("k_offset") > F.lit(m))
        why = F.concat(F.lit(f"{LAG_REASON}: KRaft offset "), F.col("k_offset").cast("string"), F.lit(f" > {m}"))
        rules.append((lagging, LAG, why))
    cls = F.when(rules[0][0], F.lit(rules[0][1]))
    reason = F.when(rules[0][0], rules[0][2])
    for condition, name, why_col in rules[1:]:
        cls = cls.when(condition, F.lit(name))
        reason = reason.when(condition, why_col)
    return cls.otherwise(F.lit(ERROR)), reason.otherwise(F.lit(None).cast("string"))
