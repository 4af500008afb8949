"""Scrapes Triton's Prometheus endpoint on an interval and publishes each scrape on the bus.

A good scrape is published whole as a ``SeriesSnapshot`` (bus kind ``scrapes``, ``complete``); the SLI
deriver (``processors/triton_series.py``) subscribes. A scrape that times out, answers non-200, answers
something that is not an exposition (an HTML error page), is malformed or truncated counts as failed with a
bounded ``reason``; the target is marked down and an empty complete batch is published, so derived interval
values are withdrawn until the next good scrape. Nothing here raises out of the loop.
"""

from __future__ import annotations

import logging
from types import MappingProxyType

import httpx
from prometheus_client import CollectorRegistry, Counter, Gauge

from sidecar.clock import Clock
from sidecar.component import Bus, Readiness
from sidecar.errors import ParseError, ScrapeError
from sidecar.model import Batch, SeriesSnapshot
from sidecar.polled import Polled, TickerFactory
from sidecar.promtext import parse_exposition
from sidecar.scrape import DEFAULT_MAX_BYTES, fetch_exposition
from sidecar.sources.triton_config import TritonConfig

__all__ = ["TritonMetricsSource"]

_LABEL_CACHE_MAX = 50_000


class TritonMetricsSource(Polled):
    name = "triton_metrics"

    def __init__(
        self,
        config: TritonConfig,
        *,
        registry: CollectorRegistry,
        clock: Clock,
        http: httpx.AsyncClient,
        bus: Bus,
        logger: logging.Logger | None = None,
        max_body_bytes: int = DEFAULT_MAX_BYTES,
        ticker: TickerFactory | None = None,
    ) -> None:
        super().__init__(
            interval_secs=config.interval_secs,
            registry=registry,
            logger=logger,
            ticker=ticker,
            ticker_name="triton-scrape",
            job=self.scrape_once,
        )
        self.bus = bus
        self.config = config
        self.max_body_bytes = max_body_bytes
        self.clock = clock
        self.http = http
        self.log = logger or logging.getLogger("sidecar.triton")
        self._label_cache: dict[str, dict[str, str]] = {}
        self._last_error: str = "no scrape yet"
        self._ever_ok = False
        self._last_ok_mono: float | None = None
        self._up = Gauge("sidecar_triton_up", "1 when the last scrape of Triton succeeded.", registry=registry)
        self._duration = Gauge(
            "sidecar_triton_scrape_duration_seconds", "Duration of the last scrape.", registry=registry
        )
        self._scrapes = Counter("sidecar_triton_scrapes", "Scrapes of Triton by result.", ["result"], registry=registry)
        self._failures = Counter(
            "sidecar_triton_scrape_failures", "Failed scrapes by reason.", ["reason"], registry=registry
        )
        self._series = Gauge("sidecar_triton_series", "Series in the last good scrape.", registry=registry)
        self._series_refused = Counter(
            "sidecar_triton_series_refused",
            "Series refused because a scrape held more than triton.max_series.",
            registry=registry,
        )
        self._last_ok = Gauge(
            "sidecar_triton_last_success_timestamp_seconds", "Unix time of the last good scrape.", registry=registry
        )
        for reason in ("timeout", "connect", "http_status", "content_type", "parse", "too_large"):
            self._failures.labels(reason)
        for result in ("success", "failure"):
            self._scrapes.labels(result)
        self._publish_failed = Counter(
            "sidecar_triton_publish_failures",
            "Scrapes a bus subscriber failed to take, by subscriber.",
            ["subscriber"],
            registry=registry,
        )

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
                del expo.samples[self.config.max_series :]
            samples = tuple(expo.samples)
            # Each snapshot carries only its own label strings, so a later scrape clearing the shared cache
            # never changes a snapshot a subscriber still holds.
            parsed = MappingProxyType({raw: expo.labels(raw) for raw in {lab for _n, lab, _v in samples}})
            # Time between scrapes is a duration: a wall-clock step must not skew rates (monotonic).
            snap = SeriesSnapshot(
                target=self.config.metrics_url,
                samples=samples,
                parsed=parsed,
                types=MappingProxyType(dict(expo.types)),
                taken_at=self.clock.monotonic(),
            )
        except ScrapeError as exc:
            return self._failed(exc.reason, str(exc), t0)
        except ParseError as exc:
            return self._failed("parse", f"malformed exposition: {exc}", t0)
        self._publish(snap)
        self._duration.set(self.clock.monotonic() - t0)
        self._scrapes.labels("success").inc()
        self._series.set(len(expo.samples))
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
        self._publish(None)
        if message != self._last_error:
            # One line per change of state, not one per failed scrape.
            self.log.warning("scrape of %s failed (%s): %s", self.config.metrics_url, reason, message)
        self._last_error = message
        return False

    def _publish(self, snap: SeriesSnapshot | None) -> None:
        failed = self.bus.publish(
            Batch(
                kind="scrapes",
                source=self.name,
                items=(snap,) if snap else (),
                received_at=self.clock.now(),
                complete=True,
            )
        )
        for name in failed:
            self._publish_failed.labels(name).inc()

    async def _fetch(self) -> str:
        return await fetch_exposition(
            self.http,
            self.config.metrics_url,
            what="Triton",
            timeout_s=self.config.timeout_secs,
            max_bytes=self.max_body_bytes,
        )

    def readiness(self) -> Readiness:
        if self._last_error:
            return Readiness(False, f"Triton metrics at {self.config.metrics_url}: {self._last_error}")
        return Readiness(True, f"Triton metrics at {self.config.metrics_url}: up")
