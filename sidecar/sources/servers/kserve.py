"""KServe's Python model server (``kserve.ModelServer``, /metrics on its HTTP port).

Names, types and labels read from kserve/kserve ``python/kserve/kserve/metrics.py`` at commit
40efa16cdadf5f74380db5365e80665dfe3694be: ``request_preprocess_seconds``, ``request_predict_seconds``,
``request_postprocess_seconds`` and ``request_explain_seconds``, prometheus_client histograms (default buckets)
labelled ``model_name``. The predict step is the compute time.

Held against a real KServe 0.21.0 (tests/sources/servers/test_kserve_live.py): KServe counts no requests by
outcome, but ``Model.__call__`` times ``predict`` with ``Histogram.time()``, which observes on an exception too,
so the predict histogram's count is every request that reached ``predict``, failed or not: it is read as
requests of outcome ``other`` (received, not by outcome: no error ratio). A request for an unknown model (404)
never reaches a model and is counted nowhere. Before its first request the server writes the families' ``# TYPE``
lines and no series (read with 0 models).
"""

from __future__ import annotations

from sidecar.sources.servers.profile import REQUESTS, Profile, Rule
from sidecar.sources.servers.schema import DistName

__all__ = ["PROFILE"]

PROFILE = Profile(
    name="kserve",
    rules=(
        Rule("request_predict_seconds", "histogram", DistName.COMPUTE_DURATION),
        Rule("request_predict_seconds", "histogram", REQUESTS, part="count", outcome="other"),
    ),
    model_label="model_name",
    version_label=None,
    source="kserve/kserve python/kserve/kserve/metrics.py@40efa16cdadf5f74380db5365e80665dfe3694be",
)
