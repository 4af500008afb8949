"""Builds the Triton metrics source (placeholder until it lands)."""

from __future__ import annotations

from typing import Any

from sidecar.component import Context

__all__ = ["build"]


def build(ctx: Context) -> list[Any]:
    return []
