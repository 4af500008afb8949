"""Ray Serve (the replicas' metrics through Ray's Prometheus exporter).

Names and types read from ray-project/ray ``python/ray/serve/_private/replica.py`` at commit
007a8014db4844dec8b879b5f8e344a1e9435f7a (``serve_deployment_request_counter``,
``serve_deployment_error_counter``, ``serve_deployment_processing_latency_ms`` with ``DEFAULT_LATENCY_BUCKET_MS``,
``serve_replica_processing_queries``); ``python/ray/serve/metrics.py`` adds the ``deployment``, ``replica`` and
``application`` tags, and Ray's metrics agent exports them under the ``ray`` namespace (``ray_serve_...``; the
stored version of that agent gives no commit). The deployment is the model; replicas are summed. The request
counter counts every processed query, errors included, so successes are what the error counter leaves.
"""

from __future__ import annotations

from sidecar.sources.servers.profile import ALL, MS, REQUESTS, Profile, Rule
from sidecar.sources.servers.schema import DistName, Gauge

__all__ = ["PROFILE"]

PROFILE = Profile(
    name="rayserve",
    rules=(
        Rule("ray_serve_deployment_request_counter", "counter", REQUESTS, outcome=ALL),
        Rule("ray_serve_deployment_error_counter", "counter", REQUESTS, outcome="failure"),
        Rule("ray_serve_deployment_processing_latency_ms", "histogram", DistName.COMPUTE_DURATION, scale=MS),
        Rule("ray_serve_replica_processing_queries", "gauge", Gauge.IN_FLIGHT),
    ),
    model_label="deployment",
    version_label=None,
    source="ray-project/ray python/ray/serve/_private/replica.py@007a8014db4844dec8b879b5f8e344a1e9435f7a",
)
