"""The cache hit-ratio SLA: a route group's hit ratio over the period (a UTC day by default) against a target.

Every evaluation, per group: the ratio so far, multi-window burn rates (burn rate = miss ratio over a window /
(1 - target); a pair fires when its long and its short window both exceed its factor, the SRE workbook's
multiwindow alert), and a projection of where the period ends (the counts so far plus the rest of the period at
the last ``projection_secs``' rates). One finding per group for the burn (``edge_hit_ratio_burn``) and one for
the last complete period (``edge_hit_ratio_period``: active when it ended below target). Gauges carry the same
figures for the rules in alerts/edge.rules.yml.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge

from sidecar.checks.edge.config import BurnWindow, HitRatioSlaConfig
from sidecar.checks.edge.series import EdgeSeries, period_bounds
from sidecar.component import Passive, Role
from sidecar.facts_edge import EdgeSlaFacts
from sidecar.model import Finding

__all__ = ["HitRatioSla"]

RUNBOOK = "EdgeHitRatioBurn.md"
RUNBOOK_PERIOD = "EdgeHitRatioPeriod.md"


def _burn(hits: int, total: int, target: float) -> float | None:
    return None if total == 0 else (1.0 - hits / total) / (1.0 - target)


class HitRatioSla(Passive):
    name = "edge_hit_ratio"
    role = Role.CHECK

    def __init__(self, cfg: HitRatioSlaConfig, *, series: EdgeSeries, registry: CollectorRegistry) -> None:
        self.cfg = cfg
        self.series = series
        lbl = ["route_group"]
        self._ratio = Gauge(
            "sidecar_edge_hit_ratio_period", "Cache hit ratio of the SLA period so far.", lbl, registry=registry
        )
        self._target = Gauge("sidecar_edge_hit_ratio_target", "The SLA's hit-ratio target.", lbl, registry=registry)
        self._projected = Gauge(
            "sidecar_edge_hit_ratio_projected",
            "Where the period's hit ratio ends at the recent rates.",
            lbl,
            registry=registry,
        )
        self._burn_g = Gauge(
            "sidecar_edge_hit_ratio_burn_rate",
            "Miss ratio over a window divided by the SLA's error budget (1 - target).",
            [*lbl, "window_secs"],
            registry=registry,
        )
        self._condition = Gauge(
            "sidecar_edge_hit_ratio_condition",
            "1 while a burn-rate pair fires (check edge_hit_ratio_burn) or the last period missed the target "
            "(edge_hit_ratio_period).",
            ["check", *lbl],
            registry=registry,
        )

    def _groups(self) -> list[str]:
        if "*" in self.cfg.groups:
            return self.series.groups()
        return list(self.cfg.groups)

    def evaluate(self, now: float) -> list[Finding]:
        out: list[Finding] = []
        for g in self._groups():
            out.extend(self._evaluate_group(g, now))
        return out

    def _evaluate_group(self, g: str, now: float) -> list[Finding]:
        cfg, s = self.cfg, self.series
        end = (int(now // 60) + 1) * 60  # whole minutes, the current one included
        p_start, p_end = period_bounds(now, cfg.period)
        hits, total = s.hits(g, p_start, end)
        ratio = hits / total if total else None
        self._target.labels(g).set(cfg.target)
        if ratio is not None:
            self._ratio.labels(g).set(ratio)
        ph, pt = s.hits(g, end - cfg.projection_secs, end)
        projected: float | None = None
        if pt:
            rest = max(0.0, p_end - now) / cfg.projection_secs
            projected = (hits + ph * rest) / (total + pt * rest)
            self._projected.labels(g).set(projected)
        fired: tuple[BurnWindow, float, float] | None = None
        for pair in cfg.burn_windows:
            lh, lt = s.hits(g, end - pair.long_secs, end)
            sh, st = s.hits(g, end - pair.short_secs, end)
            bl, bs = _burn(lh, lt, cfg.target), _burn(sh, st, cfg.target)
            for secs, b in ((pair.long_secs, bl), (pair.short_secs, bs)):
                if b is not None:
                    self._burn_g.labels(g, f"{secs:g}").set(b)
            enough = lt >= cfg.min_requests and st >= cfg.min_requests
            if fired is None and enough and bl is not None and bs is not None and min(bl, bs) > pair.factor:
                fired = (pair, bl, bs)
        w: BurnWindow | None = cfg.burn_windows[0] if cfg.burn_windows else None
        burn_long: float | None = None
        burn_short: float | None = None
        if fired is not None:
            w, burn_long, burn_short = fired
        burn = Finding(
            check="edge_hit_ratio_burn",
            kind="edge_sla",
            labels={"route_group": g, "check": "edge_hit_ratio_burn"},
            active=fired is not None,
            value=ratio,
            threshold=cfg.target,
            window_secs=w.long_secs if w is not None else None,
            severity=w.severity if fired is not None and w is not None else "warning",
            evaluated_at=now,
            insufficient_data=total < cfg.min_requests,
            facts=EdgeSlaFacts(
                phase="burn",
                period=cfg.period,
                target=cfg.target,
                ratio=ratio,
                hits=hits,
                requests=total,
                period_start=p_start,
                period_end=p_end,
                runbook=RUNBOOK,
                projected=projected,
                burn_long=burn_long,
                burn_short=burn_short,
                long_secs=w.long_secs if w is not None else None,
                short_secs=w.short_secs if w is not None else None,
                factor=w.factor if w is not None else None,
                min_requests=cfg.min_requests,
            ),
        )
        self._condition.labels("edge_hit_ratio_burn", g).set(1 if burn.active else 0)
        prev_start, prev_end = period_bounds(p_start - 1, cfg.period)
        qh, qt = s.hits(g, prev_start, prev_end)
        q_ratio = qh / qt if qt else None
        missed = q_ratio is not None and qt >= cfg.min_requests and q_ratio < cfg.target
        period = Finding(
            check="edge_hit_ratio_period",
            kind="edge_sla",
            labels={"route_group": g, "check": "edge_hit_ratio_period"},
            active=missed,
            value=q_ratio,
            threshold=cfg.target,
            window_secs=prev_end - prev_start,
            severity="warning",
            evaluated_at=now,
            insufficient_data=qt < cfg.min_requests,
            facts=EdgeSlaFacts(
                phase="missed",
                period=cfg.period,
                target=cfg.target,
                ratio=q_ratio,
                hits=qh,
                requests=qt,
                period_start=prev_start,
                period_end=prev_end,
                runbook=RUNBOOK_PERIOD,
                min_requests=cfg.min_requests,
            ),
        )
        self._condition.labels("edge_hit_ratio_period", g).set(1 if missed else 0)
        return [burn, period]
