"""The text of drift findings, from the numbers the drift check puts in ``Finding.facts``."""

from __future__ import annotations

from collections.abc import Mapping

from sidecar.alerting.render import FindingText
from sidecar.model import Finding

__all__ = ["render", "version_text"]

Facts = Mapping[str, float | int | str | None]
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


def _test_detail(facts: Facts) -> str:
    if facts.get("test") == "ks":
        return f"KS D={_num(facts, 'statistic'):.4f} ({facts.get('method')})"
    unseen = facts.get("unseen")
    new = (
        f"; new categories {unseen} ({_num(facts, 'unseen_ratio'):.1%})"
        if unseen and isinstance(facts.get("unseen_count"), int) and facts.get("unseen_count")
        else ""
    )
    return f"chi2={_num(facts, 'statistic'):.1f} dof={facts.get('dof')} PSI={_num(facts, 'psi'):.3f}{new}"


def render(f: Finding) -> FindingText:
    facts = f.facts
    if not facts:  # a drift finding from elsewhere that wrote its own text
        return f.summary or f.check, f.description
    where = f"{f.labels.get('model', '')} {version_text(f.labels.get('version'))} {f.labels.get('feature', '')}"
    test = facts.get("test")
    if facts.get("insufficient"):
        summary = f"drift {where}: insufficient data ({_reason(facts)})"
    elif test == "missing":
        summary = (
            f"missing values {where}: missing {_num(facts, 'missing_ratio'):.1%} vs "
            f"{_num(facts, 'ref_missing_ratio'):.1%}{_held(facts)}"
        )
    else:
        summary = (
            f"drift {where}: {_test_detail(facts)}, p(BH)={_num(facts, 'q'):.3g}, "
            f"n={facts.get('n_cur')} vs {facts.get('n_ref')}{_held(facts)}"
        )
    description = (
        f"Effect floor {facts.get('floor')}; missing ratio {_num(facts, 'missing_ratio'):.3f} "
        f"(reference {_num(facts, 'ref_missing_ratio'):.3f})."
    )
    return summary, description
