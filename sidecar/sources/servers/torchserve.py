"""TorchServe (the metrics API, port 8082, /metrics).

Names, types, units and labels read from pytorch/serve ``ts/configs/metrics.yaml`` at commit
62c4d6a1fdc1d071dbcf758ebd756029af20bd5e (``ts_inference_requests_total``, ``ts_inference_latency_microseconds``,
``ts_queue_latency_microseconds``: counters labelled ``model_name``, ``model_version``, ``hostname``) and the
frontend's ``PrometheusCounter.java`` (Prometheus simpleclient counters). ``ts_inference_requests_total`` counts
requests received, not by outcome: it is reported as outcome ``other``, and TorchServe gives no error ratio here.
Latency and queue time are averages (cumulative microseconds over requests).

Held against a real TorchServe 0.12.0 (tests/sources/servers/test_torchserve_live.py, metrics_mode=prometheus):
``ts_inference_requests_total`` counts every request a worker answered, a handler's failure (503) included, and
not one for an unknown model (404); the per-model error count exists only host-wide (``Requests5XX``, no model
label), so none is read. A request that names no version is labelled ``model_version="default"`` (one that
names it, its version): read as no version (""). The frontend writes ``{...,hostname="vm",}`` (a trailing comma)
and declares the families before their first sample.
"""

from __future__ import annotations

from sidecar.sources.servers.profile import REQUESTS, US, Profile, Rule
from sidecar.sources.servers.schema import DistName

__all__ = ["PROFILE"]

_E2E, _QUEUE = DistName.REQUEST_DURATION, DistName.QUEUE_DURATION

PROFILE = Profile(
    name="torchserve",
    rules=(
        Rule("ts_inference_requests", "counter", REQUESTS, outcome="other"),
        Rule("ts_inference_requests", "counter", _E2E, part="count"),
        Rule("ts_inference_requests", "counter", _QUEUE, part="count"),
        Rule("ts_inference_latency_microseconds", "counter", _E2E, part="sum", scale=US),
        Rule("ts_queue_latency_microseconds", "counter", _QUEUE, part="sum", scale=US),
    ),
    model_label="model_name",
    version_label="model_version",
    unversioned="default",
    source="pytorch/serve ts/configs/metrics.yaml@62c4d6a1fdc1d071dbcf758ebd756029af20bd5e",
)
