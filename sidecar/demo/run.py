"""``sidecar demo``: a real Triton with the demo models, steady traffic, and the sidecar watching it.

Everything runs on loopback and uses the embedded defaults (SQLite store, no external services). When Debian's
Alertmanager is installed (``.ci/setup`` installs it) the demo starts one too, so alerts can be seen where
on-call would see them; when nginx is installed, an nginx with ``proxy_cache`` (inference POSTs cached by body)
stands in front of Triton's HTTP port, the traffic goes through it (the streams go to Triton directly), and the
sidecar tails its JSON access log with the edge source. The actions layer only plans (dry-run) unless ``act``:
then Triton runs in explicit model-control mode and the planned revert is carried out. The sidecar
runs from ``sidecar.yaml`` written to the work folder, and the banner prints the ``sidecar doctor --config``
line for it. ``play.ScenarioRun`` plays the scenario and prints its timeline.
Ctrl-C (or SIGTERM, or ``--duration-secs``) prints the promise table, then stops the traffic, the sidecar,
Alertmanager and Triton's whole process group, so nothing is left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["demo_config", "demo_triton", "run_demo"]  # demo_config lives in demo/config.py

from sidecar.demo.config import demo_config

log = logging.getLogger("sidecar.demo")


def _triton_trace_args(port: int) -> list[str]:
    # Triton's C++ exporter sends OTLP/HTTP JSON to the sidecar; one request in two is traced.
    return [
        "--trace-config",
        "mode=opentelemetry",
        "--trace-config",
        f"opentelemetry,url=http://127.0.0.1:{port}/v1/traces",
        "--trace-config",
        "rate=2",
        "--trace-config",
        "level=TIMESTAMPS",
    ]


def demo_triton(workdir: Path, port: int, act: bool) -> Any:
    """The demo's Triton: every demo model (its full repository, written to the work folder), traces to the
    sidecar on ``port``; with ``act``, in explicit
    model-control mode with every model loaded at start (the actions layer's load requests need it)."""
    from sidecar.demo.tritonserver import DEMO_MODELS, TritonServer, demo_full_repository

    return TritonServer(
        demo_full_repository(workdir / "model_repository"),
        workdir / "triton",
        extra_args=_triton_trace_args(port),
        model_control_explicit=act,
        load_models=DEMO_MODELS if act else (),
    )


def _quiet_server_class() -> type:
    import uvicorn

    class QuietServer(uvicorn.Server):
        # The demo owns SIGINT/SIGTERM (it must stop Triton too), so uvicorn must not take them over: its own
        # handler would see a second Ctrl-C as "force exit" and skip the sidecar's graceful shutdown.
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return QuietServer


def write_config(raw: dict[str, Any], workdir: Path) -> Path:
    """The demo's config as a file in its work folder, so ``sidecar doctor --config`` (or ``validate``) has a
    target; the demo itself runs from this file."""
    import yaml

    path = workdir / "sidecar.yaml"
    text = "# Written by `sidecar demo`: the config the running demo's sidecar uses.\n" + yaml.safe_dump(
        raw, sort_keys=False
    )
    path.write_text(text)
    return path


def _sidecar_command() -> str:
    exe = Path(sys.executable).parent / "sidecar"
    return str(exe) if exe.exists() else "sidecar"


REPEATS_PER_S = 5  # repeated lookups a second, behind nginx: the edge's cache hits


def _edge_line(nginx: Any | None) -> str:
    if nginx is None:
        return "Edge:     nginx not installed (the traffic goes to Triton directly; no edge source)"
    return (
        f"Edge:     nginx {nginx.url} (proxy_cache, inference POSTs keyed on their body) in front of Triton;\n"
        f"  the traffic goes through it, plus {REPEATS_PER_S} repeated lookups a second its cache answers (they never\n"
        f"  reach Triton); its log {nginx.access_log} is tailed by the edge source\n"
        "  (hit ratio and SLA on /, sidecar_edge_*; each trace's waterfall shows the edge)"
    )


def _actions_line(act: bool) -> str:
    if act:
        return (
            "Actions:  ON (--act): Triton runs in explicit model-control mode and a planned revert is carried out\n"
            "  (requests still addressed to fraud v2 then fail: a router would stop sending them)"
        )
    return (
        "Actions:  dry-run: each plan is shown on / (ActionPlanned), audited and printed below; nothing is sent\n"
        "  (sidecar demo --act carries plans out). Probes: ctr v1+v2, fraud v1+v2 every 10 s (on /)"
    )


def _banner(
    base: str, triton: Any, am_url: str | None, config_path: Path, nginx: Any | None = None, act: bool = False
) -> str:
    from sidecar.demo.scenario import DemoScenario
    from sidecar.demo.story import clock_text, promises

    timeline = "\n".join(f"  {clock_text(t)}  {what}" for t, what in DemoScenario.timeline())
    alerts = "\n".join(f"  - {a.describe()}" for a in promises(act))
    # Debian's Alertmanager has no web UI: the sidecar's /alerts page is where a person reads alerts.
    am = (
        f"Alertmanager: {am_url} (API only; the sidecar's {base}/alerts shows delivery per alert)"
        if am_url
        else "Alertmanager: not installed (alerts are still evaluated; see /alerts)"
    )
    return f"""
Triton:   {triton.http_url} (metrics {triton.metrics_url}), models ctr v1+v2, fraud v1+v2, chat v1 (streaming)
Sidecar:  {base}/
  alerts    {base}/alerts    (active, pending, resolved; delivery state)
  traces    {base}/traces    (slow and failed requests; click one for its waterfall)
  metrics   {base}/metrics   (sidecar_model_requests_per_second, sidecar_model_error_ratio, sidecar_drift_*)
  ready     {base}/readyz
{am}
{_edge_line(nginx)}
{_actions_line(act)}
Config:   {config_path}
  diagnose this Triton from another terminal:  {_sidecar_command()} doctor --config {config_path}
Traffic: ~20 requests/s to ctr v1, ctr v2 and fraud (about 8% of fraud requests fail, about 1% are slow), and
one request a second streamed from chat (HTTP generate_stream). Each answer is reported to
{base}/v1/events with its features, score and latency; each stream with its time to first token,
inter-token gap and tokens in and out.
What happens (each step is printed below when it happens; times since the start):
{timeline}
The alerts this causes (drift alerts fire per version; each transition is printed below as it happens, and
when the demo stops a table says, per promise, what the sidecar and Alertmanager saw):
{alerts}
Press Ctrl-C to stop."""


async def _run(port: int, duration_s: float | None, workdir: Path, act: bool = False) -> int:
    import httpx

    from sidecar.app import create_app
    from sidecar.config import load_config
    from sidecar.demo.alertmanager import DemoAlertmanager
    from sidecar.demo.edge_nginx import DemoNginx
    from sidecar.demo.play import ScenarioRun
    from sidecar.demo.story import promises
    from sidecar.demo.timeline import LoopTicker
    from sidecar.demo.traffic import Traffic
    from sidecar.runtime import tune_gc
    from sidecar.service import Service

    quiet_server = _quiet_server_class()
    triton = demo_triton(workdir, port, act)
    alertmanager = DemoAlertmanager(workdir / "alertmanager")
    nginx: DemoNginx | None = None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        print(f"starting Triton (models ctr v1+v2, fraud v1+v2, chat v1) in {workdir / 'triton'} ...", flush=True)
        await asyncio.to_thread(triton.start)
        am_url = alertmanager.url if await asyncio.to_thread(alertmanager.start) else None
        edge = DemoNginx(workdir / "nginx", triton.http_url)
        nginx = edge if await asyncio.to_thread(edge.start) else None
        raw = demo_config(
            triton.http_url, triton.metrics_url, port, workdir, am_url, nginx.access_log if nginx else None, act=act
        )
        config_path = write_config(raw, workdir)
        service = Service(load_config(config_path))
        app = create_app(service)
        import uvicorn

        server = quiet_server(
            uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False, lifespan="on")
        )
        serve = asyncio.create_task(server.serve())
        while not server.started:
            if serve.done():
                await serve
                return 1
            await asyncio.sleep(0.05)
        tune_gc()
        base = f"http://127.0.0.1:{port}"
        traffic = Traffic(
            nginx.url if nginx else triton.http_url,
            sidecar_url=base,
            triton_direct_url=triton.http_url,
            repeat_per_s=REPEATS_PER_S if nginx else 0,
        )
        print(_banner(base, triton, am_url, config_path, nginx, act), flush=True)
        play = ScenarioRun(
            traffic,
            sidecar_url=base,
            alertmanager_url=am_url,
            ticker=LoopTicker(),
            out=lambda line: print(line, flush=True),
            promises=promises(act),
        )
        async with httpx.AsyncClient() as client:
            playing = asyncio.create_task(play.run(stop, client))
            if duration_s is not None:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=duration_s)
            else:
                await stop.wait()
            stop.set()
            await playing
        server.should_exit = True
        await serve
        print(
            f"traffic sent: {sum(traffic.stats.sent.values())} requests "
            f"({sum(traffic.stats.failed.values())} failed); streams: {traffic.stats.streams} "
            f"({traffic.stats.streams_failed} failed); repeated lookups: {traffic.stats.repeats} "
            f"({traffic.stats.repeat_hits} cache hits); events reported: {traffic.stats.events_posted}"
            + (f"; alert reads that failed: {play.watcher.polls_failed}" if play.watcher.polls_failed else ""),
            flush=True,
        )
    finally:
        if nginx is not None:
            nginx.stop()
        await asyncio.to_thread(alertmanager.stop)
        await asyncio.to_thread(triton.stop)
        print("stopped Triton and the sidecar" + (" (and nginx)" if nginx else ""), flush=True)
    return 0


def run_demo(
    port: int = 9500,
    duration_s: float | None = None,
    workdir: str | None = None,
    keep: bool = False,
    act: bool = False,
) -> int:
    """Run the demo; a temporary work directory is removed on exit unless ``keep`` (a given one never is).
    ``act``: the actions layer carries out what it plans (Triton in explicit model-control mode)."""
    wd = Path(workdir).resolve() if workdir else Path(tempfile.mkdtemp(prefix="sidecar-demo-"))
    wd.mkdir(parents=True, exist_ok=True)
    try:
        return asyncio.run(_run(port, duration_s, wd, act))
    finally:
        if workdir is None and not keep:
            shutil.rmtree(wd, ignore_errors=True)
            print(f"removed {wd} (--keep keeps it)", flush=True)
        else:
            print(f"kept {wd} (Triton's files, the sidecar's store and config)", flush=True)
