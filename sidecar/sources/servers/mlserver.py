"""Seldon MLServer (its metrics server, ``/metrics`` on ``metrics_port``).

Names, types and labels read from SeldonIO/MLServer ``mlserver/handlers/dataplane.py`` at commit
a325e523b5a580d49aeb06e19e73e4a90176b63b: ``model_infer_request_success`` and ``model_infer_request_failure``
(prometheus_client counters) and ``model_infer_request_duration`` (a prometheus_client Summary, so a sum and a
count in seconds and no quantiles), each labelled ``model`` and ``version``. MLServer's queue and batch
histograms carry no model label and are not mapped.

Held against a real MLServer 1.7.1 (tests/sources/servers/test_mlserver_live.py), which differs from what the
source suggests in one way: a request that names no version (``/v2/models/{name}/infer``) is labelled
``version="None"`` (Python's ``None`` made a string by prometheus_client); it is read as no version (""). A body
that fails validation (422) never reaches the data plane and is counted in none of these families; a request
for an unknown model is a failure of a series named after it (bounded here by ``max_models``).
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
    unversioned="None",
    source="SeldonIO/MLServer mlserver/handlers/dataplane.py@a325e523b5a580d49aeb06e19e73e4a90176b63b",
)
