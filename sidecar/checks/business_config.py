"""Business-metric check config (placeholder until business checks land)."""

from __future__ import annotations

from sidecar.configbase import StrictModel

__all__ = ["BusinessConfig"]


class BusinessConfig(StrictModel):
    enabled: bool = False
