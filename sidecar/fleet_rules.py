"""Recording and alerting rules that merge the fleet bins (sidecar_fleet_*) of every sidecar in PromQL, for
Prometheus and vmalert alike: ``sidecar rules --fleet [--out DIR]`` writes ``fleet.rules.yml``.

Per sidecar and window W, a counter's increase is ``x - (x offset W or x * 0)``: exact (no extrapolation, so bin
counts add exactly across sidecars) and a series born inside the window counts whole. A sidecar whose count
reset inside the window (a restart) is left out of that window rather than mixed in half. Then, per model,
version, feature and reference id: n, the fleet's CDF at each edge, KS D (the largest gap to the reference's
CDF at the edges: a lower bound of the exact D, below it by at most one bin's mass), PSI over the same bins,
the KS critical value for n and the reference size m at the per-look level the false-alarm budget allows, and
the alerts FleetFeatureDrifting (no ``instance`` label) and FleetReferenceMismatch. docs/fleet.md explains.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist
from typing import Any

import yaml

from sidecar.checks.drift.config import DriftConfig
from sidecar.checks.fleet.bins import PSI_EPS
from sidecar.fleet_business_rules import BusinessRulesOptions, business_group

__all__ = [
    "FleetRulesOptions",
    "critical_coefficient",
    "duration",
    "fleet_rules",
    "normal_quantile",
    "per_look_level",
    "write",
]

L = "model, version, feature, ref_id"
_RUNBOOKS = "https://github.com/triton-sidecar/triton-sidecar/blob/main/docs/runbooks"
_DRIFT = DriftConfig()


@dataclass(frozen=True)
class FleetRulesOptions:
    window_secs: float = 1800.0  # W: the span of current data each look merges
    features: int = 20  # features per model/version the budget is shared across (Bonferroni)
    false_alarms_per_day: float = _DRIFT.false_alarms_per_day  # B, per model/version (docs/drift.md)
    # Lower than the per-sidecar check's 0.05: the fleet's merged window has no block or sketch noise and no
    # routing skew for the floor to absorb, and its false alarms are the critical value's (docs/drift.md, Fleet).
    ks_effect_floor: float = 0.02
    psi_effect_floor: float = _DRIFT.psi_effect_floor  # categorical: the smallest PSI that alerts
    min_samples: int = _DRIFT.min_samples
    for_secs: float = 300.0  # how long the condition must hold before the alert fires
    interval_secs: float = 30.0  # the rule group's evaluation interval
    mismatch_for_secs: float = 600.0  # how long sidecars must disagree on a reference before FleetReferenceMismatch
    business_window_secs: float = 3600.0  # the business checks' window across replicas
    business_baseline_secs: float = 7 * 86400.0  # the span before that window their baseline covers

    def __post_init__(self) -> None:
        for name in ("window_secs", "for_secs", "interval_secs", "mismatch_for_secs", "business_window_secs"):
            duration(getattr(self, name), name)
        if self.business_baseline_secs < self.business_window_secs + 1:
            raise ValueError("business_baseline_secs: must be more than business_window_secs")
        if self.features < 1:
            raise ValueError(f"features: must be at least 1, got {self.features}")
        if not 0 < self.false_alarms_per_day <= 24:
            raise ValueError(f"false_alarms_per_day: must be in (0, 24], got {self.false_alarms_per_day}")
        if not 0 <= self.ks_effect_floor <= 1:
            raise ValueError(f"ks_effect_floor: must be in [0, 1], got {self.ks_effect_floor}")


def duration(secs: float, name: str = "duration") -> str:
    """A PromQL duration: 30m, 2h, 45s."""
    s = round(secs) if math.isfinite(secs) else 0
    if s <= 0 or abs(secs - s) > 1e-9:
        raise ValueError(f"{name}: must be a whole positive number of seconds, got {secs}")
    for unit, size in (("h", 3600), ("m", 60)):
        if s % size == 0:
            return f"{s // size}{unit}"
    return f"{s}s"


def per_look_level(o: FleetRulesOptions) -> float:
    """The level of one look at one feature: B spread over the day's disjoint windows and the features,
    a = B / (features * 86400 / W) (Bonferroni; the drift check's budget, one scale, no sustain rule)."""
    return o.false_alarms_per_day / (o.features * 86400.0 / o.window_secs)


def normal_quantile(alpha: float) -> float:
    """z with P(Z > z) = alpha: the Wilson-Hilferty chi-square quantile k (1 - 2/(9k) + z sqrt(2/(9k)))^3 uses it
    (above the exact quantile at the default level: by 9% at 1 degree of freedom, under 1.5% from 10)."""
    return float(NormalDist().inv_cdf(1.0 - alpha))


def critical_coefficient(alpha: float) -> float:
    """c(a) of the asymptotic two-sample KS critical value D_crit = c(a) * sqrt((n + m) / (n * m))."""
    return math.sqrt(-math.log(alpha / 2.0) / 2.0)


def _delta(metric: str, w: str, reset_of: str) -> str:
    return (
        f"({metric} - ({metric} offset {w} or {metric} * 0))"
        f" unless on (job, instance, {L}) (max by (job, instance, {L}) (resets({reset_of}[{w}])) > 0)"
    )


def _lower(cdf: str) -> str:
    """The CDF at each bin's lower edge (0 for the first bin), on the reference's (le, lo) pairs."""
    prev = f'label_replace(label_replace({cdf}, "lo", "$1", "le", "(.*)"), "le", "", "le", ".*")'
    ref = "sidecar:fleet_reference_cdf"
    return f'((({ref} * 0) + on ({L}, lo) group_left () {prev}) or ({ref}{{lo="-Inf"}} * 0))'


def fleet_rules(o: FleetRulesOptions | None = None) -> dict[str, Any]:
    o = o or FleetRulesOptions()
    w = duration(o.window_secs)
    alpha = per_look_level(o)
    c = critical_coefficient(alpha)
    n, cdf, d, crit = (
        f"sidecar:fleet_feature_n:delta{w}",
        f"sidecar:fleet_feature_cdf:{w}",
        f"sidecar:fleet_feature_ks_d:{w}",
        f"sidecar:fleet_feature_ks_critical:{w}",
    )
    p, q = f"sidecar:fleet_feature_bin_share:{w}", "sidecar:fleet_reference_bin_share"
    eps = repr(PSI_EPS)
    psi = (
        f"sum by ({L}) ((clamp_min({p}, {eps}) - on ({L}, le) clamp_min({q}, {eps}))"
        f" * ln(clamp_min({p}, {eps}) / on ({L}, le) clamp_min({q}, {eps})))"
    )
    cp, cq = f"sidecar:fleet_category_share:{w}", "sidecar:fleet_reference_category_share"
    cpsi = (
        f"sum by ({L}) ((clamp_min({cp}, {eps}) - on ({L}, category) clamp_min({cq}, {eps}))"
        f" * ln(clamp_min({cp}, {eps}) / on ({L}, category) clamp_min({cq}, {eps})))"
    )
    chi2, dof = f"sidecar:fleet_category_chi2:{w}", "sidecar:fleet_reference_category_dof"
    chi2_crit = f"sidecar:fleet_category_chi2_critical:{w}"
    z = normal_quantile(alpha)
    records = [
        # per sidecar: exact increases over W, a sidecar that restarted inside W left out
        (
            f"sidecar:fleet_feature_bucket:delta{w}_by_instance",
            _delta("sidecar_fleet_feature_bucket", w, "sidecar_fleet_feature_count"),
        ),
        (
            f"sidecar:fleet_feature_count:delta{w}_by_instance",
            _delta("sidecar_fleet_feature_count", w, "sidecar_fleet_feature_count"),
        ),
        (
            f"sidecar:fleet_category:delta{w}_by_instance",
            _delta("sidecar_fleet_category_total", w, "sidecar_fleet_category_total"),
        ),
        # the fleet
        (
            f"sidecar:fleet_feature_bucket:delta{w}",
            f"sum by ({L}, le) (sidecar:fleet_feature_bucket:delta{w}_by_instance)",
        ),
        (n, f"sum by ({L}) (sidecar:fleet_feature_count:delta{w}_by_instance)"),
        (f"sidecar:fleet_feature_replicas:{w}", f"count by ({L}) (sidecar:fleet_feature_count:delta{w}_by_instance)"),
        (cdf, f"sidecar:fleet_feature_bucket:delta{w} / on ({L}) group_left () ({n} > 0)"),
        ("sidecar:fleet_reference_cdf", f"max by ({L}, le, lo) (sidecar_fleet_reference_cdf)"),
        ("sidecar:fleet_reference_size", f"max by ({L}) (sidecar_fleet_reference_size)"),
        (d, f"max by ({L}) (abs({cdf} - on ({L}, le) sidecar:fleet_reference_cdf))"),
        (crit, f"{c!r} * sqrt(({n} + sidecar:fleet_reference_size) / ({n} * sidecar:fleet_reference_size))"),
        (p, f"{cdf} - on ({L}, le) {_lower(cdf)}"),
        (q, f"sidecar:fleet_reference_cdf - on ({L}, le) {_lower('sidecar:fleet_reference_cdf')}"),
        (f"sidecar:fleet_feature_psi:{w}", psi),
        # categorical features: shares per category bin and PSI
        (f"sidecar:fleet_category_n:delta{w}", f"sum by ({L}) (sidecar:fleet_category:delta{w}_by_instance)"),
        (
            cp,
            f"sum by ({L}, category) (sidecar:fleet_category:delta{w}_by_instance)"
            f" / on ({L}) group_left () (sidecar:fleet_category_n:delta{w} > 0)",
        ),
        (cq, f"max by ({L}, category) (sidecar_fleet_reference_share)"),
        (f"sidecar:fleet_category_psi:{w}", cpsi),
        # chi-square over the bins the reference holds, its degrees of freedom and critical value
        (
            chi2,
            f"sidecar:fleet_category_n:delta{w} * on ({L}) sum by ({L}) (({cp} - on ({L}, category) ({cq} > 0)) ^ 2"
            f" / on ({L}, category) ({cq} > 0))",
        ),
        (dof, f"count by ({L}) ({cq} > 0) - 1"),
        (chi2_crit, f"{dof} * (1 - 2 / (9 * {dof}) + {z!r} * sqrt(2 / (9 * {dof}))) ^ 3"),
    ]
    floor = repr(o.ks_effect_floor)
    alerts = [
        {
            "alert": "FleetFeatureDrifting",
            "expr": f"{d} >= clamp_min({crit}, {floor}) and on ({L}) {n} >= {o.min_samples}",
            "for": duration(o.for_secs),
            "labels": {"severity": "warning", "source": "fleet", "test": "ks"},
            "annotations": {
                "summary": "[WARNING] feature {{ $labels.feature }} of {{ $labels.model }} v{{ $labels.version }} "
                'drifts across the fleet (binned KS D {{ $value | printf "%.3f" }})',
                "description": f"Merged over every sidecar's last {w}, the feature's CDF at the reference's "
                f"quantile edges is at least max({floor}, the KS critical value at level {alpha:.3g}) away from "
                f"the reference's (reference {{{{ $labels.ref_id }}}}). D from bins is a lower bound of the exact "
                f"D (below it by at most one bin's mass). Per-replica findings: FeatureDrifting.",
                "runbook_url": f"{_RUNBOOKS}/FleetFeatureDrifting.md",
            },
        },
        {
            "alert": "FleetFeatureDrifting",
            "expr": f"{chi2} >= {chi2_crit} and on ({L}) sidecar:fleet_category_psi:{w} >= {o.psi_effect_floor!r}"
            f" and on ({L}) sidecar:fleet_category_n:delta{w} >= {o.min_samples}",
            "for": duration(o.for_secs),
            "labels": {"severity": "warning", "source": "fleet", "test": "chi2"},
            "annotations": {
                "summary": "[WARNING] feature {{ $labels.feature }} of {{ $labels.model }} v{{ $labels.version }} "
                'drifts across the fleet (chi-square {{ $value | printf "%.1f" }})',
                "description": f"Merged over every sidecar's last {w}, the feature's category shares differ from the "
                f"reference's (reference {{{{ $labels.ref_id }}}}): chi-square over the reference's categories at "
                f"least its critical value at level {alpha:.3g} (Wilson-Hilferty, conservative) and PSI at least "
                f"{o.psi_effect_floor!r}. Per-replica findings: FeatureDrifting.",
                "runbook_url": f"{_RUNBOOKS}/FleetFeatureDrifting.md",
            },
        },
        {
            "alert": "FleetReferenceMismatch",
            "expr": "count by (model, version, feature) (count by (model, version, feature, ref_id) "
            "(sidecar_fleet_reference_size)) > 1",
            "for": duration(o.mismatch_for_secs),
            "labels": {"severity": "warning", "source": "fleet"},
            "annotations": {
                "summary": "[WARNING] sidecars of {{ $labels.model }} v{{ $labels.version }} bin "
                "{{ $labels.feature }} against {{ $value }} different references",
                "description": "Sidecars of one model/version export fleet bins under different reference ids "
                "(a different reference file, bin count, or a pinned reference each sidecar made itself): "
                "their counts are never added, and the fleet verdict covers each reference's sidecars apart.",
                "runbook_url": f"{_RUNBOOKS}/FleetReferenceMismatch.md",
            },
        },
    ]
    return {
        "groups": [
            {
                "name": "sidecar-fleet-drift",
                "interval": duration(o.interval_secs),
                "rules": [{"record": r, "expr": e} for r, e in records] + alerts,
            },
            business_group(
                BusinessRulesOptions(
                    window=duration(o.business_window_secs, "business_window_secs"),
                    window_secs=o.business_window_secs,
                    baseline=duration(o.business_baseline_secs, "business_baseline_secs"),
                    baseline_range=duration(o.business_baseline_secs - 1, "business_baseline_secs"),
                    for_=duration(o.for_secs),
                    interval=duration(o.interval_secs),
                )
            ),
        ]
    }


def write(out_dir: Path, o: FleetRulesOptions | None = None) -> Path:
    o = o or FleetRulesOptions()
    head = (
        "# Generated by `sidecar rules --fleet` (sidecar/fleet_rules.py): do not edit; docs/fleet.md explains.\n"
        f"# Window {duration(o.window_secs)}, per-look level {per_look_level(o):.4g} (budget "
        f"{o.false_alarms_per_day:.4g}/day per model/version over {o.features} features), "
        f"critical coefficient {critical_coefficient(per_look_level(o)):.6f}.\n"
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "fleet.rules.yml"
    path.write_text(head + yaml.safe_dump(fleet_rules(o), sort_keys=False, width=1000))
    return path
