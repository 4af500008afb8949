"""The events-heavy soak (``bench/soak.py --events RATE``): a separate sidecar process taking prediction events at
a steady rate for a long time, its RSS sampled every ``--sample-secs``.

The sidecar is ``python -m sidecar.cli run --config`` on ``sidecar.example.yaml`` with Triton, GPUs, alerting and
traces off (the drift check with its pinned reference of 5,000 events, the example's business check and one on
``features.f0``, evaluated every ``checks.eval_interval_secs``), so its RSS is the events path's own. The sender
(this process) posts batches of 500 events with 20 numeric features and a score to ``/v1/events`` at ``RATE``
events/s from ``--senders`` threads (4; one keep-alive connection each), paced by the clock; the bodies come from a
pool of 64 made up front (numpy normal values, no timestamp, so the sidecar stamps each on arrival). Every answer
must be 200 with all 500 accepted. Each sample prints: minutes, RSS (``process_resident_memory_bytes``), the
sidecar's CPU over the interval as a share of one core (``/proc/PID/stat``), events sent and
``sidecar_events_received_total``. At the end: RSS after warm-up against the largest and the last after it (target:
within 10%), and sent == accepted == counted.

    .venv/bin/python bench/soak.py --events 20000 --minutes 30 --warmup-minutes 5 --sample-secs 60 [--senders 4]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson
import yaml

ROOT = Path(__file__).resolve().parent.parent
BATCH = 500
FEATURES = 20
POOL = 64


def _config(workdir: Path, port: int) -> dict[str, Any]:
    raw = yaml.safe_load((ROOT / "sidecar.example.yaml").read_text())
    raw["store"] = {"path": str(workdir / "state.sqlite")}
    raw["server"] = {**raw.get("server", {}), "host": "127.0.0.1", "port": port, "max_body_bytes": 16 * 1024 * 1024}
    for off in ("triton", "gpu", "alerting", "traces"):
        raw[off] = {"enabled": False}
    raw["checks"]["business"]["checks"]["f0_mean"] = {
        "model": "ctr",
        "field": "features.f0",
        "aggregate": "mean",
        "window_secs": 3600,
        "baseline_secs": 86400,
        "compare": "relative",
        "direction": "down",
        "threshold": 0.15,
    }
    return raw


def _bodies() -> list[bytes]:
    rng = np.random.default_rng(31)
    out = []
    for _ in range(POOL):
        feats = rng.normal(np.arange(FEATURES), 1.0, size=(BATCH, FEATURES)).tolist()
        scores = rng.random(BATCH).tolist()
        names = [f"f{j}" for j in range(FEATURES)]
        events = [
            {"model": "ctr", "version": "1", "features": dict(zip(names, row, strict=True)), "score": s}
            for row, s in zip(feats, scores, strict=True)
        ]
        out.append(orjson.dumps({"events": events}))
    return out


def _metric(text: str, name: str) -> float:
    m = re.search(rf"^{name}(?:\{{[^}}]*\}})? (\S+)$", text, re.MULTILINE)
    return float(m.group(1)) if m else 0.0


def _cpu_secs(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


class _Sender(threading.Thread):
    """Sends every ``of``-th batch of the schedule (batch j at ``t0 + j * interval``), from ``k``, until ``end``
    (a sender behind its schedule sends at once, and stops at ``end`` all the same); several senders, so one slow
    answer does not hold the rate down. ``behind``: the most seconds a batch went out after its time."""

    def __init__(self, base: str, bodies: list[bytes], k: int, of: int, interval: float, t0: float, end: float):
        super().__init__(daemon=True)
        self.base, self.bodies, self.k, self.of = base, bodies, k, of
        self.interval, self.t0, self.end = interval, t0, end
        self.sent = self.accepted = 0
        self.behind = 0.0
        self.error: str | None = None

    def run(self) -> None:
        headers = {"content-type": "application/json"}
        with httpx.Client(base_url=self.base, timeout=30, headers=headers) as client:
            j = self.k
            while (due := self.t0 + j * self.interval) < self.end and time.monotonic() < self.end:
                if (wait := due - time.monotonic()) > 0:
                    time.sleep(wait)
                else:
                    self.behind = max(self.behind, -wait)  # how late the latest batch went out
                r = client.post("/v1/events", content=self.bodies[j % POOL])
                if r.status_code != 200 or r.json()["accepted"] != BATCH:
                    self.error = f"{r.status_code} {r.text[:200]}"
                    return
                self.sent += BATCH
                self.accepted += BATCH
                j += self.of


def run(args: argparse.Namespace, workdir: Path, port: int) -> int:
    cfg_path = workdir / "sidecar.yaml"
    cfg_path.write_text(yaml.safe_dump(_config(workdir, port)))
    base = f"http://127.0.0.1:{port}"
    bodies = _bodies()
    with (workdir / "sidecar.log").open("ab") as log:
        sidecar = subprocess.Popen(
            [sys.executable, "-m", "sidecar.cli", "run", "--config", str(cfg_path)], cwd=ROOT, stdout=log, stderr=log
        )
    try:
        client = httpx.Client(base_url=base, timeout=30, headers={"content-type": "application/json"})
        deadline = time.monotonic() + 60
        while True:
            try:
                if client.get("/healthz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or sidecar.poll() is not None:
                print("sidecar did not start; see", workdir / "sidecar.log")
                return 1
            time.sleep(0.2)
        print(
            f"events soak: {args.events:,.0f} events/s ({args.events / BATCH:.0f} requests/s of {BATCH} events, "
            f"{FEATURES} features and a score) for {args.minutes:g} min, RSS every {args.sample_secs:g} s, "
            f"warm-up {args.warmup_minutes:g} min; sidecar pid {sidecar.pid} at {base}; workdir {workdir}",
            flush=True,
        )
        print(f"{'min':>6} {'RSS MiB':>8} {'CPU %':>6} {'sent':>11} {'counted':>11}", flush=True)
        t0 = time.monotonic()
        end = t0 + args.minutes * 60
        senders = [_Sender(base, bodies, k, args.senders, BATCH / args.events, t0, end) for k in range(args.senders)]
        for snd in senders:
            snd.start()
        next_sample = t0 + args.sample_secs
        cpu0, cpu_t0 = _cpu_secs(sidecar.pid), t0
        rows: list[tuple[float, float]] = []
        while (now := time.monotonic()) < end and all(s.error is None for s in senders):
            if now < next_sample:
                time.sleep(min(1.0, next_sample - now))
                continue
            text = client.get("/metrics").text
            rss = _metric(text, "process_resident_memory_bytes") / 2**20
            cpu = _cpu_secs(sidecar.pid)
            share = (cpu - cpu0) / (now - cpu_t0)
            cpu0, cpu_t0 = cpu, now
            minute = (now - t0) / 60
            rows.append((minute, rss))
            counted = _metric(text, "sidecar_events_received_total")
            sent = sum(s.sent for s in senders)
            print(f"{minute:>6.1f} {rss:>8.1f} {share:>6.1%} {sent:>11,} {counted:>11,.0f}", flush=True)
            next_sample += args.sample_secs
        for snd in senders:
            snd.join()
        if errors := [s.error for s in senders if s.error]:
            print("a request failed:", errors[0])
            return 1
        elapsed = time.monotonic() - t0
        sent = sum(s.sent for s in senders)
        accepted = sum(s.accepted for s in senders)
        behind = max(s.behind for s in senders)
        counted = _metric(client.get("/metrics").text, "sidecar_events_received_total")
        after = [r for m, r in rows if m >= args.warmup_minutes] or [rows[-1][1]]
        warm, peak, last = after[0], max(after), after[-1]
        change = max(abs(peak - warm), abs(last - warm)) / warm
        print(
            f"RSS after warm-up {warm:.1f} MiB, largest after it {peak:.1f} MiB, last {last:.1f} MiB: "
            f"{change:.1%} from warm-up -> {'FLAT' if change <= 0.10 else 'NOT FLAT'} (target within 10%)"
        )
        print(
            f"sent {sent:,} accepted {accepted:,} counted {counted:,.0f} -> "
            f"{'OK' if sent == accepted == counted else 'LOST'}; achieved {sent / elapsed:,.0f} events/s over "
            f"{elapsed / 60:.1f} min (asked {args.events:,.0f}; {args.senders} senders, a batch at most {behind:.1f} s "
            "late: a rate below the one asked is the machine's, not the sidecar's refusal, which would have failed)"
        )
        return 0 if change <= 0.10 and sent == accepted == counted else 2
    finally:
        if sidecar.poll() is None:
            sidecar.terminate()
            try:
                sidecar.wait(15)
            except subprocess.TimeoutExpired:
                sidecar.kill()
