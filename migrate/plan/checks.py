"""Preflight checks as data: each has a stable id, a severity, the evidence found and the remediation.

Everything here is decided from the ZooKeeper model, the brokers' `server.properties` and the target
controller list (docs/plan.md lists every id). A check that passes is reported too (`status` "pass"), and
one whose inputs are missing is "not-checked", so a report always shows what was looked at.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from migrate.errors import UnsupportedVersionError
from migrate.kraft import metadata_version as mvs
from migrate.plan.inputs import (
    ACL_AUTHORIZER,
    DEFAULT_RESERVED_BROKER_MAX_ID,
    STANDARD_AUTHORIZER,
    Listener,
    PlanInputs,
    java_bool,
    java_int,
    parse_listeners,
    parse_protocol_map,
)
from migrate.plan.properties import PropertiesFile, inline_comment
from migrate.zk import paths
from migrate.zk.sources import split_connect_string

Severity = Literal["blocker", "warning", "info"]
Status = Literal["fail", "pass", "not-checked"]
MAX_EVIDENCE = 25
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")
# Assumed speed of Kafka's initial load (documented in docs/plan.md): records decoded and appended per
# second, plus one Raft commit (fsync round) per batch of >= 200 records that the driver waits for.
LOAD_RECORDS_PER_SECOND = 100_000
LOAD_SECONDS_PER_BATCH = 0.005
MIN_BATCH_SIZE = 200


class Evidence(BaseModel):
    """Where something was found (`file:line`, a znode path, `broker 3`) and what was found there."""

    model_config = ConfigDict(extra="forbid")

    where: str
    detail: str


class Check(BaseModel):
    """One preflight finding (or a passed check)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    severity: Severity
    status: Status = "fail"
    title: str
    evidence: list[Evidence] = Field(default_factory=list)
    remediation: str = ""

    @property
    def is_blocker(self) -> bool:
        return self.status == "fail" and self.severity == "blocker"


@dataclass(frozen=True, slots=True)
class CheckSpec:
    title: str
    description: str


CATALOG: dict[str, CheckSpec] = {
    "software-version": CheckSpec(
        "Broker software version", "Brokers run Kafka 3.9 (asked of live brokers with ApiVersions)."
    ),
    "live-broker-reachable": CheckSpec(
        "Every registered broker is live",
        "Brokers registered in ZooKeeper appear in the live metadata and answer (with --bootstrap-server).",
    ),
    "live-ibp": CheckSpec(
        "Live inter.broker.protocol.version",
        "The value each running broker uses (DescribeConfigs; overrides what server.properties says now).",
    ),
    "log-message-format": CheckSpec(
        "log.message.format.version not set",
        "Ignored with IBP >= 3.0 and unknown to KRaft brokers (DescribeConfigs of each live broker).",
    ),
    "live-offline-partitions": CheckSpec(
        "No offline partitions (live)", "Partitions without a leader in the live cluster's metadata."
    ),
    "live-under-replicated": CheckSpec(
        "No under-replicated partitions (live)", "Partitions whose live ISR is smaller than the replica set."
    ),
    "ibp-version": CheckSpec(
        "inter.broker.protocol.version is 3.9",
        "Kafka's procedure needs IBP 3.9 before the migration; the migration itself needs >= 3.4-IV0 and "
        "Kafka 3.9 refuses to start one below 3.6-IV1 (no metadata transactions).",
    ),
    "ibp-consistent": CheckSpec(
        "All brokers use the same inter.broker.protocol.version",
        "The KRaft controller registers every ZK broker with metadata.version = its IBP; they must agree.",
    ),
    "cluster-id": CheckSpec(
        "Cluster id in ZooKeeper matches meta.properties",
        "Controllers are formatted with /cluster/id; every broker's meta.properties must carry the same id "
        "(not-checked when no meta.properties with a cluster.id was given or found).",
    ),
    "broker-id": CheckSpec(
        "Explicit broker.id within reserved.broker.max.id",
        "Migrating brokers keep their id as node.id: it must be set explicitly, parse and be unique; with "
        "broker.id.generation.enable=true (the default) Kafka also requires it <= reserved.broker.max.id.",
    ),
    "broker-config-coverage": CheckSpec(
        "A server.properties for every registered broker",
        "Configs are generated only for the brokers whose files were given.",
    ),
    "kraft-config": CheckSpec(
        "Broker configs are ZooKeeper-mode configs", "A file with process.roles is already a KRaft config."
    ),
    "config-value": CheckSpec(
        "Config values Kafka can parse",
        "Values Kafka rejects at startup: typed configs (ints, booleans), listener lists (unique names; ports "
        "unique in listeners), "
        "reserved.broker.max.id >= 0, at least one log directory.",
    ),
    "inline-comment": CheckSpec(
        "No inline comments in values",
        "Java's Properties keeps `value # comment` whole: the comment becomes part of the value.",
    ),
    "duplicate-key": CheckSpec(
        "Each key set once per file",
        "Java's Properties keeps the last of repeated keys; checks and generated files follow it and say so.",
    ),
    "controller-quorum": CheckSpec(
        "Target controller quorum", "--controllers names an odd number (3 or 5) of distinct controllers."
    ),
    "controller-id-collision": CheckSpec(
        "Controller ids differ from broker ids",
        "Brokers and controllers share one node-id space: a controller id must not be any broker's id.",
    ),
    "controller-listener": CheckSpec(
        "Controller listener and listener maps",
        "No broker listener may use the controller listener name (mapping it ahead, as Kafka's guide does, is "
        "fine if the protocol is the controller's) and every listener must map to a security protocol.",
    ),
    "control-plane-listener": CheckSpec(
        "control.plane.listener.name", "Not supported by KRaft brokers; removed when brokers move to KRaft."
    ),
    "authorizer": CheckSpec(
        "Authorizer class",
        "AclAuthorizer works on ZK brokers and is replaced by StandardAuthorizer on KRaft brokers.",
    ),
    "jbod": CheckSpec(
        "Several log directories (JBOD)",
        "JBOD brokers need IBP >= 3.7-IV2 to migrate; JBOD in KRaft is early access (KAFKA-16431).",
    ),
    "migration-znode": CheckSpec(
        "No leftover /migration znode",
        "A /migration left by an earlier attempt makes new controllers skip the initial load.",
    ),
    "kraft-controller": CheckSpec(
        "No KRaft controller registered in /controller",
        "A persistent /controller with kraftControllerEpoch > 0 means a migration is already under way.",
    ),
    "znode-format": CheckSpec(
        "Every znode the migration reads can be decoded",
        "A malformed topic, partition state, config, ACL or other znode Kafka reads stops the migration "
        "(Kafka's, `zk2kraft migrate` and `bridge`) at that znode; the plan reads leniently and lists them.",
    ),
    "topic-id": CheckSpec("Every topic has a topic id", "Kafka's migration fails on a topic without topic_id."),
    "partition-state": CheckSpec(
        "Every partition has a state znode",
        "Kafka invents leader and ISR (all replicas) for a partition without a state znode.",
    ),
    "pending-deletion": CheckSpec(
        "No pending topic deletions", "Topics in /admin/delete_topics are not migrated."
    ),
    "pending-reassignment": CheckSpec(
        "No pending reassignments or elections",
        "Legacy /admin/reassign_partitions requests are not migrated; API reassignments carry over.",
    ),
    "unregistered-broker": CheckSpec(
        "Every broker in an assignment is registered",
        "The migration waits until every broker id that hosts a replica registers with the controller.",
    ),
    "offline-partitions": CheckSpec(
        "No offline partitions", "Partitions without a live leader (from ZooKeeper's partition states)."
    ),
    "under-replicated": CheckSpec(
        "No under-replicated partitions", "Partitions whose ISR is smaller than the replica set."
    ),
    "internal-topic-rf": CheckSpec(
        "Internal topics replicated 3 times",
        "__consumer_offsets and __transaction_state with replication factor < 3 lose availability on "
        "every broker restart of the rolling phases.",
    ),
    "chroot": CheckSpec(
        "Brokers' zookeeper.connect chroot matches",
        "Every broker and the controllers must use the same zookeeper.connect chroot as the cluster read.",
    ),
    "zk-acls": CheckSpec(
        "ZooKeeper ACLs readable by the controllers",
        "With secure ZooKeeper ACLs the controllers must authenticate as the brokers' ZooKeeper identity.",
    ),
    "password-encoder": CheckSpec(
        "password.encoder.secret for encrypted dynamic configs",
        "Controllers decrypt dynamic password configs with the brokers' password.encoder.secret.",
    ),
    "log-dir-failure": CheckSpec(
        "No failed log directories", "Brokers with failed log dirs cannot migrate until repaired."
    ),
    "metadata-size": CheckSpec(
        "Metadata size and initial-load estimate", "How much the controllers copy in the initial load."
    ),
}

# Decided from live brokers (migrate/plan/live.py); without --bootstrap-server they are "not-checked".
LIVE_CHECK_IDS = (
    "software-version", "live-broker-reachable", "live-ibp", "log-message-format", "live-offline-partitions",
    "live-under-replicated",
)  # fmt: skip

_SEVERITY_ORDER = {"blocker": 0, "warning": 1, "info": 2}
_STATUS_ORDER = {"fail": 0, "not-checked": 1, "pass": 2}

# Configs with a type Kafka checks at startup (ConfigDef), limited to the ones server.properties commonly sets.
_INT_KEYS = (
    "broker.id", "reserved.broker.max.id", "num.partitions", "default.replication.factor",
    "num.network.threads", "num.io.threads", "num.recovery.threads.per.data.dir", "min.insync.replicas",
    "zookeeper.connection.timeout.ms", "zookeeper.session.timeout.ms", "log.retention.hours",
    "socket.send.buffer.bytes", "socket.receive.buffer.bytes", "socket.request.max.bytes",
    "log.segment.bytes", "group.initial.rebalance.delay.ms", "transaction.state.log.min.isr",
    "num.replica.fetchers", "message.max.bytes", "replica.lag.time.max.ms",
)  # fmt: skip
_SHORT_KEYS = ("offsets.topic.replication.factor", "transaction.state.log.replication.factor")
_LONG_KEYS = ("log.retention.ms", "log.retention.check.interval.ms", "log.retention.bytes", "log.flush.interval.ms")
_BOOL_KEYS = (
    "zookeeper.set.acl", "broker.id.generation.enable", "auto.create.topics.enable", "delete.topic.enable",
    "unclean.leader.election.enable", "zookeeper.metadata.migration.enable", "zookeeper.ssl.client.enable",
    "auto.leader.rebalance.enable", "controlled.shutdown.enable",
)  # fmt: skip
_LISTENER_KEYS = ("listeners", "advertised.listeners")
_AT_LEAST_ZERO_KEYS = ("reserved.broker.max.id",)
# Znodes the KRaft controller reads or writes during the migration.
ACL_CHECK_PATHS = (
    paths.TOPICS, "/brokers/ids", "/config/topics", "/config/brokers", "/config/users", "/config/clients",
    "/controller_epoch", "/admin/delete_topics", "/cluster/id", "/kafka-acl", "/latest_producer_id_block",
)  # fmt: skip
_PERM_ALL = 31


def run_checks(inputs: PlanInputs, live: Sequence[Check] = ()) -> list[Check]:
    """Every preflight check over `inputs`, blockers first; `live` (migrate.plan.live) replaces the placeholders."""
    checks: list[Check] = []
    for produce in _PRODUCERS:
        checks.extend(produce(inputs))
    replaced = {c.id for c in live}
    return sort_checks([c for c in checks if c.id not in replaced] + list(live))


def sort_checks(checks: Iterable[Check]) -> list[Check]:
    order = {cid: i for i, cid in enumerate(CATALOG)}
    return sorted(
        checks,
        key=lambda c: (_STATUS_ORDER[c.status], _SEVERITY_ORDER[c.severity], order.get(c.id, len(order))),
    )


def blockers(checks: Iterable[Check]) -> list[Check]:
    return [c for c in checks if c.is_blocker]


# ------------------------------------------------------------------------------------------ helpers


def _ev(where: str, detail: str) -> Evidence:
    return Evidence(where=where, detail=detail)


def _capped(items: list[Evidence]) -> list[Evidence]:
    if len(items) <= MAX_EVIDENCE:
        return items
    rest = len(items) - MAX_EVIDENCE
    return [*items[:MAX_EVIDENCE], _ev("…", f"and {rest} more")]


def _fail(cid: str, severity: Severity, evidence: list[Evidence], remediation: str, title: str = "") -> Check:
    return Check(
        id=cid,
        severity=severity,
        title=title or CATALOG[cid].title,
        evidence=_capped(evidence),
        remediation=remediation,
    )


def _pass(cid: str, detail: str = "", where: str = "") -> Check:
    evidence = [_ev(where or "-", detail)] if detail else []
    return Check(id=cid, severity="info", status="pass", title=CATALOG[cid].title, evidence=evidence)


# Public names for migrate.plan.live, which builds checks the same way.
def fail_check(cid: str, severity: Severity, evidence: list[Evidence], remediation: str) -> Check:
    return _fail(cid, severity, evidence, remediation)


def pass_check(cid: str, detail: str = "", where: str = "") -> Check:
    return _pass(cid, detail, where)


def _not_checked(cid: str, why: str) -> Check:
    return Check(
        id=cid, severity="info", status="not-checked", title=CATALOG[cid].title, evidence=[_ev("-", why)]
    )


def _show(value: str) -> str:
    return repr(value) if value != value.strip() or "#" in value else value


def _no_configs(cid: str) -> list[Check]:
    return [_not_checked(cid, "no --broker-config given")]


# ------------------------------------------------------------------------------------------ versions


def check_software_version(inputs: PlanInputs) -> list[Check]:
    """Placeholders for the live checks (replaced when `plan --bootstrap-server` asked the brokers)."""
    why = "needs --bootstrap-server (asks the live brokers)"
    return [
        _not_checked(
            "software-version",
            "needs --bootstrap-server (ApiVersions of live brokers); make sure every broker runs Kafka 3.9",
        ),
        *(_not_checked(cid, why) for cid in LIVE_CHECK_IDS if cid != "software-version"),
    ]


def check_ibp(inputs: PlanInputs) -> list[Check]:
    if not inputs.brokers:
        return _no_configs("ibp-version") + _no_configs("ibp-consistent")
    target = mvs.parse(inputs.target_ibp, allow_unstable=True)
    blockers_found: list[Evidence] = []
    unset: list[Evidence] = []
    seen: dict[str, list[str]] = {}
    for b in inputs.brokers:
        raw = b.file.get("inter.broker.protocol.version")
        where = b.file.where("inter.broker.protocol.version")
        if raw is None:
            unset.append(_ev(where, "inter.broker.protocol.version is not set (defaults to the software's version)"))
            seen.setdefault("(unset)", []).append(b.name)
            continue
        try:
            mv = mvs.parse(raw, allow_unstable=True)
        except UnsupportedVersionError:
            blockers_found.append(_ev(where, f"{_show(raw)} is not a version Kafka 3.9 knows"))
            seen.setdefault(raw, []).append(b.name)
            continue
        seen.setdefault(mv.name, []).append(b.name)
        if mv < mvs.IBP_3_4_IV0:
            blockers_found.append(_ev(where, f"{mv.name} < 3.4-IV0: ZooKeeper brokers cannot take part in a migration"))
        elif mv < mvs.IBP_3_6_IV1:
            blockers_found.append(
                _ev(where, f"{mv.name} < 3.6-IV1: no metadata transactions, Kafka 3.9 will not start the migration")
            )
        elif mv < target:
            blockers_found.append(_ev(where, f"{mv.name} < {target.name}: Kafka's procedure requires IBP {inputs.target_ibp}"))
    out: list[Check] = []
    fix = (
        f"Do the 'prepare' phase first: run Kafka 3.9 on every broker with "
        f"inter.broker.protocol.version={inputs.target_ibp} (rolling restart), then re-run the plan. The IBP "
        f"must not change during the migration."
    )
    if blockers_found:
        out.append(_fail("ibp-version", "blocker", blockers_found + unset, fix))
    elif unset:
        out.append(_fail("ibp-version", "warning", unset, fix))
    else:
        out.append(_pass("ibp-version", f"every broker sets {inputs.target_ibp}"))
    if len(seen) > 1:
        evidence = [_ev(", ".join(names), f"inter.broker.protocol.version {v}") for v, names in seen.items()]
        out.append(_fail("ibp-consistent", "blocker", evidence, "Set the same inter.broker.protocol.version on every broker."))
    else:
        out.append(_pass("ibp-consistent"))
    return out


# ------------------------------------------------------------------------------------------ identity


def check_cluster_id(inputs: PlanInputs) -> list[Check]:
    zk_id = inputs.model.cluster_id
    if zk_id is None:
        return [
            _fail(
                "cluster-id",
                "blocker",
                [_ev("/cluster/id", "missing: no broker ever started against this chroot?")],
                "Point --zk at the cluster's chroot; /cluster/id is written by the first broker.",
            )
        ]
    mismatched = [
        _ev(path, f"cluster.id={meta.cluster_id} but /cluster/id is {zk_id}")
        for path, meta in inputs.meta_properties
        if meta.cluster_id is not None and meta.cluster_id != zk_id
    ]
    if mismatched:
        return [
            _fail(
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
        return [_not_checked("cluster-id", f"/cluster/id is {zk_id}, compared with nothing: {why}")]
    return [_pass("cluster-id", f"{zk_id} (ZooKeeper and {len(compared)} meta.properties)", "/cluster/id")]


def _reserved_max_id(f: PropertiesFile) -> int | None:
    """reserved.broker.max.id as Kafka reads it (default 1000); None when Kafka would refuse the value."""
    raw = f.get("reserved.broker.max.id")
    if raw is None:
        return DEFAULT_RESERVED_BROKER_MAX_ID
    value = java_int(raw)
    return value if value is not None and value >= 0 else None


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
            found.append(_ev(where, f"broker.id={_show(raw or '')} is not a number Kafka can parse"))
            continue
        if value == -1 and generated:
            found.append(
                _ev(
                    where,
                    ("broker.id is not set" if raw is None else "broker.id=-1")
                    + " and broker.id.generation.enable=true: the id is generated; broker.id generation is "
                    "incompatible with ZooKeeper migration",
                )
            )
            continue
        if generated and max_id is not None and not -1 <= value <= max_id:
            found.append(
                _ev(
                    where,
                    f"broker.id={value}: broker.id must be greater than or equal to -1 and not greater than "
                    f"reserved.broker.max.id={max_id} while broker.id.generation.enable=true (Kafka refuses to start)",
                )
            )
        elif not generated and value < 0:
            found.append(
                _ev(
                    where,
                    ("broker.id is not set" if raw is None else f"broker.id={value}")
                    + ": broker.id must be greater than or equal to 0 with broker.id.generation.enable=false",
                )
            )
        if value >= 0:
            ids.setdefault(value, []).append(where)
    for value, wheres in ids.items():
        if len(wheres) > 1:
            found.append(_ev(", ".join(wheres), f"broker.id={value} is set in {len(wheres)} files"))
    reserved = max(reserved_values, default=DEFAULT_RESERVED_BROKER_MAX_ID)
    for broker_id in sorted(inputs.model.brokers):
        if broker_id > reserved and broker_id not in ids:
            found.append(
                _ev(
                    paths.broker_path(broker_id),
                    f"registered id {broker_id} > reserved.broker.max.id={reserved}: a generated id (unless that "
                    f"broker sets it with broker.id.generation.enable=false: give its --broker-config)",
                )
            )
    if found:
        return [
            _fail(
                "broker-id",
                "blocker",
                found,
                "Set broker.id explicitly on every broker (keep the id it has now, see meta.properties), "
                "within reserved.broker.max.id unless broker.id.generation.enable=false, and roll the brokers "
                "before the migration.",
            )
        ]
    if not inputs.brokers:
        return [_not_checked("broker-id", "no --broker-config given (registered ids checked against 1000 only)")]
    return [_pass("broker-id", ", ".join(str(i) for i in sorted(ids)))]


def check_config_coverage(inputs: PlanInputs) -> list[Check]:
    if not inputs.brokers:
        return [
            _fail(
                "broker-config-coverage",
                "warning",
                [_ev("-", "no --broker-config given: config checks are skipped and no broker configs are generated")],
                "Pass every broker's server.properties with --broker-config FILE (repeatable).",
            )
        ]
    registered = set(inputs.model.brokers)
    configured = {b.label_id for b in inputs.brokers if b.label_id is not None}
    evidence = [
        _ev(f"/brokers/ids/{i}", "registered broker without a --broker-config") for i in sorted(registered - configured)
    ]
    evidence += [
        _ev(b.file.where("broker.id"), f"broker {b.label_id} is not registered in /brokers/ids (down, or another cluster?)")
        for b in inputs.brokers
        if b.label_id is not None and b.label_id not in registered
    ]
    if evidence:
        return [
            _fail(
                "broker-config-coverage",
                "warning",
                evidence,
                "Give one server.properties per broker; a broker that is down must be up before phase 2.",
            )
        ]
    return [_pass("broker-config-coverage", f"{len(inputs.brokers)} files for {len(registered)} registered brokers")]


def check_kraft_config(inputs: PlanInputs) -> list[Check]:
    if not inputs.brokers:
        return _no_configs("kraft-config")
    evidence = [
        _ev(b.file.where("process.roles"), f"process.roles={b.file.get('process.roles')}")
        for b in inputs.brokers
        if b.file.get("process.roles") is not None
    ]
    if evidence:
        return [
            _fail(
                "kraft-config",
                "blocker",
                evidence,
                "Give the ZooKeeper-mode server.properties these brokers run with now.",
            )
        ]
    return [_pass("kraft-config")]


def check_config_values(inputs: PlanInputs) -> list[Check]:
    if not inputs.brokers:
        return _no_configs("config-value") + _no_configs("inline-comment") + _no_configs("duplicate-key")
    bad: list[Evidence] = []
    comments: list[Evidence] = []
    repeated: list[Evidence] = []
    for b in inputs.brokers:
        f = b.file
        for key, value in f.values.items():
            tail = inline_comment(value)
            if tail is not None:
                comments.append(_ev(f.where(key), f"{key} value includes {tail!r}"))
            problem = _type_problem(key, value)
            if problem:
                bad.append(_ev(f.where(key), f"{key}={_show(value)}: {problem}"))
        if not b.log_dirs():
            key = "log.dirs" if f.get("log.dirs") is not None else "log.dir"
            bad.append(
                _ev(f.where(key), f"{key}={_show(f.get(key) or '')}: At least one log directory must be defined "
                "via log.dirs or log.dir")
            )
        for key, lines in f.repeated().items():
            last = lines[-1]
            repeated += [
                _ev(f"{f.path}:{line}", f"{key} is set again at line {last}: Java's Properties keeps the last "
                f"value ({_show(f.values[key])}), and so do the checks and the generated files")
                for line in lines[:-1]
            ]
    out: list[Check] = []
    if bad:
        out.append(
            _fail(
                "config-value",
                "blocker",
                bad,
                "Fix these values (a Kafka 3.9 broker or controller refuses to start with them); an inline "
                "`# comment` must move to its own line.",
            )
        )
    else:
        out.append(_pass("config-value"))
    if comments:
        out.append(
            _fail(
                "inline-comment",
                "warning",
                comments,
                "Move each comment to its own line: Java's Properties keeps everything after `=` as the value.",
            )
        )
    else:
        out.append(_pass("inline-comment"))
    if repeated:
        out.append(
            _fail(
                "duplicate-key",
                "warning",
                repeated,
                "Keep one line per key: the generated files comment out the earlier lines of every key they "
                "change, but an edit by hand to the first line would silently do nothing.",
            )
        )
    else:
        out.append(_pass("duplicate-key"))
    return out


def _type_problem(key: str, value: str) -> str | None:
    if key in _INT_KEYS and java_int(value) is None:
        return "not a number of type INT"
    if key in _AT_LEAST_ZERO_KEYS and (java_int(value) or 0) < 0:
        return "Value must be at least 0"
    if key in _SHORT_KEYS:
        number = java_int(value)
        if number is None or not -(2**15) <= number < 2**15:
            return "not a number of type SHORT"
    if key in _LONG_KEYS and not re.fullmatch(r"[+-]?\d+", value.strip()):
        return "not a number of type LONG"
    if key in _BOOL_KEYS and java_bool(value) is None:
        return "expected true or false"
    if key in _LISTENER_KEYS:
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


# ------------------------------------------------------------------------------------------ controllers


def check_controller_quorum(inputs: PlanInputs) -> list[Check]:
    ctrls = inputs.controllers
    if not ctrls:
        return [
            _fail(
                "controller-quorum",
                "warning",
                [_ev("--controllers", "not given: controller configs use placeholders 3000@controller-1:9093 ...")],
                "Give the target quorum: --controllers 3000@ctrl1:9093,3001@ctrl2:9093,3002@ctrl3:9093.",
            )
        ]
    evidence: list[Evidence] = []
    severity: Severity = "warning"
    ids = [c.node_id for c in ctrls]
    addresses = [c.address for c in ctrls]
    for value in sorted({i for i in ids if ids.count(i) > 1}):
        evidence.append(_ev("--controllers", f"node id {value} appears more than once"))
        severity = "blocker"
    for address in sorted({a for a in addresses if addresses.count(a) > 1}):
        evidence.append(_ev("--controllers", f"{address} appears more than once"))
        severity = "blocker"
    if severity != "blocker" and (len(ctrls) < 3 or len(ctrls) % 2 == 0):
        evidence.append(
            _ev("--controllers", f"{len(ctrls)} controllers: a quorum of 3 or 5 survives 1 or 2 failures")
        )
    if evidence:
        return [_fail("controller-quorum", severity, evidence, "Use 3 (or 5) controllers with distinct ids and addresses.")]
    return [_pass("controller-quorum", ", ".join(f"{c.node_id}@{c.address}" for c in ctrls), "--controllers")]


def _assigned_broker_ids(inputs: PlanInputs) -> set[int]:
    ids: set[int] = set()
    for topic in inputs.model.topics.values():
        for replicas in topic.partitions.values():
            ids.update(replicas)
        for replicas in topic.adding_replicas.values():
            ids.update(replicas)
    return ids


def check_controller_ids(inputs: PlanInputs) -> list[Check]:
    if not inputs.controllers:
        return [_not_checked("controller-id-collision", "no --controllers given")]
    evidence: list[Evidence] = []
    configured = {b.broker_id: b for b in inputs.brokers if b.broker_id is not None}
    assigned = _assigned_broker_ids(inputs)
    for c in inputs.controllers:
        if c.node_id in inputs.model.brokers:
            evidence.append(_ev(f"/brokers/ids/{c.node_id}", f"controller {c.node_id} has a registered broker's id"))
        if c.node_id in configured:
            b = configured[c.node_id]
            evidence.append(_ev(b.file.where("broker.id"), f"controller {c.node_id} has this broker's broker.id"))
        if c.node_id in assigned and c.node_id not in inputs.model.brokers:
            evidence.append(_ev("/brokers/topics", f"controller {c.node_id} is a broker id in replica assignments"))
    if evidence:
        return [
            _fail(
                "controller-id-collision",
                "blocker",
                evidence,
                "Pick controller node ids no broker uses (Kafka's example uses 3000+).",
            )
        ]
    return [_pass("controller-id-collision")]


def check_listeners(inputs: PlanInputs) -> list[Check]:
    if not inputs.brokers:
        return _no_configs("controller-listener") + _no_configs("control-plane-listener")
    name = inputs.controller_listener
    evidence: list[Evidence] = []
    for b in inputs.brokers:
        f = b.file
        raw_map = f.get("listener.security.protocol.map")
        mapping = dict(b.protocol_map())
        if raw_map is not None:
            try:
                mapping = parse_protocol_map(raw_map)
            except ValueError as e:
                evidence.append(_ev(f.where("listener.security.protocol.map"), str(e)))
        if raw_map is not None and name in mapping and mapping[name] != inputs.controller_protocol:
            # Mapping the name ahead (as Kafka's migration guide shows) is fine; to another protocol it is not.
            evidence.append(
                _ev(
                    f.where("listener.security.protocol.map"),
                    f"maps {name}:{mapping[name]} but the controller listener uses {inputs.controller_protocol} "
                    f"(--controller-protocol)",
                )
            )
        for key in _LISTENER_KEYS:
            raw = f.get(key)
            if raw is None:
                continue
            try:
                listeners = parse_listeners(raw)
            except ValueError:
                continue  # reported by config-value
            for listener in listeners:
                if listener.name == name:
                    evidence.append(_ev(f.where(key), f"{key} already has a listener named {name}"))
                elif listener.name not in mapping:
                    evidence.append(_ev(f.where(key), f"listener {listener.name} has no security protocol in the map"))
        existing = f.get("controller.listener.names")
        if existing is not None and existing.strip().upper() != name:
            evidence.append(_ev(f.where("controller.listener.names"), f"controller.listener.names={existing} (plan uses {name})"))
        ibl = b.inter_broker_listener()
        if ibl not in mapping:
            evidence.append(_ev(f.path, f"inter-broker listener {ibl} has no security protocol in the map"))
    out: list[Check] = []
    if evidence:
        out.append(
            _fail(
                "controller-listener",
                "blocker",
                evidence,
                f"Map every listener in listener.security.protocol.map, map {name} (if at all) to the controller "
                f"listener's protocol and keep {name} out of listeners (or choose another with --controller-listener).",
            )
        )
    else:
        out.append(_pass("controller-listener", f"{name} is no broker listener; every listener is mapped"))
    cp = [
        _ev(b.file.where("control.plane.listener.name"), f"control.plane.listener.name={b.file.get('control.plane.listener.name')}")
        for b in inputs.brokers
        if b.file.get("control.plane.listener.name") is not None
    ]
    if cp:
        out.append(
            _fail(
                "control-plane-listener",
                "warning",
                cp,
                "Keep it while brokers are in ZooKeeper mode; the 'brokers-to-kraft' configs remove it.",
            )
        )
    else:
        out.append(_pass("control-plane-listener"))
    return out


def check_authorizer(inputs: PlanInputs) -> list[Check]:
    if not inputs.brokers:
        return _no_configs("authorizer")
    blockers_found: list[Evidence] = []
    warnings: list[Evidence] = []
    classes: set[str] = set()
    for b in inputs.brokers:
        raw = b.file.get("authorizer.class.name")
        value = (raw or "").strip()
        classes.add(value)
        where = b.file.where("authorizer.class.name")
        if not value:
            continue
        if value == ACL_AUTHORIZER:
            warnings.append(_ev(where, f"{ACL_AUTHORIZER}: switched to {STANDARD_AUTHORIZER} in 'brokers-to-kraft'"))
        elif value == "kafka.security.auth.SimpleAclAuthorizer":
            blockers_found.append(_ev(where, "SimpleAclAuthorizer was removed in Kafka 3.0"))
        elif value == STANDARD_AUTHORIZER:
            blockers_found.append(_ev(where, "StandardAuthorizer only works on KRaft nodes, not on a ZK broker"))
        else:
            warnings.append(_ev(where, f"custom authorizer {value}: it must work on KRaft brokers and controllers"))
    if len(classes) > 1:
        warnings.append(_ev("-", f"brokers use different authorizers: {sorted(c or '(none)' for c in classes)}"))
    if not any(classes) and inputs.model.acls:
        warnings.append(_ev("/kafka-acl", f"{len(inputs.model.acls)} ACL resources exist but no broker sets an authorizer"))
    if blockers_found:
        return [_fail("authorizer", "blocker", blockers_found + warnings, "Use kafka.security.authorizer.AclAuthorizer on ZK brokers.")]
    if warnings:
        return [
            _fail(
                "authorizer",
                "warning",
                warnings,
                "ACLs are migrated; KRaft brokers and controllers need StandardAuthorizer (the generated "
                "configs set it where AclAuthorizer was used).",
            )
        ]
    return [_pass("authorizer")]


def check_jbod(inputs: PlanInputs) -> list[Check]:
    if not inputs.brokers:
        return _no_configs("jbod")
    blockers_found: list[Evidence] = []
    warnings: list[Evidence] = []
    for b in inputs.brokers:
        dirs = b.log_dirs()
        if len(dirs) < 2:
            continue
        key = "log.dirs" if b.file.get("log.dirs") is not None else "log.dir"
        raw = b.file.get("inter.broker.protocol.version")
        try:
            mv = mvs.parse(raw, allow_unstable=True) if raw else None
        except UnsupportedVersionError:
            mv = None
        where = b.file.where(key)
        if mv is not None and mv < mvs.IBP_3_7_IV2:
            blockers_found.append(_ev(where, f"{len(dirs)} log dirs with IBP {mv.name} < 3.7-IV2"))
        else:
            warnings.append(_ev(where, f"{len(dirs)} log dirs: JBOD in KRaft is early access"))
    if blockers_found:
        return [_fail("jbod", "blocker", blockers_found + warnings, "Raise IBP to 3.9 first (the 'prepare' phase).")]
    if warnings:
        return [
            _fail(
                "jbod",
                "warning",
                warnings,
                "During the migration any log-dir failure shuts the broker down (KAFKA-16431); repair failed "
                "dirs first and consider moving to one dir per broker.",
            )
        ]
    return [_pass("jbod")]


# ------------------------------------------------------------------------------------------ ZooKeeper state


def check_migration_state(inputs: PlanInputs) -> list[Check]:
    m = inputs.model
    out: list[Check] = []
    if m.migration is not None:
        mig = m.migration
        detail = (
            f"kraft_controller_id={mig.kraft_controller_id} kraft_controller_epoch={mig.kraft_controller_epoch} "
            f"kraft_metadata_offset={mig.kraft_metadata_offset} (znode version {mig.zk_version})"
        )
        if mig.initial_migration_complete:
            out.append(
                _fail(
                    "migration-znode",
                    "blocker",
                    [_ev("/migration", detail + ": a migration already completed its initial load")],
                    "If that migration is abandoned, run `zk2kraft rollback` (backs up and deletes /controller "
                    "and /migration); new controllers would otherwise skip the initial load and overwrite "
                    "ZooKeeper with an empty image.",
                )
            )
        else:
            out.append(
                _fail(
                    "migration-znode",
                    "warning",
                    [_ev("/migration", detail + ": controllers of an earlier (or this) attempt have started")],
                    "Fine if it was created by the controllers of this plan; otherwise delete it "
                    "(`zk2kraft rollback`) before provisioning new controllers.",
                )
            )
    else:
        out.append(_pass("migration-znode"))
    c = m.controller
    if c is not None and c.is_kraft_controller:
        out.append(
            _fail(
                "kraft-controller",
                "blocker",
                [_ev("/controller", f"KRaft controller {c.broker_id} with kraftControllerEpoch {c.kraft_controller_epoch}")],
                "A migration is under way: follow it with `zk2kraft status`, or revert with `zk2kraft rollback`.",
            )
        )
    else:
        detail = f"ZooKeeper controller: broker {c.broker_id}" if c is not None else "no controller elected"
        out.append(_pass("kraft-controller", detail, "/controller"))
    return out


def check_znode_format(inputs: PlanInputs) -> list[Check]:
    """Znodes a strict read refuses: the plan would otherwise silently leave them (and their topics) out."""
    bad = [_ev(path, problem) for path, problem in sorted(inputs.model.malformed.items())]
    if bad:
        return [
            _fail(
                "znode-format",
                "blocker",
                bad,
                "Repair or delete these znodes before the migration (compare with a healthy broker's view, e.g. "
                "`kafka-topics.sh --describe`); until then the plan leaves them out of every count and check.",
            )
        ]
    return [_pass("znode-format", f"{inputs.znode_count} znodes read")]


def check_topics(inputs: PlanInputs) -> list[Check]:
    m = inputs.model
    out: list[Check] = []
    no_id = [_ev(paths.topic_path(n), "no topic_id") for n, t in sorted(m.topics.items()) if t.topic_id is None]
    if no_id:
        out.append(
            _fail(
                "topic-id",
                "blocker",
                no_id,
                "Let a ZooKeeper controller with IBP >= 2.8 assign topic ids: move the controller (restart the "
                "controller broker) and check again.",
            )
        )
    else:
        out.append(_pass("topic-id", f"{len(m.topics)} topics"))
    missing: list[Evidence] = []
    extra: list[Evidence] = []
    for name, topic in sorted(m.topics.items()):
        for p in sorted(topic.partitions):
            if p not in topic.states:
                missing.append(_ev(f"{paths.partitions_path(name)}/{p}/state", "missing"))
        for p in sorted(set(topic.states) - set(topic.partitions)):
            extra.append(_ev(f"{paths.partitions_path(name)}/{p}/state", "state of a partition not in the assignment"))
    if missing:
        out.append(
            _fail(
                "partition-state",
                "blocker",
                missing + extra,
                "Kafka would invent leader and ISR (all replicas): let the ZooKeeper controller finish creating "
                "these partitions (move the controller) or delete and re-create the topic.",
            )
        )
    elif extra:
        out.append(_fail("partition-state", "warning", extra, "Delete the stray partition znodes."))
    else:
        out.append(_pass("partition-state", f"{m.partition_count} partitions"))
    return out


def check_admin_work(inputs: PlanInputs) -> list[Check]:
    m = inputs.model
    out: list[Check] = []
    deletions = [
        _ev(
            f"/admin/delete_topics/{name}",
            "topic still exists (deletion in progress or stuck)" if name in m.topics else "marker only",
        )
        for name in sorted(m.pending_topic_deletions)
    ]
    if deletions:
        out.append(
            _fail(
                "pending-deletion",
                "warning",
                deletions,
                "Wait for deletions to finish (a stuck one usually waits for an offline broker); these topics are "
                "not migrated and the KRaft controller deletes the markers.",
            )
        )
    else:
        out.append(_pass("pending-deletion"))
    legacy: list[Evidence] = []
    if m.legacy_reassignment is not None:
        legacy = [
            _ev("/admin/reassign_partitions", f"{r.topic}-{r.partition} → {r.replicas}")
            for r in m.legacy_reassignment.partitions
        ] or [_ev("/admin/reassign_partitions", "present")]
    ongoing = [
        _ev(paths.topic_path(name), f"partition {p}: adding {topic.adding_replicas.get(p, [])} removing {topic.removing_replicas.get(p, [])}")
        for name, topic in sorted(m.topics.items())
        for p in sorted(set(topic.adding_replicas) | set(topic.removing_replicas))
        if topic.adding_replicas.get(p) or topic.removing_replicas.get(p)
    ]
    if m.preferred_replica_election is not None:
        ongoing.append(_ev("/admin/preferred_replica_election", f"{len(m.preferred_replica_election.partitions)} partitions"))
    if legacy:
        out.append(
            _fail(
                "pending-reassignment",
                "blocker",
                legacy + ongoing,
                "Let the legacy reassignment finish (or cancel it) before the migration: the KRaft controller "
                "never reads /admin/reassign_partitions.",
            )
        )
    elif ongoing:
        out.append(
            _fail(
                "pending-reassignment",
                "warning",
                ongoing,
                "Reassignments carry over into KRaft, but finishing them first keeps the rolling restarts simple.",
            )
        )
    else:
        out.append(_pass("pending-reassignment"))
    return out


def check_replicas(inputs: PlanInputs) -> list[Check]:
    m = inputs.model
    registered = set(m.brokers)
    unregistered: list[Evidence] = []
    offline: list[Evidence] = []
    urp: list[Evidence] = []
    for name, topic in sorted(m.topics.items()):
        for p, replicas in sorted(topic.partitions.items()):
            where = f"{paths.partitions_path(name)}/{p}"
            gone = sorted({r for r in replicas + topic.adding_replicas.get(p, []) if r not in registered})
            if gone:
                unregistered.append(_ev(where, f"replicas {replicas}: broker(s) {gone} not registered"))
            state = topic.states.get(p)
            if state is None:
                continue
            if state.leader < 0 or state.leader not in registered:
                offline.append(_ev(f"{where}/state", f"leader {state.leader}, ISR {state.isr}"))
            elif len(state.isr) < len(replicas):
                urp.append(_ev(f"{where}/state", f"ISR {state.isr} of replicas {replicas}"))
    out: list[Check] = []
    if unregistered:
        out.append(
            _fail(
                "unregistered-broker",
                "blocker",
                unregistered,
                "The migration waits until every broker id in an assignment registers: bring those brokers back, "
                "or reassign their replicas away, before phase 2.",
            )
        )
    else:
        out.append(_pass("unregistered-broker", f"replicas on brokers {sorted(_assigned_broker_ids(inputs))}"))
    if offline:
        out.append(_fail("offline-partitions", "warning", offline, "Bring the partitions online before the rolling restarts."))
    else:
        out.append(_pass("offline-partitions"))
    if urp:
        out.append(
            _fail(
                "under-replicated",
                "warning",
                urp,
                "Wait until these are in sync: every phase restarts each broker, and an under-replicated partition "
                "goes offline when its last in-sync replica restarts.",
            )
        )
    else:
        out.append(_pass("under-replicated"))
    return out


def check_internal_topics(inputs: PlanInputs) -> list[Check]:
    evidence: list[Evidence] = []
    for name in INTERNAL_TOPICS:
        topic = inputs.model.topics.get(name)
        if topic is None or not topic.partitions:
            continue
        rf = min(len(r) for r in topic.partitions.values())
        if rf < 3:
            evidence.append(_ev(paths.topic_path(name), f"replication factor {rf}"))
    for b in inputs.brokers:
        for key in _SHORT_KEYS:
            value = java_int(b.file.get(key))
            if value is not None and value < 3:
                evidence.append(_ev(b.file.where(key), f"{key}={value}"))
    if evidence:
        return [
            _fail(
                "internal-topic-rf",
                "warning",
                evidence,
                "Raise the replication factor to 3 (kafka-reassign-partitions) before the rolling restarts; with RF 1 "
                "consumer groups and transactions stop while the hosting broker restarts.",
            )
        ]
    return [_pass("internal-topic-rf")]


def check_chroot(inputs: PlanInputs) -> list[Check]:
    if not inputs.brokers:
        return _no_configs("chroot")
    evidence: list[Evidence] = []
    chroots: dict[str, list[str]] = {}
    for b in inputs.brokers:
        raw = b.file.get("zookeeper.connect")
        if raw is None:
            evidence.append(_ev(b.file.path, "zookeeper.connect is not set (a ZooKeeper-mode broker needs it)"))
            continue
        try:
            _hosts, chroot = split_connect_string(raw)
        except Exception as e:  # any parse failure is evidence, not a crash
            evidence.append(_ev(b.file.where("zookeeper.connect"), str(e)))
            continue
        chroots.setdefault(chroot, []).append(b.file.where("zookeeper.connect"))
        if chroot != inputs.zk_chroot:
            evidence.append(
                _ev(b.file.where("zookeeper.connect"), f"chroot {chroot!r} but the cluster was read at {inputs.zk_chroot!r}")
            )
    if len(chroots) > 1:
        evidence.append(_ev("-", f"brokers use {len(chroots)} different chroots: {sorted(chroots)}"))
    if evidence:
        return [
            _fail(
                "chroot",
                "blocker",
                evidence,
                "Every broker and controller must use the same zookeeper.connect (with chroot) as the cluster: "
                "check --zk / --chroot and the brokers' files.",
            )
        ]
    return [_pass("chroot", inputs.zk_chroot)]


def check_zk_acls(inputs: PlanInputs) -> list[Check]:
    if inputs.zk_acls is None:
        return [_not_checked("zk-acls", "the ZooKeeper source carries no ACLs")]
    restricted: list[Evidence] = []
    identities: set[str] = set()
    for path in ACL_CHECK_PATHS:
        acl = inputs.zk_acls.get(path)
        if acl is None:
            continue
        if any(a.scheme == "world" and a.id == "anyone" and a.perms & _PERM_ALL == _PERM_ALL for a in acl):
            continue
        names = sorted(f"{a.scheme}:{a.id}" for a in acl)
        identities.update(n for n in names if not n.startswith("world:"))
        restricted.append(_ev(path, "ACL " + ", ".join(f"{a.scheme}:{a.id}={a.perms}" for a in acl)))
    set_acl = [b.file.where("zookeeper.set.acl") for b in inputs.brokers if java_bool(b.file.get("zookeeper.set.acl"))]
    if restricted:
        return [
            _fail(
                "zk-acls",
                "warning",
                restricted,
                f"The controllers must authenticate to ZooKeeper as {sorted(identities) or 'the brokers'} (same JAAS "
                f"Client login or mTLS identity) and set zookeeper.set.acl=true"
                + (f" (brokers set it: {', '.join(set_acl)})" if set_acl else "")
                + "; the generated controller configs copy the brokers' zookeeper.* settings.",
            )
        ]
    return [_pass("zk-acls", "Kafka's znodes are world-readable and writable")]


def check_password_encoder(inputs: PlanInputs) -> list[Check]:
    encrypted = [
        _ev(f"/config/brokers/{name}", f"{key} is an encrypted dynamic password config")
        for name, cfg in sorted(inputs.model.broker_configs.items())
        for key, value in cfg.config.items()
        if "encryptedPassword:" in value
    ]
    if not encrypted:
        return [_pass("password-encoder", "no encrypted dynamic broker configs")]
    secrets = {b.file.get("password.encoder.secret") for b in inputs.brokers}
    if not inputs.brokers or None in secrets or len(secrets) != 1:
        detail = "brokers disagree on password.encoder.secret" if len(secrets) > 1 else "password.encoder.secret not found"
        return [
            _fail(
                "password-encoder",
                "blocker",
                [*encrypted, _ev("--broker-config", detail)],
                "Give the brokers' server.properties with their password.encoder.secret (the same on all); the "
                "controllers need it to decrypt these values during the initial load.",
            )
        ]
    return [_pass("password-encoder", f"{len(encrypted)} encrypted values; the secret is copied to controller configs")]


def check_log_dir_failures(inputs: PlanInputs) -> list[Check]:
    events = [
        _ev(f"{paths.LOG_DIR_EVENT_NOTIFICATION}/{name}", f"log-dir failure on broker {e.broker_id}")
        for name, e in sorted(inputs.model.log_dir_events.items())
    ]
    if events:
        return [
            _fail(
                "log-dir-failure",
                "warning",
                events,
                "Repair failed log directories and restart those brokers before the migration (KAFKA-16431).",
            )
        ]
    return [_pass("log-dir-failure")]


def estimate_records(inputs: PlanInputs) -> int:
    """Records of the initial load: topics, partitions, configs, quotas, SCRAM, producer ids, ACLs, tokens."""
    m = inputs.model
    count = len(m.topics) + m.partition_count
    count += sum(len(c.config) for c in m.topic_configs.values() if c.name in m.topics)
    count += sum(len(c.config) for c in m.broker_configs.values())
    count += sum(len(q.quotas) + len(q.scram) for q in m.client_quotas.values())
    count += 1 if m.producer_id_block is not None else 0
    count += sum(len(r.acls) for r in m.acls.values())
    count += len(m.delegation_tokens)
    return count


def estimate_load_seconds(records: int) -> float:
    batches = max(1, -(-records // MIN_BATCH_SIZE))
    return records / LOAD_RECORDS_PER_SECOND + batches * LOAD_SECONDS_PER_BATCH


def check_metadata_size(inputs: PlanInputs) -> list[Check]:
    m = inputs.model
    records = estimate_records(inputs)
    seconds = estimate_load_seconds(records)
    detail = (
        f"{len(m.brokers)} brokers, {len(m.topics)} topics, {m.partition_count} partitions, "
        f"{sum(len(r.acls) for r in m.acls.values())} ACLs, {len(m.client_quotas)} quota entities; "
        f"{inputs.znode_count} znodes, {inputs.znode_bytes} bytes of znode data; about {records} records, "
        f"initial load estimated at {seconds:.1f} s"
    )
    return [
        Check(
            id="metadata-size",
            severity="warning" if seconds > 300 else "info",
            status="fail" if seconds > 300 else "pass",
            title=CATALOG["metadata-size"].title,
            evidence=[_ev(inputs.zk_origin, detail)],
            remediation=(
                "A long initial load keeps the cluster without metadata changes (pre-migration mode) meanwhile: "
                "plan the last broker restart of phase 2 for a quiet hour."
                if seconds > 300
                else ""
            ),
        )
    ]


_PRODUCERS = (
    check_software_version,
    check_ibp,
    check_cluster_id,
    check_broker_ids,
    check_config_coverage,
    check_kraft_config,
    check_config_values,
    check_controller_quorum,
    check_controller_ids,
    check_listeners,
    check_authorizer,
    check_jbod,
    check_migration_state,
    check_znode_format,
    check_topics,
    check_admin_work,
    check_replicas,
    check_internal_topics,
    check_chroot,
    check_zk_acls,
    check_password_encoder,
    check_log_dir_failures,
    check_metadata_size,
)

