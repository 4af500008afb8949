"""NVML source: samples every local GPU through pynvml on an interval and hands snapshots to the GPU hub
(the calls: ``nvml_calls``; one GPU's fields: ``nvml_device``; XID events: ``nvml_xid``).

The NVML library object is injected (the ``pynvml`` module by default) so tests drive a stand-in that raises
the real ``pynvml.NVMLError`` subclasses. Each NVML call that fails is skipped for that field only and counted
in ``sidecar_gpu_nvml_errors_total{field,reason}``; a field NVML says is NOT_SUPPORTED on a GPU is not asked
again for that GPU. GPU_IS_LOST ends that GPU's sample and exports ``sidecar_gpu_up 0`` for it; UNINITIALIZED
ends the whole sample and NVML is initialised again on the next tick. Without a driver or a GPU the source
exports ``sidecar_gpu_visible_devices{source="nvml"} 0`` and logs one line, not one per sample.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pynvml
from prometheus_client import CollectorRegistry, Counter

from sidecar.clock import Clock
from sidecar.processors.gpu_series import GpuSample
from sidecar.sources.gpu.config import NvmlConfig
from sidecar.sources.gpu.nvml_calls import NvmlCalls, Uninitialized, read_cmdline, read_process_name, reason, text
from sidecar.sources.gpu.nvml_device import DeviceReader
from sidecar.sources.gpu.nvml_xid import XidEvents
from sidecar.sources.gpu.publisher import GpuSink
from sidecar.state.gpus import GpuIdentity

if TYPE_CHECKING:
    from fastapi import APIRouter

from sidecar.component import Readiness
from sidecar.polled import Polled, TickerFactory

__all__ = ["NvmlSource", "read_process_name"]

SOURCE = "nvml"


class NvmlSource(Polled):
    name = "gpu_nvml"

    def __init__(
        self,
        config: NvmlConfig,
        *,
        hub: GpuSink,
        registry: CollectorRegistry,
        clock: Clock,
        nvml: Any = pynvml,
        process_name: Callable[[int], str | None] = read_process_name,
        cmdline: Callable[[int], bytes] = read_cmdline,
        logger: logging.Logger | None = None,
        ticker: TickerFactory | None = None,
    ) -> None:
        super().__init__(
            interval_secs=config.interval_secs,
            registry=registry,
            logger=logger,
            ticker=ticker,
            ticker_name="sidecar-gpu-nvml",
            job=self._sample,
        )
        self._cfg = config
        self._hub = hub
        self._clock = clock
        self._nvml = nvml
        self._process_name = process_name
        self._log = logger or logging.getLogger("sidecar.sources.gpu.nvml")
        self._errors = Counter(
            "sidecar_gpu_nvml_errors",
            "NVML calls that failed and were skipped, by field and NVML error.",
            ["field", "reason"],
            registry=registry,
        )
        self._init_failures = Counter(
            "sidecar_gpu_nvml_init_failures",
            "Times NVML could not be initialised, by NVML error.",
            ["reason"],
            registry=registry,
        )
        self._skipped = Counter(
            "sidecar_gpu_skipped",
            "Things over a configured bound and not exported (gpus, processes, events).",
            ["what"],
            registry=registry,
        )
        cmdline_failures = Counter(
            "sidecar_gpu_process_cmdline_failures",
            "GPU processes whose /proc/PID/cmdline could not be read, so their memory is not attributed to a "
            "model: vanished (ended between NVML and /proc: pid churn) or unreadable (another PID namespace, "
            "no permission).",
            ["reason"],
            registry=registry,
        )
        for r in ("vanished", "unreadable"):
            cmdline_failures.labels(r)
        self._lock = threading.Lock()
        self._initialized = False
        self._next_init_at = float("-inf")
        self._unavailable = ""  # why NVML is unusable; "" while usable
        self._logged = ""  # the last availability state logged, so each state is logged once
        self._driver = ""
        self._calls = NvmlCalls(self._errors)
        self._xid = XidEvents(nvml, self._calls, self._skipped, config.max_events_per_sample)
        self._device = DeviceReader(
            config, nvml, self._calls, self._xid, self._skipped, process_name, cmdline, cmdline_failures
        )
        self._stopped = False
        hub.register_source(SOURCE)

    # -- lifecycle ------------------------------------------------------------------------------------
    async def start(self) -> None:
        if not self._stopped:
            await super().start()

    async def _sample(self) -> None:
        await asyncio.to_thread(self.sample_once)

    async def shutdown(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        await super().shutdown()
        await asyncio.to_thread(self._teardown, 5.0)

    def _teardown(self, deadline_secs: float) -> None:
        # A sample may still run in its worker thread; wait for it (bounded) before NVML goes away under it.
        if not self._lock.acquire(timeout=deadline_secs):
            return
        try:
            self._close_nvml()
        finally:
            self._lock.release()

    def _close_nvml(self) -> None:
        self._xid.close()
        if self._initialized:
            with contextlib.suppress(pynvml.NVMLError):
                self._nvml.nvmlShutdown()
            self._initialized = False

    def readiness(self) -> Readiness | None:
        return None  # the hub speaks for every GPU source

    def routes(self) -> APIRouter | None:
        return None

    # -- sampling -------------------------------------------------------------------------------------
    def _log_state(self, state: str, level: int, msg: str, *args: object) -> None:
        if state != self._logged:
            self._logged = state
            self._log.log(level, msg, *args)

    def _init(self) -> bool:
        now = self._clock.monotonic()
        if now < self._next_init_at:
            return False
        try:
            self._nvml.nvmlInit()
        except pynvml.NVMLError as exc:
            why = reason(exc)
            self._init_failures.labels(why).inc()
            self._next_init_at = now + self._cfg.init_retry_secs
            self._unavailable = f"NVML unavailable: {exc}"
            self._log_state(
                f"unavailable:{why}",
                logging.WARNING,
                "no GPU is visible: NVML could not be initialised (%s); no NVML GPU series are exported "
                '(sidecar_gpu_visible_devices{source="nvml"} is 0); trying again every %.0fs',
                exc,
                self._cfg.init_retry_secs,
            )
            return False
        self._initialized = True
        self._unavailable = ""
        self._calls.unsupported.clear()
        try:
            self._driver = text(self._nvml.nvmlSystemGetDriverVersion())
        except pynvml.NVMLError as exc:
            self._errors.labels("driver_version", reason(exc)).inc()
        if self._cfg.xid_events:
            self._xid.create()
        return True

    def sample_once(self) -> int:
        """Take one snapshot of every GPU and hand it to the hub; returns the number of samples kept."""
        with self._lock:
            if self._stopped:
                return 0
            return self._sample_locked()

    def _sample_locked(self) -> int:
        if not self._initialized and not self._init():
            return self._hub.publish(SOURCE, (), {}, visible=0, detail=self._unavailable)
        try:
            count = int(self._nvml.nvmlDeviceGetCount())
        except pynvml.NVMLError as exc:
            return self._fail_whole_sample("device_count", exc)
        if count == 0:
            self._log_state(
                "no_devices",
                logging.WARNING,
                "no GPU is visible: NVML is loaded (driver %s) but reports no device",
                self._driver,
            )
            return self._hub.publish(SOURCE, (), {}, visible=0, detail=f"driver {self._driver}: no device")
        if count > self._cfg.max_gpus:
            self._skipped.labels("gpus").inc(count - self._cfg.max_gpus)
        samples: list[GpuSample] = []
        gpus: dict[str, GpuIdentity] = {}
        up = 0
        try:
            self._device.begin()
            handles = self._handles(min(count, self._cfg.max_gpus), samples)
            self._xid.drain()
            for index, handle in handles.items():
                if self._device.read(index, handle, samples, gpus, self._driver):
                    up += 1
        except Uninitialized:
            self._close_nvml()
            return self._hub.publish(SOURCE, (), {}, visible=0, detail="NVML lost its initialisation; re-initialising")
        self._log_state("ok", logging.INFO, "NVML sees %d GPU(s), driver %s", count, self._driver)
        return self._hub.publish(
            SOURCE,
            samples,
            gpus,
            visible=count,
            detail=f"driver {self._driver}" + (f", {count - up} not answering" if up < count else ""),
            reading=self._device.reading(),
        )

    def _fail_whole_sample(self, field: str, exc: pynvml.NVMLError) -> int:
        why = reason(exc)
        self._errors.labels(field, why).inc()
        if why == "uninitialized":
            self._close_nvml()
        return self._hub.publish(SOURCE, (), {}, visible=0, detail=f"{field} failed: {exc}")

    def _handles(self, n: int, samples: list[GpuSample]) -> dict[int, Any]:
        handles: dict[int, Any] = {}
        for index in range(n):
            try:
                handles[index] = self._nvml.nvmlDeviceGetHandleByIndex(index)
            except pynvml.NVMLError as exc:
                why = reason(exc)
                self._errors.labels("handle", why).inc()
                if why == "uninitialized":
                    raise Uninitialized() from exc
                self._device.export_down(index, samples)
        return handles
