"""vLLM (the v1 engine's Prometheus logger), current names and the renamed older ones.

Names, types and labels read from vllm-project/vllm ``vllm/v1/metrics/loggers.py`` (``PrometheusStatLogger``):
at commit a6f0308cfe806b7731ad4979c9bea6e470c35efd (``vllm:time_per_output_token_seconds``,
``vllm:gpu_cache_usage_perc``) and in a later version that renamed them (``vllm:inter_token_latency_seconds``,
``vllm:kv_cache_usage_perc``; "Deprecated in 0.11"). Every family carries ``model_name`` and ``engine``; engines
of one model are summed (a ratio: the largest is kept). vLLM has no version label: version is "".

Inter-token latency is observed once per engine step that emitted tokens for a request, so with speculative
decoding one observation can cover several accepted tokens; the per-token figure is
``gen_ai.server.time_per_output_token`` (``vllm:request_time_per_output_token_seconds``, per request).
"""

from __future__ import annotations

from types import MappingProxyType

from sidecar.sources.servers.profile import REQUESTS, Profile, Rule
from sidecar.sources.servers.schema import Counter, DistName, Gauge

__all__ = ["PROFILE", "RULES"]

_FINISHED = MappingProxyType(
    {"stop": "success", "length": "success", "repetition": "success", "abort": "aborted", "error": "failure"}
)

RULES = (
    Rule("vllm:num_requests_running", "gauge", Gauge.IN_FLIGHT),
    Rule("vllm:num_requests_waiting", "gauge", Gauge.WAITING),
    Rule("vllm:kv_cache_usage_perc", "gauge", Gauge.KV_CACHE_USAGE, gauge_agg="max"),
    Rule("vllm:gpu_cache_usage_perc", "gauge", Gauge.KV_CACHE_USAGE, gauge_agg="max"),
    Rule("vllm:num_preemptions", "counter", Counter.PREEMPTIONS),
    Rule("vllm:prompt_tokens", "counter", Counter.INPUT_TOKENS),
    Rule("vllm:generation_tokens", "counter", Counter.OUTPUT_TOKENS),
    Rule("vllm:request_success", "counter", REQUESTS, outcome_label="finished_reason", outcomes=_FINISHED),
    Rule("vllm:e2e_request_latency_seconds", "histogram", DistName.REQUEST_DURATION, unit="seconds"),
    Rule("vllm:request_queue_time_seconds", "histogram", DistName.QUEUE_DURATION, unit="seconds"),
    Rule("vllm:request_inference_time_seconds", "histogram", DistName.COMPUTE_DURATION, unit="seconds"),
    Rule("vllm:time_to_first_token_seconds", "histogram", DistName.TIME_TO_FIRST_TOKEN, unit="seconds"),
    Rule("vllm:inter_token_latency_seconds", "histogram", DistName.INTER_TOKEN_LATENCY, unit="seconds"),
    Rule("vllm:time_per_output_token_seconds", "histogram", DistName.INTER_TOKEN_LATENCY, unit="seconds"),
    Rule("vllm:request_time_per_output_token_seconds", "histogram", DistName.TIME_PER_OUTPUT_TOKEN, unit="seconds"),
    # Tokens per finished request, buckets build_1_2_5_buckets(max_model_len) (so they change with max_model_len).
    Rule("vllm:request_prompt_tokens", "histogram", DistName.INPUT_TOKENS_PER_REQUEST),
    Rule("vllm:request_generation_tokens", "histogram", DistName.OUTPUT_TOKENS_PER_REQUEST),
)

PROFILE = Profile(
    name="vllm",
    rules=RULES,
    model_label="model_name",
    version_label=None,
    renames=(
        ("vllm:time_per_output_token_seconds", "vllm:inter_token_latency_seconds"),
        ("vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc"),
    ),
    source="vllm-project/vllm vllm/v1/metrics/loggers.py",
)
