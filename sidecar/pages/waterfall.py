"""The waterfall's geometry and the trace's one state: what the trace page draws, computed in Python so the
template only places it.

One row per span, depth-first by parent and start time, bars on a shared time axis; Triton's events are
ticks on their span's bar; error spans are red and marked with a cross. When the edge's log line of the request
is held (``sidecar.state.edge_hops``), an ``edge`` row comes first, on the same axis: the edge logs when it
answered and how long the request and its origin hop took, so its bar ends at the logged time and the origin
part of it is drawn ending there too (the log gives the origin's duration, not its start).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from sidecar.model import Span
from sidecar.processors.edge_record import EdgeRecord
from sidecar.processors.stages import STAGES, stage_durations
from sidecar.state.traces import MODEL_ATTR, VERSION_ATTR, TraceEntry

__all__ = [
    "EDGE_COLOR",
    "ERROR_COLOR",
    "ORIGIN_COLOR",
    "PALETTE",
    "EdgeBar",
    "Row",
    "TraceState",
    "Waterfall",
    "layout",
    "line_breaks",
    "one_line",
    "order_spans",
    "stage_rows",
    "trace_state",
]

PALETTE = ("#4c78a8", "#59a14f", "#9c755f", "#b07aa1", "#f28e2b", "#76b7b2")
ERROR_COLOR = "#d62728"
EDGE_COLOR = "#7f7f7f"
ORIGIN_COLOR = "#3b3b3b"
LABEL_W = 330
BAR_W = 820
ROW_H = 24
TOP = 34


# Escape sequences a client wrote literally (a message JSON-encoded twice): backslash-n, -r, -t.
_ESCAPES = re.compile(r"\\[nrt]")
# A server's file path: absolute (POSIX or Windows), its last part a file name with an extension, as in a
# Python backend's "At:" traceback (``/models/fraud/1/model.py(42)``) or a C++ source location; not a URL's.
_PATH = re.compile(r"(?<![\w.:/\\-])(?:[A-Za-z]:)?[/\\](?:[\w.@+~-]+[/\\])*([\w@+~-]+\.[A-Za-z0-9]{1,8})\b")
_SPACE = re.compile(r"\s+")


def one_line(text: str, limit: int = 300) -> str:
    """A reason as one line for a list: literal escape sequences and line breaks become spaces, file paths
    their last part (a server's directory layout is no reason; ``/models/fraud/1/model.py(42)`` reads
    ``model.py(42)``), runs of spaces one space, and at most ``limit`` characters."""
    flat = _SPACE.sub(" ", _ESCAPES.sub(" ", text))
    flat = _PATH.sub(r"\1", flat)
    flat = flat.strip()
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "\u2026"


def line_breaks(text: str) -> str:
    """A message for its detail panel, whole and as sent but for literal escape sequences (``\\n``, ``\\t``),
    which become the line breaks and tabs they stand for (the panel keeps them: ``white-space: pre-wrap``)."""
    return _ESCAPES.sub(lambda m: {"n": "\n", "r": "", "t": "\t"}[m.group(0)[1]], text)


def order_spans(spans: Sequence[Span]) -> list[tuple[Span, int]]:
    """Spans depth-first: each parent followed by its children by start time; orphans become roots."""
    ids = {s.span_id for s in spans}
    kids: dict[str | None, list[Span]] = {}
    for s in spans:
        parent = s.parent_span_id if s.parent_span_id in ids else None
        kids.setdefault(parent, []).append(s)
    for v in kids.values():
        v.sort(key=lambda s: (s.start_unix_nano, s.end_unix_nano))
    out: list[tuple[Span, int]] = []
    seen: set[str] = set()
    stack: list[tuple[Span, int]] = [(s, 0) for s in reversed(kids.get(None, []))]
    while stack:
        s, d = stack.pop()
        if s.span_id in seen:  # a duplicate span id must not loop
            continue
        seen.add(s.span_id)
        out.append((s, d))
        stack.extend((c, d + 1) for c in reversed(kids.get(s.span_id, [])))
    return out


def _nice_step(total_ns: float) -> float:
    raw = total_ns / 8
    mag = 10 ** (len(str(int(max(raw, 1)))) - 1)
    for m in (1, 2, 5, 10):
        if raw <= m * mag:
            return float(m * mag)
    return float(10 * mag)


def color(s: Span) -> str:
    if s.is_error:
        return ERROR_COLOR
    return PALETTE[sum(s.name.encode()) % len(PALETTE)]


@dataclass(frozen=True)
class Row:
    span: Span
    depth: int
    y: int
    x: float
    w: float
    offset_ns: int  # start relative to the trace's start
    color: str
    model: str | None
    version: str
    ticks: tuple[tuple[float, str, int], ...]  # (x, event name, offset ns)
    # An error span gets a line of its own under its bar for the status message: beside the bar it would
    # run off the drawing when the span ends late in the trace.
    msg_y: int | None = None


@dataclass(frozen=True)
class EdgeBar:
    """The edge hop in front of the model's spans: the whole request at the edge, and its origin part."""

    hop: EdgeRecord
    joined_by: str  # "trace id" or "request id"
    y: int
    x: float
    w: float
    start_ns: int  # absolute, Unix ns
    end_ns: int
    offset_ns: int  # start relative to the drawing's start (may be before the model's first span)
    origin: tuple[float, float] | None  # (x, w) of the origin part

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(frozen=True)
class Waterfall:
    rows: list[Row]
    width: int
    height: int
    label_w: int
    row_h: int
    top: int
    grid: list[tuple[float, int]]  # (x, offset ns)
    edge: EdgeBar | None = None


def _edge_ns(hop: EdgeRecord) -> tuple[int, int]:
    end = int(hop.at * 1e9)
    return end - int((hop.edge_s or 0.0) * 1e9), end


def layout(spans: Sequence[Span], edge: EdgeRecord | None = None, joined_by: str = "trace id") -> Waterfall:
    ordered = order_spans(spans)
    t0 = min(s.start_unix_nano for s in spans)
    t1 = max(s.end_unix_nano for s in spans)
    if edge is not None:
        e0, e1 = _edge_ns(edge)
        t0, t1 = min(t0, e0), max(t1, e1)
    total = max(1, t1 - t0)
    scale = BAR_W / total
    rows = []
    y = TOP
    bar = None
    if edge is not None:
        origin = None
        if edge.origin_s is not None:
            # nginx's origin time may exceed its whole-request time by its 1 ms rounding: kept inside the bar.
            ow = min(max(1.0, edge.origin_s * 1e9 * scale), max(1.0, (e1 - e0) * scale))
            origin = (LABEL_W + (e1 - t0) * scale - ow, ow)
        bar = EdgeBar(
            edge, joined_by, y, LABEL_W + (e0 - t0) * scale, max(1.0, (e1 - e0) * scale), e0, e1, e0 - t0, origin
        )
        y += ROW_H
    for s, depth in ordered:
        model = s.attributes.get(MODEL_ATTR)
        msg_y = y + ROW_H if s.is_error else None
        rows.append(
            Row(
                span=s,
                depth=depth,
                y=y,
                msg_y=msg_y,
                x=LABEL_W + (s.start_unix_nano - t0) * scale,
                w=max(1.0, s.duration_ns * scale),
                offset_ns=s.start_unix_nano - t0,
                color=color(s),
                model=None if model is None else str(model),
                version=str(s.attributes.get(VERSION_ATTR, "")),
                ticks=tuple(
                    (LABEL_W + (e.time_unix_nano - t0) * scale, e.name, e.time_unix_nano - t0) for e in s.events
                ),
            )
        )
        y += ROW_H * (2 if s.is_error else 1)
    height = y + 8
    step = _nice_step(total)
    grid = []
    t = 0.0
    while t <= total:
        grid.append((LABEL_W + t * scale, int(t)))
        t += step
    return Waterfall(rows, LABEL_W + BAR_W + 110, height, LABEL_W, ROW_H, TOP, grid, bar)


@dataclass(frozen=True)
class TraceState:
    """The one state a trace has on every page: ``failed``, ``possibly failed`` or ``ok``, and why."""

    state: str
    reasons: list[str] = field(default_factory=list)
    error_spans: list[Span] = field(default_factory=list)

    @property
    def css(self) -> str:
        return {"failed": "err", "possibly failed": "maybe"}.get(self.state, "ok")


def trace_state(e: TraceEntry) -> TraceState:
    errors = [s for s in e.spans if s.is_error]
    # One line each, without server paths: the span's panel has its whole message as sent.
    reasons = [
        one_line(
            f"span {s.name!r} ended with an error status"
            + (f": {s.status_message}" if s.status_message else " (no message)"),
            1000,
        )
        for s in errors
    ]
    if errors or e.error:
        if e.failure_note and e.error:
            reasons.append(e.failure_note)
        return TraceState("failed", reasons, errors)
    if e.failure_note:
        # Only Triton's failure counter says so, not this request's spans: one state, explained, never "ok".
        return TraceState("possibly failed", [e.failure_note], [])
    return TraceState("ok")


def stage_rows(e: TraceEntry) -> list[tuple[str, str, dict[str, float]]]:
    """(model, version, seconds by stage) for each model span that has at least one stage: a model span
    without Triton's timestamps would be a row of dashes."""
    spans = e.spans
    by_id = {s.span_id: s for s in spans}
    compute = {s.parent_span_id: s for s in spans if s.name == "compute" and s.parent_span_id}
    out = []
    for s in spans:
        if MODEL_ATTR not in s.attributes:
            continue
        d = stage_durations(s, compute.get(s.span_id), by_id.get(s.parent_span_id or ""))
        if d:
            out.append(
                (
                    str(s.attributes[MODEL_ATTR]),
                    str(s.attributes.get(VERSION_ATTR, "")),
                    {k: d[k] for k in STAGES if k in d},
                )
            )
    return out
