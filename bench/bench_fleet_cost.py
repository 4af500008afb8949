"""Cost of the fleet series on real engines: N simulated sidecars serving real fleet expositions (the fleet bins
and business counters of ``sidecar/checks/fleet/``, fed events between scrapes), scraped by a real Prometheus
that evaluates the generated fleet rules and remote-writes to a real VictoriaMetrics, where vmalert evaluates the
same rules. Reads the engines' own metrics at the end and prints them, per sidecar and extrapolated.

    .venv/bin/python bench/bench_fleet_cost.py [--sidecars 50] [--features 50] [--secs 600] [--scrape 15]

Simulated, not ``sidecar run`` processes: one process serves every exporter (a thread per port), each its own
FleetBins (20 bins per numeric feature, one reference file shared) and FleetBusiness (two checks), so the
exposition is the fleet part of a real sidecar's /metrics (its other families are not served). CPU figures are
each engine's own ``process_cpu_seconds_total`` over the run (CPU time, not wall: other jobs share the host).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from prometheus_client import CollectorRegistry, generate_latest

from sidecar.checks.business.config import BusinessCheckConfig
from sidecar.checks.drift.config import ReferenceConfig
from sidecar.checks.drift.references import Reference
from sidecar.checks.fleet.business import FleetBusiness
from sidecar.checks.fleet.check import FleetBins
from sidecar.checks.fleet.config import FleetConfig
from sidecar.checks.stats.core import Ecdf
from sidecar.clock import FakeClock
from sidecar.demo.tritonserver import free_port
from sidecar.fleet_rules import write
from sidecar.model import Batch, EventColumns

CHECKS = {
    "ctr_mean": BusinessCheckConfig(field="features.f0", aggregate="mean", threshold=10.0),
    "score_p95": BusinessCheckConfig(field="score", aggregate="quantile", quantile=0.95, threshold=10.0),
}


class _Refs:
    def __init__(self, features: int, rng: np.random.Generator) -> None:
        self.refs = {
            ("m", "*", f): Reference("numeric", 5000, 0, "bench", 0.0, Ecdf.from_values(rng.normal(size=5000)))
            for f in [f"f{i}" for i in range(features)] + ["_score"]
        }

    def spec_for(self, model: str) -> ReferenceConfig:
        return ReferenceConfig(mode="file", path="/refs/bench.csv")

    def frozen_references(self) -> dict[tuple[str, str, str], Reference]:
        return self.refs


class _Exporter:
    def __init__(self, refs: _Refs, features: int) -> None:
        self.registry = CollectorRegistry()
        cfg = FleetConfig(enabled=True, max_series=features + 10)
        self.bins = FleetBins(cfg, references=refs, registry=self.registry, clock=FakeClock())
        self.sums = FleetBusiness(cfg, checks=CHECKS, references=refs, registry=self.registry, clock=FakeClock())
        self.lock = threading.Lock()
        self.text = b""

    def feed(self, rng: np.random.Generator, n: int, features: int) -> None:
        cols = {f"f{i}": rng.normal(size=n) for i in range(features)}
        b = Batch("event_columns", "bench", (EventColumns("m", "1", np.zeros(n), cols, rng.normal(size=n)),))
        self.bins.observe_columns(b)
        self.sums.observe_columns(b)
        text = generate_latest(self.registry)
        with self.lock:
            self.text = text


def _serve(exp: _Exporter, port: int) -> ThreadingHTTPServer:
    class H(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            with exp.lock:
                body = exp.text
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:  # vmalert's notifications: taken and dropped
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            return None

    srv = ThreadingHTTPServer(("127.0.0.1", port), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def _scalar(base: str, q: str) -> float:
    r = httpx.get(f"{base}/api/v1/query", params={"query": q}, timeout=30).json()
    res = r["data"]["result"]
    return float(res[0]["value"][1]) if res else float("nan")


def _metric(text: str, name: str, match: str = "") -> float:
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name) and (line[len(name)] in " {") and match in line
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sidecars", type=int, default=50)
    ap.add_argument("--features", type=int, default=50)
    ap.add_argument("--secs", type=float, default=600.0)
    ap.add_argument("--scrape", type=int, default=15, help="scrape interval, s")
    ap.add_argument("--rate", type=float, default=20.0, help="events/s per sidecar")
    ap.add_argument("--no-rules", action="store_true", help="no rule file: ingestion alone (the baseline)")
    a = ap.parse_args()
    for b in ("prometheus", "victoria-metrics", "vmalert"):
        if shutil.which(b) is None:
            sys.exit(f"{b} is not installed (.ci/setup installs it)")
    rng = np.random.default_rng(3)
    refs = _Refs(a.features, rng)
    exporters = [_Exporter(refs, a.features) for _ in range(a.sidecars)]
    ports = [free_port() for _ in exporters]
    for e in exporters:
        e.feed(rng, int(a.rate * a.scrape), a.features)
    servers = [_serve(e, p) for e, p in zip(exporters, ports, strict=True)]
    size = len(exporters[0].text)
    lines = [line for line in exporters[0].text.decode().splitlines() if line and not line.startswith("#")]
    fleet_series = len(lines)
    one_feature = sum(1 for line in lines if 'feature="f1"' in line)
    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory(prefix="fleet-cost-") as d:
        tmp = Path(d)
        rules = write(tmp / "rules")
        prom, vm, vmalert_port = free_port(), free_port(), free_port()
        cfg = {
            "global": {"scrape_interval": f"{a.scrape}s", "evaluation_interval": "30s"},
            "rule_files": [] if a.no_rules else [str(rules)],
            "remote_write": [
                {
                    "url": f"http://127.0.0.1:{vm}/api/v1/write",
                    "write_relabel_configs": [{"source_labels": ["__name__"], "regex": ".*:.*", "action": "drop"}],
                }
            ],
            "scrape_configs": [
                {"job_name": "sidecar", "static_configs": [{"targets": [f"127.0.0.1:{p}" for p in ports]}]}
            ],
        }
        (tmp / "prometheus.yml").write_text(json.dumps(cfg))
        log = (tmp / "engines.log").open("wb")
        engines = (
            ["victoria-metrics", f"-storageDataPath={tmp / 'vm'}", f"-httpListenAddr=127.0.0.1:{vm}"],
            [
                "prometheus",
                f"--config.file={tmp / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{prom}",
            ],
            [
                "vmalert",
                f"-rule={rules}",
                f"-datasource.url=http://127.0.0.1:{vm}",
                f"-remoteWrite.url=http://127.0.0.1:{vm}",
                f"-httpListenAddr=127.0.0.1:{vmalert_port}",
                f"-notifier.url=http://127.0.0.1:{ports[0]}",  # vmalert needs one; an exporter answers 200
            ],
        )
        for args in engines[:2] if a.no_rules else engines:
            procs.append(subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT))
        try:
            start = time.monotonic()
            feeder_cpu = 0.0
            while time.monotonic() - start < a.secs:
                t0 = time.thread_time()
                for e in exporters:
                    e.feed(rng, int(a.rate * a.scrape), a.features)
                feeder_cpu += time.thread_time() - t0
                time.sleep(max(0.0, a.scrape - (time.monotonic() - start) % a.scrape))
            p = f"http://127.0.0.1:{prom}"
            samples = _scalar(p, "sum(scrape_samples_scraped)")
            pm = httpx.get(f"{p}/metrics", timeout=30).text
            vmm = httpx.get(f"http://127.0.0.1:{vm}/metrics", timeout=30).text
            am = "" if a.no_rules else httpx.get(f"http://127.0.0.1:{vmalert_port}/metrics", timeout=30).text
        finally:
            for proc in reversed(procs):  # vmalert, Prometheus (which flushes to VictoriaMetrics), then VM
                proc.terminate()
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            for s in servers:
                s.shutdown()
    groups = ("sidecar-fleet-drift", "sidecar-fleet-business")
    out = {
        "sidecars": a.sidecars,
        "features": a.features,
        "secs": a.secs,
        "scrape_secs": a.scrape,
        "fleet_series_per_sidecar": fleet_series,
        "series_of_one_numeric_feature": one_feature,
        "scrape_bytes_per_sidecar": size,
        "prometheus_head_series": _metric(pm, "prometheus_tsdb_head_series"),
        "samples_per_scrape_round": samples,
        "prometheus_cpu_secs": _metric(pm, "process_cpu_seconds_total"),
        "prometheus_rss_mib": round(_metric(pm, "process_resident_memory_bytes") / 2**20, 1),
        "prometheus_rule_group_last_duration_secs": {
            g: _metric(pm, "prometheus_rule_group_last_duration_seconds", f'{g}"') for g in groups
        },
        "prometheus_rule_group_iterations": {
            g: _metric(pm, "prometheus_rule_group_iterations_total", f'{g}"') for g in groups
        },
        "vm_rows_inserted": _metric(vmm, "vm_rows_inserted_total"),
        "vm_cpu_secs": _metric(vmm, "process_cpu_seconds_total"),
        "vm_rss_mib": round(_metric(vmm, "process_resident_memory_bytes") / 2**20, 1),
        "vmalert_cpu_secs": _metric(am, "process_cpu_seconds_total"),
        "vmalert_iteration_secs_mean": {
            g: _metric(am, "vmalert_iteration_duration_seconds_sum", f'"{g}"')
            / max(1.0, _metric(am, "vmalert_iteration_duration_seconds_count", f'"{g}"'))
            for g in groups
        },
        "exporters_cpu_secs": round(feeder_cpu, 1),
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
