"""Polls Triton's model API (repository index, ``/v2/models/stats``, each model's config) and publishes it as samples.

One batch per poll on bus kind ``samples`` (source ``triton_model_api``, ``complete``), which the cold-start
watch and the batching advisor read; nothing here decides anything. Series:

- ``triton_model_state{model,version,state}`` = 1 (LOADING, READY, UNLOADING, UNAVAILABLE ...)
- ``triton_model_index_seconds``: how long the index request took (Triton holds one that arrives as a load
  begins until the load ends, so a long one bounds that load's time from below)
- ``triton_model_stats{model,version,stat}``: cumulative inference_count, execution_count, success_count,
  success_ns, queue_count, queue_ns (they restart from 0 when a version loads again)
- ``triton_model_config{model,field}``: max_batch_size, dynamic_batching (0/1), max_queue_delay_us,
  preferred_batch_size (the largest); a model's config is read when first seen READY and every
  ``config_refresh_secs``.

Why not the /metrics scrape: the repository index is the only place a load in progress shows (state LOADING),
and the config is the only place the queue delay is.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx
import orjson
from prometheus_client import CollectorRegistry, Counter

from sidecar.clock import Clock
from sidecar.component import Bus
from sidecar.errors import ScrapeError
from sidecar.model import Batch, Sample
from sidecar.polled import Polled, TickerFactory

__all__ = ["SOURCE", "TritonModelApiSource"]

SOURCE = "triton_model_api"
_STATS = (
    ("inference_count", ("inference_count",)),
    ("execution_count", ("execution_count",)),
    ("success_count", ("inference_stats", "success", "count")),
    ("success_ns", ("inference_stats", "success", "ns")),
    ("queue_count", ("inference_stats", "queue", "count")),
    ("queue_ns", ("inference_stats", "queue", "ns")),
)
_MAX_CONFIGS = 1000


_PollError = ScrapeError  # a poll failed with a bounded reason


def _dig(obj: Any, path: tuple[str, ...]) -> float | None:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    try:
        return float(obj) if obj is not None and not isinstance(obj, bool) else None
    except (TypeError, ValueError):
        return None


def config_samples(model: str, cfg: Any) -> list[Sample]:
    """The batching-relevant fields of one model config (the JSON of GET /v2/models/{m}/config)."""
    if not isinstance(cfg, dict):
        return []

    def s(fieldname: str, v: float) -> Sample:
        return Sample("triton_model_config", (("field", fieldname), ("model", model)), float(v))

    out = [s("max_batch_size", _dig(cfg, ("max_batch_size",)) or 0.0)]
    db = cfg.get("dynamic_batching")
    out.append(s("dynamic_batching", 1.0 if isinstance(db, dict) else 0.0))
    if isinstance(db, dict):
        out.append(s("max_queue_delay_us", _dig(db, ("max_queue_delay_microseconds",)) or 0.0))
        pref = [p for p in db.get("preferred_batch_size") or [] if isinstance(p, int | float)]
        if pref:
            out.append(s("preferred_batch_size", max(pref)))
    return out


class TritonModelApiSource(Polled):
    name = "triton_model_api"

    def __init__(
        self,
        *,
        triton_http_url: str,
        interval_secs: float,
        timeout_secs: float,
        max_models: int,
        config_refresh_secs: float,
        registry: CollectorRegistry,
        clock: Clock,
        http: httpx.AsyncClient,
        bus: Bus,
        logger: logging.Logger | None = None,
        ticker: TickerFactory | None = None,
    ) -> None:
        super().__init__(
            interval_secs=interval_secs,
            registry=registry,
            logger=logger,
            ticker=ticker,
            ticker_name="triton-model-api",
        )
        self.url = triton_http_url.rstrip("/")
        self.timeout = timeout_secs
        self.max_models = max_models
        self.refresh = config_refresh_secs
        self.clock = clock
        self.http = http
        self.bus = bus
        self.log = logger or logging.getLogger("sidecar.triton_model_api")
        self._configs: dict[str, tuple[float, list[Sample]]] = {}
        self._last_error = "no poll yet"
        self._errors = Counter(
            "sidecar_triton_model_api_errors",
            "Failed polls of Triton's model API (index, stats, config), by reason.",
            ["reason"],
            registry=registry,
        )
        self._refused = Counter(
            "sidecar_triton_model_api_refused",
            "Model/version pairs left out of a poll above checks.model_api.max_models.",
            registry=registry,
        )

    async def _get_json(self, method: str, path: str) -> Any:
        try:
            if method == "POST":
                resp = await self.http.post(self.url + path, json={}, timeout=self.timeout)
            else:
                resp = await self.http.get(self.url + path, timeout=self.timeout)
        except httpx.TimeoutException as exc:
            raise _PollError("timeout", f"{path} timed out: {exc!r}") from exc
        except httpx.HTTPError as exc:
            raise _PollError("connect", f"{path} unreachable: {exc!r}") from exc
        if resp.status_code != 200:
            raise _PollError("http_status", f"{path} answered {resp.status_code}")
        try:
            return orjson.loads(resp.content)
        except orjson.JSONDecodeError as exc:
            raise _PollError("parse", f"{path} is not JSON") from exc

    async def poll_once(self) -> list[Sample]:
        """One poll; returns the samples published (empty when the poll failed, which is counted)."""
        try:
            t0 = self.clock.monotonic()
            index = await self._get_json("POST", "/v2/repository/index")
            index_secs = self.clock.monotonic() - t0
            stats = await self._get_json("GET", "/v2/models/stats")
            if not isinstance(index, list) or not isinstance(stats, dict):
                raise _PollError("parse", "repository index or stats are not the expected JSON")
            samples = [Sample("triton_model_index_seconds", (), index_secs)]
            samples += self._index_samples(index) + self._stats_samples(stats.get("model_stats") or [])
            ready = sorted({str(e["name"]) for e in index if isinstance(e, dict) and e.get("state") == "READY"})
            for model in ready:
                samples += await self._config(model)
        except _PollError as exc:
            self._failed(exc.reason, str(exc))
            return []
        now = self.clock.now()
        self.bus.publish(Batch(kind="samples", source=SOURCE, items=tuple(samples), received_at=now, complete=True))
        if self._last_error:
            self.log.info("polling Triton's model API at %s: up", self.url)
        self._last_error = ""
        return samples

    def _index_samples(self, index: list[Any]) -> list[Sample]:
        out: list[Sample] = []
        for e in index:
            if not isinstance(e, dict) or "version" not in e or "name" not in e:
                continue  # a model with no version in the index is not loaded at all
            if len(out) >= self.max_models:
                self._refused.inc()
                continue
            labels = (("model", str(e["name"])), ("state", str(e.get("state", ""))), ("version", str(e["version"])))
            out.append(Sample("triton_model_state", labels, 1.0))
        return out

    def _stats_samples(self, model_stats: list[Any]) -> list[Sample]:
        out: list[Sample] = []
        for n, m in enumerate(x for x in model_stats if isinstance(x, dict)):
            if n >= self.max_models:
                self._refused.inc()
                continue
            model, version = str(m.get("name", "")), str(m.get("version", ""))
            for stat, path in _STATS:
                v = _dig(m, path)
                if v is not None:
                    out.append(
                        Sample("triton_model_stats", (("model", model), ("stat", stat), ("version", version)), v)
                    )
        return out

    async def _config(self, model: str) -> list[Sample]:
        now = self.clock.monotonic()
        cached = self._configs.get(model)
        if cached is not None and now - cached[0] < self.refresh:
            return cached[1]
        try:
            cfg = await self._get_json("GET", f"/v2/models/{model}/config")
        except _PollError as exc:
            # One model's config failing must not lose the poll: keep the last one read, count the failure.
            self._errors.labels("config_" + exc.reason).inc()
            return cached[1] if cached else []
        if len(self._configs) >= _MAX_CONFIGS:
            self._configs.clear()
        samples = config_samples(model, cfg)
        self._configs[model] = (now, samples)
        return samples

    def _failed(self, reason: str, message: str) -> None:
        self._errors.labels(reason).inc()
        if message != self._last_error:
            self.log.warning("poll of Triton's model API failed (%s): %s", reason, message)
        self._last_error = message
