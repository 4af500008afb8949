"""Writes the server fixtures in this folder from each server's own metric definitions (run from the repo root:
``.venv/bin/python tests/data/servers/build_fixtures.py``).

Each family below is declared with the name, type, help, labels and buckets the server's source declares
(the source is cited in each fixture's header), and written with the same client library the server uses
(prometheus_client for vLLM) or in the same text shape (prometheus-cpp for Triton). The observed values are
made up and fixed, so the tests know the figures the mapping must produce.
"""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Summary, generate_latest

HERE = Path(__file__).resolve().parent
_CREATED = re.compile(r"(_created(?:\{[^}\n]*\})?) [0-9.e+]+\n")


def _fixed_created(text: str) -> str:
    """prometheus_client stamps each series' creation time; a fixed one keeps the fixtures stable."""
    return _CREATED.sub(r"\1 1.7e+09\n", text)


VLLM_CURRENT = """\
# Source: vllm-project/vllm vllm/v1/metrics/loggers.py, PrometheusStatLogger.__init__, the version the search
# index stores as text id 111449029 (the index gives no commit for it; it is the release that says
# "Deprecated in 0.11 - Renamed as vllm:inter_token_latency_seconds" and gauges vllm:kv_cache_usage_perc).
# Written by tests/data/servers/build_fixtures.py with prometheus_client, as vLLM writes it.
"""
VLLM_OLD = """\
# Source: vllm-project/vllm vllm/v1/metrics/loggers.py at commit a6f0308cfe806b7731ad4979c9bea6e470c35efd,
# PrometheusStatLogger.__init__ (vllm:gpu_cache_usage_perc, vllm:time_per_output_token_seconds,
# vllm:num_preemptions_total). Written by tests/data/servers/build_fixtures.py with prometheus_client.
"""
TRITON = """\
# Source: triton-inference-server/core src/metrics.cc and src/metric_model_reporter.{h,cc} at commit
# 73aad7c3348d040c7087d57837d75822c488495e (counter families, the failure reason label REJECTED/CANCELED/
# BACKEND/OTHER, nv_inference_pending_request_count, nv_inference_first_response_histogram_ms with its default
# buckets 100, 500, 2000, 5000). Written in prometheus-cpp's text shape by tests/data/servers/build_fixtures.py.
"""

TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0]
TTFT_BUCKETS += [20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
ITL_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0]
ITL_BUCKETS += [40.0, 80.0]
REQ_BUCKETS = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0]
REQ_BUCKETS += [480.0, 960.0, 1920.0, 7680.0]
LABELS = ["model_name", "engine"]


def vllm(current: bool, models: list[str] | None = None) -> str:
    """A vLLM exposition; ``models`` > 1 is the benchmark's shape (vLLM itself serves one model per process)."""
    reg = CollectorRegistry()
    g = {
        n: Gauge(n, d, LABELS, registry=reg)
        for n, d in [
            ("vllm:num_requests_running", "Number of requests in model execution batches."),
            ("vllm:num_requests_waiting", "Number of requests waiting to be processed."),
            (
                "vllm:kv_cache_usage_perc" if current else "vllm:gpu_cache_usage_perc",
                "KV-cache usage. 1 means 100 percent usage.",
            ),
        ]
    }
    pre = "vllm:num_preemptions" if current else "vllm:num_preemptions_total"
    prompt = "vllm:prompt_tokens" if current else "vllm:prompt_tokens_total"
    gen = "vllm:generation_tokens" if current else "vllm:generation_tokens_total"
    c = {
        "pre": Counter(pre, "Cumulative number of preemption from the engine.", LABELS, registry=reg),
        "prompt": Counter(prompt, "Number of prefill tokens processed.", LABELS, registry=reg),
        "gen": Counter(gen, "Number of generation tokens processed.", LABELS, registry=reg),
    }
    success = Counter(
        "vllm:request_success" if current else "vllm:request_success_total",
        "Count of successfully processed requests.",
        [*LABELS, "finished_reason"],
        registry=reg,
    )
    itl_name = "vllm:inter_token_latency_seconds" if current else "vllm:time_per_output_token_seconds"
    h = {
        "ttft": Histogram(
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            LABELS,
            buckets=TTFT_BUCKETS,
            registry=reg,
        ),
        "itl": Histogram(
            itl_name, "Histogram of inter-token latency in seconds.", LABELS, buckets=ITL_BUCKETS, registry=reg
        ),
        "e2e": Histogram(
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            LABELS,
            buckets=REQ_BUCKETS,
            registry=reg,
        ),
        "queue": Histogram(
            "vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.",
            LABELS,
            buckets=REQ_BUCKETS,
            registry=reg,
        ),
        "infer": Histogram(
            "vllm:request_inference_time_seconds",
            "Histogram of time spent in RUNNING phase for request.",
            LABELS,
            buckets=REQ_BUCKETS,
            registry=reg,
        ),
    }
    if current:
        h["tpot"] = Histogram(
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            LABELS,
            buckets=ITL_BUCKETS,
            registry=reg,
        )
    for i, model in enumerate(models or ["meta-llama/Llama-3.1-8B-Instruct"]):
        for engine in ("0", "1"):
            lv = (model, engine)
            for gauge, v in zip(g.values(), (3 + i % 5, 2, 0.25 if engine == "0" else 0.5), strict=True):
                gauge.labels(*lv).set(v)
            c["pre"].labels(*lv).inc(1)
            c["prompt"].labels(*lv).inc(1000)
            c["gen"].labels(*lv).inc(400)
            for reason, n in (("stop", 8), ("length", 1), ("abort", 1), ("error", 0), ("repetition", 0)):
                success.labels(*lv, reason).inc(n)
            for _ in range(10):
                h["ttft"].labels(*lv).observe(0.05)
                h["e2e"].labels(*lv).observe(2.0)
                h["queue"].labels(*lv).observe(0.4)
                h["infer"].labels(*lv).observe(1.6)
                if "tpot" in h:
                    h["tpot"].labels(*lv).observe(0.02)
            for _ in range(40):
                h["itl"].labels(*lv).observe(0.02)
    return _fixed_created(generate_latest(reg).decode())


def triton() -> str:
    out: list[str] = []

    def family(name: str, kind: str, help_: str, rows: list[tuple[str, float]]) -> None:
        out.append(f"# HELP {name} {help_}\n# TYPE {name} {kind}\n")
        out.extend(f"{name}{{{labels}}} {value:g}\n" for labels, value in rows)

    m = 'model="resnet",version="1"'
    family(
        "nv_inference_request_success", "counter", "Number of successful inference requests, all batch sizes", [(m, 90)]
    )
    family(
        "nv_inference_request_failure",
        "counter",
        "Number of failed inference requests, all batch sizes",
        [(f'{m},reason="{r}"', n) for r, n in (("REJECTED", 4), ("CANCELED", 2), ("BACKEND", 3), ("OTHER", 1))],
    )
    family(
        "nv_inference_count", "counter", "Number of inferences performed (does not include cached requests)", [(m, 360)]
    )
    family(
        "nv_inference_exec_count",
        "counter",
        "Number of model executions performed (does not include cached requests)",
        [(m, 90)],
    )
    family(
        "nv_inference_request_duration_us",
        "counter",
        "Cumulative inference request duration in microseconds (includes cached requests)",
        [(m, 1_000_000)],
    )
    family(
        "nv_inference_queue_duration_us",
        "counter",
        "Cumulative inference queuing duration in microseconds (includes cached requests)",
        [(m, 200_000)],
    )
    family(
        "nv_inference_compute_infer_duration_us",
        "counter",
        "Cumulative compute inference duration in microseconds (does not include cached requests)",
        [(m, 450_000)],
    )
    family(
        "nv_inference_pending_request_count",
        "gauge",
        "Instantaneous number of pending requests awaiting execution per-model.",
        [(m, 7)],
    )
    name = "nv_inference_first_response_histogram_ms"
    out.append(f"# HELP {name} Duration from request to first response in milliseconds\n# TYPE {name} histogram\n")
    out.append(f"{name}_count{{{m}}} 100\n{name}_sum{{{m}}} 25000\n")
    for le, n in (("100", 40), ("500", 90), ("2000", 100), ("5000", 100), ("+Inf", 100)):
        out.append(f'{name}_bucket{{{m},le="{le}"}} {n}\n')
    return "".join(out)


SGLANG = """\
# Source: sgl-project/sglang python/sglang/srt/metrics/collector.py at commit
# 93d04878cfb9b08645fae7b11bd340ee33b34acf (SchedulerMetricsCollector gauges, TokenizerMetricsCollector counters
# and histograms with their default buckets); labels model_name, engine_type (+ tp_rank, pp_rank on the
# scheduler) as the scheduler and tokenizer manager set them. Written with prometheus_client, as SGLang does; the
# inter-token latency observed the way observe_inter_token_latency does (sum += interval, the bucket of
# interval / n incremented by n).
"""
TGI = """\
# Source: huggingface/text-generation-inference at commit db931fcf42da018a3657580c64bf2720f167f9ab:
# router/src/server.rs (request counters and histograms, describe_* units, the duration buckets: 35 geometric
# from 0.0001 x 1.5), router/src/infer/mod.rs and backends/v3/src (tgi_request_failure{err}, tgi_queue_size,
# tgi_batch_current_size, tgi_batch_next_size). No model label. Written in the Prometheus text format the
# metrics-exporter-prometheus crate serves (counters without _total).
"""
TFSERVING = """\
# Source: tensorflow/serving at commit 9d981c5c2708d23c5407c7c1e30309e6f9798874:
# tensorflow_serving/servables/tensorflow/util.cc (request_count{model_name,status}, request_latency and
# runtime_latency samplers in microseconds, Exponential(10, 1.8, 33) buckets) written in the shape of
# tensorflow_serving/util/prometheus_exporter.cc (names with / as :, TYPE lines only, the last bucket +Inf).
"""
TRTLLM = """\
# Source: triton-inference-server/tensorrtllm_backend
# inflight_batcher_llm/src/custom_metrics_reporter/custom_metrics_reporter.cc at commit
# 7f9aa4680aafaebce2d7576b5a40d5ddc7c3cbaa (gauge families labelled model, version and a category label), beside
# Triton's own counters (triton-inference-server/core src/metrics.cc at 73aad7c3348d040c7087d57837d75822c488495e).
# Written in prometheus-cpp's text shape.
"""


def sglang() -> str:
    reg = CollectorRegistry()
    sched = {"model_name": "qwen2.5-7b", "engine_type": "unified", "tp_rank": "0", "pp_rank": "0"}
    tok = {"model_name": "qwen2.5-7b", "engine_type": "unified"}
    for name, doc, v in (
        ("sglang:num_running_reqs", "The number of running requests.", 12),
        ("sglang:num_queue_reqs", "The number of requests in the waiting queue.", 3),
        ("sglang:token_usage", "The token usage.", 0.42),
    ):
        Gauge(name, doc, list(sched), registry=reg).labels(**sched).set(v)
    for name, doc, v in (
        ("sglang:prompt_tokens_total", "Number of prefill tokens processed.", 5000),
        ("sglang:generation_tokens_total", "Number of generation tokens processed.", 1200),
        ("sglang:num_requests_total", "Number of requests processed.", 30),
        ("sglang:num_aborted_requests_total", "Number of requests aborted.", 2),
    ):
        Counter(name, doc, list(tok), registry=reg).labels(**tok).inc(v)
    ttft = Histogram(
        "sglang:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        list(tok),
        buckets=[0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400],
        registry=reg,
    )
    itl = Histogram(
        "sglang:inter_token_latency_seconds",
        "Histogram of inter-token latency in seconds.",
        list(tok),
        buckets=[
            0.002,
            0.004,
            0.006,
            0.008,
            0.010,
            0.015,
            0.020,
            0.025,
            0.030,
            0.035,
            0.040,
            0.060,
            0.080,
            0.100,
            0.200,
            0.400,
            0.600,
            0.800,
            1.000,
            2.000,
            4.000,
            6.000,
            8.000,
        ],
        registry=reg,
    )
    e2e = Histogram(
        "sglang:e2e_request_latency_seconds",
        "Histogram of End-to-end request latency in seconds",
        list(tok),
        buckets=[0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400],
        registry=reg,
    )
    queue = Histogram(
        "sglang:queue_time_seconds",
        "Histogram of queueing time in seconds.",
        list(sched),
        buckets=[0.0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30],
        registry=reg,
    )
    for _ in range(30):
        ttft.labels(**tok).observe(0.3)
        e2e.labels(**tok).observe(3.0)
        queue.labels(**sched).observe(0.15)
    # 40 decode steps of 30 ms; speculative decoding accepted 3 tokens per step: 120 tokens of 10 ms each.
    cell = itl.labels(**tok)
    for _ in range(40):
        interval, n = 0.03, 3
        cell._sum.inc(interval)
        for i, bound in enumerate(cell._upper_bounds):
            if interval / n <= bound:
                cell._buckets[i].inc(n)
                break
    return _fixed_created(generate_latest(reg).decode())


def tgi() -> str:
    out: list[str] = []
    bounds, v = [], 0.0001
    for _ in range(35):
        v *= 1.5
        bounds.append(v)

    def hist(name: str, help_: str, les: list[float], values: list[float]) -> None:
        out.append(f"# HELP {name} {help_}\n# TYPE {name} histogram\n")
        for le in les:
            out.append(f'{name}_bucket{{le="{le:g}"}} {sum(1 for x in values if x <= le)}\n')
        out.append(
            f'{name}_bucket{{le="+Inf"}} {len(values)}\n{name}_sum {sum(values):g}\n{name}_count {len(values)}\n'
        )

    out.append("# HELP tgi_request_success Number of successful requests\n# TYPE tgi_request_success counter\n")
    out.append("tgi_request_success 20\n")
    out.append("# HELP tgi_request_failure Number of failed requests\n# TYPE tgi_request_failure counter\n")
    out.append('tgi_request_failure{err="validation"} 3\ntgi_request_failure{err="generation"} 1\n')
    out.append("# HELP tgi_queue_size Current queue size\n# TYPE tgi_queue_size gauge\ntgi_queue_size 4\n")
    out.append("# HELP tgi_batch_current_size Current batch size\n# TYPE tgi_batch_current_size gauge\n")
    out.append("tgi_batch_current_size 6\n")
    hist("tgi_request_duration", "Request duration", bounds, [1.5] * 20)
    hist("tgi_request_queue_duration", "Request queue duration", bounds, [0.05] * 20)
    hist("tgi_request_inference_duration", "Request inference duration", bounds, [1.4] * 20)
    hist("tgi_request_mean_time_per_token_duration", "Mean time per token per request", bounds, [0.014] * 20)
    hist("tgi_request_input_length", "Input tokens per request", [40.96 * (x + 1) for x in range(100)], [200] * 20)
    hist(
        "tgi_request_generated_tokens",
        "Generated tokens per request",
        [81.92 * (x + 1) for x in range(100)],
        [100] * 20,
    )
    hist("tgi_batch_next_size", "Batch size", [float(x + 1) for x in range(1024)], [4] * 10)
    return "".join(out)


def tfserving() -> str:
    out: list[str] = []
    limits = [10 * 1.8**i for i in range(32)]

    def sampler(name: str, labels: str, values_us: list[float]) -> None:
        out.append(f"# TYPE {name} histogram\n")
        cum = 0
        for i, le in enumerate([*limits, None]):
            cum = sum(1 for x in values_us if le is None or x <= le)
            bound = f"{le:.6g}" if i < len(limits) else "+Inf"
            out.append(f'{name}_bucket{{{labels},le="{bound}"}} {cum}\n')
        out.append(f"{name}_sum{{{labels}}} {sum(values_us):g}\n{name}_count{{{labels}}} {cum}\n")

    out.append("# TYPE :tensorflow:serving:request_count counter\n")
    for status, n in (("OK", 50), ("INVALID_ARGUMENT", 4), ("CANCELLED", 1)):
        out.append(f':tensorflow:serving:request_count{{model_name="half_plus_two",status="{status}"}} {n}\n')
    api = 'model_name="half_plus_two",API="predict"'
    sampler(":tensorflow:serving:request_latency", api + ',entrypoint="REST"', [3000.0] * 55)
    sampler(":tensorflow:serving:runtime_latency", api + ',runtime="TF1"', [2000.0] * 54)
    return "".join(out)


def trtllm() -> str:
    out: list[str] = []
    m = 'model="tensorrt_llm",version="1"'

    def gauge(name: str, help_: str, category: str, values: dict[str, int]) -> None:
        out.append(f"# HELP {name} {help_}\n# TYPE {name} gauge\n")
        out.extend(f'{name}{{{m},{category}="{k}"}} {v}\n' for k, v in values.items())

    out.append("# HELP nv_inference_request_success Number of successful inference requests, all batch sizes\n")
    out.append(f"# TYPE nv_inference_request_success counter\nnv_inference_request_success{{{m}}} 64\n")
    gauge(
        "nv_trt_llm_request_metrics",
        "TRT LLM request metrics",
        "request_type",
        {"active": 9, "max": 64, "scheduled": 9, "context": 2},
    )
    gauge(
        "nv_trt_llm_kv_cache_block_metrics",
        "TRT LLM KV cache block metrics",
        "kv_cache_block_type",
        {"max": 4000, "free": 3000, "used": 1000, "tokens_per": 64, "alloc_total": 1000, "alloc_new": 10, "reused": 5},
    )
    gauge(
        "nv_trt_llm_inflight_batcher_metrics",
        "TRT LLM inflight_batcher-specific metrics",
        "inflight_batcher_specific_metric",
        {"total_context_tokens": 300, "generation_requests": 7, "micro_batch_id": 0, "paused_requests": 0},
    )
    return "".join(out)


MLSERVER = """\
# Source: SeldonIO/MLServer mlserver/handlers/dataplane.py at commit a325e523b5a580d49aeb06e19e73e4a90176b63b
# (model_infer_request_success / _failure counters, model_infer_request_duration summary, labels model and
# version). Written with prometheus_client, as MLServer does.
"""


def mlserver(models: list[tuple[str, str]] | None = None) -> str:
    """An MLServer exposition; many ``models`` make the benchmark's shape."""
    reg = CollectorRegistry()
    ok = Counter("model_infer_request_success", "Model infer request success count", ["model", "version"], registry=reg)
    bad = Counter(
        "model_infer_request_failure", "Model infer request failure count", ["model", "version"], registry=reg
    )
    dur = Summary("model_infer_request_duration", "Model infer request duration", ["model", "version"], registry=reg)
    for model, version in models or [("iris", "v1.2")]:
        ok.labels(model, version).inc(40)
        bad.labels(model, version).inc(2)
        for _ in range(42):
            dur.labels(model, version).observe(0.025)
    return _fixed_created(generate_latest(reg).decode())


BENTOML = """\
# Source: bentoml/BentoML src/bentoml/_internal/server/http/instruments.py at commit
# 32230a5276a8da8b23c4a06a9ec6272c1993451a (namespace bentoml_api_server: request_total, request_duration_seconds,
# request_in_progress; labels endpoint, service_name, service_version, http_response_code). Written with
# prometheus_client, as BentoML does (default duration buckets here: BentoML's are configurable).
"""
KSERVE = """\
# Source: kserve/kserve python/kserve/kserve/metrics.py at commit 40efa16cdadf5f74380db5365e80665dfe3694be
# (request_preprocess/predict/postprocess_seconds histograms, default buckets, label model_name). Written with
# prometheus_client, as KServe does.
"""
RAYSERVE = """\
# Source: ray-project/ray python/ray/serve/_private/replica.py at commit 007a8014db4844dec8b879b5f8e344a1e9435f7a
# (serve_deployment_request_counter, serve_deployment_error_counter with tag route,
# serve_deployment_processing_latency_ms with DEFAULT_LATENCY_BUCKET_MS 1..5000 ms, serve_replica_processing_queries);
# the deployment, replica and application tags of python/ray/serve/metrics.py; the ray_ prefix of the metrics
# agent's Prometheus exporter (namespace "ray"). Written in the Prometheus text format.
# The request counter counts successful queries only (incremented after the user's call returned; the error
# counter in the except): a real Ray Serve 2.60.0 showed it, where this fixture was first read as every query.
"""
TORCHSERVE = """\
# Source: pytorch/serve ts/configs/metrics.yaml at commit 62c4d6a1fdc1d071dbcf758ebd756029af20bd5e
# (ts_inference_requests_total, ts_inference_latency_microseconds, ts_queue_latency_microseconds; labels
# model_name, model_version, hostname) in the shape docs/metrics_api.md shows for the Prometheus simpleclient
# the frontend uses (help "Torchserve prometheus counter metric with unit: ...", a trailing comma in labels).
"""


def bentoml() -> str:
    reg = CollectorRegistry()
    labels = ["endpoint", "service_name", "service_version", "http_response_code"]
    ns = "bentoml_api_server"
    total = Counter("request_total", "Total number of HTTP requests", labels, namespace=ns, registry=reg)
    dur = Histogram(
        "request_duration_seconds", "API HTTP request duration in seconds", labels, namespace=ns, registry=reg
    )
    live = Gauge(
        "request_in_progress",
        "Total number of HTTP requests in progress now",
        ["endpoint", "service_name", "service_version"],
        namespace=ns,
        registry=reg,
    )
    for endpoint, code, n in (
        ("/classify", "200", 30),
        ("/classify", "500", 2),
        ("/classify", "422", 1),
        ("/healthz", "200", 100),
        ("/readyz", "200", 100),
    ):
        total.labels(endpoint, "iris_classifier", "abc123", code).inc(n)
        for _ in range(n):
            dur.labels(endpoint, "iris_classifier", "abc123", code).observe(0.2 if endpoint == "/classify" else 0.001)
    live.labels("/classify", "iris_classifier", "abc123").set(2)
    live.labels("/healthz", "iris_classifier", "abc123").set(1)
    return _fixed_created(generate_latest(reg).decode())


def kserve() -> str:
    reg = CollectorRegistry()
    for name, doc, v in (
        ("request_preprocess_seconds", "pre-process request latency", 0.002),
        ("request_predict_seconds", "predict request latency", 0.08),
        ("request_postprocess_seconds", "post-process request latency", 0.001),
    ):
        h = Histogram(name, doc, ["model_name"], registry=reg)
        for _ in range(25):
            h.labels("sklearn-iris").observe(v)
    return _fixed_created(generate_latest(reg).decode())


def rayserve() -> str:
    out: list[str] = []
    tags = 'application="default",deployment="Summarizer",replica="default#Summarizer#abc"'
    out.append(
        "# HELP ray_serve_deployment_request_counter The number of queries that have been processed in "
        "this replica.\n# TYPE ray_serve_deployment_request_counter counter\n"
    )
    out.append(f'ray_serve_deployment_request_counter{{{tags},route="/summarize"}} 50\n')
    out.append(
        "# HELP ray_serve_deployment_error_counter The number of exceptions that have occurred in this "
        "replica.\n# TYPE ray_serve_deployment_error_counter counter\n"
    )
    out.append(f'ray_serve_deployment_error_counter{{{tags},route="/summarize"}} 5\n')
    name = "ray_serve_deployment_processing_latency_ms"
    out.append(f"# HELP {name} The latency for queries to be processed.\n# TYPE {name} histogram\n")
    for le in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000):
        out.append(f'{name}_bucket{{{tags},le="{le:.1f}",route="/summarize"}} {50 if le >= 200 else 0}\n')
    out.append(f'{name}_bucket{{{tags},le="+Inf",route="/summarize"}} 50\n')
    out.append(f'{name}_sum{{{tags},route="/summarize"}} 7500.0\n{name}_count{{{tags},route="/summarize"}} 50\n')
    out.append(
        "# HELP ray_serve_replica_processing_queries The current number of queries being processed.\n"
        "# TYPE ray_serve_replica_processing_queries gauge\n"
    )
    out.append(f"ray_serve_replica_processing_queries{{{tags}}} 3\n")
    return "".join(out)


def torchserve() -> str:
    out: list[str] = []
    m = 'model_name="resnet18",model_version="default",hostname="worker-0",'
    for name, unit, v in (
        ("ts_inference_requests_total", "Count", 40.0),
        ("ts_inference_latency_microseconds", "Microseconds", 2_000_000.0),
        ("ts_queue_latency_microseconds", "Microseconds", 400_000.0),
    ):
        out.append(f"# HELP {name} Torchserve prometheus counter metric with unit: {unit}\n")
        out.append(f"# TYPE {name} counter\n{name}{{{m}}} {v}\n")
    return "".join(out)


TRITON_VLLM = """\
# Source: triton-inference-server/vllm_backend src/utils/metrics.py at commit
# 2b3cb9306214c290f4b42522080329fd1a35957d (TritonMetrics: vllm:prompt_tokens_total, vllm:generation_tokens_total
# counters, vllm:time_to_first_token_seconds, vllm:time_per_output_token_seconds, vllm:e2e_request_latency_seconds
# histograms with their buckets; labels model and version from src/model.py), beside Triton's own counters
# (triton-inference-server/core src/metrics.cc at 73aad7c3348d040c7087d57837d75822c488495e). Written in
# prometheus-cpp's text shape (Triton serves the backend's families through its own registry).
"""


def triton_vllm() -> str:
    out: list[str] = []
    m = 'model="vllm_model",version="1"'

    def hist(name: str, help_: str, les: list[float], values: list[float]) -> None:
        out.append(f"# HELP {name} {help_}\n# TYPE {name} histogram\n")
        out.append(f"{name}_count{{{m}}} {len(values)}\n{name}_sum{{{m}}} {sum(values):g}\n")
        for le in les:
            out.append(f'{name}_bucket{{{m},le="{le:g}"}} {sum(1 for v in values if v <= le)}\n')
        out.append(f'{name}_bucket{{{m},le="+Inf"}} {len(values)}\n')

    out.append("# HELP nv_inference_request_success Number of successful inference requests, all batch sizes\n")
    out.append(f"# TYPE nv_inference_request_success counter\nnv_inference_request_success{{{m}}} 10\n")
    for name, help_, v in (
        ("nv_inference_count", "Number of inferences performed (does not include cached requests)", 10),
        ("nv_inference_exec_count", "Number of model executions performed (does not include cached requests)", 10),
        (
            "nv_inference_request_duration_us",
            "Cumulative inference request duration in microseconds (includes cached requests)",
            12_000_000,
        ),
        ("vllm:prompt_tokens_total", "Number of prefill tokens processed.", 700),
        ("vllm:generation_tokens_total", "Number of generation tokens processed.", 300),
    ):
        out.append(f"# HELP {name} {help_}\n# TYPE {name} counter\n{name}{{{m}}} {v}\n")
    hist(
        "vllm:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0],
        [0.09] * 10,
    )
    hist(
        "vllm:time_per_output_token_seconds",
        "Histogram of time per output token in seconds.",
        [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5],
        [0.03] * 290,
    )
    hist(
        "vllm:e2e_request_latency_seconds",
        "Histogram of end to end request latency in seconds.",
        [1.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0],
        [1.2] * 10,
    )
    return "".join(out)


def main() -> None:
    (HERE / "vllm-current.prom").write_text(VLLM_CURRENT + vllm(current=True))
    (HERE / "vllm-0.8.prom").write_text(VLLM_OLD + vllm(current=False))
    (HERE / "triton-histograms.prom").write_text(TRITON + triton())
    (HERE / "sglang.prom").write_text(SGLANG + sglang())
    (HERE / "tgi.prom").write_text(TGI + tgi())
    (HERE / "tfserving.prom").write_text(TFSERVING + tfserving())
    (HERE / "triton-trtllm.prom").write_text(TRTLLM + trtllm())
    (HERE / "mlserver.prom").write_text(MLSERVER + mlserver())
    (HERE / "triton-vllm.prom").write_text(TRITON_VLLM + triton_vllm())
    (HERE / "bentoml.prom").write_text(BENTOML + bentoml())
    (HERE / "kserve.prom").write_text(KSERVE + kserve())
    (HERE / "rayserve.prom").write_text(RAYSERVE + rayserve())
    (HERE / "torchserve.prom").write_text(TORCHSERVE + torchserve())


if __name__ == "__main__":
    main()
