"""The stage values of whole requests (a trace file's root, model and ``compute`` spans, stored together), taken
as the requests are stored rather than queued as three jobs each (``stage_batch.Jobs``) and read back at the end
of the batch.

``StageHistograms.on_trios`` hands a batch's such requests to ``take``, one loop over them: each request's seven
stage values (ns, or None where the pair of events is missing or out of order) go into one flat list with its
arrival number and trace, nine slots a request, and ``Trios.values`` slices each stage's column out of it at the
end of the batch.
The values are those of the three jobs ``on_stored`` would have queued (the same events, alternatives and order
test as ``stages._spec_into`` and ``stages._queue_secs``), numbered as they would have been: the request job at
the request's number, its parent job two after, its compute job three after. A (model, version)'s requests come
here only while it has no queued job in the batch (``Jobs``), so each of its series gets these values first and
the queued jobs' after, in arrival order, as when each was observed on the spot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from sidecar.records import EVENTS, MODEL, SPAN, Record

if TYPE_CHECKING:
    from sidecar.state.trace_entry import TraceEntry

__all__ = ["WIDTH", "Trios", "take", "take_stamps"]

# Slots per request: its arrival number, its trace, then its seven stages in ``stage_series.STAGES`` order
# (network_receive, queue, compute_input, compute_infer, compute_output, send, request).
WIDTH = 9
# Per stage (by index): how far its job's number is from the request's (request 0, parent 2, compute 3).
_JOB = (2, 3, 3, 3, 3, 2, 0)


class Queued(Protocol):
    """A (model, version)'s pairings in the batch (``stage_batch.Jobs``): the queued jobs and its ``Trios``."""

    request: list[Any]
    compute: list[Any]
    parent: list[Any]
    trio: Trios | None


class Trios:
    """One (model, version)'s whole requests in a batch (see the module docstring)."""

    __slots__ = ("flat", "gaps")

    def __init__(self) -> None:
        self.flat: list[Any] = []
        # Whether any stage of any request had no value (then ``values`` filters; else every column is whole).
        self.gaps = False

    def values(self) -> Iterator[tuple[int, list[int], list[TraceEntry], int]]:
        """(stage, ns values, their traces, the arrival number of the first value's job) per stage with values,
        in stage order."""
        flat = self.flat
        if not flat:
            return
        seqs = flat[0::WIDTH]
        es = flat[1::WIDTH]
        for i, job in enumerate(_JOB):
            col = flat[2 + i :: WIDTH]
            if not self.gaps or None not in col:
                yield i, col, es, seqs[0] + job
                continue
            keep = [k for k, v in enumerate(col) if v is not None]
            if keep:
                yield i, [col[k] for k in keep], [es[k] for k in keep], seqs[keep[0]] + job


def take(
    whole: list[tuple[TraceEntry, Record, Record, Record]],
    k: int,
    jobs_of: Callable[[tuple[str, str]], Queued],
    seq: int,
) -> tuple[int, int]:
    """Pair ``whole[k:]`` (entry, root, model span, compute span: new traces the store took whole) as
    ``StageHistograms.on_stored`` of each model and compute span would in a batch, from arrival number ``seq``:
    their values into their (model, version)'s ``Trios`` (``jobs_of``: its pairings in the batch), or their three
    jobs queued where it has queued jobs already. Stops at a trace whose events are not all dicts (the caller
    pairs it span by span); returns where it stopped and the next arrival number."""
    # Per (model, version) in this call: its pairings and its Trios (None: it has queued jobs, so its requests
    # are queued too).
    seen: dict[tuple[str, str], tuple[Queued, Trios | None]] = {}
    for k, (e, r0, r1, r2) in enumerate(whole[k:] if k else whole, k):  # noqa: B020
        m0, m1, m2 = r0[EVENTS], r1[EVENTS], r2[EVENTS]
        if type(m0) is not dict or type(m1) is not dict or type(m2) is not dict:
            return k, seq
        e.stage_compute = {r1[SPAN]: m2}
        seq = _one(e, m0, m1, m2, r1[MODEL], seen, jobs_of, seq)
    return len(whole), seq


def take_stamps(
    whole: list[tuple[TraceEntry, Mapping[str, int], tuple[str, str]]],
    jobs_of: Callable[[tuple[str, str]], Queued],
    seq: int,
) -> int:
    """``take`` of whole requests as the store takes a ``span_requests`` batch: (entry, the request's event times,
    its (model, version)). Each event name belongs to one of the three spans, so one mapping of all of them reads
    as each span's own (the times are Triton's, before the offset to Unix time: the stages are differences).
    The entry's ``stage_compute`` is set when its spans are built (``trace_requests.RequestEntry``). Returns the
    next arrival number."""
    seen: dict[tuple[str, str], tuple[Queued, Trios | None]] = {}
    for e, s, mv in whole:
        seq = _one(e, s, s, s, mv, seen, jobs_of, seq)
    return seq


def _one(
    e: TraceEntry,
    m0: Mapping[str, int],
    m1: Mapping[str, int],
    m2: Mapping[str, int],
    mv: tuple[str, str],
    seen: dict[tuple[str, str], tuple[Queued, Trios | None]],
    jobs_of: Callable[[tuple[str, str]], Queued],
    seq: int,
) -> int:
    """One request's stage values (root, model and compute span events ``m0``, ``m1``, ``m2``) into its (model,
    version)'s ``Trios``, or its three jobs queued; returns the next arrival number."""
    got = seen.get(mv)
    if got is None:
        jobs = jobs_of(mv)
        trio = None
        if not (jobs.request or jobs.compute or jobs.parent):
            trio = jobs.trio
            if trio is None:
                trio = jobs.trio = Trios()
        got = seen[mv] = (jobs, trio)
    jobs, trio = got
    if trio is None:
        jobs.request.append((seq, m1, e))
        jobs.parent.append((seq + 2, m0, e))
        jobs.compute.append((seq + 3, m1, m2, e))
        return seq + 6
    g = m1.get
    a = g("REQUEST_START")
    b = g("REQUEST_END")
    request = b - a if a is not None and b is not None and b >= a else None
    c = m2.get
    # As if the model and compute spans' events were one dict with the compute span's winning.
    a = c("QUEUE_START", g("QUEUE_START"))
    b = c("COMPUTE_START", g("COMPUTE_START"))
    queue = b - a if a is not None and b is not None and b >= a else None
    a = c("COMPUTE_START")
    b = c("COMPUTE_INPUT_END")
    c_in = b - a if a is not None and b is not None and b >= a else None
    a = b
    b = c("COMPUTE_OUTPUT_START")
    c_infer = b - a if a is not None and b is not None and b >= a else None
    a = b
    b = c("COMPUTE_END")
    c_out = b - a if a is not None and b is not None and b >= a else None
    p = m0.get
    a = p("HTTP_RECV_START")
    if a is None:
        a = p("GRPC_WAITREAD_START")
    b = p("HTTP_RECV_END")
    if b is None:
        b = p("GRPC_WAITREAD_END")
    net = b - a if a is not None and b is not None and b >= a else None
    a = p("HTTP_SEND_START")
    if a is None:
        a = p("GRPC_SEND_START")
    b = p("HTTP_SEND_END")
    if b is None:
        b = p("GRPC_SEND_END")
    send = b - a if a is not None and b is not None and b >= a else None
    if (
        request is None
        or queue is None
        or c_in is None
        or c_infer is None
        or c_out is None
        or net is None
        or send is None
    ):
        trio.gaps = True
    trio.flat += (seq, e, net, queue, c_in, c_infer, c_out, send, request)
    return seq + 6
