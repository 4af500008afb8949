"""An alert's annotations: the finding's text (``finding_text``) wrapped in the operator's templates, with the
changes it cites and its runbook, dashboard and trace links.

Which changes an alert cites: those of its model (and version, when the check evaluates per version) made at
or before the finding first became true, within ``alerting.changes.annotate_window_secs`` before it, newest
first. A change made after the condition began cannot have caused it, so it is never cited, and the set does
not shift while the alert stays active.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Protocol
from urllib.parse import urlencode

from prometheus_client import CollectorRegistry, Counter

from sidecar.alerting.config import TemplatesConfig
from sidecar.alerting.render import finding_text
from sidecar.alerting.render.business import agg_short
from sidecar.alerting.render.text import when
from sidecar.alerting.templates import TemplateError, render
from sidecar.model import Change, Finding
from sidecar.naming import human_secs
from sidecar.state.changes_config import ChangesConfig

__all__ = ["ALL_VERSIONS", "Annotator", "ChangeLookup", "cited_changes", "model_version", "sentence"]

ALL_VERSIONS = "all"


class ChangeLookup(Protocol):
    """Changes of a model (and version, or any with None) made between ``since`` and ``until``, newest first."""

    def __call__(self, model: str | None, version: str | None, since: float, *, until: float) -> Sequence[Change]: ...


def model_version(model: str, version: str) -> str:
    """``ctr v2``; ``ctr (all versions)`` for a check over every version; just ``ctr`` when events carry none;
    ``none`` for a finding of no model (an edge route group, a diagnosis), never an empty word."""
    if not model:
        return "none"
    if version == ALL_VERSIONS:
        return f"{model} (all versions)"
    if not version or version == "unversioned":
        return model
    return f"{model} v{version}"


def sentence(text: str) -> str:
    """``text`` ending with a full stop, so a following sentence does not run into it."""
    text = text.strip()
    return text if not text or text[-1] in ".!?" else text + "."


def began_at(f: Finding, active_at: float) -> float:
    """When the finding's condition first held: the alert's activeAt, or earlier when the check says so (a
    drift check holds its condition for ``sustained_secs`` before its finding becomes active)."""
    raw = f.facts.get("condition_since", f.annotations.get("condition_since"))
    try:
        since = float(raw) if raw is not None else active_at
    except (TypeError, ValueError):
        since = active_at
    return min(since, active_at)


def cited_changes(
    lookup: ChangeLookup | None,
    labels: Mapping[str, str],
    began: float,
    cfg: ChangesConfig,
    log: logging.Logger,
) -> list[Change]:
    if lookup is None:
        return []
    version = labels.get("version") or None
    try:
        found = lookup(
            labels.get("model"),
            None if version == ALL_VERSIONS else version,
            began - cfg.annotate_window_secs,
            until=began,
        )
    except Exception:
        log.exception("could not read recent changes")
        return []
    before = sorted((c for c in found if c.at <= began), key=lambda c: -c.at)
    return before[: cfg.max_in_annotation]


def _change(c: Change) -> str:
    return c.what + (f" ({c.link})" if c.link and c.link not in c.what else "")


class Annotator:
    def __init__(
        self,
        templates: TemplatesConfig,
        *,
        registry: CollectorRegistry,
        runbook_base: str,
        dashboard_base: str | None,
        sidecar_url: str,
    ) -> None:
        self.t = templates
        self.runbook_base = runbook_base.rstrip("/")
        self.dashboard_base = dashboard_base.rstrip("/") if dashboard_base else None
        self.sidecar_url = sidecar_url.rstrip("/")
        self._errors = Counter(
            "sidecar_alert_template_errors",
            "Annotations that failed to render (a fallback text was used).",
            ["template"],
            registry=registry,
        )

    def variables(self, f: Finding, labels: Mapping[str, str], changes: Sequence[Change]) -> dict[str, object]:
        facts: dict[str, object] = {**f.annotations, **f.facts}
        text_summary, text_description = finding_text(f)
        change_pct = f.effect_size * 100 if f.effect_size is not None and f.kind == "business" else None
        direction = str(facts.get("direction", "up"))
        aggregate = str(facts.get("aggregate", ""))
        base_secs = facts.get("baseline_secs")
        model, version = labels.get("model", ""), labels.get("version", "")
        return {
            "alertname": labels.get("alertname", ""),
            "check": f.check,
            "kind": f.kind,
            "severity": f.severity,
            "SEVERITY": f.severity.upper(),
            "model": model,
            "version": version,
            "model_version": model_version(model, version),
            "team": labels.get("team", ""),
            "display_name": str(facts.get("display_name") or f.check.replace("_", " ")),
            "aggregate": agg_short(facts) if aggregate == "quantile" else aggregate,
            "agg_short": agg_short(facts),
            "compare": str(facts.get("compare", "")),
            "direction": direction,
            "direction_word": ("down" if change_pct < 0 else "up") if change_pct is not None else direction,
            "comparison": "above" if direction == "up" else "below",
            "value": f.value,
            "baseline": f.baseline,
            "threshold": f.threshold,
            "change_pct": change_pct,
            "abs_change_pct": abs(change_pct) if change_pct is not None else None,
            "window": human_secs(f.window_secs),
            "baseline_window": human_secs(base_secs)
            if isinstance(base_secs, int | float)
            else str(facts.get("baseline_window", "")),
            "events": str(facts.get("events", "")),
            "finding_summary": text_summary,
            "finding_description": sentence(text_description),
            "insufficient_reason": text_description if f.insufficient_data else "",
            "recent_change": _change(changes[0]) if changes else "none",
            "recent_changes": "; ".join(f"{_change(c)} by {c.who or '?'} at {when(c.at)}" for c in changes) or "none",
            "runbook": str(facts.get("runbook", f"{f.kind}.md")),
            "runbook_base": self.runbook_base,
            "dashboard_base": self.dashboard_base or "",
            "sidecar_url": self.sidecar_url,
            "trace_id": f.trace_id or "",
        }

    def annotate(self, f: Finding, labels: Mapping[str, str], changes: Sequence[Change]) -> dict[str, str]:
        variables = self.variables(f, labels, changes)
        t = self.t
        if f.kind != "business":
            names = ("summary_other", "description_other")
        elif f.baseline is not None and f.effect_size is not None:
            names = ("summary", "description")
        else:
            names = ("summary_absolute", "description_absolute")
        out = {
            "summary": self._render(names[0], getattr(t, names[0]), variables, str(variables["finding_summary"])),
            "description": self._render(
                names[1], getattr(t, names[1]), variables, str(variables["finding_description"])
            ),
            "runbook_url": self._render("runbook_url", t.runbook_url, variables, ""),
        }
        if self.dashboard_base:
            out["dashboard_url"] = self._render("dashboard_url", t.dashboard_url, variables, "")
        if f.trace_id:
            out["trace_url"] = self._render("trace_url", t.trace_url, variables, "")
        # What the sidecar recorded around this alert: the trace's requests, else the model's audit trail.
        where = (
            {"trace_id": f.trace_id} if f.trace_id else {k: labels[k] for k in ("model", "version") if labels.get(k)}
        )
        out["audit_url"] = f"{self.sidecar_url}/audit" + (f"?{urlencode(where)}" if where else "")
        return {k: v for k, v in out.items() if v}

    def _render(self, name: str, template: str, variables: Mapping[str, object], fallback: str) -> str:
        try:
            return render(template, variables)
        except TemplateError:
            self._errors.labels(name).inc()
            return fallback
