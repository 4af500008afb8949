"""One pydantic model tree for the one YAML file.

Loading does three things in order: parse YAML, substitute ``${env:VAR}`` (or ``${env:VAR:-default}``) in string
values, validate. Every error becomes a ``ConfigError`` whose path names the field (``triton.interval_secs``).
Secrets are ``SecretStr`` so they never show in logs, reprs or ``sidecar validate`` output.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, get_args

from pydantic import AfterValidator, BaseModel, Field, ValidationError, model_validator

from exporters.config import WebhookConfig
from sidecar.actions.config import ActionsConfig
from sidecar.alerting.config import AlertingConfig
from sidecar.checks.config import ChecksConfig
from sidecar.checks.probe.config import ProbesConfig
from sidecar.configbase import StrictModel, Token
from sidecar.configyaml import load_yaml
from sidecar.diagnose.config import DiagnoseConfig
from sidecar.edge_config import EdgeConfig
from sidecar.errors import ConfigError
from sidecar.runtime import RuntimeConfig
from sidecar.sources.events.config import EventsConfig
from sidecar.sources.gpu.config import GpuConfig
from sidecar.sources.servers.config import ServingTargetConfig, unique_server_names
from sidecar.sources.triton_config import TritonConfig
from sidecar.state.trace_config import TracesConfig

__all__ = ["ServerConfig", "SidecarConfig", "StoreConfig", "load_config", "load_config_text", "parse_config"]

_ENV_RE = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class ServerConfig(StrictModel):
    host: str = Field("127.0.0.1", description="Address the sidecar's HTTP server binds.")
    port: int = Field(9500, ge=0, le=65535, description="Port of the sidecar's HTTP server (0 picks a free one).")
    max_body_bytes: int = Field(
        4 * 1024 * 1024, gt=0, description="Largest request body accepted, checked after decompression (413 above)."
    )
    push_token: Token | None = Field(
        None, description="Bearer token required on push endpoints (/v1/traces, /v1/events, /v1/changes)."
    )
    admin_token: Token | None = Field(None, description="Bearer token required on admin endpoints (/admin/*).")
    read_token: Token | None = Field(
        None,
        description="Token required to read pages, /metrics, /docs and the GET APIs (Bearer, or HTTP Basic "
        "with any user name and this as the password, so a browser can sign in). /healthz and /readyz stay open "
        "for probes. Empty or unset: open.",
    )
    header_timeout_secs: float = Field(
        10.0, gt=0, le=600, description="A connection whose request headers are not complete by then is closed."
    )
    body_timeout_secs: float = Field(
        30.0, gt=0, le=3600, description="A push whose body has not fully arrived by then gets 408."
    )
    keep_alive_timeout_secs: float = Field(
        65.0,
        gt=0,
        le=600,
        description="Idle keep-alive connections close after this. Longer than the exporters' send intervals "
        "(5 s in Triton's OpenTelemetry exporter and the OTel SDKs, up to 60 s in collectors), so the server never "
        "closes a connection just as a client reuses it: an export sent then is lost by clients that cannot "
        "resend the body (Triton 2.51's opentelemetry-cpp). Idle connections are the first evicted under a flood.",
    )
    max_header_bytes: int = Field(
        64 * 1024, ge=1024, le=16 * 1024 * 1024, description="Largest request head (request line + headers)."
    )
    max_connections: int = Field(
        1024,
        gt=0,
        description="Open connections that may carry any request. Beyond them a connection takes a probe-reserve "
        "slot (only /healthz and /readyz are served; other requests get 503 + Retry-After); when those are held "
        "too, the connection idle longest is closed to make room, or the new one is answered 503. Lowered at "
        "start to fit the file-descriptor limit (RLIMIT_NOFILE, whose soft limit is raised toward the hard one, "
        "minus 256 kept for files and clients); the log says so.",
    )
    probe_reserve_connections: int = Field(
        16,
        ge=1,
        le=1024,
        description="Connections kept beyond max_connections for /healthz and /readyz, so a flood of connections "
        "never fails a liveness probe.",
    )
    max_inflight_requests: int = Field(
        64, gt=0, description="Push requests handled at once on each push endpoint; more get 429."
    )
    max_inflight_bytes_mib: float | None = Field(
        None,
        gt=0,
        description="Request body bytes in flight on each push endpoint (after decompression); more get 429. "
        "Unset: 8 x max_body_bytes. At least max_body_bytes.",
    )
    memory_limit_mib: int | None = Field(
        None,
        gt=0,
        description="Resident memory above which the stores are asked to evict and hold their budgets down (traces."
        "store.pressure_keep_fraction); while still above it after that, each push endpoint is cut to one request "
        "in flight (503 + Retry-After beyond it); no endpoint is refused outright. Unset: no limit.",
    )
    memory_relief_interval_secs: float = Field(
        5.0, gt=0, le=3600, description="Over memory_limit_mib, the stores are asked to evict at most this often."
    )
    public_url: str | None = Field(
        None, description="URL operators reach the sidecar at; used for links in alerts. Defaults to host:port."
    )

    @model_validator(mode="after")
    def _inflight_bytes(self) -> ServerConfig:
        if self.max_inflight_bytes_mib is not None and self.max_inflight_bytes_mib * 1048576 < self.max_body_bytes:
            raise ValueError(
                f"max_inflight_bytes_mib ({self.max_inflight_bytes_mib:g}) must hold at least one body of "
                f"max_body_bytes ({self.max_body_bytes})"
            )
        return self


class StoreConfig(StrictModel):
    path: str = Field(
        "sidecar-state.sqlite",
        description="Embedded SQLite store (WAL) for references, baselines, the alert outbox and audit events.",
    )


class SidecarConfig(StrictModel):
    """The whole sidecar configuration (the YAML file's top level)."""

    server: ServerConfig = ServerConfig()
    store: StoreConfig = StoreConfig()
    triton: TritonConfig = TritonConfig()
    traces: TracesConfig = TracesConfig()
    events: EventsConfig = EventsConfig()
    checks: ChecksConfig = ChecksConfig()
    alerting: AlertingConfig = AlertingConfig()
    gpu: GpuConfig = GpuConfig()
    diagnose: DiagnoseConfig = DiagnoseConfig()
    edge: EdgeConfig = EdgeConfig()
    probes: ProbesConfig = ProbesConfig()
    actions: ActionsConfig = ActionsConfig()
    runtime: RuntimeConfig = RuntimeConfig()
    servers: Annotated[list[ServingTargetConfig], AfterValidator(unique_server_names)] = Field(
        default_factory=list,
        description="Model servers read through a server profile (vLLM, Triton, ...): docs/servers.md.",
    )
    webhooks: Annotated[list[WebhookConfig], AfterValidator(WebhookConfig.unique_names)] = Field(
        default_factory=list, description="Webhooks findings call (signed, retried, rate-limited): docs/webhooks.md."
    )
    dashboard_url: str | None = Field(None, description="Grafana base URL used in alert links.")
    runbook_url: str | None = Field(
        None,
        description="Base URL of the runbooks linked from alerts; unset: the sidecar's own copy of docs/runbooks at "
        "<server.public_url>/runbooks, so the links work with no internet.",
    )


def _substitute(value: Any, path: str) -> Any:
    if isinstance(value, str):

        def repl(m: re.Match[str]) -> str:
            name, default = m.group(1), m.group(2)
            if name in os.environ:
                return os.environ[name]
            if default is not None:
                return default
            raise ConfigError(path, f"environment variable {name} is not set")

        return _ENV_RE.sub(repl, value)
    if isinstance(value, Mapping):
        return {k: _substitute(v, f"{path}.{k}" if path else str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, f"{path}[{i}]") for i, v in enumerate(value)]
    return value


def _loc_to_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            # pydantic puts the union member's name or a function name in the location; skip those noise parts.
            if isinstance(part, str) and (part.startswith("function-") or "[" in part):
                continue
            out += f".{part}" if out else str(part)
    return out


def _fields_at(loc: tuple[Any, ...]) -> list[str]:
    """The keys the model allows at the parent of ``loc`` (empty when the path leaves the model tree)."""
    model: Any = SidecarConfig
    for part in loc[:-1]:
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return []
        if isinstance(part, int) or part not in model.model_fields:
            continue  # a list index or a dict key: the item type was already taken below
        model = _model_in(model.model_fields[part].annotation)
    if isinstance(model, type) and issubclass(model, BaseModel):
        return list(model.model_fields)
    return []


def _model_in(annotation: Any) -> Any:
    """The config model inside ``X | None``, ``list[X]`` or ``dict[str, X]``, else the annotation."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in reversed(get_args(annotation)):
        found = _model_in(arg)
        if isinstance(found, type) and issubclass(found, BaseModel):
            return found
    return annotation


def _did_you_mean(loc: tuple[Any, ...]) -> str:
    if not loc or not isinstance(loc[-1], str):
        return ""
    close = difflib.get_close_matches(loc[-1], _fields_at(loc), n=1, cutoff=0.75)
    return f"; did you mean {close[0]!r}?" if close else ""


def parse_config(data: Mapping[str, Any] | None) -> SidecarConfig:
    """Validate an already-parsed mapping; raises ``ConfigError`` naming the first bad field."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError("", "the config file must be a mapping at its top level")
    data = _substitute(data, "")
    try:
        return SidecarConfig.model_validate(data)
    except ValidationError as exc:
        # An unknown key first: a typo (`treshold`) is the cause of the "field required" pydantic also reports.
        errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
        first = errors[0]
        path = _loc_to_path(tuple(first["loc"]))
        msg = first["msg"]
        if first["type"] == "extra_forbidden":
            msg = "unknown key" + _did_you_mean(tuple(first["loc"]))
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ConfigError(path, f"{msg}{more}") from None


def load_config(path: str | Path) -> SidecarConfig:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ConfigError("", f"cannot read {p}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError("", f"{p} is not UTF-8 text (byte {exc.start})") from None
    return load_config_text(text, str(p))


def load_config_text(text: str, source: str = "the config") -> SidecarConfig:
    """Parse and validate YAML text; every problem is a ``ConfigError`` (``source`` names it in messages)."""
    return parse_config(load_yaml(text, source))
