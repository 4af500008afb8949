"""Probe cost benchmark: the sidecar's CPU for probing N models every 10 s (issue 29: 50 models under 2% of a
core), through the real ``tritonclient`` HTTP client, beside a baseline with an in-process client that answers
at once (the probe's own bookkeeping: token bucket, answer rules, metrics, findings).

    .venv/bin/python bench/bench_probe.py                 # 50 models, 30 rounds (5 simulated minutes)
    .venv/bin/python bench/bench_probe.py --models 200 --rounds 10

The Triton stand-in is a separate process (a threaded ``http.server`` answering KServe v2 JSON), so its CPU is
not counted: only this process's CPU (``time.process_time``) while the rounds run. Time is simulated (a
fake clock advanced tick by tick, the ticker's one-second ticks), so the figure is CPU per simulated second, as a
share of one core; every model is probed once per interval (the counts printed say so).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from prometheus_client import CollectorRegistry

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sidecar.checks.probe.check import ModelProbe  # noqa: E402
from sidecar.checks.probe.client import ProbeAnswer, ProbeClient, TritonProbeClient  # noqa: E402
from sidecar.checks.probe.config import ProbeInput, ProbesConfig  # noqa: E402
from sidecar.clock import FakeClock  # noqa: E402
from sidecar.polled import ManualTicker  # noqa: E402

STANDIN = r"""
import json, sys
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_POST(self):
        n = int(self.headers.get("content-length", 0)); self.rfile.read(n)
        model = self.path.split("/")[3]
        body = json.dumps({"model_name": model, "model_version": "1", "outputs": [
            {"name": "score", "datatype": "FP32", "shape": [1, 1], "data": [0.5]}]}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers(); self.wfile.write(body)

ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


class Instant:
    """Answers at once, in process: the baseline."""

    async def infer(
        self,
        model: str,
        version: str,
        inputs: Sequence[ProbeInput],
        outputs: Sequence[str],
        *,
        request_id: str,
        headers: Mapping[str, str],
        timeout_secs: float,
    ) -> Mapping[str, ProbeAnswer]:
        return {"score": ProbeAnswer("FP32", (1, 1), np.full((1, 1), 0.5, dtype=np.float32))}

    async def close(self) -> None:
        return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _run(client: ProbeClient, models: int, rounds: int, interval: float) -> tuple[float, int]:
    spec = {
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}],
        "outputs": [{"name": "score", "datatype": "FP32", "shape": [1, 1], "min": 0, "max": 1}],
    }
    cfg = ProbesConfig.model_validate(
        {
            "enabled": True,
            "interval_secs": interval,
            "max_per_sec": models / interval + 1,
            "models": {f"m{i}": spec for i in range(models)},
        }
    )
    clock = FakeClock()
    probe = ModelProbe(cfg, client=client, registry=CollectorRegistry(), clock=clock, ticker=ManualTicker)
    await probe.poll_once()  # warm: connections opened, code paths loaded
    probe.evaluate(clock.now())
    t0 = time.process_time()
    ticks = round(interval / probe.ticker.interval_secs)  # type: ignore[attr-defined]
    for _ in range(rounds):  # one round: the ticker's ticks over one interval, then one evaluation
        for _ in range(ticks):
            clock.advance(interval / ticks)
            await probe.poll_once()
        probe.evaluate(clock.now())
    cpu = time.process_time() - t0
    sent = sum(s["probes"] for s in probe.snapshot().values())  # type: ignore[misc]
    await probe.shutdown()
    return cpu, int(sent)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--interval", type=float, default=10.0)
    args = ap.parse_args()
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-c", STANDIN, str(port)])
    try:
        for _ in range(100):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        base_cpu, base_n = asyncio.run(_run(Instant(), args.models, args.rounds, args.interval))
        real_cpu, real_n = asyncio.run(
            _run(TritonProbeClient(f"127.0.0.1:{port}"), args.models, args.rounds, args.interval)
        )
    finally:
        server.terminate()
        server.wait(10)
    span = args.rounds * args.interval
    print(f"{args.models} models every {args.interval:g} s, {args.rounds} rounds ({span:g} s simulated)")
    for name, cpu, n in (("baseline (instant client)", base_cpu, base_n), ("tritonclient HTTP", real_cpu, real_n)):
        print(
            f"  {name:26s} {n:6d} probes  CPU {cpu * 1000:8.1f} ms  {cpu / n * 1e6:7.0f} us/probe  "
            f"{cpu / span * 100:6.3f}% of a core"
        )
    print(f"  ratio tritonclient / baseline: {real_cpu / base_cpu:.1f}x")


if __name__ == "__main__":
    main()
