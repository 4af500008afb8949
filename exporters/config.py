"""Config of the exporters that ship alerts and audit events out (Alertmanager, Elasticsearch) and of their
retries. It sits here, next to the exporters, and depends on nothing but pydantic; the YAML tree still nests
these sections under ``alerting`` (``sidecar.alerting.config`` imports them), so the keys users write are
unchanged."""

from __future__ import annotations

from pydantic import Field, SecretStr, field_validator

from sidecar.configbase import StrictModel

__all__ = ["AlertmanagerConfig", "ElasticsearchConfig", "RetryConfig"]


class RetryConfig(StrictModel):
    initial_backoff_secs: float = Field(default=0.5, gt=0, description="First delay after a failed delivery.")
    max_backoff_secs: float = Field(default=30.0, gt=0, description="Longest delay between two tries.")
    multiplier: float = Field(default=2.0, ge=1, description="Backoff growth per failed try.")
    jitter: float = Field(
        default=1.0,
        ge=0,
        le=1,
        description="Share of each delay drawn at random below it: 1 is full jitter (uniform between 0 and "
        "the backoff), 0 none. Spreads the retries of many sidecars out.",
    )
    max_elapsed_secs: float = Field(
        default=300.0,
        gt=0,
        description="Give up on a batch after this long, counted as dropped{reason=gave_up} (in-memory "
        "queues only; the Alertmanager outbox keeps a notice until it is delivered or replaced).",
    )
    max_attempts: int | None = Field(
        default=None,
        gt=0,
        description="Give up on a batch after this many failed tries (unset: only max_elapsed_secs "
        "bounds it). In-memory queues only, as max_elapsed_secs.",
    )


class AlertmanagerConfig(StrictModel):
    urls: list[str] = Field(
        default_factory=list,
        description="Every Alertmanager of the cluster (base URLs); each gets every notice.",
    )
    timeout_secs: float = Field(default=10.0, gt=0, description="Timeout of one POST /api/v2/alerts.")
    max_outbox: int = Field(
        default=10_000,
        gt=0,
        description="Notices held in the persisted outbox per Alertmanager; more are refused (counted).",
    )
    max_batch: int = Field(default=500, gt=0, description="Alerts per POST.")
    flush_interval_secs: float = Field(
        default=1.0, gt=0, description="How often the outbox is drained when idle."
    )
    retry: RetryConfig = Field(default_factory=RetryConfig, description="See RetryConfig.")

    @field_validator("urls")
    @classmethod
    def _urls(cls, v: list[str]) -> list[str]:
        for u in v:
            if not u.startswith(("http://", "https://")):
                raise ValueError(f"{u!r} is not an http(s) URL")
        if len(set(v)) != len(v):
            raise ValueError("the same Alertmanager is listed twice")
        return [u.rstrip("/") for u in v]


class ElasticsearchConfig(StrictModel):
    url: str = Field(description="Elasticsearch base URL.")
    index: str = Field(default="sidecar-audit", description="Index audit events are written to.")
    api_key: SecretStr | None = Field(default=None, description="API key (Authorization: ApiKey ...).")
    max_queue: int = Field(
        default=10_000, gt=0, description="Audit events queued for Elasticsearch; more are dropped."
    )
    max_batch: int = Field(default=500, gt=0, description="Documents per bulk request.")
    timeout_secs: float = Field(default=10.0, gt=0, description="Timeout of one bulk request.")
    retry: RetryConfig = Field(default_factory=RetryConfig, description="See RetryConfig.")
