"""The words of a model probe finding, from its ``facts`` (see ``sidecar/checks/probe/check.py``).

``ctr probe failing: 3 in a row (non_finite: score: 1 of 1 values are NaN or inf)``.
"""

from __future__ import annotations

from sidecar.alerting.render.text import FindingText
from sidecar.model import Finding

__all__ = ["render"]

_WHAT = {
    "timeout": "no answer in time",
    "unavailable": "Triton unreachable",
    "server_error": "Triton answered an error",
    "missing_output": "an output is missing",
    "shape": "wrong output shape",
    "dtype": "wrong output datatype",
    "non_finite": "NaN or inf in the output",
    "out_of_range": "output out of range",
}


def render(f: Finding) -> FindingText:
    facts = f.facts
    model = f.labels.get("model", "")
    version = f.labels.get("version", "")
    who = f"{model} v{version}" if version else model
    n, need = facts.get("consecutive", 0), facts.get("failures_to_fire", 0)
    reason = str(facts.get("reason", ""))
    detail = str(facts.get("detail", "") or "")
    if f.insufficient_data:
        return f"{who} probe: not probed yet", f"{who}: no probe has been answered or failed yet."
    if not f.active:
        tail = f" ({n} failed in a row; fires at {need})" if n else ""
        return f"{who} probe passing{tail}", f"{who}: the last probe passed or failed fewer than {need} times in a row."
    what = _WHAT.get(reason, reason)
    summary = (
        f"{who} probe failing: {n} in a row ({what}: {detail})" if detail else f"{who} probe failing: {n} in a row"
    )
    desc = (
        f"{who}: the last {n} probes failed ({what}); the check fires at {need} in a row. Last request "
        f"{facts.get('request_id') or '-'} over {facts.get('protocol', 'http')}: {detail or reason}. "
        f"{facts.get('probes')} probes so far, {facts.get('failures')} failed."
    )
    return summary, desc
