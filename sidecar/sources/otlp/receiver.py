"""OTLP/HTTP trace receiver: ``POST /v1/traces`` as the OTLP specification asks.

- ``application/x-protobuf`` and ``application/json`` bodies (optionally gzip/deflate), answered in the same
  content type: an ``ExportTraceServiceResponse`` on success, with ``partial_success`` when spans were
  rejected.
- Errors carry a ``google.rpc.Status`` body in the request's content type: 400 undecodable or a name over
  ``traces.limits`` (``limits``; stored text over them is kept truncated and counted instead), 413 too large
  (after decompression too), 415 other content types, 429/503 with Retry-After when overloaded, 401 without
  the token.

The route is a raw ASGI endpoint (a Starlette ``Route`` whose endpoint is this object), not a FastAPI route:
FastAPI's per-request machinery (dependency solving, response classes) costs ~50 us a request, a quarter of
the whole budget at 2,000 requests of 100 spans a second on one core. The shared ``RequestGuard`` still does
authorisation, admission, size limits and decompression. Spans are decoded and ingested in the request
and published on the bus in the request (the trace hub stores them as a subscriber), so an answered 200
means stored, counted and observed; a subscriber that fails makes it a 500, so the exporter sends again.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson
from fastapi import APIRouter, HTTPException
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from prometheus_client import CollectorRegistry, Counter
from starlette.requests import Request
from starlette.routing import Route

from sidecar.clock import Clock
from sidecar.component import Bus, Passive, Role
from sidecar.errors import ParseError
from sidecar.httpguard import RequestGuard
from sidecar.model import Batch
from sidecar.probe_marker import ProbeTraces, split_probe_records
from sidecar.sources.otlp.decode import DecodeResult, decode_json, decode_protobuf
from sidecar.sources.otlp.limits import DEFAULT_LIMITS, REASONS, TRUNCATED_FIELDS, SpanLimitError, SpanLimits

__all__ = ["OtlpReceiver"]

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_ENDPOINT = "otlp_traces"
# google.rpc.Code for each HTTP status the receiver answers with.
_RPC_CODE = {400: 3, 401: 16, 413: 8, 415: 3, 429: 8, 500: 13, 503: 14}
_EMPTY_PB_RESPONSE = ExportTraceServiceResponse().SerializeToString()

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
Answer = tuple[int, bytes, bool, dict[str, str] | None]


def _status_answer(status: int, message: str, as_json: bool, headers: dict[str, str] | None = None) -> Answer:
    code = _RPC_CODE.get(status, 2)
    if as_json:
        body = orjson.dumps({"code": code, "message": message})
    else:
        body = status_pb2.Status(code=code, message=message).SerializeToString()
    return status, body, as_json, headers


def _success_answer(result: DecodeResult, as_json: bool) -> Answer:
    if as_json:
        if result.rejected:
            body = orjson.dumps(
                {
                    "partialSuccess": {
                        "rejectedSpans": str(result.rejected),
                        "errorMessage": result.first_error,
                    }
                }
            )
        else:
            body = b"{}"
        return 200, body, True, None
    if not result.rejected:
        return 200, _EMPTY_PB_RESPONSE, False, None
    resp = ExportTraceServiceResponse()
    resp.partial_success.rejected_spans = result.rejected
    resp.partial_success.error_message = result.first_error
    return 200, resp.SerializeToString(), False, None


class OtlpReceiver(Passive):
    name = "otlp_receiver"
    role = Role.SOURCE

    def __init__(
        self,
        limits: SpanLimits = DEFAULT_LIMITS,
        *,
        bus: Bus,
        guard: RequestGuard,
        registry: CollectorRegistry,
        clock: Clock,
        logger: logging.Logger | None = None,
    ) -> None:
        self.bus = bus
        self.limits = limits
        self.clock = clock
        self.guard = guard
        self.log = logger or logging.getLogger("sidecar.sources.otlp.receiver")
        self._received = Counter(
            "sidecar_otlp_spans_received",
            "Spans accepted by POST /v1/traces, by encoding.",
            ["encoding"],
            registry=registry,
        )
        self._received_by = {e: self._received.labels(e) for e in ("json", "protobuf")}
        self._rejected = Counter(
            "sidecar_otlp_spans_rejected",
            "Spans refused one by one (reported as partial success), by encoding.",
            ["encoding"],
            registry=registry,
        )
        self._refused = Counter(
            "sidecar_otlp_refused",
            "Requests to POST /v1/traces refused with 400: undecodable, or a name (span, model, version, attribute "
            "key, event, service) over traces.limits.max_name_chars.",
            ["reason"],
            registry=registry,
        )
        for r in ("undecodable", *(f"{x}_too_long" for x in REASONS)):
            self._refused.labels(r)
        self._truncated = Counter(
            "sidecar_otlp_truncated",
            "Stored span text (attribute values, event attribute values, status messages) cut to "
            "traces.limits.max_value_chars, by field.",
            ["field"],
            registry=registry,
        )
        self._truncated_by = {f: self._truncated.labels(f) for f in TRUNCATED_FIELDS}
        self._probe = Counter(
            "sidecar_otlp_probe_spans",
            "Spans of the model probe's own requests (trace id sidecar/probe_marker.py), left out of SLIs.",
            registry=registry,
        )
        self._probe_traces = ProbeTraces()  # probe traces known by a span's request id (gRPC, probe_marker.py)
        self._errors = Counter(
            "sidecar_otlp_ingest_errors",
            "Batches the trace hub failed on (a bug): answered 500, so the exporter sends them again.",
            registry=registry,
        )

    async def handle(self, request: Request) -> Answer:
        """Answer one export: (status, body, as_json, extra headers)."""
        ctype = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        as_json = ctype == JSON
        if ctype not in (JSON, PROTOBUF):
            exc = self.guard.refuse(
                _ENDPOINT,
                "bad_content_type",
                415,
                f"Content-Type must be {PROTOBUF} or {JSON}, not {ctype or 'missing'!r}",
            )
            return _status_answer(415, str(exc.detail), True)
        encoding = "json" if as_json else "protobuf"
        try:
            self.guard.authorize(request, "push", _ENDPOINT)
            async with self.guard.admit(_ENDPOINT):
                body = await self.guard.read_body(request, _ENDPOINT)
                lim = self.limits
                try:
                    result = decode_json(body, lim) if as_json else decode_protobuf(body, lim)
                except ParseError as pe:
                    self._refused.labels(pe.reason if isinstance(pe, SpanLimitError) else "undecodable").inc()
                    raise self.guard.refuse(_ENDPOINT, "bad_request", 400, str(pe)) from None
                result.records, probes = split_probe_records(result.records, self._probe_traces)
                if probes:
                    self._probe.inc(probes)
                if result.records:
                    failed = self.bus.publish(
                        Batch(kind="spans", source="otlp", items=tuple(result.records), received_at=self.clock.now())
                    )
                    if (failure := self.guard.push_failures.check("/v1/traces", failed)) is not None:
                        # Our fault, not the client's data: the push endpoints' one answer (sidecar.pushfail),
                        # as a google.rpc.Status in the request's encoding; counted there and here, and logged.
                        self._errors.inc()
                        return _status_answer(failure.status, failure.message, as_json)
                for fld, n in result.truncations.items():
                    self._truncated_by[fld].inc(n)
                if result.rejected:
                    self._rejected.labels(encoding).inc(result.rejected)
                if result.records:
                    self._received_by[encoding].inc(len(result.records))
                return _success_answer(result, as_json)
        except HTTPException as he:
            return _status_answer(he.status_code, str(he.detail), as_json, dict(he.headers or {}))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        status, body, as_json, headers = await self.handle(Request(scope, receive))
        raw_headers = [
            (b"content-type", b"application/json" if as_json else b"application/x-protobuf"),
            (b"content-length", str(len(body)).encode()),
        ]
        if headers:
            raw_headers += [(k.lower().encode(), v.encode()) for k, v in headers.items()]
        await send({"type": "http.response.start", "status": status, "headers": raw_headers})
        await send({"type": "http.response.body", "body": body})

    def router(self) -> APIRouter:
        r = APIRouter()
        # An object endpoint (not a function) makes Starlette call it as a plain ASGI app.
        r.routes.append(Route("/v1/traces", self, methods=["POST"], name="otlp_traces"))
        return r

    def routes(self) -> APIRouter:
        return self.router()
