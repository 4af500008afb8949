"""BentoML's API server (``bentoml serve``, /metrics).

Two sets of names, one per kind of service, both mapped:

- A 1.2+ service (``@bentoml.service``, the kind BentoML's docs now show): ``RunnerTrafficMetricsMiddleware``
  with the namespace ``bentoml_service`` (``api_server.metrics.namespace`` in BentoML's configuration), read from
  the bentoml 1.4.40 wheel ``_bentoml_impl/server/app.py`` and ``bentoml/_internal/server/http/instruments.py``
  and held against a real BentoML 1.4.40 (tests/sources/servers/test_bentoml_live.py):
  ``bentoml_service_request_total``, ``bentoml_service_request_duration_seconds``,
  ``bentoml_service_request_in_progress``, labelled ``endpoint``, ``service_name``, ``service_version``,
  ``http_response_code`` and ``runner_name``. A service served from its source, not a built bento, has
  ``service_version="not available"``: read as no version.
- A legacy ``bentoml.Service``: ``HTTPTrafficMetricsMiddleware``, namespace ``bentoml_api_server``, read from
  bentoml/BentoML ``src/bentoml/_internal/server/http/instruments.py`` at commit
  32230a5276a8da8b23c4a06a9ec6272c1993451a (fixture only: tests/data/servers/bentoml.prom).

The fixture of the legacy names was all the profile knew before the real server ran: a real 1.4 service matched
none of it. The pairs are renames (a service moved to the new API is read once, from the new names, and the
upgrade guard names the pair). The service is the model; a status 2xx/3xx is a success, 499 an abort, 4xx/5xx a
failure (a body that fails BentoML's validation is a 400 and counted: it passed through the middleware). The
probe and metrics routes (/healthz, /livez, /readyz, /metrics) are counted by BentoML too and skipped here.
"""

from __future__ import annotations

from sidecar.sources.servers.profile import REQUESTS, Profile, Rule
from sidecar.sources.servers.schema import DistName, Gauge

__all__ = ["PROFILE"]

_PROBES = (("endpoint", "/healthz"), ("endpoint", "/livez"), ("endpoint", "/readyz"), ("endpoint", "/metrics"))
_OLD, _NEW = "bentoml_api_server_request", "bentoml_service_request"


def _rules(prefix: str) -> tuple[Rule, ...]:
    return (
        Rule(prefix, "counter", REQUESTS, http_status_label="http_response_code", skip=_PROBES),
        Rule(prefix + "_duration_seconds", "histogram", DistName.REQUEST_DURATION, skip=_PROBES),
        Rule(prefix + "_in_progress", "gauge", Gauge.IN_FLIGHT, skip=_PROBES),
    )


PROFILE = Profile(
    name="bentoml",
    rules=(*_rules(_NEW), *_rules(_OLD)),
    model_label="service_name",
    version_label="service_version",
    unversioned="not available",
    renames=tuple((_OLD + s, _NEW + s) for s in ("", "_duration_seconds", "_in_progress")),
    source="bentoml 1.4.40 _bentoml_impl/server/app.py (namespace bentoml_service); bentoml/BentoML "
    "src/bentoml/_internal/server/http/instruments.py@32230a5276a8da8b23c4a06a9ec6272c1993451a",
)
