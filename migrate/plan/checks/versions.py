"""Preflight checks of versions: Kafka on the live brokers and inter.broker.protocol.version in server.properties."""

from __future__ import annotations

from migrate.errors import UnsupportedVersionError
from migrate.kraft import metadata_version as mvs
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
from migrate.plan.inputs import PlanInputs

# Decided from live brokers (migrate/plan/live.py); without --bootstrap-server they are "not-checked".
LIVE_SPECS = (
    CheckSpec(
        "software-version",
        "Broker software version",
        "Brokers run Kafka 3.9 (asked of live brokers with ApiVersions).",
    ),
    CheckSpec(
        "live-broker-reachable",
        "Every registered broker is live",
        "Brokers registered in ZooKeeper appear in the live metadata and answer (with --bootstrap-server).",
    ),
    CheckSpec(
        "live-ibp",
        "Live inter.broker.protocol.version",
        "The value each running broker uses (DescribeConfigs; overrides what server.properties says now).",
    ),
    CheckSpec(
        "log-message-format",
        "log.message.format.version not set",
        "Ignored with IBP >= 3.0 and unknown to KRaft brokers (DescribeConfigs of each live broker).",
    ),
    CheckSpec(
        "live-offline-partitions",
        "No offline partitions (live)",
        "Partitions without a leader in the live cluster's metadata.",
    ),
    CheckSpec(
        "live-under-replicated",
        "No under-replicated partitions (live)",
        "Partitions whose live ISR is smaller than the replica set.",
    ),
)
LIVE_CHECK_IDS = tuple(spec.id for spec in LIVE_SPECS)


@check(*LIVE_SPECS)
def check_live_placeholders(inputs: PlanInputs) -> list[Check]:
    """Placeholders for the live checks (replaced when `plan --bootstrap-server` asked the brokers)."""
    why = "needs --bootstrap-server (asks the live brokers)"
    return [
        not_checked(
            "software-version",
            "needs --bootstrap-server (ApiVersions of live brokers); make sure every broker runs Kafka 3.9",
        ),
        *(not_checked(cid, why) for cid in LIVE_CHECK_IDS if cid != "software-version"),
    ]


@check(
    CheckSpec(
        "ibp-version",
        "inter.broker.protocol.version is 3.9",
        "Kafka's procedure needs IBP 3.9 before the migration; the migration itself needs >= 3.4-IV0 and "
        "Kafka 3.9 refuses to start one below 3.6-IV1 (no metadata transactions).",
    ),
    CheckSpec(
        "ibp-consistent",
        "All brokers use the same inter.broker.protocol.version",
        "The KRaft controller registers every ZK broker with metadata.version = its IBP; they must agree.",
    ),
)
def check_ibp(inputs: PlanInputs) -> list[Check]:
    if not inputs.brokers:
        return no_configs("ibp-version") + no_configs("ibp-consistent")
    target = mvs.parse(inputs.target_ibp, allow_unstable=True)
    blockers_found: list[Evidence] = []
    unset: list[Evidence] = []
    seen: dict[str, list[str]] = {}
    for b in inputs.brokers:
        raw = b.file.get("inter.broker.protocol.version")
        where = b.file.where("inter.broker.protocol.version")
        if raw is None:
            unset.append(evidence_at(where, "inter.broker.protocol.version is not set (defaults to the software's version)"))
            seen.setdefault("(unset)", []).append(b.name)
            continue
        try:
            mv = mvs.parse(raw, allow_unstable=True)
        except UnsupportedVersionError:
            blockers_found.append(evidence_at(where, f"{show(raw)} is not a version Kafka 3.9 knows"))
            seen.setdefault(raw, []).append(b.name)
            continue
        seen.setdefault(mv.name, []).append(b.name)
        if mv < mvs.IBP_3_4_IV0:
            blockers_found.append(evidence_at(where, f"{mv.name} < 3.4-IV0: ZooKeeper brokers cannot take part in a migration"))
        elif mv < mvs.IBP_3_6_IV1:
            blockers_found.append(
                evidence_at(where, f"{mv.name} < 3.6-IV1: no metadata transactions, Kafka 3.9 will not start the migration")
            )
        elif mv < target:
            blockers_found.append(evidence_at(where, f"{mv.name} < {target.name}: Kafka's procedure requires IBP {inputs.target_ibp}"))
    out: list[Check] = []
    fix = (
        f"Do the 'prepare' phase first: run Kafka 3.9 on every broker with "
        f"inter.broker.protocol.version={inputs.target_ibp} (rolling restart), then re-run the plan. The IBP "
        f"must not change during the migration."
    )
    if blockers_found:
        out.append(fail_check("ibp-version", "blocker", blockers_found + unset, fix))
    elif unset:
        out.append(fail_check("ibp-version", "warning", unset, fix))
    else:
        out.append(pass_check("ibp-version", f"every broker sets {inputs.target_ibp}"))
    if len(seen) > 1:
        evidence = [evidence_at(", ".join(names), f"inter.broker.protocol.version {v}") for v, names in seen.items()]
        out.append(fail_check("ibp-consistent", "blocker", evidence, "Set the same inter.broker.protocol.version on every broker."))
    else:
        out.append(pass_check("ibp-consistent"))
    return out
