"""Preflight checks of the brokers' identity and configs: cluster id, broker ids, which files were given, values Kafka parses."""

from __future__ import annotations

import ipaddress
import re

from migrate.plan.checks.registry import (
    Check,
    CheckSpec,
    Evidence,
    check,
    evidence_at,
    fail_check,
    no_configs,
    not_checked,
    pass_check,
    show,
)
from migrate.plan.inputs import (
    DEFAULT_RESERVED_BROKER_MAX_ID,
    Listener,
    PlanInputs,
    java_bool,
    java_int,
    parse_listeners,
)
from migrate.plan.properties import PropertiesFile, inline_comment
from migrate.zk import paths

# Configs with a type Kafka checks at startup (ConfigDef), limited to the ones server.properties commonly sets.
_INT_KEYS = (
    "broker.id", "reserved.broker.max.id", "num.partitions", "default.replication.factor",
    "num.network.threads", "num.io.threads", "num.recovery.threads.per.data.dir", "min.insync.replicas",
    "zookeeper.connection.timeout.ms", "zookeeper.session.timeout.ms", "log.retention.hours",
    "socket.send.buffer.bytes", "socket.receive.buffer.bytes", "socket.request.max.bytes",
    "log.segment.bytes", "group.initial.rebalance.delay.ms", "transaction.state.log.min.isr",
    "num.replica.fetchers", "message.max.bytes", "replica.lag.time.max.ms",
)  # fmt: skip
SHORT_KEYS = ("offsets.topic.replication.factor", "transaction.state.log.replication.factor")
_LONG_KEYS = ("log.retention.ms", "log.retention.check.interval.ms", "log.retention.bytes", "log.flush.interval.ms")
_BOOL_KEYS = (
    "zookeeper.set.acl", "broker.id.generation.enable", "auto.create.topics.enable", "delete.topic.enable",
    "unclean.leader.election.enable", "zookeeper.metadata.migration.enable", "zookeeper.ssl.client.enable",
    "auto.leader.rebalance.enable", "controlled.shutdown.enable",
)  # fmt: skip
LISTENER_KEYS = ("listeners", "advertised.listeners")
_AT_LEAST_ZERO_KEYS = ("reserved.broker.max.id",)


@check(
    CheckSpec(
        "cluster-id",
        "Cluster id in ZooKeeper matches meta.properties",
        "Controllers are formatted with /cluster/id; every broker's meta.properties must carry the same id "
        "(not-checked when no meta.properties with a cluster.id was given or found).",
    ),
)
def check_cluster_id(inputs: PlanInputs) -> list[Check]:
    zk_id = inputs.model.cluster_id
    if zk_id is None:
        return [
            fail_check(
                "cluster-id",
                "blocker",
                [evidence_at("/cluster/id", "missing: no broker ever started against this chroot?")],
                "Point --zk at the cluster's chroot; /cluster/id is written by the first broker.",
            )
        ]
    mismatched = [
        evidence_at(path, f"cluster.id={meta.cluster_id} but /cluster/id is {zk_id}")
        for path, meta in inputs.meta_properties
        if meta.cluster_id is not None and meta.cluster_id != zk_id
    ]
    if mismatched:
        return [
            fail_check(
                "cluster-id",
                "blocker",
                mismatched,
                "These log directories belong to another cluster (or ZooKeeper was re-created): find out "
                "which is right before formatting controllers with /cluster/id.",
            )
        ]
    compared = [path for path, meta in inputs.meta_properties if meta.cluster_id is not None]
    if not compared:
        found = len(inputs.meta_properties)
        why = (
            f"the {found} meta.properties read carry no cluster.id"
            if found
            else "no meta.properties given (--meta-properties FILE) or found under the brokers' log.dirs here"
        )
        return [not_checked("cluster-id", f"/cluster/id is {zk_id}, compared with nothing: {why}")]
    return [pass_check("cluster-id", f"{zk_id} (ZooKeeper and {len(compared)} meta.properties)", "/cluster/id")]


def _reserved_max_id(f: PropertiesFile) -> int | None:
    """reserved.broker.max.id as Kafka reads it (default 1000); None when Kafka would refuse the value."""
    raw = f.get("reserved.broker.max.id")
    if raw is None:
        return DEFAULT_RESERVED_BROKER_MAX_ID
    value = java_int(raw)
    return value if value is not None and value >= 0 else None


@check(
    CheckSpec(
        "broker-id",
        "Explicit broker.id within reserved.broker.max.id",
        "Migrating brokers keep their id as node.id: it must be set explicitly, parse and be unique; with "
        "broker.id.generation.enable=true (the default) Kafka also requires it <= reserved.broker.max.id.",
    ),
)
def check_broker_ids(inputs: PlanInputs) -> list[Check]:
    """KafkaConfig's broker.id rules for a ZooKeeper broker, plus what the migration needs (explicit, unique ids)."""
    found: list[Evidence] = []
    reserved_values: list[int] = []
    ids: dict[int, list[str]] = {}
    for b in inputs.brokers:
        f = b.file
        max_id = _reserved_max_id(f)  # an invalid value is reported by config-value
        if max_id is not None:
            reserved_values.append(max_id)
        generated = java_bool(f.get("broker.id.generation.enable", "true")) is not False
        raw = f.get("broker.id")
        value = -1 if raw is None else java_int(raw)
        where = f.where("broker.id")
        if value is None:
            found.append(evidence_at(where, f"broker.id={show(raw or '')} is not a number Kafka can parse"))
            continue
        if value == -1 and generated:
            found.append(
                evidence_at(
                    where,
                    ("broker.id is not set" if raw is None else "broker.id=-1")
                    + " and broker.id.generation.enable=true: the id is generated; broker.id generation is "
                    "incompatible with ZooKeeper migration",
                )
            )
            continue
        if generated and max_id is not None and not -1 <= value <= max_id:
            found.append(
                evidence_at(
                    where,
                    f"broker.id={value}: broker.id must be greater than or equal to -1 and not greater than "
                    f"reserved.broker.max.id={max_id} while broker.id.generation.enable=true (Kafka refuses to start)",
                )
            )
        elif not generated and value < 0:
            found.append(
                evidence_at(
                    where,
                    ("broker.id is not set" if raw is None else f"broker.id={value}")
                    + ": broker.id must be greater than or equal to 0 with broker.id.generation.enable=false",
                )
            )
        if value >= 0:
            ids.setdefault(value, []).append(where)
    for value, wheres in ids.items():
        if len(wheres) > 1:
            found.append(evidence_at(", ".join(wheres), f"broker.id={value} is set in {len(wheres)} files"))
    reserved = max(reserved_values, default=DEFAULT_RESERVED_BROKER_MAX_ID)
    for broker_id in sorted(inputs.model.brokers):
        if broker_id > reserved and broker_id not in ids:
            found.append(
                evidence_at(
                    paths.broker_path(broker_id),
                    f"registered id {broker_id} > reserved.broker.max.id={reserved}: a generated id (unless that "
                    f"broker sets it with broker.id.generation.enable=false: give its --broker-config)",
                )
            )
    if found:
        return [
            fail_check(
                "broker-id",
                "blocker",
                found,
                "Set broker.id explicitly on every broker (keep the id it has now, see meta.properties), "
                "within reserved.broker.max.id unless broker.id.generation.enable=false, and roll the brokers "
                "before the migration.",
            )
        ]
    if not inputs.brokers:
        return [not_checked("broker-id", "no --broker-config given (registered ids checked against 1000 only)")]
    return [pass_check("broker-id", ", ".join(str(i) for i in sorted(ids)))]


@check(
    CheckSpec(
        "broker-config-coverage",
        "A server.properties for every registered broker",
        "Configs are generated only for the brokers whose files were given.",
    ),
)
def check_config_coverage(inputs: PlanInputs) -> list[Check]:
    if not inputs.brokers:
        return [
            fail_check(
                "broker-config-coverage",
                "warning",
                [evidence_at("-", "no --broker-config given: config checks are skipped and no broker configs are generated")],
                "Pass every broker's server.properties with --broker-config FILE (repeatable).",
            )
        ]
    registered = set(inputs.model.brokers)
    configured = {b.label_id for b in inputs.brokers if b.label_id is not None}
    evidence = [
        evidence_at(f"/brokers/ids/{i}", "registered broker without a --broker-config") for i in sorted(registered - configured)
    ]
    evidence += [
        evidence_at(b.file.where("broker.id"), f"broker {b.label_id} is not registered in /brokers/ids (down, or another cluster?)")
        for b in inputs.brokers
        if b.label_id is not None and b.label_id not in registered
    ]
    if evidence:
        return [
            fail_check(
                "broker-config-coverage",
                "warning",
                evidence,
                "Give one server.properties per broker; a broker that is down must be up before phase 2.",
            )
        ]
    return [pass_check("broker-config-coverage", f"{len(inputs.brokers)} files for {len(registered)} registered brokers")]


@check(
    CheckSpec(
        "kraft-config",
        "Broker configs are ZooKeeper-mode configs",
        "A file with process.roles is already a KRaft config.",
    ),
)
def check_kraft_config(inputs: PlanInputs) -> list[Check]:
    if not inputs.brokers:
        return no_configs("kraft-config")
    evidence = [
        evidence_at(b.file.where("process.roles"), f"process.roles={b.file.get('process.roles')}")
        for b in inputs.brokers
        if b.file.get("process.roles") is not None
    ]
    if evidence:
        return [
            fail_check(
                "kraft-config",
                "blocker",
                evidence,
                "Give the ZooKeeper-mode server.properties these brokers run with now.",
            )
        ]
    return [pass_check("kraft-config")]


@check(
    CheckSpec(
        "config-value",
        "Config values Kafka can parse",
        "Values Kafka rejects at startup: typed configs (ints, booleans), listener lists (unique names; ports "
        "unique in listeners), "
        "reserved.broker.max.id >= 0, at least one log directory.",
    ),
    CheckSpec(
        "inline-comment",
        "No inline comments in values",
        "Java's Properties keeps `value # comment` whole: the comment becomes part of the value.",
    ),
    CheckSpec(
        "duplicate-key",
        "Each key set once per file",
        "Java's Properties keeps the last of repeated keys; checks and generated files follow it and say so.",
    ),
)
def check_config_values(inputs: PlanInputs) -> list[Check]:
    if not inputs.brokers:
        return no_configs("config-value") + no_configs("inline-comment") + no_configs("duplicate-key")
    bad: list[Evidence] = []
    comments: list[Evidence] = []
    repeated: list[Evidence] = []
    for b in inputs.brokers:
        f = b.file
        for key, value in f.values.items():
            tail = inline_comment(value)
            if tail is not None:
                comments.append(evidence_at(f.where(key), f"{key} value includes {tail!r}"))
            problem = _type_problem(key, value)
            if problem:
                bad.append(evidence_at(f.where(key), f"{key}={show(value)}: {problem}"))
        if not b.log_dirs():
            key = "log.dirs" if f.get("log.dirs") is not None else "log.dir"
            bad.append(
                evidence_at(f.where(key), f"{key}={show(f.get(key) or '')}: At least one log directory must be defined "
                "via log.dirs or log.dir")
            )
        for key, lines in f.repeated().items():
            last = lines[-1]
            repeated += [
                evidence_at(f"{f.path}:{line}", f"{key} is set again at line {last}: Java's Properties keeps the last "
                f"value ({show(f.values[key])}), and so do the checks and the generated files")
                for line in lines[:-1]
            ]
    out: list[Check] = []
    if bad:
        out.append(
            fail_check(
                "config-value",
                "blocker",
                bad,
                "Fix these values (a Kafka 3.9 broker or controller refuses to start with them); an inline "
                "`# comment` must move to its own line.",
            )
        )
    else:
        out.append(pass_check("config-value"))
    if comments:
        out.append(
            fail_check(
                "inline-comment",
                "warning",
                comments,
                "Move each comment to its own line: Java's Properties keeps everything after `=` as the value.",
            )
        )
    else:
        out.append(pass_check("inline-comment"))
    if repeated:
        out.append(
            fail_check(
                "duplicate-key",
                "warning",
                repeated,
                "Keep one line per key: the generated files comment out the earlier lines of every key they "
                "change, but an edit by hand to the first line would silently do nothing.",
            )
        )
    else:
        out.append(pass_check("duplicate-key"))
    return out


def _type_problem(key: str, value: str) -> str | None:
    if key in _INT_KEYS and java_int(value) is None:
        return "not a number of type INT"
    if key in _AT_LEAST_ZERO_KEYS and (java_int(value) or 0) < 0:
        return "Value must be at least 0"
    if key in SHORT_KEYS:
        number = java_int(value)
        if number is None or not -(2**15) <= number < 2**15:
            return "not a number of type SHORT"
    if key in _LONG_KEYS and not re.fullmatch(r"[+-]?\d+", value.strip()):
        return "not a number of type LONG"
    if key in _BOOL_KEYS and java_bool(value) is None:
        return "expected true or false"
    if key in LISTENER_KEYS:
        try:
            listeners = parse_listeners(value)
        except ValueError as e:
            return str(e)
        names = [listener.name for listener in listeners]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            return f"Each listener must have a different name ({', '.join(twice)} more than once)"
        if key == "listeners":  # Kafka checks ports of the bound listeners only
            return _port_problem(listeners)
    if key == "zookeeper.connect" and re.search(r"\s", value.strip()):
        return "contains whitespace (the chroot would include it)"
    return None


def _ip_version(host: str) -> int | None:
    try:
        return ipaddress.ip_address(host).version
    except ValueError:
        return None


def _port_problem(listeners: list[Listener]) -> str | None:
    """CoreUtils.listenerListToEndPoints: one listener per port, except one IPv4 and one IPv6 address."""
    by_port: dict[int, list[Listener]] = {}
    for listener in listeners:
        if listener.port != 0:
            by_port.setdefault(listener.port, []).append(listener)
    for port, group in sorted(by_port.items()):
        if len(group) < 2:
            continue
        versions = [v for v in (_ip_version(x.host) for x in group if x.host) if v is not None]
        by_name = len(group) - len(versions)
        if by_name > 1:
            return f"Each listener must have a different port (port {port})"
        if versions and (sorted(versions) != [4, 6] or by_name):
            return (
                f"Each listener must have a different port unless exactly one listener has an IPv4 address and "
                f"the other IPv6 address (port {port})"
            )
    return None
