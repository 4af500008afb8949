"""The stage values of whole requests (a trace file's root, model and ``compute`` spans, stored together), taken
as the requests are stored rather than queued as three jobs each (``stage_batch.Jobs``) and read back at the end
of the batch.

``StageHistograms.on_trio`` hands each such request here while its three event dicts are at hand: its seven stage
values (ns, or None where the pair of events is missing or out of order) go into one flat list with the request's
arrival number and trace, nine slots a request, and ``values`` slices each stage's column out of it at the end.
The values are those of the three jobs ``on_stored`` would have queued (the same events, alternatives and order
test as ``stages._spec_into`` and ``stages._queue_secs``), numbered as they would have been: the request job at
the request's number, its parent job two after, its compute job three after. A (model, version)'s requests come
here only while it has no queued job in the batch (``Jobs``), so each of its series gets these values first and
the queued jobs' after, in arrival order, as when each was observed on the spot.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sidecar.state.trace_entry import TraceEntry

__all__ = ["WIDTH", "Trios"]

# Slots per request: its arrival number, its trace, then its seven stages in ``stage_series.STAGES`` order
# (network_receive, queue, compute_input, compute_infer, compute_output, send, request).
WIDTH = 9
# Per stage (by index): how far its job's number is from the request's (request 0, parent 2, compute 3).
_JOB = (2, 3, 3, 3, 3, 2, 0)

Times = Mapping[str, int]


class Trios:
    """One (model, version)'s whole requests in a batch (see the module docstring)."""

    __slots__ = ("flat", "gaps")

    def __init__(self) -> None:
        self.flat: list[Any] = []
        # Whether any stage of any request had no value (then ``values`` filters; else every column is whole).
        self.gaps = False

    def add(self, seq: int, e: TraceEntry, root: Times, model: Times, compute: Times) -> None:
        """The request numbered ``seq`` of trace ``e``, from its three spans' event times."""
        g = model.get
        a = g("REQUEST_START")
        b = g("REQUEST_END")
        request = b - a if a is not None and b is not None and b >= a else None
        c = compute.get
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
        p = root.get
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
            self.gaps = True
        self.flat += (seq, e, net, queue, c_in, c_infer, c_out, send, request)

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
