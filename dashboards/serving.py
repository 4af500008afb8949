"""Serving overview: per model and version, traffic, errors by reason, latency by stage, queue and batching."""

from __future__ import annotations

from grafanalib.core import Dashboard

from dashboards.common import DS, Board, datasource_var, label_var, steps

__all__ = ["CHANGE_ANNOTATION", "board", "build"]

SEL = 'instance=~"$instance", model=~"$model", version=~"$version"'
BY = "model, version"
LEG = "{{model}} v{{version}}"

# Deploys and model-version changes the sidecar recorded, drawn as vertical markers.
CHANGE_ANNOTATION = {
    "name": "Changes",
    "datasource": DS,
    "enable": True,
    "iconColor": "orange",
    "expr": 'sum by (source) (increase(sidecar_changes_recorded_total{instance=~"$instance"}[2m])) > 0',
    "step": "60s",
    "titleFormat": "Change recorded ({{source}})",
    "textFormat": "See the sidecar's /v1/changes for what changed.",
}

ERR_STEPS = steps(("green", None), ("orange", 0.01), ("red", 0.05))


def board() -> Board:
    b = Board(
        uid="triton-sidecar-serving",
        title="Triton sidecar / Serving overview",
        tags=["triton", "sidecar", "serving"],
        description="Per model and version: request rate, errors by reason, latency by stage, queue depth, batching.",
        variables=[
            datasource_var(),
            label_var("instance", "sidecar_triton_up", label="Sidecar"),
            label_var("model", "sidecar_model_requests_per_second", label="Model", depends='instance=~"$instance"'),
            label_var(
                "version",
                "sidecar_model_requests_per_second",
                label="Version",
                depends='instance=~"$instance", model=~"$model"',
            ),
        ],
        annotations=[CHANGE_ANNOTATION],
    )
    b.row("Traffic and errors")
    b.stat(
        "Requests per second",
        "Successful plus failed inferences per second over the selected models. A drop "
        "to zero while clients still send means Triton or the network path is down (alerts TritonTargetDown, "
        "SidecarTritonScrapeFailing).",
        [(f"sum(sidecar_model_requests_per_second{{{SEL}}})", "")],
        unit="reqps",
        needs="triton",
    )
    b.stat(
        "Worst error ratio",
        "Highest failed/total request ratio among the selected model versions. Above 1% "
        "is worth a look, above 5% pages (alert TritonModelErrorRatioHigh).",
        [(f"max(sidecar_model_error_ratio{{{SEL}}})", "")],
        unit="percentunit",
        needs="triton",
        thresholds=ERR_STEPS,
    )
    b.stat(
        "Pending requests",
        "Requests waiting in Triton's queues now, summed. A steady climb means the model "
        "cannot keep up (alert TritonQueueGrowing).",
        [(f"sum(sidecar_model_pending_requests{{{SEL}}})", "")],
        unit="short",
        needs="triton",
        thresholds=steps(("green", None), ("orange", 10), ("red", 100)),
    )
    b.stat(
        "Loaded model versions",
        "Model/version pairs the sidecar sees in Triton's metrics. A drop means a "
        "version was unloaded or failed to load (alert TritonModelVersionMissing).",
        [('sum(sidecar_triton_models{instance=~"$instance"})', "")],
        unit="short",
        needs="triton",
        thresholds=steps(("red", None), ("green", 1)),
    )
    b.timeseries(
        "Request rate by model and version",
        "Inferences per second (successes + failures), derived from "
        "Triton's reset-corrected counters. Compare versions during a rollout.",
        [(f"sum by ({BY}) (sidecar_model_requests_per_second{{{SEL}}})", LEG)],
        unit="reqps",
        needs="triton",
    )
    b.timeseries(
        "Failures by reason",
        "Failed inferences per second by Triton's reason label (BACKEND: the model "
        "raised; REJECTED: queue full or timeout; CANCELED; OTHER). Any steady BACKEND rate is a model or "
        "input bug (alert TritonModelErrorRatioHigh).",
        [
            (
                f"sum by ({BY}, reason) (rate(sidecar_model_request_failure_total{{{SEL}}}[$__rate_interval])) > 0",
                LEG + " {{reason}}",
            )
        ],
        unit="reqps",
        needs="failures",
        stack=True,
    )
    b.timeseries(
        "Error ratio",
        "Failed / all requests over the sidecar's derivation window. The lines mark 1% "
        "(warning) and 5% (alert TritonModelErrorRatioHigh).",
        [(f"max by ({BY}) (sidecar_model_error_ratio{{{SEL}}})", LEG)],
        unit="percentunit",
        needs="triton",
        thresholds=ERR_STEPS,
    )
    b.timeseries(
        "Error budget burn rate (1h)",
        "How fast the 99.9% availability SLO's error budget burns: 1 uses "
        "it up in exactly 30 days, 14.4 in about two days (alert TritonErrorBudgetBurn). Recording rule "
        "sidecar:model_error_ratio:rate1h / 0.001.",
        [(f"sidecar:model_error_ratio:rate1h{{{SEL}}} / 0.001", LEG)],
        unit="short",
        needs="triton",
        thresholds=steps(("green", None), ("orange", 6), ("red", 14.4)),
    )
    b.row("Latency by stage")
    b.timeseries(
        "Request latency p50 / p95 / p99",
        "End-to-end time inside Triton (REQUEST_START to REQUEST_END), "
        "from Triton's summary quantiles. A rising p99 with a flat p50 points at queueing or a few slow "
        "inputs (alert TritonLatencySLOBurn).",
        [
            (
                f'max by ({BY}, quantile) (sidecar_model_stage_latency_seconds{{{SEL}, stage="request", '
                f'quantile=~"0.5|0.95|0.99"}})',
                LEG + " p{{quantile}}",
            )
        ],
        unit="s",
        needs="triton",
        thresholds=steps(("green", None), ("red", 0.5)),
    )
    b.timeseries(
        "p95 by stage (queue, input, infer, output)",
        "Where the time goes: Triton's 95th percentile per "
        "stage, stacked. Queue growing: add instances or batch; compute_infer growing: the model itself "
        "got slower (new version, bigger inputs).",
        [
            (
                f'max by ({BY}, stage) (sidecar_model_stage_latency_seconds{{{SEL}, stage!="request", '
                f'quantile="0.95"}})',
                LEG + " {{stage}}",
            )
        ],
        unit="s",
        needs="triton",
        stack=True,
    )
    b.timeseries(
        "Average time per stage",
        "Mean seconds per request in each stage, from Triton's cumulative "
        "duration counters (exact, not sampled). Compare with the p95 to see whether a stage is slow "
        "for everyone or only for the tail.",
        [(f"max by ({BY}, stage) (sidecar_model_stage_average_seconds{{{SEL}}})", LEG + " {{stage}}")],
        unit="s",
        needs="triton",
    )
    b.timeseries(
        "Stage latency from traces p50 / p95 / p99 (exemplars)",
        "Per-stage quantiles computed from "
        "Triton's spans, with exemplars: click a dot to open that request's trace in the sidecar's "
        "/traces page. Needs Triton's OpenTelemetry tracing pointed at the sidecar and Prometheus "
        "scraping OpenMetrics with exemplar storage on.",
        [
            (
                f"histogram_quantile({q}, sum by (le, stage) (rate(sidecar_triton_stage_duration_seconds_bucket"
                f"{{{SEL}}}[$__rate_interval])))",
                f"{{{{stage}}}} p{int(q * 100)}",
            )
            for q in (0.5, 0.95, 0.99)
        ],
        unit="s",
        needs="traces",
        exemplar=True,
        w=24,
    )
    b.row("Queue and batching")
    b.timeseries(
        "Queue depth",
        "Requests pending in Triton per model version. It should hover near zero; a "
        "ramp means arrivals exceed capacity (alert TritonQueueGrowing).",
        [(f"max by ({BY}) (sidecar_model_pending_requests{{{SEL}}})", LEG)],
        unit="short",
        needs="triton",
        thresholds=steps(("green", None), ("orange", 10), ("red", 100)),
    )
    b.timeseries(
        "Batch efficiency (inferences per execution)",
        "How many requests Triton packs into one model "
        "execution. 1 means no batching; with dynamic batching enabled and load present it should rise "
        "towards the preferred batch size.",
        [(f"max by ({BY}) (sidecar_model_inferences_per_execution{{{SEL}}})", LEG)],
        unit="short",
        needs="triton",
    )
    b.timeseries(
        "Executions per second",
        "Model executions per second; with inferences per second it shows the batching Triton achieves.",
        [(f"sum by ({BY}) (rate(sidecar_model_executions_total{{{SEL}}}[$__rate_interval]))", LEG)],
        unit="ops",
        needs="triton",
    )
    b.timeseries(
        "Response cache hit ratio",
        "Share of requests answered from Triton's response cache. Only "
        "present when the cache is enabled for the model; a sudden drop after a deploy often means the "
        "inputs changed shape or the cache was flushed.",
        [(f"max by ({BY}) (sidecar_model_cache_hit_ratio{{{SEL}}})", LEG)],
        unit="percentunit",
        needs="cache",
        max1=True,
    )
    return b


def build() -> Dashboard:
    return board().build()
