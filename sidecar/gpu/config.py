"""GpuConfig (placeholder until this area lands)."""

from __future__ import annotations

from sidecar.configbase import StrictModel

__all__ = ["GpuConfig"]


class GpuConfig(StrictModel):
    enabled: bool = False
