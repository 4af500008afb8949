"""KServe's Python model server (``kserve.ModelServer``, /metrics).

Names, types and labels read from kserve/kserve ``python/kserve/kserve/metrics.py`` at commit
40efa16cdadf5f74380db5365e80665dfe3694be: ``request_preprocess_seconds``, ``request_predict_seconds``,
``request_postprocess_seconds`` and ``request_explain_seconds``, prometheus_client histograms (default buckets)
labelled ``model_name``. The predict step is the compute time; KServe's Python server counts no requests by
outcome in these families, so no request or error figures come from it.
"""

from __future__ import annotations

from sidecar.sources.servers.profile import Profile, Rule
from sidecar.sources.servers.schema import DistName

__all__ = ["PROFILE"]

PROFILE = Profile(
    name="kserve",
    rules=(Rule("request_predict_seconds", "histogram", DistName.COMPUTE_DURATION),),
    model_label="model_name",
    version_label=None,
    source="kserve/kserve python/kserve/kserve/metrics.py@40efa16cdadf5f74380db5365e80665dfe3694be",
)
