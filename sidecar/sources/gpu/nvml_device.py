"""One GPU's sample from NVML: utilisation, memory, power, temperature, clocks, PCIe, energy, throttle reasons,
ECC and XID counts, and per-process memory (bounded), each field skipped alone when NVML fails on it.

Beside the series it keeps, per sample, the memory used per GPU and the compute processes joined to their
``/proc/<pid>/cmdline`` (``reading()``): the per-model GPU memory attribution is fed from them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pynvml
from prometheus_client import Counter

from sidecar.model import GpuMemoryReading, GpuProcess
from sidecar.processors.gpu_series import GpuSample, decode_throttle_reasons
from sidecar.sources.gpu.config import NvmlConfig
from sidecar.sources.gpu.nvml_calls import MISSING, GpuLost, NvmlCalls, split_cmdline, text
from sidecar.sources.gpu.nvml_xid import XidEvents
from sidecar.state.gpus import GpuIdentity

__all__ = ["NOT_AVAILABLE", "DeviceReader"]

# NVML_VALUE_NOT_AVAILABLE for an unsigned long long: bindings that do not turn it into None hand it on as is.
NOT_AVAILABLE = 2**64 - 1


class DeviceReader:
    def __init__(
        self,
        config: NvmlConfig,
        nvml: Any,
        calls: NvmlCalls,
        xid: XidEvents,
        skipped: Counter,
        process_name: Callable[[int], str | None],
        cmdline: Callable[[int], bytes],
        cmdline_failures: Counter,
    ) -> None:
        self._cfg = config
        self._nvml = nvml
        self._calls = calls
        self._xid = xid
        self._skipped = skipped
        self._process_name = process_name
        self._cmdline = cmdline
        self._cmdline_failures = cmdline_failures
        self._v2_only = False  # the library has no _v3 process call (older driver): ask _v2 from then on
        self._used: dict[str, float] = {}
        self._rows: list[GpuProcess] = []
        self._complete = False
        # The last identity read of each GPU index, so a GPU that stops answering is still named.
        self.idents: dict[int, GpuIdentity] = {}
        self.uuids: dict[int, str] = {}

    def begin(self) -> None:
        """Start a sample: forget the previous sample's memory reading."""
        self._used, self._rows, self._complete = {}, [], self._cfg.processes

    def reading(self) -> GpuMemoryReading | None:
        """This sample's memory view, None when no GPU gave a memory reading."""
        if not self._used:
            return None
        return GpuMemoryReading(used=dict(self._used), processes=tuple(self._rows), processes_complete=self._complete)

    def export_down(self, index: int, samples: list[GpuSample]) -> None:
        ident = self.idents.get(index)
        labels = {"gpu": str(index)}
        if ident is not None:
            labels.update(uuid=self.uuids.get(index, ""), name=ident.name)
        samples.append(GpuSample.of("sidecar_gpu_up", labels, 0))

    def read(self, index: int, h: Any, out: list[GpuSample], gpus: dict[str, GpuIdentity], driver: str) -> bool:
        """Append GPU ``index``'s samples to ``out`` and its identity to ``gpus``; False when it is lost."""
        nv = self._nvml
        mine: list[GpuSample] = []
        try:
            uuid = self._calls.call(index, "uuid", nv.nvmlDeviceGetUUID, h)
            name = self._calls.call(index, "name", nv.nvmlDeviceGetName, h)
            uuid_s = text(uuid) if uuid is not MISSING else self.uuids.get(index, "")
            prev = self.idents.get(index)
            name_s = text(name) if name is not MISSING else (prev.name if prev else "")
            self.uuids[index] = uuid_s
            self.idents[index] = GpuIdentity(str(index), name_s)
            lab = {"gpu": str(index), "uuid": uuid_s, "name": name_s}

            def put(series: str, value: float, **extra: str) -> None:
                mine.append(GpuSample.of(series, {**lab, **extra}, value))

            util = self._calls.call(index, "utilization", nv.nvmlDeviceGetUtilizationRates, h)
            if util is not MISSING:
                put("sidecar_gpu_utilization_ratio", util.gpu / 100.0)
                put("sidecar_gpu_memory_utilization_ratio", util.memory / 100.0)
            used_now: float | None = None
            rows: list[GpuProcess] = []
            mem = self._calls.call(index, "memory", nv.nvmlDeviceGetMemoryInfo, h)
            if mem is not MISSING:
                used_now = float(mem.used)
                put("sidecar_gpu_memory_used_bytes", mem.used)
                put("sidecar_gpu_memory_free_bytes", mem.free)
                put("sidecar_gpu_memory_total_bytes", mem.total)
            self._scalar(index, "power_draw", put, "sidecar_gpu_power_draw_watts", 0.001, nv.nvmlDeviceGetPowerUsage, h)
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
                v = self._calls.call(index, f"pcie_{direction}", nv.nvmlDeviceGetPcieThroughput, h, counter)
                if v is not MISSING:
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
            mask = self._calls.call(index, "throttle_reasons", self._throttle_fn(), h)
            if mask is not MISSING:
                for reason, active in decode_throttle_reasons(int(mask)).items():
                    put("sidecar_gpu_throttle_active", active, reason=reason)
            for kind, err_type in (
                ("corrected", pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED),
                ("uncorrected", pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED),
            ):
                v = self._calls.call(
                    index,
                    f"ecc_{kind}",
                    nv.nvmlDeviceGetTotalEccErrors,
                    h,
                    err_type,
                    pynvml.NVML_VOLATILE_ECC,
                )
                if v is not MISSING:
                    put("sidecar_gpu_ecc_errors", v, type=kind)
            if self._cfg.xid_events:
                self._xid.register(index, h, uuid_s)
                if uuid_s in self._xid.registered:
                    put("sidecar_gpu_xid_errors", self._xid.count.get(uuid_s, 0))
                if uuid_s in self._xid.last:
                    put("sidecar_gpu_last_xid", self._xid.last[uuid_s])
            if self._cfg.processes:
                self._processes(index, h, lab, mine, rows)
        except GpuLost:
            self._complete = False
            self.export_down(index, out)
            return False
        if used_now is not None and uuid_s:
            self._used[uuid_s] = used_now
        self._rows.extend(rows)
        out.extend(mine)
        out.append(GpuSample.of("sidecar_gpu_up", lab, 1))
        out.append(GpuSample.of("sidecar_gpu_info", {**lab, "driver_version": driver}, 1))
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
        v = self._calls.call(index, field, fn, *args)
        if v is not MISSING:
            put(series, float(v) * scale)

    def _throttle_fn(self) -> Callable[..., Any]:
        # "clocks event reasons" is the newer name of the same bit mask; old bindings only have the old name.
        fn = getattr(self._nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        return fn if fn is not None else self._nvml.nvmlDeviceGetCurrentClocksThrottleReasons

    def _process_list(self, index: int, h: Any) -> Any:
        nv = self._nvml
        if not self._v2_only:
            try:
                return self._calls.call(index, "processes", nv.nvmlDeviceGetComputeRunningProcesses, h)
            except pynvml.NVMLLibraryMismatchError:
                # pynvml's unversioned call is _v3, which drivers before R510 lack.
                self._v2_only = True
        return self._calls.call(index, "processes", nv.nvmlDeviceGetComputeRunningProcesses_v2, h)

    def _joined(self, uuid: str, pid: int, used: float) -> GpuProcess:
        try:
            argv = split_cmdline(self._cmdline(pid))
        except (FileNotFoundError, ProcessLookupError):
            self._cmdline_failures.labels("vanished").inc()  # the process ended between NVML and /proc
            argv = ()
        except OSError:
            self._cmdline_failures.labels("unreadable").inc()  # not ours to read, or another PID namespace
            argv = ()
        return GpuProcess(uuid, pid, used, argv)

    def _processes(
        self, index: int, h: Any, lab: dict[str, str], out: list[GpuSample], joined: list[GpuProcess]
    ) -> None:
        procs = self._process_list(index, h)
        if procs is MISSING:
            self._complete = False
            return
        owners = {"triton": 0.0, "other": 0.0}
        rows: list[tuple[float, int, str, str]] = []
        for p in procs:
            used = getattr(p, "usedGpuMemory", None)
            if used is None or used == NOT_AVAILABLE:
                # NVML cannot attribute memory here (e.g. some virtualised setups): not a zero
                self._skipped.labels("process_memory_unavailable").inc()
                continue
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
            joined.append(self._joined(lab["uuid"], pid, used))
            out.append(
                GpuSample.of(
                    "sidecar_gpu_process_memory_used_bytes",
                    {**lab, "pid": str(pid), "command": comm, "owner": owner},
                    used,
                )
            )
        for owner, total in owners.items():
            out.append(GpuSample.of("sidecar_gpu_owner_memory_used_bytes", {**lab, "owner": owner}, total))
