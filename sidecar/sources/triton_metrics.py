"""Scrapes Triton's Prometheus endpoint on an interval and feeds the SLI deriver.

A scrape that times out, answers non-200, answers something that is not an exposition (an HTML error page), is
malformed or truncated counts as failed with a bounded ``reason``; the target is then marked down and the derived
interval values are withdrawn until the next good scrape. Nothing here raises out of the loop.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import httpx
from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from sidecar.clock import Clock
from sidecar.component import Readiness
from sidecar.errors import ParseError, ScrapeError
from sidecar.model import Batch, GpuIdentity
from sidecar.periodic import Periodic
from sidecar.processors.derive import Deriver, snapshot_models
from sidecar.promtext import parse_exposition
from sidecar.scrape import DEFAULT_MAX_BYTES, fetch_exposition
from sidecar.sources.triton_config import TritonConfig

__all__ = ["TritonMetricsSource"]

_LABEL_CACHE_MAX = 50_000


class _DerivedCollector(Collector):
    def __init__(self, source: TritonMetricsSource) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        self._source.expire_stale()
        return self._source.deriver.collect(self._source.gpu_labels())

    def describe(self) -> list[Metric]:
        # Series come and go with models; describing nothing keeps registration from calling collect().
        return []


class TritonMetricsSource:
    name = "triton_metrics"
    role = "source"

    def __init__(self, config: TritonConfig, *, registry: CollectorRegistry, clock: Clock,
                 http: httpx.AsyncClient, logger: logging.Logger | None = None,
                 max_body_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.config = config
        self.max_body_bytes = max_body_bytes
        self.clock = clock
        self.http = http
        self.log = logger or logging.getLogger("sidecar.triton")
        self.deriver = Deriver(ratio_window_s=config.ratio_window_secs, max_models=config.max_models)
        # The GPU sources' view, from the latest "gpus" batch on the bus: joins nv_gpu_* series on UUID.
        self._gpu_labels: dict[str, dict[str, str]] = {}
        self._label_cache: dict[str, dict[str, str]] = {}
        self._periodic = Periodic("triton-scrape", self.scrape_once, config.interval_secs,
                                  on_error=lambda exc: self.log.exception("scrape loop failed", exc_info=exc))
        self._last_error: str = "no scrape yet"
        self._ever_ok = False
        self._last_ok_mono: float | None = None
        self._up = Gauge("sidecar_triton_up", "1 when the last scrape of Triton succeeded.", registry=registry)
        self._duration = Gauge("sidecar_triton_scrape_duration_seconds", "Duration of the last scrape.",
                               registry=registry)
        self._scrapes = Counter("sidecar_triton_scrapes", "Scrapes of Triton by result.", ["result"],
                                registry=registry)
        self._failures = Counter("sidecar_triton_scrape_failures", "Failed scrapes by reason.", ["reason"],
                                 registry=registry)
        self._series = Gauge("sidecar_triton_series", "Series in the last good scrape.", registry=registry)
        self._series_refused = Counter("sidecar_triton_series_refused",
                                       "Series refused because a scrape held more than triton.max_series.",
                                       registry=registry)
        self._models_refused = Counter("sidecar_triton_models_refused",
                                       "Model/version pairs refused per scrape above triton.max_models.",
                                       registry=registry)
        self._resets = Counter("sidecar_triton_series_resets",
                               "Counter series seen to reset (about 8 per version for one Triton restart); "
                               "sidecar_triton_model_resets_total counts the events per version.", registry=registry)
        self._last_ok = Gauge("sidecar_triton_last_success_timestamp_seconds",
                              "Unix time of the last good scrape.", registry=registry)
        self._models = Gauge("sidecar_triton_models", "Model/version pairs in the last good scrape.",
                             registry=registry)
        for reason in ("timeout", "connect", "http_status", "content_type", "parse", "too_large"):
            self._failures.labels(reason)
        for result in ("success", "failure"):
            self._scrapes.labels(result)
        registry.register(_DerivedCollector(self))

    def expire_stale(self) -> None:
        """Withdraw interval values when no scrape has succeeded for ``stale_after_secs`` (a stuck scrape loop or
        a scrape that never returns must not leave old numbers looking fresh)."""
        if (self.deriver.fresh and self._last_ok_mono is not None
                and self.clock.monotonic() - self._last_ok_mono > self.config.stale_after_secs):
            self.deriver.mark_stale()

    def on_gpus(self, batch: Batch) -> None:
        """The bus subscriber: each batch is the GPU state's whole current view (``complete``)."""
        self._gpu_labels = {
            g.uuid: {"index": g.index, "name": g.name, "source": g.source}
            for g in batch.items if isinstance(g, GpuIdentity)
        }

    def gpu_labels(self) -> dict[str, dict[str, str]]:
        return self._gpu_labels

    async def scrape_once(self) -> bool:
        """One scrape; True when it succeeded. Never raises."""
        t0 = self.clock.monotonic()
        try:
            text = await self._fetch()
            if len(self._label_cache) > _LABEL_CACHE_MAX:
                self._label_cache.clear()
            expo = parse_exposition(text, self._label_cache)
            if len(expo.samples) > self.config.max_series:
                self._series_refused.inc(len(expo.samples) - self.config.max_series)
                del expo.samples[self.config.max_series:]
            models, passthrough, refused = snapshot_models(expo, self.config.max_models)
            if refused:
                self._models_refused.inc(refused)
            before = self.deriver.resets
            # Time between scrapes is a duration: a wall-clock step must not skew rates.
            self.deriver.update(models, passthrough, self.clock.monotonic())
            if self.deriver.resets > before:
                self._resets.inc(self.deriver.resets - before)
        except ScrapeError as exc:
            return self._failed(exc.reason, str(exc), t0)
        except ParseError as exc:
            return self._failed("parse", f"malformed exposition: {exc}", t0)
        self._duration.set(self.clock.monotonic() - t0)
        self._scrapes.labels("success").inc()
        self._series.set(len(expo.samples))
        self._models.set(len(models))
        self._up.set(1)
        self._last_ok.set(self.clock.now())
        self._last_ok_mono = self.clock.monotonic()
        if not self._ever_ok or self._last_error:
            self.log.info("scraping Triton at %s: up, %d series", self.config.metrics_url, len(expo.samples))
        self._ever_ok = True
        self._last_error = ""
        return True

    def _failed(self, reason: str, message: str, t0: float) -> bool:
        self._duration.set(self.clock.monotonic() - t0)
        self._scrapes.labels("failure").inc()
        self._failures.labels(reason).inc()
        self._up.set(0)
        self.deriver.mark_stale()
        if message != self._last_error:
            # One line per change of state, not one per failed scrape.
            self.log.warning("scrape of %s failed (%s): %s", self.config.metrics_url, reason, message)
        self._last_error = message
        return False

    async def _fetch(self) -> str:
        return await fetch_exposition(self.http, self.config.metrics_url, what="Triton",
                                      timeout_s=self.config.timeout_secs, max_bytes=self.max_body_bytes)

    async def start(self) -> None:
        self._periodic.start()

    async def shutdown(self) -> None:
        await self._periodic.stop()

    def readiness(self) -> Readiness:
        if self._last_error:
            return Readiness(False, f"Triton metrics at {self.config.metrics_url}: {self._last_error}")
        return Readiness(True, f"Triton metrics at {self.config.metrics_url}: up")

    def routes(self) -> None:
        return None
