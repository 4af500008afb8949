"""The words of a token-length drift finding, from its facts (``TokenDriftFacts``, ``sidecar/facts_llm.py``).

Summaries: ``chat v3 prompt lengths drift on vllm: mean 391 tokens against 300 in the reference (+30%), PSI 0.21;
2 of the last 3 5m windows drifted``, ``chat v3 prompt lengths match the reference on vllm (PSI 0.012)``,
``chat v3 prompt lengths on vllm: not tested, the bucket edges changed (reference 1,2,5,...; now 1,2,5,...)``,
``chat v3 prompt lengths on vllm: reference being captured (812 of 2000 requests)``,
``chat v3 prompt lengths on vllm: too few requests to judge (45 of 200 in 5m)``.
"""

from __future__ import annotations

from sidecar.alerting.render.drift import version_text
from sidecar.alerting.render.text import FindingText
from sidecar.model import Finding
from sidecar.naming import human_secs

__all__ = ["render", "what_text"]

_WHAT = {"input": "prompt lengths", "output": "generation lengths"}


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _n(v: object) -> str:
    x = _num(v)
    return "?" if x is None else f"{x:,.0f}"


def what_text(tokens: object) -> str:
    return _WHAT.get(str(tokens), f"{tokens} token lengths")


def _means(mean_cur: float | None, mean_ref: float | None) -> str:
    if mean_cur is None or mean_ref is None or mean_ref <= 0:
        return ""
    change = (mean_cur / mean_ref - 1) * 100
    return f"mean {mean_cur:,.0f} tokens against {mean_ref:,.0f} in the reference ({change:+.0f}%)"


def _reference(facts: object) -> str:
    get = getattr(facts, "get", lambda _k: None)
    if get("ref_mode") == "file":
        return f"reference file {get('ref_id')} ({_n(get('n_ref'))} requests)"
    ref_id = str(get("ref_id") or "")
    who = f"version {ref_id[1:]}" if ref_id.startswith("v") else "the version"
    return f"the first {_n(get('n_ref'))} requests of {who}"


def render(f: Finding) -> FindingText:
    facts = f.facts
    who = f"{f.labels.get('model', '?')} {version_text(f.labels.get('version'))}"
    what = what_text(facts.get("tokens"))
    server = str(facts.get("server") or f.labels.get("server", "?"))
    where = "from events" if server == "events" else f"on {server}"
    window = human_secs(_num(facts.get("window_secs")))
    state = facts.get("state")
    source = (
        "per-request token counts the clients posted"
        if server == "events"
        else f"the token histogram {server} exports (bucket increases; no request was logged)"
    )
    means = _means(_num(facts.get("mean_cur")), _num(facts.get("mean_ref")))
    psi, level, floor = _num(facts.get("psi")), _num(facts.get("level")), _num(facts.get("psi_floor"))
    looks = f"{facts.get('looks_drifting')} of the last {facts.get('looks')} {window} windows drifted"
    rule = f"active at {facts.get('sustained_looks')} of {facts.get('sustained_of')}"
    if f.active:
        q, stat = _num(facts.get("q")), _num(facts.get("statistic"))
        latest = f"over the latest {window} ({_n(facts.get('n_cur'))} requests)"
        if q is not None and level is not None and q < level and psi is not None and psi >= (floor or 0):
            summary = f"{who} {what} drift {where}: " + (f"{means}, " if means else "") + f"PSI {psi:.2g}; {looks}"
            description = (
                f"The {what} of {who} ({source}) differ from {_reference(facts)}: {latest} chi-square "
                f"{stat or 0:.3g} over {facts.get('bins')} buckets, adjusted p {q:.2g} below the per-window level "
                f"{level:.2g} (checks.drift's false-alarm budget), PSI {psi:.2g} at or above {floor or 0:g}. "
                f"{looks} ({rule})."
            )
        else:
            # Active on the windows before; the latest alone does not drift: its figures are labelled as the
            # latest window's, never quoted as the drift's evidence.
            figures = f"PSI {psi:.2g}" if psi is not None else "not tested"
            summary = f"{who} {what} drift {where}: {looks}; the latest window does not ({figures})"
            description = (
                f"The {what} of {who} ({source}) drifted from {_reference(facts)} in {looks.split(' drifted')[0]} "
                f"({rule}). The latest window alone does not: {latest}"
                + (f" adjusted p {q:.2g} against the per-window level {level or 0:.2g}," if q is not None else "")
                + (f" PSI {psi:.2g} against the floor {floor or 0:g}." if psi is not None else " not tested.")
            )
        if means:
            description += f" The {means}."
        return summary, description
    if state == "bucket_edges_changed":
        ref_e, cur_e = facts.get("ref_edges"), facts.get("cur_edges")
        return (
            f"{who} {what} {where}: not tested, the bucket edges changed (reference {ref_e}; now {cur_e})",
            f"The {what} of {who} now come in other buckets than the reference's (reference {ref_e}; now {cur_e}), "
            "as after a restart with another max_model_len or bucket option. A test across different buckets would "
            "compare different things, so none is made until the edges match the reference again; to test against "
            "the new edges, give a reference with them (docs/runbooks/TokenLengthDrift.md).",
        )
    if state == "no_reference":
        return (
            f"{who} {what} {where}: reference being captured ({_n(facts.get('n_ref'))} of "
            f"{facts.get('pinned_requests')} requests)",
            f"No test yet: the reference of the {what} of {who} is still being captured (mode "
            f"{facts.get('ref_mode')}); windows are tested once it holds {facts.get('pinned_requests')} requests.",
        )
    if state == "few_requests" or f.insufficient_data:
        return (
            f"{who} {what} {where}: too few requests to judge ({_n(facts.get('n_cur'))} of "
            f"{facts.get('min_requests')} in {window})",
            f"The latest {window} of {who} held {_n(facts.get('n_cur'))} requests with {what}; a window is tested "
            f"from {facts.get('min_requests')} (and a reference of as many).",
        )
    return (
        f"{who} {what} match the reference {where} (PSI {psi or 0:.2g})",
        f"The latest {window} of {who} ({_n(facts.get('n_cur'))} requests) against {_reference(facts)}: "
        f"PSI {psi or 0:.2g}" + (f", {means}" if means else "") + f"; {looks} ({rule}).",
    )


def line_text(rows: list[tuple[str, str, str, str, float | None, float | None, bool, bool]]) -> str:
    """The line on ``/``: rows (server, model, version, tokens, psi, mean change, drifting, edges mismatch),
    drifting and refused first; e.g. ``chat v3 prompt lengths on vllm drifting (PSI 0.21 in the latest window,
    mean +30%); chat v3 generation lengths on vllm PSI 0.012``."""
    parts = []
    for server, model, version, tokens, psi, change, drifting, mismatch in sorted(
        rows, key=lambda r: (not r[6], not r[7], r[:4])
    ):
        where = "from events" if server == "events" else f"on {server}"
        head = f"{model} {version_text(version)} {what_text(tokens)} {where}"
        mean = f", mean {change:+.0%}" if change is not None else ""
        if mismatch:
            parts.append(f"{head}: bucket edges changed, not tested")
        elif drifting:
            latest = f"PSI {psi:.2g} in the latest window" if psi is not None else "latest window not tested"
            parts.append(f"{head} drifting ({latest}{mean})")
        elif psi is not None:
            parts.append(f"{head} PSI {psi:.2g}")
        else:
            parts.append(f"{head}: no window tested yet")
    return "; ".join(parts) if parts else "no token lengths seen yet"
