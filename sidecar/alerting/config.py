"""AlertingConfig (placeholder until this area lands)."""

from __future__ import annotations

from sidecar.configbase import StrictModel

__all__ = ["AlertingConfig"]


class AlertingConfig(StrictModel):
    enabled: bool = False
