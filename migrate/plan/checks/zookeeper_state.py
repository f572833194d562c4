"""Preflight checks of what ZooKeeper holds: leftovers of a migration, znodes Kafka cannot read, topic and
partition health, pending admin work, chroot, ACLs, and the size of the initial load.
"""

from __future__ import annotations

from migrate.migration import DEFAULT_MIN_BATCH_SIZE
from migrate.plan.checks.controllers import assigned_broker_ids
from migrate.plan.checks.identity import SHORT_KEYS
from migrate.plan.checks.registry import (
    SPECS,
    Check,
    CheckSpec,
    Evidence,
    check,
    evidence_at,
    fail_check,
    no_configs,
    not_checked,
    pass_check,
)
from migrate.plan.inputs import (
    PlanInputs,
    java_bool,
    java_int,
)
from migrate.zk import paths
from migrate.zk.sources import split_connect_string

INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")
# Assumed speed of Kafka's initial load (documented in docs/plan.md): records decoded and appended per
# second, plus one Raft commit (fsync round) per batch of >= 200 records that the driver waits for.
LOAD_RECORDS_PER_SECOND = 100_000
LOAD_SECONDS_PER_BATCH = 0.005
# Znodes the KRaft controller reads or writes during the migration.
ACL_CHECK_PATHS = (
    paths.TOPICS, "/brokers/ids", "/config/topics", "/config/brokers", "/config/users", "/config/clients",
    "/controller_epoch", "/admin/delete_topics", "/cluster/id", "/kafka-acl", "/latest_producer_id_block",
)  # fmt: skip
_PERM_ALL = 31


@check(
    CheckSpec(
        "migration-znode",
        "No leftover /migration znode",
        "A /migration left by an earlier attempt makes new controllers skip the initial load.",
    ),
    CheckSpec(
        "kraft-controller",
        "No KRaft controller registered in /controller",
        "A persistent /controller with kraftControllerEpoch > 0 means a migration is already under way.",
    ),
)
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
                fail_check(
                    "migration-znode",
                    "blocker",
                    [evidence_at("/migration", detail + ": a migration already completed its initial load")],
                    "If that migration is abandoned, run `zk2kraft rollback` (backs up and deletes /controller "
                    "and /migration); new controllers would otherwise skip the initial load and overwrite "
                    "ZooKeeper with an empty image.",
                )
            )
        else:
            out.append(
                fail_check(
                    "migration-znode",
                    "warning",
                    [evidence_at("/migration", detail + ": controllers of an earlier (or this) attempt have started")],
                    "Fine if it was created by the controllers of this plan; otherwise delete it "
                    "(`zk2kraft rollback`) before provisioning new controllers.",
                )
            )
    else:
        out.append(pass_check("migration-znode"))
    c = m.controller
    if c is not None and c.is_kraft_controller:
        out.append(
            fail_check(
                "kraft-controller",
                "blocker",
                [evidence_at("/controller", f"KRaft controller {c.broker_id} with kraftControllerEpoch {c.kraft_controller_epoch}")],
                "A migration is under way: follow it with `zk2kraft status`, or revert with `zk2kraft rollback`.",
            )
        )
    else:
        detail = f"ZooKeeper controller: broker {c.broker_id}" if c is not None else "no controller elected"
        out.append(pass_check("kraft-controller", detail, "/controller"))
    return out


@check(
    CheckSpec(
        "znode-format",
        "Every znode the migration reads can be decoded",
        "A malformed topic, partition state, config, ACL or other znode Kafka reads stops the migration "
        "(Kafka's, `zk2kraft migrate` and `bridge`) at that znode; the plan reads leniently and lists them.",
    ),
)
def check_znode_format(inputs: PlanInputs) -> list[Check]:
    """Znodes a strict read refuses: the plan would otherwise silently leave them (and their topics) out."""
    bad = [evidence_at(path, problem) for path, problem in sorted(inputs.model.malformed.items())]
    if bad:
        return [
            fail_check(
                "znode-format",
                "blocker",
                bad,
                "Repair or delete these znodes before the migration (compare with a healthy broker's view, e.g. "
                "`kafka-topics.sh --describe`); until then the plan leaves them out of every count and check.",
            )
        ]
    return [pass_check("znode-format", f"{inputs.znode_count} znodes read")]


@check(
    CheckSpec(
        "topic-id",
        "Every topic has a topic id",
        "Kafka's migration fails on a topic without topic_id.",
    ),
    CheckSpec(
        "partition-state",
        "Every partition has a state znode",
        "Kafka invents leader and ISR (all replicas) for a partition without a state znode.",
    ),
)
def check_topics(inputs: PlanInputs) -> list[Check]:
    m = inputs.model
    out: list[Check] = []
    no_id = [evidence_at(paths.topic_path(n), "no topic_id") for n, t in sorted(m.topics.items()) if t.topic_id is None]
    if no_id:
        out.append(
            fail_check(
                "topic-id",
                "blocker",
                no_id,
                "Let a ZooKeeper controller with IBP >= 2.8 assign topic ids: move the controller (restart the "
                "controller broker) and check again.",
            )
        )
    else:
        out.append(pass_check("topic-id", f"{len(m.topics)} topics"))
    missing: list[Evidence] = []
    extra: list[Evidence] = []
    for name, topic in sorted(m.topics.items()):
        for p in sorted(topic.partitions):
            if p not in topic.states:
                missing.append(evidence_at(f"{paths.partitions_path(name)}/{p}/state", "missing"))
        for p in sorted(set(topic.states) - set(topic.partitions)):
            extra.append(evidence_at(f"{paths.partitions_path(name)}/{p}/state", "state of a partition not in the assignment"))
    if missing:
        out.append(
            fail_check(
                "partition-state",
                "blocker",
                missing + extra,
                "Kafka would invent leader and ISR (all replicas): let the ZooKeeper controller finish creating "
                "these partitions (move the controller) or delete and re-create the topic.",
            )
        )
    elif extra:
        out.append(fail_check("partition-state", "warning", extra, "Delete the stray partition znodes."))
    else:
        out.append(pass_check("partition-state", f"{m.partition_count} partitions"))
    return out


@check(
    CheckSpec(
        "pending-deletion",
        "No pending topic deletions",
        "Topics in /admin/delete_topics are not migrated.",
    ),
    CheckSpec(
        "pending-reassignment",
        "No pending reassignments or elections",
        "Legacy /admin/reassign_partitions requests are not migrated; API reassignments carry over.",
    ),
)
def check_admin_work(inputs: PlanInputs) -> list[Check]:
    m = inputs.model
    out: list[Check] = []
    deletions = [
        evidence_at(
            f"/admin/delete_topics/{name}",
            "topic still exists (deletion in progress or stuck)" if name in m.topics else "marker only",
        )
        for name in sorted(m.pending_topic_deletions)
    ]
    if deletions:
        out.append(
            fail_check(
                "pending-deletion",
                "warning",
                deletions,
                "Wait for deletions to finish (a stuck one usually waits for an offline broker); these topics are "
                "not migrated and the KRaft controller deletes the markers.",
            )
        )
    else:
        out.append(pass_check("pending-deletion"))
    legacy: list[Evidence] = []
    if m.legacy_reassignment is not None:
        legacy = [
            evidence_at("/admin/reassign_partitions", f"{r.topic}-{r.partition} → {r.replicas}")
            for r in m.legacy_reassignment.partitions
        ] or [evidence_at("/admin/reassign_partitions", "present")]
    ongoing = [
        evidence_at(paths.topic_path(name), f"partition {p}: adding {topic.adding_replicas.get(p, [])} removing {topic.removing_replicas.get(p, [])}")
        for name, topic in sorted(m.topics.items())
        for p in sorted(set(topic.adding_replicas) | set(topic.removing_replicas))
        if topic.adding_replicas.get(p) or topic.removing_replicas.get(p)
    ]
    if m.preferred_replica_election is not None:
        ongoing.append(evidence_at("/admin/preferred_replica_election", f"{len(m.preferred_replica_election.partitions)} partitions"))
    if legacy:
        out.append(
            fail_check(
                "pending-reassignment",
                "blocker",
                legacy + ongoing,
                "Let the legacy reassignment finish (or cancel it) before the migration: the KRaft controller "
                "never reads /admin/reassign_partitions.",
            )
        )
    elif ongoing:
        out.append(
            fail_check(
                "pending-reassignment",
                "warning",
                ongoing,
                "Reassignments carry over into KRaft, but finishing them first keeps the rolling restarts simple.",
            )
        )
    else:
        out.append(pass_check("pending-reassignment"))
    return out


@check(
    CheckSpec(
        "unregistered-broker",
        "Every broker in an assignment is registered",
        "The migration waits until every broker id that hosts a replica registers with the controller.",
    ),
    CheckSpec(
        "offline-partitions",
        "No offline partitions",
        "Partitions without a live leader (from ZooKeeper's partition states).",
    ),
    CheckSpec(
        "under-replicated",
        "No under-replicated partitions",
        "Partitions whose ISR is smaller than the replica set.",
    ),
)
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
                unregistered.append(evidence_at(where, f"replicas {replicas}: broker(s) {gone} not registered"))
            state = topic.states.get(p)
            if state is None:
                continue
            if state.leader < 0 or state.leader not in registered:
                offline.append(evidence_at(f"{where}/state", f"leader {state.leader}, ISR {state.isr}"))
            elif len(state.isr) < len(replicas):
                urp.append(evidence_at(f"{where}/state", f"ISR {state.isr} of replicas {replicas}"))
    out: list[Check] = []
    if unregistered:
        out.append(
            fail_check(
                "unregistered-broker",
                "blocker",
                unregistered,
                "The migration waits until every broker id in an assignment registers: bring those brokers back, "
                "or reassign their replicas away, before phase 2.",
            )
        )
    else:
        out.append(pass_check("unregistered-broker", f"replicas on brokers {sorted(assigned_broker_ids(inputs))}"))
    if offline:
        out.append(fail_check("offline-partitions", "warning", offline, "Bring the partitions online before the rolling restarts."))
    else:
        out.append(pass_check("offline-partitions"))
    if urp:
        out.append(
            fail_check(
                "under-replicated",
                "warning",
                urp,
                "Wait until these are in sync: every phase restarts each broker, and an under-replicated partition "
                "goes offline when its last in-sync replica restarts.",
            )
        )
    else:
        out.append(pass_check("under-replicated"))
    return out


@check(
    CheckSpec(
        "internal-topic-rf",
        "Internal topics replicated 3 times",
        "__consumer_offsets and __transaction_state with replication factor < 3 lose availability on "
        "every broker restart of the rolling phases.",
    ),
)
def check_internal_topics(inputs: PlanInputs) -> list[Check]:
    evidence: list[Evidence] = []
    for name in INTERNAL_TOPICS:
        topic = inputs.model.topics.get(name)
        if topic is None or not topic.partitions:
            continue
        rf = min(len(r) for r in topic.partitions.values())
        if rf < 3:
            evidence.append(evidence_at(paths.topic_path(name), f"replication factor {rf}"))
    for b in inputs.brokers:
        for key in SHORT_KEYS:
            value = java_int(b.file.get(key))
            if value is not None and value < 3:
                evidence.append(evidence_at(b.file.where(key), f"{key}={value}"))
    if evidence:
        return [
            fail_check(
                "internal-topic-rf",
                "warning",
                evidence,
                "Raise the replication factor to 3 (kafka-reassign-partitions) before the rolling restarts; with RF 1 "
                "consumer groups and transactions stop while the hosting broker restarts.",
            )
        ]
    return [pass_check("internal-topic-rf")]


@check(
    CheckSpec(
        "chroot",
        "Brokers' zookeeper.connect chroot matches",
        "Every broker and the controllers must use the same zookeeper.connect chroot as the cluster read.",
    ),
)
def check_chroot(inputs: PlanInputs) -> list[Check]:
    if not inputs.brokers:
        return no_configs("chroot")
    evidence: list[Evidence] = []
    chroots: dict[str, list[str]] = {}
    for b in inputs.brokers:
        raw = b.file.get("zookeeper.connect")
        if raw is None:
            evidence.append(evidence_at(b.file.path, "zookeeper.connect is not set (a ZooKeeper-mode broker needs it)"))
            continue
        try:
            _hosts, chroot = split_connect_string(raw)
        except Exception as e:  # any parse failure is evidence, not a crash
            evidence.append(evidence_at(b.file.where("zookeeper.connect"), str(e)))
            continue
        chroots.setdefault(chroot, []).append(b.file.where("zookeeper.connect"))
        if chroot != inputs.zk_chroot:
            evidence.append(
                evidence_at(b.file.where("zookeeper.connect"), f"chroot {chroot!r} but the cluster was read at {inputs.zk_chroot!r}")
            )
    if len(chroots) > 1:
        evidence.append(evidence_at("-", f"brokers use {len(chroots)} different chroots: {sorted(chroots)}"))
    if evidence:
        return [
            fail_check(
                "chroot",
                "blocker",
                evidence,
                "Every broker and controller must use the same zookeeper.connect (with chroot) as the cluster: "
                "check --zk / --chroot and the brokers' files.",
            )
        ]
    return [pass_check("chroot", inputs.zk_chroot)]


@check(
    CheckSpec(
        "zk-acls",
        "ZooKeeper ACLs readable by the controllers",
        "With secure ZooKeeper ACLs the controllers must authenticate as the brokers' ZooKeeper identity.",
    ),
)
def check_zk_acls(inputs: PlanInputs) -> list[Check]:
    if inputs.zk_acls is None:
        return [not_checked("zk-acls", "the ZooKeeper source carries no ACLs")]
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
        restricted.append(evidence_at(path, "ACL " + ", ".join(f"{a.scheme}:{a.id}={a.perms}" for a in acl)))
    set_acl = [b.file.where("zookeeper.set.acl") for b in inputs.brokers if java_bool(b.file.get("zookeeper.set.acl"))]
    if restricted:
        return [
            fail_check(
                "zk-acls",
                "warning",
                restricted,
                f"The controllers must authenticate to ZooKeeper as {sorted(identities) or 'the brokers'} (same JAAS "
                f"Client login or mTLS identity) and set zookeeper.set.acl=true"
                + (f" (brokers set it: {', '.join(set_acl)})" if set_acl else "")
                + "; the generated controller configs copy the brokers' zookeeper.* settings.",
            )
        ]
    return [pass_check("zk-acls", "Kafka's znodes are world-readable and writable")]


@check(
    CheckSpec(
        "password-encoder",
        "password.encoder.secret for encrypted dynamic configs",
        "Controllers decrypt dynamic password configs with the brokers' password.encoder.secret.",
    ),
)
def check_password_encoder(inputs: PlanInputs) -> list[Check]:
    encrypted = [
        evidence_at(f"/config/brokers/{name}", f"{key} is an encrypted dynamic password config")
        for name, cfg in sorted(inputs.model.broker_configs.items())
        for key, value in cfg.config.items()
        if "encryptedPassword:" in value
    ]
    if not encrypted:
        return [pass_check("password-encoder", "no encrypted dynamic broker configs")]
    secrets = {b.file.get("password.encoder.secret") for b in inputs.brokers}
    if not inputs.brokers or None in secrets or len(secrets) != 1:
        detail = "brokers disagree on password.encoder.secret" if len(secrets) > 1 else "password.encoder.secret not found"
        return [
            fail_check(
                "password-encoder",
                "blocker",
                [*encrypted, evidence_at("--broker-config", detail)],
                "Give the brokers' server.properties with their password.encoder.secret (the same on all); the "
                "controllers need it to decrypt these values during the initial load.",
            )
        ]
    return [pass_check("password-encoder", f"{len(encrypted)} encrypted values; the secret is copied to controller configs")]


@check(
    CheckSpec(
        "log-dir-failure",
        "No failed log directories",
        "Brokers with failed log dirs cannot migrate until repaired.",
    ),
)
def check_log_dir_failures(inputs: PlanInputs) -> list[Check]:
    events = [
        evidence_at(f"{paths.LOG_DIR_EVENT_NOTIFICATION}/{name}", f"log-dir failure on broker {e.broker_id}")
        for name, e in sorted(inputs.model.log_dir_events.items())
    ]
    if events:
        return [
            fail_check(
                "log-dir-failure",
                "warning",
                events,
                "Repair failed log directories and restart those brokers before the migration (KAFKA-16431).",
            )
        ]
    return [pass_check("log-dir-failure")]


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
    batches = max(1, -(-records // DEFAULT_MIN_BATCH_SIZE))
    return records / LOAD_RECORDS_PER_SECOND + batches * LOAD_SECONDS_PER_BATCH


@check(
    CheckSpec(
        "metadata-size",
        "Metadata size and initial-load estimate",
        "How much the controllers copy in the initial load.",
    ),
)
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
            title=SPECS["metadata-size"].title,
            evidence=[evidence_at(inputs.zk_origin, detail)],
            remediation=(
                "A long initial load keeps the cluster without metadata changes (pre-migration mode) meanwhile: "
                "plan the last broker restart of phase 2 for a quiet hour."
                if seconds > 300
                else ""
            ),
        )
    ]
