"""The words of an action record, from its ``facts`` (see ``sidecar/actions/layer.py``).

``[dry run] would reload ctr: POST /v2/repository/models/ctr/load | because ctr probe failing: 3 in a row``;
``did reload ctr: ... | because ...``; ``failed to reload ctr: connection refused (plan: ...) | because ...``;
``did not reload ctr (skipped: stale evidence ...) | because ...``; and a revert's hold, said once:
``held rank at version 1 until an operator clears it (POST /admin/actions/clear?model=rank); no revert | seen: ...``.
"""

from __future__ import annotations

from sidecar.alerting.render.text import FindingText, when
from sidecar.model import Finding

__all__ = ["render", "words"]

_VERB = {
    "reload": "reload",
    "revert": "revert",
    "fallback": "load the fallback of",
    "gpu_snapshot": "take a GPU snapshot for",
    "webhook": "call the webhook for",
}


def words(
    action: str, outcome: str, model: str, plan: str, error: str, evidence: str, version: str | None = None
) -> str:
    """One line for an action: the change log's ``what``, the alert's summary."""
    verb = _VERB.get(action, action)
    because = f" | because {evidence}" if evidence else ""
    if outcome == "planned":
        return f"[dry run] would {verb} {model}: {plan}{because}"
    if outcome == "done":
        return f"did {verb} {model}: {plan}{because}"
    if outcome == "held":
        seen = f" | seen: {evidence}" if evidence else ""
        return (
            f"held {model} at version {version or '?'} until an operator clears it "
            f"(POST /admin/actions/clear?model={model}); no {action}{seen}"
        )
    if outcome == "skipped":
        return f"did not {verb} {model} (skipped: {error}){because}"
    return f"failed to {verb} {model}: {error} (plan: {plan}){because}"


def _at(ts: object) -> str:
    # A moment as every screen writes it (text.when), never the raw epoch seconds.
    return when(float(ts)) if isinstance(ts, int | float) and not isinstance(ts, bool) else "?"


def render(f: Finding) -> FindingText:
    facts = f.facts
    model = f.labels.get("model", "")
    line = words(
        str(facts.get("action", "")),
        str(facts.get("outcome", "")),
        model,
        str(facts.get("plan", "")),
        str(facts.get("error", "") or ""),
        str(facts.get("evidence", "") or ""),
        str(facts.get("target_version") or "") or None,
    )
    gpu = str(facts.get("gpu", "") or "")
    desc = (
        f"{line}. Action {facts.get('action_id')}, trigger {facts.get('trigger')} (evidence evaluated at "
        f"{_at(facts.get('evidence_at'))})." + (f" GPU: {gpu}." if gpu else "")
    )
    return line, desc
