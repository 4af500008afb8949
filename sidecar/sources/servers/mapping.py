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
from itertools import groupby
from operator import itemgetter
from types import MappingProxyType

from sidecar.promtext import Exposition
from sidecar.sources.servers.labels import Chunk, Limits, SeriesLabels, resolve_buckets
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
        # Plain dicts (frozen without a copy): a defaultdict behind a read-only proxy would still grow on a read.
        self.requests: dict[str, float] = {}
        self.counters: dict[str, float] = {}
        self.gauges: dict[str, float] = {}
        self.dsum: dict[str, float] = {}
        self.dcount: dict[str, float] = {}
        self.buckets: dict[str, dict[float, float]] = {}  # made per distribution when its buckets come
        self.num: dict[str, float] = {}
        self.den: dict[str, float] = {}

    def freeze(self) -> ModelServing:
        dists: dict[str, Dist] = {}
        if self.dsum:
            for name in self.dsum.keys() & self.dcount.keys():
                b = self.buckets.get(name)
                dists[name] = Dist(self.dsum[name], self.dcount[name], tuple(sorted(b.items())) if b else ())
        if self.num:
            for name in self.num.keys() & self.den.keys():
                if self.den[name] > 0:
                    self.gauges[name] = self.num[name] / self.den[name]
        requests = self.requests
        if ALL in requests:  # a count of every finished request beside a failure count (Ray Serve)
            total = requests.pop(ALL)
            rest = sum(requests.get(o, 0.0) for o in ("failure", "aborted", "other"))
            requests["success"] = requests.get("success", 0.0) + max(total - rest, 0.0)
        return ModelServing(
            requests=MappingProxyType(requests) if requests else _EMPTY,
            counters=MappingProxyType(self.counters) if self.counters else _EMPTY,
            gauges=MappingProxyType(self.gauges) if self.gauges else _EMPTY,
            dists=MappingProxyType(dists) if dists else _EMPTY_DISTS,
        )


_EMPTY: Mapping[str, float] = MappingProxyType({})
_EMPTY_DISTS: Mapping[str, Dist] = MappingProxyType({})


@dataclass(slots=True)
class _Resolved:
    chunks: list[Chunk]
    buckets: list[tuple[dict[str, str], float, float]]  # bucket lines: (labels without le, le, count)
    others: dict[str, dict[str, str]]  # any other raw label string -> labels


def _resolve(rule: Rule, chunks: list[Chunk], labels: SeriesLabels) -> tuple[tuple[str, str] | None, _Resolved | None]:
    """Check a family's values and each distinct label string once; nothing is folded before all passed."""
    values = [v for _p, run in chunks for _n, _r, v in run]
    if not all(map(math.isfinite, values)):
        bad = next(v for v in values if not math.isfinite(v))
        return ("non_finite", f"{rule.family} has a {bad} sample"), None
    if rule.type != "gauge" and min(values) < 0:
        return ("negative", f"{rule.family} has a negative count ({min(values):g})"), None
    out = _Resolved(chunks, [], {})
    for part, run in chunks:
        if part == "bucket":
            problem = resolve_buckets(run, labels, out.buckets)
            if problem is not None:
                return ("labels", f"{rule.family} has {problem}"), None
    for raw in {r for p, run in chunks if p != "bucket" for _n, r, _v in run}:
        got = labels.get(raw)
        if isinstance(got, str):
            return ("labels", f"{rule.family} has {got}"), None
        out.others[raw] = got
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
    rows: dict[Rule, list[Chunk]] = defaultdict(list)
    # Samples of one name come in runs (a series' buckets, then its sum and count): one look-up per run.
    for name, run in groupby(expo.samples, key=itemgetter(0)):
        hits = index.get(name)
        if hits is not None:
            samples = list(run)
            for rule, part in hits:
                rows[rule].append((part, samples))
    # A renamed family exposed under both names (a release that keeps the old one hidden-but-on) is read once,
    # from the new name, never summed.
    for old, new in profile.renames:
        if any(r.family == new for r in rows):
            for r in [r for r in rows if r.family == old]:
                del rows[r]
    refused: list[Refusal] = []
    bad: set[str] = set()
    resolved: dict[Rule, _Resolved] = {}
    labels = SeriesLabels(expo, limits)
    for rule, chunks in rows.items():
        problem = _declared_problem(rule, expo.types, units or {})
        if problem is None:
            problem, got = _resolve(rule, chunks, labels)
            if got is not None:
                resolved[rule] = got
        if problem is not None:
            refused.append(Refusal(rule.family, *problem))
            bad.add(rule.family)
    accs: dict[ModelKey, _Acc] = {}
    over: set[ModelKey] = set()
    present: set[str] = set()
    by_labels: dict[int, _Acc | None] = {}  # the label dicts live in ``labels`` until the end, so ids are stable
    for rule, res in resolved.items():
        if rule.family in bad:
            continue
        present.add(rule.family)
        _fold(rule, res, profile, accs, over, limits.max_models, by_labels)
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
    res: _Resolved,
    profile: Profile,
    accs: dict[ModelKey, _Acc],
    over: set[ModelKey],
    max_models: int,
    by_labels: dict[int, _Acc | None],
) -> None:
    ml, vl, default = profile.model_label, profile.version_label, profile.default_model
    unversioned = profile.unversioned
    target, where, skip, scale = rule.target, rule.where, rule.skip, rule.scale

    def acc_of(labels: dict[str, str]) -> _Acc | None:
        if where and any(labels.get(k) != want for k, want in where):
            return None
        if skip and any(labels.get(k) == no for k, no in skip):
            return None
        if id(labels) in by_labels:  # label sets are shared objects across families
            return by_labels[id(labels)]
        version = labels.get(vl, "") if vl else ""
        key = (labels.get(ml, "") if ml else default, "" if version == unversioned else version)
        acc = accs.get(key)
        if acc is None:
            if len(accs) >= max_models:
                over.add(key)
                by_labels[id(labels)] = None
                return None
            acc = accs[key] = _Acc()
        by_labels[id(labels)] = acc
        return acc

    # Bucket lines of one series share one labels object: its model's buckets are looked up once per series.
    last: dict[str, str] | None = None
    dest: dict[float, float] | None = None
    for lab, le, v in res.buckets:
        if lab is not last:
            last = lab
            acc = acc_of(lab)
            dest = None
            if acc is not None:
                dest = acc.buckets.get(target)
                if dest is None:
                    dest = acc.buckets[target] = defaultdict(float)
        if dest is not None:
            dest[le * scale] += v
    owners = {raw: acc_of(labels) for raw, labels in res.others.items()}
    for part, run in res.chunks:
        if part == "bucket":
            continue
        for _n, raw, v in run:
            acc = owners[raw]
            if acc is not None:
                _add(rule, part, res.others[raw], v, acc)


def _add(rule: Rule, part: str, labels: dict[str, str], v: float, acc: _Acc) -> None:
    target = rule.target
    if target == REQUESTS:
        if part in ("sum", "bucket"):  # a distribution feeds a requests counter with its count (KServe)
            return
        if rule.http_status_label:
            outcome = _http_outcome(labels.get(rule.http_status_label, ""))
        elif rule.outcome_label:
            outcome = rule.outcomes.get(labels.get(rule.outcome_label, ""), rule.outcome or "other")
        else:
            outcome = rule.outcome or "other"
        acc.requests[outcome] = acc.requests.get(outcome, 0.0) + v
    elif target in _COUNTERS:
        if rule.type == "counter" or part == rule.part:  # a histogram's _sum, when it counts tokens
            acc.counters[target] = acc.counters.get(target, 0.0) + v
    elif part == "value" and rule.part in ("num", "den"):
        side = acc.num if rule.part == "num" else acc.den
        side[target] = side.get(target, 0.0) + v
    elif target in _GAUGES:
        old = acc.gauges.get(target)
        acc.gauges[target] = v if old is None else (old + v if rule.gauge_agg == "sum" else max(old, v))
    elif part == "sum" or (part == "value" and rule.part == "sum"):
        acc.dsum[target] = acc.dsum.get(target, 0.0) + v * rule.scale
    elif part == "count" or (part == "value" and rule.part == "count"):
        acc.dcount[target] = acc.dcount.get(target, 0.0) + v
