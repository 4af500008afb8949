"""A real nginx (Debian's package) with ``proxy_cache`` in front of the session's real Triton 2.51, caching
inference POSTs keyed on their body (sidecar/demo/edge_nginx.py, as the demo runs it), logging JSON with
``$upstream_cache_status``, ``$request_time`` and ``$upstream_response_time``. A running sidecar (traces and
edge wired as in production) tails that log and receives Triton's spans. Checked against nginx's and Triton's
own figures:

- the hit ratio equals what nginx told each client (the ``X-Cache`` header);
- origin requests equal the misses and what Triton itself counted as served (``nv_inference_request_success``);
  hits never wait on the origin, and the origin latency the sidecar summed equals nginx's upstream times;
- a purge posted to ``POST /v1/changes`` that removed only one of the cache files it was meant to is found not
  to have taken, naming the path nginx kept serving from its cache;
- a request with a ``traceparent`` is one trace: the edge hop in front of Triton's spans, joined by trace id,
  and marked on the trace list.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from app_server import AppServer
from prometheus_client import CollectorRegistry
from waiting import wait_until

from sidecar.alerting.render import finding_text
from sidecar.app import create_app
from sidecar.config import parse_config
from sidecar.demo.edge_nginx import nginx_conf
from sidecar.demo.tritonserver import TritonServer, free_port
from sidecar.promtext import parse_exposition
from sidecar.service import Service
from sidecar.wiring.alerting import build as alerting
from sidecar.wiring.edge import factories as traces_and_edge

pytestmark = [
    pytest.mark.nginx,
    pytest.mark.triton,
    pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed (.ci/setup installs it)"),
]

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
INFER = r"^/v2/models/[^/]+(/versions/[^/]+)?/infer$"
BODIES = {  # one request body per path: nginx's cache key is method, URI and body
    "/v2/models/ctr/versions/1/infer": [1.0, 2.0, 3.0, 4.0],
    "/v2/models/ctr/versions/2/infer": [1.0, 2.0, 3.0, 4.0],
    "/v2/models/fraud/versions/1/infer": [5.0, 0.5, 0.5],
}


def _body(x: list[float]) -> bytes:
    return json.dumps({"inputs": [{"name": "x", "shape": [1, len(x)], "datatype": "FP32", "data": x}]}).encode()


@dataclass
class Stack:
    nginx: str
    sidecar: str
    svc: Service
    triton: TritonServer
    log: Path
    cache: Path

    def cache_file(self, path: str, body: bytes) -> Path:
        """Where nginx keeps a POST's cached response (POST_CACHE_KEY, levels=1:2)."""
        h = hashlib.md5(b"POST|" + path.encode() + b"|" + body).hexdigest()
        return self.cache / h[-1] / h[-3:-1] / h


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, demo_triton: TritonServer, demo_triton_otlp_port: int
) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("nginx")
    (root / "logs").mkdir()
    port = free_port()
    conf = root / "nginx.conf"
    origin = f"127.0.0.1:{demo_triton.http_port}"
    conf.write_text(nginx_conf(root, port=port, origin=origin, node="nginx-test", cache_posts=True))
    # Without `daemon off` the command returns once the master has bound its port and gone to the background.
    subprocess.run(["nginx", "-p", str(root), "-c", str(conf)], check=True, capture_output=True, timeout=30)
    pid = int((root / "nginx.pid").read_text())
    log = root / "logs" / "access.log"
    cfg = {
        "store": {"path": str(root / "state.sqlite")},
        "triton": {"enabled": False},
        "traces": {"enabled": True},
        "alerting": {"enabled": True, "changes": {"poll_repository": False}},
        "edge": {
            "enabled": True,
            "source": {"files": [{"path": str(log), "poll_interval_secs": 0.2}]},
            "series": {"route_groups": [{"name": "infer", "regex": INFER}]},
            "checks": {"purges": {"grace_secs": 0}},
        },
    }
    svc = Service(parse_config(cfg), registry=CollectorRegistry(), factories=[alerting, *traces_and_edge()])
    try:
        # The sidecar listens where the session's Triton sends its spans (tests/conftest.py).
        with AppServer(create_app(svc), port=demo_triton_otlp_port, lifespan="on") as url:
            yield Stack(f"http://127.0.0.1:{port}", url, svc, demo_triton, log, root / "cache")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)


def _tritons_served(server: TritonServer) -> Counter[str]:
    """Triton's own count of successful requests, per inference path."""
    expo = parse_exposition(httpx.get(server.metrics_url, timeout=10).text)
    out: Counter[str] = Counter()
    for name, raw, v in expo.samples:
        if name == "nv_inference_request_success":
            lab = expo.labels(raw)
            out[f"/v2/models/{lab['model']}/versions/{lab['version']}/infer"] = int(v)
    return out


def _sample(svc: Service, name: str, **labels: str) -> float:
    return svc.registry.get_sample_value(name, labels) or 0.0


def test_hit_ratio_latency_split_purge_and_the_joined_waterfall(stack: Stack) -> None:
    svc, series = stack.svc, stack.svc.component("edge_series")
    told: Counter[str] = Counter()  # nginx's own word, per response: X-Cache
    served0 = _tritons_served(stack.triton)
    sent = 0
    with httpx.Client(base_url=stack.nginx, timeout=30) as client:

        def post(path: str, n: int, body: bytes | None = None, **headers: str) -> Counter[str]:
            nonlocal sent
            got: Counter[str] = Counter()
            for _ in range(n):
                r = client.post(
                    path, content=body or _body(BODIES[path]), headers={"content-type": "application/json", **headers}
                )
                assert r.status_code == 200, r.text
                got[r.headers["x-cache"]] += 1
            told.update(got)
            sent += n
            return got

        def taken_in() -> bool:
            return sum(series.requests.values()) == sent  # every line read by the sidecar's tailer

        for path in BODIES:
            post(path, 6)
        parent = f"00-{TRACE}-00f067aa0ba902b7-01"
        traced = post("/v2/models/ctr/versions/1/infer", 1, _body([9.0, 9.0, 9.0, 9.0]), traceparent=parent)
        assert traced == Counter({"MISS": 1})  # a body never seen: it reached Triton, traceparent and all
        assert wait_until(taken_in, 20), (sum(series.requests.values()), sent)

        # The purge of /v2/models/ctr/ removes the cache file of v1's request only: on v2 it does not take.
        r = httpx.post(
            f"{stack.sidecar}/v1/changes",
            json={"purge": {"pattern": "/v2/models/ctr/", "scope": "prefix"}, "who": "ops"},
            timeout=10,
        )
        assert r.status_code == 201, r.text
        v1 = "/v2/models/ctr/versions/1/infer"
        stack.cache_file(v1, _body(BODIES[v1])).unlink()
        after_v1 = post(v1, 3)
        after_v2 = post("/v2/models/ctr/versions/2/infer", 5)
        assert wait_until(taken_in, 20), (sum(series.requests.values()), sent)

    # The hit ratio is nginx's: every response's X-Cache, counted by the client.
    in_ratio = sum(v for k, v in told.items() if k)
    hits = sum(v for k, v in told.items() if k in series.cfg.hit_statuses)
    now = time.time()
    assert series.hits("infer", now - 3600, now + 3600) == (hits, in_ratio) == (told["HIT"], sent)
    assert told["MISS"] >= 5 and hits >= 20  # one miss per body, and v1's refill after the purge

    # Origin requests: the misses, and what Triton itself counted as served over the same time.
    served = _tritons_served(stack.triton) - served0
    origin = _sample(svc, "sidecar_edge_origin_requests_total", route_group="infer", edge_node="nginx-test")
    assert origin == told["MISS"] == sum(served.values())
    # The latency split: every request has an edge time, only the misses an origin time, and the origin time the
    # sidecar summed is nginx's $upstream_response_time over those lines.
    lines = [json.loads(x) for x in stack.log.read_text().splitlines()]
    hop = {"route_group": "infer", "edge_node": "nginx-test"}
    edge_n = _sample(svc, "sidecar_edge_latency_seconds_count", hop="edge", **hop)
    origin_n = _sample(svc, "sidecar_edge_latency_seconds_count", hop="origin", **hop)
    assert (edge_n, origin_n) == (sent, told["MISS"])
    nginx_origin = sum(float(x["upstream_time"]) for x in lines if x["upstream_time"] not in ("", "-"))
    assert _sample(svc, "sidecar_edge_latency_seconds_sum", hop="origin", **hop) == pytest.approx(nginx_origin)
    assert all(x["upstream_time"] in ("", "-") for x in lines if x["cache"] == "HIT")  # never reached the origin
    assert all(float(x["upstream_time"]) <= x["request_time"] + 0.001 for x in lines if x["cache"] == "MISS")

    # The purge did not take on v2: nginx answered every request there from its cache.
    assert after_v1["MISS"] == 1 and after_v2 == Counter({"HIT": 5})
    taken, unmatched = (
        f for f in svc.component("edge_purges").evaluate(time.time()) if f.labels["pattern"] == "/v2/models/ctr/"
    )
    assert taken.active and taken.value == 5  # v1's hits came after its refill: fresh
    summary, _ = finding_text(taken)
    assert summary.startswith("purge of /v2/models/ctr/ at ")
    assert summary.endswith("did not take: 5 hits on /v2/models/ctr/versions/2/infer since")
    assert not unmatched.active

    # One request, one trace: the edge hop in front of Triton's spans (Triton exports them every few seconds).
    def spans_of_trace() -> Any:
        return svc.component("traces").store.get(TRACE)  # type: ignore[attr-defined]

    assert wait_until(lambda: (e := spans_of_trace()) is not None and len(e.spans) >= 3, 30)
    page = httpx.get(f"{stack.sidecar}/traces/{TRACE}", timeout=10).text
    names = {s.name for s in spans_of_trace().spans}
    assert {"InferRequest", "ctr", "compute"} <= names
    assert 'id="edge-bar"' in page and "edge nginx-test" in page and "MISS" in page
    assert "joined by" in page and "trace id" in page
    assert page.index('id="edge-bar"') < page.index("data-span-id=")  # the edge row first
    listed = httpx.get(f"{stack.sidecar}/traces?all=1", timeout=10).text
    assert f'href="/traces/{TRACE}#edge-hop"' in listed
