"""``sidecar demo``: a real Triton with the demo models, steady traffic, and the sidecar watching it.

Everything runs on loopback; Ctrl-C (or SIGTERM, or ``--duration-secs``) stops the traffic, the sidecar and
Triton's whole process group, so nothing is left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["demo_config", "run_demo"]

log = logging.getLogger("sidecar.demo")


def demo_config(triton_http: str, triton_metrics: str, port: int, workdir: Path) -> dict[str, Any]:
    """The config the demo runs with: the embedded defaults plus what points at the demo's Triton."""
    return {
        "server": {"host": "127.0.0.1", "port": port},
        "store": {"path": str(workdir / "sidecar-state.sqlite")},
        "triton": {"metrics_url": triton_metrics, "http_url": triton_http, "interval_secs": 2.0},
        "checks": {"eval_interval_secs": 5.0},
    }


def _quiet_server_class() -> type:
    import uvicorn

    class QuietServer(uvicorn.Server):
        # The demo owns SIGINT/SIGTERM (it must stop Triton too), so uvicorn must not take them over.
        def install_signal_handlers(self) -> None:
            return None

    return QuietServer


async def _run(port: int, duration_s: float | None, workdir: Path) -> int:
    import uvicorn

    from sidecar.app import create_app
    from sidecar.config import parse_config
    from sidecar.demo.traffic import Traffic
    from sidecar.demo.tritonserver import TritonServer, demo_model_repository
    from sidecar.service import Service

    _QuietServer = _quiet_server_class()
    triton = TritonServer(demo_model_repository(), workdir / "triton")
    print(f"starting Triton (models ctr v1+v2, fraud v1) in {workdir / 'triton'} ...", flush=True)
    await asyncio.to_thread(triton.start)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        cfg = parse_config(demo_config(triton.http_url, triton.metrics_url, port, workdir))
        service = Service(cfg)
        app = create_app(service)
        server = _QuietServer(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                             access_log=False, lifespan="on"))
        serve = asyncio.create_task(server.serve())
        while not server.started:
            if serve.done():
                await serve
                return 1
            await asyncio.sleep(0.05)
        traffic = Traffic(triton.http_url)
        traffic_task = asyncio.create_task(traffic.run(stop))
        base = f"http://127.0.0.1:{port}"
        print(f"""
Triton:   {triton.http_url} (metrics {triton.metrics_url})
Sidecar:  {base}/
  metrics   {base}/metrics   (look for sidecar_model_requests_per_second, sidecar_model_error_ratio)
  ready     {base}/readyz
  traces    {base}/traces
Traffic: ~20 requests/s to ctr v1, ctr v2 and fraud v1 (about 8% of fraud requests fail).
Press Ctrl-C to stop.""", flush=True)
        if duration_s is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=duration_s)
        else:
            await stop.wait()
        stop.set()
        await traffic_task
        server.should_exit = True
        await serve
        print(f"traffic sent: {sum(traffic.stats.sent.values())} requests "
              f"({sum(traffic.stats.failed.values())} failed)", flush=True)
    finally:
        await asyncio.to_thread(triton.stop)
        print("stopped Triton and the sidecar", flush=True)
    return 0


def run_demo(port: int = 9500, duration_s: float | None = None, workdir: str | None = None) -> int:
    wd = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="sidecar-demo-"))
    wd.mkdir(parents=True, exist_ok=True)
    return asyncio.run(_run(port, duration_s, wd))
