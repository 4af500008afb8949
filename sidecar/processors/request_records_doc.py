"""One per-request record (``request_records``) from the sides a pending join gathered: the document the audit
log stores, and the rules that read it (outcome, why it is kept).

A pending join is a list (made in one step, read by index; ``P_*`` below): the monotonic time it was first
seen, Triton's model, compute and ``InferRequest`` sides, the caller's side, the caller's event (slimmed), and
the request ids it is also known by (or None).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

from sidecar.model import Event
from sidecar.processors.request_sides import (
    BUCKET_KEYS,
    GRPC_KEYS,
    HTTP_KEYS,
    REASON_CHARS,
    REQUEST_ID_KEYS,
    RULE_KEYS,
    S_ATTRS,
    S_END,
    S_MESSAGE,
    S_START,
    S_STATUS,
    S_TIMES,
    first,
    get,
)
from sidecar.processors.stages import stage_seconds
from sidecar.records import MODEL_ATTR, VERSION_ATTR

__all__ = [
    "LONE",
    "P_ALIASES",
    "P_CALLER",
    "P_COMPUTE",
    "P_EVENT",
    "P_MODEL",
    "P_REQUEST",
    "P_SEEN",
    "Done",
    "count_lone",
    "document",
    "finish",
    "ms_of_ns",
    "ms_of_secs",
    "outcome_of",
    "why_kept",
]

P_SEEN, P_MODEL, P_COMPUTE, P_REQUEST, P_CALLER, P_EVENT, P_ALIASES = range(7)
_EXACT_NS = 1 << 45  # ~9.8 hours: below it ms_of_ns and ms_of_secs equal round() without calling it
_CALLER_FIELDS = (("rule", RULE_KEYS), ("bucket", BUCKET_KEYS), ("request_id", REQUEST_ID_KEYS))


def outcome_of(http: int | None, grpc: int | None, error: bool) -> str:
    """The outcome label: ``ok``, ``client_error`` (HTTP 4xx) or ``error``."""
    if http is not None:
        return "ok" if http < 400 else "client_error" if http < 500 else "error"
    if grpc is not None:
        return "ok" if grpc == 0 else "error"
    return "error" if error else "ok"


def ms_of_ns(d: int) -> float:
    """``round(d / 1e6, 3)`` for ``d >= 0`` ns, the same float, without ``round`` where it can be proved equal.

    ``round(x, 3)`` formats and parses the number (~0.3 us; a record rounds up to nine). Below 2**45 ns the
    float ``d / 1e6`` is within 1e-8 ms of the true value, and a whole number of ns is at least 1e-6 ms from a
    rounding tie unless it ends in 500 ns: so the rounded value is the nearest whole microsecond, divided
    exactly. Ties and larger values take ``round`` itself (tests/processors/test_request_records_rounding.py).
    """
    if d % 1000 != 500 and d < _EXACT_NS:
        return (d + 500) // 1000 / 1000
    return round(d / 1e6, 3)


def ms_of_secs(stages: Mapping[str, float]) -> dict[str, float]:
    """``{k: round(v * 1000, 3)}`` for stage durations ``v = ns / 1e9`` (``stages.stage_seconds``), the same
    floats, by way of the whole ns (``v * 1e9`` is within 0.01 ns of it below 2**45 ns) as ``ms_of_ns``."""
    out = {}
    for k, v in stages.items():
        d = int(v * 1e9 + 0.5)
        out[k] = (d + 500) // 1000 / 1000 if d % 1000 != 500 and d < _EXACT_NS else round(v * 1000, 3)
    return out


def _times(side: Any) -> Mapping[str, int]:
    """A side's event name -> ns: a dict, or the names with the values after them in the side, as the join keeps
    Triton's (``request_records``)."""
    t = side[S_TIMES]
    return dict(zip(t, side[S_TIMES + 1 :], strict=True)) if type(t) is tuple else t


def _int(v: object) -> int | None:
    try:
        return int(v) if v is not None and not isinstance(v, bool) else None  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None


# A finished join: what the counters and the keep rule read, before (and mostly instead of) its document: its
# key, its sides (the pending list), model, version (None when no side names them), outcome, Triton's failed side
# or None, HTTP code, gRPC code, latency ms (None when no span gave one) and request id. One tuple, read by the
# D_* indexes. Only the records the audit log keeps (failed, slow, or sampled: 1% by default) get a document.
Done = tuple[Any, ...]
D_KEY, D_SIDES, D_MODEL, D_VERSION, D_OUTCOME, D_FAILED, D_HTTP, D_GRPC, D_LATENCY, D_RID = range(10)


LONE = {"triton": 0, "client": 0}  # joins leaving with one side only, by side: copied per count


def count_lone(p: Any, lone: dict[str, int]) -> None:
    """Count the pending join ``p``, leaving now, in ``lone`` when it has one side only (Triton's, or the
    caller's)."""
    triton = p[P_MODEL] is not None
    if not (triton and (p[P_CALLER] is not None or p[P_EVENT] is not None)):
        lone["triton" if triton else "client"] += 1


def finish(key: str, p: list[Any]) -> Done:
    """The pending join ``p`` under ``key``, finished: everything a record's outcome, count and keeping read."""
    model = version = latency = rid = None
    failed = None
    m = p[P_MODEL]
    if m is not None:
        mv = m[S_ATTRS]
        model, version = str(get(mv, MODEL_ATTR, "")), str(get(mv, VERSION_ATTR, ""))
        c, q = p[P_COMPUTE], p[P_REQUEST]
        top = m if q is None else q
        latency = ms_of_ns(max(0, top[S_END] - top[S_START]))
        if m[S_STATUS] == 2:
            failed = m
        elif c is not None and c[S_STATUS] == 2:
            failed = c
        elif q is not None and q[S_STATUS] == 2:
            failed = q
    error = failed is not None
    http = grpc = None
    caller = p[P_CALLER]
    if caller is not None:
        a = caller[S_ATTRS]
        if a:
            http, grpc = _int(first(a, HTTP_KEYS)), _int(first(a, GRPC_KEYS))
            v = first(a, REQUEST_ID_KEYS)
            if v is not None:
                rid = str(v)[:200]
        if http is None and grpc is None:  # the caller's status code decides; its span's status only without one
            error = error or caller[S_STATUS] == 2
        if latency is None:
            latency = ms_of_ns(max(0, caller[S_END] - caller[S_START]))
    e: Event | None = p[P_EVENT]
    if e is not None:
        if model is None:
            model, version = e.model, e.version
        if e.request_id:
            rid = e.request_id
        if http is None:
            http = _int(e.fields.get("http_status"))
        if grpc is None:
            grpc = _int(e.fields.get("grpc_code"))
    return key, p, model, version, outcome_of(http, grpc, error), failed, http, grpc, latency, rid


def why_kept(o: Done, slow_ms: float, sample_rate: float) -> str | None:
    """Why a record is kept (``failed``, ``slow``, ``sampled``), or None: a ``sample_rate`` share of the rest,
    by a hash of the trace id (else the request id), so every sidecar keeps the same ones."""
    if o[D_OUTCOME] != "ok" or o[D_FAILED] is not None:
        return "failed"
    if (o[D_LATENCY] or 0.0) > slow_ms:
        return "slow"
    if sample_rate <= 0.0:  # the hash's share is never below 0
        return None
    key = o[D_KEY]
    tid = str((None if key.startswith("r:") else key) or o[D_RID] or "")
    share = int.from_bytes(hashlib.blake2b(tid.encode(), digest_size=8).digest(), "big") / 2**64
    return "sampled" if share < sample_rate else None


def document(o: Done, user_key: bytes | None) -> tuple[str, dict[str, Any]]:
    """The record's id and document of the finished join ``o`` (its key a trace id, or ``r:`` and a request id);
    the user id is HMAC-hashed under ``user_key``, or left out without one."""
    key, p, model, version, outcome, failed, http, grpc, latency, rid = o
    doc: dict[str, Any] = {"trace_id": None if key.startswith("r:") else key}
    m = p[P_MODEL]
    if m is not None:
        doc["model"] = model
        doc["version"] = version
        c, q = p[P_COMPUTE], p[P_REQUEST]
        stages = stage_seconds(_times(m), None if c is None else _times(c), None if q is None else _times(q))
        doc["stages_ms"] = ms_of_secs(stages)
        doc["latency_ms"] = latency
        doc["at"] = (m if q is None else q)[S_START] / 1e9
        if failed is not None:
            doc["reason"] = failed[S_MESSAGE][:REASON_CHARS] or "error"
        doc["triton_outcome"] = "error" if failed is not None else "ok"
    caller = p[P_CALLER]
    if caller is not None:
        a = caller[S_ATTRS]
        if a:
            for name, keys in _CALLER_FIELDS:
                v = first(a, keys)
                if v is not None:
                    doc[name] = str(v)[:200]
        ms = ms_of_ns(max(0, caller[S_END] - caller[S_START]))
        doc.setdefault("latency_ms", ms)
        doc["client_latency_ms"] = ms
        doc.setdefault("at", caller[S_START] / 1e9)
    e: Event | None = p[P_EVENT]
    if e is not None:
        doc.setdefault("model", e.model)
        doc.setdefault("version", e.version)
        doc.setdefault("at", e.timestamp)
        if e.request_id:
            doc["request_id"] = e.request_id
        if e.user_id is not None and user_key is not None:
            doc["user"] = hmac.new(user_key, e.user_id.encode(), hashlib.sha256).hexdigest()
    if http is not None:
        doc["code"] = f"http_{http}"
    elif grpc is not None:
        doc["code"] = f"grpc_{grpc}"
    doc["outcome"] = outcome
    doc["joined"] = m is not None and (caller is not None or e is not None)
    ident = f"req-{key}" if rid is None else f"req-{key}-{rid}"
    return ident[:300], doc
