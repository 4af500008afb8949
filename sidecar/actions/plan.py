"""From a finding to a planned step: which trigger it is (the probe's failure rule, the canary verdict), the
step the model's config names for it, the exact request it will send, and the evidence it rests on."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from sidecar.actions.config import ModelActionsConfig
from sidecar.model import Finding

__all__ = ["Plan", "Trigger", "evidence_at", "plan_id", "plan_text", "trigger_of"]


@dataclass(frozen=True)
class Trigger:
    kind: str  # probe | canary
    model: str
    alertname: str
    evidence: str  # the finding's summary
    evidence_at: float
    baseline: str | None = None  # canary: the version to revert to
    version: str = ""  # probe: the version probed ("" when the probe leaves the choice to Triton)


@dataclass(frozen=True)
class Plan:
    id: str
    model: str
    action: str  # reload | fallback | revert
    trigger: Trigger
    target: str  # the model the request loads
    version: str | None = None  # the one version the load pins (revert; a reload of a held model), else None
    config: dict[str, Any] | None = None
    also: tuple[str, ...] = ()
    webhook_url: str | None = None
    at: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return plan_text(self.action, self.target, self.version)


def plan_text(action: str, target: str, version: str | None) -> str:
    """The request: a load, with the config's version_policy pinned to ``version`` for a revert and for a reload
    of a model a revert holds (never a plain load there: it would bring the reverted version back)."""
    req = f"POST /v2/repository/models/{target}/load"
    if version and action in ("revert", "reload"):
        return f"{req} with config version_policy {{specific: {{versions: [{version}]}}}}"
    return req


def evidence_at(f: Finding) -> float:
    """When the evidence was seen: the last probe for a probe finding, the evaluation otherwise."""
    last = f.facts.get("last_at") if f.kind == "probe" else None
    return float(last) if isinstance(last, int | float) else f.evaluated_at


def trigger_of(f: Finding, cfg: ModelActionsConfig | None) -> Trigger | None:
    """The trigger ``f`` is for a model with ``cfg``, or None (not active, not configured)."""
    if cfg is None or not f.active or f.insufficient_data:
        return None
    model = f.labels.get("model", "")
    name = f.labels.get("alertname", f.check)
    if f.kind == "probe" and cfg.on_probe_failure:
        return Trigger("probe", model, name, f.summary, evidence_at(f), version=f.labels.get("version") or "")
    if f.kind == "canary" and cfg.on_canary_worse and f.facts.get("verdict") == "worse":
        base = f.labels.get("baseline")
        if base:
            return Trigger("canary", model, name, f.summary, evidence_at(f), baseline=base)
    return None


def plan_id(model: str, action: str, at: float) -> str:
    return "act-" + hashlib.sha256(f"{model}|{action}|{at:.6f}".encode()).hexdigest()[:16]
