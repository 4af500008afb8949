"""Builds the drift check from ``checks.drift``."""

from __future__ import annotations

from typing import Any

from sidecar.checks.drift.check import DriftCheck
from sidecar.component import Context

__all__ = ["build"]


def build(ctx: Context) -> list[Any]:
    cfg = ctx.config.checks.drift
    if not cfg.enabled:
        return []
    return [DriftCheck(ctx, cfg)]
