"""``POST /v1/events``: batches of prediction events as JSON (or JSON Lines), partially accepted.

Answers: 200 ``{"accepted": n, "rejected": [...]}`` when at least one event was accepted (rejected ones are
listed with their index and field, like OTLP's partial success, so a client never re-sends the good ones);
400 with the same body when none was; 400 for a body that is not JSON; 413 for too many events or too many
bytes; 415 for a Content-Type other than JSON or JSON Lines (none is read as JSON); 401/429/503/415 from the
request guard; 500 naming the subscriber when one failed on the batch (``sidecar.pushfail``).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from sidecar.clock import Clock
from sidecar.component import Bus, Passive, Role
from sidecar.httpguard import RequestGuard
from sidecar.model import Batch
from sidecar.probe_marker import split_probe_events
from sidecar.sources.events.columns import parse_columns
from sidecar.sources.events.config import EventsConfig
from sidecar.sources.events.metrics import EventsMetrics
from sidecar.sources.events.parse import Rejection, parse_events
from sidecar.sources.events.typed import TypedDoor
from sidecar.sources.media import JSON, JSON_LINES, decode_documents, media_type

__all__ = ["EventsEndpoint"]

ENDPOINT = "/v1/events"
_DESCRIPTION = (
    'A batch of prediction events: one object, a list, `{"events": [...]}`, or JSON Lines. 200 lists what was '
    "accepted and, per index and field, what was rejected; 400 when nothing was usable. **Durability: at most "
    "once.** A 200 means the events were added to the drift windows and business buckets in memory; those are "
    "written to the store after every evaluation round (business, `checks.eval_interval_secs`) and every "
    "`checks.drift.persist_interval_secs` (drift), so events acknowledged since the last write are lost if the "
    "process is killed (kill -9, OOM). A graceful stop writes everything. Figures: docs/reliability.md."
)


class EventsEndpoint(Passive):
    name = "events_http"
    role = Role.SOURCE

    def __init__(
        self, cfg: EventsConfig, *, metrics: EventsMetrics, bus: Bus, guard: RequestGuard, clock: Clock
    ) -> None:
        self.cfg = cfg
        self.m = metrics
        self.bus = bus
        self.guard = guard
        self.clock = clock
        self.typed = TypedDoor(cfg)

    def _decode(self, body: bytes, mtype: str) -> list[Any]:
        return decode_documents(
            body, mtype, wrapper="events", max_docs=self.cfg.max_events_per_batch, what="an event object"
        )

    def _docs(self, body: bytes, mtype: str) -> list[Any]:
        """The body's documents, or the counted 400 (not JSON) or 413 (too many events)."""
        guard = self.guard
        try:
            docs = self._decode(body, mtype)
        except ValueError as exc:
            self.m.rejected.labels("http", "not_json").inc()
            raise guard.refuse(ENDPOINT, "bad_request", 400, str(exc)) from None
        if len(docs) > self.cfg.max_events_per_batch:
            self.m.rejected.labels("http", "too_many").inc(len(docs))
            raise guard.refuse(
                ENDPOINT, "too_large", 413, f"more than {self.cfg.max_events_per_batch} events in one request"
            )
        return docs

    async def handle(self, request: Request) -> JSONResponse:
        guard = self.guard
        guard.authorize(request, "push", ENDPOINT)
        mtype = media_type(request, JSON + JSON_LINES, guard, ENDPOINT)
        async with guard.admit(ENDPOINT):
            body = await guard.read_body(request, ENDPOINT)
            now = self.clock.now()
            rejected: list[Rejection] = []
            # The common shape with the feature names of the last columnar batch, decoded typed; else None.
            columns = self.typed.body(body, mtype in JSON_LINES, now)
            if columns is None:
                docs = self._docs(body, mtype)
                columns = parse_columns(docs, self.cfg, now)  # the common shape, checked as arrays; else None
                if columns is not None:
                    self.typed.learn(columns)
            if columns is not None:
                n = sum(c.n for c in columns)
                batch, n_accepted = Batch("event_columns", "http", tuple(columns), now), n
            else:
                events, rejected = parse_events(docs, self.cfg, now)
                events, probes = split_probe_events(events)  # the model probe's own traffic: not an SLI
                if probes:
                    self.m.rejected.labels("http", "probe").inc(probes)
                batch, n_accepted = Batch("events", "http", tuple(events), now), len(events)
            if n_accepted:
                failed = self.bus.publish(batch)
                if (failure := guard.push_failures.check(ENDPOINT, failed)) is not None:
                    return failure.response()  # 500 naming the subscribers, counted (sidecar.pushfail)
                self.m.received.labels("http").inc(n_accepted)
            if rejected:
                self.m.rejected.labels("http", "invalid").inc(len(rejected))
            listed = [r.as_dict() for r in rejected[: self.cfg.max_rejections_listed]]
            content: dict[str, Any] = {"accepted": n_accepted, "rejected_count": len(rejected), "rejected": listed}
            if rejected:
                first = rejected[0]
                content["error"] = f"{first.field}: {first.error}" + (
                    f" (and {len(rejected) - 1} more rejected)" if len(rejected) > 1 else ""
                )
            status = 400 if rejected and not n_accepted else 200
            if status == 400:
                guard.refused.labels(ENDPOINT, "invalid").inc()
            return JSONResponse(status_code=status, content=content)

    def routes(self) -> APIRouter | None:
        router = APIRouter()

        @router.post(
            ENDPOINT,
            tags=["events"],
            summary="Push prediction events (drift and business checks)",
            description=_DESCRIPTION,
        )
        async def post_events(request: Request) -> JSONResponse:
            return await self.handle(request)

        return router
