"""Tools for the fault tests: a stand-in HTTP server whose answers a test changes while it runs (slow,
500, HTML, 4xx), a real sidecar process (``python -m sidecar.cli run``) on free loopback ports, and helpers to
read the sidecar's own /metrics. The fixtures in conftest.py stop every one of them in a ``finally``.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import yaml
from waiting import wait_until

from sidecar.demo.tritonserver import free_port

ROOT = Path(__file__).resolve().parents[2]
TRITON_METRICS = (ROOT / "tests" / "data" / "core" / "triton-2.51-metrics.txt").read_text()


@dataclass
class Behaviour:
    """What the stand-in answers right now; a test swaps it while the sidecar keeps calling."""

    status: int = 200
    body: bytes = b""
    content_type: str = "text/plain; version=0.0.4"
    delay_s: float = 0.0
    hits: int = 0
    bodies: list[bytes] = field(default_factory=list)


class StandIn:
    """A threaded HTTP server on a free loopback port answering every GET and POST with ``self.now``.

    A slow answer waits on an event, not a sleep, so ``release()`` (and the fixture's teardown) ends it at once.
    """

    def __init__(self, behaviour: Behaviour | None = None) -> None:
        self.now = behaviour or Behaviour()
        self._release = threading.Event()
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body_in = self.rfile.read(n) if n else b""
                with outer._lock:
                    b = outer.now
                    b.hits += 1
                    if body_in:
                        b.bodies.append(body_in)
                if b.delay_s:
                    outer._release.wait(b.delay_s)
                with contextlib.suppress(OSError):  # the client gave up on a slow answer
                    self.send_response(b.status)
                    self.send_header("Content-Type", b.content_type)
                    self.send_header("Content-Length", str(len(b.body)))
                    self.end_headers()
                    self.wfile.write(b.body)

            do_GET = _answer
            do_POST = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def set(self, behaviour: Behaviour) -> Behaviour:
        with self._lock:
            self.now = behaviour
        if not behaviour.delay_s:
            self._release.set()
        else:
            self._release.clear()
        return behaviour

    def hits(self) -> int:
        with self._lock:
            return self.now.hits

    def close(self) -> None:
        self._release.set()
        self.server.shutdown()
        self.server.server_close()


def triton_exposition(success: int) -> bytes:
    """Triton 2.51's real /metrics (tests/data/core) with ctr v1's success counter set to ``success``."""
    return re.sub(
        r'(nv_inference_request_success\{model="ctr",version="1"\}) \d+', rf"\1 {success}", TRITON_METRICS
    ).encode()


class SidecarProcess:
    """``python -m sidecar.cli run --config`` in its own process group, on a free loopback port."""

    def __init__(self, workdir: Path, config: dict[str, Any]) -> None:
        self.workdir = workdir
        self.port = free_port()
        cfg = dict(config)
        cfg["server"] = {**cfg.get("server", {}), "host": "127.0.0.1", "port": self.port}
        cfg.setdefault("store", {"path": str(workdir / "state.sqlite")})
        cfg.setdefault("gpu", {"enabled": False})
        self.config_path = workdir / "sidecar.yaml"
        self.config_path.write_text(yaml.safe_dump(cfg))
        self.log_path = workdir / "sidecar.log"
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 60.0) -> None:
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sidecar.cli", "run", "--config", str(self.config_path)],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        ok = wait_until(
            lambda: self.alive() and httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200,
            timeout_s,
            interval_s=0.1,
            ignore=(httpx.HTTPError,),
        )
        if not ok:
            raise RuntimeError(f"the sidecar did not start; log:\n{self.log_tail()}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def metrics(self) -> str:
        return httpx.get(f"{self.url}/metrics", timeout=10).text

    def value(self, name: str, **labels: str) -> float | None:
        return metric_value(self.metrics(), name, **labels)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


def metric_value(text: str, name: str, **labels: str) -> float | None:
    """The sum of the samples of ``name`` whose labels include ``labels``; None when there is none."""
    total, seen = 0.0, False
    for m in re.finditer(rf"^{re.escape(name)}(?:\{{([^}}]*)\}})? (\S+)$", text, re.MULTILINE):
        got = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(1) or ""))
        if all(got.get(k) == v for k, v in labels.items()):
            total += float(m.group(2))
            seen = True
    return total if seen else None


def negative_sidecar_values(text: str) -> list[str]:
    """Derived series of the sidecar's that went below zero (rates, ratios, latencies never do)."""
    return [
        line
        for line in text.splitlines()
        if line.startswith("sidecar_model_") and not line.startswith("#") and float(line.rsplit(" ", 1)[1]) < 0
    ]


AM_BIN = "/usr/bin/prometheus-alertmanager"


class RealAlertmanager:
    """Debian's Alertmanager 0.25 on a fixed loopback port (so it can be started after the sidecar knows it)."""

    def __init__(self, workdir: Path, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        workdir.mkdir(parents=True, exist_ok=True)
        self.config = workdir / "alertmanager.yml"
        self.config.write_text("route:\n  receiver: none\n  group_by: ['...']\nreceivers:\n  - name: none\n")
        self.storage = workdir / "data"
        self.log = workdir / "alertmanager.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 30.0) -> None:
        log = self.log.open("ab")
        self.proc = subprocess.Popen(
            [
                AM_BIN,
                f"--config.file={self.config}",
                f"--storage.path={self.storage}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--cluster.listen-address=",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        ok = wait_until(
            lambda: httpx.get(f"{self.url}/-/ready", timeout=1).status_code == 200,
            timeout_s,
            interval_s=0.1,
            ignore=(httpx.HTTPError,),
        )
        if not ok:
            raise RuntimeError(f"Alertmanager did not start: {self.log.read_text()[-2000:]}")

    def alerts(self, **filters: str) -> list[dict[str, Any]]:
        params: list[tuple[str, str | int | float | bool | None]] = [
            ("filter", f'{k}="{v}"') for k, v in filters.items()
        ]
        return list(httpx.get(f"{self.url}/api/v2/alerts", params=params, timeout=5).json())

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
