"""What the actions layer reports: one record per planned, done, failed or skipped action and per hold, and
each recent record as a finding of kind ``action`` (alert ActionPlanned, ActionTaken, ActionFailed or ActionHeld,
one per record)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sidecar.facts_actions import ActionFacts
from sidecar.model import Finding

__all__ = ["ALERTNAMES", "ActionRecord", "findings_of"]

ALERTNAMES = {
    "planned": "ActionPlanned",
    "done": "ActionTaken",
    "failed": "ActionFailed",
    "skipped": "ActionFailed",
    "held": "ActionHeld",
}
_SEVERITY = {"planned": "info", "done": "warning", "failed": "warning", "skipped": "warning", "held": "info"}


@dataclass(frozen=True)
class ActionRecord:
    id: str
    model: str
    action: str
    outcome: str  # planned | done | failed | skipped | held
    plan: str
    trigger: str
    evidence: str
    evidence_at: float
    at: float
    error: str = ""
    target_version: str | None = None
    gpu: str = ""


def findings_of(records: Sequence[ActionRecord], now: float, alert_secs: float, *, check: str) -> list[Finding]:
    """A finding per record younger than twice ``alert_secs``: active (firing) for the first ``alert_secs``,
    then inactive (resolved), then gone."""
    out = []
    for r in records:
        age = now - r.at
        if age > 2 * alert_secs:
            continue
        facts = ActionFacts(
            action=r.action,
            outcome=r.outcome,
            plan=r.plan,
            trigger=r.trigger,
            evidence=r.evidence,
            evidence_at=r.evidence_at,
            at=r.at,
            action_id=r.id,
            runbook=f"{ALERTNAMES[r.outcome]}.md",
            error=r.error,
            target_version=r.target_version,
            gpu=r.gpu,
        )
        out.append(
            Finding(
                check=check,
                kind="action",
                labels={"alertname": ALERTNAMES[r.outcome], "model": r.model, "action": r.action, "action_id": r.id},
                active=age < alert_secs,
                value=1.0,
                severity=_SEVERITY[r.outcome],
                evaluated_at=now,
                for_secs=0.0,
                facts=facts,
            )
        )
    return out
