"""Polls Triton's repository index and publishes the model versions appearing and going as changes.

The last snapshot is kept in the store, so a restart does not publish every loaded version as new; the first
snapshot ever taken is only the starting point. Changes go out on the bus (kind ``changes``, source
``triton_repository``), where the change log records them.
"""

from __future__ import annotations

import json
import logging

import httpx
import orjson
from prometheus_client import CollectorRegistry, Counter

from sidecar.clock import Clock
from sidecar.component import Bus
from sidecar.model import Batch, Change
from sidecar.polled import Polled, TickerFactory
from sidecar.store import Store

__all__ = ["RepositoryIndexSource"]

# Kept under the change log's old namespace, so an upgrade resumes from the snapshot already stored.
_KV = "alerting_changes"
SOURCE = "triton_repository"


class RepositoryIndexSource(Polled):
    name = "repository_index"

    def __init__(
        self,
        *,
        triton_http_url: str,
        interval_secs: float,
        registry: CollectorRegistry,
        clock: Clock,
        store: Store,
        http: httpx.AsyncClient,
        bus: Bus,
        logger: logging.Logger | None = None,
        ticker: TickerFactory | None = None,
    ) -> None:
        super().__init__(interval_secs=interval_secs, registry=registry, logger=logger, ticker=ticker)
        self.triton_url = triton_http_url.rstrip("/")
        self.clock = clock
        self.store = store
        self.http = http
        self.bus = bus
        self._last_poll_ok: bool | None = None
        self._poll_errors = Counter(
            "sidecar_changes_poll_errors",
            "Failed polls of Triton's repository index, by reason.",
            ["reason"],
            registry=registry,
        )

    async def poll_once(self) -> list[Change]:
        """Poll the repository index once; returns the changes it published."""
        try:
            resp = await self.http.post(f"{self.triton_url}/v2/repository/index", json={}, timeout=10.0)
        except httpx.HTTPError as exc:
            self._poll_failed("connect", f"repository index unreachable: {exc!r}")
            return []
        if resp.status_code != 200:
            self._poll_failed("http_status", f"repository index answered {resp.status_code}")
            return []
        try:
            entries = orjson.loads(resp.content)
            ready = sorted({f"{e['name']}\x1f{e.get('version', '')}" for e in entries if e.get("state") == "READY"})
        except (orjson.JSONDecodeError, TypeError, KeyError, AttributeError):
            self._poll_failed("parse", "repository index is not the expected JSON list")
            return []
        self._last_poll_ok = True
        prev_raw = self.store.get(_KV, "snapshot")
        if prev_raw is None:
            self.store.put(_KV, "snapshot", json.dumps(ready))
            return []  # the first snapshot is the starting point, not a change
        prev = set(json.loads(prev_raw))
        ready_set = set(ready)
        now = self.clock.now()
        out = []
        for key, verb in [(k, "appeared") for k in ready if k not in prev] + [
            (k, "disappeared") for k in sorted(prev) if k not in ready_set
        ]:
            model, _, version = key.partition("\x1f")
            out.append(
                Change(
                    what=f"version {version} {verb} in Triton",
                    at=now,
                    who="triton",
                    model=model,
                    version=version or None,
                    source=SOURCE,
                )
            )
        if out and self.bus.publish(Batch(kind="changes", source=SOURCE, items=tuple(out), received_at=now)):
            # Not recorded: keep the old snapshot, so the next poll publishes the same changes again.
            self._poll_failed("not_recorded", "the change log could not record repository changes")
            return []
        self.store.put(_KV, "snapshot", json.dumps(ready))
        return out

    def _poll_failed(self, reason: str, message: str) -> None:
        self._poll_errors.labels(reason).inc()
        if self._last_poll_ok is not False:
            self.log.warning("%s", message)
        self._last_poll_ok = False
