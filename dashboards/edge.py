"""The edge in front of the model: cache hit ratio against its SLA, origin offload, edge and origin latency
(p50/p99/p99.9), status classes per node, and recorded changes (purges among them) as annotations."""

from __future__ import annotations

from grafanalib.core import Dashboard

from dashboards.common import Board, datasource_var, label_var, steps
from dashboards.serving import CHANGE_ANNOTATION

__all__ = ["board", "build"]

SEL = 'instance=~"$instance", route_group=~"$route_group"'
RATE = "[$__rate_interval]"


def board() -> Board:
    b = Board(
        uid="triton-sidecar-edge",
        title="Triton sidecar / Edge",
        tags=["triton", "sidecar", "edge"],
        description="The CDN or edge cache in front of the model, from its access logs (docs/edge.md): hit ratio "
        "against the SLA, origin offload, edge and origin latency, purges as changes (orange markers).",
        variables=[
            datasource_var(),
            label_var("instance", "sidecar_edge_requests_total", label="Sidecar"),
            label_var(
                "route_group", "sidecar_edge_requests_total", label="Route group", depends='instance=~"$instance"'
            ),
        ],
        annotations=[CHANGE_ANNOTATION],
    )
    b.row("Hit-ratio SLA")
    b.stat(
        "Hit ratio this period",
        "Cache hit ratio of the SLA period so far (a UTC day by default), per route group held to the SLA. Below "
        "the target at the period's end is a missed SLA (alert EdgeHitRatioPeriod).",
        [('min(sidecar_edge_hit_ratio_period{instance=~"$instance"})', "")],
        unit="percentunit",
        needs="edge",
        thresholds=steps(("red", None), ("orange", 0.9), ("green", 0.92)),
    )
    b.stat(
        "Projected at period end",
        "Where the period's hit ratio ends if the last hour's rates hold (edge.checks.sla.projection_secs).",
        [('min(sidecar_edge_hit_ratio_projected{instance=~"$instance"})', "")],
        unit="percentunit",
        needs="edge",
        thresholds=steps(("red", None), ("orange", 0.9), ("green", 0.92)),
    )
    b.timeseries(
        "SLA burn rate by window",
        "Miss ratio over each window divided by the error budget (1 - target): 1 ends the period exactly at target. "
        "A pair fires when both its windows pass its factor (1h and 5m above 6x, 6h and 30m above 2x: alert "
        "EdgeHitRatioBurn).",
        [
            (
                'max by (route_group, window_secs) (sidecar_edge_hit_ratio_burn_rate{instance=~"$instance"})',
                "{{route_group}} {{window_secs}}s",
            )
        ],
        unit="short",
        needs="edge",
        w=12,
    )
    b.timeseries(
        "Hit ratio by route group and node",
        "Hits over requests in the ratio (statuses in edge.series.excluded_statuses are left out), per route "
        "group and edge node. One node low: a cold or restarted point of presence; every node: a purge or a change "
        "of cache keys.",
        [
            (
                f'sum by (route_group, edge_node) (rate(sidecar_edge_requests_total{{{SEL}, cache="hit"}}{RATE})) / '
                f'sum by (route_group, edge_node) (rate(sidecar_edge_requests_total{{{SEL}, cache!="none"}}{RATE}))',
                "{{route_group}} {{edge_node}}",
            )
        ],
        unit="percentunit",
        needs="edge",
        max1=True,
    )
    b.row("Traffic and origin")
    b.timeseries(
        "Requests by cache result and status class",
        "Edge requests per second by cache result (hit, miss, none) and status class.",
        [
            (
                f"sum by (cache, status_class) (rate(sidecar_edge_requests_total{{{SEL}}}{RATE}))",
                "{{cache}} {{status_class}}",
            )
        ],
        unit="reqps",
        needs="edge",
    )
    b.timeseries(
        "Origin offload",
        "Share of requests the edge answered without the origin: 1 - origin requests / all requests. A drop "
        "loads the model servers behind the edge.",
        [
            (
                f"1 - sum by (route_group) (rate(sidecar_edge_origin_requests_total{{{SEL}}}{RATE})) / "
                f"sum by (route_group) (rate(sidecar_edge_requests_total{{{SEL}}}{RATE}))",
                "{{route_group}}",
            )
        ],
        unit="percentunit",
        needs="edge",
        max1=True,
    )
    b.row("Latency")
    b.timeseries(
        "Edge and origin latency p50 / p99 / p99.9",
        "Quantiles per hop over edge.series.quantile_window_secs, from the sidecar's sketches (1% relative "
        "error). A p99.9 rising while p99 falls is the tail check's case (alert EdgeTailLatency).",
        [
            (
                f"max by (route_group, hop, quantile) (sidecar_edge_latency_quantile_seconds{{{SEL}}})",
                "{{route_group}} {{hop}} q{{quantile}}",
            )
        ],
        unit="s",
        needs="edge",
        w=24,
    )
    b.timeseries(
        "p99 by edge node",
        "The edge hop's p99 per node from the exported histograms (histogram_quantile over the rate window).",
        [
            (
                "histogram_quantile(0.99, sum by (edge_node, le) (rate(sidecar_edge_latency_seconds_bucket{"
                f'{SEL}, hop="edge"}}{RATE})))',
                "{{edge_node}}",
            )
        ],
        unit="s",
        needs="edge",
    )
    b.timeseries(
        "Lines refused and series dropped",
        "Edge log lines refused at the door by reason, and records folded or dropped by the processor's bounds.",
        [
            (
                f'sum by (source, reason) (rate(sidecar_edge_lines_rejected_total{{instance=~"$instance"}}{RATE}))',
                "refused {{source}} {{reason}}",
            ),
            (
                f'sum by (reason) (rate(sidecar_edge_series_dropped_total{{instance=~"$instance"}}{RATE}))',
                "dropped {{reason}}",
            ),
        ],
        unit="ops",
        needs="edge",
    )
    return b


def build() -> Dashboard:
    return board().build()
