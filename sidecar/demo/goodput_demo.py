"""The demo's goodput section (``checks.goodput``) for its streaming model, ``chat``.

The SLO: time to first token at most 350 ms and a mean inter-token gap at most 60 ms. Before the prompt change
``chat``'s prompts are ~48 tokens (first token after ~140 ms, plus Triton's and the client's share); after it
~248 tokens (~540 ms), so every request misses the TTFT bound. The burn-rate pair is scaled to the demo's
minutes (the defaults' 1 h / 5 min would take an hour to say anything): 95% objective (a 5% budget), 5-minute
and 1-minute windows, fired at 5 times the budget, i.e. once over a quarter of the last five minutes' requests
missed. Buckets are 10 s wide: a window counts whole buckets, so with 60 s buckets the 1-minute window would
at times hold only the minute just begun (too few requests to judge).
"""

from __future__ import annotations

from typing import Any

from sidecar.demo.scenario import LLM_MODEL

__all__ = ["DEMO_GOODPUT", "DEMO_TOKENS", "GOODPUT_TTFT_MS"]

GOODPUT_TTFT_MS = 350.0

DEMO_GOODPUT: dict[str, Any] = {
    "enabled": True,
    "slos": {LLM_MODEL: {"ttft_ms": GOODPUT_TTFT_MS, "inter_token_ms": 60.0}},
    "objective": 0.95,
    "burn_windows": [{"long_secs": 300, "short_secs": 60, "factor": 5, "severity": "warning"}],
    "span_names": [],
    "bucket_secs": 10.0,
    "min_requests": 20,
}

# The token-length drift check (``checks.tokens``) on the same events' ``tokens_in`` / ``tokens_out``: one-minute
# windows (about 60 requests each at the demo's one stream a second), the first 120 requests (two minutes, well
# before the prompt change) as the reference.
DEMO_TOKENS: dict[str, Any] = {
    "enabled": True,
    "histograms": False,
    "events": True,
    "span_names": [],
    "window_secs": 60.0,
    "min_requests": 50,
    "reference": {"mode": "pinned", "pinned_requests": 120},
}
