"""What the sidecar costs Triton: Triton's throughput and p99 latency without the sidecar, and with it scraping
Triton's /metrics every second and receiving every request's spans (OTLP, ``--trace-config rate=1``).

One real Triton 2.51 (the nvidia-pytriton wheel) serves the demo repository, started once with
``--trace-config mode=opentelemetry`` pointing its OTLP/HTTP exporter at one port. Rounds alternate A, B, E, C
then C, E, B, A, ... to cancel drift on a shared machine; medians are reported, and each ratio's spread over
rounds (min..max of the per-round ratios):

* A "without": no sidecar; Triton's tracing off at run time (``POST /v2/trace/setting`` ``trace_level: ["OFF"]``);
* B "with": a fresh ``sidecar run`` (the demo's full config: Triton scrape every 1 s, failure join, the OTLP
  receiver, events, drift, business checks, alerting), Triton tracing every request (rate 1, TIMESTAMPS);
* E "tracing to a null collector": Triton tracing as in B, sent to ``bench/null_collector.py`` on the same
  port (reads each body, answers 200 ``{}``). E replaces the former D (tracing with nothing listening): a
  refused export takes the exporter's failure path, which is not what a deployment pays;
* C "scrape only": the sidecar, Triton's tracing off.

B/E is the sidecar's own cost given the tracing the operator turned on; E/A is Triton's cost of tracing (not
the sidecar's); B/A is the total. Spans received are counted in B (``sidecar_otlp_spans_received_total``) and in
E (the collector parses the kept bodies after the run), and a run whose spans per request fall short of the
best run's is flagged, so neither baseline is cheaper because Triton gave up exporting.

Placement (``--placement``): ``separate`` (default, as deployed: a sidecar container has its own CPU) puts
Triton alone on CPU 0 and the sidecar, the null collector and wrk on CPU 1; ``isolated`` puts wrk with Triton
on CPU 0 and the sidecar or the collector alone on CPU 1, so the sidecar's CPU cannot slow the load generator
(on a 2-CPU machine the only way to keep wrk off the sidecar's CPU; Triton is slower, the same in every
condition); ``shared`` puts Triton, the sidecar and the collector on CPU 0 (wrk on CPU 1), the worst case;
``none`` pins nothing.

    .venv/bin/python bench/bench_overhead.py [--quick] [--placement separate|isolated|shared|none]
                                             [--rounds N] [--secs S] [--trace-rate N]
                                             [--request-records config|on|off|both]

``--trace-rate N`` makes Triton trace one request in N in B and E (default 1, every request: the worst case the
target is about). A deployment with the tracing governor on traces 1 in 1000 while healthy.

``--trace-mode file`` traces to Triton's own trace files instead (``mode=triton``, ``triton,file=PATH``,
``triton,log-frequency=N``, a new ``PATH.K`` every N traces): in B the sidecar follows them
(``traces.file.path``, ``delete_after_read``), in E nobody reads them (the files are counted, then deleted,
after the run). Requests traced are counted in B (``sidecar_trace_file_requests_total``) and E (distinct ids in
the files). Triton's file tracing costs it far less than its OpenTelemetry exporter does (docs/reliability-measured.md).

``--request-records`` turns the request join (per-request records) on or off in B and C; ``both`` adds a
condition J, B with the join on, alternated with the others in the same run (J/E against B/E, and J/B).

Default: 4 rounds x 4 conditions x 10 s, about 4 minutes; ``--quick`` 2 rounds of 5 s, about 1.5 minutes.
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


def _trace(triton_http: str, on: bool, rate: int = 1) -> None:
    setting = {"trace_level": ["TIMESTAMPS"], "trace_rate": str(rate)} if on else {"trace_level": ["OFF"]}
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
    return {
        "rps": rps,
        "p50_ms": p50,
        "p99_ms": p99,
        "requests": total,
        "non2xx": float(bad.group(1)) if bad else 0.0,
        "socket_errors": float(sum(int(g) for g in errors.groups())) if errors else 0.0,
    }


def _ms(s: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s)", s)
    if not m:
        raise ValueError(s)
    return float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1000.0}[m.group(2)]


def _cpu_secs(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _peak_rss_mib(pid: int) -> float:
    """The process's peak resident memory so far (VmHWM), MiB; 0 where /proc does not say."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _group_cpu_secs(pgid: int) -> float:
    """CPU seconds used so far by every process of a group (Triton and its Python-backend stubs)."""
    pids = subprocess.run(["pgrep", "-g", str(pgid)], capture_output=True, text=True).stdout.split()
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError, IndexError, ValueError):
            total += _cpu_secs(int(pid))
    return total


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


class NullCollector:
    def __init__(self, port: int, cpus: str | None) -> None:
        self.port, self.cpus = port, cpus
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        cmd = [sys.executable, str(ROOT / "bench" / "null_collector.py"), str(self.port)]
        if self.cpus:
            cmd = ["taskset", "-c", self.cpus, *cmd]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait(lambda: self.count() is not None, 30, "null collector start")

    def count(self) -> dict[str, float]:
        return httpx.get(f"http://127.0.0.1:{self.port}/count", timeout=60).json()

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            proc.wait(10)


PLACEMENTS = {
    "separate": ("0", "1", "1"),
    "isolated": ("0", "1", "0"),
    "shared": ("0", "0", "1"),
    "none": (None, None, None),
}
PLACED = {
    "separate": "Triton alone on CPU 0; sidecar, null collector and wrk on CPU 1 (as deployed)",
    "isolated": "Triton and wrk on CPU 0; sidecar and null collector alone on CPU 1 (the sidecar cannot slow wrk)",
    "shared": "Triton, sidecar and null collector on CPU 0, wrk on CPU 1 (worst case)",
    "none": "no CPU pinning",
}


def _settle(read: object, quiet_s: float = 1.0) -> float:
    """Triton's exporter sends in batches (and the sidecar polls trace files): wait until the count has not grown
    for ``quiet_s``, at most 20 s."""
    last, stable = -1.0, 0
    for _ in range(100):
        now = float(read())  # type: ignore[operator]
        stable = stable + 1 if now == last else 0
        last = now
        if stable >= quiet_s / 0.2:
            break
        time.sleep(0.2)
    return last


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 rounds of 5 s (default: 4 rounds of 10 s)")
    ap.add_argument("--rounds", type=int, default=None, help="rounds of A, B, E and C")
    ap.add_argument("--secs", type=float, default=None, help="seconds of load per run")
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--placement", choices=sorted(PLACEMENTS), default="separate")
    ap.add_argument(
        "--trace-rate",
        type=int,
        default=1,
        metavar="N",
        help="Triton traces one request in N in B and E (1: every request, the worst case; the "
        "tracing governor's healthy default is 1000)",
    )
    ap.add_argument(
        "--trace-mode",
        choices=("otlp", "file"),
        default="otlp",
        help="otlp: Triton's OpenTelemetry exporter to the sidecar's /v1/traces (default); file: "
        "Triton's mode=triton trace files, followed by the sidecar",
    )
    ap.add_argument(
        "--log-frequency",
        type=int,
        default=1000,
        metavar="N",
        help="with --trace-mode file: Triton starts a new trace file every N traces",
    )
    ap.add_argument(
        "--request-records",
        choices=("config", "on", "off", "both"),
        default="config",
        help="per-request records (the request join, alerting.audit.requests) in B and C: as the config's "
        "default has them, on, or off; both: off in B and C, and a condition J (B with the join on) alternated "
        "with them in the same run",
    )
    ap.add_argument("--workdir", default=None)
    ap.add_argument(
        "--max-crashes", type=int, default=4, help="Triton crashes survived (each voids one run) before giving up"
    )
    args = ap.parse_args()
    if args.trace_rate < 1:
        ap.error("--trace-rate must be at least 1")
    t_start = time.monotonic()
    rounds = args.rounds or (2 if args.quick else 4)
    secs = args.secs or (5.0 if args.quick else 10.0)
    if shutil.which("wrk") is None:
        print("wrk is not installed (Debian package wrk)")
        return 1
    placement = args.placement if (os.cpu_count() or 1) >= 2 else "none"
    triton_cpus, sidecar_cpus, load_cpus = PLACEMENTS[placement]

    from sidecar.demo.run import demo_config
    from sidecar.demo.tritonserver import TritonServer, demo_model_repository, free_port

    wd = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="sidecar-overhead-"))
    wd.mkdir(parents=True, exist_ok=True)
    port = free_port()
    file_mode = args.trace_mode == "file"
    trace_dir = wd / "trace-files"
    trace_dir.mkdir(exist_ok=True)
    trace_path = trace_dir / "trace.json"
    if file_mode:
        mode = ["mode=triton", f"triton,file={trace_path}", f"triton,log-frequency={args.log_frequency}"]
        counted = "sidecar_trace_file_requests_total"
    else:
        mode = ["mode=opentelemetry", f"opentelemetry,url=http://127.0.0.1:{port}/v1/traces"]
        counted = "sidecar_otlp_spans_received_total"
    trace_args = [arg for setting in [*mode, "rate=1", "level=OFF"] for arg in ("--trace-config", setting)]
    triton = TritonServer(demo_model_repository(), wd / "triton", extra_args=trace_args)
    lua = wd / "infer.lua"
    lua.write_text(LUA)
    sidecar: Sidecar | None = None
    sidecars: dict[str, Sidecar] = {}
    null = NullCollector(port, sidecar_cpus)
    crashes: list[str] = []

    def start_triton() -> None:
        triton.start()
        if triton_cpus:
            # The whole process group: the server and its Python-backend stub processes.
            pids = subprocess.run(
                ["pgrep", "-g", str(triton.proc.pid)],  # type: ignore[union-attr]
                capture_output=True,
                text=True,
            ).stdout.split()
            for pid in pids:
                subprocess.run(["taskset", "-a", "-p", "-c", triton_cpus, pid], capture_output=True, check=False)

    def triton_signals() -> int:
        try:
            return triton.log_path.read_text(errors="replace").count("Signal (")
        except OSError:
            return 0

    try:
        start_triton()
        cfg = demo_config(triton.http_url, triton.metrics_url, port, wd)
        cfg["triton"]["interval_secs"] = 1.0
        cfg["gpu"] = {"enabled": False}
        if file_mode:
            cfg["traces"]["file"] = {"path": str(trace_path), "delete_after_read": True}
        requests_cfg = cfg["alerting"].setdefault("audit", {}).setdefault("requests", {})
        if args.request_records != "config":
            requests_cfg["enabled"] = args.request_records == "on"
        cfg_path = wd / "sidecar.yaml"
        cfg_path.write_text(yaml.safe_dump(cfg))
        sidecar = Sidecar(cfg_path, port, wd / "sidecar.log", sidecar_cpus)
        sidecars.update({"B": sidecar, "C": sidecar})
        order: tuple[str, ...] = ("A", "B", "E", "C")
        if args.request_records == "both":
            requests_cfg["enabled"] = True
            (wd / "sidecar-join.yaml").write_text(yaml.safe_dump(cfg))
            sidecars["J"] = Sidecar(wd / "sidecar-join.yaml", port, wd / "sidecar.log", sidecar_cpus)
            order = ("A", "B", "J", "E", "C")
        url = f"{triton.http_url}/v2/models/ctr/versions/1/infer"
        print(f"placement: {placement}: {PLACED[placement]}", flush=True)
        print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
        print(
            f"config: Triton 2.51 (nvidia-pytriton wheel), demo repository, load on ctr v1 (dynamic batching, "
            f"1 CPU instance); wrk -t{args.threads} -c{args.connections} -d{secs:g}s, "
            f"{rounds} rounds of {', '.join(order)} (order reversed every other round), medians; "
            + "B = sidecar (Triton scrape every 1 s, failure join every 5 s, OTLP receiver, checks every 5 s) + "
            + (
                f"Triton trace files (mode=triton, log-frequency={args.log_frequency}) followed by the sidecar, "
                f"rate={args.trace_rate} level=TIMESTAMPS; A = no sidecar, tracing OFF; E = trace files nobody reads; "
                if file_mode
                else f"Triton OTLP tracing rate={args.trace_rate} level=TIMESTAMPS to port {port}; "
                f"A = no sidecar, tracing OFF; E = tracing to a null collector on port {port}; "
            )
            + f"C = the sidecar, tracing OFF; request join (per-request records): {args.request_records}"
            + ("; J = B with the request join on; " if "J" in order else "; ")
            + f"workdir {wd}",
            flush=True,
        )
        _trace(triton.http_url, False)
        _wrk(url, lua, 3, args.connections, args.threads, load_cpus)  # warm-up, not counted
        runs: dict[str, list[dict[str, float]]] = {c: [] for c in order}
        for r in range(rounds):
            pending = list(order if r % 2 == 0 else order[::-1])
            while pending:
                cond = pending.pop(0)
                if file_mode:
                    # Files left by an earlier run (its last, or E's) are not this run's.
                    _clear(trace_dir)
                sidecar = sidecars.get(cond)
                if sidecar is not None:
                    sidecar.start()
                    before = _metric(sidecar.metrics(), counted)
                    cpu0 = _cpu_secs(sidecar.pid())
                if cond == "E" and not file_mode:
                    null.start()
                signals = triton_signals()
                crashed = ""
                try:
                    _trace(triton.http_url, cond in ("B", "E", "J"), args.trace_rate)
                    tcpu0 = _group_cpu_secs(triton.proc.pid)  # type: ignore[union-attr]
                    got = _wrk(url, lua, secs, args.connections, args.threads, load_cpus)
                    tcpu = _group_cpu_secs(triton.proc.pid) - tcpu0  # type: ignore[union-attr]
                    _trace(triton.http_url, False)
                except (httpx.HTTPError, subprocess.CalledProcessError, AttributeError) as exc:
                    crashed = f"{type(exc).__name__}"
                if triton_signals() > signals:
                    crashed = "a fatal signal in its log"
                if crashed:
                    # Triton 2.51's OpenTelemetry exporter corrupts its heap now and then under rate=1 at
                    # saturation (SIGABRT "corrupted double-linked list", SIGSEGV), with the sidecar or the null
                    # collector as receiver. That round of that condition is void: restart Triton, run it again.
                    crashes.append(f"round {r + 1} {cond}")
                    if len(crashes) > args.max_crashes:
                        print(
                            f"Triton crashed {len(crashes)} times ({', '.join(crashes)}); giving up. Log tail:\n"
                            + triton.log_tail(5),
                            flush=True,
                        )
                        return 1
                    print(
                        f"round {r + 1} {cond}: Triton crashed ({crashed}); restarting it and running {cond} again",
                        flush=True,
                    )
                    if sidecar is not None:
                        sidecar.stop()
                    if cond == "E" and not file_mode:
                        null.stop()
                    triton.kill()
                    start_triton()
                    _trace(triton.http_url, False)
                    _wrk(url, lua, 3, args.connections, args.threads, load_cpus)  # warm-up, not counted
                    pending.insert(0, cond)
                    continue
                # Triton's CPU time per request, and its share of a core: it shows whether Triton was CPU-bound
                # (then its throughput is 1 / CPU per request) and whether a condition made Triton itself work
                # harder rather than slowed its load generator. (Measured 2026-12-04: at ~99% of a core in every
                # run it swings with throughput, so it is no steadier a figure on a shared host.)
                got["triton_cpu_ms"] = 1000 * tcpu / max(got["requests"], 1)
                got["triton_util"] = tcpu / secs
                extra = f", Triton {got['triton_cpu_ms']:.3f} CPU ms/request ({got['triton_util']:.0%} of a core)"
                if sidecar is not None:
                    got["sidecar_cpu"] = (_cpu_secs(sidecar.pid()) - cpu0) / secs
                    got["sidecar_peak_mib"] = _peak_rss_mib(sidecar.pid())
                    # A trace file is read at the next poll (1 s) and a request spanning two files is held until
                    # the second is read: 3 s without growth.
                    got["spans"] = (
                        _settle(lambda s=sidecar: _metric(s.metrics(), counted), 3.0 if file_mode else 1.0) - before
                    )
                    # Its CPU until it has taken everything the round sent (a reader that lags finishes after
                    # wrk does; measured at wrk's end alone, its catching up would go uncounted), idle time
                    # while settling included: CPU per request is from this.
                    got["sidecar_cpu_all"] = _cpu_secs(sidecar.pid()) - cpu0
                    got["scrapes"] = _metric(sidecar.metrics(), "sidecar_triton_scrapes_total")
                    sidecar.stop()
                    extra += (
                        f", scrapes {got['scrapes']:.0f}, sidecar used {got['sidecar_cpu']:.0%} of a core, "
                        f"peak RSS {got['sidecar_peak_mib']:.0f} MiB"
                    )
                if cond == "E" and file_mode:
                    _settle(lambda: len(list(trace_dir.iterdir())))  # Triton's last file written
                    got["spans"] = float(_traced_requests(trace_dir))
                elif cond == "E":
                    total = {"spans": 0.0}

                    def _read(total: dict[str, float] = total) -> float:
                        c = null.count()
                        total["spans"] += c["spans"]
                        if c.get("over_cap"):
                            print("  null collector passed its 512 MiB cap: spans undercounted", flush=True)
                        return total["spans"]

                    got["spans"] = _settle(_read)
                    null.stop()
                if cond in ("B", "E", "J"):
                    what = "requests in trace files" if file_mode else "spans received"
                    extra = (
                        f", {what} {got['spans']:.0f} ({got['spans'] / max(got['requests'], 1):.4f} per request)"
                    ) + extra
                runs[cond].append(got)
                print(
                    f"round {r + 1} {cond}: {got['rps']:,.0f} req/s, p50 {got['p50_ms']:.2f} ms, p99 "
                    f"{got['p99_ms']:.2f} ms, non-2xx {got['non2xx']:.0f}, socket errors "
                    f"{got['socket_errors']:.0f}{extra}",
                    flush=True,
                )
        _report(runs, rounds, args.trace_rate, 1 if file_mode else 3, "traced requests" if file_mode else "spans")
        print(
            f"Triton crashes (runs voided and run again): {len(crashes)}"
            + (f" ({', '.join(crashes)})" if crashes else ""),
            flush=True,
        )
        print(
            f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
            f"runtime {time.monotonic() - t_start:.0f} s; placement {placement}",
            flush=True,
        )
        return 0
    finally:
        for each in sidecars.values():
            each.stop()  # idempotent
        null.stop()
        triton.stop()


def _clear(trace_dir: Path) -> None:
    for f in trace_dir.iterdir():
        with contextlib.suppress(OSError):
            f.unlink()


def _traced_requests(trace_dir: Path) -> int:
    """Distinct requests in Triton's trace files (one record per request names its model), then the files go.
    Read with the sidecar's own lenient scanner, so a file cut short still counts the records it holds."""
    from sidecar.sources.trace_files.records import scan

    ids: set[object] = set()
    for f in sorted(trace_dir.iterdir()):
        with contextlib.suppress(OSError):
            for rec in scan(f.read_bytes()).records:
                if "model_name" in rec:
                    ids.add(rec.get("id"))
    _clear(trace_dir)
    return len(ids)


def _report(
    runs: dict[str, list[dict[str, float]]], rounds: int, trace_rate: int = 1, per_trace: int = 3, unit: str = "spans"
) -> None:
    names = {
        "A": "A no tracing, no sidecar",
        "B": "B sidecar follows the files" if unit != "spans" else "B sidecar + every span",
        "E": "E trace files, nobody reads" if unit != "spans" else "E spans to null collector",
        "C": "C sidecar, tracing off",
        "J": "J = B, request join on",
    }
    conds = [c for c in ("A", "B", "J", "E", "C") if runs.get(c)]
    keys = ("rps", "p50_ms", "p99_ms", "triton_cpu_ms", "triton_util")
    med = {c: {k: statistics.median(run[k] for run in v) for k in keys} for c, v in runs.items() if v}
    print(
        f"{'(median)':28s} {'req/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'Triton CPU ms/req':>18} {'Triton CPU':>10}"
        f"  req/s min..max"
    )
    for c in conds:
        print(
            f"{names[c]:28s} {med[c]['rps']:>10,.0f} {med[c]['p50_ms']:>8.2f} {med[c]['p99_ms']:>8.2f} "
            f"{med[c]['triton_cpu_ms']:>18.3f} {med[c]['triton_util']:>10.0%}  "
            f"{min(x['rps'] for x in runs[c]):,.0f}..{max(x['rps'] for x in runs[c]):,.0f}"
        )
    for c in (c for c in conds if c in ("B", "J", "C")):
        cpu, rss = [x["sidecar_cpu"] for x in runs[c]], [x["sidecar_peak_mib"] for x in runs[c]]
        # CPU time per request served, until the sidecar had taken all of the round's (its catching up after
        # the load stopped included): less swayed than throughput by other work on a shared host.
        us = [1e6 * x["sidecar_cpu_all"] / max(x["requests"], 1.0) for x in runs[c]]
        print(
            f"{names[c][:1]}: the sidecar used {statistics.median(cpu):.0%} of a core (rounds {min(cpu):.0%}.."
            f"{max(cpu):.0%}), {statistics.median(us):.1f} us of CPU per request served, its catching up included "
            f"(rounds {min(us):.1f}..{max(us):.1f}),"
            f" peak RSS {statistics.median(rss):.0f} MiB (rounds {min(rss):.0f}..{max(rss):.0f})"
        )
    meaning = {
        ("B", "A"): "total: sidecar + Triton's tracing, vs neither; target loss under 3%",
        ("B", "E"): "the sidecar's own cost, given the tracing turned on",
        ("E", "A"): "Triton's own cost of tracing every request (not the sidecar's)",
        ("C", "A"): "scraping alone",
    }
    if "J" in conds:
        meaning[("J", "E")] = "the sidecar's own cost with the request join on"
        meaning[("J", "B")] = "the request join's own cost (same run, alternated)"
    for (num, den), what in meaning.items():
        parts = []
        for key, label in (("rps", "throughput"), ("p99_ms", "p99")):
            per_round = [runs[num][i][key] / runs[den][i][key] for i in range(rounds)]
            parts.append(
                f"{label} {num}/{den} = {med[num][key] / med[den][key]:.3f} "
                f"(rounds {min(per_round):.3f}..{max(per_round):.3f})"
            )
        loss = 1 - med[num]["rps"] / med[den]["rps"]
        print(f"{'; '.join(parts)}; loss {loss:+.1%}: {what}")
        cpu_round = [runs[num][i]["triton_cpu_ms"] / runs[den][i]["triton_cpu_ms"] for i in range(rounds)]
        cpu = med[num]["triton_cpu_ms"] / med[den]["triton_cpu_ms"]
        print(
            f"    Triton CPU per request {num}/{den} = {cpu:.3f} "
            f"(rounds {min(cpu_round):.3f}..{max(cpu_round):.3f}): {cpu - 1:+.1%} CPU a request, so "
            f"{1 - 1 / cpu:+.1%} throughput where Triton is CPU-bound"
        )
    per_req = [(c, i, x["spans"] / max(x["requests"], 1)) for c in conds if c in "BEJ" for i, x in enumerate(runs[c])]
    best = max(p for _, _, p in per_req)
    if trace_rate > 1:
        # Triton's exporter sends a batch every few seconds, so the last seconds' spans of a run reach whatever
        # listens next (the next condition's receiver, or nothing): at rate=1 that is a small share of a run's
        # spans, one in N traced it is most of the difference between runs. Shown, not judged.
        print(
            f"delivery: {unit} per request (expected about {per_trace / trace_rate:.4f}): "
            + ", ".join(f"{c}{i + 1} {p:.4f}" for c, i, p in per_req)
            + "; not checked at rate > 1 (spans spill between runs)"
        )
        return
    short = [f"{c} round {i + 1} ({p:.2f})" for c, i, p in per_req if p < 0.98 * best]
    print(
        f"delivery: {unit} per request, best {best:.2f}; "
        + (
            f"SHORT (Triton dropped {unit}, that baseline is cheaper): {', '.join(short)}"
            if short
            else "every B and E run within 2% of it"
        )
    )


if __name__ == "__main__":
    sys.exit(main())
