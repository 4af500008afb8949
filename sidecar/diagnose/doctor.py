"""``sidecar doctor``: the diagnoses run once from the command line, with Triton's trace setting asked too
(a one-shot run cannot wait ten minutes for spans)."""

from __future__ import annotations

import asyncio

import httpx

from sidecar.config import SidecarConfig
from sidecar.diagnose.observe import probe_triton
from sidecar.diagnose.rules import Diagnosis, Inputs, diagnose
from sidecar.errors import CannotRun

__all__ = ["CannotRun", "run_doctor"]

_UNREACHABLE = ("timeout", "connect")  # even a 404 diagnosis needs an answer


async def _trace_off(http: httpx.AsyncClient, http_url: str, timeout_s: float) -> Diagnosis | None:
    try:
        resp = await http.get(f"{http_url.rstrip('/')}/v2/trace/setting", timeout=timeout_s)
        body = resp.json() if resp.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    level = body.get("trace_level") if isinstance(body, dict) else None
    if level not in (["OFF"], "OFF"):
        return None
    return Diagnosis(
        "no_spans",
        "Triton's trace level is OFF, so no spans will be received: check --trace-config",
        "start Triton with --trace-config level=TIMESTAMPS --trace-config rate=N and mode=opentelemetry "
        "(url=http://SIDECAR/v1/traces) or mode=triton with a trace file the sidecar tails",
        facts={"trace_level": "OFF"},
    )


async def _run(cfg: SidecarConfig, wait_s: float, http: httpx.AsyncClient) -> list[Diagnosis]:
    dc, tc = cfg.diagnose, cfg.triton
    loop = asyncio.get_running_loop()
    first = await probe_triton(
        http,
        metrics_url=tc.metrics_url,
        http_url=tc.http_url,
        at=loop.time(),
        timeout_s=dc.timeout_secs,
        max_models=dc.max_models,
    )
    if first.reason in _UNREACHABLE or (not first.ok and first.status != 404):
        # Only a 404 is a diagnosis of its own; any other failed probe leaves nothing to judge by.
        raise CannotRun(first.error)
    second = first
    if first.ok and wait_s > 0:
        # Interval rules (queue growth, busy share) need two probes.
        await asyncio.sleep(wait_s)
        second = await probe_triton(
            http,
            metrics_url=tc.metrics_url,
            http_url=tc.http_url,
            at=loop.time(),
            timeout_s=dc.timeout_secs,
            max_models=dc.max_models,
            known=first.configs,
        )
    found = diagnose(Inputs(prev=first if second is not first else None, cur=second), dc)
    if cfg.traces.enabled and tc.http_url is not None:
        off = await _trace_off(http, tc.http_url, dc.timeout_secs)
        if off is not None:
            found.append(off)
    return found


def run_doctor(cfg: SidecarConfig, *, wait_s: float = 5.0, http: httpx.AsyncClient | None = None) -> list[Diagnosis]:
    """The diagnoses that hold now; raises ``CannotRun`` when Triton cannot be reached."""

    async def main() -> list[Diagnosis]:
        if http is not None:
            return await _run(cfg, wait_s, http)
        async with httpx.AsyncClient(follow_redirects=False) as client:
            return await _run(cfg, wait_s, client)

    return asyncio.run(main())
