"""Audit events (alerts, findings, changes, per-request records) in the embedded SQLite store, and optionally
Elasticsearch.

SQLite is the default and the durable copy (table ``audit_events``), bounded per retention class
(``exporters.audit_retention``: requests, alerts, changes, findings, actions), each counted in
``sidecar_audit_events_evicted_total{why,kind}``: a class over its ``max_rows`` or ``max_bytes`` loses its own
oldest rows (so request records never push out alert or change history), and rows older than
``retention_days`` are deleted. ``GET /v1/audit`` reads it (``exporters.audit_query``).

With Elasticsearch configured, each event's copy for it is queued in the same transaction as its audit row
(``exporters.audit_outbox``), so what is recorded is delivered, after a crash too, in the order it was recorded.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from prometheus_client import CollectorRegistry, Counter

from exporters.audit_outbox import AuditOutbox, DeadLetters, EsDoc
from exporters.audit_query import QueryError, encode_cursor, parse
from exporters.audit_retention import CLASS_SQL, CLASSES, Budget, class_of, uniform
from exporters.es_template import index_for
from exporters.sender import Sender
from sidecar.clock import Clock, SystemClock
from sidecar.component import Readiness, Role
from sidecar.listparams import ListParams
from sidecar.store import Store, error_reason

__all__ = ["AuditLog"]

_TABLE = "audit_events"
_COLUMNS = ("model", "version", "trace_id", "request_id")
_PRUNE_EVERY = 500  # writes between two retention sweeps (a sweep is one indexed DELETE)


class AuditLog:
    name = "audit"
    role = Role.EXPORTER

    def __init__(
        self,
        *,
        registry: CollectorRegistry,
        store: Store,
        es: Sender[EsDoc] | None = None,
        outbox: AuditOutbox | None = None,
        dead_letters: DeadLetters | None = None,
        es_index: str = "sidecar-audit",
        budgets: Mapping[str, Budget] | None = None,
        max_rows: int = 100_000,
        max_bytes: int = 256 * 1024 * 1024,
        retention_days: float = 30.0,
        clock: Clock | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        if (es is None) != (outbox is None):
            raise ValueError("es and outbox go together")
        # Without budgets, every class gets max_rows and max_bytes of its own.
        self.budgets = {**uniform(max_rows, max_bytes), **(budgets or {})}
        if set(self.budgets) != set(CLASSES):
            raise ValueError(f"budgets are per class: {', '.join(CLASSES)}")
        self.retention_secs = retention_days * 86400
        self.store = store
        self.es = es
        self.outbox = outbox
        self.dead_letters = dead_letters
        self.es_index = es_index
        self.clock = clock or SystemClock()
        self.log = logger or logging.getLogger("sidecar.audit")
        self._recorded = Counter("sidecar_audit_events", "Audit events recorded, by kind.", ["kind"], registry=registry)
        self._evicted = Counter(
            "sidecar_audit_events_evicted",
            "Audit events deleted from SQLite, by why (max_rows, max_bytes, retention) and retention class.",
            ["why", "kind"],
            registry=registry,
        )
        self._errors = Counter(
            "sidecar_audit_errors",
            "Audit events that could not be written to SQLite, by reason (disk_full, read_only, busy, io, corrupt, "
            "other).",
            ["reason"],
            registry=registry,
        )
        self._refused = Counter(
            "sidecar_audit_queries_refused", "GET /v1/audit requests answered 400.", registry=registry
        )
        self._lists = ListParams.of(registry)
        store.execute(f"CREATE TABLE IF NOT EXISTS {_TABLE} (id TEXT PRIMARY KEY, at REAL, kind TEXT, body BLOB)")
        have = {r[1] for r in store.query(f"PRAGMA table_info({_TABLE})")}
        for col in (*_COLUMNS, "size", "cls"):  # tables of earlier versions lack the query columns
            if col not in have:
                store.execute(f"ALTER TABLE {_TABLE} ADD COLUMN {col} {'INTEGER' if col == 'size' else 'TEXT'}")
        if "cls" not in have:
            store.execute(f"UPDATE {_TABLE} SET cls = {CLASS_SQL}")
        store.execute(f"CREATE INDEX IF NOT EXISTS {_TABLE}_at ON {_TABLE} (at, id)")
        store.execute(f"CREATE INDEX IF NOT EXISTS {_TABLE}_cls ON {_TABLE} (cls, at, id)")
        for col in (*_COLUMNS, "kind"):
            store.execute(f"CREATE INDEX IF NOT EXISTS {_TABLE}_{col} ON {_TABLE} ({col}, at)")
        self._rows: dict[str, int] = {}
        self._bytes: dict[str, int] = {}
        self._count()
        self._writes = 0

    # -- writing ---------------------------------------------------------------------------------------------
    def record(self, kind: str, event_id: str, at: float, body: Mapping[str, Any]) -> bool:
        """Record one event (idempotent on its id); False when it was already there or not written."""
        return self.record_many([(kind, event_id, at, body)]) == 1

    def record_many(self, events: Sequence[tuple[str, str, float, Mapping[str, Any]]]) -> int:
        """Record events in one transaction; returns how many were new. On a store failure none is stored."""
        done: list[dict[str, Any]] = []
        dropped = 0
        try:
            with self.store.transaction():
                copies = []
                for kind, event_id, at, body in events:
                    got = self._insert(kind, event_id, at, body)
                    if got is not None:
                        done.append(got[0])
                        copies.append(got[1])
                dropped = self._queue(copies)
                self._bound()
        except Exception as exc:
            self.failed(len(events), exc)
            return 0
        for doc in done:
            self._recorded.labels(str(doc["kind"])).inc()
        self._wake(len(done), dropped)
        return len(done)

    def failed(self, n: int, exc: BaseException) -> None:
        """Count and log ``n`` events not stored because of ``exc`` (their transaction rolled back)."""
        reason = error_reason(exc)
        self._errors.labels(reason).inc(n)
        # The store's own message ("database or disk is full"), not a traceback per failed batch.
        self.log.error("could not record %d audit events (%s): %s", n, reason, exc)
        self._reload()

    def write(self, kind: str, event_id: str, at: float, body: Mapping[str, Any]) -> dict[str, Any] | None:
        """Insert one event inside the caller's ``store.transaction()``, so it commits or rolls back with the
        caller's own rows (a change and its audit row are never stored one without the other). Raises on
        failure; returns the document to pass to ``committed`` once the transaction has committed, or None
        when the event was already there."""
        got = self._insert(kind, event_id, at, body)
        if got is None:
            return None
        dropped = self._queue([got[1]])
        self._bound()
        return {**got[0], "_dropped": dropped} if dropped else got[0]

    def committed(self, event_id: str, doc: dict[str, Any]) -> None:
        """Count an event ``write`` stored and wake the Elasticsearch sender, once its transaction committed."""
        doc = dict(doc)
        dropped = int(doc.pop("_dropped", 0))
        self._recorded.labels(str(doc["kind"])).inc()
        self._wake(1, dropped)

    def _insert(
        self, kind: str, event_id: str, at: float, body: Mapping[str, Any]
    ) -> tuple[dict[str, Any], tuple[str, str, bytes]] | None:
        doc = {"id": event_id, "kind": kind, "at": at, **body}
        raw = orjson.dumps(doc)
        cols = [None if doc.get(c) is None else str(doc.get(c)) for c in _COLUMNS]
        cls = class_of(kind)
        n = self.store.execute(
            f"INSERT OR IGNORE INTO {_TABLE} (id, at, kind, body, model, version, trace_id, request_id, size, cls) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (event_id, at, kind, raw, *cols, len(raw), cls),
        )
        if not n:
            return None
        self._rows[cls] = self._rows.get(cls, 0) + 1
        self._bytes[cls] = self._bytes.get(cls, 0) + len(raw)
        return doc, (event_id, index_for(self.es_index, at), raw)

    def _queue(self, copies: list[tuple[str, str, bytes]]) -> int:
        """Queue the Elasticsearch copies in the caller's transaction; returns how many were dropped for room."""
        if self.outbox is None or not copies:
            return 0
        return self.outbox.put(copies)

    def _wake(self, n: int, dropped: int) -> None:
        if self.es is not None and n:
            self.es.stats.received(n)
            self.es.stats.dropped("queue_full", dropped)
            self.es.notify()

    def _evict(self, why: str, where: str, params: tuple[Any, ...]) -> None:
        sel = f"SELECT id, COALESCE(size, LENGTH(body)), cls FROM {_TABLE} {where}"
        rows = self.store.query(sel, params)
        if not rows:
            return
        # Always inside the caller's transaction, so the SELECT and the DELETE see the same rows.
        self.store.execute(f"DELETE FROM {_TABLE} WHERE id IN (SELECT id FROM ({sel}))", params)
        gone: dict[str, int] = {}
        for _, size, cls in rows:
            cls = str(cls)
            gone[cls] = gone.get(cls, 0) + 1
            self._rows[cls] = self._rows.get(cls, 0) - 1
            self._bytes[cls] = self._bytes.get(cls, 0) - int(size)
        for cls, n in gone.items():
            self._evicted.labels(why, cls).inc(n)

    def _bound(self) -> None:
        """Each class over its budget loses its own oldest rows; no class ever makes room in another."""
        for cls, b in self.budgets.items():
            over = self._rows.get(cls, 0) - b.max_rows
            if over > 0:
                self._evict("max_rows", "WHERE cls = ? ORDER BY at, id LIMIT ?", (cls, over))
            while self._bytes.get(cls, 0) > b.max_bytes and self._rows.get(cls, 0) > 0:
                step = max(1, self._rows[cls] // 100)
                self._evict("max_bytes", "WHERE cls = ? ORDER BY at, id LIMIT ?", (cls, step))
        self._writes += 1
        if self._writes % _PRUNE_EVERY == 1:
            self._evict("retention", "WHERE at < ?", (self.clock.now() - self.retention_secs,))

    def _count(self) -> None:
        self._rows, self._bytes = {}, {}
        for cls, n, size in self.store.query(
            f"SELECT cls, COUNT(*), SUM(COALESCE(size, LENGTH(body))) FROM {_TABLE} GROUP BY cls"
        ):
            self._rows[str(cls)], self._bytes[str(cls)] = int(n or 0), int(size or 0)

    def _reload(self) -> None:
        # The store may be failing; the next successful reload corrects the counts.
        with contextlib.suppress(Exception):
            self._count()
            if self.outbox is not None:
                self.outbox.reload()

    def rows(self) -> dict[str, int]:
        """Rows held per retention class."""
        return {c: self._rows.get(c, 0) for c in CLASSES}

    # -- reading ---------------------------------------------------------------------------------------------
    def events(self, kind: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        sql = f"SELECT body FROM {_TABLE}" + (" WHERE kind = ?" if kind else "") + " ORDER BY at DESC LIMIT ?"
        params: tuple[Any, ...] = (kind, limit) if kind else (limit,)
        return [orjson.loads(r[0]) for r in self.store.query(sql, params)]

    def page(self, params: Mapping[str, str], keys: list[str]) -> dict[str, Any]:
        """One page of ``GET /v1/audit``; raises ``QueryError`` for a refused parameter."""
        q = parse([(k, params[k]) for k in keys], self.clock.now())
        sql, args = q.sql(_TABLE)
        rows = self.store.query(sql, args)
        more = len(rows) > q.limit
        rows = rows[: q.limit]
        out: dict[str, Any] = {"events": [orjson.loads(r[2]) for r in rows], "next_cursor": None}
        if more:
            out["next_cursor"] = encode_cursor(float(rows[-1][1]), str(rows[-1][0]))
        return out

    # -- lifecycle -------------------------------------------------------------------------------------------
    async def start(self) -> None:
        if self.es is not None:
            await self.es.start()

    async def shutdown(self) -> None:
        if self.es is not None:
            await self.es.shutdown()

    def readiness(self) -> Readiness | None:
        return None

    def routes(self) -> APIRouter:
        router = APIRouter()

        @router.get("/v1/audit", tags=["audit"])
        async def get_audit(request: Request) -> JSONResponse:
            qp = request.query_params
            try:
                body = self.page({k: qp[k] for k in qp}, [k for k, _ in qp.multi_items()])
            except QueryError as exc:
                self._refused.inc()
                raise self._lists.refuse("/v1/audit", exc) from None
            return JSONResponse(body)

        @router.get("/v1/audit/dead_letters", tags=["audit"])
        async def get_dead_letters(request: Request) -> JSONResponse:
            q = self._lists.parse("/v1/audit/dead_letters", request, ())
            rows = self.dead_letters.rows(q.limit or 100) if self.dead_letters is not None else []
            return JSONResponse(rows)

        return router
