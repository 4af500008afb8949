"""LLM serving: goodput against its SLOs (from per-request events, and bounded from a server's histograms), TTFT,
inter-token latency, tokens/s, KV cache and preemptions from the server profiles' ``sidecar_serving_*`` series, for
any server the sidecar scrapes (vLLM, SGLang, TGI, Triton, ...; docs/servers.md)."""

from __future__ import annotations

from grafanalib.core import Dashboard

from dashboards.common import Board, datasource_var, label_var, steps
from dashboards.serving import CHANGE_ANNOTATION

__all__ = ["board", "build"]

SRV = 'instance=~"$instance", server=~"$server", model=~"$model"'
GP = 'instance=~"$instance", model=~"$model"'
RATE = "[$__rate_interval]"
BY = "server, model, version"
LEG = "{{server}} {{model}} v{{version}}"
GP_LEG = "{{model}} v{{version}}"
QUANTILES = 'stat=~"p50|p95|p99"'
BURN_STEPS = steps(("green", None), ("orange", 6), ("red", 14.4))
GOOD_STEPS = steps(("red", None), ("orange", 0.95), ("green", 0.99))


def _goodput(window: str, by: str = "") -> str:
    grp = f" by ({by})" if by else ""
    return (
        f'sum{grp} (rate(sidecar_goodput_requests_total{{{GP}, good="true"}}{window})) '
        f"/ sum{grp} (rate(sidecar_goodput_requests_total{{{GP}}}{window}))"
    )


def board() -> Board:
    b = Board(
        uid="triton-sidecar-llm",
        title="Triton sidecar / LLM serving",
        tags=["triton", "sidecar", "llm"],
        description="LLM SLIs: goodput against the configured SLOs and its burn rate, TTFT, inter-token latency, "
        "tokens/s, KV cache and preemptions, from any server profile (docs/servers.md).",
        variables=[
            datasource_var(),
            label_var("instance", "sidecar_serving_requests_total", label="Sidecar"),
            label_var("server", "sidecar_serving_requests_total", label="Server", depends='instance=~"$instance"'),
            label_var(
                "model",
                "sidecar_serving_requests_total",
                label="Model",
                depends='instance=~"$instance", server=~"$server"',
            ),
        ],
        annotations=[CHANGE_ANNOTATION],
    )
    b.row("Goodput (requests meeting every SLO)")
    b.stat(
        "Goodput (1h)",
        "Share of the last hour's judged requests that met every configured SLO (checks.goodput.slos: TTFT, "
        "inter-token, request latency), from the events the sidecar received.",
        [(_goodput("[1h]"), "")],
        unit="percentunit",
        needs="goodput",
        thresholds=GOOD_STEPS,
    )
    b.stat(
        "Worst burn rate (1h)",
        "Highest 1h goodput burn rate among the selected models: bad share / (1 - objective). 14.4 with the 5m "
        "window above it too pages (alert GoodputBurn).",
        [(f"max(sidecar:goodput_burn_rate:rate1h{{{GP}}})", "")],
        unit="short",
        needs="goodput",
        thresholds=BURN_STEPS,
    )
    b.stat(
        "Judged requests per second",
        "Requests the goodput check judged per second; compare with the server's request rate to see how many "
        "requests report their figures as events.",
        [(f"sum(rate(sidecar_goodput_requests_total{{{GP}}}[5m]))", "")],
        unit="reqps",
        needs="goodput",
    )
    b.stat(
        "Events not judged per second",
        "Events the goodput check could not judge: no SLO for the model, a field an SLO needs missing, or the "
        "series limit reached (sidecar_goodput_dropped_total by reason).",
        [('sum(rate(sidecar_goodput_dropped_total{instance=~"$instance"}[5m])) or vector(0)', "")],
        unit="short",
        needs="goodput",
        thresholds=steps(("green", None), ("orange", 0.001)),
    )
    b.timeseries(
        "Goodput by model and version",
        "Share of judged requests meeting every SLO over the rate interval, per model and version. The line marks "
        "the usual 99% objective.",
        [(_goodput(RATE, "model, version"), GP_LEG)],
        unit="percentunit",
        needs="goodput",
        thresholds=GOOD_STEPS,
        max1=True,
    )
    b.timeseries(
        "Goodput burn rate (1h and 5m)",
        "The fast pair of the multiwindow burn-rate alert (recording rules in alerts/llm.rules.yml): both above "
        "14.4 fires GoodputBurn critical.",
        [
            (f"sidecar:goodput_burn_rate:rate1h{{{GP}}}", GP_LEG + " 1h"),
            (f"sidecar:goodput_burn_rate:rate5m{{{GP}}}", GP_LEG + " 5m"),
        ],
        unit="short",
        needs="goodput",
        thresholds=BURN_STEPS,
    )
    b.timeseries(
        "SLO misses by SLO",
        "Judged requests per second that missed one SLO bound (ttft, inter_token, e2e); a request missing two "
        "counts in both. Tells which part of generation breaks the goodput.",
        [(f"sum by (model, version, slo) (rate(sidecar_goodput_slo_missed_total{{{GP}}}{RATE}))", GP_LEG + " {{slo}}")],
        unit="reqps",
        needs="goodput",
        stack=True,
    )
    b.timeseries(
        "Goodput bounds from vLLM histograms (5m)",
        "Where only a server's histograms exist (Prometheus scraping vLLM itself): the share within the TTFT and "
        "the per-output-token bound is exact at a bucket edge, but the share meeting both is only bounded, between "
        "max(0, a + b - 1) and min(a, b) (alerts/llm.rules.yml).",
        [
            ("sidecar:vllm_goodput_lower_bound:ratio_rate5m", "{{model_name}} lower bound"),
            ("sidecar:vllm_goodput_upper_bound:ratio_rate5m", "{{model_name}} upper bound"),
        ],
        unit="percentunit",
        needs="llm",
        max1=True,
    )
    b.timeseries(
        "TTFT per request p50 / p95 / p99 (events)",
        "Time to first token from the requests' own figures (events' ttft_ms), quantiles over the rate interval; "
        "the SLO bound is a bucket edge, so goodput read from this histogram is exact there.",
        [
            (
                f"histogram_quantile({q}, sum by (le, model, version) "
                f"(rate(sidecar_gen_ai_server_time_to_first_token_seconds_bucket{{{GP}}}{RATE})))",
                GP_LEG + f" p{int(q * 100)}",
            )
            for q in (0.5, 0.95, 0.99)
        ],
        unit="s",
        needs="goodput",
    )
    b.timeseries(
        "Inter-token latency per request p50 / p95 / p99 (events)",
        "Mean gap between output tokens per request (events' inter_token_ms or tpot_ms, else derived from latency, "
        "TTFT and output tokens), quantiles over the rate interval.",
        [
            (
                f"histogram_quantile({q}, sum by (le, model, version) "
                f"(rate(sidecar_gen_ai_server_time_per_output_token_seconds_bucket{{{GP}}}{RATE})))",
                GP_LEG + f" p{int(q * 100)}",
            )
            for q in (0.5, 0.95, 0.99)
        ],
        unit="s",
        needs="goodput",
    )
    b.row("Server (any profile)")
    b.timeseries(
        "Time to first token p50 / p95 / p99 (server)",
        "The server's own TTFT histogram, quantiles over the sidecar's last scrape interval "
        "(sidecar_serving_gen_ai_server_time_to_first_token_seconds). Rising with the queue: too much load; rising "
        "alone: long prompts (prefill).",
        [
            (
                f"max by ({BY}, stat) "
                f"(sidecar_serving_gen_ai_server_time_to_first_token_seconds{{{SRV}, {QUANTILES}}})",
                LEG + " {{stat}}",
            )
        ],
        unit="s",
        needs="llm",
        thresholds=steps(("green", None), ("red", 0.5)),
    )
    b.timeseries(
        "Inter-token latency p50 / p95 / p99 (server)",
        "The server's inter-token figure over the last scrape interval: per decode step where the server gives it "
        "(sidecar_serving_inter_token_latency_seconds), else per request (time per output token); see "
        "docs/servers.md for what each server measures.",
        [
            (
                f"max by ({BY}, stat) (sidecar_serving_inter_token_latency_seconds{{{SRV}, {QUANTILES}}})",
                LEG + " {{stat}}",
            ),
            (
                f"max by ({BY}, stat) "
                f"(sidecar_serving_gen_ai_server_time_per_output_token_seconds{{{SRV}, {QUANTILES}}})",
                LEG + " per request {{stat}}",
            ),
        ],
        unit="s",
        needs="llm",
        thresholds=steps(("green", None), ("red", 0.05)),
    )
    b.timeseries(
        "Output tokens per second",
        "Generated tokens per second (reset-corrected), per server, model and version: the throughput that "
        "matters for an LLM more than requests per second.",
        [(f"sum by ({BY}) (sidecar_serving_gen_ai_usage_output_tokens_per_second{{{SRV}}})", LEG)],
        unit="short",
        needs="llm",
    )
    b.timeseries(
        "KV cache usage",
        "Share of the KV cache in use (0..1). Near 1 the server preempts or queues requests, and TTFT rises.",
        [(f"max by ({BY}) (sidecar_serving_kv_cache_usage{{{SRV}}})", LEG)],
        unit="percentunit",
        needs="llm",
        thresholds=steps(("green", None), ("orange", 0.8), ("red", 0.95)),
        max1=True,
    )
    b.timeseries(
        "Preemptions per second",
        "Requests the scheduler preempted (evicted from the KV cache, to be recomputed or swapped) per second. "
        "Any steady rate costs latency: more KV cache memory or fewer concurrent sequences.",
        [(f"sum by ({BY}) (sidecar_serving_preemptions_per_second{{{SRV}}})", LEG)],
        unit="short",
        needs="llm",
    )
    b.timeseries(
        "Requests running and waiting",
        "Requests being executed and queued at the server now. Waiting growing while running stays flat: the "
        "server is at its concurrency limit.",
        [
            (f"max by ({BY}) (sidecar_serving_requests_in_flight{{{SRV}}})", LEG + " running"),
            (f"max by ({BY}) (sidecar_serving_requests_waiting{{{SRV}}})", LEG + " waiting"),
        ],
        unit="short",
        needs="llm",
    )
    b.timeseries(
        "Requests per second by outcome",
        "Finished requests per second by outcome (success, failure, aborted, other), for any server profile.",
        [(f"sum by ({BY}, outcome) (sidecar_serving_requests_per_second{{{SRV}}})", LEG + " {{outcome}}")],
        unit="reqps",
        needs="llm",
        stack=True,
    )
    return b


def build() -> Dashboard:
    return board().build()
