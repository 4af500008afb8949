"""Findings that crossed their threshold, as audit events: one ``finding_crossed`` when a check's condition
becomes true for a series and one ``finding_cleared`` when it stops, never one per evaluation round.

Which series are true is held in memory (bounded: ``max_series``; a series beyond it is still recorded when
it crosses, but its clearing is not, counted in ``sidecar_audit_findings_untracked_total``). After a restart
a finding already true is recorded once more as crossed; its id carries the round's time, so it is a new
event rather than a silent duplicate.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from sidecar.component import Passive
from sidecar.model import Finding
from sidecar.naming import fingerprint

__all__ = ["FindingAudit"]


class FindingAudit(Passive):
    name = "finding_audit"
    role = "sink"

    def __init__(
        self,
        record: Callable[[Sequence[tuple[str, str, float, Mapping[str, Any]]]], object],
        *,
        registry: CollectorRegistry,
        max_series: int = 10_000,
    ) -> None:
        self.record = record
        self.max_series = max_series
        self._true: set[str] = set()
        self._untracked = Counter(
            "sidecar_audit_findings_untracked",
            "Crossed findings whose clearing is not tracked (over max_series).",
            registry=registry,
        )

    def on_findings(self, findings: Sequence[Finding], now: float) -> None:
        out: list[tuple[str, str, float, Mapping[str, Any]]] = []
        for f in findings:
            if f.insufficient_data:
                continue
            key = f"{f.check}-{fingerprint(f.labels)}"
            if f.active == (key in self._true):
                continue
            what = "finding_crossed" if f.active else "finding_cleared"
            if f.active:
                if len(self._true) < self.max_series:
                    self._true.add(key)
                else:
                    self._untracked.inc()
            else:
                self._true.discard(key)
            out.append(
                (
                    what,
                    f"{what}-{key}-{int(now * 1000)}",
                    now,
                    {
                        "check": f.check,
                        "labels": dict(f.labels),
                        "model": f.labels.get("model"),
                        "version": f.labels.get("version"),
                        "value": f.value,
                        "threshold": f.threshold,
                        "baseline": f.baseline,
                        "p_value": f.p_value,
                        "severity": f.severity,
                        "summary": f.summary,
                        "trace_id": f.trace_id,
                    },
                )
            )
        if out:
            self.record(out)
