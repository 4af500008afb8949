"""GPU memory per model version, from three independent methods, each exported under its own ``method``:

- ``process``: NVML's per-process memory (rows joined to ``/proc/<pid>/cmdline`` by the NVML source, which
  therefore needs Triton's PID namespace) for Python-backend stubs. Each model instance of the Python
  backend is a separate ``triton_python_backend_stub`` process whose command line names the model file
  (``.../<model>/<version>/model.py``) and the instance (``<model>_<group>_<n>``), so its memory is the
  model's alone. Memory of the ``tritonserver`` process itself (every in-process backend) cannot be split
  this way.
- ``load_delta``: GPU memory used just after a version appeared in Triton's repository index minus just
  before (``changes`` batches from the repository index; readings from the NVML source's ``gpu_memory`` batches
  and from the diagnose probe's ``nv_gpu_memory_used_bytes``), for in-process backends (TensorRT, ONNX, PyTorch).
  The poller sees a version only once it is READY, up to one poll interval after its load began, and
  readings come more often than polls: the reading "before" is therefore the last one taken at least
  ``lookback_secs`` (the poll interval) before the change was seen, not merely the last one, which may
  already hold the new model. A delta is only taken when exactly one load or unload happened between the
  two readings; otherwise it is ambiguous and counted, not guessed. An unload removes the figure.
- ``triton_stats``: the ``memory_usage`` Triton reports in ``/v2/models/{m}/versions/{v}/stats`` (GPU
  entries), where the backend fills it in.

Everything is bounded by ``max_models`` model/version pairs per method (more refused and counted).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from sidecar.clock import Clock
from sidecar.model import Batch, Change, GpuMemoryReading
from sidecar.model import GpuProcess as ProcessRow

__all__ = ["GpuMemoryByModel", "ProcessRow", "StubIdentity", "parse_stub", "stats_gpu_bytes"]

Key = tuple[str, str]  # (model, version)
_STUB = "triton_python_backend_stub"
METHODS = ("process", "load_delta", "triton_stats")


@dataclass(frozen=True)
class StubIdentity:
    model: str
    version: str
    instance: str


def parse_stub(cmdline: Sequence[str]) -> StubIdentity | None:
    """The model version a Python-backend stub serves, from its argv; None for any other process."""
    if len(cmdline) < 2 or PurePosixPath(cmdline[0]).name != _STUB:
        return None
    parts = PurePosixPath(cmdline[1]).parts
    if len(parts) < 3 or not parts[-2].isdigit():
        return None
    instance = cmdline[8] if len(cmdline) > 8 else ""
    return StubIdentity(model=parts[-3], version=parts[-2], instance=instance)


def stats_gpu_bytes(body: object) -> dict[Key, float]:
    """GPU bytes per model version from a Triton statistics answer (``{"model_stats": [...]}``)."""
    out: dict[Key, float] = {}
    stats = body.get("model_stats") if isinstance(body, dict) else None
    for s in stats if isinstance(stats, list) else []:
        if not isinstance(s, dict) or not isinstance(s.get("memory_usage"), list):
            continue
        gpu = [m for m in s["memory_usage"] if isinstance(m, dict) and m.get("type") == "GPU"]
        if gpu:
            key = (str(s.get("name", "")), str(s.get("version", "")))
            out[key] = float(sum(float(m.get("byte_size", 0)) for m in gpu))
    return out


class _Collect(Collector):
    def __init__(self, owner: GpuMemoryByModel) -> None:
        self._owner = owner

    def collect(self) -> Iterator[Metric]:
        g = GaugeMetricFamily(
            "sidecar_model_gpu_memory_bytes",
            "GPU memory attributed to a model version; `method` says how the figure was obtained "
            "(process, load_delta, triton_stats).",
            labels=["model", "version", "method"],
        )
        for method, figures in self._owner.figures().items():
            for (model, version), value in sorted(figures.items()):
                g.add_metric([model, version, method], value)
        yield g

    def describe(self) -> list[Metric]:
        return []


class GpuMemoryByModel:
    """The attribution state; fed over the bus (NVML readings, repository changes) and by the diagnose probe
    (Triton's statistics and memory used); see docs/gpu.md."""

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        max_models: int = 500,
        clock: Clock | None = None,
        lookback_secs: float = 0.0,
        max_readings: int = 256,
    ) -> None:
        self.max_models = max_models
        self._clock = clock
        self._lookback = lookback_secs
        # (taken at, memory used per GPU), oldest first: where the reading before a load is looked up.
        self._history: deque[tuple[float, dict[str, float]]] = deque(maxlen=max_readings)
        self._recent: deque[float] = deque(maxlen=max_readings)  # when repository changes were seen
        # Changes arrive from whichever thread publishes them, readings from the event loop, scrapes from
        # the exposition thread.
        self._lock = threading.Lock()
        self._figures: dict[str, dict[Key, float]] = {m: {} for m in METHODS}
        # loads waiting for the reading after them: (version, when the reading before was taken, that reading)
        self._pending: list[tuple[Key, float, dict[str, float]]] = []
        self._refused = Counter(
            "sidecar_model_gpu_memory_refused",
            "Figures not kept: model/version pairs over the bound, or a load delta that was "
            "ambiguous (several loads between two readings).",
            ["reason"],
            registry=registry,
        )
        for r in ("max_models", "ambiguous_delta"):
            self._refused.labels(r)
        registry.register(_Collect(self))

    def figures(self) -> dict[str, dict[Key, float]]:
        with self._lock:
            return {m: dict(f) for m, f in self._figures.items()}

    def _set(self, method: str, figures: Mapping[Key, float]) -> None:
        kept = dict(sorted(figures.items())[: self.max_models])
        if len(figures) > len(kept):
            self._refused.labels("max_models").inc(len(figures) - len(kept))
        self._figures[method] = kept

    def observe_processes(self, rows: Iterable[ProcessRow]) -> None:
        """One NVML snapshot of compute processes (all GPUs): replaces the ``process`` figures."""
        per: dict[Key, float] = {}
        for row in rows:
            who = parse_stub(row.cmdline)
            if who is not None:
                key = (who.model, who.version)
                per[key] = per.get(key, 0.0) + row.used_bytes  # every instance of the version, every GPU
        with self._lock:
            self._set("process", per)

    def on_samples(self, batch: Batch) -> None:
        """The bus subscriber (kind ``gpu_memory``): the ``GpuMemoryReading`` of each NVML sample."""
        item: GpuMemoryReading
        for item in batch.items:
            if item.processes_complete:
                self.observe_processes(item.processes)
            if item.used:
                self.observe_memory(item.used, at=batch.received_at)

    def _now(self) -> float:
        return self._clock.now() if self._clock is not None else 0.0

    def observe_memory(self, used_by_gpu: Mapping[str, float], *, at: float | None = None) -> None:
        """One reading of memory used per GPU (taken ``at``, wall seconds; now when not given); settles the
        loads seen since the previous one."""
        with self._lock:
            self._settle(used_by_gpu, self._now() if at is None else at)

    def _settle(self, used_by_gpu: Mapping[str, float], at: float) -> None:
        if self._pending:
            # Another load or unload seen inside this load's window would be in the delta too.
            crowded = len(self._pending) > 1 or any(
                sum(1 for t in self._recent if since < t <= at) > 1 for _, since, _ in self._pending
            )
            if not crowded:
                key, _, before = self._pending[0]
                # Only GPUs in both readings: the two may come from different readers (NVML sees every GPU,
                # Triton only those it was given), and a GPU missing from one is not a GPU that emptied.
                delta = sum(used_by_gpu[g] - b for g, b in before.items() if g in used_by_gpu)
                figures = dict(self._figures["load_delta"])
                figures[key] = max(0.0, delta)
                self._set("load_delta", figures)
            else:
                self._refused.labels("ambiguous_delta").inc(len(self._pending))
            self._pending = []
        self._history.append((at, dict(used_by_gpu)))

    def on_changes(self, batch: Batch) -> None:
        """The bus subscriber: versions appearing or disappearing in Triton's repository index."""
        with self._lock:
            self._changes(batch)

    def _changes(self, batch: Batch) -> None:
        for c in batch.items:
            if not isinstance(c, Change) or c.source != "triton_repository" or not c.model or not c.version:
                continue
            key = (c.model, c.version)
            # "disappeared" ends in "appeared" too: test it first.
            if c.what.endswith(" disappeared in Triton"):
                self._recent.append(c.at)
                for figures in self._figures.values():
                    figures.pop(key, None)
            elif c.what.endswith(" appeared in Triton"):
                self._recent.append(c.at)
                before = self._before(c.at)
                if before is not None:
                    self._pending.append((key, *before))

    def _before(self, seen_at: float) -> tuple[float, dict[str, float]] | None:
        """The reading from before the load began: the last one at least ``lookback_secs`` before it was seen,
        else the oldest kept (just after start-up, the earliest state known)."""
        if not self._history:
            return None
        if not self._lookback:
            return self._history[-1]
        limit = seen_at - self._lookback
        for taken_at, used in reversed(self._history):
            if taken_at <= limit:
                return taken_at, used
        return self._history[0]

    def observe_stats(self, body: object) -> None:
        """One answer of Triton's ``GET /v2/models/stats``: replaces the ``triton_stats`` figures."""
        figures = stats_gpu_bytes(body)
        with self._lock:
            self._set("triton_stats", figures)
