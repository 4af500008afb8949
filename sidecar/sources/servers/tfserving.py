"""TensorFlow Serving (``--monitoring_config_file`` with ``prometheus_config { enable: true }``).

Names, types, units and labels read from tensorflow/serving at commit 9d981c5c2708d23c5407c7c1e30309e6f9798874:
``tensorflow_serving/servables/tensorflow/util.cc`` (``/tensorflow/serving/request_count`` by ``model_name`` and
``status``; ``request_latency`` by ``model_name``, ``API``, ``entrypoint`` and ``runtime_latency`` by
``model_name``, ``API``, ``runtime``: samplers in microseconds) and ``tensorflow_serving/util/
prometheus_exporter.cc`` (names with every character outside ``[a-zA-Z0-9_]`` written as ``:``, so
``:tensorflow:serving:request_count``; counters ``counter``, samplers ``histogram``). A status of OK is a success,
CANCELLED an abort, any other canonical code a failure. TF Serving labels no version on these families: "".
The batching histograms carry no model label and are not mapped.
"""

from __future__ import annotations

from types import MappingProxyType

from sidecar.sources.servers.profile import REQUESTS, US, Profile, Rule
from sidecar.sources.servers.schema import DistName

__all__ = ["PROFILE"]

_STATUS = MappingProxyType({"OK": "success", "CANCELLED": "aborted"})

PROFILE = Profile(
    name="tfserving",
    rules=(
        Rule(
            ":tensorflow:serving:request_count",
            "counter",
            REQUESTS,
            outcome="failure",
            outcome_label="status",
            outcomes=_STATUS,
        ),
        Rule(":tensorflow:serving:request_latency", "histogram", DistName.REQUEST_DURATION, scale=US),
        Rule(":tensorflow:serving:runtime_latency", "histogram", DistName.COMPUTE_DURATION, scale=US),
    ),
    model_label="model_name",
    version_label=None,
    source="tensorflow/serving tensorflow_serving/servables/tensorflow/util.cc"
    "@9d981c5c2708d23c5407c7c1e30309e6f9798874",
)
