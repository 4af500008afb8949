"""Per-request figures of a decoupled (streaming) model's trace: time to first response, the gaps between
responses, how many there were.

Triton 2.51 writes, for a request to a decoupled model, one ``GRPC_SEND_START``/``GRPC_SEND_END`` pair
(``HTTP_SEND_*`` over HTTP) per response and one ``INFER_RESPONSE_COMPLETE`` (the first response's); the
request was read off the wire at ``GRPC_WAITREAD_END`` (``HTTP_RECV_END``). So, per request with more than one
response:

- time to first response: the first ``*_SEND_START`` minus the receive end (``REQUEST_START`` without one);
- the gaps: between consecutive ``*_SEND_START``;
- the end-to-end figure: the last response's ``*_SEND_START`` minus the same receive end, so that
  ``(e2e - ttft) / (responses - 1)`` is exactly the mean gap.

A trace does not say which response was an empty final one (a client that asked for it, tritonclient's
``enable_empty_final_response``); with ``empty_final_response`` the last response of every stream is taken
for one and left out of the figures (it is still in ``triton.response_count``).

The figures go on a span named ``llm_request`` (the goodput check's default ``span_names``) under the
request's root, with the attribute names the goodput check reads (vLLM's request span:
``gen_ai.latency.time_to_first_token`` and ``gen_ai.latency.e2e`` in seconds, ``gen_ai.usage.output_tokens``,
``gen_ai.request.model``/``gen_ai.response.model``); a response counts as one output token, as Triton's
streaming LLM backends send them.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from sidecar.sources.trace_files.requests import Request

__all__ = ["SPAN_NAME", "StreamFigures", "stream_figures"]

SPAN_NAME = "llm_request"
_SENDS = ("GRPC_SEND_START", "HTTP_SEND_START")
_RECEIVED = ("GRPC_WAITREAD_END", "HTTP_RECV_END", "REQUEST_START")


@dataclass(frozen=True, slots=True)
class StreamFigures:
    received_ns: int  # the request read off the wire (Triton's clock)
    responses: tuple[int, ...]  # each counted response's *_SEND_START, in time order
    written: int  # responses Triton wrote, an empty final one included

    @property
    def ttft_ns(self) -> int:
        return self.responses[0] - self.received_ns

    @property
    def e2e_ns(self) -> int:
        return self.responses[-1] - self.received_ns

    @property
    def gaps_ns(self) -> list[int]:
        r = self.responses
        return [b - a for a, b in itertools.pairwise(r)]


def stream_figures(q: Request, empty_final: bool = False) -> StreamFigures | None:
    """The figures of a request whose trace holds more than one response; None for any other."""
    if q.repeats is None:
        return None
    for name in _SENDS:
        sends = q.repeats.get(name)
        if sends:
            break
    else:
        return None
    received = next((q.stamps[n] for n in _RECEIVED if n in q.stamps), None)
    if received is None:
        return None
    ordered = sorted(sends)
    counted = ordered[:-1] if empty_final else ordered
    if not counted or counted[0] < received:
        return None  # a response before the request was read: not a trace of one request
    return StreamFigures(received, tuple(counted), len(ordered))
