"""The trace store's byte budgets: the estimate is close to what a record really holds, the store never holds
more than ``max_bytes``, one trace never more than ``max_trace_bytes``, plain traces go before slow or failed
ones, ``shed`` evicts for the memory limiter, and every eviction and drop is counted."""

from __future__ import annotations

import base64
import copy
import gc
import random
import tracemalloc

import orjson
import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from prometheus_client import CollectorRegistry

from sidecar.config import parse_config
from sidecar.errors import ConfigError
from sidecar.records import Record
from sidecar.sources.otlp.decode import decode_json, decode_protobuf
from sidecar.sources.otlp.limits import DEFAULT_LIMITS
from sidecar.state.trace_entry import ENTRY_BYTES, record_bytes
from sidecar.state.traces import TraceStore

KIB = 1024
MIB = 1024 * 1024


def _triton_doc(rnd: random.Random, requests: int) -> dict[str, object]:
    """Spans shaped like Triton's OTLP export: per request a root, a model span and a compute span, with events."""

    def ev(base: int, *names: str) -> list[dict[str, str]]:
        return [{"name": n, "timeUnixNano": str(base + i * 100)} for i, n in enumerate(names)]

    spans: list[dict[str, object]] = []
    t = 1_800_000_000_000_000_000
    for _ in range(requests):
        tid = rnd.randbytes(16).hex()
        r, m, c = (rnd.randbytes(8).hex() for _ in range(3))
        root = ev(t, "HTTP_RECV_START", "HTTP_RECV_END", "INFER_RESPONSE_COMPLETE", "HTTP_SEND_START", "HTTP_SEND_END")
        spans += [
            {"traceId": tid, "spanId": r, "name": "InferRequest", "kind": 2, "events": root},
            {
                "traceId": tid,
                "spanId": m,
                "parentSpanId": r,
                "name": "ctr",
                "kind": 2,
                "attributes": [
                    {"key": "triton.model_name", "value": {"stringValue": "ctr"}},
                    {"key": "triton.model_version", "value": {"intValue": "1"}},
                ],
                "events": ev(t, "REQUEST_START", "QUEUE_START", "REQUEST_END"),
            },
            {
                "traceId": tid,
                "spanId": c,
                "parentSpanId": m,
                "name": "compute",
                "kind": 2,
                "events": ev(t, "COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END"),
            },
        ]
        for s in spans[-3:]:
            s["startTimeUnixNano"], s["endTimeUnixNano"] = str(t), str(t + 9000)
        t += 10_000
    res = {"attributes": [{"key": "service.name", "value": {"stringValue": "triton"}}]}
    return {"resourceSpans": [{"resource": res, "scopeSpans": [{"spans": spans}]}]}


def _pb(doc: dict[str, object]) -> bytes:
    """The protobuf body of an OTLP JSON doc (protobuf's JSON mapping wants ids in base64, OTLP's in hex)."""
    doc = copy.deepcopy(doc)
    for rs in doc["resourceSpans"]:  # type: ignore[attr-defined]
        for s in rs["scopeSpans"][0]["spans"]:
            for k in ("traceId", "spanId", "parentSpanId"):
                if k in s:
                    s[k] = base64.b64encode(bytes.fromhex(s[k])).decode()
    return json_format.ParseDict(doc, ExportTraceServiceRequest()).SerializeToString()


def _triton_bodies(n: int) -> tuple[list[bytes], list[bytes]]:
    rnd = random.Random(7)
    docs = [_triton_doc(rnd, 33) for _ in range(n)]
    return [orjson.dumps(d) for d in docs], [_pb(d) for d in docs]


def _big_json(rnd: random.Random, spans: int, attrs: int, chars: int, trace: bytes | None = None) -> bytes:
    out = []
    for i in range(spans):
        out.append(
            {
                "traceId": (trace or rnd.randbytes(16)).hex(),
                "spanId": rnd.randbytes(8).hex(),
                "name": "big",
                "startTimeUnixNano": str(1_000 + i),
                "endTimeUnixNano": str(2_000 + i),
                "attributes": [
                    {"key": f"k{j}", "value": {"stringValue": rnd.randbytes(chars // 2 + 1).hex()[:chars]}}
                    for j in range(attrs)
                ],
            }
        )
    return orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": out}]}]})


def _measured(records_of: list[bytes], decode: object) -> tuple[float, list[Record]]:
    """Bytes per record as tracemalloc sees them, and the records."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        keep: list[Record] = []
        for body in records_of:
            keep.extend(decode(body, DEFAULT_LIMITS).records)  # type: ignore[operator]
        gc.collect()
        used = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    return used / len(keep), keep


@pytest.mark.parametrize(
    "shape",
    ["triton_json", "triton_protobuf", "big_values_json"],
)
def test_the_estimate_is_within_a_quarter_of_what_tracemalloc_measures(shape: str) -> None:
    if shape == "big_values_json":
        rnd = random.Random(3)
        per, records = _measured([_big_json(rnd, 20, 8, 4000) for _ in range(2)], decode_json)
    else:
        json_bodies, pb_bodies = _triton_bodies(4)
        if shape == "triton_json":
            per, records = _measured(json_bodies, decode_json)
        else:
            per, records = _measured(pb_bodies, decode_protobuf)
    assert len(records) == (40 if shape == "big_values_json" else 4 * 99)
    estimate = sum(map(record_bytes, records)) / len(records)
    assert 0.75 * per <= estimate <= 1.25 * per, (shape, per, estimate)


def _store(reg: CollectorRegistry, **kw: int) -> TraceStore:
    args = {
        "max_traces": 10_000,
        "max_age_secs": 3600.0,
        "max_spans_per_trace": 1000,
        "slow_threshold_ns": 10**12,
        "max_bytes": 1 * MIB,
        "max_trace_bytes": 256 * KIB,
    }
    args.update(kw)
    return TraceStore(reg, **args)  # type: ignore[arg-type]


def _val(reg: CollectorRegistry, name: str, labels: dict[str, str] | None = None) -> float:
    return reg.get_sample_value(name, labels or {}) or 0.0


def test_the_store_stays_within_its_byte_budget_evicting_the_oldest_plain_traces_and_counting_them() -> None:
    reg = CollectorRegistry()
    store = _store(reg)
    rnd = random.Random(1)
    # Two failed traces first (kept preferentially), then ~3 MiB of plain traces of ~33 KiB spans.
    failed = decode_json(_big_json(rnd, 2, 8, 4000), DEFAULT_LIMITS).records
    failed = [(*r[:6], 2, *r[7:]) for r in failed]
    store.add(failed, 0.0)
    failed_ids = [r[0].hex() for r in failed]
    for i in range(20):
        store.add(decode_json(_big_json(rnd, 5, 8, 4000), DEFAULT_LIMITS).records, float(i))
        assert store.nbytes <= 1 * MIB
    assert store.nbytes > 0.8 * MIB  # full, not emptied
    # The failed traces (the oldest of all) outlived every plain one evicted.
    assert all(store.get(t) is not None for t in failed_ids)
    evicted = _val(reg, "sidecar_traces_evicted_total", {"reason": "bytes_plain"})
    assert evicted > 0 and len(store) + evicted == 2 + 20 * 5  # every span its own trace
    assert _val(reg, "sidecar_traces_evicted_total", {"reason": "bytes_kept"}) == 0
    assert _val(reg, "sidecar_traces_stored_bytes") == store.nbytes
    # The oldest plain traces went: what is left is the newest ones.
    firsts = sorted(e.first_seen for e in store._plain.values())
    arrivals = [float(i) for i in range(20) for _ in range(5)]
    assert firsts == arrivals[len(arrivals) - len(firsts) :]


def test_the_store_total_is_exactly_the_sum_of_what_it_holds_after_every_kind_of_eviction() -> None:
    reg = CollectorRegistry()
    store = _store(reg, max_traces=6, max_age_secs=10.0)
    rnd = random.Random(5)
    for i in range(12):
        store.add(decode_json(_big_json(rnd, 3, 4, 3000), DEFAULT_LIMITS).records, float(i))
    store.expire(20.5)  # the traces first seen at 10.0 are past max_age_secs, those at 11.0 not
    held = sum(e.nbytes for od in (store._plain, store._kept) for e in od.values())
    assert store.nbytes == held
    assert _val(reg, "sidecar_traces_evicted_total", {"reason": "count_plain"}) > 0
    assert _val(reg, "sidecar_traces_evicted_total", {"reason": "age"}) > 0
    store.expire(1000.0)
    assert len(store) == 0 and store.nbytes == 0


def test_a_trace_over_its_byte_budget_drops_its_later_spans_and_counts_them() -> None:
    reg = CollectorRegistry()
    store = _store(reg, max_trace_bytes=100 * KIB)
    rnd = random.Random(2)
    trace = rnd.randbytes(16)
    # 10 spans of ~33 KiB in one trace: only the first few fit in 100 KiB.
    records = decode_json(_big_json(rnd, 10, 8, 4000, trace=trace), DEFAULT_LIMITS).records
    stored = store.add(records, 0.0)
    assert stored == (100 * KIB - ENTRY_BYTES) // record_bytes(records[0])
    e = store.get(trace.hex())
    assert e is not None and len(e.by_id) == stored and e.nbytes <= 100 * KIB
    assert _val(reg, "sidecar_traces_spans_dropped_total", {"reason": "trace_bytes"}) == 10 - stored


def test_shed_evicts_down_to_the_fraction_for_the_memory_limiter_and_counts_it() -> None:
    reg = CollectorRegistry()
    store = _store(reg, max_bytes=8 * MIB)
    rnd = random.Random(4)
    for i in range(10):
        store.add(decode_json(_big_json(rnd, 4, 8, 4000), DEFAULT_LIMITS).records, float(i))
    before, n_before = store.nbytes, len(store)
    freed = store.shed(0.5)
    assert store.nbytes <= before * 0.5 and freed == before - store.nbytes
    evicted = _val(reg, "sidecar_traces_evicted_total", {"reason": "memory_pressure"})
    assert evicted == n_before - len(store) > 0
    assert store.shed(0.0) > 0 and len(store) == 0 and store.nbytes == 0


def test_a_shed_store_is_held_down_until_restored_by_half_the_headroom_each_time() -> None:
    reg = CollectorRegistry()
    store = _store(reg, max_bytes=8 * MIB, max_trace_bytes=256 * KIB)
    rnd = random.Random(8)

    def fill(n: int) -> None:
        for _ in range(n):
            store.add(decode_json(_big_json(rnd, 4, 8, 4000), DEFAULT_LIMITS).records, 0.0)

    fill(40)  # ~5.3 MB
    held = store.nbytes
    store.shed(0.5)
    assert store.budget == int(held * 0.5) and store.nbytes <= store.budget
    assert _val(reg, "sidecar_traces_store_budget_bytes") == store.budget
    fill(40)  # refilling stops at the lowered budget, evictions counted as memory pressure
    assert store.nbytes <= store.budget < 8 * MIB
    before = _val(reg, "sidecar_traces_evicted_total", {"reason": "memory_pressure"})
    assert before > 0 and _val(reg, "sidecar_traces_evicted_total", {"reason": "bytes_plain"}) == 0
    budget = store.budget
    assert store.restore(2 * MIB) is True and store.budget == budget + MIB
    assert store.restore(0) is True and store.budget == budget + MIB  # no headroom: no change
    assert store.restore(64 * MIB) is False and store.budget == 8 * MIB  # never above max_bytes
    store.shed(0.0)
    assert store.budget == 256 * KIB  # held down to one trace at least, never to nothing


def test_an_empty_trace_entry_is_counted_too() -> None:
    store = _store(CollectorRegistry())
    rnd = random.Random(6)
    rec = decode_json(_big_json(rnd, 1, 1, 10), DEFAULT_LIMITS).records
    store.add(rec, 0.0)
    assert store.nbytes == ENTRY_BYTES + record_bytes(rec[0])


@pytest.mark.parametrize(
    "traces,field",
    [
        ({"store": {"max_bytes_mib": 8, "max_trace_bytes_mib": 4}}, "traces.store"),
        ({"store": {"max_bytes_mib": 0}}, "traces.store.max_bytes_mib"),
        ({"store": {"pressure_keep_fraction": 1.0}}, "traces.store.pressure_keep_fraction"),
    ],
)
def test_bad_store_budgets_are_a_config_error_naming_the_field(traces: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"traces": traces})
    assert field in str(err.value)


def test_the_inflight_byte_budget_must_hold_one_body() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"server": {"max_body_bytes": 4 * MIB, "max_inflight_bytes_mib": 2}})
    assert "server" in str(err.value) and "max_inflight_bytes_mib" in str(err.value)


def test_the_default_budgets_hold_together() -> None:
    cfg = parse_config({})
    assert cfg.traces.store.max_bytes == 128 * MIB and cfg.traces.store.max_trace_bytes == 4 * MIB
