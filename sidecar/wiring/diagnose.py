"""Builds the diagnoses (the probe-and-rules check, fed the span feed on the bus) and the webhooks findings
call."""

from __future__ import annotations

from typing import Any

from exporters.webhook import WebhookExporter
from sidecar.component import Context
from sidecar.diagnose.runner import Diagnoser

__all__ = ["build"]


def build(ctx: Context) -> list[Any]:
    cfg = ctx.config
    out: list[Any] = [WebhookExporter(w, registry=ctx.registry, clock=ctx.clock, http=ctx.http,
                                      logger=ctx.logger.getChild(f"webhook.{w.name}")) for w in cfg.webhooks]
    if not cfg.diagnose.enabled or not cfg.triton.enabled:
        return out
    traces = cfg.traces
    spans_expected = traces.enabled and (traces.receiver_enabled or traces.file.path is not None)
    diag = Diagnoser(cfg.diagnose, metrics_url=cfg.triton.metrics_url, http_url=cfg.triton.http_url,
                     spans_expected=spans_expected, registry=ctx.registry, clock=ctx.clock, http=ctx.http,
                     logger=ctx.logger.getChild("diagnose"))
    ctx.bus.subscribe("spans", diag.name, diag.on_spans)
    return [*out, diag]
