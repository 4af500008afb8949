"""Builds the goodput check from ``checks.goodput`` and subscribes it to events and (LLM request) spans."""

from __future__ import annotations

from typing import Any

from sidecar.checks.goodput.check import GoodputCheck
from sidecar.component import Context
from sidecar.wiring.event_subs import subscribe_events

__all__ = ["build"]


def build(ctx: Context) -> list[Any]:
    cfg = ctx.config.checks.goodput
    if not cfg.enabled:
        return []
    comp = GoodputCheck(cfg, registry=ctx.registry)
    subscribe_events(ctx.bus, comp.name, comp.observe)
    if cfg.span_names:
        ctx.bus.subscribe("spans", comp.name, comp.observe_spans)
    return [comp]
