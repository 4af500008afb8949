"""Steady inference traffic for the demo: KServe v2 JSON requests to a real Triton, and the caller's side of
the story: each answered request is reported to the sidecar's /v1/events (features, score, trace id), each
request carries a W3C ``traceparent`` so Triton's spans join the caller's trace, and the caller's own span (with
an error status when the request failed) goes to the sidecar's /v1/traces. Each event carries the request's
latency as the caller measured it (``fields.latency_ms``: the canary verdict compares versions on it).

Once a second a request streams from ``chat`` (Triton's HTTP ``generate_stream``, server-sent events, one per
token): its time to first token, mean inter-token gap, tokens in and out and whole duration go to /v1/events as
``fields`` (``ttft_ms``, ``inter_token_ms``, ``tokens_in``, ``tokens_out``, ``latency_ms``), which the goodput
check judges. ``repeat_per_s`` more requests a second repeat a few fixed ``ctr`` inputs: behind the demo's nginx
they are cache hits (never reaching Triton, so they are not reported as events: the caller's drift and business
figures stay those of the scenario's draws).

Requests name their version (``/v2/models/<m>/versions/<v>/infer``), as the scenario splits traffic between
versions. When Triton answers that a version is not serving (``'fraud' version 2 is not at ready state`` or
``... is not found``: after ``sidecar demo --act`` reverted fraud to v1, which unloads v2), the client does what a
router told of the revert would: it sends that version's share unversioned (Triton picks the version it serves,
the held one), tries the named version again once every ``REROUTE_SECS``, and reports each request under the
version that answered it (the response's ``model_version``).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx

from sidecar.demo.scenario import DemoRequest, DemoScenario, LlmRequest
from sidecar.demo.streams import stream_fields
from sidecar.demo.timeline import LoopTicker, Ticker

__all__ = ["Traffic", "TrafficStats"]

_MAX_PENDING_EVENTS = 10_000
REROUTE_SECS = 30.0


def _not_serving(error: str, version: str) -> bool:
    """Triton's answer for a version that is not loaded (its model lifecycle's UNAVAILABLE / NOT_FOUND)."""
    return f"version {version} is not at ready state" in error or f"version {version} is not found" in error


@dataclass
class TrafficStats:
    sent: dict[str, int] = field(default_factory=dict)
    ok: dict[str, int] = field(default_factory=dict)
    failed: dict[str, int] = field(default_factory=dict)
    events_posted: int = 0
    events_dropped: int = 0
    streams: int = 0  # chat requests streamed to their final response
    streams_failed: int = 0
    repeats: int = 0  # repeated lookups sent
    repeat_hits: int = 0  # of which the edge answered from its cache (X-Cache: HIT)

    def count(self, key: str, status: int) -> None:
        self.sent[key] = self.sent.get(key, 0) + 1
        bucket = self.ok if status == 200 else self.failed
        bucket[key] = bucket.get(key, 0) + 1


def _client_span(
    trace_id: str, span_id: str, model: str, version: str, start_ns: int, end_ns: int, status: int, error: str
) -> dict[str, Any]:
    """The caller's own span (OTLP JSON), parent of Triton's spans through the traceparent header. Triton's
    spans carry no error status; this one does, so the sidecar can mark the trace as failed for certain."""
    span: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": span_id,
        "name": f"POST /v2/models/{model}/infer",
        "kind": 3,
        "startTimeUnixNano": str(start_ns),
        "endTimeUnixNano": str(end_ns),
        "attributes": [
            {"key": "http.response.status_code", "value": {"intValue": str(status)}},
            {"key": "triton.model_name", "value": {"stringValue": model}},
            {"key": "triton.model_version", "value": {"stringValue": version}},
        ],
    }
    if status != 200:
        span["status"] = {"code": 2, "message": error or f"HTTP {status}"}
    return span


async def _finish(tasks: Iterable[asyncio.Task[None]], *, cancel: bool) -> None:
    for t in tasks:
        if cancel:
            t.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await t


class Traffic:
    def __init__(
        self,
        triton_http_url: str,
        *,
        sidecar_url: str | None = None,
        rate_per_s: float = 20.0,
        scenario: DemoScenario | None = None,
        clock: Any = None,
        timer: Callable[[], float] = time.perf_counter,
        llm_per_s: int = 1,
        repeat_per_s: int = 0,
        triton_direct_url: str | None = None,
    ) -> None:
        """``triton_http_url`` is where inference goes (the edge, when there is one); the streams go straight to
        ``triton_direct_url`` (default: the same), as an edge cache has nothing to do with them. ``timer`` times
        each request (seconds, monotonic): latency, time to first token, inter-token gaps."""
        self.url = triton_http_url.rstrip("/")
        self.sidecar_url = sidecar_url.rstrip("/") if sidecar_url else None
        self.rate = rate_per_s
        self.scenario = scenario or DemoScenario()
        self.stats = TrafficStats()
        self.elapsed_s = 0.0
        self._events: list[dict[str, Any]] = []
        self._spans: list[dict[str, Any]] = []
        self._wall = clock
        self._timer = timer
        self.llm_per_s = llm_per_s
        self.repeat_per_s = repeat_per_s
        self.direct = (triton_direct_url or triton_http_url).rstrip("/")
        self._repeat_n = 0
        self._gone: dict[tuple[str, str], float] = {}  # (model, version) not serving -> when Triton said so

    def _versioned(self, model: str, version: str) -> bool:
        said = self._gone.get((model, version))
        return said is None or self._timer() - said >= REROUTE_SECS

    def _now(self) -> float:
        return self._wall.now() if self._wall is not None else time.time()

    async def send_one(self, client: httpx.AsyncClient) -> int:
        return await self._infer(client, self.scenario.request(self.elapsed_s))

    async def send_repeat(self, client: httpx.AsyncClient) -> None:
        req = self.scenario.repeat(self._repeat_n)
        self._repeat_n += 1
        self.stats.repeats += 1
        body = {"inputs": [{"name": "x", "shape": [1, len(req.inputs)], "datatype": "FP32", "data": req.inputs}]}
        with contextlib.suppress(httpx.HTTPError):
            resp = await client.post(f"{self.url}/v2/models/{req.model}/versions/{req.version}/infer", json=body)
            if resp.headers.get("x-cache") == "HIT":
                self.stats.repeat_hits += 1

    async def _infer(self, client: httpx.AsyncClient, req: DemoRequest) -> int:
        body = {"inputs": [{"name": "x", "shape": [1, len(req.inputs)], "datatype": "FP32", "data": req.inputs}]}
        trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
        headers = {"traceparent": f"00-{trace_id}-{span_id}-01"}
        score = None
        error = ""
        start_ns, t0 = time.time_ns(), self._timer()
        versioned = self._versioned(req.model, req.version)
        path = f"/v2/models/{req.model}" + (f"/versions/{req.version}" if versioned else "") + "/infer"
        version = req.version  # the version that answered: the response says which when unversioned
        try:
            resp = await client.post(f"{self.url}{path}", json=body, headers=headers, timeout=10)
            status = resp.status_code
            if status == 200:
                out = resp.json()
                score = float(out["outputs"][0]["data"][0])
                version = str(out.get("model_version") or req.version)
                if versioned:
                    self._gone.pop((req.model, req.version), None)
            else:
                error = resp.text[:200]
                if versioned and _not_serving(error, req.version):
                    self._gone[(req.model, req.version)] = self._timer()
        except httpx.HTTPError as exc:
            status, error = 0, type(exc).__name__
        latency_ms = (self._timer() - t0) * 1000.0
        self.stats.count(f"{req.model}:{version}", status)
        if self.sidecar_url and len(self._spans) < _MAX_PENDING_EVENTS:
            self._spans.append(
                _client_span(trace_id, span_id, req.model, version, start_ns, time.time_ns(), status, error)
            )
        if score is not None and self.sidecar_url:
            if len(self._events) >= _MAX_PENDING_EVENTS:
                self.stats.events_dropped += 1
            else:
                self._events.append(
                    {
                        "model": req.model,
                        "version": version,
                        "timestamp": self._now(),
                        "features": req.features,
                        "score": score,
                        "trace_id": trace_id,
                        "fields": {"latency_ms": round(latency_ms, 3)},
                    }
                )
        return status

    async def stream_one(self, client: httpx.AsyncClient, req: LlmRequest) -> None:
        """One request streamed from a decoupled model; its figures, as the caller saw them, go to /v1/events."""
        url = f"{self.direct}/v2/models/{req.model}/versions/{req.version}/generate_stream"
        body = {"PROMPT_TOKENS": req.prompt_tokens, "MAX_TOKENS": req.max_tokens}
        t0 = self._timer()
        stamps: list[float] = []
        try:
            async with client.stream("POST", url, json=body, timeout=10) as resp:
                if resp.status_code != 200:
                    await resp.aread()
                    self.stats.streams_failed += 1
                    return
                async for ln in resp.aiter_lines():
                    if ln.startswith("data:"):
                        stamps.append(self._timer())
        except httpx.HTTPError:
            self.stats.streams_failed += 1
            return
        end = self._timer()
        self.stats.streams += 1
        if not stamps or not self.sidecar_url:
            return
        fields = stream_fields(req.prompt_tokens, t0, stamps, end)
        if len(self._events) >= _MAX_PENDING_EVENTS:
            self.stats.events_dropped += 1
            return
        self._events.append(
            {
                "model": req.model,
                "version": req.version,
                "timestamp": self._now(),
                "fields": fields,
            }
        )

    async def flush_spans(self, client: httpx.AsyncClient) -> None:
        if not self._spans or not self.sidecar_url:
            return
        spans, self._spans = self._spans, []
        body = {
            "resourceSpans": [
                {
                    "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "demo-client"}}]},
                    "scopeSpans": [{"scope": {"name": "sidecar-demo"}, "spans": spans}],
                }
            ]
        }
        with contextlib.suppress(httpx.HTTPError):
            await client.post(f"{self.sidecar_url}/v1/traces", json=body, timeout=10)

    async def flush_events(self, client: httpx.AsyncClient) -> None:
        if not self._events or not self.sidecar_url:
            return
        batch, self._events = self._events, []
        try:
            resp = await client.post(f"{self.sidecar_url}/v1/events", json={"events": batch}, timeout=10)
            if resp.status_code == 200:
                self.stats.events_posted += int(resp.json().get("accepted", len(batch)))
            else:
                self.stats.events_dropped += len(batch)
        except httpx.HTTPError:
            self.stats.events_dropped += len(batch)

    async def post_change(self, client: httpx.AsyncClient, change: dict[str, Any]) -> None:
        """What a CI pipeline would post on a deploy; the sidecar annotates alerts with it."""
        if self.sidecar_url:
            with contextlib.suppress(httpx.HTTPError):
                await client.post(f"{self.sidecar_url}/v1/changes", json=change, timeout=10)

    async def _send_second(
        self, client: httpx.AsyncClient, at_secs: float, ticker: Ticker, stop: asyncio.Event
    ) -> None:
        """This second's requests, each in its own slot (``rate`` slots a second, on the scenario's clock), the
        second's streams beside them (they take longer than a slot), then its repeated lookups."""
        streams = [
            asyncio.create_task(self.stream_one(client, self.scenario.llm_request(at_secs)))
            for _ in range(self.llm_per_s)
        ]
        try:
            n = max(1, round(self.rate))
            for i in range(n):
                slot = at_secs + i / n
                await ticker.sleep_until(slot, stop)
                if stop.is_set():
                    return
                self.elapsed_s = slot
                await self.send_one(client)
            for _ in range(self.repeat_per_s):
                await self.send_repeat(client)
        finally:
            await _finish(streams, cancel=stop.is_set())

    async def run(
        self,
        stop: asyncio.Event,
        *,
        ticker: Ticker | None = None,
        client: httpx.AsyncClient | None = None,
        on_tick: Callable[[float], Awaitable[None]] | None = None,
    ) -> None:
        """Send the scenario second by second until ``stop``: first ``on_tick`` (the demo prints the steps due and
        reads the alerts), then the changes due, then the second's requests, then the events and spans they made.
        ``ticker`` is real time unless a test gives a fake one; ``client`` reaches Triton and the sidecar."""
        ticker = ticker or LoopTicker()
        changes = list(self.scenario.changes())
        own = client is None
        http = client or httpx.AsyncClient()
        try:
            second = 0
            while not stop.is_set():
                await ticker.sleep_until(float(second), stop)
                if stop.is_set():
                    break
                self.elapsed_s = float(second)
                if on_tick is not None:
                    await on_tick(self.elapsed_s)
                while changes and changes[0][0] <= self.elapsed_s:
                    await self.post_change(http, changes.pop(0)[1])
                await self._send_second(http, self.elapsed_s, ticker, stop)
                await self.flush_events(http)
                await self.flush_spans(http)
                second += 1
        finally:
            await self.flush_events(http)
            await self.flush_spans(http)
            if own:
                await http.aclose()
