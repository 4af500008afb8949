"""Human text for findings.

Checks produce numbers and labels only (``Finding.facts``); everything a person reads (a finding's summary
and description, before the operator's annotation templates wrap them) is written here, one module per
finding kind, so wording is changed in one place and a check never has to know how an alert reads.
"""

from __future__ import annotations

from dataclasses import replace

from sidecar.alerting.render.kinds import RENDERERS
from sidecar.alerting.render.text import FindingText
from sidecar.model import Finding

__all__ = ["FindingText", "finding_text", "with_text"]


def finding_text(f: Finding) -> FindingText:
    """The summary and description a person reads for ``f``."""
    fn = RENDERERS.get(f.kind)
    if fn is None:
        return f.summary or f.check, f.description
    return fn(f)


def with_text(f: Finding) -> Finding:
    """``f`` with the summary and description this renderer writes for it, so every consumer of findings (the
    alert book, the audit trail, webhooks) carries the same words; a kind without a renderer keeps its own."""
    if f.kind not in RENDERERS:
        return f
    summary, description = finding_text(f)
    if summary == f.summary and description == f.description:
        return f
    return replace(f, summary=summary, description=description)
