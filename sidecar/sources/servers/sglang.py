"""SGLang (``--enable-metrics``).

Names, types, buckets and labels read from sgl-project/sglang ``python/sglang/srt/metrics/collector.py`` at
commit 93d04878cfb9b08645fae7b11bd340ee33b34acf (``SchedulerMetricsCollector``, ``TokenizerMetricsCollector``);
the label keys (``model_name``, ``engine_type``, and on the scheduler ``tp_rank``, ``pp_rank``) are set by the
scheduler and the tokenizer manager that build the collectors. SGLang has no version label: version is "".

The scheduler's gauges are written by every tensor/pipeline-parallel rank for the same batch, so ranks of one
model take the largest value, not the sum. Inter-token latency is observed per token: SGLang splits a step's
interval evenly over the tokens it emitted (``interval / num_new_tokens``, counted ``num_new_tokens`` times), so
tokens accepted together by speculative decoding count one each. Finished requests
(``sglang:num_requests_total``) are successes; aborted ones are counted apart; SGLang has no failure counter.
"""

from __future__ import annotations

from sidecar.sources.servers.profile import REQUESTS, Profile, Rule
from sidecar.sources.servers.schema import Counter, DistName, Gauge

__all__ = ["PROFILE"]

PROFILE = Profile(
    name="sglang",
    rules=(
        Rule("sglang:num_running_reqs", "gauge", Gauge.IN_FLIGHT, gauge_agg="max"),
        Rule("sglang:num_queue_reqs", "gauge", Gauge.WAITING, gauge_agg="max"),
        Rule("sglang:token_usage", "gauge", Gauge.KV_CACHE_USAGE, gauge_agg="max"),
        Rule("sglang:prompt_tokens", "counter", Counter.INPUT_TOKENS),
        Rule("sglang:generation_tokens", "counter", Counter.OUTPUT_TOKENS),
        Rule("sglang:num_requests", "counter", REQUESTS, outcome="success"),
        Rule("sglang:num_aborted_requests", "counter", REQUESTS, outcome="aborted"),
        Rule("sglang:time_to_first_token_seconds", "histogram", DistName.TIME_TO_FIRST_TOKEN, unit="seconds"),
        Rule("sglang:inter_token_latency_seconds", "histogram", DistName.INTER_TOKEN_LATENCY, unit="seconds"),
        Rule("sglang:e2e_request_latency_seconds", "histogram", DistName.REQUEST_DURATION, unit="seconds"),
        Rule("sglang:queue_time_seconds", "histogram", DistName.QUEUE_DURATION, unit="seconds"),
        # Tokens per finished request (only with --collect-tokens-histogram; buckets --prompt-tokens-buckets).
        Rule("sglang:prompt_tokens_histogram", "histogram", DistName.INPUT_TOKENS_PER_REQUEST),
        Rule("sglang:generation_tokens_histogram", "histogram", DistName.OUTPUT_TOKENS_PER_REQUEST),
    ),
    model_label="model_name",
    version_label=None,
    source="sgl-project/sglang python/sglang/srt/metrics/collector.py@93d04878cfb9b08645fae7b11bd340ee33b34acf",
)
