"""Triton TENSORS trace records as prediction events, with no change to the caller.

Triton in ``mode=triton`` with ``level=TENSORS`` writes, per sampled request, ``TENSOR_QUEUE_INPUT`` and
``TENSOR_BACKEND_OUTPUT`` records (``{"name", "data": "1,2,...", "shape": "2,4", "dtype"}``) next to a model
record (``model_name``, ``model_version``, ``request_id``). Each row of a batched tensor becomes one event;
configured tensor columns become features and the score. Trace ``ns`` values are a monotonic clock, not Unix
time, so events are stamped with the time the file is read.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from sidecar.model import Event
from sidecar.sources.events.config import TensorMapping
from sidecar.sources.trace_files.requests import Assembler, Request

__all__ = ["events_from_requests", "events_from_trace_records"]


def _parse_data(data: object) -> list[float | str]:
    if isinstance(data, list):
        raw = data
    elif isinstance(data, str):
        raw = data.split(",") if data else []
    else:
        return []
    out: list[float | str] = []
    for v in raw:
        if isinstance(v, int | float) and not isinstance(v, bool):
            try:
                out.append(float(v))
            except OverflowError:  # an int beyond float's range
                out.append(math.inf if v > 0 else -math.inf)
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
    return [vals[i : i + cols] for i in range(0, len(vals) - cols + 1, cols)]


def _bump(skipped: dict[str, int], reason: str, n: int = 1) -> None:
    skipped[reason] = skipped.get(reason, 0) + n


def events_from_requests(
    reqs: list[Request], mappings: Mapping[str, TensorMapping], now: float, max_features: int, skipped: dict[str, int]
) -> list[Event]:
    """Events of requests that carry TENSORS records; what cannot be used is counted in ``skipped`` by reason."""
    out: list[Event] = []
    for q in reqs:
        if not q.tensors:
            continue  # a trace without TENSORS records (level=TIMESTAMPS only)
        mapping = mappings.get(q.model) if q.has_model else None
        if mapping is None:
            _bump(skipped, "unmapped_model")
            continue
        tensors = {name: _rows(t) for name, t in q.tensors.items()}
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
            if len(feats) > max_features:
                _bump(skipped, "too_many_features")
                continue
            score: float | None = None
            if mapping.score is not None:
                srows = tensors.get(mapping.score.tensor, [])
                if row < len(srows) and mapping.score.column < len(srows[row]):
                    v = srows[row][mapping.score.column]
                    score = v if isinstance(v, float) and math.isfinite(v) else None
            out.append(
                Event(
                    model=q.model,
                    version=q.version or "unversioned",
                    timestamp=now,
                    features=feats,
                    score=score,
                    request_id=q.request_id or None,
                )
            )
    return out


def events_from_trace_records(
    records: list[Any], mappings: Mapping[str, TensorMapping], now: float, max_features: int = 256
) -> tuple[list[Event], dict[str, int]]:
    """Events from one whole trace file's records, and counts of what could not be used (by reason)."""
    asm = Assembler(max_pending=1 << 30, max_string=1 << 30)
    grouped: dict[int, Request] = {}
    asm.add((r for r in records if isinstance(r, dict)), grouped)
    skipped = dict(asm.refused)
    bad = sum(1 for r in records if not isinstance(r, dict) or "id" not in r)
    if bad:
        skipped["bad_record"] = bad
    return events_from_requests(list(grouped.values()), mappings, now, max_features, skipped), skipped
