"""dcgm-exporter source: scrapes its /metrics through the injected httpx client and maps ``DCGM_FI_*`` series
onto the same sidecar names and labels the NVML source exports.

Each line is parsed on its own with prometheus_client's parser (a well-kept parser; the exposition is small, a
few hundred lines), so one malformed line costs that line only and is counted, never the whole scrape. DCGM's
"not available" sentinels (e.g. 9223372036854775794) are dropped and counted, never exported as numbers.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import httpx
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.parser import text_string_to_metric_families

from sidecar.clock import Clock
from sidecar.errors import ScrapeError
from sidecar.processors.gpu_series import DCGM_FIELDS, GpuSample, decode_throttle_reasons, is_dcgm_blank
from sidecar.sources.gpu.config import DcgmConfig
from sidecar.sources.gpu.publisher import GpuSink
from sidecar.state.gpus import GpuIdentity

if TYPE_CHECKING:
    from fastapi import APIRouter

from sidecar.component import Readiness
from sidecar.polled import Polled, TickerFactory
from sidecar.scrape import fetch_exposition

__all__ = ["DcgmParse", "DcgmSource", "parse_dcgm"]

SOURCE = "dcgm"

# dcgm-exporter label -> sidecar label; the rest (device, Hostname, pci_bus_id, ...) are dropped on purpose.
_LABELS = {
    "gpu": "gpu",
    "UUID": "uuid",
    "modelName": "name",
    "pod": "pod",
    "namespace": "namespace",
    "container": "container",
    "GPU_I_ID": "gpu_instance",
}


@dataclass
class DcgmParse:
    samples: list[GpuSample] = field(default_factory=list)
    gpus: dict[str, GpuIdentity] = field(default_factory=dict)
    drivers: dict[str, str] = field(default_factory=dict)
    malformed: int = 0
    blank: dict[str, int] = field(default_factory=dict)  # sidecar series -> count
    unmapped: int = 0


def parse_dcgm(text: str) -> DcgmParse:
    out = DcgmParse()
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            parsed = [s for fam in text_string_to_metric_families(line + "\n") for s in fam.samples]
        except ValueError:
            out.malformed += 1
            continue
        for s in parsed:
            spec = DCGM_FIELDS.get(s.name)
            if spec is None:
                out.unmapped += 1
                continue
            uuid = s.labels.get("UUID", "")
            if not uuid or "gpu" not in s.labels:
                out.malformed += 1  # a dcgm-exporter sample always names its GPU; without it nothing can join
                continue
            if is_dcgm_blank(s.value):
                out.blank[spec.series] = out.blank.get(spec.series, 0) + 1
                continue
            labels = {_LABELS[k]: v for k, v in s.labels.items() if k in _LABELS}
            labels.update(spec.extra)
            out.gpus.setdefault(uuid, GpuIdentity(s.labels["gpu"], s.labels.get("modelName", "")))
            driver = s.labels.get("DCGM_FI_DRIVER_VERSION")
            if driver:
                out.drivers.setdefault(uuid, driver)
            if spec.throttle_mask:
                for reason, active in decode_throttle_reasons(int(s.value)).items():
                    out.samples.append(GpuSample.of(spec.series, {**labels, "reason": reason}, active))
            else:
                out.samples.append(GpuSample.of(spec.series, labels, float(s.value) * spec.scale))
    for uuid, ident in out.gpus.items():
        lab = {"gpu": ident.index, "uuid": uuid, "name": ident.name}
        out.samples.append(GpuSample.of("sidecar_gpu_up", lab, 1))
        out.samples.append(GpuSample.of("sidecar_gpu_info", {**lab, "driver_version": out.drivers.get(uuid, "")}, 1))
    return out


class DcgmSource(Polled):
    name = "gpu_dcgm"

    def __init__(
        self,
        config: DcgmConfig,
        *,
        hub: GpuSink,
        registry: CollectorRegistry,
        clock: Clock,
        http: httpx.AsyncClient,
        logger: logging.Logger | None = None,
        ticker: TickerFactory | None = None,
    ) -> None:
        super().__init__(
            interval_secs=config.interval_secs,
            registry=registry,
            logger=logger,
            ticker=ticker,
            ticker_name="sidecar-gpu-dcgm",
            job=self.scrape_once,
        )
        self._cfg = config
        self._hub = hub
        self._clock = clock
        self._http = http
        self._log = logger or logging.getLogger("sidecar.sources.gpu.dcgm")
        self._scrape_errors = Counter(
            "sidecar_gpu_dcgm_scrape_errors",
            "dcgm-exporter scrapes that failed, by reason.",
            ["reason"],
            registry=registry,
        )
        self._malformed = Counter(
            "sidecar_gpu_dcgm_malformed_lines",
            "dcgm-exporter lines that could not be parsed (skipped).",
            registry=registry,
        )
        self._blank = Counter(
            "sidecar_gpu_dcgm_blank_values",
            "dcgm-exporter values that were DCGM's not-available sentinels (not exported), by sidecar series.",
            ["series"],
            registry=registry,
        )
        self._unmapped = Counter(
            "sidecar_gpu_dcgm_unmapped_samples",
            "dcgm-exporter samples of fields the sidecar does not map.",
            registry=registry,
        )
        self._stopped = False
        self._last_error = ""
        hub.register_source(SOURCE)

    async def start(self) -> None:
        if not self._stopped:
            await super().start()

    async def shutdown(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        await super().shutdown()

    def readiness(self) -> Readiness | None:
        return None  # the hub speaks for every GPU source

    def routes(self) -> APIRouter | None:
        return None

    async def _fetch(self) -> str:
        # dcgm-exporter versions differ in the content type they declare, so it is not checked.
        return await fetch_exposition(
            self._http,
            self._cfg.url,
            what="dcgm-exporter",
            timeout_s=self._cfg.timeout_secs,
            max_bytes=self._cfg.max_body_bytes,
            check_content_type=False,
        )

    async def scrape_once(self) -> int:
        """One scrape; returns the samples handed to the hub (0 on failure: counted, logged once)."""
        try:
            text = await self._fetch()
        except ScrapeError as exc:
            self._scrape_errors.labels(exc.reason).inc()
            msg = f"last scrape failed: {exc}"
            if msg != self._last_error:
                self._log.warning("dcgm-exporter scrape failed: %s (GPU series from DCGM go stale)", exc)
            self._last_error = msg
            self._hub.note(SOURCE, msg)
            return 0
        try:
            parsed = parse_dcgm(text)
        except Exception:  # never let one odd exposition stop the source
            self._scrape_errors.labels("parse").inc()
            self._log.exception("dcgm-exporter exposition could not be mapped")
            return 0
        if parsed.malformed:
            self._malformed.inc(parsed.malformed)
        if parsed.unmapped:
            self._unmapped.inc(parsed.unmapped)
        for series, n in parsed.blank.items():
            self._blank.labels(series).inc(n)
        if self._last_error:
            self._log.info("dcgm-exporter scrape works again")
            self._last_error = ""
        detail = f"{len(parsed.samples)} samples" + (
            f", {parsed.malformed} malformed lines" if parsed.malformed else ""
        )
        return self._hub.publish(SOURCE, parsed.samples, parsed.gpus, visible=len(parsed.gpus), detail=detail)
