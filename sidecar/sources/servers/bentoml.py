"""BentoML's API server (``bentoml serve``, /metrics).

Names, types and labels read from bentoml/BentoML ``src/bentoml/_internal/server/http/instruments.py`` at commit
32230a5276a8da8b23c4a06a9ec6272c1993451a (``HTTPTrafficMetricsMiddleware``, namespace ``bentoml_api_server``):
``request_total`` and ``request_duration_seconds`` labelled ``endpoint``, ``service_name``, ``service_version``,
``http_response_code``, and ``request_in_progress``. The service is the model, its version the version; a status
2xx/3xx is a success, 499 an abort, 4xx/5xx a failure. The probe and metrics routes (/healthz, /livez, /readyz,
/metrics) are counted by BentoML too and skipped here.
"""

from __future__ import annotations

from sidecar.sources.servers.profile import REQUESTS, Profile, Rule
from sidecar.sources.servers.schema import DistName, Gauge

__all__ = ["PROFILE"]

_PROBES = (("endpoint", "/healthz"), ("endpoint", "/livez"), ("endpoint", "/readyz"), ("endpoint", "/metrics"))

PROFILE = Profile(
    name="bentoml",
    rules=(
        Rule("bentoml_api_server_request", "counter", REQUESTS, http_status_label="http_response_code", skip=_PROBES),
        Rule("bentoml_api_server_request_duration_seconds", "histogram", DistName.REQUEST_DURATION, skip=_PROBES),
        Rule("bentoml_api_server_request_in_progress", "gauge", Gauge.IN_FLIGHT, skip=_PROBES),
    ),
    model_label="service_name",
    version_label="service_version",
    source="bentoml/BentoML src/bentoml/_internal/server/http/instruments.py@32230a5276a8da8b23c4a06a9ec6272c1993451a",
)
