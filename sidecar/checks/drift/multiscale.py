"""Method 'multiscale': non-overlapping blocks at several time scales, k of the last n blocks, a stated budget.

Every series is tested once per completed block of each scale (default 1, 5 and 30 minutes, blocks aligned to
multiples of their length), so successive looks at one scale see disjoint data: given the reference they are
independent, which is what makes "sustained" count evidence rather than wall time. A series' finding is
active once ``sustained_looks`` of the last ``sustained_of`` blocks of any one scale drifted.

The per-look level of scale s is chosen so that the expected false alarms per model/version and day stay
within ``false_alarms_per_day`` (B), spent equally over the S scales (Bonferroni across scales):

    alarm at a look  <=  P(this look rejects) * P(k-1 of the n-1 before it reject) <= C(n-1, k-1) * a^k
    looks per day at scale s = 86400 / s
    a_s = (B / (S * 86400 / s * C(n-1, k-1))) ** (1 / k), never above p_threshold

and at each look the model/version's features are Benjamini-Hochberg-adjusted together at a_s (under no drift
BH rejects anything with probability at most a_s, so the bound is per model/version, across features). The
effect floors apply on top and only remove alarms. docs/drift.md states the method and its caveats.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import orjson

from sidecar.checks.drift.config import DriftConfig
from sidecar.checks.drift.evaluator import FeatureResult, SinceKey, drift_facts, look_block
from sidecar.checks.drift.persistence import DriftStore, key
from sidecar.checks.drift.registry import SeriesKey
from sidecar.checks.stats.core import benjamini_hochberg
from sidecar.facts import DriftBlock
from sidecar.model import Finding

__all__ = ["MultiScale", "look_level"]

_NS = "drift.looks"


def look_level(cfg: DriftConfig, scale: float) -> float:
    """The per-look level of one scale that keeps the whole model/version within the false-alarm budget."""
    k, n = cfg.sustained_looks, cfg.sustained_of
    looks_per_day = 86400.0 / scale
    a = (cfg.false_alarms_per_day / (len(cfg.scales_secs) * looks_per_day * math.comb(n - 1, k - 1))) ** (1 / k)
    return min(a, cfg.p_threshold)


@dataclass
class _Look:
    """The recent verdicts of one series' test at one scale (oldest first), the figures of each (None when
    restored from a store row that kept only the verdict) and its latest result."""

    bits: deque[bool]
    blocks: deque[DriftBlock | None]
    end: float = -math.inf
    result: FeatureResult | None = None
    q: float = math.nan
    condition: bool = False


class MultiScale:
    """Owns the looks (guarded by the check's lock where ``observe`` could race; evaluate is one thread)."""

    def __init__(self, cfg: DriftConfig, store: DriftStore, check_name: str) -> None:
        self.cfg = cfg
        self.store = store
        self.check_name = check_name
        self.levels = {s: look_level(cfg, s) for s in cfg.scales_secs}
        self.looks: dict[tuple[SinceKey, float], _Look] = {}
        self._scheduled: dict[tuple[SeriesKey, float], float] = {}
        self._dirty: set[SinceKey] = set()

    def due(self, series: SeriesKey, now: float) -> list[tuple[float, float, float]]:
        """(scale, start, end) of each scale's latest completed block not looked at yet; marks them looked at."""
        out: list[tuple[float, float, float]] = []
        for s in self.cfg.scales_secs:
            end = math.floor(now / s) * s
            if end > self._scheduled.get((series, s), -math.inf):
                self._scheduled[(series, s)] = end
                out.append((s, end - s, end))
        return out

    def _look(self, skey: SinceKey, scale: float) -> _Look:
        lk = self.looks.get((skey, scale))
        if lk is None:
            n = self.cfg.sustained_of
            lk = self.looks[(skey, scale)] = _Look(deque(maxlen=n), deque(maxlen=n))
        return lk

    def record(self, model: str, version: str, scale: float, end: float, results: list[FeatureResult]) -> None:
        """One look at one scale for a model/version: BH across its features at that scale's level."""
        tested = [i for i, r in enumerate(results) if r.test in ("ks", "chi2") and not math.isnan(r.p)]
        q_by = dict(zip(tested, benjamini_hochberg([results[i].p for i in tested]), strict=True))
        level = self.levels[scale]
        cfg = self.cfg
        for i, r in enumerate(results):
            skey = (model, version, r.feature, r.test)
            q = q_by.get(i, math.nan)
            if r.test == "missing":
                cond = r.effect >= cfg.missing_ratio_increase
            else:
                floor = cfg.ks_effect_floor if r.test == "ks" else cfg.psi_effect_floor
                cond = not r.insufficient and q < level and r.effect >= floor
            lk = self._look(skey, scale)
            lk.end, lk.result, lk.q, lk.condition = end, r, q, cond
            if not r.insufficient:  # no data is no evidence either way: it does not take a place in the n
                lk.bits.append(cond)
                lk.blocks.append(look_block(r, q, end - scale, end, level, cond))
                self._dirty.add(skey)

    def _confirmed(self, lk: _Look) -> bool:
        return sum(lk.bits) >= self.cfg.sustained_looks

    def findings(
        self, model: str, version: str, now: float, export: Callable[[str, str, FeatureResult, float, bool, bool], None]
    ) -> list[Finding]:
        by_series: dict[SinceKey, dict[float, _Look]] = {}
        for (skey, scale), lk in self.looks.items():
            if skey[0] == model and skey[1] == version and lk.result is not None:
                by_series.setdefault(skey, {})[scale] = lk
        out: list[Finding] = []
        for _skey, per_scale in sorted(by_series.items()):
            confirmed = [s for s in sorted(per_scale) if self._confirmed(per_scale[s])]
            scale = confirmed[0] if confirmed else self._shown_scale(per_scale)
            lk = per_scale[scale]
            r = lk.result
            assert r is not None
            active = bool(confirmed)
            export(model, version, r, lk.q, lk.condition, active)
            floor = (
                self.cfg.missing_ratio_increase
                if r.test == "missing"
                else self.cfg.ks_effect_floor
                if r.test == "ks"
                else self.cfg.psi_effect_floor
            )
            labels = {"model": model, "version": version, "feature": r.feature, "test": r.test}
            out.append(
                Finding(
                    check=self.check_name,
                    kind="drift",
                    labels=labels,
                    active=active,
                    value=None if math.isnan(r.statistic) else r.statistic,
                    threshold=self.levels[scale],
                    p_value=None if math.isnan(lk.q) else lk.q,
                    effect_size=None if math.isnan(r.effect) else r.effect,
                    window_secs=scale,
                    evaluated_at=now,
                    insufficient_data=bool(r.insufficient),
                    facts=drift_facts(
                        r,
                        lk.q,
                        floor,
                        lk.condition,
                        decision="multiscale",
                        now=lk.blocks[-1]
                        if lk.blocks and lk.blocks[-1] is not None and lk.blocks[-1].end == lk.end
                        else look_block(r, lk.q, lk.end - scale, lk.end, self.levels[scale], lk.condition),
                        # What makes it active: the drifting blocks among the last sustained_of, oldest first.
                        evidence=tuple(b for b in lk.blocks if b is not None and b.drifted) if active else (),
                        scale_secs=scale,
                        block_end=lk.end,
                        level=self.levels[scale],
                        looks_drifting=int(sum(lk.bits)),
                        looks=len(lk.bits),
                        sustained_looks=self.cfg.sustained_looks,
                        sustained_of=self.cfg.sustained_of,
                    ),
                    annotations={
                        "runbook": "FeatureMissingValuesHigh.md" if r.test == "missing" else "FeatureDrifting.md",
                        "condition": str(lk.condition).lower(),
                    },
                )
            )
        return out

    def _shown_scale(self, per_scale: dict[float, _Look]) -> float:
        """Nothing confirmed: the smallest scale whose latest block drifted, else the largest one with data."""
        for s in sorted(per_scale):
            if per_scale[s].condition:
                return s
        with_data = [s for s, lk in sorted(per_scale.items()) if lk.result is not None and not lk.result.insufficient]
        return with_data[-1] if with_data else min(per_scale)

    # ---- state -----------------------------------------------------------------------------------
    def persist_rows(self) -> list[tuple[str, str, bytes]]:
        """The verdict bits of the series that took a look since the last save (a restart keeps the count)."""
        rows: list[tuple[str, str, bytes]] = []
        for skey in sorted(self._dirty):
            per = {
                repr(s): [lk.end, [int(b) for b in lk.bits], [_block_row(b) for b in lk.blocks]]
                for (k, s), lk in self.looks.items()
                if k == skey
            }
            rows.append((_NS, key(*skey), orjson.dumps(per)))
        self._dirty.clear()
        return rows

    def load(self, skey: SinceKey, blob: bytes) -> None:
        for s, row in orjson.loads(blob).items():
            scale = float(s)
            if scale not in self.levels:
                continue  # the scales changed in config: that scale's evidence no longer applies
            end, bits = row[0], row[1]
            blocks = row[2] if len(row) > 2 and len(row[2]) == len(bits) else [None] * len(bits)
            lk = self._look(skey, scale)
            lk.end = float(end)
            lk.bits.extend(bool(b) for b in bits)
            lk.blocks.extend(_block(b) for b in blocks)
            series = (skey[0], skey[1], skey[2])
            self._scheduled[(series, scale)] = max(self._scheduled.get((series, scale), -math.inf), lk.end)

    def forget(self, match: Callable[[SinceKey], bool]) -> None:
        for k in [k for k in self.looks if match(k[0])]:
            del self.looks[k]
            self.store.delete(_NS, key(*k[0]))
            self._dirty.discard(k[0])
        for sk in [sk for sk in self._scheduled if match((*sk[0], ""))]:
            del self._scheduled[sk]


def _block_row(b: DriftBlock | None) -> list[object] | None:
    if b is None:
        return None
    row = [b.start, b.end, b.n_cur, b.n_ref, b.statistic, b.effect, b.p_raw, b.q, b.level, b.drifted]
    return [*row, b.dof, b.unseen, b.unseen_ratio]


def _block(row: object) -> DriftBlock | None:
    """A stored block's figures; None for a row this version cannot read (an older sidecar kept only bits)."""
    if not isinstance(row, list) or len(row) not in (10, 13):  # 10: kept before a block had its own details
        return None
    try:
        return DriftBlock(*row)
    except TypeError:
        return None
