"""Which settings decide when each runbook's alert fires, read from the running config, so a runbook page shows the
numbers this sidecar uses instead of prose that can fall out of step with them.

The config tree is walked by attribute path (``checks.drift.window_secs``): this layer needs no import of the
checks. Each row's meaning is the config model's own field description (the model is the documentation).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from sidecar.alerting.render.text import num, pct
from sidecar.naming import human_secs

__all__ = ["BUSINESS_FIELDS", "SECTIONS", "ParamRow", "ParamTable", "param_tables"]


@dataclass(frozen=True)
class Section:
    """One config section behind a runbook's alert: where it lies, which of its fields decide when the alert
    fires (a dotted name reaches into a nested model), the check name its findings carry, and the hold the check
    declares: a field name, a fixed number of seconds, or None (declares none: ``alerting.default_for_secs``)."""

    path: str
    fields: tuple[str, ...]
    check: str
    hold: str | float | None


_DRIFT_COMMON = ("enabled", "method", "scales_secs", "sustained_looks", "sustained_of", "window_secs")
_DRIFT_REF = ("reference.mode", "reference.pinned_events", "reference.rolling_offset_secs")
_COLD = ("enabled", "hold_secs")
_TOKENS_REF = ("reference.pinned_requests",)
_EDGE_SLA = ("enabled", "target", "period", "groups", "burn_windows", "projection_secs", "min_requests")
_ACTIONS = ("enabled", "dry_run", "cooldown_secs", "max_evidence_age_secs", "timeout_secs", "alert_secs")

# Runbooks of alerts the sidecar's own checks raise. A runbook not named here (nor by a business check's
# `runbook`) belongs to a Prometheus rule in alerts/*.rules.yml, whose numbers live in that file.
SECTIONS: dict[str, tuple[Section, ...]] = {
    "FeatureDrifting.md": (
        Section(
            "checks.drift",
            (
                *_DRIFT_COMMON,
                "false_alarms_per_day",
                "sustained_secs",
                "p_threshold",
                "ks_effect_floor",
                "psi_effect_floor",
                "min_samples",
                *_DRIFT_REF,
            ),
            "drift",
            None,
        ),
    ),
    "FeatureMissingValuesHigh.md": (
        Section(
            "checks.drift",
            (*_DRIFT_COMMON, "sustained_secs", "missing_ratio_increase", "min_samples", *_DRIFT_REF),
            "drift",
            None,
        ),
    ),
    "CanaryVersionWorse.md": (
        Section(
            "checks.canary",
            (
                "enabled",
                "alert",
                "window_secs",
                "min_samples",
                "alpha",
                "min_relative_diff",
                "min_error_ratio_diff",
                "min_ks_d",
                "spans",
                "triton",
                "severity",
                "for_secs",
            ),
            "canary",
            "for_secs",
        ),
    ),
    "ModelOutputSuspect.md": (
        Section(
            "checks.output_sanity",
            (
                "enabled",
                "window_secs",
                "min_samples",
                "nonfinite_max_ratio",
                "zero_max_ratio",
                "out_of_range_max_ratio",
                "collapsed_ratio",
                "severity",
                "for_secs",
            ),
            "output_sanity",
            "for_secs",
        ),
    ),
    "ColdStartLoad.md": (Section("checks.cold_start", ("max_load_secs", *_COLD), "cold_start_load", 0.0),),
    "ColdStartFirstRequests.md": (
        Section(
            "checks.cold_start",
            ("first_requests", "slowdown_factor", "steady_intervals", *_COLD),
            "cold_start_first_requests",
            0.0,
        ),
    ),
    "BatchingAdvice.md": (
        Section(
            "checks.batching",
            ("enabled", "window_secs", "min_requests", "max_suggested_delay_us"),
            "batching_advice",
            0.0,
        ),
    ),
    "GoodputBurn.md": (
        Section(
            "checks.goodput",
            ("enabled", "slos", "objective", "burn_windows", "bucket_secs", "min_requests"),
            "goodput_burn",
            0.0,
        ),
    ),
    "TokenLengthDrift.md": (
        Section(
            "checks.tokens",
            ("enabled", "window_secs", "min_requests", "psi_effect_floor", "reference.mode", *_TOKENS_REF),
            "token_length_drift",
            0.0,
        ),
    ),
    "ModelProbeFailing.md": (
        Section(
            "probes",
            ("enabled", "protocol", "interval_secs", "timeout_secs", "failures_to_fire", "max_per_sec"),
            "probe",
            0.0,
        ),
    ),
    **{
        f"{name}.md": (Section("actions", _ACTIONS, "actions", 0.0),)
        for name in ("ActionPlanned", "ActionTaken", "ActionFailed", "ActionHeld")
    },
    "EdgeHitRatioBurn.md": (Section("edge.checks.sla", _EDGE_SLA, "edge_hit_ratio_burn", None),),
    "EdgeHitRatioPeriod.md": (Section("edge.checks.sla", _EDGE_SLA, "edge_hit_ratio_period", None),),
    "EdgeTailLatency.md": (
        Section(
            "edge.checks.tail",
            ("enabled", "groups", "hop", "window_secs", "baseline_secs", "threshold_secs", "max_ratio", "min_requests"),
            "edge_tail_latency",
            None,
        ),
    ),
    "EdgePurgeNotTaken.md": (
        Section(
            "edge.checks.purges",
            ("enabled", "grace_secs", "watch_secs", "min_hits", "max_purges"),
            "edge_purge_not_taken",
            None,
        ),
    ),
    "Diagnosis.md": (
        Section(
            "diagnose",
            ("enabled", "interval_secs", "no_spans_secs", "gpu_idle_ratio", "queue_secs", "busy_ratio"),
            "diagnose",
            None,
        ),
    ),
}

BUSINESS_FIELDS = (
    "model",
    "field",
    "aggregate",
    "quantile",
    "denominator",
    "group_by",
    "window_secs",
    "bucket_secs",
    "baseline_secs",
    "compare",
    "direction",
    "threshold",
    "for_secs",
    "min_events",
    "min_baseline_events",
    "min_baseline_coverage",
    "severity",
)


@dataclass(frozen=True)
class ParamRow:
    path: str  # where it is set, as written in the YAML file
    value: str  # as YAML would write it
    hint: str  # the value in other words ("24h"), or ""
    meaning: str  # the config model's field description


@dataclass(frozen=True)
class ParamTable:
    title: str  # the config section
    rows: tuple[ParamRow, ...]
    note: str = ""  # e.g. "not enabled in this config"


def _get(root: Any, path: str) -> Any:
    obj = root
    for part in path.split("."):
        obj = obj.get(part) if isinstance(obj, dict) else getattr(obj, part)
    return obj


def _describe(model: BaseModel, dotted: str) -> tuple[Any, str]:
    """The value and the field description of ``dotted`` (``reference.mode``) inside ``model``."""
    *head, last = dotted.split(".")
    owner: Any = model
    for part in head:
        owner = getattr(owner, part)
    info = type(owner).model_fields[last]
    return getattr(owner, last), (info.description or "").strip()


def _yaml(value: Any) -> str:
    """As YAML would write it, numbers through the renderer's ``num`` (``0.3``, never ``0.30000000000000004``)."""
    if value is None:
        return "not set"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return num(value)
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        value = value.model_dump()
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_yaml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple | set | frozenset):
        return "[" + ", ".join(_yaml(v) for v in value) + "]"
    return json.dumps(value, default=str)


_SHARES = ("objective", "target")  # shares the alerts write as percentages: the hint says it the same way


def _hint(name: str, value: Any) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return ""
    if name.endswith("_secs") and value >= 60:
        return human_secs(float(value))
    if name.rsplit(".", 1)[-1] in _SHARES and 0 <= value <= 1:
        return pct(float(value))
    return ""


def _row(section: str, model: BaseModel, dotted: str) -> ParamRow:
    value, meaning = _describe(model, dotted)
    return ParamRow(f"{section}.{dotted}", _yaml(value), _hint(dotted, value), meaning)


def _hold_row(config: BaseModel, sec: Section, model: BaseModel) -> ParamRow:
    """The hold the alert book applies (book.py: an ``alerting.for_secs`` entry for the check wins over what the
    check declares; a check that declares none gets ``alerting.default_for_secs``)."""
    alerting = _get(config, "alerting")
    overrides: dict[str, float] = alerting.for_secs
    if sec.check in overrides:
        secs, where = overrides[sec.check], f"alerting.for_secs.{sec.check}"
    elif isinstance(sec.hold, str):
        secs, where = getattr(model, sec.hold), f"{sec.path}.{sec.hold}"
    elif sec.hold is not None:
        secs, where = sec.hold, "fixed by the check"
    else:
        secs, where = alerting.default_for_secs, "alerting.default_for_secs"
    return ParamRow(
        "held before firing",
        _yaml(float(secs)),
        human_secs(float(secs)) if secs >= 60 else "",
        "How long the condition holds before the alert book fires it ("
        + (where if where == "fixed by the check" else f"from {where}")
        + ").",
    )


def _table(config: BaseModel, sec: Section, title: str, note: str = "") -> ParamTable:
    model = _get(config, sec.path)
    rows = [_row(sec.path, model, f) for f in sec.fields]
    rows.append(_hold_row(config, sec, model))
    interval, meaning = _describe(_get(config, "checks"), "eval_interval_secs")
    rows.append(ParamRow("checks.eval_interval_secs", _yaml(interval), _hint("eval_interval_secs", interval), meaning))
    return ParamTable(title, tuple(rows), note)


def param_tables(config: BaseModel, runbook: str) -> list[ParamTable]:
    """The tables for one runbook page: its fixed sections, and every business check that names it as its
    ``runbook``. Empty for a runbook of a Prometheus rule."""
    out = [
        _table(config, s, s.path, "" if _enabled(config, s.path) else "not enabled in this config")
        for s in SECTIONS.get(runbook, ())
    ]
    business = _get(config, "checks.business")
    for name, check in sorted(business.checks.items()):
        if check.runbook == runbook:
            path = f"checks.business.checks.{name}"
            sec = Section(path, BUSINESS_FIELDS, name, "for_secs")
            out.append(_table(config, sec, path, "" if business.enabled else "checks.business.enabled is false"))
    return out


def _enabled(config: BaseModel, path: str) -> bool:
    """The section and every section above it that has an ``enabled`` (``edge.checks.sla`` needs ``edge``)."""
    parts = path.split(".")
    return all(bool(getattr(_get(config, ".".join(parts[:i])), "enabled", True)) for i in range(1, len(parts) + 1))
