"""An NVML stand-in with pynvml's function names, return shapes and real error classes.

Errors are raised as ``pynvml.NVMLError(code)``, which pynvml itself turns into the same subclass the real
library raises (``NVMLError_NotSupported``, ``NVMLError_GpuIsLost``, ...), so the source under test sees
exactly what it would see from libnvidia-ml.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pynvml
from prometheus_client import CollectorRegistry

from sidecar.clock import FakeClock
from sidecar.sources.gpu.config import GpuConfig
from sidecar.sources.gpu.nvml import NvmlSource
from sidecar.state.gpus import GpuHub

GIB = 1024**3


@dataclass
class FakeGpu:
    uuid: str
    name: str = "NVIDIA H100 80GB HBM3"
    util: tuple[int, int] = (75, 30)  # percent, as NVML returns them
    memory: tuple[int, int, int] = (10 * GIB, 70 * GIB, 80 * GIB)  # used, free, total (bytes)
    power_mw: int = 312_500
    limit_mw: int = 700_000
    temp_c: int = 61
    sm_mhz: int = 1980
    mem_mhz: int = 2619
    pcie_kb: tuple[int, int] = (1000, 2000)  # tx, rx in KB/s
    energy_mj: int = 123_456_789
    throttle_mask: int = pynvml.nvmlClocksEventReasonSwPowerCap | pynvml.nvmlClocksEventReasonHwThermalSlowdown
    ecc: tuple[int, int] = (3, 0)  # corrected, uncorrected
    processes: list[tuple[int, int | None]] = field(default_factory=list)  # (pid, used bytes or None)
    errors: dict[str, int] = field(default_factory=dict)  # nvml function name -> NVML_ERROR_* code
    lost: bool = False


class FakeNvml:
    def __init__(self, gpus: list[FakeGpu], *, init_error: int | None = None, driver: str = "550.54.15") -> None:
        self.gpus = gpus
        self.init_error = init_error
        self.driver = driver
        self.initialized = False
        self.calls: dict[str, int] = {}
        self.events: list[SimpleNamespace] = []
        self.registered: list[int] = []
        self.register_error: dict[int, int] = {}
        self.shutdowns = 0
        self.v3 = True  # False: a library from before R510, whose unversioned process call fails

    def _procs(self, g: FakeGpu) -> list[Any]:
        return [
            SimpleNamespace(pid=pid, usedGpuMemory=used, gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF)
            for pid, used in g.processes
        ]

    # -- helpers -----------------------------------------------------------------------------------------
    def _count(self, fn: str) -> None:
        self.calls[fn] = self.calls.get(fn, 0) + 1

    def _gpu(self, fn: str, h: Any) -> FakeGpu:
        self._count(fn)
        if not self.initialized:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
        gpu = self.gpus[h.index]
        if gpu.lost:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        if fn in gpu.errors:
            raise pynvml.NVMLError(gpu.errors[fn])
        return gpu

    def xid(self, index: int, code: int) -> None:
        self.events.append(
            SimpleNamespace(
                device=SimpleNamespace(index=index),
                eventType=pynvml.nvmlEventTypeXidCriticalError,
                eventData=code,
            )
        )

    # -- the pynvml surface the source uses ---------------------------------------------------------------
    def nvmlInit(self) -> None:
        self._count("nvmlInit")
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)
        self.initialized = True

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1
        self.initialized = False

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.driver

    def nvmlDeviceGetCount(self) -> int:
        self._count("nvmlDeviceGetCount")
        if not self.initialized:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        self._count("nvmlDeviceGetHandleByIndex")
        if not self.initialized:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
        if self.gpus[index].lost:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        return SimpleNamespace(index=index)

    def nvmlDeviceGetUUID(self, h: Any) -> str:
        return self._gpu("nvmlDeviceGetUUID", h).uuid

    def nvmlDeviceGetName(self, h: Any) -> str:
        return self._gpu("nvmlDeviceGetName", h).name

    def nvmlDeviceGetUtilizationRates(self, h: Any) -> Any:
        g = self._gpu("nvmlDeviceGetUtilizationRates", h)
        return SimpleNamespace(gpu=g.util[0], memory=g.util[1])

    def nvmlDeviceGetMemoryInfo(self, h: Any) -> Any:
        g = self._gpu("nvmlDeviceGetMemoryInfo", h)
        return SimpleNamespace(used=g.memory[0], free=g.memory[1], total=g.memory[2])

    def nvmlDeviceGetPowerUsage(self, h: Any) -> int:
        return self._gpu("nvmlDeviceGetPowerUsage", h).power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, h: Any) -> int:
        return self._gpu("nvmlDeviceGetEnforcedPowerLimit", h).limit_mw

    def nvmlDeviceGetTemperature(self, h: Any, sensor: int) -> int:
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return self._gpu("nvmlDeviceGetTemperature", h).temp_c

    def nvmlDeviceGetClockInfo(self, h: Any, clock: int) -> int:
        g = self._gpu("nvmlDeviceGetClockInfo", h)
        return {pynvml.NVML_CLOCK_SM: g.sm_mhz, pynvml.NVML_CLOCK_MEM: g.mem_mhz}[clock]

    def nvmlDeviceGetPcieThroughput(self, h: Any, counter: int) -> int:
        g = self._gpu("nvmlDeviceGetPcieThroughput", h)
        return g.pcie_kb[0] if counter == pynvml.NVML_PCIE_UTIL_TX_BYTES else g.pcie_kb[1]

    def nvmlDeviceGetTotalEnergyConsumption(self, h: Any) -> int:
        return self._gpu("nvmlDeviceGetTotalEnergyConsumption", h).energy_mj

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: Any) -> int:
        return self._gpu("nvmlDeviceGetCurrentClocksEventReasons", h).throttle_mask

    def nvmlDeviceGetTotalEccErrors(self, h: Any, error_type: int, counter_type: int) -> int:
        g = self._gpu("nvmlDeviceGetTotalEccErrors", h)
        assert counter_type == pynvml.NVML_VOLATILE_ECC
        return g.ecc[0] if error_type == pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED else g.ecc[1]

    def nvmlDeviceGetComputeRunningProcesses(self, h: Any) -> list[Any]:
        g = self._gpu("nvmlDeviceGetComputeRunningProcesses", h)
        if not self.v3:
            # what pynvml's throwOnVersionMismatch raises when the library has no _v3 entry point
            raise pynvml.NVMLLibraryMismatchError("Unversioned function called ...")
        return self._procs(g)

    def nvmlDeviceGetComputeRunningProcesses_v2(self, h: Any) -> list[Any]:
        return self._procs(self._gpu("nvmlDeviceGetComputeRunningProcesses_v2", h))

    def nvmlEventSetCreate(self) -> Any:
        return SimpleNamespace(kind="event_set")

    def nvmlDeviceRegisterEvents(self, h: Any, types: int, event_set: Any) -> None:
        self._gpu("nvmlDeviceRegisterEvents", h)
        assert types & pynvml.nvmlEventTypeXidCriticalError
        if h.index in self.register_error:
            raise pynvml.NVMLError(self.register_error[h.index])
        self.registered.append(h.index)

    def nvmlEventSetWait(self, event_set: Any, timeout_ms: int) -> Any:
        self._count("nvmlEventSetWait")
        assert timeout_ms == 0, "the sampler must never block on events"
        if not self.events:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)
        return self.events.pop(0)

    def nvmlEventSetFree(self, event_set: Any) -> None:
        self._count("nvmlEventSetFree")


class FakeProc:
    """``/proc/<pid>/cmdline`` as a dict: a pid absent is a process that ended (FileNotFoundError, as the real
    file raises); a pid in ``unreadable`` is another user's (PermissionError)."""

    def __init__(self, cmdlines: dict[int, bytes], unreadable: frozenset[int] = frozenset()) -> None:
        self.cmdlines = dict(cmdlines)  # a test changes its own copy
        self.unreadable = unreadable
        self.reads: list[int] = []

    def __call__(self, pid: int) -> bytes:
        self.reads.append(pid)
        if pid in self.unreadable:
            raise PermissionError(13, "Permission denied", f"/proc/{pid}/cmdline")
        if pid not in self.cmdlines:
            raise FileNotFoundError(2, "No such file or directory", f"/proc/{pid}/cmdline")
        return self.cmdlines[pid]


@dataclass
class Rig:
    nvml: FakeNvml
    source: NvmlSource
    hub: GpuHub
    registry: CollectorRegistry
    clock: FakeClock

    def value(self, metric: str, /, **labels: str) -> float | None:
        return self.registry.get_sample_value(metric, labels)


def make_rig(
    gpus: list[FakeGpu],
    *,
    init_error: int | None = None,
    processes: dict[int, str] | None = None,
    gpu_config: dict[str, Any] | None = None,
    cmdlines: dict[int, bytes] | None = None,
) -> Rig:
    cfg = GpuConfig.model_validate(gpu_config or {})
    reg = CollectorRegistry(auto_describe=True)
    clock = FakeClock()
    hub = GpuHub(registry=reg, clock=clock, max_series=cfg.max_series, stale_after_secs=cfg.stale_after_secs)
    nvml = FakeNvml(gpus, init_error=init_error)
    names = processes or {}
    src = NvmlSource(
        cfg.nvml,
        hub=hub,
        registry=reg,
        clock=clock,
        nvml=nvml,
        process_name=names.get,
        cmdline=FakeProc(cmdlines or {}),
    )
    return Rig(nvml, src, hub, reg, clock)
