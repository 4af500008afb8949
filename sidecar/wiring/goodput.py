"""Builds the goodput check from ``checks.goodput`` and subscribes it to events and (LLM request) spans."""

from __future__ import annotations

from typing import Any

from sidecar.checks.goodput.check import GoodputCheck
from sidecar.component import Context
from sidecar.wiring.event_subs import subscribe_events
from sidecar.wiring.span_subs import by_name, subscribe_spans

__all__ = ["build"]


def build(ctx: Context) -> list[Any]:
    cfg = ctx.config.checks.goodput
    if not cfg.enabled:
        return []
    comp = GoodputCheck(cfg, registry=ctx.registry)
    subscribe_events(ctx.bus, comp.name, comp.observe)
    if cfg.span_names:
        subscribe_spans(ctx.bus, comp.name, comp.observe_spans, requests=by_name(comp.observe_spans, cfg.span_names))
    return [comp]
