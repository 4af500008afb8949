"""Builds this area's components from config (placeholder until the area lands)."""

from __future__ import annotations

from typing import Any

from sidecar.component import Context

__all__ = ["build"]


def build(ctx: Context) -> list[Any]:
    return []
