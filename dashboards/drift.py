"""Drift: per model, version and feature, the test statistic, p-value, effect size, drifting flags, NaN rate."""

from __future__ import annotations

from grafanalib.core import Dashboard

from dashboards.common import Board, datasource_var, label_var, steps

__all__ = ["board", "build"]

SEL = 'instance=~"$instance", model=~"$model", version=~"$version", feature=~"$feature"'
LEG = "{{model}} v{{version}} {{feature}}"
BY = "model, version, feature"


def board() -> Board:
    b = Board(
        uid="triton-sidecar-drift",
        title="Triton sidecar / Drift",
        tags=["triton", "sidecar", "drift"],
        description="Per model, version and feature: is the current window still like the reference?",
        variables=[
            datasource_var(),
            label_var("instance", "sidecar_drift_statistic", label="Sidecar"),
            label_var("model", "sidecar_drift_statistic", label="Model", depends='instance=~"$instance"'),
            label_var(
                "version", "sidecar_drift_statistic", label="Version", depends='instance=~"$instance", model=~"$model"'
            ),
            label_var(
                "feature",
                "sidecar_drift_statistic",
                label="Feature",
                depends='instance=~"$instance", model=~"$model", version=~"$version"',
            ),
        ],
    )
    b.row("Summary")
    b.stat(
        "Features drifting",
        "Features whose drift condition has held for sustained_secs (alert FeatureDrifting). 0 is the normal state.",
        [(f"sum(sidecar_drift_drifting{{{SEL}}})", "")],
        unit="short",
        needs="drift",
        thresholds=steps(("green", None), ("red", 1)),
    )
    b.stat(
        "Features over threshold now",
        "Features where p < threshold and the effect is above its floor in the "
        "latest evaluation, sustained or not. Frequent flapping here without 'drifting' means the threshold is "
        "close to the data's noise.",
        [(f"sum(sidecar_drift_condition{{{SEL}}})", "")],
        unit="short",
        needs="drift",
        thresholds=steps(("green", None), ("orange", 1)),
    )
    b.stat(
        "Worst missing ratio",
        "Highest share of missing or NaN values in a current window. A jump means an "
        "upstream feature pipeline broke (alert FeatureMissingValuesHigh).",
        [(f'max(sidecar_drift_missing_ratio{{{SEL}, window="current"}})', "")],
        unit="percentunit",
        needs="drift",
        thresholds=steps(("green", None), ("orange", 0.05), ("red", 0.2)),
    )
    b.stat(
        "Drift evaluation time",
        "Wall time of the last drift evaluation. Close to checks.eval_interval_secs "
        "means evaluations will lag (alert SidecarCheckEvaluationLagging).",
        [('max(sidecar_drift_last_evaluation_duration_seconds{instance=~"$instance"})', "")],
        unit="s",
        needs="drift",
        thresholds=steps(("green", None), ("orange", 5), ("red", 15)),
    )
    b.row("Per feature")
    b.timeseries(
        "Test statistic",
        "KS D for numeric features (0..1), chi-square for categorical ones. Read it with "
        "the effect size: a large window makes tiny shifts significant.",
        [(f"max by ({BY}, test) (sidecar_drift_statistic{{{SEL}}})", LEG + " {{test}}")],
        unit="short",
        needs="drift",
    )
    b.timeseries(
        "p-value (Benjamini-Hochberg adjusted)",
        "Adjusted across the model's features. Below the "
        "threshold (line at 0.01, the default) the windows differ more than chance explains.",
        [(f"min by ({BY}) (sidecar_drift_p_value{{{SEL}}})", LEG)],
        unit="short",
        needs="drift",
        thresholds=steps(("red", None), ("green", 0.01)),
        max1=True,
    )
    b.timeseries(
        "Effect size",
        "KS D (numeric) or PSI (categorical). Drift only counts above the effect floor; a "
        "PSI above 0.25 is a large population shift.",
        [(f"max by ({BY}) (sidecar_drift_effect_size{{{SEL}}})", LEG)],
        unit="short",
        needs="drift",
        thresholds=steps(("green", None), ("orange", 0.1), ("red", 0.25)),
    )
    b.timeseries(
        "Drifting flags",
        "1 while a feature's drift condition has been sustained (alert FeatureDrifting).",
        [(f"max by ({BY}) (sidecar_drift_drifting{{{SEL}}}) == 1", LEG)],
        unit="short",
        needs="drift",
        max1=True,
    )
    b.timeseries(
        "Missing / NaN rate",
        "Share of missing or NaN values per window (current and reference). These "
        "are counted, never fed to the statistic (alert FeatureMissingValuesHigh).",
        [(f"max by ({BY}, window) (sidecar_drift_missing_ratio{{{SEL}}})", LEG + " {{window}}")],
        unit="percentunit",
        needs="drift",
        max1=True,
        thresholds=steps(("green", None), ("red", 0.2)),
    )
    b.timeseries(
        "Unseen categories",
        "Share of current values in categories the reference never saw (categorical "
        "features). A new category after a deploy is the usual cause.",
        [(f"max by ({BY}) (sidecar_drift_unseen_ratio{{{SEL}}})", LEG)],
        unit="percentunit",
        needs="drift",
        max1=True,
    )
    b.timeseries(
        "PSI",
        "Population stability index, a companion to the test: < 0.1 stable, 0.1-0.25 moderate, > 0.25 large shift.",
        [(f"max by ({BY}) (sidecar_drift_psi{{{SEL}}})", LEG)],
        unit="short",
        needs="drift",
        thresholds=steps(("green", None), ("orange", 0.1), ("red", 0.25)),
    )
    b.timeseries(
        "Samples per window",
        "Non-missing values in the current and reference windows. Below min_samples the check does not decide.",
        [(f"max by ({BY}, window) (sidecar_drift_samples{{{SEL}}})", LEG + " {{window}}")],
        unit="short",
        needs="drift",
    )
    b.row("Intake")
    b.timeseries(
        "Events observed and values dropped",
        "Events the drift check took in per second, and values "
        "it could not use by reason (series_limit, type_mismatch, late, ...) (alert SidecarDriftDropping).",
        [
            ('sum(rate(sidecar_drift_events_observed_total{instance=~"$instance"}[$__rate_interval]))', "observed"),
            (
                'sum by (reason) (rate(sidecar_drift_values_dropped_total{instance=~"$instance"}[$__rate_interval]))',
                "dropped {{reason}}",
            ),
        ],
        unit="ops",
        needs="drift",
    )
    b.timeseries(
        "Drift window memory",
        "Approximate bytes the drift windows hold; bounded by max_series and the window size.",
        [('max(sidecar_drift_window_memory_bytes{instance=~"$instance"})', "bytes")],
        unit="bytes",
        needs="drift",
    )
    return b


def build() -> Dashboard:
    return board().build()
