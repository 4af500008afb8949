"""Delivers alert notices to EVERY configured Alertmanager through its v2 API (``POST /api/v2/alerts``).

Each Alertmanager has its own outbox in the embedded store (table ``alertmanager_outbox``), keyed by the
alert's label fingerprint: a newer notice of the same alert replaces the older one, because Alertmanager only
needs an alert's latest state. So the outbox is bounded by the number of alerts (and ``max_outbox``), and
while an Alertmanager is down nothing is lost: when it is back it gets every notice exactly as the book last
held it.

Answers: 2xx removes the delivered rows; 429, 5xx and transport errors keep them and back off (honouring
Retry-After); any other 4xx means Alertmanager will never take the batch as sent: the reason is logged,
counted, and the rows are removed rather than retried forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import httpx
import orjson
from prometheus_client import CollectorRegistry, Counter, Gauge

from exporters.config import AlertmanagerConfig
from exporters.sender import Backoff, RetryPolicy, retry_after_secs
from sidecar.clock import Clock
from sidecar.component import Readiness
from sidecar.naming import fingerprint
from sidecar.store import Store

__all__ = ["AlertmanagerExporter"]

_TABLE = "alertmanager_outbox"


class AlertmanagerExporter:
    name = "alertmanager"
    role = "exporter"

    def __init__(
        self,
        cfg: AlertmanagerConfig,
        *,
        registry: CollectorRegistry,
        clock: Clock,
        store: Store,
        http: httpx.AsyncClient,
        logger: logging.Logger | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.cfg = cfg
        self.clock = clock
        self.store = store
        self.http = http
        self.log = logger or logging.getLogger("sidecar.alertmanager")
        self._sleep = sleep
        self._rng = rng
        # RetryConfig's fields are RetryPolicy's, by name.
        self.policy = RetryPolicy(**cfg.retry.model_dump())
        self._tasks: list[asyncio.Task[None]] = []
        self._wake: dict[str, asyncio.Event] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._last_ok: dict[str, bool] = {}
        lbl = ["alertmanager"]
        self._sent = Counter(
            "sidecar_alertmanager_notices_sent", "Notices Alertmanager accepted.", lbl, registry=registry
        )
        self._rejected = Counter(
            "sidecar_alertmanager_notices_rejected",
            "Notices Alertmanager refused with a 4xx (logged, not retried).",
            lbl,
            registry=registry,
        )
        self._dropped = Counter(
            "sidecar_alertmanager_notices_dropped",
            "Notices not queued because the outbox was full.",
            lbl,
            registry=registry,
        )
        self._failures = Counter(
            "sidecar_alertmanager_request_failures",
            "Failed POSTs that will be retried, by reason (connect, timeout, http_5xx, http_429).",
            [*lbl, "reason"],
            registry=registry,
        )
        self._outbox = Gauge(
            "sidecar_alertmanager_outbox_notices",
            "Notices waiting in the persisted outbox.",
            lbl,
            registry=registry,
        )
        store.execute(
            f"CREATE TABLE IF NOT EXISTS {_TABLE} (am TEXT, fp TEXT, seq INTEGER, payload BLOB, "
            "queued_at REAL, PRIMARY KEY (am, fp))"
        )
        rows = store.query(f"SELECT MAX(seq) FROM {_TABLE}")
        self._seq = int(rows[0][0] or 0)
        for am in cfg.urls:
            self._outbox.labels(am).set(self._count(am))

    def _count(self, am: str) -> int:
        return int(self.store.query(f"SELECT COUNT(*) FROM {_TABLE} WHERE am = ?", (am,))[0][0])

    # -- queueing (any thread) ------------------------------------------------------------------------------
    def enqueue(self, notices: Sequence[Mapping[str, Any]]) -> None:
        now = self.clock.now()
        for am in self.cfg.urls:
            present = {r[0] for r in self.store.query(f"SELECT fp FROM {_TABLE} WHERE am = ?", (am,))}
            rows = []
            for n in notices:
                fp = fingerprint(n["labels"])
                if fp not in present and len(present) >= self.cfg.max_outbox:
                    self._dropped.labels(am).inc()
                    continue
                present.add(fp)
                self._seq += 1
                rows.append((am, fp, self._seq, orjson.dumps(n), now))
            if rows:
                self.store.executemany(
                    f"INSERT OR REPLACE INTO {_TABLE} (am, fp, seq, payload, queued_at) "
                    "VALUES (?, ?, ?, ?, ?)",
                    rows,
                )
            self._outbox.labels(am).set(len(present))
            self._notify(am)

    def _notify(self, am: str) -> None:
        ev = self._wake.get(am)
        if ev is not None and self._loop is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(ev.set)

    def pending(self, am: str) -> list[dict[str, Any]]:
        """The notices waiting for one Alertmanager, oldest first."""
        return [
            orjson.loads(r[0])
            for r in self.store.query(f"SELECT payload FROM {_TABLE} WHERE am = ? ORDER BY seq", (am,))
        ]

    # -- delivery --------------------------------------------------------------------------------------------
    async def flush_once(self, am: str) -> tuple[str, float | None]:
        """POST one batch to one Alertmanager: ("empty"|"sent"|"rejected"|"retry", retry_after_secs)."""
        rows = self.store.query(
            f"SELECT fp, seq, payload FROM {_TABLE} WHERE am = ? ORDER BY seq LIMIT ?",
            (am, self.cfg.max_batch),
        )
        if not rows:
            return "empty", None
        body = b"[" + b",".join(r[2] for r in rows) + b"]"
        reason = ""
        try:
            resp = await self.http.post(
                f"{am}/api/v2/alerts",
                content=body,
                timeout=self.cfg.timeout_secs,
                headers={"Content-Type": "application/json"},
            )
        except httpx.TimeoutException:
            reason = "timeout"
        except httpx.HTTPError:
            reason = "connect"
        else:
            if resp.status_code < 300:
                self._delete(am, rows)
                self._sent.labels(am).inc(len(rows))
                if self._last_ok.get(am) is False:
                    self.log.info("Alertmanager %s is reachable again", am)
                self._last_ok[am] = True
                return "sent", None
            if resp.status_code == 429 or resp.status_code >= 500:
                reason = "http_429" if resp.status_code == 429 else "http_5xx"
                self._failures.labels(am, reason).inc()
                self._down(am, f"answered {resp.status_code}")
                return "retry", retry_after_secs(resp.headers.get("retry-after"), self.clock.now())
            self._delete(am, rows)
            self._rejected.labels(am).inc(len(rows))
            self.log.error(
                "Alertmanager %s refused %d notices with %d: %s",
                am,
                len(rows),
                resp.status_code,
                resp.text[:500],
            )
            return "rejected", None
        self._failures.labels(am, reason).inc()
        self._down(am, reason)
        return "retry", None

    def _down(self, am: str, why: str) -> None:
        if self._last_ok.get(am) is not False:
            self.log.warning("Alertmanager %s unavailable (%s); notices stay in the outbox", am, why)
        self._last_ok[am] = False

    def _delete(self, am: str, rows: list[tuple[Any, ...]]) -> None:
        # Only the exact versions sent: a notice replaced meanwhile has a new seq and stays queued.
        self.store.executemany(
            f"DELETE FROM {_TABLE} WHERE am = ? AND fp = ? AND seq = ?", [(am, r[0], r[1]) for r in rows]
        )
        self._outbox.labels(am).set(self._count(am))

    async def flush_all(self) -> dict[str, str]:
        """Drain every outbox once as far as each Alertmanager allows (no waiting between retries)."""
        out = {}
        for am in self.cfg.urls:
            outcome = "empty"
            for _ in range(10_000):
                outcome, _ra = await self.flush_once(am)
                if outcome in ("empty", "retry"):
                    break
            out[am] = outcome
        return out

    async def _run(self, am: str) -> None:
        backoff = Backoff(self.policy, self._rng)
        ev = self._wake[am]
        while True:
            outcome, retry_after = await self.flush_once(am)
            if outcome in ("sent", "rejected"):
                backoff.reset()
                continue
            if outcome == "retry":
                await self._sleep(backoff.next_delay(retry_after))
                continue
            backoff.reset()
            # asyncio.wait, not wait_for: on Python 3.11 wait_for can swallow a cancel that races the event,
            # which would leave this loop running after shutdown.
            waiter = asyncio.ensure_future(ev.wait())
            try:
                await asyncio.wait({waiter}, timeout=self.cfg.flush_interval_secs)
            finally:
                waiter.cancel()
            ev.clear()

    # -- lifecycle -------------------------------------------------------------------------------------------
    async def start(self) -> None:
        if self._tasks:
            return
        self._loop = asyncio.get_running_loop()
        for am in self.cfg.urls:
            self._wake[am] = asyncio.Event()
            self._tasks.append(asyncio.create_task(self._run(am), name=f"alertmanager-{am}"))

    async def shutdown(self) -> None:
        tasks, self._tasks = self._tasks, []
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=5.0)
        # One last, short try; whatever stays is persisted and sent after the restart.
        if tasks:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.flush_all(), 2.0)

    def readiness(self) -> Readiness | None:
        return None

    def routes(self) -> None:
        return None
