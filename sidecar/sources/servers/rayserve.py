"""Ray Serve (the replicas' metrics through Ray's Prometheus exporter, ``--metrics-export-port``).

Names and types read from ray-project/ray ``python/ray/serve/_private/replica.py`` at commit
007a8014db4844dec8b879b5f8e344a1e9435f7a (``serve_deployment_request_counter``,
``serve_deployment_error_counter``, ``serve_deployment_processing_latency_ms`` with ``DEFAULT_LATENCY_BUCKET_MS``,
``serve_replica_processing_queries``); ``python/ray/serve/metrics.py`` adds the ``deployment``, ``replica`` and
``application`` tags, and Ray's metrics agent exports them under the ``ray`` namespace (``ray_serve_...``). The
deployment is the model; replicas are summed.

The request counter counts successful queries only: the replica increments it after the user's call returned,
and the error counter in its ``except`` (so at that commit already, and in Ray 2.60.0's ``record_request_metrics``:
one or the other). The first reading of it, as every processed query with successes what the errors leave, was
wrong; a real Ray Serve 2.60.0 (tests/sources/servers/test_rayserve_live.py) showed 1 request and 1 error
counted for one good and one failed query. 2.60.0 exports through OpenTelemetry: every sample also carries
``Component``, ``NodeAddress``, ``SessionName``, ``Version``, ``WorkerId`` and ``otel_scope_*`` labels, and
counters are written with ``_total``; the error counter has an ``exception_type`` label.

``ray_serve_deployment_queued_queries`` (``python/ray/serve/_private/router.py`` in 2.60.0: "queries to this
deployment waiting to be assigned to a replica", per handle, summed) is the waiting gauge, and the family that
identifies Ray Serve before its first request: the replica's families are exported only once the metrics agent has
its first report from the replica (``ray_serve_replica_processing_queries``, after ``serve.run`` returned in one run
of two) or after the first request (the request and error counters, the latency histogram), while the router's
gauge was exported before ``serve.run`` returned in both runs. Without it an exposition scraped in that window (129
families, a fresh-clone CI run) matched no profile.
"""

from __future__ import annotations

from sidecar.sources.servers.profile import MS, REQUESTS, Profile, Rule
from sidecar.sources.servers.schema import DistName, Gauge

__all__ = ["PROFILE"]

PROFILE = Profile(
    name="rayserve",
    rules=(
        Rule("ray_serve_deployment_request_counter", "counter", REQUESTS, outcome="success"),
        Rule("ray_serve_deployment_error_counter", "counter", REQUESTS, outcome="failure"),
        Rule("ray_serve_deployment_processing_latency_ms", "histogram", DistName.COMPUTE_DURATION, scale=MS),
        Rule("ray_serve_replica_processing_queries", "gauge", Gauge.IN_FLIGHT),
        Rule("ray_serve_deployment_queued_queries", "gauge", Gauge.WAITING),
    ),
    model_label="deployment",
    version_label=None,
    source="ray-project/ray python/ray/serve/_private/replica.py@007a8014db4844dec8b879b5f8e344a1e9435f7a",
)
