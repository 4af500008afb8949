"""Drift check config (placeholder until the drift check lands)."""

from __future__ import annotations

from sidecar.configbase import StrictModel

__all__ = ["DriftConfig"]


class DriftConfig(StrictModel):
    enabled: bool = False
