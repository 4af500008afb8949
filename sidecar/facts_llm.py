"""The typed facts of the LLM checks' findings, goodput and token-length drift (see ``sidecar.facts``). Numbers
and short tokens only; ``sidecar/alerting/render/goodput.py`` and ``tokens.py`` write the words. Depends on
nothing of ours but ``sidecar.facts``.
"""

from __future__ import annotations

from dataclasses import dataclass

from sidecar.facts import Facts

__all__ = ["GoodputFacts", "TokenDriftFacts"]


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


@dataclass(frozen=True, slots=True)
class TokenDriftFacts(Facts):
    """Token-length drift of one (server, model, version) and direction (``tokens``: input | output) at its
    latest window. ``state``: tested | few_requests | no_reference | bucket_edges_changed (the test refused:
    ``ref_edges`` and ``cur_edges`` differ). The test: chi-square ``statistic`` and ``p_raw`` over ``bins``
    merged buckets, ``q`` Benjamini-Hochberg-adjusted over the series' directions, against the per-window
    ``level`` of checks.drift's false-alarm budget; ``psi`` against ``psi_floor``. ``mean_cur``/``mean_ref``:
    mean tokens per request (the histograms' sums over their counts). ``looks_drifting`` of the last ``looks``
    windows drifted; active at ``sustained_looks`` of ``sustained_of``. ``ref_mode``/``ref_id`` name the
    reference (pinned: the version it was captured from; file: the file's id)."""

    tokens: str
    server: str
    state: str
    window_secs: float
    n_cur: float
    n_ref: float
    min_requests: int
    level: float
    psi_floor: float
    looks_drifting: int
    looks: int
    sustained_looks: int
    sustained_of: int
    ref_mode: str
    ref_id: str
    runbook: str
    pinned_requests: int = 0
    statistic: float | None = None
    p_raw: float | None = None
    q: float | None = None
    psi: float | None = None
    bins: int = 0
    mean_cur: float | None = None
    mean_ref: float | None = None
    ref_edges: str = ""
    cur_edges: str = ""
