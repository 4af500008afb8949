"""Config of the model servers scraped through a profile (the ``servers:`` list)."""

from __future__ import annotations

from pydantic import Field, field_validator

from sidecar.configbase import StrictModel
from sidecar.sources.servers.registry import PROFILES

__all__ = ["ServingTargetConfig", "unique_server_names"]


class ServingTargetConfig(StrictModel):
    name: str = Field(
        ...,
        pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$",
        description="The server's name: the ``server`` label of its SLIs (lower case, digits, _ and -).",
    )
    url: str = Field(..., description="The server's Prometheus endpoint (http://host:port/metrics).")
    profile: str = Field(
        "auto",
        description="auto: detected from the families the exposition holds; or a profile's name "
        "(docs/servers.md lists them).",
    )
    interval_secs: float = Field(10.0, gt=0, le=3600, description="Seconds between scrapes.")
    timeout_secs: float = Field(5.0, gt=0, le=600, description="A scrape taking longer than this fails (counted).")
    max_series: int = Field(200_000, gt=0, description="Samples one scrape may hold; a larger scrape is refused.")
    max_models: int = Field(500, gt=0, description="Model/version pairs tracked; more are dropped and counted.")
    max_body_mib: float = Field(64.0, gt=0, le=1024, description="Largest exposition read; more fails the scrape.")
    stale_after_secs: float = Field(
        60.0, gt=0, description="Interval SLIs older than this are withdrawn (a stuck scrape never looks fresh)."
    )

    @field_validator("url")
    @classmethod
    def _http(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return v

    @field_validator("profile")
    @classmethod
    def _known(cls, v: str) -> str:
        if v != "auto" and v not in PROFILES:
            raise ValueError(f"unknown profile {v!r}; one of: auto, {', '.join(sorted(PROFILES))}")
        return v


def unique_server_names(servers: list[ServingTargetConfig]) -> list[ServingTargetConfig]:
    """For the list field: two servers of one name would share their series."""
    seen: set[str] = set()
    for i, s in enumerate(servers):
        if s.name in seen:
            raise ValueError(f"[{i}].name: {s.name!r} is used twice; server names must be unique")
        seen.add(s.name)
    return servers
