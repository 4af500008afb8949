"""A null OTLP/HTTP trace collector for bench_overhead.py's baseline E: reads each ``POST /v1/traces`` body and
answers 200 ``{}``, doing nothing else while load runs. Bodies are kept (up to 512 MiB) and only parsed when
``GET /count`` asks, after the measured window, so the count costs Triton's run nothing; ``GET /count``
answers ``{"posts": n, "bytes": n, "spans": n, "over_cap": bool}`` and forgets what it counted.

    python bench/null_collector.py PORT
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CAP = 512 * 1024 * 1024
_lock = threading.Lock()
_bodies: list[tuple[str, bytes]] = []
_state = {"posts": 0, "bytes": 0, "over_cap": False}


def _spans(ctype: str, body: bytes) -> int:
    if "json" in ctype:
        doc = json.loads(body)
        return sum(len(ss.get("spans", [])) for rs in doc.get("resourceSpans", []) for ss in rs.get("scopeSpans", []))
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    req = ExportTraceServiceRequest.FromString(body)
    return sum(len(ss.spans) for rs in req.resource_spans for ss in rs.scope_spans)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The answer goes out in two writes (head, then body): with Nagle on, the second waits for the ACK of the
    # first, which the client delays by up to 40 ms, so every export would be answered that much later than
    # by the sidecar (whose listener has Nagle off), and the baseline would be the slower receiver.
    disable_nagle_algorithm = True

    def log_message(self, *args: object) -> None:  # one line per POST would cost more than the POST
        pass

    def _answer(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with _lock:
            _state["posts"] += 1
            _state["bytes"] += len(body)
            if _state["bytes"] <= CAP:
                _bodies.append((self.headers.get("Content-Type") or "", body))
            else:
                _state["over_cap"] = True
        self._answer(b"{}")

    def do_GET(self) -> None:
        with _lock:
            bodies, state = list(_bodies), dict(_state)
            _bodies.clear()
            _state.update(posts=0, bytes=0, over_cap=False)
        state["spans"] = sum(_spans(ctype, body) for ctype, body in bodies)
        self._answer(json.dumps(state).encode())


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
