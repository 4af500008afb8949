"""Per-request records: Triton's spans joined with the caller's span or event, by trace id (or request id).

Triton's side (spans on the bus, from OTLP or trace files): the model span (model, version, Triton's own
status and failure message), its compute span and the ``InferRequest`` span, which give the latency per
stage (``sidecar.processors.stages``). The caller's side: any other span of the trace (its HTTP or gRPC status
code as the client saw it, the routing rule and canary bucket when it sends them as attributes) or an event
(``/v1/events``) carrying the trace id or request id.

A record is emitted once both sides have arrived, or when the join window has passed with only one (counted
in ``sidecar_request_records_unjoined_total{side}``: the outcome then is Triton's or the caller's alone); a
request read from Triton's trace files without a request id leaves at once, counted the same way (its trace id
is the reader's own, so nothing could join it; ``request_whole``). The window is checked when spans or events
arrive and every ``sweep_interval_secs`` (``sidecar.periodic``, the injected clock's monotonic time), so in a
quiet period a lone side still leaves within window + one tick. Pending joins are bounded (``max_pending``; the
oldest is emitted early, counted as ``evicted``). Every emitted record counts in
``sidecar_requests_total{model,version,outcome}``, outcome as the client saw it where the caller's side has it
(``ok``, ``client_error``, ``error``): Triton counts a Python-backend error response as a success, the client
does not. Records are kept (handed to the sink, the audit log) when they failed, when slower than ``slow_ms``,
and otherwise for a ``sample_rate`` share chosen by the trace id's hash, so every sidecar keeps the same ones;
only those get a document (``request_records_doc``: the counters and the keep rule read a finished join's few
fields first). User ids are dropped, or hashed with HMAC-SHA256 under a key from the environment
(``user_id_key_env``), never stored as sent.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from sidecar.clock import Clock
from sidecar.component import Role
from sidecar.model import Batch, Event
from sidecar.polled import Polled, TickerFactory
from sidecar.processors.request_records_config import RequestRecordsConfig
from sidecar.processors.request_records_doc import (
    D_MODEL,
    D_OUTCOME,
    D_VERSION,
    LONE,
    P_ALIASES,
    P_CALLER,
    P_COMPUTE,
    P_EVENT,
    P_MODEL,
    P_REQUEST,
    P_SEEN,
    Done,
    count_lone,
    document,
    finish,
    outcome_of,
    why_kept,
)
from sidecar.processors.request_sides import (
    REASON_CHARS,
    REQUEST_ID_KEYS,
    STATUS_KEYS,
    Pairs,
    Side,
    first,
    kept,
    side,
)
from sidecar.processors.request_whole import finished
from sidecar.records import END, EVENTS, FMT, FMT_JSON, MODEL, NAME, RAW, START, STATUS, TRACE, TRACE_FILE_SOURCE

__all__ = ["RequestRecords", "RequestRecordsConfig", "outcome_of"]

# Triton's spans other than the model span (which carries the model attribute), and the pending slot each fills.
_SLOTS = {"compute": P_COMPUTE, "InferRequest": P_REQUEST}
_MAX_MODELS = 200  # label values of sidecar_requests_total beyond this read "other"
_MAX_LAYOUTS = 64  # event-name layouts shared; spans of other layouts keep their own dict
_NO_ATTRS: Pairs = ()
Rec = tuple[str, str, float, dict[str, Any]]  # (kind, id, time, document): an audit log row


def _slim_event(e: Event) -> Event:
    """What a pending join needs of an event: not its features (up to ``events.max_features_per_event``)."""
    if not e.features and len(e.fields) <= 2:
        return e
    kept = {k: v for k in ("http_status", "grpc_code") if (v := e.fields.get(k)) is not None}
    return dataclasses.replace(e, features={}, fields=kept)


def _merge(a: Sequence[Any], b: Sequence[Any] | None) -> list[Any]:
    """Join ``b`` (the trace id's pending join) into ``a`` (the request id's, which came first)."""
    a = list(a)
    if b is not None:
        for i in (P_MODEL, P_COMPUTE, P_REQUEST, P_CALLER, P_EVENT):
            if a[i] is None:
                a[i] = b[i]
    return a


class RequestRecords(Polled):
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
        self._pending: OrderedDict[str, Any] = OrderedDict()  # a list while a batch fills it, else a tuple
        self._alias: dict[str, str] = {}  # request id -> trace id key
        # Event-name tuples of Triton's spans (a handful of layouts): a waiting side keeps its event times as
        # names and values, the names tuple shared, not the span's own dict and name strings (~1 KB a request).
        self._layouts: dict[tuple[str, ...], tuple[str, ...]] = {}
        self._lock = threading.Lock()
        self._models: set[tuple[str, str]] = set()
        self._children: dict[tuple[str, str, str], Any] = {}  # sidecar_requests_total's children
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
        """Add a batch's spans to their joins (the whole batch first: Triton exports a request's spans together,
        in no set order), then emit the joins it completed. JSON records are read inline (``request_sides``)."""
        out: list[Done] = []
        with self._lock:
            pending, alias, layouts, max_pending = self._pending, self._alias, self._layouts, self.cfg.max_pending
            now = self.clock.monotonic()  # a join is first seen when its first batch arrived
            touched: dict[str, None] = {}
            s: Side
            for r in batch.items:
                name = r[NAME]
                triton = r[MODEL] is not None or name in _SLOTS
                if r[FMT] == FMT_JSON:
                    attrs, message, _ = r[RAW]
                    key = r[TRACE].hex()
                    a = kept(attrs) if attrs else _NO_ATTRS
                    if triton:
                        ev = r[EVENTS]
                        if type(ev) is dict:  # name -> ns, kept as names and values: the names shared (below)
                            names = tuple(ev)
                            shared = layouts.get(names)
                            if shared is None and len(layouts) < _MAX_LAYOUTS:
                                shared = layouts[names] = names
                            if shared is None:
                                s = (r[START], r[END], r[STATUS], message[:REASON_CHARS], a, ev)
                            else:  # the values follow the shared names: one tuple a span
                                s = (r[START], r[END], r[STATUS], message[:REASON_CHARS], a, shared, *ev.values())
                        else:
                            s = (r[START], r[END], r[STATUS], message[:REASON_CHARS], a, {e[0]: e[1] for e in ev})
                    else:  # a record reads neither the caller's message nor its events
                        s = (r[START], r[END], r[STATUS], "", a, None)
                else:
                    key, s = side(r)
                    a = s[4]
                touched[key] = None
                if not triton:
                    p = pending.get(key)
                    if p is None:
                        p = self._new(key, now, out, max_pending)
                    elif type(p) is tuple:
                        p = pending[key] = list(p)
                    if p[P_CALLER] is None or first(a, STATUS_KEYS) is not None:
                        p[P_CALLER] = s
                    continue
                rid = first(a, REQUEST_ID_KEYS) if a else None
                if rid is None:
                    p = pending.get(key)
                    if p is None:
                        p = self._new(key, now, out, max_pending)
                    elif type(p) is tuple:
                        p = pending[key] = list(p)
                else:
                    rkey = f"r:{rid}"
                    if rkey in pending:  # the caller's event came first, by request id
                        pending[key] = _merge(pending.pop(rkey), pending.get(key))
                    p = pending.get(key)
                    if p is None:
                        p = self._new(key, now, out, max_pending)
                    elif type(p) is tuple:
                        p = pending[key] = list(p)
                    alias[rkey] = key
                    al = p[P_ALIASES]  # None, one id, or a list of them
                    if al is None:
                        p[P_ALIASES] = rkey
                    elif type(al) is str:
                        p[P_ALIASES] = [al, rkey]
                    else:
                        al.append(rkey)
                p[_SLOTS.get(name, P_MODEL)] = s
            # A trace file's request: its trace id is the reader's own (no caller can send it) and all its spans
            # came in this batch, so only an event with its request id could still join it: without one it
            # leaves now, as it would after the window, instead of holding a pending slot for nothing.
            derived = batch.source == TRACE_FILE_SOURCE
            lone = LONE.copy()
            for key in touched:
                p = pending.get(key)
                if p is None:
                    continue
                if (
                    p[P_COMPUTE] is not None
                    and p[P_MODEL] is not None
                    and (p[P_CALLER] is not None or p[P_EVENT] is not None)
                ):
                    del pending[key]
                    out.append(self._record(key, p))
                elif derived and p[P_ALIASES] is None:
                    del pending[key]
                    out.append(self._record(key, p))
                    count_lone(p, lone)
                elif type(p) is list:
                    pending[key] = tuple(p)  # waits as a tuple: see _new
            self._lone(lone)
            self._sweep(out)
        self._emit(out)

    def on_span_requests(self, batch: Batch) -> None:
        """A trace file's requests whole: ``request_whole.finished``, the rest taken as their span records."""
        done, rest = finished(batch.items, self.cfg.slow_ms, self.cfg.sample_rate)
        if rest:
            self.on_spans(Batch(kind="spans", source=batch.source, items=tuple(rest), received_at=batch.received_at))
        swept: list[Done] = []
        with self._lock:  # the sweep as after any batch; the finished ones had Triton's side alone
            self._lone({"triton": len(done), "client": 0})
            self._sweep(swept)
        self._emit(done, judged=True)  # ``finished`` kept none of them
        self._emit(swept)

    def on_events(self, batch: Batch) -> None:
        out: list[Done] = []
        with self._lock:
            now = self.clock.monotonic()
            for e in batch.items:
                if isinstance(e, Event) and (e.trace_id or e.request_id):
                    key = e.trace_id or self._alias.get(f"r:{e.request_id}") or f"r:{e.request_id}"
                    p = self._pending.get(key)
                    if p is None:
                        p = self._new(key, now, out, self.cfg.max_pending)
                    elif type(p) is tuple:
                        p = list(p)
                    p[P_EVENT] = _slim_event(e)
                    if p[P_MODEL] is not None and p[P_COMPUTE] is not None:
                        del self._pending[key]
                        out.append(self._record(key, p))
                    else:
                        self._pending[key] = tuple(p)
            self._sweep(out)
        self._emit(out)

    def _new(self, key: str, now: float, out: list[Done], max_pending: int) -> list[Any]:
        """A new pending join under ``key``; the oldest is emitted first when ``max_pending`` wait.

        A join is a list while a batch fills it and waits as a tuple between batches: the garbage collector
        stops tracking a tuple of untracked things (sides of plain values), so up to ``max_pending`` waiting
        joins do not make every full collection longer and more frequent (they did: ~40% of the join's time)."""
        if len(self._pending) >= max_pending:
            old, op = self._pending.popitem(last=False)
            self._evicted.inc()
            out.append(self._record(old, op))
        p = self._pending[key] = [now, None, None, None, None, None, None]
        return p

    def _sweep(self, out: list[Done]) -> None:
        pending = self._pending
        if not pending:
            return
        cutoff = self.clock.monotonic() - self.cfg.join_window_secs
        expired = []
        for key, p in pending.items():  # oldest first: the first one still in its window ends the sweep
            if p[P_SEEN] > cutoff:
                break
            expired.append(key)
        lone = LONE.copy()
        for key in expired:
            p = pending.pop(key)
            count_lone(p, lone)
            out.append(self._record(key, p))
        self._lone(lone)

    def _lone(self, lone: dict[str, int]) -> None:
        for which, n in lone.items():
            if n:
                self._unjoined.labels(which).inc(n)

    async def sweep_once(self) -> int:
        """Emit the joins whose window has passed (the periodic tick); returns how many were emitted."""
        out: list[Done] = []
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
    def _record(self, key: str, p: list[Any]) -> Done:
        """A finished join, out of the pending ones: what its count and keeping read (no document yet)."""
        al = p[P_ALIASES]
        if al is not None:
            for a in (al,) if type(al) is str else al:
                self._alias.pop(a, None)
        return finish(key, p)

    def _emit(self, out: list[Done], judged: bool = False) -> None:
        """Count every finished join (one increment per label set and batch); build the documents of the ones
        kept and hand them to the sink (``judged``: none is kept, already decided)."""
        if not out:
            return
        keep: list[Rec] = []
        counts: dict[tuple[str, str, str], int] = {}
        whys: dict[str, int] = {}
        models = self._models
        slow_ms, rate, user_key = self.cfg.slow_ms, self.cfg.sample_rate, self._key
        for o in out:
            mv = (str(o[D_MODEL] or ""), str(o[D_VERSION] or ""))
            if mv not in models:
                if len(models) >= _MAX_MODELS:
                    mv = ("other", "other")
                else:
                    models.add(mv)
            ck = (*mv, o[D_OUTCOME])
            counts[ck] = counts.get(ck, 0) + 1
            why = None if judged else why_kept(o, slow_ms, rate)
            if why is None:
                continue
            whys[why] = whys.get(why, 0) + 1
            ident, doc = document(o, user_key)
            keep.append(("request", ident, float(doc.get("at") or self.clock.now()), doc))
        for ck, n in counts.items():
            child = self._children.get(ck)
            if child is None:  # bounded: at most _MAX_MODELS + 1 (model, version) pairs x 3 outcomes
                child = self._children[ck] = self.requests.labels(*ck)
            child.inc(n)
        for why, n in whys.items():
            self._kept.labels(why).inc(n)
        if keep:
            self.sink(keep)

    async def shutdown(self) -> None:
        """Stop the sweep, then emit every pending join (idempotent; safe without ``start``)."""
        await super().shutdown()
        self.flush()
