"""Annotation templates: ``str.format``-like, but sandboxed and validated at config load.

Only ``{name}`` and ``{name:spec}`` are allowed, where ``name`` is one of ``VARIABLES``. Attribute and index
access (``{x.__class__}``, ``{x[0]}``), conversions (``{x!r}``) and nested fields in a spec are refused, and
rendering formats each value itself instead of calling ``str.format``, so a template can never reach an
object's internals. A template that would fail to render fails at load with the config path.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from string import Formatter

from sidecar.errors import TemplateError

__all__ = ["VARIABLES", "TemplateError", "render", "validate_template"]

# name -> sample value used to validate format specs (numbers are floats so numeric specs work).
VARIABLES: dict[str, object] = {
    "alertname": "CtrMeanDown",
    "check": "ctr_mean_down",
    "kind": "business",
    "severity": "high",
    "SEVERITY": "HIGH",
    "model": "rec",
    "version": "3",
    "model_version": "rec v3",
    "team": "growth",
    "display_name": "CTR mean",
    "aggregate": "mean",
    "agg_short": "avg",
    "compare": "relative",
    "direction": "down",
    "direction_word": "down",
    "comparison": "below",
    "value": 0.034,
    "baseline": 0.042,
    "threshold": 0.15,
    "change_pct": -18.2,
    "abs_change_pct": 18.2,
    "window": "24h",
    "baseline_window": "7d",
    "events": "12345",
    "finding_summary": "CTR mean down 18.2% (7d avg 0.042 -> 24h avg 0.034)",
    "finding_description": "CTR mean (mean) over the last 24h is 0.034.",
    "insufficient_reason": "",
    "recent_change": "feature PR#221",
    "recent_changes": "feature PR#221 by ci at 2024-05-01T10:00:00Z",
    "runbook": "business-metric.md",
    "runbook_base": "https://example.org/runbooks",
    "dashboard_base": "https://grafana.example.org",
    "sidecar_url": "http://127.0.0.1:9500",
    "trace_id": "0af7651916cd43dd8448eb211c80319c",
}


def _parse(template: str) -> list[tuple[str, str | None, str]]:
    try:
        parts = list(Formatter().parse(template))
    except ValueError as exc:
        raise TemplateError(f"malformed template: {exc}") from None
    out: list[tuple[str, str | None, str]] = []
    for literal, name, spec, conv in parts:
        if name is None:
            out.append((literal, None, ""))
            continue
        if conv is not None:
            raise TemplateError(f"conversion !{conv} is not allowed in {{{name}}}")
        if name not in VARIABLES:
            raise TemplateError(f"unknown placeholder {{{name}}}; allowed: {', '.join(sorted(VARIABLES))}")
        if spec and ("{" in spec or "}" in spec):
            raise TemplateError(f"nested fields are not allowed in the format spec of {{{name}}}")
        out.append((literal, name, spec or ""))
    return out


def _fmt(value: object, spec: str) -> str:
    if value is None:
        value = math.nan if spec and spec[-1:] in "eEfFgGn%" else ""
    try:
        return format(value, spec)
    except (ValueError, TypeError) as exc:
        raise TemplateError(f"format spec {spec!r} does not fit a {type(value).__name__}: {exc}") from None


def validate_template(template: str) -> str:
    """Returns the template when it renders with sample values; raises TemplateError otherwise."""
    render(template, VARIABLES)
    return template


def render(template: str, variables: Mapping[str, object]) -> str:
    out: list[str] = []
    for literal, name, spec in _parse(template):
        out.append(literal)
        if name is not None:
            out.append(_fmt(variables.get(name, ""), spec))
    return "".join(out)
