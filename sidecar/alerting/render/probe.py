"""The words of a model probe finding, from its ``facts`` (see ``sidecar/checks/probe/check.py``).

``ctr probe failing: 3 in a row (non_finite: score: 1 of 1 values are NaN or inf)``; a version a revert of the
actions layer unloaded: ``fraud v2 not probed: reverted by action fraud-revert-1a2b, held``.
"""

from __future__ import annotations

from sidecar.alerting.render.text import FindingText
from sidecar.model import Finding

__all__ = ["held_text", "line_text", "render", "who"]

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


def who(model: str, version: str) -> str:
    """``ctr v1``; ``ctr`` for a probe of no version: the alert and ``/`` name a probed model alike."""
    return f"{model} v{version}" if version else model


def held_text(name: str, action_id: str) -> str:
    """``fraud v2 not probed: reverted by action <id>, held``: the probe's finding and ``/`` say it alike."""
    return f"{name} not probed: reverted by action {action_id or '?'}, held"


def render(f: Finding) -> FindingText:
    facts = f.facts
    model = f.labels.get("model", "")
    name = who(model, f.labels.get("version", ""))
    held_by = str(facts.get("held_by", "") or "")
    if held_by:
        return held_text(name, held_by), (
            f"{name}: not probed while the revert {held_by} holds {model} at another version (the revert unloaded "
            f"this one); probing resumes once an operator clears the hold (POST /admin/actions/clear?model={model})."
        )
    n, need = facts.get("consecutive", 0), facts.get("failures_to_fire", 0)
    reason = str(facts.get("reason", ""))
    detail = str(facts.get("detail", "") or "")
    if f.insufficient_data:
        return f"{name} probe: not probed yet", f"{name}: no probe has been answered or failed yet."
    if not f.active:
        tail = f" ({n} failed in a row; fires at {need})" if n else ""
        return (
            f"{name} probe passing{tail}",
            f"{name}: the last probe passed or failed fewer than {need} times in a row.",
        )
    what = _WHAT.get(reason, reason)
    summary = (
        f"{name} probe failing: {n} in a row ({what}: {detail})" if detail else f"{name} probe failing: {n} in a row"
    )
    desc = (
        f"{name}: the last {n} probes failed ({what}); the check fires at {need} in a row. Last request "
        f"{facts.get('request_id') or '-'} over {facts.get('protocol', 'http')}: {detail or reason}. "
        f"{facts.get('probes')} probes so far, {facts.get('failures')} failed."
    )
    return summary, desc


_MODES = {"dry_run": "dry run (plans only)", "acting": "acting", "paused": "paused"}


def line_text(
    ok: dict[tuple[str, str], bool],
    failing: dict[tuple[str, str], int],
    actions: list[str],
    probed: bool,
    max_models: int,
    held: dict[tuple[str, str], str] | None = None,
) -> str:
    """The line on ``/``: each probed (model, version)'s last result (``ctr v1 failing (3 in a row)``, as its alert
    counts them), or that a revert's hold keeps it from being probed (``held``: the revert's action id), and the
    actions layer's mode (``actions: dry run (plans only)``)."""
    held = held or {}
    keys = sorted(ok.keys() | held.keys())
    parts = [
        held_text(who(*k), held[k])
        if k in held
        else f"{who(*k)} ok"
        if ok[k]
        else f"{who(*k)} failing ({failing.get(k, 0)} in a row)"
        for k in keys[:max_models]
    ]
    if len(keys) > max_models:
        parts.append(f"{len(keys) - max_models} more on /metrics")
    text = "; ".join(parts) or ("not probed yet" if probed else "")
    if actions:
        text = (text + " | " if text else "") + "actions: " + ", ".join(_MODES.get(a, a) for a in actions)
    return text
