"""Config of the edge processor (``edge.series``): route groups, what counts as a hit, and the bounds."""

from __future__ import annotations

import itertools
import re

from pydantic import Field, field_validator, model_validator

from sidecar.configbase import StrictModel

__all__ = ["ALL", "OTHER", "EdgeSeriesConfig", "RouteGroup"]

ALL = "all"  # the aggregate of every route group
OTHER = "other"  # paths no group matches, and groups or nodes past their bound


class RouteGroup(StrictModel):
    name: str = Field(..., min_length=1, max_length=64, description="Label value of the group.")
    prefixes: list[str] = Field(default_factory=list, max_length=64, description="Path prefixes of the group.")
    regex: str | None = Field(None, max_length=512, description="Or a regular expression the path must match.")

    @field_validator("regex")
    @classmethod
    def _compiles(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                re.compile(v)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from None
        return v

    @model_validator(mode="after")
    def _some(self) -> RouteGroup:
        if not self.prefixes and self.regex is None:
            raise ValueError("prefixes or regex: one is required")
        if self.name in (ALL, OTHER):
            raise ValueError(f"name: {self.name!r} is reserved")
        return self


class EdgeSeriesConfig(StrictModel):
    route_groups: list[RouteGroup] = Field(
        default_factory=list,
        max_length=64,
        description="Path groups, first match wins; a path none matches is `other`. When a line carries the edge's "
        "route (edge.source.fields.route) and no group matches, the route names the group (up to max_groups).",
    )
    max_groups: int = Field(32, gt=0, le=256, description="Route groups tracked; more fold into `other` (counted).")
    max_nodes: int = Field(64, gt=0, le=1024, description="Edge nodes tracked; more fold into `other` (counted).")
    hit_statuses: list[str] = Field(
        default_factory=lambda: ["HIT", "STALE", "UPDATING", "REVALIDATED"],
        min_length=1,
        description="Cache statuses that count as a hit (case-insensitive); every other status is a miss.",
    )
    excluded_statuses: list[str] = Field(
        default_factory=lambda: [""],
        description='Cache statuses left out of the hit ratio (`""`: the edge did not look in its cache).',
    )
    quantile_window_secs: float = Field(
        300.0, ge=60, le=86_400, description="Window of the exported p50, p99 and p99.9 (whole minutes)."
    )
    latency_history_secs: float = Field(
        3600.0, ge=60, le=86_400, description="Per-minute latency sketches kept per route group (bounds memory)."
    )
    count_history_secs: float = Field(
        2 * 86_400.0, ge=3600, le=35 * 86_400, description="Per-minute hit and request counts kept per route group."
    )
    histogram_buckets: list[float] = Field(
        default_factory=lambda: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
        min_length=1,
        max_length=40,
        description="Upper bounds (seconds) of the exported latency histograms.",
    )

    @field_validator("hit_statuses", "excluded_statuses")
    @classmethod
    def _upper(cls, v: list[str]) -> list[str]:
        return [s.strip().upper() for s in v]

    @field_validator("histogram_buckets")
    @classmethod
    def _increasing(cls, v: list[float]) -> list[float]:
        if any(b <= a for a, b in itertools.pairwise(v)) or v[0] <= 0:
            raise ValueError("must be positive and strictly increasing")
        return v

    @model_validator(mode="after")
    def _check(self) -> EdgeSeriesConfig:
        names = [g.name for g in self.route_groups]
        if len(set(names)) != len(names):
            raise ValueError("route_groups: names must be unique")
        if set(self.hit_statuses) & set(self.excluded_statuses):
            raise ValueError("excluded_statuses: a status cannot be a hit and excluded")
        return self
