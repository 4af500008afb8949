"""Findings that crossed their threshold, as audit events: one ``finding_crossed`` when a check's condition
becomes true for a series and one ``finding_cleared`` when it stops, never one per evaluation round, and
never again after a restart while the condition holds.

Which series are true is kept in the embedded store (table ``audit_findings_true``), written in the same
transaction as the audit rows, so a restarted sidecar knows what it already recorded: a condition that held
across the restart adds no row, one that cleared meanwhile adds ``finding_cleared`` on the first round that
sees it clear. A series true for longer than ``retention_days`` is forgotten at the next start (its
``finding_crossed`` row is gone by then too), so one the checks stopped reporting does not hold its slot for
good, and a condition still true then is recorded crossed once more. Bounded by ``max_series``: a series
beyond it is still recorded when it crosses, but neither its clearing nor its state across a restart is,
counted in ``sidecar_audit_findings_untracked_total``. A failed write is counted
(``sidecar_audit_errors_total{reason}``, by the audit log) and nothing of the round is kept, so the next round
records the transitions again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from exporters.audit import AuditLog
from sidecar.component import Passive, Role
from sidecar.model import Finding
from sidecar.naming import fingerprint

__all__ = ["FindingAudit"]

_TABLE = "audit_findings_true"


class FindingAudit(Passive):
    name = "finding_audit"
    role = Role.SINK

    def __init__(
        self,
        audit: AuditLog,
        *,
        registry: CollectorRegistry,
        max_series: int = 10_000,
        logger: logging.Logger | None = None,
    ) -> None:
        self.audit = audit
        self.store = audit.store
        self.max_series = max_series
        self.log = logger or logging.getLogger("sidecar.audit")
        self._untracked = Counter(
            "sidecar_audit_findings_untracked",
            "Crossed findings whose clearing is not tracked (over max_series).",
            registry=registry,
        )
        self.store.execute(f"CREATE TABLE IF NOT EXISTS {_TABLE} (key TEXT PRIMARY KEY, since REAL)")
        # A series true for longer than the audit keeps rows has lost its finding_crossed row to retention
        # anyway; forgetting it frees its slot (a series a check no longer reports would hold one for good).
        self.store.execute(f"DELETE FROM {_TABLE} WHERE since < ?", (audit.clock.now() - audit.retention_secs,))
        rows = self.store.query(f"SELECT key FROM {_TABLE} ORDER BY since LIMIT ?", (max_series,))
        self._true: set[str] = {str(r[0]) for r in rows}

    def on_findings(self, findings: Sequence[Finding], now: float) -> None:
        out: list[tuple[str, str, float, Mapping[str, Any]]] = []
        true = set(self._true)
        crossed: list[str] = []
        cleared: list[str] = []
        for f in findings:
            if f.insufficient_data:
                continue
            key = f"{f.check}-{fingerprint(f.labels)}"
            if f.active == (key in true):
                continue
            what = "finding_crossed" if f.active else "finding_cleared"
            if f.active:
                if len(true) < self.max_series:
                    true.add(key)
                    crossed.append(key)
                else:
                    self._untracked.inc()
            else:
                true.discard(key)
                cleared.append(key)
            out.append((what, f"{what}-{key}-{int(now * 1000)}", now, _body(f)))
        if not out:
            return
        try:
            with self.store.transaction():
                docs = [(eid, self.audit.write(kind, eid, at, body)) for kind, eid, at, body in out]
                for key in crossed:
                    self.store.execute(f"INSERT OR REPLACE INTO {_TABLE} (key, since) VALUES (?, ?)", (key, now))
                for key in cleared:
                    self.store.execute(f"DELETE FROM {_TABLE} WHERE key = ?", (key,))
        except Exception as exc:
            self.audit.failed(len(out), exc)
            return
        self._true = true
        for eid, doc in docs:
            if doc is not None:
                self.audit.committed(eid, doc)


def _body(f: Finding) -> dict[str, Any]:
    return {
        "check": f.check,
        "finding_kind": f.kind,  # for the pages: which form the finding's figures take (render.kinds.figure)
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
    }
