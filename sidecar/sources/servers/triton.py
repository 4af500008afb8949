"""Triton Inference Server: the classic per-model counters, the opt-in first-response histogram, and the
pending-request gauge.

Names, types and units read from triton-inference-server/core ``src/metrics.cc`` and
``src/metric_model_reporter.h`` at commit 73aad7c3348d040c7087d57837d75822c488495e: counters in microseconds
(``nv_inference_*_duration_us``), ``nv_inference_first_response_histogram_ms`` (a histogram in milliseconds,
``--metrics-config histogram_latencies=true``, default buckets 100, 500, 2000, 5000). Labels ``model`` and
``version``. The first response of a decoupled (streaming) model is its first chunk, not its first token: it is
its own SLI, never called time to first token.

The TensorRT-LLM backend's families read from triton-inference-server/tensorrtllm_backend
``inflight_batcher_llm/src/custom_metrics_reporter/custom_metrics_reporter.cc`` at commit
7f9aa4680aafaebce2d7576b5a40d5ddc7c3cbaa: gauges labelled ``model``, ``version`` and a category
(``request_type``: active, max, scheduled, context; ``kv_cache_block_type``: max, free, used, ...). In flight is
the active request count; the KV-cache usage is used blocks over max blocks.

Triton's vLLM backend, read from triton-inference-server/vllm_backend ``src/utils/metrics.py`` at commit
2b3cb9306214c290f4b42522080329fd1a35957d: ``vllm:prompt_tokens_total`` and ``vllm:generation_tokens_total``
(counters declared with their ``_total``), ``vllm:time_to_first_token_seconds`` and
``vllm:time_per_output_token_seconds`` (observed with vLLM's inter-token latencies, so the inter-token SLI),
labelled ``model`` and ``version`` (``src/model.py``).

Classic counters give averages only: latency and queue time are the duration counters over success + failure
requests, compute time over successful ones, the batch size inferences over executions.
"""

from __future__ import annotations

from types import MappingProxyType

from sidecar.sources.servers.profile import MS, REQUESTS, US, Profile, Rule
from sidecar.sources.servers.schema import Counter, DistName, Gauge

__all__ = ["PROFILE", "RULES"]

_WHY = MappingProxyType({"REJECTED": "failure", "CANCELED": "aborted", "BACKEND": "failure", "OTHER": "failure"})
_E2E, _QUEUE, _COMPUTE = DistName.REQUEST_DURATION, DistName.QUEUE_DURATION, DistName.COMPUTE_DURATION

RULES = (
    Rule("nv_inference_request_success", "counter", REQUESTS, outcome="success"),
    # Failures carry ``reason`` (REJECTED, CANCELED, BACKEND, OTHER) since Triton 24.x; older ones have none.
    Rule("nv_inference_request_failure", "counter", REQUESTS, outcome="failure", outcome_label="reason", outcomes=_WHY),
    Rule("nv_inference_request_success", "counter", _E2E, part="count"),
    Rule("nv_inference_request_failure", "counter", _E2E, part="count"),
    Rule("nv_inference_request_duration_us", "counter", _E2E, part="sum", scale=US),
    Rule("nv_inference_request_success", "counter", _QUEUE, part="count"),
    Rule("nv_inference_request_failure", "counter", _QUEUE, part="count"),
    Rule("nv_inference_queue_duration_us", "counter", _QUEUE, part="sum", scale=US),
    Rule("nv_inference_request_success", "counter", _COMPUTE, part="count"),
    Rule("nv_inference_compute_infer_duration_us", "counter", _COMPUTE, part="sum", scale=US),
    Rule("nv_inference_count", "counter", DistName.BATCH_SIZE, part="sum"),
    Rule("nv_inference_exec_count", "counter", DistName.BATCH_SIZE, part="count"),
    Rule("nv_inference_pending_request_count", "gauge", Gauge.WAITING),
    Rule("nv_inference_first_response_histogram_ms", "histogram", DistName.FIRST_RESPONSE, scale=MS),
    # vLLM backend (src/utils/metrics.py): token counters and the TTFT and inter-token histograms, labelled
    # model/version by Triton. Its e2e histogram is not read: the request duration comes from Triton's counters.
    Rule("vllm:prompt_tokens", "counter", Counter.INPUT_TOKENS),
    Rule("vllm:generation_tokens", "counter", Counter.OUTPUT_TOKENS),
    Rule("vllm:time_to_first_token_seconds", "histogram", DistName.TIME_TO_FIRST_TOKEN),
    Rule("vllm:time_per_output_token_seconds", "histogram", DistName.INTER_TOKEN_LATENCY),
    Rule("vllm:request_prompt_tokens", "histogram", DistName.INPUT_TOKENS_PER_REQUEST),
    Rule("vllm:request_generation_tokens", "histogram", DistName.OUTPUT_TOKENS_PER_REQUEST),
    # TensorRT-LLM backend (NVIDIA/TensorRT-LLM triton_backend/.../custom_metrics_reporter.cc): tokens per
    # response, buckets 10, 50, 100, 500, 1000, labelled response_metric_type (one value each).
    Rule("nv_llm_input_token_len", "histogram", DistName.INPUT_TOKENS_PER_REQUEST),
    Rule("nv_llm_output_token_len", "histogram", DistName.OUTPUT_TOKENS_PER_REQUEST),
    # TensorRT-LLM backend: gauges whose meaning is a label value (custom_metrics_reporter.cc).
    Rule("nv_trt_llm_request_metrics", "gauge", Gauge.IN_FLIGHT, where=(("request_type", "active"),)),
    Rule(
        "nv_trt_llm_kv_cache_block_metrics",
        "gauge",
        Gauge.KV_CACHE_USAGE,
        part="num",
        where=(("kv_cache_block_type", "used"),),
    ),
    Rule(
        "nv_trt_llm_kv_cache_block_metrics",
        "gauge",
        Gauge.KV_CACHE_USAGE,
        part="den",
        where=(("kv_cache_block_type", "max"),),
    ),
)

PROFILE = Profile(
    name="triton",
    rules=RULES,
    source="triton-inference-server/core src/metrics.cc",
)
