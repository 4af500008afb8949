"""The drift check's own metrics: the gauges it exports per series and the counters of what it refused."""

from __future__ import annotations

import contextlib
import math

from prometheus_client import CollectorRegistry, Counter, Gauge

from sidecar.checks.drift.evaluator import FeatureResult

__all__ = ["DriftMetrics"]

_LAB = ["model", "version", "feature", "test"]
_LAB3 = ["model", "version", "feature"]
_LABW = ["model", "version", "feature", "window"]


class DriftMetrics:
    def __init__(self, r: CollectorRegistry) -> None:
        self.g_stat = Gauge("sidecar_drift_statistic", "Drift test statistic (KS D or chi-square).", _LAB, registry=r)
        self.g_p = Gauge(
            "sidecar_drift_p_value", "Benjamini-Hochberg-adjusted p-value of the drift test.", _LAB, registry=r
        )
        self.g_p_raw = Gauge("sidecar_drift_p_value_raw", "Unadjusted p-value of the drift test.", _LAB, registry=r)
        self.g_effect = Gauge(
            "sidecar_drift_effect_size", "Effect size (KS D for numeric, PSI for categorical).", _LAB, registry=r
        )
        self.g_psi = Gauge("sidecar_drift_psi", "Population stability index (companion number).", _LAB3, registry=r)
        self.g_samples = Gauge("sidecar_drift_samples", "Non-missing values in the window.", _LABW, registry=r)
        self.g_missing = Gauge(
            "sidecar_drift_missing_ratio", "Share of missing/NaN values in the window.", _LABW, registry=r
        )
        self.g_unseen = Gauge(
            "sidecar_drift_unseen_ratio",
            "Share of current values in categories the reference never saw.",
            _LAB3,
            registry=r,
        )
        self.g_drifting = Gauge(
            "sidecar_drift_drifting", "1 when the drift condition has held for sustained_secs.", _LAB, registry=r
        )
        self.g_condition = Gauge(
            "sidecar_drift_condition", "1 when p < threshold and effect >= floor now.", _LAB, registry=r
        )
        self.g_eval = Gauge(
            "sidecar_drift_last_evaluation_duration_seconds", "Wall time the last drift evaluation took.", registry=r
        )
        self.g_memory = Gauge(
            "sidecar_drift_window_memory_bytes", "Approximate bytes held by drift windows.", registry=r
        )
        self.c_observed = Counter("sidecar_drift_events_observed", "Events the drift check took in.", registry=r)
        self.c_dropped = Counter(
            "sidecar_drift_values_dropped",
            "Values or events the drift check could not use, by reason.",
            ["reason"],
            registry=r,
        )
        self.c_store_errors = Counter(
            "sidecar_drift_store_errors", "Failures reading or writing drift state.", ["op"], registry=r
        )
        self.c_expired = Counter(
            "sidecar_drift_series_expired", "Series dropped after series_idle_secs without an event.", registry=r
        )
        self.c_ref_changes = Counter(
            "sidecar_drift_reference_changes", "Reference changes (API or config).", registry=r
        )

    def export(self, model: str, version: str, r: FeatureResult, q: float, condition: bool, active: bool) -> None:
        lab = (model, version, r.feature, r.test)
        self.g_drifting.labels(*lab).set(1.0 if active else 0.0)
        self.g_condition.labels(*lab).set(1.0 if condition else 0.0)
        _put(self.g_missing, (model, version, r.feature, "current"), r.missing_ratio)
        _put(self.g_missing, (model, version, r.feature, "reference"), r.ref_missing_ratio)
        if r.test == "missing":
            return
        self.g_samples.labels(model, version, r.feature, "current").set(r.n_cur)
        self.g_samples.labels(model, version, r.feature, "reference").set(r.n_ref)
        _put(self.g_stat, lab, r.statistic)
        _put(self.g_p, lab, q)
        _put(self.g_p_raw, lab, r.p)
        _put(self.g_effect, lab, r.effect)
        _put(self.g_psi, (model, version, r.feature), r.psi)
        if r.test == "chi2":
            _put(self.g_unseen, (model, version, r.feature), r.unseen_ratio)

    def forget(self, model: str, version: str, feature: str) -> None:
        """Removes every gauge of one series (it expired)."""
        nan = math.nan
        for test in ("ks", "chi2", "missing"):
            for g in (self.g_stat, self.g_p, self.g_p_raw, self.g_effect, self.g_drifting, self.g_condition):
                _put(g, (model, version, feature, test), nan)
        for window in ("current", "reference"):
            _put(self.g_samples, (model, version, feature, window), nan)
            _put(self.g_missing, (model, version, feature, window), nan)
        _put(self.g_psi, (model, version, feature), nan)
        _put(self.g_unseen, (model, version, feature), nan)


def _put(g: Gauge, labels: tuple[str, ...], value: float) -> None:
    """Sets a series, or removes it while there is no value: a NaN sample reads as data to a rule or panel."""
    if math.isnan(value):
        with contextlib.suppress(KeyError):  # never set: nothing to remove
            g.remove(*labels)
    else:
        g.labels(*labels).set(value)
