"""The text of drift findings, from the facts the drift check puts in ``Finding.facts`` (``DriftFacts``).

A finding's summary quotes the evidence that made it active (the drifting blocks of the scale that met the
sustained rule, or the window while its condition held), never a later look that happens to be quieter; the
latest look is quoted as "now", beside it. The pages call the same functions (``evidence_text``,
``now_text``, ``figures_text``), so every screen says the same thing in the same words.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from sidecar.alerting.render.text import FindingText, num, when
from sidecar.facts import DriftBlock, DriftReference
from sidecar.model import Finding

__all__ = [
    "blocks_text",
    "evidence_text",
    "figures_text",
    "now_text",
    "reason_text",
    "render",
    "state_text",
    "version_text",
]

Facts = Mapping[str, Any]
# Versions that mean "no version was given": the events source's default, or nothing at all.
_ALL_VERSIONS = frozenset({"", "unversioned", "*"})


def version_text(version: str | None) -> str:
    """``v2`` for a version, ``all versions`` when the events carried none (never ``vunversioned``)."""
    return "all versions" if version is None or version in _ALL_VERSIONS else f"v{version}"


def _num(facts: Facts, name: str) -> float:
    v = facts.get(name)
    return float(v) if isinstance(v, int | float) else float("nan")


def _reason(facts: Facts) -> str:
    code = facts.get("insufficient")
    ver = facts.get("ref_version")
    if code == "too_few_samples":
        return f"{facts.get('n_cur')} current / {facts.get('n_ref')} reference values (need {facts.get('min_samples')})"
    if code == "collecting":
        return f"reference collecting {facts.get('collected')}/{facts.get('target')} events of version {ver}"
    if code == "waiting_for_version":
        return f"waiting for version {ver}'s first events"
    if code == "absent_from_pin":
        return f"feature absent from version {ver}'s pinned reference"
    if code == "not_in_file":
        return f"feature not in reference file {facts.get('path')}"
    if code == "no_history":
        return "no history yet for the rolling reference"
    if code == "no_traffic_last_week":
        return "no traffic in the same hours last week yet"
    return str(code)


def reason_text(facts: Facts) -> str:
    """Why a drift test could not run, from the reason code ``insufficient`` and its numbers (every screen)."""
    return _reason(facts)


def blocks_text(facts: Facts) -> str:
    """Method multiscale: how much evidence holds, ``2 of the last 3 60s blocks (need 2)``; "" otherwise."""
    got, of, need, scale = (facts.get(k) for k in ("looks_drifting", "looks", "sustained_looks", "scale_secs"))
    if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in (got, of, need, scale)):
        return ""
    return f"{got} of the last {of} {scale:.0f}s blocks (need {need})"


def _hms(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%H:%M:%SZ")


def _held(facts: Facts) -> str:
    if facts.get("decision") == "multiscale":
        return (
            f"; {facts.get('looks_drifting')} of the last {facts.get('looks')} "
            f"{_num(facts, 'scale_secs'):.0f}s blocks drifted (active at {facts.get('sustained_looks')} of "
            f"{facts.get('sustained_of')}, level {_num(facts, 'level'):.2g})"
        )
    held = facts.get("held_secs")
    if not isinstance(held, int | float):
        return ""
    return f"; condition held {held:.0f}s of {_num(facts, 'sustained_secs'):.0f}s"


def _f(v: float | None, spec: str) -> str:
    return "-" if v is None or v != v else format(v, spec)


def figures_text(
    test: str,
    statistic: float | None,
    q: float | None,
    n_cur: int | None,
    n_ref: int | None,
    *,
    method: object = None,
    dof: object = None,
    psi: float | None = None,
    new: str = "",
    ref_missing: float | None = None,
) -> str:
    """One look's figures: ``KS D=0.3230 (asymp), p(BH)=3e-24, n=400 vs 1000`` (the same words on every screen)."""
    if test == "missing":
        return f"missing {_f(statistic, '.1%')} vs {_f(ref_missing, '.1%')}"
    if test == "ks":
        detail = f"KS D={_f(statistic, '.4f')}" + (f" ({method})" if method else "")
    else:
        detail = (
            f"chi2={_f(statistic, '.1f')}" + (f" dof={dof}" if dof is not None else "") + f" PSI={_f(psi, '.3f')}{new}"
        )
    return f"{detail}, p(BH)={_f(q, '.3g')}, n={n_cur} vs {n_ref}"


def _new(facts: Facts) -> str:
    unseen = facts.get("unseen")
    if unseen and isinstance(facts.get("unseen_count"), int) and facts.get("unseen_count"):
        return f"; new categories {unseen} ({_num(facts, 'unseen_ratio'):.1%})"
    return ""


def _block_figures(facts: Facts, b: DriftBlock) -> str:
    test = str(facts.get("test"))
    return figures_text(
        test,
        b.statistic,
        b.q,
        b.n_cur,
        b.n_ref,
        method=facts.get("method"),
        dof=b.dof,  # the block's own, never the latest look's: a block reads the same words later
        psi=b.effect if test == "chi2" else None,
        new=f"; new categories {b.unseen} ({b.unseen_ratio or 0:.1%})" if test == "chi2" and b.unseen else "",
        ref_missing=facts.get("ref_missing_ratio"),
    )


def _flat_figures(facts: Facts) -> str:
    test = str(facts.get("test"))
    return figures_text(
        test,
        facts.get("missing_ratio") if test == "missing" else facts.get("statistic"),
        facts.get("q"),
        facts.get("n_cur"),
        facts.get("n_ref"),
        method=facts.get("method"),
        dof=facts.get("dof"),
        psi=facts.get("psi"),
        new=_new(facts),
        ref_missing=facts.get("ref_missing_ratio"),
    )


def _where(facts: Facts, b: DriftBlock) -> str:
    if facts.get("decision") == "multiscale":
        return f" in the {_num(facts, 'scale_secs'):.0f}s block to {_hms(b.end)}"
    return ""


def _evidence(facts: Facts) -> tuple[DriftBlock, ...]:
    ev = facts.get("evidence")
    return tuple(b for b in ev if isinstance(b, DriftBlock)) if isinstance(ev, tuple) else ()


def evidence_text(facts: Facts) -> str:
    """What made the finding active: the latest drifting look's figures and the rule it met; "" when not
    active (nothing fired)."""
    ev = _evidence(facts)
    if not ev:
        return ""
    b = ev[-1]
    return _block_figures(facts, b) + _where(facts, b) + _held(facts)


def now_text(facts: Facts, *, beside_evidence: bool = False) -> str:
    """The latest look, labelled ``now``: ``now: KS D=0.0375, p(BH)=0.66, n=380 vs 300 (60s block to ...)``.
    ``beside_evidence``: "" unless the finding is active on other looks than the latest (then both are shown)."""
    b = facts.get("now")
    if beside_evidence and (not _evidence(facts) or _evidence(facts)[-1] == b):
        return ""
    if not isinstance(b, DriftBlock):
        return "now: " + _flat_figures(facts) if facts.get("test") else ""
    return "now: " + _block_figures(facts, b) + _where(facts, b)


def state_text(facts: Facts, active: bool) -> str:
    """``drifting``, ``condition holds`` (the latest look drifted; not enough evidence yet), ``ok``, or
    ``insufficient data``: the same state words on every screen."""
    if facts.get("insufficient"):
        return "insufficient data"
    if active:
        return "drifting"
    return "condition holds" if facts.get("condition") is True else "ok"


def render(f: Finding) -> FindingText:
    facts = f.facts
    if not facts:  # a drift finding from elsewhere that wrote its own text
        return f.summary or f.check, f.description
    where = f"{f.labels.get('model', '')} {version_text(f.labels.get('version'))} {f.labels.get('feature', '')}"
    test = facts.get("test")
    word = "missing values" if test == "missing" else "drift"
    evidence = _evidence(facts)
    if facts.get("insufficient"):
        summary = f"drift {where}: insufficient data ({_reason(facts)})"
    elif f.active and evidence:
        summary = f"{word} {where}: {evidence_text(facts)}"
    else:
        summary = f"{word} {where}: {_flat_figures(facts)}{_held(facts)}"
    parts = []
    if f.active and len(evidence) > 1:
        parts.append(
            "Drifting looks: " + "; ".join(_block_figures(facts, b) + _where(facts, b) for b in evidence) + "."
        )
    if f.active and evidence and isinstance(facts.get("now"), DriftBlock) and facts["now"] != evidence[-1]:
        parts.append(now_text(facts)[0].upper() + now_text(facts)[1:] + ".")
    ref = facts.get("reference")
    if isinstance(ref, DriftReference):
        # When it froze, as the pages write a time: the drift detail page says "since <the same time>".
        froze = "" if ref.created_at is None or ref.source == "rolling" else f", frozen {when(ref.created_at)}"
        parts.append(f"Reference {ref.id} ({ref.size} values){froze}.")
    parts.append(
        f"Effect floor {num(facts.get('floor'))}; missing ratio {_f(_num(facts, 'missing_ratio'), '.3f')} "
        f"(reference {_f(_num(facts, 'ref_missing_ratio'), '.3f')})."
    )
    return summary, " ".join(parts)
