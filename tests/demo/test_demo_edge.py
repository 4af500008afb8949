"""The demo's edge: with an nginx given, the demo's config carries the edge source tailing its access log (and
not without one); and, where nginx is installed, the demo's nginx passes inference POSTs to the origin, answers a
repeated body from its cache (the origin never sees it) and logs lines the edge source takes, with the caller's
trace id and the cache status, from the one config builder the edge test uses."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import orjson
import pytest

from sidecar.config import parse_config
from sidecar.demo.config import demo_config
from sidecar.demo.edge_nginx import DEMO_HIT_RATIO_TARGET, DemoNginx
from sidecar.sources.edge.config import EdgeSourceConfig
from sidecar.sources.edge.parse import EdgeParser

TID = "4bf92f3577b34da6a3ce929d0e0e4736"


def test_the_demo_config_tails_the_nginx_log_when_an_nginx_is_given(tmp_path: Path) -> None:
    log = tmp_path / "nginx" / "logs" / "access.log"
    args = ("http://127.0.0.1:8000", "http://127.0.0.1:8002/metrics", 9500, tmp_path)
    cfg = parse_config(demo_config(*args, edge_log=log))
    assert cfg.edge.enabled and [f.path for f in cfg.edge.source.files] == [str(log)]
    assert [g.name for g in cfg.edge.series.route_groups] == ["infer"]
    assert cfg.edge.join.enabled and cfg.traces.enabled  # the trace page puts the edge hop in front
    assert cfg.edge.checks.sla.target == DEMO_HIT_RATIO_TARGET
    assert not parse_config(demo_config(*args)).edge.enabled


class Origin(ThreadingHTTPServer):
    posts: list[bytes]


@pytest.fixture
def origin() -> Iterator[Origin]:
    class Triton(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._answer(b"")

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            srv.posts.append(body)
            self._answer(b'{"outputs":[' + str(len(srv.posts)).encode() + b"]}")

        def _answer(self, body: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    srv = Origin(("127.0.0.1", 0), Triton)
    srv.posts = []
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.mark.nginx
@pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed (.ci/setup installs it)")
def test_the_demo_nginx_caches_inference_by_body_and_logs_what_the_edge_source_takes(
    origin: Origin, tmp_path: Path
) -> None:
    nginx = DemoNginx(tmp_path / "nginx", f"http://127.0.0.1:{origin.server_address[1]}")
    assert nginx.start()
    url = f"{nginx.url}/v2/models/ctr/versions/1/infer"
    a, b = {"inputs": [{"data": [0.1, 0.2]}]}, {"inputs": [{"data": [0.1, 0.3]}]}
    try:
        first = httpx.post(url, json=a, headers={"traceparent": f"00-{TID}-00f067aa0ba902b7-01"}, timeout=10)
        again = httpx.post(url, json=a, timeout=10)
        other = httpx.post(url, json=b, timeout=10)
        too_big = httpx.post(url, content=b"x" * 70_000, timeout=10)
    finally:
        nginx.stop()
    assert [r.headers.get("x-cache") for r in (first, again, other)] == ["MISS", "HIT", "MISS"]
    assert first.json() == again.json() == {"outputs": [1]} and other.json() == {"outputs": [2]}
    assert too_big.status_code == 413  # over the in-memory body buffer: refused, never cached under an empty key
    assert [orjson.loads(p) for p in origin.posts] == [a, b]  # the hit never reached the origin
    lines = [orjson.loads(x) for x in nginx.access_log.read_bytes().splitlines()]
    parser = EdgeParser(EdgeSourceConfig())
    records = [parser.parse(d, f"line {i}", time.time()) for i, d in enumerate(lines)]
    infer = [r for r in records if r.path.endswith("/infer")]
    assert [r.cache for r in infer] == ["MISS", "HIT", "MISS", ""]
    rec = infer[0]
    assert rec.trace_id == TID and rec.node == "nginx-demo" and rec.status == 200
    # nginx times the two from different clock readings in whole milliseconds: the origin's may be 1 ms over.
    assert rec.origin_s is not None and rec.edge_s is not None and rec.origin_s <= rec.edge_s + 0.001
    assert rec.request_id is not None and len(rec.request_id) == 32  # nginx's own $request_id, kept opaque
