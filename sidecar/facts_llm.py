"""The typed facts of the goodput check's findings (see ``sidecar.facts``). Numbers and short tokens only;
``sidecar/alerting/render/goodput.py`` writes the words. Depends on nothing of ours but ``sidecar.facts``.
"""

from __future__ import annotations

from dataclasses import dataclass

from sidecar.facts import Facts

__all__ = ["GoodputFacts"]


@dataclass(frozen=True, slots=True)
class GoodputFacts(Facts):
    """Goodput of a (model, version) against ``objective``: ``good`` of ``requests`` over the pair's long window
    (``long_secs``), the burn rates of that window pair (``burn_long``, ``burn_short`` over ``short_secs``, against
    ``factor``); the SLO bounds judged (ms, None: not judged); ``worst`` names the SLO most requests missed."""

    objective: float
    good: int
    requests: int
    long_secs: float
    short_secs: float
    factor: float
    min_requests: int
    runbook: str
    burn_long: float | None = None
    burn_short: float | None = None
    ttft_ms: float | None = None
    inter_token_ms: float | None = None
    e2e_ms: float | None = None
    worst: str = ""
    worst_misses: int = 0
