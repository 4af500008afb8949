"""Follow Triton's ``mode=triton`` trace files and turn each request's timestamps into spans.

Triton (``--trace-config triton,file=PATH``) writes a JSON array of records per file; with
``log-frequency=N`` it
starts ``PATH.0``, ``PATH.1``, ... every N traces, otherwise one ``PATH``. A file is read when it parses as a
complete JSON array; one that does not is still being written and is read again on the next poll, unless it
has
not changed for ``settle_secs`` (then it is read leniently and the damage counted).

Clock mapping: Triton's ``ns`` values come from ``std::chrono::steady_clock``, which on Linux is
``CLOCK_MONOTONIC``, the same clock as Python's ``time.monotonic`` on the same host (and in containers
sharing the
host kernel, unless a time namespace offsets it). So ``wall_ns = ns + (clock.now() - clock.monotonic())``
sampled
when the file is read. That is exact up to NTP slewing and wrong by the size of any wall-clock step between
the
request and the read. If the mapping is implausible (a request ending after the moment we read it, i.e.
another
host or a time namespace), the file's last timestamp is anchored at the file's modification time instead and
``sidecar_trace_file_clock_fallbacks_total`` counts it.

Spans have the shape Triton's OpenTelemetry mode sends: ``InferRequest`` (HTTP/GRPC events) as the root, a
child
named after the model (model name, version, request id attributes; REQUEST/QUEUE events) and its
``compute`` child.
Ids are derived from (file path, Triton's trace id, first timestamp) so a restarted Triton never collides.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from prometheus_client import CollectorRegistry, Counter

from sidecar.clock import Clock
from sidecar.component import Bus, Readiness
from sidecar.model import Batch, Span, SpanEvent
from sidecar.periodic import Periodic
from sidecar.records import from_span
from sidecar.state.trace_config import TraceFileConfig

__all__ = ["TraceFileTailer", "parse_records", "records_to_spans"]

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


@dataclass
class _Request:
    tid: int
    stamps: dict[str, int] = field(default_factory=dict)
    model: str = ""
    version: str = ""
    request_id: str = ""
    parent_id: int | None = None


def parse_records(text: bytes) -> tuple[list[dict[str, Any]], bool]:
    """Records of one trace file and whether the file was complete.

    An incomplete array (a file Triton is still writing, or one cut short) yields the records before the cut:
    orjson has no streaming mode, so the array is cut back to the last ``},{`` boundary and closed by hand.
    """
    try:
        doc = orjson.loads(text)
        if isinstance(doc, list):
            return [r for r in doc if isinstance(r, dict)], True
        return [], False
    except orjson.JSONDecodeError:
        pass
    cut = text.rfind(b"},")
    while cut > 0:
        try:
            doc = orjson.loads(text[: cut + 1] + b"]")
            if isinstance(doc, list):
                return [r for r in doc if isinstance(r, dict)], False
        except orjson.JSONDecodeError:
            pass
        cut = text.rfind(b"},", 0, cut)
    return [], False


def _group(records: list[dict[str, Any]], into: dict[int, _Request]) -> None:
    for r in records:
        tid = r.get("id")
        if not isinstance(tid, int):
            continue
        req = into.get(tid)
        if req is None:
            req = into[tid] = _Request(tid)
        for ts in r.get("timestamps") or ():
            if isinstance(ts, dict) and isinstance(ts.get("ns"), int):
                req.stamps[str(ts.get("name"))] = ts["ns"]
        if "model_name" in r:
            req.model = str(r["model_name"])
            req.version = str(r.get("model_version", ""))
            req.request_id = str(r.get("request_id", ""))
            if isinstance(r.get("parent_id"), int):
                req.parent_id = r["parent_id"]


def _complete(req: _Request) -> bool:
    s = req.stamps
    done_req = "HTTP_SEND_END" in s or "GRPC_SEND_END" in s or "INFER_RESPONSE_COMPLETE" in s
    return "REQUEST_END" in s and (
        done_req or req.parent_id is not None or not ("HTTP_RECV_START" in s or "GRPC_WAITREAD_START" in s)
    )


def _ids(key: str, n: int) -> str:
    return hashlib.blake2b(key.encode(), digest_size=n).hexdigest()


def records_to_spans(reqs: list[_Request], offset_ns: int, path: str) -> list[Span]:
    """Spans for complete requests; ``offset_ns`` maps Triton's monotonic ``ns`` to Unix time."""
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
            out.append(
                span(
                    _ids(f"{trace_id}|compute", 8), model_id if model_ev else root_id, "compute", comp_ev, {}
                )
            )
    return out


@dataclass
class _FileState:
    size: int
    mtime_ns: int
    changed_at: float


class TraceFileTailer:
    name = "trace_file"
    role = "source"

    def __init__(
        self,
        cfg: TraceFileConfig,
        bus: Bus,
        registry: CollectorRegistry,
        clock: Clock,
        logger: logging.Logger | None = None,
    ) -> None:
        assert cfg.path is not None
        self.cfg = cfg
        self.base = Path(cfg.path)
        self.bus = bus
        self.clock = clock
        self.log = logger or logging.getLogger("sidecar.traces.file")
        self._pending: OrderedDict[int, _Request] = OrderedDict()
        # Files read to the end, with what they were then (inode, size, mtime): one that changes afterwards
        # was written again under the same name (a restarted Triton starting over at PATH.0) and is read again.
        self._done: OrderedDict[str, tuple[int, int, int]] = OrderedDict()
        self._seen: dict[str, _FileState] = {}
        self._periodic = Periodic("trace-file-tailer", self._poll, cfg.poll_interval_secs, on_error=self._loop_failed)
        self._files = Counter(
            "sidecar_trace_files_read",
            "Trace files fully read, by how (complete or lenient).",
            ["how"],
            registry=registry,
        )
        self._errors = Counter(
            "sidecar_trace_file_errors", "Trace file problems, by reason.", ["reason"], registry=registry
        )
        self._requests = Counter(
            "sidecar_trace_file_requests", "Requests turned into spans from trace files.", registry=registry
        )
        self._dropped = Counter(
            "sidecar_trace_file_requests_dropped",
            "Partly written requests dropped (pending map full, or never completed).",
            ["reason"],
            registry=registry,
        )
        self._rewritten = Counter(
            "sidecar_trace_files_rewritten",
            "Trace files read again because they changed after being read (written again under the same name).",
            registry=registry,
        )
        self._fallback = Counter(
            "sidecar_trace_file_clock_fallbacks",
            "Files whose monotonic timestamps were anchored at the file's mtime instead.",
            registry=registry,
        )

    def _candidates(self) -> list[Path] | None:
        """The trace files in rotation order; None when the folder could not be listed (nothing is known)."""
        parent = self.base.parent
        pat = re.compile(re.escape(self.base.name) + r"(\.(\d+))?$")
        found: list[tuple[int, Path]] = []
        try:
            for entry in os.scandir(parent):
                m = pat.match(entry.name)
                if m and entry.is_file():
                    found.append((int(m.group(2)) if m.group(2) else -1, Path(entry.path)))
        except FileNotFoundError:
            pass  # no folder, no files
        except OSError:
            return None
        found.sort()
        return [p for _, p in found]

    def _forget_missing(self, files: list[Path]) -> None:
        # Only files that still exist are remembered: a name deleted and written again (a restarted Triton
        # starting over at PATH.0) is a new file, and the state of files that vanish unread does not pile up.
        names = {str(p) for p in files}
        for remembered in (self._done, self._seen):
            for key in [k for k in remembered if k not in names]:
                del remembered[key]

    def poll_once(self) -> int:
        """Read what is new; returns the number of spans ingested. Runs on the loop thread in tests."""
        files = self._candidates()
        if files is None:
            files = []
        else:
            self._forget_missing(files)
        spans: list[Span] = []
        now = self.clock.now()
        for i, p in enumerate(files):
            key = str(p)
            try:
                st = p.stat()
            except OSError:
                continue
            done = self._done.get(key)
            if done is not None:
                if done == (st.st_ino, st.st_size, st.st_mtime_ns):
                    continue
                # Written again since it was read. Re-reading is safe: span ids come from (path, Triton's trace
                # id, first timestamp), so a request read before is a duplicate the store drops and counts.
                del self._done[key]
                self._rewritten.inc()
            prev = self._seen.get(key)
            if prev is None or prev.size != st.st_size or prev.mtime_ns != st.st_mtime_ns:
                self._seen[key] = prev = _FileState(st.st_size, st.st_mtime_ns, now)
            try:
                text = p.read_bytes()
            except OSError:
                self._errors.labels("read").inc()
                continue
            records, complete = parse_records(text)
            later_exists = i + 1 < len(files)
            settled = now - prev.changed_at >= self.cfg.settle_secs
            if not complete and not settled:
                continue  # still being written: read again next poll
            if not complete:
                self._errors.labels("truncated" if records else "unparseable").inc()
            self._files.labels("complete" if complete else "lenient").inc()
            spans += self._take(records, st.st_mtime_ns, flush=later_exists or settled)
            self._seen.pop(key, None)
            if self.cfg.delete_after_read and complete:
                try:
                    p.unlink()
                    continue  # gone: a file written under this name later is a new one
                except OSError:
                    pass
            self._done[key] = (st.st_ino, st.st_size, st.st_mtime_ns)
            while len(self._done) > self.cfg.max_files_remembered:
                self._done.popitem(last=False)
        if spans:
            self.bus.publish(Batch(kind="spans", source="trace_file", items=tuple(from_span(s) for s in spans),
                                   received_at=self.clock.now()))
        return len(spans)

    def _take(self, records: list[dict[str, Any]], mtime_ns: int, flush: bool) -> list[Span]:
        grouped: dict[int, _Request] = {}
        # Requests left incomplete by an earlier file continue here (one request may span a rotation).
        for tid in [r.get("id") for r in records]:
            if isinstance(tid, int) and tid in self._pending and tid not in grouped:
                grouped[tid] = self._pending.pop(tid)
        _group(records, grouped)
        ready: list[_Request] = []
        for q in grouped.values():
            if _complete(q):
                ready.append(q)
            else:
                self._pending[q.tid] = q
                if len(self._pending) > self.cfg.max_pending_requests:
                    self._pending.popitem(last=False)
                    self._dropped.labels("pending_full").inc()
        if flush and len(self._pending) > self.cfg.max_pending_requests // 2:
            # Old partial requests whose files are long done will not complete: emit what is known.
            while len(self._pending) > self.cfg.max_pending_requests // 2:
                ready.append(self._pending.popitem(last=False)[1])
                self._dropped.labels("incomplete").inc()
        offset = self._offset(ready, mtime_ns)
        self._requests.inc(len(ready))
        return records_to_spans(ready, offset, str(self.base))

    def _offset(self, reqs: list[_Request], mtime_ns: int) -> int:
        offset = int(self.clock.now() * 1e9) - int(self.clock.monotonic() * 1e9)
        last = max((max(q.stamps.values()) for q in reqs if q.stamps), default=None)
        if last is not None and last + offset > int(self.clock.now() * 1e9) + 2_000_000_000:
            # A request cannot end after we read it: this ns is not our monotonic clock.
            self._fallback.inc()
            return mtime_ns - last
        return offset

    async def start(self) -> None:
        self._periodic.start()

    async def _poll(self) -> None:
        self.poll_once()

    def _loop_failed(self, exc: Exception) -> None:
        self._errors.labels("internal").inc()
        self.log.error("trace file poll failed", exc_info=exc)

    async def shutdown(self) -> None:
        await self._periodic.stop()
        with contextlib.suppress(Exception):
            self.poll_once()  # whatever Triton flushed last

    def readiness(self) -> Readiness | None:
        return None

    def routes(self) -> None:
        return None
