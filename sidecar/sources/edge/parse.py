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
from sidecar.timerange import MIN_AT, check_unix_seconds

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
        self.known = frozenset(f.mapped() | set(cfg.extra_fields))
        self.check_unknown = cfg.unknown_fields == "reject"
        self.edge_unit = _UNIT[f.edge_latency_unit]
        self.origin_unit = _UNIT[f.origin_latency_unit]
        self.time_scale = 1e-3 if f.time_unit == "ms" else 1.0
        self.maxlen = cfg.max_string_length
        self.lo = MIN_AT
        self.ahead = min(cfg.max_future_skew_secs, 1e12)
        self.max_age = cfg.max_age_secs
        self.fast_time = f.date is None and f.time_unit == "s"
        self.k_time, self.k_path, self.k_cache, self.k_status = f.time, f.path, f.cache_status, f.status
        self.k_edge, self.k_origin, self.k_node, self.k_route = f.edge_latency, f.origin_latency, f.node, f.route
        self.k_trace, self.k_request = f.trace_id, f.request_id

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
        if self.f.trace_id is None and self.f.request_id is None:
            return None, None
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
        """The common shapes (numbers, short strings) take inline fast paths; anything else goes through the
        checking helpers, which raise naming the field."""
        if type(doc) is not dict:
            if not isinstance(doc, Mapping):
                raise EventError(where, "must be a JSON object")
            doc = dict(doc)
        if self.check_unknown and not self.known.issuperset(doc):
            unknown = doc.keys() - self.known
            raise EventError(
                f"{where}.{sorted(unknown)[0]}",
                "unknown field (map it in edge.source.fields or list it in edge.source.extra_fields)",
            )
        f, maxlen = self.f, self.maxlen
        v = doc.get(self.k_time)
        if type(v) is float and self.fast_time and now - self.max_age <= v < now + self.ahead and v > self.lo:
            at = v
        else:
            at = self._time(doc, where, now)
        path = doc.get(self.k_path)
        if type(path) is not str or len(path) > maxlen:
            if path is None:
                raise EventError(f"{where}.{f.path}", "required (the request path)")
            path = self._str(path, where, f.path)
        if "?" in path:
            path = path[: path.index("?")]
        cache = doc.get(self.k_cache)
        if type(cache) is str and len(cache) <= 32:
            cache = cache.upper()
        else:
            cache = "" if cache is None else self._str(cache, where, f.cache_status).upper()
        if cache == "-":
            cache = ""
        status = doc.get(self.k_status)
        if type(status) is not int or not 100 <= status <= 599:
            status = self._status(status, where, f.status)
        edge_s: float | None = None
        if (k := self.k_edge) is not None:
            e = doc.get(k)
            if type(e) is float and 0.0 <= e <= 86_400.0:
                edge_s = e * self.edge_unit
            else:
                edge_s = self._latency(e, where, k, self.edge_unit)
        origin_s: float | None = None
        if (k := self.k_origin) is not None:
            o = doc.get(k)
            origin_s = None if type(o) is str and o in _NONE else self._latency(o, where, k, self.origin_unit)
        node = self.node
        if node is None:
            node = "edge"
            if (kn := self.k_node) and (n := doc.get(kn)) not in (None, ""):
                node = n if type(n) is str and len(n) <= maxlen else self._str(n, where, kn)
        route = None
        if (kr := self.k_route) and (v := doc.get(kr)) not in (None, "", "-"):
            route = self._str(v, where, kr)
        trace_id: str | None = None
        request_id: str | None = None
        if (kq := self.k_request) and (v := doc.get(kq)):
            request_id = v if type(v) is str and len(v) <= maxlen and v != "-" else self._ids(doc, where)[1]
        if (kt := self.k_trace) and (v := doc.get(kt)) and v != "-":
            trace_id, request_id = self._ids(doc, where)
        return EdgeRecord(at, path, cache, edge_s, origin_s, status, node, trace_id, request_id, route)

    def _status(self, v: object, where: str, key: str) -> int:
        try:
            status = int(v)  # type: ignore[call-overload]
        except (TypeError, ValueError):
            raise EventError(f"{where}.{key}", "must be an HTTP status (100..599)") from None
        if isinstance(v, bool) or (isinstance(v, float) and not v.is_integer()) or not 100 <= status <= 599:
            raise EventError(f"{where}.{key}", "must be an HTTP status (100..599)")
        return status
