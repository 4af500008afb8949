"""Builds the trace-file sources: exactly one reader per Triton trace file, whichever sections name it.

``traces.file`` asks for spans, ``events.triton_trace`` for tensor events. Naming the same PATH (what the docs
recommend: TIMESTAMPS and TENSORS in one file) gives one source publishing both; different paths give one
source each. ``wiring/traces.py`` calls this when ``events.triton_trace`` is off, ``wiring/events.py`` when it
is on, so the sources are built in one place and their metrics registered once.
"""

from __future__ import annotations

import os
from typing import Any

from sidecar.component import Context
from sidecar.sources.events.metrics import EventsMetrics

__all__ = ["build"]


def build(ctx: Context, events_metrics: EventsMetrics | None) -> list[Any]:
    from sidecar.sources.trace_files.metrics import TraceFileMetrics
    from sidecar.sources.trace_files.settings import merge
    from sidecar.sources.trace_files.source import TraceFileSource

    tcfg, ecfg = ctx.config.traces, ctx.config.events
    spans = tcfg.file if tcfg.enabled and tcfg.file.path else None
    tensors = ecfg.triton_trace if ecfg.triton_trace.enabled else None
    if spans is None and tensors is None:
        return []
    if (
        spans is not None
        and tensors is not None
        and (os.path.abspath(str(spans.path)) != os.path.abspath(tensors.path))
    ):
        plans = [merge(spans, None), merge(None, tensors, ecfg.max_features_per_event)]
    else:
        plans = [merge(spans, tensors, ecfg.max_features_per_event)]
    metrics = TraceFileMetrics(ctx.registry)
    log = ctx.logger.getChild("trace_files")
    return [
        TraceFileSource(
            plan,
            bus=ctx.bus,
            metrics=metrics,
            clock=ctx.clock,
            store=ctx.store,
            events_metrics=events_metrics,
            logger=log,
            name="trace_file" if i == 0 else f"trace_file_{i}",
        )
        for i, plan in enumerate(plans)
    ]
