"""Checks over what live brokers answered (`plan --bootstrap-server`): versions, live configs, partitions.

Pure: the answers are gathered elsewhere (cli/plan_live.py) into a LiveCluster; this module only judges
them. Each check here replaces its `not-checked` placeholder from migrate.plan.checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from migrate.errors import UnsupportedVersionError
from migrate.kraft import metadata_version as mvs
from migrate.plan.checks.registry import Check, Evidence, fail_check, pass_check
from migrate.plan.checks.versions import LIVE_CHECK_IDS
from migrate.plan.inputs import PlanInputs

# ApiVersions api keys quoted in the evidence (Produce, Fetch, Metadata, ApiVersions).
SHOWN_APIS = {0: "Produce", 1: "Fetch", 3: "Metadata", 18: "ApiVersions"}
# Kafka's default log.message.format.version since 3.0 (ignored with IBP >= 3.0, gone in KRaft).
DEFAULT_MESSAGE_FORMAT = "3.0-IV1"


@dataclass(frozen=True, slots=True)
class LiveConfig:
    """One broker config as DescribeConfigs reported it: value and where it came from."""

    value: str | None
    source: str  # e.g. STATIC_BROKER_CONFIG, DYNAMIC_BROKER_CONFIG, DEFAULT_CONFIG

    @property
    def is_default(self) -> bool:
        return self.source == "DEFAULT_CONFIG"


@dataclass(slots=True)
class LiveBroker:
    """A broker of the live metadata and what it answered (error says why it could not be asked)."""

    node_id: int
    host: str
    port: int
    api_versions: dict[int, tuple[int, int]] | None = None
    # Max `metadata.version` level among ApiVersions' supported features (brokers >= 3.3 advertise it).
    metadata_version_max: int | None = None
    api_versions_error: str | None = None
    configs: dict[str, LiveConfig] | None = None
    configs_error: str | None = None

    @property
    def where(self) -> str:
        return f"broker {self.node_id} ({self.host}:{self.port})"


@dataclass(frozen=True, slots=True)
class LivePartition:
    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(slots=True)
class LiveCluster:
    """Everything asked of the live cluster through `bootstrap`."""

    bootstrap: str
    cluster_id: str | None
    brokers: list[LiveBroker] = field(default_factory=list)
    partitions: list[LivePartition] = field(default_factory=list)


def release_of(broker: LiveBroker) -> str | None:
    """The Kafka release a broker runs, from its highest supported metadata.version (None: before 3.3)."""
    level = broker.metadata_version_max
    if level is None:
        return None
    if level >= mvs.LATEST_PRODUCTION.feature_level:
        # Levels above 3.9-IV0 are advertised by 3.9 with unstable.feature.versions.enable.
        return mvs.LATEST_PRODUCTION.release
    try:
        return mvs.from_feature_level(level).release
    except UnsupportedVersionError:
        return None


def _apis_text(broker: LiveBroker) -> str:
    apis = broker.api_versions or {}
    return ", ".join(f"{name} v{apis[key][1]}" for key, name in SHOWN_APIS.items() if key in apis)


def check_software_version(live: LiveCluster) -> Check:
    bad: list[Evidence] = []
    good: list[str] = []
    for b in live.brokers:
        if b.api_versions is None:
            continue  # unreachable brokers are live-broker-reachable's evidence
        release = release_of(b)
        if release == mvs.LATEST_PRODUCTION.release:
            good.append(str(b.node_id))
            continue
        running = f"Kafka {release}" if release else "Kafka older than 3.3 (no metadata.version feature)"
        level = f"metadata.version up to level {b.metadata_version_max}; " if b.metadata_version_max else ""
        bad.append(Evidence(where=b.where, detail=f"runs {running}: {level}{_apis_text(b)}"))
    if bad:
        return fail_check(
            "software-version",
            "blocker",
            bad,
            "Upgrade every broker to Kafka 3.9 first (rolling restart, keeping the current "
            "inter.broker.protocol.version), then raise the IBP to 3.9: only 3.9 brokers can migrate.",
        )
    if not good:
        return Check(
            id="software-version",
            severity="info",
            status="not-checked",
            title="Broker software version",
            evidence=[Evidence(where=live.bootstrap, detail="no broker answered ApiVersions")],
        )
    return pass_check("software-version", f"brokers {', '.join(good)} run Kafka 3.9", live.bootstrap)


def check_reachable(inputs: PlanInputs, live: LiveCluster) -> Check:
    in_metadata = {b.node_id for b in live.brokers}
    evidence = [
        Evidence(
            where=f"/brokers/ids/{i}", detail="registered in ZooKeeper but not in the live cluster's metadata"
        )
        for i in sorted(set(inputs.model.brokers) - in_metadata)
    ]
    evidence += [
        Evidence(where=b.where, detail=f"not reachable: {b.api_versions_error}")
        for b in live.brokers
        if b.api_versions_error is not None
    ]
    evidence += [
        Evidence(
            where=b.where, detail=f"in the live metadata but not registered in ZooKeeper ({inputs.zk_origin})"
        )
        for b in live.brokers
        if b.node_id not in inputs.model.brokers
    ]
    zk_id = inputs.model.cluster_id
    if live.cluster_id is not None and zk_id is not None and live.cluster_id != zk_id:
        evidence.insert(
            0,
            Evidence(
                where=live.bootstrap, detail=f"cluster id {live.cluster_id}, but /cluster/id is {zk_id}"
            ),
        )
    if evidence:
        return fail_check(
            "live-broker-reachable",
            "blocker",
            evidence,
            "Every broker must be up and reachable before the rolling phases: restart the missing brokers; "
            "if a broker or the cluster id does not match ZooKeeper, check that --zk names this cluster's chroot "
            "and --bootstrap-server this cluster.",
        )
    return pass_check("live-broker-reachable", f"brokers {sorted(in_metadata)} answered", live.bootstrap)


def check_live_ibp(inputs: PlanInputs, live: LiveCluster) -> Check:
    target = mvs.parse(inputs.target_ibp, allow_unstable=True)
    bad: list[Evidence] = []
    drift: list[Evidence] = []
    seen: dict[str, list[int]] = {}
    asked = [b for b in live.brokers if b.configs is not None or b.configs_error is not None]
    for b in asked:
        if b.configs is None:
            bad.append(Evidence(where=b.where, detail=f"DescribeConfigs failed: {b.configs_error}"))
            continue
        cfg = b.configs.get("inter.broker.protocol.version")
        if cfg is None or cfg.value is None:
            bad.append(
                Evidence(where=b.where, detail="DescribeConfigs returned no inter.broker.protocol.version")
            )
            continue
        seen.setdefault(cfg.value, []).append(b.node_id)
        try:
            mv = mvs.parse(cfg.value, allow_unstable=True)
        except UnsupportedVersionError:
            bad.append(
                Evidence(
                    where=b.where, detail=f"inter.broker.protocol.version={cfg.value} is unknown to Kafka 3.9"
                )
            )
            continue
        if mv < target:
            bad.append(
                Evidence(
                    where=b.where,
                    detail=f"inter.broker.protocol.version={cfg.value} ({cfg.source}) < {target.name}",
                )
            )
        drift.extend(_file_drift(inputs, b.node_id, mv))
    if len(seen) > 1:
        bad.append(
            Evidence(
                where=live.bootstrap,
                detail="brokers disagree: " + "; ".join(f"{v} on {ids}" for v, ids in sorted(seen.items())),
            )
        )
    if bad or drift:
        return fail_check(
            "live-ibp",
            "blocker" if bad else "warning",
            bad + drift,
            f"Set inter.broker.protocol.version={inputs.target_ibp} on every broker (rolling restart) before the "
            "migration; the running value is what counts, whatever server.properties says now. A file that "
            "differs from the running value means a restart is pending or the file is not the one in use.",
        )
    if not asked:
        return Check(
            id="live-ibp",
            severity="info",
            status="not-checked",
            title="Live inter.broker.protocol.version",
            evidence=[Evidence(where=live.bootstrap, detail="no broker was asked (none reachable)")],
        )
    return pass_check("live-ibp", f"every broker runs with {', '.join(sorted(seen))}", live.bootstrap)


def _file_drift(inputs: PlanInputs, node_id: int, running: mvs.MetadataVersion) -> list[Evidence]:
    """Evidence when the broker's --broker-config names another IBP than the one it runs with."""
    out = []
    for b in inputs.brokers:
        raw = b.file.get("inter.broker.protocol.version")
        if b.broker_id != node_id or raw is None:
            continue
        try:
            in_file = mvs.parse(raw, allow_unstable=True)
        except UnsupportedVersionError:
            continue  # ibp-version already reports an unparseable file value
        if in_file != running:
            out.append(
                Evidence(
                    where=b.file.where("inter.broker.protocol.version"),
                    detail=f"the file says {in_file.name}, broker {node_id} runs with {running.name}",
                )
            )
    return out


def check_message_format(live: LiveCluster) -> Check:
    evidence = []
    for b in live.brokers:
        cfg = (b.configs or {}).get("log.message.format.version")
        if cfg is None or cfg.is_default or cfg.value is None:
            continue
        evidence.append(
            Evidence(where=b.where, detail=f"log.message.format.version={cfg.value} ({cfg.source})")
        )
    if evidence:
        return fail_check(
            "log-message-format",
            "warning",
            evidence,
            "log.message.format.version is ignored with IBP >= 3.0 and does not exist for KRaft brokers: remove it "
            "from server.properties (and dynamic broker configs) before the brokers move to KRaft.",
        )
    return pass_check("log-message-format", "not set explicitly on any broker", live.bootstrap)


def check_partitions(live: LiveCluster) -> list[Check]:
    offline: list[Evidence] = []
    urp: list[Evidence] = []
    for p in sorted(live.partitions, key=lambda x: (x.topic, x.partition)):
        where = f"{p.topic}-{p.partition}"
        if p.leader < 0:
            offline.append(
                Evidence(where=where, detail=f"no leader; replicas {list(p.replicas)}, ISR {list(p.isr)}")
            )
        elif len(p.isr) < len(p.replicas):
            urp.append(
                Evidence(
                    where=where, detail=f"ISR {list(p.isr)} of replicas {list(p.replicas)}, leader {p.leader}"
                )
            )
    out = []
    if offline:
        out.append(
            fail_check(
                "live-offline-partitions",
                "blocker",
                offline,
                "Bring these partitions online (start the brokers that host them, or reassign) before any restart: "
                "the migration cannot give them a leader either.",
            )
        )
    else:
        out.append(
            pass_check(
                "live-offline-partitions", f"{len(live.partitions)} partitions have a leader", live.bootstrap
            )
        )
    if urp:
        out.append(
            fail_check(
                "live-under-replicated",
                "warning",
                urp,
                "Wait until these are back in sync: every phase restarts each broker, and a partition goes offline "
                "when its last in-sync replica restarts.",
            )
        )
    else:
        out.append(pass_check("live-under-replicated", "every ISR is complete", live.bootstrap))
    return out


def live_checks(inputs: PlanInputs, live: LiveCluster) -> list[Check]:
    """Every live check (ids in LIVE_CHECK_IDS), to pass to run_checks(inputs, live=...)."""
    checks = [
        check_software_version(live),
        check_reachable(inputs, live),
        check_live_ibp(inputs, live),
        check_message_format(live),
        *check_partitions(live),
    ]
    assert {c.id for c in checks} == set(LIVE_CHECK_IDS)
    return checks
