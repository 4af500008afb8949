"""Config of the audit trail's retention per class (``alerting.audit.retention``): each class of rows has its
own budget in the embedded store, so a flood of one (request records) never evicts another (alert or change
history). The classes and what evicts what: ``exporters/audit_retention.py`` and docs/audit.md."""

from __future__ import annotations

from pydantic import Field

from sidecar.configbase import StrictModel

__all__ = ["AuditBudgetConfig", "AuditRetentionConfig", "RequestsBudgetConfig"]

_MIB = 1024 * 1024


class AuditBudgetConfig(StrictModel):
    """The rows and bytes one class of audit rows may hold in SQLite; over either, its oldest rows go (counted
    in ``sidecar_audit_events_evicted_total{why,kind}``)."""

    max_rows: int = Field(default=20_000, gt=0, le=100_000_000, description="Rows of this class kept.")
    max_bytes: int = Field(
        default=32 * _MIB, gt=0, description="Size cap of this class's event bodies (JSON bytes) in SQLite."
    )


class RequestsBudgetConfig(AuditBudgetConfig):
    """The budget of per-request records: larger, as they are the many."""

    max_rows: int = Field(default=100_000, gt=0, le=100_000_000, description="Request records kept.")
    max_bytes: int = Field(
        default=128 * _MIB, gt=0, description="Size cap of the request records' bodies (JSON bytes) in SQLite."
    )


class AuditRetentionConfig(StrictModel):
    """One budget per class of audit rows; no class makes room in another."""

    requests: RequestsBudgetConfig = Field(
        default_factory=RequestsBudgetConfig,
        description="Per-request records (kind `request`): the many, cheapest to lose.",
    )
    alerts: AuditBudgetConfig = Field(
        default_factory=AuditBudgetConfig,
        description="Alert history (kinds `alert_*`: fired, re-sent, resolved, delivery outcomes).",
    )
    changes: AuditBudgetConfig = Field(
        default_factory=AuditBudgetConfig,
        description="Change history (kind `change`); keep at least `alerting.changes.max_changes` rows so every "
        "change in the change log keeps its audit row.",
    )
    findings: AuditBudgetConfig = Field(
        default_factory=AuditBudgetConfig,
        description="Findings crossing and clearing (kinds `finding_*`).",
    )
    actions: AuditBudgetConfig = Field(
        default_factory=AuditBudgetConfig,
        description="Actions taken (kinds `action_*`) and any other kind.",
    )
