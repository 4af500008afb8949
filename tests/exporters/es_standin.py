"""A local HTTP stand-in for Elasticsearch, for tests driven through the real ``elasticsearch`` client.

It speaks the documented parts the audit exporter uses, over real TCP:

- ``PUT /_ilm/policy/<name>`` and ``PUT /_index_template/<name>``: stored, ``{"acknowledged": true}``.
- ``POST /_bulk`` (NDJSON): per item, ``create`` of an ``(index, _id)`` already stored answers 409
  ``version_conflict_engine_exception``; otherwise 201 and the document is stored. The answer is 200 with
  ``errors`` true when any item failed, as Elasticsearch does. ``index`` ops replace.
- Every answer carries ``X-Elastic-Product: Elasticsearch`` (the client refuses a server without it).

Faults, set by the test: ``item_faults`` (``_id`` -> status, answered for that item instead of storing it:
400 ``mapper_parsing_exception``, 429 ``es_rejected_execution_exception``, 5xx; ``sticky_item_faults``
keeps them, otherwise each fires once), ``answers`` (a queue of whole-request answers: an int status,
``("status", code, headers)``, ``"drop"`` to close the connection before answering, ``"drop_mid"`` to close
it halfway through the body after storing the documents, ``("slow", secs)`` to wait before handling), and
``down`` (every request is dropped).
"""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = ["EsStandIn"]

_ERRORS = {
    400: "mapper_parsing_exception",
    429: "es_rejected_execution_exception",
    500: "internal_server_error",
    503: "unavailable_shards_exception",
}


class EsStandIn:
    def __init__(self, tls: tuple[Path, Path] | None = None) -> None:
        """``tls``: (certificate, key) PEM files to serve HTTPS with (the URL then names ``localhost``)."""
        self.docs: dict[tuple[str, str], dict[str, Any]] = {}
        self.creates: list[str] = []  # every _id a create stored, in order (a duplicate would show twice)
        self.policies: dict[str, Any] = {}
        self.templates: dict[str, Any] = {}
        self.item_faults: dict[str, int] = {}
        self.sticky_item_faults = False
        self.answers: deque[Any] = deque()
        self.down = False
        self.requests = 0
        self.auth: list[str | None] = []  # the Authorization header of every request, in order
        self.bulk_requests = 0
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                return

            def _drop(self) -> None:
                self.close_connection = True
                self.connection.shutdown(2)

            def _send(self, status: int, body: Any, headers: dict[str, str] | None = None, cut: bool = False) -> None:
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("X-Elastic-Product", "Elasticsearch")
                self.send_header("Content-Length", str(len(raw)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                if cut:
                    self.wfile.write(raw[: len(raw) // 2])
                    self.wfile.flush()
                    self._drop()
                    return
                self.wfile.write(raw)

            def _handle(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                data = self.rfile.read(n) if n else b""
                with owner.lock:
                    owner.requests += 1
                    owner.auth.append(self.headers.get("Authorization"))
                    answer = owner.answers.popleft() if owner.answers else None
                    down = owner.down
                if down or answer == "drop":
                    self._drop()
                    return
                if isinstance(answer, tuple) and answer[0] == "slow":
                    time.sleep(answer[1])
                    answer = None
                hdr: dict[str, str] = {}
                if isinstance(answer, tuple) and answer[0] == "status":
                    answer, hdr = answer[1], answer[2]
                if isinstance(answer, int):
                    self._send(
                        answer,
                        {"error": {"type": _ERRORS.get(answer, "error"), "reason": "stand-in"}, "status": answer},
                        hdr,
                    )
                    return
                path = self.path.split("?")[0]
                if path.startswith("/_ilm/policy/"):
                    with owner.lock:
                        owner.policies[path.rsplit("/", 1)[1]] = json.loads(data)
                    self._send(200, {"acknowledged": True})
                elif path.startswith("/_index_template/"):
                    with owner.lock:
                        owner.templates[path.rsplit("/", 1)[1]] = json.loads(data)
                    self._send(200, {"acknowledged": True})
                elif path == "/_bulk":
                    self._send(200, owner.bulk(data), cut=answer == "drop_mid")
                elif path == "/":
                    self._send(200, {"version": {"number": "8.15.0"}, "tagline": "You Know, for Search"})
                else:
                    self._send(404, {"error": {"type": "not_found"}, "status": 404})

            do_GET = do_PUT = do_POST = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        if tls is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(str(tls[0]), str(tls[1]))
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
            self.url = f"https://localhost:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def bulk(self, data: bytes) -> dict[str, Any]:
        lines = [json.loads(x) for x in data.splitlines() if x.strip()]
        items, errors = [], False
        with self.lock:
            self.bulk_requests += 1
            for op, doc in zip(lines[::2], lines[1::2], strict=True):
                ((kind, meta),) = op.items()
                key = (meta["_index"], meta["_id"])
                fault = self.item_faults.get(meta["_id"])
                if fault is not None:
                    if not self.sticky_item_faults:
                        del self.item_faults[meta["_id"]]
                    errors = True
                    items.append(
                        {
                            kind: {
                                "_index": key[0],
                                "_id": key[1],
                                "status": fault,
                                "error": {"type": _ERRORS.get(fault, "error"), "reason": "stand-in"},
                            }
                        }
                    )
                elif kind == "create" and key in self.docs:
                    errors = True
                    items.append(
                        {
                            kind: {
                                "_index": key[0],
                                "_id": key[1],
                                "status": 409,
                                "error": {
                                    "type": "version_conflict_engine_exception",
                                    "reason": f"[{key[1]}]: version conflict, document already exists",
                                },
                            }
                        }
                    )
                else:
                    self.docs[key] = doc
                    if kind == "create":
                        self.creates.append(key[1])
                    items.append({kind: {"_index": key[0], "_id": key[1], "status": 201, "result": "created"}})
        return {"took": 1, "errors": errors, "items": items}

    def ids(self) -> list[str]:
        with self.lock:
            return [k[1] for k in self.docs]

    def __enter__(self) -> EsStandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
