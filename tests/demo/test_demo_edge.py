"""The demo's edge: with an nginx given, the demo's config carries the edge source tailing its access log (and
not without one); and, where nginx is installed, the demo's nginx passes inference POSTs to the origin and logs
lines the edge source takes, with the caller's trace id, from the one config builder the edge test uses."""

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
from sidecar.demo.edge_nginx import DemoNginx
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
    assert not parse_config(demo_config(*args)).edge.enabled


@pytest.fixture
def origin() -> Iterator[str]:
    class Triton(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._answer(b"")

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self._answer(b'{"outputs":[]}')

        def _answer(self, body: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Triton)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.mark.nginx
@pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed (.ci/setup installs it)")
def test_the_demo_nginx_proxies_inference_and_logs_what_the_edge_source_takes(origin: str, tmp_path: Path) -> None:
    nginx = DemoNginx(tmp_path / "nginx", origin)
    assert nginx.start()
    try:
        r = httpx.post(
            f"{nginx.url}/v2/models/ctr/versions/1/infer",
            json={"inputs": []},
            headers={"traceparent": f"00-{TID}-00f067aa0ba902b7-01"},
            timeout=10,
        )
        assert r.status_code == 200 and r.json() == {"outputs": []}
    finally:
        nginx.stop()
    lines = [orjson.loads(x) for x in nginx.access_log.read_bytes().splitlines()]
    parser = EdgeParser(EdgeSourceConfig())
    records = [parser.parse(d, f"line {i}", time.time()) for i, d in enumerate(lines)]
    infer = [r for r in records if r.path.endswith("/infer")]
    assert len(infer) == 1
    rec = infer[0]
    assert rec.trace_id == TID and rec.node == "nginx-demo" and rec.status == 200
    assert rec.cache == ""  # a POST is never looked up in the cache
    # nginx times the two from different clock readings in whole milliseconds: the origin's may be 1 ms over.
    assert rec.origin_s is not None and rec.edge_s is not None and rec.origin_s <= rec.edge_s + 0.001
    assert rec.request_id is not None and len(rec.request_id) == 32  # nginx's own $request_id, kept opaque
