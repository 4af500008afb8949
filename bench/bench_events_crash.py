"""How many acknowledged events a kill -9 loses: the figure behind ``POST /v1/events``'s "at most once" in
docs/reliability.md.

Each run starts a real ``sidecar run`` (events endpoint, one business check, the store on disk, Triton off),
posts bursts of 100 events from one keep-alive connection and counts every event answered 200, kills the
process with SIGKILL at a random moment (seeded), and then reads what a restarted sidecar would load: the
business check's persisted buckets (``business_buckets``, the ``cur`` tier's ``count``, which is what
``BucketStore.load`` restores on start). Lost = acknowledged - persisted. The check persists after every
evaluation round (``checks.eval_interval_secs``), so the expected loss is what arrived since the last round.

    .venv/bin/python bench/bench_events_crash.py [--runs 5] [--seed 0] [--eval-interval 15]
"""

from __future__ import annotations

import argparse
import http.client
import os
import random
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sidecar.demo.tritonserver import free_port  # noqa: E402


def _config(db: Path, port: int, eval_secs: float) -> dict[str, object]:
    return {
        "server": {"host": "127.0.0.1", "port": port},
        "store": {"path": str(db)},
        "triton": {"enabled": False},
        "gpu": {"enabled": False},
        "traces": {"enabled": False},
        "events": {"enabled": True},
        "alerting": {"enabled": False},
        "checks": {
            "eval_interval_secs": eval_secs,
            "drift": {"enabled": False},
            "business": {
                "enabled": True,
                "checks": {
                    "score_mean": {
                        "model": "ctr",
                        "field": "score",
                        "aggregate": "mean",
                        "window_secs": 3600,
                        "baseline_secs": 86400,
                        "compare": "relative",
                        "direction": "down",
                        "threshold": 0.15,
                    }
                },
            },
        },
    }


def _wait_ready(port: int, proc: subprocess.Popen[bytes], secs: float = 60) -> None:
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise SystemExit(f"sidecar exited with {proc.returncode} before it was ready")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            c.request("GET", "/healthz")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit("sidecar not ready in time")


def _persisted(db: Path) -> int:
    con = sqlite3.connect(db)
    try:
        row = con.execute("SELECT COALESCE(SUM(count), 0) FROM business_buckets WHERE tier = 'cur'").fetchone()
        return int(row[0])
    finally:
        con.close()


def one_run(rnd: random.Random, eval_secs: float, workdir: Path, k: int) -> tuple[int, int, float]:
    db = workdir / f"run{k}.sqlite"
    port = free_port()
    cfg_path = workdir / f"run{k}.yaml"
    cfg_path.write_text(yaml.safe_dump(_config(db, port, eval_secs)))
    exe = str(Path(sys.executable).with_name("sidecar"))  # the console script `sidecar run`, as deployed
    proc = subprocess.Popen(
        [exe, "run", "--config", str(cfg_path)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        _wait_ready(port, proc)
        started = time.monotonic()
        kill_after = rnd.uniform(2 * eval_secs, 4 * eval_secs)  # a random point between two rounds
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        acked = 0
        while time.monotonic() - started < kill_after:
            now = time.time()
            body = orjson.dumps(
                [{"model": "ctr", "version": "1", "timestamp": now, "score": rnd.random()} for _ in range(100)]
            )
            conn.request("POST", "/v1/events", body=body, headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            doc = orjson.loads(r.read())
            if r.status == 200:
                acked += int(doc["accepted"])
            time.sleep(rnd.uniform(0.0, 0.02))  # bursts with gaps, not a steady stream
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        alive = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return acked, _persisted(db), alive


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eval-interval", type=float, default=15.0, help="checks.eval_interval_secs")
    a = ap.parse_args()
    rnd = random.Random(a.seed)
    print(
        f"kill -9 during event bursts: {a.runs} runs, seed {a.seed}, checks.eval_interval_secs "
        f"{a.eval_interval:g} (business buckets are persisted after every round)"
    )
    lost: list[float] = []
    with tempfile.TemporaryDirectory() as d:
        for k in range(a.runs):
            acked, kept, alive = one_run(rnd, a.eval_interval, Path(d), k)
            frac = (acked - kept) / acked if acked else 0.0
            lost.append(frac)
            since = alive % a.eval_interval
            print(
                f"run {k}: acknowledged {acked:,}, persisted {kept:,}, lost {acked - kept:,} ({frac:.1%}); "
                f"killed {alive:.1f} s after ready, about {since:.1f} s after the last round",
                flush=True,
            )
    print(f"lost fraction: min {min(lost):.1%}, median {statistics.median(lost):.1%}, max {max(lost):.1%}")


if __name__ == "__main__":
    main()
