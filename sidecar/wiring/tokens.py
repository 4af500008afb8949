"""Builds the token-length drift check (``checks.tokens``) beside the server sources it reads.

The servers builder and this one are made together (``factories``): the check is handed a reader of the
sources' latest snapshots (their per-request token histograms, as ``TokenHistogram``), so it needs no import of
a source and no new batch kind; it reads them at each evaluation. Events and LLM request spans come over the bus.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from sidecar.checks.tokens.check import TokenDriftCheck
from sidecar.checks.tokens.hist import TokenHistogram
from sidecar.component import Context
from sidecar.sources.servers.schema import DistName
from sidecar.sources.servers.source import ServerSource
from sidecar.wiring.event_subs import subscribe_events
from sidecar.wiring.servers import build as build_servers
from sidecar.wiring.span_subs import by_name, subscribe_spans

__all__ = ["factories", "token_histograms"]

_DISTS = (("input", DistName.INPUT_TOKENS_PER_REQUEST), ("output", DistName.OUTPUT_TOKENS_PER_REQUEST))

Factory = Callable[[Context], list[Any]]


def token_histograms(sources: list[ServerSource]) -> list[TokenHistogram]:
    """The per-request token histograms of every source's latest good scrape."""
    out: list[TokenHistogram] = []
    for src in sources:
        snap = src.last
        if snap is None:
            continue
        for (model, version), m in snap.models.items():
            for tokens, name in _DISTS:
                d = m.dists.get(name)
                if d is not None and d.buckets:
                    out.append(TokenHistogram(snap.server, model, version, tokens, d.buckets, d.sum, d.count))
    return out


def factories() -> tuple[Factory, Factory]:
    """(servers builder, token-length drift builder); the second reads what the first built."""
    sources: list[ServerSource] = []

    @functools.wraps(build_servers)  # the servers builder still, to tests and the builder counts
    def servers(ctx: Context) -> list[Any]:
        out = build_servers(ctx)
        sources.extend(s for s in out if isinstance(s, ServerSource))
        return out

    def tokens(ctx: Context) -> list[Any]:
        cfg = ctx.config.checks.tokens
        if not cfg.enabled:
            return []
        comp = TokenDriftCheck(
            cfg,
            budget=ctx.config.checks.drift,
            registry=ctx.registry,
            histograms=(lambda: token_histograms(sources)) if cfg.histograms else None,
            store=ctx.store,
            logger=ctx.logger.getChild("tokens"),
        )
        if cfg.events:
            # Columnar batches carry features and scores only, never the token fields: nothing to turn into events.
            subscribe_events(ctx.bus, comp.name, comp.observe, columns=lambda _b: None)
        if cfg.span_names:
            subscribe_spans(
                ctx.bus, comp.name, comp.observe_spans, requests=by_name(comp.observe_spans, cfg.span_names)
            )
        return [comp]

    return servers, tokens
