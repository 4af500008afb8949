"""OTLP/HTTP trace receiver: ``POST /v1/traces`` as the OTLP specification asks.

- ``application/x-protobuf`` and ``application/json`` bodies (optionally gzip/deflate), answered in the same
  content type: an ``ExportTraceServiceResponse`` on success, with ``partial_success`` when spans were
  rejected.
- Errors carry a ``google.rpc.Status`` body in the request's content type: 400 undecodable, 413 too large
(after
  decompression too), 415 other content types, 429/503 with Retry-After when overloaded, 401 without the
  token.
"""

from __future__ import annotations

import logging

import orjson
from fastapi import APIRouter, HTTPException, Request, Response
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from prometheus_client import CollectorRegistry, Counter

from sidecar.component import Readiness
from sidecar.errors import ParseError
from sidecar.httpguard import RequestGuard
from sidecar.traces.hub import TraceHub
from sidecar.traces.otlp_decode import DecodeResult, decode_json, decode_protobuf

__all__ = ["OtlpReceiver"]

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_ENDPOINT = "otlp_traces"
# google.rpc.Code for each HTTP status the receiver answers with.
_RPC_CODE = {400: 3, 401: 16, 413: 8, 415: 3, 429: 8, 503: 14}


def _status_response(
    status: int, message: str, as_json: bool, headers: dict[str, str] | None = None
) -> Response:
    code = _RPC_CODE.get(status, 2)
    if as_json:
        body = orjson.dumps({"code": code, "message": message})
    else:
        body = status_pb2.Status(code=code, message=message).SerializeToString()
    return Response(body, status_code=status, media_type=JSON if as_json else PROTOBUF, headers=headers)


def _success_response(result: DecodeResult, as_json: bool) -> Response:
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
        return Response(body, media_type=JSON)
    resp = ExportTraceServiceResponse()
    if result.rejected:
        resp.partial_success.rejected_spans = result.rejected
        resp.partial_success.error_message = result.first_error
    return Response(resp.SerializeToString(), media_type=PROTOBUF)


class OtlpReceiver:
    name = "otlp_receiver"
    role = "source"

    def __init__(
        self,
        hub: TraceHub,
        guard: RequestGuard,
        registry: CollectorRegistry,
        logger: logging.Logger | None = None,
    ) -> None:
        self.hub = hub
        self.guard = guard
        self.log = logger or logging.getLogger("sidecar.traces.receiver")
        self._received = Counter(
            "sidecar_otlp_spans_received",
            "Spans accepted by POST /v1/traces, by encoding.",
            ["encoding"],
            registry=registry,
        )
        self._rejected = Counter(
            "sidecar_otlp_spans_rejected",
            "Spans refused one by one (reported as partial success), by encoding.",
            ["encoding"],
            registry=registry,
        )
        self._errors = Counter(
            "sidecar_otlp_ingest_errors",
            "Accepted batches the trace hub failed to take (a bug; the spans are lost).",
            registry=registry,
        )

    async def handle(self, request: Request) -> Response:
        ctype = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        as_json = ctype == JSON
        if ctype not in (JSON, PROTOBUF):
            exc = self.guard.refuse(
                _ENDPOINT,
                "bad_content_type",
                415,
                f"Content-Type must be {PROTOBUF} or {JSON}, not {ctype or 'missing'!r}",
            )
            return _status_response(415, str(exc.detail), True)
        encoding = "json" if as_json else "protobuf"
        try:
            self.guard.authorize(request, "push", _ENDPOINT)
            async with self.guard.admit(_ENDPOINT):
                body = await self.guard.read_body(request, _ENDPOINT)
                try:
                    result = decode_json(body) if as_json else decode_protobuf(body)
                except ParseError as pe:
                    raise self.guard.refuse(_ENDPOINT, "bad_request", 400, str(pe)) from None
                if result.rejected:
                    self._rejected.labels(encoding).inc(result.rejected)
                if result.spans:
                    self._received.labels(encoding).inc(len(result.spans))
                    try:
                        self.hub.ingest(result.spans, "otlp")
                    except Exception:
                        # The spans were valid; losing them to our own bug must not look like the client's
                        # fault.
                        self._errors.inc()
                        self.log.exception("trace hub failed on an OTLP batch")
                return _success_response(result, as_json)
        except HTTPException as he:
            return _status_response(he.status_code, str(he.detail), as_json, dict(he.headers or {}))

    def router(self) -> APIRouter:
        r = APIRouter()
        r.add_api_route(
            "/v1/traces",
            self.handle,
            methods=["POST"],
            include_in_schema=True,
            summary="OTLP/HTTP trace export (protobuf or JSON)",
        )
        return r

    async def start(self) -> None:
        return None

    async def shutdown(self) -> None:
        return None

    def readiness(self) -> Readiness | None:
        return None

    def routes(self) -> APIRouter:
        return self.router()
