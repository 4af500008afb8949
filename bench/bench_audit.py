"""Audit benchmark: events per second into SQLite (the audit log, WAL) and through the official Elasticsearch
client to the local stand-in, bytes per event on disk, beside a plain ``sqlite3`` ``executemany`` of the same
rows as the baseline ratio.

    .venv/bin/python bench/bench_audit.py              # 20,000 request records, batches of 100
    .venv/bin/python bench/bench_audit.py --events 2000 --quick

The rows are per-request records as ``sidecar.processors.request_records`` writes them (ids, model, version,
outcome, code, seven stage times). Three runs, each on a fresh file in a temporary folder:

- ``baseline``: one ``executemany`` per batch into a table of the same columns, same pragmas (WAL,
  synchronous=NORMAL), no indexes, no bounds: what SQLite alone costs.
- ``audit``: ``AuditLog.record_many`` per batch (the query indexes, size/row bounds, idempotent insert).
- ``audit+es``: the same with Elasticsearch configured: each event's copy also queued in the replay table in
  the same transaction, drained by the sender through ``AsyncElasticsearch`` bulk requests to the stand-in
  (tests/exporters/es_standin.py, a threaded Python HTTP server on this machine, so its own cost is
  included); timed until the stand-in holds every event.

Then the request-record join alone (``join_rate``): spans per second through ``RequestRecords.on_spans``.

Bytes per event: the database file plus its WAL after a checkpoint, divided by the events.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from prometheus_client import CollectorRegistry

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "exporters"))

from es_standin import EsStandIn  # noqa: E402

from exporters.audit import AuditLog  # noqa: E402
from exporters.audit_outbox import AuditOutbox, DeadLetters, EsDoc  # noqa: E402
from exporters.config import ElasticsearchConfig  # noqa: E402
from exporters.elasticsearch import ElasticsearchBulk, client_from_config  # noqa: E402
from exporters.sender import RetryPolicy, Sender  # noqa: E402
from exporters.telemetry import ExportTelemetry  # noqa: E402
from sidecar.clock import SystemClock  # noqa: E402
from sidecar.store import Store  # noqa: E402

T0 = 1_800_000_000.0
Ev = tuple[str, str, float, dict[str, Any]]


def events(n: int) -> list[Ev]:
    out = []
    for i in range(n):
        doc = {
            "trace_id": f"{i:032x}",
            "request_id": str(i),
            "model": "ctr",
            "version": str(1 + i % 2),
            "outcome": "ok" if i % 50 else "error",
            "code": "http_200" if i % 50 else "http_500",
            "triton_outcome": "ok",
            "latency_ms": 3.2 + i % 7,
            "joined": True,
            "stages_ms": {
                "network_receive": 0.05,
                "queue": 0.1,
                "compute_input": 0.02,
                "compute_infer": 2.5,
                "compute_output": 0.03,
                "send": 0.04,
                "request": 2.9,
            },
        }
        out.append(("request", f"req-{i:032x}", T0 + i / 1000, doc))
    return out


def on_disk(path: Path) -> int:
    con = sqlite3.connect(path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def baseline(path: Path, evs: list[Ev], batch: int) -> float:
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=NORMAL")
    con.execute(
        "CREATE TABLE t (id TEXT PRIMARY KEY, at REAL, kind TEXT, body BLOB, model TEXT, version TEXT, "
        "trace_id TEXT, request_id TEXT, size INTEGER)"
    )
    t = time.perf_counter()
    for i in range(0, len(evs), batch):
        rows = []
        for kind, eid, at, body in evs[i : i + batch]:
            raw = orjson.dumps({"id": eid, "kind": kind, "at": at, **body})
            rows.append(
                (eid, at, kind, raw, body["model"], body["version"], body["trace_id"], body["request_id"], len(raw))
            )
        con.execute("BEGIN")
        con.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        con.execute("COMMIT")
    secs = time.perf_counter() - t
    con.close()
    return secs


def audit_only(path: Path, evs: list[Ev], batch: int) -> float:
    audit = AuditLog(max_rows=10 * len(evs), max_bytes=10**12, registry=CollectorRegistry(), store=Store(path))
    t = time.perf_counter()
    for i in range(0, len(evs), batch):
        audit.record_many(evs[i : i + batch])
    secs = time.perf_counter() - t
    audit.store.close()
    return secs


async def audit_es(path: Path, evs: list[Ev], batch: int) -> tuple[float, int]:
    with EsStandIn() as es:
        reg, clock = CollectorRegistry(), SystemClock()
        store = Store(path)
        cfg = ElasticsearchConfig(url=es.url, max_batch=500)
        outbox = AuditOutbox(store, max_rows=10 * len(evs))
        dead = DeadLetters(store, max_rows=100, registry=reg)
        bulk = ElasticsearchBulk(cfg, client=client_from_config(cfg), dead_letters=dead, registry=reg, clock=clock)
        sender: Sender[EsDoc] = Sender(
            "elasticsearch",
            bulk.send,
            policy=RetryPolicy(),
            queue=outbox,
            max_batch=500,
            stats=ExportTelemetry.of(reg).exporter("elasticsearch"),
            clock=clock,
            close=bulk.aclose,
        )
        audit = AuditLog(
            max_rows=10 * len(evs),
            max_bytes=10**12,
            registry=reg,
            store=store,
            es=sender,
            outbox=outbox,
            dead_letters=dead,
        )
        await audit.start()
        t = time.perf_counter()
        for i in range(0, len(evs), batch):
            audit.record_many(evs[i : i + batch])
            await asyncio.sleep(0)  # let the sender run between batches, as the event loop would
        while len(es.creates) < len(evs):
            await asyncio.sleep(0.005)
        secs = time.perf_counter() - t
        requests = es.bulk_requests
        await audit.shutdown()
        store.close()
    return secs, requests


def join_rate(rounds: int = 50) -> tuple[float, float]:
    """Spans and requests per second through the request-record join: the recorded export of a real Triton
    (120 requests, 360 spans) plus one caller span per request, fed ``rounds`` times (ids repeat, so later
    rounds join as fast as the first; records are counted, 1% handed to a list)."""
    from sidecar.clock import FakeClock
    from sidecar.model import Batch, Span
    from sidecar.processors.request_records import RequestRecords
    from sidecar.processors.request_records_config import RequestRecordsConfig
    from sidecar.records import from_span
    from sidecar.sources.otlp.decode import decode_json

    spans = list(decode_json((ROOT / "tests/data/traces/otlp-traces-triton.json").read_bytes()).spans)
    callers = [
        Span(
            trace_id=t,
            span_id="ab" * 8,
            parent_span_id=None,
            name="POST /predict",
            start_unix_nano=1,
            end_unix_nano=5_000_001,
            attributes={"http.response.status_code": 200},
        )
        for t in sorted({s.trace_id for s in spans})
    ]
    batch = Batch(kind="spans", source="bench", items=tuple(from_span(s) for s in callers + spans))
    got: list[Any] = []
    rr = RequestRecords(
        RequestRecordsConfig(enabled=True), sink=got.extend, registry=CollectorRegistry(), clock=FakeClock()
    )
    t = time.perf_counter()
    for _ in range(rounds):
        rr.on_spans(batch)
    secs = time.perf_counter() - t
    return rounds * len(batch.items) / secs, rounds * len(callers) / secs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--batch", type=int, default=100, help="events per record_many / executemany")
    ap.add_argument("--quick", action="store_true", help="2,000 events")
    a = ap.parse_args()
    n = 2_000 if a.quick else a.events
    evs = events(n)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        b = baseline(d / "base.sqlite", evs, a.batch)
        b_bytes = on_disk(d / "base.sqlite")
        s = audit_only(d / "audit.sqlite", evs, a.batch)
        s_bytes = on_disk(d / "audit.sqlite")
        e, reqs = asyncio.run(audit_es(d / "es.sqlite", evs, a.batch))
    print(f"{n} events, batches of {a.batch}")
    print(f"{'run':<10} {'events/s':>10} {'x baseline':>10} {'bytes/event':>12}")
    print(f"{'baseline':<10} {n / b:>10.0f} {1.0:>10.2f} {b_bytes / n:>12.0f}")
    print(f"{'audit':<10} {n / s:>10.0f} {b / s:>10.2f} {s_bytes / n:>12.0f}")
    print(f"{'audit+es':<10} {n / e:>10.0f} {b / e:>10.2f} {'':>12}  ({reqs} bulk requests)")
    spans_s, req_s = join_rate()
    print(f"request-record join: {spans_s:.0f} spans/s, {req_s:.0f} requests/s (one thread)")


if __name__ == "__main__":
    main()
