"""Seldon MLServer (its metrics server, ``/metrics`` on ``metrics_port``).

Names, types and labels read from SeldonIO/MLServer ``mlserver/handlers/dataplane.py`` at commit
a325e523b5a580d49aeb06e19e73e4a90176b63b: ``model_infer_request_success`` and ``model_infer_request_failure``
(prometheus_client counters) and ``model_infer_request_duration`` (a prometheus_client Summary, so a sum and a
count in seconds and no quantiles), each labelled ``model`` and ``version``. MLServer's queue and batch
histograms carry no model label and are not mapped.
"""

from __future__ import annotations

from sidecar.sources.servers.profile import REQUESTS, Profile, Rule
from sidecar.sources.servers.schema import DistName

__all__ = ["PROFILE"]

PROFILE = Profile(
    name="mlserver",
    rules=(
        Rule("model_infer_request_success", "counter", REQUESTS, outcome="success"),
        Rule("model_infer_request_failure", "counter", REQUESTS, outcome="failure"),
        Rule("model_infer_request_duration", "summary", DistName.REQUEST_DURATION),
    ),
    source="SeldonIO/MLServer mlserver/handlers/dataplane.py@a325e523b5a580d49aeb06e19e73e4a90176b63b",
)
