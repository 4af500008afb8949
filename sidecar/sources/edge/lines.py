"""Many log lines at once: decode and check each, the common shapes inline, anything else through
``EdgeParser.parse`` (the reference: it gives the same record or the refusal naming the field).

The tailer reads a hundred thousand lines a second; calling ``parse`` per line costs its attribute look-ups and
call overhead every time, so this loop binds the mapping once per read. A line takes the inline path only when
every field has its usual shape (float time in the accepted range, short strings, int status, float or "-"
latencies, no query string, no unknown key); any other line, valid or not, goes to ``parse`` whole, so the
refusals and the unusual shapes have one implementation. ``tests/sources/edge/test_edge_lines.py`` holds the
two to the same answers.
"""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from sidecar.errors import EventError
from sidecar.processors.edge_record import EdgeRecord
from sidecar.sources.edge.parse import EdgeParser

__all__ = ["ParsedLines", "parse_lines"]

_HEX = frozenset("0123456789abcdef")
_ZERO_TRACE = "0" * 32
_DAY = 86_400.0


class ParsedLines:
    """What one read gave: the records, blank lines skipped, lines that are not JSON, and the refused lines
    (index in the read, the refusal)."""

    __slots__ = ("invalid", "not_json", "records")

    def __init__(self) -> None:
        self.records: list[EdgeRecord] = []
        self.not_json = 0
        self.invalid: list[tuple[int, EventError]] = []


def parse_lines(parser: EdgeParser, lines: Sequence[bytes], now: float, where: str = "line") -> ParsedLines:
    out = ParsedLines()
    append, parse, loads = out.records.append, parser.parse, orjson.loads
    fast = parser.fast_time
    known = parser.known.issuperset if parser.check_unknown else None
    lo, t_min, t_max = parser.lo, now - parser.max_age, now + parser.ahead
    maxlen = parser.maxlen
    k_time, k_path, k_cache, k_status = parser.k_time, parser.k_path, parser.k_cache, parser.k_status
    k_edge, k_origin, k_node, k_route = parser.k_edge, parser.k_origin, parser.k_node, parser.k_route
    k_trace, k_request = parser.k_trace, parser.k_request
    edge_unit, origin_unit, file_node = parser.edge_unit, parser.origin_unit, parser.node
    upper: dict[str, str] = {}
    new, rec = tuple.__new__, EdgeRecord  # the named tuple's own __new__ is a Python function: skipped
    for i, line in enumerate(lines):
        try:
            doc = loads(line)
        except orjson.JSONDecodeError:
            if line and not line.isspace():  # blank lines are skipped, not counted
                out.not_json += 1
            continue
        try:
            if not fast or type(doc) is not dict or (known is not None and not known(doc)):
                append(parse(doc, where, now))
                continue
            get = doc.get
            at = get(k_time)
            path = get(k_path)
            cache = get(k_cache)
            status = get(k_status)
            if (
                type(at) is not float
                or not (t_min <= at < t_max and at > lo)
                or type(path) is not str
                or len(path) > maxlen
                or "?" in path
                or type(status) is not int
                or not 100 <= status <= 599
            ):
                append(parse(doc, where, now))
                continue
            if type(cache) is str and len(cache) <= 32:
                c = upper.get(cache)
                if c is None:
                    c = upper[cache] = "" if cache == "-" else cache.upper()
                cache = c
            elif cache is None:
                cache = ""
            else:
                append(parse(doc, where, now))
                continue
            edge_s = None
            if k_edge is not None:
                e = get(k_edge)
                if type(e) is float and 0.0 <= e <= _DAY:
                    edge_s = e * edge_unit
                elif e is not None:
                    append(parse(doc, where, now))
                    continue
            origin_s = None
            if k_origin is not None:
                o = get(k_origin)
                if o is None or o == "-" or o == "":
                    pass
                elif type(o) is str or type(o) is float:
                    try:
                        origin_s = float(o) * origin_unit
                    except ValueError:  # "0.012, 0.034" (two upstreams) and the like
                        origin_s = -1.0
                    if not 0.0 <= origin_s <= _DAY:  # also NaN
                        append(parse(doc, where, now))
                        continue
                else:
                    append(parse(doc, where, now))
                    continue
            node = file_node
            if node is None:
                n = get(k_node) if k_node else None
                if n is None or n == "":
                    node = "edge"
                elif type(n) is str and len(n) <= maxlen:
                    node = n
                else:
                    append(parse(doc, where, now))
                    continue
            route = None
            if k_route:
                v = get(k_route)
                if v is None or v == "" or v == "-":
                    pass
                elif type(v) is str and len(v) <= maxlen:
                    route = v
                else:
                    append(parse(doc, where, now))
                    continue
            request_id = None
            if k_request:
                v = get(k_request)
                if v is None or v == "" or v == "-":
                    pass
                elif type(v) is str and len(v) <= maxlen:
                    request_id = v
                else:
                    append(parse(doc, where, now))
                    continue
            trace_id = None
            if k_trace:
                v = get(k_trace)
                if v is None or v == "" or v == "-":
                    pass
                elif type(v) is str and len(v) <= maxlen:
                    tid = v.lower()
                    if len(tid) == 55 and tid[2] == "-" and tid[35] == "-":  # traceparent: 00-<trace>-<span>-01
                        tid = tid[3:35]
                    if len(tid) == 32 and tid != _ZERO_TRACE and _HEX.issuperset(tid):
                        trace_id = tid
                    elif request_id is None:
                        request_id = v  # another width: an opaque request id, never refused
                else:
                    append(parse(doc, where, now))
                    continue
            append(new(rec, (at, path, cache, edge_s, origin_s, status, node, trace_id, request_id, route)))
        except EventError as exc:
            out.invalid.append((i, exc))
    return out
