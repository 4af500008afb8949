"""The change log: deploys posted by CI (``POST /v1/changes``) and model versions seen coming and going in
Triton's repository index. Alerts are annotated with the most recent relevant changes.

Changes are persisted in the embedded store (table ``alerting_changes``), bounded by ``max_changes``. The last
repository snapshot is kept too, so a restart does not record every loaded version as new.
"""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import UTC, datetime
from typing import Any

import httpx
import orjson
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from prometheus_client import CollectorRegistry, Counter
from pydantic import Field, ValidationError, field_validator

from sidecar.clock import Clock
from sidecar.component import Readiness
from sidecar.configbase import StrictModel
from sidecar.model import Batch, Change
from sidecar.periodic import Periodic
from sidecar.state.changes_config import ChangesConfig
from sidecar.store import Store

__all__ = ["ChangeIn", "ChangeLog", "iso"]

_TABLE = "alerting_changes"
_KV = "alerting_changes"


# Unix seconds a change may carry: 2000-01-01 .. 2100-01-01. Outside that a value is a unit mistake (ms, us)
# or garbage, and a stored one would break every read that renders it as a date.
MIN_AT, MAX_AT = 946_684_800.0, 4_102_444_800.0


def renderable(ts: float) -> bool:
    return MIN_AT <= ts <= MAX_AT


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class ChangeIn(StrictModel):
    """The body of ``POST /v1/changes`` (one object, or a list of them)."""

    what: str = Field(min_length=1, max_length=500, description="What changed (e.g. 'feature PR#221').")
    who: str = Field("", max_length=200, description="Who made the change.")
    at: float | None = Field(None, description="Unix seconds; default: when received.")
    model: str | None = Field(None, max_length=200, description="Model concerned; none: every model.")
    version: str | None = Field(None, max_length=100, description="Model version concerned.")
    link: str | None = Field(None, max_length=2000, description="A link, e.g. the pull request.")
    id: str | None = Field(
        None, max_length=200, description="Idempotency key; default: derived from the fields."
    )

    @field_validator("at")
    @classmethod
    def _at_in_range(cls, v: float | None) -> float | None:
        if v is None:
            return v
        if not renderable(v):
            hint = " (this looks like milliseconds: send seconds)" if MAX_AT * 100 < v < MAX_AT * 1e4 else ""
            raise ValueError(f"must be Unix seconds between {MIN_AT:.0f} (2000-01-01) and {MAX_AT:.0f} "
                             f"(2100-01-01), got {v!r}{hint}")
        return v


class ChangeLog:
    name = "changes"
    role = "sink"

    def __init__(
        self,
        cfg: ChangesConfig,
        *,
        registry: CollectorRegistry,
        clock: Clock,
        store: Store,
        http: httpx.AsyncClient,
        guard: Any,
        triton_http_url: str | None,
        audit: Any | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        self.cfg = cfg
        self.clock = clock
        self.store = store
        self.http = http
        self.guard = guard
        self.triton_url = triton_http_url.rstrip("/") if triton_http_url else None
        self.audit = audit  # the audit log (``record(kind, id, at, doc)``), handed over by wiring
        self.log = logger or logging.getLogger("sidecar.changes")
        self._periodic = Periodic("changes-poll", self.poll_once, self.cfg.poll_interval_secs,
                                  on_error=self._poll_crashed)
        self._last_poll_ok: bool | None = None
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
        self._poll_errors = Counter(
            "sidecar_changes_poll_errors",
            "Failed polls of Triton's repository index, by reason.",
            ["reason"],
            registry=registry,
        )
        store.execute(
            f"CREATE TABLE IF NOT EXISTS {_TABLE} (id TEXT PRIMARY KEY, at REAL, what TEXT, who TEXT, "
            "model TEXT, version TEXT, link TEXT, source TEXT)"
        )
        store.execute(f"CREATE INDEX IF NOT EXISTS {_TABLE}_at ON {_TABLE} (at)")

    # -- API --
    def record(self, change: Change) -> Change:
        """Store a change (idempotent on its id); returns it with its id filled in."""
        if not change.id:
            raw = f"{change.what}|{change.who}|{change.at}|{change.model}|{change.version}|{change.link}"
            change = Change(
                what=change.what,
                at=change.at,
                who=change.who,
                model=change.model,
                version=change.version,
                link=change.link,
                source=change.source,
                id=hashlib.sha1(raw.encode()).hexdigest()[:20],
            )
        n = self.store.execute(
            f"INSERT OR IGNORE INTO {_TABLE} (id, at, what, who, model, version, link, source) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                change.id,
                change.at,
                change.what,
                change.who,
                change.model,
                change.version,
                change.link,
                change.source,
            ),
        )
        if n:
            self._recorded.labels(change.source).inc()
            self._evict()
            if self.audit is not None:
                self.audit.record("change", change.id, change.at, _as_dict(change))
        return change

    def on_changes(self, batch: Batch) -> None:
        """The bus subscriber: changes published by other components (e.g. a drift reference change)."""
        for change in batch.items:
            self.record(change)

    def recent(
        self, model: str | None, version: str | None, since: float, limit: int = 50, *, until: float | None = None
    ) -> list[Change]:
        """Changes since ``since`` (and at or before ``until``) concerning this model (or every model), newest
        first."""
        sql = f"SELECT id, at, what, who, model, version, link, source FROM {_TABLE} WHERE at >= ?"
        params: list[Any] = [since]
        if until is not None:
            sql += " AND at <= ?"
            params.append(until)
        if model is not None:
            sql += " AND (model IS NULL OR model = ?)"
            params.append(model)
        if version is not None:
            sql += " AND (version IS NULL OR version = ?)"
            params.append(version)
        sql += " ORDER BY at DESC, id LIMIT ?"
        params.append(limit)
        out: list[Change] = []
        for r in self.store.query(sql, params):
            if not isinstance(r[1], int | float) or not renderable(float(r[1])):
                self._unreadable.inc()
                continue
            out.append(Change(
                id=r[0], at=r[1], what=r[2], who=r[3] or "", model=r[4], version=r[5], link=r[6], source=r[7]
            ))
        return out

    def _evict(self) -> None:
        rows = self.store.query(f"SELECT COUNT(*) FROM {_TABLE}")
        over = int(rows[0][0]) - self.cfg.max_changes
        if over > 0:
            self.store.execute(
                f"DELETE FROM {_TABLE} WHERE id IN (SELECT id FROM {_TABLE} ORDER BY at LIMIT ?)", (over,)
            )
            self._evicted.inc(over)

    # -- Triton repository index --
    async def poll_once(self) -> list[Change]:
        """Poll the repository index once; returns the changes it recorded."""
        if self.triton_url is None:
            return []
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
            ready = sorted(
                {f"{e['name']}\x1f{e.get('version', '')}" for e in entries if e.get("state") == "READY"}
            )
        except (orjson.JSONDecodeError, TypeError, KeyError, AttributeError):
            self._poll_failed("parse", "repository index is not the expected JSON list")
            return []
        self._last_poll_ok = True
        prev_raw = self.store.get(_KV, "snapshot")
        self.store.put(_KV, "snapshot", json.dumps(ready))
        if prev_raw is None:
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
                self.record(
                    Change(
                        what=f"version {version} {verb} in Triton",
                        at=now,
                        who="triton",
                        model=model,
                        version=version or None,
                        source="triton_repository",
                    )
                )
            )
        return out

    def _poll_failed(self, reason: str, message: str) -> None:
        self._poll_errors.labels(reason).inc()
        if self._last_poll_ok is not False:
            self.log.warning("%s", message)
        self._last_poll_ok = False

    def _poll_crashed(self, exc: Exception) -> None:
        self._poll_errors.labels("internal").inc()
        self.log.error("repository poll failed", exc_info=exc)

    # -- lifecycle -------------------------------------------------------------------------------------------
    async def start(self) -> None:
        if self.cfg.poll_repository and self.triton_url:
            self._periodic.start()

    async def shutdown(self) -> None:
        await self._periodic.stop()

    def readiness(self) -> Readiness | None:
        return None

    # -- HTTP ------------------------------------------------------------------------------------------------
    def routes(self) -> APIRouter:
        router = APIRouter()

        @router.post("/v1/changes", status_code=201)
        async def post_changes(request: Request) -> JSONResponse:
            self.guard.authorize(request, "push", "changes")
            async with self.guard.admit("changes"):
                body = await self.guard.read_body(request, "changes")
                try:
                    data = orjson.loads(body)
                except orjson.JSONDecodeError as exc:
                    raise self.guard.refuse("changes", "bad_json", 400, f"body is not JSON: {exc}") from None
                items = data if isinstance(data, list) else [data]
                if len(items) > 1000:
                    raise self.guard.refuse("changes", "too_many", 413, "at most 1000 changes per request")
                parsed: list[ChangeIn] = []
                for i, item in enumerate(items):
                    try:
                        parsed.append(ChangeIn.model_validate(item))
                    except ValidationError as exc:
                        e = exc.errors()[0]
                        where = ".".join(str(p) for p in e["loc"])
                        prefix = f"[{i}]." if isinstance(data, list) else ""
                        raise self.guard.refuse(
                            "changes", "invalid", 400, f"{prefix}{where}: {e['msg']}"
                        ) from None
                now = self.clock.now()
                ids = [
                    self.record(
                        Change(
                            what=c.what,
                            who=c.who,
                            at=c.at if c.at is not None else now,
                            model=c.model,
                            version=c.version,
                            link=c.link,
                            source="api",
                            id=c.id or "",
                        )
                    ).id
                    for c in parsed
                ]
            return JSONResponse(status_code=201, content={"ids": ids})

        @router.get("/v1/changes")
        async def get_changes(
            model: str | None = None, version: str | None = None, since: float = 0.0, limit: int = 100
        ) -> JSONResponse:
            rows = self.recent(model, version, since, max(1, min(limit, 1000)))
            return JSONResponse(content=[_as_dict(c) for c in rows])

        return router


def _as_dict(c: Change) -> dict[str, Any]:
    return {
        "id": c.id,
        "at": c.at,
        "at_iso": iso(c.at),
        "what": c.what,
        "who": c.who,
        "model": c.model,
        "version": c.version,
        "link": c.link,
        "source": c.source,
    }
