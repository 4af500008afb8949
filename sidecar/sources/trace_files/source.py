"""The one reader of Triton's ``mode=triton`` trace files: spans and tensor events from the same pass.

Triton (``--trace-config triton,file=PATH``) writes one JSON array per file; with ``log-frequency=N`` it starts
``PATH.0``, ``PATH.1``, ... every N traces, otherwise it appends to ``PATH``. Each poll reads what was appended
to each file since the last complete record taken (its byte offset), groups records into requests (a request
may straddle reads and rotated files) and, once a request is complete, publishes its spans (bus kind
``spans``) and its TENSORS rows as events (``events``). Only then is the read committed to the store (offsets,
and the requests seen partly), and only then, with ``delete_after_read``, is a closed, fully read file deleted:
a file is never deleted before both outputs were taken, and never when a subscriber failed to take them. A poll
runs such passes of ``read_slice_bytes`` each until nothing new is left or ``max_read_bytes`` were read: a pass
small enough that its requests' data stays in the CPU's caches from reading to publishing costs less a request.

Clock mapping: Triton's ``ns`` come from ``std::chrono::steady_clock`` (``CLOCK_MONOTONIC`` on Linux, Python's
``time.monotonic`` on the same host), so ``wall_ns = ns + (clock.now() - clock.monotonic())`` sampled at the
read. If that is implausible (a request ending after the read: another host or a time namespace), the last
timestamp is anchored at the file's mtime and ``sidecar_trace_file_clock_fallbacks_total`` counts it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import CollectorRegistry

import sidecar.sources.trace_files.state as state
from sidecar.clock import Clock
from sidecar.component import Bus
from sidecar.model import Batch, Event, SpanRequests
from sidecar.polled import Polled, TickerFactory
from sidecar.records import TRACE_FILE_SOURCE, Record
from sidecar.sources.events.metrics import EventsMetrics
from sidecar.sources.trace_files.metrics import TraceFileMetrics
from sidecar.sources.trace_files.records import next_record, scan
from sidecar.sources.trace_files.requests import Assembler, ProbeFilter, Request
from sidecar.sources.trace_files.settings import TraceFileSettings
from sidecar.sources.trace_files.spans import ROOT_NAME as ROOT
from sidecar.sources.trace_files.spans import clock_groups, plausible_of, span_records, stream_records, whole_of
from sidecar.sources.trace_files.tensors import events_from_requests
from sidecar.store import Store

__all__ = ["TraceFileSource"]

EVENTS_SOURCE = "triton_trace"


@dataclass
class _Pass:
    requests: list[SpanRequests] = field(default_factory=list)  # one per clock group
    spans: list[Record] = field(default_factory=list)  # stream spans
    events: list[Event] = field(default_factory=list)
    touched: set[str] = field(default_factory=set)  # files whose marks changed in this pass
    finished: list[str] = field(default_factory=list)  # closed and read to the end
    read: int = 0  # bytes read
    starved: bool = False  # bytes were left unread for want of the pass's budget


class TraceFileSource(Polled):
    def __init__(
        self,
        settings: TraceFileSettings,
        *,
        bus: Bus,
        metrics: TraceFileMetrics,
        clock: Clock,
        store: Store,
        events_metrics: EventsMetrics | None = None,
        logger: logging.Logger | None = None,
        name: str = "trace_file",
        registry: CollectorRegistry | None = None,
        ticker: TickerFactory | None = None,
    ) -> None:
        self.s = settings
        self.name = name
        super().__init__(
            interval_secs=settings.poll_interval_secs,
            registry=registry if registry is not None else metrics.registry,
            logger=logger or logging.getLogger("sidecar.sources.trace_files"),
            ticker=ticker,
        )
        self.base = Path(settings.path)
        self.key = os.path.abspath(settings.path)
        self.bus, self.m, self.clock, self.store, self.em = bus, metrics, clock, store, events_metrics
        self.asm = Assembler(settings.max_pending_requests, settings.max_string_length)
        self.probes = ProbeFilter()
        self._cp: state.Checkpoint | None = None
        self._pat = re.compile(re.escape(self.base.name) + r"(\.(\d+))?$")

    # -- state ---------------------------------------------------------------------------------------------
    def _state(self) -> state.Checkpoint:
        if self._cp is None:
            try:
                self._cp = state.load(self.store, self.key)
            except Exception:
                self.m.errors.labels("state").inc()
                self.log.exception("trace file state unreadable; starting from the files' beginnings")
                self._cp = state.Checkpoint({}, [])
            for r in self._cp.pending:
                self.asm.pending[r.tid] = r
        return self._cp

    def _commit(self, p: _Pass, gone: set[str]) -> bool:
        cp = self._state()
        cp.pending = list(self.asm.pending.values())
        try:
            state.save(self.store, self.key, cp, p.touched, gone)
            return True
        except Exception:
            self.m.errors.labels("state").inc()
            self.log.exception("could not record how far the trace files were read")
            return False

    # -- discovery -----------------------------------------------------------------------------------------
    def _candidates(self) -> list[tuple[int, Path]] | None:
        """The trace files in rotation order; None when the folder could not be listed (nothing is known)."""
        found: list[tuple[int, Path]] = []
        try:
            for entry in os.scandir(self.base.parent):
                m = self._pat.match(entry.name)
                if m and entry.is_file():
                    found.append((int(m.group(2)) if m.group(2) else -1, Path(entry.path)))
        except FileNotFoundError:
            pass  # no folder, no files
        except (OSError, ValueError):
            return None
        found.sort()
        return found

    def _mark_for(self, cp: state.Checkpoint, key: str, index: int, st: os.stat_result) -> state.FileMark | None:
        mark = cp.marks.get(key)
        changed = mark is not None and (st.st_size != mark.size_seen or st.st_mtime_ns != mark.mtime_seen)
        if mark is not None and changed and state.rewritten(mark, key, st):
            self.m.rewritten.inc()
            mark = None
        if mark is None:
            if index <= cp.floor_index and st.st_mtime_ns <= cp.floor_mtime_ns:
                return None  # read before; its mark was let go to stay bounded
            mark = cp.marks[key] = state.FileMark(st.st_ino)
            if state.legacy_read_whole(self.store, key, st.st_ino, st.st_size, st.st_mtime_ns):
                mark.offset, mark.closed = st.st_size, True  # read whole by the former tensors reader
        return mark

    def _bound_marks(self, cp: state.Checkpoint, files: list[tuple[int, Path]], p: _Pass) -> set[str]:
        """Forget marks of files that are gone; beyond the limit, let the oldest finished ones go (floor)."""
        names = {str(f): i for i, f in files}
        gone = {k for k in cp.marks if k not in names}
        extra = len(cp.marks) - len(gone) - self.s.max_files_remembered
        for i, f in files:
            if extra <= 0:
                break
            k = str(f)
            m = cp.marks.get(k)
            if m is not None and m.closed and m.size_seen == m.offset and i >= 0:
                cp.floor_index = max(cp.floor_index, i)
                cp.floor_mtime_ns = max(cp.floor_mtime_ns, m.mtime_seen)
                gone.add(k)
                extra -= 1
        for k in gone:
            cp.marks.pop(k, None)
            p.touched.discard(k)
        return gone

    # -- one pass ------------------------------------------------------------------------------------------
    def read_pass(self, budget: int) -> tuple[_Pass, set[str]]:
        """Read what is new in every file, at most ``budget`` bytes but whole records (worker thread); returns what
        to publish and the marks to forget."""
        cp = self._state()
        p = _Pass()
        files = self._candidates()
        if files is None:
            self.m.errors.labels("list").inc()
            return p, set()
        gone = self._bound_marks(cp, files, p)
        now = self.clock.now()
        grouped: dict[int, Request] = {}
        flush = False
        quiet = True
        mtime_ns = 0
        for n, (index, path) in enumerate(files):
            key = str(path)
            try:
                st = path.stat()
            except OSError:
                continue
            mark = self._mark_for(cp, key, index, st)
            if mark is None:
                continue
            if st.st_size != mark.size_seen or st.st_mtime_ns != mark.mtime_seen:
                mark.size_seen, mark.mtime_seen, mark.changed_at, mark.lenient_counted = (
                    st.st_size,
                    st.st_mtime_ns,
                    now,
                    False,
                )
                p.touched.add(key)
            starved = False  # bytes left unread for want of budget: read by the next pass
            if st.st_size > mark.offset:
                want = st.st_size - mark.offset
                starved = want > budget
                if budget > 0:
                    took = self._read(key, mark, st, min(budget, want), want, grouped, p)
                    budget -= took
                    p.read += took
                    starved = want > took and budget <= 0  # a failed read is counted, not retried this poll
                    mtime_ns = max(mtime_ns, st.st_mtime_ns)
                p.starved = p.starved or starved
            # Only a record cut short is held: separators after the last record (Triton idle after "},") are not.
            held = st.st_size > mark.offset and mark.held > 0
            settled = held and now - mark.changed_at >= self.s.settle_secs
            if settled and not mark.lenient_counted:
                mark.lenient_counted = True
                self.m.errors.labels("truncated" if mark.offset else "unparseable").inc()
                self.m.files.labels("lenient").inc()
            flush = flush or n + 1 < len(files) or settled
            quiet = quiet and (not held or settled) and not starved
            if mark.closed and not held:
                p.finished.append(key)
        self._ready(grouped, flush, quiet, mtime_ns, p)
        return p, gone

    def _read(
        self,
        key: str,
        mark: state.FileMark,
        st: os.stat_result,
        n: int,
        want: int,
        grouped: dict[int, Request],
        p: _Pass,
    ) -> int:
        """Read ``n`` of the ``want`` new bytes of a file and fold its records; returns the bytes read."""
        try:
            with open(key, "rb") as f:
                f.seek(mark.offset)
                buf = f.read(n)
        except OSError:
            self.m.errors.labels("read").inc()
            return 0
        sc = scan(buf, at_start=mark.offset == 0, lean=True)
        if not sc.consumed and len(buf) == n < min(want, self.s.max_read_bytes):
            # The pass's budget cut a record short, not the file's end: read it whole (up to max_read_bytes).
            return self._read(key, mark, st, min(want, self.s.max_read_bytes), want, grouped, p)
        mark.held = sc.held
        if sc.damaged:
            self.m.errors.labels("damaged").inc(sc.damaged)
        if sc.not_objects:
            self.m.refused.labels("not_object").inc(sc.not_objects)
        if not sc.consumed and len(buf) >= self.s.max_read_bytes:
            # One record larger than a whole read: it cannot be taken, and waiting will not change that.
            self.m.errors.labels("record_too_large").inc()
            try:
                mark.offset = next_record(key, mark.offset + buf.find(b"{") + 1, st.st_size)
            except OSError:
                self.m.errors.labels("read").inc()
                mark.offset = st.st_size
            mark.held = 0
            p.touched.add(key)
            return len(buf)
        if sc.consumed:
            if mark.offset == 0:
                mark.head_len = min(state.HEAD_BYTES, sc.consumed)
                mark.head = state.head_hash(buf[: mark.head_len])
            was_closed = mark.closed
            mark.offset += sc.consumed
            mark.closed = sc.closed
            if mark.closed and not was_closed and mark.offset == st.st_size:
                self.m.files.labels("complete").inc()
            p.touched.add(key)
        self.asm.add(sc.records, grouped)
        return len(buf)

    def _ready(self, grouped: dict[int, Request], flush: bool, quiet: bool, mtime_ns: int, p: _Pass) -> None:
        ready, dropped = self.asm.settle(grouped, quiet)
        if dropped:
            self.m.dropped.labels("pending_full").inc(dropped)
        if flush:
            old = self.asm.drain_old()
            self.m.dropped.labels("incomplete").inc(len(old))
            ready += old
        for reason, k in self.asm.refused.items():
            self.m.refused.labels(reason).inc(k)
        self.asm.refused.clear()
        if not ready:
            return
        ready, probes = self.probes.split(ready)
        if probes:
            self._probes_dropped(probes)
        ok: list[Request] = []
        now_ns = int(self.clock.now() * 1e9)
        groups = clock_groups(ready, now_ns, now_ns - int(self.clock.monotonic() * 1e9), mtime_ns)
        if len(groups) > 1:
            self.m.fallback.inc()
        for group, offset, spans in groups:
            fine = plausible_of(group, offset, spans)
            ok += fine
            if len(fine) < len(group):
                self.m.refused.labels("implausible_time").inc(len(group) - len(fine))
            if self.s.spans and fine:
                base = str(self.base)
                whole, n = whole_of(fine, offset, base)
                p.requests.append(SpanRequests(tuple(fine), tuple(whole), offset, base, span_records, n, ROOT))
                p.spans += stream_records(fine, offset, base, self.s.empty_final_response)
        self.m.requests.inc(len(ok))
        if self.s.tensors is not None:
            skipped: dict[str, int] = {}
            p.events = events_from_requests(
                ok, self.s.tensors, self.clock.now(), self.s.max_features_per_event, skipped
            )
            if self.em is not None:
                for reason, k in skipped.items():
                    self.em.rejected.labels(EVENTS_SOURCE, reason).inc(k)

    def _probes_dropped(self, probes: list[Request]) -> None:
        """Count the probe's requests; their tensor rows are counted as the events sources count a probe's
        events (``sidecar_events_rejected_total{reason="probe"}``)."""
        self.m.probes.inc(len(probes))
        if self.s.tensors is not None and self.em is not None:
            rows = events_from_requests(probes, self.s.tensors, self.clock.now(), self.s.max_features_per_event, {})
            if rows:
                self.em.rejected.labels(EVENTS_SOURCE, "probe").inc(len(rows))

    def publish(self, p: _Pass, gone: set[str]) -> int:
        """Publish a pass, commit it, then delete what was fully taken (loop thread); returns items published."""
        failed: list[str] = []
        now = self.clock.now()
        if p.requests:
            reqs = Batch(kind="span_requests", source=TRACE_FILE_SOURCE, items=tuple(p.requests), received_at=now)
            failed += self.bus.publish(reqs)
        if p.spans:
            spans = Batch(kind="spans", source=TRACE_FILE_SOURCE, items=tuple(p.spans), received_at=now)
            failed += self.bus.publish(spans)
        if p.events:
            failed += self.bus.publish(
                Batch(kind="events", source=EVENTS_SOURCE, items=tuple(p.events), received_at=now)
            )
            if self.em is not None:
                self.em.received.labels(EVENTS_SOURCE).inc(len(p.events))
        cp = self._state()
        if failed:
            # Publishing again would double what the other subscribers took; keep the files for the operator.
            self.m.errors.labels("publish").inc()
            for k in p.touched:
                if k in cp.marks:
                    cp.marks[k].keep = True
        committed = self._commit(p, gone)
        if committed and self.s.delete_after_read:
            self._delete(cp, p)
        return sum(r.span_count for r in p.requests) + len(p.spans) + len(p.events)

    def _delete(self, cp: state.Checkpoint, p: _Pass) -> None:
        deleted: set[str] = set()
        for k in p.finished:
            mark = cp.marks.get(k)
            if mark is None or mark.keep:
                continue
            try:
                os.unlink(k)
            except OSError:
                self.m.errors.labels("delete").inc()
                continue
            self.m.deleted.inc()
            deleted.add(k)
            del cp.marks[k]  # gone: a file written under this name later is a new one
        if deleted:
            with contextlib.suppress(Exception):
                state.save(self.store, self.key, cp, set(), deleted)

    def _left_after(self, left: int, p: _Pass) -> int:
        """What a poll may still read after pass ``p``, of the ``left`` bytes it could before (0: done)."""
        return left - max(p.read, 1) if p.starved else 0

    def poll_once(self) -> int:
        """Read, publish and commit synchronously, pass by pass (tests, shutdown); returns the spans + events
        published."""
        n, left = 0, self.s.max_read_bytes
        while left > 0:
            p, gone = self.read_pass(min(self.s.read_slice_bytes, left))
            n += self.publish(p, gone)
            left = self._left_after(left, p)
        return n

    # -- lifecycle -----------------------------------------------------------------------------------------
    async def tick_once(self) -> None:
        left = self.s.max_read_bytes
        while left > 0:
            p, gone = await asyncio.to_thread(self.read_pass, min(self.s.read_slice_bytes, left))
            self.publish(p, gone)
            left = self._left_after(left, p)

    async def shutdown(self) -> None:
        await super().shutdown()
        with contextlib.suppress(Exception):
            self.poll_once()  # whatever Triton flushed last
