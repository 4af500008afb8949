"""The compiled OTLP path (sidecar/traces/_otlpfast.c) against the Python path, which is its reference.

Two properties, checked on real captures, on seeded random bodies with the odd shapes exporters may send,
on every truncation and on random byte damage:
- decoding: whenever the compiled path returns records they equal the Python decoders' (and what the Python
  path rejects or refuses it hands back rather than deciding itself);
- ingest: two hubs, one with the compiled path and one without, fed the same bodies (traces split across
  bodies, shuffled, re-sent, over the per-trace limit, over the store and series limits) end with the same
  store (entries, their order, pairing state), the same histogram counts and the same counters.
"""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from prometheus_client import CollectorRegistry
from traces_helpers import DATA, sample

from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.errors import ParseError
from sidecar.traces import native
from sidecar.traces.hub import TraceHub
from sidecar.traces.otlp_decode import DecodeResult, decode_json_doc, decode_protobuf
from sidecar.traces.store import TraceEntry

needs_native = pytest.mark.skipif(not native.available(), reason="the extension is not built (see the test below)")


def test_the_extension_is_built() -> None:
    # CI installs with a C compiler, so the compiled path must be there; a user's install without one still
    # works (the Python path), which the rest of the suite covers with traces.native false.
    assert native.available(), "sidecar.traces._otlpfast did not build: pip install -e . needs gcc and Python headers"


# ---------------------------------------------------------------- random OTLP JSON


TRITON_EVENTS = {
    "request": ["HTTP_RECV_START", "HTTP_RECV_END", "INFER_RESPONSE_COMPLETE", "HTTP_SEND_START", "HTTP_SEND_END"],
    "grpc": ["GRPC_WAITREAD_START", "GRPC_WAITREAD_END", "GRPC_SEND_START", "GRPC_SEND_END"],
    "model": ["REQUEST_START", "QUEUE_START", "REQUEST_END"],
    "compute": ["COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END"],
}


def _hex(rnd: random.Random, n: int) -> str:
    return rnd.randbytes(n).hex()


def _odd(rnd: random.Random, p: float) -> bool:
    return rnd.random() < p


def _time(rnd: random.Random, t: int, p: float) -> Any:
    if not _odd(rnd, p):
        return str(t) if rnd.random() < 0.8 else t
    return rnd.choice(
        [t, str(t), f" {t} ", "1_000", -5, "-5", 1.5, "x", None, "99999999999999999999999", True, [], "0"]
    )


def _value(rnd: random.Random, p: float) -> Any:
    if not _odd(rnd, p):
        return {"stringValue": rnd.choice(["m", "ctr", "fraud", "é"])}
    return rnd.choice(
        [
            {"intValue": "3"},
            {"intValue": 3},
            {"intValue": "x"},
            {"doubleValue": 1.5},
            {"doubleValue": "2.5"},
            {"boolValue": True},
            {"arrayValue": {"values": [{"stringValue": "a"}]}},
            {"kvlistValue": {"values": []}},
            {"bytesValue": "AAE="},
            {},
            None,
            [],
            0,
            {"stringValue": 7},
            {"other": 1},
        ]
    )


def _attrs(rnd: random.Random, model: bool, p: float) -> Any:
    out: list[Any] = []
    if model:
        out.append({"key": "triton.model_name", "value": _value(rnd, p)})
        v = (
            rnd.choice([{"intValue": "1"}, {"intValue": 2}, {"stringValue": "3"}])
            if not _odd(rnd, p)
            else _value(rnd, 1)
        )
        out.append({"key": "triton.model_version", "value": v})
    if _odd(rnd, p):
        out.append(
            rnd.choice(
                [
                    {"key": "other", "value": {"stringValue": "x"}},
                    {"key": 5, "value": {}},
                    "notakv",
                    {"value": {}},
                    {"key": "triton.model_name"},
                ]
            )
        )
    rnd.shuffle(out)
    if _odd(rnd, p / 2):
        return rnd.choice([[], {}, "x", None])
    return out


def _events(rnd: random.Random, names: list[str], t: int, p: float) -> Any:
    evs: list[Any] = [{"name": n, "timeUnixNano": _time(rnd, t + 10 * i, p)} for i, n in enumerate(names)]
    if _odd(rnd, p):
        evs.append(
            rnd.choice(
                [
                    {"name": names[0], "timeUnixNano": str(t + 5)},
                    {"name": "X", "timeUnixNano": "1", "attributes": []},
                    {"timeUnixNano": "1"},
                    {"name": 5, "timeUnixNano": "1"},
                    "e",
                    {"name": "QUEUE_START", "timeUnixNano": str(t - 100)},
                ]
            )
        )
    if _odd(rnd, p / 2):
        return rnd.choice([[], {}, "x", None])
    return evs


def _id(rnd: random.Random, n: int, p: float) -> Any:
    if not _odd(rnd, p):
        h = _hex(rnd, n)
        return h.upper() if _odd(rnd, 0.1) else h
    return rnd.choice(
        [
            "0" * 2 * n,
            _hex(rnd, n)[:-1],
            " ".join([_hex(rnd, n // 2 + 1)]) + " " * 2,
            "zz" * n,
            5,
            None,
            "",
            "Z" + _hex(rnd, n)[1:],
        ]
    )


def _json_span(rnd: random.Random, tid: str, sid: str, pid: str | None, kind: str, t: int, p: float) -> Any:
    s: dict[str, Any] = {
        "traceId": tid if not _odd(rnd, p / 3) else _id(rnd, 16, 1),
        "spanId": sid if not _odd(rnd, p / 3) else _id(rnd, 8, 1),
    }
    if pid is not None:
        s["parentSpanId"] = pid
    elif _odd(rnd, p):
        s["parentSpanId"] = rnd.choice(["", None, "0" * 16, 0, "abc"])
    s["name"] = {
        "request": "InferRequest",
        "grpc": "InferRequest",
        "model": rnd.choice(["ctr", "m"]),
        "compute": "compute",
        "caller": "caller",
    }[kind]
    if _odd(rnd, p / 2):
        s["name"] = rnd.choice([5, None, "compute"])
        if _odd(rnd, 0.3):
            del s["name"]
    s["kind"] = 2 if not _odd(rnd, p) else rnd.choice(["SPAN_KIND_SERVER", "SPAN_KIND_BOGUS", 2.0, None, "3"])
    s["startTimeUnixNano"] = _time(rnd, t, p / 2)
    s["endTimeUnixNano"] = _time(rnd, t + 1000, p / 2)
    if _odd(rnd, p / 4):
        del s[rnd.choice(["startTimeUnixNano", "endTimeUnixNano"])]
    if kind == "model" or _odd(rnd, p / 3):
        s["attributes"] = _attrs(rnd, kind == "model", p)
    if kind in TRITON_EVENTS:
        s["events"] = _events(rnd, TRITON_EVENTS[kind], t, p)
    if kind == "caller" or _odd(rnd, p):
        s["status"] = rnd.choice(
            [
                {"code": 2, "message": "boom"},
                {"code": "STATUS_CODE_ERROR"},
                {"code": 1},
                {},
                {"code": "2"},
                {"code": "bogus"},
                "x",
                {"code": 2, "message": 5},
                None,
                {"code": None},
            ]
        )
    if _odd(rnd, p / 3):
        s["droppedAttributesCount"] = 0
    return s


def _request_spans(rnd: random.Random, p: float, t: int) -> list[tuple[str, dict[str, Any]]]:
    """(kind, span) of one Triton request, sometimes with a caller span, a missing or doubled compute span,
    a nested model span, or a model span that is its own parent."""
    tid = _hex(rnd, 16)
    req, model, comp, caller = (_hex(rnd, 8) for _ in range(4))
    rk = "grpc" if _odd(rnd, 0.2) else "request"
    parts: list[tuple[str, str, str | None]] = []
    if _odd(rnd, 0.3):
        parts.append(("caller", caller, None))
        parts.append((rk, req, caller))
    else:
        parts.append((rk, req, None))
    shape = rnd.random()
    if shape < 0.05:
        parts.append(("model", model, model))  # its own parent
    elif shape < 0.1:
        parts.append(("model", model, _hex(rnd, 8)))  # parent never sent
    else:
        parts.append(("model", model, req))
    if not _odd(rnd, 0.1):
        parts.append(("compute", comp, model))
    if _odd(rnd, 0.05):
        parts.append(("compute", _hex(rnd, 8), model))
    if _odd(rnd, 0.05):
        inner, inner_c = _hex(rnd, 8), _hex(rnd, 8)
        parts.append(("model", inner, model))
        parts.append(("compute", inner_c, inner))
    if _odd(rnd, 0.05):
        parts.append(("compute", _hex(rnd, 8), _hex(rnd, 8)))  # compute without its model span
    return [(k, _json_span(rnd, tid, sid, pid, k, t + 100 * i, p)) for i, (k, sid, pid) in enumerate(parts)]


def _doc(spans: list[Any], rnd: random.Random | None = None, p: float = 0.0) -> dict[str, Any]:
    res: Any = {"attributes": [{"key": "service.name", "value": {"stringValue": "triton-inference-server"}}]}
    scope_key = "scopeSpans"
    if rnd is not None and _odd(rnd, p):
        res = rnd.choice(
            [
                None,
                {},
                {"attributes": []},
                {"attributes": [{"key": "service.name", "value": {"stringValue": 5}}]},
                {"attributes": [{"key": "service.name"}]},
                {
                    "attributes": [
                        {"key": "service.name", "value": {"stringValue": "a"}},
                        {"key": "service.name", "value": {"stringValue": "b"}},
                    ]
                },
            ]
        )
        scope_key = rnd.choice(["scopeSpans", "instrumentationLibrarySpans"])
    rs: dict[str, Any] = {scope_key: [{"scope": {"name": "x"}, "spans": spans}]}
    if res is not None:
        rs["resource"] = res
    return {"resourceSpans": [rs]}


def _random_docs(seed: int, n: int, p: float) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    docs = []
    for _ in range(n):
        spans = [s for _ in range(rnd.randint(1, 6)) for _, s in _request_spans(rnd, p, 10**18)]
        if _odd(rnd, p / 2):
            spans.append(rnd.choice(["notaspan", 5, None, [], {}]))
        docs.append(_doc(spans, rnd, p))
    return docs


# ---------------------------------------------------------------- JSON -> protobuf


def _to_pb(doc: dict[str, Any], rnd: random.Random) -> bytes:
    """The same spans as protobuf, skipping what protobuf cannot say; odd but valid wire shapes at times."""
    req = ExportTraceServiceRequest()
    for rs in doc["resourceSpans"]:
        out = req.resource_spans.add()
        kv = out.resource.attributes.add(key="service.name")
        kv.value.string_value = rnd.choice(["triton-inference-server", "svc", ""])
        ss = out.scope_spans.add()
        for s in (rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or [{}])[0].get("spans", []):
            if not isinstance(s, dict):
                continue
            p = ss.spans.add()
            for field, key, n in (
                ("trace_id", "traceId", 16),
                ("span_id", "spanId", 8),
                ("parent_span_id", "parentSpanId", 8),
            ):
                v = s.get(key)
                try:
                    b = bytes.fromhex(v) if isinstance(v, str) else b""
                except ValueError:
                    b = rnd.randbytes(rnd.choice([0, n - 1, n + 1]))
                setattr(p, field, b)
            p.name = s["name"] if isinstance(s.get("name"), str) else ""
            p.kind = rnd.choice([2, 2, 2, 3, -1, 7])
            for k in ("start_time_unix_nano", "end_time_unix_nano"):
                v = s.get("startTimeUnixNano" if k.startswith("start") else "endTimeUnixNano")
                setattr(p, k, _pb_int(v))
            attrs = s.get("attributes")
            for a in attrs if isinstance(attrs, list) else ():
                if not isinstance(a, dict) or not isinstance(a.get("key"), str):
                    continue
                kv = p.attributes.add(key=a["key"])
                v = a.get("value")
                if isinstance(v, dict) and isinstance(v.get("stringValue"), str):
                    kv.value.string_value = v["stringValue"]
                elif isinstance(v, dict) and isinstance(v.get("intValue"), (int, str)) and str(v["intValue"]).isdigit():
                    kv.value.int_value = int(v["intValue"]) * rnd.choice([1, 1, 1, 1000])
                elif isinstance(v, dict) and "boolValue" in v:
                    kv.value.bool_value = True
                elif isinstance(v, dict) and "doubleValue" in v:
                    kv.value.double_value = 1.5
            evs = s.get("events")
            for e in evs if isinstance(evs, list) else ():
                if not isinstance(e, dict) or not isinstance(e.get("name"), str):
                    continue
                t = e.get("timeUnixNano")
                pe = p.events.add(name=e["name"], time_unix_nano=_pb_int(t))
                if "attributes" in e:
                    pe.attributes.add(key="k").value.string_value = "v"
            st = s.get("status")
            if isinstance(st, dict) and isinstance(st.get("code"), int):
                p.status.code = st["code"]
                if isinstance(st.get("message"), str):
                    p.status.message = st["message"]
    return req.SerializeToString()


def _pb_int(v: Any) -> int:
    if type(v) is int and 0 <= v < 2**64:
        return v
    return int(v) if isinstance(v, str) and v.isdigit() and len(v) < 20 else 0


def _pb_span_bytes(**fields: Any) -> bytes:
    return PbSpan(**fields).SerializeToString()


def _wrap(span_bytes: bytes) -> bytes:
    """A request of one span given as raw bytes (fields 1 -> 2 -> 2 -> span)."""

    def ld(field: int, b: bytes) -> bytes:
        n, out = len(b), b""
        while True:
            out += bytes([(n & 0x7F) | (0x80 if n > 0x7F else 0)])
            n >>= 7
            if not n:
                break
        return bytes([field << 3 | 2]) + out + b

    return ld(1, ld(2, ld(2, span_bytes)))


# ---------------------------------------------------------------- decoding


def _check_json(doc: Any) -> str:
    """Compare both decoders on one document; returns which path decided ("native", "handed back")."""
    try:
        ref = decode_json_doc(doc)
        ref_exc = None
    except Exception as exc:  # the reference may raise (ParseError, or a bug it has); native must match
        ref, ref_exc = None, type(exc)
    res = DecodeResult()
    try:
        got = native.NativeIngest.decode_json(doc, res)
    except Exception as exc:
        assert ref_exc is type(exc), f"native raised {exc!r}, reference {ref_exc}"
        return "raised"
    if got is None:
        return "handed back"
    assert ref is not None, f"native accepted what the reference refuses ({ref_exc})"
    assert got == ref.records
    assert (res.rejected, res.first_error) == (ref.rejected, ref.first_error)
    return "native"


def _check_pb(body: bytes) -> str:
    try:
        ref: list[Any] | None = decode_protobuf(body).records
        rejected = decode_protobuf(body).rejected
    except ParseError:
        ref, rejected = None, 0
    got = native.NativeIngest.decode_protobuf(body)
    if got is None:
        return "handed back"
    assert ref is not None, "native accepted a body the reference refuses"
    assert rejected == 0, "native accepted a body with spans the reference rejects"
    assert got == ref
    return "native"


@needs_native
def test_real_captures_decode_to_the_same_records() -> None:
    doc = orjson.loads((DATA / "otlp-traces-triton.json").read_bytes())
    assert _check_json(doc) == "native"  # Triton's own JSON takes the compiled path whole
    assert len(decode_json_doc(doc).records) == 360
    body = (DATA / "otlp-traces-python.pb").read_bytes()
    assert _check_pb(body) == "native"  # and so does the OpenTelemetry SDK's protobuf
    assert len(decode_protobuf(body).records) == 240


@needs_native
@pytest.mark.parametrize("p", [0.0, 0.05, 0.3])
def test_random_json_documents_decode_to_the_same_records(p: float) -> None:
    seen: dict[str, int] = {}
    for doc in _random_docs(seed=int(p * 100) + 1, n=400, p=p):
        way = _check_json(doc)
        seen[way] = seen.get(way, 0) + 1
    assert seen.get("native", 0) > 100  # the comparison was made, not skipped
    if p == 0.0:
        assert seen == {"native": 400}


@needs_native
@pytest.mark.parametrize("p", [0.0, 0.05, 0.3])
def test_random_protobuf_bodies_decode_to_the_same_records(p: float) -> None:
    rnd = random.Random(7)
    seen: dict[str, int] = {}
    for doc in _random_docs(seed=int(p * 100) + 2, n=300, p=p):
        way = _check_pb(_to_pb(doc, rnd))
        seen[way] = seen.get(way, 0) + 1
    # One odd field hands the whole body back, so with odd fields common few bodies are read natively; the
    # point is that none is read differently.
    assert seen.get("native", 0) > {0.0: 150, 0.05: 10, 0.3: 0}[p]


@needs_native
def test_protobuf_odd_shapes_are_handed_back_or_read_alike() -> None:
    tid, sid = b"\x01" * 16, b"\x02" * 8
    base = {"trace_id": tid, "span_id": sid, "name": "compute", "start_time_unix_nano": 5, "end_time_unix_nano": 9}
    good = _pb_span_bytes(**base)
    cases = {
        "plain": good,
        "name twice, last wins": good + b"\x2a\x03abc",
        "invalid UTF-8 name": _pb_span_bytes(**{**base, "name": ""}) + b"\x2a\x02\xff\xfe",
        "unknown varint field": good + b"\xa0\x06\x01",
        "unknown fixed32 field": good + b"\x85\x01\x01\x02\x03\x04",
        "a group": good + b"\xa3\x06\xa4\x06",
        "field number 0 at the end": good + b"\x00",
        "start as varint": _pb_span_bytes(**{**base, "start_time_unix_nano": 0}) + b"\x38\x05",
        "kind -1": _pb_span_bytes(**{**base, "kind": -1}),
        "kind over 32 bits": good + b"\x30\x80\x80\x80\x80\x10",
        "varint of 11 bytes": good + b"\x30" + b"\x80" * 10 + b"\x01",
        "status code and message": _pb_span_bytes(**base, status={"code": 2, "message": "é"}),
        "status message invalid UTF-8": good + b"\x7a\x04\x12\x02\xff\xfe",
        "status code huge": good + b"\x7a\x06\x18\xff\xff\xff\xff\x0f",
        "empty status": good + b"\x7a\x00",
        "empty attribute": good + b"\x4a\x00",
        "event with time 0": _pb_span_bytes(**base, events=[{"name": "QUEUE_START"}]),
        "event name cut short": good + b"\x5a\x0d\x09" + b"\x01" * 8 + b"\x12\x10ab",
        "event name invalid UTF-8": good + b"\x5a\x0d\x09" + b"\x01" * 8 + b"\x12\x02\xff\xfe",
        "model attribute as int": good
        + PbSpan(attributes=[{"key": "triton.model_name", "value": {"int_value": 3}}]).SerializeToString(),
        "model attribute long": good
        + PbSpan(attributes=[{"key": "triton.model_name", "value": {"string_value": "m" * 200}}]).SerializeToString(),
        "version as big int": good
        + PbSpan(
            attributes=[
                {"key": "triton.model_name", "value": {"string_value": "m"}},
                {"key": "triton.model_version", "value": {"int_value": 300}},
            ]
        ).SerializeToString(),
        "model name invalid UTF-8": good + b"\x4a\x19\x0a\x11triton.model_name\x12\x04\x0a\x02\xff\xfe",
        "parent of 7 bytes": _pb_span_bytes(**{**base, "parent_span_id": b"\x01" * 7}),
        "zero trace id": _pb_span_bytes(**{**base, "trace_id": bytes(16)}),
    }
    ways = {name: _check_pb(_wrap(b)) for name, b in cases.items()}
    assert ways["plain"] == ways["name twice, last wins"] == ways["unknown varint field"] == "native"
    assert ways["status code and message"] == ways["kind -1"] == ways["empty status"] == "native"
    # Shapes the hand-read model attribute does not cover go to Python whole (a version of 128 or more is a
    # two-byte varint), as do events with time 0 (the time field is then left out) and anything invalid.
    assert ways["version as big int"] == ways["event with time 0"] == ways["a group"] == "handed back"
    assert ways["invalid UTF-8 name"] == ways["field number 0 at the end"] == ways["zero trace id"] == "handed back"
    assert native.NativeIngest.decode_protobuf(_wrap(cases["name twice, last wins"]))[0][3] == "abc"  # type: ignore[index]


@needs_native
def test_every_truncation_and_random_damage_is_safe() -> None:
    rnd = random.Random(3)
    bodies = [_to_pb(d, rnd) for d in _random_docs(seed=9, n=6, p=0.05)]
    bodies.append((DATA / "otlp-traces-python.pb").read_bytes()[:3000])
    cut = 0
    for body in bodies:
        for n in range(len(body)):
            _check_pb(body[:n])
            cut += 1
    for _ in range(3000):
        b = bytearray(rnd.choice(bodies))
        for _ in range(rnd.randint(1, 4)):
            i = rnd.randrange(len(b))
            op = rnd.random()
            if op < 0.5:
                b[i] = rnd.randrange(256)
            elif op < 0.75:
                del b[i]
            else:
                b.insert(i, rnd.randrange(256))
        _check_pb(bytes(b))
    assert cut > 1000


# ---------------------------------------------------------------- ingest


def _hubs(**traces: Any) -> tuple[TraceHub, CollectorRegistry, TraceHub, CollectorRegistry]:
    clock = FakeClock()
    out: list[Any] = []
    for nat in (True, False):
        cfg = parse_config({"traces": {"enabled": True, "native": nat, **traces}}).traces
        reg = CollectorRegistry()
        out += [TraceHub(cfg, reg, clock), reg]
    assert (out[0].native is not None) and out[2].native is None
    return out[0], out[1], out[2], out[3]


def _entry(e: TraceEntry) -> tuple[Any, ...]:
    # stage_times is a cache of event times (either path may hold it or not); everything else must match.
    return (
        e.trace_id,
        e.first_seen,
        list(e.by_id.items()),
        e.start_ns,
        e.end_ns,
        e.model,
        e.version,
        e.error,
        e.failure_note,
        e.stage_compute,
        e.stage_waiting,
    )


def _histograms(reg: CollectorRegistry) -> dict[tuple[str, ...], Any]:
    out: dict[tuple[str, ...], Any] = {}
    for fam in reg.collect():
        if fam.name != "sidecar_triton_stage_duration_seconds":
            continue
        for s in fam.samples:
            key = (s.name, *sorted(s.labels.items()))  # type: ignore[arg-type]
            ex = s.exemplar
            out[key] = (s.value, None if ex is None else (dict(ex.labels), ex.value, ex.timestamp))
    return out


def _close(a: dict[tuple[str, ...], Any], b: dict[tuple[str, ...], Any]) -> None:
    assert a.keys() == b.keys()
    for k in a:
        if k[0].endswith("_sum"):
            # The compiled path adds a request's values up before adding them to the sum: equal to rounding.
            assert a[k][0] == pytest.approx(b[k][0], rel=1e-12), k
            assert a[k][1] == b[k][1], k
        else:
            assert a[k] == b[k], k


COUNTERS = [
    ("sidecar_traces_spans_ingested_total", {"source": "otlp"}),
    ("sidecar_traces_spans_dropped_total", {"reason": "duplicate"}),
    ("sidecar_traces_spans_dropped_total", {"reason": "trace_full"}),
    ("sidecar_traces_evicted_total", {"reason": "count_plain"}),
    ("sidecar_traces_evicted_total", {"reason": "count_kept"}),
    ("sidecar_traces_stage_series_refused_total", {}),
]


def _same(a: TraceHub, ra: CollectorRegistry, b: TraceHub, rb: CollectorRegistry) -> None:
    for od in ("_plain", "_kept"):
        ea = [(k, _entry(e)) for k, e in getattr(a.store, od).items()]
        eb = [(k, _entry(e)) for k, e in getattr(b.store, od).items()]
        assert ea == eb, od
    _close(_histograms(ra), _histograms(rb))  # counts and exemplars (trace id, value) exactly
    assert [k for k, _ in a.stages._keys] == [k for k, _ in b.stages._keys]  # series created in the same order
    for name, labels in COUNTERS:
        assert sample(ra, name, labels) == sample(rb, name, labels), name


def _workload(seed: int, p: float, n_requests: int) -> list[tuple[bytes, bool]]:
    """Bodies (and whether JSON) holding n requests' spans shuffled and split, some sent twice."""
    rnd = random.Random(seed)
    spans = [s for i in range(n_requests) for _, s in _request_spans(rnd, p, 10**18 + i * 10**6)]
    # Mostly in order, as exporters send; a share moved so that traces straddle bodies.
    for _ in range(len(spans) // 5):
        i, j = rnd.randrange(len(spans)), rnd.randrange(len(spans))
        spans[i], spans[j] = spans[j], spans[i]
    bodies: list[tuple[bytes, bool]] = []
    i = 0
    while i < len(spans):
        n = rnd.choice([1, 3, 7, 50, 100])
        doc = _doc(spans[i : i + n])
        as_json = rnd.random() < 0.5
        body = orjson.dumps(doc) if as_json else _to_pb(doc, random.Random(i))
        bodies.append((body, as_json))
        if _odd(rnd, 0.05):
            bodies.append((body, as_json))
        i += n
    return bodies


def _feed(hub: TraceHub, bodies: list[tuple[bytes, bool]]) -> list[tuple[int, str]]:
    out = []
    for body, as_json in bodies:
        try:
            r = hub.ingest_otlp(body, as_json)
            out.append((r.rejected, r.first_error))
        except ParseError as exc:
            out.append((-1, str(exc)))
    return out


@needs_native
@pytest.mark.parametrize(
    ("seed", "p", "traces"),
    [
        (1, 0.0, {}),
        (2, 0.02, {}),
        (3, 0.02, {"max_traces": 40, "slow_threshold_ms": 0.0005}),
        (4, 0.0, {"max_spans_per_trace": 3, "max_model_versions": 1}),
        (5, 0.1, {"max_traces": 25}),
    ],
)
def test_both_paths_leave_the_same_store_histograms_and_counts(seed: int, p: float, traces: dict[str, Any]) -> None:
    a, ra, b, rb = _hubs(**traces)
    bodies = _workload(seed, p, 300)
    assert _feed(a, bodies) == _feed(b, bodies)
    _same(a, ra, b, rb)
    assert sample(ra, "sidecar_traces_spans_ingested_total", {"source": "otlp"}) > 500
    # The compiled path did the work for most bodies, and said how often it did not.
    handed_back = sum(
        sample(ra, "sidecar_otlp_native_fallbacks_total", {"encoding": e}) or 0 for e in ("json", "protobuf")
    )
    assert handed_back < len(bodies) / 2
    assert sample(ra, "sidecar_otlp_native_enabled") == 1 and sample(rb, "sidecar_otlp_native_enabled") == 0


@needs_native
def test_real_triton_capture_is_stored_alike_in_any_split() -> None:
    doc = orjson.loads((DATA / "otlp-traces-triton.json").read_bytes())
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    rnd = random.Random(11)
    for split in (len(spans), 7, 1):
        a, ra, b, rb = _hubs()
        order = list(spans)
        rnd.shuffle(order)
        bodies = [
            (
                orjson.dumps(
                    {
                        **doc,
                        "resourceSpans": [{**doc["resourceSpans"][0], "scopeSpans": [{"spans": order[i : i + split]}]}],
                    }
                ),
                True,
            )
            for i in range(0, len(order), split)
        ]
        _feed(a, bodies)
        _feed(b, bodies)
        _same(a, ra, b, rb)
        counted = [
            sample(ra, "sidecar_triton_stage_duration_seconds_count", {"model": m, "version": v, "stage": st})
            for m, v in (("ctr", "1"), ("rank", "2"), ("fraud", "1"))
            for st in ("request", "queue", "network_receive")
        ]
        assert counted == [40] * 9  # 360 spans: 40 requests of three spans each for each of three models


@needs_native
def test_a_body_it_hands_back_is_counted_and_still_taken() -> None:
    a, ra, _, _ = _hubs()
    good = _pb_span_bytes(
        trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="x", start_time_unix_nano=1, end_time_unix_nano=2
    )
    odd = _wrap(good + b"\xa3\x06\xa4\x06")  # a group: valid protobuf, not a shape the compiled path reads
    result = a.ingest_otlp(odd, False)
    assert len(result.records) == 1 and a.store.get("01" * 16) is not None
    assert sample(ra, "sidecar_otlp_native_fallbacks_total", {"encoding": "protobuf"}) == 1
    with pytest.raises(ParseError):
        a.ingest_otlp(odd[:-3], False)
    assert sample(ra, "sidecar_otlp_native_fallbacks_total", {"encoding": "protobuf"}) == 2


# ---------------------------------------------------------------- cases a review found


@needs_native
def test_every_copy_of_the_name_is_checked_and_long_tags_are_refused() -> None:
    good = _pb_span_bytes(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, start_time_unix_nano=1, end_time_unix_nano=2)
    bad_then_good = good + b"\x2a\x02\xff\xfe" + b"\x2a\x02ok"  # upb checks both copies: the body is refused
    with pytest.raises(ParseError):
        decode_protobuf(_wrap(bad_then_good))
    assert native.NativeIngest.decode_protobuf(_wrap(bad_then_good)) is None
    long_tag = b"\x8a\x80\x80\x80\x80\x00\x10" + b"\x01" * 16 + good[18:]  # field 1 in a 6-byte tag
    assert _check_pb(_wrap(long_tag)) == "handed back"
    with pytest.raises(ParseError):
        decode_protobuf(_wrap(long_tag))
    five = b"\x8a\x80\x80\x80\x00\x10" + b"\x01" * 16 + good[18:]  # 5 bytes: valid, and read alike
    assert _check_pb(_wrap(five)) == "native"


def _span(tid: str, sid: str, **kw: Any) -> dict[str, Any]:
    s: dict[str, Any] = {
        "traceId": tid,
        "spanId": sid,
        "name": kw.pop("name", "x"),
        "startTimeUnixNano": "10",
        "endTimeUnixNano": "30",
    }
    if "pid" in kw:
        s["parentSpanId"] = kw.pop("pid")
    if "model" in kw:
        s["attributes"] = [{"key": "triton.model_name", "value": {"stringValue": kw.pop("model")}}]
    if "events" in kw:
        s["events"] = [{"name": n, "timeUnixNano": str(t)} for n, t in kw.pop("events").items()]
    s.update(kw)
    return s


@needs_native
@pytest.mark.parametrize("odd", ["spanId", "parentSpanId"])
def test_a_span_with_spaced_hex_ids_stays_in_its_trace(odd: str) -> None:
    # bytes.fromhex reads "0102030405 0607 " as 7 bytes: the Python path keeps such a span (the id check is on
    # the text's length), so the compiled path must keep it in its trace, not beside it.
    t = "01" * 16
    b_span = _span(t, "2222222222222222", model="b")
    b_span[odd] = "0102030405 0607 "
    a_span = _span(t, "1111111111111111", model="a", startTimeUnixNano="5")
    for order in ([b_span, a_span], [a_span, b_span]):
        a, ra, b, rb = _hubs()
        body = orjson.dumps(_doc(order))
        assert _feed(a, [(body, True)]) == _feed(b, [(body, True)])
        _same(a, ra, b, rb)
        assert len(a.store.get(t).by_id) == 2  # type: ignore[union-attr]


REQ = {"REQUEST_START": 1, "REQUEST_END": 5}
COMP = {"COMPUTE_START": 1, "COMPUTE_INPUT_END": 2, "COMPUTE_OUTPUT_START": 3, "COMPUTE_END": 4}


@needs_native
@pytest.mark.parametrize(
    "spans",
    [
        # a new trace, then one the compiled path hands to Python (an attribute it does not read)
        [
            _span("01" * 16, "1" * 16, model="a", events=REQ),
            {
                **_span("02" * 16, "2" * 16, model="b", events=REQ),
                "attributes": [
                    {"key": "triton.model_name", "value": {"stringValue": "b"}},
                    {"key": "x", "value": {"intValue": "x"}},
                ],
            },
        ],
        # within one trace: a model span with no events, another with, then the first one's compute span
        [
            _span("03" * 16, "1" * 16, model="a"),
            _span("03" * 16, "2" * 16, model="b", events=REQ),
            _span("03" * 16, "3" * 16, name="compute", pid="1" * 16, events=COMP),
        ],
        # across traces: the same, with the second model span in another trace
        [
            _span("01" * 16, "1" * 16, model="a"),
            _span("02" * 16, "2" * 16, model="b", events=REQ),
            _span("01" * 16, "3" * 16, name="compute", pid="1" * 16, events=COMP),
        ],
    ],
    ids=["new-then-handed-back", "within-a-trace", "across-traces"],
)
def test_the_last_series_slot_goes_to_the_same_model_on_both_paths(spans: list[dict[str, Any]]) -> None:
    for order in (spans, spans[::-1]):
        a, ra, b, rb = _hubs(max_model_versions=1)
        body = orjson.dumps(_doc(order))
        _feed(a, [(body, True)])
        _feed(b, [(body, True)])
        _same(a, ra, b, rb)
        assert sample(ra, "sidecar_traces_stage_series_refused_total") >= 1


@needs_native
def test_spans_of_a_short_trace_id_are_taken_together_as_on_the_python_path() -> None:
    # "00 11 2233..." is 32 characters that bytes.fromhex reads as 15 bytes: the Python path keeps these spans
    # (its check is on the text's length) under that 15-byte key, so both paths must group them by it.
    short, other = "00 11 2233445566778899aabbccddee", "0f" * 16
    bodies = [
        [
            _span(short, "1" * 16, name="A"),
            _span(other, "2" * 16, status={"code": 2}),
            _span(short, "3" * 16, status={"code": 2}),
        ],
        [
            _span(short, "1" * 16, name="A"),
            _span(other, "2" * 16, model="mB", events=REQ),
            _span(short, "3" * 16, model="mC", events=REQ),
        ],
    ]
    for spans in bodies:
        a, ra, b, rb = _hubs(max_model_versions=1)
        body = orjson.dumps(_doc(spans))
        assert _feed(a, [(body, True)]) == _feed(b, [(body, True)])
        _same(a, ra, b, rb)
        assert len(a.store) == 2


@needs_native
def test_exemplars_and_series_order_follow_the_per_span_order() -> None:
    a_, b_ = "0a" * 16, "0b" * 16
    cases = [
        # trace B is stored first; then a body with a new trace A and more of B: B's observation comes last,
        # so B's trace id is the bucket's exemplar on both paths
        [
            [_span(b_, "1" * 16)],
            [_span(a_, "2" * 16, model="m", events=REQ), _span(b_, "3" * 16, model="m", events=REQ)],
        ],
        # m2's compute stages come from a per-span trace after m1's new trace: series created in that order
        [
            [_span(b_, "1" * 16, pid="9" * 16, model="m2", events={**REQ, "QUEUE_START": 2})],
            [
                _span(a_, "2" * 16, model="m1", events=REQ),
                _span(b_, "3" * 16, pid="1" * 16, name="compute", events={"COMPUTE_START": 3, "COMPUTE_INPUT_END": 4}),
            ],
        ],
    ]
    for bodies in cases:
        a, ra, b, rb = _hubs()
        feed = [(orjson.dumps(_doc(spans)), True) for spans in bodies]
        _feed(a, feed)
        _feed(b, feed)
        _same(a, ra, b, rb)
