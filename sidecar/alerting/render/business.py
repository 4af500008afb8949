"""The words of a business-check finding, from its ``facts`` (see ``sidecar/checks/business/eval.py``).

Summary: ``CTR mean down 18.2% (7d avg 0.042 -> 24h avg 0.0344)`` against a baseline, ``WER 0.0912 above
0.08 over 5m`` against a fixed threshold, ``CTR mean: insufficient data`` when the check cannot decide. The
description says the same in full sentences, each ending with a full stop, so the alert book can append its
own (recent changes) without running them together.
"""

from __future__ import annotations

from collections.abc import Mapping

from sidecar.alerting.render.text import FindingText
from sidecar.model import Finding
from sidecar.naming import human_secs

__all__ = ["agg_short", "render"]


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def agg_short(facts: Mapping[str, object]) -> str:
    """How the aggregate reads in a summary: avg, p95, rate, ratio."""
    agg = str(facts.get("aggregate", ""))
    if agg == "mean":
        return "avg"
    if agg == "quantile":
        q = _num(facts.get("quantile"))
        return f"p{round(q * 100)}" if q is not None else "quantile"
    return agg


def _agg_long(facts: Mapping[str, object]) -> str:
    agg = str(facts.get("aggregate", ""))
    return agg_short(facts) if agg == "quantile" else agg


def _insufficient(f: Finding, name: str) -> FindingText:
    facts = f.facts
    if facts.get("insufficient") == "baseline":
        cov = _num(facts.get("baseline_coverage")) or 0.0
        need_cov = _num(facts.get("min_baseline_coverage")) or 0.0
        why = (
            f"the baseline has {facts.get('baseline_events')} events over {cov:.0%} of its window "
            f"(it needs {facts.get('min_baseline_events')} over {need_cov:.0%})"
        )
    else:
        why = f"the window holds {facts.get('events')} events (it needs {facts.get('min_events')})"
    return f"{name}: insufficient data", f"{name} cannot be decided yet: {why}."


def render(f: Finding) -> FindingText:
    facts = f.facts
    name = str(facts.get("display_name") or f.check.replace("_", " "))
    if f.insufficient_data or f.value is None:
        return _insufficient(f, name)
    window = human_secs(f.window_secs)
    short = agg_short(facts)
    events = facts.get("events")
    change = _num(facts.get("change"))
    direction = str(facts.get("direction", "up"))
    threshold = f.threshold if f.threshold is not None else float("nan")
    if facts.get("compare") == "relative" and f.baseline is not None and change is not None:
        base_window = human_secs(_num(facts.get("baseline_secs")))
        word = "down" if change < 0 else "up"
        summary = (
            f"{name} {word} {abs(change) * 100:.1f}% ({base_window} {short} {f.baseline:.3g} -> "
            f"{window} {short} {f.value:.3g})"
        )
        description = (
            # The summary's forms (.3g, one decimal of a percent): one figure reads the same in both.
            f"{name} ({_agg_long(facts)}) over the last {window} is {f.value:.3g}. "
            f"Over the {base_window} before it, it was {f.baseline:.3g}: a change of {change * 100:+.1f}%, "
            f"where the check fires {'below' if direction == 'down' else 'above'} "
            f"{'-' if direction == 'down' else '+'}{threshold * 100:.4g}%. "
            f"{events} events in the window."
        )
        return summary, description
    comparison = "below" if direction == "down" else "above"
    side = comparison if f.active else ("not " + comparison)
    summary = f"{name} {f.value:.4g} {side} {threshold:.4g} over {window}"
    description = (
        f"{name} ({_agg_long(facts)}) over the last {window} is {f.value:.4g}, {side} the threshold "
        f"{threshold:.4g}. {events} events in the window."
    )
    return summary, description
