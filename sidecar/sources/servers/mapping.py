"""Maps one parsed exposition onto the SLI schema with a profile, refusing bad families one by one.

A family is refused whole, with a bounded reason, when it is declared with another type than the profile
expects (``wrong_type``), declares another OpenMetrics unit (``unit``), holds a NaN or infinite sample
(``non_finite``), a negative count (``negative``), or a label set beyond limits (``labels``: more labels or a
longer value than allowed). Nothing a server writes makes this raise, and a refused family never shows as a
zero: its SLIs are simply absent from the snapshot. Model/version pairs beyond ``max_models`` are dropped and
counted (first come, first kept).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType

from sidecar.promtext import Exposition
from sidecar.sources.servers.profile import REQUESTS, Profile, Rule
from sidecar.sources.servers.schema import (
    Counter,
    Dist,
    DistName,
    Gauge,
    ModelKey,
    ModelServing,
    Refusal,
    ServingSnapshot,
)

__all__ = ["Limits", "map_exposition", "parse_units"]

_UNIT = re.compile(r"^# UNIT ([a-zA-Z_:][a-zA-Z0-9_:]*) ([^\s]+)[ \t]*$", re.MULTILINE)
_COUNTERS = frozenset(Counter)
_GAUGES = frozenset(Gauge)
_DISTS = frozenset(DistName)


@dataclass(frozen=True, slots=True)
class Limits:
    max_models: int = 500
    max_labels: int = 16  # labels on one sample
    max_label_value_len: int = 256


def parse_units(text: str) -> dict[str, str]:
    """OpenMetrics ``# UNIT`` lines (the 0.0.4 text format has none; a cheap check skips the regex)."""
    return dict(_UNIT.findall(text)) if "# UNIT " in text else {}


@lru_cache(maxsize=64)
def _index(profile: Profile) -> dict[str, tuple[tuple[Rule, str], ...]]:
    """Sample name -> ((rule, part), ...): the one dictionary the hot loop reads (a family may feed two SLIs)."""
    out: dict[str, list[tuple[Rule, str]]] = defaultdict(list)
    for r in profile.rules:
        f = r.family
        if r.type == "counter":
            out[f].append((r, "value"))
            out[f + "_total"].append((r, "value"))
        elif r.type == "gauge":
            out[f].append((r, "value"))
        else:
            out[f + "_sum"].append((r, "sum"))
            out[f + "_count"].append((r, "count"))
            if r.type == "histogram":
                out[f + "_bucket"].append((r, "bucket"))
    return {k: tuple(v) for k, v in out.items()}


def _declared(types: Mapping[str, str], rule: Rule) -> str | None:
    got = types.get(rule.family)
    if got is None and rule.type == "counter":
        got = types.get(rule.family + "_total")
    return got


class _Acc:
    """Mutable per-model builder; frozen into ``ModelServing`` at the end."""

    __slots__ = ("buckets", "counters", "dcount", "den", "dsum", "gauges", "num", "requests")

    def __init__(self) -> None:
        self.requests: dict[str, float] = defaultdict(float)
        self.counters: dict[str, float] = defaultdict(float)
        self.gauges: dict[str, float] = {}
        self.dsum: dict[str, float] = defaultdict(float)
        self.dcount: dict[str, float] = defaultdict(float)
        self.buckets: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
        self.num: dict[str, float] = defaultdict(float)
        self.den: dict[str, float] = defaultdict(float)

    def freeze(self) -> ModelServing:
        dists: dict[str, Dist] = {}
        for name in self.dsum.keys() & self.dcount.keys():
            b = self.buckets.get(name)
            dists[name] = Dist(self.dsum[name], self.dcount[name], tuple(sorted(b.items())) if b else ())
        for name in self.num.keys() & self.den.keys():
            if self.den[name] > 0:
                self.gauges[name] = self.num[name] / self.den[name]
        return ModelServing(
            requests=MappingProxyType(dict(self.requests)),
            counters=MappingProxyType(dict(self.counters)),
            gauges=MappingProxyType(dict(self.gauges)),
            dists=MappingProxyType(dists),
        )


def _is_bound(le: str | None) -> bool:
    if le is None:
        return False
    try:
        return not math.isnan(float(le))
    except ValueError:
        return False


def _check(rule: Rule, rows: list[tuple[str, dict[str, str], float]], limits: Limits) -> tuple[str, str] | None:
    for part, labels, v in rows:
        if part == "bucket" and not _is_bound(labels.get("le")):
            return "labels", f"{rule.family} has a bucket without a numeric le"
        if not math.isfinite(v):
            return "non_finite", f"{rule.family} has a {v} sample"
        if v < 0 and rule.type != "gauge":
            return "negative", f"{rule.family} has a negative count ({v:g})"
        if len(labels) > limits.max_labels:
            return "labels", f"{rule.family} has {len(labels)} labels (limit {limits.max_labels})"
        for val in labels.values():
            if len(val) > limits.max_label_value_len:
                return "labels", f"{rule.family} has a label value of {len(val)} characters"
    return None


def map_exposition(
    expo: Exposition,
    profile: Profile,
    *,
    server: str,
    taken_at: float,
    limits: Limits = Limits(),
    units: Mapping[str, str] | None = None,
) -> ServingSnapshot:
    index = _index(profile)
    rows: dict[Rule, list[tuple[str, dict[str, str], float]]] = defaultdict(list)
    labels_of = expo.labels
    for name, raw, value in expo.samples:
        hits = index.get(name)
        if hits is not None:
            labels = labels_of(raw) if raw else {}
            for rule, part in hits:
                rows[rule].append((part, labels, value))
    # A renamed family exposed under both names (a release that keeps the old one hidden-but-on) is read once,
    # from the new name, never summed.
    for old, new in profile.renames:
        if any(r.family == new for r in rows):
            for r in [r for r in rows if r.family == old]:
                del rows[r]
    refused: list[Refusal] = []
    bad: set[str] = set()
    for rule, got in rows.items():
        problem = _problem(rule, got, expo.types, units or {}, limits)
        if problem is not None:
            refused.append(Refusal(rule.family, *problem))
            bad.add(rule.family)
    accs: dict[ModelKey, _Acc] = {}
    over: set[ModelKey] = set()
    present: set[str] = set()
    for rule, got in rows.items():
        if rule.family in bad:
            continue
        present.add(rule.family)
        _fold(rule, got, profile, accs, over, limits.max_models)
    return ServingSnapshot(
        server=server,
        profile=profile.name,
        taken_at=taken_at,
        models=MappingProxyType({k: a.freeze() for k, a in accs.items()}),
        families=frozenset(present),
        refused=tuple(refused),
        models_refused=len(over),
    )


def _problem(
    rule: Rule,
    got: list[tuple[str, dict[str, str], float]],
    types: Mapping[str, str],
    units: Mapping[str, str],
    limits: Limits,
) -> tuple[str, str] | None:
    declared = _declared(types, rule)
    if declared is not None and declared not in (rule.type, "untyped"):
        return "wrong_type", f"{rule.family} is a {declared}, the profile reads a {rule.type}"
    unit = units.get(rule.family)
    if unit is not None and rule.unit is not None and unit != rule.unit:
        return "unit", f"{rule.family} declares unit {unit!r}, the profile reads {rule.unit!r}"
    return _check(rule, got, limits)


def _fold(
    rule: Rule,
    got: list[tuple[str, dict[str, str], float]],
    profile: Profile,
    accs: dict[ModelKey, _Acc],
    over: set[ModelKey],
    max_models: int,
) -> None:
    ml, vl = profile.model_label, profile.version_label
    target = rule.target
    where = rule.where
    for part, labels, v in got:
        if where and any(labels.get(k) != want for k, want in where):
            continue
        key = (labels.get(ml, "") if ml else profile.default_model, labels.get(vl, "") if vl else "")
        acc = accs.get(key)
        if acc is None:
            if len(accs) >= max_models:
                over.add(key)
                continue
            acc = accs[key] = _Acc()
        if target == REQUESTS:
            if rule.outcome_label:
                outcome = rule.outcomes.get(labels.get(rule.outcome_label, ""), rule.outcome or "other")
            else:
                outcome = rule.outcome or "other"
            acc.requests[outcome] += v
        elif target in _COUNTERS:
            if rule.type == "counter" or part == rule.part:  # a histogram's _sum, when it counts tokens
                acc.counters[target] += v
        elif part == "value" and rule.part in ("num", "den"):
            (acc.num if rule.part == "num" else acc.den)[target] += v
        elif target in _GAUGES:
            old = acc.gauges.get(target)
            acc.gauges[target] = v if old is None else (old + v if rule.gauge_agg == "sum" else max(old, v))
        elif part == "sum" or (part == "value" and rule.part == "sum"):
            acc.dsum[target] += v * rule.scale
        elif part == "count" or (part == "value" and rule.part == "count"):
            acc.dcount[target] += v
        elif part == "bucket":
            acc.buckets[target][float(labels["le"]) * rule.scale] += v
