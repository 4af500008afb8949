"""Triton trace records grouped into requests: timestamps, the model record and TENSORS rows of one trace id.

A request's records may straddle two reads or two rotated files, so requests are assembled across reads and
handed on once complete. What is kept per request is bounded (timestamp names, tensor count, string length), and
every value that would become a time, a label or an array size is range-checked here, so what follows never sees
a value it could crash on.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sidecar.probe_marker import PROBE_REQUEST_PREFIX
from sidecar.sources.trace_files.typed import MAX_NS, MAX_STAMP_NAME, UNSET, Rec, RecMany

__all__ = ["MAX_NS", "MAX_STAMP_NAME", "Assembler", "ProbeFilter", "Request", "complete", "probably_complete"]

MAX_STAMPS = 64  # distinct timestamp names kept per request (Triton writes 17 at most)
MAX_TENSORS = 64  # tensors kept per request
MAX_REPEATS = 16384  # times kept per repeated timestamp name (a decoupled model's responses) per request


@dataclass(slots=True)
class Request:
    tid: int
    stamps: dict[str, int] = field(default_factory=dict)
    model: str = ""
    version: str = ""
    request_id: str = ""
    parent_id: int | None = None
    tensors: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> {"data", "shape"} as written
    has_model: bool = False
    # Every time of a name written more than once, in file order (``stamps`` keeps the last): a decoupled
    # model's trace repeats GRPC_SEND_START/END (HTTP_SEND_*) once per response. None when nothing repeats.
    # Not compared: two requests are the same request whatever of their repeats was kept.
    repeats: dict[str, list[int]] | None = field(default=None, compare=False)

    def to_json(self) -> list[Any]:
        return [
            self.tid,
            self.stamps,
            self.model,
            self.version,
            self.request_id,
            self.parent_id,
            self.tensors,
            self.has_model,
            self.repeats,
        ]

    @classmethod
    def from_json(cls, v: list[Any]) -> Request:
        tid, stamps, model, version, request_id, parent_id, tensors, has_model = v[:8]
        repeats = v[8] if len(v) > 8 and isinstance(v[8], dict) else None  # absent in state written before
        return cls(
            int(tid),
            {str(k): int(x) for k, x in stamps.items()},
            str(model),
            str(version),
            str(request_id),
            parent_id if isinstance(parent_id, int) else None,
            dict(tensors),
            bool(has_model),
            {str(k): [int(x) for x in xs] for k, xs in repeats.items()} if repeats else None,
        )

    def times_of(self, name: str) -> list[int]:
        """Every time of ``name`` in file order (one at most unless it was repeated)."""
        if self.repeats is not None and name in self.repeats:
            return self.repeats[name]
        t = self.stamps.get(name)
        return [] if t is None else [t]


_NOBODY = Request(-1)  # ``add``'s "no previous request" (never a trace id: those are >= 0; never written to)


def complete(req: Request) -> bool:
    """Whether the request's last record is in: the model's REQUEST_END and, for a request that came over
    HTTP or gRPC, the frontend's SEND_END (Triton writes it last or just after REQUEST_END)."""
    s = req.stamps
    if "REQUEST_END" not in s:
        return False
    if req.parent_id is not None:
        return True  # a composing model's request: the frontend events are on its parent
    if "HTTP_RECV_START" in s:
        return "HTTP_SEND_END" in s
    if "GRPC_WAITREAD_START" in s:
        return "GRPC_SEND_END" in s
    return True


def probably_complete(req: Request) -> bool:
    """Complete but for the frontend's SEND events, which some requests never get (the response was
    complete): taken once a whole poll added nothing to the request."""
    return "REQUEST_END" in req.stamps and "INFER_RESPONSE_COMPLETE" in req.stamps


def _id(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_NS else None


class Assembler:
    """Requests seen partly, oldest first, at most ``max_pending``; counts what it refuses in ``refused``."""

    def __init__(self, max_pending: int, max_string: int) -> None:
        self.max_pending = max_pending
        self.max_string = max_string
        self.pending: OrderedDict[int, Request] = OrderedDict()
        self.refused: dict[str, int] = {}

    def _refuse(self, reason: str, n: int = 1) -> None:
        self.refused[reason] = self.refused.get(reason, 0) + n

    def _text(self, v: object) -> str | None:
        s = "" if v is None else str(v)
        if len(s) > self.max_string:
            self._refuse("string_too_long")
            return None
        return s

    def add(self, records: Iterable[Any], into: dict[int, Request]) -> None:
        """Fold ``records`` into ``into`` (pulling requests pending from earlier reads).

        Written for speed (it runs for every record, about 13 a request): the checks of ``_id`` inlined, and
        the common record, one timestamp, taken without a call.
        """
        pending = self.pending
        last_tid, last_req = -1, _NOBODY  # the request of the previous tuple or struct record
        for r in records:
            if type(r) is Rec:  # a typed record (``scan(lean=True)``: typed.py), its values checked there
                tid = r.id
                if tid != last_tid:
                    got = into.get(tid)
                    if got is None:
                        got = pending.pop(tid, None) or Request(tid)
                        into[tid] = got
                    last_tid, last_req = tid, got
                one = r.timestamps
                if one is not None:  # Triton's commonest record
                    ts = one.ts
                    sn, sv = ts.name, ts.ns
                    have = last_req.stamps
                    if sn not in have:
                        if len(have) < MAX_STAMPS:
                            have[sn] = sv
                        else:
                            self._refuse("too_many_timestamps")
                    else:
                        self._repeat(last_req, sn, have[sn], sv)
                        have[sn] = sv
                if r.model_name is not UNSET or r.tensor is not None:
                    self._typed_rest(r, last_req)
                continue
            if type(r) is RecMany:  # the same with any number of timestamps
                last_tid = r.id
                last_req = into.get(last_tid) or pending.pop(last_tid, None) or Request(last_tid)
                into[last_tid] = last_req
                if r.timestamps is not None:
                    self._stamps([{"name": ts.name, "ns": ts.ns} for ts in r.timestamps], last_req)
                if r.model_name is not UNSET or r.tensor is not None:
                    self._typed_rest(r, last_req)
                continue
            if type(r) is tuple:  # (trace id, name, ns) of a one-timestamp record (``scan(lean=True)``)
                tid, name, ns = r  # both within 0..MAX_NS, the name a short ASCII word: the scan's regex
                if tid != last_tid:
                    got = into.get(tid)
                    if got is None:
                        got = pending.pop(tid, None) or Request(tid)
                        into[tid] = got
                    last_tid, last_req = tid, got
                have = last_req.stamps
                prev = have.get(name)
                if prev is not None:
                    self._repeat(last_req, name, prev, ns)
                    have[name] = ns
                elif len(have) < MAX_STAMPS:
                    have[name] = ns
                else:
                    self._refuse("too_many_timestamps")
                continue
            last_tid = -1  # a dict record may add a request under any id: look the next one up again
            tid = r.get("id")
            # (an int subclass that is not a bool is still an id)
            if (type(tid) is not int or not 0 <= tid <= MAX_NS) and _id(tid) is None:
                self._refuse("bad_id")
                continue
            req = into.get(tid)
            if req is None:
                req = pending.pop(tid, None) or Request(tid)
                into[tid] = req
            stamps = r.get("timestamps")
            if stamps is not None:
                if type(stamps) is list and len(stamps) == 1 and type(ts := stamps[0]) is dict:
                    ns, name = ts.get("ns"), ts.get("name")
                    have = req.stamps
                    if (
                        type(ns) is int
                        and 0 <= ns <= MAX_NS
                        and type(name) is str
                        and len(name) <= MAX_STAMP_NAME
                        and name not in have
                        and len(have) < MAX_STAMPS
                    ):
                        have[name] = ns
                    else:
                        self._stamps(stamps, req)
                else:
                    self._stamps(stamps, req)
                if len(r) == 2:
                    continue  # {"id", "timestamps"}: nothing more in it
            if "model_name" in r:
                model, version = self._text(r["model_name"]), self._text(r.get("model_version", ""))
                rid = self._text(r.get("request_id") or "")
                if model is not None and version is not None and rid is not None:
                    req.model, req.version, req.request_id, req.has_model = model, version, rid, True
                    if _id(r.get("parent_id")) is not None:
                        req.parent_id = r["parent_id"]
            tensor = r.get("tensor")
            if isinstance(tensor, dict) and "name" in tensor:
                name = self._text(tensor["name"])
                if name is None:
                    continue
                if name not in req.tensors and len(req.tensors) >= MAX_TENSORS:
                    self._refuse("too_many_tensors")
                    continue
                req.tensors[name] = {"data": tensor.get("data"), "shape": tensor.get("shape", "")}

    def _typed_rest(self, r: Rec | RecMany, req: Request) -> None:
        """A typed record's model and tensor fields, as ``add`` takes a dict record's (``_text`` inlined:
        the values are already str, or None, or an int version)."""
        limit = self.max_string
        model = r.model_name
        if model is not UNSET:
            v = r.model_version
            model = model or ""
            version = "" if v is None else v if type(v) is str else str(v)
            rid = r.request_id or ""
            ok = True
            for text in (model, version, rid):
                if len(text) > limit:
                    self._refuse("string_too_long")
                    ok = False
            if ok:
                req.model, req.version, req.request_id, req.has_model = model, version, rid, True
                if r.parent_id is not None:
                    req.parent_id = r.parent_id
        tensor = r.tensor
        if tensor is not None:
            name = tensor.name
            if len(name) > limit:
                self._refuse("string_too_long")
                return
            if name not in req.tensors and len(req.tensors) >= MAX_TENSORS:
                self._refuse("too_many_tensors")
                return
            req.tensors[name] = {"data": tensor.data, "shape": tensor.shape}

    def _stamps(self, stamps: object, req: Request) -> None:
        if not isinstance(stamps, list):
            return
        for ts in stamps:
            if not isinstance(ts, dict):
                continue
            ns, name = _id(ts.get("ns")), ts.get("name")
            if ns is None or not isinstance(name, str) or len(name) > MAX_STAMP_NAME:
                self._refuse("bad_timestamp")
                continue
            prev = req.stamps.get(name)
            if prev is not None:
                self._repeat(req, name, prev, ns)
            elif len(req.stamps) >= MAX_STAMPS:
                self._refuse("too_many_timestamps")
                continue
            req.stamps[name] = ns

    def _repeat(self, req: Request, name: str, prev: int, ns: int) -> None:
        """Keep ``ns``, a further time of ``name`` (whose time so far was ``prev``), in ``req.repeats``."""
        repeats = req.repeats
        if repeats is None:
            req.repeats = {name: [prev, ns]}
            return
        times = repeats.get(name)
        if times is None:
            repeats[name] = [prev, ns]
        elif len(times) < MAX_REPEATS:
            times.append(ns)
        else:
            self._refuse("too_many_repeats")

    def settle(self, grouped: dict[int, Request], quiet: bool) -> tuple[list[Request], int]:
        """The requests ready after a pass that added ``grouped``; the rest wait in ``pending``.

        Returns (ready, dropped). Ready: complete by their timestamps; and when ``quiet`` (no file holds a
        record still being written), requests a whole poll added nothing to that are probably complete, or
        carry no timestamps at all (level=TENSORS alone: nothing says they ended; Triton writes a trace's
        records together).
        """
        ready: list[Request] = []
        if quiet:
            ready = [q for q in self.pending.values() if not q.stamps or probably_complete(q)]
            for q in ready:
                del self.pending[q.tid]
        dropped = 0
        for q in grouped.values():
            if complete(q):
                ready.append(q)
                continue
            self.pending[q.tid] = q
            if len(self.pending) > self.max_pending:
                self.pending.popitem(last=False)
                dropped += 1
        return ready, dropped

    def drain_old(self) -> list[Request]:
        """When more than half full, the oldest partial requests: they will not complete (their files are done)."""
        out: list[Request] = []
        while len(self.pending) > self.max_pending // 2:
            out.append(self.pending.popitem(last=False)[1])
        return out


class ProbeFilter:
    """Leaves out the model probe's requests (``sidecar.probe_marker``: a request id starting
    ``sidecar-probe-``) and the composing requests under them (``parent_id``), before they become spans, stage
    observations or tensor events. Remembers the last ``remember`` probe trace ids, so a composing request
    read in a later pass than its parent is still known for one."""

    def __init__(self, remember: int = 4096) -> None:
        self.remember = remember
        self._tids: OrderedDict[int, None] = OrderedDict()

    def split(self, reqs: list[Request]) -> tuple[list[Request], list[Request]]:
        """(the requests to keep, the probe's requests)."""
        tids = self._tids
        probes = [q for q in reqs if q.request_id.startswith(PROBE_REQUEST_PREFIX)]
        if not probes and not tids:
            return reqs, []
        for q in probes:
            tids[q.tid] = None
        while len(tids) > self.remember:
            tids.popitem(last=False)
        kept: list[Request] = []
        dropped: list[Request] = []
        for q in reqs:
            probe = q.request_id.startswith(PROBE_REQUEST_PREFIX) or (q.parent_id is not None and q.parent_id in tids)
            (dropped if probe else kept).append(q)
        return kept, dropped
