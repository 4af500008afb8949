"""Which module writes the text of which finding kind (one line per kind)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from sidecar.alerting.render import batching, business, canary, cold_start, diagnosis, drift, output_sanity
from sidecar.model import Finding

RENDERERS: Mapping[str, Callable[[Finding], tuple[str, str]]] = MappingProxyType(
    {
        "advice": batching.render,
        "business": business.render,
        "canary": canary.render,
        "cold_start": cold_start.render,
        "diagnosis": diagnosis.render,
        "drift": drift.render,
        "output_sanity": output_sanity.render,
    }
)
