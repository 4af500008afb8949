"""Business metrics: each configured check against its baseline, with change annotations."""

from __future__ import annotations

from grafanalib.core import Dashboard

from dashboards.common import Board, datasource_var, label_var, steps
from dashboards.serving import CHANGE_ANNOTATION

__all__ = ["board", "build"]

SEL = 'instance=~"$instance", check=~"$check", model=~"$model", version=~"$version"'
LEG = "{{check}} {{model}} v{{version}}"
BY = "check, model, version"


def board() -> Board:
    b = Board(
        uid="triton-sidecar-business",
        title="Triton sidecar / Business metrics",
        tags=["triton", "sidecar", "business"],
        description="Each business check's current value against its baseline and threshold; orange markers are "
        "recorded changes (deploys, model versions).",
        variables=[
            datasource_var(),
            label_var("instance", "sidecar_business_value", label="Sidecar"),
            label_var("check", "sidecar_business_value", label="Check", depends='instance=~"$instance"'),
            label_var(
                "model", "sidecar_business_value", label="Model", depends='instance=~"$instance", check=~"$check"'
            ),
            label_var(
                "version",
                "sidecar_business_value",
                label="Version",
                depends='instance=~"$instance", check=~"$check", model=~"$model"',
            ),
        ],
        annotations=[CHANGE_ANNOTATION],
    )
    b.row("Checks")
    b.stat(
        "Conditions holding",
        "Business checks whose condition holds now (before their hold duration). The "
        "alerts in alerts/business.rules.yml fire after the hold (CtrMeanDown, FraudScoreP95Up, WerHigh, "
        "BusinessCheckConditionHolds).",
        [(f"sum(sidecar_business_condition{{{SEL}}})", "")],
        unit="short",
        needs="business",
        thresholds=steps(("green", None), ("red", 1)),
    )
    b.stat(
        "Checks without enough data",
        "Checks that cannot decide (too few events or too short a baseline); "
        "they will not fire (alert BusinessCheckInsufficientData after 6h).",
        [(f"sum(sidecar_business_insufficient_data{{{SEL}}})", "")],
        unit="short",
        needs="business",
        thresholds=steps(("green", None), ("orange", 1)),
    )
    b.timeseries(
        "Value against baseline",
        "The check's current aggregate (solid) and its baseline (for example "
        "the 7-day mean). The gap is the change ratio below.",
        [
            (f"max by ({BY}) (sidecar_business_value{{{SEL}}})", LEG + " value"),
            (f"max by ({BY}) (sidecar_business_baseline{{{SEL}}})", LEG + " baseline"),
        ],
        unit="short",
        needs="business",
        min0=False,
        w=24,
    )
    b.timeseries(
        "Change ratio against threshold",
        "(value - baseline) / |baseline|, with the check's threshold. "
        "A relative check fires when the change passes its threshold for the hold duration.",
        [
            (f"max by ({BY}) (sidecar_business_change_ratio{{{SEL}}})", LEG + " change"),
            (
                'max by (check) (sidecar_business_threshold{instance=~"$instance", check=~"$check"})',
                "{{check}} threshold",
            ),
        ],
        unit="percentunit",
        needs="business",
        min0=False,
    )
    b.timeseries(
        "Condition and insufficient data",
        "1 while the condition holds (by severity), and 1 while the check lacks data.",
        [
            (f"max by ({BY}, severity) (sidecar_business_condition{{{SEL}}})", LEG + " {{severity}}"),
            (f"max by ({BY}) (sidecar_business_insufficient_data{{{SEL}}})", LEG + " insufficient data"),
        ],
        unit="short",
        needs="business",
        max1=True,
    )
    b.row("Intake")
    b.timeseries(
        "Events taken and dropped",
        "Event values each check took in per second, and events it could "
        "not use by reason (missing_field, not_numeric, too_old, future, series_limit) (alert "
        "SidecarBusinessEventsDropped).",
        [
            (
                'sum by (check) (rate(sidecar_business_events_total{instance=~"$instance", check=~"$check"}'
                "[$__rate_interval]))",
                "{{check}} taken",
            ),
            (
                'sum by (check, reason) (rate(sidecar_business_events_dropped_total{instance=~"$instance", '
                'check=~"$check"}[$__rate_interval]))',
                "{{check}} dropped {{reason}}",
            ),
        ],
        unit="ops",
        needs="business",
        w=24,
    )
    return b


def build() -> Dashboard:
    return board().build()
