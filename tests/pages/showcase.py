"""A sidecar with something on every page, for looking at the pages in a browser and taking the screenshots
in docs/screenshots/ (``python tests/pages/showcase.py --shots docs/screenshots``; without ``--shots`` it
serves until interrupted). Upstreams (Triton, Alertmanager) are answered in-process; nothing leaves the host.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import uvicorn
from prometheus_client import CollectorRegistry, Gauge

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_status_pages import AM, TRITON, Script, Upstreams, _f
from test_trace_views import MODEL, _ev

from sidecar.app import create_app
from sidecar.config import parse_config
from sidecar.demo.tritonserver import free_port
from sidecar.model import Batch, Change, Finding, GpuProcess, Span
from sidecar.processors.gpu_memory import GpuMemoryByModel
from sidecar.records import from_span
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.alerting import build as alerting
from sidecar.wiring.pages import build as pages
from sidecar.wiring.traces import build as traces
from sidecar.wiring.triton import build as triton

MS = 1_000_000
FAILED = "0af7651916cd43dd8448eb211c80319c"
MAYBE = "1af7651916cd43dd8448eb211c80319c"
PY_ERROR = "8af7651916cd43dd8448eb211c80319c"
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


def build() -> Service:
    cfg = parse_config(
        {
            "triton": {"enabled": True, "metrics_url": TRITON, "interval_secs": 2},
            "alerting": {
                "enabled": True,
                "alertmanager": {"urls": [AM]},
                "audit": {"requests": {"enabled": True, "sample_rate": 0.0, "slow_ms": 50}},
            },
            "traces": {"enabled": True, "slow_threshold_ms": 50},
            # Records of the failed and slow requests (none sampled), for /audit and the waterfall's link.
        }
    )
    script = Script()
    svc = Service(
        cfg,
        store=Store(":memory:"),
        registry=CollectorRegistry(),
        http=httpx.AsyncClient(transport=httpx.MockTransport(Upstreams())),
        factories=[alerting, triton, traces, pages, lambda ctx: [script]],
    )
    now = svc.clock.now()
    t0 = int((now - 300) * 1e9)
    hub = svc.component("traces")

    def ingest(spans: list[Span]) -> None:  # through the bus, as a span source does: the store and the records
        svc.bus.publish(Batch(kind="spans", source="showcase", items=tuple(from_span(s) for s in spans)))

    ingest(_trace(FAILED, t0, 120, error="feature store timed out after 10 ms"))
    ingest(_trace(MAYBE, t0 + 40 * 10**9, 35))
    for i in range(6):
        ingest(_trace(f"{i + 2:x}af7651916cd43dd8448eb211c80319c", t0 + (60 + i) * 10**9, 20 + 12 * i))
    ingest(_trace(PY_ERROR, t0 + 80 * 10**9, 30, model_error=PY_MESSAGE))
    svc.component("request_records").flush()  # written now, not after the join window
    hub.store.mark_failures("ctr", "2", t0 + 30 * 10**9, t0 + 62 * 10**9, 1)
    lab = ["model", "version", "feature", "test"]
    g = {n: Gauge(f"sidecar_drift_{n}", n, lab, registry=svc.registry) for n in ("drifting", "p_value", "effect_size")}
    samples = Gauge("sidecar_drift_samples", "n", ["model", "version", "feature", "window"], registry=svc.registry)
    missing = Gauge(
        "sidecar_drift_missing_ratio", "m", ["model", "version", "feature", "window"], registry=svc.registry
    )
    for feat, on, p, eff in (
        ("clicks_7d", 1, 2e-6, 0.31),
        ("income", 1, 3e-4, 0.12),
        ("age", 0, 0.41, 0.02),
        ("country", 0, 0.77, 0.01),
    ):
        for n, v in (("drifting", on), ("p_value", p), ("effect_size", eff)):
            g[n].labels("ctr", "2", feat, "ks" if feat != "country" else "chi2").set(v)
        for w, n_, miss in (("current", 4000, 0.002), ("reference", 5000, 0.001)):
            samples.labels("ctr", "2", feat, w).set(n_)
            missing.labels("ctr", "2", feat, w).set(miss)
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
    changes = svc.component("changes")
    changes.record(
        Change(
            what="feature pipeline v7 rolled out",
            who="ana",
            at=now - 900,
            model="ctr",
            version="2",
            link=None,
            source="api",
            id="",
        )
    )
    changes.record(
        Change(
            what="ctr v2 loaded",
            who="triton",
            at=now - 3600,
            model="ctr",
            version="2",
            link=None,
            source="triton_repository",
            id="",
        )
    )
    changes.record(Change(what="fraud v2 loaded", who="triton", at=now - 1800, model="fraud", version="2"))

    def drift(feature: str, test: str, active: bool = True) -> Finding:
        labels = {"model": "fraud", "version": "2", "feature": feature, "test": test}
        return Finding(
            check="drift", kind="drift", active=active, severity="warning", labels=labels, value=0.31, threshold=0.1
        )

    script.findings = [
        _f("ctr_mean", True, trace=FAILED),
        _f("latency_p99", True, for_secs=600),
        _f("fraud_rate", True),
        drift("amount", "ks"),
        drift("merchant", "chi2"),
    ]
    svc.evaluate_once(now - 240)
    script.findings = [
        _f("ctr_mean", True, trace=FAILED),
        _f("latency_p99", True, for_secs=600),
        _f("fraud_rate", False),
        drift("amount", "ks"),
        drift("merchant", "chi2", active=False),
    ]
    svc.evaluate_once(now - 60)
    return svc


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shots", type=Path, help="write screenshots here and exit")
    args = ap.parse_args()
    svc = build()  # the drift screenshots come from test_drift_in_chromium.py (a real drift check)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(svc), host="127.0.0.1", port=port, log_level="warning"))
    th = threading.Thread(target=server.run, daemon=True)
    th.start()
    while not server.started:
        time.sleep(0.05)
    url = f"http://127.0.0.1:{port}"
    print(url, flush=True)
    if args.shots is None:
        th.join()
        return
    args.shots.mkdir(parents=True, exist_ok=True)
    time.sleep(3)  # one Triton scrape and one Alertmanager try happen in the background
    for name, path, size in (
        ("status", "/", "1400,900"),
        ("alerts", "/alerts", "1400,1000"),
        ("traces", "/traces", "1400,700"),
        ("changes", "/changes", "1400,500"),
        ("audit", "/audit", "1400,1250"),
        ("trace-failed", f"/traces/{FAILED}", "1400,1300"),
        ("trace-possibly-failed", f"/traces/{MAYBE}", "1400,700"),
        ("traces-390", "/traces", "390,1250"),
        ("audit-390", f"/audit?trace_id={FAILED}", "390,700"),
    ):
        subprocess.run(
            [
                "chromium",
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                f"--screenshot={args.shots / (name + '.png')}",
                f"--window-size={size}",
                url + path,
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
    server.should_exit = True
    th.join(10)


if __name__ == "__main__":
    main()
