"""Maps Triton's TENSORS trace files to prediction events, with no change to the caller.

Triton in ``mode=triton`` with ``level=TENSORS`` writes, per sampled request, ``TENSOR_QUEUE_INPUT`` and
``TENSOR_BACKEND_OUTPUT`` records (``{"name", "data": "1,2,...", "shape": "2,4", "dtype"}``) next to a model
record (``model_name``, ``model_version``, ``request_id``). Each row of a batched tensor becomes one event;
configured tensor columns become features and the score. Trace ``ns`` values are a monotonic clock, not Unix
time, so events are stamped with the time the file is read.

Triton writes ``PATH`` (at exit) or ``PATH.0``, ``PATH.1``, ... (every ``log-frequency`` traces) as whole JSON
arrays; each is read once, when it parses (a file still being written does not), and remembered by
(inode, size, mtime) in the store so a restart does not replay it.
"""

from __future__ import annotations

import contextlib
import glob
import math
import os
from collections.abc import Mapping
from typing import Any

import orjson

from sidecar.component import Context
from sidecar.model import Event
from sidecar.sources.events.config import TensorMapping, TritonTraceConfig
from sidecar.sources.events.metrics import EventsMetrics
from sidecar.sources.events.polled import PolledEventSource

__all__ = ["TensorTraceReader", "events_from_trace_records"]

_NS = "events.tensors"


def _parse_data(data: object) -> list[float | str]:
    if isinstance(data, list):
        raw = data
    elif isinstance(data, str):
        raw = data.split(",") if data else []
    else:
        return []
    out: list[float | str] = []
    for v in raw:
        if isinstance(v, int | float):
            out.append(float(v))
            continue
        s = str(v).strip()
        try:
            out.append(float(s))
        except ValueError:
            out.append(s)
    return out


def _rows(tensor: Mapping[str, Any]) -> list[list[float | str]]:
    vals = _parse_data(tensor.get("data"))
    try:
        shape = [int(x) for x in str(tensor.get("shape", "")).split(",") if x.strip()]
    except ValueError:
        shape = []
    cols = shape[-1] if len(shape) >= 2 and shape[-1] > 0 else (len(vals) if len(shape) <= 1 else 1)
    if cols <= 0:
        return []
    return [vals[i:i + cols] for i in range(0, len(vals) - cols + 1, cols)]


def events_from_trace_records(records: list[Any], mappings: Mapping[str, TensorMapping],
                              now: float) -> tuple[list[Event], dict[str, int]]:
    """Events from one trace file's records, and counts of what could not be used (by reason)."""
    by_id: dict[object, dict[str, Any]] = {}
    skipped: dict[str, int] = {}
    for rec in records:
        if not isinstance(rec, dict) or "id" not in rec:
            skipped["bad_record"] = skipped.get("bad_record", 0) + 1
            continue
        t = by_id.setdefault(rec["id"], {"tensors": {}})
        if "model_name" in rec:
            t["model"] = str(rec["model_name"])
            t["version"] = str(rec.get("model_version", ""))
            t["request_id"] = rec.get("request_id") or None
        tensor = rec.get("tensor")
        if isinstance(tensor, dict) and "name" in tensor:
            t["tensors"][str(tensor["name"])] = _rows(tensor)
    out: list[Event] = []
    for t in by_id.values():
        if not t["tensors"]:
            continue  # a trace without TENSORS records (level=TIMESTAMPS only)
        model = t.get("model")
        mapping = mappings.get(model) if model else None
        if mapping is None:
            skipped["unmapped_model"] = skipped.get("unmapped_model", 0) + 1
            continue
        tensors: dict[str, list[list[float | str]]] = t["tensors"]
        n_rows = max(len(r) for r in tensors.values())
        for row in range(n_rows):
            feats: dict[str, float | str | None] = {}
            for tname, rows in tensors.items():
                names = mapping.inputs.get(tname)
                if names is None and not mapping.map_unlisted:
                    continue
                vals = rows[row] if row < len(rows) else []
                ncols = len(names) if names is not None else len(vals)
                for c in range(ncols):
                    fname = names[c] if names is not None else f"{tname}_{c}"
                    if fname:
                        feats[fname] = vals[c] if c < len(vals) else None
            score: float | None = None
            if mapping.score is not None:
                srows = tensors.get(mapping.score.tensor, [])
                if row < len(srows) and mapping.score.column < len(srows[row]):
                    v = srows[row][mapping.score.column]
                    score = v if isinstance(v, float) and math.isfinite(v) else None
            out.append(Event(model=model or "", version=t.get("version") or "unversioned", timestamp=now,
                             features=feats, score=score, request_id=t.get("request_id")))
    return out, skipped


class TensorTraceReader(PolledEventSource):
    name = "events_triton_tensors"
    source = "triton_trace"

    def __init__(self, ctx: Context, cfg: TritonTraceConfig, metrics: EventsMetrics) -> None:
        super().__init__(ctx, metrics, cfg.poll_interval_secs)
        self.cfg = cfg
        self._failed_sizes: dict[str, int] = {}

    def _files(self) -> list[str]:
        base = self.cfg.path
        parts = [p for p in glob.glob(glob.escape(base) + ".*") if p[len(base) + 1:].isdigit()]
        parts.sort(key=lambda p: int(p[len(base) + 1:]))
        return ([base] if os.path.exists(base) else []) + parts

    def _seen(self, path: str, sig: str) -> bool:
        try:
            return self.ctx.store.get(_NS, path) in (sig, sig.encode())
        except Exception:
            self.m.errors.labels(self.source, "state").inc()
            return False

    def read_once(self) -> list[Event]:
        out: list[Event] = []
        existing = set()
        for path in self._files():
            existing.add(path)
            try:
                st = os.stat(path)
            except OSError:
                continue
            sig = f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"
            if self._seen(path, sig):
                continue
            if st.st_size > self.cfg.max_file_bytes:
                self.m.rejected.labels(self.source, "file_too_large").inc()
                self._mark(path, sig)
                continue
            try:
                with open(path, "rb") as f:
                    records = orjson.loads(f.read())
                if not isinstance(records, list):
                    raise ValueError("not a JSON array")
            except (OSError, ValueError):
                # Still being written, or broken: give it one more poll at the same size before giving up.
                if self._failed_sizes.get(path) == st.st_size:
                    self.m.errors.labels(self.source, "parse").inc()
                    self._mark(path, sig)
                    self._failed_sizes.pop(path, None)
                else:
                    self._failed_sizes[path] = st.st_size
                continue
            self._failed_sizes.pop(path, None)
            events, skipped = events_from_trace_records(records, self.cfg.models, self.ctx.clock.now())
            for reason, n in skipped.items():
                self.m.rejected.labels(self.source, reason).inc(n)
            out.extend(events)
            self._mark(path, sig)
            if self.cfg.delete_after_read and path != self.cfg.path:
                with contextlib.suppress(OSError):
                    os.unlink(path)
        self._prune(existing)
        return out

    def _mark(self, path: str, sig: str) -> None:
        try:
            self.ctx.store.put(_NS, path, sig)
        except Exception:
            self.m.errors.labels(self.source, "state").inc()

    def _prune(self, existing: set[str]) -> None:
        """Forget files that are gone, so the remembered set stays as small as the folder."""
        try:
            for k in self.ctx.store.keys(_NS):
                if k.startswith(self.cfg.path) and k not in existing:
                    self.ctx.store.delete(_NS, k)
        except Exception:
            self.m.errors.labels(self.source, "state").inc()
        for k in [k for k in self._failed_sizes if k not in existing]:
            del self._failed_sizes[k]

