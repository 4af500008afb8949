"""Human text for findings.

Checks produce numbers and labels only (``Finding.facts``); everything a person reads (a finding's summary
and description, before the operator's annotation templates wrap them) is written here, one module per
finding kind, so wording is changed in one place and a check never has to know how an alert reads.
"""

from __future__ import annotations

from sidecar.model import Finding

__all__ = ["FindingText", "finding_text"]

# (summary, description) of one finding.
FindingText = tuple[str, str]


def finding_text(f: Finding) -> FindingText:
    """The summary and description a person reads for ``f``."""
    from sidecar.alerting.render.kinds import RENDERERS  # lazy: kind modules import FindingText from here

    fn = RENDERERS.get(f.kind)
    if fn is None:
        return f.summary or f.check, f.description
    return fn(f)
