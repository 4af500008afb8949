"""The diagnose check: probes Triton on an interval, evaluates the rules each round and reports every
diagnosis as a finding of kind ``diagnosis`` (so it alerts through the book with its what-to-do text), as
``sidecar_diagnosis_active``, in /readyz and on the ``/`` page."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

import httpx
from prometheus_client import CollectorRegistry, Counter, Gauge

from sidecar.clock import Clock
from sidecar.component import Readiness, Role
from sidecar.diagnose.config import DiagnoseConfig
from sidecar.diagnose.observe import Probe, probe_triton
from sidecar.diagnose.rules import CODES, Diagnosis, Inputs, diagnose
from sidecar.facts import DiagnosisFacts
from sidecar.model import Batch, Finding
from sidecar.polled import Polled, TickerFactory

__all__ = ["Diagnoser"]

_Key = tuple[str, str, str]  # (code, model, version)
# Model configs are asked for again every this many probes: an instance_group raised and reloaded must
# clear its diagnosis.
_CONFIG_REFRESH_PROBES = 10


class Diagnoser(Polled):
    name = "diagnose"
    role = Role.CHECK

    def __init__(
        self,
        config: DiagnoseConfig,
        *,
        metrics_url: str,
        http_url: str | None,
        spans_expected: bool,
        registry: CollectorRegistry,
        clock: Clock,
        http: httpx.AsyncClient,
        logger: logging.Logger | None = None,
        on_stats: Callable[[object], None] | None = None,
        on_gpu_memory: Callable[[Mapping[str, float]], None] | None = None,
        ticker: TickerFactory | None = None,
    ) -> None:
        super().__init__(
            interval_secs=config.interval_secs,
            registry=registry,
            logger=logger,
            ticker=ticker,
            ticker_name="diagnose-probe",
            job=self.probe_once,
        )
        self.config = config
        # Handed on each probe to GPU memory per model: Triton's /v2/models/stats answer (memory_usage) and
        # the memory used per GPU Triton reports (nv_gpu_memory_used_bytes, for load deltas).
        self._on_stats = on_stats
        self._on_gpu_memory = on_gpu_memory
        self._probe_count = 0
        self.metrics_url = metrics_url
        self.http_url = http_url
        self.spans_expected = spans_expected
        self.clock = clock
        self.http = http
        self.log = logger or logging.getLogger("sidecar.diagnose")
        self._started = clock.monotonic()
        self._last_span: float | None = None
        self._probes: tuple[Probe | None, Probe | None] = (None, None)
        self._current: list[Diagnosis] = []
        self._active: set[_Key] = set()
        self._gauge = Gauge(
            "sidecar_diagnosis_active",
            "1 while a diagnosis holds (what to do: /readyz, /, sidecar doctor).",
            ["diagnosis", "model", "version"],
            registry=registry,
        )
        self._probe_results = Counter(
            "sidecar_diagnose_probes", "Probes of Triton by the diagnoses, by result.", ["result"], registry=registry
        )
        self._refused = Counter(
            "sidecar_diagnose_models_refused",
            "Model/version pairs a probe left out above diagnose.max_models.",
            registry=registry,
        )
        self._stats = Counter(
            "sidecar_diagnose_stats_fetches",
            "Fetches of Triton's /v2/models/stats by result.",
            ["result"],
            registry=registry,
        )
        for code in CODES:
            self._gauge.labels(code, "", "")
        for result in ("ok", "timeout", "connect", "http_status", "content_type", "too_large", "parse"):
            self._probe_results.labels(result)

    def on_spans(self, batch: Batch) -> None:
        if batch.items:
            self._last_span = self.clock.monotonic()

    async def probe_once(self) -> Probe:
        prev, cur = self._probes
        self._probe_count += 1
        refresh = self._probe_count % _CONFIG_REFRESH_PROBES == 0
        known = cur.configs if cur is not None and not refresh else {}
        probe = await probe_triton(
            self.http,
            metrics_url=self.metrics_url,
            http_url=self.http_url,
            at=self.clock.monotonic(),
            timeout_s=self.config.timeout_secs,
            max_models=self.config.max_models,
            known=known,
        )
        self._probe_results.labels(probe.reason or "ok").inc()
        if probe.refused:
            self._refused.inc(probe.refused)
        # A failed probe keeps the last good one as "previous", so rates resume over the gap.
        self._probes = (cur if cur is not None and cur.ok else prev, probe)
        if self._on_gpu_memory is not None and probe.gpu_memory_used:
            self._on_gpu_memory(probe.gpu_memory_used)
        if self._on_stats is not None and self.http_url is not None and probe.ok:
            await self._fetch_stats(self.http_url, self._on_stats)
        return probe

    async def _fetch_stats(self, http_url: str, on_stats: Callable[[object], None]) -> None:
        try:
            resp = await self.http.get(f"{http_url.rstrip('/')}/v2/models/stats", timeout=self.config.timeout_secs)
            if resp.status_code != 200:
                self._stats.labels("http_status").inc()
                return
            body = resp.json()
        except (httpx.HTTPError, ValueError):
            self._stats.labels("failed").inc()
            return
        self._stats.labels("ok").inc()
        on_stats(body)

    def inputs(self) -> Inputs:
        prev, cur = self._probes
        silent = None
        if self.spans_expected:
            silent = self.clock.monotonic() - (self._last_span if self._last_span is not None else self._started)
        return Inputs(prev=prev, cur=cur, silent_secs=silent)

    def current(self) -> list[Diagnosis]:
        return list(self._current)

    def evaluate(self, now: float) -> Sequence[Finding]:
        found = diagnose(self.inputs(), self.config)
        self._current = found
        keys = {(d.code, d.model, d.version): d for d in found}
        findings = [self._finding(d, True, now) for d in found]
        for key in self._active - keys.keys():
            code, model, version = key
            findings.append(
                Finding(
                    check=self.name,
                    kind="diagnosis",
                    labels=_labels(code, model, version),
                    active=False,
                    value=0.0,
                    evaluated_at=now,
                    facts=DiagnosisFacts(diagnosis=code),
                )
            )
            if model:
                self._gauge.remove(code, model, version)
            else:
                self._gauge.labels(code, "", "").set(0)
        for code, model, version in keys:
            self._gauge.labels(code, model, version).set(1)
        self._active = set(keys)
        return findings

    def _finding(self, d: Diagnosis, active: bool, now: float) -> Finding:
        return Finding(
            check=self.name,
            kind="diagnosis",
            labels=_labels(d.code, d.model, d.version),
            active=active,
            value=1.0,
            evaluated_at=now,
            facts=DiagnosisFacts(diagnosis=d.code, problem=d.problem, action=d.action, extra=dict(d.facts)),
        )

    def readiness(self) -> Readiness:
        # A diagnosis explains a problem; it does not take the sidecar out of service, so readiness stays ok.
        if not self._current:
            return Readiness(True, "no problems found")
        return Readiness(True, f"{len(self._current)} found: " + " | ".join(d.line() for d in self._current))


def _labels(code: str, model: str, version: str) -> dict[str, str]:
    # One alert name for every diagnosis (one runbook, docs/runbooks/Diagnosis.md); the code tells them apart.
    labels = {"alertname": "Diagnosis", "diagnosis": code}
    if model:
        labels |= {"model": model, "version": version}
    return labels
