"""The typed facts of the edge checks' findings (see ``sidecar.facts``): the hit-ratio SLA, the latency tail and
purges that did not take. Numbers and short tokens only; ``sidecar/alerting/render/edge.py`` writes the words.
Like ``sidecar.facts``, this module depends on nothing of ours but that module.
"""

from __future__ import annotations

from dataclasses import dataclass

from sidecar.facts import Facts

__all__ = ["EdgePurgeFacts", "EdgeSlaFacts", "EdgeTailFacts"]


@dataclass(frozen=True, slots=True)
class EdgeSlaFacts(Facts):
    """The cache hit ratio of a route group against its SLA ``target`` over a ``period`` (day | week, UTC
    calendar). ``phase`` burn: the ratio so far, the burn rates of the firing window pair (``burn_long`` over
    ``long_secs``, ``burn_short`` over ``short_secs``, against ``factor``) and the ``projected`` ratio at the
    period's end; ``phase`` missed: the last complete period's final ratio (``ratio``, ``period_start``)."""

    phase: str  # burn | missed
    period: str
    target: float
    ratio: float | None
    hits: int
    requests: int
    period_start: float
    period_end: float
    runbook: str
    projected: float | None = None
    burn_long: float | None = None
    burn_short: float | None = None
    long_secs: float | None = None
    short_secs: float | None = None
    factor: float | None = None
    min_requests: int = 0


@dataclass(frozen=True, slots=True)
class EdgeTailFacts(Facts):
    """A hop's latency tail over ``window_secs`` against the ``baseline_secs`` before it: p50, p99 and p99.9 now
    and then (seconds), the absolute bound ``threshold_s`` and the ratio bound ``max_ratio``; ``reason`` says
    which fired (threshold | ratio | both | none)."""

    hop: str  # edge | origin
    reason: str
    requests: int
    window_secs: float
    baseline_secs: float
    min_requests: int
    runbook: str
    p50: float | None = None
    p99: float | None = None
    p999: float | None = None
    base_requests: int = 0
    base_p50: float | None = None
    base_p99: float | None = None
    base_p999: float | None = None
    threshold_s: float | None = None
    max_ratio: float | None = None


@dataclass(frozen=True, slots=True)
class EdgePurgeFacts(Facts):
    """A purge (``pattern`` of ``scope`` prefix | exact | glob, by ``who`` at ``purged_at``) that did not take:
    ``phase`` hits: ``hits`` cache hits on covered paths since it (``paths`` of them; the ``top_path`` with
    ``top_hits``); ``phase`` unmatched: no path seen in the logs (``paths_seen`` remembered) matches it."""

    phase: str  # hits | unmatched
    pattern: str
    scope: str
    who: str
    purged_at: float
    change_id: str
    runbook: str
    hits: int = 0
    paths: int = 0
    top_path: str = ""
    top_hits: int = 0
    first_hit_at: float | None = None
    paths_seen: int = 0
