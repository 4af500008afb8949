"""Turns each published Triton scrape into per model/version SLIs (the ``scrapes`` subscriber).

The Triton source only scrapes and publishes a ``SeriesSnapshot`` per good scrape (and an empty complete batch
when a scrape fails); this processor groups it by model/version, feeds the deriver, joins ``nv_gpu_*`` series
to the GPU sources' identities (the ``gpus`` subscriber) and exports the derived families at scrape time.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from sidecar.clock import Clock
from sidecar.component import Passive, Role
from sidecar.model import Batch, SeriesSnapshot
from sidecar.probe_marker import ProbeLedger
from sidecar.processors.derive import Deriver
from sidecar.processors.probe_share import ProbeShare
from sidecar.processors.triton_snapshot import snapshot_models

__all__ = ["TritonSeries"]


class _DerivedCollector(Collector):
    def __init__(self, owner: TritonSeries) -> None:
        self._owner = owner

    def collect(self) -> Iterator[Metric]:
        self._owner.expire_stale()
        return self._owner.deriver.collect(self._owner.gpu_labels())

    def describe(self) -> list[Metric]:
        # Series come and go with models; describing nothing keeps registration from calling collect().
        return []


class TritonSeries(Passive):
    name = "triton_series"
    role = Role.PROCESSOR

    def __init__(
        self,
        *,
        registry: CollectorRegistry,
        clock: Clock,
        ratio_window_secs: float,
        max_models: int,
        stale_after_secs: float,
        source: str,
        logger: logging.Logger | None = None,
        probe_ledger: ProbeLedger | None = None,
    ) -> None:
        self.clock = clock
        self.source = source
        self.max_models = max_models
        self.stale_after_secs = stale_after_secs
        self.log = logger or logging.getLogger("sidecar.triton_series")
        # With the model probe on, its requests are taken out of the SLIs (processors/probe_share.py).
        self.probes = ProbeShare(probe_ledger) if probe_ledger is not None else None
        self.deriver = Deriver(ratio_window_s=ratio_window_secs, max_models=max_models, probes=self.probes)
        self._gpu_labels: dict[str, dict[str, str]] = {}
        self._last_ok_mono: float | None = None
        self._models_refused = Counter(
            "sidecar_triton_models_refused",
            "Model/version pairs refused per scrape above triton.max_models.",
            registry=registry,
        )
        self._resets = Counter(
            "sidecar_triton_series_resets",
            "Counter series seen to reset (about 8 per version for one Triton restart); "
            "sidecar_triton_model_resets_total counts the events per version.",
            registry=registry,
        )
        self._probe_unmatched = Counter(
            "sidecar_triton_probe_unmatched",
            "Probe requests that could not be taken out of Triton's counters (a version Triton does not report, a "
            "failure Triton did not count, a restart in the interval): they may remain in the SLIs.",
            registry=registry,
        )
        self._models = Gauge("sidecar_triton_models", "Model/version pairs in the last good scrape.", registry=registry)
        registry.register(_DerivedCollector(self))

    # -- bus subscribers --------------------------------------------------------------------------------------
    def on_samples(self, batch: Batch) -> None:
        if batch.source != self.source:
            return  # another target's scrapes
        if not batch.items:
            if batch.complete:  # the scrape failed: nothing is known now
                self.deriver.mark_stale()
            return
        snap: SeriesSnapshot = batch.items[-1]  # a "scrapes" batch carries SeriesSnapshot only (Bus.publish)
        models, passthrough, refused = snapshot_models(snap, self.max_models)
        if refused:
            self._models_refused.inc(refused)
        before = self.deriver.resets
        unmatched = self.probes.unmatched if self.probes is not None else 0.0
        self.deriver.update(models, passthrough, snap.taken_at)
        if self.probes is not None and self.probes.unmatched > unmatched:
            self._probe_unmatched.inc(self.probes.unmatched - unmatched)
        if self.deriver.resets > before:
            self._resets.inc(self.deriver.resets - before)
        self._models.set(len(models))
        self._last_ok_mono = snap.taken_at

    def on_gpus(self, batch: Batch) -> None:
        """Each batch is the GPU state's whole current view (``complete``)."""
        self._gpu_labels = {g.uuid: {"index": g.index, "name": g.name, "source": g.source} for g in batch.items}

    def gpu_labels(self) -> dict[str, dict[str, str]]:
        return self._gpu_labels

    def expire_stale(self) -> None:
        """Withdraw interval values when no good scrape arrived for ``stale_after_secs`` (a stuck scrape loop or
        a scrape that never returns must not leave old numbers looking fresh)."""
        if (
            self.deriver.fresh
            and self._last_ok_mono is not None
            and self.clock.monotonic() - self._last_ok_mono > self.stale_after_secs
        ):
            self.deriver.mark_stale()
