"""Delivers alert notices to EVERY configured Alertmanager through its v2 API (``POST /api/v2/alerts``).

Each Alertmanager has its own durable outbox in the embedded store (``exporters.outbox``), drained by its own
``exporters.sender.Sender``: the one retry loop every exporter shares. While an Alertmanager is down nothing
is lost: when it is back it gets every notice exactly as the book last held it.

Answers: 2xx removes the delivered rows; 408, 429, 5xx and transport errors keep them and back off
(honouring Retry-After); any other 4xx means Alertmanager will never take the batch as sent: the reason is
logged, counted, and the rows are removed rather than retried forever.

Outcomes worth an audit row go to ``on_outcome`` (wiring turns them into audit events): a notice refused for
good, and a notice delivered only after failed attempts, each with the attempt count. The count is held in
memory per alert (bounded by ``max_outbox``): after a restart the attempts of the process before are not in it.
The outbox is durable and never given up on, so "gave up after retries" does not happen here.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
from prometheus_client import CollectorRegistry, Counter, Gauge

from exporters.config import AlertmanagerConfig
from exporters.httpauth import client_for, request_auth
from exporters.outbox import OutboxQueue, OutboxRow
from exporters.sender import (
    DeliveryError,
    Outcome,
    Partial,
    RefusedError,
    RetryPolicy,
    Sender,
    check_response,
    scrub,
)
from exporters.telemetry import ExportTelemetry
from sidecar.clock import Clock
from sidecar.component import Readiness, Role
from sidecar.delivery_state import delivery_state
from sidecar.redact import mask_url
from sidecar.store import Store

__all__ = ["AlertmanagerExporter", "DeliveryOutcome"]


@dataclass(frozen=True)
class DeliveryOutcome:
    what: str  # delivery_failed | delivered_after_retry
    alertmanager: str  # masked URL
    fingerprint: str
    notice: Mapping[str, Any]
    digest: str  # of the notice as sent, so two outcomes of different notices never share an id
    attempts: int  # POSTs that carried this alert's notice since it was last delivered, this one included
    reason: str  # Alertmanager's answer (refused), or the last failure before it went through
    status: int | None
    at: float


class _Refused(RefusedError):
    """A refusal with the answer it came in, for the log and the audit row."""

    def __init__(self, reason: str, message: str, response: httpx.Response) -> None:
        super().__init__(reason, message)
        self.response = response


class AlertmanagerExporter:
    name = "alertmanager"
    role = Role.EXPORTER

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
        on_outcome: Callable[[Sequence[DeliveryOutcome]], None] | None = None,
    ) -> None:
        self.cfg = cfg
        self.on_outcome = on_outcome
        self.clock = clock
        self.store = store
        self.http = client_for(cfg, http)
        self._owns_http = self.http is not http
        self._auth = request_auth(cfg)
        self.log = logger or logging.getLogger("sidecar.alertmanager")
        # RetryConfig's fields are RetryPolicy's, by name.
        self.policy = RetryPolicy(**cfg.retry.model_dump())
        self._started = False
        # The per-Alertmanager families predate the shared ones (alerts and dashboards use them); the label is
        # the masked URL, so a credential in a URL can never reach /metrics.
        lbl = ["alertmanager"]
        self._delivered: dict[str, int] = {}  # notices accepted per (masked) Alertmanager, bounded by the config
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
            "Failed POSTs that will be retried, by reason (connect, timeout, http_5xx, http_429, http_408).",
            [*lbl, "reason"],
            registry=registry,
        )
        outbox = Gauge(
            "sidecar_alertmanager_outbox_notices",
            "Notices waiting in the persisted outbox.",
            lbl,
            registry=registry,
        )
        stats = ExportTelemetry.of(registry).exporter("alertmanager")
        self.outboxes: dict[str, OutboxQueue] = {}
        self.senders: dict[str, Sender[OutboxRow]] = {}
        for am in cfg.urls:
            shown = mask_url(am)
            q = self.outboxes[am] = OutboxQueue(
                store, am, max_items=cfg.max_outbox, clock=clock, on_refused=self._dropped.labels(shown).inc
            )
            outbox.labels(shown).set_function(q.__len__)
            self.senders[am] = Sender(
                f"Alertmanager {shown}",
                self._poster(am),
                policy=self.policy,
                queue=q,
                max_batch=cfg.max_batch,
                stats=stats,
                clock=clock,
                sleep=sleep,
                rng=rng,
                logger=self.log,
                idle_wake_secs=cfg.flush_interval_secs,
            )

    def _poster(self, am: str) -> Callable[[list[OutboxRow]], Awaitable[Sequence[OutboxRow] | Partial[OutboxRow]]]:
        shown = mask_url(am)
        failed: dict[str, tuple[int, str]] = {}  # fingerprint -> (failed POSTs since delivered, last reason)

        def note(rows: list[OutboxRow], reason: str) -> None:
            for r in rows:
                failed[r.fp] = (failed.get(r.fp, (0, ""))[0] + 1, reason)
            while len(failed) > self.cfg.max_outbox:  # an alert cleared from the outbox meanwhile
                del failed[next(iter(failed))]

        def report(what: str, rows: list[OutboxRow], reason: str | None, status: int | None) -> None:
            now = self.clock.now()
            out = []
            for r in rows:
                n, last = failed.pop(r.fp, (0, ""))
                if what == "delivered_after_retry" and n == 0:
                    continue
                out.append(
                    DeliveryOutcome(
                        what,
                        shown,
                        r.fp,
                        orjson.loads(r.payload),
                        hashlib.sha256(r.payload).hexdigest()[:16],
                        n + 1,
                        last if reason is None else reason,
                        status,
                        now,
                    )
                )
            if out and self.on_outcome is not None:
                try:
                    self.on_outcome(out)
                except Exception:  # the audit failing must not stop delivery (it counts its own errors)
                    self.log.exception("could not report %d delivery outcomes", len(out))

        async def post_once(rows: list[OutboxRow]) -> httpx.Response:
            body = b"[" + b",".join(r.payload for r in rows) + b"]"
            try:
                resp = await self.http.post(
                    f"{am}/api/v2/alerts",
                    content=body,
                    timeout=self.cfg.timeout_secs,
                    headers={"Content-Type": "application/json"},
                    auth=self._auth,
                )
                check_response(resp, self.clock.now(), f"Alertmanager {shown}")
            except httpx.TimeoutException:
                self._failures.labels(shown, "timeout").inc()
                note(rows, "timeout")
                raise
            except httpx.HTTPError:
                self._failures.labels(shown, "connect").inc()
                note(rows, "connect")
                raise
            except DeliveryError as exc:
                self._failures.labels(shown, exc.reason).inc()
                note(rows, exc.reason)
                raise
            except RefusedError as exc:
                raise _Refused(exc.reason, str(exc), resp) from None
            self._sent.labels(shown).inc(len(rows))
            self._delivered[shown] = self._delivered.get(shown, 0) + len(rows)  # for readiness's word
            report("delivered_after_retry", rows, None, resp.status_code)
            return resp

        def refused(rows: list[OutboxRow], resp: httpx.Response) -> None:
            self._rejected.labels(shown).inc(len(rows))
            report("delivery_failed", rows, f"HTTP {resp.status_code}: {scrub(resp.text[:500])}", resp.status_code)
            self.log.error(
                "Alertmanager %s refused %d notices with %d: %s",
                shown,
                len(rows),
                resp.status_code,
                scrub(resp.text[:500]),
            )

        async def post(rows: list[OutboxRow]) -> Sequence[OutboxRow] | Partial[OutboxRow]:
            try:
                await post_once(rows)
                return []
            except _Refused as exc:
                if len(rows) == 1:
                    refused(rows, exc.response)
                    raise
            # Alertmanager 0.25 answers 400 to a batch holding one invalid alert (it stores the valid ones all
            # the same): each notice is sent alone, so only the invalid ones are dropped and recorded as failed.
            retry: list[OutboxRow] = []
            bad = 0
            for i, r in enumerate(rows):
                try:
                    await post_once([r])
                except _Refused as exc:
                    refused([r], exc.response)
                    bad += 1
                except (httpx.HTTPError, DeliveryError):
                    retry.extend(rows[i:])  # down meanwhile: the rest waits for the next attempt, not a timeout each
                    break
            if bad == len(rows):
                raise RefusedError("http_4xx", f"Alertmanager {shown} refused each of {len(rows)} notices")
            return Partial(retry, bad)

        return post

    # -- queueing (any thread) ------------------------------------------------------------------------------
    def enqueue(self, notices: Sequence[Mapping[str, Any]]) -> None:
        for sender in self.senders.values():
            sender.submit_many(notices)

    def pending(self, am: str) -> list[dict[str, Any]]:
        """The notices waiting for one Alertmanager, oldest first."""
        return self.outboxes[am].pending()

    # -- delivery --------------------------------------------------------------------------------------------
    async def flush_once(self, am: str) -> tuple[str, float | None]:
        """POST one batch to one Alertmanager: ("empty"|"sent"|"rejected"|"retry", retry_after_secs)."""
        out: Outcome = await self.senders[am].attempt()
        return out.kind, out.retry_after

    async def flush_all(self) -> dict[str, str]:
        """Drain every outbox once as far as each Alertmanager allows (no waiting between retries)."""
        return {am: await s.drain_now() for am, s in self.senders.items()}

    # -- lifecycle -------------------------------------------------------------------------------------------
    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        for s in self.senders.values():
            await s.start()

    async def shutdown(self) -> None:
        if self._started:
            self._started = False
            # One last, short try each; whatever stays is persisted and sent after the restart.
            await asyncio.gather(*(s.shutdown(deadline_secs=2.0) for s in self.senders.values()))
        if self._owns_http:
            await self.http.aclose()

    def readiness(self) -> Readiness | None:
        """Always ready (an Alertmanager outage must not take the sidecar out of service: the outbox holds
        the notices), but /readyz says which Alertmanager is behind and by how much; URLs masked."""
        if not self.senders:
            return None
        parts = []
        for am, s in self.senders.items():
            sent = self._delivered.get(mask_url(am), 0)
            parts.append(f"{mask_url(am)}: {delivery_state(queued=len(s), failed=s.down, sent=sent)}, {len(s)} queued")
        return Readiness(ok=True, detail="; ".join(parts))

    def routes(self) -> None:
        return None
