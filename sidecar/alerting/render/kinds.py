"""Which module writes the text of which finding kind (one line per kind)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from sidecar.alerting.render import batching, business, cold_start, drift
from sidecar.model import Finding

RENDERERS: Mapping[str, Callable[[Finding], tuple[str, str]]] = MappingProxyType({
    "advice": batching.render,
    "business": business.render,
    "cold_start": cold_start.render,
    "drift": drift.render,
})
