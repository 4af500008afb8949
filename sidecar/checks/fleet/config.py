"""Config of the fleet bins (``checks.fleet``)."""

from __future__ import annotations

from pydantic import Field

from sidecar.configbase import StrictModel

__all__ = ["FleetConfig"]


class FleetConfig(StrictModel):
    enabled: bool = Field(
        False,
        description="Export, per drift reference, counters of current values in bins frozen at the reference's "
        "quantiles (sidecar_fleet_*), so recording rules merge drift across replicas (docs/fleet.md). Needs "
        "the drift check; only file and pinned references are binned (a rolling reference changes every look).",
    )
    bins: int = Field(
        20,
        ge=2,
        le=200,
        description="Bins per numeric feature, edges at the reference's i/bins quantiles (tied quantiles merge, "
        "so a feature may get fewer). KS D from bins is below the exact D by at most one bin's mass.",
    )
    max_series: int = Field(
        500,
        gt=0,
        description="Most model/version/feature series binned; new ones are refused and counted "
        "(sidecar_fleet_values_unbinned_total{reason='series_limit'}).",
    )
    max_categories: int = Field(
        50,
        ge=1,
        description="Most reference categories given a bin of their own per categorical feature (the most "
        "frequent); the rest and unseen categories count under '__other__'.",
    )
    business_bins: int = Field(
        100,
        ge=2,
        le=1000,
        description="Bins for a quantile business check (checks.business, aggregate: quantile), edges at the "
        "i/business_bins quantiles of the drift reference of the check's field (score: '_score'; "
        "features.<name>); the fleet quantile is interpolated inside one bin (docs/fleet.md).",
    )
