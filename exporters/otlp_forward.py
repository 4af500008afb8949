"""Forward received spans to an OTLP/HTTP endpoint (Jaeger, Tempo, a collector) through the shared sender.

The bus carries span records (``sidecar.records``), not request bodies, so each batch is encoded again
(``exporters.otlp_encode``) rather than the received body passed on: spans arrive from the OTLP receiver in
two encodings and from Triton's trace files, and only records cover all three; a batch also mixes spans of
many requests, which keeps exports at ``batch_max_spans`` whatever the clients sent. Encoding and gzip run in a
worker thread, so the event loop that answers the receiver never waits on them.

The receiver only ``offer()``s spans: a bounded queue append that never blocks and counts a drop when full.
``exporters.sender.Sender`` sends with the sidecar's injected httpx client and retries 429, 502, 503 and 504
only (the OTLP/HTTP specification's retryable statuses), with jittered exponential backoff honouring
Retry-After, for at most ``timeout_secs`` a batch; anything else is dropped and counted. So a downstream that
is down costs queue space and drop counts, never receiver latency.
"""

from __future__ import annotations

import asyncio
import gzip
import logging
import random
from collections.abc import Awaitable, Callable, Sequence

import httpx
from prometheus_client import CollectorRegistry

from exporters.config import ForwardConfig, HttpAuthConfig, split_credentials
from exporters.httpauth import request_auth
from exporters.otlp_encode import encode_spans
from exporters.sender import MemoryQueue, RetryPolicy, Sender, check_response
from exporters.telemetry import ExportTelemetry
from sidecar.clock import Clock
from sidecar.component import Readiness, Role
from sidecar.model import Span
from sidecar.records import Record, to_span
from sidecar.redact import mask_url

__all__ = ["OTLP_RETRYABLE", "OtlpForwarder"]

OTLP_RETRYABLE = frozenset({429, 502, 503, 504})


class OtlpForwarder:
    name = "otlp_forward"
    role = Role.EXPORTER

    def __init__(
        self,
        cfg: ForwardConfig,
        *,
        registry: CollectorRegistry,
        http: httpx.AsyncClient,
        clock: Clock,
        logger: logging.Logger | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        assert cfg.endpoint is not None
        self.cfg = cfg
        # A user:password in the endpoint goes as basic auth, never in the URL httpx logs at INFO.
        self.endpoint, creds = split_credentials(cfg.endpoint)
        self._auth = request_auth(HttpAuthConfig(basic_auth=creds))
        self.http = http
        self.clock = clock
        self.log = logger or logging.getLogger("exporters.otlp_forward")
        self._headers = {**cfg.headers, "Content-Type": "application/x-protobuf"}
        if cfg.compression == "gzip":
            self._headers["Content-Encoding"] = "gzip"
        self._shown = mask_url(cfg.endpoint)
        # Span records from the receiver stay records here: the encoding thread builds the Span objects, so the
        # receiving path never pays for them.
        self.sender: Sender[Span | Record] = Sender(
            f"OTLP endpoint {self._shown}",
            self._post,
            policy=RetryPolicy(initial_backoff_secs=0.5, max_backoff_secs=5.0, max_elapsed_secs=cfg.timeout_secs),
            queue=MemoryQueue(cfg.queue_max_spans),
            max_batch=cfg.batch_max_spans,
            stats=ExportTelemetry.of(registry).exporter("otlp_forward"),
            clock=clock,
            sleep=sleep,
            rng=rng,
            logger=self.log,
        )

    def _encode(self, batch: list[Span | Record]) -> bytes:
        body = encode_spans([to_span(s) if isinstance(s, tuple) else s for s in batch])
        return gzip.compress(body, compresslevel=5) if self.cfg.compression == "gzip" else body

    async def _post(self, batch: list[Span | Record]) -> list[Span | Record]:
        body = await asyncio.to_thread(self._encode, batch)
        resp = await self.http.post(
            self.endpoint, content=body, headers=self._headers, timeout=self.cfg.timeout_secs, auth=self._auth
        )
        check_response(resp, self.clock.now(), f"OTLP endpoint {self._shown}", retryable=OTLP_RETRYABLE)
        return []

    def offer(self, spans: Sequence[Span | Record]) -> None:
        self.sender.submit_many(spans)

    async def start(self) -> None:
        await self.sender.start()

    async def shutdown(self) -> None:
        await self.sender.shutdown(deadline_secs=self.cfg.shutdown_flush_secs)

    def readiness(self) -> Readiness | None:
        return None

    def routes(self) -> None:
        return None
