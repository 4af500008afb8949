"""The words of a goodput finding, from its facts (``sidecar/facts_llm.py``).

Summaries: ``chat v3 goodput 91.2% burning its 99% objective: 8.8x over 1h, 15x over 5m (most missed: ttft)``,
``chat v3 goodput 99.6% over 1h (objective 99%)``, ``chat v3 goodput: too few requests to judge (4 of 20)``.
"""

from __future__ import annotations

from sidecar.alerting.render.text import FindingText, pct
from sidecar.model import Finding
from sidecar.naming import human_secs

__all__ = ["line_text", "render"]

_SLO_WORDS = {"ttft": "time to first token", "inter_token": "inter-token latency", "e2e": "request latency"}


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _pct(v: object) -> str:
    return pct(_num(v))


def _slos(facts: object) -> str:
    get = getattr(facts, "get", lambda _k: None)
    parts = [
        f"{words} <= {_num(get(k)):g} ms"
        for k, words in (("ttft_ms", "TTFT"), ("inter_token_ms", "inter-token"), ("e2e_ms", "latency"))
        if _num(get(k)) is not None
    ]
    return " and ".join(parts) or "no bound"


def render(f: Finding) -> FindingText:
    facts = f.facts
    who = f"{f.labels.get('model', '?')} v{f.labels.get('version', '?')}"
    objective = _pct(facts.get("objective"))
    long_w, short_w = human_secs(_num(facts.get("long_secs"))), human_secs(_num(facts.get("short_secs")))
    good, total = facts.get("good"), facts.get("requests")
    slos = _slos(facts)
    if f.insufficient_data or f.value is None:
        return (
            f"{who} goodput: too few requests to judge ({total} of {facts.get('min_requests')})",
            f"{who} had {total} judged requests over {long_w}; the goodput check judges from "
            f"{facts.get('min_requests')} in each window of a pair. SLO: {slos}.",
        )
    worst = str(facts.get("worst") or "")
    worst_words = f" (most missed: {worst})" if worst else ""
    if f.active:
        bl, bs, k = _num(facts.get("burn_long")), _num(facts.get("burn_short")), _num(facts.get("factor"))
        summary = (
            f"{who} goodput {_pct(f.value)} burning its {objective} objective: {bl or 0:.2g}x over {long_w}, "
            f"{bs or 0:.2g}x over {short_w}{worst_words}"
        )
        description = (
            f"{good} of {total} requests of {who} met every SLO ({slos}) over {long_w}. The error budget "
            f"(1 - {objective}) burns {bl or 0:.2g}x over {long_w} and {bs or 0:.2g}x over {short_w}, both above "
            f"{k or 0:g}x."
        )
        if worst:
            description += (
                f" The SLO missed most: {_SLO_WORDS.get(worst, worst)} ({facts.get('worst_misses')} requests)."
            )
        return summary, description
    return (
        f"{who} goodput {_pct(f.value)} over {long_w} (objective {objective})",
        f"{good} of {total} requests of {who} met every SLO ({slos}) over {long_w}; no burn-rate pair fires.",
    )


def line_text(
    objective: float | None,
    ratio: dict[tuple[str, str], dict[float, float]],
    burning: set[tuple[str, str]],
    histogram_only: set[tuple[str, str]],
    max_parts: int,
) -> str:
    """The line on ``/``, from the check's gauges: ``ratio`` per (model, version) and window, the series that burn,
    and (server, model) pairs a server gives only latency histograms of; e.g. ``objective 99%; chat v3 burning its
    budget: 87.4% over 5m, 91.2% over 1h; rank v1 99.8% over 6h``. A burning series shows every window, so the
    figure its alert quotes (its pair's long window) is on ``/`` too, in the same form."""
    parts = [f"objective {pct(objective)}"] if objective is not None else []
    for key in sorted(ratio, key=lambda k: (k not in burning, k))[:max_parts]:
        by_window = ratio[key]
        if key in burning:
            figures = ", ".join(f"{pct(by_window[w])} over {human_secs(w)}" for w in sorted(by_window)[:4])
            parts.append(f"{key[0]} v{key[1]} burning its budget: {figures}")
        else:
            longest = max(by_window)
            parts.append(f"{key[0]} v{key[1]} {pct(by_window[longest])} over {human_secs(longest)}")
    if len(parts) <= 1:
        parts.append("no judged requests yet")
    judged = {model for model, _v in ratio}
    for server, model in sorted(histogram_only)[:max_parts]:
        if model not in judged:  # no per-request figures for it: only the server's histograms
            parts.append(
                f"{model} on {server}: histograms only, so its goodput is a bound from bucket edges, not a figure "
                "(docs/servers.md, Goodput)"
            )
    return "; ".join(parts)
