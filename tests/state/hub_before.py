"""The trace hub's ingest as it was at ae3dd55 (traces_before.py, stages_before.py): every span stored and every
stage observed one by one, built from a ``traces`` config as ``TraceHub`` builds its own. The yardstick of
test_trace_hub_differential.py and bench/bench_trace_files.py."""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import CollectorRegistry
from stages_before import StageHistograms as StagesBefore
from traces_before import TraceStore as StoreBefore

from sidecar.records import Record
from sidecar.state.trace_config import TracesConfig


class HubBefore:
    def __init__(self, cfg: TracesConfig, registry: CollectorRegistry) -> None:
        self.store = StoreBefore(
            registry,
            max_traces=cfg.max_traces,
            max_age_secs=cfg.max_age_secs,
            max_spans_per_trace=cfg.max_spans_per_trace,
            slow_threshold_ns=int(cfg.slow_threshold_ms * 1e6),
            max_bytes=cfg.store.max_bytes,
            max_trace_bytes=cfg.store.max_trace_bytes,
        )
        self.stages = StagesBefore(registry, buckets=cfg.stage_buckets_secs, max_model_versions=cfg.max_model_versions)

    def ingest(self, records: Sequence[Record], now: float) -> None:
        with self.stages.observing(now):
            self.store.add(records, now, self.stages.on_stored)
