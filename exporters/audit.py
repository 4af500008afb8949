"""Audit events (alerts fired and resolved, changes) in the embedded SQLite store, and optionally
Elasticsearch.

SQLite is the default and the durable copy (table ``audit_events``, bounded by ``max_rows``: the oldest rows
go first, counted). Elasticsearch, when configured, gets the same events through a bounded, retrying queue.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import orjson
from prometheus_client import CollectorRegistry, Counter

from exporters.elasticsearch import AuditDoc
from exporters.sender import Sender
from sidecar.component import Readiness
from sidecar.store import Store

__all__ = ["AuditLog"]

_TABLE = "audit_events"


class AuditLog:
    name = "audit"
    role = "exporter"

    def __init__(
        self,
        *,
        max_rows: int,
        registry: CollectorRegistry,
        store: Store,
        es: Sender[AuditDoc] | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        self.max_rows = max_rows
        self.store = store
        self.es = es
        self.log = logger or logging.getLogger("sidecar.audit")
        self._recorded = Counter(
            "sidecar_audit_events", "Audit events recorded, by kind.", ["kind"], registry=registry
        )
        self._evicted = Counter(
            "sidecar_audit_events_evicted",
            "Oldest audit events deleted to stay under max_rows.",
            registry=registry,
        )
        self._errors = Counter(
            "sidecar_audit_errors", "Audit events that could not be written to SQLite.", registry=registry
        )
        store.execute(
            f"CREATE TABLE IF NOT EXISTS {_TABLE} (id TEXT PRIMARY KEY, at REAL, kind TEXT, body BLOB)"
        )
        store.execute(f"CREATE INDEX IF NOT EXISTS {_TABLE}_at ON {_TABLE} (at)")

    def record(self, kind: str, event_id: str, at: float, body: Mapping[str, Any]) -> bool:
        """Record one event (idempotent on its id); False when it was already there or not written."""
        try:
            with self.store.transaction():
                doc = self.write(kind, event_id, at, body)
        except Exception:
            self._errors.inc()
            self.log.exception("could not record audit event %s", event_id)
            return False
        if doc is None:
            return False
        self.committed(event_id, doc)
        return True

    def write(self, kind: str, event_id: str, at: float, body: Mapping[str, Any]) -> dict[str, Any] | None:
        """Insert one event inside the caller's ``store.transaction()``, so it commits or rolls back with the
        caller's own rows (a change and its audit row are never stored one without the other). Raises on
        failure; returns the document to pass to ``committed`` once the transaction has committed, or None
        when the event was already there."""
        doc = {"kind": kind, "at": at, **body}
        n = self.store.execute(
            f"INSERT OR IGNORE INTO {_TABLE} (id, at, kind, body) VALUES (?, ?, ?, ?)",
            (event_id, at, kind, orjson.dumps(doc)),
        )
        if not n:
            return None
        over = int(self.store.query(f"SELECT COUNT(*) FROM {_TABLE}")[0][0]) - self.max_rows
        if over > 0:
            self.store.execute(
                f"DELETE FROM {_TABLE} WHERE id IN (SELECT id FROM {_TABLE} ORDER BY at LIMIT ?)", (over,)
            )
            self._evicted.inc(over)
        return doc

    def committed(self, event_id: str, doc: dict[str, Any]) -> None:
        """Count an event ``write`` stored and ship it to Elasticsearch, once its transaction has committed."""
        self._recorded.labels(str(doc["kind"])).inc()
        if self.es is not None:
            self.es.submit(AuditDoc(id=event_id, body=doc))

    def events(self, kind: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        sql = f"SELECT body FROM {_TABLE}" + (" WHERE kind = ?" if kind else "") + " ORDER BY at DESC LIMIT ?"
        params: tuple[Any, ...] = (kind, limit) if kind else (limit,)
        return [orjson.loads(r[0]) for r in self.store.query(sql, params)]

    async def start(self) -> None:
        if self.es is not None:
            await self.es.start()

    async def shutdown(self) -> None:
        if self.es is not None:
            await self.es.shutdown()

    def readiness(self) -> Readiness | None:
        return None

    def routes(self) -> None:
        return None
