"""The GPU hub: keeps each source's latest samples and exports them through one custom Prometheus collector.

Sources (NVML, dcgm-exporter) hand in a whole snapshot at a time, so a field that disappears from a source
disappears from the exposition at once. A source whose snapshot is older than ``stale_after_secs`` exports
nothing: an old reading is never shown as current, and nothing is ever filled in with zeros.

After each snapshot it publishes the merged GPU identities on the bus (kind ``gpus``): they let the Triton
source join Triton's ``nv_gpu_*`` series (label ``gpu_uuid``) to the sidecar's GPU index and name.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import Metric

from sidecar.clock import Clock
from sidecar.component import Bus, Passive, Readiness, Role
from sidecar.model import Batch, GpuMemoryReading, GpuSnapshot
from sidecar.model import GpuIdentity as ModelGpu
from sidecar.processors.gpu_series import SERIES, GpuSample

__all__ = ["GpuHub", "GpuIdentity"]

_VISIBLE = "sidecar_gpu_visible_devices"
_VISIBLE_HELP = "GPUs the source sees now (0: none visible; absent: the source is off or its data is stale)."


@dataclass(frozen=True, slots=True)
class GpuIdentity:
    index: str
    name: str


@dataclass
class _SourceState:
    at: float = 0.0
    sampled: bool = False
    samples: tuple[GpuSample, ...] = ()
    gpus: Mapping[str, GpuIdentity] = field(default_factory=dict)
    visible: int = 0
    detail: str = "not sampled yet"


class GpuHub(Passive):
    """Latest GPU samples per source, exported through a collector on the sidecar's registry."""

    name = "gpu"
    role = Role.SOURCE

    def __init__(
        self,
        *,
        registry: CollectorRegistry,
        clock: Clock,
        max_series: int,
        stale_after_secs: float,
        logger: logging.Logger | None = None,
        bus: Bus | None = None,
    ) -> None:
        self._bus = bus
        self._clock = clock
        self._max_series = max_series
        self._stale_after = stale_after_secs
        self._log = logger or logging.getLogger("sidecar.gpu")
        self._lock = threading.Lock()
        self._sources: dict[str, _SourceState] = {}
        self._dropped = Counter(
            "sidecar_gpu_series_dropped",
            "GPU samples not exported, by source and reason (max_series, duplicate).",
            ["source", "reason"],
            registry=registry,
        )
        self._snapshots = Counter(
            "sidecar_gpu_snapshots",
            "Snapshots (one sample of every GPU) a GPU source handed in.",
            ["source"],
            registry=registry,
        )
        registry.register(self)

    # -- the component contract ------------------------------------------------------------------------------
    def readiness(self) -> Readiness:
        """Always ok: a CPU-only deployment is valid; the detail says what is (not) visible."""
        now = self._clock.now()
        with self._lock:
            parts = []
            for src, st in sorted(self._sources.items()):
                if st.sampled and now - st.at > self._stale_after:
                    parts.append(f"{src}: no fresh sample for {now - st.at:.0f}s ({st.detail})")
                elif st.sampled and st.visible == 0:
                    parts.append(f"{src}: no GPU visible ({st.detail})")
                elif st.sampled:
                    parts.append(f"{src}: {st.visible} GPU(s) visible" + (f" ({st.detail})" if st.detail else ""))
                else:
                    parts.append(f"{src}: {st.detail}")
        return Readiness(ok=True, detail="; ".join(parts) if parts else "no GPU source enabled")

    # -- the bus subscriber (kind "gpu_snapshots" from the GPU sources) --------------------------------------
    def on_samples(self, batch: Batch) -> None:
        snap: GpuSnapshot
        for snap in batch.items:
            if snap.sampled:
                self.publish(batch.source, snap.samples, snap.gpus, visible=snap.visible, detail=snap.detail)
            else:
                self.note(batch.source, snap.detail)

    # -- what sources call (directly in unit tests; over the bus in the service) -----------------------------
    def register_source(self, source: str) -> None:
        with self._lock:
            self._sources.setdefault(source, _SourceState())

    def publish(
        self,
        source: str,
        samples: Iterable[GpuSample],
        gpus: Mapping[str, GpuIdentity],
        *,
        visible: int,
        detail: str = "",
        reading: GpuMemoryReading | None = None,
    ) -> int:
        """Replace ``source``'s snapshot; returns how many samples were kept (the rest: counted, dropped).

        ``reading`` is not kept here: the per-model GPU memory takes it from the bus."""
        kept: list[GpuSample] = []
        seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
        over = dup = 0
        for s in samples:
            key = (s.name, s.labels)
            if key in seen:
                dup += 1
                continue
            if len(kept) >= self._max_series:
                over += 1
                continue
            seen.add(key)
            kept.append(s)
        if over:
            self._dropped.labels(source, "max_series").inc(over)
        if dup:
            self._dropped.labels(source, "duplicate").inc(dup)
        self._snapshots.labels(source).inc()
        with self._lock:
            self._sources[source] = _SourceState(
                at=self._clock.now(),
                sampled=True,
                samples=tuple(kept),
                gpus=dict(gpus),
                visible=visible,
                detail=detail,
            )
        if self._bus is not None:
            items = tuple(ModelGpu(uuid, g["index"], g["name"], g["source"]) for uuid, g in self.gpu_by_uuid().items())
            self._bus.publish(
                Batch(kind="gpus", source=self.name, items=items, received_at=self._clock.now(), complete=True)
            )
        return len(kept)

    def note(self, source: str, detail: str) -> None:
        """Update what readiness says about ``source`` without refreshing its data (e.g. a failed scrape)."""
        with self._lock:
            st = self._sources.setdefault(source, _SourceState())
            st.detail = detail

    # -- what readers call -----------------------------------------------------------------------------------
    def _fresh(self) -> list[tuple[str, _SourceState]]:
        now = self._clock.now()
        with self._lock:
            return [
                (src, st)
                for src, st in sorted(self._sources.items())
                if st.sampled and now - st.at <= self._stale_after
            ]

    def gpu_by_uuid(self) -> dict[str, dict[str, str]]:
        """``{uuid: {"index": "0", "name": "NVIDIA H100 80GB HBM3", "source": "nvml"}}`` from fresh sources;
        NVML wins where both sources know a GPU (it is local and needs no scrape)."""
        out: dict[str, dict[str, str]] = {}
        fresh = self._fresh()
        fresh.sort(key=lambda item: item[0] != "nvml")
        for src, st in fresh:
            for uuid, ident in st.gpus.items():
                out.setdefault(uuid, {"index": ident.index, "name": ident.name, "source": src})
        return out

    # -- the prometheus_client custom-collector protocol ---------------------------------------------------
    def describe(self) -> Iterator[Metric]:
        yield Metric(_VISIBLE, _VISIBLE_HELP, "gauge")
        for name, spec in SERIES.items():
            yield Metric(name, spec.help, spec.kind)

    def collect(self) -> Iterator[Metric]:
        fresh = self._fresh()
        visible = Metric(_VISIBLE, _VISIBLE_HELP, "gauge")
        families: dict[str, Metric] = {}
        for src, st in fresh:
            visible.add_sample(_VISIBLE, {"source": src}, float(st.visible))
            for s in st.samples:
                spec = SERIES.get(s.name)
                if spec is None:
                    continue
                fam = families.get(s.name)
                if fam is None:
                    fam = families[s.name] = Metric(s.name, spec.help, spec.kind)
                labels = dict(s.labels)
                labels["source"] = src
                fam.add_sample(s.name + ("_total" if spec.kind == "counter" else ""), labels, s.value)
        if visible.samples:
            yield visible
        yield from families.values()
