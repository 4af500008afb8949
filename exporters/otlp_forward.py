"""Forward received spans to an OTLP/HTTP endpoint (Jaeger, Tempo, a collector) through the OpenTelemetry
exporter.

The receiver only ``offer()``s spans: a bounded deque append that never blocks and counts a drop when full. A
worker thread drains the queue in batches and calls ``OTLPSpanExporter.export``, which retries 429, 502,
503 and
504 only (with jittered exponential backoff, honouring Retry-After, within ``timeout_secs``) and gives up on
anything else. So a downstream that is down costs queue space and drop counts, never receiver latency.

The exporter sends with its own ``requests`` session, not the sidecar's httpx client: that is the price of
using
the OpenTelemetry exporter as is. A response hook on that session counts every attempt by outcome.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Sequence
from typing import Any

import requests
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags
from prometheus_client import CollectorRegistry, Counter, Gauge

from sidecar.component import Readiness
from sidecar.model import Span
from sidecar.records import Record, to_span
from sidecar.state.trace_config import ForwardConfig

__all__ = ["OtlpForwarder", "to_readable"]

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)


def _attr(v: object) -> Any:
    if isinstance(v, (str, bool, int, float, bytes)):
        return v
    if isinstance(v, tuple) and all(isinstance(x, (str, bool, int, float)) for x in v):
        return v
    return str(v)


def to_readable(s: Span, resources: dict[str, Resource]) -> ReadableSpan:
    """Our frozen ``Span`` as the SDK's ``ReadableSpan`` the exporter encodes (ids and times unchanged)."""
    res = resources.get(s.service_name)
    if res is None:
        if len(resources) > 64:  # service names come from clients: keep the cache bounded
            resources.clear()
        res = resources[s.service_name] = Resource({"service.name": s.service_name} if s.service_name else {})
    tid = int(s.trace_id, 16)
    return ReadableSpan(
        name=s.name,
        context=SpanContext(tid, int(s.span_id, 16), is_remote=False, trace_flags=_SAMPLED),
        parent=SpanContext(tid, int(s.parent_span_id, 16), is_remote=True) if s.parent_span_id else None,
        resource=res,
        attributes={k: _attr(v) for k, v in s.attributes.items()},
        events=[
            Event(e.name, {k: _attr(v) for k, v in e.attributes.items()}, e.time_unix_nano) for e in s.events
        ],
        kind=SpanKind(max(0, s.kind - 1)),  # OTLP's enum starts at UNSPECIFIED=0; the API's at INTERNAL=0
        status=Status(StatusCode(s.status_code), s.status_message or None),
        start_time=s.start_unix_nano,
        end_time=s.end_unix_nano,
    )


class OtlpForwarder:
    name = "otlp_forward"
    role = "exporter"

    def __init__(
        self,
        cfg: ForwardConfig,
        registry: CollectorRegistry,
        logger: logging.Logger | None = None,
        exporter: OTLPSpanExporter | None = None,
    ) -> None:
        assert cfg.endpoint is not None
        self.cfg = cfg
        self.log = logger or logging.getLogger("exporters.otlp_forward")
        # Span records from the receiver stay records here: the worker thread builds the Span objects, so the
        # receiving path never pays for them.
        self._queue: deque[Span | Record] = deque()
        self._cond = threading.Condition()
        self._stop = False
        self._thread: threading.Thread | None = None
        self._resources: dict[str, Resource] = {}
        self._attempts = Counter(
            "sidecar_otlp_forward_requests",
            "Export attempts to the OTLP endpoint, by outcome (retries included).",
            ["outcome"],
            registry=registry,
        )
        self._sent = Counter(
            "sidecar_otlp_forward_spans_sent", "Spans the OTLP endpoint accepted.", registry=registry
        )
        self._dropped = Counter(
            "sidecar_otlp_forward_spans_dropped",
            "Spans not forwarded, by reason (queue_full, export_failed, shutdown).",
            ["reason"],
            registry=registry,
        )
        Gauge(
            "sidecar_otlp_forward_queue_spans", "Spans waiting to be forwarded.", registry=registry
        ).set_function(lambda: len(self._queue))
        if exporter is None:
            session = requests.Session()
            session.hooks["response"].append(self._on_response)
            exporter = OTLPSpanExporter(
                endpoint=cfg.endpoint,
                headers=dict(cfg.headers),
                timeout=cfg.timeout_secs,
                compression=Compression.Gzip if cfg.compression == "gzip" else Compression.NoCompression,
                session=session,
            )
        self._exporter = exporter

    def _on_response(self, resp: requests.Response, *args: object, **kwargs: object) -> None:
        code = resp.status_code
        outcome = "ok" if code < 300 else "retryable" if code in (429, 502, 503, 504) else "permanent"
        self._attempts.labels(outcome).inc()

    def offer(self, spans: Sequence[Span | Record]) -> None:
        with self._cond:
            room = self.cfg.queue_max_spans - len(self._queue)
            if room < len(spans):
                self._dropped.labels("queue_full").inc(len(spans) - max(room, 0))
                spans = spans[: max(room, 0)]
            if spans:
                self._queue.extend(spans)
                self._cond.notify()

    def _take(self) -> list[Span | Record]:
        with self._cond:
            while not self._queue and not self._stop:
                self._cond.wait(1.0)
            n = min(len(self._queue), self.cfg.batch_max_spans)
            return [self._queue.popleft() for _ in range(n)]

    def _run(self) -> None:
        while True:
            batch = self._take()
            if not batch:
                return  # stopping and drained
            self._export(batch)

    def _export(self, batch: list[Span | Record]) -> None:
        try:
            spans = [to_span(s) if isinstance(s, tuple) else s for s in batch]
            result = self._exporter.export([to_readable(s, self._resources) for s in spans])
        except Exception:
            self.log.exception("OTLP forward failed")
            result = SpanExportResult.FAILURE
        if result is SpanExportResult.SUCCESS:
            self._sent.inc(len(batch))
        else:
            self._dropped.labels("export_failed").inc(len(batch))

    async def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="otlp-forward", daemon=True)
        self._thread.start()

    async def shutdown(self) -> None:
        thread, self._thread = self._thread, None
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if thread is not None:
            # The worker drains the queue and ends by itself once told to stop; wait for that, bounded.
            await asyncio.to_thread(thread.join, self.cfg.shutdown_flush_secs)
        with self._cond:
            left = len(self._queue)
            self._queue.clear()
        if left:
            self._dropped.labels("shutdown").inc(left)
        # Aborts an in-flight retry wait so the worker ends promptly.
        self._exporter.shutdown()
        if thread is not None:
            await asyncio.to_thread(thread.join, 5.0)

    def readiness(self) -> Readiness | None:
        return None

    def routes(self) -> None:
        return None
