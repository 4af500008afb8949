"""One probe of Triton: its metrics endpoint (status, per-model counters, GPU utilization) and, for models
seen there, backend and instance count from ``GET /v2/models/{m}/config``.

The probe is separate from the Triton metrics source on purpose: a diagnosis must work (and ``sidecar
doctor`` must run) when that source is misconfigured, and it asks different questions (the HTTP status, the
model config) at a much lower rate.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import httpx

from sidecar.errors import ParseError, ScrapeError
from sidecar.processors.triton_snapshot import Key, ModelSnapshot, snapshot_models
from sidecar.promtext import parse_exposition
from sidecar.scrape import fetch_exposition

__all__ = ["ModelConfigInfo", "Probe", "parse_probe", "probe_triton"]

_STATUS = re.compile(r"answered HTTP (\d{3})")


@dataclass(frozen=True)
class ModelConfigInfo:
    backend: str
    instances: int


@dataclass(frozen=True)
class Probe:
    """What one probe saw; ``at`` is monotonic seconds (rates are durations, not wall time)."""

    at: float
    url: str
    error: str = ""
    reason: str = ""  # ScrapeError reason, "parse", or "" when the probe succeeded
    status: int | None = None
    models: dict[Key, ModelSnapshot] = field(default_factory=dict)
    gpu_util: dict[str, float] = field(default_factory=dict)  # gpu uuid -> 0..1
    gpu_memory_used: dict[str, float] = field(default_factory=dict)  # gpu uuid -> bytes
    configs: dict[str, ModelConfigInfo] = field(default_factory=dict)
    refused: int = 0

    @property
    def ok(self) -> bool:
        return not self.error


def parse_probe(
    text: str, *, at: float, url: str, max_models: int, configs: dict[str, ModelConfigInfo] | None = None
) -> Probe:
    """A probe from an exposition's text (the recorded-data tests build probes this way)."""
    try:
        expo = parse_exposition(text)
    except ParseError as exc:
        return Probe(at=at, url=url, error=f"malformed exposition: {exc}", reason="parse")
    models, passthrough, refused = snapshot_models(expo, max_models)
    util = {lab.get("gpu_uuid", "?"): v for name, lab, v in passthrough if name == "nv_gpu_utilization"}
    used = {lab.get("gpu_uuid", "?"): v for name, lab, v in passthrough if name == "nv_gpu_memory_used_bytes"}
    # Only configs of models still served are kept, so an unloaded model's entry does not linger.
    present = {m for m, _ in models}
    kept = {m: c for m, c in (configs or {}).items() if m in present}
    return Probe(at=at, url=url, models=models, gpu_util=util, gpu_memory_used=used, configs=kept, refused=refused)


def _config_info(body: object) -> ModelConfigInfo | None:
    if not isinstance(body, dict):
        return None
    backend = str(body.get("backend") or body.get("platform") or "")
    groups = body.get("instance_group") or []
    count = sum(int(g.get("count", 1)) for g in groups if isinstance(g, dict)) if isinstance(groups, list) else 0
    return ModelConfigInfo(backend=backend, instances=count or 1)


async def probe_triton(
    http: httpx.AsyncClient,
    *,
    metrics_url: str,
    http_url: str | None,
    at: float,
    timeout_s: float,
    max_models: int,
    known: dict[str, ModelConfigInfo] | None = None,
) -> Probe:
    """Probe Triton once; never raises. Model configs already in ``known`` are not asked for again."""
    try:
        text = await fetch_exposition(http, metrics_url, what="Triton's metrics endpoint", timeout_s=timeout_s)
    except ScrapeError as exc:
        m = _STATUS.search(str(exc))
        return Probe(at=at, url=metrics_url, error=str(exc), reason=exc.reason, status=int(m.group(1)) if m else None)
    probe = parse_probe(text, at=at, url=metrics_url, max_models=max_models, configs=known)
    if http_url is None or not probe.ok:
        return probe
    for model in sorted({m for m, _ in probe.models} - set(probe.configs)):
        try:
            resp = await http.get(f"{http_url.rstrip('/')}/v2/models/{model}/config", timeout=timeout_s)
            info = _config_info(resp.json()) if resp.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            info = None
        if info is not None:
            probe.configs[model] = info
    return probe
