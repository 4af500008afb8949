"""The line of goodput on ``/``: each (model, version)'s good share against the objective, and which burn, read
from the goodput check's gauges (the page needs no handle on it); the words are ``render/goodput.py``'s."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from sidecar.alerting.render.goodput import line_text

__all__ = ["goodput_line"]

_FAMILIES = {"sidecar_goodput_ratio", "sidecar_goodput_objective", "sidecar_goodput_condition"}
# A server's per-request latency histograms (servers:): goodput from them is only a bound from bucket edges.
_HISTOGRAMS = {
    "sidecar_serving_gen_ai_server_time_to_first_token_seconds",
    "sidecar_serving_gen_ai_server_time_per_output_token_seconds",
}
_MAX_PARTS = 12  # bounded: the alerts page lists everything


def goodput_line(registry: CollectorRegistry) -> str | None:
    """None when the goodput check does not run; otherwise ``render.goodput.line_text``'s line."""
    seen = False
    objective: float | None = None
    ratio: dict[tuple[str, str], dict[float, float]] = {}  # (model, version) -> {window: ratio}
    burning: set[tuple[str, str]] = set()
    histogram_only: set[tuple[str, str]] = set()  # (server, model) with latency histograms
    for family in registry.collect():
        if family.name in _HISTOGRAMS:
            histogram_only.update((s.labels.get("server", ""), s.labels.get("model", "")) for s in family.samples)
            continue
        if family.name not in _FAMILIES:
            continue
        seen = True
        for s in family.samples:
            key = (s.labels.get("model", ""), s.labels.get("version", ""))
            if family.name == "sidecar_goodput_objective":
                objective = s.value
            elif family.name == "sidecar_goodput_condition" and s.value == 1:
                burning.add(key)
            elif family.name == "sidecar_goodput_ratio":
                ratio.setdefault(key, {})[float(s.labels.get("window_secs", "0"))] = s.value
    if not seen:
        return None
    return line_text(objective, ratio, burning, histogram_only, _MAX_PARTS)
