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
from typing import Any

from sidecar.promtext import Exposition
from sidecar.sources.servers.profile import ALL, REQUESTS, Profile, Rule
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
        requests = dict(self.requests)
        total = requests.pop(ALL, None)
        if total is not None:  # a count of every finished request beside a failure count (Ray Serve)
            rest = sum(requests.get(o, 0.0) for o in ("failure", "aborted", "other"))
            requests["success"] = requests.get("success", 0.0) + max(total - rest, 0.0)
        return ModelServing(
            requests=MappingProxyType(requests),
            counters=MappingProxyType(dict(self.counters)),
            gauges=MappingProxyType(dict(self.gauges)),
            dists=MappingProxyType(dists),
        )


_MISSING: Any = object()
Row = tuple[str, dict[str, str], float, float]  # (part, labels without le, value, le or nan)
_LE = re.compile(r'(^|,)[ \t]*le[ \t]*=[ \t]*"([^"\\]*)"[ \t]*(,|$)')


class _Labels:
    """Label strings parsed once per scrape and checked against the limits. A bucket's ``le`` is split off before
    parsing, so the hundreds of bucket lines of one series share one parse (``le`` values are cached too)."""

    def __init__(self, expo: Exposition, limits: Limits) -> None:
        self._parse = expo.labels
        self._limits = limits
        self.seen: dict[str, dict[str, str] | str] = {}  # raw -> labels, or the problem
        self._les: dict[str, float] = {}
        self.buckets_seen: dict[str, tuple[dict[str, str] | str, float]] = {}

    def get(self, raw: str) -> dict[str, str] | str:
        got = self.seen.get(raw)
        if got is None:
            got = self.seen[raw] = self._resolve(raw)
        return got

    def _resolve(self, raw: str) -> dict[str, str] | str:
        if not raw:
            return {}
        try:
            labels = self._parse(raw)
        except ValueError:
            return "a malformed label set"
        lim = self._limits
        if len(raw) > lim.max_label_value_len or raw.count("=") > lim.max_labels:  # else within limits for sure
            if len(labels) > lim.max_labels:
                return f"{len(labels)} labels (limit {lim.max_labels})"
            longest = max((len(v) for v in labels.values()), default=0)
            if longest > lim.max_label_value_len:
                return f"a label value of {longest} characters (limit {lim.max_label_value_len})"
        return labels

    def bucket(self, raw: str) -> tuple[dict[str, str] | str, float]:
        got = self.buckets_seen.get(raw)
        if got is None:
            got = self.buckets_seen[raw] = self._split(raw)
        return got

    def _split(self, raw: str) -> tuple[dict[str, str] | str, float]:
        i = raw.find('le="')
        j = raw.find('"', i + 4) if i >= 0 else -1
        if i >= 0 and j >= 0 and (i == 0 or raw[i - 1] == ",") and "\\" not in raw[i:j]:
            le_s = raw[i + 4 : j]
            base = raw[: i - 1] + raw[j + 1 :] if i else raw[j + 2 :] if raw[j + 1 : j + 2] == "," else raw[j + 1 :]
        else:  # spaces around "=", or le not where a label starts: the exact (slower) way
            m = _LE.search(raw)
            if m is None:
                return "a bucket without le", math.nan
            le_s = m.group(2)
            base = raw[: m.start()] + ("," if m.group(1) and m.group(3) else "") + raw[m.end() :]
        le = self._les.get(le_s)
        if le is None:
            try:
                le = float(le_s)
            except ValueError:
                le = math.nan
            self._les[le_s] = le
        if math.isnan(le):
            return "a bucket without a numeric le", le
        return self.get(base), le


def _resolve(
    rule: Rule, got: list[tuple[str, str, float]], labels: _Labels
) -> tuple[tuple[str, str] | None, list[Row]]:
    values = [v for _p, _r, v in got]
    if not all(map(math.isfinite, values)):
        bad = next(v for v in values if not math.isfinite(v))
        return ("non_finite", f"{rule.family} has a {bad} sample"), []
    if rule.type != "gauge" and min(values) < 0:
        return ("negative", f"{rule.family} has a negative count ({min(values):g})"), []
    out: list[Row] = []
    add, nan = out.append, math.nan
    seen_bucket, seen = labels.buckets_seen.get, labels.seen.get  # the hot path: a dict hit per row
    for part, raw, v in got:
        if part == "bucket":
            lab, le = seen_bucket(raw) or labels.bucket(raw)
        else:
            lab, le = seen(raw) or labels.get(raw), nan
        if lab.__class__ is str:
            return ("labels", f"{rule.family} has {lab}"), []
        add((part, lab, v, le))  # type: ignore[arg-type]
    return None, out


def map_exposition(
    expo: Exposition,
    profile: Profile,
    *,
    server: str,
    taken_at: float,
    limits: Limits = Limits(),
    units: Mapping[str, str] | None = None,
) -> ServingSnapshot:
    """Map ``expo`` (parsed with ``eager_labels=False`` or not) onto the schema with ``profile``."""
    index = _index(profile)
    rows: dict[Rule, list[tuple[str, str, float]]] = defaultdict(list)
    for name, raw, value in expo.samples:
        hits = index.get(name)
        if hits is not None:
            for rule, part in hits:
                rows[rule].append((part, raw, value))
    # A renamed family exposed under both names (a release that keeps the old one hidden-but-on) is read once,
    # from the new name, never summed.
    for old, new in profile.renames:
        if any(r.family == new for r in rows):
            for r in [r for r in rows if r.family == old]:
                del rows[r]
    refused: list[Refusal] = []
    bad: set[str] = set()
    resolved: dict[Rule, list[Row]] = {}
    labels = _Labels(expo, limits)
    for rule, got in rows.items():
        problem = _declared_problem(rule, expo.types, units or {})
        if problem is None:
            problem, resolved[rule] = _resolve(rule, got, labels)
        if problem is not None:
            refused.append(Refusal(rule.family, *problem))
            bad.add(rule.family)
    accs: dict[ModelKey, _Acc] = {}
    over: set[ModelKey] = set()
    present: set[str] = set()
    for rule, got2 in resolved.items():
        if rule.family in bad:
            continue
        present.add(rule.family)
        _fold(rule, got2, profile, accs, over, limits.max_models)
    return ServingSnapshot(
        server=server,
        profile=profile.name,
        taken_at=taken_at,
        models=MappingProxyType({k: a.freeze() for k, a in accs.items()}),
        families=frozenset(present),
        refused=tuple(refused),
        models_refused=len(over),
    )


def _declared_problem(rule: Rule, types: Mapping[str, str], units: Mapping[str, str]) -> tuple[str, str] | None:
    declared = _declared(types, rule)
    if declared is not None and declared not in (rule.type, "untyped"):
        return "wrong_type", f"{rule.family} is a {declared}, the profile reads a {rule.type}"
    unit = units.get(rule.family)
    if unit is not None and rule.unit is not None and unit != rule.unit:
        return "unit", f"{rule.family} declares unit {unit!r}, the profile reads {rule.unit!r}"
    return None


def _http_outcome(code: str) -> str:
    if code[:1] in ("2", "3"):
        return "success"
    if code == "499":  # the client closed the connection
        return "aborted"
    return "failure" if code[:1] in ("4", "5") else "other"


def _fold(
    rule: Rule,
    got: list[Row],
    profile: Profile,
    accs: dict[ModelKey, _Acc],
    over: set[ModelKey],
    max_models: int,
) -> None:
    ml, vl, default = profile.model_label, profile.version_label, profile.default_model
    target, where, skip, scale = rule.target, rule.where, rule.skip, rule.scale
    keys: dict[int, _Acc | None] = {}  # id(labels) -> its model's builder: bucket rows of a series share labels

    def acc_of(labels: dict[str, str]) -> _Acc | None:
        key = (labels.get(ml, "") if ml else default, labels.get(vl, "") if vl else "")
        acc = accs.get(key)
        if acc is None:
            if len(accs) >= max_models:
                over.add(key)
                return None
            acc = accs[key] = _Acc()
        return acc

    for part, labels, v, le in got:
        if where and any(labels.get(k) != want for k, want in where):
            continue
        if skip and any(labels.get(k) == no for k, no in skip):
            continue
        acc = keys.get(id(labels), _MISSING)
        if acc is _MISSING:
            acc = keys[id(labels)] = acc_of(labels)
        if acc is None:
            continue
        if part == "bucket":
            acc.buckets[target][le * scale] += v
        elif target == REQUESTS:
            if rule.http_status_label:
                outcome = _http_outcome(labels.get(rule.http_status_label, ""))
            elif rule.outcome_label:
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
            acc.dsum[target] += v * scale
        elif part == "count" or (part == "value" and rule.part == "count"):
            acc.dcount[target] += v
