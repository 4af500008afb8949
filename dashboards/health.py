"""The sidecar's own health: Triton scrapes, intake and drops, refusals, queues, evaluation time, alerts."""

from __future__ import annotations

from grafanalib.core import Dashboard

from dashboards.common import Board, datasource_var, label_var, steps

__all__ = ["board", "build"]

INST = 'instance=~"$instance"'


def board() -> Board:
    b = Board(
        uid="triton-sidecar-health",
        title="Triton sidecar / Sidecar health",
        tags=["triton", "sidecar", "health"],
        description="Is the sidecar itself healthy: scrapes, intake, drops, refusals, queue fill, evaluation time.",
        variables=[datasource_var(), label_var("instance", "sidecar_triton_up", label="Sidecar")],
    )
    b.row("Triton scrape")
    b.stat(
        "Triton up",
        "1 when the last scrape of Triton's /metrics succeeded (alert TritonTargetDown).",
        [(f"min(sidecar_triton_up{{{INST}}})", "")],
        unit="short",
        needs="triton",
        thresholds=steps(("red", None), ("green", 1)),
    )
    b.stat(
        "Seconds since last good scrape",
        "Age of the last successful scrape. More than a few intervals means "
        "every SLI panel is stale (alert SidecarTritonScrapeFailing).",
        [(f"max(time() - sidecar_triton_last_success_timestamp_seconds{{{INST}}})", "")],
        unit="s",
        needs="triton",
        thresholds=steps(("green", None), ("orange", 30), ("red", 120)),
    )
    b.stat(
        "Series scraped",
        "Triton series in the last scrape; series over triton.max_series are refused "
        "(alert SidecarTritonSeriesRefused).",
        [(f"sum(sidecar_triton_series{{{INST}}})", "")],
        unit="short",
        needs="triton",
    )
    b.stat(
        "Uptime",
        "Time since the sidecar started; a reset to zero is a restart (crash loop if frequent).",
        [(f"max(time() - sidecar_start_time_seconds{{{INST}}})", "")],
        unit="s",
        needs="self",
    )
    b.timeseries(
        "Scrapes by result",
        "Scrapes of Triton per second, by result (success, failure).",
        [(f"sum by (result) (rate(sidecar_triton_scrapes_total{{{INST}}}[$__rate_interval]))", "{{result}}")],
        unit="ops",
        needs="triton",
        stack=True,
    )
    b.timeseries(
        "Scrape failures by reason",
        "Why scrapes failed: timeout, connect, http_status, content_type, "
        "parse, too_large (alert SidecarTritonScrapeFailing).",
        [(f"sum by (reason) (rate(sidecar_triton_scrape_failures_total{{{INST}}}[$__rate_interval]))", "{{reason}}")],
        unit="ops",
        needs="triton",
    )
    b.timeseries(
        "Scrape duration",
        "Time one scrape of Triton took. Near triton.timeout_secs means timeouts are coming.",
        [(f"max(sidecar_triton_scrape_duration_seconds{{{INST}}})", "duration")],
        unit="s",
        needs="triton",
    )
    b.timeseries(
        "Refused series, models and counter resets",
        "Series and model versions refused over the "
        "configured maxima (those models are invisible), and counter resets (Triton restarts or model "
        "reloads, corrected by the sidecar).",
        [
            (f"sum(rate(sidecar_triton_series_refused_total{{{INST}}}[$__rate_interval]))", "series refused"),
            (f"sum(rate(sidecar_triton_models_refused_total{{{INST}}}[$__rate_interval]))", "models refused"),
            (f"sum(rate(sidecar_triton_series_resets_total{{{INST}}}[$__rate_interval]))", "resets"),
        ],
        unit="ops",
        needs="triton",
    )
    b.row("Intake, drops and refusals")
    b.timeseries(
        "Items on the bus",
        "Spans and events published on the internal bus per second, by kind and source.",
        [(f"sum by (kind, source) (rate(sidecar_bus_items_total{{{INST}}}[$__rate_interval]))", "{{kind}} {{source}}")],
        unit="ops",
        needs="traces",
    )
    b.timeseries(
        "Spans received, rejected and dropped",
        "OTLP spans accepted and refused, spans the trace store "
        "dropped, and spans the OTLP forwarder dropped (alert SidecarDroppingData).",
        [
            (
                f"sum by (encoding) (rate(sidecar_otlp_spans_received_total{{{INST}}}[$__rate_interval]))",
                "received {{encoding}}",
            ),
            (
                f"sum by (encoding) (rate(sidecar_otlp_spans_rejected_total{{{INST}}}[$__rate_interval]))",
                "rejected {{encoding}}",
            ),
            (
                f"sum by (reason) (rate(sidecar_traces_spans_dropped_total{{{INST}}}[$__rate_interval]))",
                "store dropped {{reason}}",
            ),
            (
                f'sum by (reason) (rate(sidecar_export_dropped_total{{exporter="otlp_forward",{INST}}}'
                f"[$__rate_interval]))",
                "forward dropped {{reason}}",
            ),
        ],
        unit="ops",
        needs="traces",
    )
    b.timeseries(
        "HTTP requests refused",
        "Push and admin requests refused by endpoint and reason (too_large, "
        "overloaded, memory, unauthorized, ...). Refused pushes are the client's to retry (alert "
        "SidecarRefusingRequests).",
        [
            (
                f"sum by (endpoint, reason) (rate(sidecar_http_refused_total{{{INST}}}[$__rate_interval]))",
                "{{endpoint}} {{reason}}",
            )
        ],
        unit="reqps",
        needs="refusals",
    )
    b.timeseries(
        "Push requests in flight",
        "Push requests being handled now; at server.max_inflight_requests new ones get 429.",
        [(f"max(sidecar_http_inflight_requests{{{INST}}})", "in flight")],
        unit="short",
        needs="self",
    )
    b.timeseries(
        "Events received and rejected",
        "Prediction events accepted and refused per second, by source and reason.",
        [
            (
                f"sum by (source) (rate(sidecar_events_received_total{{{INST}}}[$__rate_interval]))",
                "received {{source}}",
            ),
            (
                f"sum by (source, reason) (rate(sidecar_events_rejected_total{{{INST}}}[$__rate_interval]))",
                "rejected {{source}} {{reason}}",
            ),
        ],
        unit="ops",
        needs="drift",
    )
    b.timeseries(
        "Subscriber and evaluation errors",
        "Batches a bus subscriber failed to take and check "
        "evaluations that raised: each is a bug worth a ticket (alert SidecarCheckEvaluationErrors).",
        [
            (
                f"sum by (subscriber) (rate(sidecar_bus_subscriber_errors_total{{{INST}}}[$__rate_interval]))",
                "subscriber {{subscriber}}",
            ),
            (
                f"sum by (check) (rate(sidecar_check_evaluation_errors_total{{{INST}}}[$__rate_interval]))",
                "check {{check}}",
            ),
        ],
        unit="ops",
        needs="errors",
    )
    b.row("Queues and delivery")
    b.timeseries(
        "Exporter queue fill",
        "Items waiting per exporter (otlp_forward: spans) and per Alertmanager "
        "outbox. A queue that only grows means its backend is down or too slow; at queue.max_items new "
        "items are dropped.",
        [
            (f"max by (exporter) (sidecar_export_queue_items{{{INST}}})", "{{exporter}}"),
            (
                f"max by (alertmanager) (sidecar_alertmanager_outbox_notices{{{INST}}})",
                "alertmanager outbox {{alertmanager}}",
            ),
        ],
        unit="short",
        needs="alerting",
    )
    b.timeseries(
        "Exporter drops and failed tries",
        "Items never delivered (queue_full, permanent, gave_up, "
        "shutdown) and failed delivery attempts by reason, per exporter (alert SidecarDroppingData).",
        [
            (
                f"sum by (exporter, reason) (rate(sidecar_export_dropped_total{{{INST}}}[$__rate_interval]))",
                "dropped {{exporter}} {{reason}}",
            ),
            (
                f"sum by (exporter, reason) (rate(sidecar_export_failed_total{{{INST}}}[$__rate_interval]))",
                "failed {{exporter}} {{reason}}",
            ),
        ],
        unit="ops",
        needs="alerting",
    )
    b.timeseries(
        "Alerts in the book",
        "The sidecar's own alerts by state (pending, firing, resolved).",
        [(f"sum by (state) (sidecar_alerts{{{INST}}})", "{{state}}")],
        unit="short",
        needs="alerting",
    )
    b.row("Evaluation and memory")
    b.timeseries(
        "Check evaluation time p50 / p99",
        "How long one evaluation of each check takes. It must stay "
        "well under checks.eval_interval_secs (alert SidecarCheckEvaluationLagging).",
        [
            (
                f"histogram_quantile({q}, sum by (le, check) (rate(sidecar_check_evaluation_seconds_bucket{{{INST}}}"
                f"[$__rate_interval])))",
                f"{{{{check}}}} p{int(q * 100)}",
            )
            for q in (0.5, 0.99)
        ],
        unit="s",
        needs="checks",
    )
    b.timeseries(
        "Evaluation lag",
        "How far the last evaluation round ran past its interval (0 when on time). "
        "Positive for several rounds: checks are too heavy for the interval (alert "
        "SidecarCheckEvaluationLagging).",
        [(f"max(sidecar_check_evaluation_lag_seconds{{{INST}}})", "lag")],
        unit="s",
        needs="self",
        thresholds=steps(("green", None), ("red", 1)),
    )
    b.timeseries(
        "Resident memory",
        "The sidecar process's resident memory. Above server.memory_limit_mib push "
        "endpoints answer 503 (alert SidecarRefusingRequests).",
        [(f'max(process_resident_memory_bytes{{{INST}, job=~".*sidecar.*"}})', "rss")],
        unit="bytes",
        needs="process",
    )
    b.timeseries(
        "Drift window memory",
        "Bytes held by the drift check's windows (bounded by max_series).",
        [(f"max(sidecar_drift_window_memory_bytes{{{INST}}})", "drift windows")],
        unit="bytes",
        needs="drift",
    )
    return b


def build() -> Dashboard:
    return board().build()
