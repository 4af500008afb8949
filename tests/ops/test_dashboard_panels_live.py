"""No dead panels: a real Prometheus scrapes a running sidecar fed by a real Triton, and every panel query of every
dashboard runs through Prometheus' HTTP API. An LLM server is played by a local HTTP server answering with a vLLM
exposition captured from vLLM (tests/data/servers/vllm-current.prom, its counters multiplied by the scrape number
so rates move); the sidecar scrapes it through its profile, Prometheus scrapes it directly (the histogram rules),
and the goodput check is fed LLM events.

Panels whose data the test can produce on a CPU-only machine (``LIVE_NEEDS``) must return data; the rest (GPU,
DCGM, business checks, alert delivery, Triton's response cache, process memory) must at least be valid PromQL
(the query API answers success). docs/dashboards.md lists the latter as untested with data.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from module_http import close_module_http, module_http  # noqa: F401 (an autouse fixture)
from prometheus_client import CollectorRegistry
from waiting import wait_until

from dashboards.generate import panel_infos
from sidecar.app import create_app
from sidecar.config import parse_config
from sidecar.demo.tritonserver import TritonServer, demo_model_repository, free_port
from sidecar.service import Service

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD_JSON = ROOT / "dashboards" / "json"
RULES = sorted((ROOT / "alerts").glob("*.rules.yml"))
PROMETHEUS = "/usr/bin/prometheus"

# What this test produces: Triton traffic with failures, OTLP spans, drift events, a refused push, edge log lines.
LIVE_NEEDS = {"triton", "failures", "traces", "self", "refusals", "checks", "drift", "llm", "goodput", "edge"}
VLLM_FIXTURE = ROOT / "tests" / "data" / "servers" / "vllm-current.prom"
_COUNTER_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*(?:_total|_bucket|_count|_sum))(\{[^}]*\})? (\S+)$")
RATE_INTERVAL = "10s"

pytestmark = [pytest.mark.triton, pytest.mark.prometheus]


def _poll(cond: Callable[[], bool], secs: float) -> bool:
    # Prometheus not up yet, or no sample yet, count as "not yet".
    return bool(wait_until(cond, secs, interval_s=0.2, ignore=(httpx.HTTPError, LookupError, ValueError)))


def _wait(cond: Callable[[], bool], secs: float, what: str) -> None:
    if not _poll(cond, secs):
        raise AssertionError(f"timed out after {secs}s waiting for {what}")


class _VllmExposition:
    """Serves the vLLM fixture on a loopback port, every counter, bucket, count and sum multiplied by the number
    of scrapes so far (gauges as captured): a server whose counters grow at a steady rate."""

    def __init__(self) -> None:
        lines = VLLM_FIXTURE.read_text().splitlines()
        hits = [0]
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with lock:
                    hits[0] += 1
                    n = hits[0]
                out = []
                for line in lines:
                    m = _COUNTER_LINE.match(line)
                    out.append(f"{m.group(1)}{m.group(2) or ''} {float(m.group(3)) * n!r}" if m else line)
                body = ("\n".join(out) + "\n").encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/metrics"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _sidecar_config(triton: TritonServer, port: int, store: Path, vllm_url: str) -> dict[str, Any]:
    return {
        "server": {"host": "127.0.0.1", "port": port, "max_body_bytes": 4 * 1024 * 1024},
        "store": {"path": str(store)},
        "triton": {"metrics_url": triton.metrics_url, "http_url": triton.http_url, "interval_secs": 1.0},
        "traces": {"enabled": True},
        "servers": [{"name": "vllm", "url": vllm_url, "interval_secs": 1.0}],
        # The edge dashboard's panels: lines pushed to POST /v1/edge by _EdgeTraffic (two route groups, two
        # nodes, hits and misses with origin times); the SLA check decides on its first request.
        "edge": {
            "enabled": True,
            "series": {
                "route_groups": [
                    {"name": "weights", "prefixes": ["/model/weights/"]},
                    {"name": "infer", "prefixes": ["/v2/"]},
                ]
            },
            "checks": {"sla": {"min_requests": 1}, "tail": {"min_requests": 100}},
        },
        "checks": {
            "eval_interval_secs": 1.0,
            "goodput": {"enabled": True, "slos": {"chat": {"ttft_ms": 500, "inter_token_ms": 50}}},
            # The window method: its one 60 s window and sustained_secs 0 flag the posted shift within seconds.
            "drift": {
                "enabled": True,
                "method": "window",
                "window_secs": 60,
                "bucket_count": 2,
                "min_samples": 20,
                "sustained_secs": 0,
                "reference": {"mode": "pinned", "pinned_events": 60},
                "models": {"ctr": {"features": {"age": "numeric", "clicks_7d": "numeric", "country": "categorical"}}},
            },
        },
    }


class _Traffic:
    """KServe v2 requests to the real Triton in a thread: ctr v1/v2, and fraud with ~15% failing inputs."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.stop = threading.Event()
        self.codes: dict[int, int] = {}
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        rng = random.Random(7)
        with httpx.Client(timeout=10) as c:
            while not self.stop.is_set():
                r = rng.random()
                if r < 0.35:
                    model, version, x = "ctr", 1, [rng.gauss(1, 1) for _ in range(4)]
                elif r < 0.7:
                    model, version, x = "ctr", 2, [rng.gauss(1, 1) for _ in range(4)]
                else:
                    amount = rng.uniform(1, 500) * (-1 if rng.random() < 0.15 else 1)
                    model, version, x = "fraud", 1, [amount, rng.random(), rng.random()]
                body = {"inputs": [{"name": "x", "shape": [1, len(x)], "datatype": "FP32", "data": x}]}
                try:
                    code = c.post(f"{self.base}/v2/models/{model}/versions/{version}/infer", json=body).status_code
                except httpx.HTTPError:
                    code = 0
                self.codes[code] = self.codes.get(code, 0) + 1
                self.stop.wait(0.05)


class _EdgeTraffic:
    """nginx-shaped edge log lines pushed to the sidecar's ``POST /v1/edge`` twice a second, timed now: two
    route groups on two nodes, 85% hits, misses with an origin time, a 503 now and then; the first push also
    carries a line refused at the door (a status that is not one)."""

    def __init__(self, sidecar: str) -> None:
        self.sidecar = sidecar
        self.stop = threading.Event()
        self.accepted = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        rng = random.Random(17)
        first = True
        with httpx.Client(timeout=10) as c:
            while not self.stop.is_set():
                now = time.time()
                lines: list[dict[str, Any]] = []
                for i in range(30):
                    hit = rng.random() < 0.85
                    path = rng.choice(["/model/weights/v1.3.7-onnx", "/v2/models/ctr/infer", "/v2/models/fraud/infer"])
                    lines.append(
                        {
                            "time": now - 0.01 * i,
                            "path": path,
                            "cache": "HIT" if hit else "MISS",
                            "request_time": rng.uniform(0.002, 0.02) if hit else rng.uniform(0.03, 0.2),
                            "upstream_time": "-" if hit else f"{rng.uniform(0.02, 0.15):.3f}",
                            "status": 503 if rng.random() < 0.02 else 200,
                            "node": rng.choice(["edge-fra-1", "edge-ams-2"]),
                        }
                    )
                if first:
                    lines.append({"time": now, "path": "/v2/models/ctr/infer", "status": "not a status"})
                    first = False
                try:
                    r = c.post(f"{self.sidecar}/v1/edge", json={"lines": lines})
                    self.accepted += int(r.json().get("accepted", 0))
                except (httpx.HTTPError, ValueError):
                    pass
                self.stop.wait(0.5)


def _distinct_ports(n: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < n:
        p = free_port()
        if p not in ports:
            ports.append(p)
    return ports


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("ops-live")
    # The vLLM stand-in binds its port first, and every other port is picked distinct from the rest: a port
    # picked (free) before another process binds can be handed out again. Once the stand-in got Triton's HTTP
    # port, Triton exited ("already in use") and the stand-in answered its readiness check, so every test failed.
    vllm = _VllmExposition()
    port, prom_port, http_port, grpc_port, metrics_port = _distinct_ports(5)
    sidecar_url = f"http://127.0.0.1:{port}"
    triton = TritonServer(
        demo_model_repository(),
        tmp / "triton",
        http_port=http_port,
        grpc_port=grpc_port,
        metrics_port=metrics_port,
        extra_args=[
            "--trace-config",
            "mode=opentelemetry",
            "--trace-config",
            f"opentelemetry,url={sidecar_url}/v1/traces",
            "--trace-config",
            "rate=1",
            "--trace-config",
            "level=TIMESTAMPS",
        ],
    )
    cfg = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(p) for p in RULES],
        "scrape_configs": [
            {"job_name": "triton-sidecar", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]},
            {"job_name": "vllm", "static_configs": [{"targets": [vllm.url.split("/")[2]]}]},
        ],
    }
    (tmp / "prometheus.yml").write_text(json.dumps(cfg))  # JSON is YAML
    triton_failed: list[BaseException] = []

    def start_triton() -> None:
        try:
            triton.start()
        except BaseException as exc:  # re-raised by the fixture below
            triton_failed.append(exc)

    starting = threading.Thread(target=start_triton, daemon=True)
    prom: subprocess.Popen[bytes] | None = None
    server: uvicorn.Server | None = None
    thread: threading.Thread | None = None
    traffic: _Traffic | None = None
    edge = _EdgeTraffic(sidecar_url)
    try:
        # Prometheus, Triton and the sidecar are independent: they start at once, not one after the other (the
        # sidecar's first scrapes of a Triton not yet up just fail; Prometheus' of a sidecar not yet up too).
        # Prometheus first: it scrapes a static target only about 5 s after it starts (its discovery manager
        # sends target updates at most every 5 s: prometheus/prometheus discovery/manager.go, updatert; measured
        # here, 6 samples of up 11 s after "ready to receive"), and the first test waits for six scrapes.
        log = (tmp / "prometheus.log").open("wb")
        prom = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={tmp / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{prom_port}",
                "--enable-feature=exemplar-storage",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        starting.start()
        svc = Service(
            parse_config(_sidecar_config(triton, port, tmp / "state.sqlite", vllm.url)), registry=CollectorRegistry()
        )
        server = uvicorn.Server(
            uvicorn.Config(
                create_app(svc), host="127.0.0.1", port=port, log_level="warning", lifespan="on", access_log=False
            )
        )
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        _wait(lambda: bool(server.started), 20, "the sidecar to start")
        starting.join(130)
        if triton_failed:
            raise triton_failed[0]
        traffic = _Traffic(triton.http_url)
        traffic.thread.start()
        edge.thread.start()
        yield {
            "prom": f"http://127.0.0.1:{prom_port}",
            "sidecar": sidecar_url,
            "svc": svc,
            "traffic": traffic,
            "triton": triton,
            "edge": edge,
        }
    finally:
        if edge.thread.is_alive():
            edge.stop.set()
            edge.thread.join(10)
        if traffic is not None:
            traffic.stop.set()
            traffic.thread.join(10)
        if starting.is_alive():  # the fixture failed while Triton was still starting: stop it once it is up
            starting.join(130)
        if prom is not None:
            prom.terminate()
            try:
                prom.wait(10)
            except subprocess.TimeoutExpired:
                prom.kill()
        triton.stop()
        if server is not None and thread is not None:
            server.should_exit = True
            thread.join(15)
        vllm.close()


def _query(prom: str, expr: str) -> dict[str, Any]:
    r = module_http().get(f"{prom}/api/v1/query", params={"query": expr}, timeout=10)
    body: dict[str, Any] = r.json()
    return body


def _post_drift_events(sidecar: str) -> None:
    """60 reference events, then a current window where clicks_7d moved by 2 sd, a tenth of ages are missing and a
    third of countries are one the reference never saw."""
    rng = random.Random(11)
    ref = [
        {
            "model": "ctr",
            "version": "2",
            "features": {"age": rng.gauss(40, 12), "clicks_7d": rng.gauss(5, 2), "country": rng.choice(["us", "de"])},
        }
        for _ in range(60)
    ]
    cur = [
        {
            "model": "ctr",
            "version": "2",
            "features": {
                "age": None if i % 10 == 0 else rng.gauss(40, 12),
                "clicks_7d": rng.gauss(9, 2),
                "country": rng.choice(["us", "de", "fr"]),
            },
        }
        for i in range(120)
    ]
    with httpx.Client(timeout=10) as c:
        for batch in (ref, cur):
            r = c.post(f"{sidecar}/v1/events", json={"events": batch})
            assert r.status_code == 200, r.text
        # One oversized push, refused with 413: the refusal panels have something to show.
        r = c.post(
            f"{sidecar}/v1/traces", content=b"x" * (4 * 1024 * 1024 + 1), headers={"content-type": "application/json"}
        )
        assert r.status_code == 413


def _post_llm_events(sidecar: str) -> None:
    """LLM requests with their figures, a fifth of them slow to the first token: goodput, its misses and the
    per-request histograms have data."""
    rng = random.Random(13)
    events = [
        {
            "model": "chat",
            "version": "1",
            "fields": {
                "ttft_ms": rng.uniform(600, 900) if i % 5 == 0 else rng.uniform(50, 400),
                "inter_token_ms": rng.uniform(10, 40),
                "tokens_out": rng.randint(20, 200),
            },
        }
        for i in range(100)
    ]
    r = module_http().post(f"{sidecar}/v1/events", json={"events": events}, timeout=10)
    assert r.status_code == 200, r.text


def _substitute(expr: str) -> str:
    expr = expr.replace("$__rate_interval", RATE_INTERVAL)
    return re.sub(r"\$\{?(instance|server|model|version|feature|check|gpu|route_group)\}?", ".*", expr)


def _panels() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(DASHBOARD_JSON.glob("*.json")):
        d = json.loads(path.read_text())
        out.extend((d["title"], p) for p in d["panels"] if p.get("type") != "row")
    return out


def test_every_panel_query_has_data_or_is_valid_promql(stack: dict[str, Any]) -> None:
    prom, sidecar = stack["prom"], stack["sidecar"]
    _post_drift_events(sidecar)
    _post_llm_events(sidecar)
    # A few scrapes of everything, the stage histograms from Triton's spans, and one drift evaluation.
    _wait(
        lambda: (
            float(_query(prom, 'sum_over_time(up{job="triton-sidecar"}[1m])')["data"]["result"][0]["value"][1]) >= 6
        ),
        45,
        "six scrapes of the sidecar",
    )
    for needed in (
        "sidecar_triton_stage_duration_seconds_bucket",
        "sidecar_drift_drifting",
        'sidecar_model_request_failure_total{reason="BACKEND", model="fraud"} > 0',
        "sidecar:model_error_ratio:rate5m",
        "sidecar_serving_gen_ai_server_time_to_first_token_seconds",
        "sidecar:vllm_goodput_lower_bound:ratio_rate5m",
        "sidecar:goodput_burn_rate:rate5m",
        "sidecar_edge_hit_ratio_period",
        'sidecar_edge_requests_total{cache="miss"}',
    ):
        # Not fatal here: a panel without data is reported below with its query.
        _poll(lambda n=needed: bool(_query(prom, n)["data"]["result"]), 20)
    needs = {(i.dashboard, i.title): i.needs for i in panel_infos()}
    with_data: list[str] = []
    empty_expected: list[str] = []
    failures: list[str] = []
    for board, panel in _panels():
        need = needs[(board, panel["title"])]
        got_data = False
        for t in panel["targets"]:
            res = _query(prom, _substitute(t["expr"]))
            if res.get("status") != "success":
                failures.append(f"{board} / {panel['title']}: invalid PromQL: {res.get('error')}: {t['expr']}")
                continue
            got_data = got_data or bool(res["data"]["result"])
        if got_data:
            with_data.append(f"{board} / {panel['title']}")
        elif need in LIVE_NEEDS:
            exprs = [t["expr"] for t in panel["targets"]]
            failures.append(f"{board} / {panel['title']} (needs {need}): no data from {exprs}")
        else:
            empty_expected.append(f"{board} / {panel['title']} ({need})")
    print(f"\n{len(with_data)} panels with data, {len(empty_expected)} valid PromQL without data here:")
    print("\n".join("  " + e for e in empty_expected))
    assert not failures, "\n".join(failures)
    assert len(with_data) >= 40


def test_annotations_and_variables_are_valid_and_serving_variables_have_values(stack: dict[str, Any]) -> None:
    prom = stack["prom"]
    _wait(lambda: bool(_query(prom, "sidecar_model_requests_per_second")["data"]["result"]), 45, "serving series")
    for path in sorted(DASHBOARD_JSON.glob("*.json")):
        d = json.loads(path.read_text())
        for a in d["annotations"]["list"]:
            res = _query(prom, _substitute(a["expr"]))
            assert res["status"] == "success", (path.name, a["expr"], res)
        for v in d["templating"]["list"]:
            if v["type"] != "query":
                continue
            m = re.fullmatch(r"label_values\((.+), (\w+)\)", v["query"])
            assert m, v["query"]
            url = f"{prom}/api/v1/label/{m.group(2)}/values"
            r = module_http().get(url, params={"match[]": _substitute(m.group(1))}, timeout=5)
            assert r.json()["status"] == "success", (path.name, v["query"], r.text)
            if path.name == "triton-sidecar-serving.json" and v["name"] in ("model", "version"):
                assert set(r.json()["data"]) >= ({"ctr", "fraud"} if v["name"] == "model" else {"1", "2"})


def test_rules_load_and_evaluate_in_the_real_prometheus(stack: dict[str, Any]) -> None:
    prom = stack["prom"]
    _wait(lambda: bool(_query(prom, "sidecar:model_error_ratio:rate5m")["data"]["result"]), 45, "recording rules")
    groups = module_http().get(f"{prom}/api/v1/rules", timeout=10).json()["data"]["groups"]
    rules = [r for g in groups for r in g["rules"]]
    assert len(rules) >= 25
    bad = [(r["name"], r.get("lastError")) for r in rules if r["health"] not in ("ok", "unknown")]
    assert not bad
    # The fraud model's failures make the 5m error ratio of fraud v1 positive and ctr's zero.
    res = {
        (s["metric"]["model"], s["metric"]["version"]): float(s["value"][1])
        for s in _query(prom, "sidecar:model_error_ratio:rate5m")["data"]["result"]
    }
    assert res[("fraud", "1")] > 0
    assert res[("ctr", "1")] == 0


def test_stage_histograms_carry_trace_exemplars_into_prometheus(stack: dict[str, Any]) -> None:
    prom = stack["prom"]
    end = time.time()

    def exemplars() -> list[Any]:
        r = module_http().get(
            f"{prom}/api/v1/query_exemplars",
            params={"query": "sidecar_triton_stage_duration_seconds_bucket", "start": end - 300, "end": time.time()},
            timeout=10,
        )
        data: list[Any] = r.json()["data"]
        return data

    _wait(lambda: bool(exemplars()), 30, "exemplars")
    ex = exemplars()[0]["exemplars"][0]
    assert re.fullmatch(r"[0-9a-f]{32}", ex["labels"]["trace_id"])
