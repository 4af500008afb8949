"""The business checks across replicas: recording and alerting rules over the fleet business counters
(sidecar_fleet_business_*), one group in ``fleet.rules.yml`` (``sidecar rules --fleet``).

Per sidecar, a counter's increase over the window W is exact (``x - (x offset W or x * 0)``, a sidecar whose
count reset inside W left out, as for the drift bins). Per check, model and version: n, the value (mean = sum of
sums / sum of counts, ratio = sum of sums / sum of denominators, rate = sum of sums / W, a quantile =
``histogram_quantile`` of the merged bins, per reference id so bins of different edges never add), a baseline
from the recorded window figures of the baseline span before the window (``sum_over_time`` of a subquery at
step W: cheap, and approximate at its edges by up to one evaluation interval), the relative change, and the
alert FleetBusinessCheckBreached (no ``instance`` label) on the check's own threshold, direction and minimum
events, which each sidecar exports as gauges. docs/fleet.md explains.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["BusinessRulesOptions", "business_group"]

L = "check, model, version"
LR = "check, model, version, ref_id"
_RUNBOOKS = "https://github.com/triton-sidecar/triton-sidecar/blob/main/docs/runbooks"


@dataclass(frozen=True)
class BusinessRulesOptions:
    window: str = "1h"  # W as a PromQL duration (the business checks' default window_secs)
    window_secs: float = 3600.0
    baseline: str = "168h"  # B: the span before W the baseline covers (names the records)
    baseline_range: str = "604799s"  # B less one second: the subquery's range, so that it holds B / W points on
    # Prometheus 2.x (ranges closed at both ends) and VictoriaMetrics (open at the start) alike
    quantiles: tuple[float, ...] = (0.5, 0.9, 0.95, 0.99)  # the quantile checks' q the rules cover
    for_: str = "5m"
    interval: str = "30s"


def _delta(metric: str, w: str, reset_of: str, labels: str) -> str:
    return (
        f"({metric} - ({metric} offset {w} or {metric} * 0))"
        f" unless on (job, instance, {labels}) (max by (job, instance, {labels}) (resets({reset_of}[{w}])) > 0)"
    )


def _any(*exprs: str) -> str:
    return "(" + ") or (".join(exprs) + ")"


def business_group(o: BusinessRulesOptions | None = None) -> dict[str, Any]:
    o = o or BusinessRulesOptions()
    w, b = o.window, o.baseline
    ev = "sidecar_fleet_business_events_total"
    n, s, d, bk = (
        f"sidecar:fleet_business_n:delta{w}",
        f"sidecar:fleet_business_sum:delta{w}",
        f"sidecar:fleet_business_denominator:delta{w}",
        f"sidecar:fleet_business_bucket:delta{w}",
    )
    val, base, bn = (
        f"sidecar:fleet_business_value:{w}",
        f"sidecar:fleet_business_baseline:{b}",
        (f"sidecar:fleet_business_baseline_n:{b}"),
    )
    chk = "sidecar:fleet_business_check"

    def of(agg: str, extra: str = "") -> str:
        return f' and on (check) {chk}{{aggregate="{agg}"{extra}}}'

    def past(x: str) -> str:  # the recorded window figures of the baseline span, ending where W starts
        return f"sum_over_time({x}[{o.baseline_range}:{w}] offset {w})"

    records: list[tuple[str, str]] = [
        (f"{n}_by_instance", _delta(ev, w, ev, L)),
        (f"{s}_by_instance", _delta("sidecar_fleet_business_sum_total", w, ev, L)),
        (f"{d}_by_instance", _delta("sidecar_fleet_business_denominator_total", w, ev, L)),
        (
            f"{bk}_by_instance",
            _delta("sidecar_fleet_business_bin_bucket", w, "sidecar_fleet_business_bin_count", LR),
        ),
        (n, f"sum by ({L}) ({n}_by_instance)"),
        (s, f"sum by ({L}) ({s}_by_instance)"),
        (d, f"sum by ({L}) ({d}_by_instance)"),
        (bk, f"sum by ({LR}, le) ({bk}_by_instance)"),
        (f"sidecar:fleet_business_replicas:{w}", f"count by ({L}) ({n}_by_instance)"),
        (chk, "max by (check, aggregate, quantile, compare, direction) (sidecar_fleet_business_threshold)"),
        ("sidecar:fleet_business_min_events", "max by (check, window) (sidecar_fleet_business_min_events)"),
        # the fleet's value over W, per aggregate (one expression: promtool refuses two rules of one name)
        (
            val,
            _any(
                f"{s} / on ({L}) ({n} > 0)" + of("mean"),
                f"{s} / on ({L}) ({d} != 0)" + of("ratio"),
                f"{s} / {o.window_secs!r}" + of("rate"),
                *(f"histogram_quantile({q!r}, {bk})" + of("quantile", f', quantile="{q!r}"') for q in o.quantiles),
            ),
        ),
        # the baseline: the same figures over the span B before W, from the recorded windows
        (bn, past(n)),
        (
            base,
            _any(
                f"{past(s)} / on ({L}) ({past(n)} > 0)" + of("mean"),
                f"{past(s)} / on ({L}) ({past(d)} != 0)" + of("ratio"),
                f"{past(s)} / {o.window_secs!r} / on ({L}) count_over_time({s}[{o.baseline_range}:{w}] offset {w})"
                + of("rate"),
                *(
                    f"histogram_quantile({q!r}, {past(bk)})" + of("quantile", f', quantile="{q!r}"')
                    for q in o.quantiles
                ),
            ),
        ),
        (f"sidecar:fleet_business_change:{w}", f"({val} - on ({LR}) {base}) / on ({LR}) abs({base})"),
    ]
    enough = f'on ({L}) {n} >= on (check) group_left () sidecar:fleet_business_min_events{{window="current"}}'
    enough_base = f'on ({L}) {bn} >= on (check) group_left () sidecar:fleet_business_min_events{{window="baseline"}}'

    def thr(compare: str, direction: str) -> str:
        t = f'{chk}{{compare="{compare}", direction="{direction}"}}'
        return f"on (check) group_left () {'(-1 * ' + t + ')' if compare == 'relative' and direction == 'down' else t}"

    conditions = [
        f"{val} > {thr('absolute', 'up')} and {enough}",
        f"{val} < {thr('absolute', 'down')} and {enough}",
        f"sidecar:fleet_business_change:{w} > {thr('relative', 'up')} and {enough} and {enough_base}",
        f"sidecar:fleet_business_change:{w} < {thr('relative', 'down')} and {enough} and {enough_base}",
    ]
    alerts = [
        {
            "alert": "FleetBusinessCheckBreached",
            "expr": _any(*conditions),
            "for": o.for_,
            "labels": {"severity": "warning", "source": "fleet"},
            "annotations": {
                "summary": "[WARNING] business check {{ $labels.check }} of {{ $labels.model }} "
                'v{{ $labels.version }} breached across the fleet ({{ $value | printf "%.4g" }})',
                "description": f"Merged over every sidecar's last {w}: the check's value (absolute compare) or its "
                f"change against the {b} before (relative compare) is past the check's threshold in its "
                "direction, with at least its minimum events. Per-replica findings carry the check's own name.",
                "runbook_url": f"{_RUNBOOKS}/FleetBusinessCheckBreached.md",
            },
        },
        {
            "alert": "FleetBusinessSettingsMismatch",
            "expr": "count by (check) (sidecar:fleet_business_check) > 1 or on (check) "
            "(max by (check) (sidecar_fleet_business_threshold) != min by (check) (sidecar_fleet_business_threshold))",
            "for": "10m",
            "labels": {"severity": "warning", "source": "fleet"},
            "annotations": {
                "summary": "[WARNING] sidecars disagree on the settings of business check {{ $labels.check }}",
                "description": "Sidecars export the same business check with another aggregate, quantile, compare, "
                "direction or threshold: the fleet verdict for it is not one check's.",
                "runbook_url": f"{_RUNBOOKS}/FleetBusinessSettingsMismatch.md",
            },
        },
    ]
    return {
        "name": "sidecar-fleet-business",
        "interval": o.interval,
        "rules": [{"record": r, "expr": e} for r, e in records] + alerts,
    }
