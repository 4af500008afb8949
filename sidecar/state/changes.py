"""The change log: every change published on the bus (deploys posted to ``POST /v1/changes``, model versions
seen coming and going in Triton's repository index, drift reference changes), stored and queried. Alerts are
annotated with the most recent relevant changes.

Changes are persisted in the embedded store (table ``alerting_changes``), bounded by ``max_changes``. A change
and its audit row are written in one transaction: both are stored, or neither.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from prometheus_client import CollectorRegistry, Counter

from sidecar.clock import Clock
from sidecar.component import Passive, Role
from sidecar.listparams import ListParamError, ListParams, finite, text
from sidecar.model import Batch, Change
from sidecar.state.changes_config import ChangesConfig
from sidecar.store import Store
from sidecar.timerange import MAX_AT, MIN_AT, renderable

__all__ = ["AuditWriter", "ChangeLog", "as_dict", "derived_id", "iso"]

_TABLE = "alerting_changes"
ROUTE = "/v1/changes"
_COLS = "id, at, what, who, model, version, link, source"
# Rows a read can render: a number within the date range (see sidecar/timerange.py).
_RENDERABLE = "typeof(at) IN ('integer', 'real') AND at BETWEEN ? AND ?"


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class AuditWriter(Protocol):
    """The audit log as the change log uses it (``exporters.audit.AuditLog``, handed over by wiring)."""

    def write(self, kind: str, event_id: str, at: float, body: Mapping[str, Any]) -> dict[str, Any] | None: ...

    def committed(self, event_id: str, doc: dict[str, Any]) -> None: ...

    def failed(self, n: int, exc: BaseException) -> None: ...


def derived_id(c: Change) -> str:
    """The id of a change that came without one: a hash of its fields, defaults filled in, and its time."""
    raw = f"{c.what}|{c.who}|{c.at}|{c.model}|{c.version}|{c.link}"
    return hashlib.sha1(raw.encode()).hexdigest()[:20]


class ChangeLog(Passive):
    name = "changes"
    role = Role.SINK

    def __init__(
        self,
        cfg: ChangesConfig,
        *,
        registry: CollectorRegistry,
        clock: Clock,
        store: Store,
        audit: AuditWriter | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        self.cfg = cfg
        self.clock = clock
        self.store = store
        self.audit = audit
        self.log = logger or logging.getLogger("sidecar.changes")
        self._unreadable = Counter(
            "sidecar_changes_unreadable",
            "Stored changes skipped by a read because their time cannot be rendered (written before times were "
            "checked at the door); they never block a read or an alert.",
            registry=registry,
        )
        self._recorded = Counter(
            "sidecar_changes_recorded", "Changes recorded, by source.", ["source"], registry=registry
        )
        self._evicted = Counter(
            "sidecar_changes_evicted", "Oldest changes deleted to stay under max_changes.", registry=registry
        )
        self._lists = ListParams.of(registry)
        store.execute(f"CREATE TABLE IF NOT EXISTS {_TABLE} ({_COLS.replace('id,', 'id TEXT PRIMARY KEY,')})")
        store.execute(f"CREATE INDEX IF NOT EXISTS {_TABLE}_at ON {_TABLE} (at)")

    # -- writing -----------------------------------------------------------------------------------------
    def record(self, change: Change) -> Change:
        """Store a change (idempotent on its id); returns it with its id filled in."""
        return self.record_many([change])[0]

    def record_many(self, changes: Iterable[Change]) -> list[Change]:
        """Store changes and their audit rows in one transaction (all or none; raises when not stored);
        a change whose id is already stored is left as it is. Returns them with their ids filled in."""
        done = [c if c.id else _with_id(c, derived_id(c)) for c in changes]
        new: list[Change] = []
        audited: list[tuple[str, dict[str, Any]]] = []
        try:
            with self.store.transaction():
                for c in done:
                    if self.store.execute(
                        f"INSERT OR IGNORE INTO {_TABLE} ({_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        (c.id, c.at, c.what, c.who, c.model, c.version, c.link, c.source),
                    ):
                        new.append(c)
                        if self.audit is not None:
                            doc = self.audit.write("change", c.id, c.at, as_dict(c))
                            if doc is not None:
                                audited.append((c.id, doc))
                evicted = self._evict() if new else 0
        except Exception as exc:
            if self.audit is not None and new:
                self.audit.failed(len(new), exc)  # their audit rows were rolled back with them
            raise
        for c in new:
            self._recorded.labels(c.source).inc()
        self._evicted.inc(evicted)
        if self.audit is not None:
            for cid, doc in audited:
                self.audit.committed(cid, doc)
        return done

    def on_changes(self, batch: Batch) -> None:
        """The bus subscriber: raises when the batch could not be stored, so the publisher learns of it."""
        self.record_many(batch.items)

    def _evict(self) -> int:
        over = int(self.store.query(f"SELECT COUNT(*) FROM {_TABLE}")[0][0]) - self.cfg.max_changes
        if over <= 0:
            return 0
        self.store.execute(f"DELETE FROM {_TABLE} WHERE id IN (SELECT id FROM {_TABLE} ORDER BY at LIMIT ?)", (over,))
        return over

    # -- queries -----------------------------------------------------------------------------------------
    def get(self, ids: Sequence[str]) -> dict[str, Change]:
        """The stored changes among ``ids``, by id."""
        if not ids:
            return {}
        marks = ", ".join("?" * len(ids))
        rows = self.store.query(f"SELECT {_COLS} FROM {_TABLE} WHERE id IN ({marks})", list(ids))
        return {r[0]: _row(r) for r in rows}

    def find_same(self, change: Change, since: float) -> Change | None:
        """The newest change posted over the API with the same fields as ``change`` at a time in
        ``[since, change.at]``: what a retry without any key is matched against."""
        rows = self.store.query(
            f"SELECT {_COLS} FROM {_TABLE} WHERE source = ? AND what = ? AND who = ? AND model IS ? "
            "AND version IS ? AND link IS ? AND at BETWEEN ? AND ? ORDER BY at DESC LIMIT 1",
            (change.source, change.what, change.who, change.model, change.version, change.link, since, change.at),
        )
        return _row(rows[0]) if rows else None

    def recent(
        self, model: str | None, version: str | None, since: float, limit: int = 50, *, until: float | None = None
    ) -> list[Change]:
        """Up to ``limit`` changes since ``since`` (and at or before ``until``) concerning this model (or every
        model), newest first."""
        where = " WHERE at >= ?"
        params: list[Any] = [since]
        if until is not None:
            where += " AND at <= ?"
            params.append(until)
        if model is not None:
            where += " AND (model IS NULL OR model = ?)"
            params.append(model)
        if version is not None:
            where += " AND (version IS NULL OR version = ?)"
            params.append(version)
        # Only renderable rows count against LIMIT (skipping them after it returned fewer than asked).
        sql = f"SELECT {_COLS} FROM {_TABLE}{where} AND {_RENDERABLE} ORDER BY at DESC, id LIMIT ?"
        out = [_row(r) for r in self.store.query(sql, [*params, MIN_AT, MAX_AT, limit])]
        skipped = self.store.query(
            f"SELECT COUNT(*) FROM {_TABLE}{where} AND NOT ({_RENDERABLE})", [*params, MIN_AT, MAX_AT]
        )[0][0]
        if skipped:
            self._unreadable.inc(int(skipped))
        return out

    # -- HTTP ------------------------------------------------------------------------------------------------
    def routes(self) -> APIRouter:
        router = APIRouter()

        @router.get("/v1/changes")
        async def get_changes(request: Request) -> JSONResponse:
            """Changes newest first. ``model``, ``version``: this model and version (or every model); ``since``:
            Unix seconds; ``limit``: 1 to 1000 (default 100). Refused (400): what sidecar.listparams refuses."""
            q = self._lists.parse(ROUTE, request, ("model", "version", "since"))
            try:
                model = text("model", q.params["model"]) if "model" in q.params else None
                version = text("version", q.params["version"]) if "version" in q.params else None
                since = finite("since", q.params["since"]) if "since" in q.params else 0.0
            except ListParamError as exc:
                raise self._lists.refuse(ROUTE, exc) from None
            rows = self.recent(model, version, since, q.limit or 100)
            return JSONResponse(content=[as_dict(c) for c in rows])

        return router


def _with_id(c: Change, cid: str) -> Change:
    return Change(
        what=c.what, at=c.at, who=c.who, model=c.model, version=c.version, link=c.link, source=c.source, id=cid
    )


def _row(r: tuple[Any, ...]) -> Change:
    return Change(id=r[0], at=r[1], what=r[2], who=r[3] or "", model=r[4], version=r[5], link=r[6], source=r[7])


def as_dict(c: Change) -> dict[str, Any]:
    return {
        "id": c.id,
        "at": c.at,
        "at_iso": iso(c.at) if renderable(c.at) else None,
        "what": c.what,
        "who": c.who,
        "model": c.model,
        "version": c.version,
        "link": c.link,
        "source": c.source,
    }
