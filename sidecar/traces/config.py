"""TracesConfig (placeholder until this area lands)."""

from __future__ import annotations

from sidecar.configbase import StrictModel

__all__ = ["TracesConfig"]


class TracesConfig(StrictModel):
    enabled: bool = False
