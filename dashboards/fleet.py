"""Fleet: drift merged across every sidecar of a model by the generated rules (alerts/fleet.rules.yml): KS D per
feature against its critical value, each replica's share of n, reference-id mismatches, fleet n and PSI, the
business checks merged across replicas (value, baseline, n) and side by side per replica. The recorded names carry
the rules' default windows (docs/fleet.md).
"""

from __future__ import annotations

from grafanalib.core import Dashboard, Template

from dashboards.common import Board, datasource_var, label_var, steps
from sidecar.fleet_rules import FleetRulesOptions, duration

__all__ = ["board", "build"]

_O = FleetRulesOptions()
W = duration(_O.window_secs)
BW, BB = duration(_O.business_window_secs), duration(_O.business_baseline_secs)
FLOOR = repr(_O.ks_effect_floor)
L = "model, version, feature, ref_id"
SEL = 'model=~"$model", version=~"$version", feature=~"$feature"'  # fleet records carry no instance
ISEL = f'instance=~"$instance", {SEL}'
LEG = "{{model}} v{{version}} {{feature}}"
REF = "sidecar_fleet_reference_size"


def _vars() -> list[Template]:
    return [
        datasource_var(),
        label_var("instance", REF, label="Sidecar"),
        label_var("model", REF, label="Model"),
        label_var("version", REF, label="Version", depends='model=~"$model"'),
        label_var("feature", REF, label="Feature", depends='model=~"$model", version=~"$version"'),
    ]


def board() -> Board:
    b = Board(
        uid="triton-sidecar-fleet",
        title="Triton sidecar / Fleet",
        tags=["triton", "sidecar", "drift", "fleet"],
        description=f"Drift merged across every sidecar of a model over the last {W} (docs/fleet.md).",
        variables=_vars(),
    )
    d, crit, n = (
        f"sidecar:fleet_feature_ks_d:{W}",
        f"sidecar:fleet_feature_ks_critical:{W}",
        f"sidecar:fleet_feature_n:delta{W}",
    )
    cn = f"sidecar:fleet_category_n:delta{W}"
    b.row("Fleet verdict")
    b.stat(
        "Fleet features over the critical value",
        "Features whose merged KS D is at least max(effect floor, critical value) now (alert FleetFeatureDrifting "
        "fires after its hold). 0 is the normal state.",
        [(f"count({d}{{{SEL}}} >= on ({L}) clamp_min({crit}{{{SEL}}}, {FLOOR})) or vector(0)", "")],
        unit="short",
        needs="fleet",
        thresholds=steps(("green", None), ("red", 1)),
    )
    b.stat(
        "Reference-id mismatches",
        "Features that sidecars of one model/version bin under more than one reference id: their counts are never "
        "added (alert FleetReferenceMismatch). Expected only during a reference rollout.",
        [
            (
                "count(count by (model, version, feature) (count by (model, version, feature, ref_id) "
                f"({REF}{{{ISEL}}})) > 1) or vector(0)",
                "",
            )
        ],
        unit="short",
        needs="fleet",
        thresholds=steps(("green", None), ("orange", 1)),
    )
    b.stat(
        "Replicas in the verdict",
        f"Most sidecars whose counts entered a feature's merged window ({W}). Fewer than the replicas running "
        "means sidecars restarted inside the window (left out) or stopped reporting.",
        [(f"max(sidecar:fleet_feature_replicas:{W}{{{SEL}}})", "")],
        unit="short",
        needs="fleet",
    )
    b.stat(
        "Smallest fleet n",
        f"Fewest non-missing values merged for a numeric feature over {W}. Below min_samples the fleet alert "
        "does not decide.",
        [(f"min({n}{{{SEL}}})", "")],
        unit="short",
        needs="fleet",
    )
    b.row("Per feature")
    b.timeseries(
        "Fleet KS D against its critical value",
        "Binned KS D of the fleet's merged values against the reference (a lower bound of the exact D, by at most "
        "one bin's mass), with the threshold it must reach: max(effect floor, critical value for n and m).",
        [
            (f"{d}{{{SEL}}}", LEG + " D"),
            (f"clamp_min({crit}{{{SEL}}}, {FLOOR})", LEG + " critical"),
        ],
        unit="short",
        needs="fleet",
    )
    b.timeseries(
        "Fleet chi-square against its critical value",
        "Categorical features: chi-square of the merged category shares against the reference's, with its "
        "Wilson-Hilferty critical value (the alert also needs PSI >= 0.1).",
        [
            (f"sidecar:fleet_category_chi2:{W}{{{SEL}}}", LEG + " chi2"),
            (f"sidecar:fleet_category_chi2_critical:{W}{{{SEL}}}", LEG + " critical"),
        ],
        unit="short",
        needs="fleet",
    )
    b.timeseries(
        "Fleet PSI",
        "Population stability index of the merged bins (numeric) or categories: < 0.1 stable, 0.1-0.25 moderate, "
        "> 0.25 large shift.",
        [
            (f"sidecar:fleet_feature_psi:{W}{{{SEL}}}", LEG),
            (f"sidecar:fleet_category_psi:{W}{{{SEL}}}", LEG),
        ],
        unit="short",
        needs="fleet",
        thresholds=steps(("green", None), ("orange", 0.1), ("red", 0.25)),
    )
    b.timeseries(
        "Fleet n per feature",
        f"Values merged across sidecars over {W} (numeric: non-missing values; categorical: values). A fall "
        "means traffic fell or sidecars dropped out.",
        [(f"{n}{{{SEL}}}", LEG), (f"{cn}{{{SEL}}}", LEG)],
        unit="short",
        needs="fleet",
    )
    b.row("Per replica")
    b.timeseries(
        "Per-replica share of fleet n",
        "Each sidecar's share of the merged count of a feature. Shares far from 1 / replicas mean uneven load "
        "balancing; one replica's share alone cannot move the fleet verdict much.",
        [
            (
                f"sidecar:fleet_feature_count:delta{W}_by_instance{{{ISEL}}} / on ({L}) group_left () "
                f"({n}{{{SEL}}} > 0)",
                "{{instance}} " + LEG,
            ),
            (
                f"sum by (job, instance, {L}) (sidecar:fleet_category:delta{W}_by_instance{{{ISEL}}}) / on ({L}) "
                f"group_left () ({cn}{{{SEL}}} > 0)",
                "{{instance}} " + LEG,
            ),
        ],
        unit="percentunit",
        needs="fleet",
        stack=True,
        max1=True,
    )
    b.timeseries(
        "Sidecars per reference id",
        "How many sidecars bin each feature under each reference id. More than one id per feature is a "
        "mismatch (another file, other bin settings, or a pinned reference).",
        [(f"count by ({L}) ({REF}{{{ISEL}}})", LEG + " {{ref_id}}")],
        unit="short",
        needs="fleet",
    )
    b.timeseries(
        "Values not binned",
        "Values each sidecar did not count in the fleet bins, by reason (no_reference, rolling_reference, "
        "not_in_reference, series_limit). They are missing from the fleet verdict.",
        [
            (
                'sum by (instance, reason) (rate(sidecar_fleet_values_unbinned_total{instance=~"$instance"}'
                "[$__rate_interval]))",
                "{{instance}} {{reason}}",
            )
        ],
        unit="ops",
        needs="fleet",
    )
    b.row("Business checks across replicas")
    fsel = 'model=~"$model", version=~"$version"'
    b.timeseries(
        "Fleet business value and baseline",
        f"Each business check merged over every sidecar's last {BW} (mean: sum of sums / sum of counts; ratio; "
        f"rate; a quantile from the merged bins), and the same over the {BB} before (from the recorded windows). "
        "Alert: FleetBusinessCheckBreached.",
        [
            (f"sidecar:fleet_business_value:{BW}{{{fsel}}}", "{{check}} {{model}} v{{version}}"),
            (f"sidecar:fleet_business_baseline:{BB}{{{fsel}}}", "{{check}} {{model}} v{{version}} baseline"),
        ],
        unit="short",
        needs="fleet",
    )
    b.timeseries(
        "Fleet business n and replicas",
        f"Events each business check merged over {BW}, and how many sidecars took part (a restarted sidecar "
        "sits out the window that holds its restart).",
        [
            (f"sidecar:fleet_business_n:delta{BW}{{{fsel}}}", "{{check}} {{model}} v{{version}} n"),
            (f"sidecar:fleet_business_replicas:{BW}{{{fsel}}}", "{{check}} {{model}} v{{version}} replicas"),
        ],
        unit="short",
        needs="fleet",
    )
    bsel = 'instance=~"$instance", model=~"$model", version=~"$version"'
    b.timeseries(
        "Business value across replicas",
        "Lowest and highest current value of each business check over the replicas (each sidecar's own window). "
        "A replica far from the others points at that replica, not at the model.",
        [
            (f"min by (check, model, version) (sidecar_business_value{{{bsel}}})", "{{check}} {{model}} min"),
            (f"max by (check, model, version) (sidecar_business_value{{{bsel}}})", "{{check}} {{model}} max"),
        ],
        unit="short",
        needs="business",
    )
    b.timeseries(
        "Replicas where a business condition holds",
        "Sidecars whose business check condition holds now, per check. All replicas at once is a model-wide "
        "change; one replica alone is a local one.",
        [(f"count by (check, model, version) (sidecar_business_condition{{{bsel}}} == 1)", "{{check}} {{model}}")],
        unit="short",
        needs="business",
    )
    return b


def build() -> Dashboard:
    return board().build()
