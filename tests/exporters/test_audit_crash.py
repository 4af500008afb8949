"""kill -9 of the sidecar process during a stream of audit events, Elasticsearch (the stand-in) slow and then
down: the restarted sidecar delivers every event the first one had acknowledged, each exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from es_standin import EsStandIn

ROOT = Path(__file__).resolve().parents[2]

# The child is a real Service (alerting wiring: audit log + Elasticsearch sender) recording a stream; it prints
# "ack <id>" only once record() returned True, i.e. once the row and its replay-queue copy have committed.
CHILD = r"""
import asyncio, sys, time
from sidecar.config import parse_config
from sidecar.service import Service
from sidecar.wiring.alerting import build

db, url, mode = sys.argv[1], sys.argv[2], sys.argv[3]
cfg = parse_config({"store": {"path": db}, "alerting": {"enabled": True, "audit": {"elasticsearch": {
    "url": url, "max_batch": 20, "timeout_secs": 0.5,
    "retry": {"initial_backoff_secs": 0.01, "max_backoff_secs": 0.05}}}}})

async def main():
    svc = Service(cfg, factories=[build])
    await svc.start()
    audit = svc.component("audit")
    if mode == "stream":
        i = 0
        while True:
            eid = f"ev-{i:05d}"
            if audit.record("request", eid, time.time(), {"model": "ctr", "version": "1"}):
                print("ack", eid, flush=True)
            i += 1
            await asyncio.sleep(0.002)
    else:
        for _ in range(3000):
            if len(audit.outbox) == 0:
                break
            await asyncio.sleep(0.01)
        print("left", len(audit.outbox), flush=True)
        await svc.shutdown()

asyncio.run(main())
"""


def _child(db: Path, url: str, mode: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(db), url, mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
        env=env,
    )


def test_kill_9_mid_stream_then_restart_delivers_everything_acknowledged_once(tmp_path: Path) -> None:
    db = tmp_path / "state.sqlite"
    with EsStandIn() as es:
        es.answers.extend([("slow", 0.3)] * 3)  # slow at first: some batches time out and are sent again
        proc = _child(db, es.url, "stream")
        assert proc.stdout is not None
        acked: list[str] = []
        for line in proc.stdout:
            acked.append(line.split()[1])
            if len(acked) == 300:
                es.down = True  # an outage while the stream goes on: the rest waits in SQLite
            if len(acked) == 600:
                break
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        delivered_before = len(es.creates)
        es.down = False
        again = _child(db, es.url, "drain")
        out, _ = again.communicate(timeout=120)
        assert again.returncode == 0 and out.strip() == "left 0"
    assert 0 < delivered_before < len(acked)  # the crash did cut the delivery short
    assert len(es.creates) == len(set(es.creates))  # never twice
    assert set(acked) <= set(es.creates)  # everything acknowledged
