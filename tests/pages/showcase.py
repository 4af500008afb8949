"""A sidecar with something on every page, for looking at the pages in a browser and taking the screenshots
in docs/screenshots/ (``python tests/pages/showcase.py --shots docs/screenshots``; without ``--shots`` it
serves until interrupted). Upstreams (Triton, Alertmanager) are answered in-process; nothing leaves the host.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import uvicorn
from prometheus_client import CollectorRegistry, Gauge

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from chromium import chromium
from test_status_pages import AM, TRITON, Upstreams
from test_trace_views import MODEL, _ev
from waiting import wait_until

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.demo.tritonserver import free_port
from sidecar.model import Batch, Change, Event, GpuProcess, Span
from sidecar.processors.gpu_memory import GpuMemoryByModel
from sidecar.records import from_span
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.alerting import build as alerting
from sidecar.wiring.business import build as business
from sidecar.wiring.pages import factories
from sidecar.wiring.traces import build as traces
from sidecar.wiring.triton import build as triton

MS = 1_000_000
FAILED = "0af7651916cd43dd8448eb211c80319c"
MAYBE = "1af7651916cd43dd8448eb211c80319c"
PY_ERROR = "8af7651916cd43dd8448eb211c80319c"
SLOW = "9af7651916cd43dd8448eb211c80319c"  # a 320 ms request, the one the p99 latency alert links
# A Python backend's error as a client JSON-encoded it twice (line breaks as backslash + n), with its traceback.
PY_MESSAGE = (
    "Failed to process the request(s) for model 'ctr_0_0', message: ValueError: clicks_7d is NaN\\n\\nAt:\\n"
    "  /models/ctr/2/model.py(57): execute\\n  /opt/tritonserver/backends/python/triton_python_backend_utils.py(112)"
    ": run\\n"
)


def _trace(
    tid: str, t0: int, total_ms: float, *, error: str = "", version: str = "2", model_error: str = ""
) -> list[Span]:
    def ev(name: str, ms: float):  # type: ignore[no-untyped-def]
        e = _ev(name, ms)
        return type(e)(e.name, t0 + int(ms * MS))

    end = total_ms
    ca, cb = end * 0.3, end - 14  # compute inside the model span, its events in order
    return [
        Span(
            tid,
            "a000000000000001",
            None,
            "POST /v1/recommend",
            t0,
            t0 + int(end * MS),
            service_name="gateway",
            attributes={"http.route": "/v1/recommend", "http.status_code": 500 if error else 200},
        ),
        Span(
            tid,
            "a000000000000002",
            "a000000000000001",
            "ctr",
            t0 + 2 * MS,
            t0 + int((end - 12) * MS),
            service_name="triton-inference-server",
            status_code=2 if model_error else 0,
            status_message=model_error,
            attributes={**MODEL, "triton.model_version": version},
            events=(ev("REQUEST_START", 2), ev("QUEUE_START", 3), ev("REQUEST_END", end - 12)),
        ),
        Span(
            tid,
            "a000000000000003",
            "a000000000000002",
            "compute",
            t0 + int(ca * MS),
            t0 + int(cb * MS),
            service_name="triton-inference-server",
            events=(
                ev("COMPUTE_START", ca),
                ev("COMPUTE_INPUT_END", ca + (cb - ca) * 0.1),
                ev("COMPUTE_OUTPUT_START", ca + (cb - ca) * 0.8),
                ev("COMPUTE_END", cb),
            ),
        ),
        Span(
            tid,
            "a000000000000004",
            "a000000000000001",
            "feature-store lookup",
            t0 + int((end - 11) * MS),
            t0 + int((end - 1) * MS),
            service_name="gateway",
            status_code=2 if error else 0,
            status_message=error,
            attributes={"db.system": "redis", "db.operation": "HMGET"},
        ),
    ]


BUSINESS = {
    # CTR of ctr v2 down (a click every 24 requests, then every 100 after the feature pipeline change).
    "ctr_mean_down": {
        "field": "fields.click",
        "display_name": "CTR mean",
        "model": "ctr",
        "group_by": ["model", "version"],
        "direction": "down",
        "threshold": 0.03,
        "window_secs": 300,
        "for_secs": 60,
        "severity": "high",
    },
    # p99 latency above 250 ms: holds from the third block, not yet the 10 minutes it needs (pending).
    "latency_p99_high": {
        "field": "fields.latency_ms",
        "aggregate": "quantile",
        "quantile": 0.99,
        "display_name": "p99 latency (ms)",
        "model": "ctr",
        "group_by": ["model", "version"],
        "threshold": 250,
        "window_secs": 300,
        "for_secs": 600,
    },
    # fraud v3's fraud rate above 2% in the second block, diluted below it by the fourth (resolved).
    "fraud_rate_high": {
        "field": "fields.fraud",
        "display_name": "fraud rate",
        "model": "fraud",
        "group_by": ["model", "version"],
        "threshold": 0.02,
        "window_secs": 300,
    },
}


BLOCKS = ((1000, 0.0), (400, 0.4), (400, 0.4), (400, 0.0))  # (events, clicks_7d shift) per 60 s block


def _ctr_events(rng: np.random.Generator, block: int, n: int, shift: float, ts: float) -> list[Event]:
    """ctr v2's events of one block: the features the drift check tests and the fields the business checks
    aggregate. The first block is the pinned reference; the later ones drift in clicks_7d (not in the last)."""
    clicks = rng.gamma(2.0, 3.0, n) * (1.0 + shift)
    age, u = rng.normal(38, 11, n), rng.random(n)
    slow = 0 if block < 2 else 30  # every 30th request 320 ms from the third block
    out = []
    for i, (c, a, uu) in enumerate(zip(clicks, age, u, strict=True)):
        country = "br" if shift and uu < 0.2 else ("de" if uu < 0.6 else "fr")
        click = 1.0 if i % (24 if block == 0 else 100) == 0 else 0.0
        latency = 320.0 if slow and i % slow == 0 else 40.0 + 5.0 * float(np.sin(i))
        out.append(
            Event(
                "ctr",
                "2",
                ts,
                features={"clicks_7d": float(c), "age": float(a), "country": country},
                fields={"click": click, "latency_ms": latency},
                # The requests the alerts link: a failed one with no click (CTR), the slowest (p99 latency).
                trace_id=FAILED if (block, i) == (1, 1) else SLOW if (block, i) == (2, slow) else None,
            )
        )
    return out


def _fraud_events(block: int, ts: float) -> list[Event]:
    n, frauds = {1: (100, 5), 3: (400, 0)}.get(block, (0, 0))
    return [Event("fraud", "3", ts, fields={"fraud": 1.0 if i < frauds else 0.0}) for i in range(n)]


def _total(registry: CollectorRegistry, name: str) -> float:
    return sum(s.value for m in registry.collect() for s in m.samples if s.name == name)


def _upstreams_seen(registry: CollectorRegistry) -> bool:
    """Triton scraped once and Alertmanager tried once (sent to, or failed), whatever the outcome."""
    tried = _total(registry, "sidecar_alertmanager_notices_sent_total") + _total(
        registry, "sidecar_alertmanager_request_failures_total"
    )
    return _total(registry, "sidecar_triton_scrapes_total") > 0 and tried > 0


def build() -> Service:
    """The sidecar during a drift, on a fake clock: a pinned reference of ctr v2, a feature pipeline change,
    two drifting 60 s blocks and a quiet one, each evaluated at its end by the real drift and business checks."""
    cfg = parse_config(
        {
            "triton": {"enabled": True, "metrics_url": TRITON, "interval_secs": 2},
            "checks": {
                "eval_interval_secs": 3600,  # evaluated here, block by block
                "drift": {
                    "enabled": True,
                    "method": "multiscale",
                    "eval_threads": 1,
                    "min_samples": 100,
                    "reference": {"mode": "pinned", "pinned_events": 1000},
                },
                "business": {"enabled": True, "checks": BUSINESS},
            },
            "alerting": {
                "enabled": True,
                "alertmanager": {"urls": [AM]},
                # Records of the failed and slow requests (none sampled), for /audit and the waterfall's link.
                "audit": {"requests": {"enabled": True, "sample_rate": 0.0, "slow_ms": 50}},
            },
            "traces": {"enabled": True, "slow_threshold_ms": 50},
        }
    )
    t0 = time.time() - 900
    t0 -= t0 % 1800  # a boundary of every drift scale (60, 300, 1800 s)
    clock = FakeClock(t0)
    drift_f, pages_f = factories()
    svc = Service(
        cfg,
        clock=clock,
        store=Store(":memory:"),
        registry=CollectorRegistry(),
        http=httpx.AsyncClient(transport=httpx.MockTransport(Upstreams())),
        factories=[alerting, triton, traces, business, drift_f, pages_f],
    )
    end = t0 + 60 * len(BLOCKS) + 15  # the moment the pages show
    _requests(svc, int((end - 300) * 1e9))
    _gpus(svc)
    changes = svc.component("changes")
    changes.record(
        Change(
            what="ctr v2 loaded",
            who="triton",
            at=t0 - 3600,
            model="ctr",
            version="2",
            link=None,
            source="triton_repository",
            id="",
        )
    )
    changes.record(
        Change(
            what="fraud v3 loaded",
            who="triton",
            at=t0 - 1800,
            model="fraud",
            version="3",
            link=None,
            source="triton_repository",
            id="",
        )
    )
    rng = np.random.default_rng(3)
    for block, (n, shift) in enumerate(BLOCKS):
        clock.advance(t0 + 60 * block + 1 - clock.now())
        evs = [*_ctr_events(rng, block, n, shift, clock.now()), *_fraud_events(block, clock.now())]
        svc.bus.publish(Batch(kind="events", source="showcase", items=tuple(evs)))
        if block == 0:
            changes.record(
                Change(
                    what="feature pipeline v7 rolled out",
                    who="ana",
                    at=t0 + 30,
                    model="ctr",
                    version="2",
                    link=None,
                    source="api",
                    id="",
                )
            )
        clock.advance(t0 + 60 * (block + 1) - clock.now())
        svc.evaluate_once(clock.now())
    clock.advance(end - clock.now())
    return svc


def _requests(svc: Service, t0: int) -> None:
    """Traces (failed, possibly failed, slow, a Python backend's error) and their per-request records."""
    hub = svc.component("traces")

    def ingest(spans: list[Span]) -> None:  # through the bus, as a span source does: the store and the records
        svc.bus.publish(Batch(kind="spans", source="showcase", items=tuple(from_span(s) for s in spans)))

    ingest(_trace(FAILED, t0, 120, error="feature store timed out after 10 ms"))
    ingest(_trace(MAYBE, t0 + 40 * 10**9, 35))
    for i in range(6):
        ingest(_trace(f"{i + 2:x}af7651916cd43dd8448eb211c80319c", t0 + (60 + i) * 10**9, 20 + 12 * i))
    ingest(_trace(PY_ERROR, t0 + 80 * 10**9, 30, model_error=PY_MESSAGE))
    ingest(_trace(SLOW, t0 + 120 * 10**9, 320))
    svc.component("request_records").flush()  # written now, not after the join window
    hub.store.mark_failures("ctr", "2", t0 + 30 * 10**9, t0 + 62 * 10**9, 1)


def _gpus(svc: Service) -> None:
    gl = ["gpu", "uuid", "name"]
    for n, v in (
        ("up", 1),
        ("utilization_ratio", 0.63),
        ("memory_used_bytes", 37 * 2**30),
        ("memory_total_bytes", 141 * 2**30),
    ):
        Gauge(f"sidecar_gpu_{n}", n, gl, registry=svc.registry).labels("0", "GPU-5d1c", "NVIDIA H200").set(v)
    mem = GpuMemoryByModel(svc.registry)
    stub = "/opt/tritonserver/backends/python/triton_python_backend_stub"
    mem.observe_processes(
        [
            GpuProcess("GPU-5d1c", pid, mib * 2**20, (stub, f"/models/{m}/{v}/model.py"))
            for pid, m, v, mib in ((101, "ctr", "2", 1843), (102, "ctr", "1", 1790), (103, "fraud", "3", 612))
        ]
    )


# (screenshot name, path, widths): the screenshots docs/pages.md shows; the 390 px ones are named "<name>-390".
SHOTS = (
    ("status", "/", (1400,)),
    ("alerts", "/alerts", (1400,)),
    ("changes", "/changes", (1400,)),
    ("audit", "/audit", (1400,)),
    ("audit", f"/audit?trace_id={FAILED}", (390,)),
    ("traces", "/traces", (1400, 390)),
    ("trace-failed", f"/traces/{FAILED}", (1400,)),
    ("trace-possibly-failed", f"/traces/{MAYBE}", (1400,)),
)
# Every page, for looking at them all in one state (``--look DIR``).
EVERY = (
    ("status", "/"),
    ("alerts", "/alerts"),
    ("drift", "/drift"),
    ("drift-detail", "/drift/ctr/2/clicks_7d"),
    ("drift-detail-country", "/drift/ctr/2/country"),
    ("changes", "/changes"),
    ("audit", "/audit"),
    ("traces", "/traces"),
    ("waterfall", f"/traces/{FAILED}"),
    ("runbooks", "/runbooks/"),
    ("runbook", "/runbooks/FeatureDrifting.md"),
    ("docs", "/docs"),
)
OVER = "document.documentElement.scrollWidth - document.documentElement.clientWidth"


def shoot(base: str, shots: list[tuple[str, str, int]], out: Path) -> dict[str, int]:
    """Full-page screenshots in headless Chromium; returns how far each page is wider than its window."""
    over: dict[str, int] = {}
    with chromium() as browser:
        for name, path, width in shots:
            page = browser.new_page(viewport={"width": width, "height": 900})
            page.goto(base + path, wait_until="networkidle")
            over[f"{name} at {width} px"] = page.evaluate(OVER)
            page.screenshot(path=str(out / f"{name}.png"), full_page=True)
            page.close()
    return over


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shots", type=Path, help="write the screenshots of docs/pages.md here and exit")
    ap.add_argument("--look", type=Path, help="write every page at 1400 and 390 px here and exit")
    args = ap.parse_args()
    svc = build()
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(svc), host="127.0.0.1", port=port, log_level="warning"))
    th = threading.Thread(target=server.run, daemon=True)
    th.start()
    assert wait_until(lambda: server.started, 30), "the sidecar did not start"
    url = f"http://127.0.0.1:{port}"
    print(url, flush=True)
    if args.shots is None and args.look is None:
        th.join()
        return
    # One Triton scrape and one Alertmanager try happen in the background: the pages show what they left.
    assert wait_until(lambda: _upstreams_seen(svc.registry), 30), "no Triton scrape or Alertmanager try yet"
    if args.shots is not None:
        args.shots.mkdir(parents=True, exist_ok=True)
        todo = [(n if w == 1400 else f"{n}-{w}", p, w) for n, p, ws in SHOTS for w in ws]
        over = shoot(url, todo, args.shots)
    else:
        args.look.mkdir(parents=True, exist_ok=True)
        over = shoot(url, [(f"{n}-{w}", p, w) for n, p in EVERY for w in (1400, 390)], args.look)
    for name, px in over.items():
        print(f"{name}: {px} px wider than the window")
    server.should_exit = True
    th.join(10)


if __name__ == "__main__":
    main()
