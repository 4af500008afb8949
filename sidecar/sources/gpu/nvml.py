"""NVML source: samples every local GPU through pynvml on an interval and hands snapshots to the GPU hub.

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
from sidecar.processors.gpu_series import GpuSample, decode_throttle_reasons
from sidecar.sources.gpu.config import NvmlConfig
from sidecar.state.gpus import GpuHub, GpuIdentity

if TYPE_CHECKING:
    from fastapi import APIRouter

from sidecar.component import Readiness
from sidecar.periodic import Periodic

__all__ = ["NvmlSource", "read_process_name"]

SOURCE = "nvml"

_REASONS: dict[int, str] = {
    pynvml.NVML_ERROR_NOT_SUPPORTED: "not_supported",
    pynvml.NVML_ERROR_GPU_IS_LOST: "gpu_is_lost",
    pynvml.NVML_ERROR_NO_PERMISSION: "no_permission",
    pynvml.NVML_ERROR_UNINITIALIZED: "uninitialized",
    pynvml.NVML_ERROR_LIBRARY_NOT_FOUND: "library_not_found",
    pynvml.NVML_ERROR_DRIVER_NOT_LOADED: "driver_not_loaded",
    pynvml.NVML_ERROR_FUNCTION_NOT_FOUND: "function_not_found",
    pynvml.NVML_ERROR_TIMEOUT: "timeout",
    pynvml.NVML_ERROR_NOT_FOUND: "not_found",
}


def _reason(exc: BaseException) -> str:
    return _REASONS.get(getattr(exc, "value", -1), "other")


def _text(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def read_process_name(pid: int) -> str | None:
    """The process's ``comm`` (as ``ps`` shows it, at most 15 characters); None when gone or not visible."""
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
            return f.read().strip() or None
    except OSError:
        return None


class _GpuLost(Exception):
    pass


class _Uninitialized(Exception):
    pass


_MISSING = object()


class NvmlSource:
    name = "gpu_nvml"
    role = "source"

    def __init__(
        self,
        config: NvmlConfig,
        hub: GpuHub,
        registry: CollectorRegistry,
        clock: Clock,
        *,
        nvml: Any = pynvml,
        process_name: Callable[[int], str | None] = read_process_name,
        logger: logging.Logger | None = None,
    ) -> None:
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
        self._lock = threading.Lock()
        self._initialized = False
        self._next_init_at = float("-inf")
        self._unavailable = ""  # why NVML is unusable; "" while usable
        self._logged = ""  # the last availability state logged, so each state is logged once
        self._driver = ""
        self._event_set: Any = None
        self._unsupported: set[tuple[int, str]] = set()
        self._idents: dict[int, GpuIdentity] = {}
        self._uuids: dict[int, str] = {}
        self._xid_count: dict[str, int] = {}
        self._xid_last: dict[str, int] = {}
        self._xid_registered: set[str] = set()
        self._periodic = Periodic("sidecar-gpu-nvml", self._sample, config.interval_secs, on_error=self._sample_failed)
        self._stopped = False
        hub.register_source(SOURCE)

    # -- lifecycle ------------------------------------------------------------------------------------
    async def start(self) -> None:
        if not self._stopped:
            self._periodic.start()

    async def _sample(self) -> None:
        await asyncio.to_thread(self.sample_once)

    def _sample_failed(self, exc: Exception) -> None:
        self._errors.labels("sample", "other").inc()
        self._log.error("NVML sample failed", exc_info=exc)

    async def shutdown(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        await self._periodic.stop()
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
        if self._event_set is not None:
            with contextlib.suppress(pynvml.NVMLError):
                self._nvml.nvmlEventSetFree(self._event_set)
            self._event_set = None
        if self._initialized:
            with contextlib.suppress(pynvml.NVMLError):
                self._nvml.nvmlShutdown()
            self._initialized = False
        self._xid_registered.clear()

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
            reason = _reason(exc)
            self._init_failures.labels(reason).inc()
            self._next_init_at = now + self._cfg.init_retry_secs
            self._unavailable = f"NVML unavailable: {exc}"
            self._log_state(
                f"unavailable:{reason}",
                logging.WARNING,
                "no GPU is visible: NVML could not be initialised (%s); no NVML GPU series are exported "
                '(sidecar_gpu_visible_devices{source="nvml"} is 0); trying again every %.0fs',
                exc,
                self._cfg.init_retry_secs,
            )
            return False
        self._initialized = True
        self._unavailable = ""
        self._unsupported.clear()
        try:
            self._driver = _text(self._nvml.nvmlSystemGetDriverVersion())
        except pynvml.NVMLError as exc:
            self._errors.labels("driver_version", _reason(exc)).inc()
        if self._cfg.xid_events:
            try:
                self._event_set = self._nvml.nvmlEventSetCreate()
            except pynvml.NVMLError as exc:
                self._errors.labels("xid_events", _reason(exc)).inc()
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
            handles = self._handles(min(count, self._cfg.max_gpus), samples)
            self._drain_events(handles)
            for index, handle in handles.items():
                if self._sample_device(index, handle, samples, gpus):
                    up += 1
        except _Uninitialized:
            self._close_nvml()
            return self._hub.publish(
                SOURCE, (), {}, visible=0, detail="NVML lost its initialisation; re-initialising"
            )
        self._log_state("ok", logging.INFO, "NVML sees %d GPU(s), driver %s", count, self._driver)
        return self._hub.publish(
            SOURCE,
            samples,
            gpus,
            visible=count,
            detail=f"driver {self._driver}" + (f", {count - up} not answering" if up < count else ""),
        )

    def _fail_whole_sample(self, field: str, exc: pynvml.NVMLError) -> int:
        reason = _reason(exc)
        self._errors.labels(field, reason).inc()
        if reason == "uninitialized":
            self._close_nvml()
        return self._hub.publish(SOURCE, (), {}, visible=0, detail=f"{field} failed: {exc}")

    def _handles(self, n: int, samples: list[GpuSample]) -> dict[int, Any]:
        handles: dict[int, Any] = {}
        for index in range(n):
            try:
                handles[index] = self._nvml.nvmlDeviceGetHandleByIndex(index)
            except pynvml.NVMLError as exc:
                reason = _reason(exc)
                self._errors.labels("handle", reason).inc()
                if reason == "uninitialized":
                    raise _Uninitialized() from exc
                self._export_down(index, samples)
        return handles

    def _export_down(self, index: int, samples: list[GpuSample]) -> None:
        ident = self._idents.get(index)
        labels = {"gpu": str(index)}
        if ident is not None:
            labels.update(uuid=self._uuids.get(index, ""), name=ident.name)
        samples.append(GpuSample.of("sidecar_gpu_up", labels, 0))

    def _call(self, index: int, field: str, fn: Callable[..., Any], *args: Any) -> Any:
        if (index, field) in self._unsupported:
            return _MISSING
        try:
            return fn(*args)
        except pynvml.NVMLError as exc:
            reason = _reason(exc)
            self._errors.labels(field, reason).inc()
            if reason == "not_supported":
                self._unsupported.add((index, field))
            elif reason == "gpu_is_lost":
                raise _GpuLost() from exc
            elif reason == "uninitialized":
                raise _Uninitialized() from exc
            return _MISSING

    def _sample_device(self, index: int, h: Any, out: list[GpuSample], gpus: dict[str, GpuIdentity]) -> bool:
        nv = self._nvml
        mine: list[GpuSample] = []
        try:
            uuid = self._call(index, "uuid", nv.nvmlDeviceGetUUID, h)
            name = self._call(index, "name", nv.nvmlDeviceGetName, h)
            uuid_s = _text(uuid) if uuid is not _MISSING else self._uuids.get(index, "")
            prev = self._idents.get(index)
            name_s = _text(name) if name is not _MISSING else (prev.name if prev else "")
            self._uuids[index] = uuid_s
            self._idents[index] = GpuIdentity(str(index), name_s)
            lab = {"gpu": str(index), "uuid": uuid_s, "name": name_s}

            def put(series: str, value: float, **extra: str) -> None:
                mine.append(GpuSample.of(series, {**lab, **extra}, value))

            util = self._call(index, "utilization", nv.nvmlDeviceGetUtilizationRates, h)
            if util is not _MISSING:
                put("sidecar_gpu_utilization_ratio", util.gpu / 100.0)
                put("sidecar_gpu_memory_utilization_ratio", util.memory / 100.0)
            mem = self._call(index, "memory", nv.nvmlDeviceGetMemoryInfo, h)
            if mem is not _MISSING:
                put("sidecar_gpu_memory_used_bytes", mem.used)
                put("sidecar_gpu_memory_free_bytes", mem.free)
                put("sidecar_gpu_memory_total_bytes", mem.total)
            self._scalar(
                index, "power_draw", put, "sidecar_gpu_power_draw_watts", 0.001, nv.nvmlDeviceGetPowerUsage, h
            )
            self._scalar(
                index,
                "power_limit",
                put,
                "sidecar_gpu_power_limit_watts",
                0.001,
                nv.nvmlDeviceGetEnforcedPowerLimit,
                h,
            )
            self._scalar(
                index,
                "temperature",
                put,
                "sidecar_gpu_temperature_celsius",
                1.0,
                nv.nvmlDeviceGetTemperature,
                h,
                pynvml.NVML_TEMPERATURE_GPU,
            )
            self._scalar(
                index,
                "sm_clock",
                put,
                "sidecar_gpu_sm_clock_hertz",
                1e6,
                nv.nvmlDeviceGetClockInfo,
                h,
                pynvml.NVML_CLOCK_SM,
            )
            self._scalar(
                index,
                "memory_clock",
                put,
                "sidecar_gpu_memory_clock_hertz",
                1e6,
                nv.nvmlDeviceGetClockInfo,
                h,
                pynvml.NVML_CLOCK_MEM,
            )
            # NVML reports PCIe throughput in KB/s (KiB: nvidia-smi prints the same number as "KB/s").
            for direction, counter in (
                ("tx", pynvml.NVML_PCIE_UTIL_TX_BYTES),
                ("rx", pynvml.NVML_PCIE_UTIL_RX_BYTES),
            ):
                v = self._call(index, f"pcie_{direction}", nv.nvmlDeviceGetPcieThroughput, h, counter)
                if v is not _MISSING:
                    put("sidecar_gpu_pcie_throughput_bytes_per_second", v * 1024.0, direction=direction)
            self._scalar(
                index,
                "energy",
                put,
                "sidecar_gpu_energy_joules",
                0.001,
                nv.nvmlDeviceGetTotalEnergyConsumption,
                h,
            )
            mask = self._call(index, "throttle_reasons", self._throttle_fn(), h)
            if mask is not _MISSING:
                for reason, active in decode_throttle_reasons(int(mask)).items():
                    put("sidecar_gpu_throttle_active", active, reason=reason)
            for kind, err_type in (
                ("corrected", pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED),
                ("uncorrected", pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED),
            ):
                v = self._call(
                    index,
                    f"ecc_{kind}",
                    nv.nvmlDeviceGetTotalEccErrors,
                    h,
                    err_type,
                    pynvml.NVML_VOLATILE_ECC,
                )
                if v is not _MISSING:
                    put("sidecar_gpu_ecc_errors", v, type=kind)
            if self._cfg.xid_events:
                self._register_xid(index, h, uuid_s)
                if uuid_s in self._xid_registered:
                    put("sidecar_gpu_xid_errors", self._xid_count.get(uuid_s, 0))
                if uuid_s in self._xid_last:
                    put("sidecar_gpu_last_xid", self._xid_last[uuid_s])
            if self._cfg.processes:
                self._processes(index, h, lab, mine)
        except _GpuLost:
            self._export_down(index, out)
            return False
        out.extend(mine)
        out.append(GpuSample.of("sidecar_gpu_up", lab, 1))
        out.append(GpuSample.of("sidecar_gpu_info", {**lab, "driver_version": self._driver}, 1))
        if uuid_s:
            gpus[uuid_s] = GpuIdentity(str(index), name_s)
        return True

    def _scalar(
        self,
        index: int,
        field: str,
        put: Callable[..., None],
        series: str,
        scale: float,
        fn: Callable[..., Any],
        *args: Any,
    ) -> None:
        v = self._call(index, field, fn, *args)
        if v is not _MISSING:
            put(series, float(v) * scale)

    def _throttle_fn(self) -> Callable[..., Any]:
        # "clocks event reasons" is the newer name of the same bit mask; old bindings only have the old name.
        fn = getattr(self._nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        return fn if fn is not None else self._nvml.nvmlDeviceGetCurrentClocksThrottleReasons

    def _register_xid(self, index: int, h: Any, uuid: str) -> None:
        if self._event_set is None or not uuid or uuid in self._xid_registered:
            return
        if (index, "xid_events") in self._unsupported:
            return
        res = self._call(
            index,
            "xid_events",
            self._nvml.nvmlDeviceRegisterEvents,
            h,
            pynvml.nvmlEventTypeXidCriticalError,
            self._event_set,
        )
        if res is not _MISSING:
            self._xid_registered.add(uuid)

    def _drain_events(self, handles: dict[int, Any]) -> None:
        """Non-blocking: take the XID events queued since the last sample (bounded per sample)."""
        if self._event_set is None or not self._xid_registered:
            return
        nv = self._nvml
        for _ in range(self._cfg.max_events_per_sample):
            try:
                data = nv.nvmlEventSetWait(self._event_set, 0)
            except pynvml.NVMLError as exc:
                reason = _reason(exc)
                if reason != "timeout":  # TIMEOUT is the normal "no more events"
                    self._errors.labels("xid_events", reason).inc()
                    if reason == "uninitialized":
                        raise _Uninitialized() from exc
                return
            if not data.eventType & pynvml.nvmlEventTypeXidCriticalError:
                continue
            try:
                uuid = _text(nv.nvmlDeviceGetUUID(data.device))
            except pynvml.NVMLError as exc:
                self._errors.labels("xid_events", _reason(exc)).inc()
                continue
            self._xid_count[uuid] = self._xid_count.get(uuid, 0) + 1
            self._xid_last[uuid] = int(data.eventData)
        else:
            self._skipped.labels("events").inc()

    def _processes(self, index: int, h: Any, lab: dict[str, str], out: list[GpuSample]) -> None:
        procs = self._call(index, "processes", self._nvml.nvmlDeviceGetComputeRunningProcesses, h)
        if procs is _MISSING:
            return
        owners = {"triton": 0.0, "other": 0.0}
        rows: list[tuple[float, int, str, str]] = []
        for p in procs:
            used = getattr(p, "usedGpuMemory", None)
            if used is None:
                continue  # NVML cannot attribute memory here (e.g. some virtualised setups): not a zero
            pid = int(p.pid)
            comm = self._process_name(pid) or "unknown"
            owner = "triton" if any(comm.startswith(n) for n in self._cfg.triton_process_names) else "other"
            owners[owner] += float(used)
            rows.append((float(used), pid, comm, owner))
        rows.sort(reverse=True)
        limit = self._cfg.max_processes_per_gpu
        if len(rows) > limit:
            self._skipped.labels("processes").inc(len(rows) - limit)
        for used, pid, comm, owner in rows[:limit]:
            out.append(
                GpuSample.of(
                    "sidecar_gpu_process_memory_used_bytes",
                    {**lab, "pid": str(pid), "command": comm, "owner": owner},
                    used,
                )
            )
        for owner, total in owners.items():
            out.append(GpuSample.of("sidecar_gpu_owner_memory_used_bytes", {**lab, "owner": owner}, total))
