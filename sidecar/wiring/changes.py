"""Builds the change log and its sources: ``POST /v1/changes`` and the Triton repository-index poller."""

from __future__ import annotations

from typing import Any

from sidecar.component import Context
from sidecar.sources.changes_http import ChangesEndpoint
from sidecar.sources.repository_index import RepositoryIndexSource
from sidecar.state.changes import AuditWriter, ChangeLog

__all__ = ["build"]


def build(ctx: Context, audit: AuditWriter | None) -> tuple[ChangeLog, list[Any]]:
    """The change log (for the alert book's annotations) and every component to run, the log included."""
    cfg = ctx.config.alerting.changes
    log = ctx.logger.getChild("alerting").getChild("changes")
    changes = ChangeLog(cfg, registry=ctx.registry, clock=ctx.clock, store=ctx.store, audit=audit, logger=log)
    # Every source of changes publishes them on the bus: the endpoint, the poller, drift reference changes.
    ctx.bus.subscribe("changes", changes.name, changes.on_changes)
    endpoint = ChangesEndpoint(
        cfg, lookup=changes, bus=ctx.bus, guard=ctx.guard, registry=ctx.registry, clock=ctx.clock
    )
    out: list[Any] = [changes, endpoint]
    url = ctx.config.triton.http_url
    if cfg.poll_repository and url:
        out.append(
            RepositoryIndexSource(
                triton_http_url=url,
                interval_secs=cfg.poll_interval_secs,
                registry=ctx.registry,
                clock=ctx.clock,
                store=ctx.store,
                http=ctx.http,
                bus=ctx.bus,
                logger=log.getChild("repository"),
            )
        )
    return changes, out
