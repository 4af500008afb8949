"""Soak: the demo's traffic against a real Triton and a separate sidecar process for a long time, printing the
sidecar's health once a minute from its own /metrics.

What runs (the demo's own pieces, ``sidecar/demo/``): a real Triton 2.51 serving the demo repository and sending
OTLP spans of every request to the sidecar (``--trace-config rate=1``); the demo's traffic (``Traffic``: ~20
requests/s, events with features and scores to /v1/events, the caller's spans to /v1/traces, the scenario's
change to /v1/changes) so drift is flagged, the CTR business alert fires and resolves, audit rows are written;
Debian's Alertmanager when installed. The scenario is replayed every ``--cycle-minutes`` (a fresh seed each
time), so a 30-minute soak goes through drift, alert and resolution more than once.

The sidecar is ``python -m sidecar.cli run --config`` in its own process, so its RSS and open files are its own.
Every minute one line: RSS, open fds, queue fill (exporter queues + OTLP forward queue + Alertmanager outbox +
in-flight HTTP requests), drops (every ``*_dropped``/``*_refused``/``*_rejected`` counter of the sidecar's,
summed), evaluation lag, alerts firing, requests sent. At the end: RSS at the end against RSS after warm-up
(target: within 10%), and which drop counters moved.

    .venv/bin/python bench/soak.py [--minutes 30] [--warmup-minutes 6] [--cycle-minutes 12]

``--events RATE`` runs the events-heavy soak instead (``bench/soak_events.py``): a sidecar alone taking RATE
prediction events/s, its RSS sampled every ``--sample-secs`` and held to within 10% after warm-up.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

QUEUES = ("sidecar_export_queue_items", "sidecar_alertmanager_outbox_notices", "sidecar_http_inflight_requests")
DROP_RE = re.compile(r"^(sidecar_\w*(?:dropped|refused|rejected)\w*_total)(\{[^}]*\})? (\S+)$", re.MULTILINE)


def _sum(text: str, name: str) -> float | None:
    vals = [float(m.group(1)) for m in re.finditer(rf"^{name}(?:\{{[^}}]*\}})? (\S+)$", text, re.MULTILINE)]
    return sum(vals) if vals else None


def _drops(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for m in DROP_RE.finditer(text):
        key = m.group(1) + (m.group(2) or "")
        out[key] = out.get(key, 0.0) + float(m.group(3))
    return out


def _firing(base: str) -> int:
    with contextlib.suppress(httpx.HTTPError, ValueError):
        return sum(1 for a in httpx.get(f"{base}/v1/alerts", timeout=5).json() if a.get("state") == "firing")
    return -1


async def _soak(args: argparse.Namespace, workdir: Path) -> int:
    from sidecar.demo.alertmanager import DemoAlertmanager
    from sidecar.demo.run import demo_config
    from sidecar.demo.scenario import DemoScenario
    from sidecar.demo.traffic import Traffic
    from sidecar.demo.tritonserver import TritonServer, demo_model_repository, free_port

    port = free_port()
    trace_args = [
        "--trace-config",
        "mode=opentelemetry",
        "--trace-config",
        f"opentelemetry,url=http://127.0.0.1:{port}/v1/traces",
        "--trace-config",
        "rate=1",
        "--trace-config",
        "level=TIMESTAMPS",
    ]
    triton = TritonServer(demo_model_repository(), workdir / "triton", extra_args=trace_args)
    am = DemoAlertmanager(workdir / "alertmanager")
    sidecar: subprocess.Popen[bytes] | None = None
    base = f"http://127.0.0.1:{port}"
    try:
        await asyncio.to_thread(triton.start)
        am_url = am.url if await asyncio.to_thread(am.start) else None
        cfg = demo_config(triton.http_url, triton.metrics_url, port, workdir, am_url)
        cfg["gpu"] = {"enabled": False}
        cfg_path = workdir / "sidecar.yaml"
        cfg_path.write_text(yaml.safe_dump(cfg))
        log = (workdir / "sidecar.log").open("ab")
        sidecar = subprocess.Popen(
            [sys.executable, "-m", "sidecar.cli", "run", "--config", str(cfg_path)],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline or sidecar.poll() is not None:
                print("sidecar did not start; see", workdir / "sidecar.log")
                return 1
            await asyncio.sleep(0.2)
        print(
            f"soak: {args.minutes:g} min, warm-up {args.warmup_minutes:g} min, scenario replayed every "
            f"{args.cycle_minutes:g} min; Triton {triton.http_url} (OTLP rate=1 to the sidecar); sidecar pid "
            f"{sidecar.pid} at {base}; Alertmanager {am_url or 'not installed'}; workdir {workdir}",
            flush=True,
        )
        print(
            f"{'min':>4} {'RSS MiB':>8} {'fds':>5} {'queued':>7} {'drops':>7} {'lag s':>6} {'firing':>6} {'sent':>7}",
            flush=True,
        )

        stop_all = asyncio.Event()
        sent = [0]  # requests of finished cycles
        current: list[Traffic] = []

        async def traffic_cycles() -> None:
            cycle = 0
            while not stop_all.is_set():
                stop = asyncio.Event()
                traffic = Traffic(triton.http_url, sidecar_url=base, scenario=DemoScenario(seed=7 + cycle))
                current[:] = [traffic]
                task = asyncio.create_task(traffic.run(stop))
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop_all.wait(), timeout=args.cycle_minutes * 60)
                stop.set()
                await task
                sent[0] += sum(traffic.stats.sent.values())
                current.clear()
                cycle += 1

        traffic_task = asyncio.create_task(traffic_cycles())
        t0 = time.monotonic()
        rows: list[tuple[float, float]] = []
        first_drops: dict[str, float] | None = None
        last_drops: dict[str, float] = {}
        minute = 0
        while minute < args.minutes:
            minute += 1
            await asyncio.sleep(max(0.0, t0 + minute * 60 - time.monotonic()))
            if sidecar.poll() is not None:
                print(f"sidecar exited with {sidecar.returncode}; see {workdir / 'sidecar.log'}")
                return 1
            text = (await asyncio.to_thread(httpx.get, f"{base}/metrics", timeout=10)).text
            rss = (_sum(text, "process_resident_memory_bytes") or 0) / 2**20
            fds = _sum(text, "process_open_fds") or 0
            queued = sum(_sum(text, q) or 0 for q in QUEUES)
            drops = _drops(text)
            if first_drops is None:
                first_drops = drops
            last_drops = drops
            lag = _sum(text, "sidecar_check_evaluation_lag_seconds") or 0
            firing = await asyncio.to_thread(_firing, base)
            rows.append((minute, rss))
            total = sent[0] + sum(sum(t.stats.sent.values()) for t in current)
            print(
                f"{minute:>4} {rss:>8.1f} {fds:>5.0f} {queued:>7.0f} {sum(drops.values()):>7.0f} {lag:>6.2f} "
                f"{firing:>6} {total:>7}",
                flush=True,
            )
        stop_all.set()
        await traffic_task
        warm = next((r for m, r in rows if m >= args.warmup_minutes), rows[0][1])
        end = rows[-1][1]
        change = (end - warm) / warm
        print(
            f"RSS after warm-up (minute {max(1, int(args.warmup_minutes))}): {warm:.1f} MiB; at the end: "
            f"{end:.1f} MiB; change {change:+.1%} -> {'OK' if abs(change) <= 0.10 else 'OVER'} (target within 10%)"
        )
        moved = {k: v for k, v in last_drops.items() if v}
        print("drop counters that are not zero:", ", ".join(f"{k}={v:.0f}" for k, v in sorted(moved.items())) or "none")
        print(f"requests sent: {sent[0]}")
        return 0 if abs(change) <= 0.10 else 2
    finally:
        if sidecar is not None and sidecar.poll() is None:
            sidecar.terminate()
            try:
                sidecar.wait(15)
            except subprocess.TimeoutExpired:
                sidecar.kill()
        await asyncio.to_thread(am.stop)
        await asyncio.to_thread(triton.stop)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=30.0, help="how long to soak (default 30)")
    # The trace store holds traces.max_traces (5000) traces: at the demo's ~20 requests/s it is full after about
    # 4 minutes, and RSS grows until then by design; the baseline must come after that.
    ap.add_argument("--warmup-minutes", type=float, default=6.0, help="RSS baseline taken after this (default 6)")
    ap.add_argument("--cycle-minutes", type=float, default=12.0, help="replay the demo scenario this often")
    ap.add_argument("--workdir", default=None)
    ap.add_argument(
        "--events",
        type=float,
        default=0.0,
        metavar="RATE",
        help="events-heavy mode instead: RATE prediction events/s to a sidecar alone (bench/soak_events.py)",
    )
    ap.add_argument("--sample-secs", type=float, default=60.0, help="events mode: RSS sampled this often")
    ap.add_argument("--senders", type=int, default=4, help="events mode: sending threads")
    args = ap.parse_args()
    wd = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="sidecar-soak-"))
    wd.mkdir(parents=True, exist_ok=True)
    if args.events > 0:
        from soak_events import run as soak_events  # bench/ is this script's folder, first on sys.path

        from sidecar.demo.tritonserver import free_port

        return soak_events(args, wd, free_port())
    return asyncio.run(_soak(args, wd))


if __name__ == "__main__":
    sys.exit(main())
