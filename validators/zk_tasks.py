"""The ZooKeeper side of an audit on Spark: znodes → rows inside tasks, then the compared tables.

Tasks read a `zk export` dump (JSON Lines, one znode per line) in byte splits, decode each znode with
Kafka's codecs (`migrate.zk.znodes`) and emit its rows (`validators.tables`). A dump is the only input that
splits: a ZooKeeper data directory (a snapshot plus transaction logs to replay) or a live ensemble is read
on the driver with the project's readers, written to a temporary dump, dropped, and then parsed in tasks
like any dump — so only that read, not the row building, needs the driver's memory.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import msgspec
from pydantic import ValidationError
from pyspark.sql import SparkSession

from migrate.errors import (
    CorruptDataError,
    OlderStateError,
    UnreachableError,
    Zk2KraftError,
    ZnodeFormatError,
)
from migrate.zk import paths
from migrate.zk.dump import DUMP_FORMAT, DumpHeader, check_dump_count, read_dump, write_dump
from migrate.zk.model import MigrationState
from migrate.zk.sources import ZkSource, full_tree_chroot, normalize_chroot, read_source, tree_chroot_hint
from migrate.zk.znodes.acls import decode_acls, resource_type_from_name
from migrate.zk.znodes.brokers import decode_broker
from migrate.zk.znodes.configs import decode_client_quota_config, decode_entity_config
from migrate.zk.znodes.controller import decode_migration
from migrate.zk.znodes.singletons import decode_cluster_id, decode_features, decode_producer_id_block
from migrate.zk.znodes.tokens import decode_delegation_token
from migrate.zk.znodes.topics import decode_partition_state, decode_topic
from validators.columnar import ColumnarSide, PartWriter, TaskOutput, fresh_directory, task_part
from validators.tables import (
    ERROR_KIND,
    TABLES,
    Row,
    sql_string,
    wide,
    wide_error,
    zk_acl_rows,
    zk_assignment_rows,
    zk_broker_row,
    zk_cluster_row,
    zk_config_rows,
    zk_feature_rows,
    zk_migration_row,
    zk_producer_ids_row,
    zk_quota_rows,
    zk_scram_rows,
    zk_state_row,
    zk_token_row,
    zk_topic_row,
)

# ---------------------------------------------------------------------------------------------- znodes


def znode_rows(path: str, data: bytes | None, version: int, czxid: int) -> list[Row]:
    """Wide rows of one chroot-relative znode (none for znodes the audit does not compare).

    Claims the same znodes `migrate.zk.cluster.from_tree` decodes strictly, with the same codecs, so a
    malformed znode stops the audit just as it stops `zk2kraft migrate`.
    """
    parts = path.split("/")
    handler = _HANDLERS.get(parts[1]) if len(parts) > 1 else None
    if handler is None:
        return []
    return handler(path, parts, data, version, czxid)


def _brokers(path: str, parts: list[str], data: bytes | None, version: int, czxid: int) -> list[Row]:
    n = len(parts)
    if n == 4 and parts[2] == "ids":
        if paths.canonical_int(parts[3]) is None:
            return []
        return [wide("brokers", zk_broker_row(decode_broker(path, data, czxid=czxid)))]
    if n < 4 or parts[2] != "topics":
        return []
    if n == 4:
        if data is None:
            return []  # a topic znode without data: Kafka cannot read it either (kept raw by from_tree)
        topic = decode_topic(path, data)
        rows = [wide("topics", zk_topic_row(topic))]
        rows.extend(wide("zk_assignments", row) for row in zk_assignment_rows(topic))
        return rows
    if n == 7 and parts[4] == "partitions" and parts[6] == "state":
        partition = paths.canonical_int(parts[5])
        if partition is None:
            return []
        state = decode_partition_state(path, data, zk_version=version)
        return [wide("zk_states", zk_state_row(parts[3], partition, state))]
    return []


def _config(path: str, parts: list[str], data: bytes | None, version: int, czxid: int) -> list[Row]:
    n = len(parts)
    if not data:
        return []  # null/empty data means "no configs"
    if n == 4:
        kind = parts[2]
        if kind in (paths.CONFIG_TOPICS, paths.CONFIG_BROKERS):
            return [wide("configs", row) for row in zk_config_rows(decode_entity_config(path, data))]
        if kind not in (paths.CONFIG_USERS, paths.CONFIG_CLIENTS, paths.CONFIG_IPS):
            return []
    elif not (n == 6 and parts[2] == paths.CONFIG_USERS and parts[4] == paths.CONFIG_CLIENTS):
        return []
    quotas = decode_client_quota_config(path, data)
    rows = [wide("client_quotas", row) for row in zk_quota_rows(quotas)]
    rows.extend(wide("scram", row) for row in zk_scram_rows(quotas))
    return rows


def _admin(path: str, parts: list[str], data: bytes | None, version: int, czxid: int) -> list[Row]:
    if len(parts) == 4 and parts[2] == "delete_topics":
        return [wide("zk_pending_deletions", (parts[3],))]
    return []


def _producer_ids(path: str, parts: list[str], data: bytes | None, version: int, czxid: int) -> list[Row]:
    if len(parts) != 2 or data is None:
        return []
    return [wide("producer_ids", zk_producer_ids_row(decode_producer_id_block(path, data)))]


def _feature(path: str, parts: list[str], data: bytes | None, version: int, czxid: int) -> list[Row]:
    if len(parts) != 2:
        return []
    return [wide("features", row) for row in zk_feature_rows(decode_features(path, data))]


def _migration(path: str, parts: list[str], data: bytes | None, version: int, czxid: int) -> list[Row]:
    if len(parts) != 2:
        return []
    return [wide("zk_migration", zk_migration_row(decode_migration(path, data, zk_version=version)))]


def _cluster(path: str, parts: list[str], data: bytes | None, version: int, czxid: int) -> list[Row]:
    if parts[1:] != ["cluster", "id"]:
        return []
    return [wide("cluster", zk_cluster_row(decode_cluster_id(path, data)))]


def _acl(path: str, parts: list[str], data: bytes | None, version: int, czxid: int) -> list[Row]:
    depth = 4 if parts[1] == "kafka-acl" else 5
    if len(parts) != depth or not data or (depth == 5 and parts[2] != "prefixed"):
        return []
    type_name = parts[-2]
    if resource_type_from_name(type_name).pascal_name != type_name:
        return []  # Kafka never reads ACLs under anything but the concrete types' names
    return [wide("acls", row) for row in zk_acl_rows(decode_acls(path, data))]


def _delegation_token(path: str, parts: list[str], data: bytes | None, version: int, czxid: int) -> list[Row]:
    if len(parts) != 4 or parts[2] != "tokens":
        return []
    return [wide("delegation_tokens", zk_token_row(decode_delegation_token(path, data)))]


_Handler = Callable[[str, list[str], "bytes | None", int, int], list[Row]]
_HANDLERS: dict[str, _Handler] = {
    "brokers": _brokers,
    "config": _config,
    "admin": _admin,
    "latest_producer_id_block": _producer_ids,
    "feature": _feature,
    "migration": _migration,
    "cluster": _cluster,
    "kafka-acl": _acl,
    "kafka-acl-extended": _acl,
    "delegation_token": _delegation_token,
}


def _loads(line: str | bytes) -> Any:
    """JSON with msgspec (integers of any size stay exact), falling back to the standard library for what
    msgspec refuses but it reads (lone surrogates, NaN), so every line means what it meant before."""
    try:
        return _decode_json(line)
    except msgspec.DecodeError:
        return json.loads(line)


_decode_json = msgspec.json.Decoder().decode


def _shown(line: str | bytes) -> str:
    """The start of a bad line, for the error message."""
    text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
    return repr(text.rstrip("\r\n")[:120])


def dump_line_rows(line: str | bytes, chroot: str, source: str) -> list[Row]:
    """Rows of one dump line (the header line and znodes outside `chroot` give none)."""
    if not line.strip():
        return []
    try:
        obj = _loads(line)
    except ValueError:
        return [wide_error(f"{source}: a line is not JSON: {_shown(line)}")]
    if not isinstance(obj, dict):
        return [wide_error(f"{source}: a line is not a JSON object: {_shown(line)}")]
    path = obj.get("path")
    if path is None and "format" in obj:
        return []  # the header
    if not isinstance(path, str) or not path.startswith("/"):
        return [wide_error(f"{source}: a line has no znode path: {_shown(line)}")]
    if chroot != "/":
        if not path.startswith(chroot + "/"):
            return []
        path = path[len(chroot) :]
    try:
        data = _data(obj, path, source)
        stat = obj.get("stat") or {}
        version, czxid = stat.get("version", 0), stat.get("czxid", 0)
        return znode_rows(path, data, int(version), int(czxid))
    except ZnodeFormatError as exc:
        return [wide_error(f"{source}: {exc}")]
    except Zk2KraftError as exc:
        return [wide_error(str(exc))]
    except (TypeError, ValueError) as exc:
        return [wide_error(f"{source}: znode {path}: malformed dump entry ({exc})")]


def _data(obj: dict[str, Any], path: str, source: str) -> bytes | None:
    text = obj.get("data")
    if text is None:
        return None
    if obj.get("encoding", "utf-8") == "base64":
        try:
            return base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise CorruptDataError(source, None, f"data of {path} is not valid base64") from None
    return str(text).encode("utf-8")


# ---------------------------------------------------------------------------------------------- sources


@dataclass(slots=True)
class ZkInput:
    """A dump for tasks to parse, the chroot to select inside it, and what to call the source in reports
    (`origin`, and `kafka_chroot`: where Kafka's znodes are in the whole ZooKeeper tree)."""

    dump: Path
    chroot: str
    origin: str
    kafka_chroot: str
    temporary: bool
    header: DumpHeader | None = None  # of a dump given as the source, whose znode count is checked
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    older_state_accepted: bool = False


def _dump_header(path: Path) -> DumpHeader:
    """The validated first line of a dump (bad input fails here, naming the file)."""
    try:
        with path.open("rb") as f:
            first = f.readline()
    except OSError as exc:
        raise CorruptDataError(str(path), None, f"cannot open dump: {exc.strerror}") from None
    try:
        return DumpHeader.model_validate_json(first)
    except ValidationError:
        raise CorruptDataError(str(path), None, f"line 1: not a {DUMP_FORMAT} header") from None


def prepare_zk_input(spark: SparkSession, source: ZkSource, work_dir: Path) -> ZkInput:
    """A dump of the source for tasks to parse: the dump itself, or one a single Spark task writes.

    Restoring a data dir (snapshot + transaction logs) or reading a live ensemble is sequential, so one
    task does it; the driver only learns where the dump is and never holds the tree.
    """
    source.validate()
    if source.dump is not None:
        header = _dump_header(Path(source.dump))
        inside = normalize_chroot(source.chroot)
        exported = normalize_chroot(header.chroot)
        kafka_chroot = normalize_chroot(exported.rstrip("/") + inside) if inside != "/" else exported
        return ZkInput(
            Path(source.dump).resolve(), inside, source.describe(), kafka_chroot, False, header,
            warnings=[f"{source.dump}: {w}" for w in header.warnings],
            older_state_accepted=header.accepted_older_zk_state,
        )  # fmt: skip
    work_dir.mkdir(parents=True, exist_ok=True)
    dump = (work_dir / "zk-source.jsonl").resolve()
    task = partial(_export_in_task, source=source, dump=dump)
    outcome = spark.sparkContext.parallelize([0], 1).map(task).collect()[0]
    if outcome[0] == ERROR_KIND:
        raise _TASK_ERRORS.get(outcome[2], Zk2KraftError)(outcome[1])
    _, origin, chroot, warnings, notes, older = outcome
    return ZkInput(dump, "/", origin, chroot, True, None, warnings, notes, older)


# The kinds of error whose exit code is not bad input's (2), rebuilt by name after the task.
_TASK_ERRORS: dict[str, type[Zk2KraftError]] = {kind.__name__: kind for kind in (UnreachableError, OlderStateError)}


def _export_in_task(
    _index: int, *, source: ZkSource, dump: Path
) -> tuple[str, str, str, list[str], list[str], bool]:
    """Inside a Spark task: read the source and write its dump; errors come back as text and their kind's
    name, not tracebacks."""
    try:
        got = read_source(source)
        write_dump(
            got.tree,
            dump,
            chroot=full_tree_chroot(source),
            warnings=got.warnings,
            accepted_older_state=got.older_state_accepted,
        )
    except Zk2KraftError as exc:
        return ERROR_KIND, str(exc), type(exc).__name__, [], [], False
    return "ok", got.origin, got.chroot, got.warnings, got.notes, got.older_state_accepted


def read_migration_state(zk: ColumnarSide) -> MigrationState | None:
    """The `/migration` znode, when there is one and it holds a KRaft offset."""
    rows = zk.kept.get("zk_migration", [])
    if not rows or rows[0][0] is None or rows[0][0] < 0:
        return None
    offset, epoch, controller_id, controller_epoch = rows[0]
    return MigrationState(
        kraft_controller_id=_int_or(controller_id),
        kraft_controller_epoch=_int_or(controller_epoch),
        kraft_metadata_offset=int(offset),
        kraft_metadata_epoch=_int_or(epoch),
    )


def _int_or(value: Any, default: int = -1) -> int:
    return default if value is None else int(value)


DUMP_SPLIT_BYTES = 64 * 1024 * 1024
"""Bytes of a dump one task parses: enough tasks to keep every core busy and each task's memory small."""


def dump_splits(path: Path, min_splits: int) -> list[tuple[int, int]]:
    """Byte ranges [start, end) covering the file; a task owns the lines that start inside its range."""
    size = path.stat().st_size
    count = max(1, min_splits, -(-size // DUMP_SPLIT_BYTES))
    step = -(-size // count) if size else 1
    return [(start, min(size, start + step)) for start in range(0, max(size, 1), step)]


def split_lines(path: str, start: int, end: int) -> Iterator[bytes]:
    """The lines that start in [start, end) of a file (a line cut by `start` belongs to the previous range)."""
    with open(path, "rb") as f:
        if start > 0:
            f.seek(start - 1)
            f.readline()  # the rest of the line that began before `start` (or just its newline)
        position = f.tell()
        while position < end:
            line = f.readline()
            if not line:
                return
            position += len(line)
            yield line


def _parse_split(index: int, span: tuple[int, int], *, dump: str, chroot: str, directory: str) -> TaskOutput:
    """Inside a task: the rows of one byte range of a dump, written as Parquet files."""
    writer = PartWriter(directory, task_part(index), with_offsets=False, keep=("zk_migration",))
    lines = 0
    for line in split_lines(dump, *span):
        if line.strip():
            lines += 1
            writer.add_all(dump_line_rows(line, chroot, dump))
    out = writer.close()
    out.lines = lines
    return out


def zk_side(spark: SparkSession, zk: ZkInput, directory: Path, *, min_partitions: int) -> ColumnarSide:
    """The ZooKeeper side as Parquet files per row kind; raises the first bad-input error a task found."""
    dump = str(zk.dump.resolve())
    splits = dump_splits(zk.dump, min_partitions)
    task = partial(_parse_split, dump=dump, chroot=zk.chroot, directory=str(fresh_directory(directory)))
    outputs = (
        spark.sparkContext.parallelize(list(enumerate(splits)), len(splits)).map(lambda item: task(*item)).collect()
    )
    side = ColumnarSide(directory, with_offsets=False).merge(outputs)
    if zk.header is not None:
        check_dump_count(zk.header, side.lines - 1, str(zk.dump))
    if side.errors:
        raise Zk2KraftError(side.errors[0])
    if not any(side.counts.get(kind) for kind in ("brokers", "topics", "configs", "cluster")):
        where = "" if zk.chroot == "/" else f" under {zk.chroot}"
        raise Zk2KraftError(
            f"{zk.origin}: no Kafka znodes{where} (no brokers, topics, configs or cluster id)"
            + tree_chroot_hint(read_dump(zk.dump), zk.chroot)
        )
    return side


PENDING_DELETION = "topic pending deletion in ZooKeeper (/admin/delete_topics): Kafka does not migrate it"
ORPHAN_CONFIG = "config of a topic that does not exist in ZooKeeper: Kafka migrates only configs of existing topics"
MISSING_STATE = "partition state znode missing in ZooKeeper: the KRaft values are what Kafka invents"
MISSING_TOPIC_ID = "topic znode without topic_id: KRaft holds the id generated at migration"


ZK_KINDS = (
    "zk_pending_deletions", "topics", "zk_assignments", "zk_states", "configs", "acls",
    "brokers", "client_quotas", "scram", "delegation_tokens", "producer_ids", "features", "cluster",
)  # fmt: skip
"""The row kinds `zk_ctes` reads."""


def zk_ctes(views: Mapping[str, str]) -> list[tuple[str, str]]:
    """SQL common table expressions `z_<table>` for every compared table of the ZooKeeper side, read from
    the temporary views `views` (row kind -> view of its rows). Each has the table's columns and `_note`: a reason that makes a
    difference expected (e.g. a topic pending deletion), or null."""
    acl_keys = ", ".join(TABLES["acls"].key_names)
    partition_fields = ", ".join(
        ("a." if f in ("replicas", "adding_replicas", "removing_replicas") else "s.") + f
        for f in TABLES["partitions"].field_names
    )
    ctes = [
        ("z_pending", f"SELECT topic FROM {views['zk_pending_deletions']}"),
        ("z_topics_raw", f"SELECT * FROM {views['topics']}"),
        (
            "z_topics",
            "SELECT /*+ BROADCAST(p) */ t.topic, t.topic_id, "
            f"CASE WHEN p.topic IS NOT NULL THEN {sql_string(PENDING_DELETION)} "
            f"WHEN t.topic_id IS NULL THEN {sql_string(MISSING_TOPIC_ID)} END AS _note "
            "FROM z_topics_raw t LEFT JOIN z_pending p ON t.topic = p.topic",
        ),
        (
            "z_partitions",
            f"SELECT /*+ BROADCAST(p) */ a.topic, a.partition, {partition_fields}, "
            f"CASE WHEN p.topic IS NOT NULL THEN {sql_string(PENDING_DELETION)} "
            f"WHEN s.leader IS NULL THEN {sql_string(MISSING_STATE)} END AS _note "
            f"FROM {views['zk_assignments']} a "
            f"LEFT JOIN {views['zk_states']} s "
            "ON a.topic = s.topic AND a.partition = s.partition "
            "LEFT JOIN z_pending p ON a.topic = p.topic",
        ),
        (
            "z_configs",
            "SELECT /*+ BROADCAST(t, p) */ c.resource_type, c.resource_name, c.name, c.value, "
            f"CASE WHEN c.resource_type = 'topic' AND p.topic IS NOT NULL THEN {sql_string(PENDING_DELETION)} "
            f"WHEN c.resource_type = 'topic' AND t.topic IS NULL THEN {sql_string(ORPHAN_CONFIG)} END AS _note "
            f"FROM {views['configs']} c "
            "LEFT JOIN z_topics_raw t ON c.resource_type = 'topic' AND c.resource_name = t.topic "
            "LEFT JOIN z_pending p ON c.resource_type = 'topic' AND c.resource_name = p.topic",
        ),
        (
            "z_acls",
            f"SELECT {acl_keys}, CAST(SUM(count) AS INT) AS count, CAST(NULL AS STRING) AS _note "
            f"FROM {views['acls']} GROUP BY {acl_keys}",
        ),
    ]
    for name in ("brokers", "client_quotas", "scram", "delegation_tokens", "producer_ids", "features", "cluster"):
        ctes.append((f"z_{name}", f"SELECT *, CAST(NULL AS STRING) AS _note FROM {views[name]}"))
    return ctes


def remove_temporary(zk: ZkInput) -> None:
    if zk.temporary:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(zk.dump)


def iter_znode_rows(tree_nodes: Iterator[tuple[str, bytes | None, int, int]]) -> Iterator[Row]:
    """Wide rows of (path, data, version, czxid) znodes, outside Spark (tests, tools)."""
    for path, data, version, czxid in tree_nodes:
        yield from znode_rows(path, data, version, czxid)
