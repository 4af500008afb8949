"""What the sidecar costs Triton: Triton's throughput and p99 latency without the sidecar, and with it scraping
Triton's /metrics every second and receiving every request's spans (OTLP, ``--trace-config rate=1``).

One real Triton 2.51 (the nvidia-pytriton wheel) serves the demo repository, started once with
``--trace-config mode=opentelemetry`` pointing its OTLP/HTTP exporter at the sidecar's /v1/traces. Runs
alternate A/B/C, C/B/A, ... to cancel drift on a shared machine, and the medians are reported:

* A "without": no sidecar process; Triton's tracing turned off at run time (``POST /v2/trace/setting``
  ``trace_level: ["OFF"]``), so Triton does no tracing work at all;
* C "scrape only": the same sidecar process, Triton's tracing off (isolates what scraping costs);
* D (``--tracing-alone``): Triton tracing every request as in B, but no sidecar listening (Triton's exporter
  builds and serialises the spans, and its POST is refused): Triton's own cost of tracing;
* B "with": a fresh ``sidecar run`` process (the demo's full config: Triton scrape every 1 s, failure join, the
  OTLP receiver, events, drift, business checks, alerting), and Triton tracing every request
  (``trace_rate 1``, ``trace_level TIMESTAMPS``). B therefore includes Triton's own cost of tracing.

Load is ``wrk`` (a Lua script POSTing a KServe v2 JSON body to ctr v1), enough connections to saturate Triton.
By default Triton and the sidecar share CPU 0 and wrk runs on CPU 1 (``taskset``): the sidecar competes
directly with Triton for its core, the worst case; ``--no-pin`` leaves placement to the kernel.

    .venv/bin/python bench/bench_overhead.py [--quick] [--rounds N] [--secs S] [--connections C] [--no-pin]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BODY = '{"inputs":[{"name":"x","shape":[1,4],"datatype":"FP32","data":[0.1,0.2,0.3,0.4]}]}'
LUA = f"""wrk.method = "POST"
wrk.body = '{BODY}'
wrk.headers["Content-Type"] = "application/json"
"""


def _wait(cond: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if cond():  # type: ignore[operator]
                return
        time.sleep(0.1)
    raise TimeoutError(what)


def _trace(triton_http: str, on: bool) -> None:
    setting = {"trace_level": ["TIMESTAMPS"], "trace_rate": "1"} if on else {"trace_level": ["OFF"]}
    r = httpx.post(f"{triton_http}/v2/trace/setting", json=setting, timeout=10)
    r.raise_for_status()
    got = r.json()
    want = ["TIMESTAMPS"] if on else ["OFF"]
    if got.get("trace_level") != want:
        raise RuntimeError(f"Triton did not take the trace setting {setting}: {got}")


def _wrk(url: str, lua: Path, secs: float, connections: int, threads: int, cpus: str | None) -> dict[str, float]:
    cmd = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{secs:g}s", "--latency", "-s", str(lua), url]
    if cpus:
        cmd = ["taskset", "-c", cpus, *cmd]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    p99 = _ms(re.search(r"^\s+99%\s+(\S+)", out, re.MULTILINE).group(1))  # type: ignore[union-attr]
    p50 = _ms(re.search(r"^\s+50%\s+(\S+)", out, re.MULTILINE).group(1))  # type: ignore[union-attr]
    total = float(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    return {"rps": rps, "p50_ms": p50, "p99_ms": p99, "requests": total,
            "non2xx": float(bad.group(1)) if bad else 0.0,
            "socket_errors": float(sum(int(g) for g in errors.groups())) if errors else 0.0}


def _ms(s: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s)", s)
    if not m:
        raise ValueError(s)
    return float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1000.0}[m.group(2)]


def _cpu_secs(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _metric(text: str, name: str) -> float:
    return sum(float(m.group(1)) for m in re.finditer(rf"^{name}(?:\{{[^}}]*\}})? (\S+)$", text, re.MULTILINE))


class Sidecar:
    def __init__(self, cfg_path: Path, port: int, log: Path, cpus: str | None) -> None:
        self.cfg_path, self.port, self.log, self.cpus = cfg_path, port, log, cpus
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        cmd = [sys.executable, "-m", "sidecar.cli", "run", "--config", str(self.cfg_path)]
        if self.cpus:
            cmd = ["taskset", "-c", self.cpus, *cmd]
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        _wait(lambda: httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200, 60, "sidecar start")
        # Running for real: Triton scraped at least once.
        _wait(lambda: _metric(self.metrics(), "sidecar_triton_scrapes_total") >= 1, 30, "first scrape")

    def metrics(self) -> str:
        return httpx.get(f"{self.url}/metrics", timeout=10).text

    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid  # taskset execs the sidecar in place: the same pid either way

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 rounds of 5 s (default: 4 rounds of 10 s)")
    ap.add_argument("--rounds", type=int, default=None, help="rounds of A, B and C")
    ap.add_argument("--secs", type=float, default=None, help="seconds of load per run")
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tracing-alone", action="store_true",
                    help="add condition D: Triton tracing rate=1 with no sidecar (its exporter's connections are "
                         "refused), to separate Triton's own cost of tracing from the sidecar's")
    ap.add_argument("--no-pin", action="store_true", help="do not pin Triton+sidecar to CPU 0 and wrk to CPU 1")
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    rounds = args.rounds or (2 if args.quick else 4)
    secs = args.secs or (5.0 if args.quick else 10.0)
    if shutil.which("wrk") is None:
        print("wrk is not installed (Debian package wrk)")
        return 1
    pin = not args.no_pin and (os.cpu_count() or 1) >= 2
    server_cpus, load_cpus = ("0", "1") if pin else (None, None)

    from sidecar.demo.run import demo_config
    from sidecar.demo.tritonserver import TritonServer, demo_model_repository, free_port

    wd = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="sidecar-overhead-"))
    wd.mkdir(parents=True, exist_ok=True)
    port = free_port()
    trace_args = ["--trace-config", "mode=opentelemetry",
                  "--trace-config", f"opentelemetry,url=http://127.0.0.1:{port}/v1/traces",
                  "--trace-config", "rate=1", "--trace-config", "level=OFF"]
    triton = TritonServer(demo_model_repository(), wd / "triton", extra_args=trace_args)
    lua = wd / "infer.lua"
    lua.write_text(LUA)
    sidecar: Sidecar | None = None
    try:
        triton.start()
        if server_cpus:
            # The whole process group: the server and its Python-backend stub processes.
            pids = subprocess.run(["pgrep", "-g", str(triton.proc.pid)], capture_output=True,  # type: ignore[union-attr]
                                  text=True).stdout.split()
            for pid in pids:
                subprocess.run(["taskset", "-a", "-p", "-c", server_cpus, pid], capture_output=True, check=False)
        cfg = demo_config(triton.http_url, triton.metrics_url, port, wd)
        cfg["triton"]["interval_secs"] = 1.0
        cfg["gpu"] = {"enabled": False}
        cfg_path = wd / "sidecar.yaml"
        cfg_path.write_text(yaml.safe_dump(cfg))
        sidecar = Sidecar(cfg_path, port, wd / "sidecar.log", server_cpus)
        url = f"{triton.http_url}/v2/models/ctr/versions/1/infer"
        order: tuple[str, ...] = ("A", "B", "C", "D") if args.tracing_alone else ("A", "B", "C")
        print(f"config: Triton 2.51 (nvidia-pytriton wheel), demo repository, load on ctr v1 (dynamic batching, "
              f"1 CPU instance); wrk -t{args.threads} -c{args.connections} -d{secs:g}s, "
              f"{rounds} rounds of {', '.join(order)} (order reversed every other round), medians; "
              f"{'Triton+sidecar on CPU 0, wrk on CPU 1' if pin else 'no CPU pinning'}; "
              f"B = sidecar (Triton scrape every 1 s, failure join every 5 s, OTLP receiver, checks every 5 s) + "
              f"Triton OTLP tracing rate=1 level=TIMESTAMPS to {sidecar.url}/v1/traces; A = no sidecar, "
              f"Triton tracing level=OFF; C = the sidecar with Triton tracing level=OFF; "
              f"D = Triton tracing, no sidecar; workdir {wd}", flush=True)
        _trace(triton.http_url, False)
        _wrk(url, lua, 3, args.connections, args.threads, load_cpus)  # warm-up, not counted
        runs: dict[str, list[dict[str, float]]] = {"A": [], "B": [], "C": [], "D": []}
        for r in range(rounds):
            for cond in order if r % 2 == 0 else order[::-1]:
                spans = 0.0
                if cond in ("B", "C"):
                    sidecar.start()
                    _trace(triton.http_url, cond == "B")
                    before = _metric(sidecar.metrics(), "sidecar_otlp_spans_received_total")
                    cpu0 = _cpu_secs(sidecar.pid())
                if cond == "D":
                    _trace(triton.http_url, True)
                got = _wrk(url, lua, secs, args.connections, args.threads, load_cpus)
                if cond == "D":
                    _trace(triton.http_url, False)
                if cond in ("B", "C"):
                    got["sidecar_cpu"] = (_cpu_secs(sidecar.pid()) - cpu0) / secs
                    _trace(triton.http_url, False)
                    # Triton's exporter sends in batches: wait until the count stops growing.
                    last, stable = -1.0, 0
                    for _ in range(100):
                        now = _metric(sidecar.metrics(), "sidecar_otlp_spans_received_total")
                        stable = stable + 1 if now == last else 0
                        last = now
                        if stable >= 5:
                            break
                        time.sleep(0.2)
                    spans = last - before
                    got["spans"] = spans
                    got["scrapes"] = _metric(sidecar.metrics(), "sidecar_triton_scrapes_total")
                    sidecar.stop()
                runs[cond].append(got)
                extra = (f", spans received {spans:.0f} ({spans / max(got['requests'], 1):.2f} per request), "
                         f"scrapes {got['scrapes']:.0f}, sidecar used {got['sidecar_cpu']:.0%} of a core"
                         ) if cond in ("B", "C") else ""
                print(f"round {r + 1} {cond}: {got['rps']:,.0f} req/s, p50 {got['p50_ms']:.2f} ms, p99 "
                      f"{got['p99_ms']:.2f} ms, non-2xx {got['non2xx']:.0f}, socket errors "
                      f"{got['socket_errors']:.0f}{extra}", flush=True)
        med = {c: {k: statistics.median(run[k] for run in v) for k in ("rps", "p50_ms", "p99_ms")}
               for c, v in runs.items() if v}
        print(f"{'':28s} {'req/s':>10} {'p50 ms':>8} {'p99 ms':>8}")
        print(f"{'A without sidecar (median)':28s} {med['A']['rps']:>10,.0f} {med['A']['p50_ms']:>8.2f} "
              f"{med['A']['p99_ms']:>8.2f}")
        print(f"{'B with sidecar (median)':28s} {med['B']['rps']:>10,.0f} {med['B']['p50_ms']:>8.2f} "
              f"{med['B']['p99_ms']:>8.2f}")
        print(f"{'C sidecar, no spans (median)':28s} {med['C']['rps']:>10,.0f} {med['C']['p50_ms']:>8.2f} "
              f"{med['C']['p99_ms']:>8.2f}")
        loss = 1 - med["B"]["rps"] / med["A"]["rps"]
        print(f"throughput B/A = {med['B']['rps'] / med['A']['rps']:.3f} (loss {loss:+.1%}; target under 3%), "
              f"p99 B/A = {med['B']['p99_ms'] / med['A']['p99_ms']:.3f}; per-round A rps spread "
              f"{min(x['rps'] for x in runs['A']):,.0f}..{max(x['rps'] for x in runs['A']):,.0f}")
        if "D" in med:
            print(f"Triton's tracing alone (D/A, no receiver) = {med['D']['rps'] / med['A']['rps']:.3f} (loss "
                  f"{1 - med['D']['rps'] / med['A']['rps']:+.1%}), p99 D/A = "
                  f"{med['D']['p99_ms'] / med['A']['p99_ms']:.3f}")
        print(f"scrape only (C/A) = {med['C']['rps'] / med['A']['rps']:.3f} (loss "
              f"{1 - med['C']['rps'] / med['A']['rps']:+.1%}), p99 C/A = {med['C']['p99_ms'] / med['A']['p99_ms']:.3f}")
        return 0
    finally:
        if sidecar is not None:
            sidecar.stop()
        triton.stop()


if __name__ == "__main__":
    sys.exit(main())
