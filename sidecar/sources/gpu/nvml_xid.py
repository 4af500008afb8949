"""XID critical-error events from NVML: registered once per GPU, drained without blocking at each sample, and
kept as a count and the last XID per GPU uuid."""

from __future__ import annotations

import contextlib
from typing import Any

import pynvml
from prometheus_client import Counter

from sidecar.sources.gpu.nvml_calls import MISSING, NvmlCalls, Uninitialized, reason, text

__all__ = ["XidEvents"]


class XidEvents:
    def __init__(self, nvml: Any, calls: NvmlCalls, skipped: Counter, max_per_sample: int) -> None:
        self._nvml = nvml
        self._calls = calls
        self._skipped = skipped
        self._max = max_per_sample
        self.event_set: Any = None
        self.registered: set[str] = set()
        self.count: dict[str, int] = {}
        self.last: dict[str, int] = {}

    def create(self) -> None:
        try:
            self.event_set = self._nvml.nvmlEventSetCreate()
        except pynvml.NVMLError as exc:
            self._calls.errors.labels("xid_events", reason(exc)).inc()

    def close(self) -> None:
        if self.event_set is not None:
            with contextlib.suppress(pynvml.NVMLError):
                self._nvml.nvmlEventSetFree(self.event_set)
            self.event_set = None
        self.registered.clear()

    def register(self, index: int, h: Any, uuid: str) -> None:
        if self.event_set is None or not uuid or uuid in self.registered:
            return
        if (index, "xid_events") in self._calls.unsupported:
            return
        res = self._calls.call(
            index,
            "xid_events",
            self._nvml.nvmlDeviceRegisterEvents,
            h,
            pynvml.nvmlEventTypeXidCriticalError,
            self.event_set,
        )
        if res is not MISSING:
            self.registered.add(uuid)

    def drain(self) -> None:
        """Non-blocking: take the XID events queued since the last sample (bounded per sample)."""
        if self.event_set is None or not self.registered:
            return
        nv = self._nvml
        errors = self._calls.errors
        for _ in range(self._max):
            try:
                data = nv.nvmlEventSetWait(self.event_set, 0)
            except pynvml.NVMLError as exc:
                why = reason(exc)
                if why != "timeout":  # TIMEOUT is the normal "no more events"
                    errors.labels("xid_events", why).inc()
                    if why == "uninitialized":
                        raise Uninitialized() from exc
                return
            if not data.eventType & pynvml.nvmlEventTypeXidCriticalError:
                continue
            try:
                uuid = text(nv.nvmlDeviceGetUUID(data.device))
            except pynvml.NVMLError as exc:
                errors.labels("xid_events", reason(exc)).inc()
                continue
            self.count[uuid] = self.count.get(uuid, 0) + 1
            self.last[uuid] = int(data.eventData)
        else:
            self._skipped.labels("events").inc()
