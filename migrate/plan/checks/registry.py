"""The one registry of preflight checks: each producer is registered together with the spec of every id it reports.

A spec carries the id, title and description (docs/plan.md lists every id); a producer reads the plan's
inputs and returns one `Check` per id, failed, passed or "not-checked" when its inputs are missing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from migrate.plan.inputs import PlanInputs

Severity = Literal["blocker", "warning", "info"]
Status = Literal["fail", "pass", "not-checked"]
MAX_EVIDENCE = 25


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
    """What one check id means: the title every report shows and the description docs/plan.md explains."""

    id: str
    title: str
    description: str


Producer = Callable[[PlanInputs], list[Check]]


@dataclass(frozen=True, slots=True)
class RegisteredCheck:
    """A producer and the specs of the ids it reports, in report order."""

    specs: tuple[CheckSpec, ...]
    produce: Producer
    module: str


REGISTERED: list[RegisteredCheck] = []
SPECS: dict[str, CheckSpec] = {}


def check(*specs: CheckSpec) -> Callable[[Producer], Producer]:
    """Register the decorated producer as the one source of `specs`' ids."""

    def register(produce: Producer) -> Producer:
        taken = [spec.id for spec in specs if spec.id in SPECS]
        if taken or len({spec.id for spec in specs}) < len(specs):
            raise ValueError(f"check id registered twice: {taken or [spec.id for spec in specs]}")
        SPECS.update((spec.id, spec) for spec in specs)
        REGISTERED.append(RegisteredCheck(specs, produce, produce.__module__))
        return produce

    return register


def evidence_at(where: str, detail: str) -> Evidence:
    return Evidence(where=where, detail=detail)


def capped(items: list[Evidence]) -> list[Evidence]:
    if len(items) <= MAX_EVIDENCE:
        return items
    rest = len(items) - MAX_EVIDENCE
    return [*items[:MAX_EVIDENCE], evidence_at("…", f"and {rest} more")]


def fail_check(cid: str, severity: Severity, evidence: list[Evidence], remediation: str) -> Check:
    return Check(
        id=cid, severity=severity, title=SPECS[cid].title, evidence=capped(evidence), remediation=remediation
    )


def pass_check(cid: str, detail: str = "", where: str = "") -> Check:
    evidence = [evidence_at(where or "-", detail)] if detail else []
    return Check(id=cid, severity="info", status="pass", title=SPECS[cid].title, evidence=evidence)


def not_checked(cid: str, why: str) -> Check:
    return Check(
        id=cid, severity="info", status="not-checked", title=SPECS[cid].title, evidence=[evidence_at("-", why)]
    )


def show(value: str) -> str:
    """A config value as the evidence quotes it: repr when blanks or a '#' would hide in plain text."""
    return repr(value) if value != value.strip() or "#" in value else value


def no_configs(cid: str) -> list[Check]:
    return [not_checked(cid, "no --broker-config given")]
