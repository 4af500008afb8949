"""What the status and alerts pages read: the sidecar's own public surfaces, never a component by name.

- The metrics registry (``sidecar_triton_*``, ``sidecar_drift_*``, ``sidecar_gpu_*``,
  ``sidecar_alertmanager_*``): every component already exports its state there.
- The sidecar's read-only JSON API (``/readyz``, ``/v1/alerts``, ``/v1/changes``, ``/v1/audit``), called
  in-process through the ASGI app that serves the page: the page shows exactly what an API client would see,
  whichever component serves the route. The call carries the page request's own ``Authorization`` header, so
  it passes the same token gate the page request passed (a page never reads with more rights than its
  reader, and never with fewer).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from prometheus_client import CollectorRegistry, Counter
from starlette.requests import Request

from sidecar.delivery_state import delivery_state

__all__ = ["Api", "Delivery", "GpuRow", "Metrics", "read_metrics"]

# Bounded reads: the status page lists the newest, the alerts page links to the JSON for the rest.
MAX_ROWS = 200


@dataclass
class GpuRow:
    labels: dict[str, str]
    up: float
    values: dict[str, float] = field(default_factory=dict)


@dataclass
class Delivery:
    """One Alertmanager's delivery state, from its exporter's counters (since this process started)."""

    alertmanager: str
    sent: float = 0.0
    rejected: float = 0.0
    dropped: float = 0.0
    failures: float = 0.0
    queued: float = 0.0

    @property
    def state(self) -> str:
        # The word /readyz uses too (sidecar/delivery_state.py): one word from one place.
        return delivery_state(queued=self.queued, failed=bool(self.failures), sent=self.sent)


@dataclass
class Metrics:
    triton_configured: bool = False
    triton_up: float | None = None
    triton_last_ok: float | None = None
    triton_models: float | None = None
    drift: list[dict[str, Any]] = field(default_factory=list)
    gpus: list[GpuRow] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)


_GPU_VALUES = {
    "sidecar_gpu_utilization_ratio": "util",
    "sidecar_gpu_memory_used_bytes": "mem_used",
    "sidecar_gpu_memory_total_bytes": "mem_total",
}
_DRIFT = {
    "sidecar_drift_drifting": "drifting",
    "sidecar_drift_condition": "condition",
    "sidecar_drift_p_value": "p",
    "sidecar_drift_p_value_raw": "p_raw",
    "sidecar_drift_effect_size": "effect",
    "sidecar_drift_statistic": "stat",
    "sidecar_drift_psi": "psi",
    "sidecar_drift_unseen_ratio": "unseen",
    "sidecar_drift_samples": "samples",
    "sidecar_drift_missing_ratio": "missing",
}
_AM = {
    "sidecar_alertmanager_notices_sent_total": "sent",
    "sidecar_alertmanager_notices_rejected_total": "rejected",
    "sidecar_alertmanager_notices_dropped_total": "dropped",
    "sidecar_alertmanager_request_failures_total": "failures",
    "sidecar_alertmanager_outbox_notices": "queued",
}


def read_metrics(registry: CollectorRegistry) -> Metrics:
    out = Metrics()
    drift: dict[tuple[str, ...], dict[str, Any]] = {}
    gpus: dict[str, GpuRow] = {}
    ams: dict[str, Delivery] = {}
    for family in registry.collect():
        if not family.name.startswith("sidecar_"):
            continue  # Triton's re-exported series and the process collector: nothing the pages show
        for s in family.samples:
            v = s.value
            if s.name == "sidecar_triton_up":
                out.triton_configured, out.triton_up = True, v
            elif s.name == "sidecar_triton_last_success_timestamp_seconds":
                out.triton_last_ok = v if v > 0 else None
            elif s.name == "sidecar_triton_models":
                out.triton_models = v
            elif s.name in _DRIFT:
                # One row per feature: samples and missing ratio come per window (current, reference), PSI and
                # the unseen ratio without the test label.
                key = tuple(s.labels.get(k, "") for k in ("model", "version", "feature"))
                row = drift.setdefault(key, dict(zip(("model", "version", "feature"), key, strict=True)))
                field_ = _DRIFT[s.name] + (f"_{s.labels['window']}" if "window" in s.labels else "")
                if s.labels.get("test") == "missing":
                    # The missing-values test of the same feature: its own fields, never over the KS/chi2 row's;
                    # it marks the row drifting (or holding) too.
                    row[f"missing_test_{field_}"] = None if math.isnan(v) else v
                    if field_ in ("drifting", "condition") and v == 1:
                        row[field_] = 1.0
                    continue
                if "test" in s.labels:
                    row["test"] = s.labels["test"]
                if field_ in ("drifting", "condition") and row.get(field_) == 1:
                    continue  # the missing-values test already marks it
                row[field_] = None if math.isnan(v) else v
            elif s.name == "sidecar_gpu_up":
                g = gpus.setdefault(s.labels.get("uuid") or s.labels.get("gpu", ""), GpuRow(dict(s.labels), v))
                g.labels, g.up = dict(s.labels), v
            elif s.name in _GPU_VALUES:
                gkey = s.labels.get("uuid") or s.labels.get("gpu", "")
                gpus.setdefault(gkey, GpuRow(dict(s.labels), math.nan)).values[_GPU_VALUES[s.name]] = v
            elif s.name in _AM:
                am = s.labels.get("alertmanager", "")
                d = ams.setdefault(am, Delivery(am))
                setattr(d, _AM[s.name], getattr(d, _AM[s.name]) + v)
    for row in drift.values():
        row.setdefault("test", "")
    out.drift = sorted(
        drift.values(),
        key=lambda r: (-(r.get("drifting") or 0), -(r.get("condition") or 0), r["model"], r["version"], r["feature"]),
    )
    out.gpus = [gpus[k] for k in sorted(gpus)]
    out.deliveries = [ams[k] for k in sorted(ams)]
    return out


class Api:
    """The sidecar's own read API, in-process. A route that is absent (that area is not configured) or fails
    reads as "not available" with the reason, and is counted; the page still renders."""

    def __init__(self, registry: CollectorRegistry, logger: logging.Logger | None = None) -> None:
        self.log = logger or logging.getLogger("sidecar.pages")
        self._errors = Counter(
            "sidecar_page_source_errors",
            "Reads of the sidecar's own API that a page could not use, by path and reason (status, decode).",
            ["path", "reason"],
            registry=registry,
        )

    async def get(self, request: Request, path: str, params: Mapping[str, str | int] | None = None) -> tuple[Any, str]:
        """(JSON body or None, why it is missing), read as the page's own caller: through ``request.app``, with
        the caller's ``Authorization`` header (and nothing else of theirs)."""
        transport = httpx.ASGITransport(app=request.app)
        auth = request.headers.get("authorization")
        headers = {"authorization": auth} if auth else None
        async with httpx.AsyncClient(transport=transport, base_url="http://sidecar", headers=headers) as client:
            try:
                r = await client.get(path, params=dict(params or {}))
            except Exception as exc:
                self._errors.labels(path, "error").inc()
                self.log.warning("page could not read %s: %s", path, exc)
                return None, f"could not read {path}"
        if r.status_code == 404:
            return None, "not configured"
        if r.status_code >= 400 and path != "/readyz":  # /readyz answers 503 with its body when not ready
            self._errors.labels(path, "status").inc()
            return None, f"{path} answered {r.status_code}"
        try:
            return r.json(), ""
        except ValueError:
            self._errors.labels(path, "decode").inc()
            return None, f"{path} did not answer JSON"
