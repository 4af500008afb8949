"""The words of a cold-start finding, from its ``facts`` (see ``sidecar/checks/cold_start/check.py``).

Summaries: ``ctr v3 took 95s to load (bound 60s)``, ``ctr v3 still loading after 75s (bound 60s)``,
``ctr v3 first 10 requests 6.2x slower than steady p99 (310 ms vs 50 ms)``.
"""

from __future__ import annotations

from sidecar.alerting.render.text import FindingText
from sidecar.model import Finding

__all__ = ["CHECK_WORDS", "render"]

# Each cold-start check in the few words a one-line overview (``/``) gives it.
CHECK_WORDS = {"cold_start_load": "slow load", "cold_start_first_requests": "slow first requests"}


def _num(v: object) -> float:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else float("nan")


def _ms(secs: float) -> str:
    return f"{secs * 1000:.3g} ms"


def render(f: Finding) -> FindingText:
    facts = f.facts
    who = f"{f.labels.get('model', '?')} v{f.labels.get('version', '?')}"
    phase = facts.get("phase")
    if phase in ("loading", "loaded"):
        secs, bound = _num(facts.get("load_secs")), _num(facts.get("max_load_secs"))
        if phase == "loading":
            summary = f"{who} still loading after {secs:.0f}s (bound {bound:g}s)"
        else:
            at_least = "at least " if facts.get("lower_bound") == "yes" else ""
            summary = f"{who} took {at_least}{secs:.0f}s to load (bound {bound:g}s)"
        how = (
            "Triton held the sidecar's repository-index request for the whole load, so the time it was held is "
            "the load time from below"
            if facts.get("lower_bound") == "yes"
            else "Load time is measured from the first poll of the repository index showing the version LOADING to "
            "the first showing it READY"
        )
        description = (
            f"{summary}. {how}. A slow load delays every rollout and restart: look at the model's initialize() "
            f"(downloads, warm-up), the model size and the instance_group count."
        )
        return summary, description
    n = facts.get("first_requests")
    first = _num(facts.get("first_mean_s"))
    if f.insufficient_data or facts.get("steady_p99_s") is None:
        return (
            f"{who} first {n} requests: not enough steady traffic yet",
            f"The first {n} requests of {who} averaged {_ms(first)}; the steady reference needs 3 poll "
            f"intervals with traffic after them ({facts.get('steady_intervals')} so far).",
        )
    p99, ratio, k = _num(facts.get("steady_p99_s")), _num(facts.get("ratio")), _num(facts.get("factor"))
    summary = f"{who} first {n} requests {ratio:.1f}x slower than steady p99 ({_ms(first)} vs {_ms(p99)})"
    description = (
        f"The first {n} requests after {who} loaded averaged {_ms(first)}, {ratio:.1f} times the steady p99 of "
        f"{_ms(p99)} (per-poll mean latency over {facts.get('steady_intervals')} intervals); the check fires "
        f"above {k:g}x. Callers see this after every load: add model_warmup to the config, or warm the model "
        f"before it takes traffic."
    )
    return summary, description
