"""Writes the server fixtures in this folder from each server's own metric definitions (run from the repo root:
``.venv/bin/python tests/data/servers/build_fixtures.py``).

Each family below is declared with the name, type, help, labels and buckets the server's source declares
(the source is cited in each fixture's header), and written with the same client library the server uses
(prometheus_client for vLLM) or in the same text shape (prometheus-cpp for Triton). The observed values are
made up and fixed, so the tests know the figures the mapping must produce.
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

HERE = Path(__file__).resolve().parent

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
    return generate_latest(reg).decode()


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


def main() -> None:
    (HERE / "vllm-current.prom").write_text(VLLM_CURRENT + vllm(current=True))
    (HERE / "vllm-0.8.prom").write_text(VLLM_OLD + vllm(current=False))
    (HERE / "triton-histograms.prom").write_text(TRITON + triton())


if __name__ == "__main__":
    main()
