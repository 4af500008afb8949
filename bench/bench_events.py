"""How many prediction events per second ``POST /v1/events`` takes on one core, beside decoding alone.

The service is built in this process from ``sidecar.example.yaml`` (drift and business checks on, Triton,
GPU and alerting off, the store in a temporary folder), with a business check on one of the events' numeric
fields added so both checks see every event. Each request goes through the endpoint's real handler (guard,
media type, decode, door checks, bus fan-out to every subscriber), timed as process CPU time; the process is
pinned to one CPU where the OS allows it. Bodies are batches of 500 events with N numeric features and a
score (every event passes the door: bounds, times, names, NaN/inf are checked, none is refused). Each body
carries fresh values, so no cache makes a resent body cheaper. Before each feature count, a warm-up (not
timed, its rate printed) fills the version's pinned reference and makes the new features' windows; the
timed part is the steady state.

Baselines measured in the same run, on the same bodies: ``orjson.loads`` alone and a typed ``msgspec`` decode
alone (a ``list[Event]`` struct, features a dict, no door checks). Each case runs ``--rounds`` rounds of fresh
bodies, the three timed back to back in a round; the best rate of each column is printed, and the ratios of the
median round (the host's speed drifts over a run, so only runs close in time are compared). After every case:
sent == accepted (answers) == ``sidecar_events_received_total``. Peak RSS (``ru_maxrss``) is printed at the end.

    .venv/bin/python bench/bench_events.py [--quick] [--rounds N] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import orjson
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from prometheus_client import CollectorRegistry  # noqa: E402
from starlette.requests import Request  # noqa: E402

from sidecar.clock import FakeClock  # noqa: E402
from sidecar.config import parse_config  # noqa: E402
from sidecar.runtime import tune_gc  # noqa: E402
from sidecar.service import Service  # noqa: E402
from sidecar.sources.events.http import EventsEndpoint  # noqa: E402

NOW = 1_800_000_000.0
BATCH = 500
PINNED = 5000  # the example config's pinned_events
DEFAULT_GC = False  # --default-gc
MEDIA = {"json": b"application/json", "ndjson": b"application/x-ndjson", "jsonl": b"application/jsonl"}


class MsgEvent(msgspec.Struct, forbid_unknown_fields=True):
    model: str
    version: str | int | None = None
    timestamp: float | str | None = None
    features: dict[str, float | str | None] = {}
    score: float | None = None


def _service(workdir: Path, jsonl: Path | None = None) -> tuple[Service, EventsEndpoint]:
    raw = yaml.safe_load((ROOT / "sidecar.example.yaml").read_text())
    if jsonl is not None:  # a JSON Lines file tailed by the events source, read whole in one poll
        raw.setdefault("events", {})["jsonl"] = [{"path": str(jsonl), "max_read_bytes": 512 * 1024 * 1024}]
    raw["store"] = {"path": str(workdir / "state.sqlite")}
    raw["triton"] = {"enabled": False}
    raw["gpu"] = {"enabled": False}
    raw["alerting"] = {"enabled": False}
    raw["traces"] = {"enabled": False}
    raw["server"] = {"max_body_bytes": 64 * 1024 * 1024}
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
    raw["checks"]["drift"]["reference"]["pinned_events"] = PINNED
    cfg = parse_config(raw)
    svc = Service(cfg, clock=FakeClock(NOW), registry=CollectorRegistry())
    ep = next(c for c in svc.components if isinstance(c, EventsEndpoint))
    # What `sidecar run` does at the end of start-up (runtime.gc_threshold, gc.freeze), unless --default-gc asks
    # for CPython's own collector settings; the baselines in this process run under the same setting.
    if not DEFAULT_GC:
        tune_gc(cfg.runtime)
    return svc, ep


def _events(rnd: random.Random, n_features: int) -> list[dict[str, Any]]:
    return [
        {
            "model": "ctr",
            "version": "1",
            "timestamp": NOW - rnd.random() * 60,
            "features": {f"f{j}": rnd.gauss(j, 1.0) for j in range(n_features)},
            "score": rnd.random(),
        }
        for _ in range(BATCH)
    ]


def _body(events: list[dict[str, Any]], fmt: str) -> bytes:
    if fmt == "json":
        return orjson.dumps({"events": events})
    return b"\n".join(orjson.dumps(e) for e in events) + b"\n"


def _request(body: bytes, media: bytes) -> Request:
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/events",
        "headers": [(b"content-type", media), (b"content-length", str(len(body)).encode())],
        "query_string": b"",
    }
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return Request(scope, receive)


def _decode_lines(body: bytes, decode: Callable[[bytes], Any]) -> int:
    return sum(1 for line in body.splitlines() if line.strip() and decode(line) is not None)


def _baseline(bodies: list[bytes], fmt: str, decode: Callable[[bytes], Any], lines: Callable[[bytes], Any]) -> float:
    t0 = time.process_time()
    for b in bodies:
        if fmt == "json":
            decode(b)
        else:
            _decode_lines(b, lines)
    return len(bodies) * BATCH / (time.process_time() - t0)


def _received(svc: Service, source: str = "http") -> float:
    return svc.registry.get_sample_value("sidecar_events_received_total", {"source": source}) or 0.0


def _tailed(svc: Service, path: Path, bodies: list[bytes]) -> float:
    """Events/s of the JSON Lines tailer reading ``bodies`` (NDJSON) appended to its file: every line through
    the tailer's real read (split, decode, door checks, bus fan-out), one poll per body as a model server
    appending a batch at a time would give; CPU time of the polls."""
    from sidecar.sources.events.jsonl import JsonlTailer

    tailer = next(c for c in svc.components if isinstance(c, JsonlTailer))
    before = _received(svc, "jsonl")
    secs = 0.0
    with path.open("ab") as f:
        for b in bodies:
            f.write(b)
            f.flush()
            t0 = time.process_time()
            tailer.poll_once()
            secs += time.process_time() - t0
    sent = len(bodies) * BATCH
    counted = _received(svc, "jsonl") - before
    if sent != counted:
        raise SystemExit(f"lost events: appended {sent}, counted {counted}")
    return sent / secs


def _ours(ep: EventsEndpoint, svc: Service, bodies: list[bytes], fmt: str) -> float:
    before = _received(svc)

    async def go() -> tuple[float, int]:
        accepted = 0
        t0 = time.process_time()
        for b in bodies:
            r = await ep.handle(_request(b, MEDIA[fmt]))
            assert r.status_code == 200, r.body
            accepted += orjson.loads(r.body)["accepted"]
        return time.process_time() - t0, accepted

    secs, accepted = asyncio.run(go())
    sent = len(bodies) * BATCH
    counted = _received(svc) - before
    if not sent == accepted == counted:
        raise SystemExit(f"lost events: sent {sent}, accepted {accepted}, counted {counted}")
    return sent / secs


def _profile() -> None:
    """Where the handler's time goes in the steady state: the top functions by own time (cProfile)."""
    import cProfile
    import pstats

    rnd = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        svc, ep = _service(Path(tmp))
        _ours(ep, svc, [_body(_events(rnd, 20), "json") for _ in range(PINNED // BATCH + 1)], "json")
        bodies = [_body(_events(rnd, 20), "json") for _ in range(20)]
        prof = cProfile.Profile()
        prof.enable()
        _ours(ep, svc, bodies, "json")
        prof.disable()
        svc.store.close()
    top = int(os.environ.get("PROFILE_TOP", "15"))
    pstats.Stats(prof).sort_stats(os.environ.get("PROFILE_SORT", "tottime")).print_stats(top)
    _phases()


def _phases() -> None:
    """The steady state's CPU time by stage, without a profiler's overhead: the body through the typed door
    (msgspec decode with the learned names, shape and types, the matrix, door checks), the drift check, the
    business checks, each timed alone on the same 40 bodies; then the whole handler on the same kind of bodies
    (what it adds: the guard, the answer, the bus, counters). ``orjson.loads`` of the same bodies is timed beside,
    for reference (not a stage)."""
    from sidecar.checks.business.check import BusinessChecks
    from sidecar.checks.drift.check import DriftCheck
    from sidecar.model import Batch

    rnd = random.Random(1)
    with tempfile.TemporaryDirectory() as tmp:
        svc, ep = _service(Path(tmp))
        _ours(ep, svc, [_body(_events(rnd, 20), "json") for _ in range(PINNED // BATCH + 1)], "json")
        drift = next(c for c in svc.components if isinstance(c, DriftCheck))
        business = next(c for c in svc.components if isinstance(c, BusinessChecks))
        bodies = [_body(_events(rnd, 20), "json") for _ in range(40)]
        whole = [_body(_events(rnd, 20), "json") for _ in range(40)]
        spent = dict.fromkeys(("door (typed.py)", "drift check", "business checks"), 0.0)
        orj = 0.0

        async def interleaved() -> float:  # so a busy spell on the machine hits both alike
            nonlocal orj
            handler = 0.0
            for body, other in zip(bodies, whole, strict=True):
                t0 = time.process_time()
                orjson.loads(body)
                t1 = time.process_time()
                cols = ep.typed.body(body, False, NOW)
                t2 = time.process_time()
                assert cols is not None, "the typed door did not take the body"
                batch = Batch("event_columns", "http", tuple(cols), NOW)
                drift.observe(batch)
                t3 = time.process_time()
                business.observe_columns(batch)
                t4 = time.process_time()
                orj += t1 - t0
                for k, dt in zip(spent, (t2 - t1, t3 - t2, t4 - t3), strict=True):
                    spent[k] += dt
                t5 = time.process_time()
                r = await ep.handle(_request(other, MEDIA["json"]))
                handler += time.process_time() - t5
                assert r.status_code == 200
            return handler

        handler = asyncio.run(interleaved())
        svc.store.close()
    n = len(bodies) * BATCH
    print("the steady state by stage (20 features, JSON, 40 bodies of 500; process CPU time):")
    for k, v in spent.items():
        print(f"{k:>22} {v / n * 1e6:6.2f} us/event  {v / handler:6.1%}")
    rest = handler - sum(spent.values())
    print(f"{'rest of the handler':>22} {rest / n * 1e6:6.2f} us/event  {rest / handler:6.1%}")
    print(f"{'whole handler':>22} {handler / n * 1e6:6.2f} us/event  ({n / handler:,.0f} events/s)")
    print(f"{'(orjson.loads alone)':>22} {orj / n * 1e6:6.2f} us/event  (the same bodies, for reference)")


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _one_count(nf: int, formats: list[str], quick: bool, rounds: int) -> None:
    """One feature count in this process (a child of ``main``), so the peak RSS printed is this count's own."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    rnd = random.Random(nf)
    batch_dec = msgspec.json.Decoder(dict[str, list[MsgEvent]])
    list_dec = msgspec.json.Decoder(MsgEvent)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "events.jsonl"
        svc, ep = _service(Path(tmp), jsonl=path)
        built = _rss_mib()
        # Not timed: the first events of a version fill its pinned reference (pinned_events) and make the
        # new features' windows, one by one; what follows is the steady state, which is what is timed.
        warm = [_body(_events(rnd, nf), "json") for _ in range(PINNED // BATCH + 1)]
        rate = _ours(ep, svc, warm, "json")
        print(f"{nf:>8} warm-up, {len(warm) * BATCH:,} events (reference and windows): {rate:,.0f}/s", flush=True)
        n_bodies = (4 if quick else 40) * (20 if nf <= 20 else 4) // 20 or 1
        for fmt in formats:
            file = fmt == "file"
            orj = msg = ours = 0.0
            r_orj, r_msg = [], []
            # Each round: fresh bodies, the three timed back to back on them. A round's ratios compare runs a
            # fraction of a second apart (the host's speed drifts over a run); the median round's are printed,
            # with the best rate of each column.
            for _ in range(rounds):
                bodies = [_body(_events(rnd, nf), "ndjson" if file else fmt) for _ in range(n_bodies)]
                o = _baseline(bodies, "ndjson" if file else fmt, orjson.loads, orjson.loads)
                m = _baseline(bodies, "ndjson" if file else fmt, batch_dec.decode, list_dec.decode)
                u = _tailed(svc, path, bodies) if file else _ours(ep, svc, bodies, fmt)
                orj, msg, ours = max(orj, o), max(msg, m), max(ours, u)
                r_orj.append(u / o)
                r_msg.append(u / m)
            print(
                f"{nf:>8} {fmt:>7} {orj:>10,.0f} {msg:>10,.0f} {ours:>10,.0f} {statistics.median(r_orj):>12.3f}"
                f" {statistics.median(r_msg):>13.3f}   {min(r_orj):.3f}-{max(r_orj):.3f}",
                flush=True,
            )
        svc.store.close()
    print(
        f"{nf:>8} peak RSS {_rss_mib():,.0f} MiB (this feature count's process: the service built "
        f"{built:,.0f} MiB, then bodies, windows, references and baselines)",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer bodies (a smoke run)")
    ap.add_argument("--features", type=int, nargs="*", default=[20, 200])
    ap.add_argument("--formats", nargs="*", default=["json", "ndjson", "jsonl", "file"])
    ap.add_argument(
        "--default-gc", action="store_true", help="CPython's collector settings, not the ones `sidecar run` sets"
    )
    ap.add_argument(
        "--profile",
        action="store_true",
        help="cProfile the steady state (20 features, JSON) instead, then its CPU time by stage",
    )
    ap.add_argument(
        "--rounds", type=int, default=5, help="rounds per case: the best rate of each column, the median round's ratios"
    )
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    global DEFAULT_GC
    DEFAULT_GC = args.default_gc
    if args.profile:
        _profile()
        return
    if args.child:
        _one_count(args.features[0], args.formats, args.quick, args.rounds)
        return
    print(f"batches of {BATCH} events, numeric features and a score; events/s on one core (process CPU time)")
    print("formats: json, ndjson, jsonl = POST /v1/events with that Content-Type; file = the JSON Lines tailer")
    print(f"rates: the best of {args.rounds} rounds; ratios: the median round's (each round's three back to back)")
    print(
        f"{'features':>8} {'format':>7} {'orjson':>10} {'msgspec':>10} {'ours':>10}"
        f" {'ours/orjson':>12} {'ours/msgspec':>13}   ours/orjson of each round (min-max)",
        flush=True,
    )
    for nf in args.features:  # one process per feature count: each prints its own peak RSS
        cmd = [sys.executable, __file__, "--child", "--features", str(nf), "--rounds", str(args.rounds)]
        cmd += ["--formats", *args.formats]
        cmd += ["--quick"] if args.quick else []
        subprocess.run(cmd + (["--default-gc"] if args.default_gc else []), check=True)


if __name__ == "__main__":
    main()
