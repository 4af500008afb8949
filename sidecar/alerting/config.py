"""Config of alerting: the alert book, annotation templates, changes, Alertmanager delivery, audit events."""

from __future__ import annotations

from pydantic import Field, field_validator

from exporters.config import AlertmanagerConfig, ElasticsearchConfig, RetryConfig
from sidecar.alerting.audit_retention_config import AuditRetentionConfig
from sidecar.alerting.templates import TemplateError, validate_template
from sidecar.configbase import StrictModel
from sidecar.processors.request_records_config import RequestRecordsConfig
from sidecar.state.changes_config import ChangesConfig

__all__ = [
    "AlertingConfig",
    "AlertmanagerConfig",
    "AuditConfig",
    "ChangesConfig",
    "ElasticsearchConfig",
    "RetryConfig",
    "TemplatesConfig",
]


_SUMMARY = "[{SEVERITY}] {finding_summary} | model {model_version} | recent change: {recent_change}"
# finding_description always ends with a full stop, so the sentences never run together.
_DESCRIPTION = "{finding_description} Recent changes: {recent_changes}."


class TemplatesConfig(StrictModel):
    """Annotation templates around the sidecar's own text of a finding (`{finding_summary}` and so on)."""

    summary: str = Field(
        default=_SUMMARY,
        description="One-line summary of a business finding compared with a baseline.",
    )
    summary_absolute: str = Field(
        default=_SUMMARY,
        description="One-line summary of a business finding compared with a fixed threshold.",
    )
    summary_other: str = Field(
        default=_SUMMARY,
        description="One-line summary of findings of other kinds (drift, slo).",
    )
    description: str = Field(
        default=_DESCRIPTION,
        description="Longer description of a business finding compared with a baseline.",
    )
    description_absolute: str = Field(
        default=_DESCRIPTION,
        description="Longer description of a business finding compared with a fixed threshold.",
    )
    description_other: str = Field(
        default=_DESCRIPTION,
        description="Longer description of findings of other kinds.",
    )
    runbook_url: str = Field(default="{runbook_base}/{runbook}", description="Runbook link.")
    dashboard_url: str = Field(
        default="{dashboard_base}/d/triton-sidecar-business?var-model={model}&var-check={check}",
        description="Dashboard link; left out when no dashboard_url is configured.",
    )
    trace_url: str = Field(
        default="{sidecar_url}/traces/{trace_id}",
        description="Trace link; left out when the finding has no trace.",
    )

    @field_validator("*")
    @classmethod
    def _valid(cls, v: str) -> str:
        try:
            return validate_template(v)
        except TemplateError as exc:
            raise ValueError(str(exc)) from None


class AuditConfig(StrictModel):
    enabled: bool = Field(
        default=True,
        description="Record alerts (fired, re-sent, resolved, delivery outcomes) and changes as audit events.",
    )
    retention_days: float = Field(
        default=30.0, gt=0, description="Audit events older than this are deleted from SQLite (counted)."
    )
    retention: AuditRetentionConfig = Field(
        default_factory=AuditRetentionConfig,
        description="Rows and bytes kept in SQLite per class of audit event (requests, alerts, changes, findings, "
        "actions); a class over its budget loses its own oldest rows, never another class's (docs/audit.md).",
    )
    resent_every_secs: float = Field(
        default=3600.0,
        gt=0,
        description="A firing alert re-sent to Alertmanager is recorded (alert_resent) once per window of this "
        "length, counted from when it became active: the first re-send in each window (docs/audit.md).",
    )
    elasticsearch: ElasticsearchConfig | None = Field(
        default=None, description="Also ship audit events to Elasticsearch."
    )
    requests: RequestRecordsConfig = Field(
        default_factory=RequestRecordsConfig, description="Per-request records (see RequestRecordsConfig)."
    )


class AlertingConfig(StrictModel):
    enabled: bool = Field(default=False, description="Run the alert book, the change log and alert delivery.")
    resend_delay_secs: float = Field(default=60.0, gt=0, description="A firing alert is re-sent at most this often.")
    resolved_retention_secs: float = Field(
        default=900.0, ge=0, description="A resolved alert is re-sent to Alertmanager for this long."
    )
    keep_resolved_secs: float = Field(
        default=86400.0,
        ge=0,
        description="A resolved alert stays in the book (GET /v1/alerts, the /alerts page: resolved, with when) "
        "for this long after it resolved; never less than resolved_retention_secs, the time it is re-sent.",
    )
    max_resolved_alerts: int = Field(
        default=500,
        gt=0,
        description="Resolved alerts kept at once; above it the longest-resolved go first (counted in "
        "sidecar_alerts_resolved_evicted_total).",
    )
    max_active_alerts: int = Field(
        default=1_000, gt=0, description="Alerts held at once; new ones above it are refused."
    )
    for_secs: dict[str, float] = Field(
        default_factory=dict, description="Hold durations by check name, overriding what the check declares."
    )
    default_for_secs: float = Field(default=0.0, ge=0, description="Hold duration for checks that declare none.")
    templates: TemplatesConfig = Field(default_factory=TemplatesConfig, description="See TemplatesConfig.")
    changes: ChangesConfig = Field(default_factory=ChangesConfig, description="See ChangesConfig.")
    alertmanager: AlertmanagerConfig = Field(default_factory=AlertmanagerConfig, description="See AlertmanagerConfig.")
    audit: AuditConfig = Field(default_factory=AuditConfig, description="See AuditConfig.")
