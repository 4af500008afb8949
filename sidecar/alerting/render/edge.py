"""The words of the edge checks' findings, from their facts (``sidecar/facts_edge.py``).

Summaries: ``cache hit ratio all 91.4% below SLA 92% (day so far, projected 91.2%; burn 6.8x over 1h, 7.5x over
5m)``, ``cache hit ratio all ended 2026-12-04 at 91.4% (SLA 92%)``, ``edge p99.9 all 2.3x baseline (1.2 s vs
520 ms) while p99 went 80 ms -> 71 ms``, ``purge of /model/weights/v1.3. at 04:00 did not take: 37 hits on
/model/weights/v1.3.7-onnx since``, ``purge of /model/weights/v9. at 04:00 matched no path seen``.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sidecar.alerting.render.text import FindingText, pct, when
from sidecar.model import Finding
from sidecar.naming import human_secs

__all__ = ["line_text", "render_purge", "render_sla", "render_tail"]


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _pct(v: object) -> str:
    return pct(_num(v))


def _ms(v: object) -> str:
    x = _num(v)
    if x is None:
        return "n/a"
    return f"{x:.3g} s" if x >= 1 else f"{x * 1000:.3g} ms"


def _hhmm(ts: object) -> str:
    x = _num(ts)
    return "?" if x is None else datetime.fromtimestamp(x, UTC).strftime("%H:%M")


def _when(ts: object) -> str:
    # In a description, a moment as every screen writes it (text.when: /changes lists the purge so).
    x = _num(ts)
    return "?" if x is None else when(x)


def _day(ts: object) -> str:
    x = _num(ts)
    return "?" if x is None else datetime.fromtimestamp(x, UTC).strftime("%Y-%m-%d")


def render_sla(f: Finding) -> FindingText:
    facts = f.facts
    g = f.labels.get("route_group", "all")
    target = _pct(facts.get("target"))
    period = str(facts.get("period", "day"))
    if facts.get("phase") == "missed":
        which = f"{period} of {_day(facts.get('period_start'))}"
        if f.insufficient_data or f.value is None:
            return (
                f"cache hit ratio {g}: too few requests in the {which} to judge",
                f"The {which} had {facts.get('requests')} requests in the hit ratio; the SLA check judges from "
                f"{facts.get('min_requests')}.",
            )
        verb = "missed" if f.active else "met"
        return (
            f"cache hit ratio {g} {verb} the SLA: {_pct(f.value)} over the {which} (target {target})",
            f"Route group {g} ended the {which} (UTC) at a cache hit ratio of {_pct(f.value)}: {facts.get('hits')} "
            f"hits of {facts.get('requests')} requests, against an SLA of {target}.",
        )
    so_far = f"{period} so far"
    if f.insufficient_data or f.value is None:
        return (
            f"cache hit ratio {g}: not enough requests yet",
            f"Route group {g} has {facts.get('requests')} requests in the hit ratio this {period}; the SLA check "
            f"judges from {facts.get('min_requests')}.",
        )
    projected = _pct(facts.get("projected"))
    if f.active:
        long_w, short_w = human_secs(_num(facts.get("long_secs"))), human_secs(_num(facts.get("short_secs")))
        bl, bs, k = _num(facts.get("burn_long")), _num(facts.get("burn_short")), _num(facts.get("factor"))
        summary = (
            f"cache hit ratio {g} burning its SLA: {bl or 0:.2g}x over {long_w}, {bs or 0:.2g}x over {short_w} "
            f"({_pct(f.value)} {so_far}, projected {projected}, target {target})"
        )
        description = (
            f"Route group {g} is missing the cache at {bl or 0:.2g} times the rate its SLA of {target} allows over "
            f"the last {long_w}, and {bs or 0:.2g} times over the last {short_w} (the pair fires above {k or 0:g}x). "
            f"The {so_far}: {_pct(f.value)} ({facts.get('hits')} hits of {facts.get('requests')}); at the recent "
            f"rates the {period} ends at {projected}. A purge, a deploy that changed cache keys or headers, or new "
            f"traffic are the usual causes: see recent changes."
        )
        return summary, description
    return (
        f"cache hit ratio {g} {_pct(f.value)} {so_far} (target {target}, projected {projected})",
        f"Route group {g}: {facts.get('hits')} hits of {facts.get('requests')} requests this {period}; no burn-rate "
        f"pair fires; projected end of {period}: {projected}.",
    )


def render_tail(f: Finding) -> FindingText:
    facts = f.facts
    g = f.labels.get("route_group", "all")
    hop = str(facts.get("hop", "edge"))
    window = human_secs(_num(facts.get("window_secs")))
    p99, b99, p999, b999 = (facts.get(k) for k in ("p99", "base_p99", "p999", "base_p999"))
    if f.insufficient_data or p999 is None:
        return (
            f"{hop} p99.9 {g}: not enough requests",
            f"{facts.get('requests')} requests over the last {window}; the tail check needs "
            f"{facts.get('min_requests')} for a p99.9.",
        )
    n99, nb99, n999, nb999 = _num(p99), _num(b99), _num(p999), _num(b999)
    if n99 is not None and nb99 is not None and n99 < nb99:
        p99_story = f"while p99 improved {_ms(b99)} -> {_ms(p99)}"
    elif nb99 is not None:
        p99_story = f"p99 {_ms(b99)} -> {_ms(p99)}"
    else:
        p99_story = f"p99 {_ms(p99)}"
    ratio = f"{n999 / nb999:.2g}x baseline " if n999 is not None and nb999 else ""
    summary = f"{hop} p99.9 {g} {ratio}({_ms(b999)} -> {_ms(p999)}) {p99_story}"
    bounds = []
    if facts.get("threshold_s") is not None:
        bounds.append(f"above {_ms(facts.get('threshold_s'))}")
    if facts.get("max_ratio") is not None:
        bounds.append(f"above {_num(facts.get('max_ratio')) or 0:g} times the baseline")
    description = (
        f"The {hop} latency of route group {g} over the last {window}: p50 {_ms(facts.get('p50'))}, p99 {_ms(p99)}, "
        f"p99.9 {_ms(p999)} ({facts.get('requests')} requests); over the "
        f"{human_secs(_num(facts.get('baseline_secs')))} before: p50 {_ms(facts.get('base_p50'))}, p99 {_ms(b99)}, "
        f"p99.9 {_ms(b999)} ({facts.get('base_requests')} requests). The check fires on p99.9 "
        f"{' or '.join(bounds)}, whatever p99 does: one request in a thousand is slow, which p99 and the mean hide."
    )
    return summary, description


def render_purge(f: Finding) -> FindingText:
    facts = f.facts
    pattern, at = facts.get("pattern"), _hhmm(facts.get("purged_at"))
    who = f" by {facts.get('who')}" if facts.get("who") else ""
    if facts.get("phase") == "unmatched":
        if not f.active:
            return (
                f"purge of {pattern} at {at} matches paths seen",
                f"The purge of {pattern} ({facts.get('scope')}){who} covers paths seen in the edge logs.",
            )
        return (
            f"purge of {pattern} at {at} matched no path seen",
            f"The purge of {pattern} ({facts.get('scope')}){who} at {_when(facts.get('purged_at'))} covers none of the "
            f"{facts.get('paths_seen')} distinct paths seen in the edge logs: check the pattern (a typo, a missing "
            f"prefix, the cache key's host part).",
        )
    hits, top, top_hits = facts.get("hits"), facts.get("top_path"), facts.get("top_hits")
    if not f.active:
        return (
            f"purge of {pattern} at {at}: no cache hit on covered paths since",
            f"The purge of {pattern} ({facts.get('scope')}){who} at {_when(facts.get('purged_at'))}: no cache hit on a "
            "path it covers since.",
        )
    where = f"on {top}" if facts.get("paths") == 1 else f"on {facts.get('paths')} paths ({top_hits} on {top})"
    return (
        f"purge of {pattern} at {at} did not take: {hits} {'hit' if hits == 1 else 'hits'} {where} since",
        f"The purge of {pattern} ({facts.get('scope')}){who} at {_when(facts.get('purged_at'))} should have "
        f"emptied the cache of the paths it covers, but the edge served {hits} cache hits on them since, the first "
        f"at {_when(facts.get('first_hit_at'))}. The edge still holds stale objects: purge again (exact paths), "
        f"and check how the CDN matched the pattern.",
    )


def line_text(
    ratio: dict[str, float],
    target: dict[str, float],
    projected: dict[str, float],
    firing: list[tuple[str, str, str]],
    max_parts: int,
) -> str:
    """The line on ``/``, from the edge checks' gauges: each route group's hit ratio this period against its SLA
    and projection, then what fires (``firing``: (sla | tail | purge, route group or pattern, check or hop));
    e.g. ``all 91.4% this period (SLA 92%, projected 91.2%); all burning its SLA; p99.9 tail firing: all edge;
    purge did not take: /model/weights/v1.3.``."""
    parts = []
    for g in sorted(ratio):
        sla = f"SLA {pct(target[g])}" if g in target else "no SLA"
        proj = f", projected {pct(projected[g])}" if g in projected else ""
        parts.append(f"{g} {pct(ratio[g])} this period ({sla}{proj})")
    fires = []
    for what, subject, detail in firing:
        if what == "sla":
            fires.append(
                f"{subject} {'burning its SLA' if detail == 'edge_hit_ratio_burn' else 'missed the last period'}"
            )
        elif what == "tail":
            fires.append(f"p99.9 tail firing: {subject} {detail}")
        else:
            fires.append(
                f"purge {'did not take' if detail == 'edge_purge_not_taken' else 'matched no path'}: {subject}"
            )
    parts = parts[:max_parts] + sorted(fires)[:max_parts]
    return "; ".join(parts) or "no edge traffic yet"
