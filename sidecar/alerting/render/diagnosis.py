"""The words of a diagnosis finding, from its ``facts`` (``DiagnosisFacts``, see ``sidecar/diagnose/``).

Summary: the rule's statement of the problem (``metrics endpoint ... answers 404: ...``); description: ``What to
do: <the rule's action>.``; a diagnosis that no longer holds: ``metrics_404: resolved``.
"""

from __future__ import annotations

from sidecar.alerting.render.text import FindingText
from sidecar.model import Finding

__all__ = ["render"]


def render(f: Finding) -> FindingText:
    facts = f.facts
    code = str(facts.get("diagnosis") or f.labels.get("diagnosis", ""))
    problem, action = str(facts.get("problem") or ""), str(facts.get("action") or "")
    if not f.active or not problem:
        return f.summary or f"{code}: resolved", f.description
    return problem, f"What to do: {action}." if action else ""
