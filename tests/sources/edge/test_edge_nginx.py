"""A real nginx with ``proxy_cache`` in front of a tiny local HTTP origin (started by the test; a real Triton
would be heavier and add nothing to what the cache does), logging JSON with ``$upstream_cache_status``,
``$request_time`` and ``$upstream_response_time``. The sidecar tails that log: its hit ratio equals what nginx
told each client (the ``X-Cache`` header), origin requests equal what the origin served, the latency split holds
(hits never wait on the origin, misses do), and a purge that removed only some cache files is found not to have
taken, naming the path nginx kept serving from its cache."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry

from sidecar.alerting.render import finding_text
from sidecar.checks.edge.config import PurgeWatchConfig
from sidecar.checks.edge.purge import PurgeWatch
from sidecar.clock import SystemClock
from sidecar.demo.edge_nginx import nginx_conf
from sidecar.processors.edge import EdgeProcessor
from sidecar.processors.edge_config import EdgeSeriesConfig
from sidecar.processors.edge_record import EdgeRecord
from sidecar.purge import Purge
from sidecar.sources.edge.config import EdgeFileConfig, EdgeSourceConfig
from sidecar.sources.edge.jsonl import EdgeTailer
from sidecar.sources.edge.metrics import EdgeSourceMetrics
from sidecar.store import Store

pytestmark = [
    pytest.mark.nginx,
    pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed (.ci/setup installs it)"),
]

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Edge:
    url: str
    log: Path
    cache: Path
    served: Counter[str] = field(default_factory=Counter)  # what the origin served, per path

    def cache_file(self, path: str) -> Path:
        """Where nginx keeps the cached response of ``path`` (proxy_cache_key $uri, levels=1:2)."""
        h = hashlib.md5(path.encode()).hexdigest()
        return self.cache / h[-1] / h[-3:-1] / h


@pytest.fixture(scope="module")
def edge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Edge]:
    root = tmp_path_factory.mktemp("nginx")
    served: Counter[str] = Counter()

    class Origin(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            served[self.path] += 1
            body = f"weights of {self.path}".encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "max-age=3600")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    origin = ThreadingHTTPServer(("127.0.0.1", 0), Origin)
    thread = threading.Thread(target=origin.serve_forever, daemon=True)
    thread.start()
    port = _free_port()
    (root / "logs").mkdir()
    cache = root / "cache"
    conf = root / "nginx.conf"
    conf.write_text(nginx_conf(root, port=port, origin=f"127.0.0.1:{origin.server_address[1]}", node="nginx-test"))
    # Without `daemon off` the command returns once the master has bound its port and gone to the background.
    subprocess.run(["nginx", "-p", str(root), "-c", str(conf)], check=True, capture_output=True, timeout=30)
    pid = int((root / "nginx.pid").read_text())
    try:
        yield Edge(url=f"http://127.0.0.1:{port}", log=root / "logs" / "access.log", cache=cache, served=served)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        origin.shutdown()
        origin.server_close()


def test_hit_ratio_latency_split_and_a_purge_that_did_not_take(edge: Edge, tmp_path: Path) -> None:
    reg = CollectorRegistry()
    series = EdgeProcessor(
        EdgeSeriesConfig.model_validate({"route_groups": [{"name": "weights", "prefixes": ["/model/weights/"]}]}),
        registry=reg,
        clock=SystemClock(),
    )
    purges = PurgeWatch(PurgeWatchConfig(grace_secs=0), hit_statuses=series.cfg.hit_statuses, registry=reg)
    kept: list[EdgeRecord] = []

    class Keep:
        def observe(self, records: list[EdgeRecord]) -> None:
            kept.extend(records)

    tailer = EdgeTailer(
        EdgeFileConfig(path=str(edge.log)),
        source_cfg=EdgeSourceConfig(),
        metrics=EdgeSourceMetrics(reg),
        sinks=[series, purges, Keep()],
        clock=SystemClock(),
        store=Store(tmp_path / "s.sqlite"),
        registry=reg,
    )
    told: Counter[str] = Counter()  # nginx's own word, per response: X-Cache
    paths = ["/model/weights/v1.3.0", "/model/weights/v1.3.7-onnx", "/model/weights/v1.2.9", "/index.html"]
    with httpx.Client(base_url=edge.url, timeout=10) as client:

        def get(path: str, n: int, **headers: str) -> Counter[str]:
            got: Counter[str] = Counter()
            for _ in range(n):
                r = client.get(path, headers=headers)
                assert r.status_code == 200
                got[r.headers["x-cache"]] += 1
            told.update(got)
            return got

        for p in paths:
            get(p, 5)
        get("/model/weights/v1.2.9", 1, traceparent=f"00-{TRACE}-00f067aa0ba902b7-01")
        assert tailer.poll_once() == 21

        # The purge of /model/weights/v1.3. removes the cache files of v1.3.0 but misses v1.3.7-onnx.
        purged_at = SystemClock().now()
        edge.cache_file("/model/weights/v1.3.0").unlink()
        purges.add(Purge("/model/weights/v1.3.", "prefix"), at=purged_at, who="ops", change_id="purge-1")
        after_v130 = get("/model/weights/v1.3.0", 3)
        after_v137 = get("/model/weights/v1.3.7-onnx", 37)
        assert tailer.poll_once() == 40

    # The hit ratio is nginx's: every response's X-Cache, counted by the client.
    in_ratio = sum(v for k, v in told.items() if k)
    hits = sum(v for k, v in told.items() if k in series.cfg.hit_statuses)
    assert series.hits("all", purged_at - 3600, purged_at + 3600) == (hits, in_ratio)
    # One miss per path and one after the purge (a request racing nginx's cache write could add a miss).
    assert in_ratio == 61 and told["MISS"] >= 5 and hits >= 50

    # Origin requests are what the origin served; hits never wait on the origin, misses do.
    origin = sum(
        reg.get_sample_value("sidecar_edge_origin_requests_total", {"route_group": g, "edge_node": "nginx-test"}) or 0
        for g in ("weights", "other")
    )
    assert origin == sum(edge.served.values()) == told["MISS"]
    for r in kept:
        if r.cache == "HIT":
            assert r.origin_s is None
        else:
            assert r.origin_s is not None and r.edge_s is not None and r.edge_s + 0.001 >= r.origin_s
    assert any(r.trace_id == TRACE for r in kept)
    assert all(r.request_id and len(r.request_id) == 32 for r in kept)  # nginx's $request_id, kept opaque

    # The purge did not take on v1.3.7-onnx: 37 hits, as nginx answered them.
    assert after_v130["MISS"] >= 1  # the purge took on v1.3.0: fetched again
    assert after_v137 == Counter({"HIT": 37})
    taken, unmatched = purges.evaluate(SystemClock().now())
    assert taken.active and taken.value == after_v137["HIT"]  # v1.3.0's hits came after its refill: fresh
    summary, _ = finding_text(taken)
    assert summary.startswith("purge of /model/weights/v1.3. at ")
    assert summary.endswith("did not take: 37 hits on /model/weights/v1.3.7-onnx since")
    assert not unmatched.active
