"""The latency tail: p99.9 of a hop's latency over a window, against an absolute bound and against the window
before it, so a tail that grows fires even while p99 (and the mean) improve. The finding reports p50, p99 and
p99.9 now and then, so the alert says which way each moved."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge

from sidecar.checks.edge.config import TailConfig
from sidecar.checks.edge.series import EdgeSeries
from sidecar.component import Passive, Role
from sidecar.facts_edge import EdgeTailFacts
from sidecar.model import Finding

__all__ = ["TailLatency"]

RUNBOOK = "EdgeTailLatency.md"
_QS = (0.5, 0.99, 0.999)


class TailLatency(Passive):
    name = "edge_tail"
    role = Role.CHECK

    def __init__(self, cfg: TailConfig, *, series: EdgeSeries, registry: CollectorRegistry) -> None:
        self.cfg = cfg
        self.series = series
        self._ratio = Gauge(
            "sidecar_edge_tail_ratio",
            "p99.9 over the tail window divided by p99.9 over the baseline window before it.",
            ["route_group", "hop"],
            registry=registry,
        )
        self._condition = Gauge(
            "sidecar_edge_tail_condition", "1 while the tail check fires.", ["route_group", "hop"], registry=registry
        )

    def evaluate(self, now: float) -> list[Finding]:
        groups = self.series.groups() if "*" in self.cfg.groups else self.cfg.groups
        return [self._one(g, now) for g in groups]

    def _one(self, g: str, now: float) -> Finding:
        cfg = self.cfg
        end = now + 60
        start = end - cfg.window_secs
        n, (p50, p99, p999) = self.series.latency_quantiles(g, cfg.hop, start, end, _QS)
        nb, (b50, b99, b999) = self.series.latency_quantiles(g, cfg.hop, start - cfg.baseline_secs, start, _QS)
        enough = n >= cfg.min_requests
        over_threshold = enough and cfg.threshold_secs is not None and p999 is not None and p999 > cfg.threshold_secs
        ratio = p999 / b999 if p999 is not None and b999 else None
        over_ratio = (
            enough
            and nb >= cfg.min_requests
            and cfg.max_ratio is not None
            and ratio is not None
            and ratio > cfg.max_ratio
        )
        if ratio is not None:
            self._ratio.labels(g, cfg.hop).set(ratio)
        active = over_threshold or over_ratio
        self._condition.labels(g, cfg.hop).set(1 if active else 0)
        reason = (
            "both"
            if over_threshold and over_ratio
            else "threshold"
            if over_threshold
            else "ratio"
            if over_ratio
            else "none"
        )
        return Finding(
            check="edge_tail_latency",
            kind="edge_tail",
            labels={"route_group": g, "hop": cfg.hop, "check": "edge_tail_latency"},
            active=active,
            value=p999,
            threshold=cfg.threshold_secs,
            baseline=b999,
            window_secs=cfg.window_secs,
            severity=cfg.severity,
            evaluated_at=now,
            insufficient_data=not enough,
            facts=EdgeTailFacts(
                hop=cfg.hop,
                reason=reason,
                requests=n,
                window_secs=cfg.window_secs,
                baseline_secs=cfg.baseline_secs,
                min_requests=cfg.min_requests,
                runbook=RUNBOOK,
                p50=p50,
                p99=p99,
                p999=p999,
                base_requests=nb,
                base_p50=b50,
                base_p99=b99,
                base_p999=b999,
                threshold_s=cfg.threshold_secs,
                max_ratio=cfg.max_ratio,
            ),
        )
