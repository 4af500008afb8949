"""The words of an output sanity finding, from its ``facts`` (see ``sidecar/checks/output_sanity/check.py``).

``ctr v2 outputs NaN or inf: 12 of 340 (3.5%) over 5m, e.g. request req-17``; ``ctr v2 outputs outside
[0, 1]: ...``; ``ctr v2 outputs collapsed: 0.5 is 98% of 300 outputs over 5m``.
"""

from __future__ import annotations

from collections.abc import Mapping

from sidecar.alerting.render.text import FindingText, pct
from sidecar.model import Finding
from sidecar.naming import human_secs

__all__ = ["render"]

_WHAT = {
    "nonfinite": "NaN or inf",
    "all_zero": "all zeros",
    "out_of_range": "outside the declared range",
    "collapsed": "collapsed onto one value",
}


def _v(version: str) -> str:
    return f"v{version}" if version.isdigit() else version


def _bound(x: object) -> str:
    return f"{x:g}" if isinstance(x, int | float) else "…"


def _examples(facts: Mapping[str, object]) -> tuple[str, str]:
    traces = [t for t in str(facts.get("sample_trace_ids") or "").split(",") if t]
    reqs = [r for r in str(facts.get("sample_request_ids") or "").split(",") if r]
    if not traces and not reqs:
        return "", " No example ids: the events carried no trace or request id."
    short = f", e.g. request {reqs[-1]}" if reqs else f", e.g. trace {traces[-1]}"
    parts = ([f"traces {', '.join(traces)}"] if traces else []) + ([f"requests {', '.join(reqs)}"] if reqs else [])
    return short, f" Examples: {'; '.join(parts)}."


def render(f: Finding) -> FindingText:
    facts = f.facts
    test = str(facts.get("test", f.labels.get("test", "")))
    who = f"{f.labels.get('model', '')} {_v(f.labels.get('version', ''))}"
    window = human_secs(f.window_secs)
    what = _WHAT.get(test, test)
    if test == "out_of_range":
        what = f"outside [{_bound(facts.get('range_min'))}, {_bound(facts.get('range_max'))}]"
    n, count = facts.get("n"), facts.get("count")
    outputs = facts.get("outputs", "score")
    if f.insufficient_data or f.value is None:
        return (
            f"{who} outputs {what}: insufficient data",
            f"{who}: {n} outputs ({outputs}) in the last {window}; the test needs {facts.get('min_samples')}.",
        )
    ratio = f.value
    limit = f"{(f.threshold or 0):.0%}"
    if test == "collapsed":
        # One figure, one form: the summary's share is the description's (pct: three significant digits).
        summary = f"{who} outputs collapsed: {facts.get('dominant')} is {pct(ratio)} of {n} outputs over {window}"
        return summary, (
            f"{who}: one output value ({outputs} = {facts.get('dominant')}) makes {pct(ratio)} of the "
            f"{n} finite outputs in the last {window}; the check fires above {limit}."
        )
    short, long = _examples(facts)
    summary = f"{who} outputs {what}: {count} of {n} ({ratio:.1%}) over {window}{short}"
    desc = (
        f"{who}: {count} of the {n} outputs ({outputs}) in the last {window} are {what} ({ratio:.1%}; the "
        f"check fires above {limit}).{long}"
    )
    return summary, desc
