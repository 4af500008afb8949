"""Hugging Face Text Generation Inference (the router's /metrics, Rust ``metrics`` crate with
``metrics-exporter-prometheus``).

Names, types, units and buckets read from huggingface/text-generation-inference at commit
db931fcf42da018a3657580c64bf2720f167f9ab: ``router/src/server.rs`` (``tgi_request_success``,
``tgi_request_duration`` and the other request histograms, in seconds, 35 geometric buckets from 0.00015 s;
``tgi_request_input_length`` / ``tgi_request_generated_tokens`` per request), ``router/src/infer/mod.rs`` and
``backends/v3/src`` (``tgi_request_failure{err}``, ``tgi_queue_size``, ``tgi_batch_current_size``,
``tgi_batch_next_size``). TGI serves one model and labels none: the model is reported as "default".

``tgi_request_mean_time_per_token_duration`` is the inference time over the generated tokens, so it includes the
prefill: it is reported as ``gen_ai.server.time_per_output_token`` with that caveat. TGI has no time to first
token nor inter-token latency family.
"""

from __future__ import annotations

from sidecar.sources.servers.profile import REQUESTS, Profile, Rule
from sidecar.sources.servers.schema import Counter, DistName, Gauge

__all__ = ["PROFILE"]

PROFILE = Profile(
    name="tgi",
    rules=(
        Rule("tgi_request_success", "counter", REQUESTS, outcome="success"),
        Rule("tgi_request_failure", "counter", REQUESTS, outcome="failure"),
        Rule("tgi_request_duration", "histogram", DistName.REQUEST_DURATION),
        Rule("tgi_request_queue_duration", "histogram", DistName.QUEUE_DURATION),
        Rule("tgi_request_inference_duration", "histogram", DistName.COMPUTE_DURATION),
        Rule("tgi_request_mean_time_per_token_duration", "histogram", DistName.TIME_PER_OUTPUT_TOKEN),
        Rule("tgi_request_input_length", "histogram", Counter.INPUT_TOKENS, part="sum"),
        Rule("tgi_request_generated_tokens", "histogram", Counter.OUTPUT_TOKENS, part="sum"),
        Rule("tgi_request_input_length", "histogram", DistName.INPUT_TOKENS_PER_REQUEST),
        Rule("tgi_request_generated_tokens", "histogram", DistName.OUTPUT_TOKENS_PER_REQUEST),
        Rule("tgi_batch_next_size", "histogram", DistName.BATCH_SIZE),
        Rule("tgi_queue_size", "gauge", Gauge.WAITING),
        Rule("tgi_batch_current_size", "gauge", Gauge.IN_FLIGHT),
    ),
    model_label=None,
    version_label=None,
    source="huggingface/text-generation-inference router/src/server.rs@db931fcf42da018a3657580c64bf2720f167f9ab",
)
