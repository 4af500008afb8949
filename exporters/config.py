"""Config of the exporters that ship alerts and audit events out (Alertmanager, Elasticsearch) and of their
retries. It sits here, next to the exporters, and depends on nothing but pydantic; the YAML tree still nests
these sections under ``alerting`` (``sidecar.alerting.config`` imports them), so the keys users write are
unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urlsplit, urlunsplit

from pydantic import Field, SecretStr, field_validator, model_validator

from sidecar.configbase import StrictModel, Token

__all__ = [
    "AlertmanagerConfig",
    "BasicAuthConfig",
    "ElasticsearchConfig",
    "ForwardConfig",
    "HttpAuthConfig",
    "RetryConfig",
    "TlsConfig",
]


class BasicAuthConfig(StrictModel):
    username: str = Field(min_length=1, description="User name of HTTP basic auth.")
    password: SecretStr = Field(
        description="Password of HTTP basic auth; write ${env:NAME} to read it from the environment."
    )


class TlsConfig(StrictModel):
    ca_file: Path | None = Field(
        default=None, description="PEM file of the CA(s) that sign the server's certificate (default: system CAs)."
    )
    cert_file: Path | None = Field(default=None, description="PEM client certificate, for mutual TLS.")
    key_file: Path | None = Field(
        default=None, description="PEM private key of cert_file (omit when cert_file holds both)."
    )

    @field_validator("ca_file", "cert_file", "key_file")
    @classmethod
    def _exists(cls, v: Path | None) -> Path | None:
        if v is not None and not v.is_file():
            raise ValueError(f"{str(v)!r} is not a readable file")
        return v

    @model_validator(mode="after")
    def _pair(self) -> TlsConfig:
        if self.key_file is not None and self.cert_file is None:
            raise ValueError("key_file needs cert_file")
        return self


def split_credentials(url: str) -> tuple[str, BasicAuthConfig | None]:
    """``url`` without ``user:password@``, and those credentials (percent-decoded) when it had them."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None
    host = parts.netloc.rpartition("@")[2]
    clean = urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
    auth = BasicAuthConfig(username=unquote(parts.username or ""), password=SecretStr(unquote(parts.password or "")))
    return clean, auth


class HttpAuthConfig(StrictModel):
    """Credentials and TLS of an HTTP backend. A ``user:password@`` in a URL is moved into ``basic_auth`` when
    the config is loaded, so the URL that is logged, labelled and printed never carries it."""

    basic_auth: BasicAuthConfig | None = Field(default=None, description="HTTP basic auth (username, password).")
    bearer_token: Token | None = Field(
        default=None,
        description="Sent as Authorization: Bearer <token>; write ${env:NAME} to read it from the environment.",
    )
    tls: TlsConfig | None = Field(default=None, description="TLS CA and client certificate (see TlsConfig).")

    @staticmethod
    def _move_credentials(data: Any, key: str, many: bool) -> Any:
        if not isinstance(data, dict):
            return data
        raw = data.get(key)
        urls = raw if many else [raw]
        if not isinstance(urls, list) or not all(isinstance(u, str) for u in urls):
            return data  # the field validator names the problem
        clean, found = [], []
        for u in urls:
            c, auth = split_credentials(u)
            clean.append(c)
            if auth is not None:
                found.append(auth)
        if not found:
            return data
        given = data.get("basic_auth")
        first = found[0]
        for auth in found[1:]:
            if auth != first:
                raise ValueError(f"{key}: the URLs carry different credentials; set basic_auth instead")
        if given is not None:
            given_auth = BasicAuthConfig.model_validate(given) if isinstance(given, dict) else given
            if given_auth != first:
                raise ValueError(f"{key}: a URL carries credentials that differ from basic_auth")
        return {**data, key: clean if many else clean[0], "basic_auth": first}

    @model_validator(mode="after")
    def _one_scheme(self) -> HttpAuthConfig:
        if self.basic_auth is not None and self.bearer_token is not None:
            raise ValueError("basic_auth and bearer_token exclude each other")
        return self


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


class AlertmanagerConfig(HttpAuthConfig):
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
    flush_interval_secs: float = Field(default=1.0, gt=0, description="How often the outbox is drained when idle.")
    retry: RetryConfig = Field(default_factory=RetryConfig, description="See RetryConfig.")

    @model_validator(mode="before")
    @classmethod
    def _credentials_out_of_urls(cls, data: Any) -> Any:
        return cls._move_credentials(data, "urls", many=True)

    @field_validator("urls")
    @classmethod
    def _urls(cls, v: list[str]) -> list[str]:
        for u in v:
            if not u.startswith(("http://", "https://")):
                raise ValueError(f"{u!r} is not an http(s) URL")
        if len(set(v)) != len(v):
            raise ValueError("the same Alertmanager is listed twice")
        return [u.rstrip("/") for u in v]


class ElasticsearchConfig(HttpAuthConfig):
    url: str = Field(description="Elasticsearch base URL (a node of the cluster).")
    urls: list[str] = Field(
        default_factory=list, description="More nodes of the same cluster; the client spreads requests over all."
    )
    index: str = Field(
        default="sidecar-audit",
        pattern=r"^[a-z0-9][a-z0-9_.-]{0,200}$",
        description="Prefix of the daily indexes audit events are written to (<index>-YYYY.MM.DD).",
    )
    ilm_policy: str = Field(default="sidecar-audit", min_length=1, description="Name of the ILM policy installed.")
    retention_days: int = Field(default=90, gt=0, description="ILM deletes a daily index this many days old.")
    shards: int = Field(default=1, gt=0, description="Primary shards of each daily index.")
    replicas: int = Field(default=1, ge=0, description="Replicas of each daily index.")
    api_key: Token | None = Field(
        default=None,
        description="API key (Authorization: ApiKey ...); write ${env:NAME} to read it from the environment.",
    )
    max_queue: int = Field(
        default=1_000_000,
        gt=0,
        description="Audit events waiting for Elasticsearch in the embedded store (the replay queue).",
    )
    overflow: Literal["drop_oldest", "refuse_new"] = Field(
        default="drop_oldest",
        description="When the replay queue is full: delete the oldest waiting copies, or refuse the new "
        "ones (either counted as dropped{reason=queue_full}; the SQLite audit rows stay).",
    )
    max_dead_letters: int = Field(
        default=10_000, gt=0, description="Refused documents kept with their reason; the oldest go first."
    )
    max_batch: int = Field(default=500, gt=0, description="Documents per bulk request.")
    timeout_secs: float = Field(default=10.0, gt=0, description="Timeout of one bulk request.")
    retry: RetryConfig = Field(default_factory=RetryConfig, description="See RetryConfig.")

    @model_validator(mode="before")
    @classmethod
    def _credentials_out_of_url(cls, data: Any) -> Any:
        return cls._move_credentials(data, "url", many=False)

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError(f"{v!r} is not an http(s) URL")
        return v.rstrip("/")

    @field_validator("urls")
    @classmethod
    def _more_urls(cls, v: list[str]) -> list[str]:
        return [cls._url(u) for u in v]

    @model_validator(mode="after")
    def _one_key(self) -> ElasticsearchConfig:
        if self.api_key is not None and (self.basic_auth is not None or self.bearer_token is not None):
            raise ValueError("api_key excludes basic_auth and bearer_token")
        return self


class WebhookConfig(StrictModel):
    """One webhook a finding calls (e.g. to start a retraining pipeline when drift fires)."""

    name: str = Field(
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9_.-]+$",
        description="Names the webhook in metrics (`webhook` label) and logs.",
    )
    url: str = Field(description="Where the JSON body is POSTed.")
    secret: SecretStr = Field(
        description="HMAC-SHA256 key: the body is signed as `X-Sidecar-Signature: sha256=<hex of "
        "HMAC(secret, TIMESTAMP + '.' + body)>`, TIMESTAMP being the `X-Sidecar-Timestamp` header."
    )
    match: dict[str, str] = Field(
        default_factory=dict,
        description="Labels a finding must carry to call this webhook (e.g. `{check: drift}` or "
        "`{diagnosis: no_spans}`; `kind` matches the finding's kind); empty: every finding.",
    )
    min_interval_secs: float = Field(
        default=300.0,
        ge=0,
        description="At most one call per this many seconds; findings in between are "
        "not sent and counted in sidecar_webhook_rate_limited_total.",
    )
    timeout_secs: float = Field(default=10.0, gt=0, description="Timeout of one POST.")
    max_queue: int = Field(default=100, gt=0, description="Calls waiting to be delivered; more are dropped, counted.")
    retry: RetryConfig = Field(default_factory=RetryConfig, description="See RetryConfig.")

    @field_validator("url")
    @classmethod
    def _http_url(cls, v: str) -> str:
        parts = urlsplit(v)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"must be an http:// or https:// URL, got {v!r}")
        return v

    @staticmethod
    def unique_names(hooks: list[WebhookConfig]) -> list[WebhookConfig]:
        """For the list field that holds them: two webhooks of one name would share their metrics."""
        seen: set[str] = set()
        for i, h in enumerate(hooks):
            if h.name in seen:
                raise ValueError(f"[{i}].name: {h.name!r} is used twice; webhook names must be unique")
            seen.add(h.name)
        return hooks


class ForwardConfig(StrictModel):
    endpoint: str | None = Field(
        default=None,
        description="OTLP/HTTP traces endpoint to forward every received span to, e.g. "
        "http://tempo:4318/v1/traces. Unset: no forwarding.",
    )
    headers: dict[str, str] = Field(default_factory=dict, description="Extra HTTP headers sent with each export.")
    compression: Literal["none", "gzip"] = Field(default="gzip", description="Body compression of forwarded exports.")
    timeout_secs: float = Field(
        default=10.0,
        gt=0,
        description="Time one export may take, retries included (the exporter backs off with jitter "
        "and honours Retry-After; it retries 429, 502, 503 and 504 only).",
    )
    queue_max_spans: int = Field(
        default=20000, gt=0, description="Spans waiting to be forwarded; more are dropped and counted."
    )
    batch_max_spans: int = Field(default=512, gt=0, description="Spans sent in one export request.")
    shutdown_flush_secs: float = Field(default=5.0, ge=0, description="Time spent flushing the queue at shutdown.")

    @field_validator("endpoint")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return v
