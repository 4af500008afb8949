"""Frozen copies of the trace-file reader's span building and record joining as they were before they were
made cheaper (main at efc9130), so a differential test and bench/bench_trace_files.py can run the old path
next to today's on the same files. Not used by the sidecar itself; do not "fix" these: they are the reference.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

import orjson

from sidecar.model import Span, SpanEvent
from sidecar.records import Record, from_span
from sidecar.sources.trace_files.records import Scan, scan
from sidecar.sources.trace_files.requests import MAX_STAMP_NAME, MAX_STAMPS, MAX_TENSORS, Assembler, Request, _id

__all__ = ["AssemblerBefore", "records_before", "replicated", "scan_before", "spans_before", "templates_of"]

_REQ_EVENTS = (
    "HTTP_RECV_START",
    "HTTP_RECV_END",
    "INFER_RESPONSE_COMPLETE",
    "HTTP_SEND_START",
    "HTTP_SEND_END",
    "GRPC_WAITREAD_START",
    "GRPC_WAITREAD_END",
    "GRPC_SEND_START",
    "GRPC_SEND_END",
)
_MODEL_EVENTS = ("REQUEST_START", "QUEUE_START", "REQUEST_END")
_COMPUTE_EVENTS = ("COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END")
SERVICE = "triton-inference-server"


def _ids(key: str, n: int) -> str:
    return hashlib.blake2b(key.encode(), digest_size=n).hexdigest()


def spans_before(reqs: list[Request], offset_ns: int, path: str) -> list[Span]:
    """``records_to_spans`` as it was: a frozen ``Span`` per span."""
    out: list[Span] = []
    for q in reqs:
        s = q.stamps
        if not s:
            continue
        first = min(s.values())
        trace_id = _ids(f"{path}|{q.tid}|{first}", 16)

        def ev(names: tuple[str, ...], s: dict[str, int] = s) -> tuple[SpanEvent, ...]:
            got = sorted((s[n], n) for n in names if n in s)
            return tuple(SpanEvent(n, t + offset_ns) for t, n in got)

        def span(
            span_id: str,
            parent: str | None,
            name: str,
            evs: tuple[SpanEvent, ...],
            attrs: dict[str, object],
            trace_id: str = trace_id,
        ) -> Span:
            first, last = evs[0].time_unix_nano, evs[-1].time_unix_nano
            return Span(trace_id, span_id, parent, name, first, last, SERVICE, attrs, evs, 0, "", 2)

        req_ev, model_ev, comp_ev = ev(_REQ_EVENTS), ev(_MODEL_EVENTS), ev(_COMPUTE_EVENTS)
        root_id = _ids(f"{trace_id}|req", 8) if req_ev else None
        model_id = _ids(f"{trace_id}|model", 8)
        if req_ev and root_id is not None:
            out.append(span(root_id, None, "InferRequest", req_ev, {}))
        if model_ev:
            attrs: dict[str, object] = {
                "triton.model_name": q.model,
                "triton.model_version": q.version,
                "triton.trace_id": q.tid,
            }
            if q.request_id:
                attrs["triton.request_id"] = q.request_id
            out.append(span(model_id, root_id, q.model or "model", model_ev, attrs))
        if comp_ev:
            out.append(span(_ids(f"{trace_id}|compute", 8), model_id if model_ev else root_id, "compute", comp_ev, {}))
    return out


def records_before(reqs: list[Request], offset_ns: int, path: str) -> list[Record]:
    """What the source published before: ``from_span`` of each frozen ``Span``."""
    return [from_span(s) for s in spans_before(reqs, offset_ns, path)]


def scan_before(buf: bytes, at_start: bool = True, lean: bool = False) -> Scan:
    """The reader's decoding as it was: every record decoded to dicts by orjson (``lean`` off)."""
    return scan(buf, at_start=at_start)


class AssemblerBefore(Assembler):
    """The assembler with its record folding as it was."""

    def add(self, records: Iterable[dict[str, Any]], into: dict[int, Request]) -> None:
        for r in records:
            tid = _id(r.get("id"))
            if tid is None:
                self._refuse("bad_id")
                continue
            req = into.get(tid)
            if req is None:
                req = self.pending.pop(tid, None) or Request(tid)
                into[tid] = req
            self._stamps_before(r.get("timestamps"), req)
            if "model_name" in r:
                model, version = self._text(r["model_name"]), self._text(r.get("model_version", ""))
                rid = self._text(r.get("request_id") or "")
                if model is not None and version is not None and rid is not None:
                    req.model, req.version, req.request_id, req.has_model = model, version, rid, True
                    if _id(r.get("parent_id")) is not None:
                        req.parent_id = r["parent_id"]
            tensor = r.get("tensor")
            if isinstance(tensor, dict) and "name" in tensor:
                name = self._text(tensor["name"])
                if name is None:
                    continue
                if name not in req.tensors and len(req.tensors) >= MAX_TENSORS:
                    self._refuse("too_many_tensors")
                    continue
                req.tensors[name] = {"data": tensor.get("data"), "shape": tensor.get("shape", "")}

    def _stamps_before(self, stamps: object, req: Request) -> None:
        if not isinstance(stamps, list):
            return
        for ts in stamps:
            if not isinstance(ts, dict):
                continue
            ns, name = _id(ts.get("ns")), ts.get("name")
            if ns is None or not isinstance(name, str) or len(name) > MAX_STAMP_NAME:
                self._refuse("bad_timestamp")
                continue
            if name not in req.stamps and len(req.stamps) >= MAX_STAMPS:
                self._refuse("too_many_timestamps")
                continue
            req.stamps[name] = ns


def replicated(templates: list[list[dict[str, Any]]], n_requests: int, step_ns: int = 140_000) -> bytes:
    """A ``mode=triton`` trace file of ``n_requests`` requests copied from ``templates`` (the records of one
    recorded request each) with fresh trace ids, request ids and times ``step_ns`` apart; two requests' records
    at a time are interleaved, as concurrent requests' are in Triton's files."""
    reqs: list[list[dict[str, Any]]] = []
    for i in range(n_requests):
        shift = i * step_ns
        out = []
        for r in templates[i % len(templates)]:
            r = dict(r, id=i + 1)
            if "timestamps" in r:
                r["timestamps"] = [dict(t, ns=t["ns"] + shift) for t in r["timestamps"]]
            if r.get("request_id"):
                r["request_id"] = f"req-{i + 1}"
            out.append(r)
        reqs.append(out)
    records: list[dict[str, Any]] = []
    for a, b in zip(reqs[::2], [*reqs[1::2], []], strict=False):
        for k in range(max(len(a), len(b))):
            records += a[k : k + 1] + b[k : k + 1]
    return orjson.dumps(records)


def templates_of(*files: bytes) -> list[list[dict[str, Any]]]:
    """The records of each request (by trace id, in file order) of recorded trace files."""
    out: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for n, data in enumerate(files):
        for r in orjson.loads(data):
            out.setdefault((n, r["id"]), []).append(r)
    return list(out.values())
