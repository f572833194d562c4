"""Preflight checks as data: each has a stable id, a severity, the evidence found and the remediation.

Everything here is decided from the ZooKeeper model, the brokers' `server.properties` and the target
controller list (docs/plan.md lists every id). A check that passes is reported too (`status` "pass"), and
one whose inputs are missing is "not-checked", so a report always shows what was looked at. Each family
module registers its producers with their specs (`registry.check`); `FAMILIES` fixes the report order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from migrate.plan.checks import controllers, identity, versions, zookeeper_state
from migrate.plan.checks.registry import REGISTERED, Check, CheckSpec
from migrate.plan.inputs import PlanInputs

FAMILIES = (versions, identity, controllers, zookeeper_state)
_FAMILY_RANK = {family.__name__: rank for rank, family in enumerate(FAMILIES)}
_unranked = {r.module for r in REGISTERED} - _FAMILY_RANK.keys()
if _unranked:
    raise RuntimeError(f"check families without a place in FAMILIES: {sorted(_unranked)}")
# Registration order within a family, families in FAMILIES order.
_ORDERED = sorted(REGISTERED, key=lambda r: _FAMILY_RANK[r.module])

CATALOG: dict[str, CheckSpec] = {spec.id: spec for r in _ORDERED for spec in r.specs}
LIVE_CHECK_IDS = versions.LIVE_CHECK_IDS

_SEVERITY_ORDER = {"blocker": 0, "warning": 1, "info": 2}
_STATUS_ORDER = {"fail": 0, "not-checked": 1, "pass": 2}


def run_checks(inputs: PlanInputs, live: Sequence[Check] = ()) -> list[Check]:
    """Every preflight check over `inputs`, blockers first; `live` (migrate.plan.live) replaces the placeholders."""
    checks: list[Check] = []
    for registered in _ORDERED:
        checks.extend(registered.produce(inputs))
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
