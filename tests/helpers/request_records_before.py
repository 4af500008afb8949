"""A frozen copy of ``sidecar.processors.request_records`` as it was before the join stopped building a ``Span``
per span (main at efc9130), for tests/processors/test_request_join_differential.py and
bench/bench_request_join.py. Not used by the sidecar; do not "fix" it: it is the reference.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from sidecar.clock import Clock
from sidecar.component import Role
from sidecar.model import Batch, Event, Span, SpanEvent
from sidecar.polled import Polled, TickerFactory
from sidecar.processors.request_records_config import RequestRecordsConfig
from sidecar.processors.stages import stage_durations
from sidecar.records import MODEL, NAME, Record, to_span

__all__ = ["RequestRecordsBefore"]

_HTTP_KEYS = ("http.response.status_code", "http.status_code")
_GRPC_KEYS = ("rpc.grpc.status_code",)
_RULE_KEYS = ("sidecar.routing_rule", "routing.rule")
_BUCKET_KEYS = ("sidecar.canary_bucket", "canary.bucket")
_REQUEST_ID_KEYS = ("request.id", "sidecar.request_id", "triton.request_id")
_TRITON_NAMES = frozenset({"InferRequest", "compute"})
_MAX_MODELS = 200  # label values of sidecar_requests_total beyond this read "other"


def outcome_of(http: int | None, grpc: int | None, error: bool) -> str:
    """The outcome label: ``ok``, ``client_error`` (HTTP 4xx) or ``error``."""
    if http is not None:
        return "ok" if http < 400 else "client_error" if http < 500 else "error"
    if grpc is not None:
        return "ok" if grpc == 0 else "error"
    return "error" if error else "ok"


def _first(attrs: Mapping[str, object], keys: Sequence[str]) -> object | None:
    for k in keys:
        if k in attrs:
            return attrs[k]
    return None


_KEPT_ATTRS = frozenset((*_HTTP_KEYS, *_GRPC_KEYS, *_RULE_KEYS, *_BUCKET_KEYS, *_REQUEST_ID_KEYS))
_KEPT_ATTRS |= {"triton.model_name", "triton.model_version"}
_KEPT_CHARS = 200  # a kept attribute's text, as much as a record shows of it
_REASON_CHARS = 1000


def _slim_span(s: Span) -> Span:
    """What a pending join needs of a span: the attributes a record reads (text cut to ``_KEPT_CHARS``), event
    names and times (stage durations), status; a caller's span can carry megabytes of attributes, and up to
    ``max_pending`` of them wait at once."""
    attrs = {
        # Request ids are join keys: kept whole (within traces.limits.max_value_chars, like every value).
        k: v[:_KEPT_CHARS] if isinstance(v, str) and k not in _REQUEST_ID_KEYS else v
        for k, v in s.attributes.items()
        if k in _KEPT_ATTRS
    }
    events = tuple(SpanEvent(e.name, e.time_unix_nano, {}) if e.attributes else e for e in s.events)
    return dataclasses.replace(s, attributes=attrs, events=events, status_message=s.status_message[:_REASON_CHARS])


def _slim_event(e: Event) -> Event:
    """What a pending join needs of an event: not its features (up to ``events.max_features_per_event``)."""
    if not e.features and len(e.fields) <= 2:
        return e
    kept = {k: v for k in ("http_status", "grpc_code") if (v := e.fields.get(k)) is not None}
    return dataclasses.replace(e, features={}, fields=kept)


def _int(v: object) -> int | None:
    try:
        return int(v) if v is not None and not isinstance(v, bool) else None  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None


@dataclass
class _Pending:
    first_seen: float
    model: Span | None = None
    compute: Span | None = None
    request: Span | None = None
    caller: Span | None = None
    event: Event | None = None
    aliases: list[str] = field(default_factory=list)

    @property
    def triton(self) -> bool:
        return self.model is not None

    @property
    def client(self) -> bool:
        return self.caller is not None or self.event is not None


class RequestRecordsBefore(Polled):
    name = "request_records"
    role = Role.SINK

    def __init__(
        self,
        cfg: RequestRecordsConfig,
        *,
        sink: Callable[[list[tuple[str, str, float, dict[str, Any]]]], object],
        registry: CollectorRegistry,
        clock: Clock,
        logger: logging.Logger | None = None,
        ticker: TickerFactory | None = None,
    ) -> None:
        super().__init__(
            interval_secs=cfg.sweep_interval_secs,
            registry=registry,
            logger=logger,
            ticker=ticker,
            ticker_name="request-records-sweep",
            job=self.sweep_once,
            delay_first=True,
        )
        self.cfg = cfg
        self.sink = sink
        self.clock = clock
        self.log = logger or logging.getLogger("sidecar.request_records")
        self._key: bytes | None = None
        if cfg.user_ids == "hash" and cfg.user_id_key_env:
            raw = os.environ.get(cfg.user_id_key_env, "")
            if not raw:
                raise ValueError(f"user_id_key_env: the environment variable {cfg.user_id_key_env} is not set")
            self._key = raw.encode()
        self._pending: OrderedDict[str, _Pending] = OrderedDict()
        self._alias: dict[str, str] = {}  # request id -> trace id key
        self._lock = threading.Lock()
        self._models: set[tuple[str, str]] = set()
        self.requests = Counter(
            "sidecar_requests",
            "Requests by model, version and outcome as the client saw it (where known).",
            ["model", "version", "outcome"],
            registry=registry,
        )
        self._unjoined = Counter(
            "sidecar_request_records_unjoined",
            "Records emitted with one side only after the join window (side: triton, client).",
            ["side"],
            registry=registry,
        )
        self._evicted = Counter(
            "sidecar_request_records_evicted",
            "Pending joins emitted early to stay under max_pending.",
            registry=registry,
        )
        self._kept = Counter(
            "sidecar_request_records_kept",
            "Records handed to the audit log, by why (failed, slow, sampled).",
            ["why"],
            registry=registry,
        )

    # -- bus -------------------------------------------------------------------------------------------------
    def on_spans(self, batch: Batch) -> None:
        out: list[tuple[str, str, float, dict[str, Any]]] = []
        with self._lock:
            # The whole batch first: Triton exports a request's spans together, in no set order.
            touched = dict.fromkeys(self._add_span(r, out) for r in batch.items)
            for key in touched:
                p = self._pending.get(key)
                if p is not None:
                    self._check(key, p, out)
            self._sweep(out)
        self._emit(out)

    def on_events(self, batch: Batch) -> None:
        out: list[tuple[str, str, float, dict[str, Any]]] = []
        with self._lock:
            for e in batch.items:
                if isinstance(e, Event) and (e.trace_id or e.request_id):
                    key = e.trace_id or self._alias.get(f"r:{e.request_id}") or f"r:{e.request_id}"
                    p = self._get(key, out)
                    p.event = _slim_event(e)
                    self._check(key, p, out)
            self._sweep(out)
        self._emit(out)

    def _get(self, key: str, out: list[Any]) -> _Pending:
        p = self._pending.get(key)
        if p is None:
            if len(self._pending) >= self.cfg.max_pending:
                old, op = self._pending.popitem(last=False)
                self._evicted.inc()
                out.append(self._record(old, op))
            p = self._pending[key] = _Pending(self.clock.monotonic())
        return p

    def _add_span(self, r: Record, out: list[Any]) -> str:
        s = _slim_span(to_span(r))
        key = s.trace_id
        if r[MODEL] is None and r[NAME] not in _TRITON_NAMES:
            p = self._get(key, out)
            if p.caller is None or _first(s.attributes, (*_HTTP_KEYS, *_GRPC_KEYS)) is not None:
                p.caller = s
        else:
            rid = _first(s.attributes, _REQUEST_ID_KEYS)
            if rid is not None and f"r:{rid}" in self._pending:  # the caller's event came first, by request id
                self._pending[key] = self._merge(self._pending.pop(f"r:{rid}"), self._pending.get(key))
            p = self._get(key, out)
            if rid is not None:
                self._alias[f"r:{rid}"] = key
                p.aliases.append(f"r:{rid}")
            if r[NAME] == "compute":
                p.compute = s
            elif r[NAME] == "InferRequest":
                p.request = s
            else:
                p.model = s
        return key

    @staticmethod
    def _merge(a: _Pending, b: _Pending | None) -> _Pending:
        if b is None:
            return a
        for f in ("model", "compute", "request", "caller", "event"):
            if getattr(a, f) is None:
                setattr(a, f, getattr(b, f))
        return a

    def _check(self, key: str, p: _Pending, out: list[Any]) -> None:
        if p.triton and p.client and p.compute is not None:
            del self._pending[key]
            out.append(self._record(key, p))

    def _sweep(self, out: list[Any]) -> None:
        cutoff = self.clock.monotonic() - self.cfg.join_window_secs
        while self._pending:
            key, p = next(iter(self._pending.items()))
            if p.first_seen > cutoff:
                break
            del self._pending[key]
            if not (p.triton and p.client):
                self._unjoined.labels("triton" if p.triton else "client").inc()
            out.append(self._record(key, p))

    async def sweep_once(self) -> int:
        """Emit the joins whose window has passed (the periodic tick); returns how many were emitted."""
        out: list[tuple[str, str, float, dict[str, Any]]] = []
        with self._lock:
            self._sweep(out)
        self._emit(out)
        return len(out)

    def flush(self) -> None:
        """Emit every pending join now (shutdown, tests): later arrivals would not be joined anyway."""
        with self._lock:
            out = [self._record(k, p) for k, p in self._pending.items()]
            self._pending.clear()
            self._alias.clear()
        self._emit(out)

    # -- records ---------------------------------------------------------------------------------------------
    def _record(self, key: str, p: _Pending) -> tuple[str, str, float, dict[str, Any]]:
        for alias in p.aliases:
            self._alias.pop(alias, None)
        doc: dict[str, Any] = {"trace_id": None if key.startswith("r:") else key}
        error = False
        if p.model is not None:
            mv = p.model.attributes
            doc["model"] = str(mv.get("triton.model_name", ""))
            doc["version"] = str(mv.get("triton.model_version", ""))
            stages = stage_durations(p.model, p.compute, p.request)
            doc["stages_ms"] = {k: round(v * 1000, 3) for k, v in stages.items()}
            top = p.request or p.model
            doc["latency_ms"] = round(top.duration_ns / 1e6, 3)
            doc["at"] = top.start_unix_nano / 1e9
            failed = next((s for s in (p.model, p.compute, p.request) if s is not None and s.is_error), None)
            if failed is not None:
                error = True
                doc["reason"] = failed.status_message[:1000] or "error"
            doc["triton_outcome"] = "error" if error else "ok"
        http = grpc = None
        if p.caller is not None:
            a = p.caller.attributes
            http, grpc = _int(_first(a, _HTTP_KEYS)), _int(_first(a, _GRPC_KEYS))
            error = error if (http is not None or grpc is not None) else (error or p.caller.is_error)
            for name, keys in (("rule", _RULE_KEYS), ("bucket", _BUCKET_KEYS), ("request_id", _REQUEST_ID_KEYS)):
                v = _first(a, keys)
                if v is not None:
                    doc[name] = str(v)[:200]
            doc.setdefault("latency_ms", round(p.caller.duration_ns / 1e6, 3))
            doc["client_latency_ms"] = round(p.caller.duration_ns / 1e6, 3)
            doc.setdefault("at", p.caller.start_unix_nano / 1e9)
        if p.event is not None:
            e = p.event
            doc.setdefault("model", e.model)
            doc.setdefault("version", e.version)
            doc.setdefault("at", e.timestamp)
            if e.request_id:
                doc["request_id"] = e.request_id
            http = http if http is not None else _int(e.fields.get("http_status"))
            grpc = grpc if grpc is not None else _int(e.fields.get("grpc_code"))
            if e.user_id is not None and self._key is not None:
                doc["user"] = hmac.new(self._key, e.user_id.encode(), hashlib.sha256).hexdigest()
        if http is not None:
            doc["code"] = f"http_{http}"
        elif grpc is not None:
            doc["code"] = f"grpc_{grpc}"
        doc["outcome"] = outcome_of(http, grpc, error)
        doc["joined"] = p.triton and p.client
        rid = doc.get("request_id")
        ident = f"req-{key}" if rid is None else f"req-{key}-{rid}"
        return "request", ident[:300], float(doc.get("at") or self.clock.now()), doc

    def _emit(self, out: list[tuple[str, str, float, dict[str, Any]]]) -> None:
        keep = []
        for rec in out:
            doc = rec[3]
            mv = (str(doc.get("model", "")), str(doc.get("version", "")))
            if mv not in self._models and len(self._models) >= _MAX_MODELS:
                mv = ("other", "other")
            else:
                self._models.add(mv)
            self.requests.labels(mv[0], mv[1], doc["outcome"]).inc()
            why = self._why(doc)
            if why is not None:
                self._kept.labels(why).inc()
                keep.append(rec)
        if keep:
            self.sink(keep)

    def _why(self, doc: Mapping[str, Any]) -> str | None:
        if doc["outcome"] != "ok" or doc.get("triton_outcome") == "error":
            return "failed"
        if float(doc.get("latency_ms") or 0.0) > self.cfg.slow_ms:
            return "slow"
        tid = str(doc.get("trace_id") or doc.get("request_id") or "")
        h = int.from_bytes(hashlib.blake2b(tid.encode(), digest_size=8).digest(), "big") / 2**64
        return "sampled" if h < self.cfg.sample_rate else None

        self.flush()
