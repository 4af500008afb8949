"""A streamed request's figures as the caller reports them: what the demo's traffic measures and its replay
computes from the streaming model's script, in one place (the goodput and token-length checks read them)."""

from __future__ import annotations

__all__ = ["stream_fields"]


def stream_fields(prompt_tokens: int, t0: float, stamps: list[float], end: float) -> dict[str, float]:
    """A streamed request's figures as event ``fields`` (what the goodput check reads), from the times (seconds)
    it was sent, each token arrived, and the stream ended."""
    fields = {
        "ttft_ms": (stamps[0] - t0) * 1000.0,
        "tokens_in": float(prompt_tokens),
        "tokens_out": float(len(stamps)),
        "latency_ms": (end - t0) * 1000.0,
    }
    if len(stamps) > 1:
        fields["inter_token_ms"] = (stamps[-1] - stamps[0]) * 1000.0 / (len(stamps) - 1)
    return {k: round(v, 3) for k, v in fields.items()}
