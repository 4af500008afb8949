"""How the GPU sources hand their samples on: as ``gpu_snapshots`` batches on the bus.

The sources call the three methods of ``GpuSink``; in the service that sink is ``BusGpuSink``, and the GPU state
(``state/gpus.py``) subscribes to ``gpu_snapshots``. The NVML source's memory view of a sample
(``GpuMemoryReading``) follows its snapshot as a ``gpu_memory`` batch, for the per-model GPU memory.
Unit tests may hand a source the GPU state itself, which has the same three methods.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, Protocol

from sidecar.clock import Clock
from sidecar.component import Bus
from sidecar.model import Batch, GpuMemoryReading, GpuSnapshot

__all__ = ["BusGpuSink", "GpuSink"]


class GpuSink(Protocol):
    def register_source(self, source: str) -> None: ...

    def publish(
        self,
        source: str,
        samples: Iterable[Any],
        gpus: Mapping[str, Any],
        *,
        visible: int,
        detail: str = "",
        reading: GpuMemoryReading | None = None,
    ) -> int: ...

    def note(self, source: str, detail: str) -> None: ...


class BusGpuSink:
    def __init__(self, bus: Bus, clock: Clock) -> None:
        self.bus = bus
        self.clock = clock

    def _send(self, source: str, snap: GpuSnapshot, reading: GpuMemoryReading | None = None) -> None:
        at = self.clock.now()
        self.bus.publish(
            Batch(kind="gpu_snapshots", source=source, items=(snap,), received_at=at, complete=snap.sampled)
        )
        if reading is not None:
            self.bus.publish(Batch(kind="gpu_memory", source=source, items=(reading,), received_at=at, complete=True))

    def register_source(self, source: str) -> None:
        self._send(source, GpuSnapshot((), MappingProxyType({}), 0, "not sampled yet", sampled=False))

    def publish(
        self,
        source: str,
        samples: Iterable[Any],
        gpus: Mapping[str, Any],
        *,
        visible: int,
        detail: str = "",
        reading: GpuMemoryReading | None = None,
    ) -> int:
        items = tuple(samples)
        self._send(source, GpuSnapshot(items, MappingProxyType(dict(gpus)), visible, detail), reading)
        return len(items)

    def note(self, source: str, detail: str) -> None:
        self._send(source, GpuSnapshot((), MappingProxyType({}), 0, detail, sampled=False))
