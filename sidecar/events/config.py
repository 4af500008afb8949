"""EventsConfig (placeholder until this area lands)."""

from __future__ import annotations

from sidecar.configbase import StrictModel

__all__ = ["EventsConfig"]


class EventsConfig(StrictModel):
    enabled: bool = False
