"""The words of a canary finding, from its ``facts`` (see ``sidecar/checks/canary/check.py``).

Worse: ``ctr v2 worse on p99 by 18% (v2 41 ms vs v1 35 ms, spans, n=412/398): consider reverting to version 1``;
from Triton's metrics the source says so: ``worse on p99 by 18% (v2 41 ms vs v1 35 ms, Triton summaries, n=...
over 12 readings)``, ``worse on mean latency by 17% (..., Triton counters, n=... over 40 intervals)``; healthy:
``ctr v2 healthy against v1 (p50 +2%, p99 -1%, errors +0.1 pt, scores D=0.03)``; too few values:
``ctr v2 vs v1: insufficient data``.
"""

from __future__ import annotations

from collections.abc import Mapping

from sidecar.alerting.render.text import FindingText
from sidecar.model import Finding
from sidecar.naming import human_secs

__all__ = ["render"]

_ASPECTS = ("p50", "p99", "errors", "scores", "latency_triton", "p50_triton", "p99_triton", "errors_triton")
# Triton aspect -> (what it measures, where from, what its sample count counts)
_TRITON = {
    "latency_triton": ("mean latency", "Triton counters", "intervals"),
    "p50_triton": ("p50", "Triton summaries", "readings"),
    "p99_triton": ("p99", "Triton summaries", "readings"),
    "errors_triton": ("errors", "Triton counters", "intervals"),
}


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _v(version: str) -> str:
    return f"v{version}" if version.isdigit() else version


def _worse_phrase(a: str, facts: Mapping[str, object], b: str, c: str) -> str:
    base, cand, diff = (_num(facts.get(f"{a}.{k}")) for k in ("base", "cand", "diff"))
    n = f"n={facts.get(f'{a}.n_cand')}/{facts.get(f'{a}.n_base')}"
    what, source = a, str(facts.get("latency_source", "events"))
    if a in _TRITON:
        what, source, unit = _TRITON[a]
        n = f"{source}, {n} over {facts.get(f'{a}.intervals')} {unit}"
    elif a in ("p50", "p99"):
        n = f"{source}, {n}"
    if base is None or cand is None or diff is None:
        return f"worse on {what}"
    if what == "errors":
        return f"worse on errors by {diff * 100:.1f} points ({c} {cand:.1%} vs {b} {base:.1%}, {n})"
    if a == "scores":
        return f"scores differ (KS D={diff:.2f}, mean {c} {cand:.3g} vs {b} {base:.3g}, {n})"
    return f"worse on {what} by {diff:.0%} ({c} {cand:.3g} ms vs {b} {base:.3g} ms, {n})"


def _brief(a: str, facts: Mapping[str, object]) -> str | None:
    diff = _num(facts.get(f"{a}.diff"))
    if diff is None:
        return None
    what = f"{_TRITON[a][0]} (Triton)" if a in _TRITON else a
    if a.startswith("errors"):
        return f"{what} {diff * 100:+.1f} pt"
    if a == "scores":
        return f"scores D={diff:.2f}"
    return f"{what} {diff:+.0%}"


def _split(a: str, facts: Mapping[str, object], side: str) -> str:
    q, comp = _num(facts.get(f"{a}.queue_{side}")), _num(facts.get(f"{a}.compute_{side}"))
    return f" (queue {q:.3g} ms, compute {comp:.3g} ms)" if q is not None and comp is not None else ""


def _sentence(a: str, facts: Mapping[str, object], b: str, c: str, min_samples: object) -> str | None:
    base, cand, q = (_num(facts.get(f"{a}.{k}")) for k in ("base", "cand", "q"))
    nb, nc = facts.get(f"{a}.n_base"), facts.get(f"{a}.n_cand")
    what = {"errors": "error ratio", "scores": "mean score"}.get(a, f"{a} latency")
    if a in _TRITON:
        if q is None and not nb and not nc:
            return None  # nothing from Triton for this pair (not wired, or no traffic): not worth a sentence
        name, source, unit = _TRITON[a]
        what = {"errors": "error ratio", "mean latency": name}.get(name, f"{name} latency") + f" ({source})"
        if q is None:
            return (
                f"{what}: not decided ({nc} requests for {c}, {nb} for {b} over {facts.get(f'{a}.intervals')} "
                f"{unit}; it needs {min_samples} each and {facts.get('min_intervals')} {unit})."
            )
    if q is None or base is None or cand is None:
        return f"{what}: not decided ({nc or 0} values for {c}, {nb or 0} for {b}; it needs {min_samples} each)."
    unit = "" if a.startswith(("errors", "scores")) else " ms"
    # The summary's forms (``_worse_phrase``): a figure reads the same in the summary and the description.
    fmt = (lambda x: f"{x:.1%}") if a.startswith("errors") else (lambda x: f"{x:.3g}{unit}")
    return (
        f"{what}: {c} {fmt(cand)}{_split(a, facts, 'cand')} vs {b} {fmt(base)}{_split(a, facts, 'base')} "
        f"(q={q:.2g}, n={nc}/{nb})."
    )


def _sources(facts: Mapping[str, object]) -> str:
    """Where the latency figures came from: events or spans (whichever the pair used), Triton's metrics."""
    ours = str(facts.get("latency_source", "events"))
    parts = [ours] if _num(facts.get("p50.n_base")) or _num(facts.get("p50.n_cand")) else []
    if any(facts.get(f"{a}.q") is not None for a in _TRITON):
        parts.append("Triton's metrics")
    return " and ".join(parts) or ours


def render(f: Finding) -> FindingText:
    facts = f.facts
    model = f.labels.get("model", "")
    b, c = _v(f.labels.get("baseline", "")), _v(f.labels.get("candidate", ""))
    window = human_secs(f.window_secs)
    details = " ".join(s for s in (_sentence(a, facts, b, c, facts.get("min_samples")) for a in _ASPECTS) if s)
    source = f"Latency from {_sources(facts)}, over the last {window}."
    if f.insufficient_data:
        return (
            f"{model} {c} vs {b}: insufficient data",
            f"{model} {c} cannot be compared with {b} yet. {details} {source}",
        )
    worse = [a for a in str(facts.get("worse", "")).split(",") if a]
    if worse:
        phrases = "; ".join(_worse_phrase(a, facts, b, c) for a in worse)
        base_version = f.labels.get("baseline", "")
        summary = f"{model} {c} {phrases}: consider reverting to version {base_version}"
        return summary, f"{model} {c} is worse than {b}. {details} {source}"
    briefs = ", ".join(x for x in (_brief(a, facts) for a in _ASPECTS) if x)
    return (f"{model} {c} healthy against {b} ({briefs})", f"{model} {c} is not worse than {b}. {details} {source}")
