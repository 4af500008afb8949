"""Per-request LLM figures from an event's ``fields``: time to first token, mean inter-token latency and output
tokens, and the verdict of a request against an SLO.

Field names (docs/events.md, ``fields``): ``ttft_ms``, ``inter_token_ms`` (or ``tpot_ms``), ``tokens_out``,
``latency_ms``. Without an inter-token figure it is derived as ``(latency_ms - ttft_ms) / (tokens_out - 1)``
when all three are there and ``tokens_out > 1`` (the mean gap between tokens after the first).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from sidecar.checks.goodput.config import RequestSlo

__all__ = ["SLO_NAMES", "RequestFigures", "figures", "judge", "span_fields"]

SLO_NAMES = ("ttft", "inter_token", "e2e")


def _num(fields: Mapping[str, float], name: str) -> float | None:
    v = fields.get(name)
    if v is None or not isinstance(v, int | float) or isinstance(v, bool) or not math.isfinite(v) or v < 0:
        return None
    return float(v)


@dataclass(frozen=True, slots=True)
class RequestFigures:
    ttft_ms: float | None
    inter_token_ms: float | None
    tokens_out: float | None
    e2e_ms: float | None


def figures(fields: Mapping[str, float]) -> RequestFigures:
    ttft, tokens, e2e = _num(fields, "ttft_ms"), _num(fields, "tokens_out"), _num(fields, "latency_ms")
    itl = _num(fields, "inter_token_ms")
    if itl is None:
        itl = _num(fields, "tpot_ms")
    if itl is None and ttft is not None and e2e is not None and tokens is not None and tokens > 1 and e2e >= ttft:
        itl = (e2e - ttft) / (tokens - 1)
    return RequestFigures(ttft, itl, tokens, e2e)


def judge(fig: RequestFigures, slo: RequestSlo) -> tuple[bool, tuple[str, ...]] | None:
    """(good, the SLOs missed), or None when a figure an SLO bound needs is missing (the request is not judged)."""
    missed: list[str] = []
    for name, value, bound in (
        ("ttft", fig.ttft_ms, slo.ttft_ms),
        ("inter_token", fig.inter_token_ms, slo.inter_token_ms),
        ("e2e", fig.e2e_ms, slo.e2e_ms),
    ):
        if bound is None:
            continue
        if value is None:
            if name == "inter_token" and fig.tokens_out is not None and fig.tokens_out <= 1:
                continue  # one token (or none): no gap between tokens to judge
            return None
        if value > bound:
            missed.append(name)
    return not missed, tuple(missed)


# vLLM's request span (vllm/tracing.py SpanAttributes): latencies in seconds; token counts under the older
# ``completion_tokens`` name or the semantic conventions' ``output_tokens``.
_SPAN_SECS = (("gen_ai.latency.time_to_first_token", "ttft_ms"), ("gen_ai.latency.e2e", "latency_ms"))
_SPAN_TOKENS = ("gen_ai.usage.completion_tokens", "gen_ai.usage.output_tokens")


def span_fields(attributes: Mapping[str, object]) -> dict[str, float]:
    """An LLM request span's attributes as event ``fields`` (ms and tokens); what is not a number is left out."""
    out: dict[str, float] = {}
    for attr, name in _SPAN_SECS:
        v = attributes.get(attr)
        if isinstance(v, int | float) and not isinstance(v, bool):
            out[name] = float(v) * 1000.0
    for attr in _SPAN_TOKENS:
        v = attributes.get(attr)
        if isinstance(v, int | float) and not isinstance(v, bool):
            out["tokens_out"] = float(v)
            break
    return out
