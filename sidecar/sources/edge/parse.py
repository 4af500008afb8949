"""One edge log document -> ``EdgeRecord``, through the field mapping; every refusal names the field.

The same checks at the door as events: strings bounded by ``max_string_length``, times inside
``max_age_secs``/``max_future_skew_secs`` and the absolute range of ``sidecar.timerange``, unknown keys named
(unless ``unknown_fields: ignore``). Hand-written, not a pydantic model, for speed: this path runs for every line.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from sidecar.errors import EventError
from sidecar.processors.edge_record import EdgeRecord
from sidecar.sources.edge.config import EdgeSourceConfig
from sidecar.timerange import check_unix_seconds

__all__ = ["EdgeParser", "EventError"]

_UNIT = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
_HEX = frozenset("0123456789abcdef")
_NONE = frozenset({"", "-"})
_ZERO_TRACE = "0" * 32


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


class EdgeParser:
    """Built once per config; ``parse(doc, where, now)`` raises ``EventError`` naming ``<where>.<key>``."""

    def __init__(self, cfg: EdgeSourceConfig, *, node: str | None = None) -> None:
        self.cfg = cfg
        f = cfg.fields
        self.f = f
        self.node = node
        self.known = f.mapped() | set(cfg.extra_fields)
        self.check_unknown = cfg.unknown_fields == "reject"
        self.edge_unit = _UNIT[f.edge_latency_unit]
        self.origin_unit = _UNIT[f.origin_latency_unit]
        self.time_scale = 1e-3 if f.time_unit == "ms" else 1.0
        self.maxlen = cfg.max_string_length

    # ---- fields -------------------------------------------------------------------------------------------
    def _str(self, v: object, where: str, key: str) -> str:
        if isinstance(v, str):
            if len(v) > self.maxlen:
                raise EventError(f"{where}.{key}", f"longer than {self.maxlen} characters")
            return v
        if _is_number(v):
            return str(v)
        raise EventError(f"{where}.{key}", "must be a string")

    def _time(self, doc: Mapping[str, Any], where: str, now: float) -> float:
        key = self.f.time
        v = doc.get(key)
        if v is None:
            raise EventError(f"{where}.{key}", "required (the time of the request)")
        if self.f.date is not None:
            d = doc.get(self.f.date)
            if not isinstance(d, str) or not isinstance(v, str):
                raise EventError(f"{where}.{self.f.date}", "date and time must be strings (YYYY-MM-DD, HH:MM:SS)")
            v = f"{d}T{v}Z"
        if isinstance(v, str):
            if len(v) > 64:
                raise EventError(f"{where}.{key}", "longer than 64 characters")
            try:
                ts = float(v) * self.time_scale  # nginx's $msec, quoted
            except ValueError:
                try:
                    dt = datetime.fromisoformat(v.replace("Z", "+00:00"))
                except ValueError:
                    raise EventError(f"{where}.{key}", "must be Unix seconds or an RFC 3339 time") from None
                ts = (dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)).timestamp()
        elif _is_number(v):
            ts = float(v) * self.time_scale
        else:
            raise EventError(f"{where}.{key}", "must be Unix seconds or an RFC 3339 time")
        if (why := check_unix_seconds(ts)) is not None:
            raise EventError(f"{where}.{key}", why)
        if ts > now + self.cfg.max_future_skew_secs:
            raise EventError(f"{where}.{key}", f"is {ts - now:.0f}s in the future")
        if ts < now - self.cfg.max_age_secs:
            raise EventError(f"{where}.{key}", f"is older than max_age_secs ({self.cfg.max_age_secs:.0f}s)")
        return ts

    def _latency(self, v: object, where: str, key: str, unit: float) -> float | None:
        if v is None:
            return None
        if isinstance(v, str):
            v = v.strip()
            if v in _NONE:
                return None
            total = 0.0
            try:  # nginx: "0.012, 0.034" when it tried two upstreams; "-" for one it never reached
                for part in v.replace(":", ",").split(","):
                    part = part.strip()
                    if part not in _NONE:
                        total += float(part)
            except ValueError:
                raise EventError(f"{where}.{key}", "must be a number of seconds (or '-')") from None
            secs = total * unit
        elif isinstance(v, int | float) and not isinstance(v, bool):
            secs = float(v) * unit
        else:
            raise EventError(f"{where}.{key}", "must be a number")
        if not math.isfinite(secs) or secs < 0 or secs > 86_400:
            raise EventError(f"{where}.{key}", "must be between 0 and a day")
        return secs

    def _ids(self, doc: Mapping[str, Any], where: str) -> tuple[str | None, str | None]:
        trace: str | None = None
        request: str | None = None
        if (k := self.f.request_id) and (v := doc.get(k)) not in (None, "", "-"):
            request = self._str(v, where, k)
        if (k := self.f.trace_id) and (v := doc.get(k)) not in (None, "", "-"):
            raw = self._str(v, where, k)
            tid = raw.lower()
            if len(tid) == 55 and tid[2] == "-" and tid[35] == "-":  # a traceparent header: 00-<trace>-<span>-01
                tid = tid[3:35]
            if len(tid) == 32 and tid != _ZERO_TRACE and _HEX.issuperset(tid):
                trace = tid
            elif request is None:
                request = raw  # another width (the edge's own 16-byte id...): an opaque request id, never refused
        return trace, request

    # ---- a line -------------------------------------------------------------------------------------------
    def parse(self, doc: object, where: str, now: float) -> EdgeRecord:
        if not isinstance(doc, Mapping):
            raise EventError(where, "must be a JSON object")
        if self.check_unknown:
            for k in doc:
                if k not in self.known:
                    raise EventError(
                        f"{where}.{k}",
                        "unknown field (map it in edge.source.fields or list it in edge.source.extra_fields)",
                    )
        f = self.f
        at = self._time(doc, where, now)
        path = doc.get(f.path)
        if path is None:
            raise EventError(f"{where}.{f.path}", "required (the request path)")
        path = self._str(path, where, f.path)
        if (q := path.find("?")) >= 0:
            path = path[:q]
        cache_raw = doc.get(f.cache_status)
        cache = "" if cache_raw is None else self._str(cache_raw, where, f.cache_status).upper()
        if cache == "-":
            cache = ""
        status_raw = doc.get(f.status)
        try:
            status = int(status_raw)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise EventError(f"{where}.{f.status}", "must be an HTTP status (100..599)") from None
        if isinstance(status_raw, bool) or not 100 <= status <= 599:
            raise EventError(f"{where}.{f.status}", "must be an HTTP status (100..599)")
        edge_s = (
            self._latency(doc.get(f.edge_latency), where, f.edge_latency, self.edge_unit) if f.edge_latency else None
        )
        origin_s = (
            self._latency(doc.get(f.origin_latency), where, f.origin_latency, self.origin_unit)
            if f.origin_latency
            else None
        )
        node = self.node
        if node is None:
            node = "edge"
            if f.node and (v := doc.get(f.node)) not in (None, ""):
                node = self._str(v, where, f.node)
        route = None
        if f.route and (v := doc.get(f.route)) not in (None, "", "-"):
            route = self._str(v, where, f.route)
        trace_id, request_id = self._ids(doc, where)
        return EdgeRecord(
            at=at,
            path=path,
            cache=cache,
            edge_s=edge_s,
            origin_s=origin_s,
            status=status,
            node=node,
            trace_id=trace_id,
            request_id=request_id,
            route=route,
        )
